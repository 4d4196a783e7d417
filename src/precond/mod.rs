//! Preconditioners `z ← M⁻¹r` for the solvers of [`crate::solvers`], which see them only
//! through the [`Preconditioner`](crate::solvers::Preconditioner) trait.
//!
//! | preconditioner | needs | type |
//! |---|---|---|
//! | none | — | [`Identity`] |
//! | Jacobi, `M = diag(A)` (fused into the solvers' vector updates) | a nonzero diagonal | [`Jacobi`] |
//! | Chebyshev polynomial in `D⁻¹A`, bounds from a few Lanczos/Arnoldi steps | a spectrum in the right half-plane | [`Chebyshev`] |
//! | smoothed-aggregation algebraic multigrid, one V- or W-cycle | a positive diagonal (SPD for CG) | [`Amg`] |
//!
//! Each one is built the same way: plain parameters (`Default`), then a constructor bound to one
//! matrix on one backend (Ginkgo's factory → `generate` split; see `STYLE.md` §5).
//! They sit between the sparse operations and the solvers: they use the solvers' backend traits
//! ([`VectorOps`](crate::solvers::VectorOps), [`LinearOperator`](crate::solvers::LinearOperator))
//! and nothing of a concrete solver.

pub mod amg;
mod chebyshev;
mod jacobi;

pub use amg::{Amg, AmgParams, AmgSummary, MultigridOps};
pub use chebyshev::{Chebyshev, ChebyshevParams};
pub use jacobi::{Identity, Jacobi};
