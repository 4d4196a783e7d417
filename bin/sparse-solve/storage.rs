//! `--storage f32`: the operator whose values are stored in f32, seen as an operator of the
//! run's element type (`run_typed` is generic over it and builds one for `--precision f64`
//! alone).

use std::any::{Any, TypeId};
use std::marker::PhantomData;

use segsparse::backend::{LinearOperator, Preconditioner, VectorOps};
use segsparse::Elem;

/// An operator (or a preconditioner: the AMG hierarchy stored in f32 under f64 work) of `f64`
/// vectors on the backend `B64`, used where one of `T` on `B` is wanted; built only when `T`
/// is `f64` and `B` is `B64` ([`AsWorking::new`]), so the views below always succeed.
pub struct AsWorking<O, B64> {
    op: O,
    _b: PhantomData<fn() -> B64>,
}

impl<O, B64: 'static> AsWorking<O, B64> {
    /// `op` as an operator of `T` on `B`, or `None` unless `T` is `f64` and `B` is `B64`.
    pub fn new<T: 'static, B: 'static>(op: O) -> Option<Self> {
        (TypeId::of::<T>() == TypeId::of::<f64>() && TypeId::of::<B>() == TypeId::of::<B64>())
            .then_some(AsWorking {
                op,
                _b: PhantomData,
            })
    }

    /// The wrapped operator or preconditioner.
    pub fn inner(&self) -> &O {
        &self.op
    }
}

/// `v` as the `f64` backend's type (the same type, checked at construction).
fn view<U: 'static>(v: &dyn Any) -> &U {
    v.downcast_ref::<U>()
        .expect("AsWorking is built only for an f64 run on its own backend")
}

fn view_mut<U: 'static>(v: &mut dyn Any) -> &mut U {
    v.downcast_mut::<U>()
        .expect("AsWorking is built only for an f64 run on its own backend")
}

impl<T, B, O, B64> LinearOperator<T, B> for AsWorking<O, B64>
where
    T: Elem,
    B: VectorOps<T> + 'static,
    B::Vector: 'static,
    B64: VectorOps<f64> + 'static,
    B64::Vector: 'static,
    O: LinearOperator<f64, B64>,
{
    fn nrows(&self) -> usize {
        self.op.nrows()
    }
    fn ncols(&self) -> usize {
        self.op.ncols()
    }
    fn apply(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> segsparse::Result<()> {
        self.op.apply(
            view::<B64>(be),
            view::<B64::Vector>(x),
            view_mut::<B64::Vector>(y),
        )
    }
    fn apply_exact(&self, be: &B, x: &B::Vector, y: &mut B::Vector) -> segsparse::Result<()> {
        self.op.apply_exact(
            view::<B64>(be),
            view::<B64::Vector>(x),
            view_mut::<B64::Vector>(y),
        )
    }
    fn is_narrowed(&self) -> bool {
        self.op.is_narrowed()
    }
    fn prepare(&self, be: &B, expected_applies: usize) -> segsparse::Result<()> {
        self.op.prepare(view::<B64>(be), expected_applies)
    }
}

impl<T, B, P, B64> Preconditioner<T, B> for AsWorking<P, B64>
where
    T: Elem,
    B: VectorOps<T> + 'static,
    B::Vector: 'static,
    B64: VectorOps<f64> + 'static,
    B64::Vector: 'static,
    P: Preconditioner<f64, B64>,
{
    fn apply(&self, be: &B, r: &B::Vector, z: &mut B::Vector) -> segsparse::Result<()> {
        self.op.apply(
            view::<B64>(be),
            view::<B64::Vector>(r),
            view_mut::<B64::Vector>(z),
        )
    }
    fn cost_in_products(&self) -> f64 {
        self.op.cost_in_products()
    }
}
