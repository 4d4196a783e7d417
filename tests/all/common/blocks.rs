//! Block Galerkin fixtures: 3-D elasticity matrices in 3×3 node blocks and random block
//! prolongators, shared by the host (`amg`) and device (`sparse_gpu`) tests.

use rand::{Rng, SeedableRng};
use segsparse::CsrMatrix;

/// `(name, A, candidates per aggregate, thinned P)`: elasticity 6³ with whole 3×3 blocks and
/// with its rounding noise dropped (padded blocks); 6 and 2 candidates; `P` whole and thinned.
pub fn cases() -> Vec<(&'static str, CsrMatrix<f64>, usize, bool)> {
    let full: CsrMatrix<f64> = segsparse::generate::elasticity3d(6).unwrap();
    let (dropped, _) = segsparse::sparse::drop_small(&full, 1e-12)
        .unwrap()
        .unwrap();
    assert!(dropped.nnz() < full.nnz());
    vec![
        ("whole blocks", full, 6, false),
        ("dropped noise", dropped.clone(), 6, false),
        ("dropped noise, thinned P", dropped.clone(), 6, true),
        ("2 candidates", dropped, 2, false),
    ]
}

/// A random prolongator of `a` with `kc` candidates per aggregate of 5 nodes (3 rows each):
/// `A` times a random tentative operator, with a quarter of its entries dropped where `thin`.
pub fn prolongator(a: &CsrMatrix<f64>, kc: usize, thin: bool) -> CsrMatrix<f64> {
    let n = a.nrows();
    let nagg = (n / 3).div_ceil(5);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
    let mut t = Vec::new();
    for i in 0..n {
        for c in 0..kc {
            t.push((i, (i / 3 / 5) * kc + c, rng.gen_range(-1.0..1.0)));
        }
    }
    let tm = CsrMatrix::from_triplets(n, nagg * kc, &t).unwrap();
    let p = segsparse::sparse::spgemm(a, &tm).unwrap();
    if !thin {
        return p;
    }
    let mut kept = Vec::new();
    for i in 0..n {
        let (pc, pv) = p.row(i);
        for (j, v) in pc.iter().zip(pv) {
            if rng.gen_range(0..4) != 0 {
                kept.push((i, *j as usize, *v));
            }
        }
    }
    CsrMatrix::from_triplets(n, nagg * kc, &kept).unwrap()
}
