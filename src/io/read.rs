//! The streaming Matrix Market reader.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use num_traits::Zero;

use super::header::{MatrixMarketHeader, MmField, MmFormat, MmSymmetry};
use crate::error::{Error, Result};
use crate::units::human;
use crate::{CsrMatrix, Elem, Scalar};

/// The longest line the reader accepts (1 MiB); a longer data line is an error, a longer comment
/// line is skipped without being stored. It bounds the line buffer for any input.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most entries reserved up front from the count a header declares (4 Mi entries, 64 MiB for
/// f64 triplets); beyond it the buffers grow with what is actually read.
pub const MAX_RESERVE: usize = 1 << 22;

/// Limits of the Matrix Market reader. `ReadOptions::default()` is what [`read_matrix_market`]
/// and the other functions without options use.
///
/// ```
/// use segsparse::io::{self, ReadOptions};
/// // A file that declares a billion rows is legal, but its row pointers alone need 4 GB.
/// let text = "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 2.5\n";
/// let opts = ReadOptions { max_bytes: 1 << 30, ..Default::default() };
/// let e = io::read_matrix_market_from_with::<f64, _>(text.as_bytes(), "big.mtx", &opts)
///     .unwrap_err();
/// assert!(e.to_string().contains("memory budget"), "{e}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// The most bytes the reader may hold for one matrix or vector: the row pointers that the
    /// declared row count needs, plus about `12 + 2·sizeof(T)` bytes per stored entry (the
    /// triplets being read and the CSR arrays they become). A file whose declared sizes, or
    /// whose entries as they are read, need more is refused with an [`Error::MatrixMarket`]
    /// naming both figures, before the allocation. Default: [`ReadOptions::default_max_bytes`].
    pub max_bytes: u64,
    /// The most rows of a coordinate file that are certainly empty (declared rows minus the
    /// most rows its declared entries can reach) that the reader accepts. Default
    /// [`DEFAULT_MAX_EMPTY_ROWS`] (2^24, 128 MiB of row pointers); `u64::MAX` accepts any.
    ///
    /// Why: every row costs its row pointer whether it holds an entry or not, so a few bytes of
    /// header (`1000000000 1000000000 1`) would otherwise cost 8 GB of memory and seconds of
    /// filling, and then every vector of a solve or SpMV on it as much again, for a matrix
    /// that is almost entirely empty rows: singular as a system matrix, and most likely a
    /// mistyped size line. Such a file is refused from the size line, in microseconds.
    pub max_empty_rows: u64,
}

/// The default of [`ReadOptions::max_empty_rows`]: 2^24 rows.
pub const DEFAULT_MAX_EMPTY_ROWS: u64 = 1 << 24;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_bytes: Self::default_max_bytes(),
            max_empty_rows: DEFAULT_MAX_EMPTY_ROWS,
        }
    }
}

impl ReadOptions {
    /// The default budget: the value of `SEGSPARSE_MTX_MAX_BYTES` when set (bytes, or with a
    /// `K`/`M`/`G` suffix), else half of the machine's physical memory (Linux `/proc/meminfo`),
    /// else 8 GiB. Half of RAM lets any matrix that can be processed at all be read, while a
    /// small file that declares absurd sizes is refused instead of driving the machine into
    /// swap or the OOM killer.
    pub fn default_max_bytes() -> u64 {
        if let Some(v) = std::env::var("SEGSPARSE_MTX_MAX_BYTES")
            .ok()
            .and_then(|v| crate::units::parse_bytes(&v))
        {
            return v;
        }
        crate::memory::host_total().map_or(8 << 30, |m| m / 2)
    }
}

/// What the reader may hold, worked out from the size line before anything is allocated.
#[derive(Clone, Copy, Debug)]
struct Budget {
    max_bytes: u64,
    /// Bytes fixed by the declared row count: row pointers and the counting sort's work array.
    fixed: u64,
    /// The most entries that may be stored (after symmetric expansion) within the budget.
    max_entries: usize,
}

impl Budget {
    /// Bytes per stored entry: the triplet (two `u32` and a value) and its CSR copy (a `u32`
    /// and a value).
    fn per_entry<T>() -> u64 {
        12 + 2 * std::mem::size_of::<T>() as u64
    }

    /// The budget of a matrix with `nrows` declared rows, or the error that refuses it.
    fn for_matrix<T, R>(lines: &Lines<R>, info: &HeaderInfo, opts: &ReadOptions) -> Result<Self> {
        let nrows = info.hdr.nrows;
        // Row pointers (nrows + 1) plus the work array of the counting sort (nrows), u32 each.
        let fixed = 8 * nrows + 4;
        if fixed > opts.max_bytes {
            return Err(lines.err(
                info.size_line,
                format!(
                    "the size line declares {nrows} rows, whose row pointers need {}, beyond \
                     the reader's memory budget of {} (io::ReadOptions::max_bytes, or the \
                     environment variable SEGSPARSE_MTX_MAX_BYTES)",
                    human(fixed),
                    human(opts.max_bytes)
                ),
            ));
        }
        if let Some(msg) = empty_rows_refusal(&info.hdr, opts) {
            return Err(lines.err(info.size_line, msg));
        }
        let max_entries = ((opts.max_bytes - fixed) / Self::per_entry::<T>())
            .min(U32_LIMIT)
            .min(usize::MAX as u64) as usize;
        Ok(Budget {
            max_bytes: opts.max_bytes,
            fixed,
            max_entries,
        })
    }

    /// The budget of a vector of `len` declared values read from a coordinate file (the vector
    /// plus one triplet per entry) or an array file (the values only, `fixed` = 0).
    fn for_vector<T, R>(
        lines: &Lines<R>,
        info: &HeaderInfo,
        opts: &ReadOptions,
        len: u64,
    ) -> Result<Self> {
        let sz = std::mem::size_of::<T>() as u64;
        let (fixed, per_entry) = match info.hdr.format {
            MmFormat::Coordinate => (len * sz, 8 + sz),
            MmFormat::Array => (0, sz),
        };
        let need = match info.hdr.format {
            MmFormat::Coordinate => fixed,
            MmFormat::Array => len * sz,
        };
        if need > opts.max_bytes {
            return Err(lines.err(
                info.size_line,
                format!(
                    "the size line declares a vector of {len} values, which needs {}, beyond \
                     the reader's memory budget of {} (io::ReadOptions::max_bytes, or the \
                     environment variable SEGSPARSE_MTX_MAX_BYTES)",
                    human(need),
                    human(opts.max_bytes)
                ),
            ));
        }
        Ok(Budget {
            max_bytes: opts.max_bytes,
            fixed,
            max_entries: ((opts.max_bytes - fixed) / per_entry).min(usize::MAX as u64) as usize,
        })
    }

    /// The error for a file whose entries, as read so far, outgrow the budget.
    fn exceeded<T, R>(&self, lines: &Lines<R>, stored: usize) -> Error {
        lines.err(
            lines.line,
            format!(
                "{stored} entries stored so far (after symmetric expansion), with what the \
                 declared dimensions fix, need {}, beyond the reader's memory budget of {} (io::ReadOptions::max_bytes, \
                 or the environment variable SEGSPARSE_MTX_MAX_BYTES)",
                human(self.fixed + stored as u64 * Self::per_entry::<T>()),
                human(self.max_bytes)
            ),
        )
    }
}

/// Why a coordinate file whose declared rows are almost all certainly empty is refused
/// ([`ReadOptions::max_empty_rows`]), or `None`. Each declared entry reaches one row, two after
/// symmetric expansion; used by the reader at the size line and by the front ends' preflight
/// ([`crate::io::check_matrix_file`]) before they open a GPU.
pub(crate) fn empty_rows_refusal(hdr: &MatrixMarketHeader, opts: &ReadOptions) -> Option<String> {
    if hdr.format != MmFormat::Coordinate {
        return None;
    }
    let empty = hdr.nrows.saturating_sub(hdr.stored_entries_max());
    (empty > opts.max_empty_rows).then(|| {
        format!(
            "the size line declares {} rows but only {} {}, so at least {empty} rows are empty; \
             their row pointers alone would need {}. Refused as most likely a wrong size line \
             (io::ReadOptions::max_empty_rows = {} accepts at most that many certainly empty \
             rows)",
            hdr.nrows,
            hdr.entries,
            if hdr.entries == 1 { "entry" } else { "entries" },
            human(hdr.nrows.saturating_mul(8).saturating_add(4)),
            opts.max_empty_rows
        )
    })
}

const U32_LIMIT: u64 = u32::MAX as u64;
const BANNER_FORM: &str = "'%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> \
                           <general|symmetric|skew-symmetric>'";

// ---------------------------------------------------------------------------------------------
// Opening files
// ---------------------------------------------------------------------------------------------

/// Opens `path` for reading (gzip is detected later, by [`source`]).
pub(crate) fn open(path: &Path) -> Result<BufReader<File>> {
    let io_err = |source| Error::Io {
        path: Some(path.to_path_buf()),
        source,
    };
    let f = File::open(path).map_err(io_err)?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(io_err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "is a directory, not a Matrix Market file",
        )));
    }
    Ok(BufReader::with_capacity(1 << 16, f))
}

/// A reader whose gzip compression, if any, has been detected and undone.
enum Source<R: BufRead> {
    Plain(R),
    Gzip(Box<BufReader<MultiGzDecoder<R>>>),
}

impl<R: BufRead> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Source::Plain(r) => r.read(buf),
            Source::Gzip(r) => r.read(buf),
        }
    }
}

impl<R: BufRead> BufRead for Source<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match self {
            Source::Plain(r) => r.fill_buf(),
            Source::Gzip(r) => r.fill_buf(),
        }
    }
    fn consume(&mut self, n: usize) {
        match self {
            Source::Plain(r) => r.consume(n),
            Source::Gzip(r) => r.consume(n),
        }
    }
}

/// Looks at the first bytes of `r`: the gzip magic `1f 8b` means compressed input, whatever the
/// file is called.
fn source<R: BufRead>(mut r: R, name: &str) -> Result<Source<R>> {
    let gz = loop {
        match r.fill_buf() {
            Ok(b) => break b.starts_with(&[0x1f, 0x8b]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::mtx(name, 1, format!("cannot read the file: {e}"))),
        }
    };
    Ok(if gz {
        Source::Gzip(Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(r),
        )))
    } else {
        Source::Plain(r)
    })
}

fn display_name(path: &Path) -> String {
    path.display().to_string()
}

// ---------------------------------------------------------------------------------------------
// Lines
// ---------------------------------------------------------------------------------------------

/// A line reader over any `BufRead` that reuses one buffer, counts lines (1-based), strips
/// `\r\n`, bounds the line length and turns read errors into [`Error::MatrixMarket`].
struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    line: usize,
    overlong: bool,
    name: String,
}

fn is_blank_or_comment(buf: &[u8]) -> bool {
    match buf.iter().find(|b| !b.is_ascii_whitespace()) {
        None => true,
        Some(&b) => b == b'%',
    }
}

impl<R> Lines<R> {
    fn new(r: R, name: &str) -> Self {
        Lines {
            r,
            buf: Vec::with_capacity(256),
            line: 0,
            overlong: false,
            name: name.to_string(),
        }
    }

    fn err(&self, line: usize, msg: impl Into<String>) -> Error {
        Error::mtx(self.name.clone(), line, msg)
    }
}

impl<R: BufRead> Lines<R> {
    /// Reads the next physical line into `buf`; `false` at end of file.
    fn next_raw(&mut self) -> Result<bool> {
        self.buf.clear();
        self.overlong = false;
        let mut any = false;
        loop {
            let avail = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(self.err(
                        self.line + 1,
                        format!("cannot read the file here (corrupt or truncated?): {e}"),
                    ))
                }
            };
            if avail.is_empty() {
                break;
            }
            any = true;
            let (take, used, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i, i + 1, true),
                None => (avail.len(), avail.len(), false),
            };
            let room = MAX_LINE_BYTES - self.buf.len();
            if take > room {
                self.overlong = true;
            }
            self.buf.extend_from_slice(&avail[..take.min(room)]);
            self.r.consume(used);
            if done {
                break;
            }
        }
        if !any {
            return Ok(false);
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(true)
    }

    /// Reads the next line that is neither blank nor a `%` comment; `false` at end of file.
    fn next_data(&mut self) -> Result<bool> {
        loop {
            if !self.next_raw()? {
                return Ok(false);
            }
            if is_blank_or_comment(&self.buf) {
                continue;
            }
            if self.overlong {
                return Err(self.err(
                    self.line,
                    format!("line is longer than {MAX_LINE_BYTES} bytes"),
                ));
            }
            return Ok(true);
        }
    }
}

fn tokens(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    buf.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

/// A token for an error message: lossy UTF-8, control characters escaped, at most 40 characters.
fn show(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    let mut out = String::new();
    for (k, c) in s.chars().enumerate() {
        if k == 40 {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

/// Parses an unsigned decimal integer (an optional `+`, then digits); `None` when it is not one
/// or overflows u64.
fn parse_u64(tok: &[u8]) -> Option<u64> {
    let digits = tok.strip_prefix(b"+").unwrap_or(tok);
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

fn is_integer_syntax(tok: &[u8]) -> bool {
    let digits = tok
        .strip_prefix(b"+")
        .or_else(|| tok.strip_prefix(b"-"))
        .unwrap_or(tok);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// Parses a 1-based index `1..=limit` into a 0-based `u32`.
fn parse_index(tok: &[u8], what: &str, limit: u64, dim: &str) -> std::result::Result<u32, String> {
    match parse_u64(tok) {
        Some(0) => Err(format!(
            "{what} index 0 is invalid (Matrix Market indices start at 1)"
        )),
        Some(v) if v > limit => Err(format!(
            "{what} index {v} is out of range: the size line declares {limit} {dim}"
        )),
        Some(v) => Ok((v - 1) as u32),
        None if is_integer_syntax(tok) && tok.starts_with(b"-") => Err(format!(
            "{what} index {} is invalid (Matrix Market indices start at 1)",
            show(tok)
        )),
        None if is_integer_syntax(tok) => Err(format!(
            "{what} index {} is out of range: the size line declares {limit} {dim}",
            show(tok)
        )),
        None => Err(format!("{what} index '{}' is not an integer", show(tok))),
    }
}

/// Parses one real number of the given field (`Real`, `Integer`, or a part of a `Complex`
/// value); `what` names it in the message (`value`, `real part`, `imaginary part`).
fn parse_real<T: Scalar>(tok: &[u8], field: MmField, what: &str) -> std::result::Result<T, String> {
    let bad = || match field {
        MmField::Integer => format!(
            "{what} '{}' is not an integer (the field is integer)",
            show(tok)
        ),
        _ => format!("{what} '{}' is not a number", show(tok)),
    };
    if field == MmField::Integer && !is_integer_syntax(tok) {
        return Err(bad());
    }
    let s = std::str::from_utf8(tok).map_err(|_| bad())?;
    if let Ok(v) = s.parse::<T>() {
        return Ok(v);
    }
    // Fortran double-precision exponents: 1.5D+03.
    if field != MmField::Integer && s.len() <= 64 && s.bytes().any(|b| b == b'd' || b == b'D') {
        let fixed: String = s
            .chars()
            .map(|c| if c == 'd' || c == 'D' { 'e' } else { c })
            .collect();
        if let Ok(v) = fixed.parse::<T>() {
            return Ok(v);
        }
    }
    Err(bad())
}

/// Parses the value of an entry: one token for a `real` or `integer` field, two (the real and
/// imaginary parts) for a `complex` one. `im` is the token after the first (`None` at the end
/// of the line). The caller has checked that a complex field is read into a complex `T`.
fn parse_value<T: Elem>(
    re: &[u8],
    im: Option<&[u8]>,
    field: MmField,
) -> std::result::Result<T, String> {
    if field != MmField::Complex {
        return parse_real::<T::Real>(re, field, "value").map(T::from_real);
    }
    let Some(im) = im else {
        return Err(format!(
            "missing imaginary part after '{}' (a complex entry holds two numbers: real and \
             imaginary parts)",
            show(re)
        ));
    };
    let r = parse_real::<T::Real>(re, field, "real part")?;
    let i = parse_real::<T::Real>(im, field, "imaginary part")?;
    T::from_parts(r, i).ok_or_else(|| "a complex value in a real matrix".to_string())
}

/// The refusal of a complex file read into a real element type `T`.
fn complex_into_real<T: Elem>(hdr: &MatrixMarketHeader, what: &str) -> Option<String> {
    (!T::IS_COMPLEX && (hdr.field == MmField::Complex || hdr.symmetry == MmSymmetry::Hermitian))
        .then(|| {
            format!(
                "a {} {} file holds complex values: read it as a complex {what} \
                 (Complex<f32> or Complex<f64>)",
                hdr.field, hdr.symmetry
            )
        })
}

// ---------------------------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------------------------

/// Where the header ended.
struct HeaderInfo {
    hdr: MatrixMarketHeader,
    size_line: usize,
}

fn parse_banner<R: BufRead>(lines: &mut Lines<R>) -> Result<(MmFormat, MmField, MmSymmetry)> {
    if !lines.next_raw()? {
        return Err(lines.err(1, format!("empty file: expected the banner {BANNER_FORM}")));
    }
    let mut line: &[u8] = &lines.buf;
    if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
        line = rest; // UTF-8 byte-order mark
    }
    let toks: Vec<&[u8]> = tokens(line).take(6).collect();
    let bad = |msg: String| Err(lines.err(1, format!("bad banner: {msg}")));
    match toks.first() {
        Some(t) if t.eq_ignore_ascii_case(b"%%MatrixMarket") => {}
        _ => {
            return bad(format!(
                "expected {BANNER_FORM}, found '{}'",
                show(&line[..line.len().min(60)])
            ))
        }
    }
    let names = ["object", "format", "field", "symmetry"];
    if toks.len() < 5 {
        return bad(format!(
            "the {} is missing (expected {BANNER_FORM})",
            names[toks.len() - 1]
        ));
    }
    if toks.len() > 5 {
        return bad(format!(
            "unexpected '{}' after the symmetry (expected {BANNER_FORM})",
            show(toks[5])
        ));
    }
    let text = |t: &[u8]| String::from_utf8_lossy(t).into_owned();
    if !toks[1].eq_ignore_ascii_case(b"matrix") {
        return bad(format!(
            "object '{}' is not supported (only 'matrix')",
            show(toks[1])
        ));
    }
    let Some(format) = MmFormat::parse(&text(toks[2])) else {
        return bad(format!(
            "unknown format '{}' (expected coordinate or array)",
            show(toks[2])
        ));
    };
    let Some(field) = MmField::parse(&text(toks[3])) else {
        return bad(format!(
            "unknown field '{}' (expected real, integer, pattern or complex)",
            show(toks[3])
        ));
    };
    let Some(symmetry) = MmSymmetry::parse(&text(toks[4])) else {
        return bad(format!(
            "unknown symmetry '{}' (expected general, symmetric, skew-symmetric or hermitian)",
            show(toks[4])
        ));
    };
    if format == MmFormat::Array && field == MmField::Pattern {
        return bad("the pattern field is only valid with the coordinate format".into());
    }
    if symmetry == MmSymmetry::SkewSymmetric && field == MmField::Pattern {
        return bad("a pattern matrix cannot be skew-symmetric".into());
    }
    if symmetry == MmSymmetry::Hermitian && field != MmField::Complex {
        return bad(format!(
            "hermitian symmetry needs the complex field, not {field}"
        ));
    }
    Ok((format, field, symmetry))
}

fn parse_header<R: BufRead>(lines: &mut Lines<R>) -> Result<HeaderInfo> {
    let (format, field, symmetry) = parse_banner(lines)?;
    let form = match format {
        MmFormat::Coordinate => "'rows cols entries'",
        MmFormat::Array => "'rows cols'",
    };
    if !lines.next_data()? {
        return Err(lines.err(
            lines.line.max(1),
            format!("missing size line: the file ends before the {form} line"),
        ));
    }
    let size_line = lines.line;
    let want = match format {
        MmFormat::Coordinate => 3,
        MmFormat::Array => 2,
    };
    let mut nums = [0u64; 3];
    let mut n = 0;
    for tok in tokens(&lines.buf) {
        if n == want {
            return Err(lines.err(
                size_line,
                format!(
                    "bad size line: expected {want} numbers {form} for a {format} file, found more ('{}')",
                    show(tok)
                ),
            ));
        }
        nums[n] = parse_u64(tok).ok_or_else(|| {
            lines.err(
                size_line,
                format!(
                    "bad size line: '{}' is not a non-negative integer (expected {form})",
                    show(tok)
                ),
            )
        })?;
        n += 1;
    }
    if n < want {
        return Err(lines.err(
            size_line,
            format!("bad size line: expected {want} numbers {form} for a {format} file, found {n}"),
        ));
    }
    let (nrows, ncols) = (nums[0], nums[1]);
    for (v, what) in [(nrows, "rows"), (ncols, "columns")] {
        if v > U32_LIMIT {
            return Err(lines.err(
                size_line,
                format!(
                    "{v} {what} exceed segsparse's 32-bit index limit ({})",
                    u32::MAX
                ),
            ));
        }
    }
    if symmetry != MmSymmetry::General && nrows != ncols {
        return Err(lines.err(
            size_line,
            format!(
                "a {symmetry} matrix must be square, but the size line declares {nrows}×{ncols}"
            ),
        ));
    }
    let entries = match format {
        MmFormat::Coordinate => nums[2],
        MmFormat::Array => match symmetry {
            MmSymmetry::General => nrows * ncols,
            MmSymmetry::Symmetric | MmSymmetry::Hermitian => nrows * (nrows + 1) / 2,
            MmSymmetry::SkewSymmetric => nrows * nrows.saturating_sub(1) / 2,
        },
    };
    Ok(HeaderInfo {
        hdr: MatrixMarketHeader {
            format,
            field,
            symmetry,
            nrows,
            ncols,
            entries,
        },
        size_line,
    })
}

/// Reads only the banner and size line of a Matrix Market file (`.mtx` or `.mtx.gz`), for tools
/// that want the shape before loading. Complex and hermitian files are reported, not rejected.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened, [`Error::MatrixMarket`] for a bad banner or size
/// line.
pub fn read_header(path: impl AsRef<Path>) -> Result<MatrixMarketHeader> {
    let path = path.as_ref();
    read_header_from(open(path)?, &display_name(path))
}

/// [`read_header`] from any buffered reader (plain or gzip-compressed text, detected by its
/// first bytes); `name` is used in error messages.
///
/// # Errors
/// As [`read_header`].
pub fn read_header_from<R: BufRead>(reader: R, name: &str) -> Result<MatrixMarketHeader> {
    let mut lines = Lines::new(source(reader, name)?, name);
    Ok(parse_header(&mut lines)?.hdr)
}

// ---------------------------------------------------------------------------------------------
// Matrices
// ---------------------------------------------------------------------------------------------

/// Reads a Matrix Market file (`.mtx`, or gzip-compressed whatever its name) into CSR form with
/// sorted column indices and no duplicates. See the [module docs](super) for what is accepted.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened; [`Error::MatrixMarket`] naming the file, line and
/// problem for anything malformed, for a complex or hermitian file read into a real `T` and
/// for sizes beyond `u32`.
pub fn read_matrix_market<T: Elem>(path: impl AsRef<Path>) -> Result<CsrMatrix<T>> {
    read_matrix_market_with(path, &ReadOptions::default())
}

/// [`read_matrix_market`] with explicit [`ReadOptions`] (a memory budget).
///
/// # Errors
/// As [`read_matrix_market`], and [`Error::MatrixMarket`] when the declared row count or the
/// entries read need more memory than `opts.max_bytes`.
pub fn read_matrix_market_with<T: Elem>(
    path: impl AsRef<Path>,
    opts: &ReadOptions,
) -> Result<CsrMatrix<T>> {
    let path = path.as_ref();
    read_matrix_market_from_with(open(path)?, &display_name(path), opts)
}

/// [`read_matrix_market`] from any buffered reader (plain or gzip-compressed text, detected by
/// its first bytes). `name` is used in error messages.
///
/// # Errors
/// As [`read_matrix_market`].
pub fn read_matrix_market_from<T: Elem, R: BufRead>(reader: R, name: &str) -> Result<CsrMatrix<T>> {
    read_matrix_market_from_with(reader, name, &ReadOptions::default())
}

/// [`read_matrix_market_from`] with explicit [`ReadOptions`] (a memory budget).
///
/// # Errors
/// As [`read_matrix_market_with`].
pub fn read_matrix_market_from_with<T: Elem, R: BufRead>(
    reader: R,
    name: &str,
    opts: &ReadOptions,
) -> Result<CsrMatrix<T>> {
    let mut lines = Lines::new(source(reader, name)?, name);
    let info = parse_header(&mut lines)?;
    let hdr = info.hdr;
    if let Some(msg) = complex_into_real::<T>(&hdr, "matrix") {
        return Err(lines.err(1, msg));
    }
    if hdr.format == MmFormat::Coordinate && hdr.entries > U32_LIMIT {
        return Err(lines.err(
            info.size_line,
            format!(
                "the size line declares {} entries, beyond segsparse's 32-bit limit ({})",
                hdr.entries,
                u32::MAX
            ),
        ));
    }
    let budget = Budget::for_matrix::<T, _>(&lines, &info, opts)?;
    let mut t = Triplets::<T>::new(hdr.entries, budget);
    match hdr.format {
        MmFormat::Coordinate => read_coordinate(&mut lines, &info, &mut t)?,
        MmFormat::Array => read_array(&mut lines, &info, &mut t)?,
    }
    t.into_csr(&lines, hdr.nrows as usize, hdr.ncols as usize)
}

/// Entries gathered in file order, with separate arrays to keep them at 8 + sizeof(T) bytes.
struct Triplets<T> {
    rows: Vec<u32>,
    cols: Vec<u32>,
    vals: Vec<T>,
    budget: Budget,
}

impl<T: Elem> Triplets<T> {
    /// Reserves for `declared` entries, but never more than [`MAX_RESERVE`] or the budget: the
    /// count in a header is not trusted for allocation.
    fn new(declared: u64, budget: Budget) -> Self {
        let n = declared
            .min(MAX_RESERVE as u64)
            .min(budget.max_entries as u64) as usize;
        Triplets {
            rows: Vec::with_capacity(n),
            cols: Vec::with_capacity(n),
            vals: Vec::with_capacity(n),
            budget,
        }
    }

    /// Called after each line's entries are pushed: refuses a file whose entries outgrow the
    /// budget (at most two entries past it are ever held).
    #[inline]
    fn check_budget<R>(&self, lines: &Lines<R>) -> Result<()> {
        if self.rows.len() > self.budget.max_entries {
            return Err(self.budget.exceeded::<T, R>(lines, self.rows.len()));
        }
        Ok(())
    }

    #[inline]
    fn push(&mut self, r: u32, c: u32, v: T) {
        self.rows.push(r);
        self.cols.push(c);
        self.vals.push(v);
    }

    /// Counting sort by row, then sort within rows and sum duplicates.
    fn into_csr<R>(self, lines: &Lines<R>, nrows: usize, ncols: usize) -> Result<CsrMatrix<T>> {
        let nnz = self.rows.len();
        if nnz as u64 > U32_LIMIT {
            return Err(lines.err(
                0,
                format!(
                    "the matrix has {nnz} entries after symmetric expansion, beyond segsparse's \
                     32-bit limit ({})",
                    u32::MAX
                ),
            ));
        }
        let alloc_err = |what: &str, n: usize| {
            lines.err(
                0,
                format!("cannot allocate {what} for {n} rows declared by the size line"),
            )
        };
        let mut row_ptr: Vec<u32> = Vec::new();
        row_ptr
            .try_reserve_exact(nrows + 1)
            .map_err(|_| alloc_err("row pointers", nrows))?;
        let sorted_rows = self.rows.windows(2).all(|w| w[0] <= w[1]);
        // Entries in (row, column) order without duplicates need no sorting afterwards; this
        // check costs O(nnz) where the CSR's own costs O(rows + nnz).
        let strictly_sorted = sorted_rows
            && (1..nnz).all(|k| self.rows[k - 1] < self.rows[k] || self.cols[k - 1] < self.cols[k]);
        if sorted_rows {
            // Entries in row order (most files, and any mostly-empty matrix): each row pointer
            // is written once, runs of empty rows by a vectorised fill, so a billion declared
            // rows cost one pass at memory speed. row_ptr[i] = number of entries in rows < i.
            let mut k = 0;
            while k < nnz {
                let r = self.rows[k] as usize;
                row_ptr.resize(r + 1, k as u32);
                while k < nnz && self.rows[k] as usize == r {
                    k += 1;
                }
            }
            row_ptr.resize(nrows + 1, nnz as u32);
        } else {
            // Counting sort: row counts, then their exclusive prefix sum.
            row_ptr.resize(nrows + 1, 0);
            for &r in &self.rows {
                row_ptr[r as usize + 1] += 1;
            }
            for i in 0..nrows {
                row_ptr[i + 1] += row_ptr[i];
            }
        }
        let (col_idx, values) = if sorted_rows {
            (self.cols, self.vals)
        } else {
            let mut next: Vec<u32> = Vec::new();
            next.try_reserve_exact(nrows)
                .map_err(|_| alloc_err("a work array", nrows))?;
            next.extend_from_slice(&row_ptr[..nrows]);
            let mut col_idx = vec![0u32; nnz];
            let mut values = vec![T::zero(); nnz];
            for k in 0..nnz {
                let r = self.rows[k] as usize;
                let p = next[r] as usize;
                col_idx[p] = self.cols[k];
                values[p] = self.vals[k];
                next[r] += 1;
            }
            (col_idx, values)
        };
        drop(self.rows);
        let mut m = CsrMatrix::try_from_parts(nrows, ncols, row_ptr, col_idx, values)
            .map_err(|e| lines.err(0, format!("internal error assembling CSR: {e}")))?;
        if !strictly_sorted && !m.has_sorted_indices() {
            m.sort_indices();
            m.sum_duplicates();
        }
        Ok(m)
    }
}

/// Tracks on which side of the diagonal a symmetric file stores its entries.
#[derive(Default)]
struct Triangle {
    lower: Option<usize>,
    upper: Option<usize>,
}

impl Triangle {
    fn check<R>(&mut self, lines: &Lines<R>, r: u32, c: u32) -> Result<()> {
        let (mine, other, side, other_side) = if r > c {
            (&mut self.lower, self.upper, "below", "above")
        } else {
            (&mut self.upper, self.lower, "above", "below")
        };
        if let Some(o) = other {
            return Err(lines.err(
                lines.line,
                format!(
                    "entry ({}, {}) lies {side} the diagonal but line {o} lies {other_side} it: \
                     a symmetric or skew-symmetric file lists one triangle only",
                    r + 1,
                    c + 1
                ),
            ));
        }
        mine.get_or_insert(lines.line);
        Ok(())
    }
}

fn read_coordinate<T: Elem, R: BufRead>(
    lines: &mut Lines<R>,
    info: &HeaderInfo,
    t: &mut Triplets<T>,
) -> Result<()> {
    let hdr = &info.hdr;
    let expected = hdr.entries;
    let pattern = hdr.field == MmField::Pattern;
    let complex = hdr.field == MmField::Complex;
    let (form, nfields) = match hdr.field {
        MmField::Pattern => ("'row col'", 2),
        MmField::Complex => ("'row col real imaginary'", 4),
        _ => ("'row col value'", 3),
    };
    let mut count: u64 = 0;
    let mut tri = Triangle::default();
    while lines.next_data()? {
        let line = lines.line;
        if count == expected {
            return Err(lines.err(
                line,
                format!(
                    "too many entries: the size line (line {}) declares {expected}, this is entry {}",
                    info.size_line,
                    expected + 1
                ),
            ));
        }
        count += 1;
        let mut it = tokens(&lines.buf);
        let (rt, ct, vt) = (it.next(), it.next(), it.next());
        let it_ = if complex { it.next() } else { None };
        let extra = if pattern { vt } else { it.next() };
        let e = |m: String| Err(lines.err(line, m));
        let Some(rt) = rt else {
            return e(format!("empty entry (expected {form})"));
        };
        let Some(ct) = ct else {
            return e(format!("missing column index (expected {form})"));
        };
        let r = match parse_index(rt, "row", hdr.nrows, "rows") {
            Ok(r) => r,
            Err(m) => return e(m),
        };
        let c = match parse_index(ct, "column", hdr.ncols, "columns") {
            Ok(c) => c,
            Err(m) => return e(m),
        };
        if let Some(x) = extra {
            return e(format!(
                "too many fields: expected {nfields} {form} for a {} file, found more ('{}')",
                hdr.field,
                show(x)
            ));
        }
        let v: T = if pattern {
            T::one()
        } else {
            let Some(vt) = vt else {
                return e(format!("missing value (expected {form})"));
            };
            match parse_value(vt, it_, hdr.field) {
                Ok(v) => v,
                Err(m) => return e(m),
            }
        };
        match hdr.symmetry {
            MmSymmetry::General => t.push(r, c, v),
            MmSymmetry::Symmetric => {
                t.push(r, c, v);
                if r != c {
                    tri.check(lines, r, c)?;
                    t.push(c, r, v);
                }
            }
            MmSymmetry::SkewSymmetric => {
                if r == c {
                    if v != T::zero() {
                        return e(format!(
                            "diagonal entry ({}, {}) = {v} in a skew-symmetric file (its diagonal is zero)",
                            r + 1,
                            c + 1
                        ));
                    }
                    t.push(r, c, v);
                } else {
                    tri.check(lines, r, c)?;
                    t.push(r, c, v);
                    t.push(c, r, -v);
                }
            }
            MmSymmetry::Hermitian => {
                if r == c {
                    if v.im() != T::Real::zero() {
                        return e(format!(
                            "diagonal entry ({}, {}) = {v} in a hermitian file (its diagonal is real)",
                            r + 1,
                            c + 1
                        ));
                    }
                    t.push(r, c, v);
                } else {
                    tri.check(lines, r, c)?;
                    t.push(r, c, v);
                    t.push(c, r, v.conj());
                }
            }
        }
        t.check_budget(lines)?;
    }
    if count < expected {
        return Err(lines.err(
            lines.line.max(info.size_line),
            format!(
                "too few entries: the file ends after {count} of the {expected} entries declared \
                 by the size line (line {})",
                info.size_line
            ),
        ));
    }
    Ok(())
}

fn read_array<T: Elem, R: BufRead>(
    lines: &mut Lines<R>,
    info: &HeaderInfo,
    t: &mut Triplets<T>,
) -> Result<()> {
    let hdr = &info.hdr;
    let (nrows, ncols) = (hdr.nrows as u32, hdr.ncols as u32);
    let expected = hdr.entries;
    let first_row = |j: u32| match hdr.symmetry {
        MmSymmetry::General => 0,
        MmSymmetry::SkewSymmetric => j + 1,
        _ => j,
    };
    // Position of the next value, column-major.
    let (mut i, mut j) = (first_row(0), 0u32);
    let mut count: u64 = 0;
    while lines.next_data()? {
        let line = lines.line;
        if count == expected {
            return Err(lines.err(
                line,
                format!(
                    "too many values: the size line (line {}) declares a {}×{} {} array of {expected} values, this is value {}",
                    info.size_line, hdr.nrows, hdr.ncols, hdr.symmetry, expected + 1
                ),
            ));
        }
        count += 1;
        // `expected > 0` and the counter runs column-major, so (i, j) is in range here.
        let v: T = array_value(&lines.buf, hdr.field).map_err(|m| lines.err(line, m))?;
        if hdr.symmetry == MmSymmetry::Hermitian && i == j && v.im() != T::Real::zero() {
            return Err(lines.err(
                line,
                format!(
                    "diagonal value ({}, {}) = {v} in a hermitian file (its diagonal is real)",
                    i + 1,
                    j + 1
                ),
            ));
        }
        if v != T::zero() {
            t.push(i, j, v);
            if i != j {
                match hdr.symmetry {
                    MmSymmetry::Symmetric => t.push(j, i, v),
                    MmSymmetry::SkewSymmetric => t.push(j, i, -v),
                    MmSymmetry::Hermitian => t.push(j, i, v.conj()),
                    MmSymmetry::General => {}
                }
            }
            t.check_budget(lines)?;
        }
        i += 1;
        if i >= nrows {
            j += 1;
            i = if j < ncols { first_row(j) } else { 0 };
        }
    }
    if count < expected {
        return Err(lines.err(
            lines.line.max(info.size_line),
            format!(
                "too few values: the file ends after {count} of the {expected} values of the {}×{} {} array declared by the size line (line {})",
                hdr.nrows, hdr.ncols, hdr.symmetry, info.size_line
            ),
        ));
    }
    Ok(())
}

/// The value of one line of an array file: one number, two for a complex field.
fn array_value<T: Elem>(buf: &[u8], field: MmField) -> std::result::Result<T, String> {
    let mut it = tokens(buf);
    let vt = it.next().unwrap_or_default();
    let im = if field == MmField::Complex {
        it.next()
    } else {
        None
    };
    if let Some(x) = it.next() {
        return Err(format!(
            "too many fields: an array file has one value per line{}, found more ('{}')",
            if field == MmField::Complex {
                " (real and imaginary parts)"
            } else {
                ""
            },
            show(x)
        ));
    }
    parse_value(vt, im, field)
}

// ---------------------------------------------------------------------------------------------
// Vectors
// ---------------------------------------------------------------------------------------------

/// Reads a dense vector (a right-hand side or a solution): an `array` file with one column (or one
/// row), or a `coordinate` file of shape `n×1` (or `1×n`) whose missing entries are zero and whose
/// duplicates are summed. The symmetry must be `general`.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened; [`Error::MatrixMarket`] for a malformed file or
/// a shape that is not a vector.
pub fn read_vector<T: Elem>(path: impl AsRef<Path>) -> Result<Vec<T>> {
    let path = path.as_ref();
    read_vector_from_with(open(path)?, &display_name(path), &ReadOptions::default())
}

/// [`read_vector`] from any buffered reader (plain or gzip-compressed text, detected by its
/// first bytes); `name` is used in error messages.
///
/// # Errors
/// As [`read_vector`].
pub fn read_vector_from<T: Elem, R: BufRead>(reader: R, name: &str) -> Result<Vec<T>> {
    read_vector_from_with(reader, name, &ReadOptions::default())
}

/// [`read_vector_from`] with explicit [`ReadOptions`] (a memory budget).
///
/// # Errors
/// As [`read_vector`], and [`Error::MatrixMarket`] when the declared length needs more memory
/// than `opts.max_bytes`.
pub fn read_vector_from_with<T: Elem, R: BufRead>(
    reader: R,
    name: &str,
    opts: &ReadOptions,
) -> Result<Vec<T>> {
    let mut lines = Lines::new(source(reader, name)?, name);
    let info = parse_header(&mut lines)?;
    let hdr = info.hdr;
    if hdr.field == MmField::Pattern {
        return Err(lines.err(1, format!("a {} file cannot hold a vector", hdr.field)));
    }
    if let Some(msg) = complex_into_real::<T>(&hdr, "vector") {
        return Err(lines.err(1, msg));
    }
    if hdr.symmetry != MmSymmetry::General {
        return Err(lines.err(
            1,
            format!("a vector file must be general, not {}", hdr.symmetry),
        ));
    }
    if hdr.nrows != 1 && hdr.ncols != 1 {
        return Err(lines.err(
            info.size_line,
            format!(
                "expected a vector (one column or one row), but the size line declares {}×{}",
                hdr.nrows, hdr.ncols
            ),
        ));
    }
    let len = (hdr.nrows * hdr.ncols) as usize;
    let budget = Budget::for_vector::<T, _>(&lines, &info, opts, len as u64)?;
    match hdr.format {
        MmFormat::Array => {
            let mut v = Vec::with_capacity(len.min(MAX_RESERVE));
            while lines.next_data()? {
                let line = lines.line;
                if v.len() == len {
                    return Err(lines.err(
                        line,
                        format!(
                            "too many values: the size line (line {}) declares {len}",
                            info.size_line
                        ),
                    ));
                }
                v.push(array_value(&lines.buf, hdr.field).map_err(|m| lines.err(line, m))?);
            }
            if v.len() < len {
                return Err(lines.err(
                    lines.line.max(info.size_line),
                    format!(
                        "too few values: the file ends after {} of the {len} values declared by the size line (line {})",
                        v.len(),
                        info.size_line
                    ),
                ));
            }
            Ok(v)
        }
        MmFormat::Coordinate => {
            let mut t = Triplets::<T>::new(hdr.entries, budget);
            read_coordinate(&mut lines, &info, &mut t)?;
            let mut v: Vec<T> = Vec::new();
            v.try_reserve_exact(len).map_err(|_| {
                lines.err(
                    info.size_line,
                    format!("cannot allocate a vector of {len} values"),
                )
            })?;
            v.resize(len, T::zero());
            let idx = if hdr.ncols == 1 { &t.rows } else { &t.cols };
            for (&k, &x) in idx.iter().zip(&t.vals) {
                v[k as usize] += x;
            }
            Ok(v)
        }
    }
}
