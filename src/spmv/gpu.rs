//! GPU sparse matrix–vector products `y ← α·A·x + β·y` on a device-resident CSR matrix.
//!
//! [`GpuCsr`] uploads a [`CsrMatrix`] once and computes, on the device, everything that depends
//! only on the structure: the packed head flags (one bit per nonzero, set at each row start —
//! the segment representation of Sengupta, Harris, Zhang and Owens, *Scan Primitives for GPU
//! Computing*, 2007, §2.2), the number of row starts before each tile, where the row carried into
//! each tile starts, the map from non-empty row to row when empty rows exist, and the
//! [`SpmvAlgorithm`] that `Auto` resolves to (from row statistics computed on the host). That
//! costs about 0.07–0.09 ms of device time per upload for 10–60 M nonzeros (a few small kernels
//! and two scans; [`GpuCsr::preprocess_seconds`]) and 1.2–1.7% of the CSR arrays' device memory
//! ([`GpuCsr::extra_device_bytes`]; plus 4 bytes per non-empty row when empty rows exist). The
//! paper's product workspace (two arrays of nnz values) is allocated on its first use only. A
//! multiply then allocates nothing and never waits for the host.
//!
//! # Algorithms
//!
//! - [`SpmvAlgorithm::Fused`] — the nonzero-balanced segmented reduction, for irregular rows. A
//!   tile of `threads × items` consecutive entries per block, loaded warp-striped (whole sectors
//!   per load instruction: loading each thread's entries as 16-byte vectors split every sector
//!   between two instructions and read a third more from DRAM), products parked in shared
//!   memory (so that 6 blocks per SM fit in `f64`, 8 in `f32`), a block scan of (row starts, boundary, tail sum) triples with warp shuffles; rows inside a tile are
//!   written directly, and a tile never waits for another: it writes the partial sums of its
//!   first and last (tile-crossing) rows to a small per-tile array, and a fix-up kernel (one
//!   warp per tile) adds them in tile order. Two launches, no product array, the same work per
//!   tile whatever the row lengths (a row of 10^6 entries spans ~500 tiles), bitwise
//!   reproducible.
//! - [`SpmvAlgorithm::Rows`] — one thread per row with every load of a short row in flight: the
//!   path for stencils (Poisson 2D/3D at 95–99.6% of the copy bandwidth).
//! - [`SpmvAlgorithm::Vector`] — a sub-warp of 2^k lanes per row (CSR-vector), for regular
//!   rows; the shortest path for small L2-resident matrices (one launch).
//! - [`SpmvAlgorithm::FusedLookback`] — the previous fused kernel: the same tiles, with the carry
//!   resolved by a decoupled look-back in one launch. Reproducible when no row is longer than a
//!   tile (then every tile holds a row boundary and the look-back reads its nearest predecessor
//!   only); otherwise a long row's carries may be added in a different order from run to run.
//! - [`SpmvAlgorithm::PaperSegscan`] — the paper's four steps (§4.2): products
//!   `value · x[index]`, head flags at each row start, a backward inclusive segmented sum scan of
//!   the products, and `y = α·product[rowPtr] + β·y` per row. Kept to show where the paper's
//!   formulation stands; it writes and reads the product array, so it moves about twice the
//!   bytes. Its scan primitive carries between tiles with a look-back, so it is not bitwise
//!   reproducible for long rows.
//! - [`SpmvAlgorithm::Auto`] (the default) chooses at upload from the matrix's kind (row-length
//!   statistics, size, `x`-line locality; [`SpmvFeatures`]); see [`GpuCsr::resolved_algorithm`].
//!   [`GpuCsr::tune`] ([`SpmvPlan`]) replaces that choice by a measured one, cached per pattern
//!   fingerprint; the solvers tune before iterating when the solve may make enough products
//!   ([`TUNE_MIN_PRODUCTS`]) or the pattern was tuned before. Every choice is bitwise reproducible run to run.
//!
//! The fused and vector kernels stream the matrix through the caches evict-first
//! (`ld.global.cs`), so that it does not push `x` out of L2: the random `x` gathers of irregular
//! matrices are what bounds them (ncu: L2 throughput 97%, L2 hit rate 42% before).
//!
//! # Performance (`benches/results/history/spmv.md`, cuSPARSE CSR ALG1/ALG2 after
//! `cusparseSpMV_preprocess`, same process)
//!
//! H100, 2026-11-25, held-out instances of 10–69 M entries, `Auto` against
//! the faster cuSPARSE algorithm: power law 0.99–1.02×, a few dense rows among short ones
//! 1.02–1.13×, mostly empty rows 0.97–1.07×, uniform random and short-and-wide rows 1.00–1.04×,
//! Poisson 3D 1.25–1.36×; **misses**: R-MAT 0.92–0.98× and the 27-point stencil in `f64`
//! 0.88×; geo-mean 1.03× (goal 1.2×). The striped loads moved power law `f64` from 0.76–0.87× to
//! 0.99–1.02× (DRAM read 2.16 → 1.61 GB on powerlaw:4000000:2.0, cuSPARSE's figure); in `f32`
//! they cost R-MAT 10–14 % (blocked loads 1.05–1.10×) and gain power law and dense rows 4–13 %.
//! The 40 small corpus matrices (L2-resident): geo-mean 1.66×; raefsky2 in 4.0 µs (2.3×).
//!
//! H200, 2026-11-22/24 (before the striped loads): stencils at 95–99.6% of the copy
//! bandwidth (1.44–1.69×); the paper's four steps 0.3–0.7× of cuSPARSE.
//!
//! # Semantics and precision
//!
//! Empty rows produce `β·y`; `β = 0` never reads `y` (NaN in `y` does not propagate); `x` and
//! `y` must not alias. `f32` sums in `f32` (as cuSPARSE does for `CUDA_R_32F`); the order of the
//! additions differs from the CPU's, so results agree to a tolerance that grows with the row
//! length. `Fused`, `Rows`, `Vector` and `Auto` give the same bits every run (tested on the H200
//! with rows of up to 600,000 entries).
//!
//! # Where it departs from the paper
//!
//! The paper materialises a 32-bit flag per entry and a product per entry and runs three
//! kernels plus a multi-block segmented scan; the fused path keeps one bit per entry, builds it
//! once per matrix, and never writes the products. Column indices are `u32`, like the crate's
//! CSR type.

pub mod complex;
#[cfg(feature = "peers")]
mod cusparse_peer;
pub mod mixed;
mod plan;

pub use plan::{SpmvPlan, TUNE_MIN_PRODUCTS};

mod columns;
pub use columns::{MAX_COLUMNS, SPMV_COLUMNS_SRC};

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::csr::{pattern_fingerprint, CsrMatrix, RowStats};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{CudaView, CudaViewMut, Gpu, PushKernelArg};
use crate::primitives::gpu::{self as prim, HeadFlags};
use crate::primitives::{ScanAlgorithm, ScanOp, ScanSpec};
use crate::scalar::{DeviceElem, Scalar};
use crate::spmv::select::SpmvFeatures;

#[cfg(feature = "peers")]
pub use cusparse_peer::{CusparseAlg, CusparseSpmv};

use cudarc::driver::{CudaFunction, CudaSlice};

pub use crate::backend::GpuScalar;

/// `kernels/spmv/spmv_scan.cuh`: the warp and block scan of (head count, flag, partial sum)
/// triples of the fused SpMV.
pub const SPMV_SCAN: KernelSource =
    kernel_source!("spmv/spmv_scan.cuh", &[&crate::gpu::kernels::COMMON]);

/// The SpMV kernels (`kernels/spmv/spmv.cu`).
pub const SPMV_SRC: KernelSource = kernel_source!(
    "spmv/spmv.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::gpu::kernels::COMPLEX_H,
        &SPMV_SCAN
    ]
);

/// Which GPU SpMV algorithm to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpmvAlgorithm {
    /// Chosen at upload from the row statistics (see [`GpuCsr::resolved_algorithm`]).
    #[default]
    Auto,
    /// Nonzero-balanced segmented reduction: tiles of consecutive nonzeros reduce their rows
    /// independently, and a small fix-up kernel adds the partial sums of the rows that cross
    /// tiles in tile order (deterministic). The path for irregular rows.
    Fused,
    /// The previous fused kernel: one launch, carries between tiles resolved by a decoupled
    /// look-back. Not bitwise reproducible for rows spanning three or more tiles (the look-back
    /// may add a predecessor's inclusive sum or its local sums, depending on timing). Kept for
    /// comparison.
    FusedLookback,
    /// One thread per row, every load of a short row issued at once: the path for short rows
    /// of even length (stencils).
    Rows,
    /// A sub-warp per row; `lanes` is a power of two in 1..=32, or 0 to choose from the mean
    /// row length.
    Vector {
        /// Threads per row (power of two ≤ 32), 0 = automatic.
        lanes: u32,
    },
    /// The paper's four steps: gather-multiply, head flags, backward segmented scan, gather.
    PaperSegscan,
}

impl SpmvAlgorithm {
    /// A short name for tables: `auto`, `fused`, `fused-lookback`, `rows`, `vector`, `vector8`,
    /// `paper-segscan`.
    pub fn name(self) -> String {
        match self {
            SpmvAlgorithm::Auto => "auto".into(),
            SpmvAlgorithm::Fused => "fused".into(),
            SpmvAlgorithm::FusedLookback => "fused-lookback".into(),
            SpmvAlgorithm::Rows => "rows".into(),
            SpmvAlgorithm::Vector { lanes: 0 } => "vector".into(),
            SpmvAlgorithm::Vector { lanes } => format!("vector{lanes}"),
            SpmvAlgorithm::PaperSegscan => "paper-segscan".into(),
        }
    }
}

/// Tuning policy of the SpMV kernels: one table, passed to NVRTC as `-D` defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpmvPolicy {
    /// Threads per block of the fused kernel.
    pub threads: u32,
    /// Consecutive nonzeros per thread of the fused kernel, `f32` (multiple of 4, ≤ 28).
    pub items_f32: u32,
    /// Consecutive nonzeros per thread of the fused kernel, `f64` (multiple of 4, ≤ 28).
    pub items_f64: u32,
    /// Threads per block of the vector kernel.
    pub vector_threads: u32,
    /// Threads per block of the row kernel.
    pub rows_threads: u32,
    /// Blocks per SM the deterministic fused kernel is compiled to fit in `f32`
    /// (`__launch_bounds__`, which caps its registers; 1 = no cap).
    pub min_blocks_f32: u32,
    /// The same in `f64`.
    pub min_blocks_f64: u32,
    /// Stream the matrix through the caches evict-first (see `kernels/spmv/spmv.cu`).
    pub stream: bool,
    /// Cache policy of the fused and vector kernels' `x` gathers (`SPMV_XHINT` in
    /// `kernels/spmv/spmv.cu`; 0 = `__ldg`).
    pub x_hint: u32,
    /// Load the fused kernels' full tiles warp-striped in `f32` (every load instruction reads
    /// whole sectors) and hand the products to their threads through shared memory.
    pub striped_f32: bool,
    /// The same in `f64`.
    pub striped_f64: bool,
    /// Park the fused kernels' products in shared memory across the block scan in `f32`,
    /// instead of holding them in registers.
    pub smem_prod_f32: bool,
    /// The same in `f64`.
    pub smem_prod_f64: bool,
}

impl SpmvPolicy {
    /// The policy for a device of compute capability `cc`.
    ///
    /// 256 threads × 8 items: 2048 nonzeros per tile, which gives raefsky2 (294k entries) 144
    /// tiles, about one per SM of an H100. Full tiles are loaded warp-striped (every load
    /// instruction reads whole 32-byte sectors; the blocked 16-byte loads of each thread's 8
    /// entries touched each sector by halves and, streamed evict-first, had lines fetched from
    /// DRAM twice: 2.16 GB instead of 1.61 GB on powerlaw:4000000:2.0 in f64, H100), and the
    /// products wait out the block scan in shared memory, so that the kernel fits 6 blocks per SM
    /// in `f64` (40 registers) and 8 in `f32` (32), without spills.
    ///
    /// Tuning overrides (environment): `SEGSPARSE_SPMV_ITEMS` (both item counts; `_F32`, `_F64`
    /// one), `SEGSPARSE_SPMV_THREADS` (the fused kernel's threads), `SEGSPARSE_SPMV_ROWS_THREADS`
    /// (the row kernel's), `SEGSPARSE_SPMV_MIN_BLOCKS` (the register cap, both types; `_F32`,
    /// `_F64` one), `SEGSPARSE_SPMV_STREAM=0` (no evict-first streaming), `SEGSPARSE_SPMV_XHINT`
    /// (the cache policy of the `x` gathers), `SEGSPARSE_SPMV_STRIPED` and `SEGSPARSE_SPMV_SMEM_PROD`
    /// (0 or 1, both types; `_F32`, `_F64` one).
    pub fn for_device(cc: (i32, i32)) -> Self {
        let env_u32 = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u32>().ok());
        let threads = env_u32("SEGSPARSE_SPMV_THREADS")
            .filter(|&t| t % 32 == 0 && (64..=1024).contains(&t))
            .unwrap_or(256);
        // A setting for both types, then one per type.
        let per_type = |name: &str, default: u32, ok: &dyn Fn(u32) -> bool| {
            let both = env_u32(name).filter(|v| ok(*v)).unwrap_or(default);
            let one = |suffix: &str| env_u32(&format!("{name}_{suffix}")).filter(|v| ok(*v));
            (one("F32").unwrap_or(both), one("F64").unwrap_or(both))
        };
        let items = &|i: u32| i % 4 == 0 && (4..=28).contains(&i);
        let (items_f32, items_f64) = per_type("SEGSPARSE_SPMV_ITEMS", 8, items);
        let flag = &|v: u32| v <= 1;
        let (striped_f32, striped_f64) = per_type("SEGSPARSE_SPMV_STRIPED", 1, flag);
        let (smem_prod_f32, smem_prod_f64) = per_type("SEGSPARSE_SPMV_SMEM_PROD", 1, flag);
        // 2048 threads per SM in f32 (32 registers), 1536 in f64 (40), or as many as the SM
        // holds.
        let blocks = &|v: u32| (1..=16).contains(&v);
        let (mb32, mb64) = per_type("SEGSPARSE_SPMV_MIN_BLOCKS", 0, blocks);
        let most = max_threads_per_sm(cc);
        let mb = |set: u32, resident: u32| {
            if set > 0 {
                set
            } else {
                (resident.min(most) / threads).max(1)
            }
        };
        SpmvPolicy {
            threads,
            items_f32,
            items_f64,
            vector_threads: 256,
            rows_threads: env_u32("SEGSPARSE_SPMV_ROWS_THREADS")
                .filter(|&t| t % 32 == 0 && (32..=1024).contains(&t))
                .unwrap_or(128),
            min_blocks_f32: mb(mb32, 2048),
            min_blocks_f64: mb(mb64, 1536),
            stream: env_u32("SEGSPARSE_SPMV_STREAM").is_none_or(|v| v != 0),
            x_hint: env_u32("SEGSPARSE_SPMV_XHINT")
                .filter(|v| *v <= 5)
                .unwrap_or(0),
            striped_f32: striped_f32 != 0,
            striped_f64: striped_f64 != 0,
            smem_prod_f32: smem_prod_f32 != 0,
            smem_prod_f64: smem_prod_f64 != 0,
        }
    }

    /// The `-D` defines of this policy.
    pub fn defines(&self) -> Vec<(&'static str, String)> {
        let b = |v: bool| (v as u32).to_string();
        vec![
            ("SPMV_THREADS", self.threads.to_string()),
            ("SPMV_ITEMS_F32", self.items_f32.to_string()),
            ("SPMV_ITEMS_F64", self.items_f64.to_string()),
            ("SPMV_VECTOR_THREADS", self.vector_threads.to_string()),
            ("SPMV_ROWS_THREADS", self.rows_threads.to_string()),
            ("SPMV_MIN_BLOCKS_F32", self.min_blocks_f32.to_string()),
            ("SPMV_MIN_BLOCKS_F64", self.min_blocks_f64.to_string()),
            ("SPMV_STREAM", b(self.stream)),
            ("SPMV_XHINT", self.x_hint.to_string()),
            ("SPMV_STRIPED_F32", b(self.striped_f32)),
            ("SPMV_STRIPED_F64", b(self.striped_f64)),
            ("SPMV_SMEM_PROD_F32", b(self.smem_prod_f32)),
            ("SPMV_SMEM_PROD_F64", b(self.smem_prod_f64)),
        ]
    }

    /// The `-D` defines of this policy for the module of element type `T` alone
    /// (`SPMV_TYPES`: the kernels of one type, plus the type-free structure kernels), the
    /// module every SpMV of a `GpuCsr<T>` uses; [`defines`](Self::defines) compiles both types.
    pub fn typed_defines<T: Scalar>(&self) -> Vec<(&'static str, String)> {
        let mut d = self.defines();
        d.push((
            "SPMV_TYPES",
            if T::BYTES == 4 { "1" } else { "2" }.to_string(),
        ));
        d
    }

    /// The `-D` defines of the module of the mixed kernels (`f32` values under `f64` vectors,
    /// `SPMV_TYPES` bit 3, with the `f64` fix-up and scale kernels; `spmv::gpu::mixed`).
    pub fn mixed_defines(&self) -> Vec<(&'static str, String)> {
        let mut d = self.defines();
        d.push(("SPMV_TYPES", "8".to_string()));
        d
    }

    /// Nonzeros per tile of the fused kernel for element type `T`.
    pub fn tile<T: Scalar>(&self) -> u32 {
        self.threads
            * if T::BYTES == 4 {
                self.items_f32
            } else {
                self.items_f64
            }
    }
}

/// Resident threads per SM by compute capability (CUDA's table): 1024 on sm_75, 1536 on sm_86,
/// sm_87, sm_89 and sm_12x, 2048 elsewhere. Bounds the fused kernel's blocks-per-SM hint, which
/// ptxas rejects as out of range beyond it.
fn max_threads_per_sm(cc: (i32, i32)) -> u32 {
    match cc {
        (7, 5) => 1024,
        (8, 6) | (8, 7) | (8, 9) | (12, _) => 1536,
        _ => 2048,
    }
}

/// A kernel and its name (for errors).
type Named<'a> = (&'a CudaFunction, &'static str);

/// Loaded kernels of one element type.
#[derive(Clone)]
struct Kernels {
    fused: CudaFunction,
    fixup: CudaFunction,
    lookback: CudaFunction,
    rows: CudaFunction,
    vector: CudaFunction,
    scale: CudaFunction,
    products: CudaFunction,
    rowgather: CudaFunction,
}

/// A CSR matrix resident on the GPU, ready for repeated `y ← α·A·x + β·y`.
///
/// Built by [`GpuCsr::upload`]; every structure-only table is computed there, so
/// [`spmv`](GpuCsr::spmv) queues kernels and returns without allocating or synchronising.
pub struct GpuCsr<T: GpuScalar> {
    gpu: Arc<Gpu>,
    nrows: usize,
    ncols: usize,
    nnz: usize,
    stats: RowStats,
    policy: SpmvPolicy,
    /// What `Auto` runs (encoded, see `plan::encode`): the rule's choice, or a tuned one.
    auto: AtomicU32,
    /// The statistics rule's choice at upload.
    rule: SpmvAlgorithm,
    /// Hash of the pattern (shape, sampled row pointers and columns) and the scalar type.
    fingerprint: u64,
    vector_lanes: u32,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    val: CudaSlice<T>,
    /// Packed head flags: bit k of word k/32 is set when entry k starts a row; bit nnz is a
    /// sentinel; two zero words of padding.
    heads: CudaSlice<u32>,
    /// Row starts before each fused tile.
    tile_heads: CudaSlice<u32>,
    /// Per tile: the nearest earlier tile holding a row boundary (where the row carried into
    /// the tile starts; read by the fix-up).
    tile_start: CudaSlice<u32>,
    /// Segment (non-empty row) → row; one dummy entry when there are no empty rows.
    row_map: CudaSlice<u32>,
    has_map: bool,
    nsegs: u32,
    ntiles: u32,
    /// Per tile: look-back status (`FusedLookback`, `epoch·4 + status`, epoch ≥ 1) or the
    /// fix-up bits (`Fused`, values < 4, so never mistaken for a look-back status; `Fused`
    /// rewrites every entry before its fix-up reads them).
    tile_flag: Mutex<CudaSlice<u32>>,
    /// Two values per tile: local and inclusive tails (`FusedLookback`), or tails and heads of
    /// the rows crossing tiles (`Fused`).
    tile_value: Mutex<CudaSlice<T>>,
    epoch: AtomicU32,
    /// Allocated on the first use of the paper's algorithm (it holds two arrays of nnz values).
    paper: Mutex<Option<PaperWorkspace<T>>>,
    /// The structure tables' device time: its events until first read (shared by copies).
    preprocess: Arc<Mutex<Preprocessed>>,
    k: Kernels,
}

/// [`GpuCsr::preprocess_seconds`]: the events around the structure tables' kernels, read (with
/// a wait for the end event) only when the figure is asked for, so that building a matrix
/// queues its kernels without a synchronisation.
enum Preprocessed {
    Queued(crate::gpu::QueuedTime),
    Seconds(f64),
}

/// The paper path's per-matrix state: head flags for the segmented scan and the product array.
struct PaperWorkspace<T: GpuScalar> {
    products: CudaSlice<T>,
    scanned: CudaSlice<T>,
    /// Head flags at every row start (step 2 of §4.2, built once here).
    flags: HeadFlags,
    /// Workspace of the segmented scan (allocated once, reused by every multiply).
    scan_ws: CudaSlice<u8>,
}

impl<T: GpuScalar> std::fmt::Debug for GpuCsr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuCsr<{}>({}×{}, {} nonzeros, auto = {})",
            T::NAME,
            self.nrows,
            self.ncols,
            self.nnz,
            self.resolved_algorithm().name()
        )
    }
}

/// The largest nonzero count accepted: tile arithmetic in the kernels is 32-bit.
const MAX_NNZ: usize = (u32::MAX as usize) - (1 << 16);

/// The structure-only tables of [`GpuCsr::upload`], built on the device from `row_ptr`: the
/// head flags (one bit per entry), the row starts before each tile and, with empty rows, the
/// segment → row map. Three small kernels and one exclusive scan of `⌈nnz/32⌉ + 1` counts (the
/// crate's scan primitive); the counts and their scan are freed when it returns.
struct Preprocess<'a> {
    gpu: &'a Arc<Gpu>,
    /// The policy's defines: the same module as the SpMV kernels (compiled before the timing).
    defines: &'a [(&'static str, String)],
    nrows: usize,
    nnz: usize,
    ntiles: usize,
    tile: usize,
    has_map: bool,
}

impl Preprocess<'_> {
    fn run(
        &self,
        row_ptr: &CudaSlice<u32>,
        heads: &mut CudaSlice<u32>,
        tile_heads: &mut CudaSlice<u32>,
        tile_start: &mut CudaSlice<u32>,
        row_map: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let g = self.gpu;
        let f = |name: &str| g.function(&SPMV_SRC, name, self.defines);
        let (nrows, nnz) = (self.nrows as u32, self.nnz as u32);
        let grid = |n: usize| (n.div_ceil(256) as u32).clamp(1, g.sm_count() * 16);
        let mark = f("spmv_mark_heads")?;
        let mut b = g.stream().launch_builder(&mark);
        b.arg(row_ptr).arg(&nrows).arg(&nnz).arg(&mut *heads);
        // SAFETY: spmv_mark_heads(const u32* row_ptr, u32 nrows, u32 nnz, u32* heads); row_ptr
        // has nrows+1 entries ≤ nnz, heads ⌈(nnz+1)/32⌉+2 ≥ nnz/32+1 zeroed words.
        unsafe { b.launch(Gpu::cfg(grid(self.nrows), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_mark_heads", e))?;
        if self.nnz == 0 {
            return Ok(());
        }
        let nw = self.nnz.div_ceil(32) + 1;
        let mut counts = g.zeros::<u32>(nw)?;
        let counts_fn = f("spmv_head_counts")?;
        let mut b = g.stream().launch_builder(&counts_fn);
        let nw32 = nw as u32;
        b.arg(&*heads).arg(&nnz).arg(&nw32).arg(&mut counts);
        // SAFETY: spmv_head_counts(const u32* heads, u32 nnz, u32 nw, u32* counts); counts has
        // nw words; heads is read below ⌈nnz/32⌉ words only.
        unsafe { b.launch(Gpu::cfg(grid(nw), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_head_counts", e))?;
        let mut rank = g.zeros::<u32>(nw)?;
        prim::scan(
            g,
            &counts,
            &mut rank,
            ScanSpec::exclusive(ScanOp::Plus),
            ScanAlgorithm::default(),
        )?;
        let (ntiles, tile_words, has_map) = (
            self.ntiles as u32,
            (self.tile / 32) as u32,
            self.has_map as u32,
        );
        let tables = f("spmv_tile_tables")?;
        let mut b = g.stream().launch_builder(&tables);
        b.arg(row_ptr)
            .arg(&nrows)
            .arg(&*heads)
            .arg(&rank)
            .arg(&ntiles)
            .arg(&tile_words)
            .arg(&mut *tile_heads)
            .arg(&mut *row_map)
            .arg(&has_map);
        // SAFETY: spmv_tile_tables(const u32* row_ptr, u32 nrows, const u32* heads,
        // const u32* rank, u32 ntiles, u32 tile_words, u32* tile_heads, u32* row_map,
        // u32 has_map); rank has nw > (ntiles-1)·tile_words entries, tile_heads ntiles, row_map
        // nsegs entries when has_map (one per non-empty row, indexed by its segment < nsegs).
        unsafe { b.launch(Gpu::cfg(grid(self.nrows.max(self.ntiles)), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_tile_tables", e))?;
        // tile_start = exclusive max-scan of (tile if it holds a boundary else 0); counts is
        // reused for the flags.
        let bounds = f("spmv_tile_bounds")?;
        let mut b = g.stream().launch_builder(&bounds);
        b.arg(&*heads)
            .arg(&rank)
            .arg(&nnz)
            .arg(&nw32)
            .arg(&ntiles)
            .arg(&tile_words)
            .arg(&mut counts);
        // SAFETY: spmv_tile_bounds(const u32* heads, const u32* rank, u32 nnz, u32 nw,
        // u32 ntiles, u32 tile_words, u32* bnd); bnd (counts) has nw ≥ ntiles words, rank nw,
        // heads is read at bit (t+1)·tile < nnz only.
        unsafe { b.launch(Gpu::cfg(grid(self.ntiles), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_tile_bounds", e))?;
        let flags = counts.slice(..self.ntiles);
        prim::scan(
            g,
            &flags,
            tile_start,
            ScanSpec::exclusive(ScanOp::Max),
            ScanAlgorithm::default(),
        )?;
        Ok(())
    }
}

/// Queues `spmv_row_stats` over a device row pointer of `nrows ≥ 1` rows (`nrows + 1`
/// entries): `out[0..6]` = the shortest and longest row, the empty rows, Σ len², `row_ptr[0]` and
/// `row_ptr[nrows]` (`out[0]` set to `u64::MAX` and `out[1..4]` to 0 before).
fn queue_row_stats<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    row_ptr: &CudaSlice<u32>,
    nrows: usize,
    out: &mut CudaSlice<u64>,
) -> Result<()> {
    assert!(
        nrows >= 1 && row_ptr.len() > nrows && out.len() >= 6,
        "queue_row_stats: {nrows} rows, row_ptr of {}, out of {}",
        row_ptr.len(),
        out.len()
    );
    let f = gpu.function(
        &SPMV_SRC,
        "spmv_row_stats",
        &SpmvPolicy::for_device(gpu.compute_capability()).typed_defines::<T>(),
    )?;
    let n32 = u32::try_from(nrows).map_err(|_| {
        Error::InvalidInput(format!("{nrows} rows exceed the GPU's 32-bit indices"))
    })?;
    let mut b = gpu.stream().launch_builder(&f);
    b.arg(row_ptr).arg(&n32).arg(out);
    let blocks = (nrows.div_ceil(256) as u32).clamp(1, gpu.sm_count() * 8);
    // SAFETY: spmv_row_stats(const u32* row_ptr, u32 nrows, u64* out): row_ptr has at least
    // nrows+1 entries, out at least 6 words (asserted above).
    unsafe { b.launch(Gpu::cfg(blocks, 256, 0)) }
        .map_err(|e| Gpu::launch_error("spmv_row_stats", e))?;
    Ok(())
}

/// The longest row of a device row pointer of `nrows` rows (`nrows + 1` entries), found on the
/// device: one word comes back, not the row pointer.
///
/// # Errors
/// A failed launch or copy; more rows than 32-bit indices hold.
pub fn longest_row(gpu: &Arc<Gpu>, row_ptr: &CudaSlice<u32>, nrows: usize) -> Result<usize> {
    if nrows == 0 {
        return Ok(0);
    }
    let mut out = gpu.upload(&[u64::MAX, 0, 0, 0, 0, 0])?;
    queue_row_stats::<f64>(gpu, row_ptr, nrows, &mut out)?;
    Ok(gpu.download(&out.slice(1..2))?[0] as usize)
}

impl<T: GpuScalar> GpuCsr<T> {
    /// Uploads `a` and builds every structure-only table (head flags, tile row starts, the
    /// empty-row map, look-back scratch, paper workspace) and compiles the kernels (once per
    /// process and policy). [`SpmvAlgorithm::Auto`] is resolved here.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the matrix has more than about 2^32 − 2^16 nonzeros or
    /// rows; CUDA errors (out of device memory, a failed compile) with their context.
    pub fn upload(gpu: &Arc<Gpu>, a: &CsrMatrix<T>) -> Result<Self> {
        let (nrows, ncols, nnz) = (a.nrows(), a.ncols(), a.nnz());
        if nnz > MAX_NNZ || nrows >= u32::MAX as usize || ncols >= u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "GpuCsr: {nrows}×{ncols} matrix with {nnz} nonzeros exceeds the 32-bit index \
                 range of the GPU kernels (at most {MAX_NNZ} nonzeros)"
            )));
        }
        // Memory preflight (crate::memory), before any allocation: the CSR arrays, and an upper
        // bound of the structure tables (head flags, tile row starts and their scan, the
        // empty-row map).
        {
            use crate::memory::bytes_of;
            let need = bytes_of::<u32>(nrows + 1)
                .saturating_add(bytes_of::<u32>(nnz))
                .saturating_add(bytes_of::<T>(nnz))
                .saturating_add(bytes_of::<u32>(nrows))
                .saturating_add(bytes_of::<u32>(nnz / 8 + 64));
            gpu.check_memory(
                &format!("the upload of a {nrows}×{ncols} matrix with {nnz} nonzeros"),
                need,
            )?;
        }
        let (zero_idx, zero_val) = ([0u32], [T::zero()]);
        let row_ptr = gpu.upload(a.row_ptr())?;
        let col = gpu.upload(if nnz == 0 { &zero_idx[..] } else { a.col_idx() })?;
        let val = gpu.upload(if nnz == 0 { &zero_val[..] } else { a.values() })?;
        let stats = a.row_stats();
        let features = SpmvFeatures::from_parts(a.row_ptr(), a.col_idx(), ncols, &stats);
        let fingerprint = pattern_fingerprint::<T>((nrows, ncols), a.row_ptr(), Some(a.col_idx()));
        Self::from_parts_with(
            gpu,
            (nrows, ncols, nnz),
            (row_ptr, col, val),
            stats,
            (features, fingerprint),
        )
    }

    /// Builds a matrix from CSR arrays already on the device (results of other GPU operations,
    /// such as a sparse product), with the same structure tables as [`GpuCsr::upload`]. The row
    /// statistics come from one download of `row_ptr` (`nrows + 1` words) and the column spread
    /// from a small kernel over sampled rows; the entries never leave the device.
    ///
    /// `col` and `val` may hold more than `nnz` elements (at least one: a matrix without entries
    /// holds a dummy); only the first `nnz` are entries. The arrays are trusted to form a valid
    /// CSR matrix (non-decreasing `row_ptr` from 0 to `nnz`, columns below `ncols`): they are
    /// meant to come from the crate's own kernels.
    ///
    /// # Panics
    /// When `row_ptr` does not have `nrows + 1` elements or `col`/`val` are shorter than
    /// `max(nnz, 1)` (both sizes in the message).
    ///
    /// # Errors
    /// As [`GpuCsr::upload`]; also when the downloaded `row_ptr` does not start at 0 and end at
    /// `nnz`.
    pub fn from_device_parts(
        gpu: &Arc<Gpu>,
        nrows: usize,
        ncols: usize,
        row_ptr: CudaSlice<u32>,
        col: CudaSlice<u32>,
        val: CudaSlice<T>,
    ) -> Result<Self> {
        assert_eq!(
            row_ptr.len(),
            nrows + 1,
            "GpuCsr::from_device_parts: row_ptr has {} elements for {} rows",
            row_ptr.len(),
            nrows
        );
        // The row statistics on the device (six words) and the column spread's sum and count
        // (two doubles, `queue_column_spread`) come back in one download, not the row pointer.
        let mut out = gpu.upload(&[u64::MAX, 0, 0, 0, 0, 0, 0, 0])?;
        if nrows > 0 {
            queue_row_stats::<T>(gpu, &row_ptr, nrows, &mut out)?;
            // SAFETY: the last two of the eight zero-initialised words are read as f64 zeros.
            let mut words = unsafe { out.transmute_mut::<f64>(8) }.expect("8 words hold 8 doubles");
            let mut spread = words.slice_mut(6..8);
            queue_column_spread::<T>(gpu, &row_ptr, &col, nrows, ncols, &mut spread)?;
        }
        let st = gpu.download(&out)?;
        let first = if nrows > 0 { st[4] } else { 0 };
        let nnz = if nrows > 0 {
            st[5] as usize
        } else {
            gpu.download(&row_ptr)?[0] as usize
        };
        if first != 0 {
            return Err(Error::InvalidInput(format!(
                "GpuCsr::from_device_parts: row_ptr[0] = {first}, not 0"
            )));
        }
        assert!(
            col.len() >= nnz.max(1) && val.len() >= nnz.max(1),
            "GpuCsr::from_device_parts: {nnz} entries but col has {} and val {} elements",
            col.len(),
            val.len()
        );
        let stats = if nrows == 0 {
            RowStats::of_row_ptr(&[0])
        } else {
            let mean = nnz as f64 / nrows as f64;
            let var = (st[3] as f64 / nrows as f64 - mean * mean).max(0.0);
            RowStats {
                min: st[0] as usize,
                mean,
                max: st[1] as usize,
                std_dev: var.sqrt(),
                empty_rows: st[2] as usize,
            }
        };
        // The row pointer and the columns stay on the device: the features come from the
        // statistics above and a kernel over sampled rows (the spread); the x-line statistics
        // are unknown (NaN; the rule then reads the spread).
        let mut features = SpmvFeatures::from_stats(nrows, ncols, nnz, &stats);
        let (sum, count) = (f64::from_bits(st[6]), f64::from_bits(st[7]));
        features.spread = if nnz == 0 || nrows == 0 || count == 0.0 {
            0.0
        } else {
            sum / count
        };
        if nnz > 0 {
            features.lines_per_entry_f64 = f64::NAN;
            features.lines_per_entry_f32 = f64::NAN;
        }
        // Without the row pointer on the host: the shape and the row statistics words.
        let fingerprint = pattern_fingerprint::<T>((nrows, ncols), &[], Some(&st_words(&st[..6])));
        Self::from_parts_with(
            gpu,
            (nrows, ncols, nnz),
            (row_ptr, col, val),
            stats,
            (features, fingerprint),
        )
    }

    fn from_parts_with(
        gpu: &Arc<Gpu>,
        (nrows, ncols, nnz): (usize, usize, usize),
        (row_ptr, col, val): (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<T>),
        stats: RowStats,
        (features, fingerprint): (SpmvFeatures, u64),
    ) -> Result<Self> {
        if nnz > MAX_NNZ || nrows >= u32::MAX as usize || ncols >= u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "GpuCsr: {nrows}×{ncols} matrix with {nnz} nonzeros exceeds the 32-bit index \
                 range of the GPU kernels (at most {MAX_NNZ} nonzeros)"
            )));
        }
        let policy = SpmvPolicy::for_device(gpu.compute_capability());
        let defines = policy.typed_defines::<T>();
        let f = |root: &str| gpu.typed_function::<T>(&SPMV_SRC, root, &defines);
        let k = Kernels {
            fused: f("spmv_fused")?,
            fixup: f("spmv_fixup")?,
            lookback: f("spmv_lookback")?,
            rows: f("spmv_rows")?,
            vector: f("spmv_vector")?,
            scale: f("spmv_scale")?,
            products: f("spmv_products")?,
            rowgather: f("spmv_rowgather")?,
        };
        let rule = choose::<T>(&features, policy.tile::<T>() as usize);
        let has_map = stats.empty_rows > 0;
        let nsegs = (nrows - stats.empty_rows) as u32;
        let tile = policy.tile::<T>() as usize;
        let ntiles = nnz.div_ceil(tile);
        let mut heads = gpu.zeros::<u32>((nnz + 1).div_ceil(32) + 2)?;
        let mut tile_heads = gpu.zeros::<u32>(ntiles.max(1))?;
        let mut tile_start = gpu.zeros::<u32>(ntiles.max(1))?;
        let mut row_map = gpu.zeros::<u32>(if has_map { nsegs.max(1) as usize } else { 1 })?;
        let pre = Preprocess {
            gpu,
            defines: &defines,
            nrows,
            nnz,
            ntiles,
            tile,
            has_map,
        };
        let preprocess = gpu.time_queued(|| {
            pre.run(
                &row_ptr,
                &mut heads,
                &mut tile_heads,
                &mut tile_start,
                &mut row_map,
            )
        })?;
        Ok(GpuCsr {
            nrows,
            ncols,
            nnz,
            auto: AtomicU32::new(plan::encode(rule)),
            rule,
            fingerprint,
            vector_lanes: auto_lanes(&stats),
            stats,
            policy,
            row_ptr,
            col,
            val,
            heads,
            tile_heads,
            tile_start,
            row_map,
            has_map,
            nsegs,
            ntiles: ntiles as u32,
            tile_flag: Mutex::new(gpu.zeros::<u32>(ntiles.max(1))?),
            tile_value: Mutex::new(gpu.zeros::<T>(2 * ntiles.max(1))?),
            epoch: AtomicU32::new(0),
            paper: Mutex::new(None),
            preprocess: Arc::new(Mutex::new(Preprocessed::Queued(preprocess))),
            k,
            gpu: gpu.clone(),
        })
    }

    /// A copy on the same device: the CSR arrays and structure tables copied on the device
    /// (stream-ordered, no synchronisation, nothing rebuilt), fresh scratch.
    ///
    /// # Errors
    /// Out of device memory.
    pub fn try_clone(&self) -> Result<Self> {
        let g = &self.gpu;
        let copy = |s: &CudaSlice<u32>| {
            g.stream()
                .clone_dtod(s)
                .map_err(|e| Error::cuda("copying a device matrix", e))
        };
        let val = g
            .stream()
            .clone_dtod(&self.val)
            .map_err(|e| Error::cuda("copying a device matrix", e))?;
        Ok(GpuCsr {
            gpu: g.clone(),
            nrows: self.nrows,
            ncols: self.ncols,
            nnz: self.nnz,
            stats: self.stats,
            policy: self.policy,
            auto: AtomicU32::new(self.auto.load(Ordering::Relaxed)),
            rule: self.rule,
            fingerprint: self.fingerprint,
            vector_lanes: self.vector_lanes,
            row_ptr: copy(&self.row_ptr)?,
            col: copy(&self.col)?,
            val,
            heads: copy(&self.heads)?,
            tile_heads: copy(&self.tile_heads)?,
            tile_start: copy(&self.tile_start)?,
            row_map: copy(&self.row_map)?,
            has_map: self.has_map,
            nsegs: self.nsegs,
            ntiles: self.ntiles,
            tile_flag: Mutex::new(g.zeros::<u32>(self.ntiles.max(1) as usize)?),
            tile_value: Mutex::new(g.zeros::<T>(2 * self.ntiles.max(1) as usize)?),
            epoch: AtomicU32::new(0),
            paper: Mutex::new(None),
            preprocess: self.preprocess.clone(),
            k: self.k.clone(),
        })
    }

    /// The values on the device (`max(nnz, 1)` elements), to overwrite in place: every structure
    /// table depends on the pattern alone, so new values on the same pattern need nothing else.
    pub fn values_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.val
    }

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
    /// The GPU the matrix lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    /// Row-length statistics computed at upload.
    pub fn row_stats(&self) -> &RowStats {
        &self.stats
    }
    /// The kernel policy the matrix was uploaded with.
    pub fn policy(&self) -> SpmvPolicy {
        self.policy
    }
    /// Bytes one SpMV moves at the minimum (DESIGN.md's count):
    /// `nnz·(sizeof(T)+4) + (nrows+1)·4 + (ncols+nrows)·sizeof(T)`.
    pub fn spmv_bytes(&self) -> usize {
        self.nnz * (T::BYTES + 4) + (self.nrows + 1) * 4 + (self.ncols + self.nrows) * T::BYTES
    }
    /// Device CSR arrays `(row_ptr, col_idx, values)` (for peers such as cuSPARSE). For a
    /// matrix without entries `col_idx` and `values` hold one dummy element.
    pub fn device_parts(&self) -> (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<T>) {
        (&self.row_ptr, &self.col, &self.val)
    }

    /// Device seconds spent building the structure tables at upload (head flags, tile row
    /// starts, empty-row map), measured with CUDA events; the host-to-device copies of the CSR
    /// arrays are not included. The first call waits for the tables' kernels; NaN when the
    /// events cannot be read (an error of those kernels, which the next synchronising call
    /// reports).
    pub fn preprocess_seconds(&self) -> f64 {
        let mut p = self.preprocess.lock().unwrap_or_else(|e| e.into_inner());
        match &*p {
            Preprocessed::Seconds(s) => *s,
            Preprocessed::Queued(t) => match t.seconds() {
                Ok(s) => {
                    *p = Preprocessed::Seconds(s);
                    s
                }
                Err(_) => f64::NAN,
            },
        }
    }

    /// Device bytes held beyond the CSR arrays (`row_ptr`, `col_idx`, `values`): head flags,
    /// per-tile tables, the empty-row map, and the paper's workspace once it has been used.
    pub fn extra_device_bytes(&self) -> usize {
        let paper = self
            .paper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |w| {
                (w.products.len() + w.scanned.len()) * T::BYTES
                    + w.flags.words().len() * 4
                    + w.scan_ws.len()
            });
        let tiles = self
            .tile_flag
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
            * 4
            + self
                .tile_value
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len()
                * T::BYTES;
        (self.heads.len() + self.tile_heads.len() + self.tile_start.len() + self.row_map.len()) * 4
            + tiles
            + paper
    }

    /// Bytes of the CSR arrays on the device.
    pub fn csr_device_bytes(&self) -> usize {
        (self.row_ptr.len() + self.col.len()) * 4 + self.val.len() * T::BYTES
    }

    /// Sets the look-back epoch counter (tests of its wrap-around only).
    #[doc(hidden)]
    pub fn set_epoch_for_tests(&self, epoch: u32) {
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    /// What [`SpmvAlgorithm::Auto`] runs for this matrix: the rule's choice at upload
    /// ([`GpuCsr::rule_algorithm`], from [`SpmvFeatures`]: the fused kernel for irregular rows,
    /// one thread per row for short local rows, the vector kernel with a lane count set by the
    /// entries per lane otherwise; the full rule and the measurements behind it are in the source
    /// of `choose` and `benches/results/spmv.md`), or the measured one after [`GpuCsr::tune`].
    /// Every choice is bitwise reproducible run to run.
    pub fn resolved_algorithm(&self) -> SpmvAlgorithm {
        plan::decode(self.auto.load(Ordering::Relaxed)).unwrap_or(self.rule)
    }

    /// What the statistics rule chose at upload (what `Auto` runs until [`GpuCsr::tune`]).
    pub fn rule_algorithm(&self) -> SpmvAlgorithm {
        self.rule
    }

    /// A hash of the matrix's pattern: its shape, the scalar type and up to 4096 evenly spaced
    /// row pointers and column indices (matrices built from device arrays: the shape and the
    /// row-length statistics only; a collision costs at most a slower kernel, never a wrong
    /// result).
    /// Two matrices with the same fingerprint get the same tuned kernel; values do not count.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Measures the candidate kernels on this matrix ([`SpmvPlan::tune`], cached per pattern
    /// fingerprint) and makes `Auto` run the fastest from now on.
    ///
    /// # Errors
    /// As [`SpmvPlan::tune`].
    pub fn tune(&self) -> Result<SpmvPlan> {
        let p = SpmvPlan::tune(self)?;
        self.auto
            .store(plan::encode(p.algorithm), Ordering::Relaxed);
        Ok(p)
    }

    /// Tunes ([`GpuCsr::tune`]) when a decision for this pattern is cached already, or when
    /// `expected_products` (the products a solve may make) is at least [`TUNE_MIN_PRODUCTS`], so
    /// that tuning costs under 2 % of them; otherwise keeps the rule's choice. `SEGSPARSE_SPMV_TUNE=0` turns it off, `=1` tunes always. The solvers call
    /// it through [`LinearOperator::prepare`](crate::backend::LinearOperator::prepare) before
    /// they iterate. Returns the plan when it tuned.
    ///
    /// # Errors
    /// As [`SpmvPlan::tune`].
    pub fn prepare_for(&self, expected_products: usize) -> Result<Option<SpmvPlan>> {
        let mode = std::env::var("SEGSPARSE_SPMV_TUNE").unwrap_or_default();
        let worth = match mode.trim() {
            "0" => false,
            "1" => true,
            _ => plan::is_cached(self) || expected_products >= TUNE_MIN_PRODUCTS,
        };
        if worth {
            self.tune().map(Some)
        } else {
            Ok(None)
        }
    }

    /// `y ← α·A·x + β·y` with the algorithm chosen at upload. Queues work on the GPU's stream
    /// and returns; no allocation, no host synchronisation.
    ///
    /// # Panics
    /// When `x.len() != ncols` or `y.len() != nrows` (both sizes in the message).
    ///
    /// # Errors
    /// A failed launch, naming the kernel.
    pub fn spmv(&self, alpha: T, x: &CudaSlice<T>, beta: T, y: &mut CudaSlice<T>) -> Result<()> {
        self.spmv_with(SpmvAlgorithm::Auto, alpha, x, beta, y)
    }

    /// [`spmv`](Self::spmv) with a forced algorithm.
    pub fn spmv_with(
        &self,
        algorithm: SpmvAlgorithm,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let xv = x.slice(..);
        let mut yv = y.slice_mut(..);
        self.spmv_view(algorithm, alpha, &xv, beta, &mut yv)
    }

    /// [`spmv_with`](Self::spmv_with) on views (sub-ranges of larger buffers).
    pub fn spmv_view(
        &self,
        algorithm: SpmvAlgorithm,
        alpha: T,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        if !self.check_product(x.len(), y.len()) {
            return Ok(());
        }
        let algorithm = match algorithm {
            SpmvAlgorithm::Auto => self.resolved_algorithm(),
            a => a,
        };
        let k = &self.k;
        if self.nnz == 0 {
            return self.scale_with((&k.scale, "spmv_scale"), beta, y);
        }
        match algorithm {
            SpmvAlgorithm::Fused | SpmvAlgorithm::Auto => self.fused_with(
                (&k.fused, "spmv_fused"),
                (&k.fixup, "spmv_fixup"),
                &self.tile_value,
                alpha,
                x,
                beta,
                y,
            ),
            SpmvAlgorithm::FusedLookback => self.lookback(alpha, x, beta, y),
            SpmvAlgorithm::Rows => self.rows_with((&k.rows, "spmv_rows"), alpha, x, beta, y),
            SpmvAlgorithm::Vector { lanes } => {
                self.vector_with((&k.vector, "spmv_vector"), lanes, alpha, x, beta, y)
            }
            SpmvAlgorithm::PaperSegscan => self.paper(alpha, x, beta, y),
        }
    }

    fn lookback(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let mut flag = self.tile_flag.lock().unwrap_or_else(|p| p.into_inner());
        let mut value = self.tile_value.lock().unwrap_or_else(|p| p.into_inner());
        // Epochs 1..2^30; on wrap-around, clear the flags so no stale flag matches.
        let mut epoch = self.epoch.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if epoch >= (1 << 30) || epoch == 0 {
            self.gpu
                .stream()
                .memset_zeros(&mut *flag)
                .map_err(|e| Error::cuda("clearing the SpMV look-back flags", e))?;
            self.epoch.store(1, Ordering::Relaxed);
            epoch = 1;
        }
        self.launch_tiles(
            (&self.k.lookback, "spmv_lookback"),
            alpha,
            x,
            beta,
            y,
            &mut flag,
            &mut value,
            epoch,
        )?;
        Ok(())
    }

    /// Panics unless `x` has `ncols` and `y` `nrows` elements; whether there is a product to
    /// run (`nrows > 0`).
    fn check_product(&self, x_len: usize, y_len: usize) -> bool {
        assert_eq!(
            x_len, self.ncols,
            "spmv: x has {x_len} elements but the matrix has {} columns",
            self.ncols
        );
        assert_eq!(
            y_len, self.nrows,
            "spmv: y has {y_len} elements but the matrix has {} rows",
            self.nrows
        );
        self.nrows > 0
    }

    // The launches below run on this matrix's structure with vectors of element type `X`:
    // `T` itself, or `f64` for the `f32` values of `GpuMixedCsr` (kernels `*_f32f64`, named
    // with the kernel for errors).

    /// `y ← β·y` (`spmv_scale_X(X* y, X beta, u32 n)`).
    fn scale_with<X: DeviceElem + Copy>(
        &self,
        (kernel, name): Named<'_>,
        beta: X,
        y: &mut CudaViewMut<'_, X>,
    ) -> Result<()> {
        let n = self.nrows as u32;
        let mut b = self.gpu.stream().launch_builder(kernel);
        b.arg(y).arg(&beta).arg(&n);
        let blocks = n.div_ceil(256).min(self.gpu.sm_count() * 8);
        // SAFETY: spmv_scale_X(X* y, X beta, u32 n); y has n = nrows elements.
        unsafe { b.launch(Gpu::cfg(blocks, 256, 0)) }.map_err(|e| Gpu::launch_error(name, e))?;
        Ok(())
    }

    /// The fused kernel on the tile flags of this matrix and the carries `tile_value` (two
    /// per tile), then, when rows cross tiles, its fix-up.
    #[allow(clippy::too_many_arguments)]
    fn fused_with<X: DeviceElem + Copy>(
        &self,
        fused: Named<'_>,
        (fixup, fixup_name): Named<'_>,
        tile_value: &Mutex<CudaSlice<X>>,
        alpha: X,
        x: &CudaView<'_, X>,
        beta: X,
        y: &mut CudaViewMut<'_, X>,
    ) -> Result<()> {
        let mut flag = self.tile_flag.lock().unwrap_or_else(|p| p.into_inner());
        let mut value = tile_value.lock().unwrap_or_else(|p| p.into_inner());
        // spmv_fused_X writes tile_flag[tile], tile_value[tile] and tile_value[ntiles + tile] of
        // its own tile only and reads no other tile's entries (the epoch is unused).
        self.launch_tiles(fused, alpha, x, beta, y, &mut flag, &mut value, 0)?;
        let (has_map, nrows) = (self.has_map as u32, self.nrows as u32);
        if self.ntiles < 2 {
            return Ok(());
        }
        let mut b = self.gpu.stream().launch_builder(fixup);
        b.arg(&*flag)
            .arg(&self.tile_start)
            .arg(&*value)
            .arg(&self.ntiles)
            .arg(&self.tile_heads)
            .arg(&self.row_map)
            .arg(&has_map)
            .arg(&self.nsegs)
            .arg(&nrows)
            .arg(y)
            .arg(&alpha)
            .arg(&beta);
        // SAFETY: spmv_fixup_X(const u32* tile_info, const u32* tile_start,
        // const X* tile_value, u32 ntiles, const u32* tile_heads, const u32* row_map, u32 has_map, u32 nsegs, u32 nrows, X* y,
        // X alpha, X beta); tile_info, tile_start and tile_heads have ntiles entries (tile_start
        // values < their index), tile_value 2·ntiles (written by the launch above),
        // row_map nsegs when has_map, y nrows; one warp per tile (8 per block of 256).
        unsafe { b.launch(Gpu::cfg(self.ntiles.div_ceil(8), 256, 0)) }
            .map_err(|e| Gpu::launch_error(fixup_name, e))?;
        Ok(())
    }

    /// Launches one of the tile kernels (`spmv_fused_X` or `spmv_lookback_T`, same signature),
    /// one block per tile.
    #[allow(clippy::too_many_arguments)]
    fn launch_tiles<X: DeviceElem + Copy>(
        &self,
        (kernel, name): Named<'_>,
        alpha: X,
        x: &CudaView<'_, X>,
        beta: X,
        y: &mut CudaViewMut<'_, X>,
        flag: &mut CudaSlice<u32>,
        value: &mut CudaSlice<X>,
        epoch: u32,
    ) -> Result<()> {
        let (has_map, nnz, nrows) = (self.has_map as u32, self.nnz as u32, self.nrows as u32);
        let mut b = self.gpu.stream().launch_builder(kernel);
        b.arg(&self.col)
            .arg(&self.val)
            .arg(&self.heads)
            .arg(&self.tile_heads)
            .arg(&self.row_map)
            .arg(&has_map)
            .arg(&self.nsegs)
            .arg(&nnz)
            .arg(&nrows)
            .arg(x)
            .arg(y)
            .arg(&alpha)
            .arg(&beta)
            .arg(flag)
            .arg(value)
            .arg(&epoch);
        // SAFETY: spmv_{fused,lookback}_X(const u32* col, const T* val, const u32* heads,
        // const u32* tile_heads, const u32* row_map, u32 has_map, u32 nsegs, u32 nnz, u32 nrows,
        // const X* x, X* y, X alpha, X beta, u32* tile_flag, X* tile_value, u32 epoch).
        // col/val have nnz entries, heads ceil((nnz+1)/32)+2 words, tile_heads/tile_flag one per
        // tile and tile_value two per tile (ntiles blocks are launched; the mixed kernel is
        // compiled with this matrix's tile), row_map nsegs entries when has_map, x ncols and y
        // nrows (checked by the caller).
        unsafe { b.launch(Gpu::cfg(self.ntiles, self.policy.threads, 0)) }
            .map_err(|e| Gpu::launch_error(name, e))?;
        Ok(())
    }

    /// One thread per row.
    fn rows_with<X: DeviceElem + Copy>(
        &self,
        (kernel, name): Named<'_>,
        alpha: X,
        x: &CudaView<'_, X>,
        beta: X,
        y: &mut CudaViewMut<'_, X>,
    ) -> Result<()> {
        let nrows = self.nrows as u32;
        let threads = self.policy.rows_threads;
        let mut b = self.gpu.stream().launch_builder(kernel);
        b.arg(&self.row_ptr)
            .arg(&self.col)
            .arg(&self.val)
            .arg(x)
            .arg(y)
            .arg(&alpha)
            .arg(&beta)
            .arg(&nrows);
        // SAFETY: spmv_rows_X(const u32* row_ptr, const u32* col, const T* val, const X* x,
        // X* y, X alpha, X beta, u32 nrows); row_ptr has nrows+1 entries, col/val nnz, x ncols,
        // y nrows; one thread per row.
        unsafe { b.launch(Gpu::cfg(nrows.div_ceil(threads), threads, 0)) }
            .map_err(|e| Gpu::launch_error(name, e))?;
        Ok(())
    }

    /// `lanes` threads per row (0: this matrix's choice).
    ///
    /// # Panics
    /// When `lanes` is not a power of two in `0..=32`.
    fn vector_with<X: DeviceElem + Copy>(
        &self,
        (kernel, name): Named<'_>,
        lanes: u32,
        alpha: X,
        x: &CudaView<'_, X>,
        beta: X,
        y: &mut CudaViewMut<'_, X>,
    ) -> Result<()> {
        let lanes = if lanes == 0 { self.vector_lanes } else { lanes };
        assert!(
            lanes.is_power_of_two() && lanes <= 32,
            "SpmvAlgorithm::Vector: lanes = {lanes} is not a power of two in 1..=32"
        );
        let nrows = self.nrows as u32;
        let lanes_log2 = lanes.trailing_zeros();
        let threads = self.policy.vector_threads;
        let blocks = ((self.nrows as u64 * lanes as u64).div_ceil(threads as u64)) as u32;
        let mut b = self.gpu.stream().launch_builder(kernel);
        b.arg(&self.row_ptr)
            .arg(&self.col)
            .arg(&self.val)
            .arg(x)
            .arg(y)
            .arg(&alpha)
            .arg(&beta)
            .arg(&nrows)
            .arg(&lanes_log2);
        // SAFETY: spmv_vector_X(const u32* row_ptr, const u32* col, const T* val, const X* x,
        // X* y, X alpha, X beta, u32 nrows, u32 lanes_log2); row_ptr has nrows+1 entries,
        // col/val nnz, x ncols, y nrows; blocks*threads covers nrows*lanes threads.
        unsafe { b.launch(Gpu::cfg(blocks, threads, 0)) }
            .map_err(|e| Gpu::launch_error(name, e))?;
        Ok(())
    }

    fn paper(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let mut ws = self.paper.lock().unwrap_or_else(|p| p.into_inner());
        if ws.is_none() {
            *ws = Some(PaperWorkspace {
                products: self.gpu.zeros::<T>(self.nnz)?,
                scanned: self.gpu.zeros::<T>(self.nnz)?,
                flags: HeadFlags::from_device_offsets(&self.gpu, &self.row_ptr, self.nnz)?,
                scan_ws: prim::workspace(&self.gpu, self.nnz)?,
            });
        }
        let ws = ws.as_mut().expect("created above");
        let (nnz, nrows) = (self.nnz as u32, self.nrows as u32);
        let grid = |n: u32| n.div_ceil(256).min(self.gpu.sm_count() * 16);
        // (1) product = value · x[index]
        let mut b = self.gpu.stream().launch_builder(&self.k.products);
        b.arg(&self.col)
            .arg(&self.val)
            .arg(x)
            .arg(&mut ws.products)
            .arg(&nnz);
        // SAFETY: spmv_products_T(const u32* col, const T* val, const T* x, T* prod, u32 nnz);
        // col, val and prod have nnz elements, x ncols.
        unsafe { b.launch(Gpu::cfg(grid(nnz), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_products", e))?;
        // (2) head flags were built at upload; (3) backward inclusive segmented sum scan.
        prim::segmented_scan_with(
            &self.gpu,
            &ws.products,
            &ws.flags,
            &mut ws.scanned,
            ScanSpec::inclusive(ScanOp::Plus).backward(),
            ScanAlgorithm::default(),
            &mut ws.scan_ws,
        )?;
        // (4) y = α·product[rowPtr] + β·y
        let mut b = self.gpu.stream().launch_builder(&self.k.rowgather);
        b.arg(&self.row_ptr)
            .arg(&ws.scanned)
            .arg(y)
            .arg(&alpha)
            .arg(&beta)
            .arg(&nrows);
        // SAFETY: spmv_rowgather_T(const u32* row_ptr, const T* prod, T* y, T alpha, T beta,
        // u32 nrows); row_ptr has nrows+1 entries, prod nnz, y nrows.
        unsafe { b.launch(Gpu::cfg(grid(nrows), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_rowgather", e))?;
        Ok(())
    }
}

/// Threads per row of the vector kernel: the power of two nearest the mean row length, in 2..=32.
fn auto_lanes(s: &RowStats) -> u32 {
    let m = s.mean.max(1.0);
    let mut lanes = 2u32;
    while (lanes as f64) * 1.5 < m && lanes < 32 {
        lanes *= 2;
    }
    lanes
}

/// `Auto`'s choice at upload (see [`GpuCsr::resolved_algorithm`]) from the pattern statistics
/// ([`SpmvFeatures`]). The thresholds were fitted (`benches/spmv/select-fit.py`) on every
/// candidate kernel timed beside cuSPARSE on an H100 (2026-11-25, 40 generated instances of 16
/// kinds from 2 M to 218 M entries and 39 corpus matrices, f32 and f64) and validated leave one
/// kind out (`benches/results/spmv-select.md`). Kinds, never instances:
///
/// - small matrices (fewer than [`SMALL_NNZ`] entries, L2-resident, one launch dominates): the
///   vector kernel with about one entry per lane, unless the rows are very irregular (coefficient
///   of variation above [`SMALL_IRREGULAR_CV`]): then the look-back kernel when every row fits in
///   a tile (one launch, and reproducible then), else the fused kernel;
/// - large matrices with short rows (mean ≤ [`ROWS_MAX_MEAN`], none longer than
///   [`ROWS_MAX_ROW`], none empty) whose blocks of 32 rows share `x` lines (at most
///   [`LOCAL_LINES`] distinct 128-byte lines per entry: stencils, meshes and geometric graphs in
///   a bandwidth-reducing order, regular or not): one thread per row;
/// - other large irregular matrices (row-length CV above [`REGULAR_CV`], a row longer than twice
///   the mean plus 4, or empty rows): the fused kernel, whose cost does not depend on row
///   lengths;
/// - large regular matrices with scattered columns (more than [`SCATTERED_LINES`] lines per
///   entry): the fused kernel from [`SCATTERED_FUSED_MEAN`] entries per row, else the vector
///   kernel with about 2 entries per lane (kNN graphs numbered along one axis, random columns);
/// - other regular matrices (27-point stencils, elasticity, kNN graphs in Morton order, dense
///   blocks): the vector kernel with about 5 (`f32`) or 3 (`f64`) entries per lane.
fn choose<T: Scalar>(f: &SpmvFeatures, tile: usize) -> SpmvAlgorithm {
    let vector = |per_lane: f64| SpmvAlgorithm::Vector {
        lanes: lanes_for(f.mean, per_lane),
    };
    if f.nnz < SMALL_NNZ {
        return if f.cv <= SMALL_IRREGULAR_CV {
            vector(1.0)
        } else if f.max <= tile {
            SpmvAlgorithm::FusedLookback
        } else {
            SpmvAlgorithm::Fused
        };
    }
    let lines = if T::BYTES == 4 {
        f.lines_per_entry_f32
    } else {
        f.lines_per_entry_f64
    };
    // Unknown for matrices built on the device: judged by the column spread then.
    let lines = if lines.is_nan() {
        if f.spread > LOCAL_SPREAD {
            1.0
        } else {
            0.0
        }
    } else {
        lines
    };
    let short_local = f.mean <= ROWS_MAX_MEAN && lines <= LOCAL_LINES;
    if short_local && f.max <= ROWS_MAX_ROW && f.empty_frac == 0.0 {
        SpmvAlgorithm::Rows
    } else if f.cv > REGULAR_CV || (f.max as f64) > 2.0 * f.mean + 4.0 || f.empty_frac > 0.0 {
        SpmvAlgorithm::Fused
    } else if short_local {
        SpmvAlgorithm::Rows
    } else if lines > SCATTERED_LINES {
        if f.mean >= SCATTERED_FUSED_MEAN {
            SpmvAlgorithm::Fused
        } else {
            vector(2.0)
        }
    } else {
        vector(if T::BYTES == 4 { 5.0 } else { 3.0 })
    }
}

/// Lanes per row of the vector kernel for about `per_lane` entries per lane: the power of two
/// nearest (in log scale) to `mean / per_lane`, in 2..=32.
fn lanes_for(mean: f64, per_lane: f64) -> u32 {
    let x = (mean.max(1.0) / per_lane).max(1.0);
    let e = (x.log2() + 0.5).floor().clamp(1.0, 5.0);
    1u32 << (e as u32)
}

/// The row-statistics words of [`GpuCsr::from_device_parts`] as `u32`s, for its fingerprint.
fn st_words(st: &[u64]) -> Vec<u32> {
    st.iter()
        .flat_map(|&w| [w as u32, (w >> 32) as u32])
        .collect()
}

/// [`column_spread`] on the device (`spmv_column_spread`, the same sample of rows): queues the
/// sum and count of |column − diagonal| into `out` (two doubles, zero on entry); the spread is
/// their quotient.
fn queue_column_spread<T: Scalar>(
    gpu: &Arc<Gpu>,
    row_ptr: &CudaSlice<u32>,
    col: &CudaSlice<u32>,
    nrows: usize,
    ncols: usize,
    out: &mut CudaViewMut<'_, f64>,
) -> Result<()> {
    let step = nrows.div_ceil(4096) as u32;
    let samples = nrows.div_ceil(step as usize) as u32;
    let scale = ncols as f64 / nrows as f64;
    let f = gpu.function(
        &SPMV_SRC,
        "spmv_column_spread",
        &SpmvPolicy::for_device(gpu.compute_capability()).typed_defines::<T>(),
    )?;
    let n32 = nrows as u32;
    let mut b = gpu.stream().launch_builder(&f);
    b.arg(row_ptr)
        .arg(col)
        .arg(&n32)
        .arg(&step)
        .arg(&samples)
        .arg(&scale)
        .arg(out);
    // SAFETY: spmv_column_spread(const u32* row_ptr, const u32* col, u32 nrows, u32 step,
    // u32 samples, double scale, double* out); row_ptr has nrows+1 entries, the sampled rows'
    // entries lie in col, out holds 2 doubles.
    unsafe { b.launch(Gpu::cfg(samples.div_ceil(256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("spmv_column_spread", e))?;
    Ok(())
}

/// For matrices built on the device (whose x-line statistics are not computed): the mean column
/// spread above which the columns count as scattered (2^17 columns, 1 MiB of x in f64).
pub const LOCAL_SPREAD: f64 = (1u32 << 17) as f64;

/// Entries below which `Auto` applies its small-matrix rule.
pub const SMALL_NNZ: usize = 1 << 19;

/// Row-length coefficient of variation above which a small matrix counts as irregular.
pub const SMALL_IRREGULAR_CV: f64 = 2.0;

/// Row-length coefficient of variation up to which a large matrix counts as regular.
pub const REGULAR_CV: f64 = 0.3;

/// Longest mean row for which `Auto` runs one thread per row.
pub const ROWS_MAX_MEAN: f64 = 10.0;

/// Longest row for which short local rows run one thread per row however irregular their lengths
/// (a warp waits for its longest row): the H200 measured a random geometric graph in RCM order
/// (mean 7, CV 0.35, longest 23) at 0.81× (`f32`) and 0.86× (`f64`) the fused kernel's time
/// with one thread per row.
pub const ROWS_MAX_ROW: usize = 32;

/// Distinct 128-byte `x` lines per entry (over blocks of 32 rows) up to which columns count as
/// local enough for one thread per row.
pub const LOCAL_LINES: f64 = 0.1;

/// Distinct `x` lines per entry above which columns count as scattered.
pub const SCATTERED_LINES: f64 = 0.5;

/// Mean row length from which regular rows with scattered columns run the fused kernel.
pub const SCATTERED_FUSED_MEAN: f64 = 12.0;

/// `y ← A·x` with the GPU SpMV ([`GpuCsr::spmv`]): queued on the stream, no host synchronisation.
impl<T: GpuScalar> crate::backend::LinearOperator<T, crate::backend::gpu::GpuOps<T>> for GpuCsr<T> {
    fn nrows(&self) -> usize {
        GpuCsr::nrows(self)
    }
    fn ncols(&self) -> usize {
        GpuCsr::ncols(self)
    }
    fn apply(
        &self,
        _: &crate::backend::gpu::GpuOps<T>,
        x: &CudaSlice<T>,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.spmv(T::one(), x, T::zero(), y)
    }
    fn prepare(&self, _: &crate::backend::gpu::GpuOps<T>, expected_applies: usize) -> Result<()> {
        self.prepare_for(expected_applies).map(|_| ())
    }
    /// One launch for up to 32 columns ([`GpuCsr::spmv_columns`]); one column runs the SpMV.
    fn apply_block(
        &self,
        _: &crate::backend::gpu::GpuOps<T>,
        xs: &[&CudaSlice<T>],
        ys: &mut [&mut CudaSlice<T>],
    ) -> Result<()> {
        if let ([x], [y]) = (xs, &mut *ys) {
            return self.spmv(T::one(), x, T::zero(), y);
        }
        self.spmv_columns(T::one(), xs, T::zero(), ys)
    }
}

/// The GPU backend's matrices for the multigrid cycle: [`GpuCsr`] and its SpMV (SpMM for a
/// block of columns).
impl<T: GpuScalar> crate::backend::MultigridOps<T> for crate::backend::gpu::GpuOps<T> {
    type Matrix = GpuCsr<T>;
    fn upload_matrix(&self, a: &CsrMatrix<T>) -> Result<GpuCsr<T>> {
        GpuCsr::upload(self.gpu(), a)
    }
    fn download_matrix(&self, a: &GpuCsr<T>) -> Result<CsrMatrix<T>> {
        let g = self.gpu();
        let (row_ptr, col, val) = a.device_parts();
        let (mut col, mut val) = (g.download(col)?, g.download(val)?);
        col.truncate(a.nnz());
        val.truncate(a.nnz());
        CsrMatrix::try_from_parts(a.nrows(), a.ncols(), g.download(row_ptr)?, col, val)
    }
    fn matrix_bytes(&self, a: &GpuCsr<T>) -> usize {
        a.csr_device_bytes() + a.extra_device_bytes()
    }
    fn spmv(
        &self,
        a: &GpuCsr<T>,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        a.spmv(alpha, x, beta, y)
    }
    fn spmv_block(
        &self,
        a: &GpuCsr<T>,
        alpha: T,
        xs: &[&CudaSlice<T>],
        beta: T,
        ys: &mut [&mut CudaSlice<T>],
    ) -> Result<()> {
        if let ([x], [y]) = (xs, &mut *ys) {
            return a.spmv(alpha, x, beta, y);
        }
        a.spmv_columns(alpha, xs, beta, ys)
    }
}

#[cfg(test)]
mod auto_tests {
    use super::*;

    #[test]
    fn lanes_per_entry() {
        assert_eq!(lanes_for(27.0, 5.0), 4);
        assert_eq!(lanes_for(27.0, 3.0), 8);
        assert_eq!(lanes_for(64.0, 3.0), 16);
        assert_eq!(lanes_for(128.0, 3.0), 32);
        assert_eq!(lanes_for(1000.0, 1.0), 32);
        assert_eq!(lanes_for(1.0, 5.0), 2);
        assert_eq!(lanes_for(0.0, 1.0), 2);
    }

    /// The default policy (no `SEGSPARSE_SPMV_*` overrides in CI): striped loads and products in
    /// shared memory in both types, register caps that fill an SM without exceeding its 2048
    /// threads, and the matching defines.
    #[test]
    fn default_policy() {
        let p = SpmvPolicy::for_device((9, 0));
        if std::env::vars().any(|(k, _)| k.starts_with("SEGSPARSE_SPMV_")) {
            return; // a tuning run
        }
        assert!(p.striped_f32 && p.striped_f64 && p.smem_prod_f32 && p.smem_prod_f64);
        assert_eq!((p.min_blocks_f32, p.min_blocks_f64), (8, 6));
        let ada = SpmvPolicy::for_device((8, 9));
        assert_eq!((ada.min_blocks_f32, ada.min_blocks_f64), (6, 6));
        assert!(p.min_blocks_f32 * p.threads <= 2048 && p.min_blocks_f64 * p.threads <= 2048);
        let d = p.defines();
        for (k, v) in [
            ("SPMV_STRIPED_F64", "1"),
            ("SPMV_MIN_BLOCKS_F64", "6"),
            ("SPMV_XHINT", "0"),
        ] {
            assert!(
                d.iter().any(|(n, x)| *n == k && x == v),
                "{k} = {v} in {d:?}"
            );
        }
    }

    /// `Auto`'s choice (f64) on generated instances of each kind, from the same statistics the
    /// upload computes; the same choice twice (deterministic).
    #[test]
    fn auto_choice_by_kind() {
        let cases: [(&str, &str); 14] = [
            ("poisson3d:100", "rows"),
            ("poisson3d27:60", "vector8"),
            ("powerlaw:600000:2.0", "fused"),
            ("emptyrows:2000000:90:20", "fused"),
            ("denserows:1000000:4:8:200000", "fused"),
            ("rmat:18:16", "fused"),
            ("random:800000:6", "vector4"),
            ("random:800000:20", "fused"),
            ("random:1000:5", "vector4"),
            ("knn3d:200000:10:x", "vector4"),
            ("blocks:100000:32:2", "vector16"),
            ("arrow:200000:4:6", "fused"),
            ("zipf:300000:2.0:1000:0", "fused"),
            // Short local rows of uneven length (mean 7, CV 0.35): one thread per row.
            ("geolap:400000:6", "rows"),
        ];
        for (spec, want) in cases {
            let a = crate::generate::from_spec::<f64>(spec, 9).unwrap();
            let f = SpmvFeatures::of(&a);
            let tile = SpmvPolicy::for_device((9, 0)).tile::<f64>() as usize;
            let got = choose::<f64>(&f, tile);
            assert_eq!(got.name(), want, "{spec}: {f:?}");
            assert_eq!(choose::<f64>(&SpmvFeatures::of(&a), tile), got);
        }
    }
}
