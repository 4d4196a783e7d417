//! CG whose recurrence runs in `f32` under an `f64` iterate and `f64` true residuals: `f64`
//! answers from `f32` vectors and values.
//!
//! [`pcg_f32`] runs the one CG body (`cg.rs`) on the `f32` backend of a [`NarrowOps`] backend:
//! `p`, `r`, `A·p`, `M⁻¹r` and the increment of the iterate are `f32` vectors, the matrix the
//! iteration applies is stored in `f32`, so an iteration moves half the bytes of an `f64` one
//! (the values, the vector passes and the gathered `x` of the product). The answer is `f64`:
//!
//! - the iterate is kept in `f64` apart from the iteration; whenever the driver computes a true
//!   residual (its reliable updates, the watch, the confirmation at the end), the `f32`
//!   increment is added to the `f64` iterate and zeroed, the residual `b − A·x` is computed in
//!   `f64` with the exact operator and rounded to `f32` for the recurrence (Clark et al. 2010,
//!   "Solving lattice QCD systems of equations using mixed precision solvers on GPUs";
//!   van der Vorst and Ye 2000);
//! - the search direction is kept across those replacements, corrected by what the replaced
//!   residual changes in it (`Method::replace_residual` of CG), so convergence does not restart;
//! - the stopping test is the driver's: the `f64` true residual `‖b − A·x‖ ≤ tol`.
//!
//! The problem is solved scaled by `1/‖b‖` (the iterate and the absolute tolerance with it), so
//! that the `f32` recurrence's residuals lie near 1 and down to the tolerance, far inside
//! `f32`'s range, whatever the scale of `b`.
//!
//! Where the `f32` recurrence cannot reach the tolerance (`2⁻²⁴·κ(A)` near 1: the true residual
//! stops following the recursive one at the reliable updates), the solve ends as not
//! converged; [`storage::pcg_stored_f32`](super::storage::pcg_stored_f32) then goes on in `f64`
//! and says so.

use std::time::Instant;

use super::drive::check_dims;
use super::drive::Truth;
use super::{Dyn, SolveError, SolveInfo, SolveParams};
use crate::backend::{CgSteps, LinearOperator, Preconditioner, VectorOps};
use crate::backend::{LowVector, NarrowOps};

/// Preconditioned CG with the recurrence in `f32` and an `f64` answer (see the
/// [module docs](self)): solves `A·x = b` for a symmetric positive definite `A`.
///
/// - `high` is the `f64` backend and `low` its `f32` backend ([`NarrowOps::low`]: on the GPU,
///   the same device and stream);
/// - `a` is `A` on `f64` vectors: its exact values ([`LinearOperator::apply_exact`]) compute
///   the true residuals;
/// - `a32` is `A` with its values in `f32` on `f32` vectors (the iteration's operator), `m32`
///   an SPD preconditioner on `f32` vectors (`backend::Identity` for none; a diagonal one is
///   fused into the vector steps as in [`pcg`](super::pcg));
/// - `b`, `x` are `f64`; `x` is the initial guess when [`SolveParams::initial_guess`] says so,
///   and holds the answer (or the last iterate, on error) afterwards.
///
/// The iteration count and the residual history are those of the `f32` recurrence; the
/// reported residual is the `f64` true one.
///
/// # Errors
/// As [`pcg`](super::pcg); [`SolveError::Backend`] with an invalid input for an observer of
/// every iteration (the iterate is split between two precisions while the solve runs).
#[allow(clippy::too_many_arguments)]
pub fn pcg_f32<H, A, A32, P32>(
    high: &H,
    low: &H::Low,
    a: &A,
    a32: &A32,
    m32: &P32,
    b: &H::Vector,
    x: &mut H::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    H: NarrowOps,
    H::Low: CgSteps<f32>,
    A: LinearOperator<f64, H> + ?Sized,
    A32: LinearOperator<f32, H::Low> + ?Sized,
    P32: Preconditioner<f32, H::Low> + ?Sized,
{
    pcg_f32_body(high, low, &Dyn(a), &Dyn(a32), &Dyn(m32), b, x, params)
}

#[allow(clippy::too_many_arguments)]
fn pcg_f32_body<H>(
    high: &H,
    low: &H::Low,
    a: &dyn LinearOperator<f64, H>,
    a32: &dyn LinearOperator<f32, H::Low>,
    m32: &dyn Preconditioner<f32, H::Low>,
    b: &H::Vector,
    x: &mut H::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    H: NarrowOps,
    H::Low: CgSteps<f32>,
{
    let clock = Instant::now();
    let n = check_dims(high, a, b, x)?;
    if a32.nrows() != n || a32.ncols() != n {
        return Err(SolveError::DimensionMismatch {
            what: "f32 operator (it must have the rows and columns of the f64 one)",
            expected: n,
            found: if a32.nrows() != n {
                a32.nrows()
            } else {
                a32.ncols()
            },
        });
    }
    if params.observer.is_some_and(|o| o.every_iteration()) {
        return Err(SolveError::Backend(crate::Error::InvalidInput(
            "a CG with f32 vectors takes no observer of every iteration (its iterate is split \
             between an f64 sum and an f32 increment while it runs)"
                .into(),
        )));
    }
    // The f32 increment of the iterate; the f32 recurrence starts from it at zero.
    let mut dx: LowVector<H> = low.zeros(n)?;
    if let Some(d) = m32.inverse_diagonal() {
        if low.len(d) != n {
            return Err(SolveError::DimensionMismatch {
                what: "preconditioner diagonal",
                expected: n,
                found: low.len(d),
            });
        }
    }
    super::preflight(
        high,
        "the f64 side of a CG with f32 vectors",
        n,
        2,
        0,
        params,
    )?;
    // The scale: the problem is solved for b/‖b‖ (and x/‖b‖).
    let mut hs = high.scalars(n, 0)?;
    let bb: f64 = high.dot(b, b, &mut hs)?;
    if !bb.is_finite() {
        return Err(SolveError::NonFinite { iteration: 0 });
    }
    let s = if bb > 0.0 { bb.sqrt() } else { 1.0 };
    let mut bs = high.zeros(n)?;
    high.copy(b, &mut bs)?;
    high.scal(1.0 / s, &mut bs)?;
    match params.initial_guess {
        super::InitialGuess::Zero => high.set_zero(x)?,
        super::InitialGuess::Given => high.scal(1.0 / s, x)?,
    }
    // An operator with a choice of kernels measures them now (a few true residuals per
    // decade of the residual).
    a.prepare(
        high,
        params.max_iters / super::drive::RELIABLE_MIN_ITERS + 2,
    )?;
    let inner = SolveParams {
        abs_tol: params.abs_tol / s,
        initial_guess: super::InitialGuess::Given,
        ..*params
    };
    let mut truth = Refined {
        high,
        a,
        b: &bs,
        x,
        w: high.zeros(n)?,
        sc: hs,
    };
    let result = super::cg::cg_run(low, a32, m32, &mut truth, &mut dx, &inner, false, clock);
    // The last increment (zero unless the iterations stopped between true residuals: an
    // error), then the scale back.
    let folded = truth.fold(low, &mut dx);
    let x = truth.x;
    high.scal(s, x)?;
    folded?;
    result
}

/// The true residuals of a CG with `f32` vectors: the `f64` iterate `x` (scaled), the `f64`
/// right-hand side and the exact operator.
struct Refined<'a, H: NarrowOps> {
    high: &'a H,
    a: &'a dyn LinearOperator<f64, H>,
    b: &'a H::Vector,
    x: &'a mut H::Vector,
    /// Scratch: the widened increment, then `b − A·x`.
    w: H::Vector,
    sc: H::Scalars,
}

impl<H: NarrowOps> Refined<'_, H> {
    /// `x ← x + dx`, `dx ← 0`.
    fn fold(&mut self, low: &H::Low, dx: &mut LowVector<H>) -> crate::Result<()> {
        self.high.widen(dx, &mut self.w)?;
        self.high.axpy(1.0, &self.w, self.x)?;
        low.set_zero(dx)
    }
}

impl<H: NarrowOps> Truth<f32, H::Low> for Refined<'_, H> {
    fn rhs_norm(
        &mut self,
        _: &H::Low,
        _: &mut <H::Low as VectorOps<f32>>::Scalars,
    ) -> Result<f64, SolveError> {
        let bb: f64 = self.high.dot(self.b, self.b, &mut self.sc)?;
        Ok(bb.sqrt())
    }
    fn residual(
        &mut self,
        low: &H::Low,
        dx: &mut LowVector<H>,
        out: &mut LowVector<H>,
        _: &mut <H::Low as VectorOps<f32>>::Scalars,
    ) -> Result<f64, SolveError> {
        let high = self.high;
        self.fold(low, dx)?;
        self.a.apply_exact(high, self.x, &mut self.w)?;
        high.axpby(1.0, self.b, -1.0, &mut self.w)?;
        let rr: f64 = high.dot(&self.w, &self.w, &mut self.sc)?;
        high.narrow(&self.w, out)?;
        Ok(if rr.is_nan() { rr } else { rr.max(0.0).sqrt() })
    }
    fn rounded(&self) -> bool {
        true
    }
}
