//! Criterion benchmarks of the CPU SpMV `y ← A·x` against the `sprs` peer, on the seed paper's
//! raefsky2 and on a generated 2-D Poisson matrix (`poisson2d:1000`, 10^6 rows, 5·10^6 entries,
//! larger than the caches), in both precisions.
//!
//! Names are `cpu_par` (segsparse's `spmv`, rayon), `cpu_seq` (`spmv_seq`) and `cpu_sprs`
//! (`sprs::prod::mul_acc_mat_vec_csr` after zeroing y, i.e. `&csmat * &vec` without the output
//! allocation), grouped by matrix and precision. Throughput is `CsrMatrix::spmv_bytes()`, the
//! byte count of DESIGN.md, so criterion's figure is directly the effective bandwidth.
//!
//! `cargo bench -p segsparse-tools --bench spmv`; `SEGSPARSE_BENCH_QUICK=1` runs raefsky2 only.

// `criterion_group!` defines an undocumented `pub fn`.
#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use segsparse::spmv::{cpu, spmv};
use segsparse::{CsrMatrix, Scalar};

fn raefsky2_path() -> String {
    let rel = PathBuf::from("matrices").join("raefsky2.mtx.gz");
    let in_manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(&rel);
    if in_manifest.exists() {
        in_manifest.to_string_lossy().into_owned()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

fn bench_matrix<T: Scalar + sprs::MulAcc>(c: &mut Criterion, label: &str, a: &CsrMatrix<T>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let x: Vec<T> = (0..a.ncols())
        .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
        .collect();
    let mut y = vec![T::zero(); a.nrows()];
    let s = a.to_sprs();
    let mut g = c.benchmark_group(format!("spmv_{label}_{}", T::NAME));
    g.throughput(Throughput::Bytes(a.spmv_bytes() as u64));
    if a.nnz() > 1_000_000 {
        g.sample_size(20).measurement_time(Duration::from_secs(4));
    }
    g.bench_function(BenchmarkId::from_parameter("cpu_par"), |b| {
        b.iter(|| spmv(T::one(), a, &x, T::zero(), &mut y))
    });
    g.bench_function(BenchmarkId::from_parameter("cpu_seq"), |b| {
        b.iter(|| cpu::spmv_seq(T::one(), a, &x, T::zero(), &mut y))
    });
    g.bench_function(BenchmarkId::from_parameter("cpu_sprs"), |b| {
        b.iter(|| {
            y.fill(T::zero());
            sprs::prod::mul_acc_mat_vec_csr(s.view(), &x[..], &mut y[..]);
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let a: CsrMatrix<f64> = segsparse::load(&raefsky2_path(), 1).expect("raefsky2");
    bench_matrix(c, "raefsky2", &a);
    bench_matrix(c, "raefsky2", &a.cast::<f32>());
    if std::env::var("SEGSPARSE_BENCH_QUICK").is_ok_and(|v| v == "1") {
        return;
    }
    let p: CsrMatrix<f64> = segsparse::load("poisson2d:1000", 1).expect("poisson2d");
    bench_matrix(c, "poisson2d_1000", &p);
    bench_matrix(c, "poisson2d_1000", &p.cast::<f32>());
}

criterion_group!(spmv_benches, benches);
criterion_main!(spmv_benches);
