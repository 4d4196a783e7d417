//! Shared by the distributed tests (`dist_sim`, `dist_gpu`).

use segsparse::CsrMatrix;

/// A convection–diffusion operator on an `m × m` grid: unsymmetric, diagonally dominant.
pub fn convection(m: usize, c: f64) -> CsrMatrix<f64> {
    let mut t = Vec::new();
    for y in 0..m {
        for x in 0..m {
            let i = y * m + x;
            t.push((i, i, 4.0));
            if x > 0 {
                t.push((i, i - 1, -1.0 - c));
            }
            if x + 1 < m {
                t.push((i, i + 1, -1.0 + c));
            }
            if y > 0 {
                t.push((i, i - m, -1.0 - c / 2.0));
            }
            if y + 1 < m {
                t.push((i, i + m, -1.0 + c / 2.0));
            }
        }
    }
    CsrMatrix::from_triplets(m * m, m * m, &t).unwrap()
}
