//! The backend trait: a small required core and the solvers' steps built from it.

pub(crate) mod defaults;

use crate::backend::recur::{Slot, NSLOTS};
use crate::backend::Block;
use crate::scalar::Scalar;

/// How a fused step applies the preconditioner `z = M⁻¹r` on its way.
pub enum Fuse<'a, V> {
    /// No preconditioner: `z` is `r` itself.
    Identity,
    /// Jacobi: `z = inv_diag ∘ r`, written to `z` by the same pass.
    Jacobi {
        /// The inverse of the diagonal.
        inv_diag: &'a V,
        /// Where `z` goes.
        z: &'a mut V,
    },
    /// A general preconditioner applied separately by [`Preconditioner::apply`]; the step
    /// reads `z` when it is given (start of PCG) and otherwise leaves `ρ` to
    /// [`VectorOps::cg_rho`].
    Separate(Option<&'a V>),
}

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
/// Everything else is an **extension** with a default implementation written once from the
/// core (`backend/ops/defaults.rs`): the convenience operations ([`set_zero`](VectorOps::set_zero),
/// [`residual`](VectorOps::residual), [`scale`](VectorOps::scale), [`axpy`](VectorOps::axpy)), the
/// solvers' fused steps (`cg_*`, `bicg_*`, [`poly_step`](VectorOps::poly_step)) and the hooks
/// and capability queries ([`begin_block`](VectorOps::begin_block),
/// [`bicg_fused`](VectorOps::bicg_fused), [`default_check_every`](VectorOps::default_check_every),
/// [`check_memory`](VectorOps::check_memory)). A default step reads the slots on the host, runs
/// the core operations and applies the step's recurrence of [`recur`](super::recur) with
/// [`update_slots`](VectorOps::update_slots): correct on every backend, and what the
/// simulated ranks run. A backend overrides a step to fuse it into fewer passes without the
/// host: the GPU backends (one kernel per step, scalars that never leave the device), and the
/// CPU backend (one pass per step, the reference the defaults are tested against, bit for
/// bit). An override must compute the same arithmetic as the default.
///
/// Every step takes the slots ([`VectorOps::Scalars`]) and reads and writes the scalars there;
/// a step is a no-op once the status slot is set (except where documented). Contract
/// violations (vectors of different lengths) panic.
///
/// # Scalars and blocks
///
/// The trait names no concrete number type beyond `T` and no vector shape: the coefficients of
/// the core are `T` and [`dot`](VectorOps::dot) returns `T` (for a complex `T`, `xᴴy`), so a
/// complex scalar type is a new `T`, and a block of vectors (several right-hand sides) is a
/// backend whose `Vector` is the block and whose `Scalars` hold one set of slots per column.
pub trait VectorOps<T: Scalar> {
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
        defaults::residual(self, b, ax, r)
    }
    /// `z ← d ∘ r` (elementwise product).
    fn scale(&self, d: &Self::Vector, r: &Self::Vector, z: &mut Self::Vector) -> crate::Result<()> {
        self.vmul(T::one(), d, r, T::zero(), z)
    }

    // ---- Extensions: the solvers' steps -------------------------------------------------------

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

    /// Start of (P)CG and BiCGSTAB at `iteration` (0, or the iteration of a restart): applies
    /// `fuse`, then [`recur::start`] with ‖r‖² and ρ = rᵀz.
    fn cg_start(
        &self,
        r: &Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_start(self, r, fuse, sc, iteration)
    }
    /// CG: pq = pᵀq, then [`recur::cg_alpha`].
    fn cg_alpha(
        &self,
        p: &Self::Vector,
        q: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_alpha(self, p, q, sc, iteration)
    }
    /// CG: `r ← r − αq`, `z` by `fuse`, then [`recur::cg_update_r`] with ‖r‖² and rᵀz.
    fn cg_update_r(
        &self,
        q: &Self::Vector,
        r: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_update_r(self, q, r, fuse, sc, iteration)
    }
    /// PCG with a separate preconditioner: [`recur::cg_rho`] with rᵀz.
    fn cg_rho(
        &self,
        r: &Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_rho(self, r, z, sc, iteration)
    }
    /// CG: `x ← x + αp; p ← z + βp`. Runs when the status is unset **or was set in this
    /// `iteration`** (so the converging iteration's `x` update is not lost).
    fn cg_update_xp(
        &self,
        x: &mut Self::Vector,
        p: &mut Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_update_xp(self, x, p, z, sc, iteration)
    }
    /// BiCGSTAB: `p ← r + β(p − ωv)`, and `p̂ = M⁻¹p` when `fuse` is Jacobi.
    fn bicg_p(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        p: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()> {
        defaults::bicg_p(self, r, v, p, fuse, sc)
    }
    /// BiCGSTAB: r̂ᵀv, then [`recur::bicg_alpha`].
    fn bicg_alpha(
        &self,
        rhat: &Self::Vector,
        v: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::bicg_alpha(self, rhat, v, sc, iteration)
    }
    /// BiCGSTAB: `s ← r − αv`, and `ŝ = M⁻¹s` when `fuse` is Jacobi.
    fn bicg_s(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        s: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()> {
        defaults::bicg_s(self, r, v, s, fuse, sc)
    }
    /// BiCGSTAB: tᵀs and tᵀt, then [`recur::bicg_omega`].
    fn bicg_omega(
        &self,
        t: &Self::Vector,
        s: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::bicg_omega(self, t, s, sc, iteration)
    }
    /// `y ← y + αx` with a host scalar (GMRES's solution update once per cycle, setup).
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> crate::Result<()> {
        self.axpby(alpha, x, T::one(), y)
    }

    /// One step of the Chebyshev recurrence of the Chebyshev preconditioner (`precond::Chebyshev`), with host
    /// scalars `c1`, `c2` and `t = A·d` (or `t = r` when `first`), `D⁻¹` when given:
    ///
    /// - `first`: `res ← D⁻¹t; d ← c2·res; z ← d`
    /// - otherwise: `res ← res − D⁻¹t; d ← c1·d + c2·res; z ← z + d`
    ///
    /// Runs regardless of the status (a preconditioner has no status).
    #[allow(clippy::too_many_arguments)]
    fn poly_step(
        &self,
        t: &Self::Vector,
        inv_diag: Option<&Self::Vector>,
        res: &mut Self::Vector,
        d: &mut Self::Vector,
        z: &mut Self::Vector,
        first: bool,
        c1: T,
        c2: T,
    ) -> crate::Result<()> {
        defaults::poly_step(self, t, inv_diag, res, d, z, first, c1, c2)
    }

    /// BiCGSTAB: `x ← x + αp̂ + ωŝ; r ← s − ωt`, then [`recur::bicg_update`] with ‖r‖² and r̂ᵀr.
    #[allow(clippy::too_many_arguments)]
    fn bicg_update(
        &self,
        x: &mut Self::Vector,
        phat: &Self::Vector,
        shat: &Self::Vector,
        s: &Self::Vector,
        t: &Self::Vector,
        r: &mut Self::Vector,
        rhat: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::bicg_update(self, x, phat, shat, s, t, r, rhat, sc, iteration)
    }

    // ---- Extensions: steps fused further (the GPU's small-system path) -----------------------

    /// CG after the operator, for the identity or Jacobi `fuse` (not
    /// [`Fuse::Separate`]): [`VectorOps::cg_alpha`], [`VectorOps::cg_update_r`] and
    /// [`VectorOps::cg_update_xp`] (with `z = r` for the identity), in that order. The default
    /// issues the three steps; a backend may do them in fewer passes (the GPU backend in one
    /// launch on small systems), with the same arithmetic.
    #[allow(clippy::too_many_arguments)]
    fn cg_tail(
        &self,
        x: &mut Self::Vector,
        p: &mut Self::Vector,
        q: &Self::Vector,
        r: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::cg_tail(self, x, p, q, r, fuse, sc, iteration)
    }

    /// Whether BiCGSTAB on vectors of length `n` runs its fused step order
    /// ([`VectorOps::bicg_alpha_s`], [`VectorOps::bicg_update_p`]): `p`'s update moves from the
    /// start of an iteration to the end of the previous one (and of the (re)start), where a
    /// backend can fuse it with the reductions before it. The default, false, keeps the
    /// separate steps (the CPU's order is unchanged).
    fn bicg_fused(&self, n: usize) -> bool {
        let _ = n;
        false
    }

    /// BiCGSTAB: [`VectorOps::bicg_alpha`] then [`VectorOps::bicg_s`] (`s ← r − αv`, `ŝ` by
    /// `fuse`). The default issues the two steps.
    #[allow(clippy::too_many_arguments)]
    fn bicg_alpha_s(
        &self,
        rhat: &Self::Vector,
        r: &Self::Vector,
        v: &Self::Vector,
        s: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::bicg_alpha_s(self, rhat, r, v, s, fuse, sc, iteration)
    }

    /// BiCGSTAB: [`VectorOps::bicg_omega`], [`VectorOps::bicg_update`], then the next
    /// iteration's [`VectorOps::bicg_p`]
    /// (`p ← r + β(p − ωv)`). `phat` is `p̂` (read by `x`'s update; `None`: `p̂` is `p`); with
    /// `inv_diag` (Jacobi) the new `p̂ = D⁻¹p` is written into it, without (a separate
    /// preconditioner) it is left for [`Preconditioner::apply`]. The default issues the two
    /// steps.
    #[allow(clippy::too_many_arguments)]
    fn bicg_update_p(
        &self,
        x: &mut Self::Vector,
        phat: Option<&mut Self::Vector>,
        inv_diag: Option<&Self::Vector>,
        shat: &Self::Vector,
        s: &Self::Vector,
        t: &Self::Vector,
        r: &mut Self::Vector,
        rhat: &Self::Vector,
        p: &mut Self::Vector,
        v: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        defaults::bicg_update_p(
            self, x, phat, inv_diag, shat, s, t, r, rhat, p, v, sc, iteration,
        )
    }
}
