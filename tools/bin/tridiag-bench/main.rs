//! `tridiag-bench`: this crate's GPU tridiagonal solvers against cuSPARSE (`gtsv2StridedBatch`,
//! `gtsv2_nopivot`) in the same process, timed the same way (CUDA events after warm-up, median
//! of many samples, each sample the mean of `--inner` back-to-back solves), plus the paper's
//! 512 × 512 GPU-versus-CPU comparison. Prints markdown tables (see
//! `benches/results/history/tridiag.md`).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::gpu::{DeviceBuffer, Gpu, KernelType};
use segsparse::tridiag::cusparse_peer::{CusparseTridiag, GtsvScalar};
use segsparse::tridiag::gpu::{GpuTridiag, GpuTuning};
use segsparse::tridiag::{cpu, TridiagAlgorithm, Tridiagonal};
use segsparse::Scalar;

/// Benchmark the tridiagonal solvers (GPU, cuSPARSE, CPU).
// No bare `about`: it would replace this doc comment with the crate's description in --help.
#[derive(Parser, Debug)]
#[command(version, long_about = None)]
struct Cli {
    /// Timed samples per case (the median is reported).
    #[arg(long, default_value_t = 31)]
    reps: usize,
    /// Back-to-back solves per sample.
    #[arg(long, default_value_t = 10)]
    inner: usize,
    /// Skip the tuning sweep of the per-block solvers.
    #[arg(long)]
    no_sweep: bool,
    /// Skip the CPU side of the paper's comparison.
    #[arg(long)]
    no_cpu: bool,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tridiag-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Random diagonally dominant systems (cuSPARSE's convention: `lower[0] = upper[n-1] = 0`).
#[allow(clippy::type_complexity)]
fn systems<T: Scalar>(n: usize, batch: usize, seed: u64) -> (Vec<T>, Vec<T>, Vec<T>, Vec<T>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let len = n * batch;
    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    for i in 0..len {
        let lo: f64 = if i % n == 0 {
            0.0
        } else {
            rng.gen_range(-1.0..1.0)
        };
        let up: f64 = if i % n == n - 1 {
            0.0
        } else {
            rng.gen_range(-1.0..1.0)
        };
        a.push(T::of_f64(lo));
        c.push(T::of_f64(up));
        b.push(T::of_f64(
            (lo.abs() + up.abs()) * rng.gen_range(1.05..2.0) + 0.5,
        ));
        d.push(T::of_f64(rng.gen_range(-1.0..1.0)));
    }
    (a, b, c, d)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median seconds per call of `f` (which queues one solve), `inner` calls per CUDA-event sample.
fn time_gpu(
    g: &Gpu,
    reps: usize,
    inner: usize,
    mut f: impl FnMut() -> segsparse::Result<()>,
) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    g.synchronize()?;
    let mut v = Vec::with_capacity(reps);
    let mut host = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = g.time(|| {
            let h = Instant::now();
            for _ in 0..inner {
                f()?;
            }
            host.push(h.elapsed().as_secs_f64() / inner as f64);
            Ok(())
        })?;
        v.push(t / inner as f64);
    }
    HOST_ENQUEUE.with(|c| c.set(median(host)));
    Ok(median(v))
}

thread_local! {
    /// Median host time to queue one call in the last `time_gpu`: when it is close to the GPU
    /// time, the measurement is bound by launch overhead, not by the kernels.
    static HOST_ENQUEUE: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

fn max_rel_err<T: Scalar>(n: usize, got: &[T], want: &[f64]) -> f64 {
    let mut worst = 0f64;
    for (g, w) in got.chunks(n).zip(want.chunks(n)) {
        let scale = w.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
        for (x, y) in g.iter().zip(w) {
            worst = worst.max((x.as_f64() - y).abs() / scale);
        }
    }
    worst
}

struct Dev<T: KernelType> {
    a: DeviceBuffer<T>,
    b: DeviceBuffer<T>,
    c: DeviceBuffer<T>,
    d: DeviceBuffer<T>,
    x: DeviceBuffer<T>,
}

fn reference<T: Scalar>(n: usize, h: &(Vec<T>, Vec<T>, Vec<T>, Vec<T>)) -> Vec<f64> {
    let w = |v: &[T]| v.iter().map(|x| x.as_f64()).collect::<Vec<f64>>();
    cpu::thomas_batch(n, Tridiagonal::new(&w(&h.0), &w(&h.1), &w(&h.2)), &w(&h.3))
        .expect("dominant systems")
}

/// One shape: every GPU algorithm and cuSPARSE, one markdown row each.
fn bench_shape<T: Scalar + GtsvScalar>(
    g: &std::sync::Arc<Gpu>,
    cli: &Cli,
    sp: &mut Option<CusparseTridiag>,
    n: usize,
    batch: usize,
    algs: &[TridiagAlgorithm],
    copy_bw: f64,
) -> Result<()> {
    let h = systems::<T>(n, batch, (n * 31 + batch) as u64);
    let want = reference(n, &h);
    let mut dv = Dev {
        a: g.upload(&h.0)?,
        b: g.upload(&h.1)?,
        c: g.upload(&h.2)?,
        d: g.upload(&h.3)?,
        x: g.zeros(n * batch)?,
    };
    let unknowns = (n * batch) as f64;
    let bytes = 5.0 * T::BYTES as f64 * unknowns;
    let shape = if batch == 1 {
        format!("1 × 2^{} {}", (n as f64).log2().round(), T::NAME)
    } else {
        format!("{batch} × {n} {}", T::NAME)
    };
    // The peer first, so every row can show the ratio.
    let mut peer_t = None;
    if let Some(sp) = sp.as_mut() {
        let t = if batch == 1 {
            time_gpu(g, cli.reps, cli.inner, || {
                sp.nopivot(Tridiagonal::new(&dv.a, &dv.b, &dv.c), &mut dv.x)
            })
        } else {
            time_gpu(g, cli.reps, cli.inner, || {
                sp.strided_batch(n, batch, Tridiagonal::new(&dv.a, &dv.b, &dv.c), &mut dv.x)
            })
        };
        let host = HOST_ENQUEUE.with(|c| c.get());
        eprintln!(
            "{shape} cuSPARSE: host enqueue {:.2} µs per solve",
            host * 1e6
        );
        // Correctness of the peer on fresh data (it solves in place).
        g.stream().memcpy_dtod(&dv.d, &mut dv.x).context("copy")?;
        if batch == 1 {
            sp.nopivot(Tridiagonal::new(&dv.a, &dv.b, &dv.c), &mut dv.x)?;
        } else {
            sp.strided_batch(n, batch, Tridiagonal::new(&dv.a, &dv.b, &dv.c), &mut dv.x)?;
        }
        let err = max_rel_err(n, &g.download(&dv.x)?, &want);
        let t = t?;
        peer_t = Some(t);
        let name = if batch == 1 {
            "cuSPARSE gtsv2_nopivot"
        } else {
            "cuSPARSE gtsv2StridedBatch"
        };
        println!(
            "| {shape} | {name} | {:.2} | {:.1} | {:.0} | {:.0}% | 1.00 | {err:.1e} |",
            t * 1e6,
            unknowns / t / 1e9,
            bytes / t / 1e9,
            100.0 * bytes / t / copy_bw
        );
    }
    let mut solver = GpuTridiag::<T>::new(g)?;
    for &alg in algs {
        let t = time_gpu(g, cli.reps, cli.inner, || {
            solver.queue_batch(
                n,
                batch,
                Tridiagonal::new(&dv.a, &dv.b, &dv.c),
                &dv.d,
                &mut dv.x,
                alg,
            )
        });
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                println!("| {shape} | {} | – | | | | | {e} |", alg.name());
                continue;
            }
        };
        solver.check()?;
        g.stream().memset_zeros(&mut dv.x).context("memset")?;
        solver.solve_batch(
            n,
            batch,
            Tridiagonal::new(&dv.a, &dv.b, &dv.c),
            &dv.d,
            &mut dv.x,
            alg,
        )?;
        let err = max_rel_err(n, &g.download(&dv.x)?, &want);
        let host = HOST_ENQUEUE.with(|c| c.get());
        eprintln!(
            "{shape} {}: host enqueue {:.2} µs per solve (GPU {:.2} µs)",
            alg.name(),
            host * 1e6,
            t * 1e6
        );
        if batch > 1 {
            if let Some((th, sm, occ)) = solver.block_occupancy(n, alg)? {
                eprintln!(
                    "{shape} {}: {th} threads, {sm} B shared memory, {occ} blocks per SM",
                    alg.name()
                );
            }
        }
        let ratio = peer_t
            .map(|p| format!("{:.2}", p / t))
            .unwrap_or("–".into());
        println!(
            "| {shape} | segsparse {} | {:.2} | {:.1} | {:.0} | {:.0}% | {ratio} | {err:.1e} |",
            alg.name(),
            t * 1e6,
            unknowns / t / 1e9,
            bytes / t / 1e9,
            100.0 * bytes / t / copy_bw
        );
    }
    if !cli.no_sweep && batch > 1 {
        let base = solver.tuning();
        let mut rows = Vec::new();
        for rpt in [4u32, 8, 16, 32] {
            for stop in [1u32, 32, 64, 128, 4096] {
                solver.set_tuning(GpuTuning {
                    block_rows_per_thread: rpt,
                    partition_cr_stop: stop,
                    ..base
                });
                let occ = solver
                    .block_occupancy(n, TridiagAlgorithm::Partition)?
                    .map(|o| o.2)
                    .unwrap_or(0);
                let t = time_gpu(g, cli.reps, cli.inner, || {
                    solver.queue_batch(
                        n,
                        batch,
                        Tridiagonal::new(&dv.a, &dv.b, &dv.c),
                        &dv.d,
                        &mut dv.x,
                        TridiagAlgorithm::Partition,
                    )
                })?;
                solver.check()?;
                rows.push(format!(
                    "rows/thread {rpt} cr_stop {stop} ({occ} blocks/SM): {:.2} µs",
                    t * 1e6
                ));
            }
        }
        for stop in [32u32, 64, 128, 256, 512] {
            solver.set_tuning(GpuTuning {
                hybrid_cr_stop: stop,
                ..base
            });
            let t = time_gpu(g, cli.reps, cli.inner, || {
                solver.queue_batch(
                    n,
                    batch,
                    Tridiagonal::new(&dv.a, &dv.b, &dv.c),
                    &dv.d,
                    &mut dv.x,
                    TridiagAlgorithm::CrPcr,
                )
            })?;
            solver.check()?;
            rows.push(format!("cr-pcr cr_stop {stop}: {:.2} µs", t * 1e6));
        }
        solver.set_tuning(base);
        eprintln!("sweep {shape}: {}", rows.join("; "));
    }
    Ok(())
}

fn cpu_time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f();
        v.push(t.elapsed().as_secs_f64());
    }
    median(v)
}

fn paper_comparison(g: &std::sync::Arc<Gpu>, cli: &Cli) -> Result<()> {
    let (n, batch) = (512, 512);
    let h = systems::<f32>(n, batch, 2007);
    let dv_a = g.upload(&h.0)?;
    let dv_b = g.upload(&h.1)?;
    let dv_c = g.upload(&h.2)?;
    let dv_d = g.upload(&h.3)?;
    let mut x = g.zeros::<f32>(n * batch)?;
    let mut s = GpuTridiag::<f32>::new(g)?;
    println!("\n| 512 × 512 f32 (the paper's comparison) | time | vs the paper |");
    println!("|---|---|---|");
    println!("| paper 2007: GPU (GeForce 8800 GTX, shared memory) | 2.3 ms | |");
    println!("| paper 2007: CPU cyclic reduction | 27.6 ms | |");
    for alg in [TridiagAlgorithm::Auto, TridiagAlgorithm::CyclicReduction] {
        let t = time_gpu(g, cli.reps, cli.inner, || {
            s.queue_batch(
                n,
                batch,
                Tridiagonal::new(&dv_a, &dv_b, &dv_c),
                &dv_d,
                &mut x,
                alg,
            )
        })?;
        s.check()?;
        println!(
            "| today: GPU {} ({}) | {:.2} µs | {:.0}× faster than the paper's GPU |",
            alg.name(),
            g.name(),
            t * 1e6,
            2.3e-3 / t
        );
    }
    if !cli.no_cpu {
        let reps = 7;
        let t_cr = cpu_time(reps, || {
            for k in 0..batch {
                let r = k * n..(k + 1) * n;
                let a = Tridiagonal::new(&h.0[r.clone()], &h.1[r.clone()], &h.2[r.clone()]);
                let _ = cpu::cyclic_reduction(a, &h.3[r], 1);
            }
        });
        let mut xs = vec![0f32; n * batch];
        let mut scratch = vec![0f32; n];
        let t_thomas1 = cpu_time(reps, || {
            for k in 0..batch {
                let r = k * n..(k + 1) * n;
                let a = Tridiagonal::new(&h.0[r.clone()], &h.1[r.clone()], &h.2[r.clone()]);
                let _ = cpu::thomas_with_scratch(a, &h.3[r.clone()], &mut xs[r], &mut scratch);
            }
        });
        let t_thomas_par = cpu_time(reps, || {
            let _ = cpu::thomas_batch_into(n, Tridiagonal::new(&h.0, &h.1, &h.2), &h.3, &mut xs);
        });
        let threads = rayon::current_num_threads();
        println!(
            "| today: CPU cyclic reduction, 1 thread | {:.2} ms | {:.1}× faster than 27.6 ms |",
            t_cr * 1e3,
            27.6e-3 / t_cr
        );
        println!(
            "| today: CPU Thomas, 1 thread | {:.2} ms | |",
            t_thomas1 * 1e3
        );
        println!(
            "| today: CPU Thomas, rayon, {threads} threads | {:.3} ms | |",
            t_thomas_par * 1e3
        );
    }
    Ok(())
}

fn run(cli: Cli) -> Result<()> {
    let g = Gpu::shared()
        .map_err(|e| anyhow::anyhow!("this benchmark needs a CUDA GPU, and there is {e}"))?;
    let copy_bw = g.copy_bandwidth(1 << 28, 20)?;
    let mut sp = match CusparseTridiag::new(&g) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("cuSPARSE unavailable: {e}");
            None
        }
    };
    println!(
        "device: {} ({} SMs); copy bandwidth {:.0} GB/s; cuSPARSE {}; {} samples × {} solves, median",
        g.name(),
        g.sm_count(),
        copy_bw / 1e9,
        sp.as_ref().map(|s| s.version()).unwrap_or("absent".into()),
        cli.reps,
        cli.inner
    );
    println!("\n| shape | solver | µs | G unknowns/s | GB/s (5 words/unknown) | of copy bw | speed-up vs cuSPARSE | max rel err vs Thomas f64 |");
    println!("|---|---|---|---|---|---|---|---|");
    let batched = [
        TridiagAlgorithm::Auto,
        TridiagAlgorithm::Partition,
        TridiagAlgorithm::CrPcr,
        TridiagAlgorithm::Pcr,
        TridiagAlgorithm::CyclicReduction,
    ];
    bench_shape::<f32>(&g, &cli, &mut sp, 512, 512, &batched, copy_bw)?;
    bench_shape::<f32>(&g, &cli, &mut sp, 1024, 1024, &batched, copy_bw)?;
    bench_shape::<f64>(&g, &cli, &mut sp, 512, 512, &batched, copy_bw)?;
    bench_shape::<f64>(&g, &cli, &mut sp, 1024, 1024, &batched, copy_bw)?;
    let single = [
        TridiagAlgorithm::Auto,
        TridiagAlgorithm::CrPcr,
        TridiagAlgorithm::CyclicReduction,
    ];
    bench_shape::<f64>(&g, &cli, &mut sp, 1 << 24, 1, &single, copy_bw)?;
    bench_shape::<f32>(&g, &cli, &mut sp, 1 << 24, 1, &single, copy_bw)?;
    paper_comparison(&g, &cli)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn verify_cli() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
        let help = super::Cli::command().render_help().to_string();
        assert!(
            help.starts_with("Benchmark the tridiagonal solvers"),
            "{help}"
        );
    }

    /// Without a GPU the tool says so in one sentence (no repeated prefix, no "using the
    /// CPU" while it exits) and fails.
    #[test]
    fn no_gpu_is_one_plain_sentence() {
        let cli = <super::Cli as clap::Parser>::parse_from(["tridiag-bench", "--no-sweep"]);
        if segsparse::gpu::Gpu::shared().is_ok() {
            return; // a GPU: nothing to check here
        }
        let e = format!("{:#}", super::run(cli).unwrap_err());
        assert!(
            e.starts_with("this benchmark needs a CUDA GPU, and there is no usable CUDA device: "),
            "{e}"
        );
        assert_eq!(e.matches("no usable CUDA device").count(), 1, "{e}");
        assert!(!e.contains("using the CPU") && !e.contains('\n'), "{e}");
    }
}
