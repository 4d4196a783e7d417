//! The automatic choice of a Krylov method and a preconditioner from cheap statistics of the
//! matrix: [`choose`] (a host matrix) and [`choose_from`] (statistics read where the matrix
//! lives, [`StatsOps`]) return an [`AutoChoice`]: the first choice (method, preconditioner, the
//! incomplete factorization's parameters), the alternative that the automatic solve
//! ([`crate::autosolve`]) weighs against it, and the reason in words; deterministic for a given
//! matrix.
//!
//! # The statistics
//!
//! [`MatrixStats`]: two parallel `O(nnz)` passes over the **whole** matrix, on the CPU (rayon)
//! or on the GPU where the matrix lives (`kernels/precond/auto_stats.cu`, no host copy): the row
//! sizes `s_i = max_j |a_ij|`, then per row the diagonal (missing, zero, signs, spread), the
//! diagonal dominance, the sign pattern of the off-diagonal entries (an M-matrix-like pattern, as
//! from a diffusion stencil), the rows with a negative sum (a reaction term of the wrong sign)
//! and the symmetry of values; the row lengths' spread comes with the
//! matrix ([`CsrMatrix::row_stats`], the GPU matrix's own). The level count of the lower triangle
//! (a sequential pass) is computed only where asked ([`MatrixStats::with_levels`]).
//!
//! **Symmetry is judged numerically**, as assembled matrices need: every stored `a_ij` is
//! compared with its transpose partner `a_ji` (found by binary search in row `j`; a partner that
//! is not stored counts as 0) against the size of the two rows,
//!
//! `|a_ij − a_ji| ≤ τ · max(s_i, s_j)`,
//!
//! so a tiny value left by cancellation opposite a missing or explicitly zero entry passes, and an
//! entry that differs from its partner by more than rounding fails. `τ` is
//! [`symmetry_tolerance`]: `max(1e-10, 1024 ε)` of the element type (1e-10 for `f64`, 1.2e-4 for
//! `f32`); finite-element assembly rounds at about `10 ε` of the row, while the mildest asymmetry
//! that changes a solver's behaviour (convection at a cell Péclet number of 0.01) is 1e-3 of it.
//! [`MatrixStats::asymmetry`] keeps the worst ratio found. A matrix with NaN or infinite values
//! is not symmetric.
//!
//! # The rule
//!
//! In order; each names itself in [`AutoChoice::reason`]:
//!
//! | matrix | first choice | alternative (weighed by the probe) | why |
//! |---|---|---|---|
//! | symmetric, a diagonal entry missing or zero | BiCGSTAB, no preconditioner | MINRES, no preconditioner; GMRES + ILUT after the scaled maximum-product row matching ([`auto_threshold`](crate::sparse::incomplete::auto_threshold)) (fallback) | saddle points (`[[K, Bᵀ], [B, 0]]`) and constrained systems are symmetric indefinite: MINRES converged on every one measured (Stokes, KKT, circuit MNA; H200), where BiCGSTAB broke down on Stokes and MNA and the factorization cost 4–5× MINRES's time on MNA; but on KKT systems BiCGSTAB is 1.0–1.5× faster: the probe weighs the two on their measured rates |
//! | unsymmetric, a diagonal entry missing or zero | GMRES + ILUT after the row matching | (fallback only) BiCGSTAB, no preconditioner | the matched ILUT is the only choice here that converged on bayer10, rajat19, west0479 |
//! | symmetric, positive diagonal, M-matrix signs, a negative row sum on at least half the rows ([`MatrixStats::shifted`]) | BiCGSTAB, none (Jacobi where the diagonal spread is ≥ [`JACOBI_SPREAD`]) | MINRES, no preconditioner | a shifted Laplacian `L − σI` (Helmholtz): indefinite once `σ` passes the smallest eigenvalue, with a diagonal that stays positive; CG broke down on it and AMG with it, plain BiCGSTAB converged in 199 iterations where the probe's escalations ended in GMRES + ILU(0) 15× slower, and 2.2× faster than MINRES (H200); where its rate is slow MINRES may win |
//! | symmetric, positive diagonal, M-matrix signs, the longest row ≥ [`HUB_SPREAD`] × the mean and a diagonal spread ≥ [`JACOBI_SPREAD`] | CG + Jacobi | — | a graph with hubs (power-law degrees): AMG's aggregation did not converge on a power-law graph Laplacian of 500 000 nodes, which BiCGSTAB + Jacobi solved in 123 iterations (0.31 s on an H200) |
//! | symmetric, positive diagonal, M-matrix signs, diagonal spread ≥ [`JUMP_SPREAD`] | CG + Jacobi | CG + AMG | coefficient jumps (AMG won where Jacobi-CG took 900–3400 iterations) or a graph Laplacian with uneven degrees (Jacobi-CG took 100 iterations on a power-law graph, where AMG's aggregation did not converge in 3 s): the probe's rate tells them apart |
//! | symmetric, positive diagonal, M-matrix signs | CG, none (near-constant diagonal) or Jacobi | CG + AMG | Poisson-like: a preconditioner's setup costs more than it saves on one solve, unless the grid is large |
//! | symmetric, positive diagonal, other signs | CG + Jacobi | CG + AMG | fused into CG's updates; IC(0) lost in time to it on every SPD corpus matrix (H100, `benches/results/history/auto.md`) |
//! | symmetric, a negative diagonal entry | BiCGSTAB + Jacobi | GMRES + ILU(0) | symmetric indefinite (a shifted operator): CG would break down |
//! | unsymmetric, strictly diagonally dominant by a margin ([`DOMINANT_MARGIN`]) | BiCGSTAB + Jacobi | — | converges in few iterations without more |
//! | unsymmetric, otherwise | BiCGSTAB, none (near-constant diagonal) or Jacobi | GMRES + ILU(0), application chosen per factor | convection–diffusion: plain BiCGSTAB won by 4–25× over GMRES + ILU(0), whose setup and triangular solves dominate; ILU(0) only where BiCGSTAB's measured rate says it pays |
//!
//! A CG that breaks down (`pᵀAp ≤ 0`: a symmetric positive-diagonal matrix that is indefinite,
//! such as Poisson shifted by less than its diagonal) hands over to BiCGSTAB in the automatic
//! solve; CG is never the answer for a matrix the statistics call indefinite.
//!
//! A complex matrix has its own short rule, [`choose_complex`]: CG for a Hermitian matrix with a
//! positive real diagonal, COCG for a complex symmetric one (both with Jacobi, which keeps the
//! preconditioned operator Hermitian or complex symmetric), GMRES with ILU(0) otherwise, and no
//! preconditioner where a diagonal entry is zero or missing.
//!
//! The ILU(0)/IC(0) parameters chosen use [`Application::Auto`] and [`Ordering::Auto`] (sweeps
//! or reordering where the factor is deep), [`RowMatching::Auto`] and `auto_shift`.

mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod storage;

use crate::backend::MultigridOps;
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::precond::Jacobi;
use crate::scalar::{Elem, Scalar};
use crate::sparse::incomplete::{Application, IncompleteParams, Ordering, RowMatching};
use num_traits::Zero;

/// Threads per block of the GPU statistics kernel: a row longer than [`STATS_LONG`] entries has
/// its two sums added in that block's order, on the host too (`cpu.rs`), so that both agree bit
/// for bit.
pub(crate) const STATS_BLOCK: usize = 256;
/// Rows longer than this are walked by a warp of 32 lanes on the GPU (their two sums added in
/// the warp's order, on the host too); shorter ones by a thread (on an H200 a thread walked the
/// 43-entry rows of vector P1 elements and the 33–64-entry rows of power-law graphs faster than
/// their warp did).
pub(crate) const STATS_WARP: usize = 64;
/// Rows longer than this are walked by a whole block on the GPU.
pub(crate) const STATS_LONG: usize = 256;

/// The ratio of the largest to the smallest diagonal entry that marks coefficient jumps.
pub const JUMP_SPREAD: f64 = 100.0;
/// The ratio of the longest row to the mean row length ([`MatrixStats::row_spread`]) that marks
/// a graph with hubs (a power-law degree distribution); meshes, stencils and circuit grids stay
/// below 4.
pub const HUB_SPREAD: f64 = 12.0;
/// The diagonal spread above which CG and BiCGSTAB take Jacobi rather than nothing.
pub const JACOBI_SPREAD: f64 = 4.0;
/// The diagonal spread up to which a diagonal counts as constant: Jacobi is then a multiple of
/// the identity (to 1 %), the same Krylov iterates at the cost of its vector, so CG on an SPD
/// matrix of any sign pattern takes no preconditioner.
pub const CONSTANT_SPREAD: f64 = 1.01;
/// Strict diagonal dominance margin: `|a_ii| ≥ (1 + margin) Σ_{j≠i} |a_ij|` on every row.
pub const DOMINANT_MARGIN: f64 = 0.5;

/// The symmetry tolerance `τ` of the element type `T`: `max(1e-10, 1024 ε)` (see the [module
/// docs](self)): 1e-10 for `f64`, about 1.2e-4 for `f32`.
pub fn symmetry_tolerance<T: Scalar>() -> f64 {
    (1024.0 * T::EPS).max(1e-10)
}

/// The Krylov method of an [`AutoChoice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AutoMethod {
    /// Conjugate gradient (with the preconditioner: PCG).
    Cg,
    /// BiCGSTAB, right preconditioned.
    Bicgstab,
    /// Restarted GMRES(30), right preconditioned.
    Gmres,
    /// MINRES (symmetric matrices, definite or not).
    Minres,
}

impl AutoMethod {
    /// `"cg"`, `"bicgstab"`, `"gmres"` or `"minres"`.
    pub fn name(self) -> &'static str {
        match self {
            AutoMethod::Cg => "cg",
            AutoMethod::Bicgstab => "bicgstab",
            AutoMethod::Gmres => "gmres",
            AutoMethod::Minres => "minres",
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
    /// Whether the whole matrix is symmetric to rounding: [`MatrixStats::asymmetry`] ≤
    /// [`symmetry_tolerance`] (see the [module docs](self)).
    pub symmetric: bool,
    /// The worst `|a_ij − a_ji| / max(s_i, s_j)` over the stored entries, `s_i` the largest
    /// magnitude in row `i` (0 for an exactly symmetric matrix; NaN where a value is not
    /// finite).
    pub asymmetry: f64,
    /// Rows without a stored diagonal entry or with a zero one.
    pub missing_diagonal: usize,
    /// Rows whose diagonal entry is negative.
    pub negative_diagonal: usize,
    /// Whether every diagonal entry is positive.
    pub positive_diagonal: bool,
    /// Largest over smallest diagonal magnitude (∞ with a zero diagonal).
    pub diagonal_spread: f64,
    /// The smallest `|a_ii| / Σ_{j≠i} |a_ij|` over the rows (∞ for a diagonal matrix).
    pub min_dominance: f64,
    /// The fraction of off-diagonal entries whose sign is opposite to their row's diagonal.
    pub opposite_sign_fraction: f64,
    /// Levels of the natural lower triangle (the critical path of an ILU(0)/IC(0) solve); 0
    /// where not asked for (see [`MatrixStats::with_levels`]).
    pub lower_levels: usize,
    /// The longest row over the mean row length (1 for a matrix without entries): large for a
    /// graph with hubs (a power-law degree distribution), near 1 for a mesh.
    pub row_spread: f64,
    /// Rows with a positive diagonal whose signed sum `Σ_j a_ij` is below `−τ · s_i` ([`symmetry_tolerance`], `s_i` the row's largest
    /// magnitude): with M-matrix signs, a reaction term of the wrong sign (a shifted Laplacian,
    /// a Helmholtz operator), which may make the matrix indefinite; 0 for a diffusion operator,
    /// whose rows sum to 0 or more (to rounding).
    pub negative_row_sums: usize,
}

impl MatrixStats {
    /// The statistics of `a` (square; any index order), the level count included. Two parallel
    /// passes over the entries and the level count (a sequential pass).
    pub fn of<T: Scalar>(a: &CsrMatrix<T>) -> Self {
        Self::with_levels(a, true)
    }

    /// As [`of`](Self::of), with the level count (a sequential pass over the entries) only when
    /// `levels` is set (else `lower_levels` is 0).
    pub fn with_levels<T: Scalar>(a: &CsrMatrix<T>, levels: bool) -> Self {
        let a = a.canonical();
        let mut s = cpu::stats(&a, symmetry_tolerance::<T>());
        s.row_spread = row_spread(&a.row_stats());
        if levels {
            s.lower_levels = cpu::lower_levels(&a);
        }
        s
    }

    /// Whether the off-diagonal signs are those of an M-matrix (at least 99 % opposite to the
    /// diagonal's), as from a diffusion stencil.
    pub fn m_matrix_signs(&self) -> bool {
        self.opposite_sign_fraction >= 0.99
    }

    /// Whether at least half the rows have a negative sum ([`MatrixStats::negative_row_sums`]):
    /// with M-matrix signs, an operator shifted by a reaction term of the wrong sign across the
    /// domain (a few boundary rows of an obtuse finite-element mesh do not count).
    pub fn shifted(&self) -> bool {
        self.rows > 0 && self.negative_row_sums * 2 >= self.rows
    }
}

/// The per-row partial statistics both passes reduce (the CPU's chunks, the GPU's blocks), merged
/// in a fixed order: every field is a count, a minimum or a maximum, so the result does not
/// depend on the thread count or the grid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Partial {
    pub missing: usize,
    pub negative: usize,
    pub nonpositive: usize,
    pub dmin: f64,
    pub dmax: f64,
    pub opposite: usize,
    pub offdiag: usize,
    pub min_dom: f64,
    pub asymmetry: f64,
    pub nonfinite: usize,
    pub negative_sum: usize,
}

impl Partial {
    pub const EMPTY: Partial = Partial {
        missing: 0,
        negative: 0,
        nonpositive: 0,
        dmin: f64::INFINITY,
        dmax: 0.0,
        opposite: 0,
        offdiag: 0,
        min_dom: f64::INFINITY,
        asymmetry: 0.0,
        nonfinite: 0,
        negative_sum: 0,
    };

    pub fn merge(self, y: Partial) -> Partial {
        Partial {
            missing: self.missing + y.missing,
            negative: self.negative + y.negative,
            nonpositive: self.nonpositive + y.nonpositive,
            dmin: self.dmin.min(y.dmin),
            dmax: self.dmax.max(y.dmax),
            opposite: self.opposite + y.opposite,
            offdiag: self.offdiag + y.offdiag,
            min_dom: self.min_dom.min(y.min_dom),
            asymmetry: self.asymmetry.max(y.asymmetry),
            nonfinite: self.nonfinite + y.nonfinite,
            negative_sum: self.negative_sum + y.negative_sum,
        }
    }

    /// The statistics of a square matrix of `rows` rows and `nnz` entries with symmetry
    /// tolerance `tol`.
    pub fn finish(self, rows: usize, nnz: usize, tol: f64) -> MatrixStats {
        let asymmetry = if self.nonfinite > 0 {
            f64::NAN
        } else {
            self.asymmetry
        };
        MatrixStats {
            rows,
            nnz,
            symmetric: asymmetry <= tol,
            asymmetry,
            missing_diagonal: self.missing,
            negative_diagonal: self.negative,
            positive_diagonal: self.nonpositive == 0,
            diagonal_spread: if self.dmin > 0.0 {
                self.dmax / self.dmin
            } else if rows == 0 {
                1.0
            } else {
                f64::INFINITY
            },
            min_dominance: self.min_dom,
            opposite_sign_fraction: if self.offdiag == 0 {
                1.0
            } else {
                self.opposite as f64 / self.offdiag as f64
            },
            lower_levels: 0,
            row_spread: 1.0,
            negative_row_sums: self.negative_sum,
        }
    }
}

/// The longest row over the mean row length of a matrix's row statistics (1 without entries).
pub(crate) fn row_spread(r: &crate::csr::RowStats) -> f64 {
    if r.mean > 0.0 {
        r.max as f64 / r.mean
    } else {
        1.0
    }
}

/// What the automatic choice reads from a matrix where it lives (a backend's matrix): its
/// statistics, its diagonal and its pattern's fingerprint. The CPU ([`CsrMatrix`]) computes
/// them with rayon; the GPU backend with `kernels/precond/auto_stats.cu` on the device matrix
/// (no host copy; the diagonal is `n` values read back).
pub trait StatsOps<T: Scalar>: MultigridOps<T> {
    /// [`MatrixStats`] of the square `a` without the level count (`lower_levels` 0).
    ///
    /// # Errors
    /// A non-square matrix, or a backend failure.
    fn matrix_stats(&self, a: &Self::Matrix) -> Result<MatrixStats>;
    /// The diagonal of `a` on the host (0 where not stored).
    ///
    /// # Errors
    /// A backend failure.
    fn matrix_diagonal(&self, a: &Self::Matrix) -> Result<Vec<T>>;
    /// The Jacobi preconditioner of `a` (its inverse diagonal on the backend): from
    /// [`StatsOps::matrix_diagonal`] by default; the GPU inverts the diagonal on the device,
    /// with no copy of it through the host.
    ///
    /// # Errors
    /// As [`Jacobi::from_diagonal`]: a diagonal entry that is not stored, zero or not finite
    /// (naming its row); a backend failure.
    fn jacobi(&self, a: &Self::Matrix) -> Result<Jacobi<Self::Vector>> {
        Jacobi::from_diagonal(self, &self.matrix_diagonal(a)?)
    }
    /// The pattern fingerprint of `a` ([`CsrMatrix::fingerprint`] on the host; the GPU
    /// matrix's own [`GpuCsr::fingerprint`](crate::spmv::gpu::GpuCsr::fingerprint)): the key
    /// of the automatic solve's per-pattern cache.
    fn matrix_fingerprint(&self, a: &Self::Matrix) -> u64;
}

impl<T: Scalar> StatsOps<T> for crate::backend::Cpu {
    fn matrix_stats(&self, a: &CsrMatrix<T>) -> Result<MatrixStats> {
        square(a.nrows(), a.ncols())?;
        Ok(MatrixStats::with_levels(a, false))
    }
    fn matrix_diagonal(&self, a: &CsrMatrix<T>) -> Result<Vec<T>> {
        Ok(a.diagonal())
    }
    fn matrix_fingerprint(&self, a: &CsrMatrix<T>) -> u64 {
        a.fingerprint()
    }
}

/// The error of a non-square matrix given to the automatic choice.
pub(crate) fn square(rows: usize, cols: usize) -> Result<()> {
    if rows != cols {
        return Err(crate::error::Error::InvalidInput(format!(
            "the automatic choice needs a square matrix, got {rows}x{cols}"
        )));
    }
    Ok(())
}

/// What [`choose`] picked, and why.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The Krylov method.
    pub method: AutoMethod,
    /// The preconditioner.
    pub precond: AutoPrecond,
    /// The candidate the automatic solve's probe weighs against the first choice (and falls
    /// back to when it fails); `None` where the rule alone decides.
    pub alternative: Option<(AutoMethod, AutoPrecond)>,
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

/// Chooses a method and a preconditioner for the host matrix `a` (square). See the [module
/// docs](self) for the rules. Deterministic: the same matrix gives the same choice.
pub fn choose<T: Scalar>(a: &CsrMatrix<T>) -> AutoChoice {
    choose_from(MatrixStats::with_levels(a, false))
}

/// The choice of [`choose`] from statistics computed elsewhere (for a matrix on the GPU:
/// [`StatsOps::matrix_stats`]).
pub fn choose_from(stats: MatrixStats) -> AutoChoice {
    let (method, precond, alternative, reason) = rule(&stats);
    AutoChoice {
        method,
        precond,
        alternative,
        incomplete: auto_incomplete_params(),
        reason,
        stats,
    }
}

/// Whether the statistics say symmetric and indefinite (a negative or zero diagonal entry):
/// such a matrix never gets CG.
pub fn symmetric_indefinite(s: &MatrixStats) -> bool {
    s.symmetric && (s.missing_diagonal > 0 || s.negative_diagonal > 0)
}

type Rule = (
    AutoMethod,
    AutoPrecond,
    Option<(AutoMethod, AutoPrecond)>,
    String,
);

fn rule(s: &MatrixStats) -> Rule {
    use AutoMethod::*;
    use AutoPrecond::*;
    let sym = if s.symmetric {
        format!("symmetric (asymmetry {:.1e} of the row size)", s.asymmetry)
    } else {
        format!(
            "unsymmetric (asymmetry {:.1e} of the row size)",
            s.asymmetry
        )
    };
    let ilut = format!(
        "GMRES with ILUT(τ {:.0e}, p {}) after MC64's maximum-product row matching",
        crate::sparse::incomplete::AUTO_DROP_TOL,
        crate::sparse::incomplete::AUTO_MAX_PER_ROW
    );
    if s.missing_diagonal > 0 && s.symmetric {
        return (
            Bicgstab,
            None,
            Some((Minres, None)),
            format!(
                "{sym}, {} rows lack a nonzero diagonal entry (a saddle point or constrained \
                 system: indefinite): BiCGSTAB without a preconditioner weighed against MINRES \
                 (whose residual never grows: it converges where BiCGSTAB breaks down) by \
                 their measured time per residual reduction, then {ilut}",
                s.missing_diagonal
            ),
        );
    }
    if s.missing_diagonal > 0 {
        return (
            Gmres,
            Ilu0,
            Some((Bicgstab, None)),
            format!(
                "{sym}, {} rows lack a nonzero diagonal entry: {ilut} (plain BiCGSTAB failed on \
                 such corpus matrices: bayer10, rajat19), BiCGSTAB without a preconditioner \
                 as the fallback",
                s.missing_diagonal
            ),
        );
    }
    if s.symmetric && s.positive_diagonal {
        if s.m_matrix_signs() && s.shifted() {
            let (pre, how) = if s.diagonal_spread >= JACOBI_SPREAD {
                (Jacobi, "with Jacobi")
            } else {
                (None, "without a preconditioner")
            };
            return (
                Bicgstab,
                pre,
                Some((Minres, None)),
                format!(
                    "{sym} with M-matrix signs and a negative row sum on {} of {} rows (a \
                     reaction term of the wrong sign: a shifted Laplacian or a Helmholtz \
                     operator, indefinite once the shift passes the smallest eigenvalue, where \
                     CG breaks down and AMG's smoothers diverge): BiCGSTAB {how}, weighed \
                     against MINRES by their measured time per residual reduction",
                    s.negative_row_sums, s.rows
                ),
            );
        }
        if s.m_matrix_signs() {
            if s.row_spread >= HUB_SPREAD && s.diagonal_spread >= JACOBI_SPREAD {
                return (
                    Cg,
                    Jacobi,
                    Option::None,
                    format!(
                        "{sym} with M-matrix signs, the longest row {:.0}× the mean and a \
                         diagonal spread of {:.1e} (a graph with hubs: power-law degrees): CG \
                         with Jacobi, no AMG (its aggregation did not converge on power-law \
                         graphs, where Jacobi-CG took 100–200 iterations)",
                        s.row_spread, s.diagonal_spread
                    ),
                );
            }
            if s.diagonal_spread >= JUMP_SPREAD {
                return (
                    Cg,
                    Jacobi,
                    Some((Cg, Amg)),
                    format!(
                        "{sym} with M-matrix signs and a diagonal spread of {:.1e} (coefficient \
                         jumps, or a graph with uneven degrees): CG with Jacobi, AMG where \
                         Jacobi-CG's measured rate says it pays (AMG's aggregation failed on \
                         power-law graphs)",
                        s.diagonal_spread
                    ),
                );
            }
            if s.diagonal_spread >= JACOBI_SPREAD {
                return (
                    Cg,
                    Jacobi,
                    Some((Cg, Amg)),
                    format!(
                        "{sym} with M-matrix signs (Poisson-like), diagonal spread {:.1}: CG \
                         with Jacobi",
                        s.diagonal_spread
                    ),
                );
            }
            return (
                Cg,
                None,
                Some((Cg, Amg)),
                format!(
                    "{sym} with M-matrix signs and a near-constant diagonal (Poisson-like, \
                     spread {:.2}): plain CG (a setup costs more than it saves on one solve)",
                    s.diagonal_spread
                ),
            );
        }
        if s.diagonal_spread <= CONSTANT_SPREAD {
            return (
                Cg,
                None,
                Some((Cg, Amg)),
                format!(
                    "{sym}, positive diagonal, not an M-matrix pattern, a constant diagonal \
                     (spread {:.3}): plain CG (Jacobi would scale by a constant: the same \
                     iterates, at the cost of its vector)",
                    s.diagonal_spread
                ),
            );
        }
        return (
            Cg,
            Jacobi,
            Some((Cg, Amg)),
            format!(
                "{sym}, positive diagonal, not an M-matrix pattern: CG with Jacobi (fused into \
                 CG's updates; IC(0) cut iterations on the corpus but lost in time on every such \
                 matrix)"
            ),
        );
    }
    if s.symmetric {
        return (
            Bicgstab,
            Jacobi,
            Some((Gmres, Ilu0)),
            format!(
                "{sym} with {} negative diagonal entries (indefinite: no CG): BiCGSTAB with \
                 Jacobi, against GMRES with ILU(0)",
                s.negative_diagonal
            ),
        );
    }
    if s.min_dominance >= 1.0 + DOMINANT_MARGIN {
        return (
            Bicgstab,
            Jacobi,
            Option::None,
            format!(
                "{sym}, strictly diagonally dominant (min |a_ii|/Σ|a_ij| = {:.2}): BiCGSTAB \
                 with Jacobi",
                s.min_dominance
            ),
        );
    }
    let (pre, how) = if s.diagonal_spread >= JACOBI_SPREAD {
        (
            Jacobi,
            format!("with Jacobi (diagonal spread {:.1})", s.diagonal_spread),
        )
    } else {
        (
            None,
            format!(
                "without a preconditioner (near-constant diagonal, spread {:.2})",
                s.diagonal_spread
            ),
        )
    };
    (
        Bicgstab,
        pre,
        Some((Gmres, Ilu0)),
        format!(
            "{sym}, min diagonal dominance {:.2}: BiCGSTAB {how}, against GMRES with ILU(0) \
             (application chosen per factor)",
            s.min_dominance
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
        assert_eq!(s.asymmetry, 0.0);
        assert_eq!((s.missing_diagonal, s.negative_diagonal), (0, 0));
        assert_eq!(s.diagonal_spread, 1.0);
        let c = choose(&a);
        assert_eq!((c.method, c.precond), (AutoMethod::Cg, AutoPrecond::None));
        assert_eq!(c.alternative, Some((AutoMethod::Cg, AutoPrecond::Amg)));
        // The level count is skipped by the choice, kept where asked for.
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
            (c.method, c.precond, c.alternative),
            (
                AutoMethod::Bicgstab,
                AutoPrecond::None,
                Some((AutoMethod::Gmres, AutoPrecond::Ilu0))
            )
        );
        assert!(!c.stats.symmetric && c.stats.asymmetry == 1.0);
        assert_eq!(MatrixStats::of(&chain).lower_levels, 50);
    }

    #[test]
    fn symmetry_is_judged_against_the_row_size() {
        // 2×2 blocks of size 1e5 with a cancellation residue of 1e-12 opposite a missing entry
        // and a rounding difference of 1e-11 between partners: symmetric. A real difference of
        // 1e-3 of the row is not.
        let t = vec![
            (0, 0, 1e5),
            (0, 1, -5e4),
            (1, 0, -5e4 + 1e-11),
            (1, 1, 1e5),
            (1, 2, 3e-12),
            (2, 2, 1e5),
        ];
        let a = CsrMatrix::<f64>::from_triplets(3, 3, &t).unwrap();
        let s = MatrixStats::of(&a);
        assert!(
            s.symmetric && s.asymmetry > 0.0 && s.asymmetry < 1e-15,
            "{s:?}"
        );
        let mut t2 = t.clone();
        t2[2].2 = -5e4 + 100.0;
        let b = CsrMatrix::<f64>::from_triplets(3, 3, &t2).unwrap();
        let s = MatrixStats::of(&b);
        assert!(!s.symmetric && (s.asymmetry - 1e-3).abs() < 1e-12, "{s:?}");
        // A NaN makes a matrix unsymmetric.
        let mut t3 = t.clone();
        t3[1].2 = f64::NAN;
        let c = CsrMatrix::<f64>::from_triplets(3, 3, &t3).unwrap();
        assert!(!MatrixStats::of(&c).symmetric);
        // f32: a one-ulp difference between partners is rounding.
        let d = CsrMatrix::<f32>::from_triplets(
            2,
            2,
            &[
                (0, 0, 4.0),
                (0, 1, -1.0),
                (1, 0, -1.0 - f32::EPSILON),
                (1, 1, 4.0),
            ],
        )
        .unwrap();
        assert!(MatrixStats::of(&d).symmetric);
    }

    #[test]
    fn indefinite_symmetric_gets_no_cg() {
        // Poisson shifted by more than its diagonal (negative diagonal) and a saddle point.
        let mut a = crate::generate::poisson2d::<f64>(10).unwrap();
        let n = a.nrows();
        for i in 0..n {
            let (lo, hi) = (a.row_ptr()[i] as usize, a.row_ptr()[i + 1] as usize);
            let k = a.col_idx()[lo..hi]
                .iter()
                .position(|&j| j as usize == i)
                .unwrap();
            a.values_mut()[lo + k] -= 5.0;
        }
        let c = choose(&a);
        assert!(symmetric_indefinite(&c.stats));
        assert_eq!(
            (c.method, c.precond),
            (AutoMethod::Bicgstab, AutoPrecond::Jacobi)
        );
        let mut t = vec![];
        for i in 0..4usize {
            t.push((i, i, 2.0));
            t.push((i, 4, 1.0));
            t.push((4, i, 1.0));
        }
        let kkt = CsrMatrix::<f64>::from_triplets(5, 5, &t).unwrap();
        let c = choose(&kkt);
        assert!(symmetric_indefinite(&c.stats) && c.stats.missing_diagonal == 1);
        assert_eq!(c.method, AutoMethod::Bicgstab);
        assert_eq!(c.alternative, Some((AutoMethod::Minres, AutoPrecond::None)));
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
