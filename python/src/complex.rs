//! The complex side of `_Matrix` (`complex64` / `complex128`): [`CMat`], a complex CSR matrix
//! held on the CPU and, when asked (`device='gpu'`, or `'auto'` with a GPU), uploaded once as
//! the crate's `GpuComplexCsr`; its products `A·x` and `Aᴴ·x`, and the solvers CG (Hermitian
//! positive definite), COCG (complex symmetric), BiCGSTAB and GMRES: the crate's one solver body
//! with the complex element type, on `GpuOps` with device vectors for a GPU matrix (no or
//! Jacobi preconditioning) and on the CPU otherwise.
//!
//! NumPy's and CuPy's `complex64` / `complex128` are `Complex<f32>` / `Complex<f64>` in memory
//! (interleaved `re, im`): NumPy vectors are read and written in place and CuPy vectors are
//! borrowed as device buffers ([`Borrowed`]), as the real matrices do.
//!
//! What differs from the real matrices: the matrix is validated on the host (the device-side
//! check of `segsparse::csr::check_gpu` reads real values) and the host copy is kept; ILU(0) and
//! IC(0) of a complex matrix are factored and applied on the CPU (a GPU matrix's solve with them
//! runs on the host copy); the polynomial and AMG preconditioners are for real matrices.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::CudaSlice;
use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Cpu, Identity, LinearOperator, Preconditioner, SolverOps};
use segsparse::gpu::KernelType;
use segsparse::precond::auto::{auto_incomplete_params, choose_complex};
use segsparse::precond::{Ic0, Ilu0, IncompleteParams, Jacobi};
use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm, GpuComplexCsr};
use segsparse::spmv::Op;
use segsparse::{Complex, CsrMatrix, Elem};

use crate::device::{device, with_borrowed, Borrowed, DevicePair};
use crate::errors::{check_len, not_on_gpu, Failure, Res};
use crate::outcome::{outcome, Outcome, Timed};
use crate::solve::{call, Held, Opts, Precond};

/// The solver call of `o` with preconditioner `p` on backend `be` (see [`call`]).
fn with<T: Elem, B: SolverOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    p: &dyn Preconditioner<T, B>,
    o: &Opts,
    b: &B::Vector,
    x: &mut B::Vector,
    t0: Instant,
) -> Timed {
    call(be, a, p, o, &o.params, b, x, t0)
}

/// The error of a real-only preconditioner asked of a complex matrix.
fn real_only(o: &Opts) -> Failure {
    let name = match o.precond {
        Precond::Poly(_) => "poly",
        _ => "amg",
    };
    Failure::Value(format!(
        "the preconditioner {name:?} is not available for complex matrices (complex: None, \
         'jacobi', 'ilu0', 'ic0' or an operator)"
    ))
}

/// The GPU side of a complex matrix: the uploaded CSR, and `Aᴴ`, the solver kernels and the
/// Jacobi diagonal, created on first use.
pub(crate) struct CDev<T: Elem>
where
    T::Dev: KernelType,
{
    csr: GpuComplexCsr<T>,
    adjoint: Mutex<Option<Arc<GpuComplexCsr<T>>>>,
    ops: Mutex<Option<Arc<GpuOps<T>>>>,
    jacobi: Mutex<Option<Arc<DevJacobi<T>>>>,
}

/// The Jacobi preconditioner of a complex matrix on the device.
type DevJacobi<T> = Jacobi<CudaSlice<<T as Elem>::Dev>>;

/// One precision of a complex matrix: the validated host CSR and, when uploaded, its GPU side.
pub struct CMat<T: Elem>
where
    T::Dev: KernelType,
{
    host: CsrMatrix<T>,
    dev: Option<CDev<T>>,
    jacobi: Mutex<Option<Arc<Jacobi<Vec<T>>>>>,
    /// Where the construction's seconds went (name, seconds), for `upload_seconds`.
    pub(crate) timing: Vec<(&'static str, f64)>,
}

/// What `auto_choice` returns for a complex matrix: method, preconditioner, reason and the
/// structure read (rows, entries, symmetric, Hermitian, rows with a bad diagonal).
pub(crate) type ComplexAuto = (
    &'static str,
    &'static str,
    String,
    (usize, usize, bool, bool, usize),
);

/// A Python number (real or complex) as `(re, im)`.
pub(crate) fn parts(v: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
    Ok((v.getattr("real")?.extract()?, v.getattr("imag")?.extract()?))
}

/// `"n"`, `"t"` or `"h"` as the crate's [`Op`].
pub(crate) fn op_of(op: &str) -> PyResult<Op> {
    match op {
        "n" => Ok(Op::NoTrans),
        "t" => Ok(Op::Trans),
        "h" => Ok(Op::ConjTrans),
        o => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "op must be 'n', 't' or 'h', not {o:?}"
        ))),
    }
}

/// A complex matrix from its host CSR, checked from `t0` on (see `arrays::csr_from_arrays`),
/// uploaded when `on_gpu`.
pub(crate) fn build<T: Elem>(host: CsrMatrix<T>, t0: Instant, on_gpu: bool) -> Res<CMat<T>>
where
    T::Dev: KernelType,
{
    let check = t0.elapsed().as_secs_f64();
    let dev = if on_gpu {
        let d = device()?;
        Some(CDev {
            csr: GpuComplexCsr::upload(&d.gpu, &host, ComplexSpmvAlgorithm::Auto)?,
            adjoint: Mutex::new(None),
            ops: Mutex::new(None),
            jacobi: Mutex::new(None),
        })
    } else {
        None
    };
    let mut timing = vec![("check", check)];
    if dev.is_some() {
        timing.push(("copy", t0.elapsed().as_secs_f64() - check));
    }
    timing.push(("total", t0.elapsed().as_secs_f64()));
    Ok(CMat {
        host,
        dev,
        jacobi: Mutex::new(None),
        timing,
    })
}

impl<T: Elem> CMat<T>
where
    T::Dev: KernelType,
{
    /// The host CSR.
    pub(crate) fn host(&self) -> &CsrMatrix<T> {
        &self.host
    }

    /// True when the matrix is uploaded.
    pub(crate) fn on_gpu(&self) -> bool {
        self.dev.is_some()
    }

    /// The GPU SpMV algorithm chosen at upload.
    pub(crate) fn gpu_algorithm(&self) -> Option<String> {
        self.dev.as_ref().map(|d| d.csr.algorithm().name().into())
    }

    fn dev(&self) -> Res<&CDev<T>> {
        self.dev.as_ref().ok_or_else(not_on_gpu)
    }

    /// `Aᴴ` on the device, built there on first use.
    fn adjoint(&self) -> Res<Arc<GpuComplexCsr<T>>> {
        let d = self.dev()?;
        let mut a = d.adjoint.lock().unwrap_or_else(|p| p.into_inner());
        if a.is_none() {
            *a = Some(Arc::new(segsparse::sparse::gpu::conj_transpose(
                &d.csr,
                ComplexSpmvAlgorithm::Auto,
            )?));
        }
        Ok(a.clone().expect("set above"))
    }

    /// The matrix as an operator where it lives (for a solve with Python callables).
    pub(crate) fn held(&self) -> Res<Held<'_, T>>
    where
        T: Element,
    {
        Ok(if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            Held::Gpu(ops, &d.csr)
        } else {
            Held::Cpu(&self.host)
        })
    }

    fn gpu_ops(&self) -> Res<(Arc<GpuOps<T>>, &CDev<T>)> {
        let d = self.dev()?;
        let mut o = d.ops.lock().unwrap_or_else(|p| p.into_inner());
        if o.is_none() {
            *o = Some(Arc::new(GpuOps::<T>::new(d.csr.gpu())?));
        }
        Ok((o.clone().expect("set above"), d))
    }

    fn gpu_jacobi(&self, ops: &GpuOps<T>) -> Res<Arc<DevJacobi<T>>> {
        let d = self.dev()?;
        let mut j = d.jacobi.lock().unwrap_or_else(|p| p.into_inner());
        if j.is_none() {
            *j = Some(Arc::new(Jacobi::from_matrix(ops, &self.host)?));
        }
        Ok(j.clone().expect("set above"))
    }

    fn cpu_jacobi(&self) -> Res<Arc<Jacobi<Vec<T>>>> {
        let mut j = self.jacobi.lock().unwrap_or_else(|p| p.into_inner());
        if j.is_none() {
            *j = Some(Arc::new(Jacobi::from_matrix(&Cpu, &self.host)?));
        }
        Ok(j.clone().expect("set above"))
    }

    /// (rows, columns) of `op(A)`.
    fn op_shape(&self, op: Op) -> (usize, usize) {
        let (r, c) = self.host.shape();
        match op {
            Op::NoTrans => (r, c),
            _ => (c, r),
        }
    }

    /// `y ← α·op(A)·x + β·y` with host vectors; on the GPU when the matrix is there (`x`, and
    /// `y` when `β ≠ 0`, copied over, `y` back) for `A` and `Aᴴ`, on the CPU otherwise.
    pub(crate) fn spmv_host(
        &self,
        op: Op,
        alpha: (f64, f64),
        x: &[T],
        beta: (f64, f64),
        y: &mut [T],
    ) -> Res<()> {
        let (rows, cols) = self.op_shape(op);
        check_len("x", x.len(), cols, "the matrix")?;
        check_len("y", y.len(), rows, "the matrix")?;
        let (a, b) = (
            T::narrow(Complex::new(alpha.0, alpha.1)),
            T::narrow(Complex::new(beta.0, beta.1)),
        );
        match (&self.dev, op) {
            (Some(d), Op::NoTrans | Op::ConjTrans) => {
                let adj;
                let m = if op == Op::NoTrans {
                    &d.csr
                } else {
                    adj = self.adjoint()?;
                    &*adj
                };
                let xd = m.upload_vector(x)?;
                let mut yd = if b == T::zero() {
                    m.gpu().zeros::<T::Dev>(y.len())?
                } else {
                    m.upload_vector(y)?
                };
                m.spmv(a, &xd, b, &mut yd)?;
                y.copy_from_slice(&m.download_vector(&yd)?);
            }
            _ => segsparse::spmv::spmv_op(op, a, &self.host, x, b, y),
        }
        Ok(())
    }

    /// `y ← α·op(A)·x + β·y` with device pointers owned by the caller (`op` `A` or `Aᴴ`),
    /// ordered after the streams in `wait` and before later work on `signal`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spmv_device(
        &self,
        op: Op,
        alpha: (f64, f64),
        xp: u64,
        beta: (f64, f64),
        yp: u64,
        wait: &[u64],
        signal: u64,
    ) -> Res<()> {
        let d = self.dev()?;
        let adj;
        let m = match op {
            Op::NoTrans => &d.csr,
            Op::ConjTrans => {
                adj = self.adjoint()?;
                &*adj
            }
            Op::Trans => {
                let m = "A^T @ x of device vectors is not available: 'h' (A^H) or NumPy x";
                return Err(Failure::Value(m.into()));
            }
        };
        let (rows, cols) = self.op_shape(op);
        let dev = device()?;
        dev.enter(wait)?;
        // SAFETY: the Python layer checked that both arrays are contiguous device arrays of
        // this dtype with `cols` / `rows` elements, and holds them during the call.
        let x = unsafe { Borrowed::<T::Dev>::new(dev, xp, cols) };
        let mut y = unsafe { Borrowed::<T::Dev>::new(dev, yp, rows) };
        m.spmv(
            T::narrow(Complex::new(alpha.0, alpha.1)),
            &x,
            T::narrow(Complex::new(beta.0, beta.1)),
            &mut y,
        )?;
        dev.leave(signal)?;
        Ok(())
    }

    /// Solve with host vectors: on the GPU when the matrix is there and the preconditioner is
    /// none or Jacobi (`b` and `x` copied over and `x` back), on the CPU otherwise. Returns the
    /// outcome and whether it ran on the GPU.
    pub(crate) fn solve_host(&self, o: &Opts, b: &[T], x: &mut [T]) -> Res<(Outcome, bool)> {
        let (n, m) = self.host.shape();
        check_len("b", b.len(), n, "the matrix")?;
        check_len("x", x.len(), m, "the matrix")?;
        let t0 = Instant::now();
        if self.dev.is_some() && matches!(o.precond, Precond::None | Precond::Jacobi) {
            let (ops, d) = self.gpu_ops()?;
            let bd = d.csr.upload_vector(b)?;
            let mut xd = d.csr.upload_vector(x)?;
            let r = self.solve_gpu(&ops, d, o, &bd, &mut xd, t0)?;
            x.copy_from_slice(&d.csr.download_vector(&xd)?);
            return Ok((outcome(r)?, true));
        }
        let a = &self.host;
        let bv = b.to_vec();
        let mut xv = x.to_vec();
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
        let r = match o.precond {
            Precond::Poly(_) | Precond::Amg => return Err(real_only(o)),
            Precond::None => with(&Cpu, a, &Identity, o, &bv, &mut xv, t0),
            Precond::Jacobi => with(&Cpu, a, &*self.cpu_jacobi()?, o, &bv, &mut xv, t0),
            Precond::Ilu0(auto) => {
                let p = Ilu0::new(&Cpu, a, &incomplete(auto))?;
                with(&Cpu, a, &p, o, &bv, &mut xv, t0)
            }
            Precond::Ic0(auto) => {
                let p = Ic0::new(&Cpu, a, &incomplete(auto))?;
                with(&Cpu, a, &p, o, &bv, &mut xv, t0)
            }
        };
        x.copy_from_slice(&xv);
        Ok((outcome(r)?, false))
    }

    /// The GPU solve of `o` (no or Jacobi preconditioning) with device vectors.
    fn solve_gpu(
        &self,
        ops: &GpuOps<T>,
        d: &CDev<T>,
        o: &Opts,
        b: &CudaSlice<T::Dev>,
        x: &mut CudaSlice<T::Dev>,
        t0: Instant,
    ) -> Res<Timed> {
        Ok(match o.precond {
            Precond::None => with(ops, &d.csr, &Identity, o, b, x, t0),
            Precond::Jacobi => with(ops, &d.csr, &*self.gpu_jacobi(ops)?, o, b, x, t0),
            Precond::Poly(_) | Precond::Amg => return Err(real_only(o)),
            Precond::Ilu0(_) | Precond::Ic0(_) => {
                return Err(Failure::Value(
                    "ILU(0) and IC(0) of a complex matrix are factored and applied on the CPU: \
                     pass NumPy vectors (the solve then runs on the CPU), or use M=None or \
                     'jacobi' to solve on the GPU"
                        .into(),
                ))
            }
        })
    }

    /// Solve with device vectors owned by the caller (zero-copy).
    pub(crate) fn solve_device(&self, o: &Opts, dp: DevicePair<'_>) -> Res<Outcome> {
        let t0 = Instant::now();
        let (ops, d) = self.gpu_ops()?;
        let (n, m) = self.host.shape();
        // SAFETY: as in `spmv_device` (b has nrows, x ncols elements).
        let r = unsafe { with_borrowed(dp, n, m, |b, x| self.solve_gpu(&ops, d, o, b, x, t0)) };
        outcome(r??)
    }

    /// Seconds per `y ← A·x` measured inside Rust (see `_Matrix.bench_rust_spmv`).
    pub(crate) fn bench_rust(&self, reps: usize, on_gpu: bool) -> Res<f64> {
        let (r, c) = self.host.shape();
        let x = vec![T::one(); c];
        let mut y = vec![T::zero(); r];
        if on_gpu {
            let d = self.dev()?;
            let xd = d.csr.upload_vector(&x)?;
            let mut yd = d.csr.gpu().zeros::<T::Dev>(r)?;
            d.csr.spmv(T::one(), &xd, T::zero(), &mut yd)?;
            d.csr.gpu().synchronize()?;
            let t0 = Instant::now();
            for _ in 0..reps {
                d.csr.spmv(T::one(), &xd, T::zero(), &mut yd)?;
            }
            d.csr.gpu().synchronize()?;
            Ok(t0.elapsed().as_secs_f64() / reps as f64)
        } else {
            let t0 = Instant::now();
            for _ in 0..reps {
                segsparse::spmv::spmv(T::one(), &self.host, &x, T::zero(), &mut y);
            }
            Ok(t0.elapsed().as_secs_f64() / reps as f64)
        }
    }

    /// The automatic choice for this matrix ([`choose_complex`]).
    pub(crate) fn auto_choice(&self) -> ComplexAuto {
        let m = &self.host;
        let c = choose_complex(m);
        (
            c.method.name(),
            c.precond.name(),
            c.reason,
            (m.nrows(), m.nnz(), c.symmetric, c.hermitian, c.bad_diagonal),
        )
    }

    /// `(data)` of the host copy as a new NumPy array.
    pub(crate) fn values_array(&self, py: Python<'_>) -> PyObject
    where
        T: Element,
    {
        PyArray1::<T>::from_slice(py, self.host.values())
            .into_any()
            .unbind()
    }
}
