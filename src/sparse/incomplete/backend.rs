//! The incomplete factorization on a backend ([`IncompleteOps`]): the factor types of
//! [`IncompleteFactor`] (host) and [`GpuIncompleteFactor`](super::gpu::GpuIncompleteFactor)
//! (device) bound to the CPU and the GPU backend, with their triangular solves
//! ([`TriangularOps`]).

use super::{FactorKind, FactorSummary, IncompleteFactor, IncompleteParams};
use crate::backend::{Cpu, TriangularOps};
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Elem;

/// A backend that factors a matrix incompletely into its [`TriangularOps::Factor`]: what the
/// ILU(0)/IC(0) preconditioners (`precond::{Ilu0, Ic0}`) set up with.
pub trait IncompleteOps<T: Elem>: TriangularOps<T> {
    /// Analyses and factors `a`.
    ///
    /// # Errors
    /// A bad structure (no diagonal entry, unsorted indices) or a bad pivot, naming the row.
    fn factor(
        &self,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self::Factor>;
    /// Re-factors new values of `a` on the pattern of `f`.
    ///
    /// # Errors
    /// Another pattern, or a bad pivot naming the row.
    fn refactor(&self, f: &mut Self::Factor, a: &CsrMatrix<T>) -> Result<()>;
    /// What the factorization did and how each triangle is applied.
    fn summary(f: &Self::Factor) -> FactorSummary;
}

/// The reference substitution on the host.
impl<T: Elem> TriangularOps<T> for Cpu {
    type Factor = IncompleteFactor<T>;
    fn lower_solve(&self, f: &IncompleteFactor<T>, b: &Vec<T>, x: &mut Vec<T>) -> Result<()> {
        f.lower_solve(b, x);
        Ok(())
    }
    fn upper_solve(&self, f: &IncompleteFactor<T>, b: &Vec<T>, x: &mut Vec<T>) -> Result<()> {
        f.upper_solve(b, x);
        Ok(())
    }
}

impl<T: Elem> IncompleteOps<T> for Cpu {
    fn factor(
        &self,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<IncompleteFactor<T>> {
        IncompleteFactor::new(a, kind, params)
    }
    fn refactor(&self, f: &mut IncompleteFactor<T>, a: &CsrMatrix<T>) -> Result<()> {
        f.refactor(a)
    }
    fn summary(f: &IncompleteFactor<T>) -> FactorSummary {
        f.summary()
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use cudarc::driver::CudaSlice;

    use super::super::gpu::GpuIncompleteFactor;
    use super::{FactorKind, FactorSummary, IncompleteOps, IncompleteParams};
    use crate::backend::gpu::GpuOps;
    use crate::backend::TriangularOps;
    use crate::csr::CsrMatrix;
    use crate::error::Result;
    use crate::gpu::KernelType;
    use crate::scalar::Elem;

    /// The level or synchronization-free kernels of `sparse::triangular`.
    impl<T: Elem> TriangularOps<T> for GpuOps<T>
    where
        T::Dev: KernelType,
    {
        type Factor = GpuIncompleteFactor<T>;
        fn lower_solve(
            &self,
            f: &Self::Factor,
            b: &CudaSlice<T::Dev>,
            x: &mut CudaSlice<T::Dev>,
        ) -> Result<()> {
            f.lower_solve(b, x)
        }
        fn upper_solve(
            &self,
            f: &Self::Factor,
            b: &CudaSlice<T::Dev>,
            x: &mut CudaSlice<T::Dev>,
        ) -> Result<()> {
            f.upper_solve(b, x)
        }
        /// Both triangles swept: one cooperative launch for the whole application.
        fn apply_factor(
            &self,
            f: &Self::Factor,
            r: &CudaSlice<T::Dev>,
            t: &mut CudaSlice<T::Dev>,
            z: &mut CudaSlice<T::Dev>,
        ) -> Result<()> {
            if f.apply_swept(r, t, z)? {
                return Ok(());
            }
            f.lower_solve(r, t)?;
            f.upper_solve(t, z)
        }
        /// Both triangles swept: one cooperative launch for every column (each with its own
        /// work vectors, the same result as its one-column application); else column by column.
        fn apply_factor_block(
            &self,
            f: &Self::Factor,
            rs: &[&CudaSlice<T::Dev>],
            t: &mut CudaSlice<T::Dev>,
            zs: &mut [&mut CudaSlice<T::Dev>],
        ) -> Result<()> {
            if self.block_steps() && f.apply_swept_block(rs, zs)? {
                return Ok(());
            }
            for (r, z) in rs.iter().zip(zs.iter_mut()) {
                self.apply_factor(f, r, t, z)?;
            }
            Ok(())
        }
    }

    impl<T: Elem> IncompleteOps<T> for GpuOps<T>
    where
        T::Dev: KernelType,
    {
        fn factor(
            &self,
            a: &CsrMatrix<T>,
            kind: FactorKind,
            params: &IncompleteParams,
        ) -> Result<Self::Factor> {
            GpuIncompleteFactor::new(self.gpu(), a, kind, params)
        }
        fn refactor(&self, f: &mut Self::Factor, a: &CsrMatrix<T>) -> Result<()> {
            f.refactor(a)
        }
        fn summary(f: &Self::Factor) -> FactorSummary {
            f.summary()
        }
    }
}
