//! What the GPU SpMV's automatic choice decides from: statistics of a matrix's pattern that
//! predict each kernel's cost on kinds of matrices never measured.
//!
//! [`SpmvFeatures::of`] reads the row pointer (row-length distribution) and a sample of rows
//! (column locality: how far columns stray from the diagonal and how many distinct 128-byte lines
//! of `x` a block of consecutive rows touches). Everything is computed on the host in
//! `O(nrows + sampled entries)`, deterministically: the same matrix gives the same features, so
//! the same choice.

use crate::{CsrMatrix, RowStats, Scalar};

/// Rows per block for the x-line statistics (one warp's rows in the one-thread-per-row kernel).
pub const LINE_BLOCK_ROWS: usize = 32;

/// Most row blocks sampled for the column statistics.
const SAMPLE_BLOCKS: usize = 2048;

/// Pattern statistics of a matrix (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpmvFeatures {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Mean entries per row.
    pub mean: f64,
    /// Coefficient of variation of the row lengths (standard deviation / mean).
    pub cv: f64,
    /// Longest row.
    pub max: usize,
    /// Share of empty rows.
    pub empty_frac: f64,
    /// Row length at the 90th percentile of a sample of rows.
    pub p90: usize,
    /// Mean |column − row·ncols/nrows| over the sampled rows' entries.
    pub spread: f64,
    /// Distinct 128-byte lines of an `f64` `x` per entry, over blocks of [`LINE_BLOCK_ROWS`]
    /// consecutive rows (1/16 when every line is fully used, 1 when no two entries share one).
    pub lines_per_entry_f64: f64,
    /// The same for an `f32` `x` (32 values per line).
    pub lines_per_entry_f32: f64,
}

impl SpmvFeatures {
    /// The features of `a`.
    pub fn of<T: Scalar>(a: &CsrMatrix<T>) -> Self {
        let stats = a.row_stats();
        Self::from_parts(a.row_ptr(), a.col_idx(), a.ncols(), &stats)
    }

    /// The row-length features alone (`p90` 0 and the column statistics 0: unknown), for a
    /// matrix whose arrays stay on the device.
    pub fn from_stats(nrows: usize, ncols: usize, nnz: usize, stats: &RowStats) -> Self {
        let mean = stats.mean;
        SpmvFeatures {
            nrows,
            ncols,
            nnz,
            mean,
            cv: if mean > 0.0 {
                stats.std_dev / mean
            } else {
                0.0
            },
            max: stats.max,
            empty_frac: if nrows > 0 {
                stats.empty_rows as f64 / nrows as f64
            } else {
                0.0
            },
            p90: 0,
            spread: 0.0,
            lines_per_entry_f64: 0.0,
            lines_per_entry_f32: 0.0,
        }
    }

    /// The features from the CSR arrays (`row_ptr` of `nrows + 1` entries, `col` of at least
    /// `row_ptr[nrows]`) and the matrix's row statistics.
    pub fn from_parts(row_ptr: &[u32], col: &[u32], ncols: usize, stats: &RowStats) -> Self {
        let nrows = row_ptr.len().saturating_sub(1);
        let nnz = row_ptr.last().copied().unwrap_or(0) as usize;
        let mut f = Self::from_stats(nrows, ncols, nnz, stats);
        if nrows == 0 || nnz == 0 {
            return f;
        }
        let len = |i: usize| (row_ptr[i + 1] - row_ptr[i]) as usize;
        // Row-length percentile from evenly spaced rows.
        let step = nrows.div_ceil(8192);
        let mut lens: Vec<usize> = (0..nrows).step_by(step).map(len).collect();
        let k = (lens.len() * 9 / 10).min(lens.len() - 1);
        f.p90 = *lens.select_nth_unstable(k).1;
        // Column locality over evenly spaced blocks of consecutive rows.
        let nblocks = nrows.div_ceil(LINE_BLOCK_ROWS);
        let bstep = nblocks.div_ceil(SAMPLE_BLOCKS);
        let scale = ncols as f64 / nrows as f64;
        let (mut dist, mut entries, mut l64, mut l32) = (0f64, 0usize, 0usize, 0usize);
        let mut lines: Vec<u32> = Vec::new();
        for b in (0..nblocks).step_by(bstep) {
            let (r0, r1) = (b * LINE_BLOCK_ROWS, ((b + 1) * LINE_BLOCK_ROWS).min(nrows));
            // A block of a huge row is capped so the sample stays cheap.
            let (e0, e1) = (row_ptr[r0] as usize, row_ptr[r1] as usize);
            let e1 = e1.min(e0 + 65_536);
            lines.clear();
            for r in r0..r1 {
                let diag = r as f64 * scale;
                let (a, z) = (row_ptr[r] as usize, (row_ptr[r + 1] as usize).min(e1));
                for &c in col.get(a..z.max(a)).unwrap_or(&[]) {
                    dist += (c as f64 - diag).abs();
                    lines.push(c);
                }
            }
            entries += lines.len();
            lines.sort_unstable();
            let count = |shift: u32| {
                let mut n = 0usize;
                let mut last = u32::MAX;
                for &c in &lines {
                    if c >> shift != last {
                        last = c >> shift;
                        n += 1;
                    }
                }
                n
            };
            l64 += count(4);
            l32 += count(5);
        }
        if entries > 0 {
            f.spread = dist / entries as f64;
            f.lines_per_entry_f64 = l64 as f64 / entries as f64;
            f.lines_per_entry_f32 = l32 as f64 / entries as f64;
        }
        f
    }

    /// The features as `(name, value)` pairs, for reports and JSON rows.
    pub fn named(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("nrows", self.nrows as f64),
            ("ncols", self.ncols as f64),
            ("nnz", self.nnz as f64),
            ("mean", self.mean),
            ("cv", self.cv),
            ("max", self.max as f64),
            ("empty_frac", self.empty_frac),
            ("p90", self.p90 as f64),
            ("spread", self.spread),
            ("lines_per_entry_f64", self.lines_per_entry_f64),
            ("lines_per_entry_f32", self.lines_per_entry_f32),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_of_known_patterns() {
        // Tridiagonal: rows of 3 with local columns; an f64 line holds 16 values, and 32 rows
        // touch 34 consecutive columns, 3 or 4 lines.
        let t: CsrMatrix<f64> = crate::generate::from_spec("tridiag:4096", 0).unwrap();
        let f = SpmvFeatures::of(&t);
        assert_eq!((f.nrows, f.nnz, f.max, f.p90), (4096, 3 * 4096 - 2, 3, 3));
        assert!(f.spread < 1.0 && f.cv < 0.05, "{f:?}");
        assert!(f.lines_per_entry_f64 < 0.05 && f.lines_per_entry_f32 <= f.lines_per_entry_f64);
        // Random columns: almost every entry on a line of its own, spread about a third of n.
        let r: CsrMatrix<f64> = crate::generate::from_spec("random:200000:8", 1).unwrap();
        let f = SpmvFeatures::of(&r);
        assert!(f.lines_per_entry_f64 > 0.95, "{f:?}");
        assert!((f.spread / 200000.0 - 1.0 / 3.0).abs() < 0.02, "{f:?}");
        assert_eq!(f.cv, 0.0);
        // Deterministic.
        assert_eq!(f, SpmvFeatures::of(&r));
        // Empty matrix.
        let e = CsrMatrix::<f64>::from_triplets(3, 3, &[]).unwrap();
        assert_eq!(SpmvFeatures::of(&e).nnz, 0);
    }
}
