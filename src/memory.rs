//! Memory preflight: before allocating something proportional to the problem, compare the bytes
//! it needs with what the host or the device has, and refuse with an error naming both figures.
//!
//! # Why
//!
//! An allocation that cannot be served does not fail cleanly on Linux: host memory is
//! overcommitted, so `vec![0.0; 10^9]` succeeds and the process is killed by the OOM killer
//! minutes later, when the pages are touched (a 24 GB machine took 122 s to kill a solve of a
//! file that declared 10^9 rows). On the device, running out half way through a solve's
//! workspace wastes the allocations before it. So every entry point that allocates in
//! proportion to the problem first adds up what it will need and asks this module:
//!
//! | entry point | what it checks | against |
//! |---|---|---|
//! | [`solvers`](crate::solvers) `cg`, `pcg`, `bicgstab`, `gmres` | the workspace vectors, GMRES's `m + 1` Krylov basis vectors, the residual history | host ([`Cpu`](crate::backend::Cpu)) or device (`GpuOps`) |
//! | `spmv::gpu::GpuCsr::upload` | the CSR arrays and the SpMV's structure tables | device |
//! | `sparse-solve`, `spmv-bench`, the Python package | the matrix, `b`, `x` and the vectors of the benchmark or solve | host (then the library checks its own part) |
//!
//! # How to call it from new code
//!
//! Add up the bytes with [`bytes_of`] (it saturates instead of overflowing, so an absurd size
//! gives an absurd figure and a refusal, never a wrapped small one), then call
//! [`check_host`] or (feature `cuda`) `Gpu::check_memory`, *before* the first allocation:
//!
//! ```
//! use segsparse::memory::{self, bytes_of};
//! // An AMG level of n rows and nnz entries in f64: CSR arrays plus three smoother vectors.
//! let (n, nnz) = (1000usize, 5000usize);
//! let need = bytes_of::<u32>(n + 1) + bytes_of::<u32>(nnz) + bytes_of::<f64>(nnz)
//!     + 3 * bytes_of::<f64>(n);
//! memory::check_host("an AMG level", need)?; // Err(Error::OutOfMemory { .. }) when it cannot fit
//! # Ok::<(), segsparse::Error>(())
//! ```
//!
//! A solver backend does the same through
//! [`VectorOps::check_memory`](crate::backend::VectorOps::check_memory), which the CPU backend
//! maps to [`check_host`] and the GPU backend to the device check.
//!
//! # The rule
//!
//! A request of `need` bytes fits when `need ≤ available − margin`, where `available` is
//! `MemAvailable` of `/proc/meminfo` on the host (what the kernel can hand out without
//! swapping) or, on the device, `cuMemGetInfo`'s free bytes plus what this process's memory
//! pool holds unused, and the margin is [`MARGIN_PERCENT`] % of `available` (room for the
//! allocator, the CUDA context, the caller's other data). Requests below [`UNCHECKED_BYTES`] are
//! not checked: they cannot be the one that exhausts a machine, and small solves then pay for
//! no query. Where the figure cannot be read (not Linux), the host check passes. The device's
//! check of each buffer it allocates (`Gpu::zeros`, `Gpu::alloc`, `Gpu::upload`) reads the
//! driver's figure once and spends it down: a buffer that fits what is left passes without a
//! driver query (buffers freed since only add to the real figure), one that does not reads the
//! figure again.
//! `SEGSPARSE_MAX_HOST_BYTES` and `SEGSPARSE_MAX_DEVICE_BYTES` (bytes, or with a `K`/`M`/`G`
//! suffix) cap `available`, to share a machine or to test the refusals.

use crate::error::{Error, Result};

pub use crate::units::{human, parse_bytes, MARGIN_PERCENT};

/// Requests smaller than this (4 MiB) are not checked.
pub const UNCHECKED_BYTES: u64 = 4 << 20;

/// `count` elements of `T` in bytes, saturating at `u64::MAX`.
pub fn bytes_of<T>(count: usize) -> u64 {
    (count as u64).saturating_mul(std::mem::size_of::<T>() as u64)
}

/// What of `available` bytes may be used: `available` minus the margin.
pub fn usable(available: u64) -> u64 {
    available - available / 100 * MARGIN_PERCENT - available % 100 * MARGIN_PERCENT / 100
}

/// The arithmetic of every check: `Ok` when `need` bytes fit into `available` bytes of `place`
/// ("host memory", "device memory on NVIDIA H200") with the margin, else
/// [`Error::OutOfMemory`] naming `what`, both figures and the margin.
pub fn check_fits(what: &str, need: u64, available: u64, place: &str) -> Result<()> {
    if need < UNCHECKED_BYTES || need <= usable(available) {
        return Ok(());
    }
    Err(Error::OutOfMemory {
        what: what.to_string(),
        need,
        available,
        place: place.to_string(),
    })
}

/// `MemAvailable` of `/proc/meminfo` in bytes, capped by `SEGSPARSE_MAX_HOST_BYTES`; `None` where
/// neither can be read.
pub fn host_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| meminfo_field(&t, "MemAvailable:"));
    cap(meminfo, "SEGSPARSE_MAX_HOST_BYTES")
}

/// The physical memory (`MemTotal`) in bytes, or `None` where it cannot be read.
pub fn host_total() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| meminfo_field(&t, "MemTotal:"))
}

/// Checks that `need` bytes of host memory can be allocated for `what` (see the module docs).
///
/// # Errors
/// [`Error::OutOfMemory`] naming `what`, the bytes needed and the bytes available.
pub fn check_host(what: &str, need: u64) -> Result<()> {
    if need < UNCHECKED_BYTES {
        return Ok(());
    }
    match host_available() {
        Some(avail) => check_fits(what, need, avail, "host memory (MemAvailable)"),
        None => Ok(()),
    }
}

/// `available` capped by the byte count in the environment variable `var`, when set.
pub(crate) fn cap(available: Option<u64>, var: &str) -> Option<u64> {
    let limit = std::env::var(var).ok().and_then(|v| parse_bytes(&v));
    match (available, limit) {
        (Some(a), Some(l)) => Some(a.min(l)),
        (a, l) => a.or(l),
    }
}

/// A `/proc/meminfo` field (given in kB) in bytes.
fn meminfo_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_is_ten_percent_without_overflow() {
        assert_eq!(usable(1000), 900);
        assert_eq!(usable(0), 0);
        assert_eq!(usable(99), 90); // 99 − 9.9, rounded toward more margin
        assert_eq!(usable(u64::MAX), u64::MAX - u64::MAX / 10);
    }

    #[test]
    fn small_requests_always_pass() {
        assert!(check_fits("x", UNCHECKED_BYTES - 1, 0, "host memory").is_ok());
        assert!(check_fits("x", UNCHECKED_BYTES, 0, "host memory").is_err());
    }

    #[test]
    fn the_issue_file_is_refused_with_both_figures() {
        // 10^9 rows of f64 solver vectors: five of them (CG) need 40 GB; a 24 GB machine with
        // 20 GB available may use 18 GB.
        let need = 5 * bytes_of::<f64>(1_000_000_000);
        assert_eq!(need, 40_000_000_000);
        let e = check_fits("CG's workspace", need, 20_000_000_000, "host memory")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "out of memory: CG's workspace needs 40.00 GB (40000000000 bytes) of host memory, \
             which has 20.00 GB (20000000000 bytes) available (at most 90 % of it is used)"
        );
        // Exactly at the limit fits, one byte over does not.
        assert!(check_fits("v", 18_000_000_000, 20_000_000_000, "host memory").is_ok());
        assert!(check_fits("v", 18_000_000_001, 20_000_000_000, "host memory").is_err());
    }

    #[test]
    fn byte_counts_saturate() {
        assert_eq!(bytes_of::<f64>(usize::MAX), u64::MAX);
        assert_eq!(bytes_of::<u32>(3), 12);
        assert!(check_fits("v", bytes_of::<f64>(usize::MAX), u64::MAX, "host memory").is_err());
    }

    #[test]
    fn meminfo_and_byte_strings_parse() {
        let text = "MemTotal:       24684092 kB\nMemFree:        23497736 kB\n\
                    MemAvailable:   23987564 kB\n";
        assert_eq!(meminfo_field(text, "MemAvailable:"), Some(23987564 * 1024));
        assert_eq!(meminfo_field(text, "MemTotal:"), Some(24684092 * 1024));
        assert_eq!(meminfo_field(text, "Swap:"), None);
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes(" 8g "), Some(8 << 30));
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes(""), None);
    }

    #[test]
    fn the_host_figure_is_read_here() {
        // On Linux (CI, the development machine) MemAvailable is there and nonzero.
        if cfg!(target_os = "linux") {
            assert!(host_available().is_some_and(|a| a > 0));
            assert!(host_total().is_some_and(|t| t > 0));
        }
    }
}
