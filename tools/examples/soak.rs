//! Soak test: many uploads and solves of random sizes in one process on the GPU,
//! with device memory and host RSS sampled; any growth after the warm-up is a leak.
//!
//! ```text
//! cargo run --release -p segsparse-tools --example soak -- [--rounds 100000] [--seconds 1e9] [--seed 1] [--every 1000]
//! ```
//!
//! Each round draws a matrix (Poisson 2-D of side 4–24, or a random diagonally dominant
//! unsymmetric matrix of 16–600 rows, f64 or f32), uploads it (`GpuCsr::upload`, a fresh
//! device matrix with its structure tables), uploads `b` and `x`, runs one of CG, Jacobi-PCG,
//! BiCGSTAB or GMRES(20) and drops everything. Every `--every` rounds it samples the device's
//! free memory (`cuMemGetInfo`), the live bytes of the memory pool and the host's resident set
//! (`VmRSS`), printed as one JSON line each. The verdict compares the last sample with the
//! first one after the warm-up (10 % of the rounds): growth above 1 % of the device's free
//! memory or of the RSS, or live pool bytes that do not return to the baseline, fail (exit 1).
//! `--seconds` stops early (the rounds done are reported). The last line is `SOAK ...` with the
//! figures.

#[cfg(feature = "cuda")]
fn main() -> std::process::ExitCode {
    imp::main()
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("soak: built without the `cuda` feature");
}

#[cfg(feature = "cuda")]
mod imp {
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::time::Instant;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::Identity;
    use segsparse::gpu::{Gpu, KernelType};
    use segsparse::precond::Jacobi;
    use segsparse::primitives::ScanElem;
    use segsparse::solvers::{bicgstab, cg, gmres, pcg, SolveParams};
    use segsparse::spmv::gpu::{GpuCsr, GpuScalar};
    use segsparse::{generate, CsrMatrix, Scalar};

    fn arg(name: &str, default: u64) -> u64 {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    fn rss_bytes() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .map_or(0, |k| k * 1024)
    }

    /// A random diagonally dominant unsymmetric matrix with about 7 entries per row.
    fn random_matrix<T: Scalar>(rng: &mut ChaCha8Rng, n: usize) -> CsrMatrix<T> {
        let mut t = Vec::with_capacity(n * 8);
        for i in 0..n {
            t.push((i, i, T::of_f64(10.0)));
            for _ in 0..6 {
                let j = rng.gen_range(0..n);
                if j != i {
                    t.push((i, j, T::of_f64(rng.gen_range(-1.0..1.0))));
                }
            }
        }
        CsrMatrix::from_triplets(n, n, &t).expect("valid triplets")
    }

    /// One round in precision `T`; returns the iterations of the solve (0 when it failed).
    fn round<T>(g: &Arc<Gpu>, ops: &GpuOps<T>, rng: &mut ChaCha8Rng, k: u64) -> usize
    where
        T: Scalar + KernelType + GpuScalar + ScanElem,
    {
        let spd = rng.gen_bool(0.5);
        let a: CsrMatrix<T> = if spd {
            generate::poisson2d(rng.gen_range(4..=24)).expect("poisson2d")
        } else {
            let n = rng.gen_range(16..=600);
            random_matrix(rng, n)
        };
        let n = a.nrows();
        let ga = GpuCsr::upload(g, &a).expect("upload");
        let b = g.upload(&vec![T::one(); n]).expect("upload b");
        let mut x = g.upload(&vec![T::zero(); n]).expect("upload x");
        let params = SolveParams {
            rel_tol: if T::BYTES == 4 { 1e-4 } else { 1e-8 },
            max_iters: 400,
            record_history: false,
            ..Default::default()
        };
        let r = match (spd, k % 2) {
            (true, 0) => cg(ops, &ga, &b, &mut x, &params),
            (true, _) => {
                let m = Jacobi::from_matrix(ops, &a).expect("jacobi");
                pcg(ops, &ga, &m, &b, &mut x, &params)
            }
            (false, 0) => bicgstab(ops, &ga, &Identity, &b, &mut x, &params),
            (false, _) => gmres(ops, &ga, &Identity, &b, &mut x, 20, &params),
        };
        match r {
            Ok(info) => info.iterations,
            Err(e) => {
                eprintln!("round {k}: {e}");
                0
            }
        }
    }

    pub fn main() -> ExitCode {
        let rounds = arg("--rounds", 100_000);
        let seed = arg("--seed", 1);
        let every = arg("--every", 1000).max(1);
        let max_secs = arg("--seconds", 1_000_000_000) as f64;
        let g = match Gpu::shared() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("soak: {e}");
                return ExitCode::FAILURE;
            }
        };
        eprintln!("soak: {}", g.describe());
        let ops64 = GpuOps::<f64>::new(&g).expect("GpuOps<f64>");
        let ops32 = GpuOps::<f32>::new(&g).expect("GpuOps<f32>");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let t0 = Instant::now();
        let (mut iters, mut failed) = (0usize, 0usize);
        // (round, device free, pool live bytes, RSS)
        let mut samples: Vec<(u64, u64, u64, u64)> = Vec::new();
        let mut done = 0;
        for k in 1..=rounds {
            done = k;
            let it = if rng.gen_bool(0.25) {
                round::<f32>(&g, &ops32, &mut rng, k)
            } else {
                round::<f64>(&g, &ops64, &mut rng, k)
            };
            iters += it;
            failed += usize::from(it == 0);
            let last = k == rounds || t0.elapsed().as_secs_f64() > max_secs;
            if k % every == 0 || last {
                g.synchronize().expect("synchronize");
                let (free, _) = g.memory_info().expect("cuMemGetInfo");
                let pool = g.pool_used_bytes().expect("pool");
                let rss = rss_bytes();
                println!(
                    "{{\"round\":{k},\"seconds\":{:.2},\"device_free\":{free},\"pool_live\":{pool},\"rss\":{rss}}}",
                    t0.elapsed().as_secs_f64()
                );
                samples.push((k, free as u64, pool, rss));
            }
            if last {
                break;
            }
        }
        let rounds = done;
        let warmup = (rounds / 10).max(every);
        let secs = t0.elapsed().as_secs_f64();
        let base = *samples
            .iter()
            .find(|s| s.0 >= warmup)
            .unwrap_or(&samples[0]);
        let last = *samples.last().expect("a sample");
        let pct = |a: u64, b: u64| (b as f64 - a as f64) / a.max(1) as f64 * 100.0;
        let free_drop = -pct(base.1, last.1);
        let rss_growth = pct(base.3, last.3);
        let ok = free_drop <= 1.0 && rss_growth <= 1.0 && last.2 <= base.2;
        println!(
            "SOAK {} rounds (uploads + solves) in {secs:.1} s ({:.0} µs/round), {iters} solver \
             iterations, {failed} failed solves; after the warm-up (round {}): device free {} → {} \
             bytes ({free_drop:+.3} % drop), pool live {} → {} bytes, host RSS {} → {} bytes \
             ({rss_growth:+.3} %): {}",
            rounds,
            secs / rounds as f64 * 1e6,
            base.0,
            base.1,
            last.1,
            base.2,
            last.2,
            base.3,
            last.3,
            if ok { "PASS" } else { "FAIL (growth)" }
        );
        if ok && failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}
