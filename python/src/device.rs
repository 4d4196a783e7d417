//! The process's GPU, and device memory that belongs to someone else (CuPy).
//!
//! # Zero-copy device arrays
//!
//! A CuPy array (or anything with `__cuda_array_interface__`) arrives as a device pointer and a
//! length. [`Borrowed`] wraps it in a cudarc `CudaSlice` so the crate's GPU functions take it
//! as they take their own buffers, and *leaks* the slice when dropped, so the memory is never
//! freed by us: CuPy owns it. Both sides use the device's primary context (CuPy through the
//! runtime API, cudarc through `cuDevicePrimaryCtxRetain`), so the pointers are valid here.
//!
//! # Ordering with the caller's stream (no host synchronisation)
//!
//! The crate queues everything on its own non-blocking stream. A call that touches caller
//! memory is ordered with the caller's stream(s) by events, both ways ([`Device::enter`] and
//! [`Device::leave`]):
//!
//! 1. on entry, an event is recorded on each stream the caller named (the CUDA array interface's
//!    `stream` of every input, and CuPy's current stream) and our stream waits for it, so our
//!    kernels see everything the caller queued before the call;
//! 2. on exit, an event is recorded on our stream and the caller's current stream waits for it,
//!    so whatever the caller queues next (reading the result, freeing an input, reusing the
//!    memory pool) runs after our kernels.
//!
//! The host never waits; a call returns as soon as its work is queued, exactly as a CuPy
//! operation does. (Calls that must read a device value on the host, a solver's convergence
//! check, synchronise our stream as they always do.)

use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result, sys, CudaEvent, CudaSlice};
use segsparse::gpu::Gpu;
use segsparse::Error;

/// The GPU of this process and the two events that bridge streams.
pub struct Device {
    /// The crate's GPU handle (its stream orders all our work).
    pub gpu: Arc<Gpu>,
    /// (entry event, exit event), locked so that a record and its wait are not interleaved
    /// with another thread's.
    events: Mutex<(CudaEvent, CudaEvent)>,
}

static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();

/// The GPU, opened on first use; `Err` with the reason when none works (no driver, no device).
pub fn device() -> Result<&'static Device, Error> {
    DEVICE
        .get_or_init(|| {
            let gpu = Gpu::shared().map_err(|e| match e {
                // The crate's Display adds "no usable CUDA device: " at each level it is
                // re-wrapped; keep the reason once.
                Error::CudaUnavailable(m) => {
                    let p = "no usable CUDA device: ";
                    let mut s = m.as_str();
                    while let Some(rest) = s.strip_prefix(p) {
                        s = rest;
                    }
                    s.to_string()
                }
                other => other.to_string(),
            })?;
            let ev = || {
                gpu.context()
                    .new_event(None)
                    .map_err(|e| format!("creating a CUDA event: {e}"))
            };
            let events = Mutex::new((ev()?, ev()?));
            Ok(Device { gpu, events })
        })
        .as_ref()
        .map_err(|e| Error::CudaUnavailable(e.clone()))
}

fn cuda(ctx: &str, e: cudarc::driver::DriverError) -> Error {
    Error::cuda(ctx, e)
}

impl Device {
    /// Makes our stream wait for the work queued so far on each stream in `streams` (raw
    /// `CUstream` values: 0 the legacy default stream, 1 and 2 the legacy and per-thread
    /// default streams of the CUDA array interface).
    pub fn enter(&self, streams: &[u64]) -> Result<(), Error> {
        let ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for &s in streams {
            self.gpu
                .context()
                .bind_to_thread()
                .map_err(|e| cuda("binding the context", e))?;
            // SAFETY: `s` is a stream handle of this context given by the caller (CuPy's
            // current stream or an array's interface stream), or one of the special handles;
            // the event belongs to this context.
            unsafe { result::event::record(ev.0.cu_event(), s as sys::CUstream) }
                .map_err(|e| cuda("recording an event on the caller's stream", e))?;
            self.gpu
                .stream()
                .wait(&ev.0)
                .map_err(|e| cuda("waiting for the caller's stream", e))?;
        }
        Ok(())
    }

    /// Makes the caller's `stream` wait for everything queued so far on our stream.
    pub fn leave(&self, stream: u64) -> Result<(), Error> {
        let ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        ev.1.record(self.gpu.stream())
            .map_err(|e| cuda("recording an event on segsparse's stream", e))?;
        // SAFETY: as in `enter`: a stream handle of this context and an event of this context.
        unsafe {
            result::stream::wait_event(
                stream as sys::CUstream,
                ev.1.cu_event(),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| cuda("ordering the caller's stream after segsparse's", e))
    }
}

/// Device memory owned by the caller, seen as a `CudaSlice` for the length of a call. Dropping
/// it leaks the slice (the memory stays the caller's).
pub struct Borrowed<T>(Option<CudaSlice<T>>);

impl<T> Borrowed<T> {
    /// Wraps `len` elements at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must address at least `len` elements of `T` in this device's primary context,
    /// kept alive by the caller until the work queued with it has run (the Python layer holds a
    /// reference to the array during the call, and [`Device::leave`] orders any later free on
    /// the caller's stream after our work).
    pub unsafe fn new(dev: &Device, ptr: u64, len: usize) -> Self {
        Borrowed(Some(dev.gpu.stream().upgrade_device_ptr::<T>(ptr, len)))
    }
}

/// The caller's device vectors `b` and `x` (their addresses) and the place of a call among the
/// caller's streams: after the streams in `wait`, before later work on `signal`.
#[derive(Clone, Copy)]
pub struct DevicePair<'a> {
    pub b: u64,
    pub x: u64,
    pub wait: &'a [u64],
    pub signal: u64,
}

/// `f` on the caller's device vectors of `d`: `b` with `n` elements and `x` with `m`, ordered
/// after the streams in `d.wait` and before later work on `d.signal`.
///
/// # Safety
/// As [`Borrowed::new`] for both arrays: the Python layer checked that they are contiguous
/// device arrays of `T` with `n` and `m` elements, and holds them during the call.
pub unsafe fn with_borrowed<T, R>(
    d: DevicePair<'_>,
    n: usize,
    m: usize,
    f: impl FnOnce(&Borrowed<T>, &mut Borrowed<T>) -> R,
) -> Result<R, Error> {
    let dev = device()?;
    dev.enter(d.wait)?;
    // SAFETY: the caller's contract.
    let b = unsafe { Borrowed::<T>::new(dev, d.b, n) };
    let mut x = unsafe { Borrowed::<T>::new(dev, d.x, m) };
    let r = f(&b, &mut x);
    dev.leave(d.signal)?;
    Ok(r)
}

/// Several device vectors owned by the caller (the columns of a block, `len` elements each),
/// seen as `CudaSlice`s for the length of a call. Dropping it leaks the slices, as [`Borrowed`].
pub struct BorrowedColumns<T>(Vec<CudaSlice<T>>);

impl<T> BorrowedColumns<T> {
    /// Wraps `len` elements at each device address of `ptrs`.
    ///
    /// # Safety
    /// As [`Borrowed::new`], for every address.
    pub unsafe fn new(dev: &Device, ptrs: &[u64], len: usize) -> Self {
        let s = dev.gpu.stream();
        let mut cols = Vec::with_capacity(ptrs.len());
        for &p in ptrs {
            cols.push(s.upgrade_device_ptr::<T>(p, len));
        }
        BorrowedColumns(cols)
    }
}

impl<T> std::ops::Deref for BorrowedColumns<T> {
    type Target = [CudaSlice<T>];
    fn deref(&self) -> &[CudaSlice<T>] {
        &self.0
    }
}

impl<T> std::ops::DerefMut for BorrowedColumns<T> {
    fn deref_mut(&mut self) -> &mut [CudaSlice<T>] {
        &mut self.0
    }
}

impl<T> Drop for BorrowedColumns<T> {
    fn drop(&mut self) {
        for s in self.0.drain(..) {
            // Not ours to free.
            let _ = s.leak();
        }
    }
}

impl<T> std::ops::Deref for Borrowed<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        self.0.as_ref().expect("present until drop")
    }
}

impl<T> std::ops::DerefMut for Borrowed<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        self.0.as_mut().expect("present until drop")
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            // Not ours to free.
            let _ = s.leak();
        }
    }
}

/// Bytes copied host → device and device → host through this process's GPU so far, `(to the
/// device, to the host)` (`(0, 0)` without a GPU): tests read it around an operation to show
/// that it moves no copy of a device matrix over the bus.
#[pyo3::pyfunction]
pub fn transfer_bytes() -> (u64, u64) {
    device().map_or((0, 0), |d| d.gpu.transfer_bytes())
}

/// The device memory pool's bytes, `(reserved, used, reserved at most, used at most)` (zeros
/// without a GPU): for measurements and leak checks.
#[pyo3::pyfunction]
pub fn pool_bytes() -> (u64, u64, u64, u64) {
    device()
        .ok()
        .and_then(|d| d.gpu.pool_bytes().ok())
        .unwrap_or((0, 0, 0, 0))
}
