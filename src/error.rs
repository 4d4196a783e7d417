//! The crate's error type.
//!
//! Following sprs' guidelines, *contract violations* by the programmer (two vectors of different
//! lengths handed to one operation, a workspace of the wrong size) panic with both sizes in the
//! message, while *bad data or a bad environment* (a malformed file, a broken CSR structure, no CUDA
//! driver, an NVRTC compile failure, a solver that broke down) come back as an [`Error`] whose
//! message names what is wrong and where: the file and line, the index, the kernel and its log.

use std::fmt;
use std::path::PathBuf;

/// Convenience alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in segsparse that is not a programming error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file failed at the operating-system level.
    Io {
        /// The file involved, when known.
        path: Option<PathBuf>,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A Matrix Market file is malformed. `line` is 1-based; 0 means "the file as a whole".
    MatrixMarket {
        /// The file (or `"<reader>"` for in-memory input).
        path: String,
        /// 1-based line number, 0 when the problem is not tied to one line (e.g. too few entries).
        line: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// The arrays handed to a CSR constructor break one of its invariants.
    InvalidStructure(String),
    /// An argument that is data rather than a contract is not acceptable (an unknown matrix spec,
    /// a matrix too large for 32-bit GPU indices, ...).
    InvalidInput(String),
    /// No usable CUDA device: the driver library is absent, no device is present, or the crate was
    /// built without the `cuda` feature. The CPU backend keeps working.
    CudaUnavailable(String),
    /// A CUDA driver call failed. `context` names the operation or kernel.
    Cuda {
        /// What was being done: a kernel name, "memcpy", "alloc", ...
        context: String,
        /// The driver's description of the failure.
        message: String,
    },
    /// NVRTC could not compile a kernel source.
    Compile {
        /// The kernel source (module) that failed.
        kernel: String,
        /// The NVRTC log.
        log: String,
    },
    /// A cuSPARSE call failed (used by the benchmarks' peer measurements).
    Cusparse(String),
    /// An iterative or direct solver failed; see [`crate::solvers::SolveError`].
    Solver(String),
    /// The memory preflight ([`crate::memory`]) refused an allocation proportional to the
    /// problem: it would not fit into what the host or the device has.
    OutOfMemory {
        /// What was to be allocated ("CG's workspace", "the matrix upload", ...).
        what: String,
        /// Bytes needed.
        need: u64,
        /// Bytes available when it was checked.
        available: u64,
        /// Where: "host memory (MemAvailable)", "device memory of NVIDIA H200", ...
        place: String,
    },
}

impl Error {
    /// Builds a [`Error::MatrixMarket`].
    pub fn mtx(path: impl Into<String>, line: usize, message: impl Into<String>) -> Self {
        Error::MatrixMarket {
            path: path.into(),
            line,
            message: message.into(),
        }
    }

    /// Builds a [`Error::Cuda`] from anything printable. A driver error that leaves the context
    /// unusable (a kernel that faulted: illegal address, trap, failed launch, ...) says so, since
    /// every later call in the process fails with the same code.
    pub fn cuda(context: impl Into<String>, err: impl fmt::Display) -> Self {
        let mut message = err.to_string();
        if STICKY.iter().any(|code| message.contains(code)) {
            message.push_str(
                " (a sticky error: the CUDA context is unusable from now on, and every later GPU \
                 call of this process fails; a kernel faulted, possibly in earlier work on this \
                 stream)",
            );
        } else if message.contains("CUDA_ERROR_OUT_OF_MEMORY") {
            message.push_str(" (out of device memory)");
        }
        Error::Cuda {
            context: context.into(),
            message,
        }
    }

    /// True when a CUDA error left the context unusable (see [`Error::cuda`]).
    pub fn is_sticky_cuda_error(&self) -> bool {
        matches!(self, Error::Cuda { message, .. } if STICKY.iter().any(|c| message.contains(c)))
    }

    /// True when the error says that no GPU can be used (as opposed to a GPU that failed).
    pub fn is_cuda_unavailable(&self) -> bool {
        matches!(self, Error::CudaUnavailable(_))
    }
}

/// Driver error codes after which the context cannot be used again (CUDA's "sticky" errors).
const STICKY: &[&str] = &[
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
];

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io {
                path: Some(p),
                source,
            } => write!(f, "{}: {}", p.display(), source),
            Error::Io { path: None, source } => write!(f, "I/O error: {source}"),
            Error::MatrixMarket {
                path,
                line: 0,
                message,
            } => write!(f, "{path}: {message}"),
            Error::MatrixMarket {
                path,
                line,
                message,
            } => write!(f, "{path}:{line}: {message}"),
            Error::InvalidStructure(m) => write!(f, "invalid CSR structure: {m}"),
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Error::CudaUnavailable(m) => write!(f, "no usable CUDA device: {m}"),
            Error::Cuda { context, message } => write!(f, "CUDA error in {context}: {message}"),
            Error::Compile { kernel, log } => {
                write!(f, "NVRTC failed to compile kernel source {kernel}:\n{log}")
            }
            Error::Cusparse(m) => write!(f, "cuSPARSE error: {m}"),
            Error::Solver(m) => write!(f, "solver error: {m}"),
            Error::OutOfMemory {
                what,
                need,
                available,
                place,
            } => write!(
                f,
                "out of memory: {what} needs {} of {place}, which has {} available (at most {} % \
                 of it is used)",
                crate::units::human(*need),
                crate::units::human(*available),
                100 - crate::units::MARGIN_PERCENT
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: None, source }
    }
}
