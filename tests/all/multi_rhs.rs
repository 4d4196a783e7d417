//! Solves with several right-hand sides (`solvers::multi`): every column equals the one-column
//! solve of its right-hand side (on the CPU bit for bit, with the same iterations, restarts,
//! history and outcome; on the GPU to rounding), a zero column converges at once, a NaN column
//! fails alone while the others converge, and bad shapes are clear errors. Run on the CPU
//! backend, on a backend with only the core of `VectorOps` (the defaults), and on the GPU
//! (skipped without one, failing instead under `SEGSPARSE_REQUIRE_GPU=1`).

use segsparse::backend::Identity;
use segsparse::backend::{Cpu, KrylovOps, VectorOps};
use segsparse::precond::{Amg, AmgParams, Chebyshev, ChebyshevParams, Ic0, Ilu0, Jacobi};
use segsparse::solvers::multi::{self, MultiInfo};
use segsparse::solvers::{bicgstab, gmres, pcg, SolveError, SolveInfo, SolveParams};
use segsparse::spmm::Layout;
use segsparse::{generate, CsrMatrix};

use crate::backend_core::{CoreOnly, Op, Via};

type Single<'a, V> = Box<dyn Fn(&V, &mut V) -> Result<SolveInfo, SolveError> + 'a>;
type Multi<'a, V> = Box<dyn Fn(&[V], &mut [V]) -> Result<MultiInfo, SolveError> + 'a>;
/// A named case: the one-column solve and the block solve of the same method.
type Case<'a, V> = (&'static str, Single<'a, V>, Multi<'a, V>);

/// A convection–diffusion operator on an `m × m` grid: unsymmetric, diagonally dominant.
fn convection(m: usize, c: f64) -> CsrMatrix<f64> {
    let mut t = Vec::new();
    for y in 0..m {
        for x in 0..m {
            let i = y * m + x;
            t.push((i, i, 4.0));
            if x > 0 {
                t.push((i, i - 1, -1.0 - c));
            }
            if x + 1 < m {
                t.push((i, i + 1, -1.0 + c));
            }
            if y > 0 {
                t.push((i, i - m, -1.0 - c / 2.0));
            }
            if y + 1 < m {
                t.push((i, i + m, -1.0 + c / 2.0));
            }
        }
    }
    CsrMatrix::from_triplets(m * m, m * m, &t).unwrap()
}

/// `k` right-hand sides of different shapes and scales (deterministic).
fn rhs(n: usize, k: usize) -> Vec<Vec<f64>> {
    (0..k)
        .map(|j| {
            (0..n)
                .map(|i| {
                    let h = (i as u64 * 2654435761 + j as u64 * 40503) % 1000;
                    (h as f64 / 500.0 - 1.0) * 10f64.powi(j as i32 % 3 - 1)
                })
                .collect()
        })
        .collect()
}

/// Runs `multi` on the columns `bs` and `single` on each column; compares column by column.
/// `exact`: the same solution bit for bit (host backends); otherwise within `1e-6` relative and
/// the iteration counts within `slack`.
fn compare<B: VectorOps<f64>>(
    be: &B,
    what: &str,
    bs: &[Vec<f64>],
    single: &Single<'_, B::Vector>,
    multi: &Multi<'_, B::Vector>,
    exact: bool,
    slack: usize,
) -> MultiInfo {
    let n = bs[0].len();
    let dbs: Vec<B::Vector> = bs.iter().map(|b| be.upload(b).unwrap()).collect();
    let mut dxs: Vec<B::Vector> = (0..bs.len()).map(|_| be.zeros(n).unwrap()).collect();
    let info = multi(&dbs, &mut dxs).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        info.columns.len(),
        bs.len(),
        "{what}: one outcome per column"
    );
    for (j, b) in dbs.iter().enumerate() {
        let mut x = be.zeros(n).unwrap();
        let one = single(b, &mut x);
        let x = be.download(&x).unwrap();
        let xm = be.download(&dxs[j]).unwrap();
        match (&one, &info.columns[j]) {
            (Ok(s), Ok(m)) => {
                let d = s.iterations.abs_diff(m.iterations);
                assert!(
                    d <= slack,
                    "{what} column {j}: {} iterations alone, {} in the block",
                    s.iterations,
                    m.iterations
                );
                if exact {
                    assert_eq!(s.iterations, m.iterations, "{what} column {j}: iterations");
                    assert_eq!(s.restarts, m.restarts, "{what} column {j}: restarts");
                    assert_eq!(s.history, m.history, "{what} column {j}: history");
                    assert_eq!(
                        s.relative_residual, m.relative_residual,
                        "{what} column {j}: residual"
                    );
                }
            }
            (Err(s), Err(m)) => {
                if exact {
                    assert_eq!(
                        format!("{s:?}"),
                        format!("{m:?}"),
                        "{what} column {j}: errors"
                    );
                } else {
                    assert_eq!(
                        std::mem::discriminant(s),
                        std::mem::discriminant(m),
                        "{what} column {j}: {s} alone, {m} in the block"
                    );
                }
            }
            (s, m) => panic!("{what} column {j}: alone {s:?}, in the block {m:?}"),
        }
        if exact {
            assert_eq!(x, xm, "{what} column {j}: solutions");
        } else if one.is_ok() {
            let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-300);
            let diff = x
                .iter()
                .zip(&xm)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            assert!(
                diff <= 1e-6 * norm,
                "{what} column {j}: solutions differ by {diff:e} of {norm:e}"
            );
        }
    }
    info
}

fn params() -> SolveParams<'static> {
    SolveParams {
        rel_tol: 1e-9,
        max_iters: 2000,
        ..Default::default()
    }
}

#[test]
fn cpu_columns_equal_one_column_solves_bit_for_bit() {
    let p = params();
    let spd = generate::poisson2d::<f64>(40).unwrap();
    let non = convection(40, 0.6);
    let bs = rhs(spd.nrows(), 5);
    let be = &Cpu;
    let jac = Jacobi::from_matrix(be, &spd).unwrap();
    let cheb = Chebyshev::from_matrix(be, &spd, &spd, &ChebyshevParams::default()).unwrap();
    let amg = Amg::new(be, &spd, &AmgParams::default()).unwrap();
    let ic = Ic0::new(be, &spd, &Default::default()).unwrap();
    let njac = Jacobi::from_matrix(be, &non).unwrap();
    let ilu = Ilu0::new(be, &non, &Default::default()).unwrap();
    let a = &spd;
    let u = &non;
    let cases: Vec<Case<'_, Vec<f64>>> = vec![
        (
            "cg",
            Box::new(|b, x| pcg(be, a, &Identity, b, x, &p)),
            Box::new(|b, x| multi::cg(be, a, b, x, &p)),
        ),
        (
            "pcg jacobi",
            Box::new(|b, x| pcg(be, a, &jac, b, x, &p)),
            Box::new(|b, x| multi::pcg(be, a, &jac, b, x, &p)),
        ),
        (
            "pcg chebyshev",
            Box::new(|b, x| pcg(be, a, &cheb, b, x, &p)),
            Box::new(|b, x| multi::pcg(be, a, &cheb, b, x, &p)),
        ),
        (
            "pcg amg",
            Box::new(|b, x| pcg(be, a, &amg, b, x, &p)),
            Box::new(|b, x| multi::pcg(be, a, &amg, b, x, &p)),
        ),
        (
            "pcg ic0",
            Box::new(|b, x| pcg(be, a, &ic, b, x, &p)),
            Box::new(|b, x| multi::pcg(be, a, &ic, b, x, &p)),
        ),
        (
            "gmres amg",
            Box::new(|b, x| gmres(be, a, &amg, b, x, 20, &p)),
            Box::new(|b, x| multi::gmres(be, a, &amg, b, x, 20, &p)),
        ),
        (
            "bicgstab",
            Box::new(|b, x| bicgstab(be, u, &Identity, b, x, &p)),
            Box::new(|b, x| multi::bicgstab(be, u, &Identity, b, x, &p)),
        ),
        (
            "bicgstab jacobi",
            Box::new(|b, x| bicgstab(be, u, &njac, b, x, &p)),
            Box::new(|b, x| multi::bicgstab(be, u, &njac, b, x, &p)),
        ),
        (
            "bicgstab ilu0",
            Box::new(|b, x| bicgstab(be, u, &ilu, b, x, &p)),
            Box::new(|b, x| multi::bicgstab(be, u, &ilu, b, x, &p)),
        ),
        (
            "gmres",
            Box::new(|b, x| gmres(be, u, &Identity, b, x, 15, &p)),
            Box::new(|b, x| multi::gmres(be, u, &Identity, b, x, 15, &p)),
        ),
        (
            "gmres jacobi",
            Box::new(|b, x| gmres(be, u, &njac, b, x, 15, &p)),
            Box::new(|b, x| multi::gmres(be, u, &njac, b, x, 15, &p)),
        ),
        (
            "gmres ilu0",
            Box::new(|b, x| gmres(be, u, &ilu, b, x, 15, &p)),
            Box::new(|b, x| multi::gmres(be, u, &ilu, b, x, 15, &p)),
        ),
    ];
    for (what, single, multi) in &cases {
        let info = compare(be, what, &bs, single, multi, true, 0);
        assert!(info.all_converged(), "{what}: {:?}", info.columns);
        let its = info.iterations();
        assert!(its.iter().all(|&i| i > 0), "{what}: {its:?}");
        assert_eq!(info.block_iterations, *its.iter().max().unwrap(), "{what}");
    }
}

#[test]
fn core_only_backend_runs_the_same_columns() {
    let p = params();
    let a = generate::poisson2d::<f64>(30).unwrap();
    let u = convection(30, 0.5);
    let bs = rhs(a.nrows(), 4);
    let jac = Jacobi::from_matrix(&CoreOnly, &a).unwrap();
    let ilu = Ilu0::new(&Cpu, &u, &Default::default()).unwrap();
    let via = Via(&ilu);
    let (oa, ou) = (Op(&a), Op(&u));
    let be = &CoreOnly;
    let cases: Vec<Case<'_, Vec<f64>>> = vec![
        (
            "core-only pcg jacobi",
            Box::new(|b, x| pcg(be, &oa, &jac, b, x, &p)),
            Box::new(|b, x| multi::pcg(be, &oa, &jac, b, x, &p)),
        ),
        (
            "core-only bicgstab ilu0",
            Box::new(|b, x| bicgstab(be, &ou, &via, b, x, &p)),
            Box::new(|b, x| multi::bicgstab(be, &ou, &via, b, x, &p)),
        ),
        (
            "core-only gmres",
            Box::new(|b, x| gmres(be, &ou, &Identity, b, x, 10, &p)),
            Box::new(|b, x| multi::gmres(be, &ou, &Identity, b, x, 10, &p)),
        ),
    ];
    for (what, single, multi) in &cases {
        let info = compare(be, what, &bs, single, multi, true, 0);
        assert!(info.all_converged(), "{what}");
    }
    // And the CPU backend's fused steps give the same columns as the core-only defaults.
    let db: Vec<Vec<f64>> = bs.clone();
    let mut x_cpu = vec![vec![0.0; a.nrows()]; bs.len()];
    let mut x_core = x_cpu.clone();
    let jc = Jacobi::from_matrix(&Cpu, &a).unwrap();
    let i1 = multi::pcg(&Cpu, &a, &jc, &db, &mut x_cpu, &p).unwrap();
    let i2 = multi::pcg(be, &oa, &jac, &db, &mut x_core, &p).unwrap();
    assert_eq!(i1.iterations(), i2.iterations());
    assert_eq!(x_cpu, x_core);
}

#[test]
fn zero_and_nan_columns_stop_alone() {
    let p = params();
    let a = generate::poisson2d::<f64>(30).unwrap();
    let u = convection(30, 0.5);
    let n = a.nrows();
    let mut bs = rhs(n, 4);
    bs[1] = vec![0.0; n];
    bs[2][n / 2] = f64::NAN;
    let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
    let amg = Amg::new(&Cpu, &a, &AmgParams::default()).unwrap();
    let ilu = Ilu0::new(&Cpu, &u, &Default::default()).unwrap();
    type Run<'a> = Box<dyn Fn(&[Vec<f64>], &mut [Vec<f64>]) -> Result<MultiInfo, SolveError> + 'a>;
    let runs: Vec<(&str, Run<'_>)> = vec![
        ("cg", Box::new(|b, x| multi::cg(&Cpu, &a, b, x, &p))),
        (
            "pcg jacobi",
            Box::new(|b, x| multi::pcg(&Cpu, &a, &jac, b, x, &p)),
        ),
        (
            "pcg amg",
            Box::new(|b, x| multi::pcg(&Cpu, &a, &amg, b, x, &p)),
        ),
        (
            "bicgstab ilu0",
            Box::new(|b, x| multi::bicgstab(&Cpu, &u, &ilu, b, x, &p)),
        ),
        (
            "gmres ilu0",
            Box::new(|b, x| multi::gmres(&Cpu, &u, &ilu, b, x, 20, &p)),
        ),
    ];
    for (what, run) in &runs {
        let mut xs = vec![vec![7.0; n]; 4];
        let info = run(&bs, &mut xs).unwrap();
        let its = info.iterations();
        match &info.columns[1] {
            Ok(i) => assert_eq!(i.iterations, 0, "{what}: the zero column"),
            Err(e) => panic!("{what}: the zero column failed: {e}"),
        }
        assert!(
            xs[1].iter().all(|&v| v == 0.0),
            "{what}: x of the zero column"
        );
        assert!(
            matches!(info.columns[2], Err(SolveError::NonFinite { iteration: 0 })),
            "{what}: the NaN column: {:?}",
            info.columns[2]
        );
        for j in [0, 3] {
            let i = info.columns[j]
                .as_ref()
                .unwrap_or_else(|e| panic!("{what} column {j}: {e}"));
            assert!(
                i.iterations > 0 && i.relative_residual <= 1e-9,
                "{what} column {j}"
            );
        }
        assert!(!info.all_converged());
        assert_eq!(info.block_iterations, its[0].max(its[3]), "{what}: {its:?}");
    }
}

#[test]
fn failing_and_slow_columns_match_their_one_column_errors() {
    // An iteration limit that some columns reach: their NotConverged (with the true residual)
    // equals the one-column solve's; the columns that converge first leave the block.
    let p = SolveParams {
        rel_tol: 1e-9,
        max_iters: 40,
        ..Default::default()
    };
    let a = generate::poisson2d::<f64>(40).unwrap();
    let n = a.nrows();
    let mut bs = rhs(n, 3);
    // A smooth right-hand side converges fast, the rough ones do not within 40 iterations.
    bs[0] = (0..n).map(|i| ((i % 40) as f64 * 0.07).sin()).collect();
    let single: Single<'_, Vec<f64>> = Box::new(|b, x| pcg(&Cpu, &a, &Identity, b, x, &p));
    let multi: Multi<'_, Vec<f64>> = Box::new(|b, x| multi::cg(&Cpu, &a, b, x, &p));
    let info = compare(&Cpu, "cg limit", &bs, &single, &multi, true, 0);
    assert!(info
        .columns
        .iter()
        .any(|c| matches!(c, Err(SolveError::NotConverged { .. }))));
}

/// Two block outcomes of the same columns, bit for bit: iterations, restarts, histories,
/// residuals, errors and solutions.
/// A block solve's outcome and its solutions on the host.
type Solved = (MultiInfo, Vec<Vec<f64>>);

type Outcomes<'a> = (Vec<&'a Result<SolveInfo, SolveError>>, Vec<&'a Vec<f64>>);

fn same_columns(what: &str, a: Outcomes<'_>, b: Outcomes<'_>) {
    assert_eq!(a.0.len(), b.0.len(), "{what}: columns");
    for (j, (ca, cb)) in a.0.iter().zip(&b.0).enumerate() {
        match (ca, cb) {
            (Ok(x), Ok(y)) => {
                assert_eq!(x.iterations, y.iterations, "{what} column {j}: iterations");
                assert_eq!(x.restarts, y.restarts, "{what} column {j}: restarts");
                assert_eq!(x.history, y.history, "{what} column {j}: history");
                assert_eq!(
                    x.relative_residual, y.relative_residual,
                    "{what} column {j}: residual"
                );
            }
            (Err(x), Err(y)) => assert_eq!(
                format!("{x:?}"),
                format!("{y:?}"),
                "{what} column {j}: errors"
            ),
            (x, y) => panic!("{what} column {j}: {x:?} against {y:?}"),
        }
        assert!(
            a.1[j]
                .iter()
                .zip(b.1[j].iter())
                .all(|(u, v)| u.to_bits() == v.to_bits()),
            "{what} column {j}: solutions differ"
        );
    }
}

/// The columns of `keep` solved in a block with the others and in a block of their own: a
/// column that converges early (or fails, or is zero) changes nothing in the others, bit for
/// bit (each column's steps read only its own vectors and scalars).
fn others_unchanged(
    what: &str,
    bs: &[Vec<f64>],
    keep: &[usize],
    run: &dyn Fn(&[Vec<f64>]) -> Solved,
) {
    let (all, xa) = run(bs);
    let sub: Vec<Vec<f64>> = keep.iter().map(|&j| bs[j].clone()).collect();
    let (own, xo) = run(&sub);
    let picked = (
        keep.iter().map(|&j| &all.columns[j]).collect(),
        keep.iter().map(|&j| &xa[j]).collect(),
    );
    same_columns(what, picked, outcomes(&own, &xo));
}

/// Every column's outcome and solution.
fn outcomes<'a>(info: &'a MultiInfo, x: &'a [Vec<f64>]) -> Outcomes<'a> {
    (info.columns.iter().collect(), x.iter().collect())
}

/// A right-hand side that CG solves in few iterations (a few smooth modes).
fn smooth(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i % 40) as f64 * 0.07).sin()).collect()
}

#[test]
fn cpu_early_column_leaves_the_others_unchanged() {
    let p = params();
    let a = generate::poisson2d::<f64>(40).unwrap();
    let u = convection(40, 0.6);
    let n = a.nrows();
    let mut bs = rhs(n, 4);
    bs[1] = smooth(n);
    bs[2][n / 3] = f64::NAN;
    let amg = Amg::new(&Cpu, &a, &AmgParams::default()).unwrap();
    let ilu = Ilu0::new(&Cpu, &u, &Default::default()).unwrap();
    type Run<'a> = Box<dyn Fn(&[Vec<f64>], &mut [Vec<f64>]) -> Result<MultiInfo, SolveError> + 'a>;
    let runs: Vec<(&str, Run<'_>)> = vec![
        ("cg", Box::new(|b, x| multi::cg(&Cpu, &a, b, x, &p))),
        (
            "pcg amg",
            Box::new(|b, x| multi::pcg(&Cpu, &a, &amg, b, x, &p)),
        ),
        (
            "bicgstab ilu0",
            Box::new(|b, x| multi::bicgstab(&Cpu, &u, &ilu, b, x, &p)),
        ),
        (
            "gmres ilu0",
            Box::new(|b, x| multi::gmres(&Cpu, &u, &ilu, b, x, 15, &p)),
        ),
    ];
    for (what, run) in &runs {
        let go = |b: &[Vec<f64>]| {
            let mut x = vec![vec![0.0; n]; b.len()];
            let info = run(b, &mut x).unwrap();
            (info, x)
        };
        let (info, _) = go(&bs);
        let its = info.iterations();
        eprintln!("{what}: iterations {its:?}");
        assert_eq!(its[2], 0, "{what}: the NaN column stops at once");
        others_unchanged(what, &bs, &[0, 3], &go);
    }
}

#[test]
fn bad_shapes_are_clear_errors() {
    let a = generate::poisson2d::<f64>(8).unwrap();
    let n = a.nrows();
    let p = params();
    let e = multi::cg(&Cpu, &a, &[], &mut [], &p).unwrap_err();
    assert!(e.to_string().contains("k (must be at least 1)"), "{e}");
    let bs = vec![vec![1.0; n], vec![1.0; n - 1]];
    let mut xs = vec![vec![0.0; n]; 2];
    let e = multi::cg(&Cpu, &a, &bs, &mut xs, &p).unwrap_err();
    assert!(
        matches!(e, SolveError::DimensionMismatch { expected, found, .. } if expected == n && found == n - 1),
        "{e}"
    );
    assert!(e.to_string().contains("right-hand side"), "{e}");
    let bs = vec![vec![1.0; n]; 2];
    let mut xs = vec![vec![0.0; n]; 3];
    let e = multi::gmres(&Cpu, &a, &Identity, &bs, &mut xs, 10, &p).unwrap_err();
    assert!(e.to_string().contains("solution columns"), "{e}");
    let mut xs = vec![vec![0.0; n]; 2];
    let e = multi::gmres(&Cpu, &a, &Identity, &bs, &mut xs, 0, &p).unwrap_err();
    assert!(e.to_string().contains("restart"), "{e}");
    // The host block helpers.
    let e = multi::split_columns(&[1.0; 6], 3, 0, Layout::ColMajor).unwrap_err();
    assert!(e.to_string().contains("k = 0"), "{e}");
    let e = multi::split_columns(&[1.0; 7], 3, 2, Layout::RowMajor).unwrap_err();
    assert!(e.to_string().contains("needs 6 entries, found 7"), "{e}");
    let data: Vec<f64> = (0..6).map(f64::from).collect();
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        let cols = multi::split_columns(&data, 3, 2, layout).unwrap();
        assert_eq!(multi::join_columns(&cols, layout), data);
    }
    assert_eq!(
        multi::split_columns(&data, 3, 2, Layout::RowMajor).unwrap(),
        vec![vec![0.0, 2.0, 4.0], vec![1.0, 3.0, 5.0]]
    );
}

/// `sparse-solve --rhs-count k` as one block gives every column the iterations of the
/// sequential solves, on the CPU and (when a GPU works) on the GPU.
#[test]
fn sparse_solve_block_equals_sequential() {
    let Some(exe) = crate::common::cli::bin("sparse-solve", env!("CARGO_BIN_EXE_sparse-solve"))
    else {
        return;
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let out = std::process::Command::new(&exe)
            .args(args)
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mut backends = vec!["cpu"];
    if segsparse::gpu::gpu_required() || segsparse::gpu::Gpu::shared().is_ok() {
        backends.push("gpu");
    }
    for be in backends {
        for (method, pre) in [("cg", "amg"), ("gmres", "ilu0"), ("bicgstab", "jacobi")] {
            let base = [
                "poisson2d:30",
                "--backend",
                be,
                "--method",
                method,
                "--precond",
                pre,
                "--rhs",
                "random",
                "--rhs-columns",
                "random",
                "--rhs-count",
                "5",
            ];
            let blk = json(&[&base[..], &["--rhs-mode", "block"]].concat());
            let seq = json(&[&base[..], &["--rhs-mode", "sequential"]].concat());
            assert_eq!(blk["rhs_mode"], "block");
            assert_eq!(seq["rhs_mode"], "sequential");
            let (bi, si) = (&blk["iterations_all"], &seq["iterations_all"]);
            assert_eq!(bi.as_array().map(Vec::len), Some(5), "{be} {method}: {blk}");
            if be == "cpu" {
                assert_eq!(bi, si, "{be} {method} {pre}");
            } else {
                // The GPU's block product orders a row's additions unlike its SpMV. CG and GMRES
                // absorb that rounding (±1 iteration); BiCGSTAB's convergence is erratic enough
                // that it moves by several iterations (measured on an H100: Jacobi BiCGSTAB on
                // poisson2d:30, [72, 69, 74, 70, 73] in the block against [71, 71, 74, 72, 79]).
                for (b, s) in bi.as_array().unwrap().iter().zip(si.as_array().unwrap()) {
                    let (b, s) = (b.as_u64().unwrap(), s.as_u64().unwrap());
                    let slack = if method == "bicgstab" { 1 + s / 5 } else { 1 };
                    assert!(b.abs_diff(s) <= slack, "{be} {method} {pre}: {bi} vs {si}");
                }
            }
            assert_eq!(blk["converged"], true);
            assert!(blk["rhs_seconds_total"].as_f64().unwrap() > 0.0);
        }
    }
}

/// Keeps `KrylovOps` in use for the generic bound of the GPU module.
#[allow(dead_code)]
fn _bound<B: KrylovOps<f64>>() {}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuCsr;

    type V = <GpuOps<f64> as VectorOps<f64>>::Vector;

    /// The block product of separate columns equals the SpMV of each, for 1 to 70 columns
    /// (several launches of 32), on matrices with empty and long rows.
    #[test]
    fn gpu_spmv_columns_equals_spmv() {
        let Some(g) = test_gpu() else { return };
        let mats = vec![
            generate::poisson2d::<f64>(50).unwrap(),
            generate::from_spec::<f64>("random:3000:40", 3).unwrap(),
            generate::from_spec::<f64>("emptyrows:2000:20:7", 5).unwrap(),
        ];
        for a in &mats {
            let d = GpuCsr::upload(&g, a).unwrap();
            for k in [2usize, 5, 33, 70] {
                let xs: Vec<Vec<f64>> = rhs(a.ncols(), k);
                let dx: Vec<V> = xs.iter().map(|x| g.upload(x).unwrap()).collect();
                let mut dy: Vec<V> = (0..k)
                    .map(|_| g.upload(&vec![1.5; a.nrows()]).unwrap())
                    .collect();
                let xr: Vec<&V> = dx.iter().collect();
                let mut yr: Vec<&mut V> = dy.iter_mut().collect();
                d.spmv_columns(-0.5, &xr, 2.0, &mut yr).unwrap();
                for (j, x) in xs.iter().enumerate() {
                    let mut want = vec![1.5; a.nrows()];
                    segsparse::spmv::spmv(-0.5, a, x, 2.0, &mut want);
                    let got = g.download(&dy[j]).unwrap();
                    for (w, h) in want.iter().zip(&got) {
                        assert!(
                            (w - h).abs() <= 1e-12 * (1.0 + w.abs()),
                            "k={k} col {j}: {w} vs {h}"
                        );
                    }
                }
            }
            // Wrong lengths are named errors.
            let x = g.upload(&vec![0.0; a.ncols() + 1]).unwrap();
            let mut y = g.upload(&vec![0.0; a.nrows()]).unwrap();
            let mut y2 = g.upload(&vec![0.0; a.nrows()]).unwrap();
            let x2 = g.upload(&vec![0.0; a.ncols()]).unwrap();
            let e = d
                .spmv_columns(1.0, &[&x2, &x], 0.0, &mut [&mut y, &mut y2])
                .unwrap_err();
            assert!(e.to_string().contains("input column 1"), "{e}");
        }
    }

    #[test]
    fn gpu_columns_equal_one_column_solves() {
        let Some(g) = test_gpu() else { return };
        let be = &GpuOps::<f64>::new(&g).unwrap();
        let p = params();
        let spd = generate::poisson3d::<f64>(20).unwrap();
        let non = convection(60, 0.6);
        let da = GpuCsr::upload(&g, &spd).unwrap();
        let du = GpuCsr::upload(&g, &non).unwrap();
        let jac = Jacobi::from_matrix(be, &spd).unwrap();
        let cheb = Chebyshev::from_matrix(be, &da, &spd, &ChebyshevParams::default()).unwrap();
        let amg = Amg::new(be, &spd, &AmgParams::default()).unwrap();
        let njac = Jacobi::from_matrix(be, &non).unwrap();
        let ilu = Ilu0::new(be, &non, &Default::default()).unwrap();
        let (a, u) = (&da, &du);
        let cases: Vec<(&str, Single<'_, V>, Multi<'_, V>, bool)> = vec![
            (
                "gpu cg",
                Box::new(|b, x| pcg(be, a, &Identity, b, x, &p)),
                Box::new(|b, x| multi::cg(be, a, b, x, &p)),
                true,
            ),
            (
                "gpu pcg jacobi",
                Box::new(|b, x| pcg(be, a, &jac, b, x, &p)),
                Box::new(|b, x| multi::pcg(be, a, &jac, b, x, &p)),
                true,
            ),
            (
                "gpu pcg chebyshev",
                Box::new(|b, x| pcg(be, a, &cheb, b, x, &p)),
                Box::new(|b, x| multi::pcg(be, a, &cheb, b, x, &p)),
                true,
            ),
            (
                "gpu pcg amg",
                Box::new(|b, x| pcg(be, a, &amg, b, x, &p)),
                Box::new(|b, x| multi::pcg(be, a, &amg, b, x, &p)),
                true,
            ),
            (
                "gpu bicgstab jacobi",
                Box::new(|b, x| bicgstab(be, u, &njac, b, x, &p)),
                Box::new(|b, x| multi::bicgstab(be, u, &njac, b, x, &p)),
                false,
            ),
            (
                "gpu bicgstab ilu0",
                Box::new(|b, x| bicgstab(be, u, &ilu, b, x, &p)),
                Box::new(|b, x| multi::bicgstab(be, u, &ilu, b, x, &p)),
                false,
            ),
            (
                "gpu gmres ilu0",
                Box::new(|b, x| gmres(be, u, &ilu, b, x, 20, &p)),
                Box::new(|b, x| multi::gmres(be, u, &ilu, b, x, 20, &p)),
                false,
            ),
            (
                "gpu gmres amg",
                Box::new(|b, x| gmres(be, a, &amg, b, x, 20, &p)),
                Box::new(|b, x| multi::gmres(be, a, &amg, b, x, 20, &p)),
                true,
            ),
        ];
        for (what, single, multi, on_spd) in &cases {
            let n = if *on_spd { spd.nrows() } else { non.nrows() };
            let mut bs = rhs(n, 6);
            bs[4] = vec![0.0; n];
            // The block product sums a row in another order than the SpMV: rounding may move
            // a column's convergence by an iteration.
            let info = compare(be, what, &bs, single, multi, false, 1);
            let its = info.iterations();
            eprintln!("{what}: iterations {its:?}");
            assert_eq!(its[4], 0, "{what}: the zero column");
            assert!(info.all_converged(), "{what}: {:?}", info.columns);
        }
        // A NaN column fails alone on the GPU too.
        let n = spd.nrows();
        let mut bs = rhs(n, 3);
        bs[1][7] = f64::NAN;
        let dbs: Vec<V> = bs.iter().map(|b| g.upload(b).unwrap()).collect();
        let mut dxs: Vec<V> = (0..3).map(|_| g.upload(&vec![0.0; n]).unwrap()).collect();
        let info = multi::pcg(be, a, &amg, &dbs, &mut dxs, &p).unwrap();
        assert!(matches!(
            info.columns[1],
            Err(SolveError::NonFinite { iteration: 0 })
        ));
        assert!(
            info.columns[0].is_ok() && info.columns[2].is_ok(),
            "{:?}",
            info.columns
        );
    }

    /// The block steps (one launch for several columns) against the same steps column by
    /// column (`GpuOps::with_block_steps(false)`): the same bits in every column, on a system
    /// below the fused-kernel bound (the cooperative block kernels) and one above it (the
    /// separate block kernels), for every method and preconditioner kind, the block factor
    /// application of swept ILU(0) included.
    #[test]
    fn gpu_block_steps_equal_column_steps() {
        let Some(g) = test_gpu() else { return };
        let be = &GpuOps::<f64>::new(&g).unwrap();
        let col = &GpuOps::<f64>::new(&g).unwrap().with_block_steps(false);
        assert!(be.block_steps() && !col.block_steps());
        // Equal outcomes are the point, converged or not (unpreconditioned GMRES(20) on the
        // larger convection problem may hit the limit).
        let p = SolveParams {
            rel_tol: 1e-6,
            max_iters: 300,
            ..Default::default()
        };
        let swept = segsparse::precond::IncompleteParams {
            jacobi_sweeps: 3,
            ..Default::default()
        };
        for (m_spd, m_non) in [(20usize, 60usize), (36, 220)] {
            let spd = generate::poisson3d::<f64>(m_spd).unwrap();
            let non = convection(m_non, 0.6);
            let large = spd.nrows() > be.fused_rows();
            assert_eq!(
                large,
                non.nrows() > be.fused_rows(),
                "sizes on one side of the bound"
            );
            let da = GpuCsr::upload(&g, &spd).unwrap();
            let du = GpuCsr::upload(&g, &non).unwrap();
            let jac = Jacobi::from_matrix(be, &spd).unwrap();
            let njac = Jacobi::from_matrix(be, &non).unwrap();
            let amg = Amg::new(be, &spd, &AmgParams::default()).unwrap();
            let ilu = Ilu0::new(be, &non, &Default::default()).unwrap();
            let silu = Ilu0::new(be, &non, &swept).unwrap();
            let (a, u) = (&da, &du);
            type Run<'a> =
                Box<dyn Fn(&GpuOps<f64>, &[V], &mut [V]) -> Result<MultiInfo, SolveError> + 'a>;
            let cases: Vec<(&str, bool, Run<'_>)> = vec![
                ("cg", true, Box::new(|e, b, x| multi::cg(e, a, b, x, &p))),
                (
                    "pcg jacobi",
                    true,
                    Box::new(|e, b, x| multi::pcg(e, a, &jac, b, x, &p)),
                ),
                (
                    "pcg amg",
                    true,
                    Box::new(|e, b, x| multi::pcg(e, a, &amg, b, x, &p)),
                ),
                (
                    "bicgstab",
                    false,
                    Box::new(|e, b, x| multi::bicgstab(e, u, &Identity, b, x, &p)),
                ),
                (
                    "bicgstab jacobi",
                    false,
                    Box::new(|e, b, x| multi::bicgstab(e, u, &njac, b, x, &p)),
                ),
                (
                    "bicgstab ilu0 swept",
                    false,
                    Box::new(|e, b, x| multi::bicgstab(e, u, &silu, b, x, &p)),
                ),
                (
                    "gmres",
                    false,
                    Box::new(|e, b, x| multi::gmres(e, u, &Identity, b, x, 20, &p)),
                ),
                (
                    "gmres jacobi",
                    false,
                    Box::new(|e, b, x| multi::gmres(e, u, &njac, b, x, 20, &p)),
                ),
                (
                    "gmres ilu0",
                    false,
                    Box::new(|e, b, x| multi::gmres(e, u, &ilu, b, x, 20, &p)),
                ),
                (
                    "gmres ilu0 swept",
                    false,
                    Box::new(|e, b, x| multi::gmres(e, u, &silu, b, x, 20, &p)),
                ),
                (
                    "gmres amg",
                    true,
                    Box::new(|e, b, x| multi::gmres(e, a, &amg, b, x, 20, &p)),
                ),
            ];
            for (what, on_spd, run) in &cases {
                let what = format!(
                    "{what} (n = {})",
                    if *on_spd { spd.nrows() } else { non.nrows() }
                );
                let n = if *on_spd { spd.nrows() } else { non.nrows() };
                // 35 columns: more than one launch of 32.
                let mut bs = rhs(n, 35);
                bs[3] = vec![0.0; n];
                bs[5] = smooth(n);
                let go = |e: &GpuOps<f64>| {
                    let db: Vec<V> = bs.iter().map(|b| g.upload(b).unwrap()).collect();
                    let mut dx: Vec<V> = (0..bs.len())
                        .map(|_| g.upload(&vec![0.0; n]).unwrap())
                        .collect();
                    let info = run(e, &db, &mut dx).unwrap_or_else(|err| panic!("{what}: {err}"));
                    let x: Vec<Vec<f64>> = dx.iter().map(|v| g.download(v).unwrap()).collect();
                    (info, x)
                };
                let (bi, bx) = go(be);
                let (ci, cx) = go(col);
                eprintln!("{what}: block iterations {:?}", bi.iterations());
                same_columns(&what, outcomes(&bi, &bx), outcomes(&ci, &cx));
            }
        }
    }

    /// On the GPU too, columns that stop early (a zero column converges at once, a NaN column
    /// fails at once) leave the others' bits unchanged: each column of a block step reads and
    /// writes only its own buffers.
    #[test]
    fn gpu_early_column_leaves_the_others_unchanged() {
        let Some(g) = test_gpu() else { return };
        let be = &GpuOps::<f64>::new(&g).unwrap();
        let p = params();
        let spd = generate::poisson3d::<f64>(20).unwrap();
        let non = convection(60, 0.6);
        let (a, u) = (
            &GpuCsr::upload(&g, &spd).unwrap(),
            &GpuCsr::upload(&g, &non).unwrap(),
        );
        let amg = Amg::new(be, &spd, &AmgParams::default()).unwrap();
        let ilu = Ilu0::new(be, &non, &Default::default()).unwrap();
        type Run<'a> = Box<dyn Fn(&[V], &mut [V]) -> Result<MultiInfo, SolveError> + 'a>;
        let runs: Vec<(&str, bool, Run<'_>)> = vec![
            ("cg", true, Box::new(|b, x| multi::cg(be, a, b, x, &p))),
            (
                "pcg amg",
                true,
                Box::new(|b, x| multi::pcg(be, a, &amg, b, x, &p)),
            ),
            (
                "bicgstab ilu0",
                false,
                Box::new(|b, x| multi::bicgstab(be, u, &ilu, b, x, &p)),
            ),
            (
                "gmres ilu0",
                false,
                Box::new(|b, x| multi::gmres(be, u, &ilu, b, x, 20, &p)),
            ),
        ];
        for (what, on_spd, run) in &runs {
            let n = if *on_spd { spd.nrows() } else { non.nrows() };
            let mut bs = rhs(n, 5);
            bs[1] = smooth(n);
            bs[2] = vec![0.0; n];
            bs[3][7] = f64::NAN;
            let go = |b: &[Vec<f64>]| {
                let db: Vec<V> = b.iter().map(|c| g.upload(c).unwrap()).collect();
                let mut dx: Vec<V> = (0..b.len())
                    .map(|_| g.upload(&vec![0.0; n]).unwrap())
                    .collect();
                let info = run(&db, &mut dx).unwrap();
                let x: Vec<Vec<f64>> = dx.iter().map(|v| g.download(v).unwrap()).collect();
                (info, x)
            };
            let its = go(&bs).0.iterations();
            eprintln!("{what}: iterations {its:?}");
            assert_eq!(its[2], 0, "{what}: the zero column stops at once");
            others_unchanged(what, &bs, &[0, 1, 4], &go);
        }
    }
}
