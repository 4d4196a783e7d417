//! Simulated ranks on the CPU: one thread per rank, collectives through shared memory.
//!
//! This backend runs the distributed algorithms — partition, halo lists, halo exchange,
//! all-reduced scalars, the solver bodies — without any GPU or NCCL, so CI checks them against
//! the single-process solve. [`SimOps`] is a [`VectorOps`](crate::backend::VectorOps) whose reductions are local sums
//! followed by [`SimComm::all_reduce`] (summed in rank order, so the result is the same on every
//! rank and from run to run), then the scalar recurrences of [`recur`](crate::backend::recur); the vector-only steps are
//! the [`Cpu`] backend's own. [`SimCsr`] is the distributed operator.
//!
//! ```
//! use segsparse::dist::{sim, Partition, RowBlock};
//! use segsparse::solvers::{cg, SolveParams};
//! let a = segsparse::generate::poisson2d::<f64>(20).unwrap();
//! let part = Partition::by_nnz(a.row_ptr(), 3);
//! let iters = sim::run(3, |comm| {
//!     let rows = part.rows(comm.rank());
//!     let block = RowBlock::from_csr(&a, rows.clone()).unwrap();
//!     let op = sim::SimCsr::new(&block, &part, comm.clone()).unwrap();
//!     let be = sim::SimOps::new(comm);
//!     let b = vec![1.0; op.n_owned()];
//!     let mut x = vec![0.0; op.n_owned()];
//!     cg(&be, &op, &b, &mut x, &SolveParams { rel_tol: 1e-10, ..Default::default() })
//!         .unwrap()
//!         .iterations
//! });
//! assert!(iters.iter().all(|&i| i == iters[0]));
//! ```

use super::block::{DistPart, Partition, RowBlock};
pub use crate::backend::sim::{run, SimComm, SimOps, SimScalars};
use crate::backend::{Cpu, LinearOperator};
use crate::error::Result;
use crate::scalar::Scalar;

/// The distributed matrix on a simulated rank.
#[derive(Debug)]
pub struct SimCsr<T> {
    part: DistPart<T>,
    comm: SimComm,
}

impl<T: Scalar> SimCsr<T> {
    /// Sets up this rank's part (collective: every rank calls it).
    ///
    /// # Errors
    /// As [`DistPart::build`].
    pub fn new(block: &RowBlock<T>, partition: &Partition, comm: SimComm) -> Result<Self> {
        let part = DistPart::build(block, partition, comm.rank(), |need| {
            Ok(comm.all_to_all(need))
        })?;
        Ok(SimCsr { part, comm })
    }
    /// The operator of a part already built (square or rectangular).
    pub fn from_part(part: DistPart<T>, comm: SimComm) -> Self {
        SimCsr { part, comm }
    }
    /// The local part.
    pub fn part(&self) -> &DistPart<T> {
        &self.part
    }
    /// Owned rows (the local vector length).
    pub fn n_owned(&self) -> usize {
        self.part.n_owned()
    }
    /// The halo exchange: this rank's halo values for the owned `x` of every rank (collective).
    pub fn exchange(&self, x: &[T]) -> Vec<T> {
        let p = &self.part;
        let sendbuf = p.gather_send(x);
        let mut out = vec![Vec::new(); p.nranks];
        for s in &p.send {
            out[s.peer] = sendbuf[s.offset..s.offset + s.count].to_vec();
        }
        let got = self.comm.all_to_all(out);
        let mut halo = vec![T::zero(); p.n_halo()];
        for r in &p.recv {
            assert_eq!(got[r.peer].len(), r.count, "halo from rank {}", r.peer);
            halo[r.offset..r.offset + r.count].copy_from_slice(&got[r.peer]);
        }
        halo
    }
}

impl<T: Scalar> LinearOperator<T, SimOps> for SimCsr<T> {
    fn nrows(&self) -> usize {
        self.part.n_owned()
    }
    fn ncols(&self) -> usize {
        self.part.n_owned_cols()
    }
    fn apply(&self, _: &SimOps, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        let halo = self.exchange(x);
        self.part.spmv_host(x, &halo, y);
        Ok(())
    }
}

impl<T: Scalar> super::DistOperator<T, SimOps> for SimCsr<T> {
    fn owned_block(&self) -> &crate::CsrMatrix<T> {
        &self.part.owned
    }
    fn host_part(&self) -> Option<&DistPart<T>> {
        Some(&self.part)
    }
}

impl<T: Scalar> super::LocalOps<T> for SimOps {
    type Local = Cpu;
    type Part = SimCsr<T>;
    fn upload_part(&self, part: DistPart<T>) -> Result<SimCsr<T>> {
        Ok(SimCsr::from_part(part, self.comm().clone()))
    }
    fn dist_rank(&self) -> usize {
        self.comm().rank()
    }
    fn dist_size(&self) -> usize {
        self.comm().size()
    }
    fn all_to_all_u64(&self, send: Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>> {
        Ok(self.comm().all_to_all(send))
    }
    fn local(&self) -> &Cpu {
        &Cpu
    }
    fn count_failed(&self, failed: bool) -> Result<usize> {
        let mut n = [if failed { 1.0f64 } else { 0.0 }];
        self.comm().all_reduce(&mut n);
        Ok(n[0] as usize)
    }
}
