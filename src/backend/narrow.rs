//! A backend of `f64` work beside a backend of `f32` work on the same device: what a
//! preconditioner stored and run in `f32` under an `f64` solver needs
//! ([`precond::Narrowed`](crate::precond::Narrowed)).

use super::{Cpu, VectorOps};
use crate::error::Result;

/// The `f32` vectors of a [`NarrowOps`] backend's `f32` counterpart.
pub type LowVector<B> = <<B as NarrowOps>::Low as VectorOps<f32>>::Vector;

/// A backend of `f64` work with a backend of `f32` work on the same device (and, on the GPU, the
/// same stream, so nothing between the two waits for the host), and the conversions between
/// their vectors.
pub trait NarrowOps: VectorOps<f64> {
    /// The backend of `f32` work.
    type Low: VectorOps<f32>;
    /// A backend of `f32` work on the same device and queue (on the GPU: its kernels loaded).
    ///
    /// # Errors
    /// Backend errors (a failed compile).
    fn low(&self) -> Result<Self::Low>;
    /// `y ← fl32(x)`, each value rounded to the nearest `f32`. Must not synchronise with the
    /// host.
    ///
    /// # Panics
    /// When the lengths differ (both in the message).
    ///
    /// # Errors
    /// A failed launch.
    fn narrow(&self, x: &Self::Vector, y: &mut LowVector<Self>) -> Result<()>;
    /// `y ← x`, each `f32` widened exactly. Must not synchronise with the host.
    ///
    /// # Panics
    /// When the lengths differ (both in the message).
    ///
    /// # Errors
    /// A failed launch.
    fn widen(&self, x: &LowVector<Self>, y: &mut Self::Vector) -> Result<()>;
}

/// The CPU is its own `f32` backend.
impl NarrowOps for Cpu {
    type Low = Cpu;
    fn low(&self) -> Result<Cpu> {
        Ok(Cpu)
    }
    fn narrow(&self, x: &Vec<f64>, y: &mut Vec<f32>) -> Result<()> {
        convert("narrow", x, y, |x| x as f32)
    }
    fn widen(&self, x: &Vec<f32>, y: &mut Vec<f64>) -> Result<()> {
        convert("widen", x, y, |x| x as f64)
    }
}

/// `y[i] ← f(x[i])` over threads (the CPU's narrow and widen).
fn convert<X: Copy + Sync, Y: Send>(
    what: &str,
    x: &[X],
    y: &mut [Y],
    f: impl Fn(X) -> Y + Sync,
) -> Result<()> {
    use rayon::prelude::*;
    super::same_len(what, x.len(), y.len());
    y.par_iter_mut()
        .zip(x.par_iter())
        .with_min_len(4096)
        .for_each(|(y, &x)| *y = f(x));
    Ok(())
}
