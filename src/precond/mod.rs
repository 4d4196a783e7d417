//! Preconditioners `z ← M⁻¹r` for the solvers, which see them only
//! through the [`Preconditioner`](crate::backend::Preconditioner) trait.
//!
//! | preconditioner | needs | type |
//! |---|---|---|
//! | none | — | [`Identity`] |
//! | Jacobi, `M = diag(A)` (fused into the solvers' vector updates) | a nonzero diagonal | [`Jacobi`] |
//! | Chebyshev polynomial in `D⁻¹A`, bounds from a few Lanczos/Arnoldi steps | a spectrum in the right half-plane | [`Chebyshev`] |
//! | ILU(0), `M = L·U` on `A`'s pattern (two triangular solves per application) | a nonzero diagonal, no zero pivot | [`Ilu0`] |
//! | IC(0), `M = L·Lᵀ` on `A`'s lower pattern | SPD `A`, positive pivots | [`Ic0`] |
//! | smoothed-aggregation algebraic multigrid, one V- or W-cycle | a positive diagonal (SPD for CG) | [`Amg`] |
//! | any of them stored and run in `f32` under an `f64` solve | values within `f32`'s range | [`Narrowed`] |
//!
//! Each one is built the same way: plain parameters (`Default`), then a constructor bound to one
//! matrix on one backend (Ginkgo's factory → `generate` split).
//! They sit between the sparse operations and the solvers: they use the backend traits
//! ([`VectorOps`](crate::backend::VectorOps), [`LinearOperator`](crate::backend::LinearOperator),
//! [`ChebyshevSteps`](crate::backend::ChebyshevSteps) for the polynomial,
//! [`TriangularOps`](crate::backend::TriangularOps) with [`IncompleteOps`] for ILU/IC,
//! [`MultigridOps`](crate::backend::MultigridOps) with [`AmgOps`] for AMG) and nothing of a
//! concrete solver.

pub mod amg;
pub mod auto;
mod chebyshev;
mod ilu;
mod jacobi;
mod narrowed;
pub(crate) mod spectral;

pub use crate::sparse::incomplete::{
    Application, FactorKind, Fill, IncompleteOps, IncompleteParams, Ordering, RowMatching,
};
pub use crate::sparse::triangular::SptrsvAlgorithm;
pub use amg::{Amg, AmgOps, AmgParams, AmgSummary};
pub use chebyshev::{Chebyshev, ChebyshevParams};
pub use ilu::{Ic0, Ilu0};
pub use jacobi::{Identity, Jacobi};
pub use narrowed::Narrowed;
