//! How many GPUs a solve is worth: a cost model of one iteration on `k` GPUs from the problem's
//! size and the machine's measured communication costs, and the choice made from it.
//!
//! # The model
//!
//! One iteration on `k` GPUs (rows split into `k` contiguous blocks) costs
//!
//! ```text
//! T(k) = B / (k · f · bw)                               the memory traffic, split k ways
//!      + [k > 1] · ( R · t_allreduce                    the iteration's all-reduces
//!                  + S · (t_halo + h(k) · s / bw_halo) ) its halo exchanges
//! ```
//!
//! with `B` the bytes an iteration moves on one GPU ([`ProblemStats::iteration_bytes`]: each
//! SpMV counted as in `DESIGN.md`, `nnz·(s+4) + (n+1)·4 + 2n·s`, plus the vector passes), `bw`
//! a device's copy bandwidth and `f` the fraction of it an iteration reaches
//! ([`ACHIEVED_FRACTION`]), `R` and `S` the all-reduces and halo exchanges per iteration
//! ([`IterationWork`]), `s` the scalar size and `h(k)` the values a rank receives per exchange:
//! the halo of one cut for `k = 2`, of two cuts (a rank between two neighbours) beyond. The halo
//! of a cut is measured on the matrix at its nonzero-balanced middle cut
//! ([`ProblemStats::from_csr`]) and taken to be the same at every cut (exact for the slabs of a
//! grid in natural ordering; an estimate for irregular matrices).
//!
//! Left out, on purpose: kernel launch latencies (about the same on one and on several GPUs,
//! so they do not move the comparison; the distributed path launches a few more per iteration,
//! which only makes small problems still less worth splitting) and any overlap of the halo
//! exchange with the owned block's product (measured at 5–30 % in
//! `benches/results/history/scaleout.md`: counting none is the cautious side).
//!
//! # The choice
//!
//! [`choose_gpus`] starts from the fewest GPUs whose memory holds the problem
//! ([`min_gpus_for_memory`]) and takes a larger count only when its modelled iteration is at
//! least [`MIN_GAIN`] (10 %) faster than the best count so far: a GPU that buys less than that
//! is not worth occupying. [`CommCosts`] come from a measurement on this machine
//! (`dist::nccl::measure_costs`, run by `sparse-solve --gpus auto` when two or more GPUs are
//! present) or, in tests, from given figures.

use crate::csr::CsrMatrix;
use crate::scalar::Scalar;

/// A larger GPU count must make the modelled iteration at least this much faster (as a
/// fraction of the best count so far) to be chosen.
pub const MIN_GAIN: f64 = 0.10;

/// Workspace vectors of length `n` a distributed solve keeps per rank beside the matrix
/// (`b`, `x`, BiCGSTAB's eight or CG's four, a preconditioner's one or two, with room).
const WORKSPACE_VECTORS: f64 = 12.0;

/// The fraction of a GPU's memory the problem may fill.
const MEMORY_FILL: f64 = 0.9;

/// The fraction of the copy bandwidth a solver iteration reaches (SpMV gathers, short kernels,
/// launch gaps): on the 2 × H200 machine one CG iteration took 1.149 ms at Poisson 3D 256³ and
/// 0.2936 ms at 160³ (`benches/results/history/scaleout.md`), 1.49× and 1.55× the traffic at the copy
/// bandwidth.
pub const ACHIEVED_FRACTION: f64 = 0.65;

/// What one iteration of a method does, in the units of the model (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterationWork {
    /// Matrix-sized passes (SpMVs and their equivalents in memory traffic: a local triangular
    /// solve pair, an AMG cycle's products).
    pub spmvs: f64,
    /// Products with the distributed matrix, each with one halo exchange.
    pub exchanges: f64,
    /// All-reduces.
    pub allreduces: f64,
    /// Vector passes (`n` values read or written) outside the SpMVs.
    pub vector_passes: f64,
}

impl IterationWork {
    /// Conjugate gradient without a preconditioner: one product, two all-reduces, ten vector
    /// passes (see `solvers::cg`).
    pub fn cg() -> Self {
        IterationWork {
            spmvs: 1.0,
            exchanges: 1.0,
            allreduces: 2.0,
            vector_passes: 10.0,
        }
    }

    /// BiCGSTAB without a preconditioner: two products, three all-reduces, twenty vector passes.
    pub fn bicgstab() -> Self {
        IterationWork {
            spmvs: 2.0,
            exchanges: 2.0,
            allreduces: 3.0,
            vector_passes: 20.0,
        }
    }

    /// This work plus `applications` applications of a preconditioner that each cost `spmvs`
    /// matrix-sized passes, `exchanges` distributed products, `allreduces` all-reduces and
    /// `vector_passes` vector passes.
    pub fn plus(
        self,
        applications: f64,
        spmvs: f64,
        exchanges: f64,
        allreduces: f64,
        vector_passes: f64,
    ) -> Self {
        IterationWork {
            spmvs: self.spmvs + applications * spmvs,
            exchanges: self.exchanges + applications * exchanges,
            allreduces: self.allreduces + applications * allreduces,
            vector_passes: self.vector_passes + applications * vector_passes,
        }
    }
}

/// What [`choose_gpus`] needs to know about a problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProblemStats {
    /// Rows (= columns) of the matrix.
    pub rows: u64,
    /// Nonzeros.
    pub nnz: u64,
    /// Bytes of one scalar (4 or 8).
    pub scalar_bytes: usize,
    /// Values received across one cut of a contiguous row split per exchange (the larger
    /// direction at the middle cut).
    pub halo_per_cut: u64,
    /// One iteration's work.
    pub work: IterationWork,
}

impl ProblemStats {
    /// The statistics of the matrix `a` for a method doing `work` per iteration: the halo is
    /// counted exactly at the cut that [`Partition::by_nnz`](super::Partition::by_nnz) makes
    /// for two ranks (one pass over the entries).
    pub fn from_csr<T: Scalar>(a: &CsrMatrix<T>, work: IterationWork) -> Self {
        let n = a.nrows();
        let cut = super::Partition::by_nnz(a.row_ptr(), 2).starts()[1] as usize;
        let rp = a.row_ptr();
        let cols = a.col_idx();
        // Columns the upper block owns that the lower block's rows touch, and the reverse.
        let mut up: Vec<u32> = cols[..rp[cut] as usize]
            .iter()
            .copied()
            .filter(|&c| c as usize >= cut)
            .collect();
        let mut down: Vec<u32> = cols[rp[cut] as usize..]
            .iter()
            .copied()
            .filter(|&c| (c as usize) < cut)
            .collect();
        for v in [&mut up, &mut down] {
            v.sort_unstable();
            v.dedup();
        }
        ProblemStats {
            rows: n as u64,
            nnz: a.nnz() as u64,
            scalar_bytes: T::BYTES,
            halo_per_cut: up.len().max(down.len()) as u64,
            work,
        }
    }

    /// Bytes one iteration moves on one GPU: every SpMV as `nnz·(s+4) + (n+1)·4 + 2n·s`, every
    /// vector pass as `n·s`.
    pub fn iteration_bytes(&self) -> f64 {
        let (n, nnz, s) = (self.rows as f64, self.nnz as f64, self.scalar_bytes as f64);
        let spmv = nnz * (s + 4.0) + (n + 1.0) * 4.0 + 2.0 * n * s;
        self.work.spmvs * spmv + self.work.vector_passes * n * s
    }

    /// Bytes the problem occupies on one GPU when it is alone: the matrix (32-bit indices) and
    /// the solver's vectors.
    pub fn device_bytes(&self) -> f64 {
        let (n, nnz, s) = (self.rows as f64, self.nnz as f64, self.scalar_bytes as f64);
        nnz * (s + 4.0) + (n + 1.0) * 4.0 + WORKSPACE_VECTORS * n * s
    }
}

/// The machine's costs that the model uses (measured by `dist::nccl::measure_costs`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct CommCosts {
    /// GPUs available (the most [`choose_gpus`] returns).
    pub gpus: usize,
    /// One reduction step of a solve beyond the local sums: the all-reduce of a few scalars with
    /// its partial-sum and recurrence kernels, queued back to back (seconds each).
    pub allreduce_seconds: f64,
    /// One neighbour exchange of a few values (seconds).
    pub halo_latency_seconds: f64,
    /// Bandwidth of a large neighbour exchange, bytes per second one way.
    pub halo_bytes_per_second: f64,
    /// One GPU's device-to-device copy bandwidth, bytes read plus bytes written per second.
    pub device_bytes_per_second: f64,
    /// Memory of one GPU that a solve can use, in bytes (0: unknown, not limiting).
    pub device_memory_bytes: u64,
}

/// The modelled seconds of one iteration on `k` GPUs (see the module docs); `k = 0` counts as 1.
pub fn modelled_iteration_seconds(p: &ProblemStats, c: &CommCosts, k: usize) -> f64 {
    let k = k.max(1);
    let bw = c.device_bytes_per_second.max(1.0) * ACHIEVED_FRACTION;
    let compute = p.iteration_bytes() / bw / k as f64;
    if k == 1 {
        return compute;
    }
    let neighbours = if k == 2 { 1.0 } else { 2.0 };
    let halo_bytes = neighbours * p.halo_per_cut as f64 * p.scalar_bytes as f64;
    let exchange = c.halo_latency_seconds + halo_bytes / c.halo_bytes_per_second.max(1.0);
    compute + p.work.exchanges * exchange + p.work.allreduces * c.allreduce_seconds
}

/// The fewest GPUs whose memory holds the problem (1 when the memory is unknown; the GPU count
/// when even all of them do not suffice: the solve then reports the shortage itself).
pub fn min_gpus_for_memory(p: &ProblemStats, c: &CommCosts) -> usize {
    let max = c.gpus.max(1);
    if c.device_memory_bytes == 0 {
        return 1;
    }
    let per_gpu = c.device_memory_bytes as f64 * MEMORY_FILL;
    (1..=max)
        .find(|&k| p.device_bytes() / k as f64 <= per_gpu)
        .unwrap_or(max)
}

/// How many GPUs to use (see the module docs): at least [`min_gpus_for_memory`], and more only
/// while each larger count's modelled iteration is at least [`MIN_GAIN`] faster than the best
/// so far. Always in `1..=max(c.gpus, 1)`.
pub fn choose_gpus(p: &ProblemStats, c: &CommCosts) -> usize {
    let max = c.gpus.max(1);
    let first = min_gpus_for_memory(p, c);
    let mut best = first;
    let mut t_best = modelled_iteration_seconds(p, c, first);
    for k in first + 1..=max {
        let t = modelled_iteration_seconds(p, c, k);
        if t <= (1.0 - MIN_GAIN) * t_best {
            best = k;
            t_best = t;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of the order measured on the 2 × H200 NVLink machine (benches/results/history/scaleout.md:
    /// ≈ 15 µs per halo exchange, ≈ 17 µs per all-reduce with its recurrence kernel, about 4 TB/s
    /// of device copy bandwidth).
    fn h200(gpus: usize) -> CommCosts {
        CommCosts {
            gpus,
            allreduce_seconds: 17e-6,
            halo_latency_seconds: 15e-6,
            halo_bytes_per_second: 100e9,
            device_bytes_per_second: 4.0e12,
            device_memory_bytes: 140_000_000_000,
        }
    }

    fn poisson3d(n: u64, work: IterationWork) -> ProblemStats {
        let rows = n * n * n;
        ProblemStats {
            rows,
            nnz: 7 * rows - 6 * n * n,
            scalar_bytes: 8,
            halo_per_cut: n * n,
            work,
        }
    }

    #[test]
    fn large_problems_use_every_gpu_small_ones_one() {
        let big = poisson3d(256, IterationWork::cg());
        assert_eq!(choose_gpus(&big, &h200(2)), 2);
        assert_eq!(choose_gpus(&big, &h200(4)), 4);
        // 8000 rows: a few microseconds of traffic against tens of microseconds of messages.
        let small = poisson3d(20, IterationWork::cg());
        assert_eq!(choose_gpus(&small, &h200(2)), 1);
        assert_eq!(choose_gpus(&small, &h200(8)), 1);
        // One GPU (or none): always 1.
        assert_eq!(choose_gpus(&big, &h200(1)), 1);
        assert_eq!(choose_gpus(&big, &h200(0)), 1);
    }

    #[test]
    fn the_model_at_256_cubed_is_near_the_measured_iteration() {
        // Measured (scaleout.md): 1.149 ms on one H200 and 0.637 ms on two, CG, f64.
        let p = poisson3d(256, IterationWork::cg());
        let c = h200(2);
        let t1 = modelled_iteration_seconds(&p, &c, 1);
        let t2 = modelled_iteration_seconds(&p, &c, 2);
        assert!((1.0e-3..1.3e-3).contains(&t1), "{t1}");
        assert!(t2 < t1 && t2 > t1 / 2.0, "{t1} {t2}");
        // Communication: two all-reduces and one exchange of 65,536 values.
        let comm = t2 - t1 / 2.0;
        let want = 2.0 * 17e-6 + 15e-6 + 65536.0 * 8.0 / 100e9;
        assert!((comm - want).abs() < 1e-12, "{comm} vs {want}");
    }

    #[test]
    fn a_gpu_must_buy_at_least_the_minimum_gain() {
        // Find the grid where 2 GPUs first pay 10 %: below it 1, above it 2.
        let c = h200(2);
        let mut seen = Vec::new();
        for n in [16u64, 24, 32, 48, 64, 96, 128, 192, 256] {
            let p = poisson3d(n, IterationWork::cg());
            let k = choose_gpus(&p, &c);
            let (t1, t2) = (
                modelled_iteration_seconds(&p, &c, 1),
                modelled_iteration_seconds(&p, &c, 2),
            );
            assert_eq!(k == 2, t2 <= 0.9 * t1, "n = {n}: {t1} vs {t2}");
            seen.push(k);
        }
        // Monotone in the size: once worth it, it stays worth it.
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(seen.first(), Some(&1));
        assert_eq!(seen.last(), Some(&2));
    }

    #[test]
    fn slow_links_or_costly_reductions_keep_the_problem_on_one_gpu() {
        let p = poisson3d(128, IterationWork::cg());
        let fast = h200(4);
        assert!(choose_gpus(&p, &fast) > 1);
        // PCIe-class all-reduce latency and exchange bandwidth.
        let slow = CommCosts {
            allreduce_seconds: 300e-6,
            halo_latency_seconds: 200e-6,
            halo_bytes_per_second: 5e9,
            ..fast
        };
        assert_eq!(choose_gpus(&p, &slow), 1);
    }

    #[test]
    fn memory_sets_the_floor() {
        // 1024³ f64: about 160 GB for the matrix and vectors, more than one 140 GB GPU.
        let p = poisson3d(1024, IterationWork::cg());
        let c = h200(4);
        assert_eq!(min_gpus_for_memory(&p, &c), 2);
        assert!(choose_gpus(&p, &c) >= 2);
        // Even if communication were hopeless, the floor holds.
        let hopeless = CommCosts {
            allreduce_seconds: 1.0,
            ..c
        };
        assert_eq!(choose_gpus(&p, &hopeless), 2);
        // More than all GPUs together hold: all of them (the solve reports the shortage).
        let tiny = CommCosts {
            device_memory_bytes: 1_000_000,
            ..c
        };
        assert_eq!(min_gpus_for_memory(&p, &tiny), 4);
        // Unknown memory does not limit.
        let unknown = CommCosts {
            device_memory_bytes: 0,
            ..c
        };
        assert_eq!(min_gpus_for_memory(&p, &unknown), 1);
    }

    #[test]
    fn local_work_without_messages_lowers_the_threshold() {
        // Block-Jacobi's local solves add matrix-sized work and no messages: a problem that was
        // borderline for plain CG becomes worth splitting.
        let c = h200(2);
        let mut n_cg = 0;
        let mut n_bj = 0;
        for n in 8u64..200 {
            let cg = poisson3d(n, IterationWork::cg());
            let bj = poisson3d(n, IterationWork::cg().plus(1.0, 1.0, 0.0, 0.0, 2.0));
            if n_cg == 0 && choose_gpus(&cg, &c) == 2 {
                n_cg = n;
            }
            if n_bj == 0 && choose_gpus(&bj, &c) == 2 {
                n_bj = n;
            }
        }
        assert!(n_bj > 0 && n_cg > 0 && n_bj <= n_cg, "{n_bj} {n_cg}");
    }

    #[test]
    fn stats_from_a_matrix_count_the_middle_cut() {
        let n = 12usize;
        let a = crate::generate::poisson3d::<f64>(n).unwrap();
        let s = ProblemStats::from_csr(&a, IterationWork::cg());
        assert_eq!(s.rows, (n * n * n) as u64);
        assert_eq!(s.nnz, a.nnz() as u64);
        assert_eq!(s.scalar_bytes, 8);
        // A cut between two z-planes (or inside one) needs one plane of the other side.
        assert_eq!(s.halo_per_cut, (n * n) as u64);
        let f = crate::generate::poisson2d::<f32>(30).unwrap();
        let s = ProblemStats::from_csr(&f, IterationWork::bicgstab());
        assert_eq!((s.halo_per_cut, s.scalar_bytes), (30, 4));
        // A diagonal matrix needs no halo at all.
        let d = CsrMatrix::<f64>::from_triplets(4, 4, &[(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)])
            .unwrap();
        assert_eq!(
            ProblemStats::from_csr(&d, IterationWork::cg()).halo_per_cut,
            0
        );
    }
}
