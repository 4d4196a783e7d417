//! `spmv-bench --rhs K`: sparse matrix times a dense block of K columns, `Y ← A·X`.
//!
//! Per matrix, precision and K (one JSON object per line with `--format json`, else a table):
//! segsparse's SpMM with X row-major and column-major, cuSPARSE `cusparseSpMM` with every CSR
//! algorithm in both layouts (an algorithm that rejects a layout gets a row saying so), K
//! separate SpMVs (segsparse's, the loop a user writes today) and one SpMV, all on the same
//! uploaded matrix in the same process, timed with CUDA events around batches of back-to-back
//! products (median of `--iters` batches of at least a millisecond). A summary row per K gives
//! the best cuSPARSE algorithm over the best segsparse layout, and the SpMM's time in SpMVs.
//! Errors are `max |y − y_ref| / max |y_ref|` against the CPU SpMM of the same precision.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::spmm::{self, Layout};
use segsparse::{CsrMatrix, Precision, Scalar};
use serde_json::{json, Value};

use crate::cli::{BackendArg, Cli, Format};

/// Median of `iters` samples, each a batch of `reps` calls lasting ≥ 1 ms, per call in seconds,
/// for a host-timed operation (the CPU rows).
fn time_host(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let t0 = std::time::Instant::now();
    f()?;
    let one = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((1e-3 / one).ceil() as usize).max(1);
    let mut v = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = std::time::Instant::now();
        for _ in 0..reps {
            f()?;
        }
        v.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    Ok(crate::implementations::median(&mut v))
}

fn rel_err<T: Scalar>(y: &[T], reference: &[T]) -> f64 {
    let scale = reference
        .iter()
        .fold(0f64, |m, v| m.max(v.as_f64().abs()))
        .max(f64::MIN_POSITIVE);
    y.iter()
        .zip(reference)
        .fold(0f64, |m, (a, b)| m.max((a.as_f64() - b.as_f64()).abs()))
        / scale
}

fn to_col_major<T: Copy>(rm: &[T], rows: usize, k: usize) -> Vec<T> {
    let mut cm = Vec::with_capacity(rm.len());
    for j in 0..k {
        for i in 0..rows {
            cm.push(rm[i * k + j]);
        }
    }
    cm
}

/// Runs the `--rhs` mode.
pub fn run(cli: &Cli, resolve: &dyn Fn(&str) -> String) -> Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let iters = cli.iters as usize;
    for name in &cli.matrices {
        segsparse::io::check_matrix_file::<f64>(&resolve(name), "spmv-bench", 28, 12, 8)?;
        let a64: CsrMatrix<f64> = segsparse::load(&resolve(name), cli.seed)?;
        for prec in cli.precision.list() {
            let rows = match prec {
                Precision::F32 => bench::<f32>(cli, name, &a64.cast(), iters)?,
                Precision::F64 => bench::<f64>(cli, name, &a64, iters)?,
            };
            for r in &rows {
                match cli.format {
                    Format::Json | Format::Csv => writeln!(out, "{r}")?,
                    Format::Table => write_row(&mut out, r)?,
                }
            }
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_row(out: &mut impl Write, r: &Value) -> io::Result<()> {
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    let f = |k: &str| r[k].as_f64().map_or("—".into(), |v| format!("{v:.3}"));
    if r["kind"] == "summary" {
        writeln!(
            out,
            "{:<28} {:<4} k={:<3} best ours {:<10} {:>9} µs | best cuSPARSE {:<22} {:>9} µs | ×cuSPARSE {:>6} | k SpMVs {:>9} µs | one SpMV {:>8} µs (SpMM = {} SpMVs)",
            s("matrix"),
            s("precision"),
            r["k"],
            s("ours_best"),
            f("ours_us"),
            s("cusparse_best"),
            f("cusparse_us"),
            f("speedup_vs_cusparse"),
            f("kfold_spmv_us"),
            f("spmv_us"),
            f("spmm_in_spmvs"),
        )
    } else {
        writeln!(
            out,
            "{:<28} {:<4} k={:<3} {:<26} {:<4} {:>10} µs {:>8} GB/s  err {:>9}{}",
            s("matrix"),
            s("precision"),
            r["k"],
            s("implementation"),
            s("layout"),
            f("median_us"),
            f("gbs"),
            r["rel_err"]
                .as_f64()
                .map_or("—".into(), |v| format!("{v:.1e}")),
            r["note"]
                .as_str()
                .map_or(String::new(), |n| format!("  ({n})")),
        )
    }
}

fn bench<T: Scalar + BenchGpu>(
    cli: &Cli,
    name: &str,
    a: &CsrMatrix<T>,
    iters: usize,
) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    let (n, m) = (a.nrows(), a.ncols());
    for &k in &cli.rhs {
        let k = k as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(cli.seed ^ k as u64);
        let x_rm: Vec<T> = (0..m * k)
            .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
            .collect();
        let x_cm = to_col_major(&x_rm, m, k);
        let mut y_ref = vec![T::zero(); n * k];
        spmm::spmm(
            T::one(),
            a,
            &x_rm,
            k,
            Layout::RowMajor,
            T::zero(),
            &mut y_ref,
        )?;
        let bytes = spmm::spmm_bytes(a, k) as f64;
        let base = |imp: &str, layout: &str, t: f64, err: f64| {
            json!({
                "kind": "time", "matrix": name, "nrows": n, "nnz": a.nnz(), "precision": T::NAME,
                "k": k, "implementation": imp, "layout": layout, "median_us": t * 1e6,
                "gbs": bytes / t / 1e9, "gflops": 2.0 * (a.nnz() * k) as f64 / t / 1e9,
                "rel_err": err,
            })
        };
        if cli.backend == BackendArg::Cpu {
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                let x = if layout == Layout::RowMajor {
                    &x_rm
                } else {
                    &x_cm
                };
                let mut y = vec![T::zero(); n * k];
                let t = time_host(iters, || {
                    spmm::spmm(T::one(), a, x, k, layout, T::zero(), &mut y)?;
                    Ok(())
                })?;
                let y_rm = if layout == Layout::RowMajor {
                    y.clone()
                } else {
                    to_col_major(&y, k, n) // transposing back: (k × n) col-major = (n × k) row-major
                };
                let mut r = base("cpu-spmm", layout.name(), t, rel_err(&y_rm, &y_ref));
                r["device"] = json!("cpu");
                rows.push(r);
            }
            let mut y = vec![T::zero(); n * k];
            let t = time_host(iters, || {
                for (xc, yc) in x_cm.chunks(m).zip(y.chunks_mut(n)) {
                    segsparse::spmv::spmv(T::one(), a, xc, T::zero(), yc);
                }
                Ok(())
            })?;
            let mut r = base(
                "cpu-k-spmv",
                "col",
                t,
                rel_err(&to_col_major(&y, k, n), &y_ref),
            );
            r["device"] = json!("cpu");
            rows.push(r);
            continue;
        }
        rows.extend(T::gpu_rows(a, k, &x_rm, &x_cm, &y_ref, iters, &base)?);
    }
    Ok(rows)
}

/// The GPU rows of one K (feature `peers`); an error without it.
pub trait BenchGpu: Sized {
    /// Every GPU row and the summary of one K.
    fn gpu_rows(
        a: &CsrMatrix<Self>,
        k: usize,
        x_rm: &[Self],
        x_cm: &[Self],
        y_ref: &[Self],
        iters: usize,
        base: &dyn Fn(&str, &str, f64, f64) -> Value,
    ) -> Result<Vec<Value>>;
}

#[cfg(not(feature = "peers"))]
impl<T> BenchGpu for T {
    fn gpu_rows(
        _: &CsrMatrix<T>,
        _: usize,
        _: &[T],
        _: &[T],
        _: &[T],
        _: usize,
        _: &dyn Fn(&str, &str, f64, f64) -> Value,
    ) -> Result<Vec<Value>> {
        anyhow::bail!("--rhs on the GPU: built without the `peers` feature (use --backend cpu)")
    }
}

#[cfg(feature = "peers")]
impl<T: segsparse::spmv::gpu::GpuScalar> BenchGpu for T {
    fn gpu_rows(
        a: &CsrMatrix<T>,
        k: usize,
        x_rm: &[T],
        x_cm: &[T],
        y_ref: &[T],
        iters: usize,
        base: &dyn Fn(&str, &str, f64, f64) -> Value,
    ) -> Result<Vec<Value>> {
        use segsparse::gpu::Gpu;
        use segsparse::spmm::gpu::{CusparseSpmm, CusparseSpmmAlg, GpuSpmm};
        use segsparse::spmv::gpu::{GpuCsr, SpmvAlgorithm};

        let g = Gpu::shared()?;
        let (n, m) = (a.nrows(), a.ncols());
        let d = GpuCsr::upload(&g, a)?;
        let ops = GpuSpmm::<T>::new(&g)?;
        let dx_rm = g.upload(x_rm)?;
        let dx_cm = g.upload(x_cm)?;
        let mut dy = g.zeros::<T>(n * k)?;
        // Median per call of `iters` event-timed batches of ≥ 1 ms.
        let time = |f: &mut dyn FnMut() -> segsparse::Result<()>| -> Result<f64> {
            for _ in 0..3 {
                f()?;
            }
            let one = g.time(&mut *f)?.max(1e-7);
            let reps = ((1e-3 / one).ceil() as usize).clamp(1, 100_000);
            let mut v = Vec::with_capacity(iters);
            for _ in 0..iters {
                v.push(
                    g.time(|| {
                        for _ in 0..reps {
                            f()?;
                        }
                        Ok(())
                    })? / reps as f64,
                );
            }
            Ok(crate::implementations::median(&mut v))
        };
        let device = g.name().to_string();
        let mut rows = Vec::new();
        let mut push = |mut r: Value| {
            r["device"] = json!(device);
            rows.push(r);
        };
        let download_rm = |dy: &cudarc::driver::CudaSlice<T>, layout: Layout| -> Result<Vec<T>> {
            let y = g.download(dy)?;
            Ok(match layout {
                Layout::RowMajor => y,
                Layout::ColMajor => to_col_major(&y, k, n),
            })
        };
        let mut ours = Vec::new();
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let dx = if layout == Layout::RowMajor {
                &dx_rm
            } else {
                &dx_cm
            };
            let t = time(&mut || ops.spmm(&d, T::one(), dx, k, layout, T::zero(), &mut dy))?;
            let err = rel_err(&download_rm(&dy, layout)?, y_ref);
            ours.push((format!("segsparse-{}", layout.name()), t));
            push(base("segsparse-spmm", layout.name(), t, err));
        }
        let mut peers: Vec<(String, f64)> = Vec::new();
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let dx = if layout == Layout::RowMajor {
                &dx_rm
            } else {
                &dx_cm
            };
            for alg in CusparseSpmmAlg::ALL {
                let mut dy2 = g.zeros::<T>(n * k)?;
                let made = CusparseSpmm::new(&d, alg, layout, k, T::one(), dx, T::zero(), &mut dy2);
                let mut p = match made {
                    Ok(p) => p,
                    Err(e) => {
                        let mut r = base(alg.name(), layout.name(), f64::NAN, f64::NAN);
                        r["note"] = json!(format!("unavailable: {e}"));
                        push(r);
                        continue;
                    }
                };
                let t = match time(&mut || p.spmm(T::one(), dx, T::zero(), &mut dy2)) {
                    Ok(t) => t,
                    Err(e) => {
                        let mut r = base(alg.name(), layout.name(), f64::NAN, f64::NAN);
                        r["note"] = json!(format!("failed: {e}"));
                        push(r);
                        continue;
                    }
                };
                let err = rel_err(&download_rm(&dy2, layout)?, y_ref);
                peers.push((format!("{}-{}", alg.name(), layout.name()), t));
                push(base(alg.name(), layout.name(), t, err));
            }
        }
        // K separate SpMVs on the columns of a column-major block, and one SpMV.
        let t_kfold = time(&mut || {
            for j in 0..k {
                let xv = dx_cm.slice(j * m..(j + 1) * m);
                let mut yv = dy.slice_mut(j * n..(j + 1) * n);
                d.spmv_view(SpmvAlgorithm::Auto, T::one(), &xv, T::zero(), &mut yv)?;
            }
            Ok(())
        })?;
        let err = rel_err(&download_rm(&dy, Layout::ColMajor)?, y_ref);
        push(base("segsparse-k-spmv", "col", t_kfold, err));
        let t_one = time(&mut || {
            let xv = dx_cm.slice(0..m);
            let mut yv = dy.slice_mut(0..n);
            d.spmv_view(SpmvAlgorithm::Auto, T::one(), &xv, T::zero(), &mut yv)
        })?;
        let best = |v: &[(String, f64)]| {
            v.iter()
                .cloned()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or(("none".into(), f64::NAN))
        };
        let (on, ot) = best(&ours);
        let (pn, pt) = best(&peers);
        let same_layout = |l: &str| {
            let o = ours
                .iter()
                .find(|(n, _)| n.ends_with(l))
                .map_or(f64::NAN, |v| v.1);
            let p = best(
                &peers
                    .iter()
                    .filter(|(n, _)| n.ends_with(l))
                    .cloned()
                    .collect::<Vec<_>>(),
            )
            .1;
            p / o
        };
        push(json!({
            "kind": "summary", "matrix": base("", "", 1.0, 0.0)["matrix"], "nrows": n, "nnz": a.nnz(),
            "precision": T::NAME, "k": k, "ours_best": on, "ours_us": ot * 1e6,
            "cusparse_best": pn, "cusparse_us": pt * 1e6, "speedup_vs_cusparse": pt / ot,
            "speedup_vs_cusparse_row": same_layout("row"), "speedup_vs_cusparse_col": same_layout("col"),
            "kfold_spmv_us": t_kfold * 1e6, "speedup_vs_kfold": t_kfold / ot,
            "spmv_us": t_one * 1e6, "spmm_in_spmvs": ot / t_one,
        }));
        Ok(rows)
    }
}
