//! The Chebyshev polynomial's step ([`ChebyshevSteps`]), shared by the Chebyshev preconditioner
//! and the AMG smoother.

use crate::backend::VectorOps;
use crate::scalar::Elem;

/// The recurrence of a Chebyshev polynomial on a backend, with a default body from the core of
/// [`VectorOps`].
pub trait ChebyshevSteps<T: Elem>: VectorOps<T> {
    /// One step of the Chebyshev recurrence of the Chebyshev preconditioner (`precond::Chebyshev`), with host
    /// scalars `c1`, `c2` and `t = A·d` (or `t = r` when `first`), `D⁻¹` when given:
    ///
    /// - `first`: `res ← D⁻¹t; d ← c2·res; z ← d`
    /// - otherwise: `res ← res − D⁻¹t; d ← c1·d + c2·res; z ← z + d`
    ///
    /// Runs regardless of the status (a preconditioner has no status).
    #[allow(clippy::too_many_arguments)]
    fn poly_step(
        &self,
        t: &Self::Vector,
        inv_diag: Option<&Self::Vector>,
        res: &mut Self::Vector,
        d: &mut Self::Vector,
        z: &mut Self::Vector,
        first: bool,
        c1: T,
        c2: T,
    ) -> crate::Result<()> {
        if first {
            match inv_diag {
                Some(dv) => self.vmul(T::one(), dv, t, T::zero(), res)?,
                None => self.copy(t, res)?,
            }
            self.axpby(c2, res, T::zero(), d)?;
            self.copy(d, z)
        } else {
            match inv_diag {
                Some(dv) => self.vmul(-T::one(), dv, t, T::one(), res)?,
                None => self.axpby(-T::one(), t, T::one(), res)?,
            }
            self.axpby(c2, res, c1, d)?;
            self.axpby(T::one(), d, T::one(), z)
        }
    }
}
