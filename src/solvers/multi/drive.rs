//! The loop of a solve with several right-hand sides: every column runs the checks, status reads,
//! true-residual confirmation and restarts of the one-column loop (`solvers::drive`), on its own
//! scalars and its own iteration count; the iterations of all running columns advance together,
//! so the operator and the preconditioner see the block.

use std::time::Instant;

use super::super::drive::{default_check_every, history, Confirm, Ended, Step};
use super::super::types::{InitialGuess, Progress, SolveError, SolveInfo, SolveParams};
use super::MultiInfo;
use crate::backend::{BlockOps, LinearOperator, Slot, Status, NSLOTS};
use crate::scalar::Scalar;

/// One method's state for `k` columns, driven by [`drive_multi`].
pub(crate) trait ColumnMethod<T: Scalar, B: BlockOps<T>> {
    /// Column `j`'s residual workspace (where the loop writes `b − A·x` before
    /// [`ColumnMethod::start`]) and a scratch vector for `A·x`.
    fn r_and_scratch(&mut self, j: usize) -> (&mut B::Vector, &mut B::Vector);
    /// (Re)starts column `j` from the residual in its workspace.
    fn start(&mut self, be: &B, sc: &mut B::Scalars, j: usize, it: usize) -> crate::Result<()>;
    /// Called once the iterations of a (re)start of column `j` end (GMRES adds its correction).
    fn finish(&mut self, _at: Step<'_, T, B>, _j: usize, _status: Status) -> crate::Result<()> {
        Ok(())
    }
    /// What one application of the method's preconditioner costs in products with the
    /// operator ([`Preconditioner::cost_in_products`](crate::backend::Preconditioner::cost_in_products);
    /// 0 without one): the default status-check interval, as in the one-column loop.
    fn precond_cost(&self) -> f64 {
        0.0
    }
    /// The most iterations column `j`'s next block may hold.
    fn block_limit(&self, _j: usize) -> usize {
        usize::MAX
    }
    /// Called for each running column `j` after a block, at its iteration `at.it` (GMRES's end
    /// of cycle).
    fn after_block(&mut self, _at: Step<'_, T, B>, _j: usize) -> crate::Result<()> {
        Ok(())
    }
    /// One iteration of every column in `active` (ascending), column `j` at iteration `its[j]`.
    /// Must only queue backend work.
    fn step(
        &mut self,
        be: &B,
        scs: &mut [B::Scalars],
        xs: &mut [B::Vector],
        active: &[usize],
        its: &[usize],
    ) -> crate::Result<()>;
}

/// The per-column bookkeeping of the loop.
struct Column {
    it: usize,
    restarts: usize,
    last_true: f64,
    thresh: f64,
    scale: f64,
}

/// `active` as a mask over `k` columns.
pub(crate) fn mask(k: usize, active: &[usize]) -> Vec<bool> {
    let mut m = vec![false; k];
    for &j in active {
        m[j] = true;
    }
    m
}

/// The loop of every multi-column method and backend. `clock` started at the solver's entry.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drive_multi<T, B, M>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    bs: &[B::Vector],
    xs: &mut [B::Vector],
    params: &SolveParams,
    method: &mut M,
    mut scs: Vec<B::Scalars>,
    clock: Instant,
) -> Result<MultiInfo, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    M: ColumnMethod<T, B>,
{
    let k = bs.len();
    let check_every = params
        .check_every
        .unwrap_or_else(|| default_check_every(be.default_check_every(), method.precond_cost()))
        .max(1);
    let mut outcome: Vec<Option<Result<SolveInfo, SolveError>>> = (0..k).map(|_| None).collect();
    let mut cols: Vec<Column> = Vec::with_capacity(k);
    let mut its = vec![0usize; k];
    let mut active = Vec::with_capacity(k);
    let mut block_iterations = 0usize;

    let true_residual = |method: &mut M, j: usize, x: &B::Vector, sc: &mut B::Scalars| {
        let (r, q) = method.r_and_scratch(j);
        a.apply_exact(be, x, q)?;
        be.residual(&bs[j], q, r)?;
        let rr = be.dot(r, r, sc)?.as_f64();
        Ok::<f64, SolveError>(if rr.is_nan() { rr } else { rr.max(0.0).sqrt() })
    };

    for j in 0..k {
        let bb = be.dot(&bs[j], &bs[j], &mut scs[j])?.as_f64();
        let bnorm = bb.sqrt();
        let thresh = (params.rel_tol * bnorm).max(params.abs_tol);
        let scale = if bnorm > 0.0 { bnorm } else { 1.0 };
        cols.push(Column {
            it: 0,
            restarts: 0,
            last_true: 0.0,
            thresh,
            scale,
        });
        if !bb.is_finite() {
            outcome[j] = Some(Err(SolveError::NonFinite { iteration: 0 }));
            continue;
        }
        if params.initial_guess == InitialGuess::Zero {
            be.set_zero(&mut xs[j])?;
        }
        be.write_slots(&mut scs[j], &[(Slot::Thresh, T::of_f64(thresh * thresh))])?;
        let last = true_residual(method, j, &xs[j], &mut scs[j])?;
        if !last.is_finite() {
            outcome[j] = Some(Err(SolveError::NonFinite { iteration: 0 }));
            continue;
        }
        cols[j].last_true = last;
        let slots = restart(be, method, &mut scs[j], j, 0)?;
        let status = Status::of(slots[Slot::Status as usize]);
        if status == Status::Running && params.max_iters > 0 {
            active.push(j);
        } else {
            let (c, sc, x) = (&mut cols[j], &mut scs[j], &mut xs[j]);
            let end = (status, slots);
            match settle(be, method, c, sc, x, j, end, params, &true_residual)? {
                None => active.push(j),
                done => outcome[j] = done,
            }
        }
    }

    while !active.is_empty() {
        // One block: up to every running column's next check, iteration limit or method limit.
        let len = active
            .iter()
            .map(|&j| {
                let it = cols[j].it;
                (check_every - it % check_every)
                    .min(params.max_iters - it)
                    .min(method.block_limit(j).max(1))
            })
            .min()
            .unwrap_or(1)
            .max(1);
        for _ in 0..len {
            for &j in &active {
                cols[j].it += 1;
                its[j] = cols[j].it;
            }
            method.step(be, &mut scs, xs, &active, &its)?;
            block_iterations += 1;
        }
        for &j in &active {
            method.after_block(Step::new(be, &mut scs[j], &mut xs[j], cols[j].it), j)?;
        }
        // Read every running column's status (one read for all); the columns that stopped
        // leave the active set.
        let all = {
            let on: Vec<&B::Scalars> = active.iter().map(|&j| &scs[j]).collect();
            be.read_slots_block(&on)?
        };
        let mut still = Vec::with_capacity(active.len());
        let mut worst = 0.0f64;
        let mut last_it = 0;
        for (&j, &slots) in active.iter().zip(&all) {
            let status = Status::of(slots[Slot::Status as usize]);
            let c = &mut cols[j];
            worst = worst.max(slots[Slot::Rr as usize].as_f64().max(0.0).sqrt() / c.scale);
            last_it = last_it.max(c.it);
            if status == Status::Running && c.it < params.max_iters {
                still.push(j);
                continue;
            }
            let (sc, x) = (&mut scs[j], &mut xs[j]);
            let end = (status, slots);
            match settle(be, method, c, sc, x, j, end, params, &true_residual)? {
                None => still.push(j),
                done => outcome[j] = done,
            }
        }
        if let Some(f) = params.on_check {
            f(&Progress {
                iteration: last_it,
                relative_residual: worst,
                seconds: clock.elapsed().as_secs_f64(),
            });
        }
        active = still;
    }

    let solve_seconds = clock.elapsed().as_secs_f64();
    let columns = outcome
        .into_iter()
        .map(|o| {
            let mut o = o.expect("every column settles");
            if let Ok(info) = &mut o {
                info.solve_seconds = solve_seconds;
            }
            o
        })
        .collect();
    Ok(MultiInfo {
        columns,
        solve_seconds,
        block_iterations,
    })
}

/// Clears column `j`'s status, (re)starts it at iteration `it` and reads its slots.
fn restart<T: Scalar, B: BlockOps<T>, M: ColumnMethod<T, B>>(
    be: &B,
    method: &mut M,
    sc: &mut B::Scalars,
    j: usize,
    it: usize,
) -> crate::Result<[T; NSLOTS]> {
    be.write_slots(sc, &[(Slot::Status, T::zero())])?;
    method.start(be, sc, j, it)?;
    be.read_slots(sc)
}

/// What the one-column loop does after column `j`'s iterations stop with `end` (its status and
/// slots): the method's finish, BiCGSTAB's restart on a vanished ρ, the true-residual
/// confirmation and the restart when it fails. `None` when the column restarted and iterates
/// again, else its outcome, as the one-column loop reports it.
#[allow(clippy::too_many_arguments)]
fn settle<T, B, M, F>(
    be: &B,
    method: &mut M,
    c: &mut Column,
    sc: &mut B::Scalars,
    x: &mut B::Vector,
    j: usize,
    (mut status, mut slots): (Status, [T; NSLOTS]),
    params: &SolveParams,
    true_residual: &F,
) -> Result<Option<Result<SolveInfo, SolveError>>, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    M: ColumnMethod<T, B>,
    F: Fn(&mut M, usize, &B::Vector, &mut B::Scalars) -> Result<f64, SolveError>,
{
    let status = loop {
        if status != Status::Running {
            c.it = slots[Slot::StatusIter as usize].as_f64() as usize;
        }
        method.finish(Step::new(be, &mut *sc, &mut *x, c.it), j, status)?;
        let mut confirm = Confirm {
            it: c.it,
            thresh: c.thresh,
            restarts: &mut c.restarts,
            last_true: &mut c.last_true,
        };
        if let Some(done) =
            confirm.after_stop(status, params, &mut || true_residual(method, j, x, sc))?
        {
            break done;
        }
        slots = restart(be, method, sc, j, c.it)?;
        status = Status::of(slots[Slot::Status as usize]);
        if status == Status::Running && c.it < params.max_iters {
            return Ok(None);
        }
    };
    let history = history(be, sc, c.it, c.scale, params)?;
    let end = Ended {
        status,
        iterations: c.it,
        true_residual: c.last_true,
        scale: c.scale,
        restarts: c.restarts,
    };
    // The call's time is set on every converged column at the end.
    end.report(history, 0.0, &mut || true_residual(method, j, x, sc))
        .map(Some)
}
