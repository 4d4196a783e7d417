//! A preconditioner stored and run in `f32` under a solver of `f64` work: [`Narrowed`].
//!
//! The solvers sit at their memory floor, so a preconditioner costs what it moves. An AMG
//! hierarchy or an incomplete factor built from the `f32` rounding of `A` and applied to `f32`
//! vectors moves half the bytes of its `f64` form per application: its matrices' values, its
//! smoother's data and every vector of its cycle or triangular solves. [`Narrowed`] wraps such a
//! preconditioner (`P` of `f32` work on the `f32` backend [`NarrowOps::Low`] of the solver's
//! backend) for a solver of `f64` work: `z ← widen(P·fl32(r))`.
//!
//! # `f64` answers
//!
//! The solver keeps its `f64` vectors, its `f64` operator and its true residuals, so its answer
//! is measured against `A` itself, to the `f64` tolerance. The preconditioner only needs to
//! approximate `A⁻¹`: `M⁻¹` of the rounded hierarchy differs from the `f64` one's by the
//! rounding of the values (2⁻²⁴ relative per value) and of the cycle's arithmetic, both far
//! below what an AMG cycle or an incomplete factor leaves of `A⁻¹` anyway. CG needs a fixed
//! symmetric `M⁻¹`; the `f32` cycle is one up to its rounding (about 10⁻⁷ of `z`), which CG
//! tolerates as it tolerates the `f64` cycle's rounding, at a different scale: the iteration
//! counts stay the `f64` hierarchy's (`tests/all/mixed.rs`, `benches/results/mixed.md`).
//!
//! Values beyond `f32`'s range, or nonzero ones below its smallest normal number, are refused
//! before the setup ([`F32Fit::of`]'s sentence).

use std::cell::RefCell;

use super::amg::{Amg, AmgOps, AmgParams};
use super::ilu::{Ic0, Ilu0};
use crate::backend::{LowVector, MultigridOps, NarrowOps, Preconditioner, VectorOps};
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::sparse::incomplete::{IncompleteOps, IncompleteParams};
use crate::spmv::mixed::F32Fit;

/// A preconditioner `P` of `f32` work applied under `f64` vectors: `z ← widen(P·fl32(r))` (see
/// the [module docs](self)). Built with [`Narrowed::amg`], [`Narrowed::ilu0`],
/// [`Narrowed::ic0`], or [`Narrowed::new`] around any preconditioner of the `f32` backend.
///
/// ```
/// use segsparse::backend::Cpu;
/// use segsparse::precond::{AmgParams, Narrowed};
/// use segsparse::solvers::{pcg, SolveParams};
/// let a = segsparse::generate::poisson3d::<f64>(16).unwrap();
/// // The hierarchy of fl32(A), its cycle on f32 vectors.
/// let amg = Narrowed::amg(&Cpu, &a, &AmgParams::default())?;
/// println!("{}", amg.inner().summary());
/// let b = vec![1.0; a.nrows()];
/// let mut x = vec![0.0; a.nrows()];
/// let info = pcg(&Cpu, &a, &amg, &b, &mut x, &SolveParams { rel_tol: 1e-10, ..Default::default() })
///     .unwrap();
/// assert!(info.relative_residual <= 1e-10);
/// # Ok::<(), segsparse::Error>(())
/// ```
pub struct Narrowed<B: NarrowOps, P> {
    low: B::Low,
    inner: P,
    /// The `f32` residual and correction of one application (sized on first use).
    work: RefCell<Option<(LowVector<B>, LowVector<B>)>>,
}

impl<B: NarrowOps, P> std::fmt::Debug for Narrowed<B, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Narrowed(f32 preconditioner under f64 work)")
    }
}

/// `a`'s values rounded to `f32`, or why they cannot be.
fn rounded(a: &CsrMatrix<f64>) -> Result<CsrMatrix<f32>> {
    F32Fit::of(a).map_err(Error::InvalidInput)?;
    Ok(a.cast::<f32>())
}

impl<B: NarrowOps, P: Preconditioner<f32, B::Low>> Narrowed<B, P> {
    /// Wraps the preconditioner that `build` makes on the `f32` backend of `be`.
    ///
    /// # Errors
    /// Those of `build`, and of making the `f32` backend.
    pub fn new(be: &B, build: impl FnOnce(&B::Low) -> Result<P>) -> Result<Self> {
        let low = be.low()?;
        let inner = build(&low)?;
        Ok(Narrowed {
            low,
            inner,
            work: RefCell::new(None),
        })
    }

    /// The preconditioner of `f32` work (e.g. the [`Amg`] for its summary).
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The `f32` backend it runs on.
    pub fn low(&self) -> &B::Low {
        &self.low
    }
}

impl<B: NarrowOps> Narrowed<B, Amg<f32, B::Low>>
where
    B::Low: AmgOps<f32>,
{
    /// The AMG hierarchy of `fl32(a)`, set up in `f32` on the backend (on the GPU: on the
    /// device) and cycled on `f32` vectors.
    ///
    /// # Errors
    /// A value that does not fit `f32` ([`F32Fit::of`]'s sentence), and as [`Amg::new`].
    pub fn amg(be: &B, a: &CsrMatrix<f64>, params: &AmgParams) -> Result<Self> {
        let low = rounded(a)?;
        Self::new(be, |l| Amg::new(l, &low, params))
    }

    /// [`Narrowed::amg`] with near-nullspace candidates (rounded to `f32`), as
    /// [`Amg::with_candidates`].
    ///
    /// # Errors
    /// As [`Narrowed::amg`] and [`Amg::with_candidates`].
    pub fn amg_with_candidates(
        be: &B,
        a: &CsrMatrix<f64>,
        candidates: &[Vec<f64>],
        params: &AmgParams,
    ) -> Result<Self> {
        let low = rounded(a)?;
        let c: Vec<Vec<f32>> = candidates
            .iter()
            .map(|v| v.iter().map(|&x| x as f32).collect())
            .collect();
        Self::new(be, |l| Amg::with_candidates(l, &low, &c, params))
    }

    /// The AMG hierarchy of a matrix of `f32` values already on the `f32` backend (on the GPU
    /// the `f32` matrix of a [`GpuMixedCsr`](crate::spmv::gpu::mixed::GpuMixedCsr), or
    /// [`narrowed`](crate::spmv::gpu::mixed::narrowed) of a `GpuCsr<f64>`): the whole setup
    /// runs on the device from it, as [`Amg::from_matrix`].
    ///
    /// # Errors
    /// As [`Amg::from_matrix`].
    pub fn amg_from_matrix(
        be: &B,
        a: &<B::Low as MultigridOps<f32>>::Matrix,
        candidates: Option<&[Vec<f64>]>,
        params: &AmgParams,
    ) -> Result<Self> {
        match candidates {
            None => Self::new(be, |l| Amg::from_matrix(l, a, params)),
            Some(c) => {
                let c: Vec<Vec<f32>> = c
                    .iter()
                    .map(|v| v.iter().map(|&x| x as f32).collect())
                    .collect();
                Self::new(be, |l| Amg::from_matrix_with_candidates(l, a, &c, params))
            }
        }
    }
}

impl<B: NarrowOps> Narrowed<B, Ilu0<f32, B::Low>>
where
    B::Low: IncompleteOps<f32>,
{
    /// ILU(0) of `fl32(a)`: the factorization in `f32` and both triangular solves on `f32`
    /// vectors.
    ///
    /// # Errors
    /// A value that does not fit `f32`, and as [`Ilu0::new`] (a pivot that vanishes in `f32`
    /// names its row).
    pub fn ilu0(be: &B, a: &CsrMatrix<f64>, params: &IncompleteParams) -> Result<Self> {
        let low = rounded(a)?;
        Self::new(be, |l| Ilu0::new(l, &low, params))
    }
}

impl<B: NarrowOps> Narrowed<B, Ic0<f32, B::Low>>
where
    B::Low: IncompleteOps<f32>,
{
    /// IC(0) of `fl32(a)`, as [`Narrowed::ilu0`].
    ///
    /// # Errors
    /// As [`Narrowed::ilu0`] and [`Ic0::new`].
    pub fn ic0(be: &B, a: &CsrMatrix<f64>, params: &IncompleteParams) -> Result<Self> {
        let low = rounded(a)?;
        Self::new(be, |l| Ic0::new(l, &low, params))
    }
}

impl<B: NarrowOps, P: Preconditioner<f32, B::Low>> Preconditioner<f64, B> for Narrowed<B, P> {
    /// `z ← widen(P·fl32(r))`. Queues work only when `P` does (the AMG cycle, the GPU's
    /// triangular solves).
    fn cost_in_products(&self) -> f64 {
        self.inner.cost_in_products()
    }
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        let n = be.len(r);
        let mut work = self.work.borrow_mut();
        if work.as_ref().is_none_or(|(r32, _)| self.low.len(r32) != n) {
            *work = Some((self.low.zeros(n)?, self.low.zeros(n)?));
        }
        let (r32, z32) = work.as_mut().expect("sized above");
        be.narrow(r, r32)?;
        self.inner.apply(&self.low, r32, z32)?;
        be.widen(z32, z)
    }
}
