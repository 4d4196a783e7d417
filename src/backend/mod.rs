//! The backend layer: where vectors live and how the solvers' vector steps run on them.
//!
//! A backend is a type implementing [`VectorOps`]: what a vector is (`Vec<T>` on the CPU, a
//! device buffer on the GPU), a small block of *scalar slots* that holds ρ, α, β, ω, ‖r‖² and a
//! status word ([`VectorOps::Scalars`]: host values on the CPU, device memory on the GPU), and
//! the vector steps the solvers and preconditioners issue. The operators are bound to a backend
//! through two traits that live here too, so that the solvers (`crate::solvers`) and the
//! preconditioners (`crate::precond`) both look down at them and never at each other:
//!
//! - [`LinearOperator`]: `y ← A·x` with the backend's vectors (implemented for
//!   [`CsrMatrix`](crate::CsrMatrix) on the CPU and for the GPU SpMV's matrix in `crate::spmv`,
//!   and for your own matrix-free operator);
//! - [`Preconditioner`]: `z ← M⁻¹r` ([`Identity`] is here; the others are in `crate::precond`).
//!
//! | backend | vectors | scalars | where |
//! |---|---|---|---|
//! | [`Cpu`] | `Vec<T>` | host | [`cpu`] (rayon over fixed chunks, reproducible sums) |
//! | `GpuOps` (feature `cuda`) | `CudaSlice<T>` | device | `gpu` (fused kernels, CUDA graphs) |
//! | [`sim::SimOps`] | `Vec<T>` per simulated rank | host, all-reduced over threads | [`sim`] |
//! | `NcclOps` (feature `nccl`) | `CudaSlice<T>` per GPU rank | device, all-reduced by NCCL | `nccl` |
//!
//! The scalar recurrences every backend computes (α = ρ/pᵀAp, ...) are written once in Rust in
//! [`recur`] and mirrored in `kernels/solvers/`.

mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod recur;
pub mod sim;

pub use cpu::{Cpu, CpuKrylov, CpuScalars};
pub use recur::{GmresLayout, Slot, Status, NSLOTS};

#[cfg(feature = "cuda")]
pub use gpu::GpuScalar;

use crate::error::Result;
use crate::scalar::Scalar;

/// No preconditioning (`M = I`). The solvers skip the `z` vector entirely.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl<T: Scalar, B: VectorOps<T>> Preconditioner<T, B> for Identity {
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        be.copy(r, z)
    }
    fn is_identity(&self) -> bool {
        true
    }
}

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

/// The backend of the solvers: vectors, device-resident scalar slots, and the fused steps.
///
/// Every step takes the slots ([`VectorOps::Scalars`]) and reads and writes the scalars there; a
/// step is a no-op once the status slot is set (except where documented). The scalar
/// recurrences of each step are spelled out in [`recur`]: an implementation must compute exactly
/// those. Contract violations (vectors of different lengths) panic.
pub trait VectorOps<T: Scalar> {
    /// A vector of `T` (host `Vec<T>`, or a device buffer).
    type Vector;
    /// The scalar slots ([`NSLOTS`] values of `T` indexed by [`Slot`]), the residual history
    /// (one value per iteration) and the reduction workspace.
    type Scalars;

    /// `"cpu"` or `"gpu"`.
    fn name(&self) -> &'static str;
    /// The default of `SolveParams::check_every`.
    fn default_check_every(&self) -> usize;
    /// The length of `v`.
    fn len(&self, v: &Self::Vector) -> usize;
    /// A vector of `n` zeros.
    fn zeros(&self, n: usize) -> crate::Result<Self::Vector>;
    /// A vector holding `host`.
    fn upload(&self, host: &[T]) -> crate::Result<Self::Vector>;
    /// The contents of `v` on the host (synchronises).
    fn download(&self, v: &Self::Vector) -> crate::Result<Vec<T>>;
    /// `dst ← src`.
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) -> crate::Result<()>;
    /// `v ← 0`.
    fn set_zero(&self, v: &mut Self::Vector) -> crate::Result<()>;
    /// `r ← b − ax`.
    fn residual(
        &self,
        b: &Self::Vector,
        ax: &Self::Vector,
        r: &mut Self::Vector,
    ) -> crate::Result<()>;
    /// `z ← d ∘ r` (elementwise product).
    fn scale(&self, d: &Self::Vector, r: &Self::Vector, z: &mut Self::Vector) -> crate::Result<()>;
    /// `xᵀy` on the host (synchronises; for setup and final checks, not inside iterations).
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, sc: &mut Self::Scalars)
        -> crate::Result<f64>;

    /// Checks, before a solve allocates its workspace, that `bytes` more of this backend's
    /// memory can be had for `what` (the [`crate::memory`] preflight): the CPU backend checks
    /// the host, the GPU backend the device. The default checks nothing (a backend whose
    /// memory cannot be queried).
    fn check_memory(&self, what: &str, bytes: u64) -> crate::Result<()> {
        let _ = (what, bytes);
        Ok(())
    }

    /// Allocates the slots (all zero), a history of `max_iters + 1` entries and the reduction
    /// workspace for vectors of length `n`.
    fn scalars(&self, n: usize, max_iters: usize) -> crate::Result<Self::Scalars>;
    /// Writes the given slots (setup only).
    fn write_slots(&self, sc: &mut Self::Scalars, values: &[(Slot, T)]) -> crate::Result<()>;
    /// Reads all slots (synchronises).
    fn read_slots(&self, sc: &Self::Scalars) -> crate::Result<[T; NSLOTS]>;
    /// Reads the first `len` history entries (‖r‖² per iteration).
    fn read_history(&self, sc: &Self::Scalars, len: usize) -> crate::Result<Vec<T>>;

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
    ) -> crate::Result<()>;
    /// CG: pq = pᵀq, then [`recur::cg_alpha`].
    fn cg_alpha(
        &self,
        p: &Self::Vector,
        q: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// CG: `r ← r − αq`, `z` by `fuse`, then [`recur::cg_update_r`] with ‖r‖² and rᵀz.
    fn cg_update_r(
        &self,
        q: &Self::Vector,
        r: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// PCG with a separate preconditioner: [`recur::cg_rho`] with rᵀz.
    fn cg_rho(
        &self,
        r: &Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// CG: `x ← x + αp; p ← z + βp`. Runs when the status is unset **or was set in this
    /// `iteration`** (so the converging iteration's `x` update is not lost).
    fn cg_update_xp(
        &self,
        x: &mut Self::Vector,
        p: &mut Self::Vector,
        z: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// BiCGSTAB: `p ← r + β(p − ωv)`, and `p̂ = M⁻¹p` when `fuse` is Jacobi.
    fn bicg_p(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        p: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()>;
    /// BiCGSTAB: r̂ᵀv, then [`recur::bicg_alpha`].
    fn bicg_alpha(
        &self,
        rhat: &Self::Vector,
        v: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// BiCGSTAB: `s ← r − αv`, and `ŝ = M⁻¹s` when `fuse` is Jacobi.
    fn bicg_s(
        &self,
        r: &Self::Vector,
        v: &Self::Vector,
        s: &mut Self::Vector,
        fuse: Fuse<'_, Self::Vector>,
        sc: &mut Self::Scalars,
    ) -> crate::Result<()>;
    /// BiCGSTAB: tᵀs and tᵀt, then [`recur::bicg_omega`].
    fn bicg_omega(
        &self,
        t: &Self::Vector,
        s: &Self::Vector,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// `y ← y + αx` with a host scalar (GMRES's solution update once per cycle, setup).
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> crate::Result<()>;

    /// One step of the Chebyshev recurrence of the Chebyshev preconditioner (`crate::precond::Chebyshev`), with host
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
    ) -> crate::Result<()>;

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
    ) -> crate::Result<()>;

    // ---- Fused steps (the small-system path; see "Fused steps" in the module docs) ----------

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
        separate::cg_tail(self, x, p, q, r, fuse, sc, iteration)
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
        separate::bicg_alpha_s(self, rhat, r, v, s, fuse, sc, iteration)
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
        separate::bicg_update_p(
            self, x, phat, inv_diag, shat, s, t, r, rhat, p, v, sc, iteration,
        )
    }
}

/// The fused steps of [`VectorOps`] as their separate steps: the trait's default
/// implementations, also called by a backend that fuses only some systems (the GPU on large
/// ones).
pub(crate) mod separate {
    use super::{Fuse, VectorOps};
    use crate::scalar::Scalar;

    /// [`VectorOps::cg_tail`] as three steps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cg_tail<T: Scalar, B: VectorOps<T> + ?Sized>(
        be: &B,
        x: &mut B::Vector,
        p: &mut B::Vector,
        q: &B::Vector,
        r: &mut B::Vector,
        fuse: Fuse<'_, B::Vector>,
        sc: &mut B::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        be.cg_alpha(p, q, sc, iteration)?;
        match fuse {
            Fuse::Identity => {
                be.cg_update_r(q, r, Fuse::Identity, sc, iteration)?;
                be.cg_update_xp(x, p, r, sc, iteration)
            }
            Fuse::Jacobi { inv_diag, z } => {
                be.cg_update_r(
                    q,
                    r,
                    Fuse::Jacobi {
                        inv_diag,
                        z: &mut *z,
                    },
                    sc,
                    iteration,
                )?;
                be.cg_update_xp(x, p, z, sc, iteration)
            }
            Fuse::Separate(_) => {
                panic!("cg_tail: a separate preconditioner is applied between the steps")
            }
        }
    }

    /// [`VectorOps::bicg_alpha_s`] as two steps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bicg_alpha_s<T: Scalar, B: VectorOps<T> + ?Sized>(
        be: &B,
        rhat: &B::Vector,
        r: &B::Vector,
        v: &B::Vector,
        s: &mut B::Vector,
        fuse: Fuse<'_, B::Vector>,
        sc: &mut B::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        be.bicg_alpha(rhat, v, sc, iteration)?;
        be.bicg_s(r, v, s, fuse, sc)
    }

    /// [`VectorOps::bicg_update_p`] as two steps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bicg_update_p<T: Scalar, B: VectorOps<T> + ?Sized>(
        be: &B,
        x: &mut B::Vector,
        phat: Option<&mut B::Vector>,
        inv_diag: Option<&B::Vector>,
        shat: &B::Vector,
        s: &B::Vector,
        t: &B::Vector,
        r: &mut B::Vector,
        rhat: &B::Vector,
        p: &mut B::Vector,
        v: &B::Vector,
        sc: &mut B::Scalars,
        iteration: usize,
    ) -> crate::Result<()> {
        be.bicg_omega(t, s, sc, iteration)?;
        match phat {
            None => {
                be.bicg_update(x, p, shat, s, t, r, rhat, sc, iteration)?;
                be.bicg_p(r, v, p, Fuse::Identity, sc)
            }
            Some(ph) => {
                be.bicg_update(x, ph, shat, s, t, r, rhat, sc, iteration)?;
                let fuse = match inv_diag {
                    Some(inv_diag) => Fuse::Jacobi { inv_diag, z: ph },
                    None => Fuse::Separate(None),
                };
                be.bicg_p(r, v, p, fuse, sc)
            }
        }
    }
}

/// The multi-vector steps of GMRES (and of the Arnoldi/Lanczos eigenvalue estimate of the
/// Chebyshev preconditioner (`crate::precond::Chebyshev`)): a backend offers them on top of [`VectorOps`]. Kept apart so
/// that a backend with only the single-vector steps (the distributed backends of `dist`) still
/// runs CG, PCG and BiCGSTAB, and gains GMRES by implementing this trait.
pub trait KrylovOps<T: Scalar>: VectorOps<T> {
    /// GMRES's Krylov workspace: `m + 1` basis vectors of length `n` and the small dense arrays of
    /// [`recur::GmresLayout`] (on the device for the GPU), plus whatever the fused multi-vector
    /// steps need (the GPU keeps a device table of the basis pointers and its partial sums).
    type Krylov;
    /// Allocates the Krylov workspace for vectors of length `n` and restart length `m ≥ 1`.
    fn krylov(&self, n: usize, m: usize) -> crate::Result<Self::Krylov>;
    /// The basis vectors `v_j` and `v_{j+1}` (`j < m`): the operator reads the first and writes
    /// the second before [`KrylovOps::gmres_arnoldi`].
    fn krylov_pair<'k>(
        &self,
        k: &'k mut Self::Krylov,
        j: usize,
    ) -> (&'k Self::Vector, &'k mut Self::Vector);
    /// The small arrays ([`recur::GmresLayout`]) on the host (synchronises; setup only, e.g. for
    /// eigenvalue estimates from the Hessenberg matrix).
    fn krylov_small(&self, k: &Self::Krylov) -> crate::Result<Vec<T>>;
    /// GMRES start of a cycle at `iteration`: ‖r‖², then [`recur::gmres_start`], and
    /// `v₀ = r/‖r‖`.
    fn gmres_start(
        &self,
        r: &Self::Vector,
        k: &mut Self::Krylov,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// GMRES Arnoldi step for column `j`: orthogonalises `w = v_{j+1}` against `v_0 … v_j` by
    /// classical Gram–Schmidt applied twice (CGS2: each pass is one fused block of `j + 1` dot
    /// products and one fused `w ← w − V·c`), takes ‖w‖², runs [`recur::gmres_column`] (Givens
    /// rotations and the tests, on the device for the GPU) and normalises `v_{j+1}`.
    fn gmres_arnoldi(
        &self,
        k: &mut Self::Krylov,
        j: usize,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> crate::Result<()>;
    /// GMRES: solves the leading `ncols × ncols` block of `R·y = g` ([`recur::gmres_solve_y`])
    /// and writes `u ← V·y` (the correction before preconditioning). Runs regardless of the
    /// status.
    fn gmres_combine(
        &self,
        k: &mut Self::Krylov,
        ncols: usize,
        u: &mut Self::Vector,
    ) -> crate::Result<()>;
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
pub trait LinearOperator<T: Scalar, B: VectorOps<T>> {
    /// Rows of `A` (the length of `y` and `b`).
    fn nrows(&self) -> usize;
    /// Columns of `A` (the length of `x`).
    fn ncols(&self) -> usize;
    /// `y ← A·x`. Must not synchronise with the host (on the GPU: queue work on the stream).
    fn apply(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> crate::Result<()>;
}

/// A preconditioner `z ← M⁻¹r`.
pub trait Preconditioner<T: Scalar, B: VectorOps<T>> {
    /// `z ← M⁻¹r`.
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> crate::Result<()>;
    /// `Some(D⁻¹)` for a diagonal preconditioner: the solvers then fuse `z = D⁻¹r` into their
    /// vector updates instead of calling [`Preconditioner::apply`].
    fn inverse_diagonal(&self) -> Option<&B::Vector> {
        None
    }
    /// True for the identity (no preconditioning): `z` is then `r` itself.
    fn is_identity(&self) -> bool {
        false
    }
}
