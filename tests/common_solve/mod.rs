//! What the solver-graph and fused-kernel tests share: the chain problem whose breakdown or
//! overflow happens only once the iteration reaches a given row, and the solve parameters.

use segsparse::solvers::SolveParams;
use segsparse::CsrMatrix;

/// A tridiagonal chain `tridiag(−1, 2, −1)` of `n` rows with `b = e₀`, so the Krylov vectors
/// reach row `k` only after about `k` operator applications, with one change at row `k`:
/// `diag` replaces its diagonal, `off` the coupling `(k, k+1)` and `(k+1, k)`. A negative
/// diagonal makes CG break down, a huge coupling overflows — both only once the iteration gets
/// there, so inside a replayed block.
pub fn chain(n: usize, k: usize, diag: f64, off: f64) -> (CsrMatrix<f64>, Vec<f64>) {
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, if i == k { diag } else { 2.0 }));
        if i + 1 < n {
            let v = if i == k { off } else { -1.0 };
            t.push((i, i + 1, v));
            t.push((i + 1, i, v));
        }
    }
    let mut b = vec![0.0; n];
    b[0] = 1.0;
    (CsrMatrix::from_triplets(n, n, &t).unwrap(), b)
}

pub fn params(check_every: usize, graphs: bool) -> SolveParams {
    SolveParams {
        rel_tol: 1e-10,
        max_iters: 3000,
        check_every: Some(check_every),
        graphs,
        ..Default::default()
    }
}
