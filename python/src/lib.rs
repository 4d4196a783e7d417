//! `segsparse._core`: the compiled half of the Python package `segsparse`.
//!
//! The Python half (`pysrc/segsparse/`) accepts SciPy, NumPy and CuPy objects, checks shapes and
//! dtypes, and calls this module with either contiguous NumPy arrays (read and written in place
//! through rust-numpy, no copy) or raw device pointers taken from `__cuda_array_interface__`
//! (wrapped without a copy, see [`device`]). Everything here uses the crate's public API only.
//!
//! Every entry point that does real work releases the GIL and catches panics
//! ([`errors::run`]); errors become the exceptions of `segsparse.errors` with the crate's
//! messages. No CUDA is needed to build: the crate loads the driver at run time, and without one
//! the GPU functions report `CudaUnavailableError` while the CPU keeps working.

use pyo3::prelude::*;

mod amg;
mod arrays;
mod auto;
mod batched;
mod choice;
mod complex;
mod device;
mod errors;
mod generate;
mod hierarchy;
mod matrix;
mod outcome;
mod prims;
mod pyprecond;
mod solve;

/// The module: the `_Matrix` class (real and complex matrices) and the array functions.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<matrix::PyMatrix>()?;
    m.add_class::<hierarchy::PyAmg>()?;
    m.add_class::<solve::PyOptions>()?;
    m.add_function(wrap_pyfunction!(matrix::read_matrix_market, m)?)?;
    m.add_function(wrap_pyfunction!(batched::batched_solve_host, m)?)?;
    m.add_function(wrap_pyfunction!(matrix::release_upload_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(pyprecond::solve_host_operator, m)?)?;
    m.add_function(wrap_pyfunction!(auto::auto_solve_host, m)?)?;
    m.add_function(wrap_pyfunction!(auto::auto_solve_device, m)?)?;
    m.add_function(wrap_pyfunction!(auto::clear_auto_cache, m)?)?;
    m.add_function(wrap_pyfunction!(prims::scan_host, m)?)?;
    m.add_function(wrap_pyfunction!(prims::scan_device, m)?)?;
    m.add_function(wrap_pyfunction!(prims::sort_host, m)?)?;
    m.add_function(wrap_pyfunction!(prims::sort_device, m)?)?;
    m.add_function(wrap_pyfunction!(prims::tridiag_host, m)?)?;
    m.add_function(wrap_pyfunction!(prims::tridiag_device, m)?)?;
    m.add_function(wrap_pyfunction!(prims::gpu_status, m)?)?;
    m.add_function(wrap_pyfunction!(prims::gpu_versions, m)?)?;
    m.add_function(wrap_pyfunction!(device::transfer_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(device::pool_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(generate::generate_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(generate::rigid_body_modes, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
