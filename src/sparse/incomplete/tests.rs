// Dense reference loops index several arrays at once.
#![allow(clippy::needless_range_loop)]

use super::*;
use crate::sparse::triangular::tests::{close, dense_solve, random_matrix};
use crate::sparse::triangular::{Diagonal, Triangle};

/// (L·U)[i][j] (ILU) or (L·Lᵀ)[i][j] (IC) from a factor, densely.
fn product(f: &IncompleteFactor<f64>) -> Vec<Vec<f64>> {
    let l = f.lower_matrix().to_dense();
    let u = f.upper_matrix().to_dense();
    let n = l.len();
    let mut p = vec![vec![0.0; n]; n];
    for i in 0..n {
        for k in 0..n {
            if l[i][k] != 0.0 {
                for j in 0..n {
                    p[i][j] += l[i][k] * u[k][j];
                }
            }
        }
    }
    p
}

#[test]
fn ilu0_product_equals_a_on_its_pattern() {
    for (n, per_row, seed) in [(1, 0, 5), (30, 4, 6), (80, 6, 7)] {
        let a = random_matrix(n, per_row, 5, seed);
        let f = IncompleteFactor::new(&a, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
        let p = product(&f);
        for i in 0..n {
            let (c, v) = a.row(i);
            for (&j, &aij) in c.iter().zip(v) {
                let pij = p[i][j as usize];
                assert!(
                    (pij - aij).abs() <= 1e-12 * (1.0 + aij.abs()),
                    "({i},{j}): {pij} vs {aij}"
                );
            }
        }
        // Apply = U⁻¹L⁻¹ r: M·z = r.
        let r: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        let (mut t, mut z) = (vec![0.0; n], vec![0.0; n]);
        f.lower_solve(&r, &mut t);
        f.upper_solve(&t, &mut z);
        let mz: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| p[i][j] * z[j]).sum())
            .collect();
        close(&mz, &r, 1e-10);
    }
}

fn spd(n: usize, seed: u64) -> CsrMatrix<f64> {
    // A + Aᵀ of a random matrix with a dominant diagonal.
    let a = random_matrix(n, 3, 0, seed);
    let at = a.transpose();
    crate::sparse::add(&a, 1.0, &at).unwrap()
}

#[test]
fn ic0_product_equals_a_on_its_lower_pattern() {
    for (n, seed) in [(1, 8), (40, 9), (90, 10)] {
        let a = spd(n, seed);
        let f = IncompleteFactor::new(&a, FactorKind::Ic0, &IncompleteParams::default()).unwrap();
        let p = product(&f);
        for i in 0..n {
            let (c, v) = a.row(i);
            for (&j, &aij) in c.iter().zip(v) {
                if (j as usize) <= i {
                    let pij = p[i][j as usize];
                    assert!(
                        (pij - aij).abs() <= 1e-12 * (1.0 + aij.abs()),
                        "({i},{j}): {pij} vs {aij}"
                    );
                }
            }
        }
        // On a tridiagonal matrix IC(0) is the exact Cholesky factor.
    }
    let t = crate::generate::poisson2d::<f64>(1).unwrap();
    assert!(IncompleteFactor::new(&t, FactorKind::Ic0, &IncompleteParams::default()).is_ok());
}

#[test]
fn zero_pivot_names_the_row_and_a_shift_cures_it() {
    // [[1, 1, 0], [1, 1, 0], [0, 0, 1]]: u_11 = 1 − 1·1 = 0.
    let a = CsrMatrix::<f64>::from_triplets(
        3,
        3,
        &[
            (0, 0, 1.0),
            (0, 1, 1.0),
            (1, 0, 1.0),
            (1, 1, 1.0),
            (2, 2, 1.0),
        ],
    )
    .unwrap();
    for kind in [FactorKind::Ilu0, FactorKind::Ic0] {
        let e = IncompleteFactor::new(&a, kind, &IncompleteParams::default()).unwrap_err();
        assert!(e.to_string().contains("row 1"), "{e}");
        let shifted = IncompleteParams {
            shift: 0.1,
            ..Default::default()
        };
        assert!(IncompleteFactor::new(&a, kind, &shifted).is_ok());
    }
    // A structurally missing diagonal (here a structurally singular matrix: column 1 is empty)
    // is named at analysis without a row matching; with the default matching the entry is
    // inserted, and the factor says so.
    let m = CsrMatrix::<f64>::from_triplets(2, 2, &[(0, 0, 1.0), (1, 0, 1.0)]).unwrap();
    let off = IncompleteParams {
        matching: RowMatching::Off,
        ..Default::default()
    };
    let e = IncompleteFactor::new(&m, FactorKind::Ilu0, &off).unwrap_err();
    assert!(e.to_string().contains("row 1"), "{e}");
    let f = IncompleteFactor::new(&m, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
    assert_eq!(f.structure().preprocessing.inserted_diagonals, 1);
}

#[test]
fn refactor_with_new_values_equals_a_fresh_factor() {
    let a = random_matrix(60, 4, 0, 11);
    let mut f = IncompleteFactor::new(&a, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
    let mut a2 = a.clone();
    for (k, v) in a2.values_mut().iter_mut().enumerate() {
        *v *= 1.0 + 0.1 * ((k % 5) as f64);
    }
    f.refactor(&a2).unwrap();
    let g = IncompleteFactor::new(&a2, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
    assert_eq!(f.values(), g.values());
    let other = random_matrix(60, 4, 0, 12);
    assert!(f.refactor(&other).is_err());
}

#[test]
fn corpus_factors_solve_like_dense_substitution() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("matrices");
    for (name, kind) in [
        ("nos4", FactorKind::Ic0),
        ("nos4", FactorKind::Ilu0),
        ("gr_30_30", FactorKind::Ilu0),
    ] {
        let p = dir.join(format!("{name}.mtx.gz"));
        if !p.exists() {
            continue;
        }
        let a: CsrMatrix<f64> = crate::io::read_matrix_market(&p).unwrap();
        let f = IncompleteFactor::new(&a, kind, &IncompleteParams::default()).unwrap();
        let n = a.nrows();
        let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 3) as f64).collect();
        let l = f.lower_matrix();
        let u = f.upper_matrix();
        let mut x = vec![0.0; n];
        f.lower_solve(&b, &mut x);
        let ld = if kind == FactorKind::Ilu0 {
            Diagonal::Unit
        } else {
            Diagonal::NonUnit
        };
        close(&x, &dense_solve(&l, Triangle::Lower, ld, &b), 1e-10);
        f.upper_solve(&b, &mut x);
        close(
            &x,
            &dense_solve(&u, Triangle::Upper, Diagonal::NonUnit, &b),
            1e-10,
        );
    }
}

#[test]
fn pattern_norms_equal_the_plans_and_the_device_structure_keeps_the_pattern() {
    // ILU and IC, natural order and a matched ILUT (a zero diagonal forces the scaled matching).
    let mut zero_diag = random_matrix(60, 4, 5, 21);
    for i in 0..60 {
        let lo = zero_diag.row_ptr()[i] as usize;
        let (c, _) = zero_diag.row(i);
        if let Ok(k) = c.binary_search(&(i as u32)) {
            if i % 20 == 3 {
                zero_diag.values_mut()[lo + k] = 0.0;
            }
        }
    }
    let cases = [
        (random_matrix(80, 6, 5, 9), FactorKind::Ilu0),
        (zero_diag, FactorKind::Ilu0),
        (spd(70, 11), FactorKind::Ic0),
    ];
    for (a, kind) in cases {
        let params = IncompleteParams {
            auto_shift: true,
            ..IncompleteParams::default()
        };
        let f =
            IncompleteFactor::new(&a, kind, &params).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let s = f.structure();
        let (l, u) = (s.lower.as_ref().unwrap(), s.upper.as_ref().unwrap());
        let (ln, un) = triangle_norms(s, f.values(), &f.t_values);
        let ucol = match &s.transpose {
            Some((_, tcol, _)) => &tcol[..],
            None => &s.col_idx[..],
        };
        let uval = match &s.transpose {
            Some(_) => &f.t_values[..],
            None => f.values(),
        };
        assert_eq!(ln, strict_norm(l, &s.col_idx, f.values()), "{kind:?} lower");
        assert_eq!(un, strict_norm(u, ucol, uval), "{kind:?} upper");
        assert!(ln > 0.0 && un > 0.0, "{kind:?}: {ln} {un}");
        // The modes from the pattern's norms equal the plan-based choice.
        assert_eq!(
            (f.modes().lower_sweeps, f.modes().upper_sweeps),
            (
                choose_sweeps(l, &s.col_idx, f.values()).0,
                choose_sweeps(u, ucol, uval).0
            )
        );
        // Same parameters as the factor used (its fallbacks may have changed them).
        let p = IncompleteParams {
            shift: f.shift_used(),
            auto_shift: false,
            ..*f.params()
        };
        let host = IncompleteStructure::analyse_with(&a, kind, &p).unwrap();
        let dev = IncompleteStructure::analyse_for_device(&a, kind, &p).unwrap();
        assert!(dev.lower.is_none() && dev.upper.is_none());
        assert_eq!(dev.row_ptr, host.row_ptr);
        assert_eq!(dev.col_idx, host.col_idx);
        assert_eq!(dev.src, host.src);
        assert_eq!(dev.diag_pos, host.diag_pos);
        assert_eq!(dev.transpose, host.transpose);
        assert_eq!(dev.perm_in, host.perm_in);
        assert_eq!(dev.perm_out, host.perm_out);
    }
    // The pattern check names the first row without a diagonal entry, for both analyses.
    let b =
        CsrMatrix::try_from_parts(3, 3, vec![0, 1, 3, 4], vec![0, 0, 1, 1], vec![1.0; 4]).unwrap();
    let off = IncompleteParams {
        matching: RowMatching::Off,
        ..IncompleteParams::default()
    };
    for e in [
        IncompleteStructure::analyse_with(&b, FactorKind::Ilu0, &off).unwrap_err(),
        IncompleteStructure::analyse_for_device(&b, FactorKind::Ilu0, &off).unwrap_err(),
    ] {
        let m = e.to_string();
        assert!(m.contains("row 2 has no diagonal entry"), "{m}");
    }
}

/// The device factorization's host side for a complex factor: the pivot reported in an error
/// is the modulus (the value of a real one), and the row scales of the pivot test, uploaded as
/// `f64`, are the rows' largest moduli before the shift.
#[test]
fn complex_pivot_report_and_row_scales() {
    use num_complex::Complex;
    assert_eq!(reported(Complex::new(3.0f64, -4.0)), 5.0);
    assert_eq!(reported(Complex::new(-2.0f32, 0.0)), 2.0);
    assert_eq!(reported(-2.0f64), -2.0);
    let c = |re: f64, im: f64| Complex::new(re, im);
    let a = CsrMatrix::from_triplets(
        2,
        2,
        &[
            (0, 0, c(1.0, 1.0)),
            (0, 1, c(3.0, 4.0)),
            (1, 0, c(0.0, -2.0)),
            (1, 1, c(0.0, 1.0)),
        ],
    )
    .unwrap();
    let s =
        IncompleteStructure::analyse_for_device(&a, FactorKind::Ilu0, &IncompleteParams::default())
            .unwrap();
    let (v, rowmax) = s.initial_values(&a, 0.5);
    assert_eq!(rowmax, vec![5.0, 2.0]);
    // The shift moves each diagonal along its own direction by shift × the row's scale.
    let d1 = v[s.diag_pos[1] as usize];
    assert!((d1 - c(0.0, 2.0)).norm() < 1e-15, "{d1}");
}
