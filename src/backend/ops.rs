//! The backend trait: a small required core, and the hooks every method shares.

use crate::backend::recur::{Slot, NSLOTS};
use crate::backend::Block;
use crate::scalar::Elem;

/// The backend of the solvers and preconditioners: vectors, scalar slots, and the operations on
/// them.
///
/// # The core
///
/// A backend implements a small **core** (the shape of AMGCL's backend interface):
///
/// | group | methods |
/// |---|---|
/// | vectors | [`len`](VectorOps::len), [`zeros`](VectorOps::zeros), [`upload`](VectorOps::upload), [`download`](VectorOps::download) |
/// | vector operations | [`copy`](VectorOps::copy), [`fill`](VectorOps::fill), [`scal`](VectorOps::scal), [`axpby`](VectorOps::axpby), [`axpbypcz`](VectorOps::axpbypcz), [`vmul`](VectorOps::vmul), [`dot`](VectorOps::dot) |
/// | scalar slots | [`scalars`](VectorOps::scalars), [`read_slots`](VectorOps::read_slots), [`write_slots`](VectorOps::write_slots), [`read_history`](VectorOps::read_history), [`update_slots`](VectorOps::update_slots) |
///
/// (the product `y ← A·x` is the operator's: [`LinearOperator`](super::LinearOperator)).
///
/// # Extensions
///
/// The rest has a default implementation written once from the core: the convenience operations
/// ([`set_zero`](VectorOps::set_zero), [`residual`](VectorOps::residual),
/// [`scale`](VectorOps::scale), [`axpy`](VectorOps::axpy), [`dotu`](VectorOps::dotu)), the
/// hooks of the solvers' loop ([`begin_block`](VectorOps::begin_block),
/// [`end_block`](VectorOps::end_block)) and the capability queries
/// ([`default_check_every`](VectorOps::default_check_every),
/// [`check_memory`](VectorOps::check_memory)). A backend overrides one to do it faster.
///
/// The solvers' own steps are extension traits of their own, grouped by method, each with
/// default bodies from this core ([`steps`](super::steps)): [`CgSteps`](super::CgSteps),
/// [`BicgSteps`](super::BicgSteps), [`ChebyshevSteps`](super::ChebyshevSteps), and GMRES's
/// [`KrylovOps`](super::KrylovOps). A new backend implements this core and names the others
/// (`impl CgSteps<T> for MyBackend {}`); the GPU backend overrides the steps with fused kernels.
///
/// # Scalars and blocks
///
/// The trait names no concrete number type beyond `T` ([`Elem`]: real or complex) and no vector
/// shape: the coefficients of the core are `T` and [`dot`](VectorOps::dot) returns `T` (for a
/// complex `T`, `xᴴy`; its norms `xᴴx` are real values held in `T`), so a complex scalar type
/// is a new `T`, and a block of vectors (several right-hand sides) is a backend whose `Vector`
/// is the block and whose `Scalars` hold one set of slots per column.
pub trait VectorOps<T: Elem> {
    /// A vector of `T` (host `Vec<T>`, or a device buffer).
    type Vector;
    /// The scalar slots ([`NSLOTS`] values of `T` indexed by [`Slot`]), the residual history
    /// (one value per iteration) and the reduction workspace.
    type Scalars;

    // ---- Core: vectors ------------------------------------------------------------------------

    /// A short name (`"cpu"`, `"gpu"`, ...).
    fn name(&self) -> &'static str;
    /// The length of `v`.
    fn len(&self, v: &Self::Vector) -> usize;
    /// A vector of `n` zeros.
    fn zeros(&self, n: usize) -> crate::Result<Self::Vector>;
    /// A vector holding `host`.
    fn upload(&self, host: &[T]) -> crate::Result<Self::Vector>;
    /// The contents of `v` on the host (synchronises).
    fn download(&self, v: &Self::Vector) -> crate::Result<Vec<T>>;

    // ---- Core: vector operations (host coefficients, no status) -------------------------------

    /// `dst ← src`.
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) -> crate::Result<()>;
    /// `v ← a` in every entry.
    fn fill(&self, v: &mut Self::Vector, a: T) -> crate::Result<()>;
    /// `v ← a·v`.
    fn scal(&self, a: T, v: &mut Self::Vector) -> crate::Result<()>;
    /// `y ← a·x + b·y`, evaluated as written. When `b` is zero `y` is not read (BLAS's rule).
    fn axpby(&self, a: T, x: &Self::Vector, b: T, y: &mut Self::Vector) -> crate::Result<()>;
    /// `z ← a·x + b·y + c·z`, evaluated left to right. When `c` is zero `z` is not read.
    #[allow(clippy::too_many_arguments)]
    fn axpbypcz(
        &self,
        a: T,
        x: &Self::Vector,
        b: T,
        y: &Self::Vector,
        c: T,
        z: &mut Self::Vector,
    ) -> crate::Result<()>;
    /// `z ← a·(x ∘ y) + b·z` (elementwise product). When `b` is zero `z` is not read.
    fn vmul(
        &self,
        a: T,
        x: &Self::Vector,
        y: &Self::Vector,
        b: T,
        z: &mut Self::Vector,
    ) -> crate::Result<()>;
    /// `xᵀy` (`xᴴy` for a complex `T`) on the host, summed in an order fixed by the backend so
    /// that the result is reproducible run to run; synchronises. `sc` lends its reduction
    /// workspace.
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, sc: &mut Self::Scalars) -> crate::Result<T>;
    /// The bilinear `xᵀy` (no conjugate), ordered and synchronised like [`dot`](VectorOps::dot).
    /// The default is `dot` for a real `T`; a backend that holds complex vectors overrides it
    /// (the default refuses a complex `T` with [`crate::Error::InvalidInput`]).
    fn dotu(&self, x: &Self::Vector, y: &Self::Vector, sc: &mut Self::Scalars) -> crate::Result<T> {
        if T::IS_COMPLEX {
            return Err(crate::Error::InvalidInput(format!(
                "the {} backend has no bilinear product xᵀy for {} vectors",
                self.name(),
                T::NAME
            )));
        }
        self.dot(x, y, sc)
    }

    // ---- Core: scalar slots -------------------------------------------------------------------

    /// Allocates the slots (all zero), a history of `max_iters + 1` entries and the reduction
    /// workspace for vectors of length `n`.
    fn scalars(&self, n: usize, max_iters: usize) -> crate::Result<Self::Scalars>;
    /// Writes the given slots (setup only).
    fn write_slots(&self, sc: &mut Self::Scalars, values: &[(Slot, T)]) -> crate::Result<()>;
    /// Reads all slots (synchronises).
    fn read_slots(&self, sc: &Self::Scalars) -> crate::Result<[T; NSLOTS]>;
    /// Reads the first `len` history entries (‖r‖² per iteration).
    fn read_history(&self, sc: &Self::Scalars, len: usize) -> crate::Result<Vec<T>>;
    /// Runs `f` on the slots and the whole history on the host (synchronises): how the default
    /// steps apply their recurrence.
    fn update_slots(
        &self,
        sc: &mut Self::Scalars,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> crate::Result<()>;

    // ---- Extensions: capability queries and hooks ---------------------------------------------

    /// The default of `SolveParams::check_every`: 1 (a host backend reads its slots for free).
    fn default_check_every(&self) -> usize {
        1
    }
    /// Checks, before a solve allocates its workspace, that `bytes` more of this backend's
    /// memory can be had for `what` (the [`crate::memory`] preflight): the CPU backend checks
    /// the host, the GPU backend the device. The default checks nothing (a backend whose
    /// memory cannot be queried).
    fn check_memory(&self, what: &str, bytes: u64) -> crate::Result<()> {
        let _ = (what, bytes);
        Ok(())
    }

    // ---- Extensions: convenience operations ---------------------------------------------------

    /// `v ← 0`.
    fn set_zero(&self, v: &mut Self::Vector) -> crate::Result<()> {
        self.fill(v, T::zero())
    }
    /// `r ← b − ax`.
    fn residual(
        &self,
        b: &Self::Vector,
        ax: &Self::Vector,
        r: &mut Self::Vector,
    ) -> crate::Result<()> {
        self.copy(b, r)?;
        self.axpby(-T::one(), ax, T::one(), r)
    }
    /// `z ← d ∘ r` (elementwise product).
    fn scale(&self, d: &Self::Vector, r: &Self::Vector, z: &mut Self::Vector) -> crate::Result<()> {
        self.vmul(T::one(), d, r, T::zero(), z)
    }
    /// `y ← y + αx` with a host scalar (GMRES's solution update once per cycle, setup).
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> crate::Result<()> {
        self.axpby(alpha, x, T::one(), y)
    }

    // ---- Extensions: the hooks of the solvers' loop (recorded blocks) --------------------------

    /// Begins a block of `len` iterations after iteration `it0` (the unit between two status
    /// checks). `key` names the block's sequence of steps (the same key and `len`: the same
    /// launches on the same buffers, iteration numbers relative to `it0`), `None` when it must
    /// not be recorded. The default runs the steps as they come ([`Block::Direct`]); a
    /// recording backend may instead run a block it recorded before ([`Block::Replayed`]: the
    /// caller skips the steps) or record the steps the caller issues next ([`Block::Recording`],
    /// closed by [`VectorOps::end_block`]).
    fn begin_block(
        &self,
        _sc: &mut Self::Scalars,
        _it0: usize,
        _len: usize,
        _key: Option<u64>,
    ) -> crate::Result<Block> {
        Ok(Block::Direct)
    }
    /// Closes a block begun as [`Block::Recording`] and runs it; `ok` is false when a step
    /// failed (the recording is then dropped).
    fn end_block(&self, _sc: &mut Self::Scalars, _ok: bool) -> crate::Result<()> {
        Ok(())
    }
}
