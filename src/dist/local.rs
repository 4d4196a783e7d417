//! What every distributed backend and operator offers the preconditioners across ranks
//! ([`LocalOps`], [`DistOperator`]), and the collective check that ends each step of a setup
//! ([`agree`]): below both the preconditioners of `precond` and the distributed AMG.

use super::block::DistPart;
use crate::backend::{
    BicgSteps, ChebyshevSteps, KrylovOps, LinearOperator, MultigridOps, VectorOps,
};
use crate::error::Result;
use crate::precond::{AmgOps, IncompleteOps};
use crate::scalar::Scalar;

/// A distributed backend (one rank's) that offers the single-device backend underneath it, with
/// the same vectors: what a local preconditioner is built and applied on.
pub trait LocalOps<T: Scalar>: BicgSteps<T> + ChebyshevSteps<T> + Sized {
    /// The rank's single-device backend.
    type Local: VectorOps<T, Vector = Self::Vector> + KrylovOps<T> + IncompleteOps<T> + AmgOps<T>;
    /// A distributed matrix of this backend made from one rank's [`DistPart`], square or
    /// rectangular ([`DistPart::build_rect`]): the level operators and transfers of the
    /// distributed AMG ([`DistAmg`](super::DistAmg)).
    type Part: LinearOperator<T, Self>;
    /// Puts a rank's part on the backend (local: no message).
    ///
    /// # Errors
    /// Backend failures (out of memory).
    fn upload_part(&self, part: DistPart<T>) -> Result<Self::Part>;
    /// This rank.
    fn dist_rank(&self) -> usize;
    /// The number of ranks.
    fn dist_size(&self) -> usize;
    /// All-to-all of index lists (collective; setup data): `send[p]` goes to rank `p`, the
    /// result holds what each rank sent to this one. Values travel as their `f64` bits.
    ///
    /// # Errors
    /// Communication failures.
    fn all_to_all_u64(&self, send: Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>>;
    /// The rank's single-device backend.
    fn local(&self) -> &Self::Local;
    /// How many ranks pass `failed = true` (collective; every rank gets the same count, and
    /// none returns before all have called it, so it is also a barrier; synchronises the
    /// device). A step that can fail on some ranks only (a local factorization, a zero on one
    /// rank's diagonal) is followed by this, so that every rank stops together instead of
    /// waiting forever in the next collective.
    ///
    /// # Errors
    /// Communication failures.
    fn count_failed(&self, failed: bool) -> Result<usize>;
}

/// A distributed matrix that holds its diagonal block `A_oo` as a matrix of the local backend.
pub trait DistOperator<T: Scalar, D: LocalOps<T>>: LinearOperator<T, D> {
    /// This rank's rows × its own columns (local numbering), on the local backend.
    fn owned_block(&self) -> &<D::Local as MultigridOps<T>>::Matrix;
    /// This rank's part on the host (owned and boundary blocks, halo lists), where the operator
    /// keeps it: what the distributed AMG's setup reads. `None` by default.
    fn host_part(&self) -> Option<&DistPart<T>> {
        None
    }
}

/// `r` on every rank when every rank's `r` is `Ok`; otherwise an error on every rank.
///
/// # Errors
/// This rank's own error, or one saying how many other ranks failed.
pub fn agree<T: Scalar, D: LocalOps<T>, R>(be: &D, r: Result<R>) -> Result<R> {
    let failed = be.count_failed(r.is_err())?;
    match r {
        Err(e) => Err(e),
        Ok(_) if failed > 0 => Err(crate::Error::InvalidInput(format!(
            "the setup failed on {failed} other rank(s)"
        ))),
        ok => ok,
    }
}
