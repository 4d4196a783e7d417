//! Strength of connection, amalgamation and aggregation: the graph steps of smoothed-aggregation
//! multigrid.
//!
//! [`strength_symmetric`] keeps the strong off-diagonal entries of `A` (PyAMG's symmetric
//! strength of connection); [`amalgamate`] turns a matrix with `block` unknowns per node into its
//! node graph; [`aggregate_mis2`] groups the nodes of a strength graph into aggregates around the
//! nodes of a distance-2 maximal independent set (Bell, Dalton and Olson 2012).
//!
//! These CPU functions are the reference: the GPU versions (`sparse::gpu::strength_symmetric`,
//! `amalgamate`, `aggregate_mis2`, with the CUDA feature) return **exactly** the same results on
//! canonical input (same patterns, same aggregation arrays and roots, values bit for bit), so a
//! hierarchy built on either side is the same.
//!
//! # Why MIS-2, and why this exact procedure
//!
//! Greedy aggregation (PyAMG's `standard_aggregation`) visits nodes in order, which is
//! sequential. A distance-2 maximal independent set has the same property that makes good
//! aggregates — every node is within distance 2 of a chosen root and no two roots are within
//! distance 2 — and it is computed in parallel rounds where every node reads only the previous
//! half-round's array. The procedure below breaks every tie by a random priority and the node
//! index, so its result depends on the graph and the seed alone, not on thread count or
//! evaluation order.
//!
//! 1. The graph: the pattern of `S`, symmetrised (`i ~ j` when `s_ij` or `s_ji` is stored),
//!    without the diagonal.
//! 2. Priority `w(i) = splitmix64(seed ^ splitmix64(i))` ([`mis2_priority`]); state
//!    `OUT = 0`, `UNDECIDED = 1`, `IN = 2`; nodes without neighbours start `OUT`, the others
//!    `UNDECIDED`. Each node's state, priority and index are packed in one 64-bit key,
//!    `key(i) = state << 62 | (w(i) >> 34) << 32 | i` (2 bits of state, the top 30 bits of the
//!    priority, the 32-bit index), so comparing keys compares `(state, priority, index)` and a
//!    round moves 8-byte words instead of tuples.
//! 3. Round: `t1(i) = max key(j)` over `j ∈ {i} ∪ N(i)`; `t2(i) = max t1(j)` over the same set
//!    (the largest key within distance 2); every `UNDECIDED` node with `t2(i) == key(i)` becomes
//!    `IN`, and every `UNDECIDED` node whose `t2(i) >> 62 == IN` becomes `OUT`. Repeat until no
//!    node is `UNDECIDED`: each round decides at least the undecided node of largest key (every
//!    key within distance 2 of it is smaller, or is an `IN` node's and makes it `OUT`).
//! 4. The `IN` nodes are the roots; aggregate `k` is the `k`-th root in node order.
//! 5. Pass 1: a non-root node with a root neighbour joins the root neighbour of largest
//!    `(w(j) >> 34) << 32 | j` (its key without the state bits). Pass 2: a node still unassigned
//!    joins the aggregate of its neighbour of largest `(w(j) >> 34) << 32 | j` among those
//!    assigned in pass 1 (maximality puts every node with neighbours within distance 2 of a root,
//!    so pass 2 assigns the rest).
//!
//! Nodes without strong neighbours stay unaggregated ([`NOT_AGGREGATED`]): their rows of the
//! tentative prolongator are zero, and the smoother alone treats them (as in PyAMG).
//!
//! # CPU implementation and determinism
//!
//! Every output matrix is built in two passes over rows in chunks of 4096 rows (rayon tasks):
//! a count pass, a prefix sum of the counts, and a fill pass writing each row in place — no
//! vector per row. The MIS-2 rounds work on two `u64` arrays (keys and `t1`) reused across
//! rounds: the second half-round and the state update are one pass, since `t2(i)` is needed by
//! node `i` alone and the pass writes only keys while reading `t1`. All of it is integer work
//! except strength's threshold and amalgamation's sums, which are computed per entry and per
//! block in a fixed order (below), so the results do not depend on the thread count.
//!
//! # References
//!
//! - N. Bell, S. Dalton and L. N. Olson, *Exposing fine-grained parallelism in algebraic
//!   multigrid methods*, SIAM J. Sci. Comput. 34(4), 2012.
//! - P. Vaněk, J. Mandel and M. Brezina, *Algebraic multigrid by smoothed aggregation for second
//!   and fourth order elliptic problems*, Computing 56, 1996.

use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// `agg[i]` of a node that belongs to no aggregate (it has no strong neighbour).
pub const NOT_AGGREGATED: u32 = u32::MAX;

/// The result of an aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregation {
    /// The aggregate of each node, or [`NOT_AGGREGATED`].
    pub agg: Vec<u32>,
    /// The root node of each aggregate, in increasing node order.
    pub roots: Vec<u32>,
}

impl Aggregation {
    /// The number of aggregates (the coarse level's nodes).
    pub fn num_aggregates(&self) -> usize {
        self.roots.len()
    }
}

pub use crate::generate::splitmix64;

/// The random priority of node `i` in [`aggregate_mis2`] (shared with the GPU version, which
/// keeps its top 30 bits).
#[inline]
pub fn mis2_priority(i: u32, seed: u64) -> u64 {
    splitmix64(seed ^ splitmix64(i as u64))
}

/// Rows per parallel task of the two-pass builders and of the MIS-2 passes: large enough to
/// amortise a task, small enough to balance the load of 2–64 threads.
pub(crate) const ROWS_PER_TASK: usize = 4096;

/// CSR arrays of `n` rows built in two passes: `count(s, i)` returns the length of row `i`, a
/// prefix sum gives the row pointer, and `fill(s, i, cols, vals)` writes row `i` into slices of
/// exactly that length. Rows are processed in parallel in chunks of [`ROWS_PER_TASK`], each task
/// with a scratch value from `init`. The result does not depend on the thread count as long as
/// `count` and `fill` depend on the row alone.
///
/// # Errors
/// [`Error::InvalidInput`] naming `what` when the total reaches `u32::MAX`.
pub(crate) fn build_rows<V, S>(
    n: usize,
    what: &str,
    init: impl Fn() -> S + Sync + Send,
    count: impl Fn(&mut S, usize) -> usize + Sync + Send,
    fill: impl Fn(&mut S, usize, &mut [u32], &mut [V]) + Sync + Send,
) -> Result<(Vec<u32>, Vec<u32>, Vec<V>)>
where
    V: Copy + Default + Send + Sync,
{
    let mut counts = vec![0u32; n];
    counts
        .par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each_init(&init, |s, (c, out)| {
            let lo = c * ROWS_PER_TASK;
            for (r, o) in out.iter_mut().enumerate() {
                *o = count(s, lo + r) as u32;
            }
        });
    let chunk_total: Vec<u64> = counts
        .par_chunks(ROWS_PER_TASK)
        .map(|c| c.iter().map(|&x| x as u64).sum())
        .collect();
    let mut starts = Vec::with_capacity(chunk_total.len() + 1);
    starts.push(0u64);
    for t in &chunk_total {
        starts.push(starts.last().copied().unwrap_or(0) + t);
    }
    let nnz = *starts.last().unwrap_or(&0);
    if nnz >= u32::MAX as u64 {
        return Err(Error::InvalidInput(format!(
            "{what}: {nnz} entries exceed the 32-bit index range"
        )));
    }
    let mut row_ptr = vec![0u32; n + 1];
    row_ptr[1..]
        .par_chunks_mut(ROWS_PER_TASK)
        .zip(counts.par_chunks(ROWS_PER_TASK))
        .enumerate()
        .for_each(|(c, (out, cnt))| {
            let mut acc = starts[c] as u32;
            for (o, &x) in out.iter_mut().zip(cnt) {
                acc += x;
                *o = acc;
            }
        });
    drop(counts);
    let nnz = nnz as usize;
    let mut col = vec![0u32; nnz];
    let mut val = vec![V::default(); nnz];
    let mut parts = Vec::with_capacity(chunk_total.len());
    let (mut rc, mut rv) = (&mut col[..], &mut val[..]);
    for (c, &len) in chunk_total.iter().enumerate() {
        let len = len as usize;
        let (hc, tc) = std::mem::take(&mut rc).split_at_mut(len);
        let (hv, tv) = std::mem::take(&mut rv).split_at_mut(len);
        parts.push((c, hc, hv));
        rc = tc;
        rv = tv;
    }
    let rp = &row_ptr;
    parts
        .into_par_iter()
        .for_each_init(&init, |s, (c, cols, vals)| {
            let lo = c * ROWS_PER_TASK;
            let hi = (lo + ROWS_PER_TASK).min(n);
            let base = rp[lo];
            for i in lo..hi {
                let (a, b) = ((rp[i] - base) as usize, (rp[i + 1] - base) as usize);
                fill(s, i, &mut cols[a..b], &mut vals[a..b]);
            }
        });
    Ok((row_ptr, col, val))
}

/// True when the columns of `cols` are strictly increasing (a canonical row).
#[inline]
fn strictly_increasing(cols: &[u32]) -> bool {
    cols.windows(2).all(|w| w[0] < w[1])
}

/// `|a_ii|` of every row of the square `a`, `a_ii` the sum of the row's stored diagonal entries.
fn abs_diagonal<T: Scalar>(a: &CsrMatrix<T>) -> Vec<f64> {
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    (0..a.nrows())
        .into_par_iter()
        .with_min_len(ROWS_PER_TASK)
        .map(|i| {
            let mut d = T::zero();
            for k in p[i] as usize..p[i + 1] as usize {
                if j[k] as usize == i {
                    d += v[k];
                }
            }
            d.as_f64().abs()
        })
        .collect()
}

/// Symmetric strength of connection (PyAMG's `symmetric_strength_of_connection`): the
/// off-diagonal `a_ij` is strong when `|a_ij| ≥ θ·sqrt(|a_ii|·|a_jj|)` (evaluated in `f64`, as
/// `theta * (d_i * d_j).sqrt()`). Returns the strong off-diagonal entries (values `a_ij`) as
/// canonical CSR without the diagonal; `θ = 0` keeps every stored off-diagonal entry (PyAMG's
/// default for smoothed aggregation). Explicit zeros are dropped.
///
/// Non-canonical input is accepted: `a_ii` is the sum of the row's stored diagonal entries, each
/// stored entry is tested on its own, and the strong entries of one column are summed in stored
/// order.
///
/// # Errors
/// [`Error::InvalidInput`] when `A` is not square or `θ` is not in `[0, 1]`.
pub fn strength_symmetric<T: Scalar>(a: &CsrMatrix<T>, theta: f64) -> Result<CsrMatrix<T>> {
    if a.nrows() != a.ncols() {
        return Err(Error::InvalidInput(format!(
            "strength of connection: the matrix is {}×{}, not square",
            a.nrows(),
            a.ncols()
        )));
    }
    if !(0.0..=1.0).contains(&theta) {
        return Err(Error::InvalidInput(format!(
            "strength of connection: theta = {theta} is not in [0, 1]"
        )));
    }
    let n = a.nrows();
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    let row = |i: usize| p[i] as usize..p[i + 1] as usize;
    let diag = abs_diagonal(a);
    // θ·sqrt(d_i·d_j), the threshold. At θ = 0 (the AMG default) it is 0·sqrt(p): +0 when the
    // product p is finite, NaN when it is not (sqrt(∞) = ∞, 0·∞ = NaN) — computed without the
    // square root, the same value bit for bit.
    let threshold = |di: f64, dc: f64| {
        let p = di * dc;
        if theta != 0.0 {
            theta * p.sqrt()
        } else if p.is_finite() {
            0.0
        } else {
            f64::NAN
        }
    };
    let strong = |i: usize, k: usize| {
        let c = j[k] as usize;
        let x = v[k].as_f64().abs();
        c != i && x != 0.0 && x >= threshold(diag[i], diag[c])
    };
    // A non-canonical row: its strong entries as (column << 32 | position) keys, sorted, so
    // that equal columns are adjacent and in stored order.
    let gather = |keys: &mut Vec<u64>, i: usize| {
        keys.clear();
        let r = row(i);
        let lo = r.start;
        keys.extend(
            r.filter(|&k| strong(i, k))
                .map(|k| (j[k] as u64) << 32 | (k - lo) as u64),
        );
        keys.sort_unstable();
    };
    let distinct = |keys: &[u64]| {
        keys.iter()
            .enumerate()
            .filter(|&(q, &k)| q == 0 || keys[q - 1] >> 32 != k >> 32)
            .count()
    };
    let (rp, col, val) = build_rows(
        n,
        "strength of connection",
        Vec::<u64>::new,
        |keys, i| {
            if strictly_increasing(&j[row(i)]) {
                row(i).filter(|&k| strong(i, k)).count()
            } else {
                gather(keys, i);
                distinct(keys)
            }
        },
        |keys, i, cols, vals| {
            if strictly_increasing(&j[row(i)]) {
                for (q, k) in row(i).filter(|&k| strong(i, k)).enumerate() {
                    cols[q] = j[k];
                    vals[q] = v[k];
                }
            } else {
                gather(keys, i);
                let lo = p[i] as usize;
                let mut q = usize::MAX;
                for (t, &key) in keys.iter().enumerate() {
                    let x = v[lo + (key & 0xffff_ffff) as usize];
                    if t > 0 && keys[t - 1] >> 32 == key >> 32 {
                        vals[q] += x;
                    } else {
                        q = q.wrapping_add(1);
                        cols[q] = (key >> 32) as u32;
                        vals[q] = x;
                    }
                }
            }
        },
    )?;
    // SAFETY: build_rows made row_ptr non-decreasing from 0 to col.len() (< u32::MAX); columns
    // come from A (< n), strictly increasing within each row; val has col.len() entries.
    Ok(unsafe { CsrMatrix::from_parts_unchecked(n, n, rp, col, val) })
}

/// `A` without its small off-diagonal entries: `a_ij` (`j ≠ i`) is dropped when
/// `|a_ij| < tol·sqrt(|a_ii|·|a_jj|)` (evaluated in `f64` as `tol * (d_i * d_j).sqrt()`), the
/// symmetric test of [`strength_symmetric`], so a symmetric matrix stays symmetric. Meant for
/// the rounding noise that finite-element assembly leaves where an entry cancels exactly in
/// exact arithmetic (`tol` ≈ 1e-12): those entries cost every product of a multigrid setup and
/// carry nothing. Diagonal entries are always kept; explicit zeros off the diagonal are dropped where
/// both diagonals are nonzero; rows keep their stored order.
///
/// Returns `None` when nothing is dropped (and for `tol = 0`), else the matrix and, for each of
/// its entries, its position in `A`'s arrays (a re-setup on the same pattern gathers new values
/// through it).
///
/// `a_ii` is the sum of the row's stored diagonal entries (0 when none is stored).
///
/// # Errors
/// [`Error::InvalidInput`] when `A` is not square or `tol` is negative or not finite.
pub fn drop_small<T: Scalar>(
    a: &CsrMatrix<T>,
    tol: f64,
) -> Result<Option<(CsrMatrix<T>, Vec<u32>)>> {
    if a.nrows() != a.ncols() {
        return Err(Error::InvalidInput(format!(
            "dropping small entries: the matrix is {}×{}, not square",
            a.nrows(),
            a.ncols()
        )));
    }
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(Error::InvalidInput(format!(
            "dropping small entries: tol = {tol} is not a finite non-negative number"
        )));
    }
    if tol == 0.0 {
        return Ok(None);
    }
    let n = a.nrows();
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    let row = |i: usize| p[i] as usize..p[i + 1] as usize;
    let diag = abs_diagonal(a);
    let kept = |i: usize, k: usize| {
        let c = j[k] as usize;
        c == i || v[k].as_f64().abs() >= tol * (diag[i] * diag[c]).sqrt()
    };
    let (rp, col, val) = build_rows(
        n,
        "dropping small entries",
        || (),
        |_, i| row(i).filter(|&k| kept(i, k)).count(),
        |_, i, cols, vals: &mut [(T, u32)]| {
            for (q, k) in row(i).filter(|&k| kept(i, k)).enumerate() {
                cols[q] = j[k];
                vals[q] = (v[k], k as u32);
            }
        },
    )?;
    if col.len() == a.nnz() {
        return Ok(None);
    }
    let (val, pos): (Vec<T>, Vec<u32>) = val.into_iter().unzip();
    // SAFETY: build_rows made row_ptr non-decreasing from 0 to col.len(); the columns are a
    // subset of A's row by row in stored order, so the matrix is as canonical as A.
    Ok(Some((
        unsafe { CsrMatrix::from_parts_unchecked(n, n, rp, col, val) },
        pos,
    )))
}

/// The node graph of a matrix with `block` unknowns per node (PyAMG amalgamates BSR matrices the
/// same way before its strength of connection): node `(I, J)` is stored when any entry of the
/// `block × block` block is, with value `sqrt(Σ a_ij²)` over the block's stored entries.
///
/// The sum is taken in `f64` in a fixed order — the rows of the block in increasing order, each
/// row's entries of the block in stored order (column order for canonical input) — starting from
/// `0.0`, then `sqrt` and a conversion to `T`; the GPU version adds in the same order, so the two
/// agree bit for bit. `block = 1` gives `|a_ij|` on the pattern of `A`. The result is canonical.
///
/// # Errors
/// [`Error::InvalidInput`] when `block` is 0 or does not divide the rows and columns.
pub fn amalgamate<T: Scalar>(a: &CsrMatrix<T>, block: usize) -> Result<CsrMatrix<T>> {
    let (m, n) = (a.nrows(), a.ncols());
    if block == 0 || m % block != 0 || n % block != 0 {
        return Err(Error::InvalidInput(format!(
            "amalgamate: the matrix is {m}×{n}, not a multiple of the block size {block}"
        )));
    }
    let nodes = m / block;
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    let b32 = block as u32;
    // Walks node row `node`: calls `emit(J, Σ a²)` for each block column J in increasing order.
    // Canonical rows (the usual case) are merged with one cursor per row of the block; other
    // rows go through (block column << 32 | gather position) keys, positions counted over the
    // block's rows in order and each row in stored order, sorted. Both visit each block's
    // entries in the documented order: rows of the block in order, each in stored order.
    let walk =
        |scratch: &mut (Vec<u64>, Vec<usize>), node: usize, emit: &mut dyn FnMut(u32, f64)| {
            let rows = node * block..(node + 1) * block;
            let (keys, cur) = scratch;
            if rows
                .clone()
                .all(|i| strictly_increasing(&j[p[i] as usize..p[i + 1] as usize]))
            {
                cur.clear();
                cur.extend(rows.clone().map(|i| p[i] as usize));
                loop {
                    let mut jmin = u32::MAX;
                    for (r, i) in rows.clone().enumerate() {
                        if cur[r] < p[i + 1] as usize {
                            jmin = jmin.min(j[cur[r]] / b32);
                        }
                    }
                    if jmin == u32::MAX {
                        break;
                    }
                    // (J + 1)·block ≤ ncols < 2^32: the block's columns end there.
                    let end = (jmin + 1) * b32;
                    let mut s = 0.0f64;
                    for (r, i) in rows.clone().enumerate() {
                        let hi = p[i + 1] as usize;
                        while cur[r] < hi && j[cur[r]] < end {
                            let x = v[cur[r]].as_f64();
                            s += x * x;
                            cur[r] += 1;
                        }
                    }
                    emit(jmin, s);
                }
            } else {
                let (lo, hi) = (p[rows.start] as usize, p[rows.end] as usize);
                keys.clear();
                keys.extend((lo..hi).map(|k| ((j[k] / b32) as u64) << 32 | (k - lo) as u64));
                keys.sort_unstable();
                let mut t = 0;
                while t < keys.len() {
                    let c = keys[t] >> 32;
                    let mut s = 0.0f64;
                    while t < keys.len() && keys[t] >> 32 == c {
                        let x = v[lo + (keys[t] & 0xffff_ffff) as usize].as_f64();
                        s += x * x;
                        t += 1;
                    }
                    emit(c as u32, s);
                }
            }
        };
    let (rp, col, val) = build_rows(
        nodes,
        "amalgamate",
        || (Vec::new(), Vec::new()),
        |scratch, node| {
            let mut count = 0;
            walk(scratch, node, &mut |_, _| count += 1);
            count
        },
        |scratch, node, cols, vals: &mut [T]| {
            let mut q = 0;
            walk(scratch, node, &mut |c, s| {
                cols[q] = c;
                vals[q] = T::of_f64(s.sqrt());
                q += 1;
            });
        },
    )?;
    // SAFETY: as in strength_symmetric; block columns are j / block < n / block, strictly
    // increasing within each row (distinct sorted keys).
    Ok(unsafe { CsrMatrix::from_parts_unchecked(nodes, n / block, rp, col, val) })
}

/// The symmetrised adjacency of `s` without the diagonal: `i ~ j` when `s_ij` or `s_ji` is
/// stored. Rows sorted, no duplicates. Built from the mirror test of every entry (binary search
/// of `i` in row `j` of the canonical pattern): when every entry has its mirror (the usual case,
/// `S` of a symmetric matrix) the graph is the pattern without the diagonal; otherwise the
/// missing mirrors are collected as sorted `(j, i)` pairs and merged into their rows.
pub(crate) fn symmetric_graph<T: Scalar>(s: &CsrMatrix<T>) -> Result<(Vec<u32>, Vec<u32>)> {
    let n = s.nrows();
    let owned;
    let (ptr, idx): (&[u32], &[u32]) =
        if (0..n).into_par_iter().with_min_len(ROWS_PER_TASK).all(|i| {
            strictly_increasing(&s.col_idx()[s.row_ptr()[i] as usize..s.row_ptr()[i + 1] as usize])
        }) {
            (s.row_ptr(), s.col_idx())
        } else {
            let (sp, sj) = (s.row_ptr(), s.col_idx());
            let sorted_row = |r: &mut Vec<u32>, i: usize| {
                r.clear();
                r.extend_from_slice(&sj[sp[i] as usize..sp[i + 1] as usize]);
                r.sort_unstable();
                r.dedup();
            };
            let (p, j, _) = build_rows::<(), _>(
                n,
                "aggregation graph",
                Vec::<u32>::new,
                |r, i| {
                    sorted_row(r, i);
                    r.len()
                },
                |r, i, cols, _| {
                    sorted_row(r, i);
                    cols.copy_from_slice(r);
                },
            )?;
            owned = (p, j);
            (&owned.0, &owned.1)
        };
    let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
    let has = |r: usize, c: u32| nb(r).binary_search(&c).is_ok();
    // Missing mirrors (i, j) → (j, i), as keys j << 32 | i, sorted.
    let mut extra: Vec<u64> = (0..n.div_ceil(ROWS_PER_TASK))
        .into_par_iter()
        .flat_map_iter(|c| {
            let lo = c * ROWS_PER_TASK;
            let hi = (lo + ROWS_PER_TASK).min(n);
            (lo..hi).flat_map(move |i| {
                nb(i)
                    .iter()
                    .filter(move |&&jj| jj as usize != i && !has(jj as usize, i as u32))
                    .map(move |&jj| (jj as u64) << 32 | i as u64)
            })
        })
        .collect();
    extra.par_sort_unstable();
    let eptr: Vec<u32> = if extra.is_empty() {
        Vec::new()
    } else {
        (0..n + 1)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .map(|r| extra.partition_point(|&k| (k >> 32) < r as u64) as u32)
            .collect()
    };
    let erow = |i: usize| {
        if eptr.is_empty() {
            &extra[0..0]
        } else {
            &extra[eptr[i] as usize..eptr[i + 1] as usize]
        }
    };
    let own = |i: usize| nb(i).iter().filter(move |&&c| c as usize != i);
    let (gp, gj, _) = build_rows::<(), _>(
        n,
        "aggregation graph",
        || (),
        |_, i| own(i).count() + erow(i).len(),
        |_, i, cols, _| {
            // Merge of two sorted, disjoint lists.
            let mut e = erow(i).iter().map(|&k| k as u32).peekable();
            let mut q = 0;
            for &c in own(i) {
                while let Some(&x) = e.peek() {
                    if x < c {
                        cols[q] = x;
                        q += 1;
                        e.next();
                    } else {
                        break;
                    }
                }
                cols[q] = c;
                q += 1;
            }
            for x in e {
                cols[q] = x;
                q += 1;
            }
        },
    )?;
    Ok((gp, gj))
}

const OUT: u64 = 0;
const UNDECIDED: u64 = 1;
const IN: u64 = 2;
const STATE_SHIFT: u32 = 62;
/// The key without its state bits: `(w >> 34) << 32 | i`.
const LOW: u64 = (1 << STATE_SHIFT) - 1;

/// The 30-bit MIS-2 priority of node `i` for ordering window `2^window` (see
/// [`aggregate_mis2_ordered`]): the top 30 bits of [`mis2_priority`] for `window = 0`; else the
/// window's random rank above the node's reversed position inside its window.
#[inline]
pub fn mis2_priority30(i: u32, seed: u64, window: u32) -> u64 {
    if window == 0 {
        return mis2_priority(i, seed) >> 34;
    }
    let w = window.min(30);
    let mask = (1u64 << w) - 1;
    // One window (w = 30) has no random rank above the position.
    let win = if w == 30 {
        0
    } else {
        mis2_priority(i >> w, seed) >> (34 + w)
    };
    (win << w) | (mask - (i as u64 & mask))
}

/// The packed MIS-2 key of node `i` (see the module docs).
#[inline]
fn mis2_key(i: u32, seed: u64, window: u32, state: u64) -> u64 {
    (state << STATE_SHIFT) | (mis2_priority30(i, seed, window) << 32) | i as u64
}

/// The MIS-2 rounds on the graph `(ptr, idx)`: the final keys (every state `IN` or `OUT`) and
/// the number of rounds.
fn mis2_rounds(ptr: &[u32], idx: &[u32], seed: u64, window: u32) -> (Vec<u64>, usize) {
    let n = ptr.len() - 1;
    let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
    let closed_max = |i: usize, a: &[u64]| nb(i).iter().fold(a[i], |m, &j| m.max(a[j as usize]));
    let mut key: Vec<u64> = (0..n)
        .into_par_iter()
        .with_min_len(ROWS_PER_TASK)
        .map(|i| {
            let state = if nb(i).is_empty() { OUT } else { UNDECIDED };
            mis2_key(i as u32, seed, window, state)
        })
        .collect();
    let mut undecided = key
        .par_iter()
        .filter(|&&k| k >> STATE_SHIFT == UNDECIDED)
        .count();
    let mut t1 = vec![0u64; n];
    let mut rounds = 0;
    while undecided > 0 {
        rounds += 1;
        t1.par_chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .for_each(|(c, out)| {
                let lo = c * ROWS_PER_TASK;
                for (r, o) in out.iter_mut().enumerate() {
                    *o = closed_max(lo + r, &key);
                }
            });
        // t2 and the state update in one pass: t2(i) is needed by node i alone, and this pass
        // reads only t1 and writes only key[i].
        undecided = key
            .par_chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .map(|(c, ks)| {
                let lo = c * ROWS_PER_TASK;
                let mut left = 0usize;
                for (r, k) in ks.iter_mut().enumerate() {
                    if *k >> STATE_SHIFT != UNDECIDED {
                        continue;
                    }
                    let t2 = closed_max(lo + r, &t1);
                    if t2 == *k {
                        *k = (*k & LOW) | IN << STATE_SHIFT;
                    } else if t2 >> STATE_SHIFT == IN {
                        *k &= LOW;
                    } else {
                        left += 1;
                    }
                }
                left
            })
            .sum();
    }
    (key, rounds)
}

/// MIS-2 aggregation of the graph of `s` (its pattern, symmetrised, without the diagonal),
/// deterministic for a given `seed` and independent of evaluation order and thread count. See
/// the module docs for the exact procedure.
///
/// # Panics
/// When `s` is not square (a strength matrix always is), or its symmetrised graph has 2^32 or
/// more entries.
pub fn aggregate_mis2<T: Scalar>(s: &CsrMatrix<T>, seed: u64) -> Aggregation {
    aggregate_mis2_counted(s, seed).0
}

/// [`aggregate_mis2`] and the number of MIS-2 rounds it took (the GPU version reports the same
/// count in `GpuAggregation::rounds`).
///
/// # Panics
/// As [`aggregate_mis2`].
pub fn aggregate_mis2_counted<T: Scalar>(s: &CsrMatrix<T>, seed: u64) -> (Aggregation, usize) {
    aggregate_mis2_ordered(s, seed, 0)
}

/// [`aggregate_mis2_counted`] with priorities that follow the node order inside windows of
/// `2^window` consecutive nodes (`window = 0`: the random priorities of [`aggregate_mis2`]).
///
/// Inside a window a lower node index has the higher priority, and the windows are ranked at
/// random (by `seed`). With one window spanning every node this is the lexicographic greedy
/// distance-2 independent set, so the aggregation is PyAMG's `standard_aggregation` (roots
/// where no neighbour is aggregated yet, visited in node order; the rest join the aggregated
/// neighbour of lowest index): the same aggregates, computed in parallel rounds. Windows bound
/// the number of rounds (a greedy sweep along a path takes one round per three nodes) while
/// keeping most of the denser packing of roots that the node order of a mesh gives.
///
/// # Panics
/// As [`aggregate_mis2`].
pub fn aggregate_mis2_ordered<T: Scalar>(
    s: &CsrMatrix<T>,
    seed: u64,
    window: u32,
) -> (Aggregation, usize) {
    assert_eq!(s.nrows(), s.ncols(), "aggregate_mis2: S must be square");
    let n = s.nrows();
    let (ptr, idx) = symmetric_graph(s).unwrap_or_else(|e| panic!("aggregate_mis2: {e}"));
    let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
    let (key, rounds) = mis2_rounds(&ptr, &idx, seed, window);
    let is_root = |k: u64| k >> STATE_SHIFT == IN;
    // Roots numbered in node order: per-chunk counts, their prefix, then the ranks.
    let chunk_roots: Vec<u32> = key
        .par_chunks(ROWS_PER_TASK)
        .map(|c| c.iter().filter(|&&k| is_root(k)).count() as u32)
        .collect();
    let mut first = Vec::with_capacity(chunk_roots.len() + 1);
    first.push(0u32);
    for c in &chunk_roots {
        first.push(first.last().copied().unwrap_or(0) + c);
    }
    let nroots = *first.last().unwrap_or(&0) as usize;
    let mut roots = vec![0u32; nroots];
    let mut p1 = vec![NOT_AGGREGATED; n];
    {
        let mut parts = Vec::with_capacity(chunk_roots.len());
        let mut rest = &mut roots[..];
        for &c in &chunk_roots {
            let (h, t) = std::mem::take(&mut rest).split_at_mut(c as usize);
            parts.push(h);
            rest = t;
        }
        p1.par_chunks_mut(ROWS_PER_TASK)
            .zip(parts)
            .enumerate()
            .for_each(|(c, (out, rts))| {
                let lo = c * ROWS_PER_TASK;
                let mut r = 0;
                for (q, o) in out.iter_mut().enumerate() {
                    if is_root(key[lo + q]) {
                        *o = first[c] + r as u32;
                        rts[r] = (lo + q) as u32;
                        r += 1;
                    }
                }
            });
    }
    // Pass 1: join the root neighbour of largest key (all roots share the state bits).
    let rank = p1.clone();
    join_unaggregated(&mut p1, |i| {
        let best = nb(i)
            .iter()
            .map(|&j| key[j as usize])
            .filter(|&k| is_root(k))
            .max();
        best.map(|k| rank[(k & 0xffff_ffff) as usize])
    });
    drop(rank);
    // Pass 2: join the pass-1-assigned neighbour of largest (w >> 34, j).
    let mut agg = p1.clone();
    join_unaggregated(&mut agg, |i| {
        let best = nb(i)
            .iter()
            .filter(|&&j| p1[j as usize] != NOT_AGGREGATED)
            .map(|&j| key[j as usize] & LOW)
            .max();
        best.map(|k| p1[(k & 0xffff_ffff) as usize])
    });
    (Aggregation { agg, roots }, rounds)
}

/// Puts every node of `agg` still [`NOT_AGGREGATED`] into the aggregate `pick(node)` names, if
/// it names one (in parallel over chunks of nodes; `pick` reads nothing that this writes).
fn join_unaggregated(agg: &mut [u32], pick: impl Fn(usize) -> Option<u32> + Sync) {
    agg.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(c, out)| {
            let lo = c * ROWS_PER_TASK;
            for (q, o) in out.iter_mut().enumerate() {
                if *o == NOT_AGGREGATED {
                    *o = pick(lo + q).unwrap_or(NOT_AGGREGATED);
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;
    use rand::{Rng, SeedableRng};

    /// A random square matrix, possibly unsymmetric, with unsorted rows, repeated columns,
    /// explicit zeros and empty rows.
    fn messy(n: usize, per_row: usize, seed: u64) -> CsrMatrix<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut rp = vec![0u32];
        let (mut cj, mut cv) = (Vec::new(), Vec::new());
        for i in 0..n {
            if rng.gen_range(0..9) != 0 {
                cj.push(i as u32);
                cv.push(rng.gen_range(1.0..4.0));
            }
            for _ in 0..rng.gen_range(0..=per_row) {
                cj.push(rng.gen_range(0..n) as u32);
                cv.push(if rng.gen_range(0..10) == 0 {
                    0.0
                } else {
                    rng.gen_range(-1.0..1.0)
                });
            }
            rp.push(cj.len() as u32);
        }
        CsrMatrix::try_from_parts(n, n, rp, cj, cv).unwrap()
    }

    /// PyAMG's `standard_aggregation` written plainly (sequential, in node order): a node with
    /// neighbours and none of them aggregated becomes a root with all its neighbours; the rest
    /// join the first (lowest) neighbour aggregated by the first pass. Nodes without
    /// neighbours stay unaggregated (this crate's convention).
    fn standard_aggregation(ptr: &[u32], idx: &[u32]) -> Aggregation {
        let n = ptr.len() - 1;
        let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
        let mut x = vec![NOT_AGGREGATED; n];
        let mut roots = Vec::new();
        for i in 0..n {
            if x[i] != NOT_AGGREGATED || nb(i).is_empty() {
                continue;
            }
            if nb(i).iter().all(|&j| x[j as usize] == NOT_AGGREGATED) {
                let a = roots.len() as u32;
                roots.push(i as u32);
                x[i] = a;
                for &j in nb(i) {
                    x[j as usize] = a;
                }
            }
        }
        let first = x.clone();
        for (i, xi) in x.iter_mut().enumerate() {
            if *xi == NOT_AGGREGATED {
                if let Some(&j) = nb(i).iter().find(|&&j| first[j as usize] != NOT_AGGREGATED) {
                    *xi = first[j as usize];
                }
            }
        }
        Aggregation { agg: x, roots }
    }

    /// Every node with neighbours in exactly one aggregate, the others in none; roots in
    /// increasing order, each in its own aggregate, no two within distance 2; every member
    /// within distance 2 of its root through a member.
    fn assert_valid(ptr: &[u32], idx: &[u32], a: &Aggregation, what: &str) {
        let n = ptr.len() - 1;
        let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
        assert!(
            a.roots.windows(2).all(|w| w[0] < w[1]),
            "{what}: roots order"
        );
        for (k, &r) in a.roots.iter().enumerate() {
            assert_eq!(a.agg[r as usize], k as u32, "{what}: root {r}");
        }
        for i in 0..n {
            let g = a.agg[i];
            if nb(i).is_empty() {
                assert_eq!(g, NOT_AGGREGATED, "{what}: isolated node {i}");
                continue;
            }
            assert!(
                (g as usize) < a.roots.len(),
                "{what}: node {i} not aggregated"
            );
            let r = a.roots[g as usize];
            let near = r as usize == i
                || nb(i).contains(&r)
                || nb(i)
                    .iter()
                    .any(|&j| a.agg[j as usize] == g && nb(j as usize).contains(&r));
            assert!(near, "{what}: node {i} not connected to its root {r}");
        }
        for &r in &a.roots {
            for &j in nb(r as usize) {
                for &k in nb(j as usize).iter().chain([j].iter()) {
                    assert!(
                        k == r
                            || a.agg[k as usize] == NOT_AGGREGATED
                            || a.roots[a.agg[k as usize] as usize] != k,
                        "{what}: roots {r} and {k} within distance 2"
                    );
                }
            }
        }
    }

    #[test]
    fn ordered_aggregation_is_standard_aggregation_with_one_window() {
        let mats: Vec<(&str, CsrMatrix<f64>)> = vec![
            ("poisson2d:23", generate::poisson2d(23).unwrap()),
            ("poisson3d:9", generate::poisson3d(9).unwrap()),
            ("poisson3d27:7", generate::poisson3d27(7).unwrap()),
            ("aniso2d:17", generate::aniso2d(17, 1e-3).unwrap()),
            ("messy", messy(400, 5, 3)),
            ("messy sparse", messy(700, 1, 4)),
        ];
        for (name, a) in &mats {
            let (ptr, idx) = symmetric_graph(a).unwrap();
            let want = standard_aggregation(&ptr, &idx);
            for seed in [0, 5] {
                let (got, rounds) = aggregate_mis2_ordered(a, seed, 30);
                assert_eq!(got, want, "{name}, seed {seed}");
                assert!(rounds >= 1);
                assert_valid(&ptr, &idx, &got, name);
            }
            // Windows: valid aggregations, at least as many aggregates as random priorities
            // on the grids; window 0 is the random-priority aggregation.
            for w in [0, 2, 5, 8] {
                let (got, _) = aggregate_mis2_ordered(a, 1, w);
                assert_valid(&ptr, &idx, &got, &format!("{name}, window {w}"));
                if w == 0 {
                    assert_eq!(got, aggregate_mis2(a, 1), "{name}");
                }
            }
        }
        // On a 27-point grid standard aggregation tiles 3×3×3 blocks.
        let a = generate::poisson3d27::<f64>(9).unwrap();
        assert_eq!(aggregate_mis2_ordered(&a, 0, 30).0.num_aggregates(), 27);
        assert!(aggregate_mis2(&a, 0).num_aggregates() < 27);
    }

    #[test]
    fn priorities_of_the_windows() {
        // Window 0 is the random priority's top 30 bits; inside a window lower nodes win.
        for i in [0u32, 1, 77, 4095, u32::MAX] {
            assert_eq!(mis2_priority30(i, 9, 0), mis2_priority(i, 9) >> 34);
            assert!(mis2_priority30(i, 9, 30) < 1 << 30);
        }
        assert!(mis2_priority30(64, 3, 5) > mis2_priority30(65, 3, 5));
        assert!(mis2_priority30(0, 3, 30) > mis2_priority30(1, 3, 30));
        assert_eq!(
            mis2_priority30(64, 3, 5) >> 5,
            mis2_priority30(95, 3, 5) >> 5
        );
    }

    /// The definitions written plainly (a vector per row), to check the two-pass builders.
    fn naive_strength(a: &CsrMatrix<f64>, theta: f64) -> CsrMatrix<f64> {
        let d: Vec<f64> = a.diagonal().iter().map(|x| x.abs()).collect();
        let mut t = Vec::new();
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            let mut row: Vec<(usize, u32, f64)> = c
                .iter()
                .zip(v)
                .enumerate()
                .filter(|&(_, (&c, &x))| {
                    let c = c as usize;
                    c != i && x != 0.0 && x.abs() >= theta * (d[i] * d[c]).sqrt()
                })
                .map(|(k, (&c, &x))| (k, c, x))
                .collect();
            row.sort_by_key(|e| (e.1, e.0));
            let mut out: Vec<(u32, f64)> = Vec::new();
            for (_, c, x) in row {
                match out.last_mut() {
                    Some(l) if l.0 == c => l.1 += x,
                    _ => out.push((c, x)),
                }
            }
            t.extend(out.into_iter().map(|(c, x)| (i, c as usize, x)));
        }
        // from_triplets would sum again; build directly.
        let mut rp = vec![0u32; a.nrows() + 1];
        for &(i, _, _) in &t {
            rp[i + 1] += 1;
        }
        for i in 0..a.nrows() {
            rp[i + 1] += rp[i];
        }
        let cj = t.iter().map(|e| e.1 as u32).collect();
        let cv = t.iter().map(|e| e.2).collect();
        CsrMatrix::try_from_parts(a.nrows(), a.ncols(), rp, cj, cv).unwrap()
    }

    fn naive_graph(s: &CsrMatrix<f64>) -> Vec<Vec<u32>> {
        let n = s.nrows();
        let mut g = vec![std::collections::BTreeSet::new(); n];
        for i in 0..n {
            for &j in s.row(i).0 {
                if j as usize != i {
                    g[i].insert(j);
                    g[j as usize].insert(i as u32);
                }
            }
        }
        g.into_iter().map(|r| r.into_iter().collect()).collect()
    }

    /// The procedure of the module docs with tuple keys and a vector per row.
    fn naive_mis2(s: &CsrMatrix<f64>, seed: u64) -> Aggregation {
        let g = naive_graph(s);
        let n = g.len();
        let w = |i: usize| mis2_priority(i as u32, seed) >> 34;
        let mut state: Vec<u8> = (0..n).map(|i| u8::from(!g[i].is_empty())).collect();
        while state.contains(&1) {
            let key = |i: usize| (state[i], w(i), i);
            let t1: Vec<_> = (0..n)
                .map(|i| g[i].iter().map(|&j| key(j as usize)).fold(key(i), Ord::max))
                .collect();
            let t2: Vec<_> = (0..n)
                .map(|i| g[i].iter().map(|&j| t1[j as usize]).fold(t1[i], Ord::max))
                .collect();
            state = (0..n)
                .map(|i| match state[i] {
                    1 if t2[i].2 == i => 2,
                    1 if t2[i].0 == 2 => 0,
                    s => s,
                })
                .collect();
        }
        let roots: Vec<u32> = (0..n as u32).filter(|&i| state[i as usize] == 2).collect();
        let mut p1 = vec![NOT_AGGREGATED; n];
        for (k, &r) in roots.iter().enumerate() {
            p1[r as usize] = k as u32;
        }
        let rank = p1.clone();
        for i in 0..n {
            if p1[i] == NOT_AGGREGATED {
                if let Some(&j) = g[i]
                    .iter()
                    .filter(|&&j| state[j as usize] == 2)
                    .max_by_key(|&&j| (w(j as usize), j))
                {
                    p1[i] = rank[j as usize];
                }
            }
        }
        let mut agg = p1.clone();
        for i in 0..n {
            if agg[i] == NOT_AGGREGATED {
                if let Some(&j) = g[i]
                    .iter()
                    .filter(|&&j| p1[j as usize] != NOT_AGGREGATED)
                    .max_by_key(|&&j| (w(j as usize), j))
                {
                    agg[i] = p1[j as usize];
                }
            }
        }
        Aggregation { agg, roots }
    }

    #[test]
    fn strength_drops_weak_entries() {
        // Anisotropic 1-D-ish: strong −1 couplings and weak −0.001 ones.
        let t = vec![
            (0, 0, 2.0),
            (0, 1, -1.0),
            (0, 2, -0.001),
            (1, 0, -1.0),
            (1, 1, 2.0),
            (2, 0, -0.001),
            (2, 2, 2.0),
        ];
        let a = CsrMatrix::<f64>::from_triplets(3, 3, &t).unwrap();
        let s = strength_symmetric(&a, 0.25).unwrap();
        assert_eq!(s.nnz(), 2);
        assert_eq!(s.col_idx(), &[1, 0]);
        let s0 = strength_symmetric(&a, 0.0).unwrap();
        assert_eq!(s0.nnz(), 4);
        assert!(strength_symmetric(&a, 1.5).is_err());
        let rect = CsrMatrix::<f64>::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
        assert!(strength_symmetric(&rect, 0.0)
            .unwrap_err()
            .to_string()
            .contains("2×3"));
    }

    #[test]
    fn two_pass_builders_match_the_definitions() {
        for (n, per_row, seed) in [(0, 3, 1), (1, 2, 2), (37, 4, 3), (5000, 6, 4), (9000, 2, 5)] {
            let mut a = messy(n, per_row, seed);
            // Huge diagonals: d_i·d_j overflows, and 0·sqrt(∞) is NaN (no entry is strong).
            let (rp, cj) = (a.row_ptr().to_vec(), a.col_idx().to_vec());
            for i in (0..n).step_by(7) {
                let r = rp[i] as usize..rp[i + 1] as usize;
                for (c, x) in cj[r.clone()].iter().zip(&mut a.values_mut()[r]) {
                    if *c as usize == i {
                        *x = 1e300;
                    }
                }
            }
            for theta in [0.0, 0.1, 0.5] {
                let s = strength_symmetric(&a, theta).unwrap();
                assert_eq!(s, naive_strength(&a, theta), "n {n} theta {theta}");
                assert!(s.has_sorted_indices());
            }
            let (gp, gj) = symmetric_graph(&a).unwrap();
            let want = naive_graph(&a);
            for (i, r) in want.iter().enumerate() {
                assert_eq!(&gj[gp[i] as usize..gp[i + 1] as usize], &r[..], "row {i}");
            }
            assert_eq!(gp[n] as usize, gj.len());
        }
    }

    #[test]
    fn amalgamate_sums_blocks_in_the_documented_order() {
        let mut canonical = messy(300, 6, 10);
        canonical.sort_indices();
        canonical.sum_duplicates();
        let cases = [
            (messy(60, 5, 7), 2),
            (messy(90, 5, 8), 3),
            (messy(40, 5, 9), 1),
            (canonical, 3),
            (generate::elasticity2d::<f64>(12).unwrap(), 2),
        ];
        for (a, block) in cases {
            let n = a.nrows();
            let g = amalgamate(&a, block).unwrap();
            assert!(g.has_sorted_indices());
            // Reference: rows of the block in order, entries in stored order.
            for node in 0..n / block {
                let mut want: Vec<(u32, f64)> = Vec::new();
                let mut cols: Vec<u32> = (node * block..(node + 1) * block)
                    .flat_map(|i| a.row(i).0.iter().map(|&c| c / block as u32))
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                for c in cols {
                    let mut s = 0.0f64;
                    for i in node * block..(node + 1) * block {
                        let (cj, v) = a.row(i);
                        for (&j, &x) in cj.iter().zip(v) {
                            if j / block as u32 == c {
                                s += x * x;
                            }
                        }
                    }
                    want.push((c, s.sqrt()));
                }
                let (gc, gv) = g.row(node);
                let got: Vec<(u32, f64)> = gc.iter().copied().zip(gv.iter().copied()).collect();
                assert_eq!(got, want, "node {node}");
            }
        }
        let a = messy(10, 2, 1);
        assert!(amalgamate(&a, 3)
            .unwrap_err()
            .to_string()
            .contains("block size 3"));
        assert!(amalgamate(&a, 0).is_err());
    }

    /// Checks the MIS-2 properties: roots pairwise at distance > 2, every node with neighbours
    /// aggregated, each aggregate connected to its root within distance 2.
    fn check(a: &CsrMatrix<f64>, g: &Aggregation) {
        let (ptr, idx) = symmetric_graph(a).unwrap();
        let n = a.nrows();
        let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
        let is_root: Vec<bool> = {
            let mut r = vec![false; n];
            g.roots.iter().for_each(|&x| r[x as usize] = true);
            r
        };
        assert!(
            g.roots.windows(2).all(|w| w[0] < w[1]),
            "roots in node order"
        );
        for (k, &r) in g.roots.iter().enumerate() {
            assert_eq!(g.agg[r as usize], k as u32, "root {r} heads aggregate {k}");
            for &j in nb(r as usize) {
                assert!(!is_root[j as usize], "roots {r} and {j} adjacent");
                for &k in nb(j as usize) {
                    assert!(
                        k == r || !is_root[k as usize],
                        "roots {r}, {k} at distance 2"
                    );
                }
            }
        }
        for i in 0..n {
            if nb(i).is_empty() {
                assert_eq!(g.agg[i], NOT_AGGREGATED);
                continue;
            }
            let k = g.agg[i];
            assert_ne!(k, NOT_AGGREGATED, "node {i} with neighbours not aggregated");
            let r = g.roots[k as usize] as usize;
            let near = i == r
                || nb(i).contains(&(r as u32))
                || nb(i).iter().any(|&j| nb(j as usize).contains(&(r as u32)));
            assert!(near, "node {i} is farther than 2 from its root {r}");
        }
    }

    #[test]
    fn mis2_is_valid_deterministic_and_matches_the_definition() {
        let e2 = generate::elasticity2d::<f64>(20).unwrap();
        let cases: Vec<(&str, CsrMatrix<f64>)> = vec![
            ("poisson2d:40", generate::poisson2d(40).unwrap()),
            ("poisson3d:12", generate::poisson3d(12).unwrap()),
            ("poisson3d27:10", generate::poisson3d27(10).unwrap()),
            ("aniso2d:30", generate::aniso2d(30, 1e-3).unwrap()),
            ("elasticity2d:20/2", amalgamate(&e2, 2).unwrap()),
            ("messy:3000", messy(3000, 3, 11)),
        ];
        let pool1 = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let pool3 = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (name, a) in &cases {
            for theta in [0.0, 0.25] {
                let s = strength_symmetric(a, theta).unwrap();
                for seed in [0, 7] {
                    let g = aggregate_mis2(&s, seed);
                    check(&s, &g);
                    assert_eq!(g, naive_mis2(&s, seed), "{name} θ {theta} seed {seed}");
                    assert_eq!(g, pool1.install(|| aggregate_mis2(&s, seed)), "{name}");
                    assert_eq!(g, pool3.install(|| aggregate_mis2(&s, seed)), "{name}");
                }
                if s.nnz() > 0 {
                    let (g0, g7) = (aggregate_mis2(&s, 0), aggregate_mis2(&s, 7));
                    assert!(g0 != g7, "{name} θ {theta}: seeds 0 and 7 agree");
                }
            }
        }
        // Aggregates of a 5-point grid by MIS-2 hold about 5–13 nodes: coarsening ratio check.
        let a = &cases[0].1;
        let g = aggregate_mis2(&strength_symmetric(a, 0.0).unwrap(), 7);
        let ratio = a.nrows() as f64 / g.num_aggregates() as f64;
        assert!((4.0..=14.0).contains(&ratio), "coarsening ratio {ratio}");
    }

    #[test]
    fn mis2_isolated_nodes_and_unsymmetric_patterns() {
        // Node 3 isolated; the pattern 0→1 stored one way only.
        let t = vec![
            (0, 0, 1.0),
            (0, 1, -1.0),
            (1, 1, 1.0),
            (1, 2, -1.0),
            (2, 1, -1.0),
            (2, 2, 1.0),
            (3, 3, 1.0),
        ];
        let a = CsrMatrix::<f64>::from_triplets(4, 4, &t).unwrap();
        let s = strength_symmetric(&a, 0.0).unwrap();
        let g = aggregate_mis2(&s, 1);
        check(&a, &g);
        assert_eq!(g.agg[3], NOT_AGGREGATED);
        assert_eq!(g.num_aggregates(), 1);
        let e = CsrMatrix::<f64>::from_triplets(0, 0, &[]).unwrap();
        assert_eq!(aggregate_mis2(&e, 0).num_aggregates(), 0);
        // The same graph through a non-canonical S (unsorted, repeated, with the diagonal).
        let m = CsrMatrix::try_from_parts(
            4,
            4,
            vec![0, 3, 5, 6, 7],
            vec![1, 0, 1, 2, 2, 1, 3],
            vec![1.0; 7],
        )
        .unwrap();
        assert_eq!(aggregate_mis2(&m, 1), g);
    }
}
