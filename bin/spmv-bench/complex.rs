//! `spmv-bench --precision c64|c128`: complex SpMV. segsparse's complex GPU kernels (every
//! algorithm, `auto` first) beside cuSPARSE `cusparseSpMV` with `CUDA_C_32F` / `CUDA_C_64F`
//! (ALG1 and ALG2, after `cusparseSpMV_preprocess`) in the same process, and the CPU product.
//! Errors are against the compensated reference of the `Complex<f64>` matrix
//! (`spmv_compensated_reference`); bytes are counted the crate's way with 8 or 16 bytes per
//! value; GFLOP/s count 8 real operations per entry.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::spmv::{cpu, Op};
use segsparse::{Complex, CsrMatrix, Elem};

use crate::cli::{BackendArg, Cli, Format, PrecisionArg};

type C64 = Complex<f64>;
type C32 = Complex<f32>;

/// One measured implementation.
struct Line {
    name: String,
    median_s: f64,
    err: f64,
}

/// The median of `samples` timings of `f`, each repeating it until a sample lasts ≥ 0.2 ms.
fn median(samples: u32, mut time: impl FnMut(usize) -> Result<f64>) -> Result<f64> {
    time(1)?; // warm-up (module load, first touch)
    let once = time(1)?.max(1e-7);
    let reps = ((2e-4 / once).ceil() as usize).clamp(1, 10_000);
    let mut t: Vec<f64> = (0..samples)
        .map(|_| time(reps).map(|s| s / reps as f64))
        .collect::<Result<_>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

fn cpu_line<T: Elem>(a: &CsrMatrix<T>, x: &[T], r: &[C64], iters: u32) -> Result<Line> {
    let mut y = vec![T::zero(); a.nrows()];
    let median_s = median(iters, |reps| {
        let t = Instant::now();
        for _ in 0..reps {
            segsparse::spmv::spmv(T::one(), a, x, T::zero(), &mut y);
        }
        Ok(t.elapsed().as_secs_f64())
    })?;
    Ok(Line {
        name: "cpu".into(),
        median_s,
        err: cpu::max_rel_err_complex(&y, r),
    })
}

#[cfg(feature = "peers")]
fn gpu_lines<T: Elem>(
    g: &std::sync::Arc<segsparse::gpu::Gpu>,
    a: &CsrMatrix<T>,
    x: &[T],
    r: &[C64],
    iters: u32,
) -> Result<Vec<Line>>
where
    T::Dev: segsparse::gpu::KernelType,
{
    use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm as Alg, GpuComplexCsr};
    use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv};
    let mut out = Vec::new();
    let nan = T::narrow(Complex::new(f64::NAN, f64::NAN));
    for alg in Alg::ALL {
        let d = GpuComplexCsr::upload(g, a, alg)?;
        let dx = d.upload_vector(x)?;
        let mut dy = d.upload_vector(&vec![nan; a.nrows()])?;
        let median_s = median(iters, |reps| {
            Ok(g.time(|| {
                for _ in 0..reps {
                    d.spmv(T::one(), &dx, T::zero(), &mut dy)?;
                }
                Ok(())
            })?)
        })?;
        let name = if alg == Alg::Auto {
            format!("segsparse-auto({})", d.algorithm().name())
        } else {
            format!("segsparse-{}", alg.name())
        };
        out.push(Line {
            name,
            median_s,
            err: cpu::max_rel_err_complex(&d.download_vector(&dy)?, r),
        });
    }
    let d = GpuComplexCsr::upload(g, a, Alg::Auto)?;
    let dx = d.upload_vector(x)?;
    for alg in [CusparseAlg::Alg1, CusparseAlg::Alg2] {
        let mut dy = d.upload_vector(&vec![nan; a.nrows()])?;
        let mut peer = match CusparseSpmv::new_complex(&d, alg, T::one(), &dx, T::zero(), &mut dy) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("spmv-bench: cuSPARSE not available: {e}");
                break;
            }
        };
        let (one, zero) = (T::as_dev(&[T::one()])[0], T::as_dev(&[T::zero()])[0]);
        let median_s = median(iters, |reps| {
            Ok(g.time(|| {
                for _ in 0..reps {
                    peer.spmv(one, &dx, zero, &mut dy)?;
                }
                Ok(())
            })?)
        })?;
        drop(peer);
        out.push(Line {
            name: alg.name().into(),
            median_s,
            err: cpu::max_rel_err_complex(&d.download_vector(&dy)?, r),
        });
    }
    Ok(out)
}

/// Runs the complex benchmark for every matrix of `cli`.
pub fn run(cli: &Cli, resolve: impl Fn(&str) -> String) -> Result<()> {
    #[cfg(feature = "peers")]
    let gpu = match cli.backend {
        BackendArg::Cpu => None,
        _ => match segsparse::gpu::Gpu::shared() {
            Ok(g) => Some(g),
            Err(e) if cli.backend == BackendArg::Gpu => anyhow::bail!("no GPU: {e}"),
            Err(_) => None,
        },
    };
    #[cfg(not(feature = "peers"))]
    if cli.backend == BackendArg::Gpu {
        anyhow::bail!("no GPU: built without the `peers` feature");
    }
    #[cfg(feature = "peers")]
    let device = gpu.as_ref().map(|g| g.name().to_string());
    #[cfg(not(feature = "peers"))]
    let device: Option<String> = None;
    #[cfg(feature = "peers")]
    let copy = gpu
        .as_ref()
        .and_then(|g| g.copy_bandwidth(1 << 28, 10).ok())
        .map(|b| b / 1e9);
    #[cfg(not(feature = "peers"))]
    let copy: Option<f64> = None;
    let prec = match cli.precision {
        PrecisionArg::C64 => "c64",
        _ => "c128",
    };
    let mut out = std::io::stdout().lock();
    for arg in &cli.matrices {
        let a: CsrMatrix<C64> = segsparse::load(&resolve(arg), cli.seed)?;
        let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
        let x: Vec<C64> = (0..a.ncols())
            .map(|_| Complex::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
            .collect();
        let (lines, bytes) = if prec == "c64" {
            let a32 = a.map_values(C32::narrow);
            let x32: Vec<C32> = x.iter().map(|&v| C32::narrow(v)).collect();
            let r = cpu::spmv_compensated_reference(Op::NoTrans, &a32, &x32);
            let mut l = Vec::new();
            #[cfg(feature = "peers")]
            if let Some(g) = &gpu {
                l.extend(gpu_lines(g, &a32, &x32, &r, cli.iters)?);
            }
            if cli.backend != BackendArg::Gpu {
                l.push(cpu_line(&a32, &x32, &r, cli.iters)?);
            }
            (l, a32.spmv_bytes())
        } else {
            let r = cpu::spmv_compensated_reference(Op::NoTrans, &a, &x);
            let mut l = Vec::new();
            #[cfg(feature = "peers")]
            if let Some(g) = &gpu {
                l.extend(gpu_lines(g, &a, &x, &r, cli.iters)?);
            }
            if cli.backend != BackendArg::Gpu {
                l.push(cpu_line(&a, &x, &r, cli.iters)?);
            }
            (l, a.spmv_bytes())
        };
        let best_peer = lines
            .iter()
            .filter(|l| l.name.starts_with("cusparse"))
            .map(|l| l.median_s)
            .fold(f64::INFINITY, f64::min);
        if cli.format == Format::Table {
            writeln!(
                out,
                "{arg}: {}×{}, {} entries, {prec}, device {}, copy {} GB/s",
                a.nrows(),
                a.ncols(),
                a.nnz(),
                device.as_deref().unwrap_or("none"),
                copy.map_or("-".into(), |c| format!("{c:.0}"))
            )?;
            writeln!(
                out,
                "  {:<26} {:>10} {:>9} {:>9} {:>9} {:>10}",
                "implementation", "time µs", "GB/s", "GFLOP/s", "×cuSPARSE", "rel. err"
            )?;
        }
        for l in &lines {
            let gbs = bytes as f64 / l.median_s / 1e9;
            let gflops = 8.0 * a.nnz() as f64 / l.median_s / 1e9;
            let vs = best_peer / l.median_s;
            match cli.format {
                Format::Table => writeln!(
                    out,
                    "  {:<26} {:>10.2} {:>9.1} {:>9.1} {:>9} {:>10.2e}",
                    l.name,
                    l.median_s * 1e6,
                    gbs,
                    gflops,
                    if vs.is_finite() { format!("{vs:.2}") } else { "-".into() },
                    l.err
                )?,
                _ => writeln!(
                    out,
                    "{{\"matrix\":{:?},\"precision\":\"{prec}\",\"implementation\":{:?},\"rows\":{},\"nnz\":{},\"median_us\":{:.3},\"gbs\":{:.1},\"gflops\":{:.1},\"vs_cusparse\":{},\"rel_err\":{:e},\"device\":{:?},\"copy_gbs\":{}}}",
                    arg,
                    l.name,
                    a.nrows(),
                    a.nnz(),
                    l.median_s * 1e6,
                    gbs,
                    gflops,
                    if vs.is_finite() { format!("{vs:.3}") } else { "null".into() },
                    l.err,
                    device.as_deref().unwrap_or("none"),
                    copy.map_or("null".into(), |c| format!("{c:.0}"))
                )?,
            }
        }
    }
    Ok(())
}
