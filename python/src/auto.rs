//! The automatic solve (`segsparse.solve` with `method="auto"` and `M="auto"`): the crate's
//! `autosolve::solve` on the matrix where it lives — the `_Matrix`'s GPU copy for a GPU or CuPy
//! matrix (statistics read on the device, no host copy), the host matrix otherwise — the same
//! body, probe, cost model and per-pattern cache as `sparse-solve`'s default.

use std::collections::HashMap;
use std::time::Instant;

use pyo3::prelude::*;
use segsparse::autosolve::{AutoSolve, ProbeParams, ProbeReport};
use segsparse::backend::Cpu;
use segsparse::precond::auto::storage::StorageParams;
use segsparse::solvers::SolveParams;

use crate::arrays::{ro, rw, slice, slice_mut, Elem};
use crate::choice::{stats_tuple, StatsTuple};
use crate::device::{with_borrowed, DevicePair};
use crate::errors::{check_len, run, Failure, Res};
use crate::matrix::{Inner, Mat, PyMatrix};
use crate::outcome::{outcome, Outcome};
use crate::solve::solve_params;

/// The probe as the Python side reads it: `(cheap, expensive, iterations, seconds, residual,
/// rate, predicted_iterations, predicted_cheap_seconds, predicted_expensive_seconds, escalated,
/// converged)`.
type ProbeTuple = (
    String,
    String,
    usize,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    bool,
    bool,
);

fn probe_tuple(p: &ProbeReport) -> ProbeTuple {
    (
        p.cheap.clone(),
        p.expensive.clone(),
        p.iterations,
        p.seconds,
        p.residual,
        p.rate,
        p.predicted_iterations,
        p.predicted_cheap_seconds,
        p.predicted_expensive_seconds,
        p.escalated,
        p.converged,
    )
}

/// The storage as the Python side reads it: `(values, hierarchy, reason, fallback)`.
type StorageTuple = (&'static str, Option<&'static str>, String, Option<String>);

/// What the automatic solve chose and did: `(method, precond, reason, stats, seconds, probe,
/// cached, fallback, tried, failure, phases, storage)`, the fields of the CLI's JSON `auto`
/// object; `phases` as `(name, iterations, seconds)`.
type Report = (
    &'static str,
    &'static str,
    String,
    StatsTuple,
    f64,
    Option<ProbeTuple>,
    bool,
    Option<String>,
    Vec<String>,
    Option<String>,
    Vec<(String, Option<usize>, f64)>,
    StorageTuple,
);

fn report(s: &AutoSolve) -> Report {
    (
        s.choice.method.name(),
        s.choice.precond.name(),
        s.choice.reason.clone(),
        stats_tuple(&s.choice.stats),
        s.choose_seconds,
        s.probe.as_ref().map(probe_tuple),
        s.cached,
        s.fallback.clone(),
        s.tried.clone(),
        s.failure.clone(),
        s.phases
            .iter()
            .map(|p| (p.name.clone(), p.iterations, p.seconds))
            .collect(),
        (
            s.storage.values,
            s.storage.hierarchy,
            s.storage.reason.clone(),
            s.storage.fallback.clone(),
        ),
    )
}

/// `storage=`: `None`/`"auto"` (the storage rule's choice) or `"f64"`/`"float64"` (the caller's
/// `f64`).
fn storage_params(storage: Option<&str>) -> Res<StorageParams> {
    let auto = match storage.map(|s| s.trim().to_ascii_lowercase()) {
        None => true,
        Some(s) if s == "auto" => true,
        Some(s) if s == "f64" || s == "float64" => false,
        Some(s) => {
            return Err(Failure::Value(format!(
                "the automatic solve's storage is 'auto' or 'float64', not {s:?}"
            )))
        }
    };
    Ok(StorageParams {
        auto,
        ..Default::default()
    })
}

/// The probe's options a caller may set (`segsparse.solve(..., probe={...})`), each a
/// [`ProbeParams`] field or, for the iteration counts and factors, one of its
/// [`CostModel`](segsparse::autosolve::CostModel)'s.
const PROBE_OPTIONS: &str = "cg_iterations, bicgstab_iterations, amg_min_rows, amg_window, \
                             work_factor, hopeless, checkpoint_factor, cg_iterations_factor, \
                             bicgstab_iterations_factor, amg_iterations, minres_window, minres_from";

fn probe_params(
    restart: usize,
    probe: bool,
    options: Option<HashMap<String, f64>>,
    storage: Option<&str>,
) -> Res<ProbeParams> {
    if !(1..=255).contains(&restart) {
        return Err(Failure::Value(format!(
            "restart must be in 1..=255, got {restart}"
        )));
    }
    let mut pp = ProbeParams {
        enabled: probe,
        restart,
        storage: storage_params(storage)?,
        ..Default::default()
    };
    for (k, v) in options.unwrap_or_default() {
        let count = |v: f64| -> Res<usize> {
            if v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= 1e9 {
                Ok(v as usize)
            } else {
                Err(Failure::Value(format!(
                    "probe option {k} must be a whole number >= 1, got {v}"
                )))
            }
        };
        let factor = |v: f64| -> Res<f64> {
            if v.is_finite() && v >= 1.0 {
                Ok(v)
            } else {
                Err(Failure::Value(format!(
                    "probe option {k} must be a finite number >= 1, got {v}"
                )))
            }
        };
        let positive = |v: f64| -> Res<f64> {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(Failure::Value(format!(
                    "probe option {k} must be a finite number > 0, got {v}"
                )))
            }
        };
        match k.as_str() {
            "cg_iterations" => pp.cg_iterations = count(v)?,
            "bicgstab_iterations" => pp.bicgstab_iterations = count(v)?,
            "amg_min_rows" => pp.amg_min_rows = count(v)?,
            "amg_window" => pp.amg_window = count(v)?,
            "minres_window" => pp.minres_window = count(v)?,
            "minres_from" => pp.minres_from = count(v)?,
            "work_factor" => pp.work_factor = factor(v)?,
            "hopeless" => pp.hopeless = factor(v)?,
            "checkpoint_factor" => pp.checkpoint_factor = factor(v)?,
            "cg_iterations_factor" => pp.model.cg_iterations_factor = positive(v)?,
            "amg_iterations" => pp.model.amg_iterations = positive(v)?,
            "bicgstab_iterations_factor" => pp.model.bicgstab_iterations_factor = positive(v)?,
            _ => {
                return Err(Failure::Value(format!(
                    "unknown probe option {k:?} (known: {PROBE_OPTIONS})"
                )))
            }
        }
    }
    Ok(pp)
}

/// The outcome tuple of an automatic solve whose uploads took `before` seconds.
fn finish(s: AutoSolve, before: f64) -> Res<(Outcome, Report)> {
    let rep = report(&s);
    let setup = before + s.setup_seconds;
    let r = s.result.map(|mut i| {
        i.setup_seconds = setup;
        i
    });
    Ok((outcome((r, setup, s.solve_seconds))?, rep))
}

impl<T: Elem> Mat<T> {
    /// The automatic solve with host vectors; on the GPU when the matrix is there (b and x
    /// copied over and back).
    fn auto_solve_host(
        &self,
        p: &SolveParams,
        pp: &ProbeParams,
        b: &[T],
        x: &mut [T],
    ) -> Res<(Outcome, Report)> {
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let g = d.csr.gpu();
            let bd = g.upload(b)?;
            let mut xd = g.upload(x)?;
            let before = t0.elapsed().as_secs_f64();
            let s = segsparse::autosolve::solve(
                &*ops,
                &d.csr,
                self.host_if_present(),
                &bd,
                &mut xd,
                p,
                pp,
            )?;
            x.copy_from_slice(&g.download(&xd)?);
            finish(s, before)
        } else {
            let host = self.host()?;
            let bv = b.to_vec();
            let mut xv = x.to_vec();
            let before = t0.elapsed().as_secs_f64();
            let s = segsparse::autosolve::solve(&Cpu, host, Some(host), &bv, &mut xv, p, pp)?;
            x.copy_from_slice(&xv);
            finish(s, before)
        }
    }

    /// The automatic solve on the caller's device vectors (see `spmv_device`).
    fn auto_solve_device(
        &self,
        p: &SolveParams,
        pp: &ProbeParams,
        dp: DevicePair<'_>,
    ) -> Res<(Outcome, Report)> {
        let t0 = Instant::now();
        let (ops, d) = self.gpu_ops()?;
        let (n, m) = self.shape;
        let host = self.host_if_present();
        // SAFETY: the Python layer checked that both arrays are contiguous device arrays of
        // this dtype with nrows / ncols elements, and holds them during the call.
        let (s, before) = unsafe {
            with_borrowed(dp, n, m, |b, x| {
                let before = t0.elapsed().as_secs_f64();
                let s = segsparse::autosolve::solve(&*ops, &d.csr, host, b, x, p, pp);
                (s, before)
            })
        }?;
        finish(s?, before)
    }
}

fn real_matrix(m: &PyMatrix) -> Res<()> {
    match m.inner {
        Inner::F32(_) | Inner::F64(_) => Ok(()),
        _ => Err(Failure::Value(
            "the automatic solve's probe is for real matrices; a complex matrix takes the \
             complex rule (segsparse.auto_choice)"
                .into(),
        )),
    }
}

/// `auto_solve_host(matrix, b, x, rtol, atol, maxiter, x0, check_every, restart, probe,
/// probe_options, storage)`: the
/// automatic solve with NumPy vectors (`x` holds the initial guess when `x0` and the result
/// afterwards). Returns `(outcome, report)`: the tuple `SolveInfo` is built from, and what was
/// chosen and why (the CLI's JSON `auto` fields).
#[pyfunction]
#[pyo3(signature = (matrix, b, x, rtol, atol, maxiter, x0, check_every = None, restart = 30, probe = true, probe_options = None, storage = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn auto_solve_host(
    py: Python<'_>,
    matrix: PyRef<'_, PyMatrix>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    check_every: Option<usize>,
    restart: usize,
    probe: bool,
    probe_options: Option<HashMap<String, f64>>,
    storage: Option<&str>,
) -> PyResult<(Outcome, Report)> {
    let setup = real_matrix(&matrix).and_then(|_| {
        Ok((
            solve_params(rtol, atol, maxiter, x0, check_every)?,
            probe_params(restart, probe, probe_options, storage)?,
        ))
    });
    let (p, pp) = setup.map_err(|f| f.into_py_err(py))?;
    macro_rules! go {
        ($m:expr, $t:ty) => {{
            let ba = ro::<$t>(b, "b")?;
            let mut xa = rw::<$t>(x, "x")?;
            let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
            run(py, || $m.auto_solve_host(&p, &pp, bs, xs))
        }};
    }
    match &matrix.inner {
        Inner::F32(m) => go!(m, f32),
        Inner::F64(m) => go!(m, f64),
        _ => unreachable!("checked above"),
    }
}

/// `auto_solve_device(matrix, b, x, rtol, atol, maxiter, x0, wait, signal, check_every,
/// restart, probe, probe_options, storage)`: the automatic solve with device pointers (see `_Matrix.spmv_device`).
#[pyfunction]
#[pyo3(signature = (matrix, b, x, rtol, atol, maxiter, x0, wait, signal, check_every = None, restart = 30, probe = true, probe_options = None, storage = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn auto_solve_device(
    py: Python<'_>,
    matrix: PyRef<'_, PyMatrix>,
    b: u64,
    x: u64,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    wait: Vec<u64>,
    signal: u64,
    check_every: Option<usize>,
    restart: usize,
    probe: bool,
    probe_options: Option<HashMap<String, f64>>,
    storage: Option<&str>,
) -> PyResult<(Outcome, Report)> {
    let setup = real_matrix(&matrix).and_then(|_| {
        Ok((
            solve_params(rtol, atol, maxiter, x0, check_every)?,
            probe_params(restart, probe, probe_options, storage)?,
        ))
    });
    let (p, pp) = setup.map_err(|f| f.into_py_err(py))?;
    let d = DevicePair {
        b,
        x,
        wait: &wait,
        signal,
    };
    match &matrix.inner {
        Inner::F32(m) => run(py, || m.auto_solve_device(&p, &pp, d)),
        Inner::F64(m) => run(py, || m.auto_solve_device(&p, &pp, d)),
        _ => unreachable!("checked above"),
    }
}

/// `_core.clear_auto_cache()`: forgets the automatic solve's per-pattern decisions.
#[pyfunction]
pub(crate) fn clear_auto_cache() {
    segsparse::autosolve::clear_cache();
}
