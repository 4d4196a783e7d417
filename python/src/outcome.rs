//! A solve's result as the Python side reads it: SciPy's status and the details.

use segsparse::solvers::{SolveError, SolveInfo};

use crate::errors::{Failure, Res};

/// A solve's outcome in SciPy's terms: `status` 0 converged, > 0 the iterations done without
/// converging, < 0 a breakdown or a non-finite residual; then the solve's seconds, history,
/// restarts, message, and the setup's seconds (the crate's timing model: setup is everything
/// from the call to the solver call — uploads, the Jacobi diagonal, the preconditioner —, solve
/// the solver call itself, for failed solves too).
pub(crate) type Outcome = (bool, i64, usize, f64, f64, Vec<f64>, usize, String, f64);

/// A solve's result with its (setup, solve) seconds.
pub(crate) type Timed = (Result<SolveInfo, SolveError>, f64, f64);

/// The Python side's tuple of a solve's result; errors that are not numerical outcomes (a
/// dimension mismatch, a backend failure) are raised.
pub(crate) fn outcome((r, setup, secs): Timed) -> Res<Outcome> {
    match r {
        Ok(i) => Ok((
            true,
            0,
            i.iterations,
            i.relative_residual,
            secs,
            i.history,
            i.restarts,
            "converged".into(),
            setup,
        )),
        Err(
            e @ (SolveError::NotConverged {
                iterations,
                residual,
            }
            | SolveError::Stagnation {
                iterations,
                residual,
            }),
        ) => Ok((
            false,
            // Stagnation is a breakdown in SciPy's terms (-1); the limit, the iterations done.
            if matches!(e, SolveError::Stagnation { .. }) {
                -1
            } else {
                iterations.max(1) as i64
            },
            iterations,
            residual,
            secs,
            Vec::new(),
            0,
            e.to_string(),
            setup,
        )),
        Err(e @ SolveError::Breakdown { iteration, .. }) => Ok((
            false,
            -1,
            iteration,
            f64::NAN,
            secs,
            Vec::new(),
            0,
            e.to_string(),
            setup,
        )),
        Err(e @ SolveError::NonFinite { iteration }) => Ok((
            false,
            -2,
            iteration,
            f64::NAN,
            secs,
            Vec::new(),
            0,
            e.to_string(),
            setup,
        )),
        Err(e) => Err(Failure::Solve(e)),
    }
}
