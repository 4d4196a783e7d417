//! Tridiagonal systems `T x = d`: the Thomas algorithm on the CPU, and cyclic reduction, parallel
//! cyclic reduction (PCR), their hybrid and a partition method on the GPU, for one large system
//! or a batch of equal-size systems.
//!
//! # Why this module exists
//!
//! Sengupta, Harris, Zhang and Owens (*Scan Primitives for GPU Computing*, 2007, §4.3) show that
//! the reduce / down-sweep structure of scan also solves tridiagonal systems: cyclic reduction
//! halves the system level by level (their Figure 4: the scan's communication plus the
//! neighbour on the other side), then substitutes back down. They used it for the Kass–Miller
//! shallow-water simulation (alternating-direction sweeps over the rows, then the columns, of a
//! height field: `examples/shallow_water.rs`), one line per thread block in shared memory up to
//! 512 × 512 and through global memory across blocks beyond.
//!
//! # Layout and conventions
//!
//! A system of `n` rows is given by three diagonals and a right-hand side, each of length `n`:
//! row `i` reads `lower[i]·x[i-1] + diag[i]·x[i] + upper[i]·x[i+1] = rhs[i]`. `lower[0]` and
//! `upper[n-1]` are ignored (treated as zero, whatever they hold). A batch of `batch` systems is
//! stored one system after another (length `batch·n`, the "strided" layout of cuSPARSE's
//! `gtsv2StridedBatch` with stride `n`).
//!
//! # Stability domain
//!
//! No algorithm here pivots. Elimination without pivoting is stable when the matrix is
//! diagonally dominant by rows (`|b_i| ≥ |a_i| + |c_i|`, strictly in at least one row of every
//! irreducible block) or symmetric positive definite; cyclic reduction and PCR keep diagonal
//! dominance at every level, and the partition method's reduced system is diagonally dominant
//! too. Outside that domain the solvers may still succeed, but nothing is promised. Every
//! division checks its pivot: a pivot `p` of row `i` is *tiny* when
//! `!(|p| > ε·(|a_i| + |b_i| + |c_i|))` (zero, tiny against its row, or NaN; for the GPU
//! algorithms the row is the current, transformed equation). The CPU returns the
//! [`Error::Solver`](crate::Error::Solver) at once; the GPU records the smallest offending row in
//! a device flag (`atomicMin`) that the host reads once after the solve, so no level of the
//! solve waits for the host.
//!
//! # Algorithms
//!
//! | [`TridiagAlgorithm`] | where | work | what it is |
//! |---|---|---|---|
//! | `Thomas` | CPU | 8n | Gaussian elimination, the reference ([`cpu::thomas`]); batched over rayon |
//! | `CyclicReduction` | GPU (CPU: [`cpu::cyclic_reduction`]) | 17n | the paper's form: per block in shared memory; longer systems through global memory, one launch per level down to a size one block finishes |
//! | `Pcr` | GPU | O(n log n) | every equation reduced at every step: log2 n steps, no back substitution; one block per system, n ≤ 1024 |
//! | `CrPcr` | GPU | | CR down to a subsystem of a few hundred equations, PCR there, CR back (Zhang, Cohen and Owens' hybrid); longer systems: global CR levels first |
//! | `Partition` | GPU | ≈ 2× Thomas | each thread eliminates a run of consecutive rows in registers / shared memory (the run's interior refers only to its two ends), the run ends form a system of twice the number of threads solved by CR + PCR, and each thread fills in its run; longer systems: the same across blocks, recursively |
//! | `Auto` | | | `Partition` (per block for 64 ≤ n ≤ 4096 when it fits in shared memory, else multi-block) |
//!
//! The GPU entry point is [`gpu::GpuTridiag`] (device buffers, with host-vector wrappers); the
//! cuSPARSE peer used by the benchmark is `cusparse_peer` (feature `peers`).

pub mod cpu;
#[cfg(feature = "peers")]
pub mod cusparse_peer;
#[cfg(feature = "cuda")]
pub mod gpu;

use crate::error::Result;
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::scalar::Scalar;

/// Rows per thread of the multi-block partition kernels (`TRI_CHUNK`): 16 rows shrink the system
/// 8× per level, so 2^24 rows need 4 levels; a tile of 64 threads × 16 rows = 1024 rows is 32 KiB
/// of f64 in shared memory (4 arrays), within the default 48 KiB.
pub const MULTI_CHUNK: u32 = 16;
/// Most threads of the per-block solver (`TRI_MAX_THREADS`, its `__launch_bounds__`: 1024 threads
/// would need at most 64 registers each).
const MAX_BLOCK_THREADS: u32 = 512;
/// Equations per thread that PCR keeps in registers (`TRI_PCR_PER_THREAD`).
const PCR_PER_THREAD: u32 = 2;

/// `kernels/tridiag/block_tridiag.cuh`: block- and thread-level building blocks of the
/// tridiagonal solvers.
pub const BLOCK_TRIDIAG: KernelSource = kernel_source!(
    "tridiag/block_tridiag.cuh",
    &[&crate::gpu::kernels::COMMON],
    &[
        ("TRI_MAX_THREADS", MAX_BLOCK_THREADS as i64),
        ("TRI_PCR_PER_THREAD", PCR_PER_THREAD as i64)
    ]
);

/// The tridiagonal kernels (`kernels/tridiag/tridiag.cu`).
pub const TRIDIAG_KERNELS: KernelSource = kernel_source!(
    "tridiag/tridiag.cu",
    &[&crate::gpu::kernels::COMMON, &BLOCK_TRIDIAG],
    &[("TRI_CHUNK", MULTI_CHUNK as i64)]
);

/// Assembly kernels of the shallow-water example's alternating-direction sweeps
/// (`kernels/tridiag/shallow_water.cu`, f32), used by `examples/shallow_water.rs`.
pub const SHALLOW_WATER_KERNELS: KernelSource =
    kernel_source!("tridiag/shallow_water.cu", &[&crate::gpu::kernels::COMMON]);

/// A tridiagonal matrix, or a batch of them stored one after another (the layout above),
/// borrowed: its three diagonals, each in a host slice (`S = [T]`) or a device buffer.
#[derive(Debug)]
pub struct Tridiagonal<'a, S: ?Sized> {
    /// The subdiagonal: `lower[i]` multiplies `x[i-1]` (ignored in a system's first row).
    pub lower: &'a S,
    /// The diagonal.
    pub diag: &'a S,
    /// The superdiagonal: `upper[i]` multiplies `x[i+1]` (ignored in a system's last row).
    pub upper: &'a S,
}

impl<S: ?Sized> Clone for Tridiagonal<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: ?Sized> Copy for Tridiagonal<'_, S> {}

impl<'a, S: ?Sized> Tridiagonal<'a, S> {
    /// The matrix with these diagonals.
    pub fn new(lower: &'a S, diag: &'a S, upper: &'a S) -> Self {
        Tridiagonal { lower, diag, upper }
    }
}

impl<S: ?Sized + Rows> Tridiagonal<'_, S> {
    /// Rows in all (of every system of a batch).
    pub fn rows(&self) -> usize {
        self.diag.rows()
    }

    /// Panics (a contract violation) unless the diagonals and each of `vectors` (name, length)
    /// have `len` entries.
    pub(crate) fn check_lengths(&self, len: usize, vectors: &[(&str, usize)]) {
        let diagonals = [
            ("lower", self.lower.rows()),
            ("diag", self.diag.rows()),
            ("upper", self.upper.rows()),
        ];
        for &(name, v) in diagonals.iter().chain(vectors) {
            assert_eq!(
                v, len,
                "tridiagonal solve: `{name}` has {v} elements, but the systems have {len} rows \
                 in all"
            );
        }
    }
}

impl<T> Tridiagonal<'_, [T]> {
    /// Panics (a contract violation) unless the diagonals and each of `vectors` have the same
    /// length, a whole number of systems of `n` rows; returns that length.
    pub(crate) fn check_batch(&self, n: usize, vectors: &[(&str, usize)]) -> usize {
        let len = self.rows();
        self.check_lengths(len, vectors);
        assert!(
            len == 0 || (n > 0 && len % n == 0),
            "tridiagonal solve: {len} rows are not a whole number of systems of {n} rows"
        );
        len
    }
}

/// The storage of a [`Tridiagonal`]'s diagonals: a host slice or a device buffer.
pub trait Rows {
    /// Entries held.
    fn rows(&self) -> usize;
}

impl<T> Rows for [T] {
    fn rows(&self) -> usize {
        self.len()
    }
}

#[cfg(feature = "cuda")]
impl<T> Rows for cudarc::driver::CudaSlice<T> {
    fn rows(&self) -> usize {
        self.len()
    }
}

/// Which algorithm solves the systems. GPU algorithms are forced with
/// [`gpu::GpuTridiag::solve_batch`]; `Auto` picks by size and batch count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TridiagAlgorithm {
    /// Pick from the system size and batch count (see the module table).
    #[default]
    Auto,
    /// The Thomas algorithm (CPU only).
    Thomas,
    /// Cyclic reduction, as in the paper.
    CyclicReduction,
    /// Parallel cyclic reduction (systems of at most 1024 rows, one block each).
    Pcr,
    /// Cyclic reduction down to a block-sized subsystem, PCR there, CR back.
    CrPcr,
    /// Per-thread runs eliminated in registers/shared memory, the run ends solved by CR + PCR.
    Partition,
}

impl TridiagAlgorithm {
    /// Every algorithm that runs on the GPU (for tests and benchmarks).
    pub const GPU: [TridiagAlgorithm; 5] = [
        TridiagAlgorithm::Auto,
        TridiagAlgorithm::CyclicReduction,
        TridiagAlgorithm::Pcr,
        TridiagAlgorithm::CrPcr,
        TridiagAlgorithm::Partition,
    ];
    /// A short name for tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            TridiagAlgorithm::Auto => "auto",
            TridiagAlgorithm::Thomas => "thomas",
            TridiagAlgorithm::CyclicReduction => "cr",
            TridiagAlgorithm::Pcr => "pcr",
            TridiagAlgorithm::CrPcr => "cr-pcr",
            TridiagAlgorithm::Partition => "partition",
        }
    }
}

/// Solves `batch = a.rows() / n` systems `A x = rhs` of `n` rows (stored one after another) on the GPU when
/// one is available, else on the CPU by Thomas; returns `x`. For repeated solves keep a
/// [`gpu::GpuTridiag`] (it caches kernels and workspace) instead.
///
/// # Errors
/// A zero or tiny pivot ([`crate::Error::Solver`], naming the system and row); a GPU failure
/// other than "no GPU".
///
/// # Panics
/// When the lengths differ or are not a multiple of `n`.
pub fn solve_batch<T: Scalar + crate::gpu::KernelType>(
    n: usize,
    a: Tridiagonal<'_, [T]>,
    rhs: &[T],
) -> Result<Vec<T>> {
    #[cfg(feature = "cuda")]
    if let Ok(g) = crate::gpu::Gpu::shared() {
        let mut solver = gpu::GpuTridiag::<T>::new(&g)?;
        return solver.solve_batch_host(n, a, rhs, TridiagAlgorithm::Auto);
    }
    cpu::thomas_batch(n, a, rhs)
}
