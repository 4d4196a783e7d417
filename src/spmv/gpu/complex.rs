//! Complex SpMV on the GPU: `y ← α·A·x + β·y` for `Complex<f32>` and `Complex<f64>` matrices,
//! with the values interleaved (`re, im`) as CuPy and cuSPARSE (`CUDA_C_32F`, `CUDA_C_64F`)
//! hold them, so a device buffer of either is used as is.
//!
//! [`GpuComplexCsr`] uploads a [`CsrMatrix`] of a complex element type once and multiplies it
//! with one launch per product. Device vectors are `CudaSlice<T::Dev>` ([`Elem::Dev`], the same
//! bytes as `T`): upload them with [`GpuComplexCsr::upload_vector`]. The mappings of rows to
//! threads (`kernels/spmv/spmv_complex.cu`):
//!
//! - [`ComplexSpmvAlgorithm::Rows`]: one thread per row;
//! - [`ComplexSpmvAlgorithm::Warp2`] / [`ComplexSpmvAlgorithm::Warp4`]: 2 lanes with 4 entries
//!   each or 4 lanes with 2 entries each in flight, then a shuffle reduction, for short rows;
//! - [`ComplexSpmvAlgorithm::Warp8`] / [`ComplexSpmvAlgorithm::Warp32`]: 8 or 32 lanes per row
//!   with a shuffle reduction of both parts, for longer or uneven rows;
//! - [`ComplexSpmvAlgorithm::Fused`]: nonzero-balanced, the fused segmented-reduction kernel of
//!   the real types ([`GpuCsr`](super::GpuCsr)'s `Fused`: tiles of consecutive nonzeros, a
//!   block scan of head flags, row pieces that cross tiles added in tile order by a fix-up)
//!   instantiated for the complex types, with its structure tables built at upload; a row of
//!   10⁶ entries costs what 10⁶ entries in short rows cost (power-law rows);
//! - [`ComplexSpmvAlgorithm::Auto`] picks one from the row statistics at upload.
//!
//! Every product is the complex product; each row is summed in a fixed order, so results are
//! reproducible run to run. `Aᴴ·x` is the product with the conjugate transpose:
//! [`crate::sparse::gpu::conj_transpose`] builds it on the device from the uploaded matrix.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

use super::{Preprocess, SpmvPolicy, MAX_NNZ, SPMV_SRC};

use crate::backend::gpu::GpuOps;
use crate::backend::LinearOperator;
use crate::csr::RowStats;
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, KernelType};
use crate::{CsrMatrix, Elem};

/// The complex SpMV kernels.
pub const SPMV_COMPLEX_SRC: KernelSource = kernel_source!(
    "spmv/spmv_complex.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::gpu::kernels::COMPLEX_H
    ]
);

#[cfg(test)]
mod tests {
    use super::ComplexSpmvAlgorithm as A;

    #[test]
    fn auto_resolves_by_row_lengths() {
        for b in [8, 16] {
            assert_eq!(A::Auto.resolve(16.0, 16, 16_000_000, b), A::Warp8); // random rows of 16
            assert_eq!(A::Auto.resolve(26.2, 27, 6_859_000, b), A::Warp8); // 27-point stencil
            assert_eq!(A::Auto.resolve(10.0, 10, 3_000_000, b), A::Warp4); // knn3d, 10 per row
            assert_eq!(A::Auto.resolve(90.8, 200, 294_276, b), A::Warp32); // raefsky2
            assert_eq!(A::Auto.resolve(77.0, 81, 14_784_000, b), A::Warp32); // elasticity3d
            assert_eq!(A::Auto.resolve(11.5, 100_000, 11_546_540, b), A::Fused); // power law
            assert_eq!(A::Auto.resolve(4.7, 1000, 5399, b), A::Warp32); // rajat19: L2-resident
            assert_eq!(A::Warp8.resolve(1.0, 1, 1, b), A::Warp8); // an explicit choice stays
            assert_eq!(A::Rows.resolve(6.9, 7, 6_940_000, b), A::Rows);
            assert_eq!(A::Auto.resolve(0.0, 0, 0, b), A::Rows); // no entries
        }
        // The 7-point stencil: 32 bytes of values per lane and step, 2 lanes × 4 entries in c64,
        // 4 × 2 in c128.
        assert_eq!(A::Auto.resolve(6.9, 7, 6_940_000, 8), A::Warp2);
        assert_eq!(A::Auto.resolve(6.9, 7, 6_940_000, 16), A::Warp4);
        assert_eq!(A::Auto.resolve(8.0, 64, 8000, 8), A::Warp2);
        assert_eq!(A::Auto.resolve(8.0, 65, 8000, 8), A::Warp8); // one row too long for 2 lanes
        assert_eq!(A::Auto.resolve(12.5, 13, 12_500, 8), A::Warp8);
    }
}

/// Threads per block of the complex kernels.
const THREADS: u32 = 256;

/// How rows are mapped to threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComplexSpmvAlgorithm {
    /// Chosen at upload from the row statistics.
    Auto,
    /// One thread per row.
    Rows,
    /// Two lanes per row, four entries each per step (loads issued together).
    Warp2,
    /// Four lanes per row, two entries each per step (loads issued together).
    Warp4,
    /// Eight lanes per row.
    Warp8,
    /// A warp (32 lanes) per row.
    Warp32,
    /// Nonzero-balanced tiles with a fix-up of the rows that cross them (deterministic).
    Fused,
}

impl ComplexSpmvAlgorithm {
    /// Every algorithm, `Auto` first (benchmarks and tests run them all).
    pub const ALL: [Self; 7] = [
        Self::Auto,
        Self::Rows,
        Self::Warp2,
        Self::Warp4,
        Self::Warp8,
        Self::Warp32,
        Self::Fused,
    ];

    /// `"auto"`, `"rows"`, `"warp2"`, `"warp4"`, `"warp8"`, `"warp32"`, `"fused"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Rows => "rows",
            Self::Warp2 => "warp2",
            Self::Warp4 => "warp4",
            Self::Warp8 => "warp8",
            Self::Warp32 => "warp32",
            Self::Fused => "fused",
        }
    }

    /// What `Auto` means for a matrix with these row statistics, `nnz` entries and values of
    /// `value_bytes` bytes (8 for `Complex<f32>`, 16 for `Complex<f64>`):
    ///
    /// - rows of at most 8 entries on average and 64 at most: the short-row groups, with 32
    ///   bytes of values per lane and step (2 lanes × 4 entries in c64, 4 lanes × 2 in c128);
    /// - at most 12 on average (64 at most): 4 lanes × 2 entries;
    /// - at most 32 on average and 256 at most: 8 lanes;
    /// - some row longer than 256 entries and 8 times the mean, at least 2¹⁷ entries: the
    ///   nonzero-balanced kernel;
    /// - otherwise a warp per row.
    ///
    /// Measured on an H100 against cuSPARSE (`spmv-bench --precision c64|c128`, every kernel, 15
    /// corpus matrices and 10 generated ones; `benches/results/complex.md`): on the matrices
    /// larger than the L2 cache, the short-row groups keep 2–4 independent loads in flight per
    /// lane where 8 lanes with one entry each keep one (7-point Helmholtz stencil, 10⁶ rows: c128
    /// 1.32× with 4 × 2 against 1.14× with 8 lanes; c64 1.30× with 2 × 4 against 1.00× with one
    /// thread per row; ncu: 80 % against 59 % of DRAM throughput); one thread per row left
    /// `random:1000000:4` at 1.04× in c128 (1.58× with 4 × 2), and a warp per row left the
    /// 27-point stencil (26 entries per row) at 0.87× / 0.67× (1.08× with 8 lanes). Power-law
    /// rows: the nonzero-balanced kernel reached 0.94× cuSPARSE where a warp per row reached
    /// 0.02× (`powerlaw:1000000:2.2`, c64); below 2¹⁷ entries its two launches cost more than
    /// the imbalance (rajat19 11.4 µs against 7.8 µs with a warp per row).
    pub fn resolve(self, mean: f64, max: usize, nnz: usize, value_bytes: usize) -> Self {
        match self {
            Self::Auto if nnz == 0 => Self::Rows,
            Self::Auto if mean <= 8.0 && max <= 64 && value_bytes <= 8 => Self::Warp2,
            Self::Auto if mean <= 12.0 && max <= 64 => Self::Warp4,
            Self::Auto if mean <= 32.0 && max <= 256 => Self::Warp8,
            Self::Auto if nnz >= 1 << 17 && max > 256 && max as f64 > 8.0 * mean => Self::Fused,
            Self::Auto => Self::Warp32,
            other => other,
        }
    }

    fn lanes(self) -> u64 {
        match self {
            Self::Warp2 => 2,
            Self::Warp4 => 4,
            Self::Warp8 => 8,
            Self::Warp32 => 32,
            _ => 1,
        }
    }

    fn kernel(self) -> &'static str {
        match self {
            Self::Warp2 => "spmv_cwarp2",
            Self::Warp4 => "spmv_cwarp4",
            Self::Warp8 => "spmv_cwarp8",
            Self::Warp32 => "spmv_cwarp32",
            _ => "spmv_crows",
        }
    }
}

/// A complex CSR matrix on the GPU (values interleaved, indices `u32`).
pub struct GpuComplexCsr<T: Elem>
where
    T::Dev: KernelType,
{
    gpu: Arc<Gpu>,
    nrows: usize,
    ncols: usize,
    nnz: usize,
    row_ptr: CudaSlice<u32>,
    col_idx: CudaSlice<u32>,
    values: CudaSlice<T::Dev>,
    alg: ComplexSpmvAlgorithm,
    /// The structure tables and scratch of [`ComplexSpmvAlgorithm::Fused`] (built when it is
    /// the algorithm).
    fused: Option<FusedTables<T>>,
}

/// Entries per thread of the fused kernel (`SPMV_ITEMS_C64`, `SPMV_ITEMS_C128` there): the
/// same 64 bytes of values per thread as the real `f64` kernel.
const ITEMS_C64: u32 = 8;
const ITEMS_C128: u32 = 4;

/// What [`ComplexSpmvAlgorithm::Fused`] needs beside the CSR arrays: the real kernels' tables
/// (head flags, row starts per tile, the tile where each carried row starts, the segment → row
/// map), the per-tile carries, and the two kernels.
struct FusedTables<T: Elem>
where
    T::Dev: KernelType,
{
    heads: CudaSlice<u32>,
    tile_heads: CudaSlice<u32>,
    tile_start: CudaSlice<u32>,
    row_map: CudaSlice<u32>,
    has_map: bool,
    nsegs: u32,
    ntiles: u32,
    threads: u32,
    /// Per tile: the fix-up bits (rewritten by every product before the fix-up reads them).
    tile_flag: Mutex<CudaSlice<u32>>,
    /// Per tile: the tail and the head of the rows crossing tiles.
    tile_value: Mutex<CudaSlice<T::Dev>>,
    fused: CudaFunction,
    fixup: CudaFunction,
}

impl<T: Elem> GpuComplexCsr<T>
where
    T::Dev: KernelType,
{
    /// Uploads `a` and resolves `alg` (see [`ComplexSpmvAlgorithm::resolve`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a real `T` (use [`GpuCsr`](super::GpuCsr)); device errors
    /// (out of memory, naming the sizes).
    pub fn upload(gpu: &Arc<Gpu>, a: &CsrMatrix<T>, alg: ComplexSpmvAlgorithm) -> Result<Self> {
        if !T::IS_COMPLEX {
            return Err(Error::InvalidInput(format!(
                "GpuComplexCsr holds complex matrices; a {} matrix uploads as a GpuCsr",
                T::NAME
            )));
        }
        let (nrows, ncols, nnz) = (a.nrows(), a.ncols(), a.nnz());
        if nnz > MAX_NNZ || nrows >= u32::MAX as usize || ncols >= u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "GpuComplexCsr: {nrows}×{ncols} matrix with {nnz} nonzeros exceeds the 32-bit \
                 index range of the GPU kernels (at most {MAX_NNZ} nonzeros)"
            )));
        }
        let arrays = (
            gpu.upload(a.row_ptr())?,
            gpu.upload(a.col_idx())?,
            gpu.upload(T::as_dev(a.values()))?,
        );
        Self::assemble(gpu, (nrows, ncols, nnz), arrays, alg, &a.row_stats())
    }

    /// A matrix from device arrays already in CSR form (`row_ptr` of `nrows + 1` entries
    /// ending at `nnz`, column indices `< ncols`, as [`CsrMatrix`] checks them): the
    /// algorithm is resolved from the row lengths, read back once.
    ///
    /// # Errors
    /// As [`GpuComplexCsr::upload`].
    pub(crate) fn from_device_parts(
        gpu: &Arc<Gpu>,
        (nrows, ncols, nnz): (usize, usize, usize),
        (row_ptr, col_idx, values): (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<T::Dev>),
        alg: ComplexSpmvAlgorithm,
    ) -> Result<Self> {
        let st = RowStats::of_row_ptr(&gpu.download(&row_ptr)?);
        let arrays = (row_ptr, col_idx, values);
        Self::assemble(gpu, (nrows, ncols, nnz), arrays, alg, &st)
    }

    /// The matrix of the device arrays, with `alg` resolved from the row statistics `st` (and
    /// the tables of [`ComplexSpmvAlgorithm::Fused`] built when it is the algorithm).
    fn assemble(
        gpu: &Arc<Gpu>,
        (nrows, ncols, nnz): (usize, usize, usize),
        (row_ptr, col_idx, values): (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<T::Dev>),
        alg: ComplexSpmvAlgorithm,
        st: &RowStats,
    ) -> Result<Self> {
        let alg = alg.resolve(st.mean, st.max, nnz, std::mem::size_of::<T>());
        let fused = if alg == ComplexSpmvAlgorithm::Fused {
            Some(FusedTables::build(
                gpu,
                &row_ptr,
                nrows,
                nnz,
                st.empty_rows,
            )?)
        } else {
            None
        };
        Ok(GpuComplexCsr {
            gpu: gpu.clone(),
            nrows,
            ncols,
            nnz,
            row_ptr,
            col_idx,
            values,
            alg,
            fused,
        })
    }

    /// A device copy of the host vector `v`.
    ///
    /// # Errors
    /// Device errors.
    pub fn upload_vector(&self, v: &[T]) -> Result<CudaSlice<T::Dev>> {
        self.gpu.upload(T::as_dev(v))
    }

    /// The device vector `v` on the host (synchronises).
    ///
    /// # Errors
    /// Device errors.
    pub fn download_vector(&self, v: &CudaSlice<T::Dev>) -> Result<Vec<T>> {
        Ok(T::from_dev(&self.gpu.download(v)?).to_vec())
    }

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    /// The algorithm `Auto` resolved to (or the one asked for).
    pub fn algorithm(&self) -> ComplexSpmvAlgorithm {
        self.alg
    }
    /// The device arrays (row pointers, column indices, values), for a peer library.
    pub fn device_parts(&self) -> (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<T::Dev>) {
        (&self.row_ptr, &self.col_idx, &self.values)
    }
    /// Bytes of one product counted the crate's way (each input read once, `y` written once).
    pub fn spmv_bytes(&self) -> usize {
        self.nnz * (T::BYTES + 4) + (self.nrows + 1) * 4 + (self.ncols + self.nrows) * T::BYTES
    }

    /// `y ← α·A·x + β·y`, queued on the GPU's stream. `β = 0` does not read `y`; `α = 0` does
    /// not read `A` or `x`.
    ///
    /// # Errors
    /// Launch errors (the kernel is named).
    ///
    /// # Panics
    /// When `x.len() != ncols` or `y.len() != nrows` (both sizes named).
    pub fn spmv(
        &self,
        alpha: T,
        x: &CudaSlice<T::Dev>,
        beta: T,
        y: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        assert!(
            x.len() == self.ncols && y.len() == self.nrows,
            "complex GPU SpMV: x has {} and y {} elements, A is {}×{}",
            x.len(),
            y.len(),
            self.nrows,
            self.ncols
        );
        if self.nrows == 0 {
            return Ok(());
        }
        let g = &self.gpu;
        let (a, b) = (T::as_dev(&[alpha])[0], T::as_dev(&[beta])[0]);
        let n = self.nrows as u32;
        if alpha == T::zero() || self.nnz == 0 {
            let f = g.typed_function::<T::Dev>(&SPMV_COMPLEX_SRC, "spmv_cscale", &[])?;
            let mut l = g.stream().launch_builder(&f);
            l.arg(&mut *y).arg(&b).arg(&n);
            let blocks = (self.nrows.div_ceil(THREADS as usize) as u32).clamp(1, g.sm_count() * 16);
            // SAFETY: spmv_cscale_<c>(C* y, C beta, u32 n); y holds n = nrows values.
            return unsafe { l.launch(Gpu::cfg(blocks, THREADS, 0)) }
                .map(|_| ())
                .map_err(|e| Gpu::launch_error("spmv_cscale", e));
        }
        if let Some(t) = &self.fused {
            return self.fused_spmv(t, a, x, b, y);
        }
        let name = self.alg.kernel();
        let f = g.typed_function::<T::Dev>(&SPMV_COMPLEX_SRC, name, &[])?;
        let threads = self.nrows as u64 * self.alg.lanes();
        let blocks = u32::try_from(threads.div_ceil(THREADS as u64)).map_err(|_| {
            Error::InvalidInput(format!(
                "{} rows need more blocks than a launch has",
                self.nrows
            ))
        })?;
        let mut l = g.stream().launch_builder(&f);
        l.arg(&self.row_ptr)
            .arg(&self.col_idx)
            .arg(&self.values)
            .arg(x)
            .arg(&mut *y)
            .arg(&a)
            .arg(&b)
            .arg(&n);
        // SAFETY: <name>_<c>(const u32* row_ptr, const u32* col, const C* val, const C* x, C* y,
        // C alpha, C beta, u32 nrows): row_ptr has nrows+1 entries ≤ nnz, every column index is
        // < ncols = x.len() (CsrMatrix's invariants), y has nrows values; one thread (or one
        // group of `lanes`) per row, the grid covers nrows·lanes threads.
        unsafe { l.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map(|_| ())
            .map_err(|e| Gpu::launch_error(name, e))
    }
}

impl<T: Elem> GpuComplexCsr<T>
where
    T::Dev: KernelType,
{
    /// The fused kernel and, when rows cross tiles, its fix-up.
    fn fused_spmv(
        &self,
        t: &FusedTables<T>,
        alpha: T::Dev,
        x: &CudaSlice<T::Dev>,
        beta: T::Dev,
        y: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        let mut flag = t.tile_flag.lock().unwrap_or_else(|p| p.into_inner());
        let mut value = t.tile_value.lock().unwrap_or_else(|p| p.into_inner());
        let (has_map, nnz, nrows, epoch) =
            (t.has_map as u32, self.nnz as u32, self.nrows as u32, 0u32);
        let mut b = self.gpu.stream().launch_builder(&t.fused);
        b.arg(&self.col_idx)
            .arg(&self.values)
            .arg(&t.heads)
            .arg(&t.tile_heads)
            .arg(&t.row_map)
            .arg(&has_map)
            .arg(&t.nsegs)
            .arg(&nnz)
            .arg(&nrows)
            .arg(x)
            .arg(&mut *y)
            .arg(&alpha)
            .arg(&beta)
            .arg(&mut *flag)
            .arg(&mut *value)
            .arg(&epoch);
        // SAFETY: spmv_fused_<c>(const u32* col, const C* val, const u32* heads,
        // const u32* tile_heads, const u32* row_map, u32 has_map, u32 nsegs, u32 nnz, u32 nrows,
        // const C* x, C* y, C alpha, C beta, u32* tile_flag, C* tile_value, u32 epoch): col/val
        // have nnz entries, heads ⌈(nnz+1)/32⌉+2 words, tile_heads/tile_flag one per tile and
        // tile_value two per tile (ntiles blocks of `threads`, the tile the tables were built
        // for), row_map nsegs entries when has_map, x ncols and y nrows (checked by the caller).
        unsafe { b.launch(Gpu::cfg(t.ntiles, t.threads, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_fused", e))?;
        if t.ntiles < 2 {
            return Ok(());
        }
        let mut b = self.gpu.stream().launch_builder(&t.fixup);
        b.arg(&*flag)
            .arg(&t.tile_start)
            .arg(&*value)
            .arg(&t.ntiles)
            .arg(&t.tile_heads)
            .arg(&t.row_map)
            .arg(&has_map)
            .arg(&t.nsegs)
            .arg(&nrows)
            .arg(&mut *y)
            .arg(&alpha)
            .arg(&beta);
        // SAFETY: spmv_fixup_<c>(const u32* tile_info, const u32* tile_start,
        // const C* tile_value, u32 ntiles, const u32* tile_heads, const u32* row_map,
        // u32 has_map, u32 nsegs, u32 nrows, C* y, C alpha, C beta); tile_info, tile_start and
        // tile_heads have ntiles entries (tile_start values < their index), tile_value 2·ntiles,
        // row_map nsegs when has_map, y nrows; one warp per tile (8 per block of 256).
        unsafe { b.launch(Gpu::cfg(t.ntiles.div_ceil(8), 256, 0)) }
            .map_err(|e| Gpu::launch_error("spmv_fixup", e))?;
        Ok(())
    }
}

impl<T: Elem> FusedTables<T>
where
    T::Dev: KernelType,
{
    /// Builds the tables of the real fused kernel on the device from `row_ptr` (the same
    /// kernels and scans as [`GpuCsr`](super::GpuCsr)) for the complex tile size.
    fn build(
        gpu: &Arc<Gpu>,
        row_ptr: &CudaSlice<u32>,
        nrows: usize,
        nnz: usize,
        empty_rows: usize,
    ) -> Result<Self> {
        let policy = SpmvPolicy::for_device(gpu.compute_capability());
        let mut defines = policy.defines();
        defines.push(("SPMV_ITEMS_C64", ITEMS_C64.to_string()));
        defines.push(("SPMV_ITEMS_C128", ITEMS_C128.to_string()));
        let items = if T::BYTES == 8 { ITEMS_C64 } else { ITEMS_C128 };
        let tile = (policy.threads * items) as usize;
        let ntiles = nnz.div_ceil(tile);
        let has_map = empty_rows > 0;
        let nsegs = (nrows - empty_rows) as u32;
        let f = |root: &str| gpu.typed_function::<T::Dev>(&SPMV_SRC, root, &defines);
        let (fused, fixup) = (f("spmv_fused")?, f("spmv_fixup")?);
        let mut heads = gpu.zeros::<u32>((nnz + 1).div_ceil(32) + 2)?;
        let mut tile_heads = gpu.zeros::<u32>(ntiles.max(1))?;
        let mut tile_start = gpu.zeros::<u32>(ntiles.max(1))?;
        let mut row_map = gpu.zeros::<u32>(if has_map { nsegs.max(1) as usize } else { 1 })?;
        Preprocess {
            gpu,
            defines: &defines,
            nrows,
            nnz,
            ntiles,
            tile,
            has_map,
        }
        .run(
            row_ptr,
            &mut heads,
            &mut tile_heads,
            &mut tile_start,
            &mut row_map,
        )?;
        Ok(FusedTables {
            heads,
            tile_heads,
            tile_start,
            row_map,
            has_map,
            nsegs,
            ntiles: ntiles as u32,
            threads: policy.threads,
            tile_flag: Mutex::new(gpu.zeros::<u32>(ntiles.max(1))?),
            tile_value: Mutex::new(gpu.zeros::<T::Dev>(2 * ntiles.max(1))?),
            fused,
            fixup,
        })
    }
}

impl<T: Elem> LinearOperator<T, GpuOps<T>> for GpuComplexCsr<T>
where
    T::Dev: KernelType,
{
    fn nrows(&self) -> usize {
        GpuComplexCsr::nrows(self)
    }
    fn ncols(&self) -> usize {
        GpuComplexCsr::ncols(self)
    }
    fn apply(&self, _: &GpuOps<T>, x: &CudaSlice<T::Dev>, y: &mut CudaSlice<T::Dev>) -> Result<()> {
        self.spmv(T::one(), x, T::zero(), y)
    }
}
