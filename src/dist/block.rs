//! Partitions, row blocks, and the per-rank local structure with its halo lists.

use std::ops::Range;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::generate::stencil7_row;
use crate::scalar::Scalar;

/// Contiguous row blocks, one per rank: rank `r` owns global rows `starts[r]..starts[r+1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    starts: Vec<u64>,
}

impl Partition {
    /// `n` rows split as evenly as possible into `nranks` blocks (for generated problems whose
    /// rows all have about the same length).
    ///
    /// # Panics
    /// When `nranks == 0`.
    pub fn by_rows(n: u64, nranks: usize) -> Self {
        assert!(nranks > 0, "a partition needs at least one rank");
        let k = nranks as u128;
        let starts = (0..=nranks)
            .map(|r| (n as u128 * r as u128 / k) as u64)
            .collect();
        Partition { starts }
    }

    /// Blocks of about equal cost, where the cost of the rows before `i` is
    /// `row_ptr[i] + i`: the nonzeros (the SpMV's work) plus one per row (the vector operations'
    /// work, which matters for very sparse rows). `row_ptr` is a CSR row pointer of `n + 1`
    /// entries.
    ///
    /// # Panics
    /// When `nranks == 0` or `row_ptr` is empty.
    pub fn by_nnz<I: Copy + Into<u64>>(row_ptr: &[I], nranks: usize) -> Self {
        assert!(nranks > 0, "a partition needs at least one rank");
        assert!(!row_ptr.is_empty(), "a row pointer has n + 1 entries");
        let n = row_ptr.len() - 1;
        let cost = |i: usize| row_ptr[i].into() as u128 + i as u128;
        let total = cost(n);
        let mut starts = vec![0u64; nranks + 1];
        for (r, s) in starts.iter_mut().enumerate().skip(1) {
            let target = total * r as u128 / nranks as u128;
            // First row whose cumulative cost reaches the target (cost is increasing).
            let (mut lo, mut hi) = (0usize, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if cost(mid) < target {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            *s = lo as u64;
        }
        starts[nranks] = n as u64;
        Partition { starts }
    }

    /// A partition from explicit block starts (`nranks + 1` non-decreasing values from 0).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the starts are not of that form.
    pub fn from_starts(starts: Vec<u64>) -> Result<Self> {
        if starts.len() < 2 || starts[0] != 0 || starts.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidInput(format!(
                "partition starts must be non-decreasing from 0 with at least two entries, got {starts:?}"
            )));
        }
        Ok(Partition { starts })
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        self.starts.len() - 1
    }
    /// Global number of rows.
    pub fn n(&self) -> u64 {
        *self.starts.last().expect("at least two starts")
    }
    /// The rows of rank `r`.
    pub fn rows(&self, r: usize) -> Range<u64> {
        self.starts[r]..self.starts[r + 1]
    }
    /// The block starts (`nranks + 1` values).
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }
    /// The rank that owns global row (and vector entry) `g`.
    ///
    /// # Panics
    /// When `g >= n`.
    pub fn owner(&self, g: u64) -> usize {
        assert!(
            g < self.n(),
            "row {g} outside a partition of {} rows",
            self.n()
        );
        // The last block start ≤ g; empty blocks share their start with the next one, which owns g.
        self.starts.partition_point(|&s| s <= g) - 1
    }
}

/// The rows of one rank with global (`u64`) column indices: what a rank builds or reads before
/// the distributed matrix is set up. Rows are `first_row..first_row + nrows()` of a square
/// global matrix of `n_global` rows.
#[derive(Clone, Debug, PartialEq)]
pub struct RowBlock<T> {
    /// Rows (and columns) of the global matrix.
    pub n_global: u64,
    /// The global index of this block's first row.
    pub first_row: u64,
    /// Row pointer into `cols`/`vals` (`nrows + 1` entries from 0).
    pub row_ptr: Vec<u64>,
    /// Global column indices.
    pub cols: Vec<u64>,
    /// Values.
    pub vals: Vec<T>,
}

impl<T: Scalar> RowBlock<T> {
    /// Rows `rows` of the global matrix `a` (which must be square).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `a` is not square or `rows` is out of range.
    pub fn from_csr(a: &CsrMatrix<T>, rows: Range<u64>) -> Result<Self> {
        if a.nrows() != a.ncols() {
            return Err(Error::InvalidInput(format!(
                "a distributed matrix must be square, this one is {}×{}",
                a.nrows(),
                a.ncols()
            )));
        }
        if rows.start > rows.end || rows.end > a.nrows() as u64 {
            return Err(Error::InvalidInput(format!(
                "rows {rows:?} outside a matrix of {} rows",
                a.nrows()
            )));
        }
        let (r0, r1) = (rows.start as usize, rows.end as usize);
        let rp = a.row_ptr();
        let (k0, k1) = (rp[r0] as usize, rp[r1] as usize);
        Ok(RowBlock {
            n_global: a.nrows() as u64,
            first_row: rows.start,
            row_ptr: rp[r0..=r1]
                .iter()
                .map(|&p| (p as usize - k0) as u64)
                .collect(),
            cols: a.col_idx()[k0..k1].iter().map(|&c| c as u64).collect(),
            vals: a.values()[k0..k1].to_vec(),
        })
    }

    /// Rows in this block.
    pub fn nrows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }
    /// Nonzeros in this block.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Checks the block's invariants (row pointer from 0, non-decreasing, ending at the entry
    /// count; columns inside the global matrix; rows inside it).
    ///
    /// # Errors
    /// [`Error::InvalidStructure`] naming the first broken invariant.
    pub fn validate(&self) -> Result<()> {
        self.validate_cols(self.n_global)
    }

    /// [`RowBlock::validate`] with the columns of a matrix of `ncols` columns.
    fn validate_cols(&self, ncols: u64) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidStructure(m));
        if self.row_ptr.first() != Some(&0) {
            return bad("row block: row_ptr must start with 0".into());
        }
        if self.row_ptr.windows(2).any(|w| w[0] > w[1]) {
            return bad("row block: row_ptr decreases".into());
        }
        if *self.row_ptr.last().expect("non-empty") != self.cols.len() as u64
            || self.cols.len() != self.vals.len()
        {
            return bad(format!(
                "row block: row_ptr ends at {} but there are {} columns and {} values",
                self.row_ptr.last().expect("non-empty"),
                self.cols.len(),
                self.vals.len()
            ));
        }
        if self.first_row + self.nrows() as u64 > self.n_global {
            return bad(format!(
                "row block: rows {}..{} outside a matrix of {} rows",
                self.first_row,
                self.first_row + self.nrows() as u64,
                self.n_global
            ));
        }
        if let Some(c) = self.cols.iter().find(|&&c| c >= ncols) {
            return bad(format!(
                "row block: column {c} outside a matrix of {ncols} columns"
            ));
        }
        Ok(())
    }
}

/// Rows `rows` of the 7-point Laplacian on an `nx × ny × nz` grid (natural ordering, x fastest;
/// 6 on the diagonal, −1 per grid neighbour), built without the global matrix: each rank
/// generates only its own rows. `nx = ny = nz = n` gives the same matrix as
/// [`generate::poisson3d`](crate::generate::poisson3d), of any size.
///
/// # Errors
/// [`Error::InvalidInput`] when `rows` is outside the grid or a dimension is zero.
pub fn poisson3d_block<T: Scalar>(
    (nx, ny, nz): (u64, u64, u64),
    rows: Range<u64>,
) -> Result<RowBlock<T>> {
    let n = nx
        .checked_mul(ny)
        .and_then(|v| v.checked_mul(nz))
        .ok_or_else(|| Error::InvalidInput(format!("grid {nx}×{ny}×{nz} overflows u64")))?;
    if n == 0 || rows.start > rows.end || rows.end > n {
        return Err(Error::InvalidInput(format!(
            "rows {rows:?} outside a {nx}×{ny}×{nz} grid"
        )));
    }
    let m = (rows.end - rows.start) as usize;
    let mut row_ptr = Vec::with_capacity(m + 1);
    let mut cols = Vec::with_capacity(7 * m);
    let mut vals = Vec::with_capacity(7 * m);
    let (six, m1) = (T::of_f64(6.0), -T::one());
    row_ptr.push(0u64);
    for r in rows.clone() {
        stencil7_row(r, (nx, ny, nz), six, m1, |c, v| {
            cols.push(c);
            vals.push(v);
        });
        row_ptr.push(cols.len() as u64);
    }
    Ok(RowBlock {
        n_global: n,
        first_row: rows.start,
        row_ptr,
        cols,
        vals,
    })
}

/// A contiguous range of a halo or send buffer exchanged with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    /// The peer rank.
    pub peer: usize,
    /// First entry in the buffer.
    pub offset: usize,
    /// Number of entries.
    pub count: usize,
}

/// One rank's part of a distributed matrix, in 32-bit local numbering (see the
/// [module docs](super)): the owned block, the compressed boundary block, and the halo lists.
#[derive(Clone, Debug)]
pub struct DistPart<T> {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub nranks: usize,
    /// Rows of the global matrix.
    pub n_global: u64,
    /// Global index of the first owned row.
    pub first_row: u64,
    /// Global index of the first owned column (`first_row` for a square matrix split by one
    /// partition; a rectangular part, [`DistPart::build_rect`], owns the columns of its rank
    /// under the column partition).
    pub first_col: u64,
    /// Owned rows × owned columns, local indices.
    pub owned: CsrMatrix<T>,
    /// The owned rows that touch the halo (local row indices, increasing).
    pub bnd_rows: Vec<u32>,
    /// Row pointer of the boundary block (`bnd_rows.len() + 1` entries).
    pub bnd_ptr: Vec<u32>,
    /// Boundary block columns: indices into the halo buffer.
    pub bnd_cols: Vec<u32>,
    /// Boundary block values.
    pub bnd_vals: Vec<T>,
    /// Global index of each halo entry (sorted, so grouped by owner in rank order).
    pub halo_global: Vec<u64>,
    /// Where each peer's values land in the halo buffer.
    pub recv: Vec<Neighbor>,
    /// The owned entries each peer needs (local indices), concatenated in `send` order.
    pub send_idx: Vec<u32>,
    /// Each peer's range of `send_idx`.
    pub send: Vec<Neighbor>,
}

fn too_big(what: &str, v: usize) -> Error {
    Error::InvalidInput(format!(
        "{what} of one rank's part is {v}, above the 32-bit limit of a GPU part: use more ranks"
    ))
}

impl<T: Scalar> DistPart<T> {
    /// Splits `block` (rank `rank`'s rows under `partition`) into owned and halo parts and
    /// computes the halo lists. `exchange` is an all-to-all of index lists among the ranks:
    /// given, for each peer, the global indices this rank needs from it, it returns, for each
    /// peer, the global indices that peer needs from this rank (every rank calls it once,
    /// collectively).
    ///
    /// # Errors
    /// [`Error::InvalidStructure`] / [`Error::InvalidInput`] when the block is malformed, does
    /// not match the partition, or a part exceeds 32-bit indices; whatever `exchange` returns.
    pub fn build(
        block: &RowBlock<T>,
        partition: &Partition,
        rank: usize,
        exchange: impl FnOnce(Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>>,
    ) -> Result<Self> {
        block.validate()?;
        let rows = partition.rows(rank);
        if block.n_global != partition.n()
            || block.first_row != rows.start
            || block.nrows() as u64 != rows.end - rows.start
        {
            return Err(Error::InvalidInput(format!(
                "rank {rank}: row block {}..{} of {} rows does not match the partition's {rows:?} of {}",
                block.first_row,
                block.first_row + block.nrows() as u64,
                block.n_global,
                partition.n()
            )));
        }
        Self::split(block, partition, rank, exchange)
    }

    /// A part of a rectangular matrix: `block` holds this rank's rows with global column
    /// indices into the `col_partition.n()` columns (its `n_global` is the row count of the
    /// whole matrix), and the columns (the entries of the vectors it multiplies) are split by
    /// `col_partition`, whose block `rank` this rank owns. The rows owned are the block's: the
    /// product `y = A·x` takes this rank's entries of `x` under `col_partition` and gives the
    /// block's rows of `y`. The transfers of the distributed AMG are such matrices (fine rows ×
    /// coarse columns and back). Collective as [`DistPart::build`].
    ///
    /// # Errors
    /// As [`DistPart::build`], and a column index outside `col_partition`.
    pub fn build_rect(
        block: &RowBlock<T>,
        col_partition: &Partition,
        rank: usize,
        exchange: impl FnOnce(Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>>,
    ) -> Result<Self> {
        block.validate_cols(col_partition.n())?;
        if rank >= col_partition.nranks() {
            return Err(Error::InvalidInput(format!(
                "rank {rank} outside a column partition of {} ranks",
                col_partition.nranks()
            )));
        }
        Self::split(block, col_partition, rank, exchange)
    }

    /// The split of a validated block into owned and halo parts (see [`DistPart::build`]),
    /// columns under `partition`.
    fn split(
        block: &RowBlock<T>,
        partition: &Partition,
        rank: usize,
        exchange: impl FnOnce(Vec<Vec<u64>>) -> Result<Vec<Vec<u64>>>,
    ) -> Result<Self> {
        let nranks = partition.nranks();
        let rows = partition.rows(rank);
        let n_owned = block.nrows();
        u32::try_from(n_owned).map_err(|_| too_big("the row count", n_owned))?;
        let n_cols = (rows.end - rows.start) as usize;
        u32::try_from(n_cols).map_err(|_| too_big("the column count", n_cols))?;
        let owned_range = rows.clone();
        let is_owned = |c: u64| owned_range.contains(&c);

        // The halo: every off-block column, sorted and unique.
        let mut halo_global: Vec<u64> = block
            .cols
            .iter()
            .copied()
            .filter(|&c| !is_owned(c))
            .collect();
        halo_global.sort_unstable();
        halo_global.dedup();

        // Owned block and compressed boundary block.
        let mut o_ptr = Vec::with_capacity(n_owned + 1);
        let mut o_cols = Vec::with_capacity(block.nnz());
        let mut o_vals = Vec::with_capacity(block.nnz());
        let (mut bnd_rows, mut bnd_ptr, mut bnd_cols, mut bnd_vals) =
            (Vec::new(), vec![0u32], Vec::new(), Vec::new());
        o_ptr.push(0u32);
        for i in 0..n_owned {
            let (k0, k1) = (block.row_ptr[i] as usize, block.row_ptr[i + 1] as usize);
            let mut touches_halo = false;
            for k in k0..k1 {
                let c = block.cols[k];
                if is_owned(c) {
                    o_cols.push((c - rows.start) as u32);
                    o_vals.push(block.vals[k]);
                } else {
                    let h = halo_global
                        .binary_search(&c)
                        .expect("every off-block column is in the halo");
                    bnd_cols.push(h as u32);
                    bnd_vals.push(block.vals[k]);
                    touches_halo = true;
                }
            }
            let on = u32::try_from(o_cols.len())
                .map_err(|_| too_big("the owned nonzero count", o_cols.len()))?;
            o_ptr.push(on);
            if touches_halo {
                bnd_rows.push(i as u32);
                bnd_ptr.push(
                    u32::try_from(bnd_cols.len())
                        .map_err(|_| too_big("the boundary nonzero count", bnd_cols.len()))?,
                );
            }
        }
        let owned = CsrMatrix::try_from_parts(n_owned, n_cols, o_ptr, o_cols, o_vals)?;

        // Receive lists: the halo is sorted, so each owner's entries are one contiguous run.
        let mut recv = Vec::new();
        let mut need: Vec<Vec<u64>> = vec![Vec::new(); nranks];
        let mut k = 0;
        while k < halo_global.len() {
            let peer = partition.owner(halo_global[k]);
            let end = partition.rows(peer).end;
            let len = halo_global[k..].partition_point(|&g| g < end);
            need[peer].extend_from_slice(&halo_global[k..k + len]);
            recv.push(Neighbor {
                peer,
                offset: k,
                count: len,
            });
            k += len;
        }

        // Send lists: what every peer needs from this rank.
        let wanted = exchange(need)?;
        if wanted.len() != nranks {
            return Err(Error::InvalidInput(format!(
                "halo exchange returned {} lists for {nranks} ranks",
                wanted.len()
            )));
        }
        let (mut send_idx, mut send) = (Vec::new(), Vec::new());
        for (peer, list) in wanted.into_iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            if peer == rank {
                return Err(Error::InvalidInput(format!(
                    "rank {rank} asked itself for halo entries"
                )));
            }
            let offset = send_idx.len();
            for g in list {
                if !is_owned(g) {
                    return Err(Error::InvalidInput(format!(
                        "rank {peer} asked rank {rank} for entry {g}, which rank {rank} does not own ({rows:?})"
                    )));
                }
                send_idx.push((g - rows.start) as u32);
            }
            send.push(Neighbor {
                peer,
                offset,
                count: send_idx.len() - offset,
            });
        }
        Ok(DistPart {
            rank,
            nranks,
            n_global: block.n_global,
            first_row: block.first_row,
            first_col: rows.start,
            owned,
            bnd_rows,
            bnd_ptr,
            bnd_cols,
            bnd_vals,
            halo_global,
            recv,
            send_idx,
            send,
        })
    }

    /// Owned rows (the local length of every vector).
    pub fn n_owned(&self) -> usize {
        self.owned.nrows()
    }
    /// Owned columns (the local length of the vectors it multiplies; [`DistPart::n_owned`] for
    /// a square matrix).
    pub fn n_owned_cols(&self) -> usize {
        self.owned.ncols()
    }
    /// Halo entries.
    pub fn n_halo(&self) -> usize {
        self.halo_global.len()
    }
    /// Nonzeros of this part (owned and boundary blocks).
    pub fn nnz(&self) -> usize {
        self.owned.nnz() + self.bnd_cols.len()
    }

    /// The global index of local column `l` (owned `0..n_owned`, then halo).
    ///
    /// # Panics
    /// When `l >= n_owned + n_halo`.
    pub fn local_to_global(&self, l: usize) -> u64 {
        let n = self.n_owned_cols();
        if l < n {
            self.first_col + l as u64
        } else {
            self.halo_global[l - n]
        }
    }

    /// The local column of global index `g`, or `None` when this rank neither owns nor needs it.
    pub fn global_to_local(&self, g: u64) -> Option<usize> {
        let n = self.n_owned_cols() as u64;
        if g >= self.first_col && g < self.first_col + n {
            Some((g - self.first_col) as usize)
        } else {
            self.halo_global
                .binary_search(&g)
                .ok()
                .map(|h| n as usize + h)
        }
    }

    /// `y ← A_local·[x_owned; x_halo]` on the host: the reference for the distributed product
    /// (and what the simulated ranks run).
    ///
    /// # Panics
    /// When `x`, `halo` or `y` have the wrong lengths.
    pub fn spmv_host(&self, x: &[T], halo: &[T], y: &mut [T]) {
        assert_eq!(halo.len(), self.n_halo(), "halo buffer length");
        crate::spmv::spmv(T::one(), &self.owned, x, T::zero(), y);
        self.boundary_host(halo, y);
    }

    /// `y[bnd_rows] += A_oh·halo` (the boundary rows' halo part).
    pub(crate) fn boundary_host(&self, halo: &[T], y: &mut [T]) {
        for (k, &row) in self.bnd_rows.iter().enumerate() {
            let (a, b) = (self.bnd_ptr[k] as usize, self.bnd_ptr[k + 1] as usize);
            let s = (a..b).fold(T::zero(), |s, j| {
                s + self.bnd_vals[j] * halo[self.bnd_cols[j] as usize]
            });
            y[row as usize] += s;
        }
    }

    /// The values this rank sends, in `send_idx` order, gathered from its owned `x`.
    pub fn gather_send(&self, x: &[T]) -> Vec<T> {
        self.send_idx.iter().map(|&i| x[i as usize]).collect()
    }
}
