//! What communication costs on this machine, measured collectively, and how many GPUs a problem
//! is worth.

use std::time::Instant;

use cudarc::driver::DevicePtr;
use cudarc::nccl::{result as nr, NcclType};

use crate::backend::nccl::comm::nccl_err;
use crate::backend::nccl::ops::Kind;
use crate::backend::nccl::{nccl_available, run_threads, NcclOps, Rank};
use crate::backend::VectorOps;
use crate::error::Result;
use crate::gpu::Gpu;

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
pub fn measure_costs(rank: &Rank) -> Result<crate::dist::CommCosts> {
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
    Ok(crate::dist::CommCosts {
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
    pub costs: Option<crate::dist::CommCosts>,
    /// Seconds the measurement took (communicators started on every GPU, the probes).
    pub probe_seconds: f64,
    /// Why the choice fell back to one GPU without a measurement, when it did (NCCL missing or
    /// failing with several GPUs present).
    pub note: Option<String>,
}

/// `--gpus auto`: how many of this machine's GPUs the problem `stats` is worth. With fewer than
/// two GPUs, 1 at once (no NCCL call). Otherwise starts a communicator on every GPU, measures
/// [`measure_costs`], and applies [`choose_gpus`](crate::dist::choose_gpus). Never fails: a missing or
/// failing NCCL gives 1 with a [`AutoGpus::note`].
pub fn auto_gpus(stats: &crate::dist::ProblemStats) -> AutoGpus {
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
                gpus: crate::dist::choose_gpus(stats, &costs),
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
