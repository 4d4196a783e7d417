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
    let e = match r {
        Ok(i) => {
            return Ok((
                true,
                0,
                i.iterations,
                i.relative_residual,
                secs,
                i.history,
                i.restarts,
                "converged".into(),
                setup,
            ))
        }
        Err(e) => e,
    };
    let (status, iterations, residual) = match &e {
        SolveError::NotConverged {
            iterations,
            residual,
        } => ((*iterations).max(1) as i64, *iterations, *residual),
        // A cycle without progress is a breakdown in SciPy's terms.
        SolveError::Stagnation {
            iterations,
            residual,
        } => (-1, *iterations, *residual),
        SolveError::Breakdown { iteration, .. } => (-1, *iteration, f64::NAN),
        SolveError::NonFinite { iteration } => (-2, *iteration, f64::NAN),
        _ => return Err(Failure::Solve(e)),
    };
    Ok((
        false,
        status,
        iterations,
        residual,
        secs,
        Vec::new(),
        0,
        e.to_string(),
        setup,
    ))
}
