//! CG's steps ([`CgSteps`]): per iteration, with `q = A·p`, `cg_alpha` (pᵀq, α = ρ/pᵀq, the
//! breakdown test), `cg_update_r` (`r −= αq`, `z = D⁻¹r`, ‖r‖², rᵀz, β, the convergence test)
//! and `cg_update_xp` (`x += αp; p = z + βp`), or `cg_tail` for the three; `cg_start` (re)starts
//! CG and BiCGSTAB from a residual.

use super::{form_dot, fused_rz, slots, Fuse};
use crate::backend::recur::{self, Slot};
use crate::backend::VectorOps;
use crate::error::Result;
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
        cg_start(self, r, fuse, sc, iteration)
    }

    /// CG: pq = pᵀq, then [`recur::cg_alpha`].
    fn cg_alpha(
        &self,
        p: &Self::Vector,
        q: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        cg_alpha(self, p, q, sc, iteration)
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
        cg_update_r(self, q, r, fuse, sc, iteration)
    }

    /// PCG with a separate preconditioner: [`recur::cg_rho`] with rᵀz.
    fn cg_rho(
        &self,
        r: &Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        cg_rho(self, r, z, sc, iteration)
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
        cg_update_xp(self, x, p, z, sc, iteration)
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

pub(crate) fn cg_start<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let bil = recur::bilinear(&be.read_slots(sc)?);
    let rr = be.dot(r, r, sc)?;
    let rz = match fuse {
        Fuse::Separate(z) => form_dot(
            be,
            bil,
            r,
            z.expect("cg_start with a separate preconditioner needs z"),
            sc,
        )?,
        fuse => fused_rz(be, bil, r, rr, fuse, sc)?.unwrap_or(rr),
    };
    be.update_slots(sc, |s, h| recur::start(s, h, rr, rz, it))
}

pub(crate) fn cg_alpha<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    p: &B::Vector,
    q: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    let pq = form_dot(be, recur::bilinear(&s), p, q, sc)?;
    be.update_slots(sc, |s, _| recur::cg_alpha(s, pq, it))
}

pub(crate) fn cg_update_r<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    q: &B::Vector,
    r: &mut B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    be.axpby(-s[Slot::Alpha as usize], q, T::one(), r)?;
    let rr = be.dot(r, r, sc)?;
    let rz = fused_rz(be, recur::bilinear(&s), r, rr, fuse, sc)?;
    be.update_slots(sc, |s, h| recur::cg_update_r(s, h, rr, rz, it))
}

pub(crate) fn cg_rho<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    z: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    let rz = form_dot(be, recur::bilinear(&s), r, z, sc)?;
    be.update_slots(sc, |s, _| recur::cg_rho(s, rz, it))
}

pub(crate) fn cg_update_xp<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    x: &mut B::Vector,
    p: &mut B::Vector,
    z: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped && s[Slot::StatusIter as usize].re().as_f64() as usize != it {
        return Ok(());
    }
    be.axpby(s[Slot::Alpha as usize], p, T::one(), x)?;
    be.axpby(T::one(), z, s[Slot::Beta as usize], p)
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
