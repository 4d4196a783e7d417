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

use crate::gpu::kernels::kernel_source;

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

/// Compact kernels (kernels/device/compact.cu).
pub const KERNELS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/compact.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::primitives::sources::BLOCK_SELECT
    ]
);
/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use super::Keep;
    use crate::primitives::glue::check_same_len;

    /// The elements whose flag is true, in input order (the count is the length).
    ///
    /// # Panics
    /// When `values` and `flags` differ in length.
    pub fn compact<T: Copy>(values: &[T], flags: &[bool]) -> Vec<T> {
        check_same_len("compact", (values.len(), "values"), (flags.len(), "flags"));
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
        check_same_len(
            "compact_pairs",
            (keys.len(), "keys"),
            (values.len(), "values"),
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

/// GPU implementations: flags are packed one bit per element (see
/// [`pack_flags`](crate::primitives::pack_flags)); the kept count comes back to the host only
/// when the call returns.
#[cfg(feature = "cuda")]
pub mod gpu {
    use super::{Keep, KERNELS};
    use crate::error::Result;
    use crate::gpu::kernels::KernelSource;
    use crate::gpu::{kernel_name, DeviceBuffer, Gpu, KernelType, PushKernelArg};
    use crate::primitives::glue::{self, launch_err, len_u32, width};
    use crate::primitives::Direction;

    use crate::primitives::sources::SELECT_ITEMS as ITEMS;
    pub(crate) use crate::primitives::sources::SELECT_THREADS as THREADS;
    /// Elements per tile.
    pub(crate) const TILE: usize = (THREADS * ITEMS) as usize;

    /// Pass 1 + the scan: runs `count` (which fills one count per tile) and returns the
    /// inclusive scan of the counts (its last entry is the total).
    pub(crate) fn scanned_tile_counts(
        g: &Gpu,
        tiles: u32,
        count: impl FnOnce(&mut DeviceBuffer<u32>) -> Result<()>,
    ) -> Result<DeviceBuffer<u32>> {
        // SAFETY: every entry is written by the count kernel (one per tile) before it is read.
        let mut counts = unsafe { g.alloc::<u32>(tiles as usize)? };
        count(&mut counts)?;
        glue::scan_u32(g, &counts, Direction::Forward, true)
    }

    /// The last entry of `incl` (the total), copied to the host.
    pub(crate) fn total(g: &Gpu, incl: &DeviceBuffer<u32>) -> Result<usize> {
        let last = incl.slice(incl.len() - 1..);
        Ok(g.download(&last)?[0] as usize)
    }

    pub(crate) fn count_flag_bits(
        g: &Gpu,
        src: &crate::gpu::kernels::KernelSource,
        entry: &str,
        flags: &DeviceBuffer<u32>,
        n: u32,
        tiles: u32,
    ) -> Result<DeviceBuffer<u32>> {
        scanned_tile_counts(g, tiles, |counts| {
            let f = g.function(src, entry, &[])?;
            let mut b = g.stream().launch_builder(&f);
            b.arg(flags).arg(&n).arg(counts);
            // SAFETY: <entry>(const u32* words, u32 n, u32* tile_counts): words holds n bits,
            // counts one entry per tile.
            unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(entry))?;
            Ok(())
        })
    }

    /// The elements whose flag bit is set, in order, and their count. The output buffer has
    /// `values.len()` elements; those past the count are unspecified.
    ///
    /// # Panics
    /// When `flags` holds fewer than `values.len()` bits.
    pub fn compact<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<T>, usize)> {
        scatter_by_bits(g, &KERNELS, "compact", values, flags)
    }

    /// The key-value pairs whose flag bit is set, in order, and their count.
    ///
    /// # Panics
    /// When the lengths differ or `flags` holds too few bits.
    pub fn compact_pairs<K: KernelType, V: KernelType>(
        g: &Gpu,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>, usize)> {
        scatter_pairs_by_bits(g, &KERNELS, "compact", keys, values, flags)
    }

    /// The shape that compaction and split share: a count kernel `<root>_count_bits` fills one
    /// count per tile from the flag bits, the counts are scanned, and a scatter kernel
    /// `<root>_bits_<w>` writes every element to its place. Returns the output and the total of
    /// the counts (kept elements for compact, falses for split); the total is the only value
    /// that comes back to the host.
    pub(crate) fn scatter_by_bits<T: KernelType>(
        g: &Gpu,
        src: &KernelSource,
        root: &str,
        values: &DeviceBuffer<T>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<T>, usize)> {
        let n = values.len();
        glue::check_words(root, flags.len(), n);
        let n32 = len_u32(n, root)?;
        // SAFETY: the scatter kernel writes every position the operation defines (compact: the
        // first `count`; split: all n, a permutation); the rest is documented as unspecified.
        let mut out = unsafe { g.alloc::<T>(n.max(1))? };
        if n == 0 {
            return Ok((out, 0));
        }
        let tiles = n.div_ceil(TILE) as u32;
        let incl = count_flag_bits(g, src, &format!("{root}_count_bits"), flags, n32, tiles)?;
        let entry = format!("{root}_bits_{}", width::<T>());
        let f = g.function(src, &entry, &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(values)
            .arg(flags)
            .arg(&n32)
            .arg(&incl)
            .arg(&tiles)
            .arg(&mut out);
        // SAFETY: <root>_bits_bN(const K* x, const u32* words, u32 n, const u32* tile_incl,
        // u32 num_tiles, K* out); x and out hold n elements, tile_incl num_tiles.
        unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(&entry))?;
        let count = total(g, &incl)?;
        Ok((out, count))
    }

    /// [`scatter_by_bits`] of key-value pairs: the scatter kernel is
    /// `<root>_bits_pairs_<wk>_<wv>`.
    pub(crate) fn scatter_pairs_by_bits<K: KernelType, V: KernelType>(
        g: &Gpu,
        src: &KernelSource,
        root: &str,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>, usize)> {
        let n = keys.len();
        assert_eq!(
            n,
            values.len(),
            "{root}_pairs: {n} keys but {} values",
            values.len()
        );
        glue::check_words(root, flags.len(), n);
        let n32 = len_u32(n, root)?;
        // SAFETY: as in `scatter_by_bits`, for both outputs.
        let (mut ko, mut vo) = unsafe { (g.alloc::<K>(n.max(1))?, g.alloc::<V>(n.max(1))?) };
        if n == 0 {
            return Ok((ko, vo, 0));
        }
        let tiles = n.div_ceil(TILE) as u32;
        let incl = count_flag_bits(g, src, &format!("{root}_count_bits"), flags, n32, tiles)?;
        let entry = format!("{root}_bits_pairs_{}_{}", width::<K>(), width::<V>());
        let f = g.function(src, &entry, &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(keys)
            .arg(values)
            .arg(flags)
            .arg(&n32)
            .arg(&incl)
            .arg(&tiles)
            .arg(&mut ko)
            .arg(&mut vo);
        // SAFETY: <root>_bits_pairs_bK_bV(const K*, const V*, const u32* words, u32 n,
        // const u32* tile_incl, u32 num_tiles, K*, V*): every buffer is at least n long.
        unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(&entry))?;
        let count = total(g, &incl)?;
        Ok((ko, vo, count))
    }

    fn count_pred<T: KernelType + PartialOrd>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        n: u32,
        keep: Keep<T>,
        tiles: u32,
    ) -> Result<DeviceBuffer<u32>> {
        let (code, c) = keep.code();
        scanned_tile_counts(g, tiles, |counts| {
            let entry = kernel_name::<T>("compact_count_pred");
            let f = g.function(&KERNELS, &entry, &[])?;
            let mut b = g.stream().launch_builder(&f);
            b.arg(values).arg(&n).arg(&code).arg(&c).arg(counts);
            // SAFETY: compact_count_pred_T(const T* x, u32 n, u32 code, T c, u32* tile_counts).
            unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(&entry))?;
            Ok(())
        })
    }

    /// The elements for which `keep` holds, in order, and their count (IEEE comparisons, as on
    /// the CPU).
    pub fn compact_if<T: KernelType + PartialOrd>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        keep: Keep<T>,
    ) -> Result<(DeviceBuffer<T>, usize)> {
        let n = values.len();
        let n32 = len_u32(n, "compact_if")?;
        // SAFETY: the first `count` elements are written.
        let mut out = unsafe { g.alloc::<T>(n.max(1))? };
        if n == 0 {
            return Ok((out, 0));
        }
        let tiles = n.div_ceil(TILE) as u32;
        let incl = count_pred(g, values, n32, keep, tiles)?;
        let (code, c) = keep.code();
        let entry = kernel_name::<T>("compact_pred");
        let f = g.function(&KERNELS, &entry, &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(values)
            .arg(&n32)
            .arg(&code)
            .arg(&c)
            .arg(&incl)
            .arg(&tiles)
            .arg(&mut out);
        // SAFETY: compact_pred_T(const T* x, u32 n, u32 code, T c, const u32* tile_incl,
        // u32 num_tiles, T* out); x and out hold n elements.
        unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(&entry))?;
        let count = total(g, &incl)?;
        Ok((out, count))
    }

    /// The key-value pairs whose key satisfies `keep`, in order, and their count.
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn compact_pairs_if<K: KernelType + PartialOrd, V: KernelType>(
        g: &Gpu,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        keep: Keep<K>,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>, usize)> {
        let n = keys.len();
        glue::check_same_len("compact_pairs_if", (n, "keys"), (values.len(), "values"));
        let n32 = len_u32(n, "compact_pairs_if")?;
        // SAFETY: the first `count` elements of both outputs are written.
        let (mut ko, mut vo) = unsafe { (g.alloc::<K>(n.max(1))?, g.alloc::<V>(n.max(1))?) };
        if n == 0 {
            return Ok((ko, vo, 0));
        }
        let tiles = n.div_ceil(TILE) as u32;
        let incl = count_pred(g, keys, n32, keep, tiles)?;
        let (code, c) = keep.code();
        let entry = format!(
            "{}_{}",
            kernel_name::<K>("compact_pred_pairs"),
            width::<V>()
        );
        let f = g.function(&KERNELS, &entry, &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(keys)
            .arg(values)
            .arg(&n32)
            .arg(&code)
            .arg(&c)
            .arg(&incl)
            .arg(&tiles)
            .arg(&mut ko)
            .arg(&mut vo);
        // SAFETY: compact_pred_pairs_T_bV(const T*, const V*, u32 n, u32 code, T c,
        // const u32* tile_incl, u32 num_tiles, T*, V*): every buffer is at least n long.
        unsafe { b.launch(Gpu::cfg(tiles, THREADS, 0)) }.map_err(launch_err(&entry))?;
        let count = total(g, &incl)?;
        Ok((ko, vo, count))
    }
}
