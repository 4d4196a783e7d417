//! `_Amg`: a smoothed-aggregation AMG hierarchy built once for a `_Matrix`, on the device where
//! the matrix lives; the solvers take it as their preconditioner (`M=` an AMG object), and
//! `apply_host` runs one cycle for SciPy's `LinearOperator`.

use std::any::Any;
use std::sync::Mutex;

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use segsparse::precond::amg::{Cycle, Smoother};
use segsparse::precond::{Amg, AmgParams, AmgSummary};
use segsparse::solvers::gpu::GpuOps;
use segsparse::solvers::{Cpu, Preconditioner, VectorOps};

use crate::errors::{check_len, run, Failure, Res};
use crate::matrix::{ro, rw, slice, slice_mut, Elem, PyMatrix};

/// The hierarchy on the backend of its matrix.
pub enum AmgOn<T: Elem> {
    Cpu(Box<Amg<T, Cpu>>),
    Gpu(std::sync::Arc<GpuOps<T>>, Box<Amg<T, GpuOps<T>>>),
}

impl<T: Elem> AmgOn<T> {
    pub fn summary(&self) -> &AmgSummary {
        match self {
            AmgOn::Cpu(a) => a.summary(),
            AmgOn::Gpu(_, a) => a.summary(),
        }
    }
    fn rows(&self) -> usize {
        self.summary().levels[0].rows
    }
    /// One cycle `z = M⁻¹r` on host vectors.
    fn apply_host(&self, r: &[T], z: &mut [T]) -> Res<()> {
        check_len("r", r.len(), self.rows(), "the hierarchy")?;
        check_len("z", z.len(), self.rows(), "the hierarchy")?;
        match self {
            AmgOn::Cpu(a) => {
                let mut zv = vec![T::zero(); z.len()];
                a.apply(&Cpu, &r.to_vec(), &mut zv)?;
                z.copy_from_slice(&zv);
            }
            AmgOn::Gpu(ops, a) => {
                let rd = ops.upload(r)?;
                let mut zd = ops.zeros(z.len())?;
                a.apply(&**ops, &rd, &mut zd)?;
                z.copy_from_slice(&ops.download(&zd)?);
            }
        }
        Ok(())
    }
}

/// The Python object: `Mutex<AmgOn<T>>` for the matrix's dtype, behind `Any`.
#[pyclass(name = "_Amg", module = "segsparse._core", frozen)]
pub struct PyAmg {
    pub(crate) any: Box<dyn Any + Send + Sync>,
}

impl PyAmg {
    /// The hierarchy for element type `T`, or a TypeError-like failure.
    pub(crate) fn typed<T: Elem>(&self) -> Res<&Mutex<AmgOn<T>>> {
        self.any.downcast_ref::<Mutex<AmgOn<T>>>().ok_or_else(|| {
            Failure::Value("the AMG hierarchy was built for a matrix of another dtype".into())
        })
    }

    fn with<R>(&self, f: impl Fn(&AmgSummary) -> R) -> R {
        if let Ok(m) = self.typed::<f64>() {
            return f(m.lock().unwrap_or_else(|p| p.into_inner()).summary());
        }
        let m = self.typed::<f32>().expect("an f32 or f64 hierarchy");
        let out = f(m.lock().unwrap_or_else(|p| p.into_inner()).summary());
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn params(
    theta: f64,
    smoother: &str,
    degree: usize,
    sweeps: usize,
    cycle: &str,
    coarse_size: usize,
    max_levels: usize,
    block_size: usize,
    improve: usize,
) -> Res<AmgParams> {
    Ok(AmgParams {
        theta,
        smoother: match smoother {
            "chebyshev" => Smoother::Chebyshev,
            "jacobi" => Smoother::Jacobi,
            "l1-jacobi" | "l1_jacobi" => Smoother::L1Jacobi,
            s => {
                return Err(Failure::Value(format!(
                    "unknown smoother {s:?} (known: 'chebyshev', 'jacobi', 'l1-jacobi')"
                )))
            }
        },
        degree,
        sweeps,
        cycle: match cycle {
            "V" | "v" => Cycle::V,
            "W" | "w" => Cycle::W,
            c => {
                return Err(Failure::Value(format!(
                    "cycle must be 'V' or 'W', not {c:?}"
                )))
            }
        },
        coarse_size,
        max_levels,
        block_size,
        improve_candidates: improve,
        ..Default::default()
    })
}

#[pymethods]
impl PyAmg {
    /// Builds the hierarchy of `matrix` (on its device). `candidates`: an `n × k` float64 array
    /// of near-nullspace vectors (default: the constant).
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (matrix, theta = 0.0, smoother = "chebyshev", degree = 4, sweeps = 1, cycle = "V", coarse_size = 300, max_levels = 10, block_size = 1, improve_candidates = 0, candidates = None))]
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
        let p = params(
            theta,
            smoother,
            degree,
            sweeps,
            cycle,
            coarse_size,
            max_levels,
            block_size,
            improve_candidates,
        )
        .map_err(|f| f.into_py_err(py))?;
        let cand: Option<Vec<Vec<f64>>> = match candidates {
            None => None,
            Some(c) => {
                let (n, k) = (c.shape()[0], c.shape()[1]);
                let a = c.as_array();
                Some(
                    (0..k)
                        .map(|j| (0..n).map(|i| a[[i, j]]).collect())
                        .collect(),
                )
            }
        };
        let any = run(py, || matrix.build_amg(&p, cand.as_deref()))?;
        Ok(PyAmg { any })
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

    /// The hierarchy's printable summary.
    fn summary(&self) -> String {
        self.with(|s| s.to_string())
    }

    /// `(rows, nnz)` of every level, finest first.
    fn levels(&self) -> Vec<(usize, usize)> {
        self.with(|s| s.levels.iter().map(|l| (l.rows, l.nnz)).collect())
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
}
