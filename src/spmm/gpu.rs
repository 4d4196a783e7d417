//! GPU SpMM `Y ← α·A·X + β·Y` on the SpMV's device matrix [`GpuCsr`].
//!
//! [`GpuSpmm`] holds the loaded kernels of one element type; [`GpuSpmm::spmm`] queues one launch
//! (row-major blocks of up to 32 columns, column-major blocks of any width), and a second for
//! the rows longer than [`LONG_ROW`] entries where the matrix has some, and returns without
//! allocating or synchronising. See `kernels/spmm/spmm.cu` for the two kernels and the
//! [module docs](super) for which layout suits which matrix. `CusparseSpmm` (feature `peers`) is the peer
//! (`cusparseSpMM`) that benchmarks and tests compare against.

#[cfg(feature = "peers")]
mod cusparse_peer;

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaView, CudaViewMut};

use super::{check_shapes, Layout};
use crate::error::Result;
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, PushKernelArg};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

#[cfg(feature = "peers")]
pub use cusparse_peer::{CusparseSpmm, CusparseSpmmAlg};

/// The SpMM kernels (`kernels/spmm/spmm.cu`).
pub const SPMM_SRC: KernelSource = kernel_source!(
    "spmm/spmm.cu",
    &[&crate::gpu::kernels::COMMON],
    &[("SPMM_THREADS", THREADS as i64)]
);

/// Threads per block of the SpMM kernels (`SPMM_THREADS`).
const THREADS: u32 = 256;
/// Columns of a row-major window: one lane per column, at most a warp per row.
const ROW_WINDOW: usize = 32;

/// Rows with more entries than this are summed by a whole block (`spmm_long`), not by the group
/// of at most 32 lanes the other kernels give a row: a group summing a row of thousands of
/// entries kept the launch running while the rest of the device idled (a 1 310-entry row made
/// one product 30× slower than `cusparseSpMM` on an H200).
pub const LONG_ROW: usize = 256;

/// Blocks per SM of `spmm_long`, which walks the rows in windows of at most a block's threads.
const LONG_BLOCKS_PER_SM: u32 = 8;

/// Loaded SpMM kernels of one element type on one GPU.
pub struct GpuSpmm<T: GpuScalar> {
    gpu: Arc<Gpu>,
    row: CudaFunction,
    col: CudaFunction,
    long: CudaFunction,
    scale: CudaFunction,
    _t: std::marker::PhantomData<T>,
}

impl<T: GpuScalar> GpuSpmm<T> {
    /// Compiles (once per process) and loads the kernels.
    ///
    /// # Errors
    /// A failed compile or load, with the kernel's name and the NVRTC log.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(GpuSpmm {
            gpu: gpu.clone(),
            row: gpu.typed_function::<T>(&SPMM_SRC, "spmm_row", &[])?,
            col: gpu.typed_function::<T>(&SPMM_SRC, "spmm_col", &[])?,
            long: gpu.typed_function::<T>(&SPMM_SRC, "spmm_long", &[])?,
            scale: gpu.typed_function::<T>(&SPMM_SRC, "spmm_scale", &[])?,
            _t: std::marker::PhantomData,
        })
    }

    /// Lanes per row of the column-major kernel, as log2: about one lane per 8 entries of the
    /// mean row, so short rows (stencils) get a thread each and long rows a sub-warp.
    pub fn col_lanes_log2(a: &GpuCsr<T>) -> u32 {
        let mean = a.row_stats().mean;
        let lanes = (mean / 8.0).clamp(1.0, 32.0) as u32;
        31 - lanes.leading_zeros() // floor(log2)
    }

    /// `Y ← α·A·X + β·Y` for `k` columns in `layout` (`X` is `ncols × k`, `Y` is `nrows × k`,
    /// both dense in that layout). Queues the work on the GPU's stream and returns.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for `k = 0` or blocks of the wrong
    /// length (named); a failed launch, naming the kernel.
    #[allow(clippy::too_many_arguments)]
    pub fn spmm(
        &self,
        a: &GpuCsr<T>,
        alpha: T,
        x: &CudaSlice<T>,
        k: usize,
        layout: Layout,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (n, m) = (a.nrows(), a.ncols());
        check_shapes("GPU spmm", n, m, k, x.len(), y.len())?;
        if n == 0 {
            return Ok(());
        }
        if alpha == T::zero() {
            let total = (n * k) as u64;
            let blocks = (total.div_ceil(THREADS as u64) as u32).min(self.gpu.sm_count() * 8);
            let mut b = self.gpu.stream().launch_builder(&self.scale);
            b.arg(&mut *y).arg(&beta).arg(&total);
            // SAFETY: spmm_scale_T(T* y, T beta, u64 n); y has n = nrows·k elements.
            unsafe { b.launch(Gpu::cfg(blocks, THREADS, 0)) }
                .map_err(|e| Gpu::launch_error("spmm_scale", e))?;
            return Ok(());
        }
        let (rp, ci, va) = a.device_parts();
        let nrows = n as u32;
        // The rows spmm_long sums (none: every row stays with the group kernels).
        let has_long = a.row_stats().max > LONG_ROW;
        let skip = if has_long { LONG_ROW as u32 } else { u32::MAX };
        match layout {
            Layout::RowMajor => {
                let ld = k as u32;
                for j0 in (0..k).step_by(ROW_WINDOW) {
                    let kw = (k - j0).min(ROW_WINDOW) as u32;
                    let log_group = kw.next_power_of_two().trailing_zeros();
                    let group = 1u64 << log_group;
                    let blocks = (n as u64 * group).div_ceil(THREADS as u64) as u32;
                    let xv = x.slice(j0..);
                    let mut yv = y.slice_mut(j0..);
                    let mut b = self.gpu.stream().launch_builder(&self.row);
                    b.arg(rp)
                        .arg(ci)
                        .arg(va)
                        .arg(&nrows)
                        .arg(&xv)
                        .arg(&ld)
                        .arg(&mut yv)
                        .arg(&ld)
                        .arg(&kw)
                        .arg(&alpha)
                        .arg(&beta)
                        .arg(&log_group)
                        .arg(&skip);
                    // SAFETY: spmm_row_T(const u32* row_ptr, const u32* col, const T* val,
                    // u32 nrows, const T* x, u32 ldx, T* y, u32 ldy, u32 kw, T alpha, T beta,
                    // u32 log_group, u32 skip). row_ptr has nrows+1 entries, col/val nnz (≥ 1);
                    // the views start at column j0, and element (i, j < kw) at i·k + j lies
                    // inside them (x: ncols·k − j0 elements, y: nrows·k − j0; checked above);
                    // one group of 2^log_group ≥ kw lanes per row, 2^log_group ≤ 32 divides the
                    // block.
                    unsafe { b.launch(Gpu::cfg(blocks, THREADS, 0)) }
                        .map_err(|e| Gpu::launch_error("spmm_row", e))?;
                    if has_long {
                        self.long_rows(a, &xv, ld, &mut yv, ld, kw, alpha, beta, true)?;
                    }
                }
            }
            Layout::ColMajor => {
                let (ldx, ldy, kw) = (m as u32, n as u32, k as u32);
                let log_group = Self::col_lanes_log2(a);
                let blocks = ((n as u64) << log_group).div_ceil(THREADS as u64) as u32;
                let mut b = self.gpu.stream().launch_builder(&self.col);
                b.arg(rp)
                    .arg(ci)
                    .arg(va)
                    .arg(&nrows)
                    .arg(x)
                    .arg(&ldx)
                    .arg(&mut *y)
                    .arg(&ldy)
                    .arg(&kw)
                    .arg(&alpha)
                    .arg(&beta)
                    .arg(&log_group)
                    .arg(&skip);
                // SAFETY: spmm_col_T has the signature of spmm_row_T. Column j of x starts at
                // j·ncols and of y at j·nrows; x has ncols·k and y nrows·k elements (checked);
                // one group of 2^log_group ≤ 32 lanes per row.
                unsafe { b.launch(Gpu::cfg(blocks, THREADS, 0)) }
                    .map_err(|e| Gpu::launch_error("spmm_col", e))?;
                if has_long {
                    self.long_rows(
                        a,
                        &x.slice(..),
                        ldx,
                        &mut y.slice_mut(..),
                        ldy,
                        kw,
                        alpha,
                        beta,
                        false,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// `spmm_long`: the rows of more than [`LONG_ROW`] entries, which the group kernels left,
    /// `kw` columns of `x`/`y` with leading dimensions `ldx`/`ldy`, in the row-major or the
    /// column-major layout.
    #[allow(clippy::too_many_arguments)]
    fn long_rows(
        &self,
        a: &GpuCsr<T>,
        x: &CudaView<'_, T>,
        ldx: u32,
        y: &mut CudaViewMut<'_, T>,
        ldy: u32,
        kw: u32,
        alpha: T,
        beta: T,
        rowmajor: bool,
    ) -> Result<()> {
        let (rp, ci, va) = a.device_parts();
        let nrows = a.nrows() as u32;
        // Windows of rows small enough to give every block of the grid some (a matrix of a few
        // hundred long rows gets a block per row), at most a block's threads.
        let max_blocks = self.gpu.sm_count() * LONG_BLOCKS_PER_SM;
        let window = nrows.div_ceil(max_blocks).clamp(1, THREADS);
        let blocks = nrows.div_ceil(window).clamp(1, max_blocks);
        let (skip, rowmajor) = (LONG_ROW as u32, u32::from(rowmajor));
        let mut b = self.gpu.stream().launch_builder(&self.long);
        b.arg(rp)
            .arg(ci)
            .arg(va)
            .arg(&nrows)
            .arg(x)
            .arg(&ldx)
            .arg(y)
            .arg(&ldy)
            .arg(&kw)
            .arg(&alpha)
            .arg(&beta)
            .arg(&skip)
            .arg(&window)
            .arg(&rowmajor);
        // SAFETY: spmm_long_T(const u32* row_ptr, const u32* col, const T* val, u32 nrows,
        // const T* x, u32 ldx, T* y, u32 ldy, u32 kw, T alpha, T beta, u32 skip, u32 window,
        // u32 rowmajor), window ≤ THREADS:
        // the same matrix and views as the group kernel just launched (element (i, j < kw) at
        // i·ld + j or j·ld + i inside them, checked by the caller); THREADS = SPMM_THREADS threads
        // per block, a multiple of 32 (the kernel's shared arrays are sized by it).
        unsafe { b.launch(Gpu::cfg(blocks, THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("spmm_long", e))?;
        Ok(())
    }
}
