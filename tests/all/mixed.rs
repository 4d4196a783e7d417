//! Values stored in f32 under f64 vectors (`spmv::mixed`, `spmv::gpu::mixed`,
//! `solvers::storage`): the mixed product against the f64 product of the rounded values and of
//! the exact ones; CG, BiCGSTAB and GMRES with f32 storage reaching the requested f64 true
//! residual on SPD and nonsymmetric matrices, within a few iterations of f64 storage; the
//! fallback to f64 storage on matrices built to defeat f32 (values beyond its range, a condition
//! number near 10¹²), with its sentence. Every case runs on the CPU; the GPU cases skip with a
//! notice without a device and fail instead under `SEGSPARSE_REQUIRE_GPU=1`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{Cpu, Identity, LinearOperator, VectorOps};
use segsparse::precond::Jacobi;
use segsparse::scalar::Storage;
use segsparse::solvers::storage::{solve_stored, StoredOperator};
use segsparse::solvers::{bicgstab, cg, gmres, pcg, SolveParams};
use segsparse::spmv::cpu::spmv_mixed;
use segsparse::spmv::mixed::{F32Fit, MixedCsr};
use segsparse::{generate, CsrMatrix};

/// `‖b − A·x‖ / ‖b‖` in f64 with the exact matrix, computed here (not by the solver).
pub(crate) fn true_rel(a: &CsrMatrix<f64>, b: &[f64], x: &[f64]) -> f64 {
    let mut ax = vec![0.0; a.nrows()];
    segsparse::spmv::cpu::spmv_seq(1.0, a, x, 0.0, &mut ax);
    let r: f64 = b.iter().zip(&ax).map(|(b, y)| (b - y).powi(2)).sum();
    let bb: f64 = b.iter().map(|v| v * v).sum();
    (r / bb).sqrt()
}

pub(crate) fn random_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

/// A random square matrix with values that f32 rounds, empty rows and one long row.
fn random_matrix(n: usize, seed: u64) -> CsrMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for i in 0..n {
        if i % 17 == 5 {
            continue; // an empty row
        }
        let k = if i == 3 {
            n.min(9000)
        } else {
            rng.gen_range(1..12)
        };
        for _ in 0..k {
            t.push((i, rng.gen_range(0..n), rng.gen_range(-1.0..1.0) / 3.0));
        }
    }
    let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    a.sum_duplicates();
    a
}

/// The SPD matrices of the solve tests: values f32 rounds (anisotropic Q1, coefficient jumps of
/// 10⁴, a 1-D diffusion with thirds), and one whose values are exact in f32 (Poisson).
pub(crate) fn spd_cases() -> Vec<(&'static str, CsrMatrix<f64>)> {
    let mut diffusion = Vec::new();
    let n = 400;
    for i in 0..n {
        diffusion.push((i, i, 2.0 + 0.01 / 3.0));
        if i > 0 {
            diffusion.push((i, i - 1, -1.0 / 3.0 - 0.6));
        }
        if i + 1 < n {
            diffusion.push((i, i + 1, -1.0 / 3.0 - 0.6));
        }
    }
    vec![
        ("aniso2d:40:0.01", generate::aniso2d(40, 0.01).unwrap()),
        ("jumps3d:12", generate::jumps3d(12).unwrap()),
        (
            "diffusion1d",
            CsrMatrix::from_triplets(n, n, &diffusion).unwrap(),
        ),
        ("poisson3d:14", generate::poisson3d(14).unwrap()),
    ]
}

/// A convection–diffusion operator on an `m × m` grid with coefficients f32 rounds:
/// unsymmetric, diagonally dominant.
pub(crate) fn convection(m: usize, c: f64) -> CsrMatrix<f64> {
    crate::common::dist::convection(m, c)
}

/// Block diagonal with 2×2 blocks `[[1, 1 − δ], [1 − δ, 1]]`, `δ = 10⁻⁸`: SPD, condition
/// number 2·10⁸ (`2⁻²⁴·κ ≈ 12`), two distinct eigenvalues; `1 − δ` rounds to 1 in f32, so the
/// f32 matrix is singular and f32 storage cannot resolve the eigenvector of `δ`, which a
/// right-hand side `A·x` with a random `x` needs below a relative residual of about 10⁻⁸.
pub(crate) fn defeats_f32(blocks: usize) -> CsrMatrix<f64> {
    let off = 1.0 - 1e-8;
    let mut t = Vec::new();
    for k in 0..blocks {
        let (i, j) = (2 * k, 2 * k + 1);
        t.extend([(i, i, 1.0), (i, j, off), (j, i, off), (j, j, 1.0)]);
    }
    CsrMatrix::from_triplets(2 * blocks, 2 * blocks, &t).unwrap()
}

#[test]
fn fit_refuses_values_outside_f32_and_names_the_entry() {
    let big = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 1e39)]).unwrap();
    let e = F32Fit::of(&big).unwrap_err();
    assert!(e.contains("(1, 1)") && e.contains("range"), "{e}");
    let tiny = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 1e-40)]).unwrap();
    let e = F32Fit::of(&tiny).unwrap_err();
    assert!(e.contains("(0, 1)") && e.contains("smallest normal"), "{e}");
    let e = MixedCsr::new(&big).unwrap_err().to_string();
    assert!(e.contains("beyond f32's range"), "{e}");
}

#[test]
fn fit_tells_exact_values_from_rounded_ones() {
    let ints = generate::poisson2d::<f64>(8).unwrap();
    let f = F32Fit::of(&ints).unwrap();
    assert!(f.lossless && f.max_rel_rounding == 0.0);
    let m = MixedCsr::new(&ints).unwrap();
    assert!(m.exact().is_none() && m.is_lossless() && !m.is_narrowed());
    let third = CsrMatrix::from_triplets(1, 1, &[(0, 0, 1.0 / 3.0)]).unwrap();
    let f = F32Fit::of(&third).unwrap();
    assert!(!f.lossless);
    assert!(f.max_rel_rounding > 0.0 && f.max_rel_rounding <= f32::EPSILON as f64 / 2.0);
    assert!(MixedCsr::new(&third).unwrap().is_narrowed());
}

/// The mixed product is the f64 product of the rounded values, bit for bit (the same row sums
/// in the same order), and differs from the exact product by the f32 rounding of the values at
/// most (plus f64 rounding).
#[test]
fn mixed_product_is_the_f64_product_of_the_rounded_values() {
    for (n, seed) in [(1usize, 1u64), (37, 2), (5000, 3), (70_000, 4)] {
        let a = random_matrix(n, seed);
        let low = a.cast::<f32>();
        let rounded = low.cast::<f64>();
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        let x = random_vec(&mut rng, n);
        for &(alpha, beta) in &[(1.0, 0.0), (-0.75, 1.5)] {
            let y0 = if beta == 0.0 {
                vec![f64::NAN; n]
            } else {
                random_vec(&mut rng, n)
            };
            let mut got = y0.clone();
            spmv_mixed(alpha, &low, &x, beta, &mut got);
            let mut want = y0.clone();
            segsparse::spmv::spmv(alpha, &rounded, &x, beta, &mut want);
            assert_eq!(got, want, "n = {n}: mixed product against f64 of fl32(A)");
            let mut exact = y0.clone();
            segsparse::spmv::cpu::spmv_seq(alpha, &a, &x, beta, &mut exact);
            for i in 0..n {
                let (cols, vals) = a.row(i);
                let mag: f64 = cols
                    .iter()
                    .zip(vals)
                    .map(|(&c, v)| (v * x[c as usize]).abs())
                    .sum();
                let by = if beta == 0.0 {
                    0.0
                } else {
                    (beta * y0[i]).abs()
                };
                let tol = alpha.abs()
                    * mag
                    * (f32::EPSILON as f64 / 2.0 + 1e-15 * (cols.len() + 4) as f64)
                    + 1e-15 * by
                    + 1e-300;
                assert!(
                    (got[i] - exact[i]).abs() <= tol,
                    "n = {n}, row {i}: {} vs {} (tolerance {tol:e})",
                    got[i],
                    exact[i]
                );
            }
        }
    }
}

fn params(tol: f64) -> SolveParams<'static> {
    SolveParams {
        rel_tol: tol,
        max_iters: 20_000,
        ..Default::default()
    }
}

/// CG (plain and Jacobi) with f32 storage reaches the requested f64 true residual (checked here
/// with the exact matrix), in the iterations of f64 storage where the f32 values are exact and
/// within 25 % + 5 where they are rounded.
#[test]
fn cg_with_f32_storage_reaches_the_f64_tolerance() {
    for (name, a) in spd_cases() {
        let n = a.nrows();
        let m = MixedCsr::new(&a).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let b = random_vec(&mut rng, n);
        for tol in [1e-8, 1e-11] {
            let p = params(tol);
            let mut x64 = vec![0.0; n];
            let full =
                cg(&Cpu, &a, &b, &mut x64, &p).unwrap_or_else(|e| panic!("{name}: f64 CG: {e}"));
            let mut x = vec![0.0; n];
            let mixed = cg(&Cpu, &m, &b, &mut x, &p)
                .unwrap_or_else(|e| panic!("{name}: f32-storage CG: {e}"));
            let r = true_rel(&a, &b, &x);
            assert!(
                r <= tol * 1.0001 && mixed.relative_residual <= tol,
                "{name} tol {tol:e}: true residual {r:e}, reported {:e}",
                mixed.relative_residual
            );
            // Exact f32 values: the same iterates as f64 storage. Rounded ones: a few more
            // iterations (the reliable updates; 7–13 % measured on larger instances).
            if m.is_lossless() {
                assert_eq!(mixed.iterations, full.iterations, "{name} tol {tol:e}");
            } else {
                assert!(
                    mixed.iterations as f64 <= full.iterations as f64 * 1.25 + 5.0,
                    "{name} tol {tol:e}: {} iterations with f32 storage, {} with f64",
                    mixed.iterations,
                    full.iterations
                );
            }
            // Jacobi from the exact matrix.
            let j = Jacobi::from_matrix(&Cpu, &a).unwrap();
            let mut xj = vec![0.0; n];
            let info = pcg(&Cpu, &m, &j, &b, &mut xj, &p)
                .unwrap_or_else(|e| panic!("{name}: f32-storage PCG: {e}"));
            let r = true_rel(&a, &b, &xj);
            assert!(
                r <= tol * 1.0001,
                "{name} Jacobi tol {tol:e}: {r:e} ({info:?})"
            );
        }
    }
}

/// BiCGSTAB and GMRES(30) with f32 storage on nonsymmetric matrices reach the f64 tolerance;
/// GMRES within one cycle of f64 storage.
#[test]
#[ignore = "seconds of CPU: .ci/run runs it (cargo test --test all -- --ignored)"]
fn bicgstab_and_gmres_with_f32_storage_reach_the_f64_tolerance() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut cases = vec![
        (
            "convection:60:0.3",
            convection(60, 0.3),
            random_vec(&mut rng, 3600),
        ),
        (
            "convection:40:0.9",
            convection(40, 0.9),
            random_vec(&mut rng, 1600),
        ),
    ];
    if let Some(r) = crate::common::mtx::load::<f64>("raefsky2") {
        let n = r.nrows();
        cases.push(("raefsky2", r, vec![1.0; n]));
    }
    for (name, a, b) in cases {
        let n = a.nrows();
        let m = MixedCsr::new(&a).unwrap();
        assert!(m.is_narrowed(), "{name}: its values should round in f32");
        let tol = 1e-8;
        let p = params(tol);
        let mut its = Vec::new();
        for method in ["bicgstab", "gmres", "gmres-f64"] {
            let mut x = vec![0.0; n];
            let info = match method {
                "bicgstab" => bicgstab(&Cpu, &m, &Identity, &b, &mut x, &p),
                "gmres" => gmres(&Cpu, &m, &Identity, &b, &mut x, 30, &p),
                _ => gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &p),
            }
            .unwrap_or_else(|e| panic!("{name} {method}: {e}"));
            let r = true_rel(&a, &b, &x);
            assert!(r <= tol * 1.0001, "{name} {method}: true residual {r:e}");
            its.push(info.iterations);
        }
        // GMRES restarts from the exact residual every cycle: at most one cycle more.
        assert!(
            its[1] <= its[2] + 30,
            "{name}: GMRES {} iterations with f32 storage, {} with f64",
            its[1],
            its[2]
        );
    }
}

/// Values beyond f32's range: f32 storage is refused before any iteration and the solve runs
/// with f64 storage, saying why.
#[test]
fn values_beyond_f32_fall_back_to_f64_storage_with_the_reason() {
    let a = generate::poisson2d::<f64>(20)
        .unwrap()
        .map_values(|v| v * 1e39);
    let n = a.nrows();
    let b = vec![1e39; n];
    let refused = MixedCsr::new(&a).unwrap_err().to_string();
    let mut x = vec![0.0; n];
    let out = solve_stored(
        &Cpu,
        StoredOperator::Refused {
            reason: refused,
            exact: &a,
        },
        &mut x,
        &params(1e-8),
        |storage, op, x, p| {
            assert_eq!(storage, Storage::F64);
            cg(&Cpu, op, &b, x, p)
        },
    )
    .unwrap();
    assert_eq!(out.storage, Storage::F64);
    let why = out.fallback.expect("the fallback says why");
    assert!(why.contains("beyond f32's range"), "{why}");
    out.result.unwrap();
    assert!(true_rel(&a, &b, &x) <= 1e-8);
}

/// `b = A·x` for a random `x`.
pub(crate) fn rhs_of(a: &CsrMatrix<f64>, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = random_vec(&mut rng, a.ncols());
    let mut b = vec![0.0; a.nrows()];
    segsparse::spmv::cpu::spmv_seq(1.0, a, &x, 0.0, &mut b);
    b
}

/// Condition 2·10⁸ with values that f32 rounds to a singular matrix: the f32-storage solve
/// cannot reach 10⁻¹⁰, the solve goes on with f64 storage by itself and says so; the answer
/// meets the tolerance. A matrix f32 storage handles needs no fallback.
#[test]
fn ill_conditioning_falls_back_to_f64_storage_and_reports_it() {
    let a = defeats_f32(200);
    let n = a.nrows();
    let m = MixedCsr::new(&a).unwrap();
    assert!(m.is_narrowed());
    let b = rhs_of(&a, 5);
    for method in ["cg", "bicgstab", "gmres"] {
        let mut x = vec![0.0; n];
        let mut seen = Vec::new();
        let out = solve_stored(
            &Cpu,
            StoredOperator::F32 {
                narrow: &m,
                exact: m.exact().map(|e| e as &dyn LinearOperator<f64, Cpu>),
            },
            &mut x,
            &params(1e-10),
            |storage, op, x, p| {
                seen.push(storage);
                match method {
                    "cg" => cg(&Cpu, op, &b, x, p),
                    "bicgstab" => bicgstab(&Cpu, op, &Identity, &b, x, p),
                    _ => gmres(&Cpu, op, &Identity, &b, x, 30, p),
                }
            },
        )
        .unwrap();
        assert_eq!(seen, [Storage::F32, Storage::F64], "{method}");
        assert_eq!(out.storage, Storage::F64, "{method}");
        let why = out.fallback.expect("the fallback says why");
        assert!(
            why.starts_with("f32 storage did not reach the tolerance"),
            "{method}: {why}"
        );
        let info = out
            .result
            .unwrap_or_else(|e| panic!("{method} after the fallback: {e}"));
        let r = true_rel(&a, &b, &x);
        assert!(
            r <= 1e-10 * 1.0001,
            "{method}: true residual {r:e} ({info:?})"
        );
    }
    // The same call on a matrix f32 storage serves: one attempt, no fallback.
    let a = generate::aniso2d(30, 0.1).unwrap();
    let m = MixedCsr::new(&a).unwrap();
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let out = solve_stored(
        &Cpu,
        StoredOperator::F32 {
            narrow: &m,
            exact: m.exact().map(|e| e as &dyn LinearOperator<f64, Cpu>),
        },
        &mut x,
        &params(1e-10),
        |_, op, x, p| cg(&Cpu, op, &b, x, p),
    )
    .unwrap();
    assert_eq!((out.storage, out.fallback.is_none()), (Storage::F32, true));
    out.result.unwrap();
    assert!(true_rel(&a, &b, &x) <= 1e-10 * 1.0001);
}

/// The solvers' residual check uses the exact values: a CG that iterated with the f32 values
/// alone (an operator without `apply_exact`) stops at the f32 matrix's solution, whose true
/// residual is far above an f64 tolerance; the mixed operator does not.
#[test]
fn rounded_values_alone_miss_the_tolerance_that_mixed_storage_meets() {
    struct RoundedOnly<'a>(&'a CsrMatrix<f32>);
    impl LinearOperator<f64, Cpu> for RoundedOnly<'_> {
        fn nrows(&self) -> usize {
            self.0.nrows()
        }
        fn ncols(&self) -> usize {
            self.0.ncols()
        }
        fn apply(&self, _: &Cpu, x: &Vec<f64>, y: &mut Vec<f64>) -> segsparse::Result<()> {
            spmv_mixed(1.0, self.0, x, 0.0, y);
            Ok(())
        }
    }
    let a = generate::jumps3d::<f64>(12).unwrap();
    let m = MixedCsr::new(&a).unwrap();
    let b = vec![1.0; a.nrows()];
    let p = params(1e-12);
    let mut x = vec![0.0; a.nrows()];
    cg(&Cpu, &RoundedOnly(m.low()), &b, &mut x, &p).unwrap();
    let rounded_only = true_rel(&a, &b, &x);
    assert!(
        rounded_only > 1e-10,
        "f32 values alone: true residual {rounded_only:e}"
    );
    let mut x = vec![0.0; a.nrows()];
    cg(&Cpu, &m, &b, &mut x, &p).unwrap();
    assert!(true_rel(&a, &b, &x) <= 1e-12 * 1.0001);
    // The backend's vectors are f64 throughout.
    assert_eq!(Cpu.len(&x), a.nrows());
}

/// The f32 Krylov basis: every stored vector is an f32 number, and the basis is orthonormal to
/// within the documented bound (`KrylovOps::krylov_stored`: every entry of `V̂ᵀV̂ − I` at most
/// `2u + u²`, `u = 2⁻²⁴`, plus f64 rounding), on a nonsymmetric operator over a whole cycle.
#[test]
fn f32_krylov_basis_keeps_orthogonality_within_its_bound() {
    use segsparse::backend::KrylovOps;
    use segsparse::Storage;
    let a = convection(30, 0.4);
    let n = a.nrows();
    let m = 40;
    let be = Cpu;
    let mut k = be.krylov_stored(n, m, Storage::F32).unwrap();
    let mut sc = be.scalars(n, m + 1).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let r = random_vec(&mut rng, n);
    be.gmres_start(&r, &mut k, &mut sc, 0).unwrap();
    for j in 0..m {
        let (vj, w) = be.krylov_pair(&mut k, j);
        LinearOperator::<f64, Cpu>::apply(&a, &be, vj, w).unwrap();
        be.gmres_arnoldi(&mut k, j, &mut sc, j + 1).unwrap();
    }
    let v = k.basis();
    let u = f32::EPSILON as f64 / 2.0;
    let mut worst = 0.0f64;
    for (i, vi) in v.iter().enumerate() {
        assert!(
            vi.iter().all(|&x| x == x as f32 as f64),
            "v{i} holds an f32 value"
        );
        for (j, vj) in v.iter().enumerate().take(i + 1) {
            let d: f64 = vi.iter().zip(vj).map(|(a, b)| a * b).sum();
            let e = if i == j { d - 1.0 } else { d };
            worst = worst.max(e.abs());
        }
    }
    assert!(
        worst <= 2.0 * u + u * u + 1e-13,
        "max |VᵀV − I| = {worst:e} > 2u"
    );
    assert!(worst > 1e-12, "the basis was not rounded ({worst:e})");
    // The f64 basis for comparison: orthonormal to f64 rounding.
    let mut k = be.krylov_stored(n, m, Storage::F64).unwrap();
    be.gmres_start(&r, &mut k, &mut sc, 0).unwrap();
    for j in 0..m {
        let (vj, w) = be.krylov_pair(&mut k, j);
        LinearOperator::<f64, Cpu>::apply(&a, &be, vj, w).unwrap();
        be.gmres_arnoldi(&mut k, j, &mut sc, j + 1).unwrap();
    }
    let v = k.basis();
    let d: f64 = v[m].iter().zip(&v[0]).map(|(a, b)| a * b).sum();
    assert!(d.abs() < 1e-12);
}

/// GMRES(30) with the f32 basis (and f32 values) reaches the f64 tolerance on the true residual,
/// within two cycles of the f64 basis.
#[test]
fn gmres_with_an_f32_basis_reaches_the_f64_tolerance() {
    use segsparse::Storage;
    let a = convection(60, 0.3);
    let n = a.nrows();
    let m = MixedCsr::new(&a).unwrap();
    let b = rhs_of(&a, 9);
    let mut its = Vec::new();
    for (basis, narrow) in [
        (Storage::F64, false),
        (Storage::F32, false),
        (Storage::F32, true),
    ] {
        let p = SolveParams {
            basis,
            ..params(1e-10)
        };
        let mut x = vec![0.0; n];
        let info = if narrow {
            gmres(&Cpu, &m, &Identity, &b, &mut x, 30, &p)
        } else {
            gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &p)
        }
        .unwrap_or_else(|e| panic!("basis {basis}, f32 values {narrow}: {e}"));
        let r = true_rel(&a, &b, &x);
        assert!(r <= 1e-10 * 1.0001, "basis {basis}: true residual {r:e}");
        its.push(info.iterations);
    }
    assert!(
        its[1] <= its[0] + 60 && its[2] <= its[0] + 60,
        "iterations {its:?}"
    );
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::mixed::GpuMixedCsr;
    use segsparse::spmv::gpu::{GpuCsr, SpmvAlgorithm};

    fn algorithms() -> [SpmvAlgorithm; 7] {
        [
            SpmvAlgorithm::Auto,
            SpmvAlgorithm::Fused,
            SpmvAlgorithm::Rows,
            SpmvAlgorithm::Vector { lanes: 0 },
            SpmvAlgorithm::Vector { lanes: 1 },
            SpmvAlgorithm::Vector { lanes: 32 },
            SpmvAlgorithm::FusedLookback,
        ]
    }

    /// Every mixed kernel against the CPU's mixed product (the f64 product of the rounded
    /// values) to f64 rounding, on matrices with empty rows, a row spanning several tiles, a
    /// single row, no entries; y poisoned with NaN for β = 0.
    #[test]
    fn gpu_mixed_product_matches_the_cpu() {
        let Some(g) = test_gpu() else { return };
        let mut cases: Vec<(String, CsrMatrix<f64>)> = vec![
            ("random:1".into(), random_matrix(1, 1)),
            ("random:300".into(), random_matrix(300, 2)),
            ("random:70000".into(), random_matrix(70_000, 3)),
            ("aniso2d:100".into(), generate::aniso2d(100, 0.01).unwrap()),
            ("jumps3d:20".into(), generate::jumps3d(20).unwrap()),
            ("empty".into(), CsrMatrix::zeros(5, 5)),
        ];
        let mut one_row = Vec::new();
        for c in 0..20_000usize {
            one_row.push((0usize, c, 1.0 / (c as f64 + 3.0)));
        }
        cases.push((
            "one-row".into(),
            CsrMatrix::from_triplets(1, 20_000, &one_row).unwrap(),
        ));
        for (name, a) in cases {
            let d = GpuMixedCsr::upload(&g, &a).unwrap();
            let low = a.cast::<f32>();
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let x = random_vec(&mut rng, a.ncols());
            let xd = g.upload(&x).unwrap();
            for &(alpha, beta) in &[(1.0, 0.0), (-0.75, 1.5)] {
                let y0 = if beta == 0.0 {
                    vec![f64::NAN; a.nrows()]
                } else {
                    random_vec(&mut rng, a.nrows())
                };
                let mut want = y0.clone();
                spmv_mixed(alpha, &low, &x, beta, &mut want);
                for alg in algorithms() {
                    let mut yd = g.upload(&y0).unwrap();
                    d.spmv_with(alg, alpha, &xd, beta, &mut yd)
                        .unwrap_or_else(|e| panic!("{name} {}: {e}", alg.name()));
                    let got = g.download(&yd).unwrap();
                    for i in 0..a.nrows() {
                        let (cols, vals) = low.row(i);
                        let mag: f64 = cols
                            .iter()
                            .zip(vals)
                            .map(|(&c, &v)| (v as f64 * x[c as usize]).abs())
                            .sum();
                        let by = if beta == 0.0 {
                            0.0
                        } else {
                            (beta * y0[i]).abs()
                        };
                        let tol =
                            4e-16 * (cols.len() as f64 + 4.0) * (alpha.abs() * mag + by) + 1e-300;
                        assert!(
                            (got[i] - want[i]).abs() <= tol,
                            "{name} {} α={alpha} β={beta}: row {i} = {:e}, want {:e}",
                            alg.name(),
                            got[i],
                            want[i]
                        );
                    }
                }
            }
            // The exact product is the f64 matrix's.
            if let Some(e) = d.exact() {
                let mut yd = g.zeros::<f64>(a.nrows()).unwrap();
                let mut ye = g.zeros::<f64>(a.nrows()).unwrap();
                d.spmv_exact(1.0, &xd, 0.0, &mut yd).unwrap();
                e.spmv(1.0, &xd, 0.0, &mut ye).unwrap();
                assert_eq!(g.download(&yd).unwrap(), g.download(&ye).unwrap(), "{name}");
            }
        }
    }

    /// CG, BiCGSTAB and GMRES on the GPU with f32 storage reach the f64 tolerance (checked on
    /// the host with the exact matrix), CG within 25 % + 5 iterations of f64 storage.
    #[test]
    fn gpu_solves_with_f32_storage_reach_the_f64_tolerance() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        for (name, a) in spd_cases() {
            let n = a.nrows();
            let m = GpuMixedCsr::upload(&g, &a).unwrap();
            let full = GpuCsr::upload(&g, &a).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let b = random_vec(&mut rng, n);
            let bd = be.upload(&b).unwrap();
            let p = params(1e-10);
            let mut xd = be.zeros(n).unwrap();
            let f64_info = cg(&be, &full, &bd, &mut xd, &p).unwrap();
            let mut xd = be.zeros(n).unwrap();
            let info = cg(&be, &m, &bd, &mut xd, &p)
                .unwrap_or_else(|e| panic!("{name}: GPU f32-storage CG: {e}"));
            let x = be.download(&xd).unwrap();
            let r = true_rel(&a, &b, &x);
            assert!(r <= 1e-10 * 1.0001, "{name}: true residual {r:e}");
            assert!(
                info.iterations as f64 <= f64_info.iterations as f64 * 1.25 + 5.0,
                "{name}: {} iterations with f32 storage, {} with f64",
                info.iterations,
                f64_info.iterations
            );
        }
        let a = convection(80, 0.3);
        let n = a.nrows();
        let m = GpuMixedCsr::upload(&g, &a).unwrap();
        let b = vec![1.0; n];
        let bd = be.upload(&b).unwrap();
        let p = params(1e-9);
        for method in ["bicgstab", "gmres"] {
            let mut xd = be.zeros(n).unwrap();
            match method {
                "bicgstab" => bicgstab(&be, &m, &Identity, &bd, &mut xd, &p),
                _ => gmres(&be, &m, &Identity, &bd, &mut xd, 30, &p),
            }
            .unwrap_or_else(|e| panic!("{method}: {e}"));
            let r = true_rel(&a, &b, &be.download(&xd).unwrap());
            assert!(
                r <= 1e-9 * 1.0001,
                "convection {method}: true residual {r:e}"
            );
        }
    }

    /// GMRES(30) on the GPU with the f32 basis and f32 values: the f64 tolerance on the true
    /// residual, within two cycles of the CPU's f32 basis (the same rounded numbers).
    #[test]
    fn gpu_gmres_with_an_f32_basis_reaches_the_f64_tolerance() {
        use segsparse::Storage;
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        // 81²: an odd row count (the f32 basis kernels read two rows per load, the last alone).
        for (name, a) in [
            ("convection:80:0.3", convection(80, 0.3)),
            ("convection:81:0.3", convection(81, 0.3)),
            ("convection:300:0.6", convection(300, 0.6)),
        ] {
            let n = a.nrows();
            let m = GpuMixedCsr::upload(&g, &a).unwrap();
            let b = rhs_of(&a, 9);
            let bd = be.upload(&b).unwrap();
            let p = SolveParams {
                basis: Storage::F32,
                ..params(1e-10)
            };
            let mut xd = be.zeros(n).unwrap();
            let info = gmres(&be, &m, &Identity, &bd, &mut xd, 30, &p)
                .unwrap_or_else(|e| panic!("{name}: GPU GMRES with an f32 basis: {e}"));
            let r = true_rel(&a, &b, &be.download(&xd).unwrap());
            assert!(r <= 1e-10 * 1.0001, "{name}: true residual {r:e}");
            let mc = MixedCsr::new(&a).unwrap();
            let mut x = vec![0.0; n];
            let cpu = gmres(&Cpu, &mc, &Identity, &b, &mut x, 30, &p).unwrap();
            assert!(
                info.iterations <= cpu.iterations + 60 && cpu.iterations <= info.iterations + 60,
                "{name}: GPU {} iterations, CPU {}",
                info.iterations,
                cpu.iterations
            );
        }
    }

    /// The fallback on the GPU: the singular-in-f32 matrix falls back to f64 storage and says so.
    #[test]
    fn gpu_ill_conditioning_falls_back_to_f64_storage() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        let a = defeats_f32(500);
        let n = a.nrows();
        let m = GpuMixedCsr::upload(&g, &a).unwrap();
        let b = rhs_of(&a, 5);
        let bd = be.upload(&b).unwrap();
        let mut xd = be.zeros(n).unwrap();
        let out = solve_stored(
            &be,
            StoredOperator::F32 {
                narrow: &m,
                exact: m
                    .exact()
                    .map(|e| e as &dyn LinearOperator<f64, GpuOps<f64>>),
            },
            &mut xd,
            &params(1e-10),
            |_, op, x, p| cg(&be, op, &bd, x, p),
        )
        .unwrap();
        assert_eq!(out.storage, Storage::F64);
        assert!(out.fallback.is_some());
        out.result.unwrap();
        let r = true_rel(&a, &b, &be.download(&xd).unwrap());
        assert!(r <= 1e-10 * 1.0001, "true residual {r:e}");
    }
}
