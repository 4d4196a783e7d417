//! BiCGSTAB (van der Vorst 1992) for unsymmetric systems, optionally right-preconditioned,
//! written once for every backend. See the [module docs](super) for the fused steps and the
//! departures from the textbook.
//!
//! Right preconditioning (Barrett et al., *Templates*, fig. 2.10): with `p̂ = M⁻¹p` and
//! `ŝ = M⁻¹s`, one iteration is
//!
//! | step | vector work | scalars (on the backend) |
//! |---|---|---|
//! | [`bicg_p`](crate::backend::BicgSteps::bicg_p) | `p = r + β(p − ωv)` (and `p̂ = D⁻¹p`) | |
//! | `A.apply(p̂, v)` | the operator | |
//! | [`bicg_alpha`](crate::backend::BicgSteps::bicg_alpha) | reads r̂, v | r̂ᵀv, α = ρ/r̂ᵀv |
//! | [`bicg_s`](crate::backend::BicgSteps::bicg_s) | `s = r − αv` (and `ŝ = D⁻¹s`) | |
//! | `A.apply(ŝ, t)` | the operator | |
//! | [`bicg_omega`](crate::backend::BicgSteps::bicg_omega) | reads t, s | tᵀs, tᵀt, ω |
//! | [`bicg_update`](crate::backend::BicgSteps::bicg_update) | `x += αp̂ + ωŝ; r = s − ωt` | ‖r‖², ρ' = r̂ᵀr, β, tests |
//!
//! The shadow residual r̂ is the initial residual (reset to the true residual on a restart).
//!
//! **Fused order** (when [`BicgSteps::bicg_fused`](crate::backend::BicgSteps::bicg_fused) says so; the GPU on small systems): `bicg_p`
//! moves to the end of the previous iteration (and of the start, where β = 0 and `p = v = 0`
//! make it `p = r`), so an iteration is `A·p̂`, [`bicg_alpha_s`](crate::backend::BicgSteps::bicg_alpha_s),
//! `A·ŝ`, [`bicg_update_p`](crate::backend::BicgSteps::bicg_update_p): four launches on the GPU instead
//! of seven. Nothing between the end of one iteration and the start of the next reads or writes
//! `p`, `r`, `v`, β or ω, and `bicg_p` is a no-op once the status is set, so the arithmetic,
//! iterations and residuals are those of the separate order.

use super::PrecondKind as Kind;
use super::{check_problem, drive, Dyn, Method, SolveError, SolveInfo, SolveParams, Step};
use crate::backend::{BicgSteps, Fuse, LinearOperator, Pre, Preconditioner};
use crate::scalar::Elem;

/// BiCGSTAB for a general (unsymmetric, possibly indefinite) `A`, right-preconditioned by `m`
/// (pass [`Identity`](crate::backend::Identity) for none, `precond::Jacobi` for the diagonal).
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
    B: BicgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    bicgstab_body(be, &Dyn(a), &Dyn(m), b, x, params)
}

/// [`bicgstab`] on trait objects: compiled once per element type and backend.
fn bicgstab_body<T: Elem, B: BicgSteps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError> {
    let clock = std::time::Instant::now();
    let n = check_problem(be, a, m, b, x)?;
    let kind = Kind::of(m);
    let vectors = if kind == Kind::Identity { 6 } else { 8 };
    super::preflight(be, "the BiCGSTAB workspace", n, vectors, 0, params)?;
    let mut state = BicgState {
        a,
        m,
        kind,
        fused: be.bicg_fused(n),
        v: BicgVectors::new(be, n, kind)?,
    };
    let sc = be.scalars(n, params.max_iters)?;
    drive(be, a, b, x, params, &mut state, sc, clock)
}

struct BicgState<'a, T: Elem, B: BicgSteps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    kind: Kind,
    /// The fused order (module docs).
    fused: bool,
    v: BicgVectors<B::Vector>,
}

impl<T, B, A, P> Method<T, B> for BicgState<'_, T, B, A, P>
where
    T: Elem,
    B: BicgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.v.r, &mut self.v.t)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        let d = self.m.inverse_diagonal();
        self.v.start(be, self.kind.pre(d), self.fused, sc, it)
    }

    fn step(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        let Step { be, sc, x, it } = at;
        let pre = self.kind.pre(self.m.inverse_diagonal());
        if self.fused {
            // v = A·p̂; α and s (ŝ for Jacobi); t = A·ŝ; ω, x, r, β and the next p.
            self.op_after_pre(be, (BV::P, BV::Phat, BV::V))?;
            self.v.alpha_s(be, pre, sc, it)?;
            self.op_after_pre(be, (BV::S, BV::Shat, BV::T))?;
            return self.v.update_p(be, pre, x, sc, it);
        }
        // p = r + β(p − ωv); p̂ = M⁻¹p; v = A·p̂.
        self.v.p_step(be, pre, sc)?;
        self.op_after_pre(be, (BV::P, BV::Phat, BV::V))?;
        self.v.alpha(be, sc, it)?;
        // s = r − αv; ŝ = M⁻¹s; t = A·ŝ.
        self.v.s_step(be, pre, sc)?;
        self.op_after_pre(be, (BV::S, BV::Shat, BV::T))?;
        self.v.omega_update(be, x, sc, it)
    }
}

impl<T, B, A, P> BicgState<'_, T, B, A, P>
where
    T: Elem,
    B: BicgSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    /// `to ← A·M⁻¹·from` through `mid` (see [`after_pre`]).
    fn op_after_pre(&mut self, be: &B, route: (BV, BV, BV)) -> crate::Result<()> {
        let (pre, op) = after_pre(self.kind, route);
        if let Some((f, t)) = pre {
            let (f, t) = self.v.pair(f, t);
            self.m.apply(be, f, t)?;
        }
        let (f, t) = self.v.pair(op.0, op.1);
        self.a.apply(be, f, t)
    }
}

/// Which vector of a BiCGSTAB solve an operator or preconditioner reads or writes.
#[derive(Clone, Copy)]
pub(super) enum BV {
    P,
    V,
    S,
    T,
    Phat,
    Shat,
}

/// How `to ← A·M⁻¹·from` runs through `mid` (`p̂` or `ŝ`) for a preconditioner of `kind`: the
/// preconditioner's product, if any, then the operator's. A general `M` is applied here
/// (`mid ← M⁻¹·from`), Jacobi's `mid` was written by the vector step before, and without a
/// preconditioner `to ← A·from`.
#[allow(clippy::type_complexity)]
pub(super) fn after_pre(kind: Kind, (from, mid, to): (BV, BV, BV)) -> (Option<(BV, BV)>, (BV, BV)) {
    match kind {
        Kind::General => (Some((from, mid)), (mid, to)),
        Kind::Jacobi => (None, (mid, to)),
        Kind::Identity => (None, (from, to)),
    }
}

/// The vectors of one BiCGSTAB solve (one column of a block solve) and its vector steps
/// between the products, written once for the one-column and the multi-column BiCGSTAB.
pub(super) struct BicgVectors<V> {
    pub(super) r: V,
    pub(super) rhat: V,
    pub(super) p: V,
    pub(super) v: V,
    pub(super) s: V,
    pub(super) t: V,
    /// `(p̂, ŝ)` when preconditioned.
    pub(super) pre: Option<(V, V)>,
}

/// How a BiCGSTAB vector step meets the preconditioner: Jacobi writes `z` (`p̂` or `ŝ`) in the
/// same pass, a general one is applied separately afterwards.
fn fuse<'f, V>(pre: Pre<'f, V>, z: Option<&'f mut V>) -> Fuse<'f, V> {
    match (pre, z) {
        (Pre::Jacobi(inv_diag), Some(z)) => Fuse::Jacobi { inv_diag, z },
        (Pre::Separate, _) => Fuse::Separate(None),
        _ => Fuse::Identity,
    }
}

impl<V> BicgVectors<V> {
    /// The vectors of length `n` for a preconditioner of `kind`.
    pub(super) fn new<T: Elem, B: BicgSteps<T, Vector = V>>(
        be: &B,
        n: usize,
        kind: Kind,
    ) -> crate::Result<Self> {
        Ok(BicgVectors {
            r: be.zeros(n)?,
            rhat: be.zeros(n)?,
            p: be.zeros(n)?,
            v: be.zeros(n)?,
            s: be.zeros(n)?,
            t: be.zeros(n)?,
            pre: if kind == Kind::Identity {
                None
            } else {
                Some((be.zeros(n)?, be.zeros(n)?))
            },
        })
    }

    /// This column's vectors with its solution `x`, slots and iteration, for a block step
    /// ([`crate::backend::BlockOps`]).
    pub(super) fn column<'a, S>(
        &'a mut self,
        x: &'a mut V,
        sc: &'a mut S,
        it: usize,
    ) -> crate::backend::BicgColumn<'a, V, S> {
        let BicgVectors {
            r,
            rhat,
            p,
            v,
            s,
            t,
            pre,
        } = self;
        crate::backend::BicgColumn {
            x,
            r,
            rhat,
            p,
            v,
            s,
            t,
            pre: pre.as_mut().map(|(a, b)| (a, b)),
            sc,
            it,
        }
    }

    /// `(&from, &mut to)` for two different vectors.
    pub(super) fn pair(&mut self, from: BV, to: BV) -> (&V, &mut V) {
        let BicgVectors {
            p, v, s, t, pre, ..
        } = self;
        let (ph, sh) = match pre {
            Some((a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
        let mut slots = [Some(p), Some(v), Some(s), Some(t), ph, sh];
        let (fi, ti) = (from as usize, to as usize);
        assert_ne!(fi, ti, "a BiCGSTAB vector is not its own product");
        let to_ref = slots[ti].take().expect("preconditioned");
        let from_ref: &V = slots[fi].take().expect("preconditioned");
        (from_ref, to_ref)
    }

    /// (Re)starts from the residual in `r`: `r̂ = r`, `p = v = 0`, ‖r‖², ρ = r̂ᵀr = ‖r‖², ‖r̂‖²,
    /// α = ω = 1, β = 0; in the fused order also the first iteration's `p` (= r), which that
    /// order computes ahead.
    pub(super) fn start<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        pre: Pre<'_, V>,
        fused: bool,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        be.copy(&self.r, &mut self.rhat)?;
        be.set_zero(&mut self.p)?;
        be.set_zero(&mut self.v)?;
        be.cg_start(&self.r, Fuse::Identity, sc, it)?;
        if fused {
            self.p_step(be, pre, sc)?;
        }
        Ok(())
    }

    /// `p = r + β(p − ωv)` and, for Jacobi, `p̂ = D⁻¹p`.
    pub(super) fn p_step<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        pre: Pre<'_, V>,
        sc: &mut B::Scalars,
    ) -> crate::Result<()> {
        let fuse = fuse(pre, self.pre.as_mut().map(|(p, _)| p));
        be.bicg_p(&self.r, &self.v, &mut self.p, fuse, sc)
    }

    /// α = ρ / r̂ᵀv.
    pub(super) fn alpha<T: Elem, B: BicgSteps<T, Vector = V>>(
        &self,
        be: &B,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        be.bicg_alpha(&self.rhat, &self.v, sc, it)
    }

    /// `s = r − αv` and, for Jacobi, `ŝ = D⁻¹s`.
    pub(super) fn s_step<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        pre: Pre<'_, V>,
        sc: &mut B::Scalars,
    ) -> crate::Result<()> {
        let fuse = fuse(pre, self.pre.as_mut().map(|(_, s)| s));
        be.bicg_s(&self.r, &self.v, &mut self.s, fuse, sc)
    }

    /// ω = tᵀs / tᵀt, then `x += αp̂ + ωŝ`, `r = s − ωt`, ‖r‖² and ρ, β.
    pub(super) fn omega_update<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        x: &mut V,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
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

    /// The fused order's α and `s` (and Jacobi's `ŝ`), after `v = A·p̂`.
    pub(super) fn alpha_s<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        mode: Pre<'_, V>,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        let fuse = fuse(mode, self.pre.as_mut().map(|(_, s)| s));
        be.bicg_alpha_s(&self.rhat, &self.r, &self.v, &mut self.s, fuse, sc, it)
    }

    /// The fused order's end of an iteration, after `t = A·ŝ`: ω, `x`, `r`, β and the next `p`
    /// (and Jacobi's `p̂`).
    pub(super) fn update_p<T: Elem, B: BicgSteps<T, Vector = V>>(
        &mut self,
        be: &B,
        mode: Pre<'_, V>,
        x: &mut V,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        let BicgVectors {
            r,
            rhat,
            p,
            v,
            s,
            t,
            pre,
        } = self;
        // Unpreconditioned, p̂ is p and ŝ is s.
        let (phat, d, shat) = match pre {
            Some((phat, shat)) => {
                let d = match mode {
                    Pre::Jacobi(d) => Some(d),
                    _ => None,
                };
                (Some(phat), d, &*shat)
            }
            None => (None, None, &*s),
        };
        be.bicg_update_p(x, phat, d, shat, s, t, r, rhat, p, v, sc, it)
    }
}
