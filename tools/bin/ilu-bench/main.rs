//! `ilu-bench`: the ILU/IC measurements in one process on the GPU, each beside its peer.
//!
//! - GMRES(30) without a preconditioner and with ILU(0) (GPU factorization included in the time
//!   to solution) on the nonsymmetric corpus matrices;
//! - CG and PCG + IC(0) on the SPD corpus matrices;
//! - the triangular solves of those factors (`L` and `U`): ours (level-by-level,
//!   synchronization-free, and the automatic choice) against cuSPARSE `SpSV`, solve phase and
//!   analysis phase timed separately.
//!
//! Times of single kernels or solves are medians of CUDA-event timings (each over `--reps`
//! back-to-back calls) after a warm-up; solver times are wall clock with the device
//! synchronised, after a warm-up run of every kernel on a small matrix.
//!
//! Usage: `ilu-bench [--data DIR] [--format json|markdown] [--only NAME,...]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use serde_json::{json, Value};

use cudarc::driver::CudaSlice;
use segsparse::backend::gpu::GpuOps;
use segsparse::backend::Identity;
use segsparse::gpu::Gpu;
use segsparse::precond::{Ic0, Ilu0, IncompleteParams, SptrsvAlgorithm};
use segsparse::solvers::{cg, gmres, pcg, SolveError, SolveInfo, SolveParams};
use segsparse::sparse::incomplete::gpu::{GpuFactorization, GpuIncompleteFactor};
use segsparse::sparse::incomplete::FactorSummary;
use segsparse::sparse::incomplete::{
    triangle_of, FactorKind, Fill, IncompleteFactor, IncompleteStructure,
};
use segsparse::sparse::triangular::cusparse_peer::CusparseSpsv;
use segsparse::sparse::triangular::gpu::{GpuTriPlan, GpuTriangular};
use segsparse::sparse::triangular::{Diagonal, Triangle, TriangularPlan};
use segsparse::spmv::gpu::GpuCsr;
use segsparse::CsrMatrix;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Markdown tables.
    Markdown,
    /// One JSON object per measurement (then the tables).
    Json,
}

/// ilu-bench: GMRES(30) ± ILU(0), CG vs PCG + IC(0), and SpTRSV vs cuSPARSE SpSV, on the GPU.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Directory of the corpus (`NAME.mtx.gz`); default `$SEGSPARSE_DATA`, else `../shared/matrices`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
    /// Only these matrices (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Back-to-back solves per CUDA-event timing.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Iteration limit of the Krylov solves.
    #[arg(long, default_value_t = 20_000)]
    max_iters: usize,
    /// Skip the Krylov solves (triangular solves only).
    #[arg(long)]
    sptrsv_only: bool,
    /// Jacobi sweeps of the approximate ILU(0) application measured beside the exact one
    /// (fewer than 8 stagnate GMRES on raefsky2, orsirr_1, olm1000, hor_131: see ilu.md).
    #[arg(long, default_value_t = 8)]
    sweeps: usize,
    /// Skip the warm-up (for profiling the first launches).
    #[arg(long)]
    no_warm_up: bool,
    /// Only the application modes and the automatic choice (`bench` = `modes` and `auto`):
    /// per matrix, the unpreconditioned and Jacobi solves, ILU(0)/IC(0) in the natural order
    /// applied exactly, multicoloured and applied exactly, and with the automatic ordering and
    /// application; one application against one SpMV; `auto`'s choice against the fastest.
    #[arg(long)]
    modes_only: bool,
    /// Skip the application modes and the automatic choice.
    #[arg(long)]
    no_modes: bool,
    /// Only the factorizations: per matrix, the level analysis on the CPU and on the GPU, and
    /// the numeric factorization on the host, level by level and synchronization-free on the GPU
    /// (each a re-factorization on the kept pattern), against the CPU factor.
    #[arg(long)]
    factor_only: bool,
    /// Only the GPU factor's setup (`bench` = "setup"): the whole construction, and its pattern
    /// analysis with the host's level analysis and plan upload against the device's level
    /// analysis; on the `--only` matrices (or every corpus matrix) and, with `--poisson N`, the
    /// N×N 2-D Poisson matrix (IC).
    #[arg(long)]
    setup_only: bool,
    /// Side of the 2-D Poisson matrix of `--setup-only` (0: none).
    #[arg(long, default_value_t = 0)]
    poisson: usize,
    /// ILUT's drop tolerance in the application modes' ILUT rows (nonsymmetric matrices:
    /// `ilut max-product natural exact`, `ilut max-product rcm exact`).
    #[arg(long, default_value_t = segsparse::sparse::incomplete::AUTO_DROP_TOL)]
    ilu_drop_tol: f64,
    /// ILUT's most entries per row of L and of U in those rows.
    #[arg(long, default_value_t = segsparse::sparse::incomplete::AUTO_MAX_PER_ROW)]
    ilu_max_per_row: usize,
}

const NONSYM: &[&str] = &[
    "raefsky2",
    "orsirr_1",
    "sherman5",
    "west0479",
    "fs_183_1",
    "hor_131",
    "arc130",
    "watt_2",
    "cage8",
    "ex6",
    "qh1484",
    "rajat19",
    "adder_dcop_05",
    "bayer10",
    "olm1000",
    "Pd",
];
const SPD: &[&str] = &[
    "bcsstk01",
    "bcsstk03",
    "bcsstk09",
    "bcsstk13",
    "bcsstk16",
    "494_bus",
    "1138_bus",
    "nos4",
    "gr_30_30",
    "plat362",
    "Trefethen_500",
    "mesh1e1",
];

fn load(dir: &Path, name: &str) -> Option<CsrMatrix<f64>> {
    for ext in ["mtx.gz", "mtx"] {
        let p = dir.join(format!("{name}.{ext}"));
        if p.exists() {
            return segsparse::io::read_matrix_market(&p).ok();
        }
    }
    None
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median over 5 timings of `reps` calls of `f`, per call, in seconds.
fn time_per_call(
    gpu: &Gpu,
    reps: usize,
    mut f: impl FnMut() -> segsparse::Result<()>,
) -> segsparse::Result<f64> {
    f()?;
    gpu.synchronize()?;
    let mut ts = Vec::new();
    for _ in 0..5 {
        ts.push(
            gpu.time(|| {
                for _ in 0..reps {
                    f()?;
                }
                Ok(())
            })? / reps as f64,
        );
    }
    Ok(median(ts))
}

struct Out {
    format: Format,
    records: Vec<Value>,
}

impl Out {
    fn emit(&mut self, v: Value) {
        if self.format == Format::Json {
            println!("{v}");
        }
        self.records.push(v);
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let dir = cli
        .data
        .clone()
        .or_else(|| std::env::var("SEGSPARSE_DATA").ok().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("../shared/matrices"));
    let gpu = Gpu::shared()?;
    let be = GpuOps::<f64>::new(&gpu)?;
    let mut out = Out {
        format: cli.format,
        records: Vec::new(),
    };
    let pick = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .filter(|n| cli.only.is_empty() || cli.only.iter().any(|o| o == *n))
            .map(|s| s.to_string())
            .collect()
    };
    if !cli.no_warm_up {
        warm_up(&gpu, &be)?;
    }
    let device = gpu.name().to_string();
    let params = SolveParams {
        max_iters: cli.max_iters,
        record_history: false,
        ..Default::default()
    };

    if cli.setup_only {
        let mut cases: Vec<(String, CsrMatrix<f64>, bool)> = Vec::new();
        for (name, spd) in pick(NONSYM)
            .into_iter()
            .map(|n| (n, false))
            .chain(pick(SPD).into_iter().map(|n| (n, true)))
        {
            match load(&dir, &name) {
                Some(a) => cases.push((name, a, spd)),
                None => eprintln!("{name}: not found in {}", dir.display()),
            }
        }
        if cli.poisson > 0 {
            let a = segsparse::generate::poisson2d::<f64>(cli.poisson)?;
            cases.push((format!("poisson2d_{}", cli.poisson), a, true));
        }
        for (name, a, spd) in &cases {
            setup_case(&gpu, name, a, *spd, &device, &mut out)?;
        }
        return Ok(());
    }
    if cli.factor_only {
        for (name, spd) in pick(NONSYM)
            .into_iter()
            .map(|n| (n, false))
            .chain(pick(SPD).into_iter().map(|n| (n, true)))
        {
            let Some(a) = load(&dir, &name) else {
                eprintln!("{name}: not found in {}", dir.display());
                continue;
            };
            factor_case(&gpu, &name, &a, spd, &device, &mut out)?;
        }
        factor_tables(&out.records);
        return Ok(());
    }
    if !cli.no_modes {
        for (name, spd) in pick(NONSYM)
            .into_iter()
            .map(|n| (n, false))
            .chain(pick(SPD).into_iter().map(|n| (n, true)))
        {
            let Some(a) = load(&dir, &name) else {
                eprintln!("{name}: not found in {}", dir.display());
                continue;
            };
            let ilut = (cli.ilu_drop_tol, cli.ilu_max_per_row);
            modes_case(
                &gpu, &be, &name, &a, spd, &params, cli.reps, ilut, &device, &mut out,
            )?;
        }
    }
    if cli.modes_only {
        modes_tables(&out.records);
        return Ok(());
    }
    for name in pick(NONSYM) {
        let Some(a) = load(&dir, &name) else {
            eprintln!("{name}: not found in {}", dir.display());
            continue;
        };
        if !cli.sptrsv_only {
            gmres_case(&gpu, &be, &name, &a, &params, cli.sweeps, &device, &mut out)?;
        }
        let ip = IncompleteParams {
            auto_shift: true,
            ..Default::default()
        };
        match IncompleteFactor::new(&a, FactorKind::Ilu0, &ip) {
            Ok(f) => {
                let l = triangle_of(&f.matrix(), Triangle::Lower, None);
                let u = f.upper_matrix();
                sptrsv_case(
                    &gpu,
                    &name,
                    "ilu0 L",
                    &l,
                    Triangle::Lower,
                    Diagonal::Unit,
                    cli.reps,
                    &device,
                    &mut out,
                )?;
                sptrsv_case(
                    &gpu,
                    &name,
                    "ilu0 U",
                    &u,
                    Triangle::Upper,
                    Diagonal::NonUnit,
                    cli.reps,
                    &device,
                    &mut out,
                )?;
            }
            Err(e) => eprintln!("{name}: no ILU(0) factor: {e}"),
        }
    }
    for name in pick(SPD) {
        let Some(a) = load(&dir, &name) else {
            eprintln!("{name}: not found in {}", dir.display());
            continue;
        };
        if !cli.sptrsv_only {
            pcg_case(&gpu, &be, &name, &a, &params, &device, &mut out)?;
        }
        let ip = IncompleteParams {
            auto_shift: true,
            ..Default::default()
        };
        if let Ok(f) = IncompleteFactor::new(&a, FactorKind::Ic0, &ip) {
            let l = f.lower_matrix();
            let u = f.upper_matrix();
            sptrsv_case(
                &gpu,
                &name,
                "ic0 L",
                &l,
                Triangle::Lower,
                Diagonal::NonUnit,
                cli.reps,
                &device,
                &mut out,
            )?;
            sptrsv_case(
                &gpu,
                &name,
                "ic0 Lᵀ",
                &u,
                Triangle::Upper,
                Diagonal::NonUnit,
                cli.reps,
                &device,
                &mut out,
            )?;
        }
    }
    tables(&out.records);
    modes_tables(&out.records);
    Ok(())
}

/// Compiles every kernel path once (a small convection–diffusion matrix).
fn warm_up(gpu: &Arc<Gpu>, be: &GpuOps<f64>) -> anyhow::Result<()> {
    let a = segsparse::generate::poisson2d::<f64>(20)?;
    let n = a.nrows();
    let da = GpuCsr::upload(gpu, &a)?;
    let db = gpu.upload(&vec![1.0; n])?;
    let mut dx = gpu.zeros::<f64>(n)?;
    let p = SolveParams::default();
    let m = Ilu0::new(be, &a, &IncompleteParams::default())?;
    gmres(be, &da, &m, &db, &mut dx, 30, &p)?;
    gmres(be, &da, &Identity, &db, &mut dx, 30, &p)?;
    let jp = IncompleteParams {
        jacobi_sweeps: 2,
        ..Default::default()
    };
    let mj = Ilu0::new(be, &a, &jp)?;
    gmres(be, &da, &mj, &db, &mut dx, 30, &p)?;
    let c = Ic0::new(be, &a, &IncompleteParams::default())?;
    pcg(be, &da, &c, &db, &mut dx, &p)?;
    cg(be, &da, &db, &mut dx, &p)?;
    for alg in [SptrsvAlgorithm::Levels, SptrsvAlgorithm::SyncFree] {
        let t = GpuTriangular::upload(gpu, &a, Triangle::Lower, Diagonal::NonUnit, alg)?;
        t.solve(&db, &mut dx)?;
    }
    let _ = CusparseSpsv::new(
        gpu,
        &triangle_of(&a, Triangle::Lower, None),
        Triangle::Lower,
        Diagonal::NonUnit,
        &db,
        &mut dx,
    )
    .and_then(|mut s| s.solve(&db, &mut dx));
    gpu.synchronize()?;
    Ok(())
}

/// Median seconds of `f` over `reps` calls, each synchronised.
fn median_wall(
    gpu: &Gpu,
    reps: usize,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        gpu.synchronize()?;
        let t0 = Instant::now();
        f()?;
        gpu.synchronize()?;
        t.push(t0.elapsed().as_secs_f64());
    }
    Ok(median(t))
}

/// The factor the GPU cases build: IC(0) for an SPD matrix, else ILU(0), with the automatic shift.
fn gpu_factor_of(spd: bool) -> (FactorKind, IncompleteParams) {
    let kind = if spd {
        FactorKind::Ic0
    } else {
        FactorKind::Ilu0
    };
    let ip = IncompleteParams {
        auto_shift: true,
        ..Default::default()
    };
    (kind, ip)
}

/// The GPU factor's setup on one matrix: the whole construction, and the level analysis of its
/// two triangles on the host (with the upload of the plans) against the device's.
fn setup_case(
    gpu: &Arc<Gpu>,
    name: &str,
    a: &CsrMatrix<f64>,
    spd: bool,
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    let (kind, ip) = gpu_factor_of(spd);
    let f = match GpuIncompleteFactor::new(gpu, a, kind, &ip) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{name}: no {} factor: {e}", kind.name());
            return Ok(());
        }
    };
    // The parameters the factor settled on (its fallbacks may change the ordering or fill).
    let p = IncompleteParams {
        shift: f.shift_used(),
        auto_shift: false,
        ..*f.params()
    };
    let setup_s = median_wall(gpu, 5, || {
        GpuIncompleteFactor::new(gpu, a, kind, &ip)?;
        Ok(())
    })?;
    let host_s = median_wall(gpu, 5, || {
        let s = IncompleteStructure::analyse_with(a, kind, &p)?;
        let (l, u) = (s.lower.as_ref(), s.upper.as_ref());
        for plan in l.into_iter().chain(u) {
            GpuTriPlan::upload(gpu, plan, SptrsvAlgorithm::Auto)?;
        }
        Ok(())
    })?;
    let (ld, tri) = match kind {
        FactorKind::Ilu0 => (Diagonal::Unit, None),
        FactorKind::Ic0 => (Diagonal::NonUnit, f.structure().transpose.clone()),
    };
    let device_s = median_wall(gpu, 5, || {
        let s = IncompleteStructure::analyse_for_device(a, kind, &p)?;
        let (rp, col) = (gpu.upload(&s.row_ptr)?, gpu.upload(&s.col_idx)?);
        let al = SptrsvAlgorithm::Auto;
        GpuTriPlan::analyse(gpu, s.n, &rp, &col, Triangle::Lower, ld, al)?;
        match &tri {
            None => {
                GpuTriPlan::analyse(gpu, s.n, &rp, &col, Triangle::Upper, Diagonal::NonUnit, al)?
            }
            Some((tp, tc, _)) => {
                let (tp, tc) = (gpu.upload(tp)?, gpu.upload(tc)?);
                GpuTriPlan::analyse(gpu, s.n, &tp, &tc, Triangle::Upper, Diagonal::NonUnit, al)?
            }
        };
        Ok(())
    })?;
    let sm = f.summary();
    let rec = json!({"bench": "setup", "matrix": name, "kind": kind.name(), "n": a.nrows(),
        "nnz": f.structure().col_idx.len(), "device": device, "lower_levels": sm.lower_levels,
        "upper_levels": sm.upper_levels, "lower_mode": sm.lower_mode, "upper_mode": sm.upper_mode,
        "factorization": f.factorization().name(), "setup_s": setup_s,
        "analysis_host_plans_s": host_s, "analysis_device_plans_s": device_s});
    eprintln!(
        "setup {name} {}: n {} nnz {} levels L {} U {} ({} / {}), {}: setup {:.3} ms; pattern + \
         plans: host {:.3} ms, device {:.3} ms",
        kind.name(),
        a.nrows(),
        f.structure().col_idx.len(),
        sm.lower_levels,
        sm.upper_levels,
        sm.lower_mode,
        sm.upper_mode,
        f.factorization().name(),
        setup_s * 1e3,
        host_s * 1e3,
        device_s * 1e3
    );
    out.emit(rec);
    Ok(())
}

/// The level analysis (CPU, GPU) and the factorization (host, levels, sync-free) of one matrix.
fn factor_case(
    gpu: &Arc<Gpu>,
    name: &str,
    a: &CsrMatrix<f64>,
    spd: bool,
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    let (kind, ip) = gpu_factor_of(spd);
    let mut f = match GpuIncompleteFactor::new(gpu, a, kind, &ip) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{name}: no {} factor: {e}", kind.name());
            return Ok(());
        }
    };
    let shifted = IncompleteParams {
        shift: f.shift_used(),
        auto_shift: false,
        ..ip
    };
    let cpu = match IncompleteFactor::new(a, kind, &shifted) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: no CPU {} factor: {e}", kind.name());
            return Ok(());
        }
    };
    // The factor's pattern (after any row matching): the analysis of its lower solve.
    let s = f.structure().clone();
    let pat = CsrMatrix::try_from_parts(
        s.n,
        s.n,
        s.row_ptr.clone(),
        s.col_idx.clone(),
        vec![1.0f64; s.col_idx.len()],
    )?;
    let dg = match kind {
        FactorKind::Ilu0 => Diagonal::Unit,
        FactorKind::Ic0 => Diagonal::NonUnit,
    };
    let cpu_analysis_s = median_wall(gpu, 5, || {
        TriangularPlan::analyse(&pat, Triangle::Lower, dg)?;
        Ok(())
    })?;
    let (rp, col) = (gpu.upload(&s.row_ptr)?, gpu.upload(&s.col_idx)?);
    let gpu_analysis_s = median_wall(gpu, 5, || {
        GpuTriPlan::analyse(
            gpu,
            s.n,
            &rp,
            &col,
            Triangle::Lower,
            dg,
            SptrsvAlgorithm::Auto,
        )?;
        Ok(())
    })?;
    let auto = f.factorization();
    let mut rec = json!({"bench": "factor", "matrix": name, "kind": kind.name(), "n": s.n,
        "nnz": s.col_idx.len(), "device": device, "levels": f.levels().0,
        "factor_launches": f.factor_groups(), "auto": auto.name(), "shift": f.shift_used(),
        "cpu_analysis_s": cpu_analysis_s, "gpu_analysis_s": gpu_analysis_s});
    for how in [
        GpuFactorization::Host,
        GpuFactorization::Levels,
        GpuFactorization::SyncFree,
    ] {
        f.set_factorization(how);
        let reps = if how == GpuFactorization::Levels && f.factor_groups() > 64 {
            3
        } else {
            7
        };
        let t = median_wall(gpu, reps, || {
            f.refactor(a)?;
            Ok(())
        })?;
        let got = f.download_values()?;
        let want = cpu.values();
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
        let err = got
            .iter()
            .zip(want)
            .map(|(g, w)| (g - w).abs() / scale)
            .fold(0.0, f64::max);
        let key = how.name().replace('-', "");
        rec[format!("{key}_s")] = json!(t);
        rec[format!("{key}_max_rel_diff")] = json!(err);
    }
    out.emit(rec);
    Ok(())
}

fn factor_tables(recs: &[Value]) {
    println!("\n### Factorization: level analysis and numeric factorization (re-factorization on the kept pattern), ms\n");
    println!("| matrix | kind | n | nnz | levels | launches | CPU analysis | GPU analysis | host | levels | sync-free | auto | max rel diff (sync-free) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let ms = |r: &Value, k: &str| format!("{:.3}", r[k].as_f64().unwrap_or(f64::NAN) * 1e3);
    for r in recs.iter().filter(|r| r["bench"] == "factor") {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1e} |",
            f(r, "matrix"),
            f(r, "kind"),
            f(r, "n"),
            f(r, "nnz"),
            f(r, "levels"),
            f(r, "factor_launches"),
            ms(r, "cpu_analysis_s"),
            ms(r, "gpu_analysis_s"),
            ms(r, "host_s"),
            ms(r, "levels_s"),
            ms(r, "syncfree_s"),
            f(r, "auto"),
            r["syncfree_max_rel_diff"].as_f64().unwrap_or(f64::NAN)
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn gmres_case(
    gpu: &Arc<Gpu>,
    be: &GpuOps<f64>,
    name: &str,
    a: &CsrMatrix<f64>,
    params: &SolveParams,
    sweeps: usize,
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    let n = a.nrows();
    let da = GpuCsr::upload(gpu, a)?;
    let db = gpu.upload(&vec![1.0; n])?;
    let mut dx = gpu.zeros::<f64>(n)?;
    // Unpreconditioned.
    gpu.synchronize()?;
    let t0 = Instant::now();
    let r = gmres(be, &da, &Identity, &db, &mut dx, 30, params);
    let plain_s = t0.elapsed().as_secs_f64();
    let (plain_it, plain_ok, plain_res) = match &r {
        Ok(i) => (i.iterations, true, i.relative_residual),
        Err(e) => (params.max_iters, false, residual_of(e)),
    };
    // ILU(0): setup (analysis on the CPU, factorization on the GPU) + solve.
    let ip = IncompleteParams {
        auto_shift: true,
        ..Default::default()
    };
    gpu.synchronize()?;
    let t0 = Instant::now();
    let setup = Ilu0::new(be, a, &ip);
    let setup_s = t0.elapsed().as_secs_f64();
    let rec = match setup {
        Err(e) => {
            json!({"bench": "gmres", "matrix": name, "n": n, "nnz": a.nnz(), "device": device,
            "none_iters": plain_it, "none_converged": plain_ok, "none_s": plain_s, "none_rel_res": plain_res,
            "ilu0_error": e.to_string()})
        }
        Ok(m) => {
            let t1 = Instant::now();
            let r = gmres(be, &da, &m, &db, &mut dx, 30, params);
            let solve_s = t1.elapsed().as_secs_f64();
            let (it, ok, res) = match &r {
                Ok(i) => (i.iterations, true, i.relative_residual),
                Err(e) => (params.max_iters, false, residual_of(e)),
            };
            let (lp, up) = m.factor().plans();
            // The approximate application: Jacobi sweeps on the triangles (setup again).
            let jp = IncompleteParams {
                jacobi_sweeps: sweeps,
                ..ip
            };
            gpu.synchronize()?;
            let t2 = Instant::now();
            let mj = Ilu0::new(be, a, &jp)?;
            let jsetup_s = t2.elapsed().as_secs_f64();
            let t3 = Instant::now();
            let rj = gmres(be, &da, &mj, &db, &mut dx, 30, params);
            let jsolve_s = t3.elapsed().as_secs_f64();
            let (jit, jok) = match &rj {
                Ok(i) => (i.iterations, true),
                Err(_) => (params.max_iters, false),
            };
            json!({"jacobi_sweeps": sweeps, "jacobi_iters": jit, "jacobi_converged": jok,
                "jacobi_setup_s": jsetup_s, "jacobi_solve_s": jsolve_s,
                "jacobi_time_ratio": (jsetup_s + jsolve_s) / plain_s,"bench": "gmres", "matrix": name, "n": n, "nnz": a.nnz(), "device": device,
                "none_iters": plain_it, "none_converged": plain_ok, "none_s": plain_s, "none_rel_res": plain_res,
                "ilu0_iters": it, "ilu0_converged": ok, "ilu0_rel_res": res,
                "ilu0_setup_s": setup_s, "ilu0_solve_s": solve_s, "ilu0_total_s": setup_s + solve_s,
                "shift": m.factor().shift_used(),
                "iter_ratio": it as f64 / plain_it as f64,
                "time_ratio": (setup_s + solve_s) / plain_s,
                "l_levels": lp.stats().levels, "u_levels": up.stats().levels,
                "l_alg": lp.algorithm().name(), "u_alg": up.algorithm().name(),
                "factor_launches": m.factor().factor_groups()})
        }
    };
    out.emit(rec);
    Ok(())
}

/// Mean seconds of one `f()` over `reps` back-to-back calls (device synchronised around).
fn mean_call(
    gpu: &Gpu,
    reps: usize,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    f()?;
    gpu.synchronize()?;
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    gpu.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / reps as f64)
}

/// One configuration's solve: (setup s, solve s, iterations, converged, apply s, summary).
type ModeRun = (f64, f64, usize, bool, f64, Option<FactorSummary>);

/// Sets up `kind` (None: no preconditioner, Some(None): Jacobi) with `ip` and solves (CG/PCG for
/// SPD, GMRES(30) otherwise), timing setup, solve and one application.
#[allow(clippy::too_many_arguments)]
fn run_mode(
    gpu: &Arc<Gpu>,
    be: &GpuOps<f64>,
    a: &CsrMatrix<f64>,
    da: &GpuCsr<f64>,
    spd: bool,
    precond: &str,
    ip: &IncompleteParams,
    params: &SolveParams,
    reps: usize,
) -> anyhow::Result<std::result::Result<ModeRun, String>> {
    use segsparse::backend::Preconditioner;
    use segsparse::precond::Jacobi;
    let n = a.nrows();
    let db = gpu.upload(&vec![1.0; n])?;
    let mut dx = gpu.zeros::<f64>(n)?;
    let mut dz = gpu.zeros::<f64>(n)?;
    let solve = |m: &dyn Fn(&mut CudaSlice<f64>) -> std::result::Result<SolveInfo, SolveError>,
                 dx: &mut CudaSlice<f64>| {
        let t = Instant::now();
        let r = m(dx);
        let _ = gpu.synchronize();
        (t.elapsed().as_secs_f64(), r)
    };
    let done = |r: &std::result::Result<SolveInfo, SolveError>| match r {
        Ok(i) => (i.iterations, true),
        Err(SolveError::NotConverged { iterations, .. })
        | Err(SolveError::Stagnation { iterations, .. }) => (*iterations, false),
        Err(_) => (params.max_iters, false),
    };
    gpu.synchronize()?;
    let t0 = Instant::now();
    macro_rules! go {
        ($m:expr, $summary:expr) => {{
            let m = $m;
            gpu.synchronize()?;
            let setup = t0.elapsed().as_secs_f64();
            let (s, r) = solve(
                &|dx| {
                    if spd {
                        pcg(be, da, &m, &db, dx, params)
                    } else {
                        gmres(be, da, &m, &db, dx, 30, params)
                    }
                },
                &mut dx,
            );
            let (it, ok) = done(&r);
            let apply = mean_call(gpu, reps, || Ok(m.apply(be, &db, &mut dz)?))?;
            Ok(Ok((setup, s, it, ok, apply, $summary(&m))))
        }};
    }
    match precond {
        "none" => {
            let (s, r) = solve(
                &|dx| {
                    if spd {
                        cg(be, da, &db, dx, params)
                    } else {
                        gmres(be, da, &Identity, &db, dx, 30, params)
                    }
                },
                &mut dx,
            );
            let (it, ok) = done(&r);
            Ok(Ok((0.0, s, it, ok, 0.0, None)))
        }
        "jacobi" => match Jacobi::from_matrix(be, a) {
            Ok(m) => go!(m, |_: &Jacobi<_>| None),
            Err(e) => Ok(Err(e.to_string())),
        },
        _ if spd => match Ic0::new(be, a, ip) {
            Ok(m) => go!(m, |m: &Ic0<f64, GpuOps<f64>>| Some(m.summary())),
            Err(e) => Ok(Err(e.to_string())),
        },
        _ => match Ilu0::new(be, a, ip) {
            Ok(m) => go!(m, |m: &Ilu0<f64, GpuOps<f64>>| Some(m.summary())),
            Err(e) => Ok(Err(e.to_string())),
        },
    }
}

/// The application modes and the automatic choice on one matrix (`bench` = `modes`, `auto`).
#[allow(clippy::too_many_arguments)]
fn modes_case(
    gpu: &Arc<Gpu>,
    be: &GpuOps<f64>,
    name: &str,
    a: &CsrMatrix<f64>,
    spd: bool,
    params: &SolveParams,
    reps: usize,
    ilut: (f64, usize),
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    use segsparse::backend::LinearOperator;
    use segsparse::precond::auto;
    use segsparse::precond::{Application, Ordering, RowMatching};
    let n = a.nrows();
    let da = GpuCsr::upload(gpu, a)?;
    let dxs = gpu.upload(&vec![1.0; n])?;
    let mut dys = gpu.zeros::<f64>(n)?;
    let spmv = mean_call(gpu, reps, || Ok(da.apply(be, &dxs, &mut dys)?))?;
    let base = auto::auto_incomplete_params();
    let fac = if spd { "ic0" } else { "ilu0" };
    let mut configs: Vec<(String, &str, IncompleteParams)> = vec![
        ("none".into(), "none", base),
        ("jacobi".into(), "jacobi", base),
        (
            format!("{fac} natural exact"),
            fac,
            IncompleteParams {
                ordering: Ordering::Natural,
                application: Application::Exact,
                ..base
            },
        ),
        (
            format!("{fac} multicolor exact"),
            fac,
            IncompleteParams {
                ordering: Ordering::Multicolor,
                application: Application::Exact,
                ..base
            },
        ),
        (
            format!("{fac} multicolor exact, level kernels"),
            fac,
            IncompleteParams {
                ordering: Ordering::Multicolor,
                application: Application::Exact,
                algorithm: SptrsvAlgorithm::Levels,
                ..base
            },
        ),
        (
            format!("{fac} natural, 4 Jacobi sweeps"),
            fac,
            IncompleteParams {
                ordering: Ordering::Natural,
                jacobi_sweeps: 4,
                ..base
            },
        ),
        (
            format!("{fac} natural, 8 Jacobi sweeps"),
            fac,
            IncompleteParams {
                ordering: Ordering::Natural,
                jacobi_sweeps: 8,
                ..base
            },
        ),
        (
            format!("{fac} natural, 8 Jacobi sweeps, separate launches"),
            fac,
            IncompleteParams {
                ordering: Ordering::Natural,
                jacobi_sweeps: 8,
                ..base
            },
        ),
        (format!("{fac} auto"), fac, base),
    ];
    if !spd {
        // ILUT after the scaled maximum-product matching, and the pattern-based factor after a
        // maximum transversal (ILU(1), or ILU(0) where that is unstable: the automatic path on
        // a matrix without a usable diagonal before ILUT).
        let (drop_tol, max_per_row) = ilut;
        for (order, ordering) in [("natural", Ordering::Natural), ("rcm", Ordering::Rcm)] {
            configs.push((
                format!("ilut({drop_tol:e}, {max_per_row}) max-product {order} exact"),
                fac,
                IncompleteParams {
                    matching: RowMatching::MaxProduct,
                    ordering,
                    application: Application::Exact,
                    fill: Fill::Threshold {
                        drop_tol,
                        max_per_row,
                    },
                    ..base
                },
            ));
        }
        configs.push((
            format!("{fac} transversal, fill auto, exact"),
            fac,
            IncompleteParams {
                matching: RowMatching::On,
                application: Application::Exact,
                ordering: Ordering::Natural,
                ..base
            },
        ));
    }
    let mut best: Option<(String, f64)> = None;
    let mut exact_iters = None;
    for (config, precond, ip) in &configs {
        // The separate-launch configuration (read when the factor loads its kernels).
        if config.ends_with("separate launches") {
            std::env::set_var("SEGSPARSE_SWEEPS", "separate");
        }
        let result = run_mode(gpu, be, a, &da, spd, precond, ip, params, reps);
        std::env::remove_var("SEGSPARSE_SWEEPS");
        let rec = match result? {
            Err(e) => json!({"bench": "modes", "matrix": name, "n": n, "nnz": a.nnz(),
                "device": device, "config": config, "error": e}),
            Ok((setup, solve, it, ok, apply, summary)) => {
                if config.ends_with("natural exact") && ok {
                    exact_iters = Some(it);
                }
                let total = setup + solve;
                if ok && best.as_ref().is_none_or(|b| total < b.1) {
                    best = Some((config.clone(), total));
                }
                json!({"bench": "modes", "matrix": name, "n": n, "nnz": a.nnz(),
                    "device": device, "config": config, "method": if spd { "cg" } else { "gmres" },
                    "iters": it, "converged": ok, "setup_s": setup, "solve_s": solve,
                    "total_s": total, "apply_us": apply * 1e6, "spmv_us": spmv * 1e6,
                    "apply_over_spmv": apply / spmv,
                    "iters_over_exact": exact_iters.map(|e| it as f64 / e as f64),
                    "factor": summary})
            }
        };
        out.emit(rec);
    }
    // The automatic solve, timed from the host matrix (statistics included): with the probe
    // (the first solve on this pattern, then again from the per-pattern cache) and the rule alone.
    use segsparse::autosolve::{solve as auto_solve, ProbeParams};
    let db = gpu.upload(&vec![1.0; n])?;
    for (bench, probe) in [
        ("auto", ProbeParams::default()),
        ("auto-cached", ProbeParams::default()),
        (
            "auto-rule",
            ProbeParams {
                enabled: false,
                ..Default::default()
            },
        ),
    ] {
        let mut dx = gpu.zeros::<f64>(n)?;
        gpu.synchronize()?;
        let t0 = Instant::now();
        let r = auto_solve(be, &da, Some(a), &db, &mut dx, params, &probe);
        gpu.synchronize()?;
        let total = t0.elapsed().as_secs_f64();
        let rec = match r {
            Err(e) => json!({"bench": bench, "matrix": name, "device": device,
                "error": e.to_string()}),
            Ok(s) => {
                let (it, ok) = match &s.result {
                    Ok(i) => (i.iterations, true),
                    Err(SolveError::NotConverged { iterations, .. })
                    | Err(SolveError::Stagnation { iterations, .. }) => (*iterations, false),
                    Err(_) => (params.max_iters, false),
                };
                json!({"bench": bench, "matrix": name, "n": n, "nnz": a.nnz(), "device": device,
                    "choice": format!("{} + {}", s.choice.method.name(), s.choice.precond.name()),
                    "reason": s.choice.reason, "choose_s": s.choose_seconds,
                    "setup_s": s.setup_seconds, "solve_s": s.solve_seconds, "probe": s.probe,
                    "cached": s.cached, "fallback": s.fallback, "iters": it, "converged": ok,
                    "total_s": total, "fastest": best.as_ref().map(|b| b.0.clone()),
                    "fastest_s": best.as_ref().map(|b| b.1),
                    "ratio": best.as_ref().map(|b| total / b.1)})
            }
        };
        out.emit(rec);
    }
    Ok(())
}

fn modes_tables(recs: &[Value]) {
    println!("\n| matrix | config | iters | setup ms | solve ms | total ms | apply µs | apply/SpMV | iters/exact | L levels | U levels | L mode | U mode | order |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in recs.iter().filter(|r| r["bench"] == "modes") {
        if let Some(e) = r["error"].as_str() {
            println!(
                "| {} | {} | error: {} |",
                r["matrix"].as_str().unwrap_or(""),
                r["config"].as_str().unwrap_or(""),
                e
            );
            continue;
        }
        let g = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let fs = &r["factor"];
        println!(
            "| {} | {} | {}{} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} |",
            r["matrix"].as_str().unwrap_or(""),
            r["config"].as_str().unwrap_or(""),
            r["iters"],
            if r["converged"] == true { "" } else { " (nc)" },
            g("setup_s") * 1e3,
            g("solve_s") * 1e3,
            g("total_s") * 1e3,
            g("apply_us"),
            g("apply_over_spmv"),
            r["iters_over_exact"].as_f64().map_or("".into(), |v| format!("{v:.2}")),
            fs["lower_levels"],
            fs["upper_levels"],
            fs["lower_mode"].as_str().unwrap_or(""),
            fs["upper_mode"].as_str().unwrap_or(""),
            fs["ordering"].as_str().unwrap_or(""),
        );
    }
    println!("\n| matrix | auto's choice | iters | total ms | fastest explicit | its ms | ratio | reason |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in recs
        .iter()
        .filter(|r| r["bench"].as_str().is_some_and(|b| b.starts_with("auto")))
    {
        let g = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} {} | {} | {}{} | {:.2} | {} | {:.2} | {:.2} | {} |",
            r["matrix"].as_str().unwrap_or(""),
            r["bench"].as_str().unwrap_or(""),
            r["choice"].as_str().unwrap_or(""),
            r["iters"],
            if r["converged"] == true { "" } else { " (nc)" },
            g("total_s") * 1e3,
            r["fastest"].as_str().unwrap_or("—"),
            g("fastest_s") * 1e3,
            g("ratio"),
            r["reason"]
                .as_str()
                .unwrap_or(r["error"].as_str().unwrap_or("")),
        );
    }
}

fn residual_of(e: &segsparse::solvers::SolveError) -> f64 {
    match e {
        segsparse::solvers::SolveError::NotConverged { residual, .. }
        | segsparse::solvers::SolveError::Stagnation { residual, .. } => *residual,
        _ => f64::NAN,
    }
}

fn pcg_case(
    gpu: &Arc<Gpu>,
    be: &GpuOps<f64>,
    name: &str,
    a: &CsrMatrix<f64>,
    params: &SolveParams,
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    let n = a.nrows();
    let da = GpuCsr::upload(gpu, a)?;
    let db = gpu.upload(&vec![1.0; n])?;
    let mut dx = gpu.zeros::<f64>(n)?;
    gpu.synchronize()?;
    let t0 = Instant::now();
    let r = cg(be, &da, &db, &mut dx, params);
    let plain_s = t0.elapsed().as_secs_f64();
    let (plain_it, plain_ok) = match &r {
        Ok(i) => (i.iterations, true),
        Err(_) => (params.max_iters, false),
    };
    let ip = IncompleteParams {
        auto_shift: true,
        ..Default::default()
    };
    let t0 = Instant::now();
    let setup = Ic0::new(be, a, &ip);
    let setup_s = t0.elapsed().as_secs_f64();
    let rec = match setup {
        Err(e) => json!({"bench": "pcg", "matrix": name, "n": n, "nnz": a.nnz(), "device": device,
            "cg_iters": plain_it, "cg_converged": plain_ok, "cg_s": plain_s, "ic0_error": e.to_string()}),
        Ok(m) => {
            let t1 = Instant::now();
            let r = pcg(be, &da, &m, &db, &mut dx, params);
            let solve_s = t1.elapsed().as_secs_f64();
            let (it, ok) = match &r {
                Ok(i) => (i.iterations, true),
                Err(_) => (params.max_iters, false),
            };
            json!({"bench": "pcg", "matrix": name, "n": n, "nnz": a.nnz(), "device": device,
                "cg_iters": plain_it, "cg_converged": plain_ok, "cg_s": plain_s,
                "ic0_iters": it, "ic0_converged": ok, "ic0_setup_s": setup_s, "ic0_solve_s": solve_s,
                "shift": m.factor().shift_used(),
                "iter_ratio": it as f64 / plain_it as f64,
                "time_ratio": (setup_s + solve_s) / plain_s})
        }
    };
    out.emit(rec);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn sptrsv_case(
    gpu: &Arc<Gpu>,
    name: &str,
    which: &str,
    m: &CsrMatrix<f64>,
    tri: Triangle,
    diag: Diagonal,
    reps: usize,
    device: &str,
    out: &mut Out,
) -> anyhow::Result<()> {
    let n = m.nrows();
    let b: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 * 0.1).collect();
    let db = gpu.upload(&b)?;
    let mut dx = gpu.zeros::<f64>(n)?;
    let plan = TriangularPlan::analyse(m, tri, diag)?;
    let mut want = vec![0.0; n];
    plan.solve(m, &b, &mut want)?;
    let check = |dx: &cudarc::driver::CudaSlice<f64>| -> anyhow::Result<f64> {
        let got = gpu.download(dx)?;
        let scale = want.iter().fold(0.0f64, |s, v| s.max(v.abs())).max(1e-300);
        Ok(got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs() / scale)
            .fold(0.0, f64::max))
    };
    // Ours: analysis (CPU analysis + upload of the plan and matrix), then each algorithm.
    gpu.synchronize()?;
    let t0 = Instant::now();
    let mut t = GpuTriangular::upload(gpu, m, tri, diag, SptrsvAlgorithm::Auto)?;
    gpu.synchronize()?;
    let ours_analysis_s = t0.elapsed().as_secs_f64();
    let auto = t.plan().algorithm();
    let stats = t.plan().stats();
    let groups = t.plan().level_groups().len();
    let lanes = t.plan().lanes();
    let mut times = serde_json::Map::new();
    let mut err = 0.0f64;
    for alg in [SptrsvAlgorithm::Levels, SptrsvAlgorithm::SyncFree] {
        t.set_algorithm(alg);
        let s = time_per_call(gpu, reps, || t.solve(&db, &mut dx))?;
        err = err.max(check(&dx)?);
        times.insert(format!("{}_us", alg.name()), json!(s * 1e6));
    }
    let ours_us = times[&format!("{}_us", auto.name())]
        .as_f64()
        .unwrap_or(f64::NAN);
    // cuSPARSE SpSV: descriptors + buffer + analysis, then solves.
    gpu.synchronize()?;
    let t0 = Instant::now();
    let peer = CusparseSpsv::new(gpu, m, tri, diag, &db, &mut dx);
    gpu.synchronize()?;
    let peer_analysis_s = t0.elapsed().as_secs_f64();
    let (peer_us, peer_err) = match peer {
        Ok(mut p) => {
            let s = time_per_call(gpu, reps, || p.solve(&db, &mut dx))?;
            (s * 1e6, check(&dx)?)
        }
        Err(e) => {
            eprintln!("{name} {which}: cuSPARSE: {e}");
            (f64::NAN, f64::NAN)
        }
    };
    let mut rec = json!({"bench": "sptrsv", "matrix": name, "factor": which, "n": n,
        "offdiag_nnz": stats.offdiag_nnz, "levels": stats.levels, "max_width": stats.max_width,
        "groups": groups, "lanes": lanes, "auto": auto.name(), "ours_us": ours_us,
        "ours_analysis_ms": ours_analysis_s * 1e3, "cusparse_us": peer_us,
        "cusparse_analysis_ms": peer_analysis_s * 1e3, "speedup": peer_us / ours_us,
        "max_rel_err": err, "cusparse_max_rel_err": peer_err, "device": device});
    if let Value::Object(o) = &mut rec {
        o.extend(times);
    }
    out.emit(rec);
    Ok(())
}

fn f(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::Number(x) => {
            let x = x.as_f64().unwrap_or(f64::NAN);
            if x.fract() == 0.0 && x.abs() < 1e9 {
                format!("{x:.0}")
            } else if x.abs() >= 100.0 {
                format!("{x:.1}")
            } else {
                format!("{x:.3}")
            }
        }
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        _ => "—".into(),
    }
}

fn tables(recs: &[Value]) {
    let by = |b: &'static str| recs.iter().filter(move |r| r["bench"] == b);
    println!("\n### GMRES(30), rtol 1e-8, b = 1: none vs ILU(0) (setup = CPU analysis + GPU factorization)\n");
    println!("| matrix | n | nnz | none iters | none s | ILU(0) iters | setup s | solve s | iter ratio | time ratio | shift | L/U levels | L/U alg | +Jacobi sweeps: iters | s | time ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in by("gmres") {
        let conv = |k: &str, c: &str| {
            if r[c] == false {
                format!("{} (nc)", f(r, k))
            } else {
                f(r, k)
            }
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {}/{} | {} | {} | {} |",
            f(r, "matrix"),
            f(r, "n"),
            f(r, "nnz"),
            conv("none_iters", "none_converged"),
            f(r, "none_s"),
            conv("ilu0_iters", "ilu0_converged"),
            f(r, "ilu0_setup_s"),
            f(r, "ilu0_solve_s"),
            f(r, "iter_ratio"),
            f(r, "time_ratio"),
            f(r, "shift"),
            f(r, "l_levels"),
            f(r, "u_levels"),
            f(r, "l_alg"),
            f(r, "u_alg"),
            conv("jacobi_iters", "jacobi_converged"),
            f(r, "jacobi_solve_s"),
            f(r, "jacobi_time_ratio")
        );
    }
    println!("\n### CG vs PCG + IC(0), rtol 1e-8, b = 1\n");
    println!("| matrix | n | nnz | CG iters | CG s | IC(0) iters | setup s | solve s | iter ratio | time ratio | shift |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in by("pcg") {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            f(r, "matrix"),
            f(r, "n"),
            f(r, "nnz"),
            f(r, "cg_iters"),
            f(r, "cg_s"),
            f(r, "ic0_iters"),
            f(r, "ic0_setup_s"),
            f(r, "ic0_solve_s"),
            f(r, "iter_ratio"),
            f(r, "time_ratio"),
            f(r, "shift")
        );
    }
    println!("\n### SpTRSV (f64) vs cuSPARSE SpSV: solve µs (median), analysis ms\n");
    println!("| matrix | factor | n | nnz | levels | groups | lanes | levels µs | sync-free µs | auto | cuSPARSE µs | speedup | ours analysis ms | cuSPARSE analysis ms | max err |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in by("sptrsv") {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1e} |",
            f(r, "matrix"),
            f(r, "factor"),
            f(r, "n"),
            f(r, "offdiag_nnz"),
            f(r, "levels"),
            f(r, "groups"),
            f(r, "lanes"),
            f(r, "levels_us"),
            f(r, "sync-free_us"),
            f(r, "auto"),
            f(r, "cusparse_us"),
            f(r, "speedup"),
            f(r, "ours_analysis_ms"),
            f(r, "cusparse_analysis_ms"),
            r["max_rel_err"].as_f64().unwrap_or(f64::NAN)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }
}
