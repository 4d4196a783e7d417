//! CSR arrays from host memory to the device at the speed of the copy: one copy through pinned
//! staging, the index width and value type converted and every invariant of
//! [`CsrMatrix::try_from_parts`](crate::CsrMatrix::try_from_parts) checked on the device.
//!
//! [`upload_csr`] takes the caller's arrays as they are (`int32`, `uint32` or `int64` indices,
//! `f32` or `f64` values, SciPy's and NumPy's types), copies each once into device memory
//! through a [`Staging`] pair of pinned buffers (the host copies chunk `k + 1` into one buffer
//! while the DMA engine reads chunk `k` from the other), and runs one small kernel per array
//! (`kernels/sparse/csr_check.cu`) that converts it to the crate's `u32` indices (in place for
//! 32-bit input) and records the first offending position of each kind of error. No host loop
//! touches the entries. A bad matrix gets the same message as
//! [`CsrMatrix::try_from_parts`](crate::CsrMatrix::try_from_parts) gives (the host reads the
//! few offending values from its own arrays), in the same order of checks: indices outside
//! the 32-bit range (`indptr` first), `row_ptr[0]`, a decreasing `row_ptr`, `row_ptr[nrows]`,
//! a column out of range. As there, column order inside a row, duplicates and non-finite
//! values are accepted (the kernels are correct either way; a solver reports a NaN as such).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, DevicePtrMut, PinnedHostSlice, PushKernelArg};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, KernelType};

/// `kernels/sparse/csr_check.cu`: the checking and converting kernels.
pub const CSR_CHECK_SRC: KernelSource =
    kernel_source!("sparse/csr_check.cu", &[&crate::gpu::kernels::COMMON]);

/// Index arrays as the caller holds them.
#[derive(Clone, Copy, Debug)]
pub enum HostIndices<'a> {
    /// `int32` (SciPy's usual index type).
    I32(&'a [i32]),
    /// `uint32`.
    U32(&'a [u32]),
    /// `int64` (SciPy's type for large matrices).
    I64(&'a [i64]),
}

impl HostIndices<'_> {
    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            HostIndices::I32(s) => s.len(),
            HostIndices::U32(s) => s.len(),
            HostIndices::I64(s) => s.len(),
        }
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element `i` widened to `i64`.
    pub fn get(&self, i: usize) -> i64 {
        match self {
            HostIndices::I32(s) => s[i] as i64,
            HostIndices::U32(s) => s[i] as i64,
            HostIndices::I64(s) => s[i],
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            HostIndices::I32(s) => as_bytes(s),
            HostIndices::U32(s) => as_bytes(s),
            HostIndices::I64(s) => as_bytes(s),
        }
    }
    fn suffix(&self) -> &'static str {
        match self {
            HostIndices::I32(_) => "i32",
            HostIndices::U32(_) => "u32",
            HostIndices::I64(_) => "i64",
        }
    }
}

/// Value arrays as the caller holds them.
#[derive(Clone, Copy, Debug)]
pub enum HostValues<'a> {
    /// `float32`.
    F32(&'a [f32]),
    /// `float64`.
    F64(&'a [f64]),
}

impl HostValues<'_> {
    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            HostValues::F32(s) => s.len(),
            HostValues::F64(s) => s.len(),
        }
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn as_bytes<T: Copy>(s: &[T]) -> &[u8] {
    // SAFETY: plain integer and float types without padding; the length is in bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// Where the seconds of an [`upload_csr`] went.
#[derive(Clone, Copy, Debug, Default)]
pub struct UploadTimes {
    /// Allocating the pinned staging buffers (0 when a kept [`Staging`] was reused).
    pub staging: f64,
    /// Copying the three arrays to the device (host copies into pinned memory overlapped with
    /// the DMA), until the last byte arrived.
    pub copy: f64,
    /// The checking and converting kernels and reading their verdict.
    pub check: f64,
}

/// Default size of each of the two pinned staging buffers.
pub const STAGING_CHUNK: usize = 16 << 20;

/// Two pinned host buffers for copies to the device: the host fills one while the DMA engine
/// reads the other. Allocating pinned memory costs milliseconds, so a `Staging` may be kept and
/// reused across uploads.
pub struct Staging {
    bufs: [PinnedHostSlice<u8>; 2],
    done: [CudaEvent; 2],
    used: [bool; 2],
    chunk: usize,
}

impl Staging {
    /// Two pinned buffers of `chunk` bytes each.
    ///
    /// # Errors
    /// A CUDA error when pinned memory cannot be allocated.
    pub fn new(gpu: &Arc<Gpu>, chunk: usize) -> Result<Self> {
        let chunk = chunk.max(1 << 16);
        let ctx = gpu.context();
        let alloc = || {
            // SAFETY: the buffer is only read after the host wrote the bytes it copies.
            unsafe { ctx.alloc_pinned::<u8>(chunk) }
                .map_err(|e| Error::cuda(format!("allocating {chunk} bytes of pinned memory"), e))
        };
        let event = || {
            ctx.new_event(None)
                .map_err(|e| Error::cuda("creating a staging event", e))
        };
        Ok(Staging {
            bufs: [alloc()?, alloc()?],
            done: [event()?, event()?],
            used: [false; 2],
            chunk,
        })
    }

    /// Bytes of pinned memory held.
    pub fn bytes(&self) -> usize {
        2 * self.chunk
    }

    /// Copies `src` to device memory starting at `dst` (at least `src.len()` bytes), chunk by
    /// chunk, queued on `gpu`'s stream. Returns when the last chunk is queued.
    fn copy(&mut self, gpu: &Gpu, src: &[u8], dst: u64) -> Result<()> {
        let stream = gpu.stream();
        let mut off = 0usize;
        for (i, part) in src.chunks(self.chunk).enumerate() {
            let k = i % 2;
            if self.used[k] {
                self.done[k]
                    .synchronize()
                    .map_err(|e| Error::cuda("waiting for a staging copy", e))?;
            }
            let buf = self.bufs[k]
                .as_mut_slice()
                .map_err(|e| Error::cuda("mapping the staging buffer", e))?;
            let buf = &mut buf[..part.len()];
            gpu.note_transfer(true, part.len());
            const PIECE: usize = 1 << 20;
            buf.par_chunks_mut(PIECE)
                .zip(part.par_chunks(PIECE))
                .for_each(|(d, s)| d.copy_from_slice(s));
            // SAFETY: `dst + off .. + part.len()` lies inside the destination allocation (the
            // caller's contract); `buf` is pinned and is not written again before `done[k]`
            // has completed.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    dst + off as u64,
                    &*buf,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| Error::cuda(format!("copying {} bytes to the device", part.len()), e))?;
            self.done[k]
                .record(stream)
                .map_err(|e| Error::cuda("recording a staging event", e))?;
            self.used[k] = true;
            off += part.len();
        }
        Ok(())
    }
}

/// The device arrays of a validated CSR matrix: `row_ptr` (`nrows + 1`), `col` and `val`
/// (`max(nnz, 1)` elements: a matrix without entries holds one dummy), as
/// [`GpuCsr::from_device_parts`](crate::spmv::gpu::GpuCsr::from_device_parts) takes them.
pub struct DeviceCsrParts<T: cudarc::driver::DeviceRepr> {
    /// Row pointers.
    pub row_ptr: CudaSlice<u32>,
    /// Column indices.
    pub col: CudaSlice<u32>,
    /// Values.
    pub val: CudaSlice<T>,
}

/// A raw device buffer of `bytes` bytes, as `u32` words (at least one).
fn raw_words(gpu: &Gpu, bytes: usize) -> Result<CudaSlice<u32>> {
    // SAFETY: every word read later is first written by a staging copy.
    unsafe { gpu.alloc::<u32>(bytes.div_ceil(4).max(1)) }
}

/// Below this many bytes in all, the arrays are copied straight from pageable memory (the
/// driver stages them itself): pinned staging pays off for large matrices only.
pub const DIRECT_BYTES: usize = 8 << 20;

fn copy_into<T: KernelType>(
    gpu: &Gpu,
    staging: Option<&mut Staging>,
    src: &[u8],
    dst: &mut CudaSlice<T>,
) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    let stream = gpu.stream().clone();
    let (ptr, _sync) = dst.device_ptr_mut(&stream);
    match staging {
        Some(s) => s.copy(gpu, src, ptr),
        None => {
            gpu.note_transfer(true, src.len());
            // SAFETY: `dst` holds at least `src.len()` bytes (allocated for them by the caller).
            unsafe { cudarc::driver::result::memcpy_htod_async(ptr, src, stream.cu_stream()) }
                .map_err(|e| Error::cuda(format!("copying {} bytes to the device", src.len()), e))
        }
    }
}

/// Bytes [`upload_csr`] copies for these arrays (to decide whether pinned staging pays off:
/// see [`DIRECT_BYTES`]).
pub fn upload_bytes(
    row_ptr: &HostIndices<'_>,
    col_idx: &HostIndices<'_>,
    values: &HostValues<'_>,
) -> usize {
    let v = match values {
        HostValues::F32(s) => 4 * s.len(),
        HostValues::F64(s) => 8 * s.len(),
    };
    row_ptr.bytes().len() + col_idx.bytes().len() + v
}

/// Copies a CSR matrix's arrays to the device, converts them to `u32` indices and `T` values
/// there and checks every invariant of `CsrMatrix::try_from_parts` (see the module docs).
/// `staging`: the pinned buffers to copy through (`None`: straight from pageable memory, for
/// small matrices).
///
/// # Errors
/// [`Error::InvalidStructure`] with `try_from_parts`'s message for a malformed matrix;
/// [`Error::InvalidInput`] for an index outside the 32-bit range (naming the array and the
/// value) or sizes beyond it; CUDA errors (out of memory, a failed compile).
pub fn upload_csr<T: KernelType + cudarc::driver::ValidAsZeroBits>(
    gpu: &Arc<Gpu>,
    mut staging: Option<&mut Staging>,
    (nrows, ncols): (usize, usize),
    row_ptr: HostIndices<'_>,
    col_idx: HostIndices<'_>,
    values: HostValues<'_>,
) -> Result<(DeviceCsrParts<T>, UploadTimes)> {
    let bad = |m: String| Err(Error::InvalidStructure(m));
    for (what, v) in [("nrows", nrows), ("ncols", ncols)] {
        if v > u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "{what} = {v} exceeds the 32-bit index limit ({})",
                u32::MAX
            )));
        }
    }
    if row_ptr.len() != nrows + 1 {
        return bad(format!(
            "row_ptr has length {} but nrows + 1 = {}",
            row_ptr.len(),
            nrows + 1
        ));
    }
    let nnz = values.len();
    if col_idx.len() != nnz {
        return bad(format!(
            "col_idx has length {} but values has length {nnz}",
            col_idx.len()
        ));
    }
    if nnz > u32::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "nnz = {nnz} exceeds the 32-bit index limit ({})",
            u32::MAX
        )));
    }
    let want_f64 = T::KERNEL_SUFFIX == "f64";
    gpu.check_memory(
        &format!("the upload of a {nrows}×{ncols} matrix with {nnz} nonzeros"),
        (4 * (nrows as u64 + 1))
            .saturating_add(8 * nnz as u64)
            .saturating_add((std::mem::size_of::<T>() * nnz) as u64)
            .saturating_add(8 * (nrows as u64 + 1 + nnz as u64)),
    )?;

    // --- one copy of each array, in the caller's types --------------------------------------
    let t0 = Instant::now();
    let mut rp_raw = raw_words(gpu, row_ptr.bytes().len())?;
    copy_into(gpu, staging.as_deref_mut(), row_ptr.bytes(), &mut rp_raw)?;
    let mut ci_raw = raw_words(gpu, col_idx.bytes().len())?;
    copy_into(gpu, staging.as_deref_mut(), col_idx.bytes(), &mut ci_raw)?;
    let same_type = matches!(
        (&values, want_f64),
        (HostValues::F64(_), true) | (HostValues::F32(_), false)
    );
    let vbytes = match values {
        HostValues::F32(s) => as_bytes(s),
        HostValues::F64(s) => as_bytes(s),
    };
    // SAFETY: written by the copy (same type) or by the conversion kernel below.
    let mut val = unsafe { gpu.alloc::<T>(nnz.max(1)) }?;
    let mut val_raw = None;
    if same_type {
        copy_into(gpu, staging.as_deref_mut(), vbytes, &mut val)?;
    } else {
        let mut raw = raw_words(gpu, vbytes.len())?;
        copy_into(gpu, staging, vbytes, &mut raw)?;
        val_raw = Some(raw);
    }
    gpu.synchronize()?;
    let copy = t0.elapsed().as_secs_f64();

    // --- checks and conversions ------------------------------------------------------------
    let t1 = Instant::now();
    let mut err = gpu.upload(&[u64::MAX; 4])?;
    let blocks = |n: usize| (n.div_ceil(256) as u32).clamp(1, gpu.sm_count() * 8);
    let f = |name: String| gpu.function(&CSR_CHECK_SRC, &name, &[]);
    let n1 = (nrows + 1) as u64;
    let rp_out = if let HostIndices::I64(_) = row_ptr {
        // SAFETY: every element is written by the kernel.
        Some(unsafe { gpu.alloc::<u32>(nrows + 1) }?)
    } else {
        None
    };
    {
        let k = f(format!("csr_rowptr_{}", row_ptr.suffix()))?;
        let target = rp_out.as_ref().unwrap_or(&rp_raw);
        let mut b = gpu.stream().launch_builder(&k);
        b.arg(&rp_raw).arg(&n1).arg(target).arg(&mut err);
        // SAFETY: csr_rowptr_<I>(const I* in, u64 n1, u32* out, u64* err): `in` holds n1
        // elements of I (copied above), `out` n1 u32 (the input itself for 32-bit I: each
        // element is rewritten with its own bits), err 4 u64.
        unsafe { b.launch(Gpu::cfg(blocks(nrows + 1), 256, 0)) }
            .map_err(|e| Gpu::launch_error("csr_rowptr", e))?;
    }
    let ci_out = if let HostIndices::I64(_) = col_idx {
        // SAFETY: every element is written by the kernel.
        Some(unsafe { gpu.alloc::<u32>(nnz.max(1)) }?)
    } else {
        None
    };
    if nnz > 0 {
        let k = f(format!("csr_cols_{}", col_idx.suffix()))?;
        let (nnz64, ncols32) = (nnz as u64, ncols as u32);
        let target = ci_out.as_ref().unwrap_or(&ci_raw);
        let mut b = gpu.stream().launch_builder(&k);
        b.arg(&ci_raw)
            .arg(&nnz64)
            .arg(&ncols32)
            .arg(target)
            .arg(&mut err);
        // SAFETY: csr_cols_<I>(const I* in, u64 nnz, u32 ncols, u32* out, u64* err): `in`
        // holds nnz elements of I, `out` nnz u32 (the input itself for 32-bit I), err 4 u64.
        unsafe { b.launch(Gpu::cfg(blocks(nnz), 256, 0)) }
            .map_err(|e| Gpu::launch_error("csr_cols", e))?;
    }
    if let Some(raw) = val_raw.as_ref() {
        if nnz > 0 {
            let name = if want_f64 {
                "csr_values_f32_to_f64"
            } else {
                "csr_values_f64_to_f32"
            };
            let k = f(name.to_string())?;
            let n = nnz as u64;
            let mut b = gpu.stream().launch_builder(&k);
            b.arg(raw).arg(&n).arg(&mut val);
            // SAFETY: (const S* in, u64 n, T* out): `in` holds n values of the other float
            // type, `out` n values of T.
            unsafe { b.launch(Gpu::cfg(blocks(nnz), 256, 0)) }
                .map_err(|e| Gpu::launch_error(name, e))?;
        }
    }
    let verdict = gpu.download(&err)?;
    let check = t1.elapsed().as_secs_f64();

    // --- the first error, in try_from_parts's order, read from the host arrays ------------
    let first = |slot: usize| (verdict[slot] != u64::MAX).then_some(verdict[slot] as usize);
    let range = |what: &str, v: i64| {
        Err(Error::InvalidInput(format!(
            "{what}: index {v} is outside the 32-bit unsigned range of segsparse"
        )))
    };
    if let Some(i) = first(0) {
        return range("indptr", row_ptr.get(i));
    }
    if let Some(k) = first(1) {
        return range("indices", col_idx.get(k));
    }
    if row_ptr.get(0) != 0 {
        return bad(format!("row_ptr[0] = {} (must be 0)", row_ptr.get(0)));
    }
    if let Some(i) = first(2) {
        return bad(format!(
            "row_ptr decreases at row {i}: row_ptr[{i}] = {} > row_ptr[{}] = {}",
            row_ptr.get(i),
            i + 1,
            row_ptr.get(i + 1)
        ));
    }
    if row_ptr.get(nrows) as usize != nnz {
        return bad(format!(
            "row_ptr[{nrows}] = {} but there are {nnz} entries",
            row_ptr.get(nrows)
        ));
    }
    if let Some(k) = first(3) {
        // The row holding entry k: the last row start <= k (row_ptr is valid here).
        let (mut lo, mut hi) = (0usize, nrows + 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if row_ptr.get(mid) as usize <= k {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return bad(format!(
            "column index {} at entry {k} (row {}) is out of range for {ncols} columns",
            col_idx.get(k),
            lo - 1
        ));
    }
    let parts = DeviceCsrParts {
        row_ptr: rp_out.unwrap_or(rp_raw),
        col: ci_out.unwrap_or(ci_raw),
        val,
    };
    Ok((
        parts,
        UploadTimes {
            staging: 0.0,
            copy,
            check,
        },
    ))
}
