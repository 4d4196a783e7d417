//! The device-wide scans that the issue-7 primitives are built on, called through the scan
//! family of [`crate::primitives::gpu`] (branch `scan`). One adaptor so that every primitive
//! names the scan it needs (u32 counts, plus) in the same words.

#[cfg(feature = "cuda")]
use crate::error::Result;
use crate::gpu::kernels::kernel_source;
#[cfg(feature = "cuda")]
use crate::gpu::{DeviceBuffer, Gpu};
#[cfg(feature = "cuda")]
use crate::primitives::Direction;

#[cfg(feature = "cuda")]
fn spec(dir: Direction, inclusive: bool) -> crate::primitives::ScanSpec {
    use crate::primitives::{ScanKind, ScanOp, ScanSpec};
    let kind = if inclusive {
        ScanKind::Inclusive
    } else {
        ScanKind::Exclusive
    };
    ScanSpec::new(ScanOp::Plus, kind, dir)
}

/// `out = scan(x)` of u32 with plus, exclusive or inclusive, in direction `dir` (the default,
/// single-pass look-back algorithm).
#[cfg(feature = "cuda")]
pub(crate) fn scan_u32(
    g: &Gpu,
    x: &DeviceBuffer<u32>,
    dir: Direction,
    inclusive: bool,
) -> Result<DeviceBuffer<u32>> {
    // SAFETY: the scan writes all x.len() outputs.
    let mut out = unsafe { g.alloc::<u32>(x.len().max(1))? };
    if !x.is_empty() {
        let mut o = out.slice_mut(..x.len());
        crate::primitives::gpu::scan(g, x, &mut o, spec(dir, inclusive), Default::default())?;
    }
    Ok(out)
}

/// [`scan_u32`] into `out` with a caller-kept scan workspace (radix sort scans its count table
/// once per pass).
#[cfg(feature = "cuda")]
pub(crate) fn scan_u32_with(
    g: &Gpu,
    x: &DeviceBuffer<u32>,
    out: &mut DeviceBuffer<u32>,
    inclusive: bool,
    ws: &mut DeviceBuffer<u8>,
) -> Result<()> {
    crate::primitives::gpu::scan_with(
        g,
        x,
        out,
        spec(Direction::Forward, inclusive),
        Default::default(),
        ws,
    )
}

/// `out = segmented_scan(x, heads)` of u32 with plus over packed head flags.
#[cfg(feature = "cuda")]
pub(crate) fn segmented_scan_u32(
    g: &Gpu,
    x: &DeviceBuffer<u32>,
    heads: &crate::primitives::gpu::HeadFlags,
    dir: Direction,
    inclusive: bool,
) -> Result<DeviceBuffer<u32>> {
    // SAFETY: the scan writes all x.len() outputs.
    let mut out = unsafe { g.alloc::<u32>(x.len().max(1))? };
    if !x.is_empty() {
        let xv = x.slice(..heads.len());
        let mut o = out.slice_mut(..heads.len());
        crate::primitives::gpu::segmented_scan(
            g,
            &xv,
            heads,
            &mut o,
            spec(dir, inclusive),
            Default::default(),
        )?;
    }
    Ok(out)
}

/// The first `n` flags of packed words (inverse of [`pack_flags`](crate::primitives::pack_flags)).
///
/// # Panics
/// When `words` holds fewer than `n` bits.
pub fn unpack_flags(words: &[u32], n: usize) -> Vec<bool> {
    assert!(
        words.len() * 32 >= n,
        "unpack_flags: {} words hold fewer than {n} flags",
        words.len()
    );
    (0..n)
        .map(|i| (words[i / 32] >> (i % 32)) & 1 == 1)
        .collect()
}

#[cfg(feature = "cuda")]
/// "b32" or "b64": kernels that only move elements are instantiated per width.
pub(crate) fn width<T>() -> &'static str {
    match std::mem::size_of::<T>() {
        4 => "b32",
        8 => "b64",
        s => panic!("elements of {s} bytes are not supported (4 or 8)"),
    }
}

/// Panics unless the two inputs of the primitive `what` have one length: `"{what}: {n} {a} but
/// {m} {b}"` names both.
pub(crate) fn check_same_len(what: &str, (n, a): (usize, &str), (m, b): (usize, &str)) {
    assert_eq!(n, m, "{what}: {n} {a} but {m} {b}");
}

#[cfg(feature = "cuda")]
/// `n` as the u32 the kernels index with, or an error naming the primitive.
pub(crate) fn len_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        crate::error::Error::InvalidInput(format!(
            "{what}: {n} elements exceed the GPU index type (u32)"
        ))
    })
}

#[cfg(feature = "cuda")]
/// `n` as the u32 the kernels index with, for the segmented primitive `what` over `n` values
/// with `heads` head flags.
///
/// # Panics
/// When `heads` ≠ `n`.
pub(crate) fn segmented_len(what: &str, n: usize, heads: usize) -> Result<u32> {
    check_same_len(what, (n, "values"), (heads, "head flags"));
    len_u32(n, what)
}

#[cfg(feature = "cuda")]
/// Panics unless `words` holds at least `n` flags.
pub(crate) fn check_words(what: &str, words: usize, n: usize) {
    assert!(
        words >= n.div_ceil(32),
        "{what}: {words} flag words hold fewer than {n} flags (need {})",
        n.div_ceil(32)
    );
}

/// The grid-stride kernels of enumerate, distribute, split-and-segment, quicksort and segmented
/// sort (`kernels/device/segment_ops.cu`).
pub const SEGMENT_OPS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/segment_ops.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::primitives::sources::BLOCK_RADIX_RANK
    ]
);

#[cfg(feature = "cuda")]
/// The launch error of `kernel`.
pub(crate) fn launch_err(
    kernel: &str,
) -> impl FnOnce(cudarc::driver::DriverError) -> crate::Error + '_ {
    move |e| Gpu::launch_error(kernel, e)
}

#[cfg(feature = "cuda")]
/// Grid size for the grid-stride kernels of `segment_ops.cu`.
pub(crate) fn stride_grid(g: &Gpu, n: usize) -> u32 {
    (n.div_ceil(256) as u32).clamp(1, g.sm_count() * 8)
}

#[cfg(feature = "cuda")]
/// Launches one of the grid-stride kernels of `segment_ops.cu` over `n` elements:
/// `grid_stride!(g, "entry", n, arg, arg, ...)`, the arguments in the kernel's order.
macro_rules! grid_stride {
    ($g:expr, $entry:expr, $n:expr, $($arg:expr),* $(,)?) => {{
        use cudarc::driver::PushKernelArg as _;
        let entry: &str = $entry;
        let f = $g.function(&crate::primitives::glue::SEGMENT_OPS, entry, &[])?;
        let mut b = $g.stream().launch_builder(&f);
        $( b.arg($arg); )*
        // SAFETY: every call site passes the arguments of `entry` in the order of its signature
        // in kernels/device/segment_ops.cu, with buffers of at least the n elements it visits.
        unsafe { b.launch(crate::gpu::Gpu::cfg(crate::primitives::glue::stride_grid($g, $n), 256, 0)) }
            .map_err(crate::primitives::glue::launch_err(entry))?;
    }};
}
#[cfg(feature = "cuda")]
pub(crate) use grid_stride;

#[cfg(feature = "cuda")]
/// `n` ones on the device.
pub(crate) fn ones(g: &Gpu, n: usize) -> Result<DeviceBuffer<u32>> {
    let n32 = len_u32(n, "ones")?;
    // SAFETY: fill_u32 writes all n entries.
    let mut o = unsafe { g.alloc::<u32>(n.max(1))? };
    grid_stride!(g, "fill_u32", n, &mut o, &n32, &1u32);
    Ok(o)
}
