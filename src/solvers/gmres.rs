//! Restarted GMRES(m) (Saad and Schultz 1986) with right preconditioning, written once for every
//! backend. See the [module docs](super) for the device-resident scalars.
//!
//! One cycle starts from `r = b − A·x` with `v₀ = r/‖r‖` and `g = ‖r‖·e₁`; inner iteration `j`
//! (one per [`SolveInfo::iterations`]) is
//!
//! | step | vector work | scalars (on the backend) |
//! |---|---|---|
//! | `z = M⁻¹v_j` (Jacobi: [`scale`](crate::backend::VectorOps::scale); none: skipped) | 3 n | |
//! | `A.apply(z, v_{j+1})` | the operator | |
//! | [`gmres_arnoldi`](crate::backend::KrylovOps::gmres_arnoldi) | CGS2: 2 × (block dot, block update), normalise | H[:, j], Givens rotation, \|g_{j+1}\|, tests |
//!
//! and the cycle ends after `m` iterations (or at convergence) with `x ← x + M⁻¹·V·y`, where
//! `R·y = g` is the rotated least-squares problem (solved by a one-thread kernel on the GPU).
//!
//! **Why CGS2 and not modified Gram–Schmidt.** MGS needs `j + 1` dependent dot products per
//! column (each one a grid-wide reduction and a kernel launch on the GPU); classical
//! Gram–Schmidt computes all `j + 1` coefficients in one fused pass, and applying it twice
//! ("twice is enough", Giraud, Langou and Rozložník 2005) gives orthogonality to working
//! precision, like MGS or better, at four passes over the basis instead of `2(j + 1)` launches.
//!
//! **No host round trip inside a cycle.** The Hessenberg column, the rotations, the residual
//! estimate `|g_{j+1}|` and the convergence test are computed by the last block of the second
//! pass; the host reads the status every [`SolveParams::check_every`] iterations and at the end
//! of each cycle (once per `m` iterations, to decide between restart and stop).
//!
//! **Stagnation.** When a whole cycle leaves the residual where it started (`|g_m|² ≥ (1 − ε)·β²`)
//! the solve stops with [`SolveError::Stagnation`]: restarting from the same point would repeat
//! the same cycle.
//!
//! Residual semantics are the crate's: converged when the *true* `‖b − A·x‖ ≤ max(rel_tol·‖b‖,
//! abs_tol)` (unpreconditioned, the same as SciPy's `gmres(rtol=…)` with a right
//! preconditioner); the estimate `|g|` only triggers the true check.

use super::{check_problem, drive, Dyn, Method, SolveError, SolveInfo, SolveParams, Step};
use crate::backend::recur::Status;
use crate::backend::{KrylovOps, LinearOperator, Preconditioner};
use crate::scalar::Elem;

/// The default restart length m of [`gmres`] (SciPy's and PETSc's default as well).
pub const DEFAULT_RESTART: usize = 30;

/// Restarted GMRES(`restart`) for a general square `A`, right-preconditioned by `m` (pass
/// [`Identity`](crate::backend::Identity) for none, `precond::Jacobi` for the diagonal, or a
/// `precond::Chebyshev` polynomial). Each iteration is one operator application.
///
/// ```
/// use segsparse::solvers::{gmres, SolveParams};
/// use segsparse::backend::{Cpu, Identity};
/// use segsparse::CsrMatrix;
/// // An unsymmetric tridiagonal (convection–diffusion) matrix.
/// let n = 100;
/// let mut t = Vec::new();
/// for i in 0..n {
///     t.push((i, i, 2.0));
///     if i > 0 { t.push((i, i - 1, -1.3)); }
///     if i + 1 < n { t.push((i, i + 1, -0.7)); }
/// }
/// let a = CsrMatrix::<f64>::from_triplets(n, n, &t).unwrap();
/// let b = vec![1.0; n];
/// let mut x = vec![0.0; n];
/// let info = gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &SolveParams::default()).unwrap();
/// assert!(info.relative_residual <= 1e-8);
/// ```
///
/// # Errors
/// [`SolveError`]: stagnation over a cycle, an Arnoldi breakdown (singular operator),
/// non-convergence, NaN/Inf, dimension mismatch (also `restart = 0`), or a backend failure. On
/// error `x` holds the last iterate (after an Arnoldi breakdown, the least-squares iterate of
/// the columns before the one that vanished).
#[allow(clippy::too_many_arguments)]
pub fn gmres<T, B, A, P>(
    be: &B,
    a: &A,
    m: &P,
    b: &B::Vector,
    x: &mut B::Vector,
    restart: usize,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError>
where
    T: Elem,
    B: KrylovOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    gmres_body(be, &Dyn(a), &Dyn(m), b, x, restart, params)
}

/// [`gmres`] on trait objects: compiled once per element type and backend.
#[allow(clippy::too_many_arguments)]
fn gmres_body<T: Elem, B: KrylovOps<T>>(
    be: &B,
    a: &dyn LinearOperator<T, B>,
    m: &dyn Preconditioner<T, B>,
    b: &B::Vector,
    x: &mut B::Vector,
    restart: usize,
    params: &SolveParams,
) -> Result<SolveInfo, SolveError> {
    let clock = std::time::Instant::now();
    let n = check_problem(be, a, m, b, x)?;
    if restart == 0 {
        return Err(SolveError::DimensionMismatch {
            what: "GMRES restart length (must be at least 1)",
            expected: 1,
            found: 0,
        });
    }
    // A restart longer than n only adds columns after the exact solution.
    let restart = restart.min(n.max(1));
    // r, q, z and the m + 1 basis vectors; the small arrays are O(m²).
    let vectors = 2 + usize::from(!m.is_identity()) + restart + 1;
    let small = crate::memory::bytes_of::<T>(crate::backend::GmresLayout { m: restart }.len());
    super::preflight(
        be,
        "the GMRES workspace (Krylov basis)",
        n,
        vectors,
        small,
        params,
    )?;
    let mut state = GmresState {
        a,
        m,
        b,
        restart,
        v: GmresVectors::new(be, n, restart, m.is_identity(), params.basis)?,
    };
    let sc = be.scalars(n, params.max_iters)?;
    drive(be, a, b, x, params, &mut state, sc, clock)
}

struct GmresState<'a, T: Elem, B: KrylovOps<T>, A: ?Sized, P: ?Sized> {
    a: &'a A,
    m: &'a P,
    b: &'a B::Vector,
    restart: usize,
    v: GmresVectors<B::Vector, B::Krylov>,
}

impl<T, B, A, P> Method<T, B> for GmresState<'_, T, B, A, P>
where
    T: Elem,
    B: KrylovOps<T>,
    A: LinearOperator<T, B> + ?Sized,
    P: Preconditioner<T, B> + ?Sized,
{
    fn precond_cost(&self) -> f64 {
        self.m.cost_in_products()
    }
    fn r_and_scratch(&mut self) -> (&mut B::Vector, &mut B::Vector) {
        (&mut self.v.r, &mut self.v.q)
    }

    fn start(&mut self, be: &B, sc: &mut B::Scalars, it: usize) -> crate::Result<()> {
        self.v.start(be, sc, it)
    }

    fn finish(&mut self, at: Step<'_, T, B>, status: Status) -> crate::Result<()> {
        self.v
            .finish(at.be, self.m, at.x, status, at.it, self.restart)
    }

    fn steps_update_x(&self) -> bool {
        false
    }

    fn take_new_iterate(&mut self) -> bool {
        std::mem::take(&mut self.v.corrected)
    }

    fn step(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        let Step { be, sc, it, .. } = at;
        if self.v.halted {
            return Ok(());
        }
        let GmresVectors { k, z, j, .. } = &mut self.v;
        let (vj, vnext) = be.krylov_pair(k, *j);
        match z {
            None => self.a.apply(be, vj, vnext)?,
            Some(z) => {
                match self.m.inverse_diagonal() {
                    Some(d) => be.scale(d, vj, z)?,
                    None => self.m.apply(be, vj, z)?,
                }
                self.a.apply(be, z, vnext)?;
            }
        }
        self.v.arnoldi(be, sc, it)
    }

    /// A block's steps depend on its starting column (which Krylov vectors it reads and
    /// writes), so the column is the key; a replayed block advances the column counter through
    /// [`Method::replayed`] below.
    fn block_key(&self) -> Option<u64> {
        Some(self.v.j as u64)
    }

    fn replayed(&mut self, len: usize) {
        if !self.v.halted {
            self.v.j += len;
        }
    }

    /// A block ends at the end of the cycle, where the host decides.
    fn block_limit(&self) -> usize {
        self.restart - self.v.j
    }

    fn after_block(&mut self, at: Step<'_, T, B>) -> crate::Result<()> {
        let (a, m, b) = (self.a, self.m, self.b);
        let Step { be, sc, x, it } = at;
        self.v.end_of_cycle(be, a, m, b, sc, x, it, self.restart)
    }
}

/// The vectors and the cycle state of one GMRES solve (one column of a block solve), with the
/// steps around the products, written once for the one-column and the multi-column GMRES.
pub(super) struct GmresVectors<V, K> {
    pub(super) r: V,
    /// Scratch: `A·x` for the residual, and `V·y` at the end of a cycle.
    pub(super) q: V,
    /// `M⁻¹v_j` (and `M⁻¹V·y`) when preconditioned.
    pub(super) z: Option<V>,
    pub(super) k: K,
    /// Columns done in this cycle.
    pub(super) j: usize,
    /// The iteration at which this cycle started.
    pub(super) cycle_it: usize,
    /// The status was seen set at a cycle end: later steps (until the driver's check) are no-ops.
    pub(super) halted: bool,
    /// `x` received a cycle's correction that no one has looked at yet.
    pub(super) corrected: bool,
}

impl<V, K> GmresVectors<V, K> {
    /// The vectors of length `n` and a basis of `restart + 1` vectors stored in `basis`
    /// ([`KrylovOps::krylov_stored`]; `z` unless `identity`).
    pub(super) fn new<T: Elem, B: KrylovOps<T, Vector = V, Krylov = K>>(
        be: &B,
        n: usize,
        restart: usize,
        identity: bool,
        basis: crate::scalar::Storage,
    ) -> crate::Result<Self> {
        Ok(GmresVectors {
            r: be.zeros(n)?,
            q: be.zeros(n)?,
            z: if identity { None } else { Some(be.zeros(n)?) },
            k: be.krylov_stored(n, restart, basis)?,
            j: 0,
            cycle_it: 0,
            halted: false,
            corrected: false,
        })
    }

    /// (Re)starts a cycle at iteration `it` from the residual in `r`.
    pub(super) fn start<T: Elem, B: KrylovOps<T, Vector = V, Krylov = K>>(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        self.j = 0;
        self.cycle_it = it;
        self.halted = false;
        be.gmres_start(&self.r, &mut self.k, sc, it)
    }

    /// The Arnoldi step of column `j` once `v_{j+1} = A·M⁻¹v_j` is written.
    pub(super) fn arnoldi<T: Elem, B: KrylovOps<T, Vector = V, Krylov = K>>(
        &mut self,
        be: &B,
        sc: &mut B::Scalars,
        it: usize,
    ) -> crate::Result<()> {
        be.gmres_arnoldi(&mut self.k, self.j, sc, it)?;
        self.j += 1;
        Ok(())
    }

    /// `x ← x + M⁻¹·V·y` with the first `ncols` columns of this cycle.
    pub(super) fn correct<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        x: &mut V,
        ncols: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: KrylovOps<T, Vector = V, Krylov = K>,
        P: Preconditioner<T, B> + ?Sized,
    {
        if ncols == 0 {
            return Ok(());
        }
        self.corrected = true;
        be.gmres_combine(&mut self.k, ncols, &mut self.q)?;
        match &mut self.z {
            None => be.axpy(T::one(), &self.q, x),
            Some(z) => {
                match m.inverse_diagonal() {
                    Some(d) => be.scale(d, &self.q, z)?,
                    None => m.apply(be, &self.q, z)?,
                }
                be.axpy(T::one(), z, x)
            }
        }
    }

    /// The end of a (re)start's iterations with `status` at iteration `it`: the correction of
    /// the columns of this cycle that are valid.
    pub(super) fn finish<T, B, P>(
        &mut self,
        be: &B,
        m: &P,
        x: &mut V,
        status: Status,
        it: usize,
        restart: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: KrylovOps<T, Vector = V, Krylov = K>,
        P: Preconditioner<T, B> + ?Sized,
    {
        let ncols = match status {
            // Iteration limit inside a cycle: the columns done so far.
            Status::Running => self.j,
            // Set at iteration `it`: columns up to and including that one are valid.
            Status::Converged | Status::Stagnated => it.saturating_sub(self.cycle_it),
            // The column of iteration `it` vanished (a singular operator or preconditioner):
            // the columns before it give the least-squares iterate of the space they span.
            Status::BreakdownArnoldi => it.saturating_sub(self.cycle_it).saturating_sub(1),
            _ => 0,
        };
        let ncols = ncols.min(restart);
        // Mark the cycle as applied, so a restart by the driver begins afresh.
        self.j = 0;
        self.cycle_it = it;
        self.correct(be, m, x, ncols)
    }

    /// After a block at iteration `it`: at the end of a cycle, the one host read per cycle
    /// decides between stop (the later steps are no-ops until the driver's check) and restart
    /// (correction, new residual `b − A·x`, new cycle).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn end_of_cycle<T, B, A, P>(
        &mut self,
        be: &B,
        a: &A,
        m: &P,
        b: &V,
        sc: &mut B::Scalars,
        x: &mut V,
        it: usize,
        restart: usize,
    ) -> crate::Result<()>
    where
        T: Elem,
        B: KrylovOps<T, Vector = V, Krylov = K>,
        A: LinearOperator<T, B> + ?Sized,
        P: Preconditioner<T, B> + ?Sized,
    {
        if self.j == restart && !self.halted {
            let slots = be.read_slots(sc)?;
            if Status::of(slots[crate::backend::Slot::Status as usize]) != Status::Running {
                self.halted = true;
                return Ok(());
            }
            self.correct(be, m, x, restart)?;
            // The exact values: with an operator stored narrower than its vectors, every cycle
            // starts from the true residual (GMRES with iterative refinement).
            a.apply_exact(be, x, &mut self.q)?;
            be.residual(b, &self.q, &mut self.r)?;
            self.start(be, sc, it)?;
        }
        Ok(())
    }
}
