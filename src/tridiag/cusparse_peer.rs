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

use crate::error::Result;
use crate::gpu::cusparse::{check, sys, Cusparse};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Scalar;

/// Scalars with cuSPARSE gtsv2 entry points (f32: `S`, f64: `D`).
pub trait GtsvScalar: Scalar + KernelType {
    /// `cusparse?gtsv2StridedBatch_bufferSizeExt`.
    ///
    /// # Safety
    /// Raw cuSPARSE call: valid handle and device pointers of the sizes cuSPARSE documents.
    #[allow(clippy::too_many_arguments)]
    unsafe fn strided_batch_buffer(
        h: sys::cusparseHandle_t,
        m: i32,
        dl: *const Self,
        d: *const Self,
        du: *const Self,
        x: *const Self,
        batch: i32,
        stride: i32,
        bytes: *mut usize,
    ) -> sys::cusparseStatus_t;
    /// `cusparse?gtsv2StridedBatch`.
    ///
    /// # Safety
    /// As above, plus a workspace of the queried size.
    #[allow(clippy::too_many_arguments)]
    unsafe fn strided_batch(
        h: sys::cusparseHandle_t,
        m: i32,
        dl: *const Self,
        d: *const Self,
        du: *const Self,
        x: *mut Self,
        batch: i32,
        stride: i32,
        buf: *mut std::ffi::c_void,
    ) -> sys::cusparseStatus_t;
    /// `cusparse?gtsv2_nopivot_bufferSizeExt`.
    ///
    /// # Safety
    /// As above.
    #[allow(clippy::too_many_arguments)]
    unsafe fn nopivot_buffer(
        h: sys::cusparseHandle_t,
        m: i32,
        n: i32,
        dl: *const Self,
        d: *const Self,
        du: *const Self,
        b: *const Self,
        ldb: i32,
        bytes: *mut usize,
    ) -> sys::cusparseStatus_t;
    /// `cusparse?gtsv2_nopivot`.
    ///
    /// # Safety
    /// As above, plus a workspace of the queried size.
    #[allow(clippy::too_many_arguments)]
    unsafe fn nopivot(
        h: sys::cusparseHandle_t,
        m: i32,
        n: i32,
        dl: *const Self,
        d: *const Self,
        du: *const Self,
        b: *mut Self,
        ldb: i32,
        buf: *mut std::ffi::c_void,
    ) -> sys::cusparseStatus_t;
}

macro_rules! gtsv_impl {
    ($t:ty, $sbb:ident, $sb:ident, $npb:ident, $np:ident) => {
        impl GtsvScalar for $t {
            unsafe fn strided_batch_buffer(
                h: sys::cusparseHandle_t,
                m: i32,
                dl: *const Self,
                d: *const Self,
                du: *const Self,
                x: *const Self,
                batch: i32,
                stride: i32,
                bytes: *mut usize,
            ) -> sys::cusparseStatus_t {
                sys::$sbb(h, m, dl, d, du, x, batch, stride, bytes)
            }
            unsafe fn strided_batch(
                h: sys::cusparseHandle_t,
                m: i32,
                dl: *const Self,
                d: *const Self,
                du: *const Self,
                x: *mut Self,
                batch: i32,
                stride: i32,
                buf: *mut std::ffi::c_void,
            ) -> sys::cusparseStatus_t {
                sys::$sb(h, m, dl, d, du, x, batch, stride, buf)
            }
            unsafe fn nopivot_buffer(
                h: sys::cusparseHandle_t,
                m: i32,
                n: i32,
                dl: *const Self,
                d: *const Self,
                du: *const Self,
                b: *const Self,
                ldb: i32,
                bytes: *mut usize,
            ) -> sys::cusparseStatus_t {
                sys::$npb(h, m, n, dl, d, du, b, ldb, bytes)
            }
            unsafe fn nopivot(
                h: sys::cusparseHandle_t,
                m: i32,
                n: i32,
                dl: *const Self,
                d: *const Self,
                du: *const Self,
                b: *mut Self,
                ldb: i32,
                buf: *mut std::ffi::c_void,
            ) -> sys::cusparseStatus_t {
                sys::$np(h, m, n, dl, d, du, b, ldb, buf)
            }
        }
    };
}
gtsv_impl!(
    f32,
    cusparseSgtsv2StridedBatch_bufferSizeExt,
    cusparseSgtsv2StridedBatch,
    cusparseSgtsv2_nopivot_bufferSizeExt,
    cusparseSgtsv2_nopivot
);
gtsv_impl!(
    f64,
    cusparseDgtsv2StridedBatch_bufferSizeExt,
    cusparseDgtsv2StridedBatch,
    cusparseDgtsv2_nopivot_bufferSizeExt,
    cusparseDgtsv2_nopivot
);

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
        dl: &CudaSlice<T>,
        d: &CudaSlice<T>,
        du: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (m, b) = (as_i32(n, "n")?, as_i32(batch, "batch")?);
        let g = self.sp.gpu().clone();
        let s = g.stream();
        let h = self.sp.handle();
        let mut bytes = 0usize;
        {
            let (pl, _a) = dl.device_ptr(s);
            let (pd, _b) = d.device_ptr(s);
            let (pu, _c) = du.device_ptr(s);
            let (px, _d) = x.device_ptr(s);
            // SAFETY: live handle; device pointers of batch*n elements; bytes is an out-pointer.
            check(
                unsafe {
                    T::strided_batch_buffer(
                        h, m, pl as _, pd as _, pu as _, px as _, b, m, &mut bytes,
                    )
                },
                "gtsv2StridedBatch_bufferSizeExt",
            )?;
        }
        let buf = self.workspace(bytes)?;
        let (pl, _a) = dl.device_ptr(s);
        let (pd, _b) = d.device_ptr(s);
        let (pu, _c) = du.device_ptr(s);
        let (px, _d) = x.device_ptr_mut(s);
        // SAFETY: as above, with a workspace of the queried size that outlives the queued call
        // (kept in self until replaced by a larger one, which happens on the same stream).
        check(
            unsafe { T::strided_batch(h, m, pl as _, pd as _, pu as _, px as _, b, m, buf) },
            "gtsv2StridedBatch",
        )
    }

    /// Queues `gtsv2_nopivot` on one system of `n = d.len()` rows; `b` holds the right-hand side
    /// and receives the solution.
    ///
    /// # Errors
    /// A cuSPARSE failure, or sizes beyond `int`.
    pub fn nopivot<T: GtsvScalar>(
        &mut self,
        dl: &CudaSlice<T>,
        d: &CudaSlice<T>,
        du: &CudaSlice<T>,
        b: &mut CudaSlice<T>,
    ) -> Result<()> {
        let m = as_i32(d.len(), "n")?;
        let g = self.sp.gpu().clone();
        let s = g.stream();
        let h = self.sp.handle();
        let mut bytes = 0usize;
        {
            let (pl, _a) = dl.device_ptr(s);
            let (pd, _b) = d.device_ptr(s);
            let (pu, _c) = du.device_ptr(s);
            let (pb, _d) = b.device_ptr(s);
            // SAFETY: live handle; device pointers of n elements; bytes is an out-pointer.
            check(
                unsafe {
                    T::nopivot_buffer(h, m, 1, pl as _, pd as _, pu as _, pb as _, m, &mut bytes)
                },
                "gtsv2_nopivot_bufferSizeExt",
            )?;
        }
        let buf = self.workspace(bytes)?;
        let (pl, _a) = dl.device_ptr(s);
        let (pd, _b) = d.device_ptr(s);
        let (pu, _c) = du.device_ptr(s);
        let (pb, _d) = b.device_ptr_mut(s);
        // SAFETY: as above, with a workspace of the queried size.
        check(
            unsafe { T::nopivot(h, m, 1, pl as _, pd as _, pu as _, pb as _, m, buf) },
            "gtsv2_nopivot",
        )
    }
}
