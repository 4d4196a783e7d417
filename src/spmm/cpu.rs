//! CPU SpMM: the sequential reference [`spmm_seq`] and the multithreaded product [`spmm_par`].

use rayon::prelude::*;

use super::Layout;
use crate::{CsrMatrix, Scalar};

/// The `Y` update of one row from its `k` sums: `y ← α·acc + β·y` (`β = 0` does not read `y`).
#[inline]
fn finish<T: Scalar>(alpha: T, acc: T, beta: T, y: &mut T) {
    *y = if beta == T::zero() {
        alpha * acc
    } else {
        alpha * acc + beta * *y
    };
}

/// Sequential reference: every row summed left to right, column by column. Defines the
/// semantics of [`super::spmm`]; slow and obviously correct.
///
/// # Panics
/// When `x.len() != ncols·k` or `y.len() != nrows·k` (callers check with
/// [`super::check_shapes`] first).
pub fn spmm_seq<T: Scalar>(
    alpha: T,
    a: &CsrMatrix<T>,
    x: &[T],
    k: usize,
    layout: Layout,
    beta: T,
    y: &mut [T],
) {
    let (n, m) = (a.nrows(), a.ncols());
    assert_eq!(
        x.len(),
        m * k,
        "spmm_seq: X has {} elements, expected {m}·{k}",
        x.len()
    );
    assert_eq!(
        y.len(),
        n * k,
        "spmm_seq: Y has {} elements, expected {n}·{k}",
        y.len()
    );
    for i in 0..n {
        let (cols, vals) = a.row(i);
        for j in 0..k {
            let yi = &mut y[layout.index(i, j, n, k)];
            if alpha == T::zero() {
                *yi = if beta == T::zero() {
                    T::zero()
                } else {
                    beta * *yi
                };
                continue;
            }
            let mut acc = T::zero();
            for (&c, &v) in cols.iter().zip(vals) {
                acc += v * x[layout.index(c as usize, j, m, k)];
            }
            finish(alpha, acc, beta, yi);
        }
    }
}

/// A raw pointer to `Y` shared by the tasks of [`spmm_par`], each writing disjoint rows.
#[derive(Clone, Copy)]
struct RowsOut<T>(*mut T);
// SAFETY: the tasks that share it write disjoint elements (distinct rows of Y) and nothing reads
// them concurrently; the pointee outlives the parallel loop (it is `y`, borrowed for the call).
unsafe impl<T: Send> Send for RowsOut<T> {}
unsafe impl<T: Send> Sync for RowsOut<T> {}

/// Multithreaded SpMM over chunks of rows (a few per thread, so work stealing evens out uneven
/// rows). Each row's `k` sums are accumulated in one pass over its entries; the entries are read
/// once for all `k` columns. Small products run on the calling thread.
///
/// # Panics
/// As [`spmm_seq`].
pub fn spmm_par<T: Scalar>(
    alpha: T,
    a: &CsrMatrix<T>,
    x: &[T],
    k: usize,
    layout: Layout,
    beta: T,
    y: &mut [T],
) {
    let (n, m) = (a.nrows(), a.ncols());
    assert_eq!(
        x.len(),
        m * k,
        "spmm: X has {} elements, expected {m}·{k}",
        x.len()
    );
    assert_eq!(
        y.len(),
        n * k,
        "spmm: Y has {} elements, expected {n}·{k}",
        y.len()
    );
    if n == 0 || k == 0 {
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    let work = (a.nnz() + n).saturating_mul(k);
    let chunk = if work < 1 << 15 {
        n
    } else {
        n.div_ceil(threads * 8).max(64)
    };
    let (rp, ci, va) = (a.row_ptr(), a.col_idx(), a.values());
    // Rows r0..r1 into `out(i, j)`, with a k-long accumulator.
    let rows = |r0: usize, r1: usize, out: &mut dyn FnMut(usize, usize, T)| {
        let mut acc = vec![T::zero(); k];
        for i in r0..r1 {
            acc.iter_mut().for_each(|v| *v = T::zero());
            if alpha != T::zero() {
                let (s, e) = (rp[i] as usize, rp[i + 1] as usize);
                match layout {
                    Layout::RowMajor => {
                        for p in s..e {
                            let (c, v) = (ci[p] as usize, va[p]);
                            let xr = &x[c * k..c * k + k];
                            for (a, &xv) in acc.iter_mut().zip(xr) {
                                *a += v * xv;
                            }
                        }
                    }
                    Layout::ColMajor => {
                        for (j, a) in acc.iter_mut().enumerate() {
                            let xc = &x[j * m..j * m + m];
                            let mut s0 = T::zero();
                            for p in s..e {
                                s0 += va[p] * xc[ci[p] as usize];
                            }
                            *a = s0;
                        }
                    }
                }
            }
            for (j, &v) in acc.iter().enumerate() {
                out(i, j, v);
            }
        }
    };
    match layout {
        Layout::RowMajor => {
            y.par_chunks_mut(chunk * k).enumerate().for_each(|(c, yc)| {
                let r0 = c * chunk;
                let r1 = (r0 + chunk).min(n);
                rows(r0, r1, &mut |i, j, v| {
                    finish(alpha, v, beta, &mut yc[(i - r0) * k + j])
                });
            });
        }
        Layout::ColMajor => {
            let out = RowsOut(y.as_mut_ptr());
            (0..n.div_ceil(chunk)).into_par_iter().for_each(|c| {
                let r0 = c * chunk;
                let r1 = (r0 + chunk).min(n);
                let out = out;
                rows(r0, r1, &mut |i, j, v| {
                    // SAFETY: i < n and j < k, so j·n + i < n·k = y.len(); this task alone
                    // writes rows r0..r1 (the chunks are disjoint).
                    let yi = unsafe { &mut *out.0.add(j * n + i) };
                    finish(alpha, v, beta, yi);
                });
            });
        }
    }
}
