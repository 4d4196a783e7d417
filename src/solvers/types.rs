//! What a solve takes and gives: its options, its outcome, its errors.

use std::fmt;

use crate::scalar::ElemSlice;

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
///
/// The lifetime is that of the [`observer`](SolveParams::observer) it may borrow;
/// `SolveParams<'static>` holds none (or one that lives as long as the program).
#[derive(Clone, Copy, Debug)]
pub struct SolveParams<'a> {
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
    /// own default ([`VectorOps::default_check_every`](crate::backend::VectorOps::default_check_every))
    /// divided by `1 +` the preconditioner's
    /// [`cost_in_products`](crate::backend::Preconditioner::cost_in_products) (at least 1). The
    /// solve never runs past convergence by more than this many iterations (no-ops for the
    /// solver's own kernels; a preconditioner's kernels still run) and reports the exact
    /// iteration either way.
    pub check_every: Option<usize>,
    /// Called from the solve's thread at each status check with the progress so far (for
    /// progress lines); `None` by default.
    pub on_check: Option<fn(&Progress)>,
    /// Called after every iteration, with the iterate on request (see [`Observer`]); `None` by
    /// default. With an observer the solve reads its status after every iteration and records
    /// no blocks (as `check_every: Some(1), graphs: false`), unless it watches only the end
    /// ([`Observer::every_iteration`] false). The one-column solvers call it;
    /// the multi-column solvers ([`multi`](super::multi)) refuse it.
    pub observer: Option<&'a dyn Observer>,
    /// Asked at each status check whether the solve stops there ([`Watch`]); `None` by
    /// default. A stopped solve ends as at its iteration limit: [`SolveError::NotConverged`]
    /// with the true residual. The one-column solvers ask it; the multi-column solvers ignore
    /// it.
    pub watch: Option<&'a dyn Watch>,
    /// Let the backend record a block of iterations (the `check_every` iterations between two
    /// status checks) once and replay it: CUDA graphs on the GPU, which remove the launch cost
    /// of every kernel. Same arithmetic, iterations and residuals as without; ignored by
    /// backends that do not record (the CPU). Default true. See "Recorded blocks" in the
    /// module docs.
    pub graphs: bool,
    /// GMRES: where the Krylov basis is stored. [`Storage::F32`] under `f64` work keeps it in
    /// `f32` (half the bytes of the two Gram–Schmidt passes that dominate an iteration; each
    /// basis vector rounded once, so the stored basis is orthonormal to within `2·2⁻²⁴`, see
    /// [`KrylovOps::krylov_stored`](crate::backend::KrylovOps::krylov_stored)); the default
    /// [`Storage::F64`] keeps the working precision. The other methods ignore it.
    pub basis: crate::scalar::Storage,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for SolveParams<'_> {
    fn default() -> Self {
        SolveParams {
            rel_tol: 1e-8,
            abs_tol: 0.0,
            max_iters: 10_000,
            initial_guess: InitialGuess::Zero,
            record_history: true,
            check_every: None,
            on_check: None,
            observer: None,
            watch: None,
            graphs: true,
            basis: crate::scalar::Storage::F64,
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

/// A per-iteration observer of a solve, set in [`SolveParams::observer`] (front ends turn it
/// into a user's callback). With an observer the solve reads its status after every iteration
/// and records no blocks (as `check_every = 1, graphs = false`): the same arithmetic,
/// iterations and residuals as without, one host read per iteration more. An observer whose
/// [`Observer::every_iteration`] is false is given the history once, at the end
/// ([`Observer::on_end`]), and changes nothing in how the solve runs.
///
/// One observer serves every element type: the iterate comes as an [`ElemSlice`] (take it
/// back as `&[T]` with [`ElemSlice::get`]). It is `Sync` so that the parameters holding it may
/// be shared between threads (a batch of solves on the CPU).
///
/// An error returned by a method stops the solve with [`SolveError::Backend`] carrying it; `x`
/// then holds the last iterate.
///
/// ```
/// use std::sync::Mutex;
/// use segsparse::solvers::{cg, Observer, SolveParams};
/// use segsparse::backend::Cpu;
/// use segsparse::ElemSlice;
/// struct Last(Mutex<Vec<f64>>);
/// impl Observer for Last {
///     fn wants_iterate(&self) -> bool {
///         true
///     }
///     fn on_iterate(&self, _it: usize, x: ElemSlice<'_>) -> segsparse::Result<()> {
///         *self.0.lock().unwrap() = x.get::<f64>().expect("an f64 solve").to_vec();
///         Ok(())
///     }
/// }
/// let a = segsparse::generate::poisson2d::<f64>(8).unwrap();
/// let b = vec![1.0; a.nrows()];
/// let mut x = vec![0.0; a.nrows()];
/// let last = Last(Mutex::new(Vec::new()));
/// let params = SolveParams { observer: Some(&last), ..Default::default() };
/// cg(&Cpu, &a, &b, &mut x, &params).unwrap();
/// assert_eq!(*last.0.lock().unwrap(), x);
/// ```
pub trait Observer: Sync {
    /// After each iteration `iteration` (1-based) with the method's recursive residual estimate
    /// relative to ‖b‖ (GMRES: the rotated least-squares residual `|g_{j+1}| / ‖b‖`, which is the
    /// unpreconditioned one, GMRES being right-preconditioned).
    fn on_iteration(&self, _iteration: usize, _relative_residual: f64) -> crate::Result<()> {
        Ok(())
    }
    /// Whether [`Observer::on_iterate`] is wanted: the iterate is then copied to the host each
    /// time (a download per call on the GPU).
    fn wants_iterate(&self) -> bool {
        false
    }
    /// With the current iterate `x` (a host copy, in the solve's element type): after each
    /// iteration of CG and BiCGSTAB, and after each restart cycle of GMRES (where the cycle's
    /// correction is added to `x`: the inner steps have no iterate), including the last one.
    fn on_iterate(&self, _iteration: usize, _x: ElemSlice<'_>) -> crate::Result<()> {
        Ok(())
    }
    /// Whether the observer needs a call after every iteration (default true). An observer
    /// that answers false is given only [`Observer::on_end`]: the solve then runs as without an
    /// observer (its status read every `check_every` iterations, its blocks recorded), so
    /// watching a solve's history costs nothing per iteration.
    fn every_iteration(&self) -> bool {
        true
    }
    /// Once, when a one-column solve ends (converged or not, unless it failed before its first
    /// iteration), with its recursive residual history relative to ‖b‖ (entry `k` after
    /// iteration `k`, as [`SolveInfo::history`]; empty unless
    /// [`SolveParams::record_history`]).
    fn on_end(&self, _history: &[f64]) -> crate::Result<()> {
        Ok(())
    }
}

/// A watch on a solve at its status checks (every `check_every` iterations: no synchronization
/// beyond the check's own), which may stop it there ([`SolveParams::watch`]).
pub trait Watch: Sync {
    /// After `iteration` iterations, with the method's recursive relative residual estimate and
    /// the seconds since the solver call began: whether to stop here. `history` reads the
    /// residual history so far (as [`SolveInfo::history`]: entry `k` after iteration `k`; empty
    /// unless [`SolveParams::record_history`]), a copy from the device on the GPU.
    ///
    /// # Errors
    /// An error ends the solve with it.
    fn stop(
        &self,
        iteration: usize,
        relative_residual: f64,
        seconds: f64,
        history: &mut dyn FnMut() -> crate::Result<Vec<f64>>,
    ) -> crate::Result<bool>;

    /// The iteration after `iteration` at which the watch wants to be asked: the solve then
    /// ends its block of iterations there, with a status check (a block shorter than
    /// `check_every`). `None` (the default): at the checks the solve makes anyway.
    fn next_check(&self, _iteration: usize) -> Option<usize> {
        None
    }
}

impl fmt::Debug for dyn Watch + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Watch")
    }
}

impl fmt::Debug for dyn Observer + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
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
    /// fills it in (`sparse-solve`, the Python binding, `dist`'s rank solve).
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
