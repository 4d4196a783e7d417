//! The multi-vector steps of GMRES (and of the Arnoldi/Lanczos eigenvalue estimate of the
//! Chebyshev preconditioner), on top of [`VectorOps`].
//!
//! A backend names its Krylov workspace and allocates it; everything else has a default built
//! from the core of [`VectorOps`] on a workspace held as host arrays ([`HostKrylov`]): a new
//! backend writes
//!
//! ```ignore
//! impl KrylovOps<f64> for MyBackend {
//!     type Krylov = HostKrylov<Self::Vector, f64>;
//!     fn krylov(&self, n: usize, m: usize) -> segsparse::Result<Self::Krylov> {
//!         HostKrylov::new(self, n, m)
//!     }
//! }
//! ```
//!
//! A backend whose workspace lives elsewhere (the GPU: small arrays on the device) answers
//! `None` to [`KrylovSpace::host`] and overrides every step.

use super::recur::{self, GmresLayout};
use super::VectorOps;
use crate::error::{Error, Result};
use crate::scalar::{Elem, Storage};

/// GMRES's Krylov workspace as host arrays: `m + 1` basis vectors of the backend and the small
/// dense arrays of [`GmresLayout`] on the host.
#[derive(Clone, Debug)]
pub struct HostKrylov<V, T> {
    pub(crate) v: Vec<V>,
    pub(crate) small: Vec<T>,
    pub(crate) lay: GmresLayout,
    /// Every basis vector is rounded to `f32` when it is written (held in `T`: the numbers an
    /// `f32` basis holds; the CPU backend's [`KrylovOps::krylov_stored`]).
    pub(crate) round: bool,
}

/// The basis `v` of restart length `m` split at column `j`: `(v_0 ..= v_j, v_{j+1})`, the
/// vectors an Arnoldi step orthogonalises against and the one it writes.
///
/// # Panics
/// When `j ≥ m`.
pub(crate) fn split_basis<V>(v: &mut [V], m: usize, j: usize) -> (&[V], &mut V) {
    assert!(j < m, "Krylov column {j} of a restart length {m}");
    let (basis, rest) = v.split_at_mut(j + 1);
    (basis, &mut rest[0])
}

impl<V, T: Elem> HostKrylov<V, T> {
    /// The workspace for vectors of length `n` and restart length `m ≥ 1` on `be`.
    ///
    /// # Panics
    /// When `m == 0`.
    pub fn new<B: VectorOps<T, Vector = V> + ?Sized>(be: &B, n: usize, m: usize) -> Result<Self> {
        assert!(m >= 1, "GMRES restart length must be at least 1");
        let lay = GmresLayout { m };
        Ok(HostKrylov {
            v: (0..=m).map(|_| be.zeros(n)).collect::<Result<_>>()?,
            small: vec![T::zero(); lay.len()],
            lay,
            round: false,
        })
    }

    /// The basis vectors `v_0 … v_m` (of the current cycle, as far as it went).
    pub fn basis(&self) -> &[V] {
        &self.v
    }
}

/// What the default steps need to see of a Krylov workspace: the capability query "is it held
/// as host arrays".
pub trait KrylovSpace<V, T> {
    /// The workspace as host arrays, or `None` (the backend then overrides every step).
    fn host(&self) -> Option<&HostKrylov<V, T>>;
    /// [`KrylovSpace::host`], mutably.
    fn host_mut(&mut self) -> Option<&mut HostKrylov<V, T>>;
}

impl<V, T> KrylovSpace<V, T> for HostKrylov<V, T> {
    fn host(&self) -> Option<&HostKrylov<V, T>> {
        Some(self)
    }
    fn host_mut(&mut self) -> Option<&mut HostKrylov<V, T>> {
        Some(self)
    }
}

const NOT_HOST: &str = "a Krylov workspace that is not held on the host needs the backend's own \
                        KrylovOps steps";

/// The multi-vector steps of GMRES: a backend offers them on top of [`VectorOps`] by naming its
/// workspace ([`HostKrylov`] for the defaults).
pub trait KrylovOps<T: Elem>: VectorOps<T> {
    /// GMRES's Krylov workspace: `m + 1` basis vectors of length `n` and the small dense arrays of
    /// [`recur::GmresLayout`], plus whatever a backend's fused steps need.
    type Krylov: KrylovSpace<Self::Vector, T>;
    /// Allocates the Krylov workspace for vectors of length `n` and restart length `m ≥ 1`.
    fn krylov(&self, n: usize, m: usize) -> Result<Self::Krylov>;
    /// [`KrylovOps::krylov`] with the basis stored in `basis`. [`Storage::F32`] under `f64` work
    /// rounds every basis vector to `f32` once, when it is written (the GPU stores it in `f32`:
    /// half the bytes of every Gram–Schmidt pass and of the correction; the CPU keeps the
    /// rounded numbers in `f64`); the dot products, updates and sums stay in `f64`, each stored
    /// value widened exactly, and the operator is applied to the stored vector.
    ///
    /// **Orthogonality.** A new vector `v` is orthogonalised in `f64` (CGS2) against the stored
    /// ones and normalised, then rounded: `v̂ = v + δ` with `|δᵢ| ≤ u·|vᵢ|`, `u = 2⁻²⁴`, so
    /// `‖δ‖ ≤ u` and every entry of `V̂ᵀV̂ − I` is at most `2u + u²` (plus the `f64` rounding of
    /// CGS2, `O(ε₆₄)`) in magnitude. The Arnoldi relation then holds to `u·h_{j+1,j}` per
    /// column, so the least-squares estimate can differ from the true residual by about `u`
    /// relative to the cycle's start: the solvers confirm convergence on the true residual and
    /// restart where needed (see `solvers::gmres`).
    ///
    /// The default keeps the working precision for [`Storage::F64`] and refuses `F32`.
    ///
    /// # Errors
    /// As [`KrylovOps::krylov`]; [`Error::InvalidInput`] for a storage the backend does not
    /// keep.
    fn krylov_stored(&self, n: usize, m: usize, basis: Storage) -> Result<Self::Krylov> {
        match basis {
            Storage::F64 => self.krylov(n, m),
            Storage::F32 => Err(Error::InvalidInput(format!(
                "the {} backend keeps the Krylov basis in the working precision only",
                self.name()
            ))),
        }
    }

    /// The basis vectors `v_j` and `v_{j+1}` (`j < m`): the operator reads the first and writes
    /// the second before [`KrylovOps::gmres_arnoldi`].
    fn krylov_pair<'k>(
        &self,
        k: &'k mut Self::Krylov,
        j: usize,
    ) -> (&'k Self::Vector, &'k mut Self::Vector) {
        let k = k.host_mut().expect(NOT_HOST);
        let (basis, w) = split_basis(&mut k.v, k.lay.m, j);
        (&basis[j], w)
    }
    /// The small arrays ([`recur::GmresLayout`]) on the host (synchronises; setup only, e.g. for
    /// eigenvalue estimates from the Hessenberg matrix).
    fn krylov_small(&self, k: &Self::Krylov) -> Result<Vec<T>> {
        Ok(k.host().expect(NOT_HOST).small.clone())
    }
    /// GMRES start of a cycle at `iteration`: ‖r‖², then [`recur::gmres_start`], and
    /// `v₀ = r/‖r‖`.
    fn gmres_start(
        &self,
        r: &Self::Vector,
        k: &mut Self::Krylov,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> Result<()> {
        let k = k.host_mut().expect(NOT_HOST);
        let rr = self.dot(r, r, sc)?;
        let lay = k.lay;
        self.update_slots(sc, |s, h| {
            recur::gmres_start(s, &mut k.small, lay, h, rr, iteration)
        })?;
        if recur::stopped(&self.read_slots(sc)?) {
            return Ok(());
        }
        self.axpby(k.small[lay.scale()], r, T::zero(), &mut k.v[0])
    }
    /// GMRES Arnoldi step for column `j`: orthogonalises `w = v_{j+1}` against `v_0 … v_j` by
    /// classical Gram–Schmidt applied twice (CGS2: each pass is a block of `j + 1` dot
    /// products, then `w ← w − V·c`, one basis vector after the other), takes ‖w‖², runs
    /// [`recur::gmres_column`] (Givens rotations and the tests) and normalises `v_{j+1}`.
    fn gmres_arnoldi(
        &self,
        k: &mut Self::Krylov,
        j: usize,
        sc: &mut Self::Scalars,
        iteration: usize,
    ) -> Result<()> {
        if recur::stopped(&self.read_slots(sc)?) {
            return Ok(());
        }
        let k = k.host_mut().expect(NOT_HOST);
        let lay = k.lay;
        let (basis, w) = split_basis(&mut k.v, lay.m, j);
        for pass in [lay.c1(), lay.c2()] {
            for (i, v) in basis.iter().enumerate() {
                k.small[pass + i] = self.dot(v, w, sc)?;
            }
            for (i, v) in basis.iter().enumerate() {
                self.axpby(-k.small[pass + i], v, T::one(), w)?;
            }
        }
        let ww = self.dot(w, w, sc)?;
        self.update_slots(sc, |s, h| {
            recur::gmres_column(s, &mut k.small, lay, h, j, ww, iteration)
        })?;
        if recur::stopped(&self.read_slots(sc)?) {
            return Ok(());
        }
        self.scal(k.small[lay.scale()], w)
    }
    /// GMRES: solves the leading `ncols × ncols` block of `R·y = g` ([`recur::gmres_solve_y`])
    /// and writes `u ← V·y` (the correction before preconditioning). Runs regardless of the
    /// status.
    fn gmres_combine(
        &self,
        k: &mut Self::Krylov,
        ncols: usize,
        u: &mut Self::Vector,
    ) -> Result<()> {
        let k = k.host_mut().expect(NOT_HOST);
        let lay = k.lay;
        assert!(
            ncols <= lay.m,
            "{ncols} GMRES columns of a restart length {}",
            lay.m
        );
        recur::gmres_solve_y(&mut k.small, lay, ncols);
        self.fill(u, T::zero())?;
        for (i, v) in k.v[..ncols].iter().enumerate() {
            self.axpby(k.small[lay.y() + i], v, T::one(), u)?;
        }
        Ok(())
    }
}
