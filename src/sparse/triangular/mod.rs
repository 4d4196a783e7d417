//! Sparse triangular solves `L·x = b` and `U·x = b` with a level analysis done once per pattern.
//!
//! A [`TriangularPlan`] describes one triangle of a square CSR matrix with sorted column indices:
//! for every row, the range of its off-diagonal entries inside the triangle (`[start, end)`, so
//! the entries of the other triangle are skipped without being read), the position of its diagonal
//! entry (for a non-unit diagonal), and the **dependency levels**: row `i` of a lower solve needs
//! `x_j` for every `j < i` it references, so its level is one more than the largest level among
//! them (0 for a row that references none), and rows of one level are independent. The plan keeps
//! the rows ordered by level (stable, so by row index inside a level) and the level boundaries.
//! Entries of the *other* triangle are ignored, as cuSPARSE `SpSV` ignores them: the factor of an
//! incomplete LU is one matrix whose strict lower part is `L` (unit diagonal) and whose upper part
//! is `U`, and both solves read it in place.
//!
//! The CPU solve ([`TriangularPlan::solve`]) is the textbook substitution in row order and is the
//! reference for the GPU ([`gpu::GpuTriangular`], feature `cuda`), which runs either
//! **level by level** (a launch per wide level, and one single-block launch for each run of
//! narrow levels, with a block barrier between levels) or **synchronization-free** (Liu, Li, Hou
//! and Vinter 2016: one launch; a warp per row spins on the ready flags of the rows it depends
//! on). [`SptrsvAlgorithm::choose`] picks one from the level statistics; see it for the rule and
//! the measurements behind it.
//!
//! The analysis runs on the CPU ([`TriangularPlan::analyse`]: one pass over the triangle's
//! entries plus a counting sort by level, `O(n + nnz)`) or on the GPU on a pattern already there
//! ([`gpu::GpuTriPlan::analyse`]: one synchronization-free launch finds every row's level, the
//! crate's stable radix sort orders the rows by level, and the level boundaries come from the
//! sorted keys); both give the same plan, row for row.
//!
//! # References
//!
//! - W. Liu, A. Li, J. Hogg, I. S. Duff and B. Vinter, *A synchronization-free algorithm for
//!   parallel sparse triangular solves*, Euro-Par 2016.
//! - E. Anderson and Y. Saad, *Solving sparse triangular linear systems on parallel computers*,
//!   Int. J. High Speed Computing 1(1), 1989 (level scheduling).

#[cfg(feature = "peers")]
pub mod cusparse_peer;
#[cfg(feature = "cuda")]
pub mod gpu;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Elem;

/// Which triangle of the matrix a solve uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Triangle {
    /// Entries with `col ≤ row` (forward substitution).
    Lower,
    /// Entries with `col ≥ row` (backward substitution).
    Upper,
}

/// Whether the diagonal is stored or taken as ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Diagonal {
    /// The diagonal is all ones; stored diagonal entries are ignored.
    Unit,
    /// The stored diagonal entry of every row divides (it must exist and be nonzero).
    NonUnit,
}

/// Marks "no diagonal entry" (unit diagonal) in [`TriangularPlan::diag_pos`].
pub const NO_DIAG: u32 = u32::MAX;

/// The level structure of a triangular solve.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelStats {
    /// Rows.
    pub rows: usize,
    /// Off-diagonal entries inside the triangle.
    pub offdiag_nnz: usize,
    /// Number of levels (the longest dependency chain, in rows).
    pub levels: usize,
    /// Rows of the widest level.
    pub max_width: usize,
    /// Mean rows per level.
    pub mean_width: f64,
}

/// The structure of one triangle of a square CSR matrix and its dependency levels: computed once
/// per pattern, reused for any values on that pattern. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct TriangularPlan {
    n: usize,
    nnz: usize,
    triangle: Triangle,
    diagonal: Diagonal,
    start: Vec<u32>,
    end: Vec<u32>,
    diag_pos: Vec<u32>,
    level_ptr: Vec<u32>,
    order: Vec<u32>,
}

impl TriangularPlan {
    /// Analyses the `triangle` of `a` (square, column indices sorted and unique within rows).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `a` is not square or its indices are not sorted, and, for a
    /// [`Diagonal::NonUnit`] solve, naming the first row without a stored diagonal entry.
    pub fn analyse<T: Elem>(
        a: &CsrMatrix<T>,
        triangle: Triangle,
        diagonal: Diagonal,
    ) -> Result<Self> {
        let n = a.square_rows("triangular solve")?;
        a.check_sorted_indices("triangular solve")?;
        let (rp, cj) = (a.row_ptr(), a.col_idx());
        let mut start = vec![0u32; n];
        let mut end = vec![0u32; n];
        let mut diag_pos = if diagonal == Diagonal::NonUnit {
            vec![NO_DIAG; n]
        } else {
            Vec::new()
        };
        for i in 0..n {
            let (lo, hi) = (rp[i] as usize, rp[i + 1] as usize);
            let cols = &cj[lo..hi];
            // First entry with col ≥ i and first with col > i.
            let ge = lo + cols.partition_point(|&c| (c as usize) < i);
            let gt = lo + cols.partition_point(|&c| (c as usize) <= i);
            match triangle {
                Triangle::Lower => {
                    start[i] = lo as u32;
                    end[i] = ge as u32;
                }
                Triangle::Upper => {
                    start[i] = gt as u32;
                    end[i] = hi as u32;
                }
            }
            if diagonal == Diagonal::NonUnit {
                if gt == ge {
                    return Err(Error::InvalidInput(format!(
                        "triangular solve: row {i} has no diagonal entry (a non-unit solve \
                         divides by it)"
                    )));
                }
                diag_pos[i] = ge as u32;
            }
        }
        // Levels: a pass in dependency order (rows ascending for lower, descending for upper).
        let mut level = vec![0u32; n];
        let mut nlevels = 0u32;
        let mut visit = |i: usize| {
            let mut l = 0u32;
            for &c in &cj[start[i] as usize..end[i] as usize] {
                l = l.max(level[c as usize] + 1);
            }
            level[i] = l;
            nlevels = nlevels.max(l + 1);
        };
        match triangle {
            Triangle::Lower => (0..n).for_each(&mut visit),
            Triangle::Upper => (0..n).rev().for_each(&mut visit),
        }
        if n == 0 {
            nlevels = 0;
        }
        // Counting sort of the rows by level (stable: ascending rows within a level for lower,
        // descending for upper, so each level's rows are in the order the CPU visits them).
        let mut level_ptr = vec![0u32; nlevels as usize + 1];
        for &l in &level {
            level_ptr[l as usize + 1] += 1;
        }
        for l in 0..nlevels as usize {
            level_ptr[l + 1] += level_ptr[l];
        }
        let mut next = level_ptr.clone();
        let mut order = vec![0u32; n];
        let mut place = |i: usize| {
            let l = level[i] as usize;
            order[next[l] as usize] = i as u32;
            next[l] += 1;
        };
        match triangle {
            Triangle::Lower => (0..n).for_each(&mut place),
            Triangle::Upper => (0..n).rev().for_each(&mut place),
        }
        Ok(TriangularPlan {
            n,
            nnz: a.nnz(),
            triangle,
            diagonal,
            start,
            end,
            diag_pos,
            level_ptr,
            order,
        })
    }

    /// Rows (and columns) of the matrix.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Entries of the whole matrix the plan was made for (to catch a matrix of another pattern).
    pub fn matrix_nnz(&self) -> usize {
        self.nnz
    }
    /// The triangle.
    pub fn triangle(&self) -> Triangle {
        self.triangle
    }
    /// The diagonal kind.
    pub fn diagonal(&self) -> Diagonal {
        self.diagonal
    }
    /// For each row, the first off-diagonal entry inside the triangle.
    pub fn start(&self) -> &[u32] {
        &self.start
    }
    /// For each row, one past the last off-diagonal entry inside the triangle.
    pub fn end(&self) -> &[u32] {
        &self.end
    }
    /// For each row, the position of its diagonal entry (empty for a unit diagonal).
    pub fn diag_pos(&self) -> &[u32] {
        &self.diag_pos
    }
    /// Level boundaries into [`order`](Self::order): level `l` is
    /// `order[level_ptr[l]..level_ptr[l + 1]]`.
    pub fn level_ptr(&self) -> &[u32] {
        &self.level_ptr
    }
    /// The rows, ordered by level.
    pub fn order(&self) -> &[u32] {
        &self.order
    }
    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.level_ptr.len().saturating_sub(1)
    }

    /// Level statistics (what [`SptrsvAlgorithm::choose`] decides from).
    pub fn stats(&self) -> LevelStats {
        let levels = self.levels();
        let max_width = self
            .level_ptr
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        LevelStats {
            rows: self.n,
            offdiag_nnz: (0..self.n)
                .map(|i| (self.end[i] - self.start[i]) as usize)
                .sum(),
            levels,
            max_width,
            mean_width: if levels == 0 {
                0.0
            } else {
                self.n as f64 / levels as f64
            },
        }
    }

    fn check_matrix<T: Elem>(&self, a: &CsrMatrix<T>) {
        assert!(
            a.nrows() == self.n && a.nnz() == self.nnz,
            "triangular solve: the plan is for a {}-row matrix with {} entries, the matrix has {} \
             rows and {} entries",
            self.n,
            self.nnz,
            a.nrows(),
            a.nnz()
        );
    }

    /// Checks that every diagonal entry the solve divides by is nonzero and finite.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first bad row.
    pub fn check_diagonal<T: Elem>(&self, values: &[T]) -> Result<()> {
        for (i, &p) in self.diag_pos.iter().enumerate() {
            let d = values[p as usize];
            if d == T::zero() || !d.finite() {
                return Err(Error::InvalidInput(format!(
                    "triangular solve: the diagonal entry of row {i} is {d}"
                )));
            }
        }
        Ok(())
    }

    /// Solves the triangle of `a` (the matrix the plan was made for, or one of the same pattern)
    /// for `x`: substitution in row order, the reference for the GPU solves.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the row of a zero or non-finite diagonal entry.
    ///
    /// # Panics
    /// When `a`, `b` or `x` do not have the plan's sizes (both sizes named).
    pub fn solve<T: Elem>(&self, a: &CsrMatrix<T>, b: &[T], x: &mut [T]) -> Result<()> {
        self.check_matrix(a);
        self.check_diagonal(a.values())?;
        self.solve_values(a.col_idx(), a.values(), b, x);
        Ok(())
    }

    /// The substitution on raw arrays (no diagonal check; `col`/`val` of the plan's pattern).
    pub(crate) fn solve_values<T: Elem>(&self, col: &[u32], val: &[T], b: &[T], x: &mut [T]) {
        check_solve_lens(self.n, b.len(), x.len());
        let mut row = |i: usize| {
            let mut s = b[i];
            for k in self.start[i] as usize..self.end[i] as usize {
                s -= val[k] * x[col[k] as usize];
            }
            x[i] = match self.diagonal {
                Diagonal::Unit => s,
                Diagonal::NonUnit => s / val[self.diag_pos[i] as usize],
            };
        };
        match self.triangle {
            Triangle::Lower => (0..self.n).for_each(&mut row),
            Triangle::Upper => (0..self.n).rev().for_each(&mut row),
        }
    }
}

impl TriangularPlan {
    /// `sweeps` Jacobi sweeps on the triangle, `x ← D⁻¹(b − N·x)` from `x = D⁻¹b` (`N` the
    /// strict triangle): the approximate solve of
    /// [`IncompleteParams::jacobi_sweeps`](crate::sparse::incomplete::IncompleteParams::jacobi_sweeps),
    /// exact on every row whose level is below `sweeps`.
    pub fn sweep_values<T: Elem>(
        &self,
        col: &[u32],
        val: &[T],
        b: &[T],
        x: &mut [T],
        sweeps: usize,
    ) {
        assert_eq!(
            b.len(),
            self.n,
            "Jacobi sweeps: b has {} elements, the matrix {} rows",
            b.len(),
            self.n
        );
        assert_eq!(
            x.len(),
            self.n,
            "Jacobi sweeps: x has {} elements, the matrix {} rows",
            x.len(),
            self.n
        );
        let d = |i: usize| match self.diagonal {
            Diagonal::Unit => T::one(),
            Diagonal::NonUnit => val[self.diag_pos[i] as usize],
        };
        for i in 0..self.n {
            x[i] = b[i] / d(i);
        }
        let mut prev = x.to_vec();
        for _ in 0..sweeps {
            prev.copy_from_slice(x);
            for i in 0..self.n {
                let mut s = b[i];
                for k in self.start[i] as usize..self.end[i] as usize {
                    s -= val[k] * prev[col[k] as usize];
                }
                x[i] = s / d(i);
            }
        }
    }
}

/// Panics unless the right-hand side (`b` elements) and the solution (`x`) have the `n` rows
/// of the matrix, naming the one that does not.
pub(crate) fn check_solve_lens(n: usize, b: usize, x: usize) {
    for (name, len) in [("b", b), ("x", x)] {
        assert_eq!(
            len, n,
            "triangular solve: {name} has {len} elements, the matrix {n} rows"
        );
    }
}

/// One-shot solve of the `triangle` of `a` (analysis and substitution; use a [`TriangularPlan`]
/// to solve many times).
///
/// ```
/// use segsparse::sparse::triangular::{solve_triangular, Diagonal, Triangle};
/// use segsparse::CsrMatrix;
/// let l = CsrMatrix::<f64>::from_triplets(3, 3, &[(0, 0, 2.0), (1, 0, 1.0), (1, 1, 1.0),
///     (2, 1, -1.0), (2, 2, 4.0)]).unwrap();
/// let mut x = vec![0.0; 3];
/// solve_triangular(&l, Triangle::Lower, Diagonal::NonUnit, &[2.0, 2.0, 3.0], &mut x).unwrap();
/// assert_eq!(x, vec![1.0, 1.0, 1.0]);
/// ```
///
/// # Errors
/// As [`TriangularPlan::analyse`] and [`TriangularPlan::solve`].
pub fn solve_triangular<T: Elem>(
    a: &CsrMatrix<T>,
    triangle: Triangle,
    diagonal: Diagonal,
    b: &[T],
    x: &mut [T],
) -> Result<()> {
    TriangularPlan::analyse(a, triangle, diagonal)?.solve(a, b, x)
}

/// The GPU solve algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SptrsvAlgorithm {
    /// Chosen from the level statistics by [`SptrsvAlgorithm::choose`].
    #[default]
    Auto,
    /// Level by level: a launch per wide level, one single-block launch per run of narrow
    /// levels.
    Levels,
    /// Synchronization-free: one launch, a warp per row waiting on its dependencies' flags.
    SyncFree,
}

impl SptrsvAlgorithm {
    /// Level groups above which [`Auto`](Self::Auto) takes the synchronization-free kernel.
    ///
    /// A level-by-level solve costs about one kernel launch (≈ 2–4 µs queued back to back) per
    /// group of levels, while the synchronization-free kernel pays one launch and then about one
    /// L2 round trip per level of the critical path; with few groups the level kernels win
    /// (every row runs with full parallelism and no spinning), with many they lose.
    pub const SYNC_FREE_ABOVE_GROUPS: usize = 8;

    /// The algorithm for a solve whose level schedule has `groups` launches (see
    /// [`gpu_level_groups`]): [`Levels`](Self::Levels) up to
    /// [`SYNC_FREE_ABOVE_GROUPS`](Self::SYNC_FREE_ABOVE_GROUPS) groups, else
    /// [`SyncFree`](Self::SyncFree). Other values are returned as they are.
    pub fn choose(self, groups: usize) -> Self {
        match self {
            SptrsvAlgorithm::Auto if groups <= Self::SYNC_FREE_ABOVE_GROUPS => {
                SptrsvAlgorithm::Levels
            }
            SptrsvAlgorithm::Auto => SptrsvAlgorithm::SyncFree,
            other => other,
        }
    }

    /// `"auto"`, `"levels"` or `"sync-free"`.
    pub fn name(self) -> &'static str {
        match self {
            SptrsvAlgorithm::Auto => "auto",
            SptrsvAlgorithm::Levels => "levels",
            SptrsvAlgorithm::SyncFree => "sync-free",
        }
    }
}

/// One launch of the level-by-level GPU solve: levels `lo..hi`; a group of several levels (a
/// *run* of narrow levels) is one block with a barrier between levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelGroup {
    /// First level.
    pub lo: u32,
    /// One past the last level.
    pub hi: u32,
    /// Blocks of the launch (1 for a run).
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
}

/// The launches of a level-by-level sweep with `lanes` threads per row: each level wider than
/// `run_threads / lanes` rows gets its own launch of `wide_threads`-thread blocks; consecutive
/// narrower levels share a one-block launch (a run), whose block is just large enough for the
/// widest of its levels (at least 64 threads: a smaller block makes each level's barrier
/// cheaper, and a run is a chain of barriers).
pub fn gpu_level_groups(
    level_ptr: &[u32],
    lanes: u32,
    run_threads: u32,
    wide_threads: u32,
) -> Vec<LevelGroup> {
    let narrow_max = run_threads / lanes;
    let rows_per_block = (wide_threads / lanes).max(1);
    let mut groups: Vec<LevelGroup> = Vec::new();
    let nlev = level_ptr.len().saturating_sub(1);
    // (first level, widest level) of the current run.
    let mut run: Option<(u32, u32)> = None;
    let close = |groups: &mut Vec<LevelGroup>, (lo, maxw): (u32, u32), hi: u32| {
        let threads = (maxw * lanes).div_ceil(32) * 32;
        groups.push(LevelGroup {
            lo,
            hi,
            blocks: 1,
            threads: threads.clamp(64, run_threads),
        });
    };
    for l in 0..nlev {
        let w = level_ptr[l + 1] - level_ptr[l];
        if w <= narrow_max {
            let r = run.get_or_insert((l as u32, 0));
            r.1 = r.1.max(w);
            continue;
        }
        if let Some(r) = run.take() {
            close(&mut groups, r, l as u32);
        }
        groups.push(LevelGroup {
            lo: l as u32,
            hi: l as u32 + 1,
            blocks: w.div_ceil(rows_per_block).max(2),
            threads: wide_threads,
        });
    }
    if let Some(r) = run {
        close(&mut groups, r, nlev as u32);
    }
    groups
}

/// Lanes that work on one row in the level-by-level kernels: the power of two nearest below the
/// mean off-diagonal entries per row (at least 1, at most a warp), so short rows do not leave most
/// of a warp idle and long rows are read by many lanes at once.
pub fn lanes_per_row(stats: &LevelStats) -> u32 {
    let mean = if stats.rows == 0 {
        0.0
    } else {
        stats.offdiag_nnz as f64 / stats.rows as f64
    };
    let mut g = 1u32;
    while g < 32 && (2 * g) as f64 <= mean {
        g *= 2;
    }
    g
}

#[cfg(test)]
pub(crate) mod tests;
