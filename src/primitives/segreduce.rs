//! Segmented reduce: one result per segment, the reduction of its elements under plus, max or
//! min; an empty segment gives the operator's identity.
//!
//! It is the reduction behind the paper's SpMV row sums (Sengupta et al. 2007, §4.2: a backward
//! segmented scan whose head elements are kept), exposed on its own. Segments come either from
//! CSR-style offsets (`offsets[s]..offsets[s+1]`, any lengths, empty ones included) or from head
//! flags (element 0 always starts a segment, so there are no empty ones).
//!
//! The GPU version does not materialise the scan: each tile of elements reduces the segments
//! that end inside it with a block-level segmented reduction, and a segment that crosses tiles
//! is finished by a small fix-up kernel from per-tile partials, so the values are read once.
//!
//! ```
//! use segsparse::primitives::segreduce::cpu;
//! use segsparse::primitives::ScanOp;
//! let v = [1, 2, 3, 4, 5];
//! assert_eq!(cpu::segmented_reduce_offsets(&v, &[0, 2, 2, 5], ScanOp::Plus), [3, 0, 12]);
//! let h = [true, false, true, false, false];
//! assert_eq!(cpu::segmented_reduce_heads(&v, &h, ScanOp::Max), [2, 5]);
//! ```

/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use crate::primitives::{ScanElem, ScanOp};

    /// `out[s]` = the reduction of `values[offsets[s]..offsets[s+1]]` (identity when empty).
    ///
    /// # Panics
    /// When `offsets` is empty, decreasing, or its last entry is not `values.len()`.
    pub fn segmented_reduce_offsets<T: ScanElem>(
        values: &[T],
        offsets: &[u32],
        op: ScanOp,
    ) -> Vec<T> {
        super::check_offsets(values.len(), offsets);
        offsets
            .windows(2)
            .map(|w| {
                values[w[0] as usize..w[1] as usize]
                    .iter()
                    .fold(T::identity(op), |a, &b| T::combine(op, a, b))
            })
            .collect()
    }

    /// One result per segment given by head flags (`heads[0]` is treated as set): the number of
    /// results is the number of segments.
    ///
    /// # Panics
    /// When `values` and `heads` differ in length.
    pub fn segmented_reduce_heads<T: ScanElem>(values: &[T], heads: &[bool], op: ScanOp) -> Vec<T> {
        assert_eq!(
            values.len(),
            heads.len(),
            "segmented_reduce_heads: {} values but {} head flags",
            values.len(),
            heads.len()
        );
        let mut out = Vec::new();
        for (i, (&v, &h)) in values.iter().zip(heads).enumerate() {
            if h || i == 0 {
                out.push(T::combine(op, T::identity(op), v));
            } else {
                let last = out.last_mut().expect("segment started");
                *last = T::combine(op, *last, v);
            }
        }
        out
    }
}

/// Panics unless `offsets` are valid CSR-style offsets over `n` elements.
pub(crate) fn check_offsets(n: usize, offsets: &[u32]) {
    assert!(
        !offsets.is_empty(),
        "segment offsets must have at least one entry (0)"
    );
    assert_eq!(offsets[0], 0, "segment offsets must start at 0");
    assert_eq!(
        *offsets.last().unwrap() as usize,
        n,
        "last segment offset {} but {} values",
        offsets.last().unwrap(),
        n
    );
    if let Some(i) = offsets.windows(2).position(|w| w[0] > w[1]) {
        panic!(
            "segment offsets decrease at {}: {} > {}",
            i,
            offsets[i],
            offsets[i + 1]
        );
    }
}
