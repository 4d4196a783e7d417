//! What a solve asks for, read once for every element type and every matrix: the method, the
//! crate's preconditioner by name, the parameters ([`Opts`]; `_core.Options` to Python, built
//! once per solve and passed to whichever entry point runs it), and the one solver call
//! ([`call`]) that the real and complex matrices and the Python callables all go through.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;

use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Cpu, LinearOperator, Preconditioner, SolverOps};
use segsparse::solvers::{bicgstab, gmres, minres, pcg, pcocg, InitialGuess, SolveParams};
use segsparse::Elem;

use crate::arrays::AnyElem;
use crate::errors::{Failure, Res};
use crate::outcome::Timed;

/// The solvers the bindings know (a new one is one more arm here and in [`call`], plus a thin
/// function in `segsparse/solvers.py`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Cg,
    /// Conjugate orthogonal CG (complex symmetric `A`; CG itself for a real one).
    Cocg,
    Bicgstab,
    /// Restarted GMRES with this restart length.
    Gmres(usize),
    /// MINRES (symmetric indefinite `A`, an SPD preconditioner).
    Minres,
}

/// The crate's preconditioners by name (a Python `M` is not one of them: it is passed as a
/// callable, see `pyprecond`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precond {
    None,
    Jacobi,
    /// The crate's Chebyshev polynomial (in the Jacobi-scaled matrix) of this degree (of its
    /// residual polynomial: degree − 1 products per application). Real matrices only.
    Poly(usize),
    /// ILU(0) (automatic diagonal shift on a bad pivot; `true`: the automatic path's
    /// parameters, with a row matching where the diagonal needs one).
    Ilu0(bool),
    /// IC(0) (automatic diagonal shift on a bad pivot; `true`: the automatic path's
    /// parameters).
    Ic0(bool),
    /// Smoothed-aggregation AMG (a given `_Amg`, or one built with the defaults per solve).
    /// Real matrices only.
    Amg,
}

/// Solver options from Python.
#[derive(Clone, Copy)]
pub(crate) struct Opts {
    pub(crate) method: Method,
    pub(crate) precond: Precond,
    pub(crate) params: SolveParams<'static>,
}

/// `_core.Options(method, precond, rtol, atol, maxiter, x0, check_every=None, restart=30,
/// degree=5)`: the options of one solve, for `_Matrix.solve_host`,
/// `solve_device`, `solve_host_block` and `solve_host_operator`.
#[pyclass(name = "Options", frozen)]
pub struct PyOptions(pub(crate) Opts);

#[pymethods]
impl PyOptions {
    /// The options of one solve; a bad name, restart length, degree or tolerance is a
    /// `ValueError` naming it.
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (method, precond, rtol, atol, maxiter, x0, check_every = None, restart = 30, degree = 5))]
    fn new(
        py: Python<'_>,
        method: &str,
        precond: &str,
        rtol: f64,
        atol: f64,
        maxiter: usize,
        x0: bool,
        check_every: Option<usize>,
        restart: usize,
        degree: usize,
    ) -> PyResult<Self> {
        let bad = |m: String| Err(pyo3::exceptions::PyValueError::new_err(m));
        let method = match method {
            "cg" => Method::Cg,
            "cocg" => Method::Cocg,
            "bicgstab" => Method::Bicgstab,
            "minres" => Method::Minres,
            "gmres" if (1..=255).contains(&restart) => Method::Gmres(restart),
            "gmres" => return bad(format!("restart must be in 1..=255, got {restart}")),
            m => return bad(format!("unknown solver {m:?}")),
        };
        let precond = match precond {
            "none" => Precond::None,
            "jacobi" => Precond::Jacobi,
            "ilu0" => Precond::Ilu0(false),
            "ic0" => Precond::Ic0(false),
            // The automatic choice's ILU(0)/IC(0) (`segsparse.auto_choice`).
            "ilu0:auto" => Precond::Ilu0(true),
            "ic0:auto" => Precond::Ic0(true),
            "poly" if degree >= 1 => Precond::Poly(degree),
            "amg" => Precond::Amg,
            "poly" => return bad(format!("the polynomial degree must be >= 1, got {degree}")),
            p => {
                return bad(format!(
                    "unknown preconditioner {p:?} (known: 'none', 'jacobi', 'poly', 'ilu0', \
                     'ic0', 'amg')"
                ))
            }
        };
        Ok(PyOptions(Opts {
            method,
            precond,
            params: solve_params(rtol, atol, maxiter, x0, check_every)
                .map_err(|f| f.into_py_err(py))?,
        }))
    }
}

/// The solver parameters from Python's `rtol`, `atol`, `maxiter`, `x0 is not None` and
/// `check_every` (a convergence history always kept), for the explicit and the automatic solve.
pub(crate) fn solve_params(
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    check_every: Option<usize>,
) -> Res<SolveParams<'static>> {
    if !(rtol >= 0.0 && atol >= 0.0) {
        return Err(Failure::Value(format!(
            "tolerances must be >= 0 (rtol = {rtol}, atol = {atol})"
        )));
    }
    Ok(SolveParams {
        rel_tol: rtol,
        abs_tol: atol,
        max_iters: maxiter,
        initial_guess: if x0 {
            InitialGuess::Given
        } else {
            InitialGuess::Zero
        },
        record_history: true,
        check_every,
        ..Default::default()
    })
}

/// The solver call of `o.method` with preconditioner `p` and the parameters `params` (`o`'s,
/// or `o`'s with an observer), timed in the crate's model: setup from `t0` to the call, then
/// the call itself.
#[allow(clippy::too_many_arguments)]
pub(crate) fn call<T: Elem, B: SolverOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    p: &dyn Preconditioner<T, B>,
    o: &Opts,
    params: &SolveParams<'_>,
    b: &B::Vector,
    x: &mut B::Vector,
    t0: Instant,
) -> Timed {
    let setup = t0.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut r = match o.method {
        Method::Cg => pcg(be, a, p, b, x, params),
        Method::Cocg => pcocg(be, a, p, b, x, params),
        Method::Bicgstab => bicgstab(be, a, p, b, x, params),
        Method::Gmres(m) => gmres(be, a, p, b, x, m, params),
        Method::Minres => minres(be, a, p, b, x, params),
    };
    let solve = t.elapsed().as_secs_f64();
    if let Ok(i) = &mut r {
        i.setup_seconds = setup;
    }
    (r, setup, solve)
}

/// A matrix of the bindings as an operator of element type `T`, where it lives: the host CSR
/// on the CPU backend, or the uploaded CSR with the solver kernels on the GPU.
pub(crate) enum Held<'a, T: AnyElem> {
    Cpu(&'a dyn LinearOperator<T, Cpu>),
    Gpu(Arc<GpuOps<T>>, &'a dyn LinearOperator<T, GpuOps<T>>),
}
