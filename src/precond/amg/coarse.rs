//! The coarsest level's direct solve: the dense inverse of the (small) coarse matrix, applied as
//! a dense matrix–vector product — one kernel, no host synchronisation, so the whole cycle stays
//! on the device and can be captured in a CUDA graph.

use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// How the coarse matrix was inverted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub enum CoarseSolver {
    /// Cholesky factorization (the coarse matrix is symmetric positive definite).
    Cholesky,
    /// LU with partial pivoting (Cholesky failed: not symmetric positive definite).
    Lu,
}

impl std::fmt::Display for CoarseSolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CoarseSolver::Cholesky => "dense Cholesky",
            CoarseSolver::Lu => "dense LU",
        })
    }
}

/// The inverse of `a` as a dense matrix stored in CSR (every entry), by Cholesky, or by LU with
/// partial pivoting when Cholesky fails.
///
/// # Errors
/// [`Error::InvalidInput`] when the matrix is singular to working precision (LU meets a pivot
/// below `n·ε·max|a|`).
pub(crate) fn dense_inverse<T: Scalar>(a: &CsrMatrix<T>) -> Result<(CsrMatrix<T>, CoarseSolver)> {
    let n = a.nrows();
    let mut d = vec![0.0f64; n * n];
    for i in 0..n {
        let (c, v) = a.row(i);
        for (&j, &x) in c.iter().zip(v) {
            d[i * n + j as usize] += x.as_f64();
        }
    }
    let (inv, how) = match cholesky_inverse(&d, n) {
        Some(inv) => (inv, CoarseSolver::Cholesky),
        None => (lu_inverse(&d, n)?, CoarseSolver::Lu),
    };
    let row_ptr: Vec<u32> = (0..=n).map(|i| (i * n) as u32).collect();
    let col: Vec<u32> = (0..n * n).map(|k| (k % n) as u32).collect();
    let val: Vec<T> = inv.iter().map(|&x| T::of_f64(x)).collect();
    Ok((CsrMatrix::try_from_parts(n, n, row_ptr, col, val)?, how))
}

/// Multiply-adds of a column of the Cholesky factor below which its rows are computed on the
/// calling thread.
const PARALLEL_WORK: usize = 1 << 16;

/// `A⁻¹` from `A = L·Lᵀ`, or `None` when a pivot is not positive (or `A` is not symmetric).
fn cholesky_inverse(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for i in 0..n {
        for j in 0..i {
            if (a[i * n + j] - a[j * n + i]).abs() > 1e-10 * scale {
                return None;
            }
        }
    }
    let mut l = vec![0.0f64; n * n];
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= l[j * n + k] * l[j * n + k];
        }
        if s.is_nan() || s <= 1e-14 * scale {
            return None;
        }
        let djj = s.sqrt();
        l[j * n + j] = djj;
        // Column j below the diagonal, rows in parallel where the column is long enough to
        // pay for a dispatch to the thread pool (a coarsest level of a few hundred rows is
        // factored on one thread in well under a millisecond; one dispatch per column cost
        // more than the work).
        let (head, tail) = l.split_at_mut((j + 1) * n);
        let lj = &head[j * n..j * n + j];
        let column = |(r, row): (usize, &mut [f64])| {
            let i = j + 1 + r;
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= row[k] * lj[k];
            }
            row[j] = s / djj;
        };
        if (n - j - 1) * j < PARALLEL_WORK {
            tail.chunks_mut(n).enumerate().for_each(column);
        } else {
            tail.par_chunks_mut(n).enumerate().for_each(column);
        }
    }
    // Columns of the inverse in parallel: solve L y = e_c, then Lᵀ x = y (Lᵀ's rows stored
    // apart, so that both sweeps read consecutive entries).
    let mut lt = vec![0.0f64; n * n];
    for i in 0..n {
        for k in 0..=i {
            lt[k * n + i] = l[i * n + k];
        }
    }
    Some(from_columns(n, |c| inverse_column(&l, &lt, n, c)))
}

/// Column `c` of `(L·Lᵀ)⁻¹` from the Cholesky factor `l` and its transpose `lt` (both `n × n`,
/// row-major): `L y = e_c`, then `Lᵀ x = y`.
fn inverse_column(l: &[f64], lt: &[f64], n: usize, c: usize) -> Vec<f64> {
    let mut y = vec![0.0f64; n];
    for i in c..n {
        let mut s = if i == c { 1.0 } else { 0.0 };
        for k in c..i {
            s -= l[i * n + k] * y[k];
        }
        y[i] = s / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = y[i];
        for k in i + 1..n {
            s -= lt[i * n + k] * y[k];
        }
        y[i] = s / l[i * n + i];
    }
    y
}

/// `A⁻¹` by LU with partial pivoting.
fn lu_inverse(a: &[f64], n: usize) -> Result<Vec<f64>> {
    let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut lu = a.to_vec();
    let mut perm: Vec<usize> = (0..n).collect();
    for k in 0..n {
        let p = (k..n)
            .max_by(|&x, &y| lu[x * n + k].abs().total_cmp(&lu[y * n + k].abs()))
            .unwrap_or(k);
        let piv = lu[p * n + k].abs();
        if piv.is_nan() || piv <= (n as f64) * f64::EPSILON * scale {
            return Err(Error::InvalidInput(format!(
                "AMG coarse solve: the {n}×{n} coarse matrix is singular (LU pivot {k} is {:.3e}); \
                 a singular operator (e.g. a pure Neumann problem) needs a larger coarse level \
                 or a regularised matrix",
                lu[p * n + k]
            )));
        }
        if p != k {
            for c in 0..n {
                lu.swap(k * n + c, p * n + c);
            }
            perm.swap(k, p);
        }
        let pivot = lu[k * n + k];
        for i in k + 1..n {
            let f = lu[i * n + k] / pivot;
            lu[i * n + k] = f;
            if f != 0.0 {
                for c in k + 1..n {
                    lu[i * n + c] -= f * lu[k * n + c];
                }
            }
        }
    }
    Ok(from_columns(n, |c| {
        // P·A = L·U: solve L y = P e_c, then U x = y.
        let mut y: Vec<f64> = perm
            .iter()
            .map(|&p| if p == c { 1.0 } else { 0.0 })
            .collect();
        for i in 0..n {
            for k in 0..i {
                y[i] -= lu[i * n + k] * y[k];
            }
        }
        for i in (0..n).rev() {
            for k in i + 1..n {
                y[i] -= lu[i * n + k] * y[k];
            }
            y[i] /= lu[i * n + i];
        }
        y
    }))
}

/// The row-major `n × n` matrix whose column `c` is `column(c)`, the columns computed in
/// parallel.
fn from_columns(n: usize, column: impl Fn(usize) -> Vec<f64> + Sync + Send) -> Vec<f64> {
    let cols: Vec<Vec<f64>> = (0..n).into_par_iter().map(column).collect();
    let mut m = vec![0.0f64; n * n];
    for (c, col) in cols.iter().enumerate() {
        for (i, &x) in col.iter().enumerate() {
            m[i * n + c] = x;
        }
    }
    m
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;

    /// `dense_inverse(a)` is computed by `expected` and `a·inv = I` to 1e-12.
    fn assert_inverse(a: &CsrMatrix<f64>, expected: CoarseSolver) {
        let (inv, how) = dense_inverse(a).unwrap();
        assert_eq!(how, expected);
        let (da, di) = (a.to_dense(), inv.to_dense());
        let n = da.len();
        for i in 0..n {
            for j in 0..n {
                let s: f64 = (0..n).map(|k| da[i][k] * di[k][j]).sum();
                assert!((s - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn inverses() {
        // SPD: Cholesky.
        let a = crate::generate::poisson2d::<f64>(5).unwrap();
        assert_inverse(&a, CoarseSolver::Cholesky);
        // Indefinite and unsymmetric: LU.
        let t = [
            (0, 1, 2.0),
            (1, 0, 1.0),
            (1, 1, 1.0),
            (2, 2, -3.0),
            (0, 2, 1.0),
        ];
        let b = CsrMatrix::<f64>::from_triplets(3, 3, &t).unwrap();
        assert_inverse(&b, CoarseSolver::Lu);
        // Singular: a clear error.
        let s = CsrMatrix::<f64>::from_triplets(2, 2, &[(0, 0, 1.0), (1, 0, 1.0)]).unwrap();
        let e = dense_inverse(&s).unwrap_err().to_string();
        assert!(e.contains("singular"), "{e}");
    }

    /// A coarsest level large enough that the middle columns of the factor are computed in
    /// parallel (`PARALLEL_WORK`), the first and last ones on the calling thread: the same
    /// inverse as one factored column by column on one thread, bit for bit.
    #[test]
    fn cholesky_with_parallel_columns_equals_serial() {
        let a = crate::generate::poisson2d::<f64>(24).unwrap();
        let n = a.nrows();
        assert!((n / 2) * (n / 2) >= PARALLEL_WORK && n < PARALLEL_WORK);
        let (inv, how) = dense_inverse(&a).unwrap();
        assert_eq!(how, CoarseSolver::Cholesky);
        // The factor on one thread, then A⁻¹ column by column as cholesky_inverse does.
        let d = a.to_dense();
        let mut l = vec![0.0f64; n * n];
        for j in 0..n {
            let mut s = d[j][j];
            for k in 0..j {
                s -= l[j * n + k] * l[j * n + k];
            }
            let djj = s.sqrt();
            l[j * n + j] = djj;
            for i in j + 1..n {
                let mut s = d[i][j];
                for k in 0..j {
                    s -= l[i * n + k] * l[j * n + k];
                }
                l[i * n + j] = s / djj;
            }
        }
        let mut lt = vec![0.0f64; n * n];
        for i in 0..n {
            for k in 0..=i {
                lt[k * n + i] = l[i * n + k];
            }
        }
        for c in [0, n / 3, n - 1] {
            let y = inverse_column(&l, &lt, n, c);
            for i in 0..n {
                assert_eq!(
                    inv.values()[i * n + c].to_bits(),
                    y[i].to_bits(),
                    "({i}, {c})"
                );
            }
        }
    }
}
