//! Python code called from the crate's solver body, for every element type (`float32`,
//! `float64`, `complex64`, `complex128`): a preconditioner `M` (a SciPy or CuPy
//! `LinearOperator`, a sparse or dense matrix, or a callable), a matrix-free operator `A`
//! (anything with `matvec`; host vectors, the CPU backend) and SciPy's per-iteration `callback`
//! (through the solvers' [`Observer`]). The matrix may be real or complex, on the CPU or the GPU.
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
//! iterate, after every iteration of CG, COCG and BiCGSTAB and after every restart cycle of
//! GMRES (`callback_type='x'`), or `callback(residual)` after every inner GMRES step
//! (`'pr_norm'`/`'legacy'`: the crate's least-squares residual estimate over `||b||` times
//! `residual_scale`, which the Python side sets for a left-preconditioned system). Each call
//! makes the solve read its status after that iteration and turns the recorded blocks off.

use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Instant;

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use segsparse::backend::{Cpu, Identity, LinearOperator, Preconditioner, SolverOps, VectorOps};
use segsparse::solvers::{Observer, SolveError, SolveParams};
use segsparse::{Complex, ElemSlice};

use crate::arrays::with_vectors;
use crate::arrays::{ro, slice, AnyElem};
use crate::errors::{check_len, Failure, Res};
use crate::matrix::{Inner, PyMatrix};
use crate::outcome::{outcome, Outcome, Timed};
use crate::solve::{call, Held, Opts, Precond, PyOptions};

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
fn call_vector<T: AnyElem>(f: &Py<PyAny>, v: &[T], out: &mut [T], what: &str) -> PyResult<()> {
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

impl<T: AnyElem> PyPrecond<T> {
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
impl<T: AnyElem, B: VectorOps<T>> Preconditioner<T, B> for PyPrecond<T> {
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

impl<T: AnyElem> LinearOperator<T, Cpu> for PyOperator<T> {
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
    /// The factor of the residual passed (1, or `||b'|| / ||b||` for a left-preconditioned
    /// system `b' = M b`).
    scale: f64,
    err: Raised,
}

impl Observer for PyCallback {
    fn on_iteration(&self, _it: usize, relative_residual: f64) -> segsparse::Result<()> {
        if self.kind != CallbackKind::Residual {
            return Ok(());
        }
        let r = relative_residual * self.scale;
        Python::with_gil(|py| self.f.bind(py).call1((r,)).map(drop))
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

/// The solve of `o` with the callables `c` on backend `be` (host vectors `b` and `x` copied to
/// the backend and `x` back).
fn solve<T: AnyElem, B: SolverOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    c: &Callables<'_, T>,
    o: &Opts,
    b: &[T],
    x: &mut [T],
    t0: Instant,
) -> Res<Timed> {
    let p: &dyn Preconditioner<T, B> = match &c.m {
        Some(m) => m,
        None => &Identity,
    };
    let params = SolveParams {
        observer: c.callback.as_ref().map(|f| f as &dyn Observer),
        ..o.params
    };
    check_len("b", b.len(), a.nrows(), "the matrix")?;
    check_len("x", x.len(), a.ncols(), "the matrix")?;
    let bd = be.upload(b)?;
    let mut xd = be.upload(x)?;
    let r = call(be, a, p, o, &params, &bd, &mut xd, t0);
    x.copy_from_slice(&be.download(&xd)?);
    Ok(r)
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
/// preconditioner; the options name `"none"`), a matrix-free `matvec` (same form, returning
/// `A x`; then `matrix` is `None` and the dtype is `b`'s) and SciPy's `callback` with
/// `callback_kind` `"x"` (the iterate) or `"pr_norm"` (GMRES's residual estimate after each
/// inner step, times `residual_scale`). `b` and `x` are NumPy vectors of the system's dtype
/// (real or complex; `x` the start when the options say so, overwritten with the solution).
/// Returns the outcome tuple of `_Matrix.solve_host`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (matrix, opts, m_apply, b, x, matvec = None, callback = None, callback_kind = None, residual_scale = 1.0))]
pub fn solve_host_operator(
    py: Python<'_>,
    matrix: Option<PyRef<'_, PyMatrix>>,
    opts: PyRef<'_, PyOptions>,
    m_apply: Option<PyObject>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    matvec: Option<PyObject>,
    callback: Option<PyObject>,
    callback_kind: Option<&str>,
    residual_scale: f64,
) -> PyResult<Outcome> {
    let mut o = opts.0;
    if o.precond != Precond::None {
        return Err(PyValueError::new_err(
            "a solve with Python callables takes its preconditioner as m_apply: the options \
             must name 'none'",
        ));
    }
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
    let c = Calls {
        o,
        m_apply,
        callback: callback.map(|f| PyCallback {
            f,
            kind,
            scale: residual_scale,
            err: Raised::default(),
        }),
    };
    match (matrix, matvec) {
        (Some(m), None) => match &m.inner {
            Inner::F32(a) => c.on_matrix(py, || a.held(), b, x),
            Inner::F64(a) => c.on_matrix(py, || a.held(), b, x),
            Inner::C64(a) => c.on_matrix(py, || a.held(), b, x),
            Inner::C128(a) => c.on_matrix(py, || a.held(), b, x),
        },
        (None, Some(f)) => {
            if b.downcast::<PyArray1<f32>>().is_ok() {
                c.matrix_free::<f32>(py, f, b, x)
            } else if b.downcast::<PyArray1<Complex<f32>>>().is_ok() {
                c.matrix_free::<Complex<f32>>(py, f, b, x)
            } else if b.downcast::<PyArray1<Complex<f64>>>().is_ok() {
                c.matrix_free::<Complex<f64>>(py, f, b, x)
            } else {
                c.matrix_free::<f64>(py, f, b, x)
            }
        }
        _ => Err(PyValueError::new_err(
            "give either a matrix or a matvec, not both or neither",
        )),
    }
}

/// What `solve_host_operator` was given, before the element type is known.
struct Calls {
    o: Opts,
    m_apply: Option<PyObject>,
    callback: Option<PyCallback>,
}

impl Calls {
    /// The solve with the matrix `held()` returns (of `b`'s element type `T`).
    fn on_matrix<'m, T: AnyElem>(
        self,
        py: Python<'_>,
        held: impl FnOnce() -> Res<Held<'m, T>> + Send,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let c = Callables {
            m: self.m_apply.map(PyPrecond::<T>::new),
            a: None,
            callback: self.callback,
        };
        let o = &self.o;
        with_vectors::<T, _>(py, b, x, ["b", "x"], |bs, xs| {
            let t0 = Instant::now();
            let r = match held()? {
                Held::Cpu(a) => solve(&Cpu, a, &c, o, bs, xs, t0),
                Held::Gpu(be, a) => solve(&*be, a, &c, o, bs, xs, t0),
            };
            finish_op(r, &c)
        })
    }

    /// The solve with the Python `matvec` `f` as `A` (of `b`'s element type `T`), on the CPU.
    fn matrix_free<T: AnyElem>(
        self,
        py: Python<'_>,
        f: PyObject,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let o = &self.o;
        let (m_apply, callback) = (self.m_apply, self.callback);
        with_vectors::<T, _>(py, b, x, ["b", "x"], |bs, xs| {
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
            let r = solve(&Cpu, &a, &c, o, bs, xs, Instant::now());
            finish_op(r, &c)
        })
    }
}
