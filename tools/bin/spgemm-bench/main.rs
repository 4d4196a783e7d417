//! spgemm-bench: the GPU SpGEMM `C = A·A` (or `A·Aᵀ` for a rectangular `A`) against cuSPARSE's
//! `cusparseSpGEMM`, both timed as a user calls them, in the same process.
//!
//! Ours: symbolic + numeric phase into device arrays (`sparse::gpu::spgemm`, every allocation of
//! C and of the workspaces included), and the numeric phase alone on an existing plan.
//! cuSPARSE: the whole protocol (descriptors, `workEstimation` and `compute` with their size
//! queries and buffer allocations, the allocation of C, `copy`). Times are medians of host-clock
//! timings around a stream synchronisation, after one warm-up call.
//!
//! Usage: `spgemm-bench [--format json] [--precision f64|f32|both] [--reps N] MATRIX...` where a
//! matrix is a `.mtx[.gz]` file, a generator spec (`poisson2d:2000`, …), `poisson3d27:N` (27-point
//! stencil, 26 on the diagonal, −1 off it) or `band:N:W` (entries at |i − j| ≤ W), or a directory
//! (every `.mtx[.gz]` in it).

use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use segsparse::csr::CsrMatrix;
use segsparse::gpu::Gpu;
use segsparse::sparse::gpu::{self as sg, CusparseSpgemm, DeviceCsr, GpuSpgemmPlan};
use segsparse::spmv::gpu::GpuScalar;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A markdown table.
    Markdown,
    /// One JSON object per measurement.
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Prec {
    F64,
    F32,
    Both,
}

/// spgemm-bench: GPU SpGEMM A·A against cuSPARSE SpGEMM (full protocol), same process.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Matrices: files, generator specs, poisson3d27:N, band:N:W, or directories of .mtx files.
    #[arg(required = true)]
    matrices: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
    /// Element types to run.
    #[arg(long, value_enum, default_value_t = Prec::F64)]
    precision: Prec,
    /// Timed repetitions per measurement (median reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// The products of one smoothed-aggregation level instead of `A·A`: `A·T` (tentative
    /// prolongator), `R·A`, `(R·A)·P` and `A·A`, with `P = (I − ω/ρ·D⁻¹A)·T` and `R = Pᵀ`.
    /// `elasticity2d:N` uses 2×2 blocks and the three rigid-body modes.
    #[arg(long)]
    amg: bool,
    /// One product of each kind, untimed and without cuSPARSE (for a profiler).
    #[arg(long)]
    once: bool,
}

fn stencil27(n: usize) -> CsrMatrix<f64> {
    let mut t = Vec::with_capacity(27 * n * n * n);
    let id = |x: usize, y: usize, z: usize| (z * n + y) * n + x;
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let r = id(x, y, z);
                for dz in -1i64..=1 {
                    for dy in -1i64..=1 {
                        for dx in -1i64..=1 {
                            let (xx, yy, zz) = (x as i64 + dx, y as i64 + dy, z as i64 + dz);
                            if xx < 0 || yy < 0 || zz < 0 {
                                continue;
                            }
                            let (xx, yy, zz) = (xx as usize, yy as usize, zz as usize);
                            if xx >= n || yy >= n || zz >= n {
                                continue;
                            }
                            let v = if (dx, dy, dz) == (0, 0, 0) {
                                26.0
                            } else {
                                -1.0
                            };
                            t.push((r, id(xx, yy, zz), v));
                        }
                    }
                }
            }
        }
    }
    CsrMatrix::from_triplets(n * n * n, n * n * n, &t).expect("27-point stencil")
}

fn band(n: usize, w: usize) -> CsrMatrix<f64> {
    let mut t = Vec::with_capacity(n * (2 * w + 1));
    for i in 0..n {
        for j in i.saturating_sub(w)..(i + w + 1).min(n) {
            t.push((i, j, if i == j { 2.0 * w as f64 + 1.0 } else { -1.0 }));
        }
    }
    CsrMatrix::from_triplets(n, n, &t).expect("band")
}

/// 7-point 3-D diffusion with coefficients that jump by 10⁴ between random 8³ boxes (harmonic
/// means on the faces, Dirichlet boundary): the Poisson pattern with other values.
fn jumps3d(n: usize) -> CsrMatrix<f64> {
    let id = |x: usize, y: usize, z: usize| (z * n + y) * n + x;
    let coef = |x: usize, y: usize, z: usize| {
        let cell = ((z / 8) * 1_000_003 + (y / 8)) * 1_000_033 + x / 8;
        let h = segsparse::sparse::splitmix64(cell as u64);
        if h & 1 == 1 {
            1e4
        } else {
            1.0
        }
    };
    let mut t = Vec::with_capacity(7 * n * n * n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let (r, k) = (id(x, y, z), coef(x, y, z));
                let mut diag = 0.0;
                for (dx, dy, dz) in [
                    (-1i64, 0, 0),
                    (1, 0, 0),
                    (0, -1, 0),
                    (0, 1, 0),
                    (0, 0, -1),
                    (0, 0, 1),
                ] {
                    let (xx, yy, zz) = (x as i64 + dx, y as i64 + dy, z as i64 + dz);
                    let inside = [xx, yy, zz].iter().all(|&c| c >= 0 && c < n as i64);
                    let kn = if inside {
                        coef(xx as usize, yy as usize, zz as usize)
                    } else {
                        k
                    };
                    let c = 2.0 * k * kn / (k + kn);
                    diag += c;
                    if inside {
                        t.push((r, id(xx as usize, yy as usize, zz as usize), -c));
                    }
                }
                t.push((r, r, diag));
            }
        }
    }
    CsrMatrix::from_triplets(n * n * n, n * n * n, &t).expect("jumps3d")
}

/// One level of smoothed aggregation on the CPU (the shapes the AMG setup multiplies): the
/// tentative prolongator `T`, `P = (I − ω/ρ·D⁻¹A)·T` (ρ a Gershgorin bound of `D⁻¹A`, ω = 4/3),
/// `R = Pᵀ` and `R·A`.
struct Level {
    t: CsrMatrix<f64>,
    p: CsrMatrix<f64>,
    r: CsrMatrix<f64>,
    ra: CsrMatrix<f64>,
}

fn amg_level(name: &str, a: &CsrMatrix<f64>) -> anyhow::Result<Level> {
    use segsparse::sparse as sp;
    let elastic = name.starts_with("elasticity2d:");
    let block = if elastic { 2 } else { 1 };
    let nodes = if elastic {
        sp::amalgamate(a, 2)?
    } else {
        a.clone()
    };
    let s = sp::strength_symmetric(&nodes, 0.0)?;
    let agg = sp::aggregate_mis2(&s, 0);
    let cand: Vec<Vec<f64>> = if elastic {
        let n: usize = name["elasticity2d:".len()..].parse()?;
        segsparse::precond::amg::rigid_body_modes_2d(
            &segsparse::generate::elasticity2d_coordinates(n),
        )
    } else {
        vec![vec![1.0; a.nrows()]]
    };
    let (t, _) = segsparse::precond::amg::fit_candidates(&agg, block, &cand);
    let d = a.diagonal();
    let (rp, cols, vals) = (a.row_ptr(), a.col_idx(), a.values());
    let mut rho = 0.0f64;
    for i in 0..a.nrows() {
        let s: f64 = (rp[i] as usize..rp[i + 1] as usize)
            .map(|p| vals[p].abs())
            .sum();
        rho = rho.max(s / d[i].abs().max(f64::MIN_POSITIVE));
    }
    let _ = cols;
    let dinv: Vec<f64> = d
        .iter()
        .map(|&x| if x != 0.0 { 1.0 / x } else { 0.0 })
        .collect();
    let mut at = sp::spgemm(a, &t)?;
    sp::scale(&mut at, Some(&dinv), None);
    let p = sp::add(&t, -(4.0 / 3.0) / rho, &at)?;
    let r = p.transpose();
    let ra = sp::spgemm(&r, a)?;
    Ok(Level { t, p, r, ra })
}

fn load(name: &str) -> anyhow::Result<CsrMatrix<f64>> {
    let parts: Vec<&str> = name.split(':').collect();
    match parts[0] {
        "poisson3d27" if parts.len() == 2 => Ok(stencil27(parts[1].parse()?)),
        "jumps3d" if parts.len() == 2 => Ok(jumps3d(parts[1].parse()?)),
        "band" if parts.len() == 3 => Ok(band(parts[1].parse()?, parts[2].parse()?)),
        _ => Ok(segsparse::load::<f64>(name, 0)?),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn time(g: &Gpu, reps: usize, mut f: impl FnMut() -> segsparse::Result<()>) -> anyhow::Result<f64> {
    f()?;
    g.synchronize()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        g.synchronize()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(t))
}

/// Products Σ_i Σ_{k ∈ A[i,:]} nnz(B[k,:]) (each one multiply and one add).
fn products(a: &CsrMatrix<f64>, b: &CsrMatrix<f64>) -> u64 {
    let bp = b.row_ptr();
    a.col_idx()
        .iter()
        .map(|&k| (bp[k as usize + 1] - bp[k as usize]) as u64)
        .sum()
}

struct Row {
    name: String,
    op: String,
    prec: &'static str,
    rows: usize,
    nnz_a: usize,
    nnz_c: usize,
    products: u64,
    ours_ms: f64,
    numeric_ms: f64,
    cusparse_ms: Option<f64>,
    max_rel_diff: Option<f64>,
    bins: [usize; 6],
}

#[allow(clippy::too_many_arguments)]
fn run<T: GpuScalar>(
    g: &Arc<Gpu>,
    cs: Option<&CusparseSpgemm>,
    name: &str,
    op: &str,
    a64: &CsrMatrix<f64>,
    b64: &CsrMatrix<f64>,
    reps: usize,
    once: bool,
) -> anyhow::Result<Row> {
    let (a, b) = (a64.cast::<T>(), b64.cast::<T>());
    let (da, db) = (DeviceCsr::upload(g, &a)?, DeviceCsr::upload(g, &b)?);
    if once {
        let c = sg::spgemm(g, &da, &db)?;
        g.synchronize()?;
        return Ok(Row {
            name: name.to_string(),
            op: op.to_string(),
            prec: T::NAME,
            rows: a.nrows(),
            nnz_a: a.nnz(),
            nnz_c: c.nnz,
            products: products(a64, b64),
            ours_ms: 0.0,
            numeric_ms: 0.0,
            cusparse_ms: None,
            max_rel_diff: None,
            bins: [0; 6],
        });
    }
    let ours_ms = time(g, reps, || sg::spgemm(g, &da, &db).map(drop))?;
    let plan = GpuSpgemmPlan::symbolic(g, &da, &db)?;
    let mut vals = g.zeros::<T>(plan.nnz().max(1))?;
    let numeric_ms = time(g, reps, || plan.numeric_into(&da, &db, &mut vals))?;
    let (cusparse_ms, max_rel_diff) = match cs {
        Some(cs) => {
            let t = time(g, reps, || cs.multiply(&da, &db).map(drop))?;
            let theirs = cs.multiply(&da, &db)?.download(g)?;
            let mine = sg::spgemm(g, &da, &db)?.download(g)?;
            // max |ours − cuSPARSE| / max |cuSPARSE| (infinite when the patterns differ).
            let d = if theirs.col_idx() != mine.col_idx() {
                f64::INFINITY
            } else {
                let f = |x: &T| x.to_f64().unwrap_or(f64::NAN);
                let scale = theirs
                    .values()
                    .iter()
                    .map(|y| f(y).abs())
                    .fold(0.0, f64::max);
                mine.values()
                    .iter()
                    .zip(theirs.values())
                    .map(|(x, y)| (f(x) - f(y)).abs())
                    .fold(0.0, f64::max)
                    / scale.max(f64::MIN_POSITIVE)
            };
            (Some(t), Some(d))
        }
        None => (None, None),
    };
    Ok(Row {
        name: name.to_string(),
        op: op.to_string(),
        prec: T::NAME,
        rows: a.nrows(),
        nnz_a: a.nnz(),
        nnz_c: plan.nnz(),
        products: products(a64, b64),
        ours_ms,
        numeric_ms,
        cusparse_ms,
        max_rel_diff,
        bins: plan.bin_rows(),
    })
}

fn expand(names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for n in names {
        let p = std::path::Path::new(n);
        if p.is_dir() {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.path().to_string_lossy().into_owned())
                        .filter(|s| s.ends_with(".mtx") || s.ends_with(".mtx.gz"))
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            out.extend(v);
        } else {
            out.push(n.clone());
        }
    }
    out
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let g = Gpu::new()?;
    let cs = match CusparseSpgemm::new(&g) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("cuSPARSE unavailable: {e}");
            None
        }
    };
    let json = cli.format == Format::Json;
    if !json {
        println!(
            "device: {}, cuSPARSE {}",
            g.name(),
            cs.as_ref().map_or("-".into(), |c| c.version())
        );
        println!("| matrix | op | type | rows | nnz(A) | nnz(C) | products | ours ms | numeric ms | cuSPARSE ms | speedup | max rel diff |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    for name in expand(&cli.matrices) {
        let a = match load(&name) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("skipped {name}: {e}");
                continue;
            }
        };
        let short = std::path::Path::new(&name)
            .file_name()
            .map_or(name.clone(), |f| f.to_string_lossy().into_owned())
            .replace(".mtx.gz", "")
            .replace(".mtx", "");
        let mut pairs: Vec<(String, String, CsrMatrix<f64>, CsrMatrix<f64>)> = Vec::new();
        if cli.amg {
            let lv = match amg_level(&name, &a) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("skipped {name}: {e}");
                    continue;
                }
            };
            pairs.push((short.clone(), "A*T".into(), a.clone(), lv.t));
            pairs.push((short.clone(), "R*A".into(), lv.r, a.clone()));
            pairs.push((short.clone(), "RA*P".into(), lv.ra, lv.p));
            pairs.push((short.clone(), "A*A".into(), a.clone(), a));
        } else if a.nrows() == a.ncols() {
            pairs.push((short.clone(), "A*A".into(), a.clone(), a));
        } else {
            let at = a.transpose();
            pairs.push((format!("{short}·Aᵀ"), "A*A".into(), a, at));
        }
        let mut rows = Vec::new();
        for (label, op, a, b) in &pairs {
            if cli.precision != Prec::F32 {
                rows.push(run::<f64>(
                    &g,
                    cs.as_ref(),
                    label,
                    op,
                    a,
                    b,
                    cli.reps,
                    cli.once,
                ));
            }
            if cli.precision != Prec::F64 {
                rows.push(run::<f32>(
                    &g,
                    cs.as_ref(),
                    label,
                    op,
                    a,
                    b,
                    cli.reps,
                    cli.once,
                ));
            }
        }
        for r in rows {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    continue;
                }
            };
            let speedup = r.cusparse_ms.map(|c| c / r.ours_ms);
            if json {
                let v = serde_json::json!({
                    "bench": "spgemm", "op": r.op, "matrix": r.name, "dtype": r.prec,
                    "device": g.name(), "rows": r.rows, "nnz_a": r.nnz_a, "nnz_c": r.nnz_c,
                    "products": r.products, "ours_ms": r.ours_ms, "ours_numeric_ms": r.numeric_ms,
                    "cusparse_ms": r.cusparse_ms, "speedup": speedup,
                    "max_rel_diff": r.max_rel_diff, "bins": r.bins,
                    "ours_gflops": 2.0 * r.products as f64 / r.ours_ms / 1e6,
                });
                println!("{v}");
            } else {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} |",
                    r.name,
                    r.op,
                    r.prec,
                    r.rows,
                    r.nnz_a,
                    r.nnz_c,
                    r.products,
                    r.ours_ms,
                    r.numeric_ms,
                    r.cusparse_ms.map_or("-".into(), |c| format!("{c:.3}")),
                    speedup.map_or("-".into(), |s| format!("{s:.2}×")),
                    r.max_rel_diff.map_or("-".into(), |d| format!("{d:.1e}")),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn generators() {
        let s = stencil27(4);
        assert_eq!(s.nrows(), 64);
        assert_eq!(s.nnz(), 10 * 10 * 10); // per axis 2 + 3 + 3 + 2 neighbours
        let b = band(10, 2);
        assert_eq!(b.nnz(), 10 * 5 - 6);
        let j = jumps3d(5);
        assert_eq!(j.nnz(), load("poisson3d:5").unwrap().nnz());
        assert!(j.values().iter().any(|&v| v < -100.0));
    }

    #[test]
    fn amg_levels_have_the_products_shapes() {
        for spec in [
            "poisson3d:8",
            "elasticity2d:8",
            "jumps3d:8",
            "poisson3d27:6",
        ] {
            let a = load(spec).unwrap();
            let lv = amg_level(spec, &a).unwrap();
            let nc = lv.t.ncols();
            assert!(nc > 0 && nc < a.nrows(), "{spec}: {nc} coarse unknowns");
            assert_eq!((lv.p.nrows(), lv.p.ncols()), (a.nrows(), nc), "{spec}: P");
            assert_eq!((lv.r.nrows(), lv.r.ncols()), (nc, a.nrows()), "{spec}: R");
            assert_eq!(
                (lv.ra.nrows(), lv.ra.ncols()),
                (nc, a.nrows()),
                "{spec}: R·A"
            );
            assert!(lv.p.nnz() > lv.t.nnz(), "{spec}: smoothing widens T");
        }
    }
}
