//! The cudarc-backed runtime (compiled with the `cuda` feature).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
    LaunchConfig,
};

use super::driver::driver_missing;
pub use super::driver::{driver_version_number, version_string};
use super::kernels::{self, KernelSource};
use super::wait_log::WaitKind;
use super::KernelType;
use crate::error::{Error, Result};

pub use cudarc::driver::{CudaSlice as DeviceBuffer, CudaView, CudaViewMut, PushKernelArg};

/// A CUDA device with its stream and kernel cache. Cheap to share as `Arc<Gpu>`.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    cc: (i32, i32),
    sm_count: u32,
    /// Read when first needed: a module found in the embedded archive needs no NVRTC at all.
    nvrtc_version: OnceLock<String>,
    driver_version: i32,
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    /// Modules that a [`Gpu::prepare_in_background`] thread is loading: [`Gpu::module`] waits
    /// for them (on `pending_done`) instead of loading them a second time.
    pending: Mutex<std::collections::HashSet<String>>,
    pending_done: std::sync::Condvar,
    users: Users,
    /// `SEGSPARSE_WAIT_LOG=1`: the host's waits and driver calls per call site.
    waits: Option<super::wait_log::WaitLog>,
    /// The per-buffer preflight's budget ([`Gpu::precheck`]): the usable device bytes at the
    /// last driver query, less the buffers checked since.
    alloc_budget: std::sync::atomic::AtomicU64,
}

/// Which threads use a [`Gpu`], for CUDA graph capture: a capture records *everything* queued on
/// the stream, whichever thread queues it, so a solve may record its iterations only while no
/// other thread uses the `Gpu` (see [`Gpu::begin_capture`]).
#[derive(Default)]
struct Users {
    /// The first thread that queued work.
    owner: std::sync::OnceLock<std::thread::ThreadId>,
    /// Another thread has queued work: no more captures.
    shared: std::sync::atomic::AtomicBool,
    /// A capture is in progress (its thread in `capture`).
    capturing: std::sync::atomic::AtomicBool,
    capture: Mutex<Option<std::thread::ThreadId>>,
    done: std::sync::Condvar,
    /// Captures that produced a graph.
    graphs: std::sync::atomic::AtomicUsize,
    /// Bytes copied host → device and device → host ([`Gpu::transfer_bytes`]).
    to_device: std::sync::atomic::AtomicU64,
    to_host: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Gpu({}, sm_{}{}, {} SMs)",
            self.name, self.cc.0, self.cc.1, self.sm_count
        )
    }
}

/// Whether a usable NVRTC library can be loaded (kernel compilation needs it, a GPU does not);
/// CUDA 12 and 13 alike, see [`super::nvrtc`].
pub fn nvrtc_present() -> bool {
    super::nvrtc::present()
}

/// The NVRTC options of every kernel: the architecture, C++17, device code by default, the
/// constants that `src` and its headers share with Rust ([`KernelSource::constants`]) and the
/// policy's `-D` defines.
///
/// # Errors
/// [`Error::Compile`] when a policy define names one of the source's constants (they are fixed
/// by the Rust code that launches the kernel), or two files give a constant different values.
fn nvrtc_options(
    src: &KernelSource,
    arch: &str,
    defines: &[(&str, String)],
) -> Result<Vec<String>> {
    let constants = kernels::constants(src)?;
    if let Some((k, _)) = defines
        .iter()
        .find(|(k, _)| constants.iter().any(|(c, _)| c == k))
    {
        return Err(Error::Compile {
            kernel: src.name.to_string(),
            log: format!("-D{k} is one of the source's constants and cannot be set per compile"),
        });
    }
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
    ];
    options.extend(constants.iter().map(|(k, v)| format!("-D{k}={v}")));
    options.extend(defines.iter().map(|(k, v)| format!("-D{k}={v}")));
    Ok(options)
}

/// Compiles a kernel source to PTX for `arch` (e.g. `"sm_90"`), with `defines` as `-D` options.
/// Needs only the NVRTC library, no GPU: CI uses this to check that every kernel compiles.
pub fn compile_ptx(
    src: &KernelSource,
    arch: &str,
    defines: &[(&str, String)],
) -> Result<cudarc::nvrtc::Ptx> {
    let text = kernels::preprocess(src)?;
    let ptx = super::nvrtc::compile(
        src.name,
        &text,
        &nvrtc_options(src, arch, defines)?,
        super::nvrtc::Output::Ptx,
    )?;
    Ok(cudarc::nvrtc::Ptx::from_src(
        String::from_utf8_lossy(&ptx).into_owned(),
    ))
}

/// Compiles a kernel source to a CUBIN for the real architecture `arch` (e.g. `"sm_90"`): machine
/// code that the driver loads without a JIT step, and that the [`disk_cache`](super::disk_cache)
/// keeps. Needs only the NVRTC library, no GPU.
pub fn compile_cubin(
    src: &KernelSource,
    arch: &str,
    defines: &[(&str, String)],
) -> Result<Vec<u8>> {
    let text = kernels::preprocess(src)?;
    cubin_of(src.name, &text, &nvrtc_options(src, arch, defines)?)
}

/// NVRTC on preprocessed `text`, returning the CUBIN.
fn cubin_of(name: &str, text: &str, options: &[String]) -> Result<Vec<u8>> {
    super::nvrtc::compile(name, text, options, super::nvrtc::Output::Cubin)
}

/// Threads that compile kernel modules at once: `SEGSPARSE_COMPILE_THREADS` when set to a
/// positive number, else one per core.
fn compile_threads() -> usize {
    std::env::var("SEGSPARSE_COMPILE_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `SEGSPARSE_KERNEL_LOG=1`: print where each kernel module comes from and what it cost.
fn kernel_log() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SEGSPARSE_KERNEL_LOG").is_ok_and(|v| v == "1"))
}

/// The key of a loaded module in a [`Gpu`]'s map: the source's name and its defines.
fn module_map_key(src: &KernelSource, defines: &[(&str, String)]) -> String {
    let mut key = src.name.to_string();
    for (k, v) in defines {
        key.push_str(&format!(" -D{k}={v}"));
    }
    key
}

/// One architecture's part of a kernel archive: the real architecture (`"sm_90"`) and the
/// `(source, defines)` variants compiled for it.
pub type ArchiveTarget<'a> = (
    &'a str,
    Vec<(&'a KernelSource, Vec<(&'static str, String)>)>,
);

/// One compile of an archive: the source, its `-D` defines and the architecture.
type ArchiveJob<'a> = (&'a KernelSource, &'a [(&'a str, String)], &'a str);
/// A finished compile: the job's index and its (archive key, CUBIN).
type ArchiveResult = (usize, Result<(String, Vec<u8>)>);
/// A module `prepare` still has to load: the source, its defines and its module-map key.
type PrepareJob<'a> = (&'a KernelSource, &'a [(&'a str, String)], String);

/// The modules a [`Gpu::prepare_in_background`] thread loads; [`Preparing::wait`] (or
/// dropping it) waits for them.
#[must_use = "dropping the handle waits for the loads at once"]
pub struct Preparing(Option<std::thread::JoinHandle<Result<()>>>);

impl Preparing {
    /// Waits until every module is loaded.
    ///
    /// # Errors
    /// The first module that failed to load (or compile).
    pub fn wait(mut self) -> Result<()> {
        self.join()
    }

    fn join(&mut self) -> Result<()> {
        match self.0.take().map(std::thread::JoinHandle::join) {
            None => Ok(()),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Compile {
                kernel: "background module loads".into(),
                log: "the loading thread panicked".into(),
            }),
        }
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        // An error here resurfaces where the module is used.
        let _ = self.join();
    }
}

/// Compiles every variant of every target with the NVRTC in use, `jobs` compiles at a time, and
/// returns the archive that the runtime looks in first (see [`super::prebuilt`]; `build.rs`
/// embeds it). Needs only NVRTC, no GPU.
///
/// # Errors
/// No usable NVRTC; the first source that fails to compile (naming it and the architecture).
pub fn build_kernel_archive(targets: &[ArchiveTarget<'_>], jobs: usize) -> Result<Vec<u8>> {
    let (_, version) = super::nvrtc::library()?;
    let work: Vec<ArchiveJob<'_>> = targets
        .iter()
        .flat_map(|(a, vs)| vs.iter().map(move |(s, d)| (*s, d.as_slice(), *a)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Mutex<Vec<ArchiveResult>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, work.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(src, defines, arch)) = work.get(i) else {
                    break;
                };
                let r = (|| {
                    let t0 = std::time::Instant::now();
                    let text = kernels::preprocess(src)?;
                    let options = nvrtc_options(src, arch, defines)?;
                    let cubin = cubin_of(src.name, &text, &options)?;
                    if kernel_log() {
                        eprintln!(
                            "segsparse: compiled {} ({} defines) for {arch}: {:.2} s, {} bytes",
                            src.name,
                            defines.len(),
                            t0.elapsed().as_secs_f64(),
                            cubin.len()
                        );
                    }
                    let key = super::disk_cache::module_key(src.name, &text, arch, &options);
                    Ok((key, cubin))
                })();
                done.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    let mut w = super::prebuilt::ArchiveWriter::new(version);
    for (i, r) in done {
        let (key, cubin) = r.map_err(|e| match e {
            Error::Compile { kernel, log } => Error::Compile {
                kernel: format!("{kernel} for {}", work[i].2),
                log,
            },
            other => other,
        })?;
        w.add(key, cubin);
    }
    Ok(w.finish())
}

/// The key under which the archive and a runtime request find the module of `src` compiled
/// for `arch` with `defines` (the same text on both sides: see [`super::prebuilt`]).
///
/// # Errors
/// As [`compile_cubin`], without compiling: an include or constant that does not resolve.
pub fn archive_key(src: &KernelSource, arch: &str, defines: &[(&str, String)]) -> Result<String> {
    let text = kernels::preprocess(src)?;
    let options = nvrtc_options(src, arch, defines)?;
    Ok(super::disk_cache::module_key(
        src.name, &text, arch, &options,
    ))
}

/// NVRTC's version as `major.minor`, or `"unknown"` when no usable library is found.
pub fn nvrtc_version() -> String {
    match super::nvrtc::library() {
        Ok((_, (major, minor))) => format!("{major}.{minor}"),
        Err(_) => "unknown".into(),
    }
}

/// The CUDA driver's version number (e.g. 13000), or 0 when it cannot be read.
fn driver_version() -> i32 {
    driver_version_number().unwrap_or(0)
}

static SHARED: OnceLock<std::result::Result<Arc<Gpu>, String>> = OnceLock::new();

impl Gpu {
    /// How many CUDA devices this process can see: 0 without a driver or a device. Never
    /// panics, creates no context.
    pub fn device_count() -> usize {
        if driver_missing().is_some() {
            return 0;
        }
        CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
    }

    /// Opens device 0. Never panics: no driver, no device or a failing device is an
    /// [`Error::CudaUnavailable`] whose message says which.
    pub fn new() -> Result<Arc<Gpu>> {
        Self::with_ordinal(0)
    }

    /// Opens the device with the given ordinal.
    pub fn with_ordinal(ordinal: usize) -> Result<Arc<Gpu>> {
        if let Some(why) = driver_missing() {
            return Err(Error::CudaUnavailable(why));
        }
        let unavailable = |what: &str, e: cudarc::driver::DriverError| {
            Error::CudaUnavailable(format!("{what}: {e}"))
        };
        let count = CudaContext::device_count().map_err(|e| unavailable("cuDeviceGetCount", e))?;
        if count <= 0 {
            return Err(Error::CudaUnavailable("no CUDA device present".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::CudaUnavailable(format!(
                "device {ordinal} requested but only {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable("creating a context", e))?;
        // SAFETY: every operation of this crate is ordered on the one stream created below, so
        // no buffer is ever used by two streams and the per-launch events are not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| unavailable("creating a stream", e))?;
        keep_freed_memory_pooled(&ctx);
        l2_limits_from_env(&ctx);
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
        let cc = ctx
            .compute_capability()
            .map_err(|e| unavailable("reading the compute capability", e))?;
        let sm_count = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| unavailable("reading the SM count", e))? as u32;
        Ok(Arc::new(Gpu {
            ctx,
            stream,
            name,
            cc,
            sm_count,
            nvrtc_version: OnceLock::new(),
            driver_version: driver_version(),
            modules: Mutex::new(HashMap::new()),
            pending: Mutex::new(std::collections::HashSet::new()),
            pending_done: std::sync::Condvar::new(),
            users: Users::default(),
            waits: super::wait_log::enabled().then(Default::default),
            alloc_budget: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// One `Gpu` shared by the whole process (device 0), created on first use. Tests and the
    /// CLIs use it so that kernels compile once per process.
    pub fn shared() -> Result<Arc<Gpu>> {
        // The reason is kept without the variant's "no usable CUDA device: " prefix, which the
        // error re-adds when displayed.
        SHARED
            .get_or_init(|| {
                Gpu::new().map_err(|e| match e {
                    Error::CudaUnavailable(why) => why,
                    other => other.to_string(),
                })
            })
            .clone()
            .map_err(Error::CudaUnavailable)
    }

    /// The device's name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }
    /// NVRTC architecture string for this device, e.g. `"sm_90"`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.cc.0, self.cc.1)
    }
    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// The CUDA driver's version, e.g. `"13.0"` or `"12.4"` (the CUDA version it supports).
    pub fn driver_version(&self) -> String {
        version_string(self.driver_version)
    }
    /// The NVRTC version that compiles this device's kernels, e.g. `"13.0"` (`"unknown"` when
    /// no usable NVRTC library was found; kernels then cannot be compiled).
    pub fn nvrtc_version(&self) -> &str {
        self.nvrtc_version.get_or_init(nvrtc_version)
    }
    /// One line naming the device, its architecture, the driver and NVRTC: what
    /// `sparse-solve --version`-style reports print.
    pub fn describe(&self) -> String {
        let nvrtc = match super::nvrtc::library() {
            Ok((lib, _)) => format!("NVRTC {} ({lib})", self.nvrtc_version()),
            Err(e) => format!("no NVRTC: {e}"),
        };
        format!(
            "{} (sm_{}{}, {} SMs), CUDA driver {}, {nvrtc}",
            self.name,
            self.cc.0,
            self.cc.1,
            self.sm_count,
            self.driver_version()
        )
    }
    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The stream every operation of this `Gpu` is ordered on. Every use of the stream goes
    /// through here: it notes which threads use the `Gpu`, and a thread other than a capturing
    /// one waits here until the capture ends (so its work is never recorded into another
    /// thread's graph).
    pub fn stream(&self) -> &Arc<CudaStream> {
        use std::sync::atomic::Ordering::{Relaxed, SeqCst};
        let u = &self.users;
        let me = std::thread::current().id();
        if *u.owner.get_or_init(|| me) != me && !u.shared.load(Relaxed) {
            u.shared.store(true, SeqCst);
        }
        if u.capturing.load(SeqCst) {
            let mut c = u.capture.lock().unwrap_or_else(|p| p.into_inner());
            while matches!(*c, Some(t) if t != me) {
                c = u.done.wait(c).unwrap_or_else(|p| p.into_inner());
            }
        }
        &self.stream
    }

    /// Starts recording this thread's work on the stream into a CUDA graph (stream capture),
    /// unless another thread has used this `Gpu`: then nothing starts and `Ok(false)` comes
    /// back, and the caller runs its work directly. A capture must be ended by
    /// [`Gpu::end_capture`] on the same thread; meanwhile other threads wait in
    /// [`Gpu::stream`].
    ///
    /// # Errors
    /// A failed `cuStreamBeginCapture`.
    pub fn begin_capture(&self) -> Result<bool> {
        use std::sync::atomic::Ordering::SeqCst;
        let u = &self.users;
        let me = std::thread::current().id();
        if *u.owner.get_or_init(|| me) != me || u.shared.load(SeqCst) {
            return Ok(false);
        }
        *u.capture.lock().unwrap_or_else(|p| p.into_inner()) = Some(me);
        u.capturing.store(true, SeqCst);
        // A thread that marked itself before seeing `capturing` may be queueing work now.
        if u.shared.load(SeqCst) {
            self.release_capture();
            return Ok(false);
        }
        if let Err(e) = self.stream.begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        ) {
            self.release_capture();
            return Err(Error::cuda("beginning a stream capture", e));
        }
        Ok(true)
    }

    /// Ends the capture begun by [`Gpu::begin_capture`] and instantiates the graph (`None`
    /// when nothing was recorded); other threads may use the stream again.
    ///
    /// # Errors
    /// A failed capture (e.g. a step that synchronised with the host) or instantiation.
    pub fn end_capture(&self) -> Result<Option<cudarc::driver::CudaGraph>> {
        let r = self
            .stream
            .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
        self.release_capture();
        if matches!(r, Ok(Some(_))) {
            self.users
                .graphs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        r.map_err(|e| Error::cuda("ending a stream capture", e))
    }

    /// How many CUDA graphs have been recorded on this `Gpu` (tests check that a path they
    /// mean to exercise with graphs really recorded some).
    pub fn graphs_recorded(&self) -> usize {
        self.users.graphs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes copied between host and device through this `Gpu` so far, `(to the device, to the
    /// host)`: every [`upload`](Gpu::upload), [`upload_into`](Gpu::upload_into) and
    /// [`download`](Gpu::download), and the crate's other copies, which report themselves
    /// through [`note_transfer`](Gpu::note_transfer). Tests read it to show that an operation
    /// on a device matrix moves no copy of the matrix over the bus.
    pub fn transfer_bytes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.users.to_device.load(Relaxed),
            self.users.to_host.load(Relaxed),
        )
    }

    /// Adds a copy made outside [`upload`](Gpu::upload) / [`download`](Gpu::download) (a raw
    /// driver copy on this `Gpu`'s stream) to [`transfer_bytes`](Gpu::transfer_bytes).
    pub fn note_transfer(&self, to_device: bool, bytes: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = if to_device {
            &self.users.to_device
        } else {
            &self.users.to_host
        };
        c.fetch_add(bytes as u64, Relaxed);
    }

    fn release_capture(&self) {
        let u = &self.users;
        *u.capture.lock().unwrap_or_else(|p| p.into_inner()) = None;
        u.capturing
            .store(false, std::sync::atomic::Ordering::SeqCst);
        u.done.notify_all();
    }

    /// The loaded module for `src` compiled with `defines`, compiling it on first use.
    ///
    /// The module map is not locked while a CUBIN is found or compiled, so threads that need
    /// different modules compile them at the same time (two threads that need the same one may
    /// both compile it; the first to finish is kept). [`Gpu::prepare`] compiles several at once.
    pub fn module(
        &self,
        src: &KernelSource,
        defines: &[(&str, String)],
    ) -> Result<Arc<CudaModule>> {
        let key = module_map_key(src, defines);
        if let Some(m) = self.loaded(&key) {
            return Ok(m);
        }
        // A background thread loading it finishes sooner than a second load would.
        self.wait_pending(&key);
        if let Some(m) = self.loaded(&key) {
            return Ok(m);
        }
        let cubin = self.cubin(src, defines)?;
        self.load_cubin(src, key, cubin)
    }

    /// Waits while a [`Gpu::prepare_in_background`] thread loads the module of `key`.
    fn wait_pending(&self, key: &str) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while p.contains(key) {
            p = self.pending_done.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Marks the modules of `keys` as no longer being loaded in the background.
    fn unpend(&self, keys: &[String]) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            p.remove(k);
        }
        drop(p);
        self.pending_done.notify_all();
    }

    /// [`Gpu::prepare`] on a background thread: returns at once, while the modules of `wanted`
    /// that are not loaded yet are found and loaded (in `wanted`'s order, several at a time). A
    /// thread that needs one of them meanwhile waits in [`Gpu::module`] for that one alone, so
    /// work that needs the first modules starts while the later ones load: the first AMG setup
    /// of a process overlaps its first phases' device work with loading the modules of the
    /// later phases. [`Preparing::wait`] (or dropping the handle) waits for all of them.
    pub fn prepare_in_background(
        self: &Arc<Self>,
        wanted: Vec<(&'static KernelSource, Vec<(&'static str, String)>)>,
    ) -> Preparing {
        let mut keys = Vec::new();
        let mut todo = Vec::new();
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (src, defines) in wanted {
                let key = module_map_key(src, &defines);
                if self.loaded(&key).is_none() && p.insert(key.clone()) {
                    keys.push(key);
                    todo.push((src, defines));
                }
            }
        }
        if todo.is_empty() {
            return Preparing(None);
        }
        let gpu = self.clone();
        Preparing(Some(std::thread::spawn(move || {
            // Unmarks every module however the thread ends (a failed load is retried by the
            // thread that needs it, which then reports the error).
            struct Unpend(Arc<Gpu>, Vec<String>);
            impl Drop for Unpend {
                fn drop(&mut self) {
                    self.0.unpend(&self.1);
                }
            }
            let guard = Unpend(gpu, keys);
            let jobs: Vec<(&KernelSource, &[(&str, String)])> =
                todo.iter().map(|(s, d)| (*s, d.as_slice())).collect();
            guard.0.prepare_marked(&jobs)
        })))
    }

    fn loaded(&self, key: &str) -> Option<Arc<CudaModule>> {
        self.modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    fn load_cubin(
        &self,
        src: &KernelSource,
        key: String,
        cubin: Vec<u8>,
    ) -> Result<Arc<CudaModule>> {
        let t0 = std::time::Instant::now();
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
            .map_err(|e| Error::cuda(format!("loading module {}", src.name), e))?;
        if kernel_log() {
            eprintln!(
                "segsparse: module {} loaded into the context: {:.1} ms",
                src.name,
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        let mut map = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(key).or_insert(module).clone())
    }

    /// Loads every module of `wanted` that this `Gpu` has not loaded yet, finding or compiling
    /// their CUBINs and loading them on a pool of threads (one per core, or `SEGSPARSE_COMPILE_THREADS`; at most
    /// one per module): what a call
    /// that is about to use several modules (an AMG setup, a solver's first iteration) does
    /// first, so that a first run on a machine without the embedded kernels compiles them in
    /// parallel instead of one after another.
    ///
    /// # Errors
    /// The first failure to compile or load, after every compile has finished.
    pub fn prepare(&self, wanted: &[(&KernelSource, &[(&str, String)])]) -> Result<()> {
        for &(src, defines) in wanted {
            self.wait_pending(&module_map_key(src, defines));
        }
        self.prepare_marked(wanted)
    }

    /// [`Gpu::prepare`] without waiting for background loads: the background thread's own
    /// body, which unmarks each module of its list as soon as it is loaded.
    fn prepare_marked(&self, wanted: &[(&KernelSource, &[(&str, String)])]) -> Result<()> {
        let mut todo: Vec<PrepareJob<'_>> = Vec::new();
        for &(src, defines) in wanted {
            let key = module_map_key(src, defines);
            if self.loaded(&key).is_none() && !todo.iter().any(|t| t.2 == key) {
                todo.push((src, defines, key));
            }
        }
        if todo.len() <= 1 {
            return todo.into_iter().try_for_each(|(src, d, key)| {
                let r = self
                    .cubin(src, d)
                    .and_then(|c| self.load_cubin(src, key.clone(), c).map(drop));
                self.unpend(&[key]);
                r
            });
        }
        let workers = compile_threads().min(todo.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done: Vec<Mutex<Option<Result<()>>>> = todo.iter().map(|_| Mutex::new(None)).collect();
        // Each worker also loads the modules it found: a first run in a process inflates the
        // embedded CUBINs and loads them into the context on all the threads at once instead of
        // loading them one after another at the end (the first AMG setup of a process pays this).
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((src, defines, key)) = todo.get(i) else {
                        break;
                    };
                    let r = self
                        .cubin(src, defines)
                        .and_then(|c| self.load_cubin(src, key.clone(), c).map(drop));
                    self.unpend(std::slice::from_ref(key));
                    *done[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                });
            }
        });
        let mut first_err = None;
        for ((src, _, _), cell) in todo.into_iter().zip(done) {
            let r = cell.into_inner().unwrap_or_else(|p| p.into_inner());
            let r = r.unwrap_or_else(|| {
                Err(Error::Compile {
                    kernel: src.name.to_string(),
                    log: "a compile thread stopped before finishing".into(),
                })
            });
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The CUBIN of `src` for this device: from the embedded archive when it holds this
    /// module for this architecture and the driver can load it (see [`super::prebuilt`]), else
    /// from the on-disk cache when a valid entry exists, else compiled by NVRTC and stored
    /// there (see [`super::disk_cache`]). `SEGSPARSE_KERNEL_LOG=1` prints where each module
    /// came from and how long that took.
    fn cubin(&self, src: &KernelSource, defines: &[(&str, String)]) -> Result<Vec<u8>> {
        let t0 = std::time::Instant::now();
        let (cubin, origin) = self.find_cubin(src, defines)?;
        if kernel_log() {
            eprintln!(
                "segsparse: module {} ({} defines) for {}: {origin}, {:.1} ms, {} bytes",
                src.name,
                defines.len(),
                self.arch(),
                t0.elapsed().as_secs_f64() * 1e3,
                cubin.len()
            );
        }
        Ok(cubin)
    }

    fn find_cubin(
        &self,
        src: &KernelSource,
        defines: &[(&str, String)],
    ) -> Result<(Vec<u8>, &'static str)> {
        let text = kernels::preprocess(src)?;
        let arch = self.arch();
        let options = nvrtc_options(src, &arch, defines)?;
        if let Some(a) = super::prebuilt::embedded() {
            if super::prebuilt::loadable(a.nvrtc(), self.driver_version) {
                // A CUBIN runs on every device of its major version with an equal or higher
                // minor one, so the archive's sm_X0 module serves an sm_X6 or sm_X9 device that
                // has none of its own (same source and defines: the key says so).
                for arch in super::prebuilt::archive_archs(self.cc) {
                    let options = nvrtc_options(src, &arch, defines)?;
                    let key = super::disk_cache::module_key(src.name, &text, &arch, &options);
                    if let Some(cubin) = a.get(&key) {
                        return Ok((cubin, "embedded"));
                    }
                }
            }
        }
        super::nvrtc::library()?; // the reason when no usable NVRTC is found
        let Some(dir) = super::disk_cache::cache_dir() else {
            return Ok((
                cubin_of(src.name, &text, &options)?,
                "compiled (no disk cache)",
            ));
        };
        let key = super::disk_cache::CacheKey::new(
            src.name,
            &text,
            &arch,
            &options,
            self.nvrtc_version(),
            &self.driver_version.to_string(),
        );
        if let Some(cubin) = super::disk_cache::load(&dir, &key) {
            return Ok((cubin, "disk cache"));
        }
        let cubin = cubin_of(src.name, &text, &options)?;
        // A cache that cannot be written costs the next process a compile, nothing else.
        let _ = super::disk_cache::store(&dir, &key, &cubin);
        Ok((cubin, "compiled"))
    }

    /// The entry point `name` of `src` compiled with `defines`.
    pub fn function(
        &self,
        src: &KernelSource,
        name: &str,
        defines: &[(&str, String)],
    ) -> Result<CudaFunction> {
        self.module(src, defines)?
            .load_function(name)
            .map_err(|e| Error::cuda(format!("kernel {name} in {}", src.name), e))
    }

    /// A type-suffixed entry point: `typed_function::<f64>(src, "scan_incl", ..)` loads
    /// `scan_incl_f64`.
    pub fn typed_function<T: KernelType>(
        &self,
        src: &KernelSource,
        root: &str,
        defines: &[(&str, String)],
    ) -> Result<CudaFunction> {
        self.function(src, &super::kernel_name::<T>(root), defines)
    }

    /// Allocates `n` zeroed elements on the device.
    ///
    /// # Errors
    /// [`Error::Cuda`] naming the element count, type and bytes, and the device's free memory,
    /// when the device is out of memory.
    #[track_caller]
    pub fn zeros<T: KernelType + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>> {
        self.precheck::<T>(n)?;
        let clock = self.log_start();
        let out = self
            .stream()
            .alloc_zeros::<T>(n)
            .map_err(|e| self.alloc_error::<T>(n, e));
        self.log(WaitKind::Alloc, clock, 0);
        out
    }

    /// The start of a call the wait log records (`None` when it is off).
    fn log_start(&self) -> Option<std::time::Instant> {
        self.waits.as_ref().map(|_| std::time::Instant::now())
    }

    /// Records a call that began at `clock` in the wait log, under its caller's place.
    #[track_caller]
    fn log(&self, kind: WaitKind, clock: Option<std::time::Instant>, bytes: usize) {
        if let (Some(w), Some(c)) = (&self.waits, clock) {
            w.record(std::panic::Location::caller(), kind, c, bytes);
        }
    }

    /// The wait log's sites since the last call, cleared (empty unless `SEGSPARSE_WAIT_LOG=1`;
    /// see [`super::wait_log`]).
    pub fn take_wait_log(&self) -> Vec<super::wait_log::WaitSite> {
        self.waits.as_ref().map_or_else(Vec::new, |w| w.take())
    }

    /// Whether the wait log records (`SEGSPARSE_WAIT_LOG=1`).
    pub fn wait_log_on(&self) -> bool {
        self.waits.is_some()
    }

    /// Prints the wait log's sites since the last call to standard error under `label` and
    /// clears them; nothing when the log is off.
    pub fn print_wait_log(&self, label: &str) {
        if self.waits.is_some() {
            eprint!("{}", super::wait_log::format(label, &self.take_wait_log()));
        }
    }

    /// The memory preflight of one buffer of `n` elements (see [`check_memory`](Gpu::check_memory)).
    ///
    /// The driver's figure is read once and spent down: a buffer that fits into what is left
    /// of the usable bytes at the last query passes without a query (buffers freed since only
    /// add to the real figure); one that does not fit reads the figure again and is checked
    /// against it. A setup that allocates dozens of buffers so pays one query, not one each.
    #[track_caller]
    fn precheck<T: KernelType>(&self, n: usize) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let bytes = crate::memory::bytes_of::<T>(n);
        if bytes < crate::memory::UNCHECKED_BYTES {
            return Ok(());
        }
        let spent = self
            .alloc_budget
            .fetch_update(Relaxed, Relaxed, |b| b.checked_sub(bytes));
        if spent.is_ok() {
            return Ok(());
        }
        let clock = self.log_start();
        let avail = self.available_memory();
        self.log(WaitKind::MemoryQuery, clock, 0);
        let avail = avail?;
        crate::memory::check_fits(
            &format!("a device buffer of {n} {} elements", T::KERNEL_SUFFIX),
            bytes,
            avail,
            &format!("device memory on {}", self.name),
        )?;
        self.alloc_budget
            .store(crate::memory::usable(avail).saturating_sub(bytes), Relaxed);
        Ok(())
    }

    /// Allocates `n` elements without initialising them.
    ///
    /// # Safety
    /// The contents are undefined until written; reading them before is undefined behaviour.
    ///
    /// # Errors
    /// As [`zeros`](Gpu::zeros).
    #[track_caller]
    pub unsafe fn alloc<T: KernelType>(&self, n: usize) -> Result<CudaSlice<T>> {
        self.precheck::<T>(n)?;
        let clock = self.log_start();
        let out = self
            .stream()
            .alloc::<T>(n)
            .map_err(|e| self.alloc_error::<T>(n, e));
        self.log(WaitKind::Alloc, clock, 0);
        out
    }

    fn alloc_error<T: KernelType>(&self, n: usize, e: cudarc::driver::DriverError) -> Error {
        let free = match cudarc::driver::result::mem_get_info() {
            Ok((free, total)) => format!("; {free} of {total} bytes free on {}", self.name),
            Err(_) => String::new(),
        };
        Error::cuda(
            format!(
                "allocating {n} {} elements ({} bytes) on the device{free}",
                T::KERNEL_SUFFIX,
                n.saturating_mul(std::mem::size_of::<T>())
            ),
            e,
        )
    }

    /// Copies a host slice to a new device buffer. Allocates first, so that running out of
    /// device memory is reported as such, with the bytes requested.
    #[track_caller]
    pub fn upload<T: KernelType>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        // SAFETY: every element is written by the copy below before the buffer is returned.
        let mut dev = unsafe { self.alloc::<T>(host.len()) }?;
        self.note_transfer(true, std::mem::size_of_val(host));
        let clock = self.log_start();
        let copied = self.stream().memcpy_htod(host, &mut dev);
        self.log(WaitKind::Upload, clock, std::mem::size_of_val(host));
        copied.map_err(|e| {
            Error::cuda(
                format!(
                    "copying {} {} elements ({} bytes) to the device",
                    host.len(),
                    T::KERNEL_SUFFIX,
                    std::mem::size_of_val(host)
                ),
                e,
            )
        })?;
        Ok(dev)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`). Freed buffers stay in this
    /// process's memory pool (see `keep_freed_memory_pooled`), so "free" does not grow back when
    /// buffers are dropped; [`pool_used_bytes`](Gpu::pool_used_bytes) counts what is live.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        cudarc::driver::result::mem_get_info().map_err(|e| Error::cuda("cuMemGetInfo", e))
    }

    /// Device memory this process can still allocate, in bytes: `cuMemGetInfo`'s free bytes
    /// plus what the default memory pool holds reserved but unused (freed buffers stay there,
    /// see [`memory_info`](Gpu::memory_info)), capped by `SEGSPARSE_MAX_DEVICE_BYTES`.
    pub fn available_memory(&self) -> Result<u64> {
        let (free, _) = self.memory_info()?;
        let pooled = self.pool_attribute(
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        )?;
        let used = self.pool_used_bytes()?;
        let avail = (free as u64).saturating_add(pooled.saturating_sub(used));
        Ok(crate::memory::cap(Some(avail), "SEGSPARSE_MAX_DEVICE_BYTES").unwrap_or(avail))
    }

    /// The memory preflight on the device ([`crate::memory`]): `Ok` when `bytes` for `what` fit
    /// into [`available_memory`](Gpu::available_memory) with the margin. Requests below
    /// [`crate::memory::UNCHECKED_BYTES`] are not checked (no driver query).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming `what`, both figures and the device; a CUDA error when the
    /// figures cannot be read.
    pub fn check_memory(&self, what: &str, bytes: u64) -> Result<()> {
        if bytes < crate::memory::UNCHECKED_BYTES {
            return Ok(());
        }
        let avail = self.available_memory()?;
        crate::memory::check_fits(
            what,
            bytes,
            avail,
            &format!("device memory on {}", self.name),
        )
    }

    /// Bytes of device memory currently allocated from the device's default memory pool (all of
    /// this crate's buffers): live buffers only, so a leak shows as growth across a workload.
    pub fn pool_used_bytes(&self) -> Result<u64> {
        self.pool_attribute(
            cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        )
    }

    /// Bytes the device's default memory pool holds, `(reserved now, used now, reserved at
    /// most, used at most)` since the process began: the live buffers, the freed memory kept for
    /// reuse (see [`memory_info`](Gpu::memory_info)) and their high-water marks.
    pub fn pool_bytes(&self) -> Result<(u64, u64, u64, u64)> {
        use cudarc::driver::sys::CUmemPool_attribute as A;
        Ok((
            self.pool_attribute(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            self.pool_attribute(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            self.pool_attribute(A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)?,
            self.pool_attribute(A::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        ))
    }

    /// A `cuuint64_t` attribute of the device's default memory pool.
    fn pool_attribute(&self, attr: cudarc::driver::sys::CUmemPool_attribute) -> Result<u64> {
        use cudarc::driver::sys;
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let mut used: u64 = 0;
        // SAFETY: plain driver queries on this context's device with valid out-pointers; the
        // attributes read here (USED_MEM_CURRENT, RESERVED_MEM_CURRENT) are cuuint64_t.
        unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device())
                .result()
                .map_err(|e| Error::cuda("cuDeviceGetDefaultMemPool", e))?;
            sys::cuMemPoolGetAttribute(pool, attr, &mut used as *mut u64 as *mut std::ffi::c_void)
                .result()
                .map_err(|e| Error::cuda(format!("cuMemPoolGetAttribute({attr:?})"), e))?;
        }
        Ok(used)
    }

    /// Copies a host slice into an existing device buffer of the same length.
    #[track_caller]
    pub fn upload_into<T: KernelType>(
        &self,
        host: &[T],
        dst: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        self.note_transfer(true, std::mem::size_of_val(host));
        let clock = self.log_start();
        let out = self
            .stream()
            .memcpy_htod(host, dst)
            .map_err(|e| Error::cuda("copying to the device", e));
        self.log(WaitKind::Upload, clock, std::mem::size_of_val(host));
        out
    }

    /// Copies a device buffer (or view) to a new host vector; synchronises the stream.
    #[track_caller]
    pub fn download<T: KernelType>(&self, dev: &impl DevicePtr<T>) -> Result<Vec<T>> {
        self.note_transfer(false, dev.num_bytes());
        let clock = self.log_start();
        let out = self
            .stream()
            .clone_dtoh(dev)
            .map_err(|e| Error::cuda("copying to the host", e));
        self.log(WaitKind::Download, clock, dev.num_bytes());
        out
    }

    /// Waits for all work queued on the stream; reports errors of earlier kernels.
    #[track_caller]
    pub fn synchronize(&self) -> Result<()> {
        let clock = self.log_start();
        let out = self
            .stream()
            .synchronize()
            .map_err(|e| Error::cuda("stream synchronize", e));
        self.log(WaitKind::Synchronize, clock, 0);
        out
    }

    /// Maps a launch failure to an error that names the kernel.
    pub fn launch_error(kernel: &str, e: cudarc::driver::DriverError) -> Error {
        Error::cuda(format!("launching kernel {kernel}"), e)
    }

    /// A launch configuration of `blocks` blocks of `threads` threads and `smem` bytes of
    /// dynamic shared memory.
    pub fn cfg(blocks: u32, threads: u32, smem: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        }
    }

    /// Device-to-device copy bandwidth in bytes per second (bytes read plus bytes written),
    /// measured with CUDA events over `bytes`-sized buffers: the ceiling that memory-bound
    /// kernels are compared with. Takes the median of `reps` copies after a warm-up.
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64> {
        let n = bytes / 4;
        let src = self.zeros::<u32>(n)?;
        let mut dst = self.zeros::<u32>(n)?;
        let mut times = Vec::with_capacity(reps);
        for i in 0..reps + 2 {
            let t = self.time(|| {
                self.stream()
                    .memcpy_dtod(&src, &mut dst)
                    .map_err(|e| Error::cuda("memcpy_dtod", e))
            })?;
            if i >= 2 {
                times.push(t);
            }
        }
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        Ok(2.0 * (n * 4) as f64 / med)
    }

    /// Runs `f` (which queues work on this stream) between two CUDA events and returns the
    /// elapsed seconds, after waiting for the end event.
    #[track_caller]
    pub fn time(&self, f: impl FnOnce() -> Result<()>) -> Result<f64> {
        let t = self.time_queued(f)?;
        let clock = self.log_start();
        let waited = t.end.synchronize();
        self.log(WaitKind::Event, clock, 0);
        waited.map_err(|e| Error::cuda("event synchronize", e))?;
        t.seconds()
    }

    /// Runs `f` (which queues work on this stream) between two CUDA events and returns them
    /// without waiting: [`QueuedTime::seconds`] waits for the end event when the figure is
    /// wanted, so timing queued work costs no synchronisation until then.
    pub fn time_queued(&self, f: impl FnOnce() -> Result<()>) -> Result<QueuedTime> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .stream
            .record_event(flags)
            .map_err(|e| Error::cuda("recording an event", e))?;
        f()?;
        let end = self
            .stream
            .record_event(flags)
            .map_err(|e| Error::cuda("recording an event", e))?;
        Ok(QueuedTime { start, end })
    }
}

/// Two CUDA events around queued work ([`Gpu::time_queued`]).
pub struct QueuedTime {
    start: cudarc::driver::CudaEvent,
    end: cudarc::driver::CudaEvent,
}

impl std::fmt::Debug for QueuedTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueuedTime")
    }
}

impl QueuedTime {
    /// The device seconds between the two events; waits for the end event.
    ///
    /// # Errors
    /// A failed wait (an error of the timed work) or event query.
    pub fn seconds(&self) -> Result<f64> {
        self.end
            .synchronize()
            .map_err(|e| Error::cuda("event synchronize", e))?;
        let ms = event_elapsed_ms(self.start.cu_event(), self.end.cu_event())?;
        Ok(ms as f64 * 1e-3)
    }
}

/// Keeps freed device memory in the device's default pool (release threshold "never").
///
/// cudarc allocates with `cuMemAllocAsync` from that pool. With the default threshold of 0 the
/// pool returns its memory to the driver at every synchronisation, so the next call that
/// allocates an output (a compaction, a convenience scan) pays for mapping fresh pages: measured
/// on the H200, compact 2^26 f32 took 585 µs instead of 196 µs. CUB's callers keep a caching
/// allocator for the same reason. Failure here only costs speed, so errors are ignored.
fn keep_freed_memory_pooled(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: plain driver calls on this context's device, made after the context was bound to
    // this thread by its creation; `pool` and `threshold` outlive the calls.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut std::ffi::c_void,
            );
        }
    }
}

/// Tuning only: `SEGSPARSE_L2_FETCH_BYTES` sets the context's maximum L2 fetch granularity
/// (`CU_LIMIT_MAX_L2_FETCH_GRANULARITY`, 0–128 bytes: how much an L2 miss may fetch beyond the
/// requested 32-byte sector) and `SEGSPARSE_L2_PERSIST_MB` the L2 set aside for persisting
/// accesses (`CU_LIMIT_PERSISTING_L2_CACHE_SIZE`). Both are process-wide settings, so the crate
/// leaves them alone unless asked; a value the driver refuses is ignored (a measurement knob).
fn l2_limits_from_env(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    if ctx.bind_to_thread().is_err() {
        return;
    }
    // SAFETY: plain driver calls on the context just bound to this thread.
    unsafe {
        if let Some(b) = env("SEGSPARSE_L2_FETCH_BYTES") {
            let _ = sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_MAX_L2_FETCH_GRANULARITY, b);
        }
        if let Some(mb) = env("SEGSPARSE_L2_PERSIST_MB") {
            let _ = sys::cuCtxSetLimit(
                sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                mb.saturating_mul(1 << 20),
            );
        }
    }
}

/// `cuEventElapsedTime` under the name the driver exports: cudarc's CUDA 13 bindings call
/// `cuEventElapsedTime_v2`, which drivers before 12.8 lack (cudarc would panic on the missing
/// symbol), so the symbol is looked up here, the new name first, then the old one (same
/// signature and meaning).
fn event_elapsed_ms(
    start: cudarc::driver::sys::CUevent,
    end: cudarc::driver::sys::CUevent,
) -> Result<f32> {
    type F = unsafe extern "C" fn(
        *mut f32,
        cudarc::driver::sys::CUevent,
        cudarc::driver::sys::CUevent,
    ) -> cudarc::driver::sys::CUresult;
    static FN: OnceLock<Option<F>> = OnceLock::new();
    let f = FN.get_or_init(|| {
        // SAFETY: the driver library is loaded (a Gpu exists); both names have the signature F.
        let lib = unsafe { cudarc::driver::sys::culib() };
        [
            &b"cuEventElapsedTime_v2\0"[..],
            &b"cuEventElapsedTime\0"[..],
        ]
        .iter()
        // SAFETY: as above.
        .find_map(|name| unsafe { lib.get::<F>(*name) }.ok().map(|s| *s))
    });
    let f = f.ok_or_else(|| {
        Error::cuda(
            "event elapsed time",
            "the driver exports no cuEventElapsedTime",
        )
    })?;
    let mut ms = 0f32;
    // SAFETY: both events were recorded on this context's stream and synchronised; valid
    // out-pointer.
    unsafe { f(&mut ms, start, end) }
        .result()
        .map_err(|e| Error::cuda("event elapsed time", e))?;
    Ok(ms)
}
