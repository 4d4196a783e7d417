//! The solvers with a complex element type, on the CPU: Hermitian CG against a dense solve,
//! COCG, BiCGSTAB and GMRES on the complex shifted Helmholtz problem, and COCG's count of
//! products against BiCGSTAB's. The same solver bodies as the real tests.

use std::cell::Cell;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::backend::{Cpu, Identity, LinearOperator};
use segsparse::precond::Jacobi;
use segsparse::solvers::{bicgstab, cg, cocg, gmres, pcg, pcocg, SolveError, SolveParams};
use segsparse::spmv::spmv;
use segsparse::{generate, Complex, CsrMatrix};

type C64 = Complex<f64>;

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

/// A random sparse Hermitian positive definite matrix: random off-diagonal pairs `a`, `ā` and a
/// real diagonal larger than each row's sum of moduli (diagonally dominant).
pub(crate) fn hpd(n: usize, k: usize, seed: u64) -> CsrMatrix<C64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    let mut rowsum = vec![0.0; n];
    for i in 0..n {
        for _ in 0..k {
            let j = rng.gen_range(0..n);
            if j == i {
                continue;
            }
            let v = c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
            t.push((i, j, v));
            t.push((j, i, v.conj()));
            rowsum[i] += v.norm();
            rowsum[j] += v.norm();
        }
    }
    for (i, s) in rowsum.iter().enumerate() {
        t.push((i, i, c(s + 0.1 + rng.gen_range(0.0..1.0), 0.0)));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// Gaussian elimination with partial pivoting on the dense matrix.
fn dense_solve(a: &CsrMatrix<C64>, b: &[C64]) -> Vec<C64> {
    let n = a.nrows();
    let mut m = a.to_dense();
    let mut x = b.to_vec();
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| m[i][k].norm().total_cmp(&m[j][k].norm()))
            .unwrap();
        m.swap(k, p);
        x.swap(k, p);
        let (top, bottom) = m.split_at_mut(k + 1);
        let pivot = &top[k];
        for (d, row) in bottom.iter_mut().enumerate() {
            let f = row[k] / pivot[k];
            for (rj, &pj) in row[k..].iter_mut().zip(&pivot[k..]) {
                *rj -= f * pj;
            }
            let v = x[k];
            x[k + 1 + d] -= f * v;
        }
    }
    for k in (0..n).rev() {
        let mut s = x[k];
        for j in k + 1..n {
            s -= m[k][j] * x[j];
        }
        x[k] = s / m[k][k];
    }
    x
}

fn rhs(n: usize, seed: u64) -> Vec<C64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect()
}

fn norm(v: &[C64]) -> f64 {
    v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt()
}

fn true_rel_residual(a: &CsrMatrix<C64>, x: &[C64], b: &[C64]) -> f64 {
    let mut r = b.to_vec();
    spmv(c(-1.0, 0.0), a, x, c(1.0, 0.0), &mut r);
    norm(&r) / norm(b)
}

fn params(rel_tol: f64, max_iters: usize) -> SolveParams<'static> {
    SolveParams {
        rel_tol,
        max_iters,
        ..Default::default()
    }
}

#[test]
fn hermitian_cg_matches_a_dense_solve() {
    for (n, seed) in [(1, 1), (5, 2), (40, 3), (120, 4)] {
        let a = hpd(n, 3, seed);
        assert!(a.is_hermitian() && (n == 1 || !a.is_symmetric()));
        let b = rhs(n, seed + 10);
        let want = dense_solve(&a, &b);
        let p = params(1e-12, 1000);
        let mut x = vec![c(f64::NAN, 0.0); n];
        let info = cg(&Cpu, &a, &b, &mut x, &p).unwrap();
        let err = x
            .iter()
            .zip(&want)
            .map(|(x, w)| (x - w).norm())
            .fold(0.0, f64::max);
        assert!(
            err <= 1e-9 * norm(&want),
            "n = {n}: error {err:e} ({info:?})"
        );
        assert!(info.converged && info.relative_residual <= 1e-12);
        // Jacobi-preconditioned, and the result is the same solution.
        let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
        let mut y = vec![c(0.0, 0.0); n];
        let info = pcg(&Cpu, &a, &jac, &b, &mut y, &p).unwrap();
        let err = y
            .iter()
            .zip(&want)
            .map(|(x, w)| (x - w).norm())
            .fold(0.0, f64::max);
        assert!(
            err <= 1e-9 * norm(&want),
            "n = {n}: PCG error {err:e} ({info:?})"
        );
    }
}

#[test]
fn cg_reports_a_matrix_that_is_not_hermitian_positive_definite() {
    // −A of an HPD matrix: pᴴAp < 0 at once.
    let a = hpd(30, 3, 5).map_values(|v| -v);
    let b = rhs(30, 6);
    let mut x = vec![c(0.0, 0.0); 30];
    match cg(&Cpu, &a, &b, &mut x, &params(1e-10, 100)) {
        Err(SolveError::Breakdown { what, iteration }) => {
            assert!(what.contains("pᵀAp ≤ 0"), "{what}");
            assert_eq!(iteration, 1);
        }
        other => panic!("expected a breakdown, got {other:?}"),
    }
}

/// `A·x` that counts its products.
struct Counting<'a> {
    a: &'a CsrMatrix<C64>,
    products: Cell<usize>,
}

impl LinearOperator<C64, Cpu> for Counting<'_> {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }
    fn ncols(&self) -> usize {
        self.a.ncols()
    }
    fn apply(&self, be: &Cpu, x: &Vec<C64>, y: &mut Vec<C64>) -> segsparse::Result<()> {
        self.products.set(self.products.get() + 1);
        self.a.apply(be, x, y)
    }
}

#[test]
fn cocg_bicgstab_and_gmres_solve_the_shifted_helmholtz_problem() {
    // 12³ unknowns, k·h ≈ 0.77: the real part is indefinite (its smallest eigenvalue is
    // 3π²h² ≈ 0.18 < (kh)²), the shift 0.5 keeps the problem tractable.
    let a: CsrMatrix<C64> = generate::from_spec("helmholtz3d:12:10:0.5", 0).unwrap();
    assert!(a.is_symmetric() && !a.is_hermitian());
    let n = a.nrows();
    let b = rhs(n, 42);
    let tol = 1e-8;
    let p = params(tol, 2000);
    let count = |f: &dyn Fn(&Counting, &mut Vec<C64>) -> Result<_, SolveError>| {
        let op = Counting {
            a: &a,
            products: Cell::new(0),
        };
        let mut x = vec![c(0.0, 0.0); n];
        let info = f(&op, &mut x).unwrap_or_else(|e| panic!("{e}"));
        let r = true_rel_residual(&a, &x, &b);
        assert!(r <= 2.0 * tol, "true residual {r:e} ({info:?})");
        (info, op.products.get())
    };
    let (ci, cocg_products) = count(&|op, x| cocg(&Cpu, op, &b, x, &p));
    let (bi, bicg_products) = count(&|op, x| bicgstab(&Cpu, op, &Identity, &b, x, &p));
    let (gi, _) = count(&|op, x| gmres(&Cpu, op, &Identity, &b, x, 30, &p));
    let jac = Jacobi::from_matrix(&Cpu, &a).unwrap();
    let (pi, _) = count(&|op, x| pcocg(&Cpu, op, &jac, &b, x, &p));
    eprintln!(
        "helmholtz3d:12:10:0.5: COCG {} iterations / {cocg_products} products, BiCGSTAB {} / \
         {bicg_products}, GMRES(30) {}, Jacobi-COCG {}",
        ci.iterations, bi.iterations, gi.iterations, pi.iterations
    );
    assert!(
        cocg_products < bicg_products,
        "COCG {cocg_products} products, BiCGSTAB {bicg_products}"
    );
    // CG with the Hermitian form is the wrong method here: it does not converge as COCG does.
    let mut x = vec![c(0.0, 0.0); n];
    let wrong = cg(&Cpu, &a, &b, &mut x, &params(tol, ci.iterations));
    assert!(wrong.is_err(), "{wrong:?}");
}

#[test]
fn cocg_of_a_real_matrix_is_cg() {
    let a: CsrMatrix<f64> = generate::from_spec("poisson2d:20", 0).unwrap();
    let b: Vec<f64> = (0..a.nrows()).map(|i| (i % 7) as f64 - 3.0).collect();
    let p = SolveParams {
        record_history: true,
        ..params(1e-10, 500)
    };
    let (mut x, mut y) = (vec![0.0; a.nrows()], vec![0.0; a.nrows()]);
    let i1 = cg(&Cpu, &a, &b, &mut x, &p).unwrap();
    let i2 = cocg(&Cpu, &a, &b, &mut y, &p).unwrap();
    assert_eq!((i1.iterations, &i1.history), (i2.iterations, &i2.history));
    assert_eq!(x, y);
    // And the complex solve of the same real system gives the same iterates.
    let ac = a.map_values(|v| c(v, 0.0));
    let bc: Vec<C64> = b.iter().map(|&v| c(v, 0.0)).collect();
    let mut z = vec![c(0.0, 0.0); a.nrows()];
    let i3 = cocg(&Cpu, &ac, &bc, &mut z, &p).unwrap();
    // (complex division rounds differently from real division: the same iterates to rounding)
    assert!(i3.iterations.abs_diff(i1.iterations) <= 1);
    assert!(z
        .iter()
        .zip(&x)
        .all(|(z, x)| z.im == 0.0 && (z.re - x).abs() <= 1e-12 * x.abs().max(1.0)));
}
