//! ILU(0) and IC(0) factored on the GPU ([`GpuIncompleteFactor`]): synchronization-free in one
//! launch (a warp per row waits on the ready words of the pivot rows it reads) for large
//! factors, on the host for small ones, or level by level (a warp per row, the rows of a level
//! in parallel; runs of narrow levels in one block) when asked ([`GpuFactorization`]),
//! re-factorable with new values on the same pattern, and its two triangular solves on the
//! device plans of
//! [`crate::sparse::triangular::gpu`] (`kernels/sparse/sptrsv.cu`). The factorization
//! synchronises once at its end to read the pivot check; the solves only queue work.
//!
//! Real and complex element types share this code and the kernels (`Complex<f32>`,
//! `Complex<f64>`: the device holds [`DevComplex`](crate::scalar::DevComplex) values); a
//! complex IC(0) factor is `A ≈ L·Lᴴ` of a Hermitian positive definite `A`, as on the CPU.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, LaunchArgs, PushKernelArg};

use super::{
    pivot_error, Application, ApplyModes, FactorKind, IncompleteParams, IncompleteStructure,
    Ordering,
};
use crate::csr::CsrMatrix;
use crate::error::Error;
use crate::error::Result;
use crate::gpu::{Gpu, KernelType};
use crate::scalar::{Elem, Scalar};
use crate::sparse::triangular::gpu::{
    launch_err, GpuTriPlan, Kernels, GROUP_THREADS, NULL, SMEM_X_BYTES, THREADS,
};
use crate::sparse::triangular::{
    gpu_level_groups, Diagonal, LevelGroup, SptrsvAlgorithm, Triangle,
};

/// How [`GpuIncompleteFactor`] factors the values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GpuFactorization {
    /// [`SyncFree`](Self::SyncFree) when the factor has at least [`GPU_FACTOR_MIN_NNZ`]
    /// entries and at least [`GPU_FACTOR_MIN_PER_LEVEL`] entries per level of its schedule, else
    /// [`Host`](Self::Host).
    #[default]
    Auto,
    /// A launch per level group (`ilu0_levels` / `ic0_levels`).
    Levels,
    /// One launch, a warp per row taken in level order, waiting on its pivot rows' ready words
    /// (`ilu0_syncfree` / `ic0_syncfree`).
    SyncFree,
    /// On the host (one pass over the rows), the values uploaded: the reference and the
    /// comparison peer of the device factorizations.
    Host,
}

impl GpuFactorization {
    /// `"auto"`, `"levels"`, `"sync-free"` or `"host"`.
    pub fn name(self) -> &'static str {
        match self {
            GpuFactorization::Auto => "auto",
            GpuFactorization::Levels => "levels",
            GpuFactorization::SyncFree => "sync-free",
            GpuFactorization::Host => "host",
        }
    }

    /// The factorization of a factor with `nnz` entries and `levels` levels (other values
    /// unchanged). See [`Auto`](Self::Auto).
    pub fn choose(self, nnz: usize, levels: usize) -> Self {
        match self {
            GpuFactorization::Auto
                if nnz >= GPU_FACTOR_MIN_NNZ && nnz >= GPU_FACTOR_MIN_PER_LEVEL * levels =>
            {
                GpuFactorization::SyncFree
            }
            GpuFactorization::Auto => GpuFactorization::Host,
            other => other,
        }
    }
}

/// Factor entries from which [`GpuFactorization::Auto`] factors on the GPU. Measured on an H100
/// (`benches/results/ilu.md`, re-factorization on the kept pattern, values uploaded included for
/// the host): the sync-free kernel beat the host on raefsky2 (294k entries, 1516 levels: 7.9 ms
/// against 13.1 ms), bcsstk16 (IC(0), 148k, 690 levels: 5.3 against 10.2) and bayer10 (164k, 89
/// levels: 2.8 against 4.4); below 100k entries the host won or tied on every corpus factor
/// (ex6, 97k entries and 750 levels: 6.5 against 3.2; bcsstk13, 43k and 577 levels: 24.9
/// against 5.4), the level-by-level kernels never won (a narrow run of levels is one block).
pub const GPU_FACTOR_MIN_NNZ: usize = 100_000;
/// Factor entries per level of the schedule from which [`GpuFactorization::Auto`] factors on
/// the GPU: the sync-free factorization's critical path costs about 5 µs per level (raefsky2,
/// 194 entries per level), the host's time grows with the entries.
pub const GPU_FACTOR_MIN_PER_LEVEL: usize = 150;

/// IC's upper triangle on the device: `Lᴴ`'s columns, values and the gather map from `L`.
type TransposeParts<D> = (CudaSlice<u32>, CudaSlice<D>, CudaSlice<u32>);

/// An ILU(0) or IC(0) factorization on the GPU. See the [module docs](self).
pub struct GpuIncompleteFactor<T: Elem> {
    gpu: Arc<Gpu>,
    k: Kernels,
    structure: IncompleteStructure,
    params: IncompleteParams,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    diag: CudaSlice<u32>,
    val: CudaSlice<T::Dev>,
    /// Each row's largest modulus before the shift (the pivot test's scale).
    rowmax: CudaSlice<f64>,
    bad: CudaSlice<u32>,
    /// The factorization's schedule (on the lower plan's levels, a warp per row).
    factor_groups: Vec<LevelGroup>,
    /// How the values are factored (never `Auto`).
    factorization: GpuFactorization,
    lower: GpuTriPlan,
    upper: GpuTriPlan,
    /// IC: `Lᴴ`'s columns, values and the gather map from `L`.
    transpose: Option<TransposeParts<T::Dev>>,
    shift_used: f64,
    /// The ping-pong vector of the Jacobi sweeps.
    scratch: Mutex<CudaSlice<T::Dev>>,
    /// The row order and the inverse ordering on the device (see
    /// [`IncompleteStructure::perm_in`]), and the permuted vector between them.
    perm_in: Option<CudaSlice<u32>>,
    perm_out: Option<CudaSlice<u32>>,
    permuted: Mutex<CudaSlice<T::Dev>>,
    /// Per column of a block application ([`GpuIncompleteFactor::apply_swept_block`]): `L⁻¹r`,
    /// the sweeps' ping-pong vector, the permuted result (with an output ordering) and the
    /// barrier word; allocated on first use.
    block_work: Mutex<Vec<ColumnWork<T::Dev>>>,
    modes: ApplyModes,
}

/// One column's vectors of a block application of the swept factor.
struct ColumnWork<D> {
    t: CudaSlice<D>,
    scratch: CudaSlice<D>,
    permuted: Option<CudaSlice<D>>,
    bar: CudaSlice<u32>,
}

impl<T: Elem> GpuIncompleteFactor<T>
where
    T::Dev: KernelType,
{
    /// Analyses `a` and factors it on the GPU. The pattern side (matching, ordering, fill,
    /// diagonal positions, IC's transpose) is built on the host
    /// ([`IncompleteStructure::analyse_for_device`]); the level analysis of both triangles runs
    /// on the device ([`GpuTriPlan::analyse`] on the uploaded pattern), and the factorization's
    /// choice, its schedule and the apply modes read the device's levels: the host runs no
    /// level analysis.
    ///
    /// # Errors
    /// As [`IncompleteStructure::analyse`]; a bad pivot naming its row; device failures.
    pub fn new(
        gpu: &Arc<Gpu>,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self> {
        let params = &super::resolve_params(a, kind, params);
        if let Some(f) = super::natural_first(
            params,
            |p| Self::new(gpu, a, kind, p),
            |f| (f.lower.stats().levels, f.modes),
        )? {
            return Ok(f);
        }
        let (mut s, first) = IncompleteStructure::analyse_factored(a, kind, params, false)?;
        let s_n = s.n.max(1);
        let sweeps_possible = params.jacobi_sweeps > 0 || params.application == Application::Auto;
        let permuted = s.perm_in.is_some() || s.perm_out.is_some();
        let up = |v: &[u32]| {
            if v.is_empty() {
                gpu.zeros::<u32>(1)
            } else {
                gpu.upload(v)
            }
        };
        let nnz = s.col_idx.len().max(1);
        let row_ptr = up(&s.row_ptr)?;
        let col = up(&s.col_idx)?;
        let lower_diag = match kind {
            FactorKind::Ilu0 => Diagonal::Unit,
            FactorKind::Ic0 => Diagonal::NonUnit,
        };
        let lower = GpuTriPlan::analyse(
            gpu,
            s.n,
            &row_ptr,
            &col,
            Triangle::Lower,
            lower_diag,
            params.algorithm,
        )?;
        let (upper, transpose) = match &s.transpose {
            None => (
                GpuTriPlan::analyse(
                    gpu,
                    s.n,
                    &row_ptr,
                    &col,
                    Triangle::Upper,
                    Diagonal::NonUnit,
                    params.algorithm,
                )?,
                None,
            ),
            Some((tptr, tcol, tmap)) => {
                let tcol = up(tcol)?;
                let upper = GpuTriPlan::analyse(
                    gpu,
                    s.n,
                    &up(tptr)?,
                    &tcol,
                    Triangle::Upper,
                    Diagonal::NonUnit,
                    params.algorithm,
                )?;
                (upper, Some((tcol, gpu.zeros::<T::Dev>(nnz)?, up(tmap)?)))
            }
        };
        let lower_levels = lower.stats().levels;
        let prep = &mut s.preprocessing;
        if prep.ordering == Ordering::Natural && prep.fill_level == 0 {
            prep.natural_levels = lower_levels;
        }
        let factor_groups = gpu_level_groups(lower.level_ptr(), 32, GROUP_THREADS, THREADS);
        let mut f = GpuIncompleteFactor {
            k: Kernels::load::<T::Dev>(gpu)?,
            factorization: match s.threshold {
                // ILUT is factored on the host (its pattern is found row after row).
                Some(_) => GpuFactorization::Host,
                None => GpuFactorization::Auto.choose(s.col_idx.len(), lower_levels),
            },
            row_ptr,
            col,
            diag: up(&s.diag_pos)?,
            val: gpu.zeros::<T::Dev>(nnz)?,
            rowmax: gpu.zeros::<f64>(s.n.max(1))?,
            bad: gpu.zeros::<u32>(1)?,
            factor_groups,
            lower,
            upper,
            transpose,
            gpu: gpu.clone(),
            params: *params,
            shift_used: params.shift,
            scratch: Mutex::new(gpu.zeros::<T::Dev>(if sweeps_possible { s_n } else { 1 })?),
            perm_in: s.perm_in.as_deref().map(up).transpose()?,
            perm_out: s.perm_out.as_deref().map(up).transpose()?,
            permuted: Mutex::new(gpu.zeros::<T::Dev>(if permuted { s_n } else { 1 })?),
            block_work: Mutex::new(Vec::new()),
            modes: ApplyModes::fixed(params),
            structure: s,
        };
        let reordered_auto = params.ordering == Ordering::Auto
            && f.structure.preprocessing.ordering != Ordering::Natural;
        let factored = match first {
            // ILUT: the analysis factored the values already (on the host, where later
            // re-factorizations run too).
            // `shift_used` is already the parameters' shift, the one the analysis used.
            Some(v) if f.factors_on_host() => f.upload_values(&v),
            _ => f.refactor(a),
        };
        if let Err(e) = factored {
            return match reordered_auto {
                true => Self::new(gpu, a, kind, &params.natural_fallback()),
                false => Err(e),
            };
        }
        if ApplyModes::needs_values(params) {
            // The choice reads the factor's values once (the CPU factor decides the same way).
            let v = f.download_values()?;
            let t: Vec<T> = match &f.structure.transpose {
                Some((_, _, map)) => map.iter().map(|&p| v[p as usize].conj()).collect(),
                None => Vec::new(),
            };
            f.modes = ApplyModes::resolve(&f.structure, f.levels(), params, &v, &t);
            if reordered_auto && f.modes.unstable() {
                return Self::new(gpu, a, kind, &params.natural_fallback());
            }
            if let Some(p) = super::unfilled_fallback(params, &f.structure, &f.modes) {
                return Self::new(gpu, a, kind, &p);
            }
        }
        Ok(f)
    }

    /// Factors new values of `a` on the analysed pattern (no new analysis). Synchronises once,
    /// to read the pivot check.
    ///
    /// # Errors
    /// A different pattern; a bad pivot naming its row; device failures.
    pub fn refactor(&mut self, a: &CsrMatrix<T>) -> Result<()> {
        let s = &self.structure;
        s.check_pattern(a)?;
        if s.n == 0 {
            return Ok(());
        }
        let mut shift = self.params.shift;
        let mut tries = 0;
        loop {
            match self.factor_once(a, shift)? {
                None => {
                    self.shift_used = shift;
                    return Ok(());
                }
                Some((row, piv)) if !self.params.auto_shift || tries >= super::AUTO_SHIFT_TRIES => {
                    return Err(pivot_error(self.structure.kind, row, piv, &self.params));
                }
                Some(_) => {
                    shift = super::next_shift(shift);
                    tries += 1;
                }
            }
        }
    }

    /// The parameters the factor settled on (automatic choices resolved, after its fallbacks).
    pub fn params(&self) -> &IncompleteParams {
        &self.params
    }

    /// The diagonal shift of the last successful factorization.
    pub fn shift_used(&self) -> f64 {
        self.shift_used
    }

    /// Whether the factorization runs on the host (then the values are uploaded): see
    /// [`GpuFactorization::Auto`].
    pub fn factors_on_host(&self) -> bool {
        self.factorization == GpuFactorization::Host
    }

    /// How the values are factored.
    pub fn factorization(&self) -> GpuFactorization {
        self.factorization
    }

    /// Sets how later [`refactor`](Self::refactor) calls factor the values (`Auto` resolves as
    /// at construction; an ILUT factor stays on the host).
    pub fn set_factorization(&mut self, how: GpuFactorization) {
        if self.structure.threshold.is_some() {
            return;
        }
        self.factorization = how.choose(self.structure.col_idx.len(), self.lower.stats().levels);
    }

    /// Uploads values factored on the host.
    fn upload_values(&mut self, v: &[T]) -> Result<()> {
        self.gpu.upload_into(T::as_dev(v), &mut self.val)?;
        self.gather_transpose()
    }

    /// One factorization with `shift`; `Some((row, pivot))` for a bad pivot.
    fn factor_once(&mut self, a: &CsrMatrix<T>, shift: f64) -> Result<Option<(usize, f64)>> {
        if self.factors_on_host() {
            let s = &self.structure;
            return match super::factor_values(s, a, shift, self.params.pivot_tol) {
                Ok(v) => {
                    self.upload_values(&v)?;
                    Ok(None)
                }
                Err(bad) => Ok(Some(bad)),
            };
        }
        let s = &self.structure;
        let (v, rowmax) = s.initial_values(a, shift);
        let rowmax: Vec<f64> = rowmax.iter().map(|m| m.as_f64()).collect();
        self.gpu.upload_into(T::as_dev(&v), &mut self.val)?;
        self.gpu.upload_into(&rowmax, &mut self.rowmax)?;
        self.gpu.upload_into(&[u32::MAX], &mut self.bad)?;
        let stream = self.gpu.stream();
        let (f, name) = match s.kind {
            FactorKind::Ilu0 => (&self.k.ilu0, "ilu0_levels"),
            FactorKind::Ic0 => (&self.k.ic0, "ic0_levels"),
        };
        let tol = self.params.pivot_tol;
        let maxlen = s.row_ptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as usize;
        let per_entry = std::mem::size_of::<T::Dev>() + 4;
        if self.factorization == GpuFactorization::SyncFree {
            let (f, name) = match s.kind {
                FactorKind::Ilu0 => (&self.k.ilu0_syncfree, "ilu0_syncfree"),
                FactorKind::Ic0 => (&self.k.ic0_syncfree, "ic0_syncfree"),
            };
            let n = s.n as u32;
            let warps = THREADS / 32;
            // Row cache: as many entries per warp as fit the default 48 KiB (see ilu0_row).
            let cache = maxlen.min(SMEM_X_BYTES / (warps as usize * per_entry)) as u32;
            let smem = warps * cache * per_entry as u32;
            let blocks = n
                .div_ceil(warps)
                .min(self.gpu.sm_count().max(1) * (2048 / THREADS));
            let mut ready = self.lower.flags.lock().unwrap_or_else(|p| p.into_inner());
            stream
                .memset_zeros(&mut *ready)
                .map_err(|e| Error::cuda("clearing the factorization's ready words", e))?;
            let mut l = stream.launch_builder(f);
            l.arg(&n)
                .arg(&self.lower.order)
                .arg(&self.row_ptr)
                .arg(&self.col)
                .arg(&self.diag)
                .arg(&mut self.val)
                .arg(&self.rowmax)
                .arg(&tol)
                .arg(&mut self.bad)
                .arg(&cache)
                .arg(&mut *ready);
            // SAFETY: {ilu0,ic0}_syncfree(u32 n, const u32* order, const u32* row_ptr,
            // const u32* col, const u32* diag, T* val, const double* rowmax, double tol, u32* bad,
            // u32 cache, u32* ready): order (the lower plan of this factor's pattern, a level
            // order: every row after the rows it reads), diag and rowmax have n entries, row_ptr
            // n + 1, col/val the factor's nnz; rowmax n doubles; bad one word; ready the lower
            // plan's n + 1 flag
            // words, zeroed just above on this stream; the dynamic shared memory holds
            // warps × cache × (sizeof(T) + 4) bytes (at most 48 KiB).
            unsafe { l.launch(Gpu::cfg(blocks, THREADS, smem)) }.map_err(launch_err(name))?;
        } else {
            for g in &self.factor_groups {
                // Row cache: as many entries per warp as fit the default 48 KiB (see ilu0_row).
                let warps = (g.threads / 32) as usize;
                let cache = maxlen.min(SMEM_X_BYTES / (warps * per_entry)) as u32;
                let smem = warps as u32 * cache * per_entry as u32;
                let mut l = stream.launch_builder(f);
                l.arg(&self.lower.order)
                    .arg(&self.lower.level_ptr)
                    .arg(&g.lo)
                    .arg(&g.hi)
                    .arg(&self.row_ptr)
                    .arg(&self.col)
                    .arg(&self.diag)
                    .arg(&mut self.val)
                    .arg(&self.rowmax)
                    .arg(&tol)
                    .arg(&mut self.bad)
                    .arg(&cache);
                // SAFETY: {ilu0,ic0}_levels(const u32* order, const u32* level_ptr, u32 lo,
                // u32 hi, const u32* row_ptr, const u32* col, const u32* diag, T* val,
                // const double* rowmax, double tol, u32* bad, u32 cache): order/diag/rowmax have n
                // entries, row_ptr n + 1, col/val the factor's nnz, level_ptr levels + 1 ≥ hi + 1
                // (the lower plan of this factor's pattern, whose levels order every row after
                // the rows it reads); bad one word; the dynamic shared memory holds
                // warps × cache × (sizeof(T) + 4) bytes.
                unsafe { l.launch(Gpu::cfg(g.blocks, g.threads, smem)) }
                    .map_err(launch_err(name))?;
            }
        }
        self.gather_transpose()?;
        let bad = self.gpu.download(&self.bad)?[0];
        if bad == u32::MAX {
            return Ok(None);
        }
        let row = bad as usize;
        let s = &self.structure;
        let piv = match s.kind {
            FactorKind::Ilu0 => {
                let p = s.diag_pos[row] as usize;
                super::reported(T::from_dev(&self.gpu.download(&self.val.slice(p..p + 1))?)[0])
            }
            FactorKind::Ic0 => f64::NAN,
        };
        Ok(Some((row, piv)))
    }

    /// IC: `Lᴴ`'s values gathered (conjugated) from `L`'s (queued).
    fn gather_transpose(&mut self) -> Result<()> {
        let stream = self.gpu.stream();
        if let Some((_, tval, tmap)) = &mut self.transpose {
            let n = tmap.len() as u32;
            let mut l = stream.launch_builder(&self.k.gather_conj);
            l.arg(&*tmap).arg(&self.val).arg(tval).arg(&n);
            // SAFETY: gather_conj(const u32* map, const T* src, T* dst, u32 n): map and dst have
            // n entries (the factor's nnz), every map entry indexes src (the factor's values).
            unsafe { l.launch(Gpu::cfg(n.div_ceil(THREADS).min(1024), THREADS, 0)) }
                .map_err(launch_err("gather_conj"))?;
        }
        Ok(())
    }

    /// `dst = src[map]` (queued).
    fn gather(
        &self,
        map: &CudaSlice<u32>,
        src: &CudaSlice<T::Dev>,
        dst: &mut CudaSlice<T::Dev>,
    ) -> Result<()> {
        let n = self.structure.n as u32;
        if n == 0 {
            return Ok(());
        }
        let mut l = self.gpu.stream().launch_builder(&self.k.gather);
        l.arg(map).arg(src).arg(dst).arg(&n);
        // SAFETY: gather(const u32* map, const T* src, T* dst, u32 n): map is a permutation of
        // 0..n (n entries), src and dst have at least n elements and are distinct buffers.
        unsafe { l.launch(Gpu::cfg(n.div_ceil(THREADS).min(1024), THREADS, 0)) }
            .map_err(launch_err("gather"))?;
        Ok(())
    }

    /// `x = L⁻¹(P·b)` (queued; `P` the factor's row order; approximate per
    /// [`modes`](Self::modes)).
    pub fn lower_solve(&self, b: &CudaSlice<T::Dev>, x: &mut CudaSlice<T::Dev>) -> Result<()> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let j = (self.modes.lower_sweeps > 0).then_some((self.modes.lower_sweeps, &mut *scratch));
        match &self.perm_in {
            Some(p) => {
                let mut pb = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
                self.gather(p, b, &mut pb)?;
                self.lower
                    .solve(&self.gpu, &self.k, &self.col, &self.val, &pb, x, j)
            }
            None => self
                .lower
                .solve(&self.gpu, &self.k, &self.col, &self.val, b, x, j),
        }
    }

    /// `x = Qᵀ·U⁻¹b` (IC: `L⁻ᴴ`, `L⁻ᵀ` for a real factor; `Q` the factor's ordering) (queued; approximate per
    /// [`modes`](Self::modes)).
    pub fn upper_solve(&self, b: &CudaSlice<T::Dev>, x: &mut CudaSlice<T::Dev>) -> Result<()> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let j = (self.modes.upper_sweeps > 0).then_some((self.modes.upper_sweeps, &mut *scratch));
        let (col, val) = match &self.transpose {
            Some((tcol, tval, _)) => (tcol, tval),
            None => (&self.col, &self.val),
        };
        match &self.perm_out {
            Some(p) => {
                let mut y = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
                self.upper
                    .solve(&self.gpu, &self.k, col, val, b, &mut y, j)?;
                self.gather(p, &y, x)
            }
            None => self.upper.solve(&self.gpu, &self.k, col, val, b, x, j),
        }
    }

    /// Pushes the arguments both sweep kernels begin with: `n`, the lower plan (ranges,
    /// diagonal or null, the factor's columns and values, `ls` sweeps, lanes), then the upper
    /// one with its columns and values `ucol`, `uval` (the transpose's for IC) and `us` sweeps.
    fn push_plans<'a>(
        &'a self,
        l: &mut LaunchArgs<'a>,
        n: &'a u32,
        (ls, us): (&'a u32, &'a u32),
        (ucol, uval): (&'a CudaSlice<u32>, &'a CudaSlice<T::Dev>),
    ) {
        l.arg(n).arg(&self.lower.start).arg(&self.lower.end);
        match &self.lower.diag {
            Some(d) => l.arg(d),
            None => l.arg(&NULL),
        };
        l.arg(&self.col)
            .arg(&self.val)
            .arg(ls)
            .arg(&self.lower.lanes)
            .arg(&self.upper.start)
            .arg(&self.upper.end);
        match &self.upper.diag {
            Some(d) => l.arg(d),
            None => l.arg(&NULL),
        };
        l.arg(ucol).arg(uval).arg(us).arg(&self.upper.lanes);
    }

    /// `z = Qᵀ·U⁻¹(L⁻¹(P·r))` in one cooperative launch when both triangles are applied by
    /// Jacobi sweeps (`t` receives `L⁻¹(P·r)`); `Ok(false)` (nothing queued) otherwise, or where
    /// the cooperative kernels cannot run: the caller then runs the two solves. The result equals
    /// [`lower_solve`](Self::lower_solve) then [`upper_solve`](Self::upper_solve) bit for bit.
    ///
    /// # Errors
    /// Launch failures.
    pub fn apply_swept(
        &self,
        r: &CudaSlice<T::Dev>,
        t: &mut CudaSlice<T::Dev>,
        z: &mut CudaSlice<T::Dev>,
    ) -> Result<bool> {
        let (ls, us) = (self.modes.lower_sweeps, self.modes.upper_sweeps);
        let n = self.structure.n as u32;
        if ls == 0
            || us == 0
            || n == 0
            || !self.lower.sweeps_fusable()
            || !self.upper.sweeps_fusable()
        {
            return Ok(false);
        }
        let grid = match (
            self.k.fused_grid(n, self.lower.lanes),
            self.k.fused_grid(n, self.upper.lanes),
        ) {
            (Some(a), Some(b)) => a.max(b),
            _ => return Ok(false),
        };
        for (v, what) in [(r.len(), "r"), (t.len(), "t"), (z.len(), "z")] {
            assert_eq!(
                v, self.structure.n,
                "factor application: {what} has {v} elements, the factor {} rows",
                self.structure.n
            );
        }
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let mut permuted = self.permuted.lock().unwrap_or_else(|p| p.into_inner());
        let mut bar = self.lower.bar.lock().unwrap_or_else(|p| p.into_inner());
        let (ucol, uval) = match &self.transpose {
            Some((tcol, tval, _)) => (tcol, tval),
            None => (&self.col, &self.val),
        };
        let (ls, us) = (ls as u32, us as u32);
        let stream = self.gpu.stream();
        let mut l = stream.launch_builder(&self.k.apply_sweeps);
        self.push_plans(&mut l, &n, (&ls, &us), (ucol, uval));
        l.arg(r);
        match &self.perm_in {
            Some(p) => l.arg(p),
            None => l.arg(&NULL),
        };
        l.arg(&mut *t).arg(&mut *scratch);
        match &self.perm_out {
            Some(p) => l.arg(&mut *permuted).arg(p).arg(&mut *z),
            None => l.arg(&mut *z).arg(&NULL).arg(&NULL),
        };
        l.arg(&mut *bar);
        // SAFETY: ilu_apply_sweeps(u32 n, const u32* l_start, const u32* l_end,
        // const u32* l_diag, const u32* l_col, const T* l_val, u32 l_sweeps, u32 l_g,
        // const u32* u_start, const u32* u_end, const u32* u_diag, const u32* u_col,
        // const T* u_val, u32 u_sweeps, u32 u_g, const T* r, const u32* bmap, T* t, T* scratch,
        // T* y, const u32* omap, T* z, u32* bar): the two plans were made for this factor's
        // pattern (IC: the upper one for Lᵀ's, with its columns and values), their ranges have
        // n entries (diag null for a unit diagonal); r, t, the scratch, y and z have n elements
        // (the permuted buffer has n when perm_out exists) and the written ones are distinct
        // from each other and from r; bmap/omap are permutations of 0..n or null (then y is z
        // and omap's output null); bar one word only the cooperative kernels touch. The grid is
        // at most the co-resident blocks, which the cooperative launch guarantees.
        unsafe { l.launch_cooperative(Gpu::cfg(grid, THREADS, 0)) }
            .map_err(launch_err("ilu_apply_sweeps"))?;
        Ok(true)
    }

    /// [`GpuIncompleteFactor::apply_swept`] for several columns in one cooperative launch
    /// (`ilu_apply_sweeps_cols`): `zs[j] ← U⁻¹(L⁻¹rs[j])` by the same sweeps, each column on
    /// its own vectors and barrier word. A row's sum does not depend on the grid, so each column
    /// equals its one-column application bit for bit; the columns share the launch (and read
    /// the factor through L2 together). `Ok(false)` (nothing queued) where the one-column
    /// application is not swept in one launch.
    ///
    /// # Errors
    /// Device failures (allocating a column's work vectors, the launch).
    pub fn apply_swept_block(
        &self,
        rs: &[&CudaSlice<T::Dev>],
        zs: &mut [&mut CudaSlice<T::Dev>],
    ) -> Result<bool> {
        use crate::backend::gpu::block::Table;
        use crate::backend::gpu::BLOCK_COLS;
        assert_eq!(
            rs.len(),
            zs.len(),
            "apply_swept_block: as many outputs as inputs"
        );
        let (ls, us) = (self.modes.lower_sweeps, self.modes.upper_sweeps);
        let n = self.structure.n;
        if rs.len() < 2
            || ls == 0
            || us == 0
            || n == 0
            || self.k.cols_blocks == 0
            || !self.lower.sweeps_fusable()
            || !self.upper.sweeps_fusable()
        {
            return Ok(false);
        }
        let n32 = n as u32;
        let need = |lanes: u32| n32.div_ceil(THREADS / lanes.max(1)).max(1);
        let need = need(self.lower.lanes).max(need(self.upper.lanes));
        for (v, what) in rs
            .iter()
            .map(|r| (r.len(), "r"))
            .chain(zs.iter().map(|z| (z.len(), "z")))
        {
            assert_eq!(
                v, n,
                "factor application: {what} has {v} elements, the factor {n} rows"
            );
        }
        let mut work = self.block_work.lock().unwrap_or_else(|p| p.into_inner());
        while work.len() < rs.len() {
            work.push(ColumnWork {
                t: self.gpu.zeros::<T::Dev>(n)?,
                scratch: self.gpu.zeros::<T::Dev>(n)?,
                permuted: match self.perm_out {
                    Some(_) => Some(self.gpu.zeros::<T::Dev>(n)?),
                    None => None,
                },
                bar: self.gpu.zeros::<u32>(1)?,
            });
        }
        let (ucol, uval) = match &self.transpose {
            Some((tcol, tval, _)) => (tcol, tval),
            None => (&self.col, &self.val),
        };
        let (ls, us) = (ls as u32, us as u32);
        let stream = self.gpu.stream();
        let mut ws = work.iter_mut();
        let chunks = rs.chunks(BLOCK_COLS).zip(zs.chunks_mut(BLOCK_COLS));
        for (rc, zc) in chunks {
            let cols = rc.len() as u32;
            // Every column's blocks resident at once: the launch's share of the co-resident
            // blocks per column, at most what one column's rows need.
            let per = (self.k.cols_blocks / cols).min(need);
            if per == 0 {
                return Err(Error::InvalidInput(format!(
                    "swept factor application of {cols} columns: {} co-resident blocks",
                    self.k.cols_blocks
                )));
            }
            let mut t = Table::new(stream);
            for (c, (r, z)) in rc.iter().zip(zc.iter_mut()).enumerate() {
                let w = ws.next().expect("a work set per column");
                t.get(c, 0, r);
                t.put(c, 1, &mut w.t);
                t.put(c, 2, &mut w.scratch);
                match &mut w.permuted {
                    Some(p) => {
                        t.put(c, 3, p);
                        t.put(c, 4, &mut **z);
                    }
                    None => t.put(c, 3, &mut **z),
                }
                t.put(c, 5, &mut w.bar);
            }
            let mut l = stream.launch_builder(&self.k.apply_sweeps_cols);
            self.push_plans(&mut l, &n32, (&ls, &us), (ucol, uval));
            match &self.perm_in {
                Some(p) => l.arg(p),
                None => l.arg(&NULL),
            };
            match &self.perm_out {
                Some(p) => l.arg(p),
                None => l.arg(&NULL),
            };
            l.arg(&t.tab);
            let cfg = cudarc::driver::LaunchConfig {
                grid_dim: (per, cols, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: ilu_apply_sweeps_cols(u32 n, the lower plan's l_start, l_end, l_diag,
            // l_col, l_val, u32 l_sweeps, u32 l_g, the upper plan's u_start ... u_val, u32
            // u_sweeps, u32 u_g, const u32* bmap, const u32* omap, ColTab tab): the plans and
            // maps as in apply_swept; row c < cols of the table holds a column's r (read), its
            // own t, scratch, y (its permuted vector, or z without an output ordering), z and
            // barrier word (one u32, zero or left by a previous barrier), every vector of n
            // elements (checked); the written ones are distinct buffers. Cooperative: cols · per
            // ≤ cols_blocks blocks, the co-resident blocks of this kernel.
            unsafe { l.launch_cooperative(cfg) }.map_err(launch_err("ilu_apply_sweeps_cols"))?;
            drop(t);
        }
        Ok(true)
    }

    /// How the two triangular solves are applied.
    pub fn modes(&self) -> ApplyModes {
        self.modes
    }

    /// What was done and how it is applied.
    pub fn summary(&self) -> super::FactorSummary {
        super::FactorSummary::new(
            &self.structure,
            self.levels(),
            self.modes,
            self.shift_used,
            self.factors_on_host(),
        )
    }

    /// The factor's values (synchronises; for tests and inspection).
    pub fn download_values(&self) -> Result<Vec<T>> {
        let v = self.gpu.download(&self.val)?;
        Ok(T::from_dev(&v)[..self.structure.col_idx.len()].to_vec())
    }

    /// The structure (pattern, plans).
    pub fn structure(&self) -> &IncompleteStructure {
        &self.structure
    }
    /// Levels of the lower and upper solves (the device's analysis).
    pub fn levels(&self) -> (usize, usize) {
        (self.lower.stats().levels, self.upper.stats().levels)
    }
    /// The device plans of the lower and upper solves.
    pub fn plans(&self) -> (&GpuTriPlan, &GpuTriPlan) {
        (&self.lower, &self.upper)
    }
    /// Forces the solve algorithm of both triangles.
    pub fn set_algorithm(&mut self, algorithm: SptrsvAlgorithm) {
        self.lower.set_algorithm(algorithm);
        self.upper.set_algorithm(algorithm);
    }
    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
    /// Launches of the factorization.
    pub fn factor_groups(&self) -> usize {
        self.factor_groups.len()
    }
}
