//! Matrix Market reading and writing, and the matrix generators.
//!
//! Covers every format variant (`matrices/small/`), every malformed case (`matrices/bad/`, each
//! checked for the file, line and problem named in its error), random mutations of valid files
//! (the reader must never panic), bit-exact write → read round trips in f32 and f64, agreement
//! with `sprs`, raefsky2, and the generators (sizes, symmetry, determinism, distinct columns).

use std::io::BufReader;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::generate;
use segsparse::io::{self, MmField, MmFormat, MmSymmetry};
use segsparse::{CsrMatrix, Error};

/// A file under the project's `matrices/`: relative to the manifest directory when it exists
/// (the build machine), else relative to the current directory (a staged test executable).
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

fn small(name: &str) -> PathBuf {
    project_file(&format!("small/{name}"))
}

fn dense(m: &CsrMatrix<f64>) -> Vec<Vec<f64>> {
    m.to_dense()
}

fn read64(name: &str) -> CsrMatrix<f64> {
    let p = small(name);
    io::read_matrix_market(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------------------------------------------------------------------------------------------
// Valid variants
// ---------------------------------------------------------------------------------------------

#[test]
fn every_small_variant_reads_as_expected() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    // (file, expected dense matrix, stored entries)
    let cases: Vec<(&str, Vec<Vec<f64>>, usize)> = vec![
        ("one.mtx", vec![vec![2.5]], 1),
        (
            "array.mtx",
            vec![vec![1., 0.], vec![0., 4.], vec![-2.5, 0.]],
            3, // exact zeros (including -0) dropped
        ),
        (
            "array_symmetric.mtx",
            vec![vec![2., -1., 0.], vec![-1., 2., -1.], vec![0., -1., 2.]],
            7,
        ),
        (
            "array_skew.mtx",
            vec![vec![0., -1., -2.], vec![1., 0., -3.], vec![2., 3., 0.]],
            6,
        ),
        ("crlf.mtx", vec![vec![1., 0.], vec![0., 2.]], 2),
        ("duplicates.mtx", vec![vec![-1., 3.], vec![5., 0.]], 3),
        (
            "empty_rows.mtx",
            vec![
                vec![0.; 4],
                vec![1., 0., 0., -2.],
                vec![0.; 4],
                vec![0., 3.5, 0.25, 0.],
                vec![0.; 4],
            ],
            4,
        ),
        ("fortran.mtx", vec![vec![1500., -0.2]], 2),
        ("gzip_without_extension.mtx", vec![vec![2.5]], 1),
        (
            "integer.mtx",
            vec![vec![7., 0., -12.], vec![0., 9007199254740993f64, 0.]],
            3,
        ),
        ("no_entries.mtx", vec![vec![0.; 4]; 3], 0),
        (
            "pattern.mtx",
            vec![
                vec![1., 0., 0., 1.],
                vec![0., 0., 1., 0.],
                vec![0., 1., 0., 0.],
            ],
            4,
        ),
        (
            "skew.mtx",
            vec![vec![0., -1.5, 2.], vec![1.5, 0., 0.], vec![-2., 0., 0.]],
            4,
        ),
        (
            "symmetric.mtx",
            vec![vec![4., -1., 0.], vec![-1., 4., -1.], vec![0., -1., 4.]],
            7, // the diagonal is stored once, not doubled
        ),
        (
            "symmetric_gz.mtx.gz",
            vec![vec![4., -1., 0.], vec![-1., 4., -1.], vec![0., -1., 4.]],
            7,
        ),
        (
            "symmetric_upper.mtx",
            vec![vec![4., -1., 0.], vec![-1., 0., -2.], vec![0., -2., 4.]],
            6,
        ),
        (
            "unsorted.mtx",
            vec![vec![1., 2., 0.], vec![0., 5., 0.], vec![7., 0., 9.]],
            5,
        ),
        ("upper_case_banner.mtx", vec![vec![3.]], 1),
        (
            "vector_array.mtx",
            vec![vec![1.], vec![-2.], vec![3.5], vec![0.]],
            3,
        ),
        (
            "vector_coordinate.mtx",
            vec![vec![0.], vec![-1.], vec![0.], vec![8.]],
            2,
        ),
        ("zero_by_zero.mtx", vec![], 0),
    ];
    let dir = project_file("small");
    let mut listed: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".mtx") && n != "nonfinite.mtx")
        .collect();
    listed.sort();
    let mut names: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    names.sort();
    assert_eq!(
        listed, names,
        "every file in matrices/small has a case here"
    );

    for (name, want, nnz) in cases {
        let m = read64(name);
        assert_eq!(dense(&m), want, "{name}");
        assert_eq!(m.nnz(), nnz, "{name}: stored entries");
        assert!(m.has_sorted_indices(), "{name}: canonical CSR");
        let m32: CsrMatrix<f32> = io::read_matrix_market(small(name)).unwrap();
        assert_eq!(m32.nnz(), nnz, "{name} as f32");
        assert_eq!(m32.cast::<f64>().shape(), m.shape());
    }
    let e = read64("empty_rows.mtx");
    assert_eq!(e.row_stats().empty_rows, 3);
    assert_eq!(read64("zero_by_zero.mtx").shape(), (0, 0));

    // NaN and infinities are accepted; the caller checks.
    let m = read64("nonfinite.mtx");
    assert!(m.has_non_finite());
    let d = dense(&m);
    assert!(d[0][0].is_nan());
    assert_eq!((d[0][1], d[1][1]), (inf, -inf));
    let _ = nan;
}

#[test]
fn f32_reads_round_each_decimal_once() {
    // f32 values are parsed directly as f32 (correct rounding), not via f64.
    let text = "%%MatrixMarket matrix coordinate real general\n1 2 2\n1 1 0.1\n1 2 16777217\n";
    let m: CsrMatrix<f32> = io::read_matrix_market_from(text.as_bytes(), "t").unwrap();
    assert_eq!(m.values(), &[0.1f32, 16777216f32]);
}

#[test]
fn headers_report_what_the_file_declares() {
    let h = io::read_header(project_file("raefsky2.mtx.gz")).unwrap();
    assert_eq!(
        (h.format, h.field, h.symmetry, h.nrows, h.ncols, h.entries),
        (
            MmFormat::Coordinate,
            MmField::Real,
            MmSymmetry::General,
            3242,
            3242,
            294276
        )
    );
    let h = io::read_header(project_file("young1c.mtx.gz")).unwrap();
    assert_eq!((h.field, h.entries), (MmField::Complex, 4089));
    let h = io::read_header(project_file("karate.mtx.gz")).unwrap();
    assert_eq!(
        (h.field, h.symmetry, h.entries),
        (MmField::Pattern, MmSymmetry::Symmetric, 78)
    );
    let h = io::read_header(small("array_symmetric.mtx")).unwrap();
    assert_eq!((h.format, h.entries), (MmFormat::Array, 6));
    assert_eq!(h.to_string(), "array real symmetric 3×3, 6 entries");
    let e = io::read_header(project_file("bad/empty.mtx")).unwrap_err();
    assert!(e.to_string().contains("empty file"), "{e}");
}

#[test]
fn vectors_read_from_array_and_coordinate() {
    let v: Vec<f64> = io::read_vector(small("vector_array.mtx")).unwrap();
    assert_eq!(v, [1., -2., 3.5, 0.]);
    let v: Vec<f32> = io::read_vector(small("vector_coordinate.mtx")).unwrap();
    assert_eq!(v, [0., -1., 0., 8.]);
    let e = io::read_vector::<f64>(small("symmetric.mtx")).unwrap_err();
    assert!(
        e.to_string().contains("a vector file must be general"),
        "{e}"
    );
    let e = io::read_vector::<f64>(small("pattern.mtx")).unwrap_err();
    assert!(e.to_string().contains("pattern file cannot hold"), "{e}");
    let e = io::read_vector::<f64>(small("array.mtx")).unwrap_err();
    assert!(e.to_string().contains("expected a vector"), "{e}");
    let e = io::read_vector::<f64>(project_file("bad/array_too_few.mtx")).unwrap_err();
    assert!(e.to_string().contains("expected a vector"), "{e}");
    let text = "%%MatrixMarket matrix array real general\n3 1\n1\n2\n";
    let e = io::read_vector_from::<f64, _>(text.as_bytes(), "rhs.mtx").unwrap_err();
    assert_eq!(
        e.to_string(),
        "rhs.mtx:4: too few values: the file ends after 2 of the 3 values declared by the size line (line 2)"
    );
    // A row vector is a vector too.
    let text = "%%MatrixMarket matrix array real general\n1 2\n1\n2\n";
    assert_eq!(
        io::read_vector_from::<f64, _>(text.as_bytes(), "r").unwrap(),
        [1., 2.]
    );
}

// ---------------------------------------------------------------------------------------------
// Malformed files
// ---------------------------------------------------------------------------------------------

/// Every file in `matrices/bad/`, the line its error must name and a part of the message.
const BAD: &[(&str, usize, &str)] = &[
    ("array_not_numeric.mtx", 4, "value '0x10' is not a number"),
    ("array_pattern.mtx", 1, "pattern field is only valid with the coordinate format"),
    ("array_too_few.mtx", 5, "too few values: the file ends after 3 of the 4 values"),
    ("array_too_many.mtx", 5, "too many values"),
    ("array_two_per_line.mtx", 3, "one value per line"),
    ("bad_banner.mtx", 1, "bad banner: expected '%%MatrixMarket matrix"),
    ("banner_extra.mtx", 1, "unexpected 'extra' after the symmetry"),
    ("banner_field.mtx", 1, "unknown field 'float'"),
    ("banner_format.mtx", 1, "unknown format 'sparse'"),
    ("banner_missing_symmetry.mtx", 1, "the symmetry is missing"),
    ("banner_object.mtx", 1, "object 'vector' is not supported"),
    ("banner_symmetry.mtx", 1, "unknown symmetry 'lower'"),
    ("binary.mtx", 1, "bad banner"),
    ("col_out_of_range.mtx", 4, "column index 99999999999999999999999 is out of range: the size line declares 3 columns"),
    ("col_zero.mtx", 4, "column index 0 is invalid (Matrix Market indices start at 1)"),
    ("column_missing.mtx", 4, "missing column index"),
    ("complex.mtx", 1, "a complex general file holds complex values: read it as a complex matrix"),
    ("empty.mtx", 1, "empty file"),
    ("entries_1e12.mtx", 3, "declares 1000000000000 entries, beyond segsparse's 32-bit limit"),
    ("entries_4e9_few.mtx", 5, "too few entries: the file ends after 2 of the 4000000000 entries"),
    ("hermitian.mtx", 1, "a complex hermitian file holds complex values"),
    ("hermitian_real.mtx", 1, "hermitian symmetry needs the complex field"),
    ("integer_with_fraction.mtx", 3, "value '1.5' is not an integer"),
    ("missing_size_line.mtx", 3, "missing size line"),
    ("no_banner.mtx", 1, "bad banner: expected '%%MatrixMarket"),
    ("pattern_skew.mtx", 1, "a pattern matrix cannot be skew-symmetric"),
    ("pattern_with_value.mtx", 3, "too many fields: expected 2 'row col' for a pattern file"),
    ("row_negative.mtx", 3, "row index -1 is invalid"),
    ("row_not_integer.mtx", 3, "row index '1.5' is not an integer"),
    ("row_out_of_range.mtx", 4, "row index 4 is out of range: the size line declares 3 rows"),
    ("row_zero.mtx", 4, "row index 0 is invalid (Matrix Market indices start at 1)"),
    ("size_line_long.mtx", 2, "bad size line: expected 3 numbers"),
    ("size_line_negative.mtx", 2, "bad size line: '-3' is not a non-negative integer"),
    ("size_line_short.mtx", 2, "expected 3 numbers 'rows cols entries' for a coordinate file, found 2"),
    ("size_line_text.mtx", 2, "bad size line: 'three'"),
    ("size_u32.mtx", 2, "10000000000 rows exceed segsparse's 32-bit index limit"),
    ("skew_diagonal.mtx", 4, "diagonal entry (2, 2) = 5 in a skew-symmetric file"),
    ("symmetric_both_triangles.mtx", 5, "lists one triangle only"),
    ("symmetric_not_square.mtx", 2, "must be square"),
    ("too_few_entries.mtx", 4, "too few entries: the file ends after 2 of the 3 entries declared by the size line (line 2)"),
    ("too_many_entries.mtx", 5, "too many entries: the size line (line 2) declares 2, this is entry 3"),
    ("too_many_fields.mtx", 3, "too many fields: expected 3"),
    ("truncated.mtx.gz", 803, "cannot read the file here (corrupt or truncated?)"),
    ("value_missing.mtx", 4, "missing value"),
    ("value_not_numeric.mtx", 4, "value 'abc' is not a number"),
];

#[test]
fn every_bad_file_names_file_line_and_problem() {
    let dir = project_file("bad");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = BAD.iter().map(|b| b.0.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "every file in matrices/bad has an expected error"
    );

    for &(name, want_line, want_msg) in BAD {
        let p = dir.join(name);
        let e = io::read_matrix_market::<f64>(&p).expect_err(name);
        match &e {
            Error::MatrixMarket {
                path,
                line,
                message,
            } => {
                assert!(path.ends_with(name), "{name}: path {path}");
                assert_eq!(*line, want_line, "{name}: {e}");
                assert!(message.contains(want_msg), "{name}: {message}");
            }
            other => panic!("{name}: expected a Matrix Market error, got {other:?}"),
        }
        assert!(
            e.to_string()
                .starts_with(&format!("{}:{want_line}: ", p.display())),
            "{e}"
        );
        // The same in single precision.
        let e32 = io::read_matrix_market::<f32>(&p).expect_err(name);
        assert_eq!(e32.to_string(), e.to_string());
    }
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let e = io::read_matrix_market::<f64>("no/such/file.mtx").unwrap_err();
    assert!(matches!(e, Error::Io { path: Some(_), .. }), "{e:?}");
    assert!(e.to_string().starts_with("no/such/file.mtx: "), "{e}");
    let e = io::read_matrix_market::<f64>(project_file("small")).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}

#[test]
fn overlong_lines_are_bounded() {
    let head = "%%MatrixMarket matrix coordinate real general\n";
    // A data line over the limit is an error ...
    let long = format!(
        "{head}1 1 1\n1 1 1{}\n",
        "0".repeat(io::MAX_LINE_BYTES + 10)
    );
    let e = io::read_matrix_market_from::<f64, _>(long.as_bytes(), "long.mtx").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "long.mtx:3: line is longer than {} bytes",
            io::MAX_LINE_BYTES
        )
    );
    // ... a long comment is skipped.
    let long = format!(
        "{head}%{}\n1 1 1\n1 1 1\n",
        "x".repeat(io::MAX_LINE_BYTES + 10)
    );
    let m: CsrMatrix<f64> = io::read_matrix_market_from(long.as_bytes(), "c.mtx").unwrap();
    assert_eq!(m.nnz(), 1);
}

/// The memory budget refuses what the size line needs before allocating it, and entries as
/// they outgrow it; errors name the file, line and both figures.
#[test]
fn memory_budget_refuses_with_the_figures() {
    use io::ReadOptions;
    // The issue's 67-byte file: 10^9 rows × 1 column × 1 entry needs 8 GB of row pointers and
    // work array. Under a 1 GiB budget it is refused from the size line, at once.
    let text = "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 1\n";
    assert_eq!(text.len(), 67);
    let opts = ReadOptions {
        max_bytes: 1 << 30,
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let e = io::read_matrix_market_from_with::<f64, _>(text.as_bytes(), "big.mtx", &opts)
        .unwrap_err()
        .to_string();
    eprintln!("{e} ({:.6} s)", t.elapsed().as_secs_f64());
    assert!(
        e.starts_with("big.mtx:2: the size line declares 1000000000 rows"),
        "{e}"
    );
    assert!(
        e.contains("8.00 GB (8000000004 bytes)")
            && e.contains("memory budget of 1.07 GB (1073741824 bytes)"),
        "{e}"
    );
    assert!(
        e.contains("ReadOptions::max_bytes") && e.contains("SEGSPARSE_MTX_MAX_BYTES"),
        "{e}"
    );

    // Entries are counted as they are read, 12 + 2·sizeof(T) bytes each (28 for f64, 20 for
    // f32): 100 rows fix 804 bytes, so a 2000-byte budget holds 42 f64 or 59 f32 entries.
    let mut text = String::from("%%MatrixMarket matrix coordinate real general\n100 100 100\n");
    for i in 1..=100 {
        text.push_str(&format!("{i} {i} 1.0\n"));
    }
    let opts = ReadOptions {
        max_bytes: 2000,
        ..Default::default()
    };
    let e = io::read_matrix_market_from_with::<f64, _>(text.as_bytes(), "e.mtx", &opts)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("e.mtx:45: 43 entries stored so far"), "{e}");
    let e = io::read_matrix_market_from_with::<f32, _>(text.as_bytes(), "e.mtx", &opts)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("e.mtx:62: 60 entries stored so far"), "{e}");
    // Symmetric expansion counts both entries: the 22nd off-diagonal line makes 44 > 42.
    let mut sym = String::from("%%MatrixMarket matrix coordinate real symmetric\n100 100 99\n");
    for i in 2..=100 {
        sym.push_str(&format!("{i} 1 1.0\n"));
    }
    let e = io::read_matrix_market_from_with::<f64, _>(sym.as_bytes(), "s.mtx", &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("s.mtx:24: 44 entries stored so far (after symmetric expansion)"),
        "{e}"
    );
    // The same file reads with the default budget.
    let m: CsrMatrix<f64> = io::read_matrix_market_from(text.as_bytes(), "e.mtx").unwrap();
    assert_eq!(m.nnz(), 100);

    // A vector: the declared length is checked up front.
    let v = "%%MatrixMarket matrix coordinate real general\n4000000000 1 1\n1 1 1.0\n";
    let e = io::read_vector_from_with::<f64, _>(
        v.as_bytes(),
        "v.mtx",
        &ReadOptions {
            max_bytes: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("v.mtx:2: the size line declares a vector of 4000000000 values"),
        "{e}"
    );
    // The default budget is positive and documented as overridable.
    assert!(ReadOptions::default().max_bytes >= 1 << 20);
}

/// Row pointers of a mostly-empty matrix are built in one pass at memory speed (the issue: a
/// billion declared rows took 19 s). Here 5·10^7 rows with three entries; the time is printed
/// for the record, not asserted (timings are not tests).
#[test]
fn mostly_empty_matrices_read_in_one_pass() {
    let n = 50_000_000u32;
    let text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} 3 3\n2 1 1.0\n2 3 -1\n{n} 2 7\n"
    );
    // 5·10^7 − 3 certainly empty rows are beyond the default ReadOptions::max_empty_rows.
    let e = io::read_matrix_market_from::<f32, _>(text.as_bytes(), "sparse.mtx")
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 49999997 rows are empty"), "{e}");
    let opts = io::ReadOptions {
        max_empty_rows: u64::MAX,
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let m: CsrMatrix<f32> =
        io::read_matrix_market_from_with(text.as_bytes(), "sparse.mtx", &opts).unwrap();
    eprintln!("{n} rows, 3 entries: {:.3} s", t.elapsed().as_secs_f64());
    assert_eq!((m.nrows(), m.ncols(), m.nnz()), (n as usize, 3, 3));
    let rp = m.row_ptr();
    assert_eq!(&rp[..4], &[0, 0, 2, 2]);
    assert_eq!(rp[n as usize - 1], 2);
    assert_eq!(rp[n as usize], 3);
    assert_eq!(m.col_idx(), &[0, 2, 1]);
    // Out of row order: the counting sort gives the same matrix.
    let text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} 3 3\n{n} 2 7\n2 3 -1\n2 1 1.0\n"
    );
    let m2: CsrMatrix<f32> =
        io::read_matrix_market_from_with(text.as_bytes(), "sparse.mtx", &opts).unwrap();
    assert_eq!(m2.row_ptr(), m.row_ptr());
    assert_eq!(m2.col_idx(), m.col_idx());
    assert_eq!(m2.values(), m.values());
}

/// Feeds the readers random mutations and truncations of valid files: they must return (never
/// panic), an `Ok` matrix must satisfy the CSR invariants, and an error must be a Matrix Market
/// error naming the input and a line inside it (or just past its end).
#[test]
fn random_mutations_never_panic() {
    let mut bases: Vec<Vec<u8>> = Vec::new();
    for name in [
        "one.mtx",
        "array.mtx",
        "array_skew.mtx",
        "array_symmetric.mtx",
        "empty_rows.mtx",
        "pattern.mtx",
        "skew.mtx",
        "symmetric.mtx",
        "integer.mtx",
        "vector_coordinate.mtx",
        "vector_array.mtx",
    ] {
        bases.push(std::fs::read(small(name)).unwrap());
    }
    let mut bcs = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(project_file("bcsstk01.mtx.gz")).unwrap(),
        ),
        &mut bcs,
    )
    .unwrap();
    bases.push(bcs);

    const ALPHABET: &[u8] = b"0123456789 -+.eEdD\n\r\t%naNiIf\x00\xff";
    const TOKENS: &[&[u8]] = &[
        b"0",
        b"-1",
        b"4294967296",
        b"99999999999999999999",
        b"nan",
        b"-inf",
        b"1e400",
        b"%%MatrixMarket",
        b"symmetric",
        b"skew-symmetric",
        b"pattern",
        b"array",
        b"integer",
        b"complex",
        b"hermitian",
        b"\n",
        b"  ",
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(0x5e6_5a25e);
    let mut oks = 0usize;
    for iter in 0..6000 {
        let base = &bases[iter % bases.len()];
        let mut v = base.clone();
        for _ in 0..rng.gen_range(1..=4) {
            let len = v.len().max(1);
            let at = rng.gen_range(0..len).min(v.len());
            match rng.gen_range(0..7) {
                0 => v.truncate(at),
                1 if !v.is_empty() => {
                    let i = at.min(v.len() - 1);
                    v[i] = ALPHABET[rng.gen_range(0..ALPHABET.len())];
                }
                2 => {
                    let end = (at + rng.gen_range(1..8)).min(v.len());
                    v.drain(at..end);
                }
                3 => {
                    for _ in 0..rng.gen_range(1..4) {
                        v.insert(at, ALPHABET[rng.gen_range(0..ALPHABET.len())]);
                    }
                }
                4 | 5 => {
                    // Duplicate or delete the line containing `at`.
                    let s = v[..at]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |p| p + 1);
                    let e = v[at..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(v.len(), |p| at + p + 1);
                    let line: Vec<u8> = v[s..e].to_vec();
                    if rng.gen_bool(0.5) {
                        v.splice(s..s, line);
                    } else {
                        v.drain(s..e);
                    }
                }
                _ => {
                    let t = TOKENS[rng.gen_range(0..TOKENS.len())];
                    v.splice(at..at, t.iter().copied());
                }
            }
        }
        let nlines = v.split(|&b| b == b'\n').count();
        let check = |r: Result<Option<CsrMatrix<f64>>, Error>| match r {
            Ok(Some(m)) => {
                let (rp, ci, va) = m.clone().into_parts();
                CsrMatrix::try_from_parts(m.nrows(), m.ncols(), rp, ci, va)
                    .expect("a matrix from the reader satisfies the CSR invariants");
                assert!(m.has_sorted_indices());
                true
            }
            Ok(None) => true,
            Err(Error::MatrixMarket { path, line, .. }) => {
                assert_eq!(path, "fuzz.mtx");
                assert!(line <= nlines + 1, "line {line} of {nlines}");
                false
            }
            Err(e) => panic!("unexpected error kind: {e:?}"),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let ok = check(io::read_matrix_market_from::<f64, _>(&v[..], "fuzz.mtx").map(Some));
            let r32 = io::read_matrix_market_from::<f32, _>(&v[..], "fuzz.mtx");
            assert_eq!(r32.is_ok(), ok, "f32 and f64 agree on validity");
            check(io::read_vector_from::<f64, _>(&v[..], "fuzz.mtx").map(|_| None));
            check(io::read_header_from(&v[..], "fuzz.mtx").map(|_| None));
            ok
        }));
        match outcome {
            Ok(ok) => oks += ok as usize,
            Err(_) => panic!(
                "the reader panicked on mutation {iter}:\n{}",
                String::from_utf8_lossy(&v)
            ),
        }
    }
    // The mutations must exercise both outcomes.
    assert!(
        oks > 300 && oks < 5700,
        "{oks} of 6000 mutated files were valid"
    );

    // Corrupted gzip streams: errors, no panic.
    let gz = std::fs::read(project_file("nos4.mtx.gz")).unwrap();
    for iter in 0..200 {
        let mut v = gz.clone();
        let at = rng.gen_range(0..v.len());
        if iter % 2 == 0 {
            v[at] ^= 1 << rng.gen_range(0..8);
        } else {
            v.truncate(at);
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            // Compression is detected from the bytes; the stream may break anywhere.
            let _ = io::read_matrix_market_from::<f64, _>(&v[..], "fuzz.mtx.gz");
            let rd = BufReader::new(flate2::read::MultiGzDecoder::new(&v[..]));
            let _ = io::read_matrix_market_from::<f64, _>(rd, "fuzz.mtx.gz");
        }));
        assert!(r.is_ok(), "panic on corrupted gzip {iter}");
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("segsparse-io-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn bits64(m: &CsrMatrix<f64>) -> Vec<u64> {
    m.values().iter().map(|v| v.to_bits()).collect()
}

fn bits32(m: &CsrMatrix<f32>) -> Vec<u32> {
    m.values().iter().map(|v| v.to_bits()).collect()
}

/// A random matrix whose values include the awkward ones: signed zero, subnormals, extremes,
/// non-finite, and full-precision random values.
fn awkward<T: segsparse::Scalar>(special: &[T], seed: u64) -> CsrMatrix<T> {
    let mut m: CsrMatrix<T> = generate::random(200, 7, seed).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (k, v) in m.values_mut().iter_mut().enumerate() {
        *v = if k < special.len() {
            special[k]
        } else {
            T::of_f64(rng.gen_range(-1.0..1.0) * 10f64.powi(rng.gen_range(-40..40)))
        };
    }
    m
}

#[test]
fn write_then_read_is_bit_exact_in_f64_and_f32() {
    let s64 = [
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE / 3.0,
        5e-324,
        f64::MAX,
        -f64::MAX,
        1e-300,
        1e300,
        1.0 / 3.0,
        std::f64::consts::PI,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        123456789012345680.0,
        1e15,
        1e16,
        1e-5,
        9.999999999999999e-6,
    ];
    let a = awkward::<f64>(&s64, 1);
    let s32 = [
        0.0f32,
        -0.0,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        0.1,
        1.0 / 3.0,
        f32::NAN,
        f32::NEG_INFINITY,
        16777217.0,
    ];
    let b = awkward::<f32>(&s32, 2);
    for name in ["rt.mtx", "rt.mtx.gz"] {
        let p = tmp(name);
        io::write_matrix_market(&p, &a).unwrap();
        let r: CsrMatrix<f64> = io::read_matrix_market(&p).unwrap();
        assert_eq!(r.shape(), a.shape());
        assert_eq!((r.row_ptr(), r.col_idx()), (a.row_ptr(), a.col_idx()));
        assert_eq!(bits64(&r), bits64(&a), "{name}");
        if name.ends_with(".gz") {
            let raw = std::fs::read(&p).unwrap();
            assert_eq!(&raw[..2], &[0x1f, 0x8b], "written gzip-compressed");
        }

        io::write_matrix_market(&p, &b).unwrap();
        let r: CsrMatrix<f32> = io::read_matrix_market(&p).unwrap();
        assert_eq!((r.row_ptr(), r.col_idx()), (b.row_ptr(), b.col_idx()));
        assert_eq!(bits32(&r), bits32(&b), "{name} f32");
        let _ = std::fs::remove_file(&p);
    }
    // In memory, and the header the writer emits.
    let mut out = Vec::new();
    io::write_matrix_market_to(&mut out, &read64("skew.mtx")).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.starts_with("%%MatrixMarket matrix coordinate real general\n"),
        "{text}"
    );
    assert!(text.contains("\n3 3 4\n1 2 -1.5\n"), "{text}");
    let back: CsrMatrix<f64> = io::read_matrix_market_from(&out[..], "mem").unwrap();
    assert_eq!(back, read64("skew.mtx"));
    // Readers detect gzip by its magic bytes, from a file of any name or from memory.
    let gz = std::fs::read(small("symmetric_gz.mtx.gz")).unwrap();
    let m: CsrMatrix<f64> = io::read_matrix_market_from(&gz[..], "mem.gz").unwrap();
    assert_eq!(m, read64("symmetric.mtx"));
    // Empty shapes.
    for m in [
        CsrMatrix::<f64>::zeros(0, 0),
        CsrMatrix::zeros(3, 0),
        CsrMatrix::zeros(2, 5),
    ] {
        let mut out = Vec::new();
        io::write_matrix_market_to(&mut out, &m).unwrap();
        assert_eq!(
            io::read_matrix_market_from::<f64, _>(&out[..], "e").unwrap(),
            m
        );
    }
}

#[test]
fn vectors_round_trip_bit_exact() {
    let v: Vec<f64> = (0..1000)
        .map(|i| ((i as f64) * 0.7).sin() * 10f64.powi(i % 60 - 30))
        .chain([0.0, -0.0, f64::NAN, 5e-324])
        .collect();
    let p = tmp("v.mtx.gz");
    io::write_vector(&p, &v).unwrap();
    let r: Vec<f64> = io::read_vector(&p).unwrap();
    assert_eq!(
        r.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    let mut out = Vec::new();
    io::write_vector_to(&mut out, &v32).unwrap();
    let r: Vec<f32> = io::read_vector_from(&out[..], "v").unwrap();
    assert_eq!(
        r.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        v32.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_file(&p);
    let e = io::write_vector(tmp("no-such-dir/v.mtx"), &v).unwrap_err();
    assert!(matches!(e, Error::Io { path: Some(_), .. }), "{e:?}");
}

// ---------------------------------------------------------------------------------------------
// sprs as a reference
// ---------------------------------------------------------------------------------------------

fn gunzip(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap()),
        &mut out,
    )
    .unwrap();
    out
}

#[test]
fn agrees_with_sprs_both_ways() {
    for name in [
        "west0479.mtx.gz",
        "bcsstk01.mtx.gz",
        "nos4.mtx.gz",
        "1138_bus.mtx.gz",
        "plskz362.mtx.gz",
        "lp_ship04l.mtx.gz",
    ] {
        let p = project_file(name);
        let ours: CsrMatrix<f64> = io::read_matrix_market(&p).unwrap();
        let text = gunzip(&p);
        let tri: sprs::TriMat<f64> =
            sprs::io::read_matrix_market_from_bufread(&mut &text[..]).unwrap();
        let theirs: sprs::CsMat<f64> = tri.to_csr();
        assert_eq!(ours.to_sprs(), theirs, "{name}");
        assert_eq!(CsrMatrix::try_from_sprs(&theirs).unwrap(), ours, "{name}");

        // Our writer → sprs's reader, sprs's writer → our reader.
        let mut out = Vec::new();
        io::write_matrix_market_to(&mut out, &ours).unwrap();
        let tri: sprs::TriMat<f64> =
            sprs::io::read_matrix_market_from_bufread(&mut &out[..]).unwrap();
        assert_eq!(
            tri.to_csr::<usize>(),
            theirs,
            "{name}: sprs reads what we write"
        );
        let p2 = tmp(&format!("sprs-{name}.mtx"));
        sprs::io::write_matrix_market(&p2, &theirs).unwrap();
        let back: CsrMatrix<f64> = io::read_matrix_market(&p2).unwrap();
        assert_eq!(back, ours, "{name}: we read what sprs writes");
        let _ = std::fs::remove_file(&p2);
    }
}

#[test]
fn raefsky2_has_the_published_shape() {
    let a: CsrMatrix<f64> = io::read_matrix_market(project_file("raefsky2.mtx.gz")).unwrap();
    assert_eq!(a.shape(), (3242, 3242));
    assert_eq!(a.nnz(), 294_276);
    assert!(a.has_sorted_indices());
    assert!(!a.has_non_finite());
    let s = a.row_stats();
    assert_eq!((s.min, s.max, s.empty_rows), (24, 108, 0));
    let a32: CsrMatrix<f32> = io::read_matrix_market(project_file("raefsky2.mtx.gz")).unwrap();
    assert_eq!((a32.row_ptr(), a32.col_idx()), (a.row_ptr(), a.col_idx()));
    // Through `load`, which dispatches files and specs.
    let l: CsrMatrix<f64> =
        segsparse::load(project_file("raefsky2.mtx.gz").to_str().unwrap(), 0).unwrap();
    assert_eq!(l, a);
    // Small SuiteSparse files with each symmetry and field.
    let k: CsrMatrix<f64> = io::read_matrix_market(project_file("karate.mtx.gz")).unwrap();
    assert_eq!((k.shape(), k.nnz()), ((34, 34), 156));
    assert!(k.is_symmetric() && k.values().iter().all(|&v| v == 1.0));
    let s: CsrMatrix<f64> = io::read_matrix_market(project_file("plskz362.mtx.gz")).unwrap();
    assert_eq!(s.nnz(), 1760);
    let t = s.transpose();
    assert!(
        s.values().iter().zip(t.values()).all(|(a, b)| *a == -*b) && s.row_ptr() == t.row_ptr()
    );
    let r: CsrMatrix<f32> = io::read_matrix_market(project_file("ash219.mtx.gz")).unwrap();
    assert_eq!((r.shape(), r.nnz()), ((219, 85), 438));
    assert!(r.values().iter().all(|&v| v == 1.0) && r.row_stats().max == 2);
    let g: CsrMatrix<f64> = io::read_matrix_market(project_file("gr_30_30.mtx.gz")).unwrap();
    assert_eq!((g.nnz(), g.is_symmetric()), (7744, true));
    let e = io::read_matrix_market::<f64>(project_file("young1c.mtx.gz")).unwrap_err();
    assert!(
        e.to_string()
            .contains("holds complex values: read it as a complex matrix"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

#[test]
fn poisson_and_structured_generators() {
    for n in [1usize, 2, 3, 17] {
        let a: CsrMatrix<f64> = generate::from_spec(&format!("poisson2d:{n}"), 0).unwrap();
        assert_eq!(a.shape(), (n * n, n * n));
        assert_eq!(a.nnz(), 5 * n * n - 4 * n, "poisson2d:{n}");
        assert!(a.is_symmetric() && a.has_sorted_indices());
        assert!(a.diagonal().iter().all(|&d| d == 4.0));
        // Weakly diagonally dominant with -1 off the diagonal (SPD for the Dirichlet Laplacian).
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            let off: f64 = c
                .iter()
                .zip(v)
                .filter(|(c, _)| **c as usize != i)
                .map(|(_, v)| *v)
                .sum();
            assert!(off >= -4.0 && v.iter().all(|&x| x == 4.0 || x == -1.0));
        }
        let b: CsrMatrix<f32> = generate::poisson3d(n).unwrap();
        assert_eq!(b.shape(), (n * n * n, n * n * n));
        assert_eq!(b.nnz(), 7 * n * n * n - 6 * n * n, "poisson3d:{n}");
        assert!(b.is_symmetric() && b.diagonal().iter().all(|&d| d == 6.0));
        let t: CsrMatrix<f64> = generate::tridiag(n).unwrap();
        assert_eq!(t.nnz(), 3 * n - 2);
        assert!(t.is_symmetric());
    }
    // poisson2d:3 exactly.
    let a: CsrMatrix<f64> = generate::poisson2d(2).unwrap();
    assert_eq!(
        a.to_dense(),
        vec![
            vec![4., -1., -1., 0.],
            vec![-1., 4., 0., -1.],
            vec![-1., 0., 4., -1.],
            vec![0., -1., -1., 4.]
        ]
    );
    let z: CsrMatrix<f64> = generate::poisson2d(0).unwrap();
    assert_eq!((z.shape(), z.nnz()), ((0, 0), 0));
    let d: CsrMatrix<f64> = generate::from_spec("diag:100", 3).unwrap();
    assert_eq!(d.nnz(), 100);
    assert!(d.values().iter().all(|&v| (1.0..2.0).contains(&v)));
    let d: CsrMatrix<f64> = generate::from_spec("dense:40", 3).unwrap();
    assert_eq!(d.nnz(), 1600);
    // Sizes beyond u32 are refused before allocating.
    let e = generate::from_spec::<f64>("poisson2d:70000", 0).unwrap_err();
    assert!(e.to_string().contains("32-bit index limit"), "{e}");
    let e = generate::from_spec::<f64>("poisson3d:2000", 0).unwrap_err();
    assert!(e.to_string().contains("32-bit index limit"), "{e}");
}

#[test]
fn random_generators_are_deterministic_with_distinct_columns() {
    let a: CsrMatrix<f64> = generate::from_spec("random:20000:9", 42).unwrap();
    assert_eq!((a.shape(), a.nnz()), ((20000, 20000), 180_000));
    let s = a.row_stats();
    assert_eq!((s.min, s.max), (9, 9));
    assert!(
        a.has_sorted_indices(),
        "distinct, sorted columns in every row"
    );
    assert!(a.values().iter().all(|&v| (-1.0..1.0).contains(&v)));
    assert_eq!(a, generate::from_spec("random:20000:9", 42).unwrap());
    assert_ne!(a, generate::from_spec("random:20000:9", 43).unwrap());
    // Independent of the number of threads (chunks have their own streams).
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b: CsrMatrix<f64> = one.install(|| generate::from_spec("random:20000:9", 42).unwrap());
    assert_eq!(a, b);
    // Columns are spread over the whole range.
    let hist = a.col_idx().iter().fold([0usize; 4], |mut h, &c| {
        h[c as usize * 4 / 20000] += 1;
        h
    });
    assert!(
        hist.iter().all(|&h| (40_000..50_000).contains(&h)),
        "{hist:?}"
    );
    // Dense rows (K close to N) use the complement and are still exact.
    for (n, k) in [(10, 10), (10, 9), (10, 0), (1, 1), (33, 20)] {
        let m: CsrMatrix<f32> = generate::random(n, k, 7).unwrap();
        assert!(m.has_sorted_indices());
        assert_eq!(m.nnz(), n * k);
    }
    let e = generate::random::<f64>(5, 6, 0).unwrap_err();
    assert!(e.to_string().contains("cannot hold 6 distinct"), "{e}");

    let p: CsrMatrix<f64> = generate::from_spec("powerlaw:50000:2.2", 5).unwrap();
    let s = p.row_stats();
    assert!((8.0..16.0).contains(&s.mean), "powerlaw mean {}", s.mean);
    assert!(
        s.min >= 1 && s.max > 20 * s.mean as usize,
        "heavy tail: {s:?}"
    );
    assert!(p.has_sorted_indices());
    assert_eq!(
        p,
        one.install(|| generate::from_spec("powerlaw:50000:2.2", 5).unwrap())
    );
    assert_ne!(p, generate::from_spec("powerlaw:50000:2.2", 6).unwrap());
    assert!((generate::powerlaw_mean(50000, 2.2) - 12.0).abs() < 1e-6);
    let heavy: CsrMatrix<f64> = generate::powerlaw(2000, 1.5, 1).unwrap();
    assert!(heavy.row_stats().max <= 2000);
    let e = generate::from_spec::<f64>("powerlaw:10:1", 0).unwrap_err();
    assert!(e.to_string().contains("greater than 1"), "{e}");
}

#[test]
fn specs_are_recognized_and_bad_ones_list_the_valid_forms() {
    for s in [
        "poisson2d:10",
        "Poisson3D:3",
        "random:10:2",
        "powerlaw:100:2",
        "tridiag:5",
        "diag:1",
        "dense:2",
    ] {
        assert!(generate::is_spec(s), "{s}");
        assert!(generate::from_spec::<f64>(s, 0).is_ok(), "{s}");
    }
    for s in [
        "matrices/raefsky2.mtx.gz",
        "poisson2d",
        "foo:3",
        "",
        "C:/m.mtx",
    ] {
        assert!(!generate::is_spec(s), "{s}");
    }
    for s in [
        "poisson2d:x",
        "random:10",
        "random:10:2:3",
        "powerlaw:10:abc",
        "poisson2d:-1",
        "foo:1",
    ] {
        let e = generate::from_spec::<f64>(s, 0).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{s}: {e:?}");
        assert!(
            e.to_string().contains(&format!("bad matrix spec '{s}'")),
            "{e}"
        );
        assert!(e.to_string().contains("poisson2d:N, poisson3d:N"), "{e}");
    }
    // `load` generates specs and reads files.
    let a: CsrMatrix<f64> = segsparse::load("poisson2d:4", 0).unwrap();
    assert_eq!(a.nrows(), 16);
    let e = segsparse::load::<f64>("nothing-here.mtx", 0).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    let e = segsparse::load::<f64>("random:5", 0).unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
}

/// CPU seconds (user + system) used by this process so far, from `/proc/self/stat` (0 elsewhere):
/// on a shared machine the wall clock alone says little.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let after = &stat[stat.rfind(')').map_or(0, |p| p + 2)..];
    let f: Vec<f64> = after.split(' ').map(|x| x.parse().unwrap_or(0.0)).collect();
    (f[11] + f[12]) / 100.0
}

/// Timing of the big paths (run with `cargo test --release --test all io::speed -- --ignored --nocapture`):
/// generation of ~10^7–10^8-entry matrices and the reader's throughput on raefsky2's text.
#[test]
#[ignore = "timing, large allocations"]
fn speed_of_generation_and_reading() {
    let threads = rayon::current_num_threads();
    for spec in [
        "poisson2d:3000",
        "poisson3d:200",
        "random:2000000:16",
        "powerlaw:2000000:2.2",
    ] {
        let (t, c) = (std::time::Instant::now(), cpu_seconds());
        let a: CsrMatrix<f64> = generate::from_spec(spec, 1).unwrap();
        let (s, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        println!(
            "{spec:>22}: {:>11} entries in {s:.3} s wall, {cpu:.2} CPU-s ({:.0} M entries per CPU-s, {threads} threads)",
            a.nnz(),
            a.nnz() as f64 / cpu / 1e6
        );
    }
    let text = gunzip(&project_file("raefsky2.mtx.gz"));
    let (t, c) = (std::time::Instant::now(), cpu_seconds());
    let reps = 5;
    for _ in 0..reps {
        let a: CsrMatrix<f64> = io::read_matrix_market_from(&text[..], "raefsky2").unwrap();
        assert_eq!(a.nnz(), 294_276);
    }
    let s = t.elapsed().as_secs_f64() / reps as f64;
    let cpu = (cpu_seconds() - c) / reps as f64;
    println!(
        "read raefsky2 text ({:.1} MB): {s:.3} s wall, {cpu:.3} CPU-s: {:.0} MB and {:.1} M entries per CPU-s",
        text.len() as f64 / 1e6,
        text.len() as f64 / cpu / 1e6,
        294_276.0 / cpu / 1e6
    );
    let t = std::time::Instant::now();
    let a: CsrMatrix<f64> = io::read_matrix_market(project_file("raefsky2.mtx.gz")).unwrap();
    println!("read raefsky2.mtx.gz: {:.3} s", t.elapsed().as_secs_f64());
    let t = std::time::Instant::now();
    let mut out = Vec::new();
    io::write_matrix_market_to(&mut out, &a).unwrap();
    println!(
        "write raefsky2: {:.3} s ({:.1} MB)",
        t.elapsed().as_secs_f64(),
        out.len() as f64 / 1e6
    );
}

/// Issue 23: the 67-byte file (10^9 rows, one entry) and its square sibling are refused from the
/// size line under the *default* options, whatever the machine's memory: almost every row is
/// certainly empty. A mostly-empty file within the limit still reads, and the limit counts the
/// symmetric expansion.
#[test]
fn certainly_empty_rows_are_bounded_by_default() {
    for (text, len) in [
        (
            "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 1\n",
            67,
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1\n1 1 1\n",
            76,
        ),
    ] {
        assert_eq!(text.len(), len);
        let t = std::time::Instant::now();
        let e = io::read_matrix_market_from::<f64, _>(text.as_bytes(), "big.mtx")
            .unwrap_err()
            .to_string();
        let secs = t.elapsed().as_secs_f64();
        assert!(
            e.starts_with("big.mtx:2: the size line declares 1000000000 rows but only 1 entry")
                && e.contains("at least 999999999 rows are empty")
                && e.contains("8.00 GB (8000000004 bytes)")
                && e.contains("max_empty_rows"),
            "{e}"
        );
        assert!(secs < 0.1, "{secs} s");
    }
    let limit = io::DEFAULT_MAX_EMPTY_ROWS;
    // Exactly `limit` certainly empty rows: accepted (and read).
    let text = format!(
        "%%MatrixMarket matrix coordinate real general\n{} 1 1\n1 1 1\n",
        limit + 1
    );
    let m: CsrMatrix<f32> = io::read_matrix_market_from(text.as_bytes(), "ok.mtx").unwrap();
    assert_eq!(m.nrows() as u64, limit + 1);
    // One more: refused.
    let text = format!(
        "%%MatrixMarket matrix coordinate real general\n{} 1 1\n1 1 1\n",
        limit + 2
    );
    assert!(io::read_matrix_market_from::<f32, _>(text.as_bytes(), "no.mtx").is_err());
    // A symmetric file's entries reach two rows each.
    let text = format!(
        "%%MatrixMarket matrix coordinate real symmetric\n{0} {0} 1\n2 1 1\n",
        limit + 2
    );
    assert!(io::read_matrix_market_from::<f32, _>(text.as_bytes(), "sym.mtx").is_ok());
}
