//! The conjugate transpose `Aᴴ` of a complex matrix on the GPU, built from the uploaded matrix
//! (no second upload): the transpose's structure as [`super::transpose`] builds it (entry rows,
//! column counts and their scan, a stable radix sort of the entries by column), then one gather
//! of the values through the sort's permutation, conjugated (`kernels/sparse/adjoint.cu`).

use std::sync::Arc;

use cudarc::driver::PushKernelArg;

use super::{grid, transpose_pattern};
use crate::error::Result;
use crate::gpu::kernels::{kernel_source, COMPLEX_H};
use crate::gpu::kernels::{KernelSource, COMMON};
use crate::gpu::{Gpu, KernelType};
use crate::spmv::gpu::complex::{ComplexSpmvAlgorithm, GpuComplexCsr};
use crate::Elem;

/// The conjugating gather of [`conj_transpose`].
pub const ADJOINT_SRC: KernelSource = kernel_source!("sparse/adjoint.cu", &[&COMMON, &COMPLEX_H]);

/// `Aᴴ` of the complex matrix `a` on its device, with `alg` resolved for the transpose's rows
/// (its rows are sorted when `a`'s are: the sort by column is stable). `a` stays as it is; the
/// result holds its own arrays. With it, `y ← Aᴴ·x` is [`GpuComplexCsr::spmv`] of the result.
///
/// # Errors
/// CUDA errors with their context (out of device memory names the sizes).
pub fn conj_transpose<T: Elem>(
    a: &GpuComplexCsr<T>,
    alg: ComplexSpmvAlgorithm,
) -> Result<GpuComplexCsr<T>>
where
    T::Dev: KernelType,
{
    let g: &Arc<Gpu> = a.gpu();
    let (m, n, nnz) = (a.nrows(), a.ncols(), a.nnz());
    let (row_ptr, col, val) = a.device_parts();
    let Some(p) = transpose_pattern(g, row_ptr, col, (m, n, nnz))? else {
        return GpuComplexCsr::from_device_parts(
            g,
            (n, m, 0),
            (
                g.zeros::<u32>(n + 1)?,
                g.zeros::<u32>(1)?,
                g.zeros::<T::Dev>(1)?,
            ),
            alg,
        );
    };
    let nnz32 = nnz as u32;
    // SAFETY: the gather writes all nnz entries of both.
    let (mut tcol, mut tval) = unsafe { (g.alloc::<u32>(nnz)?, g.alloc::<T::Dev>(nnz)?) };
    let k = g.typed_function::<T::Dev>(&ADJOINT_SRC, "sparse_conj_gather", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(&p.perm)
        .arg(&p.rows)
        .arg(val)
        .arg(&nnz32)
        .arg(&mut tcol)
        .arg(&mut tval);
    // SAFETY: sparse_conj_gather_<c>(const u32* perm, const u32* rows, const C* val, u32 nnz,
    // u32* tcol, C* tval): perm a permutation of 0..nnz, rows and val nnz, outputs nnz.
    unsafe { lb.launch(Gpu::cfg(grid(g, nnz, 256), 256, 0)) }
        .map_err(|e| Gpu::launch_error("sparse_conj_gather", e))?;
    GpuComplexCsr::from_device_parts(g, (n, m, nnz), (p.row_ptr, tcol, tval), alg)
}
