//! Solver iterations with and without CUDA graphs (`SolveParams::graphs`), in one process: time
//! per iteration and time to solution of CG, Jacobi-PCG, BiCGSTAB and GMRES(30) on the GPU, f64,
//! on raefsky2, Poisson 2D 1000², Poisson 3D 100³ and the small corpus systems (≤ 10 k rows).
//!
//! `cargo bench -p segsparse-tools --bench solver_graphs [-- OUT.jsonl [FILTER]]`: one JSON object per row to
//! OUT.jsonl (default `solver-graphs.jsonl`), a markdown table on stdout. Matrices come from
//! `SEGSPARSE_DATA` (else `matrices/`); absent ones are skipped.
//!
//! - **time per iteration** = (t(N₂) − t(N₁)) / (N₂ − N₁), each t the median of 5 solves with
//!   tolerance 0 (every solve runs exactly its limit; N₁, N₂ multiples of 30 and of 16, so both
//!   counts have the same block and cycle structure). The difference removes the setup and the
//!   first blocks (run directly, then recorded): it is the cost of a replayed iteration.
//! - **time to solution** = median wall time of 5 solves to 1e-8 after a warm-up, setup and
//!   recording included: what a caller sees.
//! - **floor** (1M-row problems) = the bytes of one iteration (SpMV + vector passes) over the
//!   device's copy bandwidth measured in the same process.
//! - **same** = the iterations, residual history, true residual and solution with graphs equal
//!   those without, bit for bit.

#[cfg(feature = "cuda")]
fn main() {
    imp::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("solver_graphs: built without the cuda feature");
}

#[cfg(feature = "cuda")]
#[path = "../common/solver_timing.rs"]
mod solver_timing;

#[cfg(feature = "cuda")]
mod imp {
    use std::io::Write;

    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::VectorOps;
    use segsparse::gpu::Gpu;
    use segsparse::precond::Jacobi;
    use segsparse::spmv::gpu::GpuCsr;
    use segsparse::{generate, CsrMatrix};

    use crate::solver_timing::{load, time_method};

    /// Vector passes of n elements per iteration (as `benches/solvers/solvers.rs`).
    fn passes(method: &str) -> usize {
        match method {
            "cg" => 10,
            "pcg" => 12,
            "bicgstab" => 19,
            _ => 72,
        }
    }

    pub fn main() {
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect();
        let out = args
            .first()
            .cloned()
            .unwrap_or_else(|| "solver-graphs.jsonl".into());
        let filter = args.get(1).cloned().unwrap_or_default();
        let g = Gpu::new().expect("a CUDA device");
        let ops = GpuOps::<f64>::new(&g).unwrap();
        let bw = g.copy_bandwidth(256 << 20, 20).expect("bandwidth");
        let mut file = std::fs::File::create(&out).expect("output file");
        // (problem, methods, large)
        let mut problems: Vec<(String, CsrMatrix<f64>, Vec<&str>, bool)> = Vec::new();
        let spd_small = [
            "nos4", "bcsstk01", "494_bus", "1138_bus", "gr_30_30", "bcsstk09", "mesh1e1",
        ];
        let unsym_small = [
            "raefsky2", "west0479", "sherman5", "orsirr_1", "cage8", "fs_183_1",
        ];
        for name in spd_small {
            if let Some(a) = load(name) {
                problems.push((name.into(), a, vec!["cg", "pcg"], false));
            }
        }
        for name in unsym_small {
            if let Some(a) = load(name) {
                problems.push((name.into(), a, vec!["bicgstab", "gmres"], false));
            }
        }
        problems.push((
            "poisson2d:1000".into(),
            generate::poisson2d::<f64>(1000).unwrap(),
            vec!["cg", "pcg"],
            true,
        ));
        problems.push((
            "poisson3d:100".into(),
            generate::poisson3d::<f64>(100).unwrap(),
            vec!["cg"],
            true,
        ));
        println!(
            "| problem | rows | method | µs/it off | µs/it graphs | speed-up | floor µs | iters | \
             tts off ms | tts graphs ms | tts ratio | same |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (name, a, methods, large) in &problems {
            let da = GpuCsr::upload(&g, a).unwrap();
            let b = ops.upload(&vec![1.0; a.nrows()]).unwrap();
            let jac = match Jacobi::from_matrix(&ops, a) {
                Ok(j) => j,
                Err(_) => continue,
            };
            for &method in methods {
                let label = format!("{name}/{method}");
                if !label.contains(&filter) {
                    continue;
                }
                let counts = if *large { (48, 240) } else { (240, 960) };
                let off = time_method(&ops, &da, &jac, method, &b, false, counts);
                let on = time_method(&ops, &da, &jac, method, &b, true, counts);
                let same = match (&off.info, &on.info) {
                    (Ok(i), Ok(j)) => {
                        i.iterations == j.iterations
                            && i.history == j.history
                            && i.relative_residual == j.relative_residual
                            && off.x == on.x
                    }
                    (Err(e), Err(f)) => e == f && off.x == on.x,
                    _ => false,
                };
                let floor = large.then(|| {
                    let spmvs = if method == "bicgstab" { 2 } else { 1 };
                    (spmvs * da.spmv_bytes() + passes(method) * a.nrows() * 8) as f64 / bw
                });
                let iters = off.info.as_ref().map(|i| i.iterations).ok();
                let row = serde_json::json!({
                    "problem": name, "rows": a.nrows(), "nnz": a.nnz(), "method": method,
                    "precision": "f64", "device": g.name(),
                    "per_iter_us_uncaptured": off.per_iter.map(|t| t * 1e6),
                    "per_iter_us_graphs": on.per_iter.map(|t| t * 1e6),
                    "floor_us": floor.map(|t| t * 1e6),
                    "iterations_uncaptured": iters,
                    "iterations_graphs": on.info.as_ref().map(|i| i.iterations).ok(),
                    "tts_s_uncaptured": off.tts, "tts_s_graphs": on.tts,
                    "relative_residual_uncaptured": off.info.as_ref().map(|i| i.relative_residual).ok(),
                    "relative_residual_graphs": on.info.as_ref().map(|i| i.relative_residual).ok(),
                    "error": off.info.as_ref().err(),
                    "identical": same,
                });
                writeln!(file, "{row}").unwrap();
                let f =
                    |v: Option<f64>, s: f64| v.map_or("—".into(), |v| format!("{:.1}", v * s));
                let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => format!("{:.2}", a / b),
                    _ => "—".into(),
                };
                println!(
                    "| {name} | {} | {method} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    a.nrows(),
                    f(off.per_iter, 1e6),
                    f(on.per_iter, 1e6),
                    ratio(off.per_iter, on.per_iter),
                    f(floor, 1e6),
                    iters.map_or_else(
                        || off.info.clone().err().unwrap_or_default(),
                        |i| i.to_string()
                    ),
                    f(off.tts, 1e3),
                    f(on.tts, 1e3),
                    ratio(on.tts, off.tts),
                    if same { "yes" } else { "NO" },
                );
            }
        }
    }
}
