//! The statistics on the host: two parallel passes (rayon) over a canonical matrix, the
//! reference the GPU's `kernels/precond/auto_stats.cu` is tested against.

use super::{MatrixStats, Partial, STATS_BLOCK, STATS_LONG, STATS_WARP};
use crate::csr::CsrMatrix;
use crate::scalar::Scalar;
use rayon::prelude::*;

/// Rows per rayon task.
const CHUNK: usize = 4096;

/// The statistics of the canonical square `a` (sorted indices, no duplicates) with symmetry
/// tolerance `tol`; `lower_levels` 0.
pub(super) fn stats<T: Scalar>(a: &CsrMatrix<T>, tol: f64) -> MatrixStats {
    let n = a.nrows();
    if a.ncols() != n {
        return MatrixStats {
            symmetric: false,
            asymmetry: f64::INFINITY,
            ..Partial::EMPTY.finish(n, a.nnz(), tol)
        };
    }
    // Pass 1: the row sizes s_i = max_j |a_ij|.
    let scale: Vec<f64> = (0..n)
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|i| {
            a.row(i)
                .1
                .iter()
                .fold(0.0f64, |m, v| m.max(v.as_f64().abs()))
        })
        .collect();
    // Pass 2: everything else, each entry against its transpose partner.
    let row = |mut p: Partial, i: usize| -> Partial {
        let (c, v) = a.row(i);
        let d = match c.binary_search(&(i as u32)) {
            Ok(k) => v[k].as_f64(),
            Err(_) => 0.0,
        };
        if d == 0.0 {
            p.missing += 1;
        }
        if d < 0.0 {
            p.negative += 1;
        }
        if d <= 0.0 || d.is_nan() {
            p.nonpositive += 1;
        }
        p.dmin = p.dmin.min(d.abs());
        p.dmax = p.dmax.max(d.abs());
        let (mut off, mut sum) = (0.0, 0.0);
        for (&cj, &vj) in c.iter().zip(v) {
            let x = vj.as_f64();
            if !x.is_finite() {
                p.nonfinite += 1;
            }
            sum += x;
            let j = cj as usize;
            if j == i {
                continue;
            }
            off += x.abs();
            if x != 0.0 {
                p.offdiag += 1;
                if (x < 0.0) != (d < 0.0) {
                    p.opposite += 1;
                }
            }
            let (cp, vp) = a.row(j);
            let y = match cp.binary_search(&(i as u32)) {
                Ok(k) => vp[k].as_f64(),
                Err(_) => 0.0,
            };
            let size = scale[i].max(scale[j]);
            let r = if size > 0.0 {
                (x - y).abs() / size
            } else {
                0.0
            };
            if r > p.asymmetry {
                p.asymmetry = r;
            }
        }
        if c.len() > STATS_LONG {
            (off, sum) = lane_sums(i, c, v, STATS_BLOCK);
        } else if c.len() > STATS_WARP {
            (off, sum) = lane_sums(i, c, v, 32);
        }
        if off > 0.0 {
            p.min_dom = p.min_dom.min(d.abs() / off);
        }
        if d > 0.0 && sum < -tol * scale[i] {
            p.negative_sum += 1;
        }
        p
    };
    (0..n)
        .into_par_iter()
        .with_min_len(CHUNK)
        .fold(|| Partial::EMPTY, row)
        .reduce(|| Partial::EMPTY, Partial::merge)
        .finish(n, a.nnz(), tol)
}

/// The sums `Σ_{j≠i} |a_ij|` and `Σ_j a_ij` of a row `i` walked by `lanes` threads of the GPU
/// kernel (`kernels/precond/auto_stats.cu`: a block of [`STATS_BLOCK`] for a long row,
/// `block_sum2_`, a warp of 32 for a medium one, `warp_sum2_`), in their order: entry `k` of the
/// row to lane `k mod lanes` in order, each warp of 32 lanes by a shuffle tree, the warps in
/// order.
fn lane_sums<T: Scalar>(i: usize, c: &[u32], v: &[T], lanes: usize) -> (f64, f64) {
    debug_assert!(lanes % 32 == 0 && lanes <= STATS_BLOCK);
    let mut acc = [(0.0f64, 0.0f64); STATS_BLOCK];
    for (k, (&cj, &vj)) in c.iter().zip(v).enumerate() {
        let x = vj.as_f64();
        let l = &mut acc[k % lanes];
        l.1 += x;
        if cj as usize != i {
            l.0 += x.abs();
        }
    }
    let mut total = (0.0, 0.0);
    for (w, warp) in acc[..lanes].chunks_exact(32).enumerate() {
        let mut a = [(0.0f64, 0.0f64); 32];
        a.copy_from_slice(warp);
        let mut o = 16;
        while o > 0 {
            for l in 0..o {
                a[l] = (a[l].0 + a[l + o].0, a[l].1 + a[l + o].1);
            }
            o /= 2;
        }
        total = if w == 0 {
            a[0]
        } else {
            (total.0 + a[0].0, total.1 + a[0].1)
        };
    }
    total
}

/// Levels of the lower triangle (sorted indices): one pass, no plan.
pub(super) fn lower_levels<T: Scalar>(a: &CsrMatrix<T>) -> usize {
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
