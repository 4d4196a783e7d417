//! Incomplete-factorization preconditioners: [`Ilu0`] (`M = L·U`, for GMRES and BiCGSTAB, which
//! apply it on the right) and [`Ic0`] (`M = L·Lᵀ`, symmetric positive definite, for PCG; for a
//! complex Hermitian positive definite matrix `M = L·Lᴴ`).
//!
//! One body for every backend: the preconditioners see the backend only through
//! [`IncompleteOps`] (the factorization on a backend) and its supertrait
//! [`TriangularOps`](crate::backend::TriangularOps) (an incomplete factor type and its two
//! triangular solves on top of the solvers' [`VectorOps`](crate::backend::VectorOps)). Both are implemented for
//! [`Cpu`](crate::backend::Cpu) (the reference substitution) and, with feature `cuda`, for
//! [`GpuOps`](crate::backend::gpu::GpuOps) of every element type, real or complex (the level or
//! synchronization-free kernels of [`crate::sparse::triangular`]). [`Preconditioner::apply`]
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

use crate::backend::Preconditioner;
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::Elem;
use crate::sparse::incomplete::{FactorKind, FactorSummary, IncompleteOps, IncompleteParams};

/// The shared body of [`Ilu0`] and [`Ic0`].
struct Incomplete<T: Elem, B: IncompleteOps<T>> {
    factor: B::Factor,
    /// `L⁻¹r`, between the two solves.
    tmp: RefCell<B::Vector>,
}

impl<T: Elem, B: IncompleteOps<T>> Incomplete<T, B> {
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
    fn apply_block(&self, be: &B, rs: &[&B::Vector], zs: &mut [&mut B::Vector]) -> Result<()> {
        let mut t = self.tmp.borrow_mut();
        be.apply_factor_block(&self.factor, rs, &mut t, zs)
    }
}

macro_rules! incomplete_precond {
    ($name:ident, $kind:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name<T: Elem, B: IncompleteOps<T>>(Incomplete<T, B>);

        impl<T: Elem, B: IncompleteOps<T>> $name<T, B> {
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

        impl<T: Elem, B: IncompleteOps<T>> Preconditioner<T, B> for $name<T, B> {
            fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
                self.0.apply(be, r, z)
            }
            /// Two triangular solves, each a sweep over its levels: about 3 products of the
            /// matrix on the GPU (a level is a launch), so a check every few iterations.
            fn cost_in_products(&self) -> f64 {
                3.0
            }
            fn apply_block(
                &self,
                be: &B,
                rs: &[&B::Vector],
                zs: &mut [&mut B::Vector],
            ) -> Result<()> {
                self.0.apply_block(be, rs, zs)
            }
        }

        impl<T: Elem, B: IncompleteOps<T>> std::fmt::Debug for $name<T, B> {
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
