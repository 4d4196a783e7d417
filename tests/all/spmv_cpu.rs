//! CPU SpMV against a dense reference (proptest), the versions against each other, against sprs
//! on raefsky2, and the β = 0 / α = 0 / length-mismatch contracts.

use std::path::PathBuf;

use proptest::prelude::*;
use segsparse::spmv::{cpu, spmv};
use segsparse::{CsrMatrix, Scalar};

type Kernel<T> = fn(T, &CsrMatrix<T>, &[T], T, &mut [T]);

fn kernels<T: Scalar>() -> Vec<(&'static str, Kernel<T>)> {
    vec![
        ("spmv", spmv::<T> as Kernel<T>),
        ("spmv_seq", cpu::spmv_seq::<T>),
        ("spmv_par", cpu::spmv_par::<T>),
        ("spmv_segscan", cpu::spmv_segscan::<T>),
        ("spmv_chunked(3)", |a, m, x, b, y| {
            cpu::spmv_chunked(a, m, x, b, y, 3)
        }),
        ("spmv_chunked(64)", |a, m, x, b, y| {
            cpu::spmv_chunked(a, m, x, b, y, 64)
        }),
    ]
}

/// A small random matrix as (nrows, ncols, triplets), duplicates and empty rows included.
fn small_matrix() -> impl Strategy<Value = (usize, usize, Vec<(usize, usize, f64)>)> {
    (0usize..24, 1usize..24).prop_flat_map(|(nr, nc)| {
        let entries = if nr == 0 {
            Just(Vec::new()).boxed()
        } else {
            prop::collection::vec((0..nr, 0..nc, -4.0f64..4.0), 0..(nr * nc / 2 + 2)).boxed()
        };
        (Just(nr), Just(nc), entries)
    })
}

fn scalar() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), Just(-1.0), -3.0f64..3.0]
}

/// Checks every kernel against a dense f64 product of the same `T`-rounded inputs, with a bound
/// of a few ulps of `T` per term: |y − ref| ≤ 4·(len + 2)·ε·(|α|·Σ|a·x| + |β·y0|).
fn check_dense<T: Scalar>(
    nr: usize,
    nc: usize,
    trip: &[(usize, usize, f64)],
    alpha: f64,
    beta: f64,
    seed: u64,
) -> Result<(), TestCaseError> {
    let trip_t: Vec<(usize, usize, T)> =
        trip.iter().map(|&(r, c, v)| (r, c, T::of_f64(v))).collect();
    let a = CsrMatrix::from_triplets(nr, nc, &trip_t).unwrap();
    let dense = a.to_dense();
    let x: Vec<T> = (0..nc)
        .map(|j| T::of_f64(((j as u64 * 7919 + seed) % 13) as f64 / 3.0 - 2.0))
        .collect();
    let y0: Vec<T> = (0..nr)
        .map(|i| T::of_f64(((i as u64 * 104729 + seed) % 11) as f64 / 2.0 - 2.5))
        .collect();
    let (at, bt) = (T::of_f64(alpha), T::of_f64(beta));
    for (name, k) in kernels::<T>() {
        let mut y = if beta == 0.0 {
            vec![T::nan(); nr] // β = 0 must not read y
        } else {
            y0.clone()
        };
        k(at, &a, &x, bt, &mut y);
        for i in 0..nr {
            let (mut s, mut mag) = (0f64, 0f64);
            for j in 0..nc {
                let t = dense[i][j].as_f64() * x[j].as_f64();
                s += t;
                mag += t.abs();
            }
            let a64 = at.as_f64();
            let b64 = bt.as_f64();
            let yb = if beta == 0.0 {
                0.0
            } else {
                b64 * y0[i].as_f64()
            };
            let want = a64 * s + yb;
            let tol = 4.0 * (a.row(i).0.len() as f64 + 2.0) * T::EPS * (a64.abs() * mag + yb.abs())
                + f64::MIN_POSITIVE;
            let got = y[i].as_f64();
            prop_assert!(
                (got - want).abs() <= tol,
                "{name} {}: row {i}: got {got}, want {want} (tol {tol}), α={alpha} β={beta}",
                T::NAME
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn matches_dense_reference_f64((nr, nc, trip) in small_matrix(), alpha in scalar(), beta in scalar(), seed in 0u64..1000) {
        check_dense::<f64>(nr, nc, &trip, alpha, beta, seed)?;
    }

    #[test]
    fn matches_dense_reference_f32((nr, nc, trip) in small_matrix(), alpha in scalar(), beta in scalar(), seed in 0u64..1000) {
        check_dense::<f32>(nr, nc, &trip, alpha, beta, seed)?;
    }
}

fn random_x(n: usize, seed: u64) -> Vec<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

/// seq, par (every chunk count), segscan and the f64 reference agree on matrices large enough to
/// take the parallel path, including a power-law one whose longest rows hold much of the work.
#[test]
fn versions_agree_on_generated_matrices() {
    for spec in ["random:5000:9", "powerlaw:20000:1.7", "poisson2d:120"] {
        let a: CsrMatrix<f64> = segsparse::generate::from_spec(spec, 11).unwrap();
        assert!(
            a.nnz() + a.nrows() > 40_000,
            "{spec} must exceed the sequential cutoff"
        );
        let x = random_x(a.ncols(), 5);
        let reference = cpu::spmv_f64_reference(&a, &x);
        let mut seq = vec![f64::NAN; a.nrows()];
        cpu::spmv_seq(1.0, &a, &x, 0.0, &mut seq);
        assert_eq!(seq, reference, "{spec}: seq is the f64 reference for f64");
        let mut par = vec![f64::NAN; a.nrows()];
        cpu::spmv_par(1.0, &a, &x, 0.0, &mut par);
        for chunks in [1, 2, 3, 8, 1000, 1_000_000] {
            let mut y = vec![f64::NAN; a.nrows()];
            cpu::spmv_chunked(1.0, &a, &x, 0.0, &mut y, chunks);
            // Rows are never split, so the result does not depend on the chunking.
            assert_eq!(y, par, "{spec}: chunks = {chunks}");
        }
        let mut seg = vec![f64::NAN; a.nrows()];
        cpu::spmv_segscan(1.0, &a, &x, 0.0, &mut seg);
        let e_par = cpu::max_rel_err(&par, &reference);
        let e_seg = cpu::max_rel_err(&seg, &reference);
        assert!(e_par < 1e-13 && e_seg < 1e-13, "{spec}: {e_par} {e_seg}");

        let a32: CsrMatrix<f32> = a.cast();
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let r32 = cpu::spmv_f64_reference(&a32, &x32);
        for (name, k) in kernels::<f32>() {
            let mut y = vec![f32::NAN; a.nrows()];
            k(1.0, &a32, &x32, 0.0, &mut y);
            let e = cpu::max_rel_err(&y, &r32);
            assert!(e < 1e-5, "{spec} f32 {name}: {e}");
        }
    }
}

/// The split gives each chunk about the same entries + rows, even for a power-law matrix.
#[test]
fn chunks_are_balanced_by_nonzeros() {
    let a: CsrMatrix<f64> = segsparse::generate::from_spec("powerlaw:50000:1.6", 3).unwrap();
    let rp = a.row_ptr();
    let parts = 16;
    let s = cpu::balanced_row_splits(rp, parts);
    let total = (a.nnz() + a.nrows()) as f64;
    let longest = a.row_stats().max as f64;
    for w in s.windows(2) {
        let cost = (rp[w[1]] - rp[w[0]]) as f64 + (w[1] - w[0]) as f64;
        // A chunk may exceed its share by at most one row.
        assert!(cost <= total / parts as f64 + longest + 1.0, "{s:?}");
    }
}

fn find_matrix(file: &str) -> PathBuf {
    let mut candidates = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("matrices")
        .join(file)];
    candidates.push(PathBuf::from("matrices").join(file));
    if let Ok(d) = std::env::var("SEGSPARSE_DATA") {
        candidates.push(PathBuf::from(d).join(file));
    }
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| {
            panic!("{file} not found in {candidates:?} (it is committed under matrices/)")
        })
}

/// On the paper's matrix: every version against sprs's product, both precisions, and the f64
/// error bound `spmv-bench` promises (< 1e-12).
#[test]
fn raefsky2_against_sprs() {
    let path = find_matrix("raefsky2.mtx.gz");
    let a: CsrMatrix<f64> = segsparse::io::read_matrix_market(&path).unwrap();
    assert_eq!((a.nrows(), a.ncols(), a.nnz()), (3242, 3242, 294_276));
    let x = random_x(a.ncols(), 1);
    let s = a.to_sprs();
    let mut ys = vec![0.0; a.nrows()];
    sprs::prod::mul_acc_mat_vec_csr(s.view(), &x[..], &mut ys[..]);
    let reference = cpu::spmv_f64_reference(&a, &x);
    assert!(cpu::max_rel_err(&ys, &reference) < 1e-14);
    for (name, k) in kernels::<f64>() {
        let mut y = vec![f64::NAN; a.nrows()];
        k(1.0, &a, &x, 0.0, &mut y);
        let e = cpu::max_rel_err(&y, &ys);
        assert!(e < 1e-12, "{name}: error {e} against sprs");
    }

    let a32: CsrMatrix<f32> = a.cast();
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let s32 = a32.to_sprs();
    let mut ys32 = vec![0f32; a.nrows()];
    sprs::prod::mul_acc_mat_vec_csr(s32.view(), &x32[..], &mut ys32[..]);
    let r32 = cpu::spmv_f64_reference(&a32, &x32);
    assert!(cpu::max_rel_err(&ys32, &r32) < 1e-5);
    for (name, k) in kernels::<f32>() {
        let mut y = vec![f32::NAN; a.nrows()];
        k(1.0, &a32, &x32, 0.0, &mut y);
        let e = cpu::max_rel_err(&y, &r32);
        assert!(e < 1e-5, "{name} f32: error {e}");
    }
}

/// β = 0 never reads y (NaN stays out); α = 0 never reads A or x (NaN there stays out).
#[test]
fn beta_zero_ignores_nan_in_y_and_alpha_zero_ignores_a() {
    let a = CsrMatrix::from_triplets(
        4,
        3,
        &[(0, 0, 1.0), (0, 2, 2.0), (2, 1, f64::NAN), (3, 0, 3.0)],
    )
    .unwrap();
    let x = [1.0, 2.0, 3.0];
    for (name, k) in kernels::<f64>() {
        let mut y = [f64::NAN, f64::INFINITY, f64::NAN, f64::NAN];
        k(2.0, &a, &x, 0.0, &mut y);
        assert_eq!(y[0], 14.0, "{name}");
        assert_eq!(y[1], 0.0, "{name}: empty row with β = 0 is 0");
        assert!(y[2].is_nan(), "{name}: the NaN entry of A propagates");
        assert_eq!(y[3], 6.0, "{name}");

        let mut y = [1.0, 2.0, 3.0, 4.0];
        k(0.0, &a, &[f64::NAN; 3], 0.5, &mut y);
        assert_eq!(y, [0.5, 1.0, 1.5, 2.0], "{name}: α = 0");
        let mut y = [f64::NAN; 4];
        k(0.0, &a, &x, 0.0, &mut y);
        assert_eq!(y, [0.0; 4], "{name}: α = β = 0");
    }
}

#[test]
fn length_mismatch_panics_with_both_sizes() {
    let a = CsrMatrix::<f64>::identity(3);
    for (name, k) in kernels::<f64>() {
        let r = std::panic::catch_unwind(|| {
            let mut y = [0.0; 2];
            k(1.0, &a, &[0.0; 3], 0.0, &mut y);
        });
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("y has length 2 but A has 3 rows"),
            "{name}: {msg}"
        );
        let r = std::panic::catch_unwind(|| {
            let mut y = [0.0; 3];
            k(1.0, &a, &[0.0; 4], 0.0, &mut y);
        });
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("x has length 4 but A has 3 columns"),
            "{name}: {msg}"
        );
    }
}

/// The generator kinds added for the large SpMV set: a few dense rows among short ones, and
/// short-and-wide. Shapes, counts, where the dense rows are, and that the CPU versions agree on
/// them.
#[test]
fn dense_rows_and_wide_generators() {
    use segsparse::generate;
    let a: CsrMatrix<f64> = generate::from_spec("denserows:10000:4:5:3000", 3).unwrap();
    assert_eq!((a.nrows(), a.ncols()), (10_000, 10_000));
    assert_eq!(a.nnz(), (10_000 - 5) * 4 + 5 * 3000);
    let long: Vec<usize> = (0..a.nrows())
        .filter(|&i| a.row(i).0.len() == 3000)
        .collect();
    assert_eq!(long, vec![1000, 3000, 5000, 7000, 9000]);
    assert_eq!(a, generate::denserows(10_000, 4, 5, 3000, 3).unwrap());
    assert_ne!(a, generate::denserows(10_000, 4, 5, 3000, 4).unwrap());
    let none: CsrMatrix<f32> = generate::from_spec("denserows:100:2:0:50", 1).unwrap();
    assert_eq!(none.nnz(), 200);
    assert!(generate::from_spec::<f64>("denserows:100:2:3", 1).is_err());
    assert!(generate::from_spec::<f64>("denserows:100:2:3:101", 1).is_err());

    let w: CsrMatrix<f64> = generate::from_spec("wide:300:100000:25", 9).unwrap();
    assert_eq!((w.nrows(), w.ncols(), w.nnz()), (300, 100_000, 7_500));
    assert!(
        w.col_idx().iter().any(|&c| c >= 50_000),
        "columns span the width"
    );
    assert!(generate::from_spec::<f64>("wide:3:10:11", 1).is_err());
    assert!(generate::is_spec("wide:3:10:2") && generate::is_spec("denserows:5:1:1:1"));

    for m in [&a, &w] {
        let x = random_x(m.ncols(), 5);
        let mut y = vec![0.0; m.nrows()];
        spmv(1.0, m, &x, 0.0, &mut y);
        let r = cpu::spmv_f64_reference(m, &x);
        assert!(cpu::max_rel_err(&y, &r) < 1e-13);
    }
}
