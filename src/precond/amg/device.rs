//! The setup on the GPU: every phase of `setup.rs` on the device, the hierarchy built where the
//! cycle runs, nothing of size `n` crossing the bus.
//!
//! | phase | GPU | equals the CPU |
//! |---|---|---|
//! | strength, amalgamation | [`sparse::gpu::strength_symmetric`], [`sparse::gpu::amalgamate`] | bit for bit |
//! | MIS-2 aggregation | [`sparse::gpu::aggregate_mis2`] | the same aggregates |
//! | tentative prolongator, one candidate | [`sparse::gpu::tentative_single`] | bit for bit |
//! | tentative prolongator, several candidates | [`sparse::gpu::tentative_qr`] (a modified Gram–Schmidt QR per aggregate) | bit for bit |
//! | `A·T`, `R·A`, `(R·A)·P` | [`GpuSpgemmPlan`] (symbolic once, numeric re-run by [`Amg::update`](super::Amg::update)) | bit for bit |
//! | `R·A·P` of a level with node blocks ([`AmgParams::block_products`]) | [`sparse::gpu::BlockGalerkin`]: the products of the block patterns, a numeric kernel by blocks | bit for bit on the scalar product's pattern; the coarse operator stored by whole blocks (explicit zeros where only the padding reaches) |
//! | smoothing `P = (I − ω/ρ·D⁻¹A)·T`, `R = Pᵀ` | `amg_smooth` (same two roundings per entry), [`sparse::gpu::transpose`] | bit for bit given the same ρ |
//! | `D⁻¹`, `D_l1⁻¹`, ρ(D⁻¹A) | `amg_level_scales`; 15 Lanczos steps with device vectors and device scalars (dots summed in a fixed order by the last block), ρ by Sturm bisection on the device | scalings bit for bit; ρ to rounding |
//! | coarse inverse | the coarsest matrix (≤ `coarse_size` rows) downloaded, inverted on the host, uploaded | bit for bit |
//!
//! The setup starts from the solver's device matrix ([`setup`], a [`GpuCsr`]): the checks of the
//! fine matrix (square, finite values, positive diagonal, whether its rows are sorted) and the
//! fingerprint of its pattern that [`Amg::update`](super::Amg::update) compares against run in
//! one kernel (`amg_check_fine`), and nothing of the fine matrix is kept on the host. A matrix
//! whose rows are unsorted or repeat a column is brought to canonical form on the device
//! (`A·I` by the SpGEMM, which sorts and sums as `CsrMatrix::canonical` does; the identity's
//! arrays are the one copy of size `n` that crosses the bus), and its plan is kept for the
//! re-setup. Phases are queued
//! without synchronising between them except where a size must be read to allocate (the entry
//! counts of the strength graph, the aggregation and the products, MIS-2's round counters read
//! batch of rounds, [`MIS2_BATCH`](crate::sparse::gpu::aggregate::MIS2_BATCH) first); ρ stays on the device until
//! the end of the setup. [`AmgParams::phase_times`] synchronises after every phase to time it;
//! `SEGSPARSE_WAIT_LOG=1` prints each wait of a setup per call site ([`crate::gpu::wait_log`]).
//!
//! The numeric re-setup ([`HierarchyState::update`]) checks the new matrix on the device,
//! compares fingerprints, and then only queues kernels into the hierarchy's own arrays: the
//! fine values copied in, `A·T` into `P`'s values (`T` and the coarse candidates depend on the
//! aggregation and the candidates alone and are kept), `R`'s values by a kept permutation of
//! `P`'s, `R·A` and `(R·A)·P` into kept arrays; every SpMV table is kept (values only change).
//! It synchronises twice: the check, and reading ρ and the coarsest matrix at the end. Its
//! shapes are fixed, so from the second update on ([`AmgParams::resetup_graph`]) everything
//! between the copy of the fine values and that end is one CUDA graph, recorded once (with its
//! own Lanczos arrays) and replayed: the same kernels on the same arrays, the same bits.
//!
//! So the aggregates and every pattern are the CPU's, and the values differ from the CPU
//! hierarchy only through the rounding of the ρ estimates (its dot products are summed in
//! another order), which moves ω/ρ in the last bits (`tests/all/amg.rs` checks both).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaSlice;

use super::coarse::dense_inverse;
use super::cycle::{DeviceLevel, LevelSmoother};
use super::tentative::check_fine_rows;
use super::{
    AmgParams, AmgSetup, Built, HierarchyState, LevelSummary, SetupTimes, Smoother, UpdateInput,
};
use crate::backend::gpu::GpuOps;
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::gpu::kernels::{kernel_source, KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::sparse::gpu::{self as sg, CsrView, DeviceCsr, GpuAggregation, GpuSpgemmPlan};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

/// `kernels/precond/amg_setup.cu`: checks, smoother scalings, Lanczos steps, prolongator
/// smoothing.
pub const AMG_SETUP_SRC: KernelSource = kernel_source!(
    "precond/amg_setup.cu",
    &[&COMMON],
    &[
        ("AMG_BLOCK", BLOCK as i64),
        ("AMG_DOT_BLOCKS", DOT_BLOCKS as i64),
        ("AMG_APPLY_BLOCKS", APPLY_BLOCKS as i64),
        ("AMG_SC_M_SLOT", SC_M as i64),
        ("AMG_SC_STOP_SLOT", SC_STOP as i64),
        ("AMG_SC_NV_SLOT", SC_NV as i64),
        ("AMG_SC_RHO_SLOT", SC_RHO as i64),
        ("AMG_SC_SLOTS", SC_SLOTS as i64),
    ]
);

/// Threads per block of every kernel here.
const BLOCK: u32 = 256;
/// The most blocks of a reduction kernel whose partials the host or one warp sums.
const DOT_BLOCKS: usize = 1024;
/// The most blocks of the Lanczos product (`amg_lanczos_apply_dot`, whose last block sums the
/// partials with all its threads): the partials array's length.
const APPLY_BLOCKS: usize = 8192;
/// The Lanczos scalars after `α[0..steps)` and `β[0..steps)`: the number of `α`s, the stop flag,
/// `|v₀|` and ρ, at these offsets from `2·steps`; [`SC_SLOTS`] of them.
const SC_M: usize = 0;
const SC_STOP: usize = 1;
const SC_NV: usize = 2;
const SC_RHO: usize = 3;
const SC_SLOTS: usize = 4;

fn grid(g: &Gpu, n: usize) -> u32 {
    (n.div_ceil(BLOCK as usize) as u32).clamp(1, g.sm_count() * 16)
}

/// Blocks of a reduction kernel over `threads` threads of work.
fn rgrid(g: &Gpu, threads: usize) -> u32 {
    grid(g, threads).min(DOT_BLOCKS as u32)
}

/// Blocks of the Lanczos product over `threads` threads of work: one block per 256 threads
/// up to [`APPLY_BLOCKS`].
fn apply_grid(threads: usize) -> u32 {
    threads.div_ceil(BLOCK as usize).clamp(1, APPLY_BLOCKS) as u32
}

/// Entries of a row that one lane of the Lanczos product loads before its first multiply-add
/// (`AMG_APPLY_UNROLL` in `amg_setup.cu`).
const APPLY_UNROLL: usize = 8;

/// Lanes per row of the Lanczos product for a level of `nnz` entries in `rows` rows: the
/// fewest (a power of two up to 32) that leave a row of the mean length at most
/// [`APPLY_UNROLL`] entries per lane, so that one batch of loads covers it (one lane for a
/// 7-point stencil, four for a 27-point one). It depends on the pattern only: a re-setup
/// sums in the setup's order. `SEGSPARSE_AMG_LANCZOS_LANES` (1, 2, 4, …, 32) sets it for every
/// level instead, for measurements (ρ then changes in its last bits).
fn apply_lanes(nnz: usize, rows: usize) -> u32 {
    static FORCED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let forced = *FORCED.get_or_init(|| {
        std::env::var("SEGSPARSE_AMG_LANCZOS_LANES")
            .ok()?
            .parse::<u32>()
            .ok()
            .filter(|l| l.is_power_of_two() && *l <= 32)
    });
    forced.unwrap_or_else(|| sg::batch_lanes(nnz, rows, APPLY_UNROLL))
}

/// The fine matrix's pattern as an update compares it: rows, entries and the device hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    rows: usize,
    nnz: usize,
    hash: u64,
}

/// A level's smoother data on the device.
struct LevelData<T: GpuScalar> {
    inv_diag: CudaSlice<T>,
    inv_l1: CudaSlice<T>,
    /// The Lanczos scalars (`amg_setup.cu`): α, β, the step count, the stop flag, `|v₀|`, ρ.
    scal: CudaSlice<f64>,
    /// ρ on the host, once read back.
    rho: f64,
    block: usize,
}

/// The index of ρ in `LevelData::scal` for a layout of `steps` steps.
fn rho_index(steps: usize) -> usize {
    2 * steps + SC_RHO
}

/// The transfer from a level to the next, with what a numeric re-setup reuses.
struct DevTransfer<T: GpuScalar> {
    /// `T` (it depends on the aggregation and the candidates only).
    t: DeviceCsr<T>,
    at_plan: GpuSpgemmPlan,
    /// Where each entry of `T` sits in the pattern of `A·T` (= `P`).
    t_pos: CudaSlice<u32>,
    /// Where each entry of `P` sits in `R = Pᵀ`.
    r_pos: CudaSlice<u32>,
    galerkin: Galerkin<T>,
    /// Lanes per row of the fused smoothing ([`smooth_lanes`]); `None`: the product and the
    /// smoothing pass.
    lanes: Option<usize>,
}

/// The plans of `R·A·P` entry by entry.
struct ScalarGalerkin<T: GpuScalar> {
    ra_plan: GpuSpgemmPlan,
    /// `R·A`, its values rewritten by a re-setup.
    ra: DeviceCsr<T>,
    rap_plan: GpuSpgemmPlan,
}

/// How a level's `R·A·P` is computed, with what a re-setup reruns.
enum Galerkin<T: GpuScalar> {
    /// Entry by entry.
    Scalar(Box<ScalarGalerkin<T>>),
    /// By the level's node blocks ([`AmgParams::block_products`]).
    Block(Box<sg::BlockGalerkin<T>>),
}

impl<T: GpuScalar> Galerkin<T> {
    /// The product and its plans: by blocks when `params` and the level allow it (`A` with
    /// `ka × ka` blocks, `kc` candidates), else entry by entry.
    fn new(
        g: &Arc<Gpu>,
        params: &AmgParams,
        r: &DeviceCsr<T>,
        a: &GpuCsr<T>,
        p: &DeviceCsr<T>,
        ka: usize,
        kc: usize,
    ) -> Result<(Self, DeviceCsr<T>)> {
        if params.block_products && ka > 1 {
            if let Some((b, ac)) = sg::BlockGalerkin::new(g, r.into(), a.into(), p.into(), ka, kc)?
            {
                return Ok((Galerkin::Block(Box::new(b)), ac));
            }
        }
        let ra_plan = GpuSpgemmPlan::symbolic(g, r, a)?;
        let ra = ra_plan.numeric(r, a)?;
        let rap_plan = GpuSpgemmPlan::symbolic(g, &ra, p)?;
        let ac = rap_plan.numeric(&ra, p)?;
        let plans = ScalarGalerkin {
            ra_plan,
            ra,
            rap_plan,
        };
        Ok((Galerkin::Scalar(Box::new(plans)), ac))
    }

    /// The numeric product for new values on the setup's patterns into `out` (queued only).
    fn numeric_into(
        &mut self,
        g: &Gpu,
        r: &GpuCsr<T>,
        a: &GpuCsr<T>,
        p: &GpuCsr<T>,
        out: &mut CudaSlice<T>,
    ) -> Result<()> {
        match self {
            Galerkin::Scalar(s) => {
                s.ra_plan.numeric_into(r, a, &mut s.ra.val)?;
                s.rap_plan.numeric_into(&s.ra, p, out)
            }
            Galerkin::Block(b) => b.numeric_into(g, r.into(), a.into(), p.into(), out),
        }
    }
}

/// The device setup's state: what [`HierarchyState::update`] reruns.
struct DeviceState<T: GpuScalar> {
    gpu: Arc<Gpu>,
    fingerprint: Fingerprint,
    /// Set when the fine matrix given was not canonical: the finest level is its canonical
    /// form, which a re-setup recomputes from the new values.
    canon: Option<Canon<T>>,
    /// Set when [`AmgParams::drop_tol`] dropped entries: the finest level holds the entries of
    /// the (canonical) fine matrix at these positions.
    kept: Option<CudaSlice<u32>>,
    transfers: Vec<DevTransfer<T>>,
    data: Vec<LevelData<T>>,
    /// Lanczos steps of the scalar layout.
    steps: usize,
    candidates: usize,
    /// The candidates as given, kept when [`AmgParams::improve_candidates`] makes `T` depend on
    /// the matrix's values (an update then runs a whole setup on the kept pattern check).
    host_candidates: Option<Vec<Vec<T>>>,
    /// An update failed after it began to rewrite the hierarchy: later updates are refused.
    failed: bool,
    /// The re-setup as a CUDA graph, recorded by the second update ([`AmgParams::resetup_graph`]:
    /// the first launches its kernels directly, which also loads every kernel it needs before
    /// a recording).
    graph: Option<ResetupGraph>,
    /// Numeric re-setups run so far.
    resetups: usize,
}

/// The kernels of this module for element type `T`.
fn f<T: GpuScalar>(g: &Gpu, root: &str) -> Result<cudarc::driver::CudaFunction> {
    g.typed_function::<T>(&AMG_SETUP_SRC, root, &[])
}

fn fu(g: &Gpu, root: &str) -> Result<cudarc::driver::CudaFunction> {
    g.function(&AMG_SETUP_SRC, root, &[])
}

/// Launches a kernel of `amg_setup.cu` on `blocks` blocks with the given arguments.
macro_rules! launch_on {
    ($blocks:expr, $g:expr, $k:expr, $name:literal, [$($a:expr),* $(,)?]) => {{
        let k = $k;
        let mut lb = $g.stream().launch_builder(&k);
        $( lb.arg($a); )*
        // SAFETY: every kernel of amg_setup.cu launched here walks its `n` argument with a
        // grid-stride loop (the reductions on at most DOT_BLOCKS blocks, the Lanczos product
        // on at most APPLY_BLOCKS: the partials' length), over arrays the caller sized as the
        // kernel's comment says.
        unsafe { lb.launch(Gpu::cfg($blocks, BLOCK, 0)) }
            .map_err(|e| Gpu::launch_error($name, e))?;
    }};
}

/// Launches a grid-stride kernel over `n` elements with the given arguments.
macro_rules! launch {
    ($g:expr, $k:expr, $n:expr, $name:literal, [$($a:expr),* $(,)?]) => {
        launch_on!(grid($g, $n), $g, $k, $name, [$($a),*])
    };
}

/// Synchronises for the phase timers when they are asked for, and adds the phase's seconds.
fn phase(g: &Gpu, params: &AmgParams, slot: &mut f64, clock: Instant) -> Result<()> {
    if params.phase_times {
        g.synchronize()?;
        *slot += clock.elapsed().as_secs_f64();
    }
    Ok(())
}

/// The work arrays of the Lanczos estimate ([`queue_level_data`]), for levels of up to `rows`
/// rows: the scaling `s`, the vectors `v`, `w`, `vp`, the reduction kernels' block partials and
/// their last-block ticket. One set serves every level of a setup; a re-setup recorded as a
/// CUDA graph keeps its set, since the graph's kernels point into it.
struct Lanczos {
    rows: usize,
    s: CudaSlice<f64>,
    v: CudaSlice<f64>,
    w: CudaSlice<f64>,
    vp: CudaSlice<f64>,
    partials: CudaSlice<f64>,
    ticket: CudaSlice<u32>,
}

impl Lanczos {
    fn new(g: &Gpu, rows: usize) -> Result<Self> {
        let n = rows.max(1);
        // SAFETY: s, v and w are written before they are read at every level (the scalings,
        // the start vector, the first apply); vp is cleared at every level; each block writes
        // its partial before the last block reads them all.
        unsafe {
            Ok(Lanczos {
                rows,
                s: g.alloc::<f64>(n)?,
                v: g.alloc::<f64>(n)?,
                w: g.alloc::<f64>(n)?,
                vp: g.alloc::<f64>(n)?,
                partials: g.alloc::<f64>(APPLY_BLOCKS.max(DOT_BLOCKS))?,
                ticket: g.zeros::<u32>(1)?,
            })
        }
    }
}

/// A numeric re-setup recorded as a CUDA graph: every kernel from the fine values to the
/// coarsest matrix, replayed by later updates.
struct ResetupGraph {
    graph: cudarc::driver::CudaGraph,
    /// The Lanczos arrays the graph's kernels use.
    _work: Lanczos,
}

// SAFETY: the graph is an instantiated CUDA graph (a driver handle, usable from any thread of
// the context) launched only through `&mut DeviceState`, so never from two threads at once;
// the arrays it points into are the hierarchy's and `_work`, which live as long as it does.
unsafe impl Send for ResetupGraph {}

/// Checks the fine matrix on the device (square, not empty, finite values, a positive
/// diagonal) and returns its pattern's fingerprint and whether its rows are canonical (sorted,
/// no repeated column): one kernel, one download. The diagonal is checked only on a canonical
/// matrix (repeated diagonal entries are summed first: [`canonicalize`]).
fn check_fine_device<T: GpuScalar>(g: &Gpu, a: &GpuCsr<T>) -> Result<(Fingerprint, bool)> {
    check_fine_view(g, a.into())
}

/// [`check_fine_device`] on the arrays of a matrix.
fn check_fine_view<T: GpuScalar>(g: &Gpu, a: CsrView<'_, T>) -> Result<(Fingerprint, bool)> {
    super::setup::check_fine_shape(a.nrows(), a.ncols())?;
    let (rp, col, val) = (a.row_ptr(), a.col(), a.val());
    let n32 = a.nrows() as u32;
    // One download: the three flagged rows (u32::MAX when none; the first two words) and the
    // pattern's hash (the third).
    let mut words = g.upload(&[u64::MAX, u64::MAX, 0])?;
    {
        let (mut head, mut hash) = words.split_at_mut(2);
        // SAFETY: two u64 words of all ones read as four u32::MAX words.
        let mut bad = unsafe { head.transmute_mut::<u32>(4) }.expect("2 words hold 4");
        launch!(
            g,
            f::<T>(g, "amg_check_fine")?,
            a.nrows(),
            "amg_check_fine",
            [rp, col, val, &n32, &mut bad, &mut hash]
        );
    }
    let w = g.download(&words)?;
    let out = [w[0] as u32, (w[0] >> 32) as u32, w[1] as u32];
    let hash = w[2];
    // A `GpuCsr`'s columns are below `ncols` = n by construction: a flagged row is unsorted
    // or repeats a column.
    let canonical = out[0] == u32::MAX;
    if out[1] != u32::MAX {
        return Err(Error::InvalidInput(format!(
            "AMG: the matrix has a non-finite entry (row {})",
            out[1]
        )));
    }
    if canonical && out[2] != u32::MAX {
        return Err(Error::InvalidInput(format!(
            "AMG: diagonal entry of row {} is missing, not positive or not finite (smoothed \
             aggregation needs a positive diagonal: the matrix should be symmetric positive \
             definite)",
            out[2]
        )));
    }
    let fp = Fingerprint {
        rows: a.nrows(),
        nnz: a.nnz(),
        hash,
    };
    Ok((fp, canonical))
}

/// How a fine matrix whose rows are not canonical (unsorted, or a column repeated) becomes
/// the hierarchy's finest level: `A·I` on the device, which sorts every row and sums repeated
/// entries (as [`CsrMatrix::canonical`] does on the host), with the plan that a re-setup reruns
/// on the new values.
struct Canon<T: GpuScalar> {
    plan: GpuSpgemmPlan,
    eye: DeviceCsr<T>,
}

/// The canonical form of `a` ([`Canon`]), checked as a fine matrix (finite values, a positive
/// diagonal).
fn canonicalize<T: GpuScalar>(g: &Arc<Gpu>, a: &GpuCsr<T>) -> Result<(GpuCsr<T>, Canon<T>)> {
    let eye = DeviceCsr::upload(g, &CsrMatrix::<T>::identity(a.nrows()))?;
    let plan = GpuSpgemmPlan::symbolic(g, a, &eye)?;
    let c = plan.numeric(a, &eye)?.into_gpu_csr(g)?;
    check_fine_device(g, &c)?;
    Ok((c, Canon { plan, eye }))
}

/// Queues the smoother scalings of a level and its ρ estimate into `d` (`steps` Lanczos steps
/// on `D^{-1/2} A D^{-1/2}`, the procedure of `precond::spectral::spectral_radius`); nothing is read back.
fn queue_level_data<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    d: &mut LevelData<T>,
    steps: usize,
    work: &mut Lanczos,
) -> Result<()> {
    let n = a.nrows();
    let n32 = n as u32;
    assert!(
        n <= work.rows,
        "Lanczos arrays for {} rows, level of {n}",
        work.rows
    );
    let Lanczos {
        s,
        v,
        w,
        vp,
        partials,
        ticket,
        ..
    } = work;
    // vp is read at step 0 multiplied by β = 0, so it must hold numbers.
    g.stream()
        .memset_zeros(vp)
        .map_err(|e| Error::cuda("clearing a Lanczos vector", e))?;
    launch!(
        g,
        f::<T>(g, "amg_level_scales")?,
        n,
        "amg_level_scales",
        [
            a.row_ptr(),
            a.col(),
            a.val(),
            &n32,
            &mut d.inv_diag,
            &mut d.inv_l1,
            &mut *s
        ]
    );
    let lay = steps.max(1);
    let lay32 = lay as u32;
    launch_on!(
        rgrid(g, n),
        g,
        fu(g, "amg_lanczos_start_dot")?,
        "amg_lanczos_start_dot",
        [
            &mut *v,
            &n32,
            &mut *partials,
            &mut *ticket,
            &mut d.scal,
            &lay32
        ]
    );
    launch!(
        g,
        fu(g, "amg_lanczos_normalize")?,
        n,
        "amg_lanczos_normalize",
        [&mut *v, &n32, &d.scal, &lay32]
    );
    let k_apply = f::<T>(g, "amg_lanczos_apply_dot")?;
    let k_orth = fu(g, "amg_lanczos_orth_dot")?;
    let k_next = fu(g, "amg_lanczos_next_dev")?;
    let lanes = apply_lanes(a.nnz(), n);
    for k in 0..steps.min(n).max(1) as u32 {
        launch_on!(
            apply_grid(n * lanes as usize),
            g,
            k_apply.clone(),
            "amg_lanczos_apply_dot",
            [
                a.row_ptr(),
                a.col(),
                a.val(),
                &n32,
                &*s,
                &*v,
                &mut *w,
                &mut *partials,
                &mut *ticket,
                &mut d.scal,
                &lay32,
                &k,
                &lanes
            ]
        );
        launch_on!(
            rgrid(g, n),
            g,
            k_orth.clone(),
            "amg_lanczos_orth_dot",
            [
                &mut *w,
                &*v,
                &*vp,
                &n32,
                &mut *partials,
                &mut *ticket,
                &mut d.scal,
                &lay32,
                &k
            ]
        );
        std::mem::swap(vp, v);
        launch!(
            g,
            k_next.clone(),
            n,
            "amg_lanczos_next_dev",
            [&mut *v, &*w, &d.scal, &lay32, &k, &n32]
        );
    }
    launch_on!(
        1,
        g,
        fu(g, "amg_lanczos_ritz")?,
        "amg_lanczos_ritz",
        [&mut d.scal, &lay32]
    );
    Ok(())
}

/// A level's smoother data: allocated, then queued as [`queue_level_data`].
fn level_data<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    block: usize,
    steps: usize,
) -> Result<LevelData<T>> {
    let n = a.nrows().max(1);
    // SAFETY: amg_level_scales writes all n entries of both; the start kernel writes every
    // scalar before any is read.
    let mut d = unsafe {
        LevelData {
            inv_diag: g.alloc::<T>(n)?,
            inv_l1: g.alloc::<T>(n)?,
            scal: g.alloc::<f64>(2 * steps.max(1) + SC_SLOTS)?,
            rho: 1.0,
            block,
        }
    };
    let mut work = Lanczos::new(g, a.nrows())?;
    queue_level_data(g, a, &mut d, steps, &mut work)?;
    Ok(d)
}

/// Reads every level's ρ back: gathered into one array on the device, one download.
fn read_rhos<T: GpuScalar>(g: &Gpu, data: &mut [LevelData<T>], steps: usize) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let i = rho_index(steps.max(1));
    // SAFETY: each of the data.len() entries is copied into below before the download.
    let mut rhos = unsafe { g.alloc::<f64>(data.len())? };
    for (l, d) in data.iter().enumerate() {
        g.stream()
            .memcpy_dtod(&d.scal.slice(i..i + 1), &mut rhos.slice_mut(l..l + 1))
            .map_err(|e| Error::cuda("gathering the levels' ρ", e))?;
    }
    let rhos = g.download(&rhos)?;
    for (d, rho) in data.iter_mut().zip(rhos) {
        d.rho = rho;
    }
    Ok(())
}

/// The strength graph of a level on the device (on its nodes).
fn strength<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    block: usize,
    theta: f64,
) -> Result<DeviceCsr<T>> {
    // Level 0 was checked by `amg_check_fine`; the coarse levels, the node graphs and the
    // strength graphs come from the crate's kernels, canonical by construction.
    use crate::sparse::gpu::aggregate::{amalgamate_with, strength_symmetric_with};
    if block == 1 {
        strength_symmetric_with(g, a, theta, false)
    } else {
        let nodes = amalgamate_with(g, a, block, false)?;
        strength_symmetric_with(g, (&nodes).into(), theta, false)
    }
}

/// `T` and the coarse candidates on the device: the norm per aggregate for one candidate, a QR
/// per aggregate for several.
fn tentative<T: GpuScalar>(
    g: &Arc<Gpu>,
    agg: &GpuAggregation,
    block: usize,
    b: &[CudaSlice<T>],
) -> Result<(DeviceCsr<T>, Vec<CudaSlice<T>>)> {
    if b.len() == 1 {
        let (t, bc) = sg::tentative_single(g, agg, block, &b[0])?;
        return Ok((t, vec![bc]));
    }
    sg::tentative_qr(g, agg, block, b)
}

/// `P = (I − ω/ρ·D⁻¹A)·T` in place of `pval`, the values of the product `A·T` on the pattern
/// with row pointer `prp`; ρ read on the device.
#[allow(clippy::too_many_arguments)]
fn smooth<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    steps: usize,
    prp: &CudaSlice<u32>,
    pval: &mut CudaSlice<T>,
    rows: usize,
    t: &DeviceCsr<T>,
    t_pos: &CudaSlice<u32>,
    omega: f64,
) -> Result<()> {
    let n32 = rows as u32;
    let i = rho_index(steps.max(1));
    let rho = lv.scal.slice(i..i + 1);
    launch!(
        g,
        f::<T>(g, "amg_smooth")?,
        rows,
        "amg_smooth",
        [
            prp,
            pval,
            &n32,
            &lv.inv_diag,
            &omega,
            &rho,
            &t.row_ptr,
            &t.val,
            t_pos
        ]
    );
    Ok(())
}

/// Lanes per row of the fused smoothing ([`AmgParams::fused_smoothing`]) for a level with
/// `candidates` near-nullspace candidates (`T` has at most that many entries per row, one per
/// lane); `None` for one candidate, whose levels take the numeric product and the smoothing pass
/// (as fast there on the H200: `benches/results/amg.md`).
fn smooth_lanes(params: &AmgParams, candidates: usize) -> Option<usize> {
    (params.fused_smoothing && candidates > 1).then(|| candidates.next_power_of_two().min(32))
}

/// `P = (I − ω/ρ·D⁻¹A)·T` into `pval` on the pattern (`prp`, `pcol`) of `A·T`, in one kernel
/// that reads `A`, `T` and `D⁻¹` (`amg_smooth_fused`, `lanes` per row: the values of the
/// product `A·T` and then [`smooth`], the same sums and roundings, without the product's own
/// pass); with `r` = (where each entry of `P` sits in `R = Pᵀ`, `R`'s values), `R`'s values
/// too. ρ read on the device.
#[allow(clippy::too_many_arguments)]
fn smooth_fused<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    steps: usize,
    a: CsrView<'_, T>,
    t: &DeviceCsr<T>,
    t_pos: &CudaSlice<u32>,
    (prp, pcol): (&CudaSlice<u32>, &CudaSlice<u32>),
    pval: &mut CudaSlice<T>,
    r: Option<(&CudaSlice<u32>, &mut CudaSlice<T>)>,
    omega: f64,
    lanes: usize,
) -> Result<()> {
    assert!(
        lanes.is_power_of_two() && (2..=32).contains(&lanes),
        "fused smoothing: {lanes} lanes per row"
    );
    let rows = a.nrows();
    let n32 = rows as u32;
    let i = rho_index(steps.max(1));
    let rho = lv.scal.slice(i..i + 1);
    let k = f::<T>(g, &format!("amg_smooth_fused_g{lanes}"))?;
    // The grid-stride loop runs over groups of `lanes` threads, one row each.
    let threads = rows * lanes;
    let (arp, acol, aval) = (a.row_ptr(), a.col(), a.val());
    // Null pointers where there is no R to write.
    let null = 0u64;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(arp).arg(acol).arg(aval).arg(&n32);
    lb.arg(&t.row_ptr).arg(&t.col).arg(&t.val).arg(t_pos);
    lb.arg(prp).arg(pcol).arg(pval);
    lb.arg(&lv.inv_diag).arg(&omega).arg(&rho);
    match r {
        Some((rpos, rval)) => lb.arg(rpos).arg(rval),
        None => lb.arg(&null).arg(&null),
    };
    // SAFETY: amg_smooth_fused walks its rows × lanes threads with a grid-stride loop, over
    // A (n32 rows), T, P's pattern of A·T (pval its entries), D⁻¹ (n32), t_pos (T's entries),
    // and, where given, R's positions and values (P's entries).
    unsafe { lb.launch(Gpu::cfg(grid(g, threads), BLOCK, 0)) }
        .map_err(|e| Gpu::launch_error("amg_smooth_fused", e))?;
    Ok(())
}

/// The pattern of `A·T` from its plan, with values to be written.
fn product_pattern<T: GpuScalar>(g: &Gpu, plan: &GpuSpgemmPlan) -> Result<DeviceCsr<T>> {
    let s = g.stream();
    let copy = |x: &CudaSlice<u32>| {
        s.clone_dtod(x)
            .map_err(|e| Error::cuda("copying the pattern of A·T", e))
    };
    Ok(DeviceCsr {
        nrows: plan.nrows(),
        ncols: plan.ncols(),
        nnz: plan.nnz(),
        row_ptr: copy(plan.row_ptr())?,
        col: copy(plan.col_idx())?,
        // SAFETY: amg_smooth_fused writes every entry of every row (zeroed first); an empty
        // product keeps one unread dummy.
        val: unsafe { g.alloc::<T>(plan.nnz().max(1))? },
    })
}

/// Where each entry of `t` sits in the pattern of `p` (every entry must be there: `A`'s
/// diagonal is stored); the lowest row that breaks it goes to `bad`, read at the end of the
/// setup.
fn positions<T: GpuScalar>(
    g: &Arc<Gpu>,
    t: &DeviceCsr<T>,
    p: &DeviceCsr<T>,
    bad: &mut CudaSlice<u32>,
) -> Result<CudaSlice<u32>> {
    let mut pos = g.zeros::<u32>(t.nnz.max(1))?;
    let n32 = t.nrows as u32;
    launch!(
        g,
        fu(g, "amg_t_positions")?,
        t.nrows,
        "amg_t_positions",
        [&t.row_ptr, &t.col, &n32, &p.row_ptr, &p.col, &mut pos, bad]
    );
    Ok(pos)
}

/// Where each entry of `p` sits in `r = pᵀ`.
fn transpose_positions<T: GpuScalar>(
    g: &Arc<Gpu>,
    p: &DeviceCsr<T>,
    r: &DeviceCsr<T>,
) -> Result<CudaSlice<u32>> {
    // SAFETY: amg_transpose_positions writes one position per entry of p.
    let mut pos = unsafe { g.alloc::<u32>(p.nnz.max(1))? };
    if p.nnz == 0 {
        g.stream()
            .memset_zeros(&mut pos)
            .map_err(|e| Error::cuda("clearing positions", e))?;
        return Ok(pos);
    }
    let n32 = p.nrows as u32;
    launch!(
        g,
        fu(g, "amg_transpose_positions")?,
        p.nrows,
        "amg_transpose_positions",
        [&p.row_ptr, &p.col, &n32, &r.row_ptr, &r.col, &mut pos]
    );
    Ok(pos)
}

/// The smoother's scaling vector of a level into `out` (`n` elements).
fn scaling<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    params: &AmgParams,
    out: &mut CudaSlice<T>,
) -> Result<()> {
    let n = lv.inv_diag.len();
    match params.smoother {
        Smoother::Chebyshev => g.stream().memcpy_dtod(&lv.inv_diag, out),
        Smoother::L1Jacobi => g.stream().memcpy_dtod(&lv.inv_l1, out),
        Smoother::Jacobi => {
            let w = T::of_f64(params.jacobi_weight);
            let n32 = n as u32;
            launch!(
                g,
                f::<T>(g, "amg_scaled")?,
                n,
                "amg_scaled",
                [out, &lv.inv_diag, &w, &n32]
            );
            Ok(())
        }
    }
    .map_err(|e| Error::cuda("copying a smoother scaling", e))
}

/// A level's smoother, its scaling vector allocated here.
fn new_smoother<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    params: &AmgParams,
) -> Result<LevelSmoother<CudaSlice<T>>> {
    // SAFETY: `scaling` writes all entries.
    let mut out = unsafe { g.alloc::<T>(lv.inv_diag.len())? };
    scaling(g, lv, params, &mut out)?;
    Ok(LevelSmoother::from_parts(out, lv.rho, params))
}

/// The full device setup from the fine matrix `fine` (moved into the hierarchy; see the module
/// docs).
pub(crate) fn setup<T: GpuScalar>(
    ops: &GpuOps<T>,
    fine: GpuCsr<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
) -> Result<AmgSetup<T, GpuOps<T>>> {
    let (built, state) = setup_state(ops, fine, candidates, params)?;
    Ok(AmgSetup {
        built,
        state: Box::new(state),
    })
}

/// Starts loading the kernel modules a device setup and its cycle use on a background thread
/// ([`Gpu::prepare_in_background`]), in the order the setup reaches them, and returns at once.
///
/// A setup calls it itself: its first phases start as soon as their own modules are in, and
/// the later modules load while the device runs them. A caller that knows a device setup will
/// follow calls it earlier, before work the loads can overlap (building or uploading the
/// matrix): the first setup of the process then finds its modules loaded. Keep the handle
/// until then (dropping it waits for the loads). Without the embedded kernels their compiles
/// share the host's cores.
pub fn prepare_device_setup<T: GpuScalar>(g: &Arc<Gpu>) -> crate::gpu::Preparing {
    let (major, minor) = g.compute_capability();
    let spmv = crate::spmv::gpu::SpmvPolicy::for_device((major, minor)).typed_defines::<T>();
    let class = crate::primitives::gpu::device_class(g);
    let scan = crate::primitives::gpu::scan_defines(class);
    let sort = crate::primitives::sort::gpu::onesweep_defines(class);
    g.prepare_in_background(vec![
        (&AMG_SETUP_SRC, vec![]),
        (&sg::AGGREGATE_SRC, vec![]),
        (&crate::primitives::sources::SCAN_LOOKBACK, scan),
        (&crate::backend::gpu::BLAS1, vec![]),
        (&crate::primitives::sort::KERNELS, vec![]),
        (&crate::primitives::sort::ONESWEEP_KERNELS, sort),
        (&crate::primitives::compact::KERNELS, vec![]),
        (&sg::SPGEMM_SRC, vec![]),
        (&sg::BLOCK_SRC, vec![]),
        (&crate::primitives::segreduce::KERNELS, vec![]),
        (&crate::csr::check_gpu::CSR_CHECK_SRC, vec![]),
        (&crate::spmv::gpu::SPMV_SRC, spmv),
        (&crate::backend::gpu::CG, vec![]),
        (&crate::backend::gpu::CHEBYSHEV, vec![]),
    ])
}

/// The hierarchy a device setup builds.
type DevBuilt<T> = Built<T, GpuOps<T>>;

fn setup_state<T: GpuScalar>(
    ops: &GpuOps<T>,
    fine: GpuCsr<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
) -> Result<(DevBuilt<T>, DeviceState<T>)> {
    let total = Instant::now();
    params.check()?;
    let g = ops.gpu();
    // SEGSPARSE_WAIT_LOG=1: the setup's own waits, printed at its end.
    drop(g.take_wait_log());
    let loading = prepare_device_setup::<T>(g);
    let (fingerprint, canonical) = check_fine_device(g, &fine)?;
    let (fine, canon) = if canonical {
        (fine, None)
    } else {
        let (c, canon) = canonicalize(g, &fine)?;
        (c, Some(canon))
    };
    let n = fine.nrows();
    check_fine_rows(n, candidates, params)?;
    let mut times = SetupTimes::default();
    // Rounding noise off the diagonal leaves the hierarchy's copy of the matrix (timed with
    // the strength phase, its sibling); a re-setup gathers the kept entries' new values.
    let clock = Instant::now();
    let (fine, kept) =
        match sg::aggregate::drop_small_with(g, (&fine).into(), params.drop_tol, false)? {
            Some((m, pos)) => (m.into_gpu_csr(g)?, Some(pos)),
            None => (fine, None),
        };
    phase(g, params, &mut times.strength, clock)?;
    let steps = params.spectral_steps;
    let clock = Instant::now();
    let lv0 = level_data(g, (&fine).into(), params.block_size, steps)?;
    phase(g, params, &mut times.smoother, clock)?;
    let mut b: Vec<CudaSlice<T>> = match candidates {
        Some(c) => c.iter().map(|v| g.upload(v)).collect::<Result<_>>()?,
        None => {
            let mut one = crate::backend::VectorOps::zeros(ops, n)?;
            crate::backend::VectorOps::fill(ops, &mut one, T::one())?;
            vec![one]
        }
    };
    let window = params.window(b.len());
    let mut data = vec![lv0];
    if params.improve_candidates > 0 {
        let clock = Instant::now();
        read_rhos(g, &mut data, steps)?;
        let sm = new_smoother(g, &data[0], params)?;
        let sweeps = params.improve_candidates;
        super::cycle::relax_candidates(ops, &fine, &sm, n, &mut b, sweeps)?;
        phase(g, params, &mut times.candidates, clock)?;
    }
    let mut mats = vec![fine];
    let mut pr: Vec<(GpuCsr<T>, GpuCsr<T>)> = Vec::new();
    let mut transfers = Vec::new();
    let mut bad = g.upload(&[u32::MAX])?;
    // The level's threshold: θ, or 0 while a level is built again (AmgParams::theta).
    let mut theta = params.theta;
    loop {
        let a_l = mats.last().expect("at least the fine level");
        let lv = data.last().expect("as many as levels");
        let n = a_l.nrows();
        if mats.len() >= params.max_levels || n <= params.coarse_size {
            break;
        }
        let clock = Instant::now();
        let s = strength(g, a_l.into(), lv.block, theta)?;
        phase(g, params, &mut times.strength, clock)?;
        let clock = Instant::now();
        let agg = crate::sparse::gpu::aggregate::aggregate_mis2_with(
            g,
            (&s).into(),
            params.seed,
            window,
            false,
        )?;
        drop(s);
        phase(g, params, &mut times.aggregate, clock)?;
        let nc = agg.num_aggregates * b.len();
        if params.stalled(theta, nc, n) {
            theta = 0.0;
            continue;
        }
        if nc == 0 || nc >= n {
            break;
        }
        let clock = Instant::now();
        let (t, bc) = tentative(g, &agg, lv.block, &b)?;
        phase(g, params, &mut times.tentative, clock)?;
        let clock = Instant::now();
        let at_plan = GpuSpgemmPlan::symbolic(g, a_l, &t)?;
        let lanes = smooth_lanes(params, b.len());
        let mut p = if lanes.is_some() {
            product_pattern(g, &at_plan)?
        } else {
            at_plan.numeric(a_l, &t)?
        };
        let t_pos = positions(g, &t, &p, &mut bad)?;
        if let Some(lanes) = lanes {
            let DeviceCsr {
                row_ptr, col, val, ..
            } = &mut p;
            smooth_fused(
                g,
                lv,
                steps,
                a_l.into(),
                &t,
                &t_pos,
                (row_ptr, col),
                val,
                None,
                params.omega,
                lanes,
            )?;
        } else {
            smooth(
                g,
                lv,
                steps,
                &p.row_ptr,
                &mut p.val,
                p.nrows,
                &t,
                &t_pos,
                params.omega,
            )?;
        }
        let r = sg::transpose(g, &p)?;
        let r_pos = transpose_positions(g, &p, &r)?;
        phase(g, params, &mut times.smooth, clock)?;
        let clock = Instant::now();
        let (galerkin, ac) = Galerkin::new(g, params, &r, a_l, &p, lv.block, b.len())?;
        phase(g, params, &mut times.galerkin, clock)?;
        if params.too_dense(theta, ac.nnz, a_l.nnz()) {
            theta = 0.0;
            continue;
        }
        theta = params.theta;
        let clock = Instant::now();
        let lvc = level_data(g, (&ac).into(), b.len(), steps)?;
        phase(g, params, &mut times.smoother, clock)?;
        let clock = Instant::now();
        let (p, r, ac) = (p.into_gpu_csr(g)?, r.into_gpu_csr(g)?, ac.into_gpu_csr(g)?);
        phase(g, params, &mut times.upload, clock)?;
        pr.push((p, r));
        mats.push(ac);
        data.push(lvc);
        drop(agg);
        transfers.push(DevTransfer {
            t,
            at_plan,
            t_pos,
            r_pos,
            galerkin,
            lanes,
        });
        b = bc;
    }
    let last = mats.last().expect("a level");
    params.check_coarsest(mats.len() - 1, last.nrows())?;
    let clock = Instant::now();
    let coarsest = CsrView::from(last).download(g)?;
    let bad = g.download(&bad)?[0];
    if bad != u32::MAX {
        return Err(Error::InvalidInput(format!(
            "AMG: row {bad} of A·T lacks an entry of T (a diagonal entry of A is missing)"
        )));
    }
    read_rhos(g, &mut data, steps)?;
    let (inv, coarse_solver) = dense_inverse(&coarsest)?;
    let coarse_inv = GpuCsr::upload(g, &inv)?;
    phase(g, params, &mut times.coarse, clock)?;
    let mut levels = Vec::with_capacity(mats.len());
    let mut info = Vec::with_capacity(mats.len());
    let mut pr = pr.into_iter();
    for (a, d) in mats.into_iter().zip(&data) {
        info.push(LevelSummary {
            rows: a.nrows(),
            nnz: a.nnz(),
            block: d.block,
            rho: d.rho,
        });
        let (p, r) = match pr.next() {
            Some((p, r)) => (Some(p), Some(r)),
            None => (None, None),
        };
        levels.push(DeviceLevel {
            smoother: new_smoother(g, d, params)?,
            a,
            p,
            r,
        });
    }
    loading.wait()?;
    g.synchronize()?;
    times.total = total.elapsed().as_secs_f64();
    if g.wait_log_on() {
        g.print_wait_log(&format!(
            "AMG setup, {} rows, {:.3} ms",
            n,
            times.total * 1e3
        ));
    }
    let state = DeviceState {
        gpu: g.clone(),
        fingerprint,
        canon,
        kept,
        transfers,
        data,
        steps,
        candidates: candidates.map_or(1, |c| c.len()),
        host_candidates: candidates
            .filter(|_| params.improve_candidates > 0)
            .map(|c| c.to_vec()),
        failed: false,
        graph: None,
        resetups: 0,
    };
    Ok((
        Built {
            levels,
            coarse_inv,
            info,
            coarse_solver,
            times,
        },
        state,
    ))
}

/// The device setup from a host matrix: canonicalised on the host, uploaded, then [`setup`].
pub(crate) fn setup_host<T: GpuScalar>(
    ops: &GpuOps<T>,
    a: &CsrMatrix<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
) -> Result<AmgSetup<T, GpuOps<T>>> {
    let clock = Instant::now();
    params.check()?;
    let a = a.canonical();
    let fine = GpuCsr::upload(ops.gpu(), &a)?;
    let up = clock.elapsed().as_secs_f64();
    let mut s = setup(ops, fine, candidates, params)?;
    s.built.times.upload += up;
    s.built.times.total += up;
    Ok(s)
}

impl<T: GpuScalar> DeviceState<T> {
    /// Queues the numeric re-setup from the fine values already in `built`'s finest matrix to
    /// the coarsest matrix and every level's ρ (nothing is read back, nothing allocated but
    /// what the phase timers' synchronisations need): per level the smoother scalings and the
    /// Lanczos steps, `A·T` into `P`, its smoothing, `R`'s values, `R·A` and `(R·A)·P`.
    fn queue_numeric(
        &mut self,
        params: &AmgParams,
        built: &mut Built<T, GpuOps<T>>,
        work: &mut Lanczos,
        times: &mut SetupTimes,
    ) -> Result<()> {
        let g = &self.gpu;
        let steps = self.steps;
        let levels = &mut built.levels;
        for l in 0..levels.len() {
            let clock = Instant::now();
            queue_level_data(g, (&levels[l].a).into(), &mut self.data[l], steps, work)?;
            phase(g, params, &mut times.smoother, clock)?;
            let Some(tr) = self.transfers.get_mut(l) else {
                break;
            };
            let (head, tail) = levels.split_at_mut(l + 1);
            let (lv, next) = (&mut head[l], &mut tail[0]);
            let p =
                lv.p.as_mut()
                    .expect("a transfer below every level but the last");
            let clock = Instant::now();
            let r = lv.r.as_mut().expect("R with P");
            if let Some(lanes) = tr.lanes {
                smooth_fused(
                    g,
                    &self.data[l],
                    steps,
                    (&lv.a).into(),
                    &tr.t,
                    &tr.t_pos,
                    (tr.at_plan.row_ptr(), tr.at_plan.col_idx()),
                    p.values_mut(),
                    Some((&tr.r_pos, r.values_mut())),
                    params.omega,
                    lanes,
                )?;
                phase(g, params, &mut times.smooth, clock)?;
                let clock = Instant::now();
                tr.galerkin
                    .numeric_into(g, &*r, &lv.a, &*p, next.a.values_mut())?;
                phase(g, params, &mut times.galerkin, clock)?;
                continue;
            }
            tr.at_plan.numeric_into(&lv.a, &tr.t, p.values_mut())?;
            let prows = p.nrows();
            smooth(
                g,
                &self.data[l],
                steps,
                tr.at_plan.row_ptr(),
                p.values_mut(),
                prows,
                &tr.t,
                &tr.t_pos,
                params.omega,
            )?;
            let nnz = p.nnz() as u32;
            if nnz > 0 {
                launch!(
                    g,
                    f::<T>(g, "amg_scatter")?,
                    p.nnz(),
                    "amg_scatter",
                    [p.device_parts().2, &tr.r_pos, r.values_mut(), &nnz]
                );
            }
            phase(g, params, &mut times.smooth, clock)?;
            let clock = Instant::now();
            tr.galerkin
                .numeric_into(g, &*r, &lv.a, &*p, next.a.values_mut())?;
            phase(g, params, &mut times.galerkin, clock)?;
        }
        Ok(())
    }

    /// Records [`queue_numeric`](Self::queue_numeric) as a CUDA graph into `self.graph` (the
    /// shapes of a re-setup are fixed: every array is the hierarchy's, the Lanczos arrays are
    /// kept with the graph). Recording runs nothing; the caller launches the graph. When another
    /// thread uses the device (a capture would record its work too), queues the kernels
    /// directly instead and returns true.
    fn record(&mut self, params: &AmgParams, built: &mut Built<T, GpuOps<T>>) -> Result<bool> {
        let g = self.gpu.clone();
        let mut work = Lanczos::new(&g, self.fingerprint.rows)?;
        let mut times = SetupTimes::default();
        if !g.begin_capture()? {
            self.queue_numeric(params, built, &mut work, &mut times)?;
            return Ok(true);
        }
        let queued = self.queue_numeric(params, built, &mut work, &mut times);
        let graph = g.end_capture();
        queued?;
        let graph = graph?.ok_or_else(|| {
            Error::InvalidInput("AMG update: the recorded re-setup was empty".into())
        })?;
        self.graph = Some(ResetupGraph { graph, _work: work });
        Ok(false)
    }

    /// The numeric re-setup from the new fine values on the device (see the module docs).
    fn update_device(
        &mut self,
        ops: &GpuOps<T>,
        a: &GpuCsr<T>,
        params: &AmgParams,
        built: &mut Built<T, GpuOps<T>>,
    ) -> Result<()> {
        let total = Instant::now();
        let g = self.gpu.clone();
        let g = &g;
        let (fp, canonical) = check_fine_device(g, a)?;
        if fp != self.fingerprint {
            return Err(Error::InvalidInput(format!(
                "AMG update: the new matrix ({} rows, {} entries) does not have the pattern the \
                 hierarchy was built for ({} rows, {} entries); build a new one",
                fp.rows, fp.nnz, self.fingerprint.rows, self.fingerprint.nnz
            )));
        }
        if self.failed {
            return Err(Error::InvalidInput(
                "AMG update: an earlier update of this hierarchy failed part-way; build a new \
                 hierarchy"
                    .into(),
            ));
        }
        if params.improve_candidates > 0 {
            // The candidates are smoothed with the new values, so T changes: a whole setup.
            let cands = self.host_candidates.clone();
            let (fresh, state) = setup_state(ops, a.try_clone()?, cands.as_deref(), params)?;
            *built = fresh;
            *self = state;
            return Ok(());
        }
        if canonical == self.canon.is_some() {
            return Err(Error::InvalidInput(format!(
                "AMG update: the new matrix stores the entries of its rows in another order \
                 than the matrix the hierarchy was built for ({}); build a new one",
                if canonical {
                    "whose rows were unsorted or repeated a column"
                } else {
                    "with sorted rows"
                }
            )));
        }
        let mut times = SetupTimes::default();
        let clock = Instant::now();
        // The canonical form's values, checked before the hierarchy changes.
        let canon_vals = match &self.canon {
            Some(c) => {
                let v = c.plan.numeric(a, &c.eye)?;
                check_fine_view(g, (&v).into())?;
                Some(v.val)
            }
            None => None,
        };
        self.failed = true;
        {
            let fine = built.levels[0].a.values_mut();
            let src = canon_vals.as_ref().unwrap_or(a.device_parts().2);
            match &self.kept {
                Some(pos) => {
                    let nnz = pos.len();
                    let nnz32 = nnz as u32;
                    launch!(
                        g,
                        f::<T>(g, "amg_gather")?,
                        nnz,
                        "amg_gather",
                        [src, pos, fine, &nnz32]
                    );
                }
                None => g
                    .stream()
                    .memcpy_dtod(src, fine)
                    .map_err(|e| Error::cuda("copying the new values", e))?,
            }
        }
        phase(g, params, &mut times.upload, clock)?;
        let graphs = params.resetup_graph && !params.phase_times;
        let mut queued = false;
        if graphs && self.graph.is_none() && self.resetups > 0 {
            queued = self.record(params, built)?;
        }
        let replay = if graphs { self.graph.as_ref() } else { None };
        if let Some(r) = replay {
            r.graph
                .launch()
                .map_err(|e| Error::cuda("launching the recorded AMG re-setup", e))?;
        } else if !queued {
            let mut work = Lanczos::new(g, self.fingerprint.rows)?;
            self.queue_numeric(params, built, &mut work, &mut times)?;
        }
        self.resetups += 1;
        let steps = self.steps;
        let levels = &mut built.levels;
        let clock = Instant::now();
        let coarsest = CsrView::from(&levels.last().expect("a level").a).download(g)?;
        read_rhos(g, &mut self.data, steps)?;
        let (inv, coarse_solver) = dense_inverse(&coarsest)?;
        // The inverse is dense (n × n), so its pattern is the last one's: the values go into
        // the matrix in use and its SpMV table is kept.
        let c = &mut built.coarse_inv;
        if c.nrows() == inv.nrows() && c.nnz() == inv.nnz() {
            g.upload_into(inv.values(), c.values_mut())?;
        } else {
            built.coarse_inv = GpuCsr::upload(g, &inv)?;
        }
        built.coarse_solver = coarse_solver;
        phase(g, params, &mut times.coarse, clock)?;
        for ((lv, d), info) in levels.iter_mut().zip(&self.data).zip(built.info.iter_mut()) {
            scaling(g, d, params, &mut lv.smoother.scale)?;
            lv.smoother.set_rho(d.rho, params);
            info.rho = d.rho;
        }
        g.synchronize()?;
        times.total = total.elapsed().as_secs_f64();
        built.times = times;
        self.failed = false;
        Ok(())
    }
}

impl<T: GpuScalar> HierarchyState<T, GpuOps<T>> for DeviceState<T> {
    fn update(
        &mut self,
        ops: &GpuOps<T>,
        a: UpdateInput<'_, T, GpuOps<T>>,
        params: &AmgParams,
        built: &mut Built<T, GpuOps<T>>,
    ) -> Result<()> {
        match a {
            UpdateInput::Backend(m) => self.update_device(ops, m, params, built),
            UpdateInput::Host(a) => {
                let clock = Instant::now();
                let a = a.canonical();
                if a.nrows() != self.fingerprint.rows || a.nnz() != self.fingerprint.nnz {
                    return Err(Error::InvalidInput(format!(
                        "AMG update: the new matrix ({}×{}, {} entries) does not have the \
                         pattern the hierarchy was built for ({} rows, {} entries); build a \
                         new one",
                        a.nrows(),
                        a.ncols(),
                        a.nnz(),
                        self.fingerprint.rows,
                        self.fingerprint.nnz
                    )));
                }
                let m = GpuCsr::upload(&self.gpu, &a)?;
                let up = clock.elapsed().as_secs_f64();
                self.update_device(ops, &m, params, built)?;
                built.times.upload += up;
                built.times.total += up;
                Ok(())
            }
        }
    }

    fn candidates(&self) -> usize {
        self.candidates
    }

    fn poisoned(&self) -> bool {
        self.failed
    }

    fn level_matrices(
        &self,
        _ops: &GpuOps<T>,
        levels: &[DeviceLevel<T, GpuOps<T>>],
    ) -> Result<Vec<CsrMatrix<T>>> {
        levels.iter().map(|l| download(&self.gpu, &l.a)).collect()
    }

    fn prolongators(
        &self,
        _ops: &GpuOps<T>,
        levels: &[DeviceLevel<T, GpuOps<T>>],
    ) -> Result<Vec<CsrMatrix<T>>> {
        levels
            .iter()
            .filter_map(|l| l.p.as_ref())
            .map(|p| download(&self.gpu, p))
            .collect()
    }
}

/// A host copy of a level's device matrix.
fn download<T: GpuScalar>(g: &Gpu, a: &GpuCsr<T>) -> Result<CsrMatrix<T>> {
    CsrView::from(a).download(g)
}
