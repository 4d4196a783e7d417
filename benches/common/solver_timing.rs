//! What the solver benches `solver_graphs` and `solver_fused` share: running a method by name on
//! the GPU backend, the time per iteration (difference of two fixed-count solves) and to
//! solution, and loading a corpus matrix. Included by both with `#[path]` (not a bench target).

use std::path::PathBuf;
use std::time::Instant;

use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Identity, VectorOps};
use segsparse::precond::Jacobi;
use segsparse::solvers::{bicgstab, cg, gmres, pcg, SolveError, SolveInfo, SolveParams};
use segsparse::spmv::gpu::GpuCsr;
use segsparse::{io, CsrMatrix};

pub(crate) type Be = GpuOps<f64>;
pub(crate) type Vec64 = <Be as VectorOps<f64>>::Vector;

pub(crate) fn solve(
    ops: &Be,
    a: &GpuCsr<f64>,
    jac: &Jacobi<Vec64>,
    method: &str,
    b: &Vec64,
    x: &mut Vec64,
    p: &SolveParams,
) -> Result<SolveInfo, SolveError> {
    match method {
        "cg" => cg(ops, a, b, x, p),
        "pcg" => pcg(ops, a, jac, b, x, p),
        "bicgstab" => bicgstab(ops, a, &Identity, b, x, p),
        "gmres" => gmres(ops, a, &Identity, b, x, 30, p),
        _ => unreachable!("{method}"),
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) struct Timing {
    pub(crate) per_iter: Option<f64>,
    pub(crate) tts: Option<f64>,
    pub(crate) info: Result<SolveInfo, String>,
    pub(crate) x: Vec<f64>,
}

pub(crate) fn time_method(
    ops: &Be,
    a: &GpuCsr<f64>,
    jac: &Jacobi<Vec64>,
    method: &str,
    b: &Vec64,
    graphs: bool,
    (n1, n2): (usize, usize),
) -> Timing {
    let n = a.nrows();
    let mut x = ops.zeros(n).unwrap();
    let fixed = |iters| SolveParams {
        rel_tol: 0.0,
        max_iters: iters,
        record_history: false,
        graphs,
        ..Default::default()
    };
    let mut run_fixed = |iters: usize| -> Option<f64> {
        let mut t = Vec::new();
        for _ in 0..5 {
            let c = Instant::now();
            match solve(ops, a, jac, method, b, &mut x, &fixed(iters)) {
                Err(SolveError::NotConverged { iterations, .. }) if iterations == iters => {}
                _ => return None,
            }
            t.push(c.elapsed().as_secs_f64());
        }
        Some(median(t))
    };
    let _ = run_fixed(2);
    let per_iter = match (run_fixed(n1), run_fixed(n2)) {
        (Some(t1), Some(t2)) => Some((t2 - t1) / (n2 - n1) as f64),
        _ => None,
    };
    let p = SolveParams {
        rel_tol: 1e-8,
        max_iters: 20_000,
        graphs,
        ..Default::default()
    };
    let _ = solve(ops, a, jac, method, b, &mut x, &p);
    let mut t = Vec::new();
    let mut info = Err("not run".to_string());
    for _ in 0..5 {
        let c = Instant::now();
        info = solve(ops, a, jac, method, b, &mut x, &p).map_err(|e| e.to_string());
        t.push(c.elapsed().as_secs_f64());
        if info.is_err() || t[0] > 2.0 {
            break;
        }
    }
    Timing {
        per_iter,
        tts: info.is_ok().then(|| median(t)),
        info,
        x: ops.download(&x).unwrap(),
    }
}

pub(crate) fn load(name: &str) -> Option<CsrMatrix<f64>> {
    let mut roots = Vec::new();
    if let Ok(d) = std::env::var("SEGSPARSE_DATA") {
        roots.push(PathBuf::from(d));
    }
    roots.push(PathBuf::from("matrices"));
    roots
        .into_iter()
        .map(|r| r.join(format!("{name}.mtx.gz")))
        .find(|p| p.exists())
        .and_then(|p| match io::read_matrix_market(&p) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        })
}
