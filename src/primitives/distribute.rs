//! Distribute (copy): every element of a segment receives the segment's head (forward) or tail
//! (backward) value (Sengupta et al. 2007, §2.3.2).
//!
//! The paper implements segmented distribute by zeroing every non-head element and running a
//! segmented inclusive sum-scan; the GPU version here does the same with a segmented "copy"
//! scan over the packed head flags (the operator keeps the left operand, so no zeroing is
//! needed and any element type works). Unsegmented distribute is a broadcast.
//!
//! ```
//! use segsparse::primitives::distribute::cpu;
//! use segsparse::primitives::Direction;
//! // distribute([a b c][d e]) = [a a a][d d]
//! let v = ['a', 'b', 'c', 'd', 'e'];
//! let h = [true, false, false, true, false];
//! assert_eq!(cpu::segmented_distribute(&v, &h, Direction::Forward), ['a', 'a', 'a', 'd', 'd']);
//! assert_eq!(cpu::segmented_distribute(&v, &h, Direction::Backward), ['c', 'c', 'c', 'e', 'e']);
//! ```

/// The grid-stride kernels of enumerate, distribute, split-and-segment, quicksort and segmented
/// sort (`kernels/device/segment_ops.cu`; declared in `glue`, which launches them).
pub use super::glue::SEGMENT_OPS as KERNELS;

/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use crate::primitives::glue::check_same_len;
    use crate::primitives::Direction;

    /// Every element receives `values[0]` (forward) or the last value (backward). Empty input
    /// gives an empty output.
    pub fn distribute<T: Copy>(values: &[T], dir: Direction) -> Vec<T> {
        let src = match dir {
            Direction::Forward => values.first(),
            Direction::Backward => values.last(),
        };
        src.map(|&v| vec![v; values.len()]).unwrap_or_default()
    }

    /// Every element receives the head (forward) or tail (backward) value of its segment.
    /// `heads[i]` marks the first element of a segment (element 0 always starts one).
    ///
    /// # Panics
    /// When `values` and `heads` differ in length.
    pub fn segmented_distribute<T: Copy>(values: &[T], heads: &[bool], dir: Direction) -> Vec<T> {
        check_same_len(
            "segmented_distribute",
            (values.len(), "values"),
            (heads.len(), "head flags"),
        );
        let n = values.len();
        let mut out = values.to_vec();
        match dir {
            Direction::Forward => {
                for i in 1..n {
                    if !heads[i] {
                        out[i] = out[i - 1];
                    }
                }
            }
            Direction::Backward => {
                for i in (0..n.saturating_sub(1)).rev() {
                    if !heads[i + 1] {
                        out[i] = out[i + 1];
                    }
                }
            }
        }
        out
    }
}

/// GPU implementations. Segmented distribute is the paper's: zero the non-head (forward) or
/// non-tail (backward) elements and run a segmented inclusive sum-scan in the same direction,
/// on the elements' bits (64-bit elements as two 32-bit halves), so every type is copied
/// bit-exactly (a float scan would turn `-0.0 + 0.0` into `+0.0`).
#[cfg(feature = "cuda")]
pub mod gpu {
    use crate::error::Result;
    use crate::gpu::{DeviceBuffer, Gpu, KernelType};
    use crate::primitives::glue::{self, grid_stride, len_u32, width};
    use crate::primitives::Direction;

    /// Every element receives the first (forward) or last (backward) value.
    pub fn distribute<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        dir: Direction,
    ) -> Result<DeviceBuffer<T>> {
        let n = values.len();
        let n32 = len_u32(n, "distribute")?;
        // SAFETY: broadcast writes all n entries.
        let mut out = unsafe { g.alloc::<T>(n.max(1))? };
        if n > 0 {
            let last = (dir == Direction::Backward) as u32;
            grid_stride!(
                g,
                &format!("broadcast_{}", width::<T>()),
                n,
                values,
                &n32,
                &last,
                &mut out
            );
        }
        Ok(out)
    }

    /// Every element receives its segment's head (forward) or tail (backward) value; packed
    /// head flags, element 0 always starts a segment.
    ///
    /// # Panics
    /// When `heads` holds fewer than `values.len()` bits.
    pub fn segmented_distribute<T: KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        heads: &crate::primitives::gpu::HeadFlags,
        dir: Direction,
    ) -> Result<DeviceBuffer<T>> {
        let n = values.len();
        let n32 = glue::segmented_len("segmented_distribute", n, heads.len())?;
        if n == 0 {
            return unsafe { g.alloc::<T>(1) };
        }
        let backward = (dir == Direction::Backward) as u32;
        let w = width::<T>();
        // SAFETY: keep_segment_ends_bN writes all n entries.
        let mut kept = unsafe { g.alloc::<T>(n)? };
        grid_stride!(
            g,
            &format!("keep_segment_ends_{w}"),
            n,
            values,
            heads.words(),
            &n32,
            &backward,
            &mut kept
        );
        if w == "b32" {
            // The buffer's bits as u32: a transmuting view of the same allocation.
            let kept_u32 = reinterpret::<T, u32>(g, kept)?;
            let s = glue::segmented_scan_u32(g, &kept_u32, heads, dir, true)?;
            return reinterpret::<u32, T>(g, s);
        }
        // SAFETY: split_halves writes all n entries of both.
        let (mut lo, mut hi) = unsafe { (g.alloc::<u32>(n)?, g.alloc::<u32>(n)?) };
        grid_stride!(g, "split_halves", n, &kept, &n32, &mut lo, &mut hi);
        let lo = glue::segmented_scan_u32(g, &lo, heads, dir, true)?;
        let hi = glue::segmented_scan_u32(g, &hi, heads, dir, true)?;
        grid_stride!(g, "join_halves", n, &lo, &hi, &n32, &mut kept);
        Ok(kept)
    }

    /// The same allocation viewed as elements of another type of the same size (no copy).
    fn reinterpret<A: KernelType, B: KernelType>(
        g: &Gpu,
        a: DeviceBuffer<A>,
    ) -> Result<DeviceBuffer<B>> {
        assert_eq!(std::mem::size_of::<A>(), std::mem::size_of::<B>());
        let n = a.len();
        let ptr = a.leak();
        // SAFETY: ptr is the allocation of n elements of A just leaked, of the same byte size
        // as n elements of B, on this Gpu's stream; the new slice takes over freeing it. Every
        // bit pattern is a valid u32/i32/f32/u64/f64.
        Ok(unsafe { g.stream().upgrade_device_ptr::<B>(ptr, n) })
    }
}
