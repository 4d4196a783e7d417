//! The statistics of a matrix on the GPU (`kernels/precond/auto_stats.cu`): the row sizes, then
//! two passes that reduce every statistic per block; `2 × blocks × 12` doubles come back, no copy
//! of the matrix. A thread walks each row of at most [`WARP`] entries, its warp a row of at most
//! [`LONG`] (3-D elasticity's and vector P2 elements' 81-entry rows), a whole block a longer one
//! (a hub of a power-law graph; the second pass, one block per long row spread over the grid),
//! so the passes cost about what an SpMV costs on any degree distribution. Equal to the host's
//! [`MatrixStats::with_levels`] (without the level count) on every matrix with sorted rows; a
//! matrix with an unsorted row is measured on the host from a sorted copy.

use super::{square, symmetry_tolerance, MatrixStats, Partial, StatsOps};
use crate::backend::gpu::GpuOps;
use crate::backend::GpuScalar;
use crate::error::Result;
use crate::gpu::kernels::{KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::precond::Jacobi;
use crate::spmv::gpu::GpuCsr;
use cudarc::driver::CudaSlice;

/// Threads per block of both kernels (the host adds a long row's sums in this block's order).
const BLOCK: u32 = super::STATS_BLOCK as u32;
/// Doubles per block of the partial statistics (the `F_*` slots of the kernel).
const FIELDS: usize = 12;
/// Rows longer than this are walked by a warp, not one thread.
pub const WARP: u32 = super::STATS_WARP as u32;
/// Rows longer than this are walked by a whole block, not a warp.
pub const LONG: u32 = super::STATS_LONG as u32;

/// `kernels/precond/auto_stats.cu`: the automatic choice's statistics.
pub const AUTO_STATS_SRC: KernelSource = KernelSource {
    name: "precond/auto_stats.cu",
    text: include_str!("../../../kernels/precond/auto_stats.cu"),
    headers: &[&COMMON],
    constants: &[
        ("AUTO_STATS_BLOCK", BLOCK as i64),
        ("AUTO_STATS_FIELDS", FIELDS as i64),
        ("AUTO_STATS_WARP", WARP as i64),
        ("AUTO_STATS_LONG", LONG as i64),
    ],
};

/// [`MatrixStats`] of the square GPU matrix `a` without the level count, computed on the
/// device (the host's statistics of a downloaded, sorted copy where a row is unsorted).
///
/// # Errors
/// A non-square matrix; CUDA errors with the kernel's name.
pub fn matrix_stats<T: GpuScalar>(a: &GpuCsr<T>) -> Result<MatrixStats> {
    square(a.nrows(), a.ncols())?;
    let (n, nnz) = (a.nrows(), a.nnz());
    let tol = symmetry_tolerance::<T>();
    if n == 0 {
        return Ok(Partial::EMPTY.finish(0, 0, tol));
    }
    let g = a.gpu();
    let (rp, col, val) = a.device_parts();
    let n32 = u32::try_from(n).map_err(|_| {
        crate::error::Error::InvalidInput(format!("{n} rows exceed the GPU's 32-bit indices"))
    })?;
    let blocks = (n.div_ceil(BLOCK as usize) as u32).clamp(1, g.sm_count() * 8);
    let mut scale = g.zeros::<f64>(n)?;
    // Two passes' partials (short rows, then the long rows by a block each), and the list of
    // long rows: at most nnz / (LONG + 1) of them.
    let mut part = g.zeros::<f64>(2 * blocks as usize * FIELDS)?;
    let mut long_rows = g.zeros::<u32>(nnz / (LONG as usize + 1) + 1)?;
    let mut long_count = g.zeros::<u32>(1)?;
    let k = g.typed_function::<T>(&AUTO_STATS_SRC, "auto_row_scale", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(rp).arg(val).arg(&n32).arg(&mut scale);
    // SAFETY: auto_row_scale_T(const u32* rp, const T* val, u32 n, double* s): rp has n + 1
    // entries, val nnz (≥ 1), s n.
    unsafe { lb.launch(Gpu::cfg(blocks, BLOCK, 0)) }
        .map_err(|e| Gpu::launch_error("auto_row_scale", e))?;
    let k = g.typed_function::<T>(&AUTO_STATS_SRC, "auto_stats", &[])?;
    for pass in 0u32..2 {
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(rp)
            .arg(col)
            .arg(val)
            .arg(&n32)
            .arg(&scale)
            .arg(&tol)
            .arg(&mut long_rows)
            .arg(&mut long_count)
            .arg(&pass)
            .arg(&mut part);
        // SAFETY: auto_stats_T(const u32* rp, const u32* col, const T* val, u32 n, const double*
        // s, double tol, u32* long_rows, u32* long_count, u32 pass, double* part): rp n + 1
        // entries, col and val nnz (≥ 1), every column < n (a checked square GpuCsr), s n;
        // long_rows holds nnz / (LONG + 1) + 1 ≥ the rows longer than LONG, long_count one
        // (zeroed, counted by pass 0, read by pass 1 after it on the same stream); part
        // `2 × blocks × FIELDS` (pass p writes rows p·blocks .. (p + 1)·blocks).
        unsafe { lb.launch(Gpu::cfg(blocks, BLOCK, 0)) }
            .map_err(|e| Gpu::launch_error("auto_stats", e))?;
    }
    let host = g.download(&part)?;
    let mut p = Partial::EMPTY;
    let mut unsorted = 0.0;
    for f in host.chunks_exact(FIELDS) {
        unsorted += f[10];
        p = p.merge(Partial {
            missing: f[0] as usize,
            negative: f[1] as usize,
            nonpositive: f[2] as usize,
            dmin: f[3],
            dmax: f[4],
            opposite: f[5] as usize,
            offdiag: f[6] as usize,
            min_dom: f[7],
            asymmetry: f[8],
            nonfinite: f[9] as usize,
            negative_sum: f[11] as usize,
        });
    }
    if unsorted > 0.0 {
        let h = crate::sparse::gpu::CsrView::from(a).download(g)?;
        return Ok(MatrixStats::with_levels(&h, false));
    }
    Ok(MatrixStats {
        row_spread: super::row_spread(a.row_stats()),
        ..p.finish(n, nnz, tol)
    })
}

impl<T: GpuScalar> StatsOps<T> for GpuOps<T> {
    fn matrix_stats(&self, a: &GpuCsr<T>) -> Result<MatrixStats> {
        matrix_stats(a)
    }
    fn matrix_diagonal(&self, a: &GpuCsr<T>) -> Result<Vec<T>> {
        let g = a.gpu();
        let mut d = g.download(&crate::sparse::gpu::diagonal(g, a)?)?;
        d.truncate(a.nrows().min(a.ncols()));
        Ok(d)
    }
    fn jacobi(&self, a: &GpuCsr<T>) -> Result<Jacobi<CudaSlice<T>>> {
        let n = a.nrows().min(a.ncols());
        let g = a.gpu();
        let (rp, col, val) = a.device_parts();
        let n32 = u32::try_from(n).map_err(|_| {
            crate::error::Error::InvalidInput(format!("{n} rows exceed the GPU's 32-bit indices"))
        })?;
        if n == 0 || a.nnz() == 0 {
            return Jacobi::from_diagonal(self, &self.matrix_diagonal(a)?);
        }
        let mut inv = g.zeros::<T>(n)?;
        let mut bad = g.upload(&[u32::MAX])?;
        let k = g.typed_function::<T>(&AUTO_STATS_SRC, "auto_inverse_diagonal", &[])?;
        let blocks = (n.div_ceil(BLOCK as usize) as u32).clamp(1, g.sm_count() * 8);
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(rp)
            .arg(col)
            .arg(val)
            .arg(&n32)
            .arg(&mut inv)
            .arg(&mut bad);
        // SAFETY: auto_inverse_diagonal_T(const u32* rp, const u32* col, const T* val, u32 n,
        // T* inv, u32* bad): rp has n + 1 ≥ min(rows, cols) + 1 entries, col and val nnz (≥ 1),
        // inv n, bad one.
        unsafe { lb.launch(Gpu::cfg(blocks, BLOCK, 0)) }
            .map_err(|e| Gpu::launch_error("auto_inverse_diagonal", e))?;
        if g.download(&bad)?[0] != u32::MAX {
            // A diagonal entry not found (an unsorted row), zero or not finite: the host's
            // check names the row.
            return Jacobi::from_diagonal(self, &self.matrix_diagonal(a)?);
        }
        Ok(Jacobi::from_inverse_diagonal(inv))
    }
    fn matrix_fingerprint(&self, a: &GpuCsr<T>) -> u64 {
        a.fingerprint()
    }
}
