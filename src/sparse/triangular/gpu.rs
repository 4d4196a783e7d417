//! GPU triangular solves (`kernels/sparse/sptrsv.cu`, whose factorization kernels the GPU
//! incomplete factorization of [`crate::sparse::incomplete::gpu`] launches through [`Kernels`]).
//!
//! - [`GpuTriangular`]: the public solve of one triangle of a matrix uploaded once (analysis on
//!   the CPU, see the [module docs](super)), solving for any right-hand side with the level or the
//!   synchronization-free kernel ([`SptrsvAlgorithm`]).
//! - [`GpuTriPlan`]: a triangular plan on the device, the schedule both use.
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
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Elem;

/// The largest `x` a run of narrow levels keeps in shared memory (the dynamic shared memory a
/// block gets without opting in): 6144 rows in f64, 12288 in f32.
pub const SMEM_X_BYTES: usize = 48 * 1024;

/// `kernels/sparse/sptrsv.cu`.
pub const SPTRSV_SRC: KernelSource = kernel_source!(
    "sparse/sptrsv.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::gpu::kernels::COMPLEX_H,
        &crate::backend::gpu::COLS
    ],
    &[("SPTRSV_THREADS", THREADS as i64)]
);

/// `kernels/sparse/levels.cu`: the level analysis on the device ([`GpuTriPlan::analyse`]).
pub const LEVELS_SRC: KernelSource = kernel_source!(
    "sparse/levels.cu",
    &[&crate::gpu::kernels::COMMON],
    &[
        ("LEVELS_THREADS", LEVELS_THREADS as i64),
        ("LEVELS_NO_DIAG", super::NO_DIAG as i64)
    ]
);

/// Threads per block of the level analysis (a warp per row; 8 blocks per SM fill an H100 SM).
pub const LEVELS_THREADS: u32 = 256;

/// Threads per block of the synchronization-free kernel and of the one-level launches: 8 warps,
/// 8 blocks per SM fill an H100/H200 SM.
pub const THREADS: u32 = 256;

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

/// The kernels of `sptrsv.cu` for one element type (`T` the device type: `f32`, `f64` or a
/// [`DevComplex`](crate::scalar::DevComplex)).
pub(crate) struct Kernels {
    pub(crate) levels: CudaFunction,
    pub(crate) syncfree: CudaFunction,
    pub(crate) ilu0: CudaFunction,
    pub(crate) ic0: CudaFunction,
    pub(crate) ilu0_syncfree: CudaFunction,
    pub(crate) ic0_syncfree: CudaFunction,
    pub(crate) gather: CudaFunction,
    pub(crate) gather_conj: CudaFunction,
    pub(crate) jacobi: CudaFunction,
    pub(crate) jacobi_fused: CudaFunction,
    pub(crate) apply_sweeps: CudaFunction,
    /// `ilu_apply_sweeps` of several columns (one cooperative launch for all).
    pub(crate) apply_sweeps_cols: CudaFunction,
    /// The most co-resident blocks of the cooperative sweep kernels (0: they cannot run, the
    /// sweeps are separate launches).
    pub(crate) fused_blocks: u32,
    /// The most co-resident blocks of `ilu_apply_sweeps_cols` (its full occupancy: with several
    /// columns a launch has work for more blocks than one column's barrier wants).
    pub(crate) cols_blocks: u32,
}

impl Kernels {
    pub(crate) fn load<T: KernelType>(gpu: &Gpu) -> Result<Self> {
        let f = |root: &str| gpu.typed_function::<T>(&SPTRSV_SRC, root, &[]);
        Ok(Kernels {
            levels: f("sptrsv_levels")?,
            syncfree: f("sptrsv_syncfree")?,
            ilu0: f("ilu0_levels")?,
            ic0: f("ic0_levels")?,
            ilu0_syncfree: f("ilu0_syncfree")?,
            ic0_syncfree: f("ic0_syncfree")?,
            gather: f("gather")?,
            gather_conj: f("gather_conj")?,
            jacobi: f("sptrsv_jacobi")?,
            jacobi_fused: f("sptrsv_jacobi_fused")?,
            apply_sweeps: f("ilu_apply_sweeps")?,
            apply_sweeps_cols: f("ilu_apply_sweeps_cols")?,
            fused_blocks: 0,
            cols_blocks: 0,
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
        let cols_per_sm = self
            .apply_sweeps_cols
            .occupancy_max_active_blocks_per_multiprocessor(THREADS, 0, None)
            .unwrap_or(0);
        self.cols_blocks = if self.fused_blocks > 0 {
            cols_per_sm * gpu.sm_count()
        } else {
            0
        };
        self
    }

    /// The grid of a cooperative sweep launch over `n` rows at `lanes` lanes per row, or `None`
    /// when the cooperative kernels cannot run here.
    pub(crate) fn fused_grid(&self, n: u32, lanes: u32) -> Option<u32> {
        let need = n.div_ceil(THREADS / lanes.max(1)).max(1);
        (self.fused_blocks > 0).then(|| need.min(self.fused_blocks))
    }
}

pub(crate) fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Gpu::launch_error(name, e)
}

pub(crate) const NULL: u64 = 0;

/// The device arrays of a plan.
struct DeviceArrays {
    order: CudaSlice<u32>,
    level_ptr: CudaSlice<u32>,
    start: CudaSlice<u32>,
    end: CudaSlice<u32>,
    diag: Option<CudaSlice<u32>>,
}

/// A device plan's arrays on the host, named as [`TriangularPlan`]'s accessors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanArrays {
    /// The rows ordered by level.
    pub order: Vec<u32>,
    /// Level boundaries into `order`.
    pub level_ptr: Vec<u32>,
    /// Each row's first off-diagonal entry inside the triangle.
    pub start: Vec<u32>,
    /// One past each row's last off-diagonal entry inside the triangle.
    pub end: Vec<u32>,
    /// Each row's diagonal position (empty for a unit diagonal).
    pub diag_pos: Vec<u32>,
}

/// A [`TriangularPlan`] on the device, with its launch schedule.
pub struct GpuTriPlan {
    pub(crate) n: usize,
    pub(crate) order: CudaSlice<u32>,
    pub(crate) level_ptr: CudaSlice<u32>,
    /// The level boundaries on the host (the launch schedules are planned from them).
    pub(crate) host_level_ptr: Vec<u32>,
    pub(crate) start: CudaSlice<u32>,
    pub(crate) end: CudaSlice<u32>,
    pub(crate) diag: Option<CudaSlice<u32>>,
    pub(crate) groups: Vec<LevelGroup>,
    pub(crate) lanes: u32,
    pub(crate) algorithm: SptrsvAlgorithm,
    pub(crate) stats: LevelStats,
    /// Ready flags and the row counter of the synchronization-free kernel (n + 1 words).
    pub(crate) flags: Mutex<CudaSlice<u32>>,
    /// The grid-barrier word of the cooperative sweep kernels (never reset: see `sptrsv.cu`).
    pub(crate) bar: Mutex<CudaSlice<u32>>,
    /// The longest row's entries per lane (see [`FUSED_MAX_ROW_PER_LANE`]).
    pub(crate) row_per_lane: u32,
    pub(crate) sm_count: u32,
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
        let up = |v: &[u32]| {
            if v.is_empty() {
                gpu.zeros::<u32>(1)
            } else {
                gpu.upload(v)
            }
        };
        let lanes = lanes_per_row(&plan.stats());
        let longest = plan
            .start()
            .iter()
            .zip(plan.end())
            .map(|(&s, &e)| e - s)
            .max()
            .unwrap_or(0);
        Self::from_parts(
            gpu,
            DeviceArrays {
                order: up(plan.order())?,
                level_ptr: up(plan.level_ptr())?,
                start: up(plan.start())?,
                end: up(plan.end())?,
                diag: match plan.diagonal() {
                    Diagonal::Unit => None,
                    Diagonal::NonUnit => Some(up(plan.diag_pos())?),
                },
            },
            plan.level_ptr(),
            plan.stats().offdiag_nnz,
            longest.div_ceil(lanes),
            algorithm,
        )
    }

    /// The plan from its device arrays and the level boundaries (on the host, for the launch
    /// schedule); `row_per_lane` as [`FUSED_MAX_ROW_PER_LANE`] counts it.
    fn from_parts(
        gpu: &Arc<Gpu>,
        d: DeviceArrays,
        level_ptr: &[u32],
        offdiag_nnz: usize,
        row_per_lane: u32,
        algorithm: SptrsvAlgorithm,
    ) -> Result<Self> {
        let n = level_ptr.last().copied().unwrap_or(0) as usize;
        let levels = level_ptr.len().saturating_sub(1);
        let stats = LevelStats {
            rows: n,
            offdiag_nnz,
            levels,
            max_width: level_ptr
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .max()
                .unwrap_or(0),
            mean_width: if levels == 0 {
                0.0
            } else {
                n as f64 / levels as f64
            },
        };
        let lanes = lanes_per_row(&stats);
        let groups = gpu_level_groups(level_ptr, lanes, GROUP_THREADS, THREADS);
        Ok(GpuTriPlan {
            n,
            order: d.order,
            level_ptr: d.level_ptr,
            host_level_ptr: level_ptr.to_vec(),
            start: d.start,
            end: d.end,
            diag: d.diag,
            algorithm: algorithm.choose(groups.len()),
            groups,
            lanes,
            stats,
            flags: Mutex::new(gpu.zeros::<u32>(n + 1)?),
            bar: Mutex::new(gpu.zeros::<u32>(1)?),
            row_per_lane,
            sm_count: gpu.sm_count(),
        })
    }

    /// The level analysis of one triangle of an `n`-row CSR pattern already on the device
    /// (`row_ptr` n + 1 entries, `col` sorted and unique within rows), done on the device: the
    /// same plan as [`TriangularPlan::analyse`] (same ranges, diagonal positions, levels and row
    /// order) without copying the pattern to the host.
    ///
    /// One launch of `tri_levels` (`kernels/sparse/levels.cu`: a warp per row, taken in
    /// dependency order from a ticket counter, waits on the ready words of the rows it references,
    /// so every level is known after one pass), a stable radix sort of (level, row) pairs by level
    /// ([`crate::primitives::sort::gpu::radix_sort_pairs`]) and one launch that writes the level
    /// boundaries from the sorted keys. The host reads back four words (entry count, longest row,
    /// the first row without a diagonal, the level count) and the level boundaries, which the
    /// launch schedule of the level-by-level kernels is planned from.
    ///
    /// # Errors
    /// For a [`Diagonal::NonUnit`] solve, [`Error::InvalidInput`] naming the first row without a
    /// stored diagonal entry (as the CPU analysis); device failures.
    ///
    /// # Panics
    /// When `row_ptr` has fewer than n + 1 entries.
    #[allow(clippy::too_many_arguments)]
    pub fn analyse(
        gpu: &Arc<Gpu>,
        n: usize,
        row_ptr: &CudaSlice<u32>,
        col: &CudaSlice<u32>,
        triangle: Triangle,
        diagonal: Diagonal,
        algorithm: SptrsvAlgorithm,
    ) -> Result<Self> {
        assert!(
            row_ptr.len() > n,
            "level analysis: row_ptr has {} entries for {n} rows",
            row_ptr.len()
        );
        let n32 = u32::try_from(n).map_err(|_| {
            Error::InvalidInput(format!(
                "level analysis: {n} rows exceed the GPU's 32-bit indices"
            ))
        })?;
        let cap = n.max(1);
        let stream = gpu.stream();
        let mut start = gpu.zeros::<u32>(cap)?;
        let mut end = gpu.zeros::<u32>(cap)?;
        let mut diag = gpu.zeros::<u32>(cap)?;
        let mut ready = gpu.zeros::<u32>(n + 1)?;
        let mut key = gpu.zeros::<u32>(cap)?;
        let mut order = gpu.zeros::<u32>(cap)?;
        let mut level_ptr = gpu.zeros::<u32>(n + 1)?;
        let mut stats = gpu.upload(&[0u32, 0, super::NO_DIAG, 0])?;
        if n > 0 {
            let f = gpu.function(&LEVELS_SRC, "tri_levels", &[])?;
            let upper = u32::from(triangle == Triangle::Upper);
            let warps = LEVELS_THREADS / 32;
            let blocks = n32
                .div_ceil(warps)
                .min(gpu.sm_count().max(1) * (2048 / LEVELS_THREADS));
            let mut l = stream.launch_builder(&f);
            l.arg(&n32)
                .arg(row_ptr)
                .arg(col)
                .arg(&upper)
                .arg(&mut start)
                .arg(&mut end)
                .arg(&mut diag)
                .arg(&mut ready)
                .arg(&mut key)
                .arg(&mut order)
                .arg(&mut stats);
            // SAFETY: tri_levels(u32 n, const u32* row_ptr, const u32* col, u32 upper,
            // u32* start, u32* end, u32* diag, u32* ready, u32* key, u32* row_of, u32* stats):
            // row_ptr has n + 1 entries (asserted) of a pattern whose columns col holds, sorted
            // within rows (the caller's contract); start/end/diag/key/row_of n words, ready n + 1
            // zeroed words (just allocated), stats 4 words.
            unsafe { l.launch(Gpu::cfg(blocks, LEVELS_THREADS, 0)) }
                .map_err(launch_err("tri_levels"))?;
            crate::primitives::sort::gpu::radix_sort_pairs(gpu, &mut key, &mut order)?;
            let f = gpu.function(&LEVELS_SRC, "level_bounds", &[])?;
            let mut l = stream.launch_builder(&f);
            l.arg(&n32).arg(&key).arg(&mut level_ptr);
            // SAFETY: level_bounds(u32 n, const u32* key, u32* level_ptr): key has n sorted
            // levels, each of 0..L present (a row of level l references one of level l − 1),
            // L ≤ n, level_ptr n + 1 words.
            unsafe { l.launch(Gpu::cfg(n32.div_ceil(THREADS).min(1024), THREADS, 0)) }
                .map_err(launch_err("level_bounds"))?;
        }
        let st = gpu.download(&stats)?;
        if diagonal == Diagonal::NonUnit && st[2] != super::NO_DIAG {
            return Err(Error::InvalidInput(format!(
                "triangular solve: row {} has no diagonal entry (a non-unit solve divides by it)",
                st[2]
            )));
        }
        let levels = if n == 0 {
            0
        } else {
            gpu.download(&key.slice(n - 1..n))?[0] as usize + 1
        };
        let lp_host = if n == 0 {
            vec![0u32]
        } else {
            gpu.download(&level_ptr.slice(0..levels + 1))?
        };
        let lanes = lanes_per_row(&LevelStats {
            rows: n,
            offdiag_nnz: st[0] as usize,
            ..Default::default()
        });
        Self::from_parts(
            gpu,
            DeviceArrays {
                order,
                level_ptr,
                start,
                end,
                diag: (diagonal == Diagonal::NonUnit).then_some(diag),
            },
            &lp_host,
            st[0] as usize,
            st[1].div_ceil(lanes),
            algorithm,
        )
    }

    /// The plan's arrays read back (for tests and inspection; synchronises).
    ///
    /// # Errors
    /// Device failures.
    pub fn download(&self, gpu: &Gpu) -> Result<PlanArrays> {
        let n = self.n;
        let take = |v: &CudaSlice<u32>, len: usize| -> Result<Vec<u32>> {
            if len == 0 {
                Ok(Vec::new())
            } else {
                gpu.download(&v.slice(0..len))
            }
        };
        Ok(PlanArrays {
            order: take(&self.order, n)?,
            level_ptr: if n == 0 {
                vec![0]
            } else {
                take(&self.level_ptr, self.stats.levels + 1)?
            },
            start: take(&self.start, n)?,
            end: take(&self.end, n)?,
            diag_pos: match &self.diag {
                Some(d) => take(d, n)?,
                None => Vec::new(),
            },
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
    /// The level boundaries (levels + 1 entries, as [`TriangularPlan::level_ptr`]).
    pub fn level_ptr(&self) -> &[u32] {
        &self.host_level_ptr
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
    pub(crate) fn solve<T: KernelType>(
        &self,
        gpu: &Gpu,
        k: &Kernels,
        col: &CudaSlice<u32>,
        val: &CudaSlice<T>,
        b: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
        jacobi: Option<(usize, &mut CudaSlice<T>)>,
    ) -> Result<()> {
        super::check_solve_lens(self.n, b.len(), x.len());
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

/// One triangle of a matrix on the GPU, analysed once, solved for any right-hand side; real or
/// complex (`Complex<f32>`, `Complex<f64>`: vectors of [`DevComplex`](crate::scalar::DevComplex),
/// see [`Elem::as_dev`]).
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
pub struct GpuTriangular<T: Elem> {
    gpu: Arc<Gpu>,
    k: Kernels,
    host_plan: TriangularPlan,
    plan: GpuTriPlan,
    col: CudaSlice<u32>,
    val: CudaSlice<T::Dev>,
}

impl<T: Elem> GpuTriangular<T>
where
    T::Dev: KernelType,
{
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
            (gpu.zeros::<u32>(1)?, gpu.zeros::<T::Dev>(1)?)
        } else {
            (gpu.upload(a.col_idx())?, gpu.upload(T::as_dev(a.values()))?)
        };
        Ok(GpuTriangular {
            k: Kernels::load::<T::Dev>(gpu)?,
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
    pub fn solve(&self, b: &CudaSlice<T::Dev>, x: &mut CudaSlice<T::Dev>) -> Result<()> {
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
            self.gpu.upload_into(T::as_dev(a.values()), &mut self.val)?;
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
