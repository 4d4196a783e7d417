//! The automatic choice of a Krylov method and a preconditioner from cheap statistics of the
//! matrix: [`choose`] returns an [`AutoChoice`] (method, preconditioner, the incomplete
//! factorization's parameters, and the reason in words), deterministic for a given matrix.
//!
//! The statistics ([`MatrixStats::of`]: one parallel `O(nnz)` pass, a symmetry check on a sample
//! of rows, and a sequential level count only where the rule reports it): symmetry of values on a
//! sample of rows, the diagonal (missing, zero, signs, spread), diagonal dominance, the sign
//! pattern of the off-diagonal entries (an M-matrix-like pattern, as from a diffusion stencil),
//! rows and entries per row, and the depth (levels) of the natural lower triangle, which is what a
//! triangular solve costs on the GPU.
//!
//! The rules, in order (each names itself in [`AutoChoice::reason`]):
//!
//! | matrix | method | preconditioner | why |
//! |---|---|---|---|
//! | a diagonal entry missing or zero | GMRES | ILUT after the scaled maximum-product row matching ([`auto_threshold`](crate::sparse::incomplete::auto_threshold)) | the only choice here that needs no diagonal; ILU(0)/ILU(1) after a maximum transversal stagnated on bayer10 and west0479 (GMRES(30)) |
//! | symmetric, positive diagonal, M-matrix signs, diagonal spread ≥ [`JUMP_SPREAD`], ≥ [`AMG_MIN_ROWS`] rows | CG | AMG | coefficient jumps: multigrid's home ground |
//! | symmetric, positive diagonal, M-matrix signs | CG | none (near-constant diagonal) or Jacobi | Poisson-like: a preconditioner's setup costs more than it saves on one solve |
//! | symmetric, positive diagonal, other signs | CG | Jacobi | fused into CG's updates; IC(0) lost in time to it on every SPD corpus matrix (H100, `benches/results/history/auto.md`) |
//! | unsymmetric, strictly diagonally dominant by a margin ([`DOMINANT_MARGIN`]) | GMRES | Jacobi | converges in few iterations without more |
//! | unsymmetric, otherwise | GMRES | ILU(0), application chosen per factor | robust on the nonsymmetric corpus |
//!
//! A complex matrix has its own short rule, [`choose_complex`]: CG for a Hermitian matrix with a
//! positive real diagonal, COCG for a complex symmetric one (both with Jacobi, which keeps the
//! preconditioned operator Hermitian or complex symmetric), GMRES with ILU(0) otherwise, and no
//! preconditioner where a diagonal entry is zero or missing.
//!
//! Where the rule's answer depends on how fast the cheap method converges (CG with none or
//! Jacobi on a large matrix, GMRES with ILU(0)), [`crate::autosolve`] measures it with a short
//! probe of the cheap candidate and may take AMG or ILU(0) from its iterate.
//!
//! The ILU(0)/IC(0) parameters chosen use [`Application::Auto`] and [`Ordering::Auto`] (sweeps
//! or reordering where the factor is deep), [`RowMatching::Auto`] and `auto_shift`.

use crate::csr::CsrMatrix;
use crate::scalar::{Elem, Scalar};
use crate::sparse::incomplete::{Application, IncompleteParams, Ordering, RowMatching};
use num_traits::Zero;

/// Rows from which [`Auto`](AutoPrecond::Amg) may pick AMG (its setup does not pay below).
pub const AMG_MIN_ROWS: usize = 50_000;
/// The ratio of the largest to the smallest diagonal entry that marks coefficient jumps.
pub const JUMP_SPREAD: f64 = 100.0;
/// The diagonal spread above which CG takes Jacobi rather than nothing.
pub const JACOBI_SPREAD: f64 = 4.0;
/// Strict diagonal dominance margin: `|a_ii| ≥ (1 + margin) Σ_{j≠i} |a_ij|` on every row.
pub const DOMINANT_MARGIN: f64 = 0.5;
/// Rows sampled by the symmetry check (evenly spaced; all rows below this count).
pub const SYMMETRY_SAMPLE: usize = 4096;

/// The Krylov method of an [`AutoChoice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AutoMethod {
    /// Conjugate gradient (with the preconditioner: PCG).
    Cg,
    /// Restarted GMRES(30), right preconditioned.
    Gmres,
}

impl AutoMethod {
    /// `"cg"` or `"gmres"`.
    pub fn name(self) -> &'static str {
        match self {
            AutoMethod::Cg => "cg",
            AutoMethod::Gmres => "gmres",
        }
    }
}

/// The preconditioner of an [`AutoChoice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AutoPrecond {
    /// None.
    None,
    /// The diagonal.
    Jacobi,
    /// Smoothed-aggregation AMG.
    Amg,
    /// ILU(0) with [`AutoChoice::incomplete`].
    Ilu0,
    /// IC(0) with [`AutoChoice::incomplete`].
    Ic0,
}

impl AutoPrecond {
    /// `"none"`, `"jacobi"`, `"amg"`, `"ilu0"` or `"ic0"`.
    pub fn name(self) -> &'static str {
        match self {
            AutoPrecond::None => "none",
            AutoPrecond::Jacobi => "jacobi",
            AutoPrecond::Amg => "amg",
            AutoPrecond::Ilu0 => "ilu0",
            AutoPrecond::Ic0 => "ic0",
        }
    }
}

/// The cheap statistics [`choose`] decides from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct MatrixStats {
    /// Rows (= columns).
    pub rows: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Whether the sampled rows are symmetric in pattern and values (relative 1e-12).
    pub symmetric: bool,
    /// Rows without a stored diagonal entry or with a zero one.
    pub missing_diagonal: usize,
    /// Whether every diagonal entry is positive.
    pub positive_diagonal: bool,
    /// Largest over smallest diagonal magnitude (∞ with a zero diagonal).
    pub diagonal_spread: f64,
    /// The smallest `|a_ii| / Σ_{j≠i} |a_ij|` over the rows (∞ for a diagonal matrix).
    pub min_dominance: f64,
    /// The fraction of off-diagonal entries whose sign is opposite to their row's diagonal.
    pub opposite_sign_fraction: f64,
    /// Levels of the natural lower triangle (the critical path of an ILU(0)/IC(0) solve); 0
    /// where [`choose`]'s rule does not read it (see [`MatrixStats::with_levels`]).
    pub lower_levels: usize,
}

impl MatrixStats {
    /// The statistics of `a` (square; any index order). One parallel pass over the entries,
    /// the symmetry check on a sample of rows, and the level count (a sequential pass) only
    /// where `lower_levels` is asked for ([`MatrixStats::with_levels`]).
    pub fn of<T: Scalar>(a: &CsrMatrix<T>) -> Self {
        Self::with_levels(a, true)
    }

    /// As [`of`](Self::of), with the level count (a sequential pass over the entries) only when
    /// `levels` is set (else `lower_levels` is 0).
    pub fn with_levels<T: Scalar>(a: &CsrMatrix<T>, levels: bool) -> Self {
        use rayon::prelude::*;
        let a = a.canonical();
        let n = a.nrows();
        /// Per-chunk partial statistics, merged in chunk order (the result does not depend on
        /// the thread count: every field is a count, a min or a max).
        #[derive(Clone, Copy)]
        struct Part {
            missing: usize,
            positive: bool,
            dmin: f64,
            dmax: f64,
            opposite: usize,
            offdiag: usize,
            min_dom: f64,
        }
        let empty = Part {
            missing: 0,
            positive: true,
            dmin: f64::INFINITY,
            dmax: 0.0,
            opposite: 0,
            offdiag: 0,
            min_dom: f64::INFINITY,
        };
        let merge = |x: Part, y: Part| Part {
            missing: x.missing + y.missing,
            positive: x.positive && y.positive,
            dmin: x.dmin.min(y.dmin),
            dmax: x.dmax.max(y.dmax),
            opposite: x.opposite + y.opposite,
            offdiag: x.offdiag + y.offdiag,
            min_dom: x.min_dom.min(y.min_dom),
        };
        let row = |mut p: Part, i: usize| -> Part {
            let (c, v) = a.row(i);
            let d = match c.binary_search(&(i as u32)) {
                Ok(k) => v[k].as_f64(),
                Err(_) => 0.0,
            };
            if d == 0.0 {
                p.missing += 1;
            }
            if d <= 0.0 || d.is_nan() {
                p.positive = false;
            }
            p.dmin = p.dmin.min(d.abs());
            p.dmax = p.dmax.max(d.abs());
            let mut off = 0.0;
            for (&cj, &vj) in c.iter().zip(v) {
                if cj as usize != i {
                    let x = vj.as_f64();
                    off += x.abs();
                    if x != 0.0 {
                        p.offdiag += 1;
                        if (x < 0.0) != (d < 0.0) {
                            p.opposite += 1;
                        }
                    }
                }
            }
            if off > 0.0 {
                p.min_dom = p.min_dom.min(d.abs() / off);
            }
            p
        };
        let p = (0..n)
            .into_par_iter()
            .with_min_len(4096)
            .fold(|| empty, row)
            .reduce(|| empty, merge);
        MatrixStats {
            rows: n,
            nnz: a.nnz(),
            symmetric: sampled_symmetric(&a),
            missing_diagonal: p.missing,
            positive_diagonal: p.positive,
            diagonal_spread: if p.dmin > 0.0 {
                p.dmax / p.dmin
            } else {
                f64::INFINITY
            },
            min_dominance: p.min_dom,
            opposite_sign_fraction: if p.offdiag == 0 {
                1.0
            } else {
                p.opposite as f64 / p.offdiag as f64
            },
            lower_levels: if levels { lower_levels(&a) } else { 0 },
        }
    }

    /// Whether the off-diagonal signs are those of an M-matrix (at least 99 % opposite to the
    /// diagonal's), as from a diffusion stencil.
    pub fn m_matrix_signs(&self) -> bool {
        self.opposite_sign_fraction >= 0.99
    }
}

/// Levels of the lower triangle (sorted indices): one pass, no plan.
fn lower_levels<T: Scalar>(a: &CsrMatrix<T>) -> usize {
    let n = a.nrows();
    let (rp, cj) = (a.row_ptr(), a.col_idx());
    let mut level = vec![0u32; n];
    let mut most = 0u32;
    for i in 0..n {
        let mut l = 0u32;
        for &c in &cj[rp[i] as usize..rp[i + 1] as usize] {
            if c as usize >= i {
                break;
            }
            l = l.max(level[c as usize] + 1);
        }
        level[i] = l;
        most = most.max(l + 1);
    }
    most as usize
}

/// Symmetry of values on up to [`SYMMETRY_SAMPLE`] evenly spaced rows (sorted indices).
fn sampled_symmetric<T: Scalar>(a: &CsrMatrix<T>) -> bool {
    let n = a.nrows();
    if a.ncols() != n {
        return false;
    }
    use rayon::prelude::*;
    let step = n.div_ceil(SYMMETRY_SAMPLE).max(1);
    (0..n.div_ceil(step)).into_par_iter().all(|s| {
        let i = s * step;
        let (c, v) = a.row(i);
        c.iter().zip(v).all(|(&j, &x)| {
            let (cj, vj) = a.row(j as usize);
            match cj.binary_search(&(i as u32)) {
                Ok(k) => {
                    let (x, y) = (x.as_f64(), vj[k].as_f64());
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
                }
                Err(_) => x == T::zero(),
            }
        })
    })
}

/// What [`choose`] picked, and why.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The Krylov method.
    pub method: AutoMethod,
    /// The preconditioner.
    pub precond: AutoPrecond,
    /// The incomplete factorization's parameters (for [`AutoPrecond::Ilu0`] and
    /// [`AutoPrecond::Ic0`]; the defaults of the automatic path otherwise).
    pub incomplete: IncompleteParams,
    /// The rule that decided, in words (with the statistics it read).
    pub reason: String,
    /// The statistics.
    pub stats: MatrixStats,
}

/// The incomplete-factorization parameters of the automatic path: the application and ordering
/// chosen per factor, a row matching where the diagonal needs one, and a shift on a bad pivot.
pub fn auto_incomplete_params() -> IncompleteParams {
    IncompleteParams {
        application: Application::Auto,
        ordering: Ordering::Auto,
        matching: RowMatching::Auto,
        auto_shift: true,
        ..Default::default()
    }
}

/// Chooses a method and a preconditioner for `a` (square). See the [module docs](self) for the
/// rules. Deterministic: the same matrix gives the same choice.
pub fn choose<T: Scalar>(a: &CsrMatrix<T>) -> AutoChoice {
    let mut s = MatrixStats::with_levels(a, false);
    if needs_levels(&s) {
        s.lower_levels = lower_levels(&a.canonical());
    }
    let (method, precond, reason) = rule(&s);
    AutoChoice {
        method,
        precond,
        incomplete: auto_incomplete_params(),
        reason,
        stats: s,
    }
}

/// Whether the rule that applies to `s` reports the level count (the one that ends in ILU(0)
/// with the application chosen per factor); the others skip its sequential pass.
fn needs_levels(s: &MatrixStats) -> bool {
    let spd = s.symmetric && s.positive_diagonal;
    s.missing_diagonal == 0 && !spd && s.min_dominance < 1.0 + DOMINANT_MARGIN
}

fn rule(s: &MatrixStats) -> (AutoMethod, AutoPrecond, String) {
    use AutoMethod::*;
    use AutoPrecond::*;
    if s.missing_diagonal > 0 {
        return (
            Gmres,
            Ilu0,
            format!(
                "{} rows lack a nonzero diagonal entry: GMRES with ILUT(τ {:.0e}, p {}) after \
                 MC64's maximum-product row matching with its row and column scaling, in the \
                 matched order",
                s.missing_diagonal,
                crate::sparse::incomplete::AUTO_DROP_TOL,
                crate::sparse::incomplete::AUTO_MAX_PER_ROW
            ),
        );
    }
    if s.symmetric && s.positive_diagonal {
        if s.m_matrix_signs() {
            if s.diagonal_spread >= JUMP_SPREAD && s.rows >= AMG_MIN_ROWS {
                return (
                    Cg,
                    Amg,
                    format!(
                        "symmetric with M-matrix signs and a diagonal spread of {:.1e} \
                         (coefficient jumps), {} rows: CG with AMG",
                        s.diagonal_spread, s.rows
                    ),
                );
            }
            if s.diagonal_spread >= JACOBI_SPREAD {
                return (
                    Cg,
                    Jacobi,
                    format!(
                        "symmetric with M-matrix signs (Poisson-like), diagonal spread {:.1}: CG \
                         with Jacobi",
                        s.diagonal_spread
                    ),
                );
            }
            return (
                Cg,
                None,
                format!(
                    "symmetric with M-matrix signs and a near-constant diagonal (Poisson-like, \
                     spread {:.2}): plain CG (a setup costs more than it saves on one solve)",
                    s.diagonal_spread
                ),
            );
        }
        return (
            Cg,
            Jacobi,
            "symmetric, positive diagonal, not an M-matrix pattern: CG with Jacobi (fused into \
             CG's updates; IC(0) cut iterations on the corpus but lost in time on every such \
             matrix)"
                .to_string(),
        );
    }
    if s.min_dominance >= 1.0 + DOMINANT_MARGIN {
        return (
            Gmres,
            Jacobi,
            format!(
                "strictly diagonally dominant (min |a_ii|/Σ|a_ij| = {:.2}): GMRES with Jacobi",
                s.min_dominance
            ),
        );
    }
    (
        Gmres,
        Ilu0,
        format!(
            "{}, min diagonal dominance {:.2}, {} levels in the lower triangle: GMRES with \
             ILU(0), application chosen per factor",
            if s.symmetric {
                "symmetric but not positive-diagonal"
            } else {
                "unsymmetric"
            },
            s.min_dominance,
            s.lower_levels
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_poisson_matrix() {
        let a = crate::generate::poisson2d::<f64>(20).unwrap();
        let s = MatrixStats::of(&a);
        assert!(s.symmetric && s.positive_diagonal && s.m_matrix_signs());
        assert_eq!(s.missing_diagonal, 0);
        assert_eq!(s.diagonal_spread, 1.0);
        let c = choose(&a);
        assert_eq!((c.method, c.precond), (AutoMethod::Cg, AutoPrecond::None));
        // The level count is skipped where the rule does not report it, kept where it does.
        assert_eq!(c.stats.lower_levels, 0);
        assert_eq!(s.lower_levels, 39);
        assert_eq!(
            MatrixStats {
                lower_levels: 0,
                ..s
            },
            c.stats
        );
        let mut t = Vec::new();
        for i in 0..50usize {
            t.push((i, i, 1.0));
            if i > 0 {
                t.push((i, i - 1, 2.0));
            }
        }
        let chain = CsrMatrix::<f64>::from_triplets(50, 50, &t).unwrap();
        let c = choose(&chain);
        assert_eq!(
            (c.method, c.precond),
            (AutoMethod::Gmres, AutoPrecond::Ilu0)
        );
        assert_eq!(c.stats.lower_levels, 50);
    }
}

/// The Krylov method of a [`ComplexChoice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComplexMethod {
    /// CG with the conjugated inner product (Hermitian positive definite).
    Cg,
    /// Conjugate orthogonal CG, the bilinear form `xᵀy` (complex symmetric, `A = Aᵀ`).
    Cocg,
    /// Restarted GMRES(30), right preconditioned.
    Gmres,
}

impl ComplexMethod {
    /// `"cg"`, `"cocg"` or `"gmres"`.
    pub fn name(self) -> &'static str {
        match self {
            ComplexMethod::Cg => "cg",
            ComplexMethod::Cocg => "cocg",
            ComplexMethod::Gmres => "gmres",
        }
    }
}

/// What [`choose_complex`] picked, why, and the structure it read.
#[derive(Clone, Debug)]
pub struct ComplexChoice {
    /// The Krylov method.
    pub method: ComplexMethod,
    /// The preconditioner: [`AutoPrecond::None`], [`AutoPrecond::Jacobi`] or
    /// [`AutoPrecond::Ilu0`].
    pub precond: AutoPrecond,
    /// The rule that decided, in words.
    pub reason: String,
    /// `A = Aᵀ` (every entry).
    pub symmetric: bool,
    /// `A = Aᴴ` (every entry).
    pub hermitian: bool,
    /// Rows whose diagonal entry is missing, zero or not finite.
    pub bad_diagonal: usize,
}

/// The automatic choice for a square matrix of any element type, read from its structure alone:
/// CG for a Hermitian matrix with a positive real diagonal, COCG for a complex symmetric one,
/// GMRES otherwise; Jacobi for the CG methods (a diagonal keeps the preconditioned operator
/// Hermitian or complex symmetric), ILU(0) ([`auto_incomplete_params`]) for GMRES, none where a
/// diagonal entry is missing or zero. Deterministic; `O(nnz log)` (the symmetry checks).
pub fn choose_complex<T: Elem>(a: &CsrMatrix<T>) -> ComplexChoice {
    let diag = a.diagonal();
    let bad_diagonal = diag
        .iter()
        .filter(|d| **d == T::zero() || !d.finite())
        .count();
    let positive_real = diag
        .iter()
        .all(|d| d.im() == T::Real::zero() && d.re() > T::Real::zero());
    let (symmetric, hermitian) = (a.is_symmetric(), a.is_hermitian());
    let (method, why) = if hermitian && positive_real {
        (
            ComplexMethod::Cg,
            "Hermitian with a positive real diagonal: CG with the conjugated inner product",
        )
    } else if symmetric {
        (
            ComplexMethod::Cocg,
            "complex symmetric (A = Aᵀ, not Hermitian): COCG, CG's short recurrence with the \
             bilinear form xᵀy",
        )
    } else {
        (
            ComplexMethod::Gmres,
            "neither complex symmetric nor Hermitian: GMRES",
        )
    };
    let (precond, pwhy) = match (method, bad_diagonal) {
        (_, k) if k > 0 => (AutoPrecond::None, "a zero or missing diagonal entry: none"),
        (ComplexMethod::Gmres, _) => (AutoPrecond::Ilu0, "ILU(0) on the matrix's own pattern"),
        _ => (
            AutoPrecond::Jacobi,
            "Jacobi, which keeps the preconditioned operator's symmetry",
        ),
    };
    ComplexChoice {
        method,
        precond,
        reason: format!("{why}; {pwhy}"),
        symmetric,
        hermitian,
        bad_diagonal,
    }
}
