//! `sparse-solve --gpus N`: the solve split over N GPUs of this host (a thread per GPU, NCCL),
//! rows balanced by nonzeros (`segsparse::dist`).

use anyhow::Result;
use segsparse::solvers::SolveParams;
use segsparse::{CsrMatrix, Scalar};

#[cfg(feature = "nccl")]
use crate::cli::{MethodArg, PrecondArg};
use crate::{Outcome, Plan};

/// Solves on `gpus` GPUs. `T` is `f32` or `f64` (dispatched at run time so that the caller's
/// generic bounds stay those of the single-GPU path).
#[cfg(feature = "nccl")]
#[allow(clippy::ptr_arg)] // a Vec, not a slice: the run-time dispatch downcasts a sized type
pub fn solve<T: Scalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    plan: Plan,
    params: &SolveParams,
    gpus: usize,
) -> Result<Outcome> {
    use std::any::Any;
    if plan.method == MethodArg::Gmres
        || matches!(
            plan.precond,
            PrecondArg::Poly | PrecondArg::Ilu0 | PrecondArg::Ic0 | PrecondArg::Amg
        )
    {
        anyhow::bail!(
            "--gpus {gpus}: GMRES and the polynomial, ILU(0) and IC(0) preconditioners run on one GPU only; use \
             --method cg, pcg or bicgstab with --precond none or jacobi"
        );
    }
    let b = b.to_vec(); // a sized type to downcast (one copy of the right-hand side)
    macro_rules! typed {
        ($t:ty) => {
            if let (Some(a), Some(b), Some(x)) = (
                (a as &dyn Any).downcast_ref::<CsrMatrix<$t>>(),
                (&b as &dyn Any).downcast_ref::<Vec<$t>>(),
                (x as &mut dyn Any).downcast_mut::<Vec<$t>>(),
            ) {
                return solve_typed::<$t>(a, b, x, plan, params, gpus);
            }
        };
    }
    typed!(f64);
    typed!(f32);
    anyhow::bail!("--gpus: only f32 and f64 are supported")
}

#[cfg(feature = "nccl")]
fn solve_typed<T: segsparse::dist::nccl::DistScalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    plan: Plan,
    params: &SolveParams,
    gpus: usize,
) -> Result<Outcome> {
    use anyhow::Context;
    let method = plan.method;
    use segsparse::dist::nccl::{run_threads, DistCsr, NcclOps};
    use segsparse::dist::Partition;
    use segsparse::solvers::{bicgstab, cg, pcg, Identity, Jacobi, VectorOps};
    let t = std::time::Instant::now();
    let part = Partition::by_nnz(a.row_ptr(), gpus);
    let diag = a.diagonal();
    let outs = run_threads(gpus, |rank| {
        let d = DistCsr::from_global(&rank, a, &part)?;
        let ops = NcclOps::<T>::new(&rank)?;
        let rows = d.owned_rows();
        let (r0, r1) = (rows.start as usize, rows.end as usize);
        let db = ops.upload(&b[r0..r1])?;
        let mut dx = ops.upload(&x[r0..r1])?;
        let r = match method {
            MethodArg::Cg => cg(&ops, &d, &db, &mut dx, params),
            MethodArg::Pcg => {
                let j = Jacobi::from_diagonal(&ops, &diag[r0..r1])?;
                pcg(&ops, &d, &j, &db, &mut dx, params)
            }
            MethodArg::Bicgstab | MethodArg::Auto if plan.precond == PrecondArg::Jacobi => {
                let j = Jacobi::from_diagonal(&ops, &diag[r0..r1])?;
                bicgstab(&ops, &d, &j, &db, &mut dx, params)
            }
            MethodArg::Bicgstab | MethodArg::Auto | MethodArg::Gmres => {
                bicgstab(&ops, &d, &Identity, &db, &mut dx, params)
            }
        };
        Ok((r, ops.download(&dx)?, rank.gpu.name().to_string()))
    })
    .with_context(|| format!("--gpus {gpus}"))?;
    let mut result = None;
    let mut name = String::new();
    x.clear();
    for (r, xl, n) in outs {
        x.extend_from_slice(&xl);
        result.get_or_insert(r);
        name = n;
    }
    let result = result.context("--gpus 0: no rank ran")?;
    let result = match result {
        Err(segsparse::solvers::SolveError::Backend(e)) => return Err(e.into()),
        other => other,
    };
    Ok(Outcome {
        method: method.name(),
        backend: format!("{gpus} GPUs over NCCL ({name})"),
        result,
        seconds: t.elapsed().as_secs_f64(),
        extra: Default::default(),
    })
}

/// Without the `nccl` feature `--gpus N > 1` is an error.
#[cfg(not(feature = "nccl"))]
#[allow(clippy::ptr_arg)] // the same signature as the `nccl` build
pub fn solve<T: Scalar>(
    _: &CsrMatrix<T>,
    _: &[T],
    _: &mut Vec<T>,
    _: Plan,
    _: &SolveParams,
    _: usize,
) -> Result<Outcome> {
    anyhow::bail!("--gpus: sparse-solve was built without the `nccl` feature")
}
