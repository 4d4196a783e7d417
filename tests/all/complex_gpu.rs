//! Complex SpMV on the GPU (`GpuComplexCsr`) against the CPU's compensated reference, on
//! fresh random matrices (empty rows, one long row, sizes around the kernels' groupings),
//! young1c and the Helmholtz generator, every algorithm, `Complex<f32>` and `Complex<f64>`,
//! poisoned outputs, β = 0 with NaN in y and complex α, β; `Aᴴ` built on the device
//! (`sparse::gpu::conj_transpose`) against the CPU's, entry for entry and by its product; power-law
//! rows through the nonzero-balanced kernel; and cuSPARSE C/Z through the same comparison.
//!
//! Skips with a notice without a GPU; fails instead when `SEGSPARSE_REQUIRE_GPU=1`.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::gpu::{self, Gpu, KernelType};
use segsparse::sparse::gpu as sparse_gpu;
use segsparse::spmv::cpu;
use segsparse::spmv::gpu::complex::{ComplexSpmvAlgorithm as Alg, GpuComplexCsr};
#[cfg(feature = "peers")]
use segsparse::spmv::gpu::{CusparseAlg, CusparseSpmv};
use segsparse::spmv::Op;
use segsparse::{generate, io, Complex, CsrMatrix, Elem};

type C64 = Complex<f64>;
type C32 = Complex<f32>;

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

fn random_matrix<T: Elem>(m: usize, n: usize, k: usize, long: bool, seed: u64) -> CsrMatrix<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for i in 0..m {
        if rng.gen_bool(0.15) {
            continue;
        }
        let len = if long && i == m / 2 {
            n.min(5000)
        } else {
            rng.gen_range(0..=2 * k)
        };
        for _ in 0..len {
            let v = c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
            t.push((i, rng.gen_range(0..n), T::narrow(v)));
        }
    }
    CsrMatrix::from_triplets(m, n, &t).unwrap()
}

fn random_vec<T: Elem>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| T::narrow(c(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0))))
        .collect()
}

/// Every algorithm (and cuSPARSE) against the compensated reference of `α·A·x + β·y`.
fn check<T: Elem>(g: &Arc<Gpu>, a: &CsrMatrix<T>, label: &str, seed: u64, tol: f64)
where
    T::Dev: KernelType,
{
    let (m, n) = a.shape();
    let x: Vec<T> = random_vec(n, seed);
    let y0: Vec<T> = random_vec(m, seed + 1);
    let r = cpu::spmv_compensated_reference(Op::NoTrans, a, &x);
    let (al, be) = (T::narrow(c(0.75, -1.5)), T::narrow(c(-0.5, 0.25)));
    let want: Vec<C64> = r
        .iter()
        .zip(&y0)
        .map(|(ri, yi)| al.widen() * ri + be.widen() * yi.widen())
        .collect();
    let nan = T::narrow(c(f64::NAN, f64::NAN));
    for alg in Alg::ALL {
        let d = GpuComplexCsr::upload(g, a, alg).unwrap();
        let dx = d.upload_vector(&x).unwrap();
        // β = 0: y poisoned with NaN is not read.
        let mut dy = d.upload_vector(&vec![nan; m]).unwrap();
        d.spmv(T::one(), &dx, T::zero(), &mut dy).unwrap();
        let y = d.download_vector(&dy).unwrap();
        let err = cpu::max_rel_err_complex(&y, &r);
        assert!(err <= tol, "{label} {} A·x: {err:e} > {tol:e}", alg.name());
        let mut dy = d.upload_vector(&y0).unwrap();
        d.spmv(al, &dx, be, &mut dy).unwrap();
        let y = d.download_vector(&dy).unwrap();
        let err = cpu::max_rel_err_complex(&y, &want);
        assert!(
            err <= tol,
            "{label} {} α·A·x + β·y: {err:e} > {tol:e}",
            alg.name()
        );
        // The same product twice gives the same bits.
        let mut dy2 = d.upload_vector(&y0).unwrap();
        d.spmv(al, &dx, be, &mut dy2).unwrap();
        assert_eq!(
            d.download_vector(&dy2).unwrap(),
            y,
            "{label} {}",
            alg.name()
        );
    }
    // Aᴴ·x through the uploaded conjugate transpose.
    let ah = GpuComplexCsr::upload(g, &a.conj_transpose(), Alg::Auto).unwrap();
    let xt: Vec<T> = random_vec(m, seed + 2);
    let rh = cpu::spmv_compensated_reference(Op::ConjTrans, a, &xt);
    let dx = ah.upload_vector(&xt).unwrap();
    let mut dy = ah.upload_vector(&vec![nan; n]).unwrap();
    ah.spmv(T::one(), &dx, T::zero(), &mut dy).unwrap();
    let err = cpu::max_rel_err_complex(&ah.download_vector(&dy).unwrap(), &rh);
    assert!(err <= tol, "{label} Aᴴ·x: {err:e} > {tol:e}");
    // Aᴴ built on the device from the uploaded A: the CPU's conjugate transpose entry for entry,
    // and the same product under every algorithm.
    let d = GpuComplexCsr::upload(g, a, Alg::Warp8).unwrap();
    let want_h = a.conj_transpose();
    for alg in [Alg::Auto, Alg::Rows, Alg::Fused] {
        let dh = sparse_gpu::conj_transpose(&d, alg).unwrap();
        assert_eq!(
            (dh.nrows(), dh.ncols(), dh.nnz()),
            (n, m, a.nnz()),
            "{label}"
        );
        let (rp, ci, va) = dh.device_parts();
        assert_eq!(
            g.download(rp).unwrap()[..],
            want_h.row_ptr()[..],
            "{label} Aᴴ rows"
        );
        if a.nnz() > 0 {
            assert_eq!(
                g.download(ci).unwrap()[..],
                want_h.col_idx()[..],
                "{label} Aᴴ columns"
            );
            let vals = g.download(va).unwrap();
            assert_eq!(T::from_dev(&vals), want_h.values(), "{label} Aᴴ values");
        }
        let mut dy = dh.upload_vector(&vec![nan; n]).unwrap();
        dh.spmv(T::one(), &dx, T::zero(), &mut dy).unwrap();
        let err = cpu::max_rel_err_complex(&dh.download_vector(&dy).unwrap(), &rh);
        assert!(
            err <= tol,
            "{label} device Aᴴ·x ({}): {err:e} > {tol:e}",
            alg.name()
        );
    }
    #[cfg(feature = "peers")]
    if m > 0 && n > 0 && a.nnz() > 0 {
        let d = GpuComplexCsr::upload(g, a, Alg::Auto).unwrap();
        let dx = d.upload_vector(&x).unwrap();
        let mut dy = d.upload_vector(&y0).unwrap();
        match CusparseSpmv::new_complex(&d, CusparseAlg::Alg1, al, &dx, be, &mut dy) {
            Ok(mut peer) => {
                peer.spmv(T::as_dev(&[al])[0], &dx, T::as_dev(&[be])[0], &mut dy)
                    .unwrap();
                let err = cpu::max_rel_err_complex(&d.download_vector(&dy).unwrap(), &want);
                assert!(err <= tol, "{label} cuSPARSE: {err:e} > {tol:e}");
            }
            Err(e) => eprintln!("cuSPARSE skipped: {e}"),
        };
    }
}

fn random_cases(g: &Arc<Gpu>, cases: &[(usize, usize, usize, bool)], seed0: u64) {
    let mut seed = seed0;
    for &(m, n, k, long) in cases {
        let a: CsrMatrix<C64> = random_matrix(m, n, k, long, seed);
        check(g, &a, &format!("random {m}×{n} c128"), seed, 1e-12);
        let a32: CsrMatrix<C32> = a.map_values(C32::narrow);
        check(g, &a32, &format!("random {m}×{n} c64"), seed + 7, 1e-5);
        seed += 11;
    }
}

/// The small cases (also what compute-sanitizer runs): empty, single entries, groups
/// crossing warps, a long row, young1c and a small Helmholtz matrix.
#[test]
fn complex_gpu_spmv_small_cases() {
    let Some(g) = gpu::test_gpu() else { return };
    random_cases(
        &g,
        &[
            (0, 0, 1, false),
            (1, 1, 1, false),
            (7, 3, 2, false),
            (31, 33, 3, true),
            (257, 255, 5, false),
        ],
        1,
    );
    let h: CsrMatrix<C64> = generate::from_spec("helmholtz3d:6:10:0.5", 0).unwrap();
    check(&g, &h, "helmholtz3d:6:10:0.5", 3, 1e-13);
    for root in ["matrices", "../shared/matrices"] {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(root)
            .join("young1c.mtx.gz");
        let p = if p.exists() {
            p
        } else {
            std::path::Path::new(root).join("young1c.mtx.gz")
        };
        if let Ok(y) = io::read_matrix_market::<C64>(&p) {
            check(&g, &y, "young1c c128", 5, 1e-13);
            check(&g, &y.map_values(C32::narrow), "young1c c64", 6, 1e-5);
            return;
        }
    }
    panic!("young1c.mtx.gz not found under matrices/");
}

/// Larger fresh random matrices (a long row among many short ones) and a larger Helmholtz
/// matrix.
#[test]
fn complex_gpu_spmv_large_cases() {
    let Some(g) = gpu::test_gpu() else { return };
    random_cases(
        &g,
        &[
            (4097, 3000, 20, true),
            (60_000, 50_000, 6, true),
            (200_000, 5000, 2, true),
        ],
        100,
    );
    // Power-law rows: the nonzero-balanced kernel with rows across many tiles, chosen by Auto.
    let p: CsrMatrix<C64> = generate::from_spec("powerlaw:100000:2.0", 4).unwrap();
    let st = p.row_stats();
    assert_eq!(
        Alg::Auto.resolve(st.mean, st.max, p.nnz(), std::mem::size_of::<C64>()),
        Alg::Fused,
        "{st:?}"
    );
    check(&g, &p, "powerlaw:100000:2.0 c128", 9, 1e-12);
    check(
        &g,
        &p.map_values(C32::narrow),
        "powerlaw:100000:2.0 c64",
        10,
        1e-5,
    );
    let h: CsrMatrix<C64> = generate::from_spec("helmholtz3d:30:40:0.5", 0).unwrap();
    check(&g, &h, "helmholtz3d:30:40:0.5", 3, 1e-13);
}

#[test]
fn a_real_matrix_is_refused_by_the_complex_upload() {
    let Some(g) = gpu::test_gpu() else { return };
    let a: CsrMatrix<f64> = generate::from_spec("poisson2d:4", 0).unwrap();
    let e = GpuComplexCsr::upload(&g, &a, Alg::Auto)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("complex"), "{e}");
}
