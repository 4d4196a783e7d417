//! A Chebyshev polynomial in the (Jacobi-scaled) operator.

use crate::backend::{ChebyshevSteps, KrylovOps, LinearOperator, Preconditioner};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

use super::spectral::{extremes, symmetric_eigenvalues, ChebyshevPoly};
use super::Jacobi;

/// Options of the [`Chebyshev`] polynomial preconditioner.
#[derive(Clone, Copy, Debug)]
pub struct ChebyshevParams {
    /// The degree of the residual polynomial `1 − λ·p(λ)` (the meaning the AMG smoother's
    /// degree has too): `degree − 1` operator applications per preconditioner application.
    /// Default 5.
    pub degree: usize,
    /// Arnoldi (Lanczos, for a symmetric `A`) steps of the eigenvalue estimate. Default 16.
    pub estimate_steps: usize,
    /// Scale by the inverse diagonal first (the polynomial is then in `D⁻¹A`). Default true.
    pub jacobi: bool,
    /// The interval's upper end is this factor times the largest Ritz value (which
    /// underestimates λ_max; a polynomial used beyond its interval can lose definiteness).
    /// Default 1.05.
    pub upper_margin: f64,
    /// The interval's lower end is `upper / lower_ratio`; `None` takes the smallest Ritz value
    /// instead (but at most `upper / 2`). Default 30: on Poisson 2D 64² and 3D 20² (degrees
    /// 1–8) it gave the fewest CG iterations of the ratios 5, 10, 30, 100 and 1000, and the
    /// smallest Ritz value (which is close to the true λ_min after 16 Lanczos steps) gave 1.3–2×
    /// more: the polynomial then spends its degree on the few smallest eigenvalues, which CG
    /// handles well by itself.
    pub lower_ratio: Option<f64>,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for ChebyshevParams {
    fn default() -> Self {
        ChebyshevParams {
            degree: 5,
            estimate_steps: 16,
            jacobi: true,
            upper_margin: 1.05,
            lower_ratio: Some(30.0),
            non_exhaustive: (),
        }
    }
}

/// A Chebyshev polynomial preconditioner: `z = p(D⁻¹A)·D⁻¹·r`, where `p` is the polynomial of
/// the Chebyshev iteration for the interval `[λ_min, λ_max]` (Saad, *Iterative Methods for Sparse
/// Linear Systems*, 2nd ed., Algorithm 12.1, started from zero) whose residual polynomial
/// `1 − λ·p(λ)` has degree `k` ([`ChebyshevParams::degree`]; the recurrence and this meaning of
/// the degree are the AMG smoother's too). It needs only the operator and vector updates: each
/// application is `k − 1` operator applications and `k` fused passes of
/// [`ChebyshevSteps::poly_step`], with scalars computed on the host once.
///
/// **Why it is symmetric positive definite** (so CG may use it): `p(D⁻¹A)D⁻¹` is
/// `D^{-1/2} p(S) D^{-1/2}` with `S = D^{-1/2} A D^{-1/2}` symmetric; the iteration's residual
/// polynomial `1 − λp(λ)` is bounded by 1 in magnitude on `[λ_min, λ_max]` and lies in (0, 1) for
/// `0 < λ < λ_min`, so `p(λ) > 0` on `(0, λ_max]` whatever `λ_min` is; only `λ_max` must not be
/// underestimated, hence [`ChebyshevParams::upper_margin`].
///
/// **Bounds** come from a few Arnoldi steps (GMRES's own kernels, so again no extra backend
/// code) on `A·D⁻¹`, which has the eigenvalues of `D⁻¹A`: the extreme eigenvalues of the
/// symmetric part of the small Hessenberg matrix (for an SPD `A` that matrix is Lanczos'
/// tridiagonal and these are the Ritz values).
///
/// It pays where an iteration's fixed costs (reductions, launches, host checks) rival the
/// operator, and it does not help where the Krylov method already uses its iterations well:
/// see `benches/results/history/solvers.md` for measurements.
pub struct Chebyshev<'a, T: Scalar, B: ChebyshevSteps<T>, A: ?Sized> {
    a: &'a A,
    inv_diag: Option<B::Vector>,
    poly: ChebyshevPoly,
    scratch: std::cell::RefCell<[B::Vector; 3]>,
    /// Per column work vectors of [`Preconditioner::apply_block`], allocated on first use.
    block_scratch: std::cell::RefCell<Vec<[B::Vector; 3]>>,
}

impl<T: Scalar, B: ChebyshevSteps<T>, A: ?Sized> std::fmt::Debug for Chebyshev<'_, T, B, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Chebyshev(degree {}, [{:.4e}, {:.4e}])",
            self.poly.degree, self.poly.lmin, self.poly.lmax
        )
    }
}

impl<'a, T, B, A> Chebyshev<'a, T, B, A>
where
    T: Scalar,
    B: KrylovOps<T> + ChebyshevSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    /// The preconditioner for the operator `a` whose matrix is `m` (for the diagonal), with
    /// eigenvalue bounds estimated on the backend.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero or non-finite diagonal entry (with `jacobi`), a degree
    /// of 0, or an estimate that found no positive eigenvalue (the matrix is not positive
    /// definite enough for a Chebyshev interval); backend errors.
    pub fn from_matrix(
        be: &B,
        a: &'a A,
        m: &CsrMatrix<T>,
        params: &ChebyshevParams,
    ) -> Result<Self> {
        let inv_diag = if params.jacobi {
            Some(Jacobi::from_matrix(be, m)?.into_inverse_diagonal())
        } else {
            None
        };
        Self::new(be, a, inv_diag, params)
    }

    /// As [`Chebyshev::from_matrix`] with the inverse diagonal given (or none).
    ///
    /// # Errors
    /// As [`Chebyshev::from_matrix`].
    pub fn new(
        be: &B,
        a: &'a A,
        inv_diag: Option<B::Vector>,
        params: &ChebyshevParams,
    ) -> Result<Self> {
        if params.degree == 0 {
            return Err(Error::InvalidInput(
                "Chebyshev preconditioner: the degree must be at least 1".into(),
            ));
        }
        let n = a.nrows();
        let (lo, hi) = estimate_bounds(be, a, inv_diag.as_ref(), n, params.estimate_steps.max(2))?;
        Self::with_bounds(be, a, inv_diag, params, lo, hi)
    }
}

impl<'a, T, B, A> Chebyshev<'a, T, B, A>
where
    T: Scalar,
    B: ChebyshevSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    /// As [`Chebyshev::new`] for backends without the multi-vector steps of
    /// [`KrylovOps`] — the distributed ones of [`crate::dist`], where this is the **distributed
    /// Chebyshev polynomial**: `a` is the distributed operator, `inv_diag` the inverse diagonal of
    /// this rank's rows, and both the estimate and every application use only the operator
    /// (SpMVs with their halo exchanges), vector updates and all-reduced inner products.
    ///
    /// The bounds come from the same Arnoldi process on `A·D⁻¹`, orthogonalised by modified
    /// Gram–Schmidt through [`VectorOps::dot`](crate::backend::VectorOps::dot) and [`VectorOps::axpy`](crate::backend::VectorOps::axpy) (one inner product, hence
    /// one all-reduce, per Hessenberg entry: about `steps²/2` at setup, none per application).
    /// The start vector's entry `g` depends only on the global row `g` (`first_row` is the
    /// global index of this rank's first row; 0 in a single process), so every partition of a
    /// matrix estimates from the same vector and, up to rounding, gets the same polynomial as
    /// one process.
    ///
    /// # Errors
    /// As [`Chebyshev::from_matrix`].
    pub fn from_operator(
        be: &B,
        a: &'a A,
        inv_diag: Option<B::Vector>,
        first_row: u64,
        params: &ChebyshevParams,
    ) -> Result<Self> {
        let n = a.nrows();
        let steps = params.estimate_steps.max(2);
        let (lo, hi) = estimate_bounds_mgs(be, a, inv_diag.as_ref(), n, first_row, steps)?;
        Self::with_bounds(be, a, inv_diag, params, lo, hi)
    }

    /// The interval `[λ_min, λ_max]` the polynomial is built for.
    pub fn interval(&self) -> (f64, f64) {
        (self.poly.lmin, self.poly.lmax)
    }

    /// The degree of the residual polynomial (`degree − 1` operator applications per
    /// application).
    pub fn degree(&self) -> usize {
        self.poly.degree
    }

    /// The polynomial for the estimated extreme eigenvalues `lo`, `hi` of `D⁻¹A`.
    fn with_bounds(
        be: &B,
        a: &'a A,
        inv_diag: Option<B::Vector>,
        params: &ChebyshevParams,
        lo: f64,
        hi: f64,
    ) -> Result<Self> {
        if params.degree == 0 {
            return Err(Error::InvalidInput(
                "Chebyshev preconditioner: the degree must be at least 1".into(),
            ));
        }
        if !hi.is_finite() || hi <= 0.0 {
            return Err(Error::InvalidInput(format!(
                "Chebyshev preconditioner: the estimated largest eigenvalue is {hi:.3e}; the \
                 polynomial needs a spectrum in the positive half-line"
            )));
        }
        let lmax = hi * params.upper_margin.max(1.0);
        let lmin = match params.lower_ratio {
            Some(r) if r > 1.0 => lmax / r,
            _ => lo.max(lmax * 1e-6).min(lmax / 2.0),
        };
        let n = a.nrows();
        Ok(Chebyshev {
            a,
            inv_diag,
            poly: ChebyshevPoly {
                lmin,
                lmax,
                degree: params.degree,
            },
            scratch: std::cell::RefCell::new([be.zeros(n)?, be.zeros(n)?, be.zeros(n)?]),
            block_scratch: std::cell::RefCell::new(Vec::new()),
        })
    }
}

/// The start vector's entry for global row `g`: a hash of `g` mapped to [0.5, 1.5) (a constant
/// vector can miss the extreme eigenvectors; a hash keeps it independent of the partition).
fn start_entry(g: u64) -> f64 {
    let mut z = g.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 + 0.5
}

/// Extreme eigenvalue estimates of `A·D⁻¹` from `steps` Arnoldi steps with modified
/// Gram–Schmidt through [`VectorOps`](crate::backend::VectorOps) alone (see [`Chebyshev::from_operator`]).
fn estimate_bounds_mgs<T, B, A>(
    be: &B,
    a: &A,
    inv_diag: Option<&B::Vector>,
    n: usize,
    first_row: u64,
    steps: usize,
) -> Result<(f64, f64)>
where
    T: Scalar,
    B: ChebyshevSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    let mut sc = be.scalars(n, 1)?;
    let start: Vec<T> = (0..n as u64)
        .map(|i| T::of_f64(start_entry(first_row + i)))
        .collect();
    let w0 = be.upload(&start)?;
    let norm = be.dot(&w0, &w0, &mut sc)?.as_f64().sqrt();
    if norm.is_nan() || norm <= 0.0 {
        // No rows anywhere (or a non-finite start): nothing to estimate.
        return Ok((0.0, 0.0));
    }
    let mut v = be.zeros(n)?;
    be.axpy(T::of_f64(1.0 / norm), &w0, &mut v)?;
    let mut basis = vec![v];
    let mut z = be.zeros(n)?;
    // h[j][i]: column j of the Hessenberg matrix, rows 0..=j+1.
    let mut h: Vec<Vec<f64>> = Vec::new();
    for j in 0..steps {
        let mut w = be.zeros(n)?;
        match inv_diag {
            Some(d) => {
                be.scale(d, &basis[j], &mut z)?;
                a.apply(be, &z, &mut w)?;
            }
            None => a.apply(be, &basis[j], &mut w)?,
        }
        let mut col = vec![0.0; j + 2];
        for (i, vi) in basis.iter().enumerate() {
            let hij = be.dot(vi, &w, &mut sc)?.as_f64();
            be.axpy(T::of_f64(-hij), vi, &mut w)?;
            col[i] = hij;
        }
        let hn = be.dot(&w, &w, &mut sc)?.as_f64().max(0.0).sqrt();
        col[j + 1] = hn;
        if !col.iter().all(|c| c.is_finite()) {
            return Err(Error::InvalidInput(
                "Chebyshev preconditioner: the eigenvalue estimate became NaN or infinite (a \
                 non-finite matrix entry?)"
                    .into(),
            ));
        }
        h.push(col);
        // An invariant subspace (or the whole space) is found: the Ritz values are exact.
        let scale = h.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        if hn <= 1e-12 * scale || j + 1 == steps {
            break;
        }
        let mut next = be.zeros(n)?;
        be.axpy(T::of_f64(1.0 / hn), &w, &mut next)?;
        basis.push(next);
    }
    let cols = h.len();
    let hv = |i: usize, j: usize| h[j].get(i).copied().unwrap_or(0.0);
    let mut s: Vec<Vec<f64>> = (0..cols)
        .map(|i| (0..cols).map(|j| 0.5 * (hv(i, j) + hv(j, i))).collect())
        .collect();
    Ok(extremes(&symmetric_eigenvalues(&mut s)))
}

/// Extreme eigenvalue estimates of `A·D⁻¹` from `steps` Arnoldi steps with GMRES's kernels.
fn estimate_bounds<T, B, A>(
    be: &B,
    a: &A,
    inv_diag: Option<&B::Vector>,
    n: usize,
    steps: usize,
) -> Result<(f64, f64)>
where
    T: Scalar,
    B: KrylovOps<T> + ChebyshevSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    use crate::backend::recur::{GmresLayout, Slot, Status};
    let m = steps.min(n.max(1));
    let mut k = be.krylov(n, m)?;
    let mut sc = be.scalars(n, m + 1)?;
    // A fixed pseudo-random start (a constant vector can miss the extreme eigenvectors).
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let start: Vec<T> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            T::of_f64((state >> 11) as f64 / (1u64 << 53) as f64 + 0.5)
        })
        .collect();
    let r = be.upload(&start)?;
    let mut z = be.zeros(n)?;
    be.gmres_start(&r, &mut k, &mut sc, 0)?;
    for j in 0..m {
        let (vj, vnext) = be.krylov_pair(&mut k, j);
        match inv_diag {
            Some(d) => {
                be.scale(d, vj, &mut z)?;
                a.apply(be, &z, vnext)?;
            }
            None => a.apply(be, vj, vnext)?,
        }
        be.gmres_arnoldi(&mut k, j, &mut sc, j + 1)?;
    }
    let slots = be.read_slots(&sc)?;
    // Columns made before a breakdown or an (invariant-subspace) convergence stopped the steps.
    let cols = match Status::of(slots[Slot::Status as usize]) {
        Status::Running => m,
        _ => (slots[Slot::StatusIter as usize].as_f64() as usize).min(m),
    };
    if cols == 0 {
        return Ok((0.0, 0.0));
    }
    let small = be.krylov_small(&k)?;
    let lay = GmresLayout { m };
    let h = |i: usize, j: usize| small[lay.hess() + j * (m + 1) + i].as_f64();
    // The symmetric part of the leading cols × cols block.
    let mut s: Vec<Vec<f64>> = (0..cols)
        .map(|i| (0..cols).map(|j| 0.5 * (h(i, j) + h(j, i))).collect())
        .collect();
    Ok(extremes(&symmetric_eigenvalues(&mut s)))
}

impl<T, B, A> Preconditioner<T, B> for Chebyshev<'_, T, B, A>
where
    T: Scalar,
    B: ChebyshevSteps<T>,
    A: LinearOperator<T, B> + ?Sized,
{
    /// `degree − 1` products with the operator and the vector steps between them.
    fn cost_in_products(&self) -> f64 {
        self.poly.degree.max(1) as f64
    }
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        let mut sc = self.scratch.borrow_mut();
        let [res, d, t] = &mut *sc;
        let dinv = self.inv_diag.as_ref();
        self.poly
            .apply(be, dinv, r, z, [res, d, t], |x, y| self.a.apply(be, x, y))
    }

    /// The polynomial on every column, the operator applied to the block
    /// ([`LinearOperator::apply_block`]) once per operator application; column `j` equals
    /// [`Preconditioner::apply`] of `rs[j]` to rounding.
    fn apply_block(&self, be: &B, rs: &[&B::Vector], zs: &mut [&mut B::Vector]) -> Result<()> {
        assert_eq!(rs.len(), zs.len(), "apply_block: as many outputs as inputs");
        let mut steps = self.poly.steps();
        let (_, c2) = steps.next().expect("a polynomial has a first step");
        let mut sc = self.block_scratch.borrow_mut();
        let n = self.a.nrows();
        while sc.len() < rs.len() {
            sc.push([be.zeros(n)?, be.zeros(n)?, be.zeros(n)?]);
        }
        let dinv = self.inv_diag.as_ref();
        for ((r, z), [res, d, _]) in rs.iter().zip(zs.iter_mut()).zip(sc.iter_mut()) {
            be.poly_step(r, dinv, res, d, z, true, T::zero(), T::of_f64(c2))?;
        }
        for (c1, c2) in steps {
            {
                let (mut ds, mut ts) = (Vec::new(), Vec::new());
                for [_, d, t] in sc.iter_mut().take(rs.len()) {
                    ds.push(&*d);
                    ts.push(t);
                }
                self.a.apply_block(be, &ds, &mut ts)?;
            }
            for (z, [res, d, t]) in zs.iter_mut().zip(sc.iter_mut()) {
                be.poly_step(t, dinv, res, d, z, false, T::of_f64(c1), T::of_f64(c2))?;
            }
        }
        Ok(())
    }
}
