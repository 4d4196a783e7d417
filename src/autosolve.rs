//! The automatic solve: [`precond::auto::choose`](crate::precond::auto::choose)'s rule, and where
//! the rule cannot tell a cheap preconditioner from an expensive one, a **convergence probe**
//! that measures instead of guessing, cached per sparsity pattern.
//!
//! The rule decides alone where its statistics settle the question (a missing diagonal, strong
//! diagonal dominance, coefficient jumps). Two of its answers are a guess that depends on how
//! fast the cheap method converges, which no cheap statistic tells:
//!
//! | the rule says | the probe runs | and may escalate to | because |
//! |---|---|---|---|
//! | CG with none or Jacobi, ≥ [`ProbeParams::amg_min_rows`] rows | that CG, [`ProbeParams::cg_iterations`] iterations | CG + AMG | CG's iterations grow with the grid (large Poisson, anisotropy, elasticity) |
//! | GMRES with ILU(0) (a full diagonal) | GMRES(30) + Jacobi, [`ProbeParams::gmres_iterations`] iterations | GMRES + ILU(0) | small, quickly converging matrices solve faster with Jacobi than ILU(0) sets up |
//!
//! The escalation wastes nothing it can keep: the cheap candidate starts the solve; if it
//! converges within the probe, that is the solve. Otherwise its residual history gives a rate
//! per iteration `ρ`, the remaining iterations `ln(tol / r_k) / ln ρ` and their time at the
//! measured seconds per iteration; the expensive candidate's time comes from the [`CostModel`]
//! (setup and iteration as multiples of the cheap iteration plus fixed seconds, iterations per
//! solve). The faster continues **from the probe's iterate**. A cheap continuation that stalls,
//! breaks down or runs out of iterations hands its iterate to the expensive candidate; an
//! expensive candidate that cannot be built or fails hands it back to the cheap one with all the
//! iterations left (so the automatic solve fails only where both fail).
//!
//! The decision is kept in memory per pattern ([`CsrMatrix::fingerprint`] and the element type):
//! a further solve on the same pattern takes it without a probe ([`AutoSolve::cached`]).
//!
//! One body for every backend: the solvers and preconditioners are the generic ones, `op` is the
//! backend's matrix (the GPU SpMV matrix on the GPU), `a` the host copy the rule reads.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::backend::{CgSteps, KrylovOps, Preconditioner};
use crate::csr::CsrMatrix;
use crate::precond::amg::{Amg, AmgOps, AmgParams, AmgSummary};
use crate::precond::auto::{choose, AutoChoice, AutoMethod, AutoPrecond};
use crate::precond::{Ic0, Identity, Ilu0, IncompleteOps, Jacobi};
use crate::scalar::Scalar;
use crate::solvers::{
    gmres, pcg, InitialGuess, Observer, SolveError, SolveInfo, SolveParams, DEFAULT_RESTART,
};
use crate::sparse::incomplete::FactorSummary;

/// The cost of the expensive candidates, in units of the cheap candidate's measured iteration
/// (`t`) plus fixed seconds: a setup costs `setup.0 · t + setup.1` seconds, an iteration
/// `iteration.0 · t + iteration.1`. The defaults are fitted on an H100 (`benches/results/auto.md`:
/// AMG on Poisson 3D 96³–200³, ILU(0) on the unsymmetric corpus); on the CPU the fixed parts are
/// small against every setup that the probe weighs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// AMG's setup: (cheap iterations, seconds).
    pub amg_setup: (f64, f64),
    /// One AMG-preconditioned CG iteration (a V-cycle): (cheap iterations, seconds).
    pub amg_iteration: (f64, f64),
    /// AMG-CG iterations expected for the whole solve.
    pub amg_iterations: f64,
    /// ILU(0)'s setup: (cheap iterations, seconds).
    pub ilu_setup: (f64, f64),
    /// One ILU(0)-preconditioned GMRES iteration: (cheap iterations, seconds).
    pub ilu_iteration: (f64, f64),
    /// How many times fewer iterations ILU(0) takes than Jacobi.
    pub ilu_gain: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            amg_setup: (160.0, 4.7e-3),
            amg_iteration: (12.0, 0.3e-3),
            amg_iterations: 15.0,
            ilu_setup: (20.0, 1.5e-3),
            ilu_iteration: (3.5, 0.0),
            ilu_gain: 8.0,
        }
    }
}

impl CostModel {
    /// The model without its fixed seconds: every prediction in units of the cheap iteration,
    /// so the decision depends on iteration counts alone (deterministic; what the tests use).
    pub fn iterations_only() -> Self {
        let d = CostModel::default();
        CostModel {
            amg_setup: (d.amg_setup.0, 0.0),
            amg_iteration: (d.amg_iteration.0, 0.0),
            ilu_setup: (d.ilu_setup.0, 0.0),
            ilu_iteration: (d.ilu_iteration.0, 0.0),
            ..d
        }
    }
}

/// Options of [`solve`]. Fill with struct-update syntax from `Default`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeParams {
    /// Run the probe where the rule cannot decide (default true); false gives the rule's choice
    /// alone, deterministic.
    pub enabled: bool,
    /// Keep and reuse the decision per pattern (default true).
    pub cache: bool,
    /// CG iterations of the probe (default 40); the rate is read over the second half.
    pub cg_iterations: usize,
    /// GMRES + Jacobi iterations of the probe (default 20).
    pub gmres_iterations: usize,
    /// Rows from which CG's probe weighs AMG (default 20 000).
    pub amg_min_rows: usize,
    /// GMRES's restart length (default 30).
    pub restart: usize,
    /// The expensive candidates' costs.
    pub model: CostModel,
}

impl Default for ProbeParams {
    fn default() -> Self {
        ProbeParams {
            enabled: true,
            cache: true,
            cg_iterations: 40,
            gmres_iterations: 20,
            amg_min_rows: 20_000,
            restart: DEFAULT_RESTART,
            model: CostModel::default(),
        }
    }
}

/// What the probe measured and predicted.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct ProbeReport {
    /// The candidate that ran: `"cg + none"`, `"cg + jacobi"`, `"gmres + jacobi"`.
    pub cheap: String,
    /// The one it was weighed against: `"amg"` or `"ilu0"`.
    pub expensive: &'static str,
    /// Iterations the probe ran.
    pub iterations: usize,
    /// Seconds of the probe (its solver call).
    pub seconds: f64,
    /// The true relative residual after the probe.
    pub residual: f64,
    /// The measured residual reduction per iteration.
    pub rate: f64,
    /// Iterations the cheap candidate would still need (∞ when it does not converge).
    pub predicted_iterations: f64,
    /// Seconds the cheap candidate would still need.
    pub predicted_cheap_seconds: f64,
    /// Seconds the expensive candidate would need, setup included.
    pub predicted_expensive_seconds: f64,
    /// Whether the expensive candidate was taken.
    pub escalated: bool,
    /// Whether the probe itself converged (it was the whole solve).
    pub converged: bool,
}

/// What [`solve`] did.
#[derive(Debug)]
pub struct AutoSolve {
    /// The choice that finished the solve: method, preconditioner, and the reason (the rule's,
    /// with the probe's measurements or the cache hit appended).
    pub choice: AutoChoice,
    /// The probe, where one ran.
    pub probe: Option<ProbeReport>,
    /// Whether the decision came from the per-pattern cache.
    pub cached: bool,
    /// A fallback taken after a failure, in words.
    pub fallback: Option<String>,
    /// The solve: iterations and history of every segment together, the seconds of every
    /// solver call in `solve_seconds`, the setups and the choice in `setup_seconds`.
    pub result: Result<SolveInfo, SolveError>,
    /// Seconds of the rule (statistics; 0 for [`solve_with_choice`]).
    pub choose_seconds: f64,
    /// Seconds of every preconditioner setup and of the rule.
    pub setup_seconds: f64,
    /// Seconds of every solver call, the probe's included.
    pub solve_seconds: f64,
    /// The ILU(0)/IC(0) factor's summary, where one was built.
    pub factor: Option<FactorSummary>,
    /// The AMG hierarchy's summary, where one was built.
    pub amg: Option<AmgSummary>,
}

/// The per-pattern decisions: fingerprint → (method, preconditioner).
fn cache() -> &'static Mutex<HashMap<u64, (AutoMethod, AutoPrecond)>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, (AutoMethod, AutoPrecond)>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Forgets every cached decision.
pub fn clear_cache() {
    if let Ok(mut c) = cache().lock() {
        c.clear();
    }
}

/// The pair the probe weighs for `c`: (cheap method, cheap preconditioner, expensive one).
fn escalation(c: &AutoChoice, p: &ProbeParams) -> Option<(AutoMethod, AutoPrecond, AutoPrecond)> {
    use AutoMethod::*;
    use AutoPrecond::*;
    match (c.method, c.precond) {
        (Cg, None | Jacobi) if c.stats.rows >= p.amg_min_rows => Some((Cg, c.precond, Amg)),
        (Gmres, Ilu0) if c.stats.missing_diagonal == 0 => Some((Gmres, Jacobi, Ilu0)),
        _ => Option::None,
    }
}

/// The measurement of a probe that did not converge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Iterations run.
    pub iterations: usize,
    /// Seconds per iteration.
    pub seconds_per_iteration: f64,
    /// The true relative residual reached.
    pub residual: f64,
    /// The residual reduction per iteration.
    pub rate: f64,
}

/// The decision from a probe: (escalate, predicted remaining cheap iterations, predicted cheap
/// seconds, predicted expensive seconds). Pure: what the probe's tests pin down.
pub fn decide(
    m: &Measured,
    expensive: AutoPrecond,
    rel_tol: f64,
    model: &CostModel,
) -> (bool, f64, f64, f64) {
    let t = m.seconds_per_iteration;
    let remaining = if m.rate < 1.0 && m.rate > 0.0 {
        ((rel_tol / m.residual).ln() / m.rate.ln()).max(0.0)
    } else {
        f64::INFINITY
    };
    let cheap = remaining * t;
    let cost = |(k, s): (f64, f64)| k * t + s;
    let dear = match expensive {
        AutoPrecond::Amg => {
            cost(model.amg_setup) + model.amg_iterations * cost(model.amg_iteration)
        }
        _ => {
            let its = (m.iterations as f64 + remaining) / model.ilu_gain;
            cost(model.ilu_setup) + its * cost(model.ilu_iteration)
        }
    };
    (
        remaining.is_infinite() || dear < cheap,
        remaining,
        cheap,
        dear,
    )
}

/// Keeps the residual history of an observed solve, passing every call on to the caller's
/// observer, if any.
struct Recorder<'a>(Mutex<Vec<f64>>, Option<&'a dyn Observer>);

impl Observer for Recorder<'_> {
    fn on_iteration(&self, iteration: usize, r: f64) -> crate::Result<()> {
        if let Ok(mut h) = self.0.lock() {
            h.push(r);
        }
        self.1.map_or(Ok(()), |o| o.on_iteration(iteration, r))
    }

    fn wants_iterate(&self) -> bool {
        self.1.is_some_and(|o| o.wants_iterate())
    }

    fn on_iterate(&self, iteration: usize, x: crate::ElemSlice<'_>) -> crate::Result<()> {
        self.1.map_or(Ok(()), |o| o.on_iterate(iteration, x))
    }
}

/// A preconditioner built for one candidate, with what it reports.
type Built<'a, T, B> = (
    Box<dyn Preconditioner<T, B> + 'a>,
    Option<FactorSummary>,
    Option<AmgSummary>,
);

fn build<'a, T, B>(
    be: &B,
    op: &B::Matrix,
    a: &CsrMatrix<T>,
    c: &AutoChoice,
    precond: AutoPrecond,
) -> crate::Result<Built<'a, T, B>>
where
    T: Scalar,
    B: KrylovOps<T> + CgSteps<T> + IncompleteOps<T> + AmgOps<T>,
{
    Ok(match precond {
        AutoPrecond::None => (Box::new(Identity), None, None),
        AutoPrecond::Jacobi => (Box::new(Jacobi::from_matrix(be, a)?), None, None),
        AutoPrecond::Ilu0 => {
            let m = Ilu0::new(be, a, &c.incomplete)?;
            let s = m.summary();
            (Box::new(m), Some(s), None)
        }
        AutoPrecond::Ic0 => {
            let m = Ic0::new(be, a, &c.incomplete)?;
            let s = m.summary();
            (Box::new(m), Some(s), None)
        }
        AutoPrecond::Amg => {
            let m = Amg::from_matrix(be, op, &AmgParams::default())?;
            let s = m.summary().clone();
            (Box::new(m), None, Some(s))
        }
    })
}

/// One solver call of `method` with `m`.
#[allow(clippy::too_many_arguments)]
fn run<T, B, P>(
    be: &B,
    op: &B::Matrix,
    m: &P,
    method: AutoMethod,
    restart: usize,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Scalar,
    B: KrylovOps<T> + CgSteps<T> + AmgOps<T>,
    P: Preconditioner<T, B> + ?Sized,
{
    match method {
        AutoMethod::Cg => pcg(be, op, m, b, x, params),
        AutoMethod::Gmres => gmres(be, op, m, b, x, restart, params),
    }
}

/// The running totals of a solve made of several solver calls.
struct Segments {
    iterations: usize,
    history: Vec<f64>,
    seconds: f64,
    setup: f64,
    restarts: usize,
}

impl Segments {
    fn add(&mut self, info: &SolveInfo, seconds: f64) {
        self.iterations += info.iterations;
        self.restarts += info.restarts;
        let skip = usize::from(!self.history.is_empty());
        self.history.extend(info.history.iter().skip(skip).copied());
        self.seconds += seconds;
    }
    fn add_failed(&mut self, e: &SolveError, seconds: f64) {
        self.iterations += iterations_of(e);
        self.seconds += seconds;
    }
    fn finish(&self, r: Result<SolveInfo, SolveError>) -> Result<SolveInfo, SolveError> {
        match r {
            Ok(info) => Ok(SolveInfo {
                iterations: self.iterations,
                history: self.history.clone(),
                solve_seconds: self.seconds,
                setup_seconds: self.setup,
                restarts: self.restarts,
                ..info
            }),
            Err(SolveError::NotConverged { residual, .. }) => Err(SolveError::NotConverged {
                iterations: self.iterations,
                residual,
            }),
            Err(SolveError::Stagnation { residual, .. }) => Err(SolveError::Stagnation {
                iterations: self.iterations,
                residual,
            }),
            Err(e) => Err(e),
        }
    }
}

fn iterations_of(e: &SolveError) -> usize {
    match e {
        SolveError::NotConverged { iterations, .. } | SolveError::Stagnation { iterations, .. } => {
            *iterations
        }
        SolveError::Breakdown { iteration, .. } | SolveError::NonFinite { iteration } => *iteration,
        _ => 0,
    }
}

/// Whether a failure may be handed to another candidate (not a backend or size error).
fn recoverable(e: &SolveError) -> bool {
    matches!(
        e,
        SolveError::NotConverged { .. }
            | SolveError::Stagnation { .. }
            | SolveError::Breakdown { .. }
            | SolveError::NonFinite { .. }
    )
}

/// Solves `A·x = b` with the automatic choice (see the [module docs](self)). `op` is `a` on the
/// backend (the solver multiplies by it; AMG sets up from it), `a` the host matrix the rule and
/// the incomplete factorizations read. `params` as for any solver (its `initial_guess` applies
/// to the first call; its observer sees every solver call, the probe's included, each counting
/// its iterations from 1). The result's `solve_seconds` counts every solver call (the probe's
/// included), its `setup_seconds` the rule and every preconditioner setup.
///
/// # Errors
/// A preconditioner setup that fails with no other candidate left, or a backend failure; a solve
/// that does not converge is reported in [`AutoSolve::result`].
pub fn solve<T, B>(
    be: &B,
    op: &B::Matrix,
    a: &CsrMatrix<T>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    probe: &ProbeParams,
) -> crate::Result<AutoSolve>
where
    T: Scalar,
    B: KrylovOps<T> + CgSteps<T> + IncompleteOps<T> + AmgOps<T>,
{
    let clock = Instant::now();
    let choice = choose(a);
    let choose_seconds = clock.elapsed().as_secs_f64();
    let mut s = solve_with_choice(be, op, a, choice, b, x, params, probe)?;
    s.choose_seconds = choose_seconds;
    s.setup_seconds += choose_seconds;
    if let Ok(info) = &mut s.result {
        info.setup_seconds += choose_seconds;
    }
    Ok(s)
}

/// [`solve`] with the rule's choice made by the caller (`choose(a)`, timed on its side).
///
/// # Errors
/// As [`solve`].
#[allow(clippy::too_many_arguments)]
pub fn solve_with_choice<T, B>(
    be: &B,
    op: &B::Matrix,
    a: &CsrMatrix<T>,
    mut choice: AutoChoice,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    probe: &ProbeParams,
) -> crate::Result<AutoSolve>
where
    T: Scalar,
    B: KrylovOps<T> + CgSteps<T> + IncompleteOps<T> + AmgOps<T>,
{
    let choose_seconds = 0.0;
    let restart = probe.restart;
    let mut seg = Segments {
        iterations: 0,
        history: Vec::new(),
        seconds: 0.0,
        setup: choose_seconds,
        restarts: 0,
    };
    let mut out = AutoSolve {
        choice: choice.clone(),
        probe: None,
        cached: false,
        fallback: None,
        result: Err(SolveError::NotConverged {
            iterations: 0,
            residual: f64::NAN,
        }),
        choose_seconds,
        setup_seconds: 0.0,
        solve_seconds: 0.0,
        factor: None,
        amg: None,
    };
    let pair = escalation(&choice, probe);
    let mut cheap_cap: Option<usize> = None;
    let key = a.fingerprint() ^ 0x5eed_a070;
    let cached = if probe.cache && pair.is_some() {
        cache().lock().ok().and_then(|c| c.get(&key).copied())
    } else {
        None
    };
    // The plan: (method, preconditioner) to finish with, the alternative on failure, and the
    // parameters of the finishing call.
    let (method, precond, other) = match (cached, pair) {
        (Some((m, p)), Some((cm, cp, e))) => {
            out.cached = true;
            choice
                .reason
                .push_str(&format!("; cached decision for this pattern: {}", p.name()));
            let other = if p == e { (cm, cp) } else { (m, e) };
            (m, p, Some(other))
        }
        (_, Some((cm, cp, e))) if probe.enabled => {
            // The probe: the cheap candidate from the caller's initial guess.
            let budget = match cm {
                AutoMethod::Cg => probe.cg_iterations,
                AutoMethod::Gmres => probe.gmres_iterations,
            }
            .min(params.max_iters)
            .max(2);
            let t = Instant::now();
            let (m, _, _) = build(be, op, a, &choice, cp)?;
            seg.setup += t.elapsed().as_secs_f64();
            let rec = Recorder(Mutex::new(Vec::new()), params.observer);
            let pp = SolveParams {
                max_iters: budget,
                observer: if cm == AutoMethod::Cg {
                    Some(&rec)
                } else {
                    params.observer
                },
                ..*params
            };
            let t = Instant::now();
            let r = run(be, op, &*m, cm, restart, b, x, &pp);
            let secs = t.elapsed().as_secs_f64();
            let cheap = format!("{} + {}", cm.name(), cp.name());
            let mut report = ProbeReport {
                cheap,
                expensive: e.name(),
                iterations: 0,
                seconds: secs,
                residual: f64::NAN,
                rate: f64::NAN,
                predicted_iterations: f64::NAN,
                predicted_cheap_seconds: f64::NAN,
                predicted_expensive_seconds: f64::NAN,
                escalated: false,
                converged: false,
            };
            match r {
                Ok(info) => {
                    seg.add(&info, secs);
                    report.iterations = info.iterations;
                    report.residual = info.relative_residual;
                    report.converged = true;
                    choice.method = cm;
                    choice.precond = cp;
                    choice.reason.push_str(&format!(
                        "; probe: {cheap} converged within the probe ({} iterations, {:.3} ms)",
                        info.iterations,
                        secs * 1e3,
                        cheap = report.cheap
                    ));
                    if probe.cache {
                        if let Ok(mut c) = cache().lock() {
                            c.insert(key, (cm, cp));
                        }
                    }
                    out.probe = Some(report);
                    out.setup_seconds = seg.setup;
                    out.solve_seconds = seg.seconds;
                    out.result = seg.finish(Ok(info));
                    out.choice = choice;
                    return Ok(out);
                }
                Err(
                    ref err @ SolveError::NotConverged {
                        iterations,
                        residual,
                    },
                ) => {
                    seg.add_failed(err, secs);
                    let h = rec.0.lock().map(|h| h.clone()).unwrap_or_default();
                    let rate = probe_rate(&h, iterations, residual);
                    let meas = Measured {
                        iterations,
                        seconds_per_iteration: secs / iterations.max(1) as f64,
                        residual,
                        rate,
                    };
                    let (up, its, tc, te) = decide(&meas, e, params.rel_tol, &probe.model);
                    report.iterations = iterations;
                    report.residual = residual;
                    report.rate = rate;
                    report.predicted_iterations = its;
                    report.predicted_cheap_seconds = tc;
                    report.predicted_expensive_seconds = te;
                    report.escalated = up;
                    choice.reason.push_str(&format!(
                        "; probe: {} for {iterations} iterations ({:.3} ms) reached {residual:.2e}, \
                         rate {rate:.4}/iteration: {its:.0} more iterations, {:.2} ms, against \
                         {:.2} ms predicted for {}: {}",
                        report.cheap,
                        secs * 1e3,
                        tc * 1e3,
                        te * 1e3,
                        e.name(),
                        if up { e.name() } else { "kept" }
                    ));
                }
                Err(err) if recoverable(&err) => {
                    seg.add_failed(&err, secs);
                    report.escalated = true;
                    choice.reason.push_str(&format!(
                        "; probe: {} failed ({err}): {}",
                        report.cheap,
                        e.name()
                    ));
                    if matches!(err, SolveError::NonFinite { .. }) {
                        be.fill(x, T::zero())?;
                    }
                }
                Err(err) => {
                    out.setup_seconds = seg.setup;
                    out.solve_seconds = seg.seconds;
                    out.result = Err(err);
                    out.probe = Some(report);
                    out.choice = choice;
                    return Ok(out);
                }
            }
            let up = report.escalated;
            // A kept cheap candidate gets twice its predicted iterations (at least two restart
            // cycles); then the expensive one takes over from its iterate.
            if !up && report.predicted_iterations.is_finite() {
                cheap_cap = Some((2.0 * report.predicted_iterations) as usize + 2 * restart);
            }
            out.probe = Some(report);
            if probe.cache {
                if let Ok(mut c) = cache().lock() {
                    c.insert(key, if up { (cm, e) } else { (cm, cp) });
                }
            }
            if up {
                (cm, e, Some((cm, cp)))
            } else {
                (cm, cp, Some((cm, e)))
            }
        }
        _ => (choice.method, choice.precond, None),
    };
    // The finishing call, from the current iterate once a probe ran.
    let continued = seg.iterations > 0 || out.probe.is_some();
    let left = params.max_iters.saturating_sub(seg.iterations).max(1);
    let left = cheap_cap.map_or(left, |c| c.min(left));
    let fp = SolveParams {
        max_iters: left,
        initial_guess: if continued {
            InitialGuess::Given
        } else {
            params.initial_guess
        },
        ..*params
    };
    let t = Instant::now();
    let built = build(be, op, a, &choice, precond);
    seg.setup += t.elapsed().as_secs_f64();
    let first = match built {
        Ok((m, f, g)) => {
            out.factor = f;
            out.amg = g;
            let t = Instant::now();
            let r = run(be, op, &*m, method, restart, b, x, &fp);
            Ok((r, t.elapsed().as_secs_f64()))
        }
        Err(e) => Err(e),
    };
    choice.method = method;
    choice.precond = precond;
    let failed = match first {
        Ok((Ok(info), secs)) => {
            seg.add(&info, secs);
            out.setup_seconds = seg.setup;
            out.solve_seconds = seg.seconds;
            out.result = seg.finish(Ok(info));
            out.choice = choice;
            return Ok(out);
        }
        Ok((Err(err), secs)) => {
            seg.add_failed(&err, secs);
            if !recoverable(&err) || other.is_none() {
                out.setup_seconds = seg.setup;
                out.solve_seconds = seg.seconds;
                out.result = seg.finish(Err(err));
                out.choice = choice;
                return Ok(out);
            }
            if matches!(err, SolveError::NonFinite { .. }) {
                be.fill(x, T::zero())?;
            }
            err.to_string()
        }
        Err(e) if other.is_none() => return Err(e),
        Err(e) => e.to_string(),
    };
    // The fallback: the other candidate, from the iterate, with all the iterations left.
    let (fm, fpc) = other.expect("checked above");
    let why = format!(
        "{} + {} failed ({failed}): {} + {} from its iterate",
        method.name(),
        precond.name(),
        fm.name(),
        fpc.name()
    );
    choice.reason.push_str(&format!("; {why}"));
    out.fallback = Some(why);
    let t = Instant::now();
    let (m, f, g) = build(be, op, a, &choice, fpc)?;
    seg.setup += t.elapsed().as_secs_f64();
    out.factor = f.or(out.factor.take());
    out.amg = g.or(out.amg.take());
    let fp = SolveParams {
        max_iters: params.max_iters.saturating_sub(seg.iterations).max(1),
        initial_guess: InitialGuess::Given,
        ..*params
    };
    let t = Instant::now();
    let r = run(be, op, &*m, fm, restart, b, x, &fp);
    let secs = t.elapsed().as_secs_f64();
    match &r {
        Ok(info) => seg.add(info, secs),
        Err(e) => seg.add_failed(e, secs),
    }
    choice.method = fm;
    choice.precond = fpc;
    out.setup_seconds = seg.setup;
    out.solve_seconds = seg.seconds;
    out.result = seg.finish(r);
    out.choice = choice;
    Ok(out)
}

/// The residual reduction per iteration of a probe: over the second half of the recorded
/// history where there is one (CG's early iterations are faster than its steady rate), else from
/// the final true residual over all iterations (GMRES's residual falls monotonically from 1).
fn probe_rate(history: &[f64], iterations: usize, residual: f64) -> f64 {
    let k = history.len();
    if k >= 4 {
        let (lo, hi) = (history[k / 2 - 1], history[k - 1]);
        if lo > 0.0 && hi > 0.0 {
            return (hi / lo).powf(1.0 / (k - k / 2) as f64);
        }
    }
    if iterations == 0 || residual <= 0.0 {
        return f64::NAN;
    }
    residual.powf(1.0 / iterations as f64)
}
