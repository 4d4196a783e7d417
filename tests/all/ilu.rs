//! Triangular solves, ILU(0)/IC(0) and their preconditioners: GPU against the CPU reference
//! (random triangles with empty rows, a deep chain, a diagonal-only matrix, wide levels; the
//! factors of corpus matrices; both solve algorithms; f32 and f64), the GPU factorization against
//! the CPU one, zero pivots on the GPU, and preconditioned solves on CPU and GPU.
//!
//! GPU tests skip with a notice without a device and fail instead when `SEGSPARSE_REQUIRE_GPU=1`.
//! Corpus matrices come from `SEGSPARSE_DATA`, `../shared/matrices` or `matrices/`.

use segsparse::precond::{Ic0, Ilu0, IncompleteParams};
use segsparse::solvers::{cg, gmres, pcg, Cpu, Identity, SolveParams};
use segsparse::sparse::incomplete::{FactorKind, IncompleteFactor};
use segsparse::sparse::triangular::{Diagonal, Triangle, TriangularPlan};
use segsparse::{CsrMatrix, Scalar};

use crate::common::mtx::load;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random square matrix, strong diagonal; `band` limits |i − j| (0: anywhere); one row in
/// `empty` has only its diagonal.
fn random_matrix<T: Scalar>(
    n: usize,
    per_row: usize,
    band: usize,
    empty: usize,
    seed: u64,
) -> CsrMatrix<T> {
    let mut r = Rng(seed | 1);
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, T::of_f64(4.0 + r.unit() * per_row as f64)));
        if empty > 0 && i % empty == 0 {
            continue;
        }
        for _ in 0..per_row {
            let j = if band == 0 {
                (r.next() % n as u64) as usize
            } else {
                let off = (r.next() % (2 * band as u64 + 1)) as i64 - band as i64;
                (i as i64 + off).clamp(0, n as i64 - 1) as usize
            };
            if j != i {
                t.push((i, j, T::of_f64(r.unit() - 0.5)));
            }
        }
    }
    let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    a.sum_duplicates();
    a
}

fn chain<T: Scalar>(n: usize) -> CsrMatrix<T> {
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, T::of_f64(2.0)));
        if i > 0 {
            t.push((i, i - 1, T::of_f64(-0.9)));
            t.push((i - 1, i, T::of_f64(-0.5)));
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn diagonal<T: Scalar>(n: usize) -> CsrMatrix<T> {
    let t: Vec<_> = (0..n).map(|i| (i, i, T::of_f64(1.0 + i as f64))).collect();
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn max_rel_diff<T: Scalar>(got: &[T], want: &[T]) -> f64 {
    let scale = want
        .iter()
        .fold(0.0f64, |m, v| m.max(v.as_f64().abs()))
        .max(1e-300);
    got.iter()
        .zip(want)
        .map(|(g, w)| (g.as_f64() - w.as_f64()).abs() / scale)
        .fold(0.0, f64::max)
}

// ---------------------------------------------------------------- CPU: preconditioned solves

#[test]
fn gmres_with_ilu0_converges_faster_on_corpus_matrices() {
    for name in ["orsirr_1", "sherman5"] {
        let Some(a) = load::<f64>(name) else { continue };
        let b = vec![1.0; a.nrows()];
        let params = SolveParams {
            max_iters: 20_000,
            ..Default::default()
        };
        let m = Ilu0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
        let mut x = vec![0.0; a.nrows()];
        let with = gmres(&Cpu, &a, &m, &b, &mut x, 30, &params).unwrap();
        assert!(with.relative_residual <= 1e-8);
        let mut x0 = vec![0.0; a.nrows()];
        let without = gmres(&Cpu, &a, &Identity, &b, &mut x0, 30, &params);
        let it0 = without.map(|i| i.iterations).unwrap_or(params.max_iters);
        assert!(
            with.iterations * 5 <= it0,
            "{name}: {} iterations with ILU(0), {it0} without",
            with.iterations
        );
    }
}

/// Jacobi sweeps instead of exact triangular solves: on sherman5 a few sweeps suffice; on
/// orsirr_1 fewer than 5 stagnate GMRES (the sweeps' transient growth on a non-normal `U`), 5 or
/// more match the exact solve.
#[test]
fn gmres_with_ilu0_jacobi_sweeps_converges() {
    for (name, sweeps) in [("sherman5", 3usize), ("orsirr_1", 8)] {
        let Some(a) = load::<f64>(name) else { continue };
        let b = vec![1.0; a.nrows()];
        let params = SolveParams {
            max_iters: 20_000,
            ..Default::default()
        };
        let exact = Ilu0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
        let mut x = vec![0.0; a.nrows()];
        let e = gmres(&Cpu, &a, &exact, &b, &mut x, 30, &params).unwrap();
        let p = IncompleteParams {
            jacobi_sweeps: sweeps,
            ..Default::default()
        };
        let approx = Ilu0::new(&Cpu, &a, &p).unwrap();
        let mut x = vec![0.0; a.nrows()];
        let j = gmres(&Cpu, &a, &approx, &b, &mut x, 30, &params).unwrap();
        assert!(j.relative_residual <= 1e-8);
        assert!(
            j.iterations <= 2 * e.iterations,
            "{name}: {} vs {}",
            j.iterations,
            e.iterations
        );
    }
}

#[test]
fn pcg_with_ic0_beats_cg_and_update_refactors() {
    let a = segsparse::generate::poisson2d::<f64>(40).unwrap();
    let b = vec![1.0; a.nrows()];
    let p = SolveParams::default();
    let mut m = Ic0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
    let mut x = vec![0.0; a.nrows()];
    let with = pcg(&Cpu, &a, &m, &b, &mut x, &p).unwrap();
    let mut x0 = vec![0.0; a.nrows()];
    let without = cg(&Cpu, &a, &b, &mut x0, &p).unwrap();
    assert!(
        (with.iterations as f64) <= 0.5 * without.iterations as f64,
        "{} vs {}",
        with.iterations,
        without.iterations
    );
    // New values on the same pattern: 2A has the factor √2·L.
    let mut a2 = a.clone();
    a2.values_mut().iter_mut().for_each(|v| *v *= 2.0);
    let l1 = m.factor().values().to_vec();
    m.update(&Cpu, &a2).unwrap();
    for (u, v) in m.factor().values().iter().zip(&l1) {
        assert!((u - v * 2f64.sqrt()).abs() <= 1e-12 * v.abs().max(1.0));
    }
    let mut x2 = vec![0.0; a.nrows()];
    let info = pcg(&Cpu, &a2, &m, &b, &mut x2, &p).unwrap();
    assert_eq!(info.iterations, with.iterations);
}

#[test]
fn ic0_on_spd_corpus_matrices_cuts_cg_iterations() {
    // bcsstk09 breaks IC(0) down without a shift (row 243): auto_shift finds one.
    for name in ["bcsstk09", "nos4", "bcsstk13"] {
        let Some(a) = load::<f64>(name) else { continue };
        let b = vec![1.0; a.nrows()];
        let p = SolveParams {
            max_iters: 20_000,
            ..Default::default()
        };
        let ip = IncompleteParams {
            auto_shift: true,
            ..Default::default()
        };
        let m = Ic0::new(&Cpu, &a, &ip).unwrap();
        eprintln!("{name}: shift {}", m.factor().shift_used());
        let mut x = vec![0.0; a.nrows()];
        let with = pcg(&Cpu, &a, &m, &b, &mut x, &p).unwrap();
        let mut x0 = vec![0.0; a.nrows()];
        let without = cg(&Cpu, &a, &b, &mut x0, &p)
            .map(|i| i.iterations)
            .unwrap_or(p.max_iters);
        eprintln!("{name}: {} vs {without}", with.iterations);
        // A shifted IC(0) is a weaker preconditioner: fewer iterations, not 0.4×.
        let ratio = if m.factor().shift_used() > 0.0 {
            0.8
        } else {
            0.4
        };
        assert!(
            (with.iterations as f64) <= ratio * without as f64,
            "{name}: {} vs {without}",
            with.iterations
        );
    }
}

// ---------------------------------------------------------------- GPU

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::gpu::{test_gpu, Gpu, KernelType};
    use segsparse::precond::SptrsvAlgorithm;
    use segsparse::solvers::gpu::GpuOps;
    use segsparse::sparse::incomplete::triangle_of;
    use segsparse::sparse::triangular::cusparse_peer::CusparseSpsv;
    use segsparse::sparse::triangular::gpu::{GpuIncompleteFactor, GpuTriangular};
    use std::sync::Arc;

    /// `SEGSPARSE_ILU_QUICK=1` (under compute-sanitizer) keeps only the small cases.
    fn quick() -> bool {
        std::env::var("SEGSPARSE_ILU_QUICK").is_ok_and(|v| v == "1")
    }

    fn matrices<T: Scalar>() -> Vec<(String, CsrMatrix<T>)> {
        if quick() {
            return vec![
                (
                    "random 300 empty rows".into(),
                    random_matrix::<T>(300, 4, 0, 3, 2),
                ),
                (
                    "random 3000 wide".into(),
                    random_matrix::<T>(3000, 3, 0, 11, 4),
                ),
                ("chain 300".into(), chain::<T>(300)),
                ("diagonal 100".into(), diagonal::<T>(100)),
            ];
        }
        let mut v = vec![
            ("random 1".to_string(), random_matrix::<T>(1, 0, 0, 0, 1)),
            (
                "random 300 empty rows".into(),
                random_matrix::<T>(300, 4, 0, 3, 2),
            ),
            (
                "random 5000 band".into(),
                random_matrix::<T>(5000, 6, 40, 0, 3),
            ),
            (
                "random 40000 wide".into(),
                random_matrix::<T>(40_000, 3, 0, 11, 4),
            ),
            (
                "random 3000 long rows".into(),
                random_matrix::<T>(3000, 60, 0, 0, 5),
            ),
            ("chain 3000".into(), chain::<T>(3000)),
            ("diagonal 1000".into(), diagonal::<T>(1000)),
        ];
        for name in ["orsirr_1", "sherman5", "west0479", "bcsstk13", "raefsky2"] {
            if let Some(a) = load::<T>(name) {
                // ILU(0) factors of the corpus matrices (the CPU factor, shifted where needed).
                for shift in [0.0, 0.05] {
                    let p = IncompleteParams {
                        shift,
                        ..Default::default()
                    };
                    if let Ok(f) = IncompleteFactor::new(&a, FactorKind::Ilu0, &p) {
                        v.push((format!("{name} ILU(0) factor"), f.matrix()));
                        break;
                    }
                }
            }
        }
        v
    }

    fn tol<T: Scalar>() -> f64 {
        if T::BYTES == 4 {
            2e-3
        } else {
            1e-9
        }
    }

    fn triangular_case<T: Scalar + KernelType>(gpu: &Arc<Gpu>) {
        for (name, a) in matrices::<T>() {
            let n = a.nrows();
            let b: Vec<T> = (0..n)
                .map(|i| T::of_f64(1.0 + ((i * 7) % 11) as f64 * 0.1))
                .collect();
            let db = gpu.upload(&b).unwrap();
            for tri in [Triangle::Lower, Triangle::Upper] {
                for diag in [Diagonal::Unit, Diagonal::NonUnit] {
                    let plan = TriangularPlan::analyse(&a, tri, diag).unwrap();
                    let mut want = vec![T::zero(); n];
                    plan.solve(&a, &b, &mut want).unwrap();
                    for alg in [
                        SptrsvAlgorithm::Levels,
                        SptrsvAlgorithm::SyncFree,
                        SptrsvAlgorithm::Auto,
                    ] {
                        let t = GpuTriangular::upload(gpu, &a, tri, diag, alg).unwrap();
                        // Poison the output.
                        let mut dx = gpu.upload(&vec![T::of_f64(f64::NAN); n]).unwrap();
                        for _ in 0..2 {
                            t.solve(&db, &mut dx).unwrap();
                        }
                        let got = gpu.download(&dx).unwrap();
                        let d = max_rel_diff(&got, &want);
                        assert!(
                            d <= tol::<T>(),
                            "{name} {tri:?} {diag:?} {alg:?} {}: max rel diff {d:e}",
                            T::NAME
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn gpu_triangular_solves_match_the_cpu() {
        let Some(gpu) = test_gpu() else { return };
        triangular_case::<f64>(&gpu);
        triangular_case::<f32>(&gpu);
    }

    #[test]
    fn cusparse_spsv_agrees_on_corpus_factors() {
        let Some(gpu) = test_gpu() else { return };
        for name in ["orsirr_1", "sherman5"] {
            let Some(a) = load::<f64>(name) else { continue };
            let f =
                IncompleteFactor::new(&a, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
            let n = a.nrows();
            let b: Vec<f64> = (0..n).map(|i| (i as f64).cos()).collect();
            let db = gpu.upload(&b).unwrap();
            for (m, tri, diag) in [
                (
                    triangle_of(&f.matrix(), Triangle::Lower, None),
                    Triangle::Lower,
                    Diagonal::Unit,
                ),
                (f.upper_matrix(), Triangle::Upper, Diagonal::NonUnit),
            ] {
                let mut want = vec![0.0; n];
                TriangularPlan::analyse(&m, tri, diag)
                    .unwrap()
                    .solve(&m, &b, &mut want)
                    .unwrap();
                let mut dx = gpu.zeros::<f64>(n).unwrap();
                let mut peer = CusparseSpsv::new(&gpu, &m, tri, diag, &db, &mut dx).unwrap();
                peer.solve(&db, &mut dx).unwrap();
                let got = gpu.download(&dx).unwrap();
                assert!(max_rel_diff(&got, &want) <= 1e-9, "{name} {tri:?}");
            }
        }
    }

    fn factor_case<T: Scalar + KernelType>(gpu: &Arc<Gpu>) {
        let mut cases: Vec<(String, CsrMatrix<T>, FactorKind)> = vec![
            (
                "random 300".into(),
                random_matrix::<T>(300, 4, 0, 3, 7),
                FactorKind::Ilu0,
            ),
            (
                "random 20000 band".into(),
                random_matrix::<T>(20_000, 5, 30, 0, 8),
                FactorKind::Ilu0,
            ),
            ("chain 2000".into(), chain::<T>(2000), FactorKind::Ilu0),
            (
                "poisson 60".into(),
                segsparse::generate::poisson2d::<T>(60).unwrap(),
                FactorKind::Ic0,
            ),
            (
                "poisson 60".into(),
                segsparse::generate::poisson2d::<T>(60).unwrap(),
                FactorKind::Ilu0,
            ),
        ];
        if quick() {
            cases.truncate(1);
            cases.push(("chain 200".into(), chain::<T>(200), FactorKind::Ilu0));
            cases.push((
                "poisson 20".into(),
                segsparse::generate::poisson2d::<T>(20).unwrap(),
                FactorKind::Ic0,
            ));
        }
        for (name, kind) in [
            ("orsirr_1", FactorKind::Ilu0),
            ("sherman5", FactorKind::Ilu0),
            ("raefsky2", FactorKind::Ilu0),
            ("bcsstk13", FactorKind::Ic0),
            ("bcsstk09", FactorKind::Ic0),
        ] {
            if quick() {
                break;
            }
            if let Some(a) = load::<T>(name) {
                cases.push((name.into(), a, kind));
            }
        }
        for (name, a, kind) in cases {
            let p = IncompleteParams::default();
            let cpu = match IncompleteFactor::new(&a, kind, &p) {
                Ok(f) => f,
                Err(e) => {
                    // The GPU must refuse it as well, naming the same row.
                    let g = GpuIncompleteFactor::new(gpu, &a, kind, &p)
                        .err()
                        .expect("GPU factored what the CPU refused");
                    let row = |s: String| {
                        s.split("in row ")
                            .nth(1)
                            .map(|r| r.split_whitespace().next().unwrap().to_string())
                    };
                    assert_eq!(row(e.to_string()), row(g.to_string()), "{name}");
                    continue;
                }
            };
            let g = GpuIncompleteFactor::new(gpu, &a, kind, &p).unwrap();
            let got = g.download_values().unwrap();
            let d = max_rel_diff(&got, cpu.values());
            let t = if T::BYTES == 4 { 1e-2 } else { 1e-8 };
            assert!(
                d <= t,
                "{name} {kind:?} {}: factor max rel diff {d:e}",
                T::NAME
            );
            // The apply through the preconditioner on both backends.
            let n = a.nrows();
            let r: Vec<T> = (0..n).map(|i| T::of_f64(1.0 + (i % 5) as f64)).collect();
            let (mut tmp, mut z) = (vec![T::zero(); n], vec![T::zero(); n]);
            cpu.lower_solve(&r, &mut tmp);
            cpu.upper_solve(&tmp, &mut z);
            let dr = gpu.upload(&r).unwrap();
            let mut dt = gpu.zeros::<T>(n).unwrap();
            let mut dz = gpu.zeros::<T>(n).unwrap();
            for alg in [SptrsvAlgorithm::Levels, SptrsvAlgorithm::SyncFree] {
                let mut g = GpuIncompleteFactor::new(gpu, &a, kind, &p).unwrap();
                g.set_algorithm(alg);
                g.lower_solve(&dr, &mut dt).unwrap();
                g.upper_solve(&dt, &mut dz).unwrap();
                let gz = gpu.download(&dz).unwrap();
                let d = max_rel_diff(&gz, &z);
                let t = if T::BYTES == 4 { 2e-2 } else { 1e-7 };
                assert!(
                    d <= t,
                    "{name} {kind:?} {alg:?} {}: apply max rel diff {d:e}",
                    T::NAME
                );
            }
        }
    }

    #[test]
    fn gpu_jacobi_sweeps_match_the_cpu() {
        let Some(gpu) = test_gpu() else { return };
        for (name, a, kind) in [
            (
                "random 3000",
                random_matrix::<f64>(3000, 5, 0, 0, 31),
                FactorKind::Ilu0,
            ),
            (
                "poisson 30",
                segsparse::generate::poisson2d::<f64>(30).unwrap(),
                FactorKind::Ic0,
            ),
        ] {
            for sweeps in [1usize, 2, 3, 6] {
                let p = IncompleteParams {
                    jacobi_sweeps: sweeps,
                    ..Default::default()
                };
                let cpu = IncompleteFactor::new(&a, kind, &p).unwrap();
                let g = GpuIncompleteFactor::new(&gpu, &a, kind, &p).unwrap();
                let n = a.nrows();
                let r: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
                let (mut t, mut z) = (vec![0.0; n], vec![0.0; n]);
                cpu.lower_solve(&r, &mut t);
                cpu.upper_solve(&t, &mut z);
                let dr = gpu.upload(&r).unwrap();
                let mut dt = gpu.upload(&vec![f64::NAN; n]).unwrap();
                let mut dz = gpu.upload(&vec![f64::NAN; n]).unwrap();
                g.lower_solve(&dr, &mut dt).unwrap();
                g.upper_solve(&dt, &mut dz).unwrap();
                let d = max_rel_diff(&gpu.download(&dz).unwrap(), &z);
                assert!(d <= 1e-10, "{name} {sweeps} sweeps: {d:e}");
            }
        }
    }

    #[test]
    fn gpu_factorizations_match_the_cpu() {
        let Some(gpu) = test_gpu() else { return };
        factor_case::<f64>(&gpu);
        factor_case::<f32>(&gpu);
    }

    #[test]
    fn gpu_ilu_solves_inside_cuda_graphs_equal_uncaptured() {
        // GMRES(30) + ILU(0) and PCG + IC(0) with the triangular solves recorded inside the
        // iteration's CUDA graph (blocks of 3 iterations: recorded, then replayed) equal the
        // uncaptured solves bit for bit; graphs were really recorded.
        use segsparse::solvers::VectorOps;
        let Some(_) = test_gpu() else { return };
        let gpu = Gpu::new().unwrap();
        let ops = GpuOps::<f64>::new(&gpu).unwrap();
        let ip = IncompleteParams {
            auto_shift: true,
            ..Default::default()
        };
        for name in ["orsirr_1", "sherman5", "bcsstk09"] {
            let Some(a) = load::<f64>(name) else { continue };
            let da = segsparse::spmv::gpu::GpuCsr::upload(&gpu, &a).unwrap();
            let db = ops.upload(&vec![1.0; a.nrows()]).unwrap();
            let before = gpu.graphs_recorded();
            let run = |graphs: bool| {
                let p = SolveParams {
                    check_every: Some(3),
                    graphs,
                    ..Default::default()
                };
                let mut x = ops.zeros(a.nrows()).unwrap();
                let info = if name == "bcsstk09" {
                    let m = Ic0::new(&ops, &a, &ip).unwrap();
                    pcg(&ops, &da, &m, &db, &mut x, &p).unwrap()
                } else {
                    let m = Ilu0::new(&ops, &a, &ip).unwrap();
                    gmres(&ops, &da, &m, &db, &mut x, 30, &p).unwrap()
                };
                (info, ops.download(&x).unwrap())
            };
            let (off, xo) = run(false);
            let (on, xn) = run(true);
            assert!(gpu.graphs_recorded() > before, "{name}: no graph recorded");
            assert_eq!(off.iterations, on.iterations, "{name}");
            assert_eq!(off.history, on.history, "{name}");
            assert_eq!(xo, xn, "{name}: solutions");
        }
    }

    #[test]
    fn gpu_zero_pivot_names_the_row_and_refactor_works() {
        let Some(gpu) = test_gpu() else { return };
        let a = CsrMatrix::<f64>::from_triplets(
            4,
            4,
            &[
                (0, 0, 1.0),
                (1, 1, 2.0),
                (2, 1, 1.0),
                (2, 2, 1.0),
                (1, 2, 1.0),
                (3, 3, 1.0),
            ],
        )
        .unwrap();
        // u_22 = 1 − (1/2)·1 = 0.5: fine; scale row 2 so that it vanishes.
        let mut bad = a.clone();
        let vals = bad.values_mut();
        // Entries in order: (0,0) (1,1) (1,2) (2,1) (2,2) (3,3); make a_22 = 0.5.
        vals[4] = 0.5;
        {
            let kind = FactorKind::Ilu0;
            let e = GpuIncompleteFactor::new(&gpu, &bad, kind, &IncompleteParams::default())
                .err()
                .expect("zero pivot");
            assert!(e.to_string().contains("row 2"), "{e}");
            let mut g =
                GpuIncompleteFactor::new(&gpu, &a, kind, &IncompleteParams::default()).unwrap();
            assert!(g.refactor(&bad).unwrap_err().to_string().contains("row 2"));
            g.refactor(&a).unwrap();
        }
        let ind = CsrMatrix::<f64>::from_triplets(
            2,
            2,
            &[(0, 0, 1.0), (0, 1, 2.0), (1, 0, 2.0), (1, 1, 1.0)],
        )
        .unwrap();
        let e = GpuIncompleteFactor::new(&gpu, &ind, FactorKind::Ic0, &IncompleteParams::default())
            .err()
            .expect("indefinite");
        assert!(e.to_string().contains("row 1"), "{e}");
    }

    #[test]
    fn gpu_preconditioned_solves_converge_like_the_cpu() {
        let Some(gpu) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&gpu).unwrap();
        let p = SolveParams {
            max_iters: 20_000,
            ..Default::default()
        };
        for name in ["orsirr_1", "sherman5"] {
            let Some(a) = load::<f64>(name) else { continue };
            let n = a.nrows();
            let b = vec![1.0; n];
            let mc = Ilu0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
            let mut x = vec![0.0; n];
            let cpu = gmres(&Cpu, &a, &mc, &b, &mut x, 30, &p).unwrap();
            let da = segsparse::spmv::gpu::GpuCsr::upload(&gpu, &a).unwrap();
            let mut mg = Ilu0::new(&be, &a, &IncompleteParams::default()).unwrap();
            let db = gpu.upload(&b).unwrap();
            let mut dx = gpu.zeros::<f64>(n).unwrap();
            let g = gmres(&be, &da, &mg, &db, &mut dx, 30, &p).unwrap();
            assert!(g.relative_residual <= 1e-8);
            assert!(
                g.iterations.abs_diff(cpu.iterations) <= 2 + cpu.iterations / 10,
                "{name}: GPU {} vs CPU {}",
                g.iterations,
                cpu.iterations
            );
            mg.update(&be, &a).unwrap();
        }
        let a = segsparse::generate::poisson2d::<f64>(50).unwrap();
        let n = a.nrows();
        let mc = Ic0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
        let mut x = vec![0.0; n];
        let cpu = pcg(&Cpu, &a, &mc, &vec![1.0; n], &mut x, &p).unwrap();
        let da = segsparse::spmv::gpu::GpuCsr::upload(&gpu, &a).unwrap();
        let mg = Ic0::new(&be, &a, &IncompleteParams::default()).unwrap();
        let db = gpu.upload(&vec![1.0; n]).unwrap();
        let mut dx = gpu.zeros::<f64>(n).unwrap();
        let g = pcg(&be, &da, &mg, &db, &mut dx, &p).unwrap();
        assert!(
            g.iterations.abs_diff(cpu.iterations) <= 2,
            "{} vs {}",
            g.iterations,
            cpu.iterations
        );
    }
}
