//! The cuSPARSE peer of the GPU solvers, for benchmarks and tests in the same process:
//! `gtsv2StridedBatch` (a batch of systems, one after another) and `gtsv2_nopivot` (one system),
//! with their `_bufferSizeExt` workspace queries, queued on the [`Gpu`]'s stream like this
//! crate's kernels so that both are timed the same way.
//!
//! cuSPARSE solves in place (the right-hand side is overwritten by `x`) and requires
//! `dl[0] = 0` and `du[n-1] = 0` in every system; this crate's solvers ignore those entries
//! instead, so callers comparing the two must store zeros there.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::Tridiagonal;
use crate::error::Result;
use crate::gpu::cusparse::{check, sys, Cusparse};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Scalar;

/// `cusparse?gtsv2StridedBatch_bufferSizeExt(h, m, dl, d, du, x, batch, stride, bytes)`.
pub type StridedBatchBufferFn<T> = unsafe fn(
    sys::cusparseHandle_t,
    i32,
    *const T,
    *const T,
    *const T,
    *const T,
    i32,
    i32,
    *mut usize,
) -> sys::cusparseStatus_t;
/// `cusparse?gtsv2StridedBatch(h, m, dl, d, du, x, batch, stride, workspace)`.
pub type StridedBatchFn<T> = unsafe fn(
    sys::cusparseHandle_t,
    i32,
    *const T,
    *const T,
    *const T,
    *mut T,
    i32,
    i32,
    *mut std::ffi::c_void,
) -> sys::cusparseStatus_t;
/// `cusparse?gtsv2_nopivot_bufferSizeExt(h, m, n, dl, d, du, b, ldb, bytes)`.
pub type NopivotBufferFn<T> = unsafe fn(
    sys::cusparseHandle_t,
    i32,
    i32,
    *const T,
    *const T,
    *const T,
    *const T,
    i32,
    *mut usize,
) -> sys::cusparseStatus_t;
/// `cusparse?gtsv2_nopivot(h, m, n, dl, d, du, b, ldb, workspace)`.
pub type NopivotFn<T> = unsafe fn(
    sys::cusparseHandle_t,
    i32,
    i32,
    *const T,
    *const T,
    *const T,
    *mut T,
    i32,
    *mut std::ffi::c_void,
) -> sys::cusparseStatus_t;

/// Scalars with cuSPARSE gtsv2 entry points (f32: `S`, f64: `D`): the four functions, as
/// pointers to cudarc's bindings, so the f32/f64 dispatch is written once (the signatures are
/// checked by the compiler against cudarc's).
pub trait GtsvScalar: Scalar + KernelType {
    /// `cusparse?gtsv2StridedBatch_bufferSizeExt`.
    const STRIDED_BATCH_BUFFER: StridedBatchBufferFn<Self>;
    /// `cusparse?gtsv2StridedBatch`.
    const STRIDED_BATCH: StridedBatchFn<Self>;
    /// `cusparse?gtsv2_nopivot_bufferSizeExt`.
    const NOPIVOT_BUFFER: NopivotBufferFn<Self>;
    /// `cusparse?gtsv2_nopivot`.
    const NOPIVOT: NopivotFn<Self>;
}

impl GtsvScalar for f32 {
    const STRIDED_BATCH_BUFFER: StridedBatchBufferFn<f32> =
        sys::cusparseSgtsv2StridedBatch_bufferSizeExt;
    const STRIDED_BATCH: StridedBatchFn<f32> = sys::cusparseSgtsv2StridedBatch;
    const NOPIVOT_BUFFER: NopivotBufferFn<f32> = sys::cusparseSgtsv2_nopivot_bufferSizeExt;
    const NOPIVOT: NopivotFn<f32> = sys::cusparseSgtsv2_nopivot;
}

impl GtsvScalar for f64 {
    const STRIDED_BATCH_BUFFER: StridedBatchBufferFn<f64> =
        sys::cusparseDgtsv2StridedBatch_bufferSizeExt;
    const STRIDED_BATCH: StridedBatchFn<f64> = sys::cusparseDgtsv2StridedBatch;
    const NOPIVOT_BUFFER: NopivotBufferFn<f64> = sys::cusparseDgtsv2_nopivot_bufferSizeExt;
    const NOPIVOT: NopivotFn<f64> = sys::cusparseDgtsv2_nopivot;
}

/// A cuSPARSE handle on a [`Gpu`]'s stream with a reusable gtsv2 workspace.
pub struct CusparseTridiag {
    sp: Cusparse,
    buf: Option<CudaSlice<u8>>,
}

impl std::fmt::Debug for CusparseTridiag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CusparseTridiag(cuSPARSE {})", self.sp.version())
    }
}

fn as_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        crate::Error::InvalidInput(format!("cuSPARSE gtsv2: {what} = {v} does not fit an int"))
    })
}

impl CusparseTridiag {
    /// Creates the handle.
    ///
    /// # Errors
    /// [`crate::Error::Cusparse`] when the library is absent or the handle cannot be created.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(CusparseTridiag {
            sp: Cusparse::new(gpu)?,
            buf: None,
        })
    }

    /// The cuSPARSE version.
    pub fn version(&self) -> String {
        self.sp.version()
    }

    fn workspace(&mut self, bytes: usize) -> Result<*mut std::ffi::c_void> {
        let g = self.sp.gpu().clone();
        if self.buf.as_ref().is_none_or(|b| b.len() < bytes.max(1)) {
            self.buf = Some(
                g.stream()
                    .alloc_zeros::<u8>(bytes.max(1))
                    .map_err(|e| crate::Error::cuda("allocating the gtsv2 workspace", e))?,
            );
        }
        let buf = self.buf.as_mut().expect("allocated above");
        let (p, _sync) = buf.device_ptr_mut(g.stream());
        Ok(p as *mut std::ffi::c_void)
    }

    /// Queues `gtsv2StridedBatch`: `batch` systems of `n` rows, stride `n`; `x` holds the
    /// right-hand sides and receives the solutions.
    ///
    /// # Errors
    /// A cuSPARSE failure, or sizes beyond `int`.
    pub fn strided_batch<T: GtsvScalar>(
        &mut self,
        n: usize,
        batch: usize,
        a: Tridiagonal<'_, CudaSlice<T>>,
        x: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (m, b) = (as_i32(n, "n")?, as_i32(batch, "batch")?);
        let g = self.sp.gpu().clone();
        let s = g.stream();
        let h = self.sp.handle();
        let (pl, _a) = a.lower.device_ptr(s);
        let (pd, _b) = a.diag.device_ptr(s);
        let (pu, _c) = a.upper.device_ptr(s);
        let (px, _d) = x.device_ptr_mut(s);
        let (pl, pd, pu, px) = (pl as *const T, pd as *const T, pu as *const T, px as *mut T);
        let mut bytes = 0usize;
        // SAFETY: live handle; device pointers of batch*n elements; bytes is an out-pointer.
        let status = unsafe { T::STRIDED_BATCH_BUFFER(h, m, pl, pd, pu, px, b, m, &mut bytes) };
        check(status, "gtsv2StridedBatch_bufferSizeExt")?;
        let buf = self.workspace(bytes)?;
        // SAFETY: as above, with a workspace of the queried size that outlives the queued call
        // (kept in self until replaced by a larger one, which happens on the same stream).
        let status = unsafe { T::STRIDED_BATCH(h, m, pl, pd, pu, px, b, m, buf) };
        check(status, "gtsv2StridedBatch")
    }

    /// Queues `gtsv2_nopivot` on one system of `n = a.rows()` rows; `b` holds the right-hand side
    /// and receives the solution.
    ///
    /// # Errors
    /// A cuSPARSE failure, or sizes beyond `int`.
    pub fn nopivot<T: GtsvScalar>(
        &mut self,
        a: Tridiagonal<'_, CudaSlice<T>>,
        b: &mut CudaSlice<T>,
    ) -> Result<()> {
        let m = as_i32(a.diag.len(), "n")?;
        let g = self.sp.gpu().clone();
        let s = g.stream();
        let h = self.sp.handle();
        let (pl, _a) = a.lower.device_ptr(s);
        let (pd, _b) = a.diag.device_ptr(s);
        let (pu, _c) = a.upper.device_ptr(s);
        let (pb, _d) = b.device_ptr_mut(s);
        let (pl, pd, pu, pb) = (pl as *const T, pd as *const T, pu as *const T, pb as *mut T);
        let mut bytes = 0usize;
        // SAFETY: live handle; device pointers of n elements; bytes is an out-pointer.
        let status = unsafe { T::NOPIVOT_BUFFER(h, m, 1, pl, pd, pu, pb, m, &mut bytes) };
        check(status, "gtsv2_nopivot_bufferSizeExt")?;
        let buf = self.workspace(bytes)?;
        // SAFETY: as above, with a workspace of the queried size.
        let status = unsafe { T::NOPIVOT(h, m, 1, pl, pd, pu, pb, m, buf) };
        check(status, "gtsv2_nopivot")
    }
}
