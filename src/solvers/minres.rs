//! MINRES (Paige and Saunders 1975) for symmetric (Hermitian) **indefinite** systems, optionally
//! preconditioned with a symmetric positive definite `M`, written once for every backend.
//!
//! CG needs a positive definite matrix and breaks down (`pᵀAp ≤ 0`) on saddle points and shifted
//! operators; BiCGSTAB and restarted GMRES do not use the symmetry and stagnate or wander on them.
//! MINRES builds the same Lanczos basis as CG (a three-term recurrence: a fixed, small
//! workspace) and picks the iterate that minimises the residual over the Krylov space, so its
//! residual never grows, whatever the signs of the eigenvalues.
//!
//! Per iteration, with `v = y/β` the new Lanczos vector (`y = M⁻¹r₂`):
//!
//! | step | vector work | scalars (host) |
//! |---|---|---|
//! | `A.apply(v, av)` | the operator | |
//! | α = vᴴ·av | reads v, av | one dot |
//! | `r₁ ← av − (α/β)r₂ − (β/β_old)r₁`, then `r₁ ↔ r₂` | one pass | |
//! | `y = M⁻¹r₂` | the preconditioner (none: `y` is `r₂`) | β = √(r₂ᴴy), one dot |
//! | the Givens rotation of the tridiagonal's new column | | c, s, φ, φ̄ |
//! | `w ← (v − δ·w_prev − ε·w_prev2)/γ`, `x += φ·w` | two passes | |
//!
//! The scalars of the recurrence are computed on the host (two dot products a step, each a
//! synchronisation on the GPU; the residuals reach the history once per block of steps): the method is meant for the systems the other methods cannot
//! solve, where the iterations, not the per-step latency, decide the time.
//!
//! **The residual.** Without a preconditioner, |φ̄| is ‖b − A·x‖ exactly (in exact arithmetic)
//! and serves as the recursive residual. With one, |φ̄| is the `M⁻¹`-norm of the residual, which
//! differs from the 2-norm the tolerance is stated in by up to the conditioning of `M`; the
//! residual itself is then carried along (`r −= φ·A·w`, with `A·w` updated by the same
//! recurrence as `w` from `A·v`: three more vectors and two passes a step), so that the
//! convergence test measures what the caller asked for. Either way the driver confirms
//! convergence on the true residual `b − A·x`, as for every method.
//!
//! Reference: C. C. Paige and M. A. Saunders, *Solution of sparse indefinite systems of linear
//! equations*, SIAM J. Numer. Anal. 12(4), 1975; the preconditioned form as in S.-C. Choi,
//! *Iterative methods for singular linear equations and least-squares problems*, PhD thesis,
//! Stanford 2006, Table 3.5.

use super::PrecondKind as Kind;
use super::{check_problem, drive, Dyn, Method, SolveError, SolveInfo, SolveParams, Step};
use crate::backend::recur::{self, Slot, Status};
use crate::backend::{LinearOperator, Preconditioner, VectorOps};
use crate::scalar::{Elem, Scalar};

/// MINRES for a symmetric (Hermitian, for a complex `T`) `A`, definite or not, preconditioned by
/// the symmetric positive definite `m` (pass [`Identity`](crate::backend::Identity) for none,
/// `precond::Jacobi` where the diagonal is positive, or any SPD [`Preconditioner`]).
///
/// `x` is the initial guess when [`SolveParams::initial_guess`] says so, and holds the solution
/// (or the last iterate, on error) afterwards. Each step computes its scalars on the host (two
/// dot products); prefer CG on a positive definite matrix.
///
/// ```
/// use segsparse::backend::{Cpu, Identity};
/// use segsparse::solvers::{minres, SolveParams};
/// // A symmetric indefinite matrix: the 2-D Laplacian shifted past its smallest eigenvalues.
/// let a = segsparse::generate::shifted::<f64>(2, 30, 0.3).unwrap();
/// let b = vec![1.0; a.nrows()];
/// let mut x = vec![0.0; a.nrows()];
/// let info = minres(&Cpu, &a, &Identity, &b, &mut x, &SolveParams::default()).unwrap();
/// assert!(info.relative_residual <= 1e-8);
/// ```
///
/// # Errors
/// [`SolveError`]: a preconditioner that is not positive definite (`rᴴM⁻¹r < 0`, reported as a
/// breakdown), non-convergence, NaN/Inf, dimension mismatch, or a backend failure.
pub fn minres<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    minres_body(be, &Dyn(a), &Dyn(m), b, x, params)
}

/// [`minres`] on trait objects: compiled once per element type and backend.
fn minres_body<T: Elem, B: VectorOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &B::Vector,
    x: &mut B::Vector,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError> {
    let clock = std::time::Instant::now();
    let n = check_problem(be, a, m, b, x)?;
    let preconditioned = Kind::of(m) != Kind::Identity;
    let vectors = if preconditioned { 11 } else { 7 };
    super::preflight(be, "the MINRES workspace", n, vectors, 0, params)?;
    let z = || be.zeros(n);
    let mut state = MinresState {
        a,
        m,
        r: z()?,
        av: z()?,
        v: z()?,
        r1: z()?,
        r2: z()?,
        w: z()?,
        w_prev: z()?,
        carried: if preconditioned {
            Some(Carried {
                y: z()?,
                aw: z()?,
                aw_prev: z()?,
                rr_vec: z()?,
            })
        } else {
            None
        },
        s: Lanczos::default(),
        thresh: 0.0,
        last_rr: 0.0,
        stopped: false,
        pending: Vec::new(),
    };
    let sc = be.scalars(n, params.max_iters)?;
    drive(be, a, b, x, params, &mut state, sc, clock)
}

/// The vectors a preconditioned MINRES adds: `y = M⁻¹r₂`, and the residual carried along with
/// `A·w` for the 2-norm convergence test.
struct Carried<V> {
    y: V,
    aw: V,
    aw_prev: V,
    /// The carried residual `b − A·x`.
    rr_vec: V,
}

/// The host scalars of the Lanczos recurrence and its QR factorisation by Givens rotations.
#[derive(Clone, Copy, Default)]
struct Lanczos {
    /// β of the current Lanczos vector, and of the one before it (0 at a start).
    beta: f64,
    beta_old: f64,
    /// The rotation of the previous column.
    cs: f64,
    sn: f64,
    /// The entries of the tridiagonal's columns that the previous rotations carry over.
    dbar: f64,
    epsln: f64,
    /// φ̄: the residual's norm (in the `M⁻¹`-norm with a preconditioner).
    phibar: f64,
}

struct MinresState<'a, T: Elem, B: VectorOps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    /// The residual workspace the driver fills with `b − A·x` before a (re)start.
    r: B::Vector,
    /// `A·v`; the driver's scratch vector between steps.
    av: B::Vector,
    v: B::Vector,
    /// The unpreconditioned Lanczos vectors times β: `r₂` the current one, `r₁` the one before.
    r1: B::Vector,
    r2: B::Vector,
    /// The search directions of the last two steps.
    w: B::Vector,
    w_prev: B::Vector,
    carried: Option<Carried<B::Vector>>,
    s: Lanczos,
    /// The driver's threshold on ‖r‖², read at each (re)start.
    thresh: f64,
    /// ‖r‖² of the current iterate: what a stop before the iterate's update reports.
    last_rr: f64,
    /// The status was set in this block: the rest of its steps do nothing.
    stopped: bool,
    /// ‖r‖² of the block's steps, written to the history (and the last to the slots) after the
    /// block, in one exchange with the backend instead of one per step.
    pending: Vec<(usize, f64)>,
}

impl<T, B, A, P> MinresState<'_, T, B, A, P>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    /// `y = M⁻¹r₂` and β = √(r₂ᴴy) (‖r₂‖ without a preconditioner), or the status that ends
    /// the recurrence: a non-finite `r₂ᴴy` (NaN or ∞ from the preconditioner or the residual), or
    /// a negative one (the preconditioner is not positive definite).
    fn next_beta(&mut self, be: &B, sc: &mut B::Scalars) -> crate::Result<Result<f64, Status>> {
        let ry = match self.carried.as_mut() {
            Some(c) => {
                self.m.apply(be, &self.r2, &mut c.y)?;
                be.dot(&self.r2, &c.y, sc)?
            }
            None => be.dot(&self.r2, &self.r2, sc)?,
        };
        let ry = ry.re().as_f64();
        Ok(if !ry.is_finite() {
            Err(Status::NonFinite)
        } else if ry < 0.0 {
            Err(Status::BreakdownPrecond)
        } else {
            Ok(ry.sqrt())
        })
    }

    /// Writes the pending residuals to the history and the last one to the slots, with the
    /// status at iteration `it` when one is given.
    fn flush(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        status: Option<(Status, usize)>,
    ) -> crate::Result<()> {
        if self.pending.is_empty() && status.is_none() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        be.update_slots(sc, |s, h| {
            for &(i, rr) in &pending {
                if let Some(e) = h.get_mut(i) {
                    *e = recur::real(rr);
                }
                s[Slot::Rr as usize] = recur::real(rr);
            }
            if let Some((status, it)) = status {
                s[Slot::Status as usize] = recur::real(status as i64 as f64);
                s[Slot::StatusIter as usize] = recur::real(it as f64);
            }
        })
    }

    /// Sets the status at iteration `it`, with its residual.
    fn stop(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        rr: f64,
        status: Status,
        it: usize,
    ) -> crate::Result<()> {
        self.stopped = true;
        self.pending.push((it, rr));
        self.flush(be, sc, Some((status, it)))
    }
}

impl<T, B, A, P> Method<T, B> for MinresState<'_, T, B, A, P>
where
    T: Elem,
    B: VectorOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.r, &mut self.av)
    }
    /// The steps synchronise (host scalars): never recorded.
    fn block_key(&self) -> Option<u64> {
        None
    }

    fn after_block(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        self.flush(at.be, at.sc, None)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        self.stopped = false;
        self.pending.clear();
        be.copy(&self.r, &mut self.r2)?;
        be.set_zero(&mut self.r1)?;
        be.set_zero(&mut self.w)?;
        be.set_zero(&mut self.w_prev)?;
        if let Some(c) = self.carried.as_mut() {
            be.copy(&self.r, &mut c.rr_vec)?;
            be.set_zero(&mut c.aw)?;
            be.set_zero(&mut c.aw_prev)?;
        }
        let beta = self.next_beta(be, sc)?;
        let rr = match (self.carried.as_ref(), beta) {
            (Some(c), _) => be.dot(&c.rr_vec, &c.rr_vec, sc)?.re().as_f64(),
            (None, Ok(beta)) => beta * beta,
            (None, Err(_)) => f64::NAN,
        };
        self.last_rr = rr;
        let beta = match beta {
            Ok(beta) => beta,
            Err(status) => return self.stop(be, sc, rr, status, it),
        };
        self.s = Lanczos {
            beta,
            cs: -1.0,
            phibar: beta,
            ..Lanczos::default()
        };
        be.update_slots(sc, |s, h| {
            recur::start(s, h, recur::real(rr), recur::real(rr), it);
        })?;
        let slots = be.read_slots(sc)?;
        self.thresh = slots[Slot::Thresh as usize].re().as_f64();
        self.stopped = recur::stopped(&slots);
        Ok(())
    }

    fn step(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        let Step { be, sc, x, it } = at;
        if self.stopped {
            return Ok(());
        }
        let real = recur::real::<T>;
        let Lanczos {
            beta,
            beta_old,
            cs,
            sn,
            dbar,
            epsln,
            phibar,
        } = self.s;
        // v = y/β (y = M⁻¹r₂; r₂ itself without a preconditioner).
        let y = self.carried.as_ref().map_or(&self.r2, |c| &c.y);
        be.axpby(real(1.0 / beta), y, T::zero(), &mut self.v)?;
        self.a.apply(be, &self.v, &mut self.av)?;
        let alpha = be.dot(&self.v, &self.av, sc)?.re().as_f64();
        // The next Lanczos vector times β, into r₁, which becomes r₂.
        let back = if beta_old > 0.0 {
            -beta / beta_old
        } else {
            0.0
        };
        be.axpbypcz(
            T::one(),
            &self.av,
            real(-alpha / beta),
            &self.r2,
            real(back),
            &mut self.r1,
        )?;
        std::mem::swap(&mut self.r1, &mut self.r2);
        let beta_new = match self.next_beta(be, sc)? {
            Ok(b) if alpha.is_finite() => b,
            // The step's rotation needs β_new: the iterate stays the last step's.
            Ok(_) => return self.stop(be, sc, self.last_rr, Status::NonFinite, it),
            Err(status) => return self.stop(be, sc, self.last_rr, status, it),
        };
        // The new column (ε, δ, ᾱ… of the tridiagonal) through the previous rotation, then the
        // rotation that annihilates β_new.
        let oldeps = epsln;
        let delta = cs * dbar + sn * alpha;
        let gbar = sn * dbar - cs * alpha;
        let epsln = sn * beta_new;
        let dbar = -cs * beta_new;
        let gamma = gbar
            .hypot(beta_new)
            .max(f64::EPSILON * beta.abs().max(f64::MIN_POSITIVE));
        let cs = gbar / gamma;
        let sn = beta_new / gamma;
        let phi = cs * phibar;
        let phibar = sn * phibar;
        self.s = Lanczos {
            beta: beta_new,
            beta_old: beta,
            cs,
            sn,
            dbar,
            epsln,
            phibar,
        };
        // w ← (v − δ·w − ε_old·w_prev)/γ, and A·w from A·v by the same recurrence.
        let coef = (
            real(1.0 / gamma),
            real(-delta / gamma),
            real(-oldeps / gamma),
        );
        next_direction(be, coef, &self.v, &mut self.w, &mut self.w_prev)?;
        be.axpy(real(phi), &self.w, x)?;
        let rr = match self.carried.as_mut() {
            Some(c) => {
                next_direction(be, coef, &self.av, &mut c.aw, &mut c.aw_prev)?;
                be.axpy(real(-phi), &c.aw, &mut c.rr_vec)?;
                be.dot(&c.rr_vec, &c.rr_vec, sc)?.re().as_f64()
            }
            None => phibar * phibar,
        };
        self.last_rr = rr;
        if !rr.is_finite() {
            self.stop(be, sc, rr, Status::NonFinite, it)
        } else if rr <= self.thresh || beta_new == 0.0 {
            // β = 0: the Krylov space is invariant, the iterate solves the system.
            self.stop(be, sc, rr, Status::Converged, it)
        } else {
            self.pending.push((it, rr));
            Ok(())
        }
    }
}

/// `w ← a·v + b·w + c·w_prev` written into `w_prev`'s buffer, then the two names swap (the
/// direction before last is not needed again).
fn next_direction<T: Elem, B: VectorOps<T>>(
    be: &B,
    (a, b, c): (T, T, T),
    v: &B::Vector,
    w: &mut B::Vector,
    w_prev: &mut B::Vector,
) -> crate::Result<()> {
    be.axpbypcz(a, v, b, w, c, w_prev)?;
    std::mem::swap(w, w_prev);
    Ok(())
}
