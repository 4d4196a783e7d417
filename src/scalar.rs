//! The element types of matrices and vectors.
//!
//! Two traits, in the shape of a field and its real numbers:
//!
//! - [`Elem`]: any element type, real or complex: `f32`, `f64`, `Complex<f32>` and `Complex<f64>`
//!   (re-exported here as [`Complex`], from `num-complex`). It carries the arithmetic (`+ − · ÷`, zero, one), the conjugate,
//!   the modulus and squared modulus in the real type [`Elem::Real`], and the name that selects
//!   a kernel's type-suffixed entry point on the GPU (`segscan_bwd_incl_f64`, `spmv_..._c128`), so
//!   host code never spells a kernel name by hand.
//! - [`Scalar`]: a real element type, `f32` or `f64` (`num_traits::Float`, ordered, with a
//!   square root). Every `Scalar` is an `Elem` whose `Real` is itself.
//!
//! Code that is valid for complex numbers (building and checking a [`CsrMatrix`](crate::CsrMatrix),
//! Matrix Market, the CPU product `A·x`) is generic over [`Elem`]; code that needs an order or
//! a square root of the elements themselves is generic over [`Scalar`].
//!
//! # Complex numbers in memory
//!
//! `num_complex::Complex<R>` is `#[repr(C)]` with the real part first: a complex vector is
//! interleaved `re, im, re, im, ...`, the layout of C99 `_Complex`, CuPy's `complex64` /
//! `complex128` and cuSPARSE's `CUDA_C_32F` / `CUDA_C_64F`. On the GPU the same bytes are held
//! as [`Elem::Dev`] ([`DevComplex`] for a complex type: cudarc's device traits cannot be
//! implemented for a foreign type), and [`Elem::as_dev`] reinterprets a host slice without a
//! copy.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::Neg;

pub use num_complex::Complex;
use num_traits::{Float, FromPrimitive, Num, NumAssign};

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

/// An element type of matrices and vectors, real or complex: `f32`, `f64`, `Complex<f32>`, `Complex<f64>`.
///
/// The method names avoid those of `num_traits::Float` (a [`Scalar`] is both), so that generic
/// code over a `Scalar` never meets two methods of one name.
pub trait Elem:
    Num
    + NumAssign
    + Neg<Output = Self>
    + Copy
    + Sum
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + 'static
{
    /// The real type of the modulus, the norms and the tolerances: `f32` for `f32` and `Complex<f32>`,
    /// `f64` for `f64` and `Complex<f64>`.
    type Real: Scalar;
    /// How the element is held on the GPU: the type itself when it is real, [`DevComplex`]
    /// (same size, alignment and bytes) when it is complex.
    type Dev: DeviceElem + Copy + Send + Sync + 'static;
    /// Kernel-name suffix and display name: `"f32"`, `"f64"`, `"c64"` (two f32) or `"c128"`
    /// (two f64): NumPy's names.
    const NAME: &'static str;
    /// Size in bytes, for bandwidth accounting.
    const BYTES: usize;
    /// True for the complex types.
    const IS_COMPLEX: bool;
    /// The element with real part `re` and imaginary part zero.
    fn from_real(re: Self::Real) -> Self;
    /// The element `re + i·im`, or `None` for a real type when `im` is not zero.
    fn from_parts(re: Self::Real, im: Self::Real) -> Option<Self>;
    /// The real part.
    fn re(self) -> Self::Real;
    /// The imaginary part (zero for a real type).
    fn im(self) -> Self::Real;
    /// The complex conjugate (the value itself for a real type).
    fn conj(self) -> Self;
    /// The modulus `|z|` (the absolute value for a real type).
    fn modulus(self) -> Self::Real;
    /// The squared modulus `|z|² = re² + im²`.
    fn norm_sqr(self) -> Self::Real;
    /// True when no part is NaN or infinite.
    fn finite(self) -> bool;
    /// The value as `Complex<f64>` (exact widening), for references and reports.
    fn widen(self) -> Complex<f64>;
    /// The value nearest `z` (rounding for single precision; a real type drops the imaginary
    /// part).
    fn narrow(z: Complex<f64>) -> Self;
    /// A host slice seen as the device representation (the same bytes; no copy).
    fn as_dev(s: &[Self]) -> &[Self::Dev];
    /// A device-representation slice seen as elements (the same bytes; no copy).
    fn from_dev(s: &[Self::Dev]) -> &[Self];
    /// [`Elem::as_dev`] of a mutable slice (a download target).
    fn as_dev_mut(s: &mut [Self]) -> &mut [Self::Dev];
    /// The slice as an [`ElemSlice`], for code that is not generic over the element type.
    fn as_elem_slice(s: &[Self]) -> ElemSlice<'_>;
    /// The slice of this type inside `s`, or `None` when `s` holds another element type.
    fn from_elem_slice(s: ElemSlice<'_>) -> Option<&[Self]>;
}

/// A borrowed slice of any element type, tagged with its type: how code that is not generic
/// over the element type (an observer of a solve, a language binding) receives a vector.
/// [`ElemSlice::get`] takes the slice back out as a given type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ElemSlice<'a> {
    /// `f32` elements.
    F32(&'a [f32]),
    /// `f64` elements.
    F64(&'a [f64]),
    /// `Complex<f32>` elements (NumPy's `complex64`).
    C64(&'a [Complex<f32>]),
    /// `Complex<f64>` elements (NumPy's `complex128`).
    C128(&'a [Complex<f64>]),
}

impl<'a> ElemSlice<'a> {
    /// The slice as `&[T]`, or `None` when it holds another element type.
    pub fn get<T: Elem>(self) -> Option<&'a [T]> {
        T::from_elem_slice(self)
    }

    /// The number of elements.
    pub fn len(self) -> usize {
        match self {
            ElemSlice::F32(s) => s.len(),
            ElemSlice::F64(s) => s.len(),
            ElemSlice::C64(s) => s.len(),
            ElemSlice::C128(s) => s.len(),
        }
    }

    /// True when the slice has no elements.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The name of the element type ([`Elem::NAME`]).
    pub fn elem_name(self) -> &'static str {
        match self {
            ElemSlice::F32(_) => f32::NAME,
            ElemSlice::F64(_) => f64::NAME,
            ElemSlice::C64(_) => Complex::<f32>::NAME,
            ElemSlice::C128(_) => Complex::<f64>::NAME,
        }
    }
}

/// A complex number as held on the GPU: the same bytes as `Complex<R>` (`#[repr(transparent)]`),
/// with cudarc's device traits, which the crate cannot implement for `Complex` itself.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(transparent)]
pub struct DevComplex<R>(pub Complex<R>);

// SAFETY: `DevComplex<R>` is `#[repr(transparent)]` over `Complex<R>`, which is `#[repr(C)]`
// `{ re: R, im: R }`: two plain floats without padding, valid for any bits (all-zero bits are
// 0 + 0i), passed to a kernel by value like a `float2` / `double2` of the same alignment as
// `R` (the kernels declare it as a struct of two `R`).
#[cfg(feature = "cuda")]
unsafe impl cudarc::driver::DeviceRepr for DevComplex<f32> {}
#[cfg(feature = "cuda")]
unsafe impl cudarc::driver::DeviceRepr for DevComplex<f64> {}
#[cfg(feature = "cuda")]
unsafe impl cudarc::driver::ValidAsZeroBits for DevComplex<f32> {}
#[cfg(feature = "cuda")]
unsafe impl cudarc::driver::ValidAsZeroBits for DevComplex<f64> {}

/// `Elem::as_elem_slice` and `Elem::from_elem_slice` of the type that `ElemSlice::$variant`
/// holds.
macro_rules! elem_slice_fns {
    ($variant:ident) => {
        #[inline]
        fn as_elem_slice(s: &[Self]) -> ElemSlice<'_> {
            ElemSlice::$variant(s)
        }
        #[inline]
        fn from_elem_slice(s: ElemSlice<'_>) -> Option<&[Self]> {
            match s {
                ElemSlice::$variant(s) => Some(s),
                _ => None,
            }
        }
    };
}

macro_rules! real_elem {
    ($t:ty, $name:literal, $variant:ident) => {
        impl Elem for $t {
            type Real = $t;
            type Dev = $t;
            const NAME: &'static str = $name;
            const BYTES: usize = std::mem::size_of::<$t>();
            const IS_COMPLEX: bool = false;
            #[inline]
            fn from_real(re: $t) -> Self {
                re
            }
            #[inline]
            fn from_parts(re: $t, im: $t) -> Option<Self> {
                (im == 0.0).then_some(re)
            }
            #[inline]
            fn re(self) -> $t {
                self
            }
            #[inline]
            fn im(self) -> $t {
                0.0
            }
            #[inline]
            fn conj(self) -> Self {
                self
            }
            #[inline]
            fn modulus(self) -> $t {
                self.abs()
            }
            #[inline]
            fn norm_sqr(self) -> $t {
                self * self
            }
            #[inline]
            fn finite(self) -> bool {
                self.is_finite()
            }
            #[inline]
            fn widen(self) -> Complex<f64> {
                Complex::new(self as f64, 0.0)
            }
            #[inline]
            fn narrow(z: Complex<f64>) -> Self {
                z.re as $t
            }
            #[inline]
            fn as_dev(s: &[Self]) -> &[Self] {
                s
            }
            #[inline]
            fn from_dev(s: &[Self]) -> &[Self] {
                s
            }
            #[inline]
            fn as_dev_mut(s: &mut [Self]) -> &mut [Self] {
                s
            }
            elem_slice_fns!($variant);
        }
    };
}
real_elem!(f32, "f32", F32);
real_elem!(f64, "f64", F64);

macro_rules! complex_elem {
    ($r:ty, $name:literal, $variant:ident) => {
        impl Elem for Complex<$r> {
            type Real = $r;
            type Dev = DevComplex<$r>;
            const NAME: &'static str = $name;
            const BYTES: usize = std::mem::size_of::<Complex<$r>>();
            const IS_COMPLEX: bool = true;
            #[inline]
            fn from_real(re: $r) -> Self {
                Complex::new(re, 0.0)
            }
            #[inline]
            fn from_parts(re: $r, im: $r) -> Option<Self> {
                Some(Complex::new(re, im))
            }
            #[inline]
            fn re(self) -> $r {
                self.re
            }
            #[inline]
            fn im(self) -> $r {
                self.im
            }
            #[inline]
            fn conj(self) -> Self {
                Complex::conj(&self)
            }
            #[inline]
            fn modulus(self) -> $r {
                self.norm()
            }
            #[inline]
            fn norm_sqr(self) -> $r {
                Complex::norm_sqr(&self)
            }
            #[inline]
            fn finite(self) -> bool {
                self.re.is_finite() && self.im.is_finite()
            }
            #[inline]
            fn widen(self) -> Complex<f64> {
                Complex::new(self.re as f64, self.im as f64)
            }
            #[inline]
            fn narrow(z: Complex<f64>) -> Self {
                Complex::new(z.re as $r, z.im as $r)
            }
            #[inline]
            fn as_dev(s: &[Self]) -> &[DevComplex<$r>] {
                // SAFETY: `DevComplex<R>` is `#[repr(transparent)]` over `Complex<R>`: the same
                // size and alignment, so the cast keeps length, bounds and lifetime.
                unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
            }
            #[inline]
            fn from_dev(s: &[DevComplex<$r>]) -> &[Self] {
                // SAFETY: as in `as_dev`, the other way round.
                unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
            }
            #[inline]
            fn as_dev_mut(s: &mut [Self]) -> &mut [DevComplex<$r>] {
                // SAFETY: as in `as_dev`; the borrow is exclusive for the result's lifetime.
                unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
            }
            elem_slice_fns!($variant);
        }
    };
}
complex_elem!(f32, "c64", C64);
complex_elem!(f64, "c128", C128);

/// A real floating-point scalar: `f32` or `f64`.
pub trait Scalar:
    Elem<Real = Self, Dev = Self> + Float + FromPrimitive + DeviceElem + std::str::FromStr
{
    /// Machine epsilon as f64.
    const EPS: f64;
    /// Lossy conversion from f64 (rounding for f32).
    fn of_f64(v: f64) -> Self;
    /// Exact widening to f64.
    fn as_f64(self) -> f64;
}

impl Scalar for f32 {
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

/// Where a matrix's values are stored, apart from the precision of the vectors and of the
/// arithmetic (the *working* precision).
///
/// `F32` under `f64` work keeps the values in `f32` (half the bytes of an `f64` value, a quarter
/// fewer per CSR entry with its column index), widens each one exactly to `f64` before its
/// product, and sums in `f64`: the product of the rounded values, computed in `f64`. A solve
/// that must return an `f64`-accurate answer then takes its true residuals `b − A·x` with the
/// `f64` values (`spmv::mixed`, `solvers::storage`). `F64` (the default) is the working
/// precision itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Storage {
    /// The values in the working precision (`f64`).
    #[default]
    F64,
    /// The values in `f32` under `f64` vectors and `f64` sums.
    F32,
}

impl Storage {
    /// Bytes of one stored value.
    pub fn value_bytes(self) -> usize {
        match self {
            Storage::F64 => 8,
            Storage::F32 => 4,
        }
    }
    /// `"f64"` or `"f32"`.
    pub fn name(self) -> &'static str {
        match self {
            Storage::F64 => "f64",
            Storage::F32 => "f32",
        }
    }
}

impl Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Storage {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f64" | "float64" | "double" => Ok(Storage::F64),
            "f32" | "float32" | "single" => Ok(Storage::F32),
            other => Err(crate::Error::InvalidInput(format!(
                "storage {other:?}: expected f64 or f32"
            ))),
        }
    }
}
