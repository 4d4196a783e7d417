//! The graph phases of smoothed aggregation on the GPU: symmetric strength of connection
//! ([`strength_symmetric`]) and its sibling, dropping small entries ([`drop_small`]), node
//! amalgamation ([`amalgamate`]), MIS-2 aggregation
//! ([`aggregate_mis2`], giving a [`GpuAggregation`] that stays on the device) and the tentative
//! prolongator of one candidate ([`tentative_single`]) and of several ([`tentative_qr`]).
//! Kernels: `kernels/sparse/aggregate.cu`.
//!
//! # What equals what
//!
//! Each function returns **exactly** what its CPU reference returns for the same (canonical)
//! input: [`crate::sparse::strength_symmetric`], [`crate::sparse::drop_small`],
//! [`crate::sparse::amalgamate`] and
//! [`crate::sparse::aggregate_mis2`] (same patterns, same `agg` and `roots`), and the AMG's
//! `fit_candidates` (same `T` and coarse candidates). Patterns and aggregation
//! are integer results of the same procedure; the few floating-point results are computed in
//! `f64` with the CPU's operations in the CPU's order, with explicit round-to-nearest intrinsics
//! (`__dmul_rn`, `__dadd_rn`, `__dsqrt_rn`, `__ddiv_rn`) so that NVRTC contracts nothing into an
//! FMA:
//!
//! - strength and dropping: `|a_ij| ≥ θ·sqrt(|a_ii|·|a_jj|)`, one comparison per entry;
//! - amalgamation: `sqrt(Σ a_ij²)` with the squares added sequentially from `0.0`, the block's
//!   rows in order and each row's entries in column order (one thread per node row);
//! - tentative: `‖b‖` over the aggregate's unknowns in increasing order, sequentially from
//!   `0.0` (one thread per aggregate), then `b_i / ‖b‖`; several candidates: modified
//!   Gram–Schmidt per aggregate (one thread each), every dot product and norm summed
//!   sequentially from `-0.0` (the start of Rust's float `Sum`), each update `q − d·q_p` rounded
//!   twice.
//!
//! So results are also the same run to run.
//!
//! Inputs must be canonical CSR (strictly increasing columns in each row): the kernels
//! binary-search rows (the mirror test of the symmetrised graph, the diagonal) and merge sorted
//! rows. A check kernel runs first (the SpGEMM's `spgemm_check_rows`), and a row that breaks it
//! is reported as [`Error::InvalidInput`] naming the row. The CPU versions also accept
//! non-canonical input; canonicalise it before uploading.
//!
//! # Method
//!
//! Row-parallel kernels in a warp → block → device layering: a group of `G` lanes of a warp
//! works on one row (`G` = 4, 8, 16 or 32 from the average row length, like a vector CSR SpMV),
//! with shuffle reductions (sums, 64-bit maxima) and ballot compaction (a row's kept entries
//! written in order by their rank among the group's kept lanes); thin entry points walk the rows
//! grid-stride. Outputs with a data-dependent pattern are built in two passes (count, exclusive
//! scan with [`crate::primitives::gpu::scan`], fill).
//!
//! - **Symmetrised graph** (inside [`aggregate_mis2`]): each off-diagonal entry `(i, j)` of `S`
//!   looks for its mirror `(j, i)` by binary search in row `j`. When all are present (`S` of a
//!   symmetric matrix) the graph is `S`'s pattern without the diagonal; otherwise the missing
//!   mirrors are written as 64-bit keys `j << 32 | i`, radix-sorted
//!   ([`crate::primitives::sort::gpu::radix_sort`]), counted per row, and each row is the merge
//!   of its own entries with its extra ones — every lane places its element by its rank in its
//!   list plus a binary-search count in the other (the lists are disjoint).
//! - **MIS-2 rounds** on packed 64-bit keys (`state << 62 | (w >> 34) << 32 | i`, see
//!   [`crate::sparse`]'s aggregation docs): one kernel for `t1` (the closed-neighbourhood maximum
//!   of the keys), one for `t2` fused with the state update — `t2(i)` is needed by node `i`
//!   alone and that kernel reads only `t1`, so each undecided node updates its own key in place —
//!   which also counts the nodes left undecided into a device counter of its round (a warp
//!   sum, one atomic per warp). Rounds are queued in batches ([`MIS2_BATCH`], doubling), each round's kernels
//!   doing nothing once the previous round's counter is zero; the host reads the batch's
//!   counters (one synchronisation per batch) and stops at the first zero, which gives the
//!   round count.
//! - **Roots and passes**: an exclusive scan of the `IN` flags numbers the roots in node order;
//!   pass 1 and pass 2 are one group kernel each (largest key among the root neighbours, then
//!   among the pass-1-assigned neighbours).
//! - **Members**: `(agg, node)` pairs sorted by a stable radix sort
//!   ([`crate::primitives::sort::gpu::radix_sort_pairs`]), so each aggregate's nodes come out in
//!   increasing order; aggregate starts are where the sorted `agg` changes.
//! - **Tentative prolongator**: an exclusive scan of "is my node aggregated" flags (times the
//!   number of candidates) gives `T`'s row pointer; one thread per aggregate computes the norm
//!   (or the QR of its candidate block) and writes its unknowns' entries.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::{check_canonical, check_u32, grid, CsrView, DeviceCsr};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::primitives::gpu as prim;
use crate::primitives::{ScanAlgorithm, ScanOp, ScanSpec};
use crate::sparse::Aggregation;
use crate::spmv::gpu::GpuScalar;

/// `kernels/sparse/aggregate.cu`: strength, amalgamation, the symmetrised graph, MIS-2 and the
/// tentative prolongator.
pub const AGGREGATE_SRC: KernelSource = kernel_source!("sparse/aggregate.cu", &[&COMMON]);

/// Threads per block of every kernel here.
const THREADS: u32 = 256;

/// MIS-2 rounds queued before the first read of the round counters (Poisson 3-D takes 10–15
/// rounds per level with random priorities, so one or two reads); each further batch is twice
/// as long, up to [`MIS2_BATCH_MAX`].
pub const MIS2_BATCH: usize = 8;

/// The longest batch of MIS-2 rounds between two reads of the counters.
pub const MIS2_BATCH_MAX: usize = 128;

/// Lanes per row of the group kernels: the average row length rounded up to a power of two,
/// between 4 and 32 (Poisson 2D/3D graphs: 4 and 8 lanes; the 27-point stencil: 32), so most
/// lanes of a group have an entry and a row's entries are read in one or two coalesced steps.
fn lanes(nnz: usize, n: usize) -> u32 {
    let avg = nnz.div_ceil(n.max(1)).max(1);
    (avg.next_power_of_two().min(32) as u32).max(4)
}

/// Entries of a row that one lane of a MIS-2 round loads at once (`MIS2_UNROLL` in
/// `aggregate.cu`).
const MIS2_UNROLL: usize = 8;

/// Lanes per row of the MIS-2 rounds (`mis2_t1`, `mis2_t2_update`): the fewest (a power of two
/// up to 32) that leave the average row at most [`MIS2_UNROLL`] entries per lane, which each
/// lane loads in one batch (one lane for a 7-point graph's 6 neighbours, four for the 27-point
/// stencil's 26). Each round is a maximum over a row: the result does not depend on it.
fn mis2_round_lanes(nnz: usize, n: usize) -> u32 {
    super::batch_lanes(nnz, n, MIS2_UNROLL)
}

/// Blocks for `n` rows at `lanes` lanes per row.
fn row_blocks(g: &Gpu, n: usize, lanes: u32) -> u32 {
    grid(g, n.saturating_mul(lanes as usize), THREADS as usize)
}

/// Blocks for one thread per item.
fn item_blocks(g: &Gpu, n: usize) -> u32 {
    grid(g, n, THREADS as usize)
}

fn exclusive_scan(g: &Gpu, input: &CudaSlice<u32>, out: &mut CudaSlice<u32>) -> Result<()> {
    prim::scan(
        g,
        input,
        out,
        ScanSpec::exclusive(ScanOp::Plus),
        ScanAlgorithm::default(),
    )
}

/// Element `i` of a device array (synchronises).
fn read_at(g: &Gpu, s: &CudaSlice<u32>, i: usize) -> Result<u32> {
    Ok(g.download(&s.slice(i..i + 1))?[0])
}

/// `n` elements that the caller's kernels write entirely, or one zero when `n` is 0 (the dummy
/// element of an empty array, as [`DeviceCsr`] keeps).
fn output<T: GpuScalar>(g: &Gpu, n: usize) -> Result<CudaSlice<T>> {
    if n == 0 {
        g.zeros::<T>(1)
    } else {
        // SAFETY: every caller fills all n elements with its fill kernel before reading them.
        unsafe { g.alloc::<T>(n) }
    }
}

fn output_u32(g: &Gpu, n: usize) -> Result<CudaSlice<u32>> {
    if n == 0 {
        g.zeros::<u32>(1)
    } else {
        // SAFETY: as in `output`.
        unsafe { g.alloc::<u32>(n) }
    }
}

/// An `n × n` matrix without entries.
fn empty_csr<T: GpuScalar>(g: &Gpu, m: usize, n: usize) -> Result<DeviceCsr<T>> {
    Ok(DeviceCsr {
        nrows: m,
        ncols: n,
        nnz: 0,
        row_ptr: g.zeros::<u32>(m + 1)?,
        col: g.zeros::<u32>(1)?,
        val: g.zeros::<T>(1)?,
    })
}

/// Symmetric strength of connection on the GPU: the same matrix as
/// [`crate::sparse::strength_symmetric`] (strong off-diagonal entries `a_ij` with
/// `|a_ij| ≥ θ·sqrt(|a_ii|·|a_jj|)`, explicit zeros dropped, canonical, no diagonal), bit for
/// bit.
///
/// # Errors
/// [`Error::InvalidInput`] when `A` is not square, `θ` is not in `[0, 1]`, or a row of `A` is not
/// canonical (naming the row); CUDA errors with their context.
pub fn strength_symmetric<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
    theta: f64,
) -> Result<DeviceCsr<T>> {
    strength_symmetric_with(gpu, a.into(), theta, true)
}

/// [`strength_symmetric`], the canonical check skipped when `check` is false (the input comes
/// from a check already made or from the crate's own kernels).
pub(crate) fn strength_symmetric_with<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: CsrView<'_, T>,
    theta: f64,
    check: bool,
) -> Result<DeviceCsr<T>> {
    if a.nrows != a.ncols {
        return Err(Error::InvalidInput(format!(
            "strength of connection: the matrix is {}×{}, not square",
            a.nrows, a.ncols
        )));
    }
    if !(0.0..=1.0).contains(&theta) {
        return Err(Error::InvalidInput(format!(
            "strength of connection: theta = {theta} is not in [0, 1]"
        )));
    }
    check_u32(a.nrows, a.ncols, a.nnz, "GPU strength of connection")?;
    if check {
        check_canonical(gpu, &a, "GPU strength of connection")?;
    }
    let n = a.nrows;
    if n == 0 || a.nnz == 0 {
        return empty_csr(gpu, n, n);
    }
    let counted = count_selected(gpu, a, theta, false)?;
    Ok(fill_selected(gpu, a, theta, false, counted)?.0)
}

/// `A` without its small off-diagonal entries on the GPU: the same matrix and positions as
/// [`crate::sparse::drop_small`] (`a_ij`, `j ≠ i`, dropped when `|a_ij| < tol·sqrt(|a_ii|·|a_jj|)`),
/// bit for bit; `None` when nothing is dropped (and for `tol = 0`). The second array holds each
/// kept entry's position in `A`'s arrays.
///
/// # Errors
/// [`Error::InvalidInput`] when `A` is not square, `tol` is negative or not finite, or a row of
/// `A` is not canonical (naming the row); CUDA errors with their context.
pub fn drop_small<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
    tol: f64,
) -> Result<Option<(DeviceCsr<T>, CudaSlice<u32>)>> {
    drop_small_with(gpu, a.into(), tol, true)
}

/// [`drop_small`], the canonical check skipped when `check` is false.
pub(crate) fn drop_small_with<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: CsrView<'_, T>,
    tol: f64,
    check: bool,
) -> Result<Option<(DeviceCsr<T>, CudaSlice<u32>)>> {
    if a.nrows != a.ncols {
        return Err(Error::InvalidInput(format!(
            "dropping small entries: the matrix is {}×{}, not square",
            a.nrows, a.ncols
        )));
    }
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(Error::InvalidInput(format!(
            "dropping small entries: tol = {tol} is not a finite non-negative number"
        )));
    }
    check_u32(a.nrows, a.ncols, a.nnz, "GPU dropping of small entries")?;
    if check {
        check_canonical(gpu, &a, "GPU dropping of small entries")?;
    }
    if tol == 0.0 || a.nrows == 0 || a.nnz == 0 {
        return Ok(None);
    }
    let counted = count_selected(gpu, a, tol, true)?;
    if counted.nnz == a.nnz {
        return Ok(None);
    }
    let (m, pos) = fill_selected(gpu, a, tol, true, counted)?;
    Ok(pos.map(|p| (m, p)))
}

/// The first pass of [`strength_symmetric`] and [`drop_small`]: `|a_ii|`, and the row pointer
/// of the entries kept.
struct Counted {
    d: CudaSlice<f64>,
    row_ptr: CudaSlice<u32>,
    nnz: usize,
    lanes: u32,
}

/// Counts, per row, the entries of `a` that strength of connection keeps (`dropping` false: the
/// strong off-diagonal ones at threshold `theta`) or that dropping small entries keeps (`dropping`
/// true: the diagonal and the off-diagonal ones at threshold `theta`), and scans the counts.
/// `a` has rows and entries.
fn count_selected<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    theta: f64,
    dropping: bool,
) -> Result<Counted> {
    let n = a.nrows;
    let n32 = n as u32;
    let mut d = output::<f64>(g, n)?;
    let k = g.typed_function::<T>(&AGGREGATE_SRC, "agg_abs_diag", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a.row_ptr)
        .arg(a.col)
        .arg(a.val)
        .arg(&n32)
        .arg(&mut d);
    // SAFETY: agg_abs_diag_T(rp, col, const T* val, u32 n, double* d): rows canonical with n+1
    // pointers, col/val nnz, d n entries (all written).
    unsafe { lb.launch(Gpu::cfg(item_blocks(g, n), THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_abs_diag", e))?;
    let lanes = lanes(a.nnz, n);
    let blocks = row_blocks(g, n, lanes);
    let mut counts = g.zeros::<u32>(n + 1)?;
    let what = if dropping { "drop" } else { "strength" };
    let name = format!("agg_{what}_count_g{lanes}");
    let k = g.typed_function::<T>(&AGGREGATE_SRC, &name, &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a.row_ptr)
        .arg(a.col)
        .arg(a.val)
        .arg(&n32)
        .arg(&d)
        .arg(&theta)
        .arg(&mut counts);
    // SAFETY: agg_{strength,drop}_count_gG_T(rp, col, val, u32 n, const double* d, double
    // theta, u32* counts): d n entries (columns < n), counts n+1 (the last stays 0 for the
    // scan).
    unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }.map_err(|e| Gpu::launch_error(&name, e))?;
    let mut row_ptr = g.zeros::<u32>(n + 1)?;
    exclusive_scan(g, &counts, &mut row_ptr)?;
    drop(counts);
    let nnz = read_at(g, &row_ptr, n)? as usize;
    Ok(Counted {
        d,
        row_ptr,
        nnz,
        lanes,
    })
}

/// The second pass: the kept entries of `a` (the same predicate as [`count_selected`]) and,
/// with `dropping`, their positions in `a`.
fn fill_selected<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    theta: f64,
    dropping: bool,
    counted: Counted,
) -> Result<(DeviceCsr<T>, Option<CudaSlice<u32>>)> {
    let Counted {
        d,
        row_ptr,
        nnz,
        lanes,
    } = counted;
    let n = a.nrows;
    let n32 = n as u32;
    let blocks = row_blocks(g, n, lanes);
    let mut col = output_u32(g, nnz)?;
    let mut val = output::<T>(g, nnz)?;
    let mut pos = if dropping {
        Some(output_u32(g, nnz)?)
    } else {
        None
    };
    if nnz > 0 {
        let what = if dropping { "drop" } else { "strength" };
        let name = format!("agg_{what}_fill_g{lanes}");
        let k = g.typed_function::<T>(&AGGREGATE_SRC, &name, &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(a.row_ptr)
            .arg(a.col)
            .arg(a.val)
            .arg(&n32)
            .arg(&d)
            .arg(&theta)
            .arg(&row_ptr)
            .arg(&mut col)
            .arg(&mut val);
        if let Some(p) = pos.as_mut() {
            lb.arg(p);
        }
        // SAFETY: agg_{strength,drop}_fill_gG_T(rp, col, val, n, d, theta, const u32* srp,
        // u32* scol, T* sval[, u32* spos]): srp the scan of the count kernel's counts (same
        // predicate), so each row's kept entries land in srp[i]..srp[i+1] < nnz; scol, sval
        // and spos nnz entries.
        unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map_err(|e| Gpu::launch_error(&name, e))?;
    }
    Ok((
        DeviceCsr {
            nrows: n,
            ncols: n,
            nnz,
            row_ptr,
            col,
            val,
        },
        pos,
    ))
}

/// The node graph of a matrix with `block` unknowns per node on the GPU: the same matrix as
/// [`crate::sparse::amalgamate`] (entry `(I, J)` = `sqrt(Σ a_ij²)` over the block, summed in
/// the same order), bit for bit.
///
/// # Errors
/// [`Error::InvalidInput`] when `block` is 0 or does not divide the rows and columns, or a row
/// is not canonical (naming the row); CUDA errors with their context.
pub fn amalgamate<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: impl Into<CsrView<'a, T>>,
    block: usize,
) -> Result<DeviceCsr<T>> {
    amalgamate_with(gpu, a.into(), block, true)
}

/// [`amalgamate`], the canonical check skipped when `check` is false.
pub(crate) fn amalgamate_with<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: CsrView<'_, T>,
    block: usize,
    check: bool,
) -> Result<DeviceCsr<T>> {
    let (m, n) = (a.nrows, a.ncols);
    if block == 0 || m % block != 0 || n % block != 0 {
        return Err(Error::InvalidInput(format!(
            "amalgamate: the matrix is {m}×{n}, not a multiple of the block size {block}"
        )));
    }
    check_u32(m, n, a.nnz, "GPU amalgamate")?;
    if check {
        check_canonical(gpu, &a, "GPU amalgamate")?;
    }
    let g = gpu;
    let nodes = m / block;
    if nodes == 0 || a.nnz == 0 {
        return empty_csr(g, nodes, n / block);
    }
    let (nodes32, b32) = (nodes as u32, block as u32);
    let blocks = item_blocks(g, nodes);
    let mut counts = g.zeros::<u32>(nodes + 1)?;
    let k = g.function(&AGGREGATE_SRC, "agg_amalgamate_count", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a.row_ptr)
        .arg(a.col)
        .arg(&nodes32)
        .arg(&b32)
        .arg(&mut counts);
    // SAFETY: agg_amalgamate_count(rp, col, u32 nodes, u32 block, u32* counts): rows
    // 0..nodes·block = m exist (m+1 pointers), counts nodes+1.
    unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_amalgamate_count", e))?;
    let mut row_ptr = g.zeros::<u32>(nodes + 1)?;
    exclusive_scan(g, &counts, &mut row_ptr)?;
    drop(counts);
    let nnz = read_at(g, &row_ptr, nodes)? as usize;
    let mut col = output_u32(g, nnz)?;
    let mut val = output::<T>(g, nnz)?;
    let k = g.typed_function::<T>(&AGGREGATE_SRC, "agg_amalgamate_fill", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(a.row_ptr)
        .arg(a.col)
        .arg(a.val)
        .arg(&nodes32)
        .arg(&b32)
        .arg(&row_ptr)
        .arg(&mut col)
        .arg(&mut val);
    // SAFETY: agg_amalgamate_fill_T(rp, col, val, nodes, block, const u32* orp, u32* ocol,
    // T* oval): orp the scan of the count kernel's counts (same block-column walk), ocol/oval
    // nnz entries.
    unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_amalgamate_fill", e))?;
    Ok(DeviceCsr {
        nrows: nodes,
        ncols: n / block,
        nnz,
        row_ptr,
        col,
        val,
    })
}

/// An aggregation on the device, the result of [`aggregate_mis2`].
pub struct GpuAggregation {
    /// Nodes.
    pub n: usize,
    /// Aggregates (the coarse level's nodes).
    pub num_aggregates: usize,
    /// The aggregate of each node, or [`NOT_AGGREGATED`](crate::sparse::NOT_AGGREGATED) (`max(n, 1)` entries).
    pub agg: CudaSlice<u32>,
    /// The root node of each aggregate, in increasing node order (`max(num_aggregates, 1)`).
    pub roots: CudaSlice<u32>,
    /// Where each aggregate's nodes start in `members` (`num_aggregates + 1` entries; the last
    /// is the number of aggregated nodes).
    pub agg_ptr: CudaSlice<u32>,
    /// The nodes grouped by aggregate (`agg_ptr[a]..agg_ptr[a + 1]`), in increasing node order
    /// within each; after them, from `agg_ptr[num_aggregates]`, the unaggregated nodes in
    /// increasing order (`max(n, 1)` entries in all).
    pub members: CudaSlice<u32>,
    /// MIS-2 rounds taken (the same as [`crate::sparse::aggregate_mis2_counted`]'s).
    pub rounds: usize,
}

impl std::fmt::Debug for GpuAggregation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuAggregation({} nodes, {} aggregates, {} rounds)",
            self.n, self.num_aggregates, self.rounds
        )
    }
}

impl GpuAggregation {
    /// The aggregation on the host (`agg` and `roots`; what [`crate::sparse::aggregate_mis2`]
    /// returns).
    ///
    /// # Errors
    /// A failed copy.
    pub fn download(&self, gpu: &Gpu) -> Result<Aggregation> {
        let mut agg = gpu.download(&self.agg)?;
        let mut roots = gpu.download(&self.roots)?;
        agg.truncate(self.n);
        roots.truncate(self.num_aggregates);
        Ok(Aggregation { agg, roots })
    }
}

/// The symmetrised graph of `s` without the diagonal (see the module docs): `(gptr, gcol, nnz)`.
fn symmetric_graph<T: GpuScalar>(
    g: &Arc<Gpu>,
    s: &CsrView<'_, T>,
) -> Result<(CudaSlice<u32>, CudaSlice<u32>, usize)> {
    let n = s.nrows;
    let n32 = n as u32;
    let lanes = lanes(s.nnz, n);
    let blocks = row_blocks(g, n, lanes);
    let mut deg = g.zeros::<u32>(n + 1)?;
    let mut miss = g.zeros::<u32>(n + 1)?;
    if s.nnz > 0 {
        let name = format!("agg_graph_count_g{lanes}");
        let k = g.function(&AGGREGATE_SRC, &name, &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(s.row_ptr)
            .arg(s.col)
            .arg(&n32)
            .arg(&mut deg)
            .arg(&mut miss);
        // SAFETY: agg_graph_count_gG(rp, col, u32 n, u32* own, u32* miss): S square and
        // canonical (columns < n, binary-searchable rows), own/miss n+1.
        unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map_err(|e| Gpu::launch_error(&name, e))?;
    }
    let mut moff = g.zeros::<u32>(n + 1)?;
    exclusive_scan(g, &miss, &mut moff)?;
    drop(miss);
    let missing = read_at(g, &moff, n)? as usize;
    // The graph holds at most nnz(S) + missing entries: keep its scan within u32.
    check_u32(n, n, s.nnz + missing, "GPU aggregation graph")?;
    let (eptr, ekeys, has_extra) = if missing > 0 {
        // SAFETY: agg_graph_missing writes every one of the `missing` keys (moff's scan).
        let mut keys = unsafe { g.alloc::<u64>(missing)? };
        let name = format!("agg_graph_missing_g{lanes}");
        let k = g.function(&AGGREGATE_SRC, &name, &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(s.row_ptr)
            .arg(s.col)
            .arg(&n32)
            .arg(&moff)
            .arg(&mut keys);
        // SAFETY: agg_graph_missing_gG(rp, col, n, const u32* moff, u64* keys): moff the scan of
        // the count kernel's miss counts (same test), keys `missing` entries.
        unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map_err(|e| Gpu::launch_error(&name, e))?;
        crate::primitives::sort::gpu::radix_sort(g, &mut keys)?;
        let mut ecnt = g.zeros::<u32>(n + 1)?;
        let k = g.function(&AGGREGATE_SRC, "agg_extra_counts", &[])?;
        let m32 = missing as u32;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(&keys).arg(&m32).arg(&mut deg).arg(&mut ecnt);
        // SAFETY: agg_extra_counts(const u64* keys, u32 m, u32* deg, u32* ecnt): keys m entries
        // whose high words are rows < n; deg and ecnt n+1.
        unsafe { lb.launch(Gpu::cfg(item_blocks(g, missing), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("agg_extra_counts", e))?;
        let mut eptr = g.zeros::<u32>(n + 1)?;
        exclusive_scan(g, &ecnt, &mut eptr)?;
        (eptr, keys, 1u32)
    } else {
        (g.zeros::<u32>(1)?, g.zeros::<u64>(1)?, 0u32)
    };
    drop(moff);
    let mut gptr = g.zeros::<u32>(n + 1)?;
    exclusive_scan(g, &deg, &mut gptr)?;
    drop(deg);
    let gnnz = read_at(g, &gptr, n)? as usize;
    let mut gcol = output_u32(g, gnnz)?;
    if gnnz > 0 {
        let name = format!("agg_graph_fill_g{lanes}");
        let k = g.function(&AGGREGATE_SRC, &name, &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(s.row_ptr)
            .arg(s.col)
            .arg(&n32)
            .arg(&eptr)
            .arg(&ekeys)
            .arg(&has_extra)
            .arg(&gptr)
            .arg(&mut gcol);
        // SAFETY: agg_graph_fill_gG(rp, col, n, const u32* eptr, const u64* ekeys, u32
        // has_extra, const u32* gptr, u32* gcol): eptr n+1 and ekeys sorted (read only when
        // has_extra); gptr the scan of own + extra counts, so every row's merge fills exactly
        // gptr[i]..gptr[i+1] < gnnz.
        unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map_err(|e| Gpu::launch_error(&name, e))?;
    }
    Ok((gptr, gcol, gnnz))
}

/// MIS-2 aggregation on the GPU: the same aggregation as [`crate::sparse::aggregate_mis2`]
/// (same `agg`, same `roots`, same number of rounds) for a canonical `s`, kept on the device with
/// each aggregate's members ([`GpuAggregation`]).
///
/// # Errors
/// [`Error::InvalidInput`] when `s` is not square or a row is not canonical (naming the row);
/// [`Error::OutOfMemory`] from the preflight; CUDA errors with their context.
pub fn aggregate_mis2<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    s: impl Into<CsrView<'a, T>>,
    seed: u64,
) -> Result<GpuAggregation> {
    aggregate_mis2_with(gpu, s.into(), seed, 0, true)
}

/// [`aggregate_mis2`] with priorities ordered inside windows of `2^window` nodes: the same
/// aggregation as [`crate::sparse::aggregate_mis2_ordered`].
///
/// # Errors
/// As [`aggregate_mis2`].
pub fn aggregate_mis2_ordered<'a, T: GpuScalar>(
    gpu: &Arc<Gpu>,
    s: impl Into<CsrView<'a, T>>,
    seed: u64,
    window: u32,
) -> Result<GpuAggregation> {
    aggregate_mis2_with(gpu, s.into(), seed, window, true)
}

/// [`aggregate_mis2_ordered`], the canonical check skipped when `check` is false.
pub(crate) fn aggregate_mis2_with<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    s: CsrView<'_, T>,
    seed: u64,
    window: u32,
    check: bool,
) -> Result<GpuAggregation> {
    if s.nrows != s.ncols {
        return Err(Error::InvalidInput(format!(
            "GPU MIS-2 aggregation: S is {}×{}, not square",
            s.nrows, s.ncols
        )));
    }
    check_u32(s.nrows, s.ncols, s.nnz, "GPU MIS-2 aggregation")?;
    if check {
        check_canonical(gpu, &s, "GPU MIS-2 aggregation")?;
    }
    let g = gpu;
    let n = s.nrows;
    if n == 0 {
        return Ok(GpuAggregation {
            n: 0,
            num_aggregates: 0,
            agg: g.zeros::<u32>(1)?,
            roots: g.zeros::<u32>(1)?,
            agg_ptr: g.zeros::<u32>(1)?,
            members: g.zeros::<u32>(1)?,
            rounds: 0,
        });
    }
    // Preflight of the peak: the graph (at most 2·nnz(S) columns and its pointers) and the
    // rounds' two key arrays, with the scan and pass arrays beside them.
    let peak = 4 * (2 * s.nnz as u64 + n as u64) + 8 * 2 * n as u64 + 4 * 3 * n as u64;
    g.check_memory("the GPU MIS-2 aggregation's working arrays", peak)?;
    let (gptr, gcol, gnnz) = symmetric_graph(g, &s)?;
    let n32 = n as u32;
    let lanes = lanes(gnnz, n);
    let blocks = row_blocks(g, n, lanes);
    // SAFETY: mis2_init writes all n keys; t1 is written by mis2_t1 before mis2_t2_update
    // reads it.
    let (mut key, mut t1) = unsafe { (g.alloc::<u64>(n)?, g.alloc::<u64>(n)?) };
    // counts[0]: the nodes undecided at the start; counts[r]: after round r of the batch.
    let mut counts = g.zeros::<u32>(MIS2_BATCH_MAX + 1)?;
    let k = g.function(&AGGREGATE_SRC, "mis2_init", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    {
        let mut c0 = counts.slice_mut(0..1);
        lb.arg(&gptr)
            .arg(&n32)
            .arg(&seed)
            .arg(&window)
            .arg(&mut key)
            .arg(&mut c0);
        // SAFETY: mis2_init(const u32* gptr, u32 n, u64 seed, u32 window, u64* key, u32*
        // undecided): gptr n+1, key n, one counter (zeroed).
        unsafe { lb.launch(Gpu::cfg(item_blocks(g, n), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("mis2_init", e))?;
    }
    let round_lanes = mis2_round_lanes(gnnz, n);
    let round_blocks = row_blocks(g, n, round_lanes);
    let t1_name = format!("mis2_t1_g{round_lanes}");
    let t2_name = format!("mis2_t2_update_g{round_lanes}");
    let k1 = g.function(&AGGREGATE_SRC, &t1_name, &[])?;
    let k2 = g.function(&AGGREGATE_SRC, &t2_name, &[])?;
    let mut rounds = 0;
    let mut batch = MIS2_BATCH;
    loop {
        // Each round decides at least one node: more rounds than nodes is a defect.
        if rounds > n {
            return Err(Error::InvalidInput(format!(
                "GPU MIS-2 aggregation: nodes still undecided after {rounds} rounds"
            )));
        }
        for r in 0..batch {
            let (done, mut rest) = counts.split_at_mut(r + 1);
            let prev = done.slice(r..r + 1);
            let mut cur = rest.slice_mut(0..1);
            let mut lb = g.stream().launch_builder(&k1);
            lb.arg(&gptr)
                .arg(&gcol)
                .arg(&n32)
                .arg(&key)
                .arg(&mut t1)
                .arg(&prev);
            // SAFETY: mis2_t1_gG(const u32* gptr, const u32* gcol, u32 n, const u64* key,
            // u64* t1, const u32* prev): the graph's n+1 pointers and gnnz columns (< n), key
            // and t1 n entries, one counter.
            unsafe { lb.launch(Gpu::cfg(round_blocks, THREADS, 0)) }
                .map_err(|e| Gpu::launch_error(&t1_name, e))?;
            let mut lb = g.stream().launch_builder(&k2);
            lb.arg(&gptr)
                .arg(&gcol)
                .arg(&n32)
                .arg(&t1)
                .arg(&mut key)
                .arg(&mut cur)
                .arg(&prev);
            // SAFETY: mis2_t2_update_gG(gptr, gcol, n, const u64* t1, u64* key, u32* undecided,
            // const u32* prev): as above; each node writes only its own key; two distinct
            // counters (the current MIS-2 iteration's, zeroed, and the previous one).
            unsafe { lb.launch(Gpu::cfg(round_blocks, THREADS, 0)) }
                .map_err(|e| Gpu::launch_error(&t2_name, e))?;
        }
        let c = g.download(&counts.slice(0..batch + 1))?;
        if let Some(r) = c.iter().position(|&x| x == 0) {
            rounds += r;
            break;
        }
        rounds += batch;
        // The next batch starts from this one's last count, and is twice as long (up to
        // MIS2_BATCH_MAX): long runs of rounds (ordered priorities) need few reads.
        let last = c[batch];
        counts = g.upload(
            &[last]
                .into_iter()
                .chain([0; MIS2_BATCH_MAX])
                .collect::<Vec<_>>(),
        )?;
        batch = (2 * batch).min(MIS2_BATCH_MAX);
    }
    drop(t1);
    // Roots numbered in node order: exclusive scan of the IN flags.
    let mut flags = g.zeros::<u32>(n + 1)?;
    let k = g.function(&AGGREGATE_SRC, "mis2_in_flags", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&key).arg(&n32).arg(&mut flags);
    // SAFETY: mis2_in_flags(const u64* key, u32 n, u32* flags): key n, flags n+1 (last stays 0).
    unsafe { lb.launch(Gpu::cfg(item_blocks(g, n), THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("mis2_in_flags", e))?;
    let mut rank = g.zeros::<u32>(n + 1)?;
    exclusive_scan(g, &flags, &mut rank)?;
    drop(flags);
    let nagg = read_at(g, &rank, n)? as usize;
    let mut roots = output_u32(g, nagg)?;
    // SAFETY: pass 1 writes all n entries of p1, pass 2 all n of agg.
    let (mut p1, mut agg) = unsafe { (g.alloc::<u32>(n)?, g.alloc::<u32>(n)?) };
    let name = format!("mis2_pass1_g{lanes}");
    let k = g.function(&AGGREGATE_SRC, &name, &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&gptr)
        .arg(&gcol)
        .arg(&n32)
        .arg(&key)
        .arg(&rank)
        .arg(&mut roots)
        .arg(&mut p1);
    // SAFETY: mis2_pass1_gG(gptr, gcol, n, key, const u32* rank, u32* roots, u32* p1): rank
    // n+1 (the IN nodes' ranks are < nagg), roots nagg (each written by its root), p1 n.
    unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }.map_err(|e| Gpu::launch_error(&name, e))?;
    drop(rank);
    let name = format!("mis2_pass2_g{lanes}");
    let k = g.function(&AGGREGATE_SRC, &name, &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&gptr)
        .arg(&gcol)
        .arg(&n32)
        .arg(&key)
        .arg(&p1)
        .arg(&mut agg);
    // SAFETY: mis2_pass2_gG(gptr, gcol, n, key, const u32* p1, u32* agg): p1 and agg n.
    unsafe { lb.launch(Gpu::cfg(blocks, THREADS, 0)) }.map_err(|e| Gpu::launch_error(&name, e))?;
    drop((p1, key, gptr, gcol));
    // Members: (agg, node) pairs, stably sorted by agg.
    let mut sorted = g
        .stream()
        .clone_dtod(&agg)
        .map_err(|e| Error::cuda("copying the aggregation", e))?;
    // SAFETY: agg_iota writes all n entries.
    let mut members = unsafe { g.alloc::<u32>(n)? };
    let k = g.function(&AGGREGATE_SRC, "agg_iota", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&n32).arg(&mut members);
    // SAFETY: agg_iota(u32 n, u32* out): out n entries.
    unsafe { lb.launch(Gpu::cfg(item_blocks(g, n), THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_iota", e))?;
    crate::primitives::sort::gpu::radix_sort_pairs(g, &mut sorted, &mut members)?;
    let mut agg_ptr = g.zeros::<u32>(nagg + 1)?;
    let nagg32 = nagg as u32;
    let k = g.function(&AGGREGATE_SRC, "agg_boundaries", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&sorted).arg(&n32).arg(&nagg32).arg(&mut agg_ptr);
    // SAFETY: agg_boundaries(const u32* sorted, u32 n, u32 nagg, u32* agg_ptr): sorted n
    // aggregate numbers (< nagg, or NOT_AGGREGATED last), agg_ptr nagg+1.
    unsafe { lb.launch(Gpu::cfg(item_blocks(g, n), THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_boundaries", e))?;
    Ok(GpuAggregation {
        n,
        num_aggregates: nagg,
        agg,
        roots,
        agg_ptr,
        members,
        rounds,
    })
}

/// The row pointer of a tentative prolongator with `k` entries in every row of an aggregated
/// unknown (`agg.n · block` rows), and its entry count (read back: one synchronisation).
fn tentative_rows(
    g: &Arc<Gpu>,
    agg: &GpuAggregation,
    block: usize,
    k: usize,
) -> Result<(CudaSlice<u32>, usize)> {
    let unknowns = agg.n * block;
    let (u32n, b32, k32) = (unknowns as u32, block as u32, k as u32);
    let mut flags = g.zeros::<u32>(unknowns + 1)?;
    let f = g.function(&AGGREGATE_SRC, "agg_tent_flags", &[])?;
    let mut lb = g.stream().launch_builder(&f);
    lb.arg(&agg.agg)
        .arg(&u32n)
        .arg(&b32)
        .arg(&k32)
        .arg(&mut flags);
    // SAFETY: agg_tent_flags(const u32* agg, u32 unknowns, u32 block, u32 k, u32* flags): agg
    // n = unknowns / block entries, flags unknowns+1 (last stays 0).
    unsafe { lb.launch(Gpu::cfg(item_blocks(g, unknowns), THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_tent_flags", e))?;
    let mut row_ptr = g.zeros::<u32>(unknowns + 1)?;
    exclusive_scan(g, &flags, &mut row_ptr)?;
    drop(flags);
    let nnz = read_at(g, &row_ptr, unknowns)? as usize;
    Ok((row_ptr, nnz))
}

/// Threads per block of the per-aggregate QR: a few thousand aggregates on the coarse levels,
/// so small blocks spread them over every multiprocessor.
const QR_THREADS: u32 = 64;

/// The tentative prolongator of `k = b.len()` candidates with `block` unknowns per node, on the
/// device: for each aggregate the candidates' rows on its unknowns `B_a` are factored `B_a = Q R`
/// by modified Gram–Schmidt, `Q` is the aggregate's block of `T` (`n·block × num_aggregates·k`,
/// columns `a·k .. a·k + k`) and `R` its block of the coarse candidates: `bc[j][a·k + c] =
/// R[c][j]`. Bit for bit what the AMG's `fit_candidates` computes on the CPU (one thread per
/// aggregate, every sum in `f64` sequentially over the aggregate's unknowns in increasing order,
/// no fused multiply-adds; a column that collapses to 1e-10 of its norm becomes zero). Rows of
/// unaggregated unknowns are empty. Each returned candidate has `max(num_aggregates·k, 1)`
/// entries.
///
/// # Panics
/// When `block` is 0, `b` is empty, or a candidate's length is not `agg.n · block`.
///
/// # Errors
/// CUDA errors with their context; a size beyond the 32-bit index range.
pub fn tentative_qr<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    agg: &GpuAggregation,
    block: usize,
    b: &[CudaSlice<T>],
) -> Result<(DeviceCsr<T>, Vec<CudaSlice<T>>)> {
    assert!(block > 0, "tentative_qr: block size 0");
    assert!(!b.is_empty(), "tentative_qr: no candidate");
    let g = gpu;
    let k = b.len();
    let unknowns = agg.n * block;
    for (c, v) in b.iter().enumerate() {
        assert!(
            v.len() == unknowns || (unknowns == 0 && v.len() <= 1),
            "tentative_qr: candidate {c} has length {} vs {} nodes × block {block}",
            v.len(),
            agg.n
        );
    }
    let nagg = agg.num_aggregates;
    let nc = nagg * k;
    let wide = unknowns.saturating_mul(k);
    check_u32(wide, nc, wide, "GPU tentative prolongator")?;
    let mut packed_bc = g.zeros::<T>((k * nc).max(1))?;
    if unknowns == 0 || nagg == 0 {
        let t = if unknowns == 0 {
            empty_csr(g, 0, nc)?
        } else {
            let (row_ptr, _) = tentative_rows(g, agg, block, k)?;
            DeviceCsr {
                nrows: unknowns,
                ncols: nc,
                nnz: 0,
                row_ptr,
                col: g.zeros::<u32>(1)?,
                val: g.zeros::<T>(1)?,
            }
        };
        drop(packed_bc);
        let bc = (0..k)
            .map(|_| g.zeros::<T>(nc.max(1)))
            .collect::<Result<_>>()?;
        return Ok((t, bc));
    }
    let (row_ptr, nnz) = tentative_rows(g, agg, block, k)?;
    let mut col = output_u32(g, nnz)?;
    let mut val = output::<T>(g, nnz)?;
    let mut q = output::<f64>(g, nnz)?;
    // The candidates side by side: candidate c at c·unknowns.
    let mut packed = output::<T>(g, wide)?;
    for (c, v) in b.iter().enumerate() {
        g.stream()
            .memcpy_dtod(
                &v.slice(..unknowns),
                &mut packed.slice_mut(c * unknowns..(c + 1) * unknowns),
            )
            .map_err(|e| Error::cuda("memcpy_dtod", e))?;
    }
    let f = g.typed_function::<T>(&AGGREGATE_SRC, "agg_tent_qr", &[])?;
    let (nagg32, b32, k32, u32n) = (nagg as u32, block as u32, k as u32, unknowns as u32);
    let mut lb = g.stream().launch_builder(&f);
    lb.arg(&agg.agg_ptr)
        .arg(&agg.members)
        .arg(&nagg32)
        .arg(&b32)
        .arg(&k32)
        .arg(&packed)
        .arg(&u32n)
        .arg(&row_ptr)
        .arg(&mut col)
        .arg(&mut q)
        .arg(&mut val)
        .arg(&mut packed_bc);
    // SAFETY: agg_tent_qr_T(const u32* agg_ptr, const u32* members, u32 nagg, u32 block, u32 k,
    // const T* b, u32 unknowns, const u32* trp, u32* tcol, double* q, T* tval, T* bc): agg_ptr
    // nagg+1 into members (nodes < n), b k·unknowns (candidate c at c·unknowns), trp the scan of
    // k per aggregated unknown (each aggregated unknown's k slots < nnz, written only by its
    // aggregate's thread), tcol/q/tval nnz, bc k·nagg·k (each aggregate writes its own k·k).
    unsafe { lb.launch(Gpu::cfg(grid(g, nagg, QR_THREADS as usize), QR_THREADS, 0)) }
        .map_err(|e| Gpu::launch_error("agg_tent_qr", e))?;
    drop((q, packed));
    let mut bc = Vec::with_capacity(k);
    for j in 0..k {
        let mut v = output::<T>(g, nc)?;
        g.stream()
            .memcpy_dtod(
                &packed_bc.slice(j * nc..(j + 1) * nc),
                &mut v.slice_mut(..nc),
            )
            .map_err(|e| Error::cuda("memcpy_dtod", e))?;
        bc.push(v);
    }
    Ok((
        DeviceCsr {
            nrows: unknowns,
            ncols: nc,
            nnz,
            row_ptr,
            col,
            val,
        },
        bc,
    ))
}

/// The tentative prolongator of ONE candidate `b` (k = 1) with `block` unknowns per node:
/// `T[i, agg[i / block]] = b_i / ‖b_a‖`, where `‖b_a‖` is the norm of `b` restricted to the
/// aggregate's unknowns, and the coarse candidate `bc[a] = ‖b_a‖`; bit for bit what the AMG's
/// `fit_candidates` computes on the CPU for one candidate (the squares summed in `f64` over the
/// aggregate's unknowns in increasing order, sequentially; a norm that is zero or not finite
/// gives a zero column and `bc[a] = 0`). Rows of unaggregated unknowns are empty. `T` is
/// `n·block × num_aggregates`; `bc` has `max(num_aggregates, 1)` entries.
///
/// # Panics
/// When `block` is 0 or `b`'s length is not `agg.n · block`.
///
/// # Errors
/// CUDA errors with their context; a size beyond the 32-bit index range.
pub fn tentative_single<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    agg: &GpuAggregation,
    block: usize,
    b: &CudaSlice<T>,
) -> Result<(DeviceCsr<T>, CudaSlice<T>)> {
    assert!(block > 0, "tentative_single: block size 0");
    let unknowns = agg.n * block;
    assert!(
        b.len() == unknowns || (unknowns == 0 && b.len() <= 1),
        "tentative_single: candidate length {} vs {} nodes × block {block}",
        b.len(),
        agg.n
    );
    let g = gpu;
    let nagg = agg.num_aggregates;
    check_u32(unknowns, nagg, unknowns, "GPU tentative prolongator")?;
    let mut bc = g.zeros::<T>(nagg.max(1))?;
    if unknowns == 0 {
        return Ok((empty_csr(g, 0, nagg)?, bc));
    }
    let b32 = block as u32;
    let (row_ptr, nnz) = tentative_rows(g, agg, block, 1)?;
    let mut col = output_u32(g, nnz)?;
    let mut val = output::<T>(g, nnz)?;
    if nagg > 0 {
        let k = g.typed_function::<T>(&AGGREGATE_SRC, "agg_tent_fit", &[])?;
        let nagg32 = nagg as u32;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(&agg.agg_ptr)
            .arg(&agg.members)
            .arg(&nagg32)
            .arg(&b32)
            .arg(b)
            .arg(&row_ptr)
            .arg(&mut col)
            .arg(&mut val)
            .arg(&mut bc);
        // SAFETY: agg_tent_fit_T(const u32* agg_ptr, const u32* members, u32 nagg, u32 block,
        // const T* b, const u32* trp, u32* tcol, T* tval, T* bc): agg_ptr nagg+1 into members
        // (nodes < n), b n·block, trp the scan of the aggregated-unknown flags (each aggregated
        // unknown's slot < nnz, written once by its aggregate's thread), bc nagg.
        unsafe { lb.launch(Gpu::cfg(item_blocks(g, nagg), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("agg_tent_fit", e))?;
    }
    Ok((
        DeviceCsr {
            nrows: unknowns,
            ncols: nagg,
            nnz,
            row_ptr,
            col,
            val,
        },
        bc,
    ))
}
