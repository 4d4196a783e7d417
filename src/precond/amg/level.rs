//! The level types of the hierarchy on the host: what the setup builds and the cycle runs on.
//! Their own file, so that `setup` (which builds them and smooths with the cycle's smoother) and
//! `cycle` (which reads them) both look down at them.

use super::coarse::CoarseSolver;
use super::tentative::Candidates;
use super::SetupTimes;
use crate::csr::CsrMatrix;
use crate::sparse::{Aggregation, BlockClosure, SpgemmPlan};

/// One level's operator and what its smoother needs.
pub(crate) struct HostLevel<T> {
    pub a: CsrMatrix<T>,
    /// `1/a_ii` (0 for an empty row of a coarse level).
    pub inv_diag: Vec<T>,
    /// `1/Σ_j |a_ij|` (the l1-Jacobi scaling).
    pub inv_l1: Vec<T>,
    /// The estimate of ρ(D⁻¹A).
    pub rho: f64,
    /// Unknowns per node.
    pub block: usize,
}

/// The transfer from one level to the next, with its symbolic data.
pub(crate) struct Transfer<T> {
    pub agg: Aggregation,
    pub t: CsrMatrix<T>,
    pub at_plan: SpgemmPlan,
    /// Where each entry of `T` sits in the pattern of `A·T` (which holds `T`'s pattern because
    /// every diagonal entry of `A` is stored).
    pub t_pos: Vec<u32>,
    pub p: CsrMatrix<T>,
    pub r: CsrMatrix<T>,
    pub ra_plan: SpgemmPlan,
    pub rap_plan: SpgemmPlan,
    /// Set when the coarse operator is stored by whole blocks ([`AmgParams::block_products`](super::AmgParams::block_products)).
    pub closure: Option<BlockClosure>,
}

/// The whole hierarchy on the host.
pub(crate) struct HostHierarchy<T> {
    pub levels: Vec<HostLevel<T>>,
    pub transfers: Vec<Transfer<T>>,
    pub coarse_inv: CsrMatrix<T>,
    pub coarse_solver: CoarseSolver,
    /// The fine level's candidates as the user gave them (before improvement).
    pub candidates: Option<Candidates<T>>,
    /// Set when [`AmgParams::drop_tol`](super::AmgParams::drop_tol) dropped entries of the fine
    /// matrix: the finest level holds only the kept ones.
    pub dropped: Option<Dropped>,
    pub times: SetupTimes,
}

/// The fine matrix's pattern as given, and where the finest level's entries sit in it (the
/// entries that dropping small ones kept).
pub(crate) struct Dropped {
    pub row_ptr: Vec<u32>,
    pub col_idx: Vec<u32>,
    pub kept: Vec<u32>,
}
