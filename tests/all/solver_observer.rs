//! The solvers' per-iteration observer (`SolveParams::observer`): it is called once per
//! iteration with the recorded residual estimate, sees every iterate of CG and BiCGSTAB and the
//! iterate after every GMRES restart cycle in the solve's element type, leaves the arithmetic
//! unchanged (the same iterates and counts as the solve without it), and an error it returns
//! stops the solve. The multi-column solvers refuse one; the automatic solve passes it on.

use std::sync::Mutex;

use segsparse::backend::{Cpu, Identity};
use segsparse::solvers::{bicgstab, cocg, gmres, multi, pcg, Observer, SolveError, SolveParams};
use segsparse::{generate, Complex, CsrMatrix, ElemSlice};

use crate::common::dist::convection;

/// Records what it is shown (iterates of `f64`); fails at iteration `fail_at` when set.
#[derive(Default)]
struct Record {
    estimates: Mutex<Vec<(usize, f64)>>,
    iterates: Mutex<Vec<(usize, Vec<f64>)>>,
    fail_at: Option<usize>,
}

impl Record {
    fn estimates(&self) -> Vec<(usize, f64)> {
        self.estimates.lock().unwrap().clone()
    }

    fn iterates(&self) -> Vec<(usize, Vec<f64>)> {
        self.iterates.lock().unwrap().clone()
    }
}

impl Observer for Record {
    fn on_iteration(&self, it: usize, rel: f64) -> segsparse::Result<()> {
        self.estimates.lock().unwrap().push((it, rel));
        match self.fail_at {
            Some(k) if k == it => Err(segsparse::Error::InvalidInput("stop here".into())),
            _ => Ok(()),
        }
    }

    fn wants_iterate(&self) -> bool {
        true
    }

    fn on_iterate(&self, it: usize, x: ElemSlice<'_>) -> segsparse::Result<()> {
        let x = x.get::<f64>().expect("an f64 solve shows f64 iterates");
        self.iterates.lock().unwrap().push((it, x.to_vec()));
        Ok(())
    }
}

/// ‖b − A·x‖ / ‖b‖ computed here, independently of the solvers.
fn rel_residual(a: &CsrMatrix<f64>, b: &[f64], x: &[f64]) -> f64 {
    let mut num = 0.0;
    for (i, bi) in b.iter().enumerate() {
        let (cols, vals) = a.row(i);
        let ax: f64 = cols
            .iter()
            .zip(vals)
            .map(|(&c, &v)| v * x[c as usize])
            .sum();
        num += (bi - ax).powi(2);
    }
    (num / b.iter().map(|v| v * v).sum::<f64>()).sqrt()
}

fn rhs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 1.0 + ((i * 7919) % 13) as f64 / 13.0)
        .collect()
}

fn params() -> SolveParams<'static> {
    SolveParams {
        rel_tol: 1e-9,
        ..Default::default()
    }
}

/// [`params`] with `rec` as the observer.
fn observed(rec: &dyn Observer) -> SolveParams<'_> {
    SolveParams {
        observer: Some(rec),
        ..params()
    }
}

/// The iterations and the steps seen: `(it, _)` numbered 1, 2, … without gaps.
fn assert_consecutive(seen: &[(usize, f64)], iterations: usize) {
    assert_eq!(seen.len(), iterations, "one call per iteration");
    for (k, (it, rel)) in seen.iter().enumerate() {
        assert_eq!(*it, k + 1);
        assert!(rel.is_finite() && *rel >= 0.0);
    }
}

#[test]
fn cg_sees_every_iterate_and_changes_nothing() {
    let a = generate::poisson2d::<f64>(24).unwrap();
    let b = rhs(a.nrows());
    let mut x0 = vec![0.0; a.nrows()];
    let plain = pcg(&Cpu, &a, &Identity, &b, &mut x0, &params()).unwrap();
    let rec = Record::default();
    let mut x = vec![0.0; a.nrows()];
    let info = pcg(&Cpu, &a, &Identity, &b, &mut x, &observed(&rec)).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0, "the observer changes the arithmetic");
    let est = rec.estimates();
    assert_consecutive(&est, info.iterations);
    // The estimates are the recorded history (entry k after iteration k).
    for (it, rel) in est.iter() {
        assert!((rel - info.history[*it]).abs() <= 1e-12 * info.history[0]);
    }
    let xs = rec.iterates();
    assert_eq!(
        xs.len(),
        info.iterations,
        "callback(xk) after every iteration"
    );
    assert_eq!(
        xs.last().unwrap().1,
        x,
        "the last iterate is the returned x"
    );
    // Each iterate is the solver's: CG's A-norm error falls, so the residual of the first
    // iterate is above the tolerance and the last one below.
    assert!(rel_residual(&a, &b, &xs[0].1) > 1e-3);
    assert!(rel_residual(&a, &b, &xs.last().unwrap().1) <= 1e-9);
}

#[test]
fn bicgstab_sees_every_iterate_and_changes_nothing() {
    let a = convection(20, 0.6);
    let b = rhs(a.nrows());
    let mut x0 = vec![0.0; a.nrows()];
    let plain = bicgstab(&Cpu, &a, &Identity, &b, &mut x0, &params()).unwrap();
    let rec = Record::default();
    let mut x = vec![0.0; a.nrows()];
    let info = bicgstab(&Cpu, &a, &Identity, &b, &mut x, &observed(&rec)).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0);
    assert_consecutive(&rec.estimates(), info.iterations);
    let xs = rec.iterates();
    assert_eq!(xs.len(), info.iterations);
    assert_eq!(xs.last().unwrap().1, x);
}

#[test]
fn gmres_sees_the_iterate_after_each_cycle() {
    let a = convection(24, 0.8);
    let b = rhs(a.nrows());
    let restart = 8;
    let mut x0 = vec![0.0; a.nrows()];
    let plain = gmres(&Cpu, &a, &Identity, &b, &mut x0, restart, &params()).unwrap();
    let rec = Record::default();
    let mut x = vec![0.0; a.nrows()];
    let info = gmres(&Cpu, &a, &Identity, &b, &mut x, restart, &observed(&rec)).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0);
    assert!(
        info.iterations > 3 * restart,
        "the test wants several cycles"
    );
    assert_consecutive(&rec.estimates(), info.iterations);
    let xs = rec.iterates();
    // One iterate per cycle: the full ones and the last, partial one.
    assert_eq!(xs.len(), info.iterations.div_ceil(restart) + info.restarts);
    for (k, (it, _)) in xs.iter().enumerate().take(xs.len() - 1) {
        assert_eq!(
            *it,
            (k + 1) * restart,
            "an iterate at the end of each cycle"
        );
    }
    assert_eq!(xs.last().unwrap().1, x);
    // GMRES minimises the residual over each cycle: it never grows from cycle to cycle.
    let res: Vec<f64> = xs.iter().map(|(_, v)| rel_residual(&a, &b, v)).collect();
    for w in res.windows(2) {
        assert!(w[1] <= w[0] * (1.0 + 1e-12), "residuals {res:?}");
    }
    // The estimate at a cycle's end is the residual of that cycle's iterate.
    let est = rec.estimates();
    let at = est[restart - 1].1;
    assert!(
        (at - res[0]).abs() <= 1e-6 * res[0].max(1e-12),
        "{at} vs {}",
        res[0]
    );
}

#[test]
fn an_observer_error_stops_the_solve() {
    let a = generate::poisson2d::<f64>(16).unwrap();
    let b = rhs(a.nrows());
    for method in ["cg", "bicgstab", "gmres"] {
        let rec = Record {
            fail_at: Some(3),
            ..Default::default()
        };
        let mut x = vec![0.0; a.nrows()];
        let r = match method {
            "cg" => pcg(&Cpu, &a, &Identity, &b, &mut x, &observed(&rec)),
            "bicgstab" => bicgstab(&Cpu, &a, &Identity, &b, &mut x, &observed(&rec)),
            _ => gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &observed(&rec)),
        };
        match r {
            Err(SolveError::Backend(e)) => assert!(e.to_string().contains("stop here"), "{e}"),
            other => panic!("{method}: expected the observer's error, got {other:?}"),
        }
        assert_eq!(
            rec.estimates().len(),
            3,
            "{method}: no iteration after the error"
        );
    }
}

/// One observer type serves every element type: a complex COCG shows its iterates as `c128`,
/// an `f32` CG as `f32`, each the solver's own (the last one is the returned `x`).
#[test]
fn the_iterate_comes_in_the_solve_s_element_type() {
    /// The element type's name, the iteration and the iterate widened to `c128`.
    type Seen = (&'static str, usize, Vec<Complex<f64>>);
    #[derive(Default)]
    struct Last(Mutex<Option<Seen>>);
    impl Observer for Last {
        fn wants_iterate(&self) -> bool {
            true
        }
        fn on_iterate(&self, it: usize, x: ElemSlice<'_>) -> segsparse::Result<()> {
            let wide: Vec<Complex<f64>> = match x {
                ElemSlice::F32(v) => v.iter().map(|&r| Complex::new(r as f64, 0.0)).collect(),
                ElemSlice::C128(v) => v.to_vec(),
                other => panic!("unexpected element type {}", other.elem_name()),
            };
            *self.0.lock().unwrap() = Some((x.elem_name(), it, wide));
            Ok(())
        }
    }

    let a = generate::helmholtz3d::<Complex<f64>>(6, 2.0, 0.5).unwrap();
    let b: Vec<Complex<f64>> = (0..a.nrows())
        .map(|i| Complex::new(1.0, (i % 5) as f64 / 5.0))
        .collect();
    let last = Last::default();
    let p = SolveParams {
        rel_tol: 1e-8,
        observer: Some(&last),
        ..Default::default()
    };
    let mut x = vec![Complex::new(0.0, 0.0); a.nrows()];
    let info = cocg(&Cpu, &a, &b, &mut x, &p).unwrap();
    let (name, it, seen) = last.0.lock().unwrap().take().unwrap();
    assert_eq!((name, it), ("c128", info.iterations));
    assert_eq!(seen, x);

    let a = generate::poisson2d::<f32>(12).unwrap();
    let b = vec![1.0f32; a.nrows()];
    let mut x = vec![0.0f32; a.nrows()];
    let p = SolveParams {
        rel_tol: 1e-5,
        observer: Some(&last),
        ..Default::default()
    };
    let info = pcg(&Cpu, &a, &Identity, &b, &mut x, &p).unwrap();
    let (name, it, seen) = last.0.lock().unwrap().take().unwrap();
    assert_eq!((name, it), ("f32", info.iterations));
    let x: Vec<Complex<f64>> = x.iter().map(|&r| Complex::new(r as f64, 0.0)).collect();
    assert_eq!(seen, x);
    // The tag refuses another type.
    assert!(ElemSlice::F32(&[1.0]).get::<f64>().is_none());
    assert_eq!(ElemSlice::C64(&[]).get::<Complex<f32>>(), Some(&[][..]));
}

/// A multi-column solve watches no single iterate: an observer is refused with an error that
/// says so, before any work.
#[test]
fn a_multi_column_solve_refuses_an_observer() {
    let a = generate::poisson2d::<f64>(8).unwrap();
    let n = a.nrows();
    let b = vec![vec![1.0; n]; 2];
    let rec = Record::default();
    let mut x = vec![vec![0.0; n]; 2];
    let r = multi::pcg(&Cpu, &a, &Identity, &b, &mut x, &observed(&rec));
    match r {
        Err(SolveError::Backend(e)) => assert!(e.to_string().contains("observer"), "{e}"),
        other => panic!("expected the observer to be refused, got {other:?}"),
    }
    assert!(rec.estimates().is_empty());
}

/// The automatic solve passes the caller's observer to its solver calls: the last call's
/// iterations are seen, numbered from 1, and its last iterate is the returned `x`.
#[test]
fn the_automatic_solve_passes_the_observer_on() {
    let a = generate::poisson2d::<f64>(20).unwrap();
    let b = rhs(a.nrows());
    let rec = Record::default();
    let mut x = vec![0.0; a.nrows()];
    let s = segsparse::autosolve::solve(
        &Cpu,
        &a,
        Some(&a),
        &b,
        &mut x,
        &observed(&rec),
        &segsparse::autosolve::ProbeParams {
            cache: false,
            ..Default::default()
        },
    )
    .unwrap();
    let info = s.result.unwrap();
    let est = rec.estimates();
    assert!(est.len() >= info.iterations && !est.is_empty());
    assert_eq!(est[0].0, 1);
    assert_eq!(rec.iterates().last().unwrap().1, x);
}

/// Watches only the end: counts the per-iteration calls (none expected) and keeps the history.
#[derive(Default)]
struct EndOnly {
    calls: Mutex<usize>,
    history: Mutex<Option<Vec<f64>>>,
}

impl Observer for EndOnly {
    fn on_iteration(&self, _it: usize, _rel: f64) -> segsparse::Result<()> {
        *self.calls.lock().unwrap() += 1;
        Ok(())
    }
    fn every_iteration(&self) -> bool {
        false
    }
    fn on_end(&self, history: &[f64]) -> segsparse::Result<()> {
        *self.history.lock().unwrap() = Some(history.to_vec());
        Ok(())
    }
}

#[test]
fn an_observer_of_the_end_gets_the_history_and_changes_nothing() {
    let a = generate::poisson2d::<f64>(24).unwrap();
    let b = rhs(a.nrows());
    // Converged: the history the solve returns, no call per iteration.
    let end = EndOnly::default();
    let mut x = vec![0.0; a.nrows()];
    let info = pcg(&Cpu, &a, &Identity, &b, &mut x, &observed(&end)).unwrap();
    let mut x0 = vec![0.0; a.nrows()];
    let plain = pcg(&Cpu, &a, &Identity, &b, &mut x0, &params()).unwrap();
    assert_eq!(*end.calls.lock().unwrap(), 0);
    assert_eq!(
        end.history.lock().unwrap().as_deref(),
        Some(&info.history[..])
    );
    assert_eq!(info.history, plain.history);
    assert_eq!(x, x0);
    // Not converged: the history of the iterations that ran (the initial residual first).
    let end = EndOnly::default();
    let mut x = vec![0.0; a.nrows()];
    let e = bicgstab(
        &Cpu,
        &a,
        &Identity,
        &b,
        &mut x,
        &SolveParams {
            max_iters: 7,
            ..observed(&end)
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, SolveError::NotConverged { iterations: 7, .. }),
        "{e:?}"
    );
    let h = end.history.lock().unwrap().clone().unwrap();
    assert_eq!(h.len(), 8);
    assert!(h[7] < h[0]);
    // On the GPU the solve runs as without the observer (status checks every few iterations,
    // blocks recorded): the same iterations, residuals and history.
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    let ops = segsparse::backend::gpu::GpuOps::<f64>::new(&g).unwrap();
    let da = segsparse::spmv::gpu::GpuCsr::upload(&g, &a).unwrap();
    let db = g.upload(&b).unwrap();
    let end = EndOnly::default();
    let mut dx = g.zeros::<f64>(a.nrows()).unwrap();
    let on = pcg(&ops, &da, &Identity, &db, &mut dx, &observed(&end)).unwrap();
    let mut dx0 = g.zeros::<f64>(a.nrows()).unwrap();
    let off = pcg(&ops, &da, &Identity, &db, &mut dx0, &params()).unwrap();
    assert_eq!(*end.calls.lock().unwrap(), 0);
    assert_eq!(on.iterations, off.iterations);
    assert_eq!(on.history, off.history);
    assert_eq!(
        end.history.lock().unwrap().as_deref(),
        Some(&on.history[..])
    );
    assert_eq!(g.download(&dx).unwrap(), g.download(&dx0).unwrap());
}
