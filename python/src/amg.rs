//! `_Amg`: a smoothed-aggregation AMG hierarchy built once for a `_Matrix`, on the device where
//! the matrix lives; the solvers take it as their preconditioner (`M=` an AMG object), and
//! `apply_host` runs one cycle for SciPy's `LinearOperator`.

use numpy::{PyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use segsparse::precond::amg::{Cycle, Smoother};
use segsparse::precond::AmgParams;

use crate::arrays::{ro, rw, slice, slice_mut};
use crate::errors::{named, run};
use crate::hierarchy::PyAmg;
use crate::matrix::{index_arrays, PyMatrix};

/// A level operator as Python receives it: `(indptr, indices, data, (rows, cols))`.
type LevelArrays = (PyObject, PyObject, PyObject, (usize, usize));

#[pymethods]
impl PyAmg {
    /// Builds the hierarchy of `matrix` (on its device). `candidates`: a C-contiguous `n × k`
    /// float64 array, one near-nullspace vector per column (default: the constant).
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (matrix, theta = 0.0, smoother = "chebyshev", degree = 3, sweeps = 1, cycle = "V", coarse_size = 300, max_levels = 10, block_size = 1, improve_candidates = 0, candidates = None))]
    fn new(
        py: Python<'_>,
        matrix: &PyMatrix,
        theta: f64,
        smoother: &str,
        degree: usize,
        sweeps: usize,
        cycle: &str,
        coarse_size: usize,
        max_levels: usize,
        block_size: usize,
        improve_candidates: usize,
        candidates: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<Self> {
        let p = AmgParams {
            theta,
            smoother: named(
                "smoother",
                smoother,
                &[
                    ("chebyshev", Smoother::Chebyshev),
                    ("jacobi", Smoother::Jacobi),
                    ("l1-jacobi", Smoother::L1Jacobi),
                    ("l1_jacobi", Smoother::L1Jacobi),
                ],
            )
            .map_err(|f| f.into_py_err(py))?,
            degree,
            sweeps,
            // 'v' and 'w' as well.
            cycle: named(
                "cycle",
                &cycle.to_ascii_uppercase(),
                &[("V", Cycle::V), ("W", Cycle::W)],
            )
            .map_err(|f| f.into_py_err(py))?,
            coarse_size,
            max_levels,
            block_size,
            improve_candidates,
            ..Default::default()
        };
        // The n × k array as it lies (one node's k values per row), read once by build_amg.
        let cand = candidates
            .as_ref()
            .map(|c| {
                c.as_slice().map(|flat| (flat, c.shape()[1])).map_err(|_| {
                    pyo3::exceptions::PyValueError::new_err(
                        "candidates must be a C-contiguous n × k float64 array",
                    )
                })
            })
            .transpose()?;
        let (any, t) = run(py, || matrix.build_amg(&p, cand))?;
        Ok(PyAmg {
            any,
            build_times: [t.candidates, t.backend, t.hierarchy],
        })
    }

    /// New values of the matrix on the same pattern: the numeric re-setup.
    fn update(&self, py: Python<'_>, matrix: &PyMatrix) -> PyResult<()> {
        run(py, || matrix.update_amg(self))
    }

    /// One cycle `z = M⁻¹ r` with NumPy vectors.
    fn apply_host(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        z: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        macro_rules! go {
            ($t:ty) => {
                if let Ok(m) = self.typed::<$t>() {
                    let ra = ro::<$t>(r, "r")?;
                    let mut za = rw::<$t>(z, "z")?;
                    let (rs, zs) = (slice(&ra, "r")?, slice_mut(&mut za, "z")?);
                    return run(py, || {
                        m.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .apply_host(rs, zs)
                    });
                }
            };
        }
        go!(f64);
        go!(f32);
        unreachable!("an f32 or f64 hierarchy")
    }

    /// `(indptr, indices, data, shape)` of every level operator, finest first (host copies,
    /// downloaded from the device: for inspection and tests).
    fn level_matrices(&self, py: Python<'_>) -> PyResult<Vec<LevelArrays>> {
        macro_rules! go {
            ($t:ty) => {
                if let Ok(m) = self.typed::<$t>() {
                    let mats = run(py, || {
                        Ok(m.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .level_matrices()?)
                    })?;
                    return Ok(mats
                        .iter()
                        .map(|a| {
                            let (rp, ci) = index_arrays(py, a.row_ptr(), a.col_idx());
                            let v = PyArray1::<$t>::from_slice(py, a.values())
                                .into_any()
                                .unbind();
                            (rp, ci, v, (a.nrows(), a.ncols()))
                        })
                        .collect());
                }
            };
        }
        go!(f64);
        go!(f32);
        unreachable!("an f32 or f64 hierarchy")
    }

    /// The hierarchy's printable summary.
    fn summary(&self) -> String {
        self.with(|s| s.to_string())
    }

    /// `(rows, nnz)` of every level, finest first.
    fn levels(&self) -> Vec<(usize, usize)> {
        self.with(|s| s.levels.iter().map(|l| (l.rows, l.nnz)).collect())
    }

    /// The estimate of ρ(D⁻¹A) of every level, finest first.
    fn rhos(&self) -> Vec<f64> {
        self.with(|s| s.levels.iter().map(|l| l.rho).collect())
    }

    /// Σ nnz(A_l) / nnz(A_0).
    fn operator_complexity(&self) -> f64 {
        self.with(|s| s.operator_complexity)
    }

    /// Σ rows(A_l) / rows(A_0).
    fn grid_complexity(&self) -> f64 {
        self.with(|s| s.grid_complexity)
    }

    /// Bytes of the hierarchy on its backend.
    fn device_bytes(&self) -> usize {
        self.with(|s| s.device_bytes)
    }

    /// Seconds of the last setup (or update).
    fn setup_seconds(&self) -> f64 {
        self.with(|s| s.setup.total)
    }

    /// Seconds of the construction's parts inside the binding: `(candidates, backend,
    /// hierarchy)` — reading the `n × k` candidates into the working type's vectors (and
    /// freeing them), making the matrix's GPU backend (its first setup or solve only), and the
    /// library's setup with the cycle's workspace (`setup_seconds` is the setup's own part).
    fn build_seconds(&self) -> (f64, f64, f64) {
        let [c, b, h] = self.build_times;
        (c, b, h)
    }
}
