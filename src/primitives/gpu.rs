//! GPU scans and segmented scans: the same calls as [`cpu`](super::cpu) on device buffers.
//!
//! Every function takes a [`Gpu`], a device input (a `CudaSlice` or any view of one), a device
//! output of the same length, a [`ScanSpec`] (operator, inclusive/exclusive, direction) and a
//! [`ScanAlgorithm`]. Work is queued on the `Gpu`'s stream and not waited for: download the
//! output (or call `g.synchronize()`) to see it and to see errors of the kernels themselves.
//!
//! # Algorithms
//!
//! * [`ScanAlgorithm::DecoupledLookback`] (default): one kernel, one read and one write per
//!   element. Tiles of `threads × items` elements ([`policy::lookback`])
//!   take ids from an atomic counter, publish their aggregate in a status word, and look back over
//!   windows of 32 predecessors for the first published inclusive prefix (Merrill and Garland
//!   2016). Segmented: the status carries a (flag, value) pair and a tile that contains a head
//!   publishes its inclusive prefix at once, since nothing before it can reach past that head.
//! * [`ScanAlgorithm::WarpShuffle`]: the same tile code with the warp-level formulation of
//!   Sengupta, Harris and Garland (2008) joined by reduce-then-scan (three kernels; reads the input
//!   twice).
//! * [`ScanAlgorithm::WorkEfficient`]: Sengupta et al. (2007), Algorithms 1–5, 256 elements per
//!   block in shared memory, block sums scanned by a second level and added back (three kernels).
//!
//! # Direction, flags, in place
//!
//! Backward scans read the tiles from the end (logical element `j` is physical `n-1-j`); there is
//! no reversal pass. Head flags are packed one bit per element ([`HeadFlags`]), built once (from
//! bools or CSR-style offsets) and reused; a backward segmented scan reads the flag of the
//! *next* element (the paper's "shift right by one", §2.2.2) while loading, so the same
//! `HeadFlags` serve both directions. The input and the output must be distinct buffers (Rust's
//! borrows already enforce it); no in-place variant is offered.
//!
//! # Workspace
//!
//! The `*_with` variants take a workspace of at least [`scratch_len`]`(n)` bytes, **zero-filled
//! when allocated** ([`workspace`] does it) and then reused as is: the look-back's status words
//! carry a generation number that the kernel itself advances, so no reset pass runs between
//! calls, and a hot loop allocates nothing. One workspace serves every element type, operator,
//! algorithm and `m ≤ n`. The variants without `_with` allocate one per call.
//!
//! # Determinism
//!
//! Integer results are exact (wrapping). Floating-point sums depend on the algorithm and the
//! policy (tile shape) through reassociation, but not on scheduling: a given algorithm and policy
//! gives bitwise identical results run to run.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};

use super::policy::{self, Policy};
use super::sources::{
    SCAN_LOOKBACK, SCAN_MULTIPASS, SEGSCAN_FLAGS, SEGSCAN_LOOKBACK, SEGSCAN_MULTIPASS,
};
use super::{check_offsets, pack_flags, Direction, ScanAlgorithm, ScanElem, ScanKind, ScanSpec};
use crate::gpu::{kernels::KernelSource, Gpu, KernelType};
use crate::{Error, Result};

/// Head flags on the device, one bit per element: bit `i % 32` of word `i / 32` is set when a
/// segment starts at element `i`. Build once, reuse for every scan over the same segments (both
/// directions).
#[derive(Debug)]
pub struct HeadFlags {
    words: CudaSlice<u32>,
    n: usize,
}

impl HeadFlags {
    /// Packs per-element flags on the host and uploads them.
    pub fn from_flags(g: &Gpu, flags: &[bool]) -> Result<Self> {
        let words = pack_flags(flags);
        Ok(HeadFlags {
            words: upload_words(g, &words)?,
            n: flags.len(),
        })
    }

    /// From CSR-style offsets on the host (`offsets[0] = 0`, non-decreasing, last = `n`;
    /// repeated offsets are empty segments).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for malformed offsets (naming the index); CUDA errors.
    pub fn from_offsets(g: &Gpu, offsets: &[u32], n: usize) -> Result<Self> {
        check_offsets(offsets, n)?;
        let mut words = vec![0u32; n.div_ceil(32)];
        for &o in offsets {
            if (o as usize) < n {
                words[o as usize / 32] |= 1 << (o % 32);
            }
        }
        Ok(HeadFlags {
            words: upload_words(g, &words)?,
            n,
        })
    }

    /// From CSR-style offsets already on the device (one kernel; nothing is copied to the host).
    /// The offsets are not validated: an offset `≥ n` is ignored, and offsets that do not start
    /// at 0 or decrease give the segments their set bits describe.
    pub fn from_device_offsets(g: &Gpu, offsets: &impl DevicePtr<u32>, n: usize) -> Result<Self> {
        let mut words = g.zeros::<u32>(n.div_ceil(32).max(1))?;
        {
            let (wp, _gw) = words.device_ptr_mut(g.stream());
            launch_flags_from_offsets(g, offsets, n, wp)?;
        }
        Ok(HeadFlags { words, n })
    }

    /// Wraps packed words already on the device.
    ///
    /// # Panics
    /// When `words` has fewer than `n.div_ceil(32)` words.
    pub fn from_words(words: CudaSlice<u32>, n: usize) -> Self {
        assert!(
            words.len() >= n.div_ceil(32),
            "HeadFlags::from_words: {n} elements need {} words but {} were given",
            n.div_ceil(32),
            words.len()
        );
        HeadFlags { words, n }
    }

    /// Number of elements the flags cover.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether the flags cover no element.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// The packed words.
    pub fn words(&self) -> &CudaSlice<u32> {
        &self.words
    }
    /// Downloads and unpacks the flags (for tests).
    pub fn to_host(&self, g: &Gpu) -> Result<Vec<bool>> {
        let w = g.download(&self.words)?;
        Ok((0..self.n)
            .map(|i| w[i / 32] >> (i % 32) & 1 == 1)
            .collect())
    }
}

fn upload_words(g: &Gpu, words: &[u32]) -> Result<CudaSlice<u32>> {
    if words.is_empty() {
        g.zeros::<u32>(1)
    } else {
        g.upload(words)
    }
}

fn launch_flags_from_offsets(
    g: &Gpu,
    offsets: &impl DevicePtr<u32>,
    n: usize,
    words_ptr: u64,
) -> Result<()> {
    let count = offsets.len();
    if count == 0 || n == 0 {
        return Ok(());
    }
    let count32 = u32::try_from(count)
        .map_err(|_| Error::InvalidInput(format!("{count} segment offsets exceed u32")))?;
    let f = g.function(&SEGSCAN_FLAGS, "segscan_flags_from_offsets", &[])?;
    let (op, _go) = offsets.device_ptr(g.stream());
    let n64 = n as i64;
    let blocks = count.div_ceil(256).min(8192) as u32;
    let mut b = g.stream().launch_builder(&f);
    b.arg(&op).arg(&count32).arg(&words_ptr).arg(&n64);
    // SAFETY: segscan_flags_from_offsets(const u32* offsets, u32 count, u32* words,
    // long long n): offsets has `count` elements, words has ceil(n/32) words (it only sets bits
    // of offsets < n).
    unsafe { b.launch(Gpu::cfg(blocks, 256, 0)) }
        .map_err(|e| Gpu::launch_error("segscan_flags_from_offsets", e))?;
    Ok(())
}

/// Byte offsets of the workspace regions for `n` elements.
#[derive(Clone, Copy, Debug)]
struct Layout {
    status: usize,
    agg: usize,
    incl: usize,
    spine_f: usize,
    spine_v: usize,
    first: usize,
    flags: usize,
    total: usize,
}

const ALIGN: usize = 256;

fn layout(n: usize) -> Layout {
    let up = |x: usize| x.div_ceil(ALIGN) * ALIGN;
    let cap = n.div_ceil(policy::MIN_TILE) + 1;
    let spine_cap = n.div_ceil(policy::WORK_EFFICIENT.tile().min(policy::MIN_TILE)) + 1;
    let status = ALIGN; // header: generation and tile counter
    let agg = status + up(cap * 8);
    let incl = agg + up(cap * 8);
    let spine_f = incl + up(cap * 8);
    let spine_v = spine_f + up(spine_cap * 4);
    let first = spine_v + up(spine_cap * 8);
    let flags = first + up(spine_cap * 4);
    let total = flags + up(n.div_ceil(32) * 4);
    Layout {
        status,
        agg,
        incl,
        spine_f,
        spine_v,
        first,
        flags,
        total,
    }
}

/// Bytes of workspace the `*_with` functions need for `n` elements: any element type,
/// operator, algorithm, plain or segmented, flags or offsets. About `0.23·n` bytes.
pub fn scratch_len(n: usize) -> usize {
    layout(n).total
}

/// A zero-filled workspace for scans of up to `n` elements.
pub fn workspace(g: &Gpu, n: usize) -> Result<CudaSlice<u8>> {
    let bytes = scratch_len(n);
    g.stream()
        .alloc_zeros::<u8>(bytes)
        .map_err(|e| Error::cuda(format!("allocating a {bytes}-byte scan workspace"), e))
}

/// The `-D` defines of the scan sources (look-back and multi-pass) for a device of `class` under
/// this process's policy (what the embedded kernel archive compiles them with,
/// [`crate::kernel_registry::variants`]).
pub fn scan_defines(class: policy::DeviceClass) -> Vec<(&'static str, String)> {
    defines(class).to_vec()
}

/// The device class of `g` for the tuning tables ([`policy::DeviceClass::of_device`]).
pub fn device_class(g: &Gpu) -> policy::DeviceClass {
    policy::DeviceClass::of_device(g.name())
}

fn defines(class: policy::DeviceClass) -> &'static [(&'static str, String)] {
    type Table = Vec<Vec<(&'static str, String)>>;
    static D: OnceLock<Table> = OnceLock::new();
    &D.get_or_init(|| {
        policy::DeviceClass::ALL
            .iter()
            .map(|&c| {
                let mut d = policy::lookback_defines(c);
                d.push(("SPINE_THREADS", policy::SPINE.threads.to_string()));
                d.push(("SPINE_ITEMS", policy::SPINE.items.to_string()));
                d.push(("WE_THREADS", policy::WORK_EFFICIENT.threads.to_string()));
                d
            })
            .collect()
    })[class.index()]
}

/// (context address, source name, entry root, operator, type suffix). The cached function
/// holds its module and context alive, so the address cannot be reused by another context.
type FnKey = (
    usize,
    &'static str,
    &'static str,
    super::ScanOp,
    &'static str,
);

/// Loaded entry points, so a scan call costs a lock and a hash of a small key on the host
/// instead of building names and define strings (a 2^20 scan takes ~8 µs on the GPU; the host
/// side must stay well below that for back-to-back calls to keep the GPU busy).
fn entry(
    g: &Gpu,
    src: &'static KernelSource,
    root: &'static str,
    op: super::ScanOp,
    suffix: &'static str,
) -> Result<CudaFunction> {
    static CACHE: OnceLock<Mutex<HashMap<FnKey, CudaFunction>>> = OnceLock::new();
    let key = (
        std::sync::Arc::as_ptr(g.context()) as usize,
        src.name,
        root,
        op,
        suffix,
    );
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(f) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(f.clone());
    }
    let f = g.function(
        src,
        &format!("{root}_{}_{suffix}", op.name()),
        defines(device_class(g)),
    )?;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, f.clone());
    Ok(f)
}

/// Registers per thread and resident blocks per SM of the look-back kernel for `T` (plain or
/// segmented, plus), compiled with the current policy: for benchmark reports.
pub fn lookback_occupancy<T: ScanElem + KernelType>(
    g: &Gpu,
    segmented: bool,
) -> Result<(i32, u32)> {
    let (src, prefix) = if segmented {
        (&SEGSCAN_LOOKBACK, "segscan")
    } else {
        (&SCAN_LOOKBACK, "scan")
    };
    let name = format!("{prefix}_lookback_plus_{}", T::SUFFIX);
    let f = g.function(src, &name, defines(device_class(g)))?;
    let regs = f
        .num_regs()
        .map_err(|e| Error::cuda(format!("reading the registers of {name}"), e))?;
    let threads = policy::lookback(std::mem::size_of::<T>(), device_class(g)).threads;
    let blocks = f
        .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
        .map_err(|e| Error::cuda(format!("occupancy of {name}"), e))?;
    Ok((regs, blocks))
}

fn check_ws(ws: &CudaSlice<u8>, n: usize) {
    let need = scratch_len(n);
    assert!(
        ws.len() >= need,
        "scan workspace has {} bytes but {n} elements need scratch_len = {need}",
        ws.len()
    );
}

fn tiles_u32(n: usize, tile: usize) -> Result<u32> {
    u32::try_from(n.div_ceil(tile)).map_err(|_| {
        Error::InvalidInput(format!(
            "{n} elements are too many for one scan ({tile} per tile)"
        ))
    })
}

/// The core dispatcher: raw device addresses, `flags` = 0 for a plain scan.
#[allow(clippy::too_many_arguments)]
fn dispatch<T: ScanElem + KernelType>(
    g: &Gpu,
    inp: u64,
    flags: u64,
    out: u64,
    n: usize,
    spec: ScanSpec,
    alg: ScanAlgorithm,
    ws: u64,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let seg = flags != 0;
    let l = layout(n);
    let bwd = i32::from(spec.direction == Direction::Backward);
    let excl = i32::from(spec.kind == ScanKind::Exclusive);
    let n64 = n as i64;
    let prefix = if seg { "segscan" } else { "scan" };
    // Names are built only for error messages.
    let name = |root: &str| format!("{prefix}_{root}_{}_{}", spec.op.name(), T::SUFFIX);
    let func =
        |src: &'static KernelSource, root: &'static str| entry(g, src, root, spec.op, T::SUFFIX);
    let stream = g.stream();
    let class = device_class(g);
    let tile_policy: Policy = policy::lookback(std::mem::size_of::<T>(), class);
    let (header, status, agg, incl) = (
        ws,
        ws + l.status as u64,
        ws + l.agg as u64,
        ws + l.incl as u64,
    );
    let (spine_f, spine_v, first) = (
        ws + l.spine_f as u64,
        ws + l.spine_v as u64,
        ws + l.first as u64,
    );
    let multipass = if seg {
        &SEGSCAN_MULTIPASS
    } else {
        &SCAN_MULTIPASS
    };
    match alg {
        ScanAlgorithm::DecoupledLookback => {
            let tiles = tiles_u32(n, tile_policy.tile())?;
            // One block per tile, or per pair of tiles (policy::lookback_tiles).
            let blocks = tiles.div_ceil(policy::lookback_tiles(class));
            let f = if seg {
                func(&SEGSCAN_LOOKBACK, "segscan_lookback")?
            } else {
                func(&SCAN_LOOKBACK, "scan_lookback")?
            };
            let mut b = stream.launch_builder(&f);
            b.arg(&inp);
            if seg {
                b.arg(&flags);
            }
            b.arg(&out)
                .arg(&n64)
                .arg(&tiles)
                .arg(&bwd)
                .arg(&excl)
                .arg(&header)
                .arg(&status)
                .arg(&agg)
                .arg(&incl);
            // SAFETY: {seg}scan_lookback_{op}_{T}(const T* in, [const u32* flags,] T* out,
            // long long n, u32 num_tiles, int bwd, int excl, u32* header, u64* status, T* agg,
            // T* incl): in/out hold n elements, flags ceil(n/32) words, and the workspace
            // (checked ≥ scratch_len(n)) holds the header and `cap ≥ num_tiles` status, agg and
            // incl slots at the offsets of `layout(n)`; the kernel was compiled with the
            // SCAN_TILES of the same class, so its blocks cover the tiles.
            unsafe { b.launch(Gpu::cfg(blocks, tile_policy.threads, 0)) }
                .map_err(|e| Gpu::launch_error(&name("lookback"), e))?;
        }
        ScanAlgorithm::WarpShuffle => {
            let tiles = tiles_u32(n, tile_policy.tile())?;
            let f = func(
                multipass,
                if seg {
                    "segscan_ws_reduce"
                } else {
                    "scan_ws_reduce"
                },
            )?;
            let mut b = stream.launch_builder(&f);
            b.arg(&inp);
            if seg {
                b.arg(&flags);
            }
            b.arg(&n64).arg(&bwd).arg(&spine_f).arg(&spine_v);
            // SAFETY: {seg}scan_ws_reduce_{op}_{T}(const T* in, [const u32* flags,] long long n,
            // int bwd, u32* spine_f, T* spine_v): one spine slot per tile, spine_cap ≥ tiles.
            unsafe { b.launch(Gpu::cfg(tiles, tile_policy.threads, 0)) }
                .map_err(|e| Gpu::launch_error(&name("ws_reduce"), e))?;
            let spine = func(multipass, if seg { "segscan_spine" } else { "scan_spine" })?;
            launch_spine(g, &spine, spine_f, spine_v, tiles)?;
            let f = func(
                multipass,
                if seg {
                    "segscan_ws_scan"
                } else {
                    "scan_ws_scan"
                },
            )?;
            let mut b = stream.launch_builder(&f);
            b.arg(&inp);
            if seg {
                b.arg(&flags);
            }
            b.arg(&out).arg(&n64).arg(&bwd).arg(&excl).arg(&spine_v);
            // SAFETY: {seg}scan_ws_scan_{op}_{T}(const T* in, [const u32* flags,] T* out,
            // long long n, int bwd, int excl, const T* spine_v): spine_v holds `tiles` carries.
            unsafe { b.launch(Gpu::cfg(tiles, tile_policy.threads, 0)) }
                .map_err(|e| Gpu::launch_error(&name("ws_scan"), e))?;
        }
        ScanAlgorithm::WorkEfficient => {
            let p = policy::WORK_EFFICIENT;
            let blocks = tiles_u32(n, p.tile())?;
            let f = func(
                multipass,
                if seg {
                    "segscan_we_block"
                } else {
                    "scan_we_block"
                },
            )?;
            let mut b = stream.launch_builder(&f);
            b.arg(&inp);
            if seg {
                b.arg(&flags);
            }
            b.arg(&out)
                .arg(&n64)
                .arg(&bwd)
                .arg(&excl)
                .arg(&spine_f)
                .arg(&spine_v)
                .arg(&first);
            // SAFETY: {seg}scan_we_block_{op}_{T}(const T* in, [const u32* flags,] T* out,
            // long long n, int bwd, int excl, u32* spine_f, T* spine_v, u32* first_head): one
            // slot per block in each spine array, spine_cap ≥ blocks.
            unsafe { b.launch(Gpu::cfg(blocks, p.threads, 0)) }
                .map_err(|e| Gpu::launch_error(&name("we_block"), e))?;
            if blocks > 1 {
                let spine = func(multipass, if seg { "segscan_spine" } else { "scan_spine" })?;
                launch_spine(g, &spine, spine_f, spine_v, blocks)?;
                let f = func(&SCAN_MULTIPASS, "scan_we_fixup")?;
                let mut b = stream.launch_builder(&f);
                b.arg(&out).arg(&n64).arg(&bwd).arg(&spine_v).arg(&first);
                // SAFETY: scan_we_fixup_{op}_{T}(T* out, long long n, int bwd,
                // const T* spine_v, const u32* first_head): block b+1 of the grid reads slot b+1
                // < blocks.
                unsafe { b.launch(Gpu::cfg(blocks - 1, p.threads, 0)) }
                    .map_err(|e| Gpu::launch_error("scan_we_fixup", e))?;
            }
        }
    }
    Ok(())
}

fn launch_spine(g: &Gpu, f: &CudaFunction, spine_f: u64, spine_v: u64, m: u32) -> Result<()> {
    let m64 = m as i64;
    let mut b = g.stream().launch_builder(f);
    b.arg(&spine_f).arg(&spine_v).arg(&m64);
    // SAFETY: {seg}scan_spine_{op}_{T}(const u32* spine_f, T* spine_v, long long m): both
    // arrays hold m ≤ spine_cap slots; one block.
    unsafe { b.launch(Gpu::cfg(1, policy::SPINE.threads, 0)) }
        .map_err(|e| Gpu::launch_error("scan_spine", e))?;
    Ok(())
}

fn check_io(what: &str, n_in: usize, n_out: usize) {
    assert!(
        n_in == n_out,
        "{what}: input has {n_in} elements but output has {n_out}"
    );
}

/// Scan of `input` into `output` (same length) with a caller-provided workspace of at least
/// [`scratch_len`]`(n)` bytes, zero-filled when first allocated. Allocates nothing.
///
/// # Panics
/// When the lengths differ or the workspace is too small.
pub fn scan_with<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
    ws: &mut CudaSlice<u8>,
) -> Result<()> {
    let n = input.len();
    check_io("gpu::scan", n, output.len());
    check_ws(ws, n);
    let s = g.stream();
    let (ip, _gi) = input.device_ptr(s);
    let (op, _go) = output.device_ptr_mut(s);
    let (wp, _gw) = ws.device_ptr_mut(s);
    dispatch::<T>(g, ip, 0, op, n, spec, algorithm, wp)
}

/// Scan of `input` into `output`, allocating a workspace (see [`scan_with`]).
pub fn scan<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
) -> Result<()> {
    let mut ws = workspace(g, input.len())?;
    scan_with(g, input, output, spec, algorithm, &mut ws)
}

/// Segmented scan over packed head flags, with a caller-provided workspace (see
/// [`scan_with`]).
///
/// # Panics
/// When the lengths of input, flags and output differ or the workspace is too small.
pub fn segmented_scan_with<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    flags: &HeadFlags,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
    ws: &mut CudaSlice<u8>,
) -> Result<()> {
    let n = input.len();
    check_io("gpu::segmented_scan", n, output.len());
    assert!(
        flags.len() == n,
        "gpu::segmented_scan: input has {n} elements but the head flags cover {}",
        flags.len()
    );
    check_ws(ws, n);
    let s = g.stream();
    let (ip, _gi) = input.device_ptr(s);
    let (fp, _gf) = flags.words.device_ptr(s);
    let (op, _go) = output.device_ptr_mut(s);
    let (wp, _gw) = ws.device_ptr_mut(s);
    dispatch::<T>(g, ip, fp, op, n, spec, algorithm, wp)
}

/// Segmented scan over packed head flags, allocating a workspace.
pub fn segmented_scan<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    flags: &HeadFlags,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
) -> Result<()> {
    let mut ws = workspace(g, input.len())?;
    segmented_scan_with(g, input, flags, output, spec, algorithm, &mut ws)
}

/// Segmented scan over CSR-style offsets on the device (`m + 1` entries for `m` segments;
/// repeated offsets are empty segments), with a caller-provided workspace. Builds the packed
/// flags in the workspace (a memset and one small kernel), then scans; to scan the same segments
/// many times, build a [`HeadFlags`] once instead. The offsets are not validated (see
/// [`HeadFlags::from_device_offsets`]).
///
/// # Panics
/// When the lengths differ or the workspace is too small.
pub fn segmented_scan_offsets_with<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    offsets: &impl DevicePtr<u32>,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
    ws: &mut CudaSlice<u8>,
) -> Result<()> {
    let n = input.len();
    check_io("gpu::segmented_scan_offsets", n, output.len());
    check_ws(ws, n);
    if n == 0 {
        return Ok(());
    }
    let l = layout(n);
    let s = g.stream();
    {
        let mut region = ws.slice_mut(l.flags..l.flags + n.div_ceil(32) * 4);
        s.memset_zeros(&mut region)
            .map_err(|e| Error::cuda("clearing the head-flag workspace", e))?;
    }
    let (ip, _gi) = input.device_ptr(s);
    let (op, _go) = output.device_ptr_mut(s);
    let (wp, _gw) = ws.device_ptr_mut(s);
    let fp = wp + l.flags as u64;
    launch_flags_from_offsets(g, offsets, n, fp)?;
    dispatch::<T>(g, ip, fp, op, n, spec, algorithm, wp)
}

/// Segmented scan over CSR-style offsets on the device, allocating a workspace.
pub fn segmented_scan_offsets<T: ScanElem + KernelType>(
    g: &Gpu,
    input: &impl DevicePtr<T>,
    offsets: &impl DevicePtr<u32>,
    output: &mut impl DevicePtrMut<T>,
    spec: ScanSpec,
    algorithm: ScanAlgorithm,
) -> Result<()> {
    let mut ws = workspace(g, input.len())?;
    segmented_scan_offsets_with(g, input, offsets, output, spec, algorithm, &mut ws)
}
