//! Simulated ranks on the CPU: one thread per rank, collectives through shared memory, and the
//! solver backend of a rank ([`SimOps`]).
//!
//! [`SimOps`] implements only the core of [`VectorOps`]: the [`Cpu`] backend's vector
//! operations, and a `dot` that is a local sum followed by [`SimComm::all_reduce`] (summed in
//! rank order, so the result is the same on every rank and from run to run). Every solver step
//! is the trait's default built from that core. The distributed operator is `dist::sim::SimCsr`.

use std::any::Any;
use std::sync::{Arc, Barrier, Mutex};

use super::recur::{Slot, NSLOTS};
use super::{
    BicgSteps, BlockKrylovOps, BlockOps, CgSteps, ChebyshevSteps, Cpu, CpuScalars, HostKrylov,
    KrylovOps, VectorOps,
};
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

/// A rank's slots, residual history and reduction workspace: the [`Cpu`] backend's.
pub type SimScalars<T> = CpuScalars<T>;

/// This rank's part of `xᵀy`, summed sequentially.
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

/// The core of [`VectorOps`]: the [`Cpu`] backend's, with `dot` all-reduced over the ranks. Every
/// solver step is the trait's default, built from this core.
impl<T: Scalar> VectorOps<T> for SimOps {
    type Vector = Vec<T>;
    type Scalars = SimScalars<T>;

    fn name(&self) -> &'static str {
        "sim"
    }
    fn len(&self, v: &Vec<T>) -> usize {
        v.len()
    }
    fn zeros(&self, n: usize) -> Result<Vec<T>> {
        Cpu.zeros(n)
    }
    fn upload(&self, host: &[T]) -> Result<Vec<T>> {
        Cpu.upload(host)
    }
    fn download(&self, v: &Vec<T>) -> Result<Vec<T>> {
        Cpu.download(v)
    }
    fn copy(&self, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        Cpu.copy(src, dst)
    }
    fn fill(&self, v: &mut Vec<T>, a: T) -> Result<()> {
        Cpu.fill(v, a)
    }
    fn scal(&self, a: T, v: &mut Vec<T>) -> Result<()> {
        Cpu.scal(a, v)
    }
    fn axpby(&self, a: T, x: &Vec<T>, b: T, y: &mut Vec<T>) -> Result<()> {
        Cpu.axpby(a, x, b, y)
    }
    fn axpbypcz(&self, a: T, x: &Vec<T>, b: T, y: &Vec<T>, c: T, z: &mut Vec<T>) -> Result<()> {
        Cpu.axpbypcz(a, x, b, y, c, z)
    }
    fn vmul(&self, a: T, x: &Vec<T>, y: &Vec<T>, b: T, z: &mut Vec<T>) -> Result<()> {
        Cpu.vmul(a, x, y, b, z)
    }
    fn dot(&self, x: &Vec<T>, y: &Vec<T>, _: &mut SimScalars<T>) -> Result<T> {
        let mut d = [local_dot(x, y)];
        self.comm.all_reduce(&mut d);
        Ok(d[0])
    }
    fn scalars(&self, n: usize, max_iters: usize) -> Result<SimScalars<T>> {
        Cpu.scalars(n, max_iters)
    }
    fn write_slots(&self, sc: &mut SimScalars<T>, values: &[(Slot, T)]) -> Result<()> {
        Cpu.write_slots(sc, values)
    }
    fn read_slots(&self, sc: &SimScalars<T>) -> Result<[T; NSLOTS]> {
        Cpu.read_slots(sc)
    }
    fn read_history(&self, sc: &SimScalars<T>, len: usize) -> Result<Vec<T>> {
        Cpu.read_history(sc, len)
    }
    fn update_slots(
        &self,
        sc: &mut SimScalars<T>,
        f: impl FnOnce(&mut [T; NSLOTS], &mut [T]),
    ) -> Result<()> {
        Cpu.update_slots(sc, f)
    }
}

/// GMRES on the simulated ranks: the default steps on a host workspace.
/// The solvers' steps from their default bodies (the core above, all-reduced).
impl<T: Scalar> CgSteps<T> for SimOps {}
impl<T: Scalar> BicgSteps<T> for SimOps {}
impl<T: Scalar> ChebyshevSteps<T> for SimOps {}
impl<T: Scalar> BlockOps<T> for SimOps {}
impl<T: Scalar> BlockKrylovOps<T> for SimOps {}

impl<T: Scalar> KrylovOps<T> for SimOps {
    type Krylov = HostKrylov<Vec<T>, T>;
    fn krylov(&self, n: usize, m: usize) -> Result<Self::Krylov> {
        HostKrylov::new(self, n, m)
    }
}
