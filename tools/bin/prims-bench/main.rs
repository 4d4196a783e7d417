//! Benchmarks of the issue-7 primitives on the GPU, printed as markdown tables: radix sort
//! (against the device copy bandwidth, CUB's figures from the issue and the CPU sorts), the
//! paper's 4M-key sort table, compaction (against CUB select and Roger et al.'s sizes),
//! segmented reduce at several segment lengths, split, segmented sort and quicksort.
//!
//! Usage: `prims-bench [--quick] [--format json]`. Every GPU time is the median of CUDA-event
//! timings after a warm-up; allocations made inside a call are part of its time. With
//! `--format json` it prints one JSON object per measurement (sort, compact, segmented reduce)
//! in the format of the CUB peer harness (`benches/prims/`), and skips the paper's tables.

#[path = "../scan-bench/record.rs"]
mod record;

use std::time::Instant;

use clap::Parser;
use record::{Format, Record};
use serde_json::Value;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use segsparse::gpu::{DeviceBuffer, Gpu, KernelType};
use segsparse::primitives::compact::{self, Keep};
use segsparse::primitives::{pack_flags, segreduce, sort, split, ScanOp};

type Res<T> = segsparse::Result<T>;

/// prims-bench: GPU radix sort, compaction, split, segmented reduce, segmented sort and the
/// paper's quicksort, against the copy bandwidth measured in the same process and the CPU sorts.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Fewer sizes and repetitions.
    #[arg(long)]
    quick: bool,
    /// Output: markdown tables, or one JSON object per measurement.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
    /// Only these sections (comma-separated: sort, paper, compact, segreduce); all by default.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// log2 of the radix sort sizes (u32 keys and u32 key-value pairs).
    #[arg(long, value_delimiter = ',', default_values_t = [22u32, 24, 26])]
    sort_sizes: Vec<u32>,
}

/// Prints a markdown line unless the output is JSON.
macro_rules! md {
    ($json:expr, $($arg:tt)*) => {
        if !$json {
            println!($($arg)*);
        }
    };
}

/// One JSON record (only in JSON mode).
#[allow(clippy::too_many_arguments)]
fn emit(
    json: bool,
    g: &Gpu,
    op: &str,
    variant: &str,
    dtype: &str,
    n: usize,
    segment: Value,
    t: f64,
) {
    if json {
        Record {
            tool: "segsparse",
            op,
            variant,
            dtype,
            n,
            segment,
            us: t * 1e6,
            device: g.name(),
            extra: record::extra([]),
        }
        .print();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median seconds of `reps` runs of `f(true)` after two warm-ups; `f(false)` (the reset of
/// the input) runs before each, untimed.
fn time_gpu(g: &Gpu, reps: usize, mut f: impl FnMut(bool) -> Res<()>) -> Res<f64> {
    let mut t = Vec::new();
    for i in 0..reps + 2 {
        f(false)?;
        g.synchronize()?;
        let s = g.time(|| f(true))?;
        if i >= 2 {
            t.push(s);
        }
    }
    Ok(median(t))
}

fn copy_into<T: KernelType>(g: &Gpu, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>) -> Res<()> {
    g.stream()
        .memcpy_dtod(src, dst)
        .map_err(|e| segsparse::Error::cuda("memcpy", e))
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prims-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let quick = cli.quick;
    let json = cli.format == Format::Json;
    let reps = if quick { 5 } else { 20 };
    let want = |section: &str| cli.only.is_empty() || cli.only.iter().any(|o| o == section);
    let g = record::gpu_or_exit("prims-bench", Gpu::new())?;
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let bw = g.copy_bandwidth(1 << 28, 10)?;
    md!(
        json,
        "device: {} ({} SMs), copy bandwidth {:.0} GB/s (read+write)",
        g.name(),
        g.sm_count(),
        bw / 1e9
    );
    md!(
        json,
        "CPU threads (rayon): {}",
        rayon::current_num_threads()
    );

    // ---------------- radix sort
    md!(json, "\n## Radix sort (keys only unless noted)\n");
    md!(json, "| keys | n | GPU time | Gkeys/s | CUB (issue) | vs CUB | GB/s moved (3 passes of I/O per digit) |");
    md!(json, "|---|---|---|---|---|---|---|");
    let sort_row =
        |name: &str, n: usize, t: f64, cub: Option<f64>, bytes_per_key_pass: f64, passes: f64| {
            let gk = n as f64 / t / 1e9;
            let cubs = cub
                .map(|c| format!("{:.0} µs", c * 1e6))
                .unwrap_or("–".into());
            let vs = cub.map(|c| format!("{:.2}×", t / c)).unwrap_or("–".into());
            let gbs = n as f64 * bytes_per_key_pass * passes / t / 1e9;
            md!(
                json,
                "| {name} | 2^{} | {:.0} µs | {:.2} | {cubs} | {vs} | {:.0} |",
                n.trailing_zeros(),
                t * 1e6,
                gk,
                gbs
            );
        };
    for &lg in cli.sort_sizes.iter().filter(|_| want("sort")) {
        let cub = match lg {
            22 => Some(164e-6),
            24 => Some(457e-6),
            _ => None,
        };
        let n = 1usize << lg;
        let keys: Vec<u32> = (0..n).map(|_| r.gen()).collect();
        let src = g.upload(&keys)?;
        drop(keys);
        let mut d = g.zeros::<u32>(n)?;
        let reps = if lg >= 28 { reps.min(7) } else { reps };
        let t = time_gpu(&g, reps, |timed| {
            if timed {
                sort::gpu::radix_sort(&g, &mut d)
            } else {
                copy_into(&g, &src, &mut d)
            }
        })?;
        sort_row("u32", n, t, cub, 12.0, 4.0);
        emit(json, &g, "sort", "keys", "u32", n, Value::Null, t);
        let mut check = g.download(&d)?;
        let ok = check.windows(2).all(|w| w[0] <= w[1]);
        check.clear();
        md!(json, "| (u32 2^{lg} result sorted: {ok}) | | | | | | |");
        anyhow::ensure!(ok, "u32 2^{lg}: the GPU result is not sorted");
        let vals: Vec<u32> = (0..n as u32).collect();
        let vsrc = g.upload(&vals)?;
        drop(vals);
        let mut dv = g.zeros::<u32>(n)?;
        let t = time_gpu(&g, reps, |timed| {
            if timed {
                sort::gpu::radix_sort_pairs(&g, &mut d, &mut dv)
            } else {
                copy_into(&g, &src, &mut d)?;
                copy_into(&g, &vsrc, &mut dv)
            }
        })?;
        sort_row("u32 + u32 value", n, t, None, 20.0, 4.0);
        emit(json, &g, "sort", "pairs", "u32", n, Value::Null, t);
        drop((src, d, vsrc, dv));
        if lg == 24 {
            let kf: Vec<f32> = (0..n).map(|_| r.gen_range(-1e6f32..1e6)).collect();
            let fsrc = g.upload(&kf)?;
            let mut df = g.upload(&kf)?;
            let t = time_gpu(&g, reps, |timed| {
                if timed {
                    sort::gpu::radix_sort(&g, &mut df)
                } else {
                    copy_into(&g, &fsrc, &mut df)
                }
            })?;
            sort_row("f32", n, t, None, 12.0, 4.0);
            emit(json, &g, "sort", "keys", "f32", n, Value::Null, t);
            let k64: Vec<u64> = (0..n).map(|_| r.gen()).collect();
            let s64 = g.upload(&k64)?;
            let mut d64 = g.upload(&k64)?;
            let t = time_gpu(&g, reps, |timed| {
                if timed {
                    sort::gpu::radix_sort(&g, &mut d64)
                } else {
                    copy_into(&g, &s64, &mut d64)
                }
            })?;
            sort_row("u64", n, t, None, 24.0, 8.0);
            emit(json, &g, "sort", "keys", "u64", n, Value::Null, t);
        }
    }

    // ---------------- the paper's 4M sort table (markdown only)
    if !json && want("paper") {
        md!(
            json,
            "\n## The paper's sort table, 4M (2^22) random 32-bit keys\n"
        );
        let n = 1usize << 22;
        let keys: Vec<u32> = (0..n).map(|_| r.gen()).collect();
        let src = g.upload(&keys)?;
        let mut d = g.upload(&keys)?;
        let t_radix = time_gpu(&g, reps, |timed| {
            if timed {
                sort::gpu::radix_sort(&g, &mut d)
            } else {
                copy_into(&g, &src, &mut d)
            }
        })?;
        let mut passes = 0;
        let qreps = if quick { 1 } else { 3 };
        let t_q = time_gpu(&g, qreps, |timed| {
            if timed {
                passes = sort::gpu::quicksort(&g, &mut d)?;
                Ok(())
            } else {
                copy_into(&g, &src, &mut d)
            }
        })?;
        let qs_ok = {
            let h = g.download(&d)?;
            h.windows(2).all(|w| w[0] <= w[1])
        };
        let cpu = |f: &dyn Fn(&mut Vec<u32>)| {
            let mut t = Vec::new();
            for _ in 0..3 {
                let mut v = keys.clone();
                let s = Instant::now();
                f(&mut v);
                t.push(s.elapsed().as_secs_f64());
            }
            median(t)
        };
        let t_std = cpu(&|v| v.sort());
        let t_std_unstable = cpu(&|v| v.sort_unstable());
        let t_par = cpu(&|v| v.par_sort_unstable());
        let mut seg_times = Vec::new();
        // segmented sort of the same keys in 1024 segments of 4096
        let offs: Vec<u32> = (0..=1024u32).map(|i| i * 4096).collect();
        let doffs = g.upload(&offs)?;
        let t_seg = time_gpu(&g, if quick { 2 } else { 5 }, |timed| {
            if timed {
                sort::gpu::segmented_sort(&g, &mut d, &doffs)
            } else {
                copy_into(&g, &src, &mut d)
            }
        })?;
        seg_times.push(t_seg);
        md!(
            json,
            "| test | paper (8800 GTX, 2007) | today | device / CPU |"
        );
        md!(json, "|---|---|---|---|");
        md!(
            json,
            "| GPU global radix | 165.0 ms | {:.3} ms | this GPU, 8-bit digits, 4 passes |",
            t_radix * 1e3
        );
        md!(json,
        "| GPU radix/merge | 317.8 ms | – (not built: the global radix sort needs no merge) | |"
    );
        md!(json, "| CPU STL sort (std::sort) | 571.7 ms | {:.1} ms (`slice::sort_unstable`, 1 thread) | host of the GPU machine |", t_std_unstable * 1e3);
        md!(
            json,
            "| CPU stable sort | – | {:.1} ms (`slice::sort`, 1 thread) | host |",
            t_std * 1e3
        );
        md!(
            json,
            "| CPU parallel sort | – | {:.1} ms (`par_sort_unstable`, {} threads) | host |",
            t_par * 1e3,
            rayon::current_num_threads()
        );
        md!(json, "| GPU quicksort (paper: per block + merge) | 2050.3 ms | {:.1} ms, {passes} passes, sorted: {qs_ok} (segmented quicksort over the whole vector, §4.1) | this GPU |", t_q * 1e3);
        md!(
            json,
            "| GPU segmented sort (1024 segments × 4096) | – | {:.3} ms | this GPU |",
            t_seg * 1e3
        );
        md!(
            json,
            "\nradix vs std::sort_unstable: {:.0}× (paper: global radix 3.5× faster than STL)",
            t_std_unstable / t_radix
        );
    }

    if want("compact") {
        // ---------------- compaction
        md!(json, "\n## Compaction (stream reduction), 60% kept\n");
        md!(json, "| n | flagged f32 | GB/s (n·(4+1/8) read + 0.6n·4 write) | vs CUB select 2^26 (229 µs) | predicate f32 (x < c) | split u32 |");
        md!(json, "|---|---|---|---|---|---|");
        let sizes: &[u32] = if quick { &[20, 26] } else { &[20, 22, 24, 26] };
        for &lg in sizes {
            let n = 1usize << lg;
            let v: Vec<f32> = (0..n).map(|_| r.gen_range(0.0f32..1.0)).collect();
            let f: Vec<bool> = v.iter().map(|&x| x < 0.6).collect();
            let dv = g.upload(&v)?;
            let fw = g.upload(&pack_flags(&f))?;
            let t = time_gpu(&g, reps, |timed| {
                if !timed {
                    Ok(())
                } else {
                    compact::gpu::compact(&g, &dv, &fw).map(|_| ())
                }
            })?;
            let tp = time_gpu(&g, reps, |timed| {
                if !timed {
                    Ok(())
                } else {
                    compact::gpu::compact_if(&g, &dv, Keep::Less(0.6)).map(|_| ())
                }
            })?;
            let du = g.upload(&v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())?;
            let ts = time_gpu(&g, reps, |timed| {
                if !timed {
                    Ok(())
                } else {
                    split::gpu::split(&g, &du, &fw).map(|_| ())
                }
            })?;
            emit(json, &g, "compact", "flagged", "f32", n, Value::Null, t);
            emit(json, &g, "compact", "if", "f32", n, Value::Null, tp);
            let bytes = n as f64 * (4.0 + 0.125) + 0.6 * n as f64 * 4.0;
            let vs = if lg == 26 {
                format!("{:.2}×", t / 229e-6)
            } else {
                "–".into()
            };
            md!(
                json,
                "| 2^{lg} | {:.1} µs | {:.0} | {vs} | {:.1} µs | {:.1} µs |",
                t * 1e6,
                bytes / t / 1e9,
                tp * 1e6,
                ts * 1e6
            );
        }
        md!(json, "\nRoger et al. 2007 report only ratios (their GeForce 8800 GTS OpenGL method was ~2.5× slower than a CUDA scan+scatter); our absolute times at 1M/4M/16M are the 2^20/2^22/2^24 rows.");
    }

    if want("segreduce") {
        // ---------------- segmented reduce
        md!(json, "\n## Segmented reduce, f32 plus, n = 2^26\n");
        md!(json, "| segment length | segments | time | GB/s (values + offsets + results) | goal ≤ 100 µs | CUB (issue, len 100) |");
        md!(json, "|---|---|---|---|---|---|");
        let n = 1usize << 26;
        let v: Vec<f32> = (0..n).map(|_| r.gen_range(-1.0f32..1.0)).collect();
        let dv = g.upload(&v)?;
        for len in [1usize, 32, 100, 1024, 65536, 0] {
            let offs: Vec<u32> = if len == 0 {
                // random lengths 0..=2000
                let mut o = vec![0u32];
                while (*o.last().unwrap() as usize) < n {
                    let l = r.gen_range(0..=2000u32);
                    o.push((*o.last().unwrap() + l).min(n as u32));
                }
                o
            } else {
                let mut o: Vec<u32> = (0..n.div_ceil(len)).map(|s| (s * len) as u32).collect();
                o.push(n as u32);
                o
            };
            let m = offs.len() - 1;
            let d_off = g.upload(&offs)?;
            let t = time_gpu(&g, reps, |timed| {
                if !timed {
                    return Ok(());
                }
                segreduce::gpu::segmented_reduce_offsets(&g, &dv, &d_off, ScanOp::Plus).map(|_| ())
            })?;
            let seg = record::segment((len > 0).then_some(len), len == 0);
            emit(json, &g, "segreduce", "plus", "f32", n, seg, t);
            let bytes = n as f64 * 4.0 + (m as f64 + 1.0) * 4.0 + m as f64 * 4.0;
            let name = if len == 0 {
                "random 0..2000".to_string()
            } else {
                len.to_string()
            };
            let goal = if t <= 100e-6 { "met" } else { "missed" };
            let cub = if len == 100 {
                format!("758 µs ({:.1}× ours)", 758e-6 / t)
            } else {
                "–".into()
            };
            md!(
                json,
                "| {name} | {m} | {:.1} µs | {:.0} | {goal} | {cub} |",
                t * 1e6,
                bytes / t / 1e9
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own consistency checks, and `--help` opens with this tool's description (not the
    /// crate's).
    #[test]
    fn verify_cli() {
        let cmd = super::Cli::command();
        cmd.clone().debug_assert();
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        assert!(about.starts_with("prims-bench:"), "{about}");
    }
}
