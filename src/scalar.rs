//! The floating-point element type of matrices and vectors.
//!
//! [`Scalar`] is implemented for `f32` and `f64` only. It carries what the crate needs from
//! `num-traits` plus the name that selects a kernel's type-suffixed entry point on the GPU
//! (`segscan_bwd_incl_f64`, ...), so host code never spells a kernel name by hand.

use std::fmt::{Debug, Display};
use std::iter::Sum;

use num_traits::{Float, FromPrimitive, NumAssign};

/// Types that may be stored on the GPU (a cudarc `DeviceRepr`) when the `cuda` feature is on.
#[cfg(feature = "cuda")]
pub trait DeviceElem: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {}
#[cfg(feature = "cuda")]
impl<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits> DeviceElem for T {}

/// Types that may be stored on the GPU (nothing extra without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub trait DeviceElem {}
#[cfg(not(feature = "cuda"))]
impl<T> DeviceElem for T {}

/// A real floating-point scalar: `f32` or `f64`.
pub trait Scalar:
    Float
    + NumAssign
    + FromPrimitive
    + Sum
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + DeviceElem
    + std::str::FromStr
    + 'static
{
    /// Kernel-name suffix and display name: `"f32"` or `"f64"`.
    const NAME: &'static str;
    /// Size in bytes, for bandwidth accounting.
    const BYTES: usize;
    /// Machine epsilon as f64.
    const EPS: f64;
    /// Lossy conversion from f64 (rounding for f32).
    fn of_f64(v: f64) -> Self;
    /// Exact widening to f64.
    fn as_f64(self) -> f64;
}

impl Scalar for f32 {
    const NAME: &'static str = "f32";
    const BYTES: usize = 4;
    const EPS: f64 = f32::EPSILON as f64;
    #[inline]
    fn of_f64(v: f64) -> Self {
        v as f32
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl Scalar for f64 {
    const NAME: &'static str = "f64";
    const BYTES: usize = 8;
    const EPS: f64 = f64::EPSILON;
    #[inline]
    fn of_f64(v: f64) -> Self {
        v
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self
    }
}

/// The precision of a run, for command-line front ends and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Single precision.
    F32,
    /// Double precision.
    F64,
}

impl Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        })
    }
}
