//! A backend's triangular solves with an incomplete factor ([`TriangularOps`]).

use super::VectorOps;
use crate::error::Result;
use crate::scalar::Elem;

/// A backend that holds incomplete factors `L`, `U` and solves with their triangles: what the
/// ILU(0)/IC(0) preconditioners apply. The factor is made by the incomplete factorization on
/// the backend (`sparse::incomplete::IncompleteOps`, implemented next to the factor types for
/// [`Cpu`](super::Cpu) and the GPU backend).
pub trait TriangularOps<T: Elem>: VectorOps<T> {
    /// The factor on this backend.
    type Factor;
    /// `x = L⁻¹b`. Must not synchronise with the host.
    fn lower_solve(&self, f: &Self::Factor, b: &Self::Vector, x: &mut Self::Vector) -> Result<()>;
    /// `x = U⁻¹b` (IC: `L⁻ᵀb`). Must not synchronise with the host.
    fn upper_solve(&self, f: &Self::Factor, b: &Self::Vector, x: &mut Self::Vector) -> Result<()>;
    /// `z = U⁻¹(L⁻¹r)` with `t` for `L⁻¹r`: the two solves, unless the backend fuses them. Must
    /// not synchronise with the host.
    fn apply_factor(
        &self,
        f: &Self::Factor,
        r: &Self::Vector,
        t: &mut Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()> {
        self.lower_solve(f, r, t)?;
        self.upper_solve(f, t, z)
    }
    /// `zs[j] = U⁻¹(L⁻¹rs[j])` for every column (the solvers with several right-hand sides),
    /// with `t` for `L⁻¹r`: [`TriangularOps::apply_factor`] column by column, unless the
    /// backend applies the factor to the block at once. Must not synchronise with the host.
    fn apply_factor_block(
        &self,
        f: &Self::Factor,
        rs: &[&Self::Vector],
        t: &mut Self::Vector,
        zs: &mut [&mut Self::Vector],
    ) -> Result<()> {
        assert_eq!(rs.len(), zs.len(), "apply_block: as many outputs as inputs");
        for (r, z) in rs.iter().zip(zs.iter_mut()) {
            self.apply_factor(f, r, t, z)?;
        }
        Ok(())
    }
}
