//! Incomplete-factorization preconditioners: [`Ilu0`] (`M = L·U`, for GMRES and BiCGSTAB, which
//! apply it on the right) and [`Ic0`] (`M = L·Lᵀ`, symmetric positive definite, for PCG; for a
//! complex Hermitian positive definite matrix `M = L·Lᴴ`).
//!
//! One body for every backend: the preconditioners see the backend only through
//! [`TriangularOps`], which adds an incomplete factor type and its two triangular solves to the
//! solvers' [`VectorOps`]. It is implemented for [`Cpu`](crate::backend::Cpu) (the reference
//! substitution) and, with feature `cuda`, for [`GpuOps`](crate::backend::gpu::GpuOps) of every
//! element type, real or complex (the level or synchronization-free kernels of
//! [`crate::sparse::triangular`]). [`Preconditioner::apply`]
//! is two triangular solves that only queue device work (no host synchronisation).
//!
//! `update` re-factors new values on the same pattern without a new analysis.
//!
//! ```
//! use segsparse::precond::{Ilu0, IncompleteParams};
//! use segsparse::solvers::{gmres, SolveParams};
//! use segsparse::backend::Cpu;
//! let a = segsparse::generate::poisson2d::<f64>(16).unwrap();
//! let m = Ilu0::new(&Cpu, &a, &IncompleteParams::default()).unwrap();
//! let b = vec![1.0; a.nrows()];
//! let mut x = vec![0.0; a.nrows()];
//! let info = gmres(&Cpu, &a, &m, &b, &mut x, 30, &SolveParams::default()).unwrap();
//! assert!(info.relative_residual <= 1e-8);
//! ```

use std::cell::RefCell;

use crate::backend::{Cpu, Preconditioner, VectorOps};
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Elem;
use crate::sparse::incomplete::{FactorKind, FactorSummary, IncompleteFactor, IncompleteParams};

/// A backend that holds incomplete factors and solves with their triangles.
pub trait TriangularOps<T: Elem>: VectorOps<T> {
    /// The factor on this backend.
    type Factor;
    /// Analyses and factors `a`.
    ///
    /// # Errors
    /// A bad structure (no diagonal entry, unsorted indices) or a bad pivot, naming the row.
    fn factor(
        &self,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self::Factor>;
    /// Re-factors new values of `a` on the pattern of `f`.
    ///
    /// # Errors
    /// Another pattern, or a bad pivot naming the row.
    fn refactor(&self, f: &mut Self::Factor, a: &CsrMatrix<T>) -> Result<()>;
    /// `x = L⁻¹b`. Must not synchronise with the host.
    fn lower_solve(&self, f: &Self::Factor, b: &Self::Vector, x: &mut Self::Vector) -> Result<()>;
    /// `x = U⁻¹b` (IC: `L⁻ᵀb`). Must not synchronise with the host.
    fn upper_solve(&self, f: &Self::Factor, b: &Self::Vector, x: &mut Self::Vector) -> Result<()>;
    /// What the factorization did and how each triangle is applied.
    fn summary(f: &Self::Factor) -> FactorSummary;
    /// `z = U⁻¹(L⁻¹r)` with `t` for `L⁻¹r`: the two solves, unless the backend fuses them. Must
    /// not synchronise with the host.
    fn apply_factor(
        &self,
        f: &Self::Factor,
        r: &Self::Vector,
        t: &mut Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()> {
        self.lower_solve(f, r, t)?;
        self.upper_solve(f, t, z)
    }
}

impl<T: Elem> TriangularOps<T> for Cpu {
    type Factor = IncompleteFactor<T>;
    fn factor(
        &self,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<IncompleteFactor<T>> {
        IncompleteFactor::new(a, kind, params)
    }
    fn refactor(&self, f: &mut IncompleteFactor<T>, a: &CsrMatrix<T>) -> Result<()> {
        f.refactor(a)
    }
    fn lower_solve(&self, f: &IncompleteFactor<T>, b: &Vec<T>, x: &mut Vec<T>) -> Result<()> {
        f.lower_solve(b, x);
        Ok(())
    }
    fn upper_solve(&self, f: &IncompleteFactor<T>, b: &Vec<T>, x: &mut Vec<T>) -> Result<()> {
        f.upper_solve(b, x);
        Ok(())
    }
    fn summary(f: &IncompleteFactor<T>) -> FactorSummary {
        f.summary()
    }
}

#[cfg(feature = "cuda")]
impl<T: Elem> TriangularOps<T> for crate::backend::gpu::GpuOps<T>
where
    T::Dev: crate::gpu::KernelType,
{
    type Factor = crate::sparse::incomplete::gpu::GpuIncompleteFactor<T>;
    fn factor(
        &self,
        a: &CsrMatrix<T>,
        kind: FactorKind,
        params: &IncompleteParams,
    ) -> Result<Self::Factor> {
        crate::sparse::incomplete::gpu::GpuIncompleteFactor::new(self.gpu(), a, kind, params)
    }
    fn refactor(&self, f: &mut Self::Factor, a: &CsrMatrix<T>) -> Result<()> {
        f.refactor(a)
    }
    fn lower_solve(
        &self,
        f: &Self::Factor,
        b: &cudarc::driver::CudaSlice<T::Dev>,
        x: &mut cudarc::driver::CudaSlice<T::Dev>,
    ) -> Result<()> {
        f.lower_solve(b, x)
    }
    fn upper_solve(
        &self,
        f: &Self::Factor,
        b: &cudarc::driver::CudaSlice<T::Dev>,
        x: &mut cudarc::driver::CudaSlice<T::Dev>,
    ) -> Result<()> {
        f.upper_solve(b, x)
    }
    fn summary(f: &Self::Factor) -> FactorSummary {
        f.summary()
    }
    /// Both triangles swept: one cooperative launch for the whole application.
    fn apply_factor(
        &self,
        f: &Self::Factor,
        r: &cudarc::driver::CudaSlice<T::Dev>,
        t: &mut cudarc::driver::CudaSlice<T::Dev>,
        z: &mut cudarc::driver::CudaSlice<T::Dev>,
    ) -> Result<()> {
        if f.apply_swept(r, t, z)? {
            return Ok(());
        }
        f.lower_solve(r, t)?;
        f.upper_solve(t, z)
    }
}

/// The shared body of [`Ilu0`] and [`Ic0`].
struct Incomplete<T: Elem, B: TriangularOps<T>> {
    factor: B::Factor,
    /// `L⁻¹r`, between the two solves.
    tmp: RefCell<B::Vector>,
}

impl<T: Elem, B: TriangularOps<T>> Incomplete<T, B> {
    fn new(be: &B, a: &CsrMatrix<T>, kind: FactorKind, params: &IncompleteParams) -> Result<Self> {
        Ok(Incomplete {
            factor: be.factor(&a.canonical(), kind, params)?,
            tmp: RefCell::new(be.zeros(a.nrows())?),
        })
    }
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        let mut t = self.tmp.borrow_mut();
        be.apply_factor(&self.factor, r, &mut t, z)
    }
}

macro_rules! incomplete_precond {
    ($name:ident, $kind:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name<T: Elem, B: TriangularOps<T>>(Incomplete<T, B>);

        impl<T: Elem, B: TriangularOps<T>> $name<T, B> {
            /// Analyses and factors `a` on the backend `be` (a matrix with unsorted or duplicate
            /// column indices is put in canonical form first).
            ///
            /// # Errors
            /// A row without a diagonal entry, unsorted column indices, or a bad pivot (each
            /// naming the row); backend failures.
            pub fn new(be: &B, a: &CsrMatrix<T>, params: &IncompleteParams) -> Result<Self> {
                Ok($name(Incomplete::new(be, a, $kind, params)?))
            }

            /// Re-factors new values of `a` on the same pattern (no new analysis).
            ///
            /// # Errors
            /// Another pattern, or a bad pivot naming the row.
            pub fn update(&mut self, be: &B, a: &CsrMatrix<T>) -> Result<()> {
                be.refactor(&mut self.0.factor, &a.canonical())
            }

            /// The backend's factor.
            pub fn factor(&self) -> &B::Factor {
                &self.0.factor
            }

            /// What the factorization did (ordering, matching, shift) and how each triangle
            /// is applied (levels, exact or Jacobi sweeps).
            pub fn summary(&self) -> FactorSummary {
                B::summary(&self.0.factor)
            }
        }

        impl<T: Elem, B: TriangularOps<T>> Preconditioner<T, B> for $name<T, B> {
            fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
                self.0.apply(be, r, z)
            }
        }

        impl<T: Elem, B: TriangularOps<T>> std::fmt::Debug for $name<T, B> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", stringify!($name))
            }
        }
    };
}

incomplete_precond!(
    Ilu0,
    FactorKind::Ilu0,
    "ILU(0): `M = L·U` on `A`'s pattern; `apply` is `z = U⁻¹(L⁻¹r)`. For GMRES and BiCGSTAB \
     (right preconditioning)."
);
incomplete_precond!(
    Ic0,
    FactorKind::Ic0,
    "IC(0): `M = L·Lᵀ` on the pattern of `A`'s lower triangle (symmetric positive definite `A`); \
     `apply` is `z = L⁻ᵀ(L⁻¹r)`. Symmetric positive definite, so PCG may use it."
);
