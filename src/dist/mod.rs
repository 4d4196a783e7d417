//! Distributed sparse matrices and solvers: one row block per rank (GPU), 64-bit global indices.
//!
//! # The decomposition
//!
//! A square matrix of `n` rows (`n` and the nonzero count are `u64`, so a matrix of more than
//! 2^32 nonzeros can be split) is cut into contiguous row blocks, one per rank ([`Partition`]:
//! balanced by nonzeros when the global matrix is known, by rows for generated problems). Rank
//! `r` owns rows `starts[r]..starts[r+1]` **and the same entries of every vector** (`x`, `b`,
//! `r`, `p`, ...), so a vector operation is purely local and a dot product is a local sum plus one
//! all-reduce.
//!
//! Each rank's rows ([`RowBlock`], global `u64` column indices, built from a global
//! [`CsrMatrix`](crate::CsrMatrix) by [`RowBlock::from_csr`] or directly by a generator such as
//! [`poisson3d_block`], so that no process ever holds the whole matrix) become a [`DistPart`]:
//!
//! - local column numbering: the owned columns first (`0..n_owned`, in global order), then the
//!   **halo**, the columns owned by other ranks that this rank's rows touch (`n_owned..`, sorted
//!   by global index, hence grouped by owner rank);
//! - the **owned block** `A_oo` (owned rows × owned columns) as an ordinary 32-bit
//!   [`CsrMatrix`](crate::CsrMatrix), multiplied by the single-GPU SpMV;
//! - the **boundary block** `A_oh`: only the rows that touch the halo, compressed (row list,
//!   row pointer, halo-local columns), so its cost is proportional to the halo, not to `n`;
//! - the **receive lists** (which contiguous range of the halo comes from which peer) and the
//!   **send lists** (which owned entries each peer needs), computed once at setup by one
//!   all-to-all exchange of the needed global indices.
//!
//! `y = A·x` is then: gather `x[send_idx]`, exchange with the neighbours (grouped NCCL
//! send/receive on the GPU) **while** `y ← A_oo·x_owned` runs, then `y[rows] += A_oh·x_halo`.
//!
//! # Backends
//!
//! | | vectors | all-reduce and halo exchange |
//! |---|---|---|
//! | [`sim`] | `Vec<T>` per simulated rank, one thread each | shared memory between threads (for tests and CI) |
//! | `nccl` (feature `nccl`) | one GPU per rank, a thread per GPU or a process per GPU | NCCL all-reduce, grouped send/recv |
//!
//! Both implement [`VectorOps`](crate::backend::VectorOps) and
//! [`LinearOperator`](crate::backend::LinearOperator), so the distributed CG, Jacobi-PCG and
//! BiCGSTAB are the crate's own solver bodies ([`crate::solvers::cg`], ...) run once per rank:
//! every rank executes the same control flow because every decision is taken on all-reduced
//! (hence identical) scalars.

//!
//! # Preconditioners, timing and how many GPUs
//!
//! - [`BlockJacobi`] makes any single-device preconditioner (Jacobi, Chebyshev, ILU(0), IC(0),
//!   AMG) the local solver of each rank's diagonal block; the distributed Chebyshev polynomial
//!   is [`Chebyshev::from_operator`](crate::precond::Chebyshev::from_operator) on a distributed
//!   backend; [`DistAmg`] is smoothed-aggregation AMG across the ranks with the couplings
//!   between them kept (aggregates per rank, distributed prolongators and Galerkin products,
//!   small coarse levels gathered to rank 0; see [`amg`]);
//!   [`setup_precond`] builds any of them from a [`DistPrecond`] (see [`precond`]).
//! - [`solve_rank`] is one rank's solve with the crate's timing model (setup apart from the
//!   solver call; "Timing" in [`crate::solvers`]), generic over the distributed backend, so
//!   simulated ranks in CI run exactly what NCCL ranks run.
//! - [`choose_gpus`] decides how many GPUs a problem is worth from its size and the machine's
//!   measured communication costs (see [`auto`]); `nccl::measure_costs` measures them and
//!   `nccl::auto_gpus` does both (what `sparse-solve --gpus auto` calls).

pub mod amg;
pub mod auto;
mod block;
mod local;
pub mod precond;
pub mod sim;
mod solve;

#[cfg(feature = "nccl")]
pub mod nccl;

pub use amg::{DistAmg, DistAmgParams, DistAmgSummary};
pub use auto::{
    choose_gpus, min_gpus_for_memory, modelled_iteration_seconds, CommCosts, IterationWork,
    ProblemStats,
};
pub use block::{poisson3d_block, DistPart, Neighbor, Partition, RowBlock};
pub use precond::{
    agree, setup_precond, BlockJacobi, DistOperator, DistPrecond, LocalOps, LocalPrecond,
};
pub use solve::{solve_rank, DistSolve, Krylov, RankOutcome};
