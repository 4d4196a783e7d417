//! The GPU rows of `spmv-bench`: every [`SpmvAlgorithm`] of segsparse and cuSPARSE's CSR ALG1
//! and ALG2 (after `cusparseSpMV_preprocess`), in the same process, on the same uploaded matrix,
//! timed the same way.
//!
//! Timing: CUDA events around a batch of back-to-back products on the GPU's stream, after a
//! warm-up; the batch is long enough (≥ [`Timing::min_sample_s`]) that event resolution and
//! launch gaps between samples do not count, and the median over [`Timing::iters`] batches is
//! reported. x and y stay the same across calls, as in an iterative solver: a matrix that fits
//! in L2 (raefsky2: 3.5 MB in f64, L2 of an H100: 50 MB) is measured L2-resident, and the
//! report says so.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use std::io::{self, Write};

use anyhow::{Context, Result};
use segsparse::gpu::Gpu;
use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv, GpuCsr, GpuScalar, SpmvAlgorithm};
use segsparse::{CsrMatrix, Precision};

use crate::implementations::{median, Backend, Implementation, Measurement, Problem, Timing};
use crate::output::Row;

thread_local! {
    static STATE: RefCell<Option<Rc<GpuState>>> = const { RefCell::new(None) };
}

/// Opens the shared device and returns the GPU rows (see [`gpu_implementations`]), or why no
/// device can be used.
pub fn open() -> std::result::Result<Vec<Box<dyn Implementation>>, String> {
    let g = Gpu::shared().map_err(|e| e.to_string())?;
    let state = GpuState::new(g);
    STATE.with(|s| *s.borrow_mut() = Some(state.clone()));
    Ok(gpu_implementations(&state))
}

/// The GPU comparison of one matrix, after the main table: the device and its copy bandwidth
/// (measured once in this process), then per GPU row µs, GFLOP/s, GB/s, % of the copy
/// bandwidth, SpMV/s, the speed-up over the best cuSPARSE algorithm of the same precision, and
/// the max relative error. Nothing when no GPU row was measured.
pub fn write_gpu_table(out: &mut impl Write, rows: &[Row]) -> io::Result<()> {
    let Some(state) = STATE.with(|s| s.borrow().clone()) else {
        return Ok(());
    };
    let gpu_rows: Vec<&Row> = rows.iter().filter(|r| r.backend == "gpu").collect();
    if gpu_rows.is_empty() {
        return Ok(());
    }
    let copy = state.copy_bandwidth().map_err(io::Error::other)?;
    let l2 = state.l2_bytes();
    writeln!(
        out,
        "GPU     {} ({}), device copy bandwidth {:.0} GB/s (read + write, measured in this run), L2 {} MB",
        state.gpu().name(),
        state.gpu().arch(),
        copy / 1e9,
        l2 >> 20
    )?;
    writeln!(
        out,
        "{:<34} {:<4} {:>10} {:>9} {:>8} {:>7} {:>10} {:>9} {:>11}",
        "implementation",
        "prec",
        "median µs",
        "GFLOP/s",
        "GB/s",
        "% copy",
        "SpMV/s",
        "×cuSPARSE",
        "max rel err"
    )?;
    let num = |v: f64, p: usize| {
        if v.is_finite() {
            format!("{v:.p$}")
        } else {
            "—".to_string()
        }
    };
    let mut fits_l2 = false;
    for r in &gpu_rows {
        let best_cusparse = rows
            .iter()
            .filter(|c| {
                c.backend == "gpu"
                    && c.precision == r.precision
                    && c.implementation.starts_with("cusparse")
                    && c.median_us.is_finite()
            })
            .map(|c| c.median_us)
            .fold(f64::INFINITY, f64::min);
        let bytes = r.gbs * 1e9 * r.median_us * 1e-6;
        fits_l2 |= bytes.is_finite() && bytes < l2 as f64;
        writeln!(
            out,
            "{:<34} {:<4} {:>10} {:>9} {:>8} {:>7} {:>10} {:>9} {:>11}",
            r.implementation,
            r.precision,
            num(r.median_us, if r.median_us < 100.0 { 2 } else { 1 }),
            num(r.gflops, 2),
            num(r.gbs, 1),
            num(100.0 * r.gbs * 1e9 / copy, 1),
            num(r.spmv_per_s, 0),
            num(best_cusparse / r.median_us, 2),
            if r.max_rel_err.is_finite() {
                format!("{:.2e}", r.max_rel_err)
            } else {
                "—".into()
            },
        )?;
    }
    writeln!(
        out,
        "(CUDA events around batches of back-to-back products after warm-up, median of the batches;          same uploaded matrix, x and y for every row; cuSPARSE after cusparseSpMV_preprocess;          ×cuSPARSE = best cuSPARSE CSR algorithm's time / this time)"
    )?;
    if fits_l2 {
        writeln!(
            out,
            "(the matrix and vectors fit in the {} MB L2 cache: repeated products run from L2,              as in an iterative solver, so GB/s may exceed the DRAM copy bandwidth)",
            l2 >> 20
        )?;
    }
    writeln!(out)
}

/// The device, the copy bandwidth measured once, and the last uploaded matrix (shared by all
/// GPU rows so the upload happens once per matrix and precision).
pub struct GpuState {
    gpu: Arc<Gpu>,
    copy_bw: RefCell<Option<f64>>,
    /// Milliseconds of the last tuning per precision.
    tune_ms: RefCell<std::collections::HashMap<&'static str, f64>>,
    cache32: Cache<f32>,
    cache64: Cache<f64>,
}

impl GpuState {
    /// Wraps an opened device.
    pub fn new(gpu: Arc<Gpu>) -> Rc<Self> {
        Rc::new(GpuState {
            gpu,
            copy_bw: RefCell::new(None),
            tune_ms: RefCell::new(Default::default()),
            cache32: RefCell::new(None),
            cache64: RefCell::new(None),
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The device's L2 cache size in bytes (0 when unknown).
    pub fn l2_bytes(&self) -> usize {
        self.gpu
            .context()
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_or(0, |v| v.max(0) as usize)
    }

    /// Device-to-device copy bandwidth (read + write bytes per second) over 512 MiB buffers,
    /// measured once per process.
    pub fn copy_bandwidth(&self) -> Result<f64> {
        if let Some(b) = *self.copy_bw.borrow() {
            return Ok(b);
        }
        let b = self.gpu.copy_bandwidth(512 << 20, 20)?;
        *self.copy_bw.borrow_mut() = Some(b);
        Ok(b)
    }
}

/// The last uploaded matrix of one precision, with the fingerprint of its problem.
type Cache<T> = RefCell<Option<(u64, Rc<GpuCsr<T>>)>>;

trait Cached: GpuScalar {
    fn cache(s: &GpuState) -> &Cache<Self>;
    fn matrix(p: &Problem) -> &CsrMatrix<Self>;
    fn x(p: &Problem) -> &[Self];
}
impl Cached for f32 {
    fn cache(s: &GpuState) -> &Cache<f32> {
        &s.cache32
    }
    fn matrix(p: &Problem) -> &CsrMatrix<f32> {
        &p.a32
    }
    fn x(p: &Problem) -> &[f32] {
        &p.x32
    }
}
impl Cached for f64 {
    fn cache(s: &GpuState) -> &Cache<f64> {
        &s.cache64
    }
    fn matrix(p: &Problem) -> &CsrMatrix<f64> {
        &p.a64
    }
    fn x(p: &Problem) -> &[f64] {
        &p.x64
    }
}

/// Identifies the matrix of a [`Problem`]: its shape and a sample of its entries and of x
/// (the address alone is not enough: the next matrix may be built at the same address).
fn fingerprint<T: Cached>(p: &Problem) -> u64 {
    use std::hash::{Hash, Hasher};
    let a = T::matrix(p);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (a.nrows(), a.ncols(), a.nnz()).hash(&mut h);
    let step = (a.nnz() / 4096).max(1);
    for k in (0..a.nnz()).step_by(step) {
        a.col_idx()[k].hash(&mut h);
        a.values()[k].as_f64().to_bits().hash(&mut h);
    }
    let x = T::x(p);
    for k in (0..x.len()).step_by((x.len() / 1024).max(1)) {
        x[k].as_f64().to_bits().hash(&mut h);
    }
    h.finish()
}

fn uploaded<T: Cached>(s: &GpuState, p: &Problem) -> Result<Rc<GpuCsr<T>>> {
    let key = fingerprint::<T>(p);
    if let Some((k, m)) = &*T::cache(s).borrow() {
        if *k == key {
            return Ok(m.clone());
        }
    }
    // Drop the previous matrix before uploading the next one (device memory).
    *T::cache(s).borrow_mut() = None;
    let m = Rc::new(GpuCsr::upload(&s.gpu, T::matrix(p)).context("uploading the matrix")?);
    *T::cache(s).borrow_mut() = Some((key, m.clone()));
    Ok(m)
}

/// Times `f` (which queues one product on the stream) with CUDA events: warm-up, then the
/// median over `t.iters` batches of seconds per product.
pub fn time_gpu(g: &Gpu, t: &Timing, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    // Warm-up: at least 3 calls and warmup_s of device time.
    let mut calls = 0u64;
    let mut spent = 0.0;
    while calls < 3 || spent < t.warmup_s {
        let batch = calls.clamp(1, 1 << 16);
        spent += g.time(|| {
            for _ in 0..batch {
                f().map_err(|e| segsparse::Error::InvalidInput(e.to_string()))?;
            }
            Ok(())
        })?;
        calls += batch;
    }
    let per_call = spent / calls as f64;
    let reps = ((t.min_sample_s / per_call.max(1e-9)).ceil() as u64).clamp(1, 1 << 16);
    let mut samples = Vec::with_capacity(t.iters.max(1));
    for _ in 0..t.iters.max(1) {
        let s = g.time(|| {
            for _ in 0..reps {
                f().map_err(|e| segsparse::Error::InvalidInput(e.to_string()))?;
            }
            Ok(())
        })?;
        samples.push(s / reps as f64);
    }
    Ok(median(&mut samples))
}

/// One of segsparse's GPU algorithms.
pub struct SegsparseGpu {
    state: Rc<GpuState>,
    alg: SpmvAlgorithm,
    name: String,
    tuned: bool,
}

impl SegsparseGpu {
    /// A row for `alg`.
    pub fn new(state: Rc<GpuState>, alg: SpmvAlgorithm) -> Self {
        let name = format!("segsparse gpu {}", alg.name());
        SegsparseGpu {
            state,
            alg,
            name,
            tuned: false,
        }
    }

    /// `Auto` after [`GpuCsr::tune`] (the measured choice, cached per pattern).
    pub fn tuned(state: Rc<GpuState>) -> Self {
        SegsparseGpu {
            state,
            alg: SpmvAlgorithm::Auto,
            name: "segsparse gpu tuned".into(),
            tuned: true,
        }
    }

    fn go<T: Cached>(&self, p: &Problem, t: &Timing) -> Result<Measurement> {
        let g = self.state.gpu().clone();
        let a = uploaded::<T>(&self.state, p)?;
        if self.tuned {
            let plan = a.tune().context("tuning the SpMV")?;
            self.state
                .tune_ms
                .borrow_mut()
                .insert(T::NAME, plan.seconds * 1e3);
        }
        let x = g.upload(T::x(p))?;
        // y poisoned with NaN: β = 0 must not read it.
        let mut y = g.upload(&vec![T::nan(); a.nrows()])?;
        let median_s = time_gpu(&g, t, || {
            a.spmv_with(self.alg, T::one(), &x, T::zero(), &mut y)
                .map_err(Into::into)
        })?;
        let y = g.download(&y)?.iter().map(|v| v.as_f64()).collect();
        Ok(Measurement {
            median_s,
            y,
            preprocess_s: a.preprocess_seconds(),
        })
    }
}

impl Implementation for SegsparseGpu {
    fn name(&self) -> &str {
        &self.name
    }
    fn backend(&self) -> Backend {
        Backend::Gpu
    }
    fn run(&self, p: &Problem, precision: Precision, t: &Timing) -> Result<Measurement> {
        match precision {
            Precision::F32 => self.go::<f32>(p, t),
            Precision::F64 => self.go::<f64>(p, t),
        }
    }
}

/// cuSPARSE `cusparseSpMV` (CSR, ALG1 or ALG2) after `cusparseSpMV_preprocess`.
pub struct CusparseGpu {
    state: Rc<GpuState>,
    alg: CusparseAlg,
}

impl CusparseGpu {
    /// A row for `alg`.
    pub fn new(state: Rc<GpuState>, alg: CusparseAlg) -> Self {
        CusparseGpu { state, alg }
    }

    fn go<T: Cached>(&self, p: &Problem, t: &Timing) -> Result<Measurement> {
        let g = self.state.gpu().clone();
        let a = uploaded::<T>(&self.state, p)?;
        let x = g.upload(T::x(p))?;
        let mut y = g.upload(&vec![T::nan(); a.nrows()])?;
        let (one, zero) = (T::one(), T::zero());
        let mut peer = CusparseSpmv::new(&a, self.alg, one, &x, zero, &mut y)
            .map_err(|e| anyhow::anyhow!("cuSPARSE not available: {e}"))?;
        let median_s = time_gpu(&g, t, || {
            peer.spmv(one, &x, zero, &mut y).map_err(Into::into)
        })?;
        drop(peer);
        let y = g.download(&y)?.iter().map(|v| v.as_f64()).collect();
        Ok(Measurement {
            median_s,
            y,
            preprocess_s: f64::NAN,
        })
    }
}

impl Implementation for CusparseGpu {
    fn name(&self) -> &str {
        self.alg.name()
    }
    fn backend(&self) -> Backend {
        Backend::Gpu
    }
    fn run(&self, p: &Problem, precision: Precision, t: &Timing) -> Result<Measurement> {
        match precision {
            Precision::F32 => self.go::<f32>(p, t),
            Precision::F64 => self.go::<f64>(p, t),
        }
    }
}

/// The copy bandwidth of this process's device in GB/s (measured once), or `None` when no
/// device was opened.
pub fn copy_gbs() -> Option<f64> {
    let state = STATE.with(|s| s.borrow().clone())?;
    state.copy_bandwidth().ok().map(|b| b / 1e9)
}

/// What `Auto` chose for the last matrix uploaded in each precision (`{"f32": name, ...}`).
pub fn auto_choices() -> serde_json::Value {
    let Some(state) = STATE.with(|s| s.borrow().clone()) else {
        return serde_json::Value::Null;
    };
    let mut m = serde_json::Map::new();
    let tune = state.tune_ms.borrow();
    let entry = |rule: SpmvAlgorithm, now: SpmvAlgorithm, prec: &str| {
        serde_json::json!({
            "rule": rule.name(),
            "now": now.name(),
            "tune_ms": tune.get(prec),
        })
    };
    if let Some((_, a)) = &*state.cache32.borrow() {
        m.insert(
            "f32".into(),
            entry(a.rule_algorithm(), a.resolved_algorithm(), "f32"),
        );
    }
    if let Some((_, a)) = &*state.cache64.borrow() {
        m.insert(
            "f64".into(),
            entry(a.rule_algorithm(), a.resolved_algorithm(), "f64"),
        );
    }
    serde_json::Value::Object(m)
}

/// The GPU rows, in report order: Auto, Fused, Rows, Vector, the look-back kernel, the paper's
/// algorithm, cuSPARSE, then `Auto` after tuning (last: tuning changes what `Auto` runs).
///
/// `SEGSPARSE_BENCH_GPU_ROWS` (comma-separated names such as `fused,vector,cusparse-alg1`)
/// keeps only the rows whose name contains one of them (tuning runs);
/// `SEGSPARSE_BENCH_VECTOR_LANES` (e.g. `2,4,8`) adds vector rows with those lanes per row.
pub fn gpu_implementations(state: &Rc<GpuState>) -> Vec<Box<dyn Implementation>> {
    let mut all: Vec<Box<dyn Implementation>> = vec![
        Box::new(SegsparseGpu::new(state.clone(), SpmvAlgorithm::Auto)),
        Box::new(SegsparseGpu::new(state.clone(), SpmvAlgorithm::Fused)),
        Box::new(SegsparseGpu::new(state.clone(), SpmvAlgorithm::Rows)),
        Box::new(SegsparseGpu::new(
            state.clone(),
            SpmvAlgorithm::Vector { lanes: 0 },
        )),
        Box::new(SegsparseGpu::new(
            state.clone(),
            SpmvAlgorithm::FusedLookback,
        )),
        Box::new(SegsparseGpu::new(
            state.clone(),
            SpmvAlgorithm::PaperSegscan,
        )),
        Box::new(CusparseGpu::new(state.clone(), CusparseAlg::Alg1)),
        Box::new(CusparseGpu::new(state.clone(), CusparseAlg::Alg2)),
        Box::new(SegsparseGpu::tuned(state.clone())),
    ];
    if let Ok(lanes) = std::env::var("SEGSPARSE_BENCH_VECTOR_LANES") {
        for l in lanes
            .split(',')
            .filter_map(|l| l.trim().parse::<u32>().ok())
        {
            if l.is_power_of_two() && l <= 32 {
                all.push(Box::new(SegsparseGpu::new(
                    state.clone(),
                    SpmvAlgorithm::Vector { lanes: l },
                )));
            }
        }
    }
    if let Ok(keep) = std::env::var("SEGSPARSE_BENCH_GPU_ROWS") {
        let keep: Vec<&str> = keep.split(',').map(str::trim).collect();
        all.retain(|i| keep.iter().any(|k| !k.is_empty() && i.name().contains(k)));
    }
    all
}
