//! CG's steps ([`CgSteps`]): per iteration, with `q = A·p`, `cg_alpha` (pᵀq, α = ρ/pᵀq, the
//! breakdown test), `cg_update_r` (`r −= αq`, `z = D⁻¹r`, ‖r‖², rᵀz, β, the convergence test)
//! and `cg_update_xp` (`x += αp; p = z + βp`), or `cg_tail` for the three; `cg_start` (re)starts
//! CG and BiCGSTAB from a residual.

use super::{form_dot, fused_rz, slots, Fuse};
use crate::backend::recur::{self, Slot};
use crate::backend::VectorOps;
use crate::scalar::{Elem, Scalar};

/// The steps of the CG family (CG, PCG, COCG) on a backend, with default bodies from the core of
/// [`VectorOps`] (see the [module docs](super)). The CG family's steps use `xᴴy` for ρ and
/// pᴴAp, or the bilinear `xᵀy` ([`dotu`](VectorOps::dotu)) when the slot [`Slot::Form`] says so
/// (COCG); ‖r‖² is `rᴴr` either way.
pub trait CgSteps<T: Elem>: VectorOps<T> {
    /// Start of (P)CG and BiCGSTAB at `iteration` (0, or the iteration of a restart): applies
    /// `fuse`, then [`recur::start`] with ‖r‖² and ρ = rᵀz.
    fn cg_start(
        &self,
        r: &Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let bil = recur::bilinear(&self.read_slots(sc)?);
        let rr = self.dot(r, r, sc)?;
        let rz = match fuse {
            Fuse::Separate(z) => form_dot(
                self,
                bil,
                r,
                z.expect("cg_start with a separate preconditioner needs z"),
                sc,
            )?,
            fuse => fused_rz(self, bil, r, rr, fuse, sc)?.unwrap_or(rr),
        };
        self.update_slots(sc, |s, h| recur::start(s, h, rr, rz, iteration))
    }

    /// CG: pq = pᵀq, then [`recur::cg_alpha`].
    fn cg_alpha(
        &self,
        p: &Self::Vector,
        q: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (s, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        let pq = form_dot(self, recur::bilinear(&s), p, q, sc)?;
        self.update_slots(sc, |s, _| recur::cg_alpha(s, pq, iteration))
    }

    /// CG: `r ← r − αq`, `z` by `fuse`, then [`recur::cg_update_r`] with ‖r‖² and rᵀz.
    fn cg_update_r(
        &self,
        q: &Self::Vector,
        r: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (s, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        self.axpby(-s[Slot::Alpha as usize], q, T::one(), r)?;
        let rr = self.dot(r, r, sc)?;
        let rz = fused_rz(self, recur::bilinear(&s), r, rr, fuse, sc)?;
        self.update_slots(sc, |s, h| recur::cg_update_r(s, h, rr, rz, iteration))
    }

    /// PCG with a separate preconditioner: [`recur::cg_rho`] with rᵀz.
    fn cg_rho(
        &self,
        r: &Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (s, stopped) = slots(self, sc)?;
        if stopped {
            return Ok(());
        }
        let rz = form_dot(self, recur::bilinear(&s), r, z, sc)?;
        self.update_slots(sc, |s, _| recur::cg_rho(s, rz, iteration))
    }

    /// CG: `x ← x + αp; p ← z + βp`. Runs when the status is unset **or was set in this
    /// `iteration`** (so the converging iteration's `x` update is not lost).
    fn cg_update_xp(
        &self,
        x: &mut Self::Vector,
        p: &mut Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        let (s, stopped) = slots(self, sc)?;
        if stopped && s[Slot::StatusIter as usize].re().as_f64() as usize != iteration {
            return Ok(());
        }
        self.axpby(s[Slot::Alpha as usize], p, T::one(), x)?;
        self.axpby(T::one(), z, s[Slot::Beta as usize], p)
    }

    /// CG after the operator, for the identity or Jacobi `fuse` (not
    /// [`Fuse::Separate`]): [`CgSteps::cg_alpha`], [`CgSteps::cg_update_r`] and
    /// [`CgSteps::cg_update_xp`] (with `z = r` for the identity), in that order. The default
    /// issues the three steps; a backend may do them in fewer passes (the GPU backend in one
    /// launch on small systems), with the same arithmetic.
    #[allow(clippy::too_many_arguments)]
    fn cg_tail(
        &self,
        x: &mut Self::Vector,
        p: &mut Self::Vector,
        q: &Self::Vector,
        r: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        cg_tail(self, x, p, q, r, fuse, sc, iteration)
    }
}

/// [`CgSteps::cg_tail`] as three steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cg_tail<T: Elem, B: CgSteps<T> + ?Sized>(
    be: &B,
    x: &mut B::Vector,
    p: &mut B::Vector,
    q: &B::Vector,
    r: &mut B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
    iteration: usize,
) -> crate::Result<()> {
    be.cg_alpha(p, q, sc, iteration)?;
    match fuse {
        Fuse::Identity => {
            be.cg_update_r(q, r, Fuse::Identity, sc, iteration)?;
            be.cg_update_xp(x, p, r, sc, iteration)
        }
        Fuse::Jacobi { inv_diag, z } => {
            be.cg_update_r(
                q,
                r,
                Fuse::Jacobi {
                    inv_diag,
                    z: &mut *z,
                },
                sc,
                iteration,
            )?;
            be.cg_update_xp(x, p, z, sc, iteration)
        }
        Fuse::Separate(_) => {
            panic!("cg_tail: a separate preconditioner is applied between the steps")
        }
    }
}
