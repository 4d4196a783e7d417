//! `scan-bench`: throughput of every GPU scan algorithm against the device's copy bandwidth
//! measured in the same process, and the experiment of Sengupta et al. (2007, §5) beside the
//! paper's GeForce 8800 GTX figures.
//!
//! Timing: CUDA events around `--batch` back-to-back calls (so host launch overhead is hidden
//! as it is in a real pipeline), divided by the batch, after warm-up; the median of `--reps`
//! such samples. Bytes: each input read once and each output written once — 8 per element for
//! an f32 scan, plus n/8 for packed head flags or 4·(m+1) for m segment offsets.
//!
//! `--format json` prints one JSON object per measurement instead of markdown, in the format of
//! the CUB peer harness (`benches/prims/`), for `benches/prims/merge.py`.

mod record;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use record::{Format, Record};
use segsparse::gpu::{DeviceBuffer, Gpu, KernelType};
use segsparse::primitives::gpu::{self as pg, HeadFlags};
use segsparse::primitives::{cpu, ScanAlgorithm, ScanElem, ScanKind, ScanOp, ScanSpec};
use serde_json::Value;

/// scan-bench: throughput of segsparse's GPU scans and segmented scans (every algorithm, both
/// directions) against the copy bandwidth measured in the same process, and the experiment of
/// Sengupta et al. (2007, §5).
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Output: markdown tables, or one JSON object per measurement.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
    /// Also measure f64 plain scans.
    #[arg(long)]
    f64: bool,
    /// Also measure exclusive plain scans.
    #[arg(long)]
    exclusive: bool,
    /// Timed samples per measurement (median reported).
    #[arg(long, default_value_t = 15)]
    reps: usize,
    /// Calls per timed sample.
    #[arg(long, default_value_t = 10)]
    batch: usize,
    /// Only the look-back algorithm (for policy sweeps with SEGSPARSE_SCAN_POLICY).
    #[arg(long)]
    lookback_only: bool,
    /// Plain scans only (no segmented rows, no CPU row).
    #[arg(long)]
    scan_only: bool,
    /// Skip the paper experiment and the Figure 5 sweep.
    #[arg(long)]
    no_paper: bool,
    /// log2 of the sizes for the main table.
    #[arg(long, value_delimiter = ',', default_values_t = vec![20u32, 24, 26])]
    sizes: Vec<u32>,
    /// Skip the 2^28 plain-scan rows.
    #[arg(long)]
    no_big: bool,
}

/// Segment structure of a segmented measurement.
#[derive(Clone, Copy, Debug)]
enum Segs {
    Fixed(usize),
    Random,
}

impl Segs {
    fn name(self) -> String {
        match self {
            Segs::Fixed(l) => l.to_string(),
            Segs::Random => "random".into(),
        }
    }
    fn offsets(self, n: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
        let mut o = vec![0u32];
        let mut at = 0usize;
        while at < n {
            let len = match self {
                Segs::Fixed(l) => l,
                // lengths uniform in 0..=2048 (mean 1024, empty segments included)
                Segs::Random => rng.gen_range(0..=2048),
            };
            at = (at + len).min(n);
            o.push(at as u32);
        }
        o
    }
}

struct Bench<'a> {
    g: &'a Gpu,
    reps: usize,
    batch: usize,
    copy_bw: f64,
    format: Format,
}

/// What one row measured.
struct Row<'a> {
    n: usize,
    /// "scan" or "segscan".
    op: &'static str,
    /// "-", "flags" or "offsets".
    input: &'static str,
    segs: Option<Segs>,
    spec: ScanSpec,
    alg: ScanAlgorithm,
    dtype: &'a str,
}

impl Bench<'_> {
    /// Median seconds per call of `f`.
    fn time(&self, mut f: impl FnMut() -> segsparse::Result<()>) -> Result<f64> {
        for _ in 0..3 {
            f()?;
        }
        self.g.synchronize()?;
        let mut t = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            let s = self.g.time(|| {
                for _ in 0..self.batch {
                    f()?;
                }
                Ok(())
            })?;
            t.push(s / self.batch as f64);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }

    fn row(&self, r: &Row, secs: f64, bytes: f64) {
        let gbs = bytes / secs / 1e9;
        let of_copy = bytes / secs / self.copy_bw;
        let dir = match r.spec.direction {
            segsparse::primitives::Direction::Forward => "fwd",
            segsparse::primitives::Direction::Backward => "bwd",
        };
        let kind = match r.spec.kind {
            ScanKind::Inclusive => "inclusive",
            ScanKind::Exclusive => "exclusive",
        };
        let segs = r.segs.map_or("-".to_string(), Segs::name);
        match self.format {
            Format::Markdown => println!(
                "| 2^{} | {} | {} | {} | {segs} | {dir} | {kind} | {} | {:.1} | {gbs:.0} | {:.0} % |",
                r.n.trailing_zeros(),
                r.dtype,
                r.op,
                r.input,
                r.alg.name(),
                secs * 1e6,
                100.0 * of_copy
            ),
            Format::Json => Record {
                tool: "segsparse",
                op: r.op,
                variant: kind,
                dtype: r.dtype,
                n: r.n,
                segment: match r.segs {
                    None => Value::Null,
                    Some(Segs::Random) => record::segment(None, true),
                    Some(Segs::Fixed(l)) => record::segment(Some(l), false),
                },
                us: secs * 1e6,
                device: self.g.name(),
                extra: record::extra([
                    ("direction", dir.into()),
                    ("algorithm", r.alg.name().into()),
                    ("input", r.input.into()),
                    ("gbs", gbs.into()),
                    ("of_copy", of_copy.into()),
                    ("reps", self.reps.into()),
                    ("batch", self.batch.into()),
                ]),
            }
            .print(),
        }
    }
}

fn algs(cli: &Cli) -> Vec<ScanAlgorithm> {
    if cli.lookback_only {
        vec![ScanAlgorithm::DecoupledLookback]
    } else {
        ScanAlgorithm::ALL.to_vec()
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scan-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Plain scans of `host` (uploaded), every selected algorithm, kind and direction.
fn scan_rows<T: ScanElem + KernelType>(
    b: &Bench,
    cli: &Cli,
    host: &[T],
    dtype: &str,
) -> Result<()> {
    let g = b.g;
    let n = host.len();
    let x = g.upload(host)?;
    let mut y: DeviceBuffer<T> = g.zeros(n)?;
    let mut ws = pg::workspace(g, n)?;
    let mut specs = vec![ScanSpec::inclusive(ScanOp::Plus)];
    if cli.exclusive {
        specs.push(ScanSpec::exclusive(ScanOp::Plus));
    }
    for alg in algs(cli) {
        for &s in &specs {
            for spec in [s, s.backward()] {
                let t = b.time(|| pg::scan_with(g, &x, &mut y, spec, alg, &mut ws))?;
                let r = Row {
                    n,
                    op: "scan",
                    input: "-",
                    segs: None,
                    spec,
                    alg,
                    dtype,
                };
                b.row(&r, t, 2.0 * std::mem::size_of_val(host) as f64);
            }
        }
    }
    Ok(())
}

fn run(cli: Cli) -> Result<()> {
    let g = record::gpu_or_exit("scan-bench", Gpu::new())?;
    let copy_bw = g.copy_bandwidth(1 << 29, 20)?;
    let class = segsparse::primitives::gpu::device_class(&g);
    let policy = segsparse::primitives::policy::lookback(4, class);
    let header = format!(
        "device: {} ({} SMs, class {}); copy bandwidth {:.0} GB/s (read+write, 512 MiB, median of 20); \
         look-back policy f32 {}x{} f64 {}x{}, {} tile(s) per block, backoff {} ns, first delay {} ns, \
         min blocks {}, window 32x{}, variant {}; {} samples x {} calls",
        g.name(),
        g.sm_count(),
        class.name(),
        copy_bw / 1e9,
        policy.threads,
        policy.items,
        segsparse::primitives::policy::lookback(8, class).threads,
        segsparse::primitives::policy::lookback(8, class).items,
        segsparse::primitives::policy::lookback_tiles(class),
        segsparse::primitives::policy::lookback_backoff_ns(),
        segsparse::primitives::policy::lookback_first_delay_ns(class),
        segsparse::primitives::policy::lookback_min_blocks(class),
        segsparse::primitives::policy::lookback_k(),
        segsparse::primitives::policy::lookback_variant_name(),
        cli.reps,
        cli.batch
    );
    let json = cli.format == Format::Json;
    // In JSON mode the context goes to stderr, so stdout holds only records.
    let say = |line: &str| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(&header);
    if json {
        Record {
            tool: "segsparse",
            op: "copy",
            variant: "memcpy",
            dtype: "f32",
            n: 1 << 27,
            segment: Value::Null,
            us: (1u64 << 30) as f64 / copy_bw * 1e6,
            device: g.name(),
            extra: record::extra([("gbs", (copy_bw / 1e9).into())]),
        }
        .print();
    }
    for (label, seg) in [("scan", false), ("segscan", true)] {
        if seg && cli.scan_only {
            continue;
        }
        let (r4, b4) = pg::lookback_occupancy::<f32>(&g, seg)?;
        let (r8, b8) = pg::lookback_occupancy::<f64>(&g, seg)?;
        say(&format!(
            "{label}_lookback_plus: f32 {r4} registers, {b4} blocks/SM; f64 {r8} registers, {b8} blocks/SM"
        ));
    }
    let b = Bench {
        g: &g,
        reps: cli.reps,
        batch: cli.batch,
        copy_bw,
        format: cli.format,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let fwd = ScanSpec::inclusive(ScanOp::Plus);
    let bwd = fwd.backward();

    if !json {
        println!("\n## +-scan and segmented scan\n");
        println!("| n | type | what | input | segments | direction | kind | algorithm | µs | GB/s | of copy |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
    }
    let mut sizes: Vec<usize> = cli.sizes.iter().map(|&k| 1usize << k).collect();
    if !cli.no_big {
        sizes.push(1 << 28);
    }
    for &n in &sizes {
        let host: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        scan_rows(&b, &cli, &host, "f32")?;
        if cli.f64 {
            let h64: Vec<f64> = host.iter().map(|&v| f64::from(v)).collect();
            scan_rows(&b, &cli, &h64, "f64")?;
        }
        if n > 1 << 26 || cli.scan_only {
            continue; // 2^28: plain scan only
        }
        let x = g.upload(&host)?;
        drop(host);
        let mut y: DeviceBuffer<f32> = g.zeros(n)?;
        let mut ws = pg::workspace(&g, n)?;
        for segs in [
            Segs::Fixed(32),
            Segs::Fixed(1024),
            Segs::Fixed(65536),
            Segs::Random,
        ] {
            let offs = segs.offsets(n, &mut rng);
            let doffs = g.upload(&offs)?;
            let flags = HeadFlags::from_offsets(&g, &offs, n)?;
            for alg in algs(&cli) {
                for spec in [fwd, bwd] {
                    let mut r = Row {
                        n,
                        op: "segscan",
                        input: "flags",
                        segs: Some(segs),
                        spec,
                        alg,
                        dtype: "f32",
                    };
                    let t = b.time(|| {
                        pg::segmented_scan_with(&g, &x, &flags, &mut y, spec, alg, &mut ws)
                    })?;
                    b.row(&r, t, 8.0 * n as f64 + n as f64 / 8.0);
                    let t = b.time(|| {
                        pg::segmented_scan_offsets_with(&g, &x, &doffs, &mut y, spec, alg, &mut ws)
                    })?;
                    r.input = "offsets";
                    b.row(&r, t, 8.0 * n as f64 + 4.0 * offs.len() as f64);
                }
            }
        }
    }
    if json {
        return Ok(());
    }

    // The CPU (rayon) for reference, same accounting.
    if !cli.scan_only {
        let n = 1 << 24;
        let host: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let mut out = vec![0.0f32; n];
        let mut ts = Vec::new();
        for _ in 0..7 {
            let t0 = std::time::Instant::now();
            cpu::par_scan(&host, &mut out, fwd);
            ts.push(t0.elapsed().as_secs_f64());
        }
        ts.sort_by(f64::total_cmp);
        println!(
            "\nCPU par_scan f32 2^24 ({} threads): {:.0} µs, {:.1} GB/s",
            rayon::current_num_threads(),
            ts[3] * 1e6,
            8.0 * n as f64 / ts[3] / 1e9
        );
    }

    if cli.no_paper {
        return Ok(());
    }
    // Sengupta et al. 2007, §5: 1M elements, 128 threads (256 elements) per block.
    println!("\n## The paper's experiment: 1M (2^20) f32 elements\n");
    println!(
        "Segments for the segmented rows: random lengths 0..=2048. The paper's figures are the \
         GeForce 8800 GTX (2007)."
    );
    println!("\n| variant | 8800 GTX (paper) | work-efficient | warp-shuffle | look-back |");
    println!("|---|---|---|---|---|");
    let n = 1 << 20;
    let host: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let x = g.upload(&host)?;
    let mut y: DeviceBuffer<f32> = g.zeros(n)?;
    let mut ws = pg::workspace(&g, n)?;
    let offs = Segs::Random.offsets(n, &mut rng);
    let flags = HeadFlags::from_offsets(&g, &offs, n)?;
    let paper = [
        ("forward scan", 0.79, false, fwd),
        ("backward scan", 0.88, false, bwd),
        ("forward segmented scan", 2.61, true, fwd),
        ("backward segmented scan", 4.29, true, bwd),
    ];
    for (name, ms, seg, spec) in paper {
        let mut cells = vec![name.to_string(), format!("{ms:.2} ms")];
        for alg in [
            ScanAlgorithm::WorkEfficient,
            ScanAlgorithm::WarpShuffle,
            ScanAlgorithm::DecoupledLookback,
        ] {
            let t = if seg {
                b.time(|| pg::segmented_scan_with(&g, &x, &flags, &mut y, spec, alg, &mut ws))?
            } else {
                b.time(|| pg::scan_with(&g, &x, &mut y, spec, alg, &mut ws))?
            };
            cells.push(format!("{:.1} µs ({:.0}x)", t * 1e6, ms * 1e-3 / t));
        }
        println!("| {} |", cells.join(" | "));
    }

    println!("\n## Figure 5 sweep (µs per call, f32, random segment lengths 0..=2048)\n");
    println!(
        "| n | scan (work-efficient) | scan (look-back) | fwd segscan (work-efficient) | \
         bwd segscan (work-efficient) | fwd segscan (look-back) | bwd segscan (look-back) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for k in [12u32, 14, 16, 17, 18, 19, 20, 21, 22, 23] {
        let n = 1usize << k;
        let host: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let x = g.upload(&host)?;
        let mut y: DeviceBuffer<f32> = g.zeros(n)?;
        let mut ws = pg::workspace(&g, n)?;
        let offs = Segs::Random.offsets(n, &mut rng);
        let flags = HeadFlags::from_offsets(&g, &offs, n)?;
        let we = ScanAlgorithm::WorkEfficient;
        let lb = ScanAlgorithm::DecoupledLookback;
        let c = [
            b.time(|| pg::scan_with(&g, &x, &mut y, fwd, we, &mut ws))?,
            b.time(|| pg::scan_with(&g, &x, &mut y, fwd, lb, &mut ws))?,
            b.time(|| pg::segmented_scan_with(&g, &x, &flags, &mut y, fwd, we, &mut ws))?,
            b.time(|| pg::segmented_scan_with(&g, &x, &flags, &mut y, bwd, we, &mut ws))?,
            b.time(|| pg::segmented_scan_with(&g, &x, &flags, &mut y, fwd, lb, &mut ws))?,
            b.time(|| pg::segmented_scan_with(&g, &x, &flags, &mut y, bwd, lb, &mut ws))?,
        ];
        let cells: Vec<String> = c.iter().map(|t| format!("{:.1}", t * 1e6)).collect();
        println!("| 2^{k} | {} |", cells.join(" | "));
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
        assert!(about.starts_with("scan-bench:"), "{about}");
    }
}
