//! A group of GPU ranks over NCCL: the bootstrap id, the communicators of a rank, and a thread
//! per GPU.
//!
//! Ranks are created either
//!
//! - by **one process driving every GPU**, a thread per GPU ([`run_threads`]), or
//! - by **one process per GPU** (also across hosts): every process calls [`Rank::init`] with the
//!   same [`NcclId`], which rank 0 creates and shares through a file ([`NcclId::share_via_file`]),
//!   an environment variable ([`NcclId::to_hex`] / [`NcclId::from_hex`]) or anything else
//!   (`tools/examples/dist_cg.rs` shows the `mpirun` command).
//!
//! A machine without `libnccl.so` gets [`Error::CudaUnavailable`] naming the library; single-GPU
//! use of the crate is unaffected (the library is loaded only here, at run time).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::{result as nr, sys as ns, NcclType};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

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

pub(crate) fn nccl_err(what: &str) -> impl Fn(nr::NcclError) -> Error + '_ {
    move |e| Error::Cuda {
        context: format!("NCCL {what}"),
        message: format!("{:?}", e.0),
    }
}

pub(crate) fn cuda_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
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
    pub(crate) coll: ns::ncclComm_t,
    pub(crate) halo: ns::ncclComm_t,
    pub(crate) halo_stream: Arc<CudaStream>,
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
/// default: normal, as measured in `benches/results/history/scaleout.md`). With it, the exchange's NCCL
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

    pub(crate) fn cu_stream(&self) -> ns::cudaStream_t {
        self.gpu.stream().cu_stream() as _
    }

    /// In-place sum of `buf` over the ranks, queued on the rank's stream.
    pub(crate) fn all_reduce<T: NcclType>(&self, buf: &mut CudaSlice<T>) -> Result<()> {
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
