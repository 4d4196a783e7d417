//! GPU tridiagonal solvers: cyclic reduction, PCR, their hybrid and the partition method, one
//! block per system in shared memory, or across blocks through global memory for systems
//! larger than a block (see the [module table](super)).
//!
//! [`GpuTridiag`] holds the loaded kernels, a workspace for the multi-block levels (grown on
//! demand, reused) and the device pivot flag. [`GpuTridiag::queue_batch`] only queues work on
//! the [`Gpu`]'s stream; [`GpuTridiag::check`] waits for it and turns a raised pivot flag into an
//! [`Error::Solver`] naming the system and row; [`GpuTridiag::solve_batch`] does both.
//!
//! # Multi-block forms
//!
//! A batch is also one block-diagonal system of `batch·n` rows (the kernels zero the couplings
//! at system boundaries), so the multi-block forms solve a batch of long systems, or a huge
//! batch of tiny ones, as one system:
//! - partition: level `l` → `l+1` keeps the two end equations of every run of
//!   `MULTI_CHUNK` = 16 rows (the system shrinks 8×), recursively, until one block finishes it;
//!   then each level's runs are filled in by Thomas with their ends known. Two reads of the
//!   input and one write of `x` at the top level, about 9 words per unknown in all.
//! - cyclic reduction (the paper's form): one launch per level keeps the odd equations,
//!   compacted; after one block finishes the last level, one launch per level solves the even
//!   ones.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaViewMut, LaunchConfig, PushKernelArg};

use super::TRIDIAG_KERNELS;
use super::{TridiagAlgorithm, Tridiagonal};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Scalar;

pub use super::MULTI_CHUNK;
use super::{MAX_BLOCK_THREADS, PCR_PER_THREAD};
/// Threads per block of the multi-block partition kernels.
pub const MULTI_THREADS: u32 = 64;
/// Threads per block of the multi-block cyclic-reduction level kernels (one equation each).
const CR_LEVEL_THREADS: u32 = 256;
/// Most levels a multi-block solve can have (flag slots).
const MAX_LEVELS: usize = 32;
/// Largest total row count the kernels' 32-bit indices allow.
const MAX_ROWS: usize = (1 << 31) - 1;

/// Tuning of the per-block solvers. `Default` is the policy chosen from the H200 sweep in
/// `benches/results/history/tridiag.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuTuning {
    /// Rows per thread in the per-block partition method (threads per block = n / this, rounded
    /// up to whole warps, at most 512): 8 keeps a run's loop short and gives 1024-row systems
    /// 128 threads, so all 1024 systems of a batch are resident at once on a 132-SM H100/H200
    /// (8 blocks per SM, measured with the occupancy query).
    pub block_rows_per_thread: u32,
    /// `CrPcr`: cyclic reduction stops (and PCR takes over) when this many equations remain.
    pub hybrid_cr_stop: u32,
    /// `Partition`: the same switch for the system of run ends (2 per thread).
    pub partition_cr_stop: u32,
    /// Largest system solved by one block (larger ones go multi-block).
    pub block_max_rows: u32,
}

impl Default for GpuTuning {
    fn default() -> Self {
        GpuTuning {
            block_rows_per_thread: 8,
            hybrid_cr_stop: 128,
            partition_cr_stop: 64,
            block_max_rows: 4096,
        }
    }
}

/// How one block solves its system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockMode {
    Cr,
    Pcr,
    CrPcr,
    Partition,
}

#[derive(Clone, Copy, Debug)]
struct BlockCfg {
    threads: u32,
    partition: u32,
    cr_stop: u32,
    smem: u32,
}

/// One reduction between levels of a multi-block solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    Partition,
    Cr,
}

/// What was queued last, to turn a flagged (level, index) into a system and row.
#[derive(Clone, Debug)]
struct Plan {
    n: usize,
    alg: TridiagAlgorithm,
    /// (kind, rows of the level being reduced) for levels 0, 1, ...
    levels: Vec<(Reduction, usize)>,
}

struct Kernels {
    block: CudaFunction,
    part_reduce: CudaFunction,
    part_back: CudaFunction,
    cr_reduce: CudaFunction,
    cr_back: CudaFunction,
}

struct Level<T> {
    a: CudaSlice<T>,
    b: CudaSlice<T>,
    c: CudaSlice<T>,
    d: CudaSlice<T>,
    x: CudaSlice<T>,
    cap: usize,
}

/// A GPU tridiagonal solver bound to one [`Gpu`]: kernels, workspace and pivot flag. Reuse it for
/// repeated solves (the workspace and kernels are kept).
pub struct GpuTridiag<T: Scalar + KernelType> {
    gpu: Arc<Gpu>,
    k: Kernels,
    flags: CudaSlice<u32>,
    work: Vec<Level<T>>,
    plan: Option<Plan>,
    tuning: GpuTuning,
    smem_optin: u32,
}

impl<T: Scalar + KernelType> std::fmt::Debug for GpuTridiag<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuTridiag<{}>({:?}, {:?})",
            T::NAME,
            self.gpu,
            self.tuning
        )
    }
}

impl<T: Scalar + KernelType> GpuTridiag<T> {
    /// Loads (compiling on first use) the kernels on `gpu`.
    ///
    /// # Errors
    /// A compile or driver failure.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        let f = |root: &str| gpu.typed_function::<T>(&TRIDIAG_KERNELS, root, &[]);
        let k = Kernels {
            block: f("tridiag_block")?,
            part_reduce: f("tridiag_part_reduce")?,
            part_back: f("tridiag_part_back")?,
            cr_reduce: f("tridiag_cr_reduce")?,
            cr_back: f("tridiag_cr_back")?,
        };
        let flags = gpu.upload(&[u32::MAX; MAX_LEVELS])?;
        let smem_optin = gpu
            .context()
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| Error::cuda("reading the shared-memory limit", e))? as u32;
        Ok(GpuTridiag {
            gpu: gpu.clone(),
            k,
            flags,
            work: Vec::new(),
            plan: None,
            tuning: GpuTuning::default(),
            smem_optin,
        })
    }

    /// The GPU this solver runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The current tuning.
    pub fn tuning(&self) -> GpuTuning {
        self.tuning
    }

    /// Replaces the tuning (benchmarks sweep it).
    pub fn set_tuning(&mut self, tuning: GpuTuning) {
        self.tuning = tuning;
    }

    fn block_cfg(&self, n: usize, mode: BlockMode) -> Option<BlockCfg> {
        if n > self.tuning.block_max_rows as usize || n == 0 {
            return None;
        }
        let n = n as u32;
        // At most MAX_BLOCK_THREADS (the kernel's launch bounds); the CR and PCR loops stride
        // over the equations, PCR holding 2 per thread.
        let warps = |t: u32| t.div_ceil(32).clamp(1, MAX_BLOCK_THREADS / 32) * 32;
        let pad = |m: u32| m + (m.max(1) - 1) / 32;
        let bytes = T::BYTES as u32;
        let (threads, partition, cr_stop) = match mode {
            BlockMode::Partition => (
                warps(n.div_ceil(self.tuning.block_rows_per_thread.max(2))),
                1,
                self.tuning.partition_cr_stop,
            ),
            BlockMode::Cr => (warps(n.div_ceil(2)), 0, 1),
            BlockMode::Pcr => (warps(n.next_power_of_two().div_ceil(2)), 0, n),
            BlockMode::CrPcr => (warps(n.div_ceil(2)), 0, self.tuning.hybrid_cr_stop),
        };
        if mode == BlockMode::Pcr && n.next_power_of_two() > PCR_PER_THREAD * threads {
            // PCR holds two equations per thread of the system padded to a power of two.
            return None;
        }
        let mut smem = 4 * pad(n) * bytes;
        let q = threads.min(n / 2);
        if partition == 1 && q > 0 {
            smem += 4 * pad(2 * q) * bytes;
        }
        (smem <= self.smem_optin).then_some(BlockCfg {
            threads,
            partition,
            cr_stop,
            smem,
        })
    }

    /// For one block per system of `n` rows by `alg` (`Auto` is `Partition`): threads per block,
    /// dynamic shared memory in bytes, and how many such blocks one SM holds at once (registers,
    /// shared memory and threads permitting). `None` when `n` does not fit one block.
    ///
    /// # Errors
    /// A driver failure of the occupancy query.
    pub fn block_occupancy(
        &self,
        n: usize,
        alg: TridiagAlgorithm,
    ) -> Result<Option<(u32, u32, u32)>> {
        let mode = match alg {
            TridiagAlgorithm::CyclicReduction => BlockMode::Cr,
            TridiagAlgorithm::Pcr => BlockMode::Pcr,
            TridiagAlgorithm::CrPcr => BlockMode::CrPcr,
            _ => BlockMode::Partition,
        };
        let Some(cfg) = self.block_cfg(n, mode) else {
            return Ok(None);
        };
        smem_attr(&self.k.block, cfg.smem, "tridiag_block")?;
        let blocks = self
            .k
            .block
            .occupancy_max_active_blocks_per_multiprocessor(cfg.threads, cfg.smem as usize, None)
            .map_err(|e| Error::cuda("occupancy of tridiag_block", e))?;
        Ok(Some((cfg.threads, cfg.smem, blocks)))
    }

    /// Queues the solution of `batch` systems of `n` rows (stored one after another in the device
    /// buffers, length `batch·n` each; `lower[s·n]` and `upper[s·n + n-1]` are ignored) into `x`,
    /// by `alg`. Does not wait: call [`check`](Self::check) after one or more queued solves to
    /// learn whether a pivot was tiny (the flag accumulates until checked).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `alg` cannot solve this shape (`Thomas` is CPU only; `Pcr`
    /// needs `n ≤ 4096` and the system in one block; more than 2^31 rows in all); launch failures.
    ///
    /// # Panics
    /// When a buffer's length is not `batch·n`.
    pub fn queue_batch(
        &mut self,
        n: usize,
        batch: usize,
        a: Tridiagonal<'_, CudaSlice<T>>,
        rhs: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
        alg: TridiagAlgorithm,
    ) -> Result<()> {
        let total = n * batch;
        a.check_lengths(total, &[("rhs", rhs.len()), ("x", x.len())]);
        let Tridiagonal { lower, diag, upper } = a;
        if total == 0 {
            return Ok(());
        }
        if total > MAX_ROWS {
            return Err(Error::InvalidInput(format!(
                "tridiagonal solve of {total} rows in all: the GPU kernels index with 31 bits \
                 (at most {MAX_ROWS} rows)"
            )));
        }
        use TridiagAlgorithm as A;
        let (block_mode, reduction) = match alg {
            A::Thomas => {
                return Err(Error::InvalidInput(
                    "the Thomas algorithm runs on the CPU (tridiag::cpu::thomas_batch)".into(),
                ))
            }
            A::Auto | A::Partition => (BlockMode::Partition, Reduction::Partition),
            A::CyclicReduction => (BlockMode::Cr, Reduction::Cr),
            A::CrPcr => (BlockMode::CrPcr, Reduction::Cr),
            A::Pcr => (BlockMode::Pcr, Reduction::Cr),
        };
        // Auto: tiny systems, one block each, would idle most threads; the batch is solved as one
        // block-diagonal system across blocks instead.
        let per_block = !(alg == A::Auto && n < 64);
        let n32 = n as u32;
        if per_block {
            if let Some(cfg) = self.block_cfg(n, block_mode) {
                self.plan = Some(Plan {
                    n,
                    alg,
                    levels: Vec::new(),
                });
                let mut flag = self.flags.slice_mut(0..1);
                return launch_block(
                    &self.gpu,
                    &self.k.block,
                    [lower, diag, upper, rhs],
                    x,
                    n32,
                    batch as u32,
                    n32,
                    cfg,
                    &mut flag,
                );
            }
            if alg == A::Pcr {
                return Err(Error::InvalidInput(format!(
                    "PCR solves each system in one block, two equations per thread: n = {n} is \
                     above its limit of {} rows; use CrPcr, CyclicReduction or Partition",
                    (2 * MAX_BLOCK_THREADS).min(self.tuning.block_max_rows)
                )));
            }
        }
        // Multi-block: reduce level by level until one block can finish.
        let mut levels = Vec::new();
        let mut m = total;
        let final_cfg = loop {
            // A batch always goes through at least one level, whose kernels zero the couplings
            // between systems (sys_n); the final block sees one system.
            let may_finish = batch == 1 || !levels.is_empty();
            if may_finish {
                if let Some(cfg) = self.block_cfg(m, block_mode) {
                    break cfg;
                }
            }
            if levels.len() + 1 >= MAX_LEVELS {
                return Err(Error::InvalidInput(format!(
                    "tridiagonal solve of {total} rows needs more than {MAX_LEVELS} levels"
                )));
            }
            levels.push((reduction, m));
            m = match reduction {
                Reduction::Partition => 2 * m.div_ceil(MULTI_CHUNK as usize),
                Reduction::Cr => m / 2,
            };
            if m == 0 {
                // Only a 1-row system halves to 0; never reached for a batch (n*batch >= 2).
                return Err(Error::InvalidInput("empty reduced system".into()));
            }
        };
        if levels.is_empty() {
            // One system small enough for one block (Auto with n < 64).
            self.plan = Some(Plan { n, alg, levels });
            let mut flag = self.flags.slice_mut(0..1);
            let src = [lower, diag, upper, rhs];
            return launch_block(
                &self.gpu,
                &self.k.block,
                src,
                x,
                m as u32,
                1,
                n32,
                final_cfg,
                &mut flag,
            );
        }
        // Workspace: level l >= 1 lives in work[l-1].
        let mut sizes = Vec::with_capacity(levels.len());
        for w in levels.iter().skip(1) {
            sizes.push(w.1);
        }
        sizes.push(m);
        self.ensure_work(&sizes)?;
        self.plan = Some(Plan {
            n,
            alg,
            levels: levels.clone(),
        });
        let nl = levels.len();
        let Self {
            gpu,
            k,
            flags,
            work,
            ..
        } = self;
        // Down.
        for (l, &(kind, ml)) in levels.iter().enumerate() {
            let sys_n = if l == 0 { n32 } else { ml as u32 };
            let (src, dst) = if l == 0 {
                ([lower, diag, upper, rhs], &mut work[0])
            } else {
                let (lo, hi) = work.split_at_mut(l);
                let s = &lo[l - 1];
                ([&s.a, &s.b, &s.c, &s.d], &mut hi[0])
            };
            let mut flag = flags.slice_mut(l..l + 1);
            launch_reduce(gpu, k, kind, src, dst, ml as u32, sys_n, &mut flag)?;
        }
        // The last level in one block.
        {
            let mut flag = flags.slice_mut(nl..nl + 1);
            let lv = &mut work[nl - 1];
            let src = [&lv.a, &lv.b, &lv.c, &lv.d];
            launch_block(
                gpu, &k.block, src, &mut lv.x, m as u32, 1, m as u32, final_cfg, &mut flag,
            )?;
        }
        // Up.
        for (l, &(kind, ml)) in levels.iter().enumerate().rev() {
            let sys_n = if l == 0 { n32 } else { ml as u32 };
            let mut flag = flags.slice_mut(l..l + 1);
            if l == 0 {
                let xr = &work[0].x;
                launch_back(
                    gpu,
                    k,
                    kind,
                    [lower, diag, upper, rhs],
                    xr,
                    x,
                    ml as u32,
                    sys_n,
                    &mut flag,
                )?;
            } else {
                let (lo, hi) = work.split_at_mut(l);
                let s = &mut lo[l - 1];
                let xr = &hi[0].x;
                launch_back(
                    gpu,
                    k,
                    kind,
                    [&s.a, &s.b, &s.c, &s.d],
                    xr,
                    &mut s.x,
                    ml as u32,
                    sys_n,
                    &mut flag,
                )?;
            }
        }
        Ok(())
    }

    fn ensure_work(&mut self, sizes: &[usize]) -> Result<()> {
        for (i, &m) in sizes.iter().enumerate() {
            if i < self.work.len() && self.work[i].cap >= m {
                continue;
            }
            let g = &self.gpu;
            let lv = Level {
                a: g.zeros(m)?,
                b: g.zeros(m)?,
                c: g.zeros(m)?,
                d: g.zeros(m)?,
                x: g.zeros(m)?,
                cap: m,
            };
            if i < self.work.len() {
                self.work[i] = lv;
            } else {
                self.work.push(lv);
            }
        }
        Ok(())
    }

    /// Waits for the queued solves and reads the pivot flag: `Ok` when no pivot was tiny, else an
    /// [`Error::Solver`] naming the system and row (of the last queued solve's numbering) and
    /// resets the flag. Also reports any asynchronous kernel failure.
    ///
    /// # Errors
    /// As described.
    pub fn check(&mut self) -> Result<()> {
        let f = self.gpu.download(&self.flags)?;
        let Some((level, &idx)) = f.iter().enumerate().find(|(_, &v)| v != u32::MAX) else {
            return Ok(());
        };
        self.gpu
            .upload_into(&[u32::MAX; MAX_LEVELS], &mut self.flags)?;
        let Some(plan) = &self.plan else {
            return Err(Error::Solver(format!(
                "tridiagonal solve: tiny pivot at index {idx}"
            )));
        };
        // Map the level's equation index down to a row of the original systems.
        let mut i = idx as usize;
        for l in (0..level.min(plan.levels.len())).rev() {
            let (kind, ml) = plan.levels[l];
            i = match kind {
                Reduction::Cr => 2 * i + 1,
                Reduction::Partition => {
                    let c = MULTI_CHUNK as usize;
                    let first = (i / 2) * c;
                    let len = c.min(ml.saturating_sub(first)).max(1);
                    first + if i % 2 == 1 { len - 1 } else { 0 }
                }
            };
        }
        let where_ = if level == 0 {
            "".to_string()
        } else {
            format!(" (met at reduction level {level})")
        };
        Err(Error::Solver(format!(
            "tridiagonal solve ({} on the GPU): zero or tiny pivot at row {} of system {}{}; the \
             matrix is not diagonally dominant enough to be solved without pivoting",
            plan.alg.name(),
            i % plan.n,
            i / plan.n,
            where_
        )))
    }

    /// [`queue_batch`](Self::queue_batch) followed by [`check`](Self::check).
    ///
    /// # Errors
    /// As both.
    pub fn solve_batch(
        &mut self,
        n: usize,
        batch: usize,
        a: Tridiagonal<'_, CudaSlice<T>>,
        rhs: &CudaSlice<T>,
        x: &mut CudaSlice<T>,
        alg: TridiagAlgorithm,
    ) -> Result<()> {
        self.queue_batch(n, batch, a, rhs, x, alg)?;
        self.check()
    }

    /// Host-vector convenience: uploads the batch (`a.rows() / n` systems), solves and
    /// downloads `x`.
    ///
    /// # Errors
    /// As [`solve_batch`](Self::solve_batch).
    ///
    /// # Panics
    /// When the lengths differ or are not a multiple of `n`.
    pub fn solve_batch_host(
        &mut self,
        n: usize,
        a: Tridiagonal<'_, [T]>,
        rhs: &[T],
        alg: TridiagAlgorithm,
    ) -> Result<Vec<T>> {
        let len = a.check_batch(n, &[("rhs", rhs.len())]);
        if len == 0 {
            return Ok(Vec::new());
        }
        let g = self.gpu.clone();
        let (lower, diag, upper) = (g.upload(a.lower)?, g.upload(a.diag)?, g.upload(a.upper)?);
        let d = g.upload(rhs)?;
        let mut x = g.zeros::<T>(len)?;
        let a = Tridiagonal::new(&lower, &diag, &upper);
        self.solve_batch(n, len / n, a, &d, &mut x, alg)?;
        g.download(&x)
    }

    /// Host-vector convenience for one system.
    ///
    /// # Errors
    /// As [`solve_batch`](Self::solve_batch).
    pub fn solve_host(
        &mut self,
        a: Tridiagonal<'_, [T]>,
        rhs: &[T],
        alg: TridiagAlgorithm,
    ) -> Result<Vec<T>> {
        self.solve_batch_host(a.rows().max(1), a, rhs, alg)
    }
}

fn smem_attr(f: &CudaFunction, smem: u32, name: &str) -> Result<()> {
    if smem > 48 * 1024 {
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
        .map_err(|e| Error::cuda(format!("setting the shared-memory size of {name}"), e))?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch_block<T: Scalar + KernelType>(
    g: &Gpu,
    f: &CudaFunction,
    src: [&CudaSlice<T>; 4],
    x: &mut CudaSlice<T>,
    n: u32,
    batch: u32,
    sys_n: u32,
    cfg: BlockCfg,
    flag: &mut CudaViewMut<u32>,
) -> Result<()> {
    let name = crate::gpu::kernel_name::<T>("tridiag_block");
    smem_attr(f, cfg.smem, &name)?;
    let mut b = g.stream().launch_builder(f);
    b.arg(src[0])
        .arg(src[1])
        .arg(src[2])
        .arg(src[3])
        .arg(x)
        .arg(&n)
        .arg(&sys_n)
        .arg(&cfg.partition)
        .arg(&cfg.cr_stop)
        .arg(flag);
    let lc = LaunchConfig {
        grid_dim: (batch, 1, 1),
        block_dim: (cfg.threads, 1, 1),
        shared_mem_bytes: cfg.smem,
    };
    // SAFETY: tridiag_block_T(const T* a, const T* b, const T* c, const T* d, T* x, u32 n,
    // u32 sys_n, u32 partition, u32 cr_stop, u32* flag); the buffers hold at least batch*n
    // elements (the grid has `batch` blocks, block k touches [k*n, (k+1)*n)), flag one u32, and
    // the dynamic shared memory is the size the kernel computes from n and blockDim.
    unsafe { b.launch(lc) }.map_err(|e| Gpu::launch_error(&name, e))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch_reduce<T: Scalar + KernelType>(
    g: &Gpu,
    k: &Kernels,
    kind: Reduction,
    src: [&CudaSlice<T>; 4],
    dst: &mut Level<T>,
    m: u32,
    sys_n: u32,
    flag: &mut CudaViewMut<u32>,
) -> Result<()> {
    let (f, root) = match kind {
        Reduction::Partition => (&k.part_reduce, "tridiag_part_reduce"),
        Reduction::Cr => (&k.cr_reduce, "tridiag_cr_reduce"),
    };
    let name = crate::gpu::kernel_name::<T>(root);
    let mut b = g.stream().launch_builder(f);
    b.arg(src[0])
        .arg(src[1])
        .arg(src[2])
        .arg(src[3])
        .arg(&m)
        .arg(&sys_n)
        .arg(&mut dst.a)
        .arg(&mut dst.b)
        .arg(&mut dst.c)
        .arg(&mut dst.d)
        .arg(flag);
    let lc = match kind {
        Reduction::Partition => {
            let tile = MULTI_THREADS * MULTI_CHUNK;
            let pad = tile + (tile - 1) / 32;
            LaunchConfig {
                grid_dim: (m.div_ceil(tile), 1, 1),
                block_dim: (MULTI_THREADS, 1, 1),
                shared_mem_bytes: 4 * pad * T::BYTES as u32,
            }
        }
        Reduction::Cr => Gpu::cfg((m / 2).div_ceil(CR_LEVEL_THREADS), CR_LEVEL_THREADS, 0),
    };
    // SAFETY: tridiag_{part,cr}_reduce_T(const T* a, b, c, d, u32 m, u32 sys_n, T* ra, rb, rc,
    // rd, u32* flag): the sources hold m elements, the destinations at least the reduced size
    // (2*ceil(m/TRI_CHUNK) for the partition, m/2 for CR: ensured by ensure_work), flag one u32;
    // the partition kernel's shared memory is 4 padded tiles as computed in the kernel.
    unsafe { b.launch(lc) }.map_err(|e| Gpu::launch_error(&name, e))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch_back<T: Scalar + KernelType>(
    g: &Gpu,
    k: &Kernels,
    kind: Reduction,
    src: [&CudaSlice<T>; 4],
    xr: &CudaSlice<T>,
    x: &mut CudaSlice<T>,
    m: u32,
    sys_n: u32,
    flag: &mut CudaViewMut<u32>,
) -> Result<()> {
    match kind {
        Reduction::Partition => {
            let name = crate::gpu::kernel_name::<T>("tridiag_part_back");
            let mut b = g.stream().launch_builder(&k.part_back);
            b.arg(src[0])
                .arg(src[1])
                .arg(src[2])
                .arg(src[3])
                .arg(&m)
                .arg(&sys_n)
                .arg(xr)
                .arg(x);
            let tile = MULTI_THREADS * MULTI_CHUNK;
            let pad = tile + (tile - 1) / 32;
            let lc = LaunchConfig {
                grid_dim: (m.div_ceil(tile), 1, 1),
                block_dim: (MULTI_THREADS, 1, 1),
                shared_mem_bytes: 4 * pad * T::BYTES as u32,
            };
            // SAFETY: tridiag_part_back_T(const T* a, b, c, d, u32 m, u32 sys_n, const T* rx,
            // T* x): sources and x hold m elements, rx the reduced size 2*ceil(m/TRI_CHUNK).
            unsafe { b.launch(lc) }.map_err(|e| Gpu::launch_error(&name, e))?;
        }
        Reduction::Cr => {
            let name = crate::gpu::kernel_name::<T>("tridiag_cr_back");
            let mut b = g.stream().launch_builder(&k.cr_back);
            b.arg(src[0])
                .arg(src[1])
                .arg(src[2])
                .arg(src[3])
                .arg(&m)
                .arg(&sys_n)
                .arg(xr)
                .arg(x)
                .arg(flag);
            // SAFETY: tridiag_cr_back_T(const T* a, b, c, d, u32 m, u32 sys_n, const T* xr,
            // T* x, u32* flag): sources and x hold m elements, xr m/2, flag one u32.
            unsafe { b.launch(Gpu::cfg(m.div_ceil(CR_LEVEL_THREADS), CR_LEVEL_THREADS, 0)) }
                .map_err(|e| Gpu::launch_error(&name, e))?;
        }
    }
    Ok(())
}
