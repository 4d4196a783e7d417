//! Command-line arguments of `sparse-solve` (clap derive).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use segsparse::precond::amg::{AmgParams, Cycle, Smoother};

/// Solve A·x = b with conjugate gradient, BiCGSTAB or restarted GMRES, unpreconditioned or with
/// a Jacobi, Chebyshev-polynomial, ILU(0), IC(0) or AMG preconditioner, on the CPU, one GPU or
/// several, and report iterations, the true final residual ‖b − A·x‖/‖b‖, the setup time, the
/// solve time and the solve time per iteration.
///
/// Exit status: 0 converged; 2 breakdown or no convergence (the reason on stderr); 1 other
/// errors.
#[derive(Parser, Debug)]
#[command(name = "sparse-solve", version)]
pub struct Cli {
    /// Matrix Market file (.mtx or .mtx.gz) or a generator spec such as poisson2d:1000 or
    /// poisson3d:100.
    pub matrix: String,

    /// Solver. auto: CG for a symmetric matrix with a positive diagonal, BiCGSTAB otherwise;
    /// for complex values (--precision c64|c128), COCG for a complex symmetric matrix, CG for a
    /// Hermitian one with a positive real diagonal, GMRES otherwise.
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    pub method: MethodArg,

    /// Preconditioner: auto (chosen with the method from cheap statistics of the matrix, read
    /// where it lives: symmetry to rounding, diagonal, dominance, sign pattern, size; the report
    /// says what and why), none, jacobi (the diagonal), poly (a Chebyshev polynomial in the Jacobi-scaled
    /// matrix, bounds from a few Lanczos/Arnoldi steps), ilu0 or ic0 (incomplete
    /// factorizations, two triangular solves per application; see --ilu-order, --ilu-apply), or
    /// amg (smoothed-aggregation algebraic multigrid, one cycle per application; see the
    /// --amg-* options). --method pcg with auto takes jacobi. With --method auto and one
    /// right-hand side, auto is the automatic solve: where the statistics cannot decide, the
    /// cheap candidate (CG or BiCGSTAB with none/Jacobi) runs a few iterations, and its measured
    /// rate decides whether CG + AMG or GMRES + ILU(0) takes over from its iterate; a candidate
    /// that fails hands over to the next (see --no-probe, --auto-model).
    #[arg(long, value_enum, default_value_t = PrecondArg::Auto)]
    pub precond: PrecondArg,

    /// --precond auto: the rule's first choice alone (its alternative only as a fallback),
    /// without the convergence probe.
    #[arg(long)]
    pub no_probe: bool,

    /// --precond auto: the probe's cost model from a JSON file (the fields of
    /// `autosolve::CostModel`, e.g. as benches/auto/fit_model.py writes them after measuring a
    /// device; missing fields keep their defaults).
    #[arg(long, value_name = "FILE")]
    pub auto_model: Option<std::path::PathBuf>,

    /// ILU(0)/IC(0): the ordering before factorizing. auto: multicolouring where the natural
    /// order's triangles are deep (hundreds of dependency levels) and the colouring has far
    /// fewer, natural otherwise (and where the multicoloured factor is unstable).
    #[arg(long, value_enum, default_value_t = IluOrderArg::Auto)]
    pub ilu_order: IluOrderArg,

    /// ILU(0)/IC(0): how the triangular solves are applied. auto: per triangle, exact on
    /// shallow ones, Jacobi sweeps on deep ones whose strict part is small; exact: always the
    /// exact (level-scheduled) solve.
    #[arg(long, value_enum, default_value_t = IluApplyArg::Auto)]
    pub ilu_apply: IluApplyArg,

    /// ILU: the factor's pattern. auto: A's own (ILU(0)), or, where a diagonal entry is missing
    /// or zero, ILUT after the scaled maximum-product row matching; level1, level2: ILU(k);
    /// threshold: ILUT(--ilu-drop-tol, --ilu-max-per-row), factored on the host.
    #[arg(long, value_enum, default_value_t = IluFillArg::Auto)]
    pub ilu_fill: IluFillArg,

    /// ILUT: entries below this times their row's 2-norm are dropped.
    #[arg(long, default_value_t = segsparse::sparse::incomplete::AUTO_DROP_TOL)]
    pub ilu_drop_tol: f64,

    /// ILUT: the most entries kept in each row of L and of U besides the diagonal.
    #[arg(long, default_value_t = segsparse::sparse::incomplete::AUTO_MAX_PER_ROW)]
    pub ilu_max_per_row: usize,

    /// ILU: the row matching that puts nonzeros on the diagonal. auto: where a diagonal entry
    /// is missing or zero (max-product with --ilu-fill auto, else transversal); transversal: a
    /// maximum transversal; max-product: MC64's maximum-product matching with its row and
    /// column scaling (the scaling is used by ILUT); off: none (a missing diagonal is an error).
    #[arg(long, value_enum, default_value_t = IluMatchingArg::Auto)]
    pub ilu_matching: IluMatchingArg,

    /// Degree of --precond poly: of its residual polynomial, as --amg-degree (degree − 1 matrix
    /// products per preconditioner application).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=65))]
    pub poly_degree: u32,

    /// GMRES restart length m (basis vectors kept per cycle).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=255))]
    pub restart: u32,

    /// Right-hand side: ones, aones (A·1, so the solution is 1), random (uniform in [-1, 1),
    /// seeded by --seed), or a Matrix Market vector file.
    #[arg(long, default_value = "ones")]
    pub rhs: String,

    /// Relative tolerance on ‖b − A·x‖/‖b‖ [default: 1e-8 for f64, 1e-5 for f32].
    #[arg(long)]
    pub tol: Option<f64>,

    /// Iteration limit.
    #[arg(long, default_value_t = 10_000)]
    pub max_iters: usize,

    /// Where to solve. auto: the GPU when one is usable, else the CPU.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,

    /// Floating-point precision of the matrix, vectors and arithmetic: real f32/f64 or complex
    /// c64/c128 (complex Matrix Market files such as young1c and the helmholtz3d:N:K:SHIFT
    /// spec need a complex precision; complex solves take --precond none, jacobi, ilu0 or ic0,
    /// on the CPU or the GPU).
    #[arg(long, value_enum, default_value_t = PrecisionArg::F64)]
    pub precision: PrecisionArg,

    /// Where the matrix's values are stored (with --precision f64). auto (the default): the
    /// automatic solve (--precond auto --method auto) chooses f32 values where every value is
    /// exact in f32 and an AMG hierarchy in f32, for matrices of at least 4 M entries, and
    /// reports it (JSON `auto.storage`); f64 everywhere else. f64: f64 values and hierarchy
    /// always. f32 — half the bytes
    /// per value, each widened exactly to f64 before its product, vectors and sums in f64. The
    /// solvers measure convergence on true residuals with the f64 values (CG with reliable
    /// updates, GMRES restarting from the true residual), so the answer meets the f64
    /// tolerance; where f32 storage cannot (values beyond f32's range, a condition number near
    /// 10⁷ or above) the solve continues with f64 storage by itself and the report says why.
    /// One GPU or the CPU, one right-hand side; --precond auto takes the rule's choice (no
    /// probe), preconditioners are built from the f64 values. f32-vectors (CG/PCG with no
    /// preconditioner or Jacobi): the recurrence's vectors in f32 too, the iterate and the
    /// true residuals in f64.
    #[arg(long, value_enum, default_value_t = StorageArg::Auto)]
    pub storage: StorageArg,

    /// With --storage auto: the fewest stored entries from which the automatic solve stores
    /// values or an AMG hierarchy in f32 (below, the matrix stays in the device's cache).
    #[arg(long, default_value_t = 4_000_000)]
    pub storage_min_entries: usize,

    /// Write the solution x as a Matrix Market array.
    #[arg(long, value_name = "X.mtx")]
    pub output: Option<PathBuf>,

    /// Draw the residual history (log scale) as an SVG.
    #[arg(long, value_name = "RESIDUALS.svg")]
    pub plot: Option<PathBuf>,

    /// Output format: text for people, json for one machine-readable object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Check convergence every this many iterations [default: 16 on the GPU, 1 on the CPU].
    #[arg(long)]
    pub check_every: Option<usize>,

    /// GPU: launch every kernel of every iteration from the host instead of recording the
    /// iterations between two convergence checks as a CUDA graph and replaying it (the default;
    /// results are the same bit for bit).
    #[arg(long)]
    pub no_graphs: bool,

    /// Split the solve over this many GPUs of this host (a thread per GPU, NCCL; rows balanced
    /// by nonzeros). 1: the single-device path chosen by --backend. auto: as many as the
    /// problem is worth, from its size and the all-reduce and halo-exchange costs measured on
    /// this machine at start (only with two or more GPUs; with one or none, 1 without starting
    /// NCCL). A count above what the problem gains from still runs, with one line on stderr
    /// saying so.
    #[arg(long, default_value = "1", value_parser = parse_gpus)]
    pub gpus: GpusArg,

    /// With --gpus N > 1: how the preconditioner spans the GPUs. auto: the global form where
    /// one exists (jacobi; poly is the distributed Chebyshev polynomial in the whole D⁻¹A; amg
    /// the distributed smoothed-aggregation AMG, aggregates per GPU, couplings kept, small
    /// coarse levels on the first GPU), block-Jacobi otherwise (ilu0, ic0). block: block-Jacobi,
    /// --precond applied to each GPU's diagonal block (couplings between GPUs dropped, no
    /// messages). global: refused for ilu0 and ic0, which have no distributed form.
    #[arg(long, value_enum, default_value_t = DistPrecondArg::Auto)]
    pub dist_precond: DistPrecondArg,

    /// Seed of random right-hand sides and random matrix specs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Solve this many right-hand sides (b, 1.1·b, 1.2·b, ...) with one preconditioner setup;
    /// the report gives the first solve and, in JSON, every solve's iterations and seconds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rhs_count: u32,

    /// How --rhs-count right-hand sides are solved: block (all at once, each column with its
    /// own convergence, the operator and preconditioner applied to the block) or sequential
    /// (one solve after the other, the same setup).
    #[arg(long, value_enum, default_value_t = RhsModeArg::Block)]
    pub rhs_mode: RhsModeArg,

    /// The right-hand sides after the first (--rhs-count): scaled ((1 + k/10)·b) or random
    /// (uniform in [-1, 1), seeded by --seed + k).
    #[arg(long, value_enum, default_value_t = RhsColumnsArg::Scaled)]
    pub rhs_columns: RhsColumnsArg,

    #[command(flatten)]
    pub amg: AmgArgs,
}

/// The library's AMG options, whose values the `--amg-*` options take by default.
fn amg_default() -> AmgParams {
    AmgParams::default()
}

/// `--amg-degree`: 1 to 32.
fn amg_degree(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(d) if (1..=32).contains(&d) => Ok(d),
        _ => Err(format!("expected a degree from 1 to 32, got {s:?}")),
    }
}

/// The options of `--precond amg` (defaults: [`AmgParams::default`]).
#[derive(clap::Args, Debug, Clone)]
pub struct AmgArgs {
    /// AMG: strength-of-connection threshold θ in [0, 1].
    #[arg(long, default_value_t = amg_default().theta)]
    pub amg_theta: f64,
    /// AMG: off-diagonal entries with |a_ij| < tol·sqrt(|a_ii|·|a_jj|) are dropped from the
    /// matrix the hierarchy is built from (rounding noise of finite-element assembly); the
    /// solver keeps the whole matrix. 0 keeps every entry.
    #[arg(long, default_value_t = amg_default().drop_tol)]
    pub amg_drop_tol: f64,
    /// AMG: smoother of every level.
    #[arg(long, value_enum, default_value_t = amg_default().smoother.into())]
    pub amg_smoother: AmgSmootherArg,
    /// AMG: Chebyshev smoother degree (operator applications per smoothing step).
    #[arg(long, default_value_t = amg_default().degree, value_parser = amg_degree)]
    pub amg_degree: usize,
    /// AMG: pre- and post-smoothing steps.
    #[arg(long, default_value_t = amg_default().sweeps)]
    pub amg_sweeps: usize,
    /// AMG: cycle shape.
    #[arg(long, value_enum, default_value_t = amg_default().cycle.into())]
    pub amg_cycle: AmgCycleArg,
    /// AMG: coarsen until at most this many rows, then invert that level densely.
    #[arg(long, default_value_t = amg_default().coarse_size)]
    pub amg_coarse_size: usize,
    /// AMG: at most this many levels.
    #[arg(long, default_value_t = amg_default().max_levels)]
    pub amg_max_levels: usize,
    /// AMG: near-nullspace candidates. auto: rigid-body modes (with 2 or 3 unknowns per node)
    /// for an elasticity2d:N, elasticity3d:N, femelast2d:… or femelast3d:… spec, the constant
    /// otherwise.
    #[arg(long, value_enum, default_value_t = AmgCandidatesArg::Auto)]
    pub amg_candidates: AmgCandidatesArg,
    /// AMG: unknowns per node of the fine level [default: 2 or 3 with rigid-body modes, else 1].
    #[arg(long)]
    pub amg_block_size: Option<usize>,
    /// AMG: smoothing steps on A·x = 0 applied to the candidates before fitting.
    #[arg(long, default_value_t = amg_default().improve_candidates)]
    pub amg_improve: usize,
    /// AMG: lower end of the Chebyshev interval as a fraction of its upper end.
    #[arg(long, default_value_t = amg_default().chebyshev_lower)]
    pub amg_cheb_lower: f64,
    /// AMG: run the setup on the host even with --backend gpu (where it runs on the device by
    /// default); for comparisons.
    #[arg(long)]
    pub amg_host_setup: bool,
    /// AMG: time every setup phase (the device setup then synchronises after each phase).
    #[arg(long)]
    pub amg_phase_times: bool,
    /// AMG: compute every Galerkin product entry by entry, also on levels with several
    /// unknowns per node (where the device setup multiplies by blocks); for comparisons.
    #[arg(long)]
    pub amg_scalar_products: bool,
    /// AMG: the MIS-2 priorities follow the node order inside windows of 2^W nodes (30: PyAMG's
    /// standard aggregation; 0: random priorities) [default: the library's, by the candidates].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=30))]
    pub amg_aggregation_window: Option<u32>,
    /// AMG: Lanczos steps of the spectral-radius estimates.
    #[arg(long, default_value_t = amg_default().spectral_steps)]
    pub amg_spectral_steps: usize,
    /// AMG: build the hierarchy this many times and report each setup's seconds
    /// (`amg_setup_seconds_all`); the first in a process also loads the GPU kernels.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub amg_setups: u32,
    /// AMG: run the numeric re-setup this many times on the same values and report each one's
    /// seconds (`amg_resetup_seconds_all`); on the GPU the first launches its kernels, the
    /// second records them as a CUDA graph (and launches it), the later ones replay it.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub amg_resetups: u32,
    /// AMG: launch the device re-setup's kernels one by one instead of recording them as a CUDA
    /// graph and replaying it; for comparisons.
    #[arg(long)]
    pub amg_no_resetup_graph: bool,
    /// AMG: smooth the prolongator as the numeric product `A·T`, a scaling pass and a scatter
    /// into `R` on every level, instead of one kernel that reads `A`, `T` and `D⁻¹` on levels
    /// with several candidates (the device setup and re-setup; the same values); for
    /// comparisons.
    #[arg(long)]
    pub amg_unfused_smoothing: bool,
}

/// `--amg-smoother`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmgSmootherArg {
    /// Chebyshev polynomial in D⁻¹A.
    Chebyshev,
    /// Damped Jacobi (ω = 2/3).
    Jacobi,
    /// l1-Jacobi.
    L1Jacobi,
}

/// `--amg-cycle`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmgCycleArg {
    /// V-cycle.
    V,
    /// W-cycle.
    W,
}

impl From<Smoother> for AmgSmootherArg {
    fn from(s: Smoother) -> Self {
        match s {
            Smoother::Chebyshev => AmgSmootherArg::Chebyshev,
            Smoother::Jacobi => AmgSmootherArg::Jacobi,
            Smoother::L1Jacobi => AmgSmootherArg::L1Jacobi,
        }
    }
}

impl From<AmgSmootherArg> for Smoother {
    fn from(s: AmgSmootherArg) -> Self {
        match s {
            AmgSmootherArg::Chebyshev => Smoother::Chebyshev,
            AmgSmootherArg::Jacobi => Smoother::Jacobi,
            AmgSmootherArg::L1Jacobi => Smoother::L1Jacobi,
        }
    }
}

impl From<Cycle> for AmgCycleArg {
    fn from(c: Cycle) -> Self {
        match c {
            Cycle::V => AmgCycleArg::V,
            Cycle::W => AmgCycleArg::W,
        }
    }
}

impl From<AmgCycleArg> for Cycle {
    fn from(c: AmgCycleArg) -> Self {
        match c {
            AmgCycleArg::V => Cycle::V,
            AmgCycleArg::W => Cycle::W,
        }
    }
}

/// `--amg-candidates`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmgCandidatesArg {
    /// Rigid-body modes for the elasticity specs, else the constant.
    Auto,
    /// The constant vector.
    Constant,
    /// Rigid-body modes (the elasticity specs only: they need the node coordinates).
    Rbm,
}

/// `--gpus`: a count or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpusArg {
    /// Chosen from the problem and the measured costs.
    Auto,
    /// This many (at least 1).
    Count(usize),
}

fn parse_gpus(s: &str) -> Result<GpusArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(GpusArg::Auto);
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(GpusArg::Count(n)),
        _ => Err(format!(
            "expected auto or a GPU count of at least 1, got {s:?}"
        )),
    }
}

/// `--dist-precond`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistPrecondArg {
    /// The global form where one exists (jacobi, poly, amg), block-Jacobi otherwise.
    Auto,
    /// Block-Jacobi: --precond on each GPU's diagonal block.
    Block,
    /// The global form (jacobi, poly, amg only).
    Global,
}

/// `--method`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodArg {
    /// CG for symmetric matrices with a positive diagonal, BiCGSTAB otherwise.
    Auto,
    /// Conjugate gradient (symmetric positive definite matrices).
    Cg,
    /// Conjugate gradient with a Jacobi (diagonal) preconditioner.
    Pcg,
    /// BiCGSTAB (unsymmetric matrices).
    Bicgstab,
    /// Restarted GMRES(m) (any nonsingular matrix; see --restart).
    Gmres,
    /// Conjugate orthogonal CG (complex symmetric matrices, A = Aᵀ; CG for a real matrix).
    Cocg,
    /// MINRES (symmetric indefinite matrices: saddle points, shifted operators; with an SPD
    /// preconditioner or none).
    Minres,
}

impl MethodArg {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            MethodArg::Auto => "auto",
            MethodArg::Cg => "cg",
            MethodArg::Pcg => "pcg",
            MethodArg::Bicgstab => "bicgstab",
            MethodArg::Gmres => "gmres",
            MethodArg::Cocg => "cocg",
            MethodArg::Minres => "minres",
        }
    }
}

/// `--ilu-order`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IluOrderArg {
    /// Multicolouring where it shortens deep dependency chains, else natural.
    Auto,
    /// The matrix's own order.
    Natural,
    /// Greedy multicolouring.
    Multicolor,
    /// Reverse Cuthill–McKee.
    Rcm,
}

/// `--ilu-fill`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IluFillArg {
    /// ILU(0), or ILUT after the scaled matching where the diagonal needs a matching.
    Auto,
    /// ILU(0): A's own pattern.
    Level0,
    /// ILU(1).
    Level1,
    /// ILU(2).
    Level2,
    /// ILUT(--ilu-drop-tol, --ilu-max-per-row).
    Threshold,
}

/// `--ilu-matching`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IluMatchingArg {
    /// Where a diagonal entry is missing or zero.
    Auto,
    /// Always a maximum transversal.
    Transversal,
    /// Always the scaled maximum-product matching.
    MaxProduct,
    /// Never.
    Off,
}

/// `--ilu-apply`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IluApplyArg {
    /// Chosen per triangle from its levels and the size of its strict part.
    Auto,
    /// Always the exact solve.
    Exact,
}

/// `--precond`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecondArg {
    /// Chosen with the method from the matrix's statistics.
    Auto,
    /// No preconditioner.
    None,
    /// Jacobi: the inverse of the diagonal.
    Jacobi,
    /// A Chebyshev polynomial in D⁻¹A (only matrix products and vector updates).
    Poly,
    /// ILU(0): incomplete LU on A's pattern (for gmres and bicgstab; a diagonal shift is added
    /// automatically when a pivot vanishes).
    Ilu0,
    /// IC(0): incomplete Cholesky on A's lower pattern (for cg/pcg on SPD matrices; shifted
    /// automatically when a pivot is not positive).
    Ic0,
    /// Smoothed-aggregation algebraic multigrid.
    Amg,
}

impl PrecondArg {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            PrecondArg::Auto => "auto",
            PrecondArg::None => "none",
            PrecondArg::Jacobi => "jacobi",
            PrecondArg::Poly => "poly",
            PrecondArg::Ilu0 => "ilu0",
            PrecondArg::Ic0 => "ic0",
            PrecondArg::Amg => "amg",
        }
    }
}

/// `--backend`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU when usable, else the CPU.
    Auto,
    /// The CPU (rayon).
    Cpu,
    /// The GPU (fails when none is usable).
    Gpu,
}

/// `--precision`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecisionArg {
    /// Single precision.
    F32,
    /// Double precision.
    F64,
    /// Complex single precision (two f32; a real file or spec gets zero imaginary parts).
    C64,
    /// Complex double precision (two f64).
    C128,
}

impl PrecisionArg {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PrecisionArg::F32 => "f32",
            PrecisionArg::F64 => "f64",
            PrecisionArg::C64 => "c64",
            PrecisionArg::C128 => "c128",
        }
    }
}

/// `--storage`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageArg {
    /// The automatic solve's choice (`precond::auto::storage`); f64 for a named method or
    /// preconditioner.
    Auto,
    /// The values in f64 (the working precision).
    F64,
    /// The values in f32 under f64 vectors and sums.
    F32,
    /// CG/PCG (no preconditioner or Jacobi): the values and the recurrence's vectors in f32
    /// (`solvers::narrow::pcg_f32`), the iterate and the true residuals of its reliable
    /// updates in f64; the fallback to f64 where the f32 recurrence cannot reach the tolerance.
    F32Vectors,
}

impl StorageArg {
    /// The library's storage.
    pub fn storage(self) -> segsparse::Storage {
        match self {
            StorageArg::Auto | StorageArg::F64 => segsparse::Storage::F64,
            StorageArg::F32 | StorageArg::F32Vectors => segsparse::Storage::F32,
        }
    }

    /// `f32-vectors`: the recurrence's vectors in f32 too.
    pub fn vectors(self) -> bool {
        self == StorageArg::F32Vectors
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StorageArg::Auto => "auto",
            StorageArg::F64 => "f64",
            StorageArg::F32 => "f32",
            StorageArg::F32Vectors => "f32-vectors",
        }
    }
}

/// `--format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Lines for people.
    Text,
    /// One JSON object.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
        let c = Cli::try_parse_from(["sparse-solve", "poisson2d:10"]).unwrap();
        assert_eq!(c.method, MethodArg::Auto);
        assert_eq!(c.backend, BackendArg::Auto);
        assert_eq!(c.precision, PrecisionArg::F64);
        assert_eq!(c.format, Format::Text);
        assert_eq!(c.rhs, "ones");
        assert_eq!((c.precond, c.restart), (PrecondArg::Auto, 30));
        assert_eq!(
            (c.ilu_order, c.ilu_apply),
            (IluOrderArg::Auto, IluApplyArg::Auto)
        );
        let c = Cli::try_parse_from([
            "sparse-solve",
            "m.mtx",
            "--method",
            "bicgstab",
            "--tol",
            "1e-6",
            "--max-iters",
            "50",
            "--backend",
            "cpu",
            "--precision",
            "f32",
            "--format",
            "json",
            "--plot",
            "r.svg",
            "--output",
            "x.mtx",
        ])
        .unwrap();
        assert_eq!(c.method, MethodArg::Bicgstab);
        assert_eq!((c.tol, c.max_iters), (Some(1e-6), 50));
        let c = Cli::try_parse_from([
            "sparse-solve",
            "m.mtx",
            "--method",
            "gmres",
            "--restart",
            "50",
            "--precond",
            "poly",
        ])
        .unwrap();
        assert_eq!(
            (c.method, c.restart, c.precond),
            (MethodArg::Gmres, 50, PrecondArg::Poly)
        );
        assert!(Cli::try_parse_from(["sparse-solve", "m.mtx", "--restart", "0"]).is_err());
        assert!(Cli::try_parse_from(["sparse-solve", "m.mtx", "--precond", "ilu"]).is_err());
        let c = Cli::try_parse_from(["sparse-solve", "m.mtx", "--precond", "ic0"]).unwrap();
        assert_eq!(c.precond, PrecondArg::Ic0);
        assert_eq!(c.gpus, GpusArg::Count(1));
        assert_eq!(c.dist_precond, DistPrecondArg::Auto);
        let c = Cli::try_parse_from(["sparse-solve", "m.mtx", "--gpus", "auto"]).unwrap();
        assert_eq!(c.gpus, GpusArg::Auto);
        let c = Cli::try_parse_from([
            "sparse-solve",
            "m.mtx",
            "--gpus",
            "4",
            "--dist-precond",
            "block",
        ])
        .unwrap();
        assert_eq!(
            (c.gpus, c.dist_precond),
            (GpusArg::Count(4), DistPrecondArg::Block)
        );
        for bad in ["0", "-1", "two", ""] {
            assert!(
                Cli::try_parse_from(["sparse-solve", "m.mtx", "--gpus", bad]).is_err(),
                "--gpus {bad:?}"
            );
        }
    }
}

/// `--rhs-mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RhsModeArg {
    Block,
    Sequential,
}

/// `--rhs-columns`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RhsColumnsArg {
    Scaled,
    Random,
}
