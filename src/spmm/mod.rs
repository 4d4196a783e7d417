//! Sparse matrix times dense block `Y ← α·A·X + β·Y`: one product for `k` right-hand sides.
//!
//! `X` is a dense `ncols × k` block and `Y` a dense `nrows × k` block, both in the same
//! [`Layout`]: row-major (`X[i][j]` at `x[i·k + j]`, the `k` values of one row of `X` side by
//! side) or column-major (`X[i][j]` at `x[j·ncols + i]`, each column a vector of its own, as `k`
//! separate SpMV inputs would be stored).
//!
//! Reading the matrix once for `k` columns is the whole point: an SpMV moves
//! `nnz·(sizeof(T)+4)` bytes of matrix for `2·nnz` flops; `k` SpMVs move that `k` times, while
//! one SpMM moves it once and the dense blocks `k` times. [`spmm_bytes`] counts the bytes the
//! same way as [`CsrMatrix::spmv_bytes`] (each input read once, each output written once).
//!
//! [`spmm`] is the CPU product (rayon over rows; each row's `k` sums are accumulated while its
//! entries are in cache). [`cpu::spmm_seq`] is the sequential reference that defines the
//! semantics. The GPU product is [`gpu::GpuSpmm`] (feature `cuda`) on the SpMV's device matrix.
//!
//! # Which layout is fast
//!
//! It depends on the matrix. Each nonzero `a_ic` needs the `k` values `X[c][0..k]`. In
//! row-major they are one contiguous run (one 32-byte sector for `k = 4` in `f64`, one 128-byte
//! line for `k = 32` in `f32`), so the GPU kernel gives each entry a few lanes that read them
//! with 16-byte loads in one coalesced request whatever the column pattern, and a row as many
//! such slots as its length asks for (a group, a warp or a block; `gpu::RowPlan`): the layout
//! for irregular matrices.
//! In column-major they are `k` values `ncols` apart, `k` separate sectors per nonzero, unless
//! neighbouring rows share columns (banded matrices, stencils): there the column-major kernel's
//! thread per row reads neighbouring elements of one column of `X` across the warp and streams
//! the row's entries once. Measured on an H100 (`benches/results/history/multi_rhs.md`, Poisson 2D,
//! 10^6 rows, `f32`): column-major 1.0–1.3 TB/s, row-major 0.7–1.2 TB/s (row-major's group of
//! lanes idles on 5-entry rows as `k` grows). Irregular matrices were not measured yet.
//!
//! # Semantics
//!
//! As [`spmv`](crate::spmv::spmv), column by column: `β = 0` does not read `Y`; `α = 0` does
//! not read `A` or `X`; column `j` of the result equals `spmv(α, A, X[:, j], β, Y[:, j])` to
//! rounding (the order of the additions within a row may differ).
//!
//! # Errors
//!
//! Shapes are checked and reported as [`Error::InvalidInput`] naming what is wrong: `k = 0`, or
//! a block whose length is not `rows × k` (the message gives the expected and found lengths).
//!
//! # Example
//!
//! ```
//! use segsparse::spmm::{spmm, Layout};
//! use segsparse::CsrMatrix;
//! // [1 0 2]
//! // [0 0 0]
//! // [3 4 0]
//! let a = CsrMatrix::from_triplets(3, 3, &[(0, 0, 1.0), (0, 2, 2.0), (2, 0, 3.0), (2, 1, 4.0)])?;
//! // X = [e0 | 1], row-major (3 rows × 2 columns).
//! let x = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0];
//! let mut y = [f64::NAN; 6];
//! spmm(1.0, &a, &x, 2, Layout::RowMajor, 0.0, &mut y)?;
//! assert_eq!(y, [1.0, 3.0, 0.0, 0.0, 3.0, 7.0]);
//! # Ok::<(), segsparse::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::{CsrMatrix, Scalar};

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;

/// Storage order of a dense block of `k` vectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `X[i][j]` at `x[i·k + j]`: the `k` values of a row side by side (the fast layout).
    #[default]
    RowMajor,
    /// `X[i][j]` at `x[j·rows + i]`: each column contiguous.
    ColMajor,
}

impl Layout {
    /// `"row"` / `"col"`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row",
            Layout::ColMajor => "col",
        }
    }

    /// Index of element `(i, j)` of a `rows × k` block.
    #[inline]
    pub fn index(self, i: usize, j: usize, rows: usize, k: usize) -> usize {
        match self {
            Layout::RowMajor => i * k + j,
            Layout::ColMajor => j * rows + i,
        }
    }
}

/// Checks the shapes of `Y ← α·A·X + β·Y` for an `nrows × ncols` matrix and `k` columns.
///
/// # Errors
/// [`Error::InvalidInput`] when `k = 0` or a block's length is not `rows × k`.
pub fn check_shapes(
    what: &str,
    nrows: usize,
    ncols: usize,
    k: usize,
    x_len: usize,
    y_len: usize,
) -> Result<()> {
    if k == 0 {
        return Err(Error::InvalidInput(format!(
            "{what}: k = 0 columns (a dense block needs at least one)"
        )));
    }
    let want_x = ncols.checked_mul(k);
    if want_x != Some(x_len) {
        return Err(Error::InvalidInput(format!(
            "{what}: X has {x_len} elements, expected {ncols} rows × {k} columns = {}",
            want_x.map_or("overflow".into(), |v| v.to_string())
        )));
    }
    let want_y = nrows.checked_mul(k);
    if want_y != Some(y_len) {
        return Err(Error::InvalidInput(format!(
            "{what}: Y has {y_len} elements, expected {nrows} rows × {k} columns = {}",
            want_y.map_or("overflow".into(), |v| v.to_string())
        )));
    }
    Ok(())
}

/// Bytes an SpMM moves, each input read once and each output written once:
/// `nnz·(sizeof(T)+4) + (nrows+1)·4 + k·(ncols+nrows)·sizeof(T)` (the SpMV count with `k`
/// vectors).
pub fn spmm_bytes<T: Scalar>(a: &CsrMatrix<T>, k: usize) -> usize {
    a.nnz() * (T::BYTES + 4) + (a.nrows() + 1) * 4 + k * (a.ncols() + a.nrows()) * T::BYTES
}

/// `Y ← α·A·X + β·Y` on the CPU for a dense block of `k` columns in `layout`, multithreaded
/// (rayon) over chunks of rows; see the [module docs](self).
///
/// # Errors
/// [`Error::InvalidInput`] when `k = 0`, `x.len() ≠ ncols·k` or `y.len() ≠ nrows·k`.
pub fn spmm<T: Scalar>(
    alpha: T,
    a: &CsrMatrix<T>,
    x: &[T],
    k: usize,
    layout: Layout,
    beta: T,
    y: &mut [T],
) -> Result<()> {
    check_shapes("spmm", a.nrows(), a.ncols(), k, x.len(), y.len())?;
    cpu::spmm_par(alpha, a, x, k, layout, beta, y);
    Ok(())
}
