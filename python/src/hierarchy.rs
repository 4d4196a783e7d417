//! The AMG hierarchy as the bindings hold it: typed by the matrix's element type and backend,
//! behind `Any` in the Python object. The solvers (`matrix.rs`) and the `_Amg` methods
//! (`amg.rs`) both look down at it.

use std::any::Any;
use std::sync::Mutex;

use pyo3::prelude::*;
use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Cpu, Preconditioner, VectorOps};
use segsparse::precond::{Amg, AmgSummary};

use crate::arrays::Elem;
use crate::errors::{check_len, Failure, Res};

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
    pub(crate) fn rows(&self) -> usize {
        self.summary().levels[0].rows
    }
    /// Host copies of the level operators, finest first (downloaded from the device).
    pub(crate) fn level_matrices(&self) -> segsparse::Result<Vec<segsparse::CsrMatrix<T>>> {
        match self {
            AmgOn::Cpu(a) => a.level_matrices(&Cpu),
            AmgOn::Gpu(ops, a) => a.level_matrices(&**ops),
        }
    }
    /// One cycle `z = M⁻¹r` on host vectors.
    pub(crate) fn apply_host(&self, r: &[T], z: &mut [T]) -> Res<()> {
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
    /// Seconds of the setup's parts in the binding: the candidates read (and freed), the
    /// matrix's GPU backend, the hierarchy (`_Amg.build_seconds`).
    pub(crate) build_times: [f64; 3],
}

impl PyAmg {
    /// The hierarchy for element type `T`, or a TypeError-like failure.
    pub(crate) fn typed<T: Elem>(&self) -> Res<&Mutex<AmgOn<T>>> {
        self.any.downcast_ref::<Mutex<AmgOn<T>>>().ok_or_else(|| {
            Failure::Value("the AMG hierarchy was built for a matrix of another dtype".into())
        })
    }

    pub(crate) fn with<R>(&self, f: impl Fn(&AmgSummary) -> R) -> R {
        if let Ok(m) = self.typed::<f64>() {
            return f(m.lock().unwrap_or_else(|p| p.into_inner()).summary());
        }
        let m = self.typed::<f32>().expect("an f32 or f64 hierarchy");
        let out = f(m.lock().unwrap_or_else(|p| p.into_inner()).summary());
        out
    }
}
