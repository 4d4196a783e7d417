//! BiCGSTAB (van der Vorst 1992) for unsymmetric systems, optionally right-preconditioned,
//! written once for every backend. See the [module docs](super) for the fused steps and the
//! departures from the textbook.
//!
//! Right preconditioning (Barrett et al., *Templates*, fig. 2.10): with `p̂ = M⁻¹p` and
//! `ŝ = M⁻¹s`, one iteration is
//!
//! | step | vector work | scalars (on the backend) |
//! |---|---|---|
//! | [`bicg_p`](super::VectorOps::bicg_p) | `p = r + β(p − ωv)` (and `p̂ = D⁻¹p`) | |
//! | `A.apply(p̂, v)` | the operator | |
//! | [`bicg_alpha`](super::VectorOps::bicg_alpha) | reads r̂, v | r̂ᵀv, α = ρ/r̂ᵀv |
//! | [`bicg_s`](super::VectorOps::bicg_s) | `s = r − αv` (and `ŝ = D⁻¹s`) | |
//! | `A.apply(ŝ, t)` | the operator | |
//! | [`bicg_omega`](super::VectorOps::bicg_omega) | reads t, s | tᵀs, tᵀt, ω |
//! | [`bicg_update`](super::VectorOps::bicg_update) | `x += αp̂ + ωŝ; r = s − ωt` | ‖r‖², ρ' = r̂ᵀr, β, tests |
//!
//! The shadow residual r̂ is the initial residual (reset to the true residual on a restart).
//!
//! **Fused order** (when [`VectorOps::bicg_fused`] says so; the GPU on small systems): `bicg_p`
//! moves to the end of the previous iteration (and of the start, where β = 0 and `p = v = 0`
//! make it `p = r`), so an iteration is `A·p̂`, [`bicg_alpha_s`](super::VectorOps::bicg_alpha_s),
//! `A·ŝ`, [`bicg_update_p`](super::VectorOps::bicg_update_p): four launches on the GPU instead
//! of seven. Nothing between the end of one iteration and the start of the next reads or writes
//! `p`, `r`, `v`, β or ω, and `bicg_p` is a no-op once the status is set, so the arithmetic,
//! iterations and residuals are those of the separate order.

use super::PrecondKind as Kind;
use super::{
    check_problem, drive, Fuse, LinearOperator, Method, Preconditioner, SolveError, SolveInfo,
    SolveParams, VectorOps,
};
use crate::scalar::Elem;

/// BiCGSTAB for a general (unsymmetric, possibly indefinite) `A`, right-preconditioned by `m`
/// (pass [`Identity`](super::Identity) for none, `precond::Jacobi` for the diagonal).
///
/// # Errors
/// [`SolveError`]: breakdown (ρ, r̂ᵀv or ω vanishing), non-convergence, NaN/Inf, dimension
/// mismatch, or a backend failure. On error `x` holds the last iterate.
pub fn bicgstab<T, B, A, P>(
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
    let clock = std::time::Instant::now();
    let n = check_problem(be, a, m, b, x)?;
    let kind = Kind::of::<T, B, P>(m);
    let vectors = if kind == Kind::Identity { 6 } else { 8 };
    super::preflight(be, "the BiCGSTAB workspace", n, vectors, 0, params)?;
    let pre = if kind == Kind::Identity {
        None
    } else {
        Some((be.zeros(n)?, be.zeros(n)?))
    };
    let mut state = BicgState {
        a,
        m,
        kind,
        fused: be.bicg_fused(n),
        r: be.zeros(n)?,
        rhat: be.zeros(n)?,
        p: be.zeros(n)?,
        v: be.zeros(n)?,
        s: be.zeros(n)?,
        t: be.zeros(n)?,
        pre,
    };
    let sc = be.scalars(n, params.max_iters)?;
    drive(be, a, b, x, params, &mut state, sc, clock)
}

struct BicgState<'a, T: Elem, B: VectorOps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    /// The fused order (module docs).
    fused: bool,
    r: B::Vector,
    rhat: B::Vector,
    p: B::Vector,
    v: B::Vector,
    s: B::Vector,
    t: B::Vector,
    /// `(p̂, ŝ)` when preconditioned.
    pre: Option<(B::Vector, B::Vector)>,
}

impl<T, B, A, P> Method<T, B> for BicgState<'_, T, B, A, P>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.r, &mut self.t)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        be.copy(&self.r, &mut self.rhat)?;
        be.set_zero(&mut self.p)?;
        be.set_zero(&mut self.v)?;
        // ‖r‖², ρ = r̂ᵀr = ‖r‖², ‖r̂‖², α = ω = 1, β = 0.
        be.cg_start(&self.r, Fuse::Identity, sc, it)?;
        if self.fused {
            // The first iteration's p (= r), which the fused order computes ahead.
            self.update_p(be, sc)?;
        }
        Ok(())
    }

    fn step(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        x: &mut B::Vector,
        it: usize,
    ) -> crate::Result<()> {
        if self.fused {
            return self.fused_step(be, sc, x, it);
        }
        let inv_diag = self.m.inverse_diagonal();
        // p = r + β(p − ωv); p̂ = M⁻¹p; v = A·p̂.
        match (self.kind, self.pre.as_mut()) {
            (Kind::Jacobi, Some((phat, _))) => {
                let inv_diag = inv_diag.expect("diagonal preconditioner");
                be.bicg_p(
                    &self.r,
                    &self.v,
                    &mut self.p,
                    Fuse::Jacobi { inv_diag, z: phat },
                    sc,
                )?;
                self.a.apply(be, phat, &mut self.v)?;
            }
            (Kind::General, Some((phat, _))) => {
                be.bicg_p(&self.r, &self.v, &mut self.p, Fuse::Separate(None), sc)?;
                self.m.apply(be, &self.p, phat)?;
                self.a.apply(be, phat, &mut self.v)?;
            }
            _ => {
                be.bicg_p(&self.r, &self.v, &mut self.p, Fuse::Identity, sc)?;
                self.a.apply(be, &self.p, &mut self.v)?;
            }
        }
        be.bicg_alpha(&self.rhat, &self.v, sc, it)?;
        // s = r − αv; ŝ = M⁻¹s; t = A·ŝ.
        match (self.kind, self.pre.as_mut()) {
            (Kind::Jacobi, Some((_, shat))) => {
                let inv_diag = inv_diag.expect("diagonal preconditioner");
                be.bicg_s(
                    &self.r,
                    &self.v,
                    &mut self.s,
                    Fuse::Jacobi { inv_diag, z: shat },
                    sc,
                )?;
                self.a.apply(be, shat, &mut self.t)?;
            }
            (Kind::General, Some((_, shat))) => {
                be.bicg_s(&self.r, &self.v, &mut self.s, Fuse::Separate(None), sc)?;
                self.m.apply(be, &self.s, shat)?;
                self.a.apply(be, shat, &mut self.t)?;
            }
            _ => {
                be.bicg_s(&self.r, &self.v, &mut self.s, Fuse::Identity, sc)?;
                self.a.apply(be, &self.s, &mut self.t)?;
            }
        }
        be.bicg_omega(&self.t, &self.s, sc, it)?;
        let (phat, shat) = match &self.pre {
            Some((ph, sh)) => (ph, sh),
            None => (&self.p, &self.s),
        };
        be.bicg_update(
            x,
            phat,
            shat,
            &self.s,
            &self.t,
            &mut self.r,
            &self.rhat,
            sc,
            it,
        )
    }
}

impl<T, B, A, P> BicgState<'_, T, B, A, P>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    /// `p = r + β(p − ωv)` and, for Jacobi, `p̂ = D⁻¹p` (the fused order's start).
    fn update_p(&mut self, be: &B, sc: &mut B::Scalars) -> crate::Result<()> {
        let fuse = match (self.kind, self.pre.as_mut()) {
            (Kind::Jacobi, Some((phat, _))) => Fuse::Jacobi {
                inv_diag: self.m.inverse_diagonal().expect("diagonal preconditioner"),
                z: phat,
            },
            (Kind::General, _) => Fuse::Separate(None),
            _ => Fuse::Identity,
        };
        be.bicg_p(&self.r, &self.v, &mut self.p, fuse, sc)
    }

    /// One iteration in the fused order: `v = A·p̂`, α and `s`, `t = A·ŝ`, ω, `x`, `r`, β and the
    /// next `p` (module docs).
    fn fused_step(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        x: &mut B::Vector,
        it: usize,
    ) -> crate::Result<()> {
        let inv_diag = self.m.inverse_diagonal();
        match (self.kind, self.pre.as_mut()) {
            (Kind::Jacobi, Some((phat, shat))) => {
                let inv_diag = inv_diag.expect("diagonal preconditioner");
                self.a.apply(be, phat, &mut self.v)?;
                let fuse = Fuse::Jacobi {
                    inv_diag,
                    z: &mut *shat,
                };
                be.bicg_alpha_s(&self.rhat, &self.r, &self.v, &mut self.s, fuse, sc, it)?;
                self.a.apply(be, shat, &mut self.t)?;
                be.bicg_update_p(
                    x,
                    Some(phat),
                    Some(inv_diag),
                    shat,
                    &self.s,
                    &self.t,
                    &mut self.r,
                    &self.rhat,
                    &mut self.p,
                    &self.v,
                    sc,
                    it,
                )
            }
            (Kind::General, Some((phat, shat))) => {
                self.m.apply(be, &self.p, phat)?;
                self.a.apply(be, phat, &mut self.v)?;
                let fuse = Fuse::Separate(None);
                be.bicg_alpha_s(&self.rhat, &self.r, &self.v, &mut self.s, fuse, sc, it)?;
                self.m.apply(be, &self.s, shat)?;
                self.a.apply(be, shat, &mut self.t)?;
                be.bicg_update_p(
                    x,
                    Some(phat),
                    None,
                    shat,
                    &self.s,
                    &self.t,
                    &mut self.r,
                    &self.rhat,
                    &mut self.p,
                    &self.v,
                    sc,
                    it,
                )
            }
            _ => {
                self.a.apply(be, &self.p, &mut self.v)?;
                let fuse = Fuse::Identity;
                be.bicg_alpha_s(&self.rhat, &self.r, &self.v, &mut self.s, fuse, sc, it)?;
                self.a.apply(be, &self.s, &mut self.t)?;
                be.bicg_update_p(
                    x,
                    None,
                    None,
                    &self.s,
                    &self.s,
                    &self.t,
                    &mut self.r,
                    &self.rhat,
                    &mut self.p,
                    &self.v,
                    sc,
                    it,
                )
            }
        }
    }
}
