//! Several right-hand sides `A·X = B` sharing one operator and one preconditioner: CG/PCG,
//! BiCGSTAB and GMRES on `k` columns, written once for every backend.
//!
//! Each column is the solve of [`cg`](super::cg), [`bicgstab`](super::bicgstab) or
//! [`gmres`](super::gmres) on its own right-hand side: its own scalar slots (ρ, α, β, ω, ‖r‖²,
//! status), its own convergence test, true-residual confirmation and restarts, its own
//! iteration count and its own outcome. What the columns share is the iteration: every running
//! column advances together, so the operator is applied to the block of running columns at once
//! ([`LinearOperator::apply_block`](crate::backend::LinearOperator::apply_block): one SpMM on the GPU, reading the matrix once for all
//! columns) and so is the preconditioner ([`Preconditioner::apply_block`](crate::backend::Preconditioner::apply_block): the AMG cycle runs one
//! SpMM per matrix of its hierarchy). A column whose status is set leaves the active set at the
//! next status check and costs nothing after that (the active set is compacted, the other
//! columns' vectors are not moved).
//!
//! The vector steps between the products are block steps too ([`BlockOps`]: on the GPU one
//! launch per step for up to 32 running columns, each column's scalars on the device, and one
//! read of every running column's status per check).
//!
//! Column `j` of the result equals the one-column solve of `b_j` to rounding, with the same
//! iteration count: each block step computes, per column, the column step of the one-column
//! solver (bit for bit), in the same order; only the operator and the preconditioner see
//! several columns at once (the block product sums each row in the order of the single product
//! on the CPU; the GPU's SpMM may order a row's additions differently from its SpMV).
//!
//! A column that fails (a NaN in its right-hand side, a breakdown, no convergence) fails alone:
//! [`MultiInfo::columns`] holds one `Result` per column. The call itself fails only for what
//! concerns every column: shapes (`k = 0`, a column of the wrong length), a backend error.
//!
//! ```
//! use segsparse::solvers::{multi, SolveParams};
//! use segsparse::backend::{Cpu, Identity};
//! let a = segsparse::generate::poisson2d::<f64>(16).unwrap();
//! let n = a.nrows();
//! let b: Vec<Vec<f64>> = (0..3).map(|j| vec![1.0 + j as f64; n]).collect();
//! let mut x = vec![vec![0.0; n]; 3];
//! let info = multi::pcg(&Cpu, &a, &Identity, &b, &mut x, &SolveParams::default()).unwrap();
//! assert!(info.all_converged());
//! ```
//!
//! Recorded blocks (CUDA graphs, [`SolveParams::graphs`]) are not used here: the block of
//! running columns changes as columns converge. An observer ([`SolveParams::observer`]) is
//! refused with an error: it watches the iterate of one solve.

mod drive;

use std::time::Instant;

use drive::{drive_multi, mask, ColumnMethod};

use super::bicgstab::{after_pre, BicgVectors, BV};
use super::cg::CgVectors;
use super::drive::{check_problem, preflight, Dyn, PrecondKind as Kind, Step};
use super::gmres::GmresVectors;
use super::{SolveError, SolveInfo, SolveParams};
use crate::backend::recur::Status;
use crate::backend::{
    BlockKrylovOps, BlockOps, GmresColumn, Identity, LinearOperator, Preconditioner, VectorOps,
};
use crate::scalar::Scalar;
use crate::spmm::Layout;

/// The outcome of a solve with several right-hand sides.
#[derive(Debug)]
pub struct MultiInfo {
    /// One outcome per column, in the order of the right-hand sides: the [`SolveInfo`] of a
    /// converged column (its iterations, true residual, history; its `solve_seconds` is the
    /// whole call's), or why it failed.
    pub columns: Vec<Result<SolveInfo, SolveError>>,
    /// Wall-clock seconds of the call, entry to return (workspace, iterations, confirmations).
    pub solve_seconds: f64,
    /// Iterations of the block loop: the number of block operator applications per operator
    /// application of one iteration (the most iterations any column ran, counting restarts).
    pub block_iterations: usize,
}

impl MultiInfo {
    /// True when every column converged.
    pub fn all_converged(&self) -> bool {
        self.columns.iter().all(|c| c.is_ok())
    }
    /// Iterations per column (a failed column's count where its error has one, else 0).
    pub fn iterations(&self) -> Vec<usize> {
        self.columns
            .iter()
            .map(|c| match c {
                Ok(info) => info.iterations,
                Err(SolveError::NotConverged { iterations, .. })
                | Err(SolveError::Stagnation { iterations, .. }) => *iterations,
                Err(SolveError::Breakdown { iteration, .. })
                | Err(SolveError::NonFinite { iteration }) => *iteration,
                Err(_) => 0,
            })
            .collect()
    }
}

/// The checks every multi-column method shares: no observer (it watches one iterate), `k ≥ 1`,
/// as many solution columns as right-hand sides, and each column's shapes (as the one-column
/// solvers check them).
fn check_columns<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &[B::Vector],
    x: &[B::Vector],
    params: &SolveParams,
) -> Result<usize, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    if params.observer.is_some() {
        return Err(SolveError::Backend(crate::Error::InvalidInput(
            "a multi-column solve takes no observer (SolveParams::observer watches one \
             iterate): solve the columns one by one to observe them"
                .into(),
        )));
    }
    if b.is_empty() {
        return Err(SolveError::DimensionMismatch {
            what: "number of right-hand sides k (must be at least 1)",
            expected: 1,
            found: 0,
        });
    }
    if x.len() != b.len() {
        return Err(SolveError::DimensionMismatch {
            what: "number of solution columns (one per right-hand side)",
            expected: b.len(),
            found: x.len(),
        });
    }
    let mut n = 0;
    for (bj, xj) in b.iter().zip(x) {
        n = check_problem(be, a, m, bj, xj)?;
    }
    Ok(n)
}

/// The workspace of `k` columns: `column()` makes one column's vectors, and each column gets
/// its own scalars for vectors of length `n`. Allocated column by column, in column order.
fn allocate<T, B, C>(
    be: &B,
    k: usize,
    n: usize,
    params: &SolveParams,
    mut column: impl FnMut() -> crate::Result<C>,
) -> crate::Result<(Vec<C>, Vec<B::Scalars>)>
where
    T: Scalar,
    B: VectorOps<T>,
{
    let mut cols = Vec::with_capacity(k);
    let mut scs = Vec::with_capacity(k);
    for _ in 0..k {
        cols.push(column()?);
        scs.push(be.scalars(n, params.max_iters)?);
    }
    Ok((cols, scs))
}

/// The inputs and outputs of one block product over the columns switched `on`: `pick` takes
/// from a column the vector that is read and the one that is written.
fn gather<'c, C, X: ?Sized, Y: ?Sized>(
    cols: &'c mut [C],
    on: &[bool],
    mut pick: impl FnMut(&'c mut C) -> (&'c X, &'c mut Y),
) -> (Vec<&'c X>, Vec<&'c mut Y>) {
    cols.iter_mut()
        .zip(on)
        .filter(|(_, &o)| o)
        .map(|(c, _)| pick(c))
        .unzip()
}

/// The block step's columns over the columns switched `on`: `make` lends one column's vectors,
/// its solution, its slots and its iteration (`its[j]`), in column order.
fn columns<'c, C, V, S, K>(
    cols: &'c mut [C],
    scs: &'c mut [S],
    xs: &'c mut [V],
    on: &[bool],
    its: &[usize],
    make: impl Fn(&'c mut C, &'c mut V, &'c mut S, usize) -> K,
) -> Vec<K> {
    cols.iter_mut()
        .zip(scs.iter_mut())
        .zip(xs.iter_mut())
        .enumerate()
        .filter(|(j, _)| on[*j])
        .map(|(j, ((c, sc), x))| make(c, x, sc, its[j]))
        .collect()
}

/// CG on `k` right-hand sides (`b[j]`, solutions in `x[j]`): [`super::cg`] column by column,
/// with the operator applied to the block.
///
/// # Errors
/// For the whole call: `k = 0`, `x.len() ≠ b.len()`, a column of the wrong length, a backend
/// failure. A column's own failure is in [`MultiInfo::columns`].
pub fn cg<T, B, A>(
    be: &B,
    a: &A,
    b: &[B::Vector],
    x: &mut [B::Vector],
    params: &SolveParams,
) -> Result<MultiInfo, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    pcg(be, a, &Identity, b, x, params)
}

/// Preconditioned CG on `k` right-hand sides ([`super::pcg`] column by column, operator and
/// preconditioner applied to the block).
///
/// # Errors
/// As [`cg`].
pub fn pcg<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &[B::Vector],
    x: &mut [B::Vector],
    params: &SolveParams,
) -> Result<MultiInfo, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    pcg_body(be, &Dyn(a), &Dyn(m), b, x, params)
}

/// [`pcg`] on trait objects: compiled once per element type and backend.
fn pcg_body<T: Scalar, B: BlockOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &[B::Vector],
    x: &mut [B::Vector],
    params: &SolveParams,
) -> Result<MultiInfo, SolveError> {
    let clock = Instant::now();
    let n = check_columns(be, a, m, b, x, params)?;
    let k = b.len();
    let kind = Kind::of(m);
    let vectors = if kind == Kind::Identity { 3 } else { 4 };
    preflight(be, "the multi-RHS CG workspace", n, vectors * k, 0, params)?;
    let (cols, scs) = allocate(be, k, n, params, || CgVectors::new(be, n, kind))?;
    let mut state = CgMulti { a, m, kind, cols };
    drive_multi(be, a, b, x, params, &mut state, scs, clock)
}

struct CgMulti<'a, V, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    cols: Vec<CgVectors<V>>,
}

impl<T, B, A, P> ColumnMethod<T, B> for CgMulti<'_, B::Vector, A, P>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn r_and_scratch(&mut self, j: usize) -> (&mut B::Vector, &mut B::Vector) {
        let c = &mut self.cols[j];
        (&mut c.r, &mut c.q)
    }

    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, j: usize, it: usize) -> crate::Result<()> {
        self.cols[j].start(be, self.m, self.kind, sc, it)
    }

    fn step(
        &mut self,
        be: &B,
        scs: &mut [B::Scalars],
        xs: &mut [B::Vector],
        active: &[usize],
        its: &[usize],
    ) -> crate::Result<()> {
        let on = mask(self.cols.len(), active);
        let (ps, mut qs) = gather(&mut self.cols, &on, |c| (&c.p, &mut c.q));
        self.a.apply_block(be, &ps, &mut qs)?;
        if self.kind != Kind::General {
            // As CgVectors::tail: Jacobi's z fused in, else z is r.
            let pre = self.kind.pre(self.m.inverse_diagonal());
            let mut cc = columns(&mut self.cols, scs, xs, &on, its, CgVectors::column);
            return be.cg_tail_block(&mut cc, pre);
        }
        {
            let mut cc = columns(&mut self.cols, scs, xs, &on, its, CgVectors::column);
            be.cg_update_r_block(&mut cc)?;
        }
        let (rs, mut zs) = gather(&mut self.cols, &on, |c| {
            let z = c.z.as_mut();
            (&c.r, z.expect("z is allocated for a preconditioner"))
        });
        self.m.apply_block(be, &rs, &mut zs)?;
        let mut cc = columns(&mut self.cols, scs, xs, &on, its, CgVectors::column);
        be.cg_update_xp_block(&mut cc)
    }
}

/// BiCGSTAB on `k` right-hand sides, right-preconditioned by `m` ([`super::bicgstab`] column by
/// column, operator and preconditioner applied to the block).
///
/// # Errors
/// As [`cg`].
pub fn bicgstab<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &[B::Vector],
    x: &mut [B::Vector],
    params: &SolveParams,
) -> Result<MultiInfo, SolveError>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    bicgstab_body(be, &Dyn(a), &Dyn(m), b, x, params)
}

/// [`bicgstab`] on trait objects: compiled once per element type and backend.
fn bicgstab_body<T: Scalar, B: BlockOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &[B::Vector],
    x: &mut [B::Vector],
    params: &SolveParams,
) -> Result<MultiInfo, SolveError> {
    let clock = Instant::now();
    let n = check_columns(be, a, m, b, x, params)?;
    let k = b.len();
    let kind = Kind::of(m);
    let vectors = if kind == Kind::Identity { 6 } else { 8 };
    preflight(
        be,
        "the multi-RHS BiCGSTAB workspace",
        n,
        vectors * k,
        0,
        params,
    )?;
    let (cols, scs) = allocate(be, k, n, params, || BicgVectors::new(be, n, kind))?;
    let mut state = BicgMulti {
        a,
        m,
        kind,
        fused: be.bicg_fused(n),
        cols,
    };
    drive_multi(be, a, b, x, params, &mut state, scs, clock)
}

struct BicgMulti<'a, V, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    fused: bool,
    cols: Vec<BicgVectors<V>>,
}

impl<V, A: ?Sized, P: ?Sized> BicgMulti<'_, V, A, P> {
    /// `to ← A·M⁻¹·from` for the active columns through `mid` (see [`after_pre`]): one block
    /// application of the preconditioner, if any, then one block product.
    fn op_after_pre<T, B>(&mut self, be: &B, on: &[bool], route: (BV, BV, BV)) -> crate::Result<()>
    where
        T: Scalar,
        B: BlockOps<T, Vector = V>,
        A: LinearOperator<T, B>,
        P: Preconditioner<T, B>,
    {
        let (pre, (from, to)) = after_pre(self.kind, route);
        if let Some((f, t)) = pre {
            let (xs, mut ys) = gather(&mut self.cols, on, |c| c.pair(f, t));
            self.m.apply_block(be, &xs, &mut ys)?;
        }
        let (xs, mut ys) = gather(&mut self.cols, on, |c| c.pair(from, to));
        self.a.apply_block(be, &xs, &mut ys)
    }
}

impl<T, B, A, P> ColumnMethod<T, B> for BicgMulti<'_, B::Vector, A, P>
where
    T: Scalar,
    B: BlockOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn r_and_scratch(&mut self, j: usize) -> (&mut B::Vector, &mut B::Vector) {
        let c = &mut self.cols[j];
        (&mut c.r, &mut c.t)
    }

    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, j: usize, it: usize) -> crate::Result<()> {
        let d = self.m.inverse_diagonal();
        self.cols[j].start(be, self.kind.pre(d), self.fused, sc, it)
    }

    fn step(
        &mut self,
        be: &B,
        scs: &mut [B::Scalars],
        xs: &mut [B::Vector],
        active: &[usize],
        its: &[usize],
    ) -> crate::Result<()> {
        let on = mask(self.cols.len(), active);
        // As BicgVectors' steps: Jacobi fused into the vector steps, a general preconditioner
        // applied between them.
        let pre = self.kind.pre(self.m.inverse_diagonal());
        let col = BicgVectors::column;
        if self.fused {
            // v = A·p̂; α and s (ŝ for Jacobi); t = A·ŝ; ω, x, r, β and the next p.
            self.op_after_pre(be, &on, (BV::P, BV::Phat, BV::V))?;
            be.bicg_alpha_s_block(&mut columns(&mut self.cols, scs, xs, &on, its, col), pre)?;
            self.op_after_pre(be, &on, (BV::S, BV::Shat, BV::T))?;
            return be
                .bicg_update_p_block(&mut columns(&mut self.cols, scs, xs, &on, its, col), pre);
        }
        // The separate order: p = r + β(p − ωv); p̂ = M⁻¹p; v = A·p̂.
        be.bicg_p_block(&mut columns(&mut self.cols, scs, xs, &on, its, col), pre)?;
        self.op_after_pre(be, &on, (BV::P, BV::Phat, BV::V))?;
        be.bicg_alpha_block(&mut columns(&mut self.cols, scs, xs, &on, its, col))?;
        // s = r − αv; ŝ = M⁻¹s; t = A·ŝ.
        be.bicg_s_block(&mut columns(&mut self.cols, scs, xs, &on, its, col), pre)?;
        self.op_after_pre(be, &on, (BV::S, BV::Shat, BV::T))?;
        be.bicg_omega_update_block(&mut columns(&mut self.cols, scs, xs, &on, its, col))
    }
}

/// Restarted GMRES(`restart`) on `k` right-hand sides, right-preconditioned by `m`
/// ([`super::gmres`] column by column, operator and preconditioner applied to the block; each
/// column keeps its own Krylov basis and cycle).
///
/// # Errors
/// As [`cg`], and `restart = 0`.
#[allow(clippy::too_many_arguments)]
pub fn gmres<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &[B::Vector],
    x: &mut [B::Vector],
    restart: usize,
    params: &SolveParams,
) -> Result<MultiInfo, SolveError>
where
    T: Scalar,
    B: BlockKrylovOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    gmres_body(be, &Dyn(a), &Dyn(m), b, x, restart, params)
}

/// [`gmres`] on trait objects: compiled once per element type and backend.
#[allow(clippy::too_many_arguments)]
fn gmres_body<T: Scalar, B: BlockKrylovOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &[B::Vector],
    x: &mut [B::Vector],
    restart: usize,
    params: &SolveParams,
) -> Result<MultiInfo, SolveError> {
    let clock = Instant::now();
    let n = check_columns(be, a, m, b, x, params)?;
    if restart == 0 {
        return Err(SolveError::DimensionMismatch {
            what: "GMRES restart length (must be at least 1)",
            expected: 1,
            found: 0,
        });
    }
    let k = b.len();
    let restart = restart.min(n.max(1));
    let vectors = 2 + usize::from(!m.is_identity()) + restart + 1;
    let small = crate::memory::bytes_of::<T>(crate::backend::GmresLayout { m: restart }.len());
    preflight(
        be,
        "the multi-RHS GMRES workspace (Krylov bases)",
        n,
        vectors * k,
        small * k as u64,
        params,
    )?;
    let identity = m.is_identity();
    let (cols, scs) = allocate(be, k, n, params, || {
        GmresVectors::new(be, n, restart, identity, params.basis)
    })?;
    let mut state = GmresMulti {
        a,
        m,
        b,
        restart,
        cols,
    };
    drive_multi(be, a, b, x, params, &mut state, scs, clock)
}

struct GmresMulti<'a, V, K, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    b: &'a [V],
    restart: usize,
    cols: Vec<GmresVectors<V, K>>,
}

impl<T, B, A, P> ColumnMethod<T, B> for GmresMulti<'_, B::Vector, B::Krylov, A, P>
where
    T: Scalar,
    B: BlockKrylovOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn r_and_scratch(&mut self, j: usize) -> (&mut B::Vector, &mut B::Vector) {
        let c = &mut self.cols[j];
        (&mut c.r, &mut c.q)
    }

    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, j: usize, it: usize) -> crate::Result<()> {
        self.cols[j].start(be, sc, it)
    }

    fn finish(&mut self, at: Step<'_, T, B>, j: usize, status: Status) -> crate::Result<()> {
        self.cols[j].finish(at.be, self.m, at.x, status, at.it, self.restart)
    }

    fn block_limit(&self, j: usize) -> usize {
        self.restart - self.cols[j].j
    }

    fn after_block(&mut self, at: Step<'_, T, B>, j: usize) -> crate::Result<()> {
        let (a, m, b) = (self.a, self.m, &self.b[j]);
        let Step { be, sc, x, it } = at;
        self.cols[j].end_of_cycle(be, a, m, b, sc, x, it, self.restart)
    }

    fn step(
        &mut self,
        be: &B,
        scs: &mut [B::Scalars],
        _xs: &mut [B::Vector],
        active: &[usize],
        its: &[usize],
    ) -> crate::Result<()> {
        let mut on = mask(self.cols.len(), active);
        for (o, c) in on.iter_mut().zip(&self.cols) {
            *o = *o && !c.halted;
        }
        let inv_diag = self.m.inverse_diagonal();
        // z = M⁻¹v_j (Jacobi: one scaling per column; otherwise the block application).
        if !self.m.is_identity() {
            let (vs, mut zs) = gather(&mut self.cols, &on, |c| {
                let GmresVectors { k, z, j, .. } = c;
                let (vj, _) = be.krylov_pair(k, *j);
                (vj, z.as_mut().expect("z is allocated for a preconditioner"))
            });
            match inv_diag {
                Some(d) => be.scale_block(d, &vs, &mut zs)?,
                None => self.m.apply_block(be, &vs, &mut zs)?,
            }
        }
        // v_{j+1} = A·z (or A·v_j).
        let (xs, mut ys) = gather(&mut self.cols, &on, |c| {
            let GmresVectors { k, z, j, .. } = c;
            let (vj, vnext) = be.krylov_pair(k, *j);
            (z.as_ref().unwrap_or(vj), vnext)
        });
        self.a.apply_block(be, &xs, &mut ys)?;
        let mut cc: Vec<GmresColumn<'_, B::Krylov, B::Scalars>> = self
            .cols
            .iter_mut()
            .zip(scs.iter_mut())
            .enumerate()
            .filter(|(jj, _)| on[*jj])
            .map(|(jj, (c, sc))| GmresColumn {
                k: &mut c.k,
                j: c.j,
                sc,
                it: its[jj],
            })
            .collect();
        be.gmres_arnoldi_block(&mut cc)?;
        drop(cc);
        // As GmresVectors::arnoldi: the next basis column.
        for (c, _) in self.cols.iter_mut().zip(&on).filter(|(_, &o)| o) {
            c.j += 1;
        }
        Ok(())
    }
}

/// The `k` columns of an `n × k` block stored in `layout` (`data` has `n·k` entries), as
/// separate vectors: how a front end hands a host block to the solvers here.
///
/// # Errors
/// [`crate::Error::InvalidInput`] for `k = 0` or a length that is not `n·k`.
pub fn split_columns<T: Copy>(
    data: &[T],
    n: usize,
    k: usize,
    layout: Layout,
) -> crate::Result<Vec<Vec<T>>> {
    if k == 0 {
        return Err(crate::Error::InvalidInput(
            "a block of right-hand sides needs at least one column (k = 0)".into(),
        ));
    }
    if Some(data.len()) != n.checked_mul(k) {
        return Err(crate::Error::InvalidInput(format!(
            "a block of {n} rows × {k} columns needs {} entries, found {}",
            n.saturating_mul(k),
            data.len()
        )));
    }
    Ok((0..k)
        .map(|j| match layout {
            Layout::ColMajor => data[j * n..(j + 1) * n].to_vec(),
            Layout::RowMajor => (0..n).map(|i| data[i * k + j]).collect(),
        })
        .collect())
}

/// The inverse of [`split_columns`]: `k` columns of length `n` as one block in `layout`.
///
/// # Panics
/// When the columns do not all have the same length.
pub fn join_columns<T: Copy + Default>(cols: &[Vec<T>], layout: Layout) -> Vec<T> {
    let k = cols.len();
    let n = cols.first().map_or(0, Vec::len);
    assert!(cols.iter().all(|c| c.len() == n), "columns of one length");
    let mut out = vec![T::default(); n * k];
    for (j, c) in cols.iter().enumerate() {
        for (i, &v) in c.iter().enumerate() {
            match layout {
                Layout::ColMajor => out[j * n + i] = v,
                Layout::RowMajor => out[i * k + j] = v,
            }
        }
    }
    out
}
