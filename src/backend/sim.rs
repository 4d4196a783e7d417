//! Simulated ranks on the CPU: one thread per rank, collectives through shared memory, and the
//! solver backend of a rank ([`SimOps`]).
//!
//! [`SimOps`] is a [`VectorOps`] whose reductions are local sums followed by
//! [`SimComm::all_reduce`] (summed in rank order, so the result is the same on every rank and
//! from run to run), then the scalar recurrences of [`recur`]; the vector-only steps are the
//! [`Cpu`] backend's own. The distributed operator is `crate::dist::sim::SimCsr`.

use std::any::Any;
use std::sync::{Arc, Barrier, Mutex};

use super::recur::{self, Slot, NSLOTS};
use super::{Cpu, CpuScalars, Fuse, VectorOps};
use crate::error::Result;
use crate::scalar::Scalar;

struct Shared {
    barrier: Barrier,
    boxes: Mutex<Vec<Option<Arc<dyn Any + Send + Sync>>>>,
}

/// One simulated rank's handle on the shared-memory communicator (clone it freely within the
/// rank's thread). Every collective must be called by every rank in the same order.
#[derive(Clone)]
pub struct SimComm {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SimComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimComm(rank {} of {})", self.rank, self.size)
    }
}

impl SimComm {
    /// The communicators of `size` ranks (hand one to each rank's thread).
    ///
    /// # Panics
    /// When `size == 0`.
    pub fn create(size: usize) -> Vec<SimComm> {
        assert!(size > 0, "a communicator needs at least one rank");
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            boxes: Mutex::new(vec![None; size]),
        });
        (0..size)
            .map(|rank| SimComm {
                rank,
                size,
                shared: shared.clone(),
            })
            .collect()
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Every rank deposits `mine`; returns every rank's deposit in rank order.
    fn all_gather<V: Any + Send + Sync>(&self, mine: V) -> Vec<Arc<V>> {
        let lock = || self.shared.boxes.lock().expect("a simulated rank panicked");
        lock()[self.rank] = Some(Arc::new(mine));
        self.shared.barrier.wait();
        let all = lock()
            .iter()
            .map(|b| {
                b.clone()
                    .expect("every rank deposited")
                    .downcast::<V>()
                    .expect("every rank calls the same collective")
            })
            .collect();
        // Nobody deposits the next collective's value before everyone has read this one.
        self.shared.barrier.wait();
        all
    }

    /// Sums `v` elementwise over the ranks, in rank order (identical on every rank).
    pub fn all_reduce<T: Scalar>(&self, v: &mut [T]) {
        let all = self.all_gather(v.to_vec());
        for (k, out) in v.iter_mut().enumerate() {
            *out = all.iter().fold(T::zero(), |s, r| s + r[k]);
        }
    }

    /// All-to-all: `send[p]` goes to rank `p`; returns what each rank sent to this one.
    pub fn all_to_all<V: Clone + Send + Sync + 'static>(&self, send: Vec<Vec<V>>) -> Vec<Vec<V>> {
        assert_eq!(send.len(), self.size, "all_to_all: one list per rank");
        let all = self.all_gather(send);
        all.iter().map(|s| s[self.rank].clone()).collect()
    }
}

/// Runs `f` on `nranks` simulated ranks (one thread each) and returns their results in rank
/// order.
///
/// # Panics
/// When a rank panics (the panic is propagated).
pub fn run<R: Send>(nranks: usize, f: impl Fn(SimComm) -> R + Sync) -> Vec<R> {
    let comms = SimComm::create(nranks);
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let f = &f;
                s.spawn(move || f(c))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The simulated ranks' solver backend: `Vec<T>` vectors holding the owned entries, reductions
/// all-reduced over the ranks.
#[derive(Clone, Debug)]
pub struct SimOps {
    comm: SimComm,
}

impl SimOps {
    /// The backend of one rank.
    pub fn new(comm: SimComm) -> Self {
        SimOps { comm }
    }
    /// The rank's communicator.
    pub fn comm(&self) -> &SimComm {
        &self.comm
    }
}

/// Slots (kept in the [`Cpu`] backend's scalars, so its vector steps read them) and the
/// residual history.
#[derive(Clone, Debug)]
pub struct SimScalars<T> {
    cpu: CpuScalars<T>,
    hist: Vec<T>,
}

fn local_dot<T: Scalar>(x: &[T], y: &[T]) -> T {
    assert_eq!(
        x.len(),
        y.len(),
        "dot: vectors of lengths {} and {}",
        x.len(),
        y.len()
    );
    x.iter().zip(y).fold(T::zero(), |s, (&a, &b)| s + a * b)
}

impl SimOps {
    /// All-reduces `red`, then applies `rec` to the slots (the common tail of every reduction
    /// step).
    fn finish<T: Scalar>(
        &self,
        sc: &mut SimScalars<T>,
        mut red: [T; 2],
        rec: impl FnOnce(&mut [T; NSLOTS], &mut [T], [T; 2]),
    ) -> Result<()> {
        self.comm.all_reduce(&mut red);
        let mut s = Cpu.read_slots(&sc.cpu)?;
        rec(&mut s, &mut sc.hist, red);
        Cpu.write_slots(&mut sc.cpu, &ALL_SLOTS.map(|k| (k, s[k as usize])))
    }

    fn stopped<T: Scalar>(sc: &SimScalars<T>) -> Result<bool> {
        Ok(recur::stopped(&Cpu.read_slots(&sc.cpu)?))
    }

    fn slot<T: Scalar>(sc: &SimScalars<T>, k: Slot) -> Result<T> {
        Ok(Cpu.read_slots(&sc.cpu)?[k as usize])
    }
}

/// Every slot, to copy a whole slot array into the [`Cpu`] scalars.
const ALL_SLOTS: [Slot; 13] = [
    Slot::Status,
    Slot::StatusIter,
    Slot::Thresh,
    Slot::Rho,
    Slot::Rr,
    Slot::Alpha,
    Slot::Beta,
    Slot::Omega,
    Slot::Pq,
    Slot::Ts,
    Slot::Tt,
    Slot::Rr0,
    Slot::Dot,
];

impl<T: Scalar> VectorOps<T> for SimOps {
    type Vector = Vec<T>;
    type Scalars = SimScalars<T>;

    fn name(&self) -> &'static str {
        "sim"
    }
    fn default_check_every(&self) -> usize {
        1
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
        Cpu.copy(src, dst)
    }
    fn set_zero(&self, v: &mut Vec<T>) -> Result<()> {
        VectorOps::<T>::set_zero(&Cpu, v)
    }
    fn residual(&self, b: &Vec<T>, ax: &Vec<T>, r: &mut Vec<T>) -> Result<()> {
        Cpu.residual(b, ax, r)
    }
    fn scale(&self, d: &Vec<T>, r: &Vec<T>, z: &mut Vec<T>) -> Result<()> {
        Cpu.scale(d, r, z)
    }
    fn axpy(&self, alpha: T, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        Cpu.axpy(alpha, x, y)
    }
    #[allow(clippy::too_many_arguments)]
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
        Cpu.poly_step(t, inv_diag, res, d, z, first, c1, c2)
    }
    fn dot(&self, x: &Vec<T>, y: &Vec<T>, sc: &mut SimScalars<T>) -> Result<f64> {
        let mut d = [local_dot(x, y)];
        self.comm.all_reduce(&mut d);
        Cpu.write_slots(&mut sc.cpu, &[(Slot::Dot, d[0])])?;
        Ok(d[0].as_f64())
    }

    fn scalars(&self, n: usize, max_iters: usize) -> Result<SimScalars<T>> {
        Ok(SimScalars {
            cpu: Cpu.scalars(n, 0)?,
            hist: vec![T::zero(); max_iters + 1],
        })
    }
    fn write_slots(&self, sc: &mut SimScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        Cpu.write_slots(&mut sc.cpu, values)
    }
    fn read_slots(&self, sc: &SimScalars<T>) -> Result<[T; NSLOTS]> {
        Cpu.read_slots(&sc.cpu)
    }
    fn read_history(&self, sc: &SimScalars<T>, len: usize) -> Result<Vec<T>> {
        Ok(sc.hist[..len.min(sc.hist.len())].to_vec())
    }

    fn cg_start(
        &self,
        r: &Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut SimScalars<T>,
        it: usize,
    ) -> Result<()> {
        let rr = local_dot(r, r);
        let rz = match fuse {
            Fuse::Identity => rr,
            Fuse::Jacobi { inv_diag, z } => {
                Cpu.scale(inv_diag, r, z)?;
                local_dot(r, z)
            }
            Fuse::Separate(z) => local_dot(
                r,
                z.expect("cg_start with a separate preconditioner needs z"),
            ),
        };
        self.finish(sc, [rr, rz], |s, h, [rr, rz]| {
            recur::start(s, h, rr, rz, it)
        })
    }

    fn cg_alpha(&self, p: &Vec<T>, q: &Vec<T>, sc: &mut SimScalars<T>, it: usize) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        let pq = local_dot(p, q);
        self.finish(sc, [pq, T::zero()], |s, _, [pq, _]| {
            recur::cg_alpha(s, pq, it)
        })
    }

    fn cg_update_r(
        &self,
        q: &Vec<T>,
        r: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut SimScalars<T>,
        it: usize,
    ) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        assert_eq!(q.len(), r.len(), "cg_update_r: q and r lengths");
        let alpha = Self::slot(sc, Slot::Alpha)?;
        for (r, &q) in r.iter_mut().zip(q) {
            *r -= alpha * q;
        }
        let rr = local_dot(r, r);
        let (rz, with_rz) = match fuse {
            Fuse::Identity => (rr, true),
            Fuse::Jacobi { inv_diag, z } => {
                Cpu.scale(inv_diag, r, z)?;
                (local_dot(r, z), true)
            }
            Fuse::Separate(_) => (T::zero(), false),
        };
        self.finish(sc, [rr, rz], |s, h, [rr, rz]| {
            recur::cg_update_r(s, h, rr, with_rz.then_some(rz), it)
        })
    }

    fn cg_rho(&self, r: &Vec<T>, z: &Vec<T>, sc: &mut SimScalars<T>, it: usize) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        let rz = local_dot(r, z);
        self.finish(sc, [rz, T::zero()], |s, _, [rz, _]| {
            recur::cg_rho(s, rz, it)
        })
    }

    fn cg_update_xp(
        &self,
        x: &mut Vec<T>,
        p: &mut Vec<T>,
        z: &Vec<T>,
        sc: &mut SimScalars<T>,
        it: usize,
    ) -> Result<()> {
        Cpu.cg_update_xp(x, p, z, &mut sc.cpu, it)
    }

    fn bicg_p(
        &self,
        r: &Vec<T>,
        v: &Vec<T>,
        p: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut SimScalars<T>,
    ) -> Result<()> {
        Cpu.bicg_p(r, v, p, fuse, &mut sc.cpu)
    }

    fn bicg_alpha(
        &self,
        rhat: &Vec<T>,
        v: &Vec<T>,
        sc: &mut SimScalars<T>,
        it: usize,
    ) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        let rv = local_dot(rhat, v);
        self.finish(sc, [rv, T::zero()], |s, _, [rv, _]| {
            recur::bicg_alpha(s, rv, it)
        })
    }

    fn bicg_s(
        &self,
        r: &Vec<T>,
        v: &Vec<T>,
        s: &mut Vec<T>,
        fuse: Fuse<'_, Vec<T>>,
        sc: &mut SimScalars<T>,
    ) -> Result<()> {
        Cpu.bicg_s(r, v, s, fuse, &mut sc.cpu)
    }

    fn bicg_omega(&self, t: &Vec<T>, s: &Vec<T>, sc: &mut SimScalars<T>, it: usize) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        let (ts, tt) = (local_dot(t, s), local_dot(t, t));
        self.finish(sc, [ts, tt], |s, _, [ts, tt]| {
            recur::bicg_omega(s, ts, tt, it)
        })
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
        sc: &mut SimScalars<T>,
        it: usize,
    ) -> Result<()> {
        if Self::stopped(sc)? {
            return Ok(());
        }
        let (alpha, omega) = (Self::slot(sc, Slot::Alpha)?, Self::slot(sc, Slot::Omega)?);
        for (i, (x, r)) in x.iter_mut().zip(r.iter_mut()).enumerate() {
            *x += alpha * phat[i] + omega * shat[i];
            *r = s[i] - omega * t[i];
        }
        let (rr, rho) = (local_dot(r, r), local_dot(rhat, r));
        self.finish(sc, [rr, rho], |s, h, [rr, rho]| {
            recur::bicg_update(s, h, rr, rho, it)
        })
    }
}
