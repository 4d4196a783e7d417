//! Iterative solvers: CG, PCG, BiCGSTAB and restarted GMRES, one body for CPU and GPU, with
//! Jacobi and Chebyshev-polynomial preconditioners.
//!
//! # What is here
//!
//! | solver | for | function |
//! |---|---|---|
//! | conjugate gradient (Hestenes and Stiefel 1952) | symmetric positive definite `A` | [`cg`] |
//! | preconditioned CG (any SPD [`Preconditioner`](crate::backend::Preconditioner)) | SPD `A` | [`pcg`] |
//! | COCG (van der Vorst and Melissen 1990), optionally preconditioned | complex symmetric `A = Aᵀ` | [`cocg`], [`pcocg`] |
//! | BiCGSTAB (van der Vorst 1992), optionally right-preconditioned | unsymmetric `A` | [`bicgstab`] |
//! | GMRES(m) (Saad and Schultz 1986), restarted, right-preconditioned | any nonsingular `A` | [`gmres`] |
//! | MINRES (Paige and Saunders 1975), with an SPD preconditioner | symmetric indefinite `A` (saddle points, shifted operators) | [`minres`] |
//!
//! Every solver takes a real or complex element type ([`crate::Elem`]): for a complex `T` the
//! inner products are `xᴴy` (CG then needs a Hermitian positive definite `A`), ‖r‖ is real, and
//! COCG's bilinear `xᵀy` serves complex symmetric matrices. A complex `T` runs on a backend that
//! holds complex vectors: the CPU backend, [`Cpu`](crate::backend::Cpu), and on the GPU
//! [`GpuOps`](crate::backend::gpu::GpuOps) with the complex GPU matrix
//! (`spmv::gpu::complex::GpuComplexCsr`), the same solver bodies.
//!
//! | preconditioner | needs | type |
//! |---|---|---|
//! | none | — | [`Identity`](crate::backend::Identity) |
//! | Jacobi, `M = diag(A)` (fused into the vector updates) | a nonzero diagonal | `precond::Jacobi` |
//! | Chebyshev polynomial in `D⁻¹A`, bounds from a few Lanczos/Arnoldi steps | a spectrum in the right half-plane | `precond::Chebyshev` |
//!
//! GMRES with the polynomial preconditioner, on the CPU (the same call runs on the GPU with
//! [`gpu::GpuOps`](crate::backend::gpu::GpuOps) and the GPU matrix):
//!
//! ```
//! use segsparse::precond::{Chebyshev, ChebyshevParams};
//! use segsparse::solvers::{gmres, pcg, SolveParams};
//! use segsparse::backend::Cpu;
//! let a = segsparse::generate::poisson2d::<f64>(32).unwrap();
//! let b = vec![1.0; a.nrows()];
//! let poly = Chebyshev::from_matrix(&Cpu, &a, &a, &ChebyshevParams::default()).unwrap();
//! let mut x = vec![0.0; a.nrows()];
//! let info = gmres(&Cpu, &a, &poly, &b, &mut x, 30, &SolveParams::default()).unwrap();
//! assert!(info.relative_residual <= 1e-8);
//! // The polynomial is SPD, so CG may use it too.
//! let info = pcg(&Cpu, &a, &poly, &b, &mut x, &SolveParams::default()).unwrap();
//! assert!(info.relative_residual <= 1e-8);
//! ```
//!
//! Each solver is written **once**, generic over two traits:
//!
//! - the backend: [`VectorOps`](crate::backend::VectorOps), what a vector is (`Vec<T>` on the
//!   CPU, a device buffer on the GPU) and a small block of *scalar slots* that holds ρ, α, β, ω,
//!   ‖r‖² and a status word ([`VectorOps::Scalars`](crate::backend::VectorOps::Scalars): host
//!   values on the CPU, **device memory** on the GPU), and the method's own fused vector steps:
//!   [`CgSteps`](crate::backend::CgSteps) for CG, PCG and COCG,
//!   [`BicgSteps`](crate::backend::BicgSteps) for BiCGSTAB, [`KrylovOps`](crate::backend::KrylovOps)
//!   for GMRES. Implemented by [`Cpu`](crate::backend::Cpu) and (feature `cuda`)
//!   [`gpu::GpuOps`](crate::backend::gpu::GpuOps).
//! - [`LinearOperator`](crate::backend::LinearOperator): `y ← A·x` with the backend's vectors. It is implemented for
//!   [`CsrMatrix`](crate::CsrMatrix) on the CPU and for the GPU SpMV's matrix on the GPU, and you
//!   can implement it for your own matrix-free operator.
//!
//! Options are a plain [`SolveParams`] struct (fill it with struct-update syntax from
//! `Default`), success is a [`SolveInfo`], failure a [`SolveError`] — the shape of faer's
//! `CgParams`/`CgInfo`/`CgError`.
//!
//! ```
//! use segsparse::solvers::{cg, SolveParams};
//! use segsparse::backend::Cpu;
//! use segsparse::CsrMatrix;
//! // 1-D Laplacian, SPD.
//! let n = 50;
//! let mut t = Vec::new();
//! for i in 0..n {
//!     t.push((i, i, 2.0));
//!     if i > 0 { t.push((i, i - 1, -1.0)); }
//!     if i + 1 < n { t.push((i, i + 1, -1.0)); }
//! }
//! let a = CsrMatrix::<f64>::from_triplets(n, n, &t).unwrap();
//! let b = vec![1.0; n];
//! let mut x = vec![0.0; n];
//! let info = cg(&Cpu, &a, &b, &mut x, &SolveParams { rel_tol: 1e-10, ..Default::default() }).unwrap();
//! assert!(info.relative_residual <= 1e-10);
//! ```
//!
//! # Why the backend trait has fused steps instead of `axpy` and `dot`
//!
//! A textbook GPU CG calls `dot`, copies the result to the host, divides, and calls `axpy` with
//! the quotient: one host round-trip per dot product, which on a 1M-row problem costs as much as
//! the arithmetic (CuPy's `cg` runs at 330–350 µs per iteration on Poisson 2D 1000² for that
//! reason). Here every scalar stays where the vectors are. A reduction kernel writes its
//! per-block partial sums, and the last block to finish (a "last block done" counter, summing the
//! partials in a fixed order so the result is deterministic) computes the derived scalars —
//! α = ρ/pᵀAp, β = ρ'/ρ, ω = tᵀs/tᵀt — in place, checks for breakdown, convergence and NaN, and
//! writes a status word. The next kernel reads α or β from that slot. Each kernel returns at once
//! when the status word is set, so the host need not watch every iteration: it reads the slots
//! only every [`SolveParams::check_every`] iterations (default 16 on the GPU, 1 on the CPU,
//! divided by `1 +` the preconditioner's
//! [`cost_in_products`](crate::backend::Preconditioner::cost_in_products): every iteration
//! under AMG, whose kernels do not stop at the status word) and the iteration at which the
//! status was set is recorded exactly. A solve allocates its whole
//! workspace before the first iteration and nothing inside the loop.
//!
//! # Recorded blocks (CUDA graphs)
//!
//! Since no step waits for the host, the iterations between two status checks (a *block*:
//! [`SolveParams::check_every`] iterations, fewer where the iteration limit or a GMRES cycle end
//! comes first) are a fixed sequence of kernel launches. With [`SolveParams::graphs`] (the
//! default) the GPU backend records a block with CUDA stream capture and replays it as one graph
//! launch, removing the launch cost of each kernel (about 2–3 µs of host time apiece, which on
//! systems of a few thousand rows is most of an iteration). The hooks are
//! [`VectorOps::begin_block`](crate::backend::VectorOps::begin_block) and [`VectorOps::end_block`](crate::backend::VectorOps::end_block), no-ops for the CPU and the
//! distributed backends, so every method keeps one body:
//!
//! - **Iteration numbers.** A recorded kernel keeps the arguments it was captured with, so the
//!   kernels number their iterations relative to a device slot ([`Slot::IterBase`](crate::backend::Slot::IterBase)) that the
//!   host sets before a block and the graph's last node advances by the block length. Without
//!   graphs the slot stays 0 and the kernels get absolute iterations, as before.
//! - **When.** Each solve records its own graphs (they hold the solve's buffers), keyed by the
//!   method's block key (0 for CG and BiCGSTAB) and the block length. GMRES's blocks end at
//!   cycle ends (where the host decides between restart and stop); their key is the starting
//!   column, and a replay advances the column counter (the method's `replayed` hook). A block
//!   seen once runs
//!   directly, the second occurrence is recorded and run, later ones are replayed: a one-off
//!   block (the tail before the iteration limit) is never instantiated. A new problem is a new
//!   solve and records anew.
//! - **What is recorded.** Everything a step issues: the operator, a preconditioner's
//!   [`Preconditioner::apply`](crate::backend::Preconditioner::apply) (which must only queue device work: Jacobi, Chebyshev and any
//!   preconditioner that follows that rule are captured with the iteration), the fused steps.
//!   A step that synchronises cannot be recorded: the solve then fails with a CUDA error that
//!   says so, and `graphs: false` runs it uncaptured.
//! - **Host state.** A replayed block does not call the steps: a method's host-side state must
//!   not change per step (CG, BiCGSTAB) or be advanced by `replayed` (GMRES's column), and an
//!   operator or preconditioner is applied by the graph without its `apply` being called.
//! - **Early exit.** As without graphs: the kernel that sets the status records the iteration,
//!   every later kernel of the block returns at once (except `x`'s update in the iteration that
//!   converged), and the host sees the status at the block's end. A replayed block therefore
//!   runs to its end as no-ops; the iteration count, residual history, `x` and the reported
//!   error (breakdown, NaN) are those of the uncaptured path, bit for bit (the same kernels,
//!   grids and reduction orders run in both).
//!
//! # Fused steps
//!
//! Some steps stand for a fixed sequence of the others:
//! [`CgSteps::cg_tail`](crate::backend::CgSteps::cg_tail) (CG's `cg_alpha`, `cg_update_r`, `cg_update_xp`),
//! [`BicgSteps::bicg_alpha_s`](crate::backend::BicgSteps::bicg_alpha_s) and [`BicgSteps::bicg_update_p`](crate::backend::BicgSteps::bicg_update_p) (BiCGSTAB's `bicg_alpha` +
//! `bicg_s` and `bicg_omega` + `bicg_update` + the next iteration's `bicg_p`). Their default
//! implementations issue that sequence, so the CPU and the distributed backends are unchanged;
//! the GPU backend runs each as one kernel on small systems (see "Small systems" in
//! [`gpu`](crate::backend::gpu)), where an iteration's cost is its number of kernel launches. BiCGSTAB uses the
//! fused order (its `p` update moved to the end of the previous iteration) only where the
//! backend asks for it ([`BicgSteps::bicg_fused`](crate::backend::BicgSteps::bicg_fused)). Either way the arithmetic is the same:
//! iterations, residuals and errors do not depend on the fusion.
//!
//! The CPU backend runs the same steps with host scalars (the same recurrences, written once in
//! Rust in [`recur`](crate::backend::recur) and mirrored in `kernels/solvers/recur.cuh`), and its reductions also
//! sum fixed-size chunks in a fixed order, so CPU results are reproducible run to run.
//!
//! # Timing
//!
//! Every solve path of the crate (CPU, one GPU, several GPUs, `sparse-solve`'s report, the
//! Python `info`) splits its time the same way:
//!
//! - **solve** ([`SolveInfo::solve_seconds`]): the solver call, entry to return — the
//!   workspace it allocates, the iterations and status checks, the true-residual confirmation,
//!   the history read; the device is synchronised when the clock stops. On several ranks, the
//!   longest rank.
//! - **setup** ([`SolveInfo::setup_seconds`]): what the solve needed before that call and a
//!   further right-hand side would reuse — partitioning, communicators, uploading the matrix and
//!   the vectors, the preconditioner's setup. The solver functions return 0 here; whoever did the
//!   setup fills it in.
//! - **per iteration** ([`SolveInfo::seconds_per_iteration`], [`per_iteration`]): solve /
//!   iterations.
//!
//! Neither includes reading or generating the matrix, downloading the solution, or measurements
//! that are not part of solving (cost probes, product timings). A failed solve's
//! [`SolveError`] carries no timing: time the solver call from outside, which is the same
//! interval.
//!
//! # Departures from the textbook
//!
//! - **Deferred `x` update in CG.** Hestenes–Stiefel update `x ← x + αp` and `r ← r − αAp` in the
//!   same step. We update `r` first (fused with ‖r‖² and, for Jacobi, with `z = D⁻¹r` and `rᵀz`)
//!   and `x` together with the new search direction (`x ← x + αp; p ← z + βp`, one pass that
//!   reads `p` once). Same arithmetic, one vector read less per iteration.
//! - **Convergence is tested on the recursive residual, then confirmed on the true one.** When
//!   the recursively updated ‖r‖ falls below the threshold, the solver computes `b − A·x`
//!   explicitly. If that true residual is not below the threshold too (rounding drift, typical
//!   of f32 or ill-conditioned matrices), the iteration is *restarted* from the true residual
//!   (at most [`MAX_RESTARTS`] times), like sprs' "hard restart"; the reported
//!   [`SolveInfo::relative_residual`] is always the true one.
//! - **Breakdown.** CG stops with [`SolveError::Breakdown`] when pᵀAp ≤ 0 (the matrix is not
//!   positive definite along `p`); BiCGSTAB when r̂ᵀv = 0 or when ω = 0 without convergence.
//!   When BiCGSTAB's ρ = r̂ᵀr vanishes relative to ‖r̂‖‖r‖ (|ρ| ≤ ε‖r̂‖‖r‖; it happens on
//!   cage8 with b = 1 at iteration 3, where 1ᵀr reaches 0 while r does not) the solve restarts
//!   from the true residual with a new shadow residual r̂ = r (at most [`MAX_RESTARTS`] restarts
//!   in all, like sprs' soft restart) before reporting the breakdown. The iterate `x` is left at
//!   the last good iterate for the caller to inspect.
//! - **BiCGSTAB's early exit on ‖s‖** (van der Vorst's line "if s is small enough, x = x + αp̂,
//!   stop") is handled without a host check: when tᵀt = 0 we set ω = 0, so the update reduces to
//!   `x ← x + αp̂`, `r ← s`, and the convergence test of the same kernel accepts it.
//!
//! # Values stored narrower than the vectors
//!
//! An operator may apply values rounded to a narrower type than its vectors (a matrix stored in
//! `f32` under `f64` vectors: `spmv::mixed::MixedCsr`, `spmv::gpu::mixed::GpuMixedCsr`; it says
//! so with [`LinearOperator::is_narrowed`]). The solvers then take every true residual
//! `b − A·x` with the exact values ([`LinearOperator::apply_exact`]): the convergence
//! confirmation, GMRES's residual at each restart (GMRES with iterative refinement) and, in CG,
//! **reliable updates**: whenever the recursive residual has fallen tenfold since the last true
//! one (and at least 32 iterations have passed), the driver replaces it by the true residual and
//! CG continues with the same search direction, corrected by the change of the residual
//! (Sleijpen and van der Vorst 1996; van der Vorst and Ye 2000), where a restart would lose the
//! Krylov space built so far. The answer is therefore accurate to the
//! tolerance with respect to the exact values. The rounded operator costs iterations where the
//! rounding is large against the conditioning (`2⁻²⁴·κ(A)` of 10⁻³ and above: 7–13 % more
//! with CG on the matrices measured), none where the `f32` values are exact.
//! When the true residual stops following the recursive one (the rounding is too coarse for the
//! matrix), CG stops as not converged with the true residual; [`storage::solve_stored`] then
//! solves again with the exact values and says why.
//!
//! The same reliable updates carry a CG whose **vectors** are `f32` too: [`narrow::pcg_f32`]
//! runs this CG body on the `f32` backend (the matrix stored in `f32`, `p`, `r`, `A·p` and the
//! increment of the iterate in `f32`) and takes each true residual from an `f64` iterate with
//! the exact values; [`storage::pcg_stored_f32`] adds the fallback to `f64`. The `f32`
//! recurrence converges more slowly than the `f64` one as the problem grows (the rounding of `r`
//! each iteration delays CG; see `benches/results/mixed.md`).
//!
//! # References
//!
//! - M. R. Hestenes and E. Stiefel, *Methods of conjugate gradients for solving linear systems*,
//!   J. Res. Nat. Bur. Standards 49(6), 1952.
//! - H. A. van der Vorst, *Bi-CGSTAB: a fast and smoothly converging variant of Bi-CG for the
//!   solution of nonsymmetric linear systems*, SIAM J. Sci. Stat. Comput. 13(2), 1992.
//! - R. Barrett et al., *Templates for the Solution of Linear Systems*, SIAM 1994 (the
//!   preconditioned forms used here).
//! - G. L. G. Sleijpen and H. A. van der Vorst, *Reliable updated residuals in hybrid Bi-CG
//!   methods*, Computing 56, 1996; H. A. van der Vorst and Q. Ye, *Residual replacement
//!   strategies for Krylov subspace iterative methods for the convergence of true residuals*,
//!   SIAM J. Sci. Comput. 22(3), 2000.

mod bicgstab;
mod cg;
mod drive;
mod gmres;
mod minres;
pub mod multi;
pub mod narrow;
pub mod storage;
mod types;

pub use bicgstab::bicgstab;
pub use cg::{cg, cocg, pcg, pcocg};
pub use gmres::{gmres, DEFAULT_RESTART};
pub use minres::minres;
pub use types::{
    per_iteration, InitialGuess, Observer, Progress, SolveError, SolveInfo, SolveParams, Watch,
    MAX_RESTARTS,
};

pub(crate) use drive::{check_problem, drive, preflight, Dyn, Method, PrecondKind, Step};
