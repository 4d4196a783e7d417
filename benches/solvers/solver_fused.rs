//! The small-system path (fused solver kernels, `backend::gpu::FusedPath`) against the separate
//! kernels, in one process: time per iteration and time to solution of CG, Jacobi-PCG,
//! BiCGSTAB and GMRES(30) on the GPU, f64, on the small corpus systems, raefsky2 and Poisson 2D
//! up to the fused path's row limit, each with
//!
//! - **old**: separate kernels, no graphs (the solvers before graphs and the fused path);
//! - **graphs**: separate kernels replayed as CUDA graphs (the default before the fused path);
//! - **fused**: the fused kernels replayed as CUDA graphs (the default now, below the limit);
//! - **fused-direct**: the fused kernels without graphs;
//! - **fused-plain** (raefsky2 only): as fused, the kernels launched plainly instead of
//!   cooperatively (what the cooperative launch costs inside a graph).
//!
//! `cargo bench -p segsparse-tools --bench solver_fused [-- OUT.jsonl [FILTER]]`: one JSON object per row to
//! OUT.jsonl (default `solver-fused.jsonl`), a markdown table on stdout. Matrices come from
//! `SEGSPARSE_DATA` (else `matrices/`); absent ones are skipped. Time per iteration and time to
//! solution are measured as in `benches/solvers/solver_graphs.rs`; **same** = the fused solve's
//! iterations, residual history, true residual and solution equal the separate kernels', bit
//! for bit.

#[cfg(feature = "cuda")]
fn main() {
    imp::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("solver_fused: built without the cuda feature");
}

#[cfg(feature = "cuda")]
#[path = "../common/solver_timing.rs"]
mod solver_timing;

#[cfg(feature = "cuda")]
mod imp {
    use std::io::Write;

    use segsparse::backend::gpu::{FusedPath, GpuOps};
    use segsparse::backend::VectorOps;
    use segsparse::gpu::Gpu;
    use segsparse::precond::Jacobi;
    use segsparse::spmv::gpu::GpuCsr;
    use segsparse::{generate, CsrMatrix};

    use crate::solver_timing::{load, time_method, Be, Timing};

    fn same(a: &Timing, b: &Timing) -> bool {
        let outcome = match (&a.info, &b.info) {
            (Ok(i), Ok(j)) => {
                i.iterations == j.iterations
                    && i.history == j.history
                    && i.relative_residual == j.relative_residual
            }
            (Err(e), Err(f)) => e == f,
            _ => false,
        };
        outcome && a.x == b.x
    }

    pub fn main() {
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect();
        let out = args
            .first()
            .cloned()
            .unwrap_or_else(|| "solver-fused.jsonl".into());
        let filter = args.get(1).cloned().unwrap_or_default();
        // Which of old, graphs, fused, fused-direct to run (all by default; for profiling).
        let only = args.get(2).cloned().unwrap_or_default();
        let run = |c: &str| c != "none" && (only.is_empty() || only.split(',').any(|o| o == c));
        let g = Gpu::new().expect("a CUDA device");
        let fused = GpuOps::<f64>::new(&g).unwrap();
        let plain = GpuOps::<f64>::new(&g).unwrap().with_plain_launch();
        let separate = GpuOps::<f64>::new(&g)
            .unwrap()
            .with_fused_path(FusedPath::Off);
        eprintln!(
            "device {}: fused path up to {} rows",
            g.name(),
            fused.fused_rows()
        );
        let mut file = std::fs::File::create(&out).expect("output file");
        let mut problems: Vec<(String, CsrMatrix<f64>, Vec<&str>)> = Vec::new();
        for name in ["raefsky2", "sherman5", "orsirr_1", "cage8", "west0479"] {
            if let Some(a) = load(name) {
                problems.push((name.into(), a, vec!["bicgstab", "gmres"]));
            }
        }
        for name in ["1138_bus", "494_bus", "bcsstk09", "nos4"] {
            if let Some(a) = load(name) {
                problems.push((name.into(), a, vec!["cg", "pcg"]));
            }
        }
        // Poisson 2D up to the row limit (183² = 33,489 ≤ 33,792 on 132 SMs), and one above.
        for k in [32usize, 64, 128, 183, 200] {
            problems.push((
                format!("poisson2d:{k}"),
                generate::poisson2d::<f64>(k).unwrap(),
                vec!["cg", "bicgstab", "gmres"],
            ));
        }
        println!(
            "| problem | rows | method | fused? | µs/it old | µs/it graphs | µs/it fused | \
             µs/it fused-direct | µs/it fused-plain | fused/graphs | iters | tts old ms | tts graphs ms | \
             tts fused ms | fused/old | same |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (name, a, methods) in &problems {
            let da = GpuCsr::upload(&g, a).unwrap();
            let b = fused.upload(&vec![1.0; a.nrows()]).unwrap();
            let jac = match Jacobi::from_matrix(&fused, a) {
                Ok(j) => j,
                Err(_) => continue,
            };
            for &method in methods {
                let label = format!("{name}/{method}");
                if !label.contains(&filter) {
                    continue;
                }
                let counts = (240, 960);
                let timed = |c: &str, ops: &Be, graphs: bool| {
                    if run(c) {
                        time_method(ops, &da, &jac, method, &b, graphs, counts)
                    } else {
                        Timing {
                            per_iter: None,
                            tts: None,
                            info: Err("not run".into()),
                            x: Vec::new(),
                        }
                    }
                };
                let old = timed("old", &separate, false);
                let graphs = timed("graphs", &separate, true);
                let fz = timed("fused", &fused, true);
                let fzd = timed("fused-direct", &fused, false);
                // The fused kernels launched plainly instead of cooperatively (raefsky2 only).
                let fzp = if name == "raefsky2" {
                    timed("fused-plain", &plain, true)
                } else {
                    timed("none", &plain, true)
                };
                let identical = same(&graphs, &fz) && same(&old, &fzd) && same(&old, &graphs);
                let is_fused = fused.is_fused(a.nrows());
                let iters = graphs.info.as_ref().map(|i| i.iterations).ok();
                let us = |t: &Timing| t.per_iter.map(|v| v * 1e6);
                let row = serde_json::json!({
                    "problem": name, "rows": a.nrows(), "nnz": a.nnz(), "method": method,
                    "precision": "f64", "device": g.name(), "fused_path": is_fused,
                    "per_iter_us_old": us(&old), "per_iter_us_graphs": us(&graphs),
                    "per_iter_us_fused": us(&fz), "per_iter_us_fused_direct": us(&fzd),
                    "per_iter_us_fused_plain_launch": us(&fzp),
                    "iterations": iters,
                    "iterations_fused": fz.info.as_ref().map(|i| i.iterations).ok(),
                    "tts_s_old": old.tts, "tts_s_graphs": graphs.tts, "tts_s_fused": fz.tts,
                    "tts_s_fused_direct": fzd.tts,
                    "relative_residual": graphs.info.as_ref().map(|i| i.relative_residual).ok(),
                    "relative_residual_fused": fz.info.as_ref().map(|i| i.relative_residual).ok(),
                    "error": graphs.info.as_ref().err(),
                    "identical": identical,
                });
                writeln!(file, "{row}").unwrap();
                let f =
                    |v: Option<f64>, s: f64| v.map_or("—".into(), |v| format!("{:.1}", v * s));
                let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => format!("{:.2}", a / b),
                    _ => "—".into(),
                };
                println!(
                    "| {name} | {} | {method} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | \
                     {} | {} | {} |",
                    a.nrows(),
                    if is_fused { "yes" } else { "no" },
                    f(old.per_iter, 1e6),
                    f(graphs.per_iter, 1e6),
                    f(fz.per_iter, 1e6),
                    f(fzd.per_iter, 1e6),
                    f(fzp.per_iter, 1e6),
                    ratio(fz.per_iter, graphs.per_iter),
                    iters.map_or_else(
                        || graphs.info.clone().err().unwrap_or_default(),
                        |i| i.to_string()
                    ),
                    f(old.tts, 1e3),
                    f(graphs.tts, 1e3),
                    f(fz.tts, 1e3),
                    ratio(fz.tts, old.tts),
                    if identical { "yes" } else { "NO" },
                );
            }
        }
    }
}
