//! The GPU batch: every system of a [`BatchCsr`] solved in one kernel launch
//! (`kernels/batched/batched.cu`), one thread block per system. With ILU(0) a second kernel
//! factors every system first (one thread per system).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr};

use super::{BatchCsr, BatchInfo, BatchMethod, BatchParams, BatchPrecond, BatchStatus};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::{Gpu, PushKernelArg};
use crate::spmv::gpu::GpuScalar;

/// The batched solver kernels (`kernels/batched/batched.cu`).
pub const BATCHED_SRC: KernelSource = kernel_source!(
    "batched/batched.cu",
    &[&crate::gpu::kernels::COMMON],
    &[
        ("BATCH_RED", RED_SLOTS as i64),
        ("BATCH_PRECOND_JACOBI", PRECOND_JACOBI as i64),
        ("BATCH_PRECOND_ILU0", PRECOND_ILU0 as i64)
    ]
);

/// `BatchArgs::precond` codes (`BATCH_PRECOND_*` in the kernel source); 0 is none.
const PRECOND_JACOBI: u32 = 1;
const PRECOND_ILU0: u32 = 2;

/// The pivot test of the batched ILU(0): the CPU factorization's default
/// ([`crate::sparse::incomplete::IncompleteParams::pivot_tol`]).
const ILU_PIVOT_TOL: f64 = 1e-12;

/// Reduction slots at the start of shared memory (`BATCH_RED` in the kernel source).
const RED_SLOTS: usize = 128;

/// The kernel's `BatchArgs`, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BatchArgs {
    nsys: u32,
    nmax: u32,
    use_smem: u32,
    precond: u32,
    max_iters: u32,
    restart: u32,
    rel_tol: f64,
    abs_tol: f64,
}

// SAFETY: a plain `#[repr(C)]` struct of integers and floats whose layout matches `BatchArgs`
// in kernels/batched/batched.cu (six u32, then two double at offset 24).
unsafe impl DeviceRepr for BatchArgs {}

/// A [`BatchCsr`] resident on the GPU with its kernels loaded.
pub struct GpuBatch<T: GpuScalar> {
    gpu: Arc<Gpu>,
    nsys: usize,
    total_rows: usize,
    max_rows: usize,
    sys_ptr: CudaSlice<u32>,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    val: CudaSlice<T>,
    /// Every row's column indices strictly increase (ILU(0) needs it).
    sorted: bool,
    cg: CudaFunction,
    bicgstab: CudaFunction,
    gmres: CudaFunction,
    ilu0_factor: CudaFunction,
}

impl<T: GpuScalar> GpuBatch<T> {
    /// Uploads `batch` and loads the kernels (compiled once per process).
    ///
    /// # Errors
    /// Out of device memory, a failed compile or load.
    pub fn upload(gpu: &Arc<Gpu>, batch: &BatchCsr<T>) -> Result<Self> {
        let (sp, rp, ci, va) = batch.parts();
        let (z32, zt) = ([0u32], [T::zero()]);
        let ci = if ci.is_empty() { &z32[..] } else { ci };
        let va = if va.is_empty() { &zt[..] } else { va };
        let d: [(&str, String); 0] = [];
        let sorted = rp.windows(2).all(|w| {
            ci[w[0] as usize..w[1] as usize]
                .windows(2)
                .all(|c| c[0] < c[1])
        });
        Ok(GpuBatch {
            gpu: gpu.clone(),
            nsys: batch.len(),
            total_rows: batch.total_rows(),
            max_rows: batch.max_rows(),
            sys_ptr: gpu.upload(sp)?,
            row_ptr: gpu.upload(rp)?,
            col: gpu.upload(ci)?,
            val: gpu.upload(va)?,
            sorted,
            cg: gpu.typed_function::<T>(&BATCHED_SRC, "batch_cg", &d)?,
            bicgstab: gpu.typed_function::<T>(&BATCHED_SRC, "batch_bicgstab", &d)?,
            gmres: gpu.typed_function::<T>(&BATCHED_SRC, "batch_gmres", &d)?,
            ilu0_factor: gpu.typed_function::<T>(&BATCHED_SRC, "batch_ilu0_factor", &d)?,
        })
    }

    /// Number of systems.
    pub fn len(&self) -> usize {
        self.nsys
    }

    /// True when the batch holds no system.
    pub fn is_empty(&self) -> bool {
        self.nsys == 0
    }

    /// Rows of all systems together.
    pub fn total_rows(&self) -> usize {
        self.total_rows
    }

    /// Solves every system from a zero initial guess: `b` and `x` are the concatenated
    /// right-hand sides and solutions on the device. One kernel launch (two with ILU(0): the
    /// factorization of every system first); then the per-system status, iterations and true
    /// residuals are downloaded (the call waits for the device).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for vectors of the wrong length, parameters out of range, or
    /// ILU(0) on a batch whose rows' column indices are not strictly increasing (see
    /// [`CsrMatrix::canonical`](crate::CsrMatrix::canonical)); CUDA errors (launch, out of
    /// memory) with their context. Failed systems are statuses.
    pub fn solve(
        &self,
        b: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
        params: &BatchParams,
    ) -> Result<BatchInfo> {
        let clock = std::time::Instant::now();
        params.check()?;
        if b.len() != self.total_rows || x.len() != self.total_rows {
            return Err(Error::InvalidInput(format!(
                "batched solve: b has {} and x has {} elements; the batch has {} rows in all",
                b.len(),
                x.len(),
                self.total_rows
            )));
        }
        let ilu = params.precond == BatchPrecond::Ilu0;
        if ilu && !self.sorted {
            return Err(Error::InvalidInput(
                "batched ILU(0): a row's column indices are not strictly increasing; build the \
                 batch from canonical matrices (CsrMatrix::canonical)"
                    .into(),
            ));
        }
        if self.nsys == 0 {
            return Ok(BatchInfo::default());
        }
        let g = &self.gpu;
        let (kernel, name, nvec, small) = match params.method {
            BatchMethod::Cg => (&self.cg, "batch_cg", 5, 0),
            BatchMethod::Bicgstab => (&self.bicgstab, "batch_bicgstab", 9, 0),
            BatchMethod::Gmres => {
                let m = params.restart;
                (&self.gmres, "batch_gmres", m + 3, (m + 1) * m + 4 * m + 1)
            }
        };
        // Threads: a power of two from 32 to 256, about one row per thread.
        let threads = (self.max_rows.max(1).next_power_of_two()).clamp(32, 256) as u32;
        let nmax = self.max_rows.max(1).next_multiple_of(4);
        let base = (RED_SLOTS + small) * T::BYTES;
        let with_vecs = base + nvec * nmax * T::BYTES;
        let optin = g
            .context()
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )
            .map_err(|e| Error::cuda("reading the shared-memory limit", e))? as usize;
        // Shared memory when the vectors fit in half the opt-in limit per block (so
        // several blocks share an SM), else a global workspace per resident block.
        let use_smem = with_vecs <= optin / 2;
        let smem = if use_smem { with_vecs } else { base };
        if smem > optin {
            return Err(Error::InvalidInput(format!(
                "batched {}: restart {} needs {smem} bytes of shared memory, the device has {optin}",
                params.method.name(),
                params.restart
            )));
        }
        if smem > 48 * 1024 {
            kernel
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| Error::cuda(format!("shared-memory limit of {name}"), e))?;
        }
        let per_sm = kernel
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem, None)
            .map_err(|e| Error::cuda(format!("occupancy of {name}"), e))?
            .max(1);
        let grid = (g.sm_count() as usize * per_sm as usize).min(self.nsys) as u32;
        let work_len = if use_smem {
            1
        } else {
            grid as usize * nvec * nmax
        };
        g.check_memory(
            &format!("the batched {} workspace", params.method.name()),
            (work_len * T::BYTES) as u64,
        )?;
        let mut work = g.zeros::<T>(work_len)?;
        let mut status = g.zeros::<u32>(self.nsys)?;
        let mut iters = g.zeros::<u32>(self.nsys)?;
        let mut resid = g.zeros::<T>(self.nsys)?;
        let (lu, dpos) = if ilu {
            self.factor_ilu0(&mut status)?
        } else {
            (g.zeros::<T>(1)?, g.zeros::<u32>(1)?)
        };
        let args = BatchArgs {
            nsys: self.nsys as u32,
            nmax: nmax as u32,
            use_smem: use_smem as u32,
            precond: match params.precond {
                BatchPrecond::None => 0,
                BatchPrecond::Jacobi => PRECOND_JACOBI,
                BatchPrecond::Ilu0 => PRECOND_ILU0,
            },
            max_iters: params.max_iters as u32,
            restart: params.restart as u32,
            rel_tol: params.rel_tol,
            abs_tol: params.abs_tol,
        };
        let mut lb = g.stream().launch_builder(kernel);
        lb.arg(&self.sys_ptr)
            .arg(&self.row_ptr)
            .arg(&self.col)
            .arg(&self.val)
            .arg(b)
            .arg(&mut *x)
            .arg(&mut work)
            .arg(&args)
            .arg(&lu)
            .arg(&dpos)
            .arg(&mut status)
            .arg(&mut iters)
            .arg(&mut resid);
        // SAFETY: batch_{cg,bicgstab,gmres}_T(const u32* sys_ptr, const u32* row_ptr,
        // const u32* col, const T* val, const T* b, T* x, T* work, BatchArgs args, const T* lu,
        // const u32* dpos, u32* status, u32* iters, T* resid). sys_ptr has nsys+1 entries,
        // row_ptr total_rows+1, col/val the entries (≥ 1), b and x total_rows (checked), work
        // grid·nvec·nmax when !use_smem, status/iters/resid nsys; with ILU(0) lu has the entries
        // and dpos total_rows (read only then; one element each otherwise); dynamic shared memory
        // holds RED_SLOTS + small values and, with use_smem, nvec·nmax more; threads is a
        // multiple of 32 (the reductions need whole warps).
        unsafe { lb.launch(Gpu::cfg(grid, threads, smem as u32)) }
            .map_err(|e| Gpu::launch_error(name, e))?;
        let status = g.download(&status)?;
        let iters = g.download(&iters)?;
        let resid = g.download(&resid)?;
        let mut info = BatchInfo {
            status: Vec::with_capacity(self.nsys),
            iterations: iters,
            relative_residual: resid.iter().map(|r| r.as_f64()).collect(),
            seconds: 0.0,
        };
        for (s, &c) in status.iter().enumerate() {
            info.status.push(BatchStatus::from_code(c).ok_or_else(|| {
                Error::InvalidInput(format!("batched solve: system {s} has status code {c}"))
            })?);
        }
        info.seconds = clock.elapsed().as_secs_f64();
        Ok(info)
    }

    /// The ILU(0) factors of every system (`lu` on the batch's pattern, each row's diagonal
    /// position); a system whose factorization fails gets the zero-diagonal status in `status`.
    fn factor_ilu0(&self, status: &mut CudaSlice<u32>) -> Result<(CudaSlice<T>, CudaSlice<u32>)> {
        let g = &self.gpu;
        g.check_memory(
            "the batched ILU(0) factors",
            (self.val.len() * T::BYTES + self.total_rows.max(1) * 4) as u64,
        )?;
        let mut lu = g.zeros::<T>(self.val.len())?;
        let mut dpos = g.zeros::<u32>(self.total_rows.max(1))?;
        let threads = 128u32;
        let grid = self.nsys.div_ceil(threads as usize) as u32;
        let nsys = self.nsys as u32;
        let mut lb = g.stream().launch_builder(&self.ilu0_factor);
        lb.arg(&self.sys_ptr)
            .arg(&self.row_ptr)
            .arg(&self.col)
            .arg(&self.val)
            .arg(&mut lu)
            .arg(&mut dpos)
            .arg(status)
            .arg(&nsys)
            .arg(&ILU_PIVOT_TOL);
        // SAFETY: batch_ilu0_factor_T(const u32* sys_ptr, const u32* row_ptr, const u32* col,
        // const T* val, T* lu, u32* dpos, u32* status, u32 nsys, double pivot_tol): sys_ptr has
        // nsys+1 entries, row_ptr total_rows+1, col/val/lu the entries (≥ 1), dpos total_rows,
        // status nsys; one thread per system writes only its own rows and entries.
        unsafe { lb.launch(Gpu::cfg(grid, threads, 0)) }
            .map_err(|e| Gpu::launch_error("batch_ilu0_factor", e))?;
        Ok((lu, dpos))
    }
}
