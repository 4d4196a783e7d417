//! The symbolic phase of ILU(k): the pattern of level-of-fill `k` (Saad, *Iterative Methods for
//! Sparse Linear Systems*, 2nd ed., §10.3.3). An entry of `A` has level 0; eliminating row `i`
//! with pivot row `k` creates or reaches `(i, j)` at level `lev(i, k) + lev(k, j) + 1`, and an
//! entry is kept when its level is at most `k`. The numeric factorization on that pattern is the
//! ILU(0) elimination of [`super`] (IKJ, updates outside the pattern dropped), so ILU(k) reuses
//! the ILU(0) factor code on the CPU and the GPU unchanged: the fill entries start as zeros.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};

use super::super::reorder::{gather, INSERTED};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Elem;

/// `b` with the fill entries of level at most `level` added as zeros (columns sorted), and for
/// each entry its position in `b` ([`INSERTED`] for a fill entry). `b` is square with sorted
/// indices; a missing diagonal entry is added (level 0).
///
/// # Errors
/// [`Error::InvalidInput`] when the pattern would exceed the GPU's 32-bit entry count.
pub(crate) fn with_fill<T: Elem>(
    b: &CsrMatrix<T>,
    level: usize,
) -> Result<(CsrMatrix<T>, Vec<u32>)> {
    let n = b.nrows();
    let (rp, cj) = (b.row_ptr(), b.col_idx());
    // Each finished row's upper part (column, level), for the rows below it.
    let mut upper: Vec<Vec<(u32, u32)>> = Vec::with_capacity(n);
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u32);
    let (mut col_idx, mut src) = (Vec::new(), Vec::new());
    let lmax = level as u32;
    for i in 0..n {
        let mut row: BTreeMap<u32, u32> = BTreeMap::new();
        for p in rp[i]..rp[i + 1] {
            row.insert(cj[p as usize], 0);
        }
        row.entry(i as u32).or_insert(0);
        let mut prev: Option<u32> = None;
        loop {
            let lo = match prev {
                Some(p) => Excluded(p),
                None => Unbounded,
            };
            let Some((&k, &lik)) = row.range((lo, Excluded(i as u32))).next() else {
                break;
            };
            for &(j, lkj) in &upper[k as usize] {
                let nl = lik + lkj + 1;
                if nl > lmax {
                    continue;
                }
                let e = row.entry(j).or_insert(nl);
                *e = (*e).min(nl);
            }
            prev = Some(k);
        }
        let (lo, hi) = (rp[i] as usize, rp[i + 1] as usize);
        let cols = &cj[lo..hi];
        let mut up = Vec::new();
        for (&j, &l) in &row {
            col_idx.push(j);
            src.push(match cols.binary_search(&j) {
                Ok(t) => (lo + t) as u32,
                Err(_) => INSERTED,
            });
            if j > i as u32 {
                up.push((j, l));
            }
        }
        upper.push(up);
        let len = u32::try_from(col_idx.len()).map_err(|_| {
            Error::InvalidInput(format!(
                "ILU({level}): the fill pattern exceeds 2^32 entries at row {i}"
            ))
        })?;
        row_ptr.push(len);
    }
    let vals: Vec<T> = gather(b.values(), &src);
    let m = CsrMatrix::try_from_parts(n, n, row_ptr, col_idx, vals)?;
    Ok((m, src))
}
