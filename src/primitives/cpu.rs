//! CPU scans: the sequential reference that defines the semantics, and multithreaded versions.
//!
//! The sequential functions ([`scan`], [`segmented_scan`], [`segmented_scan_offsets`]) walk the
//! input once in the scan's direction with one accumulator, exactly as the table in
//! [`primitives`](super) says; every GPU algorithm is tested against them. The parallel ones
//! ([`par_scan`], [`par_segmented_scan`], [`par_segmented_scan_offsets`]) use the classic
//! three phases on rayon: reduce each chunk to a (segment-started, value) pair, scan the chunk
//! pairs sequentially, then scan each chunk again starting from its carry.
//!
//! The paper's example (Sengupta et al. 2007, §2): the exclusive +-scan of `[3 1 7 0 4 1 6 3]`.
//!
//! ```
//! use segsparse::primitives::{cpu, ScanOp, ScanSpec};
//! let x = [3, 1, 7, 0, 4, 1, 6, 3];
//! let mut y = [0; 8];
//! cpu::scan(&x, &mut y, ScanSpec::exclusive(ScanOp::Plus));
//! assert_eq!(y, [0, 3, 4, 11, 11, 15, 16, 22]);
//! ```
//!
//! Segmented, with the data and flags of the paper's §2.2.2 (one flag at index 3): forward
//! inclusive restarts at 4; backward inclusive sums to the end of each segment — the flag is not
//! shifted by the caller.
//!
//! ```
//! use segsparse::primitives::{cpu, ScanOp, ScanSpec};
//! let x = [1, 2, 3, 4, 5, 6, 7, 8];
//! let f = [false, false, false, true, false, false, false, false];
//! let mut y = [0; 8];
//! cpu::segmented_scan(&x, &f, &mut y, ScanSpec::inclusive(ScanOp::Plus));
//! assert_eq!(y, [1, 3, 6, 4, 9, 15, 22, 30]);
//! cpu::segmented_scan(&x, &f, &mut y, ScanSpec::inclusive(ScanOp::Plus).backward());
//! assert_eq!(y, [6, 5, 3, 30, 26, 21, 15, 8]);
//! cpu::segmented_scan(&x, &f, &mut y, ScanSpec::exclusive(ScanOp::Plus).backward());
//! assert_eq!(y, [5, 3, 0, 26, 21, 15, 8, 0]);
//! // The same segments as CSR offsets, with an empty segment (repeated offset 3).
//! cpu::segmented_scan_offsets(&x, &[0, 3, 3, 8], &mut y, ScanSpec::exclusive(ScanOp::Plus))
//!     .unwrap();
//! assert_eq!(y, [0, 1, 3, 0, 4, 9, 15, 22]);
//! ```

use rayon::prelude::*;

use super::{check_offsets, Direction, ScanElem, ScanKind, ScanSpec};
use crate::Result;

fn check_len(what: &str, a: usize, b: usize) {
    assert!(
        a == b,
        "{what}: input has {a} elements but the other argument has {b}"
    );
}

/// Whether a segment starts at physical index `i` *in the scan's direction*: forward, at a head
/// flag; backward, at the last element of a segment (`i = n-1` or a head at `i+1`).
#[inline]
fn starts(flags: Option<&[bool]>, dir: Direction, i: usize) -> bool {
    match flags {
        None => false,
        Some(f) => match dir {
            Direction::Forward => f[i],
            Direction::Backward => i + 1 == f.len() || f[i + 1],
        },
    }
}

/// Scans physical range `lo..hi` of `input` into `out` (which holds exactly that range),
/// starting from accumulator `acc`; returns the accumulator after the range.
fn scan_range<T: ScanElem>(
    input: &[T],
    flags: Option<&[bool]>,
    out: &mut [T],
    lo: usize,
    spec: ScanSpec,
    mut acc: T,
) -> T {
    let id = T::identity(spec.op);
    let mut step = |i: usize, out: &mut [T]| {
        if starts(flags, spec.direction, i) {
            acc = id;
        }
        match spec.kind {
            ScanKind::Inclusive => {
                acc = T::combine(spec.op, acc, input[i]);
                out[i - lo] = acc;
            }
            ScanKind::Exclusive => {
                out[i - lo] = acc;
                acc = T::combine(spec.op, acc, input[i]);
            }
        }
    };
    let hi = lo + out.len();
    match spec.direction {
        Direction::Forward => (lo..hi).for_each(|i| step(i, out)),
        Direction::Backward => (lo..hi).rev().for_each(|i| step(i, out)),
    }
    acc
}

/// Sequential scan (the reference): `output[i]` per the table in [`primitives`](super).
///
/// # Panics
/// When `output.len() != input.len()`.
pub fn scan<T: ScanElem>(input: &[T], output: &mut [T], spec: ScanSpec) {
    check_len("scan output", input.len(), output.len());
    scan_range(input, None, output, 0, spec, T::identity(spec.op));
}

/// Sequential segmented scan over per-element head flags (`flags[i]`: a segment starts at `i`;
/// element 0 always starts one, whatever `flags[0]` says).
///
/// # Panics
/// When the lengths of `input`, `flags` and `output` differ.
pub fn segmented_scan<T: ScanElem>(input: &[T], flags: &[bool], output: &mut [T], spec: ScanSpec) {
    check_len("segmented_scan flags", input.len(), flags.len());
    check_len("segmented_scan output", input.len(), output.len());
    scan_range(input, Some(flags), output, 0, spec, T::identity(spec.op));
}

/// Sequential segmented scan over CSR-style offsets (`offsets[0] = 0`, non-decreasing,
/// `offsets[m] = n`; repeated offsets are empty segments).
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) for malformed offsets.
///
/// # Panics
/// When `output.len() != input.len()`.
pub fn segmented_scan_offsets<T: ScanElem>(
    input: &[T],
    offsets: &[u32],
    output: &mut [T],
    spec: ScanSpec,
) -> Result<()> {
    let flags = super::flags_from_offsets(offsets, input.len())?;
    segmented_scan(input, &flags, output, spec);
    Ok(())
}

/// Below this many elements the parallel versions run the sequential code.
const PAR_MIN: usize = 1 << 15;

fn chunk_len(n: usize) -> usize {
    let parts = rayon::current_num_threads() * 4;
    n.div_ceil(parts).max(PAR_MIN / 4)
}

fn par_impl<T: ScanElem>(input: &[T], flags: Option<&[bool]>, output: &mut [T], spec: ScanSpec) {
    let n = input.len();
    let id = T::identity(spec.op);
    if n < PAR_MIN || rayon::current_num_threads() == 1 {
        scan_range(input, flags, output, 0, spec, id);
        return;
    }
    let c = chunk_len(n);
    let nchunks = n.div_ceil(c);
    // Phase 1: each chunk's (a segment starts inside, value since the last start) pair, in the
    // scan's direction. An inclusive scan from the identity ends with exactly that value.
    let red: Vec<(bool, T)> = (0..nchunks)
        .into_par_iter()
        .map(|k| {
            let lo = k * c;
            let hi = (lo + c).min(n);
            let started = (lo..hi).any(|i| starts(flags, spec.direction, i));
            let mut acc = id;
            // Only the part after the last start counts; scanning all with resets gives that.
            let mut fold = |i: usize| {
                if starts(flags, spec.direction, i) {
                    acc = id;
                }
                acc = T::combine(spec.op, acc, input[i]);
            };
            match spec.direction {
                Direction::Forward => (lo..hi).for_each(&mut fold),
                Direction::Backward => (lo..hi).rev().for_each(&mut fold),
            }
            (started, acc)
        })
        .collect();
    // Phase 2: carries in the scan's direction.
    let mut carry = vec![id; nchunks];
    let mut acc = id;
    let order: Vec<usize> = match spec.direction {
        Direction::Forward => (0..nchunks).collect(),
        Direction::Backward => (0..nchunks).rev().collect(),
    };
    for k in order {
        carry[k] = acc;
        let (s, v) = red[k];
        acc = if s { v } else { T::combine(spec.op, acc, v) };
    }
    // Phase 3: scan each chunk from its carry.
    output.par_chunks_mut(c).enumerate().for_each(|(k, out)| {
        scan_range(input, flags, out, k * c, spec, carry[k]);
    });
}

/// Multithreaded scan (rayon, three phases); same results as [`scan`] up to floating-point
/// reassociation.
///
/// # Panics
/// When `output.len() != input.len()`.
pub fn par_scan<T: ScanElem>(input: &[T], output: &mut [T], spec: ScanSpec) {
    check_len("par_scan output", input.len(), output.len());
    par_impl(input, None, output, spec);
}

/// Multithreaded segmented scan over head flags; same results as [`segmented_scan`] up to
/// floating-point reassociation.
///
/// # Panics
/// When the lengths of `input`, `flags` and `output` differ.
pub fn par_segmented_scan<T: ScanElem>(
    input: &[T],
    flags: &[bool],
    output: &mut [T],
    spec: ScanSpec,
) {
    check_len("par_segmented_scan flags", input.len(), flags.len());
    check_len("par_segmented_scan output", input.len(), output.len());
    par_impl(input, Some(flags), output, spec);
}

/// Multithreaded segmented scan over CSR-style offsets.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) for malformed offsets.
///
/// # Panics
/// When `output.len() != input.len()`.
pub fn par_segmented_scan_offsets<T: ScanElem>(
    input: &[T],
    offsets: &[u32],
    output: &mut [T],
    spec: ScanSpec,
) -> Result<()> {
    check_offsets(offsets, input.len())?;
    let flags = super::flags_from_offsets(offsets, input.len())?;
    par_segmented_scan(input, &flags, output, spec);
    Ok(())
}
