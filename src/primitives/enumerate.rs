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
        assert_eq!(
            flags.len(),
            heads.len(),
            "segmented_enumerate: {} flags but {} head flags",
            flags.len(),
            heads.len()
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
