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
            .map(|i| {
                if e[i] {
                    f[i]
                } else {
                    i as u32 - f[i] + nf
                }
            })
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
        out.extend(values.iter().zip(flags).filter(|(_, &f)| f).map(|(&v, _)| v));
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
