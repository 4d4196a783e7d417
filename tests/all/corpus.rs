//! Reads the whole SuiteSparse test corpus (`../shared/matrices`, 41 files) and compares every
//! matrix with the counts in its `CATALOG.md`, and every real one entry by entry with `sprs`.
//!
//! The corpus is found through `SEGSPARSE_DATA`, else `../shared/matrices` relative to the
//! manifest directory, else relative to the current directory; without it the test prints a
//! notice and passes (the files under `matrices/` are tested in `tests/all/io.rs` regardless).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use segsparse::io::{self, MmField, MmSymmetry};
use segsparse::CsrMatrix;

fn corpus_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("SEGSPARSE_DATA") {
        return Some(PathBuf::from(d));
    }
    let candidates = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/matrices"),
        PathBuf::from("../shared/matrices"),
    ];
    candidates
        .into_iter()
        .find(|p| p.join("CATALOG.md").exists())
}

/// One row of the catalog's first table.
#[derive(Debug)]
struct Entry {
    rows: u64,
    cols: u64,
    /// Entries in the file (one triangle for symmetric files).
    stored: u64,
    /// Entries after symmetric expansion, explicit zeros included: what the CSR holds.
    full: usize,
    /// Explicit zeros among `full`.
    zeros: usize,
    /// "real general", "pattern symmetric", ...
    header: String,
}

/// Parses the table whose header starts `| name | group | rows | cols | stored | full |`.
fn parse_catalog(text: &str) -> BTreeMap<String, Entry> {
    let mut lines = text.lines();
    let head = lines
        .by_ref()
        .find(|l| l.starts_with("| name | group | rows | cols | stored | full |"))
        .expect("CATALOG.md has the matrix table");
    let cols: Vec<&str> = head.split('|').map(str::trim).collect();
    let at = |name: &str| {
        cols.iter()
            .position(|c| c.starts_with(name))
            .unwrap_or_else(|| panic!("CATALOG.md table has a '{name}' column"))
    };
    let (c_name, c_rows, c_cols, c_stored, c_full, c_zeros, c_hdr) = (
        at("name"),
        at("rows"),
        at("cols"),
        at("stored"),
        at("full"),
        at("zeros"),
        at("MM header"),
    );
    let mut out = BTreeMap::new();
    for l in lines.skip(1) {
        if !l.starts_with('|') {
            break;
        }
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        let num = |i: usize| -> u64 {
            f[i].parse()
                .unwrap_or_else(|_| panic!("CATALOG.md: '{}' in row {l}", f[i]))
        };
        out.insert(
            f[c_name].to_string(),
            Entry {
                rows: num(c_rows),
                cols: num(c_cols),
                stored: num(c_stored),
                full: num(c_full) as usize,
                zeros: num(c_zeros) as usize,
                header: f[c_hdr].to_string(),
            },
        );
    }
    out
}

#[test]
fn whole_corpus_matches_catalog_and_sprs() {
    let Some(dir) = corpus_dir() else {
        println!("skipped: no corpus (set SEGSPARSE_DATA or provide ../shared/matrices)");
        return;
    };
    let catalog = parse_catalog(&std::fs::read_to_string(dir.join("CATALOG.md")).unwrap());
    assert!(catalog.len() >= 40, "{} catalog rows", catalog.len());
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.ends_with(".mtx.gz"))
        .collect();
    files.sort();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.trim_end_matches(".mtx.gz"))
        .collect();
    assert_eq!(
        names,
        catalog.keys().map(String::as_str).collect::<Vec<_>>(),
        "the folder holds exactly the catalogued matrices"
    );

    let t0 = std::time::Instant::now();
    let mut total = 0usize;
    for (name, want) in &catalog {
        let path = dir.join(format!("{name}.mtx.gz"));
        let h = io::read_header(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{} {}", h.field, h.symmetry), want.header, "{name}");
        assert_eq!(
            (h.nrows, h.ncols, h.entries),
            (want.rows, want.cols, want.stored),
            "{name}"
        );
        if h.field == MmField::Complex {
            // A real read names the complex types; a complex read holds the catalogued shape.
            let e = io::read_matrix_market::<f64>(&path).unwrap_err();
            assert!(e.to_string().contains("Complex<f64>"), "{name}: {e}");
            let z: CsrMatrix<num_complex::Complex<f64>> =
                io::read_matrix_market(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                (z.nrows() as u64, z.ncols() as u64),
                (want.rows, want.cols),
                "{name}"
            );
            if h.symmetry == MmSymmetry::General {
                assert_eq!(z.nnz() as u64, want.stored, "{name}");
            }
            continue;
        }
        let a: CsrMatrix<f64> = io::read_matrix_market(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (
                a.nrows() as u64,
                a.ncols() as u64,
                a.nnz(),
                a.values().iter().filter(|v| **v == 0.0).count()
            ),
            (want.rows, want.cols, want.full, want.zeros),
            "{name}: rows, cols, full entries, explicit zeros"
        );
        assert!(a.has_sorted_indices(), "{name}");
        assert!(!a.has_non_finite(), "{name}");
        match h.symmetry {
            MmSymmetry::Symmetric => assert!(a.is_symmetric(), "{name}"),
            MmSymmetry::SkewSymmetric => {
                let t = a.transpose();
                assert!(
                    t.col_idx() == a.col_idx()
                        && a.values().iter().zip(t.values()).all(|(x, y)| *x == -*y),
                    "{name} is skew"
                );
            }
            _ => {}
        }
        total += a.nnz();

        // Entry-by-entry reference: sprs's reader, for the real files it accepts.
        if h.field == MmField::Real {
            let mut text = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()),
                &mut text,
            )
            .unwrap();
            let tri: sprs::TriMat<f64> =
                sprs::io::read_matrix_market_from_bufread(&mut &text[..]).unwrap();
            assert!(a.to_sprs() == tri.to_csr(), "{name} differs from sprs");
        }
    }
    println!(
        "corpus: {} matrices, {} entries read and checked in {:.2?}",
        catalog.len(),
        total,
        t0.elapsed()
    );
}
