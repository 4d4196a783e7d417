//! Preconditioners across ranks: block-Jacobi with any single-device preconditioner as the local
//! solver, the distributed Chebyshev polynomial, and the distributed AMG ([`DistAmg`], its own
//! module).
//!
//! # Block-Jacobi
//!
//! Each rank applies a preconditioner of its **diagonal block** `A_oo` (its rows × its own
//! columns; the couplings to other ranks' rows are dropped): `M = diag(M_0, …, M_{p−1})`, so an
//! application is purely local — no message at all. The local preconditioner is an ordinary
//! single-device one ([`Jacobi`], [`Chebyshev`], [`Ilu0`], [`Ic0`], [`Amg`]) built on the rank's
//! *local* backend ([`LocalOps::local`]: the [`Cpu`](crate::backend::Cpu) for simulated ranks,
//! the rank's [`GpuOps`](crate::backend::gpu::GpuOps) for NCCL ranks), whose vectors are the
//! distributed backend's own (`Vec<T>` and a device buffer), so [`BlockJacobi`] only forwards.
//! That is Ginkgo's distributed `Schwarz` with a local solver factory, in this crate's shape.
//!
//! On one rank `A_oo = A` and block-Jacobi **is** the single-device preconditioner
//! (`tests/all/dist_sim.rs` checks the application bit for bit). On `p` ranks the dropped couplings
//! cost iterations, the more the stronger the local solver (Jacobi loses nothing: it is already
//! diagonal; ILU/IC lose little; AMG loses its global coarse correction across the cuts) — see
//! the counts asserted in `tests/all/dist_sim.rs`.
//!
//! # The distributed Chebyshev polynomial
//!
//! [`Chebyshev::from_operator`] on the distributed backend and operator: the polynomial in the
//! *global* `D⁻¹A`, applied with distributed products (halo exchanges) and local vector updates;
//! its bounds come from an Arnoldi process whose inner products are all-reduces. It is the
//! one-device polynomial, partition-independent up to rounding.

use super::amg::{DistAmg, DistAmgParams};
pub use super::local::{agree, DistOperator, LocalOps};
use crate::backend::Preconditioner;
use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::precond::{
    Amg, AmgParams, Chebyshev, ChebyshevParams, Ic0, Identity, Ilu0, IncompleteParams, Jacobi,
};
use crate::scalar::Scalar;

/// Block-Jacobi across ranks: the local preconditioner `P` of this rank's diagonal block,
/// applied on the local backend (see the [module docs](self)).
#[derive(Debug)]
pub struct BlockJacobi<P> {
    local: P,
}

impl<P> BlockJacobi<P> {
    /// Wraps a preconditioner built for this rank's diagonal block on [`LocalOps::local`].
    pub fn new(local: P) -> Self {
        BlockJacobi { local }
    }
    /// The local preconditioner.
    pub fn local(&self) -> &P {
        &self.local
    }
}

impl<T, D, P> Preconditioner<T, D> for BlockJacobi<P>
where
    T: Scalar,
    D: LocalOps<T>,
    P: Preconditioner<T, D::Local>,
{
    fn apply(&self, be: &D, r: &D::Vector, z: &mut D::Vector) -> Result<()> {
        self.local.apply(be.local(), r, z)
    }
    // A diagonal local preconditioner stays fused into the solvers' vector steps.
    fn inverse_diagonal(&self) -> Option<&D::Vector> {
        self.local.inverse_diagonal()
    }
    fn is_identity(&self) -> bool {
        self.local.is_identity()
    }
    fn cost_in_products(&self) -> f64 {
        self.local.cost_in_products()
    }
}

/// The local solver of a [`DistPrecond::BlockJacobi`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum LocalPrecond {
    /// The diagonal (the same as [`DistPrecond::Jacobi`]).
    Jacobi,
    /// A Chebyshev polynomial in the diagonal block's `D⁻¹A_oo` (bounds estimated locally).
    Chebyshev(ChebyshevParams),
    /// ILU(0) of the diagonal block.
    Ilu0(IncompleteParams),
    /// IC(0) of the diagonal block.
    Ic0(IncompleteParams),
    /// Smoothed-aggregation AMG of the diagonal block.
    Amg(AmgParams),
}

impl LocalPrecond {
    /// A short name (`jacobi`, `poly`, `ilu0`, `ic0`, `amg`).
    pub fn name(&self) -> &'static str {
        match self {
            LocalPrecond::Jacobi => "jacobi",
            LocalPrecond::Chebyshev(_) => "poly",
            LocalPrecond::Ilu0(_) => "ilu0",
            LocalPrecond::Ic0(_) => "ic0",
            LocalPrecond::Amg(_) => "amg",
        }
    }
}

/// A preconditioner of a distributed solve.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum DistPrecond {
    /// None.
    None,
    /// The inverse diagonal (fused into the vector steps; block-Jacobi with 1×1 blocks).
    Jacobi,
    /// The distributed Chebyshev polynomial in the global `D⁻¹A` ([`Chebyshev::from_operator`]).
    Chebyshev(ChebyshevParams),
    /// Block-Jacobi with this local solver ([`BlockJacobi`]).
    BlockJacobi(LocalPrecond),
    /// Smoothed-aggregation AMG across the ranks, couplings kept ([`DistAmg`]).
    Amg(DistAmgParams),
}

impl DistPrecond {
    /// A short name: `none`, `jacobi`, `poly`, `amg`, or `block-jacobi(<local>)`.
    pub fn name(&self) -> String {
        match self {
            DistPrecond::None => "none".into(),
            DistPrecond::Jacobi => "jacobi".into(),
            DistPrecond::Chebyshev(_) => "poly".into(),
            DistPrecond::BlockJacobi(l) => format!("block-jacobi({})", l.name()),
            DistPrecond::Amg(_) => "amg".into(),
        }
    }

    /// What one application costs in the units of [`IterationWork`](super::IterationWork)
    /// (matrix-sized passes, distributed products, all-reduces, vector passes), for
    /// [`choose_gpus`](super::choose_gpus). AMG is counted as its fine-level products times a
    /// typical operator complexity of 1.4.
    pub fn work_per_application(&self) -> (f64, f64, f64, f64) {
        match self {
            DistPrecond::None => (0.0, 0.0, 0.0, 0.0),
            DistPrecond::Jacobi | DistPrecond::BlockJacobi(LocalPrecond::Jacobi) => {
                (0.0, 0.0, 0.0, 2.0)
            }
            DistPrecond::Chebyshev(p) => {
                let d = p.degree as f64;
                (d, d, 0.0, 5.0 * (d + 1.0))
            }
            DistPrecond::BlockJacobi(LocalPrecond::Chebyshev(p)) => {
                let d = p.degree as f64;
                (d, 0.0, 0.0, 5.0 * (d + 1.0))
            }
            DistPrecond::BlockJacobi(LocalPrecond::Ilu0(_) | LocalPrecond::Ic0(_)) => {
                (1.0, 0.0, 0.0, 3.0)
            }
            DistPrecond::BlockJacobi(LocalPrecond::Amg(p)) => {
                let products = 2.0 * (p.sweeps * p.degree) as f64 + 3.0;
                (1.4 * products, 0.0, 0.0, 1.4 * 4.0 * products)
            }
            // The same products, each distributed one with its halo exchange.
            DistPrecond::Amg(p) => {
                let products = 2.0 * (p.amg.sweeps * p.amg.degree) as f64 + 3.0;
                (1.4 * products, 1.4 * products, 0.0, 1.4 * 4.0 * products)
            }
        }
    }
}

/// Sets up the preconditioner `which` on one rank (collective: the distributed polynomial's
/// estimate all-reduces). `a` is the distributed operator, `owned` this rank's diagonal block
/// on the host (its diagonal is the owned rows' diagonal), `first_row` the global index of its
/// first row.
///
/// # Errors
/// The local preconditioner's errors (a zero diagonal entry, a bad pivot, an AMG setup
/// failure), each naming the local row, and backend failures.
///
/// Collective and safe against failures on some ranks only: each rank's local part is followed
/// by [`LocalOps::count_failed`], so when one rank's setup fails every rank returns an error (the
/// failing rank its own, the others one naming how many ranks failed) and none waits forever.
pub fn setup_precond<'a, T, D, A>(
    be: &D,
    a: &'a A,
    owned: &CsrMatrix<T>,
    first_row: u64,
    which: &DistPrecond,
) -> Result<Box<dyn Preconditioner<T, D> + 'a>>
where
    T: Scalar,
    D: LocalOps<T> + 'a,
    D::Vector: 'a,
    D::Local: 'a,
    A: DistOperator<T, D> + ?Sized,
{
    let local = be.local();
    // Every setup that may fail on one rank is followed by `agree`.
    Ok(match which {
        DistPrecond::None => Box::new(Identity),
        DistPrecond::Jacobi | DistPrecond::BlockJacobi(LocalPrecond::Jacobi) => {
            Box::new(agree(be, Jacobi::from_matrix(be, owned))?)
        }
        DistPrecond::Amg(p) => {
            let part = agree(
                be,
                a.host_part().ok_or_else(|| {
                    Error::InvalidInput(
                        "the distributed AMG needs the operator's part on the host \
                         (DistOperator::host_part)"
                            .into(),
                    )
                }),
            )?;
            Box::new(DistAmg::new(be, a, part, None, p)?)
        }
        DistPrecond::Chebyshev(p) => {
            // The inverse diagonal is local (and may fail on one rank); the estimate is
            // collective and, working on all-reduced values, fails on every rank or on none.
            let inv = agree(
                be,
                if p.jacobi {
                    Jacobi::from_matrix(be, owned).map(|j| Some(j.into_inverse_diagonal()))
                } else {
                    Ok(None)
                },
            )?;
            Box::new(Chebyshev::from_operator(be, a, inv, first_row, p)?)
        }
        DistPrecond::BlockJacobi(LocalPrecond::Chebyshev(p)) => Box::new(BlockJacobi::new(agree(
            be,
            Chebyshev::from_matrix(local, a.owned_block(), owned, p),
        )?)),
        DistPrecond::BlockJacobi(LocalPrecond::Ilu0(p)) => {
            Box::new(BlockJacobi::new(agree(be, Ilu0::new(local, owned, p))?))
        }
        DistPrecond::BlockJacobi(LocalPrecond::Ic0(p)) => {
            Box::new(BlockJacobi::new(agree(be, Ic0::new(local, owned, p))?))
        }
        DistPrecond::BlockJacobi(LocalPrecond::Amg(p)) => {
            Box::new(BlockJacobi::new(agree(be, Amg::new(local, owned, p))?))
        }
    })
}
