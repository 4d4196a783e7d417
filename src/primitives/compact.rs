//! Compact (stream reduction, "pack"): keep the flagged elements, or the elements that satisfy
//! a predicate, in input order, and return how many were kept.
//!
//! Horn (2005) introduced it to the GPU as a prefix sum followed by a search; Sengupta et al.
//! (2007, §2.3.1) use enumerate for the addresses and scatter; Roger, Assarsson and Holzschuch
//! (2007) split the stream into blocks, compact each block and concatenate the blocks at offsets
//! given by a scan of the block counts. With scatter, the GPU version here is Roger et al.'s
//! hierarchy done in CUDA as they suggest in their conclusion: each tile counts its kept elements
//! (pass 1), the tile counts are scanned on the device, and each tile compacts itself with a
//! block-local scan and writes its run at the tile's offset (pass 2). The count stays on the
//! device until the call returns it.
//!
//! ```
//! use segsparse::primitives::compact::{cpu, Keep};
//! let v = [4.0f32, -1.0, 3.0, -2.0, 5.0];
//! assert_eq!(cpu::compact(&v, &[true, false, true, false, false]), [4.0, 3.0]);
//! assert_eq!(cpu::compact_if(&v, Keep::Greater(0.0)), [4.0, 3.0, 5.0]);
//! ```

/// A "keep where" predicate on values for [`cpu::compact_if`] and the GPU `compact_if`.
///
/// Comparisons follow IEEE rules for floats: a NaN is kept only by `NotEqual`; `-0.0` equals
/// `0.0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Keep<T> {
    /// Keep `x > c`.
    Greater(T),
    /// Keep `x >= c`.
    GreaterEq(T),
    /// Keep `x < c`.
    Less(T),
    /// Keep `x <= c`.
    LessEq(T),
    /// Keep `x == c`.
    Equal(T),
    /// Keep `x != c`.
    NotEqual(T),
}

impl<T: PartialOrd + Copy> Keep<T> {
    /// Whether `x` is kept.
    pub fn test(&self, x: T) -> bool {
        match *self {
            Keep::Greater(c) => x > c,
            Keep::GreaterEq(c) => x >= c,
            Keep::Less(c) => x < c,
            Keep::LessEq(c) => x <= c,
            Keep::Equal(c) => x == c,
            Keep::NotEqual(c) => x != c,
        }
    }

    /// The predicate's code in the kernels (0..=5 in declaration order) and its constant.
    pub fn code(&self) -> (u32, T) {
        match *self {
            Keep::Greater(c) => (0, c),
            Keep::GreaterEq(c) => (1, c),
            Keep::Less(c) => (2, c),
            Keep::LessEq(c) => (3, c),
            Keep::Equal(c) => (4, c),
            Keep::NotEqual(c) => (5, c),
        }
    }
}

/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use super::Keep;

    /// The elements whose flag is true, in input order (the count is the length).
    ///
    /// # Panics
    /// When `values` and `flags` differ in length.
    pub fn compact<T: Copy>(values: &[T], flags: &[bool]) -> Vec<T> {
        assert_eq!(
            values.len(),
            flags.len(),
            "compact: {} values but {} flags",
            values.len(),
            flags.len()
        );
        values
            .iter()
            .zip(flags)
            .filter(|(_, &f)| f)
            .map(|(&v, _)| v)
            .collect()
    }

    /// The key-value pairs whose flag is true, in input order.
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn compact_pairs<K: Copy, V: Copy>(
        keys: &[K],
        values: &[V],
        flags: &[bool],
    ) -> (Vec<K>, Vec<V>) {
        assert_eq!(
            keys.len(),
            values.len(),
            "compact_pairs: {} keys but {} values",
            keys.len(),
            values.len()
        );
        (compact(keys, flags), compact(values, flags))
    }

    /// The elements for which `keep` holds, in input order.
    pub fn compact_if<T: PartialOrd + Copy>(values: &[T], keep: Keep<T>) -> Vec<T> {
        values.iter().copied().filter(|&x| keep.test(x)).collect()
    }

    /// The key-value pairs whose key satisfies `keep`, in input order.
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn compact_pairs_if<K: PartialOrd + Copy, V: Copy>(
        keys: &[K],
        values: &[V],
        keep: Keep<K>,
    ) -> (Vec<K>, Vec<V>) {
        let flags: Vec<bool> = keys.iter().map(|&k| keep.test(k)).collect();
        compact_pairs(keys, values, &flags)
    }
}
