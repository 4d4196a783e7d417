//! GPU triangular solves and incomplete factorizations (`kernels/sparse/sptrsv.cu`).
//!
//! - [`GpuTriangular`]: the public solve of one triangle of a matrix uploaded once (analysis on
//!   the CPU, see the [module docs](super)), solving for any right-hand side with the level or the
//!   synchronization-free kernel ([`SptrsvAlgorithm`]).
//! - [`GpuIncompleteFactor`]: ILU(0) / IC(0) factored on the GPU level by level (a warp per row,
//!   the rows of a level in parallel; runs of narrow levels in one block), re-factorable with new
//!   values on the same pattern, and its two triangular solves.
//!
//! Every solve only queues work on the [`Gpu`]'s stream (a memset and one launch for the
//! synchronization-free kernel, one launch per level group otherwise), so it can be captured in a
//! CUDA graph; the factorization synchronises once at its end to read the pivot check.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

use super::{
    gpu_level_groups, lanes_per_row, Diagonal, LevelGroup, LevelStats, SptrsvAlgorithm, Triangle,
    TriangularPlan,
};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelSource;
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Scalar;
use crate::sparse::incomplete::{
    pivot_error, Application, ApplyModes, FactorKind, IncompleteParams, IncompleteStructure,
    Ordering,
};

/// The largest `x` a run of narrow levels keeps in shared memory (the dynamic shared memory a
/// block gets without opting in): 6144 rows in f64, 12288 in f32.
pub const SMEM_X_BYTES: usize = 48 * 1024;

/// `kernels/sparse/sptrsv.cu`.
pub const SPTRSV_SRC: KernelSource = KernelSource {
    name: "sparse/sptrsv.cu",
    text: include_str!("../../../kernels/sparse/sptrsv.cu"),
    headers: &[&crate::gpu::kernels::COMMON],
};

/// Threads per block of the synchronization-free kernel and of the one-level launches: 8 warps,
/// 8 blocks per SM fill an H100/H200 SM.
pub const THREADS: u32 = 256;
/// Levels of an incomplete factorization's schedule above which it runs on the host (one pass
/// over the rows) and the values are uploaded: the level-by-level GPU factorization costs about
/// 50 µs per level of a narrow run (a warp per row, the pivot rows read from L2), so a near
/// chain such as raefsky2's 1516 levels took 81 ms on an H200 against about 10 ms on one CPU
/// core (`benches/results/history/ilu.md`).
pub const HOST_FACTOR_LEVELS: usize = 256;

/// Threads of a one-block launch that sweeps a run of narrow levels: the largest block, so the
/// runs are long (each level of the run must fit in one pass of the block).
pub const GROUP_THREADS: u32 = 1024;

/// Blocks per SM at most of the cooperative sweep kernels (`sptrsv_jacobi_fused`,
/// `ilu_apply_sweeps`): enough warps to give each row of a corpus-sized triangle its own
/// warp, few enough that a grid barrier (one atomic per block) stays short.
pub const FUSED_BLOCKS_PER_SM: u32 = 4;

/// The longest row (in entries per lane) a triangle may have for its sweeps to run in the
/// cooperative kernels. There every sweep reads `x` from L2 (it was written by other blocks in the
/// same launch) and waits at a grid barrier for the slowest row, so a hub row read by few lanes
/// sets each sweep's time; separate launches read it through L1. Measured on an H100
/// (`benches/results/history/ilu.md`, 8 sweeps): the cooperative application took 0.40–0.84× the
/// separate launches' time on 16 of the 17 corpus factors whose longest row has at most 10
/// entries per lane (494_bus 1.02×), and 1.04–1.42× on the 7 with 14–654 (fs_183_1, arc130,
/// watt_2, rajat19, adder_dcop_05, bayer10, 1138_bus).
pub const FUSED_MAX_ROW_PER_LANE: u32 = 12;

/// The kernels of `sptrsv.cu` for one element type.
struct Kernels {
    levels: CudaFunction,
    syncfree: CudaFunction,
    ilu0: CudaFunction,
    ic0: CudaFunction,
    gather: CudaFunction,
    jacobi: CudaFunction,
    jacobi_fused: CudaFunction,
    apply_sweeps: CudaFunction,
    /// The most co-resident blocks of the cooperative sweep kernels (0: they cannot run, the
    /// sweeps are separate launches).
    fused_blocks: u32,
}

impl Kernels {
    fn load<T: KernelType>(gpu: &Gpu) -> Result<Self> {
        let defines = [("SPTRSV_THREADS", THREADS.to_string())];
        let f = |root: &str| gpu.typed_function::<T>(&SPTRSV_SRC, root, &defines);
        Ok(Kernels {
            levels: f("sptrsv_levels")?,
            syncfree: f("sptrsv_syncfree")?,
            ilu0: f("ilu0_levels")?,
            ic0: f("ic0_levels")?,
            gather: f("gather")?,
            jacobi: f("sptrsv_jacobi")?,
            jacobi_fused: f("sptrsv_jacobi_fused")?,
            apply_sweeps: f("ilu_apply_sweeps")?,
            fused_blocks: 0,
        }
        .with_fused_blocks(gpu))
    }

    /// Sets [`fused_blocks`](Self::fused_blocks) from the occupancy of the cooperative kernels
    /// (their grid barriers need every block resident; the cooperative launch makes the driver
    /// refuse a grid that could not be).
    fn with_fused_blocks(mut self, gpu: &Gpu) -> Self {
        // The occupancy query does not bind the context itself.
        let bound = gpu.context().bind_to_thread().is_ok();
        let per_sm = [&self.jacobi_fused, &self.apply_sweeps]
            .iter()
            .map(|f| {
                f.occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
                    .unwrap_or(0)
            })
            .min()
            .unwrap_or(0)
            .min(FUSED_BLOCKS_PER_SM);
        // `SEGSPARSE_SWEEPS=separate` keeps one launch per sweep (for measuring the fusion).
        let separate = std::env::var("SEGSPARSE_SWEEPS").is_ok_and(|v| v == "separate");
        self.fused_blocks = if bound && !separate {
            per_sm * gpu.sm_count()
        } else {
            0
        };
        self
    }

    /// The grid of a cooperative sweep launch over `n` rows at `lanes` lanes per row, or `None`
    /// when the cooperative kernels cannot run here.
    fn fused_grid(&self, n: u32, lanes: u32) -> Option<u32> {
        let need = n.div_ceil(THREADS / lanes.max(1)).max(1);
        (self.fused_blocks > 0).then(|| need.min(self.fused_blocks))
    }
}

fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Gpu::launch_error(name, e)
}

const NULL: u64 = 0;

/// A [`TriangularPlan`] on the device, with its launch schedule.
pub struct GpuTriPlan {
    n: usize,
    order: CudaSlice<u32>,
    level_ptr: CudaSlice<u32>,
    start: CudaSlice<u32>,
    end: CudaSlice<u32>,
    diag: Option<CudaSlice<u32>>,
    groups: Vec<LevelGroup>,
    lanes: u32,
    algorithm: SptrsvAlgorithm,
    stats: LevelStats,
    /// Ready flags and the row counter of the synchronization-free kernel (n + 1 words).
    flags: Mutex<CudaSlice<u32>>,
    /// The grid-barrier word of the cooperative sweep kernels (never reset: see `sptrsv.cu`).
    bar: Mutex<CudaSlice<u32>>,
    /// The longest row's entries per lane (see [`FUSED_MAX_ROW_PER_LANE`]).
    row_per_lane: u32,
    sm_count: u32,
}

impl GpuTriPlan {
    /// Uploads `plan` and resolves `algorithm` ([`SptrsvAlgorithm::choose`]).
    ///
    /// # Errors
    /// Device allocation or copy failures.
    pub fn upload(
        gpu: &Arc<Gpu>,
        plan: &TriangularPlan,
        algorithm: SptrsvAlgorithm,
    ) -> Result<Self> {
        let stats = plan.stats();
        let lanes = lanes_per_row(&stats);
        let groups = gpu_level_groups(plan.level_ptr(), lanes, GROUP_THREADS, THREADS);
        let up = |v: &[u32]| {
            if v.is_empty() {
                gpu.zeros::<u32>(1)
            } else {
                gpu.upload(v)
            }
        };
        Ok(GpuTriPlan {
            n: plan.n(),
            order: up(plan.order())?,
            level_ptr: up(plan.level_ptr())?,
            start: up(plan.start())?,
            end: up(plan.end())?,
            diag: match plan.diagonal() {
                Diagonal::Unit => None,
                Diagonal::NonUnit => Some(up(plan.diag_pos())?),
            },
            algorithm: algorithm.choose(groups.len()),
            groups,
            lanes,
            stats,
            flags: Mutex::new(gpu.zeros::<u32>(plan.n() + 1)?),
            bar: Mutex::new(gpu.zeros::<u32>(1)?),
            row_per_lane: plan
                .start()
                .iter()
                .zip(plan.end())
                .map(|(&s, &e)| (e - s).div_ceil(lanes))
                .max()
                .unwrap_or(0),
            sm_count: gpu.sm_count(),
        })
    }

    /// The algorithm the solves use.
    pub fn algorithm(&self) -> SptrsvAlgorithm {
        self.algorithm
    }
    /// Launches of the level-by-level solve.
    pub fn level_groups(&self) -> &[LevelGroup] {
        &self.groups
    }
    /// The level statistics.
    pub fn stats(&self) -> LevelStats {
        self.stats
    }
    /// Lanes per row of the level kernels.
    pub fn lanes(&self) -> u32 {
        self.lanes
    }
    /// Whether this triangle's sweeps may run in one cooperative launch (its longest row has at
    /// most [`FUSED_MAX_ROW_PER_LANE`] entries per lane).
    pub fn sweeps_fusable(&self) -> bool {
        self.row_per_lane <= FUSED_MAX_ROW_PER_LANE
    }

    /// Forces an algorithm (benchmarks compare both on one plan).
    pub fn set_algorithm(&mut self, algorithm: SptrsvAlgorithm) {
        self.algorithm = algorithm.choose(self.groups.len());
    }

    /// `x = T⁻¹b` exactly (by the plan's algorithm), or approximately by `sweeps` Jacobi
    /// sweeps when `jacobi` is given (with a scratch vector of n elements).
    #[allow(clippy::too_many_arguments)]
    fn solve<T: KernelType>(
        &self,
        gpu: &Gpu,
        k: &Kernels,
        col: &CudaSlice<u32>,
        val: &CudaSlice<T>,
        b: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
        jacobi: Option<(usize, &mut CudaSlice<T>)>,
    ) -> Result<()> {
        assert_eq!(
            b.len(),
            self.n,
            "triangular solve: b has {} elements, the matrix {} rows",
            b.len(),
            self.n
        );
        assert_eq!(
            x.len(),
            self.n,
            "triangular solve: x has {} elements, the matrix {} rows",
            x.len(),
            self.n
        );
        if self.n == 0 {
            return Ok(());
        }
        let stream = gpu.stream();
        let n = self.n as u32;
        if let Some((sweeps, scratch)) = jacobi {
            assert!(
                scratch.len() >= self.n,
                "Jacobi scratch of {} elements for {} rows",
                scratch.len(),
                self.n
            );
            if let Some(grid) = k
                .fused_grid(n, self.lanes)
                .filter(|_| self.sweeps_fusable())
            {
                let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
                let sweeps = sweeps as u32;
                let mut l = stream.launch_builder(&k.jacobi_fused);
                l.arg(&n).arg(&self.start).arg(&self.end);
                match &self.diag {
                    Some(d) => l.arg(d),
                    None => l.arg(&NULL),
                };
                l.arg(col)
                    .arg(val)
                    .arg(b)
                    .arg(&NULL)
                    .arg(&sweeps)
                    .arg(&mut *x)
                    .arg(&mut *scratch)
                    .arg(&NULL)
                    .arg(&NULL)
                    .arg(&self.lanes)
                    .arg(&mut *bar);
                // SAFETY: sptrsv_jacobi_fused(u32 n, const u32* start, const u32* end,
                // const u32* diag, const u32* col, const T* val, const T* b, const u32* bmap,
                // u32 sweeps, T* x, T* scratch, const u32* omap, T* out, u32 g, u32* bar):
                // start/end/diag have n entries (diag null for a unit diagonal), col/val hold the
                // positions they point to, b, x and the scratch n elements (x and the scratch
                // distinct, b distinct from both); bmap, omap and out null; bar one word that only
                // these cooperative kernels touch. The cooperative launch guarantees that the
                // grid (at most the co-resident blocks) is resident, as its barriers need.
                unsafe { l.launch_cooperative(Gpu::cfg(grid, THREADS, 0)) }
                    .map_err(launch_err("sptrsv_jacobi_fused"))?;
                return Ok(());
            }
            let rows_per_block = THREADS / self.lanes;
            let blocks = n
                .div_ceil(rows_per_block)
                .min(self.sm_count.max(1) * (2048 / THREADS));
            // Sweep j writes x when (sweeps − j) is even, else the scratch, so the last is x.
            for j in 0..=sweeps {
                let to_x = (sweeps - j) % 2 == 0;
                let mut l = stream.launch_builder(&k.jacobi);
                l.arg(&n).arg(&self.start).arg(&self.end);
                match &self.diag {
                    Some(d) => l.arg(d),
                    None => l.arg(&NULL),
                };
                l.arg(col).arg(val).arg(b);
                match (j, to_x) {
                    (0, true) => l.arg(&NULL).arg(&mut *x),
                    (0, false) => l.arg(&NULL).arg(&mut *scratch),
                    (_, true) => l.arg(&*scratch).arg(&mut *x),
                    (_, false) => l.arg(&*x).arg(&mut *scratch),
                };
                l.arg(&self.lanes);
                // SAFETY: sptrsv_jacobi(u32 n, const u32* start, const u32* end,
                // const u32* diag, const u32* col, const T* val, const T* b, const T* x_in,
                // T* x_out, u32 g): start/end/diag have n entries (diag null for a unit
                // diagonal), col/val hold the positions they point to, b, x and the scratch n
                // elements; x_in (null in the first sweep) and x_out are distinct buffers.
                unsafe { l.launch(Gpu::cfg(blocks, THREADS, 0)) }
                    .map_err(launch_err("sptrsv_jacobi"))?;
            }
            return Ok(());
        }
        match self.algorithm {
            SptrsvAlgorithm::SyncFree => {
                let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
                stream
                    .memset_zeros(&mut *flags)
                    .map_err(|e| Error::cuda("clearing the sync-free flags", e))?;
                let warps = THREADS / 32;
                let blocks = n
                    .div_ceil(warps)
                    .min(self.sm_count.max(1) * (2048 / THREADS));
                let mut l = stream.launch_builder(&k.syncfree);
                l.arg(&n).arg(&self.order).arg(&self.start).arg(&self.end);
                match &self.diag {
                    Some(d) => l.arg(d),
                    None => l.arg(&NULL),
                };
                l.arg(col).arg(val).arg(b).arg(x).arg(&mut *flags);
                // SAFETY: sptrsv_syncfree(u32 n, const u32* order, const u32* start,
                // const u32* end, const u32* diag, const u32* col, const T* val, const T* b,
                // T* x, u32* flags): order/start/end/diag have n entries (diag null for a unit
                // diagonal), col/val hold every position start..end and diag point to (the
                // plan was made for this pattern), b and x have n elements, flags n + 1 words
                // zeroed just above on the same stream.
                unsafe { l.launch(Gpu::cfg(blocks, THREADS, 0)) }
                    .map_err(launch_err("sptrsv_syncfree"))?;
            }
            _ => {
                // A run keeps x in shared memory when it fits the default 48 KiB.
                let bytes = self.n * std::mem::size_of::<T>();
                let smem_on = u32::from(bytes <= SMEM_X_BYTES);
                for g in &self.groups {
                    let smem = if g.blocks == 1 && smem_on == 1 {
                        bytes as u32
                    } else {
                        0
                    };
                    let mut l = stream.launch_builder(&k.levels);
                    l.arg(&self.order)
                        .arg(&self.level_ptr)
                        .arg(&g.lo)
                        .arg(&g.hi)
                        .arg(&n)
                        .arg(&smem_on)
                        .arg(&self.start)
                        .arg(&self.end);
                    match &self.diag {
                        Some(d) => l.arg(d),
                        None => l.arg(&NULL),
                    };
                    l.arg(col).arg(val).arg(b).arg(&mut *x).arg(&self.lanes);
                    // SAFETY: sptrsv_levels(const u32* order, const u32* level_ptr, u32 lo,
                    // u32 hi, u32 n, u32 smem, const u32* start, const u32* end, const u32* diag,
                    // const u32* col, const T* val, const T* b, T* x, u32 g): level_ptr has
                    // levels + 1 ≥ hi + 1 entries, the other arrays as for the sync-free kernel;
                    // g divides 32; a run (one block, blockDim ≥ g × its widest level) gets
                    // n·sizeof(T) bytes of dynamic shared memory when smem = 1.
                    unsafe { l.launch(Gpu::cfg(g.blocks, g.threads, smem)) }
                        .map_err(launch_err("sptrsv_levels"))?;
                }
            }
        }
        Ok(())
    }
}

/// One triangle of a matrix on the GPU, analysed once, solved for any right-hand side.
///
/// ```no_run
/// # fn main() -> segsparse::Result<()> {
/// use segsparse::gpu::Gpu;
/// use segsparse::sparse::triangular::{gpu::GpuTriangular, Diagonal, SptrsvAlgorithm, Triangle};
/// let l = segsparse::CsrMatrix::<f64>::identity(4);
/// let gpu = Gpu::shared()?;
/// let t = GpuTriangular::upload(&gpu, &l, Triangle::Lower, Diagonal::NonUnit, SptrsvAlgorithm::Auto)?;
/// let b = gpu.upload(&[1.0; 4])?;
/// let mut x = gpu.zeros::<f64>(4)?;
/// t.solve(&b, &mut x)?;
/// # Ok(()) }
/// ```
pub struct GpuTriangular<T> {
    gpu: Arc<Gpu>,
    k: Kernels,
    host_plan: TriangularPlan,
    plan: GpuTriPlan,
    col: CudaSlice<u32>,
    val: CudaSlice<T>,
}

impl<T: Scalar + KernelType> GpuTriangular<T> {
    /// Analyses the `triangle` of `a` (CPU), checks its diagonal and uploads it.
    ///
    /// # Errors
    /// As [`TriangularPlan::analyse`] and [`TriangularPlan::check_diagonal`]; device failures.
    pub fn upload(
        gpu: &Arc<Gpu>,
        a: &CsrMatrix<T>,
        triangle: Triangle,
        diagonal: Diagonal,
        algorithm: SptrsvAlgorithm,
    ) -> Result<Self> {
        let host_plan = TriangularPlan::analyse(a, triangle, diagonal)?;
        host_plan.check_diagonal(a.values())?;
        let plan = GpuTriPlan::upload(gpu, &host_plan, algorithm)?;
        let (col, val) = if a.nnz() == 0 {
            (gpu.zeros::<u32>(1)?, gpu.zeros::<T>(1)?)
        } else {
            (gpu.upload(a.col_idx())?, gpu.upload(a.values())?)
        };
        Ok(GpuTriangular {
            k: Kernels::load::<T>(gpu)?,
            gpu: gpu.clone(),
            host_plan,
            plan,
            col,
            val,
        })
    }

    /// `x = T⁻¹b` (queued on the stream).
    ///
    /// # Panics
    /// When `b` or `x` do not have the matrix's row count.
    pub fn solve(&self, b: &CudaSlice<T>, x: &mut CudaSlice<T>) -> Result<()> {
        self.plan
            .solve(&self.gpu, &self.k, &self.col, &self.val, b, x, None)
    }

    /// New values on the same pattern (no new analysis).
    ///
    /// # Errors
    /// A zero or non-finite diagonal entry (the row is named).
    ///
    /// # Panics
    /// When `a` does not have the pattern's size.
    pub fn update_values(&mut self, a: &CsrMatrix<T>) -> Result<()> {
        assert_eq!(
            a.nnz(),
            self.host_plan.matrix_nnz(),
            "triangular update: {} entries, the plan has {}",
            a.nnz(),
            self.host_plan.matrix_nnz()
        );
        self.host_plan.check_diagonal(a.values())?;
        if a.nnz() > 0 {
            self.gpu.upload_into(a.values(), &mut self.val)?;
        }
        Ok(())
    }

    /// The device plan (algorithm, level groups, statistics).
    pub fn plan(&self) -> &GpuTriPlan {
        &self.plan
    }

    /// Forces an algorithm.
    pub fn set_algorithm(&mut self, algorithm: SptrsvAlgorithm) {
        self.plan.set_algorithm(algorithm);
    }
}

/// An ILU(0) or IC(0) factorization on the GPU. See the [module docs](self).
pub struct GpuIncompleteFactor<T> {
    gpu: Arc<Gpu>,
    k: Kernels,
    structure: IncompleteStructure,
    params: IncompleteParams,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    diag: CudaSlice<u32>,
    val: CudaSlice<T>,
    rowmax: CudaSlice<T>,
    bad: CudaSlice<u32>,
    /// The factorization's schedule (on the lower plan's levels, a warp per row).
    factor_groups: Vec<LevelGroup>,
    lower: GpuTriPlan,
    upper: GpuTriPlan,
    /// IC: `Lᵀ`'s columns, values and the gather map from `L`.
    transpose: Option<(CudaSlice<u32>, CudaSlice<T>, CudaSlice<u32>)>,
    shift_used: f64,
    /// The ping-pong vector of the Jacobi sweeps.
    scratch: Mutex<CudaSlice<T>>,
    /// The row order and the inverse ordering on the device (see
    /// [`IncompleteStructure::perm_in`]), and the permuted vector between them.
    perm_in: Option<CudaSlice<u32>>,
    perm_out: Option<CudaSlice<u32>>,
    permuted: Mutex<CudaSlice<T>>,
    modes: ApplyModes,
}

impl<T: Scalar + KernelType> GpuIncompleteFactor<T> {
    /// Analyses `a` (CPU) and factors it on the GPU.
    ///
    /// # Errors
    /// As [`IncompleteStructure::analyse`]; a bad pivot naming its row; device failures.
    pub fn new(
        gpu: &Arc<Gpu>,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self> {
        if let Some(f) = crate::sparse::incomplete::natural_first(
            params,
            |p| Self::new(gpu, a, kind, p),
            |f| (f.structure.lower.levels(), f.modes),
        )? {
            return Ok(f);
        }
        let s = IncompleteStructure::analyse_with(a, kind, params)?;
        let s_n = s.n.max(1);
        let sweeps_possible = params.jacobi_sweeps > 0 || params.application == Application::Auto;
        let permuted = s.perm_in.is_some() || s.perm_out.is_some();
        let up = |v: &[u32]| {
            if v.is_empty() {
                gpu.zeros::<u32>(1)
            } else {
                gpu.upload(v)
            }
        };
        let nnz = s.col_idx.len().max(1);
        let transpose = match &s.transpose {
            Some((_, tcol, tmap)) => Some((up(tcol)?, gpu.zeros::<T>(nnz)?, up(tmap)?)),
            None => None,
        };
        let mut f = GpuIncompleteFactor {
            k: Kernels::load::<T>(gpu)?,
            row_ptr: up(&s.row_ptr)?,
            col: up(&s.col_idx)?,
            diag: up(&s.diag_pos)?,
            val: gpu.zeros::<T>(nnz)?,
            rowmax: gpu.zeros::<T>(s.n.max(1))?,
            bad: gpu.zeros::<u32>(1)?,
            factor_groups: gpu_level_groups(s.lower.level_ptr(), 32, GROUP_THREADS, THREADS),
            lower: GpuTriPlan::upload(gpu, &s.lower, params.algorithm)?,
            upper: GpuTriPlan::upload(gpu, &s.upper, params.algorithm)?,
            transpose,
            gpu: gpu.clone(),
            params: *params,
            shift_used: params.shift,
            scratch: Mutex::new(gpu.zeros::<T>(if sweeps_possible { s_n } else { 1 })?),
            perm_in: s.perm_in.as_deref().map(up).transpose()?,
            perm_out: s.perm_out.as_deref().map(up).transpose()?,
            permuted: Mutex::new(gpu.zeros::<T>(if permuted { s_n } else { 1 })?),
            modes: ApplyModes::fixed(params),
            structure: s,
        };
        let reordered_auto = params.ordering == Ordering::Auto
            && f.structure.preprocessing.ordering != Ordering::Natural;
        if let Err(e) = f.refactor(a) {
            return match reordered_auto {
                true => Self::new(gpu, a, kind, &params.natural_fallback()),
                false => Err(e),
            };
        }
        if ApplyModes::needs_values(params) {
            // The choice reads the factor's values once (the CPU factor decides the same way).
            let v = f.download_values()?;
            let t: Vec<T> = match &f.structure.transpose {
                Some((_, _, map)) => map.iter().map(|&p| v[p as usize]).collect(),
                None => Vec::new(),
            };
            f.modes = ApplyModes::resolve(&f.structure, params, &v, &t);
            if reordered_auto && f.modes.unstable() {
                return Self::new(gpu, a, kind, &params.natural_fallback());
            }
        }
        Ok(f)
    }

    /// Factors new values of `a` on the analysed pattern (no new analysis). Synchronises once,
    /// to read the pivot check.
    ///
    /// # Errors
    /// A different pattern; a bad pivot naming its row; device failures.
    pub fn refactor(&mut self, a: &CsrMatrix<T>) -> Result<()> {
        let s = &self.structure;
        s.check_pattern(a)?;
        if s.n == 0 {
            return Ok(());
        }
        let mut shift = self.params.shift;
        let mut tries = 0;
        loop {
            match self.factor_once(a, shift)? {
                None => {
                    self.shift_used = shift;
                    return Ok(());
                }
                Some((row, piv))
                    if !self.params.auto_shift
                        || tries >= crate::sparse::incomplete::AUTO_SHIFT_TRIES =>
                {
                    return Err(pivot_error(self.structure.kind, row, piv, &self.params));
                }
                Some(_) => {
                    shift = crate::sparse::incomplete::next_shift(shift);
                    tries += 1;
                }
            }
        }
    }

    /// The diagonal shift of the last successful factorization.
    pub fn shift_used(&self) -> f64 {
        self.shift_used
    }

    /// Whether the factorization runs on the host (then the values are uploaded): when its
    /// level schedule is deeper than [`HOST_FACTOR_LEVELS`].
    pub fn factors_on_host(&self) -> bool {
        self.structure.lower.levels() > HOST_FACTOR_LEVELS
    }

    /// One factorization with `shift`; `Some((row, pivot))` for a bad pivot.
    fn factor_once(&mut self, a: &CsrMatrix<T>, shift: f64) -> Result<Option<(usize, f64)>> {
        if self.factors_on_host() {
            let s = &self.structure;
            return match crate::sparse::incomplete::factor_values(
                s,
                a,
                shift,
                self.params.pivot_tol,
            ) {
                Ok(v) => {
                    self.gpu.upload_into(&v, &mut self.val)?;
                    self.gather_transpose()?;
                    Ok(None)
                }
                Err(bad) => Ok(Some(bad)),
            };
        }
        let s = &self.structure;
        let (v, rowmax) = s.initial_values(a, shift);
        self.gpu.upload_into(&v, &mut self.val)?;
        self.gpu.upload_into(&rowmax, &mut self.rowmax)?;
        self.gpu.upload_into(&[u32::MAX], &mut self.bad)?;
        let stream = self.gpu.stream();
        let (f, name) = match s.kind {
            FactorKind::Ilu0 => (&self.k.ilu0, "ilu0_levels"),
            FactorKind::Ic0 => (&self.k.ic0, "ic0_levels"),
        };
        let tol = self.params.pivot_tol;
        let maxlen = s.row_ptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as usize;
        for g in &self.factor_groups {
            // Row cache: as many entries per warp as fit the default 48 KiB (see ilu0_levels).
            let per_entry = std::mem::size_of::<T>() + 4;
            let warps = (g.threads / 32) as usize;
            let cache = maxlen.min(SMEM_X_BYTES / (warps * per_entry)) as u32;
            let smem = warps as u32 * cache * per_entry as u32;
            let mut l = stream.launch_builder(f);
            l.arg(&self.lower.order)
                .arg(&self.lower.level_ptr)
                .arg(&g.lo)
                .arg(&g.hi)
                .arg(&self.row_ptr)
                .arg(&self.col)
                .arg(&self.diag)
                .arg(&mut self.val)
                .arg(&self.rowmax)
                .arg(&tol)
                .arg(&mut self.bad)
                .arg(&cache);
            // SAFETY: {ilu0,ic0}_levels(const u32* order, const u32* level_ptr, u32 lo, u32 hi,
            // const u32* row_ptr, const u32* col, const u32* diag, T* val, const T* rowmax,
            // double tol, u32* bad, u32 cache): order/diag/rowmax have n entries, row_ptr n + 1,
            // col/val the factor's nnz, level_ptr levels + 1 ≥ hi + 1 (the lower plan of this
            // factor's pattern, whose levels order every row after the rows it reads); bad one
            // word; the dynamic shared memory holds warps × cache × (sizeof(T) + 4) bytes.
            unsafe { l.launch(Gpu::cfg(g.blocks, g.threads, smem)) }.map_err(launch_err(name))?;
        }
        self.gather_transpose()?;
        let bad = self.gpu.download(&self.bad)?[0];
        if bad == u32::MAX {
            return Ok(None);
        }
        let row = bad as usize;
        let s = &self.structure;
        let piv = match s.kind {
            FactorKind::Ilu0 => {
                let p = s.diag_pos[row] as usize;
                self.gpu.download(&self.val.slice(p..p + 1))?[0].as_f64()
            }
            FactorKind::Ic0 => f64::NAN,
        };
        Ok(Some((row, piv)))
    }

    /// IC: `Lᵀ`'s values gathered from `L`'s (queued).
    fn gather_transpose(&mut self) -> Result<()> {
        let stream = self.gpu.stream();
        if let Some((_, tval, tmap)) = &mut self.transpose {
            let n = tmap.len() as u32;
            let mut l = stream.launch_builder(&self.k.gather);
            l.arg(&*tmap).arg(&self.val).arg(tval).arg(&n);
            // SAFETY: gather(const u32* map, const T* src, T* dst, u32 n): map and dst have n
            // entries (the factor's nnz), every map entry indexes src (the factor's values).
            unsafe { l.launch(Gpu::cfg(n.div_ceil(THREADS).min(1024), THREADS, 0)) }
                .map_err(launch_err("gather"))?;
        }
        Ok(())
    }

    /// `dst = src[map]` (queued).
    fn gather(
        &self,
        map: &CudaSlice<u32>,
        src: &CudaSlice<T>,
        dst: &mut CudaSlice<T>,
    ) -> Result<()> {
        let n = self.structure.n as u32;
        if n == 0 {
            return Ok(());
        }
        let mut l = self.gpu.stream().launch_builder(&self.k.gather);
        l.arg(map).arg(src).arg(dst).arg(&n);
        // SAFETY: gather(const u32* map, const T* src, T* dst, u32 n): map is a permutation of
        // 0..n (n entries), src and dst have at least n elements and are distinct buffers.
        unsafe { l.launch(Gpu::cfg(n.div_ceil(THREADS).min(1024), THREADS, 0)) }
            .map_err(launch_err("gather"))?;
        Ok(())
    }

    /// `x = L⁻¹(P·b)` (queued; `P` the factor's row order; approximate per
    /// [`modes`](Self::modes)).
    pub fn lower_solve(&self, b: &CudaSlice<T>, x: &mut CudaSlice<T>) -> Result<()> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let j = (self.modes.lower_sweeps > 0).then_some((self.modes.lower_sweeps, &mut *scratch));
        match &self.perm_in {
            Some(p) => {
                let mut pb = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
                self.gather(p, b, &mut pb)?;
                self.lower
                    .solve(&self.gpu, &self.k, &self.col, &self.val, &pb, x, j)
            }
            None => self
                .lower
                .solve(&self.gpu, &self.k, &self.col, &self.val, b, x, j),
        }
    }

    /// `x = Qᵀ·U⁻¹b` (IC: `L⁻ᵀ`; `Q` the factor's ordering) (queued; approximate per
    /// [`modes`](Self::modes)).
    pub fn upper_solve(&self, b: &CudaSlice<T>, x: &mut CudaSlice<T>) -> Result<()> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let j = (self.modes.upper_sweeps > 0).then_some((self.modes.upper_sweeps, &mut *scratch));
        let (col, val) = match &self.transpose {
            Some((tcol, tval, _)) => (tcol, tval),
            None => (&self.col, &self.val),
        };
        match &self.perm_out {
            Some(p) => {
                let mut y = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
                self.upper
                    .solve(&self.gpu, &self.k, col, val, b, &mut y, j)?;
                self.gather(p, &y, x)
            }
            None => self.upper.solve(&self.gpu, &self.k, col, val, b, x, j),
        }
    }

    /// `z = Qᵀ·U⁻¹(L⁻¹(P·r))` in one cooperative launch when both triangles are applied by
    /// Jacobi sweeps (`t` receives `L⁻¹(P·r)`); `Ok(false)` (nothing queued) otherwise, or where
    /// the cooperative kernels cannot run: the caller then runs the two solves. The result equals
    /// [`lower_solve`](Self::lower_solve) then [`upper_solve`](Self::upper_solve) bit for bit.
    ///
    /// # Errors
    /// Launch failures.
    pub fn apply_swept(
        &self,
        r: &CudaSlice<T>,
        t: &mut CudaSlice<T>,
        z: &mut CudaSlice<T>,
    ) -> Result<bool> {
        let (ls, us) = (self.modes.lower_sweeps, self.modes.upper_sweeps);
        let n = self.structure.n as u32;
        if ls == 0
            || us == 0
            || n == 0
            || !self.lower.sweeps_fusable()
            || !self.upper.sweeps_fusable()
        {
            return Ok(false);
        }
        let grid = match (
            self.k.fused_grid(n, self.lower.lanes),
            self.k.fused_grid(n, self.upper.lanes),
        ) {
            (Some(a), Some(b)) => a.max(b),
            _ => return Ok(false),
        };
        for (v, what) in [(r.len(), "r"), (t.len(), "t"), (z.len(), "z")] {
            assert_eq!(
                v, self.structure.n,
                "factor application: {what} has {v} elements, the factor {} rows",
                self.structure.n
            );
        }
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let mut permuted = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
        let mut bar = self.lower.bar.lock().unwrap_or_else(|p| p.into_inner());
        let (ucol, uval) = match &self.transpose {
            Some((tcol, tval, _)) => (tcol, tval),
            None => (&self.col, &self.val),
        };
        let (ls, us) = (ls as u32, us as u32);
        let stream = self.gpu.stream();
        let mut l = stream.launch_builder(&self.k.apply_sweeps);
        l.arg(&n).arg(&self.lower.start).arg(&self.lower.end);
        match &self.lower.diag {
            Some(d) => l.arg(d),
            None => l.arg(&NULL),
        };
        l.arg(&self.col)
            .arg(&self.val)
            .arg(&ls)
            .arg(&self.lower.lanes)
            .arg(&self.upper.start)
            .arg(&self.upper.end);
        match &self.upper.diag {
            Some(d) => l.arg(d),
            None => l.arg(&NULL),
        };
        l.arg(ucol).arg(uval).arg(&us).arg(&self.upper.lanes).arg(r);
        match &self.perm_in {
            Some(p) => l.arg(p),
            None => l.arg(&NULL),
        };
        l.arg(&mut *t).arg(&mut *scratch);
        match &self.perm_out {
            Some(p) => l.arg(&mut *permuted).arg(p).arg(&mut *z),
            None => l.arg(&mut *z).arg(&NULL).arg(&NULL),
        };
        l.arg(&mut *bar);
        // SAFETY: ilu_apply_sweeps(u32 n, const u32* l_start, const u32* l_end,
        // const u32* l_diag, const u32* l_col, const T* l_val, u32 l_sweeps, u32 l_g,
        // const u32* u_start, const u32* u_end, const u32* u_diag, const u32* u_col,
        // const T* u_val, u32 u_sweeps, u32 u_g, const T* r, const u32* bmap, T* t, T* scratch,
        // T* y, const u32* omap, T* z, u32* bar): the two plans were made for this factor's
        // pattern (IC: the upper one for Lᵀ's, with its columns and values), their ranges have
        // n entries (diag null for a unit diagonal); r, t, the scratch, y and z have n elements
        // (the permuted buffer has n when perm_out exists) and the written ones are distinct
        // from each other and from r; bmap/omap are permutations of 0..n or null (then y is z
        // and omap's output null); bar one word only the cooperative kernels touch. The grid is
        // at most the co-resident blocks, which the cooperative launch guarantees.
        unsafe { l.launch_cooperative(Gpu::cfg(grid, THREADS, 0)) }
            .map_err(launch_err("ilu_apply_sweeps"))?;
        Ok(true)
    }

    /// How the two triangular solves are applied.
    pub fn modes(&self) -> ApplyModes {
        self.modes
    }

    /// What was done and how it is applied.
    pub fn summary(&self) -> crate::sparse::incomplete::FactorSummary {
        crate::sparse::incomplete::FactorSummary::new(
            &self.structure,
            self.modes,
            self.shift_used,
            self.factors_on_host(),
        )
    }

    /// The factor's values (synchronises; for tests and inspection).
    pub fn download_values(&self) -> Result<Vec<T>> {
        let v = self.gpu.download(&self.val)?;
        Ok(v[..self.structure.col_idx.len()].to_vec())
    }

    /// The structure (pattern, plans).
    pub fn structure(&self) -> &IncompleteStructure {
        &self.structure
    }
    /// The device plans of the lower and upper solves.
    pub fn plans(&self) -> (&GpuTriPlan, &GpuTriPlan) {
        (&self.lower, &self.upper)
    }
    /// Forces the solve algorithm of both triangles.
    pub fn set_algorithm(&mut self, algorithm: SptrsvAlgorithm) {
        self.lower.set_algorithm(algorithm);
        self.upper.set_algorithm(algorithm);
    }
    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    /// Launches of the factorization.
    pub fn factor_groups(&self) -> usize {
        self.factor_groups.len()
    }
}
