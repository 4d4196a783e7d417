//! Steps of several columns at once: the vector work of the solvers with several right-hand
//! sides (`solvers::multi`) and of the multigrid cycle on a block.
//!
//! A block solve keeps one set of vectors and one set of scalar slots per column (each column is
//! the one-column solve of its right-hand side, with its own α, β, ω, status and history). What
//! [`BlockOps`] adds is **one call per step for every running column**: the column steps of the
//! one-column solvers ([`CgSteps::cg_tail`], [`BicgSteps::bicg_update`], ...) take one column;
//! their block forms here take a slice of columns ([`CgColumn`], [`BicgColumn`], [`GmresColumn`],
//! [`PolyColumn`]). The default bodies call the column step once per column, in column order, so
//! any backend runs a block solve; a backend that can do better overrides them. The GPU backend
//! (`backend/gpu/block.rs`) runs each step as **one launch for up to 32 columns** (a 2-D grid whose `y`
//! index is the column, the columns' pointers in the kernel's parameters), and reads the status
//! of every running column in one download ([`BlockOps::read_slots_block`]).
//!
//! An override computes, for every column, what the column step computes, bit for bit: the GPU's
//! block kernels run the column kernels' bodies on each column's own buffers with the grid of the
//! one-column launch in `x` (`tests/all/multi_rhs.rs` compares both).

use super::{BicgSteps, CgSteps, ChebyshevSteps, Fuse};
use crate::backend::recur::NSLOTS;
use crate::backend::{KrylovOps, VectorOps};
use crate::error::Result;
use crate::scalar::Elem;

/// How a block step meets the preconditioner (the same for every column of a block).
#[derive(Debug)]
pub enum Pre<'a, V> {
    /// None: `z` is `r`.
    Identity,
    /// Jacobi, fused into the vector step: `z = inv_diag ∘ r` (the columns' `z` vectors
    /// receive it).
    Jacobi(&'a V),
    /// A general preconditioner, applied between the steps (`Preconditioner::apply_block`).
    Separate,
}

impl<V> Clone for Pre<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Pre<'_, V> {}

impl<'a, V> Pre<'a, V> {
    /// The one-column [`Fuse`] of this mode with the column's `z` (Jacobi writes it).
    fn fuse<'f>(self, z: Option<&'f mut V>) -> Fuse<'f, V>
    where
        'a: 'f,
    {
        match (self, z) {
            (Pre::Jacobi(inv_diag), Some(z)) => Fuse::Jacobi { inv_diag, z },
            (Pre::Jacobi(_), None) => panic!("a Jacobi block step needs every column's z"),
            (Pre::Separate, _) => Fuse::Separate(None),
            (Pre::Identity, _) => Fuse::Identity,
        }
    }
}

/// One column of a CG block step: its vectors, its slots and its iteration.
#[derive(Debug)]
pub struct CgColumn<'a, V, S> {
    /// The iterate.
    pub x: &'a mut V,
    /// The search direction.
    pub p: &'a mut V,
    /// `A·p`.
    pub q: &'a V,
    /// The residual.
    pub r: &'a mut V,
    /// `M⁻¹r` (absent without a preconditioner).
    pub z: Option<&'a mut V>,
    /// The column's scalar slots.
    pub sc: &'a mut S,
    /// The column's iteration.
    pub it: usize,
}

/// One column of a BiCGSTAB block step.
#[derive(Debug)]
pub struct BicgColumn<'a, V, S> {
    /// The iterate.
    pub x: &'a mut V,
    /// The residual.
    pub r: &'a mut V,
    /// The shadow residual r̂.
    pub rhat: &'a V,
    /// The search direction.
    pub p: &'a mut V,
    /// `A·p̂`.
    pub v: &'a V,
    /// `r − αv`.
    pub s: &'a mut V,
    /// `A·ŝ`.
    pub t: &'a V,
    /// `(p̂, ŝ) = (M⁻¹p, M⁻¹s)` when preconditioned (else `p` and `s` stand for them).
    pub pre: Option<(&'a mut V, &'a mut V)>,
    /// The column's scalar slots.
    pub sc: &'a mut S,
    /// The column's iteration.
    pub it: usize,
}

/// One column of a GMRES block step: its Krylov workspace at basis column `j`.
#[derive(Debug)]
pub struct GmresColumn<'a, K, S> {
    /// The Krylov workspace.
    pub k: &'a mut K,
    /// The basis column of this step (`v_{j+1} = A·M⁻¹v_j` is written).
    pub j: usize,
    /// The column's scalar slots.
    pub sc: &'a mut S,
    /// The column's iteration.
    pub it: usize,
}

/// One column of a Chebyshev step ([`ChebyshevSteps::poly_step`]).
#[derive(Debug)]
pub struct PolyColumn<'a, V> {
    /// `A·d` (or `r` for the first step).
    pub t: &'a V,
    /// The recurrence's residual.
    pub res: &'a mut V,
    /// The recurrence's direction.
    pub d: &'a mut V,
    /// The result.
    pub z: &'a mut V,
}

/// The block forms of the column steps; see the [module docs](self). Every method has a default
/// that runs the column step on each column in order.
pub trait BlockOps<T: Elem>: BicgSteps<T> + ChebyshevSteps<T> {
    /// The slots of every column of `scs`, in order, in one read (synchronises).
    fn read_slots_block(&self, scs: &[&Self::Scalars]) -> Result<Vec<[T; NSLOTS]>> {
        defaults::read_slots_block(self, scs)
    }

    /// [`CgSteps::cg_tail`] on every column (`pre` is the identity or Jacobi).
    fn cg_tail_block(
        &self,
        cols: &mut [CgColumn<'_, Self::Vector, Self::Scalars>],
        pre: Pre<'_, Self::Vector>,
    ) -> Result<()> {
        defaults::cg_tail_block(self, cols, pre)
    }

    /// With a general preconditioner, before it: [`CgSteps::cg_alpha`] then
    /// [`CgSteps::cg_update_r`] on every column.
    fn cg_update_r_block(
        &self,
        cols: &mut [CgColumn<'_, Self::Vector, Self::Scalars>],
    ) -> Result<()> {
        defaults::cg_update_r_block(self, cols)
    }

    /// With a general preconditioner, after it: [`CgSteps::cg_rho`] then
    /// [`CgSteps::cg_update_xp`] on every column (each needs its `z`).
    fn cg_update_xp_block(
        &self,
        cols: &mut [CgColumn<'_, Self::Vector, Self::Scalars>],
    ) -> Result<()> {
        defaults::cg_update_xp_block(self, cols)
    }

    /// [`BicgSteps::bicg_p`] on every column (Jacobi writes `p̂`).
    fn bicg_p_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
        pre: Pre<'_, Self::Vector>,
    ) -> Result<()> {
        defaults::bicg_p_block(self, cols, pre)
    }

    /// [`BicgSteps::bicg_alpha`] on every column.
    fn bicg_alpha_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
    ) -> Result<()> {
        defaults::bicg_alpha_block(self, cols)
    }

    /// [`BicgSteps::bicg_s`] on every column (Jacobi writes `ŝ`).
    fn bicg_s_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
        pre: Pre<'_, Self::Vector>,
    ) -> Result<()> {
        defaults::bicg_s_block(self, cols, pre)
    }

    /// [`BicgSteps::bicg_omega`] then [`BicgSteps::bicg_update`] on every column.
    fn bicg_omega_update_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
    ) -> Result<()> {
        defaults::bicg_omega_update_block(self, cols)
    }

    /// The fused order's [`BicgSteps::bicg_alpha_s`] on every column (Jacobi writes `ŝ`).
    fn bicg_alpha_s_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
        pre: Pre<'_, Self::Vector>,
    ) -> Result<()> {
        defaults::bicg_alpha_s_block(self, cols, pre)
    }

    /// The fused order's [`BicgSteps::bicg_update_p`] on every column (Jacobi writes `p̂`).
    fn bicg_update_p_block(
        &self,
        cols: &mut [BicgColumn<'_, Self::Vector, Self::Scalars>],
        pre: Pre<'_, Self::Vector>,
    ) -> Result<()> {
        defaults::bicg_update_p_block(self, cols, pre)
    }

    /// [`ChebyshevSteps::poly_step`] on every column, with shared `inv_diag` and coefficients.
    fn poly_step_block(
        &self,
        cols: &mut [PolyColumn<'_, Self::Vector>],
        inv_diag: Option<&Self::Vector>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        defaults::poly_step_block(self, cols, inv_diag, first, c1, c2)
    }

    /// `ys[j] ← ys[j] + α·xs[j]` ([`VectorOps::axpy`]) for every column.
    fn axpy_block(
        &self,
        alpha: T,
        xs: &[&Self::Vector],
        ys: &mut [&mut Self::Vector],
    ) -> Result<()> {
        defaults::axpy_block(self, alpha, xs, ys)
    }

    /// `zs[j] ← d ∘ rs[j]` ([`VectorOps::scale`]) for every column.
    fn scale_block(
        &self,
        d: &Self::Vector,
        rs: &[&Self::Vector],
        zs: &mut [&mut Self::Vector],
    ) -> Result<()> {
        defaults::scale_block(self, d, rs, zs)
    }

    /// `dsts[j] ← srcs[j]` ([`VectorOps::copy`]) for every column.
    fn copy_block(&self, srcs: &[&Self::Vector], dsts: &mut [&mut Self::Vector]) -> Result<()> {
        defaults::copy_block(self, srcs, dsts)
    }
}

/// The block form of GMRES's Arnoldi step, for a backend with [`KrylovOps`].
pub trait BlockKrylovOps<T: Elem>: KrylovOps<T> + BlockOps<T> {
    /// [`KrylovOps::gmres_arnoldi`] on every column (each at its own basis column `j`).
    fn gmres_arnoldi_block(
        &self,
        cols: &mut [GmresColumn<'_, Self::Krylov, Self::Scalars>],
    ) -> Result<()> {
        defaults::gmres_arnoldi_block(self, cols)
    }
}

/// The default bodies of [`BlockOps`] and [`BlockKrylovOps`]: each column's step in turn (what
/// an override must compute, per column, bit for bit).
pub(crate) mod defaults {
    use super::*;
    pub(crate) fn read_slots_block<T: Elem, B: VectorOps<T> + ?Sized>(
        be: &B,
        scs: &[&B::Scalars],
    ) -> Result<Vec<[T; NSLOTS]>> {
        scs.iter().map(|sc| be.read_slots(sc)).collect()
    }

    pub(crate) fn cg_tail_block<T: Elem, B: CgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [CgColumn<'_, B::Vector, B::Scalars>],
        pre: Pre<'_, B::Vector>,
    ) -> Result<()> {
        for c in cols.iter_mut() {
            let fuse = pre.fuse(c.z.as_deref_mut());
            be.cg_tail(c.x, c.p, c.q, c.r, fuse, c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn cg_update_r_block<T: Elem, B: CgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [CgColumn<'_, B::Vector, B::Scalars>],
    ) -> Result<()> {
        for c in cols.iter_mut() {
            be.cg_alpha(c.p, c.q, c.sc, c.it)?;
            be.cg_update_r(c.q, c.r, Fuse::Separate(None), c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn cg_update_xp_block<T: Elem, B: CgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [CgColumn<'_, B::Vector, B::Scalars>],
    ) -> Result<()> {
        for c in cols.iter_mut() {
            let z = c.z.as_deref().expect("a preconditioned CG column has z");
            be.cg_rho(c.r, z, c.sc, c.it)?;
            be.cg_update_xp(c.x, c.p, z, c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_p_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
        pre: Pre<'_, B::Vector>,
    ) -> Result<()> {
        for c in cols.iter_mut() {
            let fuse = pre.fuse(c.pre.as_mut().map(|(p, _)| &mut **p));
            be.bicg_p(c.r, c.v, c.p, fuse, c.sc)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_alpha_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
    ) -> Result<()> {
        for c in cols.iter_mut() {
            be.bicg_alpha(c.rhat, c.v, c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_s_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
        pre: Pre<'_, B::Vector>,
    ) -> Result<()> {
        for c in cols.iter_mut() {
            let fuse = pre.fuse(c.pre.as_mut().map(|(_, s)| &mut **s));
            be.bicg_s(c.r, c.v, c.s, fuse, c.sc)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_omega_update_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
    ) -> Result<()> {
        for c in cols.iter_mut() {
            be.bicg_omega(c.t, c.s, c.sc, c.it)?;
            let (phat, shat) = match &c.pre {
                Some((ph, sh)) => (&**ph, &**sh),
                None => (&*c.p, &*c.s),
            };
            be.bicg_update(c.x, phat, shat, c.s, c.t, c.r, c.rhat, c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_alpha_s_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
        pre: Pre<'_, B::Vector>,
    ) -> Result<()> {
        for c in cols.iter_mut() {
            let fuse = pre.fuse(c.pre.as_mut().map(|(_, s)| &mut **s));
            be.bicg_alpha_s(c.rhat, c.r, c.v, c.s, fuse, c.sc, c.it)?;
        }
        Ok(())
    }

    pub(crate) fn bicg_update_p_block<T: Elem, B: BicgSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [BicgColumn<'_, B::Vector, B::Scalars>],
        pre: Pre<'_, B::Vector>,
    ) -> Result<()> {
        let d = match pre {
            Pre::Jacobi(d) => Some(d),
            _ => None,
        };
        for c in cols.iter_mut() {
            let (phat, shat) = match &mut c.pre {
                Some((ph, sh)) => (Some(&mut **ph), &**sh),
                None => (None, &*c.s),
            };
            be.bicg_update_p(
                c.x, phat, d, shat, c.s, c.t, c.r, c.rhat, c.p, c.v, c.sc, c.it,
            )?;
        }
        Ok(())
    }

    pub(crate) fn poly_step_block<T: Elem, B: ChebyshevSteps<T> + ?Sized>(
        be: &B,
        cols: &mut [PolyColumn<'_, B::Vector>],
        inv_diag: Option<&B::Vector>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        for c in cols.iter_mut() {
            be.poly_step(c.t, inv_diag, c.res, c.d, c.z, first, c1, c2)?;
        }
        Ok(())
    }

    pub(crate) fn axpy_block<T: Elem, B: VectorOps<T> + ?Sized>(
        be: &B,
        alpha: T,
        xs: &[&B::Vector],
        ys: &mut [&mut B::Vector],
    ) -> Result<()> {
        assert_eq!(xs.len(), ys.len(), "axpy_block: as many outputs as inputs");
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            be.axpy(alpha, x, y)?;
        }
        Ok(())
    }

    pub(crate) fn scale_block<T: Elem, B: VectorOps<T> + ?Sized>(
        be: &B,
        d: &B::Vector,
        rs: &[&B::Vector],
        zs: &mut [&mut B::Vector],
    ) -> Result<()> {
        assert_eq!(rs.len(), zs.len(), "scale_block: as many outputs as inputs");
        for (r, z) in rs.iter().zip(zs.iter_mut()) {
            be.scale(d, r, z)?;
        }
        Ok(())
    }

    pub(crate) fn copy_block<T: Elem, B: VectorOps<T> + ?Sized>(
        be: &B,
        srcs: &[&B::Vector],
        dsts: &mut [&mut B::Vector],
    ) -> Result<()> {
        assert_eq!(
            srcs.len(),
            dsts.len(),
            "copy_block: as many outputs as inputs"
        );
        for (s, d) in srcs.iter().zip(dsts.iter_mut()) {
            be.copy(s, d)?;
        }
        Ok(())
    }

    pub(crate) fn gmres_arnoldi_block<T: Elem, B: KrylovOps<T> + ?Sized>(
        be: &B,
        cols: &mut [GmresColumn<'_, B::Krylov, B::Scalars>],
    ) -> Result<()> {
        for c in cols.iter_mut() {
            be.gmres_arnoldi(c.k, c.j, c.sc, c.it)?;
        }
        Ok(())
    }
}
