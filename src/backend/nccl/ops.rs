//! The solver backend of one NCCL rank: the single-GPU kernels for vector-only steps, and for
//! each reduction step a local kernel, one all-reduce of its sums, and a one-thread recurrence
//! kernel.

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use cudarc::nccl::NcclType;

use super::comm::Rank;
use super::{launch_err, n32};
use crate::backend::gpu::{
    GpuOps, GpuScalar, GpuScalars, FUSE_IDENTITY, FUSE_JACOBI, FUSE_SEPARATE, THREADS,
};
use crate::backend::recur::{Slot, NSLOTS};
use crate::backend::{same_lens, BicgSteps, CgSteps, ChebyshevSteps, Fuse, VectorOps};
use crate::error::Result;
use crate::gpu::kernels::{kernel_source, KernelSource};
use crate::gpu::Gpu;

/// The distributed kernels, on the solvers' slots, reductions and recurrences
/// (`solvers/reduce.cuh`, `solvers/recur.cuh`), with the step kinds of [`Kind`].
pub const DIST_KERNELS: KernelSource = kernel_source!(
    "dist/dist.cu",
    &[
        &crate::gpu::kernels::COMMON,
        &crate::backend::gpu::REDUCE,
        &crate::backend::gpu::RECUR,
        &crate::backend::gpu::STEPS
    ],
    &[
        ("DIST_START", Kind::Start as i64),
        ("DIST_CG_ALPHA", Kind::CgAlpha as i64),
        ("DIST_CG_UPDATE_R", Kind::CgUpdateR as i64),
        ("DIST_CG_RHO", Kind::CgRho as i64),
        ("DIST_BICG_ALPHA", Kind::BicgAlpha as i64),
        ("DIST_BICG_OMEGA", Kind::BicgOmega as i64),
        ("DIST_BICG_UPDATE", Kind::BicgUpdate as i64),
        ("DIST_DOT", Kind::Dot as i64)
    ]
);

/// An element type of the distributed solvers: `f32` or `f64`.
pub trait DistScalar: GpuScalar + NcclType {}
impl<T: GpuScalar + NcclType> DistScalar for T {}

/// The distributed solver backend of one rank: vectors hold the owned entries on the rank's
/// GPU; vector-only steps are the single-GPU kernels ([`GpuOps`]); each reduction step is a
/// local kernel, one all-reduce of its sums, and a one-thread recurrence kernel.
pub struct NcclOps<T: DistScalar> {
    pub(crate) inner: GpuOps<T>,
    pub(crate) rank: Rank,
    k: DistKernels,
}

struct DistKernels {
    dot2: CudaFunction,
    cg_update_r: CudaFunction,
    bicg_update: CudaFunction,
    finish: CudaFunction,
}

/// Step kinds of `dist_finish` (`DIST_*` in `kernels/dist/dist.cu`, defined from these).
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum Kind {
    Start = 0,
    CgAlpha = 1,
    CgUpdateR = 2,
    CgRho = 3,
    BicgAlpha = 4,
    BicgOmega = 5,
    BicgUpdate = 6,
    Dot = 7,
}

const NULL: u64 = 0;

/// The distributed backend's scalars: the single-GPU slots and history, plus the reduction
/// buffer that is all-reduced.
pub struct DistScalars<T> {
    inner: GpuScalars<T>,
    red: CudaSlice<T>,
    partials: CudaSlice<T>,
    ticket: CudaSlice<u32>,
    grid: u32,
}

impl<T: DistScalar> std::fmt::Debug for NcclOps<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NcclOps(rank {} of {})",
            self.rank.rank(),
            self.rank.size()
        )
    }
}

impl<T: DistScalar> NcclOps<T> {
    /// The backend of `rank` (compiles the kernels once per device).
    ///
    /// # Errors
    /// Compile or CUDA failures.
    pub fn new(rank: &Rank) -> Result<Self> {
        let f = |root: &str| rank.gpu.typed_function::<T>(&DIST_KERNELS, root, &[]);
        Ok(NcclOps {
            inner: GpuOps::new(&rank.gpu)?,
            rank: rank.clone(),
            k: DistKernels {
                dot2: f("dist_dot2")?,
                cg_update_r: f("dist_cg_update_r")?,
                bicg_update: f("dist_bicg_update")?,
                finish: f("dist_finish")?,
            },
        })
    }

    /// The rank.
    pub fn rank(&self) -> &Rank {
        &self.rank
    }

    fn cfg(&self, grid: u32) -> cudarc::driver::LaunchConfig {
        Gpu::cfg(grid, THREADS, 0)
    }

    fn grid(&self, sc: &DistScalars<T>, n: usize) -> u32 {
        let g = self.inner.grid(n);
        assert!(
            g <= sc.grid,
            "solver workspace for {} blocks, vectors of length {n} need {g}",
            sc.grid
        );
        g
    }

    /// `red = (a·b, c·d)` locally (c, d optional), gated on the status when `gate`.
    pub(crate) fn dot2(
        &self,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        cd: Option<(&CudaSlice<T>, &CudaSlice<T>)>,
        sc: &mut DistScalars<T>,
        gate: bool,
    ) -> Result<()> {
        assert_eq!(
            a.len(),
            b.len(),
            "dot: vectors of lengths {} and {}",
            a.len(),
            b.len()
        );
        let n = n32(a.len());
        let grid = self.grid(sc, a.len());
        let gate = gate as u32;
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.dot2);
        l.arg(a).arg(b);
        match cd {
            Some((c, d)) => {
                assert_eq!(
                    a.len(),
                    c.len(),
                    "dot: vectors of lengths {} and {}",
                    a.len(),
                    c.len()
                );
                assert_eq!(
                    a.len(),
                    d.len(),
                    "dot: vectors of lengths {} and {}",
                    a.len(),
                    d.len()
                );
                l.arg(c).arg(d);
            }
            None => {
                l.arg(&NULL).arg(&NULL);
            }
        }
        l.arg(&n)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket)
            .arg(&*slots)
            .arg(&gate);
        // SAFETY: dist_dot2(const T* a, const T* b, const T* c, const T* d, u32 n, T* red,
        // T* partials, u32* ticket, const T* s, u32 gate): a, b (c, d when non-null) have n
        // elements; red 2, partials 2 * grid, s NSLOTS.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_dot2"))?;
        Ok(())
    }

    /// All-reduces the step's sums and applies the recurrence `kind`.
    pub(crate) fn finish(
        &self,
        kind: Kind,
        mode: u32,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.rank.all_reduce(&mut sc.red)?;
        let (k, it) = (kind as u32, n32(it));
        let (slots, hist) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.finish);
        l.arg(&k)
            .arg(&mode)
            .arg(&sc.red)
            .arg(slots)
            .arg(hist)
            .arg(&it);
        // SAFETY: dist_finish(u32 kind, u32 mode, const T* red, T* s, T* hist, u32 it): red 2,
        // s NSLOTS, hist max_iters + 1 > it elements. One thread.
        unsafe { l.launch(Gpu::cfg(1, 1, 0)) }.map_err(launch_err("dist_finish"))?;
        Ok(())
    }
}

fn mode_of<V>(f: &Fuse<'_, V>) -> u32 {
    match f {
        Fuse::Identity => FUSE_IDENTITY,
        Fuse::Jacobi { .. } => FUSE_JACOBI,
        Fuse::Separate(_) => FUSE_SEPARATE,
    }
}

impl<T: DistScalar> VectorOps<T> for NcclOps<T> {
    type Vector = CudaSlice<T>;
    type Scalars = DistScalars<T>;

    fn name(&self) -> &'static str {
        "nccl"
    }
    fn default_check_every(&self) -> usize {
        16
    }
    fn len(&self, v: &CudaSlice<T>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<CudaSlice<T>> {
        self.inner.zeros(n)
    }
    fn upload(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.inner.upload(host)
    }
    fn download(&self, v: &CudaSlice<T>) -> Result<Vec<T>> {
        self.inner.download(v)
    }
    fn copy(&self, src: &CudaSlice<T>, dst: &mut CudaSlice<T>) -> Result<()> {
        self.inner.copy(src, dst)
    }
    fn set_zero(&self, v: &mut CudaSlice<T>) -> Result<()> {
        self.inner.set_zero(v)
    }
    fn residual(&self, b: &CudaSlice<T>, ax: &CudaSlice<T>, r: &mut CudaSlice<T>) -> Result<()> {
        self.inner.residual(b, ax, r)
    }
    fn scale(&self, d: &CudaSlice<T>, r: &CudaSlice<T>, z: &mut CudaSlice<T>) -> Result<()> {
        self.inner.scale(d, r, z)
    }
    fn axpy(&self, alpha: T, x: &CudaSlice<T>, y: &mut CudaSlice<T>) -> Result<()> {
        self.inner.axpy(alpha, x, y)
    }
    fn dot(&self, x: &CudaSlice<T>, y: &CudaSlice<T>, sc: &mut DistScalars<T>) -> Result<T> {
        self.dot2(x, y, None, sc, false)?;
        self.finish(Kind::Dot, 0, sc, 0)?;
        Ok(self.read_slots(sc)?[Slot::Dot as usize])
    }
    fn fill(&self, v: &mut CudaSlice<T>, a: T) -> Result<()> {
        self.inner.fill(v, a)
    }
    fn scal(&self, a: T, v: &mut CudaSlice<T>) -> Result<()> {
        self.inner.scal(a, v)
    }
    fn axpby(&self, a: T, x: &CudaSlice<T>, b: T, y: &mut CudaSlice<T>) -> Result<()> {
        self.inner.axpby(a, x, b, y)
    }
    fn axpbypcz(
        &self,
        a: T,
        x: &CudaSlice<T>,
        b: T,
        y: &CudaSlice<T>,
        c: T,
        z: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.inner.axpbypcz(a, x, b, y, c, z)
    }
    fn vmul(
        &self,
        a: T,
        x: &CudaSlice<T>,
        y: &CudaSlice<T>,
        b: T,
        z: &mut CudaSlice<T>,
    ) -> Result<()> {
        self.inner.vmul(a, x, y, b, z)
    }

    fn scalars(&self, n: usize, max_iters: usize) -> Result<DistScalars<T>> {
        let grid = self.inner.grid(n);
        let gpu = &self.rank.gpu;
        Ok(DistScalars {
            inner: self.inner.scalars(n, max_iters)?,
            red: gpu.zeros::<T>(2)?,
            partials: gpu.zeros::<T>(2 * grid as usize)?,
            ticket: gpu.zeros::<u32>(1)?,
            grid,
        })
    }
    fn write_slots(&self, sc: &mut DistScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        self.inner.write_slots(&mut sc.inner, values)
    }
    fn read_slots(&self, sc: &DistScalars<T>) -> Result<[T; NSLOTS]> {
        self.inner.read_slots(&sc.inner)
    }
    fn read_history(&self, sc: &DistScalars<T>, len: usize) -> Result<Vec<T>> {
        self.inner.read_history(&sc.inner, len)
    }
    fn update_slots(
        &self,
        sc: &mut DistScalars<T>,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> Result<()> {
        self.inner.update_slots(&mut sc.inner, f)
    }
}

impl<T: DistScalar> CgSteps<T> for NcclOps<T> {
    fn cg_start(
        &self,
        r: &CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        let mode = mode_of(&fuse);
        match fuse {
            Fuse::Identity => self.dot2(r, r, None, sc, false)?,
            Fuse::Jacobi { inv_diag, z } => {
                self.inner.scale(inv_diag, r, z)?;
                self.dot2(r, r, Some((r, z)), sc, false)?
            }
            Fuse::Separate(z) => {
                let z = z.expect("cg_start with a separate preconditioner needs z");
                self.dot2(r, r, Some((r, z)), sc, false)?
            }
        }
        self.finish(Kind::Start, mode, sc, it)
    }

    fn cg_alpha(
        &self,
        p: &CudaSlice<T>,
        q: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(p, q, None, sc, true)?;
        self.finish(Kind::CgAlpha, 0, sc, it)
    }

    fn cg_update_r(
        &self,
        q: &CudaSlice<T>,
        r: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        assert_eq!(
            q.len(),
            r.len(),
            "cg_update_r: vectors of lengths {} and {}",
            q.len(),
            r.len()
        );
        let mode = mode_of(&fuse);
        let n = n32(r.len());
        let grid = self.grid(sc, r.len());
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.cg_update_r);
        l.arg(q).arg(&mut *r);
        match fuse {
            Fuse::Jacobi { inv_diag, z } => {
                assert_eq!(inv_diag.len(), q.len(), "cg_update_r: diagonal length");
                assert_eq!(z.len(), q.len(), "cg_update_r: z length");
                l.arg(inv_diag).arg(z);
            }
            _ => {
                l.arg(&NULL).arg(&NULL);
            }
        }
        l.arg(&n)
            .arg(&mode)
            .arg(&*slots)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket);
        // SAFETY: dist_cg_update_r(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode,
        // const T* s, T* red, T* partials, u32* ticket): q, r (and dinv, z in Jacobi mode, null
        // and untouched otherwise) have n elements; red 2, partials 2 * grid.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_cg_update_r"))?;
        self.finish(Kind::CgUpdateR, mode, sc, it)
    }

    fn cg_rho(
        &self,
        r: &CudaSlice<T>,
        z: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(r, z, None, sc, true)?;
        self.finish(Kind::CgRho, 0, sc, it)
    }

    fn cg_update_xp(
        &self,
        x: &mut CudaSlice<T>,
        p: &mut CudaSlice<T>,
        z: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.inner.cg_update_xp(x, p, z, &mut sc.inner, it)
    }
}

impl<T: DistScalar> BicgSteps<T> for NcclOps<T> {
    fn bicg_p(
        &self,
        r: &CudaSlice<T>,
        v: &CudaSlice<T>,
        p: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
    ) -> Result<()> {
        self.inner.bicg_p(r, v, p, fuse, &mut sc.inner)
    }

    fn bicg_alpha(
        &self,
        rhat: &CudaSlice<T>,
        v: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(rhat, v, None, sc, true)?;
        self.finish(Kind::BicgAlpha, 0, sc, it)
    }

    fn bicg_s(
        &self,
        r: &CudaSlice<T>,
        v: &CudaSlice<T>,
        s: &mut CudaSlice<T>,
        fuse: Fuse<'_, CudaSlice<T>>,
        sc: &mut DistScalars<T>,
    ) -> Result<()> {
        self.inner.bicg_s(r, v, s, fuse, &mut sc.inner)
    }

    fn bicg_omega(
        &self,
        t: &CudaSlice<T>,
        s: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        self.dot2(t, s, Some((t, t)), sc, true)?;
        self.finish(Kind::BicgOmega, 0, sc, it)
    }

    fn bicg_update(
        &self,
        x: &mut CudaSlice<T>,
        phat: &CudaSlice<T>,
        shat: &CudaSlice<T>,
        s: &CudaSlice<T>,
        t: &CudaSlice<T>,
        r: &mut CudaSlice<T>,
        rhat: &CudaSlice<T>,
        sc: &mut DistScalars<T>,
        it: usize,
    ) -> Result<()> {
        let len = x.len();
        same_lens(
            "bicg_update",
            len,
            &[
                ("p̂", phat.len()),
                ("ŝ", shat.len()),
                ("s", s.len()),
                ("t", t.len()),
                ("r", r.len()),
                ("r̂", rhat.len()),
            ],
        );
        let n = n32(len);
        let grid = self.grid(sc, len);
        let (slots, _) = sc.inner.slots_hist_mut();
        let mut l = self.rank.gpu.stream().launch_builder(&self.k.bicg_update);
        l.arg(x)
            .arg(phat)
            .arg(shat)
            .arg(s)
            .arg(t)
            .arg(r)
            .arg(rhat)
            .arg(&n)
            .arg(&*slots)
            .arg(&mut sc.red)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket);
        // SAFETY: dist_bicg_update(T* x, const T* phat, const T* shat, const T* sv, const T* t,
        // T* r, const T* rhat, u32 n, const T* s, T* red, T* partials, u32* ticket): every vector
        // has n elements; red 2, partials 2 * grid.
        unsafe { l.launch(self.cfg(grid)) }.map_err(launch_err("dist_bicg_update"))?;
        self.finish(Kind::BicgUpdate, 0, sc, it)
    }
}

impl<T: DistScalar> ChebyshevSteps<T> for NcclOps<T> {
    #[allow(clippy::too_many_arguments)]
    fn poly_step(
        &self,
        t: &CudaSlice<T>,
        inv_diag: Option<&CudaSlice<T>>,
        res: &mut CudaSlice<T>,
        d: &mut CudaSlice<T>,
        z: &mut CudaSlice<T>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        self.inner.poly_step(t, inv_diag, res, d, z, first, c1, c2)
    }
}
