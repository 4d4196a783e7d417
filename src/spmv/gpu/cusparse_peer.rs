//! cuSPARSE `cusparseSpMV` on a [`GpuCsr`]'s arrays (or a [`GpuComplexCsr`]'s, with
//! `CUDA_C_32F` / `CUDA_C_64F` values): the peer that the GPU SpMV is measured against
//! (benchmarks) and checked against (tests).
//!
//! It is used the way a cuSPARSE user would use it: descriptors and the external buffer are
//! created once, `cusparseSpMV_preprocess` runs once, and each product is one `cusparseSpMV`
//! call on the same handle, queued on the [`Gpu`](crate::gpu::Gpu)'s stream. When the library
//! is missing, [`CusparseSpmv::new`] returns [`Error::Cusparse`] ("… not found") and callers
//! report that instead of failing.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::complex::GpuComplexCsr;
use super::{GpuCsr, GpuScalar};
use crate::error::Result;
use crate::gpu::cusparse::{check, data_type, sys, Cusparse, DnVec, SpMat};
use crate::gpu::{Gpu, KernelType};
use crate::Elem;

/// The cuSPARSE CSR SpMV algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CusparseAlg {
    /// `CUSPARSE_SPMV_CSR_ALG1` (default; row-split with preprocessing).
    Alg1,
    /// `CUSPARSE_SPMV_CSR_ALG2` (merge-path-like; deterministic).
    Alg2,
}

impl CusparseAlg {
    /// `"cusparse-alg1"` / `"cusparse-alg2"`.
    pub fn name(self) -> &'static str {
        match self {
            CusparseAlg::Alg1 => "cusparse-alg1",
            CusparseAlg::Alg2 => "cusparse-alg2",
        }
    }
    fn raw(self) -> sys::cusparseSpMVAlg_t {
        match self {
            CusparseAlg::Alg1 => sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG1,
            CusparseAlg::Alg2 => sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG2,
        }
    }
}

/// The arrays of a device CSR matrix, as cuSPARSE sees them.
struct Parts<'p, T> {
    gpu: &'p std::sync::Arc<Gpu>,
    shape: (usize, usize, usize),
    row_ptr: &'p CudaSlice<u32>,
    col_idx: &'p CudaSlice<u32>,
    values: &'p CudaSlice<T>,
}

/// A host scalar handed to cuSPARSE by pointer, aligned to 16 bytes: cuSPARSE reads a
/// `cuDoubleComplex` (`__align__(16)` in CUDA's headers) with aligned 16-byte loads, and a
/// `Complex<f64>` is only 8-byte aligned in Rust. Measured on an H100 (CUDA 13): with the scalars
/// unaligned, `CUDA_C_64F` SpMV and its preprocessing died of SIGSEGV inside libcusparse
/// (depending on where the build placed them); aligned, both run.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct HostScalar<T>(T);

/// A prepared `cusparseSpMV` (handle, descriptors, preprocessed buffer) for one matrix. `T` is
/// the device element type (`f32`, `f64`, or [`DevComplex`](crate::DevComplex) for a complex
/// matrix).
pub struct CusparseSpmv<'a, T: KernelType> {
    cs: Cusparse,
    mat: SpMat,
    vx: DnVec,
    vy: DnVec,
    buffer: CudaSlice<u64>,
    alg: CusparseAlg,
    alpha: HostScalar<T>,
    beta: HostScalar<T>,
    nrows: usize,
    ncols: usize,
    _matrix: PhantomData<&'a CudaSlice<T>>,
}

impl<'a, T: GpuScalar> CusparseSpmv<'a, T> {
    /// Creates the handle and descriptors for `a`, sizes and allocates the external buffer and
    /// runs `cusparseSpMV_preprocess` with `x`, `y`, `alpha` and `beta` (cuSPARSE requires the
    /// later calls to use the same scalars' kind; vectors may change).
    ///
    /// # Errors
    /// [`Error::Cusparse`](crate::Error::Cusparse) when the library is absent or a call fails (the call is named).
    pub fn new(
        a: &'a GpuCsr<T>,
        alg: CusparseAlg,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<Self> {
        let (row_ptr, col_idx, values) = a.device_parts();
        let parts = Parts {
            gpu: a.gpu(),
            shape: (a.nrows(), a.ncols(), a.nnz()),
            row_ptr,
            col_idx,
            values,
        };
        Self::prepare(parts, alg, alpha, x, beta, y)
    }
}

impl<'a, T: KernelType> CusparseSpmv<'a, T> {
    /// [`CusparseSpmv::new`] for a complex matrix (`CUDA_C_32F` / `CUDA_C_64F`; `T` is its
    /// [`Elem::Dev`]).
    ///
    /// # Errors
    /// As [`CusparseSpmv::new`].
    pub fn new_complex<E: Elem<Dev = T>>(
        a: &'a GpuComplexCsr<E>,
        alg: CusparseAlg,
        alpha: E,
        x: &CudaSlice<T>,
        beta: E,
        y: &mut CudaSlice<T>,
    ) -> Result<Self> {
        let (row_ptr, col_idx, values) = a.device_parts();
        let parts = Parts {
            gpu: a.gpu(),
            shape: (a.nrows(), a.ncols(), a.nnz()),
            row_ptr,
            col_idx,
            values,
        };
        let (al, be) = (E::as_dev(&[alpha])[0], E::as_dev(&[beta])[0]);
        Self::prepare(parts, alg, al, x, be, y)
    }

    fn prepare(
        a: Parts<'_, T>,
        alg: CusparseAlg,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<Self> {
        let (nrows, ncols, _) = a.shape;
        assert_eq!(
            x.len(),
            ncols,
            "cuSPARSE SpMV: x has {} elements, A has {} columns",
            x.len(),
            ncols
        );
        assert_eq!(
            y.len(),
            nrows,
            "cuSPARSE SpMV: y has {} elements, A has {} rows",
            y.len(),
            nrows
        );
        let cs = Cusparse::new(a.gpu)?;
        let stream = a.gpu.stream();
        let dt = data_type::<T>();
        // SAFETY: the pointers are live device allocations of the sizes passed (row_ptr nrows+1,
        // col/val nnz entries, x ncols, y nrows); cuSPARSE only reads the matrix. The
        // descriptors destroy themselves.
        let (mat, vx, vy) = unsafe {
            let arrays = (a.row_ptr, a.col_idx, a.values);
            let mat = SpMat::csr(a.shape, Some(arrays), stream, "cusparseCreateCsr")?;
            let (xp, _rx) = x.device_ptr(stream);
            let (yp, _ry) = y.device_ptr_mut(stream);
            let vx = DnVec::new::<T>(ncols, xp, "cusparseCreateDnVec(x)")?;
            (
                mat,
                vx,
                DnVec::new::<T>(nrows, yp, "cusparseCreateDnVec(y)")?,
            )
        };
        let mut me = CusparseSpmv {
            cs,
            mat,
            vx,
            vy,
            buffer: a.gpu.zeros::<u64>(1)?,
            alg,
            alpha: HostScalar(alpha),
            beta: HostScalar(beta),
            nrows,
            ncols,
            _matrix: PhantomData,
        };
        // SAFETY: the descriptors are live; the buffer is sized by the first call.
        unsafe {
            let mut size = 0usize;
            check(
                sys::cusparseSpMV_bufferSize(
                    me.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &me.alpha.0 as *const T as *const c_void,
                    me.mat.raw(),
                    me.vx.raw(),
                    &me.beta.0 as *const T as *const c_void,
                    me.vy.raw(),
                    dt,
                    alg.raw(),
                    &mut size,
                ),
                "cusparseSpMV_bufferSize",
            )?;
            // u64 words: the buffer is 8-byte aligned and at least `size` bytes.
            me.buffer = a.gpu.zeros::<u64>(size.div_ceil(8).max(1))?;
            let (bp, _rb) = me.buffer.device_ptr_mut(stream);
            check(
                sys::cusparseSpMV_preprocess(
                    me.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &me.alpha.0 as *const T as *const c_void,
                    me.mat.raw(),
                    me.vx.raw(),
                    &me.beta.0 as *const T as *const c_void,
                    me.vy.raw(),
                    dt,
                    alg.raw(),
                    bp as *mut c_void,
                ),
                "cusparseSpMV_preprocess",
            )?;
        }
        Ok(me)
    }
}

impl<T: KernelType> CusparseSpmv<'_, T> {
    /// The algorithm.
    pub fn alg(&self) -> CusparseAlg {
        self.alg
    }

    /// The library version, e.g. `12.6.3`.
    pub fn version(&self) -> String {
        self.cs.version()
    }

    /// `y ← α·A·x + β·y` by `cusparseSpMV` (queued on the GPU's stream). `alpha`/`beta` are
    /// read from host memory at the call.
    ///
    /// # Panics
    /// On length mismatch (both sizes named).
    pub fn spmv(
        &mut self,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        assert_eq!(
            x.len(),
            self.ncols,
            "cuSPARSE SpMV: x has {} elements, A has {} columns",
            x.len(),
            self.ncols
        );
        assert_eq!(
            y.len(),
            self.nrows,
            "cuSPARSE SpMV: y has {} elements, A has {} rows",
            y.len(),
            self.nrows
        );
        self.alpha = HostScalar(alpha);
        self.beta = HostScalar(beta);
        let stream = self.cs.gpu().stream().clone();
        let (xp, _rx) = x.device_ptr(&stream);
        let (yp, _ry) = y.device_ptr_mut(&stream);
        let (bp, _rb) = self.buffer.device_ptr_mut(&stream);
        // SAFETY: descriptors are live; x/y are live allocations of the described sizes;
        // the buffer was sized by cusparseSpMV_bufferSize and preprocessed for this matrix.
        unsafe {
            check(
                sys::cusparseDnVecSetValues(self.vx.raw(), xp as *mut c_void),
                "cusparseDnVecSetValues(x)",
            )?;
            check(
                sys::cusparseDnVecSetValues(self.vy.raw(), yp as *mut c_void),
                "cusparseDnVecSetValues(y)",
            )?;
            check(
                sys::cusparseSpMV(
                    self.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &self.alpha.0 as *const T as *const c_void,
                    self.mat.raw(),
                    self.vx.raw(),
                    &self.beta.0 as *const T as *const c_void,
                    self.vy.raw(),
                    data_type::<T>(),
                    self.alg.raw(),
                    bp as *mut c_void,
                ),
                "cusparseSpMV",
            )
        }
    }
}
