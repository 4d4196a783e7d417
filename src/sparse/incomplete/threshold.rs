//! ILUT: Saad's dual-threshold incomplete LU (Y. Saad, *ILUT: a dual threshold incomplete LU
//! factorization*, Numer. Linear Algebra Appl. 1(4), 1994; *Iterative Methods for Sparse Linear
//! Systems*, 2nd ed., Algorithm 10.6), with the preprocessing that makes it work on matrices
//! without a usable diagonal (Benzi, Haws and Tůma, *Preconditioning highly indefinite and
//! nonsymmetric matrices*, SIAM J. Sci. Comput. 22(4), 2000; Duff and Koster 2001): a
//! maximum-product row matching with its scaling ([`reorder::max_product_matching`]), so the
//! matched diagonal has magnitude one and every entry at most one, then optionally a symmetric
//! ordering (reverse Cuthill–McKee of the matched matrix's `A + Aᵀ`, as in that paper, or
//! multicolouring), applied to rows and columns alike so the matched diagonal stays on the
//! diagonal. The automatic path keeps the matched order ([`super::auto_threshold`] says why).
//!
//! Row `i` of the scaled, matched and reordered matrix `B` is eliminated in a dense work row
//! `w` (IKJ): for each `k < i` with `w_k ≠ 0`, in increasing order, `w_k ← w_k / u_kk`; an
//! entry below `τ_i = drop_tol · ‖b_i‖₂` is dropped there and then (no elimination with row
//! `k`), else `w ← w − w_k · u_k` (fill included). Then entries below `τ_i` are dropped from
//! both parts and only the `max_per_row` largest of the strict lower part (`L`) and of the
//! strict upper part (`U`) are kept; the diagonal is always kept. A pivot of magnitude at most
//! `pivot_tol · max_j |b_ij|` (or not finite) is replaced by `(10⁻⁴ + drop_tol) · ‖b_i‖₂` with
//! its sign (the compensation of Saad's SPARSKIT `ilut`), and counted.
//!
//! **Sequential.** Each row reads the `U` rows of every row it eliminates with, and its pattern
//! is only known once it is computed: the factorization runs on the host, row after row. Its
//! two triangles are then applied by the same solves as ILU(0)/ILU(k), on the CPU and the GPU.
//!
//! **Scaling undone in the factor.** With `B = D_r·A'·D_c` (`A'` the permuted `A`, `D_r`, `D_c`
//! the matching's scaling in the factor's order) and `B ≈ L·U`,
//! `A' ≈ (D_r⁻¹·L·D_r)·(D_r⁻¹·U·D_c⁻¹)`: the stored factor holds these two triangles (the first
//! still unit lower triangular), so applying it approximates `A'⁻¹` and the application needs no
//! scaling step.
//!
//! **Re-factorization.** The pattern depends on the values; a re-factorization of new values
//! keeps the first factorization's matching, scaling, ordering and pattern: it runs the same
//! elimination and selection, then keeps only the entries of the kept pattern (zero where a
//! kept position was not selected). On the values it was analysed with it gives the same factor
//! bit for bit.

use super::INSERTED;
use crate::csr::CsrMatrix;
use crate::scalar::{Elem, Scalar};
use num_traits::{Float, Zero};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How the scaled, matched and reordered matrix `B` is gathered from `A`, and the scaling to
/// undo in the factor.
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdMap {
    /// The drop tolerance `τ` (relative to each row's 2-norm).
    pub drop_tol: f64,
    /// The most entries kept in each row of `L` and of `U` (besides the diagonal).
    pub max_per_row: usize,
    /// `B`'s row pointers.
    pub b_row_ptr: Vec<u32>,
    /// `B`'s columns.
    pub b_col: Vec<u32>,
    /// For each of `B`'s entries, its position in `A` ([`INSERTED`] for a diagonal entry that
    /// no matching provides: zero before the shift).
    pub b_src: Vec<u32>,
    /// Row scaling of `B` in the factor's order (`D_r`; ones without scaling).
    pub row_scale: Vec<f64>,
    /// Column scaling of `B` in the factor's order (`D_c`).
    pub col_scale: Vec<f64>,
}

impl ThresholdMap {
    /// `B`'s values from `a`'s (the pattern the map was made for), with each diagonal entry
    /// moved away from zero by `shift × max_j |b_ij|` (as [`super::IncompleteParams::shift`]).
    pub fn gather<T: Elem>(&self, a: &CsrMatrix<T>, shift: f64) -> Vec<T> {
        let av = a.values();
        let n = self.b_row_ptr.len() - 1;
        let mut v = Vec::with_capacity(self.b_col.len());
        for i in 0..n {
            let (lo, hi) = (self.b_row_ptr[i] as usize, self.b_row_ptr[i + 1] as usize);
            for p in lo..hi {
                let s = self.b_src[p];
                let x = if s == INSERTED {
                    T::zero()
                } else {
                    let j = self.b_col[p] as usize;
                    av[s as usize]
                        * T::from_real(T::Real::of_f64(self.row_scale[i] * self.col_scale[j]))
                };
                v.push(x);
            }
            if shift != 0.0 {
                let m = v[lo..hi]
                    .iter()
                    .fold(T::Real::zero(), |m, x| m.max(x.modulus()));
                if let Some(p) = (lo..hi).find(|&p| self.b_col[p] as usize == i) {
                    let d = &mut v[p];
                    let s = if *d == T::zero() {
                        T::one()
                    } else {
                        *d / T::from_real(d.modulus())
                    };
                    *d += s * T::from_real(T::Real::of_f64(shift) * m);
                }
            }
        }
        v
    }

    /// The matrix `B` (scaled, matched, reordered) with `a`'s values.
    pub fn matrix<T: Elem>(&self, a: &CsrMatrix<T>) -> CsrMatrix<T> {
        let n = self.b_row_ptr.len() - 1;
        CsrMatrix::try_from_parts(
            n,
            n,
            self.b_row_ptr.clone(),
            self.b_col.clone(),
            self.gather(a, 0.0),
        )
        .expect("the map keeps a valid pattern")
    }

    /// Multiplies the factor of `B` (on `row_ptr`/`col`, `L` strict lower, `U` upper) into the
    /// factor of the unscaled matrix (see the [module docs](self)).
    pub fn unscale<T: Elem>(&self, row_ptr: &[u32], col: &[u32], val: &mut [T]) {
        let (r, c) = (&self.row_scale, &self.col_scale);
        for i in 0..row_ptr.len() - 1 {
            for p in row_ptr[i] as usize..row_ptr[i + 1] as usize {
                let j = col[p] as usize;
                let s = if j < i {
                    r[j] / r[i]
                } else {
                    1.0 / (r[i] * c[j])
                };
                val[p] *= T::from_real(T::Real::of_f64(s));
            }
        }
    }
}

/// An ILUT factor: `L` (strict lower part, unit diagonal implied) and `U` (diagonal and upper
/// part) in one matrix with sorted rows, and the pivots that were compensated.
#[derive(Clone, Debug)]
pub struct IlutFactor<T> {
    /// Row pointers.
    pub row_ptr: Vec<u32>,
    /// Columns (sorted within rows; every row holds its diagonal).
    pub col: Vec<u32>,
    /// Values.
    pub val: Vec<T>,
    /// Pivots replaced by the compensation (see the [module docs](self)).
    pub compensated: usize,
}

/// ILUT of the square matrix on `row_ptr`/`col`/`val` (sorted rows). `keep`: the pattern of an
/// earlier factor (row pointers, columns) to restrict the result to (see the
/// [module docs](self)); `None` selects freely.
#[allow(clippy::too_many_arguments)]
pub fn ilut<T: Elem>(
    n: usize,
    row_ptr: &[u32],
    col: &[u32],
    val: &[T],
    drop_tol: f64,
    max_per_row: usize,
    pivot_tol: f64,
    keep: Option<(&[u32], &[u32])>,
) -> IlutFactor<T> {
    let zero = T::zero();
    let mut out_ptr = Vec::with_capacity(n + 1);
    out_ptr.push(0u32);
    let mut out_col: Vec<u32> = Vec::with_capacity(row_ptr[n] as usize * 2);
    let mut out_val: Vec<T> = Vec::with_capacity(row_ptr[n] as usize * 2);
    // `U` rows of the factor so far: their start (just after the diagonal) in `out_*`.
    let mut diag_at = vec![0usize; n];
    let mut w = vec![zero; n];
    let mut in_w = vec![false; n];
    let mut nz: Vec<u32> = Vec::new();
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut lower: Vec<(u32, T)> = Vec::new();
    let mut upper: Vec<(u32, T)> = Vec::new();
    let mut compensated = 0;
    for i in 0..n {
        let (lo, hi) = (row_ptr[i] as usize, row_ptr[i + 1] as usize);
        let mut norm2 = 0.0f64;
        let mut rowmax = 0.0f64;
        for p in lo..hi {
            let j = col[p] as usize;
            let x = val[p];
            let m = x.modulus().as_f64();
            norm2 += m * m;
            rowmax = rowmax.max(m);
            w[j] = x;
            if !in_w[j] {
                in_w[j] = true;
                nz.push(j as u32);
                if j < i {
                    heap.push(Reverse(j as u32));
                }
            }
        }
        let norm = norm2.sqrt();
        let tau = drop_tol * norm;
        if !in_w[i] {
            in_w[i] = true;
            nz.push(i as u32);
        }
        // Eliminate with the rows k < i in increasing order (fill joins the heap).
        while let Some(Reverse(k)) = heap.pop() {
            let k = k as usize;
            let d = diag_at[k];
            let l = w[k] / out_val[d];
            if l.modulus().as_f64() < tau || l == zero {
                w[k] = zero;
                continue;
            }
            w[k] = l;
            for q in d + 1..out_ptr[k + 1] as usize {
                let j = out_col[q] as usize;
                if !in_w[j] {
                    in_w[j] = true;
                    nz.push(j as u32);
                    w[j] = zero;
                    if j < i {
                        heap.push(Reverse(j as u32));
                    }
                }
                w[j] -= l * out_val[q];
            }
        }
        // Select: drop below τ, the `max_per_row` largest of each part.
        lower.clear();
        upper.clear();
        for &j in &nz {
            let j = j as usize;
            let x = w[j];
            if j != i && x != zero && x.modulus().as_f64() >= tau {
                if j < i {
                    lower.push((j as u32, x));
                } else {
                    upper.push((j as u32, x));
                }
            }
        }
        for part in [&mut lower, &mut upper] {
            if part.len() > max_per_row {
                part.select_nth_unstable_by(max_per_row, |a, b| {
                    b.1.modulus()
                        .as_f64()
                        .total_cmp(&a.1.modulus().as_f64())
                        .then(a.0.cmp(&b.0))
                });
                part.truncate(max_per_row);
            }
        }
        let mut piv = w[i];
        if !piv.finite() || piv.modulus().as_f64() <= pivot_tol * rowmax {
            let s = if piv == zero || !piv.finite() {
                T::one()
            } else {
                piv / T::from_real(piv.modulus())
            };
            let m = (1e-4 + drop_tol) * if norm > 0.0 { norm } else { 1.0 };
            piv = s * T::from_real(T::Real::of_f64(m));
            compensated += 1;
        }
        upper.push((i as u32, piv));
        lower.sort_unstable_by_key(|e| e.0);
        upper.sort_unstable_by_key(|e| e.0);
        // Restrict to the kept pattern (zero where a kept position was not selected).
        match keep {
            None => {
                for &(j, x) in lower.iter().chain(upper.iter()) {
                    if j as usize == i {
                        diag_at[i] = out_col.len();
                    }
                    out_col.push(j);
                    out_val.push(x);
                }
            }
            Some((kp, kc)) => {
                let sel = |j: u32| -> T {
                    let part = if (j as usize) < i { &lower } else { &upper };
                    part.binary_search_by_key(&j, |e| e.0)
                        .map_or(zero, |k| part[k].1)
                };
                for &j in &kc[kp[i] as usize..kp[i + 1] as usize] {
                    if j as usize == i {
                        diag_at[i] = out_col.len();
                    }
                    out_col.push(j);
                    out_val.push(sel(j));
                }
            }
        }
        out_ptr.push(out_col.len() as u32);
        for &j in &nz {
            w[j as usize] = zero;
            in_w[j as usize] = false;
        }
        nz.clear();
    }
    IlutFactor {
        row_ptr: out_ptr,
        col: out_col,
        val: out_val,
        compensated,
    }
}
