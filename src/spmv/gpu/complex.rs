//! Complex SpMV on the GPU: `y ← α·A·x + β·y` for `Complex<f32>` and `Complex<f64>` matrices,
//! with the values interleaved (`re, im`) as CuPy and cuSPARSE (`CUDA_C_32F`, `CUDA_C_64F`)
//! hold them, so a device buffer of either is used as is.
//!
//! [`GpuComplexCsr`] uploads a [`CsrMatrix`] of a complex element type once and multiplies it
//! with one launch per product. Device vectors are `CudaSlice<T::Dev>` ([`Elem::Dev`], the same
//! bytes as `T`): upload them with [`GpuComplexCsr::upload_vector`]. Two mappings of rows to
//! threads (`kernels/spmv/spmv_complex.cu`):
//!
//! - [`ComplexSpmvAlgorithm::Rows`]: one thread per row, for short even rows (stencils);
//! - [`ComplexSpmvAlgorithm::Warp8`] / [`ComplexSpmvAlgorithm::Warp32`]: 8 or 32 lanes per row
//!   with a shuffle reduction of both parts, for longer or uneven rows;
//! - [`ComplexSpmvAlgorithm::Auto`] picks one from the row statistics at upload.
//!
//! Every product is the complex product (four fused multiply-adds per entry); each row is
//! summed in a fixed order, so results are reproducible run to run. `Aᴴ·x` is the product with
//! the conjugate transpose, formed once on the host: upload
//! [`CsrMatrix::conj_transpose`](crate::CsrMatrix::conj_transpose).
//!
//! The real types keep [`GpuCsr`](super::GpuCsr) with its segmented-scan and fused kernels;
//! those are not instantiated for complex values yet, so a matrix with very long rows among
//! short ones (power-law rows) is far slower here than with cuSPARSE: each long row is summed
//! by one warp (`benches/results/complex.md`).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, PushKernelArg};

use crate::error::{Error, Result};
use crate::gpu::kernels::KernelSource;
use crate::gpu::{Gpu, KernelType};
use crate::{CsrMatrix, Elem};

/// The complex SpMV kernels.
pub const SPMV_COMPLEX_SRC: KernelSource = KernelSource {
    name: "spmv/spmv_complex.cu",
    text: include_str!("../../../kernels/spmv/spmv_complex.cu"),
    headers: &[],
    constants: &[],
};

#[cfg(test)]
mod tests {
    use super::ComplexSpmvAlgorithm as A;

    #[test]
    fn auto_resolves_by_row_lengths() {
        assert_eq!(A::Auto.resolve(6.9, 7), A::Rows); // 7-point stencil
        assert_eq!(A::Auto.resolve(16.0, 16), A::Warp8); // random rows of 16
        assert_eq!(A::Auto.resolve(90.8, 200), A::Warp32); // raefsky2-like
        assert_eq!(A::Auto.resolve(11.0, 100_000), A::Warp32); // power law
        assert_eq!(A::Warp8.resolve(1.0, 1), A::Warp8); // an explicit choice stays
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
    /// Eight lanes per row.
    Warp8,
    /// A warp (32 lanes) per row.
    Warp32,
}

impl ComplexSpmvAlgorithm {
    /// `"auto"`, `"rows"`, `"warp8"`, `"warp32"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Rows => "rows",
            Self::Warp8 => "warp8",
            Self::Warp32 => "warp32",
        }
    }

    /// What `Auto` means for a matrix with these row statistics: one thread per row when no
    /// row has more than 8 entries (stencils: the 7-point Helmholtz matrix ran 1.6× faster
    /// so than with 8 lanes on an H100), 8 lanes when rows average at most 24 entries and none has
    /// more than 256, a warp beyond (long or very uneven rows).
    pub fn resolve(self, mean: f64, max: usize) -> Self {
        match self {
            Self::Auto if max <= 8 => Self::Rows,
            Self::Auto if mean <= 24.0 && max <= 256 => Self::Warp8,
            Self::Auto => Self::Warp32,
            other => other,
        }
    }

    fn lanes(self) -> u64 {
        match self {
            Self::Warp8 => 8,
            Self::Warp32 => 32,
            _ => 1,
        }
    }

    fn kernel(self) -> &'static str {
        match self {
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
        let st = a.row_stats();
        Ok(GpuComplexCsr {
            gpu: gpu.clone(),
            nrows: a.nrows(),
            ncols: a.ncols(),
            nnz: a.nnz(),
            row_ptr: gpu.upload(a.row_ptr())?,
            col_idx: gpu.upload(a.col_idx())?,
            values: gpu.upload(T::as_dev(a.values()))?,
            alg: alg.resolve(st.mean, st.max),
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
