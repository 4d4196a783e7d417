//! The GPU SpMV applied to several separate vectors in one launch
//! ([`GpuCsr::spmv_columns`]): the block product of the solvers with several right-hand
//! sides, whose columns are separate device buffers. The kernel (`kernels/spmv/spmv_columns.cu`)
//! follows the column-major SpMM kernel of `crate::spmm` and takes the column pointers by value
//! in its parameters, up to [`MAX_COLUMNS`] per launch: the matrix is read once per launch for
//! all its columns, and nothing is uploaded (a launch can be captured in a CUDA graph).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr};

use super::{GpuCsr, GpuScalar};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, PushKernelArg};

/// The kernel of [`GpuCsr::spmv_columns`].
pub const SPMV_COLUMNS_SRC: KernelSource = kernel_source!(
    "spmv/spmv_columns.cu",
    &[&crate::gpu::kernels::COMMON],
    &[
        ("SPMVC_THREADS", THREADS as i64),
        ("SPMVC_MAX", MAX_COLUMNS as i64),
        ("SPMVC_CW", CW as i64)
    ]
);

/// Columns per launch (`SPMVC_MAX`): the size of the pointer table in the kernel's parameters.
pub const MAX_COLUMNS: usize = 32;
/// Threads per block (`SPMVC_THREADS`).
const THREADS: u32 = 256;
/// Columns a lane sums at once (`SPMVC_CW`): each matrix entry it loads serves this many.
const CW: usize = 8;

/// The kernel's `ColumnPtrs<T>`: `MAX_COLUMNS` input and `MAX_COLUMNS` output pointers.
#[repr(C)]
#[derive(Clone, Copy)]
struct ColumnPtrs {
    x: [u64; MAX_COLUMNS],
    y: [u64; MAX_COLUMNS],
}

// SAFETY: plain old data of the layout of the kernel's `ColumnPtrs<T>` (two arrays of
// `SPMVC_MAX` device pointers), passed by value.
unsafe impl DeviceRepr for ColumnPtrs {}

impl<T: GpuScalar> GpuCsr<T> {
    /// `ys[j] ← α·A·xs[j] + β·ys[j]` for every `j`, reading the matrix once per
    /// [`MAX_COLUMNS`] columns (`β = 0` does not read `ys`). Queues the work on the GPU's stream.
    /// Column `j` equals [`GpuCsr::spmv`] of `xs[j]` to rounding (a row's additions may be
    /// ordered differently).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `xs` and `ys` differ in number or a column has the wrong
    /// length (named); a failed compile or launch.
    pub fn spmv_columns(
        &self,
        alpha: T,
        xs: &[&CudaSlice<T>],
        beta: T,
        ys: &mut [&mut CudaSlice<T>],
    ) -> Result<()> {
        if xs.len() != ys.len() {
            return Err(Error::InvalidInput(format!(
                "spmv_columns: {} input columns but {} output columns",
                xs.len(),
                ys.len()
            )));
        }
        let (n, m) = (self.nrows(), self.ncols());
        for (j, x) in xs.iter().enumerate() {
            if x.len() != m {
                return Err(Error::InvalidInput(format!(
                    "spmv_columns: input column {j} has {} entries, A has {m} columns",
                    x.len()
                )));
            }
        }
        for (j, y) in ys.iter().enumerate() {
            if y.len() != n {
                return Err(Error::InvalidInput(format!(
                    "spmv_columns: output column {j} has {} entries, A has {n} rows",
                    y.len()
                )));
            }
        }
        if n == 0 || xs.is_empty() {
            return Ok(());
        }
        let gpu = self.gpu().clone();
        let f = gpu.typed_function::<T>(&SPMV_COLUMNS_SRC, "spmv_columns", &[])?;
        let mean = self.row_stats().mean;
        let lanes = (mean / 8.0).clamp(1.0, 32.0) as u32;
        let mut log_group = 31 - lanes.leading_zeros();
        let blocks = |log: u32| ((n as u64) << log).div_ceil(THREADS as u64);
        // Long rows on few rows: more lanes per row while the grid covers fewer than two blocks
        // per SM and every lane keeps at least 4 entries of a mean row (raefsky2, 3242 rows of
        // 91: 8 lanes give 102 blocks on 132 SMs, 16 give 204).
        let want = 2 * u64::from(gpu.sm_count());
        while log_group < 5 && blocks(log_group) < want && mean >= f64::from(8u32 << log_group) {
            log_group += 1;
        }
        let blocks = blocks(log_group) as u32;
        // Still fewer than two blocks per SM: the groups of SPMVC_CW columns go to rows of
        // blocks of their own (poisson3d:24, 13,824 rows of 7: 54 blocks, 4 rows for 32
        // columns).
        let col_groups = |kw: usize| kw.div_ceil(CW) as u32;
        let split = |kw: usize| {
            (want.div_ceil(u64::from(blocks)) as u32)
                .min(col_groups(kw))
                .max(1)
        };
        let (rp, ci, va) = self.device_parts();
        let nrows = n as u32;
        let stream = gpu.stream().clone();
        for (xw, yw) in xs.chunks(MAX_COLUMNS).zip(ys.chunks_mut(MAX_COLUMNS)) {
            let mut ptrs = ColumnPtrs {
                x: [0; MAX_COLUMNS],
                y: [0; MAX_COLUMNS],
            };
            let mut guards = Vec::with_capacity(2 * xw.len());
            for (j, x) in xw.iter().enumerate() {
                let (p, g) = x.device_ptr(&stream);
                ptrs.x[j] = p;
                guards.push(g);
            }
            for (j, y) in yw.iter_mut().enumerate() {
                let (p, g) = y.device_ptr_mut(&stream);
                ptrs.y[j] = p;
                guards.push(g);
            }
            let kw = xw.len() as u32;
            let cfg = cudarc::driver::LaunchConfig {
                grid_dim: (blocks, split(xw.len()), 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(rp)
                .arg(ci)
                .arg(va)
                .arg(&nrows)
                .arg(&ptrs)
                .arg(&kw)
                .arg(&alpha)
                .arg(&beta)
                .arg(&log_group);
            // SAFETY: spmv_columns_T(const u32* row_ptr, const u32* col, const T* val, u32 nrows,
            // ColumnPtrs<T> p, u32 kw, T alpha, T beta, u32 log_group). row_ptr has nrows + 1
            // entries; the first kw ≤ SPMVC_MAX pointers of p.x point at ncols elements and of
            // p.y at nrows elements (checked above), the buffers outlive the launch (borrowed
            // for this call, on this stream); one group of 2^log_group ≤ 32 lanes per row; any
            // grid height (a row of blocks takes every gridDim.y-th group of SPMVC_CW columns).
            unsafe { b.launch(cfg) }.map_err(|e| Gpu::launch_error("spmv_columns", e))?;
            drop(guards);
        }
        Ok(())
    }
}
