//! Products of block-structured matrices on the GPU: the Galerkin product `R·A·P` of a
//! smoothed-aggregation level whose unknowns come in nodes (3-D elasticity: 3 per node, 6
//! candidates per aggregate), computed on the blocks.
//!
//! # Method (`kernels/sparse/block.cu`)
//!
//! A CSR matrix with `rb × cb` blocks is seen through its **block pattern** (the node graph: one
//! entry per `rb × cb` block holding a stored entry) and its values in the **closed layout**: the
//! CSR arrays of the matrix with every block of the pattern stored whole, padded with zeros. When
//! the matrix already stores its blocks whole (a coarse operator, a prolongator from whole
//! blocks) the closed layout is its own value array; otherwise ([`BlockView::fill`]) a scatter
//! through positions kept from the setup writes the entries into a zeroed copy. Row `a` of block
//! row `I` is then one contiguous run over the row's blocks, which is what the numeric kernel
//! reads.
//!
//! The symbolic product runs the scalar [`GpuSpgemmPlan`] on the block patterns (`rb·cb`
//! fewer indices than the scalar patterns, the products counted by blocks). The numeric kernel
//! gives a warp to some rows of a block row of `C` (as many of its `r` rows as fit the warp's
//! accumulator in shared memory for the longest row; a row longer still accumulates in `C`'s
//! own entries): for each block of `A`'s row in order, the block's rows go to shared memory and
//! the lanes take the columns of `B`'s block row (one column of one block each, `k` coalesced
//! loads), find the block's place in `C`'s row once, and add the column's outputs to the
//! warp's rows. One column index per block instead of one per entry, each `B` value loaded
//! once for the warp's rows of `C`.
//!
//! Each entry of `C` is the sum of its products in `A`'s scalar row order, rounded as
//! `round(acc + round(a·b))`, the scalar SpGEMM's order and rounding: on the pattern of the
//! scalar product the values are equal bit for bit (the padding only adds `±0` products, which
//! leave a sum unchanged), and the entries of blocks that only the padding reaches are `+0`.
//! The result is stored whole by blocks: its pattern is the block closure of the scalar
//! product's, with those entries as explicit zeros.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::{CsrView, DeviceCsr, GpuSpgemmPlan};
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::primitives::gpu as prim;
use crate::primitives::{ScanAlgorithm, ScanOp, ScanSpec};
use crate::spmv::gpu::GpuScalar;

use crate::sparse::block::{blocks_fit, fill_fits, BLOCK_MAX};

/// Warps per thread block of the numeric kernel.
const BLOCK_WARPS: u32 = 4;

/// Threads per block of the pattern kernels.
const THREADS: u32 = 256;

/// `kernels/sparse/block.cu`: block patterns, the closed layout, the block SpGEMM.
pub const BLOCK_SRC: KernelSource = kernel_source!(
    "sparse/block.cu",
    &[&COMMON],
    &[
        ("BLOCK_MAX", BLOCK_MAX as i64),
        ("BLOCK_WARPS", BLOCK_WARPS as i64)
    ]
);

fn grid(g: &Gpu, n: usize) -> u32 {
    (n.div_ceil(THREADS as usize) as u32).clamp(1, g.sm_count() * 32)
}

/// The block pattern of a canonical CSR matrix and where its entries sit in the closed layout.
pub struct BlockView {
    rb: usize,
    cb: usize,
    /// Block rows and columns.
    nbr: usize,
    nbc: usize,
    /// Entries of the scalar matrix.
    nnz: usize,
    bptr: CudaSlice<u32>,
    bcol: CudaSlice<u32>,
    nblocks: usize,
    /// Positions of the scalar entries in the closed layout; `None` when every block is stored
    /// whole (the values are the closed layout).
    pos: Option<CudaSlice<u32>>,
}

impl std::fmt::Debug for BlockView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BlockView({}×{} blocks of {}×{}, {} blocks, {})",
            self.nbr,
            self.nbc,
            self.rb,
            self.cb,
            self.nblocks,
            if self.pos.is_some() {
                "padded"
            } else {
                "closed"
            }
        )
    }
}

impl BlockView {
    /// The block pattern of `m` (canonical: sorted, unique columns per row) with `rb × cb`
    /// blocks; `None` when the blocks do not fit the matrix or its whole blocks would hold too
    /// many entries ([`crate::sparse::block::blocks_fit`], [`crate::sparse::block::fill_fits`]:
    /// the host's rules).
    ///
    /// # Errors
    /// CUDA errors with their context.
    pub fn new<T: GpuScalar>(
        g: &Arc<Gpu>,
        m: CsrView<'_, T>,
        rb: usize,
        cb: usize,
    ) -> Result<Option<Self>> {
        if !blocks_fit(m.nrows, m.ncols, rb, cb) {
            return Ok(None);
        }
        let (nbr, nbc) = (m.nrows / rb, m.ncols / cb);
        let (n32, rb32, cb32, nb32) = (m.nrows as u32, rb as u32, cb as u32, nbr as u32);
        let mut cnt = g.zeros::<u32>(nbr + 1)?;
        let k = g.function(&BLOCK_SRC, "block_pattern_count", &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(m.row_ptr)
            .arg(m.col)
            .arg(&n32)
            .arg(&rb32)
            .arg(&cb32)
            .arg(&nb32)
            .arg(&mut cnt);
        // SAFETY: block_pattern_count(rp, col, nrows, rb, cb, nb, cnt): a canonical CSR of
        // nrows = nb·rb rows; cnt has nb + 1 entries (the last stays 0).
        unsafe { lb.launch(Gpu::cfg(grid(g, nbr), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("block_pattern_count", e))?;
        let mut bptr = g.zeros::<u32>(nbr + 1)?;
        prim::scan(
            g,
            &cnt,
            &mut bptr,
            ScanSpec::exclusive(ScanOp::Plus),
            ScanAlgorithm::default(),
        )?;
        drop(cnt);
        let nblocks = g.download(&bptr.slice(nbr..nbr + 1))?[0] as usize;
        if !fill_fits(nblocks, rb, cb, m.nnz) {
            return Ok(None);
        }
        let closed = nblocks * rb * cb;
        // SAFETY: block_pattern_fill writes every block column (each row's count, at bptr).
        let mut bcol = unsafe { g.alloc::<u32>(nblocks.max(1))? };
        if nblocks > 0 {
            let k = g.function(&BLOCK_SRC, "block_pattern_fill", &[])?;
            let mut lb = g.stream().launch_builder(&k);
            lb.arg(m.row_ptr)
                .arg(m.col)
                .arg(&n32)
                .arg(&rb32)
                .arg(&cb32)
                .arg(&nb32)
                .arg(&bptr)
                .arg(&mut bcol);
            // SAFETY: as block_pattern_count, bcol with bptr[nb] entries.
            unsafe { lb.launch(Gpu::cfg(grid(g, nbr), THREADS, 0)) }
                .map_err(|e| Gpu::launch_error("block_pattern_fill", e))?;
        }
        let pos = if closed == m.nnz {
            None
        } else {
            // SAFETY: block_positions writes one position per entry.
            let mut pos = unsafe { g.alloc::<u32>(m.nnz.max(1))? };
            let k = g.function(&BLOCK_SRC, "block_positions", &[])?;
            let mut lb = g.stream().launch_builder(&k);
            lb.arg(m.row_ptr)
                .arg(m.col)
                .arg(&n32)
                .arg(&rb32)
                .arg(&cb32)
                .arg(&bptr)
                .arg(&bcol)
                .arg(&mut pos);
            // SAFETY: each entry's block is in its block row's pattern (made from these rows).
            unsafe { lb.launch(Gpu::cfg(grid(g, m.nrows), THREADS, 0)) }
                .map_err(|e| Gpu::launch_error("block_positions", e))?;
            Some(pos)
        };
        Ok(Some(BlockView {
            rb,
            cb,
            nbr,
            nbc,
            nnz: m.nnz,
            bptr,
            bcol,
            nblocks,
            pos,
        }))
    }

    /// Entries of the closed layout.
    pub fn closed_nnz(&self) -> usize {
        self.nblocks * self.rb * self.cb
    }

    /// Blocks of the pattern.
    pub fn blocks(&self) -> usize {
        self.nblocks
    }

    /// Whether the matrix stores its blocks whole (no padding).
    pub fn is_closed(&self) -> bool {
        self.pos.is_none()
    }

    /// The pattern as a CSR view over the node graph (`val` is not read by the symbolic phase:
    /// any array of the element type stands in).
    fn pattern<'a, T: GpuScalar>(&'a self, stand_in: &'a CudaSlice<T>) -> CsrView<'a, T> {
        CsrView {
            nrows: self.nbr,
            ncols: self.nbc,
            nnz: self.nblocks,
            row_ptr: &self.bptr,
            col: &self.bcol,
            val: stand_in,
        }
    }

    /// A zeroed array for the closed layout when the matrix is padded (`None` when closed).
    ///
    /// # Errors
    /// Out of device memory.
    pub fn buffer<T: GpuScalar>(&self, g: &Gpu) -> Result<Option<CudaSlice<T>>> {
        match self.pos {
            None => Ok(None),
            Some(_) => Ok(Some(g.zeros::<T>(self.closed_nnz().max(1))?)),
        }
    }

    /// Writes `val` (the matrix's values, `nnz` of them) into the closed layout `buf` (from
    /// [`BlockView::buffer`]: its padding stays zero); nothing when the matrix is closed.
    ///
    /// # Errors
    /// A failed launch.
    pub fn fill<T: GpuScalar>(
        &self,
        g: &Gpu,
        val: &CudaSlice<T>,
        buf: Option<&mut CudaSlice<T>>,
    ) -> Result<()> {
        let (Some(pos), Some(buf)) = (&self.pos, buf) else {
            return Ok(());
        };
        assert_eq!(buf.len(), self.closed_nnz().max(1), "closed layout length");
        let nnz = self.nnz as u32;
        if nnz == 0 {
            return Ok(());
        }
        let k = g.typed_function::<T>(&BLOCK_SRC, "block_scatter", &[])?;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(val).arg(pos).arg(&nnz).arg(buf);
        // SAFETY: block_scatter(val, pos, nnz, out): pos from block_positions, each < the closed
        // layout's length (buf's, checked above).
        unsafe { lb.launch(Gpu::cfg(grid(g, self.nnz), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("block_scatter", e))?;
        Ok(())
    }
}

/// Dynamic shared memory of the numeric kernel's accumulators per thread block (with its
/// static 2 KiB, under the 48 KiB a launch gets without opting in).
const ACC_BYTES: usize = 44 * 1024;

/// Set by [`accumulate_in_global_for_tests`]: every row of the numeric kernel accumulates in
/// `C`'s own entries (the path of rows too long for shared memory).
static GLOBAL_ACC: AtomicBool = AtomicBool::new(false);

/// Makes the block products planned from now on accumulate every row in `C`'s own entries,
/// as rows too long for shared memory do (tests of that path; both give the same bits).
pub fn accumulate_in_global_for_tests(on: bool) {
    GLOBAL_ACC.store(on, Ordering::Relaxed);
}

/// `C = A·B` by blocks: the symbolic product of the block patterns; `C` is closed.
pub struct BlockSpgemm {
    plan: GpuSpgemmPlan,
    r: usize,
    k: usize,
    c: usize,
    a_blocks: usize,
    b_blocks: usize,
    /// Rows of a block row per warp, and the accumulator entries per warp in shared memory.
    rows_per_warp: usize,
    cap: usize,
}

impl std::fmt::Debug for BlockSpgemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BlockSpgemm({}×{}·{}×{} blocks, {:?})",
            self.r, self.k, self.k, self.c, self.plan
        )
    }
}

impl BlockSpgemm {
    /// The symbolic product of `a`'s and `b`'s block patterns.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `a`'s column blocks differ from `b`'s row blocks; as
    /// [`GpuSpgemmPlan::symbolic`].
    pub fn symbolic<T: GpuScalar>(
        g: &Arc<Gpu>,
        a: &BlockView,
        b: &BlockView,
        stand_in: &CudaSlice<T>,
    ) -> Result<Self> {
        if a.cb != b.rb || a.nbc != b.nbr {
            return Err(Error::InvalidInput(format!(
                "block SpGEMM: {a:?} times {b:?}: the inner blocks differ"
            )));
        }
        let plan = GpuSpgemmPlan::symbolic(g, a.pattern(stand_in), b.pattern(stand_in))?;
        let (r, c) = (a.rb, b.cb);
        // A warp accumulates as many rows of a block row as fit its share of shared memory
        // for the longest row of C (rows longer than that accumulate in C's own entries).
        let global = GLOBAL_ACC.load(Ordering::Relaxed);
        let (rows_per_warp, cap) = if global || plan.nnz() == 0 {
            (r, 0)
        } else {
            let longest = crate::spmv::gpu::longest_row(g, plan.row_ptr(), plan.nrows)?;
            let cap = ACC_BYTES / BLOCK_WARPS as usize / std::mem::size_of::<T>();
            ((cap / (longest * c).max(1)).clamp(1, r), cap)
        };
        Ok(BlockSpgemm {
            plan,
            r,
            k: a.cb,
            c,
            a_blocks: a.nblocks,
            b_blocks: b.nblocks,
            rows_per_warp,
            cap,
        })
    }

    /// Entries of `C` (closed).
    pub fn nnz(&self) -> usize {
        self.plan.nnz() * self.r * self.c
    }

    /// `C`'s block pattern as a closed [`BlockView`] (copies of the plan's arrays).
    ///
    /// # Errors
    /// Out of device memory.
    pub fn view(&self, g: &Gpu) -> Result<BlockView> {
        let s = g.stream();
        Ok(BlockView {
            rb: self.r,
            cb: self.c,
            nbr: self.plan.nrows,
            nbc: self.plan.ncols,
            nnz: self.nnz(),
            bptr: s
                .clone_dtod(self.plan.row_ptr())
                .map_err(|e| Error::cuda("copying a block pattern", e))?,
            bcol: s
                .clone_dtod(self.plan.col_idx())
                .map_err(|e| Error::cuda("copying a block pattern", e))?,
            nblocks: self.plan.nnz(),
            pos: None,
        })
    }

    /// `C`'s scalar CSR pattern (closed) with `val` as its values.
    ///
    /// # Errors
    /// Out of device memory; a failed launch.
    pub fn expand<T: GpuScalar>(&self, g: &Gpu, val: CudaSlice<T>) -> Result<DeviceCsr<T>> {
        let (nb, rows) = (self.plan.nrows, self.plan.nrows * self.r);
        // SAFETY: block_expand writes rows + 1 row pointers and every column.
        let mut row_ptr = unsafe { g.alloc::<u32>(rows + 1)? };
        let mut col = g.zeros::<u32>(self.nnz().max(1))?;
        let k = g.function(&BLOCK_SRC, "block_expand", &[])?;
        let (nb32, r32, c32) = (nb as u32, self.r as u32, self.c as u32);
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(self.plan.row_ptr())
            .arg(self.plan.col_idx())
            .arg(&nb32)
            .arg(&r32)
            .arg(&c32)
            .arg(&mut row_ptr)
            .arg(&mut col);
        // SAFETY: block_expand(bptr, bcol, nb, rb, cb, rp, col): rp nb·rb + 1, col bptr[nb]·rb·cb.
        unsafe { lb.launch(Gpu::cfg(grid(g, rows + 1), THREADS, 0)) }
            .map_err(|e| Gpu::launch_error("block_expand", e))?;
        Ok(DeviceCsr {
            nrows: rows,
            ncols: self.plan.ncols * self.c,
            nnz: self.nnz(),
            row_ptr,
            col,
            val,
        })
    }

    /// The numeric product into `out` (`C`'s closed layout, `max(nnz, 1)` entries) from `A`'s
    /// and `B`'s closed layouts. Queues one kernel.
    ///
    /// # Panics
    /// When the views or the arrays do not have the plan's sizes.
    ///
    /// # Errors
    /// A failed launch.
    pub fn numeric_into<T: GpuScalar>(
        &self,
        g: &Gpu,
        a: &BlockView,
        a_val: &CudaSlice<T>,
        b: &BlockView,
        b_val: &CudaSlice<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<()> {
        assert_eq!(
            (a.nblocks, b.nblocks),
            (self.a_blocks, self.b_blocks),
            "block SpGEMM numeric: blocks differ from the plan's"
        );
        assert!(a_val.len() >= a.closed_nnz() && b_val.len() >= b.closed_nnz());
        assert_eq!(
            out.len(),
            self.nnz().max(1),
            "block SpGEMM numeric: C's length"
        );
        let nbr = self.plan.nrows;
        if nbr == 0 || self.plan.nnz() == 0 {
            return Ok(());
        }
        let units = nbr * self.r.div_ceil(self.rows_per_warp);
        let blocks = (units.div_ceil(BLOCK_WARPS as usize) as u32).clamp(1, g.sm_count() * 16);
        let k = g.typed_function::<T>(&BLOCK_SRC, "bspgemm_numeric", &[])?;
        let (n32, r32, k32, c32) = (nbr as u32, self.r as u32, self.k as u32, self.c as u32);
        let (ra32, cap32) = (self.rows_per_warp as u32, self.cap as u32);
        let smem = (BLOCK_WARPS as usize * self.cap * std::mem::size_of::<T>()) as u32;
        let mut lb = g.stream().launch_builder(&k);
        lb.arg(&n32)
            .arg(&r32)
            .arg(&k32)
            .arg(&c32)
            .arg(&ra32)
            .arg(&cap32)
            .arg(&a.bptr)
            .arg(&a.bcol)
            .arg(a_val)
            .arg(&b.bptr)
            .arg(&b.bcol)
            .arg(b_val)
            .arg(self.plan.row_ptr())
            .arg(self.plan.col_idx())
            .arg(out);
        // SAFETY: bspgemm_numeric(nbr, r, k, c, ra, cap, A's pattern and closed values, B's,
        // C's pattern, C's values): the patterns are those the plan was made from (block counts
        // checked), so every product's block is in its row of C; the sides are ≤ BLOCK_MAX
        // (BlockView::new); each array holds its closed layout (checked above); the dynamic
        // shared memory holds cap entries per warp (ACC_BYTES, under the default limit).
        unsafe { lb.launch(Gpu::cfg(blocks, BLOCK_WARPS * 32, smem)) }
            .map_err(|e| Gpu::launch_error("bspgemm_numeric", e))?;
        Ok(())
    }
}

/// The Galerkin product `R·A·P` by blocks (`(R·A)·P`, the order of [`super::galerkin`]) for `A`
/// with `ka × ka` blocks and `P` with `ka × kc` blocks, with what a re-setup on the same
/// patterns reruns ([`BlockGalerkin::numeric_into`]).
pub struct BlockGalerkin<T: GpuScalar> {
    r: BlockView,
    a: BlockView,
    p: BlockView,
    r_buf: Option<CudaSlice<T>>,
    a_buf: Option<CudaSlice<T>>,
    p_buf: Option<CudaSlice<T>>,
    ra: BlockSpgemm,
    ra_view: BlockView,
    ra_val: CudaSlice<T>,
    rap: BlockSpgemm,
}

impl<T: GpuScalar> std::fmt::Debug for BlockGalerkin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BlockGalerkin(R {:?}, A {:?}, P {:?}, R·A {:?}, (R·A)·P {:?})",
            self.r, self.a, self.p, self.ra, self.rap
        )
    }
}

impl<T: GpuScalar> BlockGalerkin<T> {
    /// The block patterns, the symbolic products and the first numeric product: `Some((plan,
    /// R·A·P))`, or `None` when a matrix does not take the block path (the host's rules,
    /// [`crate::sparse::block::blocks_fit`] and [`crate::sparse::block::fill_fits`]): the
    /// caller takes the scalar product then. `R·A·P` equals [`crate::sparse::block_galerkin`]
    /// bit for bit.
    ///
    /// # Errors
    /// As [`GpuSpgemmPlan::symbolic`]; out of device memory.
    pub fn new(
        g: &Arc<Gpu>,
        r: CsrView<'_, T>,
        a: CsrView<'_, T>,
        p: CsrView<'_, T>,
        ka: usize,
        kc: usize,
    ) -> Result<Option<(Self, DeviceCsr<T>)>> {
        let Some(av) = BlockView::new(g, a, ka, ka)? else {
            return Ok(None);
        };
        let Some(pv) = BlockView::new(g, p, ka, kc)? else {
            return Ok(None);
        };
        let Some(rv) = BlockView::new(g, r, kc, ka)? else {
            return Ok(None);
        };
        let ra = BlockSpgemm::symbolic(g, &rv, &av, a.val)?;
        let ra_view = ra.view(g)?;
        let rap = BlockSpgemm::symbolic(g, &ra_view, &pv, a.val)?;
        // SAFETY: bspgemm_numeric writes every entry of C (each block row cleared first).
        let ra_val = unsafe { g.alloc::<T>(ra.nnz().max(1))? };
        let mut me = BlockGalerkin {
            r_buf: rv.buffer(g)?,
            a_buf: av.buffer(g)?,
            p_buf: pv.buffer(g)?,
            r: rv,
            a: av,
            p: pv,
            ra,
            ra_view,
            ra_val,
            rap,
        };
        // SAFETY: as above.
        let mut out = unsafe { g.alloc::<T>(me.rap.nnz().max(1))? };
        me.numeric_into(g, r, a, p, &mut out)?;
        let c = me.rap.expand(g, out)?;
        Ok(Some((me, c)))
    }

    /// Entries of `R·A·P` (closed).
    pub fn nnz(&self) -> usize {
        self.rap.nnz()
    }

    /// The numeric product for new values of `R`, `A`, `P` on the patterns of the setup into
    /// `out` (`R·A·P`'s values, the closed pattern [`BlockGalerkin::new`] returned). Queues
    /// kernels only.
    ///
    /// # Errors
    /// A failed launch.
    pub fn numeric_into(
        &mut self,
        g: &Gpu,
        r: CsrView<'_, T>,
        a: CsrView<'_, T>,
        p: CsrView<'_, T>,
        out: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.r.fill(g, r.val, self.r_buf.as_mut())?;
        self.a.fill(g, a.val, self.a_buf.as_mut())?;
        self.p.fill(g, p.val, self.p_buf.as_mut())?;
        let rv = self.r_buf.as_ref().unwrap_or(r.val);
        let av = self.a_buf.as_ref().unwrap_or(a.val);
        let pv = self.p_buf.as_ref().unwrap_or(p.val);
        self.ra
            .numeric_into(g, &self.r, rv, &self.a, av, &mut self.ra_val)?;
        self.rap
            .numeric_into(g, &self.ra_view, &self.ra_val, &self.p, pv, out)
    }
}

/// `R·A·P` by blocks in one call (see [`BlockGalerkin`]); `None` when the matrices are not
/// blocked by `ka`/`kc`.
///
/// # Errors
/// As [`BlockGalerkin::new`].
pub fn block_galerkin<'r, 'a, 'p, T: GpuScalar>(
    g: &Arc<Gpu>,
    r: impl Into<CsrView<'r, T>>,
    a: impl Into<CsrView<'a, T>>,
    p: impl Into<CsrView<'p, T>>,
    ka: usize,
    kc: usize,
) -> Result<Option<DeviceCsr<T>>> {
    Ok(BlockGalerkin::new(g, r.into(), a.into(), p.into(), ka, kc)?.map(|(_, c)| c))
}
