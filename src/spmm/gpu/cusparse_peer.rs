//! cuSPARSE `cusparseSpMM` on a [`GpuCsr`]'s arrays: the peer the GPU SpMM is measured against
//! (benchmarks) and checked against (tests). Used as a cuSPARSE user would: descriptors and the
//! external buffer are created once (and `cusparseSpMM_preprocess` run where the algorithm has
//! one); each product is one `cusparseSpMM` call queued on the [`Gpu`](crate::gpu::Gpu)'s stream.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::super::{check_shapes, Layout};
use crate::error::{Error, Result};
use crate::gpu::cusparse::{check, data_type, sys, Cusparse, DnMat, SpMat};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

/// The cuSPARSE CSR SpMM algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CusparseSpmmAlg {
    /// `CUSPARSE_SPMM_ALG_DEFAULT`.
    Default,
    /// `CUSPARSE_SPMM_CSR_ALG1`.
    Alg1,
    /// `CUSPARSE_SPMM_CSR_ALG2` (row-major blocks; deterministic).
    Alg2,
    /// `CUSPARSE_SPMM_CSR_ALG3`.
    Alg3,
}

impl CusparseSpmmAlg {
    /// Every algorithm, for "best of" peer measurements.
    pub const ALL: [CusparseSpmmAlg; 4] = [
        CusparseSpmmAlg::Default,
        CusparseSpmmAlg::Alg1,
        CusparseSpmmAlg::Alg2,
        CusparseSpmmAlg::Alg3,
    ];

    /// `"cusparse-default"`, `"cusparse-alg1"`, ...
    pub fn name(self) -> &'static str {
        match self {
            CusparseSpmmAlg::Default => "cusparse-default",
            CusparseSpmmAlg::Alg1 => "cusparse-alg1",
            CusparseSpmmAlg::Alg2 => "cusparse-alg2",
            CusparseSpmmAlg::Alg3 => "cusparse-alg3",
        }
    }

    fn raw(self) -> sys::cusparseSpMMAlg_t {
        use sys::cusparseSpMMAlg_t as A;
        match self {
            CusparseSpmmAlg::Default => A::CUSPARSE_SPMM_ALG_DEFAULT,
            CusparseSpmmAlg::Alg1 => A::CUSPARSE_SPMM_CSR_ALG1,
            CusparseSpmmAlg::Alg2 => A::CUSPARSE_SPMM_CSR_ALG2,
            CusparseSpmmAlg::Alg3 => A::CUSPARSE_SPMM_CSR_ALG3,
        }
    }
}

fn order(layout: Layout) -> sys::cusparseOrder_t {
    match layout {
        Layout::RowMajor => sys::cusparseOrder_t::CUSPARSE_ORDER_ROW,
        Layout::ColMajor => sys::cusparseOrder_t::CUSPARSE_ORDER_COL,
    }
}

/// A prepared `cusparseSpMM` (handle, descriptors, buffer) for one matrix, `k` and layout.
pub struct CusparseSpmm<'a, T: GpuScalar> {
    cs: Cusparse,
    mat: SpMat,
    mx: DnMat,
    my: DnMat,
    buffer: CudaSlice<u64>,
    alg: CusparseSpmmAlg,
    alpha: T,
    beta: T,
    shape: (usize, usize, usize),
    _matrix: PhantomData<&'a GpuCsr<T>>,
}

impl<'a, T: GpuScalar> CusparseSpmm<'a, T> {
    /// Creates the handle and descriptors for `a` and `k` columns in `layout`, sizes the
    /// buffer, and runs `cusparseSpMM_preprocess` for `CSR_ALG3` (the one algorithm that has
    /// it).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for bad shapes; [`Error::Cusparse`] when the library is absent or
    /// a call fails (the call is named; an algorithm that does not support the layout fails
    /// here with `CUSPARSE_STATUS_NOT_SUPPORTED`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a: &'a GpuCsr<T>,
        alg: CusparseSpmmAlg,
        layout: Layout,
        k: usize,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<Self> {
        let (n, m) = (a.nrows(), a.ncols());
        check_shapes("cuSPARSE spmm", n, m, k, x.len(), y.len())?;
        if n == 0 || m == 0 {
            return Err(Error::InvalidInput(
                "cuSPARSE spmm: empty matrix (cuSPARSE rejects zero dimensions)".into(),
            ));
        }
        let cs = Cusparse::new(a.gpu())?;
        let stream = a.gpu().stream().clone();
        let dt = data_type::<T>();
        let (ldx, ldy) = match layout {
            Layout::RowMajor => (k, k),
            Layout::ColMajor => (m, n),
        };
        // SAFETY: the pointers are live device allocations of the sizes described (row_ptr
        // nrows+1, col/val nnz, x ncols·k, y nrows·k with the leading dimensions of `layout`);
        // cuSPARSE only reads the matrix and x. The descriptors destroy themselves.
        let (mat, mx, my) = unsafe {
            let shape = (n, m, a.nnz());
            let mat = SpMat::csr(shape, Some(a.device_parts()), &stream, "cusparseCreateCsr")?;
            let (xp, _rx) = x.device_ptr(&stream);
            let (yp, _ry) = y.device_ptr_mut(&stream);
            let mx = DnMat::new::<T>((m, k, ldx), xp, order(layout), "cusparseCreateDnMat(X)")?;
            (
                mat,
                mx,
                DnMat::new::<T>((n, k, ldy), yp, order(layout), "cusparseCreateDnMat(Y)")?,
            )
        };
        let mut me = CusparseSpmm {
            cs,
            mat,
            mx,
            my,
            buffer: a.gpu().zeros::<u64>(1)?,
            alg,
            alpha,
            beta,
            shape: (n, m, k),
            _matrix: PhantomData,
        };
        let op = sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        // SAFETY: the descriptors are live; the buffer is sized by the first call.
        unsafe {
            let mut size = 0usize;
            check(
                sys::cusparseSpMM_bufferSize(
                    me.cs.handle(),
                    op,
                    op,
                    &me.alpha as *const T as *const c_void,
                    me.mat.raw(),
                    me.mx.raw(),
                    &me.beta as *const T as *const c_void,
                    me.my.raw(),
                    dt,
                    alg.raw(),
                    &mut size,
                ),
                "cusparseSpMM_bufferSize",
            )?;
            me.buffer = a.gpu().zeros::<u64>(size.div_ceil(8).max(1))?;
            if alg == CusparseSpmmAlg::Alg3 {
                let (bp, _rb) = me.buffer.device_ptr_mut(&stream);
                check(
                    sys::cusparseSpMM_preprocess(
                        me.cs.handle(),
                        op,
                        op,
                        &me.alpha as *const T as *const c_void,
                        me.mat.raw(),
                        me.mx.raw(),
                        &me.beta as *const T as *const c_void,
                        me.my.raw(),
                        dt,
                        alg.raw(),
                        bp as *mut c_void,
                    ),
                    "cusparseSpMM_preprocess",
                )?;
            }
        }
        Ok(me)
    }

    /// The algorithm.
    pub fn alg(&self) -> CusparseSpmmAlg {
        self.alg
    }

    /// `Y ← α·A·X + β·Y` by `cusparseSpMM` (queued on the GPU's stream).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `x`/`y` do not have the lengths given to
    /// [`new`](Self::new); [`Error::Cusparse`] naming a failed call.
    pub fn spmm(
        &mut self,
        alpha: T,
        x: &CudaSlice<T>,
        beta: T,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (n, m, k) = self.shape;
        check_shapes("cuSPARSE spmm", n, m, k, x.len(), y.len())?;
        self.alpha = alpha;
        self.beta = beta;
        let stream = self.cs.gpu().stream().clone();
        let (xp, _rx) = x.device_ptr(&stream);
        let (yp, _ry) = y.device_ptr_mut(&stream);
        let (bp, _rb) = self.buffer.device_ptr_mut(&stream);
        let op = sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        // SAFETY: descriptors are live; x/y are live allocations of the described sizes (checked
        // above); the buffer was sized by cusparseSpMM_bufferSize for this matrix and layout.
        unsafe {
            check(
                sys::cusparseDnMatSetValues(self.mx.raw(), xp as *mut c_void),
                "cusparseDnMatSetValues(X)",
            )?;
            check(
                sys::cusparseDnMatSetValues(self.my.raw(), yp as *mut c_void),
                "cusparseDnMatSetValues(Y)",
            )?;
            check(
                sys::cusparseSpMM(
                    self.cs.handle(),
                    op,
                    op,
                    &self.alpha as *const T as *const c_void,
                    self.mat.raw(),
                    self.mx.raw(),
                    &self.beta as *const T as *const c_void,
                    self.my.raw(),
                    data_type::<T>(),
                    self.alg.raw(),
                    bp as *mut c_void,
                ),
                "cusparseSpMM",
            )
        }
    }
}
