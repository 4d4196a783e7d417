//! What the solver-graph and fused-kernel tests share: the chain problem whose breakdown or
//! overflow happens only once the iteration reaches a given row, the solve parameters, and the
//! methods they run by name (with their preconditioners) on the GPU.

use segsparse::solvers::SolveParams;
use segsparse::CsrMatrix;

/// A tridiagonal chain `tridiag(−1, 2, −1)` of `n` rows with `b = e₀`, so the Krylov vectors
/// reach row `k` only after about `k` operator applications, with one change at row `k`:
/// `diag` replaces its diagonal, `off` the coupling `(k, k+1)` and `(k+1, k)`. A negative
/// diagonal makes CG break down, a huge coupling overflows — both only once the iteration gets
/// there, so inside a replayed block.
pub fn chain(n: usize, k: usize, diag: f64, off: f64) -> (CsrMatrix<f64>, Vec<f64>) {
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, if i == k { diag } else { 2.0 }));
        if i + 1 < n {
            let v = if i == k { off } else { -1.0 };
            t.push((i, i + 1, v));
            t.push((i + 1, i, v));
        }
    }
    let mut b = vec![0.0; n];
    b[0] = 1.0;
    (CsrMatrix::from_triplets(n, n, &t).unwrap(), b)
}

pub fn params(check_every: usize, graphs: bool) -> SolveParams<'static> {
    SolveParams {
        rel_tol: 1e-10,
        max_iters: 3000,
        check_every: Some(check_every),
        graphs,
        ..Default::default()
    }
}

/// The method names the graph and fused-kernel tests run: each Krylov method with no
/// preconditioner, Jacobi and (for the SPD ones and BiCGSTAB) a degree-3 Chebyshev polynomial.
#[cfg(feature = "cuda")]
pub const METHODS: [&str; 8] = [
    "cg",
    "pcg-jacobi",
    "pcg-poly",
    "bicgstab",
    "bicgstab-jacobi",
    "bicgstab-poly",
    "gmres",
    "gmres-jacobi",
];

/// Whether `method` applies to `a`: Jacobi needs a nonzero diagonal, CG and the polynomial an
/// SPD matrix (`spd`).
pub fn applies(method: &str, a: &CsrMatrix<f64>, spd: bool) -> bool {
    if method.ends_with("jacobi") && a.diagonal().contains(&0.0) {
        return false;
    }
    let needs_spd =
        method.starts_with("cg") || method.starts_with("pcg") || method.ends_with("poly");
    spd || !needs_spd
}

#[cfg(feature = "cuda")]
pub mod gpu {
    //! Running one of [`super::METHODS`] on the GPU backend.
    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::{Identity, VectorOps};
    use segsparse::precond::{Chebyshev, ChebyshevParams, Jacobi};
    use segsparse::solvers::{bicgstab, cg, gmres, pcg, SolveError, SolveInfo, SolveParams};
    use segsparse::spmv::gpu::{GpuCsr, GpuScalar};
    use segsparse::CsrMatrix;

    type Vector<T> = <GpuOps<T> as VectorOps<T>>::Vector;

    /// A solve's result and its solution, downloaded.
    pub type Outcome<T> = (Result<SolveInfo, SolveError>, Vec<T>);

    /// The preconditioners a method name asks for, built once so several solves share them.
    pub struct Precs<'a, T: GpuScalar> {
        jac: Option<Jacobi<Vector<T>>>,
        poly: Option<Chebyshev<'a, T, GpuOps<T>, GpuCsr<T>>>,
    }

    pub fn precs<'a, T: GpuScalar>(
        ops: &GpuOps<T>,
        da: &'a GpuCsr<T>,
        a: &CsrMatrix<T>,
        method: &str,
    ) -> Precs<'a, T> {
        let jac = method
            .ends_with("jacobi")
            .then(|| Jacobi::from_matrix(ops, a).unwrap());
        let poly = method.ends_with("poly").then(|| {
            let pp = ChebyshevParams {
                degree: 4,
                ..Default::default()
            };
            Chebyshev::from_matrix(ops, da, a, &pp).unwrap()
        });
        Precs { jac, poly }
    }

    /// Solves `da·x = db` from `x = 0` by `method` (GMRES with `restart`).
    #[allow(clippy::too_many_arguments)]
    pub fn run<T: GpuScalar>(
        ops: &GpuOps<T>,
        da: &GpuCsr<T>,
        db: &Vector<T>,
        pr: &Precs<'_, T>,
        method: &str,
        restart: usize,
        p: &SolveParams,
    ) -> Outcome<T> {
        let mut x = ops.zeros(da.nrows()).unwrap();
        let (jac, poly) = (pr.jac.as_ref(), pr.poly.as_ref());
        let r = match method {
            "cg" => cg(ops, da, db, &mut x, p),
            "pcg-jacobi" => pcg(ops, da, jac.unwrap(), db, &mut x, p),
            "pcg-poly" => pcg(ops, da, poly.unwrap(), db, &mut x, p),
            "bicgstab" => bicgstab(ops, da, &Identity, db, &mut x, p),
            "bicgstab-jacobi" => bicgstab(ops, da, jac.unwrap(), db, &mut x, p),
            "bicgstab-poly" => bicgstab(ops, da, poly.unwrap(), db, &mut x, p),
            "gmres" => gmres(ops, da, &Identity, db, &mut x, restart, p),
            "gmres-jacobi" => gmres(ops, da, jac.unwrap(), db, &mut x, restart, p),
            _ => unreachable!("{method}"),
        };
        (r, ops.download(&x).unwrap())
    }
}
