//! The fused solver steps (issue 21's small-system path): `CgSteps::cg_tail`,
//! `bicg_alpha_s` and `bicg_update_p` (BiCGSTAB's fused order, `p`'s update moved to the end of
//! the previous iteration) and the GPU's one-launch GMRES Arnoldi step give the same
//! iterations, residual histories, solutions and errors as the separate steps.
//!
//! - On the CPU (no GPU needed): a backend that delegates to `Cpu` but asks for BiCGSTAB's fused
//!   order runs the trait's default fused steps; results equal `Cpu`'s bit for bit, restarts,
//!   breakdowns and overflows included.
//! - On the GPU: `FusedPath::Auto` (fused kernels) against `FusedPath::Off` (separate kernels),
//!   graphs on and off, every method, generated, random and corpus matrices, f64 and f32, at the
//!   row limit and one past it: equal bit for bit (same grid, same reduction order), and close to
//!   the CPU. GPU tests skip without a device and fail under `SEGSPARSE_REQUIRE_GPU=1`.

use crate::common::mtx::load;
use crate::common::solve::{applies, chain, params};

use segsparse::backend::{
    BicgSteps, CgSteps, ChebyshevSteps, Cpu, CpuScalars, Fuse, Identity, LinearOperator, Slot,
    VectorOps, NSLOTS,
};
use segsparse::precond::{Chebyshev, ChebyshevParams, Jacobi};
use segsparse::solvers::{bicgstab, cg, gmres, pcg, SolveError, SolveInfo, SolveParams};
use segsparse::{generate, CsrMatrix, Result};

/// A seed that changes from run to run (printed, so a failure can be replayed).
fn fresh_seed() -> u64 {
    let s = std::env::var("SEGSPARSE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("seed {s} (SEGSPARSE_SEED={s} replays it)");
    s
}

/// xorshift64*: a uniform value in [-1, 1).
fn next(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    let v = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    v as f64 / (1u64 << 52) as f64 - 1.0
}

/// A random unsymmetric, diagonally dominant matrix of `n` rows (a few entries per row, some
/// far from the diagonal) and a random right-hand side.
fn random_system(n: usize, seed: &mut u64) -> (CsrMatrix<f64>, Vec<f64>) {
    let mut t = Vec::new();
    for i in 0..n {
        let mut off = 0.0;
        for _ in 0..4 {
            let j = ((next(seed) + 1.0) * 0.5 * n as f64) as usize % n;
            if j != i {
                let v = next(seed);
                off += v.abs();
                t.push((i, j, v));
            }
        }
        if i + 1 < n {
            t.push((i, i + 1, -0.5));
            off += 0.5;
        }
        t.push((i, i, off + 0.5 + next(seed).abs()));
    }
    let b = (0..n).map(|_| next(seed)).collect();
    (CsrMatrix::from_triplets(n, n, &t).unwrap(), b)
}

/// Two outcomes agree exactly: the same variant, iterations, restarts, history, true residual
/// and solution.
fn assert_same(
    what: &str,
    (a, xa): &(std::result::Result<SolveInfo, SolveError>, Vec<f64>),
    (b, xb): &(std::result::Result<SolveInfo, SolveError>, Vec<f64>),
) {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.iterations, b.iterations, "{what}: iterations");
            assert_eq!(a.restarts, b.restarts, "{what}: restarts");
            assert_eq!(a.history, b.history, "{what}: residual history");
            assert_eq!(
                a.relative_residual, b.relative_residual,
                "{what}: true residual"
            );
            assert!(a.iterations > 0, "{what}: no iterations");
        }
        (Err(a), Err(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{what}: errors"),
        (a, b) => panic!("{what}: separate {a:?}, fused {b:?}"),
    }
    assert_eq!(xa, xb, "{what}: solutions differ");
}

// ---- CPU: the fused order of BiCGSTAB through the trait's default fused steps ----------------

/// `Cpu` with BiCGSTAB's fused order switched on (every step delegated).
struct FusedCpu;

macro_rules! delegate {
    ($tr:ident: $($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret {
            <Cpu as $tr<f64>>::$name(&Cpu, $($arg),*)
        })*
    };
}

impl VectorOps<f64> for FusedCpu {
    type Vector = Vec<f64>;
    type Scalars = CpuScalars<f64>;
    fn name(&self) -> &'static str {
        "cpu-fused-order"
    }
    fn update_slots(
        &self,
        sc: &mut CpuScalars<f64>,
        f: impl FnOnce(&mut [f64; NSLOTS], &mut [f64]),
    ) -> Result<()> {
        <Cpu as VectorOps<f64>>::update_slots(&Cpu, sc, f)
    }
    delegate! { VectorOps:
        default_check_every() -> usize;
        len(v: &Vec<f64>) -> usize;
        zeros(n: usize) -> Result<Vec<f64>>;
        upload(host: &[f64]) -> Result<Vec<f64>>;
        download(v: &Vec<f64>) -> Result<Vec<f64>>;
        copy(src: &Vec<f64>, dst: &mut Vec<f64>) -> Result<()>;
        fill(v: &mut Vec<f64>, a: f64) -> Result<()>;
        scal(a: f64, v: &mut Vec<f64>) -> Result<()>;
        axpby(a: f64, x: &Vec<f64>, b: f64, y: &mut Vec<f64>) -> Result<()>;
        axpbypcz(a: f64, x: &Vec<f64>, b: f64, y: &Vec<f64>, c: f64, z: &mut Vec<f64>) -> Result<()>;
        vmul(a: f64, x: &Vec<f64>, y: &Vec<f64>, b: f64, z: &mut Vec<f64>) -> Result<()>;
        set_zero(v: &mut Vec<f64>) -> Result<()>;
        residual(b: &Vec<f64>, ax: &Vec<f64>, r: &mut Vec<f64>) -> Result<()>;
        scale(d: &Vec<f64>, r: &Vec<f64>, z: &mut Vec<f64>) -> Result<()>;
        dot(x: &Vec<f64>, y: &Vec<f64>, sc: &mut CpuScalars<f64>) -> Result<f64>;
        scalars(n: usize, max_iters: usize) -> Result<CpuScalars<f64>>;
        write_slots(sc: &mut CpuScalars<f64>, values: &[(Slot, f64)]) -> Result<()>;
        read_slots(sc: &CpuScalars<f64>) -> Result<[f64; NSLOTS]>;
        read_history(sc: &CpuScalars<f64>, len: usize) -> Result<Vec<f64>>;
        axpy(alpha: f64, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()>;
    }
}

impl CgSteps<f64> for FusedCpu {
    delegate! { CgSteps:
        cg_start(r: &Vec<f64>, fuse: Fuse<'_, Vec<f64>>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
        cg_alpha(p: &Vec<f64>, q: &Vec<f64>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
        cg_update_r(q: &Vec<f64>, r: &mut Vec<f64>, fuse: Fuse<'_, Vec<f64>>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
        cg_rho(r: &Vec<f64>, z: &Vec<f64>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
        cg_update_xp(x: &mut Vec<f64>, p: &mut Vec<f64>, z: &Vec<f64>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
    }
}

impl BicgSteps<f64> for FusedCpu {
    fn bicg_fused(&self, _n: usize) -> bool {
        true
    }
    delegate! { BicgSteps:
        bicg_p(r: &Vec<f64>, v: &Vec<f64>, p: &mut Vec<f64>, fuse: Fuse<'_, Vec<f64>>, sc: &mut CpuScalars<f64>) -> Result<()>;
        bicg_alpha(rhat: &Vec<f64>, v: &Vec<f64>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
        bicg_s(r: &Vec<f64>, v: &Vec<f64>, s: &mut Vec<f64>, fuse: Fuse<'_, Vec<f64>>, sc: &mut CpuScalars<f64>) -> Result<()>;
        bicg_omega(t: &Vec<f64>, s: &Vec<f64>, sc: &mut CpuScalars<f64>, it: usize) -> Result<()>;
    }
    #[allow(clippy::too_many_arguments)]
    fn bicg_update(
        &self,
        x: &mut Vec<f64>,
        phat: &Vec<f64>,
        shat: &Vec<f64>,
        s: &Vec<f64>,
        t: &Vec<f64>,
        r: &mut Vec<f64>,
        rhat: &Vec<f64>,
        sc: &mut CpuScalars<f64>,
        it: usize,
    ) -> Result<()> {
        <Cpu as BicgSteps<f64>>::bicg_update(&Cpu, x, phat, shat, s, t, r, rhat, sc, it)
    }
}

impl ChebyshevSteps<f64> for FusedCpu {
    #[allow(clippy::too_many_arguments)]
    fn poly_step(
        &self,
        t: &Vec<f64>,
        inv_diag: Option<&Vec<f64>>,
        res: &mut Vec<f64>,
        d: &mut Vec<f64>,
        z: &mut Vec<f64>,
        first: bool,
        c1: f64,
        c2: f64,
    ) -> Result<()> {
        <Cpu as ChebyshevSteps<f64>>::poly_step(&Cpu, t, inv_diag, res, d, z, first, c1, c2)
    }
}

/// The CPU matrix as an operator of [`FusedCpu`].
struct Op<'a>(&'a CsrMatrix<f64>);

impl LinearOperator<f64, FusedCpu> for Op<'_> {
    fn nrows(&self) -> usize {
        self.0.nrows()
    }
    fn ncols(&self) -> usize {
        self.0.ncols()
    }
    fn apply(&self, _: &FusedCpu, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        LinearOperator::<f64, Cpu>::apply(self.0, &Cpu, x, y)
    }
}

#[test]
fn cpu_bicgstab_fused_order_equals_separate_order() {
    let mut seed = fresh_seed();
    let mut problems: Vec<(String, CsrMatrix<f64>, Vec<f64>)> = Vec::new();
    let (a, b) = random_system(700, &mut seed);
    problems.push(("random:700".into(), a, b));
    let a = generate::poisson2d::<f64>(24).unwrap();
    let b = (0..a.nrows()).map(|_| next(&mut seed)).collect();
    problems.push(("poisson2d:24".into(), a, b));
    // A breakdown (ω) and an overflow, late in the iteration.
    let (a, b) = chain(200, 20, 2.0, 1e300);
    problems.push(("chain-overflow".into(), a, b));
    // cage8 with b = 1 restarts on ρ = r̂ᵀr → 0 (module docs of solvers).
    for name in ["cage8", "west0479", "sherman5"] {
        if let Some(a) = load(name) {
            let b = vec![1.0; a.nrows()];
            problems.push((name.into(), a, b));
        }
    }
    for (name, a, b) in &problems {
        let jac = Jacobi::from_matrix(&Cpu, a).ok();
        let poly = if name.starts_with("poisson") {
            let pp = ChebyshevParams {
                degree: 4,
                ..Default::default()
            };
            Some(Chebyshev::from_matrix(&Cpu, a, a, &pp).unwrap())
        } else {
            None
        };
        for pre in ["none", "jacobi", "poly"] {
            let p = params(1, true);
            let (sep, fz) = match pre {
                "none" => {
                    let (mut x1, mut x2) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
                    let r1 = bicgstab(&Cpu, a, &Identity, b, &mut x1, &p);
                    let r2 = bicgstab(&FusedCpu, &Op(a), &Identity, b, &mut x2, &p);
                    ((r1, x1), (r2, x2))
                }
                "jacobi" => {
                    let Some(j) = &jac else { continue };
                    let (mut x1, mut x2) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
                    let r1 = bicgstab(&Cpu, a, j, b, &mut x1, &p);
                    let r2 = bicgstab(&FusedCpu, &Op(a), j, b, &mut x2, &p);
                    ((r1, x1), (r2, x2))
                }
                _ => {
                    let Some(poly) = &poly else { continue };
                    // The polynomial preconditioner on the fused-order backend: the same
                    // operator applied through Cpu (a general preconditioner).
                    struct Via<'a, P>(&'a P);
                    impl<P: segsparse::backend::Preconditioner<f64, Cpu>>
                        segsparse::backend::Preconditioner<f64, FusedCpu> for Via<'_, P>
                    {
                        fn apply(
                            &self,
                            _: &FusedCpu,
                            r: &Vec<f64>,
                            z: &mut Vec<f64>,
                        ) -> Result<()> {
                            self.0.apply(&Cpu, r, z)
                        }
                    }
                    let (mut x1, mut x2) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
                    let r1 = bicgstab(&Cpu, a, poly, b, &mut x1, &p);
                    let r2 = bicgstab(&FusedCpu, &Op(a), &Via(poly), b, &mut x2, &p);
                    ((r1, x1), (r2, x2))
                }
            };
            let what = format!("cpu {name} bicgstab {pre}");
            eprintln!("{what}: {:?}", sep.0.as_ref().map(|i| i.iterations));
            assert_same(&what, &sep, &fz);
        }
    }
}

/// `cg_tail`'s default is the three separate steps: CG on the CPU is unchanged (its result
/// equals the textbook recurrence's to rounding; this guards the refactoring of `cg.rs`).
#[test]
fn cpu_cg_through_cg_tail_converges_and_reports_breakdown() {
    let a = generate::poisson2d::<f64>(30).unwrap();
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let info = cg(&Cpu, &a, &b, &mut x, &params(1, false)).unwrap();
    assert!(info.relative_residual <= 1e-10);
    let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
    let mut x = vec![0.0; a.nrows()];
    let info = pcg(&Cpu, &a, &jac, &b, &mut x, &params(1, false)).unwrap();
    assert!(info.relative_residual <= 1e-10);
    let (a, b) = chain(200, 20, -3.0, -1.0);
    let mut x = vec![0.0; 200];
    match cg(&Cpu, &a, &b, &mut x, &params(1, false)) {
        Err(SolveError::Breakdown { iteration, .. }) => assert!(iteration > 8, "{iteration}"),
        other => panic!("expected a late breakdown, got {other:?}"),
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::backend::gpu::{FusedPath, GpuOps};
    use segsparse::backend::VectorOps;
    use segsparse::gpu::test_gpu;
    use segsparse::spmv::gpu::GpuCsr;

    use crate::common::solve::gpu::{precs, run, Outcome};
    use crate::common::solve::METHODS;

    fn solve<T: segsparse::spmv::gpu::GpuScalar>(
        ops: &GpuOps<T>,
        a: &CsrMatrix<T>,
        b: &[T],
        method: &str,
        p: &SolveParams,
    ) -> Outcome<T> {
        let da = GpuCsr::upload(ops.gpu(), a).unwrap();
        let db = ops.upload(b).unwrap();
        run(ops, &da, &db, &precs(ops, &da, a, method), method, 30, p)
    }

    /// `SEGSPARSE_SANITIZER=1` (set when the tests run under compute-sanitizer, whose tools slow
    /// every kernel by 10-100x): the smaller instance set below, one `check_every` per case.
    fn under_sanitizer() -> bool {
        std::env::var("SEGSPARSE_SANITIZER").is_ok_and(|v| v == "1")
    }

    /// Separate and fused kernels on one problem, graphs off and on: all four outcomes equal.
    fn compare(
        sep: &GpuOps<f64>,
        fz: &GpuOps<f64>,
        name: &str,
        a: &CsrMatrix<f64>,
        b: &[f64],
        method: &str,
        check_every: usize,
    ) -> Outcome<f64> {
        assert!(fz.is_fused(a.nrows()), "{name}: not on the fused path");
        assert!(!sep.is_fused(a.nrows()));
        let mut first: Option<Outcome<f64>> = None;
        for graphs in [false, true] {
            let p = params(check_every, graphs);
            let s = solve(sep, a, b, method, &p);
            let f = solve(fz, a, b, method, &p);
            let what = format!("{name} {method} check_every={check_every} graphs={graphs}");
            assert_same(&what, &s, &f);
            if let Some(o) = &first {
                assert_same(&format!("{what} (against graphs off)"), o, &f);
            }
            first.get_or_insert(f);
        }
        first.unwrap()
    }

    #[test]
    fn gpu_fused_equals_separate_on_generated_random_and_real_matrices() {
        let Some(_) = test_gpu() else { return };
        // A Gpu of this test's own, so that graphs are recorded (one thread uses it).
        let g = segsparse::gpu::Gpu::new().unwrap();
        let fz = GpuOps::<f64>::new(&g).unwrap();
        let sep = GpuOps::<f64>::new(&g)
            .unwrap()
            .with_fused_path(FusedPath::Off);
        assert_eq!(fz.fused_path(), FusedPath::Auto);
        let mut seed = fresh_seed();
        let mut problems: Vec<(String, CsrMatrix<f64>, Vec<f64>, bool)> = Vec::new();
        let a = generate::poisson2d::<f64>(48).unwrap();
        let b = (0..a.nrows()).map(|_| next(&mut seed)).collect();
        problems.push(("poisson2d:48".into(), a, b, true));
        let a = generate::poisson3d::<f64>(14).unwrap();
        let b = vec![1.0; a.nrows()];
        problems.push(("poisson3d:14".into(), a, b, true));
        let (a, b) = random_system(3000, &mut seed);
        problems.push(("random:3000".into(), a, b, false));
        for (name, spd) in [
            ("nos4", true),
            ("1138_bus", true),
            ("raefsky2", false),
            ("west0479", false),
            ("sherman5", false),
            ("cage8", false),
        ] {
            if let Some(a) = load(name) {
                let b = vec![1.0; a.nrows()];
                problems.push((name.into(), a, b, spd));
            }
        }
        let mut compared = 0;
        for (name, a, b, spd) in &problems {
            for method in METHODS {
                if !applies(method, a, *spd) {
                    continue;
                }
                for k in [1, 16] {
                    let (r, _) = compare(&sep, &fz, name, a, b, method, k);
                    eprintln!(
                        "{name} {method} k={k}: {:?}",
                        r.as_ref().map(|i| (i.iterations, i.relative_residual))
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared >= 40, "only {compared} comparisons");
        assert!(g.graphs_recorded() > 0, "no graph recorded");
    }

    /// At the fused path's row limit (one block per SM) and one row past it (separate kernels):
    /// fused equals separate, and both agree with the CPU.
    #[test]
    fn gpu_fused_at_the_row_limit_and_past_it_agrees_with_the_cpu() {
        let Some(g) = test_gpu() else { return };
        let fz = GpuOps::<f64>::new(&g).unwrap();
        let sep = GpuOps::<f64>::new(&g)
            .unwrap()
            .with_fused_path(FusedPath::Off);
        let limit = fz.fused_rows();
        assert_eq!(limit, g.sm_count() as usize * 256);
        let mut seed = fresh_seed();
        for n in [limit, limit + 1] {
            assert_eq!(fz.is_fused(n), n <= limit);
            let (a, b) = random_system(n, &mut seed);
            for method in ["bicgstab", "bicgstab-jacobi", "gmres"] {
                let p = params(16, true);
                let s = solve(&sep, &a, &b, method, &p);
                let f = solve(&fz, &a, &b, method, &p);
                assert_same(&format!("n={n} {method}"), &s, &f);
                let info = f.0.as_ref().unwrap();
                assert!(info.relative_residual <= 1e-10, "n={n} {method}: {info:?}");
                // The CPU reference: the same system, within the tolerance's reach.
                let mut x = vec![0.0; n];
                let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
                let c = match method {
                    "bicgstab" => bicgstab(&Cpu, &a, &Identity, &b, &mut x, &p),
                    "bicgstab-jacobi" => bicgstab(&Cpu, &a, &jac, &b, &mut x, &p),
                    _ => gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &p),
                }
                .unwrap();
                let (num, den) = x.iter().zip(&f.1).fold((0.0, 0.0), |(n, d), (c, g)| {
                    (n + (c - g) * (c - g), d + c * c)
                });
                assert!(
                    (num / den).sqrt() < 1e-7,
                    "n={n} {method}: GPU and CPU solutions differ by {:.2e} (CPU {} its)",
                    (num / den).sqrt(),
                    c.iterations
                );
            }
        }
        // CG on an SPD system at the limit: Poisson 2D 183² (33,489 rows ≤ 256 · SMs on 132 SMs).
        let k = ((limit as f64).sqrt() as usize).min(183);
        let a = generate::poisson2d::<f64>(k).unwrap();
        let b = vec![1.0; a.nrows()];
        for method in ["cg", "pcg-jacobi"] {
            let p = params(16, true);
            let s = solve(&sep, &a, &b, method, &p);
            let f = solve(&fz, &a, &b, method, &p);
            assert_same(&format!("poisson2d:{k} {method}"), &s, &f);
        }
    }

    /// Breakdowns and overflows inside the fused kernels surface as the same `SolveError` at the
    /// same iteration, graphs on and off.
    #[test]
    fn gpu_fused_breakdown_and_nan_equal_separate() {
        let Some(g) = test_gpu() else { return };
        let fz = GpuOps::<f64>::new(&g).unwrap();
        let sep = GpuOps::<f64>::new(&g)
            .unwrap()
            .with_fused_path(FusedPath::Off);
        let quick = under_sanitizer();
        let ks: &[usize] = if quick { &[3] } else { &[1, 3] };
        let (a, b) = chain(200, 20, -3.0, -1.0);
        for &k in ks {
            let (r, _) = compare(&sep, &fz, "chain-breakdown", &a, &b, "cg", k);
            assert!(
                matches!(r, Err(SolveError::Breakdown { iteration, .. }) if iteration > 8),
                "{r:?}"
            );
        }
        let (a, b) = chain(200, 20, 2.0, 1e300);
        let ks: &[usize] = if quick { &[2] } else { &[1, 2] };
        for method in ["cg", "bicgstab", "gmres"] {
            for &k in ks {
                let (r, _) = compare(&sep, &fz, "chain-overflow", &a, &b, method, k);
                assert!(
                    matches!(r, Err(SolveError::NonFinite { iteration }) if iteration > 4),
                    "{method}: {r:?}"
                );
            }
        }
    }

    /// f32: fused equals separate too.
    #[test]
    fn gpu_fused_f32_equals_separate() {
        let Some(g) = test_gpu() else { return };
        let fz = GpuOps::<f32>::new(&g).unwrap();
        let sep = GpuOps::<f32>::new(&g)
            .unwrap()
            .with_fused_path(FusedPath::Off);
        let quick = under_sanitizer();
        let a = generate::poisson2d::<f32>(if quick { 16 } else { 40 }).unwrap();
        let b = vec![1.0f32; a.nrows()];
        let methods: &[&str] = if quick {
            &["cg", "bicgstab-jacobi", "gmres"]
        } else {
            &["cg", "pcg-jacobi", "bicgstab", "bicgstab-jacobi", "gmres"]
        };
        for &method in methods {
            let p = SolveParams {
                rel_tol: 1e-5,
                ..params(4, true)
            };
            let s = solve(&sep, &a, &b, method, &p);
            let f = solve(&fz, &a, &b, method, &p);
            let widen = |o: (std::result::Result<SolveInfo, SolveError>, Vec<f32>)| {
                (o.0, o.1.into_iter().map(f64::from).collect::<Vec<_>>())
            };
            assert_same(&format!("f32 {method}"), &widen(s), &widen(f));
        }
    }
}
