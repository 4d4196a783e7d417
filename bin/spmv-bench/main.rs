//! `spmv-bench`: sparse matrix–vector product benchmark (see `spmv-bench --help`).
//!
//! `main` only parses and maps the outcome to an exit code; [`run`] does the work and returns
//! `anyhow::Result<ExitCode>` (the ripgrep layout). Every error, a bad file included, ends the
//! program with one line on stderr and exit code 1; a closed stdout (`spmv-bench | head`) is not
//! an error.

mod cli;
mod complex;
#[cfg(feature = "peers")]
mod gpu;
#[cfg(not(feature = "peers"))]
mod gpu {
    //! Built without the `peers` feature (which brings `cuda`): no GPU rows.
    pub fn open() -> Result<Vec<Box<dyn crate::implementations::Implementation>>, String> {
        Err("built without the `peers` feature".into())
    }
    pub fn write_gpu_table(
        _: &mut impl std::io::Write,
        _: &[crate::output::Row],
    ) -> std::io::Result<()> {
        Ok(())
    }
    pub fn copy_gbs() -> Option<f64> {
        None
    }
    pub fn auto_choices() -> serde_json::Value {
        serde_json::Value::Null
    }
}
mod implementations;
mod output;
mod spmm;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::spmv::cpu;
use segsparse::{CsrMatrix, Precision};

use cli::{BackendArg, Cli, Format};
use implementations::{cpu_implementations, Implementation, Problem, Timing};
use output::Row;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("spmv-bench: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line. segsparse's messages already include their source
/// (`file: No such file or directory`), so a cause whose text is already there is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !msg.contains(&c) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&c);
        }
    }
    msg.replace('\n', "; ")
}

/// Looks a relative matrix path up in the current directory, then beside each ancestor of the
/// executable (`target/release/spmv-bench` → `target/release`, `target`, the repository root,
/// ...), so the default `matrices/raefsky2.mtx.gz` is found from anywhere in a clone. Specs and
/// paths found nowhere are returned unchanged (the loader then reports them).
/// Loads a file or a spec; `NAME+rcm` loads `NAME` and renumbers its rows and columns in
/// reverse Cuthill–McKee order (of the symmetrised pattern; the same permutation on both sides).
fn load(name: &str, seed: u64) -> Result<CsrMatrix<f64>> {
    let (base, rcm) = match name.strip_suffix("+rcm") {
        Some(b) => (b, true),
        None => (name, false),
    };
    let a: CsrMatrix<f64> = segsparse::load(&resolve(base), seed)?;
    if !rcm {
        return Ok(a);
    }
    if a.nrows() != a.ncols() {
        anyhow::bail!(
            "{name}: a reverse Cuthill–McKee order needs a square matrix, not {} × {}",
            a.nrows(),
            a.ncols()
        );
    }
    let order = segsparse::sparse::reorder::rcm(&a);
    Ok(segsparse::sparse::reorder::permute(&a, &order, &order, false)?.0)
}

fn resolve(arg: &str) -> String {
    let p = Path::new(arg);
    if p.is_absolute() || p.exists() || segsparse::generate::is_spec(arg) {
        return arg.to_string();
    }
    let found: Option<PathBuf> = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .skip(1)
            .map(|d| d.join(p))
            .find(|c| c.exists())
    });
    found.map_or_else(|| arg.to_string(), |c| c.to_string_lossy().into_owned())
}

/// The implementations for `--backend`, in report order: the GPU rows (`gpu.rs`) first when a
/// device opens, then the CPU rows.
fn implementations(backend: BackendArg) -> Result<Vec<Box<dyn Implementation>>> {
    match backend {
        BackendArg::Cpu => Ok(cpu_implementations()),
        BackendArg::Auto => match gpu::open() {
            Ok(mut all) => {
                all.extend(cpu_implementations());
                Ok(all)
            }
            Err(_) => Ok(cpu_implementations()),
        },
        // Gpu::new()'s message ends with the CPU fallback that library callers get; this
        // program exits instead, so that clause is dropped.
        BackendArg::Gpu => gpu::open()
            .map_err(|e| anyhow::anyhow!("no GPU: {}", e.trim_end_matches("; using the CPU"))),
    }
}

/// Runs the benchmark described by `cli`.
pub fn run(cli: Cli) -> Result<ExitCode> {
    if cli.precision.is_complex() {
        complex::run(&cli, resolve)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Memory preflight, from each file's header, before anything is opened or read:
    // the f64 matrix and its f32 copy (8 bytes per entry, 4 per row), x in both precisions,
    // and per row the f64 reference, y and its downloaded copy.
    for name in &cli.matrices {
        segsparse::io::check_matrix_file::<f64>(&resolve(name), "spmv-bench", 28, 12, 8)?;
    }
    if !cli.rhs.is_empty() {
        return spmm::run(&cli, &resolve);
    }
    // Choose implementations first: `--backend gpu` fails here, before any loading.
    let imps = implementations(cli.backend)?;
    let precisions = cli.precision.list();
    let timing = Timing {
        iters: cli.iters as usize,
        min_sample_s: 1e-3,
        warmup_s: cli.warmup_ms.max(0.0) * 1e-3,
    };
    let threads = rayon::current_num_threads();
    let stdout = io::stdout();
    let mut out = stdout.lock();

    let steps = (cli.matrices.len() * imps.len() * precisions.len()) as u64;
    let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .expect("static template")
            .progress_chars("=> "),
    );
    // Several matrices or a large one: show progress; else the bar stays hidden.
    let mut show = cli.matrices.len() > 1;
    if !show {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }

    // CSV goes through one writer for the whole run: the header comes once, before the first row.
    let mut csv_out = (cli.format == Format::Csv).then(|| output::csv_writer(io::stdout()));
    for name in &cli.matrices {
        bar.set_message(format!("loading {name}"));
        let t0 = Instant::now();
        let a64: CsrMatrix<f64> = load(name, cli.seed)?;
        let load_s = t0.elapsed().as_secs_f64();
        if !show && a64.nnz() >= 5_000_000 {
            show = true;
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        if a64.has_non_finite() {
            bar.suspend(|| {
                eprintln!(
                    "spmv-bench: warning: {name} contains NaN or infinite values; \
                     they propagate into y and the reference alike"
                )
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
        let x64: Vec<f64> = (0..a64.ncols()).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let p = Problem {
            a32: a64.cast(),
            x32: x64.iter().map(|&v| v as f32).collect(),
            a64,
            x64,
        };
        let shape = (p.a64.nrows(), p.a64.ncols(), p.a64.nnz());
        let mut rows: Vec<Row> = Vec::new();
        for &prec in &precisions {
            // The reference uses the inputs of this precision (the f32 run is judged on its
            // arithmetic, not on the rounding of A and x to f32).
            let (reference, bytes) = match prec {
                Precision::F32 => (cpu::spmv_f64_reference(&p.a32, &p.x32), p.a32.spmv_bytes()),
                Precision::F64 => (cpu::spmv_f64_reference(&p.a64, &p.x64), p.a64.spmv_bytes()),
            };
            for imp in &imps {
                bar.set_message(format!("{name}: {} {prec}", imp.name()));
                let m = match imp.run(&p, prec, &timing) {
                    Ok(m) => m,
                    // A GPU peer that cannot run here (cuSPARSE missing) gets a row saying so;
                    // nothing else fails.
                    Err(e) if imp.backend() == implementations::Backend::Gpu => {
                        let mut r = Row::measured(
                            name,
                            shape,
                            &format!("{} ({e})", imp.name()),
                            &prec.to_string(),
                            "gpu",
                            f64::NAN,
                            bytes,
                            f64::NAN,
                        );
                        r.source = "unavailable";
                        rows.push(r);
                        bar.inc(1);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let err = cpu::max_rel_err(&m.y, &reference);
                let preprocess_ms = m.preprocess_s * 1e3;
                rows.push(Row::measured(
                    name,
                    shape,
                    imp.name(),
                    &prec.to_string(),
                    &imp.backend().to_string(),
                    m.median_s,
                    bytes,
                    err,
                ));
                if let Some(r) = rows.last_mut() {
                    r.preprocess_ms = preprocess_ms;
                }
                bar.inc(1);
            }
        }
        output::fill_speedups(&mut rows);
        if let Some(copy) = gpu::copy_gbs() {
            for r in rows.iter_mut().filter(|r| r.backend == "gpu") {
                r.copy_gbs = copy;
            }
        }
        rows.extend(output::paper_rows(name, &p.a64));
        bar.suspend(|| -> io::Result<()> {
            match cli.format {
                Format::Table => {
                    output::write_matrix_header(
                        &mut out,
                        name,
                        &p.a64,
                        &p.a64.row_stats(),
                        load_s,
                    )?;
                    output::write_table(&mut out, &rows, threads)?;
                    gpu::write_gpu_table(&mut out, &rows)?;
                }
                Format::Json => {
                    for r in &rows {
                        output::write_json(&mut out, r)?;
                    }
                    if cli.features {
                        let f = segsparse::spmv::select::SpmvFeatures::of(&p.a64);
                        let feats: serde_json::Map<String, serde_json::Value> = f
                            .named()
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                            .collect();
                        let line = serde_json::json!({
                            "matrix": name,
                            "features": feats,
                            "auto": gpu::auto_choices(),
                        });
                        writeln!(out, "{line}")?;
                    }
                }
                Format::Csv => {
                    if let Some(w) = csv_out.as_mut() {
                        for r in &rows {
                            output::write_csv(w, r)?;
                        }
                    }
                }
            }
            out.flush()
        })?;
    }
    bar.finish_and_clear();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use implementations::Backend;

    #[test]
    fn backend_gpu_is_an_error_or_gpu_rows() {
        // `--backend gpu` must hold on every machine: an error naming the missing device (or the
        // feature) without a GPU, else only GPU rows, segsparse's auto first and both cuSPARSE
        // algorithms among them.
        match implementations(BackendArg::Gpu) {
            Err(e) => assert!(e.to_string().starts_with("no GPU: "), "{e}"),
            Ok(gpu) => {
                assert!(gpu.iter().all(|i| i.backend() == Backend::Gpu));
                let names: Vec<&str> = gpu.iter().map(|i| i.name()).collect();
                assert_eq!(names.first(), Some(&"segsparse gpu auto"), "{names:?}");
                for want in ["cusparse-alg1", "cusparse-alg2", "segsparse gpu fused"] {
                    assert!(names.contains(&want), "{want} missing from {names:?}");
                }
            }
        }
    }
}
