//! The scalar recurrences of the solvers, written once.
//!
//! Each fused step of [`VectorOps`](super::VectorOps) ends with one of these functions applied to
//! the step's reduction results and the scalar slots. The CPU backend calls them directly; the
//! GPU kernels in `kernels/solvers/blas1.cu` run the same statements in the last block of the
//! reduction (the slot numbers and status codes there must match [`Slot`] and [`Status`]).

use crate::scalar::Scalar;

/// Number of scalar slots.
pub const NSLOTS: usize = 16;

/// The scalar slots shared by the solvers (indices into [`NSLOTS`] values of `T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Slot {
    /// [`Status`] code (0 while running).
    Status = 0,
    /// The iteration at which the status was set.
    StatusIter = 1,
    /// The convergence threshold on ‖r‖² (written by the driver).
    Thresh = 2,
    /// ρ: rᵀz in CG, r̂ᵀr in BiCGSTAB.
    Rho = 3,
    /// ‖r‖² of the current residual.
    Rr = 4,
    /// α.
    Alpha = 5,
    /// β.
    Beta = 6,
    /// ω (BiCGSTAB).
    Omega = 7,
    /// pᵀAp (CG) or r̂ᵀv (BiCGSTAB).
    Pq = 8,
    /// tᵀs (BiCGSTAB).
    Ts = 9,
    /// tᵀt (BiCGSTAB).
    Tt = 10,
    /// ‖r̂‖² (BiCGSTAB's shadow residual), for the relative ρ breakdown test.
    Rr0 = 11,
    /// The result of [`VectorOps::dot`](super::VectorOps::dot).
    Dot = 12,
}

/// The status word in [`Slot::Status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Iterating.
    Running = 0,
    /// ‖r‖² ≤ threshold.
    Converged = 1,
    /// CG: pᵀAp ≤ 0.
    BreakdownPq = 2,
    /// BiCGSTAB: ρ = r̂ᵀr vanished.
    BreakdownRho = 3,
    /// BiCGSTAB: r̂ᵀv = 0.
    BreakdownRv = 4,
    /// BiCGSTAB: ω = 0 without convergence.
    BreakdownOmega = 5,
    /// A residual or scalar became NaN or infinite.
    NonFinite = 6,
}

impl Status {
    /// The status encoded in a slot value.
    pub fn of<T: Scalar>(v: T) -> Status {
        match v.as_f64() as i64 {
            0 => Status::Running,
            1 => Status::Converged,
            2 => Status::BreakdownPq,
            3 => Status::BreakdownRho,
            4 => Status::BreakdownRv,
            5 => Status::BreakdownOmega,
            _ => Status::NonFinite,
        }
    }

    /// What broke down, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Converged => "converged",
            Status::BreakdownPq => {
                "pᵀAp ≤ 0 in conjugate gradient: the matrix is not symmetric positive definite"
            }
            Status::BreakdownRho => "ρ = r̂ᵀr vanished in BiCGSTAB (|ρ| ≤ ε‖r̂‖‖r‖)",
            Status::BreakdownRv => "r̂ᵀv = 0 in BiCGSTAB",
            Status::BreakdownOmega => "ω = 0 in BiCGSTAB (tᵀs = 0 without convergence)",
            Status::NonFinite => "NaN or infinity",
        }
    }
}

#[inline]
fn get<T: Scalar>(s: &[T; NSLOTS], k: Slot) -> T {
    s[k as usize]
}
#[inline]
fn set<T: Scalar>(s: &mut [T; NSLOTS], k: Slot, v: T) {
    s[k as usize] = v;
}
/// Sets the status (first one wins) with the iteration.
#[inline]
fn stop<T: Scalar>(s: &mut [T; NSLOTS], st: Status, it: usize) {
    set(s, Slot::Status, T::of_f64(st as i64 as f64));
    set(s, Slot::StatusIter, T::of_f64(it as f64));
}

/// True when the status slot is set.
#[inline]
pub fn stopped<T: Scalar>(s: &[T; NSLOTS]) -> bool {
    get(s, Slot::Status) != T::zero()
}

/// Convergence and finiteness test on a new ‖r‖², shared by the steps that produce one.
/// Returns true when the solve stopped.
#[inline]
fn test_rr<T: Scalar>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, it: usize) -> bool {
    set(s, Slot::Rr, rr);
    if let Some(h) = hist.get_mut(it) {
        *h = rr;
    }
    if !rr.is_finite() {
        stop(s, Status::NonFinite, it);
        true
    } else if rr <= get(s, Slot::Thresh) {
        stop(s, Status::Converged, it);
        true
    } else {
        false
    }
}

/// Start: ‖r‖² and ρ = rᵀz (ρ = ‖r‖² without preconditioner). BiCGSTAB also takes
/// ‖r̂‖² = ‖r‖², α = ω = 1, β = 0 from here.
pub fn start<T: Scalar>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, rz: T, it: usize) {
    set(s, Slot::Rho, rz);
    set(s, Slot::Rr0, rr);
    set(s, Slot::Alpha, T::one());
    set(s, Slot::Omega, T::one());
    set(s, Slot::Beta, T::zero());
    if !rz.is_finite() {
        stop(s, Status::NonFinite, it);
        return;
    }
    test_rr(s, hist, rr, it);
}

/// CG: α = ρ / pᵀAp; breakdown when pᵀAp ≤ 0.
pub fn cg_alpha<T: Scalar>(s: &mut [T; NSLOTS], pq: T, it: usize) {
    set(s, Slot::Pq, pq);
    if !pq.is_finite() {
        set(s, Slot::Alpha, T::zero());
        stop(s, Status::NonFinite, it);
    } else if pq <= T::zero() {
        set(s, Slot::Alpha, T::zero());
        stop(s, Status::BreakdownPq, it);
    } else {
        set(s, Slot::Alpha, get(s, Slot::Rho) / pq);
    }
}

/// CG after `r ← r − αq`: convergence test on ‖r‖²; with `rz = Some(rᵀz)` also
/// β = rᵀz / ρ and ρ ← rᵀz (a separate preconditioner passes `None` and calls [`cg_rho`]).
pub fn cg_update_r<T: Scalar>(
    s: &mut [T; NSLOTS],
    hist: &mut [T],
    rr: T,
    rz: Option<T>,
    it: usize,
) {
    if test_rr(s, hist, rr, it) {
        return;
    }
    if let Some(rz) = rz {
        cg_rho(s, rz, it);
    }
}

/// PCG: β = rᵀz / ρ, ρ ← rᵀz.
pub fn cg_rho<T: Scalar>(s: &mut [T; NSLOTS], rz: T, it: usize) {
    if !rz.is_finite() {
        stop(s, Status::NonFinite, it);
        return;
    }
    let rho = get(s, Slot::Rho);
    set(s, Slot::Beta, rz / rho);
    set(s, Slot::Rho, rz);
}

/// BiCGSTAB: α = ρ / r̂ᵀv; breakdown when r̂ᵀv = 0.
pub fn bicg_alpha<T: Scalar>(s: &mut [T; NSLOTS], rv: T, it: usize) {
    set(s, Slot::Pq, rv);
    let alpha = get(s, Slot::Rho) / rv;
    if !rv.is_finite() {
        stop(s, Status::NonFinite, it);
    } else if rv == T::zero() || !alpha.is_finite() {
        stop(s, Status::BreakdownRv, it);
    } else {
        set(s, Slot::Alpha, alpha);
    }
}

/// BiCGSTAB: ω = tᵀs / tᵀt, or 0 when t = 0 (then s = 0 too unless `A` is singular; the update
/// reduces to `x ← x + αp̂` and its convergence test decides).
pub fn bicg_omega<T: Scalar>(s: &mut [T; NSLOTS], ts: T, tt: T, it: usize) {
    set(s, Slot::Ts, ts);
    set(s, Slot::Tt, tt);
    if !ts.is_finite() || !tt.is_finite() {
        stop(s, Status::NonFinite, it);
    } else if tt > T::zero() {
        set(s, Slot::Omega, ts / tt);
    } else {
        set(s, Slot::Omega, T::zero());
    }
}

/// BiCGSTAB after `x ← x + αp̂ + ωŝ; r ← s − ωt`: convergence test on ‖r‖², then breakdown
/// tests (ω = 0; |ρ'| ≤ ε‖r̂‖‖r‖), β = (ρ'/ρ)(α/ω), ρ ← ρ'.
pub fn bicg_update<T: Scalar>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, rho_new: T, it: usize) {
    if test_rr(s, hist, rr, it) {
        return;
    }
    let omega = get(s, Slot::Omega);
    let eps = T::epsilon();
    if !rho_new.is_finite() {
        stop(s, Status::NonFinite, it);
    } else if omega == T::zero() {
        stop(s, Status::BreakdownOmega, it);
    } else if rho_new * rho_new <= eps * eps * get(s, Slot::Rr0) * rr {
        stop(s, Status::BreakdownRho, it);
    } else {
        let beta = (rho_new / get(s, Slot::Rho)) * (get(s, Slot::Alpha) / omega);
        set(s, Slot::Beta, beta);
        set(s, Slot::Rho, rho_new);
    }
}
