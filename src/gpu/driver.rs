//! The CUDA driver library: whether it loads, and its version. Needs no device and no context,
//! and sits below both the runtime and the NVRTC loader ([`super::nvrtc`]),
//! which asks for the driver's version to pick a matching NVRTC.

/// Why no driver can be used, or `None` when the library loads. Never panics.
pub(crate) fn driver_missing() -> Option<String> {
    // SAFETY: is_culib_present only tries to dlopen the library by its usual names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        None
    } else {
        Some("CUDA driver not found (libcuda.so could not be loaded)".into())
    }
}

/// The CUDA driver's version number (`12040` for 12.4, `13000` for 13.0), or `None` when no
/// driver library loads. Needs no device and no context.
pub fn driver_version_number() -> Option<i32> {
    if driver_missing().is_some() {
        return None;
    }
    let mut v = 0;
    // SAFETY: the driver library is present; cuDriverGetVersion may be called before cuInit
    // and only writes the out-pointer.
    let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    (rc == cudarc::driver::sys::CUresult::CUDA_SUCCESS && v > 0).then_some(v)
}

/// `12040` → `"12.4"`.
pub fn version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}
