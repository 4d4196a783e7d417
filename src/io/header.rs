//! The Matrix Market banner and size line.

use std::fmt;

/// How the entries are listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmFormat {
    /// Sparse: one `row col [value]` line per stored entry.
    Coordinate,
    /// Dense: every value, column by column.
    Array,
}

/// The type of the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmField {
    /// Floating-point values.
    Real,
    /// Integer values (read exactly when they fit the mantissa, rounded otherwise).
    Integer,
    /// No values: every stored entry is 1.
    Pattern,
    /// Complex values (recognized by [`super::read_header`], rejected by the matrix reader).
    Complex,
}

/// Which part of the matrix the file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmSymmetry {
    /// Every entry is listed.
    General,
    /// `a_ij = a_ji`; the lower triangle (with the diagonal) is listed.
    Symmetric,
    /// `a_ij = -a_ji`; the strictly lower triangle is listed.
    SkewSymmetric,
    /// `a_ij = conj(a_ji)` (complex only; rejected by the matrix reader).
    Hermitian,
}

/// The banner and size line of a Matrix Market file, as declared (nothing is checked against the
/// entries that follow). Read with [`super::read_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixMarketHeader {
    /// `coordinate` or `array`.
    pub format: MmFormat,
    /// `real`, `integer`, `pattern` or `complex`.
    pub field: MmField,
    /// `general`, `symmetric`, `skew-symmetric` or `hermitian`.
    pub symmetry: MmSymmetry,
    /// Declared number of rows.
    pub nrows: u64,
    /// Declared number of columns.
    pub ncols: u64,
    /// Number of data values the file declares: the third number of a coordinate size line (the
    /// stored entries, one triangle for symmetric files), or for an array file the number of
    /// values listed (`nrows·ncols`, or the lower triangle for symmetric and skew-symmetric).
    pub entries: u64,
}

impl MatrixMarketHeader {
    /// The most entries the matrix can store after symmetric expansion (one triangle doubled).
    pub fn stored_entries_max(&self) -> u64 {
        match self.symmetry {
            MmSymmetry::General => self.entries,
            _ => self.entries.saturating_mul(2),
        }
    }

    /// The host bytes of the `CsrMatrix<T>` this file becomes, at most (`u32` row pointers and
    /// column indices, `T` values); saturating.
    pub fn csr_bytes<T>(&self) -> u64 {
        let sz = std::mem::size_of::<T>() as u64;
        self.nrows
            .saturating_add(1)
            .saturating_mul(4)
            .saturating_add(self.stored_entries_max().saturating_mul(4 + sz))
    }

    /// The reader's peak host bytes for this file read as `T` (the row pointers and counting
    /// sort's work array, the triplets being read and the CSR copy), as its memory budget counts
    /// them ([`super::ReadOptions::max_bytes`]); saturating.
    pub fn read_peak_bytes<T>(&self) -> u64 {
        let sz = std::mem::size_of::<T>() as u64;
        self.nrows
            .saturating_mul(8)
            .saturating_add(4)
            .saturating_add(self.stored_entries_max().saturating_mul(12 + 2 * sz))
    }
}

impl MmFormat {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "coordinate" => Some(Self::Coordinate),
            "array" => Some(Self::Array),
            _ => None,
        }
    }
}

impl MmField {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "real" | "double" => Some(Self::Real),
            "integer" => Some(Self::Integer),
            "pattern" => Some(Self::Pattern),
            "complex" => Some(Self::Complex),
            _ => None,
        }
    }
}

impl MmSymmetry {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "general" => Some(Self::General),
            "symmetric" => Some(Self::Symmetric),
            "skew-symmetric" => Some(Self::SkewSymmetric),
            "hermitian" => Some(Self::Hermitian),
            _ => None,
        }
    }
}

impl fmt::Display for MmFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Coordinate => "coordinate",
            Self::Array => "array",
        })
    }
}

impl fmt::Display for MmField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Real => "real",
            Self::Integer => "integer",
            Self::Pattern => "pattern",
            Self::Complex => "complex",
        })
    }
}

impl fmt::Display for MmSymmetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::General => "general",
            Self::Symmetric => "symmetric",
            Self::SkewSymmetric => "skew-symmetric",
            Self::Hermitian => "hermitian",
        })
    }
}

impl fmt::Display for MatrixMarketHeader {
    /// `coordinate real symmetric 48×48, 224 entries`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}×{}, {} entries",
            self.format, self.field, self.symmetry, self.nrows, self.ncols, self.entries
        )
    }
}
