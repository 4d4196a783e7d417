//! Throughput of the batched solvers: many independent small systems solved in one GPU kernel
//! launch, beside solving them one by one with the crate's single-system solvers (on the CPU,
//! sequentially and with rayon over systems, and on the GPU, one solve per system).
//!
//! ```text
//! cargo run --release -p segsparse-tools --example batched_bench -- [--systems N] [--kind KIND] [--method cg|bicgstab|gmres]
//!     [--precision f64|f32] [--precond jacobi|ilu0|none] [--seq-sample S] [--gpu-sample G]
//!     [--dump DIR]
//! ```
//! KIND: `poisson2d:M` (M² rows), `poisson3d:M` (M³ rows), `spd:N`, `nonsym:N` (random
//! diagonally dominant, 5 entries per row, a different pattern per system), `mixed-spd`,
//! `mixed-nonsym` (sizes drawn from 64..=1024). One JSON object per line on stdout.
//! The one-by-one rates are measured on the first S (CPU, sequential) and G (GPU) systems.
//! `--dump DIR` also writes the batch and its right-hand sides as raw little-endian arrays
//! (`sys_ptr.u32`, `row_ptr.u32`, `col.u32`, `val.f64`/`val.f32`, `b.f64`/`b.f32`) and the
//! GPU solution (`x.f64`/`x.f32`) for the dense batched peer (`benches/multi_rhs/dense_peer.py`).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::batched::{solve_cpu, solve_one, BatchCsr, BatchMethod, BatchParams, BatchPrecond};
use segsparse::{generate, CsrMatrix, Scalar};

fn random_dd<T: Scalar>(n: usize, symmetric: bool, seed: u64) -> CsrMatrix<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t: Vec<(usize, usize, T)> = Vec::with_capacity(5 * n);
    let mut rowsum = vec![0.0f64; n];
    for i in 0..n {
        for _ in 0..2 {
            let j = rng.gen_range(0..n);
            if j == i {
                continue;
            }
            let v: f64 = rng.gen_range(-1.0..0.0);
            let w = if symmetric {
                v
            } else {
                rng.gen_range(-1.0..1.0)
            };
            t.push((i, j, T::of_f64(v)));
            t.push((j, i, T::of_f64(w)));
            rowsum[i] += v.abs();
            rowsum[j] += w.abs();
        }
    }
    // Duplicates are summed by from_triplets; the diagonal bounds the summed row too.
    for (i, s) in rowsum.iter().enumerate() {
        t.push((i, i, T::of_f64(1.05 * s + 0.05)));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn systems<T: Scalar>(kind: &str, count: usize) -> Vec<CsrMatrix<T>> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (head, arg) = kind.split_once(':').unwrap_or((kind, "0"));
    let arg: usize = arg.parse().expect("size");
    match head {
        "poisson2d" => {
            let a = generate::poisson2d(arg).unwrap();
            vec![a; count]
        }
        "poisson3d" => {
            let a = generate::poisson3d(arg).unwrap();
            vec![a; count]
        }
        "spd" => (0..count).map(|s| random_dd(arg, true, s as u64)).collect(),
        "nonsym" => (0..count)
            .map(|s| random_dd(arg, false, s as u64))
            .collect(),
        "mixed-spd" => (0..count)
            .map(|s| random_dd(rng.gen_range(64..=1024), true, s as u64))
            .collect(),
        "mixed-nonsym" => (0..count)
            .map(|s| random_dd(rng.gen_range(64..=1024), false, s as u64))
            .collect(),
        _ => panic!("unknown kind {kind}"),
    }
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = arg(&args, "--systems", "10000").parse().unwrap();
    let kind = arg(&args, "--kind", "poisson2d:16");
    let method = match arg(&args, "--method", "cg").as_str() {
        "cg" => BatchMethod::Cg,
        "bicgstab" => BatchMethod::Bicgstab,
        "gmres" => BatchMethod::Gmres,
        m => panic!("unknown method {m}"),
    };
    let precond = match arg(&args, "--precond", "jacobi").as_str() {
        "jacobi" => BatchPrecond::Jacobi,
        "ilu0" => BatchPrecond::Ilu0,
        "none" => BatchPrecond::None,
        p => panic!("unknown preconditioner {p}"),
    };
    let dump = arg(&args, "--dump", "");
    let seq: usize = arg(&args, "--seq-sample", "200").parse().unwrap();
    let gs: usize = arg(&args, "--gpu-sample", "20").parse().unwrap();
    match arg(&args, "--precision", "f64").as_str() {
        "f32" => run::<f32>(count, &kind, method, precond, seq, gs, 1e-5, &dump),
        _ => run::<f64>(count, &kind, method, precond, seq, gs, 1e-8, &dump),
    }
}

#[allow(clippy::too_many_arguments)]
fn run<T: Scalar + GpuPart>(
    count: usize,
    kind: &str,
    method: BatchMethod,
    precond: BatchPrecond,
    seq: usize,
    gs: usize,
    tol: f64,
    dump: &str,
) {
    let ms = systems::<T>(kind, count);
    let rows: Vec<usize> = ms.iter().map(|a| a.nrows()).collect();
    let batch = BatchCsr::from_matrices(&ms).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let b: Vec<T> = (0..batch.total_rows())
        .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
        .collect();
    let params = BatchParams {
        method,
        precond,
        rel_tol: tol,
        max_iters: 5000,
        restart: 30,
        ..Default::default()
    };
    // One by one on the CPU, sequentially, the first `seq` systems.
    let seq = seq.min(count);
    let t0 = Instant::now();
    let mut it_seq = 0u64;
    for (s, a) in ms.iter().enumerate().take(seq) {
        let r = batch.row_range(s);
        let mut x = vec![T::zero(); r.len()];
        let (_, it, _) = solve_one(a, &b[r], &mut x, &params).unwrap();
        it_seq += it as u64;
    }
    let cpu_seq_rate = seq as f64 / t0.elapsed().as_secs_f64();
    // The whole batch on the CPU with rayon over systems.
    let mut x = vec![T::zero(); b.len()];
    let ci = solve_cpu(&batch, &b, &mut x, &params).unwrap();
    let cpu_par_rate = count as f64 / ci.seconds;
    let mut row = serde_json::json!({
        "bench": "batched", "kind": kind, "systems": count, "rows_min": rows.iter().min(),
        "rows_max": rows.iter().max(), "nnz": batch.nnz(), "method": method.name(),
        "precond": precond.name(), "precision": T::NAME, "rel_tol": tol,
        "cpu_threads": rayon::current_num_threads(),
        "cpu_seq_systems_per_s": cpu_seq_rate, "cpu_seq_sample": seq,
        "cpu_seq_mean_iterations": it_seq as f64 / seq.max(1) as f64,
        "cpu_par_systems_per_s": cpu_par_rate, "cpu_converged": ci.converged(),
    });
    let xg = T::gpu_part(&batch, &ms, &b, &params, gs, &ci, &mut row);
    if !dump.is_empty() {
        write_dump(dump, &batch, &b, &xg).expect("writing the dump");
    }
    println!("{row}");
}

fn write_dump<T: Scalar>(dir: &str, batch: &BatchCsr<T>, b: &[T], x: &[T]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let (sp, rp, ci, va) = batch.parts();
    let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ts = |v: &[T]| {
        v.iter()
            .flat_map(|x| {
                if T::BYTES == 8 {
                    x.as_f64().to_le_bytes().to_vec()
                } else {
                    (x.as_f64() as f32).to_le_bytes().to_vec()
                }
            })
            .collect::<Vec<u8>>()
    };
    let d = std::path::Path::new(dir);
    std::fs::write(d.join("sys_ptr.u32"), u32s(sp))?;
    std::fs::write(d.join("row_ptr.u32"), u32s(rp))?;
    std::fs::write(d.join("col.u32"), u32s(ci))?;
    std::fs::write(d.join(format!("val.{}", T::NAME)), ts(va))?;
    std::fs::write(d.join(format!("b.{}", T::NAME)), ts(b))?;
    if !x.is_empty() {
        std::fs::write(d.join(format!("x.{}", T::NAME)), ts(x))?;
    }
    Ok(())
}

trait GpuPart: Sized {
    fn gpu_part(
        batch: &BatchCsr<Self>,
        ms: &[CsrMatrix<Self>],
        b: &[Self],
        params: &BatchParams,
        gs: usize,
        ci: &segsparse::batched::BatchInfo,
        row: &mut serde_json::Value,
    ) -> Vec<Self>;
}

#[cfg(not(feature = "cuda"))]
impl<T> GpuPart for T {
    fn gpu_part(
        _: &BatchCsr<T>,
        _: &[CsrMatrix<T>],
        _: &[T],
        _: &BatchParams,
        _: usize,
        _: &segsparse::batched::BatchInfo,
        row: &mut serde_json::Value,
    ) -> Vec<T> {
        row["gpu"] = "built without cuda".into();
        Vec::new()
    }
}

#[cfg(feature = "cuda")]
impl<T: segsparse::spmv::gpu::GpuScalar> GpuPart for T {
    fn gpu_part(
        batch: &BatchCsr<T>,
        ms: &[CsrMatrix<T>],
        b: &[T],
        params: &BatchParams,
        gs: usize,
        ci: &segsparse::batched::BatchInfo,
        row: &mut serde_json::Value,
    ) -> Vec<T> {
        use segsparse::backend::gpu::GpuOps;
        use segsparse::backend::{Identity, Preconditioner, VectorOps};
        use segsparse::batched::gpu::GpuBatch;
        use segsparse::batched::ILU_PARAMS;
        use segsparse::gpu::Gpu;
        use segsparse::precond::{Ilu0, Jacobi};
        use segsparse::solvers::{self, SolveParams};
        use segsparse::spmv::gpu::GpuCsr;
        use segsparse::spmv::gpu::GpuScalar;
        let g = match Gpu::shared() {
            Ok(g) => g,
            Err(e) => {
                row["gpu"] = e.to_string().into();
                return Vec::new();
            }
        };
        row["device"] = g.name().into();
        // Setup (upload of the batch) then solves; the solve time includes b's upload and the
        // downloads of x and the statuses.
        let t0 = Instant::now();
        let gb = GpuBatch::upload(&g, batch).unwrap();
        g.synchronize().unwrap();
        let setup = t0.elapsed().as_secs_f64();
        let mut x = g.zeros::<T>(b.len()).unwrap();
        let mut times = Vec::new();
        let mut info = None;
        let mut xh = Vec::new();
        for _ in 0..4 {
            let t = Instant::now();
            let db = g.upload(b).unwrap();
            let i = gb.solve(&db, &mut x, params).unwrap();
            xh = g.download(&x).unwrap();
            times.push(t.elapsed().as_secs_f64());
            info = Some(i);
        }
        let info = info.unwrap();
        times.remove(0); // the first includes the kernel's compile
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let n = batch.len() as f64;
        let agree = (0..batch.len())
            .filter(|&s| info.status[s] == ci.status[s])
            .count();
        let max_res = info
            .relative_residual
            .iter()
            .cloned()
            .fold(0.0f64, f64::max);
        let mean_it = info.iterations.iter().map(|&i| i as f64).sum::<f64>() / n;
        row["gpu_batched_s"] = t.into();
        row["gpu_batched_setup_s"] = setup.into();
        row["gpu_batched_systems_per_s"] = (n / t).into();
        row["gpu_converged"] = info.converged().into();
        row["gpu_status_agrees_with_cpu"] = agree.into();
        row["gpu_max_true_rel_residual"] = max_res.into();
        row["gpu_mean_iterations"] = mean_it.into();
        // One by one on the GPU with the single-system solvers: upload, Jacobi, solve.
        let ops = GpuOps::<T>::new(&g).unwrap();
        let sp = SolveParams {
            rel_tol: params.rel_tol,
            max_iters: params.max_iters,
            record_history: false,
            ..Default::default()
        };
        let gs = gs.min(ms.len());
        fn solve<T: GpuScalar, P: Preconditioner<T, GpuOps<T>>>(
            ops: &GpuOps<T>,
            da: &GpuCsr<T>,
            m: &P,
            db: &<GpuOps<T> as VectorOps<T>>::Vector,
            dx: &mut <GpuOps<T> as VectorOps<T>>::Vector,
            params: &BatchParams,
            sp: &SolveParams,
        ) -> bool {
            match params.method {
                BatchMethod::Cg => solvers::pcg(ops, da, m, db, dx, sp),
                BatchMethod::Bicgstab => solvers::bicgstab(ops, da, m, db, dx, sp),
                BatchMethod::Gmres => solvers::gmres(ops, da, m, db, dx, params.restart, sp),
            }
            .is_ok()
        }
        let one = |s: usize| {
            let a = &ms[s];
            let r = batch.row_range(s);
            let da = GpuCsr::upload(&g, a).unwrap();
            let db = ops.upload(&b[r.clone()]).unwrap();
            let mut dx = ops.upload(&vec![T::zero(); r.len()]).unwrap();
            let ok = match params.precond {
                BatchPrecond::Jacobi => {
                    let m = Jacobi::from_matrix(&ops, a).unwrap();
                    solve(&ops, &da, &m, &db, &mut dx, params, &sp)
                }
                BatchPrecond::Ilu0 => {
                    let m = Ilu0::new(&ops, a, &ILU_PARAMS).unwrap();
                    solve(&ops, &da, &m, &db, &mut dx, params, &sp)
                }
                BatchPrecond::None => solve(&ops, &da, &Identity, &db, &mut dx, params, &sp),
            };
            let _ = ops.download(&dx).unwrap();
            ok
        };
        one(0); // warm-up: kernel compiles
        let t0 = Instant::now();
        let mut ok = 0;
        for s in 0..gs {
            ok += one(s) as usize;
        }
        let rate = gs as f64 / t0.elapsed().as_secs_f64();
        row["gpu_single_systems_per_s"] = rate.into();
        row["gpu_single_sample"] = gs.into();
        row["gpu_single_converged"] = ok.into();
        let cpu_seq = row["cpu_seq_systems_per_s"].as_f64().unwrap();
        let best_one_by_one = cpu_seq.max(rate);
        row["speedup_vs_best_one_by_one"] = (n / t / best_one_by_one).into();
        row["speedup_vs_cpu_seq"] = (n / t / cpu_seq).into();
        row["speedup_vs_gpu_single"] = (n / t / rate).into();
        row["speedup_vs_cpu_par"] = (n / t / row["cpu_par_systems_per_s"].as_f64().unwrap()).into();
        xh
    }
}
