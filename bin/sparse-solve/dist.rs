//! `sparse-solve --gpus N|auto`: the solve split over N GPUs of this host (a thread per GPU,
//! NCCL), rows balanced by nonzeros, each rank running `segsparse::dist::solve_rank` (the
//! library's one rank solve: preconditioner setup, uploads and a barrier as setup, the solver
//! call as solve).
//!
//! `--gpus auto` measures the machine's all-reduce and halo-exchange costs on every GPU and lets
//! `segsparse::dist::choose_gpus` pick the count; an explicit count is measured the same way on
//! its own ranks (excluded from setup and solve) and a count above the model's choice prints one
//! line on stderr.

use std::time::Instant;

use anyhow::{bail, Result};
use segsparse::dist::{DistAmgParams, DistPrecond, Krylov, LocalPrecond};
use segsparse::precond::ChebyshevParams;
use segsparse::precond::IncompleteParams;
use segsparse::solvers::SolveParams;
use segsparse::{CsrMatrix, Scalar};

use crate::cli::{DistPrecondArg, MethodArg, PrecondArg};
use crate::{GpuChoice, Outcome, Plan};

/// The distributed method and preconditioner of `plan`, or why it cannot run on several GPUs.
pub fn dist_plan(plan: Plan) -> Result<(Krylov, DistPrecond)> {
    let method = match plan.method {
        MethodArg::Cg | MethodArg::Pcg | MethodArg::Cocg => Krylov::Cg,
        MethodArg::Bicgstab | MethodArg::Auto => Krylov::Bicgstab,
        MethodArg::Gmres => bail!(
            "GMRES runs on one GPU only (the distributed backends have no multi-vector steps \
             yet): use --method cg, pcg or bicgstab"
        ),
        MethodArg::Minres => bail!(
            "MINRES runs on one GPU only (its scalars are computed on the host): use --method \
             bicgstab or gmres on several GPUs"
        ),
    };
    let ip = IncompleteParams {
        auto_shift: true,
        ..Default::default()
    };
    let poly = ChebyshevParams {
        degree: plan.poly_degree,
        ..Default::default()
    };
    let local = match plan.precond {
        PrecondArg::Auto => bail!("--precond auto must be resolved before the solve"),
        PrecondArg::None => None,
        PrecondArg::Jacobi => Some(LocalPrecond::Jacobi),
        PrecondArg::Poly => Some(LocalPrecond::Chebyshev(poly)),
        PrecondArg::Ilu0 => Some(LocalPrecond::Ilu0(ip)),
        PrecondArg::Ic0 => Some(LocalPrecond::Ic0(ip)),
        PrecondArg::Amg => {
            if plan.rbm.is_some() {
                bail!(
                    "--precond amg with rigid-body modes needs the whole matrix's node \
                     coordinates: on several GPUs use --amg-candidates constant"
                );
            }
            Some(LocalPrecond::Amg(plan.amg))
        }
    };
    let precond = match (local, plan.dist_precond) {
        (None, _) => DistPrecond::None,
        (Some(LocalPrecond::Jacobi), DistPrecondArg::Auto | DistPrecondArg::Global) => {
            DistPrecond::Jacobi
        }
        (Some(LocalPrecond::Chebyshev(p)), DistPrecondArg::Auto | DistPrecondArg::Global) => {
            DistPrecond::Chebyshev(p)
        }
        (Some(LocalPrecond::Amg(p)), DistPrecondArg::Auto | DistPrecondArg::Global) => {
            DistPrecond::Amg(DistAmgParams {
                amg: p,
                ..Default::default()
            })
        }
        (Some(_), DistPrecondArg::Global) => bail!(
            "--dist-precond global: {} has no distributed form; use --dist-precond block \
             (block-Jacobi, {} on each GPU's diagonal block)",
            plan.precond.name(),
            plan.precond.name()
        ),
        (Some(l), _) => DistPrecond::BlockJacobi(l),
    };
    Ok((method, precond))
}

/// `--gpus auto`: the model's choice, or `None` when one device is all that can be used (fewer
/// than two GPUs, a method that runs on one only, a build without NCCL, NCCL missing): then no
/// NCCL communicator is started, and a line on stderr says why where several GPUs exist.
pub fn auto<T: Scalar>(a: &CsrMatrix<T>, plan: Plan) -> Result<Option<GpuChoice>> {
    let n = segsparse::gpu::Gpu::device_count();
    if n < 2 {
        return Ok(None);
    }
    let (method, precond) = match dist_plan(plan) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sparse-solve: --gpus auto: using 1 of {n} GPUs: {e}");
            return Ok(None);
        }
    };
    choose(a, method, precond, n)
}

#[cfg(feature = "nccl")]
fn choose<T: Scalar>(
    a: &CsrMatrix<T>,
    method: Krylov,
    precond: DistPrecond,
    n: usize,
) -> Result<Option<GpuChoice>> {
    let stats = segsparse::dist::ProblemStats::from_csr(a, method.work(&precond));
    let r = segsparse::dist::nccl::auto_gpus(&stats);
    if let Some(note) = &r.note {
        eprintln!("sparse-solve: --gpus auto: using 1 of {n} GPUs: {note}");
    }
    Ok(r.costs.map(|costs| GpuChoice {
        chosen: r.gpus,
        costs: Some(costs),
        modelled_iteration_seconds: modelled(&stats, &costs),
        probe_seconds: r.probe_seconds,
    }))
}

#[cfg(not(feature = "nccl"))]
fn choose<T: Scalar>(
    _: &CsrMatrix<T>,
    _: Krylov,
    _: DistPrecond,
    n: usize,
) -> Result<Option<GpuChoice>> {
    eprintln!("sparse-solve: --gpus auto: using 1 of {n} GPUs: built without the `nccl` feature");
    Ok(None)
}

/// The one line an explicit `--gpus gpus` prints when the model would use fewer GPUs for this
/// problem on this machine; `None` when `gpus` is what the model chooses (or more than it knows).
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
pub fn too_small(
    stats: &segsparse::dist::ProblemStats,
    c: &segsparse::dist::CommCosts,
    gpus: usize,
) -> Option<String> {
    let chosen = segsparse::dist::choose_gpus(stats, c);
    if chosen >= gpus {
        return None;
    }
    let t = |k| segsparse::dist::modelled_iteration_seconds(stats, c, k) * 1e6;
    Some(format!(
        "--gpus {gpus}: this problem ({} rows, {} nonzeros) is too small to gain from {gpus} \
         GPUs: modelled {:.1} µs per iteration on {gpus}, {:.1} µs on {chosen} (measured \
         reduction step {:.1} µs, halo exchange {:.1} µs); --gpus auto would use {chosen}",
        stats.rows,
        stats.nnz,
        t(gpus),
        t(chosen),
        c.allreduce_seconds * 1e6,
        c.halo_latency_seconds * 1e6,
    ))
}

#[cfg(feature = "nccl")]
fn modelled(stats: &segsparse::dist::ProblemStats, c: &segsparse::dist::CommCosts) -> Vec<f64> {
    (1..=c.gpus.max(1))
        .map(|k| segsparse::dist::modelled_iteration_seconds(stats, c, k))
        .collect()
}

/// Solves on `gpus` GPUs. `T` is `f32` or `f64` (dispatched at run time so that the caller's
/// generic bounds stay those of the single-GPU path). `check`: measure the costs on the solve's
/// own ranks and say (one line on stderr) when the problem is too small to gain from `gpus`.
/// `setup_clock` started where the caller's setup began.
#[cfg(feature = "nccl")]
#[allow(clippy::ptr_arg, clippy::too_many_arguments)] // a Vec: the run-time dispatch downcasts a sized type
pub fn solve<T: Scalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    plan: Plan,
    params: &SolveParams<'static>,
    gpus: usize,
    check: bool,
    setup_clock: Instant,
) -> Result<Outcome> {
    use std::any::Any;
    let (method, precond) = dist_plan(plan).map_err(|e| e.context(format!("--gpus {gpus}")))?;
    let present = segsparse::gpu::Gpu::device_count();
    if present < gpus {
        let why = match segsparse::gpu::Gpu::new() {
            Err(e) if present == 0 => format!(" ({e})"),
            _ => String::new(),
        };
        bail!("--gpus {gpus}: {present} CUDA device(s) present{why}");
    }
    let b = b.to_vec(); // a sized type to downcast (one copy of the right-hand side)
    let run = Run {
        plan,
        params,
        gpus,
        check,
        setup_clock,
        method,
        precond,
    };
    macro_rules! typed {
        ($t:ty) => {
            if let (Some(a), Some(b), Some(x)) = (
                (a as &dyn Any).downcast_ref::<CsrMatrix<$t>>(),
                (&b as &dyn Any).downcast_ref::<Vec<$t>>(),
                (x as &mut dyn Any).downcast_mut::<Vec<$t>>(),
            ) {
                return solve_typed::<$t>(a, b, x, &run);
            }
        };
    }
    typed!(f64);
    typed!(f32);
    bail!("--gpus: only f32 and f64 are supported")
}

/// The settings of one multi-GPU run.
#[cfg(feature = "nccl")]
struct Run<'p> {
    plan: Plan,
    params: &'p SolveParams<'static>,
    gpus: usize,
    check: bool,
    setup_clock: Instant,
    method: Krylov,
    precond: DistPrecond,
}

#[cfg(feature = "nccl")]
fn solve_typed<T: segsparse::dist::nccl::DistScalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    run: &Run<'_>,
) -> Result<Outcome> {
    use anyhow::Context;
    use segsparse::dist::nccl::{measure_costs, run_threads, DistCsr, NcclOps};
    use segsparse::dist::{solve_rank, DistPart, DistSolve, Partition, ProblemStats, RowBlock};
    let gpus = run.gpus;
    let part = Partition::by_nnz(a.row_ptr(), gpus);
    let what = DistSolve {
        method: run.method,
        precond: run.precond,
        params: *run.params,
    };
    let x0: &[T] = x;
    let outs = run_threads(gpus, |rank| {
        // Setup so far: the caller's, the partition and the communicators.
        let before_probe = run.setup_clock.elapsed().as_secs_f64();
        let (probe, costs) = if run.check {
            let t = Instant::now();
            let c = measure_costs(&rank)?;
            (t.elapsed().as_secs_f64(), Some(c))
        } else {
            (0.0, None)
        };
        let t = Instant::now();
        let block = RowBlock::from_csr(a, part.rows(rank.rank()))?;
        let dpart = DistPart::build(&block, &part, rank.rank(), |need| rank.all_to_all_u64(need))?;
        drop(block);
        // The upload can fail on one GPU only (its memory): every rank stops then.
        let up = (|| Ok((DistCsr::from_part(&rank, dpart)?, NcclOps::<T>::new(&rank)?)))();
        let failed = rank.sum_f64(if up.is_err() { 1.0 } else { 0.0 })?;
        let (d, ops) = match up {
            Err(e) => return Err(e),
            Ok(_) if failed > 0.0 => {
                return Err(segsparse::Error::InvalidInput(format!(
                    "the upload failed on {failed} other GPU(s)"
                )))
            }
            Ok(v) => v,
        };
        let prior = before_probe + t.elapsed().as_secs_f64();
        let rows = d.owned_rows();
        let (r0, r1) = (rows.start as usize, rows.end as usize);
        let mut xl = x0[r0..r1].to_vec();
        let o = solve_rank(
            &ops,
            &d,
            &d.host_part().owned,
            d.host_part().first_row,
            &b[r0..r1],
            &mut xl,
            &what,
            prior,
        )?;
        Ok((o, xl, probe, costs, rank.gpu.name().to_string()))
    })
    .with_context(|| format!("--gpus {gpus}"))?;
    let setup = outs.iter().map(|o| o.0.setup_seconds).fold(0.0, f64::max);
    let solve = outs.iter().map(|o| o.0.solve_seconds).fold(0.0, f64::max);
    let probe = outs.iter().map(|o| o.2).fold(0.0, f64::max);
    let costs = outs.first().and_then(|o| o.3);
    let name = outs.first().map(|o| o.4.clone()).unwrap_or_default();
    let mut result = None;
    let mut xs = Vec::with_capacity(x.len());
    for (o, xl, ..) in outs {
        xs.extend_from_slice(&xl);
        result.get_or_insert(o.result);
    }
    *x = xs;
    let result = result.context("--gpus: no rank ran")?;
    let mut result = match result {
        Err(segsparse::solvers::SolveError::Backend(e)) => return Err(e.into()),
        other => other,
    };
    if let Ok(info) = &mut result {
        // The longest rank, as reported.
        info.setup_seconds = setup;
        info.solve_seconds = solve;
    }
    let choice = costs.map(|c| {
        let stats = ProblemStats::from_csr(a, run.method.work(&run.precond));
        let chosen = segsparse::dist::choose_gpus(&stats, &c);
        let modelled = modelled(&stats, &c);
        if let Some(line) = too_small(&stats, &c, gpus) {
            eprintln!("sparse-solve: {line}");
        }
        GpuChoice {
            chosen,
            costs: Some(c),
            modelled_iteration_seconds: modelled,
            probe_seconds: probe,
        }
    });
    Ok(Outcome {
        method: run.plan.method.name(),
        backend: format!("{gpus} GPUs over NCCL ({name})"),
        result,
        setup_seconds: setup,
        solve_seconds: solve,
        extra: crate::Extra {
            gpus,
            dist_precond: Some(run.precond.name()),
            gpu_choice: choice,
            ..Default::default()
        },
    })
}

/// Without the `nccl` feature `--gpus N > 1` is an error.
#[cfg(not(feature = "nccl"))]
#[allow(clippy::ptr_arg, clippy::too_many_arguments)] // the same signature as the `nccl` build
pub fn solve<T: Scalar>(
    _: &CsrMatrix<T>,
    _: &[T],
    _: &mut Vec<T>,
    _: Plan,
    _: &SolveParams,
    _: usize,
    _: bool,
    _: Instant,
) -> Result<Outcome> {
    bail!("--gpus: sparse-solve was built without the `nccl` feature")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(method: MethodArg, precond: PrecondArg, dist: DistPrecondArg) -> Plan {
        Plan {
            method,
            precond,
            restart: 30,
            poly_degree: 4,
            amg: Default::default(),
            rbm: None,
            rhs_count: 1,
            rhs_block: true,
            rhs_columns: crate::cli::RhsColumnsArg::Scaled,
            seed: 1,
            amg_setups: 1,
            amg_resetups: 1,
            dist_precond: dist,
            ilu: Default::default(),
            probe: None,
            storage: segsparse::Storage::F64,
            vectors32: false,
        }
    }

    #[test]
    fn an_explicit_count_too_large_for_the_problem_says_so_in_one_line() {
        use segsparse::dist::{CommCosts, IterationWork, ProblemStats};
        let c = CommCosts {
            gpus: 4,
            allreduce_seconds: 17e-6,
            halo_latency_seconds: 15e-6,
            halo_bytes_per_second: 100e9,
            device_bytes_per_second: 4e12,
            device_memory_bytes: 140_000_000_000,
        };
        let grid = |n: u64| ProblemStats {
            rows: n * n * n,
            nnz: 7 * n * n * n,
            scalar_bytes: 8,
            halo_per_cut: n * n,
            work: IterationWork::cg(),
        };
        let line = too_small(&grid(20), &c, 2).expect("20³ does not gain from 2 GPUs");
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with("--gpus 2: this problem (8000 rows"),
            "{line}"
        );
        assert!(line.ends_with("--gpus auto would use 1"), "{line}");
        assert_eq!(too_small(&grid(256), &c, 2), None);
        assert_eq!(too_small(&grid(256), &c, 4), None);
        assert_eq!(too_small(&grid(20), &c, 1), None);
    }

    #[test]
    fn every_preconditioner_has_a_distributed_form() {
        use DistPrecondArg::*;
        let name = |m, p, d| dist_plan(plan(m, p, d)).map(|(k, p)| (k, p.name()));
        let cg = MethodArg::Cg;
        assert_eq!(name(cg, PrecondArg::None, Auto).unwrap().1, "none");
        assert_eq!(name(cg, PrecondArg::Jacobi, Auto).unwrap().1, "jacobi");
        assert_eq!(name(cg, PrecondArg::Poly, Auto).unwrap().1, "poly");
        assert_eq!(
            name(cg, PrecondArg::Poly, Block).unwrap().1,
            "block-jacobi(poly)"
        );
        for (p, n) in [
            (PrecondArg::Ilu0, "block-jacobi(ilu0)"),
            (PrecondArg::Ic0, "block-jacobi(ic0)"),
        ] {
            assert_eq!(name(cg, p, Auto).unwrap().1, n);
            assert_eq!(name(cg, p, Block).unwrap().1, n);
            let e = name(cg, p, Global).unwrap_err().to_string();
            assert!(e.contains("no distributed form"), "{e}");
        }
        // AMG has its distributed form (couplings between GPUs kept); block-Jacobi on request.
        assert_eq!(name(cg, PrecondArg::Amg, Auto).unwrap().1, "amg");
        assert_eq!(name(cg, PrecondArg::Amg, Global).unwrap().1, "amg");
        assert_eq!(
            name(cg, PrecondArg::Amg, Block).unwrap().1,
            "block-jacobi(amg)"
        );
        assert_eq!(
            name(MethodArg::Bicgstab, PrecondArg::Ilu0, Auto).unwrap().0,
            Krylov::Bicgstab
        );
        assert_eq!(
            name(MethodArg::Pcg, PrecondArg::Jacobi, Auto).unwrap().0,
            Krylov::Cg
        );
        let e = name(MethodArg::Gmres, PrecondArg::None, Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("GMRES runs on one GPU only"), "{e}");
        let mut rbm = plan(cg, PrecondArg::Amg, Auto);
        rbm.rbm = Some(crate::Rbm::Grid(2, 10));
        assert!(dist_plan(rbm).is_err());
    }
}
