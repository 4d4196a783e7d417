//! CPU tridiagonal solvers: the Thomas algorithm (the reference), a batched version parallel over
//! systems (rayon), and cyclic reduction / PCR in the same formulation as the GPU kernels (for
//! the paper's GPU-versus-CPU-cyclic-reduction comparison, and to test that formulation on
//! machines without a GPU).
//!
//! All solvers share the conventions of [`super`]: `lower[0]` and `upper[n-1]` of every system
//! are ignored, no pivoting is done, and a pivot `p` of row `i` counts as *tiny* when
//! `!(|p| > ε·(|a_i| + |b_i| + |c_i|))` (zero, tiny or NaN), which is an [`Error::Solver`] naming the
//! row.

use rayon::prelude::*;

use super::Tridiagonal;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

fn tiny<T: Scalar>(p: T, scale: T) -> bool {
    // Not `<=`: a NaN pivot must count as tiny.
    p.abs().partial_cmp(&(T::of_f64(T::EPS) * scale)) != Some(std::cmp::Ordering::Greater)
}

fn pivot_error(what: &str, system: Option<usize>, row: usize, pivot: f64) -> Error {
    let sys = system
        .map(|s| format!(" of system {s}"))
        .unwrap_or_default();
    Error::Solver(format!(
        "{what}: zero or tiny pivot ({pivot:e}) at row {row}{sys}; the matrix is not diagonally \
         dominant enough to be solved without pivoting"
    ))
}

/// Solves one system `A x = rhs` by the Thomas algorithm (Gaussian elimination without pivoting,
/// `8n` flops), writing `x`. `scratch` must hold `n` elements (it receives the modified upper
/// diagonal). Stable for diagonally dominant or symmetric positive definite `A`.
///
/// # Errors
/// [`Error::Solver`] naming the row whose pivot is zero, tiny or not a number.
///
/// # Panics
/// When the slices' lengths differ.
pub fn thomas_with_scratch<T: Scalar>(
    a: Tridiagonal<'_, [T]>,
    rhs: &[T],
    x: &mut [T],
    scratch: &mut [T],
) -> Result<()> {
    let n = a.rows();
    a.check_lengths(n, &[("rhs", rhs.len()), ("x", x.len())]);
    let Tridiagonal { lower, diag, upper } = a;
    assert!(
        scratch.len() >= n,
        "thomas: scratch has {} elements, needs {n}",
        scratch.len()
    );
    if n == 0 {
        return Ok(());
    }
    let up = |i: usize| if i + 1 == n { T::zero() } else { upper[i] };
    let lo = |i: usize| if i == 0 { T::zero() } else { lower[i] };
    let cp = scratch;
    let (mut cprev, mut dprev) = (T::zero(), T::zero());
    for i in 0..n {
        let (a, b, c) = (lo(i), diag[i], up(i));
        let p = b - a * cprev;
        if tiny(p, a.abs() + b.abs() + c.abs()) {
            return Err(pivot_error("Thomas", None, i, p.as_f64()));
        }
        let r = T::one() / p;
        cprev = c * r;
        dprev = (rhs[i] - a * dprev) * r;
        cp[i] = cprev;
        x[i] = dprev;
    }
    for i in (0..n - 1).rev() {
        let next = x[i + 1];
        x[i] -= cp[i] * next;
    }
    Ok(())
}

/// [`thomas_with_scratch`] that allocates its scratch and returns `x`.
///
/// # Errors
/// [`Error::Solver`] naming the row of a zero or tiny pivot.
pub fn thomas<T: Scalar>(a: Tridiagonal<'_, [T]>, rhs: &[T]) -> Result<Vec<T>> {
    let n = a.rows();
    let mut x = vec![T::zero(); n];
    let mut s = vec![T::zero(); n];
    thomas_with_scratch(a, rhs, &mut x, &mut s)?;
    Ok(x)
}

/// Solves `batch = a.rows() / n` independent systems of `n` rows stored one after another,
/// by Thomas, in parallel over systems (rayon). Writes `x` (same layout).
///
/// # Errors
/// [`Error::Solver`] naming the system and row of a zero or tiny pivot (when several systems
/// fail, one of them).
///
/// # Panics
/// When the lengths differ or are not a multiple of `n`.
pub fn thomas_batch_into<T: Scalar>(
    n: usize,
    a: Tridiagonal<'_, [T]>,
    rhs: &[T],
    x: &mut [T],
) -> Result<()> {
    if a.check_batch(n, &[("rhs", rhs.len()), ("x", x.len())]) == 0 {
        return Ok(());
    }
    // Systems are grouped so that each rayon task amortises its scratch allocation.
    let per_task = (16384 / n).max(1);
    x.par_chunks_mut(n * per_task)
        .enumerate()
        .try_for_each(|(t, xs)| {
            let mut scratch = vec![T::zero(); n];
            for (k, xk) in xs.chunks_mut(n).enumerate() {
                let s = t * per_task + k;
                let r = s * n..(s + 1) * n;
                let system =
                    Tridiagonal::new(&a.lower[r.clone()], &a.diag[r.clone()], &a.upper[r.clone()]);
                thomas_with_scratch(system, &rhs[r], xk, &mut scratch).map_err(|e| match e {
                    Error::Solver(m) => Error::Solver(format!("system {s}: {m}")),
                    other => other,
                })?;
            }
            Ok(())
        })
}

/// [`thomas_batch_into`] returning a new `x`.
///
/// # Errors
/// As [`thomas_batch_into`].
pub fn thomas_batch<T: Scalar>(n: usize, a: Tridiagonal<'_, [T]>, rhs: &[T]) -> Result<Vec<T>> {
    let mut x = vec![T::zero(); a.rows()];
    thomas_batch_into(n, a, rhs, &mut x)?;
    Ok(x)
}

/// Solves one system by cyclic reduction with a PCR tail, sequentially, in the formulation of
/// the GPU kernel (`block_cr_pcr` in `kernels/tridiag/block_tridiag.cuh`): forward reduction
/// levels while more than `cr_stop` equations remain (the system padded virtually with identity
/// rows to a power of two), PCR on those, then back substitution. `cr_stop = 1` is plain cyclic
/// reduction (the CPU solver of the paper's 512 × 512 comparison), `cr_stop >= n` plain PCR.
/// About 17n flops for CR: twice Thomas, which is why Thomas is the serial choice.
///
/// # Errors
/// [`Error::Solver`] naming the row whose pivot is tiny.
pub fn cyclic_reduction<T: Scalar>(
    system: Tridiagonal<'_, [T]>,
    rhs: &[T],
    cr_stop: usize,
) -> Result<Vec<T>> {
    let n = system.rows();
    system.check_lengths(n, &[("rhs", rhs.len())]);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut a: Vec<T> = system.lower.to_vec();
    let mut b: Vec<T> = system.diag.to_vec();
    let mut c: Vec<T> = system.upper.to_vec();
    let mut d: Vec<T> = rhs.to_vec();
    a[0] = T::zero();
    c[n - 1] = T::zero();
    let p2 = n.next_power_of_two();
    let cr_stop = cr_stop.max(1);
    let err = |i: usize, p: T| pivot_error("cyclic reduction", None, i, p.as_f64());
    // (a, b, c, d) of equation i, identity beyond n.
    let eq = |a: &[T], b: &[T], c: &[T], d: &[T], i: usize| -> [T; 4] {
        if i < n {
            [a[i], b[i], c[i], d[i]]
        } else {
            [T::zero(), T::one(), T::zero(), T::zero()]
        }
    };
    let combine = |e: [T; 4], l: [T; 4], r: [T; 4], il: usize, ir: usize| -> Result<[T; 4]> {
        if tiny(l[1], l[0].abs() + l[2].abs()) {
            return Err(err(il, l[1]));
        }
        if tiny(r[1], r[0].abs() + r[2].abs()) {
            return Err(err(ir, r[1]));
        }
        let k1 = e[0] / l[1];
        let k2 = e[2] / r[1];
        Ok([
            -l[0] * k1,
            e[1] - l[2] * k1 - r[0] * k2,
            -r[2] * k2,
            e[3] - l[3] * k1 - r[3] * k2,
        ])
    };
    let (mut st, mut m) = (1usize, p2);
    while m > cr_stop {
        for k in 0..m / 2 {
            let i = 2 * st * k + 2 * st - 1;
            if i < n {
                let o = combine(
                    eq(&a, &b, &c, &d, i),
                    eq(&a, &b, &c, &d, i - st),
                    eq(&a, &b, &c, &d, i + st),
                    i - st,
                    i + st,
                )?;
                (a[i], b[i], c[i], d[i]) = (o[0], o[1], o[2], o[3]);
            }
        }
        st *= 2;
        m /= 2;
    }
    let mut delta = st;
    while delta < m * st {
        let mut out = Vec::with_capacity(m);
        for k in 0..m {
            let i = st * k + st - 1;
            if i < n {
                let l = if i >= delta {
                    eq(&a, &b, &c, &d, i - delta)
                } else {
                    eq(&a, &b, &c, &d, usize::MAX)
                };
                let o = combine(
                    eq(&a, &b, &c, &d, i),
                    l,
                    eq(&a, &b, &c, &d, i + delta),
                    i.wrapping_sub(delta),
                    i + delta,
                )?;
                out.push((i, o));
            }
        }
        for (i, o) in out {
            (a[i], b[i], c[i], d[i]) = (o[0], o[1], o[2], o[3]);
        }
        delta *= 2;
    }
    for k in 0..m {
        let i = st * k + st - 1;
        if i < n {
            if tiny(b[i], a[i].abs() + c[i].abs()) {
                return Err(err(i, b[i]));
            }
            d[i] /= b[i];
        }
    }
    while st > 1 {
        st /= 2;
        let mut k = 0;
        while 2 * st * k + st - 1 < n {
            let i = 2 * st * k + st - 1;
            let xl = if i >= st { d[i - st] } else { T::zero() };
            let xr = if i + st < n { d[i + st] } else { T::zero() };
            if tiny(b[i], a[i].abs() + c[i].abs()) {
                return Err(err(i, b[i]));
            }
            d[i] = (d[i] - a[i] * xl - c[i] * xr) / b[i];
            k += 1;
        }
    }
    Ok(d)
}
