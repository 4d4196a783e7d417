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

impl<T> RowsOut<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper, not its field).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

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
    let scale = |yv: &mut T| {
        *yv = if beta == T::zero() {
            T::zero()
        } else {
            beta * *yv
        }
    };
    match layout {
        Layout::RowMajor => {
            y.par_chunks_mut(chunk * k).enumerate().for_each(|(c, yc)| {
                let r0 = c * chunk;
                let mut acc = vec![T::zero(); k];
                for (li, yrow) in yc.chunks_mut(k).enumerate() {
                    if alpha == T::zero() {
                        yrow.iter_mut().for_each(scale);
                        continue;
                    }
                    let i = r0 + li;
                    acc.fill(T::zero());
                    for p in rp[i] as usize..rp[i + 1] as usize {
                        let (c, v) = (ci[p] as usize, va[p]);
                        for (a, &xv) in acc.iter_mut().zip(&x[c * k..c * k + k]) {
                            *a += v * xv;
                        }
                    }
                    for (yv, &s) in yrow.iter_mut().zip(&acc) {
                        finish(alpha, s, beta, yv);
                    }
                }
            });
        }
        Layout::ColMajor => {
            // Rows in blocks small enough that a block's entries stay in cache while each of
            // the k columns passes over them.
            const BLOCK: usize = 256;
            let out = RowsOut(y.as_mut_ptr());
            (0..n.div_ceil(chunk)).into_par_iter().for_each(|c| {
                let (r0, r1) = (c * chunk, ((c + 1) * chunk).min(n));
                for b0 in (r0..r1).step_by(BLOCK) {
                    let b1 = (b0 + BLOCK).min(r1);
                    for j in 0..k {
                        let xc = &x[j * m..(j + 1) * m];
                        for i in b0..b1 {
                            // SAFETY: i < n and j < k, so j·n + i < n·k = y.len(); this task
                            // alone writes rows r0..r1 (the chunks are disjoint).
                            let yi = unsafe { &mut *out.ptr().add(j * n + i) };
                            if alpha == T::zero() {
                                scale(yi);
                                continue;
                            }
                            let mut s0 = T::zero();
                            for p in rp[i] as usize..rp[i + 1] as usize {
                                s0 += va[p] * xc[ci[p] as usize];
                            }
                            finish(alpha, s0, beta, yi);
                        }
                    }
                }
            });
        }
    }
}
