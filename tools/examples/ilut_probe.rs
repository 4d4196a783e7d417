//! Probe: GMRES with ILUT variants on matrices given on the command line (CPU).
use segsparse::backend::Cpu;
use segsparse::precond::{Fill, Ilu0, IncompleteParams, Ordering, RowMatching};
use segsparse::solvers::{gmres, SolveParams};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = &args[0];
    let a = segsparse::io::read_matrix_market::<f64>(std::path::Path::new(path)).unwrap();
    let restart: usize = args.get(1).map_or(30, |s| s.parse().unwrap());
    let variants: Vec<(String, IncompleteParams)> = {
        let mut v = Vec::new();
        let auto = segsparse::precond::auto::auto_incomplete_params();
        v.push((
            "old transversal ILU(k) auto".to_string(),
            IncompleteParams {
                matching: RowMatching::On,
                ..auto
            },
        ));
        v.push(("new auto".to_string(), auto));
        for (mname, m) in [("mp", RowMatching::MaxProduct), ("tr", RowMatching::On)] {
            for (oname, o) in [("rcm", Ordering::Rcm), ("nat", Ordering::Natural)] {
                let env = |k: &str, d: &str| std::env::var(k).unwrap_or(d.into());
                let taus: Vec<f64> = env("TAUS", "1e-2,1e-3,1e-4")
                    .split(',')
                    .map(|x| x.parse().unwrap())
                    .collect();
                let ps: Vec<usize> = env("PS", "10,20,40")
                    .split(',')
                    .map(|x| x.parse().unwrap())
                    .collect();
                for &tau in &taus {
                    for &p in &ps {
                        v.push((
                            format!("{mname} {oname} tau {tau:e} p {p}"),
                            IncompleteParams {
                                matching: m,
                                ordering: o,
                                fill: Fill::Threshold {
                                    drop_tol: tau,
                                    max_per_row: p,
                                },
                                ..Default::default()
                            },
                        ));
                    }
                }
            }
        }
        v
    };
    let filter = args.get(2).cloned().unwrap_or_default();
    for (name, p) in variants {
        if !name.contains(&filter) {
            continue;
        }
        let t = Instant::now();
        let m = match Ilu0::new(&Cpu, &a, &p) {
            Ok(m) => m,
            Err(e) => {
                println!("{name}: setup error {e}");
                continue;
            }
        };
        let setup = t.elapsed().as_secs_f64();
        let s = m.summary();
        let b = vec![1.0; a.nrows()];
        let mut x = vec![0.0; a.nrows()];
        let sp = SolveParams {
            max_iters: 3000,
            rel_tol: 1e-8,
            ..Default::default()
        };
        let t = Instant::now();
        let r = gmres(&Cpu, &a, &m, &b, &mut x, restart, &sp);
        let solve = t.elapsed().as_secs_f64();
        // true residual
        let mut ax = vec![0.0; a.nrows()];
        for (i, y) in ax.iter_mut().enumerate() {
            let (c, v) = a.row(i);
            *y = c.iter().zip(v).map(|(&j, &x0)| x0 * x[j as usize]).sum();
        }
        let tr = ax
            .iter()
            .zip(&b)
            .map(|(p, q)| (p - q) * (p - q))
            .sum::<f64>()
            .sqrt()
            / (a.nrows() as f64).sqrt();
        match r {
            Ok(info) => println!("{name}: it {} rel {:.2e} true {tr:.2e} setup {setup:.3}s solve {solve:.3}s fill {:.2} comp {} | {s}", info.iterations, info.relative_residual, s.fill_ratio, s.compensated_pivots),
            Err(e) => println!("{name}: FAIL true {tr:.2e} fill {:.2} comp {} setup {setup:.3}s: {}", s.fill_ratio, s.compensated_pivots, e.to_string().chars().take(120).collect::<String>()),
        }
    }
}
