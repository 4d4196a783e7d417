//! Python code called from the crate's solver body: a preconditioner `M` (a SciPy or CuPy
//! `LinearOperator`, a sparse or dense matrix, or a callable), a matrix-free operator `A`
//! (anything with `matvec`; host vectors, the CPU backend) and SciPy's per-iteration `callback`
//! (through the solvers' [`Observer`]).
//!
//! The body calls back into Python with the residual as a NumPy array (the Python side has
//! already wrapped `M` so that it takes and returns NumPy vectors of the system's dtype, moving
//! them to CuPy and back when `M`'s data lives on the GPU) and copies `M r` into its vector. On
//! the GPU backend the residual makes a host round trip per application (downloaded, handed to
//! Python, the result uploaded), and the solver's recorded blocks (CUDA graphs) are turned off,
//! since an application leaves the device. An exception raised by `M`, `A` or the callback
//! stops the solve and is re-raised as it was.
//!
//! The callback sees what SciPy's solvers pass: `callback(xk)`, a NumPy copy of the current
//! iterate, after every iteration of CG and BiCGSTAB and after every restart cycle of GMRES
//! (`callback_type='x'`), or `callback(residual)` after every inner GMRES step
//! (`'pr_norm'`/`'legacy'`: the crate's least-squares residual estimate over `||b||`, which
//! is the unpreconditioned residual since the crate's GMRES is right-preconditioned; SciPy's
//! left-preconditioned GMRES passes `||M r|| / ||b||`, the same without `M`). Each call
//! makes the solve read its status after that iteration and turns the recorded blocks off.

use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Instant;

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use segsparse::backend::{Cpu, Identity, LinearOperator, Preconditioner, SolverOps, VectorOps};
use segsparse::solvers::{bicgstab, gmres, pcg, Observer, SolveError, SolveParams};
use segsparse::ElemSlice;

use crate::arrays::{ro, rw, slice, slice_mut, Elem};
use crate::errors::{check_len, Failure, Res};
use crate::matrix::{opts, Inner, Mat, Method, Opts, PyMatrix};
use crate::outcome::{outcome, Outcome, Timed};

/// The exception a Python callable raised inside a solve, kept to be re-raised after it.
#[derive(Default)]
struct Raised(Mutex<Option<PyErr>>);

impl Raised {
    /// Keeps `e` and returns the crate error that stops the solve.
    fn keep(&self, e: PyErr, who: &str) -> segsparse::Error {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        segsparse::Error::InvalidInput(format!("{who} raised an exception"))
    }

    fn take(&self) -> Option<PyErr> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Calls `f(v)` with a NumPy copy of `v` and copies the 1-D result of `T` into `out`.
fn call_vector<T: Elem>(f: &Py<PyAny>, v: &[T], out: &mut [T], what: &str) -> PyResult<()> {
    Python::with_gil(|py| {
        let arr = PyArray1::from_slice(py, v);
        let res = f.bind(py).call1((arr,))?;
        let view = ro::<T>(&res, what)?;
        let s = slice(&view, what)?;
        if s.len() != out.len() {
            return Err(PyValueError::new_err(format!(
                "{what} returned {} elements, expected {}",
                s.len(),
                out.len()
            )));
        }
        out.copy_from_slice(s);
        Ok(())
    })
}

/// `z ← M r` by a Python callable of one NumPy vector.
pub struct PyPrecond<T> {
    f: Py<PyAny>,
    err: Raised,
    _t: PhantomData<T>,
}

impl<T: Elem> PyPrecond<T> {
    fn new(f: Py<PyAny>) -> Self {
        PyPrecond {
            f,
            err: Raised::default(),
            _t: PhantomData,
        }
    }

    fn call(&self, r: &[T], z: &mut [T]) -> segsparse::Result<()> {
        call_vector(&self.f, r, z, "the preconditioner M")
            .map_err(|e| self.err.keep(e, "the preconditioner M"))
    }
}

/// Every backend: the residual read to the host, `M` called, the result written back.
impl<T: Elem, B: VectorOps<T>> Preconditioner<T, B> for PyPrecond<T> {
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> segsparse::Result<()> {
        let rh = be.download(r)?;
        let mut zh = vec![T::zero(); rh.len()];
        self.call(&rh, &mut zh)?;
        let zv = be.upload(&zh)?;
        be.copy(&zv, z)
    }
}

/// `y ← A x` by a Python `matvec` of one NumPy vector: a matrix-free operator on the host.
pub struct PyOperator<T> {
    f: Py<PyAny>,
    n: usize,
    err: Raised,
    _t: PhantomData<T>,
}

impl<T: Elem> LinearOperator<T, Cpu> for PyOperator<T> {
    fn nrows(&self) -> usize {
        self.n
    }

    fn ncols(&self) -> usize {
        self.n
    }

    fn apply(&self, _be: &Cpu, x: &Vec<T>, y: &mut Vec<T>) -> segsparse::Result<()> {
        call_vector(&self.f, x, y, "the operator A (matvec)")
            .map_err(|e| self.err.keep(e, "the operator A (matvec)"))
    }
}

/// What SciPy's `callback` is given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CallbackKind {
    /// The iterate (`callback(xk)`).
    Iterate,
    /// The relative residual estimate after each inner GMRES step.
    Residual,
}

/// SciPy's `callback` as an [`Observer`] of the solve.
struct PyCallback {
    f: Py<PyAny>,
    kind: CallbackKind,
    err: Raised,
}

impl Observer for PyCallback {
    fn on_iteration(&self, _it: usize, relative_residual: f64) -> segsparse::Result<()> {
        if self.kind != CallbackKind::Residual {
            return Ok(());
        }
        Python::with_gil(|py| self.f.bind(py).call1((relative_residual,)).map(drop))
            .map_err(|e| self.err.keep(e, "the callback"))
    }

    fn wants_iterate(&self) -> bool {
        self.kind == CallbackKind::Iterate
    }

    fn on_iterate(&self, _it: usize, x: ElemSlice<'_>) -> segsparse::Result<()> {
        Python::with_gil(|py| {
            let arr = match x {
                ElemSlice::F32(x) => PyArray1::from_slice(py, x).into_any(),
                ElemSlice::F64(x) => PyArray1::from_slice(py, x).into_any(),
                ElemSlice::C64(x) => PyArray1::from_slice(py, x).into_any(),
                ElemSlice::C128(x) => PyArray1::from_slice(py, x).into_any(),
            };
            self.f.bind(py).call1((arr,)).map(drop)
        })
        .map_err(|e| self.err.keep(e, "the callback"))
    }
}

/// The Python callables of one solve.
struct Callables<'a, T> {
    m: Option<PyPrecond<T>>,
    a: Option<&'a PyOperator<T>>,
    callback: Option<PyCallback>,
}

impl<T> Callables<'_, T> {
    /// The first exception one of them raised.
    fn raised(&self) -> Option<PyErr> {
        let m = self.m.as_ref().and_then(|p| p.err.take());
        let a = self.a.as_ref().and_then(|p| p.err.take());
        let c = self.callback.as_ref().and_then(|p| p.err.take());
        m.or(a).or(c)
    }
}

fn solve<T, B, A>(
    be: &B,
    a: &A,
    c: &Callables<'_, T>,
    o: &Opts,
    b: &B::Vector,
    x: &mut B::Vector,
    t0: Instant,
) -> Timed
where
    T: Elem,
    B: SolverOps<T>,
    A: LinearOperator<T, B>,
{
    let setup = t0.elapsed().as_secs_f64();
    let t = Instant::now();
    let p: &dyn Preconditioner<T, B> = match &c.m {
        Some(m) => m,
        None => &Identity,
    };
    let pr = &SolveParams {
        observer: c.callback.as_ref().map(|f| f as &dyn Observer),
        ..o.params
    };
    let mut r = match o.method {
        Method::Cg => pcg(be, a, p, b, x, pr),
        Method::Bicgstab => bicgstab(be, a, p, b, x, pr),
        Method::Gmres(m) => gmres(be, a, p, b, x, m, pr),
    };
    let solve = t.elapsed().as_secs_f64();
    if let Ok(i) = &mut r {
        i.setup_seconds = setup;
    }
    (r, setup, solve)
}

impl<T: Elem> Mat<T> {
    /// The crate's solver body with Python callables, host vectors (on the GPU when the matrix
    /// is there: `b` and `x` copied over).
    fn solve_host_op(&self, o: &Opts, c: &Callables<'_, T>, b: &[T], x: &mut [T]) -> Res<Timed> {
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        Ok(if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let g = d.csr.gpu();
            let bd = g.upload(b)?;
            let mut xd = g.upload(x)?;
            let r = solve(&*ops, &d.csr, c, o, &bd, &mut xd, t0);
            x.copy_from_slice(&g.download(&xd)?);
            r
        } else {
            let host = self.host()?;
            let bv = b.to_vec();
            let mut xv = x.to_vec();
            let r = solve(&Cpu, host, c, o, &bv, &mut xv, t0);
            x.copy_from_slice(&xv);
            r
        })
    }
}

/// The outcome of a solve with Python callables: an exception one of them raised is
/// re-raised.
fn finish_op<T>(r: Res<Timed>, c: &Callables<'_, T>) -> Res<Outcome> {
    let r = r?;
    match (&r.0, c.raised()) {
        (Err(SolveError::Backend(_)), Some(e)) => Err(Failure::Python(e)),
        _ => outcome(r),
    }
}

/// Solves `A x = b` with the crate's solver body and Python callables: the preconditioner
/// `m_apply` (a function of one NumPy vector of the system's dtype returning `M r`; `None`: no
/// preconditioner), a matrix-free `matvec` (same form, returning `A x`; then `matrix` is `None`
/// and the dtype is `b`'s) and SciPy's `callback` with `callback_kind` `"x"` (the iterate) or
/// `"pr_norm"` (GMRES's residual estimate after each inner step). `b` and `x` are NumPy
/// vectors (`x` the start when `x0`, overwritten with the solution). Returns the outcome tuple
/// of `_Matrix.solve_host`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (matrix, method, m_apply, b, x, rtol, atol, maxiter, x0, check_every = None, restart = 30, matvec = None, callback = None, callback_kind = None))]
pub fn solve_host_operator(
    py: Python<'_>,
    matrix: Option<PyRef<'_, PyMatrix>>,
    method: &str,
    m_apply: Option<PyObject>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    check_every: Option<usize>,
    restart: usize,
    matvec: Option<PyObject>,
    callback: Option<PyObject>,
    callback_kind: Option<&str>,
) -> PyResult<Outcome> {
    let mut o = opts(
        method,
        "none",
        rtol,
        atol,
        maxiter,
        x0,
        check_every,
        restart,
        1,
    )
    .map_err(|f| f.into_py_err(py))?;
    // An application of M leaves the device: no recorded blocks.
    o.params.graphs = false;
    let kind = match callback_kind {
        None | Some("x") => CallbackKind::Iterate,
        Some("pr_norm") => CallbackKind::Residual,
        Some(k) => {
            return Err(PyValueError::new_err(format!(
                "unknown callback kind {k:?} (known: 'x', 'pr_norm')"
            )))
        }
    };
    let callback = callback.map(|f| PyCallback {
        f,
        kind,
        err: Raised::default(),
    });
    match (matrix, matvec) {
        (Some(m), None) => match &m.inner {
            Inner::F32(m) => on_matrix::<f32>(py, m, &o, m_apply, callback, b, x),
            Inner::F64(m) => on_matrix::<f64>(py, m, &o, m_apply, callback, b, x),
            Inner::C64(_) | Inner::C128(_) => Err(PyValueError::new_err(
                "Python operators and callbacks with a complex matrix run on the operator path \
                 (segsparse.solvers), not through solve_host_operator",
            )),
        },
        (None, Some(f)) => {
            if b.downcast::<PyArray1<f32>>().is_ok() {
                matrix_free::<f32>(py, f, &o, m_apply, callback, b, x)
            } else {
                matrix_free::<f64>(py, f, &o, m_apply, callback, b, x)
            }
        }
        _ => Err(PyValueError::new_err(
            "give either a matrix or a matvec, not both or neither",
        )),
    }
}

fn on_matrix<T: Elem>(
    py: Python<'_>,
    m: &Mat<T>,
    o: &Opts,
    m_apply: Option<PyObject>,
    callback: Option<PyCallback>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
) -> PyResult<Outcome> {
    let c = Callables {
        m: m_apply.map(PyPrecond::<T>::new),
        a: None,
        callback,
    };
    let ba = ro::<T>(b, "b")?;
    let mut xa = rw::<T>(x, "x")?;
    let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
    crate::errors::run(py, || finish_op(m.solve_host_op(o, &c, bs, xs), &c))
}

fn matrix_free<T: Elem>(
    py: Python<'_>,
    f: PyObject,
    o: &Opts,
    m_apply: Option<PyObject>,
    callback: Option<PyCallback>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
) -> PyResult<Outcome> {
    let ba = ro::<T>(b, "b")?;
    let mut xa = rw::<T>(x, "x")?;
    let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
    check_len("x", xs.len(), bs.len(), "b").map_err(|e| e.into_py_err(py))?;
    let a = PyOperator {
        f,
        n: bs.len(),
        err: Raised::default(),
        _t: PhantomData,
    };
    let c = Callables {
        m: m_apply.map(PyPrecond::<T>::new),
        a: Some(&a),
        callback,
    };
    crate::errors::run(py, || {
        let t0 = Instant::now();
        let bv = bs.to_vec();
        let mut xv = xs.to_vec();
        let r = solve(&Cpu, &a, &c, o, &bv, &mut xv, t0);
        xs.copy_from_slice(&xv);
        finish_op(Ok(r), &c)
    })
}
