//! The automatic solve: one body behind every entry point (`sparse-solve`'s default, the Rust
//! API, Python's `segsparse.solve` and `M="auto"`). It reads the statistics where the matrix
//! lives ([`StatsOps`]: a GPU kernel for a device matrix, no host copy), takes the rule's first
//! choice and alternative ([`precond::auto::choose_from`](crate::precond::auto::choose_from)),
//! and where the rule cannot tell which of the two is faster, runs a **convergence probe** of
//! the cheap one that measures instead of guessing; every candidate is then judged on its own
//! measured rate, within a stated work bound; the decision is cached per pattern and values.
//!
//! | the rule's first choice | the probe runs | and may escalate to | because |
//! |---|---|---|---|
//! | CG with none or Jacobi, ≥ [`ProbeParams::amg_min_rows`] rows | that CG, [`ProbeParams::cg_iterations`] iterations | CG + AMG | CG's iterations grow with the grid (large Poisson, anisotropy, elasticity) |
//! | BiCGSTAB with none or Jacobi (unsymmetric with a full diagonal, shifted and other symmetric indefinite operators with a full diagonal) | that BiCGSTAB, [`ProbeParams::bicgstab_iterations`] iterations | GMRES + ILU(0) (ILUT after a row matching where the diagonal has zeros: [`CostModel::ilut_setup_per_entry`]) | plain BiCGSTAB won 4–25× on 3D convection–diffusion and saddle points, where ILU(0)'s setup and triangular solves dominate; ILU(0) where the prediction says it pays, setup included (with the constants fitted on the H200 a GMRES + ILU(0) iteration costs more than the BiCGSTAB iterations it saves: where BiCGSTAB stalls) |
//!
//! The escalation wastes nothing it can keep: the cheap candidate starts the solve; if it
//! converges within the probe, that is the solve. Otherwise its residual history gives a rate per
//! iteration `ρ` (a least-squares fit of `ln r` over the second half of the probe), the remaining
//! iterations `ln(tol / r_k) / ln ρ` and their time at the probe's measured seconds per
//! iteration `t`. The expensive candidate's time comes from the [`CostModel`]: its setup and
//! iteration as multiples of `t` (what this device measured) plus fixed seconds and, for the
//! incomplete factorization, seconds per stored entry; its iterations from the cheap candidate's
//! predicted count. The faster continues **from the probe's iterate**. The probe runs inside
//! the cheap candidate's first solver call: a [`Watch`] asks for a status check after exactly
//! the probe's iterations ([`Watch::next_check`], whatever the backend's check interval) and
//! takes the decision there (no wait beyond the check's own); the call stops there where the
//! expensive candidate takes over, and a kept candidate goes on in the same call, without a
//! restart, to its first checkpoint.
//!
//! **Every candidate is judged on its own measured rate** at checkpoints. A run that does not
//! converge ends at a checkpoint (the solver returns with its true residual) and gives the
//! rate per iteration `ρ = (r_end / r_start)^(1/k)` between the true residuals at both ends, and
//! its seconds per iteration:
//!
//! - the expensive candidate taken on the probe's prediction runs a window first
//!   ([`ProbeParams::amg_window`] AMG-CG iterations, one restart cycle of GMRES); where its own
//!   rate then promises no less time than the cheap candidate's from the same residual, it is
//!   dropped and the cheap one goes on from the iterate (a power-law graph whose AMG
//!   aggregation did not converge, an AMG slower than predicted);
//! - the cheap candidate kept by the probe runs twice its predicted iterations, then goes on
//!   with its own rate's prediction, and hands over to the expensive one only where that now
//!   promises less time, setup included (the 20-iteration probe of upwind convection–diffusion
//!   under-predicted the remainder 8×);
//! - a candidate whose rate needs more than [`ProbeParams::hopeless`] times the iterations it
//!   has left stops;
//! - a run that leaves the residual larger than it found it (divergence, a NaN) is undone: the
//!   next candidate starts from the iterate before it.
//!
//! **The work bound**: each candidate runs at most `max_iters` iterations over all its runs (what
//! it gets when named explicitly), all together at most [`ProbeParams::work_factor`] ×
//! `max_iters` (default 2), and the solver calls together at most the time of
//! `work_factor · max_iters` iterations of the first candidate measured (the probe's; its
//! seconds per iteration, so an iteration that costs 100× an SpMV, a deep triangular solve,
//! counts 100×; setups are not counted, but a setup is **predicted before it starts**
//! ([`setup_seconds`]: AMG's in cheap iterations, an incomplete factorization's per stored
//! entry, the matched ILUT's at its own rate) and a candidate whose predicted setup alone is more
//! than the time the bound leaves is sent behind the other candidates once, then dropped, in
//! the reason and in [`AutoSolve::tried`]; the last candidate left, when every other has failed,
//! still runs if its predicted setup is within [`ProbeParams::last_resort`] times the whole
//! bound, and its iterations within that larger bound, since skipping it would turn a system it
//! may solve into a failure). A candidate whose rate needs more than
//! [`ProbeParams::hopeless`] times the iterations, or the time, it has left stops. A candidate with nothing measured yet runs a sixteenth of what it
//! has left (at most 1000 iterations) before its first checkpoint, a run after a checkpoint at
//! most 4× the last one (the first solver call of a solve without a probe runs its whole
//! budget, as an explicit choice does). A CG that breaks down (`pᵀAp ≤ 0`: the matrix is
//! indefinite) hands its iterate to BiCGSTAB, and no CG runs after it; the list ends with
//! BiCGSTAB + Jacobi, on a symmetric matrix MINRES (symmetric indefinite systems: Stokes saddle
//! points, where BiCGSTAB breaks down and a restarted GMRES stagnates) and GMRES + ILU(0). Where nothing converges, [`AutoSolve::failure`] gives
//! the best residual reached and what was tried, in one sentence.
//!
//! The decision is kept in memory per pattern and values ([`StatsOps::matrix_fingerprint`], the
//! element type, the statistics the rule reads from the values, each to about 5 %, and the
//! tolerance): a further solve on the same matrix, or on one scaled by a constant, takes the
//! candidate that converged, without a probe ([`AutoSolve::cached`]); other values on the same
//! pattern, or another tolerance, are decided afresh.
//!
//! One body for every backend: the solvers and preconditioners are the generic ones, `op` is the
//! backend's matrix (the GPU SpMV matrix on the GPU); a host copy is needed only for an
//! incomplete factorization (given by the caller, or downloaded once when one is built).

use std::cell::OnceCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::backend::{MultigridOps, Preconditioner, SolverOps};
use crate::csr::CsrMatrix;
use crate::precond::amg::{Amg, AmgOps, AmgParams, AmgSummary};
use crate::precond::auto::storage::{StorageOps, StorageParams, StorageReport, Stored};
use crate::precond::auto::{
    choose_from, AutoChoice, AutoMethod, AutoPrecond, MatrixStats, StatsOps,
};
use crate::precond::{Ic0, Identity, Ilu0, IncompleteOps};
use crate::scalar::Scalar;
use crate::solvers::{
    bicgstab, gmres, minres, pcg, InitialGuess, Observer, SolveError, SolveInfo, SolveParams,
    Watch, DEFAULT_RESTART,
};
use crate::sparse::incomplete::FactorSummary;

/// The cost of the expensive candidates, in units of the cheap candidate's measured iteration
/// `t` plus fixed seconds: a setup costs `setup.0 · t + setup.1` seconds, an iteration
/// `iteration.0 · t + iteration.1`. For AMG `t` is a CG iteration (the CG probe), for ILU(0) a
/// BiCGSTAB iteration (the BiCGSTAB probe). The defaults are fitted on an H200
/// (`benches/results/auto.md`, on the kinds marked `fit` there); on the CPU the fixed parts are
/// small against every setup that the probe weighs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "cli", serde(default))]
pub struct CostModel {
    /// AMG's setup: (cheap iterations, seconds).
    pub amg_setup: (f64, f64),
    /// One AMG-preconditioned CG iteration (a V-cycle): (cheap iterations, seconds).
    pub amg_iteration: (f64, f64),
    /// AMG-CG iterations expected for the whole solve.
    pub amg_iterations: f64,

    /// ILU(0)'s setup: (cheap iterations, seconds).
    pub ilu_setup: (f64, f64),
    /// ILU(0)'s setup: seconds per stored entry of the matrix (the factorization and its level
    /// analysis).
    pub ilu_setup_per_entry: f64,
    /// The same where the diagonal has zeros: the row matching (MC64) and ILUT, in place of
    /// `ilu_setup_per_entry`. ILUT's cost follows its factor's size, several times `A`'s on a
    /// saddle point (8× on `kkt2d`, 6× on `stokes2d`), not `A`'s alone.
    pub ilut_setup_per_entry: f64,
    /// One ILU(0)-preconditioned GMRES iteration: (cheap iterations, seconds).
    pub ilu_iteration: (f64, f64),
    /// How many times fewer iterations GMRES + ILU(0) takes than the cheap BiCGSTAB.
    pub ilu_gain: f64,
    /// The CG iterations left after the probe, as a multiple of the count its measured rate
    /// predicts (the rate of 40 iterations misses the slow end of the spectrum).
    pub cg_iterations_factor: f64,
    /// The same for BiCGSTAB's probe.
    pub bicgstab_iterations_factor: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            amg_setup: (510.0, 0.0),
            amg_iteration: (11.8, 0.0),
            amg_iterations: 12.5,
            ilu_setup: (0.0, 41e-3),
            ilu_setup_per_entry: 71e-9,
            // kkt2d:600:36000 (2.1 M entries) on the H200's host: 32.2 s for two ILUT passes
            // (one since), 7.5 µs per entry a pass; stokes2d:100:1 on the CPU (test build):
            // 12 µs per entry, the matching included.
            ilut_setup_per_entry: 1e-5,
            ilu_iteration: (2.84, 0.0),
            ilu_gain: 1.68,
            cg_iterations_factor: 1.01,
            bicgstab_iterations_factor: 1.65,
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
            ilu_setup_per_entry: 0.0,
            ilut_setup_per_entry: 0.0,
            ilu_iteration: (d.ilu_iteration.0, 0.0),
            ..d
        }
    }
}

/// Options of [`solve`]. Fill with struct-update syntax from `Default`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeParams {
    /// Run the probe where the rule cannot decide, and judge every candidate at checkpoints
    /// (default true); false gives the rule's first choice, with its alternative only as a
    /// fallback (each candidate but the last gets half the iterations left), deterministic.
    pub enabled: bool,
    /// Keep and reuse the decision per pattern (default true).
    pub cache: bool,
    /// CG iterations of the probe (default 40); the rate is read over the second half.
    pub cg_iterations: usize,
    /// BiCGSTAB iterations of the probe (default 20: 40 products with the matrix).
    pub bicgstab_iterations: usize,
    /// Rows from which CG's probe weighs AMG (default 20 000).
    pub amg_min_rows: usize,
    /// GMRES's restart length (default 30).
    pub restart: usize,
    /// The expensive candidates' costs.
    pub model: CostModel,
    /// Where the matrix's values and an AMG hierarchy are stored in `f32`
    /// ([`precond::auto::storage`](crate::precond::auto::storage)); `auto: false` keeps `f64`.
    pub storage: StorageParams,
    /// AMG-CG iterations after an escalation before AMG is judged on its own rate (default 6).
    pub amg_window: usize,
    /// The work bound: all candidates together run at most `work_factor · max_iters`
    /// iterations (default 2), each at most `max_iters`, and their solver calls together at
    /// most the time of `work_factor · max_iters` iterations of the first candidate measured.
    pub work_factor: f64,
    /// A candidate stops at a checkpoint when its measured rate needs more than `hopeless`
    /// times the iterations, or the time, it has left (default 2).
    pub hopeless: f64,
    /// A candidate with a measured rate runs `checkpoint_factor` times the iterations that rate
    /// predicts (plus two restart cycles) before its next checkpoint (default 2, at least 1).
    pub checkpoint_factor: f64,
    /// The bound of the last candidate left when every other has failed: its predicted setup
    /// may take up to `last_resort` times the whole work bound's seconds, and its iterations
    /// then run within `last_resort` times the bound (default 30;
    /// the matched ILUT that alone solved a circuit with voltage sources was predicted at 12×
    /// the bound, on an H200).
    pub last_resort: f64,
    /// Where BiCGSTAB is weighed against MINRES (a symmetric indefinite system): MINRES's
    /// iterations in its window after BiCGSTAB's probe (default 40: as many products with the
    /// matrix as the probe's 20 BiCGSTAB iterations).
    pub minres_window: usize,
    /// BiCGSTAB's predicted remaining iterations up to which its probe keeps it without
    /// MINRES's window (default 1000).
    pub minres_from: usize,
}

impl Default for ProbeParams {
    fn default() -> Self {
        ProbeParams {
            enabled: true,
            cache: true,
            cg_iterations: 40,
            bicgstab_iterations: 20,
            amg_min_rows: 20_000,
            restart: DEFAULT_RESTART,
            model: CostModel::default(),
            storage: StorageParams::default(),
            amg_window: 6,
            work_factor: 2.0,
            hopeless: 2.0,
            checkpoint_factor: 2.0,
            last_resort: 30.0,
            minres_window: 40,
            minres_from: 1000,
        }
    }
}

/// What the probe measured and predicted.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct ProbeReport {
    /// The candidate that ran: `"cg + none"`, `"cg + jacobi"`, `"bicgstab + jacobi"`, ...
    pub cheap: String,
    /// The one it was weighed against: `"cg + amg"`, `"gmres + ilu0"`.
    pub expensive: String,
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
    /// with the probe's measurements, the cache hit, the fallbacks and, where nothing
    /// converged, [`AutoSolve::failure`] appended).
    pub choice: AutoChoice,
    /// The probe, where one ran.
    pub probe: Option<ProbeReport>,
    /// Whether the decision came from the per-pattern cache.
    pub cached: bool,
    /// The first fallback taken after a failure, in words.
    pub fallback: Option<String>,
    /// Every candidate that ran, in order, with its outcome (`"bicgstab + jacobi: converged in
    /// 42 iterations"`).
    pub tried: Vec<String>,
    /// Where no candidate converged: one sentence with the best residual reached and what was
    /// tried.
    pub failure: Option<String>,
    /// The solve: iterations and history of every segment together, the seconds of every
    /// solver call in `solve_seconds`, the setups and the choice in `setup_seconds`.
    pub result: Result<SolveInfo, SolveError>,
    /// Seconds of the statistics and the rule (0 for [`solve_with_choice`]).
    pub choose_seconds: f64,
    /// Seconds of every preconditioner setup and of the rule.
    pub setup_seconds: f64,
    /// Seconds of every solver call, the probe's included.
    pub solve_seconds: f64,
    /// The ILU(0)/IC(0) factor's summary, where one was built.
    pub factor: Option<FactorSummary>,
    /// The AMG hierarchy's summary, where one was built.
    pub amg: Option<AmgSummary>,
    /// Where the values and the hierarchy were stored (`f32` or `f64`), why, and a fallback.
    pub storage: StorageReport,
    /// Where the time went, in order: the statistics, the rule, every preconditioner setup,
    /// every solver call (the probe's included) and every copy of the iterate, each with its
    /// host seconds. No synchronization is added to measure them: the statistics, a setup and a
    /// solver call end with their result on the host; a copy of the iterate only queues its
    /// work (its device time falls in the next phase).
    pub phases: Vec<Phase>,
}

/// One phase of an automatic solve ([`AutoSolve::phases`]).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct Phase {
    /// What ran: `"statistics"`, `"rule"`, `"setup amg"`, `"probe cg + jacobi"`,
    /// `"cg + amg"`, `"save the iterate"`, ...
    pub name: String,
    /// Iterations, for a solver call.
    pub iterations: Option<usize>,
    /// Host seconds.
    pub seconds: f64,
}

impl Phase {
    fn new(name: impl Into<String>, iterations: Option<usize>, seconds: f64) -> Self {
        Phase {
            name: name.into(),
            iterations,
            seconds,
        }
    }
}

/// The most iterations a candidate with no measured rate (or one that says it does not
/// converge) runs before its first checkpoint.
const CHECKPOINT_MAX: usize = 1000;

/// A candidate: a method and its preconditioner.
type Cand = (AutoMethod, AutoPrecond);

fn cand_name((m, p): Cand) -> String {
    format!("{} + {}", m.name(), p.name())
}

/// The per-pattern decisions: fingerprint → the candidate that converged.
fn cache() -> &'static Mutex<HashMap<u64, Cand>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, Cand>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Forgets every cached decision.
pub fn clear_cache() {
    if let Ok(mut c) = cache().lock() {
        c.clear();
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
    /// Stored entries of the matrix.
    pub nnz: usize,
}

/// The decision from a probe: (escalate, predicted remaining cheap iterations (the rate's count
/// times the model's factor for the probed method), predicted cheap seconds, predicted expensive
/// seconds). `expensive` is [`AutoPrecond::Amg`] (CG + AMG after a
/// CG probe) or the incomplete factorization (GMRES + ILU(0) after a BiCGSTAB probe). Pure:
/// what the probe's tests pin down.
pub fn decide(
    m: &Measured,
    expensive: AutoPrecond,
    rel_tol: f64,
    model: &CostModel,
) -> (bool, f64, f64, f64) {
    let t = m.seconds_per_iteration;
    let factor = match expensive {
        AutoPrecond::Amg => model.cg_iterations_factor,
        _ => model.bicgstab_iterations_factor,
    };
    let remaining = if m.rate < 1.0 && m.rate > 0.0 {
        factor * ((rel_tol / m.residual).ln() / m.rate.ln()).max(0.0)
    } else {
        f64::INFINITY
    };
    let cheap = remaining * t;
    let dear = expensive_seconds(m, expensive, remaining, model);
    (
        remaining.is_infinite() || dear < cheap,
        remaining,
        cheap,
        dear,
    )
}

/// The expensive candidate's predicted seconds, its setup included, after the cheap one's
/// measurement `m` with `remaining` iterations of the cheap one still to go.
pub fn expensive_seconds(
    m: &Measured,
    expensive: AutoPrecond,
    remaining: f64,
    model: &CostModel,
) -> f64 {
    let t = m.seconds_per_iteration;
    let cost = |(k, s): (f64, f64)| k * t + s;
    let setup = setup_seconds(expensive, m.nnz, t, model);
    match expensive {
        AutoPrecond::Amg => setup + model.amg_iterations * cost(model.amg_iteration),
        _ => {
            let its = (m.iterations as f64 + remaining) / model.ilu_gain;
            setup + its * cost(model.ilu_iteration)
        }
    }
}

/// A preconditioner's predicted setup seconds on a matrix of `nnz` stored entries, `t` the
/// seconds of the cheap candidate's measured iteration (see [`CostModel`]): 0 for none and
/// Jacobi. The incomplete factorizations take their cost per stored entry from the model (pass
/// the model with [`CostModel::ilut_setup_per_entry`] in place where the diagonal has zeros, as
/// the automatic solve does).
pub fn setup_seconds(precond: AutoPrecond, nnz: usize, t: f64, model: &CostModel) -> f64 {
    let cost = |(k, s): (f64, f64)| k * t + s;
    match precond {
        AutoPrecond::None | AutoPrecond::Jacobi => 0.0,
        AutoPrecond::Amg => cost(model.amg_setup),
        AutoPrecond::Ilu0 | AutoPrecond::Ic0 => {
            cost(model.ilu_setup) + model.ilu_setup_per_entry * nnz as f64
        }
    }
}

/// Keeps the residual history of the probe's solve (from its end, [`Observer::on_end`]: the
/// probe runs as an ordinary solve, its blocks recorded), passing every call on to the caller's
/// observer, if any (which may ask for every iteration).
struct Recorder<'a>(Mutex<Vec<f64>>, Option<&'a dyn Observer>);

impl Observer for Recorder<'_> {
    fn on_iteration(&self, iteration: usize, r: f64) -> crate::Result<()> {
        self.1.map_or(Ok(()), |o| o.on_iteration(iteration, r))
    }

    fn every_iteration(&self) -> bool {
        self.1.is_some_and(|o| o.every_iteration())
    }

    fn on_end(&self, history: &[f64]) -> crate::Result<()> {
        if let Ok(mut h) = self.0.lock() {
            // Entry 0 is the initial residual: the history of the iterations alone.
            *h = history.iter().skip(1).copied().collect();
        }
        self.1.map_or(Ok(()), |o| o.on_end(history))
    }

    fn wants_iterate(&self) -> bool {
        self.1.is_some_and(|o| o.wants_iterate())
    }

    fn on_iterate(&self, iteration: usize, x: crate::ElemSlice<'_>) -> crate::Result<()> {
        self.1.map_or(Ok(()), |o| o.on_iterate(iteration, x))
    }
}

/// The probe's decision taken inside the cheap candidate's solver call ([`ProbeWatch`]).
#[derive(Clone, Copy, Debug)]
struct Decision {
    /// Iterations at the decision.
    iterations: usize,
    /// Seconds of the call up to it.
    seconds: f64,
    /// The recursive relative residual estimate there.
    residual: f64,
    rate: f64,
    /// [`decide`]'s answer: escalate, the cheap candidate's predicted iterations and seconds,
    /// the expensive one's seconds.
    escalate: bool,
    predicted: f64,
    cheap_seconds: f64,
    dear_seconds: f64,
    /// Where the call stops: at the decision where it escalates, else at the kept candidate's
    /// first checkpoint.
    stop_at: usize,
}

/// The probe as a [`Watch`] on the cheap candidate's first solver call: at its status check
/// after `budget` iterations (it asks for one there, [`Watch::next_check`]), the rate of the
/// history so far ([`probe_rate`]) and [`decide`] (or, BiCGSTAB against MINRES,
/// [`ProbeParams::minres_from`]) take the decision; the call stops there to escalate, or goes on
/// to the kept candidate's first checkpoint (the iterations its rate predicts times
/// [`ProbeParams::checkpoint_factor`], plus two restart cycles, as any run with a measured rate
/// gets) and stops there to be judged on its own rate.
struct ProbeWatch {
    budget: usize,
    method: AutoMethod,
    expensive: AutoPrecond,
    rel_tol: f64,
    model: CostModel,
    nnz: usize,
    checkpoint_factor: f64,
    restart: usize,
    /// Where BiCGSTAB is weighed against MINRES: the predicted iterations above which the call
    /// stops for MINRES's window ([`ProbeParams::minres_from`]).
    minres_from: Option<f64>,
    decision: Mutex<Option<Decision>>,
}

impl Watch for ProbeWatch {
    fn stop(
        &self,
        iteration: usize,
        relative_residual: f64,
        seconds: f64,
        history: &mut dyn FnMut() -> crate::Result<Vec<f64>>,
    ) -> crate::Result<bool> {
        let mut d = self
            .decision
            .lock()
            .map_err(|_| crate::error::Error::InvalidInput("the probe's state".into()))?;
        if let Some(d) = *d {
            return Ok(iteration >= d.stop_at);
        }
        if iteration < self.budget {
            return Ok(false);
        }
        // Entry 0 is the initial residual: the history of the iterations alone.
        let h: Vec<f64> = history()?.into_iter().skip(1).collect();
        let rate = probe_rate(self.method, &h, iteration, relative_residual);
        let meas = Measured {
            iterations: iteration,
            seconds_per_iteration: seconds / iteration.max(1) as f64,
            residual: relative_residual,
            rate,
            nnz: self.nnz,
        };
        let (up, its, tc, te) = match self.minres_from {
            Some(from) => {
                let f = self.model.bicgstab_iterations_factor;
                let its = f * iterations_to(self.rel_tol, relative_residual, rate);
                (
                    its.is_nan() || its > from,
                    its,
                    its * meas.seconds_per_iteration,
                    f64::NAN,
                )
            }
            None => decide(&meas, self.expensive, self.rel_tol, &self.model),
        };
        let need = iterations_to(self.rel_tol, relative_residual, rate);
        let stop_at = if up || !need.is_finite() {
            iteration
        } else {
            iteration + (self.checkpoint_factor.max(1.0) * need) as usize + 2 * self.restart
        };
        *d = Some(Decision {
            iterations: iteration,
            seconds,
            residual: relative_residual,
            rate,
            escalate: up,
            predicted: its,
            cheap_seconds: tc,
            dear_seconds: te,
            stop_at: stop_at.max(iteration),
        });
        Ok(stop_at <= iteration)
    }

    /// The probe's iterations, then the kept candidate's checkpoint: the decision and the stop
    /// fall at exactly those iterations, whatever the backend's `check_every`.
    fn next_check(&self, iteration: usize) -> Option<usize> {
        match self.decision.lock().ok().and_then(|d| *d) {
            None => Some(self.budget).filter(|&b| b > iteration),
            Some(d) => Some(d.stop_at).filter(|&s| s > iteration),
        }
    }
}

/// `e` with its iteration count mapped by `f` (the part of a solver call after the probe's
/// decision, the total of a solve made of several calls); other errors unchanged.
fn map_iterations(e: SolveError, f: impl FnOnce(usize) -> usize) -> SolveError {
    match e {
        SolveError::NotConverged {
            iterations,
            residual,
        } => SolveError::NotConverged {
            iterations: f(iterations),
            residual,
        },
        SolveError::Stagnation {
            iterations,
            residual,
        } => SolveError::Stagnation {
            iterations: f(iterations),
            residual,
        },
        SolveError::Breakdown { what, iteration } => SolveError::Breakdown {
            what,
            iteration: f(iteration),
        },
        SolveError::NonFinite { iteration } => SolveError::NonFinite {
            iteration: f(iteration),
        },
        e => e,
    }
}

/// A preconditioner built for one candidate, with what it reports.
type Built<'a, T, B> = (
    Box<dyn Preconditioner<T, B> + 'a>,
    Option<FactorSummary>,
    Option<AmgSummary>,
);

/// The host copy of the matrix: the caller's, or downloaded from the backend once, when an
/// incomplete factorization needs it.
struct Host<'h, T: Scalar> {
    given: Option<&'h CsrMatrix<T>>,
    owned: OnceCell<CsrMatrix<T>>,
}

impl<T: Scalar> Host<'_, T> {
    fn get<B: MultigridOps<T>>(&self, be: &B, op: &B::Matrix) -> crate::Result<&CsrMatrix<T>> {
        if let Some(h) = self.given {
            return Ok(h);
        }
        if let Some(h) = self.owned.get() {
            return Ok(h);
        }
        let h = be.download_matrix(op)?;
        Ok(self.owned.get_or_init(|| h))
    }
}

fn build<'a, T, B>(
    be: &B,
    op: &B::Matrix,
    host: &Host<'_, T>,
    c: &AutoChoice,
    precond: AutoPrecond,
) -> crate::Result<Built<'a, T, B>>
where
    T: Scalar,
    B: SolverOps<T> + IncompleteOps<T> + AmgOps<T> + StatsOps<T>,
{
    Ok(match precond {
        AutoPrecond::None => (Box::new(Identity), None, None),
        AutoPrecond::Jacobi => (Box::new(be.jacobi(op)?), None, None),
        AutoPrecond::Ilu0 => {
            let m = Ilu0::new(be, host.get(be, op)?, &c.incomplete)?;
            let s = m.summary();
            (Box::new(m), Some(s), None)
        }
        AutoPrecond::Ic0 => {
            let m = Ic0::new(be, host.get(be, op)?, &c.incomplete)?;
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

/// [`build`] with an AMG hierarchy in the storage plan's precision ([`Stored::amg`]).
fn build_stored<'a, T, B>(
    be: &B,
    op: &B::Matrix,
    host: &Host<'_, T>,
    c: &AutoChoice,
    precond: AutoPrecond,
    stored: &Stored<T, B>,
) -> crate::Result<Built<'a, T, B>>
where
    T: Scalar,
    B: SolverOps<T> + IncompleteOps<T> + AmgOps<T> + StatsOps<T> + StorageOps<T>,
{
    if precond == AutoPrecond::Amg {
        let (m, s) = stored.amg(be, op, &AmgParams::default())?;
        return Ok((m, None, Some(s)));
    }
    build(be, op, host, c, precond)
}

/// One solver call of `method` with `m` (the observer, if any, in `params`).
#[allow(clippy::too_many_arguments)]
fn run<T, B, P>(
    be: &B,
    op: &dyn crate::backend::LinearOperator<T, B>,
    m: &P,
    method: AutoMethod,
    restart: usize,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Scalar,
    B: SolverOps<T> + AmgOps<T>,
    P: Preconditioner<T, B> + ?Sized,
{
    match method {
        AutoMethod::Cg => pcg(be, op, m, b, x, params),
        AutoMethod::Bicgstab => bicgstab(be, op, m, b, x, params),
        AutoMethod::Gmres => gmres(be, op, m, b, x, restart, params),
        AutoMethod::Minres => minres(be, op, m, b, x, params),
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
    /// The setup of preconditioner `p` (`setup` builds it), timed: its seconds counted in the
    /// setups' and reported as the phase `setup <p>`.
    fn timed_setup<R>(
        &mut self,
        phases: &mut Vec<Phase>,
        p: AutoPrecond,
        setup: impl FnOnce() -> R,
    ) -> R {
        let t = Instant::now();
        let r = setup();
        let secs = t.elapsed().as_secs_f64();
        self.setup += secs;
        phases.push(Phase::new(format!("setup {}", p.name()), None, secs));
        r
    }
    /// `out` closed: the seconds of every setup and solver call, the result and the choice that
    /// finished.
    fn close(
        &self,
        mut out: AutoSolve,
        result: Result<SolveInfo, SolveError>,
        choice: AutoChoice,
    ) -> AutoSolve {
        out.setup_seconds = self.setup;
        out.solve_seconds = self.seconds;
        out.result = result;
        out.choice = choice;
        out
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
            // The count of every call together; a breakdown keeps the iteration it names.
            Err(e @ (SolveError::NotConverged { .. } | SolveError::Stagnation { .. })) => {
                Err(map_iterations(e, |_| self.iterations))
            }
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

/// The true residual a failure reports, where it reports one.
fn residual_of(e: &SolveError) -> Option<f64> {
    match e {
        SolveError::NotConverged { residual, .. } | SolveError::Stagnation { residual, .. } => {
            Some(*residual)
        }
        _ => None,
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

/// Solves `A·x = b` with the automatic choice (see the [module docs](self)). `op` is `A` on the
/// backend (the solver multiplies by it, the statistics and AMG read it there); `host` its host
/// copy where the caller has one (an incomplete factorization reads it; `None`: downloaded once
/// if one is built). `params` as for any solver (its `initial_guess` applies to the first call;
/// its observer sees every solver call, the probe's included, each counting its iterations from
/// 1). The result's `solve_seconds` counts every solver call (the probe's included), its
/// `setup_seconds` the statistics, the rule and every preconditioner setup.
///
/// # Errors
/// A non-square matrix, a preconditioner setup that fails with no other candidate left, or a
/// backend failure; a solve that does not converge is reported in [`AutoSolve::result`] (and
/// [`AutoSolve::failure`]).
pub fn solve<T, B>(
    be: &B,
    op: &B::Matrix,
    host: Option<&CsrMatrix<T>>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    probe: &ProbeParams,
) -> crate::Result<AutoSolve>
where
    T: Scalar,
    B: SolverOps<T> + IncompleteOps<T> + AmgOps<T> + StatsOps<T> + StorageOps<T>,
{
    let clock = Instant::now();
    let stats = be.matrix_stats(op)?;
    let stats_seconds = clock.elapsed().as_secs_f64();
    let choice = choose_from(stats);
    let choose_seconds = clock.elapsed().as_secs_f64();
    let mut s = solve_with_choice(be, op, host, choice, b, x, params, probe)?;
    s.phases.splice(
        0..0,
        [
            Phase::new("statistics", None, stats_seconds),
            Phase::new("rule", None, choose_seconds - stats_seconds),
        ],
    );
    s.choose_seconds = choose_seconds;
    s.setup_seconds += choose_seconds;
    if let Ok(info) = &mut s.result {
        info.setup_seconds += choose_seconds;
    }
    Ok(s)
}

/// The candidates after the first choice and its alternative: BiCGSTAB with Jacobi (none
/// where the diagonal has a zero), on a symmetric matrix plain MINRES (whose residual never
/// grows: it converges on the symmetric indefinite systems where BiCGSTAB wanders and a
/// restarted GMRES stagnates, Stokes saddle points with a zero block), and GMRES with ILU(0),
/// each once.
fn fallbacks(c: &AutoChoice, order: &mut Vec<Cand>) {
    let jac = if c.stats.missing_diagonal > 0 {
        AutoPrecond::None
    } else {
        AutoPrecond::Jacobi
    };
    let minres = c
        .stats
        .symmetric
        .then_some((AutoMethod::Minres, AutoPrecond::None));
    for k in [
        Some((AutoMethod::Bicgstab, jac)),
        minres,
        Some((AutoMethod::Gmres, AutoPrecond::Ilu0)),
    ]
    .into_iter()
    .flatten()
    {
        if !order.contains(&k) {
            order.push(k);
        }
    }
}

/// Whether the probe weighs `alt` against the first choice of `c`: CG's probe from
/// [`ProbeParams::amg_min_rows`] rows, BiCGSTAB's always.
fn probe_applies(c: &AutoChoice, p: &ProbeParams) -> bool {
    match (c.method, c.alternative) {
        (AutoMethod::Cg, Some(_)) => c.stats.rows >= p.amg_min_rows,
        (AutoMethod::Bicgstab, Some(_)) => true,
        _ => false,
    }
}

/// [`solve`] with the rule's choice made by the caller (`choose(a)` or
/// [`choose_from`](crate::precond::auto::choose_from), timed on its side).
///
/// The storage is decided first ([`precond::auto::storage`](crate::precond::auto::storage),
/// [`ProbeParams::storage`]): CG candidates run on the operator with `f32` values where the
/// plan takes them, an AMG hierarchy is built in `f32` where it says so, and the cost model
/// weighs AMG at the plan's measured factors; [`AutoSolve::storage`] reports it.
///
/// # Errors
/// As [`solve`].
#[allow(clippy::too_many_arguments)]
pub fn solve_with_choice<T, B>(
    be: &B,
    op: &B::Matrix,
    host: Option<&CsrMatrix<T>>,
    choice: AutoChoice,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    probe: &ProbeParams,
) -> crate::Result<AutoSolve>
where
    T: Scalar,
    B: SolverOps<T> + IncompleteOps<T> + AmgOps<T> + StatsOps<T> + StorageOps<T>,
{
    let t = Instant::now();
    let stored = Stored::new(be, op, host, &choice.stats, &probe.storage)?;
    let secs = t.elapsed().as_secs_f64();
    let probe = ProbeParams {
        model: stored_model(probe.model, stored.factors),
        ..*probe
    };
    let mut s = solve_stored(be, op, host, choice, b, x, params, &probe, &stored)?;
    s.storage = stored.report(s.choice.method);
    s.phases.insert(0, Phase::new("setup storage", None, secs));
    s.setup_seconds += secs;
    if let Ok(info) = &mut s.result {
        info.setup_seconds += secs;
    }
    Ok(s)
}

/// The cost model under a storage plan's factors `(measured, setup, iteration)`
/// ([`StoragePlan::factors`](crate::precond::auto::storage::StoragePlan::factors)): AMG's setup
/// and iteration scaled by the hierarchy's storage, in units of a cheap CG iteration measured
/// with the plan's values (`measured` of an `f64` one).
fn stored_model(m: CostModel, (measured, setup, iteration): (f64, f64, f64)) -> CostModel {
    CostModel {
        amg_setup: (m.amg_setup.0 * setup / measured, m.amg_setup.1 * setup),
        amg_iteration: (
            m.amg_iteration.0 * iteration / measured,
            m.amg_iteration.1 * iteration,
        ),
        ..m
    }
}

/// [`solve_with_choice`] with the storage decided.
#[allow(clippy::too_many_arguments)]
fn solve_stored<T, B>(
    be: &B,
    op: &B::Matrix,
    host: Option<&CsrMatrix<T>>,
    mut choice: AutoChoice,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
    probe: &ProbeParams,
    stored: &Stored<T, B>,
) -> crate::Result<AutoSolve>
where
    T: Scalar,
    B: SolverOps<T> + IncompleteOps<T> + AmgOps<T> + StatsOps<T> + StorageOps<T>,
{
    let host = Host {
        given: host,
        owned: OnceCell::new(),
    };
    let restart = probe.restart;
    let mut seg = Segments {
        iterations: 0,
        history: Vec::new(),
        seconds: 0.0,
        setup: 0.0,
        restarts: 0,
    };
    let mut out = AutoSolve {
        choice: choice.clone(),
        probe: None,
        cached: false,
        fallback: None,
        tried: Vec::new(),
        failure: None,
        result: Err(SolveError::NotConverged {
            iterations: 0,
            residual: f64::NAN,
        }),
        choose_seconds: 0.0,
        setup_seconds: 0.0,
        solve_seconds: 0.0,
        factor: None,
        amg: None,
        storage: StorageReport::default(),
        phases: Vec::new(),
    };
    let first: Cand = (choice.method, choice.precond);
    let key = cache_key(be.matrix_fingerprint(op), &choice.stats, params.rel_tol);
    let cached = if probe.cache && choice.alternative.is_some() {
        cache().lock().ok().and_then(|c| c.get(&key).copied())
    } else {
        None
    };
    // The candidates in the order they run.
    let mut order: Vec<Cand> = Vec::new();
    // Without checkpoints (`probe.enabled` false): the cheap candidate kept by the probe gets
    // twice its predicted iterations.
    let mut cap: Option<(Cand, usize)> = None;
    // The expensive candidate taken on the probe's prediction, and the cheap one it replaced:
    // judged on its own rate after its first window.
    let mut escalated: Option<(Cand, Cand)> = None;
    // A CG broke down: the matrix is indefinite and no CG runs after it.
    let mut indefinite = false;
    let mut last_err: Option<SolveError> = None;
    let mut best: Option<(f64, Cand)> = None;
    // The preconditioners built so far, kept for a candidate that runs again.
    let mut preconds: Vec<(AutoPrecond, Built<'_, T, B>)> = Vec::new();
    // What each candidate that ran measured: (candidate, rate per iteration, seconds per
    // iteration, iterations run).
    let mut known: Vec<(Cand, f64, f64, usize)> = Vec::new();
    // Candidates stopped for good: their rate cannot reach the tolerance, or is worse than
    // another's.
    let mut dropped: Vec<Cand> = Vec::new();
    // The true relative residual of x: 1 from a zero guess, unknown from a given one.
    // The kept candidate's call that went on after the probe's decision: its result, its
    // seconds and the decision.
    let mut pending: Option<(Result<SolveInfo, SolveError>, f64, Decision)> = None;
    // BiCGSTAB weighed against MINRES (symmetric indefinite systems): both measured, neither
    // with a setup.
    let duel = is_duel(first, choice.alternative);
    // Hand-overs between the two at checkpoints.
    let mut handovers = 0usize;
    let mut r_now = if params.initial_guess == InitialGuess::Zero {
        1.0
    } else {
        f64::NAN
    };
    if let Some(c) = cached {
        out.cached = true;
        choice.reason.push_str(&format!(
            "; cached decision for this pattern and these values: {}",
            cand_name(c)
        ));
        order.push(c);
        order.push(first);
        order.extend(choice.alternative);
    } else if let (Some(alt), true) = (
        choice.alternative,
        probe.enabled && probe_applies(&choice, probe),
    ) {
        // The probe: the cheap candidate from the caller's initial guess.
        let budget = match first.0 {
            AutoMethod::Cg => probe.cg_iterations,
            _ => probe.bicgstab_iterations,
        }
        .max(2)
        .min(params.max_iters.max(1));
        let built = seg.timed_setup(&mut out.phases, first.1, || {
            build_stored(be, op, &host, &choice, first.1, stored)
        })?;
        let rec = Recorder(Mutex::new(Vec::new()), params.observer);
        let watch = ProbeWatch {
            budget,
            method: first.0,
            expensive: alt.1,
            rel_tol: params.rel_tol,
            model: model_for(&choice, probe),
            nnz: choice.stats.nnz,
            checkpoint_factor: probe.checkpoint_factor,
            restart,
            minres_from: duel.then_some(probe.minres_from as f64),
            decision: Mutex::new(None),
        };
        // The probe inside the cheap candidate's first call, where it has iterations beyond
        // the probe's.
        let one = params.max_iters > budget;
        let pp = SolveParams {
            max_iters: if one { params.max_iters } else { budget },
            observer: Some(&rec),
            watch: if one { Some(&watch) } else { None },
            record_history: true,
            ..*params
        };
        let t = Instant::now();
        let r = run(
            be,
            stored.operator(first.0, op),
            &*built.0,
            first.0,
            restart,
            b,
            x,
            &pp,
        );
        let secs = t.elapsed().as_secs_f64();
        // The watch's decision, where the probe ran inside the call: a call it stopped to
        // escalate is taken as decided there (not weighed again on the call's whole seconds).
        let decided = watch.decision.lock().ok().and_then(|d| *d);
        let kept = decided.filter(|d| !d.escalate);
        if let Some(d) = kept {
            // Kept by the probe and gone on in the same call: the probe's part here, the rest
            // as the candidate's first run at the top of the queue.
            out.phases.push(Phase::new(
                format!("probe {}", cand_name(first)),
                Some(d.iterations),
                d.seconds,
            ));
            let report = ProbeReport {
                cheap: cand_name(first),
                expensive: cand_name(alt),
                iterations: d.iterations,
                seconds: d.seconds,
                residual: d.residual,
                rate: d.rate,
                predicted_iterations: d.predicted,
                predicted_cheap_seconds: d.cheap_seconds,
                predicted_expensive_seconds: d.dear_seconds,
                escalated: false,
                converged: false,
            };
            r_now = d.residual;
            known.push((
                first,
                d.rate,
                d.seconds / d.iterations.max(1) as f64,
                d.iterations,
            ));
            best = Some((d.residual, first));
            out.tried.push(format!(
                "{}: {} iterations to {:.2e} (the probe)",
                report.cheap, d.iterations, d.residual
            ));
            let against = if duel {
                format!(
                    "at most {}: kept without a {} window",
                    probe.minres_from, report.expensive
                )
            } else {
                format!(
                    "against {:.2} ms predicted for {}: kept",
                    d.dear_seconds * 1e3,
                    report.expensive
                )
            };
            choice.reason.push_str(&format!(
                "; probe: {} for {} iterations ({:.3} ms) reached {:.2e}, rate {:.4}/iteration: \
                 {:.0} more iterations, {:.2} ms, {against}",
                report.cheap,
                d.iterations,
                d.seconds * 1e3,
                d.residual,
                d.rate,
                d.predicted,
                d.cheap_seconds * 1e3,
            ));
            order.push(first);
            order.push(alt);
            pending = Some((r, secs, d));
            out.probe = Some(report);
            preconds.push((first.1, built));
        } else {
            out.phases.push(Phase::new(
                format!("probe {}", cand_name(first)),
                Some(r.as_ref().map_or_else(iterations_of, |i| i.iterations)),
                secs,
            ));
            let mut report = ProbeReport {
                cheap: cand_name(first),
                expensive: cand_name(alt),
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
                    choice.reason.push_str(&format!(
                        "; probe: {} converged within the probe ({} iterations, {:.3} ms)",
                        report.cheap,
                        info.iterations,
                        secs * 1e3,
                    ));
                    out.tried.push(format!(
                        "{}: converged in {} iterations (the probe)",
                        report.cheap, info.iterations
                    ));
                    if probe.cache {
                        if let Ok(mut c) = cache().lock() {
                            c.insert(key, first);
                        }
                    }
                    out.probe = Some(report);
                    return Ok(seg.close(out, seg.finish(Ok(info)), choice));
                }
                Err(
                    ref err @ SolveError::NotConverged {
                        iterations,
                        residual,
                    },
                ) => {
                    seg.add_failed(err, secs);
                    let h = rec.0.lock().map(|h| h.clone()).unwrap_or_default();
                    let rate = probe_rate(first.0, &h, iterations, residual);
                    let meas = Measured {
                        iterations,
                        seconds_per_iteration: secs / iterations.max(1) as f64,
                        residual,
                        rate,
                        nnz: choice.stats.nnz,
                    };
                    r_now = residual;
                    known.push((first, rate, meas.seconds_per_iteration, iterations));
                    report.iterations = iterations;
                    report.residual = residual;
                    report.rate = rate;
                    best = Some((residual, first));
                    out.tried.push(format!(
                        "{}: {iterations} iterations to {residual:.2e} (the probe)",
                        report.cheap
                    ));
                    if duel {
                        // BiCGSTAB against MINRES: both without a setup, each judged on its own
                        // measured time per residual reduction.
                        let b_need = model_factor(first, probe)
                            * iterations_to(params.rel_tol, residual, rate);
                        let b_secs = b_need * meas.seconds_per_iteration;
                        report.predicted_iterations = b_need;
                        report.predicted_cheap_seconds = b_secs;
                        let window = decided
                            .map_or(b_need.is_nan() || b_need > probe.minres_from as f64, |d| {
                                d.escalate
                            });
                        if !window {
                            choice.reason.push_str(&format!(
                                "; probe: {} for {iterations} iterations ({:.3} ms) reached \
                                 {residual:.2e}, rate {rate:.4}/iteration: {b_need:.0} more \
                                 iterations ({:.2} ms), at most {}: kept without a {} window",
                                report.cheap,
                                secs * 1e3,
                                b_secs * 1e3,
                                probe.minres_from,
                                report.expensive
                            ));
                            order.push(first);
                            order.push(alt);
                        } else {
                            let w = probe
                                .minres_window
                                .max(1)
                                .min(params.max_iters.saturating_sub(iterations).max(1));
                            let wp = SolveParams {
                                max_iters: w,
                                initial_guess: InitialGuess::Given,
                                ..*params
                            };
                            let (wr, ws) = {
                                if !preconds.iter().any(|(p, _)| *p == alt.1) && alt.1 != first.1 {
                                    let bt = seg.timed_setup(&mut out.phases, alt.1, || {
                                        build_stored(be, op, &host, &choice, alt.1, stored)
                                    })?;
                                    preconds.push((alt.1, bt));
                                }
                                let m = if alt.1 == first.1 {
                                    &*built.0
                                } else {
                                    &*preconds
                                        .iter()
                                        .find(|(p, _)| *p == alt.1)
                                        .expect("built above")
                                        .1
                                         .0
                                };
                                let t = Instant::now();
                                let wr = run(be, op, m, alt.0, restart, b, x, &wp);
                                (wr, t.elapsed().as_secs_f64())
                            };
                            out.phases.push(Phase::new(
                                format!("probe {}", cand_name(alt)),
                                Some(wr.as_ref().map_or_else(iterations_of, |i| i.iterations)),
                                ws,
                            ));
                            match wr {
                                Ok(info) => {
                                    seg.add(&info, ws);
                                    report.escalated = true;
                                    report.seconds += ws;
                                    out.tried.push(format!(
                                        "{}: converged in {} iterations (the probe)",
                                        report.expensive, info.iterations
                                    ));
                                    choice.reason.push_str(&format!(
                                        "; probe: {} for {iterations} iterations reached \
                                         {residual:.2e}; {} converged within its window ({} \
                                         iterations)",
                                        report.cheap, report.expensive, info.iterations
                                    ));
                                    if probe.cache {
                                        if let Ok(mut c) = cache().lock() {
                                            c.insert(key, alt);
                                        }
                                    }
                                    choice.method = alt.0;
                                    choice.precond = alt.1;
                                    out.probe = Some(report);
                                    return Ok(seg.close(out, seg.finish(Ok(info)), choice));
                                }
                                Err(
                                    ref werr @ SolveError::NotConverged {
                                        iterations: k,
                                        residual: rm,
                                    },
                                ) => {
                                    seg.add_failed(werr, ws);
                                    let m_rate = if k > 0 && rm > 0.0 && residual > 0.0 {
                                        (rm / residual).powf(1.0 / k as f64)
                                    } else {
                                        f64::NAN
                                    };
                                    let m_t = ws / k.max(1) as f64;
                                    known.push((alt, m_rate, m_t, k));
                                    r_now = rm;
                                    if rm < residual {
                                        best = Some((rm, alt));
                                    }
                                    out.tried.push(format!(
                                        "{}: {k} iterations to {rm:.2e} (the probe)",
                                        report.expensive
                                    ));
                                    let b_secs = model_factor(first, probe)
                                        * iterations_to(params.rel_tol, rm, rate)
                                        * meas.seconds_per_iteration;
                                    let m_need = model_factor(alt, probe)
                                        * iterations_to(params.rel_tol, rm, m_rate);
                                    let m_secs = m_need * m_t;
                                    let up =
                                        m_secs < b_secs || b_secs.is_nan() && m_secs.is_finite();
                                    report.predicted_cheap_seconds = b_secs;
                                    report.predicted_expensive_seconds = m_secs;
                                    report.escalated = up;
                                    choice.reason.push_str(&format!(
                                        "; probe: {} for {iterations} iterations ({:.3} ms) \
                                         reached {residual:.2e}, rate {rate:.4}/iteration; {} \
                                         for {k} iterations ({:.3} ms) reached {rm:.2e}, rate \
                                         {m_rate:.4}/iteration: {:.2} ms more against {:.2} ms: \
                                         {} goes on",
                                        report.cheap,
                                        secs * 1e3,
                                        report.expensive,
                                        ws * 1e3,
                                        b_secs * 1e3,
                                        m_secs * 1e3,
                                        if up { &report.expensive } else { &report.cheap }
                                    ));
                                    if up {
                                        order.push(alt);
                                        order.push(first);
                                    } else {
                                        order.push(first);
                                        order.push(alt);
                                    }
                                }
                                Err(werr) if recoverable(&werr) => {
                                    seg.add_failed(&werr, ws);
                                    out.tried
                                        .push(format!("{}: {werr} (the probe)", report.expensive));
                                    choice.reason.push_str(&format!(
                                        "; probe: {} failed in its window ({werr}): {} goes on",
                                        report.expensive, report.cheap
                                    ));
                                    dropped.push(alt);
                                    r_now = residual_of(&werr).unwrap_or(f64::NAN);
                                    if matches!(werr, SolveError::NonFinite { .. }) {
                                        be.fill(x, T::zero())?;
                                        r_now = 1.0;
                                    }
                                    order.push(first);
                                }
                                Err(werr) => {
                                    seg.add_failed(&werr, ws);
                                    out.probe = Some(report);
                                    return Ok(seg.close(out, Err(werr), choice));
                                }
                            }
                        }
                    } else {
                        let model = model_for(&choice, probe);
                        let (up, its, tc, te) = match decided {
                            Some(d) => (d.escalate, d.predicted, d.cheap_seconds, d.dear_seconds),
                            None => decide(&meas, alt.1, params.rel_tol, &model),
                        };
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
                    report.expensive,
                    if up { "escalated" } else { "kept" }
                ));
                        if up {
                            escalated = Some((alt, first));
                            order.push(alt);
                            order.push(first);
                        } else {
                            if its.is_finite() {
                                cap = Some((first, (2.0 * its) as usize + 2 * restart));
                            }
                            order.push(first);
                            order.push(alt);
                        }
                    }
                }
                Err(err) if recoverable(&err) => {
                    seg.add_failed(&err, secs);
                    report.escalated = true;
                    out.tried
                        .push(format!("{}: {err} (the probe)", report.cheap));
                    choice.reason.push_str(&format!(
                        "; probe: {} failed ({err}): {}",
                        report.cheap, report.expensive
                    ));
                    r_now = residual_of(&err).unwrap_or(f64::NAN);
                    if matches!(err, SolveError::NonFinite { .. }) {
                        be.fill(x, T::zero())?;
                        r_now = 1.0;
                    }
                    if first.0 == AutoMethod::Cg && matches!(err, SolveError::Breakdown { .. }) {
                        indefinite = true;
                    }
                    if out.fallback.is_none() {
                        out.fallback = Some(format!("{} failed ({err})", report.cheap));
                    }
                    last_err = Some(err);
                    order.push(alt);
                }
                Err(err) => {
                    seg.add_failed(&err, secs);
                    out.probe = Some(report);
                    return Ok(seg.close(out, Err(err), choice));
                }
            }
            out.probe = Some(report);
            preconds.push((first.1, built));
        }
    } else {
        order.push(first);
        order.extend(choice.alternative);
    }
    fallbacks(&choice, &mut order);
    let mut queue: VecDeque<Cand> = VecDeque::new();
    for c in order {
        if !queue.contains(&c) {
            queue.push_back(c);
        }
    }
    // The work bound: each candidate at most `max_iters` iterations over all its runs (what it
    // gets when named explicitly), all of them together at most `work_factor · max_iters`.
    let monitor = probe.enabled;
    let work_iters = probe.work_factor.max(1.0) * params.max_iters as f64;
    let total_limit = work_iters as usize;
    let mut saved: Option<B::Vector> = None;
    // The length of each candidate's last run that ended at a checkpoint.
    let mut last_chunk: Vec<(Cand, usize)> = Vec::new();
    let mut requeued: Vec<Cand> = Vec::new();
    let mut ran = 0usize;
    // The time bound: the solver calls together at most `work_factor · max_iters` iterations of
    // the cheapest candidate measured (the probe's, else the first run's) — iterations of
    // another candidate may cost 100× more (a deep triangular solve).
    let mut t_ref: Option<f64> = known.first().map(|k| k.2).filter(|t| *t > 0.0);
    let mut timed_out = false;
    // The time bound's multiple: `last_resort` once the last candidate left was started over
    // the bound (its iterations get the larger bound its setup got).
    let mut stretch = 1.0f64;
    // Candidates whose predicted setup was over what the bound leaves, sent behind the others.
    let mut deferred: Vec<Cand> = Vec::new();
    while let Some(cand) = queue.pop_front() {
        if (indefinite && cand.0 == AutoMethod::Cg) || dropped.contains(&cand) {
            continue;
        }
        let own = known.iter().find(|k| k.0 == cand).map_or(0, |k| k.3);
        let limit_total = if monitor {
            total_limit
        } else {
            params.max_iters
        };
        let left = params
            .max_iters
            .saturating_sub(if monitor { own } else { 0 })
            .min(limit_total.saturating_sub(seg.iterations));
        if left == 0 {
            if monitor {
                continue;
            }
            break;
        }
        let last = !queue.iter().any(|c| runnable(c, &dropped, indefinite));
        let continued = seg.iterations > 0 || out.probe.is_some();
        let seconds_left = t_ref.map(|t| work_iters * t * stretch - seg.seconds);
        if monitor && seconds_left.is_some_and(|l| l <= 0.0) {
            timed_out = true;
            break;
        }
        // A setup predicted to cost more than the bound leaves is not started: sent behind the
        // other candidates once, then dropped (an iteration bound that a setup of minutes
        // overruns is no bound).
        if let (true, Some(l), Some(t)) = (
            monitor && !preconds.iter().any(|(p, _)| *p == cand.1),
            seconds_left,
            t_ref,
        ) {
            let predicted = setup_seconds(cand.1, choice.stats.nnz, t, &model_for(&choice, probe));
            let name = cand_name(cand);
            let others = queue
                .iter()
                .any(|c| *c != cand && runnable(c, &dropped, indefinite));
            // The last resort: every other candidate has failed, so skipping this setup on a
            // prediction would turn a system it may solve into a failure. It runs within the
            // larger bound of `last_resort` times the whole work bound's seconds, its setup and
            // its iterations.
            let whole = work_iters * t;
            let last_resort = !others && predicted <= probe.last_resort.max(1.0) * whole;
            if predicted > l && last_resort {
                stretch = probe.last_resort.max(1.0);
                choice.reason.push_str(&format!(
                    "; {name}: setup predicted {predicted:.3} s, more than the {l:.3} s the \
                     work bound leaves, started as the last candidate left (within {:.0} × \
                     the bound's {whole:.3} s)",
                    probe.last_resort.max(1.0)
                ));
            } else if predicted > l {
                if others && !deferred.contains(&cand) {
                    deferred.push(cand);
                    queue.push_back(cand);
                    choice.reason.push_str(&format!(
                        "; {name}: setup predicted {predicted:.3} s, more than the {l:.3} s \
                         the work bound leaves: deferred"
                    ));
                    continue;
                }
                dropped.push(cand);
                out.tried.push(if others {
                    format!(
                        "{name}: not started (setup predicted {predicted:.3} s, {l:.3} s left \
                         in the work bound)"
                    )
                } else {
                    format!(
                        "{name}: not started (setup predicted {predicted:.3} s, {l:.3} s left \
                         in the work bound; more than {:.0} × its whole {whole:.3} s for the \
                         last candidate)",
                        probe.last_resort.max(1.0)
                    )
                });
                choice.reason.push_str(&format!(
                    "; {name}: setup predicted {predicted:.3} s, more than the {l:.3} s the \
                     work bound leaves: skipped"
                ));
                continue;
            }
        }
        let limit = if monitor {
            let rate = known.iter().find(|k| k.0 == cand).map(|k| k.1);
            let window = match escalated {
                Some((e, _)) if e == cand => Some(match cand.1 {
                    AutoPrecond::Amg => probe.amg_window.max(1),
                    _ => restart.max(1),
                }),
                _ => None,
            };
            // A run after a checkpoint grows at most 4× over the last one (a rate measured
            // where the residual fell early and then stalled over-promises).
            let grown = last_chunk
                .iter()
                .find(|l| l.0 == cand)
                .map_or(usize::MAX, |l| l.1.saturating_mul(4));
            let unknown = (left / 16)
                .max(restart)
                .min(CHECKPOINT_MAX.max(restart))
                .min(left);
            // MINRES weighed against BiCGSTAB: once measured, all it has left in one call (a
            // restart loses its Krylov space, which a saddle point cannot spare; its residual
            // never grows); unmeasured (BiCGSTAB failed first), its window measures it.
            let minres = duel && cand.0 == AutoMethod::Minres;
            match (window, rate) {
                (Some(w), _) => w.min(left),
                (None, Some(_)) if minres => left,
                (None, None) if minres && continued => probe.minres_window.clamp(1, left),
                (None, Some(rho)) => {
                    let need = iterations_to(params.rel_tol, r_now, rho);
                    let n = if need.is_finite() {
                        (probe.checkpoint_factor.max(1.0) * need) as usize + 2 * restart
                    } else {
                        unknown
                    };
                    n.min(grown).clamp(1, left)
                }
                // Nothing known: the whole budget for the first solver call of the solve, as
                // an explicit choice gets; a sixteenth of it after another candidate.
                (None, None) if !continued => left,
                (None, None) => unknown,
            }
            .min(
                // Within the time bound at this candidate's own seconds per iteration; one
                // window of `restart` iterations measures them first where its preconditioner
                // costs more than a diagonal.
                match (
                    seconds_left,
                    known.iter().find(|k| k.0 == cand).map(|k| k.2),
                ) {
                    (Some(l), Some(t)) if t > 0.0 => ((l / t) as usize).max(1),
                    // No preconditioner or Jacobi: an iteration costs at most about two of
                    // the first candidate measured (BiCGSTAB's two products against CG's one).
                    (Some(l), None)
                        if matches!(cand.1, AutoPrecond::None | AutoPrecond::Jacobi)
                            && t_ref.is_some_and(|t| t > 0.0) =>
                    {
                        ((l / (2.0 * t_ref.unwrap_or(1.0))) as usize).max(1)
                    }
                    (Some(_), _) => restart.max(1),
                    _ => usize::MAX,
                },
            )
        } else {
            let share = if last { left } else { (left / 2).max(1) };
            match cap {
                Some((c, n)) if c == cand && !requeued.contains(&cand) => n.clamp(1, share),
                _ => share,
            }
        };
        let fp = SolveParams {
            max_iters: limit,
            initial_guess: if continued {
                InitialGuess::Given
            } else {
                params.initial_guess
            },
            ..*params
        };
        if !preconds.iter().any(|(p, _)| *p == cand.1) {
            let built = seg.timed_setup(&mut out.phases, cand.1, || {
                build_stored(be, op, &host, &choice, cand.1, stored)
            });
            match built {
                Ok(bt) => preconds.push((cand.1, bt)),
                Err(e) => {
                    if queue.is_empty() && last_err.is_none() && ran == 0 {
                        return Err(e);
                    }
                    out.tried
                        .push(format!("{}: setup failed ({e})", cand_name(cand)));
                    dropped.push(cand);
                    continue;
                }
            }
        }
        let (_, (m, f, g)) = preconds
            .iter()
            .find(|(p, _)| *p == cand.1)
            .expect("built above");
        if f.is_some() {
            out.factor = f.clone();
        }
        if g.is_some() {
            out.amg = g.clone();
        }
        let pre = if cand == first { pending.take() } else { None };
        // The iterate before the run, to go back to where the run makes it worse.
        if monitor && continued && pre.is_none() {
            let t = Instant::now();
            if saved.is_none() {
                saved = Some(be.zeros(choice.stats.rows)?);
            }
            if let Some(s) = saved.as_mut() {
                be.copy(x, s)?;
            }
            out.phases.push(Phase::new(
                "save the iterate",
                None,
                t.elapsed().as_secs_f64(),
            ));
        }
        let r_before = r_now;
        let t = Instant::now();
        let (r, secs, limit) = match pre {
            // The run after the probe in the probe's own call: its part of the call (a converged
            // call counts whole, the probe's iterations and seconds included, as the probe's
            // part was not added).
            Some((r, total, d)) => {
                let rest = (total - d.seconds).max(0.0);
                let r = r.map_err(|e| {
                    seg.add_failed(
                        &SolveError::NotConverged {
                            iterations: d.iterations,
                            residual: d.residual,
                        },
                        d.seconds,
                    );
                    map_iterations(e, |k| k.saturating_sub(d.iterations))
                });
                let its = r
                    .as_ref()
                    .map_or_else(iterations_of, |i| i.iterations - d.iterations);
                out.phases
                    .push(Phase::new(cand_name(cand), Some(its), rest));
                let secs = if r.is_ok() { total } else { rest };
                (r, secs, d.stop_at.saturating_sub(d.iterations).max(1))
            }
            None => {
                let r = run(
                    be,
                    stored.operator(cand.0, op),
                    &**m,
                    cand.0,
                    restart,
                    b,
                    x,
                    &fp,
                );
                let secs = t.elapsed().as_secs_f64();
                out.phases.push(Phase::new(
                    cand_name(cand),
                    Some(r.as_ref().map_or_else(iterations_of, |i| i.iterations)),
                    secs,
                ));
                (r, secs, limit)
            }
        };
        ran += 1;
        choice.method = cand.0;
        choice.precond = cand.1;
        let err = match r {
            Ok(info) => {
                seg.add(&info, secs);
                out.tried.push(format!(
                    "{}: converged in {} iterations",
                    cand_name(cand),
                    info.iterations
                ));
                if probe.cache && choice.alternative.is_some() {
                    if let Ok(mut c) = cache().lock() {
                        c.insert(key, cand);
                    }
                }
                if out.fallback.is_some() || ran > 1 || out.cached || !dropped.is_empty() {
                    choice
                        .reason
                        .push_str(&format!("; finished with {}", cand_name(cand)));
                }
                return Ok(seg.close(out, seg.finish(Ok(info)), choice));
            }
            Err(err) if recoverable(&err) => err,
            Err(err) => {
                seg.add_failed(&err, secs);
                return Ok(seg.close(out, Err(err), choice));
            }
        };
        seg.add_failed(&err, secs);
        let k = iterations_of(&err);
        out.tried.push(format!("{}: {err}", cand_name(cand)));
        if let Some(r) = residual_of(&err) {
            if best.is_none_or(|(b, _)| r < b) {
                best = Some((r, cand));
            }
        }
        // An f32 hierarchy that broke the method down, or stagnated it: built again in f64,
        // the candidate again from the iterate before the run (or zero).
        let f32_cause = matches!(
            err,
            SolveError::Breakdown { .. }
                | SolveError::NonFinite { .. }
                | SolveError::Stagnation { .. }
        );
        if cand.1 == AutoPrecond::Amg && stored.hierarchy_failed(f32_cause, &err) {
            match (residual_of(&err), saved.as_ref()) {
                (Some(r), _) if r.is_finite() => r_now = r,
                (_, Some(s)) if monitor && continued => {
                    be.copy(s, x)?;
                    r_now = r_before;
                }
                _ => {
                    be.fill(x, T::zero())?;
                    r_now = 1.0;
                }
            }
            preconds.retain(|(p, _)| *p != AutoPrecond::Amg);
            queue.push_front(cand);
            continue;
        }
        if cand.0 == AutoMethod::Cg && matches!(err, SolveError::Breakdown { .. }) {
            indefinite = true;
        }
        if !monitor {
            if out.fallback.is_none() {
                out.fallback = Some(format!("{} failed ({err})", cand_name(cand)));
            }
            choice
                .reason
                .push_str(&format!("; {} failed ({err})", cand_name(cand)));
            if matches!(err, SolveError::NonFinite { .. }) {
                be.fill(x, T::zero())?;
            }
            // Cut short by its share, or a BiCGSTAB breakdown (cured by a restart from the
            // iterate with a new shadow residual): again at the end, three runs at most.
            let again = match err {
                SolveError::NotConverged { .. } => limit < left,
                SolveError::Breakdown { .. } => cand.0 == AutoMethod::Bicgstab,
                _ => false,
            };
            if again && requeued.iter().filter(|c| **c == cand).count() < 2 {
                requeued.push(cand);
                queue.push_back(cand);
            }
            last_err = Some(err);
            continue;
        }
        // Checkpoint: what this run measured, from the true residuals at both ends.
        let r_after = residual_of(&err).unwrap_or(f64::NAN);
        let worse = r_before.is_finite() && (r_after.is_nan() || r_after > r_before);
        if (worse || matches!(err, SolveError::NonFinite { .. })) && saved.is_some() {
            if let Some(s) = saved.as_ref() {
                be.copy(s, x)?;
            }
            r_now = r_before;
        } else if matches!(err, SolveError::NonFinite { .. }) {
            be.fill(x, T::zero())?;
            r_now = 1.0;
        } else {
            r_now = r_after;
        }
        let rate = if r_before > 0.0 && r_after > 0.0 && k > 0 {
            (r_after / r_before).powf(1.0 / k as f64)
        } else {
            f64::NAN
        };
        let t_it = secs / k.max(1) as f64;
        if t_ref.is_none() && t_it > 0.0 {
            t_ref = Some(t_it);
        }
        match last_chunk.iter_mut().find(|l| l.0 == cand) {
            Some(l) => l.1 = limit,
            None => last_chunk.push((cand, limit)),
        }
        match known.iter_mut().find(|e| e.0 == cand) {
            Some(e) => {
                *e = (cand, rate, t_it, e.3 + k);
            }
            None => known.push((cand, rate, t_it, k)),
        }
        let own_left = params
            .max_iters
            .saturating_sub(known.iter().find(|e| e.0 == cand).map_or(0, |e| e.3));
        let need = iterations_to(params.rel_tol, r_now, rate);
        let name = cand_name(cand);
        let not_converged = matches!(err, SolveError::NotConverged { .. });
        // (Not where MINRES is weighed against it: MINRES goes on instead.)
        let minres_next = duel
            && queue
                .iter()
                .any(|c| c.0 == AutoMethod::Minres && runnable(c, &dropped, indefinite));
        let breakdown_again = cand.0 == AutoMethod::Bicgstab
            && matches!(err, SolveError::Breakdown { .. })
            && !minres_next
            && requeued.iter().filter(|c| **c == cand).count() < 2;
        let what = err.to_string();
        last_err = Some(err);
        if breakdown_again {
            // Cured by a restart from the iterate with a new shadow residual.
            requeued.push(cand);
            queue.push_back(cand);
            continue;
        }
        if !not_converged {
            if out.fallback.is_none() {
                out.fallback = Some(format!("{name} failed ({what})"));
            }
            choice.reason.push_str(&format!("; {name} failed ({what})"));
            dropped.push(cand);
            continue;
        }
        // The expensive candidate after its window: kept only while its own rate promises less
        // time than the cheap candidate's from here.
        if let Some((e, c)) = escalated {
            if e == cand {
                escalated = None;
                let cheap = known.iter().find(|k| k.0 == c).map_or(f64::INFINITY, |k| {
                    model_factor(c, probe) * iterations_to(params.rel_tol, r_now, k.1) * k.2
                });
                let mine = need * t_it;
                if mine >= cheap && runnable(&c, &dropped, indefinite) {
                    dropped.push(cand);
                    out.fallback.get_or_insert_with(|| {
                        format!("{name} slower than predicted (rate {rate:.4})")
                    });
                    choice.reason.push_str(&format!(
                        "; {name}: rate {rate:.4}/iteration over {k} iterations, {:.2} ms more \
                         against {:.2} ms for {}: dropped, {} goes on",
                        mine * 1e3,
                        cheap * 1e3,
                        cand_name(c),
                        cand_name(c)
                    ));
                    queue.retain(|q| *q != c);
                    queue.push_front(c);
                    continue;
                }
                // Kept: its next run goes by its rate alone, not the window's growth cap.
                last_chunk.retain(|l| l.0 != cand);
            }
        }
        // A candidate whose rate cannot reach the tolerance in what it has left stops (not
        // MINRES weighed against BiCGSTAB: a window's rate misses its later speed-up, and it is
        // the method for these systems; the work bound still holds it).
        let time_left = t_ref.map_or(f64::INFINITY, |t| work_iters * t * stretch - seg.seconds);
        let judged = !need.is_nan() && (!duel || cand.0 != AutoMethod::Minres);
        if judged
            && (need > probe.hopeless * own_left as f64 || need * t_it > probe.hopeless * time_left)
        {
            dropped.push(cand);
            out.fallback
                .get_or_insert_with(|| format!("{name} cannot reach the tolerance"));
            choice.reason.push_str(&format!(
                "; {name}: rate {rate:.4}/iteration at {r_now:.2e} needs {need:.0} more \
                 iterations ({:.3} s), {own_left} iterations ({:.3} s) left: stopped",
                need * t_it,
                time_left.max(0.0)
            ));
            continue;
        }
        // BiCGSTAB and MINRES both measured: the other takes over where its rate now promises
        // less time from here (twice at most).
        if let (true, Some(alt)) = (duel && handovers < 2, choice.alternative) {
            let other = if cand == first {
                Some(alt)
            } else if cand == alt {
                Some(first)
            } else {
                None
            };
            let theirs = other
                .filter(|o| runnable(o, &dropped, indefinite) && queue.contains(o))
                .and_then(|o| known.iter().find(|k| k.0 == o))
                .map(|k| {
                    (
                        k.0,
                        model_factor(k.0, probe) * iterations_to(params.rel_tol, r_now, k.1) * k.2,
                    )
                });
            let mine = model_factor(cand, probe) * need * t_it;
            // BiCGSTAB kept by its probe whose measured rate now predicts more than
            // `minres_from` iterations: MINRES's window first, then the two are weighed.
            let unmeasured = cand == first
                && runnable(&alt, &dropped, indefinite)
                && queue.contains(&alt)
                && !known.iter().any(|k| k.0 == alt);
            let slow = model_factor(cand, probe) * need;
            if unmeasured && (slow.is_nan() || slow > probe.minres_from as f64) {
                handovers += 1;
                choice.reason.push_str(&format!(
                    "; {name}: rate {rate:.4}/iteration, {slow:.0} more iterations, more than {}: \
                     {}'s window",
                    probe.minres_from,
                    cand_name(alt)
                ));
                queue.retain(|q| *q != alt);
                queue.push_front(cand);
                queue.push_front(alt);
                continue;
            }
            if let Some((o, t)) = theirs.filter(|(_, t)| *t < mine) {
                handovers += 1;
                choice.reason.push_str(&format!(
                    "; {name}: rate {rate:.4}/iteration, {:.2} ms more against {:.2} ms for {}: \
                     handed over",
                    mine * 1e3,
                    t * 1e3,
                    cand_name(o)
                ));
                queue.retain(|q| *q != o);
                queue.push_front(cand);
                queue.push_front(o);
                continue;
            }
        }
        // The cheap candidate kept by the probe, judged on its own rate: the expensive one
        // takes over where it now promises less time, its setup included.
        if let (Some(alt), Some(p)) = (choice.alternative, out.probe.as_ref()) {
            let unrun = !known.iter().any(|k| k.0 == alt) && runnable(&alt, &dropped, indefinite);
            if cand == first && !p.escalated && unrun && queue.contains(&alt) {
                let meas = Measured {
                    iterations: known.iter().find(|e| e.0 == cand).map_or(k, |e| e.3),
                    seconds_per_iteration: t_it,
                    residual: r_now,
                    rate,
                    nnz: choice.stats.nnz,
                };
                let dear = expensive_seconds(&meas, alt.1, need, &model_for(&choice, probe));
                if dear < need * t_it {
                    choice.reason.push_str(&format!(
                        "; {name}: rate {rate:.4}/iteration, {:.2} ms more against {:.2} ms for \
                         {}: escalated",
                        need * t_it * 1e3,
                        dear * 1e3,
                        cand_name(alt)
                    ));
                    escalated = Some((alt, cand));
                    queue.retain(|q| *q != alt);
                    queue.push_front(cand);
                    queue.push_front(alt);
                    continue;
                }
            }
        }
        // On with the next run from here.
        queue.push_front(cand);
    }
    // Nothing converged: one sentence.
    if timed_out {
        out.tried.push(format!(
            "the work bound ({} iterations of the cheapest candidate's time) reached",
            total_limit
        ));
    }
    let failure = format!(
        "no candidate converged: {}; tried {}",
        match best {
            Some((r, c)) => format!(
                "the best relative residual reached was {r:.2e} ({})",
                cand_name(c)
            ),
            None => "no candidate reported a residual".to_string(),
        },
        out.tried.join(", ")
    );
    choice.reason.push_str(&format!("; {failure}"));
    out.failure = Some(failure);
    let result = seg.finish(Err(last_err.unwrap_or(SolveError::NotConverged {
        iterations: seg.iterations,
        residual: best.map_or(f64::NAN, |b| b.0),
    })));
    Ok(seg.close(out, result, choice))
}

/// The iterations from relative residual `r` to `tol` at `rate` per iteration: ∞ where the rate
/// is not below 1, NaN where it or `r` is unknown.
fn iterations_to(tol: f64, r: f64, rate: f64) -> f64 {
    if !(rate.is_finite() && r.is_finite() && r > 0.0) {
        return f64::NAN;
    }
    if r <= tol {
        return 0.0;
    }
    if rate >= 1.0 {
        return f64::INFINITY;
    }
    if rate <= 0.0 {
        return 1.0;
    }
    (tol / r).ln() / rate.ln()
}

/// The cost model for the choice: a zero diagonal makes the factorization a matched ILUT with
/// its own setup cost.
fn model_for(c: &AutoChoice, p: &ProbeParams) -> CostModel {
    if c.stats.missing_diagonal > 0 {
        CostModel {
            ilu_setup_per_entry: p.model.ilut_setup_per_entry,
            ..p.model
        }
    } else {
        p.model
    }
}

/// The model's correction of a probed rate's iteration count for the candidate's method
/// (none for MINRES, whose rate comes from the true residuals at both ends of its window and
/// whose residual never grows).
fn model_factor(c: Cand, p: &ProbeParams) -> f64 {
    match c.0 {
        AutoMethod::Cg => p.model.cg_iterations_factor,
        AutoMethod::Minres => 1.0,
        _ => p.model.bicgstab_iterations_factor,
    }
}

/// Whether the probe weighs BiCGSTAB against MINRES without a preconditioner: the rule's choice
/// for symmetric indefinite systems (saddle points, shifted operators).
fn is_duel(first: Cand, alternative: Option<Cand>) -> bool {
    first.0 == AutoMethod::Bicgstab && alternative == Some((AutoMethod::Minres, AutoPrecond::None))
}

/// The key of the per-pattern cache: the pattern's fingerprint (with the element type), the
/// statistics that the decision reads from the values (each rounded to about 5 %, so a matrix
/// scaled by a constant reuses the decision and one with other values does not) and the
/// tolerance (to a factor of about 1.6).
fn cache_key(pattern: u64, s: &MatrixStats, rel_tol: f64) -> u64 {
    use std::hash::{Hash, Hasher};
    let log = |v: f64| -> i64 {
        if v.is_nan() {
            i64::MIN
        } else if v <= 0.0 {
            i64::MIN + 1
        } else if v.is_infinite() {
            i64::MAX
        } else {
            (v.ln() * 20.0).round() as i64
        }
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        pattern,
        s.symmetric,
        s.missing_diagonal,
        s.negative_diagonal,
        s.positive_diagonal,
        log(s.diagonal_spread),
        log(s.min_dominance),
        (s.opposite_sign_fraction * 100.0).round() as i64,
        s.shifted(),
        if s.symmetric { 0 } else { log(s.asymmetry) },
        (rel_tol.log10() * 2.0).round() as i64,
    )
        .hash(&mut h);
    h.finish()
}

/// Whether `c` may still run: not dropped, and no CG once a CG broke down.
fn runnable(c: &Cand, dropped: &[Cand], indefinite: bool) -> bool {
    !dropped.contains(c) && (!indefinite || c.0 != AutoMethod::Cg)
}

/// The residual reduction per iteration of a probe. CG: a least-squares fit of `ln r` over the
/// second half of the recorded history (CG's early iterations are faster than its steady
/// rate). BiCGSTAB, whose residual may grow for a while before it falls (non-normal
/// convection) and oscillates: the reduction from the first recorded residual to the smallest
/// one, spread over all the probe's iterations (no progress gives 1: it does not converge).
/// Without a history: from the final true residual over all iterations.
fn probe_rate(method: AutoMethod, history: &[f64], iterations: usize, residual: f64) -> f64 {
    let k = history.len();
    if method != AutoMethod::Cg && k >= 3 {
        let first = history[0];
        let least = history.iter().copied().fold(f64::INFINITY, f64::min);
        if first > 0.0 && least.is_finite() && least > 0.0 {
            return (least / first).min(1.0).powf(1.0 / (k - 1) as f64);
        }
    }
    if k >= 6 {
        let pts: Vec<(f64, f64)> = history[k / 2..]
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0 && v.is_finite())
            .map(|(i, v)| (i as f64, v.ln()))
            .collect();
        if pts.len() >= 3 {
            let m = pts.len() as f64;
            let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
            let (mx, my) = (sx / m, sy / m);
            let (sxy, sxx) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
                (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
            });
            if sxx > 0.0 {
                return (sxy / sxx).exp();
            }
        }
    }
    if iterations == 0 || residual <= 0.0 {
        return f64::NAN;
    }
    residual.powf(1.0 / iterations as f64)
}
