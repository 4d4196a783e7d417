//! Solver benchmark: time per iteration and time to solution of CG, Jacobi-PCG, Chebyshev-PCG,
//! BiCGSTAB and GMRES(30) on
//! the CPU and the GPU, f32 and f64, on Poisson 2D 1000² and 3D 100³ (1M rows each) and
//! raefsky2. Prints a markdown table (the one recorded in `benches/results/history/solvers.md`).
//!
//! `cargo bench -p segsparse-tools --bench solvers [-- FILTER]`; FILTER keeps the rows whose
//! `problem/method/backend/precision` label contains it. Set `SOLVER_BENCH_SMALL=1` to replace
//! the 1M-row problems by small ones (a quick CPU check of the harness).
//!
//! Not criterion: one solve of a 1M-row problem takes a good fraction of a second and there are
//! 40 configurations, so each figure is measured directly:
//!
//! - **time per iteration** = (t(N₂ iterations) − t(N₁ iterations)) / (N₂ − N₁), each t the
//!   median of 5 solves with tolerance 0 (so every solve runs exactly its iteration limit). The
//!   difference removes setup (allocation, the initial and final residual, the history copy).
//!   Each solve ends with a host read of the result, so the device is synchronised inside the
//!   timed region.
//! - **time to solution** = the median wall time of 3 complete solves to the tolerance (1e-8 for
//!   f64, 1e-3 for f32: see the results for why not less), including setup; CPU solves that would exceed the time budget are
//!   skipped and marked.
//! - The GPU rows also give the SpMV alone (median of 50, CUDA events), the bytes each iteration
//!   moves (SpMV bytes + the fused vector kernels' passes) and that volume over the device's
//!   copy bandwidth measured in the same process: the memory-traffic floor of this algorithm.

use std::time::Instant;

use segsparse::backend::{Cpu, Identity, LinearOperator, SolverOps, VectorOps};
use segsparse::precond::{Chebyshev, ChebyshevParams, Jacobi};
use segsparse::solvers::{
    bicgstab, cg, gmres, pcg, SolveError, SolveInfo, SolveParams, DEFAULT_RESTART,
};
use segsparse::{CsrMatrix, Scalar};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Method {
    Cg,
    Pcg,
    /// CG with the Chebyshev polynomial preconditioner (default degree 5: 4 products).
    CgPoly,
    Bicgstab,
    /// GMRES(30), no preconditioner.
    Gmres,
}

/// Degree of the Chebyshev rows.
const POLY_DEGREE: usize = 5;

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Cg => "cg",
            Method::Pcg => "pcg",
            Method::CgPoly => "cg-poly",
            Method::Bicgstab => "bicgstab",
            Method::Gmres => "gmres",
        }
    }
    /// Vector passes of n elements per iteration in our fused kernels (see the solvers' docs).
    fn vector_passes(self) -> usize {
        match self {
            Method::Cg => 10,
            Method::Pcg => 12,
            // CG with a separate preconditioner (r update 3, rᵀz 2, x/p update 5, pᵀq 2) plus
            // the polynomial: k + 1 poly steps of 8 (first: 5) passes.
            Method::CgPoly => 12 + 5 + 8 * (POLY_DEGREE - 1),
            Method::Bicgstab => 4 + 2 + 3 + 2 + 8,
            // Column j: two block dots (j + 2 vectors read each), two block updates (j + 3),
            // the normalisation (2): 4j + 12, averaged over j < 30 = 70; plus the per-cycle
            // restart (residual, combine, axpy) spread over 30 iterations (~1.5).
            Method::Gmres => 70 + 2,
        }
    }
    fn spmvs(self) -> usize {
        match self {
            Method::Bicgstab => 2,
            Method::CgPoly => POLY_DEGREE,
            // One per iteration, plus one per restart cycle.
            _ => 1,
        }
    }
}

fn run<T: Scalar, B: SolverOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    jac: &Jacobi<B::Vector>,
    m: Method,
    b: &B::Vector,
    x: &mut B::Vector,
    p: &SolveParams,
) -> Result<SolveInfo, SolveError> {
    match m {
        Method::Cg => cg(be, op, b, x, p),
        Method::Pcg => pcg(be, op, jac, b, x, p),
        Method::CgPoly => {
            // The preconditioner's setup (16 Arnoldi steps) is part of the solve.
            let d = jac.inverse_diagonal();
            let mut dinv = be.zeros(be.len(d))?;
            be.copy(d, &mut dinv)?;
            let cp = ChebyshevParams {
                degree: POLY_DEGREE,
                ..Default::default()
            };
            let poly = Chebyshev::new(be, op, Some(dinv), &cp)?;
            pcg(be, op, &poly, b, x, p)
        }
        Method::Bicgstab => bicgstab(be, op, &Identity, b, x, p),
        Method::Gmres => gmres(be, op, &Identity, b, x, DEFAULT_RESTART, p),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    label: String,
    per_iter: Option<f64>,
    iters: Option<usize>,
    solve: Option<f64>,
    residual: Option<f64>,
    note: String,
}

/// Times `iters` iterations (tolerance 0) of method `m`, median of `reps`; None if the method
/// stops early (breakdown).
#[allow(clippy::too_many_arguments)]
fn time_iters<T: Scalar, B: SolverOps<T>, A: LinearOperator<T, B>>(
    be: &B,
    op: &A,
    jac: &Jacobi<B::Vector>,
    m: Method,
    b: &B::Vector,
    x: &mut B::Vector,
    iters: usize,
    reps: usize,
) -> Result<f64, String> {
    let p = SolveParams {
        rel_tol: 0.0,
        max_iters: iters,
        record_history: false,
        ..Default::default()
    };
    let mut t = Vec::new();
    for _ in 0..reps {
        let c = Instant::now();
        match run(be, op, jac, m, b, x, &p) {
            Err(SolveError::NotConverged { iterations, .. }) if iterations == iters => {}
            Ok(i) => return Err(format!("converged after {} iterations", i.iterations)),
            Err(e) => return Err(e.to_string()),
        }
        t.push(c.elapsed().as_secs_f64());
    }
    Ok(median(t))
}

#[allow(clippy::too_many_arguments)]
fn measure<T: Scalar, B: SolverOps<T>, A: LinearOperator<T, B>>(
    label: String,
    be: &B,
    op: &A,
    jac: &Jacobi<B::Vector>,
    m: Method,
    b: &B::Vector,
    (n1, n2, reps): (usize, usize, usize),
    solve_budget_s: f64,
) -> Row {
    let n = be.len(b);
    let mut x = be.zeros(n).expect("alloc");
    let mut row = Row {
        label,
        per_iter: None,
        iters: None,
        solve: None,
        residual: None,
        note: String::new(),
    };
    // Warm-up (kernel compilation, caches).
    let _ = time_iters(be, op, jac, m, b, &mut x, 2, 1);
    match (
        time_iters(be, op, jac, m, b, &mut x, n1, reps),
        time_iters(be, op, jac, m, b, &mut x, n2, reps),
    ) {
        (Ok(t1), Ok(t2)) => row.per_iter = Some((t2 - t1) / (n2 - n1) as f64),
        (Err(e), _) | (_, Err(e)) => row.note = format!("timing: {e}"),
    }
    let tol = if T::BYTES == 4 { 1e-3 } else { 1e-8 };
    let p = SolveParams {
        rel_tol: tol,
        max_iters: 20_000,
        ..Default::default()
    };
    // A first solve gives the iteration count; skip repeats that would blow the budget.
    let est = row.per_iter.unwrap_or(0.0) * 5000.0;
    if est > solve_budget_s {
        row.note = format!("solve skipped: ~{est:.0} s at 5000 iterations exceeds the budget");
        return row;
    }
    let mut times = Vec::new();
    for rep in 0..3 {
        let c = Instant::now();
        match run(be, op, jac, m, b, &mut x, &p) {
            Ok(info) => {
                times.push(c.elapsed().as_secs_f64());
                row.iters = Some(info.iterations);
                row.residual = Some(info.relative_residual);
                if rep == 0 && info.solve_seconds * 3.0 > solve_budget_s {
                    break;
                }
            }
            Err(e) => {
                row.note = e.to_string();
                return row;
            }
        }
    }
    row.solve = Some(median(times));
    row
}

fn print_row(r: &Row) {
    let f = |v: Option<f64>, scale: f64, prec: usize| {
        v.map_or("—".to_string(), |v| format!("{:.prec$}", v * scale))
    };
    println!(
        "| {} | {} | {} | {} | {} | {} |",
        r.label,
        f(r.per_iter, 1e6, 1),
        r.iters.map_or("—".into(), |i| i.to_string()),
        f(r.solve, 1e3, 1),
        r.residual.map_or("—".into(), |v| format!("{v:.1e}")),
        r.note
    );
}

fn find(name: &str) -> Option<String> {
    let mut roots = vec![];
    if let Ok(d) = std::env::var("SEGSPARSE_DATA") {
        roots.push(std::path::PathBuf::from(d));
    }
    roots.push("matrices".into());
    roots.push(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../matrices"));
    roots
        .into_iter()
        .map(|r| r.join(format!("{name}.mtx.gz")))
        .find(|p| p.exists())
        .map(|p| p.to_string_lossy().into_owned())
}

fn problems(small: bool) -> Vec<(String, Vec<Method>)> {
    let all = vec![
        Method::Cg,
        Method::Pcg,
        Method::CgPoly,
        Method::Bicgstab,
        Method::Gmres,
    ];
    let mut v = if small {
        vec![
            ("poisson2d:100".to_string(), all.clone()),
            ("poisson3d:20".to_string(), all),
        ]
    } else {
        vec![
            ("poisson2d:1000".to_string(), all.clone()),
            ("poisson3d:100".to_string(), all),
        ]
    };
    if let Some(p) = find("raefsky2") {
        v.push((p, vec![Method::Bicgstab, Method::Gmres]));
    }
    v
}

fn bench_precision<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    filter: &str,
    small: bool,
) {
    for (spec, methods) in problems(small) {
        let a: CsrMatrix<T> = segsparse::load(&spec, 1).expect("problem");
        let short = spec.rsplit('/').next().unwrap_or(&spec).to_string();
        let b_host = vec![T::one(); a.nrows()];
        for &m in &methods {
            #[cfg(feature = "cuda")]
            gpu_rows::<T>(&a, &short, &b_host, m, filter);
            let label = format!("{short}/{}/cpu/{}", m.name(), T::NAME);
            if !label.contains(filter) {
                continue;
            }
            let jac = Jacobi::from_matrix(&Cpu, &a).expect("jacobi");
            let row = measure(label, &Cpu, &a, &jac, m, &b_host, (3, 13, 3), 30.0);
            print_row(&row);
        }
    }
}

#[cfg(feature = "cuda")]
fn gpu_rows<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    a: &CsrMatrix<T>,
    short: &str,
    b_host: &[T],
    m: Method,
    filter: &str,
) {
    use segsparse::backend::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let label = format!("{short}/{}/gpu/{}", m.name(), T::NAME);
    if !label.contains(filter) {
        return;
    }
    let Ok(g) = segsparse::gpu::Gpu::shared() else {
        return;
    };
    let ops = GpuOps::<T>::new(&g).expect("kernels");
    let da = GpuCsr::upload(&g, a).expect("upload");
    let jac = Jacobi::from_matrix(&ops, a).expect("jacobi");
    let b = ops.upload(b_host).expect("upload");
    let mut row = measure(label, &ops, &da, &jac, m, &b, (20, 220, 5), 60.0);
    // SpMV alone, and the traffic floor.
    let x = ops.upload(b_host).expect("upload");
    let mut y = ops.zeros(a.nrows()).expect("alloc");
    let mut ts = Vec::new();
    for i in 0..55 {
        let t = g
            .time(|| da.spmv(T::one(), &x, T::zero(), &mut y))
            .expect("spmv");
        if i >= 5 {
            ts.push(t);
        }
    }
    let spmv = median(ts);
    let bw = g.copy_bandwidth(256 << 20, 20).expect("bandwidth");
    let bytes = m.spmvs() * a.spmv_bytes() + m.vector_passes() * a.nrows() * T::BYTES;
    let floor = bytes as f64 / bw;
    let extra = format!(
        "SpMV {:.1} µs; {:.1} MB/iter; floor {:.1} µs at copy BW {:.0} GB/s{}",
        spmv * 1e6,
        bytes as f64 / 1e6,
        floor * 1e6,
        bw / 1e9,
        row.per_iter.map_or(String::new(), |t| format!(
            "; {:.0}% of floor",
            100.0 * floor / t
        ))
    );
    row.note = if row.note.is_empty() {
        extra
    } else {
        format!("{}; {extra}", row.note)
    };
    print_row(&row);
    if matches!(m, Method::Cg | Method::Pcg) {
        #[cfg(feature = "peers")]
        cusparse_row::<T>(&g, &ops, &da, &jac, &b, short, m, bw);
    }
}

/// The same solver with cuSPARSE's SpMV (the peer) as the operator: separates the cost of our
/// vector kernels from that of the SpMV.
#[cfg(feature = "peers")]
struct CusparseOp<'a, T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    std::cell::RefCell<segsparse::spmv::gpu::CusparseSpmv<'a, T>>,
    usize,
);

#[cfg(feature = "peers")]
impl<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>
    LinearOperator<T, segsparse::backend::gpu::GpuOps<T>> for CusparseOp<'_, T>
{
    fn nrows(&self) -> usize {
        self.1
    }
    fn ncols(&self) -> usize {
        self.1
    }
    fn apply(
        &self,
        _: &segsparse::backend::gpu::GpuOps<T>,
        x: &segsparse::gpu::DeviceBuffer<T>,
        y: &mut segsparse::gpu::DeviceBuffer<T>,
    ) -> segsparse::Result<()> {
        self.0.borrow_mut().spmv(T::one(), x, T::zero(), y)
    }
}

#[cfg(feature = "peers")]
#[allow(clippy::too_many_arguments)]
fn cusparse_row<T: Scalar + segsparse::gpu::KernelType + segsparse::primitives::ScanElem>(
    g: &std::sync::Arc<segsparse::gpu::Gpu>,
    ops: &segsparse::backend::gpu::GpuOps<T>,
    da: &segsparse::spmv::gpu::GpuCsr<T>,
    jac: &Jacobi<segsparse::gpu::DeviceBuffer<T>>,
    b: &segsparse::gpu::DeviceBuffer<T>,
    short: &str,
    m: Method,
    bw: f64,
) {
    use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv};
    let label = format!("{short}/{}/gpu+cusparse-spmv/{}", m.name(), T::NAME);
    let n = da.nrows();
    let x = ops.zeros(n).expect("alloc");
    let mut y = ops.zeros(n).expect("alloc");
    let cu = match CusparseSpmv::new(da, CusparseAlg::Alg1, T::one(), &x, T::zero(), &mut y) {
        Ok(c) => c,
        Err(e) => {
            println!("| {label} | — | — | — | — | cuSPARSE unavailable: {e} |");
            return;
        }
    };
    let op = CusparseOp(std::cell::RefCell::new(cu), n);
    let mut ts = Vec::new();
    for i in 0..55 {
        let t = g
            .time(|| op.0.borrow_mut().spmv(T::one(), &x, T::zero(), &mut y))
            .expect("cusparse spmv");
        if i >= 5 {
            ts.push(t);
        }
    }
    let spmv = median(ts);
    let mut row = measure(label, ops, &op, jac, m, b, (20, 220, 5), 60.0);
    let vec_bytes = m.vector_passes() * n * T::BYTES;
    let note = format!(
        "cuSPARSE SpMV {:.1} µs; vector kernels {:.1} MB/iter = {:.1} µs at copy BW{}",
        spmv * 1e6,
        vec_bytes as f64 / 1e6,
        vec_bytes as f64 / bw * 1e6,
        row.per_iter.map_or(String::new(), |t| format!(
            "; iteration − SpMV = {:.1} µs",
            (t - spmv) * 1e6
        ))
    );
    row.note = if row.note.is_empty() {
        note
    } else {
        format!("{}; {note}", row.note)
    };
    print_row(&row);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let filter = args.first().cloned().unwrap_or_default();
    let small = std::env::var("SOLVER_BENCH_SMALL").is_ok_and(|v| v == "1");
    #[cfg(feature = "cuda")]
    if let Ok(g) = segsparse::gpu::Gpu::shared() {
        println!("device: {} ({} SMs)", g.name(), g.sm_count());
    }
    println!("cpu threads: {}", rayon::current_num_threads());
    println!();
    println!("| problem/method/backend/precision | µs/iter | iterations | ms to solution | true rel. residual | notes |");
    println!("|---|---|---|---|---|---|");
    bench_precision::<f64>(&filter, small);
    bench_precision::<f32>(&filter, small);
}
