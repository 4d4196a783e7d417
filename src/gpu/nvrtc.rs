//! NVRTC, loaded by this crate: CUDA 12 and CUDA 13 alike.
//!
//! # Why not cudarc's own NVRTC loader
//!
//! cudarc is built for one CUDA version (feature `cuda-13000` here) and opens the first NVRTC
//! library it finds among `libnvrtc.so`, `libnvrtc.so.13`, `libnvrtc.so.12`, ... — whatever the
//! driver. But code compiled by NVRTC 13 cannot be loaded by a CUDA 12 driver (a CUBIN from a
//! newer toolkit than the driver is refused), and a machine may have both libraries (a CUDA 12
//! toolkit and a pip-installed NVRTC 13). So the crate opens NVRTC itself, through the dozen
//! functions it uses, whose C signatures are the same in CUDA 12 and 13, and picks the library
//! that fits the driver:
//!
//! 1. `SEGSPARSE_NVRTC`, when set: that file (a path or a library name), and nothing else;
//! 2. else `libnvrtc.so.<driver major>`, then `.so.13`, `.so.12`, then `libnvrtc.so` (the
//!    search path of the dynamic loader: `LD_LIBRARY_PATH`, the system directories);
//! 3. a library whose major version is newer than the driver's is skipped (and named in the
//!    error when nothing else is found). Without a driver (CI compiling kernels, no GPU) the
//!    first library that loads is taken.
//!
//! The driver itself goes through cudarc's `cuda-13000` bindings with dynamic loading: driver
//! functions are resolved by name when first called, and the crate calls only entry points that
//! CUDA 12.0 drivers export too, except `cuEventElapsedTime`, whose CUDA 13 name
//! (`cuEventElapsedTime_v2`, from driver 12.8 on) is looked up with a fallback to the old one
//! ([`super::Gpu::time`]).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use crate::error::{Error, Result};

type NvrtcResult = c_int;
type Program = *mut c_void;

/// The NVRTC entry points used, resolved once.
struct Api {
    /// The library, kept loaded for the life of the process (the function pointers below point
    /// into it).
    _lib: libloading::Library,
    /// What was opened (the candidate name or the `SEGSPARSE_NVRTC` path).
    name: String,
    version: (i32, i32),
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> NvrtcResult,
    destroy: unsafe extern "C" fn(*mut Program) -> NvrtcResult,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    log: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    cubin_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    cubin: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
}

// SAFETY: the function pointers and the library handle are immutable after loading, and NVRTC's
// API is thread-safe for distinct programs (each compile creates its own).
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

/// The library names tried, in order, for a driver of major version `driver_major`.
pub fn candidates(driver_major: Option<i32>) -> Vec<String> {
    if let Ok(p) = std::env::var("SEGSPARSE_NVRTC") {
        if !p.is_empty() {
            return vec![p];
        }
    }
    let mut majors: Vec<i32> = driver_major.into_iter().collect();
    for m in [13, 12] {
        if !majors.contains(&m) {
            majors.push(m);
        }
    }
    let mut names: Vec<String> = Vec::new();
    for m in majors {
        if cfg!(windows) {
            names.push(format!("nvrtc64_{m}0_0.dll"));
        } else {
            names.push(format!("libnvrtc.so.{m}"));
        }
    }
    names.push(
        if cfg!(windows) {
            "nvrtc.dll"
        } else {
            "libnvrtc.so"
        }
        .to_string(),
    );
    names
}

/// The CUDA driver's major version (12, 13, ...), or `None` without a driver. Needs no context
/// (`cuDriverGetVersion` may be called before `cuInit`).
fn driver_major() -> Option<i32> {
    super::driver::driver_version_number().map(|v| v / 1000)
}

/// Opens `name` and resolves every entry point.
///
/// # Safety
/// Loading a library runs its initialisers; `name` must be an NVRTC library.
unsafe fn open(name: &str) -> std::result::Result<Api, String> {
    let lib = libloading::Library::new(name).map_err(|e| format!("{name}: {e}"))?;
    macro_rules! sym {
        ($s:literal) => {
            *lib.get(concat!($s, "\0").as_bytes())
                .map_err(|e| format!("{name}: missing {}: {e}", $s))?
        };
    }
    let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult =
        sym!("nvrtcVersion");
    let (mut major, mut minor) = (0, 0);
    if version_fn(&mut major, &mut minor) != 0 {
        return Err(format!("{name}: nvrtcVersion failed"));
    }
    Ok(Api {
        name: name.to_string(),
        version: (major, minor),
        create: sym!("nvrtcCreateProgram"),
        compile: sym!("nvrtcCompileProgram"),
        destroy: sym!("nvrtcDestroyProgram"),
        log_size: sym!("nvrtcGetProgramLogSize"),
        log: sym!("nvrtcGetProgramLog"),
        cubin_size: sym!("nvrtcGetCUBINSize"),
        cubin: sym!("nvrtcGetCUBIN"),
        ptx_size: sym!("nvrtcGetPTXSize"),
        ptx: sym!("nvrtcGetPTX"),
        error_string: sym!("nvrtcGetErrorString"),
        _lib: lib,
    })
}

fn load() -> std::result::Result<Api, String> {
    let driver = driver_major();
    let mut tried = Vec::new();
    for name in candidates(driver) {
        // SAFETY: the candidates are NVRTC library names (or the user's SEGSPARSE_NVRTC).
        match unsafe { open(&name) } {
            Ok(api) => match driver {
                Some(d) if api.version.0 > d => tried.push(format!(
                    "{name} is NVRTC {}.{}, newer than the CUDA {d} driver can load",
                    api.version.0, api.version.1
                )),
                _ => return Ok(api),
            },
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "no usable NVRTC library (libnvrtc.so.12 or .13; SEGSPARSE_NVRTC names one explicitly): \
         {}",
        tried.join("; ")
    ))
}

fn api() -> Result<&'static Api> {
    API.get_or_init(load)
        .as_ref()
        .map_err(|why| Error::CudaUnavailable(why.clone()))
}

/// Whether a usable NVRTC library was found (see the module docs for the order).
pub fn present() -> bool {
    api().is_ok()
}

/// The NVRTC library in use and its version, e.g. `("libnvrtc.so.13", (13, 0))`, or the reason
/// none is.
pub fn library() -> Result<(&'static str, (i32, i32))> {
    api().map(|a| (a.name.as_str(), a.version))
}

/// What NVRTC produces.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Machine code for a real architecture.
    Cubin,
    /// PTX.
    Ptx,
}

/// Compiles `text` (named `name` in messages) with `options`; returns the CUBIN or the PTX
/// (with its terminating NUL removed).
pub(crate) fn compile(name: &str, text: &str, options: &[String], out: Output) -> Result<Vec<u8>> {
    let api = api()?;
    let fail = |log: String| Error::Compile {
        kernel: name.to_string(),
        log,
    };
    let err = |code: NvrtcResult| -> String {
        // SAFETY: nvrtcGetErrorString returns a static string for any code.
        let p = unsafe { (api.error_string)(code) };
        if p.is_null() {
            format!("NVRTC error {code}")
        } else {
            // SAFETY: non-null static NUL-terminated string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let c_src = CString::new(text).map_err(|_| fail("the source contains a NUL byte".into()))?;
    let c_name = CString::new(name).map_err(|_| fail("the name contains a NUL byte".into()))?;
    let c_opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| fail("an option contains a NUL byte".into()))?;
    let opt_ptrs: Vec<*const c_char> = c_opts.iter().map(|o| o.as_ptr()).collect();

    /// Destroys the program on every path out of `compile`.
    struct Prog<'a>(Program, &'a Api);
    impl Drop for Prog<'_> {
        fn drop(&mut self) {
            // SAFETY: created by nvrtcCreateProgram below and destroyed only here.
            unsafe { (self.1.destroy)(&mut self.0) };
        }
    }
    let mut raw: Program = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the source and name are NUL-terminated and outlive the call;
    // no headers.
    let rc = unsafe {
        (api.create)(
            &mut raw,
            c_src.as_ptr(),
            c_name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(fail(format!("nvrtcCreateProgram: {}", err(rc))));
    }
    let prog = Prog(raw, api);
    // SAFETY: a live program; `opt_ptrs` points into `c_opts`, alive until the end.
    let rc = unsafe { (api.compile)(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if rc != 0 {
        let mut size = 0usize;
        // SAFETY: a live program; valid out-pointer; the buffer has the size reported.
        let log = unsafe {
            if (api.log_size)(prog.0, &mut size) == 0 && size > 0 {
                let mut buf = vec![0u8; size];
                (api.log)(prog.0, buf.as_mut_ptr().cast());
                String::from_utf8_lossy(&buf[..size - 1]).into_owned()
            } else {
                String::new()
            }
        };
        return Err(fail(format!(
            "{} (NVRTC {}.{} from {})\n{log}\n(options: {})",
            err(rc),
            api.version.0,
            api.version.1,
            api.name,
            options.join(" ")
        )));
    }
    let (size_fn, get_fn, what) = match out {
        Output::Cubin => (api.cubin_size, api.cubin, "CUBIN"),
        Output::Ptx => (api.ptx_size, api.ptx, "PTX"),
    };
    let mut size = 0usize;
    // SAFETY: the program compiled; valid out-pointer.
    let rc = unsafe { size_fn(prog.0, &mut size) };
    if rc != 0 {
        return Err(fail(format!("nvrtcGet{what}Size: {}", err(rc))));
    }
    if size == 0 {
        return Err(fail(format!(
            "NVRTC produced no {what} (options: {}); a virtual architecture gives PTX only",
            options.join(" ")
        )));
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` has the `size` bytes reported for this program.
    let rc = unsafe { get_fn(prog.0, buf.as_mut_ptr().cast()) };
    if rc != 0 {
        return Err(fail(format!("nvrtcGet{what}: {}", err(rc))));
    }
    if out == Output::Ptx {
        while buf.last() == Some(&0) {
            buf.pop();
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(not(windows))]
    fn the_driver_major_comes_first() {
        if std::env::var_os("SEGSPARSE_NVRTC").is_some() {
            return;
        }
        let c = candidates(Some(12));
        assert_eq!(c[0], "libnvrtc.so.12");
        assert_eq!(c[1], "libnvrtc.so.13");
        assert_eq!(c.last().unwrap(), "libnvrtc.so");
        let c = candidates(None);
        assert_eq!(&c[..2], ["libnvrtc.so.13", "libnvrtc.so.12"]);
    }
}
