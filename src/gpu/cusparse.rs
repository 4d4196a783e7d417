//! A cuSPARSE handle bound to a [`Gpu`]'s stream, for the peer measurements of the benchmarks
//! (cuSPARSE SpMV, gtsv2) and for tests that compare against cuSPARSE.
//!
//! cuSPARSE is loaded at run time like the driver. A machine with a GPU but without
//! `libcusparse.so` gets [`Error::Cusparse`] from [`Cusparse::new`] ("not found"), and the
//! benchmarks print that in the peer's rows instead of failing.

use std::sync::Arc;

pub use cudarc::cusparse::sys;

use super::Gpu;
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
