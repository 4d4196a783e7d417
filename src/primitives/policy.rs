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
//!
//! Per device class ([`DeviceClass`], chosen at run time from the device's name): the rows
//! above are the H200's and every other device's; the H100 has its own row
//! ([`lookback_default`]), which the H100 sweep left equal to the H200's. The look-back kernel
//! can also scan two tiles per block ([`lookback_tiles`], `SEGSPARSE_SCAN_TILES=2`): the block
//! loads and block-scans the second tile and publishes its aggregate before warp 0 looks back
//! for the first, so that work fills the first-window wait, and the second tile takes the
//! first's inclusive prefix without a look-back of its own. Measured slower on the H100 (see
//! the H100 row), so no class uses it by default. `SEGSPARSE_DEVICE_CLASS=h100|h200|other`
//! overrides the class (tests and comparisons).

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

/// The class of GPU a tuning table row belongs to, chosen at run time from the device's name
/// ([`DeviceClass::of_device`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceClass {
    /// NVIDIA H100 (HBM3, ~3.35 TB/s on the SXM part).
    H100,
    /// NVIDIA H200 (HBM3e, ~4.8 TB/s): the device the original rows were tuned on.
    H200,
    /// Any other device: the H200 rows.
    Other,
}

impl DeviceClass {
    /// Every class, in table order.
    pub const ALL: [DeviceClass; 3] = [DeviceClass::H100, DeviceClass::H200, DeviceClass::Other];

    /// The class of a device called `name` (e.g. "NVIDIA H100 80GB HBM3"), unless
    /// `SEGSPARSE_DEVICE_CLASS=h100|h200|other` says otherwise (read once per process).
    pub fn of_device(name: &str) -> DeviceClass {
        static FORCE: std::sync::OnceLock<Option<DeviceClass>> = std::sync::OnceLock::new();
        let force = *FORCE.get_or_init(|| {
            std::env::var("SEGSPARSE_DEVICE_CLASS")
                .ok()
                .and_then(|v| DeviceClass::parse(&v))
        });
        force.unwrap_or_else(|| DeviceClass::from_name(name))
    }

    /// The class a device name belongs to (no environment; no allocation: it runs on every
    /// scan and sort call).
    pub fn from_name(name: &str) -> DeviceClass {
        let has = |part: &[u8]| {
            name.as_bytes()
                .windows(part.len())
                .any(|w| w.eq_ignore_ascii_case(part))
        };
        if has(b"H200") {
            DeviceClass::H200
        } else if has(b"H100") {
            DeviceClass::H100
        } else {
            DeviceClass::Other
        }
    }

    /// `h100`, `h200` or `other` (any case).
    pub fn parse(s: &str) -> Option<DeviceClass> {
        match s.trim().to_ascii_lowercase().as_str() {
            "h100" => Some(DeviceClass::H100),
            "h200" => Some(DeviceClass::H200),
            "other" => Some(DeviceClass::Other),
            _ => None,
        }
    }

    /// The position of the class in [`DeviceClass::ALL`].
    pub fn index(self) -> usize {
        match self {
            DeviceClass::H100 => 0,
            DeviceClass::H200 => 1,
            DeviceClass::Other => 2,
        }
    }

    /// Lower-case name, as [`DeviceClass::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            DeviceClass::H100 => "h100",
            DeviceClass::H200 => "h200",
            DeviceClass::Other => "other",
        }
    }
}

/// One device class's look-back row: the tile shape for 4- and 8-byte elements, tiles per
/// block, the first-window wait and the resident-block bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookbackTuning {
    /// Threads per block.
    pub threads: u32,
    /// Items per thread for 4-byte elements.
    pub items4: u32,
    /// Items per thread for 8-byte elements.
    pub items8: u32,
    /// Tiles one block scans (1, or 2: the second tile's loads overlap the first's look-back).
    pub tiles_per_block: u32,
    /// Nanoseconds of the first look-back window's wait (`SCAN_FIRST_DELAY`).
    pub first_delay_ns: u32,
    /// `__launch_bounds__` minimum blocks per SM (`SCAN_MIN_BLOCKS`).
    pub min_blocks: u32,
}

/// The built-in row of a device class (no environment).
pub const fn lookback_default(class: DeviceClass) -> LookbackTuning {
    match class {
        DeviceClass::H100 => H100_LOOKBACK,
        DeviceClass::H200 | DeviceClass::Other => H200_LOOKBACK,
    }
}

/// The H200 row (also every device other than an H100): see the module table.
const H200_LOOKBACK: LookbackTuning = LookbackTuning {
    threads: 256,
    items4: 16,
    items8: 8,
    tiles_per_block: 1,
    first_delay_ns: LOOKBACK_FIRST_DELAY_NS,
    min_blocks: LOOKBACK_MIN_BLOCKS,
};

/// The H100 row: the H200's. Measured on an H100 beside CUB (benches/results/primitives.md,
/// 2^24 and 2^26, f32 and f64, same call): two tiles per block of 256 × 16 (64 registers, 4
/// blocks per SM) 9–12 % slower than one tile, 5–9 % with a 1000 ns first-window wait, 6–12 %
/// with none; two tiles of 256 × 8 13–23 % slower; ncu of the two-tile kernel at f32 2^26: half the
/// resident warps (47 % achieved occupancy) and DRAM 67 % against 70 %, so what its block gains
/// by overlapping it loses in blocks per SM.
const H100_LOOKBACK: LookbackTuning = H200_LOOKBACK;

/// The look-back row of `class` with the tuning overrides of the environment applied
/// (`SEGSPARSE_SCAN_POLICY`, `SEGSPARSE_SCAN_TILES=1|2`, `SEGSPARSE_SCAN_FIRST_DELAY`,
/// `SEGSPARSE_SCAN_MIN_BLOCKS`; read once per process).
pub fn lookback_tuning(class: DeviceClass) -> LookbackTuning {
    let mut t = lookback_default(class);
    if let Some((th, i4, i8)) = env_override() {
        t.threads = th;
        t.items4 = i4;
        t.items8 = i8;
    }
    if let Some(k) = env_once(&ENV_TILES, "SEGSPARSE_SCAN_TILES", 2).filter(|&k| k >= 1) {
        t.tiles_per_block = k;
    }
    if let Some(ns) = env_once(&ENV_DELAY, "SEGSPARSE_SCAN_FIRST_DELAY", 10_000) {
        t.first_delay_ns = ns;
    }
    if let Some(k) = env_once(&ENV_MIN_BLOCKS, "SEGSPARSE_SCAN_MIN_BLOCKS", 16).filter(|&k| k >= 1)
    {
        t.min_blocks = k;
    }
    t
}

type EnvCell = std::sync::OnceLock<Option<u32>>;
static ENV_TILES: EnvCell = std::sync::OnceLock::new();
static ENV_DELAY: EnvCell = std::sync::OnceLock::new();
static ENV_MIN_BLOCKS: EnvCell = std::sync::OnceLock::new();

fn env_once(cell: &'static EnvCell, name: &str, max: u32) -> Option<u32> {
    *cell.get_or_init(|| env_u32(name, max))
}

/// The look-back (and warp-shuffle) tile for elements of `elem_bytes` bytes (4 or 8) on a
/// device of `class`.
pub fn lookback(elem_bytes: usize, class: DeviceClass) -> Policy {
    let t = lookback_tuning(class);
    Policy {
        threads: t.threads,
        items: if elem_bytes == 8 { t.items8 } else { t.items4 },
    }
}

/// Tiles one look-back block scans on a device of `class` (1 or 2).
pub fn lookback_tiles(class: DeviceClass) -> u32 {
    lookback_tuning(class).tiles_per_block.min(2)
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
pub fn lookback_first_delay_ns(class: DeviceClass) -> u32 {
    lookback_tuning(class).first_delay_ns
}

/// Minimum resident blocks per SM requested from the compiler for the look-back kernels
/// (`__launch_bounds__` second argument, `SCAN_MIN_BLOCKS`); override
/// `SEGSPARSE_SCAN_MIN_BLOCKS=K` (1..=16).
pub fn lookback_min_blocks(class: DeviceClass) -> u32 {
    lookback_tuning(class).min_blocks
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
pub fn lookback_defines(class: DeviceClass) -> Vec<(&'static str, String)> {
    let p4 = lookback(4, class);
    let p8 = lookback(8, class);
    vec![
        ("SCAN_THREADS", p4.threads.to_string()),
        ("SCAN_ITEMS_4", p4.items.to_string()),
        ("SCAN_ITEMS_8", p8.items.to_string()),
        ("SCAN_BACKOFF", lookback_backoff_ns().to_string()),
        (
            "SCAN_FIRST_DELAY",
            lookback_first_delay_ns(class).to_string(),
        ),
        ("SCAN_TILES", lookback_tiles(class).to_string()),
        // at most 2048 resident threads per SM: a larger request could not be honoured
        (
            "SCAN_MIN_BLOCKS",
            lookback_min_blocks(class)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_class_follows_the_name() {
        assert_eq!(
            DeviceClass::from_name("NVIDIA H100 80GB HBM3"),
            DeviceClass::H100
        );
        assert_eq!(
            DeviceClass::from_name("NVIDIA H100 PCIe"),
            DeviceClass::H100
        );
        assert_eq!(DeviceClass::from_name("NVIDIA H200"), DeviceClass::H200);
        assert_eq!(DeviceClass::from_name("NVIDIA H200 NVL"), DeviceClass::H200);
        assert_eq!(
            DeviceClass::from_name("NVIDIA A100-SXM4-80GB"),
            DeviceClass::Other
        );
        assert_eq!(DeviceClass::from_name(""), DeviceClass::Other);
        for c in DeviceClass::ALL {
            assert_eq!(DeviceClass::parse(c.name()), Some(c));
            assert_eq!(DeviceClass::ALL[c.index()], c);
        }
        assert_eq!(DeviceClass::parse(" H100 "), Some(DeviceClass::H100));
        assert_eq!(DeviceClass::parse("h300"), None);
    }

    #[test]
    fn every_class_has_a_valid_lookback_row() {
        for c in DeviceClass::ALL {
            let t = lookback_default(c);
            assert_eq!(t.threads % 32, 0, "{c:?}");
            assert!((64..=1024).contains(&t.threads), "{c:?}");
            assert!((1..=2).contains(&t.tiles_per_block), "{c:?}");
            assert!(t.min_blocks >= 1, "{c:?}");
            for (items, bytes) in [(t.items4, 4), (t.items8, 8)] {
                assert!((1..=32).contains(&items), "{c:?}");
                assert!((t.threads * items) as usize >= MIN_TILE, "{c:?}");
                // the tile buffer (padded) stays under the 48 KB of static shared memory
                assert!(t.threads * items * bytes * 33 / 32 < 46_000, "{c:?}");
                // 16-byte vector loads need whole vectors per thread
                assert_eq!(items * bytes % 16, 0, "{c:?}");
            }
        }
        // Any device other than an H100 keeps the H200 row.
        assert_eq!(
            lookback_default(DeviceClass::Other),
            lookback_default(DeviceClass::H200)
        );
    }

    #[test]
    fn defines_carry_the_class_row() {
        if [
            "SEGSPARSE_SCAN_POLICY",
            "SEGSPARSE_SCAN_TILES",
            "SEGSPARSE_SCAN_FIRST_DELAY",
            "SEGSPARSE_SCAN_MIN_BLOCKS",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
        {
            return; // an override is the point of the variables
        }
        for c in DeviceClass::ALL {
            let row = lookback_default(c);
            let d = lookback_defines(c);
            let get = |k: &str| {
                d.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.parse::<u32>().unwrap())
                    .unwrap_or_else(|| panic!("{k} missing for {c:?}"))
            };
            assert_eq!(get("SCAN_THREADS"), row.threads);
            assert_eq!(get("SCAN_ITEMS_4"), row.items4);
            assert_eq!(get("SCAN_ITEMS_8"), row.items8);
            assert_eq!(get("SCAN_TILES"), row.tiles_per_block);
            assert_eq!(get("SCAN_FIRST_DELAY"), row.first_delay_ns);
            assert_eq!(
                get("SCAN_MIN_BLOCKS"),
                row.min_blocks.min(2048 / row.threads)
            );
            assert_eq!(lookback_tiles(c), row.tiles_per_block);
            assert_eq!(lookback(4, c).tile(), (row.threads * row.items4) as usize);
            assert_eq!(lookback(8, c).tile(), (row.threads * row.items8) as usize);
        }
    }
}
