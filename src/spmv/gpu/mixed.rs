//! The GPU matrix stored in `f32` under `f64` vectors ([`GpuMixedCsr`]): the device side of
//! [`spmv::mixed`](crate::spmv::mixed), whose docs say why and what the solves do with it.
//!
//! The kernels are those of `kernels/spmv/spmv.cu` instantiated with the value type apart from
//! the vector type (entry points `spmv_fused_f32f64`, `spmv_rows_f32f64`, `spmv_vector_f32f64`,
//! with the `f64` fix-up; `SPMV_TYPES` bit 3): each `f32` value is widened exactly before its
//! product, products and sums are `f64`. They run on the structure tables of the matrix's `f32`
//! upload (head flags, tiles of `threads × items_f32` entries, the empty-row map), and `Auto`
//! takes that upload's choice of algorithm (the look-back and the paper's kernels have no mixed
//! instantiation: the fused kernel stands in for them). One product moves
//! `nnz·8 + (nrows+1)·4 + (ncols+nrows)·8` bytes ([`GpuMixedCsr::spmv_bytes`]), against
//! `nnz·12 + ...` in `f64`.
//!
//! The exact values live in a second device matrix ([`GpuMixedCsr::exact`], a [`GpuCsr<f64>`])
//! unless the rounding to `f32` is exact; the solvers apply it for true residuals only.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice};

use super::{GpuCsr, SpmvAlgorithm, SPMV_SRC};
use crate::backend::gpu::GpuOps;
use crate::backend::LinearOperator;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, PushKernelArg};
use crate::spmv::mixed::F32Fit;
use crate::CsrMatrix;

/// The mixed kernels, from the module compiled with
/// [`SpmvPolicy::mixed_defines`](super::SpmvPolicy::mixed_defines).
#[derive(Clone)]
struct MixedKernels {
    fused: CudaFunction,
    fixup: CudaFunction,
    rows: CudaFunction,
    vector: CudaFunction,
    scale: CudaFunction,
}

/// A CSR matrix on the GPU with its values stored in `f32`, applied to `f64` vectors with `f64`
/// sums, and its exact `f64` values for true residuals (a [`LinearOperator<f64,
/// GpuOps<f64>>`](LinearOperator) whose [`apply_exact`](LinearOperator::apply_exact) uses them).
pub struct GpuMixedCsr {
    low: GpuCsr<f32>,
    exact: Option<GpuCsr<f64>>,
    fit: F32Fit,
    k: MixedKernels,
    /// Two `f64` partial sums per tile (the fused kernel's carries; `low`'s are `f32`).
    tile_value: Mutex<CudaSlice<f64>>,
}

impl std::fmt::Debug for GpuMixedCsr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuMixedCsr({}×{}, {} nonzeros, f32 values{}, auto = {})",
            self.low.nrows,
            self.low.ncols,
            self.low.nnz,
            if self.exact.is_some() {
                " + exact f64 copy"
            } else {
                " (exact)"
            },
            self.resolved_algorithm().name()
        )
    }
}

impl GpuMixedCsr {
    /// Rounds the values of `a` to `f32` and uploads them (with the structure tables of
    /// [`GpuCsr::upload`]), and uploads `a` itself for true residuals unless the rounding is
    /// exact.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a value does not fit `f32` ([`F32Fit::of`]'s sentence);
    /// as [`GpuCsr::upload`] otherwise.
    pub fn upload(gpu: &Arc<Gpu>, a: &CsrMatrix<f64>) -> Result<Self> {
        let fit = F32Fit::of(a).map_err(Error::InvalidInput)?;
        let low = GpuCsr::upload(gpu, &a.cast::<f32>())?;
        let exact = if fit.lossless {
            None
        } else {
            Some(GpuCsr::upload(gpu, a)?)
        };
        Self::from_parts(low, exact, fit)
    }

    /// The mixed operator of a matrix already on the device, made there: [`f32_fit`] checks the
    /// values (one pass), [`narrowed`] rounds them, and `a` is copied on the device for true
    /// residuals unless the rounding is exact. Nothing of the matrix comes to the host.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a value does not fit `f32` (the entry named, as
    /// [`GpuMixedCsr::upload`] names it); out of device memory; a failed launch.
    pub fn from_device(a: &GpuCsr<f64>) -> Result<Self> {
        let fit = f32_fit(a)?.map_err(Error::InvalidInput)?;
        let exact = if fit.lossless {
            None
        } else {
            Some(a.try_clone()?)
        };
        Self::from_parts(narrowed(a)?, exact, fit)
    }

    /// The mixed operator over an uploaded `f32` matrix and, unless `fit` says the `f32` values
    /// are exact, the exact matrix (same shape and pattern).
    ///
    /// # Panics
    /// When the two matrices differ in shape or number of entries.
    ///
    /// # Errors
    /// A failed kernel compile or allocation.
    pub fn from_parts(low: GpuCsr<f32>, exact: Option<GpuCsr<f64>>, fit: F32Fit) -> Result<Self> {
        if let Some(e) = &exact {
            assert!(
                (e.nrows, e.ncols, e.nnz) == (low.nrows, low.ncols, low.nnz),
                "GpuMixedCsr: the f32 matrix is {}×{} with {} entries, the exact one {}×{} with {}",
                low.nrows,
                low.ncols,
                low.nnz,
                e.nrows,
                e.ncols,
                e.nnz
            );
        }
        let gpu = low.gpu.clone();
        let defines = low.policy.mixed_defines();
        let f = |name: &str| gpu.function(&SPMV_SRC, name, &defines);
        let k = MixedKernels {
            fused: f("spmv_fused_f32f64")?,
            fixup: f("spmv_fixup_f64")?,
            rows: f("spmv_rows_f32f64")?,
            vector: f("spmv_vector_f32f64")?,
            scale: f("spmv_scale_f64")?,
        };
        let tile_value = Mutex::new(gpu.zeros::<f64>(2 * low.ntiles.max(1) as usize)?);
        Ok(GpuMixedCsr {
            low,
            exact,
            fit,
            k,
            tile_value,
        })
    }

    /// The stored `f32` matrix (its own [`GpuCsr::spmv`] multiplies `f32` vectors).
    pub fn low(&self) -> &GpuCsr<f32> {
        &self.low
    }
    /// The exact `f64` matrix, when the `f32` rounding is not exact.
    pub fn exact(&self) -> Option<&GpuCsr<f64>> {
        self.exact.as_ref()
    }
    /// True when every value is an `f32` exactly (no exact copy is kept).
    pub fn is_lossless(&self) -> bool {
        self.fit.lossless
    }
    /// How `f32` represents the values.
    pub fn fit(&self) -> F32Fit {
        self.fit
    }
    /// Rows.
    pub fn nrows(&self) -> usize {
        self.low.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.low.ncols
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.low.nnz
    }
    /// The GPU the matrix lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.low.gpu
    }
    /// Bytes one mixed product moves at the minimum (DESIGN.md's count with 4-byte values and
    /// 8-byte vectors): `nnz·8 + (nrows+1)·4 + (ncols+nrows)·8`.
    pub fn spmv_bytes(&self) -> usize {
        self.low.nnz * 8 + (self.low.nrows + 1) * 4 + (self.low.ncols + self.low.nrows) * 8
    }
    /// Device bytes of the stored matrices (the `f32` CSR arrays and the exact copy, if any).
    pub fn device_bytes(&self) -> usize {
        self.low.csr_device_bytes() + self.exact.as_ref().map_or(0, |e| e.csr_device_bytes())
    }
    /// What [`SpmvAlgorithm::Auto`] runs: the `f32` upload's choice, with the fused kernel for
    /// the look-back and the paper's algorithms (which have no mixed instantiation).
    pub fn resolved_algorithm(&self) -> SpmvAlgorithm {
        mixed_algorithm(self.low.resolved_algorithm())
    }

    /// `y ← α·fl32(A)·x + β·y` in `f64` with the algorithm of `Auto`. Queues work and returns.
    ///
    /// # Panics
    /// When `x.len() != ncols` or `y.len() != nrows` (both sizes in the message).
    ///
    /// # Errors
    /// A failed launch, naming the kernel.
    pub fn spmv(
        &self,
        alpha: f64,
        x: &CudaSlice<f64>,
        beta: f64,
        y: &mut CudaSlice<f64>,
    ) -> Result<()> {
        self.spmv_with(SpmvAlgorithm::Auto, alpha, x, beta, y)
    }

    /// [`spmv`](Self::spmv) with a forced algorithm (`FusedLookback` and `PaperSegscan` run the
    /// fused kernel).
    pub fn spmv_with(
        &self,
        algorithm: SpmvAlgorithm,
        alpha: f64,
        x: &CudaSlice<f64>,
        beta: f64,
        y: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let l = &self.low;
        if !l.check_product(x.len(), y.len()) {
            return Ok(());
        }
        let (x, mut y) = (x.slice(..), y.slice_mut(..));
        let k = &self.k;
        if l.nnz == 0 {
            return l.scale_with((&k.scale, "spmv_scale_f64"), beta, &mut y);
        }
        let algorithm = match algorithm {
            SpmvAlgorithm::Auto => self.resolved_algorithm(),
            a => mixed_algorithm(a),
        };
        match algorithm {
            SpmvAlgorithm::Rows => {
                l.rows_with((&k.rows, "spmv_rows_f32f64"), alpha, &x, beta, &mut y)
            }
            SpmvAlgorithm::Vector { lanes } => l.vector_with(
                (&k.vector, "spmv_vector_f32f64"),
                lanes,
                alpha,
                &x,
                beta,
                &mut y,
            ),
            // The tile flags are the f32 matrix's (u32, one per tile: the same tiles); the
            // partial sums are this operator's own f64 ones.
            _ => l.fused_with(
                (&k.fused, "spmv_fused_f32f64"),
                (&k.fixup, "spmv_fixup_f64"),
                &self.tile_value,
                alpha,
                &x,
                beta,
                &mut y,
            ),
        }
    }

    /// `y ← α·A·x + β·y` with the exact values (the exact copy, or the `f32` values when they
    /// are exact).
    ///
    /// # Errors
    /// As [`spmv`](Self::spmv).
    pub fn spmv_exact(
        &self,
        alpha: f64,
        x: &CudaSlice<f64>,
        beta: f64,
        y: &mut CudaSlice<f64>,
    ) -> Result<()> {
        match &self.exact {
            Some(e) => e.spmv(alpha, x, beta, y),
            None => self.spmv(alpha, x, beta, y),
        }
    }
}

/// [`F32Fit`] of the values of `a`, from one pass on the device (`vector_f32_fit`): two words
/// come back; where a value does not fit, that value and the words that name its entry (a
/// binary search of the row pointer, a word at a time).
///
/// # Errors
/// CUDA errors with the kernel's name; the inner `Err` as [`F32Fit::of`] (the same sentence).
pub fn f32_fit(a: &GpuCsr<f64>) -> Result<std::result::Result<F32Fit, String>> {
    let (row_ptr, col, val) = a.device_parts();
    let nnz = a.nnz();
    if nnz == 0 {
        return Ok(F32Fit::from_scan(0.0, None));
    }
    let g = a.gpu();
    let mut out = g.upload(&[0u64, u64::MAX])?;
    let n = nnz as u64;
    let threads = crate::backend::gpu::THREADS;
    let blocks = (nnz.div_ceil(threads as usize) as u32).clamp(1, g.sm_count() * 8);
    let k = g.function(&crate::backend::gpu::BLAS1, "vector_f32_fit", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(val).arg(&n).arg(&mut out);
    // SAFETY: vector_f32_fit(const double* val, u64 n, u64* out): val has n entries, out two
    // (the largest rounding's bits, zeroed; the least unfit position, u64::MAX).
    unsafe { lb.launch(Gpu::cfg(blocks, threads, 0)) }
        .map_err(|e| Gpu::launch_error("vector_f32_fit", e))?;
    let w = g.download(&out)?;
    let k = match w[1] {
        u64::MAX => return Ok(F32Fit::from_scan(f64::from_bits(w[0]), None)),
        k => k as usize,
    };
    let word = |s: &CudaSlice<u32>, i: usize| -> Result<usize> {
        Ok(g.download(&s.slice(i..i + 1))?[0] as usize)
    };
    // The row holding entry k: the last i with row_ptr[i] <= k (row_ptr[0] = 0 <= k < nnz).
    let (mut lo, mut hi) = (0, a.nrows());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if word(row_ptr, mid)? <= k {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let v = g.download(&val.slice(k..k + 1))?[0];
    let what = format!("entry ({lo}, {})", word(col, k)?);
    Ok(F32Fit::from_scan(f64::from_bits(w[0]), Some((&what, v))))
}

/// The `f32` rounding of a device matrix, made on the device: the row pointer and columns
/// copied, each value rounded to the nearest `f32` (`vector_narrow_f64b32`), and the structure
/// tables of the `f32` tiles built as [`GpuCsr::from_device_parts`] builds them. Queued on the
/// matrix's stream; nothing of the matrix comes to the host.
///
/// A value beyond `f32`'s range becomes infinite here (the AMG setup then refuses the matrix as
/// non-finite); [`F32Fit::of`] checks a host matrix before its upload instead.
///
/// # Errors
/// Out of device memory, a failed launch, and as [`GpuCsr::from_device_parts`].
pub fn narrowed(a: &GpuCsr<f64>) -> Result<GpuCsr<f32>> {
    let g = a.gpu();
    let (row_ptr, col, val) = a.device_parts();
    let copy = |s: &CudaSlice<u32>| {
        g.stream()
            .clone_dtod(s)
            .map_err(|e| Error::cuda("copying a device matrix", e))
    };
    let mut v32 = g.zeros::<f32>(val.len())?;
    let f = g.function(&crate::backend::gpu::BLAS1, "vector_narrow_f64b32", &[])?;
    let n = val.len() as u32;
    let threads = crate::backend::gpu::THREADS;
    let blocks = n.div_ceil(threads).clamp(1, g.sm_count().max(1) * 8);
    let mut b = g.stream().launch_builder(&f);
    b.arg(val).arg(&mut v32).arg(&n);
    // SAFETY: vector_narrow_f64b32(const double* x, float* y, u32 n); val and v32 have n
    // elements; a grid-stride loop over n.
    unsafe { b.launch(Gpu::cfg(blocks, threads, 0)) }
        .map_err(|e| Gpu::launch_error("vector_narrow_f64b32", e))?;
    GpuCsr::from_device_parts(g, a.nrows(), a.ncols(), copy(row_ptr)?, copy(col)?, v32)
}

/// The mixed kernel that runs for `a`: the fused one for the algorithms without a mixed
/// instantiation.
fn mixed_algorithm(a: SpmvAlgorithm) -> SpmvAlgorithm {
    match a {
        SpmvAlgorithm::Rows | SpmvAlgorithm::Vector { .. } => a,
        _ => SpmvAlgorithm::Fused,
    }
}

/// `y ← fl32(A)·x` in `f64` ([`GpuMixedCsr::spmv`]); [`LinearOperator::apply_exact`] with the
/// exact values.
impl LinearOperator<f64, GpuOps<f64>> for GpuMixedCsr {
    fn nrows(&self) -> usize {
        self.low.nrows
    }
    fn ncols(&self) -> usize {
        self.low.ncols
    }
    fn apply(&self, _: &GpuOps<f64>, x: &CudaSlice<f64>, y: &mut CudaSlice<f64>) -> Result<()> {
        self.spmv(1.0, x, 0.0, y)
    }
    fn apply_exact(
        &self,
        _: &GpuOps<f64>,
        x: &CudaSlice<f64>,
        y: &mut CudaSlice<f64>,
    ) -> Result<()> {
        self.spmv_exact(1.0, x, 0.0, y)
    }
    fn is_narrowed(&self) -> bool {
        self.exact.is_some()
    }
    /// Tunes the `f32` upload's algorithm ([`GpuCsr::prepare_for`], timed with `f32` vectors: the
    /// same loads of the matrix) when the solve may make enough products.
    fn prepare(&self, _: &GpuOps<f64>, expected_applies: usize) -> Result<()> {
        self.low.prepare_for(expected_applies).map(|_| ())
    }
}
