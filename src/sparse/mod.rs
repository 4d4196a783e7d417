//! Sparse matrix–matrix operations: SpGEMM `C = A·B` (a symbolic phase and a numeric phase that
//! can be re-run alone on the same pattern), the Galerkin product `R·A·P`, `A + αB`, and diagonal
//! scaling; and the graph steps of smoothed aggregation ([`strength_symmetric`], [`amalgamate`],
//! [`aggregate_mis2`]). They are what algebraic multigrid setup ([`crate::precond`]) is made of.
//!
//! This module holds the CPU implementations, which define the semantics and serve as the test
//! oracle for the GPU ones. Every output is canonical CSR: column indices sorted within each row,
//! no duplicates (explicit zeros produced by cancellation are kept, as in SciPy and cuSPARSE, so
//! the pattern of `A·B` depends on the patterns of `A` and `B` alone).
//!
//! # Method (CPU)
//!
//! Gustavson's row-by-row product (Gustavson 1978): row `i` of `C` is the sum of the rows
//! `B[k,:]` scaled by `A[i,k]`. The symbolic phase marks the columns each row reaches with a
//! dense marker array of length `ncols(B)` per thread (rows in parallel with rayon), counts them,
//! and a scan of the counts gives `row_ptr`; the column indices of each row are then gathered and
//! sorted. The numeric phase accumulates values in a dense array of length `ncols(B)` per thread
//! and reads it out in the symbolic phase's column order, so it never reallocates and can be
//! re-run alone ([`SpgemmPlan::numeric`]) when the values of `A` and `B` change but their
//! patterns do not.
//!
//! # References
//!
//! - F. G. Gustavson, *Two fast algorithms for sparse matrices: multiplication and permuted
//!   transposition*, ACM TOMS 4(3), 1978.

mod aggregate;
pub mod block;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod incomplete;
pub mod reorder;
pub mod triangular;

pub use aggregate::{
    aggregate_mis2, aggregate_mis2_counted, aggregate_mis2_ordered, amalgamate, drop_small,
    mis2_priority, mis2_priority30, splitmix64, strength_symmetric, Aggregation, NOT_AGGREGATED,
};
pub use block::{block_galerkin, BlockClosure};

use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// The symbolic result of `C = A·B`: the pattern of `C`, reusable for new values of `A` and `B`
/// on the same patterns.
#[derive(Clone, Debug)]
pub struct SpgemmPlan {
    nrows: usize,
    ncols: usize,
    /// Pattern of `A` and `B` the plan was made for (lengths, to catch misuse).
    a_shape: (usize, usize, usize),
    b_shape: (usize, usize, usize),
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
}

fn check_product<T: Scalar>(a: &CsrMatrix<T>, b: &CsrMatrix<T>) -> Result<()> {
    if a.ncols() != b.nrows() {
        return Err(Error::InvalidInput(format!(
            "SpGEMM: A is {}×{} and B is {}×{}: A's columns must equal B's rows",
            a.nrows(),
            a.ncols(),
            b.nrows(),
            b.ncols()
        )));
    }
    Ok(())
}

/// Rows per rayon task: enough work per task to amortise the per-task marker array.
const ROWS_PER_TASK: usize = 256;

impl SpgemmPlan {
    /// The symbolic phase of `C = A·B`: the pattern of `C`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `A`'s columns differ from `B`'s rows or when `C` would have
    /// more than `u32::MAX` entries.
    pub fn symbolic<T: Scalar>(a: &CsrMatrix<T>, b: &CsrMatrix<T>) -> Result<Self> {
        check_product(a, b)?;
        let (m, n) = (a.nrows(), b.ncols());
        let (ap, aj) = (a.row_ptr(), a.col_idx());
        let (bp, bj) = (b.row_ptr(), b.col_idx());
        // Each task: the sorted column lists of its rows, concatenated, and their lengths.
        let chunks: Vec<(Vec<u32>, Vec<u32>)> = (0..m.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|t| {
                let lo = t * ROWS_PER_TASK;
                let hi = (lo + ROWS_PER_TASK).min(m);
                let mut mark = vec![u32::MAX; n];
                let mut cols = Vec::new();
                let mut lens = Vec::with_capacity(hi - lo);
                for i in lo..hi {
                    let start = cols.len();
                    for &k in &aj[ap[i] as usize..ap[i + 1] as usize] {
                        let k = k as usize;
                        for &j in &bj[bp[k] as usize..bp[k + 1] as usize] {
                            if mark[j as usize] != i as u32 {
                                mark[j as usize] = i as u32;
                                cols.push(j);
                            }
                        }
                    }
                    cols[start..].sort_unstable();
                    lens.push((cols.len() - start) as u32);
                }
                (cols, lens)
            })
            .collect();
        let total: usize = chunks.iter().map(|(c, _)| c.len()).sum();
        if total > u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "SpGEMM: the product has {total} entries, over the 32-bit index limit"
            )));
        }
        let mut row_ptr = Vec::with_capacity(m + 1);
        row_ptr.push(0u32);
        let mut col_idx = Vec::with_capacity(total);
        let mut acc = 0u32;
        for (cols, lens) in chunks {
            for l in lens {
                acc += l;
                row_ptr.push(acc);
            }
            col_idx.extend_from_slice(&cols);
        }
        Ok(SpgemmPlan {
            nrows: m,
            ncols: n,
            a_shape: (a.nrows(), a.ncols(), a.nnz()),
            b_shape: (b.nrows(), b.ncols(), b.nnz()),
            row_ptr,
            col_idx,
        })
    }

    /// Entries of `C`.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// The numeric phase: `C = A·B` on the plan's pattern.
    ///
    /// # Panics
    /// When `A` or `B` do not have the shapes and entry counts the plan was made for.
    pub fn numeric<T: Scalar>(&self, a: &CsrMatrix<T>, b: &CsrMatrix<T>) -> CsrMatrix<T> {
        let mut values = vec![T::zero(); self.nnz()];
        self.numeric_into(a, b, &mut values);
        // SAFETY: row_ptr and col_idx come from the symbolic phase, which built them to satisfy
        // every invariant (non-decreasing, in range, counts in u32); values has nnz entries.
        unsafe {
            CsrMatrix::from_parts_unchecked(
                self.nrows,
                self.ncols,
                self.row_ptr.clone(),
                self.col_idx.clone(),
                values,
            )
        }
    }

    /// The numeric phase into an existing value array of length [`SpgemmPlan::nnz`].
    ///
    /// # Panics
    /// As [`SpgemmPlan::numeric`], and when `values` has the wrong length.
    pub fn numeric_into<T: Scalar>(&self, a: &CsrMatrix<T>, b: &CsrMatrix<T>, values: &mut [T]) {
        assert_eq!(
            (a.nrows(), a.ncols(), a.nnz()),
            self.a_shape,
            "SpGEMM numeric: A (rows, cols, nnz) differs from the plan's"
        );
        assert_eq!(
            (b.nrows(), b.ncols(), b.nnz()),
            self.b_shape,
            "SpGEMM numeric: B (rows, cols, nnz) differs from the plan's"
        );
        assert_eq!(values.len(), self.nnz(), "SpGEMM numeric: values length");
        let (ap, aj, av) = (a.row_ptr(), a.col_idx(), a.values());
        let (bp, bj, bv) = (b.row_ptr(), b.col_idx(), b.values());
        let cp = &self.row_ptr;
        let cj = &self.col_idx;
        let n = self.ncols;
        // Split `values` at task boundaries so each task owns its rows' slice.
        let mut slices = Vec::with_capacity(self.nrows.div_ceil(ROWS_PER_TASK));
        let mut rest = values;
        for t in 0..self.nrows.div_ceil(ROWS_PER_TASK) {
            let lo = t * ROWS_PER_TASK;
            let hi = (lo + ROWS_PER_TASK).min(self.nrows);
            let (head, tail) = rest.split_at_mut((cp[hi] - cp[lo]) as usize);
            slices.push((lo, hi, head));
            rest = tail;
        }
        slices.into_par_iter().for_each(|(lo, hi, out)| {
            let mut acc = vec![T::zero(); n];
            let base = cp[lo] as usize;
            for i in lo..hi {
                for p in ap[i] as usize..ap[i + 1] as usize {
                    let (k, aik) = (aj[p] as usize, av[p]);
                    for q in bp[k] as usize..bp[k + 1] as usize {
                        acc[bj[q] as usize] += aik * bv[q];
                    }
                }
                for c in cp[i] as usize..cp[i + 1] as usize {
                    let j = cj[c] as usize;
                    out[c - base] = acc[j];
                    acc[j] = T::zero();
                }
            }
        });
    }
}

/// `C = A·B` (symbolic and numeric phases), canonical CSR.
///
/// # Errors
/// As [`SpgemmPlan::symbolic`].
pub fn spgemm<T: Scalar>(a: &CsrMatrix<T>, b: &CsrMatrix<T>) -> Result<CsrMatrix<T>> {
    Ok(SpgemmPlan::symbolic(a, b)?.numeric(a, b))
}

/// The Galerkin product `R·A·P` (two SpGEMMs, `(R·A)·P`).
///
/// # Errors
/// As [`spgemm`], for either product.
pub fn galerkin<T: Scalar>(
    r: &CsrMatrix<T>,
    a: &CsrMatrix<T>,
    p: &CsrMatrix<T>,
) -> Result<CsrMatrix<T>> {
    let ra = spgemm(r, a)?;
    spgemm(&ra, p)
}

/// `A + αB` for matrices of the same shape, canonical CSR (the union of the two patterns; the
/// inputs' column indices may be unsorted and may repeat).
///
/// # Errors
/// [`Error::InvalidInput`] when the shapes differ.
pub fn add<T: Scalar>(a: &CsrMatrix<T>, alpha: T, b: &CsrMatrix<T>) -> Result<CsrMatrix<T>> {
    if (a.nrows(), a.ncols()) != (b.nrows(), b.ncols()) {
        return Err(Error::InvalidInput(format!(
            "A + αB: A is {}×{} and B is {}×{}",
            a.nrows(),
            a.ncols(),
            b.nrows(),
            b.ncols()
        )));
    }
    let mut t = Vec::with_capacity(a.nnz() + b.nnz());
    for (m, s) in [(a, T::one()), (b, alpha)] {
        let (p, j, v) = (m.row_ptr(), m.col_idx(), m.values());
        for i in 0..m.nrows() {
            for k in p[i] as usize..p[i + 1] as usize {
                t.push((i, j[k] as usize, s * v[k]));
            }
        }
    }
    CsrMatrix::from_triplets(a.nrows(), a.ncols(), &t)
}

/// `diag(left)·A·diag(right)`, in place; either side may be `None`.
///
/// # Panics
/// When a scaling vector's length differs from `A`'s rows (`left`) or columns (`right`).
pub fn scale<T: Scalar>(a: &mut CsrMatrix<T>, left: Option<&[T]>, right: Option<&[T]>) {
    if let Some(l) = left {
        assert_eq!(l.len(), a.nrows(), "scale: left vector length vs rows");
    }
    if let Some(r) = right {
        assert_eq!(r.len(), a.ncols(), "scale: right vector length vs columns");
    }
    let nrows = a.nrows();
    let p = a.row_ptr().to_vec();
    let j = a.col_idx().to_vec();
    let v = a.values_mut();
    for i in 0..nrows {
        for k in p[i] as usize..p[i + 1] as usize {
            if let Some(l) = left {
                v[k] *= l[i];
            }
            if let Some(r) = right {
                v[k] *= r[j[k] as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(m: usize, n: usize, per_row: usize, seed: u64) -> CsrMatrix<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut t = Vec::new();
        for i in 0..m {
            // Some empty rows.
            if rng.gen_range(0..7) == 0 {
                continue;
            }
            for _ in 0..rng.gen_range(0..=per_row) {
                t.push((i, rng.gen_range(0..n.max(1)), rng.gen_range(-1.0..1.0)));
            }
        }
        if n == 0 {
            t.clear();
        }
        CsrMatrix::from_triplets(m, n, &t).unwrap()
    }

    fn dense(a: &CsrMatrix<f64>) -> Vec<Vec<f64>> {
        let mut d = vec![vec![0.0; a.ncols()]; a.nrows()];
        for (i, row) in d.iter_mut().enumerate() {
            for k in a.row_ptr()[i] as usize..a.row_ptr()[i + 1] as usize {
                row[a.col_idx()[k] as usize] += a.values()[k];
            }
        }
        d
    }

    #[test]
    fn spgemm_matches_dense_product_and_sprs() {
        for (m, k, n, seed) in [
            (0, 3, 4, 1),
            (5, 0, 3, 2),
            (37, 41, 29, 3),
            (600, 300, 700, 4),
        ] {
            let a = random(m, k, 6, seed);
            let b = random(k, n, 5, seed + 100);
            let c = spgemm(&a, &b).unwrap();
            assert!(c.has_sorted_indices());
            let (da, db, dc) = (dense(&a), dense(&b), dense(&c));
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|l| da[i][l] * db[l][j]).sum();
                    assert!((dc[i][j] - want).abs() <= 1e-12, "C[{i},{j}]");
                }
            }
            // The pattern is exactly sprs's (it keeps cancelled entries as we do).
            let s = &a.to_sprs() * &b.to_sprs();
            assert_eq!(s.nnz(), c.nnz(), "{m}×{k}·{k}×{n}");
        }
    }

    /// A dense row and a dense column: every row of `A·A` touches every column (the case the
    /// GPU routes to bitmaps and dense windows), checked against the dense product.
    #[test]
    fn spgemm_dense_row_and_column() {
        let n = 300;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let mut t: Vec<(usize, usize, f64)> = (0..n).map(|j| (0, j, 1.0 + j as f64)).collect();
        for i in 1..n {
            t.push((i, 0, rng.gen_range(-1.0..1.0)));
            t.push((i, rng.gen_range(1..n), rng.gen_range(-1.0..1.0)));
        }
        let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        let c = spgemm(&a, &a).unwrap();
        assert_eq!(c.nnz(), n * n, "every row touches every column");
        let (da, dc) = (dense(&a), dense(&c));
        for i in 0..n {
            for j in 0..n {
                let want: f64 = (0..n).map(|l| da[i][l] * da[l][j]).sum();
                assert!(
                    (dc[i][j] - want).abs() <= 1e-9 * (1.0 + want.abs()),
                    "C[{i},{j}]"
                );
            }
        }
    }

    #[test]
    fn numeric_rerun_on_new_values() {
        let a = random(200, 150, 7, 9);
        let b = random(150, 180, 4, 10);
        let plan = SpgemmPlan::symbolic(&a, &b).unwrap();
        let mut a2 = a.clone();
        a2.values_mut().iter_mut().for_each(|v| *v *= -3.0);
        let c2 = plan.numeric(&a2, &b);
        let c1 = spgemm(&a, &b).unwrap();
        for (x, y) in c1.values().iter().zip(c2.values()) {
            assert!((x * -3.0 - y).abs() <= 1e-12);
        }
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        let a = random(3, 4, 2, 1);
        let e = spgemm(&a, &a).unwrap_err().to_string();
        assert!(e.contains("3×4"), "{e}");
        assert!(add(&a, 1.0, &a.transpose()).is_err());
    }

    #[test]
    fn galerkin_add_scale() {
        let a = random(50, 50, 5, 5);
        let p = random(50, 12, 2, 6);
        let r = p.transpose();
        let c = galerkin(&r, &a, &p).unwrap();
        let (dr, da, dp, dc) = (dense(&r), dense(&a), dense(&p), dense(&c));
        for i in 0..12 {
            for j in 0..12 {
                let mut want = 0.0;
                for k in 0..50 {
                    for l in 0..50 {
                        want += dr[i][k] * da[k][l] * dp[l][j];
                    }
                }
                assert!((dc[i][j] - want).abs() <= 1e-12);
            }
        }
        let s = add(&a, -1.0, &a).unwrap();
        assert!(s.values().iter().all(|v| v.abs() <= 1e-15));
        let mut sa = a.clone();
        let l: Vec<f64> = (0..50).map(|i| i as f64).collect();
        scale(&mut sa, Some(&l), None);
        let ds = dense(&sa);
        assert_eq!(
            ds[3][..],
            da[3].iter().map(|v| v * 3.0).collect::<Vec<_>>()[..]
        );
    }
}
