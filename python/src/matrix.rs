//! `_Matrix`: a CSR matrix held by the crate, on the CPU and (when a GPU works) uploaded once;
//! its SpMV and the iterative solvers.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{BlockKrylovOps, Cpu, Identity, LinearOperator, Preconditioner};
use segsparse::csr::check_gpu::{
    upload_bytes, upload_csr, HostIndices, HostValues, Staging, DIRECT_BYTES, STAGING_CHUNK,
};
use segsparse::gpu::{DeviceBuffer, Preparing};
use segsparse::precond::amg::prepare_device_setup;
use segsparse::precond::{Amg, AmgOps, AmgParams, Chebyshev, ChebyshevParams, Jacobi};
use segsparse::solvers::multi::{self, MultiInfo};
use segsparse::solvers::{SolveError, SolveInfo, SolveParams};
use segsparse::spmm::Layout;
use segsparse::spmv::gpu::GpuCsr;
use segsparse::{Complex, CsrMatrix, Scalar};

use crate::arrays::{csr_from_arrays, with_vectors, Elem};
use crate::complex::{self as cx, CMat};
use crate::device::{device, with_borrowed, Borrowed, BorrowedColumns, DevicePair};
use crate::errors::{check_len, not_on_gpu, run, run_held, Failure, Res};
use crate::hierarchy::{AmgOn, PyAmg};
use crate::outcome::{outcome, Outcome, Timed};
use crate::solve::{call, Held, Method, Opts, Precond, PyOptions};

/// The GPU side of a matrix: the uploaded CSR, and the solver kernels and Jacobi diagonal,
/// created on first use.
pub(crate) struct DevMat<T: Elem> {
    pub(crate) csr: GpuCsr<T>,
    ops: Mutex<Option<Arc<GpuOps<T>>>>,
    jacobi: Mutex<Option<Arc<Jacobi<DeviceBuffer<T>>>>>,
    /// The modules of the solvers and of an AMG setup, loading on background threads since
    /// the upload began ([`prepare_modules`]; dropped with the matrix, which waits for them).
    _loading: [Preparing; 2],
}

/// Starts loading, on background threads, the kernel modules that the first solve or AMG setup
/// with a matrix of `T` needs ([`GpuOps::prepare_in_background`], then
/// [`prepare_device_setup`]), so that they load while the matrix is uploaded instead of inside
/// that first call (what `sparse-solve` does before its upload). A module is loaded once per
/// process: for a later matrix this starts nothing.
fn prepare_modules<T: Elem>(gpu: &Arc<segsparse::gpu::Gpu>) -> [Preparing; 2] {
    [
        GpuOps::<T>::prepare_in_background(gpu),
        prepare_device_setup::<T>(gpu),
    ]
}

/// One precision of a matrix. A matrix on the GPU keeps no host copy until one is needed (a
/// preconditioner set up on the host, `to_arrays`, writing a file): it is then downloaded once.
pub struct Mat<T: Elem> {
    host: OnceLock<CsrMatrix<T>>,
    pub(crate) shape: (usize, usize),
    nnz: usize,
    pub(crate) dev: Option<DevMat<T>>,
    jacobi: Mutex<Option<Arc<Jacobi<Vec<T>>>>>,
    /// Where the construction's seconds went (name, seconds), for `upload_seconds`.
    timing: Vec<(&'static str, f64)>,
    /// `storage='float32'`: the values rounded to f32 (with the exact ones for true residuals),
    /// made on the first such solve where the matrix lives and kept, or why f32 cannot hold
    /// them. The values of a `_Matrix` never change, so the copy stays valid for its life.
    f32_copy: OnceLock<F32Copy>,
    /// How many f32 copies were made (at most one: the solves' test observes it).
    f32_copies: std::sync::atomic::AtomicUsize,
}

/// The f32 copy of a float64 matrix where it lives, or the sentence that refused it.
enum F32Copy {
    Host(Result<segsparse::spmv::mixed::MixedCsr, String>),
    Gpu(Result<Box<segsparse::spmv::gpu::mixed::GpuMixedCsr>, String>),
}

pub(crate) enum Inner {
    F32(Mat<f32>),
    F64(Mat<f64>),
    C64(CMat<Complex<f32>>),
    C128(CMat<Complex<f64>>),
}

/// Runs `$body` with `$m` bound to a real matrix of either precision (`$t` its element type),
/// or `$cbody` with `$c` bound to a complex one (`$ct` its element type).
macro_rules! with_mat {
    ($self:expr, $m:ident, $t:ident => $body:expr; $c:ident, $ct:ident => $cbody:expr) => {
        match &$self.inner {
            Inner::F32($m) => {
                type $t = f32;
                $body
            }
            Inner::F64($m) => {
                type $t = f64;
                $body
            }
            Inner::C64($c) => {
                type $ct = Complex<f32>;
                $cbody
            }
            Inner::C128($c) => {
                type $ct = Complex<f64>;
                $cbody
            }
        }
    };
}

/// The error of a real-only feature asked of a complex matrix.
fn real_only(what: &str) -> Failure {
    Failure::Value(format!(
        "{what} is for real matrices (float32/float64); this matrix is complex"
    ))
}

/// Where a matrix lives, as asked by the caller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Auto,
    Gpu,
    Cpu,
}

fn want(device: &str) -> Res<Want> {
    match device {
        "auto" => Ok(Want::Auto),
        "gpu" | "cuda" => Ok(Want::Gpu),
        "cpu" => Ok(Want::Cpu),
        other => Err(Failure::Value(format!(
            "device must be 'auto', 'gpu' or 'cpu', not {other:?}"
        ))),
    }
}

/// Index arrays as the crate's `u32`, from the integer dtypes SciPy uses. One copy (the crate's
/// `CsrMatrix` owns its arrays); negative or too large indices are reported by value.
pub(crate) fn indices(a: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u32>> {
    let bad = |v: i64| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "{what}: index {v} is outside the 32-bit unsigned range of segsparse"
        ))
    };
    if let Ok(v) = a.extract::<PyReadonlyArray1<'_, i32>>() {
        let s = v.as_slice()?;
        return s
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| bad(i as i64)))
            .collect();
    }
    if let Ok(v) = a.extract::<PyReadonlyArray1<'_, u32>>() {
        return Ok(v.as_slice()?.to_vec());
    }
    if let Ok(v) = a.extract::<PyReadonlyArray1<'_, i64>>() {
        let s = v.as_slice()?;
        return s
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| bad(i)))
            .collect();
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "{what} must be a contiguous 1-D int32, uint32 or int64 array"
    )))
}

/// An index array as the caller's NumPy array, borrowed for the upload.
enum IdxArr<'py> {
    I32(PyReadonlyArray1<'py, i32>),
    U32(PyReadonlyArray1<'py, u32>),
    I64(PyReadonlyArray1<'py, i64>),
}

impl<'py> IdxArr<'py> {
    fn of(a: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        if let Ok(v) = a.extract::<PyReadonlyArray1<'py, i32>>() {
            return Ok(IdxArr::I32(v));
        }
        if let Ok(v) = a.extract::<PyReadonlyArray1<'py, u32>>() {
            return Ok(IdxArr::U32(v));
        }
        if let Ok(v) = a.extract::<PyReadonlyArray1<'py, i64>>() {
            return Ok(IdxArr::I64(v));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be a contiguous 1-D int32, uint32 or int64 array"
        )))
    }
    fn host(&self) -> PyResult<HostIndices<'_>> {
        Ok(match self {
            IdxArr::I32(v) => HostIndices::I32(v.as_slice()?),
            IdxArr::U32(v) => HostIndices::U32(v.as_slice()?),
            IdxArr::I64(v) => HostIndices::I64(v.as_slice()?),
        })
    }
}

/// A value array as the caller's NumPy array (float32 or float64), borrowed for the upload.
enum ValArr<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
}

impl<'py> ValArr<'py> {
    fn of(a: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(v) = a.extract::<PyReadonlyArray1<'py, f32>>() {
            return Ok(ValArr::F32(v));
        }
        if let Ok(v) = a.extract::<PyReadonlyArray1<'py, f64>>() {
            return Ok(ValArr::F64(v));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(
            "data must be a contiguous 1-D float32 or float64 array",
        ))
    }
    fn host(&self) -> PyResult<HostValues<'_>> {
        Ok(match self {
            ValArr::F32(v) => HostValues::F32(v.as_slice()?),
            ValArr::F64(v) => HostValues::F64(v.as_slice()?),
        })
    }
}

/// An index outside the 32-bit range is reported as the host path reports it (a plain
/// `ValueError` naming the array and the value).
fn range_error(f: Failure) -> Failure {
    match f {
        Failure::Crate(segsparse::Error::InvalidInput(m))
            if m.contains("outside the 32-bit unsigned range") =>
        {
            Failure::Value(m)
        }
        f => f,
    }
}

/// A real matrix from its checked host CSR (built from `t0` on), uploaded as `want` says.
fn build<T: Elem>(host: CsrMatrix<T>, t0: Instant, want: Want) -> Res<Mat<T>> {
    let dev = match want {
        Want::Cpu => None,
        Want::Gpu => Some(upload(&host)?),
        Want::Auto => match device() {
            Ok(_) => Some(upload(&host)?),
            Err(_) => None,
        },
    };
    let nnz = host.nnz();
    Ok(Mat {
        shape: host.shape(),
        host: OnceLock::from(host),
        nnz,
        dev,
        jacobi: Mutex::new(None),
        timing: vec![("total", t0.elapsed().as_secs_f64())],
        f32_copy: OnceLock::new(),
        f32_copies: Default::default(),
    })
}

/// The pinned staging buffers kept between uploads when the caller asks (`reuse_buffers`).
static STAGING: Mutex<Option<Staging>> = Mutex::new(None);

/// Frees the pinned staging buffers kept by `reuse_buffers=True` (if any); returns their bytes.
#[pyfunction]
pub fn release_upload_buffers() -> usize {
    let mut kept = STAGING.lock().unwrap_or_else(|p| p.into_inner());
    kept.take().map_or(0, |s| s.bytes())
}

/// Builds a GPU matrix straight from the caller's arrays: one copy through pinned staging,
/// checks and conversions on the device (`segsparse::csr::check_gpu`), the SpMV tables from
/// the device arrays. No host copy is kept.
fn build_on_gpu<T: Elem + cudarc::driver::ValidAsZeroBits>(
    shape: (usize, usize),
    rp: HostIndices<'_>,
    ci: HostIndices<'_>,
    vals: HostValues<'_>,
    reuse: bool,
) -> Res<Mat<T>> {
    let t0 = Instant::now();
    let d = device()?;
    let gpu = &d.gpu;
    let loading = prepare_modules::<T>(gpu);
    let mut kept = STAGING.lock().unwrap_or_else(|p| p.into_inner());
    let had = kept.is_some();
    let ts = Instant::now();
    let mut staging = match kept.take() {
        Some(s) => Some(s),
        None if upload_bytes(&rp, &ci, &vals) >= DIRECT_BYTES => {
            Some(Staging::new(gpu, STAGING_CHUNK)?)
        }
        None => None,
    };
    let staging_s = ts.elapsed().as_secs_f64();
    let r = upload_csr::<T>(gpu, staging.as_mut(), shape, rp, ci, vals);
    if reuse || had {
        // Kept: asked for now, or kept by an earlier call (freed by release_upload_buffers).
        *kept = staging;
    } else {
        drop(kept);
        drop(staging);
    }
    let (parts, times) = r?;
    let tt = Instant::now();
    let csr =
        GpuCsr::from_device_parts(gpu, shape.0, shape.1, parts.row_ptr, parts.col, parts.val)?;
    let tables = tt.elapsed().as_secs_f64();
    let nnz = csr.nnz();
    Ok(Mat {
        host: OnceLock::new(),
        shape,
        nnz,
        dev: Some(DevMat {
            csr,
            ops: Mutex::new(None),
            jacobi: Mutex::new(None),
            _loading: loading,
        }),
        jacobi: Mutex::new(None),
        timing: vec![
            ("staging", staging_s),
            ("copy", times.copy),
            ("check", times.check),
            ("tables", tables),
            ("total", t0.elapsed().as_secs_f64()),
        ],
        f32_copy: OnceLock::new(),
        f32_copies: Default::default(),
    })
}

fn upload<T: Elem>(host: &CsrMatrix<T>) -> Res<DevMat<T>> {
    let d = device()?;
    let loading = prepare_modules::<T>(&d.gpu);
    Ok(DevMat {
        csr: GpuCsr::upload(&d.gpu, host)?,
        ops: Mutex::new(None),
        jacobi: Mutex::new(None),
        _loading: loading,
    })
}

/// Several right-hand sides solved as one block (`solvers::multi`): the columns, the solutions,
/// and where the outcome goes.
struct BlockRhs<'a, V> {
    bs: &'a [V],
    xs: &'a mut [V],
    out: Option<Result<MultiInfo, SolveError>>,
}

/// One body for both backends: dispatch on the method and the preconditioner. `t0` is when the
/// call's setup began: setup runs from there to the solver call, which is timed on its own.
#[allow(clippy::too_many_arguments)]
fn solve_with<'m, T, B, A>(
    be: &B,
    a: &A,
    m: &dyn Fn() -> segsparse::Result<&'m CsrMatrix<T>>,
    jac: Option<&Jacobi<B::Vector>>,
    amg: Option<&dyn Preconditioner<T, B>>,
    o: &Opts,
    b: &B::Vector,
    x: &mut B::Vector,
    t0: Instant,
    mut block: Option<&mut BlockRhs<'_, B::Vector>>,
) -> Timed
where
    T: Scalar,
    B: BlockKrylovOps<T> + segsparse::precond::IncompleteOps<T> + AmgOps<T>,
    A: LinearOperator<T, B>
        + std::borrow::Borrow<<B as segsparse::backend::MultigridOps<T>>::Matrix>,
    Jacobi<B::Vector>: segsparse::backend::Preconditioner<T, B>,
{
    #[allow(clippy::too_many_arguments)]
    fn with<T, B, A>(
        be: &B,
        a: &A,
        p: &dyn segsparse::backend::Preconditioner<T, B>,
        o: &Opts,
        b: &B::Vector,
        x: &mut B::Vector,
        t0: Instant,
        block: Option<&mut BlockRhs<'_, B::Vector>>,
    ) -> Timed
    where
        T: Scalar,
        B: BlockKrylovOps<T>,
        A: LinearOperator<T, B>,
    {
        if let Some(blk) = block {
            let setup = t0.elapsed().as_secs_f64();
            let t = Instant::now();
            let (bs, xs) = (blk.bs, &mut *blk.xs);
            blk.out = Some(match o.method {
                // COCG of a real matrix is CG.
                Method::Cg | Method::Cocg => multi::pcg(be, a, p, bs, xs, &o.params),
                Method::Bicgstab => multi::bicgstab(be, a, p, bs, xs, &o.params),
                Method::Gmres(m) => multi::gmres(be, a, p, bs, xs, m, &o.params),
                Method::Minres => Err(SolveError::Backend(segsparse::Error::InvalidInput(
                    "minres has no multi-column solver: solve the columns of a 2-D b one by one"
                        .into(),
                ))),
            });
            return (Ok(SolveInfo::default()), setup, t.elapsed().as_secs_f64());
        }
        call(be, a, p, o, &o.params, b, x, t0)
    }
    let failed =
        |e: segsparse::Error| (Err(SolveError::Backend(e)), t0.elapsed().as_secs_f64(), 0.0);
    match (o.precond, jac) {
        (Precond::None, _) if o.method == Method::Cg => {
            with(be, a, &Identity, o, b, x, t0, block.take())
        }
        (Precond::Jacobi, Some(j)) => with(be, a, j, o, b, x, t0, block.take()),
        (Precond::Poly(degree), _) => {
            let params = ChebyshevParams {
                degree,
                ..Default::default()
            };
            let m = match m() {
                Ok(m) => m,
                Err(e) => return failed(e),
            };
            match Chebyshev::from_matrix(be, a, m, &params) {
                Ok(p) => with(be, a, &p, o, b, x, t0, block.take()),
                Err(e) => failed(e),
            }
        }
        (Precond::Ilu0(auto) | Precond::Ic0(auto), _) => {
            use segsparse::precond::auto::auto_incomplete_params;
            use segsparse::precond::{Ic0, Ilu0, IncompleteParams};
            let ip = if auto {
                auto_incomplete_params()
            } else {
                IncompleteParams {
                    auto_shift: true,
                    ..Default::default()
                }
            };
            let m = match m() {
                Ok(m) => m,
                Err(e) => return failed(e),
            };
            if matches!(o.precond, Precond::Ilu0(_)) {
                match Ilu0::new(be, m, &ip) {
                    Ok(p) => with(be, a, &p, o, b, x, t0, block.take()),
                    Err(e) => failed(e),
                }
            } else {
                match Ic0::new(be, m, &ip) {
                    Ok(p) => with(be, a, &p, o, b, x, t0, block.take()),
                    Err(e) => failed(e),
                }
            }
        }
        (Precond::Amg, _) => match amg {
            Some(h) => with(be, a, h, o, b, x, t0, block.take()),
            // From the matrix where it lives (on the GPU: the device setup, no host copy).
            None => match Amg::from_matrix(be, a.borrow(), &AmgParams::default()) {
                Ok(h) => with(be, a, &h, o, b, x, t0, block.take()),
                Err(e) => failed(e),
            },
        },
        _ => with(be, a, &Identity, o, b, x, t0, block.take()),
    }
}

/// [`solve_with`] on host vectors: the columns `bs` and starts `xs` copied to the backend, the
/// solutions back. One column is one solve; with `block`, the columns are one block solve
/// whose outcome goes there.
#[allow(clippy::too_many_arguments)]
fn on_columns<'m, T, B, A>(
    be: &B,
    a: &A,
    m: &dyn Fn() -> segsparse::Result<&'m CsrMatrix<T>>,
    jac: Option<&Jacobi<B::Vector>>,
    amg: Option<&dyn Preconditioner<T, B>>,
    o: &Opts,
    bs: &[&[T]],
    block: Option<&mut Option<Result<MultiInfo, SolveError>>>,
    xs: &[&[T]],
    t0: Instant,
) -> Res<(Timed, Vec<Vec<T>>)>
where
    T: Scalar,
    B: BlockKrylovOps<T> + segsparse::precond::IncompleteOps<T> + AmgOps<T>,
    A: LinearOperator<T, B>
        + std::borrow::Borrow<<B as segsparse::backend::MultigridOps<T>>::Matrix>,
    Jacobi<B::Vector>: segsparse::backend::Preconditioner<T, B>,
{
    let up = |cs: &[&[T]]| {
        cs.iter()
            .map(|c| be.upload(c))
            .collect::<segsparse::Result<Vec<_>>>()
    };
    let (bd, mut xd) = (up(bs)?, up(xs)?);
    let r = match block {
        Some(out) => {
            // The one-column arguments are not read when a block is given.
            let (b1, mut x1) = (be.zeros(a.nrows())?, be.zeros(a.ncols())?);
            let mut blk = BlockRhs {
                bs: &bd,
                xs: &mut xd,
                out: None,
            };
            let r = solve_with(be, a, m, jac, amg, o, &b1, &mut x1, t0, Some(&mut blk));
            *out = blk.out;
            r
        }
        None => {
            let (b1, x1) = (&bd[0], &mut xd[0]);
            solve_with(be, a, m, jac, amg, o, b1, x1, t0, None)
        }
    };
    let xs = xd
        .iter()
        .map(|c| be.download(c))
        .collect::<segsparse::Result<Vec<_>>>()?;
    Ok((r, xs))
}

/// One outcome per column of a block solve (`r` the call's, `out` the block's); a failed
/// setup (the preconditioner) fails the whole block.
fn block_outcomes(r: Timed, out: Option<Result<MultiInfo, SolveError>>) -> Res<Vec<Outcome>> {
    let (r0, setup, secs) = r;
    match out.ok_or(r0) {
        Err(Err(e)) | Ok(Err(e)) => Err(Failure::Solve(e)),
        Err(Ok(_)) => Err(Failure::Value("the block solve did not run".into())),
        Ok(Ok(info)) => info
            .columns
            .into_iter()
            .map(|c| outcome((c, setup, secs)))
            .collect(),
    }
}

/// The Jacobi preconditioner `make` returns, when `o` asks for Jacobi.
fn jacobi_for<J>(o: &Opts, make: impl FnOnce() -> Res<Arc<J>>) -> Res<Option<Arc<J>>> {
    if o.precond == Precond::Jacobi {
        make().map(Some)
    } else {
        Ok(None)
    }
}

/// A given hierarchy for a solve on the GPU (one set up on the CPU is refused).
fn gpu_amg<T: Elem>(h: Option<&AmgOn<T>>) -> Res<Option<&dyn Preconditioner<T, GpuOps<T>>>> {
    match h {
        Some(AmgOn::Gpu(_, h)) => Ok(Some(&**h)),
        Some(AmgOn::Cpu(_)) => Err(wrong_device()),
        None => Ok(None),
    }
}

/// A given hierarchy for a solve on the CPU (one set up on the GPU is refused).
fn cpu_amg<T: Elem>(h: Option<&AmgOn<T>>) -> Res<Option<&dyn Preconditioner<T, Cpu>>> {
    match h {
        Some(AmgOn::Cpu(h)) => Ok(Some(&**h)),
        Some(AmgOn::Gpu(..)) => Err(wrong_device()),
        None => Ok(None),
    }
}

/// An operator of any storage (a trait object) beside the matrix the AMG hierarchy is set up
/// from when the call brings none: [`solve_with`] wants both in one argument.
struct WithMatrix<'a, O: ?Sized, M> {
    op: &'a O,
    matrix: &'a M,
}

impl<T, B, O, M> LinearOperator<T, B> for WithMatrix<'_, O, M>
where
    T: segsparse::Elem,
    B: segsparse::backend::VectorOps<T>,
    O: LinearOperator<T, B> + ?Sized,
{
    fn nrows(&self) -> usize {
        self.op.nrows()
    }
    fn ncols(&self) -> usize {
        self.op.ncols()
    }
    fn apply(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> segsparse::Result<()> {
        self.op.apply(be, x, y)
    }
    fn apply_exact(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> segsparse::Result<()> {
        self.op.apply_exact(be, x, y)
    }
    fn is_narrowed(&self) -> bool {
        self.op.is_narrowed()
    }
    fn prepare(&self, be: &B, expected_applies: usize) -> segsparse::Result<()> {
        self.op.prepare(be, expected_applies)
    }
    fn apply_block(
        &self,
        be: &B,
        xs: &[&B::Vector],
        ys: &mut [&mut B::Vector],
    ) -> segsparse::Result<()> {
        self.op.apply_block(be, xs, ys)
    }
}

impl<O: ?Sized, M> std::borrow::Borrow<M> for WithMatrix<'_, O, M> {
    fn borrow(&self) -> &M {
        self.matrix
    }
}

impl Mat<f64> {
    /// The f32 copy of the values where the matrix lives (the exact values kept beside it for
    /// true residuals when f32 rounds them), made on the first call and kept; or why f32 cannot
    /// hold them. A GPU matrix's copy is made on the device from its device values (no host
    /// copy is read or made).
    fn f32_copy(&self) -> Res<&F32Copy> {
        if let Some(c) = self.f32_copy.get() {
            return Ok(c);
        }
        let refused = |e: segsparse::Error| match e {
            segsparse::Error::InvalidInput(why) => Ok(why),
            other => Err(other),
        };
        let copy = match &self.dev {
            Some(d) => F32Copy::Gpu(
                match segsparse::spmv::gpu::mixed::GpuMixedCsr::from_device(&d.csr) {
                    Ok(m) => Ok(Box::new(m)),
                    Err(e) => Err(refused(e)?),
                },
            ),
            None => F32Copy::Host(match segsparse::spmv::mixed::MixedCsr::new(self.host()?) {
                Ok(m) => Ok(m),
                Err(e) => Err(refused(e)?),
            }),
        };
        self.f32_copies
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Another thread may have set it meanwhile: either copy serves.
        let _ = self.f32_copy.set(copy);
        Ok(self.f32_copy.get().expect("set above"))
    }

    /// [`Mat::solve_host`] with the values stored in `f32` under `f64` vectors
    /// (`solvers::storage::solve_stored`: true residuals with the `f64` values, the fallback to
    /// them when `f32` storage cannot reach the tolerance). The outcome's message says which
    /// storage served and, after a fallback, why. The `f32` copy is made on the first such
    /// solve and kept with the matrix ([`Mat::f32_copy`]). AMG without a given hierarchy is
    /// set up in f32 from that copy and cycled in f32 (`precond::Narrowed`); its Krylov
    /// operator keeps the f64 values where f32 rounds them (CG under AMG would pay for the
    /// rounding in iterations), and the outcome says so.
    fn solve_host_stored(
        &self,
        o: &Opts,
        b: &[f64],
        x: &mut [f64],
        amg: Option<&PyAmg>,
    ) -> Res<Outcome> {
        use segsparse::precond::Narrowed;
        use segsparse::solvers::storage::{solve_stored, StoredOperator};
        // GMRES's Krylov basis in f32 too (the fallback keeps f64).
        let mut o = *o;
        o.params.basis = segsparse::Storage::F32;
        let o = &o;
        let amg = amg.map(|h| h.typed::<f64>()).transpose()?;
        let amg = amg.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        let copy = self.f32_copy()?;
        // AMG built by this solve: the hierarchy in f32.
        let amg32 = o.precond == Precond::Amg && amg.is_none();
        const ROUNDED_UNDER_AMG: &str = "the values round in f32, and CG under AMG would pay \
            for that in iterations, so the Krylov operator keeps them in f64; the AMG hierarchy \
            is stored in f32";
        // One attempt per storage through the shared dispatch; the timings of the last.
        let mut timed = (0.0, 0.0);
        let stored = if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let jac = jacobi_for(o, || self.gpu_jacobi(&ops))?;
            let F32Copy::Gpu(mixed) = copy else {
                unreachable!("a GPU matrix keeps a GPU copy")
            };
            let h32 = match (amg32, mixed) {
                (true, Ok(m)) => Some(Narrowed::amg_from_matrix(
                    &*ops,
                    m.low(),
                    None,
                    &AmgParams::default(),
                )?),
                _ => None,
            };
            let h = match &h32 {
                Some(h) => Some(h as &dyn Preconditioner<f64, GpuOps<f64>>),
                None => gpu_amg(amg.as_deref())?,
            };
            let g = d.csr.gpu();
            let bd = g.upload(b)?;
            let mut xd = g.upload(x)?;
            let run = |_: segsparse::Storage,
                       op: &dyn LinearOperator<f64, GpuOps<f64>>,
                       xv: &mut DeviceBuffer<f64>,
                       p: &SolveParams<'static>| {
                let oi = Opts { params: *p, ..*o };
                let op = WithMatrix { op, matrix: &d.csr };
                let (r, setup, solve) = solve_with(
                    &*ops,
                    &op,
                    &|| self.host(),
                    jac.as_deref(),
                    h,
                    &oi,
                    &bd,
                    xv,
                    t0,
                    None,
                );
                timed = (setup, solve);
                r
            };
            let op = match mixed {
                Ok(m) if h32.is_some() && m.exact().is_some() => StoredOperator::Refused {
                    reason: ROUNDED_UNDER_AMG.into(),
                    exact: &d.csr,
                },
                Ok(m) => StoredOperator::F32 {
                    narrow: &**m,
                    exact: m
                        .exact()
                        .map(|e| e as &dyn LinearOperator<f64, GpuOps<f64>>),
                },
                Err(why) => StoredOperator::Refused {
                    reason: why.clone(),
                    exact: &d.csr,
                },
            };
            let s = solve_stored(&*ops, op, &mut xd, &o.params, run)?;
            x.copy_from_slice(&g.download(&xd)?);
            s
        } else {
            let host = self.host()?;
            let jac = jacobi_for(o, || self.cpu_jacobi())?;
            let F32Copy::Host(mixed) = copy else {
                unreachable!("a host matrix keeps a host copy")
            };
            let h32 = match (amg32, mixed) {
                (true, Ok(m)) => Some(Narrowed::<Cpu, _>::new(&Cpu, |l| {
                    Amg::new(l, m.low(), &AmgParams::default())
                })?),
                _ => None,
            };
            let h = match &h32 {
                Some(h) => Some(h as &dyn Preconditioner<f64, Cpu>),
                None => cpu_amg(amg.as_deref())?,
            };
            let bv = b.to_vec();
            let mut xv = x.to_vec();
            let run = |_: segsparse::Storage,
                       op: &dyn LinearOperator<f64, Cpu>,
                       xs: &mut Vec<f64>,
                       p: &SolveParams<'static>| {
                let oi = Opts { params: *p, ..*o };
                let op = WithMatrix { op, matrix: host };
                let (r, setup, solve) = solve_with(
                    &Cpu,
                    &op,
                    &|| Ok(host),
                    jac.as_deref(),
                    h,
                    &oi,
                    &bv,
                    xs,
                    t0,
                    None,
                );
                timed = (setup, solve);
                r
            };
            let op = match mixed {
                Ok(m) if h32.is_some() && m.exact().is_some() => StoredOperator::Refused {
                    reason: ROUNDED_UNDER_AMG.into(),
                    exact: host,
                },
                Ok(m) => StoredOperator::F32 {
                    narrow: m,
                    exact: m.exact().map(|e| e as &dyn LinearOperator<f64, Cpu>),
                },
                Err(why) => StoredOperator::Refused {
                    reason: why.clone(),
                    exact: host,
                },
            };
            let s = solve_stored(&Cpu, op, &mut xv, &o.params, run)?;
            x.copy_from_slice(&xv);
            s
        };
        let storage = stored.storage;
        let note = match &stored.fallback {
            Some(why) => format!(" [{why}]"),
            None => format!(" [{storage} storage]"),
        };
        // Both attempts' seconds are in the info of a fallback (time to solution).
        let solve = match &stored.result {
            Ok(i) => i.solve_seconds,
            Err(_) => timed.1,
        };
        let mut out = outcome((stored.result, timed.0, solve))?;
        out.7 += &note;
        Ok(out)
    }

    /// [`Mat::solve_host`] of CG/PCG (none or Jacobi) with its recurrence in `f32`
    /// (`solvers::storage::pcg_stored_f32`, as `sparse-solve --storage f32-vectors`): the values
    /// and the recurrence's vectors in `f32`, the iterate and the true residuals in `f64`, the
    /// fallback to `f64` CG where the `f32` recurrence cannot reach the tolerance. The `f32`
    /// matrix is [`Mat::f32_copy`]'s; values beyond `f32`'s range solve in `f64`. The outcome's
    /// message ends with ` [f32-vectors storage]`, or with why `f64` served.
    fn solve_host_vectors32(&self, o: &Opts, b: &[f64], x: &mut [f64]) -> Res<Outcome> {
        use segsparse::backend::NarrowOps;
        use segsparse::precond::auto::StatsOps;
        use segsparse::solvers::storage::pcg_stored_f32;
        if o.method != Method::Cg || !matches!(o.precond, Precond::None | Precond::Jacobi) {
            return Err(Failure::Value(
                "storage='f32-vectors' runs cg (or pcg) with M None or 'jacobi'".into(),
            ));
        }
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        let copy = self.f32_copy()?;
        // Values beyond f32's range: the f64 solve, and why.
        if let F32Copy::Gpu(Err(why)) | F32Copy::Host(Err(why)) = copy {
            let mut out = self.solve_host(o, b, x, None)?;
            out.7 += &format!(" [f64 storage: {why}]");
            return Ok(out);
        }
        let jacobi = o.precond == Precond::Jacobi;
        let (stored, setup, solve) = match copy {
            F32Copy::Gpu(Err(_)) | F32Copy::Host(Err(_)) => unreachable!("answered above"),
            F32Copy::Gpu(Ok(m)) => {
                let (ops, d) = self.gpu_ops()?;
                let low = ops.low()?;
                let j = if jacobi {
                    Some((low.jacobi(m.low())?, self.gpu_jacobi(&ops)?))
                } else {
                    None
                };
                let (m32, m64): (
                    &dyn Preconditioner<f32, GpuOps<f32>>,
                    &dyn Preconditioner<f64, GpuOps<f64>>,
                ) = match &j {
                    Some((j32, j64)) => (j32, &**j64),
                    None => (&Identity, &Identity),
                };
                let g = d.csr.gpu();
                let bd = g.upload(b)?;
                let mut xd = g.upload(x)?;
                let setup = t0.elapsed().as_secs_f64();
                let t = Instant::now();
                let s = pcg_stored_f32(
                    &*ops,
                    &low,
                    &d.csr,
                    m.low(),
                    m32,
                    m64,
                    &bd,
                    &mut xd,
                    &o.params,
                )?;
                let solve = t.elapsed().as_secs_f64();
                x.copy_from_slice(&g.download(&xd)?);
                (s, setup, solve)
            }
            F32Copy::Host(Ok(m)) => {
                let j = if jacobi {
                    Some((Jacobi::from_matrix(&Cpu, m.low())?, self.cpu_jacobi()?))
                } else {
                    None
                };
                let (m32, m64): (&dyn Preconditioner<f32, Cpu>, &dyn Preconditioner<f64, Cpu>) =
                    match &j {
                        Some((j32, j64)) => (j32, &**j64),
                        None => (&Identity, &Identity),
                    };
                let bv = b.to_vec();
                let mut xv = x.to_vec();
                let setup = t0.elapsed().as_secs_f64();
                let t = Instant::now();
                let host = self.host()?;
                let s =
                    pcg_stored_f32(&Cpu, &Cpu, host, m.low(), m32, m64, &bv, &mut xv, &o.params)?;
                let solve = t.elapsed().as_secs_f64();
                x.copy_from_slice(&xv);
                (s, setup, solve)
            }
        };
        let note = match &stored.fallback {
            Some(why) => format!(" [{why}]"),
            None => " [f32-vectors storage]".to_string(),
        };
        let mut out = outcome((stored.result, setup, solve))?;
        out.7 += &note;
        Ok(out)
    }
}

impl<T: Elem> Mat<T> {
    /// The host copy, downloaded from the device on first use for a matrix built there.
    pub(crate) fn host(&self) -> segsparse::Result<&CsrMatrix<T>> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let d = self
            .dev
            .as_ref()
            .expect("a matrix without a host copy is on the GPU");
        let g = d.csr.gpu();
        let (rp, ci, v) = d.csr.device_parts();
        let rp = g.download(rp)?;
        let mut ci = g.download(ci)?;
        let mut v = g.download(v)?;
        ci.truncate(self.nnz);
        v.truncate(self.nnz);
        let h = CsrMatrix::try_from_parts(self.shape.0, self.shape.1, rp, ci, v)?;
        let _ = self.host.set(h);
        Ok(self.host.get().expect("set above"))
    }

    /// The host copy where one exists already (built on the host, or downloaded before).
    pub(crate) fn host_if_present(&self) -> Option<&CsrMatrix<T>> {
        self.host.get()
    }

    /// The automatic choice's statistics and rule, read where the matrix lives (on the device
    /// for a GPU matrix: no host copy).
    fn auto_choice(&self) -> Res<segsparse::precond::auto::AutoChoice> {
        use segsparse::precond::auto::{choose_from, StatsOps};
        let stats = if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            ops.matrix_stats(&d.csr)?
        } else {
            Cpu.matrix_stats(self.host()?)?
        };
        Ok(choose_from(stats))
    }

    /// The matrix as an operator where it lives (for a solve with Python callables).
    pub(crate) fn held(&self) -> Res<Held<'_, T>> {
        Ok(if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            Held::Gpu(ops, &d.csr)
        } else {
            Held::Cpu(self.host()?)
        })
    }

    fn dev(&self) -> Res<&DevMat<T>> {
        self.dev.as_ref().ok_or_else(not_on_gpu)
    }

    fn cpu_jacobi(&self) -> Res<Arc<Jacobi<Vec<T>>>> {
        let mut j = self.jacobi.lock().unwrap_or_else(|p| p.into_inner());
        if j.is_none() {
            *j = Some(Arc::new(Jacobi::from_matrix(&Cpu, self.host()?)?));
        }
        Ok(j.clone().expect("set above"))
    }

    pub(crate) fn gpu_ops(&self) -> Res<(Arc<GpuOps<T>>, &DevMat<T>)> {
        let d = self.dev()?;
        let ops = {
            let mut o = d.ops.lock().unwrap_or_else(|p| p.into_inner());
            if o.is_none() {
                *o = Some(Arc::new(GpuOps::<T>::new(d.csr.gpu())?));
            }
            o.clone().expect("set above")
        };
        Ok((ops, d))
    }

    fn gpu_jacobi(&self, ops: &GpuOps<T>) -> Res<Arc<Jacobi<DeviceBuffer<T>>>> {
        let d = self.dev()?;
        let mut j = d.jacobi.lock().unwrap_or_else(|p| p.into_inner());
        if j.is_none() {
            // The diagonal from the device arrays (a matrix uploaded by the GPU path keeps no
            // host copy): n values read back, checked and inverted by `from_diagonal`.
            let g = d.csr.gpu();
            let diag = g.download(&segsparse::sparse::gpu::diagonal(g, &d.csr)?)?;
            let n = self.shape.0.min(self.shape.1);
            *j = Some(Arc::new(Jacobi::from_diagonal(ops, &diag[..n])?));
        }
        Ok(j.clone().expect("set above"))
    }

    /// Solve with host vectors; on the GPU when the matrix is there (b and x copied over).
    fn solve_host(&self, o: &Opts, b: &[T], x: &mut [T], amg: Option<&PyAmg>) -> Res<Outcome> {
        let amg = amg.map(|h| h.typed::<T>()).transpose()?;
        let amg = amg.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        check_len("b", b.len(), self.shape.0, "the matrix")?;
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        let t0 = Instant::now();
        let (r, xs) = if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let jac = jacobi_for(o, || self.gpu_jacobi(&ops))?;
            let h = gpu_amg(amg.as_deref())?;
            let host = || self.host();
            on_columns(
                &*ops,
                &d.csr,
                &host,
                jac.as_deref(),
                h,
                o,
                &[b],
                None,
                &[&*x],
                t0,
            )?
        } else {
            let a = self.host()?;
            let jac = jacobi_for(o, || self.cpu_jacobi())?;
            let h = cpu_amg(amg.as_deref())?;
            on_columns(
                &Cpu,
                a,
                &|| Ok(a),
                jac.as_deref(),
                h,
                o,
                &[b],
                None,
                &[&*x],
                t0,
            )?
        };
        x.copy_from_slice(&xs[0]);
        outcome(r)
    }

    /// Solves `A·X = B` for the `k` columns of the row-major `n × k` host block `b` as one
    /// block (`solvers::multi`), on the GPU when the matrix is there (the columns copied over).
    /// `x` (row-major `n × k`) holds the initial guesses when `o` says so and the solutions
    /// afterwards. One outcome per column.
    fn solve_host_block(
        &self,
        o: &Opts,
        b: &[T],
        k: usize,
        x: &mut [T],
        amg: Option<&PyAmg>,
    ) -> Res<Vec<Outcome>> {
        let amg = amg.map(|h| h.typed::<T>()).transpose()?;
        let amg = amg.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let n = self.shape.0;
        if k == 0 {
            return Err(Failure::Value(
                "b has 0 columns: a block of right-hand sides needs k >= 1".into(),
            ));
        }
        check_len("b", b.len(), n * k, "rows × columns")?;
        check_len("x", x.len(), self.shape.1 * k, "columns × right-hand sides")?;
        let bc = multi::split_columns(b, n, k, Layout::RowMajor)?;
        let xc = multi::split_columns(x, self.shape.1, k, Layout::RowMajor)?;
        let (bc, xc): (Vec<&[T]>, Vec<&[T]>) = (
            bc.iter().map(|c| &c[..]).collect(),
            xc.iter().map(|c| &c[..]).collect(),
        );
        let t0 = Instant::now();
        let mut out = None;
        let (r, xs) = if self.dev.is_some() {
            let (ops, d) = self.gpu_ops()?;
            let jac = jacobi_for(o, || self.gpu_jacobi(&ops))?;
            let h = gpu_amg(amg.as_deref())?;
            let host = || self.host();
            let blk = Some(&mut out);
            on_columns(
                &*ops,
                &d.csr,
                &host,
                jac.as_deref(),
                h,
                o,
                &bc,
                blk,
                &xc,
                t0,
            )?
        } else {
            let a = self.host()?;
            let jac = jacobi_for(o, || self.cpu_jacobi())?;
            let h = cpu_amg(amg.as_deref())?;
            let blk = Some(&mut out);
            on_columns(&Cpu, a, &|| Ok(a), jac.as_deref(), h, o, &bc, blk, &xc, t0)?
        };
        x.copy_from_slice(&multi::join_columns(&xs, Layout::RowMajor));
        block_outcomes(r, out)
    }

    /// Solves `A·X = B` for `k` columns the caller holds on the device, as one block
    /// (zero-copy): column `j` of `B` at `bps[j]` and of `X` at `xps[j]` (`n` contiguous
    /// elements each; `X` holds the initial guesses when `o` says so and the solutions
    /// afterwards), ordered after the streams in `wait` and before later work on `signal`.
    /// One outcome per column.
    #[allow(clippy::too_many_arguments)]
    fn solve_device_block(
        &self,
        o: &Opts,
        bps: &[u64],
        xps: &[u64],
        wait: &[u64],
        signal: u64,
        amg: Option<&PyAmg>,
    ) -> Res<Vec<Outcome>> {
        if bps.is_empty() || bps.len() != xps.len() {
            return Err(Failure::Value(format!(
                "a block solve needs k >= 1 columns of b and as many of x; got {} and {}",
                bps.len(),
                xps.len()
            )));
        }
        let amg = amg.map(|h| h.typed::<T>()).transpose()?;
        let amg = amg.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let h = gpu_amg(amg.as_deref())?;
        let t0 = Instant::now();
        let (ops, d) = self.gpu_ops()?;
        let jac = jacobi_for(o, || self.gpu_jacobi(&ops))?;
        let (n, m) = self.shape;
        let host = || self.host();
        // The one-column arguments are not read when a block is given.
        use segsparse::backend::VectorOps;
        let (b1, mut x1) = (ops.zeros(n)?, ops.zeros(m)?);
        let dev = device()?;
        dev.enter(wait)?;
        // SAFETY: the Python layer checked that every column is a contiguous device array of
        // this dtype with nrows / ncols elements, and holds them during the call.
        let (bs, mut xs) = unsafe {
            (
                BorrowedColumns::<T>::new(dev, bps, n),
                BorrowedColumns::<T>::new(dev, xps, m),
            )
        };
        let mut blk = BlockRhs {
            bs: &bs,
            xs: &mut xs,
            out: None,
        };
        let r = solve_with(
            &*ops,
            &d.csr,
            &host,
            jac.as_deref(),
            h,
            o,
            &b1,
            &mut x1,
            t0,
            Some(&mut blk),
        );
        let out = blk.out;
        dev.leave(signal)?;
        block_outcomes(r, out)
    }

    /// Solve with device vectors owned by the caller (zero-copy).
    fn solve_device(&self, o: &Opts, dp: DevicePair<'_>, amg: Option<&PyAmg>) -> Res<Outcome> {
        let amg = amg.map(|h| h.typed::<T>()).transpose()?;
        let amg = amg.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let h = gpu_amg(amg.as_deref())?;
        let t0 = Instant::now();
        let (ops, d) = self.gpu_ops()?;
        let jac = jacobi_for(o, || self.gpu_jacobi(&ops))?;
        let (n, m) = self.shape;
        let host = || self.host();
        // SAFETY: the Python layer checked that both arrays are contiguous device arrays of
        // this dtype with nrows / ncols elements, and holds them during the call.
        let r = unsafe {
            with_borrowed(dp, n, m, |b, x| {
                solve_with(&*ops, &d.csr, &host, jac.as_deref(), h, o, b, x, t0, None)
            })
        };
        outcome(r?)
    }

    /// The AMG hierarchy of this matrix, on its device, and the seconds of the call's parts.
    /// `cand`: the `n × k` candidates row by row (one node's `k` values per row) and `k`.
    fn build_amg(
        &self,
        p: &AmgParams,
        cand: Option<(&[f64], usize)>,
    ) -> Res<(AmgOn<T>, AmgBuildTimes)> {
        let mut times = AmgBuildTimes::default();
        let clock = Instant::now();
        let cand = cand.map(|(flat, k)| candidate_columns::<T>(flat, k));
        times.candidates = clock.elapsed().as_secs_f64();
        // One setup path for every entry point: from the matrix where it lives (on the GPU
        // the device setup from the device copy, as `sparse-solve` does; no host copy is made
        // or read).
        fn build<T: Scalar, B: AmgOps<T>>(
            be: &B,
            a: &B::Matrix,
            p: &AmgParams,
            c: Option<&Vec<Vec<T>>>,
        ) -> segsparse::Result<Amg<T, B>> {
            match c {
                Some(c) => Amg::from_matrix_with_candidates(be, a, c, p),
                None => Amg::from_matrix(be, a, p),
            }
        }
        let h = if self.dev.is_some() {
            let clock = Instant::now();
            let (ops, d) = self.gpu_ops()?;
            times.backend = clock.elapsed().as_secs_f64();
            let clock = Instant::now();
            let h = build(&*ops, &d.csr, p, cand.as_ref())?;
            times.hierarchy = clock.elapsed().as_secs_f64();
            AmgOn::Gpu(ops, Box::new(h))
        } else {
            let clock = Instant::now();
            let h = build(&Cpu, self.host()?, p, cand.as_ref())?;
            times.hierarchy = clock.elapsed().as_secs_f64();
            AmgOn::Cpu(Box::new(h))
        };
        let clock = Instant::now();
        drop(cand);
        times.candidates += clock.elapsed().as_secs_f64();
        Ok((h, times))
    }

    fn update_amg(&self, h: &mut AmgOn<T>) -> Res<()> {
        match h {
            AmgOn::Cpu(a) => a.update(&Cpu, self.host()?)?,
            AmgOn::Gpu(ops, a) => match &self.dev {
                Some(d) => a.update_matrix(&**ops, &d.csr)?,
                None => a.update(&**ops, self.host()?)?,
            },
        }
        Ok(())
    }

    fn spmv_host(&self, alpha: f64, x: &[T], beta: f64, y: &mut [T]) -> Res<()> {
        check_len("x", x.len(), self.shape.1, "the matrix")?;
        check_len("y", y.len(), self.shape.0, "the matrix")?;
        let (alpha, beta) = (T::of_f64(alpha), T::of_f64(beta));
        match &self.dev {
            None => segsparse::spmv::spmv(alpha, self.host()?, x, beta, y),
            Some(d) => {
                let g = d.csr.gpu();
                let xd = g.upload(x)?;
                let mut yd = if beta == T::zero() {
                    g.zeros::<T>(y.len())?
                } else {
                    g.upload(y)?
                };
                d.csr.spmv(alpha, &xd, beta, &mut yd)?;
                y.copy_from_slice(&g.download(&yd)?);
            }
        }
        Ok(())
    }

    fn spmv_device(
        &self,
        alpha: f64,
        xp: u64,
        beta: f64,
        yp: u64,
        wait: &[u64],
        signal: u64,
    ) -> Res<()> {
        let d = self.dev()?;
        let dev = device()?;
        dev.enter(wait)?;
        // SAFETY: as in `solve_device`.
        let x = unsafe { Borrowed::<T>::new(dev, xp, self.shape.1) };
        let mut y = unsafe { Borrowed::<T>::new(dev, yp, self.shape.0) };
        d.csr.spmv(T::of_f64(alpha), &x, T::of_f64(beta), &mut y)?;
        dev.leave(signal)?;
        Ok(())
    }

    /// Seconds per `y ← A·x` measured inside Rust (the reference for the Python overhead).
    fn bench_rust(&self, reps: usize, on_gpu: bool) -> Res<f64> {
        let x = vec![T::one(); self.shape.1];
        let mut y = vec![T::zero(); self.shape.0];
        if on_gpu {
            let d = self.dev()?;
            let g = d.csr.gpu();
            let xd = g.upload(&x)?;
            let mut yd = g.zeros::<T>(y.len())?;
            d.csr.spmv(T::one(), &xd, T::zero(), &mut yd)?;
            g.synchronize()?;
            let t0 = Instant::now();
            for _ in 0..reps {
                d.csr.spmv(T::one(), &xd, T::zero(), &mut yd)?;
            }
            g.synchronize()?;
            Ok(t0.elapsed().as_secs_f64() / reps as f64)
        } else {
            let h = self.host()?;
            segsparse::spmv::spmv(T::one(), h, &x, T::zero(), &mut y);
            let t0 = Instant::now();
            for _ in 0..reps {
                segsparse::spmv::spmv(T::one(), h, &x, T::zero(), &mut y);
            }
            Ok(t0.elapsed().as_secs_f64() / reps as f64)
        }
    }
}

/// What `_Matrix.auto_choice` returns: method, preconditioner, reason and the statistics.
type AutoTuple = (
    &'static str,
    &'static str,
    String,
    crate::choice::StatsTuple,
);

/// A CSR matrix held by segsparse (use `segsparse.Matrix`, which builds it from SciPy, CuPy or
/// NumPy data).
#[pyclass(name = "_Matrix", module = "segsparse._core", frozen)]
pub struct PyMatrix {
    pub(crate) inner: Inner,
}

impl PyMatrix {
    /// True for a complex matrix.
    fn is_complex(&self) -> bool {
        matches!(self.inner, Inner::C64(_) | Inner::C128(_))
    }

    /// The AMG hierarchy of this matrix (for `_Amg.__new__`).
    pub(crate) fn build_amg(
        &self,
        p: &AmgParams,
        cand: Option<(&[f64], usize)>,
    ) -> Res<(Box<dyn std::any::Any + Send + Sync>, AmgBuildTimes)> {
        Ok(match &self.inner {
            Inner::F32(m) => {
                let (h, t) = m.build_amg(p, cand)?;
                (Box::new(Mutex::new(h)), t)
            }
            Inner::F64(m) => {
                let (h, t) = m.build_amg(p, cand)?;
                (Box::new(Mutex::new(h)), t)
            }
            Inner::C64(_) | Inner::C128(_) => return Err(real_only("AMG")),
        })
    }

    /// The numeric re-setup of `h` for this matrix's values.
    pub(crate) fn update_amg(&self, h: &PyAmg) -> Res<()> {
        with_mat!(self, m, T => {
            let mut g = h.typed::<T>()?.lock().unwrap_or_else(|p| p.into_inner());
            m.update_amg(&mut g)
        }; _c, _C => Err(real_only("AMG")))
    }
}

/// `alpha` and `beta` of a real matrix's product `what` (`op` must be `"n"`).
fn real_scalars(
    op: &str,
    what: &str,
    alpha: &Bound<'_, PyAny>,
    beta: &Bound<'_, PyAny>,
) -> PyResult<(f64, f64)> {
    if op != "n" {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "op 't'/'h' of {what} is for complex matrices"
        )));
    }
    Ok((alpha.extract()?, beta.extract()?))
}

fn wrong_device() -> Failure {
    Failure::Value("the AMG hierarchy was built for a matrix on another device".into())
}

#[pymethods]
impl PyMatrix {
    /// `_Matrix(nrows, ncols, indptr, indices, data, device, dtype, reuse_buffers)`: validates
    /// the CSR arrays (sorted or not, duplicates allowed as the crate allows them) and uploads
    /// to the GPU. `dtype` (`"float32"`/`"float64"`, default `data`'s) is the matrix's value
    /// type: on the GPU path `data` is converted there. On the GPU path the arrays are copied
    /// once through pinned staging and checked on the device (`reuse_buffers`: keep the
    /// staging for the next upload); on the CPU, the crate's `CsrMatrix` is built on the host.
    #[new]
    #[pyo3(signature = (nrows, ncols, indptr, indices, data, device = "auto", dtype = None, reuse_buffers = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        nrows: usize,
        ncols: usize,
        indptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        device: &str,
        dtype: Option<&str>,
        reuse_buffers: bool,
    ) -> PyResult<Self> {
        let w = want(device).map_err(|f| f.into_py_err(py))?;
        let data_dtype = data.getattr("dtype")?.str()?.to_string();
        let dtype = dtype.unwrap_or(&data_dtype).to_string();
        if matches!(dtype.as_str(), "complex64" | "complex128") {
            // Complex values: validated on the host (the copy is kept), then uploaded.
            if dtype != data_dtype {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "complex matrix data must be {dtype} (found {data_dtype})"
                )));
            }
            let on_gpu = match w {
                Want::Cpu => false,
                Want::Gpu => true,
                Want::Auto => self::device().is_ok(),
            };
            let rp = self::indices(indptr, "indptr")?;
            let ci = self::indices(indices, "indices")?;
            let shape = (nrows, ncols);
            let inner = if dtype == "complex64" {
                Inner::C64(csr_from_arrays(py, shape, rp, ci, data, |h, t0| {
                    cx::build(h, t0, on_gpu)
                })?)
            } else {
                Inner::C128(csr_from_arrays(py, shape, rp, ci, data, |h, t0| {
                    cx::build(h, t0, on_gpu)
                })?)
            };
            return Ok(PyMatrix { inner });
        }
        if !matches!(dtype.as_str(), "float32" | "float64") {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "matrix values must be float32, float64, complex64 or complex128, not {dtype}"
            )));
        }
        // SEGSPARSE_UPLOAD=host: the host-validated path (the crate's CsrMatrix built on the
        // host, then uploaded with its host copy kept), for comparison and as a fallback.
        let host_path = std::env::var("SEGSPARSE_UPLOAD").is_ok_and(|v| v == "host");
        let on_gpu = !host_path
            && match w {
                Want::Cpu => false,
                Want::Gpu => true,
                Want::Auto => self::device().is_ok(),
            };
        if on_gpu {
            let rp = IdxArr::of(indptr, "indptr")?;
            let ci = IdxArr::of(indices, "indices")?;
            let va = ValArr::of(data)?;
            let (rp, ci, va) = (rp.host()?, ci.host()?, va.host()?);
            let shape = (nrows, ncols);
            let inner = if dtype == "float32" {
                Inner::F32(run(py, move || {
                    build_on_gpu::<f32>(shape, rp, ci, va, reuse_buffers).map_err(range_error)
                })?)
            } else {
                Inner::F64(run(py, move || {
                    build_on_gpu::<f64>(shape, rp, ci, va, reuse_buffers).map_err(range_error)
                })?)
            };
            return Ok(PyMatrix { inner });
        }
        let data = if dtype != data_dtype {
            data.call_method1("astype", (dtype.as_str(),))?
        } else {
            data.clone()
        };
        // Memory preflight before the copies: the crate's own CSR arrays (u32 row
        // pointers and columns, f64 values at most); the upload checks the device itself.
        let need = 4 * indptr.len()? as u64 + 12 * indices.len()? as u64;
        segsparse::memory::check_host("the matrix's CSR copy", need)
            .map_err(|e| crate::errors::crate_error(py, e))?;
        let rp = self::indices(indptr, "indptr")?;
        let ci = self::indices(indices, "indices")?;
        let inner = match dtype.as_str() {
            "float32" => Inner::F32(csr_from_arrays(
                py,
                (nrows, ncols),
                rp,
                ci,
                &data,
                |h, t0| build(h, t0, w),
            )?),
            _ => Inner::F64(csr_from_arrays(
                py,
                (nrows, ncols),
                rp,
                ci,
                &data,
                |h, t0| build(h, t0, w),
            )?),
        };
        Ok(PyMatrix { inner })
    }

    /// Where the construction's seconds went: `{"staging", "copy", "check", "tables",
    /// "total"}` for a matrix built on the GPU, `{"total"}` on the CPU.
    #[getter]
    fn upload_seconds(&self) -> Vec<(&'static str, f64)> {
        with_mat!(self, m, _T => m.timing.clone(); c, _C => c.timing.clone())
    }

    /// How many f32 copies of the values `storage='float32'` solves made (0 or 1: the copy is
    /// kept with the matrix).
    fn f32_copies(&self) -> usize {
        match &self.inner {
            Inner::F64(m) => m.f32_copies.load(std::sync::atomic::Ordering::Relaxed),
            _ => 0,
        }
    }

    /// Whether the matrix holds a host copy of its arrays (a GPU matrix built by the default
    /// upload has none until a host-side operation downloads one).
    fn has_host_copy(&self) -> bool {
        with_mat!(self, m, _T => m.host.get().is_some(); _c, _C => true)
    }

    /// `(nrows, ncols)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        with_mat!(self, m, _T => m.shape; c, _C => c.host().shape())
    }

    /// Stored entries.
    #[getter]
    fn nnz(&self) -> usize {
        with_mat!(self, m, _T => m.nnz; c, _C => c.host().nnz())
    }

    /// `"float32"`, `"float64"`, `"complex64"` or `"complex128"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.inner {
            Inner::F32(_) => "float32",
            Inner::F64(_) => "float64",
            Inner::C64(_) => "complex64",
            Inner::C128(_) => "complex128",
        }
    }

    /// True when the matrix is uploaded to the GPU.
    #[getter]
    fn on_gpu(&self) -> bool {
        with_mat!(self, m, _T => m.dev.is_some(); c, _C => c.on_gpu())
    }

    /// The GPU SpMV algorithm chosen at upload (`None` on the CPU).
    #[getter]
    fn gpu_algorithm(&self) -> Option<String> {
        with_mat!(self, m, _T => m.dev.as_ref().map(|d| d.csr.resolved_algorithm().name());
            c, _C => c.gpu_algorithm())
    }

    /// `(indptr, indices, data)` as new NumPy arrays (int32 indices when they fit, else int64).
    fn to_arrays<'py>(&self, py: Python<'py>) -> PyResult<(PyObject, PyObject, PyObject)> {
        with_mat!(self, m, T => {
            let h = m.host().map_err(|e| crate::errors::crate_error(py, e))?;
            let (rp, ci, v) = (h.row_ptr(), h.col_idx(), h.values());
            let data = PyArray1::<T>::from_slice(py, v).into_any().unbind();
            let (a, b) = index_arrays(py, rp, ci);
            Ok((a, b, data))
        }; c, _C => {
            let h = c.host();
            let (a, b) = index_arrays(py, h.row_ptr(), h.col_idx());
            Ok((a, b, c.values_array(py)))
        })
    }

    /// `y ← alpha·op(A)·x + beta·y` with NumPy vectors of the matrix's dtype (`y` written in
    /// place). `op`: `"n"` (`A`); for a complex matrix also `"t"` (`Aᵀ`) and `"h"` (`Aᴴ`), and
    /// `alpha`, `beta` real or complex numbers.
    #[pyo3(signature = (alpha, x, beta, y, op = "n"))]
    fn spmv_host(
        &self,
        py: Python<'_>,
        alpha: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        beta: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        op: &str,
    ) -> PyResult<()> {
        with_mat!(self, m, T => {
            let (alpha, beta) = real_scalars(op, "spmv_host", alpha, beta)?;
            with_vectors::<T, _>(py, x, y, ["x", "y"], |xs, ys| {
                m.spmv_host(alpha, xs, beta, ys)
            })
        }; c, C => {
            let (op, alpha, beta) = (cx::op_of(op)?, cx::parts(alpha)?, cx::parts(beta)?);
            with_vectors::<C, _>(py, x, y, ["x", "y"], |xs, ys| {
                c.spmv_host(op, alpha, xs, beta, ys)
            })
        })
    }

    /// `y ← alpha·op(A)·x + beta·y` with device pointers (contiguous, the matrix's dtype),
    /// ordered after the streams in `wait` and before later work on `signal`. Queues and
    /// returns. `op` and the scalars as `spmv_host` (device vectors: `"n"` and `"h"`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (alpha, x, beta, y, wait, signal, op = "n"))]
    fn spmv_device(
        &self,
        py: Python<'_>,
        alpha: &Bound<'_, PyAny>,
        x: u64,
        beta: &Bound<'_, PyAny>,
        y: u64,
        wait: Vec<u64>,
        signal: u64,
        op: &str,
    ) -> PyResult<()> {
        with_mat!(self, m, _T => {
            let (alpha, beta) = real_scalars(op, "spmv_device", alpha, beta)?;
            run_held(py, || m.spmv_device(alpha, x, beta, y, &wait, signal))
        }; c, _C => {
            let (op, alpha, beta) = (cx::op_of(op)?, cx::parts(alpha)?, cx::parts(beta)?);
            run_held(py, || c.spmv_device(op, alpha, x, beta, y, &wait, signal))
        })
    }

    /// Solves `A x = b` with NumPy vectors (`x` holds the initial guess when the options say
    /// so and the result afterwards). Returns the outcome tuple that `segsparse.SolveInfo` is
    /// built from. `storage="float32"` (a float64 matrix): the values stored in `f32` under the
    /// `f64` solve, with the fallback to `f64` storage; `"f32-vectors"`: CG's recurrence in `f32`
    /// too (`Mat::solve_host_vectors32`).
    #[pyo3(signature = (opts, b, x, amg = None, storage = None))]
    fn solve_host(
        &self,
        py: Python<'_>,
        opts: PyRef<'_, PyOptions>,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        amg: Option<PyRef<'_, PyAmg>>,
        storage: Option<&str>,
    ) -> PyResult<Outcome> {
        let o = &opts.0;
        if storage.is_some_and(|s| s.eq_ignore_ascii_case("f32-vectors")) {
            let Inner::F64(m) = &self.inner else {
                return Err(Failure::Value(format!(
                    "storage='f32-vectors' runs the CG of a float64 matrix; this one is {}",
                    self.dtype()
                ))
                .into_py_err(py));
            };
            return with_vectors::<f64, _>(py, b, x, ["b", "x"], |bs, xs| {
                m.solve_host_vectors32(o, bs, xs)
            });
        }
        let f32_storage = match storage.map(|s| s.parse::<segsparse::Storage>()) {
            None | Some(Ok(segsparse::Storage::F64)) => false,
            Some(Ok(segsparse::Storage::F32)) => true,
            Some(Err(e)) => return Err(Failure::from(e).into_py_err(py)),
        };
        if f32_storage {
            let Inner::F64(m) = &self.inner else {
                return Err(Failure::Value(format!(
                    "storage='float32' stores the values of a float64 matrix; this one is {}",
                    self.dtype()
                ))
                .into_py_err(py));
            };
            let amg = amg.as_deref();
            return with_vectors::<f64, _>(py, b, x, ["b", "x"], |bs, xs| {
                m.solve_host_stored(o, bs, xs, amg)
            });
        }
        if self.is_complex() && amg.is_some() {
            return Err(real_only("AMG").into_py_err(py));
        }
        let amg = amg.as_deref();
        with_mat!(self, m, T => {
            with_vectors::<T, _>(py, b, x, ["b", "x"], |bs, xs| m.solve_host(o, bs, xs, amg))
        }; c, C => {
            with_vectors::<C, _>(py, b, x, ["b", "x"], |bs, xs| {
                c.solve_host(o, bs, xs).map(|r| r.0)
            })
        })
    }

    /// Solves `A X = B` for a NumPy block `b` of `k` columns (row-major `n × k`, flattened) as
    /// one block: `x` (the same shape) holds the initial guesses when the options say so and the
    /// solutions afterwards. Returns one outcome tuple per column.
    #[pyo3(signature = (opts, b, x, k, amg = None))]
    fn solve_host_block(
        &self,
        py: Python<'_>,
        opts: PyRef<'_, PyOptions>,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        k: usize,
        amg: Option<PyRef<'_, PyAmg>>,
    ) -> PyResult<Vec<Outcome>> {
        let o = &opts.0;
        let amg = amg.as_deref();
        with_mat!(self, m, T => {
            with_vectors::<T, _>(py, b, x, ["b", "x"], |bs, xs| {
                m.solve_host_block(o, bs, k, xs, amg)
            })
        };
            _c, _C => Err(real_only("a block of right-hand sides").into_py_err(py)))
    }

    /// Solves `A X = B` for `k` columns held on the device, as one block (zero-copy):
    /// `b[j]` and `x[j]` are the device pointers of column `j` (contiguous, `n` elements;
    /// `wait`, `signal` as `spmv_device`). Returns one outcome tuple per column.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (opts, b, x, wait, signal, amg = None))]
    fn solve_device_block(
        &self,
        py: Python<'_>,
        opts: PyRef<'_, PyOptions>,
        b: Vec<u64>,
        x: Vec<u64>,
        wait: Vec<u64>,
        signal: u64,
        amg: Option<PyRef<'_, PyAmg>>,
    ) -> PyResult<Vec<Outcome>> {
        let o = &opts.0;
        let amg = amg.as_deref();
        with_mat!(self, m, _T => run(py, || m.solve_device_block(o, &b, &x, &wait, signal, amg));
            _c, _C => Err(real_only("a block of right-hand sides").into_py_err(py)))
    }

    /// Solves `A x = b` with device pointers (see `spmv_device`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (opts, b, x, wait, signal, amg = None))]
    fn solve_device(
        &self,
        py: Python<'_>,
        opts: PyRef<'_, PyOptions>,
        b: u64,
        x: u64,
        wait: Vec<u64>,
        signal: u64,
        amg: Option<PyRef<'_, PyAmg>>,
    ) -> PyResult<Outcome> {
        let o = &opts.0;
        if self.is_complex() && amg.is_some() {
            return Err(real_only("AMG").into_py_err(py));
        }
        let amg = amg.as_deref();
        let d = DevicePair {
            b,
            x,
            wait: &wait,
            signal,
        };
        with_mat!(self, m, _T => run(py, || m.solve_device(o, d, amg));
            c, _C => run(py, || c.solve_device(o, d)))
    }

    /// Seconds per SpMV of a loop run inside Rust (CPU, or the GPU with device vectors and one
    /// synchronisation at the end): the baseline of the binding-overhead benchmark.
    fn bench_rust_spmv(&self, py: Python<'_>, reps: usize, gpu: bool) -> PyResult<f64> {
        with_mat!(self, m, _T => run(py, || m.bench_rust(reps.max(1), gpu));
            c, _C => run(py, || c.bench_rust(reps.max(1), gpu)))
    }

    /// The crate's automatic choice for this matrix (square): `(method, preconditioner, reason,
    /// statistics)`, the statistics as `(rows, nnz, symmetric, missing_diagonal,
    /// positive_diagonal, diagonal_spread, min_dominance, opposite_sign_fraction,
    /// lower_levels, asymmetry, negative_diagonal)`. Read where the matrix lives (on the device
    /// for a GPU matrix, without a host copy).
    fn auto_choice(&self, py: Python<'_>) -> PyResult<PyObject> {
        let any = |t: Bound<'_, pyo3::types::PyTuple>| t.into_any().unbind();
        with_mat!(self, m, _T => run(py, || {
            let (r, c) = m.shape;
            if r != c {
                return Err(Failure::Value(format!(
                    "the automatic choice needs a square matrix, got {r}x{c}"
                )));
            }
            let ch = m.auto_choice()?;
            Ok((
                ch.method.name(),
                ch.precond.name(),
                ch.reason,
                crate::choice::stats_tuple(&ch.stats),
            ))
        }).and_then(|t: AutoTuple| Ok(any(t.into_pyobject(py)?)));
            c, _C => {
                let t = run(py, || Ok(c.auto_choice()))?;
                Ok(any(t.into_pyobject(py)?))
            })
    }

    /// Writes the matrix to a Matrix Market file (`.mtx`, or `.mtx.gz` compressed).
    fn write_matrix_market(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        with_mat!(self, m, _T => run(py, || Ok(segsparse::io::write_matrix_market(&path, m.host()?)?));
            c, _C => run(py, || Ok(segsparse::io::write_matrix_market(&path, c.host())?)))
    }

    fn __repr__(&self) -> String {
        let (r, c) = self.shape();
        format!(
            "_Matrix({r}×{c}, {} nonzeros, {}, {})",
            self.nnz(),
            self.dtype(),
            if self.on_gpu() { "gpu" } else { "cpu" }
        )
    }
}

/// CSR index arrays as NumPy int32 (SciPy's default) when every value fits, else int64.
pub fn index_arrays(py: Python<'_>, rp: &[u32], ci: &[u32]) -> (PyObject, PyObject) {
    let fits = rp.last().is_none_or(|&n| n <= i32::MAX as u32)
        && rp.len() <= i32::MAX as usize
        && ci.iter().all(|&c| c <= i32::MAX as u32);
    if fits {
        let a: Vec<i32> = rp.iter().map(|&v| v as i32).collect();
        let b: Vec<i32> = ci.iter().map(|&v| v as i32).collect();
        (
            PyArray1::from_vec(py, a).into_any().unbind(),
            PyArray1::from_vec(py, b).into_any().unbind(),
        )
    } else {
        let a: Vec<i64> = rp.iter().map(|&v| v as i64).collect();
        let b: Vec<i64> = ci.iter().map(|&v| v as i64).collect();
        (
            PyArray1::from_vec(py, a).into_any().unbind(),
            PyArray1::from_vec(py, b).into_any().unbind(),
        )
    }
}

/// Reads a Matrix Market file: `(nrows, ncols, indptr, indices, data)`.
#[pyfunction]
#[pyo3(signature = (path, dtype = "float64"))]
pub fn read_matrix_market(
    py: Python<'_>,
    path: std::path::PathBuf,
    dtype: &str,
) -> PyResult<(usize, usize, PyObject, PyObject, PyObject)> {
    fn go<T: segsparse::Elem + numpy::Element>(
        py: Python<'_>,
        path: std::path::PathBuf,
    ) -> PyResult<(usize, usize, PyObject, PyObject, PyObject)> {
        let m: CsrMatrix<T> = run(py, move || {
            Ok(segsparse::io::read_matrix_market::<T>(&path)?)
        })?;
        let (nr, nc) = m.shape();
        let (rp, ci) = index_arrays(py, m.row_ptr(), m.col_idx());
        let (_, _, v) = m.into_parts();
        Ok((
            nr,
            nc,
            rp,
            ci,
            PyArray1::from_vec(py, v).into_any().unbind(),
        ))
    }
    match dtype {
        "float32" => go::<f32>(py, path),
        "float64" => go::<f64>(py, path),
        "complex64" => go::<segsparse::Complex<f32>>(py, path),
        "complex128" => go::<segsparse::Complex<f64>>(py, path),
        d => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "dtype must be float32, float64, complex64 or complex128, not {d}"
        ))),
    }
}

/// Seconds of the parts of a Python AMG setup inside the binding (`_Amg.build_seconds`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AmgBuildTimes {
    /// Reading the `n × k` candidates into `k` vectors of the working type, and freeing them.
    pub candidates: f64,
    /// The matrix's GPU backend (made by its first setup or solve, then kept).
    pub backend: f64,
    /// `Amg::from_matrix…`: the library's setup and the cycle's workspace.
    pub hierarchy: f64,
}

/// The `k` columns of the `n × k` array `flat` (row by row) in the working type: rows in
/// parallel blocks, each block writing its slice of every column.
fn candidate_columns<T: Scalar>(flat: &[f64], k: usize) -> Vec<Vec<T>> {
    use rayon::prelude::*;
    if k == 0 {
        return Vec::new();
    }
    let n = flat.len() / k;
    let mut cols: Vec<Vec<T>> = (0..k).map(|_| vec![T::zero(); n]).collect();
    const ROWS: usize = 1 << 15;
    // Block b of every column, gathered per block.
    let mut blocks: Vec<Vec<&mut [T]>> = (0..n.div_ceil(ROWS))
        .map(|_| Vec::with_capacity(k))
        .collect();
    for c in cols.iter_mut() {
        for (b, chunk) in c.chunks_mut(ROWS).enumerate() {
            blocks[b].push(chunk);
        }
    }
    blocks
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut block)| {
            let rows = &flat[b * ROWS * k..((b + 1) * ROWS).min(n) * k];
            for (r, row) in rows.chunks_exact(k).enumerate() {
                for (c, &v) in block.iter_mut().zip(row) {
                    c[r] = T::of_f64(v);
                }
            }
        });
    cols
}
