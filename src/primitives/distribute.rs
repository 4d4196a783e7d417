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

/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
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
        assert_eq!(
            values.len(),
            heads.len(),
            "segmented_distribute: {} values but {} head flags",
            values.len(),
            heads.len()
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
