//! The crate's problem generators from Python (`_core.generate`, `_core.rigid_body_modes`):
//! the matrices `sparse-solve SPEC` solves, for benchmarks that compare the two front ends on
//! the same matrix.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use segsparse::generate;
use segsparse::precond::amg::{rigid_body_modes_2d, rigid_body_modes_3d};

use crate::errors::{run, Failure, Res};
use crate::matrix::index_arrays;

/// `(indptr, indices, data, (rows, cols))` of the float64 matrix of a generator spec (the
/// specs of `sparse-solve`, e.g. `"elasticity3d:40"`).
#[pyfunction]
#[pyo3(signature = (spec, seed = 0))]
#[allow(clippy::type_complexity)]
pub fn generate_matrix(
    py: Python<'_>,
    spec: &str,
    seed: u64,
) -> PyResult<(PyObject, PyObject, PyObject, (usize, usize))> {
    let spec = spec.to_string();
    let a = run(py, move || Ok(generate::from_spec::<f64>(&spec, seed)?))?;
    let (rp, ci) = index_arrays(py, a.row_ptr(), a.col_idx());
    let v = PyArray1::from_slice(py, a.values()).into_any().unbind();
    Ok((rp, ci, v, (a.nrows(), a.ncols())))
}

/// The rigid-body modes of `elasticity2d:N` (3) or `elasticity3d:N` (6) as an `n × k` float64
/// array, from the generator's node coordinates.
#[pyfunction]
pub fn rigid_body_modes<'py>(py: Python<'py>, spec: &str) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let size = |s: &str| -> Res<usize> {
        s.trim()
            .parse()
            .map_err(|_| Failure::Value(format!("{spec:?}: N must be a whole number")))
    };
    let spec_s = spec.to_string();
    let modes: Vec<Vec<f64>> = run(py, move || {
        if let Some(n) = spec_s.strip_prefix("elasticity2d:") {
            Ok(rigid_body_modes_2d(&generate::elasticity2d_coordinates(
                size(n)?,
            )))
        } else if let Some(n) = spec_s.strip_prefix("elasticity3d:") {
            Ok(rigid_body_modes_3d(&generate::elasticity3d_coordinates(
                size(n)?,
            )))
        } else {
            Err(Failure::Value(format!(
                "{spec_s:?}: rigid-body modes need node coordinates: only elasticity2d:N and \
                 elasticity3d:N specs have them"
            )))
        }
    })?;
    let (n, k) = (modes.first().map_or(0, |m| m.len()), modes.len());
    let flat: Vec<f64> = (0..n)
        .flat_map(|i| modes.iter().map(move |m| m[i]))
        .collect();
    PyArray1::from_vec(py, flat).reshape([n, k])
}
