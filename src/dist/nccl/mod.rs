//! Distributed matrices and solvers on several GPUs over NCCL (feature `nccl`).
//!
//! The ranks and the solver backend are in `crate::backend::nccl` (re-exported here); this
//! module holds the distributed matrix ([`DistCsr`], in `matrix`) and the cost model that picks
//! the number of GPUs ([`measure_costs`], [`auto_gpus`], in `cost`).
//!
//! One rank per GPU. A rank is a [`Rank`]: its [`Gpu`] and its [`NcclComm`]. Ranks are created
//! either
//!
//! - by **one process driving every GPU**, a thread per GPU ([`run_threads`]), or
//! - by **one process per GPU** (also across hosts): every process calls [`Rank::init`] with the
//!   same [`NcclId`], which rank 0 creates and shares through a file ([`NcclId::share_via_file`]),
//!   an environment variable ([`NcclId::to_hex`] / [`NcclId::from_hex`]) or anything else
//!   (`tools/examples/dist_cg.rs` shows the `mpirun` command).
//!
//! [`DistCsr`] is the distributed matrix (set up collectively from the rank's [`RowBlock`]) and
//! [`NcclOps`] the solver backend: the crate's CG, PCG and BiCGSTAB bodies run unchanged on each
//! rank. See the [module docs](super) for the decomposition.
//!
//! # What runs where, per CG iteration
//!
//! | stream | work |
//! |---|---|
//! | rank stream | gather `x[send_idx]` → event → `y = A_oo·x` → wait halo → `y[bnd] += A_oh·halo` → `pᵀq` partials → all-reduce → α → `r −= αq`, ‖r‖² partials → all-reduce → β → `x, p` update |
//! | halo stream | wait gather → grouped `ncclSend`/`ncclRecv` with each neighbour → event |
//!
//! `SEGSPARSE_HALO_PRIORITY=high` creates the halo stream with the device's highest priority
//! (an experiment for the overlap; off by default until measured).
//!
//! The two all-reduces of a CG iteration cannot be merged without changing the algorithm (α is
//! needed before `r` is updated); each step's sums (‖r‖² and `rᵀz`) travel in one all-reduce.
//! The halo exchange uses its own communicator (created from a second unique id) so that it
//! never queues behind an all-reduce on the other stream.
//!
//! # How many GPUs
//!
//! [`measure_costs`] measures, collectively on a group of ranks, what one reduction step and one
//! halo exchange cost here, with a GPU's copy bandwidth and free memory; [`auto_gpus`] starts a
//! group on every GPU of the machine (only when there are two or more), measures, and applies
//! [`choose_gpus`](super::choose_gpus) to a problem's statistics (`sparse-solve --gpus auto`).
//!
//! # Errors
//!
//! A machine without `libnccl.so` gets [`Error::CudaUnavailable`] naming the library; single-GPU
//! use of the crate is unaffected (the library is loaded only here, at run time).

mod cost;
mod matrix;

pub use crate::backend::nccl::{
    nccl_available, run_threads, DistScalar, DistScalars, NcclComm, NcclId, NcclOps, Rank,
    DIST_KERNELS,
};
pub use cost::{auto_gpus, measure_costs, AutoGpus};
pub use matrix::{DistCsr, PartInfo, SpmvTimings};
