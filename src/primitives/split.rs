//! Split (stable partition by a flag) and split-and-segment (Sengupta et al. 2007, §2.3.3).
//!
//! Split moves every element flagged `false` to the front and every element flagged `true` to
//! the back, each group keeping its input order. Blelloch's formulation needs two enumerates;
//! the paper derives the `true` addresses from the single `false` enumerate instead:
//! `f = enumerate(!flag)`, `NF` = total number of falses, `t = i − f + NF`, and
//! `addr = flag ? t : f`. [`cpu::split_addresses`] is that formulation, kept as the paper's
//! worked example; the GPU split computes the same addresses with one block-local scan per tile
//! and a scan of per-tile counts.
//!
//! Split-and-segment does an independent stable split inside every segment and makes the
//! falses and the trues of each segment two new segments (an empty half makes no segment). It
//! is the step of the paper's segmented quicksort (§4.1).
//!
//! ```
//! use segsparse::primitives::split::cpu;
//! // The paper's example: in = [t f t f f t f]
//! let flags = [true, false, true, false, false, true, false];
//! assert_eq!(cpu::split_addresses(&flags), [4, 0, 5, 1, 2, 6, 3]);
//! let (out, nf) = cpu::split(&[0, 1, 2, 3, 4, 5, 6], &flags);
//! assert_eq!((out, nf), (vec![1, 3, 4, 6, 0, 2, 5], 4));
//! ```

use crate::gpu::kernels::kernel_source;

/// Split kernels (kernels/device/split.cu).
pub const KERNELS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/split.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::primitives::sources::BLOCK_SELECT
    ]
);
/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use crate::primitives::enumerate;
    use crate::primitives::Direction;

    fn check(what: &str, a: usize, b: usize) {
        assert_eq!(a, b, "{what}: {a} values but {b} flags");
    }

    /// The destination of every element under split, computed with the paper's one-enumerate
    /// formulation: `f = enumerate(!flag)`, `NF = f[n−1] + !flag[n−1]`, `addr = flag ? i − f +
    /// NF : f`.
    pub fn split_addresses(flags: &[bool]) -> Vec<u32> {
        let e: Vec<bool> = flags.iter().map(|&t| !t).collect();
        let f = enumerate::cpu::enumerate(&e, Direction::Forward);
        let nf = match (f.last(), e.last()) {
            (Some(&fl), Some(&el)) => fl + el as u32,
            _ => 0,
        };
        (0..flags.len())
            .map(|i| if e[i] { f[i] } else { i as u32 - f[i] + nf })
            .collect()
    }

    /// Stable partition: the elements flagged `false` in input order, then those flagged
    /// `true` in input order. Returns the output and the number of falses.
    ///
    /// # Panics
    /// When `values` and `flags` differ in length.
    pub fn split<T: Copy>(values: &[T], flags: &[bool]) -> (Vec<T>, usize) {
        check("split", values.len(), flags.len());
        let mut out: Vec<T> = values
            .iter()
            .zip(flags)
            .filter(|(_, &f)| !f)
            .map(|(&v, _)| v)
            .collect();
        let nf = out.len();
        out.extend(
            values
                .iter()
                .zip(flags)
                .filter(|(_, &f)| f)
                .map(|(&v, _)| v),
        );
        (out, nf)
    }

    /// [`split`] of key-value pairs by a flag per pair. Returns keys, values and the number of
    /// falses.
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn split_pairs<K: Copy, V: Copy>(
        keys: &[K],
        values: &[V],
        flags: &[bool],
    ) -> (Vec<K>, Vec<V>, usize) {
        check("split_pairs", keys.len(), flags.len());
        check("split_pairs", values.len(), flags.len());
        let (k, nf) = split(keys, flags);
        let (v, _) = split(values, flags);
        (k, v, nf)
    }

    /// Split within every segment: per segment the falses, then the trues, each a new segment.
    /// `heads[i]` marks the first element of a segment (element 0 always starts one). Returns
    /// the permuted values and the new head flags (an empty half makes no segment, so a
    /// segment that is all false or all true stays one segment).
    ///
    /// ```
    /// use segsparse::primitives::split::cpu;
    /// // split-and-segment([at bf ct][df et ff]) = [bf][at ct][df ff][et]
    /// let v = ['a', 'b', 'c', 'd', 'e', 'f'];
    /// let flags = [true, false, true, false, true, false];
    /// let heads = [true, false, false, true, false, false];
    /// let (out, h) = cpu::split_and_segment(&v, &flags, &heads);
    /// assert_eq!(out, ['b', 'a', 'c', 'd', 'f', 'e']);
    /// assert_eq!(h, [true, true, false, true, false, true]);
    /// ```
    ///
    /// # Panics
    /// When the lengths differ.
    pub fn split_and_segment<T: Copy>(
        values: &[T],
        flags: &[bool],
        heads: &[bool],
    ) -> (Vec<T>, Vec<bool>) {
        check("split_and_segment", values.len(), flags.len());
        check("split_and_segment", values.len(), heads.len());
        let n = values.len();
        let mut out = Vec::with_capacity(n);
        let mut new_heads = vec![false; n];
        let mut start = 0;
        while start < n {
            let mut end = start + 1;
            while end < n && !heads[end] {
                end += 1;
            }
            let (part, nf) = split(&values[start..end], &flags[start..end]);
            new_heads[start] = true;
            if nf > 0 && nf < end - start {
                new_heads[start + nf] = true;
            }
            out.extend(part);
            start = end;
        }
        (out, new_heads)
    }
}

/// GPU implementations. Flags and head flags are packed one bit per element (see
/// [`pack_flags`](crate::primitives::pack_flags)).
#[cfg(feature = "cuda")]
pub mod gpu {
    use super::KERNELS;
    use crate::error::Result;
    use crate::gpu::{DeviceBuffer, Gpu, KernelType, PushKernelArg};
    use crate::primitives::compact::gpu::{scatter_by_bits, scatter_pairs_by_bits};
    use crate::primitives::glue::{self, launch_err, len_u32, stride_grid, width};
    use crate::primitives::gpu::HeadFlags;
    use crate::primitives::Direction;

    /// Stable partition by the flag bits: falses first, then trues. Returns the output and the
    /// number of falses.
    ///
    /// # Panics
    /// When `flags` holds fewer than `values.len()` bits.
    pub fn split<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<T>, usize)> {
        scatter_by_bits(g, &KERNELS, "split", values, flags)
    }

    /// [`split`] of key-value pairs. Returns keys, values and the number of falses.
    ///
    /// # Panics
    /// When the lengths differ or `flags` holds too few bits.
    pub fn split_pairs<K: KernelType, V: KernelType>(
        g: &Gpu,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        flags: &DeviceBuffer<u32>,
    ) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>, usize)> {
        scatter_pairs_by_bits(g, &KERNELS, "split", keys, values, flags)
    }

    /// Split within every segment; the falses and the trues of each segment become two new
    /// segments. Returns the permuted values and the new packed head flags. The paper's
    /// two-scan formulation plus one scan for the position in the segment (§2.3.3): the
    /// segmented enumerate of the falses `f`, the backward segmented count `b` (so that the
    /// number of falses of the segment is `f + b` without a distribute), the position `p`.
    ///
    /// # Panics
    /// When `flags` or `heads` hold too few bits.
    pub fn split_and_segment<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        flags: &DeviceBuffer<u32>,
        heads: &HeadFlags,
    ) -> Result<(DeviceBuffer<T>, HeadFlags)> {
        let n = values.len();
        glue::check_words("split_and_segment", flags.len(), n);
        assert_eq!(
            heads.len(),
            n,
            "split_and_segment: {n} values but {} head flags",
            heads.len()
        );
        let n32 = len_u32(n, "split_and_segment")?;
        if n == 0 {
            return Ok((
                g.zeros::<T>(1)?,
                HeadFlags::from_words(g.zeros::<u32>(1)?, 0),
            ));
        }
        let src = &crate::primitives::distribute::KERNELS;
        // SAFETY: bits_to_u32 writes all n entries.
        let mut e = unsafe { g.alloc::<u32>(n)? };
        let f = g.function(src, "bits_to_u32", &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(flags).arg(&n32).arg(&1u32).arg(&mut e);
        // SAFETY: bits_to_u32(const u32* words, u32 n, u32 invert, u32* out); out holds n.
        unsafe { b.launch(Gpu::cfg(stride_grid(g, n), 256, 0)) }
            .map_err(launch_err("bits_to_u32"))?;
        split_and_segment_e(g, values, &e, heads)
    }

    /// Split-and-segment from `e[i]` = 1 when element i goes to the falses half.
    pub(crate) fn split_and_segment_e<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        e: &DeviceBuffer<u32>,
        heads: &HeadFlags,
    ) -> Result<(DeviceBuffer<T>, HeadFlags)> {
        let n = values.len();
        let n32 = len_u32(n, "split_and_segment")?;
        let ones = crate::primitives::glue::ones(g, n)?;
        let fx = glue::segmented_scan_u32(g, e, heads, Direction::Forward, false)?;
        let bx = glue::segmented_scan_u32(g, e, heads, Direction::Backward, true)?;
        let px = glue::segmented_scan_u32(g, &ones, heads, Direction::Forward, false)?;
        // SAFETY: sas_scatter writes all n outputs (a permutation within each segment).
        let mut out = unsafe { g.alloc::<T>(n)? };
        let mut new_heads = g.zeros::<u32>(n.div_ceil(32))?;
        let entry = format!("sas_scatter_{}", width::<T>());
        let f = g.function(&crate::primitives::distribute::KERNELS, &entry, &[])?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(values)
            .arg(e)
            .arg(&fx)
            .arg(&bx)
            .arg(&px)
            .arg(&n32)
            .arg(&mut out)
            .arg(&mut new_heads);
        // SAFETY: sas_scatter_bN(const K* x, const u32* e, const u32* f, const u32* b,
        // const u32* p, u32 n, K* out, u32* new_heads); all n long, new_heads ceil(n/32) words.
        unsafe { b.launch(Gpu::cfg(stride_grid(g, n), 256, 0)) }.map_err(launch_err(&entry))?;
        Ok((out, HeadFlags::from_words(new_heads, n)))
    }
}
