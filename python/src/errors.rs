//! Errors and panics → Python exceptions.
//!
//! The exception classes are defined in Python (`segsparse/errors.py`), where multiple
//! inheritance is natural (`MatrixMarketError` is both a `SegsparseError` and a `ValueError`);
//! this module looks them up once and raises them with the crate's own messages.
//!
//! Every entry point runs its Rust work through [`run`], which releases the GIL and catches a
//! panic (a contract violation deep in the crate, or a bug): the panic becomes an
//! `InternalError` naming the message instead of unwinding into the interpreter.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;
use segsparse::solvers::SolveError;
use segsparse::Error;

/// Why a call failed, carried out of a GIL-free closure and turned into an exception afterwards.
#[derive(Debug)]
pub enum Failure {
    /// An error of the crate.
    Crate(Error),
    /// A solver failure that is not a numerical outcome (dimension mismatch, backend failure).
    Solve(SolveError),
    /// A bad argument found by the bindings themselves.
    Value(String),
    /// A Rust panic, with its message.
    Panic(String),
    /// An exception raised by Python code the crate called back (a preconditioner), re-raised
    /// as it was.
    Python(PyErr),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Crate(e)
    }
}

/// The result type of GIL-free work.
pub type Res<T> = std::result::Result<T, Failure>;

/// The error of a GPU operation asked of a matrix that lives on the CPU.
pub fn not_on_gpu() -> Failure {
    Failure::Value(
        "this matrix lives on the CPU (device='cpu' or no GPU): device arrays need a matrix \
         created with device='gpu'"
            .into(),
    )
}

/// A `ValueError` unless `found == expected`: "`what` has `found` elements but `whose` needs
/// (has) `expected`".
pub fn check_len(what: &str, found: usize, expected: usize, whose: &str) -> Res<()> {
    if found == expected {
        Ok(())
    } else {
        Err(Failure::Value(format!(
            "{what} has {found} elements but {whose} needs {expected}"
        )))
    }
}

/// The value that `name` stands for in `table`, or a `ValueError` naming the `what` and every
/// name it knows.
pub fn named<T: Copy>(what: &str, name: &str, table: &[(&str, T)]) -> Res<T> {
    match table.iter().find(|(n, _)| *n == name) {
        Some(&(_, v)) => Ok(v),
        None => {
            let known: Vec<String> = table.iter().map(|(n, _)| format!("{n:?}")).collect();
            Err(Failure::Value(format!(
                "unknown {what} {name:?} (known: {})",
                known.join(", ")
            )))
        }
    }
}

static ERRORS: GILOnceCell<Py<PyModule>> = GILOnceCell::new();

fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    let m = ERRORS.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("segsparse.errors")?.unbind())
    })?;
    Ok(m.bind(py).getattr(name)?.downcast_into::<PyType>()?)
}

fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    match class(py, name).and_then(|c| c.call1((msg,))) {
        Ok(v) => PyErr::from_value(v),
        Err(e) => e,
    }
}

impl Failure {
    /// The Python exception for this failure.
    pub fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Crate(e) => crate_error(py, e),
            Failure::Solve(SolveError::Backend(e)) => crate_error(py, e),
            Failure::Solve(e @ SolveError::DimensionMismatch { .. }) => {
                PyValueError::new_err(e.to_string())
            }
            Failure::Solve(e) => raise(py, "SolverError", e.to_string()),
            Failure::Value(m) => PyValueError::new_err(m),
            Failure::Python(e) => e,
            Failure::Panic(m) => raise(
                py,
                "InternalError",
                format!("segsparse panicked (a bug, please report it): {m}"),
            ),
        }
    }
}

/// Maps a crate error to its exception; the message is the crate's `Display`.
pub fn crate_error(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        Error::MatrixMarket { path, line, .. } => {
            match class(py, "MatrixMarketError").and_then(|c| c.call1((msg, path, line))) {
                Ok(v) => PyErr::from_value(v),
                Err(err) => err,
            }
        }
        Error::InvalidStructure(_) | Error::InvalidInput(_) => PyValueError::new_err(msg),
        Error::CudaUnavailable(_) => raise(py, "CudaUnavailableError", msg),
        Error::Cuda { .. } | Error::Compile { .. } | Error::Cusparse(_) => {
            raise(py, "CudaError", msg)
        }
        Error::Solver(_) => raise(py, "SolverError", msg),
        Error::OutOfMemory { .. } => raise(py, "OutOfMemoryError", msg),
        _ => raise(py, "SegsparseError", msg),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Runs `f` without the GIL and with panics caught; maps any failure to an exception.
pub fn run<R: Send>(py: Python<'_>, f: impl FnOnce() -> Res<R> + Send) -> PyResult<R> {
    let out = py.allow_threads(|| catch_unwind(AssertUnwindSafe(f)));
    finish(py, out)
}

/// As [`run`] but keeping the GIL: for calls that only queue GPU work (microseconds), where
/// releasing and re-taking the GIL would be a measurable part of the call.
pub fn run_held<R>(py: Python<'_>, f: impl FnOnce() -> Res<R>) -> PyResult<R> {
    let out = catch_unwind(AssertUnwindSafe(f));
    finish(py, out)
}

fn finish<R>(py: Python<'_>, out: std::thread::Result<Res<R>>) -> PyResult<R> {
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(f)) => Err(f.into_py_err(py)),
        Err(p) => Err(Failure::Panic(panic_message(p.as_ref())).into_py_err(py)),
    }
}
