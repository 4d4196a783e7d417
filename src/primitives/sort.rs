//! Sorting built on split: LSD radix sort (keys and key-value pairs), segmented sort, and the
//! paper's segmented quicksort.
//!
//! # Radix sort
//!
//! The paper's global radix sort is a sequence of 1-bit splits (Sengupta et al. 2007, §5 "Sort";
//! Blelloch 1990): split by bit 0, then bit 1, and so on; each split is stable, so the result is
//! sorted. The GPU version generalises the split from one bit to an 8-bit digit (256 buckets
//! instead of 2): per pass, an upsweep kernel counts the digits of every tile, one device-wide
//! exclusive scan of the digit-major count table gives every (digit, tile) its output offset,
//! and a downsweep kernel ranks each tile's keys by digit with a block-local scan (warp
//! `match_any` peers and per-warp counters, then a scan over warps and digits) and scatters
//! them through shared memory so the global writes are contiguous runs. 4 passes for 32-bit keys,
//! 8 for 64-bit ones.
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
