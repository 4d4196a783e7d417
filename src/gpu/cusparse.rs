//! A cuSPARSE handle bound to a [`Gpu`]'s stream, for the peer measurements of the benchmarks
//! (cuSPARSE SpMV, gtsv2) and for tests that compare against cuSPARSE.
//!
//! cuSPARSE is loaded at run time like the driver. A machine with a GPU but without
//! `libcusparse.so` gets [`Error::Cusparse`] from [`Cusparse::new`] ("not found"), and the
//! benchmarks print that in the peer's rows instead of failing.

use std::sync::Arc;

pub use cudarc::cusparse::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::{Gpu, KernelType};
use crate::error::{Error, Result};

/// An owned cuSPARSE handle whose work is queued on the [`Gpu`]'s stream.
pub struct Cusparse {
    handle: sys::cusparseHandle_t,
    gpu: Arc<Gpu>,
}

// SAFETY: a cuSPARSE handle may be used from any thread as long as calls are not concurrent;
// `Cusparse` hands it out only through `&self` methods that the caller serialises on one stream.
unsafe impl Send for Cusparse {}

impl Cusparse {
    /// Creates a handle on `gpu`'s context and binds it to `gpu`'s stream.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Cusparse(
                "cuSPARSE library (libcusparse.so) not found".into(),
            ));
        }
        gpu.context()
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        let handle = cudarc::cusparse::result::create()
            .map_err(|e| Error::Cusparse(format!("cusparseCreate: {e:?}")))?;
        let me = Cusparse {
            handle,
            gpu: gpu.clone(),
        };
        // SAFETY: the handle is live; the stream outlives it (the Gpu is held by `me`).
        let status = unsafe {
            sys::cusparseSetStream(handle, gpu.stream().cu_stream() as sys::cudaStream_t)
        };
        check(status, "cusparseSetStream")?;
        Ok(me)
    }

    /// The raw handle, for calls through [`sys`].
    pub fn handle(&self) -> sys::cusparseHandle_t {
        self.handle
    }

    /// The GPU this handle works on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The library's version as `major.minor.patch`.
    pub fn version(&self) -> String {
        let mut v = 0i32;
        // SAFETY: the handle is live and `v` is a valid out-pointer.
        let status = unsafe { sys::cusparseGetVersion(self.handle, &mut v) };
        if check(status, "cusparseGetVersion").is_err() {
            return "unknown".into();
        }
        format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
    }
}

impl Drop for Cusparse {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `new` and is destroyed once.
        let _ = unsafe { cudarc::cusparse::result::destroy(self.handle) };
    }
}

/// Maps a cuSPARSE status to a `Result`, naming the call.
pub fn check(status: sys::cusparseStatus_t, call: &str) -> Result<()> {
    status
        .result()
        .map_err(|e| Error::Cusparse(format!("{call}: {:?}", e.0)))
}

/// cuSPARSE's name of the device element type `T`: `f32`, `f64`, and the interleaved complex
/// types `c64`, `c128`.
pub fn data_type<T: KernelType>() -> sys::cudaDataType {
    match T::KERNEL_SUFFIX {
        "f32" => sys::cudaDataType::CUDA_R_32F,
        "c64" => sys::cudaDataType::CUDA_C_32F,
        "c128" => sys::cudaDataType::CUDA_C_64F,
        _ => sys::cudaDataType::CUDA_R_64F,
    }
}

/// The device arrays of a CSR matrix as cuSPARSE reads them: row pointer, column indices
/// (32-bit) and values.
pub type CsrArrays<'a, T> = (&'a CudaSlice<u32>, &'a CudaSlice<u32>, &'a CudaSlice<T>);

/// `cusparseCreateCsr` of an `nrows × ncols` matrix with `nnz` entries held in `arrays` (32-bit
/// indices, base 0, `T`'s value type; `None`: no arrays yet, null pointers with `nnz = 0`): the
/// matrix descriptor of every comparison peer. `call` names the call in the error.
///
/// # Safety
/// The arrays hold `nrows + 1`, `nnz` and `nnz` elements and stay alive as long as the
/// descriptor; the caller destroys it (`cusparseDestroySpMat`).
pub unsafe fn create_csr<T: KernelType>(
    mat: &mut sys::cusparseSpMatDescr_t,
    (nrows, ncols, nnz): (usize, usize, usize),
    arrays: Option<CsrArrays<'_, T>>,
    stream: &Arc<CudaStream>,
    call: &str,
) -> Result<()> {
    let i32i = sys::cusparseIndexType_t::CUSPARSE_INDEX_32I;
    let (rp, ci, va) = match arrays {
        Some((rp, ci, va)) => (
            rp.device_ptr(stream).0,
            ci.device_ptr(stream).0,
            va.device_ptr(stream).0,
        ),
        None => (0, 0, 0),
    };
    // SAFETY: the caller's.
    let status = unsafe {
        sys::cusparseCreateCsr(
            mat,
            nrows as i64,
            ncols as i64,
            nnz as i64,
            rp as *mut std::ffi::c_void,
            ci as *mut std::ffi::c_void,
            va as *mut std::ffi::c_void,
            i32i,
            i32i,
            sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
            data_type::<T>(),
        )
    };
    check(status, call)
}

/// A cuSPARSE descriptor type and the call that destroys one.
pub trait Descriptor: Copy {
    /// The null descriptor (nothing to destroy).
    fn null() -> Self;
    /// Whether this is the null descriptor.
    fn is_null(self) -> bool;
    /// Destroys the descriptor.
    ///
    /// # Safety
    /// It was created by cuSPARSE and is destroyed once.
    unsafe fn destroy(self);
}

macro_rules! descriptor {
    ($t:ty, $destroy:ident) => {
        impl Descriptor for $t {
            fn null() -> Self {
                std::ptr::null_mut()
            }
            fn is_null(self) -> bool {
                self.is_null()
            }
            unsafe fn destroy(self) {
                // SAFETY: the caller's.
                let _ = unsafe { sys::$destroy(self as _) };
            }
        }
    };
}
descriptor!(sys::cusparseSpMatDescr_t, cusparseDestroySpMat);
descriptor!(sys::cusparseDnVecDescr_t, cusparseDestroyDnVec);
descriptor!(sys::cusparseDnMatDescr_t, cusparseDestroyDnMat);

/// An owned cuSPARSE descriptor: destroyed when dropped (a null one is not).
pub struct Owned<D: Descriptor>(D);

impl<D: Descriptor> Owned<D> {
    /// The raw descriptor, for calls through [`sys`].
    pub fn raw(&self) -> D {
        self.0
    }
}

impl<D: Descriptor> Drop for Owned<D> {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: an owned descriptor was created by cuSPARSE and is destroyed once, here.
            unsafe { self.0.destroy() };
        }
    }
}

/// A sparse-matrix descriptor.
pub type SpMat = Owned<sys::cusparseSpMatDescr_t>;
/// A dense-vector descriptor.
pub type DnVec = Owned<sys::cusparseDnVecDescr_t>;
/// A dense-matrix descriptor.
pub type DnMat = Owned<sys::cusparseDnMatDescr_t>;

impl SpMat {
    /// The CSR descriptor of [`create_csr`]; `call` names the call in the error.
    ///
    /// # Safety
    /// As [`create_csr`]: the arrays stay alive as long as the descriptor.
    pub unsafe fn csr<T: KernelType>(
        shape: (usize, usize, usize),
        arrays: Option<CsrArrays<'_, T>>,
        stream: &Arc<CudaStream>,
        call: &str,
    ) -> Result<Self> {
        let mut m = Owned(Descriptor::null());
        // SAFETY: the caller's.
        unsafe { create_csr(&mut m.0, shape, arrays, stream, call)? };
        Ok(m)
    }
}

impl DnVec {
    /// `cusparseCreateDnVec` of `len` elements of `T` at the device address `ptr`; `call`
    /// names the call in the error.
    ///
    /// # Safety
    /// `ptr` is a device allocation of at least `len` elements of `T`, alive while the
    /// descriptor is used with it (`cusparseDnVecSetValues` may point it elsewhere).
    pub unsafe fn new<T: KernelType>(len: usize, ptr: u64, call: &str) -> Result<Self> {
        let mut v = Owned(Descriptor::null());
        // SAFETY: the caller's.
        let status = unsafe {
            sys::cusparseCreateDnVec(
                &mut v.0,
                len as i64,
                ptr as *mut std::ffi::c_void,
                data_type::<T>(),
            )
        };
        check(status, call)?;
        Ok(v)
    }
}

impl DnMat {
    /// `cusparseCreateDnMat` of a `rows × cols` block of `T` with leading dimension `ld` in
    /// `order` at the device address `ptr`; `call` names the call in the error.
    ///
    /// # Safety
    /// `ptr` is a device allocation holding the block as described, alive while the
    /// descriptor is used with it.
    pub unsafe fn new<T: KernelType>(
        (rows, cols, ld): (usize, usize, usize),
        ptr: u64,
        order: sys::cusparseOrder_t,
        call: &str,
    ) -> Result<Self> {
        let mut m = Owned(Descriptor::null());
        // SAFETY: the caller's.
        let status = unsafe {
            sys::cusparseCreateDnMat(
                &mut m.0,
                rows as i64,
                cols as i64,
                ld as i64,
                ptr as *mut std::ffi::c_void,
                data_type::<T>(),
                order,
            )
        };
        check(status, call)?;
        Ok(m)
    }
}
