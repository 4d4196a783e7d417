//! The GPU's block steps: one launch per step for up to [`BLOCK_COLS`] columns.
//!
//! Each block kernel (`block_*` in `kernels/solvers/{cg,bicgstab,gmres,blas1,chebyshev}.cu`)
//! runs on a 2-D grid: `x` is the grid of the one-column launch of the step (the same blocks, the
//! same elements per thread, the same reductions), `y` is the column. A column's blocks read its
//! pointers from a table in the kernel's parameters (`kernels/solvers/cols.cuh`'s `ColTab`,
//! [`ColTab`] here) and run the one-column body on the column's own vectors, slots, partial sums,
//! ticket and history, so every column gets the bits of its one-column step. The table travels
//! by value: nothing is uploaded per launch.
//!
//! The fused small-system steps (`cg_tail`, `bicg_alpha_s`, `bicg_update_p`, `gmres_arnoldi`
//! below [`GpuOps::fused_rows`]) are cooperative launches whose blocks meet at grid barriers; in
//! their block form each column meets at its own barrier word, and a launch holds as many columns
//! as the device keeps resident at once (the occupancy of the block kernel times the SM count,
//! over the one-column grid; measured when the backend is created). A device where not even one
//! column fits runs the separate block kernels (the same arithmetic: the fused kernels equal the
//! separate ones bit for bit).

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
    PushKernelArg, SyncOnDrop,
};

use super::{
    BlockKernels, GpuKrylov, GpuOps, GpuScalars, BLOCK_COLS, BLOCK_PTRS, FUSE_IDENTITY,
    FUSE_JACOBI, FUSE_SEPARATE, THREADS,
};
use crate::backend::recur::NSLOTS;
use crate::backend::steps::block::defaults;
use crate::backend::{
    BicgColumn, BlockKrylovOps, BlockOps, CgColumn, GmresColumn, KrylovOps, PolyColumn, Pre,
    VectorOps,
};
use crate::error::Result;
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Elem;

/// The kernels' `ColTab`: per column [`BLOCK_PTRS`] device pointers, the iteration argument and
/// one more word (3,584 bytes, under the 4 KiB parameter limit).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ColTab {
    p: [[u64; BLOCK_PTRS]; BLOCK_COLS],
    it: [u32; BLOCK_COLS],
    aux: [u32; BLOCK_COLS],
}

// SAFETY: plain old data with the layout of the kernels' `ColTab` (u64 and u32 arrays, C order,
// no padding), passed by value.
unsafe impl DeviceRepr for ColTab {}

/// A table being filled for one launch, with the borrow guards of its pointers (dropped after
/// the launch is queued, as cudarc asks).
pub(crate) struct Table<'a> {
    pub(crate) tab: ColTab,
    guards: Vec<SyncOnDrop<'a>>,
    stream: &'a CudaStream,
}

impl<'a> Table<'a> {
    pub(crate) fn new(stream: &'a CudaStream) -> Self {
        Table {
            tab: ColTab {
                p: [[0; BLOCK_PTRS]; BLOCK_COLS],
                it: [0; BLOCK_COLS],
                aux: [0; BLOCK_COLS],
            },
            guards: Vec::new(),
            stream,
        }
    }
    /// Column `c`'s pointer `k` to a buffer the kernel reads.
    pub(crate) fn get<D>(&mut self, c: usize, k: usize, v: &'a CudaSlice<D>) {
        let (p, g) = v.device_ptr(self.stream);
        self.tab.p[c][k] = p;
        self.guards.push(g);
    }
    /// Column `c`'s pointer `k` to a buffer the kernel writes.
    pub(crate) fn put<D>(&mut self, c: usize, k: usize, v: &'a mut CudaSlice<D>) {
        let (p, g) = v.device_ptr_mut(self.stream);
        self.tab.p[c][k] = p;
        self.guards.push(g);
    }
}

fn n32(n: usize) -> u32 {
    u32::try_from(n).expect("solver vectors are limited to u32::MAX elements")
}

fn cfg(gx: u32, cols: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (gx.max(1), cols as u32, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The kernels' mode code and shared `D⁻¹` of `pre`.
fn mode_of<'a, V>(pre: Pre<'a, V>) -> (u32, Option<&'a V>) {
    match pre {
        Pre::Identity => (FUSE_IDENTITY, None),
        Pre::Jacobi(d) => (FUSE_JACOBI, Some(d)),
        Pre::Separate => (FUSE_SEPARATE, None),
    }
}

/// A kernel argument after a vector step's table and `n`.
enum Extra<D> {
    U32(u32),
    /// A device pointer (0: null).
    Ptr(u64),
    Val(D),
}

/// The columns of a CG block step on the GPU.
type CgCols<'a, D> = [CgColumn<'a, CudaSlice<D>, GpuScalars<D>>];
/// The columns of a BiCGSTAB block step on the GPU.
type BicgCols<'a, D> = [BicgColumn<'a, CudaSlice<D>, GpuScalars<D>>];

/// Which kernel a block step launches, and how.
#[derive(Clone, Copy)]
enum Launch<'k> {
    /// A plain launch of one of the separate block kernels.
    Plain(&'k CudaFunction),
    /// A cooperative launch of a fused block kernel, with the blocks the device keeps resident.
    Fused(&'k CudaFunction, u32),
}

/// The trailing arguments of a block launch after the table.
#[derive(Clone, Copy)]
enum Tail<'v, D> {
    /// `u32 n`.
    N,
    /// `u32 n, u32 mode, const T* dinv`.
    Mode(u32, Option<&'v CudaSlice<D>>),
    /// `u32 n, u32 m` (GMRES's restart length).
    M(u32),
}

impl<T: Elem> GpuOps<T>
where
    T::Dev: KernelType,
{
    fn bk(&self) -> &BlockKernels {
        &self.blk
    }

    /// Columns per launch of `how` on a one-column grid of `gx` blocks.
    fn per_launch(&self, how: Launch<'_>, gx: u32) -> usize {
        match how {
            Launch::Plain(_) => BLOCK_COLS,
            Launch::Fused(_, resident) => ((resident / gx.max(1)) as usize).clamp(1, BLOCK_COLS),
        }
    }

    /// Queues one launch of `how` over the first `cols` rows of `tab` (each row one column),
    /// `tail` after the table in the argument list, `gx` the one-column grid.
    #[allow(clippy::too_many_arguments)]
    fn launch_table(
        &self,
        name: &'static str,
        how: Launch<'_>,
        gx: u32,
        n: usize,
        cols: usize,
        tab: &ColTab,
        tail: Tail<'_, T::Dev>,
    ) -> Result<()> {
        let stream = self.gpu().stream();
        let n = n32(n);
        let f = match how {
            Launch::Plain(f) | Launch::Fused(f, _) => f,
        };
        let mut l = stream.launch_builder(f);
        l.arg(tab).arg(&n);
        let mode_args;
        match tail {
            Tail::N => {}
            Tail::Mode(mode, dinv) => {
                mode_args = (mode, dinv.map_or(0u64, |d| d.device_ptr(stream).0));
                l.arg(&mode_args.0).arg(&mode_args.1);
            }
            Tail::M(m) => {
                mode_args = (m, 0);
                l.arg(&mode_args.0);
            }
        }
        // SAFETY: every block kernel takes (ColTab tab, u32 n[, u32 mode, const T* dinv]) or,
        // block_gmres_arnoldi, (ColTab tab, u32 n, u32 m), and reads rows blockIdx.y < cols of
        // the table, which the caller filled with the pointers and layout listed beside the
        // kernel (every vector of the length the one-column step asserts, checked by the
        // caller, and alive while the caller's table borrows it); dinv has n elements or is
        // null where the mode does not read it. The grid's x is the one-column grid that the
        // columns' partial sums were sized for. Fused: cooperative, at most `per_launch` columns
        // of gx blocks (what the device keeps resident: occupancy × SMs), and the driver refuses
        // a grid that is not resident at once.
        let r = unsafe {
            match how {
                Launch::Plain(_) => l.launch(cfg(gx, cols)),
                Launch::Fused(..) if self.is_cooperative() => l.launch_cooperative(cfg(gx, cols)),
                Launch::Fused(..) => l.launch(cfg(gx, cols)),
            }
        };
        r.map(|_| ()).map_err(|e| Gpu::launch_error(name, e))
    }
}

/// Panics unless every vector of a column has the length `n` of the first one.
fn check_lens(step: &str, n: usize, lens: &[usize]) {
    for &l in lens {
        assert_eq!(l, n, "{step}: a column's vectors have lengths {n} and {l}");
    }
}

impl<T: Elem> GpuOps<T>
where
    T::Dev: KernelType,
{
    /// The CG block kernels over the columns: pointer layout of `cg.cu`'s block entries.
    fn cg_block(
        &self,
        name: &'static str,
        how: Launch<'_>,
        cols: &mut CgCols<'_, T::Dev>,
        tail: Tail<'_, T::Dev>,
    ) -> Result<()> {
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let n = first.x.len();
        let gx = first.sc.grid_for(self, n);
        if let Tail::Mode(_, Some(d)) = tail {
            check_lens(name, n, &[d.len()]);
        }
        for c in cols.iter() {
            let mut lens = vec![c.p.len(), c.q.len(), c.r.len()];
            lens.extend(c.z.as_ref().map(|z| z.len()));
            check_lens(name, n, &lens);
        }
        let stream = self.gpu().stream();
        for chunk in cols.chunks_mut(self.per_launch(how, gx)) {
            let ncols = chunk.len();
            let mut t = Table::new(stream);
            for (c, col) in chunk.iter_mut().enumerate() {
                t.tab.it[c] = self.iter_arg(col.sc, col.it)?;
                t.put(c, 0, &mut *col.x);
                t.put(c, 1, &mut *col.p);
                t.get(c, 2, col.q);
                t.put(c, 3, &mut *col.r);
                if let Some(z) = col.z.as_deref_mut() {
                    t.put(c, 4, z);
                }
                let sc = &mut *col.sc;
                t.put(c, 5, &mut sc.slots);
                t.put(c, 6, &mut sc.partials);
                t.put(c, 7, &mut sc.ticket);
                t.put(c, 8, &mut sc.hist);
            }
            self.launch_table(name, how, gx, n, ncols, &t.tab, tail)?;
        }
        Ok(())
    }

    /// The BiCGSTAB block kernels over the columns: pointer layout of `bicgstab.cu`'s block
    /// entries.
    fn bicg_block(
        &self,
        name: &'static str,
        how: Launch<'_>,
        cols: &mut BicgCols<'_, T::Dev>,
        tail: Tail<'_, T::Dev>,
    ) -> Result<()> {
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let n = first.x.len();
        let gx = first.sc.grid_for(self, n);
        if let Tail::Mode(_, Some(d)) = tail {
            check_lens(name, n, &[d.len()]);
        }
        for c in cols.iter() {
            let mut lens = vec![
                c.r.len(),
                c.rhat.len(),
                c.p.len(),
                c.v.len(),
                c.s.len(),
                c.t.len(),
            ];
            if let Some((ph, sh)) = &c.pre {
                lens.extend([ph.len(), sh.len()]);
            }
            check_lens(name, n, &lens);
        }
        let stream = self.gpu().stream();
        for chunk in cols.chunks_mut(self.per_launch(how, gx)) {
            let ncols = chunk.len();
            let mut t = Table::new(stream);
            for (c, col) in chunk.iter_mut().enumerate() {
                t.tab.it[c] = self.iter_arg(col.sc, col.it)?;
                t.put(c, 0, &mut *col.x);
                t.put(c, 1, &mut *col.r);
                t.get(c, 2, col.rhat);
                t.put(c, 3, &mut *col.p);
                t.get(c, 4, col.v);
                t.put(c, 5, &mut *col.s);
                t.get(c, 6, col.t);
                if let Some((ph, sh)) = col.pre.as_mut() {
                    t.put(c, 7, &mut **ph);
                    t.put(c, 8, &mut **sh);
                }
                let sc = &mut *col.sc;
                t.put(c, 9, &mut sc.slots);
                t.put(c, 10, &mut sc.partials);
                t.put(c, 11, &mut sc.ticket);
                t.put(c, 12, &mut sc.hist);
            }
            self.launch_table(name, how, gx, n, ncols, &t.tab, tail)?;
        }
        Ok(())
    }

    /// The kernels of a vector step over columns of two vectors (`block_axpy`, `block_scale`,
    /// `block_copy`) or four (`block_poly_step`): pointers in the order given, then `extra`.
    fn vectors_block<'v>(
        &self,
        name: &'static str,
        f: &CudaFunction,
        reads: &[&'v CudaSlice<T::Dev>],
        writes: &mut [Vec<&'v mut CudaSlice<T::Dev>>],
        extra: &[Extra<T::Dev>],
    ) -> Result<()> {
        let ncols = reads.len();
        if ncols == 0 {
            return Ok(());
        }
        let n = reads[0].len();
        for (r, w) in reads.iter().zip(writes.iter()) {
            let mut lens = vec![r.len()];
            lens.extend(w.iter().map(|v| v.len()));
            check_lens(name, n, &lens);
        }
        let gx = self.grid(n);
        let stream = self.gpu().stream();
        let n32v = n32(n);
        for (rc, wc) in reads.chunks(BLOCK_COLS).zip(writes.chunks_mut(BLOCK_COLS)) {
            let mut t = Table::new(stream);
            for (c, (r, w)) in rc.iter().zip(wc.iter_mut()).enumerate() {
                t.get(c, 0, r);
                for (k, v) in w.iter_mut().enumerate() {
                    t.put(c, 1 + k, &mut **v);
                }
            }
            let mut l = stream.launch_builder(f);
            l.arg(&t.tab).arg(&n32v);
            for e in extra {
                match e {
                    Extra::U32(v) => l.arg(v),
                    Extra::Ptr(v) => l.arg(v),
                    Extra::Val(v) => l.arg(v),
                };
            }
            // SAFETY: block_axpy (ColTab, u32 n, T alpha), block_scale (ColTab, u32 n,
            // const T* d), block_copy (ColTab, u32 n), block_poly_step (ColTab, u32 n,
            // const T* dinv, u32 first, T c1, T c2): row c < rc.len() of the table holds the
            // column's read vector (pointer 0) and written vectors (1, 2, 3), all of n elements
            // (checked), as does d / dinv (checked by the caller) or null.
            unsafe { l.launch(cfg(gx, rc.len())) }
                .map(|_| ())
                .map_err(|e| Gpu::launch_error(name, e))?;
            drop(t);
        }
        Ok(())
    }
}

impl<T: Elem> BlockOps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    /// One launch copies every column's slots into one buffer, one download reads them.
    fn read_slots_block(&self, scs: &[&GpuScalars<T::Dev>]) -> Result<Vec<[T; NSLOTS]>> {
        if !self.block_steps() {
            return defaults::read_slots_block(self, scs);
        }
        if scs.len() <= 1 {
            return scs.iter().map(|sc| self.read_slots(sc)).collect();
        }
        let gpu = self.gpu();
        let mut out = gpu.zeros::<T::Dev>(scs.len() * NSLOTS)?;
        let stream = gpu.stream();
        for (ci, chunk) in scs.chunks(BLOCK_COLS).enumerate() {
            let mut t = Table::new(stream);
            for (c, sc) in chunk.iter().enumerate() {
                t.get(c, 0, &sc.slots);
            }
            let first = n32(ci * BLOCK_COLS);
            let mut l = stream.launch_builder(&self.bk().read_slots);
            l.arg(&t.tab).arg(&mut out).arg(&first);
            // SAFETY: block_read_slots(ColTab tab, T* out, u32 first): row c < chunk.len() holds
            // a column's slots (NSLOTS entries); out has scs.len() · NSLOTS entries and the
            // launch writes entries (first + c) · NSLOTS + t, t < NSLOTS.
            unsafe {
                l.launch(LaunchConfig {
                    grid_dim: (1, chunk.len() as u32, 1),
                    block_dim: (NSLOTS.next_multiple_of(32) as u32, 1, 1),
                    shared_mem_bytes: 0,
                })
            }
            .map_err(|e| Gpu::launch_error("block_read_slots", e))?;
            drop(t);
        }
        let host = T::from_dev(&gpu.download(&out)?).to_vec();
        Ok(host
            .chunks_exact(NSLOTS)
            .map(|c| {
                let mut s = [T::zero(); NSLOTS];
                s.copy_from_slice(c);
                s
            })
            .collect())
    }

    fn cg_tail_block(
        &self,
        cols: &mut CgCols<'_, T::Dev>,
        pre: Pre<'_, CudaSlice<T::Dev>>,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::cg_tail_block(self, cols, pre);
        }
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let (mode, dinv) = mode_of(pre);
        assert!(
            mode != FUSE_SEPARATE,
            "cg_tail_block: a separate preconditioner runs between the steps"
        );
        let n = first.x.len();
        if let (Some(grid), Some(fk)) = (self.fused_grid(n), &self.bk().fused) {
            if fk.cg.1 >= grid {
                let how = Launch::Fused(&fk.cg.0, fk.cg.1);
                return self.cg_block("block_cg_fused", how, cols, Tail::Mode(mode, dinv));
            }
        }
        let k = self.bk();
        self.cg_block("block_cg_alpha", Launch::Plain(&k.cg_alpha), cols, Tail::N)?;
        self.cg_block(
            "block_cg_update_r",
            Launch::Plain(&k.cg_update_r),
            cols,
            Tail::Mode(mode, dinv),
        )?;
        self.cg_block(
            "block_cg_update_xp",
            Launch::Plain(&k.cg_update_xp),
            cols,
            Tail::N,
        )
    }

    fn cg_update_r_block(&self, cols: &mut CgCols<'_, T::Dev>) -> Result<()> {
        if !self.block_steps() {
            return defaults::cg_update_r_block(self, cols);
        }
        let k = self.bk();
        self.cg_block("block_cg_alpha", Launch::Plain(&k.cg_alpha), cols, Tail::N)?;
        // A separate preconditioner: the kernel neither reads nor writes z here.
        let mut zs: Vec<_> = cols.iter_mut().map(|c| c.z.take()).collect();
        let r = self.cg_block(
            "block_cg_update_r",
            Launch::Plain(&k.cg_update_r),
            cols,
            Tail::Mode(FUSE_SEPARATE, None),
        );
        for (c, z) in cols.iter_mut().zip(zs.iter_mut()) {
            c.z = z.take();
        }
        r
    }

    fn cg_update_xp_block(&self, cols: &mut CgCols<'_, T::Dev>) -> Result<()> {
        if !self.block_steps() {
            return defaults::cg_update_xp_block(self, cols);
        }
        assert!(
            cols.iter().all(|c| c.z.is_some()),
            "a preconditioned CG column has z"
        );
        let k = self.bk();
        self.cg_block("block_cg_rho", Launch::Plain(&k.cg_rho), cols, Tail::N)?;
        self.cg_block(
            "block_cg_update_xp",
            Launch::Plain(&k.cg_update_xp),
            cols,
            Tail::N,
        )
    }

    fn bicg_p_block(
        &self,
        cols: &mut BicgCols<'_, T::Dev>,
        pre: Pre<'_, CudaSlice<T::Dev>>,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_p_block(self, cols, pre);
        }
        let (mode, dinv) = mode_of(pre);
        let f = &self.bk().bicg_p;
        self.bicg_block(
            "block_bicg_p",
            Launch::Plain(f),
            cols,
            Tail::Mode(mode, dinv),
        )
    }

    fn bicg_alpha_block(&self, cols: &mut BicgCols<'_, T::Dev>) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_alpha_block(self, cols);
        }
        let f = &self.bk().bicg_alpha;
        self.bicg_block("block_bicg_alpha", Launch::Plain(f), cols, Tail::N)
    }

    fn bicg_s_block(
        &self,
        cols: &mut BicgCols<'_, T::Dev>,
        pre: Pre<'_, CudaSlice<T::Dev>>,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_s_block(self, cols, pre);
        }
        let (mode, dinv) = mode_of(pre);
        let f = &self.bk().bicg_s;
        self.bicg_block(
            "block_bicg_s",
            Launch::Plain(f),
            cols,
            Tail::Mode(mode, dinv),
        )
    }

    fn bicg_omega_update_block(&self, cols: &mut BicgCols<'_, T::Dev>) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_omega_update_block(self, cols);
        }
        let k = self.bk();
        self.bicg_block(
            "block_bicg_omega",
            Launch::Plain(&k.bicg_omega),
            cols,
            Tail::N,
        )?;
        self.bicg_block(
            "block_bicg_update",
            Launch::Plain(&k.bicg_update),
            cols,
            Tail::N,
        )
    }

    fn bicg_alpha_s_block(
        &self,
        cols: &mut BicgCols<'_, T::Dev>,
        pre: Pre<'_, CudaSlice<T::Dev>>,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_alpha_s_block(self, cols, pre);
        }
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let n = first.x.len();
        let (mode, dinv) = mode_of(pre);
        if let (Some(grid), Some(fk)) = (self.fused_grid(n), &self.bk().fused) {
            if fk.bicg_alpha_s.1 >= grid {
                let how = Launch::Fused(&fk.bicg_alpha_s.0, fk.bicg_alpha_s.1);
                return self.bicg_block("block_bicg_alpha_s", how, cols, Tail::Mode(mode, dinv));
            }
        }
        self.bicg_alpha_block(cols)?;
        self.bicg_s_block(cols, pre)
    }

    fn bicg_update_p_block(
        &self,
        cols: &mut BicgCols<'_, T::Dev>,
        pre: Pre<'_, CudaSlice<T::Dev>>,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::bicg_update_p_block(self, cols, pre);
        }
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let n = first.x.len();
        let (mode, dinv) = mode_of(pre);
        if let (Some(grid), Some(fk)) = (self.fused_grid(n), &self.bk().fused) {
            if fk.bicg_update_p.1 >= grid {
                let how = Launch::Fused(&fk.bicg_update_p.0, fk.bicg_update_p.1);
                return self.bicg_block("block_bicg_update_p", how, cols, Tail::Mode(mode, dinv));
            }
        }
        self.bicg_omega_update_block(cols)?;
        self.bicg_p_block(cols, pre)
    }

    fn poly_step_block(
        &self,
        cols: &mut [PolyColumn<'_, CudaSlice<T::Dev>>],
        inv_diag: Option<&CudaSlice<T::Dev>>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::poly_step_block(self, cols, inv_diag, first, c1, c2);
        }
        if let (Some(d), Some(c)) = (inv_diag, cols.first()) {
            check_lens("block_poly_step D⁻¹", c.t.len(), &[d.len()]);
        }
        let reads: Vec<&CudaSlice<T::Dev>> = cols.iter().map(|c| c.t).collect();
        let mut writes: Vec<Vec<&mut CudaSlice<T::Dev>>> = cols
            .iter_mut()
            .map(|c| vec![&mut *c.res, &mut *c.d, &mut *c.z])
            .collect();
        let stream = self.gpu().stream();
        let dinv = inv_diag.map_or(0u64, |d| d.device_ptr(stream).0);
        let extra = [
            Extra::Ptr(dinv),
            Extra::U32(u32::from(first)),
            Extra::Val(dev(c1)),
            Extra::Val(dev(c2)),
        ];
        self.vectors_block(
            "block_poly_step",
            &self.bk().poly_step,
            &reads,
            &mut writes,
            &extra,
        )
    }

    fn axpy_block(
        &self,
        alpha: T,
        xs: &[&CudaSlice<T::Dev>],
        ys: &mut [&mut CudaSlice<T::Dev>],
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::axpy_block(self, alpha, xs, ys);
        }
        assert_eq!(xs.len(), ys.len(), "axpy_block: as many outputs as inputs");
        let mut writes: Vec<Vec<&mut CudaSlice<T::Dev>>> =
            ys.iter_mut().map(|y| vec![&mut **y]).collect();
        let extra = [Extra::Val(dev(alpha))];
        self.vectors_block("block_axpy", &self.bk().axpy, xs, &mut writes, &extra)
    }

    fn scale_block(
        &self,
        d: &CudaSlice<T::Dev>,
        rs: &[&CudaSlice<T::Dev>],
        zs: &mut [&mut CudaSlice<T::Dev>],
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::scale_block(self, d, rs, zs);
        }
        assert_eq!(rs.len(), zs.len(), "scale_block: as many outputs as inputs");
        if let Some(r) = rs.first() {
            check_lens("block_scale d", r.len(), &[d.len()]);
        }
        let mut writes: Vec<Vec<&mut CudaSlice<T::Dev>>> =
            zs.iter_mut().map(|z| vec![&mut **z]).collect();
        let extra = [Extra::Ptr(d.device_ptr(self.gpu().stream()).0)];
        self.vectors_block("block_scale", &self.bk().scale, rs, &mut writes, &extra)
    }

    fn copy_block(
        &self,
        srcs: &[&CudaSlice<T::Dev>],
        dsts: &mut [&mut CudaSlice<T::Dev>],
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::copy_block(self, srcs, dsts);
        }
        assert_eq!(
            srcs.len(),
            dsts.len(),
            "copy_block: as many outputs as inputs"
        );
        let mut writes: Vec<Vec<&mut CudaSlice<T::Dev>>> =
            dsts.iter_mut().map(|d| vec![&mut **d]).collect();
        self.vectors_block("block_copy", &self.bk().copy, srcs, &mut writes, &[])
    }
}

impl<T: Elem> BlockKrylovOps<T> for GpuOps<T>
where
    T::Dev: KernelType,
{
    /// One cooperative launch for the columns' fused Arnoldi steps (small systems); column by
    /// column otherwise.
    fn gmres_arnoldi_block(
        &self,
        cols: &mut [GmresColumn<'_, GpuKrylov<T::Dev>, GpuScalars<T::Dev>>],
    ) -> Result<()> {
        if !self.block_steps() {
            return defaults::gmres_arnoldi_block(self, cols);
        }
        let Some(first) = cols.first() else {
            return Ok(());
        };
        let (n, m) = (first.k.v[0].len(), first.k.m);
        let fused = match (self.fused_grid(n), &self.bk().fused) {
            (Some(grid), Some(fk)) if fk.gmres_arnoldi.1 >= grid => {
                Some((grid, Launch::Fused(&fk.gmres_arnoldi.0, fk.gmres_arnoldi.1)))
            }
            _ => None,
        };
        let Some((grid, how)) = fused else {
            for c in cols.iter_mut() {
                self.gmres_arnoldi(c.k, c.j, c.sc, c.it)?;
            }
            return Ok(());
        };
        for c in cols.iter() {
            assert!(
                c.j < c.k.m,
                "Krylov column {} of a restart length {}",
                c.j,
                c.k.m
            );
            assert_eq!(c.k.m, m, "the columns' restart lengths");
            check_lens("block_gmres_arnoldi", n, &[c.k.v[0].len()]);
            assert!(
                2 * (c.j + 1) * grid as usize <= c.k.partials.len(),
                "fused Arnoldi partials"
            );
        }
        let stream = self.gpu().stream();
        for chunk in cols.chunks_mut(self.per_launch(how, grid)) {
            let ncols = chunk.len();
            let mut t = Table::new(stream);
            for (c, col) in chunk.iter_mut().enumerate() {
                t.tab.it[c] = self.iter_arg(col.sc, col.it)?;
                t.tab.aux[c] = n32(col.j);
                let (k, sc) = (&mut *col.k, &mut *col.sc);
                t.get(c, 0, &k.ptrs);
                t.put(c, 1, &mut sc.slots);
                t.put(c, 2, &mut k.small);
                t.put(c, 3, &mut k.partials);
                t.put(c, 4, &mut k.ticket);
                t.put(c, 5, &mut sc.hist);
            }
            let name = "block_gmres_arnoldi";
            self.launch_table(name, how, grid, n, ncols, &t.tab, Tail::M(n32(m)))?;
        }
        Ok(())
    }
}

/// A host value as the kernels take it.
fn dev<T: Elem>(a: T) -> T::Dev {
    T::as_dev(&[a])[0]
}
