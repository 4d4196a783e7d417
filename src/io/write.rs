//! The Matrix Market writer.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::error::{Error, Result};
use crate::{CsrMatrix, Elem, Scalar};

/// Appends the shortest decimal that parses back (as `T`) to exactly `v`.
///
/// Rust's `Display` and `LowerExp` for floats print the shortest round-tripping digits; the
/// exponent form is used for very large and very small magnitudes to keep lines short.
fn push_real<T: Scalar>(s: &mut String, v: T) {
    let a = v.abs().as_f64();
    let plain = a == 0.0 || !a.is_finite() || (1e-5..1e16).contains(&a);
    // A `T` is f32 or f64; going through the concrete type picks its own shortest digits.
    let r = if T::BYTES == 4 {
        let x = v.as_f64() as f32; // exact: v is an f32
        if plain {
            write!(s, "{x}")
        } else {
            write!(s, "{x:e}")
        }
    } else {
        let x = v.as_f64();
        if plain {
            write!(s, "{x}")
        } else {
            write!(s, "{x:e}")
        }
    };
    r.expect("writing to a String cannot fail");
}

/// Appends an element: one number for a real `T`, the real and imaginary parts separated by a
/// space for a complex one.
fn push_value<T: Elem>(s: &mut String, v: T) {
    push_real(s, v.re());
    if T::IS_COMPLEX {
        s.push(' ');
        push_real(s, v.im());
    }
}

/// The Matrix Market field of `T`'s values.
fn field<T: Elem>() -> &'static str {
    if T::IS_COMPLEX {
        "complex"
    } else {
        "real"
    }
}

/// Creates `path` and runs `body` on a buffered (and, for `*.gz`, gzip-compressing) writer.
fn with_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let io_err = |source| Error::Io {
        path: Some(path.to_path_buf()),
        source,
    };
    let f = File::create(path).map_err(io_err)?;
    let mut w = BufWriter::with_capacity(1 << 16, f);
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    if gz {
        let mut enc = GzEncoder::new(&mut w, Compression::default());
        body(&mut enc).map_err(io_err)?;
        enc.finish().map_err(io_err)?;
    } else {
        body(&mut w).map_err(io_err)?;
    }
    w.flush().map_err(io_err)
}

/// Writes `m` as a `coordinate real general` Matrix Market file (`coordinate complex general`
/// for a complex `T`); a path ending in `.gz` is written
/// gzip-compressed. Values are printed with the shortest decimal that reads back bit-exactly in
/// the matrix's own precision, so [`super::read_matrix_market`] returns an equal matrix (after
/// sorting and summing duplicates, which a matrix from this crate's readers already is).
///
/// # Errors
/// [`Error::Io`] naming the path when it cannot be created or written.
pub fn write_matrix_market<T: Elem>(path: impl AsRef<Path>, m: &CsrMatrix<T>) -> Result<()> {
    with_file(path.as_ref(), |w| write_mm(w, m))
}

/// [`write_matrix_market`] to any writer (uncompressed text). Buffer `w` for speed.
///
/// # Errors
/// [`Error::Io`] (without a path) when writing fails.
pub fn write_matrix_market_to<T: Elem, W: Write>(mut w: W, m: &CsrMatrix<T>) -> Result<()> {
    write_mm(&mut w, m).map_err(Error::from)
}

fn write_mm<T: Elem>(w: &mut dyn Write, m: &CsrMatrix<T>) -> std::io::Result<()> {
    writeln!(
        w,
        "%%MatrixMarket matrix coordinate {} general",
        field::<T>()
    )?;
    writeln!(
        w,
        "% written by segsparse {} ({} values)",
        env!("CARGO_PKG_VERSION"),
        T::NAME
    )?;
    writeln!(w, "{} {} {}", m.nrows(), m.ncols(), m.nnz())?;
    let mut s = String::with_capacity(CHUNK);
    for i in 0..m.nrows() {
        let (cols, vals) = m.row(i);
        for (&c, &v) in cols.iter().zip(vals) {
            write!(s, "{} {} ", i + 1, c as u64 + 1).expect("writing to a String cannot fail");
            push_value(&mut s, v);
            end_line(w, &mut s)?;
        }
    }
    w.write_all(s.as_bytes())
}

/// Bytes of text gathered before a write.
const CHUNK: usize = 1 << 16;

/// Ends the line in `s` and writes `s` out once it nears [`CHUNK`] bytes.
fn end_line(w: &mut dyn Write, s: &mut String) -> std::io::Result<()> {
    s.push('\n');
    if s.len() > CHUNK - 64 {
        w.write_all(s.as_bytes())?;
        s.clear();
    }
    Ok(())
}

/// Writes a dense vector as a one-column `array real general` Matrix Market file (`array
/// complex general` for a complex `T`) (gzip when the
/// path ends in `.gz`), values printed to round-trip exactly. Read back with
/// [`super::read_vector`].
///
/// # Errors
/// [`Error::Io`] naming the path when it cannot be created or written.
pub fn write_vector<T: Elem>(path: impl AsRef<Path>, v: &[T]) -> Result<()> {
    with_file(path.as_ref(), |w| write_vec(w, v))
}

/// [`write_vector`] to any writer (uncompressed text).
///
/// # Errors
/// [`Error::Io`] (without a path) when writing fails.
pub fn write_vector_to<T: Elem, W: Write>(mut w: W, v: &[T]) -> Result<()> {
    write_vec(&mut w, v).map_err(Error::from)
}

fn write_vec<T: Elem>(w: &mut dyn Write, v: &[T]) -> std::io::Result<()> {
    writeln!(w, "%%MatrixMarket matrix array {} general", field::<T>())?;
    writeln!(w, "{} 1", v.len())?;
    let mut s = String::with_capacity(CHUNK);
    for &x in v {
        push_value(&mut s, x);
        end_line(w, &mut s)?;
    }
    w.write_all(s.as_bytes())
}
