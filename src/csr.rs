//! Compressed sparse row matrices.
//!
//! [`CsrMatrix`] stores a sparse `nrows × ncols` matrix as three arrays: `row_ptr` (length
//! `nrows + 1`), `col_idx` and `values` (length `nnz`). Indices are `u32`, the GPU's index type, so a
//! matrix uploads without conversion; a matrix with more than `u32::MAX` rows, columns or entries is
//! rejected with an error rather than truncated.
//!
//! # Invariants
//!
//! Every `CsrMatrix` satisfies, and [`CsrMatrix::try_from_parts`] always checks:
//!
//! 1. `row_ptr.len() == nrows + 1` and `row_ptr[0] == 0`;
//! 2. `row_ptr` is non-decreasing and `row_ptr[nrows] == nnz`;
//! 3. `col_idx.len() == values.len() == nnz`;
//! 4. every `col_idx[k] < ncols`;
//! 5. `nrows`, `ncols` and `nnz` fit in `u32`.
//!
//! Column indices inside a row need *not* be sorted or unique (every kernel in this crate is
//! correct either way); [`CsrMatrix::has_sorted_indices`] tells, and [`CsrMatrix::sort_indices`]
//! and [`CsrMatrix::sum_duplicates`] establish the canonical form. Matrices built by
//! [`CsrMatrix::from_triplets`] and the Matrix Market reader are canonical (sorted, no duplicates).

use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};

#[cfg(feature = "cuda")]
pub mod check_gpu;

/// A sparse matrix in compressed sparse row form. See the [module docs](self) for its invariants.
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T> {
    nrows: usize,
    ncols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<T>,
}

/// Statistics of the number of entries per row, as printed by `spmv-bench` and used to choose
/// SpMV kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    /// Fewest entries in a row.
    pub min: usize,
    /// Mean entries per row (0 for a matrix without rows).
    pub mean: f64,
    /// Most entries in a row.
    pub max: usize,
    /// Standard deviation of the row lengths.
    pub std_dev: f64,
    /// Rows without entries.
    pub empty_rows: usize,
}

impl RowStats {
    /// The statistics of the rows that `row_ptr` (`nrows + 1` offsets) delimits.
    pub(crate) fn of_row_ptr(row_ptr: &[u32]) -> RowStats {
        let nrows = row_ptr.len() - 1;
        if nrows == 0 {
            return RowStats {
                min: 0,
                mean: 0.0,
                max: 0,
                std_dev: 0.0,
                empty_rows: 0,
            };
        }
        let (mut min, mut max, mut empty) = (usize::MAX, 0usize, 0usize);
        let mut sumsq = 0f64;
        for w in row_ptr.windows(2) {
            let len = (w[1] - w[0]) as usize;
            min = min.min(len);
            max = max.max(len);
            empty += (len == 0) as usize;
            sumsq += (len * len) as f64;
        }
        let mean = row_ptr[nrows] as f64 / nrows as f64;
        let var = (sumsq / nrows as f64 - mean * mean).max(0.0);
        RowStats {
            min,
            mean,
            max,
            std_dev: var.sqrt(),
            empty_rows: empty,
        }
    }
}

fn check_u32(what: &str, v: usize) -> Result<()> {
    if v > u32::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "{what} = {v} exceeds the 32-bit index limit ({})",
            u32::MAX
        )));
    }
    Ok(())
}

impl<T: Elem> CsrMatrix<T> {
    /// Builds a matrix from its three arrays, checking every invariant (see the module docs).
    ///
    /// # Errors
    /// [`Error::InvalidStructure`] naming the first broken invariant and the offending index, or
    /// [`Error::InvalidInput`] if a dimension exceeds `u32`.
    pub fn try_from_parts(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Self> {
        check_u32("nrows", nrows)?;
        check_u32("ncols", ncols)?;
        let bad = |m: String| Err(Error::InvalidStructure(m));
        if row_ptr.len() != nrows + 1 {
            return bad(format!(
                "row_ptr has length {} but nrows + 1 = {}",
                row_ptr.len(),
                nrows + 1
            ));
        }
        if col_idx.len() != values.len() {
            return bad(format!(
                "col_idx has length {} but values has length {}",
                col_idx.len(),
                values.len()
            ));
        }
        check_u32("nnz", values.len())?;
        if row_ptr[0] != 0 {
            return bad(format!("row_ptr[0] = {} (must be 0)", row_ptr[0]));
        }
        for i in 0..nrows {
            if row_ptr[i + 1] < row_ptr[i] {
                return bad(format!(
                    "row_ptr decreases at row {i}: row_ptr[{i}] = {} > row_ptr[{}] = {}",
                    row_ptr[i],
                    i + 1,
                    row_ptr[i + 1]
                ));
            }
        }
        if row_ptr[nrows] as usize != values.len() {
            return bad(format!(
                "row_ptr[{nrows}] = {} but there are {} entries",
                row_ptr[nrows],
                values.len()
            ));
        }
        if let Some(k) = col_idx.iter().position(|&c| c as usize >= ncols) {
            let row = row_ptr.partition_point(|&p| p as usize <= k) - 1;
            return bad(format!(
                "column index {} at entry {k} (row {row}) is out of range for {ncols} columns",
                col_idx[k]
            ));
        }
        Ok(CsrMatrix {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// Builds a matrix without checking its invariants.
    ///
    /// # Safety
    /// The arrays must satisfy every invariant listed in the module docs. GPU kernels index
    /// device memory with these arrays without bounds checks, so a violation is undefined
    /// behaviour there.
    pub unsafe fn from_parts_unchecked(
        nrows: usize,
        ncols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<T>,
    ) -> Self {
        debug_assert_eq!(row_ptr.len(), nrows + 1);
        CsrMatrix {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// An `nrows × ncols` matrix without entries.
    pub fn zeros(nrows: usize, ncols: usize) -> Self {
        assert!(nrows <= u32::MAX as usize && ncols <= u32::MAX as usize);
        CsrMatrix {
            nrows,
            ncols,
            row_ptr: vec![0; nrows + 1],
            col_idx: Vec::new(),
            values: Vec::new(),
        }
    }

    /// The `n × n` identity.
    pub fn identity(n: usize) -> Self {
        assert!(n <= u32::MAX as usize);
        CsrMatrix {
            nrows: n,
            ncols: n,
            row_ptr: (0..=n as u32).collect(),
            col_idx: (0..n as u32).collect(),
            values: vec![T::one(); n],
        }
    }

    /// Assembles a matrix from `(row, col, value)` triplets; duplicate positions are summed and
    /// the result has sorted column indices.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first triplet whose row or column is out of range.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, T)],
    ) -> Result<Self> {
        check_u32("nrows", nrows)?;
        check_u32("ncols", ncols)?;
        check_u32("number of triplets", triplets.len())?;
        if let Some((k, &(r, c, _))) = triplets
            .iter()
            .enumerate()
            .find(|(_, &(r, c, _))| r >= nrows || c >= ncols)
        {
            return Err(Error::InvalidInput(format!(
                "triplet {k} at ({r}, {c}) is outside the {nrows}×{ncols} matrix"
            )));
        }
        // Counting sort by row, then sort each row by column and merge duplicates.
        let mut counts = vec![0u32; nrows + 1];
        for &(r, _, _) in triplets {
            counts[r + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut cols = vec![0u32; triplets.len()];
        let mut vals = vec![T::zero(); triplets.len()];
        for &(r, c, v) in triplets {
            let p = next[r] as usize;
            cols[p] = c as u32;
            vals[p] = v;
            next[r] += 1;
        }
        let mut m = CsrMatrix {
            nrows,
            ncols,
            row_ptr: counts,
            col_idx: cols,
            values: vals,
        };
        m.sort_indices();
        m.sum_duplicates();
        Ok(m)
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// `(nrows, ncols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// Row pointers, length `nrows + 1`.
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    /// Column index of every entry, row by row.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    /// Value of every entry, row by row.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Mutable values (the structure stays fixed, so the invariants cannot be broken).
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
    /// The three arrays, consuming the matrix: `(row_ptr, col_idx, values)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u32>, Vec<T>) {
        (self.row_ptr, self.col_idx, self.values)
    }
    /// Entries of row `i` as `(columns, values)`.
    pub fn row(&self, i: usize) -> (&[u32], &[T]) {
        let (a, b) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.col_idx[a..b], &self.values[a..b])
    }

    /// Bytes one SpMV moves at the minimum, counted as in DESIGN.md: each input read once, each
    /// output written once: `nnz·(sizeof(T)+4) + (nrows+1)·4 + (ncols+nrows)·sizeof(T)`.
    pub fn spmv_bytes(&self) -> usize {
        self.nnz() * (T::BYTES + 4) + (self.nrows + 1) * 4 + (self.ncols + self.nrows) * T::BYTES
    }

    /// Statistics of the row lengths.
    pub fn row_stats(&self) -> RowStats {
        RowStats::of_row_ptr(&self.row_ptr)
    }

    /// True when the column indices of every row are strictly increasing (sorted, no duplicates).
    pub fn has_sorted_indices(&self) -> bool {
        use rayon::prelude::*;
        (0..self.nrows).into_par_iter().all(|i| {
            self.col_idx[self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize]
                .windows(2)
                .all(|c| c[0] < c[1])
        })
    }

    /// The number of rows of this matrix when it is square.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `what` and both sizes when it is not.
    pub(crate) fn square_rows(&self, what: &str) -> Result<usize> {
        if self.ncols != self.nrows {
            return Err(Error::InvalidInput(format!(
                "{what}: the matrix is {}×{}, it must be square",
                self.nrows, self.ncols
            )));
        }
        Ok(self.nrows)
    }

    /// Checks that the column indices of every row are sorted and unique
    /// ([`CsrMatrix::has_sorted_indices`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `what` and the way to that form when they are not.
    pub(crate) fn check_sorted_indices(&self, what: &str) -> Result<()> {
        if !self.has_sorted_indices() {
            return Err(Error::InvalidInput(format!(
                "{what}: column indices must be sorted and unique within rows \
                 (CsrMatrix::sort_indices and sum_duplicates give that form)"
            )));
        }
        Ok(())
    }

    /// This matrix with sorted, unique column indices: borrowed when it is so already, else a
    /// sorted copy with duplicates summed (the form factorizations and the AMG setup need; the
    /// SpMV does not).
    pub fn canonical(&self) -> std::borrow::Cow<'_, Self> {
        if self.has_sorted_indices() {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut c = self.clone();
            c.sort_indices();
            c.sum_duplicates();
            std::borrow::Cow::Owned(c)
        }
    }

    /// Sorts the column indices within every row (stable, so duplicates keep their order).
    pub fn sort_indices(&mut self) {
        let mut perm: Vec<(u32, T)> = Vec::new();
        for i in 0..self.nrows {
            let (a, b) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
            let cols = &mut self.col_idx[a..b];
            if cols.windows(2).all(|c| c[0] <= c[1]) {
                continue;
            }
            perm.clear();
            perm.extend(cols.iter().copied().zip(self.values[a..b].iter().copied()));
            perm.sort_by_key(|p| p.0);
            for (k, (c, v)) in perm.iter().enumerate() {
                self.col_idx[a + k] = *c;
                self.values[a + k] = *v;
            }
        }
    }

    /// Merges entries with equal column indices that are adjacent within a row by summing them
    /// (call [`Self::sort_indices`] first to merge all duplicates).
    pub fn sum_duplicates(&mut self) {
        let mut out = 0usize;
        let mut new_ptr = Vec::with_capacity(self.nrows + 1);
        new_ptr.push(0u32);
        for i in 0..self.nrows {
            let (a, b) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
            let row_start = out;
            for k in a..b {
                if out > row_start && self.col_idx[out - 1] == self.col_idx[k] {
                    let v = self.values[k];
                    self.values[out - 1] += v;
                } else {
                    self.col_idx[out] = self.col_idx[k];
                    self.values[out] = self.values[k];
                    out += 1;
                }
            }
            new_ptr.push(out as u32);
        }
        self.col_idx.truncate(out);
        self.values.truncate(out);
        self.row_ptr = new_ptr;
    }

    /// The transpose, with sorted column indices when `self` has them.
    pub fn transpose(&self) -> Self {
        let mut counts = vec![0u32; self.ncols + 1];
        for &c in &self.col_idx {
            counts[c as usize + 1] += 1;
        }
        for j in 0..self.ncols {
            counts[j + 1] += counts[j];
        }
        let mut next = counts.clone();
        let mut cols = vec![0u32; self.nnz()];
        let mut vals = vec![T::zero(); self.nnz()];
        for i in 0..self.nrows {
            let (c, v) = self.row(i);
            for (&cj, &vj) in c.iter().zip(v) {
                let p = next[cj as usize] as usize;
                cols[p] = i as u32;
                vals[p] = vj;
                next[cj as usize] += 1;
            }
        }
        CsrMatrix {
            nrows: self.ncols,
            ncols: self.nrows,
            row_ptr: counts,
            col_idx: cols,
            values: vals,
        }
    }

    /// The main diagonal (zeros where no entry is stored; duplicates summed), length
    /// `min(nrows, ncols)`.
    pub fn diagonal(&self) -> Vec<T> {
        use rayon::prelude::*;
        let n = self.nrows.min(self.ncols);
        let mut d = vec![T::zero(); n];
        d.par_iter_mut().enumerate().for_each(|(i, di)| {
            let (c, v) = self.row(i);
            for (&cj, &vj) in c.iter().zip(v) {
                if cj as usize == i {
                    *di += vj;
                }
            }
        });
        d
    }

    /// True when the matrix is square and equal to its transpose (entries compared exactly,
    /// after summing duplicates).
    pub fn is_symmetric(&self) -> bool {
        self.equals_its(Self::transpose)
    }

    /// True when the matrix is square and equal to `op` of itself, both with sorted indices and
    /// duplicates summed.
    fn equals_its(&self, op: impl Fn(&Self) -> Self) -> bool {
        if self.nrows != self.ncols {
            return false;
        }
        let mut a = self.clone();
        a.sort_indices();
        a.sum_duplicates();
        a == op(&a)
    }

    /// Dense row-major copy (for tests and small examples).
    pub fn to_dense(&self) -> Vec<Vec<T>> {
        let mut d = vec![vec![T::zero(); self.ncols]; self.nrows];
        for (i, row) in d.iter_mut().enumerate() {
            let (c, v) = self.row(i);
            for (&cj, &vj) in c.iter().zip(v) {
                row[cj as usize] += vj;
            }
        }
        d
    }

    /// True when any stored value is NaN or infinite.
    pub fn has_non_finite(&self) -> bool {
        use rayon::prelude::*;
        self.values.par_iter().any(|v| !v.finite())
    }

    /// Converts to a `sprs` CSR matrix (indices widened to `usize`).
    pub fn to_sprs(&self) -> sprs::CsMat<T> {
        let mut a = self.clone();
        a.sort_indices();
        a.sum_duplicates();
        sprs::CsMat::new(
            (self.nrows, self.ncols),
            a.row_ptr.iter().map(|&p| p as usize).collect(),
            a.col_idx.iter().map(|&c| c as usize).collect(),
            a.values,
        )
    }

    /// Converts from a `sprs` matrix in either storage order (CSC is converted to CSR).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a dimension or the entry count exceeds `u32`.
    pub fn try_from_sprs(m: &sprs::CsMat<T>) -> Result<Self> {
        let csr;
        let m = if m.is_csr() {
            m
        } else {
            csr = m.to_csr();
            &csr
        };
        let (nrows, ncols) = m.shape();
        check_u32("nnz", m.nnz())?;
        let row_ptr: Vec<u32> = m.indptr().to_proper().iter().map(|&p| p as u32).collect();
        let col_idx: Vec<u32> = m.indices().iter().map(|&c| c as u32).collect();
        Self::try_from_parts(nrows, ncols, row_ptr, col_idx, m.data().to_vec())
    }
}

/// A hash of a sparsity pattern: the shape, the element type, up to 4096 evenly spaced row
/// pointers and (when given) column indices. Values do not count. The SpMV tuning
/// (`GpuCsr::fingerprint`) and the automatic solve's decision cache key on it.
pub fn pattern_fingerprint<T: Elem>(
    (nrows, ncols): (usize, usize),
    row_ptr: &[u32],
    col: Option<&[u32]>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (nrows, ncols, T::BYTES, T::NAME).hash(&mut h);
    let sample = |v: &[u32], h: &mut std::collections::hash_map::DefaultHasher| {
        v.len().hash(h);
        for k in (0..v.len()).step_by(v.len().div_ceil(4096).max(1)) {
            v[k].hash(h);
        }
        if let Some(l) = v.last() {
            l.hash(h);
        }
    };
    sample(row_ptr, &mut h);
    match col {
        Some(c) => sample(
            &c[..(*row_ptr.last().unwrap_or(&0) as usize).min(c.len())],
            &mut h,
        ),
        None => u8::MAX.hash(&mut h),
    }
    h.finish()
}

impl<T: Elem> CsrMatrix<T> {
    /// The [`pattern_fingerprint`] of this matrix (row pointers and column indices).
    pub fn fingerprint(&self) -> u64 {
        pattern_fingerprint::<T>(
            (self.nrows, self.ncols),
            self.row_ptr(),
            Some(self.col_idx()),
        )
    }
}

impl<T: Scalar> CsrMatrix<T> {
    /// Converts the values to another precision (rounding when narrowing).
    pub fn cast<U: Scalar>(&self) -> CsrMatrix<U> {
        self.map_values(|v| U::of_f64(v.as_f64()))
    }
}

impl<T: Elem> CsrMatrix<T> {
    /// The same pattern with every value mapped by `f` (a change of precision, a real matrix
    /// made complex, a shift of the values...).
    pub fn map_values<U: Elem>(&self, f: impl Fn(T) -> U) -> CsrMatrix<U> {
        CsrMatrix {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.clone(),
            col_idx: self.col_idx.clone(),
            values: self.values.iter().map(|&v| f(v)).collect(),
        }
    }

    /// The conjugate transpose `Aᴴ` (the transpose for a real type).
    pub fn conj_transpose(&self) -> Self {
        let mut t = self.transpose();
        t.values.iter_mut().for_each(|v| *v = v.conj());
        t
    }

    /// True when the matrix is square and equal to its conjugate transpose (entries compared
    /// exactly, after summing duplicates); the same as [`CsrMatrix::is_symmetric`] for a real
    /// type.
    pub fn is_hermitian(&self) -> bool {
        self.equals_its(Self::conj_transpose)
    }
}

impl<T: Elem> From<&CsrMatrix<T>> for sprs::CsMat<T> {
    fn from(m: &CsrMatrix<T>) -> Self {
        m.to_sprs()
    }
}

impl<T: Elem> TryFrom<&sprs::CsMat<T>> for CsrMatrix<T> {
    type Error = Error;
    fn try_from(m: &sprs::CsMat<T>) -> Result<Self> {
        CsrMatrix::try_from_sprs(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CsrMatrix<f64> {
        // [1 0 2]
        // [0 0 0]
        // [3 4 0]
        CsrMatrix::try_from_parts(
            3,
            3,
            vec![0, 2, 2, 4],
            vec![0, 2, 0, 1],
            vec![1., 2., 3., 4.],
        )
        .unwrap()
    }

    fn err_of(r: Result<CsrMatrix<f64>>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn each_invariant_is_rejected() {
        let e = err_of(CsrMatrix::try_from_parts(
            2,
            2,
            vec![0, 1],
            vec![0],
            vec![1.],
        ));
        assert!(e.contains("row_ptr has length 2 but nrows + 1 = 3"), "{e}");
        let e = err_of(CsrMatrix::try_from_parts(
            1,
            2,
            vec![1, 1],
            vec![0],
            vec![1.],
        ));
        assert!(e.contains("row_ptr[0] = 1"), "{e}");
        let e = err_of(CsrMatrix::try_from_parts(
            2,
            2,
            vec![0, 2, 1],
            vec![0, 1],
            vec![1., 2.],
        ));
        assert!(e.contains("decreases at row 1"), "{e}");
        let e = err_of(CsrMatrix::try_from_parts(
            1,
            2,
            vec![0, 1],
            vec![0, 1],
            vec![1., 2.],
        ));
        assert!(e.contains("row_ptr[1] = 1 but there are 2 entries"), "{e}");
        let e = err_of(CsrMatrix::try_from_parts(
            1,
            2,
            vec![0, 1],
            vec![0, 1],
            vec![1.],
        ));
        assert!(
            e.contains("col_idx has length 2 but values has length 1"),
            "{e}"
        );
        let e = err_of(CsrMatrix::try_from_parts(
            2,
            2,
            vec![0, 1, 2],
            vec![0, 2],
            vec![1., 2.],
        ));
        assert!(e.contains("column index 2 at entry 1 (row 1)"), "{e}");
        assert!(CsrMatrix::<f64>::try_from_parts(0, 0, vec![0], vec![], vec![]).is_ok());
    }

    #[test]
    fn triplets_sum_duplicates_and_sort() {
        let m = CsrMatrix::from_triplets(
            2,
            3,
            &[
                (1, 2, 1.0),
                (0, 1, 2.0),
                (1, 0, 3.0),
                (0, 1, 4.0),
                (1, 2, 5.0),
            ],
        )
        .unwrap();
        assert_eq!(m.row_ptr(), &[0, 1, 3]);
        assert_eq!(m.col_idx(), &[1, 0, 2]);
        assert_eq!(m.values(), &[6.0, 3.0, 6.0]);
        assert!(m.has_sorted_indices());
        let e = CsrMatrix::<f64>::from_triplets(2, 2, &[(0, 0, 1.0), (2, 0, 1.0)]).unwrap_err();
        assert!(e.to_string().contains("triplet 1 at (2, 0)"), "{e}");
    }

    #[test]
    fn stats_transpose_cast_diag() {
        let m = small();
        let s = m.row_stats();
        assert_eq!((s.min, s.max, s.empty_rows), (0, 2, 1));
        assert!((s.mean - 4.0 / 3.0).abs() < 1e-12);
        let t = m.transpose();
        assert_eq!(
            t.to_dense(),
            vec![vec![1., 0., 3.], vec![0., 0., 4.], vec![2., 0., 0.]]
        );
        assert_eq!(t.transpose(), m);
        assert_eq!(m.diagonal(), vec![1., 0., 0.]);
        let f: CsrMatrix<f32> = m.cast();
        assert_eq!(f.values(), &[1f32, 2., 3., 4.]);
        assert!(!m.is_symmetric());
        let sym = CsrMatrix::from_triplets(2, 2, &[(0, 1, 2.0), (1, 0, 2.0), (0, 0, 1.0)]).unwrap();
        assert!(sym.is_symmetric());
    }

    #[test]
    fn sprs_round_trip() {
        let m = small();
        let s = m.to_sprs();
        assert_eq!(s.nnz(), 4);
        assert_eq!(s.get(2, 1), Some(&4.0));
        let back = CsrMatrix::try_from_sprs(&s).unwrap();
        assert_eq!(back, m);
        let csc = s.to_csc();
        assert_eq!(CsrMatrix::try_from_sprs(&csc).unwrap(), m);
    }

    #[test]
    fn unsorted_rows_are_sorted_on_request() {
        let mut m =
            CsrMatrix::try_from_parts(1, 3, vec![0, 3], vec![2, 0, 2], vec![1., 2., 3.]).unwrap();
        assert!(!m.has_sorted_indices());
        m.sort_indices();
        m.sum_duplicates();
        assert_eq!(m.col_idx(), &[0, 2]);
        assert_eq!(m.values(), &[2., 4.]);
        assert!(m.has_sorted_indices());
    }
}
