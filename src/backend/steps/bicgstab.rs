//! BiCGSTAB's steps ([`BicgSteps`]): per iteration `bicg_p` (`p = r + β(p − ωv)`),
//! `bicg_alpha` (r̂ᵀv, α), `bicg_s` (`s = r − αv`), `bicg_omega` (tᵀs, tᵀt, ω) and `bicg_update`
//! (`x += αp̂ + ωŝ; r = s − ωt`, ‖r‖², ρ', β, the tests), or the fused order `bicg_alpha_s`,
//! `bicg_update_p` where the backend asks for it ([`BicgSteps::bicg_fused`]).

use super::{slots, Fuse};
use crate::backend::recur::{self, Slot};
use crate::backend::CgSteps;
use crate::scalar::Elem;

/// The steps of BiCGSTAB on a backend, with default bodies from the core of
/// [`VectorOps`](crate::backend::VectorOps) (see the [module docs](super)). BiCGSTAB starts as
/// CG does ([`CgSteps::cg_start`]).
pub trait BicgSteps<T: Elem>: CgSteps<T> {
    /// BiCGSTAB: `p ← r + β(p − ωv)`, and `p̂ = M⁻¹p` when `fuse` is Jacobi.
    fn bicg_p(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        p: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()> {
        let (s, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        // p ← r + β(p − ωv)
        self.axpby(-s[Slot::Omega as usize], v, T::one(), p)?;
        self.axpby(T::one(), r, s[Slot::Beta as usize], p)?;
        if let Fuse::Jacobi { inv_diag, z } = fuse {
            self.vmul(T::one(), inv_diag, p, T::zero(), z)?;
        }
        Ok(())
    }

    /// BiCGSTAB: r̂ᵀv, then [`recur::bicg_alpha`].
    fn bicg_alpha(
        &self,
        rhat: &Self::Vector,
        v: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        if slots(self, sc)?.1 {
            return Ok(());
        }
        let rv = self.dot(rhat, v, sc)?;
        self.update_slots(sc, |s, _| recur::bicg_alpha(s, rv, iteration))
    }

    /// BiCGSTAB: `s ← r − αv`, and `ŝ = M⁻¹s` when `fuse` is Jacobi.
    fn bicg_s(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        s: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()> {
        let (sl, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        self.axpbypcz(T::one(), r, -sl[Slot::Alpha as usize], v, T::zero(), s)?;
        if let Fuse::Jacobi { inv_diag, z } = fuse {
            self.vmul(T::one(), inv_diag, s, T::zero(), z)?;
        }
        Ok(())
    }

    /// BiCGSTAB: tᵀs and tᵀt, then [`recur::bicg_omega`].
    fn bicg_omega(
        &self,
        t: &Self::Vector,
        s: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        if slots(self, sc)?.1 {
            return Ok(());
        }
        let ts = self.dot(t, s, sc)?;
        let tt = self.dot(t, t, sc)?;
        self.update_slots(sc, |s, _| recur::bicg_omega(s, ts, tt, iteration))
    }

    /// BiCGSTAB: `x ← x + αp̂ + ωŝ; r ← s − ωt`, then [`recur::bicg_update`] with ‖r‖² and r̂ᵀr.
    #[allow(clippy::too_many_arguments)]
    fn bicg_update(
        &self,
        x: &mut Self::Vector,
        phat: &Self::Vector,
        shat: &Self::Vector,
        s: &Self::Vector,
        t: &Self::Vector,
        r: &mut Self::Vector,
        rhat: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (sl, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        let (alpha, omega) = (sl[Slot::Alpha as usize], sl[Slot::Omega as usize]);
        self.axpbypcz(alpha, phat, omega, shat, T::one(), x)?;
        self.axpbypcz(T::one(), s, -omega, t, T::zero(), r)?;
        let rr = self.dot(r, r, sc)?;
        let rho = self.dot(rhat, r, sc)?;
        self.update_slots(sc, |s, h| recur::bicg_update(s, h, rr, rho, iteration))
    }

    /// Whether BiCGSTAB on vectors of length `n` runs its fused step order
    /// ([`BicgSteps::bicg_alpha_s`], [`BicgSteps::bicg_update_p`]): `p`'s update moves from the
    /// start of an iteration to the end of the previous one (and of the (re)start), where a
    /// backend can fuse it with the reductions before it. The default, false, keeps the
    /// separate steps (the CPU's order is unchanged).
    fn bicg_fused(&self, n: usize) -> bool {
        let _ = n;
        false
    }

    /// BiCGSTAB: [`BicgSteps::bicg_alpha`] then [`BicgSteps::bicg_s`] (`s ← r − αv`, `ŝ` by
    /// `fuse`). The default issues the two steps.
    #[allow(clippy::too_many_arguments)]
    fn bicg_alpha_s(
        &self,
        rhat: &Self::Vector,
        r: &Self::Vector,
        v: &Self::Vector,
        s: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        bicg_alpha_s(self, rhat, r, v, s, fuse, sc, iteration)
    }

    /// BiCGSTAB: [`BicgSteps::bicg_omega`], [`BicgSteps::bicg_update`], then the next
    /// iteration's [`BicgSteps::bicg_p`]
    /// (`p ← r + β(p − ωv)`). `phat` is `p̂` (read by `x`'s update; `None`: `p̂` is `p`); with
    /// `inv_diag` (Jacobi) the new `p̂ = D⁻¹p` is written into it, without (a separate
    /// preconditioner) it is left for [`Preconditioner::apply`]. The default issues the two
    /// steps.
    #[allow(clippy::too_many_arguments)]
    fn bicg_update_p(
        &self,
        x: &mut Self::Vector,
        phat: Option<&mut Self::Vector>,
        inv_diag: Option<&Self::Vector>,
        shat: &Self::Vector,
        s: &Self::Vector,
        t: &Self::Vector,
        r: &mut Self::Vector,
        rhat: &Self::Vector,
        p: &mut Self::Vector,
        v: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        bicg_update_p(
            self, x, phat, inv_diag, shat, s, t, r, rhat, p, v, sc, iteration,
        )
    }
}

/// [`BicgSteps::bicg_alpha_s`] as two steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bicg_alpha_s<T: Elem, B: BicgSteps<T> + ?Sized>(
    be: &B,
    rhat: &B::Vector,
    r: &B::Vector,
    v: &B::Vector,
    s: &mut B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
    iteration: usize,
) -> crate::Result<()> {
    be.bicg_alpha(rhat, v, sc, iteration)?;
    be.bicg_s(r, v, s, fuse, sc)
}

/// [`BicgSteps::bicg_update_p`] as two steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bicg_update_p<T: Elem, B: BicgSteps<T> + ?Sized>(
    be: &B,
    x: &mut B::Vector,
    phat: Option<&mut B::Vector>,
    inv_diag: Option<&B::Vector>,
    shat: &B::Vector,
    s: &B::Vector,
    t: &B::Vector,
    r: &mut B::Vector,
    rhat: &B::Vector,
    p: &mut B::Vector,
    v: &B::Vector,
    sc: &mut B::Scalars,
    iteration: usize,
) -> crate::Result<()> {
    be.bicg_omega(t, s, sc, iteration)?;
    match phat {
        None => {
            be.bicg_update(x, p, shat, s, t, r, rhat, sc, iteration)?;
            be.bicg_p(r, v, p, Fuse::Identity, sc)
        }
        Some(ph) => {
            be.bicg_update(x, ph, shat, s, t, r, rhat, sc, iteration)?;
            let fuse = match inv_diag {
                Some(inv_diag) => Fuse::Jacobi { inv_diag, z: ph },
                None => Fuse::Separate(None),
            };
            be.bicg_p(r, v, p, fuse, sc)
        }
    }
}
