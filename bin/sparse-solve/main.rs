//! `sparse-solve`: solve `A·x = b` with CG, Jacobi-PCG or BiCGSTAB on the CPU or the GPU (see
//! `sparse-solve --help`).
//!
//! `main` parses and maps the outcome to an exit code; [`run`] does the work (the ripgrep
//! layout). Exit codes: 0 converged, 2 the solver broke down or did not converge (one line on
//! stderr says why; `--format json` still prints its object, with `"converged": false`), 1 any
//! other error (a bad file, no GPU for `--backend gpu`, ...).

mod cli;
mod dist;
mod plot;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::solvers::{
    bicgstab, cg, pcg, Cpu, Identity, Jacobi, LinearOperator, Progress, SolveError, SolveInfo,
    SolveParams, VectorOps,
};
use segsparse::{CsrMatrix, Precision, Scalar};

use cli::{BackendArg, Cli, Format, MethodArg, PrecisionArg};

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            let mut msg = String::new();
            for c in e.chain() {
                let c = c.to_string();
                if !msg.contains(&c) {
                    if !msg.is_empty() {
                        msg.push_str(": ");
                    }
                    msg.push_str(&c);
                }
            }
            eprintln!("sparse-solve: error: {}", msg.replace('\n', "; "));
            ExitCode::FAILURE
        }
    }
}

/// A relative matrix path is looked up in the current directory, then beside each ancestor of
/// the executable, so `matrices/raefsky2.mtx.gz` works from anywhere in a clone.
fn resolve(arg: &str) -> String {
    let p = Path::new(arg);
    if p.is_absolute() || p.exists() || segsparse::generate::is_spec(arg) {
        return arg.to_string();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .map(|d| d.join(p))
                .find(|c| c.exists())
        })
        .map_or_else(|| arg.to_string(), |c| c.to_string_lossy().into_owned())
}

/// What one solve produced, for the report.
struct Outcome {
    method: &'static str,
    backend: String,
    result: std::result::Result<SolveInfo, SolveError>,
    seconds: f64,
}

/// Runs the solve described by `cli`.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.precision {
        PrecisionArg::F32 => run_typed::<f32>(&cli),
        PrecisionArg::F64 => run_typed::<f64>(&cli),
    }
}

fn run_typed<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    cli: &Cli,
) -> Result<ExitCode> {
    let precision = match cli.precision {
        PrecisionArg::F32 => Precision::F32,
        PrecisionArg::F64 => Precision::F64,
    };
    let path = resolve(&cli.matrix);
    let a: CsrMatrix<T> =
        segsparse::io::load(&path, cli.seed).with_context(|| format!("loading {}", cli.matrix))?;
    if a.nrows() != a.ncols() {
        bail!(
            "{}: the matrix is {}×{}; a linear solve needs a square matrix",
            cli.matrix,
            a.nrows(),
            a.ncols()
        );
    }
    let n = a.nrows();
    let b: Vec<T> = match cli.rhs.as_str() {
        "ones" => vec![T::one(); n],
        "random" => {
            let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
            (0..n)
                .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
                .collect()
        }
        file => {
            let v: Vec<T> = segsparse::io::read_vector(file)
                .with_context(|| format!("reading the right-hand side {file}"))?;
            if v.len() != n {
                bail!(
                    "{file}: right-hand side has {} entries, the matrix {n} rows",
                    v.len()
                );
            }
            v
        }
    };
    let symmetric = a.is_symmetric();
    let posdiag = a.diagonal().iter().all(|&d| d > T::zero());
    let method = match cli.method {
        MethodArg::Auto if symmetric && posdiag => MethodArg::Cg,
        MethodArg::Auto => MethodArg::Bicgstab,
        m => m,
    };
    let tol = cli.tol.unwrap_or(if T::BYTES == 4 { 1e-5 } else { 1e-8 });
    let params = SolveParams {
        rel_tol: tol,
        max_iters: cli.max_iters,
        check_every: cli.check_every,
        on_check: Some(progress),
        ..Default::default()
    };

    let use_gpu = match cli.backend {
        BackendArg::Cpu => false,
        BackendArg::Gpu => true,
        BackendArg::Auto => segsparse::gpu::Gpu::shared().is_ok(),
    };
    let mut x = vec![T::zero(); n];
    let out = if cli.gpus > 1 {
        dist::solve(&a, &b, &mut x, method, &params, cli.gpus)?
    } else if use_gpu {
        gpu_solve(&a, &b, &mut x, method, &params)?
    } else {
        let t = Instant::now();
        let threads = rayon::current_num_threads();
        let result = solve_with(&Cpu, &a, &a, method, &b, &mut x, &params)?;
        Outcome {
            method: method.name(),
            backend: format!("cpu ({threads} threads)"),
            result,
            seconds: t.elapsed().as_secs_f64(),
        }
    };
    clear_progress();

    if let Some(p) = &cli.output {
        segsparse::io::write_vector(p, &x).with_context(|| format!("writing {}", p.display()))?;
    }
    if let (Some(p), Ok(info)) = (&cli.plot, &out.result) {
        plot::residuals(p, &cli.matrix, out.method, &info.history, tol)
            .with_context(|| format!("writing the plot {}", p.display()))?;
    }
    if let (Some(_), Err(_)) = (&cli.plot, &out.result) {
        eprintln!("sparse-solve: no plot: the solve failed (its history is not kept on errors)");
    }

    let (iterations, residual, converged, reason) = match &out.result {
        Ok(i) => (i.iterations, i.relative_residual, true, None),
        Err(
            e @ SolveError::NotConverged {
                iterations,
                residual,
            },
        ) => (*iterations, *residual, false, Some(e)),
        Err(e @ SolveError::Breakdown { iteration, .. }) => (*iteration, f64::NAN, false, Some(e)),
        Err(e @ SolveError::NonFinite { iteration }) => (*iteration, f64::NAN, false, Some(e)),
        Err(e) => bail!("{e}"),
    };
    let seconds = out.result.as_ref().map_or(out.seconds, |i| i.seconds);
    let per_iter = if iterations > 0 {
        seconds / iterations as f64
    } else {
        0.0
    };
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    match cli.format {
        Format::Json => {
            let num = |v: f64| {
                if v.is_finite() {
                    format!("{v:e}")
                } else {
                    "null".into()
                }
            };
            writeln!(
                w,
                "{{\"matrix\":{},\"n\":{n},\"nnz\":{},\"method\":\"{}\",\"backend\":{},\
                 \"precision\":\"{precision}\",\"iterations\":{iterations},\"converged\":{converged},\
                 \"relative_residual\":{},\"tolerance\":{},\"seconds\":{},\
                 \"seconds_per_iteration\":{},\"error\":{}}}",
                json_str(&cli.matrix),
                a.nnz(),
                out.method,
                json_str(&out.backend),
                num(residual),
                num(tol),
                num(seconds),
                num(per_iter),
                reason.map_or("null".into(), |e| json_str(&e.to_string())),
            )?;
        }
        Format::Text => {
            writeln!(
                w,
                "matrix     {} ({n}×{n}, {} nonzeros, {})",
                cli.matrix,
                a.nnz(),
                if symmetric {
                    "symmetric"
                } else {
                    "unsymmetric"
                }
            )?;
            writeln!(
                w,
                "method     {}{}   backend {}   precision {precision}",
                out.method,
                if cli.method == MethodArg::Auto {
                    " (auto)"
                } else {
                    ""
                },
                out.backend
            )?;
            match &out.result {
                Ok(info) => writeln!(
                    w,
                    "converged  {iterations} iterations, relative residual {residual:.3e} \
                     (‖b − A·x‖/‖b‖, tolerance {tol:.1e}), {seconds:.4} s, {:.2} µs/iteration{}",
                    per_iter * 1e6,
                    if info.restarts > 0 {
                        format!(", {} restart(s)", info.restarts)
                    } else {
                        String::new()
                    }
                )?,
                Err(e) => writeln!(w, "FAILED     {e}")?,
            }
        }
    }
    w.flush()?;
    match reason {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => {
            eprintln!("sparse-solve: {}: {e}", out.method);
            Ok(ExitCode::from(2))
        }
    }
}

fn solve_with<T: Scalar, B: VectorOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    a: &CsrMatrix<T>,
    method: MethodArg,
    b: &[T],
    x: &mut Vec<T>,
    params: &SolveParams,
) -> Result<std::result::Result<SolveInfo, SolveError>> {
    let db = be.upload(b)?;
    let mut dx = be.upload(x)?;
    let r = match method {
        MethodArg::Cg => cg(be, op, &db, &mut dx, params),
        MethodArg::Pcg => {
            let j = Jacobi::from_matrix(be, a)?;
            pcg(be, op, &j, &db, &mut dx, params)
        }
        MethodArg::Bicgstab | MethodArg::Auto => bicgstab(be, op, &Identity, &db, &mut dx, params),
    };
    *x = be.download(&dx)?;
    match r {
        Err(SolveError::Backend(e)) => Err(e.into()),
        other => Ok(other),
    }
}

#[cfg(feature = "cuda")]
fn gpu_solve<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    method: MethodArg,
    params: &SolveParams,
) -> Result<Outcome> {
    use segsparse::solvers::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let t = Instant::now();
    let g = segsparse::gpu::Gpu::shared().context("--backend gpu")?;
    let ops = GpuOps::<T>::new(&g)?;
    let da = GpuCsr::upload(&g, a)?;
    let result = solve_with(&ops, &da, a, method, b, x, params)?;
    Ok(Outcome {
        method: method.name(),
        backend: format!("gpu ({})", g.name()),
        result,
        seconds: t.elapsed().as_secs_f64(),
    })
}

#[cfg(not(feature = "cuda"))]
fn gpu_solve<T: Scalar>(
    _: &CsrMatrix<T>,
    _: &[T],
    _: &mut Vec<T>,
    _: MethodArg,
    _: &SolveParams,
) -> Result<Outcome> {
    bail!("--backend gpu: sparse-solve was built without the `cuda` feature")
}

/// Milliseconds (since the solve started) of the last progress line; 0 = none drawn.
static LAST_PROGRESS_MS: AtomicU64 = AtomicU64::new(0);

/// The progress line: after the first second, at most every half second.
fn progress(p: &Progress) {
    let ms = (p.seconds * 1e3) as u64;
    let last = LAST_PROGRESS_MS.load(Ordering::Relaxed);
    if ms < 1000 || ms < last + 500 {
        return;
    }
    LAST_PROGRESS_MS.store(ms, Ordering::Relaxed);
    let line = format!(
        "iteration {:>7}   relative residual {:.3e}   {:.1} s",
        p.iteration, p.relative_residual, p.seconds
    );
    let mut e = std::io::stderr().lock();
    if e.is_terminal() {
        let _ = write!(e, "\r{line}");
    } else {
        let _ = writeln!(e, "{line}");
    }
    let _ = e.flush();
}

fn clear_progress() {
    if LAST_PROGRESS_MS.load(Ordering::Relaxed) > 0 && std::io::stderr().is_terminal() {
        eprint!("\r{:60}\r", "");
    }
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
