//! `_ComplexMatrix`: a complex CSR matrix (`complex64` or `complex128`) held by the crate on the
//! CPU, its product `A·x`, and the solvers CG (Hermitian positive definite), COCG (complex
//! symmetric), BiCGSTAB and GMRES with no, Jacobi, ILU(0) or IC(0) preconditioning: the crate's
//! one solver body with the complex element type.
//!
//! NumPy's `complex64` / `complex128` are `Complex<f32>` / `Complex<f64>` in memory (interleaved
//! `re, im`): vectors are read and written in place, as the real `_Matrix` does.

use std::time::Instant;

use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use segsparse::precond::auto::{auto_incomplete_params, choose_complex};
use segsparse::precond::{Ic0, Ilu0, IncompleteParams, Jacobi};
use segsparse::solvers::{
    bicgstab, gmres, pcg, pcocg, Cpu, Identity, InitialGuess, Preconditioner, SolveParams,
};
use segsparse::{Complex, CsrMatrix, Elem};

use crate::arrays::{ro, rw, slice, slice_mut};
use crate::errors::{check_len, run, Failure, Res};
use crate::matrix::{index_arrays, indices, outcome, Outcome, Timed};

/// The methods of a complex solve.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Cg,
    Cocg,
    Bicgstab,
    Gmres(usize),
}

/// The preconditioners of a complex solve (`true`: the automatic path's ILU(0)/IC(0)
/// parameters).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Precond {
    None,
    Jacobi,
    Ilu0(bool),
    Ic0(bool),
}

struct Opts {
    method: Method,
    precond: Precond,
    params: SolveParams,
}

#[allow(clippy::too_many_arguments)]
fn opts(
    method: &str,
    precond: &str,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    x0: bool,
    check_every: Option<usize>,
    restart: usize,
) -> Res<Opts> {
    let method = match method {
        "cg" => Method::Cg,
        "cocg" => Method::Cocg,
        "bicgstab" => Method::Bicgstab,
        "gmres" if (1..=255).contains(&restart) => Method::Gmres(restart),
        "gmres" => {
            return Err(Failure::Value(format!(
                "restart must be in 1..=255, got {restart}"
            )))
        }
        m => return Err(Failure::Value(format!("unknown solver {m:?}"))),
    };
    let precond = match precond {
        "none" => Precond::None,
        "jacobi" => Precond::Jacobi,
        "ilu0" => Precond::Ilu0(false),
        "ic0" => Precond::Ic0(false),
        "ilu0:auto" => Precond::Ilu0(true),
        "ic0:auto" => Precond::Ic0(true),
        "poly" | "amg" => {
            return Err(Failure::Value(format!(
                "the preconditioner {precond:?} is not available for complex matrices (complex: \
                 None, 'jacobi', 'ilu0', 'ic0' or an operator)"
            )))
        }
        p => {
            return Err(Failure::Value(format!(
                "unknown preconditioner {p:?} (known for complex matrices: 'none', 'jacobi', \
                 'ilu0', 'ic0')"
            )))
        }
    };
    if !(rtol >= 0.0 && atol >= 0.0) {
        return Err(Failure::Value(format!(
            "tolerances must be >= 0 (rtol = {rtol}, atol = {atol})"
        )));
    }
    Ok(Opts {
        method,
        precond,
        params: SolveParams {
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
        },
    })
}

/// The solve of `a·x = b` on the CPU with the preconditioner and method of `o`.
fn solve<T: Elem>(a: &CsrMatrix<T>, o: &Opts, b: &[T], x: &mut [T]) -> Res<Outcome> {
    check_len("b", b.len(), a.nrows(), "the matrix")?;
    check_len("x", x.len(), a.ncols(), "the matrix")?;
    let t0 = Instant::now();
    fn with<T: Elem, P: Preconditioner<T, Cpu>>(
        a: &CsrMatrix<T>,
        p: &P,
        o: &Opts,
        b: &Vec<T>,
        x: &mut Vec<T>,
        t0: Instant,
    ) -> Timed {
        let setup = t0.elapsed().as_secs_f64();
        let t = Instant::now();
        let be = &Cpu;
        let mut r = match o.method {
            Method::Cg => pcg(be, a, p, b, x, &o.params),
            Method::Cocg => pcocg(be, a, p, b, x, &o.params),
            Method::Bicgstab => bicgstab(be, a, p, b, x, &o.params),
            Method::Gmres(m) => gmres(be, a, p, b, x, m, &o.params),
        };
        let solve = t.elapsed().as_secs_f64();
        if let Ok(i) = &mut r {
            i.setup_seconds = setup;
        }
        (r, setup, solve)
    }
    let incomplete = |auto: bool| {
        if auto {
            auto_incomplete_params()
        } else {
            IncompleteParams {
                auto_shift: true,
                ..Default::default()
            }
        }
    };
    let bv = b.to_vec();
    let mut xv = x.to_vec();
    let r = match o.precond {
        Precond::None => with(a, &Identity, o, &bv, &mut xv, t0),
        Precond::Jacobi => with(a, &Jacobi::from_matrix(&Cpu, a)?, o, &bv, &mut xv, t0),
        Precond::Ilu0(auto) => with(
            a,
            &Ilu0::new(&Cpu, a, &incomplete(auto))?,
            o,
            &bv,
            &mut xv,
            t0,
        ),
        Precond::Ic0(auto) => with(
            a,
            &Ic0::new(&Cpu, a, &incomplete(auto))?,
            o,
            &bv,
            &mut xv,
            t0,
        ),
    };
    x.copy_from_slice(&xv);
    outcome(r)
}

enum Inner {
    C64(CsrMatrix<Complex<f32>>),
    C128(CsrMatrix<Complex<f64>>),
}

/// Runs `$body` with `$m` bound to the matrix of either precision (`$t` its element type).
macro_rules! with_c {
    ($self:expr, $m:ident, $t:ident => $body:expr) => {
        match &$self.inner {
            Inner::C64($m) => {
                type $t = Complex<f32>;
                $body
            }
            Inner::C128($m) => {
                type $t = Complex<f64>;
                $body
            }
        }
    };
}

/// What `_ComplexMatrix.auto_choice` returns: method, preconditioner, reason and the structure
/// read (rows, entries, symmetric, Hermitian, rows with a bad diagonal).
type ComplexAuto = (
    &'static str,
    &'static str,
    String,
    (usize, usize, bool, bool, usize),
);

/// A Python number (real or complex) as `(re, im)`.
fn parts(v: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
    Ok((v.getattr("real")?.extract()?, v.getattr("imag")?.extract()?))
}

/// A complex matrix held on the CPU.
#[pyclass(name = "_ComplexMatrix", module = "segsparse._core", frozen)]
pub struct PyComplexMatrix {
    inner: Inner,
    seconds: f64,
}

fn build<T: Elem + Element>(
    py: Python<'_>,
    shape: (usize, usize),
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    data: &Bound<'_, PyAny>,
) -> PyResult<CsrMatrix<T>> {
    let values = slice(&ro::<T>(data, "data")?, "data")?.to_vec();
    run(py, move || {
        Ok(CsrMatrix::try_from_parts(
            shape.0, shape.1, row_ptr, col_idx, values,
        )?)
    })
}

#[pymethods]
impl PyComplexMatrix {
    /// `_ComplexMatrix(nrows, ncols, indptr, indices, data, dtype)`: validates and keeps the
    /// CSR arrays (`data` a contiguous `complex64` or `complex128` array of `dtype`).
    #[new]
    fn new(
        py: Python<'_>,
        nrows: usize,
        ncols: usize,
        indptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        dtype: &str,
    ) -> PyResult<Self> {
        let t0 = Instant::now();
        let rp = self::indices(indptr, "indptr")?;
        let ci = self::indices(indices, "indices")?;
        let inner = match dtype {
            "complex64" => Inner::C64(build(py, (nrows, ncols), rp, ci, data)?),
            "complex128" => Inner::C128(build(py, (nrows, ncols), rp, ci, data)?),
            d => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "complex matrix values must be complex64 or complex128, not {d}"
                )))
            }
        };
        Ok(PyComplexMatrix {
            inner,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// `(nrows, ncols)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        with_c!(self, m, _T => m.shape())
    }

    /// Stored entries.
    #[getter]
    fn nnz(&self) -> usize {
        with_c!(self, m, _T => m.nnz())
    }

    /// `"complex64"` or `"complex128"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.inner {
            Inner::C64(_) => "complex64",
            Inner::C128(_) => "complex128",
        }
    }

    /// Always false: complex matrices are held on the CPU.
    #[getter]
    fn on_gpu(&self) -> bool {
        false
    }

    /// `None`: no GPU SpMV algorithm on the CPU.
    #[getter]
    fn gpu_algorithm(&self) -> Option<String> {
        None
    }

    /// `[("total", seconds)]` of the construction.
    #[getter]
    fn upload_seconds(&self) -> Vec<(&'static str, f64)> {
        vec![("total", self.seconds)]
    }

    /// `(indptr, indices, data)` as new NumPy arrays.
    fn to_arrays<'py>(&self, py: Python<'py>) -> PyResult<(PyObject, PyObject, PyObject)> {
        with_c!(self, m, T => {
            let data = PyArray1::<T>::from_slice(py, m.values()).into_any().unbind();
            let (a, b) = index_arrays(py, m.row_ptr(), m.col_idx());
            Ok((a, b, data))
        })
    }

    /// `y ← alpha·op(A)·x + beta·y` with NumPy vectors of the matrix's dtype (`y` written in
    /// place); `alpha` and `beta` real or complex numbers; `op` `"n"` (`A`), `"t"` (`Aᵀ`) or
    /// `"h"` (`Aᴴ`).
    #[pyo3(signature = (alpha, x, beta, y, op = "n"))]
    fn spmv_host(
        &self,
        py: Python<'_>,
        alpha: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        beta: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        op: &str,
    ) -> PyResult<()> {
        let (alpha, beta) = (parts(alpha)?, parts(beta)?);
        use segsparse::spmv::Op;
        let op = match op {
            "n" => Op::NoTrans,
            "t" => Op::Trans,
            "h" => Op::ConjTrans,
            o => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "op must be 'n', 't' or 'h', not {o:?}"
                )))
            }
        };
        with_c!(self, m, T => {
            let xa = ro::<T>(x, "x")?;
            let mut ya = rw::<T>(y, "y")?;
            let (xs, ys) = (slice(&xa, "x")?, slice_mut(&mut ya, "y")?);
            let (rows, cols) = match op {
                Op::NoTrans => (m.nrows(), m.ncols()),
                _ => (m.ncols(), m.nrows()),
            };
            run(py, || {
                check_len("x", xs.len(), cols, "the matrix")?;
                check_len("y", ys.len(), rows, "the matrix")?;
                let (a, b) = (
                    T::narrow(Complex::new(alpha.0, alpha.1)),
                    T::narrow(Complex::new(beta.0, beta.1)),
                );
                segsparse::spmv::spmv_op(op, a, m, xs, b, ys);
                Ok(())
            })
        })
    }

    /// Solves `A x = b` with NumPy vectors of the matrix's dtype (`x` holds the initial guess
    /// when `x0` and the result afterwards); the outcome tuple of the real `_Matrix`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (method, precond, b, x, rtol, atol, maxiter, x0, check_every = None, restart = 30))]
    fn solve_host(
        &self,
        py: Python<'_>,
        method: &str,
        precond: &str,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        rtol: f64,
        atol: f64,
        maxiter: usize,
        x0: bool,
        check_every: Option<usize>,
        restart: usize,
    ) -> PyResult<Outcome> {
        let o = opts(
            method,
            precond,
            rtol,
            atol,
            maxiter,
            x0,
            check_every,
            restart,
        )
        .map_err(|f| f.into_py_err(py))?;
        with_c!(self, m, T => {
            let ba = ro::<T>(b, "b")?;
            let mut xa = rw::<T>(x, "x")?;
            let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
            run(py, || solve(m, &o, bs, xs))
        })
    }

    /// The automatic choice for this matrix ([`choose_complex`]).
    fn auto_choice(&self, py: Python<'_>) -> PyResult<ComplexAuto> {
        with_c!(self, m, _T => run(py, || {
            let c = choose_complex(m);
            Ok((
                c.method.name(),
                c.precond.name(),
                c.reason,
                (m.nrows(), m.nnz(), c.symmetric, c.hermitian, c.bad_diagonal),
            ))
        }))
    }

    /// Writes the matrix to a Matrix Market file (`complex general`; `.gz` compressed).
    fn write_matrix_market(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        with_c!(self, m, _T => run(py, || Ok(segsparse::io::write_matrix_market(&path, m)?)))
    }

    fn __repr__(&self) -> String {
        let (r, c) = self.shape();
        format!(
            "_ComplexMatrix({r}×{c}, {} nonzeros, {}, cpu)",
            self.nnz(),
            self.dtype()
        )
    }
}
