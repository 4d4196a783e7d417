//! Scan, segmented scan and the primitives built on them, on the CPU and the GPU.
//!
//! # Why scan
//!
//! Sengupta, Harris, Zhang and Owens (*Scan Primitives for GPU Computing*, 2007) make the
//! *segmented* scan the building block of irregular GPU work: sparse matrix–vector products
//! (a backward segmented inclusive sum over the products of each row), split, quicksort and
//! tridiagonal solvers. Sengupta, Harris and Garland (*Efficient Parallel Scan Algorithms for
//! GPUs*, 2008) reformulate it warp by warp. This module offers both, plus the single-pass scan
//! with decoupled look-back (Merrill and Garland, 2016) as the fast default.
//!
//! # Semantics (defined by [`cpu`], the sequential reference)
//!
//! For an associative operator `⊕` ([`ScanOp`]) with identity `e`, and input `x[0..n]`:
//!
//! | [`ScanKind`] | [`Direction`] | `out[i]` |
//! |---|---|---|
//! | inclusive | forward | `x[0] ⊕ … ⊕ x[i]` |
//! | exclusive | forward | `x[0] ⊕ … ⊕ x[i-1]` (`e` for `i = 0`) |
//! | inclusive | backward | `x[i] ⊕ … ⊕ x[n-1]` |
//! | exclusive | backward | `x[i+1] ⊕ … ⊕ x[n-1]` (`e` for `i = n-1`) |
//!
//! A *segmented* scan does the same inside each segment and never across a segment boundary.
//! Segments are given by **head flags at segment starts** (flag `i` set: a segment starts at `i`;
//! element 0 always starts one) or by CSR-style offsets (`offsets[0] = 0 ≤ … ≤ offsets[m] = n`;
//! segment `s` is `offsets[s]..offsets[s+1]`, repeated offsets are empty segments). The flags mean
//! the same thing in both directions: a backward segmented scan sums from `i` to the *end* of
//! `i`'s segment. The 2007 paper (§2.2.2) notes that reversing the data and the flags is not
//! enough for that — the reversed flags must also be shifted by one, because a flag sits
//! *between* two elements; our kernels read element `n-1-j` as logical element `j` and take its
//! flag from bit `n-j` (the head of the *next* segment, i.e. the tail of this one), so callers
//! never shift anything. Exclusive segmented: the first element of each segment (in the scan's
//! direction) gets the identity.
//!
//! Integers wrap on overflow (`wrapping_add`). Floating-point sums are not reassociation-free:
//! the GPU combines in a tree, the sequential CPU reference left to right, so results differ in
//! the last bits and are not bitwise deterministic across algorithms or tile sizes (they *are*
//! deterministic run to run for a fixed algorithm and policy: no atomics touch values).
//!
//! # Layout
//!
//! * [`cpu`]: sequential references ([`cpu::scan`], [`cpu::segmented_scan`],
//!   [`cpu::segmented_scan_offsets`]) and multithreaded ones ([`cpu::par_scan`],
//!   [`cpu::par_segmented_scan`]).
//! * `gpu` (feature `cuda`): the same calls on device buffers, three selectable
//!   [`ScanAlgorithm`]s, packed [`gpu::HeadFlags`], and workspace-taking variants for hot loops.
//! * [`policy`]: threads per block and items per thread of every kernel, with reasons.
//! * Kernels: `kernels/warp/warp_scan.cuh`, `kernels/warp/warp_reduce.cuh`,
//!   `kernels/block/block_scan.cuh` (block scan and segmented scan of per-thread pairs),
//!   `kernels/block/block_load_store.cuh` (striped ↔ blocked tiles, packed flag bits),
//!   `kernels/block/tile_lookback.cuh` (tile status words), `kernels/device/scan_*.cu`.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod policy;

/// The kernel sources of the scan family and the warp- and block-level headers that every
/// primitive's kernels share (compiled by NVRTC on first use; listed in
/// [`crate::kernel_registry::ALL_SOURCES`] so CI compiles them).
pub mod sources {
    use crate::gpu::kernels::{KernelSource, COMMON};

    /// Threads per block of the select kernels (compact, split; a tile is threads × items).
    pub(crate) const SELECT_THREADS: u32 = 256;
    /// Items per thread of the select kernels: 16 flag words per warp per tile, enough loads in
    /// flight per SM for a bandwidth-bound pass on sm_80/sm_90.
    pub(crate) const SELECT_ITEMS: u32 = 16;
    /// Threads per block of the radix sort kernels; must be 256 (one thread per digit value in
    /// the ranking).
    pub(crate) const RADIX_THREADS: u32 = 256;
    /// Keys per thread of the radix sort: a 4096-key tile keeps the count table (256 × tiles)
    /// small enough that its scan costs a few percent of a pass.
    pub(crate) const RADIX_ITEMS: u32 = 16;

    macro_rules! source {
        ($(#[$m:meta])* $name:ident, $path:literal, [$($h:expr),*]) => {
            source!($(#[$m])* $name, $path, [$($h),*], []);
        };
        ($(#[$m:meta])* $name:ident, $path:literal, [$($h:expr),*], [$($c:expr),*]) => {
            $(#[$m])*
            pub const $name: KernelSource =
                crate::gpu::kernels::kernel_source!($path, &[$(&$h),*], &[$($c),*]);
        };
    }
    source!(
        /// `warp/warp_scan.cuh`: shuffle-based warp scans and segmented scans.
        WARP_SCAN,
        "warp/warp_scan.cuh",
        [COMMON]
    );
    source!(
        /// `warp/warp_reduce.cuh`: warp reductions and ballot functions.
        WARP_REDUCE,
        "warp/warp_reduce.cuh",
        [COMMON]
    );
    source!(
        /// `block/block_scan.cuh`: block scan from warp scans and one shared-memory pass.
        BLOCK_SCAN,
        "block/block_scan.cuh",
        [COMMON, WARP_SCAN, WARP_REDUCE]
    );
    source!(
        /// `block/block_load_store.cuh`: striped ↔ blocked tiles, packed flag bits.
        BLOCK_LOAD_STORE,
        "block/block_load_store.cuh",
        [COMMON]
    );
    source!(
        /// `block/tile_lookback.cuh`: tile status words of the decoupled look-back.
        TILE_LOOKBACK,
        "block/tile_lookback.cuh",
        [COMMON, WARP_REDUCE]
    );
    source!(
        /// `block/tile_scan.cuh`: one tile of a single-pass (segmented) scan.
        TILE_SCAN,
        "block/tile_scan.cuh",
        [COMMON, WARP_REDUCE, BLOCK_SCAN, BLOCK_LOAD_STORE, TILE_LOOKBACK]
    );
    source!(
        /// `block/block_work_efficient.cuh`: the papers' work-efficient block scan.
        BLOCK_WORK_EFFICIENT,
        "block/block_work_efficient.cuh",
        [COMMON, WARP_REDUCE, BLOCK_LOAD_STORE]
    );
    source!(
        /// `block/scan_instances.cuh`: the (operator, type) instantiation macros.
        SCAN_INSTANCES,
        "block/scan_instances.cuh",
        [COMMON]
    );
    source!(
        /// `block/block_select.cuh`: block-level selection (compact, split).
        BLOCK_SELECT,
        "block/block_select.cuh",
        [COMMON],
        [
            ("SEL_THREADS", SELECT_THREADS as i64),
            ("SEL_ITEMS", SELECT_ITEMS as i64)
        ]
    );
    source!(
        /// `block/block_radix_rank.cuh`: block-level radix ranking.
        BLOCK_RADIX_RANK,
        "block/block_radix_rank.cuh",
        [COMMON],
        [
            ("RADIX_THREADS", RADIX_THREADS as i64),
            ("RADIX_ITEMS", RADIX_ITEMS as i64)
        ]
    );
    source!(
        /// `scan_lookback_{op}_{type}`: single-pass scan with decoupled look-back.
        SCAN_LOOKBACK,
        "device/scan_lookback.cu",
        [COMMON, SCAN_INSTANCES, TILE_SCAN]
    );
    source!(
        /// `segscan_lookback_{op}_{type}`: single-pass segmented scan with decoupled look-back.
        SEGSCAN_LOOKBACK,
        "device/segscan_lookback.cu",
        [COMMON, SCAN_INSTANCES, TILE_SCAN]
    );
    source!(
        /// Work-efficient and warp-shuffle multi-pass scans (`scan_we_*`, `scan_ws_*`,
        /// `scan_spine_*`).
        SCAN_MULTIPASS,
        "device/scan_multipass.cu",
        [COMMON, SCAN_INSTANCES, TILE_SCAN, BLOCK_WORK_EFFICIENT]
    );
    source!(
        /// Work-efficient and warp-shuffle multi-pass segmented scans (`segscan_we_*`,
        /// `segscan_ws_*`, `segscan_spine_*`).
        SEGSCAN_MULTIPASS,
        "device/segscan_multipass.cu",
        [COMMON, SCAN_INSTANCES, TILE_SCAN, BLOCK_WORK_EFFICIENT]
    );
    source!(
        /// `segscan_flags_from_offsets`: packed head flags from CSR-style offsets.
        SEGSCAN_FLAGS,
        "device/segscan_flags.cu",
        [COMMON]
    );
}

/// The associative operator of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScanOp {
    /// `a + b` (identity 0; integers wrap).
    #[default]
    Plus,
    /// `max(a, b)` as `if a > b { a } else { b }` (identity: −∞ or the type's minimum).
    Max,
    /// `min(a, b)` as `if a < b { a } else { b }` (identity: +∞ or the type's maximum).
    Min,
}

impl ScanOp {
    /// Lower-case name used in kernel entry points: `plus`, `max`, `min`.
    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Plus => "plus",
            ScanOp::Max => "max",
            ScanOp::Min => "min",
        }
    }
}

/// Inclusive (`out[i]` includes `x[i]`) or exclusive (it does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScanKind {
    /// `out[i] = x[0] ⊕ … ⊕ x[i]` (forward).
    #[default]
    Inclusive,
    /// `out[i] = x[0] ⊕ … ⊕ x[i-1]`, identity first (forward).
    Exclusive,
}

/// Forward (prefix, from index 0 up) or backward (suffix, from index n−1 down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Prefix scan.
    #[default]
    Forward,
    /// Suffix scan: as if the input were reversed, scanned, and the output reversed back.
    Backward,
}

/// What to compute: operator, inclusive/exclusive, direction. `Default` is a forward inclusive
/// sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScanSpec {
    /// The operator.
    pub op: ScanOp,
    /// Inclusive or exclusive.
    pub kind: ScanKind,
    /// Forward or backward.
    pub direction: Direction,
}

impl ScanSpec {
    /// A spec from its three parts.
    pub const fn new(op: ScanOp, kind: ScanKind, direction: Direction) -> Self {
        ScanSpec {
            op,
            kind,
            direction,
        }
    }
    /// Forward inclusive `op`-scan.
    pub const fn inclusive(op: ScanOp) -> Self {
        Self::new(op, ScanKind::Inclusive, Direction::Forward)
    }
    /// Forward exclusive `op`-scan.
    pub const fn exclusive(op: ScanOp) -> Self {
        Self::new(op, ScanKind::Exclusive, Direction::Forward)
    }
    /// The same spec scanning backward.
    pub const fn backward(self) -> Self {
        Self::new(self.op, self.kind, Direction::Backward)
    }
}

/// Which GPU algorithm computes a scan. All give the same results (up to floating-point
/// reassociation); they differ in passes over memory and speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScanAlgorithm {
    /// Single pass with decoupled look-back (Merrill and Garland 2016): each tile publishes its
    /// aggregate, then its inclusive prefix, in a status word; later tiles look back over a
    /// window of 32 predecessors. Reads the input once and writes the output once. The default
    /// and the fastest measured (H200, `benches/results/history/scan.md`): f32 2^26 in 236 µs (1.32×
    /// CUB's `DeviceScan` measured in the same run; the multi-pass warp-shuffle algorithm took
    /// 242 µs), 2^20 in 7.5 µs (CUB 9–13 µs), segmented scans 0.8× CUB's
    /// scan-by-key.
    #[default]
    DecoupledLookback,
    /// The work-efficient reduce/down-sweep tree of Sengupta et al. 2007, Algorithms 1–5
    /// (segmented: partial-OR flags), 128 threads × 2 elements per block in shared memory as in
    /// the paper; blocks are joined through a second-level scan of block sums and a fix-up pass.
    WorkEfficient,
    /// The warp formulation of Sengupta, Harris and Garland 2008 (intra-warp scans, here with
    /// shuffles and a ballot for segment heads), multi-block by reduce-then-scan: a reduce pass,
    /// a scan of the tile sums, and a scan pass that starts from each tile's carry.
    WarpShuffle,
}

impl ScanAlgorithm {
    /// Every algorithm, default first.
    pub const ALL: [ScanAlgorithm; 3] = [
        ScanAlgorithm::DecoupledLookback,
        ScanAlgorithm::WorkEfficient,
        ScanAlgorithm::WarpShuffle,
    ];
    /// Short name for tables: `lookback`, `work-efficient`, `warp-shuffle`.
    pub fn name(self) -> &'static str {
        match self {
            ScanAlgorithm::DecoupledLookback => "lookback",
            ScanAlgorithm::WorkEfficient => "work-efficient",
            ScanAlgorithm::WarpShuffle => "warp-shuffle",
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
}

/// Element types that can be scanned: `f32`, `f64`, `i32`, `u32`.
pub trait ScanElem:
    Copy + PartialOrd + PartialEq + std::fmt::Debug + Send + Sync + Default + 'static + sealed::Sealed
{
    /// Kernel-name suffix (`f32`, …).
    const SUFFIX: &'static str;
    /// The identity of `op`: 0, the lowest value (−∞ for floats) or the highest (+∞).
    fn identity(op: ScanOp) -> Self;
    /// `a ⊕ b` exactly as the kernels compute it (`a + b` wrapping for integers,
    /// `if a > b {a} else {b}`, `if a < b {a} else {b}`).
    fn combine(op: ScanOp, a: Self, b: Self) -> Self;
    /// Widening to f64 (for error measurement).
    fn to_f64(self) -> f64;
}

/// `ScanElem` for `$t`: the identities of plus, max and min (`$lowest`, `$highest`) and
/// `$plus` for `a + b`.
macro_rules! scan_elem {
    ($t:ty, $s:literal, $zero:expr, $lowest:expr, $highest:expr, $plus:expr) => {
        impl ScanElem for $t {
            const SUFFIX: &'static str = $s;
            #[inline]
            fn identity(op: ScanOp) -> Self {
                match op {
                    ScanOp::Plus => $zero,
                    ScanOp::Max => $lowest,
                    ScanOp::Min => $highest,
                }
            }
            #[inline]
            fn combine(op: ScanOp, a: Self, b: Self) -> Self {
                match op {
                    ScanOp::Plus => $plus(a, b),
                    ScanOp::Max => {
                        if a > b {
                            a
                        } else {
                            b
                        }
                    }
                    ScanOp::Min => {
                        if a < b {
                            a
                        } else {
                            b
                        }
                    }
                }
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}
scan_elem!(
    f32,
    "f32",
    0.0,
    f32::NEG_INFINITY,
    f32::INFINITY,
    |a: f32, b: f32| a + b
);
scan_elem!(
    f64,
    "f64",
    0.0,
    f64::NEG_INFINITY,
    f64::INFINITY,
    |a: f64, b: f64| a + b
);
scan_elem!(i32, "i32", 0, i32::MIN, i32::MAX, i32::wrapping_add);
scan_elem!(u32, "u32", 0, u32::MIN, u32::MAX, u32::wrapping_add);

/// Packs per-element head flags into one bit per element: bit `i % 32` of word `i / 32`
/// (the layout of [`gpu::HeadFlags`](crate::primitives) on the device).
///
/// ```
/// let w = segsparse::primitives::pack_flags(&[true, false, false, true]);
/// assert_eq!(w, vec![0b1001]);
/// ```
pub fn pack_flags(flags: &[bool]) -> Vec<u32> {
    let mut words = vec![0u32; flags.len().div_ceil(32)];
    for (i, &f) in flags.iter().enumerate() {
        if f {
            words[i / 32] |= 1 << (i % 32);
        }
    }
    words
}

/// Head flags (one bool per element) from CSR-style offsets over `n` elements: flag
/// `offsets[s]` is set for every `offsets[s] < n`.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when the offsets do not start at 0, end at
/// `n`, or decrease (naming the index).
pub fn flags_from_offsets(offsets: &[u32], n: usize) -> crate::Result<Vec<bool>> {
    check_offsets(offsets, n)?;
    let mut flags = vec![false; n];
    for &o in offsets {
        if (o as usize) < n {
            flags[o as usize] = true;
        }
    }
    Ok(flags)
}

/// Checks CSR-style segment offsets over `n` elements.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the first bad index.
pub fn check_offsets(offsets: &[u32], n: usize) -> crate::Result<()> {
    use crate::Error;
    if offsets.is_empty() {
        return Err(Error::InvalidInput(
            "segment offsets must have at least one entry (offsets[0] = 0)".into(),
        ));
    }
    if offsets[0] != 0 {
        return Err(Error::InvalidInput(format!(
            "segment offsets[0] = {} (must be 0)",
            offsets[0]
        )));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::InvalidInput(format!(
            "segment offsets decrease at index {}: {} > {}",
            i + 1,
            offsets[i],
            offsets[i + 1]
        )));
    }
    let last = *offsets.last().unwrap() as usize;
    if last != n {
        return Err(Error::InvalidInput(format!(
            "segment offsets end at {last} but there are {n} elements"
        )));
    }
    Ok(())
}

// ---- The primitives built on scan ----
pub mod compact;
pub mod distribute;
pub mod enumerate;
mod glue;
pub mod segreduce;
pub mod sort;
pub mod split;
pub use glue::unpack_flags;
