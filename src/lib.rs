//! # segsparse
//!
//! Sparse linear algebra on NVIDIA GPUs built on segmented scan, with the same API on the CPU.
//!
//! The crate follows Sengupta, Harris, Zhang and Owens, *Scan Primitives for GPU Computing*
//! (2007) and Sengupta, Harris and Garland, *Efficient Parallel Scan Algorithms for GPUs* (2008):
//! scan and segmented scan are the primitives, and sparse matrix–vector products, sorts and
//! solvers are built from them, made fast for today's hardware.
//!
//! GPU code is compiled at run time by NVRTC and the CUDA driver is loaded dynamically, so the
//! crate builds without CUDA and runs on the CPU when no GPU (or no driver) is present:
//! [`gpu::Gpu::new`] then returns a clear [`Error::CudaUnavailable`].
//!
//! ## Layers
//!
//! | module | what it holds |
//! |---|---|
//! | [`csr`] | [`CsrMatrix`] with checked invariants |
//! | [`io`] | Matrix Market reading and writing (`.mtx`, `.mtx.gz`) |
//! | [`generate`] | generated test matrices (`poisson2d:N`, `random:N:K`, ...) |
//! | [`gpu`] | device discovery, NVRTC kernel cache, device buffers |
//! | [`primitives`] | scan, segmented scan and the primitives built on them (CPU and GPU) |
//! | [`spmv`] | `y ← α·A·x + β·y` on the CPU and the GPU |
//! | [`solvers`] | CG, Jacobi-PCG, BiCGSTAB (one body for CPU and GPU) |
//! | [`tridiag`] | tridiagonal systems: Thomas, cyclic reduction, PCR |
#![warn(missing_docs)]

pub mod csr;
pub mod error;
pub mod generate;
pub mod gpu;
pub mod io;
pub mod primitives;
pub mod scalar;
pub mod solvers;
pub mod spmv;
pub mod tridiag;

pub use csr::{CsrMatrix, RowStats};
pub use error::{Error, Result};
pub use scalar::{Precision, Scalar};
