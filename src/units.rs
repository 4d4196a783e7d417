//! Byte counts as people read and write them, and the share of memory the preflight keeps free.
//!
//! At the bottom of the crate, beside [`error`](crate::error), because the error that reports a
//! refused allocation ([`Error::OutOfMemory`](crate::Error::OutOfMemory)) prints its figures
//! with [`human`] and states the margin; [`memory`](crate::memory) (the preflight) and
//! [`io`](crate::io) (the reader's budget) build on it. `memory` re-exports all three.

/// The share of the available memory kept free by the preflight, in percent.
pub const MARGIN_PERCENT: u64 = 10;

/// Bytes as a person reads them: `8.00 GB (8000000000 bytes)`.
pub fn human(bytes: u64) -> String {
    format!("{:.2} GB ({bytes} bytes)", bytes as f64 / 1e9)
}

/// `123`, `64K`, `512M`, `8G` (binary multiples).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}
