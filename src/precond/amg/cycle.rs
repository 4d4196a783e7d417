//! The multigrid cycle, written once for every [`MultigridOps`] backend: smoothers, residual,
//! restriction, coarse correction, prolongation. Every step is a backend call that queues work
//! (SpMV with `y ← αAx + βy`, and the solvers' fused vector steps), so on the GPU a cycle never
//! waits for the host.

use super::level::HostLevel;
use super::{AmgParams, Cycle, LevelSummary, MultigridOps, Smoother};
use crate::backend::{ChebyshevSteps, LinearOperator, VectorOps};
use crate::error::{Error, Result};
use crate::precond::spectral::ChebyshevPoly;
use crate::scalar::Scalar;

/// A level's smoother on the backend.
pub(crate) struct LevelSmoother<V> {
    /// The scaling of the smoother: `D⁻¹` for Chebyshev, `ω·D⁻¹` for Jacobi, `D_l1⁻¹` for
    /// l1-Jacobi.
    pub scale: V,
    pub kind: Smoother,
    /// Chebyshev: the polynomial's interval in the spectrum of `D⁻¹A`.
    pub interval: (f64, f64),
    /// Chebyshev: the degree of the residual polynomial (operator applications per step,
    /// counting the residual; the meaning of [`ChebyshevPoly::degree`]).
    pub degree: usize,
    pub sweeps: usize,
}

impl<V> LevelSmoother<V> {
    pub fn new<T: Scalar, B: MultigridOps<T, Vector = V>>(
        be: &B,
        level: &HostLevel<T>,
        params: &AmgParams,
    ) -> Result<Self> {
        Self::from_host(be, &level.inv_diag, &level.inv_l1, level.rho, params)
    }

    /// The smoother from a level's host data: its inverse diagonal, inverse l1 row sums and
    /// ρ(D⁻¹A), on any backend (the distributed AMG's levels use it on theirs).
    pub fn from_host<T: Scalar, B: VectorOps<T, Vector = V>>(
        be: &B,
        inv_diag: &[T],
        inv_l1: &[T],
        rho: f64,
        params: &AmgParams,
    ) -> Result<Self> {
        let scale = match params.smoother {
            Smoother::Chebyshev => be.upload(inv_diag)?,
            Smoother::Jacobi => {
                let w = T::of_f64(params.jacobi_weight);
                be.upload(&inv_diag.iter().map(|&d| w * d).collect::<Vec<_>>())?
            }
            Smoother::L1Jacobi => be.upload(inv_l1)?,
        };
        Ok(Self::from_parts(scale, rho, params))
    }

    /// The smoother with its scaling vector already on the backend and the level's ρ(D⁻¹A).
    pub fn from_parts(scale: V, rho: f64, params: &AmgParams) -> Self {
        let hi = params.chebyshev_upper * rho;
        LevelSmoother {
            scale,
            kind: params.smoother,
            interval: (hi * params.chebyshev_lower, hi),
            degree: params.degree.max(1),
            sweeps: params.sweeps,
        }
    }

    /// A new ρ(D⁻¹A) (after a numeric re-setup): the Chebyshev interval follows it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn set_rho(&mut self, rho: f64, params: &AmgParams) {
        let hi = params.chebyshev_upper * rho;
        self.interval = (hi * params.chebyshev_lower, hi);
    }

    /// The Chebyshev polynomial of the interval and degree.
    pub fn poly(&self) -> ChebyshevPoly {
        ChebyshevPoly {
            lmin: self.interval.0,
            lmax: self.interval.1,
            degree: self.degree,
        }
    }

    /// Device bytes of the smoother's vector.
    pub fn bytes<T: Scalar, B: VectorOps<T, Vector = V>>(&self, be: &B) -> usize {
        be.len(&self.scale) * std::mem::size_of::<T>()
    }
}

/// A level's scratch vectors: the residual and the smoother's three work vectors and correction.
pub(crate) struct Scratch<V> {
    pub r: V,
    pub res: V,
    pub d: V,
    pub t: V,
    pub z: V,
}

impl<V> Scratch<V> {
    pub fn new<T: Scalar, B: VectorOps<T, Vector = V>>(be: &B, n: usize) -> Result<Self> {
        Ok(Scratch {
            r: be.zeros(n)?,
            res: be.zeros(n)?,
            d: be.zeros(n)?,
            t: be.zeros(n)?,
            z: be.zeros(n)?,
        })
    }
}

/// A level's operator as the smoother and the residual use it: a backend matrix
/// ([`OnBackend`], one fused SpMV for the residual) or any linear operator ([`Operator`]: the
/// distributed AMG's levels, whose products exchange halos).
pub(crate) trait LevelOp<T: Scalar, B: VectorOps<T>> {
    /// `y ← A·x`.
    fn mul(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> Result<()>;
    /// `r ← b − A·x`.
    fn residual(&self, be: &B, b: &B::Vector, x: &B::Vector, r: &mut B::Vector) -> Result<()>;
}

/// A backend matrix as a [`LevelOp`].
pub(crate) struct OnBackend<'a, M>(pub &'a M);

impl<T: Scalar, B: MultigridOps<T>> LevelOp<T, B> for OnBackend<'_, B::Matrix> {
    fn mul(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        be.spmv(self.0, T::one(), x, T::zero(), y)
    }
    fn residual(&self, be: &B, b: &B::Vector, x: &B::Vector, r: &mut B::Vector) -> Result<()> {
        be.copy(b, r)?;
        be.spmv(self.0, -T::one(), x, T::one(), r)
    }
}

/// A linear operator as a [`LevelOp`]: the residual is `A·x` followed by `b − (A·x)`, the same
/// roundings as the fused SpMV's `−1·(A·x) + 1·b`.
pub(crate) struct Operator<'a, A: ?Sized>(pub &'a A);

impl<T: Scalar, B: VectorOps<T>, A: LinearOperator<T, B> + ?Sized> LevelOp<T, B>
    for Operator<'_, A>
{
    fn mul(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        self.0.apply(be, x, y)
    }
    fn residual(&self, be: &B, b: &B::Vector, x: &B::Vector, r: &mut B::Vector) -> Result<()> {
        self.0.apply(be, x, r)?;
        be.axpby(T::one(), b, -T::one(), r)
    }
}

/// `r ← b − A·x`.
fn residual<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &B::Matrix,
    b: &B::Vector,
    x: &B::Vector,
    r: &mut B::Vector,
) -> Result<()> {
    OnBackend(a).residual(be, b, x, r)
}

/// Improves near-nullspace candidates by relaxing `A·x = 0` from them: `sweeps` smoothing steps
/// on each candidate of length `n`.
pub(crate) fn relax_candidates<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &B::Matrix,
    sm: &LevelSmoother<B::Vector>,
    n: usize,
    candidates: &mut [B::Vector],
    sweeps: usize,
) -> Result<()> {
    let zero = be.zeros(n)?;
    let mut work = Scratch::new(be, n)?;
    for x in candidates {
        for _ in 0..sweeps {
            smooth(be, &OnBackend(a), sm, &zero, x, false, &mut work)?;
        }
    }
    Ok(())
}

/// One smoothing step on `A·x = b` with any [`LevelOp`] (a level's matrix on the backend:
/// [`OnBackend`]); `zero` says `x` is zero on entry (its contents are then ignored and the
/// residual is `b` itself). The Chebyshev step is `z ← p(D⁻¹A)·D⁻¹·r` ([`ChebyshevPoly`], the
/// preconditioner's recurrence, `degree − 1` operator applications), Jacobi and l1-Jacobi
/// `z ← s∘r`, then `x ← x + z`.
pub(crate) fn smooth<T: Scalar, B: ChebyshevSteps<T>, A: LevelOp<T, B>>(
    be: &B,
    a: &A,
    sm: &LevelSmoother<B::Vector>,
    b: &B::Vector,
    x: &mut B::Vector,
    zero: bool,
    w: &mut Scratch<B::Vector>,
) -> Result<()> {
    let poly = |r: &B::Vector, z: &mut B::Vector, work: [&mut B::Vector; 3]| {
        sm.poly()
            .apply(be, Some(&sm.scale), r, z, work, |x, y| a.mul(be, x, y))
    };
    match sm.kind {
        Smoother::Chebyshev => {
            let Scratch { r, res, d, t, z } = w;
            if zero {
                poly(b, x, [res, d, t])
            } else {
                a.residual(be, b, x, r)?;
                poly(r, z, [res, d, t])?;
                be.axpy(T::one(), z, x)
            }
        }
        Smoother::Jacobi | Smoother::L1Jacobi => {
            if zero {
                be.scale(&sm.scale, b, x)
            } else {
                a.residual(be, b, x, &mut w.r)?;
                be.scale(&sm.scale, &w.r, &mut w.z)?;
                be.axpy(T::one(), &w.z, x)
            }
        }
    }
}

/// A level of the hierarchy on the backend.
pub(crate) struct DeviceLevel<T: Scalar, B: MultigridOps<T>> {
    pub a: B::Matrix,
    pub smoother: LevelSmoother<B::Vector>,
    /// `P` and `R` to the next level (none on the coarsest).
    pub p: Option<B::Matrix>,
    pub r: Option<B::Matrix>,
}

/// A level's cycle workspace: scratch, and the next level's right-hand side and solution.
pub(crate) struct Work<V> {
    pub s: Scratch<V>,
    pub bc: V,
    pub xc: V,
}

impl<V> Work<V> {
    /// The workspace of every level of `info` (the coarsest level has no next level: its
    /// next-level vectors have one unused element, as a device allocation of zero bytes is an
    /// error).
    pub fn for_levels<T: Scalar, B: MultigridOps<T, Vector = V>>(
        be: &B,
        info: &[LevelSummary],
    ) -> Result<Vec<Self>> {
        let mut work = Vec::with_capacity(info.len());
        for (l, lv) in info.iter().enumerate() {
            let nc = info.get(l + 1).map_or(1, |c| c.rows);
            work.push(Work {
                s: Scratch::new(be, lv.rows)?,
                bc: be.zeros(nc)?,
                xc: be.zeros(nc)?,
            });
        }
        Ok(work)
    }

    /// Whether `work` is the workspace of the levels of `info` (the same sizes).
    pub fn fits<T: Scalar, B: MultigridOps<T, Vector = V>>(
        be: &B,
        work: &[Self],
        info: &[LevelSummary],
    ) -> bool {
        work.len() == info.len()
            && work
                .iter()
                .zip(info)
                .all(|(w, lv)| be.len(&w.s.r) == lv.rows)
    }
}

/// The cycle on `levels[0]` (the coarsest is `levels.len() − 1`): `x ≈ A⁻¹b`; `zero` says `x`
/// is zero on entry.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cycle<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    levels: &[DeviceLevel<T, B>],
    coarse_inv: &B::Matrix,
    kind: Cycle,
    b: &B::Vector,
    x: &mut B::Vector,
    zero: bool,
    work: &mut [Work<B::Vector>],
) -> Result<()> {
    let (lv, deeper) = levels.split_first().expect("a level");
    if deeper.is_empty() {
        // The coarsest level: x ← x + A⁻¹(b − A·x) with the dense inverse.
        if zero {
            return be.spmv(coarse_inv, T::one(), b, T::zero(), x);
        }
        let w = &mut work[0];
        residual(be, &lv.a, b, x, &mut w.s.r)?;
        return be.spmv(coarse_inv, T::one(), &w.s.r, T::one(), x);
    }
    let (w, rest) = work.split_first_mut().expect("work for every level");
    let sweeps = lv.smoother.sweeps;
    for s in 0..sweeps {
        smooth(
            be,
            &OnBackend(&lv.a),
            &lv.smoother,
            b,
            x,
            zero && s == 0,
            &mut w.s,
        )?;
    }
    let x_zero = zero && sweeps == 0;
    if x_zero {
        be.copy(b, &mut w.s.r)?;
    } else {
        residual(be, &lv.a, b, x, &mut w.s.r)?;
    }
    let (p, r) = (lv.p.as_ref().expect("P"), lv.r.as_ref().expect("R"));
    be.spmv(r, T::one(), &w.s.r, T::zero(), &mut w.bc)?;
    let visits = match kind {
        Cycle::V => 1,
        Cycle::W => 2,
    };
    for v in 0..visits {
        cycle(be, deeper, coarse_inv, kind, &w.bc, &mut w.xc, v == 0, rest)?;
    }
    if x_zero {
        be.spmv(p, T::one(), &w.xc, T::zero(), x)?;
    } else {
        be.spmv(p, T::one(), &w.xc, T::one(), x)?;
    }
    for _ in 0..sweeps {
        smooth(be, &OnBackend(&lv.a), &lv.smoother, b, x, false, &mut w.s)?;
    }
    Ok(())
}

/// An error for a parameter.
pub(crate) fn bad(what: String) -> Error {
    Error::InvalidInput(format!("AMG parameters: {what}"))
}
