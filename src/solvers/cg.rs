//! Conjugate gradient (Hestenes and Stiefel 1952) and preconditioned CG, written once for every
//! backend. See the [module docs](super) for the fused steps and the departures from the
//! textbook.
//!
//! Per iteration, with `q = A·p`:
//!
//! | step | vector work | scalars (on the backend) |
//! |---|---|---|
//! | `A.apply(p, q)` | the operator | |
//! | [`cg_alpha`](crate::backend::CgSteps::cg_alpha) | reads p, q | pᵀq, α = ρ/pᵀq, breakdown test |
//! | [`cg_update_r`](crate::backend::CgSteps::cg_update_r) | `r −= αq` (and `z = D⁻¹r`) | ‖r‖², rᵀz, β, convergence test |
//! | [`cg_update_xp`](crate::backend::CgSteps::cg_update_xp) | `x += αp; p = z + βp` | |
//!
//! That is 10 vector passes of `n` elements per iteration without preconditioner (read p, q; read
//! r, q, write r; read x, p, r, write x, p), 12 with Jacobi, and no host round-trip.

use super::drive::{drive_with, Exact, Truth};
use super::PrecondKind as Kind;
use super::{check_problem, Dyn, Method, SolveError, SolveInfo, SolveParams, Step};
use crate::backend::recur::{self, Slot};
use crate::backend::Identity;
use crate::backend::{CgSteps, Fuse, LinearOperator, Preconditioner};
use crate::scalar::Elem;

/// Conjugate gradient for a symmetric positive definite `A` (Hermitian positive definite for a
/// complex `T`: the inner products are `xᴴy`): solves `A·x = b`.
///
/// `x` is the initial guess when [`SolveParams::initial_guess`] says so, and holds the solution
/// (or the last iterate, on error) afterwards. A matrix that is not positive definite is reported
/// as [`SolveError::Breakdown`] when `pᵀAp ≤ 0` shows it.
///
/// # Errors
/// [`SolveError`]: breakdown, non-convergence, NaN/Inf, dimension mismatch, or a backend failure.
pub fn cg<T, B, A>(
    be: &B,
    a: &A,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: CgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    pcg(be, a, &Identity, b, x, params)
}

/// Preconditioned conjugate gradient with the SPD preconditioner `m` (for example
/// `precond::Jacobi`). A diagonal preconditioner is fused into the vector updates; any
/// other is applied once per iteration through [`Preconditioner::apply`](crate::backend::Preconditioner::apply).
///
/// # Errors
/// As [`cg`].
pub fn pcg<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: CgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    cg_family(be, &Dyn(a), &Dyn(m), b, x, params, false)
}

/// COCG, the conjugate orthogonal conjugate gradient of van der Vorst and Melissen (1990), for a
/// complex **symmetric** `A = Aᵀ` (not Hermitian: Helmholtz with absorption, electromagnetics):
/// CG with the bilinear form `xᵀy` in place of `xᴴy` for ρ and pᵀAp, so that its short
/// recurrence needs symmetry, not definiteness. Convergence is still measured by `‖r‖ = √(rᴴr)`.
/// For a real `T` it is [`cg`] exactly.
///
/// It may break down (`pᵀAp = 0` for a nonzero `p`, reported as [`SolveError::Breakdown`]);
/// on the problems it is made for it needs about as many products with `A` as GMRES without
/// restarts, at the cost of CG: one product per iteration, where BiCGSTAB needs two.
///
/// # Errors
/// As [`cg`].
pub fn cocg<T, B, A>(
    be: &B,
    a: &A,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: CgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    pcocg(be, a, &Identity, b, x, params)
}

/// [`cocg`] with a complex symmetric preconditioner `m` (for example `precond::Jacobi`).
///
/// # Errors
/// As [`cg`].
pub fn pcocg<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: CgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    cg_family(be, &Dyn(a), &Dyn(m), b, x, params, true)
}

/// The one body of CG, PCG, COCG and PCOCG: `bilinear` selects the form of ρ and pᵀAp
/// ([`Slot::Form`](crate::backend::Slot::Form)).
/// On trait objects, so that it is compiled once per element type and backend.
#[allow(clippy::too_many_arguments)]
fn cg_family<T: Elem, B: CgSteps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    bilinear: bool,
) -> Result<SolveInfo, SolveError> {
    let clock = std::time::Instant::now();
    check_problem(be, a, m, b, x)?;
    cg_run(be, a, m, &mut Exact { a, b }, x, params, bilinear, clock)
}

/// The body of [`cg_family`] after its checks, with the true residuals of `truth` (the exact
/// operator's, or an `f64` iterate's under an `f32` recurrence: `solvers::narrow`). `clock`
/// was started at the entry of the public function.
#[allow(clippy::too_many_arguments)]
pub(super) fn cg_run<T: Elem, B: CgSteps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    truth: &mut dyn Truth<T, B>,
    x: &mut B::Vector,
    params: &SolveParams,
    bilinear: bool,
    clock: std::time::Instant,
) -> Result<SolveInfo, SolveError> {
    let n = a.nrows();
    let kind = Kind::of(m);
    let vectors = if kind == Kind::Identity { 3 } else { 4 };
    super::preflight(be, "the CG workspace", n, vectors, 0, params)?;
    // The whole workspace, before the first iteration.
    let mut state = CgState {
        a,
        m,
        kind,
        v: CgVectors::new(be, n, kind)?,
    };
    let mut sc = be.scalars(n, params.max_iters)?;
    if bilinear {
        be.write_slots(&mut sc, &[(Slot::Form, recur::real(1.0))])?;
    }
    drive_with(be, a, truth, x, params, &mut state, sc, clock)
}

struct CgState<'a, T: Elem, B: CgSteps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    v: CgVectors<B::Vector>,
}

impl<T, B, A, P> Method<T, B> for CgState<'_, T, B, A, P>
where
    T: Elem,
    B: CgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.v.r, &mut self.v.q)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        self.v.start(be, self.m, self.kind, sc, it)
    }

    fn can_replace(&self) -> bool {
        true
    }

    fn replace_residual(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        self.v.take_true_residual(be, self.m, self.kind, sc, it)
    }

    fn step(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        let Step { be, sc, x, it } = at;
        let v = &mut self.v;
        self.a.apply(be, &v.p, &mut v.q)?;
        if self.kind != Kind::General {
            return v.tail(be, self.m, self.kind, x, sc, it);
        }
        v.update_r(be, sc, it)?;
        let z = v.z.as_mut().expect("z is allocated for a preconditioner");
        self.m.apply(be, &v.r, z)?;
        v.update_xp(be, x, sc, it)
    }
}

/// The vectors of one CG solve (one column of a block solve) and its steps around the operator
/// and the preconditioner, written once for the one-column and the multi-column CG.
pub(super) struct CgVectors<V> {
    pub(super) r: V,
    /// `M⁻¹r`; absent without a preconditioner (`z` is `r`).
    pub(super) z: Option<V>,
    pub(super) p: V,
    /// `A·p`.
    pub(super) q: V,
}

impl<V> CgVectors<V> {
    /// The vectors of length `n` for a preconditioner of `kind`.
    pub(super) fn new<T: Elem, B: CgSteps<T, Vector = V>>(
        be: &B,
        n: usize,
        kind: Kind,
    ) -> crate::Result<Self> {
        Ok(CgVectors {
            r: be.zeros(n)?,
            z: if kind == Kind::Identity {
                None
            } else {
                Some(be.zeros(n)?)
            },
            p: be.zeros(n)?,
            q: be.zeros(n)?,
        })
    }

    /// This column's vectors with its solution `x`, slots and iteration, for a block step
    /// ([`crate::backend::BlockOps`]).
    pub(super) fn column<'a, S>(
        &'a mut self,
        x: &'a mut V,
        sc: &'a mut S,
        it: usize,
    ) -> crate::backend::CgColumn<'a, V, S> {
        let CgVectors { r, z, p, q } = self;
        crate::backend::CgColumn {
            x,
            p,
            q,
            r,
            z: z.as_mut(),
            sc,
            it,
        }
    }

    /// (Re)starts from the residual in `r`: `z = M⁻¹r` (fused with the reductions for Jacobi),
    /// ‖r‖², ρ, and `p = z` (`p = r` without a preconditioner).
    pub(super) fn start<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        kind: Kind,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: CgSteps<T, Vector = V>,
        P: Preconditioner<T, B> + ?Sized,
    {
        self.restart_r(be, m, kind, sc, it)?;
        let CgVectors { r, z, p, .. } = self;
        be.copy(z.as_ref().unwrap_or(&*r), p)
    }

    /// A reliable update: the true residual is in `q`, the recursive one in `r`. The search
    /// direction `p = z + β·p_prev` was built from the recursive `z = M⁻¹r`; it becomes
    /// `p + M⁻¹(q − r)`, the direction the true residual gives with the same β (so that
    /// `pᵀr = zᵀr` holds again up to the new residual's component along the previous direction,
    /// and α = ρ/pᵀAp stays consistent); then `r ← q` and [`CgVectors::restart_r`].
    pub(super) fn take_true_residual<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        kind: Kind,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: CgSteps<T, Vector = V>,
        P: Preconditioner<T, B> + ?Sized,
    {
        let CgVectors { r, z, p, q } = self;
        match (kind, z.as_mut()) {
            (Kind::Jacobi, Some(z)) => {
                let inv_diag = m.inverse_diagonal().expect("diagonal preconditioner");
                be.axpby(T::one(), q, -T::one(), r)?;
                be.vmul(T::one(), inv_diag, r, T::zero(), z)?;
                be.axpy(T::one(), z, p)?;
            }
            (Kind::General, Some(z)) => {
                be.axpby(T::one(), q, -T::one(), r)?;
                m.apply(be, r, z)?;
                be.axpy(T::one(), z, p)?;
            }
            _ => be.axpbypcz(T::one(), q, -T::one(), r, T::one(), p)?,
        }
        be.copy(q, r)?;
        self.restart_r(be, m, kind, sc, it)
    }

    /// Takes up the residual in `r` (a start, or a reliable update): `z = M⁻¹r` (fused with the
    /// reductions for Jacobi), ‖r‖² and ρ = rᵀz.
    pub(super) fn restart_r<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        kind: Kind,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: CgSteps<T, Vector = V>,
        P: Preconditioner<T, B> + ?Sized,
    {
        let CgVectors { r, z, .. } = self;
        match (kind, z.as_mut()) {
            (Kind::Jacobi, Some(z)) => {
                let inv_diag = m.inverse_diagonal().expect("diagonal preconditioner");
                be.cg_start(r, Fuse::Jacobi { inv_diag, z }, sc, it)
            }
            (Kind::General, Some(z)) => {
                m.apply(be, r, z)?;
                be.cg_start(r, Fuse::Separate(Some(z)), sc, it)
            }
            _ => be.cg_start(r, Fuse::Identity, sc, it),
        }
    }

    /// The iteration after `q = A·p` without a general preconditioner: `cg_alpha`,
    /// `cg_update_r` and `cg_update_xp` as one call ([`CgSteps::cg_tail`](crate::backend::CgSteps::cg_tail)), Jacobi's `z`
    /// fused in.
    pub(super) fn tail<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        kind: Kind,
        x: &mut V,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: CgSteps<T, Vector = V>,
        P: Preconditioner<T, B> + ?Sized,
    {
        let CgVectors { r, z, p, q } = self;
        let fuse = match (kind, m.inverse_diagonal(), z.as_mut()) {
            (Kind::Jacobi, Some(inv_diag), Some(z)) => Fuse::Jacobi { inv_diag, z },
            _ => Fuse::Identity,
        };
        be.cg_tail(x, p, q, r, fuse, sc, it)
    }

    /// With a general preconditioner, before it is applied to `r`: α and `r −= αq`.
    pub(super) fn update_r<T: Elem, B: CgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        be.cg_alpha(&self.p, &self.q, sc, it)?;
        be.cg_update_r(&self.q, &mut self.r, Fuse::Separate(None), sc, it)
    }

    /// With a general preconditioner, after `z = M⁻¹r`: ρ, β, `x += αp` and `p = z + βp`.
    pub(super) fn update_xp<T: Elem, B: CgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        x: &mut V,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        let z = self
            .z
            .as_ref()
            .expect("z is allocated for a preconditioner");
        be.cg_rho(&self.r, z, sc, it)?;
        be.cg_update_xp(x, &mut self.p, z, sc, it)
    }
}
