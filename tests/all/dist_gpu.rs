//! The distributed solvers on 1 and 2 GPUs over NCCL, against the single-GPU solve.
//!
//! Skipped with a notice where there is no GPU or no NCCL, but failing under
//! `SEGSPARSE_REQUIRE_GPU=1` (the GPU machine) when a GPU exists and NCCL or the solve fails. The
//! 2-GPU cases skip with a notice on a machine of one GPU, unless `SEGSPARSE_REQUIRE_GPUS=N`
//! (set by `benches/scaleout/device.sh` to the machine's GPU count) says N GPUs must be there:
//! then a case needing at most N GPUs fails instead of skipping when fewer work.
#![cfg(feature = "nccl")]

use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Identity, VectorOps};
use segsparse::dist::nccl::{nccl_available, run_threads, DistCsr, NcclOps};
use segsparse::dist::{poisson3d_block, Partition, RowBlock};
use segsparse::gpu::{gpu_required, Gpu};
use segsparse::precond::Jacobi;
use segsparse::solvers::{bicgstab, cg, pcg, SolveInfo, SolveParams};
use segsparse::spmv::gpu::GpuCsr;
use segsparse::CsrMatrix;

use crate::common::dist::convection;

/// The number of usable GPUs, or `None` (with a notice) when the test must skip.
fn gpus(need: usize) -> Option<usize> {
    let n = match Gpu::new() {
        Ok(_) => cudarc::driver::CudaContext::device_count().unwrap_or(0) as usize,
        Err(e) if gpu_required() => panic!("SEGSPARSE_REQUIRE_GPU=1 but no GPU: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return None;
        }
    };
    if let Err(e) = nccl_available() {
        if gpu_required() {
            panic!("SEGSPARSE_REQUIRE_GPU=1, a GPU exists, but {e}");
        }
        eprintln!("skipped: {e}");
        return None;
    }
    if n < need {
        let required: usize = std::env::var("SEGSPARSE_REQUIRE_GPUS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if required >= need {
            panic!("SEGSPARSE_REQUIRE_GPUS={required} but only {n} GPUs work");
        }
        eprintln!("skipped: {need} GPUs needed, {n} present");
        return None;
    }
    Some(n)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Method {
    Cg,
    Jacobi,
    Bicgstab,
}

fn params() -> SolveParams<'static> {
    SolveParams {
        rel_tol: 1e-10,
        ..Default::default()
    }
}

fn single_gpu(a: &CsrMatrix<f64>, b: &[f64], m: Method) -> (SolveInfo, Vec<f64>) {
    let gpu = Gpu::new().unwrap();
    let ops = GpuOps::<f64>::new(&gpu).unwrap();
    let g = GpuCsr::upload(&gpu, a).unwrap();
    let db = ops.upload(b).unwrap();
    let mut x = ops.zeros(a.nrows()).unwrap();
    let info = match m {
        Method::Cg => cg(&ops, &g, &db, &mut x, &params()),
        Method::Jacobi => {
            let j = Jacobi::from_diagonal(&ops, &a.diagonal()).unwrap();
            pcg(&ops, &g, &j, &db, &mut x, &params())
        }
        Method::Bicgstab => bicgstab(&ops, &g, &Identity, &db, &mut x, &params()),
    }
    .unwrap();
    (info, ops.download(&x).unwrap())
}

/// Solves on `k` GPUs (a thread each); returns each rank's info and the assembled x.
fn distributed(a: &CsrMatrix<f64>, b: &[f64], k: usize, m: Method) -> (Vec<SolveInfo>, Vec<f64>) {
    let part = Partition::by_nnz(a.row_ptr(), k);
    let out = run_threads(k, |rank| {
        let d = DistCsr::from_global(&rank, a, &part)?;
        let ops = NcclOps::<f64>::new(&rank)?;
        let rows = d.owned_rows();
        let db = ops.upload(&b[rows.start as usize..rows.end as usize])?;
        let mut x = ops.zeros(d.info().n_owned)?;
        let info = match m {
            Method::Cg => cg(&ops, &d, &db, &mut x, &params()),
            Method::Jacobi => {
                let diag = a.diagonal()[rows.start as usize..rows.end as usize].to_vec();
                let j = Jacobi::from_diagonal(&ops, &diag)?;
                pcg(&ops, &d, &j, &db, &mut x, &params())
            }
            Method::Bicgstab => bicgstab(&ops, &d, &Identity, &db, &mut x, &params()),
        }
        .map_err(segsparse::Error::from)?;
        Ok((info, ops.download(&x)?))
    })
    .unwrap_or_else(|e| panic!("distributed solve on {k} GPUs failed: {e}"));
    let infos = out.iter().map(|o| o.0.clone()).collect();
    (infos, out.into_iter().flat_map(|o| o.1).collect())
}

fn check(k: usize) {
    let spd = segsparse::generate::poisson3d::<f64>(24).unwrap();
    let uns = convection(90, 0.3);
    for (a, m) in [
        (&spd, Method::Cg),
        (&spd, Method::Jacobi),
        (&uns, Method::Bicgstab),
    ] {
        let b: Vec<f64> = (0..a.nrows())
            .map(|i| 1.0 + ((i * 7919) % 13) as f64 / 13.0)
            .collect();
        let (one, x1) = single_gpu(a, &b, m);
        let (infos, x) = distributed(a, &b, k, m);
        for i in &infos {
            assert_eq!(i.iterations, infos[0].iterations, "ranks disagree");
        }
        let it = infos[0].iterations;
        assert!(
            it.abs_diff(one.iterations) <= 1,
            "{m:?} on {k} GPUs: {it} iterations, 1 GPU {}",
            one.iterations
        );
        assert!(
            infos[0].relative_residual <= 1e-10,
            "{m:?}: residual {}",
            infos[0].relative_residual
        );
        let scale = x1.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let err = x
            .iter()
            .zip(&x1)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err <= 1e-7 * scale, "{m:?} on {k} GPUs: |x - x1| = {err}");
        println!(
            "{m:?} on {k} GPUs: {it} iterations (1 GPU: {}), residual {:.2e}",
            one.iterations, infos[0].relative_residual
        );
    }
}

#[test]
fn distributed_solvers_on_one_gpu() {
    if gpus(1).is_some() {
        check(1);
    }
}

#[test]
fn distributed_solvers_on_two_gpus() {
    if gpus(2).is_some() {
        check(2);
    }
}

#[test]
fn distributed_product_on_two_gpus_matches_the_host() {
    if gpus(2).is_none() {
        return;
    }
    let (nx, ny, nz) = (37u64, 29, 23);
    let n = nx * ny * nz;
    let part = Partition::by_rows(n, 2);
    let x: Vec<f64> = (0..n).map(|i| ((i * 31) % 17) as f64 - 8.0).collect();
    let out = run_threads(2, |rank| {
        let block: RowBlock<f64> = poisson3d_block((nx, ny, nz), part.rows(rank.rank()))?;
        let d = DistCsr::from_block(&rank, &block, &part)?;
        let ops = NcclOps::<f64>::new(&rank)?;
        let rows = d.owned_rows();
        let dx = ops.upload(&x[rows.start as usize..rows.end as usize])?;
        let mut y = ops.upload(&vec![f64::NAN; d.info().n_owned])?;
        for _ in 0..3 {
            d.spmv(&dx, &mut y)?;
        }
        let t = d.measure(&dx, &mut y, 5)?;
        assert!(t.full > 0.0 && t.exchange > 0.0 && (0.0..=1.0).contains(&t.overlap));
        ops.download(&y)
    })
    .unwrap();
    let whole = poisson3d_block::<f64>((nx, ny, nz), 0..n).unwrap();
    let got: Vec<f64> = out.concat();
    for (i, g) in got.iter().enumerate() {
        let want: f64 = (whole.row_ptr[i] as usize..whole.row_ptr[i + 1] as usize)
            .map(|k| whole.vals[k] * x[whole.cols[k] as usize])
            .sum();
        assert!(
            (g - want).abs() <= 1e-12 * (1.0 + want.abs()),
            "row {i}: {g} vs {want}"
        );
    }
}

// --- issue 22: preconditioners across GPUs, the timing model, and the measured costs ----------

use segsparse::backend::Preconditioner;
use segsparse::dist::nccl::{auto_gpus, measure_costs};
use segsparse::dist::{
    choose_gpus, solve_rank, DistPart, DistPrecond, DistSolve, IterationWork, Krylov, LocalPrecond,
    ProblemStats,
};
use segsparse::precond::{Amg, AmgParams, Ic0, IncompleteParams};
use segsparse::precond::{Chebyshev, ChebyshevParams};

fn ip() -> IncompleteParams {
    IncompleteParams {
        auto_shift: true,
        ..Default::default()
    }
}

/// The preconditioners checked on GPUs: block-Jacobi IC(0) and AMG, the distributed polynomial.
fn dist_preconds() -> Vec<DistPrecond> {
    vec![
        DistPrecond::BlockJacobi(LocalPrecond::Ic0(ip())),
        DistPrecond::BlockJacobi(LocalPrecond::Amg(AmgParams::default())),
        DistPrecond::Chebyshev(ChebyshevParams::default()),
    ]
}

/// PCG on one GPU (no distributed layer) with the one-device form of `p`.
fn single_gpu_precond(a: &CsrMatrix<f64>, b: &[f64], p: &DistPrecond) -> SolveInfo {
    let gpu = Gpu::new().unwrap();
    let ops = GpuOps::<f64>::new(&gpu).unwrap();
    let g = GpuCsr::upload(&gpu, a).unwrap();
    let db = ops.upload(b).unwrap();
    let mut x = ops.zeros(a.nrows()).unwrap();
    let m: Box<dyn Preconditioner<f64, GpuOps<f64>>> = match p {
        DistPrecond::BlockJacobi(LocalPrecond::Ic0(q)) => Box::new(Ic0::new(&ops, a, q).unwrap()),
        DistPrecond::BlockJacobi(LocalPrecond::Amg(q)) => Box::new(Amg::new(&ops, a, q).unwrap()),
        DistPrecond::Chebyshev(q) => Box::new(Chebyshev::from_matrix(&ops, &g, a, q).unwrap()),
        other => panic!("{}", other.name()),
    };
    pcg(&ops, &g, &*m, &db, &mut x, &params()).unwrap()
}

/// `dist::solve_rank` on `k` GPUs; every rank's (info, setup, solve, wall).
fn dist_gpu_solve(
    a: &CsrMatrix<f64>,
    b: &[f64],
    k: usize,
    p: DistPrecond,
) -> Vec<(SolveInfo, f64, f64, f64)> {
    let part = Partition::by_nnz(a.row_ptr(), k);
    let what = DistSolve {
        method: Krylov::Cg,
        precond: p,
        params: params(),
    };
    run_threads(k, |rank| {
        let wall = std::time::Instant::now();
        let block = RowBlock::from_csr(a, part.rows(rank.rank()))?;
        let dp = DistPart::build(&block, &part, rank.rank(), |need| rank.all_to_all_u64(need))?;
        let d = DistCsr::upload(&rank, &dp)?;
        let ops = NcclOps::<f64>::new(&rank)?;
        let rows = d.owned_rows();
        let mut x = vec![0.0; d.info().n_owned];
        let prior = wall.elapsed().as_secs_f64();
        let o = solve_rank(
            &ops,
            &d,
            &dp.owned,
            dp.first_row,
            &b[rows.start as usize..rows.end as usize],
            &mut x,
            &what,
            prior,
        )?;
        let info = o.result.map_err(segsparse::Error::from)?;
        Ok((
            info,
            o.setup_seconds,
            o.solve_seconds,
            wall.elapsed().as_secs_f64(),
        ))
    })
    .unwrap_or_else(|e| panic!("{} on {k} GPUs: {e}", p.name()))
}

fn check_preconds(k: usize) {
    let a = segsparse::generate::poisson3d::<f64>(20).unwrap();
    let b: Vec<f64> = (0..a.nrows())
        .map(|i| 1.0 + ((i * 7919) % 13) as f64 / 13.0)
        .collect();
    for p in dist_preconds() {
        let one = single_gpu_precond(&a, &b, &p).iterations;
        let outs = dist_gpu_solve(&a, &b, k, p);
        let it = outs[0].0.iterations;
        for (info, setup, solve, wall) in &outs {
            assert_eq!(info.iterations, it, "ranks disagree");
            assert!(info.relative_residual <= 1e-10);
            assert!(*setup > 0.0 && *solve > 0.0 && setup + solve <= *wall);
            assert_eq!(info.setup_seconds, *setup);
            assert!(info.solve_seconds <= *solve);
        }
        println!("{} on {k} GPUs: {it} iterations (1 GPU: {one})", p.name());
        // One rank: the one-GPU preconditioner. Two: block-Jacobi IC(0) within 1.4× (on 2
        // H200s, 2026-11-24: 38 against 29 on this 20³ problem, 193 against 154 at 128³, where
        // the cut is a smaller share of the rows), else the bounds of tests/all/dist_sim.rs.
        let bound = match (k, p) {
            (1, _) | (_, DistPrecond::Chebyshev(_)) => one + 1,
            (_, DistPrecond::BlockJacobi(LocalPrecond::Ic0(_))) => (1.4 * one as f64) as usize,
            _ => 4 * one,
        };
        assert!(
            it <= bound && (k > 1 || it + 1 >= one),
            "{} on {k} GPUs: {it} iterations, 1 GPU {one}",
            p.name()
        );
    }
}

#[test]
fn distributed_preconditioners_on_one_gpu() {
    if gpus(1).is_some() {
        check_preconds(1);
    }
}

#[test]
fn distributed_preconditioners_on_two_gpus() {
    if gpus(2).is_some() {
        check_preconds(2);
    }
}

#[test]
fn measured_costs_on_two_gpus_and_the_auto_choice() {
    if gpus(2).is_none() {
        return;
    }
    let all = run_threads(2, |rank| measure_costs(&rank)).unwrap();
    let c = all[0];
    assert_eq!(all[1], c, "every rank gets the same costs");
    assert_eq!(c.gpus, 2);
    for v in [
        c.allreduce_seconds,
        c.halo_latency_seconds,
        c.halo_bytes_per_second,
        c.device_bytes_per_second,
    ] {
        assert!(v.is_finite() && v > 0.0, "{c:?}");
    }
    assert!(c.device_memory_bytes > 0, "{c:?}");
    println!("measured: {c:?}");
    // A tiny problem stays on one GPU; Poisson 3D 512³ (stats only, nothing allocated) is
    // worth every GPU on any machine of this kind.
    let tiny = ProblemStats::from_csr(
        &segsparse::generate::poisson3d::<f64>(12).unwrap(),
        IterationWork::cg(),
    );
    assert_eq!(choose_gpus(&tiny, &c), 1);
    let n = 512u64;
    let big = ProblemStats {
        rows: n * n * n,
        nnz: 7 * n * n * n,
        scalar_bytes: 8,
        halo_per_cut: n * n,
        work: IterationWork::cg(),
    };
    assert_eq!(choose_gpus(&big, &c), 2);
    // auto_gpus measures on every GPU of the machine.
    let r = auto_gpus(&big);
    assert!(r.note.is_none(), "{:?}", r.note);
    assert!(r.costs.is_some() && r.probe_seconds > 0.0);
    assert_eq!(r.gpus, Gpu::device_count());
    assert_eq!(auto_gpus(&tiny).gpus, 1);
}
