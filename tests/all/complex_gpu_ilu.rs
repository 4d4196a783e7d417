//! Complex ILU(0) and IC(0) on the GPU against the CPU: the triangular solves (every algorithm,
//! both triangles, unit and stored complex diagonals, on row-scaled random and Helmholtz
//! matrices), the factor's values (every device factorization
//! and the host one), its lower, upper (IC: `Lᴴ`) and full application exactly and by Jacobi
//! sweeps, on random diagonally dominant unsymmetric matrices (ILU), random Hermitian positive
//! definite ones (IC), the complex shifted Helmholtz matrix and young1c, in `Complex<f64>` and
//! `Complex<f32>`; GMRES, BiCGSTAB and PCG preconditioned on the GPU against the CPU (iteration
//! counts, solutions); bad pivots and patterns refused with the CPU's error.
//!
//! Skips with a notice without a GPU; fails instead when `SEGSPARSE_REQUIRE_GPU=1`.
//! `SEGSPARSE_ILU_QUICK=1` (under compute-sanitizer) keeps the small cases.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use segsparse::backend::gpu::GpuOps;
use segsparse::backend::{Cpu, Preconditioner, VectorOps};
use segsparse::gpu::{self, Gpu, KernelType};
use segsparse::precond::{
    Application, FactorKind, Ic0, Ilu0, IncompleteParams, RowMatching, SptrsvAlgorithm,
};
use segsparse::solvers::{bicgstab, gmres, pcg, SolveParams};
use segsparse::sparse::incomplete::gpu::{GpuFactorization, GpuIncompleteFactor};
use segsparse::sparse::incomplete::{triangle_of, IncompleteFactor};
use segsparse::sparse::triangular::gpu::GpuTriangular;
use segsparse::sparse::triangular::{solve_triangular, Diagonal, Triangle};
use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm, GpuComplexCsr};
use segsparse::spmv::spmv;
use segsparse::{generate, io, Complex, CsrMatrix, Elem};

use crate::complex_gpu_solve::{max_rel_diff, random_vec, unsymmetric};
use crate::complex_ilu::young1c;
use crate::complex_solve::hpd;

type C64 = Complex<f64>;
type C32 = Complex<f32>;

fn quick() -> bool {
    std::env::var("SEGSPARSE_ILU_QUICK").is_ok_and(|v| v == "1")
}

fn narrow<T: Elem>(a: &CsrMatrix<C64>) -> CsrMatrix<T> {
    a.map_values(T::narrow)
}

/// The factor tolerance of an element type (relative to the largest entry).
fn tol<T: Elem>() -> f64 {
    if <T::Real as Elem>::BYTES == 4 {
        2e-3
    } else {
        1e-10
    }
}

/// The test matrices of one factor kind, in `Complex<f64>`.
fn cases(kind: FactorKind) -> Vec<(String, CsrMatrix<C64>)> {
    let mut v: Vec<(String, CsrMatrix<C64>)> = match kind {
        FactorKind::Ilu0 => vec![
            ("unsymmetric 1".into(), unsymmetric(1, 0, 1)),
            ("unsymmetric 300".into(), unsymmetric(300, 4, 2)),
            ("unsymmetric 3000".into(), unsymmetric(3000, 6, 3)),
        ],
        FactorKind::Ic0 => vec![
            ("hpd 300".into(), hpd(300, 3, 4)),
            ("hpd 3000".into(), hpd(3000, 5, 5)),
        ],
    };
    if quick() {
        return v;
    }
    match kind {
        FactorKind::Ilu0 => {
            // Above the factor size from which `Auto` factors on the device.
            v.push(("unsymmetric 40000".into(), unsymmetric(40_000, 4, 6)));
            v.push((
                "helmholtz3d:16:8:0.5".into(),
                generate::from_spec("helmholtz3d:16:8:0.5", 0).unwrap(),
            ));
            v.push((
                "helmholtz3d:40:20:0.5".into(),
                generate::from_spec("helmholtz3d:40:20:0.5", 0).unwrap(),
            ));
            v.push(("young1c".into(), io::read_matrix_market(young1c()).unwrap()));
        }
        FactorKind::Ic0 => v.push(("hpd 60000".into(), hpd(60_000, 4, 7))),
    }
    v
}

/// The GPU factor of `a` against the CPU's: values (every factorization), the lower, upper and
/// full application (both solve algorithms), and the preconditioner's apply on both backends.
fn factor_case<T: Elem>(g: &Arc<Gpu>, a: &CsrMatrix<T>, kind: FactorKind, what: &str)
where
    T::Dev: KernelType,
{
    let t = tol::<T>();
    let n = a.nrows();
    let exact = IncompleteParams::default();
    let swept = IncompleteParams {
        jacobi_sweeps: 3,
        ..Default::default()
    };
    let auto = IncompleteParams {
        application: Application::Auto,
        ..Default::default()
    };
    for (pname, p) in [("exact", exact), ("3 sweeps", swept), ("auto", auto)] {
        let what = format!("{what} {} {kind:?} {pname}", T::NAME);
        let cpu = IncompleteFactor::new(a, kind, &p).unwrap();
        let mut f = GpuIncompleteFactor::new(g, a, kind, &p).unwrap();
        let d = max_rel_diff(&f.download_values().unwrap(), cpu.values());
        assert!(
            d <= t,
            "{what} ({}): factor max rel diff {d:e}",
            f.factorization().name()
        );
        assert_eq!(
            (f.modes().lower_sweeps, f.modes().upper_sweeps),
            (cpu.modes().lower_sweeps, cpu.modes().upper_sweeps),
            "{what}: apply modes"
        );
        for how in [
            GpuFactorization::Levels,
            GpuFactorization::SyncFree,
            GpuFactorization::Host,
        ] {
            f.set_factorization(how);
            f.refactor(a).unwrap();
            let d = max_rel_diff(&f.download_values().unwrap(), cpu.values());
            assert!(d <= t, "{what} {how:?}: factor max rel diff {d:e}");
        }
        let r: Vec<T> = random_vec(n, 17);
        let (mut lo, mut up, mut full) =
            (vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n]);
        cpu.lower_solve(&r, &mut lo);
        cpu.upper_solve(&r, &mut up);
        cpu.upper_solve(&lo, &mut full);
        let dr = g.upload(T::as_dev(&r)).unwrap();
        for alg in [SptrsvAlgorithm::Levels, SptrsvAlgorithm::SyncFree] {
            f.set_algorithm(alg);
            let mut dt = g.zeros::<T::Dev>(n).unwrap();
            let mut dz = g.zeros::<T::Dev>(n).unwrap();
            f.lower_solve(&dr, &mut dt).unwrap();
            let glo = g.download(&dt).unwrap();
            let d = max_rel_diff(T::from_dev(&glo), &lo);
            assert!(
                d <= 10.0 * t,
                "{what} {alg:?}: lower solve max rel diff {d:e}"
            );
            f.upper_solve(&dr, &mut dz).unwrap();
            let d = max_rel_diff(T::from_dev(&g.download(&dz).unwrap()), &up);
            assert!(
                d <= 10.0 * t,
                "{what} {alg:?}: upper solve max rel diff {d:e}"
            );
            f.upper_solve(&dt, &mut dz).unwrap();
            let d = max_rel_diff(T::from_dev(&g.download(&dz).unwrap()), &full);
            assert!(d <= 10.0 * t, "{what} {alg:?}: L then U max rel diff {d:e}");
        }
        // The preconditioner's apply (one cooperative launch when both triangles are swept).
        let ops = GpuOps::<T>::new(g).unwrap();
        let (dz, z) = match kind {
            FactorKind::Ilu0 => {
                let (mg, mc) = (
                    Ilu0::new(&ops, a, &p).unwrap(),
                    Ilu0::new(&Cpu, a, &p).unwrap(),
                );
                let mut dz = ops.zeros(n).unwrap();
                mg.apply(&ops, &dr, &mut dz).unwrap();
                let mut z = vec![T::zero(); n];
                mc.apply(&Cpu, &r, &mut z).unwrap();
                (dz, z)
            }
            FactorKind::Ic0 => {
                let (mg, mc) = (
                    Ic0::new(&ops, a, &p).unwrap(),
                    Ic0::new(&Cpu, a, &p).unwrap(),
                );
                let mut dz = ops.zeros(n).unwrap();
                mg.apply(&ops, &dr, &mut dz).unwrap();
                let mut z = vec![T::zero(); n];
                mc.apply(&Cpu, &r, &mut z).unwrap();
                (dz, z)
            }
        };
        let d = max_rel_diff(&ops.download(&dz).unwrap(), &z);
        assert!(
            d <= 10.0 * t,
            "{what}: preconditioner apply max rel diff {d:e}"
        );
        let d = max_rel_diff(&z, &full);
        assert!(d <= 10.0 * t, "{what}: apply is L then U ({d:e})");
    }
}

#[test]
fn complex_gpu_triangular_solves_match_the_cpu() {
    let Some(g) = gpu::test_gpu() else { return };
    let mut mats = vec![
        ("unsymmetric 500".to_string(), unsymmetric(500, 5, 21)),
        ("unsymmetric 20000".into(), unsymmetric(20_000, 3, 22)),
    ];
    if !quick() {
        mats.push((
            "helmholtz3d:16:8:0.5".into(),
            generate::from_spec("helmholtz3d:16:8:0.5", 0).unwrap(),
        ));
    }
    for (name, a) in &mats {
        let a = &rows_scaled(a);
        tri_case::<C64>(&g, a, name);
        tri_case::<C32>(&g, &narrow(a), name);
    }
}

/// Row i of `a` times `d / a_ii` (`d` of modulus 1, not real): the diagonal becomes `d` and each
/// row's strict part is `a`'s relative to its diagonal, so that on diagonally dominant matrices
/// the unit and non-unit substitutions stay bounded (a raw stencil triangle with a unit
/// diagonal grows geometrically with the levels).
fn rows_scaled(a: &CsrMatrix<C64>) -> CsrMatrix<C64> {
    let d = C64::new(0.8, 0.6);
    let diag = a.diagonal();
    let mut t = Vec::with_capacity(a.nnz());
    for (i, &di) in diag.iter().enumerate() {
        let (c, v) = a.row(i);
        for (&j, &x) in c.iter().zip(v) {
            t.push((i, j as usize, x * d / di));
        }
    }
    CsrMatrix::from_triplets(a.nrows(), a.ncols(), &t).unwrap()
}

fn tri_case<T: Elem>(g: &Arc<Gpu>, a: &CsrMatrix<T>, name: &str)
where
    T::Dev: KernelType,
{
    let n = a.nrows();
    let b: Vec<T> = random_vec(n, 5);
    let db = g.upload(T::as_dev(&b)).unwrap();
    for tri in [Triangle::Lower, Triangle::Upper] {
        let m = triangle_of(a, tri, None);
        for diag in [Diagonal::NonUnit, Diagonal::Unit] {
            let mut want = vec![T::zero(); n];
            solve_triangular(&m, tri, diag, &b, &mut want).unwrap();
            for alg in [
                SptrsvAlgorithm::Auto,
                SptrsvAlgorithm::Levels,
                SptrsvAlgorithm::SyncFree,
            ] {
                let t = GpuTriangular::upload(g, &m, tri, diag, alg).unwrap();
                let mut dx = g.zeros::<T::Dev>(n).unwrap();
                t.solve(&db, &mut dx).unwrap();
                let got = g.download(&dx).unwrap();
                let d = max_rel_diff(T::from_dev(&got), &want);
                assert!(
                    d <= 10.0 * tol::<T>(),
                    "{name} {} {tri:?} {diag:?} {alg:?}: max rel diff {d:e}",
                    T::NAME
                );
                // A second solve of the same plan gives the same bits.
                t.solve(&db, &mut dx).unwrap();
                assert!(
                    T::from_dev(&g.download(&dx).unwrap()) == T::from_dev(&got),
                    "{name} {alg:?}: second solve"
                );
            }
        }
    }
}

#[test]
fn complex_gpu_ilu0_and_ic0_match_the_cpu() {
    let Some(g) = gpu::test_gpu() else { return };
    for kind in [FactorKind::Ilu0, FactorKind::Ic0] {
        for (name, a) in cases(kind) {
            factor_case::<C64>(&g, &a, kind, &name);
            if name != "young1c" {
                factor_case::<C32>(&g, &narrow(&a), kind, &name);
            }
        }
    }
}

fn rel_residual(a: &CsrMatrix<C64>, x: &[C64], b: &[C64]) -> f64 {
    let mut r = b.to_vec();
    spmv(-C64::new(1.0, 0.0), a, x, C64::new(1.0, 0.0), &mut r);
    let norm = |v: &[C64]| v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
    norm(&r) / norm(b)
}

/// GMRES(30) and BiCGSTAB with ILU(0), PCG with IC(0), on the GPU and the CPU: both converge,
/// with iteration counts within the slack of the complex backend tests, and solutions that agree
/// within the tolerance's reach.
#[test]
fn complex_gpu_solves_with_ilu0_and_ic0_match_the_cpu() {
    let Some(g) = gpu::test_gpu() else { return };
    let ops = GpuOps::<C64>::new(&g).unwrap();
    let mut mats: Vec<(String, CsrMatrix<C64>)> = vec![
        (
            "helmholtz3d:20:10:0.5".into(),
            generate::from_spec("helmholtz3d:20:10:0.5", 0).unwrap(),
        ),
        ("unsymmetric 5000".into(), unsymmetric(5000, 6, 31)),
    ];
    if !quick() {
        mats.push(("young1c".into(), io::read_matrix_market(young1c()).unwrap()));
    }
    let p = SolveParams {
        rel_tol: 1e-9,
        max_iters: 3000,
        ..Default::default()
    };
    let ip = IncompleteParams::default();
    for (name, a) in &mats {
        let n = a.nrows();
        let b: Vec<C64> = random_vec(n, 3);
        let da = GpuComplexCsr::upload(&g, a, ComplexSpmvAlgorithm::Auto).unwrap();
        let mg = Ilu0::new(&ops, a, &ip).unwrap();
        let mc = Ilu0::new(&Cpu, a, &ip).unwrap();
        for method in ["gmres", "bicgstab"] {
            let db = ops.upload(&b).unwrap();
            let mut dx = ops.zeros(n).unwrap();
            let mut xc = vec![C64::new(0.0, 0.0); n];
            let (gi, ci) = match method {
                "gmres" => (
                    gmres(&ops, &da, &mg, &db, &mut dx, 30, &p).unwrap(),
                    gmres(&Cpu, a, &mc, &b, &mut xc, 30, &p).unwrap(),
                ),
                _ => (
                    bicgstab(&ops, &da, &mg, &db, &mut dx, &p).unwrap(),
                    bicgstab(&Cpu, a, &mc, &b, &mut xc, &p).unwrap(),
                ),
            };
            let xg = ops.download(&dx).unwrap();
            let (gi, ci) = (gi.iterations, ci.iterations);
            let slack = if method == "bicgstab" {
                (ci / 4).max(2)
            } else {
                (ci / 20).max(2)
            };
            assert!(
                gi.abs_diff(ci) <= slack,
                "{name} {method} ILU(0): GPU {gi} iterations, CPU {ci}"
            );
            let (rg, rc) = (rel_residual(a, &xg, &b), rel_residual(a, &xc, &b));
            assert!(
                rg <= 1e-8 && rc <= 1e-8,
                "{name} {method}: residuals {rg:e} / {rc:e}"
            );
            let d = max_rel_diff(&xg, &xc);
            assert!(d <= 1e-4, "{name} {method}: solutions differ by {d:e}");
        }
    }
    // PCG with IC(0) on a Hermitian positive definite matrix.
    let a = hpd(if quick() { 2000 } else { 30_000 }, 5, 33);
    let n = a.nrows();
    let b: Vec<C64> = random_vec(n, 4);
    let da = GpuComplexCsr::upload(&g, &a, ComplexSpmvAlgorithm::Auto).unwrap();
    let mg = Ic0::new(&ops, &a, &ip).unwrap();
    let mc = Ic0::new(&Cpu, &a, &ip).unwrap();
    let db = ops.upload(&b).unwrap();
    let mut dx = ops.zeros(n).unwrap();
    let mut xc = vec![C64::new(0.0, 0.0); n];
    let gi = pcg(&ops, &da, &mg, &db, &mut dx, &p).unwrap().iterations;
    let ci = pcg(&Cpu, &a, &mc, &b, &mut xc, &p).unwrap().iterations;
    assert!(
        gi.abs_diff(ci) <= (ci / 20).max(2),
        "IC(0)-PCG: GPU {gi}, CPU {ci}"
    );
    let xg = ops.download(&dx).unwrap();
    assert!(rel_residual(&a, &xg, &b) <= 1e-8);
    assert!(max_rel_diff(&xg, &xc) <= 1e-6);
}

/// Bad pivots and a changed pattern: the GPU factor returns the CPU's error (the same row and
/// message), never a panic; `auto_shift` recovers as on the CPU.
#[test]
fn complex_gpu_ilu_refuses_bad_input_like_the_cpu() {
    let Some(g) = gpu::test_gpu() else { return };
    let c = |re: f64, im: f64| C64::new(re, im);
    // ILU(0): u_11 = a_11 − a_10·a_01/a_00 = 0 exactly (1+i)(1−i)/2 = 1.
    let singular = CsrMatrix::from_triplets(
        2,
        2,
        &[
            (0, 0, c(2.0, 0.0)),
            (0, 1, c(1.0, -1.0)),
            (1, 0, c(1.0, 1.0)),
            (1, 1, c(1.0, 0.0)),
        ],
    )
    .unwrap();
    // IC(0): Hermitian, not positive definite (the second pivot is 1 − 2 < 0).
    let indefinite = CsrMatrix::from_triplets(
        2,
        2,
        &[
            (0, 0, c(1.0, 0.0)),
            (0, 1, c(1.0, -1.0)),
            (1, 0, c(1.0, 1.0)),
            (1, 1, c(1.0, 0.0)),
        ],
    )
    .unwrap();
    let no_match = IncompleteParams {
        matching: RowMatching::Off,
        ..Default::default()
    };
    for (a, kind) in [
        (&singular, FactorKind::Ilu0),
        (&indefinite, FactorKind::Ic0),
    ] {
        let ce = IncompleteFactor::new(a, kind, &no_match)
            .unwrap_err()
            .to_string();
        let ge = GpuIncompleteFactor::new(&g, a, kind, &no_match)
            .err()
            .expect("the GPU factored what the CPU refused")
            .to_string();
        assert_eq!(ge, ce, "{kind:?}");
        assert!(ge.contains("in row 1"), "{ge}");
        // The device factorizations' pivot test: new values on a good factor's pattern.
        let mut good_values = a.clone();
        good_values.values_mut()[3] = c(4.0, 0.0);
        let mut f = GpuIncompleteFactor::new(&g, &good_values, kind, &no_match).unwrap();
        for how in [GpuFactorization::Levels, GpuFactorization::SyncFree] {
            f.set_factorization(how);
            let e = f.refactor(a).unwrap_err().to_string();
            match kind {
                // The ILU pivot is read back from the device: the CPU's message.
                FactorKind::Ilu0 => assert_eq!(e, ce, "{how:?}"),
                _ => assert!(
                    e.contains("IC(0): pivot") && e.contains("in row 1"),
                    "{how:?}: {e}"
                ),
            }
            f.refactor(&good_values).unwrap();
        }
        let shifted = IncompleteParams {
            auto_shift: true,
            ..no_match
        };
        let cf = IncompleteFactor::new(a, kind, &shifted).unwrap();
        let gf = GpuIncompleteFactor::new(&g, a, kind, &shifted).unwrap();
        assert_eq!(gf.shift_used(), cf.shift_used(), "{kind:?}");
        let d = max_rel_diff(&gf.download_values().unwrap(), cf.values());
        assert!(d <= 1e-12, "{kind:?}: shifted factor {d:e}");
    }
    // A missing diagonal entry without matching, and new values on another pattern.
    let no_diag =
        CsrMatrix::from_triplets(2, 2, &[(0, 0, c(1.0, 1.0)), (1, 0, c(1.0, 0.0))]).unwrap();
    let (gr, cr) = (
        GpuIncompleteFactor::new(&g, &no_diag, FactorKind::Ilu0, &no_match),
        IncompleteFactor::new(&no_diag, FactorKind::Ilu0, &no_match),
    );
    match (gr, cr) {
        (Err(ge), Err(ce)) => {
            let (ge, ce) = (ge.to_string(), ce.to_string());
            assert!(ge.contains("row 1") && ce.contains("row 1"), "{ge} / {ce}");
        }
        (Ok(gf), Ok(cf)) => {
            let d = max_rel_diff(&gf.download_values().unwrap(), cf.values());
            assert!(d <= 1e-12, "no diagonal: factor {d:e}");
        }
        (gr, cr) => panic!(
            "no diagonal: GPU {:?}, CPU {:?}",
            gr.err().map(|e| e.to_string()),
            cr.err().map(|e| e.to_string())
        ),
    }
    let a = unsymmetric(50, 3, 41);
    let mut f =
        GpuIncompleteFactor::new(&g, &a, FactorKind::Ilu0, &IncompleteParams::default()).unwrap();
    let other = unsymmetric(50, 3, 42);
    assert!(f.refactor(&other).is_err());
    // The factor still works after the refused update.
    f.refactor(&a).unwrap();
}
