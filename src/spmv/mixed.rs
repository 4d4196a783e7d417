//! Matrices stored in `f32` under `f64` vectors: fewer bytes per product, `f64` answers.
//!
//! An iterative solve at its memory floor moves the matrix once per product; storing the values
//! in `f32` moves 8 bytes per entry (value and column index) instead of 12. [`MixedCsr`] keeps
//! the values in `f32`, widens each one exactly to `f64` before its product and sums in `f64`
//! ([`cpu::spmv_mixed`](super::cpu::spmv_mixed); on the GPU `spmv::gpu::mixed::GpuMixedCsr`, the
//! same kernels with a value type apart from the vector type). Its product is the `f64` product
//! of the rounded values `fl32(A)`, which differ from `A` by at most `2⁻²⁴·|a|` per entry.
//!
//! # `f64` answers
//!
//! A solver iterating with `fl32(A)` converges towards `fl32(A)⁻¹·b`, whose residual for `A`
//! is `(A − fl32(A))·x`: up to about `2⁻²⁴·κ(A)` relative, far above an `f64` tolerance. So the
//! operator also keeps the exact values and gives them to
//! [`LinearOperator::apply_exact`], which the solvers use for every true residual `b − A·x`
//! (the convergence confirmation, GMRES's cycle restarts, CG's reliable updates; the `solvers`
//! module docs). Convergence is thereby measured, and reached, against `A` itself. The exact
//! copy costs its bytes once per true residual, not per iteration.
//!
//! When every value is an `f32` already (stencils with small integer coefficients, 0/1 graphs,
//! values that were `f32` data), `fl32(A) = A`: the operator keeps no second copy, and its
//! product is the `f64` product up to the order of the sums ([`MixedCsr::is_lossless`]).
//!
//! # When `f32` storage is refused
//!
//! [`F32Fit::of`] checks the values first: a finite value beyond `f32`'s range (|a| >
//! 3.4·10³⁸) would become infinite, and a nonzero value below its smallest normal number
//! (1.18·10⁻³⁸) would lose its relative precision or vanish; either makes [`MixedCsr::new`]
//! return an error that says which entry. A matrix that fits but is too ill-conditioned for its
//! rounding (`2⁻²⁴·κ(A)` near 1) is found out while solving, by the true residuals; the solve
//! then falls back to `f64` storage (`solvers::storage`).

use crate::backend::{Cpu, LinearOperator};
use crate::error::{Error, Result};
use crate::CsrMatrix;

/// How `f32` storage represents a matrix's values (see [`F32Fit::of`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F32Fit {
    /// Every value is an `f32` exactly: `fl32(A) = A`.
    pub lossless: bool,
    /// The largest `|a − fl32(a)| / |a|` over the nonzero values (at most 2⁻²⁴ ≈ 6·10⁻⁸).
    pub max_rel_rounding: f64,
}

impl F32Fit {
    /// Checks that every value of `a` has an `f32` within 2⁻²⁴ relative: finite values within
    /// `f32`'s normal range (zeros and non-finite values pass: they stay what they are). The
    /// rows are read in parallel.
    ///
    /// # Errors
    /// One sentence naming the first entry (row, column, value) beyond `f32`'s range or below
    /// its smallest normal number.
    pub fn of(a: &CsrMatrix<f64>) -> std::result::Result<F32Fit, String> {
        use rayon::prelude::*;
        let (fit, bad) = (0..a.nrows())
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let (cols, vals) = a.row(i);
                let mut s = Scan::default();
                for (&c, &v) in cols.iter().zip(vals) {
                    if let Some(k) = s.add(v) {
                        return (s.fit, Some((i, c as usize, v, k)));
                    }
                }
                (s.fit, None)
            })
            .reduce(
                || (F32Fit::EXACT, None),
                |a, b| (a.0.join(b.0), first(a.1, b.1)),
            );
        match bad {
            Some((i, c, v, k)) => Err(k.sentence(&format!("entry ({i}, {c})"), v)),
            None => Ok(fit),
        }
    }

    /// [`F32Fit::of`] of the stored values alone (in parallel); the error names the position of
    /// the value among them.
    ///
    /// # Errors
    /// As [`F32Fit::of`].
    pub fn of_values(values: &[f64]) -> std::result::Result<F32Fit, String> {
        use rayon::prelude::*;
        let (fit, bad) = values
            .par_chunks(1 << 16)
            .enumerate()
            .map(|(j, chunk)| {
                let mut s = Scan::default();
                for (k, &v) in chunk.iter().enumerate() {
                    if let Some(why) = s.add(v) {
                        return (s.fit, Some(((j << 16) + k, 0, v, why)));
                    }
                }
                (s.fit, None)
            })
            .reduce(
                || (F32Fit::EXACT, None),
                |a, b| (a.0.join(b.0), first(a.1, b.1)),
            );
        match bad {
            Some((k, _, v, why)) => Err(why.sentence(&format!("stored value {k}"), v)),
            None => Ok(fit),
        }
    }

    /// The fit from a scan made elsewhere (the GPU's, `spmv::gpu::mixed::f32_fit`): the largest
    /// relative rounding (0: every value exact), and the first stored value that does not fit,
    /// with the words that name it (as [`F32Fit::of`] does: `entry (i, j)`).
    ///
    /// # Errors
    /// The sentence of [`F32Fit::of`] when a value does not fit.
    pub fn from_scan(
        max_rel_rounding: f64,
        bad: Option<(&str, f64)>,
    ) -> std::result::Result<F32Fit, String> {
        if let Some((what, v)) = bad {
            let mut s = Scan::default();
            let why = s.add(v).unwrap_or(Unfit::Beyond);
            return Err(why.sentence(what, v));
        }
        Ok(F32Fit {
            lossless: max_rel_rounding == 0.0,
            max_rel_rounding,
        })
    }

    /// Every value exact.
    const EXACT: F32Fit = F32Fit {
        lossless: true,
        max_rel_rounding: 0.0,
    };

    /// The fit of two parts together.
    fn join(self, o: F32Fit) -> F32Fit {
        F32Fit {
            lossless: self.lossless && o.lossless,
            max_rel_rounding: self.max_rel_rounding.max(o.max_rel_rounding),
        }
    }
}

/// Why a value does not fit `f32`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unfit {
    Beyond,
    Below,
}

impl Unfit {
    fn sentence(self, what: &str, v: f64) -> String {
        match self {
            Unfit::Beyond => format!(
                "{what} = {v:e} is beyond f32's range (±{:e}), so the matrix cannot be stored \
                 in f32",
                f32::MAX
            ),
            Unfit::Below => format!(
                "{what} = {v:e} is below f32's smallest normal number ({:e}), so f32 storage \
                 would lose it",
                f32::MIN_POSITIVE
            ),
        }
    }
}

/// The earlier of two failures (by row, then column or position).
type Bad = Option<(usize, usize, f64, Unfit)>;
fn first(a: Bad, b: Bad) -> Bad {
    match (a, b) {
        (Some(x), Some(y)) => Some(if (y.0, y.1) < (x.0, x.1) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The running fit of a sequence of values.
struct Scan {
    fit: F32Fit,
}

impl Default for Scan {
    fn default() -> Self {
        Scan { fit: F32Fit::EXACT }
    }
}

impl Scan {
    /// Adds `v`; `Some` where it does not fit.
    #[inline]
    fn add(&mut self, v: f64) -> Option<Unfit> {
        if v == 0.0 || !v.is_finite() {
            return None;
        }
        let m = v.abs();
        if m > f32::MAX as f64 {
            return Some(Unfit::Beyond);
        }
        if m < f32::MIN_POSITIVE as f64 {
            return Some(Unfit::Below);
        }
        let r = v as f32 as f64;
        if r != v {
            self.fit.lossless = false;
            self.fit.max_rel_rounding = self.fit.max_rel_rounding.max((r - v).abs() / m);
        }
        None
    }
}

/// A CSR matrix applied to `f64` vectors with its values stored in `f32`: the `f64` product of
/// the rounded values, and the exact `f64` values for true residuals (see the
/// [module docs](self)). A [`LinearOperator<f64, Cpu>`](LinearOperator).
///
/// ```
/// use segsparse::backend::Cpu;
/// use segsparse::solvers::{cg, SolveParams};
/// use segsparse::spmv::mixed::MixedCsr;
/// use segsparse::CsrMatrix;
/// // A 1-D diffusion matrix with coefficients that f32 rounds.
/// let n = 200;
/// let mut t = Vec::new();
/// for i in 0..n {
///     t.push((i, i, 2.0 + 0.1 / 3.0));
///     if i > 0 { t.push((i, i - 1, -1.0 / 3.0)); }
///     if i + 1 < n { t.push((i, i + 1, -1.0 / 3.0)); }
/// }
/// let a = CsrMatrix::<f64>::from_triplets(n, n, &t)?;
/// let m = MixedCsr::new(&a)?;
/// assert!(!m.is_lossless());
/// let b = vec![1.0; n];
/// let mut x = vec![0.0; n];
/// let info = cg(&Cpu, &m, &b, &mut x, &SolveParams { rel_tol: 1e-12, ..Default::default() }).unwrap();
/// // The true residual of the f64 matrix, not of its f32 rounding:
/// assert!(info.relative_residual <= 1e-12);
/// # Ok::<(), segsparse::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MixedCsr {
    low: CsrMatrix<f32>,
    /// The exact values; `None` when `low` holds them all exactly.
    exact: Option<CsrMatrix<f64>>,
    fit: F32Fit,
}

impl MixedCsr {
    /// Rounds the values of `a` to `f32`, and keeps a copy of `a` for true residuals unless the
    /// rounding is exact.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] with [`F32Fit::of`]'s sentence when a value does not fit `f32`.
    pub fn new(a: &CsrMatrix<f64>) -> Result<Self> {
        let fit = F32Fit::of(a).map_err(Error::InvalidInput)?;
        Ok(MixedCsr {
            low: a.cast::<f32>(),
            exact: (!fit.lossless).then(|| a.clone()),
            fit,
        })
    }

    /// The stored `f32` matrix.
    pub fn low(&self) -> &CsrMatrix<f32> {
        &self.low
    }
    /// The exact `f64` matrix, when the `f32` rounding is not exact.
    pub fn exact(&self) -> Option<&CsrMatrix<f64>> {
        self.exact.as_ref()
    }
    /// True when every value is an `f32` exactly (no second copy is kept).
    pub fn is_lossless(&self) -> bool {
        self.fit.lossless
    }
    /// How `f32` represents the values.
    pub fn fit(&self) -> F32Fit {
        self.fit
    }
    /// Rows.
    pub fn nrows(&self) -> usize {
        self.low.nrows()
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.low.ncols()
    }
    /// `y ← α·fl32(A)·x + β·y` ([`cpu::spmv_mixed`](super::cpu::spmv_mixed)).
    ///
    /// # Panics
    /// When the lengths do not fit the matrix (both sizes in the message).
    pub fn spmv(&self, alpha: f64, x: &[f64], beta: f64, y: &mut [f64]) {
        super::cpu::spmv_mixed(alpha, &self.low, x, beta, y)
    }
    /// `y ← α·A·x + β·y` with the exact values.
    ///
    /// # Panics
    /// As [`MixedCsr::spmv`].
    pub fn spmv_exact(&self, alpha: f64, x: &[f64], beta: f64, y: &mut [f64]) {
        match &self.exact {
            Some(a) => super::spmv(alpha, a, x, beta, y),
            None => self.spmv(alpha, x, beta, y),
        }
    }
}

/// `y ← fl32(A)·x` in `f64`; [`LinearOperator::apply_exact`] with the exact values.
impl LinearOperator<f64, Cpu> for MixedCsr {
    fn nrows(&self) -> usize {
        self.low.nrows()
    }
    fn ncols(&self) -> usize {
        self.low.ncols()
    }
    fn apply(&self, _: &Cpu, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        self.spmv(1.0, x, 0.0, y);
        Ok(())
    }
    fn apply_exact(&self, _: &Cpu, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        self.spmv_exact(1.0, x, 0.0, y);
        Ok(())
    }
    fn is_narrowed(&self) -> bool {
        self.exact.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_refuses_values_outside_f32_and_names_the_entry() {
        let big = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 1e39)]).unwrap();
        let e = F32Fit::of(&big).unwrap_err();
        assert!(e.contains("(1, 1)") && e.contains("range"), "{e}");
        let tiny = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 1e-40)]).unwrap();
        let e = F32Fit::of(&tiny).unwrap_err();
        assert!(e.contains("(0, 1)") && e.contains("smallest normal"), "{e}");
        assert!(MixedCsr::new(&big).is_err());
    }

    #[test]
    fn fit_tells_exact_from_rounded() {
        let ints = crate::generate::poisson2d::<f64>(8).unwrap();
        let f = F32Fit::of(&ints).unwrap();
        assert!(f.lossless && f.max_rel_rounding == 0.0);
        assert!(MixedCsr::new(&ints).unwrap().exact().is_none());
        let third = CsrMatrix::from_triplets(1, 1, &[(0, 0, 1.0 / 3.0)]).unwrap();
        let f = F32Fit::of(&third).unwrap();
        assert!(!f.lossless);
        assert!(f.max_rel_rounding > 0.0 && f.max_rel_rounding <= f32::EPSILON as f64 / 2.0);
    }
}
