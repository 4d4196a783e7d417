//! The tentative prolongator from near-nullspace candidates (PyAMG's `fit_candidates`) and
//! rigid-body modes. (Node amalgamation for systems with several unknowns per node is
//! [`crate::sparse::amalgamate`].)

use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use crate::sparse::{Aggregation, NOT_AGGREGATED};

/// The near-nullspace candidates of a level: `k` vectors of the level's length.
pub(crate) type Candidates<T> = Vec<Vec<T>>;

/// Checks a fine matrix of `n` rows against the block size of `params` and the user candidates.
pub(crate) fn check_fine_rows<T: Scalar>(
    n: usize,
    candidates: Option<&[Vec<T>]>,
    params: &super::AmgParams,
) -> Result<()> {
    if let Some(c) = candidates {
        check_candidates(c, n)?;
    }
    if n % params.block_size != 0 {
        return Err(Error::InvalidInput(format!(
            "AMG: {n} rows are not a multiple of the block size {}",
            params.block_size
        )));
    }
    Ok(())
}

/// Checks user candidates against a matrix of `n` rows.
fn check_candidates<T: Scalar>(c: &[Vec<T>], n: usize) -> Result<()> {
    if c.is_empty() {
        return Err(Error::InvalidInput(
            "AMG: at least one near-nullspace candidate is needed".into(),
        ));
    }
    for (j, v) in c.iter().enumerate() {
        if v.len() != n {
            return Err(Error::InvalidInput(format!(
                "AMG: near-nullspace candidate {j} has length {}, the matrix has {n} rows",
                v.len()
            )));
        }
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(Error::InvalidInput(format!(
                "AMG: near-nullspace candidate {j} is not finite at row {i}"
            )));
        }
    }
    Ok(())
}

/// The tentative prolongator `T` (`n × nagg·k`) and the coarse candidates: for each aggregate,
/// the rows of the candidates `B` on its unknowns (`block` per node) are factored `B_a = Q R` by
/// modified Gram–Schmidt; `Q` is the aggregate's block of `T` (orthonormal columns) and `R` its
/// `k × k` block of the coarse candidates (PyAMG's `fit_candidates`). A column that is linearly
/// dependent on the previous ones (its norm falls below 1e-10 of what it was) is set to zero,
/// so `T` keeps one entry per candidate in every aggregated row whatever the values: the
/// pattern depends on the aggregation alone, which the numeric re-setup relies on. Unknowns of
/// unaggregated nodes get empty rows.
///
/// All of it is computed in `f64`, each aggregate's sums sequentially over its unknowns in
/// increasing order; for one candidate (`k = 1`) that is `T[i, a] = b_i / ‖b_a‖` and
/// `bc[a] = ‖b_a‖` (a zero or non-finite norm gives a zero column), which the GPU's
/// [`crate::sparse::gpu::tentative_single`] reproduces bit for bit; for several candidates the
/// GPU's [`crate::sparse::gpu::tentative_qr`] does (the same sums from `-0.0`, where `Sum`
/// starts, so even the signs of zeros agree).
///
/// # Panics
/// When `b` is empty, its vectors' lengths differ, or `agg` has fewer than `len / block` nodes.
pub fn fit_candidates<T: Scalar>(
    agg: &Aggregation,
    block: usize,
    b: &[Vec<T>],
) -> (CsrMatrix<T>, Vec<Vec<T>>) {
    let k = b.len();
    let n = b[0].len();
    let nagg = agg.num_aggregates();
    // Unknowns of each aggregate, in increasing order (a counting sort).
    let mut count = vec![0u32; nagg + 1];
    for i in 0..n {
        let a = agg.agg[i / block];
        if a != NOT_AGGREGATED {
            count[a as usize + 1] += 1;
        }
    }
    for a in 0..nagg {
        count[a + 1] += count[a];
    }
    let start = count.clone();
    let mut members = vec![0u32; start[nagg] as usize];
    for i in 0..n {
        let a = agg.agg[i / block];
        if a != NOT_AGGREGATED {
            members[count[a as usize] as usize] = i as u32;
            count[a as usize] += 1;
        }
    }
    // Per aggregate: Q (m × k, row-major) and R (k × k).
    let blocks: Vec<(Vec<f64>, Vec<f64>)> = (0..nagg)
        .into_par_iter()
        .map(|a| {
            let rows = &members[start[a] as usize..start[a + 1] as usize];
            let m = rows.len();
            let mut q = vec![0.0f64; m * k];
            for (r, &i) in rows.iter().enumerate() {
                for c in 0..k {
                    q[r * k + c] = b[c][i as usize].as_f64();
                }
            }
            let mut rr = vec![0.0f64; k * k];
            for c in 0..k {
                let norm0 = (0..m).map(|r| q[r * k + c].powi(2)).sum::<f64>().sqrt();
                for p in 0..c {
                    let d: f64 = (0..m).map(|r| q[r * k + p] * q[r * k + c]).sum();
                    rr[p * k + c] = d;
                    for r in 0..m {
                        q[r * k + c] -= d * q[r * k + p];
                    }
                }
                let norm = (0..m).map(|r| q[r * k + c].powi(2)).sum::<f64>().sqrt();
                if norm > 1e-10 * norm0 && norm > 0.0 {
                    rr[c * k + c] = norm;
                    for r in 0..m {
                        q[r * k + c] /= norm;
                    }
                } else {
                    for r in 0..m {
                        q[r * k + c] = 0.0;
                    }
                }
            }
            (q, rr)
        })
        .collect();
    // T row by row: row i (in aggregate a, local position r) holds Q[r, :] at columns a·k + c.
    let mut local = vec![0u32; n];
    for a in 0..nagg {
        for (r, &i) in members[start[a] as usize..start[a + 1] as usize]
            .iter()
            .enumerate()
        {
            local[i as usize] = r as u32;
        }
    }
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u32);
    let mut col = Vec::with_capacity(members.len() * k);
    let mut val = Vec::with_capacity(members.len() * k);
    for (i, &r) in local.iter().enumerate() {
        let a = agg.agg[i / block];
        if a != NOT_AGGREGATED {
            let (q, _) = &blocks[a as usize];
            let r = r as usize;
            for c in 0..k {
                col.push((a as usize * k + c) as u32);
                val.push(T::of_f64(q[r * k + c]));
            }
        }
        row_ptr.push(col.len() as u32);
    }
    // SAFETY: row_ptr is non-decreasing from 0 to col.len(); columns a·k + c < nagg·k, increasing
    // within each row; val has col.len() entries.
    let t = unsafe { CsrMatrix::from_parts_unchecked(n, nagg * k, row_ptr, col, val) };
    let mut bc = vec![vec![T::zero(); nagg * k]; k];
    for (a, (_, rr)) in blocks.iter().enumerate() {
        for c in 0..k {
            for (j, col) in bc.iter_mut().enumerate() {
                col[a * k + c] = T::of_f64(rr[c * k + j]);
            }
        }
    }
    (t, bc)
}

/// Rigid-body modes of a 2-D elastic body with two unknowns per node (`x` then `y`), from the
/// node coordinates: the translations `(1, 0)` and `(0, 1)` and the rotation `(−y, x)`, PyAMG's
/// near-nullspace for linear elasticity. Pass them to [`Amg::with_candidates`](super::Amg::with_candidates)
/// with [`AmgParams::block_size`](super::AmgParams::block_size) = 2.
pub fn rigid_body_modes_2d<T: Scalar>(coords: &[[f64; 2]]) -> Vec<Vec<T>> {
    let n = coords.len();
    let mut b = vec![vec![T::zero(); 2 * n]; 3];
    for (i, &[x, y]) in coords.iter().enumerate() {
        b[0][2 * i] = T::one();
        b[1][2 * i + 1] = T::one();
        b[2][2 * i] = T::of_f64(-y);
        b[2][2 * i + 1] = T::of_f64(x);
    }
    b
}

/// Rigid-body modes of a 3-D elastic body with three unknowns per node: three translations and
/// the rotations `(−y, x, 0)`, `(−z, 0, x)`, `(0, −z, y)` (PyAMG's order). Use with
/// [`AmgParams::block_size`](super::AmgParams::block_size) = 3.
pub fn rigid_body_modes_3d<T: Scalar>(coords: &[[f64; 3]]) -> Vec<Vec<T>> {
    let n = coords.len();
    let mut b = vec![vec![T::zero(); 3 * n]; 6];
    for (i, &[x, y, z]) in coords.iter().enumerate() {
        for c in 0..3 {
            b[c][3 * i + c] = T::one();
        }
        b[3][3 * i] = T::of_f64(-y);
        b[3][3 * i + 1] = T::of_f64(x);
        b[4][3 * i] = T::of_f64(-z);
        b[4][3 * i + 2] = T::of_f64(x);
        b[5][3 * i + 1] = T::of_f64(-z);
        b[5][3 * i + 2] = T::of_f64(y);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::{aggregate_mis2, amalgamate, strength_symmetric};

    /// `T·B_c = B` (the candidates are interpolated exactly) and `TᵀT = I` on the aggregates'
    /// columns, for one and for three candidates (a rank-deficient aggregate loses columns).
    /// The device QR starts its sums where `Sum` does: at `-0.0` (`-0.0 + -0.0` stays `-0.0`).
    #[test]
    fn float_sum_starts_at_negative_zero() {
        let s: f64 = [-0.0f64, -0.0].iter().sum();
        assert!(s.is_sign_negative() && s == 0.0);
    }

    #[test]
    fn tentative_interpolates_candidates() {
        let n = 12;
        let a = crate::generate::elasticity2d::<f64>(n).unwrap();
        let s = strength_symmetric(&amalgamate(&a, 2).unwrap(), 0.0).unwrap();
        let agg = aggregate_mis2(&s, 3);
        let xy = crate::generate::elasticity2d_coordinates(n);
        for b in [vec![vec![1.0; 2 * n * n]], rigid_body_modes_2d::<f64>(&xy)] {
            let k = b.len();
            let (t, bc) = fit_candidates(&agg, 2, &b);
            assert_eq!(t.ncols(), agg.num_aggregates() * k);
            for (j, col) in b.iter().enumerate() {
                let mut tb = vec![0.0; t.nrows()];
                crate::spmv::spmv(1.0, &t, &bc[j], 0.0, &mut tb);
                for (x, y) in tb.iter().zip(col) {
                    assert!((x - y).abs() < 1e-12 * y.abs().max(1.0), "{x} vs {y}");
                }
            }
            let tt = crate::sparse::spgemm(&t.transpose(), &t).unwrap();
            for i in 0..tt.nrows() {
                let (c, v) = tt.row(i);
                for (&j, &x) in c.iter().zip(v) {
                    let want = if j as usize == i { 1.0 } else { 0.0 };
                    assert!((x - want).abs() < 1e-12, "TᵀT[{i},{j}] = {x}");
                }
            }
        }
        let e = check_candidates(&[vec![1.0; 5], vec![1.0; 4]], 5).unwrap_err();
        assert!(e.to_string().contains("candidate 1 has length 4"));
    }
}
