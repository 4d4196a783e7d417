//! cuSPARSE `cusparseSpMV` on a [`GpuCsr`]'s arrays: the peer that the GPU SpMV is measured
//! against (benchmarks) and checked against (tests).
//!
//! It is used the way a cuSPARSE user would use it: descriptors and the external buffer are
//! created once, `cusparseSpMV_preprocess` runs once, and each product is one `cusparseSpMV`
//! call on the same handle, queued on the [`Gpu`](crate::gpu::Gpu)'s stream. When the library
//! is missing, [`CusparseSpmv::new`] returns [`Error::Cusparse`] ("… not found") and callers
//! report that instead of failing.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::{GpuCsr, GpuScalar};
use crate::error::Result;
use crate::gpu::cusparse::{check, create_csr, data_type, sys, Cusparse};

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

/// A prepared `cusparseSpMV` (handle, descriptors, preprocessed buffer) for one matrix.
pub struct CusparseSpmv<'a, T: GpuScalar> {
    cs: Cusparse,
    mat: sys::cusparseSpMatDescr_t,
    vx: sys::cusparseDnVecDescr_t,
    vy: sys::cusparseDnVecDescr_t,
    buffer: CudaSlice<u64>,
    alg: CusparseAlg,
    alpha: T,
    beta: T,
    nrows: usize,
    ncols: usize,
    _matrix: PhantomData<&'a GpuCsr<T>>,
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
        assert_eq!(
            x.len(),
            a.ncols(),
            "cuSPARSE SpMV: x has {} elements, A has {} columns",
            x.len(),
            a.ncols()
        );
        assert_eq!(
            y.len(),
            a.nrows(),
            "cuSPARSE SpMV: y has {} elements, A has {} rows",
            y.len(),
            a.nrows()
        );
        let cs = Cusparse::new(a.gpu())?;
        let stream = a.gpu().stream();
        let (rp, ci, va) = a.device_parts();
        let (rp, _r1) = rp.device_ptr(stream);
        let (ci, _r2) = ci.device_ptr(stream);
        let (va, _r3) = va.device_ptr(stream);
        let dt = data_type::<T>();
        let mut me = CusparseSpmv {
            cs,
            mat: std::ptr::null_mut(),
            vx: std::ptr::null_mut(),
            vy: std::ptr::null_mut(),
            buffer: a.gpu().zeros::<u64>(1)?,
            alg,
            alpha,
            beta,
            nrows: a.nrows(),
            ncols: a.ncols(),
            _matrix: PhantomData,
        };
        // SAFETY: the pointers are live device allocations of the sizes passed (row_ptr nrows+1,
        // col/val nnz entries); cuSPARSE only reads the matrix. Descriptors are destroyed in Drop.
        unsafe {
            create_csr(
                &mut me.mat,
                a.nrows(),
                a.ncols(),
                a.nnz(),
                rp,
                ci,
                va,
                dt,
                "cusparseCreateCsr",
            )?;
            let (xp, _rx) = x.device_ptr(stream);
            check(
                sys::cusparseCreateDnVec(&mut me.vx, a.ncols() as i64, xp as *mut c_void, dt),
                "cusparseCreateDnVec(x)",
            )?;
            let (yp, _ry) = y.device_ptr_mut(stream);
            check(
                sys::cusparseCreateDnVec(&mut me.vy, a.nrows() as i64, yp as *mut c_void, dt),
                "cusparseCreateDnVec(y)",
            )?;
            let mut size = 0usize;
            check(
                sys::cusparseSpMV_bufferSize(
                    me.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &me.alpha as *const T as *const c_void,
                    me.mat,
                    me.vx,
                    &me.beta as *const T as *const c_void,
                    me.vy,
                    dt,
                    alg.raw(),
                    &mut size,
                ),
                "cusparseSpMV_bufferSize",
            )?;
            // u64 words: the buffer is 8-byte aligned and at least `size` bytes.
            me.buffer = a.gpu().zeros::<u64>(size.div_ceil(8).max(1))?;
            let (bp, _rb) = me.buffer.device_ptr_mut(stream);
            check(
                sys::cusparseSpMV_preprocess(
                    me.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &me.alpha as *const T as *const c_void,
                    me.mat,
                    me.vx,
                    &me.beta as *const T as *const c_void,
                    me.vy,
                    dt,
                    alg.raw(),
                    bp as *mut c_void,
                ),
                "cusparseSpMV_preprocess",
            )?;
        }
        Ok(me)
    }

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
        self.alpha = alpha;
        self.beta = beta;
        let stream = self.cs.gpu().stream().clone();
        let (xp, _rx) = x.device_ptr(&stream);
        let (yp, _ry) = y.device_ptr_mut(&stream);
        let (bp, _rb) = self.buffer.device_ptr_mut(&stream);
        // SAFETY: descriptors are live; x/y are live allocations of the described sizes;
        // the buffer was sized by cusparseSpMV_bufferSize and preprocessed for this matrix.
        unsafe {
            check(
                sys::cusparseDnVecSetValues(self.vx, xp as *mut c_void),
                "cusparseDnVecSetValues(x)",
            )?;
            check(
                sys::cusparseDnVecSetValues(self.vy, yp as *mut c_void),
                "cusparseDnVecSetValues(y)",
            )?;
            check(
                sys::cusparseSpMV(
                    self.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &self.alpha as *const T as *const c_void,
                    self.mat,
                    self.vx,
                    &self.beta as *const T as *const c_void,
                    self.vy,
                    data_type::<T>(),
                    self.alg.raw(),
                    bp as *mut c_void,
                ),
                "cusparseSpMV",
            )
        }
    }
}

impl<T: GpuScalar> Drop for CusparseSpmv<'_, T> {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created by `new` (or is null) and is destroyed once.
        unsafe {
            if !self.vx.is_null() {
                let _ = sys::cusparseDestroyDnVec(self.vx);
            }
            if !self.vy.is_null() {
                let _ = sys::cusparseDestroyDnVec(self.vy);
            }
            if !self.mat.is_null() {
                let _ = sys::cusparseDestroySpMat(self.mat);
            }
        }
    }
}
