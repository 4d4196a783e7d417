//! Complex element types (`Complex<f32>`, `Complex<f64>`): the element trait, Matrix Market
//! `complex` and `hermitian` files, the complex generator and the CPU products `A·x`, `Aᵀ·x`
//! and `Aᴴ·x` against a compensated reference.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::io;
use segsparse::spmv::{cpu, spmv, spmv_op, Op};
use segsparse::{generate, Complex, CsrMatrix, Elem, Error};

type C64 = Complex<f64>;
type C32 = Complex<f32>;

fn project_file(rel: &str) -> PathBuf {
    let m = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("matrices")
        .join(rel);
    if m.exists() {
        m
    } else {
        Path::new("matrices").join(rel)
    }
}

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

fn read<T: Elem>(text: &str) -> segsparse::Result<CsrMatrix<T>> {
    io::read_matrix_market_from(text.as_bytes(), "t.mtx")
}

/// A random `m × n` matrix with about `k` entries per row (some rows empty), complex values
/// with parts of mixed magnitude (so that rows cancel).
fn random_complex<T: Elem>(m: usize, n: usize, k: usize, seed: u64) -> CsrMatrix<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for i in 0..m {
        if rng.gen_bool(0.1) {
            continue;
        }
        for _ in 0..rng.gen_range(0..=2 * k) {
            let mag = 10f64.powi(rng.gen_range(-3..4));
            let v = c(
                rng.gen_range(-1.0..1.0) * mag,
                rng.gen_range(-1.0..1.0) * mag,
            );
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

// ---------------------------------------------------------------------------------------------
// The element trait
// ---------------------------------------------------------------------------------------------

#[test]
fn element_trait_for_the_four_types() {
    let z = c(3.0, -4.0);
    assert_eq!(
        (z.modulus(), Elem::norm_sqr(z), Elem::conj(z)),
        (5.0, 25.0, c(3.0, 4.0))
    );
    assert_eq!(
        (C64::NAME, C32::NAME, f64::NAME, f32::NAME),
        ("c128", "c64", "f64", "f32")
    );
    assert_eq!(
        (C64::BYTES, C32::BYTES, f64::BYTES, f32::BYTES),
        (16, 8, 8, 4)
    );
    assert_eq!((C32::IS_COMPLEX, f32::IS_COMPLEX), (true, false));
    assert_eq!(f64::from_parts(2.0, 0.0), Some(2.0));
    assert_eq!(f64::from_parts(2.0, 1.0), None);
    assert_eq!(<f64 as Elem>::conj(-2.0), -2.0);
    assert_eq!((-2.0f64).modulus(), 2.0);
    assert!(!c(1.0, f64::NAN).finite() && c(1.0, 2.0).finite());
    assert_eq!(
        C32::narrow(c(0.1, 0.2)).widen(),
        c(0.1f32 as f64, 0.2f32 as f64)
    );
    // The device view: the same bytes, re then im.
    let v = vec![c(1.0, 2.0), c(3.0, 4.0)];
    let d = C64::as_dev(&v);
    assert_eq!(d.len(), 2);
    assert_eq!(d[1].0, c(3.0, 4.0));
    assert_eq!(C64::from_dev(d), &v[..]);
    // SAFETY: Complex<f64> is #[repr(C)] { re, im }: four f64 in a row.
    let raw: &[f64] = unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), 4) };
    assert_eq!(raw, &[1.0, 2.0, 3.0, 4.0]);
}

// ---------------------------------------------------------------------------------------------
// Matrix Market
// ---------------------------------------------------------------------------------------------

#[test]
fn young1c_loads_as_complex_and_is_refused_as_real() {
    let p = project_file("young1c.mtx.gz");
    let a: CsrMatrix<C64> = io::read_matrix_market(&p).unwrap();
    assert_eq!((a.shape(), a.nnz()), ((841, 841), 4089));
    assert!(a.has_sorted_indices() && !a.has_non_finite());
    // "1 1 -218.46 0" and "2 1 64 0" open the file.
    assert_eq!(a.row(0).1[0], c(-218.46, 0.0));
    assert!(a.values().iter().any(|v| v.im != 0.0));
    let a32: CsrMatrix<C32> = io::read_matrix_market(&p).unwrap();
    assert_eq!(a32.nnz(), 4089);
    assert_eq!(a32.row(0).1[0], Complex::new(-218.46f32, 0.0));
    for e in [
        io::read_matrix_market::<f64>(&p).unwrap_err(),
        io::read_matrix_market::<f32>(&p).unwrap_err(),
    ] {
        let s = e.to_string();
        assert!(s.contains("young1c.mtx.gz:1:"), "{s}");
        assert!(s.contains("holds complex values"), "{s}");
        assert!(s.contains("Complex<f64>"), "{s}");
    }
}

#[test]
fn complex_general_symmetric_skew_and_hermitian_expand() {
    let gen = read::<C64>(
        "%%MatrixMarket matrix coordinate complex general\n2 2 3\n1 1 1 2\n2 1 3.5 -1e-3\n1 2 0 1D+2\n",
    )
    .unwrap();
    assert_eq!(
        gen.to_dense(),
        vec![
            vec![c(1.0, 2.0), c(0.0, 100.0)],
            vec![c(3.5, -1e-3), c(0.0, 0.0)]
        ]
    );
    let sym = read::<C64>(
        "%%MatrixMarket matrix coordinate complex symmetric\n2 2 2\n1 1 1 0\n2 1 3 4\n",
    )
    .unwrap();
    assert_eq!(sym.to_dense()[0][1], c(3.0, 4.0));
    assert!(sym.is_symmetric() && !sym.is_hermitian());
    let skew =
        read::<C64>("%%MatrixMarket matrix coordinate complex skew-symmetric\n2 2 1\n2 1 3 4\n")
            .unwrap();
    assert_eq!(skew.to_dense()[0][1], c(-3.0, -4.0));
    let her = read::<C64>(
        "%%MatrixMarket matrix coordinate complex hermitian\n3 3 4\n1 1 2 0\n2 1 3 4\n3 3 -1 0\n3 2 0 -1\n",
    )
    .unwrap();
    let d = her.to_dense();
    assert_eq!(
        (d[0][1], d[1][0], d[1][2], d[2][1]),
        (c(3.0, -4.0), c(3.0, 4.0), c(0.0, 1.0), c(0.0, -1.0))
    );
    assert!(her.is_hermitian() && !her.is_symmetric());
    assert_eq!(her.nnz(), 6);
    // The same hermitian matrix as a dense array (column-major lower triangle).
    let arr = read::<C64>(
        "%%MatrixMarket matrix array complex hermitian\n3 3\n2 0\n3 4\n0 0\n0 0\n0 -1\n-1 0\n",
    )
    .unwrap();
    assert_eq!(arr, her);
    // Real, integer and pattern files read into a complex type with zero imaginary parts.
    let r: CsrMatrix<C32> = io::read_matrix_market(project_file("bcsstk01.mtx.gz")).unwrap();
    let r64: CsrMatrix<f64> = io::read_matrix_market(project_file("bcsstk01.mtx.gz")).unwrap();
    assert_eq!(r.row_ptr(), r64.row_ptr());
    assert!(r
        .values()
        .iter()
        .zip(r64.values())
        .all(|(a, b)| a.re == *b as f32 && a.im == 0.0));
    let p = read::<C64>("%%MatrixMarket matrix coordinate pattern general\n1 2 1\n1 2\n").unwrap();
    assert_eq!(p.values(), &[c(1.0, 0.0)]);
    // gzip.
    let dir = std::env::temp_dir().join(format!("segsparse-complex-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("her.mtx.gz");
    {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(
            std::fs::File::create(&f).unwrap(),
            flate2::Compression::default(),
        );
        e.write_all(b"%%MatrixMarket matrix coordinate complex hermitian\n3 3 4\n1 1 2 0\n2 1 3 4\n3 3 -1 0\n3 2 0 -1\n")
            .unwrap();
        e.finish().unwrap();
    }
    assert_eq!(io::read_matrix_market::<C64>(&f).unwrap(), her);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn complex_round_trips_bit_exactly_and_vectors_too() {
    let dir = std::env::temp_dir().join(format!("segsparse-complex-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a: CsrMatrix<C64> = random_complex(50, 40, 5, 7);
    let a32: CsrMatrix<C32> = random_complex(50, 40, 5, 8);
    for name in ["a.mtx", "a.mtx.gz"] {
        let p = dir.join(name);
        io::write_matrix_market(&p, &a).unwrap();
        assert_eq!(io::read_matrix_market::<C64>(&p).unwrap(), a);
        io::write_matrix_market(&p, &a32).unwrap();
        assert_eq!(io::read_matrix_market::<C32>(&p).unwrap(), a32);
    }
    let mut text = Vec::new();
    io::write_matrix_market_to(&mut text, &a).unwrap();
    assert!(String::from_utf8_lossy(&text)
        .starts_with("%%MatrixMarket matrix coordinate complex general"));
    let v: Vec<C64> = random_vec(17, 3);
    let p = dir.join("v.mtx");
    io::write_vector(&p, &v).unwrap();
    assert_eq!(io::read_vector::<C64>(&p).unwrap(), v);
    let e = io::read_vector::<f64>(&p).unwrap_err().to_string();
    assert!(
        e.contains("v.mtx:1:") && e.contains("holds complex values"),
        "{e}"
    );
    // A coordinate vector of a complex file.
    let cv: Vec<C64> = io::read_vector_from(
        "%%MatrixMarket matrix coordinate complex general\n3 1 2\n1 1 1 -1\n3 1 0 2\n".as_bytes(),
        "cv.mtx",
    )
    .unwrap();
    assert_eq!(cv, vec![c(1.0, -1.0), c(0.0, 0.0), c(0.0, 2.0)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_complex_lines_name_file_line_and_part() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 1 1 0\n2 2 5\n",
            4,
            "missing imaginary part after '5'",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n% c\n1 1 1 abc\n",
            4,
            "imaginary part 'abc' is not a number",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 x 1\n",
            3,
            "real part 'x' is not a number",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2 3\n",
            3,
            "too many fields: expected 4 'row col real imaginary'",
        ),
        (
            "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 2\n",
            3,
            "diagonal entry (1, 1) = 1+2i in a hermitian file (its diagonal is real)",
        ),
        (
            "%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n2 1 1 2\n1 2 1 2\n",
            4,
            "",
        ),
        (
            "%%MatrixMarket matrix coordinate complex hermitian\n2 3 1\n1 1 1 0\n",
            2,
            "must be square",
        ),
        (
            "%%MatrixMarket matrix array complex general\n1 2\n1 1\n2\n",
            4,
            "missing imaginary part after '2'",
        ),
        (
            "%%MatrixMarket matrix array complex general\n1 1\n1 2 3\n",
            3,
            "one value per line (real and imaginary parts), found more ('3')",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n2 2 1\n3 1 1 1\n",
            3,
            "row index 3 is out of range",
        ),
        (
            "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n",
            1,
            "hermitian symmetry needs the complex field",
        ),
    ];
    for &(text, line, msg) in cases {
        for e in [
            read::<C64>(text).unwrap_err(),
            read::<C32>(text).unwrap_err(),
        ] {
            match &e {
                Error::MatrixMarket {
                    path,
                    line: l,
                    message,
                } => {
                    assert_eq!((path.as_str(), *l), ("t.mtx", line), "{text}: {e}");
                    assert!(message.contains(msg), "{text}: {message}");
                }
                other => panic!("{text}: expected a Matrix Market error, got {other:?}"),
            }
        }
    }
}

/// Random mutations of valid complex files never panic, and whatever reads is a valid matrix.
#[test]
fn complex_reader_survives_mutations() {
    let bases: Vec<Vec<u8>> = vec![
        b"%%MatrixMarket matrix coordinate complex hermitian\n3 3 4\n1 1 2 0\n2 1 3 4\n3 3 -1 0\n3 2 0 -1\n".to_vec(),
        b"%%MatrixMarket matrix coordinate complex general\n2 2 3\n1 1 1 2\n2 1 3.5 -1e-3\n1 2 0 1D+2\n".to_vec(),
        b"%%MatrixMarket matrix array complex symmetric\n2 2\n1 0\n2 2\n3 -3\n".to_vec(),
    ];
    const ALPHABET: &[u8] = b"0123456789 -+.eEdD\n%naNiIf";
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut oks = 0;
    for iter in 0..3000 {
        let mut v = bases[iter % bases.len()].clone();
        for _ in 0..rng.gen_range(1..=3) {
            let at = rng.gen_range(0..v.len().max(1)).min(v.len());
            match rng.gen_range(0..3) {
                0 if at < v.len() => v[at] = ALPHABET[rng.gen_range(0..ALPHABET.len())],
                1 => {
                    let end = (at + rng.gen_range(1..4)).min(v.len());
                    v.drain(at..end);
                }
                _ => v.insert(at, ALPHABET[rng.gen_range(0..ALPHABET.len())]),
            }
        }
        let r = std::panic::catch_unwind(|| read_bytes(&v));
        match r {
            Ok(Ok(m)) => {
                let (rp, ci, va) = m.clone().into_parts();
                CsrMatrix::try_from_parts(m.nrows(), m.ncols(), rp, ci, va).unwrap();
                oks += 1;
            }
            Ok(Err(e)) => assert!(matches!(e, Error::MatrixMarket { .. }), "{e:?}"),
            Err(_) => panic!("the reader panicked on {:?}", String::from_utf8_lossy(&v)),
        }
    }
    assert!(oks > 30, "only {oks} mutated files read");
}

fn read_bytes(v: &[u8]) -> segsparse::Result<CsrMatrix<C64>> {
    io::read_matrix_market_from(v, "m.mtx")
}

// ---------------------------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------------------------

#[test]
fn helmholtz3d_is_complex_symmetric_with_the_stated_stencil() {
    let n = 6;
    let a: CsrMatrix<C64> = generate::from_spec("helmholtz3d:6:20:0.5", 0).unwrap();
    assert_eq!((a.nrows(), a.nnz()), (n * n * n, 7 * n * n * n - 6 * n * n));
    assert!(a.is_symmetric() && !a.is_hermitian());
    let kh2 = (20.0 / 7.0f64).powi(2);
    let d = a.diagonal();
    assert!(d
        .iter()
        .all(|&v| (v - c(6.0 - kh2, 0.5 * kh2)).norm() < 1e-12));
    assert!(a
        .values()
        .iter()
        .filter(|v| v.im == 0.0)
        .all(|&v| v == c(-1.0, 0.0)));
    // The same pattern as the 7-point Laplacian.
    let p: CsrMatrix<f64> = generate::from_spec("poisson3d:6", 0).unwrap();
    assert_eq!((a.row_ptr(), a.col_idx()), (p.row_ptr(), p.col_idx()));
    // Real generators give a complex type zero imaginary parts; a real type refuses a shift.
    let pc: CsrMatrix<C32> = segsparse::load("poisson2d:5", 0).unwrap();
    assert!(pc.values().iter().all(|v| v.im == 0.0) && pc.nnz() == 105);
    let e = generate::from_spec::<f64>("helmholtz3d:6:20:0.5", 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is complex"), "{e}");
    let real: CsrMatrix<f64> = generate::from_spec("helmholtz3d:6:20:0", 0).unwrap();
    assert_eq!(real.nnz(), a.nnz());
    for bad in [
        "helmholtz3d:6:20",
        "helmholtz3d:6:x:1",
        "helmholtz3d:6:1:inf",
        "helmholtz3d:-1:1:1",
    ] {
        let e = generate::from_spec::<C64>(bad, 0).unwrap_err().to_string();
        assert!(
            e.contains("bad matrix spec") && e.contains("helmholtz3d:N:K:SHIFT"),
            "{e}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// CPU products
// ---------------------------------------------------------------------------------------------

fn check_products<T: Elem>(a: &CsrMatrix<T>, seed: u64, tol: f64) {
    let (m, n) = a.shape();
    let x: Vec<T> = random_vec(n, seed);
    let xt: Vec<T> = random_vec(m, seed + 1);
    let poison = T::narrow(c(f64::NAN, f64::NAN));
    // A·x, parallel, sequential and the paper's segmented scan.
    let r = cpu::spmv_compensated_reference(Op::NoTrans, a, &x);
    let mut y = vec![poison; m];
    spmv(T::one(), a, &x, T::zero(), &mut y);
    let err = cpu::max_rel_err_complex(&y, &r);
    assert!(err <= tol, "A·x: {err:e} > {tol:e}");
    for f in [cpu::spmv_seq::<T>, cpu::spmv_segscan::<T>] {
        let mut y2 = vec![poison; m];
        f(T::one(), a, &x, T::zero(), &mut y2);
        assert!(cpu::max_rel_err_complex(&y2, &r) <= tol);
    }
    for chunks in [1, 3, 8] {
        let mut y2 = vec![poison; m];
        cpu::spmv_chunked(T::one(), a, &x, T::zero(), &mut y2, chunks);
        assert_eq!(y2, y, "the result does not depend on the chunking");
    }
    // Aᴴ·x and Aᵀ·x, against the reference and against the explicit transposes.
    for (op, at) in [
        (Op::ConjTrans, a.conj_transpose()),
        (Op::Trans, a.transpose()),
    ] {
        let r = cpu::spmv_compensated_reference(op, a, &xt);
        let mut y = vec![poison; n];
        spmv_op(op, T::one(), a, &xt, T::zero(), &mut y);
        let err = cpu::max_rel_err_complex(&y, &r);
        assert!(err <= tol, "{op:?}: {err:e} > {tol:e}");
        let mut y2 = vec![poison; n];
        spmv(T::one(), &at, &xt, T::zero(), &mut y2);
        assert!(cpu::max_rel_err_complex(&y2, &r) <= tol);
    }
    // α and β: y ← α·Aᴴx + β·y with complex coefficients.
    let (al, be) = (T::narrow(c(0.5, -2.0)), T::narrow(c(-1.0, 0.25)));
    let y0: Vec<T> = random_vec(n, seed + 2);
    let mut y = y0.clone();
    spmv_op(Op::ConjTrans, al, a, &xt, be, &mut y);
    let r = cpu::spmv_compensated_reference(Op::ConjTrans, a, &xt);
    let want: Vec<C64> = r
        .iter()
        .zip(&y0)
        .map(|(ri, yi)| al.widen() * ri + be.widen() * yi.widen())
        .collect();
    assert!(cpu::max_rel_err_complex(&y, &want) <= 4.0 * tol);
}

#[test]
fn complex_spmv_matches_the_compensated_reference() {
    for (i, &(m, n, k)) in [
        (1, 1, 1),
        (7, 5, 3),
        (300, 200, 6),
        (5000, 4000, 10),
        (20_000, 20_000, 4),
    ]
    .iter()
    .enumerate()
    {
        let a: CsrMatrix<C64> = random_complex(m, n, k, 100 + i as u64);
        // Each row's error is bounded by its length times ε times the sum of moduli, which
        // the magnitudes (10⁻³..10³) keep within 10⁶ of the largest result.
        check_products(&a, 7 + i as u64, 1e-9);
        let a32: CsrMatrix<C32> = a.map_values(C32::narrow);
        check_products(&a32, 9 + i as u64, 1e-1);
    }
    let y: CsrMatrix<C64> = io::read_matrix_market(project_file("young1c.mtx.gz")).unwrap();
    check_products(&y, 1, 1e-13);
    check_products(&y.map_values(C32::narrow), 2, 1e-5);
    // The real path through the same generic products.
    let r: CsrMatrix<f64> = io::read_matrix_market(project_file("west0479.mtx.gz")).unwrap();
    check_products(&r, 3, 1e-13);
}

#[test]
fn complex_products_by_hand() {
    // [1+i   2 ]
    // [ 0   -i ]
    let a = CsrMatrix::from_triplets(
        2,
        2,
        &[
            (0, 0, c(1.0, 1.0)),
            (0, 1, c(2.0, 0.0)),
            (1, 1, c(0.0, -1.0)),
        ],
    )
    .unwrap();
    let x = [c(1.0, 0.0), c(0.0, 1.0)];
    let mut y = [c(f64::NAN, 0.0); 2];
    spmv(c(1.0, 0.0), &a, &x, c(0.0, 0.0), &mut y);
    assert_eq!(y, [c(1.0, 3.0), c(1.0, 0.0)]);
    // Aᴴ = [1−i 0; 2 i]: Aᴴx = [1−i, 2 − 1].
    spmv_op(Op::ConjTrans, c(1.0, 0.0), &a, &x, c(0.0, 0.0), &mut y);
    assert_eq!(y, [c(1.0, -1.0), c(1.0, 0.0)]);
    // Aᵀ = [1+i 0; 2 −i]: Aᵀx = [1+i, 2 + 1].
    spmv_op(Op::Trans, c(1.0, 0.0), &a, &x, c(0.0, 0.0), &mut y);
    assert_eq!(y, [c(1.0, 1.0), c(3.0, 0.0)]);
    assert_eq!(
        a.conj_transpose().to_dense(),
        vec![
            vec![c(1.0, -1.0), c(0.0, 0.0)],
            vec![c(2.0, 0.0), c(0.0, 1.0)]
        ]
    );
}

#[test]
#[should_panic(expected = "x has length 3 and y 2, but op(A) is 2×2")]
fn transposed_product_names_both_sizes() {
    let a = CsrMatrix::<C64>::identity(2);
    let mut y = [c(0.0, 0.0); 2];
    spmv_op(
        Op::ConjTrans,
        c(1.0, 0.0),
        &a,
        &[c(0.0, 0.0); 3],
        c(0.0, 0.0),
        &mut y,
    );
}
