//! The automatic solve's storage: where an `f64` solve stores the matrix's values, or its AMG
//! hierarchy, in `f32` ([`Storage`]) because fewer bytes per iteration pay, and where it keeps
//! `f64`.
//!
//! [`choose_storage`] decides from the values' `f32` fit ([`F32Fit`]), the matrix's size and the
//! caller's [`StorageParams`], once per solve, for two parts apart:
//!
//! | part | `f32` where | measured (H200, `benches/results/mixed.md`) |
//! |---|---|---|
//! | the Krylov operator of a CG candidate (none, Jacobi or AMG) | every value is an `f32` exactly (`fl32(A) = A`: the same matrix, a third fewer bytes per entry, no exact copy, nothing to fall back from) and the matrix has at least [`StorageParams::min_entries`] entries | CG on Poisson 200³ and 240³: 0.86× the `f64` time, the same iterations. Where the values round (Poisson/3), CG restarts from the true residual of the rounding after each reliable update: 1.21× the time, 39 % more iterations, so rounded values keep `f64` |
//! | the AMG hierarchy of a CG + AMG candidate | every value is within `f32`'s range and the matrix has at least [`StorageParams::min_entries`] entries | set up from `fl32(A)` and cycled on `f32` vectors ([`Narrowed`]): the same iterations as the `f64` hierarchy on Poisson 240³, Poisson 240³/3 (rounded values) and elasticity 70³; solve 0.70×, setup 0.93× |
//!
//! BiCGSTAB, MINRES and GMRES + ILU(0) keep `f64` values: `f32` values were not measured to pay
//! there (GMRES + ILU(0)'s iteration is its triangular solves, 0.96× with `f32` factors).
//! Below [`StorageParams::min_entries`] the matrix lives in the device's L2 cache across a
//! solve's products, where its bytes are not what an iteration waits for.
//!
//! The storage is reported with the choice ([`StorageReport`], the automatic solve's
//! `storage`): which storage the candidate that finished used, the rule's reason, and a fallback
//! to `f64` in one sentence. `f32` values exact in `f32` cannot change the answer beyond the
//! order of the sums; the `f32` hierarchy can fail where the `f64` one would not (its setup, or a
//! cycle that breaks CG down): the automatic solve then builds the `f64` hierarchy and says so.
//!
//! A backend gives the `f32` parts through [`StorageOps`]: the CPU and the GPU for an `f64`
//! matrix (on the GPU the rounding runs on the device, from the device matrix), nothing for an
//! `f32` one, whose values are stored in the working precision already.

use std::any::Any;
use std::cell::{Cell, RefCell};

use super::{AutoMethod, MatrixStats, StatsOps};
use crate::backend::{Cpu, LinearOperator, Preconditioner};
use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::precond::amg::{AmgOps, AmgParams, AmgSummary};
use crate::precond::Narrowed;
use crate::scalar::{Scalar, Storage};
use crate::spmv::mixed::{F32Fit, MixedCsr};

/// The storage rule's options ([`choose_storage`]). Fill with struct-update syntax from
/// `Default`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StorageParams {
    /// Choose the storage by the rule (default true); false keeps every value and hierarchy in
    /// `f64` (the caller asked for `f64` storage).
    pub auto: bool,
    /// The fewest stored entries for which `f32` storage is taken (default 4 000 000: 48 MB of
    /// `f64` CSR, about the H200's 50 MB L2 cache).
    pub min_entries: usize,
    /// A CG iteration with `f32` values exact in `f32`, as a fraction of one with `f64` values
    /// (default 0.86, Poisson 200³/240³ on the H200): what the cost model scales the cheap
    /// candidate's measured iteration back by.
    pub values_iteration: f64,
    /// An AMG-CG iteration with the `f32` hierarchy, as a fraction of one with the `f64`
    /// hierarchy (default 0.70, Poisson 240³ and elasticity 70³ on the H200).
    pub hierarchy_iteration: f64,
    /// The `f32` hierarchy's setup as a fraction of the `f64` one's (default 0.93, same).
    pub hierarchy_setup: f64,
}

impl Default for StorageParams {
    fn default() -> Self {
        StorageParams {
            auto: true,
            min_entries: 4_000_000,
            values_iteration: 0.86,
            hierarchy_iteration: 0.70,
            hierarchy_setup: 0.93,
        }
    }
}

/// What [`choose_storage`] decided: the storage of the values of a CG candidate's operator and of
/// an AMG hierarchy, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct StoragePlan {
    /// The values of a CG candidate's Krylov operator (every other method keeps `f64`).
    pub values: Storage,
    /// The AMG hierarchy, where one is built.
    pub hierarchy: Storage,
    /// The rule that decided, in words.
    pub reason: String,
}

impl StoragePlan {
    /// All in the working precision, for `reason`.
    fn working(reason: String) -> Self {
        StoragePlan {
            values: Storage::F64,
            hierarchy: Storage::F64,
            reason,
        }
    }

    /// The storage of the values of `method`'s operator.
    pub fn values_for(&self, method: AutoMethod) -> Storage {
        if method == AutoMethod::Cg {
            self.values
        } else {
            Storage::F64
        }
    }

    /// The factor that turns a CG iteration measured under this plan into one with `f64` values
    /// (the cost model's unit), and AMG's setup and iteration factors under it: `(measured,
    /// setup, iteration)`, each relative to `f64` storage.
    pub fn factors(&self, p: &StorageParams) -> (f64, f64, f64) {
        let measured = match self.values {
            Storage::F32 => p.values_iteration,
            Storage::F64 => 1.0,
        };
        match self.hierarchy {
            Storage::F32 => (measured, p.hierarchy_setup, p.hierarchy_iteration),
            Storage::F64 => (measured, 1.0, 1.0),
        }
    }
}

/// The storage for a matrix of `stats` whose values' `f32` fit is `fit` (`None`: the working
/// precision is not `f64`, so there is nothing narrower to store). See the [module docs](self).
/// Pure and deterministic.
pub fn choose_storage(
    fit: Option<&std::result::Result<F32Fit, String>>,
    stats: &MatrixStats,
    p: &StorageParams,
) -> StoragePlan {
    let Some(fit) = fit else {
        return StoragePlan::working(
            "values and hierarchy in the working precision (f32), nothing narrower".into(),
        );
    };
    if !p.auto {
        return StoragePlan::working("f64 storage: asked for by the caller".into());
    }
    let fit = match fit {
        Ok(f) => f,
        Err(why) => return StoragePlan::working(format!("f64 storage: {why}")),
    };
    if stats.nnz < p.min_entries {
        return StoragePlan::working(format!(
            "f64 storage: {} entries, fewer than {} (the matrix stays in the device's cache \
             between products, so fewer bytes per entry do not pay)",
            stats.nnz, p.min_entries
        ));
    }
    let (values, why) = if fit.lossless {
        (
            Storage::F32,
            "f32 values for CG (every value is exact in f32: the same matrix with a third fewer \
             bytes per entry)"
                .to_string(),
        )
    } else {
        (
            Storage::F64,
            format!(
                "f64 values (f32 rounds them by up to {:.1e} relative, which CG pays for in \
                 iterations after each reliable update)",
                fit.max_rel_rounding
            ),
        )
    };
    StoragePlan {
        values,
        hierarchy: Storage::F32,
        reason: format!(
            "{why}; an AMG hierarchy in f32 (set up from the f32 rounding and cycled on f32 \
             vectors under the f64 CG; {} entries)",
            stats.nnz
        ),
    }
}

/// The storage of an automatic solve, as reported with its choice.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize))]
pub struct StorageReport {
    /// The values of the Krylov operator of the candidate that finished: `"f64"` or `"f32"`
    /// (`"f32"` too where the working precision is `f32`).
    pub values: &'static str,
    /// The AMG hierarchy's storage, where one was built.
    pub hierarchy: Option<&'static str>,
    /// The rule's decision, in words.
    pub reason: String,
    /// Where `f32` storage was decided and `f64` served after all: why, in one sentence.
    pub fallback: Option<String>,
}

/// An AMG hierarchy built for the automatic solve, with its summary.
pub type StoredAmg<T, B> = (Box<dyn Preconditioner<T, B>>, AmgSummary);

/// The `f32` parts of a backend's `f64` matrix ([`StatsOps::Matrix`]): its values' fit, an
/// operator with its values in `f32` and an AMG hierarchy in `f32`. For an `f32` matrix there
/// is nothing narrower: every method answers `None`.
pub trait StorageOps<T: Scalar>: StatsOps<T> + AmgOps<T> {
    /// [`F32Fit`] of the values of `a` (`Err`: the sentence naming a value beyond `f32`'s
    /// range); `None` where `T` is not `f64`. `host` is `a`'s host copy where the caller has
    /// one (read instead of the device's).
    ///
    /// # Errors
    /// A backend failure.
    fn f32_fit(
        &self,
        a: &Self::Matrix,
        host: Option<&CsrMatrix<T>>,
    ) -> Result<Option<std::result::Result<F32Fit, String>>>;

    /// `a` with its values stored in `f32` under `T = f64` vectors, for values exact in `f32`
    /// (`fit.lossless`; `None` otherwise, and where `T` is not `f64`): the operator keeps no
    /// second copy.
    ///
    /// # Errors
    /// A backend failure (out of memory, a failed kernel compile).
    fn exact_f32_operator(
        &self,
        a: &Self::Matrix,
        fit: &F32Fit,
    ) -> Result<Option<Box<dyn LinearOperator<T, Self>>>>;

    /// The AMG hierarchy of `fl32(a)` with `params`, set up and cycled in `f32` under `T = f64`
    /// work ([`Narrowed`]), with its summary; `None` where `T` is not `f64`.
    ///
    /// # Errors
    /// As [`Narrowed::amg`].
    fn f32_amg(&self, a: &Self::Matrix, params: &AmgParams) -> Result<Option<StoredAmg<T, Self>>>;
}

/// `v` as a `U`, where `V` is `U` (the working precision is `f64`); `None` otherwise.
fn retype<V: 'static, U: 'static>(v: V) -> Option<U> {
    let b: Box<dyn Any> = Box::new(v);
    b.downcast::<U>().ok().map(|u| *u)
}

/// `v` as a `&U`, where `V` is `U`.
fn view<V: 'static, U: 'static>(v: &V) -> Option<&U> {
    (v as &dyn Any).downcast_ref::<U>()
}

impl<T: Scalar> StorageOps<T> for Cpu {
    fn f32_fit(
        &self,
        a: &CsrMatrix<T>,
        _: Option<&CsrMatrix<T>>,
    ) -> Result<Option<std::result::Result<F32Fit, String>>> {
        Ok(view::<_, CsrMatrix<f64>>(a).map(F32Fit::of))
    }

    fn exact_f32_operator(
        &self,
        a: &CsrMatrix<T>,
        fit: &F32Fit,
    ) -> Result<Option<Box<dyn LinearOperator<T, Cpu>>>> {
        let Some(a) = view::<_, CsrMatrix<f64>>(a).filter(|_| fit.lossless) else {
            return Ok(None);
        };
        let m: Box<dyn LinearOperator<f64, Cpu>> = Box::new(MixedCsr::new(a)?);
        Ok(retype(m))
    }

    fn f32_amg(&self, a: &CsrMatrix<T>, params: &AmgParams) -> Result<Option<StoredAmg<T, Cpu>>> {
        let Some(a) = view::<_, CsrMatrix<f64>>(a) else {
            return Ok(None);
        };
        let h = Narrowed::amg(&Cpu, a, params)?;
        let s = h.inner().summary().clone();
        let h: Box<dyn Preconditioner<f64, Cpu>> = Box::new(h);
        Ok(retype(h).map(|h| (h, s)))
    }
}

/// The storage of one automatic solve: the plan, the operator with `f32` values where the plan
/// takes them, the hierarchy built, and a fallback (what `autosolve` runs its candidates with).
pub struct Stored<T: Scalar, B: StorageOps<T>> {
    /// The rule's decision.
    pub plan: StoragePlan,
    /// The measured factors of the plan (`StoragePlan::factors`).
    pub factors: (f64, f64, f64),
    narrow: Option<Box<dyn LinearOperator<T, B>>>,
    working32: bool,
    /// The storage the next hierarchy is built in (the plan's, `f64` after a fallback).
    next_hierarchy: Cell<Storage>,
    /// The storage of the hierarchy built last.
    hierarchy: Cell<Option<Storage>>,
    fallback: RefCell<Option<String>>,
}

impl<T: Scalar, B: StorageOps<T>> Stored<T, B> {
    /// Decides the storage of `op` (a square matrix of `stats`; `host` its host copy, if any)
    /// and builds the operator with `f32` values where the plan takes them.
    ///
    /// # Errors
    /// A backend failure.
    pub fn new(
        be: &B,
        op: &B::Matrix,
        host: Option<&CsrMatrix<T>>,
        stats: &MatrixStats,
        p: &StorageParams,
    ) -> Result<Self> {
        let working32 = T::BYTES != 8;
        // The fit is read only where the rule gets that far (it costs a pass over the values).
        let fit = if working32 {
            None
        } else if p.auto && stats.nnz >= p.min_entries {
            be.f32_fit(op, host)?
        } else {
            Some(Ok(F32Fit {
                lossless: false,
                max_rel_rounding: f64::NAN,
            }))
        };
        let mut plan = choose_storage(fit.as_ref(), stats, p);
        let mut fallback = None;
        let narrow = match (plan.values, &fit) {
            (Storage::F32, Some(Ok(f))) => be.exact_f32_operator(op, f)?,
            _ => None,
        };
        if plan.values == Storage::F32 && narrow.is_none() {
            plan.values = Storage::F64;
            fallback = Some("the backend has no operator with f32 values: f64 values".into());
        }
        Ok(Stored {
            factors: plan.factors(p),
            next_hierarchy: Cell::new(plan.hierarchy),
            plan,
            narrow,
            working32,
            hierarchy: Cell::new(None),
            fallback: RefCell::new(fallback),
        })
    }

    /// The Krylov operator of a `method` candidate: `op`, or `op` with `f32` values.
    pub fn operator<'a>(
        &'a self,
        method: AutoMethod,
        op: &'a B::Matrix,
    ) -> &'a dyn LinearOperator<T, B> {
        match (&self.narrow, self.plan.values_for(method)) {
            (Some(n), Storage::F32) => &**n,
            _ => op,
        }
    }

    /// The AMG hierarchy of `op` with `params` in the plan's storage: in `f32` where the plan
    /// says so, falling back to `f64` (and saying why) where the `f32` setup fails.
    ///
    /// # Errors
    /// As [`Amg::from_matrix`](crate::precond::Amg::from_matrix).
    pub fn amg(&self, be: &B, op: &B::Matrix, params: &AmgParams) -> Result<StoredAmg<T, B>> {
        if self.next_hierarchy.get() == Storage::F32 {
            match be.f32_amg(op, params) {
                Ok(Some((h, s))) => {
                    self.hierarchy.set(Some(Storage::F32));
                    return Ok((h, s));
                }
                Ok(None) => {}
                Err(e) => {
                    self.next_hierarchy.set(Storage::F64);
                    self.fall_back(format!(
                        "the f32 AMG setup failed ({e}), so the hierarchy was built in f64"
                    ))
                }
            }
        }
        let m = crate::precond::Amg::from_matrix(be, op, params)?;
        let s = m.summary().clone();
        self.hierarchy.set(Some(Storage::F64));
        Ok((Box::new(m), s))
    }

    /// Whether the hierarchy built last was in `f32` and a solve with it failed as an `f32`
    /// cycle may where an `f64` one would not (`f32_cause`: the caller's judgement of the
    /// error — a breakdown, a non-finite value or stagnation — and `err`, its message). Then the
    /// next hierarchy is built in `f64`, and the fallback says why.
    pub fn hierarchy_failed(&self, f32_cause: bool, err: &dyn std::fmt::Display) -> bool {
        let f32_failed = f32_cause
            && self.hierarchy.get() == Some(Storage::F32)
            && self.next_hierarchy.get() == Storage::F32;
        if f32_failed {
            self.next_hierarchy.set(Storage::F64);
            self.fall_back(format!(
                "CG with the f32 AMG hierarchy failed ({err}), so the hierarchy was built again \
                 in f64"
            ));
        }
        f32_failed
    }

    /// Records a fallback to `f64` (the first one is reported).
    pub fn fall_back(&self, why: String) {
        self.fallback.borrow_mut().get_or_insert(why);
    }

    /// The report, the solve having finished with `method`.
    pub fn report(&self, method: AutoMethod) -> StorageReport {
        let name = |s: Storage| if self.working32 { "f32" } else { s.name() };
        StorageReport {
            values: name(match self.narrow {
                Some(_) => self.plan.values_for(method),
                None => Storage::F64,
            }),
            hierarchy: self.hierarchy.get().map(name),
            reason: self.plan.reason.clone(),
            fallback: self.fallback.borrow().clone(),
        }
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use crate::backend::gpu::GpuOps;
    use crate::backend::GpuScalar;
    use crate::spmv::gpu::mixed::{narrowed, GpuMixedCsr};
    use crate::spmv::gpu::GpuCsr;

    impl<T: GpuScalar> StorageOps<T> for GpuOps<T> {
        /// One pass on the device (a host copy, if any, is not read: the device is faster).
        fn f32_fit(
            &self,
            a: &GpuCsr<T>,
            _host: Option<&CsrMatrix<T>>,
        ) -> Result<Option<std::result::Result<F32Fit, String>>> {
            let Some(d) = view::<_, GpuCsr<f64>>(a) else {
                return Ok(None);
            };
            Ok(Some(crate::spmv::gpu::mixed::f32_fit(d)?))
        }

        fn exact_f32_operator(
            &self,
            a: &GpuCsr<T>,
            fit: &F32Fit,
        ) -> Result<Option<Box<dyn LinearOperator<T, GpuOps<T>>>>> {
            let Some(a) = view::<_, GpuCsr<f64>>(a).filter(|_| fit.lossless) else {
                return Ok(None);
            };
            let m = GpuMixedCsr::from_parts(narrowed(a)?, None, *fit)?;
            let m: Box<dyn LinearOperator<f64, GpuOps<f64>>> = Box::new(m);
            Ok(retype(m))
        }

        fn f32_amg(
            &self,
            a: &GpuCsr<T>,
            params: &AmgParams,
        ) -> Result<Option<StoredAmg<T, GpuOps<T>>>> {
            let (Some(a), Some(ops)) = (view::<_, GpuCsr<f64>>(a), view::<_, GpuOps<f64>>(self))
            else {
                return Ok(None);
            };
            let low = narrowed(a)?;
            let h = Narrowed::amg_from_matrix(ops, &low, None, params)?;
            let s = h.inner().summary().clone();
            let h: Box<dyn Preconditioner<f64, GpuOps<f64>>> = Box::new(h);
            Ok(retype(h).map(|h| (h, s)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(nnz: usize) -> MatrixStats {
        MatrixStats {
            rows: nnz / 7,
            nnz,
            symmetric: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_rule_takes_f32_values_only_where_they_are_exact() {
        let p = StorageParams::default();
        let exact = Ok(F32Fit {
            lossless: true,
            max_rel_rounding: 0.0,
        });
        let plan = choose_storage(Some(&exact), &stats(56_000_000), &p);
        assert_eq!((plan.values, plan.hierarchy), (Storage::F32, Storage::F32));
        assert_eq!(plan.values_for(AutoMethod::Cg), Storage::F32);
        assert_eq!(plan.values_for(AutoMethod::Bicgstab), Storage::F64);
        let rounded = Ok(F32Fit {
            lossless: false,
            max_rel_rounding: 3e-8,
        });
        let plan = choose_storage(Some(&rounded), &stats(56_000_000), &p);
        assert_eq!((plan.values, plan.hierarchy), (Storage::F64, Storage::F32));
        assert!(plan.reason.contains("round"), "{}", plan.reason);
        // Small, refused, overridden, f32 work: all f64 (working).
        for (fit, n, q) in [
            (Some(&exact), 1000, p),
            (
                Some(&Err("entry (0, 0) = 1e300 is beyond".to_string())),
                56_000_000,
                p,
            ),
            (Some(&exact), 56_000_000, StorageParams { auto: false, ..p }),
            (None, 56_000_000, p),
        ] {
            let plan = choose_storage(fit, &stats(n), &q);
            assert_eq!((plan.values, plan.hierarchy), (Storage::F64, Storage::F64));
            assert!(!plan.reason.is_empty());
        }
    }

    #[test]
    fn the_factors_follow_the_plan() {
        let p = StorageParams::default();
        let plan = StoragePlan {
            values: Storage::F32,
            hierarchy: Storage::F32,
            reason: String::new(),
        };
        assert_eq!(plan.factors(&p), (0.86, 0.93, 0.70));
        let plan = StoragePlan {
            values: Storage::F64,
            hierarchy: Storage::F64,
            reason: String::new(),
        };
        assert_eq!(plan.factors(&p), (1.0, 1.0, 1.0));
    }
}
