//! Result rows and their three output formats (table, JSON lines, CSV).

use std::io::{self, Write};

use segsparse::{CsrMatrix, RowStats};

/// One line of results: a (matrix, implementation, precision) triple, measured or quoted.
#[derive(Clone, Debug)]
pub struct Row {
    /// The matrix as named on the command line.
    pub matrix: String,
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Implementation name.
    pub implementation: String,
    /// `f32`, `f64` (or `n/a` for a quoted figure of unknown precision).
    pub precision: String,
    /// `cpu` or `gpu`.
    pub backend: String,
    /// Median microseconds per product.
    pub median_us: f64,
    /// 2·nnz / t in GFLOP/s.
    pub gflops: f64,
    /// Bytes as in DESIGN.md / t, in GB/s (NaN when unknown).
    pub gbs: f64,
    /// Products per second.
    pub spmv_per_s: f64,
    /// Max relative error against the f64 reference (NaN when not measured).
    pub max_rel_err: f64,
    /// sprs's median over this one, same matrix and precision (NaN when sprs did not run).
    pub speedup_vs_sprs: f64,
    /// `measured`, or `paper` for the seed paper's quoted figures.
    pub source: &'static str,
    /// Device-to-device copy bandwidth (read + write, GB/s) measured in this process; GPU rows
    /// only (NaN otherwise).
    pub copy_gbs: f64,
    /// Device milliseconds of the upload-time preprocessing (segsparse GPU rows only).
    pub preprocess_ms: f64,
}

impl Row {
    /// A measured row from a median time.
    #[allow(clippy::too_many_arguments)]
    pub fn measured(
        matrix: &str,
        shape: (usize, usize, usize),
        implementation: &str,
        precision: &str,
        backend: &str,
        median_s: f64,
        bytes: usize,
        max_rel_err: f64,
    ) -> Row {
        let (rows, cols, nnz) = shape;
        Row {
            matrix: matrix.to_string(),
            rows,
            cols,
            nnz,
            implementation: implementation.to_string(),
            precision: precision.to_string(),
            backend: backend.to_string(),
            median_us: median_s * 1e6,
            gflops: 2.0 * nnz as f64 / median_s / 1e9,
            gbs: bytes as f64 / median_s / 1e9,
            spmv_per_s: 1.0 / median_s,
            max_rel_err,
            speedup_vs_sprs: f64::NAN,
            source: "measured",
            copy_gbs: f64::NAN,
            preprocess_ms: f64::NAN,
        }
    }
}

/// The seed paper's raefsky2 figures (Sengupta et al. 2007, §5): 215 MFLOP/s and 365 SpMV/s on a
/// GeForce 8800 GTX (single precision, "value … as a float vector"), and the OSKI figure they
/// quote, 522 MFLOP/s on a Pentium 4 (precision not stated there). Only for the raefsky2 shape.
pub fn paper_rows(matrix: &str, a: &CsrMatrix<f64>) -> Vec<Row> {
    if a.shape() != (3242, 3242) || a.nnz() != 294_276 {
        return Vec::new();
    }
    let flops = 2.0 * a.nnz() as f64;
    let bytes_f32 = a.cast::<f32>().spmv_bytes() as f64;
    let mk = |name: &str, prec: &str, backend: &str, gflops: f64, gbs: f64| {
        let t = flops / (gflops * 1e9);
        Row {
            matrix: matrix.to_string(),
            rows: a.nrows(),
            cols: a.ncols(),
            nnz: a.nnz(),
            implementation: name.to_string(),
            precision: prec.to_string(),
            backend: backend.to_string(),
            median_us: t * 1e6,
            gflops,
            gbs,
            spmv_per_s: 1.0 / t,
            max_rel_err: f64::NAN,
            speedup_vs_sprs: f64::NAN,
            source: "paper",
            copy_gbs: f64::NAN,
            preprocess_ms: f64::NAN,
        }
    };
    // 365 SpMV/s is 215 MFLOP/s with 2·nnz flops per product: the paper's two figures agree.
    let t_gpu = 1.0 / 365.0;
    vec![
        mk(
            "paper: 8800 GTX segscan",
            "f32",
            "gpu",
            0.215,
            bytes_f32 / t_gpu / 1e9,
        ),
        mk("paper: OSKI Pentium 4", "n/a", "cpu", 0.522, f64::NAN),
    ]
}

/// Fills `speedup_vs_sprs` for measured rows from the sprs row of the same precision.
pub fn fill_speedups(rows: &mut [Row]) {
    let sprs: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.implementation == "sprs" && r.source == "measured")
        .map(|r| (r.precision.clone(), r.median_us))
        .collect();
    for r in rows.iter_mut().filter(|r| r.source == "measured") {
        if let Some((_, t)) = sprs.iter().find(|(p, _)| *p == r.precision) {
            r.speedup_vs_sprs = t / r.median_us;
        }
    }
}

/// The header block of a matrix in table format.
pub fn write_matrix_header(
    out: &mut impl Write,
    name: &str,
    a: &CsrMatrix<f64>,
    s: &RowStats,
    load_s: f64,
) -> io::Result<()> {
    let density = if a.nrows() == 0 || a.ncols() == 0 {
        0.0
    } else {
        100.0 * a.nnz() as f64 / (a.nrows() as f64 * a.ncols() as f64)
    };
    writeln!(out, "matrix  {name}  (loaded in {load_s:.2} s)")?;
    writeln!(
        out,
        "shape   {} × {}, nnz {} ({density:.3}% dense)",
        a.nrows(),
        a.ncols(),
        a.nnz()
    )?;
    writeln!(
        out,
        "rows    entries per row: min {}, mean {:.2}, max {}, std dev {:.2}; empty rows {}",
        s.min, s.mean, s.max, s.std_dev, s.empty_rows
    )?;
    Ok(())
}

fn num(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "—".to_string()
    }
}

/// The result table of one matrix.
pub fn write_table(out: &mut impl Write, rows: &[Row], threads: usize) -> io::Result<()> {
    writeln!(
        out,
        "{:<24} {:<7} {:<4} {:>11} {:>9} {:>8} {:>10} {:>11} {:>7}",
        "implementation",
        "backend",
        "prec",
        "median µs",
        "GFLOP/s",
        "GB/s",
        "SpMV/s",
        "max rel err",
        "×sprs"
    )?;
    for r in rows {
        let err = if r.max_rel_err.is_nan() {
            "—".to_string()
        } else {
            format!("{:.2e}", r.max_rel_err)
        };
        writeln!(
            out,
            "{:<24} {:<7} {:<4} {:>11} {:>9} {:>8} {:>10} {:>11} {:>7}",
            r.implementation,
            r.backend,
            r.precision,
            num(r.median_us, if r.median_us < 100.0 { 2 } else { 1 }),
            num(r.gflops, 3),
            num(r.gbs, 2),
            num(r.spmv_per_s, 0),
            err,
            num(r.speedup_vs_sprs, 2),
        )?;
    }
    writeln!(
        out,
        "(y ← A·x, median of timed samples; {threads} rayon threads; GB/s counts \
         nnz·(sizeof T + 4) + (n+1)·4 + (ncols+nrows)·sizeof T bytes; error = max|y − ref| / ‖ref‖∞ \
         against an f64-accumulated sequential product of the same rounded inputs)"
    )?;
    writeln!(out)
}

/// The machine-readable form of a [`Row`] (JSON lines and CSV share it, through serde): unknown
/// values (NaN) become `null` in JSON and empty fields in CSV. Field names are the output's
/// column names; `copy_gbs` and `preprocess_ms` are absent from rows that have none.
#[derive(serde::Serialize)]
struct Record<'a> {
    matrix: &'a str,
    rows: usize,
    cols: usize,
    nnz: usize,
    implementation: &'a str,
    precision: &'a str,
    backend: &'a str,
    median_us: Option<f64>,
    gflops: Option<f64>,
    gbs: Option<f64>,
    spmv_per_s: Option<f64>,
    max_rel_err: Option<f64>,
    speedup_vs_sprs: Option<f64>,
    source: &'a str,
    copy_gbs: Option<f64>,
    preprocess_ms: Option<f64>,
}

fn known(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

impl<'a> From<&'a Row> for Record<'a> {
    fn from(r: &'a Row) -> Self {
        Record {
            matrix: &r.matrix,
            rows: r.rows,
            cols: r.cols,
            nnz: r.nnz,
            implementation: &r.implementation,
            precision: &r.precision,
            backend: &r.backend,
            median_us: known(r.median_us),
            gflops: known(r.gflops),
            gbs: known(r.gbs),
            spmv_per_s: known(r.spmv_per_s),
            max_rel_err: known(r.max_rel_err),
            speedup_vs_sprs: known(r.speedup_vs_sprs),
            source: r.source,
            copy_gbs: known(r.copy_gbs),
            preprocess_ms: known(r.preprocess_ms),
        }
    }
}

/// One JSON object on one line.
pub fn write_json(out: &mut impl Write, r: &Row) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &Record::from(r)).map_err(io::Error::from)?;
    writeln!(out)
}

/// A CSV writer for rows (header written before the first row).
pub fn csv_writer<W: Write>(out: W) -> csv::Writer<W> {
    csv::WriterBuilder::new().has_headers(true).from_writer(out)
}

/// One CSV line (empty fields for unknown values); the writer adds the header first.
pub fn write_csv<W: Write>(w: &mut csv::Writer<W>, r: &Row) -> io::Result<()> {
    w.serialize(Record::from(r)).map_err(io::Error::other)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_and_nulls() {
        let mut r = Row::measured(
            "dir/m \"x\".mtx",
            (2, 3, 4),
            "segsparse par",
            "f64",
            "cpu",
            1e-6,
            100,
            f64::NAN,
        );
        r.max_rel_err = 1.5e-17;
        let mut v = Vec::new();
        write_json(&mut v, &r).unwrap();
        let s = String::from_utf8(v).unwrap();
        assert!(
            s.starts_with("{\"matrix\":\"dir/m \\\"x\\\".mtx\",\"rows\":2,\"cols\":3,\"nnz\":4,"),
            "{s}"
        );
        assert!(s.contains("\"max_rel_err\":1.5e-17"), "{s}");
        assert!(s.contains("\"speedup_vs_sprs\":null"), "{s}");
        assert!(s.contains("\"copy_gbs\":null"), "{s}");
        assert_eq!(s.lines().count(), 1);
        let parsed: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(parsed["gflops"].as_f64(), Some(0.008));
        assert_eq!(parsed["implementation"], "segsparse par");
        r.copy_gbs = 4031.5;
        let mut v = Vec::new();
        write_json(&mut v, &r).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(parsed["copy_gbs"].as_f64(), Some(4031.5));
        let mut w = csv_writer(Vec::new());
        write_csv(&mut w, &r).unwrap();
        write_csv(&mut w, &r).unwrap();
        let s = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3, "{s}");
        assert!(lines[0].starts_with("matrix,rows,cols,nnz,implementation,precision,backend,"));
        assert!(
            lines[1].starts_with("\"dir/m \"\"x\"\".mtx\",2,3,4,"),
            "{s}"
        );
        let mut rd = csv::Reader::from_reader(s.as_bytes());
        let header = rd.headers().unwrap().clone();
        for rec in rd.records() {
            assert_eq!(rec.unwrap().len(), header.len());
        }
    }

    #[test]
    fn paper_rows_only_for_raefsky2_shape() {
        let a = CsrMatrix::<f64>::identity(3);
        assert!(paper_rows("x", &a).is_empty());
    }
}
