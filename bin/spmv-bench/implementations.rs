//! The implementations `spmv-bench` measures, behind one trait so that GPU versions and GPU peers
//! (cuSPARSE) are added as more entries of the same shape: implement [`Implementation`] and list
//! the new type in [`cpu_implementations`] or `gpu.rs`.

use std::fmt;
use std::hint::black_box;
use std::time::Instant;

use anyhow::Result;
use segsparse::spmv::cpu;
use segsparse::{CsrMatrix, Precision, Scalar};

/// Where an implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// On the host's cores.
    Cpu,
    /// On a CUDA device.
    Gpu,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        })
    }
}

/// One matrix in both precisions with the vector `x` (random, uniform in [−1, 1), seeded). The
/// f32 matrix and vector are the f64 ones rounded.
pub struct Problem {
    /// The matrix in double precision.
    pub a64: CsrMatrix<f64>,
    /// The matrix rounded to single precision.
    pub a32: CsrMatrix<f32>,
    /// `x` in double precision.
    pub x64: Vec<f64>,
    /// `x` rounded to single precision.
    pub x32: Vec<f32>,
}

/// How to time: warm up, then `iters` samples of `reps` calls each, `reps` chosen so that a
/// sample lasts at least `min_sample_s` (one call of a tiny matrix is shorter than the clock's
/// resolution and the loop overhead).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Timed samples; the median is reported.
    pub iters: usize,
    /// Shortest duration of one sample, seconds.
    pub min_sample_s: f64,
    /// Shortest warm-up, seconds (at least two calls).
    pub warmup_s: f64,
}

/// What one run of one implementation in one precision produced.
pub struct Measurement {
    /// Median seconds per product over the samples.
    pub median_s: f64,
    /// The computed `y = A·x`, widened to f64, for the error against the reference.
    pub y: Vec<f64>,
    /// Device seconds of the upload-time preprocessing (segsparse GPU rows; NaN otherwise).
    pub preprocess_s: f64,
}

/// An SpMV implementation: `y ← A·x` (α = 1, β = 0) on a [`Problem`] in one precision, timed
/// after warm-up with its own clock (host clock for CPU code, CUDA events for GPU code; a GPU
/// implementation uploads outside the timed region and downloads `y` after it).
pub trait Implementation {
    /// Name in reports, e.g. `segsparse par`.
    fn name(&self) -> &str;
    /// Where it runs.
    fn backend(&self) -> Backend;
    /// Runs and times the product.
    fn run(&self, p: &Problem, precision: Precision, timing: &Timing) -> Result<Measurement>;
}

/// The CPU implementations, in report order (`--backend cpu`; `auto` puts the GPU rows of
/// `gpu.rs` before them when a device opens).
pub fn cpu_implementations() -> Vec<Box<dyn Implementation>> {
    vec![
        Box::new(SegsparseCpu::Par),
        Box::new(SegsparseCpu::Seq),
        Box::new(SegsparseCpu::Segscan),
        Box::new(SprsCpu),
    ]
}

/// Times `f` per [`Timing`]: warm-up, then the median of `iters` samples of seconds per call.
pub fn time_host(t: &Timing, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while calls < 2 || start.elapsed().as_secs_f64() < t.warmup_s {
        f();
        calls += 1;
    }
    let per_call = start.elapsed().as_secs_f64() / calls as f64;
    let reps = ((t.min_sample_s / per_call.max(1e-9)).ceil() as u64).clamp(1, 1 << 20);
    let mut samples: Vec<f64> = (0..t.iters.max(1))
        .map(|_| {
            let s = Instant::now();
            for _ in 0..reps {
                f();
            }
            s.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    median(&mut samples)
}

/// Median (mean of the middle two for an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Times `kernel(x, y)` on a `y` of `nrows` elements poisoned with NaN (the kernels must not read
/// it: β = 0).
fn measure_host<T: Scalar>(
    nrows: usize,
    t: &Timing,
    mut kernel: impl FnMut(&mut [T]),
) -> Measurement {
    let mut y = vec![T::nan(); nrows];
    let median_s = time_host(t, || {
        kernel(black_box(&mut y));
    });
    Measurement {
        median_s,
        y: y.iter().map(|v| v.as_f64()).collect(),
        preprocess_s: f64::NAN,
    }
}

/// segsparse's own CPU versions.
#[derive(Clone, Copy, Debug)]
pub enum SegsparseCpu {
    /// `segsparse::spmv::spmv`: rayon, rows balanced by nonzeros.
    Par,
    /// `cpu::spmv_seq`: the sequential reference.
    Seq,
    /// `cpu::spmv_segscan`: the paper's four steps on the CPU.
    Segscan,
}

impl SegsparseCpu {
    fn go<T: Scalar>(self, a: &CsrMatrix<T>, x: &[T], t: &Timing) -> Measurement {
        let (one, zero) = (T::one(), T::zero());
        measure_host(a.nrows(), t, |y| match self {
            SegsparseCpu::Par => segsparse::spmv::spmv(one, a, x, zero, y),
            SegsparseCpu::Seq => cpu::spmv_seq(one, a, x, zero, y),
            SegsparseCpu::Segscan => cpu::spmv_segscan(one, a, x, zero, y),
        })
    }
}

impl Implementation for SegsparseCpu {
    fn name(&self) -> &str {
        match self {
            SegsparseCpu::Par => "segsparse par",
            SegsparseCpu::Seq => "segsparse seq",
            SegsparseCpu::Segscan => "segsparse segscan",
        }
    }
    fn backend(&self) -> Backend {
        Backend::Cpu
    }
    fn run(&self, p: &Problem, precision: Precision, t: &Timing) -> Result<Measurement> {
        Ok(match precision {
            Precision::F32 => self.go(&p.a32, &p.x32, t),
            Precision::F64 => self.go(&p.a64, &p.x64, t),
        })
    }
}

/// The peer: `sprs::prod::mul_acc_mat_vec_csr` (what `&CsMat * &vec` runs, without the output
/// allocation), on a `sprs::CsMat` converted outside the timed region. It accumulates
/// (`y += A·x`), so each call zeroes `y` first; that fill is part of the product's cost, as β = 0
/// is for segsparse.
pub struct SprsCpu;

impl SprsCpu {
    fn go<T: Scalar + sprs::MulAcc>(a: &CsrMatrix<T>, x: &[T], t: &Timing) -> Measurement {
        let m = a.to_sprs();
        measure_host(a.nrows(), t, |y: &mut [T]| {
            y.fill(T::zero());
            sprs::prod::mul_acc_mat_vec_csr(m.view(), x, y);
        })
    }
}

impl Implementation for SprsCpu {
    fn name(&self) -> &str {
        "sprs"
    }
    fn backend(&self) -> Backend {
        Backend::Cpu
    }
    fn run(&self, p: &Problem, precision: Precision, t: &Timing) -> Result<Measurement> {
        Ok(match precision {
            Precision::F32 => Self::go(&p.a32, &p.x32, t),
            Precision::F64 => Self::go(&p.a64, &p.x64, t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_implementation_is_correct() {
        let a64 = segsparse::generate::from_spec::<f64>("random:300:7", 3).unwrap();
        let x64: Vec<f64> = (0..300).map(|i| (i as f64 * 0.37).sin()).collect();
        let p = Problem {
            a32: a64.cast(),
            x32: x64.iter().map(|&v| v as f32).collect(),
            a64,
            x64,
        };
        let t = Timing {
            iters: 1,
            min_sample_s: 0.0,
            warmup_s: 0.0,
        };
        let r64 = cpu::spmv_f64_reference(&p.a64, &p.x64);
        let r32 = cpu::spmv_f64_reference(&p.a32, &p.x32);
        for imp in cpu_implementations() {
            let m = imp.run(&p, Precision::F64, &t).unwrap();
            assert!(cpu::max_rel_err(&m.y, &r64) < 1e-14, "{}", imp.name());
            let m = imp.run(&p, Precision::F32, &t).unwrap();
            assert!(cpu::max_rel_err(&m.y, &r32) < 1e-5, "{}", imp.name());
            assert!(m.median_s > 0.0);
        }
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
