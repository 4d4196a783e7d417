//! Incomplete factorizations with a complex element type, on the CPU: ILU(0) against a dense
//! elimination restricted to the pattern, its triangular solves against dense substitution,
//! IC(0) of a Hermitian matrix (`A ≈ L·Lᴴ`), and GMRES and BiCGSTAB with the `Ilu0`
//! preconditioner on the shifted Helmholtz problem and young1c (fewer iterations than
//! unpreconditioned, the true residual checked).

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{Cpu, Identity};
use segsparse::precond::{Ic0, Ilu0, IncompleteParams};
use segsparse::solvers::{bicgstab, gmres, pcocg, SolveParams};
use segsparse::sparse::incomplete::{FactorKind, IncompleteFactor};
use segsparse::spmv::spmv;
use segsparse::{generate, io, Complex, CsrMatrix, Elem};

type C64 = Complex<f64>;
type C32 = Complex<f32>;

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

pub(crate) fn young1c() -> PathBuf {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("matrices/young1c.mtx.gz");
    if m.exists() {
        m
    } else {
        Path::new("matrices/young1c.mtx.gz").to_path_buf()
    }
}

/// A random square complex matrix with a full diagonal, about `k` off-diagonal entries per row
/// (unsymmetric pattern), and a diagonal of modulus `dominance` times the row's off-diagonal sum
/// (below 1: not diagonally dominant, the factor's pivots then vary widely).
fn random_square<T: Elem>(n: usize, k: usize, dominance: f64, seed: u64) -> CsrMatrix<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    let mut sum = vec![0.0; n];
    for (i, s) in sum.iter_mut().enumerate() {
        for _ in 0..rng.gen_range(0..=2 * k) {
            let j = rng.gen_range(0..n);
            if j != i {
                let v = c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
                *s += v.norm();
                t.push((i, j, T::narrow(v)));
            }
        }
    }
    for (i, s) in sum.iter().enumerate() {
        let phase = rng.gen_range(0.0..std::f64::consts::TAU);
        let m = dominance * s + 0.5;
        t.push((i, i, T::narrow(C64::from_polar(m, phase))));
    }
    // Duplicates are summed by the builder: the pattern is the union.
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// ILU(0) by dense elimination (IKJ) where only the positions stored in `a` are updated: the
/// factor the sparse code must produce, in `Complex<f64>`.
fn dense_ilu0<T: Elem>(a: &CsrMatrix<T>) -> Vec<Vec<C64>> {
    let n = a.nrows();
    let mut m: Vec<Vec<C64>> = a
        .to_dense()
        .iter()
        .map(|r| r.iter().map(|v| v.widen()).collect())
        .collect();
    let stored: Vec<Vec<bool>> = (0..n)
        .map(|i| {
            let mut s = vec![false; n];
            for &j in a.row(i).0 {
                s[j as usize] = true;
            }
            s
        })
        .collect();
    for i in 0..n {
        for k in 0..i {
            if !stored[i][k] {
                continue;
            }
            let l = m[i][k] / m[k][k];
            m[i][k] = l;
            for j in k + 1..n {
                if stored[i][j] && stored[k][j] {
                    let u = m[k][j];
                    m[i][j] -= l * u;
                }
            }
        }
    }
    m
}

fn max_abs(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(0.0, f64::max)
}

fn check_ilu0<T: Elem>(a: &CsrMatrix<T>, tol: f64, what: &str) {
    let n = a.nrows();
    let f = IncompleteFactor::new(a, FactorKind::Ilu0, &IncompleteParams::default())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = dense_ilu0(a);
    let got = f.matrix();
    assert_eq!(
        got.row_ptr(),
        a.row_ptr(),
        "{what}: the factor keeps A's pattern"
    );
    let scale = max_abs(want.iter().flatten().map(|z| z.norm())).max(1.0);
    let mut err = 0.0f64;
    for (i, want_row) in want.iter().enumerate().take(n) {
        let (cols, vals) = got.row(i);
        for (&j, v) in cols.iter().zip(vals) {
            err = err.max((v.widen() - want_row[j as usize]).norm());
        }
    }
    assert!(
        err <= tol * scale,
        "{what}: factor error {err:e} (scale {scale:e})"
    );
    // (L·U)ᵢⱼ = aᵢⱼ at every stored position, in exact arithmetic.
    let (l, u) = (f.lower_matrix().to_dense(), f.upper_matrix().to_dense());
    let dense_a = a.to_dense();
    for i in 0..n {
        for &j in a.row(i).0 {
            let j = j as usize;
            let lu: C64 = (0..n).map(|k| l[i][k].widen() * u[k][j].widen()).sum();
            let d = (lu - dense_a[i][j].widen()).norm();
            assert!(d <= tol * scale, "{what}: (LU)[{i}][{j}] off by {d:e}");
        }
    }
    // The two solves against dense substitution: L·t = b, U·z = t.
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64 + 7);
    let b: Vec<T> = (0..n)
        .map(|_| T::narrow(c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0))))
        .collect();
    let (mut t, mut z) = (vec![T::zero(); n], vec![T::zero(); n]);
    f.lower_solve(&b, &mut t);
    f.upper_solve(&t, &mut z);
    let mut tw = vec![C64::new(0.0, 0.0); n];
    for i in 0..n {
        let s: C64 = (0..i).map(|k| want[i][k] * tw[k]).sum();
        tw[i] = b[i].widen() - s;
    }
    let mut zw = vec![C64::new(0.0, 0.0); n];
    for i in (0..n).rev() {
        let s: C64 = (i + 1..n)
            .filter(|&k| want[i][k] != C64::new(0.0, 0.0))
            .map(|k| want[i][k] * zw[k])
            .sum();
        zw[i] = (tw[i] - s) / want[i][i];
    }
    let zs = max_abs(zw.iter().map(|z| z.norm())).max(1.0);
    let e = max_abs(z.iter().zip(&zw).map(|(g, w)| (g.widen() - w).norm()));
    assert!(
        e <= tol * 1e2 * zs,
        "{what}: U⁻¹L⁻¹b off by {e:e} (scale {zs:e})"
    );
}

#[test]
fn complex_ilu0_matches_a_dense_elimination_on_the_pattern() {
    for (n, k, dom, seed) in [
        (1, 0, 1.0, 1),
        (2, 1, 1.0, 2),
        (7, 2, 0.3, 3),
        (25, 3, 1.2, 4),
        (60, 4, 0.6, 5),
    ] {
        let a: CsrMatrix<C64> = random_square(n, k, dom, seed);
        check_ilu0(&a, 1e-11, &format!("c128 n={n} seed={seed}"));
        let a: CsrMatrix<C32> = random_square(n, k, dom, seed);
        check_ilu0(&a, 2e-4, &format!("c64 n={n} seed={seed}"));
    }
    let h: CsrMatrix<C64> = generate::from_spec("helmholtz3d:4:3:0.5", 0).unwrap();
    check_ilu0(&h, 1e-11, "helmholtz3d:4:3:0.5");
    // A complex symmetric matrix gives U = D·Lᵀ: M = L·D·Lᵀ is complex symmetric too.
    let f = IncompleteFactor::new(&h, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
    let (l, u) = (f.lower_matrix().to_dense(), f.upper_matrix().to_dense());
    for i in 0..h.nrows() {
        for j in 0..i {
            let d = u[j][j] * l[i][j] - u[j][i];
            assert!(d.norm() <= 1e-12, "U ≠ D·Lᵀ at ({j}, {i})");
        }
    }
}

#[test]
fn complex_ilu0_pivots_and_shift() {
    // A zero pivot is refused naming its row; the automatic shift cures it.
    let a = CsrMatrix::from_triplets(
        2,
        2,
        &[
            (0, 0, c(1.0, 1.0)),
            (0, 1, c(1.0, 0.0)),
            (1, 0, c(0.0, 1.0)),
            (1, 1, c(-1.0, 1.0)),
        ],
    )
    .unwrap();
    // u₁₁ = (−1 + i) − i·1/(1 + i) = (−1 + i) − (1 + i)/2 ≠ 0; make it vanish instead:
    // a₁₁ = a₁₀·a₀₁/a₀₀ = i/(1 + i) = (1 + i)/2.
    let mut t = vec![
        (0, 0, c(1.0, 1.0)),
        (0, 1, c(1.0, 0.0)),
        (1, 0, c(0.0, 1.0)),
        (1, 1, c(0.5, 0.5)),
    ];
    let singular = CsrMatrix::from_triplets(2, 2, &t).unwrap();
    let e = IncompleteFactor::new(&singular, FactorKind::Ilu0, &IncompleteParams::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("row 1") && e.contains("shift"), "{e}");
    let shifted = IncompleteFactor::new(
        &singular,
        FactorKind::Ilu0,
        &IncompleteParams {
            auto_shift: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(shifted.shift_used() > 0.0);
    // The shift moves a complex diagonal along its own direction: a₀₀ = 1 + i keeps its phase.
    let d0 = shifted.values()[0];
    assert!((d0.arg() - std::f64::consts::FRAC_PI_4).abs() <= 1e-12 && d0.norm() > 2f64.sqrt());
    // A non-finite entry is a bad pivot, not a NaN factor.
    t[0].2 = c(f64::NAN, 0.0);
    let nan = CsrMatrix::from_triplets(2, 2, &t).unwrap();
    assert!(IncompleteFactor::new(&nan, FactorKind::Ilu0, &IncompleteParams::default()).is_err());
    assert!(IncompleteFactor::new(&a, FactorKind::Ilu0, &IncompleteParams::default()).is_ok());
}

#[test]
fn complex_ic0_of_a_hermitian_matrix_is_l_lh_on_the_pattern() {
    // Hermitian, diagonally dominant: L·Lᴴ agrees with A on the lower pattern, L's diagonal
    // is real and positive.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 30;
    let mut t = Vec::new();
    let mut sum = vec![0.0; n];
    for i in 0..n {
        for _ in 0..3 {
            let j = rng.gen_range(0..n);
            if j != i {
                let v = c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
                t.push((i, j, v));
                t.push((j, i, v.conj()));
                sum[i] += v.norm();
                sum[j] += v.norm();
            }
        }
    }
    for (i, s) in sum.iter().enumerate() {
        t.push((i, i, c(s + 1.0, 0.0)));
    }
    let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    assert!(a.is_hermitian());
    let f = IncompleteFactor::new(&a, FactorKind::Ic0, &IncompleteParams::default()).unwrap();
    let l = f.lower_matrix().to_dense();
    let lh = f.upper_matrix().to_dense();
    let ad = a.to_dense();
    for i in 0..n {
        assert!(l[i][i].im == 0.0 && l[i][i].re > 0.0);
        for j in 0..n {
            assert_eq!(lh[j][i], l[i][j].conj(), "the upper factor is Lᴴ");
        }
        for &j in a.row(i).0 {
            let j = j as usize;
            if j > i {
                continue;
            }
            let llh: C64 = (0..n).map(|k| l[i][k] * l[j][k].conj()).sum();
            assert!(
                (llh - ad[i][j]).norm() <= 1e-12 * (n as f64),
                "(LLᴴ)[{i}][{j}]"
            );
        }
    }
    // As a preconditioner: Hermitian positive definite, so preconditioned CG converges.
    let m = Ic0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
    let b: Vec<C64> = (0..n).map(|i| c(1.0, i as f64 / n as f64)).collect();
    let mut x = vec![c(0.0, 0.0); n];
    let p = SolveParams {
        rel_tol: 1e-10,
        max_iters: 200,
        ..Default::default()
    };
    segsparse::solvers::pcg(&Cpu, &a, &m, &b, &mut x, &p).unwrap();
    assert!(rel_residual(&a, &x, &b) <= 2e-10);
}

fn rel_residual<T: Elem>(a: &CsrMatrix<T>, x: &[T], b: &[T]) -> f64 {
    let mut r = b.to_vec();
    spmv(-T::one(), a, x, T::one(), &mut r);
    let norm = |v: &[T]| v.iter().map(|z| z.widen().norm_sqr()).sum::<f64>().sqrt();
    norm(&r) / norm(b)
}

/// GMRES(30) and BiCGSTAB with and without ILU(0): both converge to `tol` (true residual), and
/// the preconditioned solves take fewer iterations. Returns the four iteration counts.
fn solve_with_and_without<T: Elem>(a: &CsrMatrix<T>, tol: f64, what: &str) -> [usize; 4] {
    let n = a.nrows();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let b: Vec<T> = (0..n)
        .map(|_| T::narrow(c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0))))
        .collect();
    let p = SolveParams {
        rel_tol: tol,
        max_iters: 20_000,
        ..Default::default()
    };
    let m = Ilu0::new(&Cpu, a, &IncompleteParams::default()).unwrap();
    let run = |pre: bool, method: &str| {
        let mut x = vec![T::zero(); n];
        let info = match (method, pre) {
            ("gmres", false) => gmres(&Cpu, a, &Identity, &b, &mut x, 30, &p),
            ("gmres", true) => gmres(&Cpu, a, &m, &b, &mut x, 30, &p),
            (_, false) => bicgstab(&Cpu, a, &Identity, &b, &mut x, &p),
            (_, true) => bicgstab(&Cpu, a, &m, &b, &mut x, &p),
        }
        .unwrap_or_else(|e| panic!("{what} {method} ilu0={pre}: {e}"));
        let r = rel_residual(a, &x, &b);
        assert!(
            r <= 10.0 * tol,
            "{what} {method} ilu0={pre}: true residual {r:e}"
        );
        info.iterations
    };
    let its = [
        run(false, "gmres"),
        run(true, "gmres"),
        run(false, "bicgstab"),
        run(true, "bicgstab"),
    ];
    eprintln!(
        "{what}: GMRES(30) {} → {} with ILU(0), BiCGSTAB {} → {}",
        its[0], its[1], its[2], its[3]
    );
    assert!(its[1] < its[0], "{what}: GMRES {its:?}");
    assert!(its[3] < its[2], "{what}: BiCGSTAB {its:?}");
    its
}

#[test]
fn gmres_and_bicgstab_with_complex_ilu0_on_helmholtz3d_and_young1c() {
    let h: CsrMatrix<C64> = generate::from_spec("helmholtz3d:12:10:0.5", 0).unwrap();
    solve_with_and_without(&h, 1e-8, "helmholtz3d:12:10:0.5 c128");
    let h: CsrMatrix<C32> = generate::from_spec("helmholtz3d:12:10:0.5", 0).unwrap();
    solve_with_and_without(&h, 1e-4, "helmholtz3d:12:10:0.5 c64");
    let y: CsrMatrix<C64> = io::read_matrix_market(young1c()).unwrap();
    solve_with_and_without(&y, 1e-8, "young1c c128");
    // COCG with ILU(0) of a complex symmetric matrix (M = L·D·Lᵀ complex symmetric).
    let h: CsrMatrix<C64> = generate::from_spec("helmholtz3d:12:10:0.5", 0).unwrap();
    let m = Ilu0::new(&Cpu, &h, &IncompleteParams::default()).unwrap();
    let b = vec![c(1.0, 0.0); h.nrows()];
    let mut x = vec![c(0.0, 0.0); h.nrows()];
    let p = SolveParams {
        rel_tol: 1e-8,
        max_iters: 2000,
        ..Default::default()
    };
    let info = pcocg(&Cpu, &h, &m, &b, &mut x, &p).unwrap();
    let mut x0 = vec![c(0.0, 0.0); h.nrows()];
    let plain = pcocg(&Cpu, &h, &Identity, &b, &mut x0, &p).unwrap();
    assert!(rel_residual(&h, &x, &b) <= 1e-7);
    assert!(
        info.iterations < plain.iterations,
        "ILU(0)-COCG {} iterations, COCG {}",
        info.iterations,
        plain.iterations
    );
}

/// `sparse-solve --precision c64|c128`: young1c and the Helmholtz spec with each method and
/// preconditioner, the true residual of the written solution checked here, `auto`'s choice and
/// reason, the JSON report's shape, and the refused combinations with their messages.
#[test]
fn sparse_solve_complex_files_and_specs() {
    let Some(exe) = crate::common::cli::bin("sparse-solve", env!("CARGO_BIN_EXE_sparse-solve"))
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("segsparse-cli-complex-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(&exe)
            .args(args)
            .args(["--format", "json"])
            .output()
            .unwrap()
    };
    let young = young1c();
    let young = young.to_str().unwrap();
    let cases: &[(&str, &str, &str, &str)] = &[
        (young, "c128", "gmres", "ilu0"),
        (young, "c128", "bicgstab", "ilu0"),
        (young, "c64", "gmres", "jacobi"),
        ("helmholtz3d:10:8:0.5", "c128", "cocg", "none"),
        ("helmholtz3d:10:8:0.5", "c128", "cocg", "jacobi"),
        ("helmholtz3d:10:8:0.5", "c128", "gmres", "ilu0"),
        ("helmholtz3d:10:8:0.5", "c64", "bicgstab", "none"),
    ];
    for (i, &(m, p, method, pre)) in cases.iter().enumerate() {
        let xfile = dir.join(format!("x{i}.mtx"));
        let out = run(&[
            m,
            "--precision",
            p,
            "--method",
            method,
            "--precond",
            pre,
            "--backend",
            "cpu",
            "--rhs",
            "random",
            "--output",
            xfile.to_str().unwrap(),
        ]);
        let what = format!("{m} {p} {method} {pre}");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["precision"], p, "{what}: {v}");
        assert_eq!(
            (v["method"].as_str(), v["precond"].as_str()),
            (Some(method), Some(pre))
        );
        assert_eq!(v["converged"], true, "{what}: {v}");
        for k in [
            "n",
            "nnz",
            "iterations",
            "relative_residual",
            "setup_seconds",
            "solve_seconds",
        ] {
            assert!(
                v.get(k).is_some_and(|x| !x.is_null()),
                "{what}: {k} missing in {v}"
            );
        }
        assert_eq!(v["factor"].is_null(), pre != "ilu0", "{what}: {v}");
        // The written solution solves the system: recompute b the way --rhs random does and
        // check ‖b − A·x‖/‖b‖ against the tolerance.
        let tol = v["tolerance"].as_f64().unwrap();
        let check = |a: CsrMatrix<C64>| {
            let x: Vec<C64> = io::read_vector(&xfile).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let b: Vec<C64> = (0..a.nrows())
                .map(|_| {
                    let re = rng.gen_range(-1.0..1.0);
                    let im = rng.gen_range(-1.0..1.0);
                    let z = c(re, im);
                    match p {
                        "c64" => C32::narrow(z).widen(),
                        _ => z,
                    }
                })
                .collect();
            let a = match p {
                "c64" => {
                    let a32: CsrMatrix<C32> = segsparse::load(m, 1).unwrap();
                    let t: Vec<_> = (0..a32.nrows())
                        .flat_map(|i| {
                            let (cj, vj) = a32.row(i);
                            cj.iter()
                                .zip(vj)
                                .map(move |(&j, v)| (i, j as usize, v.widen()))
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    CsrMatrix::from_triplets(a32.nrows(), a32.ncols(), &t).unwrap()
                }
                _ => a,
            };
            rel_residual(&a, &x, &b)
        };
        let r = check(segsparse::load(m, 1).unwrap());
        assert!(
            r <= 10.0 * tol,
            "{what}: true residual {r:e}, tolerance {tol:e}"
        );
    }
    // auto: GMRES + ILU(0) for young1c (neither symmetric nor Hermitian), COCG + Jacobi for the
    // complex symmetric Helmholtz matrix; the reason says why.
    for (m, method, pre, why) in [
        (
            young,
            "gmres",
            "ilu0",
            "neither complex symmetric nor Hermitian",
        ),
        ("helmholtz3d:8:6:0.5", "cocg", "jacobi", "complex symmetric"),
    ] {
        let out = run(&[m, "--precision", "c128", "--backend", "cpu"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (v["method"].as_str(), v["precond"].as_str()),
            (Some(method), Some(pre))
        );
        let reason = v["auto"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(why), "{m}: {v}");
        assert!(v["auto"]["stats"].is_null());
    }
    // --backend auto: the GPU when a device works (every complex preconditioner runs there,
    // ILU(0) and IC(0) included), the CPU otherwise.
    let gpu_here = cfg!(feature = "cuda") && segsparse::gpu::Gpu::shared().is_ok();
    for (pre, on_gpu) in [("jacobi", gpu_here), ("ilu0", gpu_here)] {
        let out = run(&[
            "helmholtz3d:8:6:0.5",
            "--precision",
            "c128",
            "--method",
            "gmres",
            "--precond",
            pre,
            "--backend",
            "auto",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{pre}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let backend = v["backend"].as_str().unwrap_or_default();
        let want = if on_gpu { "gpu (" } else { "cpu (" };
        assert!(backend.starts_with(want), "{pre}: {v}");
        assert_eq!(v["converged"], true, "{pre}: {v}");
    }
    // Refused, with the reason, before any solve.
    for (args, msg) in [
        (
            vec![young, "--precision", "c128", "--precond", "amg"],
            "not available for complex",
        ),
        (
            vec![young, "--precision", "c128", "--precond", "poly"],
            "not available for complex",
        ),
        (
            vec![young, "--precision", "c128", "--gpus", "2"],
            "one device",
        ),
        (
            vec![young, "--precision", "c128", "--rhs-count", "3"],
            "one right-hand side",
        ),
        (vec![young, "--precision", "f64"], "holds complex values"),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
