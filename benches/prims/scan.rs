//! Criterion benchmarks of scan: the CPU reference and rayon versions, and (with a GPU) the
//! look-back scan timed with CUDA events around the call (`iter_custom`, synchronised).
//! The full table with copy-bandwidth ratios comes from the `scan-bench` binary.

use criterion::{criterion_main, Criterion, Throughput};
use segsparse::primitives::{cpu, ScanOp, ScanSpec};

fn bench(c: &mut Criterion) {
    let spec = ScanSpec::inclusive(ScanOp::Plus);
    let n = 1 << 22;
    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let mut y = vec![0.0f32; n];
    let mut grp = c.benchmark_group("scan_f32_4M");
    grp.throughput(Throughput::Bytes(8 * n as u64));
    grp.sample_size(10);
    grp.bench_function("cpu_seq", |b| b.iter(|| cpu::scan(&x, &mut y, spec)));
    grp.bench_function("cpu_par", |b| b.iter(|| cpu::par_scan(&x, &mut y, spec)));
    #[cfg(feature = "cuda")]
    if let Ok(g) = segsparse::gpu::Gpu::shared() {
        use segsparse::primitives::{gpu as pg, ScanAlgorithm};
        let dx = g.upload(&x).unwrap();
        let mut dy = g.zeros::<f32>(n).unwrap();
        let mut ws = pg::workspace(&g, n).unwrap();
        for alg in ScanAlgorithm::ALL {
            grp.bench_function(format!("cuda_{}", alg.name()), |b| {
                b.iter_custom(|iters| {
                    let s = g
                        .time(|| {
                            for _ in 0..iters {
                                pg::scan_with(&g, &dx, &mut dy, spec, alg, &mut ws)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                    std::time::Duration::from_secs_f64(s)
                })
            });
        }
    }
    grp.finish();
}

// criterion_group! generates undocumented items.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;
criterion_main!(benches);
