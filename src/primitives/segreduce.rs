//! Segmented reduce: one result per segment, the reduction of its elements under plus, max or
//! min; an empty segment gives the operator's identity.
//!
//! It is the reduction behind the paper's SpMV row sums (Sengupta et al. 2007, §4.2: a backward
//! segmented scan whose head elements are kept), exposed on its own. Segments come either from
//! CSR-style offsets (`offsets[s]..offsets[s+1]`, any lengths, empty ones included) or from head
//! flags (element 0 always starts a segment, so there are no empty ones).
//!
//! The GPU version does not materialise the scan: each tile of elements reduces the segments
//! that end inside it, and a segment that crosses tiles is finished by a small fix-up kernel
//! (one warp per tile) from per-tile partials, so the values are read once. Inside a tile, short segments (an
//! average below [`gpu::GROUPS_MIN_AVG`] elements) go through a block-level segmented
//! reduction; longer ones are reduced by groups of 4–32 lanes per segment straight from global
//! memory, the longest by the whole block ([`gpu::tile_body`] picks the kernel).
//!
//! ```
//! use segsparse::primitives::segreduce::cpu;
//! use segsparse::primitives::ScanOp;
//! let v = [1, 2, 3, 4, 5];
//! assert_eq!(cpu::segmented_reduce_offsets(&v, &[0, 2, 2, 5], ScanOp::Plus), [3, 0, 12]);
//! let h = [true, false, true, false, false];
//! assert_eq!(cpu::segmented_reduce_heads(&v, &h, ScanOp::Max), [2, 5]);
//! ```

use crate::gpu::kernels::kernel_source;

/// Threads per block of the tile kernel (`SR_THREADS`).
pub(crate) const THREADS: u32 = 256;
/// Consecutive values per thread (`SR_ITEMS`; at most 32: a thread's head bits fit one word).
pub(crate) const ITEMS: u32 = 16;

/// Segmented reduce kernels (kernels/device/segreduce.cu).
pub const KERNELS: crate::gpu::kernels::KernelSource = kernel_source!(
    "device/segreduce.cu",
    &[&crate::gpu::kernels::COMMON],
    &[("SR_THREADS", THREADS as i64), ("SR_ITEMS", ITEMS as i64)]
);
/// CPU reference implementations (sequential, they define the semantics).
pub mod cpu {
    use crate::primitives::glue::check_same_len;
    use crate::primitives::{ScanElem, ScanOp};

    /// `out[s]` = the reduction of `values[offsets[s]..offsets[s+1]]` (identity when empty).
    ///
    /// # Panics
    /// When `offsets` is empty, decreasing, or its last entry is not `values.len()`.
    pub fn segmented_reduce_offsets<T: ScanElem>(
        values: &[T],
        offsets: &[u32],
        op: ScanOp,
    ) -> Vec<T> {
        super::check_offsets(values.len(), offsets);
        offsets
            .windows(2)
            .map(|w| {
                values[w[0] as usize..w[1] as usize]
                    .iter()
                    .fold(T::identity(op), |a, &b| T::combine(op, a, b))
            })
            .collect()
    }

    /// One result per segment given by head flags (`heads[0]` is treated as set): the number of
    /// results is the number of segments.
    ///
    /// # Panics
    /// When `values` and `heads` differ in length.
    pub fn segmented_reduce_heads<T: ScanElem>(values: &[T], heads: &[bool], op: ScanOp) -> Vec<T> {
        check_same_len(
            "segmented_reduce_heads",
            (values.len(), "values"),
            (heads.len(), "head flags"),
        );
        let mut out = Vec::new();
        for (i, (&v, &h)) in values.iter().zip(heads).enumerate() {
            if h || i == 0 {
                out.push(T::combine(op, T::identity(op), v));
            } else {
                let last = out.last_mut().expect("segment started");
                *last = T::combine(op, *last, v);
            }
        }
        out
    }
}

/// Panics unless `offsets` are valid CSR-style offsets over `n` elements.
pub(crate) fn check_offsets(n: usize, offsets: &[u32]) {
    assert!(
        !offsets.is_empty(),
        "segment offsets must have at least one entry (0)"
    );
    assert_eq!(offsets[0], 0, "segment offsets must start at 0");
    assert_eq!(
        *offsets.last().unwrap() as usize,
        n,
        "last segment offset {} but {} values",
        offsets.last().unwrap(),
        n
    );
    if let Some(i) = offsets.windows(2).position(|w| w[0] > w[1]) {
        panic!(
            "segment offsets decrease at {}: {} > {}",
            i,
            offsets[i],
            offsets[i + 1]
        );
    }
}

/// GPU implementations (see the module docs for the tile/fix-up structure).
#[cfg(feature = "cuda")]
pub mod gpu {
    use super::KERNELS;
    use crate::error::Result;
    use crate::gpu::{kernel_name, DeviceBuffer, Gpu, KernelType, PushKernelArg};
    use crate::primitives::glue::{self, grid_stride, launch_err, len_u32};
    use crate::primitives::{ScanElem, ScanOp};

    pub(crate) use super::{ITEMS, THREADS};
    const TILE: usize = (THREADS * ITEMS) as usize;

    /// Segments averaging at least this many elements take the group kernels.
    pub const GROUPS_MIN_AVG: usize = 16;

    /// The tile kernel for `n` values in `m` segments: the block segmented scan
    /// (`segreduce`) for short segments, where a lane per few elements would idle; groups of
    /// G lanes per segment (`segreduce_groupsG`) from an average of [`GROUPS_MIN_AVG`]
    /// elements, G ≈ a quarter of the average (4..=32) so each lane has about four loads in
    /// flight. Both kernels fill the same per-tile fix-up arrays. `SEGSPARSE_SEGREDUCE=scan`
    /// or `=groups` forces one body (read once per process; for comparisons).
    pub fn tile_body(n: usize, m: usize) -> &'static str {
        static FORCE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
        let force = *FORCE.get_or_init(|| match std::env::var("SEGSPARSE_SEGREDUCE").as_deref() {
            Ok("scan") => Some(false),
            Ok("groups") => Some(true),
            _ => None,
        });
        let avg = n / m.max(1);
        if !force.unwrap_or(avg >= GROUPS_MIN_AVG) {
            return "segreduce";
        }
        match avg / 4 {
            0..=7 => "segreduce_groups4",
            8..=15 => "segreduce_groups8",
            16..=31 => "segreduce_groups16",
            _ => "segreduce_groups32",
        }
    }

    /// Whether the group kernels read 4-byte values of aligned segments as 16-byte vectors
    /// (`SR_VEC`): off unless `SEGSPARSE_SEGREDUCE_VEC=1` (read once per process). Measured
    /// on an H100 (f32 plus, 2^26 values, same call): 1–2 % slower than scalar loads at every
    /// segment length (32: 144.1 vs 141.1 µs; 100: 152.8 vs 151.6; 1024: 132.3 vs 130.0) —
    /// the group kernel is bound by its memory latency, not its load instructions
    /// (benches/results/primitives.md).
    pub fn vector_loads() -> bool {
        static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *V.get_or_init(|| std::env::var("SEGSPARSE_SEGREDUCE_VEC").is_ok_and(|v| v == "1"))
    }

    fn defines() -> &'static [(&'static str, String)] {
        static D: std::sync::OnceLock<Vec<(&'static str, String)>> = std::sync::OnceLock::new();
        D.get_or_init(|| vec![("SR_VEC", u32::from(vector_loads()).to_string())])
    }

    fn op_name(op: ScanOp) -> &'static str {
        match op {
            ScanOp::Plus => "plus",
            ScanOp::Max => "max",
            ScanOp::Min => "min",
        }
    }

    /// `out[s]` = reduction of `values[offsets[s]..offsets[s+1]]` (identity when empty), for
    /// `offsets.len() - 1` segments. The offsets are not validated on the device (an invalid
    /// offset array gives unspecified results, never an out-of-bounds access beyond the
    /// ranges it names); validate on the host with the CPU reference's rules if unsure.
    ///
    /// # Panics
    /// When `offsets` is empty.
    pub fn segmented_reduce_offsets<T: ScanElem + KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        offsets: &DeviceBuffer<u32>,
        op: ScanOp,
    ) -> Result<DeviceBuffer<T>> {
        assert!(
            !offsets.is_empty(),
            "segment offsets must have at least one entry"
        );
        let n = values.len();
        let m = offsets.len() - 1;
        let n32 = len_u32(n, "segmented_reduce")?;
        let m32 = len_u32(m, "segmented_reduce")?;
        // SAFETY: every one of the m outputs is written (by its owning tile, the fix-up, or
        // the identity fill).
        let mut out = unsafe { g.alloc::<T>(m.max(1))? };
        if m == 0 {
            return Ok(out);
        }
        let on = op_name(op);
        if n == 0 {
            let entry = kernel_name::<T>(&format!("fill_identity_{on}"));
            let f = g.function(&KERNELS, &entry, defines())?;
            let mut b = g.stream().launch_builder(&f);
            b.arg(&mut out).arg(&m32);
            // SAFETY: fill_identity_OP_T(T* out, u32 m); out holds m.
            unsafe { b.launch(Gpu::cfg(glue::stride_grid(g, m), 256, 0)) }
                .map_err(launch_err(&entry))?;
            return Ok(out);
        }
        let tiles = n.div_ceil(TILE);
        let t32 = tiles as u32;
        // SAFETY: tail, headpart and fixseg entries are written by the tile kernel before the
        // fix-up reads them (headpart only where fixseg names a segment).
        let (mut tail, mut headpart, mut fixseg) = unsafe {
            (
                g.alloc::<T>(tiles)?,
                g.alloc::<T>(tiles)?,
                g.alloc::<u32>(tiles)?,
            )
        };
        let entry = kernel_name::<T>(&format!("{}_{on}", tile_body(n, m)));
        let f = g.function(&KERNELS, &entry, defines())?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(values)
            .arg(&n32)
            .arg(offsets)
            .arg(&m32)
            .arg(&mut out)
            .arg(&mut tail)
            .arg(&mut headpart)
            .arg(&mut fixseg);
        // SAFETY: segreduce[_groupsG]_OP_T(const T* x, u32 n, const u32* offsets, u32 m,
        // T* out, T* tail, T* headpart, u32* fixseg): x has n, offsets m+1, out m, the rest one
        // per tile.
        unsafe { b.launch(Gpu::cfg(t32, THREADS, 0)) }.map_err(launch_err(&entry))?;
        let entry = kernel_name::<T>(&format!("segreduce_fixup_{on}"));
        let f = g.function(&KERNELS, &entry, defines())?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(offsets)
            .arg(&mut out)
            .arg(&tail)
            .arg(&headpart)
            .arg(&fixseg)
            .arg(&t32);
        // SAFETY: segreduce_fixup_OP_T(const u32* offsets, T* out, const T* tail,
        // const T* headpart, const u32* fixseg, u32 tiles): one warp per tile (tail, headpart
        // and fixseg hold `tiles` entries; warps past the last tile return at once).
        unsafe { b.launch(Gpu::cfg(t32.div_ceil(THREADS / 32), THREADS, 0)) }
            .map_err(launch_err(&entry))?;
        Ok(out)
    }

    /// One result per segment of packed head flags (element 0 always starts a segment):
    /// the segment offsets are compacted from the head positions on the device (a compaction
    /// of the indices by the head bits), then reduced as with offsets. Returns the results
    /// and the number of segments.
    ///
    /// # Panics
    /// When `heads` holds fewer than `values.len()` bits.
    pub fn segmented_reduce_heads<T: ScanElem + KernelType>(
        g: &Gpu,
        values: &DeviceBuffer<T>,
        heads: &crate::primitives::gpu::HeadFlags,
        op: ScanOp,
    ) -> Result<(DeviceBuffer<T>, usize)> {
        let n = values.len();
        let n32 = glue::segmented_len("segmented_reduce_heads", n, heads.len())?;
        if n == 0 {
            return Ok((unsafe { g.alloc::<T>(1)? }, 0));
        }
        let words = n.div_ceil(32);
        let mut h = g.zeros::<u32>(words)?;
        g.stream()
            .memcpy_dtod(&heads.words().slice(..words), &mut h)
            .map_err(|e| crate::Error::cuda("copying head flags", e))?;
        grid_stride!(g, "or_u32", 1, &mut h, &1u32);
        // SAFETY: iota_u32 writes all n entries.
        let mut idx = unsafe { g.alloc::<u32>(n)? };
        grid_stride!(g, "iota_u32", n, &mut idx, &n32);
        let (starts, m) = crate::primitives::compact::gpu::compact(g, &idx, &h)?;
        // offsets = starts[0..m] ++ [n]
        // SAFETY: the first m entries are copied below and entry m is set.
        let mut offsets = unsafe { g.alloc::<u32>(m + 1)? };
        g.stream()
            .memcpy_dtod(&starts.slice(..m), &mut offsets.slice_mut(..m))
            .map_err(|e| crate::Error::cuda("copying segment offsets", e))?;
        {
            let mut last = offsets.slice_mut(m..);
            grid_stride!(g, "set_u32", 1, &mut last, &n32);
        }
        let out = segmented_reduce_offsets(g, values, &offsets, op)?;
        Ok((out, m))
    }
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    #[test]
    fn tile_body_follows_the_average_segment_length() {
        use super::gpu::tile_body;
        if std::env::var_os("SEGSPARSE_SEGREDUCE").is_some() {
            return; // a forced body is the point of the variable
        }
        assert_eq!(tile_body(1 << 20, 1 << 20), "segreduce");
        assert_eq!(tile_body(1000, 100), "segreduce");
        assert_eq!(tile_body(1 << 26, 1 << 22), "segreduce_groups4");
        assert_eq!(tile_body(1 << 26, 1 << 21), "segreduce_groups8");
        assert_eq!(tile_body(100 << 20, 1 << 20), "segreduce_groups16");
        assert_eq!(tile_body(1 << 26, 1 << 16), "segreduce_groups32");
    }
}
