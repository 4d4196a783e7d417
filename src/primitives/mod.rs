//! Scan, segmented scan and the primitives built on them, on the CPU and the GPU.

// ---- TEMPORARY stand-ins until branch `scan` lands (removed at the merge) ----
/// Scan direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Left to right.
    Forward,
    /// Right to left.
    Backward,
}
/// Operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOp {
    /// Sum.
    Plus,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}
/// Element types.
pub trait ScanElem: Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    /// Identity.
    fn identity(op: ScanOp) -> Self;
    /// Combine.
    fn combine(op: ScanOp, a: Self, b: Self) -> Self;
}
macro_rules! se {
    ($t:ty, $z:expr, $lo:expr, $hi:expr) => {
        impl ScanElem for $t {
            fn identity(op: ScanOp) -> Self {
                match op {
                    ScanOp::Plus => $z,
                    ScanOp::Max => $lo,
                    ScanOp::Min => $hi,
                }
            }
            fn combine(op: ScanOp, a: Self, b: Self) -> Self {
                match op {
                    ScanOp::Plus => a + b,
                    ScanOp::Max => if a > b { a } else { b },
                    ScanOp::Min => if a < b { a } else { b },
                }
            }
        }
    };
}
se!(f32, 0.0, f32::NEG_INFINITY, f32::INFINITY);
se!(f64, 0.0, f64::NEG_INFINITY, f64::INFINITY);
se!(i32, 0, i32::MIN, i32::MAX);
se!(u32, 0, 0, u32::MAX);
// ---- end of temporary stand-ins ----

// ---- issue 7 (helper "prims"): the primitives built on scan ----
pub mod compact;
pub mod distribute;
pub mod enumerate;
pub mod segreduce;
pub mod sort;
pub mod split;
mod glue;
pub use glue::{pack_flags, unpack_flags};
