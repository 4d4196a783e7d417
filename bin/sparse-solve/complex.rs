//! `sparse-solve --precision c64|c128`: complex matrices (complex Matrix Market files such as
//! young1c, the `helmholtz3d:N:K:SHIFT` spec, or a real file or spec read with zero imaginary
//! parts) with the methods CG (Hermitian positive definite), COCG (complex symmetric),
//! BiCGSTAB and GMRES(m), and the preconditioners none, Jacobi, ILU(0) and IC(0) (Hermitian).
//!
//! The same solver bodies as the real path; what differs is the choice of `auto` (the real rule
//! reads statistics of real values) and what is refused: the polynomial and AMG
//! preconditioners, several GPUs and several right-hand sides have no complex form, and say so
//! before anything is loaded. The report is the real path's, with `precision` `c64` or `c128`.
//!
//! On the GPU (`--backend gpu`, or `auto` when a device works) the methods and every
//! preconditioner above run through the complex GPU backend: ILU(0) and IC(0) are factored and
//! applied on the device (the GPU incomplete factor and triangular solves are written once over
//! the element type), as for real values.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use segsparse::backend::{Cpu, Identity, LinearOperator, Preconditioner, SolverOps};
use segsparse::precond::{Ic0, Ilu0, IncompleteOps, IncompleteParams, Jacobi};
use segsparse::solvers::{SolveError, SolveParams};
use segsparse::{CsrMatrix, Elem};

use crate::cli::{BackendArg, Cli, GpusArg, MethodArg, PrecondArg};
use crate::{finish, AutoReport, Extra, Finished, Outcome};

/// Refuses what has no complex form, before the matrix is read.
fn check_options(cli: &Cli) -> Result<()> {
    let name = cli.precision.name();
    match cli.precond {
        PrecondArg::Poly | PrecondArg::Amg => bail!(
            "--precond {} is not available for complex values (--precision {name}): use none, \
             jacobi, ilu0 or ic0 (or auto)",
            cli.precond.name()
        ),
        _ => {}
    }
    if matches!(cli.gpus, GpusArg::Count(k) if k > 1) {
        bail!(
            "--gpus {}: complex solves run on one device (the distributed backends are real \
             only)",
            match cli.gpus {
                GpusArg::Count(k) => k,
                GpusArg::Auto => 0,
            }
        );
    }
    if cli.rhs_count > 1 {
        bail!(
            "--rhs-count {}: complex solves take one right-hand side",
            cli.rhs_count
        );
    }
    Ok(())
}

/// How `a` is described in the report: `complex symmetric`, `hermitian`, `symmetric` (both: real
/// values) or `unsymmetric`.
fn structure<T: Elem>(a: &CsrMatrix<T>) -> &'static str {
    match (a.is_symmetric(), a.is_hermitian()) {
        (true, true) => "symmetric",
        (true, false) => "complex symmetric",
        (false, true) => "hermitian",
        (false, false) => "unsymmetric",
    }
}

/// `--method auto` and `--precond auto` for a complex matrix, and why: the library's rule
/// ([`segsparse::precond::auto::choose_complex`]).
pub(crate) fn auto_choice<T: Elem>(a: &CsrMatrix<T>) -> (MethodArg, PrecondArg, String) {
    use segsparse::precond::auto::{choose_complex, AutoPrecond, ComplexMethod};
    let c = choose_complex(a);
    let method = match c.method {
        ComplexMethod::Cg => MethodArg::Cg,
        ComplexMethod::Cocg => MethodArg::Cocg,
        ComplexMethod::Gmres => MethodArg::Gmres,
    };
    let precond = match c.precond {
        AutoPrecond::Jacobi => PrecondArg::Jacobi,
        AutoPrecond::Ilu0 => PrecondArg::Ilu0,
        _ => PrecondArg::None,
    };
    (method, precond, c.reason)
}

/// The method and preconditioner of a complex solve, `auto` resolved.
#[derive(Clone, Copy)]
struct ComplexPlan {
    method: MethodArg,
    precond: PrecondArg,
    restart: usize,
    ilu: IncompleteParams,
}

/// Runs the complex solve described by `cli` with element type `T` (`Complex<f32>` or
/// `Complex<f64>`).
pub fn run<T: Elem>(cli: &Cli) -> Result<ExitCode>
where
    T::Dev: segsparse::gpu::KernelType,
{
    check_options(cli)?;
    let a: CsrMatrix<T> = crate::load_square(cli)?;
    let n = a.nrows();
    let b = crate::rhs(cli, &a)?;
    let auto_clock = Instant::now();
    let auto =
        (cli.method == MethodArg::Auto || cli.precond == PrecondArg::Auto).then(|| auto_choice(&a));
    let auto_seconds = auto_clock.elapsed().as_secs_f64();
    let method = match (cli.method, &auto) {
        (MethodArg::Auto, Some(c)) => c.0,
        (m, _) => m,
    };
    let precond = match (cli.precond, method, &auto) {
        (PrecondArg::Auto, MethodArg::Pcg, _) => PrecondArg::Jacobi,
        // ILU(0) of the automatic choice is for GMRES; a CG method named on the command line
        // takes Jacobi.
        (PrecondArg::Auto, MethodArg::Cg | MethodArg::Cocg, Some((_, PrecondArg::Ilu0, _))) => {
            PrecondArg::Jacobi
        }
        (PrecondArg::Auto, _, Some(c)) => c.1,
        (PrecondArg::None, MethodArg::Pcg, _) => PrecondArg::Jacobi,
        (p, _, _) => p,
    };
    let auto_report = auto.as_ref().map(|c| AutoReport {
        method: method.name(),
        precond: precond.name(),
        reason: c.2.clone(),
        seconds: auto_seconds,
        stats: None,
        probe: None,
        cached: false,
        fallback: None,
        tried: Vec::new(),
        failure: None,
        phases: Vec::new(),
        storage: None,
    });
    let plan = ComplexPlan {
        method,
        precond,
        restart: cli.restart as usize,
        ilu: crate::ilu_params(cli),
    };
    let single = <T::Real as Elem>::BYTES == 4;
    let tol = cli.tol.unwrap_or(if single { 1e-5 } else { 1e-8 });
    let params = SolveParams {
        rel_tol: tol,
        max_iters: cli.max_iters,
        check_every: cli.check_every,
        graphs: !cli.no_graphs,
        on_check: Some(crate::progress),
        ..Default::default()
    };
    crate::progress_setup(cli);
    let wall = Instant::now();
    let setup_clock = Instant::now();
    let mut x = vec![T::zero(); n];
    let mut out = match backend(cli)? {
        Where::Cpu => Outcome::new(
            method,
            crate::cpu_backend(),
            solve_cpu(&a, plan, &b, &mut x, &params, setup_clock)?,
        ),
        Where::Gpu => gpu::solve(&a, &b, &mut x, plan, &params, setup_clock)?,
    };
    let wall_seconds = wall.elapsed().as_secs_f64() + auto_seconds;
    out.setup_seconds += auto_seconds;
    out.extra.gpus = 1;
    crate::clear_progress();
    finish(Finished {
        cli,
        n,
        nnz: a.nnz(),
        structure: structure(&a),
        method,
        precond,
        restart: plan.restart,
        tol,
        x: &x,
        out,
        wall_seconds,
        auto_report,
    })
}

/// Where a complex solve runs.
enum Where {
    Cpu,
    Gpu,
}

/// `--backend` for a complex solve: the GPU runs every complex method and preconditioner
/// (ILU(0) and IC(0) included), so `auto` takes it whenever a device works.
fn backend(cli: &Cli) -> Result<Where> {
    match cli.backend {
        BackendArg::Cpu => Ok(Where::Cpu),
        BackendArg::Gpu => gpu::available().map(|_| Where::Gpu),
        BackendArg::Auto => Ok(match gpu::available() {
            Ok(()) => Where::Gpu,
            Err(_) => Where::Cpu,
        }),
    }
}

/// Uploads `b` and `x`, runs `plan`'s method with the preconditioner `m` (the first solver call,
/// timed: setup from `setup_clock`, which started before the backend was opened, to this call)
/// and downloads the solution.
#[allow(clippy::too_many_arguments)]
fn solve_pre<T: Elem, B: SolverOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    m: &dyn Preconditioner<T, B>,
    plan: ComplexPlan,
    b: &[T],
    x: &mut Vec<T>,
    params: &SolveParams,
    setup_clock: Instant,
    extra: Extra,
) -> Result<crate::Solved> {
    let db = be.upload(b)?;
    let mut dx = be.upload(x)?;
    let setup = setup_clock.elapsed().as_secs_f64();
    let t = Instant::now();
    let r = crate::run_method(be, op, m, (plan.method, plan.restart), &db, &mut dx, params);
    let solve = t.elapsed().as_secs_f64();
    *x = be.download(&dx)?;
    match r {
        Err(SolveError::Backend(e)) => Err(e.into()),
        r => Ok((
            r.map(|mut i| {
                i.setup_seconds = setup;
                i
            }),
            (setup, solve),
            extra,
        )),
    }
}

/// The solve of `plan` on any backend (the CPU's or the GPU's): no, Jacobi, ILU(0) or IC(0)
/// preconditioning.
#[allow(clippy::too_many_arguments)]
fn solve_on<T: Elem, B: SolverOps<T> + IncompleteOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    a: &CsrMatrix<T>,
    plan: ComplexPlan,
    b: &[T],
    x: &mut Vec<T>,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<crate::Solved> {
    let mut extra = Extra::default();
    match plan.precond {
        PrecondArg::None => solve_pre(be, op, &Identity, plan, b, x, params, setup_clock, extra),
        PrecondArg::Jacobi => {
            let j = Jacobi::from_matrix(be, a)?;
            solve_pre(be, op, &j, plan, b, x, params, setup_clock, extra)
        }
        PrecondArg::Ilu0 => {
            let m = Ilu0::new(be, a, &plan.ilu)?;
            extra.factor = Some(m.summary());
            solve_pre(be, op, &m, plan, b, x, params, setup_clock, extra)
        }
        PrecondArg::Ic0 => {
            let m = Ic0::new(be, a, &plan.ilu)?;
            extra.factor = Some(m.summary());
            solve_pre(be, op, &m, plan, b, x, params, setup_clock, extra)
        }
        PrecondArg::Auto | PrecondArg::Poly | PrecondArg::Amg => {
            bail!("--precond {} has no complex form", plan.precond.name())
        }
    }
}

/// The solve of `plan` on the CPU.
fn solve_cpu<T: Elem>(
    a: &CsrMatrix<T>,
    plan: ComplexPlan,
    b: &[T],
    x: &mut Vec<T>,
    params: &SolveParams,
    setup_clock: Instant,
) -> Result<crate::Solved> {
    solve_on(&Cpu, a, a, plan, b, x, params, setup_clock)
}

/// The GPU side of complex solves: [`GpuOps`] with the matrix as [`GpuComplexCsr`]
/// (interleaved values, the complex SpMV's `Auto` algorithm).
///
/// [`GpuOps`]: segsparse::backend::gpu::GpuOps
/// [`GpuComplexCsr`]: segsparse::spmv::gpu::complex::GpuComplexCsr
#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use anyhow::Context;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::gpu::{Gpu, KernelType};
    use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm, GpuComplexCsr};

    /// Whether a GPU is usable here.
    pub(super) fn available() -> Result<()> {
        Gpu::shared().map(|_| ()).context("--backend gpu")
    }

    /// The solve on the GPU.
    pub(super) fn solve<T: Elem>(
        a: &CsrMatrix<T>,
        b: &[T],
        x: &mut Vec<T>,
        plan: ComplexPlan,
        params: &SolveParams,
        setup_clock: Instant,
    ) -> Result<Outcome>
    where
        T::Dev: KernelType,
    {
        let g = Gpu::shared().context("--backend gpu")?;
        let ops = GpuOps::<T>::new(&g)?;
        let da = GpuComplexCsr::upload(&g, a, ComplexSpmvAlgorithm::Auto)?;
        let solved = solve_on(&ops, &da, a, plan, b, x, params, setup_clock)?;
        Ok(Outcome::new(
            plan.method,
            format!("gpu ({})", g.name()),
            solved,
        ))
    }
}

/// Without the `cuda` feature: no GPU.
#[cfg(not(feature = "cuda"))]
mod gpu {
    use super::*;

    /// Refuses: this build has no GPU backend.
    pub(super) fn available() -> Result<()> {
        bail!("--backend gpu: sparse-solve was built without the `cuda` feature")
    }

    /// Refuses as [`available`].
    pub(super) fn solve<T: Elem>(
        _: &CsrMatrix<T>,
        _: &[T],
        _: &mut Vec<T>,
        _: ComplexPlan,
        _: &SolveParams,
        _: Instant,
    ) -> Result<Outcome> {
        available().map(|_| unreachable!("available() refuses"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use segsparse::Complex;

    #[test]
    fn auto_picks_by_symmetry_and_diagonal() {
        let c = |re: f64, im: f64| Complex::new(re, im);
        let sym = CsrMatrix::from_triplets(
            2,
            2,
            &[
                (0, 0, c(2.0, 1.0)),
                (0, 1, c(1.0, 1.0)),
                (1, 0, c(1.0, 1.0)),
                (1, 1, c(2.0, 0.0)),
            ],
        )
        .unwrap();
        let (m, p, why) = auto_choice(&sym);
        assert_eq!((m, p), (MethodArg::Cocg, PrecondArg::Jacobi), "{why}");
        assert!(why.contains("complex symmetric"));
        let herm = CsrMatrix::from_triplets(
            2,
            2,
            &[
                (0, 0, c(2.0, 0.0)),
                (0, 1, c(1.0, 1.0)),
                (1, 0, c(1.0, -1.0)),
                (1, 1, c(3.0, 0.0)),
            ],
        )
        .unwrap();
        assert_eq!(structure(&herm), "hermitian");
        assert_eq!(auto_choice(&herm).0, MethodArg::Cg);
        let general = CsrMatrix::from_triplets(
            2,
            2,
            &[
                (0, 0, c(2.0, 0.0)),
                (0, 1, c(1.0, 1.0)),
                (1, 1, c(3.0, 0.0)),
            ],
        )
        .unwrap();
        let (m, p, _) = auto_choice(&general);
        assert_eq!((m, p), (MethodArg::Gmres, PrecondArg::Ilu0));
        let zero_diag =
            CsrMatrix::from_triplets(2, 2, &[(0, 1, c(1.0, 1.0)), (1, 0, c(2.0, 0.0))]).unwrap();
        let (m, p, _) = auto_choice(&zero_diag);
        assert_eq!((m, p), (MethodArg::Gmres, PrecondArg::None));
    }
}
