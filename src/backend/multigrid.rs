//! A backend's sparse matrices, for the multigrid cycle ([`MultigridOps`]).

use super::{BlockOps, LinearOperator};
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Scalar;

/// What the multigrid cycle needs from a backend beyond the solvers' [`VectorOps`] and the
/// Chebyshev smoother's step, on one column or a block ([`BlockOps`]): a sparse matrix type
/// (square or rectangular) with `y ← α·A·x + β·y`. Implemented (in `crate::spmv`, where the matrices are) by [`Cpu`](super::Cpu)
/// with [`CsrMatrix`] and by the GPU backend with `spmv::gpu::GpuCsr`.
pub trait MultigridOps<T: Scalar>: BlockOps<T> + Sized + 'static {
    /// A matrix on the backend.
    type Matrix: LinearOperator<T, Self>;
    /// Copies a host matrix to the backend.
    ///
    /// # Errors
    /// Backend errors (out of memory, a failed compile).
    fn upload_matrix(&self, a: &CsrMatrix<T>) -> Result<Self::Matrix>;
    /// Copies a backend matrix to the host.
    ///
    /// # Errors
    /// Backend errors (a failed copy).
    fn download_matrix(&self, a: &Self::Matrix) -> Result<CsrMatrix<T>>;
    /// Bytes the matrix occupies on the backend.
    fn matrix_bytes(&self, a: &Self::Matrix) -> usize;
    /// `y ← α·A·x + β·y`. Must not synchronise with the host.
    ///
    /// # Errors
    /// A failed launch.
    fn spmv(
        &self,
        a: &Self::Matrix,
        alpha: T,
        x: &Self::Vector,
        beta: T,
        y: &mut Self::Vector,
    ) -> Result<()>;
    /// `ys[j] ← α·A·xs[j] + β·ys[j]` for every `j` (the cycle on a block of columns). The
    /// default runs [`MultigridOps::spmv`] column by column; the GPU backend reads the matrix
    /// once for up to 32 columns. Must not synchronise with the host.
    ///
    /// # Errors
    /// A failed launch.
    fn spmv_block(
        &self,
        a: &Self::Matrix,
        alpha: T,
        xs: &[&Self::Vector],
        beta: T,
        ys: &mut [&mut Self::Vector],
    ) -> Result<()> {
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            self.spmv(a, alpha, x, beta, y)?;
        }
        Ok(())
    }
}
