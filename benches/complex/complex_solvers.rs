//! The complex solvers on the GPU (`GpuOps`, `GpuComplexCsr`): COCG, BiCGSTAB and
//! GMRES(30) on the complex shifted Helmholtz problem, `b = 1`, `x₀ = 0`, to a relative residual
//! `rtol`: iterations, products with `A`, time to solution (the second of two solves, so the
//! kernels are compiled and the memory pool warm) and the true residual, `Complex<f64>`.
//!
//! `cargo bench -p segsparse-tools --bench complex_solvers -- [SPEC [RTOL [METHODS]]]` (default
//! `helmholtz3d:100:20:0.5`, `1e-6`, `cocg,bicgstab,gmres`): one JSON object per solve on
//! stdout. `benches/complex/peers.py` builds the same matrix with SciPy and gives SciPy's
//! iteration counts and CuPy's `gmres` time to solution.

#[cfg(feature = "cuda")]
fn main() {
    imp::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("complex_solvers: built without the cuda feature");
}

#[cfg(feature = "cuda")]
mod imp {
    use std::cell::Cell;

    use segsparse::backend::gpu::GpuOps;
    use segsparse::backend::{Identity, LinearOperator, VectorOps};
    use segsparse::gpu::Gpu;
    use segsparse::solvers::{bicgstab, cocg, gmres, SolveInfo, SolveParams};
    use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm, GpuComplexCsr};
    use segsparse::{generate, Complex, CsrMatrix};

    type C64 = Complex<f64>;
    type Be = GpuOps<C64>;
    type V = <Be as VectorOps<C64>>::Vector;

    /// `A·x` that counts its products.
    struct Counting<'a> {
        a: &'a GpuComplexCsr<C64>,
        products: Cell<usize>,
    }

    impl LinearOperator<C64, Be> for Counting<'_> {
        fn nrows(&self) -> usize {
            self.a.nrows()
        }
        fn ncols(&self) -> usize {
            self.a.ncols()
        }
        fn apply(&self, be: &Be, x: &V, y: &mut V) -> segsparse::Result<()> {
            self.products.set(self.products.get() + 1);
            self.a.apply(be, x, y)
        }
    }

    fn solve(
        be: &Be,
        op: &Counting,
        method: &str,
        b: &V,
        x: &mut V,
        p: &SolveParams,
    ) -> Result<SolveInfo, segsparse::solvers::SolveError> {
        match method {
            "cocg" => cocg(be, op, b, x, p),
            "bicgstab" => bicgstab(be, op, &Identity, b, x, p),
            "gmres" => gmres(be, op, &Identity, b, x, 30, p),
            _ => panic!("unknown method {method} (cocg, bicgstab, gmres)"),
        }
    }

    pub fn main() {
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect();
        let spec = args
            .first()
            .cloned()
            .unwrap_or_else(|| "helmholtz3d:100:20:0.5".into());
        let rtol: f64 = args.get(1).map_or(1e-6, |s| s.parse().expect("RTOL"));
        let methods = args
            .get(2)
            .cloned()
            .unwrap_or_else(|| "cocg,bicgstab,gmres".into());
        let g = Gpu::new().expect("a CUDA device");
        let a: CsrMatrix<C64> = generate::from_spec(&spec, 0).expect("a complex generator spec");
        let n = a.nrows();
        let be = Be::new(&g).unwrap();
        let da = GpuComplexCsr::upload(&g, &a, ComplexSpmvAlgorithm::Auto).unwrap();
        let bh = vec![C64::new(1.0, 0.0); n];
        let b = be.upload(&bh).unwrap();
        let p = SolveParams {
            rel_tol: rtol,
            max_iters: 20_000,
            ..Default::default()
        };
        eprintln!(
            "{spec}: {n} rows, {} entries, SpMV {}",
            a.nnz(),
            da.algorithm().name()
        );
        for m in methods.split(',') {
            let mut last = None;
            for _ in 0..2 {
                let op = Counting {
                    a: &da,
                    products: Cell::new(0),
                };
                let mut x = be.zeros(n).unwrap();
                let info = solve(&be, &op, m, &b, &mut x, &p);
                last = Some((info, op.products.get(), x));
            }
            let (info, products, x) = last.unwrap();
            // The true residual on the CPU, in f64.
            let xh = be.download(&x).unwrap();
            let mut r = bh.clone();
            segsparse::spmv::spmv(-C64::new(1.0, 0.0), &a, &xh, C64::new(1.0, 0.0), &mut r);
            let nr = r.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt() / (n as f64).sqrt();
            match info {
                Ok(i) => println!(
                    "{{\"bench\":\"complex-solve\",\"matrix\":{spec:?},\"precision\":\"c128\",\"method\":{m:?},\"rtol\":{rtol:e},\"rows\":{n},\"nnz\":{},\"spmv\":{:?},\"converged\":{},\"iterations\":{},\"products\":{products},\"solve_s\":{:.6},\"per_iteration_us\":{:.2},\"true_rel_residual\":{nr:e},\"device\":{:?}}}",
                    a.nnz(),
                    da.algorithm().name(),
                    i.converged,
                    i.iterations,
                    i.solve_seconds,
                    i.solve_seconds / i.iterations.max(1) as f64 * 1e6,
                    g.name()
                ),
                Err(e) => println!(
                    "{{\"bench\":\"complex-solve\",\"matrix\":{spec:?},\"method\":{m:?},\"error\":{:?},\"device\":{:?}}}",
                    e.to_string(),
                    g.name()
                ),
            }
        }
    }
}
