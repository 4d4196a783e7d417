//! Conjugate gradient (Hestenes and Stiefel 1952) and preconditioned CG, written once for every
//! backend. See the [module docs](super) for the fused steps and the departures from the
//! textbook.
//!
//! Per iteration, with `q = A·p`:
//!
//! | step | vector work | scalars (on the backend) |
//! |---|---|---|
//! | `A.apply(p, q)` | the operator | |
//! | [`cg_alpha`](super::VectorOps::cg_alpha) | reads p, q | pᵀq, α = ρ/pᵀq, breakdown test |
//! | [`cg_update_r`](super::VectorOps::cg_update_r) | `r −= αq` (and `z = D⁻¹r`) | ‖r‖², rᵀz, β, convergence test |
//! | [`cg_update_xp`](super::VectorOps::cg_update_xp) | `x += αp; p = z + βp` | |
//!
//! That is 10 vector passes of `n` elements per iteration without preconditioner (read p, q; read
//! r, q, write r; read x, p, r, write x, p), 12 with Jacobi, and no host round-trip.

use super::PrecondKind as Kind;
use super::{
    check_problem, drive, Fuse, LinearOperator, Method, Preconditioner, SolveError, SolveInfo,
    SolveParams, VectorOps,
};
use crate::backend::recur::{self, Slot};
use crate::backend::Identity;
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
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    pcg(be, a, &Identity, b, x, params)
}

/// Preconditioned conjugate gradient with the SPD preconditioner `m` (for example
/// `precond::Jacobi`). A diagonal preconditioner is fused into the vector updates; any
/// other is applied once per iteration through [`Preconditioner::apply`].
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
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    cg_family(be, a, m, b, x, params, false)
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
    B: VectorOps<T>,
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
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    cg_family(be, a, m, b, x, params, true)
}

/// The one body of CG, PCG, COCG and PCOCG: `bilinear` selects the form of ρ and pᵀAp
/// ([`Slot::Form`]).
fn cg_family<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    bilinear: bool,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    let clock = std::time::Instant::now();
    let n = check_problem(be, a, m, b, x)?;
    let kind = Kind::of::<T, B, P>(m);
    let vectors = if kind == Kind::Identity { 3 } else { 4 };
    super::preflight(be, "the CG workspace", n, vectors, 0, params)?;
    // The whole workspace, before the first iteration.
    let mut state = CgState {
        a,
        m,
        kind,
        r: be.zeros(n)?,
        z: if kind == Kind::Identity {
            None
        } else {
            Some(be.zeros(n)?)
        },
        p: be.zeros(n)?,
        q: be.zeros(n)?,
    };
    let mut sc = be.scalars(n, params.max_iters)?;
    if bilinear {
        be.write_slots(&mut sc, &[(Slot::Form, recur::real(1.0))])?;
    }
    drive(be, a, b, x, params, &mut state, sc, clock)
}

struct CgState<'a, T: Elem, B: VectorOps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    r: B::Vector,
    z: Option<B::Vector>,
    p: B::Vector,
    q: B::Vector,
}

impl<T, B, A, P> Method<T, B> for CgState<'_, T, B, A, P>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.r, &mut self.q)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        match self.kind {
            Kind::Identity => {
                be.cg_start(&self.r, Fuse::Identity, sc, it)?;
                be.copy(&self.r, &mut self.p)
            }
            Kind::Jacobi => {
                let z = self
                    .z
                    .as_mut()
                    .expect("z is allocated for a preconditioner");
                let inv_diag = self.m.inverse_diagonal().expect("diagonal preconditioner");
                be.cg_start(&self.r, Fuse::Jacobi { inv_diag, z }, sc, it)?;
                be.copy(z, &mut self.p)
            }
            Kind::General => {
                let z = self
                    .z
                    .as_mut()
                    .expect("z is allocated for a preconditioner");
                self.m.apply(be, &self.r, z)?;
                be.cg_start(&self.r, Fuse::Separate(Some(z)), sc, it)?;
                be.copy(z, &mut self.p)
            }
        }
    }

    fn step(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        x: &mut B::Vector,
        it: usize,
    ) -> crate::Result<()> {
        self.a.apply(be, &self.p, &mut self.q)?;
        // cg_alpha, cg_update_r, cg_update_xp: one fused call (VectorOps::cg_tail) where the
        // preconditioner allows it.
        match self.kind {
            Kind::Identity => {
                be.cg_tail(x, &mut self.p, &self.q, &mut self.r, Fuse::Identity, sc, it)
            }
            Kind::Jacobi => {
                let z = self
                    .z
                    .as_mut()
                    .expect("z is allocated for a preconditioner");
                let inv_diag = self.m.inverse_diagonal().expect("diagonal preconditioner");
                let fuse = Fuse::Jacobi { inv_diag, z };
                be.cg_tail(x, &mut self.p, &self.q, &mut self.r, fuse, sc, it)
            }
            Kind::General => {
                be.cg_alpha(&self.p, &self.q, sc, it)?;
                let z = self
                    .z
                    .as_mut()
                    .expect("z is allocated for a preconditioner");
                be.cg_update_r(&self.q, &mut self.r, Fuse::Separate(None), sc, it)?;
                self.m.apply(be, &self.r, z)?;
                be.cg_rho(&self.r, z, sc, it)?;
                be.cg_update_xp(x, &mut self.p, z, sc, it)
            }
        }
    }
}
