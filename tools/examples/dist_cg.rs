//! Distributed CG (or PCG, BiCGSTAB) on the 7-point Poisson problem over several GPUs, each
//! rank generating only its own rows. Three modes:
//!
//! ```text
//! # one process, a thread per GPU:
//! cargo run --release -p segsparse-tools --example dist_cg -- threads --gpus 2 --grid 256
//! # the same solver on one GPU without the distributed layer (the reference):
//! cargo run --release -p segsparse-tools --example dist_cg -- single --grid 256
//! # one process per GPU (mpirun only starts the processes; NCCL does the communication, the
//! # unique id travels through a file on a shared filesystem):
//! rm -f /tmp/nccl.id
//! mpirun -np 2 -x SEGSPARSE_NCCL_ID_FILE=/tmp/nccl.id target/release/examples/dist_cg process --grid 256
//! # ... or without MPI, one command per GPU:
//! SEGSPARSE_RANK=0 SEGSPARSE_NRANKS=2 dist_cg process --grid 256 &
//! SEGSPARSE_RANK=1 SEGSPARSE_NRANKS=2 dist_cg process --grid 256
//! ```
//!
//! Options: `--grid N` or `--grid NXxNYxNZ`, `--f32`, `--method cg|jacobi|bicgstab` (`jacobi`:
//! CG with `--precond jacobi`), `--precond none|jacobi|poly|block-poly|ilu0|ic0|amg|dist-amg` (on
//! several ranks `poly` is the distributed polynomial, `dist-amg` the distributed AMG, the others
//! block-Jacobi with that local solver), `--tol 1e-8`, `--max-iters N`, `--solves K` (the same system K times in the process:
//! the first solve is cold, the later ones warm), `--reps N` (products timed for the halo
//! report, after the solves).
//!
//! # What is timed (the crate's one timing model, "Timing" in `segsparse::solvers`)
//!
//! Every mode prints `setup_s` (generating the rows, the matrix's upload, communicators, the
//! preconditioner's setup, the vectors' upload) and, per solve, `solve_s`: the solver call
//! (workspace, iterations, the true residual; the device synchronised), the longest rank's; and
//! `per_iter_ms = solve_s / iters`. The same interval `sparse-solve` reports as `solve_seconds`.
//! Nothing runs on the device between the setup and the first solve in either mode (the product
//! timings come after the solves), so the first solve of `single` and of one rank start equally
//! cold. Rank 0 prints one `key=value` line per solve; each rank prints its halo timings.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use segsparse::backend::VectorOps;
use segsparse::dist::nccl::{run_threads, DistCsr, DistScalar, NcclId, NcclOps, Rank};
use segsparse::dist::{
    poisson3d_block, solve_rank, DistAmgParams, DistPart, DistPrecond, DistSolve, Krylov,
    LocalPrecond, Partition,
};
use segsparse::precond::ChebyshevParams;
use segsparse::precond::{AmgParams, IncompleteParams};
use segsparse::solvers::{SolveError, SolveParams};

#[derive(Clone, Debug)]
struct Opts {
    mode: String,
    gpus: usize,
    grid: (u64, u64, u64),
    f32: bool,
    method: String,
    precond: String,
    tol: f64,
    max_iters: usize,
    solves: usize,
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
        precond: "none".into(),
        tol: 1e-8,
        max_iters: 20_000,
        solves: 1,
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
            "--precond" => o.precond = v()?,
            "--tol" => o.tol = v()?.parse().map_err(|e| format!("--tol: {e}"))?,
            "--max-iters" => o.max_iters = v()?.parse().map_err(|e| format!("--max-iters: {e}"))?,
            "--solves" => o.solves = v()?.parse().map_err(|e| format!("--solves: {e}"))?,
            "--reps" => o.reps = v()?.parse().map_err(|e| format!("--reps: {e}"))?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if o.method == "jacobi" {
        o.method = "cg".into();
        o.precond = "jacobi".into();
    }
    Ok(o)
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The method and preconditioner of the options.
fn plan(o: &Opts) -> Res<(Krylov, DistPrecond)> {
    let method = match o.method.as_str() {
        "cg" => Krylov::Cg,
        "bicgstab" => Krylov::Bicgstab,
        m => return Err(format!("unknown method {m} (cg, jacobi, bicgstab)").into()),
    };
    let ip = IncompleteParams {
        auto_shift: true,
        ..Default::default()
    };
    let precond = match o.precond.as_str() {
        "none" => DistPrecond::None,
        "jacobi" => DistPrecond::Jacobi,
        "poly" => DistPrecond::Chebyshev(ChebyshevParams::default()),
        "block-poly" => {
            DistPrecond::BlockJacobi(LocalPrecond::Chebyshev(ChebyshevParams::default()))
        }
        "ilu0" => DistPrecond::BlockJacobi(LocalPrecond::Ilu0(ip)),
        "ic0" => DistPrecond::BlockJacobi(LocalPrecond::Ic0(ip)),
        "amg" => DistPrecond::BlockJacobi(LocalPrecond::Amg(AmgParams::default())),
        "dist-amg" => DistPrecond::Amg(DistAmgParams::default()),
        p => {
            return Err(format!(
                "unknown preconditioner {p} (none, jacobi, poly, block-poly, ilu0, ic0, amg, \
                 dist-amg)"
            )
            .into())
        }
    };
    Ok((method, precond))
}

fn params(o: &Opts) -> SolveParams<'static> {
    SolveParams {
        rel_tol: o.tol,
        max_iters: o.max_iters,
        record_history: false,
        ..Default::default()
    }
}

/// (iterations, true relative residual, converged) of a solve; non-convergence is a result
/// here (fixed-iteration timing runs), other failures are errors.
fn summary(r: Result<segsparse::solvers::SolveInfo, SolveError>) -> Res<(usize, f64, bool)> {
    match r {
        Ok(info) => Ok((info.iterations, info.relative_residual, true)),
        Err(SolveError::NotConverged {
            iterations,
            residual,
        }) => Ok((iterations, residual, false)),
        Err(e) => Err(e.into()),
    }
}

/// One rank's run: generate its rows, set up, solve `--solves` times, then time the product.
/// `t0` is when the setup began (before the context and the communicators were created).
fn rank_solve<T: DistScalar>(rank: Rank, o: &Opts, t0: Instant) -> Res<()> {
    let (nx, ny, nz) = o.grid;
    let n = nx * ny * nz;
    let (method, precond) = plan(o)?;
    let part = Partition::by_rows(n, rank.size());
    let block = poisson3d_block::<T>(o.grid, part.rows(rank.rank()))?;
    let dpart = DistPart::build(&block, &part, rank.rank(), |need| rank.all_to_all_u64(need))?;
    drop(block);
    let nnz = rank.sum_f64(dpart.nnz() as f64)?;
    let a = DistCsr::from_part(&rank, dpart)?;
    let dpart = a.host_part();
    let ops = NcclOps::<T>::new(&rank)?;
    let prior = t0.elapsed().as_secs_f64();
    let nl = a.info().n_owned;
    let b = vec![T::one(); nl];
    let what = DistSolve {
        method,
        precond,
        params: params(o),
    };
    for s in 0..o.solves.max(1) {
        let mut x = vec![T::zero(); nl];
        // Each solve sets its preconditioner up again (solve_rank's unit); the later solves'
        // setup_s is that alone, the first one's also the matrix and the communicators.
        let out = solve_rank(
            &ops,
            &a,
            &dpart.owned,
            dpart.first_row,
            &b,
            &mut x,
            &what,
            if s == 0 { prior } else { 0.0 },
        )?;
        // The longest rank, as sparse-solve reports.
        let setup = max_over_ranks(&rank, out.setup_seconds)?;
        let solve = max_over_ranks(&rank, out.solve_seconds)?;
        let (iters, res, ok) = summary(out.result)?;
        if rank.rank() == 0 {
            println!(
                "mode={} method={} precond={} prec={} grid={}x{}x{} n={} nnz={} gpus={} solve={} iters={} rel_res={:.3e} converged={} setup_s={:.3} solve_s={:.4} per_iter_ms={:.4}",
                o.mode, o.method, what.precond.name(), if o.f32 { "f32" } else { "f64" }, nx, ny, nz, n, nnz as u64,
                rank.size(), s + 1, iters, res, ok, setup, solve,
                solve / iters.max(1) as f64 * 1e3
            );
        }
    }
    let bd = ops.upload(&b)?;
    let mut y = ops.zeros(nl)?;
    let tm = a.measure(&bd, &mut y, o.reps)?;
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
    Ok(())
}

/// The largest `v` over the ranks (collective; one sum per rank, each rank contributing only in
/// its own round).
fn max_over_ranks(rank: &Rank, v: f64) -> Res<f64> {
    let mut best = 0.0f64;
    for r in 0..rank.size() {
        let mine = if r == rank.rank() { v } else { 0.0 };
        best = best.max(rank.sum_f64(mine)?);
    }
    Ok(best)
}

/// The same solver on one GPU without the distributed layer (GpuOps + GpuCsr).
fn single<T: DistScalar>(o: &Opts) -> Res<()> {
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::{Identity, Preconditioner};
    use segsparse::precond::{Amg, Ic0, Ilu0};
    use segsparse::precond::{Chebyshev, Jacobi};
    use segsparse::solvers::{bicgstab, pcg};
    use segsparse::spmv::gpu::GpuCsr;
    let (nx, ny, nz) = o.grid;
    let (method, precond) = plan(o)?;
    let t0 = Instant::now();
    let gpu = segsparse::gpu::Gpu::new()?;
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
    // The preconditioner on one GPU: the distributed choices without their distribution.
    let m: Box<dyn Preconditioner<T, GpuOps<T>>> = match precond {
        DistPrecond::None => Box::new(Identity),
        DistPrecond::Jacobi => Box::new(Jacobi::from_matrix(&ops, &a)?),
        DistPrecond::Chebyshev(p) | DistPrecond::BlockJacobi(LocalPrecond::Chebyshev(p)) => {
            Box::new(Chebyshev::from_matrix(&ops, &g, &a, &p)?)
        }
        DistPrecond::BlockJacobi(LocalPrecond::Ilu0(p)) => Box::new(Ilu0::new(&ops, &a, &p)?),
        DistPrecond::BlockJacobi(LocalPrecond::Ic0(p)) => Box::new(Ic0::new(&ops, &a, &p)?),
        DistPrecond::BlockJacobi(LocalPrecond::Amg(p)) => Box::new(Amg::new(&ops, &a, &p)?),
        DistPrecond::Amg(p) => Box::new(Amg::new(&ops, &a, &p.amg)?),
        other => return Err(format!("{} on one GPU", other.name()).into()),
    };
    let b = ops.upload(&vec![T::one(); n])?;
    let mut x = ops.zeros(n)?;
    gpu.synchronize()?;
    let setup = t0.elapsed().as_secs_f64();
    let p = params(o);
    for s in 0..o.solves.max(1) {
        let t = Instant::now();
        let r = match method {
            Krylov::Cg => pcg(&ops, &g, &*m, &b, &mut x, &p),
            Krylov::Bicgstab => bicgstab(&ops, &g, &*m, &b, &mut x, &p),
        };
        let solve = t.elapsed().as_secs_f64();
        let (iters, res, ok) = summary(r)?;
        println!(
            "mode=single method={} precond={} prec={} grid={}x{}x{} n={} nnz={} gpus=1 solve={} iters={} rel_res={:.3e} converged={} setup_s={:.3} solve_s={:.4} per_iter_ms={:.4}",
            o.method, precond.name(), if o.f32 { "f32" } else { "f64" }, nx, ny, nz, n, a.nnz(), s + 1, iters, res, ok, setup, solve,
            solve / iters.max(1) as f64 * 1e3
        );
    }
    // The product alone, after the solves (as the ranks' halo report).
    let mut y = ops.zeros(n)?;
    for _ in 0..3 {
        g.spmv(T::one(), &b, T::zero(), &mut y)?;
    }
    gpu.synchronize()?;
    let t = Instant::now();
    for _ in 0..o.reps.max(1) {
        g.spmv(T::one(), &b, T::zero(), &mut y)?;
    }
    gpu.synchronize()?;
    println!(
        "rank=single rows={n} spmv_ms={:.4}",
        t.elapsed().as_secs_f64() / o.reps.max(1) as f64 * 1e3
    );
    Ok(())
}

fn env_usize(keys: &[&str]) -> Option<usize> {
    keys.iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

fn main() -> Res<()> {
    let o = parse()?;
    plan(&o)?;
    match (o.mode.as_str(), o.f32) {
        ("single", false) => single::<f64>(&o),
        ("single", true) => single::<f32>(&o),
        ("threads", f32) => {
            let t0 = Instant::now();
            run_threads(o.gpus, |rank| {
                let r = if f32 {
                    rank_solve::<f32>(rank, &o, t0)
                } else {
                    rank_solve::<f64>(rank, &o, t0)
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
            let t0 = Instant::now();
            let r = Rank::init(device, rank, size, &id)?;
            if f32 {
                rank_solve::<f32>(r, &o, t0)
            } else {
                rank_solve::<f64>(r, &o, t0)
            }
        }
        (m, _) => Err(format!("unknown mode {m}: threads, single or process").into()),
    }
}
