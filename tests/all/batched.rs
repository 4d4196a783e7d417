//! Batched solves: the CPU path (one single-system solve per system) converges with per-system
//! statuses, a bad system fails alone, bad shapes are clear errors; the GPU batch (one kernel
//! for the whole batch) equals the one-by-one solves: same status, solutions to the tolerance,
//! iteration counts within a few. GPU tests skip without a device and fail instead under
//! `SEGSPARSE_REQUIRE_GPU=1`.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::batched::{
    solve_cpu, solve_one, BatchCsr, BatchMethod, BatchParams, BatchPrecond, BatchStatus,
};
use segsparse::{generate, CsrMatrix, Error, Scalar};

/// A random sparse diagonally dominant matrix: symmetric (SPD) when `symmetric`, else with
/// independent values in the mirrored positions.
fn random_dd<T: Scalar>(n: usize, per_row: usize, symmetric: bool, seed: u64) -> CsrMatrix<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for i in 0..n {
        for _ in 0..per_row {
            let j = rng.gen_range(0..n);
            if j == i {
                continue;
            }
            let v: f64 = rng.gen_range(-1.0..0.0);
            *m.entry((i, j)).or_default() += v;
            let w = if symmetric {
                v
            } else {
                rng.gen_range(-1.0..1.0)
            };
            *m.entry((j, i)).or_default() += w;
        }
    }
    let mut rowsum = vec![0.0f64; n];
    for (&(i, _), v) in &m {
        rowsum[i] += v.abs();
    }
    let mut t: Vec<(usize, usize, T)> = m
        .into_iter()
        .map(|((i, j), v)| (i, j, T::of_f64(v)))
        .collect();
    for (i, s) in rowsum.iter().enumerate() {
        t.push((i, i, T::of_f64(s + 0.5)));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn spd_batch<T: Scalar>(count: usize, seed: u64) -> Vec<CsrMatrix<T>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|s| match s % 4 {
            0 => generate::poisson2d(rng.gen_range(3..12)).unwrap(),
            1 => generate::poisson3d(rng.gen_range(2..6)).unwrap(),
            _ => random_dd(rng.gen_range(1..200), 4, true, seed + s as u64),
        })
        .collect()
}

fn nonsym_batch<T: Scalar>(count: usize, seed: u64) -> Vec<CsrMatrix<T>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|s| random_dd(rng.gen_range(1..250), 5, false, seed + 100 + s as u64))
        .collect()
}

fn rhs<T: Scalar>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
        .collect()
}

fn params(method: BatchMethod, precond: BatchPrecond, tol: f64) -> BatchParams {
    BatchParams {
        method,
        precond,
        rel_tol: tol,
        max_iters: 2000,
        restart: 20,
        ..Default::default()
    }
}

const CASES: [(BatchMethod, BatchPrecond, bool); 9] = [
    (BatchMethod::Cg, BatchPrecond::None, true),
    (BatchMethod::Cg, BatchPrecond::Jacobi, true),
    (BatchMethod::Bicgstab, BatchPrecond::None, false),
    (BatchMethod::Bicgstab, BatchPrecond::Jacobi, false),
    (BatchMethod::Gmres, BatchPrecond::None, false),
    (BatchMethod::Gmres, BatchPrecond::Jacobi, false),
    (BatchMethod::Cg, BatchPrecond::Ilu0, true),
    (BatchMethod::Bicgstab, BatchPrecond::Ilu0, false),
    (BatchMethod::Gmres, BatchPrecond::Ilu0, false),
];

#[test]
fn cpu_batch_converges_and_equals_one_by_one() {
    for (method, precond, spd) in CASES {
        let ms: Vec<CsrMatrix<f64>> = if spd {
            spd_batch(24, 1)
        } else {
            nonsym_batch(24, 2)
        };
        let batch = BatchCsr::from_matrices(&ms).unwrap();
        assert_eq!(batch.len(), 24);
        let b = rhs::<f64>(batch.total_rows(), 3);
        let mut x = vec![f64::NAN; b.len()];
        let p = params(method, precond, 1e-10);
        let info = solve_cpu(&batch, &b, &mut x, &p).unwrap();
        assert_eq!(batch.len(), ms.len());
        for (s, m) in ms.iter().enumerate() {
            assert_eq!(
                info.status[s],
                BatchStatus::Converged,
                "{method:?} {precond:?} system {s}"
            );
            assert!(info.relative_residual[s] <= 1e-9, "{method:?} system {s}");
            // The batch path is the single-system path, system by system.
            let r = batch.row_range(s);
            let a = batch.system(s);
            assert_eq!(&a, m);
            let mut xs = vec![0.0; r.len()];
            let (st, it, _) = solve_one(&a, &b[r.clone()], &mut xs, &p).unwrap();
            assert_eq!((st, it), (info.status[s], info.iterations[s]));
            assert_eq!(&x[r], &xs[..]);
        }
    }
}

/// A NaN system, a zero-diagonal system (with Jacobi) and a zero right-hand side: each gets its
/// own status, and the others still converge.
fn troubled_batch() -> (Vec<CsrMatrix<f64>>, Vec<f64>) {
    let mut ms = spd_batch::<f64>(6, 9);
    let mut nan = ms[1].clone();
    nan.values_mut()[1] = f64::NAN; // off the diagonal: Jacobi still exists
    ms[1] = nan;
    let zd = CsrMatrix::from_triplets(3, 3, &[(0, 1, 1.0), (1, 0, 1.0), (2, 2, 1.0)]).unwrap();
    ms[3] = zd;
    let batch = BatchCsr::from_matrices(&ms).unwrap();
    let mut b = rhs::<f64>(batch.total_rows(), 4);
    for i in batch.row_range(4) {
        b[i] = 0.0;
    }
    (ms, b)
}

fn check_troubled(info: &segsparse::batched::BatchInfo, x: &[f64], batch: &BatchCsr<f64>) {
    for s in [0, 2, 5] {
        assert_eq!(info.status[s], BatchStatus::Converged, "system {s}");
    }
    assert_eq!(info.status[1], BatchStatus::NonFinite);
    assert_eq!(info.status[3], BatchStatus::ZeroDiagonal);
    assert_eq!(
        (info.status[4], info.iterations[4]),
        (BatchStatus::Converged, 0)
    );
    assert!(x[batch.row_range(4)].iter().all(|&v| v == 0.0));
}

#[test]
fn cpu_failed_systems_fail_alone() {
    let (ms, b) = troubled_batch();
    let batch = BatchCsr::from_matrices(&ms).unwrap();
    let mut x = vec![0.0; b.len()];
    let info = solve_cpu(
        &batch,
        &b,
        &mut x,
        &params(BatchMethod::Cg, BatchPrecond::Jacobi, 1e-10),
    )
    .unwrap();
    check_troubled(&info, &x, &batch);
}

/// ILU(0): the NaN system's factor fails (its pivots are not finite), as does the system
/// without diagonal entries; the others converge.
fn check_troubled_ilu(info: &segsparse::batched::BatchInfo, x: &[f64], batch: &BatchCsr<f64>) {
    for s in [0, 2, 5] {
        assert_eq!(info.status[s], BatchStatus::Converged, "system {s}");
    }
    assert_eq!(info.status[1], BatchStatus::ZeroDiagonal);
    assert_eq!(info.status[3], BatchStatus::ZeroDiagonal);
    assert_eq!(
        (info.status[4], info.iterations[4]),
        (BatchStatus::Converged, 0)
    );
    assert!(x[batch.row_range(4)].iter().all(|&v| v == 0.0));
}

#[test]
fn cpu_failed_systems_fail_alone_ilu0() {
    let (ms, b) = troubled_batch();
    let batch = BatchCsr::from_matrices(&ms).unwrap();
    let mut x = vec![0.0; b.len()];
    let p = params(BatchMethod::Gmres, BatchPrecond::Ilu0, 1e-10);
    let info = solve_cpu(&batch, &b, &mut x, &p).unwrap();
    check_troubled_ilu(&info, &x, &batch);
}

/// ILU(0) needs fewer iterations than Jacobi on the same batch (it is a better preconditioner
/// on these diagonally dominant systems), so the preconditioner is really applied.
#[test]
fn cpu_ilu0_beats_jacobi() {
    let ms: Vec<CsrMatrix<f64>> = nonsym_batch(12, 5);
    let batch = BatchCsr::from_matrices(&ms).unwrap();
    let b = rhs::<f64>(batch.total_rows(), 6);
    let mut x = vec![0.0; b.len()];
    let its = |pre| {
        let p = params(BatchMethod::Bicgstab, pre, 1e-10);
        let info = solve_cpu(&batch, &b, &mut x.clone(), &p).unwrap();
        assert_eq!(info.converged(), 12);
        info.iterations.iter().sum::<u32>()
    };
    let (ilu, jac) = (its(BatchPrecond::Ilu0), its(BatchPrecond::Jacobi));
    assert!(ilu < jac, "ILU(0) {ilu} iterations, Jacobi {jac}");
    x.clear();
}

#[test]
fn bad_shapes_are_clear_errors() {
    let rect = CsrMatrix::<f64>::zeros(3, 4);
    let e = BatchCsr::from_matrices(&[generate::poisson2d(3).unwrap(), rect]).unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)));
    assert!(e.to_string().contains("system 1 is 3×4, not square"), "{e}");
    let batch = BatchCsr::from_matrices(&spd_batch::<f64>(3, 1)).unwrap();
    let n = batch.total_rows();
    let mut x = vec![0.0; n];
    let e = solve_cpu(&batch, &vec![1.0; n - 1], &mut x, &BatchParams::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("b has {} and x has {n}", n - 1)),
        "{e}"
    );
    let p = BatchParams {
        method: BatchMethod::Gmres,
        restart: 0,
        ..Default::default()
    };
    let e = solve_cpu(&batch, &vec![1.0; n], &mut x, &p).unwrap_err();
    assert!(e.to_string().contains("restart = 0"), "{e}");
    // An empty batch is fine.
    let empty = BatchCsr::<f64>::from_matrices(&[]).unwrap();
    assert!(empty.is_empty());
    let info = solve_cpu(&empty, &[], &mut [], &BatchParams::default()).unwrap();
    assert!(info.status.is_empty());
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::batched::gpu::GpuBatch;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuScalar;

    fn norm(v: impl Iterator<Item = f64>) -> f64 {
        v.map(|x| x * x).sum::<f64>().sqrt()
    }

    fn gpu_equals_cpu<T: GpuScalar>(tol: f64, agree: f64) {
        let Some(g) = test_gpu() else { return };
        for (method, precond, spd) in CASES {
            let mut ms: Vec<CsrMatrix<T>> = if spd {
                spd_batch(40, 11)
            } else {
                nonsym_batch(40, 12)
            };
            // One system of 1024 rows: GMRES's vectors then live in global memory.
            ms.push(if spd {
                generate::poisson2d(32).unwrap()
            } else {
                random_dd(1024, 5, false, 77)
            });
            let batch = BatchCsr::from_matrices(&ms).unwrap();
            let b = rhs::<T>(batch.total_rows(), 5);
            let p = params(method, precond, tol);
            let mut xc = vec![T::zero(); b.len()];
            let ci = solve_cpu(&batch, &b, &mut xc, &p).unwrap();
            let gb = GpuBatch::upload(&g, &batch).unwrap();
            let db = g.upload(&b).unwrap();
            let mut dx = g.upload(&vec![T::nan(); b.len()]).unwrap();
            let gi = gb.solve(&db, &mut dx, &p).unwrap();
            let xg = g.download(&dx).unwrap();
            for s in 0..batch.len() {
                let what = format!(
                    "{} {method:?} {precond:?} system {s} ({} rows)",
                    T::NAME,
                    batch.row_range(s).len()
                );
                assert_eq!(gi.status[s], ci.status[s], "{what}");
                assert!(
                    gi.relative_residual[s] <= 10.0 * tol,
                    "{what}: residual {}",
                    gi.relative_residual[s]
                );
                let r = batch.row_range(s);
                let d = norm(r.clone().map(|i| xg[i].as_f64() - xc[i].as_f64()));
                let nx = norm(r.clone().map(|i| xc[i].as_f64()));
                assert!(
                    d <= agree * nx.max(1e-30),
                    "{what}: ‖x_gpu − x_cpu‖ = {d:e}, ‖x‖ = {nx:e}"
                );
                let (a, c) = (gi.iterations[s] as f64, ci.iterations[s] as f64);
                assert!(
                    (a - c).abs() <= 3.0 + 0.25 * c,
                    "{what}: iterations GPU {a}, CPU {c}"
                );
            }
        }
    }

    #[test]
    fn gpu_batch_equals_one_by_one_f64() {
        gpu_equals_cpu::<f64>(1e-10, 1e-6);
    }

    #[test]
    fn gpu_batch_equals_one_by_one_f32() {
        gpu_equals_cpu::<f32>(1e-5, 1e-2);
    }

    /// Real matrices (the corpus' small SPD ones) with ILU(0): the GPU batch equals the
    /// one-by-one CPU solves (CG on all four; GMRES where the CPU reference converges).
    #[test]
    fn gpu_batch_ilu0_corpus_equals_one_by_one() {
        let Some(g) = test_gpu() else { return };
        let mut ms: Vec<CsrMatrix<f64>> = Vec::new();
        for name in ["nos4", "gr_30_30", "1138_bus", "bcsstk01"] {
            let Some(a) = crate::common::mtx::load::<f64>(name) else {
                return;
            };
            ms.push(a.canonical().into_owned());
        }
        let batch = BatchCsr::from_matrices(&ms).unwrap();
        let b = rhs::<f64>(batch.total_rows(), 8);
        let gb = GpuBatch::upload(&g, &batch).unwrap();
        let db = g.upload(&b).unwrap();
        for method in [BatchMethod::Cg, BatchMethod::Gmres] {
            let p = BatchParams {
                restart: 30,
                max_iters: 5000,
                ..params(method, BatchPrecond::Ilu0, 1e-10)
            };
            let mut xc = vec![0.0; b.len()];
            let ci = solve_cpu(&batch, &b, &mut xc, &p).unwrap();
            let mut dx = g.zeros::<f64>(b.len()).unwrap();
            let gi = gb.solve(&db, &mut dx, &p).unwrap();
            let xg = g.download(&dx).unwrap();
            for s in 0..batch.len() {
                let what = format!("{method:?} ILU(0) corpus system {s}");
                // GMRES(30) + ILU(0) stagnates on 1138_bus one system at a time (the single
                // solver's Stagnation, a batch Breakdown): only converged references compare.
                if method == BatchMethod::Gmres && ci.status[s] != BatchStatus::Converged {
                    continue;
                }
                assert_eq!(ci.status[s], BatchStatus::Converged, "{what}");
                assert_eq!(gi.status[s], BatchStatus::Converged, "{what}");
                let r = batch.row_range(s);
                let d = norm(r.clone().map(|i| xg[i] - xc[i]));
                let nx = norm(r.clone().map(|i| xc[i]));
                assert!(
                    d <= 1e-5 * nx,
                    "{what}: ‖x_gpu − x_cpu‖ = {d:e}, ‖x‖ = {nx:e}"
                );
                let (a, c) = (gi.iterations[s] as f64, ci.iterations[s] as f64);
                assert!(
                    (a - c).abs() <= 3.0 + 0.25 * c,
                    "{what}: iterations GPU {a}, CPU {c}"
                );
            }
        }
    }

    #[test]
    fn gpu_failed_systems_fail_alone_ilu0() {
        let Some(g) = test_gpu() else { return };
        let (ms, b) = troubled_batch();
        let batch = BatchCsr::from_matrices(&ms).unwrap();
        let gb = GpuBatch::upload(&g, &batch).unwrap();
        let db = g.upload(&b).unwrap();
        for method in [BatchMethod::Cg, BatchMethod::Bicgstab, BatchMethod::Gmres] {
            let mut dx = g.zeros::<f64>(b.len()).unwrap();
            let p = params(method, BatchPrecond::Ilu0, 1e-10);
            let info = gb.solve(&db, &mut dx, &p).unwrap();
            check_troubled_ilu(&info, &g.download(&dx).unwrap(), &batch);
        }
        // Unsorted column indices: a clear error with ILU(0), fine with Jacobi.
        let a = CsrMatrix::try_from_parts(
            2,
            2,
            vec![0, 2, 4],
            vec![1, 0, 0, 1],
            vec![-1.0, 4.0, -1.0, 4.0],
        )
        .unwrap();
        let batch = BatchCsr::from_matrices(&[a]).unwrap();
        let gb = GpuBatch::upload(&g, &batch).unwrap();
        let db = g.upload(&[1.0, 2.0]).unwrap();
        let mut dx = g.zeros::<f64>(2).unwrap();
        let e = gb
            .solve(
                &db,
                &mut dx,
                &params(BatchMethod::Cg, BatchPrecond::Ilu0, 1e-10),
            )
            .unwrap_err();
        assert!(e.to_string().contains("not strictly increasing"), "{e}");
        let info = gb
            .solve(
                &db,
                &mut dx,
                &params(BatchMethod::Cg, BatchPrecond::Jacobi, 1e-10),
            )
            .unwrap();
        assert_eq!(info.status[0], BatchStatus::Converged);
    }

    #[test]
    fn gpu_failed_systems_fail_alone() {
        let Some(g) = test_gpu() else { return };
        let (ms, b) = troubled_batch();
        let batch = BatchCsr::from_matrices(&ms).unwrap();
        let gb = GpuBatch::upload(&g, &batch).unwrap();
        let db = g.upload(&b).unwrap();
        let mut dx = g.zeros::<f64>(b.len()).unwrap();
        let info = gb
            .solve(
                &db,
                &mut dx,
                &params(BatchMethod::Cg, BatchPrecond::Jacobi, 1e-10),
            )
            .unwrap();
        let x = g.download(&dx).unwrap();
        check_troubled(&info, &x, &batch);
        let e = gb
            .solve(
                &db,
                &mut g.zeros::<f64>(3).unwrap(),
                &BatchParams::default(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("x has 3 elements"), "{e}");
    }
}
