//! The multigrid cycle on a block of columns (the preconditioner of the solvers with several
//! right-hand sides): the cycle of `cycle.rs` step for step, with every product of a level's
//! matrix (`A` in the smoother and the residual, `R`, `P`, the coarse inverse) applied to all
//! columns at once by [`MultigridOps::spmv_block`] (on the GPU one launch that reads the matrix
//! once for up to 32 columns), and every vector step applied to all columns at once by the
//! block steps of [`BlockOps`](crate::backend::BlockOps) (on the GPU one launch for up to 32
//! columns). Column `j` of the result equals the one-column cycle of `r_j` to rounding.

use super::cycle::{DeviceLevel, LevelSmoother, Scratch, Work};
use super::{Cycle, LevelSummary, MultigridOps, Smoother};
use crate::backend::PolyColumn;
use crate::error::Result;
use crate::scalar::Scalar;

/// The cycle workspace of `k` columns: `work[j]` is column `j`'s [`Work`] for every level.
/// Allocated on first use and kept while the level sizes stay.
pub(crate) fn ensure_work<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    info: &[LevelSummary],
    work: &mut Vec<Vec<Work<B::Vector>>>,
    k: usize,
) -> Result<()> {
    if !work.iter().all(|w| Work::fits(be, w, info)) {
        work.clear();
    }
    while work.len() < k {
        work.push(Work::for_levels(be, info)?);
    }
    Ok(())
}

/// `rs[j] ← bs[j] − A·xs[j]`.
fn residual_block<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &B::Matrix,
    bs: &[&B::Vector],
    xs: &[&B::Vector],
    rs: &mut [&mut B::Vector],
) -> Result<()> {
    be.copy_block(bs, rs)?;
    be.spmv_block(a, -T::one(), xs, T::one(), rs)
}

/// One column of the Chebyshev smoother: its input, output and three work vectors.
struct ChebCol<'a, V> {
    r: &'a V,
    z: &'a mut V,
    res: &'a mut V,
    d: &'a mut V,
    t: &'a mut V,
}

/// `z ← p(D⁻¹A)·D⁻¹·r` for every column (the smoother's [`ChebyshevPoly`](crate::precond::spectral::ChebyshevPoly) steps, as `cycle.rs`).
fn chebyshev_block<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &B::Matrix,
    sm: &LevelSmoother<B::Vector>,
    cols: &mut [ChebCol<'_, B::Vector>],
) -> Result<()> {
    let mut steps = sm.poly().steps();
    let (_, c2) = steps.next().expect("a polynomial has a first step");
    let dinv = Some(&sm.scale);
    {
        let mut pc: Vec<PolyColumn<'_, B::Vector>> = cols
            .iter_mut()
            .map(|c| PolyColumn {
                t: c.r,
                res: &mut *c.res,
                d: &mut *c.d,
                z: &mut *c.z,
            })
            .collect();
        be.poly_step_block(&mut pc, dinv, true, T::zero(), T::of_f64(c2))?;
    }
    for (c1, c2) in steps {
        {
            let (mut ds, mut ts) = (
                Vec::with_capacity(cols.len()),
                Vec::with_capacity(cols.len()),
            );
            for c in cols.iter_mut() {
                ds.push(&*c.d);
                ts.push(&mut *c.t);
            }
            be.spmv_block(a, T::one(), &ds, T::zero(), &mut ts)?;
        }
        let mut pc: Vec<PolyColumn<'_, B::Vector>> = cols
            .iter_mut()
            .map(|c| PolyColumn {
                t: &*c.t,
                res: &mut *c.res,
                d: &mut *c.d,
                z: &mut *c.z,
            })
            .collect();
        be.poly_step_block(&mut pc, dinv, false, T::of_f64(c1), T::of_f64(c2))?;
    }
    Ok(())
}

/// One smoothing step on every column of `A·X = B` (`zero`: `X` is zero on entry).
fn smooth_block<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    a: &B::Matrix,
    sm: &LevelSmoother<B::Vector>,
    bs: &[&B::Vector],
    xs: &mut [&mut B::Vector],
    zero: bool,
    ws: &mut [&mut Scratch<B::Vector>],
) -> Result<()> {
    if !zero {
        let xr: Vec<&B::Vector> = xs.iter().map(|x| &**x).collect();
        let mut rs: Vec<&mut B::Vector> = ws.iter_mut().map(|w| &mut w.r).collect();
        residual_block(be, a, bs, &xr, &mut rs)?;
    }
    match sm.kind {
        Smoother::Chebyshev => {
            if zero {
                let mut cols: Vec<ChebCol<'_, B::Vector>> = ws
                    .iter_mut()
                    .zip(bs.iter().zip(xs.iter_mut()))
                    .map(|(w, (b, x))| {
                        let Scratch { res, d, t, .. } = &mut **w;
                        ChebCol {
                            r: *b,
                            z: &mut **x,
                            res,
                            d,
                            t,
                        }
                    })
                    .collect();
                chebyshev_block(be, a, sm, &mut cols)
            } else {
                {
                    let mut cols: Vec<ChebCol<'_, B::Vector>> = ws
                        .iter_mut()
                        .map(|w| {
                            let Scratch { r, res, d, t, z } = &mut **w;
                            ChebCol { r, z, res, d, t }
                        })
                        .collect();
                    chebyshev_block(be, a, sm, &mut cols)?;
                }
                let zs: Vec<&B::Vector> = ws.iter().map(|w| &w.z).collect();
                be.axpy_block(T::one(), &zs, xs)
            }
        }
        Smoother::Jacobi | Smoother::L1Jacobi => {
            if zero {
                return be.scale_block(&sm.scale, bs, xs);
            }
            {
                let (mut rs, mut zs) = (Vec::with_capacity(ws.len()), Vec::with_capacity(ws.len()));
                for w in ws.iter_mut() {
                    let Scratch { r, z, .. } = &mut **w;
                    rs.push(&*r);
                    zs.push(z);
                }
                be.scale_block(&sm.scale, &rs, &mut zs)?;
            }
            let zs: Vec<&B::Vector> = ws.iter().map(|w| &w.z).collect();
            be.axpy_block(T::one(), &zs, xs)
        }
    }
}

/// Each column's workspace split into this level's and the deeper levels'.
type Split<'a, V> = (Vec<&'a mut Work<V>>, Vec<&'a mut [Work<V>]>);

/// The cycle on `levels[0]` for every column: `xs[j] ≈ A⁻¹bs[j]`; `zero` says the `xs` are zero
/// on entry. `work[j]` is column `j`'s workspace from this level down.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cycle_block<T: Scalar, B: MultigridOps<T>>(
    be: &B,
    levels: &[DeviceLevel<T, B>],
    coarse_inv: &B::Matrix,
    kind: Cycle,
    bs: &[&B::Vector],
    xs: &mut [&mut B::Vector],
    zero: bool,
    work: &mut [&mut [Work<B::Vector>]],
) -> Result<()> {
    let (lv, deeper) = levels.split_first().expect("a level");
    if deeper.is_empty() {
        if zero {
            return be.spmv_block(coarse_inv, T::one(), bs, T::zero(), xs);
        }
        let mut rs: Vec<&mut B::Vector> = work.iter_mut().map(|w| &mut w[0].s.r).collect();
        {
            let xr: Vec<&B::Vector> = xs.iter().map(|x| &**x).collect();
            residual_block(be, &lv.a, bs, &xr, &mut rs)?;
        }
        let rr: Vec<&B::Vector> = rs.into_iter().map(|r| &*r).collect();
        return be.spmv_block(coarse_inv, T::one(), &rr, T::one(), xs);
    }
    let (mut heads, mut rests): Split<'_, B::Vector> = work
        .iter_mut()
        .map(|w| w.split_first_mut().expect("work for every level"))
        .unzip();
    let sweeps = lv.smoother.sweeps;
    for s in 0..sweeps {
        let mut ss: Vec<&mut Scratch<B::Vector>> = heads.iter_mut().map(|w| &mut w.s).collect();
        smooth_block(be, &lv.a, &lv.smoother, bs, xs, zero && s == 0, &mut ss)?;
    }
    let x_zero = zero && sweeps == 0;
    {
        let mut rs: Vec<&mut B::Vector> = heads.iter_mut().map(|w| &mut w.s.r).collect();
        if x_zero {
            be.copy_block(bs, &mut rs)?;
        } else {
            let xr: Vec<&B::Vector> = xs.iter().map(|x| &**x).collect();
            residual_block(be, &lv.a, bs, &xr, &mut rs)?;
        }
    }
    let (p, r) = (lv.p.as_ref().expect("P"), lv.r.as_ref().expect("R"));
    {
        let (mut rs, mut bcs) = (
            Vec::with_capacity(heads.len()),
            Vec::with_capacity(heads.len()),
        );
        for w in heads.iter_mut() {
            rs.push(&w.s.r);
            bcs.push(&mut w.bc);
        }
        be.spmv_block(r, T::one(), &rs, T::zero(), &mut bcs)?;
    }
    let visits = match kind {
        Cycle::V => 1,
        Cycle::W => 2,
    };
    {
        let (mut bcs, mut xcs) = (
            Vec::with_capacity(heads.len()),
            Vec::with_capacity(heads.len()),
        );
        for w in heads.iter_mut() {
            bcs.push(&w.bc);
            xcs.push(&mut w.xc);
        }
        for v in 0..visits {
            cycle_block(
                be,
                deeper,
                coarse_inv,
                kind,
                &bcs,
                &mut xcs,
                v == 0,
                &mut rests,
            )?;
        }
        let xr: Vec<&B::Vector> = xcs.into_iter().map(|x| &*x).collect();
        let beta = if x_zero { T::zero() } else { T::one() };
        be.spmv_block(p, T::one(), &xr, beta, xs)?;
    }
    for _ in 0..sweeps {
        let mut ss: Vec<&mut Scratch<B::Vector>> = heads.iter_mut().map(|w| &mut w.s).collect();
        smooth_block(be, &lv.a, &lv.smoother, bs, xs, false, &mut ss)?;
    }
    Ok(())
}
