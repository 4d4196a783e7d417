//! What the Chebyshev preconditioner ([`super::Chebyshev`]) and the AMG smoother share, written
//! once: the Chebyshev polynomial on an interval of the spectrum of `D⁻¹A` (one recurrence, one
//! meaning of "degree"), the Lanczos estimate of ρ(D⁻¹A), and the eigenvalues of the small
//! matrices that the spectrum estimates produce.

use rayon::prelude::*;

use crate::backend::ChebyshevSteps;
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Scalar;

/// The Chebyshev polynomial `p` of the Chebyshev iteration for the interval `[lmin, lmax]` of
/// the spectrum of `D⁻¹A` (Saad, *Iterative Methods for Sparse Linear Systems*, 2nd ed.,
/// Algorithm 12.1, started from zero): [`ChebyshevPoly::apply`] computes `z = p(D⁻¹A)·D⁻¹·r`.
///
/// **Degree** means, for the preconditioner and the AMG smoother alike, the degree of the
/// residual polynomial `1 − λ·p(λ)`: a step `x ← x + p(D⁻¹A)·D⁻¹·(b − A·x)` reduces the error by
/// a polynomial of that degree in `D⁻¹A`, and costs `degree` operator applications counting the
/// residual's (`degree − 1` inside [`ChebyshevPoly::apply`]). Degree 1 is Jacobi scaled by `1/θ`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ChebyshevPoly {
    /// The interval's lower end.
    pub lmin: f64,
    /// The interval's upper end.
    pub lmax: f64,
    /// The degree of the residual polynomial (at least 1).
    pub degree: usize,
}

impl ChebyshevPoly {
    /// The coefficients `(c1, c2)` of the [`ChebyshevSteps::poly_step`] calls of one application, in
    /// order: the first step (`c1` unused), then one per operator application
    /// (`degree − 1` of them).
    pub fn steps(&self) -> impl Iterator<Item = (f64, f64)> {
        let theta = 0.5 * (self.lmax + self.lmin);
        let delta = 0.5 * (self.lmax - self.lmin);
        let sigma = theta / delta;
        let mut rho = 1.0 / sigma;
        std::iter::once((0.0, 1.0 / theta)).chain((1..self.degree.max(1)).map(move |_| {
            let rho_new = 1.0 / (2.0 * sigma - rho);
            let c = (rho_new * rho, 2.0 * rho_new / delta);
            rho = rho_new;
            c
        }))
    }

    /// `z ← p(D⁻¹A)·D⁻¹·r` (`dinv` the inverse diagonal, or none for `p(A)·r`), with `op` the
    /// operator (`t ← A·d`) and `[res, d, t]` work vectors of the length of `r`.
    ///
    /// # Errors
    /// The backend's and `op`'s.
    pub fn apply<T: Scalar, B: ChebyshevSteps<T>>(
        &self,
        be: &B,
        dinv: Option<&B::Vector>,
        r: &B::Vector,
        z: &mut B::Vector,
        [res, d, t]: [&mut B::Vector; 3],
        mut op: impl FnMut(&B::Vector, &mut B::Vector) -> Result<()>,
    ) -> Result<()> {
        for (i, (c1, c2)) in self.steps().enumerate() {
            if i == 0 {
                be.poly_step(r, dinv, res, d, z, true, T::zero(), T::of_f64(c2))?;
            } else {
                op(d, t)?;
                be.poly_step(t, dinv, res, d, z, false, T::of_f64(c1), T::of_f64(c2))?;
            }
        }
        Ok(())
    }
}

/// The smallest and the largest of `ev` (`(∞, −∞)` when empty).
pub(crate) fn extremes(ev: &[f64]) -> (f64, f64) {
    let lo = ev.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ev.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// An estimate of ρ(D⁻¹A) from `steps` Lanczos steps on `D^{-1/2} A D^{-1/2}` (symmetric when
/// `A` is; it has the eigenvalues of `D⁻¹A`), the largest Ritz value — the estimate PyAMG's
/// `approximate_spectral_radius` makes. A fixed pseudo-random start, so setup is deterministic.
pub(crate) fn spectral_radius<T: Scalar>(a: &CsrMatrix<T>, inv_diag: &[T], steps: usize) -> f64 {
    let n = a.nrows();
    if n == 0 {
        return 1.0;
    }
    let s: Vec<f64> = inv_diag
        .iter()
        .map(|d| d.as_f64().max(0.0).sqrt())
        .collect();
    let apply = |x: &[f64], y: &mut [f64]| -> Result<()> {
        scaled_product(a, &s, &s, x, y);
        Ok(())
    };
    lanczos_radius(n, n as u64, 0, steps, apply, Ok).expect("the host operations do not fail")
}

/// `y ← S·A·S_c·x` for the rows of `a`: `s` the rows' scaling, `s_cols` the columns' (`s`
/// followed by the halo's on a rank of a distributed matrix).
pub(crate) fn scaled_product<T: Scalar>(
    a: &CsrMatrix<T>,
    s: &[f64],
    s_cols: &[f64],
    x: &[f64],
    y: &mut [f64],
) {
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    y.par_iter_mut().enumerate().for_each(|(i, yi)| {
        let mut acc = 0.0;
        for k in p[i] as usize..p[i + 1] as usize {
            let c = j[k] as usize;
            acc += v[k].as_f64() * s_cols[c] * x[c];
        }
        *yi = s[i] * acc;
    });
}

/// The Lanczos estimate of [`spectral_radius`] on `n` local rows of a symmetric operator of
/// `n_global` rows whose first local row is global row `first` (the start vector is a function
/// of the global row, so a distributed run starts where one process does): `apply` is `y ← M·x`
/// on the local rows, `sum` adds a local partial sum over every part (the identity on one
/// process; identical on every part).
pub(crate) fn lanczos_radius(
    n: usize,
    n_global: u64,
    first: u64,
    steps: usize,
    mut apply: impl FnMut(&[f64], &mut [f64]) -> Result<()>,
    sum: impl Fn(f64) -> Result<f64>,
) -> Result<f64> {
    let dot = |x: &[f64], y: &[f64]| sum(det_dot(x, y));
    if n_global == 0 {
        return Ok(1.0);
    }
    let mut v: Vec<f64> = (0..n as u64)
        .map(|i| {
            let h = crate::sparse::splitmix64((first + i) ^ 0x5EED);
            (h >> 11) as f64 / (1u64 << 53) as f64 + 0.5
        })
        .collect();
    let nv = sum(v.iter().map(|x| x * x).sum::<f64>())?.sqrt();
    v.iter_mut().for_each(|x| *x /= nv);
    let mut v_prev = vec![0.0f64; n];
    let mut w = vec![0.0f64; n];
    let (mut alpha, mut beta) = (Vec::new(), Vec::new());
    let mut b_prev = 0.0;
    let steps = steps.min(usize::try_from(n_global).unwrap_or(usize::MAX));
    for _ in 0..steps.max(1) {
        apply(&v, &mut w)?;
        let al = dot(&w, &v)?;
        w.par_iter_mut()
            .zip(v.par_iter().zip(&v_prev))
            .for_each(|(w, (&v, &vp))| *w -= al * v + b_prev * vp);
        let bt = dot(&w, &w)?.sqrt();
        alpha.push(al);
        if bt.is_nan() || bt <= 1e-12 * al.abs().max(1e-300) {
            break;
        }
        beta.push(bt);
        std::mem::swap(&mut v_prev, &mut v);
        v.par_iter_mut().zip(&w).for_each(|(v, &w)| *v = w / bt);
        b_prev = bt;
    }
    Ok(ritz_max(&alpha, &beta))
}

/// The largest Ritz value of the Lanczos tridiagonal `(alpha, beta)` (diagonal and
/// off-diagonal), or 1 when it is not a positive finite number.
pub(crate) fn ritz_max(alpha: &[f64], beta: &[f64]) -> f64 {
    let m = alpha.len();
    let mut t: Vec<Vec<f64>> = (0..m)
        .map(|i| {
            (0..m)
                .map(|j| {
                    if i == j {
                        alpha[i]
                    } else if j == i + 1 || i == j + 1 {
                        beta[i.min(j)]
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let ev = symmetric_eigenvalues(&mut t);
    let rho = ev.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if rho > 0.0 && rho.is_finite() {
        rho
    } else {
        1.0
    }
}

/// `x·y` summed the same way whatever the thread count or work stealing: fixed chunks summed in
/// order, then the chunk sums in order. (A rayon `sum()` splits where threads steal work, so its
/// rounding changes from run to run; the setup must be deterministic so that a numeric re-setup
/// equals a fresh setup and the CPU and GPU hierarchies are the same.)
fn det_dot(x: &[f64], y: &[f64]) -> f64 {
    const CHUNK: usize = 8192;
    let partial: Vec<f64> = x
        .par_chunks(CHUNK)
        .zip(y.par_chunks(CHUNK))
        .map(|(a, b)| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>())
        .collect();
    partial.iter().sum()
}

/// Eigenvalues of a small symmetric matrix by cyclic Jacobi rotations (destroys `s`).
pub(crate) fn symmetric_eigenvalues(s: &mut [Vec<f64>]) -> Vec<f64> {
    let n = s.len();
    for _sweep in 0..50 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| s[i][j] * s[i][j])
            .sum();
        let diag: f64 = (0..n).map(|i| s[i][i] * s[i][i]).sum();
        if off <= 1e-30 * diag.max(f64::MIN_POSITIVE) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if s[p][q] == 0.0 {
                    continue;
                }
                let theta = (s[q][q] - s[p][p]) / (2.0 * s[p][q]);
                let sgn = if theta >= 0.0 { 1.0 } else { -1.0 };
                let t = sgn / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let sn = t * c;
                for row in s.iter_mut() {
                    let (skp, skq) = (row[p], row[q]);
                    row[p] = c * skp - sn * skq;
                    row[q] = sn * skp + c * skq;
                }
                let (head, tail) = s.split_at_mut(q);
                for (spk, sqk) in head[p].iter_mut().zip(tail[0].iter_mut()) {
                    let (a, b) = (*spk, *sqk);
                    *spk = c * a - sn * b;
                    *sqk = sn * a + c * b;
                }
            }
        }
    }
    (0..n).map(|i| s[i][i]).collect()
}
