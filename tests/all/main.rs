//! The crate's integration tests, as one test executable: each file of this folder is one module
//! (named after what it tests), and `common/` holds what several of them share. One executable
//! links the crate once, where a file per executable linked it once per file.
//!
//! Run one part with a filter on the module path, e.g. `cargo test --test all spmv_gpu::` or
//! `cargo test --test all solvers::gpu`. GPU tests skip with a notice without a device and fail
//! instead under `SEGSPARSE_REQUIRE_GPU=1`.
//!
//! `tests/reliability.rs` stays an executable of its own: it fills the device's memory, checks
//! that the process's memory pool does not grow over a soak, and poisons a CUDA context (in a
//! child process); each of those would disturb, or be disturbed by, GPU tests running beside it
//! in the same process.

mod common;

mod amg;
mod amg_gpu_graph;
mod auto_stats;
mod autosolve;
mod backend_core;
mod bad_input;
mod batched;
mod complex;
mod complex_gpu;
mod complex_gpu_ilu;
mod complex_gpu_solve;
mod complex_ilu;
mod complex_solve;
mod corpus;
mod dist_gpu;
mod dist_sim;
mod gpu_runtime;
mod ilu;
mod io;
mod mixed;
mod mixed_auto;
mod mixed_precond;
mod mixed_vectors;
mod multi_rhs;
mod primitives_more;
mod primitives_scan;
mod solve_timing;
mod solver_fused;
mod solver_graphs;
mod solver_observer;
mod solvers;
mod sparse_gpu;
mod spmm;
mod spmv_cpu;
mod spmv_gpu;
mod tridiag;
