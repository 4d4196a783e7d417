//! Smoothed-aggregation AMG across ranks, the couplings between them kept ([`DistAmg`]).
//!
//! # The hierarchy
//!
//! The finest levels are **distributed**: every rank holds its rows of each level's operator, of
//! the prolongator `P` and of the restriction `R = Pᵀ`, each a [`DistPart`] on the backend
//! ([`LocalOps::upload_part`]), so every product exchanges its halo as the solver's does. Level
//! `l → l + 1`:
//!
//! - **aggregation per rank**: the strength graph of the rank's diagonal block and the
//!   single-device MIS-2 aggregation of it (no aggregate crosses a rank boundary), so the
//!   tentative prolongator `T` (the single-device `fit_candidates`) is block-diagonal by rank,
//!   and rank `r` owns the coarse unknowns of its aggregates (the coarse partition);
//! - **prolongator smoothing** `P = (I − ω/ρ·D⁻¹A)·T` on the rank's rows with its halo columns:
//!   one halo exchange brings the rows of `T` of the halo (their aggregates and values), then
//!   the crate's SpGEMM `A·T` and the single-device smoothing; ρ(D⁻¹A) is the single-device
//!   Lanczos estimate with distributed products and all-reduced sums;
//! - **the Galerkin product** `A_c = Pᵀ·A·P`: a second exchange brings the halo rows of `P`;
//!   each rank forms `P_rᵀ·(A_r·P)` with the crate's SpGEMM (its own rows of `P` transposed,
//!   its rows of `A` with halo columns, the rows of `P` those columns need) and sends the rows
//!   that belong to other ranks' aggregates to their owners, who add them to theirs.
//!
//! When a level has at most [`DistAmgParams::gather_rows`] rows (or the single-device stopping
//! rules end the hierarchy there), it is **gathered** to rank 0, which builds the single-device
//! [`Amg`] of it (with the coarse candidates, so that its levels are those one device would
//! build) on its local backend. A cycle sends the restricted residual there, rank 0 runs one
//! cycle of that hierarchy, and scatters the correction back.
//!
//! On one rank every step is the single-device one on the same data, so the hierarchy (level
//! sizes, operators, smoothers) and each application equal [`Amg`]'s; on several ranks the
//! aggregates stop at the rank boundaries, which costs few iterations (`tests/all/dist_sim.rs`).
//!
//! # The cycle
//!
//! A V-cycle: on each distributed level the smoother ([`AmgParams::smoother`], the
//! single-device smoother body on the distributed operator), the residual, `R` (distributed), the
//! next level, `P` (distributed), the smoother again. Every step is a backend call (vector steps
//! and distributed products), so NCCL ranks run it on their GPUs; the gathered levels' vectors
//! travel through [`LocalOps::all_to_all_u64`] by way of the host (a device gather to rank 0
//! would replace it on NCCL).
//!
//! # Where the setup runs
//!
//! The setup runs on the host of each rank (the rank's rows, the single-device host phases,
//! messages through [`LocalOps::all_to_all_u64`]), on the simulated and the NCCL backend alike;
//! the result goes to the backend once. On NCCL ranks the device setup of the single-device AMG
//! (strength, aggregation, `T`, SpGEMM on the GPU) would run the same phases on each rank's
//! device, the halo rows of `T` and `P` travelling as the solver's halo does.
//!
//! # Not distributed
//!
//! Dropping small entries ([`AmgParams::drop_tol`]) and improving the candidates
//! ([`AmgParams::improve_candidates`]) apply to a gathered fine level only: distributed levels
//! keep every entry, and `improve_candidates > 0` is refused. The distributed levels run
//! V-cycles ([`Cycle::W`] is refused).

use std::cell::RefCell;

use super::block::{DistPart, Partition, RowBlock};
use super::local::{agree, LocalOps};
use crate::backend::{LinearOperator, Preconditioner, VectorOps};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::precond::amg::{
    fit_candidates, positions, smooth, smooth_prolongator, smoother_scalings, strength, Cycle,
    LevelOp, LevelSmoother, Operator, Scratch,
};
use crate::precond::spectral::{lanczos_radius, scaled_product};
use crate::precond::{Amg, AmgParams, AmgSummary};
use crate::scalar::Scalar;
use crate::sparse::{aggregate_mis2_ordered, SpgemmPlan};

/// Options of the [`DistAmg`] preconditioner. Fill with struct-update syntax from `Default`.
#[derive(Clone, Copy, Debug)]
pub struct DistAmgParams {
    /// The hierarchy's options, as for one device (see the [module docs](self) for the two that
    /// distributed levels do not use).
    pub amg: AmgParams,
    /// A level of at most this many rows (over every rank) is gathered to rank 0, which builds
    /// the rest of the hierarchy there. Default 50 000: Poisson 3-D 256³ (16.8 M rows) keeps
    /// two distributed levels, and rank 0 receives a level of about 30 000 rows.
    pub gather_rows: usize,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for DistAmgParams {
    fn default() -> Self {
        DistAmgParams {
            amg: AmgParams::default(),
            gather_rows: 50_000,
            non_exhaustive: (),
        }
    }
}

/// What the distributed hierarchy looks like (the same on every rank).
#[derive(Clone, Debug)]
pub struct DistAmgSummary {
    /// Rows of every level over all ranks, finest first: the distributed levels, then those of
    /// the hierarchy gathered on rank 0.
    pub rows: Vec<u64>,
    /// Stored entries of every level's operator over all ranks.
    pub nnz: Vec<u64>,
    /// How many of the levels are distributed (the others run on rank 0).
    pub distributed_levels: usize,
    /// The estimate of ρ(D⁻¹A) of each distributed level.
    pub rho: Vec<f64>,
}

/// A distributed level on the backend.
struct Level<T: Scalar, D: LocalOps<T>> {
    /// The operator (`None` on the finest level: the solver's own).
    a: Option<D::Part>,
    smoother: LevelSmoother<D::Vector>,
    p: D::Part,
    r: D::Part,
}

/// The gathered levels: rank 0's hierarchy, and how the gathered level is split over the ranks.
struct Gathered<T: Scalar, D: LocalOps<T>> {
    starts: Vec<u64>,
    amg: Option<Amg<T, D::Local>>,
}

/// A distributed level's cycle workspace.
struct Work<V> {
    s: Scratch<V>,
    /// The restricted residual and the coarse correction.
    bc: V,
    xc: V,
    /// `P·xc` before it is added.
    t: V,
}

/// Smoothed-aggregation AMG across ranks (see the [module docs](self)): set up collectively by
/// every rank, applied collectively (a V-cycle per application).
pub struct DistAmg<'a, T: Scalar, D: LocalOps<T>, A: ?Sized> {
    fine: &'a A,
    levels: Vec<Level<T, D>>,
    gathered: Gathered<T, D>,
    work: RefCell<Vec<Work<D::Vector>>>,
    /// Host copies of the distributed coarse levels (rows of this rank), for inspection.
    coarse_blocks: Vec<RowBlock<T>>,
    summary: DistAmgSummary,
    params: AmgParams,
}

impl<T: Scalar, D: LocalOps<T>, A: ?Sized> std::fmt::Debug for DistAmg<'_, T, D, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DistAmg({} levels, {} distributed)",
            self.summary.rows.len(),
            self.summary.distributed_levels
        )
    }
}

fn bits<T: Scalar>(v: T) -> u64 {
    v.as_f64().to_bits()
}
fn of_bits<T: Scalar>(w: u64) -> T {
    T::of_f64(f64::from_bits(w))
}
fn short(what: &str) -> Error {
    Error::InvalidInput(format!("distributed AMG: a short message ({what})"))
}

/// `v` summed over the ranks in rank order (the same on every rank).
fn sum_f64<T: Scalar, D: LocalOps<T>>(be: &D, v: f64) -> Result<f64> {
    let got = be.all_to_all_u64(vec![vec![v.to_bits()]; be.dist_size()])?;
    got.iter().try_fold(0.0, |s, w| {
        Ok(s + f64::from_bits(*w.first().ok_or_else(|| short("a sum"))?))
    })
}

/// Every rank's `v`, in rank order.
fn all_gather<T: Scalar, D: LocalOps<T>>(be: &D, v: Vec<u64>) -> Result<Vec<Vec<u64>>> {
    be.all_to_all_u64(vec![v; be.dist_size()])
}

/// The partition of contiguous blocks of `n` rows per rank, from every rank's `n`.
fn partition_of<T: Scalar, D: LocalOps<T>>(be: &D, n: usize) -> Result<Partition> {
    let all = all_gather(be, vec![n as u64])?;
    let mut starts = vec![0u64];
    for c in &all {
        let c = *c.first().ok_or_else(|| short("a row count"))?;
        starts.push(starts.last().expect("non-empty") + c);
    }
    Partition::from_starts(starts)
}

/// For every halo entry of `part`, the words its owner gives for it (`words` of the owned
/// entry): one halo exchange of variable-length records (collective).
fn halo_words<T: Scalar, D: LocalOps<T>>(
    be: &D,
    part: &DistPart<T>,
    words: impl Fn(usize) -> Vec<u64>,
) -> Result<Vec<Vec<u64>>> {
    let mut out = vec![Vec::new(); be.dist_size()];
    for s in &part.send {
        let buf = &mut out[s.peer];
        for &i in &part.send_idx[s.offset..s.offset + s.count] {
            let w = words(i as usize);
            buf.push(w.len() as u64);
            buf.extend_from_slice(&w);
        }
    }
    let got = be.all_to_all_u64(out)?;
    let mut halo = vec![Vec::new(); part.n_halo()];
    for r in &part.recv {
        let src = &got[r.peer];
        let mut k = 0;
        for h in &mut halo[r.offset..r.offset + r.count] {
            let len = *src.get(k).ok_or_else(|| short("a halo record"))? as usize;
            *h = src
                .get(k + 1..k + 1 + len)
                .ok_or_else(|| short("a halo record"))?
                .to_vec();
            k += 1 + len;
        }
    }
    Ok(halo)
}

/// The rank's rows with its halo columns after its own (`n_owned × (n_owned + n_halo)`): the
/// owned block's entries of each row, then the boundary block's.
fn local_rows<T: Scalar>(part: &DistPart<T>) -> Result<CsrMatrix<T>> {
    let (n, nh) = (part.n_owned(), part.n_halo());
    let o = &part.owned;
    let mut bnd = vec![None; n];
    for (k, &row) in part.bnd_rows.iter().enumerate() {
        bnd[row as usize] = Some(part.bnd_ptr[k] as usize..part.bnd_ptr[k + 1] as usize);
    }
    let mut ptr = Vec::with_capacity(n + 1);
    let mut cols = Vec::with_capacity(part.nnz());
    let mut vals = Vec::with_capacity(part.nnz());
    ptr.push(0u32);
    for (i, b) in bnd.iter().enumerate() {
        let (c, v) = o.row(i);
        cols.extend_from_slice(c);
        vals.extend_from_slice(v);
        if let Some(b) = b.clone() {
            cols.extend(part.bnd_cols[b.clone()].iter().map(|&h| (n as u32) + h));
            vals.extend_from_slice(&part.bnd_vals[b]);
        }
        ptr.push(u32::try_from(cols.len()).map_err(|_| {
            Error::InvalidInput("distributed AMG: a rank's part above 2^32 entries".into())
        })?);
    }
    CsrMatrix::try_from_parts(n, n + nh, ptr, cols, vals)
}

/// The rows of `part` with global column indices, sorted within each row.
fn global_rows<T: Scalar>(part: &DistPart<T>) -> Result<RowBlock<T>> {
    let loc = local_rows(part)?;
    let mut row_ptr = vec![0u64];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for i in 0..loc.nrows() {
        let (c, v) = loc.row(i);
        let mut e: Vec<(u64, T)> = c
            .iter()
            .zip(v)
            .map(|(&c, &v)| (part.local_to_global(c as usize), v))
            .collect();
        e.sort_by_key(|x| x.0);
        cols.extend(e.iter().map(|x| x.0));
        vals.extend(e.iter().map(|x| x.1));
        row_ptr.push(cols.len() as u64);
    }
    Ok(RowBlock {
        n_global: part.n_global,
        first_row: part.first_row,
        row_ptr,
        cols,
        vals,
    })
}

/// A matrix of `ncols` columns from its rows of `(column, value)` entries (sorted by column).
fn from_rows<T: Scalar>(rows: &[Vec<(u32, T)>], ncols: usize) -> Result<CsrMatrix<T>> {
    let mut ptr = vec![0u32];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for r in rows {
        cols.extend(r.iter().map(|e| e.0));
        vals.extend(r.iter().map(|e| e.1));
        ptr.push(u32::try_from(cols.len()).map_err(|_| {
            Error::InvalidInput("distributed AMG: a rank's part above 2^32 entries".into())
        })?);
    }
    CsrMatrix::try_from_parts(rows.len(), ncols, ptr, cols, vals)
}

/// The local numbering of coarse columns on a rank: its own aggregates' columns first
/// (`0..n_own`, global `first..first + n_own`), then the others it touches, sorted.
struct CoarseCols {
    first: u64,
    n_own: usize,
    others: Vec<u64>,
}

impl CoarseCols {
    fn new(first: u64, n_own: usize, mut touched: Vec<u64>) -> Self {
        let end = first + n_own as u64;
        touched.retain(|&g| g < first || g >= end);
        touched.sort_unstable();
        touched.dedup();
        CoarseCols {
            first,
            n_own,
            others: touched,
        }
    }
    fn len(&self) -> usize {
        self.n_own + self.others.len()
    }
    fn local(&self, g: u64) -> u32 {
        if g >= self.first && g < self.first + self.n_own as u64 {
            (g - self.first) as u32
        } else {
            let k = self
                .others
                .binary_search(&g)
                .expect("every touched coarse column is numbered");
            (self.n_own + k) as u32
        }
    }
    fn global(&self, l: u32) -> u64 {
        let l = l as usize;
        if l < self.n_own {
            self.first + l as u64
        } else {
            self.others[l - self.n_own]
        }
    }
}

/// Rows `0..n` of `m` as `(column, value)` lists, each column through `col`.
fn mapped_rows<T: Scalar, C>(
    m: &CsrMatrix<T>,
    n: usize,
    col: impl Fn(u32) -> C,
) -> Vec<Vec<(C, T)>> {
    let row = |i| {
        let (c, v) = m.row(i);
        c.iter().map(|&c| col(c)).zip(v.iter().copied()).collect()
    };
    (0..n).map(row).collect()
}

/// Row `i` of `m` as global `(column, value bits)` words, columns through `global`.
fn row_words<T: Scalar>(m: &CsrMatrix<T>, i: usize, global: impl Fn(u32) -> u64) -> Vec<u64> {
    let (c, v) = m.row(i);
    c.iter()
        .zip(v)
        .flat_map(|(&c, &v)| [global(c), bits(v)])
        .collect()
}

/// Rows given as global `(column, value bits)` words, in the numbering `cc`, sorted.
fn rows_of_words<T: Scalar>(words: &[Vec<u64>], cc: &CoarseCols) -> Result<Vec<Vec<(u32, T)>>> {
    words
        .iter()
        .map(|w| {
            if w.len() % 2 != 0 {
                return Err(short("a row"));
            }
            let mut r: Vec<(u32, T)> = w
                .chunks(2)
                .map(|p| (cc.local(p[0]), of_bits(p[1])))
                .collect();
            r.sort_by_key(|e| e.0);
            Ok(r)
        })
        .collect()
}

/// This rank's rows `first..` of a matrix of `n_global` rows, as `(global column, value)`
/// entries, completed by the other ranks' entries of them (`out[p]`: the `(row, column, value
/// bits)` triplets this rank sends to rank `p`; collective) and assembled into a row block:
/// each row sorted by column, entries of one column summed (this rank's first, then the
/// others' in rank order).
fn assemble<T: Scalar, D: LocalOps<T>>(
    be: &D,
    mut rows: Vec<Vec<(u64, T)>>,
    out: Vec<Vec<u64>>,
    first: u64,
    n_global: u64,
) -> Result<RowBlock<T>> {
    for w in be.all_to_all_u64(out)? {
        for e in w.chunks(3) {
            let [g, c, v] = e else {
                return Err(short("a matrix entry"));
            };
            let row = g
                .checked_sub(first)
                .and_then(|i| rows.get_mut(i as usize))
                .ok_or_else(|| short("an entry outside this rank's rows"))?;
            row.push((*c, of_bits(*v)));
        }
    }
    let mut block = RowBlock {
        n_global,
        first_row: first,
        row_ptr: vec![0u64],
        cols: Vec::new(),
        vals: Vec::new(),
    };
    for mut row in rows {
        row.sort_by_key(|e| e.0);
        let start = block.cols.len();
        for (c, v) in row {
            if block.cols.len() > start && block.cols.last() == Some(&c) {
                *block.vals.last_mut().expect("non-empty") += v;
            } else {
                block.cols.push(c);
                block.vals.push(v);
            }
        }
        block.row_ptr.push(block.cols.len() as u64);
    }
    Ok(block)
}

/// The host result of one distributed level's setup.
struct LevelHost<T> {
    inv_diag: Vec<T>,
    inv_l1: Vec<T>,
    rho: f64,
    p: DistPart<T>,
    r: DistPart<T>,
    next: RowBlock<T>,
    next_partition: Partition,
    bc: Vec<Vec<T>>,
}

/// ρ(D⁻¹A) of the level whose rows (with halo columns) are `loc`: the single-device Lanczos
/// estimate with distributed products and sums (collective).
fn distributed_rho<T: Scalar, D: LocalOps<T>>(
    be: &D,
    part: &DistPart<T>,
    loc: &CsrMatrix<T>,
    inv_diag: &[T],
    steps: usize,
) -> Result<f64> {
    let s: Vec<f64> = inv_diag
        .iter()
        .map(|d| d.as_f64().max(0.0).sqrt())
        .collect();
    let halo = |x: &[f64]| -> Result<Vec<f64>> {
        let h = halo_words(be, part, |i| vec![x[i].to_bits()])?;
        h.iter()
            .map(|w| {
                w.first()
                    .map(|&b| f64::from_bits(b))
                    .ok_or_else(|| short("a halo value"))
            })
            .collect()
    };
    let mut s_cols = s.clone();
    s_cols.extend(halo(&s)?);
    let mut x_ext = vec![0.0; s_cols.len()];
    let n = part.n_owned();
    lanczos_radius(
        n,
        part.n_global,
        part.first_row,
        steps,
        |x, y| {
            x_ext[..n].copy_from_slice(x);
            x_ext[n..].copy_from_slice(&halo(x)?);
            scaled_product(loc, &s, &s_cols, &x_ext, y);
            Ok(())
        },
        |v| sum_f64(be, v),
    )
}

/// One distributed level's setup from its part and candidates (collective), or `None` when the
/// aggregation does not coarsen (no aggregate, or as many coarse unknowns as rows, over all
/// ranks).
fn setup_level<T: Scalar, D: LocalOps<T>>(
    be: &D,
    part: &DistPart<T>,
    b: &[Vec<T>],
    block: usize,
    params: &AmgParams,
) -> Result<Option<LevelHost<T>>> {
    let rank = be.dist_rank();
    let n = part.n_owned();
    let k = b.len();
    let ex = |need| be.all_to_all_u64(need);
    // Smoother data, and the aggregation of the rank's diagonal block.
    let local = agree(
        be,
        (|| {
            let loc = local_rows(part)?;
            let (inv_diag, inv_l1) = smoother_scalings(&loc);
            let s = strength(&part.owned, block, params.theta)?;
            let agg = aggregate_mis2_ordered(&s, params.seed, params.window(k)).0;
            Ok((loc, inv_diag, inv_l1, agg))
        })(),
    )?;
    let (loc, inv_diag, inv_l1, agg) = local;
    let rho = distributed_rho(be, part, &loc, &inv_diag, params.spectral_steps)?;
    let fine_partition = partition_of(be, n)?;
    let nc = agg.num_aggregates() * k;
    let coarse_partition = partition_of(be, nc)?;
    if coarse_partition.n() == 0 || coarse_partition.n() >= part.n_global {
        return Ok(None);
    }
    let c0 = coarse_partition.rows(rank).start;
    // The tentative prolongator (block-diagonal by rank) and the halo's rows of it.
    let (t, bc) = fit_candidates(&agg, block, b);
    let t_halo = halo_words(be, part, |i| row_words(&t, i, |c| c0 + c as u64))?;
    let cc1 = CoarseCols::new(
        c0,
        nc,
        t_halo
            .iter()
            .flat_map(|w| w.iter().step_by(2).copied())
            .collect(),
    );
    // P = (I − ω/ρ·D⁻¹A)·T on this rank's rows.
    let p_loc = agree(
        be,
        (|| {
            let mut rows = mapped_rows(&t, n, |c| c);
            rows.extend(rows_of_words(&t_halo, &cc1)?);
            let t_ext = from_rows(&rows, cc1.len())?;
            let at_plan = SpgemmPlan::symbolic(&loc, &t_ext)?;
            let at = at_plan.numeric(&loc, &t_ext);
            let t_pos = positions(&t, at.row_ptr(), at.col_idx())?;
            Ok(smooth_prolongator(
                &inv_diag,
                rho,
                &t,
                at,
                &t_pos,
                params.omega,
            ))
        })(),
    )?;
    // P with global columns: the prolongation's part (fine rows × coarse columns).
    let to_block = |m: &CsrMatrix<T>, cc: &CoarseCols, n_global: u64, first_row: u64| {
        let mut row_ptr = vec![0u64];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for i in 0..m.nrows() {
            let (c, v) = m.row(i);
            cols.extend(c.iter().map(|&c| cc.global(c)));
            vals.extend_from_slice(v);
            row_ptr.push(cols.len() as u64);
        }
        RowBlock {
            n_global,
            first_row,
            row_ptr,
            cols,
            vals,
        }
    };
    let p_block = to_block(&p_loc, &cc1, part.n_global, part.first_row);
    let p_part = DistPart::build_rect(&p_block, &coarse_partition, rank, ex)?;
    // R = Pᵀ: this rank's entries of P in its own aggregates' columns, the others to their
    // owners.
    let mut r_rows: Vec<Vec<(u64, T)>> = vec![Vec::new(); nc];
    let mut out = vec![Vec::new(); be.dist_size()];
    for i in 0..n {
        let (c, v) = p_loc.row(i);
        let gi = part.first_row + i as u64;
        for (&c, &v) in c.iter().zip(v) {
            if (c as usize) < nc {
                r_rows[c as usize].push((gi, v));
            } else {
                let g = cc1.global(c);
                out[coarse_partition.owner(g)].extend_from_slice(&[g, gi, bits(v)]);
            }
        }
    }
    let r_block = assemble(be, r_rows, out, c0, coarse_partition.n())?;
    let r_part = DistPart::build_rect(&r_block, &fine_partition, rank, ex)?;
    // The Galerkin product: P_rᵀ·(A_r·P) with the halo's rows of P.
    let p_halo = halo_words(be, part, |i| row_words(&p_loc, i, |c| cc1.global(c)))?;
    let mut touched: Vec<u64> = cc1.others.clone();
    touched.extend(p_halo.iter().flat_map(|w| w.iter().step_by(2).copied()));
    let cc2 = CoarseCols::new(c0, nc, touched);
    let rap = agree(
        be,
        (|| {
            // cc1 → cc2 keeps the order (both: own columns, then the others sorted).
            let mut rows = mapped_rows(&p_loc, n, |c| cc2.local(cc1.global(c)));
            let p_own = from_rows(&rows, cc2.len())?;
            rows.extend(rows_of_words(&p_halo, &cc2)?);
            let p_ext = from_rows(&rows, cc2.len())?;
            let r_loc = p_own.transpose();
            let ra = SpgemmPlan::symbolic(&r_loc, &loc)?.numeric(&r_loc, &loc);
            Ok(SpgemmPlan::symbolic(&ra, &p_ext)?.numeric(&ra, &p_ext))
        })(),
    )?;
    // This rank's coarse rows: its own contributions, then the other ranks', summed by column.
    let c_rows = mapped_rows(&rap, nc, |c| cc2.global(c));
    let mut out = vec![Vec::new(); be.dist_size()];
    for a in nc..rap.nrows() {
        let g = cc2.global(a as u32);
        let (c, v) = rap.row(a);
        let dst = &mut out[coarse_partition.owner(g)];
        for (&c, &v) in c.iter().zip(v) {
            dst.extend_from_slice(&[g, cc2.global(c), bits(v)]);
        }
    }
    let next = assemble(be, c_rows, out, c0, coarse_partition.n())?;
    Ok(Some(LevelHost {
        inv_diag,
        inv_l1,
        rho,
        p: p_part,
        r: r_part,
        next,
        next_partition: coarse_partition,
        bc,
    }))
}

/// Checks what a rank can check alone: the parameters, the block size against its rows, the
/// candidates' lengths and values, a positive diagonal and finite entries.
fn check_rank<T: Scalar>(
    part: &DistPart<T>,
    candidates: Option<&[Vec<T>]>,
    params: &DistAmgParams,
) -> Result<()> {
    let p = &params.amg;
    p.check()?;
    let bad = |m: String| Err(Error::InvalidInput(format!("distributed AMG: {m}")));
    if p.cycle != Cycle::V {
        return bad("the distributed levels run V-cycles only".into());
    }
    if p.improve_candidates > 0 {
        return bad("improve_candidates is not available across ranks (use 0)".into());
    }
    if part.n_global == 0 {
        return bad("the matrix is empty".into());
    }
    let n = part.n_owned();
    if n % p.block_size != 0 || part.first_row % p.block_size as u64 != 0 {
        return bad(format!(
            "rank {} owns rows {}..{}, which do not start and end on whole blocks of {} \
             unknowns",
            part.rank,
            part.first_row,
            part.first_row + n as u64,
            p.block_size
        ));
    }
    if let Some(c) = candidates {
        if c.is_empty() {
            return bad("at least one near-nullspace candidate is needed".into());
        }
        for (j, v) in c.iter().enumerate() {
            if v.len() != n {
                return bad(format!(
                    "candidate {j} has {} entries on rank {}, which owns {n} rows",
                    v.len(),
                    part.rank
                ));
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return bad(format!(
                    "candidate {j} is not finite at row {}",
                    part.first_row + i as u64
                ));
            }
        }
    }
    let d = part.owned.diagonal();
    if let Some(i) = d.iter().position(|&x| x <= T::zero() || !x.is_finite()) {
        return bad(format!(
            "diagonal entry of row {} is {} (smoothed aggregation needs a positive diagonal: \
             the matrix should be symmetric positive definite)",
            part.first_row + i as u64,
            d[i]
        ));
    }
    if part.owned.has_non_finite() || part.bnd_vals.iter().any(|v| !v.is_finite()) {
        return bad(format!("rank {} has a non-finite entry", part.rank));
    }
    Ok(())
}

/// Sends rank `r`'s `words` to rank 0; rank 0 gets every rank's, in rank order.
fn gather_root<T: Scalar, D: LocalOps<T>>(be: &D, words: Vec<u64>) -> Result<Vec<Vec<u64>>> {
    let mut out = vec![Vec::new(); be.dist_size()];
    out[0] = words;
    be.all_to_all_u64(out)
}

/// The gathered level on rank 0 (collective): its matrix from every rank's rows, its candidates,
/// and the single-device hierarchy of it. `levels_left` is what [`AmgParams::max_levels`]
/// leaves it; `fine` says it is the finest level (which keeps the fine-level options).
fn setup_gathered<T: Scalar, D: LocalOps<T>>(
    be: &D,
    rows: &RowBlock<T>,
    b: &[Vec<T>],
    block: usize,
    levels_left: usize,
    fine: bool,
    params: &AmgParams,
) -> Result<Gathered<T, D>> {
    let n = rows.nrows();
    let mut words = vec![n as u64, b.len() as u64];
    words.extend(rows.row_ptr[1..].iter().copied());
    words.extend(rows.cols.iter().copied());
    words.extend(rows.vals.iter().map(|&v| bits(v)));
    for c in b {
        words.extend(c.iter().map(|&v| bits(v)));
    }
    let got = gather_root(be, words)?;
    let starts = partition_of(be, n)?.starts().to_vec();
    let built = if be.dist_rank() == 0 {
        (|| {
            let total = *starts.last().expect("non-empty") as usize;
            u32::try_from(total).map_err(|_| {
                Error::InvalidInput(format!(
                    "distributed AMG: the gathered level has {total} rows, above one device's \
                     32-bit limit (lower gather_rows)"
                ))
            })?;
            let mut ptr = vec![0u32];
            let (mut cols, mut vals) = (Vec::new(), Vec::new());
            let mut cand: Vec<Vec<T>> = vec![Vec::new(); b.len()];
            for w in &got {
                let m = *w.first().ok_or_else(|| short("a gathered level"))? as usize;
                let body = w.get(2..).ok_or_else(|| short("a gathered level"))?;
                let ptrs = body.get(..m).ok_or_else(|| short("a gathered level"))?;
                let nnz = ptrs.last().copied().unwrap_or(0) as usize;
                let rest = &body[m..];
                let (c, rest) = (rest.get(..nnz), rest.get(nnz..));
                let (c, rest) = (
                    c.ok_or_else(|| short("a gathered level"))?,
                    rest.ok_or_else(|| short("a gathered level"))?,
                );
                let (v, rest) = rest.split_at(nnz.min(rest.len()));
                if v.len() != nnz || rest.len() != m * b.len() {
                    return Err(short("a gathered level"));
                }
                let base = *ptr.last().expect("non-empty");
                ptr.extend(ptrs.iter().map(|&p| base + p as u32));
                cols.extend(c.iter().map(|&c| c as u32));
                vals.extend(v.iter().map(|&x| of_bits::<T>(x)));
                for (j, cj) in cand.iter_mut().enumerate() {
                    cj.extend(rest[j * m..(j + 1) * m].iter().map(|&x| of_bits::<T>(x)));
                }
            }
            let a = CsrMatrix::try_from_parts(total, total, ptr, cols, vals)?;
            let p = AmgParams {
                max_levels: levels_left,
                block_size: block,
                drop_tol: if fine { params.drop_tol } else { 0.0 },
                ..*params
            };
            Amg::with_candidates(be.local(), &a, &cand, &p).map(Some)
        })()
    } else {
        Ok(None)
    };
    let amg = agree(be, built)?;
    Ok(Gathered { starts, amg })
}

impl<'a, T, D, A> DistAmg<'a, T, D, A>
where
    T: Scalar,
    D: LocalOps<T>,
    A: LinearOperator<T, D> + ?Sized,
{
    /// Sets up the hierarchy of the distributed matrix whose operator is `a` and whose part on
    /// this rank is `part` (collective: every rank calls it with its own). `candidates` are the
    /// near-nullspace candidates' entries of this rank's rows (the constant when `None`).
    ///
    /// # Errors
    /// On every rank when any rank fails: a diagonal entry that is not positive or a
    /// non-finite entry (the global row named), bad parameters (see the
    /// [module docs](self) for those refused here), candidates of the wrong length, a gathered
    /// level beyond one device's limits or whose coarse matrix cannot be inverted; backend and
    /// communication failures.
    pub fn new(
        be: &D,
        a: &'a A,
        part: &DistPart<T>,
        candidates: Option<&[Vec<T>]>,
        params: &DistAmgParams,
    ) -> Result<Self> {
        agree(be, check_rank(part, candidates, params))?;
        let p = &params.amg;
        let mut b: Vec<Vec<T>> = match candidates {
            Some(c) => c.to_vec(),
            None => vec![vec![T::one(); part.n_owned()]],
        };
        let mut block = p.block_size;
        let mut levels: Vec<Level<T, D>> = Vec::new();
        let mut hosts: Vec<(u64, u64)> = Vec::new();
        let mut rhos = Vec::new();
        let mut coarse_blocks: Vec<RowBlock<T>> = Vec::new();
        let mut cur: Option<DistPart<T>> = None;
        loop {
            let lp = cur.as_ref().unwrap_or(part);
            let l = levels.len();
            let n_glob = lp.n_global;
            let nnz = sum_f64(be, lp.nnz() as f64)? as u64;
            if n_glob <= params.gather_rows as u64
                || n_glob <= p.coarse_size as u64
                || l + 1 >= p.max_levels
            {
                break;
            }
            let Some(h) = setup_level(be, lp, &b, block, p)? else {
                break;
            };
            let up = (|| {
                Ok((
                    LevelSmoother::from_host(be, &h.inv_diag, &h.inv_l1, h.rho, p)?,
                    be.upload_part(h.p)?,
                    be.upload_part(h.r)?,
                ))
            })();
            let (smoother, pp, rr) = agree(be, up)?;
            let a_l = match cur.take() {
                None => None,
                Some(part) => Some(agree(be, be.upload_part(part))?),
            };
            levels.push(Level {
                a: a_l,
                smoother,
                p: pp,
                r: rr,
            });
            hosts.push((n_glob, nnz));
            rhos.push(h.rho);
            let next = DistPart::build(&h.next, &h.next_partition, be.dist_rank(), |need| {
                be.all_to_all_u64(need)
            })?;
            coarse_blocks.push(h.next);
            cur = Some(next);
            b = h.bc;
            block = b.len();
        }
        // The gathered levels.
        let l = levels.len();
        let rows = match (&cur, coarse_blocks.last()) {
            (Some(_), Some(rb)) => rb.clone(),
            _ => global_rows(part)?,
        };
        let gathered = setup_gathered(be, &rows, &b, block, p.max_levels - l, l == 0, p)?;
        // Rank 0's levels, for every rank's summary.
        let mine = match &gathered.amg {
            Some(amg) => amg
                .summary()
                .levels
                .iter()
                .flat_map(|lv| [lv.rows as u64, lv.nnz as u64])
                .collect(),
            None => Vec::new(),
        };
        let from_root = be
            .all_to_all_u64(vec![mine; be.dist_size()])?
            .swap_remove(0);
        let mut summary = DistAmgSummary {
            rows: hosts.iter().map(|h| h.0).collect(),
            nnz: hosts.iter().map(|h| h.1).collect(),
            distributed_levels: l,
            rho: rhos,
        };
        for w in from_root.chunks(2) {
            summary.rows.push(w[0]);
            summary
                .nnz
                .push(*w.get(1).ok_or_else(|| short("the summary"))?);
        }
        // The cycle's workspace.
        let work = (|| {
            let mut work = Vec::with_capacity(l);
            for lv in &levels {
                let n = lv.r.ncols();
                let nc = lv.r.nrows();
                work.push(Work {
                    s: Scratch::new(be, n)?,
                    bc: be.zeros(nc)?,
                    xc: be.zeros(nc)?,
                    t: be.zeros(n)?,
                });
            }
            Ok(work)
        })();
        let work = agree(be, work)?;
        Ok(DistAmg {
            fine: a,
            levels,
            gathered,
            work: RefCell::new(work),
            coarse_blocks,
            summary,
            params: *p,
        })
    }

    /// The hierarchy's summary (the same on every rank).
    pub fn summary(&self) -> &DistAmgSummary {
        &self.summary
    }

    /// Rank 0's single-device hierarchy of the gathered levels (`None` on the other ranks).
    pub fn gathered(&self) -> Option<&Amg<T, D::Local>> {
        self.gathered.amg.as_ref()
    }

    /// The summary of rank 0's hierarchy (`None` on the other ranks).
    pub fn gathered_summary(&self) -> Option<&AmgSummary> {
        self.gathered.amg.as_ref().map(|a| a.summary())
    }

    /// This rank's rows of every distributed coarse level's operator (global columns), the
    /// level after the finest first; the last is the level gathered to rank 0 when there is a
    /// distributed level.
    pub fn coarse_rows(&self) -> &[RowBlock<T>] {
        &self.coarse_blocks
    }

    /// The cycle from level `l` on: `x ≈ A_l⁻¹·b`, `x`'s contents ignored.
    fn cycle(
        &self,
        be: &D,
        l: usize,
        b: &D::Vector,
        x: &mut D::Vector,
        work: &mut [Work<D::Vector>],
    ) -> Result<()> {
        let Some(lv) = self.levels.get(l) else {
            return self.coarse_solve(be, b, x);
        };
        let (w, rest) = work.split_first_mut().expect("work for every level");
        match &lv.a {
            None => self.level(be, &Operator(self.fine), lv, l, b, x, w, rest),
            Some(a) => self.level(be, &Operator(a), lv, l, b, x, w, rest),
        }
    }

    /// One distributed level of the V-cycle (as the single-device cycle's level).
    #[allow(clippy::too_many_arguments)]
    fn level<O: LevelOp<T, D>>(
        &self,
        be: &D,
        op: &O,
        lv: &Level<T, D>,
        l: usize,
        b: &D::Vector,
        x: &mut D::Vector,
        w: &mut Work<D::Vector>,
        rest: &mut [Work<D::Vector>],
    ) -> Result<()> {
        let sweeps = lv.smoother.sweeps;
        for s in 0..sweeps {
            smooth(be, op, &lv.smoother, b, x, s == 0, &mut w.s)?;
        }
        if sweeps == 0 {
            be.copy(b, &mut w.s.r)?;
        } else {
            op.residual(be, b, x, &mut w.s.r)?;
        }
        lv.r.apply(be, &w.s.r, &mut w.bc)?;
        self.cycle(be, l + 1, &w.bc, &mut w.xc, rest)?;
        if sweeps == 0 {
            lv.p.apply(be, &w.xc, x)?;
        } else {
            lv.p.apply(be, &w.xc, &mut w.t)?;
            be.axpy(T::one(), &w.t, x)?;
        }
        for _ in 0..sweeps {
            smooth(be, op, &lv.smoother, b, x, false, &mut w.s)?;
        }
        Ok(())
    }

    /// The gathered levels: `b` to rank 0, one cycle of its hierarchy there, the correction
    /// back (collective).
    fn coarse_solve(&self, be: &D, b: &D::Vector, x: &mut D::Vector) -> Result<()> {
        let mine: Vec<u64> = be.download(b)?.into_iter().map(bits).collect();
        let got = gather_root(be, mine)?;
        let mut out = vec![Vec::new(); be.dist_size()];
        if let Some(amg) = &self.gathered.amg {
            let bc: Vec<T> = got.iter().flatten().map(|&w| of_bits(w)).collect();
            let local = be.local();
            let bd = local.upload(&bc)?;
            let mut xd = local.zeros(bc.len())?;
            amg.apply(local, &bd, &mut xd)?;
            let xs = local.download(&xd)?;
            let s = &self.gathered.starts;
            for (r, o) in out.iter_mut().enumerate() {
                *o = xs[s[r] as usize..s[r + 1] as usize]
                    .iter()
                    .map(|&v| bits(v))
                    .collect();
            }
        }
        let got = be.all_to_all_u64(out)?;
        let xs: Vec<T> = got[0].iter().map(|&w| of_bits(w)).collect();
        *x = be.upload(&xs)?;
        Ok(())
    }
}

impl<T, D, A> Preconditioner<T, D> for DistAmg<'_, T, D, A>
where
    T: Scalar,
    D: LocalOps<T>,
    A: LinearOperator<T, D> + ?Sized,
{
    /// One V-cycle in fine-level products, as for [`Amg`]: from the operator complexity of the
    /// whole hierarchy (the summary's, the same on every rank).
    fn cost_in_products(&self) -> f64 {
        let nnz = &self.summary.nnz;
        let oc = nnz.iter().map(|&z| z as f64).sum::<f64>() / (nnz[0].max(1) as f64);
        self.params.cycle_cost(oc)
    }
    /// `z ← M⁻¹r`: one V-cycle from `z = 0` (collective).
    fn apply(&self, be: &D, r: &D::Vector, z: &mut D::Vector) -> Result<()> {
        let mut work = self.work.borrow_mut();
        self.cycle(be, 0, r, z, &mut work)
    }
}
