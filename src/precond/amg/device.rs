//! The setup on the GPU: every phase of `setup.rs` on the device, the hierarchy built where the
//! cycle runs, nothing of size `n` crossing the bus except for several candidates (below).
//!
//! | phase | GPU | equals the CPU |
//! |---|---|---|
//! | strength, amalgamation | [`sparse::gpu::strength_symmetric`], [`sparse::gpu::amalgamate`] | bit for bit |
//! | MIS-2 aggregation | [`sparse::gpu::aggregate_mis2`] | the same aggregates |
//! | tentative prolongator, one candidate | [`sparse::gpu::tentative_single`] | bit for bit |
//! | tentative prolongator, several candidates | host QR per aggregate (`fit_candidates`) on the downloaded aggregation and candidates, `T` uploaded | bit for bit |
//! | `A·T`, `R·A`, `(R·A)·P` | [`GpuSpgemmPlan`] (symbolic once, numeric re-run by [`Amg::update`](super::Amg::update)) | bit for bit |
//! | smoothing `P = (I − ω/ρ·D⁻¹A)·T`, `R = Pᵀ` | `amg_smooth` (same two roundings per entry), [`sparse::gpu::transpose`] | bit for bit given the same ρ |
//! | `D⁻¹`, `D_l1⁻¹`, ρ(D⁻¹A) | `amg_level_scales`; 15 Lanczos steps with device vectors, dots summed in a fixed order | scalings bit for bit; ρ to rounding |
//! | coarse inverse | the coarsest matrix (≤ `coarse_size` rows) downloaded, inverted on the host, uploaded | bit for bit |
//!
//! So the aggregates and every pattern are the CPU's, and the values differ from the CPU
//! hierarchy only through the rounding of the ρ estimates (its dot products are summed in
//! another order), which moves ω/ρ in the last bits (`tests/all/amg.rs` checks both).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaSlice;

use super::coarse::dense_inverse;
use super::cycle::{DeviceLevel, LevelSmoother, Scratch};
use super::setup::{check_fine, ritz_max};
use super::tentative::{check_candidates, fit_candidates};
use super::{AmgParams, AmgSetup, Built, HierarchyState, LevelSummary, SetupTimes, Smoother};
use crate::backend::gpu::GpuOps;
use crate::backend::VectorOps;
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::gpu::kernels::{KernelSource, COMMON};
use crate::gpu::{Gpu, PushKernelArg};
use crate::sparse::gpu::{self as sg, CsrView, DeviceCsr, GpuAggregation, GpuSpgemmPlan};
use crate::spmv::gpu::{GpuCsr, GpuScalar};

/// `kernels/precond/amg_setup.cu`: smoother scalings, Lanczos steps, prolongator smoothing.
pub const AMG_SETUP_SRC: KernelSource = KernelSource {
    name: "precond/amg_setup.cu",
    text: include_str!("../../../kernels/precond/amg_setup.cu"),
    headers: &[&COMMON],
};

const BLOCK: u32 = 256;
/// Blocks of `amg_dot` (must match `AMG_DOT_BLOCKS`).
const DOT_BLOCKS: usize = 1024;

fn grid(g: &Gpu, n: usize) -> u32 {
    (n.div_ceil(BLOCK as usize) as u32).clamp(1, g.sm_count() * 16)
}

/// A level's smoother data on the device.
struct LevelData<T: GpuScalar> {
    inv_diag: CudaSlice<T>,
    inv_l1: CudaSlice<T>,
    rho: f64,
    block: usize,
}

/// The transfer from a level to the next, with what a numeric re-setup reuses.
struct DevTransfer {
    agg: GpuAggregation,
    /// The host copy of the aggregation, kept when `T` is fitted on the host (several
    /// candidates).
    host_agg: Option<crate::sparse::Aggregation>,
    at_plan: GpuSpgemmPlan,
    /// Where each entry of `T` sits in the pattern of `A·T` (= `P`).
    t_pos: CudaSlice<u32>,
    ra_plan: GpuSpgemmPlan,
    rap_plan: GpuSpgemmPlan,
}

/// The device setup's state: what [`HierarchyState::update`] reruns.
struct DeviceState<T: GpuScalar> {
    gpu: Arc<Gpu>,
    /// The fine matrix as given (its pattern is what an update must match).
    fine_ptr: Vec<u32>,
    fine_col: Vec<u32>,
    candidates: Option<Vec<Vec<T>>>,
    transfers: Vec<DevTransfer>,
    /// An update failed part-way (its transfers are gone): later updates are refused.
    failed: bool,
}

/// The kernels of this module for element type `T`.
fn f<T: GpuScalar>(g: &Gpu, root: &str) -> Result<cudarc::driver::CudaFunction> {
    g.typed_function::<T>(&AMG_SETUP_SRC, root, &[])
}

/// `x·y` of two device vectors: block partials in a fixed grid, summed here in block order.
fn dot(
    g: &Gpu,
    x: &CudaSlice<f64>,
    y: &CudaSlice<f64>,
    partials: &mut CudaSlice<f64>,
) -> Result<f64> {
    let n = x.len().min(y.len()) as u32;
    let k = g.function(&AMG_SETUP_SRC, "amg_dot", &[])?;
    let mut lb = g.stream().launch_builder(&k);
    lb.arg(x).arg(y).arg(&n).arg(&mut *partials);
    // SAFETY: amg_dot(const double* x, const double* y, u32 n, double* partials): x, y ≥ n
    // elements; partials has DOT_BLOCKS elements, one per block.
    unsafe { lb.launch(Gpu::cfg(DOT_BLOCKS as u32, BLOCK, 0)) }
        .map_err(|e| Gpu::launch_error("amg_dot", e))?;
    Ok(g.download(&*partials)?.iter().sum())
}

/// Launches a grid-stride kernel over `n` elements with the given arguments.
macro_rules! launch {
    ($g:expr, $k:expr, $n:expr, $name:literal, [$($a:expr),* $(,)?]) => {{
        let k = $k;
        let mut lb = $g.stream().launch_builder(&k);
        $( lb.arg($a); )*
        // SAFETY: every kernel of amg_setup.cu launched here is a grid-stride loop over its
        // `n` argument, whose arrays the caller sized as the kernel's comment says.
        unsafe { lb.launch(Gpu::cfg(grid($g, $n), BLOCK, 0)) }
            .map_err(|e| Gpu::launch_error($name, e))?;
    }};
}

/// The smoother data of a level: `D⁻¹`, `D_l1⁻¹` and ρ(D⁻¹A) by `steps` Lanczos steps (the
/// procedure of `setup::spectral_radius`, with device vectors).
fn level_data<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    block: usize,
    steps: usize,
) -> Result<LevelData<T>> {
    let n = a.nrows();
    let n32 = n as u32;
    let mut inv_diag = g.zeros::<T>(n.max(1))?;
    let mut inv_l1 = g.zeros::<T>(n.max(1))?;
    let mut s = g.zeros::<f64>(n.max(1))?;
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
            &mut inv_diag,
            &mut inv_l1,
            &mut s
        ]
    );
    let rho = if n == 0 {
        1.0
    } else {
        lanczos(g, a, &s, steps)?
    };
    Ok(LevelData {
        inv_diag,
        inv_l1,
        rho,
        block,
    })
}

/// The largest Ritz value of `steps` Lanczos steps on `D^{-1/2} A D^{-1/2}`.
fn lanczos<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    s: &CudaSlice<f64>,
    steps: usize,
) -> Result<f64> {
    let n = a.nrows();
    let n32 = n as u32;
    let mut partials = g.zeros::<f64>(DOT_BLOCKS)?;
    let mut v = g.zeros::<f64>(n)?;
    let mut vp = g.zeros::<f64>(n)?;
    let mut w = g.zeros::<f64>(n)?;
    let k_apply = f::<T>(g, "amg_lanczos_apply")?;
    let fun = |name: &str| g.function(&AMG_SETUP_SRC, name, &[]);
    launch!(
        g,
        fun("amg_lanczos_start")?,
        n,
        "amg_lanczos_start",
        [&mut v, &n32]
    );
    let nv = dot(g, &v, &v, &mut partials)?.sqrt();
    launch!(
        g,
        fun("amg_scale_double")?,
        n,
        "amg_scale_double",
        [&mut v, &nv, &n32]
    );
    let (mut alpha, mut beta) = (Vec::new(), Vec::new());
    let mut b_prev = 0.0f64;
    for _ in 0..steps.min(n).max(1) {
        {
            let k = k_apply.clone();
            let mut lb = g.stream().launch_builder(&k);
            lb.arg(a.row_ptr())
                .arg(a.col())
                .arg(a.val())
                .arg(&n32)
                .arg(s)
                .arg(&v)
                .arg(&mut w);
            // SAFETY: amg_lanczos_apply_T(rp, col, val, u32 n, const double* s, const double* v,
            // double* y): a square n×n CSR, s, v and y n elements; 8 lanes per row.
            unsafe { lb.launch(Gpu::cfg(grid(g, n.div_ceil(4) * 32), BLOCK, 0)) }
                .map_err(|e| Gpu::launch_error("amg_lanczos_apply", e))?;
        }
        let al = dot(g, &w, &v, &mut partials)?;
        launch!(
            g,
            fun("amg_lanczos_orth")?,
            n,
            "amg_lanczos_orth",
            [&mut w, &v, &vp, &al, &b_prev, &n32]
        );
        let bt = dot(g, &w, &w, &mut partials)?.sqrt();
        alpha.push(al);
        if bt.is_nan() || bt <= 1e-12 * al.abs().max(1e-300) {
            break;
        }
        beta.push(bt);
        std::mem::swap(&mut vp, &mut v);
        launch!(
            g,
            fun("amg_lanczos_next")?,
            n,
            "amg_lanczos_next",
            [&mut v, &w, &bt, &n32]
        );
        b_prev = bt;
    }
    Ok(ritz_max(&alpha, &beta))
}

/// The strength graph of a level on the device (on its nodes).
fn strength<T: GpuScalar>(
    g: &Arc<Gpu>,
    a: CsrView<'_, T>,
    block: usize,
    theta: f64,
) -> Result<DeviceCsr<T>> {
    if block == 1 {
        sg::strength_symmetric(g, a, theta)
    } else {
        let nodes = sg::amalgamate(g, a, block)?;
        sg::strength_symmetric(g, &nodes, theta)
    }
}

/// `T` and the coarse candidates: on the device for one candidate, by the host QR otherwise.
fn tentative<T: GpuScalar>(
    g: &Arc<Gpu>,
    agg: &GpuAggregation,
    host_agg: &mut Option<crate::sparse::Aggregation>,
    block: usize,
    b: &[CudaSlice<T>],
) -> Result<(DeviceCsr<T>, Vec<CudaSlice<T>>)> {
    if b.len() == 1 {
        let (t, bc) = sg::tentative_single(g, agg, block, &b[0])?;
        return Ok((t, vec![bc]));
    }
    if host_agg.is_none() {
        *host_agg = Some(agg.download(g)?);
    }
    let hb: Vec<Vec<T>> = b.iter().map(|v| g.download(v)).collect::<Result<_>>()?;
    let (t, bc) = fit_candidates(host_agg.as_ref().expect("set above"), block, &hb);
    let t = DeviceCsr::upload(g, &t)?;
    let bc = bc.iter().map(|v| g.upload(v)).collect::<Result<_>>()?;
    Ok((t, bc))
}

/// `P = (I − ω/ρ·D⁻¹A)·T` in place of the values of `at` (the product `A·T`).
fn smooth<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    at: &mut DeviceCsr<T>,
    t: &DeviceCsr<T>,
    t_pos: &CudaSlice<u32>,
    omega: f64,
) -> Result<()> {
    let neg_w = T::of_f64(-(omega / lv.rho));
    let n32 = at.nrows as u32;
    launch!(
        g,
        f::<T>(g, "amg_smooth")?,
        at.nrows,
        "amg_smooth",
        [
            &at.row_ptr,
            &mut at.val,
            &n32,
            &lv.inv_diag,
            &neg_w,
            &t.row_ptr,
            &t.val,
            t_pos
        ]
    );
    Ok(())
}

/// Where each entry of `t` sits in the pattern of `p` (every entry must be there: `A`'s
/// diagonal is stored).
fn positions<T: GpuScalar>(
    g: &Arc<Gpu>,
    t: &DeviceCsr<T>,
    p: &DeviceCsr<T>,
) -> Result<CudaSlice<u32>> {
    let mut pos = g.zeros::<u32>(t.nnz.max(1))?;
    let mut bad = g.upload(&[u32::MAX])?;
    let n32 = t.nrows as u32;
    launch!(
        g,
        g.function(&AMG_SETUP_SRC, "amg_t_positions", &[])?,
        t.nrows,
        "amg_t_positions",
        [&t.row_ptr, &t.col, &n32, &p.row_ptr, &p.col, &mut pos, &mut bad]
    );
    let bad = g.download(&bad)?[0];
    if bad != u32::MAX {
        return Err(Error::InvalidInput(format!(
            "AMG: row {bad} of A·T lacks an entry of T (a diagonal entry of A is missing)"
        )));
    }
    Ok(pos)
}

/// The smoother of a level from its device data.
fn smoother<T: GpuScalar>(
    g: &Arc<Gpu>,
    lv: &LevelData<T>,
    params: &AmgParams,
) -> Result<LevelSmoother<CudaSlice<T>>> {
    let n = lv.inv_diag.len();
    let scale = match params.smoother {
        Smoother::Chebyshev => g.stream().clone_dtod(&lv.inv_diag),
        Smoother::L1Jacobi => g.stream().clone_dtod(&lv.inv_l1),
        Smoother::Jacobi => {
            let mut out = g.zeros::<T>(n)?;
            let w = T::of_f64(params.jacobi_weight);
            let n32 = n as u32;
            launch!(
                g,
                f::<T>(g, "amg_scaled")?,
                n,
                "amg_scaled",
                [&mut out, &lv.inv_diag, &w, &n32]
            );
            Ok(out)
        }
    }
    .map_err(|e| Error::cuda("copying a smoother scaling", e))?;
    Ok(LevelSmoother::from_parts(scale, lv.rho, params))
}

/// Everything of one setup pass that the state does not keep.
struct Pass<T: GpuScalar> {
    levels: Vec<(GpuCsr<T>, LevelData<T>)>,
    transfers: Vec<(GpuCsr<T>, GpuCsr<T>)>,
}

/// Runs the level loop: a full setup when `plans` is `None`, else the numeric re-setup on the
/// kept aggregations and plans.
fn run_levels<T: GpuScalar>(
    ops: &GpuOps<T>,
    a: &CsrMatrix<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
    mut plans: Option<&mut Vec<DevTransfer>>,
    times: &mut SetupTimes,
) -> Result<(Pass<T>, Vec<DevTransfer>)> {
    let g = ops.gpu();
    let clock = Instant::now();
    let fine = GpuCsr::upload(g, a)?;
    times.upload += clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let lv0 = level_data(g, (&fine).into(), params.block_size, params.spectral_steps)?;
    times.smoother += clock.elapsed().as_secs_f64();
    let n = a.nrows();
    let mut b: Vec<CudaSlice<T>> = match candidates {
        Some(c) => c.iter().map(|v| g.upload(v)).collect::<Result<_>>()?,
        None => vec![g.upload(&vec![T::one(); n])?],
    };
    if params.improve_candidates > 0 {
        let clock = Instant::now();
        let sm = smoother(g, &lv0, params)?;
        let zero = ops.zeros(n)?;
        let mut work = Scratch::new(ops, n)?;
        for x in b.iter_mut() {
            for _ in 0..params.improve_candidates {
                super::cycle::smooth(ops, &fine, &sm, &zero, x, false, &mut work)?;
            }
        }
        times.candidates += clock.elapsed().as_secs_f64();
    }
    let mut levels = vec![(fine, lv0)];
    let mut transfers = Vec::new();
    let mut kept = Vec::new();
    loop {
        let (a_l, lv) = levels.last().expect("at least the fine level");
        let n = a_l.nrows();
        // A re-setup runs exactly the kept transfers; a setup stops by size and level count.
        let reuse = match plans.as_deref_mut() {
            Some(p) if p.is_empty() => break,
            Some(p) => Some(p.remove(0)),
            None if levels.len() >= params.max_levels || n <= params.coarse_size => break,
            None => None,
        };
        let (agg, mut host_agg, old) = match reuse {
            Some(tr) => (
                tr.agg,
                tr.host_agg,
                Some((tr.at_plan, tr.t_pos, tr.ra_plan, tr.rap_plan)),
            ),
            None => {
                let clock = Instant::now();
                let s = strength(g, a_l.into(), lv.block, params.theta)?;
                g.synchronize()?;
                times.strength += clock.elapsed().as_secs_f64();
                let clock = Instant::now();
                let agg = sg::aggregate_mis2(g, &s, params.seed)?;
                times.aggregate += clock.elapsed().as_secs_f64();
                let nc = agg.num_aggregates * b.len();
                if nc == 0 || nc >= n {
                    break;
                }
                (agg, None, None)
            }
        };
        let clock = Instant::now();
        let (t, bc) = tentative(g, &agg, &mut host_agg, lv.block, &b)?;
        g.synchronize()?;
        times.tentative += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (at_plan, old_pos, old_galerkin) = match old {
            Some((at, pos, ra, rap)) => (at, Some(pos), Some((ra, rap))),
            None => (GpuSpgemmPlan::symbolic(g, a_l, &t)?, None, None),
        };
        let mut p = at_plan.numeric(a_l, &t)?;
        let t_pos = match old_pos {
            Some(pos) => pos,
            None => positions(g, &t, &p)?,
        };
        smooth(g, lv, &mut p, &t, &t_pos, params.omega)?;
        let r = sg::transpose(g, &p)?;
        g.synchronize()?;
        times.smooth += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (ra_plan, rap_plan, ac) = match old_galerkin {
            Some((ra_plan, rap_plan)) => {
                let ra = ra_plan.numeric(&r, a_l)?;
                let ac = rap_plan.numeric(&ra, &p)?;
                (ra_plan, rap_plan, ac)
            }
            None => {
                let ra_plan = GpuSpgemmPlan::symbolic(g, &r, a_l)?;
                let ra = ra_plan.numeric(&r, a_l)?;
                let rap_plan = GpuSpgemmPlan::symbolic(g, &ra, &p)?;
                let ac = rap_plan.numeric(&ra, &p)?;
                (ra_plan, rap_plan, ac)
            }
        };
        g.synchronize()?;
        times.galerkin += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let lvc = level_data(g, (&ac).into(), b.len(), params.spectral_steps)?;
        times.smoother += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (p, r, ac) = (p.into_gpu_csr(g)?, r.into_gpu_csr(g)?, ac.into_gpu_csr(g)?);
        times.upload += clock.elapsed().as_secs_f64();
        transfers.push((p, r));
        levels.push((ac, lvc));
        kept.push(DevTransfer {
            agg,
            host_agg,
            at_plan,
            t_pos,
            ra_plan,
            rap_plan,
        });
        b = bc;
    }
    Ok((Pass { levels, transfers }, kept))
}

/// The full device setup (see the module docs).
pub(crate) fn setup<T: GpuScalar>(
    ops: &GpuOps<T>,
    a: &CsrMatrix<T>,
    candidates: Option<&[Vec<T>]>,
    params: &AmgParams,
) -> Result<AmgSetup<T, GpuOps<T>>> {
    let total = Instant::now();
    check_fine(a)?;
    params.check()?;
    let a = &*a.canonical();
    let n = a.nrows();
    if let Some(c) = candidates {
        check_candidates(c, n)?;
    }
    if n % params.block_size != 0 {
        return Err(Error::InvalidInput(format!(
            "AMG: {n} rows are not a multiple of the block size {}",
            params.block_size
        )));
    }
    let mut times = SetupTimes::default();
    let (pass, kept) = run_levels(ops, a, candidates, params, None, &mut times)?;
    let state = DeviceState {
        gpu: ops.gpu().clone(),
        fine_ptr: a.row_ptr().to_vec(),
        fine_col: a.col_idx().to_vec(),
        candidates: candidates.map(|c| c.to_vec()),
        transfers: kept,
        failed: false,
    };
    let built = finish(ops, pass, params, &mut times, total)?;
    Ok(AmgSetup {
        built,
        state: Box::new(state),
    })
}

/// The coarse inverse, the smoothers and the summary rows of a pass.
fn finish<T: GpuScalar>(
    ops: &GpuOps<T>,
    pass: Pass<T>,
    params: &AmgParams,
    times: &mut SetupTimes,
    total: Instant,
) -> Result<Built<T, GpuOps<T>>> {
    let g = ops.gpu();
    let clock = Instant::now();
    let coarsest = &pass.levels.last().expect("a level").0;
    let (inv, coarse_solver) = dense_inverse(&download(g, coarsest)?)?;
    let coarse_inv = GpuCsr::upload(g, &inv)?;
    times.coarse += clock.elapsed().as_secs_f64();
    let mut info = Vec::with_capacity(pass.levels.len());
    let mut levels = Vec::with_capacity(pass.levels.len());
    let mut tr = pass.transfers.into_iter();
    for (a, lv) in pass.levels {
        info.push(LevelSummary {
            rows: a.nrows(),
            nnz: a.nnz(),
            block: lv.block,
            rho: lv.rho,
        });
        let (p, r) = match tr.next() {
            Some((p, r)) => (Some(p), Some(r)),
            None => (None, None),
        };
        levels.push(DeviceLevel {
            smoother: smoother(g, &lv, params)?,
            a,
            p,
            r,
        });
    }
    g.synchronize()?;
    times.total = total.elapsed().as_secs_f64();
    Ok(Built {
        levels,
        coarse_inv,
        info,
        coarse_solver,
        times: *times,
    })
}

impl<T: GpuScalar> HierarchyState<T, GpuOps<T>> for DeviceState<T> {
    fn update(
        &mut self,
        ops: &GpuOps<T>,
        a: &CsrMatrix<T>,
        params: &AmgParams,
    ) -> Result<Built<T, GpuOps<T>>> {
        let total = Instant::now();
        check_fine(a)?;
        let a = &*a.canonical();
        if a.row_ptr() != &self.fine_ptr[..] || a.col_idx() != &self.fine_col[..] {
            return Err(Error::InvalidInput(format!(
                "AMG update: the new matrix ({}×{}, {} entries) does not have the pattern the \
                 hierarchy was built for ({} rows, {} entries); build a new one",
                a.nrows(),
                a.ncols(),
                a.nnz(),
                self.fine_ptr.len() - 1,
                self.fine_col.len()
            )));
        }
        if self.failed {
            return Err(Error::InvalidInput(
                "AMG update: an earlier update of this hierarchy failed part-way; build a new \
                 hierarchy"
                    .into(),
            ));
        }
        let mut times = SetupTimes::default();
        let mut kept = std::mem::take(&mut self.transfers);
        let cands = self.candidates.clone();
        // On an error the kept plans are gone; the hierarchy in use stays the previous one.
        self.failed = true;
        let (pass, kept) = run_levels(
            ops,
            a,
            cands.as_deref(),
            params,
            Some(&mut kept),
            &mut times,
        )?;
        self.transfers = kept;
        self.failed = false;
        finish(ops, pass, params, &mut times, total)
    }

    fn candidates(&self) -> usize {
        self.candidates.as_ref().map_or(1, |c| c.len())
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
