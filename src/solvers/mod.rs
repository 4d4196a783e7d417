//! Iterative solvers: CG, PCG, BiCGSTAB and restarted GMRES, one body for CPU and GPU, with
//! Jacobi and Chebyshev-polynomial preconditioners.
//!
//! # What is here
//!
//! | solver | for | function |
//! |---|---|---|
//! | conjugate gradient (Hestenes and Stiefel 1952) | symmetric positive definite `A` | [`cg`] |
//! | preconditioned CG (any SPD [`Preconditioner`]) | SPD `A` | [`pcg`] |
//! | BiCGSTAB (van der Vorst 1992), optionally right-preconditioned | unsymmetric `A` | [`bicgstab`] |
//! | GMRES(m) (Saad and Schultz 1986), restarted, right-preconditioned | any nonsingular `A` | [`gmres`] |
//!
//! | preconditioner | needs | type |
//! |---|---|---|
//! | none | — | [`Identity`] |
//! | Jacobi, `M = diag(A)` (fused into the vector updates) | a nonzero diagonal | `precond::Jacobi` |
//! | Chebyshev polynomial in `D⁻¹A`, bounds from a few Lanczos/Arnoldi steps | a spectrum in the right half-plane | `precond::Chebyshev` |
//!
//! GMRES with the polynomial preconditioner, on the CPU (the same call runs on the GPU with
//! [`gpu::GpuOps`] and the GPU matrix):
//!
//! ```
//! use segsparse::precond::{Chebyshev, ChebyshevParams};
//! use segsparse::solvers::{gmres, pcg, Cpu, SolveParams};
//! let a = segsparse::generate::poisson2d::<f64>(32).unwrap();
//! let b = vec![1.0; a.nrows()];
//! let poly = Chebyshev::from_matrix(&Cpu, &a, &a, &ChebyshevParams::default()).unwrap();
//! let mut x = vec![0.0; a.nrows()];
//! let info = gmres(&Cpu, &a, &poly, &b, &mut x, 30, &SolveParams::default()).unwrap();
//! assert!(info.relative_residual <= 1e-8);
//! // The polynomial is SPD, so CG may use it too.
//! let info = pcg(&Cpu, &a, &poly, &b, &mut x, &SolveParams::default()).unwrap();
//! assert!(info.relative_residual <= 1e-8);
//! ```
//!
//! Each solver is written **once**, generic over two traits:
//!
//! - [`VectorOps`], the backend: what a vector is (`Vec<T>` on the CPU, a device buffer on the
//!   GPU), a small block of *scalar slots* that holds ρ, α, β, ω, ‖r‖² and a status word
//!   ([`VectorOps::Scalars`]: host values on the CPU, **device memory** on the GPU), and the
//!   handful of fused vector steps the solvers need. Implemented by [`Cpu`] and (feature `cuda`)
//!   [`gpu::GpuOps`].
//! - [`LinearOperator`]: `y ← A·x` with the backend's vectors. It is implemented for
//!   [`CsrMatrix`](crate::CsrMatrix) on the CPU and for the GPU SpMV's matrix on the GPU, and you
//!   can implement it for your own matrix-free operator.
//!
//! Options are a plain [`SolveParams`] struct (fill it with struct-update syntax from
//! `Default`), success is a [`SolveInfo`], failure a [`SolveError`] — the shape of faer's
//! `CgParams`/`CgInfo`/`CgError`.
//!
//! ```
//! use segsparse::solvers::{cg, Cpu, SolveParams};
//! use segsparse::CsrMatrix;
//! // 1-D Laplacian, SPD.
//! let n = 50;
//! let mut t = Vec::new();
//! for i in 0..n {
//!     t.push((i, i, 2.0));
//!     if i > 0 { t.push((i, i - 1, -1.0)); }
//!     if i + 1 < n { t.push((i, i + 1, -1.0)); }
//! }
//! let a = CsrMatrix::<f64>::from_triplets(n, n, &t).unwrap();
//! let b = vec![1.0; n];
//! let mut x = vec![0.0; n];
//! let info = cg(&Cpu, &a, &b, &mut x, &SolveParams { rel_tol: 1e-10, ..Default::default() }).unwrap();
//! assert!(info.relative_residual <= 1e-10);
//! ```
//!
//! # Why the backend trait has fused steps instead of `axpy` and `dot`
//!
//! A textbook GPU CG calls `dot`, copies the result to the host, divides, and calls `axpy` with
//! the quotient: one host round-trip per dot product, which on a 1M-row problem costs as much as
//! the arithmetic (CuPy's `cg` runs at 330–350 µs per iteration on Poisson 2D 1000² for that
//! reason). Here every scalar stays where the vectors are. A reduction kernel writes its
//! per-block partial sums, and the last block to finish (a "last block done" counter, summing the
//! partials in a fixed order so the result is deterministic) computes the derived scalars —
//! α = ρ/pᵀAp, β = ρ'/ρ, ω = tᵀs/tᵀt — in place, checks for breakdown, convergence and NaN, and
//! writes a status word. The next kernel reads α or β from that slot. Each kernel returns at once
//! when the status word is set, so the host need not watch every iteration: it reads the slots
//! only every [`SolveParams::check_every`] iterations (default 16 on the GPU, 1 on the CPU) and
//! the iteration at which the status was set is recorded exactly. A solve allocates its whole
//! workspace before the first iteration and nothing inside the loop.
//!
//! # Recorded blocks (CUDA graphs)
//!
//! Since no step waits for the host, the iterations between two status checks (a *block*:
//! [`SolveParams::check_every`] iterations, fewer where the iteration limit or a GMRES cycle end
//! comes first) are a fixed sequence of kernel launches. With [`SolveParams::graphs`] (the
//! default) the GPU backend records a block with CUDA stream capture and replays it as one graph
//! launch, removing the launch cost of each kernel (about 2–3 µs of host time apiece, which on
//! systems of a few thousand rows is most of an iteration). The hooks are
//! [`VectorOps::begin_block`] and [`VectorOps::end_block`], no-ops for the CPU and the
//! distributed backends, so every method keeps one body:
//!
//! - **Iteration numbers.** A recorded kernel keeps the arguments it was captured with, so the
//!   kernels number their iterations relative to a device slot ([`Slot::IterBase`]) that the
//!   host sets before a block and the graph's last node advances by the block length. Without
//!   graphs the slot stays 0 and the kernels get absolute iterations, as before.
//! - **When.** Each solve records its own graphs (they hold the solve's buffers), keyed by the
//!   method's block key (0 for CG and BiCGSTAB) and the block length. GMRES's blocks end at
//!   cycle ends (where the host decides between restart and stop); their key is the starting
//!   column, and a replay advances the column counter (the method's `replayed` hook). A block
//!   seen once runs
//!   directly, the second occurrence is recorded and run, later ones are replayed: a one-off
//!   block (the tail before the iteration limit) is never instantiated. A new problem is a new
//!   solve and records anew.
//! - **What is recorded.** Everything a step issues: the operator, a preconditioner's
//!   [`Preconditioner::apply`] (which must only queue device work: Jacobi, Chebyshev and any
//!   preconditioner that follows that rule are captured with the iteration), the fused steps.
//!   A step that synchronises cannot be recorded: the solve then fails with a CUDA error that
//!   says so, and `graphs: false` runs it uncaptured.
//! - **Host state.** A replayed block does not call the steps: a method's host-side state must
//!   not change per step (CG, BiCGSTAB) or be advanced by `replayed` (GMRES's column), and an
//!   operator or preconditioner is applied by the graph without its `apply` being called.
//! - **Early exit.** As without graphs: the kernel that sets the status records the iteration,
//!   every later kernel of the block returns at once (except `x`'s update in the iteration that
//!   converged), and the host sees the status at the block's end. A replayed block therefore
//!   runs to its end as no-ops; the iteration count, residual history, `x` and the reported
//!   error (breakdown, NaN) are those of the uncaptured path, bit for bit (the same kernels,
//!   grids and reduction orders run in both).
//!
//! # Fused steps
//!
//! Some steps of [`VectorOps`] stand for a fixed sequence of the others:
//! [`VectorOps::cg_tail`] (CG's `cg_alpha`, `cg_update_r`, `cg_update_xp`),
//! [`VectorOps::bicg_alpha_s`] and [`VectorOps::bicg_update_p`] (BiCGSTAB's `bicg_alpha` +
//! `bicg_s` and `bicg_omega` + `bicg_update` + the next iteration's `bicg_p`). Their default
//! implementations issue that sequence, so the CPU and the distributed backends are unchanged;
//! the GPU backend runs each as one kernel on small systems (see "Small systems" in
//! [`gpu`]), where an iteration's cost is its number of kernel launches. BiCGSTAB uses the
//! fused order (its `p` update moved to the end of the previous iteration) only where the
//! backend asks for it ([`VectorOps::bicg_fused`]). Either way the arithmetic is the same:
//! iterations, residuals and errors do not depend on the fusion.
//!
//! The CPU backend runs the same steps with host scalars (the same recurrences, written once in
//! Rust in [`recur`] and mirrored in `kernels/solvers/blas1.cu`), and its reductions also
//! sum fixed-size chunks in a fixed order, so CPU results are reproducible run to run.
//!
//! # Timing
//!
//! Every solve path of the crate (CPU, one GPU, several GPUs, `sparse-solve`'s report, the
//! Python `info`) splits its time the same way:
//!
//! - **solve** ([`SolveInfo::solve_seconds`]): the solver call, entry to return — the
//!   workspace it allocates, the iterations and status checks, the true-residual confirmation,
//!   the history read; the device is synchronised when the clock stops. On several ranks, the
//!   longest rank.
//! - **setup** ([`SolveInfo::setup_seconds`]): what the solve needed before that call and a
//!   further right-hand side would reuse — partitioning, communicators, uploading the matrix and
//!   the vectors, the preconditioner's setup. The solver functions return 0 here; whoever did the
//!   setup fills it in.
//! - **per iteration** ([`SolveInfo::seconds_per_iteration`], [`per_iteration`]): solve /
//!   iterations.
//!
//! Neither includes reading or generating the matrix, downloading the solution, or measurements
//! that are not part of solving (cost probes, product timings). A failed solve's
//! [`SolveError`] carries no timing: time the solver call from outside, which is the same
//! interval.
//!
//! # Departures from the textbook
//!
//! - **Deferred `x` update in CG.** Hestenes–Stiefel update `x ← x + αp` and `r ← r − αAp` in the
//!   same step. We update `r` first (fused with ‖r‖² and, for Jacobi, with `z = D⁻¹r` and `rᵀz`)
//!   and `x` together with the new search direction (`x ← x + αp; p ← z + βp`, one pass that
//!   reads `p` once). Same arithmetic, one vector read less per iteration.
//! - **Convergence is tested on the recursive residual, then confirmed on the true one.** When
//!   the recursively updated ‖r‖ falls below the threshold, the solver computes `b − A·x`
//!   explicitly. If that true residual is not below the threshold too (rounding drift, typical
//!   of f32 or ill-conditioned matrices), the iteration is *restarted* from the true residual
//!   (at most [`MAX_RESTARTS`] times), like sprs' "hard restart"; the reported
//!   [`SolveInfo::relative_residual`] is always the true one.
//! - **Breakdown.** CG stops with [`SolveError::Breakdown`] when pᵀAp ≤ 0 (the matrix is not
//!   positive definite along `p`); BiCGSTAB when r̂ᵀv = 0 or when ω = 0 without convergence.
//!   When BiCGSTAB's ρ = r̂ᵀr vanishes relative to ‖r̂‖‖r‖ (|ρ| ≤ ε‖r̂‖‖r‖; it happens on
//!   cage8 with b = 1 at iteration 3, where 1ᵀr reaches 0 while r does not) the solve restarts
//!   from the true residual with a new shadow residual r̂ = r (at most [`MAX_RESTARTS`] restarts
//!   in all, like sprs' soft restart) before reporting the breakdown. The iterate `x` is left at
//!   the last good iterate for the caller to inspect.
//! - **BiCGSTAB's early exit on ‖s‖** (van der Vorst's line "if s is small enough, x = x + αp̂,
//!   stop") is handled without a host check: when tᵀt = 0 we set ω = 0, so the update reduces to
//!   `x ← x + αp̂`, `r ← s`, and the convergence test of the same kernel accepts it.
//!
//! # References
//!
//! - M. R. Hestenes and E. Stiefel, *Methods of conjugate gradients for solving linear systems*,
//!   J. Res. Nat. Bur. Standards 49(6), 1952.
//! - H. A. van der Vorst, *Bi-CGSTAB: a fast and smoothly converging variant of Bi-CG for the
//!   solution of nonsymmetric linear systems*, SIAM J. Sci. Stat. Comput. 13(2), 1992.
//! - R. Barrett et al., *Templates for the Solution of Linear Systems*, SIAM 1994 (the
//!   preconditioned forms used here).

mod bicgstab;
mod cg;
mod gmres;

use std::fmt;
use std::time::Instant;

pub use bicgstab::bicgstab;
pub use cg::{cg, pcg};
pub use gmres::{gmres, DEFAULT_RESTART};

// The backend layer below the solvers, re-exported so that `solvers::Cpu`, `solvers::VectorOps`,
// `solvers::gpu::GpuOps` and `solvers::recur` keep working.
#[cfg(feature = "cuda")]
pub use crate::backend::gpu;
pub use crate::backend::recur;
pub use crate::backend::recur::{GmresLayout, Slot, Status, NSLOTS};
pub use crate::backend::{
    Block, Cpu, CpuKrylov, CpuScalars, Fuse, Identity, KrylovOps, LinearOperator, Preconditioner,
    VectorOps,
};

use crate::scalar::Scalar;

/// How often the true residual may force a restart before the solve gives up (see the module
/// docs, "Departures from the textbook").
pub const MAX_RESTARTS: usize = 3;

/// Whether the solver may read `x` as an initial guess.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialGuess {
    /// Start from `x = 0` (the contents of `x` are ignored and overwritten).
    #[default]
    Zero,
    /// Start from the contents of `x`.
    Given,
}

/// Options of an iterative solve. Fill with struct-update syntax:
/// `SolveParams { rel_tol: 1e-10, ..Default::default() }`.
#[derive(Clone, Copy, Debug)]
pub struct SolveParams {
    /// Stop when ‖b − A·x‖ ≤ max(rel_tol·‖b‖, abs_tol). Default 1e-8.
    pub rel_tol: f64,
    /// Absolute tolerance on ‖b − A·x‖. Default 0.
    pub abs_tol: f64,
    /// Iteration limit; [`SolveError::NotConverged`] beyond it. Default 10 000.
    pub max_iters: usize,
    /// Start from zero (default) or from the contents of `x`.
    pub initial_guess: InitialGuess,
    /// Keep the relative residual of every iteration in [`SolveInfo::history`]. Default true.
    pub record_history: bool,
    /// Read the device's status every this many iterations; `None` (default) takes the backend's
    /// own default ([`VectorOps::default_check_every`]). The solve never runs past convergence
    /// by more than this many (no-op) iterations and reports the exact iteration either way.
    pub check_every: Option<usize>,
    /// Called from the solve's thread at each status check with the progress so far (for
    /// progress lines); `None` by default.
    pub on_check: Option<fn(&Progress)>,
    /// Let the backend record a block of iterations (the `check_every` iterations between two
    /// status checks) once and replay it: CUDA graphs on the GPU, which remove the launch cost
    /// of every kernel. Same arithmetic, iterations and residuals as without; ignored by
    /// backends that do not record (the CPU). Default true. See "Recorded blocks" in the
    /// module docs.
    pub graphs: bool,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for SolveParams {
    fn default() -> Self {
        SolveParams {
            rel_tol: 1e-8,
            abs_tol: 0.0,
            max_iters: 10_000,
            initial_guess: InitialGuess::Zero,
            record_history: true,
            check_every: None,
            on_check: None,
            graphs: true,
            non_exhaustive: (),
        }
    }
}

/// What a progress callback ([`SolveParams::on_check`]) sees.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Iterations done.
    pub iteration: usize,
    /// The recursive residual relative to ‖b‖ after that iteration.
    pub relative_residual: f64,
    /// Seconds since the solve started.
    pub seconds: f64,
}

/// The outcome of a converged solve.
#[derive(Clone, Debug, Default)]
pub struct SolveInfo {
    /// Iterations performed (each is one operator application for CG, two for BiCGSTAB).
    pub iterations: usize,
    /// ‖b − A·x‖ / ‖b‖ computed from the returned `x` (‖b − A·x‖ when b = 0).
    pub relative_residual: f64,
    /// Recursive residual norms relative to ‖b‖: entry `k` after iteration `k` (entry 0 is the
    /// initial residual), empty unless [`SolveParams::record_history`]. Restarts continue the
    /// count.
    pub history: Vec<f64>,
    /// Wall-clock seconds of the solver call, from its entry to its return: the workspace it
    /// allocates, every iteration with its status checks, the true-residual confirmation and the
    /// history read (the device is synchronised before the clock stops). What a further
    /// right-hand side with the same matrix and preconditioner costs again. See "Timing" in the
    /// module docs.
    pub solve_seconds: f64,
    /// Seconds of the setup this solve needed and a further right-hand side would reuse
    /// (partitioning, communicators, uploading the matrix, `b` and `x`, the preconditioner's
    /// setup). **0 as returned by the solver functions**, which set up nothing beyond their
    /// per-call workspace (counted in [`SolveInfo::solve_seconds`]); the code that did the setup
    /// fills it in (`sparse-solve`, the Python binding, [`crate::dist`]'s rank solve).
    pub setup_seconds: f64,
    /// Restarts from the true residual (see the module docs).
    pub restarts: usize,
    /// Always true for an `Ok` result (non-convergence is a [`SolveError`]); kept so an info can
    /// be reported as is.
    pub converged: bool,
}

impl SolveInfo {
    /// [`SolveInfo::solve_seconds`] per iteration (0 when no iteration ran): the figure every
    /// front end reports as seconds per iteration.
    pub fn seconds_per_iteration(&self) -> f64 {
        per_iteration(self.solve_seconds, self.iterations)
    }
}

/// `solve_seconds / iterations`, 0 for no iteration: the one definition of the time per
/// iteration (also for failed solves, whose [`SolveError`] carries no timing: time the solver
/// call from outside, which is the same interval).
pub fn per_iteration(solve_seconds: f64, iterations: usize) -> f64 {
    if iterations == 0 {
        0.0
    } else {
        solve_seconds / iterations as f64
    }
}

/// Why a solve failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SolveError {
    /// A quantity the method divides by vanished or had the wrong sign: `pᵀAp ≤ 0` in CG (the
    /// matrix is not SPD), `ρ`, `r̂ᵀv` or `ω` in BiCGSTAB.
    Breakdown {
        /// Which quantity, in words.
        what: &'static str,
        /// The iteration in which it happened (1-based).
        iteration: usize,
    },
    /// The iteration limit was reached (or restarts stagnated) above the tolerance.
    NotConverged {
        /// Iterations performed.
        iterations: usize,
        /// The true relative residual ‖b − A·x‖/‖b‖ of the final iterate.
        residual: f64,
    },
    /// GMRES made no progress over a whole restart cycle (the restart length is too short for
    /// this matrix, or the matrix is singular): iterating further would not help.
    Stagnation {
        /// Iterations performed.
        iterations: usize,
        /// The true relative residual of the final iterate.
        residual: f64,
    },
    /// A residual became NaN or infinite. A NaN or infinity in `A`, `b` or the initial guess is
    /// reported at iteration 0, before any iteration (every method, every backend: the initial
    /// residual `b − A·x` is non-finite, since NaN·0 and ∞·0 are NaN); an overflow later on at
    /// the iteration where it happened. Never a converged result.
    NonFinite {
        /// The iteration at which it was detected (0: the initial residual).
        iteration: usize,
    },
    /// The operator, right-hand side and solution vector do not fit together.
    DimensionMismatch {
        /// What does not fit.
        what: &'static str,
        /// The size required.
        expected: usize,
        /// The size found.
        found: usize,
    },
    /// The backend failed (a CUDA error, a kernel that did not compile, ...).
    Backend(crate::Error),
}

impl fmt::Display for SolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SolveError::Breakdown { what, iteration } => {
                write!(f, "breakdown at iteration {iteration}: {what}")
            }
            SolveError::NotConverged {
                iterations,
                residual,
            } => write!(
                f,
                "not converged after {iterations} iterations (relative residual {residual:.3e})"
            ),
            SolveError::Stagnation {
                iterations,
                residual,
            } => write!(
                f,
                "GMRES stagnated: no progress over a whole restart cycle after {iterations} \
                 iterations (relative residual {residual:.3e}); try a longer --restart or a \
                 preconditioner"
            ),
            SolveError::NonFinite { iteration } => {
                write!(
                    f,
                    "residual became NaN or infinite at iteration {iteration}"
                )
            }
            SolveError::DimensionMismatch {
                what,
                expected,
                found,
            } => write!(
                f,
                "dimension mismatch: {what} has length {found}, expected {expected}"
            ),
            SolveError::Backend(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SolveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SolveError::Backend(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::Error> for SolveError {
    fn from(e: crate::Error) -> Self {
        SolveError::Backend(e)
    }
}

impl From<SolveError> for crate::Error {
    fn from(e: SolveError) -> Self {
        match e {
            SolveError::Backend(e) => e,
            other => crate::Error::Solver(other.to_string()),
        }
    }
}

/// One method's per-solve state and iteration, driven by [`drive`].
pub(crate) trait Method<T: Scalar, B: VectorOps<T>> {
    /// The residual workspace (where [`drive`] writes `b − A·x` before [`Method::start`]) and a
    /// scratch vector for `A·x`.
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector);
    /// (Re)starts from the residual in the workspace of [`Method::r_and_scratch`].
    fn start(&mut self, be: &B, sc: &mut B::Scalars, iteration: usize) -> crate::Result<()>;
    /// Called once the iterations of a (re)start end, with the status and the iteration it
    /// was set at: GMRES adds the correction of its current cycle to `x` here.
    fn finish(
        &mut self,
        _be: &B,
        _sc: &mut B::Scalars,
        _x: &mut B::Vector,
        _status: Status,
        _it: usize,
    ) -> crate::Result<()> {
        Ok(())
    }
    /// What names the sequence of steps of the next block (see [`VectorOps::begin_block`]):
    /// `Some(0)` for methods whose every iteration issues the same steps.
    fn block_key(&self) -> Option<u64> {
        Some(0)
    }
    /// The most iterations the next block may hold (a method that needs the host at some
    /// iteration ends the block there).
    fn block_limit(&self) -> usize {
        usize::MAX
    }
    /// Called instead of `len` calls of [`Method::step`] when the backend replayed a recorded
    /// block: a method that keeps host state per step (GMRES's column) advances it here.
    fn replayed(&mut self, _len: usize) {}
    /// Called after each block of steps, outside any recording, at iteration `it`: where a
    /// method does its host work (GMRES's end of cycle).
    fn after_block(
        &mut self,
        _be: &B,
        _sc: &mut B::Scalars,
        _x: &mut B::Vector,
        _it: usize,
    ) -> crate::Result<()> {
        Ok(())
    }
    /// Iteration `it` (1-based). Must only queue backend work (no host synchronisation), so
    /// that a block of steps can be recorded.
    fn step(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        x: &mut B::Vector,
        it: usize,
    ) -> crate::Result<()>;
}

/// Checks the dimensions of `A`, `b` and `x`.
pub(crate) fn check_dims<T: Scalar, B: VectorOps<T>, A: LinearOperator<T, B> + ?Sized>(
    be: &B,
    a: &A,
    b: &B::Vector,
    x: &B::Vector,
) -> Result<usize, SolveError> {
    let n = a.nrows();
    if a.ncols() != n {
        return Err(SolveError::DimensionMismatch {
            what: "operator columns (the operator must be square)",
            expected: n,
            found: a.ncols(),
        });
    }
    if be.len(b) != n {
        return Err(SolveError::DimensionMismatch {
            what: "right-hand side b",
            expected: n,
            found: be.len(b),
        });
    }
    if be.len(x) != n {
        return Err(SolveError::DimensionMismatch {
            what: "solution vector x",
            expected: n,
            found: be.len(x),
        });
    }
    Ok(n)
}

/// The memory preflight of a solve ([`crate::memory`]): `vectors` workspace vectors of length
/// `n`, `extra` further bytes (GMRES's small arrays), the residual history of
/// `max_iters + 1` entries and the reduction partials, checked by
/// [`VectorOps::check_memory`] before anything is allocated.
pub(crate) fn preflight<T: Scalar, B: VectorOps<T>>(
    be: &B,
    what: &str,
    n: usize,
    vectors: usize,
    extra: u64,
    params: &SolveParams,
) -> Result<(), SolveError> {
    use crate::memory::bytes_of;
    let bytes = bytes_of::<T>(n)
        .saturating_mul(vectors as u64)
        .saturating_add(bytes_of::<T>(params.max_iters.saturating_add(1)))
        .saturating_add(bytes_of::<[T; 2]>(n / 1024 + 1))
        .saturating_add(extra);
    be.check_memory(what, bytes).map_err(SolveError::Backend)
}

/// Checks `A`, `b`, `x` ([`check_dims`]) and the length of a diagonal preconditioner: the
/// preamble every method shares.
pub(crate) fn check_problem<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &B::Vector,
) -> Result<usize, SolveError>
where
    T: Scalar,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    let n = check_dims(be, a, b, x)?;
    if let Some(d) = m.inverse_diagonal() {
        if be.len(d) != n {
            return Err(SolveError::DimensionMismatch {
                what: "preconditioner diagonal",
                expected: n,
                found: be.len(d),
            });
        }
    }
    Ok(n)
}

/// How a method applies its preconditioner.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrecondKind {
    /// None: `z` is `r`.
    Identity,
    /// Diagonal: fused into the vector steps.
    Jacobi,
    /// Any other: [`Preconditioner::apply`].
    General,
}

impl PrecondKind {
    pub(crate) fn of<T: Scalar, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized>(m: &P) -> Self {
        if m.is_identity() {
            PrecondKind::Identity
        } else if m.inverse_diagonal().is_some() {
            PrecondKind::Jacobi
        } else {
            PrecondKind::General
        }
    }
}

/// The loop shared by every method and backend: setup, iterations with a status check every
/// `check_every`, the true-residual confirmation with restarts, and the report. `clock` was
/// started at the entry of the solver function (its workspace allocation is part of the solve).
#[allow(clippy::too_many_arguments)]
pub(crate) fn drive<T, B, A, M>(
    be: &B,
    a: &A,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    method: &mut M,
    mut sc: B::Scalars,
    clock: Instant,
) -> Result<SolveInfo, SolveError>
where
    T: Scalar,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    M: Method<T, B>,
{
    let bb = be.dot(b, b, &mut sc)?;
    if !bb.is_finite() {
        return Err(SolveError::NonFinite { iteration: 0 });
    }
    let bnorm = bb.sqrt();
    let thresh = (params.rel_tol * bnorm).max(params.abs_tol);
    let scale = if bnorm > 0.0 { bnorm } else { 1.0 };
    let check_every = params
        .check_every
        .unwrap_or_else(|| be.default_check_every())
        .max(1);
    if params.initial_guess == InitialGuess::Zero {
        be.set_zero(x)?;
    }
    be.write_slots(&mut sc, &[(Slot::Thresh, T::of_f64(thresh * thresh))])?;

    let true_residual = |method: &mut M, x: &B::Vector, sc: &mut B::Scalars| {
        let (r, q) = method.r_and_scratch();
        a.apply(be, x, q)?;
        be.residual(b, q, r)?;
        let rr = be.dot(r, r, sc)?;
        // NaN stays NaN (f64::max would turn it into 0, a "converged" residual).
        Ok::<f64, SolveError>(if rr.is_nan() { rr } else { rr.max(0.0).sqrt() })
    };

    let mut it = 0usize;
    let mut restarts = 0usize;
    let mut last_true = true_residual(method, x, &mut sc)?;
    // A NaN or infinity anywhere in A, b or the initial guess makes b − A·x non-finite (NaN·0
    // and ∞·0 are NaN): reported here, at iteration 0, the same way on every backend and method.
    if !last_true.is_finite() {
        return Err(SolveError::NonFinite { iteration: 0 });
    }
    let status = loop {
        // (Re)start from the residual b − A·x that sits in method.r.
        be.write_slots(&mut sc, &[(Slot::Status, T::zero())])?;
        method.start(be, &mut sc, it)?;
        let mut slots = be.read_slots(&sc)?;
        let mut status = Status::of(slots[Slot::Status as usize]);
        while status == Status::Running && it < params.max_iters {
            // One block: up to the next multiple of check_every, the iteration limit, or the
            // method's own limit; then one status read.
            let len = (check_every - it % check_every)
                .min(params.max_iters - it)
                .min(method.block_limit().max(1));
            let key = if params.graphs {
                method.block_key()
            } else {
                None
            };
            let it0 = it;
            match be.begin_block(&mut sc, it0, len, key)? {
                Block::Replayed => {
                    it += len;
                    method.replayed(len);
                }
                mode => {
                    let mut run = || {
                        for _ in 0..len {
                            it += 1;
                            method.step(be, &mut sc, x, it)?;
                        }
                        Ok::<(), crate::Error>(())
                    };
                    let done = run();
                    if mode == Block::Recording {
                        be.end_block(&mut sc, done.is_ok())?;
                    }
                    done?;
                }
            }
            method.after_block(be, &mut sc, x, it)?;
            slots = be.read_slots(&sc)?;
            status = Status::of(slots[Slot::Status as usize]);
            if let Some(f) = params.on_check {
                f(&Progress {
                    iteration: it,
                    relative_residual: slots[Slot::Rr as usize].as_f64().max(0.0).sqrt() / scale,
                    seconds: clock.elapsed().as_secs_f64(),
                });
            }
        }
        if status != Status::Running {
            // The kernels stopped at the recorded iteration; later ones were no-ops.
            it = slots[Slot::StatusIter as usize].as_f64() as usize;
        }
        method.finish(be, &mut sc, x, status, it)?;
        if status == Status::BreakdownRho && restarts < MAX_RESTARTS && it < params.max_iters {
            // BiCGSTAB's shadow residual became orthogonal to r: restart with r̂ = b − A·x.
            last_true = true_residual(method, x, &mut sc)?;
            restarts += 1;
            continue;
        }
        if status != Status::Converged {
            break status;
        }
        let now = true_residual(method, x, &mut sc)?;
        if !now.is_finite() {
            break Status::NonFinite;
        }
        if now <= thresh {
            last_true = now;
            break status;
        }
        // Recursive residual converged but the true one did not: restart from the true residual
        // unless restarts stagnate or run out.
        if restarts >= MAX_RESTARTS || it >= params.max_iters || now >= last_true {
            last_true = now;
            break Status::Running;
        }
        last_true = now;
        restarts += 1;
    };

    let history = if params.record_history {
        be.read_history(&sc, it + 1)?
            .into_iter()
            .map(|v| v.as_f64().max(0.0).sqrt() / scale)
            .collect()
    } else {
        Vec::new()
    };
    match status {
        Status::Converged => Ok(SolveInfo {
            iterations: it,
            relative_residual: last_true / scale,
            history,
            solve_seconds: clock.elapsed().as_secs_f64(),
            setup_seconds: 0.0,
            restarts,
            converged: true,
        }),
        Status::NonFinite => Err(SolveError::NonFinite { iteration: it }),
        Status::Stagnated => {
            let residual = true_residual(method, x, &mut sc)? / scale;
            Err(SolveError::Stagnation {
                iterations: it,
                residual,
            })
        }
        Status::Running => {
            let residual = true_residual(method, x, &mut sc)? / scale;
            Err(SolveError::NotConverged {
                iterations: it,
                residual,
            })
        }
        other => Err(SolveError::Breakdown {
            what: other.describe(),
            iteration: it,
        }),
    }
}
