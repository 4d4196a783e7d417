//! The solvers' per-iteration observer (`pcg_observed`, `bicgstab_observed`, `gmres_observed`):
//! it is called once per iteration with the recorded residual estimate, sees every iterate of
//! CG and BiCGSTAB and the iterate after every GMRES restart cycle, leaves the arithmetic
//! unchanged (the same iterates and counts as the solve without it), and an error it returns
//! stops the solve.

use std::cell::RefCell;

use segsparse::solvers::{
    bicgstab, bicgstab_observed, gmres, gmres_observed, pcg, pcg_observed, Cpu, Identity, Observer,
    SolveError, SolveParams,
};
use segsparse::{generate, CsrMatrix};

use crate::common::dist::convection;

/// Records what it is shown; fails at iteration `fail_at` when set.
#[derive(Default)]
struct Record {
    estimates: RefCell<Vec<(usize, f64)>>,
    iterates: RefCell<Vec<(usize, Vec<f64>)>>,
    fail_at: Option<usize>,
}

impl Observer<f64> for Record {
    fn on_iteration(&self, it: usize, rel: f64) -> segsparse::Result<()> {
        self.estimates.borrow_mut().push((it, rel));
        match self.fail_at {
            Some(k) if k == it => Err(segsparse::Error::InvalidInput("stop here".into())),
            _ => Ok(()),
        }
    }

    fn wants_iterate(&self) -> bool {
        true
    }

    fn on_iterate(&self, it: usize, x: &[f64]) -> segsparse::Result<()> {
        self.iterates.borrow_mut().push((it, x.to_vec()));
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

fn params() -> SolveParams {
    SolveParams {
        rel_tol: 1e-9,
        ..Default::default()
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
    let info = pcg_observed(&Cpu, &a, &Identity, &b, &mut x, &params(), &rec).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0, "the observer changes the arithmetic");
    let est = rec.estimates.borrow();
    assert_consecutive(&est, info.iterations);
    // The estimates are the recorded history (entry k after iteration k).
    for (it, rel) in est.iter() {
        assert!((rel - info.history[*it]).abs() <= 1e-12 * info.history[0]);
    }
    let xs = rec.iterates.borrow();
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
    let info = bicgstab_observed(&Cpu, &a, &Identity, &b, &mut x, &params(), &rec).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0);
    assert_consecutive(&rec.estimates.borrow(), info.iterations);
    let xs = rec.iterates.borrow();
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
    let info = gmres_observed(&Cpu, &a, &Identity, &b, &mut x, restart, &params(), &rec).unwrap();
    assert_eq!(info.iterations, plain.iterations);
    assert_eq!(x, x0);
    assert!(
        info.iterations > 3 * restart,
        "the test wants several cycles"
    );
    assert_consecutive(&rec.estimates.borrow(), info.iterations);
    let xs = rec.iterates.borrow();
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
    let est = rec.estimates.borrow();
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
            "cg" => pcg_observed(&Cpu, &a, &Identity, &b, &mut x, &params(), &rec),
            "bicgstab" => bicgstab_observed(&Cpu, &a, &Identity, &b, &mut x, &params(), &rec),
            _ => gmres_observed(&Cpu, &a, &Identity, &b, &mut x, 30, &params(), &rec),
        };
        match r {
            Err(SolveError::Backend(e)) => assert!(e.to_string().contains("stop here"), "{e}"),
            other => panic!("{method}: expected the observer's error, got {other:?}"),
        }
        assert_eq!(
            rec.estimates.borrow().len(),
            3,
            "{method}: no iteration after the error"
        );
    }
}
