//! Tuning of the scan kernels: threads per block and items per thread, in one table.
//!
//! A tile is `threads × items` consecutive elements; one block scans one tile. The values reach
//! NVRTC as `-D` defines (every kernel source also has `#ifndef` defaults equal to the 4-byte
//! row below, so CI compiles it with none).
//!
//! | kernel | elements | threads | items | why |
//! |---|---|---|---|---|
//! | look-back | 4 bytes | 256 | 16 | 16 KB per tile in flight (4 × 16-byte vector loads per thread); best or within 4 % of the best of eight shapes swept on an H200 (128–1024 threads, 4–32 items; `benches/results/history/scan.md`). With `__launch_bounds__(256, 8)`: 32 registers → 8 blocks per SM (unbounded: 62 → 4) |
//! | look-back | 8 bytes | 256 | 8 | same bytes per tile as the 4-byte row, same shared memory; 32 registers, 8 blocks per SM |
//! | warp-shuffle | as look-back | | | the same tile code; only the tile-to-tile carry differs |
//! | work-efficient | any | 128 | 2 | the paper's configuration (128 threads, 256 elements per block) |
//! | second level (tile sums) | any | 512 | 8 | one block loops over the tile sums; 4096 per step |
//!
//! Look-back window: 32 predecessors, one per lane (K = 1); polling without back-off. Both were
//! measured against alternatives (K = 4, 8; 100 and 400 ns back-off) and kept.
//!
//! Resident blocks: the look-back kernels are latency-bound — Nsight Compute shows half of every
//! warp's time at the barrier where a block's warps wait for warp 0's look-back — so what pays is
//! more blocks per SM to run meanwhile. `__launch_bounds__(threads, 6)` capped registers at 40:
//! f32 2^26 287.6 → 236 µs on an H200 (`benches/results/history/scan.md`); `(threads, 8)` caps
//! them at 32 with no spill: 240 → 221 µs (f32) and 389 → 370 µs (f64) at 2^26 in the same
//! process, GPU tests green with it (integration run), so 8 is the default.
//!
//! Switches measured in the same sweep and left at their defaults: tiles in blockIdx order (−3 %,
//! but relies on in-order block dispatch), streaming stores (noise); 16-byte status words for
//! 8-byte values are on (−37 % for f64 at 2^26). Warp-local transposes (CUB's WARP_TRANSPOSE)
//! were measured 2 % slower and removed (commit 71e434c has them).
//!
//! The look-back row can be overridden for tuning experiments with the environment variable
//! `SEGSPARSE_SCAN_POLICY=THREADSxITEMS4,ITEMS8` (e.g. `256x12,6`); threads must be a multiple
//! of 32 in 64..=1024, and items 1..=32.

/// Threads per block and items per thread of one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// Threads per block (a multiple of 32).
    pub threads: u32,
    /// Consecutive elements each thread owns.
    pub items: u32,
}

impl Policy {
    /// Elements per tile (`threads × items`).
    pub const fn tile(&self) -> usize {
        (self.threads * self.items) as usize
    }
}

/// The smallest tile of any look-back or warp-shuffle policy; tile-status workspace is sized by
/// it so one workspace serves every policy.
pub const MIN_TILE: usize = 512;

/// The work-efficient (Sengupta 2007) block: 128 threads, 2 elements each.
pub const WORK_EFFICIENT: Policy = Policy {
    threads: 128,
    items: 2,
};

/// The single block that scans tile sums for the multi-pass algorithms.
pub const SPINE: Policy = Policy {
    threads: 512,
    items: 8,
};

/// The look-back (and warp-shuffle) tile for elements of `elem_bytes` bytes (4 or 8).
pub fn lookback(elem_bytes: usize) -> Policy {
    if let Some((t, i4, i8)) = env_override() {
        return Policy {
            threads: t,
            items: if elem_bytes == 8 { i8 } else { i4 },
        };
    }
    if elem_bytes == 8 {
        Policy {
            threads: 256,
            items: 8,
        }
    } else {
        Policy {
            threads: 256,
            items: 16,
        }
    }
}

/// The override is read once per process (the hot path must not touch the environment).
fn env_override() -> Option<(u32, u32, u32)> {
    static O: std::sync::OnceLock<Option<(u32, u32, u32)>> = std::sync::OnceLock::new();
    *O.get_or_init(read_env_override)
}

fn read_env_override() -> Option<(u32, u32, u32)> {
    let v = std::env::var("SEGSPARSE_SCAN_POLICY").ok()?;
    let (t, rest) = v.split_once('x')?;
    let (i4, i8) = rest.split_once(',').unwrap_or((rest, rest));
    let (t, i4, i8): (u32, u32, u32) = (t.parse().ok()?, i4.parse().ok()?, i8.parse().ok()?);
    let ok = t % 32 == 0
        && (64..=1024).contains(&t)
        && (1..=32).contains(&i4)
        && (1..=32).contains(&i8)
        && (t * i4) as usize >= MIN_TILE
        && (t * i8) as usize >= MIN_TILE
        // static shared memory stays under 48 KB
        && t * i8 * 8 * 33 / 32 < 46_000
        && t * i4 * 4 * 33 / 32 < 46_000;
    ok.then_some((t, i4, i8))
}

/// Nanoseconds a look-back lane sleeps between polls of a status word that is not ready
/// (`SCAN_BACKOFF`); tuning override `SEGSPARSE_SCAN_BACKOFF=NS` (0..=10000).
pub fn lookback_backoff_ns() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| env_u32("SEGSPARSE_SCAN_BACKOFF", 10_000).unwrap_or(LOOKBACK_BACKOFF_NS))
}

/// Nanoseconds a tile's look-back warp waits after publishing its aggregate and before it
/// first reads its predecessors' status words (`SCAN_FIRST_DELAY`): time for the
/// predecessors' own publications to reach L2, so the first window more often ends at an
/// inclusive prefix instead of polling. CUB's single-pass scan waits like this on data-centre
/// GPUs (its "L2 write latency" delay). Launches of fewer than 2048 tiles skip the wait
/// (`SCAN_FIRST_DELAY_TILES`: their tiles all start together, so it would sit on the critical
/// path). Measured on an H100 (2^26, same process): f32 264.5 µs with no wait, 252.4 with
/// 1000 ns, 244.5 with 1500, 239.1 with 3000; f64 453.0 → 421.3 µs — the polls of a thousand
/// waiting warps otherwise compete with the streaming loads for L2 (ncu: barrier stalls 54 %
/// of issue cycles). Tuning override `SEGSPARSE_SCAN_FIRST_DELAY=NS` (0..=10000).
pub fn lookback_first_delay_ns() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        env_u32("SEGSPARSE_SCAN_FIRST_DELAY", 10_000).unwrap_or(LOOKBACK_FIRST_DELAY_NS)
    })
}

/// Minimum resident blocks per SM requested from the compiler for the look-back kernels
/// (`__launch_bounds__` second argument, `SCAN_MIN_BLOCKS`); override
/// `SEGSPARSE_SCAN_MIN_BLOCKS=K` (1..=16).
pub fn lookback_min_blocks() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        env_u32("SEGSPARSE_SCAN_MIN_BLOCKS", 16)
            .filter(|&k| k >= 1)
            .unwrap_or(LOOKBACK_MIN_BLOCKS)
    })
}

/// Predecessor tiles each look-back lane reads per window (`SCAN_LOOKBACK_K`; window =
/// 32·K tiles); override `SEGSPARSE_SCAN_LOOKBACK_K=K` (1..=16).
pub fn lookback_k() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        env_u32("SEGSPARSE_SCAN_LOOKBACK_K", 16)
            .filter(|&k| k >= 1)
            .unwrap_or(LOOKBACK_K)
    })
}

/// How look-back tiles get their ids (`SCAN_TILE_ORDER`): `false` = drawn from an atomic
/// counter (a block only waits on blocks already running: deadlock-free on any scheduler),
/// `true` = `blockIdx.x` (no draw round trip; relies on blocks starting in index order, as
/// CUB's scan does). Override `SEGSPARSE_SCAN_ORDER=0|1`.
pub fn lookback_blockidx_order() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        env_u32("SEGSPARSE_SCAN_ORDER", 1).map_or(LOOKBACK_BLOCKIDX_ORDER, |v| v == 1)
    })
}

/// Streaming (evict-first) stores of the scan output (`SCAN_STREAM_STORE`). Override
/// `SEGSPARSE_SCAN_STREAM=0|1`.
pub fn lookback_stream_store() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| env_u32("SEGSPARSE_SCAN_STREAM", 1).map_or(LOOKBACK_STREAM_STORE, |v| v == 1))
}

/// Status words of 8-byte values (`SCAN_STATUS16`): `true` = value and status in one 16-byte
/// word (one vector store, one vector load, no fences), `false` = value in a side array behind
/// a `__threadfence()`. Override `SEGSPARSE_SCAN_STATUS16=0|1`.
pub fn lookback_status16() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| env_u32("SEGSPARSE_SCAN_STATUS16", 1).map_or(LOOKBACK_STATUS16, |v| v == 1))
}

/// The switches above in words, for benchmark reports.
pub fn lookback_variant_name() -> String {
    format!(
        "tile ids {}, stores {}, 8-byte status {}",
        if lookback_blockidx_order() {
            "blockIdx"
        } else {
            "atomic"
        },
        if lookback_stream_store() {
            "streaming"
        } else {
            "default"
        },
        if lookback_status16() {
            "16-byte"
        } else {
            "fenced"
        }
    )
}

const LOOKBACK_STATUS16: bool = true;
const LOOKBACK_BLOCKIDX_ORDER: bool = false;
const LOOKBACK_STREAM_STORE: bool = false;
const LOOKBACK_K: u32 = 1;
const LOOKBACK_BACKOFF_NS: u32 = 0;
const LOOKBACK_FIRST_DELAY_NS: u32 = 3000;
const LOOKBACK_MIN_BLOCKS: u32 = 8;

fn env_u32(name: &str, max: u32) -> Option<u32> {
    std::env::var(name)
        .ok()?
        .parse::<u32>()
        .ok()
        .filter(|&v| v <= max)
}

/// The `-D` defines for the look-back / warp-shuffle sources (environment read once per
/// process).
pub fn lookback_defines() -> Vec<(&'static str, String)> {
    let p4 = lookback(4);
    let p8 = lookback(8);
    vec![
        ("SCAN_THREADS", p4.threads.to_string()),
        ("SCAN_ITEMS_4", p4.items.to_string()),
        ("SCAN_ITEMS_8", p8.items.to_string()),
        ("SCAN_BACKOFF", lookback_backoff_ns().to_string()),
        ("SCAN_FIRST_DELAY", lookback_first_delay_ns().to_string()),
        // at most 2048 resident threads per SM: a larger request could not be honoured
        (
            "SCAN_MIN_BLOCKS",
            lookback_min_blocks()
                .min(2048 / p4.threads.max(p8.threads))
                .max(1)
                .to_string(),
        ),
        ("SCAN_LOOKBACK_K", lookback_k().to_string()),
        (
            "SCAN_TILE_ORDER",
            u32::from(lookback_blockidx_order()).to_string(),
        ),
        (
            "SCAN_STREAM_STORE",
            u32::from(lookback_stream_store()).to_string(),
        ),
        ("SCAN_STATUS16", u32::from(lookback_status16()).to_string()),
    ]
}
