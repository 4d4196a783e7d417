//! CPU implementations of `y ← α·A·x + β·y`: the sequential reference, the parallel kernel, the
//! paper's segmented-scan formulation, and an f64 reference with the error measure used by tests
//! and `spmv-bench`.
//!
//! All of them share the semantics stated in the [parent module](super): `β = 0` never reads
//! `y`, `α = 0` never reads `A` or `x`, and mismatched lengths panic naming both sizes.

use rayon::prelude::*;

use num_complex::Complex;

use crate::{CsrMatrix, Elem, Scalar};

/// Below this cost (entries + rows) a product runs on the calling thread: a rayon fork–join
/// costs a few microseconds, as much as a whole product of this size.
const SEQ_CUTOFF: usize = 1 << 15;
/// The smallest cost of one parallel chunk.
const MIN_CHUNK_COST: usize = 1 << 13;
/// Chunks per rayon thread, so work stealing can even out what the static split misses.
const CHUNKS_PER_THREAD: usize = 4;

/// A stored value type that widens exactly to the working type `T`: `T` itself, and `f32` under
/// `f64` (the storage of [`spmv_mixed`]).
trait Widen<T>: Elem {
    fn widen_to(self) -> T;
}

impl<T: Elem> Widen<T> for T {
    #[inline(always)]
    fn widen_to(self) -> T {
        self
    }
}

impl Widen<f64> for f32 {
    #[inline(always)]
    fn widen_to(self) -> f64 {
        self as f64
    }
}

#[track_caller]
fn check_lengths<V: Elem, T>(what: &str, a: &CsrMatrix<V>, x: &[T], y: Option<&[T]>) {
    assert!(
        x.len() == a.ncols(),
        "{what}: x has length {} but A has {} columns (A is {}×{})",
        x.len(),
        a.ncols(),
        a.nrows(),
        a.ncols()
    );
    if let Some(y) = y {
        assert!(
            y.len() == a.nrows(),
            "{what}: y has length {} but A has {} rows (A is {}×{})",
            y.len(),
            a.nrows(),
            a.nrows(),
            a.ncols()
        );
    }
}

/// `y ← β·y` without reading `y` when `β = 0`: the `α = 0` case, where `A` and `x` are not read.
fn scale_only<T: Elem>(beta: T, y: &mut [T]) {
    if beta == T::zero() {
        y.fill(T::zero());
    } else {
        y.iter_mut().for_each(|v| *v *= beta);
    }
}

/// Combines a row sum with the old `y` value; `β = 0` does not read `old`.
#[inline(always)]
fn combine<T: Elem>(alpha: T, sum: T, beta: T, old: &mut T) {
    *old = if beta == T::zero() {
        alpha * sum
    } else {
        alpha * sum + beta * *old
    };
}

/// The sequential reference: one row after the other, each summed left to right in `T`.
///
/// Plain, obviously correct code (bounds-checked indexing); the oracle for the other versions.
///
/// # Panics
/// When `x.len() != a.ncols()` or `y.len() != a.nrows()`.
pub fn spmv_seq<T: Elem>(alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    check_lengths("spmv_seq", a, x, Some(y));
    if alpha == T::zero() {
        return scale_only(beta, y);
    }
    for (i, yi) in y.iter_mut().enumerate() {
        let (cols, vals) = a.row(i);
        let mut sum = T::zero();
        for (&c, &v) in cols.iter().zip(vals) {
            sum += v * x[c as usize];
        }
        combine(alpha, sum, beta, yi);
    }
}

/// One row's dot product with four interleaved partial sums (the FP-add latency chain of a single
/// accumulator, not memory, limits a row that sits in cache).
///
/// # Safety
/// Every `cols[k] < x.len()` (guaranteed by [`CsrMatrix`]'s invariants once
/// `x.len() == a.ncols()` is checked).
#[inline(always)]
unsafe fn row_dot<V: Widen<T>, T: Elem>(cols: &[u32], vals: &[V], x: &[T]) -> T {
    let z = T::zero();
    let (mut s0, mut s1, mut s2, mut s3) = (z, z, z, z);
    let mut c4 = cols.chunks_exact(4);
    let mut v4 = vals.chunks_exact(4);
    for (c, v) in (&mut c4).zip(&mut v4) {
        // SAFETY: the caller guarantees every column index is < x.len().
        unsafe {
            s0 += v[0].widen_to() * *x.get_unchecked(c[0] as usize);
            s1 += v[1].widen_to() * *x.get_unchecked(c[1] as usize);
            s2 += v[2].widen_to() * *x.get_unchecked(c[2] as usize);
            s3 += v[3].widen_to() * *x.get_unchecked(c[3] as usize);
        }
    }
    for (&c, &v) in c4.remainder().iter().zip(v4.remainder()) {
        // SAFETY: as above.
        s0 += v.widen_to() * unsafe { *x.get_unchecked(c as usize) };
    }
    (s0 + s1) + (s2 + s3)
}

/// Rows `first..first + y.len()` of the product into `y` (the kernel of [`spmv_par`]).
///
/// # Safety
/// `x.len() == a.ncols()` and `first + y.len() <= a.nrows()`.
unsafe fn rows_into<V: Widen<T>, T: Elem>(
    alpha: T,
    a: &CsrMatrix<V>,
    x: &[T],
    beta: T,
    first: usize,
    y: &mut [T],
) {
    let rp = &a.row_ptr()[first..first + y.len() + 1];
    let (ci, va) = (a.col_idx(), a.values());
    for (yi, w) in y.iter_mut().zip(rp.windows(2)) {
        let (s, e) = (w[0] as usize, w[1] as usize);
        // SAFETY: the CSR invariants bound every column index by ncols == x.len().
        let sum = unsafe { row_dot(&ci[s..e], &va[s..e], x) };
        combine(alpha, sum, beta, yi);
    }
}

/// Splits the rows `0..nrows` into `parts` contiguous ranges of nearly equal cost, where the
/// cost of a range is its number of entries plus its number of rows. Returns `parts + 1`
/// boundaries, from `0` to `nrows`, non-decreasing (a range is empty when one row outweighs
/// several parts: rows are never split).
///
/// `row_ptr` is a CSR row-pointer array (length `nrows + 1`, non-decreasing, starting at 0).
///
/// # Panics
/// When `parts == 0` or `row_ptr` is empty.
pub fn balanced_row_splits(row_ptr: &[u32], parts: usize) -> Vec<usize> {
    assert!(parts > 0, "balanced_row_splits: parts must be positive");
    assert!(!row_ptr.is_empty(), "balanced_row_splits: row_ptr is empty");
    let nrows = row_ptr.len() - 1;
    // cost(i) = entries before row i + rows before row i: strictly increasing in i.
    let cost = |i: usize| row_ptr[i] as usize + i;
    let total = cost(nrows);
    let mut splits = Vec::with_capacity(parts + 1);
    splits.push(0);
    for k in 1..parts {
        let target = ((total as u128 * k as u128) / parts as u128) as usize;
        // Smallest i with cost(i) >= target.
        let (mut lo, mut hi) = (*splits.last().unwrap(), nrows);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cost(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        splits.push(lo);
    }
    splits.push(nrows);
    splits
}

/// The parallel product with an explicit number of chunks (rows balanced by nonzeros; see
/// [`balanced_row_splits`]). `chunks = 1` runs on the calling thread. For tests and tuning;
/// [`spmv_par`] picks the chunk count itself.
///
/// # Panics
/// When `chunks == 0`, `x.len() != a.ncols()` or `y.len() != a.nrows()`.
pub fn spmv_chunked<T: Elem>(
    alpha: T,
    a: &CsrMatrix<T>,
    x: &[T],
    beta: T,
    y: &mut [T],
    chunks: usize,
) {
    chunked(alpha, a, x, beta, y, chunks)
}

/// [`spmv_chunked`] for a stored value type `V` that widens to `T`.
fn chunked<V: Widen<T>, T: Elem>(
    alpha: T,
    a: &CsrMatrix<V>,
    x: &[T],
    beta: T,
    y: &mut [T],
    chunks: usize,
) {
    check_lengths("spmv_par", a, x, Some(y));
    assert!(chunks > 0, "spmv_chunked: chunks must be positive");
    if alpha == T::zero() {
        return scale_only(beta, y);
    }
    if chunks == 1 {
        // SAFETY: lengths checked above; rows 0..nrows.
        return unsafe { rows_into(alpha, a, x, beta, 0, y) };
    }
    let splits = balanced_row_splits(a.row_ptr(), chunks);
    let mut parts: Vec<(usize, &mut [T])> = Vec::with_capacity(chunks);
    let mut rest = y;
    for w in splits.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        if !head.is_empty() {
            parts.push((w[0], head));
        }
        rest = tail;
    }
    parts.into_par_iter().for_each(|(first, ys)| {
        // SAFETY: lengths checked above; first + ys.len() <= nrows by construction of splits.
        unsafe { rows_into(alpha, a, x, beta, first, ys) }
    });
}

/// The parallel product: rows in contiguous chunks balanced by nonzeros (a few per rayon thread),
/// on the calling thread when the matrix is small. [`super::spmv`] calls this.
///
/// # Panics
/// When `x.len() != a.ncols()` or `y.len() != a.nrows()`.
pub fn spmv_par<T: Elem>(alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    spmv_chunked(alpha, a, x, beta, y, par_chunks(a.nnz() + a.nrows()))
}

/// `y ← α·A·x + β·y` for a matrix whose values are stored in `f32` under `f64` vectors: each
/// value is widened exactly to `f64` before its product and the sums are `f64`, so the result is
/// the `f64` product of the stored (rounded) values — [`spmv_par`] of `a.cast::<f64>()`, bit for
/// bit, without the cast. Rows in parallel as in [`spmv_par`]; a quarter fewer bytes per entry
/// than an `f64` matrix.
///
/// # Panics
/// When `x.len() != a.ncols()` or `y.len() != a.nrows()`.
pub fn spmv_mixed(alpha: f64, a: &CsrMatrix<f32>, x: &[f64], beta: f64, y: &mut [f64]) {
    chunked(alpha, a, x, beta, y, par_chunks(a.nnz() + a.nrows()))
}

/// Chunks of a parallel product of `cost` (entries + rows).
fn par_chunks(cost: usize) -> usize {
    // Asking rayon for its thread count costs more than a tiny product: small matrices skip it.
    if cost < SEQ_CUTOFF {
        1
    } else {
        let threads = rayon::current_num_threads();
        (threads * CHUNKS_PER_THREAD)
            .min(cost / MIN_CHUNK_COST)
            .max(1)
    }
}

/// Backward inclusive segmented sum scan in place: `data[k]` becomes the sum of `data[k..=t]`,
/// where `t` is the last element of `k`'s segment. A segment starts at every `k` with
/// `head[k]` (and at 0); so after the scan every segment's first element holds the segment's sum.
///
/// This is the operation of step 3 in the paper; written as the recurrence
/// `data[k] += data[k+1]` unless `head[k+1]`, scanned from the back.
fn segscan_backward_inclusive<T: Elem>(data: &mut [T], head: &[bool]) {
    debug_assert_eq!(data.len(), head.len());
    for k in (0..data.len().saturating_sub(1)).rev() {
        if !head[k + 1] {
            let next = data[k + 1];
            data[k] += next;
        }
    }
}

/// The paper's formulation (Sengupta et al. 2007, §4.2) on the CPU, as the reference for the GPU
/// kernel: products `value[k]·x[index[k]]`, head flags scattered at every row start, a backward
/// inclusive segmented sum scan, and a gather of each row's head (0 for an empty row).
///
/// Allocates two `nnz`-long temporaries; the sum of a row is formed right to left, so the result
/// differs from [`spmv_seq`] by rounding only.
///
/// # Panics
/// When `x.len() != a.ncols()` or `y.len() != a.nrows()`.
pub fn spmv_segscan<T: Elem>(alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    check_lengths("spmv_segscan", a, x, Some(y));
    if alpha == T::zero() {
        return scale_only(beta, y);
    }
    let nnz = a.nnz();
    let rp = a.row_ptr();
    // Step 1: products.
    let mut product: Vec<T> = a
        .values()
        .iter()
        .zip(a.col_idx())
        .map(|(&v, &c)| v * x[c as usize])
        .collect();
    // Step 2: head flags, one segment per row (an empty row flags the next row's start, which is
    // flagged anyway; a row start equal to nnz belongs to trailing empty rows and is skipped).
    let mut head = vec![false; nnz];
    for &p in &rp[..a.nrows()] {
        if (p as usize) < nnz {
            head[p as usize] = true;
        }
    }
    // Step 3: backward inclusive segmented scan.
    segscan_backward_inclusive(&mut product, &head);
    // Step 4: gather the heads.
    for (i, yi) in y.iter_mut().enumerate() {
        let (s, e) = (rp[i] as usize, rp[i + 1] as usize);
        let sum = if s < e { product[s] } else { T::zero() };
        combine(alpha, sum, beta, yi);
    }
}

/// `A·x` accumulated in `f64` (values and `x` widened exactly), sequential, left to right: the
/// reference against which errors are measured. For `T = f64` it equals
/// `spmv_seq(1.0, a, x, 0.0, y)` bit for bit.
///
/// # Panics
/// When `x.len() != a.ncols()`.
pub fn spmv_f64_reference<T: Scalar>(a: &CsrMatrix<T>, x: &[T]) -> Vec<f64> {
    check_lengths::<T, T>("spmv_f64_reference", a, x, None);
    (0..a.nrows())
        .map(|i| {
            let (cols, vals) = a.row(i);
            let mut sum = 0f64;
            for (&c, &v) in cols.iter().zip(vals) {
                sum += v.as_f64() * x[c as usize].as_f64();
            }
            sum
        })
        .collect()
}

/// The error measure of tests and `spmv-bench`: the largest absolute difference, relative to the
/// largest reference magnitude,
///
/// `max_i |y_i − ref_i| / max(‖ref‖_∞, f64::MIN_POSITIVE)`.
///
/// Normalising by `‖ref‖_∞` rather than by each `|ref_i|` keeps rows whose sum cancels to almost
/// zero from dominating the figure; for a well-conditioned product in precision `T` it is a small
/// multiple of `T::EPS`. Positions where both values are NaN, or equal infinities, count as
/// equal; any other non-finite difference makes the result `f64::INFINITY`. Non-finite reference
/// entries are left out of `‖ref‖_∞`.
///
/// # Panics
/// When the lengths differ.
pub fn max_rel_err<T: Scalar>(y: &[T], reference: &[f64]) -> f64 {
    let terms = y.iter().zip(reference).map(|(&yi, &ri)| {
        let yi = yi.as_f64();
        let d = if yi == ri || (yi.is_nan() && ri.is_nan()) {
            0.0
        } else {
            (yi - ri).abs()
        };
        (d, ri.abs())
    });
    largest_relative("max_rel_err", y.len(), reference.len(), terms)
}

/// `max_i d_i / max(max_i m_i, f64::MIN_POSITIVE)` over the differences `d_i` and the reference
/// magnitudes `m_i` (non-finite magnitudes left out); a non-finite difference gives
/// `f64::INFINITY`.
///
/// # Panics
/// When the lengths differ (`what` names the caller).
fn largest_relative(
    what: &str,
    len: usize,
    reference_len: usize,
    terms: impl Iterator<Item = (f64, f64)>,
) -> f64 {
    assert!(
        len == reference_len,
        "{what}: y has length {len} but the reference has length {reference_len}"
    );
    let (mut worst, mut scale) = (0f64, 0f64);
    for (d, m) in terms {
        if !d.is_finite() {
            return f64::INFINITY;
        }
        worst = worst.max(d);
        if m.is_finite() {
            scale = scale.max(m);
        }
    }
    worst / scale.max(f64::MIN_POSITIVE)
}

/// `y ← α·op(A)·x + β·y` where `op(A)` is `A`, `Aᵀ` or `Aᴴ`, sequentially. `A·x` runs
/// [`spmv_par`]; the transposed products scatter row by row (`y[col] += op(a)·x[row]`) on the
/// calling thread, since rows of `A` are columns of `op(A)` and a parallel scatter would race.
/// For many products with `Aᴴ`, form it once with
/// [`CsrMatrix::conj_transpose`](crate::CsrMatrix::conj_transpose) and use [`spmv_par`].
///
/// # Panics
/// When the lengths do not fit `op(A)`: `x.len()` must be its columns, `y.len()` its rows (both
/// sizes are named).
pub fn spmv_op<T: Elem>(op: super::Op, alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    use super::Op;
    let conj = match op {
        Op::NoTrans => return spmv_par(alpha, a, x, beta, y),
        Op::Trans => false,
        Op::ConjTrans => true,
    };
    assert!(
        x.len() == a.nrows() && y.len() == a.ncols(),
        "spmv_op({op:?}): x has length {} and y {}, but op(A) is {}×{}",
        x.len(),
        y.len(),
        a.ncols(),
        a.nrows()
    );
    scale_only(beta, y);
    if alpha == T::zero() {
        return;
    }
    for (i, &xi) in x.iter().enumerate() {
        let (cols, vals) = a.row(i);
        let axi = alpha * xi;
        for (&c, &v) in cols.iter().zip(vals) {
            let v = if conj { v.conj() } else { v };
            y[c as usize] += v * axi;
        }
    }
}

/// Adds `v` to the compensated sum `(sum, carry)` (Kahan–Babuška–Neumaier), part by part.
#[inline]
fn kahan_add(sum: &mut f64, carry: &mut f64, v: f64) {
    let t = *sum + v;
    if sum.abs() >= v.abs() {
        *carry += (*sum - t) + v;
    } else {
        *carry += (v - t) + *sum;
    }
    *sum = t;
}

/// `op(A)·x` for any element type, each product formed exactly in `f64` parts (`re·re − im·im`
/// with widened values) and summed with compensated (Kahan–Babuška–Neumaier) sums, real and
/// imaginary parts apart: the reference of the complex tests, accurate to a few units of
/// `f64` whatever the cancellation within a row.
///
/// # Panics
/// When the length of `x` is not the number of columns of `op(A)`.
pub fn spmv_compensated_reference<T: Elem>(
    op: super::Op,
    a: &CsrMatrix<T>,
    x: &[T],
) -> Vec<Complex<f64>> {
    use super::Op;
    let (m, n) = match op {
        Op::NoTrans => (a.nrows(), a.ncols()),
        _ => (a.ncols(), a.nrows()),
    };
    assert!(
        x.len() == n,
        "spmv_compensated_reference({op:?}): x has length {} but op(A) has {n} columns",
        x.len()
    );
    let mut acc = vec![[0f64; 4]; m]; // re, re carry, im, im carry
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        for (&c, &v) in cols.iter().zip(vals) {
            let (v, c) = (v.widen(), c as usize);
            let (v, out, xin) = match op {
                Op::NoTrans => (v, i, x[c].widen()),
                Op::Trans => (v, c, x[i].widen()),
                Op::ConjTrans => (v.conj(), c, x[i].widen()),
            };
            let [sr, cr, si, ci] = &mut acc[out];
            // The four part products, each summed separately: no cancellation inside one.
            kahan_add(sr, cr, v.re * xin.re);
            kahan_add(sr, cr, -(v.im * xin.im));
            kahan_add(si, ci, v.re * xin.im);
            kahan_add(si, ci, v.im * xin.re);
        }
    }
    acc.into_iter()
        .map(|[sr, cr, si, ci]| Complex::new(sr + cr, si + ci))
        .collect()
}

/// [`max_rel_err`] for any element type against a complex reference: the largest modulus of
/// the difference relative to the largest reference modulus,
/// `max_i |y_i − ref_i| / max(max_i |ref_i|, f64::MIN_POSITIVE)`; any non-finite difference
/// gives `f64::INFINITY`.
///
/// # Panics
/// When the lengths differ.
pub fn max_rel_err_complex<T: Elem>(y: &[T], reference: &[Complex<f64>]) -> f64 {
    let terms = y
        .iter()
        .zip(reference)
        .map(|(&yi, &ri)| ((yi.widen() - ri).norm(), ri.norm()));
    largest_relative("max_rel_err_complex", y.len(), reference.len(), terms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_balance_by_nonzeros() {
        // One heavy row of 1000 entries followed by 1000 rows of one entry each.
        let mut rp = vec![0u32, 1000];
        for i in 0..1000 {
            rp.push(1001 + i);
        }
        let s = balanced_row_splits(&rp, 2);
        assert_eq!(s.len(), 3);
        // Total cost 2000 + 1001 rows; the first half ends soon after the heavy row.
        assert!(s[1] > 0 && s[1] < 600, "{s:?}");
        assert_eq!(*s.last().unwrap(), 1001);
        let s = balanced_row_splits(&[0], 4);
        assert_eq!(s, vec![0, 0, 0, 0, 0]);
    }

    #[test]
    fn segscan_matches_paper_figure() {
        // Figure 3 of the paper: rows [a b], [c d e], [f].
        let mut p = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let head = [true, false, true, false, false, true];
        segscan_backward_inclusive(&mut p, &head);
        assert_eq!(p, vec![3.0, 2.0, 12.0, 9.0, 5.0, 6.0]);
    }

    #[test]
    fn rel_err_definition() {
        assert_eq!(max_rel_err(&[1.0f64, 2.0], &[1.0, 2.0]), 0.0);
        assert_eq!(max_rel_err(&[1.0f64, 2.5], &[1.0, 2.0]), 0.25);
        assert_eq!(max_rel_err(&[0.0f64], &[0.0]), 0.0);
        assert_eq!(max_rel_err(&[f64::NAN], &[f64::NAN]), 0.0);
        assert_eq!(max_rel_err(&[f64::NAN], &[1.0]), f64::INFINITY);
    }

    #[test]
    #[should_panic(expected = "x has length 2 but A has 3 columns")]
    fn length_mismatch_names_both_sizes() {
        let a = CsrMatrix::<f64>::zeros(3, 3);
        spmv_seq(1.0, &a, &[0.0; 2], 0.0, &mut [0.0; 3]);
    }
}
