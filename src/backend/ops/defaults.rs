//! The default implementations of [`VectorOps`]'s extensions, written once from its core.
//!
//! A step reads the slots on the host, runs core operations, and applies its recurrence of
//! [`recur`] with [`VectorOps::update_slots`]. Each sequence of core operations computes
//! exactly the arithmetic of the fused step it stands for (the same products and sums in the
//! same order: `a·x + b·y` with `b = 1` is `x + a·x`, `−α·q + r` is `r − α·q`), so a backend that
//! fuses a step into one pass gets the same iterates bit for bit when its `dot` sums in the same
//! order (`tests/all/backend_core.rs` checks it against the CPU backend's one-pass steps).
//!
//! The steps fused further (`cg_tail`, `bicg_alpha_s`, `bicg_update_p`) are their separate steps
//! in order; a backend that fuses them only on some systems (the GPU on small ones) calls these
//! for the others.

use super::{Fuse, VectorOps};
use crate::backend::recur::{self, Slot, NSLOTS};
use crate::error::Result;
use crate::scalar::Scalar;

/// The slots, and whether the status is set (a step is then a no-op).
fn slots<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    sc: &B::Scalars,
) -> Result<([T; NSLOTS], bool)> {
    let s = be.read_slots(sc)?;
    let stopped = recur::stopped(&s);
    Ok((s, stopped))
}

/// `z ← d ∘ r` for the Jacobi `fuse`, and `rᵀz` (`None` for a separate preconditioner, `rᵀr`
/// for none).
fn fused_rz<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    rr: T,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
) -> Result<Option<T>> {
    Ok(match fuse {
        Fuse::Identity => Some(rr),
        Fuse::Jacobi { inv_diag, z } => {
            be.vmul(T::one(), inv_diag, r, T::zero(), z)?;
            Some(be.dot(r, z, sc)?)
        }
        Fuse::Separate(_) => None,
    })
}

pub(crate) fn residual<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    b: &B::Vector,
    ax: &B::Vector,
    r: &mut B::Vector,
) -> Result<()> {
    be.copy(b, r)?;
    be.axpby(-T::one(), ax, T::one(), r)
}

pub(crate) fn cg_start<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let rr = be.dot(r, r, sc)?;
    let rz = match fuse {
        Fuse::Separate(z) => be.dot(
            r,
            z.expect("cg_start with a separate preconditioner needs z"),
            sc,
        )?,
        fuse => fused_rz(be, r, rr, fuse, sc)?.unwrap_or(rr),
    };
    be.update_slots(sc, |s, h| recur::start(s, h, rr, rz, it))
}

pub(crate) fn cg_alpha<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    p: &B::Vector,
    q: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    if slots(be, sc)?.1 {
        return Ok(());
    }
    let pq = be.dot(p, q, sc)?;
    be.update_slots(sc, |s, _| recur::cg_alpha(s, pq, it))
}

pub(crate) fn cg_update_r<T: Scalar, B: VectorOps<T> + ?Sized>(
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
    let rz = fused_rz(be, r, rr, fuse, sc)?;
    be.update_slots(sc, |s, h| recur::cg_update_r(s, h, rr, rz, it))
}

pub(crate) fn cg_rho<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    z: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    if slots(be, sc)?.1 {
        return Ok(());
    }
    let rz = be.dot(r, z, sc)?;
    be.update_slots(sc, |s, _| recur::cg_rho(s, rz, it))
}

pub(crate) fn cg_update_xp<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    x: &mut B::Vector,
    p: &mut B::Vector,
    z: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped && s[Slot::StatusIter as usize].as_f64() as usize != it {
        return Ok(());
    }
    be.axpby(s[Slot::Alpha as usize], p, T::one(), x)?;
    be.axpby(T::one(), z, s[Slot::Beta as usize], p)
}

pub(crate) fn bicg_p<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    v: &B::Vector,
    p: &mut B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
) -> Result<()> {
    let (s, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    // p ← r + β(p − ωv)
    be.axpby(-s[Slot::Omega as usize], v, T::one(), p)?;
    be.axpby(T::one(), r, s[Slot::Beta as usize], p)?;
    if let Fuse::Jacobi { inv_diag, z } = fuse {
        be.vmul(T::one(), inv_diag, p, T::zero(), z)?;
    }
    Ok(())
}

pub(crate) fn bicg_alpha<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    rhat: &B::Vector,
    v: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    if slots(be, sc)?.1 {
        return Ok(());
    }
    let rv = be.dot(rhat, v, sc)?;
    be.update_slots(sc, |s, _| recur::bicg_alpha(s, rv, it))
}

pub(crate) fn bicg_s<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    r: &B::Vector,
    v: &B::Vector,
    s: &mut B::Vector,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
) -> Result<()> {
    let (sl, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    be.axpbypcz(T::one(), r, -sl[Slot::Alpha as usize], v, T::zero(), s)?;
    if let Fuse::Jacobi { inv_diag, z } = fuse {
        be.vmul(T::one(), inv_diag, s, T::zero(), z)?;
    }
    Ok(())
}

pub(crate) fn bicg_omega<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    t: &B::Vector,
    s: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    if slots(be, sc)?.1 {
        return Ok(());
    }
    let ts = be.dot(t, s, sc)?;
    let tt = be.dot(t, t, sc)?;
    be.update_slots(sc, |s, _| recur::bicg_omega(s, ts, tt, it))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn bicg_update<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    x: &mut B::Vector,
    phat: &B::Vector,
    shat: &B::Vector,
    s: &B::Vector,
    t: &B::Vector,
    r: &mut B::Vector,
    rhat: &B::Vector,
    sc: &mut B::Scalars,
    it: usize,
) -> Result<()> {
    let (sl, stopped) = slots(be, sc)?;
    if stopped {
        return Ok(());
    }
    let (alpha, omega) = (sl[Slot::Alpha as usize], sl[Slot::Omega as usize]);
    be.axpbypcz(alpha, phat, omega, shat, T::one(), x)?;
    be.axpbypcz(T::one(), s, -omega, t, T::zero(), r)?;
    let rr = be.dot(r, r, sc)?;
    let rho = be.dot(rhat, r, sc)?;
    be.update_slots(sc, |s, h| recur::bicg_update(s, h, rr, rho, it))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn poly_step<T: Scalar, B: VectorOps<T> + ?Sized>(
    be: &B,
    t: &B::Vector,
    inv_diag: Option<&B::Vector>,
    res: &mut B::Vector,
    d: &mut B::Vector,
    z: &mut B::Vector,
    first: bool,
    c1: T,
    c2: T,
) -> Result<()> {
    if first {
        match inv_diag {
            Some(dv) => be.vmul(T::one(), dv, t, T::zero(), res)?,
            None => be.copy(t, res)?,
        }
        be.axpby(c2, res, T::zero(), d)?;
        be.copy(d, z)
    } else {
        match inv_diag {
            Some(dv) => be.vmul(-T::one(), dv, t, T::one(), res)?,
            None => be.axpby(-T::one(), t, T::one(), res)?,
        }
        be.axpby(c2, res, c1, d)?;
        be.axpby(T::one(), d, T::one(), z)
    }
}

/// [`VectorOps::cg_tail`] as three steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cg_tail<T: Scalar, B: VectorOps<T> + ?Sized>(
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

/// [`VectorOps::bicg_alpha_s`] as two steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bicg_alpha_s<T: Scalar, B: VectorOps<T> + ?Sized>(
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

/// [`VectorOps::bicg_update_p`] as two steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bicg_update_p<T: Scalar, B: VectorOps<T> + ?Sized>(
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
