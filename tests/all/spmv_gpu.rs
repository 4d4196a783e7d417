//! GPU SpMV (`GpuCsr`) against an f64 CPU reference: every algorithm, both precisions, real
//! matrices (matrices/ and the corpus in `SEGSPARSE_DATA`) and generated ones with empty rows,
//! one dense row, a single row or column, 0×0 and n×0, power-law rows; poisoned outputs,
//! β = 0 with NaN in y, general α and β; and cuSPARSE through the same comparison.
//!
//! Skips with a notice without a GPU; fails instead when `SEGSPARSE_REQUIRE_GPU=1`.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::csr::CsrMatrix;
use segsparse::gpu::{self, Gpu};
use segsparse::scalar::Scalar;
#[cfg(feature = "peers")]
use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv};
use segsparse::spmv::gpu::{GpuCsr, GpuScalar, SpmvAlgorithm, SpmvPlan, TUNE_MIN_PRODUCTS};

fn algorithms() -> Vec<SpmvAlgorithm> {
    vec![
        SpmvAlgorithm::Auto,
        SpmvAlgorithm::Fused,
        SpmvAlgorithm::FusedLookback,
        SpmvAlgorithm::Rows,
        SpmvAlgorithm::Vector { lanes: 0 },
        SpmvAlgorithm::Vector { lanes: 1 },
        SpmvAlgorithm::Vector { lanes: 2 },
        SpmvAlgorithm::Vector { lanes: 4 },
        SpmvAlgorithm::Vector { lanes: 8 },
        SpmvAlgorithm::Vector { lanes: 16 },
        SpmvAlgorithm::Vector { lanes: 32 },
        SpmvAlgorithm::PaperSegscan,
    ]
}

/// `α·A·x + β·y` in f64 from the matrix's own (T-valued) entries, and per row the magnitude
/// `|α|·Σ|a_ij·x_j| + |β·y_i|` that bounds the rounding error.
fn reference<T: Scalar>(
    a: &CsrMatrix<T>,
    alpha: f64,
    x: &[T],
    beta: f64,
    y: &[T],
) -> (Vec<f64>, Vec<f64>) {
    let mut out = Vec::with_capacity(a.nrows());
    let mut mag = Vec::with_capacity(a.nrows());
    assert_eq!(y.len(), a.nrows());
    for (i, yi) in y.iter().enumerate() {
        let (cols, vals) = a.row(i);
        let (mut s, mut m) = (0f64, 0f64);
        for (&c, &v) in cols.iter().zip(vals) {
            let p = v.as_f64() * x[c as usize].as_f64();
            s += p;
            m += p.abs();
        }
        let by = if beta == 0.0 { 0.0 } else { beta * yi.as_f64() };
        out.push(alpha * s + by);
        mag.push(alpha.abs() * m + by.abs());
    }
    (out, mag)
}

fn random_vec<T: Scalar>(rng: &mut ChaCha8Rng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
        .collect()
}

/// Runs every algorithm on `a` with (α, β) and checks against the reference. `label` names the
/// case in failure messages.
fn check_matrix<T: GpuScalar>(g: &Arc<Gpu>, a: &CsrMatrix<T>, label: &str, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let d = GpuCsr::upload(g, a).unwrap_or_else(|e| panic!("{label}: upload failed: {e}"));
    let x: Vec<T> = random_vec(&mut rng, a.ncols());
    let xd = g.upload(&x).unwrap();
    for &(alpha, beta) in &[(1.0, 0.0), (-0.75, 1.5), (2.0, -1.0)] {
        // β = 0: y is poisoned with NaN and must not be read. Otherwise random.
        let y0: Vec<T> = if beta == 0.0 {
            vec![T::nan(); a.nrows()]
        } else {
            random_vec(&mut rng, a.nrows())
        };
        let (want, mag) = reference(a, alpha, &x, beta, &y0);
        for alg in algorithms() {
            let mut yd = g.upload(&y0).unwrap();
            d.spmv_with(alg, T::of_f64(alpha), &xd, T::of_f64(beta), &mut yd)
                .unwrap_or_else(|e| panic!("{label} {}: {e}", alg.name()));
            let got = g.download(&yd).unwrap();
            compare::<T>(
                &got,
                &want,
                &mag,
                a,
                &format!("{label} {} {} α={alpha} β={beta}", T::NAME, alg.name()),
            );
        }
    }
}

fn compare<T: Scalar>(got: &[T], want: &[f64], mag: &[f64], a: &CsrMatrix<T>, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..want.len() {
        let len = (a.row_ptr()[i + 1] - a.row_ptr()[i]) as f64;
        // Rounding of a sum of `len` products plus the α/β scaling, in T.
        let tol = 2.0 * T::EPS * (len + 4.0) * mag[i] + 1e-300;
        let g = got[i].as_f64();
        if !want[i].is_finite() || !tol.is_finite() {
            // NaN or ∞ in A, x or y: the GPU must not produce a finite value either.
            assert!(
                !g.is_finite(),
                "{what}: row {i} = {g:e}, want non-finite {:e}",
                want[i]
            );
            continue;
        }
        assert!(
            (g - want[i]).abs() <= tol,
            "{what}: row {i} (length {len}) = {g:e}, want {:e} (tolerance {tol:e})",
            want[i]
        );
    }
}

/// A matrix from row lengths, random columns in 0..ncols (unsorted, possibly repeated, which
/// every kernel must accept) and random values.
fn from_lengths<T: Scalar>(rng: &mut ChaCha8Rng, ncols: usize, lens: &[usize]) -> CsrMatrix<T> {
    let mut row_ptr = vec![0u32];
    let mut col = Vec::new();
    let mut val = Vec::new();
    for &l in lens {
        for _ in 0..l {
            col.push(rng.gen_range(0..ncols as u32));
            val.push(T::of_f64(rng.gen_range(-1.0..1.0)));
        }
        row_ptr.push(col.len() as u32);
    }
    CsrMatrix::try_from_parts(lens.len(), ncols, row_ptr, col, val).unwrap()
}

fn both<F: Fn(&Arc<Gpu>, &str, &mut ChaCha8Rng, bool)>(f: F) {
    let Some(g) = gpu::test_gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    f(&g, "f32", &mut rng, false);
    f(&g, "f64", &mut rng, true);
}

macro_rules! each_precision {
    ($g:expr, $f64:expr, $a:expr, $label:expr, $seed:expr) => {
        if $f64 {
            check_matrix::<f64>($g, &$a, $label, $seed)
        } else {
            check_matrix::<f32>($g, &$a.cast::<f32>(), $label, $seed)
        }
    };
}

#[test]
fn sizes_around_tile_boundaries() {
    both(|g, _, rng, is64| {
        // A tile is threads × items nonzeros (2048 with the default policy); cover 0, 1,
        // tile−1, tile, tile+1 and several tiles, with rows of 1..=9 entries.
        for nnz_target in [
            1usize,
            31,
            32,
            33,
            2047,
            2048,
            2049,
            4095,
            4096,
            4097,
            3 * 2048 + 5,
            100_003,
        ] {
            let mut lens = Vec::new();
            let mut total = 0;
            while total < nnz_target {
                let l = rng.gen_range(1..=9).min(nnz_target - total);
                lens.push(l);
                total += l;
            }
            let a = from_lengths::<f64>(rng, 777, &lens);
            each_precision!(
                g,
                is64,
                a,
                &format!("boundary nnz={nnz_target}"),
                nnz_target as u64
            );
        }
    });
}

#[test]
fn empty_rows_everywhere() {
    both(|g, _, rng, is64| {
        // Leading, trailing, isolated and long runs of empty rows, and rows of one entry.
        let mut lens = vec![0, 0, 0, 3, 0, 1, 1, 0, 0];
        for i in 0..5000 {
            lens.push(match i % 11 {
                0..=3 => 0,
                4 => 40,
                _ => rng.gen_range(1..6),
            });
        }
        lens.extend(std::iter::repeat_n(0, 3000));
        lens.push(2);
        lens.extend([0, 0, 0, 0]);
        let a = from_lengths::<f64>(rng, 1000, &lens);
        each_precision!(g, is64, a, "empty rows", 1);
        // Only the last row non-empty; only the first.
        let mut lens = vec![0; 9000];
        lens.push(5000);
        let a = from_lengths::<f64>(rng, 300, &lens);
        each_precision!(g, is64, a, "last row only", 2);
        let mut lens = vec![7000];
        lens.extend(std::iter::repeat_n(0, 9000));
        let a = from_lengths::<f64>(rng, 300, &lens);
        each_precision!(g, is64, a, "first row only", 3);
    });
}

#[test]
fn one_dense_row_among_short_rows() {
    both(|g, _, rng, is64| {
        // 200k entries in one row spans ~100 tiles: the look-back walks more than one window
        // of 32 predecessors.
        let mut lens: Vec<usize> = (0..20_000).map(|_| rng.gen_range(1..8)).collect();
        lens[7777] = 200_000;
        let a = from_lengths::<f64>(rng, 50_000, &lens);
        each_precision!(g, is64, a, "dense row", 4);
    });
}

#[test]
fn single_row_single_column_and_degenerate_shapes() {
    both(|g, _, rng, is64| {
        let a = from_lengths::<f64>(rng, 70_000, &[150_000]);
        each_precision!(g, is64, a, "single row", 5);
        let a = from_lengths::<f64>(rng, 1, &vec![1; 50_001]);
        each_precision!(g, is64, a, "single column", 6);
        let a = from_lengths::<f64>(rng, 1, &[1]);
        each_precision!(g, is64, a, "1×1", 7);
        for (r, c) in [(0, 0), (17, 0), (0, 9), (5000, 3)] {
            let a = CsrMatrix::<f64>::zeros(r, c);
            each_precision!(g, is64, a, &format!("{r}×{c} without entries"), 8);
        }
    });
}

#[test]
fn power_law_rows() {
    both(|g, _, rng, is64| {
        // Pareto-like lengths: most rows short, a few of 10^4..10^5 entries.
        let lens: Vec<usize> = (0..60_000)
            .map(|_| {
                let u: f64 = rng.gen_range(1e-6..1.0);
                ((1.0 / u.powf(1.0 / 1.2)) as usize).min(120_000) - 1
            })
            .collect();
        let a = from_lengths::<f64>(rng, 60_000, &lens);
        each_precision!(g, is64, a, "power law", 9);
    });
}

#[test]
fn large_random_many_tiles() {
    both(|g, _, rng, is64| {
        // About 2^22 + 3 entries: thousands of tiles in flight.
        let n = 400_000;
        let mut lens: Vec<usize> = (0..n).map(|_| rng.gen_range(0..21)).collect();
        let total: usize = lens.iter().sum();
        let target = (1 << 22) + 3;
        if total < target {
            lens.push(target - total);
        }
        let a = from_lengths::<f64>(rng, n, &lens);
        each_precision!(g, is64, a, "large random", 10);
    });
}

#[test]
fn repeated_multiplies_are_consistent_and_epoch_wraps() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut lens: Vec<usize> = (0..30_000).map(|_| rng.gen_range(0..9)).collect();
    lens[100] = 50_000;
    let a = from_lengths::<f64>(&mut rng, 30_000, &lens);
    let d = GpuCsr::upload(&g, &a).unwrap();
    let x: Vec<f64> = random_vec(&mut rng, a.ncols());
    let xd = g.upload(&x).unwrap();
    let (want, mag) = reference(&a, 1.0, &x, 0.0, &vec![0.0; a.nrows()]);
    let mut yd = g.zeros::<f64>(a.nrows()).unwrap();
    for i in 0..50 {
        if i == 20 {
            d.set_epoch_for_tests((1 << 30) - 3);
        }
        // The look-back's epochs wrap; the deterministic kernel shares its per-tile flags.
        let alg = if i % 3 == 2 {
            SpmvAlgorithm::Fused
        } else {
            SpmvAlgorithm::FusedLookback
        };
        d.spmv_with(alg, 1.0, &xd, 0.0, &mut yd).unwrap();
        if i % 7 == 0 || (18..26).contains(&i) || i % 3 == 2 {
            let got = g.download(&yd).unwrap();
            compare::<f64>(&got, &want, &mag, &a, &format!("repeat {i}"));
        }
    }
}

#[test]
fn length_mismatch_panics_with_both_sizes() {
    let Some(g) = gpu::test_gpu() else { return };
    let a = CsrMatrix::<f64>::identity(10);
    let d = GpuCsr::upload(&g, &a).unwrap();
    let x = g.zeros::<f64>(9).unwrap();
    let mut y = g.zeros::<f64>(10).unwrap();
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = d.spmv(1.0, &x, 0.0, &mut y);
    }))
    .unwrap_err();
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains('9') && msg.contains("10"), "{msg}");
}

/// cuSPARSE ALG1/ALG2 agree with the reference too (the benchmark's peer must be right).
#[test]
#[cfg(feature = "peers")]
fn cusparse_peer_matches_reference() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let lens: Vec<usize> = (0..20_000)
        .map(|i| if i % 13 == 0 { 0 } else { rng.gen_range(1..30) })
        .collect();
    let a = from_lengths::<f64>(&mut rng, 20_000, &lens);
    let d = GpuCsr::upload(&g, &a).unwrap();
    let x: Vec<f64> = random_vec(&mut rng, a.ncols());
    let y0: Vec<f64> = random_vec(&mut rng, a.nrows());
    let (want, mag) = reference(&a, 1.25, &x, -0.5, &y0);
    let xd = g.upload(&x).unwrap();
    for alg in [CusparseAlg::Alg1, CusparseAlg::Alg2] {
        let mut yd = g.upload(&y0).unwrap();
        let mut p = match CusparseSpmv::new(&d, alg, 1.25, &xd, -0.5, &mut yd) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("cuSPARSE not available: {e}");
                return;
            }
        };
        p.spmv(1.25, &xd, -0.5, &mut yd).unwrap();
        let got = g.download(&yd).unwrap();
        compare::<f64>(&got, &want, &mag, &a, alg.name());
    }
}

/// `matrices/` of the repository: beside the manifest when it exists (build machine), else in
/// the current directory (the GPU machine runs from the repository root).
fn matrices_dir() -> std::path::PathBuf {
    // On the GPU machine the repository copy may lack matrices/; the staged copy is in .gpu/.
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

/// Every matrix of matrices/ (and matrices/small/) and of the corpus in `SEGSPARSE_DATA`, both
/// precisions, every algorithm. Files the reader rejects (complex entries) are reported and
/// skipped; at least raefsky2 must load.
#[test]
fn real_matrices_and_corpus() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut files = mtx_files(&matrices_dir());
    files.extend(mtx_files(&matrices_dir().join("small")));
    match std::env::var("SEGSPARSE_DATA") {
        Ok(d) => files.extend(mtx_files(std::path::Path::new(&d))),
        Err(_) => eprintln!("SEGSPARSE_DATA not set: corpus matrices skipped"),
    }
    let mut checked = 0;
    for (i, f) in files.iter().enumerate() {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        match segsparse::load::<f64>(&f.to_string_lossy(), 0) {
            Ok(a) => {
                check_matrix::<f64>(&g, &a, &name, i as u64);
                check_matrix::<f32>(&g, &a.cast::<f32>(), &name, i as u64);
                checked += 1;
            }
            Err(e) => eprintln!("skipped {name}: {e}"),
        }
    }
    eprintln!("checked {checked} of {} matrix files", files.len());
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().contains("raefsky2")),
        "raefsky2 not found"
    );
}

/// Generated matrices of each kind at moderate size (the benchmark runs the 10^7–10^8 ones).
#[test]
fn generated_specs() {
    let Some(g) = gpu::test_gpu() else { return };
    for spec in [
        "poisson2d:700",
        "poisson3d:70",
        "random:300000:9",
        "powerlaw:300000:1.8",
        "powerlaw:200000:2.2",
        "tridiag:100001",
        "dense:300",
        "denserows:100000:6:3:60000",
        "wide:2000:400000:40",
        "emptyrows:400000:90:12",
        "rmat:16:12",
        "rmat:16:12:0.45:0.22:0.22",
        "knn3d:60000:10:x",
        "knn3d:60000:16:morton",
        "knn3d:40000:12:random",
        "blocks:60000:32:2",
        "knnblocks:20000:8:3:morton",
        "blocks:30000:16:8",
        "zipf:200000:2.0:1000:0",
        "zipf:200000:1.8:200:500",
        "arrow:200000:4:6",
        "poisson3d27:40",
        "elasticity2d:200",
    ] {
        let a = segsparse::generate::from_spec::<f64>(spec, 5).unwrap();
        check_matrix::<f64>(&g, &a, spec, 3);
        check_matrix::<f32>(&g, &a.cast::<f32>(), spec, 3);
    }
}

/// One row of 10^6 entries (about 500 tiles of the fused kernel), alone, and among short rows
/// and empty rows; rows whose lengths sit at tile multiples.
#[test]
fn one_row_of_a_million_entries_and_rows_spanning_many_tiles() {
    both(|g, _, rng, is64| {
        let a = from_lengths::<f64>(rng, 2_000_000, &[1_000_000]);
        each_precision!(g, is64, a, "one row of 10^6", 21);
        let mut lens: Vec<usize> = (0..30_000)
            .map(|i| if i % 17 == 0 { 0 } else { 3 })
            .collect();
        lens[12_345] = 1_000_000;
        lens[29_999] = 70_001;
        let a = from_lengths::<f64>(rng, 40_000, &lens);
        each_precision!(g, is64, a, "10^6 row among short and empty rows", 22);
        // Lengths at and around multiples of the 2048-entry tile, back to back.
        let lens: Vec<usize> = [2047, 2048, 2049, 1, 4096, 4095, 6145, 0, 8192, 1, 1, 12_289]
            .iter()
            .cycle()
            .take(60)
            .copied()
            .collect();
        let a = from_lengths::<f64>(rng, 9_000, &lens);
        each_precision!(g, is64, a, "rows at tile multiples", 23);
    });
}

/// Every deterministic path gives identical bits run after run and after a fresh upload: rows
/// that cross many tiles (power law with a heavy tail, dense rows) are where an order that
/// depends on timing would show.
#[test]
fn results_are_bitwise_reproducible() {
    let Some(g) = gpu::test_gpu() else { return };
    fn bits<T: GpuScalar>(
        g: &Arc<Gpu>,
        a: &CsrMatrix<T>,
        alg: SpmvAlgorithm,
        x: &[T],
    ) -> Vec<Vec<u64>> {
        let xd = g.upload(x).unwrap();
        let mut runs = Vec::new();
        for upload in 0..2 {
            let d = GpuCsr::upload(g, a).unwrap();
            for _ in 0..if upload == 0 { 6 } else { 2 } {
                let mut yd = g.upload(&vec![T::nan(); a.nrows()]).unwrap();
                d.spmv_with(alg, T::one(), &xd, T::zero(), &mut yd).unwrap();
                runs.push(
                    g.download(&yd)
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().to_bits())
                        .collect(),
                );
            }
        }
        runs
    }
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let mut lens: Vec<usize> = (0..200_000)
        .map(|_| {
            let u: f64 = rng.gen_range(1e-6..1.0);
            ((1.0 / u.powf(1.0 / 1.1)) as usize).min(300_000)
        })
        .collect();
    lens[5] = 600_000;
    lens[150_000] = 250_000;
    let a = from_lengths::<f64>(&mut rng, 200_000, &lens);
    let x: Vec<f64> = random_vec(&mut rng, a.ncols());
    let a32 = a.cast::<f32>();
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    for alg in [
        SpmvAlgorithm::Auto,
        SpmvAlgorithm::Fused,
        SpmvAlgorithm::Rows,
        SpmvAlgorithm::Vector { lanes: 0 },
    ] {
        // Not the paper's algorithm: its segmented-scan primitive carries between tiles with a
        // look-back, so a long row's sum may be added in a different order from run to run
        // (measured on the H200: run 1 differed from run 0 in f64).
        for (prec, runs) in [
            ("f64", bits(&g, &a, alg, &x)),
            ("f32", bits(&g, &a32, alg, &x32)),
        ] {
            for (i, r) in runs.iter().enumerate().skip(1) {
                let diff = r.iter().zip(&runs[0]).position(|(p, q)| p != q);
                assert!(
                    diff.is_none(),
                    "{} {prec}: run {i} differs from run 0 at row {:?}",
                    alg.name(),
                    diff
                );
            }
        }
    }
}

/// Upload-time tables stay within 10% of the CSR arrays' device memory (the paper's workspace
/// is only allocated when that algorithm runs), and their cost is measured.
#[test]
fn preprocessing_memory_and_cost() {
    let Some(g) = gpu::test_gpu() else { return };
    for spec in [
        "poisson2d:600",
        "powerlaw:200000:2.2",
        "random:100000:4",
        "tridiag:300000",
    ] {
        let a = segsparse::generate::from_spec::<f64>(spec, 1).unwrap();
        for (prec, d_extra, d_csr, pre, paper_extra) in [
            {
                let d = GpuCsr::upload(&g, &a).unwrap();
                let e = d.extra_device_bytes();
                let mut y = g.zeros::<f64>(a.nrows()).unwrap();
                let x = g.zeros::<f64>(a.ncols()).unwrap();
                d.spmv_with(SpmvAlgorithm::PaperSegscan, 1.0, &x, 0.0, &mut y)
                    .unwrap();
                (
                    "f64",
                    e,
                    d.csr_device_bytes(),
                    d.preprocess_seconds(),
                    d.extra_device_bytes(),
                )
            },
            {
                let a32 = a.cast::<f32>();
                let d = GpuCsr::upload(&g, &a32).unwrap();
                (
                    "f32",
                    d.extra_device_bytes(),
                    d.csr_device_bytes(),
                    d.preprocess_seconds(),
                    0,
                )
            },
        ] {
            eprintln!(
                "{spec} {prec}: extra {d_extra} B = {:.2}% of CSR {d_csr} B; preprocessing {:.3} ms \
                 ({:.3} ms per 10^7 nonzeros)",
                100.0 * d_extra as f64 / d_csr as f64,
                pre * 1e3,
                pre * 1e3 * 1e7 / a.nnz() as f64
            );
            assert!(
                d_extra * 10 <= d_csr,
                "{spec} {prec}: {d_extra} extra bytes > 10% of the CSR's {d_csr}"
            );
            assert!(
                pre.is_finite() && pre > 0.0,
                "{spec} {prec}: preprocessing time {pre}"
            );
            if prec == "f64" {
                assert!(
                    paper_extra > d_extra,
                    "{spec}: the paper's workspace is lazy"
                );
            }
        }
    }
}

/// `Auto` picks by the kind of matrix (row-length statistics), never by identity.
#[test]
fn auto_choice_by_kind() {
    let Some(g) = gpu::test_gpu() else { return };
    // Small irregular matrices whose rows fit in a tile: the (then deterministic) look-back.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let lens: Vec<usize> = (0..5000)
        .map(|i| if i % 50 == 0 { 900 } else { 3 })
        .collect();
    let a = from_lengths::<f64>(&mut rng, 5000, &lens);
    let d = GpuCsr::upload(&g, &a).unwrap();
    assert_eq!(d.resolved_algorithm(), SpmvAlgorithm::FusedLookback);
    // ... and it gives the same bits every run (no row crosses more than two tiles).
    let x: Vec<f64> = random_vec(&mut rng, a.ncols());
    let xd = g.upload(&x).unwrap();
    let mut first: Option<Vec<u64>> = None;
    for run in 0..8 {
        let mut yd = g.zeros::<f64>(a.nrows()).unwrap();
        d.spmv(1.0, &xd, 0.0, &mut yd).unwrap();
        let b: Vec<u64> = g
            .download(&yd)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        match &first {
            None => first = Some(b),
            Some(f) => assert!(f == &b, "look-back run {run} differs"),
        }
    }
    for (spec, want) in [
        ("poisson2d:2100", "rows"),
        ("poisson3d:170", "rows"),
        ("powerlaw:3000000:2.2", "fused"),
        ("denserows:3000000:6:8:500000", "fused"),
        ("random:3000000:6", "vector4"),
        ("random:1000:5", "vector4"),
        ("poisson3d27:70", "vector4"),
        ("knn3d:1000000:10:x", "vector4"),
        ("blocks:400000:32:2", "vector16"),
        ("arrow:1000000:4:6", "fused"),
        ("emptyrows:3000000:90:20", "fused"),
        ("rmat:20:16", "fused"),
    ] {
        let a = segsparse::generate::from_spec::<f32>(spec, 9).unwrap();
        let d = GpuCsr::upload(&g, &a).unwrap();
        assert_eq!(
            d.resolved_algorithm().name(),
            want,
            "{spec}: {:?}",
            d.row_stats()
        );
    } // Regular rows with scattered columns in f64: the fused kernel since its loads are striped.
    let a = segsparse::generate::from_spec::<f64>("random:1500000:20", 9).unwrap();
    let d = GpuCsr::upload(&g, &a).unwrap();
    assert_eq!(
        d.resolved_algorithm().name(),
        "fused",
        "{:?}",
        d.row_stats()
    );
}

/// The rule on generated instances of every kind, both precisions: the kernel it picks gives the
/// reference result (through `Auto`), and two uploads of the same matrix pick the same kernel.
#[test]
fn rule_choice_on_every_kind_is_checked_and_deterministic() {
    let Some(g) = gpu::test_gpu() else { return };
    for spec in [
        "poisson2d:600",
        "poisson3d:60",
        "poisson3d27:36",
        "elasticity2d:160",
        "aniso2d:500:0.001",
        "knn3d:80000:10:x",
        "knn3d:80000:16:morton",
        "knn3d:50000:12:random",
        "blocks:40000:32:4",
        "zipf:300000:1.5:5000:0",
        "arrow:150000:16:4",
        "rmat:17:16:0.35:0.25:0.25",
        "powerlaw:200000:2.0",
        "random:200000:6",
        "denserows:100000:4:4:50000",
        "emptyrows:300000:50:8",
        "wide:5000:500000:64",
        "geolap:300000:6",
        "knnblocks:60000:8:3:morton",
    ] {
        let a = segsparse::generate::from_spec::<f64>(spec, 7).unwrap();
        let a32 = a.cast::<f32>();
        let (d64, d32) = (
            GpuCsr::upload(&g, &a).unwrap(),
            GpuCsr::upload(&g, &a32).unwrap(),
        );
        assert_eq!(
            GpuCsr::upload(&g, &a).unwrap().resolved_algorithm(),
            d64.resolved_algorithm(),
            "{spec}"
        );
        assert_eq!(d64.resolved_algorithm(), d64.rule_algorithm());
        auto_matches::<f64>(&g, &d64, &a, spec);
        auto_matches::<f32>(&g, &d32, &a32, spec);
    }
}

/// `Auto` on an uploaded matrix against the reference (α = 1, β = 0 with NaN in y).
fn auto_matches<T: GpuScalar>(g: &Arc<Gpu>, d: &GpuCsr<T>, a: &CsrMatrix<T>, label: &str) {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let x: Vec<T> = random_vec(&mut rng, a.ncols());
    let xd = g.upload(&x).unwrap();
    let mut yd = g.upload(&vec![T::nan(); a.nrows()]).unwrap();
    d.spmv(T::one(), &xd, T::zero(), &mut yd).unwrap();
    let (want, mag) = reference(a, 1.0, &x, 0.0, &vec![T::zero(); a.nrows()]);
    let what = format!(
        "{label} {} auto = {}",
        T::NAME,
        d.resolved_algorithm().name()
    );
    compare::<T>(&g.download(&yd).unwrap(), &want, &mag, a, &what);
}

/// `tune` times the candidates once per pattern: a second tune, a re-upload and a matrix with
/// the same pattern but other values come from the cache; another pattern is tuned afresh. The
/// tuned kernel gives the reference result.
#[test]
fn tune_caches_by_fingerprint_and_retunes_a_new_pattern() {
    let Some(g) = gpu::test_gpu() else { return };
    // A pattern no earlier run can have cached on disk: the seed comes from the clock.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let a = segsparse::generate::from_spec::<f32>("random:60000:12", seed).unwrap();
    let d = GpuCsr::upload(&g, &a).unwrap();
    // Few expected products: no tuning.
    assert_eq!(d.prepare_for(10).unwrap(), None);
    assert_eq!(d.resolved_algorithm(), d.rule_algorithm());
    let p = d.tune().unwrap();
    assert!(!p.cached, "{p:?}");
    assert_eq!(p.rule, d.rule_algorithm());
    assert_eq!(p.fingerprint, d.fingerprint());
    let cands = SpmvPlan::candidates(&d);
    assert_eq!(p.timings.len(), cands.len(), "{p:?}");
    assert!(p
        .timings
        .iter()
        .all(|(alg, t)| cands.contains(alg) && *t > 0.0));
    assert!(cands.contains(&p.algorithm));
    assert_eq!(d.resolved_algorithm(), p.algorithm);
    auto_matches::<f32>(&g, &d, &a, "tuned");
    // Cached: the same matrix, a re-upload, the same pattern with other values.
    let again = d.tune().unwrap();
    assert!(again.cached && again.timings.is_empty());
    assert_eq!(again.algorithm, p.algorithm);
    let mut b = a.clone();
    for v in b.values_mut() {
        *v *= 2.0;
    }
    let db = GpuCsr::upload(&g, &b).unwrap();
    assert_eq!(db.fingerprint(), d.fingerprint());
    // A cached pattern is tuned even for a short solve (it costs nothing).
    let pb = db.prepare_for(10).unwrap().expect("cached pattern");
    assert!(pb.cached);
    assert_eq!(db.resolved_algorithm(), p.algorithm);
    // Another pattern: another fingerprint, timed again; enough expected products tune.
    let c = segsparse::generate::from_spec::<f32>("random:60000:12", seed ^ 1).unwrap();
    let dc = GpuCsr::upload(&g, &c).unwrap();
    assert_ne!(dc.fingerprint(), d.fingerprint());
    let pc = dc.prepare_for(TUNE_MIN_PRODUCTS).unwrap().expect("tuned");
    assert!(!pc.cached && !pc.timings.is_empty(), "{pc:?}");
    auto_matches::<f32>(&g, &dc, &c, "tuned, second pattern");
    // Short solves never tune a new pattern on their own: two in a row keep the rule's kernel.
    let e = segsparse::generate::from_spec::<f32>("random:60000:12", seed ^ 2).unwrap();
    let de = GpuCsr::upload(&g, &e).unwrap();
    assert_eq!(de.prepare_for(10).unwrap(), None);
    assert_eq!(de.prepare_for(10).unwrap(), None);
    assert_eq!(de.resolved_algorithm(), de.rule_algorithm());
    // The in-process cache cleared: the decision comes back from the disk cache when one is
    // configured, else it is timed again; either way the same pattern gets a valid kernel.
    SpmvPlan::clear_memory_cache();
    let pd = d.tune().unwrap();
    assert!(pd.cached || !pd.timings.is_empty());
    auto_matches::<f32>(&g, &d, &a, "re-tuned");
}
