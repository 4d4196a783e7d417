//! A backend that implements only the core of `VectorOps` (and names the solvers' step traits
//! `CgSteps`, `BicgSteps`, `ChebyshevSteps` with empty impls, and a host Krylov workspace)
//! runs CG, PCG, BiCGSTAB and GMRES with the traits' default steps. Its core is the CPU
//! backend's, and the CPU backend runs every step as its own one-pass loop, so equal iterates,
//! residual histories, restarts and solutions, bit for bit, show that the defaults compute the
//! arithmetic of the fused steps.

use segsparse::backend::Identity;
use segsparse::backend::{
    BicgSteps, BlockKrylovOps, BlockOps, CgSteps, ChebyshevSteps, Cpu, CpuScalars, HostKrylov,
    KrylovOps, LinearOperator, Preconditioner, Slot, VectorOps, NSLOTS,
};
use segsparse::precond::{Chebyshev, ChebyshevParams, Jacobi};
use segsparse::solvers::{bicgstab, gmres, pcg, SolveError, SolveInfo, SolveParams};
use segsparse::{generate, CsrMatrix, Result};

/// The core only, forwarded to [`Cpu`].
pub(crate) struct CoreOnly;

impl VectorOps<f64> for CoreOnly {
    type Vector = Vec<f64>;
    type Scalars = CpuScalars<f64>;
    fn name(&self) -> &'static str {
        "core-only"
    }
    fn len(&self, v: &Vec<f64>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<Vec<f64>> {
        Ok(vec![0.0; n])
    }
    fn upload(&self, host: &[f64]) -> Result<Vec<f64>> {
        Ok(host.to_vec())
    }
    fn download(&self, v: &Vec<f64>) -> Result<Vec<f64>> {
        Ok(v.clone())
    }
    fn copy(&self, src: &Vec<f64>, dst: &mut Vec<f64>) -> Result<()> {
        Cpu.copy(src, dst)
    }
    fn fill(&self, v: &mut Vec<f64>, a: f64) -> Result<()> {
        Cpu.fill(v, a)
    }
    fn scal(&self, a: f64, v: &mut Vec<f64>) -> Result<()> {
        Cpu.scal(a, v)
    }
    fn axpby(&self, a: f64, x: &Vec<f64>, b: f64, y: &mut Vec<f64>) -> Result<()> {
        Cpu.axpby(a, x, b, y)
    }
    fn axpbypcz(
        &self,
        a: f64,
        x: &Vec<f64>,
        b: f64,
        y: &Vec<f64>,
        c: f64,
        z: &mut Vec<f64>,
    ) -> Result<()> {
        Cpu.axpbypcz(a, x, b, y, c, z)
    }
    fn vmul(&self, a: f64, x: &Vec<f64>, y: &Vec<f64>, b: f64, z: &mut Vec<f64>) -> Result<()> {
        Cpu.vmul(a, x, y, b, z)
    }
    fn dot(&self, x: &Vec<f64>, y: &Vec<f64>, sc: &mut CpuScalars<f64>) -> Result<f64> {
        Cpu.dot(x, y, sc)
    }
    fn scalars(&self, n: usize, max_iters: usize) -> Result<CpuScalars<f64>> {
        Cpu.scalars(n, max_iters)
    }
    fn write_slots(&self, sc: &mut CpuScalars<f64>, values: &[(Slot, f64)]) -> Result<()> {
        Cpu.write_slots(sc, values)
    }
    fn read_slots(&self, sc: &CpuScalars<f64>) -> Result<[f64; NSLOTS]> {
        Cpu.read_slots(sc)
    }
    fn read_history(&self, sc: &CpuScalars<f64>, len: usize) -> Result<Vec<f64>> {
        Cpu.read_history(sc, len)
    }
    fn update_slots(
        &self,
        sc: &mut CpuScalars<f64>,
        f: impl FnOnce(&mut [f64; NSLOTS], &mut [f64]),
    ) -> Result<()> {
        Cpu.update_slots(sc, f)
    }
}

impl CgSteps<f64> for CoreOnly {}
impl BicgSteps<f64> for CoreOnly {}
impl ChebyshevSteps<f64> for CoreOnly {}
// The block steps' defaults: each column's step in turn.
impl BlockOps<f64> for CoreOnly {}
impl BlockKrylovOps<f64> for CoreOnly {}

impl KrylovOps<f64> for CoreOnly {
    type Krylov = HostKrylov<Vec<f64>, f64>;
    fn krylov(&self, n: usize, m: usize) -> Result<Self::Krylov> {
        HostKrylov::new(self, n, m)
    }
}

/// The CPU matrix as an operator of [`CoreOnly`].
pub(crate) struct Op<'a>(pub(crate) &'a CsrMatrix<f64>);

impl LinearOperator<f64, CoreOnly> for Op<'_> {
    fn nrows(&self) -> usize {
        self.0.nrows()
    }
    fn ncols(&self) -> usize {
        self.0.ncols()
    }
    fn apply(&self, _: &CoreOnly, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        LinearOperator::<f64, Cpu>::apply(self.0, &Cpu, x, y)
    }
}

/// A CPU preconditioner applied on [`CoreOnly`] (a general preconditioner: `apply`).
pub(crate) struct Via<'a, P>(pub(crate) &'a P);

impl<P: Preconditioner<f64, Cpu>> Preconditioner<f64, CoreOnly> for Via<'_, P> {
    fn apply(&self, _: &CoreOnly, r: &Vec<f64>, z: &mut Vec<f64>) -> Result<()> {
        self.0.apply(&Cpu, r, z)
    }
}

fn same(
    what: &str,
    a: (std::result::Result<SolveInfo, SolveError>, Vec<f64>),
    b: (std::result::Result<SolveInfo, SolveError>, Vec<f64>),
) {
    match (&a.0, &b.0) {
        (Ok(x), Ok(y)) => {
            assert!(x.iterations > 0, "{what}: no iterations");
            assert_eq!(x.iterations, y.iterations, "{what}: iterations");
            assert_eq!(x.restarts, y.restarts, "{what}: restarts");
            assert_eq!(x.history, y.history, "{what}: residual history");
            assert_eq!(x.relative_residual, y.relative_residual, "{what}: residual");
        }
        (Err(x), Err(y)) => assert_eq!(format!("{x:?}"), format!("{y:?}"), "{what}: errors"),
        (x, y) => panic!("{what}: cpu {x:?}, core-only {y:?}"),
    }
    assert_eq!(a.1, b.1, "{what}: solutions");
}

/// Poisson 2-D (SPD) and a random unsymmetric system with a dominant diagonal, large enough
/// that the CPU's reductions span several chunks.
fn problems() -> Vec<(&'static str, CsrMatrix<f64>, Vec<f64>, bool)> {
    let p = generate::poisson2d::<f64>(150).unwrap();
    let bp: Vec<f64> = (0..p.nrows())
        .map(|i| ((i * 7 % 13) as f64) - 6.0)
        .collect();
    let r = generate::from_spec::<f64>("random:30000:6", 11).unwrap();
    let mut t = Vec::new();
    for i in 0..r.nrows() {
        let (cols, vals) = r.row(i);
        let mut s = 0.0;
        for (&c, &v) in cols.iter().zip(vals) {
            t.push((i, c as usize, v));
            s += v.abs();
        }
        t.push((i, i, s + 1.0));
    }
    let u = CsrMatrix::from_triplets(r.nrows(), r.ncols(), &t).unwrap();
    let bu: Vec<f64> = (0..u.nrows()).map(|i| ((i % 5) as f64) + 1.0).collect();
    vec![
        ("poisson2d:150", p, bp, true),
        ("random:30000", u, bu, false),
    ]
}

#[test]
#[ignore = "seconds of CPU: .ci/run runs it (cargo test --test all -- --ignored)"]
fn core_only_backend_matches_the_cpu_backend_bit_for_bit() {
    let params = SolveParams {
        rel_tol: 1e-10,
        max_iters: 400,
        ..Default::default()
    };
    for (name, a, b, spd) in problems() {
        let n = a.nrows();
        let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
        let jac_core = Jacobi::from_matrix(&CoreOnly, &a).unwrap();
        let poly = Chebyshev::from_matrix(
            &Cpu,
            &a,
            &a,
            &ChebyshevParams {
                degree: 4,
                ..Default::default()
            },
        )
        .ok();
        let run = |f: &dyn Fn(&mut Vec<f64>) -> std::result::Result<SolveInfo, SolveError>| {
            let mut x = vec![0.0; n];
            let r = f(&mut x);
            (r, x)
        };
        if spd {
            same(
                &format!("{name} cg"),
                run(&|x| pcg(&Cpu, &a, &Identity, &b, x, &params)),
                run(&|x| pcg(&CoreOnly, &Op(&a), &Identity, &b, x, &params)),
            );
            same(
                &format!("{name} pcg jacobi"),
                run(&|x| pcg(&Cpu, &a, &jac, &b, x, &params)),
                run(&|x| pcg(&CoreOnly, &Op(&a), &jac_core, &b, x, &params)),
            );
            if let Some(poly) = &poly {
                same(
                    &format!("{name} pcg chebyshev"),
                    run(&|x| pcg(&Cpu, &a, poly, &b, x, &params)),
                    run(&|x| pcg(&CoreOnly, &Op(&a), &Via(poly), &b, x, &params)),
                );
            }
        }
        same(
            &format!("{name} bicgstab"),
            run(&|x| bicgstab(&Cpu, &a, &Identity, &b, x, &params)),
            run(&|x| bicgstab(&CoreOnly, &Op(&a), &Identity, &b, x, &params)),
        );
        same(
            &format!("{name} bicgstab jacobi"),
            run(&|x| bicgstab(&Cpu, &a, &jac, &b, x, &params)),
            run(&|x| bicgstab(&CoreOnly, &Op(&a), &jac_core, &b, x, &params)),
        );
        for m in [5, 30] {
            same(
                &format!("{name} gmres({m})"),
                run(&|x| gmres(&Cpu, &a, &Identity, &b, x, m, &params)),
                run(&|x| gmres(&CoreOnly, &Op(&a), &Identity, &b, x, m, &params)),
            );
            same(
                &format!("{name} gmres({m}) jacobi"),
                run(&|x| gmres(&Cpu, &a, &jac, &b, x, m, &params)),
                run(&|x| gmres(&CoreOnly, &Op(&a), &jac_core, &b, x, m, &params)),
            );
        }
    }
}

/// The Chebyshev polynomial's step (`poly_step`) and its setup's Lanczos/Arnoldi estimate run
/// on the core-only backend as on the CPU.
#[test]
fn core_only_chebyshev_matches_the_cpu_backend() {
    let a = generate::poisson2d::<f64>(60).unwrap();
    let p = ChebyshevParams {
        degree: 5,
        ..Default::default()
    };
    let on_cpu = Chebyshev::from_matrix(&Cpu, &a, &a, &p).unwrap();
    let op = Op(&a);
    let on_core = Chebyshev::from_matrix(&CoreOnly, &op, &a, &p).unwrap();
    let r: Vec<f64> = (0..a.nrows()).map(|i| (i as f64 * 0.31).sin()).collect();
    let (mut z1, mut z2) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
    on_cpu.apply(&Cpu, &r, &mut z1).unwrap();
    on_core.apply(&CoreOnly, &r, &mut z2).unwrap();
    assert_eq!(z1, z2);
    assert!(z1.iter().any(|&v| v != 0.0));
}

/// The GPU backend's core operations (`vector_lincomb`, `vector_vmul`, `vector_fill` and the
/// reduction) against the CPU backend's, on fresh data of a length that is not a multiple of the
/// block size, to rounding (NVRTC may contract `a·x + b·y` into a fused multiply-add; the GPU
/// sums the dot product in another order).
#[cfg(feature = "cuda")]
#[test]
fn gpu_core_operations_match_the_cpu() {
    use segsparse::backend::gpu::GpuOps;
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    let gpu = GpuOps::<f64>::new(&g).unwrap();
    let n = 100_003;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as f64;
    let v = |k: f64| -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64 + 1.0) * (0.37 + k) + seed).sin())
            .collect()
    };
    let (x, y, z0) = (v(0.0), v(0.1), v(0.2));
    let (gx, gy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let check = |what: &str,
                 cpu: &dyn Fn(&mut Vec<f64>),
                 dev: &dyn Fn(&mut cudarc::driver::CudaSlice<f64>)| {
        let mut c = z0.clone();
        cpu(&mut c);
        let mut d = gpu.upload(&z0).unwrap();
        dev(&mut d);
        let d = gpu.download(&d).unwrap();
        assert_eq!(d.len(), c.len(), "{what}");
        for (i, (g, h)) in d.iter().zip(&c).enumerate() {
            assert!((g - h).abs() <= 1e-14, "{what}[{i}]: gpu {g}, cpu {h}");
        }
    };
    for (a, b, c) in [(1.5, -0.25, 2.0), (-1.0, 1.0, 0.0), (0.5, 0.0, 1.0)] {
        check("axpby", &|z| Cpu.axpby(a, &x, b, z).unwrap(), &|z| {
            gpu.axpby(a, &gx, b, z).unwrap()
        });
        check(
            "axpbypcz",
            &|z| Cpu.axpbypcz(a, &x, b, &y, c, z).unwrap(),
            &|z| gpu.axpbypcz(a, &gx, b, &gy, c, z).unwrap(),
        );
        check("vmul", &|z| Cpu.vmul(a, &x, &y, c, z).unwrap(), &|z| {
            gpu.vmul(a, &gx, &gy, c, z).unwrap()
        });
        check("scal", &|z| Cpu.scal(a, z).unwrap(), &|z| {
            gpu.scal(a, z).unwrap()
        });
        check("fill", &|z| Cpu.fill(z, b).unwrap(), &|z| {
            gpu.fill(z, b).unwrap()
        });
    }
    let mut cs = Cpu.scalars(n, 1).unwrap();
    let mut gs = gpu.scalars(n, 1).unwrap();
    let dc = Cpu.dot(&x, &y, &mut cs).unwrap();
    let dg = gpu.dot(&gx, &gy, &mut gs).unwrap();
    assert!((dc - dg).abs() <= 1e-12 * n as f64, "dot {dc} {dg}");
    // The host recurrence path of the default steps works on device slots too.
    gpu.update_slots(&mut gs, |s, h| {
        s[Slot::Rho as usize] = 3.0;
        h[1] = 7.0;
    })
    .unwrap();
    assert_eq!(gpu.read_slots(&gs).unwrap()[Slot::Rho as usize], 3.0);
    assert_eq!(gpu.read_history(&gs, 2).unwrap()[1], 7.0);
}
