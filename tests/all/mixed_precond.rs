//! Preconditioners stored and run in f32 under f64 solves (`precond::Narrowed`, the
//! `backend::NarrowOps` conversions): the f32 AMG hierarchy's cycle equals the f64 one's to f32
//! rounding; AMG-PCG with the f32 hierarchy reaches the f64 tolerance on the true residual in
//! the f64 hierarchy's iterations (+10 %); ILU(0)/IC(0) factors in f32 under f64 GMRES and CG
//! likewise; values beyond f32's range are refused with the entry named. Every case runs on the
//! CPU; the GPU cases skip with a notice without a device and fail instead under
//! `SEGSPARSE_REQUIRE_GPU=1`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{Cpu, Preconditioner};
use segsparse::precond::amg::rigid_body_modes_3d;
use segsparse::precond::{Amg, AmgParams, Ic0, Ilu0, IncompleteParams, Narrowed};
use segsparse::solvers::{gmres, pcg, SolveParams};
use segsparse::{generate, CsrMatrix};

use crate::mixed::true_rel;

fn random_vec(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let n: f64 = b.iter().map(|y| y * y).sum();
    (d / n).sqrt()
}

/// Poisson 3-D scaled by 1/3 (every value rounds in f32).
fn poisson_thirds(n: usize) -> CsrMatrix<f64> {
    let mut a = generate::poisson3d::<f64>(n).unwrap();
    a.values_mut().iter_mut().for_each(|v| *v /= 3.0);
    a
}

/// A case: name, matrix, near-nullspace candidates, AMG parameters.
type AmgCase = (
    &'static str,
    CsrMatrix<f64>,
    Option<Vec<Vec<f64>>>,
    AmgParams,
);

/// The AMG cases: values exact in f32 (Poisson 3-D), rounded ones (Poisson/3), and 3-D
/// elasticity with its six rigid-body modes (block size 3).
fn amg_cases() -> Vec<AmgCase> {
    let el = generate::elasticity3d::<f64>(8).unwrap();
    let modes = rigid_body_modes_3d::<f64>(&generate::elasticity3d_coordinates(8));
    vec![
        (
            "poisson3d:16",
            generate::poisson3d(16).unwrap(),
            None,
            AmgParams::default(),
        ),
        (
            "poisson3d:16/3",
            poisson_thirds(16),
            None,
            AmgParams::default(),
        ),
        (
            "elasticity3d:8",
            el,
            Some(modes),
            AmgParams {
                block_size: 3,
                ..Default::default()
            },
        ),
    ]
}

fn f64_amg(a: &CsrMatrix<f64>, c: &Option<Vec<Vec<f64>>>, p: &AmgParams) -> Amg<f64, Cpu> {
    match c {
        Some(c) => Amg::with_candidates(&Cpu, a, c, p).unwrap(),
        None => Amg::new(&Cpu, a, p).unwrap(),
    }
}

fn f32_amg(
    a: &CsrMatrix<f64>,
    c: &Option<Vec<Vec<f64>>>,
    p: &AmgParams,
) -> Narrowed<Cpu, Amg<f32, Cpu>> {
    match c {
        Some(c) => Narrowed::amg_with_candidates(&Cpu, a, c, p).unwrap(),
        None => Narrowed::amg(&Cpu, a, p).unwrap(),
    }
}

/// The f32 hierarchy has the f64 one's levels (the same aggregates: the pattern decides them),
/// and one cycle of it equals the f64 cycle to f32 rounding: ‖z₃₂ − z₆₄‖/‖z₆₄‖ below 10⁻⁵ (the
/// values round by 6·10⁻⁸, the ρ estimates and the cycle's sums by a few 10⁻⁷), and not equal
/// bit for bit (so the cycle did run in f32).
#[test]
fn f32_hierarchy_cycle_equals_the_f64_one_to_f32_rounding() {
    for (name, a, c, p) in amg_cases() {
        let h64 = f64_amg(&a, &c, &p);
        let h32 = f32_amg(&a, &c, &p);
        let (s64, s32) = (h64.summary(), h32.inner().summary());
        assert_eq!(s64.levels.len(), s32.levels.len(), "{name}: levels");
        for (l, (x, y)) in s64.levels.iter().zip(&s32.levels).enumerate() {
            assert_eq!((x.rows, x.nnz), (y.rows, y.nnz), "{name}: level {l}");
            assert!(
                (x.rho - y.rho).abs() <= 1e-4 * x.rho,
                "{name}: ρ of level {l}"
            );
        }
        let r = random_vec(3, a.nrows());
        let (mut z64, mut z32) = (vec![0.0; a.nrows()], vec![f64::NAN; a.nrows()]);
        h64.apply(&Cpu, &r, &mut z64).unwrap();
        h32.apply(&Cpu, &r, &mut z32).unwrap();
        let d = rel_diff(&z32, &z64);
        eprintln!("{name}: f32 cycle vs f64 cycle {d:e}");
        assert!(d <= 1e-5 && d > 0.0, "{name}: cycle differs by {d:e}");
        // Applied twice: the same answer (the scratch is reused, not stale).
        let mut again = vec![0.0; a.nrows()];
        h32.apply(&Cpu, &r, &mut again).unwrap();
        assert_eq!(again, z32, "{name}: a second application");
    }
}

/// AMG-PCG with the f32 hierarchy under the f64 CG reaches the f64 tolerance on the true
/// residual (checked here with the exact matrix) in at most the f64 hierarchy's iterations
/// + 10 % (+ 1).
#[test]
fn amg_pcg_with_the_f32_hierarchy_reaches_the_f64_tolerance() {
    for (name, a, c, p) in amg_cases() {
        let b = random_vec(5, a.nrows());
        let h64 = f64_amg(&a, &c, &p);
        let h32 = f32_amg(&a, &c, &p);
        for tol in [1e-8, 1e-11] {
            let sp = SolveParams {
                rel_tol: tol,
                max_iters: 500,
                ..Default::default()
            };
            let mut x64 = vec![0.0; a.nrows()];
            let i64 = pcg(&Cpu, &a, &h64, &b, &mut x64, &sp).unwrap();
            let mut x32 = vec![0.0; a.nrows()];
            let i32 = pcg(&Cpu, &a, &h32, &b, &mut x32, &sp)
                .unwrap_or_else(|e| panic!("{name} tol {tol:e}: f32 hierarchy: {e}"));
            let r = true_rel(&a, &b, &x32);
            eprintln!(
                "{name} tol {tol:e}: iterations f64 {} f32 {}, true residual {r:e}",
                i64.iterations, i32.iterations
            );
            assert!(r <= tol * 1.0001, "{name} tol {tol:e}: true residual {r:e}");
            assert!(
                i32.iterations as f64 <= i64.iterations as f64 * 1.1 + 1.0,
                "{name} tol {tol:e}: {} iterations with the f32 hierarchy, {} with f64",
                i32.iterations,
                i64.iterations
            );
        }
    }
}

/// ILU(0) factors in f32 under f64 GMRES(30) (a nonsymmetric convection–diffusion problem) and
/// IC(0) under f64 CG reach the f64 tolerance; one application equals the f64 factor's to f32
/// rounding.
#[test]
fn f32_incomplete_factors_under_f64_solves_reach_the_f64_tolerance() {
    let ip = IncompleteParams::default();
    let a = crate::common::dist::convection(60, 0.3);
    let b = random_vec(8, a.nrows());
    let m64 = Ilu0::new(&Cpu, &a, &ip).unwrap();
    let m32 = Narrowed::ilu0(&Cpu, &a, &ip).unwrap();
    let mut z = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
    m64.apply(&Cpu, &b, &mut z.0).unwrap();
    m32.apply(&Cpu, &b, &mut z.1).unwrap();
    let d = rel_diff(&z.1, &z.0);
    assert!(d <= 1e-5 && d > 0.0, "ILU(0) application differs by {d:e}");
    let sp = SolveParams {
        rel_tol: 1e-10,
        max_iters: 2000,
        ..Default::default()
    };
    let mut x64 = vec![0.0; a.nrows()];
    let i64 = gmres(&Cpu, &a, &m64, &b, &mut x64, 30, &sp).unwrap();
    let mut x = vec![0.0; a.nrows()];
    let i32 = gmres(&Cpu, &a, &m32, &b, &mut x, 30, &sp).unwrap();
    let r = true_rel(&a, &b, &x);
    assert!(
        r <= 1e-10 * 1.0001,
        "GMRES + f32 ILU(0): true residual {r:e}"
    );
    assert!(
        i32.iterations as f64 <= i64.iterations as f64 * 1.1 + 2.0,
        "GMRES: {} iterations with f32 factors, {} with f64",
        i32.iterations,
        i64.iterations
    );
    let s = poisson_thirds(14);
    let b = random_vec(9, s.nrows());
    let c64 = Ic0::new(&Cpu, &s, &ip).unwrap();
    let c32 = Narrowed::ic0(&Cpu, &s, &ip).unwrap();
    let mut x64 = vec![0.0; s.nrows()];
    let i64 = pcg(&Cpu, &s, &c64, &b, &mut x64, &sp).unwrap();
    let mut x = vec![0.0; s.nrows()];
    let i32 = pcg(&Cpu, &s, &c32, &b, &mut x, &sp).unwrap();
    let r = true_rel(&s, &b, &x);
    assert!(r <= 1e-10 * 1.0001, "CG + f32 IC(0): true residual {r:e}");
    assert!(
        i32.iterations as f64 <= i64.iterations as f64 * 1.1 + 1.0,
        "CG: {} iterations with f32 IC(0), {} with f64",
        i32.iterations,
        i64.iterations
    );
}

/// A value beyond f32's range (or below its smallest normal number) is refused before any
/// setup, with the entry named.
#[test]
fn f32_preconditioners_refuse_values_outside_f32() {
    let mut t = vec![(0, 0, 4.0), (1, 1, 1e39), (0, 1, -1.0), (1, 0, -1.0)];
    let big = CsrMatrix::from_triplets(2, 2, &t).unwrap();
    let e = Narrowed::amg(&Cpu, &big, &AmgParams::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("(1, 1)") && e.contains("range"), "{e}");
    t[2].2 = -1e-40;
    t[1].2 = 4.0;
    let tiny = CsrMatrix::from_triplets(2, 2, &t).unwrap();
    let e = Narrowed::ilu0(&Cpu, &tiny, &IncompleteParams::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("(0, 1)") && e.contains("smallest normal"), "{e}");
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::{NarrowOps, VectorOps};
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::mixed::narrowed;
    use segsparse::spmv::gpu::GpuCsr;

    /// The conversion kernels against the CPU's: rounding to nearest f32 and exact widening, on
    /// sizes around the block size and a grid-stride multiple, values across f32's range.
    #[test]
    fn gpu_narrow_and_widen_match_the_cpu() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        let low = be.low().unwrap();
        for n in [1usize, 255, 256, 257, 70_001, 2_000_003] {
            let mut x = random_vec(n as u64, n);
            for (i, v) in x.iter_mut().enumerate() {
                *v *= 10f64.powi((i % 61) as i32 - 30) / 3.0;
            }
            let xd = be.upload(&x).unwrap();
            let mut yd = low.upload(&vec![f32::NAN; n]).unwrap();
            be.narrow(&xd, &mut yd).unwrap();
            let y = low.download(&yd).unwrap();
            let want: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            assert_eq!(y, want, "narrow, n = {n}");
            let mut wd = be.upload(&vec![f64::NAN; n]).unwrap();
            be.widen(&yd, &mut wd).unwrap();
            let w = be.download(&wd).unwrap();
            let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
            assert_eq!(w, want, "widen, n = {n}");
        }
    }

    /// The device's f32 copy of a device matrix equals the host's rounding, entry for entry, and
    /// multiplies like it.
    #[test]
    fn gpu_narrowed_matrix_is_the_rounded_matrix() {
        let Some(g) = test_gpu() else { return };
        let a = poisson_thirds(20);
        let d = GpuCsr::upload(&g, &a).unwrap();
        let d32 = narrowed(&d).unwrap();
        let (rp, col, val) = d32.device_parts();
        let want = a.cast::<f32>();
        assert_eq!(g.download(rp).unwrap(), want.row_ptr());
        assert_eq!(&g.download(col).unwrap()[..a.nnz()], want.col_idx());
        assert_eq!(&g.download(val).unwrap()[..a.nnz()], want.values());
    }

    /// On the GPU (setup on the device from the narrowed device matrix, and from the host
    /// matrix): the f32 hierarchy's cycle equals the CPU's f32 cycle and the GPU's f64 cycle to
    /// f32 rounding, and AMG-PCG with it reaches the f64 tolerance in the f64 hierarchy's
    /// iterations + 10 %.
    #[test]
    fn gpu_amg_pcg_with_the_f32_hierarchy_reaches_the_f64_tolerance() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        for (name, a, c, p) in amg_cases() {
            let n = a.nrows();
            let da = GpuCsr::upload(&g, &a).unwrap();
            let h64 = match &c {
                Some(c) => Amg::from_matrix_with_candidates(&be, &da, c, &p).unwrap(),
                None => Amg::from_matrix(&be, &da, &p).unwrap(),
            };
            let d32 = narrowed(&da).unwrap();
            let h32 = Narrowed::amg_from_matrix(&be, &d32, c.as_deref(), &p)
                .unwrap_or_else(|e| panic!("{name}: f32 setup on the device: {e}"));
            let h32_host = match &c {
                Some(c) => Narrowed::amg_with_candidates(&be, &a, c, &p).unwrap(),
                None => Narrowed::amg(&be, &a, &p).unwrap(),
            };
            let cpu32 = f32_amg(&a, &c, &p);
            let r = random_vec(3, n);
            let rd = be.upload(&r).unwrap();
            let mut z = Vec::new();
            for h in [
                &h64 as &dyn Preconditioner<f64, GpuOps<f64>>,
                &h32,
                &h32_host,
            ] {
                let mut zd = be.upload(&vec![f64::NAN; n]).unwrap();
                h.apply(&be, &rd, &mut zd).unwrap();
                z.push(be.download(&zd).unwrap());
            }
            let mut zc = vec![0.0; n];
            cpu32.apply(&Cpu, &r, &mut zc).unwrap();
            eprintln!("{name}: GPU cycles compared");
            for (what, got, want, tol) in [
                ("GPU f32 vs GPU f64", &z[1], &z[0], 1e-5),
                ("GPU f32 vs CPU f32", &z[1], &zc, 1e-5),
                ("GPU f32 (host setup) vs GPU f32", &z[2], &z[1], 1e-5),
            ] {
                let d = rel_diff(got, want);
                eprintln!("{name}: {what}: {d:e}");
                assert!(d <= tol, "{name}: {what}: {d:e}");
            }
            let b = random_vec(5, n);
            let bd = be.upload(&b).unwrap();
            let sp = SolveParams {
                rel_tol: 1e-10,
                max_iters: 500,
                ..Default::default()
            };
            let mut xd = be.zeros(n).unwrap();
            let i64 = pcg(&be, &da, &h64, &bd, &mut xd, &sp).unwrap();
            let mut xd = be.zeros(n).unwrap();
            let i32 = pcg(&be, &da, &h32, &bd, &mut xd, &sp)
                .unwrap_or_else(|e| panic!("{name}: GPU f32 hierarchy: {e}"));
            let rr = true_rel(&a, &b, &be.download(&xd).unwrap());
            eprintln!(
                "{name}: GPU iterations f64 {} f32 {}, true residual {rr:e}",
                i64.iterations, i32.iterations
            );
            assert!(rr <= 1e-10 * 1.0001, "{name}: true residual {rr:e}");
            assert!(
                i32.iterations as f64 <= i64.iterations as f64 * 1.1 + 1.0,
                "{name}: {} iterations with the f32 hierarchy, {} with f64",
                i32.iterations,
                i64.iterations
            );
        }
    }

    /// ILU(0) in f32 on the GPU under f64 GMRES(30): the f64 tolerance, and an application
    /// equal to the f64 factor's to f32 rounding.
    #[test]
    fn gpu_f32_ilu0_under_f64_gmres_reaches_the_f64_tolerance() {
        let Some(g) = test_gpu() else { return };
        let be = GpuOps::<f64>::new(&g).unwrap();
        let ip = IncompleteParams::default();
        let a = crate::common::dist::convection(100, 0.3);
        let n = a.nrows();
        let da = GpuCsr::upload(&g, &a).unwrap();
        let m64 = Ilu0::new(&be, &a, &ip).unwrap();
        let m32 = Narrowed::ilu0(&be, &a, &ip).unwrap();
        let b = random_vec(8, n);
        let bd = be.upload(&b).unwrap();
        let mut z64 = be.zeros(n).unwrap();
        let mut z32 = be.upload(&vec![f64::NAN; n]).unwrap();
        m64.apply(&be, &bd, &mut z64).unwrap();
        m32.apply(&be, &bd, &mut z32).unwrap();
        let d = rel_diff(&be.download(&z32).unwrap(), &be.download(&z64).unwrap());
        assert!(d <= 1e-5, "ILU(0) application differs by {d:e}");
        let sp = SolveParams {
            rel_tol: 1e-10,
            max_iters: 3000,
            ..Default::default()
        };
        let mut xd = be.zeros(n).unwrap();
        let i64 = gmres(&be, &da, &m64, &bd, &mut xd, 30, &sp).unwrap();
        let mut xd = be.zeros(n).unwrap();
        let i32 = gmres(&be, &da, &m32, &bd, &mut xd, 30, &sp).unwrap();
        let r = true_rel(&a, &b, &be.download(&xd).unwrap());
        assert!(r <= 1e-10 * 1.0001, "true residual {r:e}");
        assert!(
            i32.iterations as f64 <= i64.iterations as f64 * 1.1 + 2.0,
            "{} iterations with f32 factors, {} with f64",
            i32.iterations,
            i64.iterations
        );
    }
}
