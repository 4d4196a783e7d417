//! Distributed matrices and solvers on several GPUs over NCCL (feature `nccl`).
//!
//! One rank per GPU. A rank is a [`Rank`]: its [`Gpu`] and its [`NcclComm`]. Ranks are created
//! either
//!
//! - by **one process driving every GPU**, a thread per GPU ([`run_threads`]), or
//! - by **one process per GPU** (also across hosts): every process calls [`Rank::init`] with the
//!   same [`NcclId`], which rank 0 creates and shares through a file ([`NcclId::share_via_file`]),
//!   an environment variable ([`NcclId::to_hex`] / [`NcclId::from_hex`]) or anything else
//!   (`examples/dist_cg.rs` shows the `mpirun` command).
//!
//! [`DistCsr`] is the distributed matrix (set up collectively from the rank's [`RowBlock`]) and
//! [`NcclOps`] the solver backend: the crate's CG, PCG and BiCGSTAB bodies run unchanged on each
//! rank. See the [module docs](super) for the decomposition.
//!
//! # What runs where, per CG iteration
//!
//! | stream | work |
//! |---|---|
//! | rank stream | gather `x[send_idx]` → event → `y = A_oo·x` → wait halo → `y[bnd] += A_oh·halo` → `pᵀq` partials → all-reduce → α → `r −= αq`, ‖r‖² partials → all-reduce → β → `x, p` update |
//! | halo stream | wait gather → grouped `ncclSend`/`ncclRecv` with each neighbour → event |
//!
//! `SEGSPARSE_HALO_PRIORITY=high` creates the halo stream with the device's highest priority
//! (an experiment for the overlap; off by default until measured).
//!
//! The two all-reduces of a CG iteration cannot be merged without changing the algorithm (α is
//! needed before `r` is updated); each step's sums (‖r‖² and `rᵀz`) travel in one all-reduce.
//! The halo exchange uses its own communicator (created from a second unique id) so that it
//! never queues behind an all-reduce on the other stream.
//!
//! # How many GPUs
//!
//! [`measure_costs`] measures, collectively on a group of ranks, what one reduction step and one
//! halo exchange cost here, with a GPU's copy bandwidth and free memory; [`auto_gpus`] starts a
//! group on every GPU of the machine (only when there are two or more), measures, and applies
//! [`choose_gpus`](super::choose_gpus) to a problem's statistics (`sparse-solve --gpus auto`).
//!
//! # Errors
//!
//! A machine without `libnccl.so` gets [`Error::CudaUnavailable`] naming the library; single-GPU
//! use of the crate is unaffected (the library is loaded only here, at run time).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, PushKernelArg};
use cudarc::nccl::{result as nr, sys as ns, NcclType};

use super::block::{DistPart, Neighbor, Partition, RowBlock};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelSource;
use crate::gpu::Gpu;
use crate::solvers::gpu::{GpuOps, GpuScalars, THREADS};
use crate::solvers::recur::{Slot, NSLOTS};
use crate::solvers::{Fuse, LinearOperator, VectorOps};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

/// The distributed kernels, appended to the solvers' `blas1.cu` (whose slots, `grid_sum` and
/// recurrence helpers they use).
pub const DIST_KERNELS: KernelSource = KernelSource {
    name: "dist/dist.cu",
    text: concat!(
        include_str!("../../kernels/solvers/blas1.cu"),
        "\n",
        include_str!("../../kernels/dist/dist.cu")
    ),
    headers: &[&crate::gpu::kernels::COMMON],
};

/// An element type of the distributed solvers: `f32` or `f64`.
pub trait DistScalar: GpuScalar + NcclType {}
impl<T: GpuScalar + NcclType> DistScalar for T {}

/// Fails with a clear message when NCCL cannot be loaded (checked before any NCCL call, which
/// would otherwise panic inside cudarc).
///
/// # Errors
/// [`Error::CudaUnavailable`] naming the missing library.
pub fn nccl_available() -> Result<()> {
    // SAFETY: only tries to open the library.
    if unsafe { ns::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::CudaUnavailable(
            "the NCCL library was not found (libnccl.so: install NCCL's development package, \
             or put a libnccl.so link to libnccl.so.2 on LD_LIBRARY_PATH): multi-GPU solves \
             need NCCL (single-GPU use is unaffected)"
                .into(),
        ))
    }
}

fn nccl_err(what: &str) -> impl Fn(nr::NcclError) -> Error + '_ {
    move |e| Error::Cuda {
        context: format!("NCCL {what}"),
        message: format!("{:?}", e.0),
    }
}

fn cuda_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::cuda(what, e)
}

/// The unique ids that bootstrap one group of ranks (two communicators: collectives and halo).
#[derive(Clone, Copy)]
pub struct NcclId {
    ids: [ns::ncclUniqueId; 2],
}

impl std::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclId({}…)", &self.to_hex()[..16])
    }
}

impl NcclId {
    /// New ids (on one rank only; then share them).
    ///
    /// # Errors
    /// NCCL missing or failing.
    pub fn new() -> Result<Self> {
        nccl_available()?;
        let a = nr::get_uniqueid().map_err(nccl_err("ncclGetUniqueId"))?;
        let b = nr::get_uniqueid().map_err(nccl_err("ncclGetUniqueId"))?;
        Ok(NcclId { ids: [a, b] })
    }

    /// The ids as 512 hex digits (for an environment variable or a file).
    pub fn to_hex(&self) -> String {
        self.ids
            .iter()
            .flat_map(|id| id.internal.iter())
            .map(|&c| format!("{:02x}", c as u8))
            .collect()
    }

    /// Parses [`NcclId::to_hex`]'s output.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the text is not 512 hex digits.
    pub fn from_hex(s: &str) -> Result<Self> {
        let s = s.trim();
        let bad = || {
            Error::InvalidInput(format!(
                "an NCCL id is 512 hex digits, got {} characters",
                s.len()
            ))
        };
        if s.len() != 512 || !s.is_ascii() {
            return Err(bad());
        }
        let mut ids = [ns::ncclUniqueId { internal: [0; 128] }; 2];
        for (k, chunk) in s.as_bytes().chunks(2).enumerate() {
            let byte = u8::from_str_radix(std::str::from_utf8(chunk).map_err(|_| bad())?, 16)
                .map_err(|_| bad())?;
            ids[k / 128].internal[k % 128] = byte as _;
        }
        Ok(NcclId { ids })
    }

    /// Rank 0 creates the ids and writes them to `path` (atomically: a temporary file, then a
    /// rename); the other ranks wait for the file, up to `timeout`. Remove the file between runs.
    ///
    /// # Errors
    /// I/O errors, a malformed file, or the timeout (naming the file).
    pub fn share_via_file(path: &Path, rank: usize, timeout: Duration) -> Result<Self> {
        let io = |e| Error::Io {
            path: Some(path.to_path_buf()),
            source: e,
        };
        if rank == 0 {
            let id = NcclId::new()?;
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, id.to_hex()).map_err(io)?;
            std::fs::rename(&tmp, path).map_err(io)?;
            return Ok(id);
        }
        let clock = Instant::now();
        loop {
            match std::fs::read_to_string(path) {
                Ok(s) if s.trim().len() == 512 => return NcclId::from_hex(&s),
                _ if clock.elapsed() > timeout => {
                    return Err(Error::InvalidInput(format!(
                        "rank {rank}: no NCCL id in {} after {:?} (is rank 0 running?)",
                        path.display(),
                        timeout
                    )))
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// One rank's NCCL communicators: collectives on the rank's stream, halo exchange on its own
/// stream.
pub struct NcclComm {
    coll: ns::ncclComm_t,
    halo: ns::ncclComm_t,
    halo_stream: Arc<CudaStream>,
    rank: usize,
    size: usize,
}

// SAFETY: an NCCL communicator may be used from any thread as long as calls are not concurrent;
// every call here is made by the owning rank's thread (the handles are only moved, not shared
// between running threads).
unsafe impl Send for NcclComm {}
unsafe impl Sync for NcclComm {}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclComm(rank {} of {})", self.rank, self.size)
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // Abort rather than finalize: it never waits for the other ranks (cudarc does the same).
        // SAFETY: the handles came from ncclCommInitRank and are not used after this.
        unsafe {
            let _ = nr::comm_abort(self.halo);
            let _ = nr::comm_abort(self.coll);
        }
    }
}

/// Whether the halo stream gets the device's highest priority (`SEGSPARSE_HALO_PRIORITY=high`;
/// default: normal, as measured in `benches/results/scaleout.md`). With it, the exchange's NCCL
/// kernel is scheduled ahead of the owned block's SpMV blocks as SMs free up, which may raise
/// the overlap measured there (0.05–0.30); not measured yet, hence a switch.
fn halo_priority_high() -> bool {
    std::env::var("SEGSPARSE_HALO_PRIORITY").is_ok_and(|v| v.eq_ignore_ascii_case("high"))
}

/// One rank: its GPU and communicators.
#[derive(Clone, Debug)]
pub struct Rank {
    /// The rank's device (its stream orders all of the rank's work).
    pub gpu: Arc<Gpu>,
    /// The communicators.
    pub comm: Arc<NcclComm>,
}

impl Rank {
    /// Joins the group `id` as rank `rank` of `size` on device `device` (collective: blocks until
    /// every rank has joined).
    ///
    /// # Errors
    /// No CUDA device or NCCL; NCCL initialisation failures.
    pub fn init(device: usize, rank: usize, size: usize, id: &NcclId) -> Result<Rank> {
        nccl_available()?;
        let gpu = Gpu::with_ordinal(device)?;
        gpu.context()
            .bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        let halo_stream = if halo_priority_high() {
            let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
                .map_err(cuda_err("reading the stream priority range"))?;
            gpu.context().new_stream_with_priority(greatest)
        } else {
            gpu.context().new_stream()
        }
        .map_err(cuda_err("creating the halo stream"))?;
        let init = |id: ns::ncclUniqueId| {
            let mut c = std::mem::MaybeUninit::uninit();
            // SAFETY: c receives the communicator; id, size and rank are valid values.
            unsafe {
                nr::comm_init_rank(c.as_mut_ptr(), size as i32, id, rank as i32)
                    .map_err(nccl_err("ncclCommInitRank"))?;
                Ok::<_, Error>(c.assume_init())
            }
        };
        let coll = init(id.ids[0])?;
        let halo = init(id.ids[1])?;
        Ok(Rank {
            gpu,
            comm: Arc::new(NcclComm {
                coll,
                halo,
                halo_stream,
                rank,
                size,
            }),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank
    }
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.comm.size
    }

    fn cu_stream(&self) -> ns::cudaStream_t {
        self.gpu.stream().cu_stream() as _
    }

    /// In-place sum of `buf` over the ranks, queued on the rank's stream.
    fn all_reduce<T: NcclType>(&self, buf: &mut CudaSlice<T>) -> Result<()> {
        let (p, _rec) = buf.device_ptr(self.gpu.stream());
        // SAFETY: p addresses buf.len() elements of T on this rank's device.
        unsafe {
            nr::all_reduce(
                p as *const _,
                p as *mut _,
                buf.len(),
                T::as_nccl_type(),
                ns::ncclRedOp_t::ncclSum,
                self.comm.coll,
                self.cu_stream(),
            )
        }
        .map_err(nccl_err("ncclAllReduce"))?;
        Ok(())
    }

    /// All-to-all of index lists (setup only; synchronises): `send[p]` goes to rank `p`, the
    /// result holds what each rank sent here.
    ///
    /// # Errors
    /// CUDA or NCCL failures.
    pub fn all_to_all_u64(&self, send: Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>> {
        let (me, size) = (self.rank(), self.size());
        assert_eq!(send.len(), size, "all_to_all: one list per rank");
        // Counts: an all-gather of every rank's send counts.
        let counts: Vec<u64> = send.iter().map(|v| v.len() as u64).collect();
        let dcounts = self.gpu.upload(&counts)?;
        let all = self.gpu.zeros::<u64>(size * size)?;
        {
            let (s, _a) = dcounts.device_ptr(self.gpu.stream());
            let (r, _b) = all.device_ptr(self.gpu.stream());
            // SAFETY: s holds `size` u64, r `size * size`.
            unsafe {
                nr::all_gather(
                    s as _,
                    r as _,
                    size,
                    u64::as_nccl_type(),
                    self.comm.coll,
                    self.cu_stream(),
                )
            }
            .map_err(nccl_err("ncclAllGather"))?;
        }
        let all = self.gpu.download(&all)?;
        let incoming: Vec<usize> = (0..size).map(|p| all[p * size + me] as usize).collect();
        let mut flat: Vec<u64> = send.iter().flatten().copied().collect();
        if flat.is_empty() {
            flat.push(0); // no zero-byte allocations; nothing is sent from it
        }
        let dsend = self.gpu.upload(&flat)?;
        let total_in: usize = incoming.iter().sum();
        let drecv = self.gpu.zeros::<u64>(total_in.max(1))?;
        {
            let (s, _a) = dsend.device_ptr(self.gpu.stream());
            let (r, _b) = drecv.device_ptr(self.gpu.stream());
            nr::group_start().map_err(nccl_err("ncclGroupStart"))?;
            let (mut so, mut ro) = (0usize, 0usize);
            for p in 0..size {
                let (ns_, nr_) = (send[p].len(), incoming[p]);
                // SAFETY: offsets stay inside dsend (flat.len()) and drecv (total_in).
                unsafe {
                    if ns_ > 0 {
                        nr::send(
                            (s + 8 * so as u64) as _,
                            ns_,
                            u64::as_nccl_type(),
                            p as i32,
                            self.comm.coll,
                            self.cu_stream(),
                        )
                        .map_err(nccl_err("ncclSend"))?;
                    }
                    if nr_ > 0 {
                        nr::recv(
                            (r + 8 * ro as u64) as _,
                            nr_,
                            u64::as_nccl_type(),
                            p as i32,
                            self.comm.coll,
                            self.cu_stream(),
                        )
                        .map_err(nccl_err("ncclRecv"))?;
                    }
                }
                so += ns_;
                ro += nr_;
            }
            nr::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        }
        let got = self.gpu.download(&drecv)?;
        let mut out = Vec::with_capacity(size);
        let mut o = 0;
        for &c in &incoming {
            out.push(got[o..o + c].to_vec());
            o += c;
        }
        Ok(out)
    }

    /// Sum of a host value over the ranks (setup and reporting; synchronises).
    ///
    /// # Errors
    /// CUDA or NCCL failures.
    pub fn sum_f64(&self, v: f64) -> Result<f64> {
        let mut d = self.gpu.upload(&[v])?;
        self.all_reduce(&mut d)?;
        Ok(self.gpu.download(&d)?[0])
    }
}

/// Runs `f` on one rank per device `0..ndev` of this process, a thread each (the single-process
/// mode), and returns the results in rank order.
///
/// # Errors
/// The first rank's error; NCCL or CUDA missing.
pub fn run_threads<R: Send>(ndev: usize, f: impl Fn(Rank) -> Result<R> + Sync) -> Result<Vec<R>> {
    let id = NcclId::new()?;
    let results: Vec<Result<R>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..ndev)
            .map(|r| {
                let f = &f;
                s.spawn(move || f(Rank::init(r, r, ndev, &id)?))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    results.into_iter().collect()
}

fn n32(n: usize) -> u32 {
    u32::try_from(n).expect("a rank's part is limited to u32 indices (checked at setup)")
}

fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Gpu::launch_error(name, e)
}

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
        Self::upload(rank, &part)
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

    /// Uploads a part built on the host.
    ///
    /// # Errors
    /// CUDA failures and the single-GPU SpMV's limits.
    pub fn upload(rank: &Rank, part: &DistPart<T>) -> Result<Self> {
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
        let defines = [("SOLVER_THREADS", THREADS.to_string())];
        let ctx = gpu.context();
        let ev = || ctx.new_event(None).map_err(cuda_err("creating an event"));
        Ok(DistCsr {
            rank: rank.clone(),
            part_info: PartInfo {
                n_global: part.n_global,
                first_row: part.first_row,
                n_owned: part.n_owned(),
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
            ev_gathered: ev()?,
            ev_halo: ev()?,
            gather: gpu.typed_function::<T>(&DIST_KERNELS, "dist_gather", &defines)?,
            boundary: gpu.typed_function::<T>(&DIST_KERNELS, "dist_boundary", &defines)?,
        })
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

/// The distributed solver backend of one rank: vectors hold the owned entries on the rank's
/// GPU; vector-only steps are the single-GPU kernels ([`GpuOps`]); each reduction step is a
/// local kernel, one all-reduce of its sums, and a one-thread recurrence kernel.
pub struct NcclOps<T: DistScalar> {
    inner: GpuOps<T>,
    rank: Rank,
    k: DistKernels,
}

struct DistKernels {
    dot2: CudaFunction,
    cg_update_r: CudaFunction,
    bicg_update: CudaFunction,
    finish: CudaFunction,
}

/// Step kinds of `dist_finish` (match `kernels/dist/dist.cu`).
#[derive(Clone, Copy)]
#[repr(u32)]
enum Kind {
    Start = 0,
    CgAlpha = 1,
    CgUpdateR = 2,
    CgRho = 3,
    BicgAlpha = 4,
    BicgOmega = 5,
    BicgUpdate = 6,
    Dot = 7,
}

/// Fuse mode codes of `blas1.cu`.
const FUSE_IDENTITY: u32 = 0;
const FUSE_JACOBI: u32 = 1;
const FUSE_SEPARATE: u32 = 2;
const NULL: u64 = 0;

/// The distributed backend's scalars: the single-GPU slots and history, plus the reduction
/// buffer that is all-reduced.
pub struct DistScalars<T> {
    inner: GpuScalars<T>,
    red: CudaSlice<T>,
    partials: CudaSlice<T>,
    ticket: CudaSlice<u32>,
    grid: u32,
}

impl<T: DistScalar> std::fmt::Debug for NcclOps<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NcclOps(rank {} of {})",
            self.rank.rank(),
            self.rank.size()
        )
    }
}

impl<T: DistScalar> NcclOps<T> {
    /// The backend of `rank` (compiles the kernels once per device).
    ///
    /// # Errors
    /// Compile or CUDA failures.
    pub fn new(rank: &Rank) -> Result<Self> {
        let defines = [("SOLVER_THREADS", THREADS.to_string())];
        let f = |root: &str| rank.gpu.typed_function::<T>(&DIST_KERNELS, root, &defines);
        Ok(NcclOps {
            inner: GpuOps::new(&rank.gpu)?,
            rank: rank.clone(),
            k: DistKernels {
                dot2: f("dist_dot2")?,
                cg_update_r: f("dist_cg_update_r")?,
                bicg_update: f("dist_bicg_update")?,
                finish: f("dist_finish")?,
            },
        })
    }

    /// The rank.
    pub fn rank(&self) -> &Rank {
        &self.rank
    }

    fn cfg(&self, grid: u32) -> cudarc::driver::LaunchConfig {
        Gpu::cfg(grid, THREADS, 0)
    }

    fn grid(&self, sc: &DistScalars<T>, n: usize) -> u32 {
        let g = self.inner.grid(n);
        assert!(
            g <= sc.grid,
            "solver workspace for {} blocks, vectors of length {n} need {g}",
            sc.grid
        );
        g
    }

    /// `red = (a·b, c·d)` locally (c, d optional), gated on the status when `gate`.
    fn dot2(
        &self,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        cd: Option<(&CudaSlice<T>, &CudaSlice<T>)>,
        sc: &mut DistScalars<T>,
        gate: bool,
    ) -> Result<()> {
        assert_eq!(
            a.len(),
            b.len(),
            "dot: vectors of lengths {} and {}",
            a.len(),
            b.len()
        );
        let n = n32(a.len());
        let grid = self.grid(sc, a.len());
        let gate = gate as u32;
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.dot2);
        l.arg(a).arg(b);
        match cd {
            Some((c, d)) => {
                assert_eq!(
                    a.len(),
                    c.len(),
                    "dot: vectors of lengths {} and {}",
                    a.len(),
                    c.len()
                );
                assert_eq!(
                    a.len(),
                    d.len(),
                    "dot: vectors of lengths {} and {}",
                    a.len(),
                    d.len()
                );
                l.arg(c).arg(d);
            }
            None => {
                l.arg(&NULL).arg(&NULL);
            }
        }
        l.arg(&n)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket)
            .arg(&*slots)
            .arg(&gate);
        // SAFETY: dist_dot2(const T* a, const T* b, const T* c, const T* d, u32 n, T* red,
        // T* partials, u32* ticket, const T* s, u32 gate): a, b (c, d when non-null) have n
        // elements; red 2, partials 2 * grid, s NSLOTS.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_dot2"))?;
        Ok(())
    }

    /// All-reduces the step's sums and applies the recurrence `kind`.
    fn finish(&self, kind: Kind, mode: u32, sc: &mut DistScalars<T>, it: usize) -> Result<()> {
        self.rank.all_reduce(&mut sc.red)?;
        let (k, it) = (kind as u32, n32(it));
        let (slots, hist) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.finish);
        l.arg(&k)
            .arg(&mode)
            .arg(&sc.red)
            .arg(slots)
            .arg(hist)
            .arg(&it);
        // SAFETY: dist_finish(u32 kind, u32 mode, const T* red, T* s, T* hist, u32 it): red 2,
        // s NSLOTS, hist max_iters + 1 > it elements. One thread.
        unsafe { l.launch(Gpu::cfg(1, 1, 0)) }.map_err(launch_err("dist_finish"))?;
        Ok(())
    }
}

fn mode_of<V>(f: &Fuse<'_, V>) -> u32 {
    match f {
        Fuse::Identity => FUSE_IDENTITY,
        Fuse::Jacobi { .. } => FUSE_JACOBI,
        Fuse::Separate(_) => FUSE_SEPARATE,
    }
}

impl<T: DistScalar> VectorOps<T> for NcclOps<T> {
    type Vector = CudaSlice<T>;
    type Scalars = DistScalars<T>;

    fn name(&self) -> &'static str {
        "nccl"
    }
    fn default_check_every(&self) -> usize {
        16
    }
    fn len(&self, v: &CudaSlice<T>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<CudaSlice<T>> {
        self.inner.zeros(n)
    }
    fn upload(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.inner.upload(host)
    }
    fn download(&self, v: &CudaSlice<T>) -> Result<Vec<T>> {
        self.inner.download(v)
    }
    fn copy(&self, src: &CudaSlice<T>, dst: &mut CudaSlice<T>) -> Result<()> {
        self.inner.copy(src, dst)
    }
    fn set_zero(&self, v: &mut CudaSlice<T>) -> Result<()> {
        self.inner.set_zero(v)
    }
    fn residual(&self, b: &CudaSlice<T>, ax: &CudaSlice<T>, r: &mut CudaSlice<T>) -> Result<()> {
        self.inner.residual(b, ax, r)
    }
    fn scale(&self, d: &CudaSlice<T>, r: &CudaSlice<T>, z: &mut CudaSlice<T>) -> Result<()> {
        self.inner.scale(d, r, z)
    }
    fn axpy(&self, alpha: T, x: &CudaSlice<T>, y: &mut CudaSlice<T>) -> Result<()> {
        self.inner.axpy(alpha, x, y)
    }
    #[allow(clippy::too_many_arguments)]
    fn poly_step(
        &self,
        t: &CudaSlice<T>,
        inv_diag: Option<&CudaSlice<T>>,
        res: &mut CudaSlice<T>,
        d: &mut CudaSlice<T>,
        z: &mut CudaSlice<T>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        self.inner.poly_step(t, inv_diag, res, d, z, first, c1, c2)
    }
    fn dot(&self, x: &CudaSlice<T>, y: &CudaSlice<T>, sc: &mut DistScalars<T>) -> Result<f64> {
        self.dot2(x, y, None, sc, false)?;
        self.finish(Kind::Dot, 0, sc, 0)?;
        Ok(self.read_slots(sc)?[Slot::Dot as usize].as_f64())
    }

    fn scalars(&self, n: usize, max_iters: usize) -> Result<DistScalars<T>> {
        let grid = self.inner.grid(n);
        let gpu = &self.rank.gpu;
        Ok(DistScalars {
            inner: self.inner.scalars(n, max_iters)?,
            red: gpu.zeros::<T>(2)?,
            partials: gpu.zeros::<T>(2 * grid as usize)?,
            ticket: gpu.zeros::<u32>(1)?,
            grid,
        })
    }
    fn write_slots(&self, sc: &mut DistScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        self.inner.write_slots(&mut sc.inner, values)
    }
    fn read_slots(&self, sc: &DistScalars<T>) -> Result<[T; NSLOTS]> {
        self.inner.read_slots(&sc.inner)
    }
    fn read_history(&self, sc: &DistScalars<T>, len: usize) -> Result<Vec<T>> {
        self.inner.read_history(&sc.inner, len)
    }

    fn cg_start(
        &self,
        r: &CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        let mode = mode_of(&fuse);
        match fuse {
            Fuse::Identity => self.dot2(r, r, None, sc, false)?,
            Fuse::Jacobi { inv_diag, z } => {
                self.inner.scale(inv_diag, r, z)?;
                self.dot2(r, r, Some((r, z)), sc, false)?
            }
            Fuse::Separate(z) => {
                let z = z.expect("cg_start with a separate preconditioner needs z");
                self.dot2(r, r, Some((r, z)), sc, false)?
            }
        }
        self.finish(Kind::Start, mode, sc, it)
    }

    fn cg_alpha(
        &self,
        p: &CudaSlice<T>,
        q: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(p, q, None, sc, true)?;
        self.finish(Kind::CgAlpha, 0, sc, it)
    }

    fn cg_update_r(
        &self,
        q: &CudaSlice<T>,
        r: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        assert_eq!(
            q.len(),
            r.len(),
            "cg_update_r: vectors of lengths {} and {}",
            q.len(),
            r.len()
        );
        let mode = mode_of(&fuse);
        let n = n32(r.len());
        let grid = self.grid(sc, r.len());
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.cg_update_r);
        l.arg(q).arg(&mut *r);
        match fuse {
            Fuse::Jacobi { inv_diag, z } => {
                assert_eq!(inv_diag.len(), q.len(), "cg_update_r: diagonal length");
                assert_eq!(z.len(), q.len(), "cg_update_r: z length");
                l.arg(inv_diag).arg(z);
            }
            _ => {
                l.arg(&NULL).arg(&NULL);
            }
        }
        l.arg(&n)
            .arg(&mode)
            .arg(&*slots)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket);
        // SAFETY: dist_cg_update_r(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode,
        // const T* s, T* red, T* partials, u32* ticket): q, r (and dinv, z in Jacobi mode, null
        // and untouched otherwise) have n elements; red 2, partials 2 * grid.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_cg_update_r"))?;
        self.finish(Kind::CgUpdateR, mode, sc, it)
    }

    fn cg_rho(
        &self,
        r: &CudaSlice<T>,
        z: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(r, z, None, sc, true)?;
        self.finish(Kind::CgRho, 0, sc, it)
    }

    fn cg_update_xp(
        &self,
        x: &mut CudaSlice<T>,
        p: &mut CudaSlice<T>,
        z: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.inner.cg_update_xp(x, p, z, &mut sc.inner, it)
    }

    fn bicg_p(
        &self,
        r: &CudaSlice<T>,
        v: &CudaSlice<T>,
        p: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
    ) -> Result<()> {
        self.inner.bicg_p(r, v, p, fuse, &mut sc.inner)
    }

    fn bicg_alpha(
        &self,
        rhat: &CudaSlice<T>,
        v: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(rhat, v, None, sc, true)?;
        self.finish(Kind::BicgAlpha, 0, sc, it)
    }

    fn bicg_s(
        &self,
        r: &CudaSlice<T>,
        v: &CudaSlice<T>,
        s: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
    ) -> Result<()> {
        self.inner.bicg_s(r, v, s, fuse, &mut sc.inner)
    }

    fn bicg_omega(
        &self,
        t: &CudaSlice<T>,
        s: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(t, s, Some((t, t)), sc, true)?;
        self.finish(Kind::BicgOmega, 0, sc, it)
    }

    fn bicg_update(
        &self,
        x: &mut CudaSlice<T>,
        phat: &CudaSlice<T>,
        shat: &CudaSlice<T>,
        s: &CudaSlice<T>,
        t: &CudaSlice<T>,
        r: &mut CudaSlice<T>,
        rhat: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        let len = x.len();
        for (what, l) in [
            ("p̂", phat.len()),
            ("ŝ", shat.len()),
            ("s", s.len()),
            ("t", t.len()),
            ("r", r.len()),
            ("r̂", rhat.len()),
        ] {
            assert_eq!(len, l, "bicg_update: {what} has length {l}, x {len}");
        }
        let n = n32(len);
        let grid = self.grid(sc, len);
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.bicg_update);
        l.arg(x)
            .arg(phat)
            .arg(shat)
            .arg(s)
            .arg(t)
            .arg(r)
            .arg(rhat)
            .arg(&n)
            .arg(&*slots)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket);
        // SAFETY: dist_bicg_update(T* x, const T* phat, const T* shat, const T* sv, const T* t,
        // T* r, const T* rhat, u32 n, const T* s, T* red, T* partials, u32* ticket): every vector
        // has n elements; red 2, partials 2 * grid.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_bicg_update"))?;
        self.finish(Kind::BicgUpdate, 0, sc, it)
    }
}

impl<T: DistScalar> super::LocalOps<T> for NcclOps<T> {
    type Local = GpuOps<T>;
    fn local(&self) -> &GpuOps<T> {
        &self.inner
    }
    fn count_failed(&self, failed: bool) -> Result<usize> {
        Ok(self.rank.sum_f64(if failed { 1.0 } else { 0.0 })? as usize)
    }
}

impl<T: DistScalar> super::DistOperator<T, NcclOps<T>> for DistCsr<T> {
    fn owned_block(&self) -> &GpuCsr<T> {
        &self.owned
    }
}

/// Times `reps` exchanges of `count` `f64` values with each ring neighbour (rank ± 1; the one
/// peer on two ranks) on the collective communicator, after a warm-up; seconds per exchange,
/// the ranks started together.
fn exchange_seconds(rank: &Rank, count: usize, reps: usize) -> Result<f64> {
    let (me, size) = (rank.rank(), rank.size());
    let peers: Vec<usize> = if size == 2 {
        vec![1 - me]
    } else {
        vec![(me + 1) % size, (me + size - 1) % size]
    };
    let gpu = &rank.gpu;
    let send = gpu.zeros::<f64>(count * peers.len())?;
    let recv = gpu.zeros::<f64>(count * peers.len())?;
    let once = || -> Result<()> {
        let (sp, _a) = send.device_ptr(gpu.stream());
        let (rp, _b) = recv.device_ptr(gpu.stream());
        nr::group_start().map_err(nccl_err("ncclGroupStart"))?;
        for (k, &p) in peers.iter().enumerate() {
            let off = (8 * count * k) as u64;
            // SAFETY: each peer's range [off, off + 8·count) lies inside send and recv, which
            // hold count · peers.len() f64 values.
            unsafe {
                nr::send(
                    (sp + off) as _,
                    count,
                    f64::as_nccl_type(),
                    p as i32,
                    rank.comm.coll,
                    rank.cu_stream(),
                )
                .map_err(nccl_err("ncclSend"))?;
                nr::recv(
                    (rp + off) as _,
                    count,
                    f64::as_nccl_type(),
                    p as i32,
                    rank.comm.coll,
                    rank.cu_stream(),
                )
                .map_err(nccl_err("ncclRecv"))?;
            }
        }
        nr::group_end().map_err(nccl_err("ncclGroupEnd"))?;
        Ok(())
    };
    for _ in 0..3 {
        once()?;
    }
    gpu.synchronize()?;
    rank.sum_f64(0.0)?;
    let t = Instant::now();
    for _ in 0..reps.max(1) {
        once()?;
    }
    gpu.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / reps.max(1) as f64)
}

/// Measures this machine's communication costs on the ranks' group (collective: every rank
/// calls it): one reduction step as a solve issues it (partial sums, the all-reduce, the
/// recurrence kernel; 100 of them queued back to back), a
/// neighbour exchange of 16 and of 2^20 `f64` values (latency, and bandwidth from the
/// difference), a device's copy bandwidth and the memory it has free. Every figure is the mean
/// over the ranks, so every rank gets the same costs (and makes the same choice). Takes a few
/// milliseconds after the communicator exists.
///
/// # Errors
/// CUDA or NCCL failures.
pub fn measure_costs(rank: &Rank) -> Result<super::CommCosts> {
    let gpu = &rank.gpu;
    let size = rank.size();
    let mean = |v: f64| -> Result<f64> { Ok(rank.sum_f64(v)? / size as f64) };
    // One reduction step as the solvers issue it (the partial-sum kernel, the all-reduce of
    // its two sums, the one-thread recurrence kernel), on vectors of one entry, back to back.
    let ops = NcclOps::<f64>::new(rank)?;
    let (u, v) = (gpu.upload(&[1.0f64])?, gpu.upload(&[1.0f64])?);
    let mut sc = ops.scalars(1, 1)?;
    let mut step = || -> Result<()> {
        ops.dot2(&u, &v, None, &mut sc, false)?;
        ops.finish(Kind::Dot, 0, &mut sc, 0)
    };
    for _ in 0..5 {
        step()?;
    }
    gpu.synchronize()?;
    rank.sum_f64(0.0)?;
    const REPS: usize = 100;
    let t = Instant::now();
    for _ in 0..REPS {
        step()?;
    }
    gpu.synchronize()?;
    let allreduce = mean(t.elapsed().as_secs_f64() / REPS as f64)?;
    let (small_n, large_n) = (16usize, 1usize << 20);
    let (small, large) = if size > 1 {
        (
            mean(exchange_seconds(rank, small_n, 50)?)?,
            mean(exchange_seconds(rank, large_n, 10)?)?,
        )
    } else {
        (0.0, 0.0)
    };
    let bytes = (8 * (large_n - small_n)) as f64;
    let halo_bw = if large > small {
        bytes / (large - small)
    } else {
        f64::INFINITY
    };
    let device_bw = mean(gpu.copy_bandwidth(256 << 20, 5)?)?;
    let memory = mean(gpu.available_memory()? as f64)?;
    Ok(super::CommCosts {
        gpus: size,
        allreduce_seconds: allreduce,
        halo_latency_seconds: small,
        halo_bytes_per_second: halo_bw,
        device_bytes_per_second: device_bw,
        device_memory_bytes: memory as u64,
    })
}

/// What [`auto_gpus`] decided.
#[derive(Clone, Debug)]
pub struct AutoGpus {
    /// GPUs to use (at least 1; 1 also on a machine without a GPU, where the caller runs on the
    /// CPU).
    pub gpus: usize,
    /// The measured costs (`None` with fewer than two GPUs: nothing was measured, no NCCL
    /// communicator was started).
    pub costs: Option<super::CommCosts>,
    /// Seconds the measurement took (communicators started on every GPU, the probes).
    pub probe_seconds: f64,
    /// Why the choice fell back to one GPU without a measurement, when it did (NCCL missing or
    /// failing with several GPUs present).
    pub note: Option<String>,
}

/// `--gpus auto`: how many of this machine's GPUs the problem `stats` is worth. With fewer than
/// two GPUs, 1 at once (no NCCL call). Otherwise starts a communicator on every GPU, measures
/// [`measure_costs`], and applies [`choose_gpus`](super::choose_gpus). Never fails: a missing or
/// failing NCCL gives 1 with a [`AutoGpus::note`].
pub fn auto_gpus(stats: &super::ProblemStats) -> AutoGpus {
    let n = Gpu::device_count();
    let one = |note: Option<String>, probe_seconds| AutoGpus {
        gpus: 1,
        costs: None,
        probe_seconds,
        note,
    };
    if n < 2 {
        return one(None, 0.0);
    }
    if let Err(e) = nccl_available() {
        return one(Some(format!("{n} GPUs, but {e}")), 0.0);
    }
    let t = Instant::now();
    match run_threads(n, |rank| measure_costs(&rank)) {
        Ok(all) => {
            let costs = all[0];
            AutoGpus {
                gpus: super::choose_gpus(stats, &costs),
                costs: Some(costs),
                probe_seconds: t.elapsed().as_secs_f64(),
                note: None,
            }
        }
        Err(e) => one(
            Some(format!("measuring the costs of {n} GPUs failed: {e}")),
            t.elapsed().as_secs_f64(),
        ),
    }
}

/// `y ← A·x` with the distributed product (collective: every rank applies its part).
impl<T: DistScalar> LinearOperator<T, NcclOps<T>> for DistCsr<T> {
    fn nrows(&self) -> usize {
        self.part_info.n_owned
    }
    fn ncols(&self) -> usize {
        self.part_info.n_owned
    }
    fn apply(&self, _: &NcclOps<T>, x: &CudaSlice<T>, y: &mut CudaSlice<T>) -> Result<()> {
        self.spmv(x, y)
    }
}
