//! NumPy arrays as Rust slices: the element types, read-only and writable views that report
//! aliasing and dtype errors instead of panicking, and their contiguous data.

use numpy::{Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use segsparse::gpu::KernelType;
use segsparse::spmv::gpu::GpuScalar;

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

/// `f` run on the contiguous NumPy vectors `b` (read) and `x` (written in place) of element
/// type `T`, without the GIL (see [`run`]).
pub fn with_vectors<T: numpy::Element, R: Send>(
    py: Python<'_>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    f: impl FnOnce(&[T], &mut [T]) -> Res<R> + Send,
) -> PyResult<R> {
    let ba = ro::<T>(b, "b")?;
    let mut xa = rw::<T>(x, "x")?;
    let (bs, xs) = (slice(&ba, "b")?, slice_mut(&mut xa, "x")?);
    run(py, || f(bs, xs))
}
