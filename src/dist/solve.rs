//! One rank's part of a distributed solve, with the crate's timing model: preconditioner setup
//! and uploads as setup, the solver call as solve (see "Timing" in [`crate::solvers`]).

use std::time::Instant;

use super::precond::{setup_precond, DistOperator, DistPrecond, LocalOps};
use super::IterationWork;
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Scalar;
use crate::solvers::{bicgstab, pcg, SolveError, SolveInfo, SolveParams};

/// The Krylov methods of a distributed solve (GMRES needs the multi-vector steps of
/// [`KrylovOps`](crate::backend::KrylovOps), which the distributed backends do not have).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Krylov {
    /// (Preconditioned) conjugate gradient: SPD matrices and SPD preconditioners.
    Cg,
    /// BiCGSTAB, right-preconditioned.
    Bicgstab,
}

impl Krylov {
    /// One iteration's work with the preconditioner `p`, for
    /// [`choose_gpus`](super::choose_gpus): CG applies it once per iteration, BiCGSTAB twice.
    pub fn work(self, p: &DistPrecond) -> IterationWork {
        let (base, applications) = match self {
            Krylov::Cg => (IterationWork::cg(), 1.0),
            Krylov::Bicgstab => (IterationWork::bicgstab(), 2.0),
        };
        let (s, e, r, v) = p.work_per_application();
        base.plus(applications, s, e, r, v)
    }
}

/// What a distributed solve runs on every rank.
#[derive(Clone, Copy, Debug)]
pub struct DistSolve {
    /// The method.
    pub method: Krylov,
    /// The preconditioner.
    pub precond: DistPrecond,
    /// Tolerances and limits.
    pub params: SolveParams<'static>,
}

/// One rank's outcome of [`solve_rank`].
#[derive(Debug)]
pub struct RankOutcome {
    /// The solver's result; on success its [`SolveInfo::setup_seconds`] is
    /// [`RankOutcome::setup_seconds`].
    pub result: std::result::Result<SolveInfo, SolveError>,
    /// Setup: the caller's part (`prior_setup_seconds`) plus this rank's preconditioner setup,
    /// the uploads of `b` and `x`, and the collective check that ends the setup on every rank.
    pub setup_seconds: f64,
    /// The solver call (also when it failed).
    pub solve_seconds: f64,
}

/// Solves on one rank (collective: every rank calls it with its own part): sets up
/// `what.precond` for the diagonal block `owned` (host; the owned rows × owned columns),
/// uploads `b` and the initial guess `x` (this rank's entries), waits for every rank
/// ([`LocalOps::count_failed`]), runs the solver, and downloads this rank's solution (or last
/// iterate) into `x`. `prior_setup_seconds` is the setup the
/// caller already spent on this solve (partition, communicator, the matrix's upload).
///
/// # Errors
/// Preconditioner setup and backend failures — on every rank when any rank's setup fails (see
/// [`setup_precond`]); a failed solve (no convergence, breakdown) is a
/// [`RankOutcome::result`], not an error.
#[allow(clippy::too_many_arguments)]
pub fn solve_rank<T, D, A>(
    be: &D,
    a: &A,
    owned: &CsrMatrix<T>,
    first_row: u64,
    b: &[T],
    x: &mut Vec<T>,
    what: &DistSolve,
    prior_setup_seconds: f64,
) -> Result<RankOutcome>
where
    T: Scalar,
    D: LocalOps<T>,
    A: DistOperator<T, D> + ?Sized,
{
    let clock = Instant::now();
    let m = setup_precond(be, a, owned, first_row, &what.precond)?;
    let vectors = (|| Ok((be.upload(b)?, be.upload(x)?)))();
    // Also the barrier that ends the setup on every rank.
    let (db, mut dx) = super::precond::agree(be, vectors)?;
    let setup_seconds = prior_setup_seconds + clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let mut result = match what.method {
        Krylov::Cg => pcg(be, a, &*m, &db, &mut dx, &what.params),
        Krylov::Bicgstab => bicgstab(be, a, &*m, &db, &mut dx, &what.params),
    };
    let solve_seconds = clock.elapsed().as_secs_f64();
    if let Ok(info) = &mut result {
        info.setup_seconds = setup_seconds;
    }
    *x = be.download(&dx)?;
    Ok(RankOutcome {
        result,
        setup_seconds,
        solve_seconds,
    })
}
