// Dense reference loops index several arrays at once.
#![allow(clippy::needless_range_loop)]

use super::*;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random square matrix with a strong diagonal, `per_row` random off-diagonal entries per row
/// (some rows left empty apart from the diagonal when `empty` > 0: one row in `empty`).
pub(crate) fn random_matrix(n: usize, per_row: usize, empty: usize, seed: u64) -> CsrMatrix<f64> {
    let mut r = Rng(seed | 1);
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, 4.0 + r.unit() * per_row as f64));
        if empty > 0 && i % empty == 0 {
            continue;
        }
        for _ in 0..per_row {
            let j = r.below(n);
            if j != i {
                t.push((i, j, r.unit() - 0.5));
            }
        }
    }
    let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    a.sum_duplicates();
    a
}

/// Dense substitution on the triangle of `a`.
pub(crate) fn dense_solve(
    a: &CsrMatrix<f64>,
    tri: Triangle,
    diag: Diagonal,
    b: &[f64],
) -> Vec<f64> {
    let d = a.to_dense();
    let n = b.len();
    let mut x = vec![0.0; n];
    let rows: Vec<usize> = match tri {
        Triangle::Lower => (0..n).collect(),
        Triangle::Upper => (0..n).rev().collect(),
    };
    for i in rows {
        let mut s = b[i];
        for j in 0..n {
            let inside = match tri {
                Triangle::Lower => j < i,
                Triangle::Upper => j > i,
            };
            if inside {
                s -= d[i][j] * x[j];
            }
        }
        x[i] = if diag == Diagonal::Unit {
            s
        } else {
            s / d[i][i]
        };
    }
    x
}

pub(crate) fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "entry {i}: {x} vs {y}"
        );
    }
}

fn check_levels(plan: &TriangularPlan, a: &CsrMatrix<f64>) {
    let n = plan.n();
    let mut level = vec![usize::MAX; n];
    for l in 0..plan.levels() {
        for &r in &plan.order()[plan.level_ptr()[l] as usize..plan.level_ptr()[l + 1] as usize] {
            level[r as usize] = l;
        }
    }
    for i in 0..n {
        assert!(level[i] < plan.levels(), "row {i} has no level");
        for k in plan.start()[i]..plan.end()[i] {
            let j = a.col_idx()[k as usize] as usize;
            assert!(
                level[j] < level[i],
                "row {i} (level {}) reads row {j} (level {})",
                level[i],
                level[j]
            );
        }
    }
}

#[test]
fn random_triangular_solves_match_dense_substitution() {
    for (n, per_row, empty, seed) in [(1, 0, 0, 1), (17, 3, 4, 2), (64, 5, 0, 3), (200, 8, 7, 4)] {
        let a = random_matrix(n, per_row, empty, seed);
        let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64).collect();
        for tri in [Triangle::Lower, Triangle::Upper] {
            for diag in [Diagonal::Unit, Diagonal::NonUnit] {
                let plan = TriangularPlan::analyse(&a, tri, diag).unwrap();
                check_levels(&plan, &a);
                let mut x = vec![f64::NAN; n];
                plan.solve(&a, &b, &mut x).unwrap();
                close(&x, &dense_solve(&a, tri, diag, &b), 1e-12);
            }
        }
    }
}

#[test]
fn a_chain_has_one_level_per_row_and_a_diagonal_one_level() {
    let n = 50;
    let mut t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 2.0)).collect();
    let diag = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let p = TriangularPlan::analyse(&diag, Triangle::Lower, Diagonal::NonUnit).unwrap();
    assert_eq!(p.levels(), 1);
    assert_eq!(p.stats().max_width, n);
    t.extend((1..n).map(|i| (i, i - 1, -1.0)));
    let chain = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let p = TriangularPlan::analyse(&chain, Triangle::Lower, Diagonal::NonUnit).unwrap();
    assert_eq!(p.levels(), n);
    // The upper triangle of the chain is diagonal.
    let p = TriangularPlan::analyse(&chain, Triangle::Upper, Diagonal::NonUnit).unwrap();
    assert_eq!(p.levels(), 1);
    let b = vec![2.0; n];
    let mut x = vec![0.0; n];
    solve_triangular(&chain, Triangle::Lower, Diagonal::NonUnit, &b, &mut x).unwrap();
    close(
        &x,
        &dense_solve(&chain, Triangle::Lower, Diagonal::NonUnit, &b),
        1e-12,
    );
    let empty = CsrMatrix::<f64>::zeros(0, 0);
    let p = TriangularPlan::analyse(&empty, Triangle::Lower, Diagonal::Unit).unwrap();
    assert_eq!(p.levels(), 0);
}

#[test]
fn bad_structure_and_zero_diagonal_name_the_row() {
    let a =
        CsrMatrix::<f64>::from_triplets(3, 3, &[(0, 0, 1.0), (1, 0, 1.0), (2, 2, 1.0)]).unwrap();
    let e = TriangularPlan::analyse(&a, Triangle::Lower, Diagonal::NonUnit).unwrap_err();
    assert!(e.to_string().contains("row 1"), "{e}");
    // Unit diagonal: fine without it.
    assert!(TriangularPlan::analyse(&a, Triangle::Lower, Diagonal::Unit).is_ok());
    let z = CsrMatrix::<f64>::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 0.0)]).unwrap();
    let mut x = vec![0.0; 2];
    let e =
        solve_triangular(&z, Triangle::Upper, Diagonal::NonUnit, &[1.0, 1.0], &mut x).unwrap_err();
    assert!(e.to_string().contains("row 1"), "{e}");
    let rect = CsrMatrix::<f64>::zeros(2, 3);
    assert!(TriangularPlan::analyse(&rect, Triangle::Lower, Diagonal::Unit).is_err());
}

#[test]
fn level_groups_merge_narrow_levels() {
    // Widths 1, 1, 200, 2, 40 with 8 lanes: runs of ≤ 128 rows, wide blocks of 32 rows.
    let lp = [0u32, 1, 2, 202, 204, 244];
    let g = gpu_level_groups(&lp, 8, 1024, 256);
    let lg = |lo, hi, blocks, threads| LevelGroup {
        lo,
        hi,
        blocks,
        threads,
    };
    assert_eq!(g, vec![lg(0, 2, 1, 64), lg(2, 3, 7, 256), lg(3, 5, 1, 320)]);
    assert_eq!(SptrsvAlgorithm::Auto.choose(3), SptrsvAlgorithm::Levels);
    assert_eq!(
        SptrsvAlgorithm::Auto.choose(1000),
        SptrsvAlgorithm::SyncFree
    );
    assert_eq!(
        SptrsvAlgorithm::Levels.choose(1000),
        SptrsvAlgorithm::Levels
    );
}

#[test]
fn jacobi_sweeps_are_exact_beyond_the_level_count() {
    let a = random_matrix(120, 4, 5, 21);
    let b: Vec<f64> = (0..120).map(|i| 1.0 + (i % 4) as f64).collect();
    for tri in [Triangle::Lower, Triangle::Upper] {
        let plan = TriangularPlan::analyse(&a, tri, Diagonal::NonUnit).unwrap();
        let mut exact = vec![0.0; 120];
        plan.solve(&a, &b, &mut exact).unwrap();
        let mut x = vec![0.0; 120];
        plan.sweep_values(a.col_idx(), a.values(), &b, &mut x, plan.levels());
        close(&x, &exact, 1e-12);
        // Fewer sweeps: exact on the rows of lower levels only.
        plan.sweep_values(a.col_idx(), a.values(), &b, &mut x, 1);
        for &r in &plan.order()[..plan.level_ptr()[2] as usize] {
            let r = r as usize;
            assert!((x[r] - exact[r]).abs() <= 1e-12 * (1.0 + exact[r].abs()));
        }
    }
}
