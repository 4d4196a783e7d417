//! One rank's part of a distributed matrix on its GPU, and the halo exchange of its product.

use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, DevicePtr, PushKernelArg};
use cudarc::nccl::{result as nr, sys as ns};

use crate::backend::gpu::{GpuOps, THREADS};
use crate::backend::nccl::comm::{cuda_err, nccl_err};
use crate::backend::nccl::{launch_err, n32, DistScalar, NcclOps, Rank, DIST_KERNELS};
use crate::backend::LinearOperator;
use crate::csr::CsrMatrix;
use crate::dist::block::{DistPart, Neighbor, Partition, RowBlock};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::spmv::gpu::GpuCsr;

/// Halo-exchange timings of one [`DistCsr`], in seconds per product (see
/// [`DistCsr::measure`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SpmvTimings {
    /// The whole distributed product (exchange overlapped with the owned block).
    pub full: f64,
    /// The gather and the exchange alone.
    pub exchange: f64,
    /// The owned and boundary blocks alone (no exchange).
    pub local: f64,
    /// The fraction of the exchange hidden behind the owned block:
    /// `(exchange + local − full) / exchange`, clamped to `[0, 1]`.
    pub overlap: f64,
}

/// One rank's part of a distributed matrix on its GPU.
pub struct DistCsr<T: DistScalar> {
    rank: Rank,
    part_info: PartInfo,
    owned: GpuCsr<T>,
    bnd_rows: CudaSlice<u32>,
    bnd_ptr: CudaSlice<u32>,
    bnd_cols: CudaSlice<u32>,
    bnd_vals: CudaSlice<T>,
    send_idx: CudaSlice<u32>,
    sendbuf: CudaSlice<T>,
    halo: CudaSlice<T>,
    send: Vec<Neighbor>,
    recv: Vec<Neighbor>,
    host: DistPart<T>,
    ev_gathered: CudaEvent,
    ev_halo: CudaEvent,
    gather: CudaFunction,
    boundary: CudaFunction,
}

/// Sizes of a rank's part.
#[derive(Clone, Copy, Debug)]
pub struct PartInfo {
    /// Rows of the global matrix.
    pub n_global: u64,
    /// First owned global row.
    pub first_row: u64,
    /// Owned rows.
    pub n_owned: usize,
    /// Owned columns (the local length of the vectors it multiplies; `n_owned` for a square
    /// matrix).
    pub n_owned_cols: usize,
    /// Halo entries received per product.
    pub n_halo: usize,
    /// Entries sent per product.
    pub n_send: usize,
    /// Rows that touch the halo.
    pub n_boundary: usize,
    /// Nonzeros of the part.
    pub nnz: usize,
}

impl<T: DistScalar> std::fmt::Debug for DistCsr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DistCsr(rank {}: {:?})",
            self.rank.rank(),
            self.part_info
        )
    }
}

impl<T: DistScalar> DistCsr<T> {
    /// Sets up this rank's part from its rows (collective: every rank calls it with its own
    /// block and the same partition).
    ///
    /// # Errors
    /// As [`DistPart::build`], plus CUDA/NCCL failures and the single-GPU SpMV's limits.
    pub fn from_block(rank: &Rank, block: &RowBlock<T>, partition: &Partition) -> Result<Self> {
        if partition.nranks() != rank.size() {
            return Err(Error::InvalidInput(format!(
                "a partition of {} blocks for {} ranks",
                partition.nranks(),
                rank.size()
            )));
        }
        let part = DistPart::build(block, partition, rank.rank(), |need| {
            rank.all_to_all_u64(need)
        })?;
        Self::from_part(rank, part)
    }

    /// Sets up this rank's part from the global matrix (every rank holds `a`; each keeps its rows
    /// under `partition`).
    ///
    /// # Errors
    /// As [`DistCsr::from_block`].
    pub fn from_global(rank: &Rank, a: &CsrMatrix<T>, partition: &Partition) -> Result<Self> {
        let block = RowBlock::from_csr(a, partition.rows(rank.rank()))?;
        Self::from_block(rank, &block, partition)
    }

    /// Uploads a part built on the host (a copy of it stays on the host:
    /// [`DistCsr::host_part`]).
    ///
    /// # Errors
    /// CUDA failures and the single-GPU SpMV's limits.
    pub fn upload(rank: &Rank, part: &DistPart<T>) -> Result<Self> {
        Self::from_part(rank, part.clone())
    }

    /// Uploads a part built on the host, square or rectangular
    /// ([`DistPart::build_rect`]), and keeps it on the host ([`DistCsr::host_part`]: what the
    /// distributed AMG's setup reads).
    ///
    /// # Errors
    /// CUDA failures and the single-GPU SpMV's limits.
    pub fn from_part(rank: &Rank, part: DistPart<T>) -> Result<Self> {
        let gpu = &rank.gpu;
        let up32 = |v: &[u32]| {
            if v.is_empty() {
                gpu.zeros::<u32>(1)
            } else {
                gpu.upload(v)
            }
        };
        let upt = |v: &[T]| {
            if v.is_empty() {
                gpu.zeros::<T>(1)
            } else {
                gpu.upload(v)
            }
        };
        let ctx = gpu.context();
        let ev = || ctx.new_event(None).map_err(cuda_err("creating an event"));
        Ok(DistCsr {
            rank: rank.clone(),
            part_info: PartInfo {
                n_global: part.n_global,
                first_row: part.first_row,
                n_owned: part.n_owned(),
                n_owned_cols: part.n_owned_cols(),
                n_halo: part.n_halo(),
                n_send: part.send_idx.len(),
                n_boundary: part.bnd_rows.len(),
                nnz: part.nnz(),
            },
            owned: GpuCsr::upload(gpu, &part.owned)?,
            bnd_rows: up32(&part.bnd_rows)?,
            bnd_ptr: up32(&part.bnd_ptr)?,
            bnd_cols: up32(&part.bnd_cols)?,
            bnd_vals: upt(&part.bnd_vals)?,
            send_idx: up32(&part.send_idx)?,
            sendbuf: gpu.zeros::<T>(part.send_idx.len().max(1))?,
            halo: gpu.zeros::<T>(part.n_halo().max(1))?,
            send: part.send.clone(),
            recv: part.recv.clone(),
            host: part,
            ev_gathered: ev()?,
            ev_halo: ev()?,
            gather: gpu.typed_function::<T>(&DIST_KERNELS, "dist_gather", &[])?,
            boundary: gpu.typed_function::<T>(&DIST_KERNELS, "dist_boundary", &[])?,
        })
    }

    /// This rank's part on the host.
    pub fn host_part(&self) -> &DistPart<T> {
        &self.host
    }
    /// Sizes of this rank's part.
    pub fn info(&self) -> PartInfo {
        self.part_info
    }
    /// The rank.
    pub fn rank(&self) -> &Rank {
        &self.rank
    }
    /// The global rows (and vector entries) this rank owns.
    pub fn owned_rows(&self) -> std::ops::Range<u64> {
        self.part_info.first_row..self.part_info.first_row + self.part_info.n_owned as u64
    }

    fn exchanges(&self) -> bool {
        !self.send.is_empty() || !self.recv.is_empty()
    }

    /// Gathers the values to send (rank stream), then exchanges them with every neighbour on the
    /// halo stream; `ev_halo` marks the end.
    fn start_exchange(&self, x: &CudaSlice<T>) -> Result<()> {
        let gpu = &self.rank.gpu;
        let main = gpu.stream();
        let nsend = n32(self.part_info.n_send);
        if nsend > 0 {
            let mut l = main.launch_builder(&self.gather);
            l.arg(x).arg(&self.send_idx).arg(&self.sendbuf).arg(&nsend);
            // SAFETY: dist_gather(const T* x, const u32* idx, T* out, u32 n): idx and out have
            // nsend elements, every idx < x.len() (checked at setup: owned indices).
            unsafe { l.launch(Gpu::cfg(nsend.div_ceil(THREADS).min(1024), THREADS, 0)) }
                .map_err(launch_err("dist_gather"))?;
        }
        let hs = &self.rank.comm.halo_stream;
        self.ev_gathered
            .record(main)
            .map_err(cuda_err("recording an event"))?;
        hs.wait(&self.ev_gathered)
            .map_err(cuda_err("waiting for an event"))?;
        let (sp, _a) = self.sendbuf.device_ptr(hs);
        let (hp, _b) = self.halo.device_ptr(hs);
        let sz = std::mem::size_of::<T>() as u64;
        let cs = hs.cu_stream() as ns::cudaStream_t;
        let comm = self.rank.comm.halo;
        nr::group_start().map_err(nccl_err("ncclGroupStart"))?;
        for s in &self.send {
            // SAFETY: the range lies inside sendbuf (built from the send lists).
            unsafe {
                nr::send(
                    (sp + sz * s.offset as u64) as _,
                    s.count,
                    T::as_nccl_type(),
                    s.peer as i32,
                    comm,
                    cs,
                )
            }
            .map_err(nccl_err("ncclSend"))?;
        }
        for r in &self.recv {
            // SAFETY: the range lies inside the halo buffer (built from the receive lists).
            unsafe {
                nr::recv(
                    (hp + sz * r.offset as u64) as _,
                    r.count,
                    T::as_nccl_type(),
                    r.peer as i32,
                    comm,
                    cs,
                )
            }
            .map_err(nccl_err("ncclRecv"))?;
        }
        nr::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        self.ev_halo
            .record(hs)
            .map_err(cuda_err("recording an event"))?;
        Ok(())
    }

    fn boundary(&self, y: &mut CudaSlice<T>) -> Result<()> {
        let nb = n32(self.part_info.n_boundary);
        if nb == 0 {
            return Ok(());
        }
        let mut l = self.rank.gpu.stream().launch_builder(&self.boundary);
        l.arg(&self.bnd_rows)
            .arg(&self.bnd_ptr)
            .arg(&self.bnd_cols)
            .arg(&self.bnd_vals)
            .arg(&self.halo)
            .arg(y)
            .arg(&nb);
        // SAFETY: dist_boundary(const u32* rows, const u32* ptr, const u32* cols, const T* vals,
        // const T* halo, T* y, u32 nb): rows has nb entries (< y.len()), ptr nb + 1, cols and
        // vals ptr[nb] entries each < halo.len().
        unsafe { l.launch(Gpu::cfg(nb.div_ceil(THREADS).min(1024), THREADS, 0)) }
            .map_err(launch_err("dist_boundary"))?;
        Ok(())
    }

    /// `y ← A·x` for the owned entries: exchange overlapped with the owned block, then the
    /// boundary rows. Queued; no host synchronisation. Collective.
    ///
    /// # Errors
    /// Launch or NCCL failures.
    pub fn spmv(&self, x: &CudaSlice<T>, y: &mut CudaSlice<T>) -> Result<()> {
        let ex = self.exchanges();
        if ex {
            self.start_exchange(x)?;
        }
        self.owned.spmv(T::one(), x, T::zero(), y)?;
        if ex {
            // Also when this rank receives nothing: the next gather must not overwrite the send
            // buffer while NCCL may still read it.
            self.rank
                .gpu
                .stream()
                .wait(&self.ev_halo)
                .map_err(cuda_err("waiting for the halo"))?;
        }
        self.boundary(y)
    }

    /// Times `reps` products three ways (full, exchange alone, local blocks alone) after a
    /// warm-up, synchronising around each series. Collective.
    ///
    /// # Errors
    /// As [`DistCsr::spmv`].
    pub fn measure(
        &self,
        x: &CudaSlice<T>,
        y: &mut CudaSlice<T>,
        reps: usize,
    ) -> Result<SpmvTimings> {
        let gpu = &self.rank.gpu;
        let reps = reps.max(1);
        let hs = &self.rank.comm.halo_stream;
        let sync = || -> Result<()> {
            hs.synchronize()
                .map_err(cuda_err("halo stream synchronize"))?;
            gpu.synchronize()
        };
        let series = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
            f()?;
            sync()?;
            // Start together: the exchange couples the ranks.
            self.rank.sum_f64(0.0)?;
            let t = Instant::now();
            for _ in 0..reps {
                f()?;
            }
            sync()?;
            Ok(t.elapsed().as_secs_f64() / reps as f64)
        };
        let full = series(&mut || self.spmv(x, y))?;
        let ex = self.exchanges();
        let exchange = series(&mut || {
            if ex {
                self.start_exchange(x)?;
                gpu.stream()
                    .wait(&self.ev_halo)
                    .map_err(cuda_err("waiting for the halo"))?;
            }
            Ok(())
        })?;
        let local = series(&mut || {
            self.owned.spmv(T::one(), x, T::zero(), y)?;
            self.boundary(y)
        })?;
        let overlap = if exchange > 0.0 {
            ((exchange + local - full) / exchange).clamp(0.0, 1.0)
        } else {
            0.0
        };
        Ok(SpmvTimings {
            full,
            exchange,
            local,
            overlap,
        })
    }
}

impl<T: DistScalar> crate::dist::LocalOps<T> for NcclOps<T> {
    type Local = GpuOps<T>;
    type Part = DistCsr<T>;
    fn upload_part(&self, part: DistPart<T>) -> Result<DistCsr<T>> {
        DistCsr::from_part(&self.rank, part)
    }
    fn dist_rank(&self) -> usize {
        self.rank.rank()
    }
    fn dist_size(&self) -> usize {
        self.rank.size()
    }
    fn all_to_all_u64(&self, send: Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>> {
        self.rank.all_to_all_u64(send)
    }
    fn local(&self) -> &GpuOps<T> {
        &self.inner
    }
    fn count_failed(&self, failed: bool) -> Result<usize> {
        Ok(self.rank.sum_f64(if failed { 1.0 } else { 0.0 })? as usize)
    }
}

impl<T: DistScalar> crate::dist::DistOperator<T, NcclOps<T>> for DistCsr<T> {
    fn owned_block(&self) -> &GpuCsr<T> {
        &self.owned
    }
    fn host_part(&self) -> Option<&DistPart<T>> {
        Some(&self.host)
    }
}

/// Times `reps` exchanges of `count` `f64` values with each ring neighbour (rank ± 1; the one
/// peer on two ranks) on the collective communicator, after a warm-up; seconds per exchange,
/// the ranks started together.
/// `y ← A·x` with the distributed product (collective: every rank applies its part).
impl<T: DistScalar> LinearOperator<T, NcclOps<T>> for DistCsr<T> {
    fn nrows(&self) -> usize {
        self.part_info.n_owned
    }
    fn ncols(&self) -> usize {
        self.part_info.n_owned_cols
    }
    fn apply(&self, _: &NcclOps<T>, x: &CudaSlice<T>, y: &mut CudaSlice<T>) -> Result<()> {
        self.spmv(x, y)
    }
}
