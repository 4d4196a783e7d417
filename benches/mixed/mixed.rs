//! Values stored in f32 under f64 vectors (`spmv::gpu::mixed::GpuMixedCsr`) against f64
//! storage, on one GPU, in one process (every ratio is between rows of one run): one JSON
//! object per row on stdout, each with the device; `benches/mixed/device.sh` adds the date and
//! the commit.
//!
//! `mixed_bench [MODE...]` (default: every mode):
//!
//! - `cg`: CG on Poisson 3D 200³ and 240³ (`b = 1`, `x₀ = 0`, rtol 1e-8), values exact in f32,
//!   and the 200³ matrix divided by 3 (values f32 rounds: the reliable updates and the exact copy
//!   at work); the second of two solves of each (kernels compiled, memory pool warm); the true
//!   residual recomputed on the host in f64 with the exact matrix.
//! - `amg`: AMG-PCG on Poisson 3D 240³ (exact and rounded values, rtol 1e-8), the hierarchy in
//!   f64 set up on the device from the f64 matrix, with the f64 operator and with the f32-value
//!   operator on top: setup and solve times, iterations, true residuals.
//! - `amg32`: AMG-PCG with the hierarchy in f32 (`precond::Narrowed`) against the f64 hierarchy
//!   on Poisson 3D 240³ (exact and rounded values) and 3-D elasticity 70³ nodes (1.03 M rows,
//!   rigid-body modes), rtol 1e-8: setup and solve times, iterations, true residuals
//!   (`AMG32_CASES=name,...` picks cases).
//! - `ilu32`: ILU(0) factors in f32 against f64 on a 10⁶-row convection–diffusion grid: seconds
//!   per application, and GMRES(30) to 1e-8 with each.
//! - `cg32`: CG with its recurrence in f32 under an f64 iterate (`solvers::narrow::pcg_f32`,
//!   reliable updates with f64 true residuals) against f64 CG and f32 values under f64 vectors,
//!   Poisson 3D 200³ (exact and rounded values) and 240³, rtol 1e-8 (`CG32_CASES=name,...`
//!   picks cases); one line per case on stdout beside the JSON row.
//! - `gmres`: GMRES(30) per iteration on a 1000² convection–diffusion grid (10⁶ rows,
//!   nonsymmetric, values f32 rounds), 300 iterations each: f64, f32 values, f32 Krylov basis,
//!   both.
//! - `spmv`: the product alone on large generated kinds: f64, f32 values under f64 vectors,
//!   f32, and cuSPARSE f32 (ALG1 and ALG2, the faster kept) — median of 20 after 5 warm-ups.
//! - `ncu` (only when named): one product of each kind for Nsight Compute.
//! - `ncugmres64`, `ncugmres32` (only when named): 25 iterations of GMRES(30) on the 1000²
//!   convection–diffusion grid with the f64 / f32 basis, for Nsight Compute.
//! - `ncu32` (only when named): applications of the f32 AMG hierarchy (Poisson 3D 150³) and of
//!   the f32 ILU(0) factors (convection 1000²) for Nsight Compute.
//! - `corpus`: robustness on 10 SPD (Jacobi-PCG) and 10 nonsymmetric (GMRES(30), Jacobi where
//!   the diagonal allows) corpus matrices, rtol 1e-8: f32 storage through
//!   `solvers::storage::solve_stored` (with its fallback) against f64 storage, the true
//!   residual recomputed on the host.
//!
//! Built as an example (`cargo build --release -p segsparse-tools --example mixed_bench`) so that
//! it links the release library the other tools use.

#[cfg(feature = "cuda")]
fn main() {
    imp::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("mixed_bench: built without the cuda feature");
}

#[cfg(feature = "cuda")]
mod imp {
    use std::sync::Arc;

    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::NarrowOps;
    use segsparse::backend::{Identity, LinearOperator, Preconditioner, VectorOps};
    use segsparse::gpu::Gpu;
    use segsparse::precond::{Amg, AmgParams, Jacobi};
    use segsparse::solvers::narrow::pcg_f32;
    use segsparse::solvers::storage::{solve_stored, StoredOperator};
    use segsparse::solvers::{cg, gmres, pcg, SolveError, SolveInfo, SolveParams};
    use segsparse::spmv::gpu::mixed::GpuMixedCsr;
    use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv, GpuCsr};
    use segsparse::{generate, CsrMatrix, Storage};

    type Be = GpuOps<f64>;

    fn device(g: &Gpu) -> String {
        g.name().to_string()
    }

    /// `‖b − A·x‖/‖b‖` on the host in f64 with the exact matrix.
    fn true_rel(a: &CsrMatrix<f64>, b: &[f64], x: &[f64]) -> f64 {
        let mut ax = vec![0.0; a.nrows()];
        segsparse::spmv::spmv(1.0, a, x, 0.0, &mut ax);
        let r: f64 = b.iter().zip(&ax).map(|(b, y)| (b - y).powi(2)).sum();
        let bb: f64 = b.iter().map(|v| v * v).sum();
        (r / bb).sqrt()
    }

    fn row(fields: Vec<(&str, serde_json::Value)>) {
        let m: serde_json::Map<String, serde_json::Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        println!("{}", serde_json::Value::Object(m));
    }

    fn outcome(r: &Result<SolveInfo, SolveError>) -> (bool, usize, f64, String) {
        match r {
            Ok(i) => (true, i.iterations, i.solve_seconds, String::new()),
            Err(e) => {
                let it = match e {
                    SolveError::NotConverged { iterations, .. }
                    | SolveError::Stagnation { iterations, .. } => *iterations,
                    SolveError::Breakdown { iteration, .. }
                    | SolveError::NonFinite { iteration } => *iteration,
                    _ => 0,
                };
                (false, it, f64::NAN, e.to_string())
            }
        }
    }

    /// Two solves of `op` from `x₀ = 0`; the second's info and solution.
    fn solve_twice(
        be: &Be,
        b: &[f64],
        mut run: impl FnMut(&mut <Be as VectorOps<f64>>::Vector) -> Result<SolveInfo, SolveError>,
    ) -> (Result<SolveInfo, SolveError>, Vec<f64>) {
        let mut x = be.zeros(b.len()).unwrap();
        let _ = run(&mut x);
        let mut x = be.zeros(b.len()).unwrap();
        let r = run(&mut x);
        (r, be.download(&x).unwrap())
    }

    fn cg_rows(g: &Arc<Gpu>, be: &Be) {
        let base = generate::poisson3d::<f64>(200).unwrap();
        let third = base.map_values(|v| v / 3.0);
        let large = generate::poisson3d::<f64>(240).unwrap();
        for (name, a) in [
            ("poisson3d:200", &base),
            ("poisson3d:200/3", &third),
            ("poisson3d:240", &large),
        ] {
            let n = a.nrows();
            let b = vec![1.0; n];
            let bd = be.upload(&b).unwrap();
            let p = SolveParams {
                rel_tol: 1e-8,
                max_iters: 20_000,
                ..Default::default()
            };
            let full = GpuCsr::upload(g, a).unwrap();
            let (r64, x64) = solve_twice(be, &b, |x| cg(be, &full, &bd, x, &p));
            drop(full);
            let mixed = GpuMixedCsr::upload(g, a).unwrap();
            let (r32, x32) = solve_twice(be, &b, |x| cg(be, &mixed, &bd, x, &p));
            let (ok64, it64, s64, e64) = outcome(&r64);
            let (ok32, it32, s32, e32) = outcome(&r32);
            let restarts = r32.as_ref().map_or(0, |i| i.restarts);
            row(vec![
                ("bench", "mixed-cg".into()),
                ("device", device(g).into()),
                ("matrix", name.into()),
                ("n", n.into()),
                ("nnz", a.nnz().into()),
                ("rtol", 1e-8.into()),
                ("lossless_f32", mixed.is_lossless().into()),
                ("f64_converged", ok64.into()),
                ("f64_iterations", it64.into()),
                ("f64_solve_seconds", s64.into()),
                ("f64_true_residual", true_rel(a, &b, &x64).into()),
                ("f64_error", e64.into()),
                ("f32_converged", ok32.into()),
                ("f32_iterations", it32.into()),
                ("f32_solve_seconds", s32.into()),
                ("f32_true_residual", true_rel(a, &b, &x32).into()),
                ("f32_restarts", restarts.into()),
                ("f32_error", e32.into()),
                ("time_ratio_f32_over_f64", (s32 / s64).into()),
                ("iteration_ratio", (it32 as f64 / it64 as f64).into()),
            ]);
        }
    }

    /// AMG-PCG (the default smoothed aggregation, its hierarchy in f64, set up on the device from
    /// the f64 matrix) with the f64 operator and with the f32-value operator on top: setup time
    /// (the second of two setups), and the second of two solves of each.
    fn amg_rows(g: &Arc<Gpu>, be: &Be) {
        for (name, a) in [
            ("poisson3d:240", generate::poisson3d::<f64>(240).unwrap()),
            (
                "poisson3d:240/3",
                generate::poisson3d::<f64>(240)
                    .unwrap()
                    .map_values(|v| v / 3.0),
            ),
        ] {
            let n = a.nrows();
            let b = vec![1.0; n];
            let bd = be.upload(&b).unwrap();
            let p = SolveParams {
                rel_tol: 1e-8,
                max_iters: 2_000,
                ..Default::default()
            };
            let full = GpuCsr::upload(g, &a).unwrap();
            let params = AmgParams::default();
            drop(Amg::from_matrix(be, &full, &params).unwrap());
            g.synchronize().unwrap();
            let t = std::time::Instant::now();
            let h = Amg::from_matrix(be, &full, &params).unwrap();
            g.synchronize().unwrap();
            let setup = t.elapsed().as_secs_f64();
            let (r64, x64) = solve_twice(be, &b, |x| pcg(be, &full, &h, &bd, x, &p));
            let mixed = GpuMixedCsr::upload(g, &a).unwrap();
            let (r32, x32) = solve_twice(be, &b, |x| pcg(be, &mixed, &h, &bd, x, &p));
            let (ok64, it64, s64, e64) = outcome(&r64);
            let (ok32, it32, s32, e32) = outcome(&r32);
            row(vec![
                ("bench", "mixed-amg-pcg".into()),
                ("device", device(g).into()),
                ("matrix", name.into()),
                ("n", n.into()),
                ("nnz", a.nnz().into()),
                ("rtol", 1e-8.into()),
                ("hierarchy", "f64".into()),
                ("levels", h.summary().levels.len().into()),
                (
                    "operator_complexity",
                    h.summary().operator_complexity.into(),
                ),
                ("setup_seconds", setup.into()),
                ("lossless_f32", mixed.is_lossless().into()),
                ("f64_converged", ok64.into()),
                ("f64_iterations", it64.into()),
                ("f64_solve_seconds", s64.into()),
                ("f64_true_residual", true_rel(&a, &b, &x64).into()),
                ("f64_error", e64.into()),
                ("f32_operator_converged", ok32.into()),
                ("f32_operator_iterations", it32.into()),
                ("f32_operator_solve_seconds", s32.into()),
                ("f32_operator_true_residual", true_rel(&a, &b, &x32).into()),
                ("f32_operator_error", e32.into()),
                ("solve_ratio_f32_operator_over_f64", (s32 / s64).into()),
            ]);
        }
    }

    /// The AMG hierarchy in f32 (`precond::Narrowed::amg_from_matrix`: the f64 device matrix
    /// rounded on the device, the setup on the device from it, the cycle on f32 vectors) against
    /// the f64 hierarchy (`Amg::from_matrix`), both under f64 CG with the f64 operator, and with
    /// the f32-value operator where the values are exact in f32: setup (the second of two, the
    /// rounding of the matrix included), the second of two solves, iterations, true residuals.
    /// Poisson 3D 240³ (values exact in f32), the same divided by 3 (values that round), and 3-D
    /// Q1 elasticity with its six rigid-body modes (`elasticity3d:70`, 1.03 M rows).
    fn amg32_rows(g: &Arc<Gpu>, be: &Be) {
        use segsparse::precond::Narrowed;
        use segsparse::spmv::gpu::mixed::narrowed;
        let only: Vec<String> = std::env::var("AMG32_CASES")
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        /// A matrix, its near-nullspace candidates and the AMG parameters.
        type Case = (CsrMatrix<f64>, Option<Vec<Vec<f64>>>, AmgParams);
        type Make = fn() -> Case;
        let cases: [(&str, Make); 3] = [
            ("poisson3d:240", || {
                (
                    generate::poisson3d::<f64>(240).unwrap(),
                    None,
                    AmgParams::default(),
                )
            }),
            ("poisson3d:240/3", || {
                (
                    generate::poisson3d::<f64>(240)
                        .unwrap()
                        .map_values(|v| v / 3.0),
                    None,
                    AmgParams::default(),
                )
            }),
            ("elasticity3d:70", || {
                let a = generate::elasticity3d::<f64>(70).unwrap();
                let c = segsparse::precond::amg::rigid_body_modes_3d::<f64>(
                    &generate::elasticity3d_coordinates(70),
                );
                (
                    a,
                    Some(c),
                    AmgParams {
                        block_size: 3,
                        ..Default::default()
                    },
                )
            }),
        ];
        // In the order AMG32_CASES names them (a device call's time may end before the last).
        let order: Vec<_> = if only.is_empty() {
            cases.iter().collect()
        } else {
            only.iter()
                .filter_map(|o| cases.iter().find(|c| c.0 == o))
                .collect()
        };
        for &(name, make) in order {
            let (a, c, params) = make();
            let n = a.nrows();
            let b = vec![1.0; n];
            let bd = be.upload(&b).unwrap();
            let p = SolveParams {
                rel_tol: 1e-8,
                max_iters: 2_000,
                ..Default::default()
            };
            let full = GpuCsr::upload(g, &a).unwrap();
            let setup64 = || match &c {
                Some(c) => Amg::from_matrix_with_candidates(be, &full, c, &params).unwrap(),
                None => Amg::from_matrix(be, &full, &params).unwrap(),
            };
            let setup32 = || {
                let low = narrowed(&full).unwrap();
                Narrowed::amg_from_matrix(be, &low, c.as_deref(), &params).unwrap()
            };
            let timed = |f: &dyn Fn()| {
                g.synchronize().unwrap();
                let t = std::time::Instant::now();
                f();
                g.synchronize().unwrap();
                t.elapsed().as_secs_f64()
            };
            // The second of two setups of each (kernels loaded, memory pool warm).
            drop(setup64());
            let s64 = timed(&|| drop(setup64()));
            drop(setup32());
            let s32 = timed(&|| drop(setup32()));
            let h64 = setup64();
            let h32 = setup32();
            let (r64, x64) = solve_twice(be, &b, |x| pcg(be, &full, &h64, &bd, x, &p));
            let (r32, x32) = solve_twice(be, &b, |x| pcg(be, &full, &h32, &bd, x, &p));
            let mixed = GpuMixedCsr::upload(g, &a).unwrap();
            let both = if mixed.is_lossless() {
                Some(solve_twice(be, &b, |x| pcg(be, &mixed, &h32, &bd, x, &p)))
            } else {
                None
            };
            let (ok64, it64, t64, e64) = outcome(&r64);
            let (ok32, it32, t32, e32) = outcome(&r32);
            let (s64m, s32m) = (h64.summary(), h32.inner().summary());
            let mut fields = vec![
                ("bench", "mixed-amg32".into()),
                ("device", device(g).into()),
                ("matrix", name.into()),
                ("n", n.into()),
                ("nnz", a.nnz().into()),
                ("rtol", 1e-8.into()),
                ("levels", s64m.levels.len().into()),
                ("levels_f32", s32m.levels.len().into()),
                ("operator_complexity", s64m.operator_complexity.into()),
                ("hierarchy_bytes_f64", s64m.device_bytes.into()),
                ("hierarchy_bytes_f32", s32m.device_bytes.into()),
                ("f64_setup_seconds", s64.into()),
                ("f32_setup_seconds", s32.into()),
                ("setup_ratio", (s32 / s64).into()),
                ("f64_converged", ok64.into()),
                ("f64_iterations", it64.into()),
                ("f64_solve_seconds", t64.into()),
                ("f64_true_residual", true_rel(&a, &b, &x64).into()),
                ("f64_error", e64.into()),
                ("f32_converged", ok32.into()),
                ("f32_iterations", it32.into()),
                ("f32_solve_seconds", t32.into()),
                ("f32_true_residual", true_rel(&a, &b, &x32).into()),
                ("f32_error", e32.into()),
                ("solve_ratio", (t32 / t64).into()),
                ("lossless_f32", mixed.is_lossless().into()),
            ];
            if let Some((r, x)) = both {
                let (ok, it, t, e) = outcome(&r);
                fields.extend([
                    ("f32_both_converged", ok.into()),
                    ("f32_both_iterations", it.into()),
                    ("f32_both_solve_seconds", t.into()),
                    ("f32_both_true_residual", true_rel(&a, &b, &x).into()),
                    ("f32_both_error", e.into()),
                    ("solve_ratio_both", (t / t64).into()),
                ]);
            }
            row(fields);
        }
    }

    /// ILU(0) with its factors in f32 (`precond::Narrowed::ilu0`: factored in f32, both
    /// triangular solves on f32 vectors) against ILU(0) in f64 on the 1000² convection–diffusion
    /// grid (10⁶ rows, nonsymmetric): seconds per application (median of 20 after 3 warm-ups),
    /// and GMRES(30) to 1e-8 with each (the second of two solves), iterations and true residuals.
    fn ilu32_rows(g: &Arc<Gpu>, be: &Be) {
        use segsparse::precond::{Ilu0, IncompleteParams, Narrowed};
        let a = convection(1000, 0.3);
        let n = a.nrows();
        let b = vec![1.0; n];
        let bd = be.upload(&b).unwrap();
        let ip = IncompleteParams::default();
        let full = GpuCsr::upload(g, &a).unwrap();
        let m64 = Ilu0::new(be, &a, &ip).unwrap();
        let m32 = Narrowed::ilu0(be, &a, &ip).unwrap();
        let per = |m: &dyn Preconditioner<f64, Be>| {
            let mut z = be.zeros(n).unwrap();
            let mut v = Vec::new();
            for k in 0..23 {
                g.synchronize().unwrap();
                let t = std::time::Instant::now();
                m.apply(be, &bd, &mut z).unwrap();
                g.synchronize().unwrap();
                if k >= 3 {
                    v.push(t.elapsed().as_secs_f64());
                }
            }
            median(v)
        };
        let (a64, a32) = (per(&m64), per(&m32));
        let p = SolveParams {
            rel_tol: 1e-8,
            max_iters: 5_000,
            ..Default::default()
        };
        let (r64, x64) = solve_twice(be, &b, |x| gmres(be, &full, &m64, &bd, x, 30, &p));
        let (r32, x32) = solve_twice(be, &b, |x| gmres(be, &full, &m32, &bd, x, 30, &p));
        let (ok64, it64, t64, e64) = outcome(&r64);
        let (ok32, it32, t32, e32) = outcome(&r32);
        row(vec![
            ("bench", "mixed-ilu32".into()),
            ("device", device(g).into()),
            ("matrix", "convection:1000:0.3".into()),
            ("n", n.into()),
            ("nnz", a.nnz().into()),
            ("f64_seconds_per_application", a64.into()),
            ("f32_seconds_per_application", a32.into()),
            ("application_ratio", (a32 / a64).into()),
            ("rtol", 1e-8.into()),
            ("f64_converged", ok64.into()),
            ("f64_iterations", it64.into()),
            ("f64_solve_seconds", t64.into()),
            ("f64_true_residual", true_rel(&a, &b, &x64).into()),
            ("f64_error", e64.into()),
            ("f32_converged", ok32.into()),
            ("f32_iterations", it32.into()),
            ("f32_solve_seconds", t32.into()),
            ("f32_true_residual", true_rel(&a, &b, &x32).into()),
            ("f32_error", e32.into()),
            ("solve_ratio", (t32 / t64).into()),
        ]);
    }

    /// A convection–diffusion operator on an `m × m` grid: unsymmetric, diagonally dominant,
    /// coefficients f32 rounds (`c = 0.3`).
    fn convection(m: usize, c: f64) -> CsrMatrix<f64> {
        let mut t = Vec::with_capacity(5 * m * m);
        for y in 0..m {
            for x in 0..m {
                let i = y * m + x;
                t.push((i, i, 4.0));
                if x > 0 {
                    t.push((i, i - 1, -1.0 - c));
                }
                if x + 1 < m {
                    t.push((i, i + 1, -1.0 + c));
                }
                if y > 0 {
                    t.push((i, i - m, -1.0 - c / 2.0));
                }
                if y + 1 < m {
                    t.push((i, i + m, -1.0 + c / 2.0));
                }
            }
        }
        CsrMatrix::from_triplets(m * m, m * m, &t).unwrap()
    }

    fn gmres_rows(g: &Arc<Gpu>, be: &Be) {
        let a = convection(1000, 0.3);
        let n = a.nrows();
        let b = vec![1.0; n];
        let bd = be.upload(&b).unwrap();
        // A fixed number of iterations: the per-iteration cost.
        let p = SolveParams {
            rel_tol: 1e-300,
            max_iters: 300,
            ..Default::default()
        };
        let full = GpuCsr::upload(g, &a).unwrap();
        let mixed = GpuMixedCsr::upload(g, &a).unwrap();
        let per = |op: &dyn LinearOperator<f64, Be>, basis: Storage| {
            let p = SolveParams { basis, ..p };
            let mut best = f64::INFINITY;
            for _ in 0..2 {
                let mut x = be.zeros(n).unwrap();
                let t = std::time::Instant::now();
                let r = gmres(be, op, &Identity, &bd, &mut x, 30, &p);
                be.download(&x).unwrap();
                let secs = t.elapsed().as_secs_f64();
                let its = match r {
                    Ok(i) => i.iterations,
                    Err(SolveError::NotConverged { iterations, .. }) => iterations,
                    Err(e) => panic!("GMRES: {e}"),
                };
                best = best.min(secs / its as f64);
            }
            best
        };
        let s64 = per(&full, Storage::F64);
        let s32 = per(&mixed, Storage::F64);
        let s32b = per(&mixed, Storage::F32);
        let s64b = per(&full, Storage::F32);
        row(vec![
            ("bench", "mixed-gmres".into()),
            ("device", device(g).into()),
            ("matrix", "convection:1000:0.3".into()),
            ("n", n.into()),
            ("nnz", a.nnz().into()),
            ("restart", 30.into()),
            ("f64_seconds_per_iteration", s64.into()),
            ("f32_matrix_seconds_per_iteration", s32.into()),
            ("f32_basis_seconds_per_iteration", s64b.into()),
            ("f32_matrix_f32_basis_seconds_per_iteration", s32b.into()),
            ("ratio_f32_matrix", (s32 / s64).into()),
            ("ratio_f32_basis", (s64b / s64).into()),
            ("ratio_both", (s32b / s64).into()),
        ]);
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    fn spmv_rows(g: &Arc<Gpu>) {
        let specs = ["poisson3d:200", "random:4000000:8", "powerlaw:4000000:2.0"];
        for spec in specs {
            let Ok(a) = generate::from_spec::<f64>(spec, 1) else {
                eprintln!("{spec}: not generated");
                continue;
            };
            let a32 = a.cast::<f32>();
            let time = |f: &mut dyn FnMut() -> segsparse::Result<()>| {
                for _ in 0..5 {
                    f().unwrap();
                }
                let v: Vec<f64> = (0..20).map(|_| g.time(&mut *f).unwrap()).collect();
                median(v)
            };
            let x64 = g.upload(&vec![1.0f64; a.ncols()]).unwrap();
            let mut y64 = g.zeros::<f64>(a.nrows()).unwrap();
            let x32 = g.upload(&vec![1.0f32; a.ncols()]).unwrap();
            let mut y32 = g.zeros::<f32>(a.nrows()).unwrap();
            let d64 = GpuCsr::upload(g, &a).unwrap();
            let t64 = time(&mut || d64.spmv(1.0, &x64, 0.0, &mut y64));
            let bytes64 = d64.spmv_bytes();
            drop(d64);
            let mixed = GpuMixedCsr::upload(g, &a).unwrap();
            let tmix = time(&mut || mixed.spmv(1.0, &x64, 0.0, &mut y64));
            let bytes_mix = mixed.spmv_bytes();
            let alg = mixed.resolved_algorithm().name();
            drop(mixed);
            let d32 = GpuCsr::upload(g, &a32).unwrap();
            let t32 = time(&mut || d32.spmv(1.0, &x32, 0.0, &mut y32));
            let mut tcu = f64::INFINITY;
            for ca in [CusparseAlg::Alg1, CusparseAlg::Alg2] {
                if let Ok(mut c) = CusparseSpmv::new(&d32, ca, 1.0f32, &x32, 0.0, &mut y32) {
                    tcu = tcu.min(time(&mut || c.spmv(1.0, &x32, 0.0, &mut y32)));
                }
            }
            row(vec![
                ("bench", "mixed-spmv".into()),
                ("device", device(g).into()),
                ("matrix", spec.into()),
                ("n", a.nrows().into()),
                ("nnz", a.nnz().into()),
                ("algorithm", alg.into()),
                ("f64_seconds", t64.into()),
                ("f32f64_seconds", tmix.into()),
                ("f32_seconds", t32.into()),
                ("cusparse_f32_seconds", tcu.into()),
                ("f64_gbs", (bytes64 as f64 / t64 / 1e9).into()),
                ("f32f64_gbs", (bytes_mix as f64 / tmix / 1e9).into()),
                ("f32f64_over_f64", (tmix / t64).into()),
                ("f32_speed_vs_cusparse", (tcu / t32).into()),
            ]);
        }
    }

    const SPD: [&str; 10] = [
        "bcsstk09",
        "bcsstk13",
        "bcsstk16",
        "494_bus",
        "1138_bus",
        "nos4",
        "gr_30_30",
        "Trefethen_500",
        "plat362",
        "LFAT5",
    ];
    const UNSYM: [&str; 10] = [
        "raefsky2", "orsirr_1", "sherman5", "cage8", "hor_131", "watt_2", "olm1000", "west0479",
        "fs_183_1", "rajat19",
    ];

    fn load(name: &str) -> Option<CsrMatrix<f64>> {
        let dir = std::env::var("SEGSPARSE_DATA").unwrap_or_else(|_| "matrices".into());
        let p = std::path::Path::new(&dir).join(format!("{name}.mtx.gz"));
        segsparse::io::read_matrix_market(&p)
            .map_err(|e| eprintln!("{name}: {e}"))
            .ok()
    }

    fn corpus_rows(g: &Arc<Gpu>, be: &Be) {
        let p = SolveParams {
            rel_tol: 1e-8,
            max_iters: 20_000,
            ..Default::default()
        };
        for (spd, names) in [(true, &SPD[..]), (false, &UNSYM[..])] {
            for &name in names {
                let Some(a) = load(name) else { continue };
                let n = a.nrows();
                let b = vec![1.0; n];
                let bd = be.upload(&b).unwrap();
                let jac =
                    (!a.diagonal().contains(&0.0)).then(|| Jacobi::from_matrix(be, &a).unwrap());
                let m: &dyn Preconditioner<f64, Be> = match &jac {
                    Some(j) => j,
                    None => &Identity,
                };
                let method = if spd { "pcg" } else { "gmres30" };
                let run = |op: &dyn LinearOperator<f64, Be>,
                           x: &mut <Be as VectorOps<f64>>::Vector,
                           p: &SolveParams| {
                    if spd {
                        pcg(be, op, m, &bd, x, p)
                    } else {
                        gmres(be, op, m, &bd, x, 30, p)
                    }
                };
                let full = GpuCsr::upload(g, &a).unwrap();
                let mut x = be.zeros(n).unwrap();
                let r64 = run(&full, &mut x, &p);
                let x64 = be.download(&x).unwrap();
                let (ok64, it64, _, e64) = outcome(&r64);
                let mut x = be.zeros(n).unwrap();
                let (stored, fallback, r32) = match GpuMixedCsr::upload(g, &a) {
                    Ok(mixed) => {
                        let exact = mixed.exact().map(|e| e as &dyn LinearOperator<f64, Be>);
                        let s = solve_stored(
                            be,
                            StoredOperator::F32 {
                                narrow: &mixed,
                                exact,
                            },
                            &mut x,
                            &p,
                            |_, op, x, p| run(op, x, p),
                        )
                        .unwrap();
                        (s.storage, s.fallback, s.result)
                    }
                    Err(segsparse::Error::InvalidInput(why)) => {
                        let s = solve_stored(
                            be,
                            StoredOperator::Refused {
                                reason: why,
                                exact: &full,
                            },
                            &mut x,
                            &p,
                            |_, op, x, p| run(op, x, p),
                        )
                        .unwrap();
                        (s.storage, s.fallback, s.result)
                    }
                    Err(e) => panic!("{name}: {e}"),
                };
                let x32 = be.download(&x).unwrap();
                let (ok32, it32, _, e32) = outcome(&r32);
                let t32 = true_rel(&a, &b, &x32);
                row(vec![
                    ("bench", "mixed-corpus".into()),
                    ("device", device(g).into()),
                    ("matrix", name.into()),
                    ("spd", spd.into()),
                    ("n", n.into()),
                    ("nnz", a.nnz().into()),
                    ("method", method.into()),
                    (
                        "precond",
                        if jac.is_some() { "jacobi" } else { "none" }.into(),
                    ),
                    ("rtol", 1e-8.into()),
                    ("f64_converged", ok64.into()),
                    ("f64_iterations", it64.into()),
                    ("f64_true_residual", true_rel(&a, &b, &x64).into()),
                    ("f64_error", e64.into()),
                    ("mixed_converged", ok32.into()),
                    ("mixed_iterations", it32.into()),
                    ("mixed_true_residual", t32.into()),
                    ("mixed_storage", stored.name().into()),
                    ("mixed_fallback", fallback.unwrap_or_default().into()),
                    ("mixed_error", e32.into()),
                    // The rule: a converged mixed solve meets the tolerance on the true residual.
                    ("honest", (!ok32 || t32 <= 1e-8 * 1.0001).into()),
                ]);
            }
        }
    }

    /// One product of each kind for Nsight Compute (`device.sh`'s `ncu` step profiles the
    /// kernels by name): the row kernel on Poisson 3D 150³ and the fused kernel on a power-law
    /// matrix, f64 then f32 values under f64 vectors.
    fn ncu_products(g: &Arc<Gpu>) {
        for spec in ["poisson3d:150", "powerlaw:2000000:2.0"] {
            let a = generate::from_spec::<f64>(spec, 1).unwrap();
            let x = g.upload(&vec![1.0f64; a.ncols()]).unwrap();
            let mut y = g.zeros::<f64>(a.nrows()).unwrap();
            let d = GpuCsr::upload(g, &a).unwrap();
            let m = GpuMixedCsr::upload(g, &a).unwrap();
            d.spmv(1.0, &x, 0.0, &mut y).unwrap();
            m.spmv(1.0, &x, 0.0, &mut y).unwrap();
            g.synchronize().unwrap();
            eprintln!(
                "{spec}: f64 {}, f32 values {}",
                d.resolved_algorithm().name(),
                m.resolved_algorithm().name()
            );
        }
    }

    /// One application of the f32 AMG hierarchy and of the f32 ILU(0) factors for Nsight
    /// Compute (`ncu32`: the conversion kernels `vector_narrow_f64b32`/`vector_widen_f64b32`
    /// and the f32 cycle's products), after one warm-up application of each.
    fn ncu_narrowed(g: &Arc<Gpu>, be: &Be) {
        use segsparse::precond::{IncompleteParams, Narrowed};
        let a = generate::poisson3d::<f64>(150).unwrap();
        let h = Narrowed::amg(be, &a, &AmgParams::default()).unwrap();
        let r = be.upload(&vec![1.0; a.nrows()]).unwrap();
        let mut z = be.zeros(a.nrows()).unwrap();
        h.apply(be, &r, &mut z).unwrap();
        g.synchronize().unwrap();
        eprintln!("ncu32: f32 AMG cycle on poisson3d:150");
        h.apply(be, &r, &mut z).unwrap();
        g.synchronize().unwrap();
        let c = convection(1000, 0.3);
        let m = Narrowed::ilu0(be, &c, &IncompleteParams::default()).unwrap();
        let r = be.upload(&vec![1.0; c.nrows()]).unwrap();
        let mut z = be.zeros(c.nrows()).unwrap();
        m.apply(be, &r, &mut z).unwrap();
        g.synchronize().unwrap();
    }

    /// CG with its recurrence in f32 under an f64 iterate (`solvers::narrow::pcg_f32`: the f32
    /// matrix on f32 vectors, reliable updates with f64 true residuals) against f64 CG and CG
    /// with f32 values under f64 vectors, Poisson 3D 200³ (exact and rounded values) and 240³,
    /// rtol 1e-8, `b = 1`: the second of two solves of each; true residuals on the host.
    fn cg32_rows(g: &Arc<Gpu>, be: &Be) {
        let low = be.low().unwrap();
        type Make = fn() -> CsrMatrix<f64>;
        let cases: [(&str, Make); 3] = [
            ("poisson3d:200", || generate::poisson3d::<f64>(200).unwrap()),
            ("poisson3d:200/3", || {
                generate::poisson3d::<f64>(200)
                    .unwrap()
                    .map_values(|v| v / 3.0)
            }),
            ("poisson3d:240", || generate::poisson3d::<f64>(240).unwrap()),
        ];
        let only: Option<Vec<String>> = std::env::var("CG32_CASES")
            .ok()
            .map(|v| v.split(',').map(str::to_string).collect());
        for (name, make) in cases {
            if only.as_ref().is_some_and(|o| !o.iter().any(|c| c == name)) {
                continue;
            }
            let a = make();
            let n = a.nrows();
            let b = vec![1.0; n];
            let bd = be.upload(&b).unwrap();
            let p = SolveParams {
                rel_tol: 1e-8,
                max_iters: 20_000,
                ..Default::default()
            };
            let full = GpuCsr::upload(g, &a).unwrap();
            let (r64, x64) = solve_twice(be, &b, |x| cg(be, &full, &bd, x, &p));
            let narrow = GpuCsr::upload(g, &a.cast::<f32>()).unwrap();
            let (rv, xv) = solve_twice(be, &b, |x| {
                pcg_f32(be, &low, &full, &narrow, &Identity, &bd, x, &p)
            });
            drop(narrow);
            drop(full);
            let mixed = GpuMixedCsr::upload(g, &a).unwrap();
            let (rm, xm) = solve_twice(be, &b, |x| cg(be, &mixed, &bd, x, &p));
            drop(mixed);
            let (ok64, it64, s64, e64) = outcome(&r64);
            let (okv, itv, sv, ev) = outcome(&rv);
            let (okm, itm, sm, em) = outcome(&rm);
            let tv = true_rel(&a, &b, &xv);
            eprintln!(
                "cg32 {name}: f64 {it64} its {s64:.4} s; f32 vectors {itv} its {sv:.4} s \
                 ({:.3}x, true residual {tv:.2e}); f32 values {itm} its {sm:.4} s ({:.3}x)",
                sv / s64,
                sm / s64
            );
            row(vec![
                ("bench", "mixed-cg32".into()),
                ("device", device(g).into()),
                ("matrix", name.into()),
                ("n", n.into()),
                ("nnz", a.nnz().into()),
                ("rtol", 1e-8.into()),
                ("f64_converged", ok64.into()),
                ("f64_iterations", it64.into()),
                ("f64_solve_seconds", s64.into()),
                ("f64_true_residual", true_rel(&a, &b, &x64).into()),
                ("f64_error", e64.into()),
                ("f32v_converged", okv.into()),
                ("f32v_iterations", itv.into()),
                ("f32v_solve_seconds", sv.into()),
                ("f32v_true_residual", tv.into()),
                (
                    "f32v_restarts",
                    rv.as_ref().map_or(0, |i| i.restarts).into(),
                ),
                ("f32v_error", ev.into()),
                ("f32_values_converged", okm.into()),
                ("f32_values_iterations", itm.into()),
                ("f32_values_solve_seconds", sm.into()),
                ("f32_values_true_residual", true_rel(&a, &b, &xm).into()),
                ("f32_values_error", em.into()),
                ("time_ratio_f32v_over_f64", (sv / s64).into()),
                ("iteration_ratio_f32v", (itv as f64 / it64 as f64).into()),
                ("time_ratio_f32_values_over_f64", (sm / s64).into()),
                ("honest", (okv && tv <= 1e-8).into()),
            ]);
        }
    }

    /// GMRES(30) on the 1000² convection–diffusion grid, f64 values, for Nsight Compute:
    /// `basis` f64 or f32, 25 iterations (one cycle, up to column 25).
    fn ncu_gmres(g: &Arc<Gpu>, be: &Be, basis: Storage) {
        let a = convection(1000, 0.3);
        let n = a.nrows();
        let bd = be.upload(&vec![1.0; n]).unwrap();
        let full = GpuCsr::upload(g, &a).unwrap();
        let p = SolveParams {
            rel_tol: 1e-300,
            max_iters: 25,
            graphs: false,
            basis,
            ..Default::default()
        };
        let mut x = be.zeros(n).unwrap();
        let _ = gmres(be, &full, &Identity, &bd, &mut x, 30, &p);
        g.synchronize().unwrap();
    }

    pub fn main() {
        let modes: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        let want = |m: &str| modes.is_empty() || modes.iter().any(|x| x == m);
        let g = Gpu::shared().expect("mixed_bench needs a GPU");
        let be = Be::new(&g).unwrap();
        if want("corpus") {
            corpus_rows(&g, &be);
        }
        if want("cg") {
            cg_rows(&g, &be);
        }
        if want("cg32") {
            cg32_rows(&g, &be);
        }
        if want("gmres") {
            gmres_rows(&g, &be);
        }
        if want("amg") {
            amg_rows(&g, &be);
        }
        if want("amg32") {
            amg32_rows(&g, &be);
        }
        if want("ilu32") {
            ilu32_rows(&g, &be);
        }
        if want("spmv") {
            spmv_rows(&g);
        }
        if modes.iter().any(|m| m == "ncu") {
            ncu_products(&g);
        }
        if modes.iter().any(|m| m == "ncugmres64") {
            ncu_gmres(&g, &be, Storage::F64);
        }
        if modes.iter().any(|m| m == "ncugmres32") {
            ncu_gmres(&g, &be, Storage::F32);
        }
        if modes.iter().any(|m| m == "ncu32") {
            ncu_narrowed(&g, &be);
        }
    }
}
