//! NumPy arrays as Rust slices: the element types, read-only and writable views that report
//! aliasing and dtype errors instead of panicking, and their contiguous data.

use numpy::{Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyValueError;
use std::time::Instant;

use pyo3::prelude::*;
use segsparse::gpu::KernelType;
use segsparse::spmv::gpu::GpuScalar;
use segsparse::CsrMatrix;

use crate::errors::{run, Res};

/// Element types of a matrix: `f32` and `f64`, with NumPy and GPU support.
pub trait Elem: GpuScalar + Element {}
impl<T: GpuScalar + Element> Elem for T {}

/// Every element type of a solve, real or complex (`f32`, `f64`, `Complex<f32>`,
/// `Complex<f64>`), as NumPy holds it and as the crate's solvers and GPU kernels take it.
pub trait AnyElem: segsparse::Elem<Dev: KernelType> + Element {}
impl<T: segsparse::Elem<Dev: KernelType> + Element> AnyElem for T {}

/// A writable view of a 1-D NumPy array of `T`. rust-numpy's `extract` panics when the array
/// is already borrowed (it aliases an input) or read-only; `try_readwrite` reports it instead.
pub fn rw<'py, T: Element>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyReadwriteArray1<'py, T>> {
    a.downcast::<PyArray1<T>>()
        .map_err(|_| dtype_error::<T>(a, what))?
        .try_readwrite()
        .map_err(|e| {
            PyValueError::new_err(format!(
                "{what} cannot be written: it overlaps an input or is read-only ({e})"
            ))
        })
}

/// A read-only view of a 1-D NumPy array of `T` (see [`rw`]).
pub fn ro<'py, T: Element>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    a.downcast::<PyArray1<T>>()
        .map_err(|_| dtype_error::<T>(a, what))?
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("{what} cannot be read: {e}")))
}

fn dtype_error<T: Element>(a: &Bound<'_, PyAny>, what: &str) -> PyErr {
    let found = a
        .getattr("dtype")
        .and_then(|d| d.str().map(|s| s.to_string()))
        .unwrap_or_else(|_| a.get_type().to_string());
    let shape = a
        .getattr("shape")
        .map(|s| s.to_string())
        .unwrap_or_default();
    pyo3::exceptions::PyTypeError::new_err(format!(
        "{what} must be a 1-D NumPy array of {} (found {found}, shape {shape})",
        std::any::type_name::<T>()
    ))
}

/// The contiguous data of a NumPy view, or a `ValueError` naming the argument.
pub fn slice<'a, T: Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what} must be contiguous")))
}

/// The contiguous data of a writable NumPy view (see [`slice`]).
pub fn slice_mut<'a, T: Element>(
    a: &'a mut PyReadwriteArray1<'_, T>,
    what: &str,
) -> PyResult<&'a mut [T]> {
    a.as_slice_mut()
        .map_err(|_| PyValueError::new_err(format!("{what} must be contiguous")))
}

/// `f` run on the contiguous NumPy vectors `read` and `write` (written in place) of element
/// type `T`, without the GIL (see [`run`]); `names` name them in errors.
pub fn with_vectors<T: Element, R: Send>(
    py: Python<'_>,
    read: &Bound<'_, PyAny>,
    write: &Bound<'_, PyAny>,
    names: [&str; 2],
    f: impl FnOnce(&[T], &mut [T]) -> Res<R> + Send,
) -> PyResult<R> {
    let ra = ro::<T>(read, names[0])?;
    let mut wa = rw::<T>(write, names[1])?;
    let (rs, ws) = (slice(&ra, names[0])?, slice_mut(&mut wa, names[1])?);
    run(py, || f(rs, ws))
}

/// The CSR matrix of `shape` from host arrays (`data` a contiguous NumPy array of `T`), checked
/// by the crate, and `then` run on it with the instant its construction began, without the GIL.
pub fn csr_from_arrays<T: segsparse::Elem + Element, M: Send>(
    py: Python<'_>,
    shape: (usize, usize),
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    data: &Bound<'_, PyAny>,
    then: impl FnOnce(CsrMatrix<T>, Instant) -> Res<M> + Send,
) -> PyResult<M> {
    let values = slice(&ro::<T>(data, "data")?, "data")?.to_vec();
    run(py, move || {
        let t0 = Instant::now();
        let host = CsrMatrix::try_from_parts(shape.0, shape.1, row_ptr, col_idx, values)?;
        then(host, t0)
    })
}
