//! The host-side setup of the hierarchy, one step per function so that a GPU path can replace
//! them one at a time: strength → aggregation → tentative prolongator → prolongator smoothing →
//! Galerkin product, then the coarse inverse. The symbolic results (aggregation, SpGEMM plans,
//! index maps) are kept, so [`HostHierarchy::update`] reruns only the numeric phases.

use std::time::Instant;

use rayon::prelude::*;

use super::coarse::dense_inverse;
use super::level::{Dropped, HostHierarchy, HostLevel, Transfer};
use super::tentative::{fit_candidates, Candidates};
use super::{AmgParams, SetupTimes};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::sparse::{
    aggregate_mis2_ordered, amalgamate, drop_small, strength_symmetric, BlockClosure, SpgemmPlan,
};

/// Checks a fine-level matrix's shape: square and not empty.
pub(super) fn check_fine_shape(nrows: usize, ncols: usize) -> Result<()> {
    if nrows != ncols {
        return Err(Error::InvalidInput(format!(
            "AMG: the matrix is {nrows}×{ncols}, not square"
        )));
    }
    if nrows == 0 {
        return Err(Error::InvalidInput("AMG: the matrix is empty".into()));
    }
    Ok(())
}

/// Checks a fine-level matrix: square, finite, every diagonal entry stored and positive.
pub(crate) fn check_fine<T: Scalar>(a: &CsrMatrix<T>) -> Result<()> {
    check_fine_shape(a.nrows(), a.ncols())?;
    let d = a.diagonal();
    if let Some(i) = d.iter().position(|&x| x <= T::zero() || !x.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "AMG: diagonal entry of row {i} is {} (smoothed aggregation needs a positive \
             diagonal: the matrix should be symmetric positive definite)",
            d[i]
        )));
    }
    if a.has_non_finite() {
        return Err(Error::InvalidInput(
            "AMG: the matrix has a non-finite entry".into(),
        ));
    }
    Ok(())
}

/// The smoother data of a level from its operator.
fn level_of<T: Scalar>(a: CsrMatrix<T>, block: usize, steps: usize) -> HostLevel<T> {
    let (inv_diag, inv_l1) = smoother_scalings(&a);
    let rho = crate::precond::spectral::spectral_radius(&a, &inv_diag, steps);
    HostLevel {
        a,
        inv_diag,
        inv_l1,
        rho,
        block,
    }
}

/// `1/a_ii` (0 for a zero diagonal entry) and `1/Σ_j |a_ij|` (0 for an empty row) of each row of
/// `a` (square, or a rank's rows with its halo columns after its own: the diagonal is `a_ii`).
pub(crate) fn smoother_scalings<T: Scalar>(a: &CsrMatrix<T>) -> (Vec<T>, Vec<T>) {
    let n = a.nrows();
    let (p, v) = (a.row_ptr(), a.values());
    let d = a.diagonal();
    let inv_diag: Vec<T> = d
        .iter()
        .map(|&x| {
            if x != T::zero() {
                T::one() / x
            } else {
                T::zero()
            }
        })
        .collect();
    let inv_l1: Vec<T> = (0..n)
        .into_par_iter()
        .map(|i| {
            let s = v[p[i] as usize..p[i + 1] as usize]
                .iter()
                .fold(0.0, |s, x| s + x.as_f64().abs());
            if s > 0.0 {
                T::of_f64(1.0 / s)
            } else {
                T::zero()
            }
        })
        .collect();
    (inv_diag, inv_l1)
}

/// The strength graph of a level (on its nodes).
pub(crate) fn strength<T: Scalar>(
    a: &CsrMatrix<T>,
    block: usize,
    theta: f64,
) -> Result<CsrMatrix<T>> {
    if block == 1 {
        strength_symmetric(a, theta)
    } else {
        strength_symmetric(&amalgamate(a, block)?, theta)
    }
}

/// `P = (I − ω/ρ·D⁻¹A)·T` on the pattern of `A·T`, in place of the product `at = A·T`
/// (`inv_diag` the rows' `1/a_ii`, `rho` the estimate of ρ(D⁻¹A)).
pub(crate) fn smooth_prolongator<T: Scalar>(
    inv_diag: &[T],
    rho: f64,
    t: &CsrMatrix<T>,
    at: CsrMatrix<T>,
    t_pos: &[u32],
    omega: f64,
) -> CsrMatrix<T> {
    let mut p = at;
    let w = omega / rho;
    let rp = p.row_ptr().to_vec();
    let n = p.nrows();
    let vals = p.values_mut();
    // Row-parallel: P_ij = −w·d_i⁻¹·(AT)_ij, then + T_ij at T's positions.
    let mut rows: Vec<&mut [T]> = Vec::with_capacity(n);
    let mut rest = vals;
    for i in 0..n {
        let (h, tl) = rest.split_at_mut((rp[i + 1] - rp[i]) as usize);
        rows.push(h);
        rest = tl;
    }
    let tp = t.row_ptr();
    let tv = t.values();
    rows.into_par_iter().enumerate().for_each(|(i, row)| {
        let s = T::of_f64(-w) * inv_diag[i];
        row.iter_mut().for_each(|x| *x *= s);
        for k in tp[i] as usize..tp[i + 1] as usize {
            row[(t_pos[k] - rp[i]) as usize] += tv[k];
        }
    });
    p
}

/// The position of each entry of `T` within the pattern `pat` (row by row, both sorted).
pub(crate) fn positions<T: Scalar>(
    t: &CsrMatrix<T>,
    pat_ptr: &[u32],
    pat_col: &[u32],
) -> Result<Vec<u32>> {
    let (tp, tj) = (t.row_ptr(), t.col_idx());
    let mut pos = vec![0u32; t.nnz()];
    for i in 0..t.nrows() {
        let row = &pat_col[pat_ptr[i] as usize..pat_ptr[i + 1] as usize];
        for k in tp[i] as usize..tp[i + 1] as usize {
            match row.binary_search(&tj[k]) {
                Ok(x) => pos[k] = pat_ptr[i] + x as u32,
                Err(_) => {
                    return Err(Error::InvalidInput(format!(
                        "AMG: row {i} of A·T lacks an entry of T (a diagonal entry of A is \
                         missing)"
                    )))
                }
            }
        }
    }
    Ok(pos)
}

/// Improves the candidates by relaxing `A·x = 0` from them ([`AmgParams::improve_candidates`]
/// sweeps of the level's smoother), on the CPU.
fn improve<T: Scalar>(
    level: &HostLevel<T>,
    b: &mut Candidates<T>,
    params: &AmgParams,
) -> Result<()> {
    if params.improve_candidates == 0 {
        return Ok(());
    }
    let be = crate::backend::Cpu;
    let sm = super::cycle::LevelSmoother::new(&be, level, params)?;
    let n = level.a.nrows();
    super::cycle::relax_candidates(&be, &level.a, &sm, n, b, params.improve_candidates)
}

impl<T: Scalar> HostHierarchy<T> {
    /// The full setup.
    pub fn build(
        a: &CsrMatrix<T>,
        candidates: Option<&[Vec<T>]>,
        params: &AmgParams,
    ) -> Result<Self> {
        check_fine(a)?;
        params.check()?;
        let n = a.nrows();
        super::tentative::check_fine_rows(n, candidates, params)?;
        let mut times = SetupTimes::default();
        // Rounding noise off the diagonal leaves the hierarchy (timed with strength).
        let clock = Instant::now();
        let (fine, dropped) = match drop_small(a, params.drop_tol)? {
            Some((m, kept)) => (
                m,
                Some(Dropped {
                    row_ptr: a.row_ptr().to_vec(),
                    col_idx: a.col_idx().to_vec(),
                    kept,
                }),
            ),
            None => (a.clone(), None),
        };
        times.strength += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let mut levels = vec![level_of(fine, params.block_size, params.spectral_steps)];
        times.smoother += clock.elapsed().as_secs_f64();
        let mut b: Candidates<T> = match candidates {
            Some(c) => c.to_vec(),
            None => vec![vec![T::one(); n]],
        };
        let clock = Instant::now();
        improve(&levels[0], &mut b, params)?;
        times.candidates += clock.elapsed().as_secs_f64();
        let window = params.window(b.len());
        let mut transfers = Vec::new();
        // The level's threshold: θ, or 0 while a level is built again (AmgParams::theta).
        let mut theta = params.theta;
        loop {
            let lv = levels.last().expect("at least the fine level");
            let n = lv.a.nrows();
            if levels.len() >= params.max_levels || n <= params.coarse_size {
                break;
            }
            let k = b.len();
            let clock = Instant::now();
            let s = strength(&lv.a, lv.block, theta)?;
            times.strength += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let agg = aggregate_mis2_ordered(&s, params.seed, window).0;
            times.aggregate += clock.elapsed().as_secs_f64();
            let nc = agg.num_aggregates() * k;
            if params.stalled(theta, nc, n) {
                theta = 0.0;
                continue;
            }
            if nc == 0 || nc >= n {
                break;
            }
            let clock = Instant::now();
            let (t, bc) = fit_candidates(&agg, lv.block, &b);
            times.tentative += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let at_plan = SpgemmPlan::symbolic(&lv.a, &t)?;
            let at = at_plan.numeric(&lv.a, &t);
            let t_pos = positions(&t, at.row_ptr(), at.col_idx())?;
            let p = smooth_prolongator(&lv.inv_diag, lv.rho, &t, at, &t_pos, params.omega);
            let r = p.transpose();
            times.smooth += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let ra_plan = SpgemmPlan::symbolic(&r, &lv.a)?;
            let ra = ra_plan.numeric(&r, &lv.a);
            let rap_plan = SpgemmPlan::symbolic(&ra, &p)?;
            let ac = rap_plan.numeric(&ra, &p);
            let closure = if params.block_products && lv.block > 1 {
                BlockClosure::new(&r, &lv.a, &p, lv.block, k, &ac)?
            } else {
                None
            };
            let ac = match &closure {
                Some(c) => c.apply(&ac),
                None => ac,
            };
            times.galerkin += clock.elapsed().as_secs_f64();
            if params.too_dense(theta, ac.nnz(), lv.a.nnz()) {
                theta = 0.0;
                continue;
            }
            theta = params.theta;
            let clock = Instant::now();
            levels.push(level_of(ac, k, params.spectral_steps));
            times.smoother += clock.elapsed().as_secs_f64();
            transfers.push(Transfer {
                agg,
                t,
                at_plan,
                t_pos,
                p,
                r,
                ra_plan,
                rap_plan,
                closure,
            });
            b = bc;
        }
        let coarsest = &levels.last().expect("a level").a;
        params.check_coarsest(levels.len() - 1, coarsest.nrows())?;
        let clock = Instant::now();
        let (coarse_inv, coarse_solver) = dense_inverse(coarsest)?;
        times.coarse += clock.elapsed().as_secs_f64();
        Ok(HostHierarchy {
            levels,
            transfers,
            coarse_inv,
            coarse_solver,
            candidates: candidates.map(|c| c.to_vec()),
            dropped,
            times,
        })
    }

    /// The numeric re-setup for new values of `A` on the same pattern: aggregation, SpGEMM plans
    /// and patterns are kept; candidates, `T`, `P`, `R`, the coarse operators, the smoothers and
    /// the coarse inverse are recomputed.
    pub fn update(&mut self, a: &CsrMatrix<T>, params: &AmgParams) -> Result<()> {
        check_fine(a)?;
        let old = &self.levels[0].a;
        let (rp, cols) = match &self.dropped {
            Some(d) => (&d.row_ptr[..], &d.col_idx[..]),
            None => (old.row_ptr(), old.col_idx()),
        };
        if a.nrows() != old.nrows() || a.row_ptr() != rp || a.col_idx() != cols {
            return Err(Error::InvalidInput(format!(
                "AMG update: the new matrix ({}×{}, {} entries) does not have the pattern the \
                 hierarchy was built for ({}×{}, {} entries); build a new one",
                a.nrows(),
                a.ncols(),
                a.nnz(),
                old.nrows(),
                old.ncols(),
                cols.len()
            )));
        }
        let mut times = SetupTimes::default();
        let n = a.nrows();
        let clock = Instant::now();
        let block0 = self.levels[0].block;
        let fine = match &self.dropped {
            Some(d) => {
                let mut m = self.levels[0].a.clone();
                let v = a.values();
                for (x, &k) in m.values_mut().iter_mut().zip(&d.kept) {
                    *x = v[k as usize];
                }
                m
            }
            None => a.clone(),
        };
        self.levels[0] = level_of(fine, block0, params.spectral_steps);
        times.smoother += clock.elapsed().as_secs_f64();
        let mut b: Candidates<T> = match &self.candidates {
            Some(c) => c.clone(),
            None => vec![vec![T::one(); n]],
        };
        let clock = Instant::now();
        improve(&self.levels[0], &mut b, params)?;
        times.candidates += clock.elapsed().as_secs_f64();
        for l in 0..self.transfers.len() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let lv = &lo[l];
            let tr = &mut self.transfers[l];
            let clock = Instant::now();
            let (t, bc) = fit_candidates(&tr.agg, lv.block, &b);
            times.tentative += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let at = tr.at_plan.numeric(&lv.a, &t);
            tr.p = smooth_prolongator(&lv.inv_diag, lv.rho, &t, at, &tr.t_pos, params.omega);
            tr.t = t;
            tr.r = tr.p.transpose();
            times.smooth += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let ra = tr.ra_plan.numeric(&tr.r, &lv.a);
            let ac = tr.rap_plan.numeric(&ra, &tr.p);
            let ac = match &tr.closure {
                Some(c) => c.apply(&ac),
                None => ac,
            };
            times.galerkin += clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let block = hi[0].block;
            hi[0] = level_of(ac, block, params.spectral_steps);
            times.smoother += clock.elapsed().as_secs_f64();
            b = bc;
        }
        let clock = Instant::now();
        let (inv, how) = dense_inverse(&self.levels.last().expect("a level").a)?;
        self.coarse_inv = inv;
        self.coarse_solver = how;
        times.coarse += clock.elapsed().as_secs_f64();
        self.times = times;
        Ok(())
    }
}
