//! The loop every method and backend shares: the checks before a solve, the iterations in blocks
//! with a status read between them, the true-residual confirmation with restarts, and the
//! report.

use std::time::Instant;

use super::types::{InitialGuess, Progress, SolveError, SolveInfo, SolveParams, MAX_RESTARTS};
use crate::backend::{Block, LinearOperator, Pre, Preconditioner, Slot, Status, VectorOps};
use crate::scalar::{Elem, Scalar};

/// What a method's step works on: the backend, the solve's scalars, the iterate `x` and the
/// iteration `it` (1-based).
pub(crate) struct Step<'s, T: Elem, B: VectorOps<T>> {
    pub(crate) be: &'s B,
    pub(crate) sc: &'s mut B::Scalars,
    pub(crate) x: &'s mut B::Vector,
    pub(crate) it: usize,
}

impl<'s, T: Elem, B: VectorOps<T>> Step<'s, T, B> {
    pub(crate) fn new(be: &'s B, sc: &'s mut B::Scalars, x: &'s mut B::Vector, it: usize) -> Self {
        Step { be, sc, x, it }
    }
}

/// One method's per-solve state and iteration, driven by [`drive`].
pub(crate) trait Method<T: Elem, B: VectorOps<T>> {
    /// The residual workspace (where [`drive`] writes `b − A·x` before [`Method::start`]) and a
    /// scratch vector for `A·x`.
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector);
    /// (Re)starts from the residual in the workspace of [`Method::r_and_scratch`].
    fn start(&mut self, be: &B, sc: &mut B::Scalars, iteration: usize) -> crate::Result<()>;
    /// Called once the iterations of a (re)start end, with the status and the iteration it
    /// was set at: GMRES adds the correction of its current cycle to `x` here.
    fn finish(&mut self, _at: Step<'_, T, B>, _status: Status) -> crate::Result<()> {
        Ok(())
    }
    /// What names the sequence of steps of the next block (see [`VectorOps::begin_block`](crate::backend::VectorOps::begin_block)):
    /// `Some(0)` for methods whose every iteration issues the same steps.
    fn block_key(&self) -> Option<u64> {
        Some(0)
    }
    /// The most iterations the next block may hold (a method that needs the host at some
    /// iteration ends the block there).
    fn block_limit(&self) -> usize {
        usize::MAX
    }
    /// What one application of the method's preconditioner costs in products with the
    /// operator ([`Preconditioner::cost_in_products`]; 0 without one).
    fn precond_cost(&self) -> f64 {
        0.0
    }
    /// Whether every step leaves a new iterate in `x` (GMRES's steps do not: its `x` changes at
    /// the end of a cycle, reported by [`Method::take_new_iterate`]).
    fn steps_update_x(&self) -> bool {
        true
    }
    /// Whether `x` received a correction since the last call (GMRES's end of a cycle); clears
    /// the mark.
    fn take_new_iterate(&mut self) -> bool {
        false
    }
    /// Called instead of `len` calls of [`Method::step`] when the backend replayed a recorded
    /// block: a method that keeps host state per step (GMRES's column) advances it here.
    fn replayed(&mut self, _len: usize) {}
    /// Whether the method can continue from a replaced residual ([`Method::replace_residual`]).
    fn can_replace(&self) -> bool {
        false
    }
    /// A reliable update at `iteration`: the driver has written the true residual into the
    /// scratch vector of [`Method::r_and_scratch`], the recursive one is still in the residual
    /// workspace. The method takes up the true residual keeping its search direction, corrected
    /// by what the new residual changes in it, and recomputes the scalars that depend on `r`.
    /// Only called when [`Method::can_replace`]; the default copies the true residual and
    /// restarts ([`Method::start`]).
    fn replace_residual(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (r, q) = self.r_and_scratch();
        be.copy(q, r)?;
        self.start(be, sc, iteration)
    }
    /// Called after each block of steps, outside any recording, at iteration `at.it`: where a
    /// method does its host work (GMRES's end of cycle).
    fn after_block(&mut self, _at: Step<'_, T, B>) -> crate::Result<()> {
        Ok(())
    }
    /// Iteration `at.it`. Must only queue backend work (no host synchronisation), so that a
    /// block of steps can be recorded.
    fn step(&mut self, at: Step<'_, T, B>) -> crate::Result<()>;
}

/// A reference to an operator or a preconditioner of any type (a trait object too) as a sized
/// type, so that it becomes a `&dyn LinearOperator` or `&dyn Preconditioner`: the solvers' public
/// functions are generic over both, their bodies take trait objects and are compiled once per
/// element type, backend and method (one virtual call per application costs nothing beside it).
pub(crate) struct Dyn<'a, X: ?Sized>(pub(crate) &'a X);

impl<T: Elem, B: VectorOps<T>, X: LinearOperator<T, B> + ?Sized> LinearOperator<T, B>
    for Dyn<'_, X>
{
    fn nrows(&self) -> usize {
        self.0.nrows()
    }
    fn ncols(&self) -> usize {
        self.0.ncols()
    }
    fn apply(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> crate::Result<()> {
        self.0.apply(be, x, y)
    }
    fn apply_exact(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> crate::Result<()> {
        self.0.apply_exact(be, x, y)
    }
    fn is_narrowed(&self) -> bool {
        self.0.is_narrowed()
    }
    fn prepare(&self, be: &B, expected_applies: usize) -> crate::Result<()> {
        self.0.prepare(be, expected_applies)
    }
    fn apply_block(
        &self,
        be: &B,
        xs: &[&B::Vector],
        ys: &mut [&mut B::Vector],
    ) -> crate::Result<()> {
        self.0.apply_block(be, xs, ys)
    }
}

impl<T: Elem, B: VectorOps<T>, X: Preconditioner<T, B> + ?Sized> Preconditioner<T, B>
    for Dyn<'_, X>
{
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> crate::Result<()> {
        self.0.apply(be, r, z)
    }
    fn apply_block(
        &self,
        be: &B,
        rs: &[&B::Vector],
        zs: &mut [&mut B::Vector],
    ) -> crate::Result<()> {
        self.0.apply_block(be, rs, zs)
    }
    fn inverse_diagonal(&self) -> Option<&B::Vector> {
        self.0.inverse_diagonal()
    }
    fn cost_in_products(&self) -> f64 {
        self.0.cost_in_products()
    }
    fn is_identity(&self) -> bool {
        self.0.is_identity()
    }
}

/// Checks the dimensions of `A`, `b` and `x`.
pub(crate) fn check_dims<T: Elem, B: VectorOps<T>, A: LinearOperator<T, B> + ?Sized>(
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
/// [`VectorOps::check_memory`](crate::backend::VectorOps::check_memory) before anything is allocated.
pub(crate) fn preflight<T: Elem, B: VectorOps<T>>(
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
    T: Elem,
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
    /// Any other: [`Preconditioner::apply`](crate::backend::Preconditioner::apply).
    General,
}

impl PrecondKind {
    pub(crate) fn of<T: Elem, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized>(m: &P) -> Self {
        if m.is_identity() {
            PrecondKind::Identity
        } else if m.inverse_diagonal().is_some() {
            PrecondKind::Jacobi
        } else {
            PrecondKind::General
        }
    }

    /// How the vector steps take a preconditioner of this kind with the inverse diagonal
    /// `inv_diag`: fused (Jacobi), applied between the steps (any other), or not at all.
    pub(crate) fn pre<V>(self, inv_diag: Option<&V>) -> Pre<'_, V> {
        match (self, inv_diag) {
            (PrecondKind::Jacobi, Some(d)) => Pre::Jacobi(d),
            (PrecondKind::General, _) => Pre::Separate,
            _ => Pre::Identity,
        }
    }
}

/// The status-check interval of a solve that sets none: the backend's interval `base` divided
/// by what one iteration costs in products with the operator (`1 + precond_cost`), at least 1.
/// A check costs a host round trip (about 10–20 µs on a GPU); an AMG-preconditioned iteration
/// costs a millisecond on a million rows, and a block of 16 would run up to 15 of them after
/// convergence.
pub(crate) fn default_check_every(base: usize, precond_cost: f64) -> usize {
    let cost = if precond_cost.is_finite() {
        precond_cost.max(0.0)
    } else {
        0.0
    };
    ((base as f64 / (1.0 + cost)).floor() as usize).max(1)
}

/// The loop shared by every method and backend: setup, iterations with a status check every
/// `check_every`, the true-residual confirmation with restarts, and the report. `clock` was
/// started at the entry of the solver function (its workspace allocation is part of the solve).
/// With an observer ([`SolveParams::observer`]) that wants every iteration, every block is one
/// iteration, not recorded, and the observer is called after each; every observer is given the
/// history at the end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drive<T, B, M>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    method: &mut M,
    sc: B::Scalars,
    clock: Instant,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: VectorOps<T>,
    M: Method<T, B>,
{
    drive_with(be, a, &mut Exact { a, b }, x, params, method, sc, clock)
}

/// Where the driver's true residuals come from: `b − A·x` with the operator's exact values
/// ([`Exact`]), or from an iterate and a right-hand side kept apart from the iteration's own
/// vectors (a recurrence in `f32` under an `f64` iterate: `solvers::narrow`).
pub(crate) trait Truth<T: Elem, B: VectorOps<T>> {
    /// `‖b‖`.
    fn rhs_norm(&mut self, be: &B, sc: &mut B::Scalars) -> Result<f64, SolveError>;
    /// `out ← b − A·x` for the iterate `x` of the iteration (which the source may take into an
    /// iterate of its own, leaving `x` zero: then `b − A·x` is the residual of the sum), and
    /// `‖b − A·x‖`, computed in the working precision of the source. NaN stays NaN.
    fn residual(
        &mut self,
        be: &B,
        x: &mut B::Vector,
        out: &mut B::Vector,
        sc: &mut B::Scalars,
    ) -> Result<f64, SolveError>;
    /// Whether the iteration's operator or vectors are rounded against the source's (reliable
    /// updates and the watch on the true residual then run).
    fn rounded(&self) -> bool;
}

/// The true residual with the operator's exact values ([`LinearOperator::apply_exact`]).
pub(crate) struct Exact<'a, T: Elem, B: VectorOps<T>> {
    pub(crate) a: &'a dyn LinearOperator<T, B>,
    pub(crate) b: &'a B::Vector,
}

impl<T: Elem, B: VectorOps<T>> Truth<T, B> for Exact<'_, T, B> {
    fn rhs_norm(&mut self, be: &B, sc: &mut B::Scalars) -> Result<f64, SolveError> {
        let bb = be.dot(self.b, self.b, sc)?.re().as_f64();
        Ok(bb.sqrt())
    }
    fn residual(
        &mut self,
        be: &B,
        x: &mut B::Vector,
        out: &mut B::Vector,
        sc: &mut B::Scalars,
    ) -> Result<f64, SolveError> {
        self.a.apply_exact(be, x, out)?;
        be.axpby(T::one(), self.b, -T::one(), out)?;
        let rr = be.dot(out, out, sc)?.re().as_f64();
        // NaN stays NaN (f64::max would turn it into 0, a "converged" residual).
        Ok(if rr.is_nan() { rr } else { rr.max(0.0).sqrt() })
    }
    fn rounded(&self) -> bool {
        self.a.is_narrowed()
    }
}

/// [`drive`] with the true residuals of `truth`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drive_with<T, B, M>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    truth: &mut dyn Truth<T, B>,
    x: &mut B::Vector,
    params: &SolveParams,
    method: &mut M,
    mut sc: B::Scalars,
    clock: Instant,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: VectorOps<T>,
    M: Method<T, B>,
{
    // An operator with a choice of kernels (a GPU matrix) may measure them now, before any
    // iteration is queued or recorded.
    a.prepare(be, params.max_iters)?;
    let bnorm = truth.rhs_norm(be, &mut sc)?;
    if !bnorm.is_finite() {
        return Err(SolveError::NonFinite { iteration: 0 });
    }
    let thresh = (params.rel_tol * bnorm).max(params.abs_tol);
    let scale = if bnorm > 0.0 { bnorm } else { 1.0 };
    // An observer that watches only the end does not change how the solve runs.
    let observer = params.observer.filter(|o| o.every_iteration());
    let check_every = match observer {
        Some(_) => 1,
        None => params
            .check_every
            .unwrap_or_else(|| default_check_every(be.default_check_every(), method.precond_cost()))
            .max(1),
    };
    let wants_x = observer.is_some_and(|o| o.wants_iterate());
    // The observer's view of the iterate: a host copy of x.
    let show_x = |it: usize, x: &B::Vector| -> crate::Result<()> {
        match observer {
            Some(o) if wants_x => o.on_iterate(it, T::as_elem_slice(&be.download(x)?)),
            _ => Ok(()),
        }
    };
    if params.initial_guess == InitialGuess::Zero {
        be.set_zero(x)?;
    }
    be.write_slots(
        &mut sc,
        &[(Slot::Thresh, crate::backend::recur::real(thresh * thresh))],
    )?;

    // With the operator's exact values (a matrix stored narrower than its vectors applies its
    // rounded values everywhere else), into the residual workspace, or `aside` into the scratch
    // vector with the recursive residual kept (a reliable update).
    let true_residual = |truth: &mut dyn Truth<T, B>,
                         method: &mut M,
                         x: &mut B::Vector,
                         sc: &mut B::Scalars,
                         aside: bool| {
        let (r, q) = method.r_and_scratch();
        truth.residual(be, x, if aside { q } else { r }, sc)
    };

    // A reliable update: the true residual (in the scratch vector) replaces the recursive one
    // `rr`, keeping the search direction, unless the gap between them exceeds the recursive
    // residual itself (then a restart from the true residual costs fewer iterations).
    let replace = |method: &mut M, sc: &mut B::Scalars, it: usize, rr: f64, now: f64| {
        if now > 2.0 * rr {
            let (r, q) = method.r_and_scratch();
            be.copy(q, r)?;
            method.start(be, sc, it)
        } else {
            method.replace_residual(be, sc, it)
        }
    };

    let mut it = 0usize;
    let mut restarts = 0usize;
    let mut last_true = true_residual(truth, method, x, &mut sc, false)?;
    // A NaN or infinity anywhere in A, b or the initial guess makes b − A·x non-finite (NaN·0
    // and ∞·0 are NaN): reported here, at iteration 0, the same way on every backend and method.
    if !last_true.is_finite() {
        return Err(SolveError::NonFinite { iteration: 0 });
    }
    // An operator with rounded values: reliable updates where the method can continue from a
    // replaced residual.
    let mut reliable = (truth.rounded() && method.can_replace()).then(|| Reliable::new(last_true));
    // And for every method: a watch on the true residual, to give up early where the rounded
    // values cannot reach the tolerance.
    let mut watch = truth.rounded().then(|| Watch::new(last_true));
    // Continue from the true residual in the scratch vector (a reliable update after a
    // confirmation): the recursive residual norm it replaces.
    let mut resume: Option<f64> = None;
    // The watch stopped the solve at a status check.
    let mut stopped = false;
    let status = loop {
        // (Re)start from the residual b − A·x that sits in method.r (or, resuming, in the
        // scratch vector).
        be.write_slots(&mut sc, &[(Slot::Status, T::zero())])?;
        match resume.take() {
            Some(rr) => replace(method, &mut sc, it, rr, last_true)?,
            None => method.start(be, &mut sc, it)?,
        }
        let mut slots = be.read_slots(&sc)?;
        let mut status = Status::of(slots[Slot::Status as usize]);
        while status == Status::Running && it < params.max_iters && !stopped {
            // One block: up to the next multiple of check_every, the iteration limit, or the
            // method's own limit; then one status read.
            let len = (check_every - it % check_every)
                .min(params.max_iters - it)
                .min(method.block_limit().max(1))
                .min(
                    params
                        .watch
                        .and_then(|w| w.next_check(it))
                        .filter(|&n| n > it)
                        .map_or(usize::MAX, |n| n - it),
                );
            let key = if params.graphs && observer.is_none() {
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
                            method.step(Step::new(be, &mut sc, x, it))?;
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
            method.after_block(Step::new(be, &mut sc, x, it))?;
            slots = be.read_slots(&sc)?;
            status = Status::of(slots[Slot::Status as usize]);
            if let Some(rel) = reliable.as_mut() {
                let rr = slots[Slot::Rr as usize].re().as_f64().max(0.0).sqrt();
                if status == Status::Running && it < params.max_iters && rel.due(rr, it) {
                    let now = true_residual(truth, method, x, &mut sc, true)?;
                    last_true = now;
                    if !now.is_finite() {
                        return Err(SolveError::NonFinite { iteration: it });
                    }
                    if rel.stalled(it, rr, now) {
                        // Reported as not converged, with this true residual.
                        break;
                    }
                    replace(method, &mut sc, it, rr, now)?;
                    slots = be.read_slots(&sc)?;
                    status = Status::of(slots[Slot::Status as usize]);
                }
            }
            if let Some(w) = watch.as_mut() {
                if let Some(rel) = &reliable {
                    w.seen(rel.at);
                }
                if status == Status::Running && it < params.max_iters && w.due(it) {
                    let now = true_residual(truth, method, x, &mut sc, true)?;
                    if !now.is_finite() {
                        return Err(SolveError::NonFinite { iteration: it });
                    }
                    last_true = now;
                    if w.gave_up(it, now) {
                        // Reported as not converged, with this true residual.
                        break;
                    }
                }
            }
            let estimate = slots[Slot::Rr as usize].re().as_f64().max(0.0).sqrt() / scale;
            if let Some(f) = params.on_check {
                f(&Progress {
                    iteration: it,
                    relative_residual: estimate,
                    seconds: clock.elapsed().as_secs_f64(),
                });
            }
            if let Some(o) = observer {
                o.on_iteration(it, estimate)?;
                if method.steps_update_x() || method.take_new_iterate() {
                    show_x(it, x)?;
                }
            }
            if let (Some(w), Status::Running, true) = (params.watch, status, it < params.max_iters)
            {
                let mut read = || history(be, &sc, it, scale, params).map_err(crate::Error::from);
                stopped = w.stop(it, estimate, clock.elapsed().as_secs_f64(), &mut read)?;
            }
        }
        if status != Status::Running {
            // The kernels stopped at the recorded iteration; later ones were no-ops.
            it = slots[Slot::StatusIter as usize].re().as_f64() as usize;
        }
        method.finish(Step::new(be, &mut sc, x, it), status)?;
        if method.take_new_iterate() {
            show_x(it, x)?;
        }
        let mut confirm = Confirm {
            it,
            thresh,
            restarts: &mut restarts,
            last_true: &mut last_true,
        };
        // A converged recursive residual whose true one is not: with reliable updates, carry on
        // from the true residual with the same search direction (it goes to the scratch vector,
        // the recursive residual stays for the update).
        let aside = reliable.is_some() && status == Status::Converged;
        let rr = slots[Slot::Rr as usize].re().as_f64().max(0.0).sqrt();
        if let Some(done) = confirm.after_stop(status, params, &mut || {
            true_residual(truth, method, x, &mut sc, aside)
        })? {
            break done;
        }
        if let Some(rel) = reliable.as_mut() {
            rel.replaced(it, last_true);
            resume = aside.then_some(rr);
        }
    };

    let history = history(be, &sc, it, scale, params)?;
    if let Some(o) = params.observer {
        o.on_end(&history)?;
    }
    let end = Ended {
        status,
        iterations: it,
        true_residual: last_true,
        scale,
        restarts,
    };
    end.report(history, clock.elapsed().as_secs_f64(), &mut || {
        true_residual(truth, method, x, &mut sc, false)
    })?
}

/// The reliable updates of a solve with an operator whose values are rounded
/// ([`LinearOperator::is_narrowed`]): the recursive residual `r` drifts from the true `b − A·x`
/// by the gap `g = (A − fl(A))·Δx`, the rounding times the change of `x` since `r` was last
/// exact. The driver replaces `r` by the true residual whenever the recursive one has fallen by
/// [`RELIABLE_DROP`] since the last replacement and at least [`RELIABLE_MIN_ITERS`] iterations
/// have passed, keeping the search direction (Sleijpen and van der Vorst 1996; van der Vorst and
/// Ye 2000); `SEGSPARSE_RELIABLE_DROP` sets the drop.
///
/// The gap relative to the residual it is added to grows as `ε·κ(A)/drop` (`Δx` is about the
/// error at the last replacement, which the rounding maps to `ε‖A‖‖e‖ ≤ ε·κ(A)·‖r‖`), and a
/// replaced residual that differs from the recursive one costs CG iterations, as a partial
/// restart would; each replacement costs one product with the exact values. Measured with CG on
/// the CPU (f32 values, tolerances 1e-8 to 1e-11, anisotropic Q1 on 200² with ε = 0.01 and
/// coefficient jumps of 10⁴ on 24³): a drop of 0.1 to 0.3 cost 7–13 % more iterations than the
/// exact operator, 0.01 up to 20 %, 10⁻³ up to 100 %; rarer replacements cost more.
///
/// When the true residual no longer follows — twice in a row it fell by less than the square
/// root of the recursive residual's drop (half of it on a log scale) — the rounding is too
/// coarse for the matrix (`ε·κ(A)` near 1) and the solve stops as not converged (with that true
/// residual), so that a caller can change the storage (`solvers::storage`).
struct Reliable {
    /// The true residual at the last replacement (or the start).
    at: f64,
    /// The iteration of the last replacement.
    since: usize,
    /// The recursive residual's drop (relative to `at`) that triggers the next replacement.
    drop: f64,
    /// Replacements in a row after which the true residual did not follow the recursive one.
    weak: usize,
}

/// The drop of the recursive residual (relative to the last true one) that triggers a
/// replacement.
pub(crate) const RELIABLE_DROP: f64 = 0.1;
/// The fewest iterations between two replacements (each costs a product with the exact values
/// and four vector passes, about 1.5 iterations).
pub(crate) const RELIABLE_MIN_ITERS: usize = 32;

impl Reliable {
    fn new(true_residual: f64) -> Self {
        let drop = std::env::var("SEGSPARSE_RELIABLE_DROP")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|d| *d > 0.0 && *d < 1.0);
        Reliable {
            at: true_residual,
            since: 0,
            drop: drop.unwrap_or(RELIABLE_DROP),
            weak: 0,
        }
    }
    /// Whether the recursive residual norm `rr` at iteration `it` calls for a replacement.
    fn due(&self, rr: f64, it: usize) -> bool {
        rr <= self.drop * self.at && it >= self.since + RELIABLE_MIN_ITERS
    }
    /// Records a replacement at iteration `it` of the recursive residual norm `rr` by the true
    /// one `now`; true when the true residual stalled.
    fn stalled(&mut self, it: usize, rr: f64, now: f64) -> bool {
        // Following: at least half the recursive residual's drop, on a log scale.
        let used = if self.at > 0.0 { rr / self.at } else { 1.0 };
        self.weak = if now > used.sqrt() * self.at {
            self.weak + 1
        } else {
            0
        };
        self.at = now;
        self.since = it;
        self.weak >= 2
    }
    /// Records a true residual computed elsewhere (a confirmation) at iteration `it`.
    fn replaced(&mut self, it: usize, now: f64) {
        self.at = now;
        self.since = it;
    }
}

/// The watch on a solve with an operator whose values are rounded: every [`WATCH_ITERS`]
/// iterations the true residual (exact values) is computed aside; the solve stops as not
/// converged when it has grown [`WATCH_DIVERGED`]-fold above the least one seen (the rounded
/// operator drives the iterate away), or when two watches in a row found no progress (less
/// than a tenth below the least one): the rounded values cannot reach the tolerance, and a
/// caller can change the storage (`solvers::storage`) with iterations left. Each watch costs a
/// product with the exact values (well under 1 % of the iterations it spans).
struct Watch {
    best: f64,
    next: usize,
    idle: usize,
}

/// Iterations between two watches.
pub(crate) const WATCH_ITERS: usize = 256;
/// Growth of the true residual over the least one seen that counts as diverging.
pub(crate) const WATCH_DIVERGED: f64 = 100.0;

impl Watch {
    fn new(true_residual: f64) -> Self {
        Watch {
            best: true_residual,
            next: WATCH_ITERS,
            idle: 0,
        }
    }
    fn due(&self, it: usize) -> bool {
        it >= self.next
    }
    /// A true residual seen elsewhere (a reliable update).
    fn seen(&mut self, r: f64) {
        if r < 0.9 * self.best {
            self.best = r;
            self.idle = 0;
        }
    }
    /// The watch at iteration `it` with true residual `now`: true to give up.
    fn gave_up(&mut self, it: usize, now: f64) -> bool {
        self.next = it + WATCH_ITERS;
        if now > WATCH_DIVERGED * self.best {
            return true;
        }
        if now < 0.9 * self.best {
            self.best = now;
            self.idle = 0;
            false
        } else {
            self.idle += 1;
            self.idle >= 2
        }
    }
}

/// The restart bookkeeping of a solve (or of one column of a block solve) whose iterations
/// stopped at iteration `it`.
pub(crate) struct Confirm<'a> {
    pub(crate) it: usize,
    /// The absolute tolerance on `‖b − A·x‖`.
    pub(crate) thresh: f64,
    pub(crate) restarts: &'a mut usize,
    /// The last confirmed true residual.
    pub(crate) last_true: &'a mut f64,
}

impl Confirm<'_> {
    /// What follows iterations that stopped with `status`: `None` to restart from the residual
    /// that `true_residual` left in the workspace (BiCGSTAB's vanished ρ, or a converged
    /// recursive residual whose true residual is still above the tolerance), else the final
    /// status.
    pub(crate) fn after_stop(
        &mut self,
        status: Status,
        params: &SolveParams,
        true_residual: &mut dyn FnMut() -> Result<f64, SolveError>,
    ) -> Result<Option<Status>, SolveError> {
        let can_restart = *self.restarts < MAX_RESTARTS && self.it < params.max_iters;
        if status == Status::BreakdownRho && can_restart {
            // BiCGSTAB's shadow residual became orthogonal to r: restart with r̂ = b − A·x.
            *self.last_true = true_residual()?;
            *self.restarts += 1;
            return Ok(None);
        }
        if status != Status::Converged {
            return Ok(Some(status));
        }
        let now = true_residual()?;
        if !now.is_finite() {
            return Ok(Some(Status::NonFinite));
        }
        let last = std::mem::replace(self.last_true, now);
        if now <= self.thresh {
            return Ok(Some(status));
        }
        // Recursive residual converged but the true one did not: restart from the true residual
        // unless restarts stagnate or run out.
        if !can_restart || now >= last {
            return Ok(Some(Status::Running));
        }
        *self.restarts += 1;
        Ok(None)
    }
}

/// The relative residual history of a solve that ran `it` iterations (empty unless
/// [`SolveParams::record_history`]).
pub(crate) fn history<T: Elem, B: VectorOps<T>>(
    be: &B,
    sc: &B::Scalars,
    it: usize,
    scale: f64,
    params: &SolveParams,
) -> Result<Vec<f64>, SolveError> {
    Ok(if params.record_history {
        be.read_history(sc, it + 1)?
            .into_iter()
            .map(|v| v.re().as_f64().max(0.0).sqrt() / scale)
            .collect()
    } else {
        Vec::new()
    })
}

/// How a solve (or one column of a block solve) ended: its final status, at which iteration,
/// the last confirmed true residual `‖b − A·x‖` and the scale `‖b‖` of the relative one.
pub(crate) struct Ended {
    pub(crate) status: Status,
    pub(crate) iterations: usize,
    pub(crate) true_residual: f64,
    pub(crate) scale: f64,
    pub(crate) restarts: usize,
}

impl Ended {
    /// What the solve reports: its [`SolveInfo`] when converged, else why not. `residual_now`
    /// computes the true residual of the final `x`, reported with a stagnated or unconverged
    /// solve (and only called then).
    pub(crate) fn report(
        &self,
        history: Vec<f64>,
        solve_seconds: f64,
        residual_now: &mut dyn FnMut() -> Result<f64, SolveError>,
    ) -> Result<Result<SolveInfo, SolveError>, SolveError> {
        let it = self.iterations;
        Ok(match self.status {
            Status::Converged => Ok(SolveInfo {
                iterations: it,
                relative_residual: self.true_residual / self.scale,
                history,
                solve_seconds,
                setup_seconds: 0.0,
                restarts: self.restarts,
                converged: true,
            }),
            Status::NonFinite => Err(SolveError::NonFinite { iteration: it }),
            Status::Stagnated => Err(SolveError::Stagnation {
                iterations: it,
                residual: residual_now()? / self.scale,
            }),
            Status::Running => Err(SolveError::NotConverged {
                iterations: it,
                residual: residual_now()? / self.scale,
            }),
            other => Err(SolveError::Breakdown {
                what: other.describe(),
                iteration: it,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::default_check_every;

    #[test]
    fn the_check_interval_shrinks_with_the_preconditioner_cost() {
        // No preconditioner, or a diagonal one: the backend's interval.
        assert_eq!(default_check_every(16, 0.0), 16);
        // ILU's two triangular sweeps (3 products): every 4 iterations.
        assert_eq!(default_check_every(16, 3.0), 4);
        // An AMG V-cycle (about 8 products or more): every iteration.
        assert_eq!(default_check_every(16, 8.3), 1);
        assert_eq!(default_check_every(16, 1e9), 1);
        // A host backend checks every iteration whatever the cost; nonsense costs change nothing.
        assert_eq!(default_check_every(1, 0.0), 1);
        assert_eq!(default_check_every(16, f64::NAN), 16);
        assert_eq!(default_check_every(16, -5.0), 16);
    }
}
