//! The backend layer: where vectors live and how the solvers' vector steps run on them.
//!
//! A backend is a type implementing [`VectorOps`]: what a vector is (`Vec<T>` on the CPU, a
//! device buffer on the GPU), a small block of *scalar slots* that holds ρ, α, β, ω, ‖r‖² and a
//! status word ([`VectorOps::Scalars`]: host values on the CPU, device memory on the GPU), and
//! the vector steps the solvers and preconditioners issue. The operators are bound to a backend
//! through two traits that live here too, so that the solvers (`solvers`) and the
//! preconditioners (`precond`) both look down at them and never at each other:
//!
//! - [`LinearOperator`]: `y ← A·x` with the backend's vectors (implemented for
//!   [`CsrMatrix`](crate::CsrMatrix) on the CPU and for the GPU SpMV's matrix in `crate::spmv`,
//!   and for your own matrix-free operator);
//! - [`Preconditioner`]: `z ← M⁻¹r` ([`Identity`] is here; the others are in `precond`).
//!
//! | backend | vectors | scalars | where |
//! |---|---|---|---|
//! | [`Cpu`] | `Vec<T>` | host | [`cpu`] (rayon over fixed chunks, reproducible sums) |
//! | `GpuOps` (feature `cuda`) | `CudaSlice<T::Dev>` (real or complex `T`) | device | `gpu` (recurrence kernels, CUDA graphs; fused small-system kernels for real `T`) |
//! | [`sim::SimOps`] | `Vec<T>` per simulated rank | host, all-reduced over threads | [`sim`] |
//! | `NcclOps` (feature `nccl`) | `CudaSlice<T>` per GPU rank | device, all-reduced by NCCL | `nccl` |
//!
//! The scalar recurrences every backend computes (α = ρ/pᵀAp, ...) are written once in Rust in
//! [`recur`] and mirrored in `kernels/solvers/`.
//!
//! # The traits a backend implements
//!
//! | trait | what | needed by |
//! |---|---|---|
//! | [`VectorOps`] | vectors, the core vector operations and reductions, the scalar slots (17 required methods), the hooks of the solvers' loop | everything |
//! | [`CgSteps`] | the fused steps of CG (defaults from the core) | `cg`, `pcg`, `cocg`; BiCGSTAB's start |
//! | [`BicgSteps`] | the fused steps of BiCGSTAB (defaults from the core) | `bicgstab` |
//! | [`ChebyshevSteps`] | the Chebyshev recurrence (default from the core) | the Chebyshev preconditioner, the AMG smoother |
//! | [`KrylovOps`] | GMRES's Krylov basis and its steps (defaults on a host workspace) | `gmres`, the Arnoldi/Lanczos estimates |
//! | [`BlockOps`], [`BlockKrylovOps`] | the steps above for a slice of columns in one call (defaults: each column's step in turn) | `solvers::multi`, the AMG cycle on a block |
//! | [`TriangularOps`] | triangular solves with an incomplete factor | ILU(0)/IC(0) (made by `sparse::incomplete::IncompleteOps`) |
//! | [`MultigridOps`] | a sparse matrix type with `y ← αAx + βy` | AMG (set up by `precond::amg::AmgOps`) |
//! | [`NarrowOps`] | an `f32` backend beside an `f64` one, and the conversions between their vectors | `precond::Narrowed` (a preconditioner stored and run in `f32` under an `f64` solve) |
//!
//! [`SolverOps`] names the first five together, for code that runs any method. A new backend
//! implements the core of [`VectorOps`] and names the step traits with empty `impl`s
//! (`tests/all/backend_core.rs` does so and gets the CPU's iterates bit for bit), the block
//! steps too.

mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
mod krylov;
mod multigrid;
mod narrow;
#[cfg(feature = "nccl")]
pub mod nccl;
mod ops;
pub mod recur;
pub mod sim;
pub mod steps;
mod triangular;

pub use cpu::{Cpu, CpuScalars};
pub use krylov::{HostKrylov, KrylovOps, KrylovSpace};
pub use multigrid::MultigridOps;
pub use narrow::{LowVector, NarrowOps};
pub use ops::VectorOps;
pub use recur::{GmresLayout, Slot, Status, NSLOTS};
pub use steps::{
    BicgColumn, BicgSteps, BlockKrylovOps, BlockOps, CgColumn, CgSteps, ChebyshevSteps, Fuse,
    GmresColumn, PolyColumn, Pre, SolverOps,
};
pub use triangular::TriangularOps;

#[cfg(feature = "cuda")]
pub use gpu::GpuScalar;

use crate::error::Result;
use crate::scalar::Elem;

/// No preconditioning (`M = I`). The solvers skip the `z` vector entirely.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl<T: Elem, B: VectorOps<T>> Preconditioner<T, B> for Identity {
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        be.copy(r, z)
    }
    fn is_identity(&self) -> bool {
        true
    }
}

/// What [`VectorOps::begin_block`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Nothing: the caller issues the block's steps, which run as they come.
    Direct,
    /// The caller issues the steps; the backend records them, and runs them at
    /// [`VectorOps::end_block`].
    Recording,
    /// The backend ran a recorded block: the caller skips the steps.
    Replayed,
}

/// A linear operator `y ← A·x` on the backend `B`'s vectors. Implement it for your own
/// (matrix-free) operator to solve with it.
pub trait LinearOperator<T: Elem, B: VectorOps<T>> {
    /// Rows of `A` (the length of `y` and `b`).
    fn nrows(&self) -> usize;
    /// Columns of `A` (the length of `x`).
    fn ncols(&self) -> usize;
    /// `y ← A·x`. Must not synchronise with the host (on the GPU: queue work on the stream).
    fn apply(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> crate::Result<()>;
    /// `y ← A·x` with the operator's exact values, for the true residuals `b − A·x` that decide
    /// convergence. An operator that applies its values from a narrower storage than its vectors
    /// (a matrix stored in `f32` under `f64` vectors, `spmv::mixed`) gives here the product with
    /// the values it was built from; every other operator is exact already, and the default is
    /// [`LinearOperator::apply`]. Same contract as `apply`.
    fn apply_exact(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> crate::Result<()> {
        self.apply(be, x, y)
    }
    /// True when [`LinearOperator::apply`] uses values rounded from those of
    /// [`LinearOperator::apply_exact`]: the solvers then replace their recursively updated
    /// residual by the true one from time to time (reliable updates; `solvers` module docs), so
    /// that the answer is as accurate as the exact values allow. False by default.
    fn is_narrowed(&self) -> bool {
        false
    }
    /// Called once before a solve, with the most applications it may make: an operator with a
    /// choice of kernels may measure them here (a GPU matrix tunes its SpMV when that costs
    /// under 2 % of them). Does nothing by default.
    fn prepare(&self, _be: &B, _expected_applies: usize) -> crate::Result<()> {
        Ok(())
    }
    /// `ys[j] ← A·xs[j]` for every `j`: the product with a block of vectors (the solvers with
    /// several right-hand sides). The default applies the operator to one column after the
    /// other; an operator that reads its matrix once for the whole block (the GPU matrix,
    /// through its SpMM) overrides it. Same contract as [`LinearOperator::apply`].
    fn apply_block(
        &self,
        be: &B,
        xs: &[&B::Vector],
        ys: &mut [&mut B::Vector],
    ) -> crate::Result<()> {
        assert_eq!(xs.len(), ys.len(), "apply_block: as many outputs as inputs");
        for (x, y) in xs.iter().zip(ys.iter_mut()) {
            self.apply(be, x, y)?;
        }
        Ok(())
    }
}

/// A preconditioner `z ← M⁻¹r`.
pub trait Preconditioner<T: Elem, B: VectorOps<T>> {
    /// `z ← M⁻¹r`.
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> crate::Result<()>;
    /// `zs[j] ← M⁻¹rs[j]` for every `j` (the solvers with several right-hand sides). The
    /// default applies [`Preconditioner::apply`] to one column after the other; a
    /// preconditioner that can share its work over the block (the AMG cycle, with one SpMM per
    /// matrix of the hierarchy) overrides it.
    fn apply_block(
        &self,
        be: &B,
        rs: &[&B::Vector],
        zs: &mut [&mut B::Vector],
    ) -> crate::Result<()> {
        assert_eq!(rs.len(), zs.len(), "apply_block: as many outputs as inputs");
        for (r, z) in rs.iter().zip(zs.iter_mut()) {
            self.apply(be, r, z)?;
        }
        Ok(())
    }
    /// `Some(D⁻¹)` for a diagonal preconditioner: the solvers then fuse `z = D⁻¹r` into their
    /// vector updates instead of calling [`Preconditioner::apply`].
    fn inverse_diagonal(&self) -> Option<&B::Vector> {
        None
    }
    /// True for the identity (no preconditioning): `z` is then `r` itself.
    fn is_identity(&self) -> bool {
        false
    }
    /// What one application costs, roughly, in products with the operator: 0 (the default)
    /// for the identity and diagonal scalings, the polynomial's degree for Chebyshev, about 8
    /// for an AMG V-cycle. A solve whose status the host reads every `k` iterations by default
    /// ([`SolveParams::check_every`](crate::solvers::SolveParams::check_every)) reads it every
    /// `k / (1 + cost)` iterations instead, so that an expensive preconditioner is not applied
    /// for up to `k − 1` iterations past convergence.
    fn cost_in_products(&self) -> f64 {
        0.0
    }
}

/// Panics unless vectors of lengths `a` and `b` match: a caller's bug (the solvers allocate
/// every vector of a solve with one length), not an input error.
pub(crate) fn same_len(what: &str, a: usize, b: usize) {
    assert_eq!(a, b, "{what}: vectors of lengths {a} and {b}");
}

/// [`same_len`] of `n` and each `(name, length)` of `lens`, for the steps with many vectors.
pub(crate) fn same_lens(op: &str, n: usize, lens: &[(&str, usize)]) {
    for &(what, l) in lens {
        assert_eq!(n, l, "{op}: {what} has length {l}, the first vector {n}");
    }
}
