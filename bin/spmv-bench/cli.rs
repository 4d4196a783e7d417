//! Command-line arguments of `spmv-bench` (clap derive: the doc comments are the help text).

use clap::{Parser, ValueEnum};

/// The matrix benchmarked when none is named.
pub const DEFAULT_MATRIX: &str = "matrices/raefsky2.mtx.gz";

/// Sparse matrix–vector product benchmark: y ← A·x with every implementation in one process.
///
/// For each matrix it prints the shape, the number of entries and the row-length statistics, then
/// for each implementation and precision the median time, GFLOP/s (2·nnz/t), GB/s (each input
/// read once, each output written once), SpMV/s and the largest error relative to an
/// f64-accumulated sequential reference. The seed paper's raefsky2 figures are printed beside
/// today's.
#[derive(Parser, Debug, Clone)]
#[command(name = "spmv-bench", version, about, long_about = None)]
pub struct Cli {
    /// Matrix Market files (.mtx or .mtx.gz) or generator specs (poisson2d:N, poisson3d:N,
    /// random:N:K, powerlaw:N:ALPHA, ...). Relative paths are looked up in the current directory,
    /// then beside the executable's parent directories (so target/release/spmv-bench finds the
    /// repository's matrices/). A `+rcm` suffix renumbers the matrix in reverse Cuthill–McKee
    /// order (e.g. geolap:2000000:6+rcm).
    #[arg(value_name = "MATRIX|SPEC", default_value = DEFAULT_MATRIX)]
    pub matrices: Vec<String>,

    /// Floating-point precision of the runs.
    #[arg(short, long, value_enum, default_value_t = PrecisionArg::Both)]
    pub precision: PrecisionArg,

    /// Which implementations to run.
    #[arg(short, long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,

    /// Timed samples per implementation and precision (the median is reported); each sample
    /// repeats the product until it lasts at least a millisecond.
    #[arg(short, long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,

    /// Output format: a table for people, or one line per (matrix, implementation, precision).
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Seed of the random vector x and of random generator specs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// With `--format json`: one more line per matrix, `{"matrix": ..., "features": {...},
    /// "auto": {...}}`, with the pattern statistics the automatic GPU choice reads and what it
    /// chose in each precision.
    #[arg(long)]
    pub features: bool,

    /// Shortest warm-up of each implementation, milliseconds (at least three calls).
    #[arg(long, default_value_t = 50.0)]
    pub warmup_ms: f64,

    /// Sparse matrix times dense block instead: Y ← A·X for X of K columns (a comma-separated
    /// list runs each K). Times segsparse's SpMM in both layouts, cuSPARSE `cusparseSpMM` (every
    /// CSR algorithm, best reported) and K separate SpMVs, on the GPU, in the same process; with
    /// `--backend cpu`, the CPU SpMM beside K CPU SpMVs.
    #[arg(long, value_name = "K", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub rhs: Vec<u32>,
}

/// `--precision`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecisionArg {
    /// Single precision only.
    F32,
    /// Double precision only.
    F64,
    /// Both, f32 first.
    Both,
    /// Single-precision complex (`Complex<f32>`, NumPy's complex64, cuSPARSE's C).
    C64,
    /// Double-precision complex (`Complex<f64>`, NumPy's complex128, cuSPARSE's Z).
    C128,
}

impl PrecisionArg {
    /// The real precisions to run, in order (none for a complex one: those run apart, see
    /// [`PrecisionArg::is_complex`]).
    pub fn list(self) -> Vec<segsparse::Precision> {
        use segsparse::Precision::{F32, F64};
        match self {
            PrecisionArg::F32 => vec![F32],
            PrecisionArg::F64 => vec![F64],
            PrecisionArg::Both => vec![F32, F64],
            PrecisionArg::C64 | PrecisionArg::C128 => vec![],
        }
    }

    /// True for `c64` and `c128` (the complex benchmark, `complex.rs`).
    pub fn is_complex(self) -> bool {
        matches!(self, PrecisionArg::C64 | PrecisionArg::C128)
    }
}

/// `--backend`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// Every implementation that can run here (today: the CPU ones).
    Auto,
    /// CPU implementations only (segsparse and the sprs peer).
    Cpu,
    /// GPU implementations only (an error when there is no device or no GPU SpMV).
    Gpu,
}

/// `--format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned table with a header per matrix.
    Table,
    /// One JSON object per line.
    Json,
    /// Comma-separated values with one header line.
    Csv,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_and_values() {
        let c = Cli::try_parse_from(["spmv-bench"]).unwrap();
        assert_eq!(c.matrices, vec![DEFAULT_MATRIX.to_string()]);
        assert_eq!(c.precision, PrecisionArg::Both);
        assert_eq!(c.backend, BackendArg::Auto);
        assert_eq!(c.format, Format::Table);
        let c = Cli::try_parse_from([
            "spmv-bench",
            "a.mtx",
            "poisson2d:10",
            "--precision",
            "f64",
            "--backend",
            "cpu",
            "--iters",
            "3",
            "--format",
            "json",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!(c.matrices, vec!["a.mtx", "poisson2d:10"]);
        assert_eq!(c.precision.list(), vec![segsparse::Precision::F64]);
        assert_eq!((c.iters, c.seed, c.format), (3, 7, Format::Json));
        assert!(Cli::try_parse_from(["spmv-bench", "--iters", "0"]).is_err());
        assert!(Cli::try_parse_from(["spmv-bench", "--precision", "f16"]).is_err());
        let c = Cli::try_parse_from(["spmv-bench", "--precision", "c128"]).unwrap();
        assert!(c.precision.is_complex() && c.precision.list().is_empty());
        let c = Cli::try_parse_from(["spmv-bench", "--rhs", "4,8", "--rhs", "16"]).unwrap();
        assert_eq!(c.rhs, vec![4, 8, 16]);
        assert!(Cli::try_parse_from(["spmv-bench", "--rhs", "0"]).is_err());
    }
}
