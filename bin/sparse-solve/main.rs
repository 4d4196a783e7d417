//! `sparse-solve`: solve `A·x = b` with CG, BiCGSTAB or GMRES(m), with no, Jacobi, Chebyshev
//! polynomial, ILU(0)/IC(0) or algebraic-multigrid preconditioning, on the CPU, one GPU or
//! several (`--gpus N|auto`, see [`dist`]) (see `sparse-solve --help`).
//!
//! Every path reports the crate's one timing model: `setup_seconds` (from the loaded matrix to
//! the first solver call), `solve_seconds` (that call) and `seconds_per_iteration` (their
//! quotient by the iterations), also for solves that fail.
//!
//! `main` parses and maps the outcome to an exit code; [`run`] does the work (the ripgrep
//! layout). Exit codes: 0 converged, 2 the solver broke down or did not converge (one line on
//! stderr says why; `--format json` still prints its object, with `"converged": false`), 1 any
//! other error (a bad file, no GPU for `--backend gpu`, a problem that does not fit into the
//! host's or the GPU's memory, ...). A NaN or infinity in the matrix or the right-hand side is
//! exit 2 with "residual became NaN or infinite at iteration 0" (with `--precond jacobi`, one
//! on the diagonal is refused at setup instead: exit 1).

mod cli;
mod complex;
mod dist;
mod plot;
mod preflight;
mod storage;
mod vectors32;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{
    BlockKrylovOps, Cpu, Identity, LinearOperator, Preconditioner, SolverOps, VectorOps,
};
use segsparse::precond::{Amg, AmgOps, AmgParams, AmgSummary, Chebyshev, ChebyshevParams, Jacobi};
use segsparse::solvers::{
    bicgstab, gmres, minres, pcg, pcocg, Progress, SolveError, SolveInfo, SolveParams,
};
use segsparse::{CsrMatrix, Elem, Scalar};
use serde::Serialize;

use cli::{
    BackendArg, Cli, DistPrecondArg, Format, GpusArg, IluApplyArg, IluFillArg, IluMatchingArg,
    IluOrderArg, MethodArg, PrecisionArg, PrecondArg, RhsColumnsArg, RhsModeArg,
};
use segsparse::autosolve::{ProbeParams, ProbeReport};
use segsparse::precond::auto::storage::StorageOps;
use segsparse::precond::auto::{AutoMethod, AutoPrecond, MatrixStats};
use segsparse::precond::{Ic0, Ilu0, IncompleteOps, IncompleteParams, Narrowed};
use segsparse::solvers::multi;
use segsparse::solvers::storage::{solve_stored, StoredOperator};
use segsparse::sparse::incomplete::FactorSummary;
use segsparse::Storage;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            let mut msg = String::new();
            for c in e.chain() {
                let c = c.to_string();
                if !msg.contains(&c) {
                    if !msg.is_empty() {
                        msg.push_str(": ");
                    }
                    msg.push_str(&c);
                }
            }
            eprintln!("sparse-solve: error: {}", msg.replace('\n', "; "));
            ExitCode::FAILURE
        }
    }
}

/// A relative matrix path is looked up in the current directory, then beside each ancestor of
/// the executable, so `matrices/raefsky2.mtx.gz` works from anywhere in a clone.
fn resolve(arg: &str) -> String {
    let p = Path::new(arg);
    if p.is_absolute() || p.exists() || segsparse::generate::is_spec(arg) {
        return arg.to_string();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .map(|d| d.join(p))
                .find(|c| c.exists())
        })
        .map_or_else(|| arg.to_string(), |c| c.to_string_lossy().into_owned())
}

/// What one solve produced, for the report. The timing follows the crate's one model ("Timing"
/// in `segsparse::solvers`): `setup_seconds` is everything between the loaded matrix and the
/// first solver call (device or communicators, uploads, partition, preconditioner setup),
/// `solve_seconds` the first solver call itself, on every path alike.
struct Outcome {
    method: &'static str,
    backend: String,
    result: std::result::Result<SolveInfo, SolveError>,
    setup_seconds: f64,
    solve_seconds: f64,
    extra: Extra,
}

impl Outcome {
    /// The outcome of `method` on `backend` from what [`solve_with`] (or the complex path's
    /// equivalent) returned.
    fn new(method: MethodArg, backend: String, (result, times, extra): Solved) -> Self {
        Outcome {
            method: method.name(),
            backend,
            result,
            setup_seconds: times.0,
            solve_seconds: times.1,
            extra,
        }
    }
}

/// The report's `backend` for a CPU solve: `cpu (N threads)`.
fn cpu_backend() -> String {
    format!("cpu ({} threads)", rayon::current_num_threads())
}

/// What a solve reports beyond the first solve's info: every right-hand side's solve, the AMG
/// hierarchy, the multi-GPU details.
#[derive(Default)]
struct Extra {
    /// Seconds between the first setup's end and the solve that are not setup: further full
    /// setups (`--amg-setups`) and the numeric re-setup.
    resetup_seconds: Option<f64>,
    /// The numeric re-setup's own seconds.
    resetup_only: Option<f64>,
    /// Each full AMG setup's seconds (the hierarchy's own clock).
    amg_setups: Vec<f64>,
    /// Each numeric re-setup's seconds (the hierarchy's own clock).
    amg_resetups: Vec<f64>,
    /// The last numeric re-setup's phases (filled with `--amg-phase-times`).
    amg_resetup_phases: Option<segsparse::precond::amg::SetupTimes>,
    /// (iterations, seconds) of each solve after the first (`--rhs-count`); with
    /// `--rhs-mode block` the seconds are the whole block's.
    more: Vec<(usize, f64)>,
    /// The right-hand sides were solved as one block (`--rhs-mode block`).
    block: bool,
    amg: Option<AmgSummary>,
    /// Ranks (GPUs) the solve ran on; 1 for the single-device paths.
    gpus: usize,
    /// How the preconditioner spans the GPUs (`block-jacobi(ic0)`, ...); `None` on one device.
    dist_precond: Option<String>,
    /// `--gpus auto` or the small-problem check of an explicit count: the measured costs, the
    /// model's iteration time per GPU count, the choice, and the probe's seconds.
    gpu_choice: Option<GpuChoice>,
    /// ILU(0)/IC(0): what the factorization did and how each triangle is applied.
    factor: Option<FactorSummary>,
    /// `--precond auto --method auto`: what the automatic solve (`autosolve::solve`) chose
    /// and did.
    probed: Option<(AutoReport, MethodArg, PrecondArg)>,
    /// `--storage f32`: the storage of the values that produced the answer, and why it is
    /// f64 when f32 was asked for.
    storage: Option<(Storage, Option<String>)>,
    /// `--storage f32 --precond amg`: the hierarchy was stored and cycled in f32.
    hierarchy: Option<Storage>,
    /// `--storage f32-vectors`: the CG recurrence ran in f32 and produced the answer.
    vectors32: bool,
}

/// What `--precond auto` chose, why, and from what: the same fields as Python's `info.choice`.
#[derive(Clone, Serialize)]
struct AutoReport {
    method: &'static str,
    precond: &'static str,
    reason: String,
    /// Seconds the statistics and the choice took (part of `setup_seconds`; read on the device
    /// for a GPU solve).
    seconds: f64,
    /// The statistics of the real rule (`null` for a complex matrix, whose rule reads only
    /// its symmetry and diagonal).
    stats: Option<MatrixStats>,
    /// The convergence probe: what it measured and predicted (`null` where none ran).
    probe: Option<ProbeReport>,
    /// The decision came from the per-pattern cache.
    cached: bool,
    /// A fallback after a failure, in words.
    fallback: Option<String>,
    /// Every candidate that ran, with its outcome.
    tried: Vec<String>,
    /// Where nothing converged: the best residual reached and what was tried, in one sentence.
    failure: Option<String>,
    /// Where the time went: the statistics, the rule, every setup and solver call, in order.
    phases: Vec<segsparse::autosolve::Phase>,
    /// Where the values and the AMG hierarchy were stored, why, and a fallback to f64.
    storage: Option<segsparse::precond::auto::storage::StorageReport>,
}

impl AutoReport {
    /// The report of an automatic solve.
    fn of(s: &segsparse::autosolve::AutoSolve) -> Self {
        AutoReport {
            method: s.choice.method.name(),
            precond: s.choice.precond.name(),
            reason: s.choice.reason.clone(),
            seconds: s.choose_seconds,
            stats: Some(s.choice.stats),
            probe: s.probe.clone(),
            cached: s.cached,
            fallback: s.fallback.clone(),
            tried: s.tried.clone(),
            failure: s.failure.clone(),
            phases: s.phases.clone(),
            storage: Some(s.storage.clone()),
        }
    }
}

/// The automatic solve's cost model: `--auto-model FILE` or the default.
fn cost_model(cli: &Cli) -> Result<segsparse::autosolve::CostModel> {
    let Some(p) = &cli.auto_model else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a cost model", p.display()))
}

/// The command line's method for the automatic choice's.
fn method_arg(m: AutoMethod) -> MethodArg {
    match m {
        AutoMethod::Cg => MethodArg::Cg,
        AutoMethod::Bicgstab => MethodArg::Bicgstab,
        AutoMethod::Gmres => MethodArg::Gmres,
        AutoMethod::Minres => MethodArg::Minres,
    }
}

/// The command line's preconditioner for the automatic choice's.
fn precond_arg(p: AutoPrecond) -> PrecondArg {
    match p {
        AutoPrecond::None => PrecondArg::None,
        AutoPrecond::Jacobi => PrecondArg::Jacobi,
        AutoPrecond::Amg => PrecondArg::Amg,
        AutoPrecond::Ilu0 => PrecondArg::Ilu0,
        AutoPrecond::Ic0 => PrecondArg::Ic0,
    }
}

/// The costs measured for `--gpus auto` (or for the check of an explicit count) and what the
/// model made of them.
#[derive(Clone, Serialize)]
pub struct GpuChoice {
    /// The GPU count the model chose.
    pub chosen: usize,
    /// The measured costs (`None`: nothing was measured, fewer than two GPUs).
    pub costs: Option<segsparse::dist::CommCosts>,
    /// Modelled seconds per iteration on 1, 2, ... GPUs.
    pub modelled_iteration_seconds: Vec<f64>,
    /// Seconds the measurement took (not part of setup or solve).
    pub probe_seconds: f64,
}

/// The `--format json` object (one line). Non-finite numbers are written as `null`.
#[derive(Serialize)]
struct Report<'a> {
    matrix: &'a str,
    n: usize,
    nnz: usize,
    method: &'a str,
    /// GMRES's restart length; `null` for the other methods.
    restart: Option<usize>,
    precond: &'a str,
    backend: &'a str,
    precision: String,
    iterations: usize,
    converged: bool,
    relative_residual: Option<f64>,
    tolerance: f64,
    /// The same as `solve_seconds` (kept for existing readers).
    seconds: Option<f64>,
    /// `solve_seconds / iterations`.
    seconds_per_iteration: Option<f64>,
    error: Option<String>,
    /// Everything between the loaded matrix and the first solver call: the device or the
    /// communicators, uploads, partition, preconditioner setup (the AMG re-setup timing and
    /// the GPU-count probe excluded).
    setup_seconds: Option<f64>,
    /// AMG: the numeric re-setup for new values on the same pattern (timed once, same values).
    resetup_seconds: Option<f64>,
    /// AMG: each full setup's own seconds (`--amg-setups N` runs N; the first in a process also
    /// loads the GPU kernels).
    amg_setup_seconds_all: Vec<f64>,
    /// AMG: each numeric re-setup's own seconds (`--amg-resetups N` runs N; on the GPU the
    /// second also records the CUDA graph that the later ones replay).
    amg_resetup_seconds_all: Vec<f64>,
    /// AMG: the last numeric re-setup's seconds by phase (`--amg-phase-times`; the phases the
    /// re-setup reruns: smoother scalings and ρ, smoothing `P` and `R`, Galerkin, coarse).
    #[serde(skip_serializing_if = "Option::is_none")]
    amg_resetup_phases: Option<segsparse::precond::amg::SetupTimes>,
    /// The first solver call (workspace, iterations, true residual; the device synchronised).
    solve_seconds: Option<f64>,
    /// From the loaded matrix to the solution back on the host: setup, probe, every solve and
    /// the download (≥ setup_seconds + solve_seconds).
    wall_seconds: Option<f64>,
    /// GPUs the solve ran on (1 on the CPU and the single-GPU path).
    gpus: usize,
    /// `--gpus` as given (`auto` or the count).
    gpus_requested: String,
    /// With several GPUs: `jacobi`, `poly` (distributed polynomial) or `block-jacobi(<local>)`.
    dist_precond: Option<String>,
    /// `--gpus auto`, or an explicit count checked against the model: costs and choice.
    gpu_choice: Option<GpuChoice>,
    /// Iterations and seconds of every right-hand side (`--rhs-count`), first included. With
    /// `rhs_mode` `block` every column's seconds are the block solve's (they ran together).
    iterations_all: Vec<usize>,
    solve_seconds_all: Vec<f64>,
    /// `block` or `sequential` (`--rhs-mode`; `sequential` for one right-hand side).
    rhs_mode: &'static str,
    /// Seconds of solving every right-hand side: the block solve, or the sum of the sequential
    /// solves.
    rhs_seconds_total: Option<f64>,
    /// The AMG hierarchy (`--precond amg`): levels, rows and nonzeros, complexities, bytes.
    amg: Option<AmgSummary>,
    /// `--precond auto`: the choice and its reason.
    auto: Option<AutoReport>,
    /// ILU(0)/IC(0): ordering, levels and application mode of each triangle, matching, shift.
    factor: Option<FactorSummary>,
    /// `--storage`: `f64` or `f32`, as asked.
    storage_requested: &'static str,
    /// The storage of the values that produced the answer.
    storage: &'static str,
    /// Why the solve ran with f64 values although f32 was asked for (one sentence).
    storage_fallback: Option<String>,
    /// `--precond amg`: where the hierarchy's values and cycle lived (`f32` with `--storage
    /// f32`, else `f64`).
    amg_storage: Option<&'static str>,
}

/// Seconds of all right-hand sides: the block solve's, or the sum of the sequential solves.
fn rhs_total(first: f64, extra: &Extra) -> f64 {
    if extra.block {
        first
    } else {
        extra.more.iter().fold(first, |a, m| a + m.1)
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// What to solve with: the method (auto resolved) and its preconditioner and restart.
#[derive(Clone, Copy)]
struct Plan {
    method: MethodArg,
    precond: PrecondArg,
    restart: usize,
    poly_degree: usize,
    amg: AmgParams,
    /// `Some(..)`: rigid-body modes of an elasticity spec as the AMG candidates.
    rbm: Option<Rbm>,
    rhs_count: usize,
    /// `--rhs-mode block`: the right-hand sides as one block.
    rhs_block: bool,
    /// `--rhs-columns` and `--seed`: the right-hand sides after the first.
    rhs_columns: RhsColumnsArg,
    seed: u64,
    /// `--amg-setups`.
    amg_setups: usize,
    /// `--amg-resetups`.
    amg_resetups: usize,
    /// `--dist-precond` (several GPUs only).
    dist_precond: DistPrecondArg,
    /// ILU(0)/IC(0) parameters (`--ilu-order`, `--ilu-apply`).
    ilu: IncompleteParams,
    /// `--precond auto --method auto` with one right-hand side on one device: the automatic
    /// solve (`autosolve::solve`; its probe off with `--no-probe`).
    probe: Option<ProbeParams>,
    /// `--storage`.
    storage: Storage,
    /// `--storage f32-vectors`.
    vectors32: bool,
}

/// The ILU(0)/IC(0) parameters of the command line (`--ilu-order`, `--ilu-apply`; the shift
/// is automatic).
fn ilu_params(cli: &Cli) -> IncompleteParams {
    IncompleteParams {
        auto_shift: true,
        application: match cli.ilu_apply {
            IluApplyArg::Auto => segsparse::precond::Application::Auto,
            IluApplyArg::Exact => segsparse::precond::Application::Exact,
        },
        ordering: match cli.ilu_order {
            IluOrderArg::Auto => segsparse::precond::Ordering::Auto,
            IluOrderArg::Natural => segsparse::precond::Ordering::Natural,
            IluOrderArg::Multicolor => segsparse::precond::Ordering::Multicolor,
            IluOrderArg::Rcm => segsparse::precond::Ordering::Rcm,
        },
        matching: match cli.ilu_matching {
            IluMatchingArg::Auto => segsparse::precond::RowMatching::Auto,
            IluMatchingArg::Transversal => segsparse::precond::RowMatching::On,
            IluMatchingArg::MaxProduct => segsparse::precond::RowMatching::MaxProduct,
            IluMatchingArg::Off => segsparse::precond::RowMatching::Off,
        },
        fill: match cli.ilu_fill {
            IluFillArg::Auto => segsparse::precond::Fill::Auto,
            IluFillArg::Level0 => segsparse::precond::Fill::Level(0),
            IluFillArg::Level1 => segsparse::precond::Fill::Level(1),
            IluFillArg::Level2 => segsparse::precond::Fill::Level(2),
            IluFillArg::Threshold => segsparse::precond::Fill::Threshold {
                drop_tol: cli.ilu_drop_tol,
                max_per_row: cli.ilu_max_per_row,
            },
        },
        ..Default::default()
    }
}

/// Readies the progress bar of a solve.
fn progress_setup(cli: &Cli) {
    // The bar is for people: not with --format json, and not when stderr is a file or a pipe.
    PROGRESS_ENABLED.store(
        cli.format == Format::Text && std::io::stderr().is_terminal(),
        Ordering::Relaxed,
    );
    *PROGRESS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    MAX_ITERS.store(cli.max_iters as u64, Ordering::Relaxed);
}

/// Runs the solve described by `cli`.
pub fn run(cli: Cli) -> Result<ExitCode> {
    if cli.storage.storage() == Storage::F32 && cli.precision != PrecisionArg::F64 {
        bail!(
            "--storage f32 stores the values of an f64 solve: it needs --precision f64, not {}",
            cli.precision.name()
        );
    }
    match cli.precision {
        PrecisionArg::F32 => run_typed::<f32>(&cli),
        PrecisionArg::F64 => run_typed::<f64>(&cli),
        PrecisionArg::C64 => complex::run::<segsparse::Complex<f32>>(&cli),
        PrecisionArg::C128 => complex::run::<segsparse::Complex<f64>>(&cli),
    }
}

/// The matrix of `cli` (a file or a generator spec), after the host memory preflight; refused
/// unless square.
fn load_square<T: Elem>(cli: &Cli) -> Result<CsrMatrix<T>> {
    let path = resolve(&cli.matrix);
    preflight::host::<T>(&path, cli)?;
    let a: CsrMatrix<T> =
        segsparse::load(&path, cli.seed).with_context(|| format!("loading {}", cli.matrix))?;
    if a.nrows() != a.ncols() {
        bail!(
            "{}: the matrix is {}×{}; a linear solve needs a square matrix",
            cli.matrix,
            a.nrows(),
            a.ncols()
        );
    }
    Ok(a)
}

/// The right-hand side `--rhs` for `a`, real or complex: `ones`, `aones` (`A·1`), `random`
/// (uniform in [-1, 1), seeded by `--seed`; complex values draw the real, then the imaginary
/// part) or a Matrix Market vector file (a real file gives a complex vector zero imaginary parts).
fn rhs<T: Elem>(cli: &Cli, a: &CsrMatrix<T>) -> Result<Vec<T>> {
    let n = a.nrows();
    Ok(match cli.rhs.as_str() {
        "ones" => vec![T::one(); n],
        "aones" => {
            let mut b = vec![T::zero(); n];
            segsparse::spmv::spmv(T::one(), a, &vec![T::one(); n], T::zero(), &mut b);
            b
        }
        "random" => {
            let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
            (0..n)
                .map(|_| {
                    let re = rng.gen_range(-1.0..1.0);
                    let im = if T::IS_COMPLEX {
                        rng.gen_range(-1.0..1.0)
                    } else {
                        0.0
                    };
                    T::narrow(segsparse::Complex::new(re, im))
                })
                .collect()
        }
        file => {
            let v: Vec<T> = segsparse::io::read_vector(file)
                .with_context(|| format!("reading the right-hand side {file}"))?;
            if v.len() != n {
                bail!(
                    "{file}: right-hand side has {} entries, the matrix {n} rows",
                    v.len()
                );
            }
            v
        }
    })
}

fn run_typed<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    cli: &Cli,
) -> Result<ExitCode> {
    let a: CsrMatrix<T> = load_square(cli)?;
    let n = a.nrows();
    let b: Vec<T> = rhs(cli, &a)?;
    // The automatic solve (`autosolve::solve`: statistics where the matrix lives, the rule, the
    // probe) for the default: `--precond auto --method auto`, one right-hand side, one device.
    // (--storage f32 takes the rule's choice instead: the automatic solve runs in f64 storage.)
    let engine = cli.precond == PrecondArg::Auto
        && cli.method == MethodArg::Auto
        && cli.rhs_count == 1
        && matches!(cli.gpus, GpusArg::Count(1))
        && cli.storage.storage() == Storage::F64;
    // Symmetry to rounding (the automatic choice's test: `precond::auto::MatrixStats`) and the
    // diagonal's signs, for the report and the method of `--method auto` with a named
    // preconditioner (a finite-element matrix whose assembly left rounding on one side is
    // symmetric: CG); the automatic solve reads its own statistics.
    let (symmetric, posdiag) = if engine {
        (false, false)
    } else {
        let s = segsparse::precond::auto::MatrixStats::of(&a);
        (s.symmetric, s.positive_diagonal)
    };
    // --precond auto otherwise: the rule alone, on the host; part of the setup.
    let auto_clock = Instant::now();
    let auto_choice =
        (cli.precond == PrecondArg::Auto && !engine).then(|| segsparse::precond::auto::choose(&a));
    let auto_seconds = auto_clock.elapsed().as_secs_f64();
    let choice = &auto_choice;
    let method = match (cli.method, choice) {
        (MethodArg::Auto, Some(c)) => method_arg(c.method),
        (MethodArg::Auto, None) if engine => MethodArg::Auto,
        (MethodArg::Auto, None) if symmetric && posdiag => MethodArg::Cg,
        (MethodArg::Auto, None) => MethodArg::Bicgstab,
        (m, _) => m,
    };
    let precond = match (choice, method, cli.precond) {
        (Some(c), m, _) => match (m, c.precond) {
            // ILU(0) is not symmetric: a CG method named on the command line takes Jacobi.
            (MethodArg::Cg | MethodArg::Pcg | MethodArg::Cocg, AutoPrecond::Ilu0) => {
                PrecondArg::Jacobi
            }
            (MethodArg::Pcg, AutoPrecond::None) => PrecondArg::Jacobi,
            (_, AutoPrecond::None) => PrecondArg::None,
            (_, AutoPrecond::Jacobi) => PrecondArg::Jacobi,
            (_, AutoPrecond::Amg) => PrecondArg::Amg,
            (_, AutoPrecond::Ilu0) => PrecondArg::Ilu0,
            (_, AutoPrecond::Ic0) => PrecondArg::Ic0,
        },
        (None, MethodArg::Pcg, PrecondArg::None) => PrecondArg::Jacobi,
        (None, _, p) => p,
    };
    let mut auto_report = choice.as_ref().map(|c| AutoReport {
        method: method.name(),
        precond: precond.name(),
        reason: c.reason.clone(),
        seconds: auto_seconds,
        stats: Some(c.stats),
        probe: None,
        cached: false,
        fallback: None,
        tried: Vec::new(),
        failure: None,
        phases: Vec::new(),
        storage: None,
    });
    let ilu = ilu_params(cli);
    let plan = Plan {
        method,
        precond,
        ilu,
        restart: cli.restart as usize,
        poly_degree: cli.poly_degree as usize,
        amg: amg_params(cli)?,
        rbm: rbm_grid(cli)?,
        rhs_count: cli.rhs_count as usize,
        rhs_block: cli.rhs_mode == RhsModeArg::Block,
        rhs_columns: cli.rhs_columns,
        seed: cli.seed,
        amg_setups: cli.amg.amg_setups as usize,
        amg_resetups: cli.amg.amg_resetups as usize,
        dist_precond: cli.dist_precond,
        probe: if engine {
            Some(ProbeParams {
                enabled: !cli.no_probe,
                model: cost_model(cli)?,
                // --storage f64: the caller's f64, whatever the storage rule would choose.
                storage: segsparse::precond::auto::storage::StorageParams {
                    auto: cli.storage == cli::StorageArg::Auto,
                    min_entries: cli.storage_min_entries,
                    ..Default::default()
                },
                ..Default::default()
            })
        } else {
            None
        },
        storage: cli.storage.storage(),
        vectors32: cli.storage.vectors(),
    };
    if plan.rhs_count > 1 && plan.rhs_block && plan.method == MethodArg::Minres {
        bail!("--rhs-mode block has no MINRES (no multi-column MINRES): use --rhs-mode sequential");
    }
    if plan.vectors32
        && (!matches!(plan.method, MethodArg::Cg | MethodArg::Pcg)
            || !matches!(plan.precond, PrecondArg::None | PrecondArg::Jacobi))
    {
        bail!(
            "--storage f32-vectors runs CG or PCG with --precond none or jacobi, not {} with {}",
            plan.method.name(),
            plan.precond.name()
        );
    }
    if plan.storage == Storage::F32 {
        if T::BYTES != 8 {
            bail!("--storage f32 stores the values of an f64 solve: it needs --precision f64");
        }
        if plan.rhs_count > 1 {
            bail!("--storage f32 solves one right-hand side (--rhs-count 1)");
        }
    }
    let tol = cli.tol.unwrap_or(if T::BYTES == 4 { 1e-5 } else { 1e-8 });
    let params = SolveParams {
        rel_tol: tol,
        max_iters: cli.max_iters,
        check_every: cli.check_every,
        graphs: !cli.no_graphs,
        on_check: Some(progress),
        // --storage f32: GMRES's Krylov basis in f32 too.
        basis: plan.storage,
        ..Default::default()
    };
    progress_setup(cli);

    let wall = Instant::now();
    // --gpus auto: with two or more GPUs (and a method and preconditioner that run on several),
    // measure and choose; else 1 without any NCCL start.
    let (gpus, choice) = match cli.gpus {
        GpusArg::Count(k) => (k, None),
        GpusArg::Auto if cli.backend == BackendArg::Cpu => (1, None),
        GpusArg::Auto => match dist::auto(&a, plan)? {
            Some(c) => (c.chosen, Some(c)),
            None => (1, None),
        },
    };
    // Setup starts after the --gpus auto decision (its probe is reported on its own).
    let setup_clock = Instant::now();
    let use_gpu = match cli.backend {
        BackendArg::Cpu => false,
        BackendArg::Gpu => true,
        BackendArg::Auto => segsparse::gpu::Gpu::shared().is_ok(),
    };
    let mut x = vec![T::zero(); n];
    let mut out = if gpus > 1 {
        if cli.backend == BackendArg::Cpu {
            bail!("--gpus {gpus} runs on GPUs; it cannot be combined with --backend cpu");
        }
        if plan.storage == Storage::F32 {
            bail!("--storage f32 runs on one GPU or the CPU, not with --gpus {gpus}");
        }
        dist::solve(
            &a,
            &b,
            &mut x,
            plan,
            &params,
            gpus,
            choice.is_none(),
            setup_clock,
        )?
    } else if use_gpu {
        gpu_solve(&a, &b, &mut x, plan, &params, setup_clock)?
    } else if plan.vectors32 {
        let solved = vectors32::solve_cpu(&a, &b, &mut x, plan.precond, &params, setup_clock)?;
        Outcome::new(method, cpu_backend(), solved)
    } else {
        // --storage f32: the values rounded to f32 (part of the setup), or why not.
        let mixed = (plan.storage == Storage::F32).then(|| {
            segsparse::spmv::mixed::MixedCsr::new(&a.cast::<f64>())
                .map_err(|e| match e {
                    segsparse::Error::InvalidInput(why) => why,
                    other => other.to_string(),
                })
                .map(|m| {
                    storage::AsWorking::<_, Cpu>::new::<T, Cpu>(m)
                        .expect("--storage f32 runs in f64 (checked above)")
                })
        });
        let narrow = narrow_of::<T, Cpu, _>(mixed.as_ref());
        // --storage f32 --precond amg: the hierarchy of the f32 values, cycled in f32.
        let h32 = if plan.storage == Storage::F32 && plan.precond == PrecondArg::Amg {
            let a64 = a.cast::<f64>();
            let h = match plan.rbm.map(|r| r.modes::<f64>()).transpose()? {
                Some(c) => Narrowed::amg_with_candidates(&Cpu, &a64, &c, &plan.amg),
                None => Narrowed::amg(&Cpu, &a64, &plan.amg),
            }
            .context("AMG setup (f32 hierarchy)")?;
            Some(
                storage::AsWorking::<_, Cpu>::new::<T, Cpu>(h)
                    .expect("--storage f32 runs in f64 (checked above)"),
            )
        } else {
            None
        };
        let h32 = h32.as_ref().map(|h| {
            (
                h as &dyn Preconditioner<T, Cpu>,
                h.inner().inner().summary().clone(),
            )
        });
        let solved = solve_with(
            &Cpu,
            &a,
            &a,
            plan,
            &b,
            &mut x,
            &params,
            setup_clock,
            narrow,
            h32,
        )?;
        Outcome::new(method, cpu_backend(), solved)
    };
    let wall_seconds = wall.elapsed().as_secs_f64() + auto_seconds;
    out.setup_seconds += auto_seconds;
    if out.extra.gpu_choice.is_none() {
        out.extra.gpu_choice = choice;
    }
    out.extra.gpus = out.extra.gpus.max(1);
    // The automatic solve's choice and report.
    let (mut method, mut precond) = (method, plan.precond);
    let mut structure = if symmetric {
        "symmetric to rounding"
    } else {
        "unsymmetric"
    };
    if let Some((r, m, p)) = out.extra.probed.take() {
        let st = r.stats.unwrap_or_default();
        structure = if st.symmetric {
            "symmetric to rounding"
        } else {
            "unsymmetric"
        };
        (method, precond) = (m, p);
        out.method = method.name();
        auto_report = Some(r);
    }
    clear_progress();
    finish(Finished {
        cli,
        n,
        nnz: a.nnz(),
        structure,
        method,
        precond,
        restart: plan.restart,
        tol,
        x: &x,
        out,
        wall_seconds,
        auto_report,
    })
}

/// What a solve hands to [`finish`] for the report, whatever its element type.
struct Finished<'a, T> {
    cli: &'a Cli,
    n: usize,
    nnz: usize,
    /// `symmetric`, `unsymmetric`, `complex symmetric`, `hermitian`, ...
    structure: &'static str,
    /// The method, `auto` resolved.
    method: MethodArg,
    /// The preconditioner, `auto` resolved.
    precond: PrecondArg,
    restart: usize,
    tol: f64,
    x: &'a [T],
    out: Outcome,
    wall_seconds: f64,
    auto_report: Option<AutoReport>,
}

/// Writes the solution (`--output`) and the residual plot (`--plot`), prints the report (text
/// or JSON) and returns the exit code.
fn finish<T: Elem>(f: Finished<'_, T>) -> Result<ExitCode> {
    let Finished {
        cli,
        n,
        nnz,
        structure,
        method,
        precond,
        restart,
        tol,
        x,
        out,
        wall_seconds,
        auto_report,
    } = f;
    let precision = T::NAME;
    if let Some(p) = &cli.output {
        segsparse::io::write_vector(p, x).with_context(|| format!("writing {}", p.display()))?;
    }
    if let (Some(p), Ok(info)) = (&cli.plot, &out.result) {
        plot::residuals(p, &cli.matrix, out.method, &info.history, tol)
            .with_context(|| format!("writing the plot {}", p.display()))?;
    }
    if let (Some(_), Err(_)) = (&cli.plot, &out.result) {
        eprintln!("sparse-solve: no plot: the solve failed (its history is not kept on errors)");
    }

    let (iterations, residual, converged, reason) = match &out.result {
        Ok(i) => (i.iterations, i.relative_residual, true, None),
        Err(
            e @ SolveError::NotConverged {
                iterations,
                residual,
            },
        ) => (*iterations, *residual, false, Some(e)),
        Err(e @ SolveError::Breakdown { iteration, .. }) => (*iteration, f64::NAN, false, Some(e)),
        Err(e @ SolveError::NonFinite { iteration }) => (*iteration, f64::NAN, false, Some(e)),
        Err(
            e @ SolveError::Stagnation {
                iterations,
                residual,
            },
        ) => (*iterations, *residual, false, Some(e)),
        Err(e) => bail!("{e}"),
    };
    let seconds = out.solve_seconds;
    let per_iter = segsparse::solvers::per_iteration(seconds, iterations);
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    match cli.format {
        Format::Json => {
            let report = Report {
                matrix: &cli.matrix,
                n,
                nnz,
                method: out.method,
                restart: (method == MethodArg::Gmres).then_some(restart),
                precond: precond.name(),
                backend: &out.backend,
                precision: precision.to_string(),
                iterations,
                converged,
                relative_residual: finite(residual),
                tolerance: tol,
                seconds: finite(seconds),
                seconds_per_iteration: finite(per_iter),
                error: reason.map(|e| e.to_string()),
                setup_seconds: finite(out.setup_seconds),
                resetup_seconds: out.extra.resetup_only,
                amg_setup_seconds_all: out.extra.amg_setups.clone(),
                amg_resetup_seconds_all: out.extra.amg_resetups.clone(),
                amg_resetup_phases: out.extra.amg_resetup_phases,
                solve_seconds: finite(seconds),
                wall_seconds: finite(wall_seconds),
                gpus: out.extra.gpus,
                gpus_requested: match cli.gpus {
                    GpusArg::Auto => "auto".into(),
                    GpusArg::Count(k) => k.to_string(),
                },
                dist_precond: out.extra.dist_precond.clone(),
                gpu_choice: out.extra.gpu_choice.clone(),
                iterations_all: std::iter::once(iterations)
                    .chain(out.extra.more.iter().map(|m| m.0))
                    .collect(),
                solve_seconds_all: std::iter::once(seconds)
                    .chain(out.extra.more.iter().map(|m| m.1))
                    .collect(),
                rhs_mode: if out.extra.block {
                    "block"
                } else {
                    "sequential"
                },
                rhs_seconds_total: finite(rhs_total(seconds, &out.extra)),
                amg: out.extra.amg.clone(),
                auto: auto_report.clone(),
                factor: out.extra.factor.clone(),
                storage_requested: cli.storage.name(),
                storage: if out.extra.vectors32 {
                    "f32-vectors"
                } else {
                    out.extra
                        .storage
                        .as_ref()
                        .map_or(Storage::F64, |s| s.0)
                        .name()
                },
                storage_fallback: out.extra.storage.as_ref().and_then(|s| s.1.clone()),
                amg_storage: out
                    .extra
                    .amg
                    .as_ref()
                    .map(|_| out.extra.hierarchy.unwrap_or(Storage::F64).name()),
            };
            serde_json::to_writer(&mut w, &report)?;
            writeln!(w)?;
        }
        Format::Text => {
            writeln!(
                w,
                "matrix     {} ({n}×{n}, {} nonzeros, {})",
                cli.matrix, nnz, structure
            )?;
            writeln!(
                w,
                "method     {}{}{}   preconditioner {}   backend {}   precision {precision}",
                out.method,
                if method == MethodArg::Gmres {
                    format!("({restart})")
                } else {
                    String::new()
                },
                if cli.method == MethodArg::Auto {
                    " (auto)"
                } else {
                    ""
                },
                precond.name(),
                out.backend
            )?;
            match &out.result {
                Ok(info) => writeln!(
                    w,
                    "converged  {iterations} iterations, relative residual {residual:.3e} \
                     (‖b − A·x‖/‖b‖, tolerance {tol:.1e}), {seconds:.4} s, {:.2} µs/iteration{}",
                    per_iter * 1e6,
                    if info.restarts > 0 {
                        format!(", {} restart(s)", info.restarts)
                    } else {
                        String::new()
                    }
                )?,
                Err(e) => writeln!(w, "FAILED     {e}")?,
            }
            writeln!(
                w,
                "time       setup {:.4} s (device or communicators, uploads, preconditioner), \
                 solve {seconds:.4} s, {wall_seconds:.4} s in all",
                out.setup_seconds
            )?;
            if let Some(c) = &out.extra.gpu_choice {
                writeln!(
                    w,
                    "gpus       {} used{}; the model chose {} (probe {:.3} s)",
                    out.extra.gpus,
                    out.extra
                        .dist_precond
                        .as_ref()
                        .map_or(String::new(), |d| format!(", preconditioner {d}")),
                    c.chosen,
                    c.probe_seconds
                )?;
            }
            if let Some(s) = out.extra.resetup_seconds {
                writeln!(w, "re-setup   {s:.4} s (numeric only, same pattern)")?;
            }
            if !out.extra.more.is_empty() {
                let it = out.extra.more.iter().fold(iterations, |a, m| a + m.0);
                let sec = rhs_total(seconds, &out.extra);
                writeln!(
                    w,
                    "{} solves  {it} iterations, {sec:.4} s in all (one setup, {})",
                    out.extra.more.len() + 1,
                    if out.extra.block {
                        "as one block"
                    } else {
                        "one after the other"
                    }
                )?;
            }
            if let Some(s) = &out.extra.amg {
                writeln!(w, "{s}")?;
            }
            if let Some(r) = &auto_report {
                writeln!(
                    w,
                    "auto       {} + {}: {} ({:.2} ms)",
                    r.method,
                    r.precond,
                    r.reason,
                    r.seconds * 1e3
                )?;
            }
            if let Some(f) = &out.extra.factor {
                writeln!(w, "factor     {f}")?;
            }
            if let Some((s, why)) = &out.extra.storage {
                match (s, why) {
                    (Storage::F32, _) if out.extra.vectors32 => writeln!(
                        w,
                        "storage    f32 values and CG vectors (the iterate and the true \
                         residuals of the reliable updates in f64)"
                    )?,
                    (Storage::F32, _) => writeln!(
                        w,
                        "storage    f32 values (f64 vectors and sums; true residuals with the \
                         f64 values)"
                    )?,
                    (_, Some(why)) => writeln!(w, "storage    {why}")?,
                    _ => writeln!(w, "storage    f64 values")?,
                }
            }
            if out.extra.hierarchy == Some(Storage::F32) {
                writeln!(
                    w,
                    "storage    AMG hierarchy in f32 (set up from the f32 values, cycled on f32 \
                     vectors under the f64 solver)"
                )?;
            }
        }
    }
    w.flush()?;
    match reason {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => {
            eprintln!("sparse-solve: {}: {e}", out.method);
            Ok(ExitCode::from(2))
        }
    }
}

/// What [`solve_with`] returns: the first solve's result, (setup, solve) seconds, the extras.
type Solved = (
    std::result::Result<SolveInfo, SolveError>,
    (f64, f64),
    Extra,
);

/// Sets up the preconditioner of `plan` and solves. `setup_clock` started where this path's
/// setup began (before the device was opened or the matrix uploaded): setup runs from there to
/// the first solver call, less the AMG re-setup timing.
#[allow(clippy::too_many_arguments)]
fn solve_with<
    T: Scalar,
    B: SolverOps<T> + BlockKrylovOps<T> + IncompleteOps<T> + AmgOps<T> + StorageOps<T>,
>(
    be: &B,
    op: &B::Matrix,
    a: &CsrMatrix<T>,
    plan: Plan,
    b: &[T],
    x: &mut Vec<T>,
    params: &SolveParams,
    setup_clock: Instant,
    narrow: Narrow<'_, T, B>,
    hierarchy32: Option<(&dyn Preconditioner<T, B>, AmgSummary)>,
) -> Result<Solved> {
    let db = be.upload(b)?;
    let mut dx = be.upload(x)?;
    let mut extra = Extra::default();
    if let Some(pp) = plan.probe {
        // The default: the library's automatic solve (statistics read where `op` lives).
        let before = setup_clock.elapsed().as_secs_f64();
        let s = segsparse::autosolve::solve(
            be,
            op,
            Some(a),
            &db,
            &mut dx,
            params,
            &ProbeParams {
                restart: plan.restart,
                ..pp
            },
        )?;
        *x = be.download(&dx)?;
        extra.factor = s.factor.clone();
        extra.amg = s.amg.clone();
        // The storage the automatic solve chose, in the report's top-level fields too.
        let st = |n: &str| n.parse::<Storage>().unwrap_or(Storage::F64);
        extra.storage = Some((st(s.storage.values), s.storage.fallback.clone()));
        extra.hierarchy = s.storage.hierarchy.map(st);
        let times = (before + s.setup_seconds, s.solve_seconds);
        extra.probed = Some((
            AutoReport::of(&s),
            method_arg(s.choice.method),
            precond_arg(s.choice.precond),
        ));
        let r = s.result.map(|mut i| {
            i.setup_seconds = times.0;
            i
        });
        return match r {
            Err(SolveError::Backend(e)) => Err(e.into()),
            other => Ok((other, times, extra)),
        };
    }
    let clock = (setup_clock, &db, narrow);
    let r = match plan.precond {
        PrecondArg::None => solve_all(
            be, op, &Identity, plan, b, clock, &mut dx, params, &mut extra,
        ),
        PrecondArg::Jacobi => {
            let j = Jacobi::from_matrix(be, a)?;
            solve_all(be, op, &j, plan, b, clock, &mut dx, params, &mut extra)
        }
        PrecondArg::Ilu0 | PrecondArg::Ic0 => {
            let ip = plan.ilu;
            if plan.precond == PrecondArg::Ilu0 {
                let m = Ilu0::new(be, a, &ip)?;
                extra.factor = Some(m.summary());
                solve_all(be, op, &m, plan, b, clock, &mut dx, params, &mut extra)
            } else {
                let m = Ic0::new(be, a, &ip)?;
                extra.factor = Some(m.summary());
                solve_all(be, op, &m, plan, b, clock, &mut dx, params, &mut extra)
            }
        }
        PrecondArg::Auto => bail!("--precond auto must be resolved before the solve"),
        PrecondArg::Poly => {
            let cp = ChebyshevParams {
                degree: plan.poly_degree,
                ..Default::default()
            };
            let p = Chebyshev::from_matrix(be, op, a, &cp)?;
            solve_all(be, op, &p, plan, b, clock, &mut dx, params, &mut extra)
        }
        PrecondArg::Amg if hierarchy32.is_some() => {
            // --storage f32: the hierarchy built in f32 before the solve (its setup is in
            // setup_seconds; --amg-setups/--amg-resetups time the f64 hierarchy only).
            let (h, summary) = hierarchy32.expect("matched");
            extra.amg_setups.push(summary.setup.total);
            extra.amg = Some(summary);
            extra.hierarchy = Some(Storage::F32);
            // The Krylov operator keeps the f64 values where f32 rounds them: the reliable
            // updates would restart CG from the true residual of the rounding, which the AMG
            // cycle does not damp (AMG-PCG on Poisson 240³/3: 31 iterations instead of 16).
            let clock = match clock.2 {
                Some(Ok((_, true))) => {
                    extra.storage = Some((
                        Storage::F64,
                        Some(
                            "f64 values for the Krylov operator (they round in f32, which CG \
                             under AMG would pay for in iterations); the AMG hierarchy in f32"
                                .into(),
                        ),
                    ));
                    (clock.0, clock.1, None)
                }
                _ => clock,
            };
            solve_all(be, op, h, plan, b, clock, &mut dx, params, &mut extra)
        }
        PrecondArg::Amg => {
            let candidates = plan.rbm.map(|r| r.modes()).transpose()?;
            // From the solver's own matrix: on the GPU the setup runs on the device from it.
            let build = || {
                match &candidates {
                    Some(c) => Amg::from_matrix_with_candidates(be, op, c, &plan.amg),
                    None => Amg::from_matrix(be, op, &plan.amg),
                }
                .context("AMG setup")
            };
            let mut m = build()?;
            extra.amg_setups.push(m.summary().setup.total);
            // `--amg-setups N`: N − 1 further full setups, timed (the first one in a process
            // also loads the kernels); the last one is used. Not part of `setup_seconds`.
            let t = Instant::now();
            for _ in 1..plan.amg_setups {
                m = build()?;
                extra.amg_setups.push(m.summary().setup.total);
            }
            extra.amg = Some(m.summary().clone());
            // The numeric re-setup on the same values, timed (time-stepping codes call it
            // once per step); the hierarchy is the same afterwards. Not part of the setup.
            m.update_matrix(be, op).context("AMG numeric re-setup")?;
            extra.resetup_seconds = Some(t.elapsed().as_secs_f64());
            extra.resetup_only = Some(m.summary().setup.total);
            extra.amg_resetups.push(m.summary().setup.total);
            for _ in 1..plan.amg_resetups {
                m.update_matrix(be, op).context("AMG numeric re-setup")?;
                extra.amg_resetups.push(m.summary().setup.total);
            }
            extra.amg_resetup_phases = Some(m.summary().setup);
            solve_all(be, op, &m, plan, b, clock, &mut dx, params, &mut extra)
        }
    };
    *x = be.download(&dx)?;
    let (r, times) = r;
    match r {
        Err(SolveError::Backend(e)) => Err(e.into()),
        other => Ok((other, times, extra)),
    }
}

/// The first solve into `x`, then the further right-hand sides of `--rhs-count` (`(1 + k/10)·b`)
/// with the same preconditioner, their iterations and solve seconds into `extra`. `clock` is the
/// setup clock and the uploaded `b`; returns the first result and its (setup, solve) seconds,
/// the solve timed around the solver call (the same interval as `SolveInfo::solve_seconds`, and
/// available for failed solves too).
#[allow(clippy::too_many_arguments)]
fn solve_all<T: Scalar, B: BlockKrylovOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    m: &dyn Preconditioner<T, B>,
    plan: Plan,
    b: &[T],
    (setup_clock, db, narrow): (Instant, &B::Vector, Narrow<'_, T, B>),
    x: &mut B::Vector,
    params: &SolveParams,
    extra: &mut Extra,
) -> (std::result::Result<SolveInfo, SolveError>, (f64, f64)) {
    let setup = setup_clock.elapsed().as_secs_f64() - extra.resetup_seconds.unwrap_or(0.0);
    if plan.rhs_count > 1 && plan.rhs_block {
        return solve_block(be, op, m, plan, b, db, x, params, extra, setup);
    }
    let t = Instant::now();
    let first = match narrow {
        None => run_method(be, op, m, (plan.method, plan.restart), db, x, params),
        Some(n) => {
            let stored = match n {
                Ok((narrow, exact)) => StoredOperator::F32 {
                    narrow,
                    exact: exact.then_some(op as &dyn LinearOperator<T, B>),
                },
                Err(reason) => StoredOperator::Refused {
                    reason: reason.to_string(),
                    exact: op,
                },
            };
            let run =
                |_: Storage, o: &dyn LinearOperator<T, B>, x: &mut B::Vector, p: &SolveParams| {
                    run_method(be, o, m, (plan.method, plan.restart), db, x, p)
                };
            match solve_stored(be, stored, x, params, run) {
                Ok(s) => {
                    extra.storage = Some((s.storage, s.fallback));
                    s.result
                }
                Err(e) => Err(SolveError::Backend(e)),
            }
        }
    };
    let solve = t.elapsed().as_secs_f64();
    let first = first.map(|mut i| {
        i.setup_seconds = setup;
        i
    });
    if first.is_ok() {
        for k in 1..plan.rhs_count {
            let bk = rhs_column(plan, b, k);
            let more = be.upload(&bk).map_err(SolveError::from).and_then(|dbk| {
                let mut xk = be.zeros(b.len())?;
                let t = Instant::now();
                let r = run_method(
                    be,
                    op,
                    m,
                    (plan.method, plan.restart),
                    &dbk,
                    &mut xk,
                    params,
                );
                Ok((r, t.elapsed().as_secs_f64()))
            });
            match more {
                Ok((Ok(info), secs)) => extra.more.push((info.iterations, secs)),
                Ok((Err(e), _)) | Err(e) => return (Err(e), (setup, solve)),
            }
        }
    }
    (first, (setup, solve))
}

/// Right-hand side `k ≥ 1` of `--rhs-count` (`--rhs-columns`): `(1 + k/10)·b`, or uniform in
/// `[-1, 1)` seeded by `--seed + k`.
fn rhs_column<T: Scalar>(plan: Plan, b: &[T], k: usize) -> Vec<T> {
    match plan.rhs_columns {
        RhsColumnsArg::Scaled => {
            let f = T::of_f64(1.0 + 0.1 * k as f64);
            b.iter().map(|&v| f * v).collect()
        }
        RhsColumnsArg::Random => {
            let mut rng = ChaCha8Rng::seed_from_u64(plan.seed.wrapping_add(k as u64));
            b.iter()
                .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
                .collect()
        }
    }
}

/// `--rhs-mode block`: every right-hand side of `--rhs-count` in one call of the multi-column
/// solver (`segsparse::solvers::multi`); the first column's solution into `x`, the others'
/// iterations into `extra` with the block's seconds. Returns the first column's outcome (or the
/// first failed column's) and (setup, block solve) seconds.
#[allow(clippy::too_many_arguments)]
fn solve_block<T: Scalar, B: BlockKrylovOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    m: &dyn Preconditioner<T, B>,
    plan: Plan,
    b: &[T],
    db: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    extra: &mut Extra,
    setup: f64,
) -> (std::result::Result<SolveInfo, SolveError>, (f64, f64)) {
    let n = b.len();
    let columns = (|| {
        let mut dbs = Vec::with_capacity(plan.rhs_count);
        let mut first = be.zeros(n)?;
        be.copy(db, &mut first)?;
        dbs.push(first);
        for k in 1..plan.rhs_count {
            dbs.push(be.upload(&rhs_column(plan, b, k))?);
        }
        let xs = (0..plan.rhs_count)
            .map(|_| be.zeros(n))
            .collect::<segsparse::Result<Vec<_>>>()?;
        Ok::<_, segsparse::Error>((dbs, xs))
    })();
    let (dbs, mut xs) = match columns {
        Ok(c) => c,
        Err(e) => return (Err(e.into()), (setup, 0.0)),
    };
    let t = Instant::now();
    let r = match plan.method {
        // COCG of a real matrix is CG.
        MethodArg::Cg | MethodArg::Pcg | MethodArg::Cocg => {
            multi::pcg(be, op, m, &dbs, &mut xs, params)
        }
        MethodArg::Gmres => multi::gmres(be, op, m, &dbs, &mut xs, plan.restart, params),
        MethodArg::Bicgstab | MethodArg::Auto => multi::bicgstab(be, op, m, &dbs, &mut xs, params),
        // The plan refuses --rhs-mode block with MINRES before anything is uploaded.
        MethodArg::Minres => Err(SolveError::Backend(segsparse::Error::InvalidInput(
            "--rhs-mode block has no MINRES: use --rhs-mode sequential".into(),
        ))),
    };
    let solve = t.elapsed().as_secs_f64();
    extra.block = true;
    let info = match r {
        Ok(info) => info,
        Err(e) => return (Err(e), (setup, solve)),
    };
    if let Err(e) = be.copy(&xs[0], x) {
        return (Err(e.into()), (setup, solve));
    }
    let mut cols = info.columns.into_iter();
    let first = cols.next().expect("k ≥ 1 columns").map(|mut i| {
        i.setup_seconds = setup;
        i.solve_seconds = solve;
        i
    });
    for c in cols {
        match c {
            Ok(i) => extra.more.push((i.iterations, solve)),
            Err(e) if first.is_ok() => return (Err(e), (setup, solve)),
            Err(_) => {}
        }
    }
    (first, (setup, solve))
}

/// The AMG options of the command line.
fn amg_params(cli: &Cli) -> Result<AmgParams> {
    let rbm = rbm_grid(cli)?.map(|r| r.dim());
    Ok(AmgParams {
        theta: cli.amg.amg_theta,
        drop_tol: cli.amg.amg_drop_tol,
        smoother: cli.amg.amg_smoother.into(),
        degree: cli.amg.amg_degree,
        chebyshev_lower: cli.amg.amg_cheb_lower,
        sweeps: cli.amg.amg_sweeps,
        cycle: cli.amg.amg_cycle.into(),
        coarse_size: cli.amg.amg_coarse_size,
        max_levels: cli.amg.amg_max_levels,
        block_size: cli.amg.amg_block_size.unwrap_or(rbm.unwrap_or(1)),
        improve_candidates: cli.amg.amg_improve,
        host_setup: cli.amg.amg_host_setup,
        phase_times: cli.amg.amg_phase_times,
        block_products: !cli.amg.amg_scalar_products,
        resetup_graph: !cli.amg.amg_no_resetup_graph,
        fused_smoothing: !cli.amg.amg_unfused_smoothing,
        spectral_steps: cli.amg.amg_spectral_steps,
        aggregation_window: cli.amg.amg_aggregation_window,
        ..Default::default()
    })
}

/// `Some((dim, n))` when the AMG candidates are the rigid-body modes of `elasticity2d:n`
/// (`dim` 2) or `elasticity3d:n` (`dim` 3).
/// Where the node coordinates of rigid-body modes come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rbm {
    /// `elasticity2d:N` or `elasticity3d:N`: (dimension, N).
    Grid(usize, usize),
    /// `femelast2d:…` or `femelast3d:…`: the problem, N and the seed of its mesh.
    Fem(segsparse::generate::FemProblem, usize, u64),
}

impl Rbm {
    /// Unknowns per node.
    fn dim(self) -> usize {
        match self {
            Rbm::Grid(dim, _) => dim,
            Rbm::Fem(p, _, _) => p.dim,
        }
    }

    /// The rigid-body modes, one vector per mode over the matrix's rows.
    fn modes<T: Scalar>(self) -> Result<Vec<Vec<T>>> {
        use segsparse::precond::amg::{rigid_body_modes_2d, rigid_body_modes_3d};
        Ok(match self {
            Rbm::Grid(3, n) => {
                rigid_body_modes_3d(&segsparse::generate::elasticity3d_coordinates(n))
            }
            Rbm::Grid(_, n) => {
                rigid_body_modes_2d(&segsparse::generate::elasticity2d_coordinates(n))
            }
            Rbm::Fem(p, n, seed) => {
                let xyz = segsparse::generate::fem_coordinates(&p, n, seed)?;
                if p.dim == 3 {
                    rigid_body_modes_3d(&xyz)
                } else {
                    let xy: Vec<[f64; 2]> = xyz.iter().map(|x| [x[0], x[1]]).collect();
                    rigid_body_modes_2d(&xy)
                }
            }
        })
    }
}

/// `--amg-candidates`: rigid-body modes for the specs whose node coordinates are known
/// (`elasticity2d:N`, `elasticity3d:N`, `femelast2d:…`, `femelast3d:…`).
fn rbm_grid(cli: &Cli) -> Result<Option<Rbm>> {
    use cli::AmgCandidatesArg;
    let size = |n: &str| n.trim().replace('_', "").parse::<usize>().ok();
    let grid = if let Some(n) = cli.matrix.strip_prefix("elasticity2d:") {
        size(n).map(|n| Rbm::Grid(2, n))
    } else if let Some(n) = cli.matrix.strip_prefix("elasticity3d:") {
        size(n).map(|n| Rbm::Grid(3, n))
    } else {
        segsparse::generate::fem_problem(&cli.matrix)
            .filter(|(p, _)| p.physics == segsparse::generate::FemPhysics::Elasticity)
            .map(|(p, n)| Rbm::Fem(p, n, cli.seed))
    };
    match (cli.amg.amg_candidates, grid) {
        (AmgCandidatesArg::Constant, _) | (AmgCandidatesArg::Auto, None) => Ok(None),
        (_, Some(g)) => Ok(Some(g)),
        (AmgCandidatesArg::Rbm, None) => {
            bail!(
                "--amg-candidates rbm needs node coordinates: only the elasticity2d:N, \
                 elasticity3d:N, femelast2d:… and femelast3d:… specs have them"
            )
        }
    }
}

/// `--storage f32`: `None` for f64 values; else the operator with f32 values and whether the
/// solve's own operator holds values it rounds (an exact copy to fall back to), or why f32
/// storage was refused.
type Narrow<'a, T, B> = Option<std::result::Result<(&'a dyn LinearOperator<T, B>, bool), &'a str>>;

/// [`Narrow`] of what `--storage f32` built: `None` when it was not asked for.
fn narrow_of<'a, T: Elem, B: VectorOps<T>, O: LinearOperator<T, B>>(
    built: Option<&'a std::result::Result<O, String>>,
) -> Narrow<'a, T, B> {
    built.map(|r| match r {
        Ok(op) => Ok((op as &dyn LinearOperator<T, B>, op.is_narrowed())),
        Err(why) => Err(why.as_str()),
    })
}

/// One call of the solver `method` (GMRES restarted every `restart` steps), real or complex.
#[allow(clippy::too_many_arguments)]
///
/// The preconditioner is taken as a trait object: the solvers are then compiled once per element
/// type and backend, not once more for every preconditioner type (a virtual call per
/// application costs nothing next to it).
pub(crate) fn run_method<T: Elem, B: SolverOps<T>, A: LinearOperator<T, B> + ?Sized>(
    be: &B,
    op: &A,
    m: &dyn Preconditioner<T, B>,
    (method, restart): (MethodArg, usize),
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> std::result::Result<SolveInfo, SolveError> {
    match method {
        MethodArg::Cg | MethodArg::Pcg => pcg(be, op, m, b, x, params),
        MethodArg::Cocg => pcocg(be, op, m, b, x, params),
        MethodArg::Gmres => gmres(be, op, m, b, x, restart, params),
        MethodArg::Minres => minres(be, op, m, b, x, params),
        MethodArg::Bicgstab | MethodArg::Auto => bicgstab(be, op, m, b, x, params),
    }
}

#[cfg(feature = "cuda")]
fn gpu_solve<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    plan: Plan,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<Outcome> {
    use segsparse::backend::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let g = segsparse::gpu::Gpu::shared().context("--backend gpu")?;
    if plan.vectors32 {
        let solved = vectors32::solve_gpu(&g, a, b, x, plan.precond, params, setup_clock)?;
        return Ok(Outcome::new(
            plan.method,
            format!("gpu ({})", g.name()),
            solved,
        ));
    }
    let ops = GpuOps::<T>::new(&g)?;
    // The setup's own kernel modules load on a thread while the matrix is uploaded (after the
    // solver's, which the upload does not wait for then; the handle is kept to the end:
    // dropping it waits for the loads).
    let _loading = (plan.precond == PrecondArg::Amg)
        .then(|| segsparse::precond::amg::prepare_device_setup::<T>(&g));
    let da = GpuCsr::upload(&g, a)?;
    // --storage f32: the uploaded values checked and rounded to f32 on the device (with a
    // device copy of the exact ones for the true residuals where f32 rounds), or why not;
    // part of the setup.
    let mixed = match plan.storage {
        Storage::F64 => None,
        Storage::F32 => Some(
            match segsparse::spmv::gpu::mixed::GpuMixedCsr::from_device(
                (&da as &dyn std::any::Any)
                    .downcast_ref::<GpuCsr<f64>>()
                    .expect("--storage f32 runs in f64 (checked in run_typed)"),
            ) {
                Ok(m) => Ok(storage::AsWorking::<_, GpuOps<f64>>::new::<T, GpuOps<T>>(m)
                    .expect("--storage f32 runs in f64 (checked in run_typed)")),
                Err(segsparse::Error::InvalidInput(why)) => Err(why),
                Err(e) => return Err(e.into()),
            },
        ),
    };
    // --storage f32 --precond amg: the hierarchy set up on the device from the f32 values
    // (the f32 matrix of the mixed operator), cycled in f32.
    let h32 = match (&mixed, plan.precond) {
        (Some(Ok(m)), PrecondArg::Amg) => {
            let ops64 = GpuOps::<f64>::new(&g)?;
            let c = plan.rbm.map(|r| r.modes::<f64>()).transpose()?;
            let h = Narrowed::amg_from_matrix(&ops64, m.inner().low(), c.as_deref(), &plan.amg)
                .context("AMG setup (f32 hierarchy)")?;
            Some(
                storage::AsWorking::<_, GpuOps<f64>>::new::<T, GpuOps<T>>(h)
                    .expect("--storage f32 runs in f64 (checked in run_typed)"),
            )
        }
        _ => None,
    };
    let h32 = h32.as_ref().map(|h| {
        (
            h as &dyn Preconditioner<T, GpuOps<T>>,
            h.inner().inner().summary().clone(),
        )
    });
    let narrow = narrow_of::<T, GpuOps<T>, _>(mixed.as_ref());
    let solved = solve_with(&ops, &da, a, plan, b, x, params, setup_clock, narrow, h32)?;
    Ok(Outcome::new(
        plan.method,
        format!("gpu ({})", g.name()),
        solved,
    ))
}

#[cfg(not(feature = "cuda"))]
fn gpu_solve<T: Scalar>(
    _: &CsrMatrix<T>,
    _: &[T],
    _: &mut Vec<T>,
    _: Plan,
    _: &SolveParams,
    _: Instant,
) -> Result<Outcome> {
    bail!("--backend gpu: sparse-solve was built without the `cuda` feature")
}

/// Whether the progress bar may be drawn (text output to a terminal).
static PROGRESS_ENABLED: AtomicBool = AtomicBool::new(false);
/// The iteration limit (the bar's length).
static MAX_ITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The bar, created at the first status check after one second (short solves draw nothing).
static PROGRESS: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// The solver's status-check callback ([`SolveParams::on_check`] takes a plain `fn`, hence the
/// statics): an indicatif bar on stderr for solves longer than a second.
fn progress(p: &Progress) {
    if !PROGRESS_ENABLED.load(Ordering::Relaxed) || p.seconds < 1.0 {
        return;
    }
    let mut bar = PROGRESS.lock().unwrap_or_else(|e| e.into_inner());
    let bar = bar.get_or_insert_with(|| {
        let b = ProgressBar::with_draw_target(
            Some(MAX_ITERS.load(Ordering::Relaxed)),
            ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed:>4} [{bar:30}] {pos}/{len} iterations, relative residual {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    });
    bar.set_position(p.iteration as u64);
    bar.set_message(format!("{:.3e}", p.relative_residual));
}

fn clear_progress() {
    if let Some(b) = PROGRESS.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `--amg-*` options the command line's AMG options are the library's defaults.
    #[test]
    fn amg_options_default_to_the_library_s() {
        let cli = Cli::try_parse_from(["sparse-solve", "poisson2d:10"]).unwrap();
        let got = amg_params(&cli).unwrap();
        let want = AmgParams::default();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        let cli = Cli::try_parse_from([
            "sparse-solve",
            "poisson2d:10",
            "--amg-degree",
            "5",
            "--amg-cycle",
            "w",
            "--amg-smoother",
            "l1-jacobi",
        ])
        .unwrap();
        let got = amg_params(&cli).unwrap();
        assert_eq!(
            (got.degree, got.cycle, got.smoother),
            (
                5,
                segsparse::precond::amg::Cycle::W,
                segsparse::precond::amg::Smoother::L1Jacobi
            )
        );
        assert!(Cli::try_parse_from(["sparse-solve", "x", "--amg-degree", "33"]).is_err());
        assert!(Cli::try_parse_from(["sparse-solve", "x", "--amg-degree", "0"]).is_err());
    }

    /// Rigid-body modes come with the elasticity specs' node coordinates, one entry per row.
    #[test]
    fn rigid_body_modes_of_the_elasticity_specs() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap();
        for (spec, dim, modes) in [
            ("elasticity3d:3", 3, 6),
            ("elasticity2d:4", 2, 3),
            ("femelast3d:p1:3", 3, 6),
            ("femelast2d:p2:3:cube:ident", 2, 3),
        ] {
            let cli = parse(&["sparse-solve", spec]);
            let r = rbm_grid(&cli).unwrap().expect(spec);
            assert_eq!(r.dim(), dim);
            assert_eq!(amg_params(&cli).unwrap().block_size, dim);
            let m: Vec<Vec<f64>> = r.modes().unwrap();
            let a: CsrMatrix<f64> = segsparse::load(spec, cli.seed).unwrap();
            assert_eq!(m.len(), modes, "{spec}");
            assert!(m.iter().all(|v| v.len() == a.nrows()), "{spec}");
        }
        for spec in ["fem3d:p2:3", "poisson3d:4"] {
            assert!(rbm_grid(&parse(&["sparse-solve", spec])).unwrap().is_none());
            let e = rbm_grid(&parse(&["sparse-solve", spec, "--amg-candidates", "rbm"]));
            assert!(e.unwrap_err().to_string().contains("node coordinates"));
        }
    }

    #[test]
    fn json_report_keeps_its_fields_and_escapes_strings() {
        let r = Report {
            matrix: "a\"b\\c\n",
            n: 3,
            nnz: 7,
            method: "gmres",
            restart: Some(30),
            precond: "poly",
            backend: "cpu (2 threads)",
            precision: "f64".into(),
            iterations: 12,
            converged: false,
            relative_residual: finite(f64::NAN),
            tolerance: 1e-8,
            seconds: Some(0.5),
            seconds_per_iteration: Some(0.5 / 12.0),
            error: Some("breakdown".into()),
            setup_seconds: Some(0.1),
            resetup_seconds: None,
            amg_setup_seconds_all: vec![],
            amg_resetup_seconds_all: vec![],
            amg_resetup_phases: None,
            solve_seconds: Some(0.5),
            wall_seconds: Some(0.7),
            gpus: 1,
            gpus_requested: "auto".into(),
            dist_precond: None,
            gpu_choice: None,
            iterations_all: vec![12],
            solve_seconds_all: vec![0.5],
            rhs_mode: "sequential",
            rhs_seconds_total: None,
            amg: None,
            auto: Some(AutoReport {
                method: "gmres",
                precond: "ilu0",
                reason: "unsymmetric".into(),
                seconds: 1e-4,
                stats: Some(MatrixStats::default()),
                probe: None,
                cached: false,
                fallback: None,
                tried: vec![],
                failure: None,
                phases: Vec::new(),
                storage: None,
            }),
            factor: None,
            storage_requested: "f32",
            storage: "f64",
            storage_fallback: Some("f64 storage: a value is beyond f32's range".into()),
            amg_storage: None,
        };
        let s = serde_json::to_string(&r).unwrap();
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["matrix"], "a\"b\\c\n");
        assert_eq!(v["restart"], 30);
        assert_eq!(v["precond"], "poly");
        assert!(v["relative_residual"].is_null());
        assert_eq!(v["auto"]["precond"], "ilu0");
        assert_eq!(v["auto"]["reason"], "unsymmetric");
        for k in [
            "n",
            "nnz",
            "method",
            "backend",
            "precision",
            "iterations",
            "converged",
            "tolerance",
            "seconds",
            "seconds_per_iteration",
            "error",
            "setup_seconds",
            "solve_seconds",
            "wall_seconds",
            "gpus",
            "gpus_requested",
            "dist_precond",
            "gpu_choice",
            "auto",
            "factor",
        ] {
            assert!(v.get(k).is_some(), "{k} missing");
        }
    }
}
