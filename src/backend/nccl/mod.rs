//! The NCCL backend (feature `nccl`): one GPU per rank, reductions all-reduced over NCCL.
//!
//! - [`comm`]: the group of ranks ([`NcclId`], [`NcclComm`], [`Rank`], [`run_threads`]);
//! - [`ops`]: the solver backend of a rank ([`NcclOps`]).
//!
//! The distributed matrix that runs on these ranks, and the cost model that decides how many
//! GPUs a problem is worth, are `dist::nccl`'s.

pub mod comm;
pub mod ops;

pub use comm::{nccl_available, run_threads, NcclComm, NcclId, Rank};
pub use ops::{DistScalar, DistScalars, NcclOps, DIST_KERNELS};

use crate::error::Error;
use crate::gpu::Gpu;

pub(crate) fn n32(n: usize) -> u32 {
    u32::try_from(n).expect("a rank's part is limited to u32 indices (checked at setup)")
}

pub(crate) fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Gpu::launch_error(name, e)
}
