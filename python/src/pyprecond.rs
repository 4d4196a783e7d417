//! A preconditioner given by Python — `M` as a SciPy or CuPy `LinearOperator`, a sparse or
//! dense matrix, or a callable — applied inside the crate's solver body.
//!
//! The body calls back into Python with the residual as a NumPy array (the Python side has
//! already wrapped `M` so that it takes and returns NumPy vectors of the system's dtype, moving
//! them to CuPy and back when `M`'s data lives on the GPU) and copies `M r` into its vector. On
//! the GPU backend the residual makes a host round trip per application (downloaded, handed to
//! Python, the result uploaded), and the solver's recorded blocks (CUDA graphs) are turned off,
//! since an application leaves the device. An exception raised by `M` stops the solve and is
//! re-raised as it was.

use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Instant;

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use segsparse::solvers::{
    bicgstab, gmres, pcg, Cpu, KrylovOps, LinearOperator, Preconditioner, SolveError, VectorOps,
};

use crate::arrays::{ro, rw, slice, slice_mut, Elem};
use crate::errors::{check_len, Failure, Res};
use crate::matrix::{opts, outcome, Inner, Mat, Method, Opts, Outcome, PyMatrix, Timed};

/// `z ← M r` by a Python callable of one NumPy vector.
pub struct PyPrecond<T> {
    f: Py<PyAny>,
    /// The exception `M` raised, kept to be re-raised after the solve.
    err: Mutex<Option<PyErr>>,
    _t: PhantomData<T>,
}

impl<T: Elem> PyPrecond<T> {
    fn new(f: Py<PyAny>) -> Self {
        PyPrecond {
            f,
            err: Mutex::new(None),
            _t: PhantomData,
        }
    }

    fn call(&self, r: &[T], z: &mut [T]) -> segsparse::Result<()> {
        let out = Python::with_gil(|py| -> PyResult<()> {
            let arr = PyArray1::from_slice(py, r);
            let out = self.f.bind(py).call1((arr,))?;
            let view = ro::<T>(&out, "M r")?;
            let s = slice(&view, "M r")?;
            if s.len() != z.len() {
                return Err(PyValueError::new_err(format!(
                    "the preconditioner M returned {} elements, expected {}",
                    s.len(),
                    z.len()
                )));
            }
            z.copy_from_slice(s);
            Ok(())
        });
        out.map_err(|e| {
            *self.err.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            segsparse::Error::InvalidInput("the preconditioner M raised an exception".into())
        })
    }

    fn take_error(&self) -> Option<PyErr> {
        self.err.lock().unwrap_or_else(|p| p.into_inner()).take()
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

fn solve<T, B, A>(
    be: &B,
    a: &A,
    p: &PyPrecond<T>,
    o: &Opts,
    b: &B::Vector,
    x: &mut B::Vector,
    t0: Instant,
) -> Timed
where
    T: Elem,
    B: KrylovOps<T>,
    A: LinearOperator<T, B>,
{
    let setup = t0.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut r = match o.method {
        Method::Cg => pcg(be, a, p, b, x, &o.params),
        Method::Bicgstab => bicgstab(be, a, p, b, x, &o.params),
        Method::Gmres(m) => gmres(be, a, p, b, x, m, &o.params),
    };
    let solve = t.elapsed().as_secs_f64();
    if let Ok(i) = &mut r {
        i.setup_seconds = setup;
    }
    (r, setup, solve)
}

impl<T: Elem> Mat<T> {
    /// The crate's solver body with a Python preconditioner, host vectors (on the GPU when the
    /// matrix is there: `b` and `x` copied over).
    fn solve_host_op(&self, o: &Opts, p: &PyPrecond<T>, b: &[T], x: &mut [T]) -> Res<Outcome> {
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        let r = if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let g = d.csr.gpu();
            let bd = g.upload(b)?;
            let mut xd = g.upload(x)?;
            let r = solve(&*ops, &d.csr, p, o, &bd, &mut xd, t0);
            x.copy_from_slice(&g.download(&xd)?);
            r
        } else {
            let host = self.host()?;
            let bv = b.to_vec();
            let mut xv = x.to_vec();
            let r = solve(&Cpu, host, p, o, &bv, &mut xv, t0);
            x.copy_from_slice(&xv);
            r
        };
        match (&r.0, p.take_error()) {
            (Err(SolveError::Backend(_)), Some(e)) => Err(Failure::Python(e)),
            _ => outcome(r),
        }
    }
}

/// Solves `A x = b` with the crate's solver body and a preconditioner `m_apply` written in
/// Python (a function of one NumPy vector of the matrix's dtype returning `M r`); `b` and `x`
/// are NumPy vectors (`x` the start when `x0`, overwritten with the solution). Returns the
/// outcome tuple of `_Matrix.solve_host`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (matrix, method, m_apply, b, x, rtol, atol, maxiter, x0, check_every = None, restart = 30))]
pub fn solve_host_operator(
    py: Python<'_>,
    matrix: PyRef<'_, PyMatrix>,
    method: &str,
    m_apply: PyObject,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    check_every: Option<usize>,
    restart: usize,
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
    // An application leaves the device: no recorded blocks.
    o.params.graphs = false;
    fn go<T: Elem>(
        py: Python<'_>,
        m: &Mat<T>,
        o: &Opts,
        f: PyObject,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let p = PyPrecond::<T>::new(f);
        let ba = ro::<T>(b, "b")?;
        let mut xa = rw::<T>(x, "x")?;
        let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
        crate::errors::run(py, || m.solve_host_op(o, &p, bs, xs))
    }
    match &matrix.inner {
        Inner::F32(m) => go::<f32>(py, m, &o, m_apply, b, x),
        Inner::F64(m) => go::<f64>(py, m, &o, m_apply, b, x),
    }
}
