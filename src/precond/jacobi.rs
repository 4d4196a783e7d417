//! Jacobi (the inverse of the diagonal); the identity is the backend's [`Identity`].

pub use crate::backend::Identity;
use crate::backend::{Preconditioner, VectorOps};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Elem;

/// Jacobi preconditioning, `M = diag(A)`: holds `D⁻¹` as a backend vector, and the solvers fuse
/// `z = D⁻¹r` into their vector updates.
#[derive(Clone, Debug)]
pub struct Jacobi<V> {
    inv_diag: V,
}

impl<V> Jacobi<V> {
    /// From the diagonal of `A`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the row when a diagonal entry is zero or not finite (Jacobi
    /// is then undefined).
    pub fn from_diagonal<T: Elem, B: VectorOps<T, Vector = V>>(be: &B, diag: &[T]) -> Result<Self> {
        let mut inv = Vec::with_capacity(diag.len());
        for (i, &d) in diag.iter().enumerate() {
            if d == T::zero() || !d.finite() {
                return Err(Error::InvalidInput(format!(
                    "Jacobi preconditioner: diagonal entry of row {i} is {d}"
                )));
            }
            inv.push(T::one() / d);
        }
        Ok(Jacobi {
            inv_diag: be.upload(&inv)?,
        })
    }

    /// From `D⁻¹` already on the backend, every entry the inverse of a stored, nonzero, finite
    /// diagonal entry (checked by the caller).
    pub(crate) fn from_inverse_diagonal(inv_diag: V) -> Self {
        Jacobi { inv_diag }
    }

    /// From the diagonal of the matrix `a`.
    ///
    /// # Errors
    /// As [`Jacobi::from_diagonal`].
    pub fn from_matrix<T: Elem, B: VectorOps<T, Vector = V>>(
        be: &B,
        a: &CsrMatrix<T>,
    ) -> Result<Self> {
        Self::from_diagonal(be, &a.diagonal())
    }

    /// `D⁻¹` on the backend.
    pub fn inverse_diagonal(&self) -> &V {
        &self.inv_diag
    }

    /// `D⁻¹` on the backend, by value.
    pub fn into_inverse_diagonal(self) -> V {
        self.inv_diag
    }
}

impl<T: Elem, B: VectorOps<T>> Preconditioner<T, B> for Jacobi<B::Vector> {
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        be.scale(&self.inv_diag, r, z)
    }
    fn inverse_diagonal(&self) -> Option<&B::Vector> {
        Some(&self.inv_diag)
    }
}
