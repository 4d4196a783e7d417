//! The scalar recurrences of the solvers, written once.
//!
//! Each fused step of [`VectorOps`](super::VectorOps) ends with one of these functions applied to
//! the step's reduction results and the scalar slots. The CPU backend calls them directly; the
//! GPU kernels (`kernels/solvers/recur.cuh`) run the same statements in the last block of the
//! reduction; their slot numbers and status codes are `-D` defines built from [`Slot`] and
//! [`Status`] (`backend::gpu::SOLVER_CONSTANTS`), so the two cannot drift apart.
//!
//! The element type may be complex: ρ, α, β, ω and the Hessenberg entries are then complex,
//! while ‖r‖², the threshold, the status and the iteration are held as real values (imaginary
//! part zero) and compared through their real parts. For a real `T` every formula is the
//! real one, operation for operation (`conj` is the identity), so real solves are unchanged bit
//! for bit. GMRES uses the complex Givens rotation `[c̄ s; −s c]` with `c = a/d` (complex) and
//! `s = h/d` (real), which for a real `a` is the real rotation.

use num_traits::Float;

use crate::scalar::{Elem, Scalar};

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
    /// The iteration number that the GPU kernels add to their iteration argument, so that a
    /// captured CUDA graph replays at any iteration (see `backend::gpu`). Stays 0 on the CPU and
    /// on the uncaptured GPU path.
    IterBase = 13,
    /// The inner product of the CG family's ρ and pᵀAp: 0 for the sesquilinear `xᴴy` (CG for a
    /// Hermitian matrix), 1 for the bilinear `xᵀy` (COCG for a complex symmetric matrix). The
    /// same for a real `T`; ‖r‖² is always `rᴴr`.
    Form = 14,
}

/// The status word in [`Slot::Status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Iterating.
    Running = 0,
    /// ‖r‖² ≤ threshold.
    Converged = 1,
    /// CG: pᴴAp ≤ 0 (COCG: pᵀAp = 0).
    BreakdownPq = 2,
    /// BiCGSTAB: ρ = r̂ᵀr vanished.
    BreakdownRho = 3,
    /// BiCGSTAB: r̂ᵀv = 0.
    BreakdownRv = 4,
    /// BiCGSTAB: ω = 0 without convergence.
    BreakdownOmega = 5,
    /// A residual or scalar became NaN or infinite.
    NonFinite = 6,
    /// GMRES: a whole restart cycle did not lower the residual.
    Stagnated = 7,
    /// GMRES: the new Arnoldi column vanished (`A·M⁻¹·v = 0`: a singular operator or
    /// preconditioner).
    BreakdownArnoldi = 8,
    /// MINRES: rᴴM⁻¹r < 0 (the preconditioner is not positive definite).
    BreakdownPrecond = 9,
}

impl Status {
    /// The status encoded in a slot value.
    pub fn of<T: Elem>(v: T) -> Status {
        match v.re().as_f64() as i64 {
            0 => Status::Running,
            1 => Status::Converged,
            2 => Status::BreakdownPq,
            3 => Status::BreakdownRho,
            4 => Status::BreakdownRv,
            5 => Status::BreakdownOmega,
            7 => Status::Stagnated,
            8 => Status::BreakdownArnoldi,
            9 => Status::BreakdownPrecond,
            _ => Status::NonFinite,
        }
    }

    /// What broke down, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Converged => "converged",
            Status::BreakdownPq => {
                "pᵀAp ≤ 0 in conjugate gradient: the matrix is not symmetric positive definite \
                 (Hermitian positive definite for a complex type; in COCG: pᵀAp = 0)"
            }
            Status::BreakdownRho => "ρ = r̂ᵀr vanished in BiCGSTAB (|ρ| ≤ ε‖r̂‖‖r‖)",
            Status::BreakdownRv => "r̂ᵀv = 0 in BiCGSTAB",
            Status::BreakdownOmega => "ω = 0 in BiCGSTAB (tᵀs = 0 without convergence)",
            Status::NonFinite => "NaN or infinity",
            Status::Stagnated => "GMRES made no progress over a whole restart cycle",
            Status::BreakdownArnoldi => {
                "GMRES: the Arnoldi column vanished (A·M⁻¹·v = 0: singular operator or preconditioner)"
            }
            Status::BreakdownPrecond => {
                "rᵀM⁻¹r < 0 in MINRES: the preconditioner is not positive definite"
            }
        }
    }
}

#[inline]
fn get<T: Elem>(s: &[T; NSLOTS], k: Slot) -> T {
    s[k as usize]
}
#[inline]
fn set<T: Elem>(s: &mut [T; NSLOTS], k: Slot, v: T) {
    s[k as usize] = v;
}
/// The real value `v` as a `T`.
#[inline]
pub fn real<T: Elem>(v: f64) -> T {
    T::from_real(<T::Real as Scalar>::of_f64(v))
}

/// Sets the status (first one wins) with the iteration.
#[inline]
fn stop<T: Elem>(s: &mut [T; NSLOTS], st: Status, it: usize) {
    set(s, Slot::Status, real(st as i64 as f64));
    set(s, Slot::StatusIter, real(it as f64));
}

/// True when the CG family uses the bilinear form `xᵀy` ([`Slot::Form`]).
#[inline]
pub fn bilinear<T: Elem>(s: &[T; NSLOTS]) -> bool {
    get(s, Slot::Form) != T::zero()
}

/// True when the status slot is set.
#[inline]
pub fn stopped<T: Elem>(s: &[T; NSLOTS]) -> bool {
    get(s, Slot::Status) != T::zero()
}

/// Convergence and finiteness test on a new ‖r‖², shared by the steps that produce one.
/// Returns true when the solve stopped.
#[inline]
fn test_rr<T: Elem>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, it: usize) -> bool {
    set(s, Slot::Rr, rr);
    if let Some(h) = hist.get_mut(it) {
        *h = rr;
    }
    if !rr.finite() {
        stop(s, Status::NonFinite, it);
        true
    } else if rr.re() <= get(s, Slot::Thresh).re() {
        stop(s, Status::Converged, it);
        true
    } else {
        false
    }
}

/// Start: ‖r‖² and ρ = rᴴz (ρ = ‖r‖² without preconditioner; rᵀz in COCG). BiCGSTAB also takes
/// ‖r̂‖² = ‖r‖², α = ω = 1, β = 0 from here.
pub fn start<T: Elem>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, rz: T, it: usize) {
    set(s, Slot::Rho, rz);
    set(s, Slot::Rr0, rr);
    set(s, Slot::Alpha, T::one());
    set(s, Slot::Omega, T::one());
    set(s, Slot::Beta, T::zero());
    if !rz.finite() {
        stop(s, Status::NonFinite, it);
        return;
    }
    test_rr(s, hist, rr, it);
}

/// CG: α = ρ / pᴴAp; breakdown when pᴴAp ≤ 0 (its real part: the imaginary part of pᴴAp is
/// rounding for a Hermitian `A`); COCG: α = ρ / pᵀAp, breakdown when pᵀAp = 0.
pub fn cg_alpha<T: Elem>(s: &mut [T; NSLOTS], pq: T, it: usize) {
    set(s, Slot::Pq, pq);
    let broken = if bilinear(s) {
        pq == T::zero()
    } else {
        pq.re() <= <T::Real as num_traits::Zero>::zero()
    };
    if !pq.finite() {
        set(s, Slot::Alpha, T::zero());
        stop(s, Status::NonFinite, it);
    } else if broken {
        set(s, Slot::Alpha, T::zero());
        stop(s, Status::BreakdownPq, it);
    } else {
        set(s, Slot::Alpha, get(s, Slot::Rho) / pq);
    }
}

/// CG after `r ← r − αq`: convergence test on ‖r‖²; with `rz = Some(rᴴz)` also
/// β = rᴴz / ρ and ρ ← rᴴz (`rᵀz` in COCG) (a separate preconditioner passes `None` and calls [`cg_rho`]).
pub fn cg_update_r<T: Elem>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, rz: Option<T>, it: usize) {
    if test_rr(s, hist, rr, it) {
        return;
    }
    if let Some(rz) = rz {
        cg_rho(s, rz, it);
    }
}

/// PCG: β = rᴴz / ρ, ρ ← rᴴz (`rᵀz` in COCG).
pub fn cg_rho<T: Elem>(s: &mut [T; NSLOTS], rz: T, it: usize) {
    if !rz.finite() {
        stop(s, Status::NonFinite, it);
        return;
    }
    let rho = get(s, Slot::Rho);
    set(s, Slot::Beta, rz / rho);
    set(s, Slot::Rho, rz);
}

/// BiCGSTAB: α = ρ / r̂ᴴv; breakdown when r̂ᴴv = 0.
pub fn bicg_alpha<T: Elem>(s: &mut [T; NSLOTS], rv: T, it: usize) {
    set(s, Slot::Pq, rv);
    let alpha = get(s, Slot::Rho) / rv;
    if !rv.finite() {
        stop(s, Status::NonFinite, it);
    } else if rv == T::zero() || !alpha.finite() {
        stop(s, Status::BreakdownRv, it);
    } else {
        set(s, Slot::Alpha, alpha);
    }
}

/// BiCGSTAB: ω = tᴴs / tᴴt, or 0 when t = 0 (then s = 0 too unless `A` is singular; the update
/// reduces to `x ← x + αp̂` and its convergence test decides).
pub fn bicg_omega<T: Elem>(s: &mut [T; NSLOTS], ts: T, tt: T, it: usize) {
    set(s, Slot::Ts, ts);
    set(s, Slot::Tt, tt);
    if !ts.finite() || !tt.finite() {
        stop(s, Status::NonFinite, it);
    } else if tt.re() > <T::Real as num_traits::Zero>::zero() {
        set(s, Slot::Omega, ts / tt);
    } else {
        set(s, Slot::Omega, T::zero());
    }
}

/// BiCGSTAB after `x ← x + αp̂ + ωŝ; r ← s − ωt`: convergence test on ‖r‖², then breakdown
/// tests (ω = 0; |ρ'| ≤ ε‖r̂‖‖r‖), β = (ρ'/ρ)(α/ω), ρ ← ρ'.
pub fn bicg_update<T: Elem>(s: &mut [T; NSLOTS], hist: &mut [T], rr: T, rho_new: T, it: usize) {
    if test_rr(s, hist, rr, it) {
        return;
    }
    let omega = get(s, Slot::Omega);
    let eps = <T::Real as num_traits::Float>::epsilon();
    if !rho_new.finite() {
        stop(s, Status::NonFinite, it);
    } else if omega == T::zero() {
        stop(s, Status::BreakdownOmega, it);
    } else if rho_new.norm_sqr() <= eps * eps * get(s, Slot::Rr0).re() * rr.re() {
        stop(s, Status::BreakdownRho, it);
    } else {
        let beta = (rho_new / get(s, Slot::Rho)) * (get(s, Slot::Alpha) / omega);
        set(s, Slot::Beta, beta);
        set(s, Slot::Rho, rho_new);
    }
}

/// Where GMRES(m) keeps its small dense arrays in one buffer of [`GmresLayout::len`] values of
/// `T` (the "small" part of [`KrylovOps::Krylov`](super::KrylovOps::Krylov)); the GPU kernels use
/// the same offsets (`kernels/solvers/gmres.cu`).
///
/// | array | length | what |
/// |---|---|---|
/// | `hess` | (m+1)·m | the Hessenberg matrix H, column-major, as Arnoldi produced it |
/// | `rmat` | (m+1)·m | H after the Givens rotations (upper triangular R) |
/// | `cs`, `sn` | m each | the rotations |
/// | `g` | m+1 | the rotated right-hand side β·e₁; `|g[j+1]|` is the residual norm after column j |
/// | `y` | m | the solution of R·y = g |
/// | `c1`, `c2` | m+1 each | the two Gram–Schmidt passes' coefficients of the current column |
/// | `beta2` | 1 | ‖r‖² at the start of the cycle (for the stagnation test) |
/// | `scale` | 1 | the factor that normalises the newest basis vector |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GmresLayout {
    /// The restart length m.
    pub m: usize,
}

impl GmresLayout {
    /// Offset of `hess`.
    pub fn hess(self) -> usize {
        0
    }
    /// Offset of `rmat`.
    pub fn rmat(self) -> usize {
        (self.m + 1) * self.m
    }
    /// Offset of `cs`.
    pub fn cs(self) -> usize {
        2 * (self.m + 1) * self.m
    }
    /// Offset of `sn`.
    pub fn sn(self) -> usize {
        self.cs() + self.m
    }
    /// Offset of `g`.
    pub fn g(self) -> usize {
        self.sn() + self.m
    }
    /// Offset of `y`.
    pub fn y(self) -> usize {
        self.g() + self.m + 1
    }
    /// Offset of `c1`.
    pub fn c1(self) -> usize {
        self.y() + self.m
    }
    /// Offset of `c2`.
    pub fn c2(self) -> usize {
        self.c1() + self.m + 1
    }
    /// Offset of `beta2`.
    pub fn beta2(self) -> usize {
        self.c2() + self.m + 1
    }
    /// Offset of `scale`.
    pub fn scale(self) -> usize {
        self.beta2() + 1
    }
    /// Total length.
    pub fn len(self) -> usize {
        self.scale() + 1
    }
    /// Never empty (`m ≥ 1`); for clippy's `len_without_is_empty`.
    pub fn is_empty(self) -> bool {
        false
    }
}

/// GMRES start of a cycle from a residual with ‖r‖² = `rr`: g = (‖r‖, 0, …), the scale 1/‖r‖
/// for v₀ = r/‖r‖, and the convergence test.
pub fn gmres_start<T: Elem>(
    s: &mut [T; NSLOTS],
    small: &mut [T],
    lay: GmresLayout,
    hist: &mut [T],
    rr: T,
    it: usize,
) {
    let zero = <T::Real as num_traits::Zero>::zero();
    let beta = rr.re().max(zero).sqrt();
    small[lay.g()..lay.g() + lay.m + 1].fill(T::zero());
    small[lay.g()] = T::from_real(beta);
    small[lay.beta2()] = rr;
    small[lay.scale()] = if beta > zero {
        T::from_real(<T::Real as num_traits::One>::one() / beta)
    } else {
        T::zero()
    };
    test_rr(s, hist, rr, it);
}

/// GMRES column `j` (0-based) after the two Gram–Schmidt passes: `ww` = ‖w‖² of the
/// orthogonalised vector. Stores H[:, j] = c1 + c2 and H[j+1, j] = ‖w‖, applies the earlier
/// rotations and a new one to R[:, j], updates g, records |g[j+1]|² as the residual estimate,
/// and tests convergence, breakdown, and (at the end of a cycle, `j = m − 1`) stagnation. Sets
/// the scale 1/‖w‖ that normalises v_{j+1}.
pub fn gmres_column<T: Elem>(
    s: &mut [T; NSLOTS],
    small: &mut [T],
    lay: GmresLayout,
    hist: &mut [T],
    j: usize,
    ww: T,
    it: usize,
) {
    let m = lay.m;
    let ld = m + 1;
    let zero = <T::Real as num_traits::Zero>::zero();
    let one = <T::Real as num_traits::One>::one();
    let hnext = ww.re().max(zero).sqrt();
    for i in 0..=j {
        let h = small[lay.c1() + i] + small[lay.c2() + i];
        small[lay.hess() + j * ld + i] = h;
        small[lay.rmat() + j * ld + i] = h;
    }
    small[lay.hess() + j * ld + j + 1] = T::from_real(hnext);
    // Earlier rotations on the new column: [c̄ s; −s c] (s real).
    for i in 0..j {
        let (c, sn) = (small[lay.cs() + i], small[lay.sn() + i]);
        let a = small[lay.rmat() + j * ld + i];
        let b = small[lay.rmat() + j * ld + i + 1];
        small[lay.rmat() + j * ld + i] = c.conj() * a + sn * b;
        small[lay.rmat() + j * ld + i + 1] = c * b - sn * a;
    }
    let a = small[lay.rmat() + j * ld + j];
    let d = (a.norm_sqr() + hnext * hnext).sqrt();
    small[lay.scale()] = if hnext > zero {
        T::from_real(one / hnext)
    } else {
        T::zero()
    };
    if !d.is_finite() || !a.finite() {
        stop(s, Status::NonFinite, it);
        return;
    }
    if d == zero {
        stop(s, Status::BreakdownArnoldi, it);
        return;
    }
    let (c, sn) = (a / T::from_real(d), T::from_real(hnext / d));
    small[lay.cs() + j] = c;
    small[lay.sn() + j] = sn;
    small[lay.rmat() + j * ld + j] = T::from_real(d);
    small[lay.rmat() + j * ld + j + 1] = T::zero();
    let gj = small[lay.g() + j];
    small[lay.g() + j] = c.conj() * gj;
    small[lay.g() + j + 1] = -sn * gj;
    let rr = T::from_real((sn * sn * gj * gj.conj()).re());
    if test_rr(s, hist, rr, it) {
        return;
    }
    if j + 1 == m
        && rr.re() >= (one - <T::Real as num_traits::Float>::epsilon()) * small[lay.beta2()].re()
    {
        stop(s, Status::Stagnated, it);
    }
}

/// Solves the leading `k × k` block of R·y = g by back substitution into `y`. A pivot that is
/// zero to working precision (`|R[i,i]| ≤ ε·max |R[c,c]|`: the column of a singular operator or
/// preconditioner, such as `M·v = 0` up to rounding) gives `y[i] = 0`: the iterate is then the
/// least-squares one over the other columns, not a division by rounding noise.
pub fn gmres_solve_y<T: Elem>(small: &mut [T], lay: GmresLayout, k: usize) {
    let ld = lay.m + 1;
    let zero = <T::Real as num_traits::Zero>::zero();
    let eps = <T::Real as num_traits::Float>::epsilon();
    let big = (0..k)
        .map(|i| small[lay.rmat() + i * ld + i].modulus())
        .fold(zero, |a, b| if b > a { b } else { a });
    for i in (0..k).rev() {
        let pivot = small[lay.rmat() + i * ld + i];
        if pivot.modulus() <= eps * big {
            small[lay.y() + i] = T::zero();
            continue;
        }
        let mut acc = small[lay.g() + i];
        for c in i + 1..k {
            acc -= small[lay.rmat() + c * ld + i] * small[lay.y() + c];
        }
        small[lay.y() + i] = acc / pivot;
    }
}
