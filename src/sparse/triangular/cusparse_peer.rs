//! cuSPARSE `SpSV` (generic API, `CUSPARSE_SPSV_ALG_DEFAULT`): the peer that
//! [`GpuTriangular`](super::gpu::GpuTriangular) is measured against and checked against.
//!
//! Used the way a cuSPARSE user would: descriptors, buffer and `cusparseSpSV_analysis` once
//! ([`CusparseSpsv::new`], which the benchmarks time as the analysis phase), then one
//! `cusparseSpSV_solve` per right-hand side, queued on the [`Gpu`]'s stream.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::{Diagonal, Triangle};
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::gpu::cusparse::{check, data_type, sys, Cusparse, DnVec, SpMat};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Scalar;

/// A prepared `cusparseSpSV` for one triangular matrix.
pub struct CusparseSpsv<T> {
    cs: Cusparse,
    _row_ptr: CudaSlice<u32>,
    _col: CudaSlice<u32>,
    _val: CudaSlice<T>,
    mat: SpMat,
    vx: DnVec,
    vy: DnVec,
    spsv: sys::cusparseSpSVDescr_t,
    _buffer: CudaSlice<u64>,
    n: usize,
    alpha: T,
}

impl<T: Scalar + KernelType> CusparseSpsv<T> {
    /// Uploads `a`, creates the descriptors (fill mode and diagonal type from `triangle` and
    /// `diagonal`) and runs the analysis with the vectors `b`, `x`.
    ///
    /// # Errors
    /// [`Error::Cusparse`](crate::Error::Cusparse) naming the failing call (or the missing
    /// library); device failures.
    pub fn new(
        gpu: &Arc<Gpu>,
        a: &CsrMatrix<T>,
        triangle: Triangle,
        diagonal: Diagonal,
        b: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
    ) -> Result<Self> {
        let n = a.nrows();
        let cs = Cusparse::new(gpu)?;
        let stream = gpu.stream().clone();
        let row_ptr = gpu.upload(a.row_ptr())?;
        let col = gpu.upload(a.col_idx())?;
        let val = gpu.upload(a.values())?;
        let dt = data_type::<T>();
        let op = sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let alg = sys::cusparseSpSVAlg_t::CUSPARSE_SPSV_ALG_DEFAULT;
        // SAFETY: the uploaded arrays live as long as the descriptors (both kept in `me`); sizes
        // passed match them (row_ptr n + 1, col/val nnz; b, x n elements); the attribute values
        // are the enums' 4-byte representations. The descriptors destroy themselves.
        let (mat, vx, vy) = unsafe {
            let arrays = (&row_ptr, &col, &val);
            let mat = SpMat::csr((n, n, a.nnz()), Some(arrays), &stream, "cusparseCreateCsr")?;
            let mut fill = match triangle {
                Triangle::Lower => sys::cusparseFillMode_t::CUSPARSE_FILL_MODE_LOWER,
                Triangle::Upper => sys::cusparseFillMode_t::CUSPARSE_FILL_MODE_UPPER,
            };
            check(
                sys::cusparseSpMatSetAttribute(
                    mat.raw(),
                    sys::cusparseSpMatAttribute_t::CUSPARSE_SPMAT_FILL_MODE,
                    &mut fill as *mut _ as *mut c_void,
                    std::mem::size_of_val(&fill),
                ),
                "cusparseSpMatSetAttribute(fill mode)",
            )?;
            let mut dg = match diagonal {
                Diagonal::Unit => sys::cusparseDiagType_t::CUSPARSE_DIAG_TYPE_UNIT,
                Diagonal::NonUnit => sys::cusparseDiagType_t::CUSPARSE_DIAG_TYPE_NON_UNIT,
            };
            check(
                sys::cusparseSpMatSetAttribute(
                    mat.raw(),
                    sys::cusparseSpMatAttribute_t::CUSPARSE_SPMAT_DIAG_TYPE,
                    &mut dg as *mut _ as *mut c_void,
                    std::mem::size_of_val(&dg),
                ),
                "cusparseSpMatSetAttribute(diag type)",
            )?;
            let (bp, _d) = b.device_ptr(&stream);
            let (xp, _e) = x.device_ptr_mut(&stream);
            let vx = DnVec::new::<T>(n, bp, "cusparseCreateDnVec(b)")?;
            (mat, vx, DnVec::new::<T>(n, xp, "cusparseCreateDnVec(x)")?)
        };
        let mut me = CusparseSpsv {
            cs,
            mat,
            vx,
            vy,
            spsv: std::ptr::null_mut(),
            _buffer: gpu.zeros::<u64>(1)?,
            n,
            alpha: T::one(),
            _row_ptr: row_ptr,
            _col: col,
            _val: val,
        };
        // SAFETY: the descriptors are live; the SpSV descriptor is destroyed in Drop; the
        // buffer is sized by the first call.
        unsafe {
            check(
                sys::cusparseSpSV_createDescr(&mut me.spsv),
                "cusparseSpSV_createDescr",
            )?;
            let mut size = 0usize;
            check(
                sys::cusparseSpSV_bufferSize(
                    me.cs.handle(),
                    op,
                    &me.alpha as *const T as *const c_void,
                    me.mat.raw(),
                    me.vx.raw(),
                    me.vy.raw(),
                    dt,
                    alg,
                    me.spsv,
                    &mut size,
                ),
                "cusparseSpSV_bufferSize",
            )?;
            me._buffer = gpu.zeros::<u64>(size.div_ceil(8).max(1))?;
            let (bufp, _f) = me._buffer.device_ptr_mut(&stream);
            check(
                sys::cusparseSpSV_analysis(
                    me.cs.handle(),
                    op,
                    &me.alpha as *const T as *const c_void,
                    me.mat.raw(),
                    me.vx.raw(),
                    me.vy.raw(),
                    dt,
                    alg,
                    me.spsv,
                    bufp as *mut c_void,
                ),
                "cusparseSpSV_analysis",
            )?;
        }
        Ok(me)
    }

    /// `x = T⁻¹b` by `cusparseSpSV_solve` (queued).
    ///
    /// # Panics
    /// On length mismatch.
    pub fn solve(&mut self, b: &CudaSlice<T>, x: &mut CudaSlice<T>) -> Result<()> {
        assert_eq!(
            b.len(),
            self.n,
            "SpSV: b has {} elements, expected {}",
            b.len(),
            self.n
        );
        assert_eq!(
            x.len(),
            self.n,
            "SpSV: x has {} elements, expected {}",
            x.len(),
            self.n
        );
        let stream = self.cs.gpu().stream().clone();
        let (bp, _a) = b.device_ptr(&stream);
        let (xp, _b) = x.device_ptr_mut(&stream);
        // SAFETY: live descriptors; b and x are live allocations of n elements; the analysis
        // ran on this descriptor and buffer.
        unsafe {
            check(
                sys::cusparseDnVecSetValues(self.vx.raw(), bp as *mut c_void),
                "cusparseDnVecSetValues(b)",
            )?;
            check(
                sys::cusparseDnVecSetValues(self.vy.raw(), xp as *mut c_void),
                "cusparseDnVecSetValues(x)",
            )?;
            check(
                sys::cusparseSpSV_solve(
                    self.cs.handle(),
                    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    &self.alpha as *const T as *const c_void,
                    self.mat.raw(),
                    self.vx.raw(),
                    self.vy.raw(),
                    data_type::<T>(),
                    sys::cusparseSpSVAlg_t::CUSPARSE_SPSV_ALG_DEFAULT,
                    self.spsv,
                ),
                "cusparseSpSV_solve",
            )
        }
    }

    /// The library version.
    pub fn version(&self) -> String {
        self.cs.version()
    }
}

impl<T> Drop for CusparseSpsv<T> {
    fn drop(&mut self) {
        // SAFETY: the SpSV descriptor was created once by `new` (or is null) and is destroyed
        // once here, before the matrix and vector descriptors it was made with.
        if !self.spsv.is_null() {
            let _ = unsafe { sys::cusparseSpSV_destroyDescr(self.spsv) };
        }
    }
}
