//! Solves whose matrix is stored narrower than the working precision, with the fallback to the
//! working precision when the narrower storage cannot reach the tolerance.
//!
//! [`solve_stored`] runs a solve with an operator whose values are stored in `f32` under `f64`
//! vectors (`spmv::mixed::MixedCsr`, `spmv::gpu::mixed::GpuMixedCsr`). The solvers measure
//! convergence on the true residual with the exact values ([`LinearOperator::apply_exact`]:
//! confirmations, GMRES's cycle restarts, CG's reliable updates), so a converged answer is an
//! `f64` answer. When the `f32` values are too coarse for the matrix (a condition number near
//! `1/ε₃₂ ≈ 1.7·10⁷` or beyond), the true residual stops following the iteration: CG's reliable
//! updates stop the solve, BiCGSTAB's and GMRES's restarts stop making progress, or the
//! rounded matrix breaks the method down. Then the solve runs again with the exact values
//! from the better of the initial guess and the iterate reached, with the iterations that are
//! left, and the outcome says in one sentence why ([`StoredSolve::fallback`]). A matrix whose
//! values do not fit `f32` at all is refused before any iteration (`spmv::mixed::F32Fit`), and
//! the outcome says that too.

use std::time::Instant;

use super::{InitialGuess, SolveError, SolveInfo, SolveParams};
use crate::backend::{LinearOperator, VectorOps};
use crate::scalar::{Elem, Storage};

/// The operators of a solve with `f32` storage, as [`solve_stored`] takes them (`T` is the
/// working precision, `f64`).
pub enum StoredOperator<'a, T: Elem, B: VectorOps<T>> {
    /// `f32` values; `exact` is the operator with the exact values, `None` when the `f32`
    /// values are exact (then no fallback can change anything).
    F32 {
        /// The operator with `f32` values.
        narrow: &'a dyn LinearOperator<T, B>,
        /// The operator with the exact values.
        exact: Option<&'a dyn LinearOperator<T, B>>,
    },
    /// `f32` storage was refused before the solve (`reason`: one sentence); the exact operator.
    Refused {
        /// Why.
        reason: String,
        /// The operator with the exact values.
        exact: &'a dyn LinearOperator<T, B>,
    },
}

/// How a solve with `f32` storage ended ([`solve_stored`]).
#[derive(Debug)]
pub struct StoredSolve {
    /// The final solve's result. Its `solve_seconds` and `iterations` count every attempt.
    pub result: Result<SolveInfo, SolveError>,
    /// The storage of the solve that produced `result`.
    pub storage: Storage,
    /// Why the solve ran with `f64` storage after all, in one sentence; `None` when `f32`
    /// storage served.
    pub fallback: Option<String>,
}

/// Solves with the operators of `op`: `solve(storage, operator, x, params)` runs the method (the
/// caller's choice of solver and preconditioner; `storage` says which values the operator
/// holds, so a preconditioner may follow it), first with the `f32` operator, then — when that
/// ends without reaching the tolerance and an exact operator exists — with the exact one (see
/// the [module docs](self)). The iteration limit of `params` counts both attempts.
///
/// # Errors
/// Only a backend failure while saving or restoring `x`; the solves' own failures are in
/// [`StoredSolve::result`].
pub fn solve_stored<'p, T: Elem, B: VectorOps<T>>(
    be: &B,
    op: StoredOperator<'_, T, B>,
    x: &mut B::Vector,
    params: &SolveParams<'p>,
    mut solve: impl FnMut(
        Storage,
        &dyn LinearOperator<T, B>,
        &mut B::Vector,
        &SolveParams<'p>,
    ) -> Result<SolveInfo, SolveError>,
) -> crate::Result<StoredSolve> {
    let (narrow, exact) = match op {
        StoredOperator::Refused { reason, exact } => {
            return Ok(StoredSolve {
                result: solve(Storage::F64, exact, x, params),
                storage: Storage::F64,
                fallback: Some(format!("f64 storage: {reason}")),
            });
        }
        StoredOperator::F32 { narrow, exact } => (narrow, exact),
    };
    // The initial guess, for a second attempt that must not start from a worse point.
    let saved = match (exact, params.initial_guess) {
        (Some(_), InitialGuess::Given) => {
            let mut s = be.zeros(be.len(x))?;
            be.copy(x, &mut s)?;
            Some(s)
        }
        _ => None,
    };
    let clock = Instant::now();
    let first = solve(Storage::F32, narrow, x, params);
    let first_seconds = clock.elapsed().as_secs_f64();
    let Some(exact) = exact else {
        return Ok(StoredSolve {
            result: first,
            storage: Storage::F32,
            fallback: None,
        });
    };
    let (used, residual, why) = match &first {
        Ok(_) => {
            return Ok(StoredSolve {
                result: first,
                storage: Storage::F32,
                fallback: None,
            })
        }
        Err(SolveError::NotConverged {
            iterations,
            residual,
        })
        | Err(SolveError::Stagnation {
            iterations,
            residual,
        }) => (
            *iterations,
            *residual,
            format!("{}", first.as_ref().unwrap_err()),
        ),
        Err(e @ SolveError::Breakdown { iteration, .. }) => {
            (*iteration, f64::INFINITY, e.to_string())
        }
        Err(e @ SolveError::NonFinite { iteration }) => (*iteration, f64::INFINITY, e.to_string()),
        Err(_) => {
            return Ok(StoredSolve {
                result: first,
                storage: Storage::F32,
                fallback: None,
            })
        }
    };
    let left = params.max_iters.saturating_sub(used);
    if left == 0 {
        return Ok(StoredSolve {
            result: first,
            storage: Storage::F32,
            fallback: None,
        });
    }
    // Carry on from the iterate when it is better than a zero guess (relative residual below
    // 1), else from the initial guess.
    let warm = residual.is_finite() && residual < 1.0;
    let guess = if warm {
        InitialGuess::Given
    } else {
        match saved {
            Some(s) => {
                be.copy(&s, x)?;
                InitialGuess::Given
            }
            None => InitialGuess::Zero,
        }
    };
    let second_params = SolveParams {
        max_iters: left,
        initial_guess: guess,
        basis: Storage::F64,
        ..*params
    };
    let second = solve(Storage::F64, exact, x, &second_params).map(|mut info| {
        info.iterations += used;
        info.solve_seconds += first_seconds;
        info
    });
    Ok(StoredSolve {
        result: second,
        storage: Storage::F64,
        fallback: Some(format!(
            "f32 storage did not reach the tolerance ({why}; the f32 rounding is \
             too coarse for this matrix), so the solve went on with the f64 values from {}",
            if warm {
                "the iterate it reached"
            } else {
                "the initial guess"
            }
        )),
    })
}

/// [`pcg_f32`](super::narrow::pcg_f32) — CG with its recurrence in `f32` under an `f64` iterate
/// and `f64` true residuals — with the fallback of [`solve_stored`]: where the `f32` recurrence
/// does not reach the tolerance, the solve goes on with [`pcg`](super::pcg) on `f64` vectors
/// with the operator `a` and the preconditioner `m` (the `f64` counterpart of `m32`), and
/// [`StoredSolve::fallback`] says why. `a` must apply the exact values (its `apply` serves the
/// `f64` solve).
///
/// # Errors
/// As [`solve_stored`].
#[allow(clippy::too_many_arguments)]
pub fn pcg_stored_f32<'p, H, A32, P32, P>(
    high: &H,
    low: &H::Low,
    a: &dyn LinearOperator<f64, H>,
    a32: &A32,
    m32: &P32,
    m: &P,
    b: &H::Vector,
    x: &mut H::Vector,
    params: &SolveParams<'p>,
) -> crate::Result<StoredSolve>
where
    H: crate::backend::NarrowOps + crate::backend::CgSteps<f64>,
    H::Low: crate::backend::CgSteps<f32>,
    A32: LinearOperator<f32, H::Low> + ?Sized,
    P32: crate::backend::Preconditioner<f32, H::Low> + ?Sized,
    P: crate::backend::Preconditioner<f64, H> + ?Sized,
{
    solve_stored(
        high,
        StoredOperator::F32 {
            narrow: a,
            exact: Some(a),
        },
        x,
        params,
        |storage, op, x, p| match storage {
            Storage::F32 => super::narrow::pcg_f32(high, low, op, a32, m32, b, x, p),
            Storage::F64 => super::pcg(high, op, m, b, x, p),
        },
    )
}
