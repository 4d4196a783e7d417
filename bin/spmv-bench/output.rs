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

/// A JSON string literal with the escapes RFC 8259 requires.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON number, or `null` for NaN and infinities (JSON has neither).
fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_string()
    }
}

/// One JSON object on one line.
pub fn write_json(out: &mut impl Write, r: &Row) -> io::Result<()> {
    let err = if r.max_rel_err.is_finite() {
        format!("{:e}", r.max_rel_err)
    } else {
        "null".to_string()
    };
    writeln!(
        out,
        "{{\"matrix\":{},\"rows\":{},\"cols\":{},\"nnz\":{},\"implementation\":{},\"precision\":{},\
         \"backend\":{},\"median_us\":{},\"gflops\":{},\"gbs\":{},\"spmv_per_s\":{},\
         \"max_rel_err\":{},\"speedup_vs_sprs\":{},\"source\":{}}}",
        json_str(&r.matrix),
        r.rows,
        r.cols,
        r.nnz,
        json_str(&r.implementation),
        json_str(&r.precision),
        json_str(&r.backend),
        json_num(r.median_us),
        json_num(r.gflops),
        json_num(r.gbs),
        json_num(r.spmv_per_s),
        err,
        json_num(r.speedup_vs_sprs),
        json_str(r.source),
    )
}

/// The CSV header line.
pub const CSV_HEADER: &str = "matrix,rows,cols,nnz,implementation,precision,backend,median_us,\
                              gflops,gbs,spmv_per_s,max_rel_err,speedup_vs_sprs,source";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        String::new()
    }
}

/// One CSV line (empty fields for unknown values).
pub fn write_csv(out: &mut impl Write, r: &Row) -> io::Result<()> {
    writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        csv_field(&r.matrix),
        r.rows,
        r.cols,
        r.nnz,
        csv_field(&r.implementation),
        r.precision,
        r.backend,
        csv_num(r.median_us),
        csv_num(r.gflops),
        csv_num(r.gbs),
        csv_num(r.spmv_per_s),
        if r.max_rel_err.is_finite() {
            format!("{:e}", r.max_rel_err)
        } else {
            String::new()
        },
        csv_num(r.speedup_vs_sprs),
        r.source,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_and_nulls() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
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
        assert!(s.contains("\"gflops\":0.008"), "{s}");
        assert_eq!(s.lines().count(), 1);
        let mut v = Vec::new();
        write_csv(&mut v, &r).unwrap();
        let s = String::from_utf8(v).unwrap();
        assert!(s.starts_with("\"dir/m \"\"x\"\".mtx\",2,3,4,"), "{s}");
        assert_eq!(
            s.trim_end().split(',').count(),
            CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn paper_rows_only_for_raefsky2_shape() {
        let a = CsrMatrix::<f64>::identity(3);
        assert!(paper_rows("x", &a).is_empty());
    }
}
