//! The GPU runtime: device discovery, the stream, run-time kernel compilation and device buffers.
//!
//! Everything here sits on [cudarc] with dynamic loading, so the crate builds with no CUDA
//! installed and a binary runs on a machine without the driver: [`Gpu::new`] then returns
//! [`Error::CudaUnavailable`](crate::Error::CudaUnavailable) with a sentence saying what is missing, and callers fall back to the
//! CPU. cudarc panics when a driver function is used while the library is absent, so discovery
//! checks `is_culib_present()` before any driver call.
//!
//! # Kernels
//!
//! Kernel sources live in `kernels/` and are embedded with `include_str!` (see [`kernels`]).
//! They are compiled by NVRTC on first use for the device's own architecture (`sm_XY` read from
//! the device), with the tuning policy passed as `-D` defines, and the loaded module is cached per
//! [`Gpu`] under (source, defines). NVRTC produces a CUBIN (machine code for that `sm_XY`, no
//! driver JIT), which is also kept on disk across processes by [`disk_cache`] (in
//! `~/.cache/segsparse`; `SEGSPARSE_CACHE_DIR` moves it, `SEGSPARSE_KERNEL_CACHE=0` turns it off),
//! so only the first process of a user pays the compile. Entry points are `extern "C"` and type-suffixed
//! (`scan_incl_f64`): cudarc wraps no NVRTC name-expression call, so no mangled C++ name crosses
//! the boundary. Use [`kernel_name`] to build the name from a type.
//!
//! # One stream, no event tracking
//!
//! A [`Gpu`] owns one stream and every operation of this crate is ordered on it. cudarc's
//! multi-stream event tracking (an event recorded per buffer argument per launch) buys nothing in
//! that setting and costs microseconds per launch, which matters for a 5 µs SpMV; it is disabled.
//!
//! # Threads and faults
//!
//! [`Gpu`] (and the `GpuCsr` and `GpuOps` built on it) are `Send + Sync`: share one `Arc<Gpu>`
//! between threads. cudarc binds the context to each calling thread, and since every operation is
//! queued on the one stream, work from several threads is serialised on the device in the order
//! it was queued (`tests/reliability.rs` runs 8 threads × 1000 SpMVs and 8 concurrent solves).
//! Out of device memory is an [`Error::Cuda`](crate::Error::Cuda) naming the element count, type,
//! bytes and the free memory ([`Gpu::memory_info`]); a refused launch names the kernel; a kernel
//! that faults leaves a *sticky* error, after which every call of the process returns an error
//! that says so ([`Error::is_sticky_cuda_error`](crate::Error::is_sticky_cuda_error)), never a
//! panic.

#[cfg(feature = "cuda")]
pub mod cusparse;
pub mod disk_cache;
#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
mod imp;
pub mod kernels;
#[cfg(feature = "cuda")]
pub mod nvrtc;
pub mod prebuilt;
#[cfg(feature = "cuda")]
pub mod wait_log;

#[cfg(feature = "cuda")]
pub use imp::*;

#[cfg(not(feature = "cuda"))]
mod stub;
#[cfg(not(feature = "cuda"))]
pub use stub::*;

/// The type-suffixed name of a kernel entry point: `kernel_name::<f64>("scan_incl")` is
/// `"scan_incl_f64"`.
pub fn kernel_name<T: KernelType>(root: &str) -> String {
    format!("{root}_{}", T::KERNEL_SUFFIX)
}

/// Element types that have kernel instantiations, with their name suffix and C type.
pub trait KernelType: Copy + Send + Sync + 'static + crate::scalar::DeviceElem {
    /// Suffix of entry-point names (`f32`, `f64`, `i32`, `u32`, `u64`, and `c64`, `c128` for
    /// the interleaved complex types).
    const KERNEL_SUFFIX: &'static str;
    /// The C type in kernel sources.
    const C_TYPE: &'static str;
}

macro_rules! kernel_type {
    ($t:ty, $s:literal, $c:literal) => {
        impl KernelType for $t {
            const KERNEL_SUFFIX: &'static str = $s;
            const C_TYPE: &'static str = $c;
        }
    };
}
kernel_type!(f32, "f32", "float");
kernel_type!(f64, "f64", "double");
kernel_type!(i32, "i32", "int");
kernel_type!(u32, "u32", "unsigned int");
kernel_type!(u64, "u64", "unsigned long long");
kernel_type!(crate::scalar::DevComplex<f32>, "c64", "cfloat");
kernel_type!(crate::scalar::DevComplex<f64>, "c128", "cdouble");

/// True when `SEGSPARSE_REQUIRE_GPU=1`: GPU tests must then fail instead of skipping when no
/// device works (the GPU machine's `run.sh` sets it).
pub fn gpu_required() -> bool {
    std::env::var("SEGSPARSE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// For tests: the shared [`Gpu`] of this process, or `None` after printing a notice when no
/// device works. Panics instead when [`gpu_required`] (so a GPU test never passes silently on
/// the GPU machine).
pub fn test_gpu() -> Option<std::sync::Arc<Gpu>> {
    match Gpu::shared() {
        Ok(g) => Some(g),
        Err(e) if gpu_required() => panic!("SEGSPARSE_REQUIRE_GPU=1 but no GPU: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}
