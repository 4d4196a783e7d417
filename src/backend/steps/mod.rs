//! The solvers' steps on a backend, one extension trait per method: [`CgSteps`] (CG, PCG, COCG
//! and the start of BiCGSTAB), [`BicgSteps`] (BiCGSTAB) and [`ChebyshevSteps`] (the Chebyshev
//! polynomial's recurrence, for the preconditioner and the AMG smoother). GMRES's steps are
//! [`KrylovOps`](super::KrylovOps), on its Krylov basis. [`BlockOps`] and [`BlockKrylovOps`]
//! (`block.rs`) are the same steps for a slice of columns in one call (the solvers with several
//! right-hand sides).
//!
//! Every step has a default body written once from the core of [`VectorOps`]: it reads the
//! slots on the host, runs core operations, and applies its recurrence of [`recur`] with
//! [`VectorOps::update_slots`]. Each sequence of core operations computes exactly the
//! arithmetic of the fused step it stands for (the same products and sums in the same order:
//! `a·x + b·y` with `b = 1` is `x + a·x`, `−α·q + r` is `r − α·q`), so a backend that fuses a
//! step into one pass gets the same iterates bit for bit when its `dot` sums in the same order
//! (`tests/all/backend_core.rs` checks it against the CPU backend's one-pass steps). A backend
//! that needs nothing faster implements a trait with an empty `impl` (the simulated ranks); the
//! CPU backend overrides the steps with one pass each, the GPU backends with one kernel each
//! (scalars that never leave the device). An override must compute the same arithmetic as the
//! default.
//!
//! Every step takes the slots ([`VectorOps::Scalars`]) and reads and writes the scalars there;
//! a step is a no-op once the status slot is set (except where documented). Contract
//! violations (vectors of different lengths) panic.
//!
//! The steps fused further (`cg_tail`, `bicg_alpha_s`, `bicg_update_p`) are their separate steps
//! in order by default; a backend that fuses them only on some systems (the GPU on small ones)
//! calls the default bodies ([`cg::cg_tail`], ...) for the others.

pub(crate) mod bicgstab;
pub mod block;
pub(crate) mod cg;
pub(crate) mod chebyshev;

pub use bicgstab::BicgSteps;
pub use block::{BicgColumn, BlockKrylovOps, BlockOps, CgColumn, GmresColumn, PolyColumn, Pre};
pub use cg::CgSteps;
pub use chebyshev::ChebyshevSteps;

use super::recur::{self, NSLOTS};
use super::VectorOps;
use crate::error::Result;
use crate::scalar::Elem;

/// How a fused step applies the preconditioner `z = M⁻¹r` on its way.
pub enum Fuse<'a, V> {
    /// No preconditioner: `z` is `r` itself.
    Identity,
    /// Jacobi: `z = inv_diag ∘ r`, written to `z` by the same pass.
    Jacobi {
        /// The inverse of the diagonal.
        inv_diag: &'a V,
        /// Where `z` goes.
        z: &'a mut V,
    },
    /// A general preconditioner applied separately by
    /// [`Preconditioner::apply`](super::Preconditioner::apply); the step reads `z` when it is
    /// given (start of PCG) and otherwise leaves `ρ` to [`CgSteps::cg_rho`].
    Separate(Option<&'a V>),
}

/// The slots, and whether the status is set (a step is then a no-op).
pub(super) fn slots<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    sc: &B::Scalars,
) -> Result<([T; NSLOTS], bool)> {
    let s = be.read_slots(sc)?;
    let stopped = recur::stopped(&s);
    Ok((s, stopped))
}

/// The CG family's inner product `xᴴy`, or `xᵀy` when `bilinear` (COCG, [`Slot::Form`]).
pub(super) fn form_dot<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    bilinear: bool,
    x: &B::Vector,
    y: &B::Vector,
    sc: &mut B::Scalars,
) -> Result<T> {
    if bilinear {
        be.dotu(x, y, sc)
    } else {
        be.dot(x, y, sc)
    }
}

/// `z ← d ∘ r` for the Jacobi `fuse`, and `rᴴz` (`None` for a separate preconditioner, `rᴴr`
/// for none; `rᵀz`, `rᵀr` when `bilinear`).
pub(super) fn fused_rz<T: Elem, B: VectorOps<T> + ?Sized>(
    be: &B,
    bilinear: bool,
    r: &B::Vector,
    rr: T,
    fuse: Fuse<'_, B::Vector>,
    sc: &mut B::Scalars,
) -> Result<Option<T>> {
    Ok(match fuse {
        Fuse::Identity if bilinear => Some(be.dotu(r, r, sc)?),
        Fuse::Identity => Some(rr),
        Fuse::Jacobi { inv_diag, z } => {
            be.vmul(T::one(), inv_diag, r, T::zero(), z)?;
            Some(form_dot(be, bilinear, r, z, sc)?)
        }
        Fuse::Separate(_) => None,
    })
}

/// Every step of the crate's solvers and of the Chebyshev polynomial: [`CgSteps`], [`BicgSteps`],
/// [`ChebyshevSteps`] and GMRES's [`KrylovOps`](super::KrylovOps), as one bound for code that
/// runs any method on a backend. Implemented for every backend that has them.
pub trait SolverOps<T: Elem>: BicgSteps<T> + ChebyshevSteps<T> + super::KrylovOps<T> {}

impl<T: Elem, B> SolverOps<T> for B where
    B: BicgSteps<T> + ChebyshevSteps<T> + super::KrylovOps<T> + ?Sized
{
}
