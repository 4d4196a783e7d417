//! CG with its recurrence in f32 under an f64 iterate (`solvers::narrow::pcg_f32`) and its
//! fallback (`solvers::storage::pcg_stored_f32`): the f64 true residual reached on SPD
//! matrices whose values f32 rounds and on one whose values it keeps, plain and with Jacobi,
//! from a zero and a given initial guess, at any scale of `b`; the fallback to f64 on a matrix
//! built to defeat f32, with its sentence; bad input refused with an error. Every case runs on
//! the CPU; the GPU cases skip with a notice without a device and fail instead under
//! `SEGSPARSE_REQUIRE_GPU=1`.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{Cpu, Identity};
use segsparse::precond::Jacobi;
use segsparse::scalar::Storage;
use segsparse::solvers::narrow::pcg_f32;
use segsparse::solvers::storage::pcg_stored_f32;
use segsparse::solvers::{cg, pcg, InitialGuess, SolveError, SolveParams};
use segsparse::{generate, CsrMatrix};

use crate::mixed::{defeats_f32, random_vec, rhs_of, spd_cases, true_rel};

fn params(tol: f64) -> SolveParams<'static> {
    SolveParams {
        rel_tol: tol,
        max_iters: 20_000,
        ..Default::default()
    }
}

/// The iterations an f32 recurrence may take beside f64 CG's: the recurrence loses the
/// conjugacy of its directions faster, and each reliable update costs a little convergence.
fn allowed(f64_iterations: usize) -> f64 {
    f64_iterations as f64 * 1.5 + 10.0
}

/// Plain and Jacobi CG with f32 vectors reach the requested f64 true residual (recomputed here
/// with the exact matrix) at 1e-8 and 1e-11, far below what f32 arithmetic alone resolves
/// (about 1e-7 of the solution), within [`allowed`] iterations of f64 CG.
#[test]
fn f32_vector_cg_reaches_the_f64_tolerance() {
    for (name, a) in spd_cases() {
        let n = a.nrows();
        let a32 = a.cast::<f32>();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let b = random_vec(&mut rng, n);
        for tol in [1e-8, 1e-11] {
            let p = params(tol);
            let mut x64 = vec![0.0; n];
            let full = cg(&Cpu, &a, &b, &mut x64, &p).unwrap();
            let mut x = vec![0.0; n];
            let info = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b, &mut x, &p)
                .unwrap_or_else(|e| panic!("{name} tol {tol:e}: f32-vector CG: {e}"));
            let r = true_rel(&a, &b, &x);
            assert!(
                r <= tol * 1.0001 && info.relative_residual <= tol,
                "{name} tol {tol:e}: true residual {r:e}, reported {:e}",
                info.relative_residual
            );
            assert!(
                (r - info.relative_residual).abs() <= 1e-3 * tol,
                "{name}: reported {:e}, recomputed {r:e}",
                info.relative_residual
            );
            assert!(
                info.iterations as f64 <= allowed(full.iterations),
                "{name} tol {tol:e}: {} iterations with f32 vectors, {} with f64",
                info.iterations,
                full.iterations
            );
            // Jacobi in f32 (fused into the f32 vector steps) against f64 Jacobi-PCG.
            let j64 = Jacobi::from_matrix(&Cpu, &a).unwrap();
            let mut xj = vec![0.0; n];
            let fullj = pcg(&Cpu, &a, &j64, &b, &mut xj, &p).unwrap();
            let j32 = Jacobi::from_matrix(&Cpu, &a32).unwrap();
            let mut xj = vec![0.0; n];
            let infoj = pcg_f32(&Cpu, &Cpu, &a, &a32, &j32, &b, &mut xj, &p)
                .unwrap_or_else(|e| panic!("{name} tol {tol:e}: f32-vector PCG: {e}"));
            let r = true_rel(&a, &b, &xj);
            assert!(r <= tol * 1.0001, "{name} Jacobi tol {tol:e}: {r:e}");
            assert!(
                infoj.iterations as f64 <= allowed(fullj.iterations),
                "{name} Jacobi tol {tol:e}: {} iterations, f64 {}",
                infoj.iterations,
                fullj.iterations
            );
        }
    }
}

/// The scale of `b` does not matter (the recurrence runs on `b/‖b‖`): `b` of norm 1e-30 and
/// 1e30 (whose squares leave f32's range) reach the tolerance in the iterations of `b` of norm 1;
/// a given initial guess is taken up (a converged guess needs no iteration).
#[test]
fn f32_vector_cg_is_scale_free_and_takes_a_given_guess() {
    let a = generate::aniso2d(30, 0.1).unwrap();
    let a32 = a.cast::<f32>();
    let n = a.nrows();
    let b1 = rhs_of(&a, 3);
    let p = params(1e-10);
    let mut x = vec![0.0; n];
    let base = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b1, &mut x, &p).unwrap();
    for scale in [1e-30, 1e30] {
        let b: Vec<f64> = b1.iter().map(|v| v * scale).collect();
        let mut x = vec![0.0; n];
        let info = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b, &mut x, &p)
            .unwrap_or_else(|e| panic!("scale {scale:e}: {e}"));
        let r = true_rel(&a, &b, &x);
        assert!(r <= 1e-10 * 1.0001, "scale {scale:e}: {r:e}");
        assert!(
            info.iterations.abs_diff(base.iterations) <= 2,
            "scale {scale:e}: {} iterations, {} at scale 1",
            info.iterations,
            base.iterations
        );
    }
    // From the answer: converged at once, the guess kept to the tolerance.
    let given = SolveParams {
        initial_guess: InitialGuess::Given,
        ..p
    };
    let mut y = x.clone();
    let info = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b1, &mut y, &given).unwrap();
    assert_eq!(info.iterations, 0);
    assert!(true_rel(&a, &b1, &y) <= 1e-10 * 1.0001);
    // From a perturbed guess: fewer iterations than from zero.
    let mut y: Vec<f64> = x.iter().map(|v| v * (1.0 + 1e-4)).collect();
    let info = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b1, &mut y, &given).unwrap();
    assert!(true_rel(&a, &b1, &y) <= 1e-10 * 1.0001);
    assert!(info.iterations < base.iterations, "{info:?}");
}

/// Condition 2·10⁸ with values f32 rounds to a singular matrix: the f32 recurrence cannot reach
/// 1e-10, the solve goes on in f64 by itself and says so, and meets the tolerance. A matrix
/// the f32 recurrence serves needs no fallback.
#[test]
fn f32_vector_cg_falls_back_to_f64_and_reports_it() {
    let a = defeats_f32(200);
    let a32 = a.cast::<f32>();
    let n = a.nrows();
    let b = rhs_of(&a, 5);
    let mut x = vec![0.0; n];
    let out = pcg_stored_f32(
        &Cpu,
        &Cpu,
        &a,
        &a32,
        &Identity,
        &Identity,
        &b,
        &mut x,
        &params(1e-10),
    )
    .unwrap();
    assert_eq!(out.storage, Storage::F64);
    let why = out.fallback.expect("the fallback says why");
    assert!(
        why.starts_with("f32 storage did not reach the tolerance"),
        "{why}"
    );
    let info = out
        .result
        .unwrap_or_else(|e| panic!("after the fallback: {e}"));
    assert!(true_rel(&a, &b, &x) <= 1e-10 * 1.0001, "{info:?}");

    let a = generate::aniso2d(30, 0.1).unwrap();
    let a32 = a.cast::<f32>();
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let out = pcg_stored_f32(
        &Cpu,
        &Cpu,
        &a,
        &a32,
        &Identity,
        &Identity,
        &b,
        &mut x,
        &params(1e-10),
    )
    .unwrap();
    assert_eq!((out.storage, out.fallback), (Storage::F32, None));
    out.result.unwrap();
    assert!(true_rel(&a, &b, &x) <= 1e-10 * 1.0001);
}

/// Mismatched sizes and an observer of every iteration are refused with an error, not a panic.
#[test]
fn f32_vector_cg_refuses_bad_input() {
    let a = generate::poisson2d::<f64>(8).unwrap();
    let small = generate::poisson2d::<f32>(7).unwrap();
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let e = pcg_f32(&Cpu, &Cpu, &a, &small, &Identity, &b, &mut x, &params(1e-8)).unwrap_err();
    assert!(matches!(e, SolveError::DimensionMismatch { .. }), "{e}");
    let mut short = vec![0.0; 3];
    let a32 = a.cast::<f32>();
    let e = pcg_f32(
        &Cpu,
        &Cpu,
        &a,
        &a32,
        &Identity,
        &b,
        &mut short,
        &params(1e-8),
    )
    .unwrap_err();
    assert!(matches!(e, SolveError::DimensionMismatch { .. }), "{e}");
    struct Every;
    impl segsparse::solvers::Observer for Every {}
    let every = Every;
    let p = SolveParams {
        observer: Some(&every),
        ..params(1e-8)
    };
    let e = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b, &mut x, &p).unwrap_err();
    assert!(e.to_string().contains("observer"), "{e}");
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::{NarrowOps, VectorOps};
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuCsr;

    /// On the GPU (the f32 matrix and vectors on the f64 backend's device and stream): the f64
    /// true residual reached, plain and Jacobi, within 10 % + 5 iterations of the CPU's f32
    /// recurrence (the same rounded numbers, summed in another order).
    #[test]
    fn gpu_f32_vector_cg_reaches_the_f64_tolerance() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        let low = be.low().unwrap();
        let mut cases = spd_cases();
        cases.push((
            "poisson3d:60/3",
            generate::poisson3d::<f64>(60)
                .unwrap()
                .map_values(|v| v / 3.0),
        ));
        for (name, a) in cases {
            let n = a.nrows();
            let a32 = a.cast::<f32>();
            let full = GpuCsr::upload(&g, &a).unwrap();
            let narrow = GpuCsr::upload(&g, &a32).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            let b = random_vec(&mut rng, n);
            let bd = be.upload(&b).unwrap();
            let p = params(1e-10);
            let mut xc = vec![0.0; n];
            let cpu = pcg_f32(&Cpu, &Cpu, &a, &a32, &Identity, &b, &mut xc, &p).unwrap();
            let mut xd = be.zeros(n).unwrap();
            let info = pcg_f32(&be, &low, &full, &narrow, &Identity, &bd, &mut xd, &p)
                .unwrap_or_else(|e| panic!("{name}: GPU f32-vector CG: {e}"));
            let r = true_rel(&a, &b, &be.download(&xd).unwrap());
            assert!(r <= 1e-10 * 1.0001, "{name}: true residual {r:e}");
            assert!(
                info.iterations as f64 <= cpu.iterations as f64 * 1.1 + 5.0
                    && cpu.iterations as f64 <= info.iterations as f64 * 1.1 + 5.0,
                "{name}: GPU {} iterations, CPU {}",
                info.iterations,
                cpu.iterations
            );
            let j32 = Jacobi::from_matrix(&low, &a32).unwrap();
            let mut xd = be.zeros(n).unwrap();
            pcg_f32(&be, &low, &full, &narrow, &j32, &bd, &mut xd, &p)
                .unwrap_or_else(|e| panic!("{name}: GPU f32-vector PCG: {e}"));
            let r = true_rel(&a, &b, &be.download(&xd).unwrap());
            assert!(r <= 1e-10 * 1.0001, "{name} Jacobi: true residual {r:e}");
        }
    }

    /// The fallback on the GPU: the singular-in-f32 matrix goes on in f64 and says so.
    #[test]
    fn gpu_f32_vector_cg_falls_back_to_f64() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        let low = be.low().unwrap();
        let a: CsrMatrix<f64> = defeats_f32(500);
        let a32 = a.cast::<f32>();
        let full = GpuCsr::upload(&g, &a).unwrap();
        let narrow = GpuCsr::upload(&g, &a32).unwrap();
        let b = rhs_of(&a, 5);
        let bd = be.upload(&b).unwrap();
        let mut xd = be.zeros(a.nrows()).unwrap();
        let out = pcg_stored_f32(
            &be,
            &low,
            &full,
            &narrow,
            &Identity,
            &Identity,
            &bd,
            &mut xd,
            &params(1e-10),
        )
        .unwrap();
        assert_eq!(out.storage, Storage::F64);
        assert!(out.fallback.is_some());
        out.result.unwrap();
        assert!(true_rel(&a, &b, &be.download(&xd).unwrap()) <= 1e-10 * 1.0001);
    }
}
