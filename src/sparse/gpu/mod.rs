//! GPU sparse matrix–matrix operations: SpGEMM `C = A·B` with a symbolic plan whose numeric
//! phase can be re-run alone, the Galerkin product `R·A·P`, transpose, `A + αB`, diagonal
//! extraction and diagonal scaling; and `CusparseSpgemm` (feature `peers`), cuSPARSE's `cusparseSpGEMM` as the in-run peer.
//! The graph phases of smoothed aggregation ([`strength_symmetric`], [`amalgamate`],
//! [`aggregate_mis2`], [`tentative_single`]) are in [`aggregate`], equal to their CPU
//! references exactly.
//!
//! Results are [`DeviceCsr`] matrices (CSR arrays that stay on the device, canonical: sorted
//! column indices, no duplicates, explicit zeros from cancellation kept — the pattern of the CPU
//! [`crate::sparse::SpgemmPlan`]); [`DeviceCsr::into_gpu_csr`] turns one into a [`GpuCsr`] ready
//! for SpMV (building the SpMV's structure tables on the device) without copying the entries.
//!
//! # Method: row-binned SpGEMM (`kernels/sparse/spgemm.cu`)
//!
//! Each row `i` of `A` has an upper bound of its product count,
//! `ub(i) = Σ_{k ∈ A[i,:]} nnz(B[k,:])`, computed by one kernel (rows of more than 8 entries
//! summed by a whole warp) that also bins the row by `ub`: `≤ 32`, `≤ 64`, `≤ 256`, `≤ 1024`,
//! `≤ 4096` and more.
//!
//! The symbolic phase is one pass: each row's distinct product columns are found, sorted and
//! written at the row's product-count offset (exclusive scan of `ub`) in a temporary, with their
//! count; a scan of the counts (the crate's scan primitive) gives `row_ptr` and a move kernel
//! packs the columns. Above 2^30 products (the temporary's 4 GiB) it takes two passes instead:
//! count, scan, fill in place. How a row's columns are found depends on its bin:
//! - `ub ≤ 64` (e.g. the 7-point stencil's `A·A`, 49 → 25): 8 or 16 lanes per row insert the
//!   products of one `A` entry each into a shared open-addressing hash table (`atomicCAS`,
//!   linear probing) and rank the distinct ones.
//! - `ub ≤ 1024` (`R·A`, `(R·A)·P`, the 27-point `A·A`): a warp per row; the products of 32 `A`
//!   entries at a time are dealt to the lanes one each (a prefix sum of the `B`-row lengths
//!   tells each lane its entry), inserted with a plain read before the `atomicCAS` (most
//!   products find their column already there when the output is much smaller than the
//!   products) into a table sized for the row, compacted in place by ballots and sorted
//!   (ranking, or a bitonic sort above 64 columns).
//! - longer rows: a 256-thread block per row with a **bitmap** of `B`'s columns in shared memory
//!   when `B` has at most 360 448 columns (the set bits, read in order, are the sorted row: no
//!   hashing, no sort — the dense-row path), else a hash table in shared or global memory and a
//!   bitonic sort.
//!
//! The *numeric* phase adds each product in `A`'s row order: for bin 1 a group walks `A`'s
//! row one entry at a time (its lanes split the `B` row, a group barrier between entries); for
//! the other bins the products are dealt to the lanes one each as above, and products that
//! meet the same entry of `C` within one round (`__match_any_sync`) are added by the lowest such
//! lane in lane order, which is `A`'s row order. Rows of the wide bins are cut into segments of
//! at most 256 entries of `C` and about 2048 products, a warp each; a segment takes from each
//! `B` row only its column range (binary search), and accumulates in a dense window indexed by
//! column when its columns span at most 512, else finds each column by binary search in its
//! sorted columns in shared memory. Products are rounded as `round(acc + round(a·b))` (no FMA
//! contraction), so the GPU product equals the CPU [`crate::sparse::spgemm`] **bit for bit**,
//! and is reproducible run to run. `B` must be canonical (strictly increasing columns in each
//! row; checked, an `Err` names the row), since the lanes add distinct columns of one row of
//! `B` at once.
//!
//! # Performance (H100, `benches/results/history/spgemm.md`, cuSPARSE SpGEMM by its whole protocol in
//! the same process)
//!
//! - Smoothed-aggregation products, 7-point 100³: `A·T` 1.08×, `R·A` 2.67×, `(R·A)·P` 1.20×,
//!   `A·A` 1.55×; 27-point 50³: 1.61×, 1.29×, 1.41×, 3.99×; 2-D elasticity 500²: 1.06×,
//!   2.74×, 1.38×, 3.98×. At 128³ the 7-point `A·T` and `A·A` fall to 0.93× and 0.75× (the
//!   bin-1 hash symbolic phase, issue-bound on divergent probing).
//! - Corpus `A·A` (40 matrices): geo-mean 1.35×, 35 of 40 at ≥ 1.0×; the lowest (0.78×) are
//!   products under 0.5 ms where launches and three small downloads weigh.
//!
//! Expand–sort–compress (every product written as a (row, column) key, radix-sorted, reduced by
//! segments) is not used: the crate's 64-bit key sort alone (10.8 G keys/s) would take longer on
//! the stencils' 10^8–10^9 products than cuSPARSE's whole product.
//!
//! # Transpose
//!
//! A stable key–value radix sort ([`crate::primitives::sort::gpu::radix_sort_pairs`]) of the
//! column indices carrying the entry positions: entries of equal column keep their row-major
//! order, so each row of `Aᵀ` comes out sorted. Column counts (atomics) and a scan give
//! `row_ptr`; one gather writes the rows and values.

mod adjoint;
pub mod aggregate;
pub mod block;
#[cfg(feature = "peers")]
mod cusparse_peer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::driver::CudaSlice;

use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::primitives::gpu as prim;
use crate::primitives::{ScanAlgorithm, ScanOp, ScanSpec};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

pub use adjoint::{conj_transpose, ADJOINT_SRC};
pub use aggregate::{
    aggregate_mis2, aggregate_mis2_ordered, amalgamate, drop_small, strength_symmetric,
    tentative_qr, tentative_single, GpuAggregation, AGGREGATE_SRC,
};
pub use block::{block_galerkin, BlockGalerkin, BLOCK_SRC};
#[cfg(feature = "peers")]
pub use cusparse_peer::CusparseSpgemm;

/// `kernels/sparse/spgemm.cu`: binned SpGEMM, transpose helpers, diagonal and scaling.
pub const SPGEMM_SRC: KernelSource = kernel_source!(
    "sparse/spgemm.cu",
    &[&COMMON],
    &[
        ("SPGEMM_BLOCK", BLOCK_THREADS as i64),
        ("SPGEMM_GROUP_THREADS", GROUP_THREADS as i64),
        ("SPGEMM_NBINS", BINS.len() as i64),
        ("SPGEMM_BIN0_ROWS", BINS[0].1 as i64),
        ("SPGEMM_BIN1_ROWS", BINS[1].1 as i64),
        ("SPGEMM_BIN2_ROWS", BINS[2].1 as i64),
        ("SPGEMM_BIN3_ROWS", BINS[3].1 as i64),
        ("SPGEMM_FLAT_SEG", FLAT_SEG as i64),
        ("SPGEMM_FLAT_SEGS_PER_BLOCK", FLAT_SEGS_PER_BLOCK as i64)
    ]
);

/// Threads per block of the block bins (one row per block) and of the bitmap kernel.
const BLOCK_THREADS: u32 = 256;

/// Threads per block of the group bins (several rows per block) and of the flat kernels.
const GROUP_THREADS: u32 = 128;

/// Flat numeric segments per block: one warp each.
const FLAT_SEGS_PER_BLOCK: u32 = GROUP_THREADS / 32;

/// Largest product count `Σ ub` for the one-pass symbolic phase (its temporary holds one
/// column per product: 2^30 products = 4 GiB); beyond it, a count pass and a fill pass.
static ONE_PASS_MAX_PRODUCTS: AtomicU64 = AtomicU64::new(1 << 30);

/// Sets the product count above which the symbolic phase takes two passes (count, then fill)
/// instead of one (tests of the two-pass path only; both give the same result).
#[doc(hidden)]
pub fn set_one_pass_limit_for_tests(products: u64) {
    ONE_PASS_MAX_PRODUCTS.store(products, Ordering::Relaxed);
}

/// The bins of the kernels (their limits are `spgemm_bin_of`'s in spgemm.cu, which takes the
/// threads and rows per block from here): (threads per block, rows per block); a bin with 0
/// rows per block is the global-table bin.
const BINS: [(u32, u32); 6] = [
    (GROUP_THREADS, 16),
    (GROUP_THREADS, 8),
    (GROUP_THREADS, 4),
    (GROUP_THREADS, 4),
    (BLOCK_THREADS, 1),
    (BLOCK_THREADS, 0),
];

/// A CSR matrix whose arrays live on the device: the result type of the GPU sparse operations.
///
/// `col` and `val` hold `max(nnz, 1)` elements (a dummy one for a matrix without entries, as
/// [`GpuCsr`] does). Invariants (built by the crate's kernels): `row_ptr` has `nrows + 1`
/// entries, non-decreasing from 0 to `nnz`; columns below `ncols`, sorted within each row.
pub struct DeviceCsr<T: GpuScalar> {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Row pointer (`nrows + 1`).
    pub row_ptr: CudaSlice<u32>,
    /// Column indices (`max(nnz, 1)`).
    pub col: CudaSlice<u32>,
    /// Values (`max(nnz, 1)`).
    pub val: CudaSlice<T>,
}

impl<T: GpuScalar> std::fmt::Debug for DeviceCsr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceCsr<{}>({}×{}, {} entries)",
            T::NAME,
            self.nrows,
            self.ncols,
            self.nnz
        )
    }
}

/// A borrowed view of CSR arrays on the device (of a [`GpuCsr`] or a [`DeviceCsr`]).
#[derive(Clone, Copy)]
pub struct CsrView<'a, T: GpuScalar> {
    nrows: usize,
    ncols: usize,
    nnz: usize,
    row_ptr: &'a CudaSlice<u32>,
    col: &'a CudaSlice<u32>,
    val: &'a CudaSlice<T>,
}

impl<'a, T: GpuScalar> CsrView<'a, T> {
    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// The row pointer (`nrows + 1` entries).
    pub fn row_ptr(&self) -> &'a CudaSlice<u32> {
        self.row_ptr
    }
    /// The column indices (`max(nnz, 1)` entries).
    pub fn col(&self) -> &'a CudaSlice<u32> {
        self.col
    }
    /// The values (`max(nnz, 1)` entries).
    pub fn val(&self) -> &'a CudaSlice<T> {
        self.val
    }

    /// Downloads into a host [`CsrMatrix`](crate::csr::CsrMatrix) (checked).
    ///
    /// # Errors
    /// A failed copy, or arrays that break the CSR invariants.
    pub fn download(&self, gpu: &Gpu) -> Result<crate::csr::CsrMatrix<T>> {
        let rp = gpu.download(self.row_ptr)?;
        let mut col = gpu.download(self.col)?;
        let mut val = gpu.download(self.val)?;
        col.truncate(self.nnz);
        val.truncate(self.nnz);
        crate::csr::CsrMatrix::try_from_parts(self.nrows, self.ncols, rp, col, val)
    }
}

impl<'a, T: GpuScalar> From<&'a GpuCsr<T>> for CsrView<'a, T> {
    fn from(a: &'a GpuCsr<T>) -> Self {
        let (row_ptr, col, val) = a.device_parts();
        CsrView {
            nrows: a.nrows(),
            ncols: a.ncols(),
            nnz: a.nnz(),
            row_ptr,
            col,
            val,
        }
    }
}

impl<'a, T: GpuScalar> From<&'a DeviceCsr<T>> for CsrView<'a, T> {
    fn from(a: &'a DeviceCsr<T>) -> Self {
        CsrView {
            nrows: a.nrows,
            ncols: a.ncols,
            nnz: a.nnz,
            row_ptr: &a.row_ptr,
            col: &a.col,
            val: &a.val,
        }
    }
}

impl<T: GpuScalar> DeviceCsr<T> {
    /// Uploads a host matrix.
    ///
    /// # Errors
    /// Out of device memory; more than 2^32 − 1 rows, columns or entries.
    pub fn upload(gpu: &Gpu, a: &crate::csr::CsrMatrix<T>) -> Result<Self> {
        check_u32(a.nrows(), a.ncols(), a.nnz(), "DeviceCsr::upload")?;
        let (zi, zv) = ([0u32], [T::zero()]);
        Ok(DeviceCsr {
            nrows: a.nrows(),
            ncols: a.ncols(),
            nnz: a.nnz(),
            row_ptr: gpu.upload(a.row_ptr())?,
            col: gpu.upload(if a.nnz() == 0 { &zi[..] } else { a.col_idx() })?,
            val: gpu.upload(if a.nnz() == 0 { &zv[..] } else { a.values() })?,
        })
    }

    /// Downloads into a host [`CsrMatrix`](crate::csr::CsrMatrix) (checked).
    ///
    /// # Errors
    /// A failed copy, or arrays that break the CSR invariants.
    pub fn download(&self, gpu: &Gpu) -> Result<crate::csr::CsrMatrix<T>> {
        self.view().download(gpu)
    }

    /// A [`GpuCsr`] on the same arrays (no copy of the entries), with the SpMV's structure
    /// tables built on the device ([`GpuCsr::from_device_parts`]).
    ///
    /// # Errors
    /// As [`GpuCsr::from_device_parts`].
    pub fn into_gpu_csr(self, gpu: &Arc<Gpu>) -> Result<GpuCsr<T>> {
        GpuCsr::from_device_parts(
            gpu,
            self.nrows,
            self.ncols,
            self.row_ptr,
            self.col,
            self.val,
        )
    }

    /// A borrowed view (the argument type of the operations here).
    pub fn view(&self) -> CsrView<'_, T> {
        self.into()
    }
}

fn check_u32(m: usize, n: usize, nnz: usize, what: &str) -> Result<()> {
    if m >= u32::MAX as usize || n >= u32::MAX as usize || nnz >= u32::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "{what}: {m}×{n} with {nnz} entries exceeds the 32-bit index range of the GPU kernels"
        )));
    }
    Ok(())
}

/// Lanes per row for a kernel whose lanes each load up to `per_lane` of a row's entries in one
/// batch before using them: the fewest (a power of two up to 32) that leave a row of the mean
/// length of `nnz` entries over `rows` rows within one batch per lane (one lane for a 7-point
/// stencil at 8 per lane, four for a 27-point one). It depends on the pattern only.
pub(crate) fn batch_lanes(nnz: usize, rows: usize, per_lane: usize) -> u32 {
    let mean = nnz.div_ceil(rows.max(1));
    mean.div_ceil(per_lane.max(1))
        .next_power_of_two()
        .clamp(1, 32) as u32
}

/// `Err` naming a row of `a` whose columns are not strictly increasing (none when `a` is
/// canonical, the form the GPU operations that merge or search rows need); `what` names the
/// operation. One `spgemm_check_rows` launch and a one-word download.
pub(crate) fn check_canonical<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: &CsrView<'_, T>,
    what: &str,
) -> Result<()> {
    if a.nrows == 0 || a.nnz == 0 {
        return Ok(());
    }
    let k = g.function(&SPGEMM_SRC, "spgemm_check_rows", &[])?;
    let mut bad = g.zeros::<u32>(1)?;
    let n32 = a.nrows as u32;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a.row_ptr).arg(a.col).arg(&n32).arg(&mut bad);
    // SAFETY: spgemm_check_rows(const u32* brp, const u32* bcol, u32 n, u32* bad): row_ptr n+1
    // entries ending at nnz, col nnz, bad one word.
    unsafe { lb.launch(Gpu::cfg(grid(g, a.nrows, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("spgemm_check_rows", e))?;
    let b = g.download(&bad)?[0];
    if b > 0 {
        return Err(Error::InvalidInput(format!(
            "{what}: row {} has unsorted or repeated column indices (the GPU version needs \
             canonical CSR: sort the rows and sum duplicates first)",
            b - 1
        )));
    }
    Ok(())
}

fn grid(g: &Gpu, n: usize, threads: usize) -> u32 {
    (n.div_ceil(threads) as u32).clamp(1, g.sm_count() * 32)
}

/// The symbolic result of `C = A·B` on the GPU: the rows of `A` binned by their product
/// counts and the pattern of `C` (`row_ptr`, sorted `col`), reusable by
/// [`GpuSpgemmPlan::numeric_into`] for new values of `A` and `B` on the same patterns.
pub struct GpuSpgemmPlan {
    gpu: Arc<Gpu>,
    nrows: usize,
    ncols: usize,
    a_shape: (usize, usize, usize),
    b_shape: (usize, usize, usize),
    nnz: usize,
    /// Rows of A, bin by bin (`bin_start[b]..bin_start[b+1]`).
    rows: CudaSlice<u32>,
    bin_start: [usize; 7],
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    /// Segments of the rows of the wide bins (2–5) for the numeric phase: (row, first entry,
    /// end entry) triples, their count on the device (`seg_count`) and an upper bound of it on the host.
    seg_items: CudaSlice<u32>,
    seg_count: CudaSlice<u32>,
    seg_bound: usize,
    /// The numeric kernels of the first version (one A entry at a time); for comparisons.
    legacy: bool,
}

/// Largest column count of `B` for the bitmap symbolic kernel of the block bins (its bitmap in
/// dynamic shared memory: 44 KiB).
const BITMAP_COLS: usize = 11264 * 32;

/// Products per segment above which the flat numeric kernel splits a row between more warps.
const FLAT_PROD: usize = 2048;

/// C entries per segment of the flat numeric kernel (`SPGEMM_FLAT_SEG` in spgemm.cu).
const FLAT_SEG: usize = 256;

impl std::fmt::Debug for GpuSpgemmPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuSpgemmPlan({}×{}, {} entries, rows per bin {:?})",
            self.nrows,
            self.ncols,
            self.nnz,
            self.bin_rows()
        )
    }
}

/// Entries per block slab of the global-table bin: a power of two at least the bin's largest
/// product count (each block holds two: the hash table and the compacted list); blocks so that
/// all slabs together stay under 2^28 entries (1 GiB).
fn slab_for(max_ub: u32) -> (u32, u32) {
    let slab = max_ub.max(1).next_power_of_two().max(8192);
    let blocks = ((1u64 << 27) / slab as u64).clamp(1, 1024) as u32;
    (slab, blocks)
}

impl GpuSpgemmPlan {
    /// The symbolic phase of `C = A·B`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `A`'s columns differ from `B`'s rows, when a row of `B` has
    /// unsorted or repeated columns (naming the row), or when `C` would exceed the 32-bit index
    /// range; CUDA errors with their context.
    pub fn symbolic<'a, 'b, T: GpuScalar>(
        gpu: &Arc<Gpu>,
        a: impl Into<CsrView<'a, T>>,
        b: impl Into<CsrView<'b, T>>,
    ) -> Result<Self> {
        let (a, b) = (a.into(), b.into());
        if a.ncols != b.nrows {
            return Err(Error::InvalidInput(format!(
                "GPU SpGEMM: A is {}×{} and B is {}×{}: A's columns must equal B's rows",
                a.nrows, a.ncols, b.nrows, b.ncols
            )));
        }
        let g = gpu;
        let m = a.nrows;
        let m32 = m as u32;
        let f = |name: &str| g.function(&SPGEMM_SRC, name, &[]);
        let legacy = std::env::var_os("SEGSPARSE_SPGEMM_LEGACY").is_some();
        // 1. Product counts and bins.
        let mut ub = g.zeros::<u32>(m + 1)?; // ub[m] = 0: its exclusive scan ends at Σ ub
                                             // One download brings back the bins' counts and largest bounds, the bad row of B
                                             // (13 words of the first 7 u64) and the products' total (the 8th).
        let mut words = g.zeros::<u64>(8)?;
        {
            let (mut head, mut ub_total) = words.split_at_mut(7);
            // SAFETY: 7 zeroed u64 words read as 14 zeroed u32 words.
            let mut stats = unsafe { head.transmute_mut::<u32>(14) }.expect("7 words hold 14");
            if b.nrows > 0 && b.nnz > 0 {
                let k = f("spgemm_check_rows")?;
                let mut bad = stats.slice_mut(12..13);
                let bn = b.nrows as u32;
                let mut lb = g.stream().launch_builder(&k);
                lb.arg(b.row_ptr).arg(b.col).arg(&bn).arg(&mut bad);
                // SAFETY: spgemm_check_rows(const u32* brp, const u32* bcol, u32 n, u32* bad):
                // brp n+1 entries ending at nnz(B), bcol nnz(B), bad one word.
                unsafe { lb.launch(Gpu::cfg(grid(g, b.nrows, 256), 256, 0)) }
                    .map_err(|e| Gpu::launch_error("spgemm_check_rows", e))?;
            }
            if m > 0 {
                let k = f("spgemm_bound")?;
                let (mut cnt, mut rest) = stats.split_at_mut(6);
                let mut mx = rest.slice_mut(0..6);
                let mut lb = g.stream().launch_builder(&k);
                lb.arg(a.row_ptr)
                    .arg(a.col)
                    .arg(b.row_ptr)
                    .arg(&m32)
                    .arg(&mut ub)
                    .arg(&mut cnt)
                    .arg(&mut mx)
                    .arg(&mut ub_total);
                // SAFETY: spgemm_bound(const u32* arp, const u32* acol, const u32* brp, u32 m,
                // u32* ub, u32* bin_count, u32* bin_max, u64* ub_total): arp m+1, acol nnz(A) <
                // ncols(A) = nrows(B), brp nrows(B)+1, ub m+1, counts and max 6 each, one total.
                unsafe { lb.launch(Gpu::cfg(grid(g, m, 256), 256, 0)) }
                    .map_err(|e| Gpu::launch_error("spgemm_bound", e))?;
            }
        }
        let w = g.download(&words)?;
        let st: Vec<u32> = w[..7]
            .iter()
            .flat_map(|&x| [x as u32, (x >> 32) as u32])
            .collect();
        let products = w[7];
        if st[12] > 0 {
            return Err(Error::InvalidInput(format!(
                "GPU SpGEMM: row {} of B has unsorted or repeated column indices (the GPU \
                 product needs B in canonical form: sort and sum duplicates first)",
                st[12] - 1
            )));
        }
        let mut bin_start = [0usize; 7];
        for bi in 0..6 {
            bin_start[bi + 1] = bin_start[bi] + st[bi] as usize;
        }
        let binned = bin_start[6];
        let mut rows = g.zeros::<u32>(binned.max(1))?;
        if binned > 0 {
            let offs: Vec<u32> = bin_start[..6].iter().map(|&x| x as u32).collect();
            let offs = g.upload(&offs)?;
            let mut cursor = g.zeros::<u32>(6)?;
            let k = f("spgemm_bin_rows")?;
            let mut lb = g.stream().launch_builder(&k);
            lb.arg(&ub)
                .arg(&m32)
                .arg(&offs)
                .arg(&mut cursor)
                .arg(&mut rows);
            // SAFETY: spgemm_bin_rows(const u32* ub, u32 m, const u32* offsets, u32* cursor,
            // u32* rows): ub m, offsets and cursor 6, rows holds every binned row (Σ counts).
            unsafe { lb.launch(Gpu::cfg(grid(g, m, 256), 256, 0)) }
                .map_err(|e| Gpu::launch_error("spgemm_bin_rows", e))?;
        }
        let max5 = st[6 + 5];
        let (slab, slab_blocks) = slab_for(max5);
        let mut scratch = if st[5] > 0 {
            g.zeros::<u32>(2 * slab as usize * slab_blocks.min(st[5]) as usize)?
        } else {
            g.zeros::<u32>(1)?
        };
        let blocks_of = |bi: usize, n: usize| -> u32 {
            let per_block = BINS[bi].1;
            if per_block == 0 {
                slab_blocks.min(n as u32)
            } else if per_block == 1 {
                (n as u32).min(g.sm_count() * 64)
            } else {
                n.div_ceil(per_block as usize) as u32
            }
        };
        // The fill kernels: each row's distinct columns, sorted, at out_off[i]; counts[i] = n.
        let fill = |out_off: &CudaSlice<u32>,
                    ccol: &mut CudaSlice<u32>,
                    counts: &mut CudaSlice<u32>,
                    scratch: &mut CudaSlice<u32>|
         -> Result<()> {
            for (bi, &(threads, _)) in BINS.iter().enumerate() {
                let n = bin_start[bi + 1] - bin_start[bi];
                if n == 0 {
                    continue;
                }
                if !legacy && (bi == 2 || bi == 3 || (bi >= 4 && b.ncols <= BITMAP_COLS)) {
                    let rows_b = rows.slice(bin_start[bi]..bin_start[bi + 1]);
                    let n32 = n as u32;
                    let nc32 = b.ncols as u32;
                    let (name, blocks, shared) = if bi < 4 {
                        (format!("spgemm_fill_flat_b{bi}"), blocks_of(bi, n), 0)
                    } else {
                        (
                            "spgemm_fill_bitmap_rows".to_string(),
                            (n as u32).min(g.sm_count() * 16),
                            4 * b.ncols.div_ceil(32) as u32,
                        )
                    };
                    let k = f(&name)?;
                    let mut lb = g.stream().launch_builder(&k);
                    lb.arg(&rows_b)
                        .arg(&n32)
                        .arg(a.row_ptr)
                        .arg(a.col)
                        .arg(b.row_ptr)
                        .arg(b.col);
                    if bi >= 4 {
                        lb.arg(&nc32);
                    }
                    lb.arg(out_off).arg(&mut *ccol).arg(&mut *counts);
                    // SAFETY: spgemm_fill_flat_bB(rows, n, arp, acol, brp, bcol, const u32*
                    // out_off, u32* ccol, u32* counts) and spgemm_fill_bitmap_rows(…, bcol, u32
                    // ncols, out_off, ccol, counts): rows n entries of this bin (each < m);
                    // out_off m+1 offsets with room for each row's distinct columns after it;
                    // counts m+1; the bitmap kernel's dynamic shared memory holds ncols bits
                    // (at most BITMAP_COLS: under 48 KiB), the group kernels' tables at least
                    // each row's distinct columns (≤ out_off[i+1] − out_off[i] ≤ ub ≤ CAP).
                    unsafe { lb.launch(Gpu::cfg(blocks, threads, shared)) }
                        .map_err(|e| Gpu::launch_error(&name, e))?;
                    continue;
                }
                let name = format!("spgemm_fill_b{bi}");
                let k = f(&name)?;
                let rows_b = rows.slice(bin_start[bi]..bin_start[bi + 1]);
                let n32 = n as u32;
                let mut lb = g.stream().launch_builder(&k);
                lb.arg(&rows_b)
                    .arg(&n32)
                    .arg(a.row_ptr)
                    .arg(a.col)
                    .arg(b.row_ptr)
                    .arg(b.col)
                    .arg(out_off)
                    .arg(&mut *ccol)
                    .arg(&mut *counts)
                    .arg(&mut *scratch)
                    .arg(&slab);
                // SAFETY: spgemm_fill_bB(rows, n, arp, acol, brp, bcol, const u32* out_off,
                // u32* ccol, u32* counts, u32* scratch, u32 slab): rows n entries of this bin
                // (each < m); out_off m+1 offsets with room for each row's distinct columns
                // after it (the scan of ub, or row_ptr); counts m+1; scratch 2·slab·blocks
                // entries for the global bin (blocks ≤ slab_blocks).
                unsafe { lb.launch(Gpu::cfg(blocks_of(bi, n), threads, 0)) }
                    .map_err(|e| Gpu::launch_error(&name, e))?;
            }
            Ok(())
        };
        let mut counts = g.zeros::<u32>(m + 1)?;
        let mut row_ptr = g.zeros::<u32>(m + 1)?;
        let scan = |input: &CudaSlice<u32>, out: &mut CudaSlice<u32>| {
            prim::scan(
                g,
                input,
                out,
                ScanSpec::exclusive(ScanOp::Plus),
                ScanAlgorithm::default(),
            )
        };
        let (col, total) = if products <= ONE_PASS_MAX_PRODUCTS.load(Ordering::Relaxed) {
            // One hash pass: sorted columns at the product-count offsets, then moved.
            let mut ub_off = g.zeros::<u32>(m + 1)?;
            scan(&ub, &mut ub_off)?;
            // SAFETY: tmp is read only where the fill kernels wrote (each row's n columns).
            let mut tmp = unsafe { g.alloc::<u32>((products as usize).max(1))? };
            fill(&ub_off, &mut tmp, &mut counts, &mut scratch)?;
            scan(&counts, &mut row_ptr)?;
            let total = g.download(&row_ptr.slice(m..m + 1))?[0] as usize;
            // SAFETY: spgemm_move_rows writes every entry (each row's n = row_ptr diff).
            let mut col = unsafe { g.alloc::<u32>(total.max(1))? };
            if total > 0 {
                let k = f("spgemm_move_rows")?;
                let mut lb = g.stream().launch_builder(&k);
                lb.arg(&ub_off)
                    .arg(&row_ptr)
                    .arg(&m32)
                    .arg(&tmp)
                    .arg(&mut col);
                // SAFETY: spgemm_move_rows(const u32* src_off, const u32* crp, u32 m,
                // const u32* tmp, u32* ccol): row i's crp[i+1]-crp[i] columns lie at
                // tmp[src_off[i]..] (written by the fill) and go to ccol[crp[i]..] (total).
                unsafe { lb.launch(Gpu::cfg(grid(g, m * 32, 256), 256, 0)) }
                    .map_err(|e| Gpu::launch_error("spgemm_move_rows", e))?;
            }
            (col, total)
        } else {
            // Products beyond the one-pass temporary: count, scan, then fill in place.
            for (bi, &(threads, _)) in BINS.iter().enumerate() {
                let n = bin_start[bi + 1] - bin_start[bi];
                if n == 0 {
                    continue;
                }
                let name = format!("spgemm_count_b{bi}");
                let k = f(&name)?;
                let rows_b = rows.slice(bin_start[bi]..bin_start[bi + 1]);
                let n32 = n as u32;
                let mut lb = g.stream().launch_builder(&k);
                lb.arg(&rows_b)
                    .arg(&n32)
                    .arg(a.row_ptr)
                    .arg(a.col)
                    .arg(b.row_ptr)
                    .arg(b.col)
                    .arg(&mut counts)
                    .arg(&mut scratch)
                    .arg(&slab);
                // SAFETY: spgemm_count_bB(const u32* rows, u32 n, arp, acol, brp, bcol,
                // u32* counts, u32* scratch, u32 slab): rows n entries of this bin (each < m),
                // counts m+1, scratch 2·slab·blocks entries for the global bin.
                unsafe { lb.launch(Gpu::cfg(blocks_of(bi, n), threads, 0)) }
                    .map_err(|e| Gpu::launch_error(&name, e))?;
            }
            if products >= u32::MAX as u64 {
                // The u32 scan of the counts could wrap: add them on the host first.
                let sum: u64 = g.download(&counts)?.iter().map(|&c| c as u64).sum();
                check_u32(m, b.ncols, sum as usize, "GPU SpGEMM result")?;
            }
            scan(&counts, &mut row_ptr)?;
            let total = g.download(&row_ptr.slice(m..m + 1))?[0] as usize;
            check_u32(m, b.ncols, total, "GPU SpGEMM result")?;
            let mut col = g.zeros::<u32>(total.max(1))?;
            fill(&row_ptr, &mut col, &mut counts, &mut scratch)?;
            (col, total)
        };
        drop(counts);
        // Segments of the wide bins' rows for the numeric phase.
        let wide = bin_start[6] - bin_start[2];
        let seg_bound = 2 * wide + total / FLAT_SEG + products as usize / FLAT_PROD;
        let mut seg_items = g.zeros::<u32>(3 * seg_bound.max(1))?;
        let mut seg_count = g.zeros::<u32>(1)?;
        if wide > 0 {
            let k = f("spgemm_seg_items")?;
            let rows_w = rows.slice(bin_start[2]..bin_start[6]);
            let (w32, seg32, prod32) = (wide as u32, FLAT_SEG as u32, FLAT_PROD as u32);
            let mut lb = g.stream().launch_builder(&k);
            lb.arg(&rows_w)
                .arg(&w32)
                .arg(&row_ptr)
                .arg(&ub)
                .arg(&seg32)
                .arg(&prod32)
                .arg(&mut seg_count)
                .arg(&mut seg_items);
            // SAFETY: spgemm_seg_items(const u32* rows, u32 nrows, const u32* crp,
            // const u32* ub, u32 seg, u32 prod, u32* cursor, u32* items): rows `wide` entries
            // < m, crp and ub m+1; Σ max(ceil(n_i/seg), ceil(ub_i/prod)) ≤ 2·wide + total/seg +
            // products/prod = seg_bound triples fit items.
            unsafe { lb.launch(Gpu::cfg(grid(g, wide, 256), 256, 0)) }
                .map_err(|e| Gpu::launch_error("spgemm_seg_items", e))?;
        }
        Ok(GpuSpgemmPlan {
            gpu: gpu.clone(),
            nrows: m,
            ncols: b.ncols,
            a_shape: (a.nrows, a.ncols, a.nnz),
            b_shape: (b.nrows, b.ncols, b.nnz),
            nnz: total,
            rows,
            bin_start,
            row_ptr,
            col,
            seg_items,
            seg_count,
            seg_bound,
            legacy,
        })
    }

    /// Entries of `C`.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Rows of `C`.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Columns of `C`.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Rows of `A` in each bin (by product count: ≤ 32, ≤ 64, ≤ 256, ≤ 1024, ≤ 4096, more).
    pub fn bin_rows(&self) -> [usize; 6] {
        std::array::from_fn(|b| self.bin_start[b + 1] - self.bin_start[b])
    }

    /// `C`'s row pointer on the device (`nrows + 1`).
    pub fn row_ptr(&self) -> &CudaSlice<u32> {
        &self.row_ptr
    }

    /// `C`'s column indices on the device (`max(nnz, 1)`), sorted within each row.
    pub fn col_idx(&self) -> &CudaSlice<u32> {
        &self.col
    }

    /// The numeric phase into `values` (length `max(nnz, 1)`): `C = A·B` on the plan's pattern.
    /// Queues kernels and returns (no allocation, no synchronisation).
    ///
    /// # Panics
    /// When `A` or `B` do not have the shapes and entry counts the plan was made for, or
    /// `values` has the wrong length.
    ///
    /// # Errors
    /// A failed launch, naming the kernel.
    pub fn numeric_into<'a, 'b, T: GpuScalar>(
        &self,
        a: impl Into<CsrView<'a, T>>,
        b: impl Into<CsrView<'b, T>>,
        values: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (a, b) = (a.into(), b.into());
        assert_eq!(
            (a.nrows, a.ncols, a.nnz),
            self.a_shape,
            "GPU SpGEMM numeric: A (rows, cols, nnz) differs from the plan's"
        );
        assert_eq!(
            (b.nrows, b.ncols, b.nnz),
            self.b_shape,
            "GPU SpGEMM numeric: B (rows, cols, nnz) differs from the plan's"
        );
        assert_eq!(
            values.len(),
            self.nnz.max(1),
            "GPU SpGEMM numeric: values length vs the plan's entries"
        );
        let g = &self.gpu;
        if !self.legacy {
            return self.numeric_flat(a, b, values);
        }
        for (bi, &(threads, per_block)) in BINS.iter().enumerate() {
            let n = self.bin_start[bi + 1] - self.bin_start[bi];
            if n == 0 {
                continue;
            }
            let blocks = if per_block <= 1 {
                (n as u32).min(g.sm_count() * 64)
            } else {
                n.div_ceil(per_block as usize) as u32
            };
            let name = format!("spgemm_numeric_b{bi}");
            let k = g.typed_function::<T>(&SPGEMM_SRC, &name, &[])?;
            let rows_b = self.rows.slice(self.bin_start[bi]..self.bin_start[bi + 1]);
            let n32 = n as u32;
            // SAFETY: spgemm_numeric_bB_T takes (rows, n, ...): bin bi's rows of this plan
            // (binary search of each product's column in its C row).
            unsafe {
                self.launch_numeric(&k, &name, Gpu::cfg(blocks, threads, 0), a, b, values, |l| {
                    l.arg(&rows_b).arg(&n32);
                })
            }?;
        }
        // Rows without products have no entries: nothing to write.
        Ok(())
    }

    /// Launches the numeric kernel `name` (for `T`): `(head..., arp, acol, const T* aval, brp,
    /// bcol, const T* bval, crp, ccol, T* cval)`, where `head` pushes the two arguments that
    /// name its rows (a bin's rows and their count, or the flat kernel's segments).
    ///
    /// # Safety
    /// `name` has that signature and `head` pushes what its first two parameters expect, rows
    /// or segments of this plan; `a` and `b` have the shapes the plan was made for (checked by
    /// the callers), so every product's column is in its C row (the symbolic phase put it
    /// there) and the kernel's search or slot lands inside the row; `values` has nnz entries.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_numeric<'a, T: GpuScalar>(
        &'a self,
        k: &'a cudarc::driver::CudaFunction,
        name: &str,
        cfg: cudarc::driver::LaunchConfig,
        a: CsrView<'a, T>,
        b: CsrView<'a, T>,
        values: &'a mut CudaSlice<T>,
        head: impl FnOnce(&mut cudarc::driver::LaunchArgs<'a>),
    ) -> Result<()> {
        let mut lb = self.gpu.stream().launch_builder(k);
        head(&mut lb);
        lb.arg(a.row_ptr)
            .arg(a.col)
            .arg(a.val)
            .arg(b.row_ptr)
            .arg(b.col)
            .arg(b.val)
            .arg(&self.row_ptr)
            .arg(&self.col)
            .arg(values);
        // SAFETY: the caller's.
        unsafe { lb.launch(cfg) }
            .map(|_| ())
            .map_err(|e| Gpu::launch_error(name, e))
    }

    /// The flat numeric kernels: a group per row for bins 0 and 1, a warp per row segment for
    /// the others.
    fn numeric_flat<T: GpuScalar>(
        &self,
        a: CsrView<'_, T>,
        b: CsrView<'_, T>,
        values: &mut CudaSlice<T>,
    ) -> Result<()> {
        let g = &self.gpu;
        for (bi, &(_, per_block)) in BINS.iter().enumerate().take(2) {
            let n = self.bin_start[bi + 1] - self.bin_start[bi];
            if n == 0 {
                continue;
            }
            let blocks = n.div_ceil(per_block as usize) as u32;
            // Bin 1 (e.g. the 7-point stencil's A·A, 7 entries of 7): one A entry at a time
            // measured faster than the flat kernel's bookkeeping.
            let name = if bi == 0 {
                "spgemm_flat_b0".to_string()
            } else {
                "spgemm_numeric_b1".to_string()
            };
            let k = g.typed_function::<T>(&SPGEMM_SRC, &name, &[])?;
            let rows_b = self.rows.slice(self.bin_start[bi]..self.bin_start[bi + 1]);
            let n32 = n as u32;
            // SAFETY: spgemm_flat_b0_T / spgemm_numeric_b1_T take (rows, n, ...): bin bi's rows
            // of this plan (each row's C row fits the group's 32/64 entries: n ≤ ub).
            unsafe {
                self.launch_numeric(
                    &k,
                    &name,
                    Gpu::cfg(blocks, GROUP_THREADS, 0),
                    a,
                    b,
                    values,
                    |l| {
                        l.arg(&rows_b).arg(&n32);
                    },
                )
            }?;
        }
        if self.bin_start[6] > self.bin_start[2] {
            let blocks = (self.seg_bound.div_ceil(FLAT_SEGS_PER_BLOCK as usize) as u32)
                .clamp(1, g.sm_count() * 16);
            let k = g.typed_function::<T>(&SPGEMM_SRC, "spgemm_flat_seg", &[])?;
            // SAFETY: spgemm_flat_seg_T takes (items, nitems, ...): *nitems (row, first, end
            // entry) triples written by spgemm_seg_items for this plan's rows, each segment
            // inside its row of C and at most FLAT_SEG entries.
            unsafe {
                self.launch_numeric(
                    &k,
                    "spgemm_flat_seg",
                    Gpu::cfg(blocks, GROUP_THREADS, 0),
                    a,
                    b,
                    values,
                    |l| {
                        l.arg(&self.seg_items).arg(&self.seg_count);
                    },
                )
            }?;
        }
        Ok(())
    }

    /// The numeric phase into a new [`DeviceCsr`] (the pattern copied on the device).
    ///
    /// # Errors
    /// As [`GpuSpgemmPlan::numeric_into`]; out of device memory.
    pub fn numeric<'a, 'b, T: GpuScalar>(
        &self,
        a: impl Into<CsrView<'a, T>>,
        b: impl Into<CsrView<'b, T>>,
    ) -> Result<DeviceCsr<T>> {
        let g = &self.gpu;
        // SAFETY: every entry is written by the numeric kernels (each row of C is written by
        // its row's group); a matrix without entries keeps one unread dummy.
        let mut val = unsafe { g.alloc::<T>(self.nnz.max(1))? };
        self.numeric_into(a, b, &mut val)?;
        let row_ptr = g
            .stream()
            .clone_dtod(&self.row_ptr)
            .map_err(|e| Error::cuda("copying C's row pointer", e))?;
        let col = g
            .stream()
            .clone_dtod(&self.col)
            .map_err(|e| Error::cuda("copying C's columns", e))?;
        Ok(DeviceCsr {
            nrows: self.nrows,
            ncols: self.ncols,
            nnz: self.nnz,
            row_ptr,
            col,
            val,
        })
    }

    /// The numeric phase, the plan's pattern arrays moved into the result (no copy): for a
    /// one-off product.
    ///
    /// # Errors
    /// As [`GpuSpgemmPlan::numeric_into`].
    pub fn into_product<'a, 'b, T: GpuScalar>(
        self,
        a: impl Into<CsrView<'a, T>>,
        b: impl Into<CsrView<'b, T>>,
    ) -> Result<DeviceCsr<T>> {
        // SAFETY: as in `numeric`.
        let mut val = unsafe { self.gpu.alloc::<T>(self.nnz.max(1))? };
        self.numeric_into(a, b, &mut val)?;
        Ok(DeviceCsr {
            nrows: self.nrows,
            ncols: self.ncols,
            nnz: self.nnz,
            row_ptr: self.row_ptr,
            col: self.col,
            val,
        })
    }
}

/// `C = A·B` on the GPU (symbolic and numeric phases), canonical CSR on the device.
///
/// `B` must be canonical (strictly increasing columns within each row); `A` may be in any
/// order (its entries are added in stored order, as the CPU does).
///
/// # Errors
/// As [`GpuSpgemmPlan::symbolic`].
pub fn spgemm<'a, 'b, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
    b: impl Into<CsrView<'b, T>>,
) -> Result<DeviceCsr<T>> {
    let (a, b) = (a.into(), b.into());
    GpuSpgemmPlan::symbolic(gpu, a, b)?.into_product(a, b)
}

/// The Galerkin product `R·A·P` on the GPU (`(R·A)·P`).
///
/// # Errors
/// As [`spgemm`], for either product.
pub fn galerkin<'r, 'a, 'p, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    r: impl Into<CsrView<'r, T>>,
    a: impl Into<CsrView<'a, T>>,
    p: impl Into<CsrView<'p, T>>,
) -> Result<DeviceCsr<T>> {
    let ra = spgemm(gpu, r, a)?;
    spgemm(gpu, &ra, p)
}

/// `Aᵀ` on the GPU, canonical CSR (rows of `Aᵀ` sorted when `A`'s rows are: a stable sort by
/// column keeps the row-major order within each column).
///
/// # Errors
/// CUDA errors with their context.
pub fn transpose<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
) -> Result<DeviceCsr<T>> {
    let a = a.into();
    let g = gpu;
    let (m, n, nnz) = (a.nrows, a.ncols, a.nnz);
    let Some(p) = transpose_pattern(g, a.row_ptr, a.col, (m, n, nnz))? else {
        return Ok(DeviceCsr {
            nrows: n,
            ncols: m,
            nnz: 0,
            row_ptr: g.zeros::<u32>(n + 1)?,
            col: g.zeros::<u32>(1)?,
            val: g.zeros::<T>(1)?,
        });
    };
    let nnz32 = nnz as u32;
    // SAFETY: the gather writes all nnz entries.
    let (mut tcol, mut tval) = unsafe { (g.alloc::<u32>(nnz)?, g.alloc::<T>(nnz)?) };
    let k = g.typed_function::<T>(&SPGEMM_SRC, "sparse_transpose_gather", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&p.perm)
        .arg(&p.rows)
        .arg(a.val)
        .arg(&nnz32)
        .arg(&mut tcol)
        .arg(&mut tval);
    // SAFETY: sparse_transpose_gather_T(const u32* perm, const u32* rows, const T* val, u32 nnz,
    // u32* tcol, T* tval): perm a permutation of 0..nnz, rows and val nnz, outputs nnz.
    unsafe { lb.launch(Gpu::cfg(grid(g, nnz, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_transpose_gather", e))?;
    Ok(DeviceCsr {
        nrows: n,
        ncols: m,
        nnz,
        row_ptr: p.row_ptr,
        col: tcol,
        val: tval,
    })
}

/// The structure of `Aᵀ` for an `m × n` CSR pattern with `nnz > 0` entries (`None` when there
/// are none): its row pointers, and for each entry `q` of `Aᵀ` (row-major) the entry `perm[q]`
/// of `A` it comes from, whose row `rows[perm[q]]` is its column. The value types gather their
/// values with `perm` (`transpose`, the complex conjugate transpose).
pub(crate) struct TransposePattern {
    pub(crate) row_ptr: CudaSlice<u32>,
    pub(crate) perm: CudaSlice<u32>,
    pub(crate) rows: CudaSlice<u32>,
}

/// Builds [`TransposePattern`] on the device: the row of every entry, column counts and their
/// scan, a stable radix sort of the entries by column.
pub(crate) fn transpose_pattern(
    g: &Arc<Gpu>,
    a_row_ptr: &CudaSlice<u32>,
    a_col: &CudaSlice<u32>,
    (m, n, nnz): (usize, usize, usize),
) -> Result<Option<TransposePattern>> {
    let f = |name: &str| g.function(&SPGEMM_SRC, name, &[]);
    let mut counts = g.zeros::<u32>(n + 1)?;
    let mut row_ptr = g.zeros::<u32>(n + 1)?;
    if nnz == 0 {
        return Ok(None);
    }
    let nnz32 = nnz as u32;
    let m32 = m as u32;
    let mut rows = g.zeros::<u32>(nnz)?;
    let k = f("sparse_entry_rows")?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a_row_ptr).arg(&m32).arg(&mut rows);
    // SAFETY: sparse_entry_rows(const u32* rp, u32 m, u32* rows): rp m+1 ending at nnz, rows nnz.
    unsafe { lb.launch(Gpu::cfg(grid(g, m, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_entry_rows", e))?;
    let k = f("sparse_col_counts")?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a_col).arg(&nnz32).arg(&mut counts);
    // SAFETY: sparse_col_counts(const u32* col, u32 nnz, u32* counts): columns < n, counts n+1.
    unsafe { lb.launch(Gpu::cfg(grid(g, nnz, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_col_counts", e))?;
    prim::scan(
        g,
        &counts,
        &mut row_ptr,
        ScanSpec::exclusive(ScanOp::Plus),
        ScanAlgorithm::default(),
    )?;
    let mut keys = g
        .stream()
        .clone_dtod(&a_col.slice(..nnz))
        .map_err(|e| Error::cuda("copying column keys", e))?;
    // SAFETY: sparse_iota writes all nnz entries.
    let mut perm = unsafe { g.alloc::<u32>(nnz)? };
    let k = f("sparse_iota")?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&nnz32).arg(&mut perm);
    // SAFETY: sparse_iota(u32 n, u32* out): out n entries.
    unsafe { lb.launch(Gpu::cfg(grid(g, nnz, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_iota", e))?;
    crate::primitives::sort::gpu::radix_sort_pairs(g, &mut keys, &mut perm)?;
    Ok(Some(TransposePattern {
        row_ptr,
        perm,
        rows,
    }))
}

/// `C = A + α·B` on the GPU for canonical `A` and `B` of the same shape: the union of the
/// patterns, `a_ij + round(α·b_ij)` where both are stored and `round(α·b_ij)` where only `B` is —
/// the CPU [`crate::sparse::add`] bit for bit (explicit zeros kept). One thread per row merges
/// the two rows: a count pass, a scan, a fill pass.
///
/// # Errors
/// [`Error::InvalidInput`] when the shapes differ or a row is not canonical (naming it); CUDA
/// errors with their context.
pub fn add<'a, 'b, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
    alpha: T,
    b: impl Into<CsrView<'b, T>>,
) -> Result<DeviceCsr<T>> {
    let (a, b) = (a.into(), b.into());
    if (a.nrows, a.ncols) != (b.nrows, b.ncols) {
        return Err(Error::InvalidInput(format!(
            "GPU A + αB: A is {}×{} and B is {}×{}",
            a.nrows, a.ncols, b.nrows, b.ncols
        )));
    }
    let g = gpu;
    check_u32(a.nrows, a.ncols, a.nnz.saturating_add(b.nnz), "GPU A + αB")?;
    check_canonical(g, &a, "GPU A + αB (A)")?;
    check_canonical(g, &b, "GPU A + αB (B)")?;
    let m = a.nrows;
    let m32 = m as u32;
    let mut counts = g.zeros::<u32>(m + 1)?;
    let mut row_ptr = g.zeros::<u32>(m + 1)?;
    if m > 0 {
        let k = g.function(&SPGEMM_SRC, "sparse_add_count", &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(a.row_ptr)
            .arg(a.col)
            .arg(b.row_ptr)
            .arg(b.col)
            .arg(&m32)
            .arg(&mut counts);
        // SAFETY: sparse_add_count(arp, acol, brp, bcol, u32 m, u32* counts): both row pointers
        // m+1 entries ending at their nnz; counts m+1 (counts[m] stays 0).
        unsafe { lb.launch(Gpu::cfg(grid(g, m, 256), 256, 0)) }
            .map_err(|e| Gpu::launch_error("sparse_add_count", e))?;
        prim::scan(
            g,
            &counts,
            &mut row_ptr,
            ScanSpec::exclusive(ScanOp::Plus),
            ScanAlgorithm::default(),
        )?;
    }
    let nnz = g.download(&row_ptr.slice(m..m + 1))?[0] as usize;
    let (mut col, mut val) = (g.zeros::<u32>(nnz.max(1))?, g.zeros::<T>(nnz.max(1))?);
    if nnz > 0 {
        let k = g.typed_function::<T>(&SPGEMM_SRC, "sparse_add_fill", &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(a.row_ptr)
            .arg(a.col)
            .arg(a.val)
            .arg(b.row_ptr)
            .arg(b.col)
            .arg(b.val)
            .arg(&alpha)
            .arg(&m32)
            .arg(&row_ptr)
            .arg(&mut col)
            .arg(&mut val);
        // SAFETY: sparse_add_fill_T(arp, acol, aval, brp, bcol, bval, T alpha, u32 m, crp,
        // u32* ccol, T* cval): crp the scan of the count pass's union sizes (the same merge), so
        // row i writes crp[i]..crp[i+1] < nnz.
        unsafe { lb.launch(Gpu::cfg(grid(g, m, 256), 256, 0)) }
            .map_err(|e| Gpu::launch_error("sparse_add_fill", e))?;
    }
    Ok(DeviceCsr {
        nrows: m,
        ncols: a.ncols,
        nnz,
        row_ptr,
        col,
        val,
    })
}

/// The diagonal `d[i] = A[i,i]` (0 where not stored), `min(nrows, ncols)` entries.
///
/// # Errors
/// CUDA errors with their context.
pub fn diagonal<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
) -> Result<CudaSlice<T>> {
    let a = a.into();
    let n = a.nrows.min(a.ncols);
    let mut d = gpu.zeros::<T>(n.max(1))?;
    if n == 0 {
        return Ok(d);
    }
    let k = gpu.typed_function::<T>(&SPGEMM_SRC, "sparse_diagonal", &[])?;
    let n32 = n as u32;
    let mut lb = gpu.stream().launch_builder(&k);
    lb.arg(a.row_ptr)
        .arg(a.col)
        .arg(a.val)
        .arg(&n32)
        .arg(&mut d);
    // SAFETY: sparse_diagonal_T(rp, col, val, u32 n, T* d): rows < n ≤ nrows exist, d n entries.
    unsafe { lb.launch(Gpu::cfg(grid(gpu, n, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_diagonal", e))?;
    Ok(d)
}

/// `A ← diag(left)·A·diag(right)` in place on the device; either side may be `None`.
///
/// # Panics
/// When a scaling vector's length differs from `A`'s rows (`left`) or columns (`right`).
///
/// # Errors
/// A failed launch.
pub fn scale<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &mut DeviceCsr<T>,
    left: Option<&CudaSlice<T>>,
    right: Option<&CudaSlice<T>>,
) -> Result<()> {
    if let Some(l) = left {
        assert_eq!(l.len(), a.nrows, "scale: left vector length vs rows");
    }
    if let Some(r) = right {
        assert_eq!(r.len(), a.ncols, "scale: right vector length vs columns");
    }
    if a.nrows == 0 || a.nnz == 0 {
        return Ok(());
    }
    let k = gpu.typed_function::<T>(&SPGEMM_SRC, "sparse_scale", &[])?;
    let dummy = gpu.zeros::<T>(1)?;
    let (hl, hr) = (left.is_some() as u32, right.is_some() as u32);
    let m32 = a.nrows as u32;
    let mut lb = gpu.stream().launch_builder(&k);
    lb.arg(&a.row_ptr)
        .arg(&a.col)
        .arg(&mut a.val)
        .arg(&m32)
        .arg(left.unwrap_or(&dummy))
        .arg(right.unwrap_or(&dummy))
        .arg(&hl)
        .arg(&hr);
    // SAFETY: sparse_scale_T(rp, col, T* val, u32 m, const T* left, const T* right, u32 has_l,
    // u32 has_r): left read only when given (nrows entries), right only when given (ncols).
    unsafe { lb.launch(Gpu::cfg(grid(gpu, a.nrows, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_scale", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn batch_lanes_cover_the_mean_row_in_one_batch() {
        // 7-point, 27-point and 81-entry (3-D elasticity) rows at 8 entries per lane.
        assert_eq!(super::batch_lanes(7_000, 1_000, 8), 1);
        assert_eq!(super::batch_lanes(27_000, 1_000, 8), 4);
        assert_eq!(super::batch_lanes(81_000, 1_000, 8), 16);
        assert_eq!(super::batch_lanes(10_000, 10, 8), 32);
        assert_eq!(super::batch_lanes(0, 0, 8), 1);
    }
}
