//! Recorded solver blocks (CUDA graphs, `SolveParams::graphs`): a solve with graphs gives the
//! same iterations, residual history and solution, bit for bit, as the same solve without, on
//! generated and real matrices, for CG, Jacobi- and Chebyshev-PCG, BiCGSTAB and GMRES; a second
//! problem on the same backend records its own blocks; a breakdown and an overflow inside a
//! replayed block surface as the same `SolveError` at the same iteration. The CPU ignores the
//! flag. GPU tests skip without a device and fail under `SEGSPARSE_REQUIRE_GPU=1`.

use crate::common::mtx::load;
use crate::common::solve::{applies, chain, params};

use segsparse::backend::{Cpu, Identity};
use segsparse::solvers::{bicgstab, cg, SolveError};
use segsparse::{generate, CsrMatrix};

/// On the CPU the flag changes nothing (no recording backend), and the chain problems break
/// down and overflow where the GPU test expects them to.
#[test]
fn cpu_ignores_graphs_and_chain_errors_happen_late() {
    let a = generate::poisson2d::<f64>(20).unwrap();
    let b = vec![1.0; a.nrows()];
    let (mut x1, mut x2) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
    let i1 = cg(&Cpu, &a, &b, &mut x1, &params(1, false)).unwrap();
    let i2 = cg(&Cpu, &a, &b, &mut x2, &params(1, true)).unwrap();
    assert_eq!(i1.iterations, i2.iterations);
    assert_eq!(i1.history, i2.history);
    assert_eq!(x1, x2);

    let (a, b) = chain(200, 20, -3.0, -1.0);
    let mut x = vec![0.0; 200];
    match cg(&Cpu, &a, &b, &mut x, &params(1, true)) {
        Err(SolveError::Breakdown { iteration, .. }) => assert!(iteration > 8, "{iteration}"),
        other => panic!("expected a late breakdown, got {other:?}"),
    }
    let (a, b) = chain(200, 20, 2.0, 1e300);
    for bicg in [false, true] {
        let mut x = vec![0.0; 200];
        let r = if bicg {
            bicgstab(&Cpu, &a, &Identity, &b, &mut x, &params(1, true))
        } else {
            cg(&Cpu, &a, &b, &mut x, &params(1, true))
        };
        match r {
            Err(SolveError::NonFinite { iteration }) => assert!(iteration > 4, "{iteration}"),
            other => panic!("expected a late overflow, got {other:?}"),
        }
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::VectorOps;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuCsr;

    use crate::common::solve::gpu::{precs, run, Outcome};
    use crate::common::solve::METHODS;

    /// Solves `a·x = b` by `method` with graphs off and on (same backend, same process, the same
    /// preconditioner); returns both outcomes with the solutions.
    fn both(
        ops: &GpuOps<f64>,
        a: &CsrMatrix<f64>,
        b: &[f64],
        method: &str,
        check_every: usize,
        restart: usize,
    ) -> [Outcome<f64>; 2] {
        let da = GpuCsr::upload(ops.gpu(), a).unwrap();
        let db = ops.upload(b).unwrap();
        let pr = precs(ops, &da, a, method);
        [false, true].map(|graphs| {
            run(
                ops,
                &da,
                &db,
                &pr,
                method,
                restart,
                &params(check_every, graphs),
            )
        })
    }

    /// Graphs on and off agree exactly: the same kernels with the same grids and the same
    /// deterministic reductions run in both.
    fn assert_same(what: &str, r: &[Outcome<f64>; 2]) {
        let [(off, x_off), (on, x_on)] = r;
        match (off, on) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.iterations, b.iterations, "{what}: iterations");
                assert_eq!(a.restarts, b.restarts, "{what}: restarts");
                assert_eq!(a.history, b.history, "{what}: residual history");
                assert_eq!(
                    a.relative_residual, b.relative_residual,
                    "{what}: true residual"
                );
                assert!(a.iterations > 0, "{what}: no iterations");
            }
            (Err(a), Err(b)) => {
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{what}: errors differ");
            }
            (a, b) => panic!("{what}: without graphs {a:?}, with graphs {b:?}"),
        }
        assert_eq!(x_off, x_on, "{what}: solutions differ");
    }

    #[test]
    fn gpu_graphs_equal_uncaptured_on_generated_and_real_matrices() {
        let Some(_) = test_gpu() else { return };
        // A Gpu of this test's own: graphs are recorded only on a Gpu that one thread uses,
        // and the test harness's shared one may have seen other test threads.
        let g = segsparse::gpu::Gpu::new().unwrap();
        let ops = GpuOps::<f64>::new(&g).unwrap();
        let mut problems: Vec<(String, CsrMatrix<f64>)> = vec![
            (
                "poisson2d:48".into(),
                generate::poisson2d::<f64>(48).unwrap(),
            ),
            (
                "poisson3d:14".into(),
                generate::poisson3d::<f64>(14).unwrap(),
            ),
        ];
        for name in [
            "nos4", "bcsstk01", "1138_bus", "raefsky2", "west0479", "sherman5",
        ] {
            if let Some(a) = load(name) {
                problems.push((name.into(), a));
            }
        }
        let mut compared = 0;
        for (name, a) in &problems {
            let b = vec![1.0; a.nrows()];
            let spd = !matches!(name.as_str(), "raefsky2" | "west0479" | "sherman5");
            // (Jacobi needs a nonzero diagonal: west0479 has zeros on it.)
            for method in METHODS {
                if !applies(method, a, spd) {
                    continue;
                }
                // Several block lengths: blocks of 1 (replayed from the third iteration), 5
                // (GMRES(30)'s cycle ends are not multiples), and the default 16.
                for k in [1, 5, 16] {
                    let r = both(&ops, a, &b, method, k, 30);
                    let what = format!("{name} {method} check_every={k}");
                    assert_same(&what, &r);
                    if let Ok(i) = &r[1].0 {
                        eprintln!(
                            "{what}: {} iterations, {:.2e}",
                            i.iterations, i.relative_residual
                        );
                    } else {
                        eprintln!("{what}: {:?}", r[1].0);
                    }
                    compared += 1;
                }
            }
        }
        assert!(compared >= 40, "only {compared} comparisons");
        assert!(
            g.graphs_recorded() >= 40,
            "only {} graphs recorded",
            g.graphs_recorded()
        );
    }

    /// GMRES with a short restart: many cycles, blocks keyed by the column they start at.
    #[test]
    fn gpu_graphs_gmres_short_restarts_and_two_problems_on_one_backend() {
        let Some(_) = test_gpu() else { return };
        let g = segsparse::gpu::Gpu::new().unwrap();
        let ops = GpuOps::<f64>::new(&g).unwrap();
        let a = generate::poisson2d::<f64>(40).unwrap();
        let b: Vec<f64> = (0..a.nrows()).map(|i| 1.0 + (i % 7) as f64).collect();
        for (restart, k) in [(7, 3), (10, 4), (30, 16)] {
            let r = both(&ops, &a, &b, "gmres", k, restart);
            assert_same(&format!("gmres({restart}) check_every={k}"), &r);
        }
        // A changed problem on the same backend: its own recordings, its own (equal) results.
        let a2 = generate::poisson3d::<f64>(13).unwrap();
        let b2 = vec![1.0; a2.nrows()];
        for method in ["cg", "bicgstab", "gmres"] {
            let r1 = both(&ops, &a, &b, method, 4, 30);
            let r2 = both(&ops, &a2, &b2, method, 4, 30);
            assert_same(&format!("{method} first problem"), &r1);
            assert_same(&format!("{method} second problem"), &r2);
            let (i1, i2) = (r1[1].0.as_ref().unwrap(), r2[1].0.as_ref().unwrap());
            assert_ne!(i1.history, i2.history, "{method}: the problems differ");
        }
        assert!(g.graphs_recorded() > 0, "no graph recorded");
    }

    /// Several threads solving on one Gpu: a thread's capture would record the others' work,
    /// so once a second thread uses the Gpu, solves run uncaptured; every result stays right
    /// (this crashed when each thread recorded graphs on the shared stream).
    #[test]
    fn gpu_graphs_with_several_threads_on_one_gpu() {
        let Some(_) = test_gpu() else { return };
        let g = segsparse::gpu::Gpu::new().unwrap();
        let a = generate::poisson2d::<f64>(40).unwrap();
        let b = vec![1.0; a.nrows()];
        // This thread records first (the Gpu has one user so far).
        let ops = GpuOps::<f64>::new(&g).unwrap();
        let first = both(&ops, &a, &b, "cg", 4, 30);
        assert_same("cg, one thread", &first);
        assert!(g.graphs_recorded() > 0);
        std::thread::scope(|s| {
            for th in 0..6 {
                let (g, a, b, first) = (&g, &a, &b, &first);
                s.spawn(move || {
                    let ops = GpuOps::<f64>::new(g).unwrap();
                    for method in ["cg", "bicgstab", "gmres"] {
                        let k = if method == "cg" { 4 } else { 1 + th % 3 };
                        let r = both(&ops, a, b, method, k, 30);
                        assert_same(&format!("thread {th} {method}"), &r);
                        if method == "cg" {
                            assert_eq!(r[1].1, first[1].1, "thread {th}: cg solution");
                        }
                    }
                });
            }
        });
    }

    /// A breakdown and an overflow that happen inside a replayed block are reported as without
    /// graphs: same variant, same iteration, same last iterate.
    #[test]
    fn gpu_graphs_breakdown_and_nan_inside_a_replayed_block() {
        let Some(g) = test_gpu() else { return };
        let ops = GpuOps::<f64>::new(&g).unwrap();
        let (a, b) = chain(200, 20, -3.0, -1.0);
        for k in [1, 2, 3] {
            let r = both(&ops, &a, &b, "cg", k, 30);
            assert_same(&format!("cg breakdown, check_every={k}"), &r);
            match &r[1].0 {
                Err(SolveError::Breakdown { iteration, .. }) => {
                    assert!(*iteration > 3 * k, "{iteration}")
                }
                other => panic!("expected a breakdown, got {other:?}"),
            }
        }
        let (a, b) = chain(200, 20, 2.0, 1e300);
        for method in ["cg", "bicgstab", "gmres"] {
            for k in [1, 2] {
                let r = both(&ops, &a, &b, method, k, 30);
                assert_same(&format!("{method} overflow, check_every={k}"), &r);
                match &r[1].0 {
                    Err(SolveError::NonFinite { iteration }) => {
                        assert!(*iteration > 2 * k, "{method}: {iteration}")
                    }
                    other => panic!("{method}: expected NaN/Inf, got {other:?}"),
                }
            }
        }
    }
}
