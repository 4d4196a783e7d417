//! `--storage f32-vectors`: CG/PCG with its recurrence in f32 (`solvers::narrow::pcg_f32`)
//! through `solvers::storage::pcg_stored_f32` (the fallback to f64), on the CPU or one GPU.

use std::time::Instant;

use anyhow::{bail, Result};
use segsparse::backend::{CgSteps, Cpu, Identity, LinearOperator, NarrowOps, Preconditioner};
use segsparse::precond::Jacobi;
use segsparse::solvers::storage::pcg_stored_f32;
use segsparse::solvers::SolveParams;
use segsparse::{CsrMatrix, Scalar, Storage};

use super::{Extra, Solved};
use crate::cli::PrecondArg;

/// The solve on the CPU.
pub(crate) fn solve_cpu<T: Scalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut [T],
    precond: PrecondArg,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<Solved> {
    let a64 = a.cast::<f64>();
    let a32 = a.cast::<f32>();
    let (b64, mut x64) = widen(b, x);
    let out = run(
        &Cpu,
        &Cpu,
        &a64,
        &a32,
        &a64,
        &a32,
        precond,
        &b64,
        &mut x64,
        params,
        setup_clock,
    )?;
    narrow_into(&x64, x);
    Ok(out)
}

/// The solve on one GPU: the f64 matrix for the true residuals, the f32 one for the
/// iteration, both on the device.
#[cfg(feature = "cuda")]
pub(crate) fn solve_gpu<T: Scalar>(
    g: &std::sync::Arc<segsparse::gpu::Gpu>,
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut [T],
    precond: PrecondArg,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<Solved> {
    use segsparse::backend::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let high = GpuOps::<f64>::new(g)?;
    let a64 = a.cast::<f64>();
    let a32 = a.cast::<f32>();
    let d64 = GpuCsr::upload(g, &a64)?;
    let d32 = GpuCsr::upload(g, &a32)?;
    let (b64, mut x64) = widen(b, x);
    let out = run(
        &high,
        &high.low()?,
        &a64,
        &a32,
        &d64,
        &d32,
        precond,
        &b64,
        &mut x64,
        params,
        setup_clock,
    )?;
    narrow_into(&x64, x);
    Ok(out)
}

fn widen<T: Scalar>(b: &[T], x: &[T]) -> (Vec<f64>, Vec<f64>) {
    (
        b.iter().map(|v| v.as_f64()).collect(),
        x.iter().map(|v| v.as_f64()).collect(),
    )
}

fn narrow_into<T: Scalar>(x64: &[f64], x: &mut [T]) {
    for (d, &s) in x.iter_mut().zip(x64) {
        *d = T::of_f64(s);
    }
}

/// Jacobi (f32 and f64) or none, the vectors uploaded, the solve with its fallback.
#[allow(clippy::too_many_arguments)]
fn run<H>(
    high: &H,
    low: &H::Low,
    a64: &CsrMatrix<f64>,
    a32: &CsrMatrix<f32>,
    op: &dyn LinearOperator<f64, H>,
    op32: &dyn LinearOperator<f32, H::Low>,
    precond: PrecondArg,
    b: &[f64],
    x: &mut Vec<f64>,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<Solved>
where
    H: NarrowOps + CgSteps<f64>,
    H::Low: CgSteps<f32>,
{
    let jacobi = match precond {
        PrecondArg::None => None,
        PrecondArg::Jacobi => Some((
            Jacobi::from_matrix(low, a32)?,
            Jacobi::from_matrix(high, a64)?,
        )),
        other => bail!(
            "--storage f32-vectors takes --precond none or jacobi, not {}",
            other.name()
        ),
    };
    let (m32, m): (
        &dyn Preconditioner<f32, H::Low>,
        &dyn Preconditioner<f64, H>,
    ) = match &jacobi {
        Some((j32, j)) => (j32, j),
        None => (&Identity, &Identity),
    };
    let db = high.upload(b)?;
    let mut dx = high.upload(x)?;
    let setup = setup_clock.elapsed().as_secs_f64();
    let t = Instant::now();
    let stored = pcg_stored_f32(high, low, op, op32, m32, m, &db, &mut dx, params)?;
    let solve = t.elapsed().as_secs_f64();
    *x = high.download(&dx)?;
    let extra = Extra {
        vectors32: stored.storage == Storage::F32,
        storage: Some((stored.storage, stored.fallback)),
        ..Default::default()
    };
    let result = stored.result.map(|mut i| {
        i.setup_seconds = setup;
        i
    });
    Ok((result, (setup, solve), extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain and Jacobi CG with f32 vectors on the CPU: the f64 tolerance on the true residual
    /// (recomputed here), the f32 recurrence reported as what served; other preconditioners
    /// refused with the reason.
    #[test]
    fn f32_vector_cg_meets_the_f64_tolerance_and_says_so() {
        let a = segsparse::generate::aniso2d::<f64>(24, 0.1).unwrap();
        let b = vec![1.0; a.nrows()];
        let params = SolveParams {
            rel_tol: 1e-10,
            ..Default::default()
        };
        for precond in [PrecondArg::None, PrecondArg::Jacobi] {
            let mut x = vec![0.0; a.nrows()];
            let (result, _, extra) =
                solve_cpu(&a, &b, &mut x, precond, &params, Instant::now()).unwrap();
            result.unwrap();
            assert!(extra.vectors32);
            let mut ax = vec![0.0; a.nrows()];
            segsparse::spmv::spmv(1.0, &a, &x, 0.0, &mut ax);
            let r: f64 = b.iter().zip(&ax).map(|(b, y)| (b - y).powi(2)).sum();
            let rel = (r / a.nrows() as f64).sqrt();
            assert!(rel <= 1e-10 * 1.0001, "{precond:?}: {rel:e}");
        }
        let mut x = vec![0.0; a.nrows()];
        let e = solve_cpu(&a, &b, &mut x, PrecondArg::Ilu0, &params, Instant::now())
            .err()
            .expect("ILU(0) is refused");
        assert!(e.to_string().contains("none or jacobi"), "{e}");
    }
}
