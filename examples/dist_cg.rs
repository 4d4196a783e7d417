//! Distributed CG (or Jacobi-PCG, BiCGSTAB) on the 7-point Poisson problem over several GPUs,
//! each rank generating only its own rows. Three modes:
//!
//! ```text
//! # one process, a thread per GPU:
//! cargo run --release --example dist_cg -- threads --gpus 2 --grid 256
//! # the same solver on one GPU without the distributed layer (the reference):
//! cargo run --release --example dist_cg -- single --grid 256
//! # one process per GPU (mpirun only starts the processes; NCCL does the communication, the
//! # unique id travels through a file on a shared filesystem):
//! rm -f /tmp/nccl.id
//! mpirun -np 2 -x SEGSPARSE_NCCL_ID_FILE=/tmp/nccl.id target/release/examples/dist_cg process --grid 256
//! # ... or without MPI, one command per GPU:
//! SEGSPARSE_RANK=0 SEGSPARSE_NRANKS=2 dist_cg process --grid 256 &
//! SEGSPARSE_RANK=1 SEGSPARSE_NRANKS=2 dist_cg process --grid 256
//! ```
//!
//! Options: `--grid N` or `--grid NXxNYxNZ`, `--f32`, `--method cg|jacobi|bicgstab`,
//! `--tol 1e-8`, `--max-iters N`, `--reps N` (products timed for the halo report).
//! Rank 0 prints one `key=value` line per solve; each rank prints its halo timings.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use segsparse::dist::nccl::{run_threads, DistCsr, DistScalar, NcclId, NcclOps, Rank};
use segsparse::dist::{poisson3d_block, Partition};
use segsparse::solvers::{
    bicgstab, cg, pcg, Identity, Jacobi, LinearOperator, SolveError, SolveParams, VectorOps,
};

#[derive(Clone, Debug)]
struct Opts {
    mode: String,
    gpus: usize,
    grid: (u64, u64, u64),
    f32: bool,
    method: String,
    tol: f64,
    max_iters: usize,
    reps: usize,
}

fn parse() -> Result<Opts, String> {
    let mut a = std::env::args().skip(1);
    let mut o = Opts {
        mode: a
            .next()
            .ok_or("usage: dist_cg threads|single|process [options]")?,
        gpus: 1,
        grid: (64, 64, 64),
        f32: false,
        method: "cg".into(),
        tol: 1e-8,
        max_iters: 20_000,
        reps: 50,
    };
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--gpus" => o.gpus = v()?.parse().map_err(|e| format!("--gpus: {e}"))?,
            "--grid" => {
                let s = v()?;
                let d: Vec<u64> = s
                    .split('x')
                    .map(|t| t.parse().map_err(|e| format!("--grid {s}: {e}")))
                    .collect::<Result<_, _>>()?;
                o.grid = match d[..] {
                    [n] => (n, n, n),
                    [x, y, z] => (x, y, z),
                    _ => return Err(format!("--grid {s}: N or NXxNYxNZ")),
                };
            }
            "--f32" => o.f32 = true,
            "--method" => o.method = v()?,
            "--tol" => o.tol = v()?.parse().map_err(|e| format!("--tol: {e}"))?,
            "--max-iters" => o.max_iters = v()?.parse().map_err(|e| format!("--max-iters: {e}"))?,
            "--reps" => o.reps = v()?.parse().map_err(|e| format!("--reps: {e}"))?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    Ok(o)
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Runs `--method` with the backend `be` and operator `a` (`diag`: the diagonal for Jacobi);
/// returns (iterations, true relative residual, converged). Non-convergence is a result here
/// (fixed-iteration timing runs), other failures are errors.
fn solve<T: DistScalar, B: VectorOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    a: &A,
    diag: &[T],
    b: &B::Vector,
    x: &mut B::Vector,
    o: &Opts,
) -> Res<(usize, f64, bool)> {
    let params = SolveParams {
        rel_tol: o.tol,
        max_iters: o.max_iters,
        record_history: false,
        ..Default::default()
    };
    let r = match o.method.as_str() {
        "cg" => cg(be, a, b, x, &params),
        "jacobi" => {
            let jac = Jacobi::from_diagonal(be, diag)?;
            pcg(be, a, &jac, b, x, &params)
        }
        "bicgstab" => bicgstab(be, a, &Identity, b, x, &params),
        m => return Err(format!("unknown method {m}").into()),
    };
    match r {
        Ok(info) => Ok((info.iterations, info.relative_residual, true)),
        Err(SolveError::NotConverged {
            iterations,
            residual,
        }) => Ok((iterations, residual, false)),
        Err(e) => Err(e.into()),
    }
}

/// One rank's solve: generate its rows, set up, time the product, solve.
fn rank_solve<T: DistScalar>(rank: Rank, o: &Opts) -> Res<()> {
    let (nx, ny, nz) = o.grid;
    let n = nx * ny * nz;
    let part = Partition::by_rows(n, rank.size());
    let t0 = Instant::now();
    let block = poisson3d_block::<T>(o.grid, part.rows(rank.rank()))?;
    let nnz_local = block.nnz() as f64;
    let a = DistCsr::from_block(&rank, &block, &part)?;
    drop(block);
    let ops = NcclOps::<T>::new(&rank)?;
    let nnz = rank.sum_f64(nnz_local)?;
    let setup = t0.elapsed().as_secs_f64();
    let nl = a.info().n_owned;
    let b = ops.upload(&vec![T::one(); nl])?;
    let mut x = ops.zeros(nl)?;
    let mut y = ops.zeros(nl)?;
    let tm = a.measure(&b, &mut y, o.reps)?;
    println!(
        "rank={} rows={} halo={} send={} boundary_rows={} spmv_ms={:.4} halo_ms={:.4} local_ms={:.4} overlap={:.2}",
        rank.rank(),
        nl,
        a.info().n_halo,
        a.info().n_send,
        a.info().n_boundary,
        tm.full * 1e3,
        tm.exchange * 1e3,
        tm.local * 1e3,
        tm.overlap
    );
    let t = Instant::now();
    let (iters, res, ok) = solve(&ops, &a, &vec![T::of_f64(6.0); nl], &b, &mut x, o)?;
    let wall = t.elapsed().as_secs_f64();
    if rank.rank() == 0 {
        println!(
            "mode={} method={} prec={} grid={}x{}x{} n={} nnz={} gpus={} iters={} rel_res={:.3e} converged={} setup_s={:.2} solve_s={:.4} per_iter_ms={:.4} spmv_ms={:.4} halo_ms={:.4} overlap={:.2}",
            o.mode, o.method, if o.f32 { "f32" } else { "f64" }, nx, ny, nz, n, nnz as u64, rank.size(), iters, res, ok, setup, wall,
            wall / iters.max(1) as f64 * 1e3, tm.full * 1e3, tm.exchange * 1e3, tm.overlap
        );
    }
    Ok(())
}

/// The same solver on one GPU without the distributed layer (GpuOps + GpuCsr).
fn single<T: DistScalar>(o: &Opts) -> Res<()> {
    use segsparse::solvers::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let (nx, ny, nz) = o.grid;
    let gpu = segsparse::gpu::Gpu::new()?;
    let t0 = Instant::now();
    let blk = poisson3d_block::<T>(o.grid, 0..nx * ny * nz)?;
    let row_ptr: Vec<u32> = blk
        .row_ptr
        .iter()
        .map(|&p| u32::try_from(p))
        .collect::<Result<_, _>>()?;
    let cols: Vec<u32> = blk.cols.iter().map(|&c| c as u32).collect();
    let n = blk.nrows();
    let a = segsparse::CsrMatrix::try_from_parts(n, n, row_ptr, cols, blk.vals)?;
    let g = GpuCsr::upload(&gpu, &a)?;
    let ops = GpuOps::<T>::new(&gpu)?;
    let setup = t0.elapsed().as_secs_f64();
    let b = ops.upload(&vec![T::one(); n])?;
    let mut x = ops.zeros(n)?;
    let t = Instant::now();
    let (iters, res, _) = solve(&ops, &g, &a.diagonal(), &b, &mut x, o)?;
    let wall = t.elapsed().as_secs_f64();
    println!(
        "mode=single method={} prec={} grid={}x{}x{} n={} nnz={} gpus=1 iters={} rel_res={:.3e} setup_s={:.2} solve_s={:.4} per_iter_ms={:.4}",
        o.method, if o.f32 { "f32" } else { "f64" }, nx, ny, nz, n, a.nnz(), iters, res, setup, wall, wall / iters.max(1) as f64 * 1e3
    );
    Ok(())
}

fn env_usize(keys: &[&str]) -> Option<usize> {
    keys.iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

fn main() -> Res<()> {
    let o = parse()?;
    match (o.mode.as_str(), o.f32) {
        ("single", false) => single::<f64>(&o),
        ("single", true) => single::<f32>(&o),
        ("threads", f32) => {
            run_threads(o.gpus, |rank| {
                let r = if f32 {
                    rank_solve::<f32>(rank, &o)
                } else {
                    rank_solve::<f64>(rank, &o)
                };
                r.map_err(|e| segsparse::Error::Solver(e.to_string()))
            })?;
            Ok(())
        }
        ("process", f32) => {
            let rank = env_usize(&["OMPI_COMM_WORLD_RANK", "PMI_RANK", "SEGSPARSE_RANK"])
                .ok_or("no rank: run under mpirun or set SEGSPARSE_RANK")?;
            let size = env_usize(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SEGSPARSE_NRANKS"])
                .ok_or("no size: run under mpirun or set SEGSPARSE_NRANKS")?;
            let device =
                env_usize(&["OMPI_COMM_WORLD_LOCAL_RANK", "SEGSPARSE_DEVICE"]).unwrap_or(rank);
            let path = PathBuf::from(
                std::env::var("SEGSPARSE_NCCL_ID_FILE")
                    .unwrap_or_else(|_| "/tmp/segsparse-nccl.id".into()),
            );
            let id = match std::env::var("SEGSPARSE_NCCL_ID") {
                Ok(hex) => NcclId::from_hex(&hex)?,
                Err(_) => NcclId::share_via_file(&path, rank, Duration::from_secs(60))?,
            };
            let r = Rank::init(device, rank, size, &id)?;
            if f32 {
                rank_solve::<f32>(r, &o)
            } else {
                rank_solve::<f64>(r, &o)
            }
        }
        (m, _) => Err(format!("unknown mode {m}: threads, single or process").into()),
    }
}
