//! Sorting built on split: LSD radix sort (keys and key-value pairs), segmented sort, and the
//! paper's segmented quicksort.
//!
//! # Radix sort
//!
//! The paper's global radix sort is a sequence of 1-bit splits (Sengupta et al. 2007, §5 "Sort";
//! Blelloch 1990): split by bit 0, then bit 1, and so on; each split is stable, so the result is
//! sorted. The GPU version generalises the split from one bit to an 8-bit digit (256 buckets
//! instead of 2), 4 passes for 32-bit keys, 8 for 64-bit ones, as Onesweep (Adinets and
//! Merrill 2022; `kernels/device/radix_onesweep.cu`): one upfront kernel counts the digits of
//! every pass in a single read of the keys, then one kernel per digit ranks each tile's keys
//! (warp ballots find the peers of each digit, per-warp counters give the stable rank) and
//! finds the tile's output offsets by a decoupled look-back over the preceding tiles' digit
//! counts, so each pass reads and writes the keys once. From 2^30 keys on (the look-back's
//! 30-bit counts) the three-kernel sort runs instead: per pass an upsweep count per tile, a
//! device-wide scan of the digit-major count table, and a downsweep that ranks and scatters
//! (`kernels/device/radix_sort.cu`). Both scatter through shared memory so the global writes
//! are contiguous runs.
//!
//! Keys are ordered by their "radix bits": unsigned integers as they are, signed integers with
//! the sign bit flipped, floats with the usual flip (negative: all bits inverted; positive: sign
//! bit set). For floats this is IEEE 754 `totalOrder`, the order of [`f32::total_cmp`]:
//! `-NaN < -inf < … < -0.0 < +0.0 < … < +inf < +NaN`, so `-0.0` sorts before `+0.0` and NaNs go
//! to the ends by their sign. Every sort here is stable.
//!
//! # Segmented quicksort (§4.1, Figure 2)
//!
//! Start with one segment; per pass distribute each segment's first element (the pivot) across
//! the segment, compare every element with it (`>` on even passes, `>=` on odd ones), and
//! split-and-segment by the result; stop when a global check finds the vector sorted. Faithful
//! to the paper, including its weakness: with the first element as pivot, a reverse-sorted
//! input needs about two passes per element.
//!
//! ```
//! use segsparse::primitives::sort::cpu;
//! let (sorted, passes) = cpu::quicksort(&[5u32, 3, 7, 4, 6]);
//! assert_eq!(sorted, [3, 4, 5, 6, 7]);
//! assert_eq!(passes, 2); // Figure 2: two passes
//! assert_eq!(cpu::radix_sort(&[-1.5f32, 0.0, -0.0, 2.0]), [-1.5, -0.0, 0.0, 2.0]);
//! ```

use crate::gpu::kernels::kernel_source;

/// Keys the radix sorts accept: mapped to unsigned "radix bits" whose unsigned order is the
/// key order (see the module docs for floats).
pub trait RadixKey: Copy + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    /// The unsigned type of the radix bits (`u32` or `u64`).
    type Bits: Copy + Ord + Send + Sync + std::fmt::Debug + 'static;
    /// Number of key bits (32 or 64).
    const BITS: u32;
    /// How the kernels map the key to its bits: 0 unsigned, 1 signed integer, 2 float.
    const MODE: u32;
    /// The order-preserving radix bits of the key.
    fn to_radix(self) -> Self::Bits;
    /// The radix bits as u64 (for digit extraction in the references).
    fn radix_u64(self) -> u64;
}

impl RadixKey for u32 {
    type Bits = u32;
    const BITS: u32 = 32;
    const MODE: u32 = 0;
    fn to_radix(self) -> u32 {
        self
    }
    fn radix_u64(self) -> u64 {
        self as u64
    }
}

impl RadixKey for i32 {
    type Bits = u32;
    const BITS: u32 = 32;
    const MODE: u32 = 1;
    fn to_radix(self) -> u32 {
        (self as u32) ^ 0x8000_0000
    }
    fn radix_u64(self) -> u64 {
        self.to_radix() as u64
    }
}

impl RadixKey for f32 {
    type Bits = u32;
    const BITS: u32 = 32;
    const MODE: u32 = 2;
    fn to_radix(self) -> u32 {
        let b = self.to_bits();
        if b & 0x8000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000
        }
    }
    fn radix_u64(self) -> u64 {
        self.to_radix() as u64
    }
}

impl RadixKey for u64 {
    type Bits = u64;
    const BITS: u32 = 64;
    const MODE: u32 = 0;
    fn to_radix(self) -> u64 {
        self
    }
    fn radix_u64(self) -> u64 {
        self
    }
}

/// Radix sort kernels (kernels/device/radix_sort.cu).
pub const KERNELS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/radix_sort.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::primitives::sources::BLOCK_RADIX_RANK
    ]
);

/// Onesweep radix sort kernels (kernels/device/radix_onesweep.cu): the all-passes histogram and
/// one rank-and-scatter kernel per digit with a decoupled look-back over tiles.
pub const ONESWEEP_KERNELS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/radix_onesweep.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::primitives::sources::BLOCK_RADIX_RANK
    ]
);
/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use super::RadixKey;
    use crate::primitives::split;

    /// The keys in ascending radix order (stable).
    pub fn radix_sort<K: RadixKey>(keys: &[K]) -> Vec<K> {
        let mut out = keys.to_vec();
        out.sort_by_key(|k| k.to_radix());
        out
    }

    /// Key-value pairs sorted by key, stable (equal keys keep their input order).
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn radix_sort_pairs<K: RadixKey, V: Copy>(keys: &[K], values: &[V]) -> (Vec<K>, Vec<V>) {
        assert_eq!(
            keys.len(),
            values.len(),
            "radix_sort_pairs: {} keys but {} values",
            keys.len(),
            values.len()
        );
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by_key(|&i| keys[i].to_radix());
        (
            idx.iter().map(|&i| keys[i]).collect(),
            idx.iter().map(|&i| values[i]).collect(),
        )
    }

    /// The paper's 1-bit split radix sort, literally: one stable [`split`](split::cpu::split) per
    /// key bit, least significant first. Slow; it documents that the digit sort is a
    /// generalised split.
    pub fn split_radix_sort<K: RadixKey>(keys: &[K]) -> Vec<K> {
        let mut k = keys.to_vec();
        for bit in 0..K::BITS {
            let flags: Vec<bool> = k.iter().map(|x| (x.radix_u64() >> bit) & 1 == 1).collect();
            k = split::cpu::split(&k, &flags).0;
        }
        k
    }

    /// Sorts each segment `offsets[s]..offsets[s+1]` independently (stable).
    ///
    /// # Panics
    /// When the offsets are invalid for `keys.len()`.
    pub fn segmented_sort<K: RadixKey>(keys: &[K], offsets: &[u32]) -> Vec<K> {
        crate::primitives::segreduce::check_offsets(keys.len(), offsets);
        let mut out = keys.to_vec();
        for w in offsets.windows(2) {
            out[w[0] as usize..w[1] as usize].sort_by_key(|k| k.to_radix());
        }
        out
    }

    /// Sorts the key-value pairs of each segment by key (stable).
    ///
    /// # Panics
    /// When the lengths differ or the offsets are invalid.
    pub fn segmented_sort_pairs<K: RadixKey, V: Copy>(
        keys: &[K],
        values: &[V],
        offsets: &[u32],
    ) -> (Vec<K>, Vec<V>) {
        assert_eq!(keys.len(), values.len(), "segmented_sort_pairs: lengths");
        crate::primitives::segreduce::check_offsets(keys.len(), offsets);
        let mut ko = keys.to_vec();
        let mut vo = values.to_vec();
        for w in offsets.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            let (k, v) = radix_sort_pairs(&keys[a..b], &values[a..b]);
            ko[a..b].copy_from_slice(&k);
            vo[a..b].copy_from_slice(&v);
        }
        (ko, vo)
    }

    /// The paper's segmented quicksort (§4.1, Figure 2) with the CPU primitives: pivot
    /// distribute, compare (`>` on even passes, `>=` on odd ones), split-and-segment, until a
    /// global check finds the keys sorted. Returns the sorted keys and the number of passes.
    pub fn quicksort<K: RadixKey>(keys: &[K]) -> (Vec<K>, usize) {
        use crate::primitives::{distribute, Direction};
        let mut k = keys.to_vec();
        let mut heads = vec![false; k.len()];
        if let Some(h) = heads.first_mut() {
            *h = true;
        }
        let mut passes = 0;
        while !k.windows(2).all(|w| w[0].to_radix() <= w[1].to_radix()) {
            let pivot = distribute::cpu::segmented_distribute(&k, &heads, Direction::Forward);
            let flags: Vec<bool> = k
                .iter()
                .zip(&pivot)
                .map(|(x, p)| {
                    if passes % 2 == 0 {
                        x.to_radix() > p.to_radix()
                    } else {
                        x.to_radix() >= p.to_radix()
                    }
                })
                .collect();
            let (nk, nh) = split::cpu::split_and_segment(&k, &flags, &heads);
            k = nk;
            heads = nh;
            passes += 1;
        }
        (k, passes)
    }
}

/// GPU implementations (see the module docs). Sorting is in place: the caller's buffers hold
/// the result (the scratch buffers are swapped in when the last pass lands there).
#[cfg(feature = "cuda")]
pub mod gpu {
    use super::{RadixKey, KERNELS, ONESWEEP_KERNELS};
    use crate::error::{Error, Result};
    use crate::gpu::{DeviceBuffer, Gpu, KernelType, PushKernelArg};
    use crate::primitives::glue::{self, grid_stride, launch_err, len_u32, width};
    use crate::primitives::policy::DeviceClass;
    use crate::primitives::Direction;

    pub(crate) use crate::primitives::sources::{RADIX_ITEMS as ITEMS, RADIX_THREADS as THREADS};
    const TILE: usize = (THREADS * ITEMS) as usize;

    /// Keys below this count take the Onesweep path (its status words hold 30-bit counts).
    const ONESWEEP_MAX_N: usize = 1 << 30;
    /// Registers per thread the Onesweep launch bound aims at (it sets the blocks per SM).
    const ONESWEEP_REGS: u32 = 80;
    /// Sleep between the Onesweep look-back's polls, nanoseconds (0 = spin). The 256 spinning
    /// threads of every waiting block otherwise compete with the scatter's traffic for L2;
    /// measured on an H200 (same call, one process each, µs): keys 2^24 482 → 475, pairs 2^24
    /// 618 → 603, pairs 2^26 2172 → 2076 with 1000 ns (200 ns: 479 / 608 / 2081).
    const ONESWEEP_POLL_NS: u32 = 1000;
    /// Static shared memory of one block (the CUDA limit without opt-in).
    const SMEM_LIMIT: u32 = 48 * 1024;

    /// One device class's Onesweep row: threads per block, keys per thread for 4-byte keys
    /// alone and for 4-byte key-value pairs, and the look-back's sleep between polls
    /// (nanoseconds, 0 = spin).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct OnesweepRow {
        pub threads: u32,
        pub items4: u32,
        pub items_pairs: u32,
        pub poll_ns: u32,
    }

    /// The built-in row of a device class.
    ///
    /// H200 (and every device other than an H100): 256 threads, 28 keys per thread for 4-byte
    /// keys alone (a 7168-key tile averages 28 keys per digit, so the scattered stores come in
    /// runs of ~112 bytes), 24 for 4-byte key-value pairs, and half of 28 for 8-byte keys or
    /// values: the fastest shapes of the H200 sweep in
    /// benches/results/history/primitives.md (three blocks of 80 registers per SM), with
    /// [`ONESWEEP_POLL_NS`] between polls. H100: the same row, the fastest of its own sweep
    /// beside CUB (benches/results/primitives.md, u32 keys and pairs at 2^24 and 2^26, same
    /// call): 256 × 24 / 20 was 1–7 % slower, 256 × 20 / 16 8–16 %, 384 × 20 / 16 11–14 % on
    /// keys (pairs within ±1.5 %), 512 × 16 / 12 30–45 %; spinning instead of the 1000 ns sleep
    /// changed keys and pairs by about as much as two runs of the row differ (≤ 2 %).
    pub(crate) const fn onesweep_row(class: DeviceClass) -> OnesweepRow {
        match class {
            DeviceClass::H100 => OnesweepRow {
                threads: 256,
                items4: 28,
                items_pairs: 24,
                poll_ns: ONESWEEP_POLL_NS,
            },
            DeviceClass::H200 | DeviceClass::Other => OnesweepRow {
                threads: 256,
                items4: 28,
                items_pairs: 24,
                poll_ns: ONESWEEP_POLL_NS,
            },
        }
    }

    /// The Onesweep launch shape for a device of `class` (see [`OnesweepPolicy`] and
    /// [`onesweep_row`]).
    ///
    /// `SEGSPARSE_SORT_POLICY=TxI[,P]` (read once per process; T a multiple of 32 in
    /// 256..=1024) overrides the threads, the keys-only and the pairs items;
    /// `SEGSPARSE_SORT_MATCH=any` ranks with the `match.any` instruction instead of 8 ballots
    /// per key (measured 1.5x slower); `SEGSPARSE_SORT_EARLY_VALUES=0` loads a key-value sort's
    /// values after the key scatter instead of before the look-back (`OS_EARLY_VALUES`);
    /// `SEGSPARSE_SORT_POLL_NS=NS` (0..=10000) sleeps between the look-back's polls
    /// (`OS_POLL_NS`).
    pub(crate) fn onesweep_policy(class: DeviceClass) -> OnesweepPolicy {
        policy_from(onesweep_row(class), onesweep_env())
    }

    /// The `-D` defines of the Onesweep kernels for a device of `class` under this process's
    /// policy (what the embedded kernel archive compiles them with,
    /// [`crate::kernel_registry::variants`]).
    pub fn onesweep_defines(class: DeviceClass) -> Vec<(&'static str, String)> {
        let p = onesweep_policy(class);
        vec![
            ("OS_THREADS", p.threads.to_string()),
            ("OS_ITEMS", p.items4.to_string()),
            ("OS_ITEMS_PAIRS", p.items_pairs.to_string()),
            ("OS_ITEMS8", p.items8.to_string()),
            ("OS_MIN_BLOCKS", p.min_blocks.to_string()),
            ("OS_MATCH_ANY", u32::from(p.match_any).to_string()),
            ("OS_EARLY_VALUES", u32::from(p.early_values).to_string()),
            ("OS_POLL_NS", p.poll_ns.to_string()),
        ]
    }

    /// The environment's overrides of the Onesweep row, read once per process (the sort is on
    /// the hot path of every SpGEMM and setup).
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct OnesweepEnv {
        pub shape: Option<(u32, u32, Option<u32>)>,
        pub poll_ns: Option<u32>,
        pub match_any: bool,
        pub late_values: bool,
    }

    fn onesweep_env() -> OnesweepEnv {
        static ENV: std::sync::OnceLock<OnesweepEnv> = std::sync::OnceLock::new();
        *ENV.get_or_init(|| OnesweepEnv {
            shape: std::env::var("SEGSPARSE_SORT_POLICY")
                .ok()
                .and_then(|v| parse_shape(&v)),
            poll_ns: std::env::var("SEGSPARSE_SORT_POLL_NS")
                .ok()
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|&v| v <= 10_000),
            match_any: std::env::var("SEGSPARSE_SORT_MATCH").is_ok_and(|v| v == "any"),
            late_values: std::env::var("SEGSPARSE_SORT_EARLY_VALUES").is_ok_and(|v| v == "0"),
        })
    }

    /// `TxI[,P]`: threads (a multiple of 32 in 256..=1024), keys-only items, pairs items (1..=64).
    pub(crate) fn parse_shape(v: &str) -> Option<(u32, u32, Option<u32>)> {
        let (t, rest) = v.split_once('x')?;
        let (i, p) = match rest.split_once(',') {
            Some((i, p)) => (i, Some(p.trim().parse::<u32>().ok()?)),
            None => (rest, None),
        };
        let (t, i) = (t.trim().parse::<u32>().ok()?, i.trim().parse::<u32>().ok()?);
        let ok = |x: u32| (1..=64).contains(&x);
        (t % 32 == 0 && (256..=1024).contains(&t) && ok(i) && p.is_none_or(ok)).then_some((t, i, p))
    }

    /// A row with the overrides applied, clamped to the static shared memory of one block.
    pub(crate) fn policy_from(row: OnesweepRow, env: OnesweepEnv) -> OnesweepPolicy {
        let (threads, items4, pairs) =
            env.shape
                .unwrap_or((row.threads, row.items4, Some(row.items_pairs)));
        // OnesweepStorage: warps x 256 counts, 256 offsets, 8 totals, the tile id.
        let fixed = threads / 32 * 1024 + 1024 + 64;
        let fit = |bytes: u32| ((SMEM_LIMIT - fixed) / (threads * bytes)).max(1);
        OnesweepPolicy {
            threads,
            items4: items4.min(fit(4)),
            items_pairs: pairs.unwrap_or(items4).min(fit(4)),
            items8: items4.div_ceil(2).min(fit(8)),
            min_blocks: (65536 / (threads * ONESWEEP_REGS)).max(1),
            match_any: env.match_any,
            early_values: !env.late_values,
            poll_ns: env.poll_ns.unwrap_or(row.poll_ns),
        }
    }

    /// The Onesweep launch shape: threads per block, items per thread for 4-byte keys alone,
    /// for 4-byte key-value pairs and for 8-byte keys or values, minimum blocks per SM (the
    /// register bound), and the peer-matching method.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct OnesweepPolicy {
        pub threads: u32,
        pub items4: u32,
        pub items_pairs: u32,
        pub items8: u32,
        pub min_blocks: u32,
        pub match_any: bool,
        pub early_values: bool,
        pub poll_ns: u32,
    }

    /// `SEGSPARSE_SORT=3k` (read once per process) selects the three-kernel sort for every size,
    /// for comparisons.
    fn three_kernel_forced() -> bool {
        static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ENV.get_or_init(|| std::env::var("SEGSPARSE_SORT").is_ok_and(|v| v == "3k"))
    }

    /// Sorts `keys[..]` (and `values` along) by the radix bits `begin_bit..end_bit` of the
    /// keys under `mode` (0 unsigned, 1 signed, 2 float), stable, 8 bits per pass: Onesweep
    /// below 2^30 keys, the three-kernel sort above.
    pub(crate) fn radix_sort_bits<K: KernelType, V: KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        values: Option<&mut DeviceBuffer<V>>,
        mode: u32,
        begin_bit: u32,
        end_bit: u32,
    ) -> Result<()> {
        if keys.len() < ONESWEEP_MAX_N && !three_kernel_forced() {
            onesweep_bits(g, keys, values, mode, begin_bit, end_bit)
        } else {
            three_kernel_bits(g, keys, values, mode, begin_bit, end_bit)
        }
    }

    /// The Onesweep sort (kernels/device/radix_onesweep.cu): one histogram launch for every
    /// pass, then one rank-and-scatter launch per 8-bit digit.
    fn onesweep_bits<K: KernelType, V: KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        mut values: Option<&mut DeviceBuffer<V>>,
        mode: u32,
        begin_bit: u32,
        end_bit: u32,
    ) -> Result<()> {
        let n = keys.len();
        if let Some(v) = values.as_ref() {
            assert_eq!(
                n,
                v.len(),
                "radix_sort_pairs: {n} keys but {} values",
                v.len()
            );
        }
        assert!(
            end_bit <= 8 * std::mem::size_of::<K>() as u32,
            "radix sort: end bit {end_bit} past the {}-bit key",
            8 * std::mem::size_of::<K>()
        );
        let n32 = len_u32(n, "radix_sort")?;
        if n <= 1 || begin_bit >= end_bit {
            return Ok(());
        }
        let wide =
            std::mem::size_of::<K>() == 8 || (values.is_some() && std::mem::size_of::<V>() == 8);
        let class = crate::primitives::gpu::device_class(g);
        let p = onesweep_policy(class);
        let items = if wide {
            p.items8
        } else if values.is_some() {
            p.items_pairs
        } else {
            p.items4
        };
        let threads = p.threads;
        let defines = onesweep_defines(class);
        let tile = (threads * items) as usize;
        let tiles = n.div_ceil(tile);
        let t32 = tiles as u32;
        let passes = (end_bit - begin_bit).div_ceil(8);
        // Workspace (zeroed): bins[8][256], done counter, tile counters (WS_STATUS = 8*256+32
        // words of header), then passes x tiles x 256 status words.
        let header = 8 * 256 + 32;
        let mut ws = g.zeros::<u32>(header + passes as usize * tiles * 256)?;
        // SAFETY: every pass writes all n keys (and values) of its output.
        let mut alt_k = unsafe { g.alloc::<K>(n)? };
        let mut alt_v = match values.as_ref() {
            Some(_) => Some(unsafe { g.alloc::<V>(n)? }),
            None => None,
        };
        let kw = width::<K>();
        let hist = format!("radix_histogram_{kw}");
        let sweep = match values {
            Some(_) => format!("radix_onesweep_pairs_{kw}_{}", width::<V>()),
            None => format!("radix_onesweep_{kw}"),
        };
        let fhist = g.function(&ONESWEEP_KERNELS, &hist, &defines)?;
        let fsweep = g.function(&ONESWEEP_KERNELS, &sweep, &defines)?;
        let hist_blocks = (n.div_ceil(256 * 8) as u32).min(g.sm_count() * 8).max(1);
        let mut b = g.stream().launch_builder(&fhist);
        b.arg(&*keys)
            .arg(&n32)
            .arg(&begin_bit)
            .arg(&end_bit)
            .arg(&mode)
            .arg(&mut ws);
        // SAFETY: radix_histogram_bK(const K* keys, u32 n, u32 begin_bit, u32 end_bit, u32 mode,
        // u32* ws): keys holds n; ws holds the 8 x 256 bins and the done counter.
        unsafe { b.launch(Gpu::cfg(hist_blocks, 256, 0)) }.map_err(launch_err(&hist))?;
        let mut in_alt = false;
        for pass in 0..passes {
            let shift = begin_bit + 8 * pass;
            let nbits = (end_bit - shift).min(8);
            let (src_k, dst_k) = if in_alt {
                (&alt_k, &mut *keys)
            } else {
                (&*keys, &mut alt_k)
            };
            let mut b = g.stream().launch_builder(&fsweep);
            b.arg(src_k).arg(dst_k);
            let vbufs = match (values.as_deref_mut(), alt_v.as_mut()) {
                (Some(v), Some(av)) => Some(if in_alt { (&*av, v) } else { (&*v, av) }),
                _ => None,
            };
            if let Some((sv, dv)) = vbufs {
                b.arg(sv).arg(dv);
            }
            b.arg(&n32)
                .arg(&shift)
                .arg(&nbits)
                .arg(&mode)
                .arg(&pass)
                .arg(&t32)
                .arg(&mut ws);
            // SAFETY: radix_onesweep[_pairs]_bK[_bV](const K* kin, K* kout, [const V* vin,
            // V* vout,] u32 n, u32 shift, u32 nbits, u32 mode, u32 pass, u32 num_tiles, u32* ws):
            // key/value buffers hold n, ws the header and passes x num_tiles x 256 status
            // words; the grid is num_tiles blocks of OS_THREADS (the tile ids drawn from the
            // pass's counter are exactly 0..num_tiles).
            unsafe { b.launch(Gpu::cfg(t32, threads, 0)) }.map_err(launch_err(&sweep))?;
            in_alt = !in_alt;
        }
        if in_alt {
            std::mem::swap(keys, &mut alt_k);
            if let (Some(v), Some(av)) = (values, alt_v.as_mut()) {
                std::mem::swap(v, av);
            }
        }
        Ok(())
    }

    /// The three-kernel sort (kernels/device/radix_sort.cu): per pass an upsweep count, a
    /// device scan of the count table and a downsweep. Used from 2^30 keys on.
    fn three_kernel_bits<K: KernelType, V: KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        mut values: Option<&mut DeviceBuffer<V>>,
        mode: u32,
        begin_bit: u32,
        end_bit: u32,
    ) -> Result<()> {
        let n = keys.len();
        if let Some(v) = values.as_ref() {
            assert_eq!(
                n,
                v.len(),
                "radix_sort_pairs: {n} keys but {} values",
                v.len()
            );
        }
        let n32 = len_u32(n, "radix_sort")?;
        if n <= 1 || begin_bit >= end_bit {
            return Ok(());
        }
        let tiles = n.div_ceil(TILE);
        let t32 = tiles as u32;
        // SAFETY: the upsweep writes every (digit, tile) count; downsweeps write all n.
        let mut hist = unsafe { g.alloc::<u32>(256 * tiles)? };
        let mut offs = unsafe { g.alloc::<u32>(256 * tiles)? };
        let mut ws = crate::primitives::gpu::workspace(g, 256 * tiles)?;
        let mut alt_k = unsafe { g.alloc::<K>(n)? };
        let mut alt_v = match values.as_ref() {
            Some(_) => Some(unsafe { g.alloc::<V>(n)? }),
            None => None,
        };
        let kw = width::<K>();
        let up = format!("radix_upsweep_{kw}");
        let down = match values {
            Some(_) => format!("radix_downsweep_pairs_{kw}_{}", width::<V>()),
            None => format!("radix_downsweep_{kw}"),
        };
        let fup = g.function(&KERNELS, &up, &[])?;
        let fdown = g.function(&KERNELS, &down, &[])?;
        let mut in_alt = false;
        let mut shift = begin_bit;
        while shift < end_bit {
            let nbits = (end_bit - shift).min(8);
            let (src_k, dst_k) = if in_alt {
                (&alt_k, &mut *keys)
            } else {
                // Two disjoint buffers: borrow them separately.
                (&*keys, &mut alt_k)
            };
            let mut b = g.stream().launch_builder(&fup);
            b.arg(src_k)
                .arg(&n32)
                .arg(&shift)
                .arg(&nbits)
                .arg(&mode)
                .arg(&mut hist)
                .arg(&t32);
            // SAFETY: radix_upsweep_bK(const K* keys, u32 n, u32 shift, u32 nbits, u32 mode,
            // u32* hist, u32 num_tiles): keys has n, hist 256 * num_tiles.
            unsafe { b.launch(Gpu::cfg(t32, THREADS, 0)) }.map_err(launch_err(&up))?;
            glue::scan_u32_with(g, &hist, &mut offs, false, &mut ws)?;
            let mut b = g.stream().launch_builder(&fdown);
            b.arg(src_k).arg(dst_k);
            // Values ping-pong the same way as keys.
            let vbufs = match (values.as_deref_mut(), alt_v.as_mut()) {
                (Some(v), Some(av)) => Some(if in_alt { (&*av, v) } else { (&*v, av) }),
                _ => None,
            };
            if let Some((sv, dv)) = vbufs {
                b.arg(sv).arg(dv);
            }
            b.arg(&n32)
                .arg(&shift)
                .arg(&nbits)
                .arg(&mode)
                .arg(&offs)
                .arg(&t32);
            // SAFETY: radix_downsweep[_pairs]_bK[_bV](const K* kin, K* kout, [const V* vin,
            // V* vout,] u32 n, u32 shift, u32 nbits, u32 mode, const u32* offsets,
            // u32 num_tiles): all key/value buffers hold n, offsets 256 * num_tiles.
            unsafe { b.launch(Gpu::cfg(t32, THREADS, 0)) }.map_err(launch_err(&down))?;
            in_alt = !in_alt;
            shift += nbits;
        }
        if in_alt {
            std::mem::swap(keys, &mut alt_k);
            if let (Some(v), Some(av)) = (values, alt_v.as_mut()) {
                std::mem::swap(v, av);
            }
        }
        Ok(())
    }

    /// Sorts the keys in place, ascending in radix order (floats: IEEE totalOrder), stable.
    pub fn radix_sort<K: RadixKey + KernelType>(g: &Gpu, keys: &mut DeviceBuffer<K>) -> Result<()> {
        radix_sort_bits::<K, u32>(g, keys, None, K::MODE, 0, K::BITS)
    }

    /// Sorts key-value pairs by key in place, stable (equal keys keep their input order).
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn radix_sort_pairs<K: RadixKey + KernelType, V: KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        radix_sort_bits(g, keys, Some(values), K::MODE, 0, K::BITS)
    }

    fn gather<T: KernelType>(
        g: &Gpu,
        src: &DeviceBuffer<T>,
        idx: &DeviceBuffer<u32>,
    ) -> Result<DeviceBuffer<T>> {
        let n = idx.len();
        let n32 = len_u32(n, "gather")?;
        // SAFETY: gather writes all n entries.
        let mut out = unsafe { g.alloc::<T>(n)? };
        grid_stride!(
            g,
            &format!("gather_{}", width::<T>()),
            n,
            src,
            idx,
            &n32,
            &mut out
        );
        Ok(out)
    }

    /// The permutation that sorts `keys` within each segment (stable): a key sort carrying the
    /// index, then a stable sort by segment id over only the bits the segment count needs.
    fn segmented_permutation<K: RadixKey + KernelType>(
        g: &Gpu,
        keys: &DeviceBuffer<K>,
        offsets: &DeviceBuffer<u32>,
    ) -> Result<DeviceBuffer<u32>> {
        let n = keys.len();
        let m = offsets.len() - 1;
        let n32 = len_u32(n, "segmented_sort")?;
        let m32 = len_u32(m, "segmented_sort")?;
        // SAFETY: the kernels write all n entries.
        let (mut ids, mut idx) = unsafe { (g.alloc::<u32>(n)?, g.alloc::<u32>(n)?) };
        grid_stride!(g, "segment_ids", n, offsets, &m32, &n32, &mut ids);
        grid_stride!(g, "iota_u32", n, &mut idx, &n32);
        let mut k = gather(g, keys, &idx)?; // a copy of the keys
        radix_sort_bits(g, &mut k, Some(&mut idx), K::MODE, 0, K::BITS)?;
        let mut seg = gather(g, &ids, &idx)?;
        let seg_bits = 32 - (m.max(1) as u32 - 1).leading_zeros().min(32);
        radix_sort_bits(g, &mut seg, Some(&mut idx), 0, 0, seg_bits.max(1))?;
        Ok(idx)
    }

    /// Sorts each segment `offsets[s]..offsets[s+1]` in place (stable).
    ///
    /// # Panics
    /// When `offsets` is empty.
    pub fn segmented_sort<K: RadixKey + KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        offsets: &DeviceBuffer<u32>,
    ) -> Result<()> {
        assert!(
            !offsets.is_empty(),
            "segment offsets must have at least one entry"
        );
        if keys.len() <= 1 {
            return Ok(());
        }
        let perm = segmented_permutation(g, keys, offsets)?;
        *keys = gather(g, keys, &perm)?;
        Ok(())
    }

    /// Sorts the key-value pairs of each segment by key in place (stable).
    ///
    /// # Panics
    /// When the lengths differ or `offsets` is empty.
    pub fn segmented_sort_pairs<K: RadixKey + KernelType, V: KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
        offsets: &DeviceBuffer<u32>,
    ) -> Result<()> {
        assert!(
            !offsets.is_empty(),
            "segment offsets must have at least one entry"
        );
        assert_eq!(keys.len(), values.len(), "segmented_sort_pairs: lengths");
        if keys.len() <= 1 {
            return Ok(());
        }
        let perm = segmented_permutation(g, keys, offsets)?;
        *keys = gather(g, keys, &perm)?;
        *values = gather(g, values, &perm)?;
        Ok(())
    }

    /// The paper's segmented quicksort (§4.1, Figure 2) in place; returns the number of
    /// passes. Per pass: distribute the pivot (each segment's first key) with a segmented scan,
    /// compare (`>` on even passes, `>=` on odd ones), split-and-segment (three segmented
    /// scans and a scatter that also writes the new head flags). After every pass a device
    /// reduction counts the descents and only that count (4 bytes) is read by the host, as
    /// the paper's "global reduction after each step".
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if the loop has not finished after `2n + 2` passes (cannot
    /// happen for a correct implementation: a pass either splits a segment or the next one
    /// does), besides device errors.
    pub fn quicksort<K: RadixKey + KernelType>(
        g: &Gpu,
        keys: &mut DeviceBuffer<K>,
    ) -> Result<usize> {
        let n = keys.len();
        let n32 = len_u32(n, "quicksort")?;
        let mut words = g.zeros::<u32>(n.div_ceil(32).max(1))?;
        grid_stride!(g, "or_u32", 1, &mut words, &1u32);
        let mut heads = crate::primitives::gpu::HeadFlags::from_words(words, n);
        let cmp = format!("qs_compare_{}", width::<K>());
        let desc = format!("count_descents_{}", width::<K>());
        let mut counter = g.zeros::<u32>(1)?;
        let mode = K::MODE;
        let mut passes = 0usize;
        loop {
            g.stream()
                .memset_zeros(&mut counter)
                .map_err(|e| Error::cuda("memset", e))?;
            grid_stride!(g, &desc, n, &*keys, &n32, &mode, &mut counter);
            if g.download(&counter)?[0] == 0 {
                return Ok(passes);
            }
            if passes > 2 * n + 2 {
                return Err(Error::InvalidInput(format!(
                    "quicksort did not finish after {passes} passes on {n} keys"
                )));
            }
            let pivot = crate::primitives::distribute::gpu::segmented_distribute(
                g,
                keys,
                &heads,
                Direction::Forward,
            )?;
            // SAFETY: qs_compare writes all n entries.
            let mut e = unsafe { g.alloc::<u32>(n)? };
            let ge = (passes % 2) as u32;
            grid_stride!(g, &cmp, n, &*keys, &pivot, &n32, &mode, &ge, &mut e);
            let (k2, h2) = crate::primitives::split::gpu::split_and_segment_e(g, keys, &e, &heads)?;
            *keys = k2;
            heads = h2;
            passes += 1;
        }
    }
}

#[cfg(all(test, feature = "cuda"))]
mod policy_tests {
    use super::gpu::{onesweep_row, parse_shape, policy_from, OnesweepEnv};
    use crate::primitives::policy::DeviceClass;

    #[test]
    fn onesweep_rows_per_class() {
        for c in DeviceClass::ALL {
            let row = onesweep_row(c);
            let p = policy_from(row, OnesweepEnv::default());
            assert_eq!(p.threads, row.threads, "{c:?}");
            assert_eq!(p.items4, row.items4, "{c:?}");
            assert_eq!(p.items_pairs, row.items_pairs, "{c:?}");
            assert_eq!(p.items8, row.items4.div_ceil(2), "{c:?}");
            assert_eq!(p.poll_ns, row.poll_ns, "{c:?}");
            assert!(p.min_blocks >= 1 && p.early_values && !p.match_any, "{c:?}");
        }
        assert_eq!(
            onesweep_row(DeviceClass::Other),
            onesweep_row(DeviceClass::H200)
        );
    }

    #[test]
    fn onesweep_shape_overrides_parse_and_clamp() {
        assert_eq!(parse_shape("256x20,16"), Some((256, 20, Some(16))));
        assert_eq!(parse_shape("384x18"), Some((384, 18, None)));
        assert_eq!(parse_shape("250x20"), None);
        assert_eq!(parse_shape("128x20"), None);
        assert_eq!(parse_shape("256x0"), None);
        assert_eq!(parse_shape("256x20,x"), None);
        // 1024 threads x 64 keys cannot fit 48 KB of shared memory: clamped.
        let env = OnesweepEnv {
            shape: parse_shape("1024x64"),
            ..OnesweepEnv::default()
        };
        let p = policy_from(onesweep_row(DeviceClass::H100), env);
        assert_eq!(p.threads, 1024);
        assert!(p.items4 * p.threads * 4 + p.threads / 32 * 1024 + 1088 <= 48 * 1024);
        assert!(p.items8 * p.threads * 8 + p.threads / 32 * 1024 + 1088 <= 48 * 1024);
    }
}
