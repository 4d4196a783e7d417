//! Matrix Market reading and writing (`.mtx` and `.mtx.gz`).
//!
//! The [Matrix Market exchange format](https://math.nist.gov/MatrixMarket/formats.html) is how the
//! SuiteSparse collection (raefsky2, bcsstk01, ...) distributes its matrices. This module reads it
//! into a [`CsrMatrix`] and writes a [`CsrMatrix`] back, plus dense vectors (right-hand sides,
//! solutions) in the same format.
//!
//! # Why the crate carries its own reader
//!
//! We evaluated the two existing Rust readers on the same malformed and unusual files:
//!
//! * `matrix-market-rs` 0.1.3 panics on a row or column index of 0, accepts indices beyond the
//!   declared size, rejects skew-symmetric files and ignores the field type;
//! * `sprs::io` panics on out-of-range indices, refuses `pattern` and `integer` files when a real
//!   matrix is requested, and reports only "Bad matrix market file" without a line number.
//!
//! A benchmark and a solver that are fed arbitrary user files must not panic, and a person must be
//! told *where* a file is broken. So segsparse has its own reader; `sprs` stays a dependency for
//! interoperability ([`CsrMatrix::to_sprs`]) and as a reference in the tests.
//!
//! # What is read
//!
//! * `.mtx` and gzip-compressed `.mtx.gz` files. Compression is detected from the first two bytes
//!   (the gzip magic `1f 8b`), not from the file name, so a renamed file still reads.
//! * `coordinate` format with field `real`, `integer` or `pattern` (pattern entries get the value 1)
//!   and symmetry `general`, `symmetric` or `skew-symmetric`. Symmetric and skew-symmetric files are
//!   expanded to full storage: an off-diagonal entry `(i, j, v)` also stores `(j, i, v)` (or
//!   `(j, i, -v)`); a diagonal entry is stored once, never doubled. A symmetric file must store one
//!   triangle: entries on both sides of the diagonal are an error (they would silently double the
//!   matrix). A skew-symmetric file may hold explicit zeros on the diagonal, nothing else there.
//! * `array` (dense, column-major) format with field `real` or `integer`, symmetry `general`,
//!   `symmetric` (lower triangle listed) or `skew-symmetric` (strictly lower triangle listed). It is
//!   read into CSR and **exact zeros are dropped** (a dense file lists every position, zero or not).
//!   NaN and infinities are kept.
//! * Duplicate positions in a coordinate file are summed (as `scipy.sparse` does when converting
//!   to CSR). The result always has sorted column indices without duplicates.
//! * Explicit zeros in coordinate files are kept (SuiteSparse's `zenios`, `bayer10` rely on them).
//! * `complex` files (two numbers per value, real and imaginary parts) into a complex element
//!   type (`Complex<f32>`, `Complex<f64>`), with symmetry `general`, `symmetric` (complex
//!   symmetric: `a_ji = a_ij`), `skew-symmetric` or `hermitian` (`a_ji = conj(a_ij)`; the
//!   diagonal of a hermitian file must be real). A real, integer or pattern file reads into a
//!   complex type too (imaginary parts zero); a complex or hermitian file read into a real type
//!   is refused with a message that says so, since dropping the imaginary parts would change the
//!   matrix. A complex entry with one number instead of two, or text in either part, is an error
//!   that names the file, the line and the part.
//! * NaN and infinite values (`nan`, `inf`, `-Infinity`, ...) are accepted; callers that care ask
//!   [`CsrMatrix::has_non_finite`]. Fortran exponents (`1.5D+03`) are accepted too.
//!
//! # Errors, never panics
//!
//! Every malformed file gives [`Error::MatrixMarket`] with the file name, the 1-based line and what
//! is wrong: a bad banner, a missing size line, an index of 0 or beyond the declared size, too few
//! or too many entries, a non-numeric or missing value, an entry with too many fields, a line
//! longer than 1 MiB, a broken gzip stream. A file that cannot be opened gives [`Error::Io`].
//! The reader never panics on any input (the tests feed it thousands of random mutations).
//!
//! # Memory
//!
//! The file is streamed line by line (a [`BufRead`] with a reused line buffer); no copy of the
//! text is held in memory. The number of entries declared in the header is *not* trusted for
//! allocation: at most [`MAX_RESERVE`] entries are reserved up front and the buffers grow with
//! what is actually read, so a header that claims 10^12 entries allocates nothing unusual (and is
//! rejected anyway because segsparse indexes entries with `u32`). Dimensions and entry counts
//! beyond `u32::MAX` are rejected with a clear error.
//!
//! Everything the reader holds is bounded by a **memory budget**, [`ReadOptions::max_bytes`]
//! (default: half of the physical memory, or `SEGSPARSE_MTX_MAX_BYTES`): the row pointers that
//! the declared row count needs (`8·rows` bytes, with the counting sort's work array) are
//! checked against it from the size line, before anything is allocated, and every stored entry
//! counts `12 + 2·sizeof(T)` bytes (the triplet being read and its CSR copy) as it is read. A
//! file that needs more is refused with an [`Error::MatrixMarket`] that names both figures;
//! a 67-byte file declaring 10^9 rows is refused in microseconds under a 1 GB budget. Rows
//! that no declared entry can reach are bounded too ([`ReadOptions::max_empty_rows`], 2^24 by
//! default): the same file is refused from its size line whatever the budget, because almost
//! all of its rows are certainly empty (the front ends' memory preflight, [`crate::memory`],
//! then never sees it). Row pointers of entries that come in row order (most
//! files, and every mostly-empty matrix) are written once each, runs of empty rows by a fill at
//! memory speed. Peak memory is about `12 + 2·sizeof(T)` bytes per stored entry plus the row
//! pointers. The allocations that follow the header rather than the data (row pointers, a
//! coordinate vector) use `try_reserve`, so a refused allocation is an error, not an abort.
//! The fuzz target `tools/examples/fuzz_mtx.rs` checks all of this with a counting allocator.
//!
//! # Writing
//!
//! [`write_matrix_market`] writes `coordinate real general` (`coordinate complex general` for a
//! complex type) with every value printed as the
//! shortest decimal that reads back to the same bits ([`f32`] values as `f32` decimals), so a
//! write → read round trip in the same precision is bit-exact. A path ending in `.gz` is written
//! gzip-compressed.
//!
//! # Example
//!
//! ```
//! use segsparse::{io, CsrMatrix};
//! let text = "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 4.0\n2 1 -1\n";
//! let a: CsrMatrix<f64> = io::read_matrix_market_from(text.as_bytes(), "example.mtx").unwrap();
//! assert_eq!(a.nnz(), 3); // (1,1), (2,1) and its mirror (1,2)
//! let bad = "%%MatrixMarket matrix coordinate real general\n2 2 1\n0 1 4.0\n";
//! let e = io::read_matrix_market_from::<f64, _>(bad.as_bytes(), "bad.mtx").unwrap_err();
//! assert_eq!(e.to_string(), "bad.mtx:3: row index 0 is invalid (Matrix Market indices start at 1)");
//! ```

mod header;
mod read;
pub(crate) use read::empty_rows_refusal;
mod write;

pub use header::{MatrixMarketHeader, MmField, MmFormat, MmSymmetry};
pub use read::{
    read_header, read_header_from, read_matrix_market, read_matrix_market_from,
    read_matrix_market_from_with, read_matrix_market_with, read_vector, read_vector_from,
    read_vector_from_with, ReadOptions, DEFAULT_MAX_EMPTY_ROWS, MAX_LINE_BYTES, MAX_RESERVE,
};
pub use write::{write_matrix_market, write_matrix_market_to, write_vector, write_vector_to};

use crate::error::{Error, Result};
#[cfg(doc)]
use crate::CsrMatrix;
#[cfg(doc)]
use std::io::BufRead;

/// The host preflight of a front end that reads a matrix and then allocates vectors
/// (`sparse-solve`, `spmv-bench`): when `path` is a Matrix Market file, its header alone gives
/// the reader's peak and the matrix's size, and the check is
/// `max(read peak, matrix + rows·per_row + cols·per_col + entries·per_entry)` bytes (the
/// reader's triplets are freed before the vectors exist; `per_entry` counts copies of the
/// matrix, such as an `f32` cast), for values of type `T`. A generator spec or a missing file passes (the
/// loader reports the latter).
///
/// # Errors
/// [`Error::OutOfMemory`] naming the file and the figures; the header's own errors (a
/// malformed banner or size line) as [`Error::MatrixMarket`].
pub fn check_matrix_file<T>(
    path: &str,
    what: &str,
    per_row: u64,
    per_col: u64,
    per_entry: u64,
) -> Result<()> {
    if !std::path::Path::new(path).is_file() {
        return Ok(());
    }
    let hdr = read_header(path)?;
    // The reader's own refusal from the header (almost every row certainly empty), here before
    // the caller opens a GPU or reads anything else.
    if let Some(msg) = empty_rows_refusal(&hdr, &ReadOptions::default()) {
        return Err(Error::mtx(path, 0, msg));
    }
    let vectors = hdr
        .nrows
        .saturating_mul(per_row)
        .saturating_add(hdr.ncols.saturating_mul(per_col))
        .saturating_add(hdr.stored_entries_max().saturating_mul(per_entry));
    let need = hdr
        .read_peak_bytes::<T>()
        .max(hdr.csr_bytes::<T>().saturating_add(vectors));
    crate::memory::check_host(
        &format!(
            "{what} on {path} ({}×{}, declared entries: {})",
            hdr.nrows, hdr.ncols, hdr.entries
        ),
        need,
    )
}
