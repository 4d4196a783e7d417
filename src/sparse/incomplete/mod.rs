//! Incomplete factorizations without fill: ILU(0) and IC(0), on the CPU (the reference); the GPU
//! factorization is in [`gpu`] (feature `cuda`).
//!
//! - **ILU(0)**: `A ≈ L·U` with `L` unit lower triangular and `U` upper triangular, both on
//!   `A`'s own pattern (the product equals `A` at every stored position). The factor is one
//!   matrix of `A`'s pattern: its strict lower part is `L`, its upper part (with the diagonal) is
//!   `U`. Row `i` is eliminated by the IKJ variant (Saad, *Iterative Methods for Sparse Linear
//!   Systems*, 2nd ed., Algorithm 10.4): for each `k < i` stored in row `i`, in order,
//!   `a_ik ← a_ik / u_kk` and `a_ij ← a_ij − a_ik·u_kj` for every `j > k` stored in both rows.
//! - **IC(0)**: `A ≈ L·Lᵀ` for a symmetric positive definite `A`, `L` on the pattern of `A`'s
//!   lower triangle (only that triangle is read). Row by row:
//!   `l_ik = (a_ik − Σ_{j<k} l_ij·l_kj) / l_kk`, then `l_ii = √(a_ii − Σ_{j<i} l_ij²)`.
//!
//! Row `i` depends on the rows `k < i` stored in its lower part: the same dependency graph as the
//! lower triangular solve, so the GPU factorization runs on that solve's level schedule.
//!
//! **Pivots.** A pivot (ILU: `u_ii`; IC: `a_ii − Σ l_ij²` before the square root) that is not
//! finite or whose magnitude is at most [`IncompleteParams::pivot_tol`] times the largest
//! magnitude in the row of `A` (IC: of its lower triangle) stops the factorization with an error
//! naming the row. [`IncompleteParams::shift`] is the usual remedy (Manteuffel 1980): the
//! factorization is then of `A` with each diagonal entry moved away from zero by
//! `shift × max_j |a_ij|` (`a_ii + shift·sign(a_ii)·max_j|a_ij|`, sign(0) = +1).

mod backend;
mod fill;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod threshold;

use super::reorder::{self, INSERTED};
use super::triangular::{Diagonal, SptrsvAlgorithm, Triangle, TriangularPlan, NO_DIAG};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::{Elem, Scalar};
pub use backend::IncompleteOps;
use num_traits::{Float, Zero};

/// Which incomplete factorization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FactorKind {
    /// `A ≈ L·U` on `A`'s pattern.
    Ilu0,
    /// `A ≈ L·Lᵀ` on the pattern of `A`'s lower triangle (symmetric positive definite `A`).
    Ic0,
}

impl FactorKind {
    /// `"ilu0"` or `"ic0"`.
    pub fn name(self) -> &'static str {
        match self {
            FactorKind::Ilu0 => "ilu0",
            FactorKind::Ic0 => "ic0",
        }
    }
}

/// Options of an incomplete factorization.
#[derive(Clone, Copy, Debug)]
pub struct IncompleteParams {
    /// Diagonal shift: each diagonal entry is moved away from zero by `shift × max_j |a_ij|`
    /// before factoring (see the [module docs](self)). Default 0.
    pub shift: f64,
    /// A pivot of magnitude at most `pivot_tol × max_j |a_ij|` is an error. Default 1e-12.
    pub pivot_tol: f64,
    /// On a bad pivot, retry with a larger shift instead of failing: the shift starts at
    /// [`AUTO_SHIFT_START`] (or at twice `shift` when that is larger) and doubles, at most
    /// [`AUTO_SHIFT_TRIES`] times (PETSc's "positive definite" shift, Manteuffel's method for
    /// IC(0) on SPD matrices that are not M-matrices, where IC(0) can break down). The shift that
    /// succeeded is reported by the factor. Default false.
    pub auto_shift: bool,
    /// Apply the factor approximately: `k > 0` Jacobi sweeps on each triangular system
    /// (`x ← D⁻¹(b − N·x)` from `x = D⁻¹b`, `N` the strict triangle) instead of the exact solve.
    /// A sweep is fully parallel (an SpMV on the triangle), where the exact solve's critical path
    /// is the factor's level count; `k` sweeps are exact on every row of level < `k`. For deep
    /// factors (hundreds of levels) a few sweeps cost far less than one exact solve and change
    /// the Krylov iteration count little (Chow and Patel 2015; Anzt, Chow and Dongarra 2015).
    /// The preconditioner is then a fixed polynomial in the factors, still a linear operator
    /// (so GMRES and BiCGSTAB stay valid), but for IC(0) no longer exactly symmetric. Default 0
    /// (exact).
    pub jacobi_sweeps: usize,
    /// The GPU triangular solve algorithm (the CPU always substitutes in row order). Default
    /// [`SptrsvAlgorithm::Auto`].
    pub algorithm: SptrsvAlgorithm,
    /// How each triangular solve is applied when [`jacobi_sweeps`](Self::jacobi_sweeps) is 0:
    /// exactly, or chosen per triangle from its level count and the size of its strict part
    /// ([`Application::Auto`], see [`choose_sweeps`]). Default [`Application::Exact`].
    pub application: Application,
    /// A symmetric reordering of the matrix before factorizing (the preconditioner permutes the
    /// residual in and the correction out, so the caller sees `A`'s numbering). Default
    /// [`Ordering::Natural`].
    pub ordering: Ordering,
    /// A row permutation that puts nonzeros on the diagonal (ILU only). Default
    /// [`RowMatching::Auto`]: used only when a diagonal entry is missing or stored as zero;
    /// diagonal entries that no permutation can provide (a structurally singular matrix) are
    /// inserted as zeros, which then need a [`shift`](Self::shift) or
    /// [`auto_shift`](Self::auto_shift).
    pub matching: RowMatching,
    /// The factor's pattern (ILU only; IC stays on `A`'s lower triangle). Default
    /// [`Fill::Auto`].
    pub fill: Fill,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl IncompleteParams {
    /// The textbook ILU(0)/IC(0): natural order, no shift, no row matching, no fill.
    pub const PLAIN: IncompleteParams = IncompleteParams {
        shift: 0.0,
        pivot_tol: 1e-12,
        auto_shift: false,
        jacobi_sweeps: 0,
        algorithm: SptrsvAlgorithm::Auto,
        application: Application::Exact,
        ordering: Ordering::Natural,
        matching: RowMatching::Off,
        fill: Fill::Level(0),
        non_exhaustive: (),
    };

    /// These parameters in the natural order (after an unstable reordered factor).
    pub fn natural_fallback(&self) -> Self {
        IncompleteParams {
            ordering: Ordering::Natural,
            ..*self
        }
    }
}

impl Default for IncompleteParams {
    /// [`PLAIN`](Self::PLAIN) with the row matching and the fill level chosen automatically.
    fn default() -> Self {
        IncompleteParams {
            matching: RowMatching::Auto,
            fill: Fill::Auto,
            ..Self::PLAIN
        }
    }
}

/// How a factor's triangular solves are applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Application {
    /// Exact substitution (level-scheduled or synchronization-free on the GPU).
    #[default]
    Exact,
    /// Chosen per triangle by [`choose_sweeps`]: exact on shallow triangles, Jacobi sweeps on
    /// deep ones whose strict part is small enough for the sweeps to converge quickly.
    Auto,
}

/// A symmetric reordering before factorizing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ordering {
    /// The matrix's own order.
    #[default]
    Natural,
    /// Multicolouring ([`reorder::multicolor`]): at most as many levels as colours.
    Multicolor,
    /// Reverse Cuthill–McKee ([`reorder::rcm`]).
    Rcm,
    /// Multicolouring when the natural lower triangle has more than [`AUTO_REORDER_LEVELS`]
    /// levels and the colouring needs at most 1/[`AUTO_REORDER_GAIN`] of them, else natural;
    /// natural also when the multicoloured factor is unstable ([`REORDER_MAX_GROWTH`]).
    Auto,
}

impl Ordering {
    /// `"natural"`, `"multicolor"`, `"rcm"` or `"auto"`.
    pub fn name(self) -> &'static str {
        match self {
            Ordering::Natural => "natural",
            Ordering::Multicolor => "multicolor",
            Ordering::Rcm => "rcm",
            Ordering::Auto => "auto",
        }
    }
}

/// Whether a row permutation puts nonzeros on the diagonal ([`reorder::max_transversal`] or
/// [`reorder::max_product_matching`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RowMatching {
    /// Never: a missing diagonal entry is an error naming the row.
    Off,
    /// When a diagonal entry is missing or stored as zero. With [`Fill::Auto`] this is the
    /// maximum-product matching with its scaling and ILUT in the matched order
    /// ([`auto_threshold`]); with an explicit [`Fill`], the maximum transversal
    /// ([`On`](Self::On)).
    #[default]
    Auto,
    /// Always, a maximum transversal (which also prefers large diagonal entries).
    On,
    /// Always, the maximum-product matching (MC64's job 5) with its row and column scaling; the
    /// scaling is used by [`Fill::Threshold`] (it changes which entries are dropped), and left
    /// out of a pattern-based factor (ILU(k) of a scaled matrix is the scaled factor).
    MaxProduct,
}

impl RowMatching {
    /// `"off"`, `"auto"`, `"transversal"` or `"max-product"`.
    pub fn name(self) -> &'static str {
        match self {
            RowMatching::Off => "off",
            RowMatching::Auto => "auto",
            RowMatching::On => "transversal",
            RowMatching::MaxProduct => "max-product",
        }
    }
}

/// The pattern of an incomplete LU factor: `A`'s own (ILU(0)), with the fill of level `k`
/// (ILU(k), see [`fill`](self) below: an entry created by eliminating with a pivot row has level
/// `lev(i, k) + lev(k, j) + 1`, `A`'s entries 0, and entries up to level `k` are kept), or chosen
/// by magnitude during the elimination (ILUT, [`threshold`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Fill {
    /// With [`RowMatching::Auto`] on a matrix whose diagonal has a missing or zero entry: ILUT
    /// after the scaled maximum-product matching ([`auto_threshold`]). With a matching asked for
    /// explicitly: level [`AUTO_FILL_MATCHED`]. Else 0.
    #[default]
    Auto,
    /// This level of fill (0: ILU(0)).
    Level(usize),
    /// ILUT(τ, p): entries below `drop_tol` times their row's 2-norm are dropped, and at most
    /// `max_per_row` entries are kept in each row of `L` and of `U` besides the diagonal. Factored
    /// on the host (the pattern is found row after row); applied like the other factors.
    Threshold {
        /// `τ`, relative to each row's 2-norm (0 drops nothing but exact zeros).
        drop_tol: f64,
        /// `p` (`usize::MAX`: no limit).
        max_per_row: usize,
    },
}

impl Fill {
    /// `"auto"`, `"level"` or `"threshold"`.
    pub fn name(self) -> &'static str {
        match self {
            Fill::Auto => "auto",
            Fill::Level(_) => "level",
            Fill::Threshold { .. } => "threshold",
        }
    }
}

/// [`auto_threshold`], then [`Ordering::Auto`] as the natural order for ILUT (what
/// [`IncompleteStructure::analyse_with`] does with it): the parameters a factor settles on
/// before its fallbacks.
pub fn resolve_params<T: Elem>(
    a: &CsrMatrix<T>,
    kind: FactorKind,
    params: &IncompleteParams,
) -> IncompleteParams {
    let mut p = auto_threshold(a, kind, params);
    if matches!(p.fill, Fill::Threshold { .. }) && p.ordering == Ordering::Auto {
        p.ordering = Ordering::Natural;
    }
    p
}

/// The ILUT drop tolerance of the automatic path on a matrix without a usable diagonal. Measured
/// on the CPU (GMRES(30), rtol 1e-8, b = 1, `benches/results/ilu.md`) on the corpus matrices
/// with missing or zero diagonal entries, after the scaled maximum-product matching in the
/// matched order: every `τ` in 3·10⁻⁴ … 10⁻² with `p` in 20 … 60 converges on bayer10,
/// rajat19, west0479 and adder_dcop_05; (10⁻³, 30) takes 25, 11, 11 and 4 iterations with
/// `nnz(L+U)` 1.7, 0.8, 3.1 and 0.6 times `A`'s.
pub const AUTO_DROP_TOL: f64 = 1e-3;
/// The ILUT entries per row (of `L` and of `U`) of the automatic path (see [`AUTO_DROP_TOL`]).
pub const AUTO_MAX_PER_ROW: usize = 30;

/// The parameters with [`Fill::Auto`] and [`RowMatching::Auto`] resolved for `a` when its
/// diagonal has a missing or zero entry (ILU only): the maximum-product matching with its
/// scaling ([`RowMatching::MaxProduct`]), the matched order in place of [`Ordering::Auto`], and
/// ILUT([`AUTO_DROP_TOL`], [`AUTO_MAX_PER_ROW`]) (Benzi, Haws and Tůma 2000; see
/// [`threshold`]). Benzi, Haws and Tůma follow the matching with reverse Cuthill–McKee; on this
/// corpus RCM was less robust (bayer10 diverges for 5 of 9 (τ, p) pairs, west0479 for all 6
/// tried, where the matched order converged on all of them), so [`Ordering::Rcm`] is there to
/// ask for. Other parameters, and matrices with a full nonzero diagonal, are returned
/// unchanged.
pub fn auto_threshold<T: Elem>(
    a: &CsrMatrix<T>,
    kind: FactorKind,
    params: &IncompleteParams,
) -> IncompleteParams {
    let applies = kind == FactorKind::Ilu0
        && params.fill == Fill::Auto
        && params.matching == RowMatching::Auto
        && a.nrows() == a.ncols()
        && a.has_sorted_indices()
        && diagonal_missing_or_zero(a);
    if !applies {
        return *params;
    }
    IncompleteParams {
        matching: RowMatching::MaxProduct,
        ordering: match params.ordering {
            Ordering::Auto => Ordering::Natural,
            o => o,
        },
        fill: Fill::Threshold {
            drop_tol: AUTO_DROP_TOL,
            max_per_row: AUTO_MAX_PER_ROW,
        },
        ..*params
    }
}

/// The fill level of [`Fill::Auto`] on a matched matrix. Matrices without a usable diagonal
/// (circuit and chemical-process simulations: rajat19, bayer10) give a matched ILU(0) that
/// stagnates GMRES(30) at a residual of 0.3 (rajat19) to 0.998 (bayer10); one level of fill
/// converges on rajat19 (`benches/results/ilu.md`).
pub const AUTO_FILL_MATCHED: usize = 1;
/// [`Fill::Auto`] drops the fill again (ILU(0) of the matched matrix) when a triangle of the
/// filled factor has `‖D⁻¹N‖∞` above this: the fill made the factor unstable (west0479's
/// matched ILU(1) reaches 3.5·10⁶ and GMRES diverges, where rajat19's useful one stays near
/// 2·10³).
pub const FILL_MAX_GROWTH: f64 = 1e5;

/// The parameters without fill when [`Fill::Auto`] filled the pattern and the filled factor is
/// unstable ([`FILL_MAX_GROWTH`]); `None` when the factor stands. The CPU and GPU factors
/// decide the same way.
pub(crate) fn unfilled_fallback(
    params: &IncompleteParams,
    structure: &IncompleteStructure,
    modes: &ApplyModes,
) -> Option<IncompleteParams> {
    (params.fill == Fill::Auto
        && structure.preprocessing.fill_level > 0
        && modes.lower_norm.max(modes.upper_norm) > FILL_MAX_GROWTH)
        .then_some(IncompleteParams {
            fill: Fill::Level(0),
            ..*params
        })
}

/// Natural-order levels above which [`Ordering::Auto`] considers multicolouring.
pub const AUTO_REORDER_LEVELS: usize = 256;
/// [`Ordering::Auto`] multicolours only when the colours are at most the natural levels divided
/// by this.
pub const AUTO_REORDER_GAIN: usize = 8;
/// [`Ordering::Auto`] falls back to the natural order when a triangle of the multicoloured
/// factor has `‖D⁻¹N‖∞` above this (the factor is unstable: olm1000's multicoloured ILU(0)
/// reaches 7·10⁴ and GMRES diverges, where the corpus's useful multicoloured factors stay
/// below 100).
pub const REORDER_MAX_GROWTH: f64 = 1e3;
/// Levels up to which [`Application::Auto`] always solves exactly.
pub const AUTO_EXACT_LEVELS: usize = 48;
/// The cost of one Jacobi sweep in levels of an exact level-scheduled solve, for
/// [`Application::Auto`] (a sweep is one launch over the whole triangle; a level of a narrow
/// run costs a block barrier and a short dependent load chain).
pub const SWEEP_COST_LEVELS: usize = 8;
/// The most sweeps [`Application::Auto`] uses.
pub const MAX_AUTO_SWEEPS: usize = 12;
/// Sweeps of [`Application::Auto`] on a deep triangle (more than [`AUTO_REORDER_LEVELS`]
/// levels) whose `‖D⁻¹N‖∞` is at least 1 but at most [`DEEP_SWEEP_MAX_NORM`]. On the corpus's
/// deep factors (raefsky2, bcsstk13, bcsstk16; norms 3–80) the exact solve costs 0.7–1.4 ms and
/// the multicoloured factor needs 1.4–4× the iterations; 8 sweeps cut raefsky2's GMRES(30)
/// iterations from 688 (4 sweeps) to 312 and bcsstk16's PCG from 60 to 49, and with every sweep
/// of an application in one cooperative launch on the GPU a sweep costs about a grid barrier
/// (`benches/results/history/ilu.md`).
pub const DEEP_SWEEPS: usize = 8;
/// The largest `‖D⁻¹N‖∞` of a deep triangle that [`Application::Auto`] sweeps (olm1000's
/// factors, 136 and 157, stagnate GMRES under sweeps; the swept corpus factors stay below 80).
pub const DEEP_SWEEP_MAX_NORM: f64 = 100.0;
/// The reduction of the sweeps' error that [`Application::Auto`] asks for.
pub const AUTO_SWEEP_REDUCTION: f64 = 1e-2;

/// The number of Jacobi sweeps for one triangle under [`Application::Auto`]; 0 means exact.
///
/// Exact when the triangle has at most [`AUTO_EXACT_LEVELS`] levels. Otherwise the sweeps'
/// error after `k` sweeps is bounded by `νᵏ` with `ν = ‖D⁻¹N‖∞` (`N` the strict triangle, `D`
/// its diagonal, ones for a unit triangle): when `ν < 1`, `k = ⌈log(AUTO_SWEEP_REDUCTION) /
/// log ν⌉` (at least 2, at most [`MAX_AUTO_SWEEPS`]), taken when `k` sweeps cost less than the
/// exact solve (`k × SWEEP_COST_LEVELS < levels`). When `ν ≥ 1` the sweeps may grow before they
/// converge (the `U` of ILU(0) of a matrix far from diagonal dominance): a deep triangle (more
/// than [`AUTO_REORDER_LEVELS`] levels, where the exact solve is a long chain) with
/// `ν ≤ DEEP_SWEEP_MAX_NORM` takes [`DEEP_SWEEPS`] sweeps, any other stays exact.
pub fn choose_sweeps<T: Elem>(plan: &TriangularPlan, col: &[u32], val: &[T]) -> (usize, f64) {
    sweeps_for(plan.levels(), strict_norm(plan, col, val))
}

/// [`choose_sweeps`] for a triangle of `levels` levels and `‖D⁻¹N‖∞ = nu`: `(sweeps, nu)`.
pub fn sweeps_for(levels: usize, nu: f64) -> (usize, f64) {
    if levels <= AUTO_EXACT_LEVELS || nu.is_nan() {
        return (0, nu);
    }
    if nu < 1.0 {
        let k = if nu <= 0.0 {
            2
        } else {
            ((AUTO_SWEEP_REDUCTION.ln() / nu.ln()).ceil() as usize).clamp(2, MAX_AUTO_SWEEPS)
        };
        if k * SWEEP_COST_LEVELS < levels && k < levels {
            return (k, nu);
        }
        return (0, nu);
    }
    if levels > AUTO_REORDER_LEVELS && nu <= DEEP_SWEEP_MAX_NORM {
        return (DEEP_SWEEPS, nu);
    }
    (0, nu)
}

/// `‖D⁻¹N‖∞` of a triangle (`N` its strict part, `D` its diagonal or ones).
pub fn strict_norm<T: Elem>(plan: &TriangularPlan, col: &[u32], val: &[T]) -> f64 {
    let _ = col;
    let (s, e) = (plan.start(), plan.end());
    let mut m = 0.0f64;
    for i in 0..plan.n() {
        let d = match plan.diagonal() {
            Diagonal::Unit => 1.0,
            Diagonal::NonUnit => val[plan.diag_pos()[i] as usize].modulus().as_f64(),
        };
        let r: f64 = val[s[i] as usize..e[i] as usize]
            .iter()
            .map(|v| v.modulus().as_f64())
            .sum();
        m = m.max(if d > 0.0 { r / d } else { f64::INFINITY });
    }
    m
}

/// `‖D⁻¹N‖∞` of the lower and upper triangles of the factor on `s` from its pattern alone (no
/// plan): ILU's lower triangle is unit, its upper one divides by the diagonal at
/// [`IncompleteStructure::diag_pos`]; IC's upper triangle is `Lᵀ` (`t_values`), whose rows start
/// with their diagonal. The same values as [`strict_norm`] on the two plans.
pub fn triangle_norms<T: Elem>(
    s: &IncompleteStructure,
    values: &[T],
    t_values: &[T],
) -> (f64, f64) {
    let sum = |v: &[T]| -> f64 { v.iter().map(|x| x.modulus().as_f64()).sum() };
    let ratio = |r: f64, d: f64| if d > 0.0 { r / d } else { f64::INFINITY };
    let (rp, dp) = (&s.row_ptr, &s.diag_pos);
    let mut lower = 0.0f64;
    let mut upper = 0.0f64;
    for i in 0..s.n {
        let (lo, d, hi) = (rp[i] as usize, dp[i] as usize, rp[i + 1] as usize);
        let r = sum(&values[lo..d]);
        match &s.transpose {
            None => {
                lower = lower.max(r);
                let dv = values[d].modulus().as_f64();
                upper = upper.max(ratio(sum(&values[d + 1..hi]), dv));
            }
            Some((t_ptr, _, _)) => {
                lower = lower.max(ratio(r, values[d].modulus().as_f64()));
                let (tlo, thi) = (t_ptr[i] as usize, t_ptr[i + 1] as usize);
                let dv = t_values[tlo].modulus().as_f64();
                upper = upper.max(ratio(sum(&t_values[tlo + 1..thi]), dv));
            }
        }
    }
    (lower, upper)
}

/// What the analysis did to the matrix before factorizing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Preprocessing {
    /// The ordering used (never `Auto`).
    pub ordering: Ordering,
    /// Colours of a multicolour ordering (0 otherwise).
    pub colors: usize,
    /// Levels of the lower triangle in the natural order (after the matching). A structure
    /// analysed for the device leaves it to the factor, which takes its device-analysed lower
    /// levels when the factor is in that order without fill (0 for a filled factor in the
    /// natural order, whose unfilled levels were not counted).
    pub natural_levels: usize,
    /// Whether a row matching permuted the rows.
    pub matched: bool,
    /// Diagonal entries inserted (zeros) because no row permutation provides them.
    pub inserted_diagonals: usize,
    /// The level of fill of the pattern (0: `A`'s own).
    pub fill_level: usize,
    /// Entries the fill added (ILUT: the factor's entries beyond `A`'s, negative when it has
    /// fewer, see [`FactorSummary::fill_ratio`]).
    pub fill_entries: usize,
    /// The matching used: `"transversal"`, `"max-product"` or `""` (none).
    pub matching: &'static str,
    /// Whether the rows and columns were scaled (the maximum-product matching's scaling, used by
    /// ILUT).
    pub scaled: bool,
    /// ILUT's parameters (`None` for a pattern-based factor).
    pub threshold: Option<(f64, usize)>,
    /// ILUT: pivots replaced by the compensation at the analysis ([`threshold`]).
    pub compensated_pivots: usize,
}

/// What a factorization did and how it is applied: for reports (`info`, JSON).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct FactorSummary {
    /// `"ilu0"` (ILU on a pattern: ILU(0) or ILU(k)), `"ilut"` or `"ic0"`.
    pub kind: &'static str,
    /// The factor's pattern: `"level"` (ILU(k), IC(0)) or `"threshold"` (ILUT).
    pub fill: &'static str,
    /// ILUT's drop tolerance (`None` otherwise).
    pub drop_tol: Option<f64>,
    /// ILUT's most entries per row of `L` and of `U` (`None` otherwise or without a limit).
    pub max_per_row: Option<usize>,
    /// Entries of the factor (`L` + `U`, the diagonal once) over `A`'s.
    pub fill_ratio: f64,
    /// The row matching: `"transversal"`, `"max-product"` or `"none"`.
    pub matching: &'static str,
    /// Whether the matching's row and column scaling was applied before factoring (undone in
    /// the factor: it approximates `A`'s inverse).
    pub scaled: bool,
    /// ILUT: pivots replaced by the compensation.
    pub compensated_pivots: usize,
    /// The ordering used (`"natural"`, `"multicolor"`, `"rcm"`).
    pub ordering: &'static str,
    /// Colours of a multicolour ordering (0 otherwise).
    pub colors: usize,
    /// Levels of the natural lower triangle (after the matching).
    pub natural_levels: usize,
    /// Levels of the factor's lower solve.
    pub lower_levels: usize,
    /// Levels of the factor's upper solve.
    pub upper_levels: usize,
    /// `"exact"` or `"jacobi-K"`.
    pub lower_mode: String,
    /// `"exact"` or `"jacobi-K"`.
    pub upper_mode: String,
    /// `‖D⁻¹N‖∞` of the lower triangle (`None` when not computed).
    pub lower_norm: Option<f64>,
    /// `‖D⁻¹N‖∞` of the upper triangle (`None` when not computed).
    pub upper_norm: Option<f64>,
    /// Whether a row matching permuted the rows.
    pub matched: bool,
    /// Diagonal entries inserted (structurally singular matrix).
    pub inserted_diagonals: usize,
    /// The level of fill (0: `A`'s pattern).
    pub fill_level: usize,
    /// Entries the fill added.
    pub fill_entries: usize,
    /// The diagonal shift used.
    pub shift: f64,
    /// Whether the values were factored on the host (on the GPU backend: a small factor, whose
    /// host factorization is faster than the device one).
    pub host_factorization: bool,
}

impl FactorSummary {
    /// The summary of a factor on `s` whose lower and upper solves have `levels`, applied by
    /// `modes`.
    pub fn new(
        s: &IncompleteStructure,
        levels: (usize, usize),
        modes: ApplyModes,
        shift: f64,
        host: bool,
    ) -> Self {
        let p = &s.preprocessing;
        FactorSummary {
            kind: match p.threshold {
                Some(_) => "ilut",
                None => s.kind.name(),
            },
            fill: match p.threshold {
                Some(_) => "threshold",
                None => "level",
            },
            drop_tol: p.threshold.map(|t| t.0),
            max_per_row: p.threshold.and_then(|t| (t.1 != usize::MAX).then_some(t.1)),
            fill_ratio: s.col_idx.len() as f64 / s.a_nnz.max(1) as f64,
            matching: match p.matching {
                "" => "none",
                m => m,
            },
            scaled: p.scaled,
            compensated_pivots: p.compensated_pivots,
            ordering: p.ordering.name(),
            colors: p.colors,
            natural_levels: p.natural_levels,
            lower_levels: levels.0,
            upper_levels: levels.1,
            lower_mode: ApplyModes::mode_name(modes.lower_sweeps),
            upper_mode: ApplyModes::mode_name(modes.upper_sweeps),
            lower_norm: modes.lower_norm.is_finite().then_some(modes.lower_norm),
            upper_norm: modes.upper_norm.is_finite().then_some(modes.upper_norm),
            matched: p.matched,
            inserted_diagonals: p.inserted_diagonals,
            fill_level: p.fill_level,
            fill_entries: p.fill_entries,
            shift,
            host_factorization: host,
        }
    }
}

impl std::fmt::Display for FactorSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind)?;
        if let (Some(t), fill) = (self.drop_tol, self.fill) {
            let p = self.max_per_row.map_or("∞".into(), |p| p.to_string());
            write!(f, "(τ {t:.0e}, p {p}, {fill})")?;
        }
        write!(f, " order {}", self.ordering)?;
        if self.colors > 0 {
            write!(f, " ({} colours)", self.colors)?;
        }
        write!(
            f,
            ", natural levels {}, L {} levels {}, U {} levels {}",
            self.natural_levels,
            self.lower_levels,
            self.lower_mode,
            self.upper_levels,
            self.upper_mode
        )?;
        if self.matched || self.inserted_diagonals > 0 {
            write!(
                f,
                ", rows matched ({}{}, {} diagonals inserted)",
                self.matching,
                if self.scaled { ", scaled" } else { "" },
                self.inserted_diagonals
            )?;
        }
        if self.fill == "threshold" {
            write!(
                f,
                ", nnz(L+U) {:.2}× A's, {} pivots compensated",
                self.fill_ratio, self.compensated_pivots
            )?;
        }
        if self.fill_level > 0 {
            write!(
                f,
                ", fill level {} (+{} entries)",
                self.fill_level, self.fill_entries
            )?;
        }
        if self.shift != 0.0 {
            write!(f, ", shift {}", self.shift)?;
        }
        if self.host_factorization {
            write!(f, ", factored on the host")?;
        }
        Ok(())
    }
}

/// The first shift tried by [`IncompleteParams::auto_shift`].
pub const AUTO_SHIFT_START: f64 = 1e-3;
/// The most retries of [`IncompleteParams::auto_shift`] (the last shift tried is about 4).
pub const AUTO_SHIFT_TRIES: usize = 12;

/// The shift after a failed `shift` under [`IncompleteParams::auto_shift`].
pub(crate) fn next_shift(shift: f64) -> f64 {
    (2.0 * shift).max(AUTO_SHIFT_START)
}

/// The pattern side of an incomplete factorization: how the factor's entries are taken from `A`,
/// the plans of its two triangular solves, and (IC) the transpose map. Shared by the CPU and GPU
/// factors; computed once per pattern.
#[derive(Clone, Debug)]
pub struct IncompleteStructure {
    /// The factorization.
    pub kind: FactorKind,
    /// Rows.
    pub n: usize,
    /// `row_ptr` of the factor (ILU: `A`'s; IC: `A`'s lower triangle).
    pub row_ptr: Vec<u32>,
    /// `col_idx` of the factor.
    pub col_idx: Vec<u32>,
    /// For each factor entry, its position in `A` ([`INSERTED`] for a diagonal entry that
    /// `A` lacks, initially zero).
    pub src: Vec<u32>,
    /// Position of each row's diagonal entry in the factor.
    pub diag_pos: Vec<u32>,
    /// The host plan of the lower solve (ILU: unit; IC: non-unit) on the factor; `None` for a
    /// structure analysed for the GPU ([`IncompleteStructure::analyse_for_device`]), whose
    /// factor runs the level analysis on the device.
    pub lower: Option<TriangularPlan>,
    /// The host plan of the upper solve: ILU on the factor, IC on `Lᵀ` (`None` as
    /// [`lower`](Self::lower)).
    pub upper: Option<TriangularPlan>,
    /// IC: `Lᵀ` as `(row_ptr, col_idx, map)`, with `Lᵀ.values[p] = L.values[map[p]]`.
    pub transpose: Option<(Vec<u32>, Vec<u32>, Vec<u32>)>,
    /// `A`'s entry count and columns (to check that an update has the same pattern).
    pub a_nnz: usize,
    a_col_hash: u64,
    /// The rows of `A` in the factor's order: the lower solve reads `b[perm_in[i]]` as its
    /// `i`-th entry (`None`: the identity). The factor is of `B = A[perm_in, q]`, `q` the
    /// symmetric ordering.
    pub perm_in: Option<Vec<u32>>,
    /// The inverse of the ordering `q`: the upper solve's result `y` is returned as
    /// `x[j] = y[perm_out[j]]` (`None`: the identity).
    pub perm_out: Option<Vec<u32>>,
    /// What was done before factorizing.
    pub preprocessing: Preprocessing,
    /// ILUT ([`Fill::Threshold`]): how its matrix is gathered from `A` and the scaling undone in
    /// the factor. The factor's pattern ([`row_ptr`](Self::row_ptr), [`col_idx`](Self::col_idx))
    /// is the first factorization's, and [`src`](Self::src) is [`INSERTED`] throughout (the
    /// values are computed, not gathered).
    pub threshold: Option<threshold::ThresholdMap>,
}

/// Each row's diagonal position in `a`, with the errors of [`TriangularPlan::analyse`] for a
/// non-unit solve (not square, indices not sorted, the first row without a diagonal entry).
fn diagonal_positions<T: Elem>(a: &CsrMatrix<T>) -> Result<Vec<u32>> {
    let n = a.nrows();
    if a.ncols() != n {
        return Err(Error::InvalidInput(format!(
            "triangular solve: the matrix is {}×{}, it must be square",
            n,
            a.ncols()
        )));
    }
    if !a.has_sorted_indices() {
        return Err(Error::InvalidInput(
            "triangular solve: column indices must be sorted and unique within rows \
             (CsrMatrix::sort_indices and sum_duplicates give that form)"
                .into(),
        ));
    }
    (0..n)
        .map(|i| {
            let lo = a.row_ptr()[i];
            let (c, _) = a.row(i);
            c.binary_search(&(i as u32))
                .map(|k| lo + k as u32)
                .map_err(|_| {
                    Error::InvalidInput(format!(
                    "triangular solve: row {i} has no diagonal entry (a non-unit solve divides \
                     by it)"
                ))
                })
        })
        .collect()
}

/// Whether some row of `a` (sorted indices) has no diagonal entry or a zero one.
fn diagonal_missing_or_zero<T: Elem>(a: &CsrMatrix<T>) -> bool {
    (0..a.nrows()).any(|i| {
        let (c, v) = a.row(i);
        match c.binary_search(&(i as u32)) {
            Ok(k) => v[k] == T::zero(),
            Err(_) => true,
        }
    })
}

fn pattern_hash<T: Elem>(a: &CsrMatrix<T>) -> u64 {
    // FNV-1a over row_ptr and col_idx: a cheap guard against an update on another pattern.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &v in a.row_ptr().iter().chain(a.col_idx()) {
        h ^= v as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl IncompleteStructure {
    /// Analyses `a` for the factorization `kind` with the row matching and ordering of `params`
    /// ([`IncompleteParams::matching`], [`IncompleteParams::ordering`]).
    ///
    /// # Errors
    /// As [`analyse`](Self::analyse); with [`RowMatching::Off`], a missing diagonal entry.
    pub fn analyse_with<T: Elem>(
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self> {
        Ok(Self::analyse_factored(a, kind, params, true)?.0)
    }

    /// As [`analyse_with`](Self::analyse_with) without the host plans of the two triangular
    /// solves ([`lower`](Self::lower) and [`upper`](Self::upper) are `None`): for a factor on the
    /// GPU, which analyses its triangles on the device. The ordering's decision under
    /// [`Ordering::Auto`] still counts the natural levels on the host (only when that ordering is
    /// tried: the natural factor comes first, see [`IncompleteParams::ordering`]).
    ///
    /// # Errors
    /// As [`analyse_with`](Self::analyse_with).
    pub fn analyse_for_device<T: Elem>(
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self> {
        Ok(Self::analyse_factored(a, kind, params, false)?.0)
    }

    /// The analysis, with the factor's values where the analysis computed them (ILUT, whose
    /// pattern is found by factoring: the values of `a` with `params.shift`, what
    /// [`factor_values`] gives on this structure, so the factor need not run ILUT twice).
    pub(crate) fn analyse_factored<T: Elem>(
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
        host_plans: bool,
    ) -> Result<(Self, Option<Vec<T>>)> {
        let n = a.nrows();
        if a.ncols() != n || !a.has_sorted_indices() {
            return Ok((Self::analyse_pattern(a, kind, host_plans)?, None));
        }
        let matching = kind == FactorKind::Ilu0
            && match params.matching {
                RowMatching::Off => false,
                RowMatching::On | RowMatching::MaxProduct => true,
                RowMatching::Auto => diagonal_missing_or_zero(a),
            };
        if let (FactorKind::Ilu0, Fill::Threshold { .. }) = (kind, params.fill) {
            let (s, v) = Self::analyse_threshold(a, params, matching, host_plans)?;
            return Ok((s, Some(v)));
        }
        let fill = match (kind, params.fill) {
            (FactorKind::Ic0, _) | (_, Fill::Threshold { .. }) => 0,
            (_, Fill::Level(k)) => k,
            (_, Fill::Auto) if matching => AUTO_FILL_MATCHED,
            (_, Fill::Auto) => 0,
        };
        if !matching && params.ordering == Ordering::Natural && fill == 0 {
            return Ok((Self::analyse_pattern(a, kind, host_plans)?, None));
        }
        let identity: Vec<u32> = (0..n as u32).collect();
        let mut prep = Preprocessing::default();
        // Step 1: the row matching (B₁ = A[m, :], missing diagonals inserted).
        let (a1, src1, m) = if matching {
            let row_of = match params.matching {
                RowMatching::MaxProduct => {
                    prep.matching = "max-product";
                    reorder::max_product_matching(a)?.row_of
                }
                _ => {
                    prep.matching = "transversal";
                    reorder::max_transversal(a)?.row_of
                }
            };
            let (b, src) = reorder::permute(a, &row_of, &identity, true)?;
            prep.matched = row_of != identity;
            prep.inserted_diagonals = src.iter().filter(|&&p| p == INSERTED).count();
            (std::borrow::Cow::Owned(b), Some(src), row_of)
        } else {
            (std::borrow::Cow::Borrowed(a), None, identity.clone())
        };
        // Step 2: the symmetric ordering (a structure for the device counts the natural levels
        // on the host only when the ordering's decision needs them).
        if host_plans || params.ordering == Ordering::Auto {
            prep.natural_levels = TriangularPlan::analyse(&*a1, Triangle::Lower, Diagonal::Unit)
                .map(|p| p.levels())
                .unwrap_or(0);
        }
        let q: Option<Vec<u32>> = match params.ordering {
            Ordering::Natural => None,
            Ordering::Rcm => Some(reorder::rcm(&*a1)),
            Ordering::Multicolor => {
                let (q, c) = reorder::multicolor(&*a1);
                prep.colors = c;
                Some(q)
            }
            Ordering::Auto => {
                if prep.natural_levels > AUTO_REORDER_LEVELS {
                    let (q, c) = reorder::multicolor(&*a1);
                    (AUTO_REORDER_GAIN * c <= prep.natural_levels).then(|| {
                        prep.colors = c;
                        q
                    })
                } else {
                    None
                }
            }
        };
        prep.ordering = match (&q, params.ordering) {
            (None, _) => Ordering::Natural,
            (Some(_), Ordering::Rcm) => Ordering::Rcm,
            (Some(_), _) => Ordering::Multicolor,
        };
        let (b, src2) = match &q {
            Some(q) => {
                let (b, s) = reorder::permute(&*a1, q, q, false)?;
                (std::borrow::Cow::Owned(b), Some(s))
            }
            None => (a1, None),
        };
        // Step 3: the fill pattern (B₃ = B with zeros at the fill positions).
        let (b, src3) = if fill > 0 {
            let (b3, s3) = fill::with_fill(&*b, fill)?;
            prep.fill_level = fill;
            prep.fill_entries = b3.nnz() - b.nnz();
            (std::borrow::Cow::Owned(b3), Some(s3))
        } else {
            (b, None)
        };
        // Positions of B's entries in A.
        let to_a = |p: u32| -> u32 {
            let p = match &src3 {
                Some(s3) => s3[p as usize],
                None => p,
            };
            if p == INSERTED {
                return INSERTED;
            }
            let p1 = match &src2 {
                Some(s2) => s2[p as usize],
                None => p,
            };
            match (&src1, p1) {
                (_, INSERTED) => INSERTED,
                (Some(s1), p1) => s1[p1 as usize],
                (None, p1) => p1,
            }
        };
        let mut s = Self::analyse_pattern(&*b, kind, host_plans)?;
        s.src = s.src.iter().map(|&p| to_a(p)).collect();
        s.a_nnz = a.nnz();
        s.a_col_hash = pattern_hash(a);
        let perm_in: Vec<u32> = match &q {
            Some(q) => q.iter().map(|&i| m[i as usize]).collect(),
            None => m,
        };
        s.perm_in = (perm_in != identity).then_some(perm_in);
        s.perm_out = q.map(|q| reorder::inverse(&q));
        s.preprocessing = prep;
        Ok((s, None))
    }

    /// The ILUT analysis ([`Fill::Threshold`]): the matching (scaled when it is the
    /// maximum-product one), the symmetric ordering ([`Ordering::Auto`]: the matched order),
    /// `B` gathered with its map, and the pattern of `B`'s ILUT, on which the plans are made;
    /// with the factor's values (unscaled, as [`factor_values`] gives them).
    fn analyse_threshold<T: Elem>(
        a: &CsrMatrix<T>,
        params: &IncompleteParams,
        matching: bool,
        host_plans: bool,
    ) -> Result<(Self, Vec<T>)> {
        let Fill::Threshold {
            drop_tol,
            max_per_row,
        } = params.fill
        else {
            unreachable!("called for Fill::Threshold")
        };
        if !(drop_tol >= 0.0 && drop_tol.is_finite()) || max_per_row == 0 {
            return Err(Error::InvalidInput(format!(
                "ILUT: the drop tolerance must be finite and ≥ 0 (got {drop_tol}) and the entries                  kept per row at least 1 (got {max_per_row})"
            )));
        }
        let n = a.nrows();
        let identity: Vec<u32> = (0..n as u32).collect();
        let mut prep = Preprocessing::default();
        let ones = || vec![1.0f64; n];
        let (m, r, c) = match (matching, params.matching) {
            (false, _) => (identity.clone(), ones(), ones()),
            (true, RowMatching::On) => {
                prep.matching = "transversal";
                (reorder::max_transversal(a)?.row_of, ones(), ones())
            }
            (true, _) => {
                prep.matching = "max-product";
                prep.scaled = true;
                let w = reorder::max_product_matching(a)?;
                (w.row_of, w.row_scale, w.col_scale)
            }
        };
        prep.matched = m != identity;
        let (a1, _) = reorder::permute(a, &m, &identity, false)?;
        if host_plans {
            prep.natural_levels = TriangularPlan::analyse(&a1, Triangle::Lower, Diagonal::Unit)
                .map(|p| p.levels())
                .unwrap_or(0);
        }
        let q: Option<Vec<u32>> = match params.ordering {
            Ordering::Natural => None,
            Ordering::Rcm => Some(reorder::rcm(&a1)),
            Ordering::Auto => None,
            Ordering::Multicolor => {
                let (q, colors) = reorder::multicolor(&a1);
                prep.colors = colors;
                Some(q)
            }
        };
        prep.ordering = match params.ordering {
            Ordering::Auto => Ordering::Natural,
            o => o,
        };
        let qv = q.clone().unwrap_or_else(|| identity.clone());
        let perm_in: Vec<u32> = qv.iter().map(|&i| m[i as usize]).collect();
        let (b, b_src) = reorder::permute(a, &perm_in, &qv, true)?;
        prep.inserted_diagonals = b_src.iter().filter(|&&p| p == INSERTED).count();
        let map = threshold::ThresholdMap {
            drop_tol,
            max_per_row,
            b_row_ptr: b.row_ptr().to_vec(),
            b_col: b.col_idx().to_vec(),
            b_src,
            row_scale: perm_in.iter().map(|&i| r[i as usize]).collect(),
            col_scale: qv.iter().map(|&j| c[j as usize]).collect(),
        };
        let f = threshold::ilut(
            n,
            &map.b_row_ptr,
            &map.b_col,
            &map.gather(a, params.shift),
            drop_tol,
            max_per_row,
            params.pivot_tol,
            None,
        );
        let nnz = f.col.len();
        prep.compensated_pivots = f.compensated;
        prep.threshold = Some((drop_tol, max_per_row));
        prep.fill_entries = nnz.saturating_sub(a.nnz());
        let mut values = f.val;
        map.unscale(&f.row_ptr, &f.col, &mut values);
        let pattern = CsrMatrix::try_from_parts(n, n, f.row_ptr, f.col, vec![T::one(); nnz])?;
        let mut s = Self::analyse_pattern(&pattern, FactorKind::Ilu0, host_plans)?;
        debug_assert!(s.row_ptr == pattern.row_ptr() && s.col_idx == pattern.col_idx());
        s.src = vec![INSERTED; nnz];
        s.a_nnz = a.nnz();
        s.a_col_hash = pattern_hash(a);
        s.perm_in = (perm_in != identity).then_some(perm_in);
        s.perm_out = q.map(|q| reorder::inverse(&q));
        s.preprocessing = prep;
        s.threshold = Some(map);
        Ok((s, values))
    }

    /// Analyses `a` for the factorization `kind` in its own order.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `a` is not square, its indices are not sorted, or a row has no
    /// diagonal entry (the row is named).
    pub fn analyse<T: Elem>(a: &CsrMatrix<T>, kind: FactorKind) -> Result<Self> {
        Self::analyse_pattern(a, kind, true)
    }

    fn analyse_pattern<T: Elem>(
        a: &CsrMatrix<T>,
        kind: FactorKind,
        host_plans: bool,
    ) -> Result<Self> {
        let n = a.nrows();
        // Squareness, sorting and the diagonal, for both kinds.
        let diag_pos = diagonal_positions(a)
            .map_err(|e| Error::InvalidInput(format!("{}: {}", kind.name(), strip(&e))))?;
        // The factor's pattern: ILU's is `A`'s; IC's is `A`'s lower triangle, with `Lᵀ` and the
        // map of its entries into `L`'s.
        let (row_ptr, col_idx, src, diag_pos, transpose) = match kind {
            FactorKind::Ilu0 => (
                a.row_ptr().to_vec(),
                a.col_idx().to_vec(),
                (0..a.nnz() as u32).collect(),
                diag_pos,
                None,
            ),
            FactorKind::Ic0 => {
                // The lower triangle: entries [row_ptr[i], diag_pos[i]] of each row.
                let (rp, cj) = (a.row_ptr(), a.col_idx());
                let mut row_ptr = Vec::with_capacity(n + 1);
                row_ptr.push(0u32);
                let (mut col_idx, mut src) = (Vec::new(), Vec::new());
                for (&lo, &d) in rp.iter().zip(&diag_pos) {
                    for p in lo..=d {
                        col_idx.push(cj[p as usize]);
                        src.push(p);
                    }
                    row_ptr.push(col_idx.len() as u32);
                }
                let diag_pos: Vec<u32> = row_ptr[1..].iter().map(|&e| e - 1).collect();
                // Lᵀ with the map of its entries into L's.
                let nnz = col_idx.len();
                let mut t_ptr = vec![0u32; n + 1];
                for &c in &col_idx {
                    t_ptr[c as usize + 1] += 1;
                }
                for j in 0..n {
                    t_ptr[j + 1] += t_ptr[j];
                }
                let mut next = t_ptr.clone();
                let mut t_col = vec![0u32; nnz];
                let mut t_map = vec![0u32; nnz];
                for i in 0..n {
                    for p in row_ptr[i]..row_ptr[i + 1] {
                        let c = col_idx[p as usize] as usize;
                        let q = next[c] as usize;
                        t_col[q] = i as u32;
                        t_map[q] = p;
                        next[c] += 1;
                    }
                }
                (row_ptr, col_idx, src, diag_pos, Some((t_ptr, t_col, t_map)))
            }
        };
        // The host plans of the two triangular solves: ILU's on `A` (a unit lower triangle), IC's
        // on `L` and `Lᵀ`.
        let (lower, upper) = match (&transpose, host_plans) {
            (_, false) => (None, None),
            (None, true) => (
                Some(TriangularPlan::analyse(a, Triangle::Lower, Diagonal::Unit)?),
                Some(TriangularPlan::analyse(
                    a,
                    Triangle::Upper,
                    Diagonal::NonUnit,
                )?),
            ),
            (Some((t_ptr, t_col, _)), true) => {
                let pattern = |rp: &[u32], cj: &[u32]| -> Result<CsrMatrix<T>> {
                    let ones = vec![T::one(); cj.len()];
                    CsrMatrix::try_from_parts(n, n, rp.to_vec(), cj.to_vec(), ones)
                };
                let (l, lt) = (pattern(&row_ptr, &col_idx)?, pattern(t_ptr, t_col)?);
                (
                    Some(TriangularPlan::analyse(
                        &l,
                        Triangle::Lower,
                        Diagonal::NonUnit,
                    )?),
                    Some(TriangularPlan::analyse(
                        &lt,
                        Triangle::Upper,
                        Diagonal::NonUnit,
                    )?),
                )
            }
        };
        let natural_levels = lower.as_ref().map_or(0, TriangularPlan::levels);
        Ok(IncompleteStructure {
            kind,
            n,
            row_ptr,
            col_idx,
            src,
            diag_pos,
            lower,
            upper,
            transpose,
            a_nnz: a.nnz(),
            a_col_hash: pattern_hash(a),
            perm_in: None,
            perm_out: None,
            preprocessing: Preprocessing {
                natural_levels,
                ..Default::default()
            },
            threshold: None,
        })
    }

    /// Checks that `a` has the pattern this structure was made for.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it does not.
    pub fn check_pattern<T: Elem>(&self, a: &CsrMatrix<T>) -> Result<()> {
        if a.nrows() != self.n || a.nnz() != self.a_nnz || pattern_hash(a) != self.a_col_hash {
            return Err(Error::InvalidInput(format!(
                "{} update: the matrix ({} rows, {} entries) does not have the pattern the \
                 factorization was set up for ({} rows, {} entries); set up a new one",
                self.kind.name(),
                a.nrows(),
                a.nnz(),
                self.n,
                self.a_nnz
            )));
        }
        Ok(())
    }

    /// The factor's initial values: `A`'s entries at [`src`](Self::src), with the diagonal
    /// shifted by `shift`, and each row's largest magnitude (before the shift) for the pivot test.
    pub fn initial_values<T: Elem>(&self, a: &CsrMatrix<T>, shift: f64) -> (Vec<T>, Vec<T::Real>) {
        let av = a.values();
        let mut vals: Vec<T> = reorder::gather(av, &self.src);
        let mut rowmax = vec![T::Real::zero(); self.n];
        for i in 0..self.n {
            let (lo, hi) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
            let m = vals[lo..hi]
                .iter()
                .fold(T::Real::zero(), |m, v| m.max(v.modulus()));
            rowmax[i] = m;
            if shift != 0.0 {
                // The diagonal moves along its own direction: `d/|d|` (the sign of a real `d`),
                // one for a zero `d`.
                let d = &mut vals[self.diag_pos[i] as usize];
                let s = if *d == T::zero() {
                    T::one()
                } else {
                    *d / T::from_real(d.modulus())
                };
                *d += s * T::from_real(T::Real::of_f64(shift) * m);
            }
        }
        (vals, rowmax)
    }
}

fn strip(e: &Error) -> String {
    match e {
        Error::InvalidInput(m) => m.trim_start_matches("triangular solve: ").replace(
            "(a non-unit solve divides by it)",
            "(the factorization needs every diagonal entry stored; a row permutation that \
                 puts nonzeros on the diagonal is the usual remedy: IncompleteParams::matching)",
        ),
        other => other.to_string(),
    }
}

/// [`Ordering::Auto`] with [`Application::Auto`]: the natural-order factor first, kept when it
/// is shallow or its deep triangles are swept; `Ok(None)` means "reorder" (the caller goes on
/// with the multicolour attempt). Other parameters: `Ok(None)` at once.
pub(crate) fn natural_first<F>(
    params: &IncompleteParams,
    build: impl Fn(&IncompleteParams) -> Result<F>,
    shape: impl Fn(&F) -> (usize, ApplyModes),
) -> Result<Option<F>> {
    if params.ordering != Ordering::Auto
        || params.application != Application::Auto
        || params.jacobi_sweeps > 0
        || matches!(params.fill, Fill::Threshold { .. })
    {
        return Ok(None);
    }
    let Ok(natural) = build(&params.natural_fallback()) else {
        return Ok(None);
    };
    let (levels, modes) = shape(&natural);
    let swept = modes.lower_sweeps > 0 || modes.upper_sweeps > 0;
    if levels <= AUTO_REORDER_LEVELS || swept {
        return Ok(Some(natural));
    }
    Ok(None)
}

/// One factorization of `a`'s values on `s` with `shift` on the host: the factor's values, or
/// the row and value of the first bad pivot.
pub(crate) fn factor_values<T: Elem>(
    s: &IncompleteStructure,
    a: &CsrMatrix<T>,
    shift: f64,
    pivot_tol: f64,
) -> std::result::Result<Vec<T>, (usize, f64)> {
    if let Some(t) = &s.threshold {
        let f = threshold::ilut(
            s.n,
            &t.b_row_ptr,
            &t.b_col,
            &t.gather(a, shift),
            t.drop_tol,
            t.max_per_row,
            pivot_tol,
            Some((&s.row_ptr, &s.col_idx)),
        );
        let mut v = f.val;
        t.unscale(&s.row_ptr, &s.col_idx, &mut v);
        return Ok(v);
    }
    let (mut v, rowmax) = s.initial_values(a, shift);
    let tol = T::Real::of_f64(pivot_tol);
    match s.kind {
        FactorKind::Ilu0 => ilu0_rows(s, &mut v, &rowmax, tol)?,
        FactorKind::Ic0 => ic0_rows(s, &mut v, &rowmax, tol)?,
    }
    Ok(v)
}

/// The error of a bad pivot, shared by the CPU and GPU factorizations.
pub(crate) fn pivot_error(
    kind: FactorKind,
    row: usize,
    pivot: f64,
    params: &IncompleteParams,
) -> Error {
    let what = match kind {
        FactorKind::Ilu0 => format!("ILU(0): pivot u_{row}{row} = {pivot:.3e} in row {row}"),
        FactorKind::Ic0 => format!(
            "IC(0): pivot a_{row}{row} − Σ l_{row}j² = {pivot:.3e} in row {row} (the matrix is not \
             positive definite enough for IC(0))"
        ),
    };
    Error::InvalidInput(format!(
        "{what} is zero, too small (|pivot| ≤ {:.1e} × the row's largest entry) or not finite; a \
         diagonal shift (IncompleteParams::shift, e.g. 0.01) usually cures it",
        params.pivot_tol
    ))
}

/// An incomplete factorization on the CPU: the [`IncompleteStructure`] and the factor's values.
#[derive(Clone, Debug)]
pub struct IncompleteFactor<T> {
    structure: IncompleteStructure,
    params: IncompleteParams,
    values: Vec<T>,
    /// IC: `Lᵀ`'s values (gathered after each factorization).
    t_values: Vec<T>,
    shift_used: f64,
    /// The application of each triangle, chosen after the first factorization.
    modes: ApplyModes,
}

/// How a factor's two triangular solves are applied, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ApplyModes {
    /// Jacobi sweeps of the lower solve (0: exact).
    pub lower_sweeps: usize,
    /// Jacobi sweeps of the upper solve (0: exact).
    pub upper_sweeps: usize,
    /// `‖D⁻¹N‖∞` of the lower triangle (computed under [`Application::Auto`], else NaN).
    pub lower_norm: f64,
    /// `‖D⁻¹N‖∞` of the upper triangle (computed under [`Application::Auto`], else NaN).
    pub upper_norm: f64,
}

impl ApplyModes {
    /// The modes of `params` without a choice: [`IncompleteParams::jacobi_sweeps`] on both
    /// triangles.
    pub fn fixed(params: &IncompleteParams) -> Self {
        ApplyModes {
            lower_sweeps: params.jacobi_sweeps,
            upper_sweeps: params.jacobi_sweeps,
            lower_norm: f64::NAN,
            upper_norm: f64::NAN,
        }
    }

    /// The modes `params` ask for, given the levels of the lower and upper solves (`levels`,
    /// from the host's or the device's analysis), the factor's values on `s`'s pattern
    /// (`values`) and, for IC, `Lᵀ`'s (`t_values`).
    pub fn resolve<T: Elem>(
        s: &IncompleteStructure,
        levels: (usize, usize),
        params: &IncompleteParams,
        values: &[T],
        t_values: &[T],
    ) -> Self {
        let (ln, un) = triangle_norms(s, values, t_values);
        let (lower_sweeps, lower_norm) = sweeps_for(levels.0, ln);
        let (upper_sweeps, upper_norm) = sweeps_for(levels.1, un);
        if params.jacobi_sweeps > 0 || params.application == Application::Exact {
            return ApplyModes {
                lower_norm,
                upper_norm,
                ..Self::fixed(params)
            };
        }
        ApplyModes {
            lower_sweeps,
            upper_sweeps,
            lower_norm,
            upper_norm,
        }
    }

    /// Whether [`resolve`](Self::resolve) needs the factor's values (an automatic choice).
    pub fn needs_values(params: &IncompleteParams) -> bool {
        (params.jacobi_sweeps == 0 && params.application == Application::Auto)
            || params.ordering == Ordering::Auto
    }

    /// Whether a reordered factor is unstable enough to fall back to the natural order: a
    /// triangle's `‖D⁻¹N‖∞` above [`REORDER_MAX_GROWTH`].
    pub fn unstable(&self) -> bool {
        let ok = |v: f64| v <= REORDER_MAX_GROWTH;
        !ok(self.lower_norm) || !ok(self.upper_norm)
    }

    /// `"exact"` or `"jacobi-K"` for a triangle's sweeps.
    pub fn mode_name(sweeps: usize) -> String {
        if sweeps == 0 {
            "exact".into()
        } else {
            format!("jacobi-{sweeps}")
        }
    }
}

impl<T: Elem> IncompleteFactor<T> {
    /// Analyses and factors `a`.
    ///
    /// # Errors
    /// As [`IncompleteStructure::analyse`], and a bad pivot naming its row (see the
    /// [module docs](self)).
    pub fn new(a: &CsrMatrix<T>, kind: FactorKind, params: &IncompleteParams) -> Result<Self> {
        let params = &resolve_params(a, kind, params);
        if let Some(f) = natural_first(
            params,
            |p| Self::new(a, kind, p),
            |f| (f.levels().0, f.modes),
        )? {
            return Ok(f);
        }
        let (structure, first) = IncompleteStructure::analyse_factored(a, kind, params, true)?;
        let mut f = IncompleteFactor {
            structure,
            params: *params,
            values: Vec::new(),
            t_values: Vec::new(),
            shift_used: params.shift,
            modes: ApplyModes::fixed(params),
        };
        let reordered_auto = params.ordering == Ordering::Auto
            && f.structure.preprocessing.ordering != Ordering::Natural;
        let factored = match first {
            // ILUT: the analysis factored the values already (it never fails: bad pivots are
            // compensated).
            Some(v) => {
                f.values = v;
                Ok(())
            }
            _ => f.refactor(a),
        };
        if let Err(e) = factored {
            return match reordered_auto {
                true => Self::new(a, kind, &params.natural_fallback()),
                false => Err(e),
            };
        }
        f.modes = ApplyModes::resolve(&f.structure, f.levels(), params, &f.values, &f.t_values);
        if reordered_auto && f.modes.unstable() {
            return Self::new(a, kind, &params.natural_fallback());
        }
        if let Some(p) = unfilled_fallback(params, &f.structure, &f.modes) {
            return Self::new(a, kind, &p);
        }
        Ok(f)
    }

    /// Factors new values of `a` on the pattern analysed before (no new analysis).
    ///
    /// # Errors
    /// A different pattern, or a bad pivot naming its row.
    pub fn refactor(&mut self, a: &CsrMatrix<T>) -> Result<()> {
        let s = &self.structure;
        s.check_pattern(a)?;
        let mut shift = self.params.shift;
        let mut tries = 0;
        loop {
            match factor_values(s, a, shift, self.params.pivot_tol) {
                Ok(v) => {
                    if let Some((_, _, map)) = &s.transpose {
                        self.t_values = map.iter().map(|&p| v[p as usize].conj()).collect();
                    }
                    self.values = v;
                    self.shift_used = shift;
                    return Ok(());
                }
                Err((row, piv)) if !self.params.auto_shift || tries >= AUTO_SHIFT_TRIES => {
                    return Err(pivot_error(s.kind, row, piv, &self.params));
                }
                Err(_) => {
                    shift = next_shift(shift);
                    tries += 1;
                }
            }
        }
    }

    /// The diagonal shift of the last successful factorization (see
    /// [`IncompleteParams::auto_shift`]).
    pub fn shift_used(&self) -> f64 {
        self.shift_used
    }

    /// The structure.
    pub fn structure(&self) -> &IncompleteStructure {
        &self.structure
    }
    /// How the two triangular solves are applied.
    pub fn modes(&self) -> ApplyModes {
        self.modes
    }
    /// What was done and how it is applied.
    pub fn summary(&self) -> FactorSummary {
        FactorSummary::new(
            &self.structure,
            self.levels(),
            self.modes,
            self.shift_used,
            false,
        )
    }
    /// The host plans of the two solves (a CPU factor's structure is analysed with them).
    fn plans(&self) -> (&TriangularPlan, &TriangularPlan) {
        let s = &self.structure;
        match (&s.lower, &s.upper) {
            (Some(l), Some(u)) => (l, u),
            _ => unreachable!("IncompleteStructure::analyse_with gives the host plans"),
        }
    }
    /// Levels of the lower and upper solves.
    pub fn levels(&self) -> (usize, usize) {
        let (l, u) = self.plans();
        (l.levels(), u.levels())
    }
    /// The parameters the factor settled on (automatic choices resolved, after its fallbacks).
    pub fn params(&self) -> &IncompleteParams {
        &self.params
    }
    /// The factor's values (on [`IncompleteStructure::row_ptr`]/[`col_idx`](IncompleteStructure::col_idx)).
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// The factor as a matrix (ILU: `L` below the diagonal and `U` on and above it; IC: `L`).
    pub fn matrix(&self) -> CsrMatrix<T> {
        let s = &self.structure;
        CsrMatrix::try_from_parts(
            s.n,
            s.n,
            s.row_ptr.clone(),
            s.col_idx.clone(),
            self.values.clone(),
        )
        .expect("the factor keeps a valid pattern")
    }

    /// `L` as its own matrix (ILU: the strict lower part with ones on the diagonal; IC: `L`).
    pub fn lower_matrix(&self) -> CsrMatrix<T> {
        let m = self.matrix();
        match self.structure.kind {
            FactorKind::Ic0 => m,
            FactorKind::Ilu0 => triangle_of(&m, Triangle::Lower, Some(T::one())),
        }
    }

    /// `U` as its own matrix (ILU: the upper part with the diagonal; IC: `Lᵀ`).
    pub fn upper_matrix(&self) -> CsrMatrix<T> {
        match &self.structure.transpose {
            Some((rp, cj, _)) => CsrMatrix::try_from_parts(
                self.structure.n,
                self.structure.n,
                rp.clone(),
                cj.clone(),
                self.t_values.clone(),
            )
            .expect("the transpose keeps a valid pattern"),
            None => triangle_of(&self.matrix(), Triangle::Upper, None),
        }
    }

    /// `x = L⁻¹(P·b)` (`P` the factor's row order, [`IncompleteStructure::perm_in`];
    /// approximate per [`modes`](Self::modes)).
    pub fn lower_solve(&self, b: &[T], x: &mut [T]) {
        let s = &self.structure;
        let permuted: Vec<T>;
        let b = match &s.perm_in {
            Some(p) => {
                permuted = p.iter().map(|&i| b[i as usize]).collect();
                &permuted[..]
            }
            None => b,
        };
        let lower = self.plans().0;
        match self.modes.lower_sweeps {
            0 => lower.solve_values(&s.col_idx, &self.values, b, x),
            k => lower.sweep_values(&s.col_idx, &self.values, b, x, k),
        }
    }

    /// `x = Qᵀ·U⁻¹b` (IC: `L⁻ᵀ`; `Q` the factor's ordering,
    /// [`IncompleteStructure::perm_out`]; approximate per [`modes`](Self::modes)).
    pub fn upper_solve(&self, b: &[T], x: &mut [T]) {
        let s = &self.structure;
        let (col, val) = match &s.transpose {
            Some((_, tcol, _)) => (&tcol[..], &self.t_values[..]),
            None => (&s.col_idx[..], &self.values[..]),
        };
        let upper = self.plans().1;
        let solve = |y: &mut [T]| match self.modes.upper_sweeps {
            0 => upper.solve_values(col, val, b, y),
            k => upper.sweep_values(col, val, b, y, k),
        };
        match &s.perm_out {
            Some(p) => {
                let mut y = vec![T::zero(); x.len()];
                solve(&mut y);
                for (xj, &pj) in x.iter_mut().zip(p) {
                    *xj = y[pj as usize];
                }
            }
            None => solve(x),
        }
    }
}

/// The `triangle` of `m` (diagonal included) as its own matrix; `unit` replaces the diagonal by
/// that value (and adds it where missing).
pub fn triangle_of<T: Elem>(m: &CsrMatrix<T>, triangle: Triangle, unit: Option<T>) -> CsrMatrix<T> {
    let mut t = Vec::new();
    for i in 0..m.nrows() {
        let (c, v) = m.row(i);
        for (&cj, &vj) in c.iter().zip(v) {
            let j = cj as usize;
            let keep = match triangle {
                Triangle::Lower => j < i,
                Triangle::Upper => j > i,
            };
            if keep || (j == i && unit.is_none()) {
                t.push((i, j, vj));
            }
        }
        if let Some(u) = unit {
            t.push((i, i, u));
        }
    }
    CsrMatrix::from_triplets(m.nrows(), m.ncols(), &t).expect("a triangle of a valid matrix")
}

fn bad<T: Elem>(p: T, rowmax: T::Real, tol: T::Real) -> bool {
    !p.finite() || p.modulus() <= tol * rowmax
}

/// A pivot as reported in an error: the value of a real one, the modulus of a complex one.
pub(crate) fn reported<T: Elem>(p: T) -> f64 {
    match T::IS_COMPLEX {
        true => p.modulus().as_f64(),
        false => p.re().as_f64(),
    }
}

/// ILU(0), IKJ variant, rows in order.
fn ilu0_rows<T: Elem>(
    s: &IncompleteStructure,
    v: &mut [T],
    rowmax: &[T::Real],
    tol: T::Real,
) -> std::result::Result<(), (usize, f64)> {
    let (rp, cj, dp) = (&s.row_ptr, &s.col_idx, &s.diag_pos);
    let mut pos = vec![NO_DIAG; s.n];
    for i in 0..s.n {
        let (lo, hi) = (rp[i] as usize, rp[i + 1] as usize);
        for p in lo..hi {
            pos[cj[p] as usize] = p as u32;
        }
        for p in lo..dp[i] as usize {
            let k = cj[p] as usize;
            let l = v[p] / v[dp[k] as usize];
            v[p] = l;
            for q in dp[k] as usize + 1..rp[k + 1] as usize {
                let t = pos[cj[q] as usize];
                if t != NO_DIAG {
                    v[t as usize] -= l * v[q];
                }
            }
        }
        for p in lo..hi {
            pos[cj[p] as usize] = NO_DIAG;
        }
        let piv = v[dp[i] as usize];
        if bad(piv, rowmax[i], tol) {
            return Err((i, reported(piv)));
        }
    }
    Ok(())
}

/// IC(0), row by row (left-looking); for a complex (Hermitian) `A`, `A ≈ L·Lᴴ`.
fn ic0_rows<T: Elem>(
    s: &IncompleteStructure,
    v: &mut [T],
    rowmax: &[T::Real],
    tol: T::Real,
) -> std::result::Result<(), (usize, f64)> {
    let (rp, cj, dp) = (&s.row_ptr, &s.col_idx, &s.diag_pos);
    let mut pos = vec![NO_DIAG; s.n];
    for i in 0..s.n {
        let (lo, d) = (rp[i] as usize, dp[i] as usize);
        for p in lo..d {
            pos[cj[p] as usize] = p as u32;
        }
        for p in lo..d {
            let k = cj[p] as usize;
            let mut acc = v[p];
            for q in rp[k] as usize..dp[k] as usize {
                let t = pos[cj[q] as usize];
                if t != NO_DIAG {
                    acc -= v[t as usize] * v[q].conj();
                }
            }
            v[p] = acc / v[dp[k] as usize];
        }
        for p in lo..d {
            pos[cj[p] as usize] = NO_DIAG;
        }
        // The pivot of a Hermitian `A` is real: its imaginary part (rounding) is dropped.
        let mut piv = v[d].re();
        for l in &v[lo..d] {
            piv -= l.norm_sqr();
        }
        if bad(T::from_real(piv), rowmax[i], tol) || piv < T::Real::zero() {
            return Err((i, piv.as_f64()));
        }
        v[d] = T::from_real(piv.sqrt());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
