//! The automatic solve's storage (`precond::auto::storage`): CG runs on the operator with f32
//! values where every value is exact in f32, an AMG hierarchy is set up and cycled in f32, both
//! only from the size threshold on; rounded values keep f64 for CG, values beyond f32's range keep
//! f64 everywhere, `auto: false` (the caller's `f64`) keeps f64; every answer meets the f64
//! tolerance on the true residual computed here with the exact matrix, in the f64 storage's
//! iterations (+10 %). Every case runs on the CPU; the GPU cases skip with a notice without a
//! device and fail instead under `SEGSPARSE_REQUIRE_GPU=1`.

use segsparse::autosolve::{solve, solve_with_choice, AutoSolve, ProbeParams};
use segsparse::backend::Cpu;
use segsparse::precond::auto::storage::StorageParams;
use segsparse::precond::auto::{choose, AutoChoice, AutoMethod, AutoPrecond};
use segsparse::solvers::SolveParams;
use segsparse::spmv::mixed::F32Fit;
use segsparse::{generate, CsrMatrix};

use crate::mixed::true_rel;

const TOL: f64 = 1e-10;

/// The automatic solve's options with the storage rule from `min_entries` entries (`auto`
/// false: the caller's f64), no cache.
fn probe(auto: bool, min_entries: usize) -> ProbeParams {
    ProbeParams {
        cache: false,
        storage: StorageParams {
            auto,
            min_entries,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn params() -> SolveParams<'static> {
    SolveParams {
        rel_tol: TOL,
        max_iters: 5000,
        ..Default::default()
    }
}

/// `a` scaled by `s` (1/3: every value rounds in f32; 1e39: beyond f32's range).
fn scaled(a: &CsrMatrix<f64>, s: f64) -> CsrMatrix<f64> {
    let mut a = a.clone();
    a.values_mut().iter_mut().for_each(|v| *v *= s);
    a
}

/// CG + AMG as the rule's choice (what the probe escalates to on a large grid).
fn amg_choice(a: &CsrMatrix<f64>) -> AutoChoice {
    let mut c = choose(a);
    c.method = AutoMethod::Cg;
    c.precond = AutoPrecond::Amg;
    c.alternative = None;
    c
}

/// Checks the answer on the true residual and returns the solve's iterations.
fn converged(what: &str, s: &AutoSolve, a: &CsrMatrix<f64>, b: &[f64], x: &[f64]) -> usize {
    let info = s
        .result
        .as_ref()
        .unwrap_or_else(|e| panic!("{what}: {e}; {:?}", s.storage));
    let r = true_rel(a, b, x);
    assert!(r <= TOL * 1.01, "{what}: true residual {r:e}");
    info.iterations
}

fn cpu_solve(
    a: &CsrMatrix<f64>,
    choice: Option<AutoChoice>,
    p: &ProbeParams,
) -> (AutoSolve, Vec<f64>) {
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let s = match choice {
        None => solve(&Cpu, a, Some(a), &b, &mut x, &params(), p),
        Some(c) => solve_with_choice(&Cpu, a, Some(a), c, &b, &mut x, &params(), p),
    }
    .unwrap();
    (s, x)
}

#[test]
fn exact_values_in_f32_for_cg_from_the_threshold_on() {
    let a = generate::poisson3d::<f64>(20).unwrap();
    let b = vec![1.0; a.nrows()];
    let (s32, x32) = cpu_solve(&a, None, &probe(true, 0));
    assert_eq!(s32.choice.method, AutoMethod::Cg);
    assert_eq!(s32.storage.values, "f32", "{:?}", s32.storage);
    assert_eq!(s32.storage.hierarchy, None);
    assert!(
        s32.storage.reason.contains("exact in f32"),
        "{:?}",
        s32.storage
    );
    assert_eq!(s32.storage.fallback, None);
    assert!(s32.phases.iter().any(|p| p.name == "setup storage"));
    let k32 = converged("f32 values", &s32, &a, &b, &x32);
    // The caller's f64, and the default threshold (this matrix is far below it): f64.
    let (s64, x64) = cpu_solve(&a, None, &probe(false, 0));
    assert_eq!(s64.storage.values, "f64");
    assert!(
        s64.storage.reason.contains("asked for"),
        "{:?}",
        s64.storage
    );
    let k64 = converged("f64 values", &s64, &a, &b, &x64);
    assert!(
        k32.abs_diff(k64) <= 2,
        "iterations: f32 values {k32}, f64 {k64}"
    );
    let (sd, _) = cpu_solve(&a, None, &ProbeParams::default());
    assert_eq!(sd.storage.values, "f64");
    assert!(sd.storage.reason.contains("fewer than"), "{:?}", sd.storage);
}

#[test]
fn rounded_values_keep_f64_for_cg() {
    let a = scaled(&generate::poisson3d::<f64>(16).unwrap(), 1.0 / 3.0);
    let b = vec![1.0; a.nrows()];
    let (s, x) = cpu_solve(&a, None, &probe(true, 0));
    assert_eq!(s.storage.values, "f64", "{:?}", s.storage);
    assert!(s.storage.reason.contains("round"), "{:?}", s.storage);
    converged("rounded values", &s, &a, &b, &x);
}

#[test]
fn the_amg_hierarchy_in_f32_keeps_the_f64_iterations() {
    for (name, a) in [
        ("poisson3d:16", generate::poisson3d::<f64>(16).unwrap()),
        (
            "poisson3d:16/3",
            scaled(&generate::poisson3d::<f64>(16).unwrap(), 1.0 / 3.0),
        ),
    ] {
        let b = vec![1.0; a.nrows()];
        let (s32, x32) = cpu_solve(&a, Some(amg_choice(&a)), &probe(true, 0));
        assert_eq!(
            s32.storage.hierarchy,
            Some("f32"),
            "{name}: {:?}",
            s32.storage
        );
        assert!(s32.amg.is_some(), "{name}");
        let k32 = converged(name, &s32, &a, &b, &x32);
        let (s64, x64) = cpu_solve(&a, Some(amg_choice(&a)), &probe(false, 0));
        assert_eq!(s64.storage.hierarchy, Some("f64"), "{name}");
        let k64 = converged(name, &s64, &a, &b, &x64);
        assert!(
            k32 as f64 <= 1.1 * k64 as f64 + 1.0,
            "{name}: f32 hierarchy {k32} iterations, f64 {k64}"
        );
    }
}

#[test]
fn values_beyond_f32_keep_f64_everywhere() {
    let a = scaled(&generate::poisson3d::<f64>(12).unwrap(), 1e39);
    let b = vec![1.0; a.nrows()];
    for choice in [None, Some(amg_choice(&a))] {
        let (s, x) = cpu_solve(&a, choice, &probe(true, 0));
        assert_eq!(s.storage.values, "f64", "{:?}", s.storage);
        assert_ne!(s.storage.hierarchy, Some("f32"));
        assert!(
            s.storage.reason.contains("beyond f32's range"),
            "{:?}",
            s.storage
        );
        converged("beyond f32", &s, &a, &b, &x);
    }
}

/// Values near the top of f32's range fit f32, but the f32 hierarchy's coarse operators
/// (sums of many products) and its cycle overflow it: the solve falls back to an f64
/// hierarchy, says so, and still meets the tolerance.
#[test]
fn a_hierarchy_that_f32_cannot_hold_falls_back_to_f64() {
    let a = scaled(&generate::poisson3d::<f64>(16).unwrap(), 3e37);
    let b = vec![1.0; a.nrows()];
    let (s, x) = cpu_solve(&a, Some(amg_choice(&a)), &probe(true, 0));
    println!("{:?}; tried {:?}", s.storage, s.tried);
    assert_eq!(s.storage.hierarchy, Some("f64"), "{:?}", s.storage);
    let why = s.storage.fallback.as_deref().unwrap_or_default();
    assert!(why.contains("f32 AMG"), "{:?}", s.storage);
    converged("f32-overflowing hierarchy", &s, &a, &b, &x);
}

#[test]
fn the_values_fit_names_the_first_value_that_does_not() {
    let mut a = generate::poisson3d::<f64>(10).unwrap();
    let n = a.values().len();
    a.values_mut()[n - 1] = 1e-40;
    a.values_mut()[n / 2] = 1e300;
    let e = F32Fit::of(&a).unwrap_err();
    assert!(
        e.contains("beyond f32's range") && e.contains("1e300"),
        "{e}"
    );
    let e = F32Fit::of_values(a.values()).unwrap_err();
    assert!(e.contains(&format!("stored value {}", n / 2)), "{e}");
    let third = scaled(&generate::poisson3d::<f64>(10).unwrap(), 1.0 / 3.0);
    for f in [
        F32Fit::of(&third).unwrap(),
        F32Fit::of_values(third.values()).unwrap(),
    ] {
        assert!(!f.lossless && f.max_rel_rounding > 0.0 && f.max_rel_rounding <= 2f64.powi(-24));
    }
    let p = generate::poisson3d::<f64>(10).unwrap();
    assert!(F32Fit::of(&p).unwrap().lossless);
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::VectorOps;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuCsr;

    /// The automatic solve on the GPU (`host`: give it the host copy), the answer downloaded.
    fn gpu_solve(
        a: &CsrMatrix<f64>,
        choice: Option<AutoChoice>,
        p: &ProbeParams,
        host: bool,
    ) -> Option<(AutoSolve, Vec<f64>)> {
        let g = test_gpu()?;
        let be = GpuOps::<f64>::new(&g).unwrap();
        let da = GpuCsr::upload(&g, a).unwrap();
        let b = be.upload(&vec![1.0; a.nrows()]).unwrap();
        let mut x = be.zeros(a.nrows()).unwrap();
        let h = host.then_some(a);
        let s = match choice {
            None => solve(&be, &da, h, &b, &mut x, &params(), p),
            Some(c) => solve_with_choice(&be, &da, h, c, &b, &mut x, &params(), p),
        }
        .unwrap();
        Some((s, be.download(&x).unwrap()))
    }

    /// The device's pass over the values (`spmv::gpu::mixed::f32_fit`) equals the host's
    /// `F32Fit::of`: exact values, rounded ones, random magnitudes with zeros and non-finite
    /// values, and values beyond and below `f32`'s range (the first entry named by its row and
    /// column, found on the device); `GpuMixedCsr::from_device` refuses with the same sentence.
    #[test]
    fn gpu_f32_fit_equals_the_host_one() {
        let Some(g) = test_gpu() else { return };
        let p = generate::poisson3d::<f64>(30).unwrap();
        let mut wild = generate::random::<f64>(20_000, 9, 7).unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for (k, v) in wild.values_mut().iter_mut().enumerate() {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let e = (state >> 40) as i32 % 40 - 20;
            *v = match k % 97 {
                0 => 0.0,
                1 => f64::NAN,
                2 => f64::NEG_INFINITY,
                3 => (*v).round(),
                _ => *v * 10f64.powi(e),
            };
        }
        let mut beyond = wild.clone();
        let nnz = beyond.nnz();
        beyond.values_mut()[nnz - 3] = -4e38;
        beyond.values_mut()[nnz / 2] = 1e-40;
        let mut tiny_last = wild.clone();
        tiny_last.values_mut()[nnz - 1] = 1e-300;
        let cases = [
            ("poisson", p.clone()),
            ("poisson / 3", scaled(&p, 1.0 / 3.0)),
            ("random magnitudes", wild),
            ("beyond and below", beyond),
            ("below at the end", tiny_last),
            ("far", scaled(&p, 1e39)),
        ];
        for (name, a) in &cases {
            let host = F32Fit::of(a);
            let da = GpuCsr::upload(&g, a).unwrap();
            let dev = segsparse::spmv::gpu::mixed::f32_fit(&da).unwrap();
            assert_eq!(dev, host, "{name}");
            match (
                segsparse::spmv::gpu::mixed::GpuMixedCsr::from_device(&da),
                host,
            ) {
                (Ok(m), Ok(fit)) => assert_eq!(m.is_lossless(), fit.lossless, "{name}"),
                (Err(segsparse::Error::InvalidInput(e)), Err(h)) => assert_eq!(e, h, "{name}"),
                (m, h) => panic!("{name}: from_device {:?} against the host's {h:?}", m.err()),
            }
        }
        let e = F32Fit::of(&cases[3].1).unwrap_err();
        let (rp, cols) = (cases[3].1.row_ptr(), cases[3].1.col_idx());
        let row = rp.partition_point(|&s| s as usize <= nnz / 2) - 1;
        let entry = format!("entry ({row}, {})", cols[nnz / 2]);
        assert!(e.contains(&entry), "{e} should name {entry}");
        assert!(F32Fit::of_values(cases[0].1.values()).unwrap().lossless);
        assert!(F32Fit::of_values(cases[2].1.values()).is_ok());
    }

    /// (name, matrix, choice, host copy given, values, hierarchy).
    type Case<'a> = (
        &'a str,
        &'a CsrMatrix<f64>,
        Option<AutoChoice>,
        bool,
        &'a str,
        Option<&'a str>,
    );

    #[test]
    fn gpu_storage_choice_meets_the_f64_tolerance() {
        let p = generate::poisson3d::<f64>(24).unwrap();
        let third = scaled(&p, 1.0 / 3.0);
        let far = scaled(&p, 1e39);
        let b = vec![1.0; p.nrows()];
        let cases: Vec<Case> = vec![
            ("poisson", &p, None, true, "f32", None),
            ("poisson, no host copy", &p, None, false, "f32", None),
            ("poisson/3", &third, None, true, "f64", None),
            (
                "poisson amg",
                &p,
                Some(amg_choice(&p)),
                true,
                "f32",
                Some("f32"),
            ),
            (
                "poisson/3 amg",
                &third,
                Some(amg_choice(&third)),
                false,
                "f64",
                Some("f32"),
            ),
            (
                "beyond f32 amg",
                &far,
                Some(amg_choice(&far)),
                true,
                "f64",
                Some("f64"),
            ),
        ];
        for (name, a, choice, host, values, hierarchy) in cases {
            let Some((s, x)) = gpu_solve(a, choice.clone(), &probe(true, 0), host) else {
                return;
            };
            assert_eq!(s.storage.values, values, "{name}: {:?}", s.storage);
            assert_eq!(s.storage.hierarchy, hierarchy, "{name}: {:?}", s.storage);
            let k = converged(name, &s, a, &b, &x);
            let (s64, x64) = gpu_solve(a, choice, &probe(false, 0), host).unwrap();
            assert_eq!(s64.storage.values, "f64", "{name}");
            let k64 = converged(name, &s64, a, &b, &x64);
            assert!(
                k as f64 <= 1.1 * k64 as f64 + 2.0,
                "{name}: {k} iterations against f64 storage's {k64}"
            );
            println!(
                "{name}: {k} iterations (f64 storage {k64}), {:?}",
                s.storage
            );
        }
    }
}
