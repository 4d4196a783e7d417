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
//! From the bottom up; a module uses modules of its own row or above it in this table, never
//! below (`ARCHITECTURE.md` in the repository; CI checks it).
//!
//! | module | what it holds |
//! |---|---|
//! | [`error`], [`units`], [`scalar`] | the one [`Error`] type; byte counts as people read them; the [`Scalar`] trait |
//! | [`memory`] | the memory preflight: bytes needed against what the host and device have |
//! | [`gpu`] | device discovery, NVRTC compilation with an on-disk CUBIN cache, device buffers, errors |
//! | [`csr`] | [`CsrMatrix`] with checked invariants |
//! | [`io`], [`generate`] | Matrix Market reading and writing (`.mtx`, `.mtx.gz`); generated test matrices (`poisson2d:N`, `random:N:K`, ...) |
//! | [`load`] | a matrix from a file or a generator spec |
//! | [`primitives`] | scan, segmented scan and the primitives built on them (CPU and GPU) |
//! | [`backend`] | where vectors live: the CPU, GPU and distributed backends of the vector steps, their block forms for several columns (`BlockOps`), the operator traits `LinearOperator` and `Preconditioner` |
//! | [`spmv`], [`tridiag`], [`spmm`] | `y ← α·A·x + β·y` on the CPU and the GPU; tridiagonal systems: Thomas, cyclic reduction, PCR; `Y ← α·A·X + β·Y` for a block of `k` vectors |
//! | [`sparse`] | sparse products (SpGEMM), transposes, aggregation, triangular solves, incomplete factorisations |
//! | [`solvers`], [`precond`] | CG, Jacobi-PCG, BiCGSTAB, GMRES(m) (one body for every backend); preconditioners: Jacobi, Chebyshev, ILU(0)/IC(0), smoothed-aggregation AMG, any of them stored and run in f32 under an f64 solve (`precond::Narrowed`) |
//! | [`dist`], [`batched`], [`autosolve`] | matrices split over ranks (GPUs): halo exchange, distributed CG/PCG/BiCGSTAB; batches of many small systems; the automatic solve behind every default (statistics where the matrix lives, the rule, the convergence probe and its cost model, the per-pattern cache) |
//! | [`kernel_registry`] | the list of every kernel source (for CI's compile check) |
//!
//! ## Quick start
//!
//! ```
//! use segsparse::{generate, spmv, CsrMatrix};
//! use segsparse::solvers::{cg, SolveParams};
//! use segsparse::backend::Cpu;
//!
//! // A matrix from a file (`io::read_matrix_market`) or, as here, from a generator spec.
//! let a: CsrMatrix<f64> = generate::from_spec("poisson2d:30", 0)?;
//! let x = vec![1.0; a.ncols()];
//! let mut y = vec![0.0; a.nrows()];
//! spmv::spmv(1.0, &a, &x, 0.0, &mut y); // y ← A·x on the CPU (rayon)
//!
//! // Solve A·x = b with conjugate gradient; the same call runs on the GPU with
//! // `backend::gpu::GpuOps` and a `spmv::gpu::GpuCsr` in place of `Cpu` and `a`.
//! let mut sol = vec![0.0; a.ncols()];
//! let info = cg(&Cpu, &a, &y, &mut sol, &SolveParams { rel_tol: 1e-10, ..Default::default() })?;
//! assert!(info.relative_residual <= 1e-10);
//!
//! // The GPU, when one works (this prints a reason and carries on without one):
//! match segsparse::gpu::Gpu::new() {
//!     Ok(g) => println!("GPU: {}", g.name()),
//!     Err(e) => println!("{e}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Backends and features
//!
//! | | CPU | GPU (feature `cuda`, default) |
//! |---|---|---|
//! | SpMV | [`spmv::spmv`] (rayon), [`spmv::cpu`] | `spmv::gpu::GpuCsr` (fused, vector, the paper's segmented scan) |
//! | scan family and primitives | [`primitives::cpu`] and each module's `cpu` | [`primitives`]`::gpu` and each module's `gpu` |
//! | solvers and preconditioners | [`backend::Cpu`] | `backend::gpu::GpuOps` |
//! | tridiagonal | [`tridiag::cpu`] | `tridiag::gpu::GpuTridiag` |
//! | the automatic choice's statistics | [`precond::auto::MatrixStats`] (rayon) | `precond::auto::gpu::matrix_stats` |
//!
//! Feature `cli` (default) builds `spmv-bench`, `sparse-solve` and the other benchmark tools.
//! Performance figures measured on the GPU machine are in `benches/results/` of the repository.
#![warn(missing_docs)]

pub mod autosolve;
pub mod backend;
pub mod batched;
pub mod csr;
pub mod dist;
pub mod error;
pub mod generate;
pub mod gpu;
mod input;
pub mod io;
pub mod kernel_registry;
pub mod memory;
pub mod precond;
pub mod primitives;
pub mod scalar;
pub mod solvers;
pub mod sparse;
pub mod spmm;
pub mod spmv;
pub mod tridiag;
pub mod units;

pub use csr::{CsrMatrix, RowStats};
pub use error::{Error, Result};
pub use input::load;
pub use scalar::{Complex, DevComplex, Elem, ElemSlice, Precision, Scalar, Storage};
