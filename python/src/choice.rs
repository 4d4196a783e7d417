//! The automatic choice as the Python side reads it: the statistics tuple shared by
//! `_Matrix.auto_choice` (matrix.rs) and the automatic solve's report (auto.rs).

use segsparse::precond::auto::MatrixStats;

/// The statistics as the Python side reads them: `(rows, nnz, symmetric, missing_diagonal,
/// positive_diagonal, diagonal_spread, min_dominance, opposite_sign_fraction, lower_levels,
/// asymmetry, negative_diagonal)`.
pub(crate) type StatsTuple = (
    usize,
    usize,
    bool,
    usize,
    bool,
    f64,
    f64,
    f64,
    usize,
    f64,
    usize,
);

/// [`StatsTuple`] of `s`.
pub(crate) fn stats_tuple(s: &MatrixStats) -> StatsTuple {
    (
        s.rows,
        s.nnz,
        s.symmetric,
        s.missing_diagonal,
        s.positive_diagonal,
        s.diagonal_spread,
        s.min_dominance,
        s.opposite_sign_fraction,
        s.lower_levels,
        s.asymmetry,
        s.negative_diagonal,
    )
}
