//! cuSPARSE `cusparseSpGEMM` (`CUSPARSE_SPGEMM_DEFAULT`) as the peer of the GPU SpGEMM, called
//! the way a user calls it: descriptors of `A`, `B` and an empty `C`, `workEstimation` (size
//! query, buffer allocation, call), `compute` (the same), `cusparseSpMatGetSize`, the allocation
//! of `C`'s three arrays, `cusparseCsrSetPointers` and `copy`. Everything from the first
//! descriptor to the copy is part of one [`CusparseSpgemm::multiply`], so a benchmark timing it
//! times the whole protocol; only the handle is created once.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::DevicePtrMut;

use super::{CsrView, DeviceCsr};
use crate::error::Result;
use crate::gpu::cusparse::{check, data_type, sys, Cusparse, SpMat};
use crate::gpu::Gpu;
use crate::spmv::gpu::GpuScalar;

/// A cuSPARSE handle for SpGEMM products.
pub struct CusparseSpgemm {
    cs: Cusparse,
}

/// Destroys the SpGEMM descriptor (also when a call fails half-way).
struct Descr(sys::cusparseSpGEMMDescr_t);

impl Drop for Descr {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created by cuSPARSE and destroyed once, here.
            let _ = unsafe { sys::cusparseSpGEMM_destroyDescr(self.0) };
        }
    }
}

impl CusparseSpgemm {
    /// Creates the handle on `gpu`'s stream.
    ///
    /// # Errors
    /// [`Error::Cusparse`](crate::Error::Cusparse) when the library is absent or a call fails.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(CusparseSpgemm {
            cs: Cusparse::new(gpu)?,
        })
    }

    /// The library's version.
    pub fn version(&self) -> String {
        self.cs.version()
    }

    /// `C = A·B` by the whole cuSPARSE protocol (see the module docs); `C` is returned in a
    /// [`DeviceCsr`] whose arrays were allocated during the call.
    ///
    /// # Panics
    /// When `A`'s columns differ from `B`'s rows.
    ///
    /// # Errors
    /// [`Error::Cusparse`](crate::Error::Cusparse) naming the failing call; out of device memory.
    pub fn multiply<'a, 'b, T: GpuScalar>(
        &self,
        a: impl Into<CsrView<'a, T>>,
        b: impl Into<CsrView<'b, T>>,
    ) -> Result<DeviceCsr<T>> {
        let (a, b) = (a.into(), b.into());
        assert_eq!(
            a.ncols, b.nrows,
            "cuSPARSE SpGEMM: A has {} columns and B {} rows",
            a.ncols, b.nrows
        );
        let g = self.cs.gpu();
        let stream = g.stream();
        let h = self.cs.handle();
        let dt = data_type::<T>();
        let (alpha, beta) = (T::one(), T::zero());
        let op = sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let alg = sys::cusparseSpGEMMAlg_t::CUSPARSE_SPGEMM_DEFAULT;
        let mut d = Descr(std::ptr::null_mut());
        let mut c_row_ptr = g.zeros::<u32>(a.nrows + 1)?;
        // SAFETY: every pointer handed to cuSPARSE is a live device allocation of the size given
        // (A and B as their views say; C's arrays allocated below before they are set); the
        // descriptors destroy themselves; the buffers outlive the calls that use them
        // (all queued on this stream, and the buffers are freed on the same stream).
        unsafe {
            let make = |v: CsrView<'_, T>| {
                let arrays = (v.row_ptr, v.col, v.val);
                let shape = (v.nrows, v.ncols, v.nnz);
                SpMat::csr(shape, Some(arrays), stream, "cusparseCreateCsr")
            };
            let (da, db) = (make(a)?, make(b)?);
            let shape = (a.nrows, b.ncols, 0);
            let dc = SpMat::csr::<T>(shape, None, stream, "cusparseCreateCsr(C)")?;
            let (ma, mb, mc) = (da.raw(), db.raw(), dc.raw());
            check(
                sys::cusparseSpGEMM_createDescr(&mut d.0),
                "cusparseSpGEMM_createDescr",
            )?;
            let pa = &alpha as *const T as *const c_void;
            let pb = &beta as *const T as *const c_void;
            // workEstimation, then compute: each called for its buffer's size (null buffer),
            // then with a buffer of that size, kept to the end.
            let phases = [
                sys::cusparseSpGEMM_workEstimation,
                sys::cusparseSpGEMM_compute,
            ];
            let names = ["cusparseSpGEMM_workEstimation", "cusparseSpGEMM_compute"];
            let mut buffers = Vec::with_capacity(2);
            for (f, name) in phases.into_iter().zip(names) {
                let call = |size: &mut usize, buf: *mut c_void, what: &str| {
                    let status = f(
                        h, op, op, pa, ma as _, mb as _, pb, mc, dt, alg, d.0, size, buf,
                    );
                    check(status, what)
                };
                let mut size = 0usize;
                call(&mut size, std::ptr::null_mut(), &format!("{name} (size)"))?;
                let mut buf = g.alloc::<u64>(size.div_ceil(8).max(1))?;
                let (bp, guard) = buf.device_ptr_mut(stream);
                call(&mut size, bp as *mut c_void, name)?;
                drop(guard);
                buffers.push(buf);
            }
            let (mut r, mut c, mut nnz) = (0i64, 0i64, 0i64);
            check(
                sys::cusparseSpMatGetSize(mc as _, &mut r, &mut c, &mut nnz),
                "cusparseSpMatGetSize",
            )?;
            let nnz = nnz as usize;
            let mut col = g.alloc::<u32>(nnz.max(1))?;
            let mut val = g.alloc::<T>(nnz.max(1))?;
            {
                let (rp, _g6) = c_row_ptr.device_ptr_mut(stream);
                let (ci, _g7) = col.device_ptr_mut(stream);
                let (va, _g8) = val.device_ptr_mut(stream);
                check(
                    sys::cusparseCsrSetPointers(
                        mc,
                        rp as *mut c_void,
                        ci as *mut c_void,
                        va as *mut c_void,
                    ),
                    "cusparseCsrSetPointers",
                )?;
                check(
                    sys::cusparseSpGEMM_copy(h, op, op, pa, ma as _, mb as _, pb, mc, dt, alg, d.0),
                    "cusparseSpGEMM_copy",
                )?;
            }
            drop((da, db, dc, d));
            drop(buffers);
            Ok(DeviceCsr {
                nrows: a.nrows,
                ncols: b.ncols,
                nnz,
                row_ptr: c_row_ptr,
                col,
                val,
            })
        }
    }
}
