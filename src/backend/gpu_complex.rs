//! The GPU backend for complex element types: `Complex<f32>` and `Complex<f64>` vectors on the
//! device, the same solver bodies as every other backend.
//!
//! [`GpuComplexOps<T>`] implements the **core** of [`VectorOps`] with device vectors
//! (`CudaSlice<T::Dev>`, interleaved `re, im` like CuPy's and cuSPARSE's complex arrays) and
//! one kernel per operation (`kernels/solvers/blas1_complex.cu`): `copy`, `fill`, `scal`,
//! `axpby`, `axpbypcz`, `vmul`, the conjugated inner product `xᴴy` ([`VectorOps::dot`]) and
//! the bilinear `xᵀy` ([`VectorOps::dotu`], COCG's form). The solvers' steps are the core
//! defaults (`backend/ops/defaults.rs`), so CG (Hermitian positive definite), COCG, BiCGSTAB,
//! GMRES and the Jacobi preconditioner run here exactly as on the CPU, step for step.
//!
//! **Scalars on the host.** The slots (ρ, α, β, ω, ‖r‖², the status) and the residual history
//! are host values: each inner product is one reduction kernel whose result is read back (one
//! synchronisation), and the recurrences of [`super::recur`] run on the host, as the defaults
//! apply them. The real backend (`GpuOps`) keeps its slots on the device instead, with fused
//! kernels mirroring the recurrences; those kernels are written for real arithmetic and are not
//! instantiated for complex values.
//!
//! **GMRES.** The Krylov basis is `m + 1` device vectors with a device table of their pointers
//! ([`GpuComplexKrylov`]); an Arnoldi step's classical Gram–Schmidt pass is three launches for
//! all `j + 1` basis vectors (the block of inner products `V_jᴴw` over a 2-D grid, their sums,
//! and `w ← w − V_j·c`), twice (CGS2), where the default would issue `2(j + 1)` kernels and
//! `j + 1` synchronisations per pass.
//!
//! **Reproducibility.** Every reduction writes one partial per block over a grid fixed by the
//! vector length and sums them in block order (`kernels/solvers/reduce.cuh`): results are the
//! same bit for bit from run to run on one device. They agree with the CPU backend to rounding
//! (its summation order differs), so iteration counts match on well-conditioned problems.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, PushKernelArg};

use super::gpu::{BLOCKS_PER_SM, REDUCE, THREADS};
use super::recur::{self, Slot, NSLOTS};
use super::{same_len, HostKrylov, KrylovOps, KrylovSpace, VectorOps};
use crate::error::{Error, Result};
use crate::gpu::kernels::{KernelSource, COMMON};
use crate::gpu::{Gpu, KernelType};
use crate::scalar::Elem;

/// Interleaved complex numbers and their arithmetic (`kernels/complex.cuh`), shared by the
/// complex BLAS-1 kernels and the complex SpMV.
pub const COMPLEX_H: KernelSource = KernelSource {
    name: "complex.cuh",
    text: include_str!("../../kernels/complex.cuh"),
    headers: &[],
    constants: &[],
};

/// The complex core: vector operations, `xᴴy` / `xᵀy`, GMRES's block Gram–Schmidt.
pub const BLAS1_COMPLEX: KernelSource = KernelSource {
    name: "solvers/blas1_complex.cu",
    text: include_str!("../../kernels/solvers/blas1_complex.cu"),
    headers: &[&COMMON, &COMPLEX_H, &REDUCE],
    constants: &[("SOLVER_THREADS", THREADS as i64)],
};

/// Blocks per basis vector of GMRES's block inner products (the grid is this × (j + 1)
/// blocks): 2 per SM keeps the 2-D grid near 8 blocks per SM at j ≈ 4.
const DOT_BLOCKS_PER_SM: u32 = 2;

struct Kernels {
    lincomb: CudaFunction,
    vmul: CudaFunction,
    fill: CudaFunction,
    dot: CudaFunction,
    block_dots: CudaFunction,
    block_sum: CudaFunction,
    block_update: CudaFunction,
}

/// The GPU backend for a complex element type `T` (`Complex<f32>` or `Complex<f64>`): the
/// kernels are compiled once, when it is created. See the [module docs](self).
pub struct GpuComplexOps<T: Elem>
where
    T::Dev: KernelType,
{
    gpu: Arc<Gpu>,
    k: Kernels,
    _t: std::marker::PhantomData<T>,
}

impl<T: Elem> std::fmt::Debug for GpuComplexOps<T>
where
    T::Dev: KernelType,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuComplexOps<{}>({:?})", T::NAME, self.gpu)
    }
}

/// The slots and the residual history (host values), and the device result and partial sums of
/// the inner products.
pub struct GpuComplexScalars<T: Elem>
where
    T::Dev: KernelType,
{
    slots: [T; NSLOTS],
    hist: Vec<T>,
    out: CudaSlice<T::Dev>,
    /// Two real partials (one complex value) per block.
    partials: CudaSlice<T::Dev>,
    ticket: CudaSlice<u32>,
    grid: u32,
}

/// GMRES's Krylov workspace: the basis and the small arrays as [`HostKrylov`] (the defaults of
/// the cycle start and the correction use it), a device table of the basis pointers, and the
/// coefficients and partial sums of the block Gram–Schmidt.
pub struct GpuComplexKrylov<T: Elem>
where
    T::Dev: KernelType,
{
    host: HostKrylov<CudaSlice<T::Dev>, T>,
    ptrs: CudaSlice<u64>,
    /// The coefficients of both Gram–Schmidt passes: `2 (m + 1)`.
    coef: CudaSlice<T::Dev>,
    /// One complex partial per block and basis vector: `(m + 1) · dot_grid`.
    partials: CudaSlice<T::Dev>,
    dot_grid: u32,
}

impl<T: Elem> KrylovSpace<CudaSlice<T::Dev>, T> for GpuComplexKrylov<T>
where
    T::Dev: KernelType,
{
    fn host(&self) -> Option<&HostKrylov<CudaSlice<T::Dev>, T>> {
        Some(&self.host)
    }
    fn host_mut(&mut self) -> Option<&mut HostKrylov<CudaSlice<T::Dev>, T>> {
        Some(&mut self.host)
    }
}

fn n32(n: usize) -> u32 {
    u32::try_from(n).expect("solver vectors are limited to u32::MAX elements")
}

/// A null device pointer for an absent vector argument.
const NULL: u64 = 0;

impl<T: Elem> GpuComplexOps<T>
where
    T::Dev: KernelType,
{
    /// Compiles (or takes from the [`Gpu`]'s cache) the complex kernels for `T`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a real `T` (its backend is `GpuOps`); [`Error::Compile`] or
    /// [`Error::Cuda`] naming the kernel.
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        if !T::IS_COMPLEX {
            return Err(Error::InvalidInput(format!(
                "GpuComplexOps holds complex vectors; the GPU backend of {} is GpuOps",
                T::NAME
            )));
        }
        let f = |root: &str| gpu.typed_function::<T::Dev>(&BLAS1_COMPLEX, root, &[]);
        Ok(GpuComplexOps {
            gpu: gpu.clone(),
            k: Kernels {
                lincomb: f("cvector_lincomb")?,
                vmul: f("cvector_vmul")?,
                fill: f("cvector_fill")?,
                dot: f("cvector_dot")?,
                block_dots: f("cblock_dots")?,
                block_sum: f("cblock_sum")?,
                block_update: f("cblock_update")?,
            },
            _t: std::marker::PhantomData,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Blocks of the grid-stride kernels for vectors of length `n`.
    fn grid(&self, n: usize) -> u32 {
        let need = n.div_ceil(THREADS as usize).max(1);
        need.min((self.gpu.sm_count().max(1) * BLOCKS_PER_SM) as usize) as u32
    }

    /// Launches `l` (kernel `name`) over `grid` blocks of [`THREADS`] (a 2-D grid when `ys > 1`).
    ///
    /// # Safety
    /// As [`cudarc::driver::LaunchArgs::launch`]: `l` holds the kernel's arguments.
    unsafe fn launch(
        &self,
        l: &mut cudarc::driver::LaunchArgs<'_>,
        grid: u32,
        ys: u32,
        name: &str,
    ) -> Result<()> {
        let mut cfg = Gpu::cfg(grid, THREADS, 0);
        cfg.grid_dim.1 = ys;
        // SAFETY: the caller's.
        unsafe { l.launch(cfg) }
            .map(|_| ())
            .map_err(|e| Gpu::launch_error(name, e))
    }

    /// `z ← a·x + b·y + c·z` (absent vectors contribute nothing; `z` read only when `c ≠ 0`).
    fn lincomb(
        &self,
        a: T,
        x: Option<&CudaSlice<T::Dev>>,
        b: T,
        y: Option<&CudaSlice<T::Dev>>,
        c: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        let (n, grid) = (n32(z.len()), self.grid(z.len()));
        let (a, b, c) = (dev(a), dev(b), dev(c));
        let mut l = self.gpu.stream().launch_builder(&self.k.lincomb);
        l.arg(&a);
        match x {
            Some(x) => l.arg(x),
            None => l.arg(&NULL),
        };
        l.arg(&b);
        match y {
            Some(y) => l.arg(y),
            None => l.arg(&NULL),
        };
        l.arg(&c).arg(&mut *z).arg(&n);
        // SAFETY: cvector_lincomb(C a, const C* x, C b, const C* y, C c, C* z, u32 n); x and y
        // are null or have n elements like z (checked by the callers).
        unsafe { self.launch(&mut l, grid, 1, "cvector_lincomb") }
    }

    /// `xᴴy` (`conj`) or `xᵀy`, read back to the host and kept in [`Slot::Dot`].
    fn inner(
        &self,
        conj: bool,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuComplexScalars<T>,
    ) -> Result<T> {
        same_len(if conj { "dot" } else { "dotu" }, x.len(), y.len());
        let (n, grid) = (n32(x.len()), self.grid(x.len()));
        assert!(
            grid <= sc.grid,
            "solver workspace was allocated for a grid of {} blocks, vectors of length {} need {grid}",
            sc.grid,
            x.len()
        );
        let flag = u32::from(conj);
        let mut l = self.gpu.stream().launch_builder(&self.k.dot);
        l.arg(x)
            .arg(y)
            .arg(&n)
            .arg(&flag)
            .arg(&mut sc.out)
            .arg(&mut sc.partials)
            .arg(&mut sc.ticket);
        // SAFETY: cvector_dot(const C* x, const C* y, u32 n, u32 conj, C* out, R* partials,
        // u32* ticket); x, y have n elements, out 1, partials 2·grid reals (grid complex values,
        // grid ≤ sc.grid), ticket 1 (zero between launches: the last block resets it).
        unsafe { self.launch(&mut l, grid, 1, "cvector_dot") }?;
        let d = T::from_dev(&self.gpu.download(&sc.out)?)[0];
        sc.slots[Slot::Dot as usize] = d;
        Ok(d)
    }
}

/// A host coefficient as the kernels take it.
fn dev<T: Elem>(a: T) -> T::Dev {
    T::as_dev(&[a])[0]
}

impl<T: Elem> VectorOps<T> for GpuComplexOps<T>
where
    T::Dev: KernelType,
{
    type Vector = CudaSlice<T::Dev>;
    type Scalars = GpuComplexScalars<T>;

    fn name(&self) -> &'static str {
        "gpu"
    }
    fn len(&self, v: &CudaSlice<T::Dev>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<CudaSlice<T::Dev>> {
        self.gpu.zeros::<T::Dev>(n)
    }
    fn upload(&self, host: &[T]) -> Result<CudaSlice<T::Dev>> {
        self.gpu.upload(T::as_dev(host))
    }
    fn download(&self, v: &CudaSlice<T::Dev>) -> Result<Vec<T>> {
        Ok(T::from_dev(&self.gpu.download(v)?).to_vec())
    }
    fn copy(&self, src: &CudaSlice<T::Dev>, dst: &mut CudaSlice<T::Dev>) -> Result<()> {
        same_len("copy", src.len(), dst.len());
        self.gpu
            .stream()
            .memcpy_dtod(src, dst)
            .map_err(|e| Error::cuda("complex vector copy", e))
    }
    fn set_zero(&self, v: &mut CudaSlice<T::Dev>) -> Result<()> {
        self.gpu
            .stream()
            .memset_zeros(v)
            .map_err(|e| Error::cuda("complex vector memset", e))
    }
    fn fill(&self, v: &mut CudaSlice<T::Dev>, a: T) -> Result<()> {
        let (n, grid) = (n32(v.len()), self.grid(v.len()));
        let a = dev(a);
        let mut l = self.gpu.stream().launch_builder(&self.k.fill);
        l.arg(&a).arg(&mut *v).arg(&n);
        // SAFETY: cvector_fill(C a, C* z, u32 n); z has n elements.
        unsafe { self.launch(&mut l, grid, 1, "cvector_fill") }
    }
    fn scal(&self, a: T, v: &mut CudaSlice<T::Dev>) -> Result<()> {
        self.lincomb(T::zero(), None, T::zero(), None, a, v)
    }
    fn axpby(&self, a: T, x: &CudaSlice<T::Dev>, b: T, y: &mut CudaSlice<T::Dev>) -> Result<()> {
        same_len("axpby", x.len(), y.len());
        self.lincomb(a, Some(x), T::zero(), None, b, y)
    }
    fn axpbypcz(
        &self,
        a: T,
        x: &CudaSlice<T::Dev>,
        b: T,
        y: &CudaSlice<T::Dev>,
        c: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        same_len("axpbypcz", x.len(), y.len());
        same_len("axpbypcz", x.len(), z.len());
        self.lincomb(a, Some(x), b, Some(y), c, z)
    }
    fn vmul(
        &self,
        a: T,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        b: T,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        same_len("vmul", x.len(), y.len());
        same_len("vmul", x.len(), z.len());
        let (n, grid) = (n32(z.len()), self.grid(z.len()));
        let (a, b) = (dev(a), dev(b));
        let mut l = self.gpu.stream().launch_builder(&self.k.vmul);
        l.arg(&a).arg(x).arg(y).arg(&b).arg(&mut *z).arg(&n);
        // SAFETY: cvector_vmul(C a, const C* x, const C* y, C b, C* z, u32 n); all three have
        // n elements.
        unsafe { self.launch(&mut l, grid, 1, "cvector_vmul") }
    }
    fn dot(
        &self,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuComplexScalars<T>,
    ) -> Result<T> {
        self.inner(true, x, y, sc)
    }
    fn dotu(
        &self,
        x: &CudaSlice<T::Dev>,
        y: &CudaSlice<T::Dev>,
        sc: &mut GpuComplexScalars<T>,
    ) -> Result<T> {
        self.inner(false, x, y, sc)
    }

    fn check_memory(&self, what: &str, bytes: u64) -> Result<()> {
        self.gpu.check_memory(what, bytes)
    }
    fn scalars(&self, n: usize, max_iters: usize) -> Result<GpuComplexScalars<T>> {
        let grid = self.grid(n);
        Ok(GpuComplexScalars {
            slots: [T::zero(); NSLOTS],
            hist: vec![T::zero(); max_iters + 1],
            out: self.gpu.zeros::<T::Dev>(1)?,
            partials: self.gpu.zeros::<T::Dev>(grid as usize)?,
            ticket: self.gpu.zeros::<u32>(1)?,
            grid,
        })
    }
    fn write_slots(&self, sc: &mut GpuComplexScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        for &(k, v) in values {
            sc.slots[k as usize] = v;
        }
        Ok(())
    }
    fn read_slots(&self, sc: &GpuComplexScalars<T>) -> Result<[T; NSLOTS]> {
        Ok(sc.slots)
    }
    fn read_history(&self, sc: &GpuComplexScalars<T>, len: usize) -> Result<Vec<T>> {
        Ok(sc.hist[..len.min(sc.hist.len())].to_vec())
    }
    fn update_slots(
        &self,
        sc: &mut GpuComplexScalars<T>,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> Result<()> {
        f(&mut sc.slots, &mut sc.hist);
        Ok(())
    }
}

impl<T: Elem> KrylovOps<T> for GpuComplexOps<T>
where
    T::Dev: KernelType,
{
    type Krylov = GpuComplexKrylov<T>;

    fn krylov(&self, n: usize, m: usize) -> Result<GpuComplexKrylov<T>> {
        let host = HostKrylov::new(self, n, m)?;
        let stream = self.gpu.stream();
        let ptrs: Vec<u64> = host
            .v
            .iter()
            .map(|b| {
                let (p, _sync) = DevicePtr::device_ptr(b, stream);
                p
            })
            .collect();
        let need = n.div_ceil(THREADS as usize).max(1);
        let dot_grid = need.min((self.gpu.sm_count().max(1) * DOT_BLOCKS_PER_SM) as usize) as u32;
        Ok(GpuComplexKrylov {
            ptrs: self.gpu.upload(&ptrs)?,
            coef: self.gpu.zeros::<T::Dev>(2 * (m + 1))?,
            partials: self.gpu.zeros::<T::Dev>((m + 1) * dot_grid as usize)?,
            dot_grid,
            host,
        })
    }

    /// CGS2 as the default, each pass in three launches for all `j + 1` basis vectors (see the
    /// [module docs](self)); the coefficients are read back once per step.
    fn gmres_arnoldi(
        &self,
        k: &mut GpuComplexKrylov<T>,
        j: usize,
        sc: &mut GpuComplexScalars<T>,
        iteration: usize,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let lay = k.host.lay;
        assert!(j < lay.m, "Krylov column {j} of a restart length {}", lay.m);
        let cols = j + 1;
        let (n, cols32, parts) = (k.host.v[0].len(), n32(cols), k.dot_grid);
        let n_32 = n32(n);
        let grid = self.grid(n);
        let stream = self.gpu.stream();
        let w = &mut k.host.v[cols];
        for pass in 0..2 {
            let off = pass * (lay.m + 1);
            {
                let mut l = stream.launch_builder(&self.k.block_dots);
                l.arg(&k.ptrs).arg(&*w).arg(&n_32).arg(&mut k.partials);
                // SAFETY: cblock_dots(const u64* basis, const C* w, u32 n, R* partials); basis
                // holds m + 1 ≥ cols pointers to vectors of n elements, w has n, partials
                // 2·cols·dot_grid reals ((m + 1)·dot_grid complex values); grid dot_grid × cols.
                unsafe { self.launch(&mut l, parts, cols32, "cblock_dots") }?;
            }
            {
                let mut coef = k.coef.slice_mut(off..off + cols);
                let mut l = stream.launch_builder(&self.k.block_sum);
                l.arg(&k.partials).arg(&parts).arg(&mut coef);
                // SAFETY: cblock_sum(const R* partials, u32 parts, C* coef); partials holds
                // 2·parts reals per block index < cols, coef cols values; grid cols.
                unsafe { self.launch(&mut l, cols32, 1, "cblock_sum") }?;
            }
            let coef = k.coef.slice(off..off + cols);
            let mut l = stream.launch_builder(&self.k.block_update);
            l.arg(&k.ptrs)
                .arg(&coef)
                .arg(&cols32)
                .arg(&mut *w)
                .arg(&n_32);
            // SAFETY: cblock_update(const u64* basis, const C* coef, u32 cols, C* w, u32 n);
            // basis[0..cols] are vectors of n elements other than w (w is v_{j+1}), coef cols.
            unsafe { self.launch(&mut l, grid, 1, "cblock_update") }?;
        }
        let coef = T::from_dev(&self.gpu.download(&k.coef)?).to_vec();
        for pass in 0..2 {
            let (src, dst) = (pass * (lay.m + 1), [lay.c1(), lay.c2()][pass]);
            k.host.small[dst..dst + cols].copy_from_slice(&coef[src..src + cols]);
        }
        let ww = self.dot(&*w, &*w, sc)?;
        recur::gmres_column(
            &mut sc.slots,
            &mut k.host.small,
            lay,
            &mut sc.hist,
            j,
            ww,
            iteration,
        );
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        self.scal(k.host.small[lay.scale()], w)
    }
}
