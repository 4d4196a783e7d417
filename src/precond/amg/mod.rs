//! Smoothed-aggregation algebraic multigrid (Vaněk, Mandel and Brezina 1996) as a
//! preconditioner for `solvers::pcg`, `solvers::gmres` and
//! `solvers::bicgstab`, on the CPU and on the GPU with one cycle body.
//!
//! ```
//! use segsparse::precond::{Amg, AmgParams};
//! use segsparse::solvers::{pcg, SolveParams};
//! use segsparse::backend::Cpu;
//! let a = segsparse::generate::poisson3d::<f64>(16).unwrap();
//! let amg = Amg::new(&Cpu, &a, &AmgParams::default()).unwrap();
//! println!("{}", amg.summary()); // levels, rows and entries per level, complexities
//! let b = vec![1.0; a.nrows()];
//! let mut x = vec![0.0; a.nrows()];
//! let info = pcg(&Cpu, &a, &amg, &b, &mut x, &SolveParams::default()).unwrap();
//! assert!(info.iterations <= 12);
//! ```
//!
//! # Setup
//!
//! The phases, in order: symmetric strength of connection
//! ([`strength_symmetric`](crate::sparse::strength_symmetric), θ = 0 by default as PyAMG's SA)
//! on the node graph (blocks of [`AmgParams::block_size`] unknowns amalgamated by their
//! Frobenius norm, [`amalgamate`](crate::sparse::amalgamate)), deterministic MIS-2 aggregation
//! ([`aggregate_mis2`](crate::sparse::aggregate_mis2)), the tentative prolongator `T` from the
//! near-nullspace candidates (the constant by default, e.g. [`rigid_body_modes_2d`] for
//! elasticity) by a QR per aggregate, prolongator smoothing `P = (I − ω/ρ·D⁻¹A)·T` with `ρ` the
//! largest Ritz value of 15 Lanczos steps on `D⁻¹A` (ω = 4/3: PyAMG's defaults), `R = Pᵀ` and
//! `A_c = R·A·P` with symbolic SpGEMM plans kept for re-setup; levels until at most
//! [`AmgParams::coarse_size`] rows, whose matrix is inverted densely (Cholesky, LU when that
//! fails).
//!
//! **Where it runs** ([`AmgOps::amg_setup`]): the CPU backend runs the phases on the host
//! with rayon (`setup.rs`). The GPU backend runs every phase on the device (`device.rs`, with
//! [`sparse::gpu`](crate::sparse::gpu)'s strength, aggregation, tentative prolongator, SpGEMM
//! and transpose) and keeps the hierarchy there: only the coarsest matrix (≤ `coarse_size`
//! rows) comes back for its dense inverse, and several candidates come back for their QR. The
//! two compute the same hierarchy: the same aggregates and patterns, values equal up to the
//! rounding of the ρ estimates (`tests/all/amg.rs`, `tests/all/amg_gpu_graph.rs`).
//! [`AmgParams::host_setup`] runs the host setup on the GPU backend and uploads the result (the
//! path before the GPU setup existed; for comparisons). Setup times against the GPU setup and
//! PyAMG are in `benches/results/history/amg.md`.
//!
//! [`Amg::update`] reruns only the numeric phases for new values on the same pattern.
//!
//! **The hierarchy in `f32` under an `f64` solve**: [`Narrowed::amg`](crate::precond::Narrowed::amg)
//! (or `amg_from_matrix` from a device matrix rounded on the device) sets up `Amg<f32, _>` from
//! the `f32` rounding of `A` — every phase in `f32`, the coarse inverse factored in `f64` and
//! stored in `f32` — and cycles it on `f32` vectors under the `f64` Krylov solver: every matrix,
//! smoother vector and cycle vector moves half the bytes (`precond::Narrowed` says why the answer
//! stays an `f64` one).
//!
//! # Cycle
//!
//! A V-cycle (or W) with a smoother that runs in parallel: PyAMG's default, symmetric
//! Gauss–Seidel, is sequential, so the default here is a Chebyshev polynomial in `D⁻¹A` on
//! `[0.11ρ, 1.1ρ]` of degree 3, one pre- and one post-smoothing step;
//! damped Jacobi and l1-Jacobi are the alternatives. Pre- and post-smoother are the same
//! symmetric operator and the coarse solve is exact, so the cycle is a symmetric positive
//! definite preconditioner for an SPD matrix (CG may use it). Every step is a backend call that
//! queues work ([`MultigridOps::spmv`] and the solvers' vector steps): on the GPU,
//! [`Preconditioner::apply`] never synchronises with the host.
//!
//! # References
//!
//! - P. Vaněk, J. Mandel and M. Brezina, *Algebraic multigrid by smoothed aggregation for second
//!   and fourth order elliptic problems*, Computing 56, 1996.
//! - N. Bell, S. Dalton and L. N. Olson, *Exposing fine-grained parallelism in algebraic
//!   multigrid methods*, SIAM J. Sci. Comput. 34(4), 2012.
//! - M. Adams, M. Brezina, J. Hu and R. Tuminaro, *Parallel multigrid smoothing: polynomial
//!   versus Gauss–Seidel*, J. Comput. Phys. 188, 2003 (Chebyshev smoothers).

mod block_cycle;
mod coarse;
mod cycle;
#[cfg(feature = "cuda")]
mod device;
mod level;
mod setup;
mod tentative;

use std::cell::RefCell;
use std::fmt;
use std::time::Instant;

pub use coarse::CoarseSolver;
#[cfg(feature = "cuda")]
pub use device::{prepare_device_setup, AMG_SETUP_SRC};
pub use tentative::{fit_candidates, rigid_body_modes_2d, rigid_body_modes_3d};

use crate::backend::{Cpu, MultigridOps, Preconditioner};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
pub(crate) use cycle::{smooth, LevelOp, LevelSmoother, Operator, Scratch};
use cycle::{DeviceLevel, Work};
use level::HostHierarchy;
pub(crate) use setup::{positions, smooth_prolongator, smoother_scalings, strength};

/// The smoother of every level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub enum Smoother {
    /// Chebyshev polynomial in `D⁻¹A` of degree [`AmgParams::degree`] on
    /// `[ρ·chebyshev_lower, ρ]·chebyshev_upper`.
    Chebyshev,
    /// Damped Jacobi, `x ← x + ω·D⁻¹(b − Ax)` with ω = [`AmgParams::jacobi_weight`].
    Jacobi,
    /// l1-Jacobi, `x ← x + D_l1⁻¹(b − Ax)` with `(D_l1)_ii = Σ_j |a_ij|` (convergent without a
    /// weight for any SPD matrix).
    L1Jacobi,
}

impl fmt::Display for Smoother {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Smoother::Chebyshev => "chebyshev",
            Smoother::Jacobi => "jacobi",
            Smoother::L1Jacobi => "l1-jacobi",
        })
    }
}

/// The cycle shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub enum Cycle {
    /// One coarse-grid visit per level.
    V,
    /// Two coarse-grid visits per level.
    W,
}

/// Options of the [`Amg`] preconditioner. Fill with struct-update syntax from `Default`.
#[derive(Clone, Copy, Debug)]
pub struct AmgParams {
    /// Strength threshold θ of the symmetric strength of connection. Default 0 (every
    /// connection is strong: PyAMG's SA default). A level is built again with every connection
    /// strong where θ leaves more than half of its rows as coarse unknowns, or makes a coarse
    /// operator with more entries than the level's own: a threshold that follows the strong
    /// direction of an anisotropic problem aggregates along lines, and the Galerkin products
    /// of such aggregates grow denser level by level (on a 3-D anisotropic problem, past the
    /// level itself) until no connection is strong and the coarsening stops far above
    /// [`coarse_size`](Self::coarse_size).
    pub theta: f64,
    /// Entries of the fine matrix dropped before the setup: off the diagonal, `a_ij` with
    /// `|a_ij| < drop_tol·sqrt(|a_ii|·|a_jj|)` ([`drop_small`](crate::sparse::drop_small)). The
    /// hierarchy, its finest level (the cycle's smoother and residual) included, is built from
    /// what is left; the solver keeps multiplying by the matrix it was given. Finite-element
    /// assembly leaves rounding noise where an entry cancels in exact arithmetic: 40 % of the
    /// entries of the 3-D Q1 elasticity matrix are below 1e-12 of their scale, and each costs
    /// the setup's products as much as a real entry. The re-setup ([`Amg::update`]) keeps the
    /// entries of the first setup. Default 1e-12 (0: keep every entry).
    pub drop_tol: f64,
    /// Seed of the MIS-2 aggregation's priorities. Default 0.
    pub seed: u64,
    /// The MIS-2 priorities follow the node order inside windows of `2^w` consecutive nodes,
    /// the windows ranked at random
    /// ([`aggregate_mis2_ordered`](crate::sparse::aggregate_mis2_ordered)); `Some(0)`: random
    /// priorities for every node; `Some(30)` (one window): PyAMG's standard aggregation, whose
    /// denser roots give more, smaller aggregates but take a round per few nodes along the node
    /// order. Default `None`: 30 with several candidates (elasticity with rigid-body modes: 10
    /// iterations instead of 16 on 2-D elasticity 300², PyAMG's count; the graph is the node
    /// graph, a fraction of the rows), 0 with one (Poisson 3-D 128³ would take 593 rounds
    /// instead of 14 for one iteration less; the 27-point stencil and the anisotropic problem
    /// gain little: `benches/results/amg.md`).
    pub aggregation_window: Option<u32>,
    /// Unknowns per node on the fine level (2 for 2-D elasticity, 3 for 3-D): strength and
    /// aggregation run on the node graph. Coarse levels have as many unknowns per node as
    /// there are candidates. Default 1.
    pub block_size: usize,
    /// Prolongator smoothing weight: `P = (I − ω/ρ(D⁻¹A)·D⁻¹A)·T`. Default 4/3.
    pub omega: f64,
    /// The smoother. Default [`Smoother::Chebyshev`].
    pub smoother: Smoother,
    /// Chebyshev: degree of the residual polynomial (operator applications per smoothing step,
    /// the residual's included). Default 3: the shortest time to solution on Poisson 3-D,
    /// anisotropic 2-D and 2-D elasticity among degrees 2–4 that keeps Poisson within 20 % of
    /// PyAMG's iterations (`benches/results/history/amg.md`; degree 2 is faster still but takes 30 %
    /// more iterations).
    pub degree: usize,
    /// Chebyshev: the interval's upper end as a multiple of the estimated ρ(D⁻¹A). Default 1.1.
    pub chebyshev_upper: f64,
    /// Chebyshev: the interval's lower end as a fraction of the upper one. Default 1/10 (PyAMG's
    /// Chebyshev smoother uses 1/30; 1/10 took 5–15 % fewer iterations on Poisson 2-D/3-D,
    /// the 27-point stencil and elasticity, and 10 % more on the anisotropic problem).
    pub chebyshev_lower: f64,
    /// Damped Jacobi's weight. Default 2/3.
    pub jacobi_weight: f64,
    /// Pre- and post-smoothing steps. Default 1.
    pub sweeps: usize,
    /// V- or W-cycle. Default V.
    pub cycle: Cycle,
    /// Stop coarsening at this many rows or fewer; that level is inverted densely. Default 300.
    pub coarse_size: usize,
    /// At most this many levels. Default 10.
    pub max_levels: usize,
    /// Smoothing steps on `A·x = 0` applied to the candidates before the tentative
    /// prolongator is fitted (PyAMG's `improve_candidates`, 4 symmetric Gauss–Seidel sweeps by
    /// default there). Two steps take one or two PCG iterations off Poisson, the 27-point
    /// stencil, anisotropic, P2 and elasticity problems (`benches/results/amg.md`) for
    /// `2·degree` fine-level products per candidate in the setup; but the smoothed candidates
    /// depend on the matrix, so the GPU backend's [`Amg::update`] then runs a whole setup
    /// instead of the numeric re-setup. Default 0.
    pub improve_candidates: usize,
    /// Lanczos steps of the spectral-radius estimate. Default 15.
    pub spectral_steps: usize,
    /// Run the setup on the host even when the backend could run it (the GPU backend sets up
    /// on the device by default): for comparisons; the hierarchy is the same up to the rounding
    /// of the ρ estimates. Default false.
    pub host_setup: bool,
    /// Time every setup phase ([`SetupTimes`]): the device setup then synchronises after each
    /// phase, which costs time. Without it the device setup reports only the total (and the
    /// upload of a host matrix); the host setup always times its phases. Default false.
    pub phase_times: bool,
    /// Record the device's numeric re-setup ([`Amg::update`]) as a CUDA graph on its second run
    /// (the first launches the kernels one by one, loading them) and replay it on later ones:
    /// the same kernels on the same arrays, so the same hierarchy bit for bit, without the
    /// host's launch cost. The graph keeps four `f64` vectors of the
    /// fine size (the Lanczos arrays) for as long as the hierarchy lives. Ignored with
    /// [`phase_times`](Self::phase_times) (which synchronises between phases), by the host
    /// setup, and while another thread uses the same device (the kernels are then launched
    /// directly). Default true.
    pub resetup_graph: bool,
    /// A level with several unknowns per node ([`block_size`](Self::block_size) > 1 on the
    /// fine level, the candidates' count below) has its Galerkin product `R·A·P` stored by
    /// whole `k × k` blocks ([`crate::sparse::block_galerkin`]): the scalar product's values bit
    /// for bit, and an explicit zero in a block entry that no scalar product reaches. The
    /// device setup computes it by blocks (`A`'s node blocks, `P`'s node × aggregate blocks:
    /// [`BlockGalerkin`](crate::sparse::gpu::BlockGalerkin)), the host setup from the scalar
    /// product. Levels whose whole blocks would more than double `A`, `P` or `R` take the scalar
    /// product. Default true (false: the scalar product everywhere, for comparisons).
    pub block_products: bool,
    /// On levels with several near-nullspace candidates, the device setup and re-setup compute
    /// `P = (I − ω/ρ·D⁻¹A)·T` on the pattern of `A·T` in one kernel that reads `A`, `T` and
    /// `D⁻¹` (a lane per entry of `T`'s row, the products summed in the order and rounding of
    /// the SpGEMM), and the re-setup writes `R = Pᵀ`'s values from the same kernel; instead of
    /// the numeric SpGEMM `A·T`, a smoothing pass over its values and a scatter of them into
    /// `R`. The same values bit for bit. Levels with one candidate keep the product and the
    /// passes (as fast there). Default true (false: the separate product and passes
    /// everywhere, for comparisons).
    pub fused_smoothing: bool,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for AmgParams {
    fn default() -> Self {
        AmgParams {
            theta: 0.0,
            drop_tol: 1e-12,
            seed: 0,
            aggregation_window: None,
            block_size: 1,
            omega: 4.0 / 3.0,
            smoother: Smoother::Chebyshev,
            degree: 3,
            chebyshev_upper: 1.1,
            chebyshev_lower: 0.1,
            jacobi_weight: 2.0 / 3.0,
            sweeps: 1,
            cycle: Cycle::V,
            coarse_size: 300,
            max_levels: 10,
            improve_candidates: 0,
            spectral_steps: 15,
            host_setup: false,
            phase_times: false,
            resetup_graph: true,
            block_products: true,
            fused_smoothing: true,
            non_exhaustive: (),
        }
    }
}

impl AmgParams {
    /// The ordering window of the aggregation for `candidates` near-nullspace candidates
    /// ([`AmgParams::aggregation_window`]).
    pub(crate) fn window(&self, candidates: usize) -> u32 {
        self.aggregation_window
            .unwrap_or(if candidates > 1 { 30 } else { 0 })
            .min(30)
    }

    /// One cycle's cost in fine-level products for a hierarchy of this operator complexity
    /// ([`Preconditioner::cost_in_products`] of [`Amg`] and of the distributed AMG).
    pub(crate) fn cycle_cost(&self, operator_complexity: f64) -> f64 {
        let per_step = match self.smoother {
            Smoother::Chebyshev => self.degree.max(1) as f64,
            _ => 1.0,
        };
        let per_level = 2.0 * self.sweeps as f64 * per_step + 2.0;
        let w = if self.cycle == Cycle::W { 2.0 } else { 1.0 };
        per_level * operator_complexity.max(1.0) * w
    }

    pub(crate) fn check(&self) -> Result<()> {
        use cycle::bad;
        if !(0.0..=1.0).contains(&self.theta) {
            return Err(bad(format!("theta = {} is not in [0, 1]", self.theta)));
        }
        if !(self.drop_tol.is_finite() && (0.0..1.0).contains(&self.drop_tol)) {
            return Err(bad(format!(
                "drop_tol = {} is not in [0, 1)",
                self.drop_tol
            )));
        }
        if self.block_size == 0 {
            return Err(bad("block_size must be at least 1".into()));
        }
        if !(self.omega > 0.0 && self.omega < 2.0) {
            return Err(bad(format!("omega = {} is not in (0, 2)", self.omega)));
        }
        if self.degree == 0 {
            return Err(bad("the Chebyshev degree must be at least 1".into()));
        }
        if !(self.chebyshev_upper >= 1.0
            && self.chebyshev_lower > 0.0
            && self.chebyshev_lower < 1.0)
        {
            return Err(bad(format!(
                "Chebyshev bounds: upper factor {} must be ≥ 1 and lower fraction {} in (0, 1)",
                self.chebyshev_upper, self.chebyshev_lower
            )));
        }
        if !(self.jacobi_weight > 0.0 && self.jacobi_weight < 2.0) {
            return Err(bad(format!(
                "jacobi_weight = {} is not in (0, 2)",
                self.jacobi_weight
            )));
        }
        if self.max_levels == 0 {
            return Err(bad("max_levels must be at least 1".into()));
        }
        if self.coarse_size > 20_000 {
            return Err(bad(format!(
                "coarse_size = {} is too large for a dense inverse (at most 20000)",
                self.coarse_size
            )));
        }
        Ok(())
    }

    /// Whether aggregating at `theta` a level of `rows` rows into `coarse` coarse unknowns
    /// coarsens too little to keep the threshold ([`theta`](Self::theta)): more than half the
    /// rows stay, or none does (no connection is strong, so no row is aggregated).
    pub(crate) fn stalled(&self, theta: f64, coarse: usize, rows: usize) -> bool {
        theta > 0.0 && (coarse == 0 || 2 * coarse > rows)
    }

    /// Whether a coarse operator of `coarse_nnz` entries made at `theta` from a level of `nnz`
    /// entries is too dense to keep the threshold ([`theta`](Self::theta)).
    pub(crate) fn too_dense(&self, theta: f64, coarse_nnz: usize, nnz: usize) -> bool {
        theta > 0.0 && coarse_nnz > nnz
    }

    /// Fails when the coarsest level, `level` with `rows` rows, is too large for its dense
    /// inverse: more than [`coarse_size`](Self::coarse_size) and [`DENSE_COARSE_ROWS`] (its
    /// memory grows with `rows²` and its time with `rows³`).
    pub(crate) fn check_coarsest(&self, level: usize, rows: usize) -> Result<()> {
        let limit = self.coarse_size.max(DENSE_COARSE_ROWS);
        if rows <= limit {
            return Ok(());
        }
        Err(Error::InvalidInput(format!(
            "AMG: coarsening stopped at level {level} with {rows} rows, more than the dense \
             coarse solve takes ({limit}): the level's rows are not connected enough to \
             aggregate (a diagonal or nearly diagonal matrix: use Jacobi), or max_levels = {} \
             was reached",
            self.max_levels
        )))
    }
}

/// The most rows the coarsest level keeps for its dense inverse when coarsening stops above
/// [`AmgParams::coarse_size`] (no aggregation, or [`AmgParams::max_levels`] reached): 5000 rows
/// cost 200 MB and about 4·10¹⁰ operations.
pub const DENSE_COARSE_ROWS: usize = 5000;

/// Seconds spent in each setup phase (the device setup fills the phases only with
/// [`AmgParams::phase_times`]; `total` always).
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct SetupTimes {
    /// Strength of connection.
    pub strength: f64,
    /// MIS-2 aggregation.
    pub aggregate: f64,
    /// Candidate improvement.
    pub candidates: f64,
    /// Tentative prolongators (QR per aggregate).
    pub tentative: f64,
    /// Prolongator smoothing (`A·T`, scaling) and the transposes `R = Pᵀ`.
    pub smooth: f64,
    /// Galerkin products `R·A·P`.
    pub galerkin: f64,
    /// Diagonals and spectral-radius estimates of every level.
    pub smoother: f64,
    /// The coarse inverse.
    pub coarse: f64,
    /// Uploading the hierarchy to the backend.
    pub upload: f64,
    /// All of setup (wall clock).
    pub total: f64,
}

/// One level of the [`AmgSummary`].
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct LevelSummary {
    /// Rows of the level's operator.
    pub rows: usize,
    /// Stored entries of the level's operator.
    pub nnz: usize,
    /// Unknowns per node.
    pub block: usize,
    /// The estimate of ρ(D⁻¹A).
    pub rho: f64,
}

/// What the hierarchy looks like: printable (`Display`) and, with the `cli` feature,
/// serde-serializable.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct AmgSummary {
    /// Levels, finest first.
    pub levels: Vec<LevelSummary>,
    /// Σ nnz(A_l) / nnz(A_0).
    pub operator_complexity: f64,
    /// Σ rows(A_l) / rows(A_0).
    pub grid_complexity: f64,
    /// Bytes of the hierarchy on the backend (operators, transfers, the coarse inverse,
    /// smoother and cycle vectors).
    pub device_bytes: usize,
    /// Near-nullspace candidates.
    pub candidates: usize,
    /// The coarse solve.
    pub coarse_solver: CoarseSolver,
    /// The smoother.
    pub smoother: Smoother,
    /// Chebyshev degree (when the smoother is Chebyshev).
    pub degree: usize,
    /// Smoothing steps before and after the coarse correction.
    pub sweeps: usize,
    /// The cycle.
    pub cycle: Cycle,
    /// Setup time by phase.
    pub setup: SetupTimes,
}

impl fmt::Display for AmgSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "smoothed-aggregation AMG: {} levels, {:?}-cycle, {} smoother{} ×{}, coarse {}",
            self.levels.len(),
            self.cycle,
            self.smoother,
            if self.smoother == Smoother::Chebyshev {
                format!(" (degree {})", self.degree)
            } else {
                String::new()
            },
            self.sweeps,
            self.coarse_solver
        )?;
        writeln!(f, "  level        rows          nnz  block   rho(D⁻¹A)")?;
        for (l, lv) in self.levels.iter().enumerate() {
            writeln!(
                f,
                "  {l:>5} {:>11} {:>12} {:>6} {:>11.4}",
                lv.rows, lv.nnz, lv.block, lv.rho
            )?;
        }
        write!(
            f,
            "  operator complexity {:.3}, grid complexity {:.3}, {} candidate(s), {:.1} MiB on the \
             backend, setup {:.3} s",
            self.operator_complexity,
            self.grid_complexity,
            self.candidates,
            self.device_bytes as f64 / (1 << 20) as f64,
            self.setup.total
        )
    }
}

/// Where a backend builds the AMG hierarchy (on top of its [`MultigridOps`]): the host by
/// default, the device for the GPU backend (`device.rs`). A backend with nothing faster than the
/// host setup writes `impl AmgOps<T> for MyBackend {}`.
pub trait AmgOps<T: Scalar>: MultigridOps<T> {
    /// Builds the hierarchy of `a` (the setup). The default runs it on the host and uploads
    /// the result; the GPU backend runs it on the device (`device.rs`).
    ///
    /// # Errors
    /// As [`Amg::new`].
    #[doc(hidden)]
    fn amg_setup(
        &self,
        a: &CsrMatrix<T>,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<AmgSetup<T, Self>> {
        host_setup(self, a, candidates, params)
    }
    /// Builds the hierarchy of a matrix already on the backend. The default downloads it and
    /// runs the host setup; the GPU backend sets up on the device from it, without a host copy.
    ///
    /// # Errors
    /// As [`Amg::new`].
    #[doc(hidden)]
    fn amg_setup_matrix(
        &self,
        a: &Self::Matrix,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<AmgSetup<T, Self>> {
        host_setup(self, &self.download_matrix(a)?, candidates, params)
    }
}

/// The new matrix of a numeric re-setup: on the host or on the backend.
pub(crate) enum UpdateInput<'a, T: Scalar, B: MultigridOps<T>> {
    Host(&'a CsrMatrix<T>),
    Backend(&'a B::Matrix),
}

/// What a setup hands to [`Amg`]: the hierarchy for the cycle, and the state that a numeric
/// re-setup and inspection use. Opaque outside the crate.
#[doc(hidden)]
pub struct AmgSetup<T: Scalar, B: MultigridOps<T>> {
    built: Built<T, B>,
    state: Box<dyn HierarchyState<T, B>>,
}

/// The hierarchy on the backend, as the cycle uses it, and what the summary reports.
pub(crate) struct Built<T: Scalar, B: MultigridOps<T>> {
    levels: Vec<DeviceLevel<T, B>>,
    coarse_inv: B::Matrix,
    info: Vec<LevelSummary>,
    coarse_solver: CoarseSolver,
    times: SetupTimes,
}

/// A setup's state: host ([`HostHierarchy`]) or device (`device.rs`).
pub(crate) trait HierarchyState<T: Scalar, B: MultigridOps<T>>: Send {
    /// The numeric re-setup for new values of `a` on the same pattern, into `built` (the
    /// hierarchy in use). On an error before `built` is touched (a pattern or value check) it
    /// stays as it was; after (a backend failure) the state refuses later updates.
    fn update(
        &mut self,
        be: &B,
        a: UpdateInput<'_, T, B>,
        params: &AmgParams,
        built: &mut Built<T, B>,
    ) -> Result<()>;
    /// The number of near-nullspace candidates.
    fn candidates(&self) -> usize;
    /// Host copies of the level operators.
    fn level_matrices(&self, be: &B, levels: &[DeviceLevel<T, B>]) -> Result<Vec<CsrMatrix<T>>>;
    /// Host copies of the prolongators.
    fn prolongators(&self, be: &B, levels: &[DeviceLevel<T, B>]) -> Result<Vec<CsrMatrix<T>>>;
    /// Whether a failed update left the hierarchy part-way rewritten.
    fn poisoned(&self) -> bool {
        false
    }
}

/// The host setup: [`HostHierarchy::build`], then every matrix uploaded.
fn host_setup<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &CsrMatrix<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
) -> Result<AmgSetup<T, B>> {
    let clock = Instant::now();
    let host = HostHierarchy::build(a, candidates, params)?;
    let built = upload_host(be, &host, params, clock)?;
    Ok(AmgSetup {
        built,
        state: Box::new(HostState(host)),
    })
}

/// Uploads a host hierarchy; `clock` started with the setup (for the total).
fn upload_host<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    host: &HostHierarchy<T>,
    params: &AmgParams,
    clock: Instant,
) -> Result<Built<T, B>> {
    let up = Instant::now();
    let mut levels = Vec::with_capacity(host.levels.len());
    for (l, lv) in host.levels.iter().enumerate() {
        let tr = host.transfers.get(l);
        levels.push(DeviceLevel {
            a: be.upload_matrix(&lv.a)?,
            smoother: LevelSmoother::new(be, lv, params)?,
            p: tr.map(|t| be.upload_matrix(&t.p)).transpose()?,
            r: tr.map(|t| be.upload_matrix(&t.r)).transpose()?,
        });
    }
    let coarse_inv = be.upload_matrix(&host.coarse_inv)?;
    let mut times = host.times;
    times.upload = up.elapsed().as_secs_f64();
    times.total = clock.elapsed().as_secs_f64();
    Ok(Built {
        levels,
        coarse_inv,
        info: host
            .levels
            .iter()
            .map(|lv| LevelSummary {
                rows: lv.a.nrows(),
                nnz: lv.a.nnz(),
                block: lv.block,
                rho: lv.rho,
            })
            .collect(),
        coarse_solver: host.coarse_solver,
        times,
    })
}

/// The host setup's state.
struct HostState<T: Scalar>(HostHierarchy<T>);

impl<T: Scalar, B: MultigridOps<T>> HierarchyState<T, B> for HostState<T> {
    fn update(
        &mut self,
        be: &B,
        a: UpdateInput<'_, T, B>,
        params: &AmgParams,
        built: &mut Built<T, B>,
    ) -> Result<()> {
        let clock = Instant::now();
        let down;
        let a = match a {
            UpdateInput::Host(a) => a,
            UpdateInput::Backend(m) => {
                down = be.download_matrix(m)?;
                &down
            }
        };
        self.0.update(a, params)?;
        *built = upload_host(be, &self.0, params, clock)?;
        Ok(())
    }
    fn candidates(&self) -> usize {
        self.0.candidates.as_ref().map_or(1, |c| c.len())
    }
    fn level_matrices(&self, _be: &B, _l: &[DeviceLevel<T, B>]) -> Result<Vec<CsrMatrix<T>>> {
        Ok(self.0.levels.iter().map(|l| l.a.clone()).collect())
    }
    fn prolongators(&self, _be: &B, _l: &[DeviceLevel<T, B>]) -> Result<Vec<CsrMatrix<T>>> {
        Ok(self.0.transfers.iter().map(|t| t.p.clone()).collect())
    }
}

/// The host setup, from the host matrix itself (no copy).
impl<T: Scalar> AmgOps<T> for Cpu {
    fn amg_setup_matrix(
        &self,
        a: &CsrMatrix<T>,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<AmgSetup<T, Self>> {
        host_setup(self, a, candidates, params)
    }
}

#[cfg(feature = "cuda")]
impl<T: crate::backend::GpuScalar> AmgOps<T> for crate::backend::gpu::GpuOps<T> {
    fn amg_setup(
        &self,
        a: &CsrMatrix<T>,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<AmgSetup<T, Self>> {
        if params.host_setup {
            host_setup(self, a, candidates, params)
        } else {
            device::setup_host(self, a, candidates, params)
        }
    }
    fn amg_setup_matrix(
        &self,
        a: &Self::Matrix,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<AmgSetup<T, Self>> {
        if params.host_setup {
            host_setup(self, &self.download_matrix(a)?, candidates, params)
        } else {
            device::setup(self, a.try_clone()?, candidates, params)
        }
    }
}

/// The smoothed-aggregation AMG preconditioner on backend `B`: one cycle per application.
pub struct Amg<T: Scalar, B: MultigridOps<T>> {
    params: AmgParams,
    state: Box<dyn HierarchyState<T, B>>,
    built: Built<T, B>,
    work: RefCell<Vec<Work<B::Vector>>>,
    /// The cycle workspace of a block of columns (`Preconditioner::apply_block`), per column.
    block_work: RefCell<Vec<Vec<Work<B::Vector>>>>,
    summary: AmgSummary,
    /// An update failed after it began to rewrite the hierarchy: `apply` refuses.
    broken: bool,
}

impl<T: Scalar, B: MultigridOps<T>> fmt::Debug for Amg<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Amg({} levels)", self.built.levels.len())
    }
}

impl<T: Scalar, B: AmgOps<T>> Amg<T, B> {
    /// The hierarchy of `a` with the constant as the near-nullspace candidate.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a matrix that is not square, a
    /// diagonal entry that is not positive (the row is named), non-finite entries, bad
    /// parameters, or a coarse matrix that cannot be inverted; backend errors.
    pub fn new(be: &B, a: &CsrMatrix<T>, params: &AmgParams) -> Result<Self> {
        Self::from_setup(be, be.amg_setup(a, None, params)?, params)
    }

    /// The hierarchy of `a` with the given near-nullspace candidates, each of length
    /// `a.nrows()` (e.g. [`rigid_body_modes_2d`] with [`AmgParams::block_size`] = 2).
    ///
    /// # Errors
    /// As [`Amg::new`], and for candidates of the wrong length or with non-finite values.
    pub fn with_candidates(
        be: &B,
        a: &CsrMatrix<T>,
        candidates: &[Vec<T>],
        params: &AmgParams,
    ) -> Result<Self> {
        Self::from_setup(be, be.amg_setup(a, Some(candidates), params)?, params)
    }

    /// The hierarchy of a matrix already on the backend, such as the one the solver
    /// multiplies by ([`GpuCsr`](crate::spmv::gpu::GpuCsr) on the GPU): on the GPU the whole
    /// setup runs on the device from it — the checks (finite values, positive diagonal)
    /// included, and without a host copy. Rows that are unsorted or repeat a column are sorted
    /// and summed on the device (as [`Amg::new`] does on the host).
    ///
    /// # Errors
    /// As [`Amg::new`].
    pub fn from_matrix(be: &B, a: &B::Matrix, params: &AmgParams) -> Result<Self> {
        Self::from_setup(be, be.amg_setup_matrix(a, None, params)?, params)
    }

    /// [`Amg::from_matrix`] with near-nullspace candidates (as [`Amg::with_candidates`]).
    ///
    /// # Errors
    /// As [`Amg::from_matrix`] and [`Amg::with_candidates`].
    pub fn from_matrix_with_candidates(
        be: &B,
        a: &B::Matrix,
        candidates: &[Vec<T>],
        params: &AmgParams,
    ) -> Result<Self> {
        Self::from_setup(
            be,
            be.amg_setup_matrix(a, Some(candidates), params)?,
            params,
        )
    }

    fn from_setup(be: &B, setup: AmgSetup<T, B>, params: &AmgParams) -> Result<Self> {
        let AmgSetup { built, state } = setup;
        let mut amg = Amg {
            params: *params,
            state,
            built,
            work: RefCell::new(Vec::new()),
            block_work: RefCell::new(Vec::new()),
            summary: empty_summary(params),
            broken: false,
        };
        amg.install(be)?;
        Ok(amg)
    }

    /// Numeric re-setup for new values of `A` on the pattern the hierarchy was built for: the
    /// aggregation and the symbolic SpGEMM phases are kept, everything numeric is recomputed
    /// (on the backend that ran the setup; on the GPU into the hierarchy's own arrays, every
    /// SpMV table kept). Equals a fresh setup whenever the aggregation of the new matrix is the
    /// same (always for θ = 0, which looks at the pattern alone).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) when the pattern differs, and as
    /// [`Amg::new`]. After a backend failure part-way the preconditioner refuses to apply.
    pub fn update(&mut self, be: &B, a: &CsrMatrix<T>) -> Result<()> {
        self.update_with(be, UpdateInput::Host(a))
    }

    /// [`Amg::update`] from a matrix on the backend (on the GPU: no upload, the pattern
    /// compared by a fingerprint computed on the device).
    ///
    /// # Errors
    /// As [`Amg::update`].
    pub fn update_matrix(&mut self, be: &B, a: &B::Matrix) -> Result<()> {
        self.update_with(be, UpdateInput::Backend(a))
    }

    fn update_with(&mut self, be: &B, a: UpdateInput<'_, T, B>) -> Result<()> {
        if let Err(e) = self.state.update(be, a, &self.params, &mut self.built) {
            // A failure after the hierarchy began to change leaves it unusable.
            if self.state.poisoned() {
                self.broken = true;
            }
            return Err(e);
        }
        self.broken = false;
        self.install(be)
    }

    /// Takes a new hierarchy: cycle workspace (kept when the level sizes are the same),
    /// summary.
    fn install(&mut self, be: &B) -> Result<()> {
        let info = &self.built.info;
        let same = Work::fits(be, &self.work.borrow(), info);
        if !same {
            self.work = RefCell::new(Work::for_levels(be, info)?);
        }
        self.summary = self.summarise(
            be,
            self.built.info.clone(),
            self.built.coarse_solver,
            self.built.times,
        );
        Ok(())
    }

    fn summarise(
        &self,
        be: &B,
        levels: Vec<LevelSummary>,
        coarse_solver: CoarseSolver,
        setup: SetupTimes,
    ) -> AmgSummary {
        let (r0, z0) = (levels[0].rows.max(1) as f64, levels[0].nnz.max(1) as f64);
        let vb = std::mem::size_of::<T>();
        let mut bytes = be.matrix_bytes(&self.built.coarse_inv);
        for (lv, w) in self.built.levels.iter().zip(self.work.borrow().iter()) {
            bytes += be.matrix_bytes(&lv.a) + lv.smoother.bytes(be);
            bytes += lv.p.as_ref().map_or(0, |m| be.matrix_bytes(m));
            bytes += lv.r.as_ref().map_or(0, |m| be.matrix_bytes(m));
            bytes += (5 * be.len(&w.s.r) + be.len(&w.bc) + be.len(&w.xc)) * vb;
        }
        AmgSummary {
            operator_complexity: levels.iter().map(|l| l.nnz as f64).sum::<f64>() / z0,
            grid_complexity: levels.iter().map(|l| l.rows as f64).sum::<f64>() / r0,
            levels,
            device_bytes: bytes,
            candidates: self.state.candidates(),
            coarse_solver,
            smoother: self.params.smoother,
            degree: self.params.degree,
            sweeps: self.params.sweeps,
            cycle: self.params.cycle,
            setup,
        }
    }

    /// The hierarchy's summary.
    pub fn summary(&self) -> &AmgSummary {
        &self.summary
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &AmgParams {
        &self.params
    }

    /// The number of levels.
    pub fn num_levels(&self) -> usize {
        self.built.levels.len()
    }

    /// Host copies of the level operators (finest first), downloaded from the backend where
    /// the setup ran there — for inspection and tests.
    ///
    /// # Errors
    /// A failed download.
    pub fn level_matrices(&self, be: &B) -> Result<Vec<CsrMatrix<T>>> {
        self.state.level_matrices(be, &self.built.levels)
    }

    /// Host copies of the prolongators `P_l` (level `l + 1` to level `l`).
    ///
    /// # Errors
    /// A failed download.
    pub fn prolongators(&self, be: &B) -> Result<Vec<CsrMatrix<T>>> {
        self.state.prolongators(be, &self.built.levels)
    }
}

fn empty_summary(params: &AmgParams) -> AmgSummary {
    AmgSummary {
        levels: Vec::new(),
        operator_complexity: 0.0,
        grid_complexity: 0.0,
        device_bytes: 0,
        candidates: 0,
        coarse_solver: CoarseSolver::Cholesky,
        smoother: params.smoother,
        degree: params.degree,
        sweeps: params.sweeps,
        cycle: params.cycle,
        setup: SetupTimes::default(),
    }
}

impl<T: Scalar, B: MultigridOps<T>> Preconditioner<T, B> for Amg<T, B> {
    /// One cycle in fine-level products: per level, the smoothing steps before and after (each
    /// `degree` products for Chebyshev, one for Jacobi), the residual and the two transfers,
    /// weighted by the level's share of the entries (the operator complexity); twice that for
    /// a W-cycle's coarse levels, counted here as a factor 2 on the whole.
    fn cost_in_products(&self) -> f64 {
        self.params.cycle_cost(self.summary.operator_complexity)
    }
    /// `z ← M⁻¹r`: one cycle from `z = 0`. Queues work only (no host synchronisation).
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        if self.broken {
            return Err(crate::Error::InvalidInput(
                "AMG: a numeric re-setup failed part-way; build a new hierarchy".into(),
            ));
        }
        let n = self.summary.levels[0].rows;
        assert_eq!(
            be.len(r),
            n,
            "AMG apply: r has {} rows, A has {n}",
            be.len(r)
        );
        assert_eq!(
            be.len(z),
            n,
            "AMG apply: z has {} rows, A has {n}",
            be.len(z)
        );
        let mut work = self.work.borrow_mut();
        cycle::cycle(
            be,
            &self.built.levels,
            &self.built.coarse_inv,
            self.params.cycle,
            r,
            z,
            true,
            &mut work,
        )
    }

    /// One cycle from `zs = 0` for every column, each product of a level's matrix applied to
    /// the whole block ([`MultigridOps::spmv_block`]). Column `j` equals [`Preconditioner::apply`]
    /// of `rs[j]` to rounding.
    fn apply_block(&self, be: &B, rs: &[&B::Vector], zs: &mut [&mut B::Vector]) -> Result<()> {
        assert_eq!(
            rs.len(),
            zs.len(),
            "AMG apply_block: as many outputs as inputs"
        );
        if rs.len() <= 1 {
            for (r, z) in rs.iter().zip(zs.iter_mut()) {
                self.apply(be, r, z)?;
            }
            return Ok(());
        }
        if self.broken {
            return Err(crate::Error::InvalidInput(
                "AMG: a numeric re-setup failed part-way; build a new hierarchy".into(),
            ));
        }
        let n = self.summary.levels[0].rows;
        for (r, z) in rs.iter().zip(zs.iter()) {
            assert!(
                be.len(r) == n && be.len(z) == n,
                "AMG apply_block: columns of {} and {} rows, A has {n}",
                be.len(r),
                be.len(z)
            );
        }
        let mut bw = self.block_work.borrow_mut();
        block_cycle::ensure_work(be, &self.built.info, &mut bw, rs.len())?;
        let mut work: Vec<&mut [Work<B::Vector>]> =
            bw.iter_mut().take(rs.len()).map(|w| &mut w[..]).collect();
        block_cycle::cycle_block(
            be,
            &self.built.levels,
            &self.built.coarse_inv,
            self.params.cycle,
            rs,
            zs,
            true,
            &mut work,
        )
    }
}
