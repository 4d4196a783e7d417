//! The CPU backend: `Vec<T>` vectors, host scalars, rayon over fixed chunks.
//!
//! Reductions sum each chunk of [`CHUNK`] elements sequentially and then the chunk sums in chunk
//! order, so a result does not depend on the number of threads or on work stealing: CPU solves
//! are reproducible bit for bit. The per-chunk partial sums live in the solve's workspace, so an
//! iteration allocates nothing.
//!
//! Every parallel loop goes through one function that is not generic, [`for_chunks`] (a chunk
//! index and range to a `&dyn Fn`): rayon's machinery is compiled once, in the library, instead
//! of once per loop and element type in every crate that uses the backend.

use std::ops::Range;

use rayon::prelude::*;

use super::recur::{self, Slot, NSLOTS};
use super::{
    same_len, same_lens, BicgSteps, BlockKrylovOps, BlockOps, CgSteps, ChebyshevSteps, Fuse,
    HostKrylov, KrylovOps, VectorOps,
};
use crate::error::Result;
use crate::scalar::{Elem, Scalar};

/// Elements per reduction chunk (one rayon task each).
pub const CHUNK: usize = 16 * 1024;

/// The CPU backend of the solvers (vectors are `Vec<T>`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

/// The CPU's scalar slots, residual history and per-chunk partial sums.
#[derive(Clone, Debug)]
pub struct CpuScalars<T> {
    slots: [T; NSLOTS],
    hist: Vec<T>,
    partials: Vec<[T; 2]>,
}

/// A pointer to a vector that parallel tasks write through, each to its own disjoint range.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T, usize);
// SAFETY: tasks only touch disjoint ranges (see `Shared::range`).
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}
impl<T> Shared<T> {
    fn new(v: &mut [T]) -> Self {
        Shared(v.as_mut_ptr(), v.len())
    }
    /// # Safety
    /// No two live slices obtained from the same `Shared` may overlap, and none may outlive the
    /// borrow `new` was called with. `chunked` hands each task its own chunk range.
    #[allow(clippy::mut_from_ref)]
    unsafe fn range(&self, r: Range<usize>) -> &mut [T] {
        assert!(r.end <= self.1);
        std::slice::from_raw_parts_mut(self.0.add(r.start), r.len())
    }
}

/// Runs `f(c, range)` for every chunk `c` of `0..n` ([`CHUNK`] elements each, the last one
/// shorter), in parallel when there are several. Not generic, so that rayon's machinery is
/// compiled once.
fn for_chunks(n: usize, f: &(dyn Fn(usize, Range<usize>) + Sync)) {
    let range = |c: usize| c * CHUNK..((c + 1) * CHUNK).min(n);
    match n.div_ceil(CHUNK) {
        0 => {}
        1 => f(0, range(0)),
        nch => (0..nch).into_par_iter().for_each(|c| f(c, range(c))),
    }
}

/// Runs `f` on the chunks of `0..n` in parallel and sums the returned pairs in chunk order.
fn chunked<T: Elem>(
    n: usize,
    partials: &mut [[T; 2]],
    f: impl Fn(Range<usize>) -> [T; 2] + Sync,
) -> [T; 2] {
    let nch = n.div_ceil(CHUNK);
    assert!(
        partials.len() >= nch,
        "solver workspace is for {} elements, vectors have {n}",
        partials.len() * CHUNK
    );
    let parts = &mut partials[..nch];
    let out = Shared::new(parts);
    // SAFETY: chunk `c` writes only partial `c`.
    for_chunks(n, &|c, rg| unsafe { out.range(c..c + 1) }[0] = f(rg));
    parts
        .iter()
        .fold([T::zero(); 2], |a, p| [a[0] + p[0], a[1] + p[1]])
}

/// Runs `f(out, range)` on every chunk of `0..out.len()` in parallel, `out` being the chunk of
/// `out` at that range.
fn map_chunks<T: Send>(out: &mut [T], f: impl Fn(&mut [T], Range<usize>) + Sync) {
    let o = Shared::new(out);
    // SAFETY: each chunk range is handed to exactly one task.
    for_chunks(o.1, &|_, rg| f(unsafe { o.range(rg.clone()) }, rg));
}

/// [`map_chunks`] on two outputs of one length.
fn map_chunks2<T: Send>(
    a: &mut [T],
    b: &mut [T],
    f: impl Fn(&mut [T], &mut [T], Range<usize>) + Sync,
) {
    same_len("map_chunks2", a.len(), b.len());
    let (sa, sb) = (Shared::new(a), Shared::new(b));
    // SAFETY: each chunk range is handed to exactly one task.
    for_chunks(sa.1, &|_, rg| unsafe {
        f(sa.range(rg.clone()), sb.range(rg.clone()), rg)
    });
}

/// `xᴴy` (`xᵀy` when `bilinear`) summed per fixed-size chunk in a fixed order (see
/// [`chunked`]).
fn chunked_form<T: Elem>(bilinear: bool, x: &[T], y: &[T], partials: &mut [[T; 2]]) -> T {
    let [d, _] = chunked(x.len(), partials, |rg| {
        let it = x[rg.clone()].iter().zip(&y[rg]);
        let s = if bilinear {
            it.fold(T::zero(), |a, (&x, &y)| a + x * y)
        } else {
            it.fold(T::zero(), |a, (&x, &y)| a + x.conj() * y)
        };
        [s, T::zero()]
    });
    d
}

/// `xᴴy` summed per fixed-size chunk in a fixed order (see [`chunked`]).
fn chunked_dot<T: Elem>(x: &[T], y: &[T], partials: &mut [[T; 2]]) -> T {
    chunked_form(false, x, y, partials)
}

/// `x` conjugated unless `bilinear` (the left factor of the CG family's products).
#[inline(always)]
fn form<T: Elem>(bilinear: bool, x: T) -> T {
    if bilinear {
        x
    } else {
        x.conj()
    }
}

impl<T: Elem> VectorOps<T> for Cpu {
    type Vector = Vec<T>;
    type Scalars = CpuScalars<T>;

    fn name(&self) -> &'static str {
        "cpu"
    }
    fn len(&self, v: &Vec<T>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<Vec<T>> {
        Ok(vec![T::zero(); n])
    }
    fn upload(&self, host: &[T]) -> Result<Vec<T>> {
        Ok(host.to_vec())
    }
    fn download(&self, v: &Vec<T>) -> Result<Vec<T>> {
        Ok(v.clone())
    }
    fn copy(&self, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        same_len("copy", src.len(), dst.len());
        map_chunks(dst, |d, rg| d.copy_from_slice(&src[rg]));
        Ok(())
    }
    fn fill(&self, v: &mut Vec<T>, a: T) -> Result<()> {
        map_chunks(v, |c, _| c.fill(a));
        Ok(())
    }
    fn scal(&self, a: T, v: &mut Vec<T>) -> Result<()> {
        map_chunks(v, |c, _| c.iter_mut().for_each(|v| *v = a * *v));
        Ok(())
    }
    fn axpby(&self, a: T, x: &Vec<T>, b: T, y: &mut Vec<T>) -> Result<()> {
        same_len("axpby", x.len(), y.len());
        let zero = b == T::zero();
        map_chunks(y, |y, rg| {
            for (y, &x) in y.iter_mut().zip(&x[rg]) {
                *y = if zero { a * x } else { a * x + b * *y };
            }
        });
        Ok(())
    }
    fn axpbypcz(&self, a: T, x: &Vec<T>, b: T, y: &Vec<T>, c: T, z: &mut Vec<T>) -> Result<()> {
        same_len("axpbypcz", x.len(), y.len());
        same_len("axpbypcz", x.len(), z.len());
        let zero = c == T::zero();
        map_chunks(z, |z, rg| {
            for ((z, &x), &y) in z.iter_mut().zip(&x[rg.clone()]).zip(&y[rg]) {
                let v = a * x + b * y;
                *z = if zero { v } else { v + c * *z };
            }
        });
        Ok(())
    }
    fn vmul(&self, a: T, x: &Vec<T>, y: &Vec<T>, b: T, z: &mut Vec<T>) -> Result<()> {
        same_len("vmul", x.len(), y.len());
        same_len("vmul", x.len(), z.len());
        let zero = b == T::zero();
        map_chunks(z, |z, rg| {
            for ((z, &x), &y) in z.iter_mut().zip(&x[rg.clone()]).zip(&y[rg]) {
                let v = a * (x * y);
                *z = if zero { v } else { v + b * *z };
            }
        });
        Ok(())
    }
    fn dot(&self, x: &Vec<T>, y: &Vec<T>, sc: &mut CpuScalars<T>) -> Result<T> {
        same_len("dot", x.len(), y.len());
        let d = chunked_dot(x, y, &mut sc.partials);
        sc.slots[Slot::Dot as usize] = d;
        Ok(d)
    }
    fn dotu(&self, x: &Vec<T>, y: &Vec<T>, sc: &mut CpuScalars<T>) -> Result<T> {
        same_len("dotu", x.len(), y.len());
        let d = chunked_form(true, x, y, &mut sc.partials);
        sc.slots[Slot::Dot as usize] = d;
        Ok(d)
    }

    fn check_memory(&self, what: &str, bytes: u64) -> Result<()> {
        crate::memory::check_host(what, bytes)
    }
    fn scalars(&self, n: usize, max_iters: usize) -> Result<CpuScalars<T>> {
        Ok(CpuScalars {
            slots: [T::zero(); NSLOTS],
            hist: vec![T::zero(); max_iters + 1],
            partials: vec![[T::zero(); 2]; n.div_ceil(CHUNK).max(1)],
        })
    }
    fn write_slots(&self, sc: &mut CpuScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        for &(k, v) in values {
            sc.slots[k as usize] = v;
        }
        Ok(())
    }
    fn read_slots(&self, sc: &CpuScalars<T>) -> Result<[T; NSLOTS]> {
        Ok(sc.slots)
    }
    fn read_history(&self, sc: &CpuScalars<T>, len: usize) -> Result<Vec<T>> {
        Ok(sc.hist[..len.min(sc.hist.len())].to_vec())
    }
    fn update_slots(
        &self,
        sc: &mut CpuScalars<T>,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> Result<()> {
        f(&mut sc.slots, &mut sc.hist);
        Ok(())
    }
}

impl<T: Elem> CgSteps<T> for Cpu {
    fn cg_start(
        &self,
        r: &Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        let n = r.len();
        let bil = recur::bilinear(&sc.slots);
        let [rr, rz] = match fuse {
            Fuse::Identity => {
                let [rr, ru] = chunked(n, &mut sc.partials, |rg| {
                    let rr = r[rg.clone()]
                        .iter()
                        .fold(T::zero(), |a, &v| a + v.conj() * v);
                    let ru = if bil {
                        r[rg].iter().fold(T::zero(), |a, &v| a + v * v)
                    } else {
                        T::zero()
                    };
                    [rr, ru]
                });
                [rr, if bil { ru } else { rr }]
            }
            Fuse::Jacobi { inv_diag, z } => {
                same_len("cg_start", n, inv_diag.len());
                same_len("cg_start", n, z.len());
                let zs = Shared::new(z);
                chunked(n, &mut sc.partials, |rg| {
                    // SAFETY: each chunk range is handed to exactly one task.
                    let z = unsafe { zs.range(rg.clone()) };
                    let mut acc = [T::zero(); 2];
                    for ((z, &r), &d) in z.iter_mut().zip(&r[rg.clone()]).zip(&inv_diag[rg]) {
                        *z = d * r;
                        acc[0] += r.conj() * r;
                        acc[1] += form(bil, r) * *z;
                    }
                    acc
                })
            }
            Fuse::Separate(z) => {
                let z = z.expect("cg_start with a separate preconditioner needs z");
                same_len("cg_start", n, z.len());
                chunked(n, &mut sc.partials, |rg| {
                    r[rg.clone()]
                        .iter()
                        .zip(&z[rg])
                        .fold([T::zero(); 2], |a, (&r, &z)| {
                            [a[0] + r.conj() * r, a[1] + form(bil, r) * z]
                        })
                })
            }
        };
        recur::start(&mut sc.slots, &mut sc.hist, rr, rz, it);
        Ok(())
    }

    fn cg_alpha(&self, p: &Vec<T>, q: &Vec<T>, sc: &mut CpuScalars<T>, it: usize) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("cg_alpha", p.len(), q.len());
        let pq = chunked_form(recur::bilinear(&sc.slots), p, q, &mut sc.partials);
        recur::cg_alpha(&mut sc.slots, pq, it);
        Ok(())
    }

    fn cg_update_r(
        &self,
        q: &Vec<T>,
        r: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let n = r.len();
        same_len("cg_update_r", n, q.len());
        let alpha = sc.slots[Slot::Alpha as usize];
        let bil = recur::bilinear(&sc.slots);
        let rs = Shared::new(r);
        // Without a preconditioner `r·z` is `rᴴr` (`rᵀr` for the bilinear form); a separate
        // preconditioner computes it later.
        let identity = matches!(fuse, Fuse::Identity);
        let (rr, rz) = match fuse {
            Fuse::Jacobi { inv_diag, z } => {
                same_len("cg_update_r", n, inv_diag.len());
                same_len("cg_update_r", n, z.len());
                let zs = Shared::new(z);
                let [rr, rz] = chunked(n, &mut sc.partials, |rg| {
                    // SAFETY: each chunk range is handed to exactly one task.
                    let (r, z) = unsafe { (rs.range(rg.clone()), zs.range(rg.clone())) };
                    let mut acc = [T::zero(); 2];
                    for (((r, z), &q), &d) in
                        r.iter_mut().zip(z).zip(&q[rg.clone()]).zip(&inv_diag[rg])
                    {
                        *r -= alpha * q;
                        *z = d * *r;
                        acc[0] += r.conj() * *r;
                        acc[1] += form(bil, *r) * *z;
                    }
                    acc
                });
                (rr, Some(rz))
            }
            Fuse::Identity | Fuse::Separate(_) => {
                let ru_too = bil && identity;
                let [rr, ru] = chunked(n, &mut sc.partials, |rg| {
                    // SAFETY: each chunk range is handed to exactly one task.
                    let r = unsafe { rs.range(rg.clone()) };
                    let mut acc = [T::zero(); 2];
                    for (r, &q) in r.iter_mut().zip(&q[rg]) {
                        *r -= alpha * q;
                        acc[0] += r.conj() * *r;
                        if ru_too {
                            acc[1] += *r * *r;
                        }
                    }
                    acc
                });
                (rr, identity.then_some(if bil { ru } else { rr }))
            }
        };
        recur::cg_update_r(&mut sc.slots, &mut sc.hist, rr, rz, it);
        Ok(())
    }

    fn cg_rho(&self, r: &Vec<T>, z: &Vec<T>, sc: &mut CpuScalars<T>, it: usize) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("cg_rho", r.len(), z.len());
        let rz = chunked_form(recur::bilinear(&sc.slots), r, z, &mut sc.partials);
        recur::cg_rho(&mut sc.slots, rz, it);
        Ok(())
    }

    fn cg_update_xp(
        &self,
        x: &mut Vec<T>,
        p: &mut Vec<T>,
        z: &Vec<T>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        let s = &sc.slots;
        if recur::stopped(s) && s[Slot::StatusIter as usize].re().as_f64() as usize != it {
            return Ok(());
        }
        same_len("cg_update_xp", x.len(), p.len());
        same_len("cg_update_xp", x.len(), z.len());
        let (alpha, beta) = (s[Slot::Alpha as usize], s[Slot::Beta as usize]);
        map_chunks2(x, p, |x, p, rg| {
            for ((x, p), &z) in x.iter_mut().zip(p.iter_mut()).zip(&z[rg]) {
                *x += alpha * *p;
                *p = z + beta * *p;
            }
        });
        Ok(())
    }
}

impl<T: Elem> BicgSteps<T> for Cpu {
    fn bicg_p(
        &self,
        r: &Vec<T>,
        v: &Vec<T>,
        p: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut CpuScalars<T>,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("bicg_p", r.len(), v.len());
        same_len("bicg_p", r.len(), p.len());
        let (beta, omega) = (
            sc.slots[Slot::Beta as usize],
            sc.slots[Slot::Omega as usize],
        );
        let upd = |p: &mut [T], r: &[T], v: &[T]| {
            for ((p, &r), &v) in p.iter_mut().zip(r).zip(v) {
                *p = r + beta * (*p - omega * v);
            }
        };
        match fuse {
            Fuse::Jacobi { inv_diag, z } => {
                same_len("bicg_p", r.len(), z.len());
                same_len("bicg_p", r.len(), inv_diag.len());
                map_chunks2(p, z, |p, z, rg| {
                    upd(p, &r[rg.clone()], &v[rg.clone()]);
                    for ((z, &p), &d) in z.iter_mut().zip(p.iter()).zip(&inv_diag[rg]) {
                        *z = d * p;
                    }
                });
            }
            _ => map_chunks(p, |p, rg| upd(p, &r[rg.clone()], &v[rg])),
        }
        Ok(())
    }

    fn bicg_alpha(
        &self,
        rhat: &Vec<T>,
        v: &Vec<T>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("bicg_alpha", rhat.len(), v.len());
        let rv = chunked_dot(rhat, v, &mut sc.partials);
        recur::bicg_alpha(&mut sc.slots, rv, it);
        Ok(())
    }

    fn bicg_s(
        &self,
        r: &Vec<T>,
        v: &Vec<T>,
        s: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut CpuScalars<T>,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("bicg_s", r.len(), v.len());
        same_len("bicg_s", r.len(), s.len());
        let alpha = sc.slots[Slot::Alpha as usize];
        match fuse {
            Fuse::Jacobi { inv_diag, z } => {
                same_len("bicg_s", r.len(), z.len());
                same_len("bicg_s", r.len(), inv_diag.len());
                map_chunks2(s, z, |s, z, rg| {
                    let (r, v, d) = (&r[rg.clone()], &v[rg.clone()], &inv_diag[rg]);
                    for ((((s, z), &r), &v), &d) in
                        s.iter_mut().zip(z.iter_mut()).zip(r).zip(v).zip(d)
                    {
                        *s = r - alpha * v;
                        *z = d * *s;
                    }
                });
            }
            _ => map_chunks(s, |s, rg| {
                for ((s, &r), &v) in s.iter_mut().zip(&r[rg.clone()]).zip(&v[rg]) {
                    *s = r - alpha * v;
                }
            }),
        }
        Ok(())
    }

    fn bicg_omega(&self, t: &Vec<T>, s: &Vec<T>, sc: &mut CpuScalars<T>, it: usize) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        same_len("bicg_omega", t.len(), s.len());
        let [ts, tt] = chunked(t.len(), &mut sc.partials, |rg| {
            t[rg.clone()]
                .iter()
                .zip(&s[rg])
                .fold([T::zero(); 2], |a, (&t, &s)| {
                    [a[0] + t.conj() * s, a[1] + t.conj() * t]
                })
        });
        recur::bicg_omega(&mut sc.slots, ts, tt, it);
        Ok(())
    }

    fn bicg_update(
        &self,
        x: &mut Vec<T>,
        phat: &Vec<T>,
        shat: &Vec<T>,
        s: &Vec<T>,
        t: &Vec<T>,
        r: &mut Vec<T>,
        rhat: &Vec<T>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let n = x.len();
        for (what, len) in [
            ("p̂", phat.len()),
            ("ŝ", shat.len()),
            ("s", s.len()),
            ("t", t.len()),
            ("r", r.len()),
            ("r̂", rhat.len()),
        ] {
            same_len(what, n, len);
        }
        let (alpha, omega) = (
            sc.slots[Slot::Alpha as usize],
            sc.slots[Slot::Omega as usize],
        );
        let (xs, rs) = (Shared::new(x), Shared::new(r));
        let [rr, rho] = chunked(n, &mut sc.partials, |rg| {
            // SAFETY: each chunk range is handed to exactly one task.
            let (x, r) = unsafe { (xs.range(rg.clone()), rs.range(rg.clone())) };
            let mut acc = [T::zero(); 2];
            for (k, i) in rg.enumerate() {
                x[k] += alpha * phat[i] + omega * shat[i];
                let ri = s[i] - omega * t[i];
                r[k] = ri;
                acc[0] += ri.conj() * ri;
                acc[1] += rhat[i].conj() * ri;
            }
            acc
        });
        recur::bicg_update(&mut sc.slots, &mut sc.hist, rr, rho, it);
        Ok(())
    }
}

// The block steps: each column's one-pass step in turn.
impl<T: Elem> BlockOps<T> for Cpu {}
impl<T: Elem> BlockKrylovOps<T> for Cpu {}

impl<T: Elem> ChebyshevSteps<T> for Cpu {
    fn poly_step(
        &self,
        t: &Vec<T>,
        inv_diag: Option<&Vec<T>>,
        res: &mut Vec<T>,
        d: &mut Vec<T>,
        z: &mut Vec<T>,
        first: bool,
        c1: T,
        c2: T,
    ) -> Result<()> {
        let n = t.len();
        same_lens(
            "poly_step",
            n,
            &[("res", res.len()), ("d", d.len()), ("z", z.len())],
        );
        if let Some(dv) = inv_diag {
            same_len("poly_step D⁻¹", n, dv.len());
        }
        let (rs, ds, zs) = (Shared::new(res), Shared::new(d), Shared::new(z));
        for_chunks(n, &|_, rg| {
            // SAFETY: each chunk range is handed to exactly one task.
            let (res, d, z) = unsafe {
                (
                    rs.range(rg.clone()),
                    ds.range(rg.clone()),
                    zs.range(rg.clone()),
                )
            };
            for (k, i) in rg.enumerate() {
                let ti = match inv_diag {
                    Some(dv) => dv[i] * t[i],
                    None => t[i],
                };
                if first {
                    res[k] = ti;
                    d[k] = c2 * ti;
                    z[k] = d[k];
                } else {
                    res[k] -= ti;
                    d[k] = c1 * d[k] + c2 * res[k];
                    z[k] += d[k];
                }
            }
        });
        Ok(())
    }
}

/// A basis value as stored: rounded to `f32` (each part of a complex one) when `round`.
#[inline]
fn stored<T: Elem>(v: T, round: bool) -> T {
    if !round {
        return v;
    }
    let c = v.widen();
    T::narrow(crate::Complex::new(c.re as f32 as f64, c.im as f32 as f64))
}

impl<T: Elem> KrylovOps<T> for Cpu {
    type Krylov = HostKrylov<Vec<T>, T>;

    fn krylov(&self, n: usize, m: usize) -> Result<HostKrylov<Vec<T>, T>> {
        HostKrylov::new(self, n, m)
    }

    /// The rounded basis in `f64` (`f32`'s numbers, not its memory): the reference of the
    /// GPU's `f32` basis. `f32` work rounds nothing more.
    fn krylov_stored(
        &self,
        n: usize,
        m: usize,
        basis: crate::scalar::Storage,
    ) -> Result<HostKrylov<Vec<T>, T>> {
        let mut k = HostKrylov::new(self, n, m)?;
        k.round = basis == crate::scalar::Storage::F32
            && <T::Real as crate::scalar::Scalar>::EPS < f32::EPSILON as f64;
        Ok(k)
    }

    fn gmres_start(
        &self,
        r: &Vec<T>,
        k: &mut HostKrylov<Vec<T>, T>,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        same_len("gmres_start", r.len(), k.v[0].len());
        let rr = chunked_dot(r, r, &mut sc.partials);
        recur::gmres_start(&mut sc.slots, &mut k.small, k.lay, &mut sc.hist, rr, it);
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let (f, round) = (k.small[k.lay.scale()], k.round);
        map_chunks(&mut k.v[0], |v, rg| {
            for (v, &r) in v.iter_mut().zip(&r[rg]) {
                *v = stored(f * r, round);
            }
        });
        Ok(())
    }

    fn gmres_arnoldi(
        &self,
        k: &mut HostKrylov<Vec<T>, T>,
        j: usize,
        sc: &mut CpuScalars<T>,
        it: usize,
    ) -> Result<()> {
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let lay = k.lay;
        let (basis, w) = super::krylov::split_basis(&mut k.v, lay.m, j);
        // Two passes of classical Gram–Schmidt (CGS2).
        for pass in [lay.c1(), lay.c2()] {
            for (i, v) in basis.iter().enumerate() {
                k.small[pass + i] = chunked_dot(v, w, &mut sc.partials);
            }
            let c = &k.small[pass..pass + j + 1];
            map_chunks(w, |w, rg| {
                for (v, &ci) in basis.iter().zip(c) {
                    for (w, &v) in w.iter_mut().zip(&v[rg.clone()]) {
                        *w -= ci * v;
                    }
                }
            });
        }
        let ww = chunked_dot(w, w, &mut sc.partials);
        recur::gmres_column(&mut sc.slots, &mut k.small, lay, &mut sc.hist, j, ww, it);
        if recur::stopped(&sc.slots) {
            return Ok(());
        }
        let (f, round) = (k.small[lay.scale()], k.round);
        map_chunks(w, |w, _| {
            w.iter_mut().for_each(|w| *w = stored(*w * f, round))
        });
        Ok(())
    }

    fn gmres_combine(
        &self,
        k: &mut HostKrylov<Vec<T>, T>,
        ncols: usize,
        u: &mut Vec<T>,
    ) -> Result<()> {
        let lay = k.lay;
        assert!(
            ncols <= lay.m,
            "{ncols} GMRES columns of a restart length {}",
            lay.m
        );
        same_len("gmres_combine", u.len(), k.v[0].len());
        recur::gmres_solve_y(&mut k.small, lay, ncols);
        let y = &k.small[lay.y()..lay.y() + ncols];
        let basis = &k.v[..ncols];
        map_chunks(u, |u, rg| {
            u.fill(T::zero());
            for (v, &yi) in basis.iter().zip(y) {
                for (u, &v) in u.iter_mut().zip(&v[rg.clone()]) {
                    *u += yi * v;
                }
            }
        });
        Ok(())
    }
}
