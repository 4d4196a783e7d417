//! The GPU backend of the solvers: device vectors, device-resident scalars, fused kernels.
//!
//! [`GpuOps<T>`] implements [`VectorOps`] with `CudaSlice<T>` vectors and a small device buffer
//! of scalar slots. The kernels (`kernels/solvers/`, one file per solver) compute α, β, ω and the
//! convergence, breakdown and NaN tests in the last block of their reductions, so an iteration
//! never waits for the host; the host reads the slots every
//! `SolveParams::check_every` iterations (16 by default, fewer under an expensive
//! preconditioner: `Preconditioner::cost_in_products`). All
//! work is ordered on the [`Gpu`]'s one stream. A solve allocates its vectors, the slots, the
//! residual history (`max_iters + 1` values) and the per-block partial sums up front, and nothing
//! per iteration.
//!
//! GMRES keeps its basis as `m + 1` device vectors plus a device table of their pointers
//! ([`GpuKrylov`]), so one launch computes all `j + 1` Gram–Schmidt coefficients of a column (a
//! 2-D grid: blocks × basis vectors) and one launch subtracts them; the Hessenberg column, the
//! Givens rotations and the residual estimate are computed by the last block of the second
//! pass, and the small least-squares solve at the end of a cycle by a one-thread kernel.
//!
//! Reductions are deterministic: a fixed grid (chosen from `n` and the SM count, see
//! [`BLOCKS_PER_SM`]) writes one partial per block and the last block sums them in block order.
//! Results therefore agree bit for bit from run to run on one device, though not with the CPU
//! backend (whose summation order differs).
//!
//! # Small systems: fused kernels
//!
//! On a system of a few thousand rows every kernel is short and waits on the one before, so an
//! iteration costs about as many microseconds as it has kernels, even replayed as a CUDA graph
//! (Nsight Compute on an H100, raefsky2: 2.7–3.2 µs for a one-pass vector kernel of 13 blocks,
//! 5.6–7.6 µs for one that ends in a reduction and its last-block epilogue). Up to
//! [`GpuOps::fused_rows`] rows (`256 ·` SM count: 33,792 on an H100 or H200) the backend
//! therefore runs the fused steps of [`VectorOps`] as single launches:
//!
//! | method | separate kernels per iteration | fused |
//! |---|---|---|
//! | CG, Jacobi-PCG | SpMV, `cg_alpha`, `cg_update_r`, `cg_update_xp` | SpMV, `cg_fused` ([`VectorOps::cg_tail`]) |
//! | BiCGSTAB (any preconditioner) | `bicg_p`, SpMV, `bicg_alpha`, `bicg_s`, SpMV, `bicg_omega`, `bicg_update` | SpMV, `bicg_alpha_s`, SpMV, `bicg_update_p` (the next `p` included) |
//! | GMRES(m), column `j` | SpMV, 2 × (`gmres_dots`, `gmres_update`), `gmres_scale` | SpMV, `gmres_arnoldi` |
//!
//! Where a separate kernel ends in a reduction, a fused kernel meets at a **grid barrier** (one
//! release-add per block and an acquire spin on a word whose top bit flips once per barrier),
//! after which every block sums the per-block partials itself, in block order, and runs the
//! scalar recurrence on its own shared-memory copy of the slots (block 0 writes them back): no
//! block waits for another's epilogue. Blocks that wait for each other must all be resident:
//! the kernels are launched **cooperatively** (the driver refuses a grid that could not be), the
//! grid is at most one block per SM, and [`GpuOps::new`] checks with the occupancy calculator
//! that one block fits; a device where it does not runs the separate kernels. The grid is the
//! one the separate kernels use, each thread handles the same element, and the reductions and
//! recurrences are the same code, so **results equal the separate kernels' bit for bit**
//! (iterations, residual histories, solutions, errors; `tests/all/solver_fused.rs`).
//!
//! Why the bound is `256 ·` SM count: below it the separate kernels' grid is one block of 256
//! threads per 256 rows, at most one per SM, which is co-resident and gives each thread one
//! element, so the fused kernels keep every vector value in registers across their barriers.
//! Above it the separate kernels use up to [`BLOCKS_PER_SM`] blocks per SM for bandwidth, and a
//! fused kernel would need either a different grid (different sums) or blocks that wait on
//! blocks that may not be resident. Measured on an H100 (`benches/results/history/solvers.md`), the
//! fused path is faster at every size up to the bound (0.71–0.84× the separate kernels' time per
//! iteration with graphs, Poisson 2D 32² to 183², CG, BiCGSTAB and GMRES), so `Auto` uses it up to
//! there. [`FusedPath::Off`] keeps the separate kernels (for comparison).

pub(crate) mod block;

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaGraph, CudaSlice, PushKernelArg};

use super::recur::{Slot, Status, NSLOTS};
use super::steps::{bicgstab as bicg_defaults, cg as cg_defaults};
use super::{
    same_len, same_lens, BicgSteps, Block, CgSteps, ChebyshevSteps, Fuse, HostKrylov, KrylovOps,
    KrylovSpace, VectorOps,
};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, KernelType};
use crate::primitives::ScanElem;
use crate::scalar::{Elem, Scalar};

/// Element types of the GPU backend and the GPU operators: `f32` and `f64` (a [`Scalar`] with
/// kernel instantiations, scannable by the segmented-scan primitive). Generic callers bound on
/// this.
pub trait GpuScalar: Scalar + KernelType + ScanElem {}
impl<T: Scalar + KernelType + ScanElem> GpuScalar for T {}

/// The deterministic grid reductions and the grid barrier of the solver kernels.
pub const REDUCE: KernelSource = kernel_source!(
    "solvers/reduce.cuh",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::gpu::kernels::COMPLEX_H
    ]
);

/// The scalar recurrences on the device (mirror of [`super::recur`]), with the constants that
/// every solver kernel shares with this backend ([`SOLVER_CONSTANTS`]).
pub const RECUR: KernelSource = kernel_source!(
    "solvers/recur.cuh",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::gpu::kernels::COMPLEX_H
    ],
    SOLVER_CONSTANTS
);

/// The vector loops that a solver step shares with its distributed counterpart.
pub const STEPS: KernelSource = kernel_source!(
    "solvers/steps.cuh",
    &[&crate::gpu::kernels::COMMON, &REDUCE, &RECUR]
);

/// The headers of every solver kernel source.
const SOLVER_HEADERS: &[&KernelSource] =
    &[&crate::gpu::kernels::COMMON, &REDUCE, &RECUR, &STEPS, &COLS];

/// BLAS-1 steps (dot into a slot, residual, scaling, axpy), the iteration-base setter and the
/// core vector operations (`vector_lincomb`, `vector_vmul`, `vector_fill`).
pub const BLAS1: KernelSource = kernel_source!("solvers/blas1.cu", SOLVER_HEADERS);

/// Conjugate gradients: the separate steps and the fused small-system step.
pub const CG: KernelSource = kernel_source!("solvers/cg.cu", SOLVER_HEADERS);

/// BiCGSTAB: the separate steps and the fused small-system steps.
pub const BICGSTAB: KernelSource = kernel_source!("solvers/bicgstab.cu", SOLVER_HEADERS);

/// GMRES(m): cycle start, block Gram–Schmidt, least squares, correction, fused Arnoldi step.
pub const GMRES: KernelSource = kernel_source!(
    "solvers/gmres.cu",
    SOLVER_HEADERS,
    &[
        ("GMRES_MAX_COLS", GMRES_MAX_COLS as i64),
        ("GMRES_DOTS_BATCH", GMRES_DOTS_BATCH as i64)
    ]
);

/// The Chebyshev preconditioner's step.
pub const CHEBYSHEV: KernelSource = kernel_source!("solvers/chebyshev.cu", SOLVER_HEADERS);

/// Columns per block launch (`BLOCK_COLS` in `cols.cuh`): the rows of the parameter table.
pub const BLOCK_COLS: usize = 32;
/// Pointers per column in the table (`BLOCK_PTRS`): the widest step's (BiCGSTAB's 13).
pub const BLOCK_PTRS: usize = 13;

/// `kernels/solvers/cols.cuh`: the column table of the block steps (`block.rs`, the GPU side of `backend::steps::block`).
pub const COLS: KernelSource = kernel_source!(
    "solvers/cols.cuh",
    &[&crate::gpu::kernels::COMMON],
    &[
        ("BLOCK_COLS", BLOCK_COLS as i64),
        ("BLOCK_PTRS", BLOCK_PTRS as i64)
    ]
);

/// The block kernels of one element type.
pub(crate) struct BlockKernels {
    pub(crate) read_slots: CudaFunction,
    pub(crate) axpy: CudaFunction,
    pub(crate) scale: CudaFunction,
    pub(crate) copy: CudaFunction,
    pub(crate) poly_step: CudaFunction,
    pub(crate) cg_alpha: CudaFunction,
    pub(crate) cg_update_r: CudaFunction,
    pub(crate) cg_rho: CudaFunction,
    pub(crate) cg_update_xp: CudaFunction,
    pub(crate) bicg_p: CudaFunction,
    pub(crate) bicg_alpha: CudaFunction,
    pub(crate) bicg_s: CudaFunction,
    pub(crate) bicg_omega: CudaFunction,
    pub(crate) bicg_update: CudaFunction,
    /// The fused block kernels (real types) with the blocks of each that the device keeps
    /// resident at once.
    pub(crate) fused: Option<FusedBlock>,
}

pub(crate) struct FusedBlock {
    pub(crate) cg: (CudaFunction, u32),
    pub(crate) bicg_alpha_s: (CudaFunction, u32),
    pub(crate) bicg_update_p: (CudaFunction, u32),
    pub(crate) gmres_arnoldi: (CudaFunction, u32),
}

impl BlockKernels {
    /// Loads the block kernels of `D` (their sources are the solver sources, compiled once per
    /// process); `fused`: load the fused ones too (real types).
    pub(crate) fn load<D: KernelType>(gpu: &Arc<Gpu>, fused: bool) -> Result<Self> {
        let f = |src: &KernelSource, root: &str| gpu.typed_function::<D>(src, root, &[]);
        let resident = |k: CudaFunction| -> (CudaFunction, u32) {
            // The occupancy query does not bind the context itself.
            let per_sm = gpu
                .context()
                .bind_to_thread()
                .ok()
                .and_then(|_| {
                    k.occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
                        .ok()
                })
                .unwrap_or(0);
            (k, per_sm * gpu.sm_count())
        };
        let fused = if fused {
            Some(FusedBlock {
                cg: resident(f(&CG, "block_cg_fused")?),
                bicg_alpha_s: resident(f(&BICGSTAB, "block_bicg_alpha_s")?),
                bicg_update_p: resident(f(&BICGSTAB, "block_bicg_update_p")?),
                gmres_arnoldi: resident(f(&GMRES, "block_gmres_arnoldi")?),
            })
        } else {
            None
        };
        Ok(BlockKernels {
            read_slots: f(&BLAS1, "block_read_slots")?,
            axpy: f(&BLAS1, "block_axpy")?,
            scale: f(&BLAS1, "block_scale")?,
            copy: f(&BLAS1, "block_copy")?,
            poly_step: f(&CHEBYSHEV, "block_poly_step")?,
            cg_alpha: f(&CG, "block_cg_alpha")?,
            cg_update_r: f(&CG, "block_cg_update_r")?,
            cg_rho: f(&CG, "block_cg_rho")?,
            cg_update_xp: f(&CG, "block_cg_update_xp")?,
            bicg_p: f(&BICGSTAB, "block_bicg_p")?,
            bicg_alpha: f(&BICGSTAB, "block_bicg_alpha")?,
            bicg_s: f(&BICGSTAB, "block_bicg_s")?,
            bicg_omega: f(&BICGSTAB, "block_bicg_omega")?,
            bicg_update: f(&BICGSTAB, "block_bicg_update")?,
            fused,
        })
    }
}

/// The constants that every solver kernel shares with this backend, passed as `-D` defines
/// (see [`KernelSource::constants`]): the block size, the slot count and numbers
/// ([`Slot`]), the status codes ([`Status`]) and the fuse modes.
pub const SOLVER_CONSTANTS: &[(&str, i64)] = &[
    ("SOLVER_THREADS", THREADS as i64),
    ("NSLOTS_K", NSLOTS as i64),
    ("S_STATUS", Slot::Status as i64),
    ("S_STATUS_ITER", Slot::StatusIter as i64),
    ("S_THRESH", Slot::Thresh as i64),
    ("S_RHO", Slot::Rho as i64),
    ("S_RR", Slot::Rr as i64),
    ("S_ALPHA", Slot::Alpha as i64),
    ("S_BETA", Slot::Beta as i64),
    ("S_OMEGA", Slot::Omega as i64),
    ("S_PQ", Slot::Pq as i64),
    ("S_TS", Slot::Ts as i64),
    ("S_TT", Slot::Tt as i64),
    ("S_RR0", Slot::Rr0 as i64),
    ("S_DOT", Slot::Dot as i64),
    ("S_ITER_BASE", Slot::IterBase as i64),
    ("S_FORM", Slot::Form as i64),
    ("ST_CONVERGED", Status::Converged as i64),
    ("ST_BREAKDOWN_PQ", Status::BreakdownPq as i64),
    ("ST_BREAKDOWN_RHO", Status::BreakdownRho as i64),
    ("ST_BREAKDOWN_RV", Status::BreakdownRv as i64),
    ("ST_BREAKDOWN_OMEGA", Status::BreakdownOmega as i64),
    ("ST_NONFINITE", Status::NonFinite as i64),
    ("ST_STAGNATED", Status::Stagnated as i64),
    ("ST_BREAKDOWN_ARNOLDI", Status::BreakdownArnoldi as i64),
    ("FUSE_IDENTITY", FUSE_IDENTITY as i64),
    ("FUSE_JACOBI", FUSE_JACOBI as i64),
    ("FUSE_SEPARATE", FUSE_SEPARATE as i64),
];

/// Threads per block of every solver kernel: 256 = 8 warps, enough for the two-level
/// (shuffle, then shared memory) block reduction to be cheap, and 8 resident blocks per SM fill
/// an H100 SM's 2048 threads.
pub const THREADS: u32 = 256;
/// Blocks per SM of the grid-stride kernels: 8 × 256 threads fills an SM (2048 threads on sm_80
/// and sm_90), giving enough loads in flight to saturate HBM; more blocks would only lengthen the
/// last block's sum of partials.
pub const BLOCKS_PER_SM: u32 = 8;

/// The number of partial sums each block writes at most (the widest fused reduction).
const NRED: usize = 2;

/// Fuse mode codes of the solver kernels (`mode` arguments; `FUSE_*` there).
pub(crate) const FUSE_IDENTITY: u32 = 0;
pub(crate) const FUSE_JACOBI: u32 = 1;
pub(crate) const FUSE_SEPARATE: u32 = 2;

struct Kernels {
    dot: CudaFunction,
    dotu: CudaFunction,
    cg_start: CudaFunction,
    cg_alpha: CudaFunction,
    cg_update_r: CudaFunction,
    cg_rho: CudaFunction,
    cg_update_xp: CudaFunction,
    bicg_p: CudaFunction,
    bicg_alpha: CudaFunction,
    bicg_s: CudaFunction,
    bicg_omega: CudaFunction,
    bicg_update: CudaFunction,
    residual: CudaFunction,
    scale: CudaFunction,
    axpy: CudaFunction,
    lincomb: CudaFunction,
    vmul: CudaFunction,
    fill: CudaFunction,
    poly_step: CudaFunction,
    gmres_start: CudaFunction,
    gmres_scale: CudaFunction,
    gmres_dots: CudaFunction,
    gmres_update: CudaFunction,
    gmres_solve_y: CudaFunction,
    gmres_combine: CudaFunction,
    iter_base: CudaFunction,
    /// `f64` → `f32` and back (`vector_narrow_f64b32`, `vector_widen_f64b32`; [`NarrowOps`]).
    narrow: CudaFunction,
    widen: CudaFunction,
    /// The fused small-system steps (real types only: `None` for complex ones).
    fused: Option<FusedKernels>,
}

struct FusedKernels {
    cg_fused: CudaFunction,
    bicg_alpha_s: CudaFunction,
    bicg_update_p: CudaFunction,
    gmres_arnoldi: CudaFunction,
}

/// When the GPU backend runs the fused steps of the small-system path (see "Small systems" in
/// the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusedPath {
    /// Fused where the system is small enough ([`GpuOps::fused_rows`]): the default.
    #[default]
    Auto,
    /// Never: every step is its own kernel, as before the small-system path (for comparison).
    Off,
}

/// The GPU backend for element type `T` (`f32` or `f64`): the kernels are compiled once, when it
/// is created.
pub struct GpuOps<T> {
    gpu: Arc<Gpu>,
    k: Kernels,
    fused: FusedPath,
    /// The device can keep one block of each fused kernel per SM resident.
    fused_ok: bool,
    /// Launch the fused kernels cooperatively (the default).
    cooperative: bool,
    /// The block steps' kernels (`block.rs`, the GPU side of `backend::steps::block`).
    pub(crate) blk: BlockKernels,
    /// Run the block steps as one launch for several columns (the default), or column by column.
    block_steps: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T> std::fmt::Debug for GpuOps<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuOps({:?})", self.gpu)
    }
}

/// The largest GMRES restart length of the GPU kernels (their shared-memory tables hold
/// [`GMRES_MAX_COLS`] basis vectors).
pub const MAX_RESTART: usize = GMRES_MAX_COLS - 1;

/// Basis vectors in the shared-memory tables of the GMRES kernels (`GMRES_MAX_COLS` there).
const GMRES_MAX_COLS: usize = 256;

/// Basis vectors whose inner products with `w` one block of GMRES's block dot product
/// (`gmres_dots`) accumulates together, reading `w` once for all of them: the grid is
/// [`DOT_BLOCKS_PER_SM`] × SMs × ⌈(j + 1) / batch⌉ blocks.
const GMRES_DOTS_BATCH: u32 = 8;

/// Blocks per SM along the rows of GMRES's block dot product: 4 keep the device busy at j < 8
/// (one batch of basis vectors) and the last block's sum short (a warp per vector sums 4 × SMs
/// partials).
const DOT_BLOCKS_PER_SM: u32 = 4;

/// GMRES's Krylov workspace on the GPU: the basis vectors, a device table of their pointers
/// (the fused multi-vector kernels walk it), the small arrays of
/// [`GmresLayout`](super::recur::GmresLayout), and the partial sums of the block dot products.
pub struct GpuKrylov<T> {
    /// The basis (empty when it is stored narrower: `narrow`).
    pub(crate) v: Vec<CudaSlice<T>>,
    pub(crate) ptrs: CudaSlice<u64>,
    pub(crate) small: CudaSlice<T>,
    pub(crate) partials: CudaSlice<T>,
    pub(crate) ticket: CudaSlice<u32>,
    pub(crate) m: usize,
    dot_grid: u32,
    /// The basis stored in `f32` under `f64` work (`KrylovOps::krylov_stored`).
    narrow: Option<NarrowBasis<T>>,
}

/// A Krylov basis stored in `f32` under `f64` work: the rounded vectors and their pointer
/// table, the widened copy of the newest one (what the operator reads: `v_j` of
/// `krylov_pair`), the vector the operator writes (`v_{j+1}` before its orthogonalisation and
/// rounding), and the `f64b32` kernels of `kernels/solvers/gmres.cu`.
struct NarrowBasis<T> {
    v32: Vec<CudaSlice<f32>>,
    ptrs32: CudaSlice<u64>,
    cur: CudaSlice<T>,
    w: CudaSlice<T>,
    store: CudaFunction,
    dots: CudaFunction,
    update: CudaFunction,
    combine: CudaFunction,
}

/// The GPU's scalar slots, residual history, partial sums and last-block ticket, and the
/// solve's recorded blocks (CUDA graphs).
pub struct GpuScalars<T> {
    pub(crate) slots: CudaSlice<T>,
    pub(crate) hist: CudaSlice<T>,
    pub(crate) partials: CudaSlice<T>,
    pub(crate) ticket: CudaSlice<u32>,
    grid: u32,
    /// The value of the slot [`Slot::IterBase`] on the device, as queued: every launch passes
    /// its iteration minus this.
    base: usize,
    graphs: Graphs,
}

/// The recorded blocks of one solve: a block's steps are recorded the second time its key is
/// seen (a block seen once, such as the tail before the iteration limit, is not worth the
/// instantiation) and replayed from the third on.
#[derive(Default)]
struct Graphs {
    /// `(key, len)` of the blocks run once.
    seen: Vec<(u64, usize)>,
    /// `(key, len, graph)` of the recorded blocks.
    recorded: Vec<(u64, usize, CudaGraph)>,
    /// The block being recorded.
    recording: Option<(u64, usize)>,
}

// SAFETY: a `CudaGraph` holds raw CUDA handles, which the driver lets any thread use as long as
// calls on one graph are serialised; `Graphs` is only reached through `&mut GpuScalars`, so they
// are.
unsafe impl Send for Graphs {}

fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Gpu::launch_error(name, e)
}

/// A host value as the kernels take it (the same bytes).
fn dev<T: Elem>(a: T) -> T::Dev {
    T::as_dev(&[a])[0]
}

fn n32(n: usize) -> u32 {
    u32::try_from(n).expect("solver vectors are limited to u32::MAX elements")
}

/// A null device pointer for kernel arguments that the chosen mode does not touch.
const NULL: u64 = 0;

/// Pushes an optional buffer, or a null pointer.
macro_rules! opt_arg {
    ($b:expr, $o:expr) => {
        match $o {
            Some(v) => {
                $b.arg(v);
            }
            None => {
                $b.arg(&NULL);
            }
        }
    };
}

/// Pushes the arguments every fused-preconditioner kernel takes after its vectors:
/// `const T* dinv, T* z, u32 n, u32 mode` (null pointers for the vectors the mode does not use).
fn push_fuse<'a, T>(
    l: &mut cudarc::driver::LaunchArgs<'a>,
    dinv: Option<&'a CudaSlice<T>>,
    z: Option<&'a mut CudaSlice<T>>,
    n: &'a u32,
    mode: &'a u32,
) {
    opt_arg!(l, dinv);
    opt_arg!(l, z);
    l.arg(n).arg(mode);
}

/// A fused kernel's preconditioner mode with the Jacobi vectors it reads (`D⁻¹`) and writes (`z`).
type FuseMode<'a, D> = (u32, Option<&'a CudaSlice<D>>, Option<&'a mut CudaSlice<D>>);
impl<T: Elem> GpuOps<T>
where
    T::Dev: KernelType,
{
    /// `z ← a·x + b·y + c·z` (absent vectors contribute nothing; `z` read only when `c ≠ 0`).
    fn lincomb(
        &self,
        a: T,
        x: Option<&CudaSlice<T::Dev>>,
        b: T,
        y: Option<&CudaSlice<T::Dev>>,
        c: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        let (n, grid) = (n32(z.len()), self.grid(z.len()));
        let (a, b, c) = (dev(a), dev(b), dev(c));
        let mut l = self.gpu.stream().launch_builder(&self.k.lincomb);
        l.arg(&a);
        opt_arg!(l, x);
        l.arg(&b);
        opt_arg!(l, y);
        l.arg(&c).arg(&mut *z).arg(&n);
        // SAFETY: vector_lincomb(T a, const T* x, T b, const T* y, T c, T* z, u32 n); x and y
        // are null or have n elements like z (checked by the callers).
        unsafe { self.launch(&mut l, grid, "vector_lincomb") }
    }

    /// `xᴴy` (`solver_dot`) or `xᵀy` (`solver_dotu`: the same for real types) into
    /// [`Slot::Dot`], read back.
    fn inner(
        &self,
        f: &CudaFunction,
        name: &'static str,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<T> {
        same_len(name, x.len(), y.len());
        let n = n32(x.len());
        let grid = sc.grid_for(self, x.len());
        let mut l = self.gpu.stream().launch_builder(f);
        l.arg(x).arg(y).arg(&n);
        sc.push_reduction(&mut l, false, None);
        // SAFETY: solver_dot / solver_dotu(const T* x, const T* y, u32 n, T* s, T* partials,
        // u32* ticket); x, y have n elements, s NSLOTS, partials NRED * grid, ticket 1.
        unsafe { self.launch(&mut l, grid, name) }?;
        Ok(self.read_slots(sc)?[Slot::Dot as usize])
    }

    /// The kernel modules [`GpuOps::new`] loads.
    const MODULES: [&'static KernelSource; 5] = [&CG, &BICGSTAB, &GMRES, &BLAS1, &CHEBYSHEV];

    /// Starts loading the solver kernels' modules on a background thread
    /// ([`Gpu::prepare_in_background`]) and returns at once: a caller that will create a
    /// `GpuOps` later calls it before work the loads can overlap (uploading a matrix), and
    /// [`GpuOps::new`] then finds them loaded (or waits for the ones still loading). Keep the
    /// handle until then (dropping it waits for the loads).
    pub fn prepare_in_background(gpu: &Arc<Gpu>) -> crate::gpu::Preparing {
        gpu.prepare_in_background(Self::MODULES.iter().map(|&m| (m, vec![])).collect())
    }

    /// Compiles (or takes from the [`Gpu`]'s cache) the solver kernels for `T`.
    ///
    /// # Errors
    /// [`Error::Compile`] or [`Error::Cuda`] naming the kernel.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        // The solvers' modules found and loaded on all cores at once (the first `GpuOps` of a
        // process pays for them).
        let none: &[(&str, String)] = &[];
        let wanted = Self::MODULES.map(|m| (m, none));
        gpu.prepare(&wanted)?;
        let f = |src: &KernelSource, root: &str| gpu.typed_function::<T::Dev>(src, root, &[]);
        let fused = if T::IS_COMPLEX {
            None
        } else {
            Some(FusedKernels {
                cg_fused: f(&CG, "solver_cg_fused")?,
                bicg_alpha_s: f(&BICGSTAB, "solver_bicg_alpha_s")?,
                bicg_update_p: f(&BICGSTAB, "solver_bicg_update_p")?,
                gmres_arnoldi: f(&GMRES, "solver_gmres_arnoldi")?,
            })
        };
        let k = Kernels {
            dot: f(&BLAS1, "solver_dot")?,
            dotu: f(&BLAS1, "solver_dotu")?,
            cg_start: f(&CG, "solver_cg_start")?,
            cg_alpha: f(&CG, "solver_cg_alpha")?,
            cg_update_r: f(&CG, "solver_cg_update_r")?,
            cg_rho: f(&CG, "solver_cg_rho")?,
            cg_update_xp: f(&CG, "solver_cg_update_xp")?,
            bicg_p: f(&BICGSTAB, "solver_bicg_p")?,
            bicg_alpha: f(&BICGSTAB, "solver_bicg_alpha")?,
            bicg_s: f(&BICGSTAB, "solver_bicg_s")?,
            bicg_omega: f(&BICGSTAB, "solver_bicg_omega")?,
            bicg_update: f(&BICGSTAB, "solver_bicg_update")?,
            residual: f(&BLAS1, "solver_residual")?,
            scale: f(&BLAS1, "solver_scale")?,
            axpy: f(&BLAS1, "solver_axpy")?,
            lincomb: f(&BLAS1, "vector_lincomb")?,
            vmul: f(&BLAS1, "vector_vmul")?,
            fill: f(&BLAS1, "vector_fill")?,
            poly_step: f(&CHEBYSHEV, "solver_poly_step")?,
            gmres_start: f(&GMRES, "solver_gmres_start")?,
            gmres_scale: f(&GMRES, "solver_gmres_scale")?,
            gmres_dots: f(&GMRES, "solver_gmres_dots")?,
            gmres_update: f(&GMRES, "solver_gmres_update")?,
            gmres_solve_y: f(&GMRES, "solver_gmres_solve_y")?,
            gmres_combine: f(&GMRES, "solver_gmres_combine")?,
            iter_base: f(&BLAS1, "solver_iter_base")?,
            narrow: gpu.function(&BLAS1, "vector_narrow_f64b32", &[])?,
            widen: gpu.function(&BLAS1, "vector_widen_f64b32", &[])?,
            fused,
        };
        // The fused kernels wait for all their blocks at grid barriers: they run only if one
        // block per SM can be resident (registers and shared memory allow it), which the
        // cooperative launch then guarantees.
        // (The occupancy query does not bind the context itself, and this thread may not have
        // used the device yet.)
        let bound = gpu.context().bind_to_thread().is_ok();
        let fused_ok = bound
            && k.fused.as_ref().is_some_and(|fk| {
                [
                    &fk.cg_fused,
                    &fk.bicg_alpha_s,
                    &fk.bicg_update_p,
                    &fk.gmres_arnoldi,
                ]
                .iter()
                .all(|f| {
                    f.occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
                        .is_ok_and(|b| b >= 1)
                })
            });
        let blk = BlockKernels::load::<T::Dev>(gpu, !T::IS_COMPLEX)?;
        Ok(GpuOps {
            gpu: gpu.clone(),
            k,
            fused: FusedPath::Auto,
            fused_ok,
            cooperative: true,
            blk,
            block_steps: true,
            _t: std::marker::PhantomData,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The fused kernels; only called where [`GpuOps::fused_grid`] gave a grid (which needs them).
    fn fk(&self) -> &FusedKernels {
        self.k
            .fused
            .as_ref()
            .expect("the fused steps run only where their kernels exist")
    }

    /// Sets when the fused steps of the small-system path run (default [`FusedPath::Auto`]).
    pub fn with_fused_path(mut self, fused: FusedPath) -> Self {
        self.fused = fused;
        self
    }

    /// When the fused steps run.
    pub fn fused_path(&self) -> FusedPath {
        self.fused
    }

    /// The largest system (rows) on which [`FusedPath::Auto`] runs the fused steps: one block of
    /// [`THREADS`] per SM, `sm_count · 256` (33,792 on a 132-SM H100 or H200). See "Small
    /// systems" in the [module docs](self) for why this bound.
    pub fn fused_rows(&self) -> usize {
        self.gpu.sm_count().max(1) as usize * THREADS as usize
    }

    /// Launches the fused kernels with a plain launch instead of a cooperative one (for
    /// measuring what the cooperative launch costs; the grid is co-resident either way when
    /// nothing else runs on the device, but only the cooperative launch makes the driver
    /// guarantee it).
    #[doc(hidden)]
    pub fn with_plain_launch(mut self) -> Self {
        self.cooperative = false;
        self
    }

    /// Launches `l` (kernel `name`) over `grid` blocks of [`THREADS`].
    ///
    /// # Safety
    /// As [`cudarc::driver::LaunchArgs::launch`]: `l` holds the kernel's arguments.
    unsafe fn launch(
        &self,
        l: &mut cudarc::driver::LaunchArgs<'_>,
        grid: u32,
        name: &str,
    ) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { l.launch(self.cfg(grid)) }
            .map(|_| ())
            .map_err(launch_err(name))
    }

    /// Launches a fused kernel over `grid` blocks, cooperatively unless
    /// [`GpuOps::with_plain_launch`].
    ///
    /// # Safety
    /// As [`cudarc::driver::LaunchArgs::launch`]: `l` holds the kernel's arguments.
    unsafe fn launch_fused(
        &self,
        l: &mut cudarc::driver::LaunchArgs<'_>,
        grid: u32,
        name: &str,
    ) -> Result<()> {
        if self.cooperative {
            // SAFETY: the caller's.
            unsafe { l.launch_cooperative(self.cfg(grid)) }.map(|_| ())
        } else {
            // SAFETY: the caller's.
            unsafe { l.launch(self.cfg(grid)) }.map(|_| ())
        }
        .map_err(launch_err(name))
    }

    /// Runs the block steps of [`BlockOps`](super::BlockOps) column by column (each column's
    /// one-column kernels in turn) instead of one launch for several columns: for comparing
    /// both (they compute the same bits). Also the factor applications of a block.
    pub fn with_block_steps(mut self, on: bool) -> Self {
        self.block_steps = on;
        self
    }

    /// Whether the block steps run as one launch for several columns.
    pub fn block_steps(&self) -> bool {
        self.block_steps
    }

    /// Whether the fused kernels are launched cooperatively (see [`GpuOps::with_plain_launch`]).
    pub(crate) fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    /// Whether the fused steps run for vectors of length `n`.
    pub fn is_fused(&self, n: usize) -> bool {
        self.fused_grid(n).is_some()
    }

    /// The grid of the fused steps for vectors of length `n` (the grid of the separate kernels,
    /// at most one block per SM), or `None` where the separate kernels run.
    pub(crate) fn fused_grid(&self, n: usize) -> Option<u32> {
        (self.fused_ok && self.fused == FusedPath::Auto && (1..=self.fused_rows()).contains(&n))
            .then(|| self.grid(n))
    }

    /// Blocks of the grid-stride kernels for vectors of length `n`.
    pub fn grid(&self, n: usize) -> u32 {
        let need = n.div_ceil(THREADS as usize).max(1);
        need.min((self.gpu.sm_count().max(1) * BLOCKS_PER_SM) as usize) as u32
    }

    fn cfg(&self, grid: u32) -> cudarc::driver::LaunchConfig {
        Gpu::cfg(grid, THREADS, 0)
    }

    /// The shared launch of `solver_residual` and `solver_scale`, elementwise kernels of one
    /// signature: `(const T* a, const T* b, T* out, u32 n)`.
    fn elementwise(
        &self,
        f: &CudaFunction,
        name: &'static str,
        a: &CudaSlice<T::Dev>,
        b: &CudaSlice<T::Dev>,
        out: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        same_len(name, a.len(), b.len());
        same_len(name, a.len(), out.len());
        let n = n32(a.len());
        let mut l = self.gpu.stream().launch_builder(f);
        l.arg(a).arg(b).arg(out).arg(&n);
        // SAFETY: the signature above; a, b and out have n elements.
        unsafe { self.launch(&mut l, self.grid(a.len()), name) }
    }

    /// The shared launch of `solver_bicg_p` and `solver_bicg_s`, kernels of one signature:
    /// `(const T* r, const T* v, T* out, const T* dinv, T* hat, u32 n, u32 mode, const T* s)`.
    #[allow(clippy::too_many_arguments)]
    fn bicg_vector_step(
        &self,
        f: &CudaFunction,
        name: &'static str,
        r: &CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        out: &mut CudaSlice<T::Dev>,
        mut fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<()> {
        same_len(name, r.len(), v.len());
        same_len(name, r.len(), out.len());
        let n = n32(r.len());
        let grid = sc.grid_for(self, r.len());
        let (mode, dinv, hat) = Self::checked_mode(name, r.len(), &mut fuse);
        let mut l = self.gpu.stream().launch_builder(f);
        l.arg(r).arg(v).arg(out);
        push_fuse(&mut l, dinv, hat, &n, &mode);
        l.arg(&sc.slots);
        // SAFETY: the signature above; r, v, out (and dinv, hat in Jacobi mode) have n elements,
        // `sc.slots` holds the scalar slots the kernel reads.
        unsafe { self.launch(&mut l, grid, name) }
    }

    /// The shared launch of the two-vector reductions `solver_cg_alpha`, `solver_cg_rho`,
    /// `solver_bicg_alpha` and `solver_bicg_omega`, kernels of one signature:
    /// `(const T* a, const T* b, u32 n, T* s, T* partials, u32* ticket, u32 it)`.
    fn reduce_step(
        &self,
        f: &CudaFunction,
        name: &'static str,
        a: &CudaSlice<T::Dev>,
        b: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        same_len(name, a.len(), b.len());
        let (n, it) = (n32(a.len()), self.iter_arg(sc, it)?);
        let grid = sc.grid_for(self, a.len());
        let mut l = self.gpu.stream().launch_builder(f);
        l.arg(a).arg(b).arg(&n);
        sc.push_reduction(&mut l, false, Some(&it));
        // SAFETY: the signature above; a, b have n elements, `sc.partials` one entry per block of
        // `grid` and `sc.ticket` one counter (both sized by `grid_for`).
        unsafe { self.launch(&mut l, grid, name) }
    }

    /// `v_dst ← scale · src` for GMRES (in place when `src` is `None`), unless the status is set.
    fn gmres_scale(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        dst: usize,
        src: Option<&CudaSlice<T::Dev>>,
        sc: &GpuScalars<T::Dev>,
    ) -> Result<()> {
        let d = &mut k.v[dst];
        if let Some(s) = src {
            same_len("gmres_scale", s.len(), d.len());
        }
        let (n, m) = (n32(d.len()), n32(k.m));
        let grid = self.grid(d.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.gmres_scale);
        opt_arg!(l, src);
        l.arg(d).arg(&n).arg(&sc.slots).arg(&k.small).arg(&m);
        // SAFETY: solver_gmres_scale(const T* src, T* dst, u32 n, const T* s, const T* small,
        // u32 m); src (or null: in place) and dst have n elements, s the slots, small
        // GmresLayout{m}.len() entries.
        unsafe { self.launch(&mut l, grid, "solver_gmres_scale") }
    }

    /// The iteration argument of a kernel for iteration `it`: `it` minus the device's
    /// [`Slot::IterBase`], which the kernel adds back. Outside a recording, an `it` below the base
    /// (a restart at the iteration a status was set, inside a replayed block) resets the base.
    pub(crate) fn iter_arg(&self, sc: &mut GpuScalars<T::Dev>, it: usize) -> Result<u32> {
        if it < sc.base {
            assert!(
                sc.graphs.recording.is_none(),
                "iteration {it} before the recorded block's base {}",
                sc.base
            );
            self.set_iter_base(sc, 0, false)?;
        }
        Ok(n32(it - sc.base))
    }

    /// `s[IterBase] ← v`, or `+= v` when `add`.
    fn set_iter_base(&self, sc: &mut GpuScalars<T::Dev>, v: usize, add: bool) -> Result<()> {
        let (v32, add32) = (n32(v), u32::from(add));
        let mut l = self.gpu.stream().launch_builder(&self.k.iter_base);
        l.arg(&mut sc.slots).arg(&v32).arg(&add32);
        // SAFETY: solver_iter_base(T* s, u32 v, u32 add): s holds NSLOTS > IterBase entries; one
        // thread writes.
        unsafe { l.launch(Gpu::cfg(1, 32, 0)) }.map_err(launch_err("solver_iter_base"))?;
        sc.base = if add { sc.base + v } else { v };
        Ok(())
    }

    fn mode_ptrs<'a>(fuse: &'a mut Fuse<'_, CudaSlice<T::Dev>>) -> FuseMode<'a, T::Dev> {
        match fuse {
            Fuse::Identity => (FUSE_IDENTITY, None, None),
            Fuse::Jacobi { inv_diag, z } => (FUSE_JACOBI, Some(*inv_diag), Some(&mut **z)),
            Fuse::Separate(_) => (FUSE_SEPARATE, None, None),
        }
    }

    /// [`Self::mode_ptrs`] for a kernel over `len` elements, with the Jacobi vectors' lengths
    /// checked (`what` names the step in the panic).
    fn checked_mode<'a>(
        what: &str,
        len: usize,
        fuse: &'a mut Fuse<'_, CudaSlice<T::Dev>>,
    ) -> FuseMode<'a, T::Dev> {
        let (mode, dinv, z) = Self::mode_ptrs(fuse);
        if let (Some(d), Some(z)) = (&dinv, &z) {
            same_len(&format!("{what} D⁻¹"), len, d.len());
            same_len(&format!("{what} z"), len, z.len());
        }
        (mode, dinv, z)
    }

    /// The `n` and `it` arguments of a fused launch over `grid` blocks; the workspace's
    /// partials hold at most `sc.grid` blocks' worth.
    fn fused_args(
        &self,
        what: &str,
        len: usize,
        grid: u32,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<(u32, u32)> {
        assert!(
            grid <= sc.grid,
            "fused {what} grid {grid} over the workspace's {}",
            sc.grid
        );
        Ok((n32(len), self.iter_arg(sc, it)?))
    }
}

impl<T: Elem> VectorOps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    type Vector = CudaSlice<T::Dev>;
    type Scalars = GpuScalars<T::Dev>;

    fn name(&self) -> &'static str {
        "gpu"
    }
    fn default_check_every(&self) -> usize {
        16
    }
    fn len(&self, v: &CudaSlice<T::Dev>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<CudaSlice<T::Dev>> {
        self.gpu.zeros::<T::Dev>(n)
    }
    fn upload(&self, host: &[T]) -> Result<CudaSlice<T::Dev>> {
        self.gpu.upload(T::as_dev(host))
    }
    fn download(&self, v: &CudaSlice<T::Dev>) -> Result<Vec<T>> {
        Ok(T::from_dev(&self.gpu.download(v)?).to_vec())
    }
    fn copy(&self, src: &CudaSlice<T::Dev>, dst: &mut CudaSlice<T::Dev>) -> Result<()> {
        same_len("copy", src.len(), dst.len());
        self.gpu
            .stream()
            .memcpy_dtod(src, dst)
            .map_err(|e| Error::cuda("solver vector copy", e))
    }
    fn set_zero(&self, v: &mut CudaSlice<T::Dev>) -> Result<()> {
        self.gpu
            .stream()
            .memset_zeros(v)
            .map_err(|e| Error::cuda("solver vector memset", e))
    }
    fn fill(&self, v: &mut CudaSlice<T::Dev>, a: T) -> Result<()> {
        let (n, grid) = (n32(v.len()), self.grid(v.len()));
        let a = dev(a);
        let mut l = self.gpu.stream().launch_builder(&self.k.fill);
        l.arg(&a).arg(&mut *v).arg(&n);
        // SAFETY: vector_fill(T a, T* z, u32 n); z has n elements.
        unsafe { self.launch(&mut l, grid, "vector_fill") }
    }
    fn scal(&self, a: T, v: &mut CudaSlice<T::Dev>) -> Result<()> {
        self.lincomb(T::zero(), None, T::zero(), None, a, v)
    }
    fn axpby(&self, a: T, x: &CudaSlice<T::Dev>, b: T, y: &mut CudaSlice<T::Dev>) -> Result<()> {
        same_len("axpby", x.len(), y.len());
        self.lincomb(a, Some(x), T::zero(), None, b, y)
    }
    fn axpbypcz(
        &self,
        a: T,
        x: &CudaSlice<T::Dev>,
        b: T,
        y: &CudaSlice<T::Dev>,
        c: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        same_len("axpbypcz", x.len(), y.len());
        same_len("axpbypcz", x.len(), z.len());
        self.lincomb(a, Some(x), b, Some(y), c, z)
    }
    fn vmul(
        &self,
        a: T,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        b: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        same_len("vmul", x.len(), y.len());
        same_len("vmul", x.len(), z.len());
        let (n, grid) = (n32(z.len()), self.grid(z.len()));
        let (a, b) = (dev(a), dev(b));
        let mut l = self.gpu.stream().launch_builder(&self.k.vmul);
        l.arg(&a).arg(x).arg(y).arg(&b).arg(&mut *z).arg(&n);
        // SAFETY: vector_vmul(T a, const T* x, const T* y, T b, T* z, u32 n); all three have n
        // elements.
        unsafe { self.launch(&mut l, grid, "vector_vmul") }
    }
    fn residual(
        &self,
        b: &CudaSlice<T::Dev>,
        ax: &CudaSlice<T::Dev>,
        r: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        // solver_residual: r = b − ax.
        self.elementwise(&self.k.residual, "solver_residual", b, ax, r)
    }
    fn scale(
        &self,
        d: &CudaSlice<T::Dev>,
        r: &CudaSlice<T::Dev>,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        // solver_scale: z = d ∘ r.
        self.elementwise(&self.k.scale, "solver_scale", d, r, z)
    }
    fn dot(
        &self,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<T> {
        self.inner(&self.k.dot, "solver_dot", x, y, sc)
    }
    fn dotu(
        &self,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<T> {
        self.inner(&self.k.dotu, "solver_dotu", x, y, sc)
    }

    fn check_memory(&self, what: &str, bytes: u64) -> Result<()> {
        self.gpu.check_memory(what, bytes)
    }
    fn scalars(&self, n: usize, max_iters: usize) -> Result<GpuScalars<T::Dev>> {
        let grid = self.grid(n);
        Ok(GpuScalars {
            slots: self.gpu.zeros::<T::Dev>(NSLOTS)?,
            hist: self.gpu.zeros::<T::Dev>(max_iters + 1)?,
            // Twice the widest reduction's partials: the fused kernels double-buffer them.
            partials: self.gpu.zeros::<T::Dev>(2 * NRED * grid as usize)?,
            ticket: self.gpu.zeros::<u32>(2)?,
            grid,
            base: 0,
            graphs: Graphs::default(),
        })
    }
    fn write_slots(&self, sc: &mut GpuScalars<T::Dev>, values: &[(Slot, T)]) -> Result<()> {
        let mut s = self.read_slots(sc)?;
        for &(k, v) in values {
            s[k as usize] = v;
        }
        self.gpu.upload_into(T::as_dev(&s), &mut sc.slots)
    }
    fn read_slots(&self, sc: &GpuScalars<T::Dev>) -> Result<[T; NSLOTS]> {
        // Into a stack array: the status check every k iterations allocates nothing.
        let mut s = [T::zero(); NSLOTS];
        self.gpu.note_transfer(false, std::mem::size_of_val(&s));
        self.gpu
            .stream()
            .memcpy_dtoh(&sc.slots, T::as_dev_mut(&mut s[..]))
            .map_err(|e| Error::cuda("reading the solver's scalar slots", e))?;
        self.gpu.synchronize()?;
        Ok(s)
    }
    fn read_history(&self, sc: &GpuScalars<T::Dev>, len: usize) -> Result<Vec<T>> {
        let len = len.min(sc.hist.len());
        Ok(T::from_dev(&self.gpu.download(&sc.hist.slice(..len))?).to_vec())
    }
    /// Downloads the slots and the history, runs `f`, uploads both: correct, and slow (the GPU
    /// runs every step as its own kernels and never calls this in a solve).
    fn update_slots(
        &self,
        sc: &mut GpuScalars<T::Dev>,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> Result<()> {
        let mut s = self.read_slots(sc)?;
        let mut h = T::from_dev(&self.gpu.download(&sc.hist)?).to_vec();
        f(&mut s, &mut h);
        self.gpu.upload_into(T::as_dev(&s), &mut sc.slots)?;
        self.gpu.upload_into(T::as_dev(&h), &mut sc.hist)
    }

    /// CUDA graphs: see "Recorded blocks" in the [module docs](super).
    fn begin_block(
        &self,
        sc: &mut GpuScalars<T::Dev>,
        it0: usize,
        len: usize,
        key: Option<u64>,
    ) -> Result<Block> {
        let Some(key) = key else {
            return Ok(Block::Direct);
        };
        let g = &sc.graphs;
        let found = g.recorded.iter().position(|r| (r.0, r.1) == (key, len));
        let seen = g.seen.contains(&(key, len));
        if found.is_none() && !seen {
            sc.graphs.seen.push((key, len));
            return Ok(Block::Direct);
        }
        // Both a recording and a replay number their iterations from it0.
        if sc.base != it0 {
            self.set_iter_base(sc, it0, false)?;
        }
        if let Some(i) = found {
            sc.graphs.recorded[i]
                .2
                .launch()
                .map_err(|e| Error::cuda("launching a recorded solver block (CUDA graph)", e))?;
            sc.base += len;
            return Ok(Block::Replayed);
        }
        // Another thread uses this Gpu: its work would be recorded too, so run directly.
        if !self.gpu.begin_capture()? {
            return Ok(Block::Direct);
        }
        sc.graphs.recording = Some((key, len));
        Ok(Block::Recording)
    }

    fn end_block(&self, sc: &mut GpuScalars<T::Dev>, ok: bool) -> Result<()> {
        let (key, len) = sc
            .graphs
            .recording
            .take()
            .expect("end_block without a recording block");
        // The last node moves the base to the next block's first iteration.
        let advanced = if ok {
            self.set_iter_base(sc, len, true)
        } else {
            Ok(())
        };
        let graph = self.gpu.end_capture().map_err(|e| match e {
            Error::Cuda { message, .. } => Error::Cuda {
                context: "recording a solver block as a CUDA graph (a step or preconditioner \
                          that synchronises with the host cannot be recorded: set \
                          SolveParams::graphs = false)"
                    .into(),
                message,
            },
            other => other,
        });
        if !ok {
            // The caller reports the step's error; nothing of the block ran.
            return Ok(());
        }
        advanced?;
        let graph = graph?
            .ok_or_else(|| Error::InvalidInput("a recorded solver block was empty".to_string()))?;
        graph
            .launch()
            .map_err(|e| Error::cuda("launching a recorded solver block (CUDA graph)", e))?;
        sc.graphs.recorded.push((key, len, graph));
        Ok(())
    }

    fn axpy(&self, alpha: T, x: &CudaSlice<T::Dev>, y: &mut CudaSlice<T::Dev>) -> Result<()> {
        same_len("axpy", x.len(), y.len());
        let n = n32(x.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.axpy);
        let alpha = dev(alpha);
        l.arg(&alpha).arg(x).arg(y).arg(&n);
        // SAFETY: solver_axpy(T alpha, const T* x, T* y, u32 n); x, y have n elements.
        unsafe { self.launch(&mut l, self.grid(x.len()), "solver_axpy") }
    }
}

impl<T: Elem> CgSteps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    fn cg_start(
        &self,
        r: &CudaSlice<T::Dev>,
        mut fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        let n = n32(r.len());
        let grid = sc.grid_for(self, r.len());
        let it = self.iter_arg(sc, it)?;
        let given = match &fuse {
            Fuse::Separate(z) => Some(z.expect("cg_start with a separate preconditioner needs z")),
            _ => None,
        };
        let (mode, dinv, z) = Self::mode_ptrs(&mut fuse);
        if let Some(z) = &z {
            same_len("cg_start", r.len(), z.len());
        }
        let mut l = self.gpu.stream().launch_builder(&self.k.cg_start);
        l.arg(r);
        opt_arg!(l, dinv);
        match (z, given) {
            (Some(z), _) => {
                l.arg(z);
            }
            (None, Some(g)) => {
                same_len("cg_start", r.len(), g.len());
                l.arg(g);
            }
            (None, None) => {
                l.arg(&NULL);
            }
        }
        l.arg(&n).arg(&mode);
        sc.push_reduction(&mut l, true, Some(&it));
        // SAFETY: solver_cg_start(const T* r, const T* dinv, T* z, u32 n, u32 mode, T* s,
        // T* partials, u32* ticket, T* hist, u32 it). r, dinv, z have n elements when the mode
        // reads them (null otherwise: the mode does not touch them; with a separate
        // preconditioner z is only read); hist has max_iters + 1 > it elements.
        unsafe { self.launch(&mut l, grid, "solver_cg_start") }
    }

    fn cg_alpha(
        &self,
        p: &CudaSlice<T::Dev>,
        q: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        // solver_cg_alpha: pᵀq, then α = ρ / pᵀq (breakdown when pᵀq ≤ 0) in the last block.
        self.reduce_step(&self.k.cg_alpha, "solver_cg_alpha", p, q, sc, it)
    }

    fn cg_update_r(
        &self,
        q: &CudaSlice<T::Dev>,
        r: &mut CudaSlice<T::Dev>,
        mut fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        same_len("cg_update_r", q.len(), r.len());
        let (n, it) = (n32(r.len()), self.iter_arg(sc, it)?);
        let grid = sc.grid_for(self, r.len());
        let (mode, dinv, z) = Self::checked_mode("cg_update_r", r.len(), &mut fuse);
        let mut l = self.gpu.stream().launch_builder(&self.k.cg_update_r);
        l.arg(q).arg(r);
        push_fuse(&mut l, dinv, z, &n, &mode);
        sc.push_reduction(&mut l, true, Some(&it));
        // SAFETY: solver_cg_update_r(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode,
        // T* s, T* partials, u32* ticket, T* hist, u32 it); q, r (and dinv, z in Jacobi mode,
        // null otherwise and untouched) have n elements; hist has more than it elements.
        unsafe { self.launch(&mut l, grid, "solver_cg_update_r") }
    }

    fn cg_rho(
        &self,
        r: &CudaSlice<T::Dev>,
        z: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        // solver_cg_rho: rᵀz, then β and ρ in the last block.
        self.reduce_step(&self.k.cg_rho, "solver_cg_rho", r, z, sc, it)
    }

    fn cg_update_xp(
        &self,
        x: &mut CudaSlice<T::Dev>,
        p: &mut CudaSlice<T::Dev>,
        z: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        same_len("cg_update_xp", x.len(), p.len());
        same_len("cg_update_xp", x.len(), z.len());
        let (n, it) = (n32(x.len()), self.iter_arg(sc, it)?);
        let grid = sc.grid_for(self, x.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.cg_update_xp);
        l.arg(x).arg(p).arg(z).arg(&n).arg(&sc.slots).arg(&it);
        // SAFETY: solver_cg_update_xp(T* x, T* p, const T* z, u32 n, const T* s, u32 it); x, p,
        // z have n elements.
        unsafe { self.launch(&mut l, grid, "solver_cg_update_xp") }
    }

    fn cg_tail(
        &self,
        x: &mut CudaSlice<T::Dev>,
        p: &mut CudaSlice<T::Dev>,
        q: &CudaSlice<T::Dev>,
        r: &mut CudaSlice<T::Dev>,
        mut fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        let grid = match (self.fused_grid(x.len()), &fuse) {
            (Some(g), Fuse::Identity | Fuse::Jacobi { .. }) => g,
            _ => return cg_defaults::cg_tail(self, x, p, q, r, fuse, sc, it),
        };
        same_lens(
            "cg_tail",
            x.len(),
            &[("p", p.len()), ("q", q.len()), ("r", r.len())],
        );
        let (n, it) = self.fused_args("CG", x.len(), grid, sc, it)?;
        let (mode, dinv, z) = Self::checked_mode("cg_tail", x.len(), &mut fuse);
        let mut l = self.gpu.stream().launch_builder(&self.fk().cg_fused);
        l.arg(x).arg(p).arg(q).arg(r);
        push_fuse(&mut l, dinv, z, &n, &mode);
        sc.push_reduction(&mut l, true, Some(&it));
        // SAFETY: solver_cg_fused(T* x, T* p, const T* q, T* r, const T* dinv, T* z, u32 n,
        // u32 mode, T* s, T* partials, u32* bar, T* hist, u32 it); x, p, q, r (and dinv, z in
        // Jacobi mode, null otherwise and untouched) have n elements; partials 2 · NRED · grid
        // entries, bar 2 words, hist more than it. Cooperative: the blocks wait for each other,
        // and the driver refuses a grid that cannot be resident at once.
        unsafe { self.launch_fused(&mut l, grid, "solver_cg_fused") }
    }
}

impl<T: Elem> BicgSteps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    fn bicg_p(
        &self,
        r: &CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        p: &mut CudaSlice<T::Dev>,
        fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<()> {
        // solver_bicg_p: p ← r + β(p − ω v), and p̂ = D⁻¹p in Jacobi mode.
        self.bicg_vector_step(&self.k.bicg_p, "solver_bicg_p", r, v, p, fuse, sc)
    }

    fn bicg_alpha(
        &self,
        rhat: &CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        // solver_bicg_alpha: r̂ᵀv, then α = ρ / r̂ᵀv in the last block.
        self.reduce_step(&self.k.bicg_alpha, "solver_bicg_alpha", rhat, v, sc, it)
    }

    fn bicg_s(
        &self,
        r: &CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        s: &mut CudaSlice<T::Dev>,
        fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
    ) -> Result<()> {
        // solver_bicg_s: s ← r − α v, and ŝ = D⁻¹s in Jacobi mode.
        self.bicg_vector_step(&self.k.bicg_s, "solver_bicg_s", r, v, s, fuse, sc)
    }

    fn bicg_omega(
        &self,
        t: &CudaSlice<T::Dev>,
        s: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        // solver_bicg_omega: tᵀs and tᵀt, then ω = tᵀs / tᵀt in the last block.
        self.reduce_step(&self.k.bicg_omega, "solver_bicg_omega", t, s, sc, it)
    }

    fn bicg_update(
        &self,
        x: &mut CudaSlice<T::Dev>,
        phat: &CudaSlice<T::Dev>,
        shat: &CudaSlice<T::Dev>,
        s: &CudaSlice<T::Dev>,
        t: &CudaSlice<T::Dev>,
        r: &mut CudaSlice<T::Dev>,
        rhat: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        let len = x.len();
        same_lens(
            "bicg_update",
            len,
            &[
                ("p̂", phat.len()),
                ("ŝ", shat.len()),
                ("s", s.len()),
                ("t", t.len()),
                ("r", r.len()),
                ("r̂", rhat.len()),
            ],
        );
        let (n, it) = (n32(len), self.iter_arg(sc, it)?);
        let grid = sc.grid_for(self, len);
        let mut l = self.gpu.stream().launch_builder(&self.k.bicg_update);
        l.arg(x)
            .arg(phat)
            .arg(shat)
            .arg(s)
            .arg(t)
            .arg(r)
            .arg(rhat)
            .arg(&n);
        sc.push_reduction(&mut l, true, Some(&it));
        // SAFETY: solver_bicg_update(T* x, const T* phat, const T* shat, const T* sv,
        // const T* t, T* r, const T* rhat, u32 n, T* s, T* partials, u32* ticket, T* hist,
        // u32 it); every vector has n elements (p̂ may alias p, ŝ may alias s: both read-only).
        unsafe { self.launch(&mut l, grid, "solver_bicg_update") }
    }

    fn bicg_fused(&self, n: usize) -> bool {
        self.is_fused(n)
    }

    fn bicg_alpha_s(
        &self,
        rhat: &CudaSlice<T::Dev>,
        r: &CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        s: &mut CudaSlice<T::Dev>,
        mut fuse: Fuse<'_, CudaSlice<T::Dev>>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        let Some(grid) = self.fused_grid(r.len()) else {
            return bicg_defaults::bicg_alpha_s(self, rhat, r, v, s, fuse, sc, it);
        };
        same_lens(
            "bicg_alpha_s",
            r.len(),
            &[("r̂", rhat.len()), ("v", v.len()), ("s", s.len())],
        );
        let (n, it) = self.fused_args("BiCGSTAB", r.len(), grid, sc, it)?;
        let (mode, dinv, shat) = Self::checked_mode("bicg_alpha_s", r.len(), &mut fuse);
        let mut l = self.gpu.stream().launch_builder(&self.fk().bicg_alpha_s);
        l.arg(rhat).arg(r).arg(v).arg(s);
        push_fuse(&mut l, dinv, shat, &n, &mode);
        sc.push_reduction(&mut l, false, Some(&it));
        // SAFETY: solver_bicg_alpha_s(const T* rhat, const T* r, const T* v, T* sv,
        // const T* dinv, T* shat, u32 n, u32 mode, T* s, T* partials, u32* bar, u32 it); the
        // vectors (dinv, shat in Jacobi mode, null otherwise) have n elements, partials
        // 2 · NRED · grid, bar 2 words. Cooperative: see cg_tail.
        unsafe { self.launch_fused(&mut l, grid, "solver_bicg_alpha_s") }
    }

    fn bicg_update_p(
        &self,
        x: &mut CudaSlice<T::Dev>,
        phat: Option<&mut CudaSlice<T::Dev>>,
        inv_diag: Option<&CudaSlice<T::Dev>>,
        shat: &CudaSlice<T::Dev>,
        s: &CudaSlice<T::Dev>,
        t: &CudaSlice<T::Dev>,
        r: &mut CudaSlice<T::Dev>,
        rhat: &CudaSlice<T::Dev>,
        p: &mut CudaSlice<T::Dev>,
        v: &CudaSlice<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        let Some(grid) = self.fused_grid(x.len()) else {
            return bicg_defaults::bicg_update_p(
                self, x, phat, inv_diag, shat, s, t, r, rhat, p, v, sc, it,
            );
        };
        let len = x.len();
        same_lens(
            "bicg_update_p",
            len,
            &[
                ("ŝ", shat.len()),
                ("s", s.len()),
                ("t", t.len()),
                ("r", r.len()),
                ("r̂", rhat.len()),
                ("p", p.len()),
                ("v", v.len()),
            ],
        );
        let mode = match (&phat, inv_diag) {
            (None, _) => FUSE_IDENTITY,
            (Some(_), Some(_)) => FUSE_JACOBI,
            (Some(_), None) => FUSE_SEPARATE,
        };
        if let Some(ph) = &phat {
            same_len("p̂", len, ph.len());
        }
        if let Some(d) = inv_diag {
            same_len("D⁻¹", len, d.len());
        }
        let (n, it) = self.fused_args("BiCGSTAB", len, grid, sc, it)?;
        let mut l = self.gpu.stream().launch_builder(&self.fk().bicg_update_p);
        l.arg(x)
            .arg(shat)
            .arg(s)
            .arg(t)
            .arg(r)
            .arg(rhat)
            .arg(p)
            .arg(v);
        push_fuse(&mut l, inv_diag, phat, &n, &mode);
        sc.push_reduction(&mut l, true, Some(&it));
        // SAFETY: solver_bicg_update_p(T* x, const T* shat, const T* sv, const T* t, T* r,
        // const T* rhat, T* p, const T* v, const T* dinv, T* phat, u32 n, u32 mode, T* s,
        // T* partials, u32* bar, T* hist, u32 it); every vector has n elements; phat is null in
        // identity mode (p̂ is p), read in separate mode, read then overwritten with D⁻¹p in
        // Jacobi mode; dinv null unless Jacobi; ŝ may alias s (both read-only). partials
        // 2 · NRED · grid, bar 2 words, hist more than it. Cooperative: see cg_tail.
        unsafe { self.launch_fused(&mut l, grid, "solver_bicg_update_p") }
    }
}

impl<T: Elem> ChebyshevSteps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    fn poly_step(
        &self,
        t: &CudaSlice<T::Dev>,
        inv_diag: Option<&CudaSlice<T::Dev>>,
        res: &mut CudaSlice<T::Dev>,
        d: &mut CudaSlice<T::Dev>,
        z: &mut CudaSlice<T::Dev>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        let len = t.len();
        same_lens(
            "poly_step",
            len,
            &[("res", res.len()), ("d", d.len()), ("z", z.len())],
        );
        if let Some(dv) = inv_diag {
            same_len("poly_step D⁻¹", len, dv.len());
        }
        let (n, first) = (n32(len), u32::from(first));
        let (c1, c2) = (dev(c1), dev(c2));
        let mut l = self.gpu.stream().launch_builder(&self.k.poly_step);
        l.arg(t);
        opt_arg!(l, inv_diag);
        l.arg(res)
            .arg(d)
            .arg(z)
            .arg(&n)
            .arg(&first)
            .arg(&c1)
            .arg(&c2);
        // SAFETY: solver_poly_step(const T* t, const T* dinv, T* res, T* d, T* z, u32 n,
        // u32 first, T c1, T c2); every vector has n elements, dinv is null when absent.
        unsafe { self.launch(&mut l, self.grid(len), "solver_poly_step") }
    }
}

impl<T> GpuKrylov<T> {
    /// The length of the basis vectors.
    fn len(&self) -> usize {
        match &self.narrow {
            Some(nb) => nb.cur.len(),
            None => self.v[0].len(),
        }
    }
}

/// The GPU keeps its small arrays on the device and runs every step itself.
impl<T: Elem> KrylovSpace<CudaSlice<T::Dev>, T> for GpuKrylov<T::Dev> {
    fn host(&self) -> Option<&HostKrylov<CudaSlice<T::Dev>, T>> {
        None
    }
    fn host_mut(&mut self) -> Option<&mut HostKrylov<CudaSlice<T::Dev>, T>> {
        None
    }
}

impl<T: Elem> KrylovOps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    type Krylov = GpuKrylov<T::Dev>;

    /// An `f32` basis for `f64` work ([`Storage::F32`](crate::Storage::F32)); `f32` work keeps
    /// its own basis; complex work refuses it.
    fn krylov_stored(
        &self,
        n: usize,
        m: usize,
        basis: crate::scalar::Storage,
    ) -> Result<GpuKrylov<T::Dev>> {
        if basis == crate::scalar::Storage::F64 || T::NAME == "f32" {
            return self.krylov(n, m);
        }
        if T::NAME != "f64" {
            return Err(Error::InvalidInput(format!(
                "an f32 Krylov basis is for f64 work, not {}",
                T::NAME
            )));
        }
        assert!(m >= 1, "GMRES restart length must be at least 1");
        if m > MAX_RESTART {
            return Err(Error::InvalidInput(format!(
                "GMRES restart length {m}: the GPU kernels support at most {MAX_RESTART}"
            )));
        }
        let v32 = (0..=m)
            .map(|_| self.gpu.zeros::<f32>(n))
            .collect::<Result<Vec<_>>>()?;
        let stream = self.gpu.stream();
        let ptrs: Vec<u64> = v32
            .iter()
            .map(|b| {
                let (p, _sync) = cudarc::driver::DevicePtr::device_ptr(b, stream);
                p
            })
            .collect();
        let f = |name: &str| self.gpu.function(&GMRES, name, &[]);
        let narrow = NarrowBasis {
            ptrs32: self.gpu.upload(&ptrs)?,
            v32,
            cur: self.gpu.zeros::<T::Dev>(n)?,
            w: self.gpu.zeros::<T::Dev>(n)?,
            store: f("solver_gmres_store_f64b32")?,
            dots: f("solver_gmres_dots_f64b32")?,
            update: f("solver_gmres_update_f64b32")?,
            combine: f("solver_gmres_combine_f64b32")?,
        };
        let mut k = self.krylov_parts(n, m, false)?;
        k.narrow = Some(narrow);
        Ok(k)
    }

    fn krylov(&self, n: usize, m: usize) -> Result<GpuKrylov<T::Dev>> {
        self.krylov_parts(n, m, true)
    }

    fn krylov_pair<'k>(
        &self,
        k: &'k mut GpuKrylov<T::Dev>,
        j: usize,
    ) -> (&'k CudaSlice<T::Dev>, &'k mut CudaSlice<T::Dev>) {
        assert!(j < k.m, "Krylov column {j} of a restart length {}", k.m);
        if let Some(nb) = &mut k.narrow {
            // v_j as stored (widened by gmres_store), and the vector the operator writes.
            return (&nb.cur, &mut nb.w);
        }
        let (lo, hi) = k.v.split_at_mut(j + 1);
        (&lo[j], &mut hi[0])
    }

    fn krylov_small(&self, k: &GpuKrylov<T::Dev>) -> Result<Vec<T>> {
        Ok(T::from_dev(&self.gpu.download(&k.small)?).to_vec())
    }

    fn gmres_start(
        &self,
        r: &CudaSlice<T::Dev>,
        k: &mut GpuKrylov<T::Dev>,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        same_len("gmres_start", r.len(), k.len());
        let (n, m, it) = (n32(r.len()), n32(k.m), self.iter_arg(sc, it)?);
        let grid = self.grid(r.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.gmres_start);
        l.arg(r)
            .arg(&n)
            .arg(&mut sc.slots)
            .arg(&mut k.small)
            .arg(&m)
            .arg(&mut k.partials)
            .arg(&mut k.ticket)
            .arg(&mut sc.hist)
            .arg(&it);
        // SAFETY: solver_gmres_start(const T* r, u32 n, T* s, T* small, u32 m, T* partials,
        // u32* ticket, T* hist, u32 it); r has n elements, small GmresLayout{m}.len(), partials
        // at least `grid` entries (sized in `krylov`), hist more than it.
        unsafe { self.launch(&mut l, grid, "solver_gmres_start") }?;
        if k.narrow.is_some() {
            return self.gmres_store(k, 0, Some(r), sc);
        }
        self.gmres_scale(k, 0, Some(r), sc)
    }

    fn gmres_arnoldi(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        j: usize,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        if k.narrow.is_some() {
            return self.gmres_arnoldi_narrow(k, j, sc, it);
        }
        self.gmres_arnoldi_full(k, j, sc, it)
    }

    fn gmres_combine(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        ncols: usize,
        u: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        if k.narrow.is_some() {
            return self.gmres_combine_narrow(k, ncols, u);
        }
        self.gmres_combine_full(k, ncols, u)
    }
}

impl<T: Elem> GpuOps<T>
where
    T::Dev: KernelType,
{
    /// The Krylov workspace's small arrays and partials, and the basis itself when `basis`.
    fn krylov_parts(&self, n: usize, m: usize, basis: bool) -> Result<GpuKrylov<T::Dev>> {
        assert!(m >= 1, "GMRES restart length must be at least 1");
        if m > MAX_RESTART {
            return Err(Error::InvalidInput(format!(
                "GMRES restart length {m}: the GPU kernels support at most {MAX_RESTART}"
            )));
        }
        let v = if basis {
            (0..=m)
                .map(|_| self.gpu.zeros::<T::Dev>(n))
                .collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let stream = self.gpu.stream();
        let mut ptrs: Vec<u64> = v
            .iter()
            .map(|b| {
                let (p, _sync) = cudarc::driver::DevicePtr::device_ptr(b, stream);
                p
            })
            .collect();
        if ptrs.is_empty() {
            ptrs.push(0); // a narrower basis has its own table
        }
        let need = n.div_ceil(THREADS as usize).max(1);
        let dot_grid = need.min((self.gpu.sm_count().max(1) * DOT_BLOCKS_PER_SM) as usize) as u32;
        let lay = super::recur::GmresLayout { m };
        // Twice (m + 1) per block: the fused Arnoldi step double-buffers its partials.
        let npart = 2 * ((m + 1) * dot_grid as usize).max(self.grid(n) as usize);
        Ok(GpuKrylov {
            ptrs: self.gpu.upload(&ptrs)?,
            v,
            small: self.gpu.zeros::<T::Dev>(lay.len())?,
            partials: self.gpu.zeros::<T::Dev>(npart)?,
            ticket: self.gpu.zeros::<u32>(2)?,
            m,
            dot_grid,
            narrow: None,
        })
    }

    /// `v̂_dst ← fl32(scale · src)` and `cur ← v̂_dst` for a narrower basis (`src`: the
    /// operator's new vector when `None`), unless the status is set.
    fn gmres_store(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        dst: usize,
        src: Option<&CudaSlice<T::Dev>>,
        sc: &GpuScalars<T::Dev>,
    ) -> Result<()> {
        let m = n32(k.m);
        let nb = k.narrow.as_mut().expect("a narrower basis");
        let n = n32(nb.cur.len());
        let grid = self.grid(nb.cur.len());
        let mut l = self.gpu.stream().launch_builder(&nb.store);
        match src {
            Some(s) => {
                same_len("gmres_store", s.len(), nb.cur.len());
                l.arg(s)
            }
            None => l.arg(&nb.w),
        };
        l.arg(&mut nb.v32[dst])
            .arg(&mut nb.cur)
            .arg(&n)
            .arg(&sc.slots)
            .arg(&k.small)
            .arg(&m);
        // SAFETY: solver_gmres_store_f64b32(const double* src, float* dst, double* cur, u32 n,
        // const double* s, const double* small, u32 m): T is f64 (krylov_stored builds a
        // narrower basis for f64 alone); src (r or w), dst = v32[dst] and cur have n elements
        // and are distinct buffers; small has GmresLayout{m}.len() entries.
        unsafe { self.launch(&mut l, grid, "solver_gmres_store_f64b32") }
    }

    /// The Arnoldi step of column `j` on a narrower basis: the separate CGS2 kernels (the
    /// fused small-system kernel reads a full basis) on `w`, then `gmres_store`.
    fn gmres_arnoldi_narrow(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        j: usize,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        assert!(j < k.m, "Krylov column {j} of a restart length {}", k.m);
        let lay = super::recur::GmresLayout { m: k.m };
        let len = k.len();
        let (n, nv, m, it32) = (n32(len), n32(j + 1), n32(k.m), self.iter_arg(sc, it)?);
        let grid = self.grid(len);
        for (pass, coef) in [(0u32, lay.c1()), (1, lay.c2())] {
            let coef = n32(coef);
            let nb = k.narrow.as_mut().expect("a narrower basis");
            let mut l = self.gpu.stream().launch_builder(&nb.dots);
            l.arg(&nb.ptrs32)
                .arg(&nb.w)
                .arg(&n)
                .arg(&nv)
                .arg(&sc.slots)
                .arg(&mut k.small)
                .arg(&coef)
                .arg(&mut k.partials)
                .arg(&mut k.ticket);
            let cfg = cudarc::driver::LaunchConfig {
                grid_dim: (k.dot_grid, nv.div_ceil(GMRES_DOTS_BATCH), 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: solver_gmres_dots_f64b32(const u64* vptr, const double* w, u32 n, u32 nv,
            // const double* s, double* small, u32 out, double* partials, u32* ticket): vptr holds
            // m + 1 ≥ nv pointers to f32 vectors of n elements (alive in `v32`), w (f64, n
            // elements) is not among them, partials holds (m + 1)·dot_grid entries.
            unsafe { l.launch(cfg) }.map_err(launch_err("solver_gmres_dots_f64b32"))?;
            let final_ = pass;
            let mut l = self.gpu.stream().launch_builder(&nb.update);
            l.arg(&nb.ptrs32)
                .arg(&mut nb.w)
                .arg(&n)
                .arg(&nv)
                .arg(&mut sc.slots)
                .arg(&mut k.small)
                .arg(&m)
                .arg(&coef)
                .arg(&final_)
                .arg(&mut k.partials)
                .arg(&mut k.ticket)
                .arg(&mut sc.hist)
                .arg(&it32);
            // SAFETY: solver_gmres_update_f64b32(const u64* vptr, double* w, u32 n, u32 nv,
            // double* s, double* small, u32 m, u32 coef, u32 final, double* partials,
            // u32* ticket, double* hist, u32 it): as above; w is written, v32[0..nv] read.
            unsafe { self.launch(&mut l, grid, "solver_gmres_update_f64b32") }?;
        }
        self.gmres_store(k, j + 1, None, sc)
    }

    /// `u ← V̂·y` on a narrower basis (after the least-squares solve).
    fn gmres_combine_narrow(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        ncols: usize,
        u: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        assert!(
            ncols <= k.m,
            "{ncols} GMRES columns of a restart length {}",
            k.m
        );
        same_len("gmres_combine", u.len(), k.len());
        let (n, m, nc) = (n32(u.len()), n32(k.m), n32(ncols));
        let mut l = self.gpu.stream().launch_builder(&self.k.gmres_solve_y);
        l.arg(&mut k.small).arg(&m).arg(&nc);
        // SAFETY: solver_gmres_solve_y(T* small, u32 m, u32 k); small has GmresLayout{m}.len()
        // entries and k ≤ m; one thread works.
        unsafe { l.launch(Gpu::cfg(1, 32, 0)) }.map_err(launch_err("solver_gmres_solve_y"))?;
        let nb = k.narrow.as_ref().expect("a narrower basis");
        let grid = self.grid(u.len());
        let mut l = self.gpu.stream().launch_builder(&nb.combine);
        l.arg(&nb.ptrs32)
            .arg(u)
            .arg(&n)
            .arg(&nc)
            .arg(&k.small)
            .arg(&m);
        // SAFETY: solver_gmres_combine_f64b32(const u64* vptr, double* u, u32 n, u32 ncols,
        // const double* small, u32 m); vptr holds m + 1 ≥ ncols pointers to f32 vectors of n
        // elements, u (f64, n elements) is not one of them.
        unsafe { self.launch(&mut l, grid, "solver_gmres_combine_f64b32") }
    }

    fn gmres_arnoldi_full(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        j: usize,
        sc: &mut GpuScalars<T::Dev>,
        it: usize,
    ) -> Result<()> {
        assert!(j < k.m, "Krylov column {j} of a restart length {}", k.m);
        let lay = super::recur::GmresLayout { m: k.m };
        let len = k.v[0].len();
        let (n, nv, m, it32) = (n32(len), n32(j + 1), n32(k.m), self.iter_arg(sc, it)?);
        if let Some(grid) = self.fused_grid(len) {
            // One launch for the whole Arnoldi step (module docs, "Small systems").
            assert!(
                2 * (j + 1) * grid as usize <= k.partials.len(),
                "fused Arnoldi partials"
            );
            let j32 = n32(j);
            let mut l = self.gpu.stream().launch_builder(&self.fk().gmres_arnoldi);
            l.arg(&k.ptrs)
                .arg(&n)
                .arg(&j32)
                .arg(&mut sc.slots)
                .arg(&mut k.small)
                .arg(&m)
                .arg(&mut k.partials)
                .arg(&mut k.ticket)
                .arg(&mut sc.hist)
                .arg(&it32);
            // SAFETY: solver_gmres_arnoldi(const u64* vptr, T* n, u32 j, T* s, T* small, u32 m,
            // T* partials, u32* bar, T* hist, u32 it): vptr holds m + 1 > j + 1 pointers to
            // vectors of n elements (alive in `k.v`); v_{j+1} is written, v_0 … v_j read;
            // partials holds 2·(j + 1)·grid entries (asserted), bar 2 words, small
            // GmresLayout{m}.len(), hist more than it. Cooperative: see cg_tail.
            return unsafe { self.launch_fused(&mut l, grid, "solver_gmres_arnoldi") };
        }
        let grid = self.grid(len);
        for (pass, coef) in [(0u32, lay.c1()), (1, lay.c2())] {
            let coef = n32(coef);
            // c = Vᵀw.
            let w = &k.v[j + 1];
            let mut l = self.gpu.stream().launch_builder(&self.k.gmres_dots);
            l.arg(&k.ptrs)
                .arg(w)
                .arg(&n)
                .arg(&nv)
                .arg(&sc.slots)
                .arg(&mut k.small)
                .arg(&coef)
                .arg(&mut k.partials)
                .arg(&mut k.ticket);
            let cfg = cudarc::driver::LaunchConfig {
                grid_dim: (k.dot_grid, nv.div_ceil(GMRES_DOTS_BATCH), 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: solver_gmres_dots(const u64* vptr, const T* w, u32 n, u32 nv, const T* s,
            // T* small, u32 out, T* partials, u32* ticket): vptr holds m + 1 ≥ nv pointers to
            // vectors of n elements (alive in `k.v`), w is one of them (v_{j+1}, read only here
            // and not among the first nv), partials holds (m + 1)·dot_grid entries.
            unsafe { l.launch(cfg) }.map_err(launch_err("solver_gmres_dots"))?;
            // w −= V·c (and ‖w‖², Givens and tests in the second pass).
            let final_ = pass;
            let w = &mut k.v[j + 1];
            let mut l = self.gpu.stream().launch_builder(&self.k.gmres_update);
            l.arg(&k.ptrs)
                .arg(w)
                .arg(&n)
                .arg(&nv)
                .arg(&mut sc.slots)
                .arg(&mut k.small)
                .arg(&m)
                .arg(&coef)
                .arg(&final_)
                .arg(&mut k.partials)
                .arg(&mut k.ticket)
                .arg(&mut sc.hist)
                .arg(&it32);
            // SAFETY: solver_gmres_update(const u64* vptr, T* w, u32 n, u32 nv, T* s, T* small,
            // u32 m, u32 coef, u32 final, T* partials, u32* ticket, T* hist, u32 it): as above;
            // w = v_{j+1} is written and only v_0 … v_j (nv = j + 1 ≤ 256) are read through
            // vptr; partials has at least `grid` entries; hist more than it.
            unsafe { self.launch(&mut l, grid, "solver_gmres_update") }?;
        }
        // Normalise v_{j+1} in place.
        self.gmres_scale(k, j + 1, None, sc)
    }

    fn gmres_combine_full(
        &self,
        k: &mut GpuKrylov<T::Dev>,
        ncols: usize,
        u: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        assert!(
            ncols <= k.m,
            "{ncols} GMRES columns of a restart length {}",
            k.m
        );
        same_len("gmres_combine", u.len(), k.v[0].len());
        let (n, m, nc) = (n32(u.len()), n32(k.m), n32(ncols));
        let mut l = self.gpu.stream().launch_builder(&self.k.gmres_solve_y);
        l.arg(&mut k.small).arg(&m).arg(&nc);
        // SAFETY: solver_gmres_solve_y(T* small, u32 m, u32 k); small has GmresLayout{m}.len()
        // entries and k ≤ m; one thread works.
        unsafe { l.launch(Gpu::cfg(1, 32, 0)) }.map_err(launch_err("solver_gmres_solve_y"))?;
        let grid = self.grid(u.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.gmres_combine);
        l.arg(&k.ptrs).arg(u).arg(&n).arg(&nc).arg(&k.small).arg(&m);
        // SAFETY: solver_gmres_combine(const u64* vptr, T* u, u32 n, u32 ncols, const T* small,
        // u32 m); vptr holds m + 1 ≥ ncols pointers to vectors of n elements, u is not one of
        // them and has n elements.
        unsafe { self.launch(&mut l, grid, "solver_gmres_combine") }
    }
}

impl<T> GpuScalars<T> {
    /// The slots and the residual history, for backends that run their own recurrence kernels
    /// on these scalars (the distributed backend, `dist::nccl`).
    #[cfg(feature = "nccl")]
    pub(crate) fn slots_hist_mut(&mut self) -> (&mut CudaSlice<T>, &mut CudaSlice<T>) {
        (&mut self.slots, &mut self.hist)
    }

    /// The grid of the reductions: fixed when the scalars were allocated (so the partial-sum
    /// buffer fits and the sums are deterministic).
    pub(crate) fn grid_for<U: Elem>(&self, ops: &GpuOps<U>, n: usize) -> u32
    where
        U::Dev: KernelType,
    {
        let g = ops.grid(n);
        assert!(
            g <= self.grid,
            "solver workspace was allocated for a grid of {} blocks, vectors of length {n} need {g}",
            self.grid
        );
        g
    }
}

impl<T: KernelType> GpuScalars<T> {
    /// Pushes the trailing arguments of a reduction kernel: `T* s, T* partials, u32* ticket`,
    /// then `T* hist` when `hist`, then `u32 it` when given.
    fn push_reduction<'a>(
        &'a mut self,
        l: &mut cudarc::driver::LaunchArgs<'a>,
        hist: bool,
        it: Option<&'a u32>,
    ) {
        l.arg(&mut self.slots)
            .arg(&mut self.partials)
            .arg(&mut self.ticket);
        if hist {
            l.arg(&mut self.hist);
        }
        if let Some(it) = it {
            l.arg(it);
        }
    }
}

/// `f64` work with `f32` work beside it on the same device and stream.
impl super::NarrowOps for GpuOps<f64> {
    type Low = GpuOps<f32>;
    fn low(&self) -> Result<GpuOps<f32>> {
        GpuOps::<f32>::new(&self.gpu)
    }
    fn narrow(&self, x: &CudaSlice<f64>, y: &mut CudaSlice<f32>) -> Result<()> {
        same_len("narrow", x.len(), y.len());
        let n = n32(x.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.narrow);
        l.arg(x).arg(y).arg(&n);
        // SAFETY: vector_narrow_f64b32(const double* x, float* y, u32 n); x and y have n
        // elements.
        unsafe { self.launch(&mut l, self.grid(x.len()), "vector_narrow_f64b32") }
    }
    fn widen(&self, x: &CudaSlice<f32>, y: &mut CudaSlice<f64>) -> Result<()> {
        same_len("widen", x.len(), y.len());
        let n = n32(x.len());
        let mut l = self.gpu.stream().launch_builder(&self.k.widen);
        l.arg(x).arg(y).arg(&n);
        // SAFETY: vector_widen_f64b32(const float* x, double* y, u32 n); x and y have n
        // elements.
        unsafe { self.launch(&mut l, self.grid(x.len()), "vector_widen_f64b32") }
    }
}
