//! Enumerate: for every element, the number of `true` flags before it (Sengupta et al. 2007,
//! §2.3.1), over the whole vector or restarting at every segment head.
//!
//! The paper implements enumerate as an exclusive sum-scan of the flags (1 for true, 0 for
//! false); it is the address computation of pack/compact and split. Backward enumerate counts the
//! `true` flags after each element.
//!
//! ```
//! use segsparse::primitives::enumerate::cpu;
//! use segsparse::primitives::Direction;
//! let f = [true, false, false, true, false, true, true];
//! assert_eq!(cpu::enumerate(&f, Direction::Forward), [0, 1, 1, 1, 2, 2, 3]);
//! ```

/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use crate::primitives::glue::check_same_len;
    use crate::primitives::Direction;

    /// `out[i]` = number of `flags[j]` that are true for `j < i` (forward) or `j > i`
    /// (backward).
    pub fn enumerate(flags: &[bool], dir: Direction) -> Vec<u32> {
        let n = flags.len();
        let mut out = vec![0u32; n];
        let mut count = 0u32;
        let mut visit = |i: usize| {
            out[i] = count;
            count += flags[i] as u32;
        };
        match dir {
            Direction::Forward => (0..n).for_each(&mut visit),
            Direction::Backward => (0..n).rev().for_each(&mut visit),
        }
        out
    }

    /// Enumerate within segments: the count restarts at every segment. `heads[i]` marks the first
    /// element of a segment (element 0 always starts one, whatever `heads[0]` says). Backward
    /// counts the `true` flags after the element within its segment.
    ///
    /// ```
    /// use segsparse::primitives::enumerate::cpu;
    /// use segsparse::primitives::Direction;
    /// let f = [true, true, false, true, true];
    /// let h = [true, false, false, true, false];
    /// assert_eq!(cpu::segmented_enumerate(&f, &h, Direction::Forward), [0, 1, 2, 0, 1]);
    /// assert_eq!(cpu::segmented_enumerate(&f, &h, Direction::Backward), [1, 0, 0, 1, 0]);
    /// ```
    ///
    /// # Panics
    /// When `flags` and `heads` differ in length.
    pub fn segmented_enumerate(flags: &[bool], heads: &[bool], dir: Direction) -> Vec<u32> {
        check_same_len(
            "segmented_enumerate",
            (flags.len(), "flags"),
            (heads.len(), "head flags"),
        );
        let n = flags.len();
        let mut out = vec![0u32; n];
        match dir {
            Direction::Forward => {
                let mut count = 0u32;
                for i in 0..n {
                    if heads[i] {
                        count = 0;
                    }
                    out[i] = count;
                    count += flags[i] as u32;
                }
            }
            Direction::Backward => {
                let mut count = 0u32;
                for i in (0..n).rev() {
                    // A segment ends where the next element is a head.
                    if i + 1 == n || heads[i + 1] {
                        count = 0;
                    }
                    out[i] = count;
                    count += flags[i] as u32;
                }
            }
        }
        out
    }
}

/// GPU implementations: the paper's formulation, a 0/1 vector from the packed flags and an
/// exclusive scan (segmented over packed head flags for [`segmented_enumerate`](gpu::segmented_enumerate)).
#[cfg(feature = "cuda")]
pub mod gpu {
    use crate::error::Result;
    use crate::gpu::{DeviceBuffer, Gpu};
    use crate::primitives::glue::{self, grid_stride, len_u32};
    use crate::primitives::Direction;

    fn ones_of(g: &Gpu, flags: &DeviceBuffer<u32>, n: usize) -> Result<DeviceBuffer<u32>> {
        glue::check_words("enumerate", flags.len(), n);
        let n32 = len_u32(n, "enumerate")?;
        // SAFETY: bits_to_u32 writes all n entries.
        let mut e = unsafe { g.alloc::<u32>(n.max(1))? };
        grid_stride!(g, "bits_to_u32", n, flags, &n32, &0u32, &mut e);
        Ok(e)
    }

    /// For each of the `n` elements, the number of set flag bits before it (forward) or after
    /// it (backward).
    ///
    /// # Panics
    /// When `flags` holds fewer than `n` bits.
    pub fn enumerate(
        g: &Gpu,
        flags: &DeviceBuffer<u32>,
        n: usize,
        dir: Direction,
    ) -> Result<DeviceBuffer<u32>> {
        if n == 0 {
            return g.zeros::<u32>(1);
        }
        let e = ones_of(g, flags, n)?;
        glue::scan_u32(g, &e, dir, false)
    }

    /// Enumerate restarting at every segment head (packed head flags; element 0 always starts
    /// a segment).
    ///
    /// # Panics
    /// When `flags` or `heads` hold fewer than `n` bits.
    pub fn segmented_enumerate(
        g: &Gpu,
        flags: &DeviceBuffer<u32>,
        heads: &crate::primitives::gpu::HeadFlags,
        n: usize,
        dir: Direction,
    ) -> Result<DeviceBuffer<u32>> {
        glue::check_same_len(
            "segmented_enumerate",
            (n, "elements"),
            (heads.len(), "head flags"),
        );
        if n == 0 {
            return g.zeros::<u32>(1);
        }
        let e = ones_of(g, flags, n)?;
        glue::segmented_scan_u32(g, &e, heads, dir, false)
    }
}
