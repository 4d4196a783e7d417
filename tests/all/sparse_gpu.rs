//! GPU sparse operations (`segsparse::sparse::gpu`) against the CPU ones (`segsparse::sparse`,
//! themselves checked against sprs): SpGEMM on random, rectangular, empty-row/column, bin-boundary
//! and real matrices (matrices/ and the corpus in `SEGSPARSE_DATA`), equal **bit for bit** (same
//! pattern, same values: the GPU adds in the CPU's order without FMA contraction); the numeric
//! re-run on new values; Galerkin; transpose; diagonal and scaling; cuSPARSE SpGEMM on the same
//! products; a product turned into a `GpuCsr` multiplies vectors like an uploaded one.
//!
//! Skips with a notice without a GPU; fails instead when `SEGSPARSE_REQUIRE_GPU=1`.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::csr::CsrMatrix;
use segsparse::gpu::{self, Gpu};
use segsparse::sparse;
#[cfg(feature = "peers")]
use segsparse::sparse::gpu::CusparseSpgemm;
use segsparse::sparse::gpu::{self as sg, DeviceCsr, GpuSpgemmPlan};
use segsparse::spmv::gpu::{GpuCsr, GpuScalar};

fn random(m: usize, n: usize, per_row: usize, seed: u64) -> CsrMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    if n > 0 {
        for i in 0..m {
            if rng.gen_range(0..7) == 0 {
                continue; // empty rows
            }
            for _ in 0..rng.gen_range(0..=per_row) {
                t.push((i, rng.gen_range(0..n), rng.gen_range(-1.0..1.0)));
            }
        }
    }
    CsrMatrix::from_triplets(m, n, &t).unwrap()
}

/// A product `A·B` on the GPU equals the CPU's exactly (pattern and values).
fn check_product<T: GpuScalar + Bits>(
    g: &Arc<Gpu>,
    a: &CsrMatrix<T>,
    b: &CsrMatrix<T>,
    what: &str,
) {
    let want = sparse::spgemm(a, b).unwrap();
    let (da, db) = (
        DeviceCsr::upload(g, a).unwrap(),
        DeviceCsr::upload(g, b).unwrap(),
    );
    let got = sg::spgemm(g, &da, &db).unwrap().download(g).unwrap();
    assert_eq!(
        (got.nrows(), got.ncols(), got.nnz()),
        (want.nrows(), want.ncols(), want.nnz()),
        "{what} ({}): shape/nnz",
        T::NAME
    );
    assert_eq!(got.row_ptr(), want.row_ptr(), "{what}: row_ptr");
    assert_eq!(got.col_idx(), want.col_idx(), "{what}: columns");
    for (k, (x, y)) in got.values().iter().zip(want.values()).enumerate() {
        assert!(
            (*x).to_bits_u64() == (*y).to_bits_u64(),
            "{what} ({}): value {k}: GPU {x:?} vs CPU {y:?}",
            T::NAME
        );
    }
}

trait Bits {
    fn to_bits_u64(self) -> u64;
}
impl Bits for f32 {
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f64 {
    fn to_bits_u64(self) -> u64 {
        self.to_bits()
    }
}

fn both<F: Fn(&CsrMatrix<f64>, &CsrMatrix<f64>)>(a: &CsrMatrix<f64>, b: &CsrMatrix<f64>, f: F) {
    f(a, b)
}

fn check_both(g: &Arc<Gpu>, a: &CsrMatrix<f64>, b: &CsrMatrix<f64>, what: &str) {
    both(a, b, |a, b| {
        check_product::<f64>(g, a, b, what);
        check_product::<f32>(g, &a.cast::<f32>(), &b.cast::<f32>(), what);
    });
}

#[test]
fn spgemm_random_rectangular_and_empty() {
    let Some(g) = gpu::test_gpu() else { return };
    for (m, k, n, per, seed) in [
        (0, 3, 4, 3, 1),
        (5, 0, 3, 3, 2),
        (4, 6, 0, 3, 3),
        (1, 1, 1, 1, 4),
        (37, 41, 29, 6, 5),
        (600, 300, 700, 5, 6),
        (3000, 2000, 2500, 9, 7),
        (20000, 20000, 20000, 4, 8),
        (500, 40, 30, 12, 9), // many collisions: few columns
    ] {
        let a = random(m, k, per, seed);
        let b = random(k, n, per, seed + 100);
        check_both(&g, &a, &b, &format!("random {m}×{k}·{k}×{n}"));
    }
}

/// Rows whose product counts sit on each side of every bin limit (32, 64, 256, 1024, 4096) and
/// far beyond (the global-table bin), with duplicate product columns.
#[test]
fn spgemm_bin_boundaries_and_long_rows() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 30000;
    // B: row k has (k % 97) + 1 entries at random columns.
    let mut tb = Vec::new();
    for k in 0..n {
        for _ in 0..(k % 97) + 1 {
            tb.push((k, rng.gen_range(0..n), rng.gen_range(-1.0..1.0)));
        }
    }
    let b = CsrMatrix::from_triplets(n, n, &tb).unwrap();
    let lens: Vec<usize> = (0..b.nrows())
        .map(|k| (b.row_ptr()[k + 1] - b.row_ptr()[k]) as usize)
        .collect();
    // A: for each target product count, a row reaching it with rows of B chosen greedily.
    let targets = [
        1usize, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 20000,
        90000,
    ];
    let mut ta = Vec::new();
    for (i, &t) in targets.iter().enumerate() {
        let mut left = t;
        let mut k = 0usize;
        while left > 0 {
            if lens[k] <= left && lens[k] > 0 {
                ta.push((i, k, rng.gen_range(-1.0..1.0)));
                left -= lens[k];
            }
            k += 1;
        }
    }
    let a = CsrMatrix::from_triplets(targets.len(), n, &ta).unwrap();
    check_both(&g, &a, &b, "bin boundaries");
    // Dense-ish rows: every product in one column band (many duplicates in the hash).
    let mut tb2 = Vec::new();
    for k in 0..2000 {
        for j in 0..50 {
            tb2.push((k, (k * 7 + j) % 300, 1.0 + j as f64));
        }
    }
    let b2 = CsrMatrix::from_triplets(2000, 300, &tb2).unwrap();
    let a2 = random(64, 2000, 1500, 12);
    check_both(&g, &a2, &b2, "long rows into few columns");
    // The two-pass symbolic phase (count, then fill in place), taken above 2^30 products.
    sg::set_one_pass_limit_for_tests(0);
    check_both(&g, &a, &b, "bin boundaries, two passes");
    check_both(&g, &a2, &b2, "long rows, two passes");
    let s: CsrMatrix<f64> = segsparse::generate::from_spec("poisson3d:12", 0).unwrap();
    check_both(&g, &s, &s, "poisson3d:12, two passes");
    sg::set_one_pass_limit_for_tests(1 << 30);
}

/// Rows that touch every column of `C` (a dense row of `B` reached from every row of `A`, as a
/// dense row and a dense column of a square `A` give in `A·A`), with `B` narrow enough for the
/// bitmap symbolic kernel and wider than it (hash tables in global memory); C's rows are then
/// split into segments whose columns are contiguous (the numeric phase's dense windows).
#[test]
fn spgemm_dense_rows_and_columns() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    // Square: row 0 and column 0 dense, three random entries elsewhere in each row.
    let n = 3000;
    let mut t = Vec::new();
    for j in 0..n {
        t.push((0, j, rng.gen_range(-1.0..1.0)));
    }
    for i in 1..n {
        t.push((i, 0, rng.gen_range(-1.0..1.0)));
        for _ in 0..3 {
            t.push((i, rng.gen_range(1..n), rng.gen_range(-1.0..1.0)));
        }
    }
    let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let want = sparse::spgemm(&a, &a).unwrap();
    assert!(
        (0..n).all(|i| want.row_ptr()[i + 1] - want.row_ptr()[i] == n as u32),
        "every row of A·A touches every column"
    );
    check_both(&g, &a, &a, "dense row and column, A·A");
    check_both(&g, &a, &a.transpose(), "dense row and column, A·Aᵀ");
    // Wide: B's row 0 holds all 70000 columns, every row of A reaches it.
    let (k, w) = (2000, 70000);
    let mut tb = Vec::new();
    for j in 0..w {
        tb.push((0, j, rng.gen_range(-1.0..1.0)));
    }
    for r in 1..k {
        for _ in 0..30 {
            tb.push((r, rng.gen_range(0..w), rng.gen_range(-1.0..1.0)));
        }
    }
    let b = CsrMatrix::from_triplets(k, w, &tb).unwrap();
    let mut ta = Vec::new();
    for i in 0..40 {
        ta.push((i, 0, rng.gen_range(-1.0..1.0)));
        for _ in 0..20 {
            ta.push((i, rng.gen_range(1..k), rng.gen_range(-1.0..1.0)));
        }
    }
    let a = CsrMatrix::from_triplets(40, k, &ta).unwrap();
    check_both(&g, &a, &b, "rows touching all 70000 columns");
    // Long rows into many columns (block bins, hash tables: B wider than the bitmap).
    let b = random(2000, 200_000, 150, 32);
    let a = random(60, 2000, 80, 33);
    check_both(&g, &a, &b, "long rows, 200000 columns");
}

#[test]
fn spgemm_stencils_and_real_matrices() {
    let Some(g) = gpu::test_gpu() else { return };
    for spec in ["poisson2d:60", "poisson3d:18", "tridiag:1000"] {
        let a: CsrMatrix<f64> = segsparse::generate::from_spec(spec, 0).unwrap();
        check_both(&g, &a, &a, spec);
    }
    let mut files = mtx_files(&matrices_dir());
    match std::env::var("SEGSPARSE_DATA") {
        Ok(d) => files.extend(mtx_files(std::path::Path::new(&d))),
        Err(_) => eprintln!("SEGSPARSE_DATA not set: corpus matrices skipped"),
    }
    let mut checked = 0;
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        match segsparse::load::<f64>(&f.to_string_lossy(), 0) {
            Ok(a) => {
                if a.nrows() == a.ncols() {
                    check_both(&g, &a, &a, &name);
                }
                let at = a.transpose();
                check_both(&g, &a, &at, &format!("{name}·Aᵀ"));
                checked += 1;
            }
            Err(e) => eprintln!("skipped {name}: {e}"),
        }
    }
    eprintln!("checked {checked} of {} matrix files", files.len());
    assert!(checked > 0, "no real matrix checked");
}

#[test]
fn numeric_rerun_galerkin_and_cusparse() {
    let Some(g) = gpu::test_gpu() else { return };
    let a = random(3000, 2500, 8, 21);
    let b = random(2500, 2700, 5, 22);
    let (da, db) = (
        DeviceCsr::upload(&g, &a).unwrap(),
        DeviceCsr::upload(&g, &b).unwrap(),
    );
    let plan = GpuSpgemmPlan::symbolic(&g, &da, &db).unwrap();
    let c1 = plan.numeric(&da, &db).unwrap().download(&g).unwrap();
    let mut a2 = a.clone();
    a2.values_mut().iter_mut().for_each(|v| *v *= -3.0);
    let da2 = DeviceCsr::upload(&g, &a2).unwrap();
    let mut vals = g.zeros::<f64>(plan.nnz().max(1)).unwrap();
    plan.numeric_into(&da2, &db, &mut vals).unwrap();
    let v2 = g.download(&vals).unwrap();
    let want2 = sparse::spgemm(&a2, &b).unwrap();
    assert_eq!(c1.nnz(), want2.nnz());
    assert_eq!(&v2[..want2.nnz()], want2.values(), "numeric re-run");

    // Galerkin R·A·P with R = Pᵀ.
    let sq = random(800, 800, 6, 23);
    let p = random(800, 90, 2, 24);
    let r = p.transpose();
    let want = sparse::galerkin(&r, &sq, &p).unwrap();
    let (dr, dsq, dp) = (
        DeviceCsr::upload(&g, &r).unwrap(),
        DeviceCsr::upload(&g, &sq).unwrap(),
        DeviceCsr::upload(&g, &p).unwrap(),
    );
    let got = sg::galerkin(&g, &dr, &dsq, &dp)
        .unwrap()
        .download(&g)
        .unwrap();
    assert_eq!(got.col_idx(), want.col_idx());
    assert_eq!(got.values(), want.values());

    // cuSPARSE gives the same pattern and values within rounding.
    #[cfg(feature = "peers")]
    match CusparseSpgemm::new(&g) {
        Ok(cs) => {
            for spec in ["poisson2d:50", "poisson3d:12"] {
                let s: CsrMatrix<f64> = segsparse::generate::from_spec(spec, 0).unwrap();
                let ds = DeviceCsr::upload(&g, &s).unwrap();
                let mine = sg::spgemm(&g, &ds, &ds).unwrap().download(&g).unwrap();
                let theirs = cs.multiply(&ds, &ds).unwrap().download(&g).unwrap();
                assert_eq!(mine.row_ptr(), theirs.row_ptr(), "{spec}");
                assert_eq!(mine.col_idx(), theirs.col_idx(), "{spec}");
                for (x, y) in mine.values().iter().zip(theirs.values()) {
                    assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{spec}");
                }
            }
            let theirs = cs.multiply(&da, &db).unwrap().download(&g).unwrap();
            let mine = sparse::spgemm(&a, &b).unwrap();
            assert_eq!(mine.col_idx(), theirs.col_idx());
        }
        Err(e) if gpu::gpu_required() => panic!("cuSPARSE: {e}"),
        Err(e) => eprintln!("cuSPARSE skipped: {e}"),
    }
}

#[test]
fn transpose_diagonal_scale() {
    let Some(g) = gpu::test_gpu() else { return };
    for (m, n, seed) in [
        (0, 5, 1),
        (5, 0, 2),
        (1, 1, 3),
        (700, 300, 4),
        (20000, 30000, 5),
    ] {
        let a = random(m, n, 7, seed);
        let da = DeviceCsr::upload(&g, &a).unwrap();
        let t = sg::transpose(&g, &da).unwrap().download(&g).unwrap();
        let want = a.transpose();
        assert_eq!(t.row_ptr(), want.row_ptr(), "transpose {m}×{n}");
        assert_eq!(t.col_idx(), want.col_idx(), "transpose {m}×{n}");
        assert_eq!(t.values(), want.values(), "transpose {m}×{n}");
        let tf = sg::transpose(&g, &DeviceCsr::upload(&g, &a.cast::<f32>()).unwrap())
            .unwrap()
            .download(&g)
            .unwrap();
        assert_eq!(tf.col_idx(), want.col_idx());
    }
    let a = random(500, 400, 6, 9);
    let mut da = DeviceCsr::upload(&g, &a).unwrap();
    let d = g.download(&sg::diagonal(&g, &da).unwrap()).unwrap();
    for (i, di) in d.iter().enumerate() {
        let (c, v) = a.row(i);
        let want = c
            .iter()
            .zip(v)
            .filter(|(&c, _)| c as usize == i)
            .map(|(_, &v)| v)
            .next_back()
            .unwrap_or(0.0);
        assert_eq!(*di, want, "diagonal {i}");
    }
    let l: Vec<f64> = (0..500).map(|i| 1.0 + i as f64 * 0.5).collect();
    let r: Vec<f64> = (0..400).map(|i| 2.0 - i as f64 * 0.001).collect();
    let (dl, dr) = (g.upload(&l).unwrap(), g.upload(&r).unwrap());
    sg::scale(&g, &mut da, Some(&dl), Some(&dr)).unwrap();
    let got = da.download(&g).unwrap();
    let mut want = a.clone();
    sparse::scale(&mut want, Some(&l), Some(&r));
    assert_eq!(got.values(), want.values());
}

/// `A + αB` on the GPU equals the CPU's bit for bit (pattern, values, explicit zeros), f32 and
/// f64, on random patterns with empty rows, rectangular and empty shapes, identical patterns
/// (every entry summed) and disjoint ones; shape mismatches and non-canonical rows are errors.
#[test]
fn add_equals_the_cpu() {
    let Some(g) = gpu::test_gpu() else { return };
    fn check<T: GpuScalar + Bits>(g: &Arc<Gpu>, a: &CsrMatrix<T>, alpha: T, b: &CsrMatrix<T>) {
        let want = sparse::add(a, alpha, b).unwrap();
        let (da, db) = (
            DeviceCsr::upload(g, a).unwrap(),
            DeviceCsr::upload(g, b).unwrap(),
        );
        let got = sg::add(g, &da, alpha, &db).unwrap().download(g).unwrap();
        let what = format!("{}×{} {}", a.nrows(), a.ncols(), T::NAME);
        assert_eq!(got.row_ptr(), want.row_ptr(), "{what}: row_ptr");
        assert_eq!(got.col_idx(), want.col_idx(), "{what}: columns");
        for (k, (x, y)) in got.values().iter().zip(want.values()).enumerate() {
            assert!(
                (*x).to_bits_u64() == (*y).to_bits_u64(),
                "{what}: value {k}: GPU {x:?} vs CPU {y:?}"
            );
        }
    }
    for (m, n, seed) in [
        (0, 4, 1),
        (4, 0, 2),
        (1, 1, 3),
        (900, 700, 4),
        (30000, 20000, 5),
    ] {
        let (a, b) = (random(m, n, 9, seed), random(m, n, 5, seed + 100));
        for alpha in [1.0, -0.37, 0.0] {
            check::<f64>(&g, &a, alpha, &b);
            check::<f32>(&g, &a.cast(), alpha as f32, &b.cast());
        }
        // The same pattern (every entry summed; α = −1 cancels to explicit zeros) and A + αA.
        check::<f64>(&g, &a, -1.0, &a);
        let empty = CsrMatrix::<f64>::from_triplets(m, n, &[]).unwrap();
        check::<f64>(&g, &a, 2.0, &empty);
        check::<f64>(&g, &empty, 2.0, &a);
    }
    let a = DeviceCsr::upload(&g, &random(10, 8, 3, 7)).unwrap();
    let b = DeviceCsr::upload(&g, &random(10, 9, 3, 8)).unwrap();
    let e = sg::add(&g, &a, 1.0, &b).unwrap_err().to_string();
    assert!(e.contains("10×8") && e.contains("10×9"), "{e}");
    let unsorted =
        CsrMatrix::try_from_parts(2, 3, vec![0, 2, 2], vec![2, 0], vec![1.0, 2.0]).unwrap();
    let du = DeviceCsr::upload(&g, &unsorted).unwrap();
    let e = sg::add(&g, &du, 1.0, &du).unwrap_err().to_string();
    assert!(e.contains("row 0"), "{e}");
}

/// A product turned into a `GpuCsr` (structure tables built on the device) multiplies vectors
/// as the same matrix uploaded from the host does.
#[test]
fn product_as_gpu_csr_spmv() {
    let Some(g) = gpu::test_gpu() else { return };
    for (a, what) in [
        (
            segsparse::generate::from_spec::<f64>("poisson2d:40", 0).unwrap(),
            "poisson",
        ),
        (random(5000, 5000, 5, 31), "random with empty rows"),
    ] {
        let da = DeviceCsr::upload(&g, &a).unwrap();
        let c = sg::spgemm(&g, &da, &da).unwrap();
        let host = c.download(&g).unwrap();
        let gc = c.into_gpu_csr(&g).unwrap();
        let up = GpuCsr::upload(&g, &host).unwrap();
        assert_eq!(gc.resolved_algorithm(), up.resolved_algorithm(), "{what}");
        // The row statistics computed on the device equal the host's.
        let (s1, s2) = (gc.row_stats(), up.row_stats());
        assert_eq!(
            (s1.min, s1.max, s1.empty_rows),
            (s2.min, s2.max, s2.empty_rows),
            "{what}"
        );
        assert!(
            (s1.mean - s2.mean).abs() <= 1e-12 * s2.mean.max(1.0),
            "{what}"
        );
        assert!(
            (s1.std_dev - s2.std_dev).abs() <= 1e-9 * s2.std_dev.max(1.0),
            "{what}"
        );
        let x: Vec<f64> = (0..host.ncols()).map(|i| (i % 13) as f64 - 6.0).collect();
        let dx = g.upload(&x).unwrap();
        let mut y1 = g.zeros::<f64>(host.nrows()).unwrap();
        let mut y2 = g.zeros::<f64>(host.nrows()).unwrap();
        gc.spmv(1.0, &dx, 0.0, &mut y1).unwrap();
        up.spmv(1.0, &dx, 0.0, &mut y2).unwrap();
        assert_eq!(g.download(&y1).unwrap(), g.download(&y2).unwrap(), "{what}");
    }
}

#[test]
fn mismatched_product_is_an_error() {
    let Some(g) = gpu::test_gpu() else { return };
    let a = DeviceCsr::upload(&g, &random(3, 4, 2, 1)).unwrap();
    let e = sg::spgemm(&g, &a, &a).unwrap_err().to_string();
    assert!(e.contains("3×4"), "{e}");
}

fn matrices_dir() -> std::path::PathBuf {
    let m = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("matrices");
    if m.is_dir() {
        m
    } else if std::path::Path::new("matrices").is_dir() {
        std::path::PathBuf::from("matrices")
    } else {
        std::path::PathBuf::from(".gpu/matrices")
    }
}

fn mtx_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let s = p.to_string_lossy();
                    s.ends_with(".mtx") || s.ends_with(".mtx.gz")
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `got` (a product stored by whole blocks) equals `want` (the scalar product) bit for bit on
/// `want`'s pattern, and holds `+0` everywhere else.
fn assert_equal_up_to_block_zeros<T: GpuScalar + Bits + Copy>(
    got: &CsrMatrix<T>,
    want: &CsrMatrix<T>,
    what: &str,
) {
    assert_eq!(
        (got.nrows(), got.ncols()),
        (want.nrows(), want.ncols()),
        "{what}: shape"
    );
    let mut found = 0;
    for i in 0..want.nrows() {
        let (gc, gv) = got.row(i);
        let (wc, wv) = want.row(i);
        let mut q = 0;
        for (j, v) in gc.iter().zip(gv) {
            if q < wc.len() && wc[q] == *j {
                assert_eq!(
                    v.to_bits_u64(),
                    wv[q].to_bits_u64(),
                    "{what}: entry ({i}, {j})"
                );
                q += 1;
                found += 1;
            } else {
                assert_eq!(v.to_bits_u64(), 0, "{what}: padding entry ({i}, {j})");
            }
        }
    }
    assert_eq!(
        found,
        want.nnz(),
        "{what}: every entry of the scalar product"
    );
}

/// The Galerkin product by blocks (`BlockGalerkin`) equals the scalar `R·A·P` bit for bit on
/// the scalar product's pattern, the entries only the block closure reaches being `+0`: a 3-D
/// elasticity matrix with whole 3×3 blocks and with its rounding noise dropped (padded blocks),
/// prolongators of 6 and 2 candidates per aggregate, whole and thinned (padded `P` and `R`),
/// in f64 and f32, rows accumulated in shared memory and in `C` itself; its numeric re-run on
/// new values equals a fresh product; sides that do not divide the matrix take no block path.
#[test]
fn block_galerkin_equals_scalar() {
    let Some(g) = gpu::test_gpu() else { return };
    let cases = crate::common::blocks::cases();
    for (name, a, kc, thin) in &cases {
        let (a, kc, name) = (a, *kc, *name);
        let p = crate::common::blocks::prolongator(a, kc, *thin);
        let r = p.transpose();
        // Rows accumulated in shared memory (the default here), then in C's own entries (the
        // path of rows too long for it).
        for global in [false, true] {
            sg::block::accumulate_in_global_for_tests(global);
            let name = format!("{name}{}", if global { ", global" } else { "" });
            check_block_galerkin(&g, &r, a, &p, kc, &name);
            check_block_galerkin(&g, &r.cast::<f32>(), &a.cast(), &p.cast(), kc, &name);
        }
        sg::block::accumulate_in_global_for_tests(false);
    }
    // Sides that do not divide the matrix: no block product.
    let a = DeviceCsr::upload(&g, &cases[0].1).unwrap();
    assert!(sg::block_galerkin(&g, &a, &a, &a, 5, 1).unwrap().is_none());
}

fn check_block_galerkin<T: GpuScalar + Bits + Copy>(
    g: &Arc<Gpu>,
    r: &CsrMatrix<T>,
    a: &CsrMatrix<T>,
    p: &CsrMatrix<T>,
    kc: usize,
    name: &str,
) {
    let what = format!("{name} ({})", T::NAME);
    let up = |m: &CsrMatrix<T>| DeviceCsr::upload(g, m).unwrap();
    let (dr, da, dp) = (up(r), up(a), up(p));
    let want = sparse::galerkin(r, a, p).unwrap();
    let scalar = sg::galerkin(g, &dr, &da, &dp).unwrap().download(g).unwrap();
    assert_eq!(scalar, want, "{what}: the scalar GPU product");
    let (mut plan, c) = sg::BlockGalerkin::new(g, dr.view(), da.view(), dp.view(), 3, kc)
        .unwrap()
        .expect("a blocked product");
    let got = c.download(g).unwrap();
    assert_equal_up_to_block_zeros(&got, &want, &what);
    let host = sparse::block_galerkin(r, a, p, 3, kc)
        .unwrap()
        .expect("blocks fit on the host too");
    assert_eq!(got, host, "{what}: the host's product by blocks");
    // New values on the same patterns.
    let scaled = |m: &CsrMatrix<T>, s: f64| {
        let mut m = m.clone();
        for (k, v) in m.values_mut().iter_mut().enumerate() {
            *v *= T::from_f64(s + (k % 7) as f64 * 0.125).unwrap();
        }
        m
    };
    let (r2, a2, p2) = (scaled(r, -1.5), scaled(a, 0.75), scaled(p, 2.0));
    let (dr2, da2, dp2) = (up(&r2), up(&a2), up(&p2));
    let mut out = g.zeros::<T>(plan.nnz().max(1)).unwrap();
    plan.numeric_into(g, dr2.view(), da2.view(), dp2.view(), &mut out)
        .unwrap();
    let rerun = g.download(&out).unwrap();
    let fresh = sg::block_galerkin(g, &dr2, &da2, &dp2, 3, kc)
        .unwrap()
        .expect("a blocked product")
        .download(g)
        .unwrap();
    assert_eq!(&rerun[..fresh.nnz()], fresh.values(), "{what}: re-run");
    assert_equal_up_to_block_zeros(
        &fresh,
        &sparse::galerkin(&r2, &a2, &p2).unwrap(),
        &format!("{what}, new values"),
    );
}
