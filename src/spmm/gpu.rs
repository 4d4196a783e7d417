//! GPU SpMM `Y ← α·A·X + β·Y` on the SpMV's device matrix [`GpuCsr`].
//!
//! [`GpuSpmm`] holds the loaded kernels of one element type; [`GpuSpmm::spmm`] queues one launch
//! (per window of 32 columns in the row-major layout, one for any width in the column-major
//! one) and returns without synchronising. Short and long rows share that launch: in the
//! row-major kernel each block sums its window of rows with a group of lanes per row and a warp
//! per longer row ([`RowPlan`]); in both layouts extra blocks at the start of the grid (started
//! first) sum the rows longer than that, each with all its threads, and in the row-major layout
//! a row too long for one block is cut into pieces summed by several blocks, added in a fixed
//! order ([`LongSplit`]; their sums go to a scratch that [`GpuSpmm`] allocates on the first
//! product that needs it and keeps). See `kernels/spmm/spmm.cu` for the kernels and the
//! [module docs](super) for which layout suits which matrix. `CusparseSpmm` (feature `peers`) is the peer (`cusparseSpMM`)
//! that benchmarks and tests compare against.

#[cfg(feature = "peers")]
mod cusparse_peer;

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice};

use super::{check_shapes, Layout};
use crate::error::Result;
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, PushKernelArg};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

#[cfg(feature = "peers")]
pub use cusparse_peer::{CusparseSpmm, CusparseSpmmAlg};

/// The SpMM kernels (`kernels/spmm/spmm.cu`).
pub const SPMM_SRC: KernelSource = kernel_source!(
    "spmm/spmm.cu",
    &[&crate::gpu::kernels::COMMON],
    &[("SPMM_THREADS", THREADS as i64)]
);

/// Threads per block of the SpMM kernels (`SPMM_THREADS`).
const THREADS: u32 = 256;
/// Columns of a row-major window: at most a warp's lanes per entry.
const ROW_WINDOW: usize = 32;
/// Entries in flight per slot of the row-major walks (`SPMM_U`).
const UNROLL: usize = 8;

/// Column-major rows with more entries than this many per lane of their group are summed by a
/// whole block (the extra blocks of the same launch): a lane walks its entries one round of
/// loads after another, and a group summing a row of hundreds of entries kept the launch
/// running while the rest of the device idled (a 1 310-entry row made one product 30× slower
/// than `cusparseSpMM` on an H200).
pub const COL_LONG_PER_LANE: usize = 32;

/// Blocks per SM of the long-row blocks (both layouts), which walk the rows in windows of at
/// most a block's threads.
const LONG_BLOCKS_PER_SM: u32 = 8;

/// Most blocks that share the pieces of the row-major long rows of one window.
const MAX_PARTS: usize = 32;

/// How the row-major long-row blocks share rows too long for one block to walk in two rounds of
/// loads: such a row (more than `2·chunk` entries) is cut where its entry index crosses a
/// multiple of `chunk` (one round of loads of a whole block), `parts` blocks scan each window of
/// rows and each sums its share of the pieces and uncut rows (piece `j` of row `r` to block
/// `(r + j) mod parts`, an uncut row being its own piece 0), and the block
/// that finishes a row's last piece adds the pieces' sums in piece order. The result depends on
/// the matrix and `chunk` alone, not on which block finishes last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongSplit {
    /// Entries of a piece (0: no row is cut).
    pub chunk: u32,
    /// Blocks per window of rows.
    pub parts: u32,
}

impl LongSplit {
    /// The split for a row-major `plan` on a matrix of `nrows` rows whose longest row has
    /// `max_len` entries, with `max_blocks` long-row blocks at most: as many blocks per window
    /// as the longest row has pieces, up to [`MAX_PARTS`] and as many as leave every window's
    /// scan to one block (a large matrix keeps one block per window and its rows uncut).
    pub fn new(plan: &RowPlan, nrows: usize, max_len: usize, max_blocks: usize) -> LongSplit {
        let chunk = (THREADS / plan.lanes) as usize * UNROLL;
        let windows = nrows.div_ceil(THREADS as usize).max(1);
        let parts = if max_len > 2 * chunk {
            (max_len.div_ceil(chunk) + 1)
                .min(MAX_PARTS)
                .min(max_blocks / windows)
        } else {
            1
        };
        if parts <= 1 {
            LongSplit { chunk: 0, parts: 1 }
        } else {
            LongSplit {
                chunk: chunk as u32,
                parts: parts as u32,
            }
        }
    }

    /// Pieces' sums and per-row counts a launch needs over `nnz` entries for `kw` columns.
    fn scratch_lens(&self, nnz: usize, kw: usize) -> (usize, usize) {
        if self.chunk == 0 {
            return (0, 0);
        }
        let chunks = nnz.div_ceil(self.chunk as usize);
        (2 * chunks * kw, chunks)
    }
}

/// The long rows' pieces' sums and counts (the counts are zero between launches: the block
/// that adds a row's pieces resets its count).
struct Scratch<T: GpuScalar> {
    partial: CudaSlice<T>,
    count: CudaSlice<u32>,
}

/// How the row-major kernel sums a window of `kw ≤ 32` columns of one matrix: `lanes` lanes
/// read an entry's `kw` values of `X` (`vector` values each, one 16-byte load where the widths
/// allow), a slot is those lanes, and a row goes to
/// - a group of `group_slots` slots (chosen from the mean row length) when it has at most
///   `lim_group` entries,
/// - a warp (`32 / lanes` slots) when it has at most `lim_warp`,
/// - otherwise the whole block, one of the extra blocks at the start of the grid that scan small
///   windows of rows for such rows (so that long rows close together are spread over the GPU).
///
/// Each bound keeps a row's walk to a few rounds of loads (the launch lasts as long as its
/// slowest walk), and which team sums a row depends on its length alone, so the result's bits
/// do not depend on which block or warp took it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlan {
    /// Values per load: 16 bytes' worth, or 1 when `k` or `kw` is not a multiple of it.
    pub vector: u32,
    /// Lanes per entry (a power of two, `lanes · vector ≥ kw`).
    pub lanes: u32,
    /// Slots of a row's group (a power of two, `lanes · group_slots ≤ 32`).
    pub group_slots: u32,
    /// Longest row a group sums.
    pub lim_group: u32,
    /// Longest row a warp sums; longer rows take the whole block.
    pub lim_warp: u32,
}

impl RowPlan {
    /// The plan for a window of `kw` of `k` columns of `T` on a matrix whose rows have `mean`
    /// entries on average.
    pub fn new<T: GpuScalar>(mean: f64, k: usize, kw: usize) -> RowPlan {
        assert!(
            (1..=ROW_WINDOW).contains(&kw) && kw <= k,
            "RowPlan: window of {kw} of {k} columns (1..=32)"
        );
        let vw = (16 / T::BYTES).max(1);
        let vector = if k % vw == 0 && kw % vw == 0 { vw } else { 1 };
        let lanes = kw.div_ceil(vector).next_power_of_two();
        let warp_slots = 32 / lanes;
        let group_slots = ((mean / UNROLL as f64).ceil().max(1.0) as usize)
            .next_power_of_two()
            .min(warp_slots);
        Self::with_slots(vector, lanes, group_slots)
    }

    /// The plan with more slots per row where the matrix is too small to give the GPU
    /// `min_lanes` lanes: the group doubles until the launch has that many, a slot would get
    /// less than one entry of the mean row, or the group is a warp. A small matrix's product is
    /// one short wave whose rows walk one after another on a few SMs; spread over more lanes,
    /// each row takes fewer rounds of loads and more SMs share the gathers.
    pub fn spread(self, nrows: usize, mean: f64, min_lanes: usize) -> RowPlan {
        let warp_slots = 32 / self.lanes as usize;
        let per_entry = (mean.ceil().max(1.0) as usize).next_power_of_two();
        let mut slots = self.group_slots as usize;
        while slots < warp_slots.min(per_entry) && nrows * self.lanes as usize * slots < min_lanes {
            slots *= 2;
        }
        Self::with_slots(self.vector as usize, self.lanes as usize, slots)
    }

    /// The plan with groups wide enough for the longest row where that row would otherwise wait
    /// for a warp of its block (the warps take their rows after every group of the block is
    /// done: a second walk behind a barrier) and the wider groups still fit the launch in
    /// `wave_lanes` lanes (one wave of resident threads): the group doubles until it takes the
    /// longest row (of at most `lim_warp` entries) or is a warp.
    pub fn cover_longest(self, nrows: usize, max_len: usize, wave_lanes: usize) -> RowPlan {
        let warp_slots = 32 / self.lanes as usize;
        let mut p = self;
        while max_len > p.lim_group as usize
            && max_len <= p.lim_warp as usize
            && (p.group_slots as usize) < warp_slots
            && nrows * (p.lanes * p.group_slots) as usize * 2 <= wave_lanes
        {
            p = Self::with_slots(
                p.vector as usize,
                p.lanes as usize,
                p.group_slots as usize * 2,
            );
        }
        p
    }

    /// Two rounds of loads for a group, four for a warp; a group as wide as a warp takes the
    /// warp's rows.
    fn with_slots(vector: usize, lanes: usize, group_slots: usize) -> RowPlan {
        let warp_slots = 32 / lanes;
        let lim_warp = warp_slots * UNROLL * 4;
        let lim_group = if group_slots == warp_slots {
            lim_warp
        } else {
            group_slots * UNROLL * 2
        };
        RowPlan {
            vector: vector as u32,
            lanes: lanes as u32,
            group_slots: group_slots as u32,
            lim_group: lim_group as u32,
            lim_warp: lim_warp as u32,
        }
    }

    /// Rows of a block's window (one per group).
    pub fn rows_per_block(&self) -> u32 {
        THREADS / (self.lanes * self.group_slots)
    }
}

/// Loaded SpMM kernels of one element type on one GPU.
pub struct GpuSpmm<T: GpuScalar> {
    gpu: Arc<Gpu>,
    row: CudaFunction,
    col: CudaFunction,
    scale: CudaFunction,
    scratch: Mutex<Scratch<T>>,
}

impl<T: GpuScalar> GpuSpmm<T> {
    /// Compiles (once per process) and loads the kernels.
    ///
    /// # Errors
    /// A failed compile or load, with the kernel's name and the NVRTC log.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(GpuSpmm {
            gpu: gpu.clone(),
            row: gpu.typed_function::<T>(&SPMM_SRC, "spmm_row", &[])?,
            col: gpu.typed_function::<T>(&SPMM_SRC, "spmm_col", &[])?,
            scale: gpu.typed_function::<T>(&SPMM_SRC, "spmm_scale", &[])?,
            scratch: Mutex::new(Scratch {
                partial: gpu.zeros::<T>(1)?,
                count: gpu.zeros::<u32>(1)?,
            }),
        })
    }

    /// Lanes per row of the column-major kernel, as log2: about one lane per 8 entries of the
    /// mean row, so short rows (stencils) get a thread each and long rows a sub-warp; on a
    /// matrix too small to give the GPU `min_lanes` lanes, more (up to one per entry of the
    /// mean row), as [`RowPlan::spread`].
    pub fn col_lanes_log2(nrows: usize, mean: f64, min_lanes: usize) -> u32 {
        let mut lanes = (mean / 8.0).clamp(1.0, 32.0) as usize;
        lanes = 1 << (usize::BITS - 1 - lanes.leading_zeros()); // floor to a power of two
        let per_entry = (mean.ceil().max(1.0) as usize).next_power_of_two().min(32);
        while lanes < per_entry && nrows * lanes < min_lanes {
            lanes *= 2;
        }
        lanes.trailing_zeros()
    }

    /// Threads the GPU holds at once (2 048 per SM on the A100, H100 and H200).
    fn wave_lanes(&self) -> usize {
        self.gpu.sm_count() as usize * 2048
    }

    /// Lanes that fill the GPU's SMs with two blocks each: below them a product is one short
    /// wave on part of the device.
    fn min_lanes(&self) -> usize {
        self.gpu.sm_count() as usize * 2 * THREADS as usize
    }

    /// `Y ← α·A·X + β·Y` for `k` columns in `layout` (`X` is `ncols × k`, `Y` is `nrows × k`,
    /// both dense in that layout). Queues the work on the GPU's stream and returns; allocates
    /// only where a matrix's long rows need more scratch than earlier products left
    /// ([`LongSplit`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for `k = 0` or blocks of the wrong
    /// length (named); a failed launch, naming the kernel.
    #[allow(clippy::too_many_arguments)]
    pub fn spmm(
        &self,
        a: &GpuCsr<T>,
        alpha: T,
        x: &CudaSlice<T>,
        k: usize,
        layout: Layout,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (n, m) = (a.nrows(), a.ncols());
        check_shapes("GPU spmm", n, m, k, x.len(), y.len())?;
        if n == 0 {
            return Ok(());
        }
        if alpha == T::zero() {
            let total = (n * k) as u64;
            let blocks = (total.div_ceil(THREADS as u64) as u32).min(self.gpu.sm_count() * 8);
            let mut b = self.gpu.stream().launch_builder(&self.scale);
            b.arg(&mut *y).arg(&beta).arg(&total);
            // SAFETY: spmm_scale_T(T* y, T beta, u64 n); y has n = nrows·k elements.
            unsafe { b.launch(Gpu::cfg(blocks, THREADS, 0)) }
                .map_err(|e| Gpu::launch_error("spmm_scale", e))?;
            return Ok(());
        }
        let (rp, ci, va) = a.device_parts();
        let nrows = n as u32;
        let stats = a.row_stats();
        match layout {
            Layout::RowMajor => {
                let ld = k as u32;
                for j0 in (0..k).step_by(ROW_WINDOW) {
                    let kw = (k - j0).min(ROW_WINDOW);
                    let plan = RowPlan::new::<T>(stats.mean, k, kw)
                        .spread(n, stats.mean, self.min_lanes())
                        .cover_longest(n, stats.max, self.wave_lanes());
                    let group_blocks = nrows.div_ceil(plan.rows_per_block());
                    let has_long = stats.max > plan.lim_warp as usize;
                    let split = if has_long {
                        LongSplit::new(&plan, n, stats.max, self.max_long_blocks() as usize)
                    } else {
                        LongSplit { chunk: 0, parts: 1 }
                    };
                    let (window, long_blocks) = self.long_grid(nrows, has_long, split.parts);
                    let mut scratch = self.scratch_for(&split, a.nnz(), kw)?;
                    let scratch = &mut *scratch;
                    let kw = kw as u32;
                    let vec = u32::from(plan.vector > 1);
                    let log_lc = plan.lanes.trailing_zeros();
                    let log_sg = plan.group_slots.trailing_zeros();
                    let xv = x.slice(j0..);
                    let mut yv = y.slice_mut(j0..);
                    let mut b = self.gpu.stream().launch_builder(&self.row);
                    b.arg(rp)
                        .arg(ci)
                        .arg(va)
                        .arg(&nrows)
                        .arg(&xv)
                        .arg(&ld)
                        .arg(&mut yv)
                        .arg(&ld)
                        .arg(&kw)
                        .arg(&alpha)
                        .arg(&beta)
                        .arg(&vec)
                        .arg(&log_lc)
                        .arg(&log_sg)
                        .arg(&plan.lim_group)
                        .arg(&plan.lim_warp)
                        .arg(&long_blocks)
                        .arg(&window)
                        .arg(&split.chunk)
                        .arg(&split.parts)
                        .arg(&mut scratch.partial)
                        .arg(&mut scratch.count);
                    // SAFETY: spmm_row_T(const u32* row_ptr, const u32* col, const T* val,
                    // u32 nrows, const T* x, u32 ldx, T* y, u32 ldy, u32 kw, T alpha, T beta,
                    // u32 vec, u32 log_lc, u32 log_sg, u32 lim_group, u32 lim_warp,
                    // u32 long_blocks, u32 window, u32 chunk, u32 parts, T* partial,
                    // u32* count). With chunk > 0, partial holds 2·ceil(nnz/chunk)·kw values
                    // and count ceil(nnz/chunk) zeros (scratch_for); long_blocks is a multiple
                    // of parts. row_ptr has
                    // nrows+1 entries, col/val nnz (≥ 1); the views start at column j0, and
                    // element (i, j < kw) at i·k + j lies inside them (x: ncols·k − j0 elements,
                    // y: nrows·k − j0; checked above). With vec, the 16-byte loads of X start at
                    // i·k + j0 + m·vector: k, j0 (a multiple of 32) and kw are multiples of the
                    // vector width and device allocations are 256-byte aligned. Groups of
                    // lanes·group_slots ≤ 32 lanes (a power of two, dividing the block) take
                    // rows_per_block rows in each of the group_blocks blocks after the first
                    // long_blocks, so they cover every row; the first long_blocks scan windows of
                    // window ≤ THREADS rows; the shared row lists hold at most one entry per
                    // group or per row of a window.
                    unsafe { b.launch(Gpu::cfg(group_blocks + long_blocks, THREADS, 0)) }
                        .map_err(|e| Gpu::launch_error("spmm_row", e))?;
                }
            }
            Layout::ColMajor => {
                let (ldx, ldy, kw) = (m as u32, n as u32, k as u32);
                let log_group = Self::col_lanes_log2(n, stats.mean, self.min_lanes());
                let skip = (COL_LONG_PER_LANE << log_group) as u32;
                let group_blocks = ((n as u64) << log_group).div_ceil(THREADS as u64) as u32;
                let (window, long_blocks) = self.long_grid(nrows, stats.max > skip as usize, 1);
                let mut b = self.gpu.stream().launch_builder(&self.col);
                b.arg(rp)
                    .arg(ci)
                    .arg(va)
                    .arg(&nrows)
                    .arg(x)
                    .arg(&ldx)
                    .arg(&mut *y)
                    .arg(&ldy)
                    .arg(&kw)
                    .arg(&alpha)
                    .arg(&beta)
                    .arg(&log_group)
                    .arg(&skip)
                    .arg(&long_blocks)
                    .arg(&window);
                // SAFETY: spmm_col_T(const u32* row_ptr, const u32* col, const T* val,
                // u32 nrows, const T* x, u32 ldx, T* y, u32 ldy, u32 kw, T alpha, T beta,
                // u32 log_group, u32 skip, u32 long_blocks, u32 window). Column j of x starts
                // at j·ncols and of y at j·nrows; x has ncols·k and y nrows·k elements
                // (checked); the first long_blocks blocks scan windows of window ≤ THREADS rows
                // (the size of their shared row list) for rows longer than skip, the
                // group_blocks after them hold one group of 2^log_group ≤ 32 lanes per row;
                // THREADS = SPMM_THREADS.
                unsafe { b.launch(Gpu::cfg(group_blocks + long_blocks, THREADS, 0)) }
                    .map_err(|e| Gpu::launch_error("spmm_col", e))?;
            }
        }
        Ok(())
    }

    /// Most long-row blocks of a launch.
    fn max_long_blocks(&self) -> u32 {
        self.gpu.sm_count() * LONG_BLOCKS_PER_SM
    }

    /// The long-row blocks of a launch over `nrows` rows with `parts` blocks per window: windows
    /// of rows small enough to give every window's blocks some (a matrix of a few hundred long
    /// rows gets a window per row), at most a block's threads, and how many blocks scan them
    /// (none without long rows; a multiple of `parts`).
    fn long_grid(&self, nrows: u32, has_long: bool, parts: u32) -> (u32, u32) {
        if !has_long {
            return (THREADS, 0);
        }
        let max_windows = (self.max_long_blocks() / parts).max(1);
        let window = nrows.div_ceil(max_windows).clamp(1, THREADS);
        (window, nrows.div_ceil(window).clamp(1, max_windows) * parts)
    }

    /// The scratch of the long rows' pieces, grown (and its counts zeroed) where `split` needs
    /// more than it holds.
    fn scratch_for(
        &self,
        split: &LongSplit,
        nnz: usize,
        kw: usize,
    ) -> Result<std::sync::MutexGuard<'_, Scratch<T>>> {
        let mut s = self
            .scratch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (np, nc) = split.scratch_lens(nnz, kw);
        if s.partial.len() < np {
            s.partial = self.gpu.zeros::<T>(np)?;
        }
        if s.count.len() < nc {
            s.count = self.gpu.zeros::<u32>(nc)?;
        }
        Ok(s)
    }
}
