//! Batched solves of many independent small sparse systems `A_s·x_s = b_s`.
//!
//! One small system cannot fill a GPU; ten thousand can. A [`BatchCsr`] holds many square CSR
//! matrices of one size class (their patterns may differ), concatenated: system `s` owns rows
//! [`BatchCsr::row_range`]`(s)` of the batch, and its right-hand side and solution are the same
//! rows of the concatenated `b` and `x`.
//!
//! | method | for | [`BatchMethod`] |
//! |---|---|---|
//! | conjugate gradient | SPD systems | `Cg` |
//! | BiCGSTAB, right-preconditioned | unsymmetric systems | `Bicgstab` |
//! | GMRES(m), right-preconditioned | any nonsingular system | `Gmres` |
//!
//! each with no preconditioner, Jacobi or ILU(0) ([`BatchPrecond`]), from a zero initial guess.
//!
//! - [`solve_cpu`] is the reference: it solves the systems one by one with the crate's
//!   single-system solvers ([`crate::solvers`]) on the CPU (systems in parallel with rayon).
//! - [`gpu::GpuBatch`] (feature `cuda`) solves the whole batch in **one kernel launch**: one
//!   thread block per system (a resident grid loops over the systems), every iteration with its
//!   dot products and convergence test inside the kernel, the work vectors in shared memory when
//!   they fit. Each system stops on its own; a system that fails does not disturb the others.
//!   With ILU(0) a batched factor kernel factors every system first (one thread per system, on
//!   the system's own pattern) and the solve kernel applies `U⁻¹L⁻¹` inside the block, each
//!   thread substituting its rows as their inputs become ready.
//!
//! Every system gets its own [`BatchStatus`], iteration count and final true relative residual
//! `‖b − A·x‖/‖b‖` in a [`BatchInfo`]. A failed system is a status, not an `Err`: the batch
//! call itself fails only for bad shapes or a backend failure.
//!
//! # Where the two paths differ
//!
//! The single-system solvers confirm convergence with the true residual and may restart from
//! it (see [`crate::solvers`]); the batched kernel stops on the recursive residual and reports
//! the true one. Both stop at `‖r‖ ≤ max(rel_tol·‖b‖, abs_tol)`, so their solutions agree to
//! about the tolerance, and their iteration counts agree to a few iterations. GMRES reports a
//! cycle without progress as [`BatchStatus::Breakdown`] (the single solver's `Stagnation`).
//!
//! # Example
//!
//! ```
//! use segsparse::batched::{solve_cpu, BatchCsr, BatchMethod, BatchParams, BatchStatus};
//! use segsparse::generate;
//! let systems: Vec<_> = (4..8).map(|n| generate::poisson2d::<f64>(n).unwrap()).collect();
//! let batch = BatchCsr::from_matrices(&systems)?;
//! let b = vec![1.0; batch.total_rows()];
//! let mut x = vec![0.0; batch.total_rows()];
//! let params = BatchParams { method: BatchMethod::Cg, ..Default::default() };
//! let info = solve_cpu(&batch, &b, &mut x, &params)?;
//! assert!(info.status.iter().all(|&s| s == BatchStatus::Converged));
//! assert!(info.relative_residual.iter().all(|&r| r <= 1e-8));
//! # Ok::<(), segsparse::Error>(())
//! ```

use std::ops::Range;

use rayon::prelude::*;

use crate::backend::{Cpu, Identity};
use crate::error::{Error, Result};
use crate::precond::{Ilu0, IncompleteParams, Jacobi};
use crate::solvers::{self, SolveError, SolveParams};
use crate::{CsrMatrix, Scalar};

#[cfg(feature = "cuda")]
pub mod gpu;

/// Many square sparse matrices, concatenated in CSR form.
///
/// # Invariants (checked by [`BatchCsr::from_matrices`])
/// - `sys_ptr` has `len + 1` non-decreasing entries from 0 to `total_rows`;
/// - `row_ptr` has `total_rows + 1` non-decreasing entries from 0 to `nnz` (global offsets);
/// - the column indices of system `s` are local, below its row count;
/// - every count fits in `u32`.
#[derive(Clone, Debug)]
pub struct BatchCsr<T> {
    sys_ptr: Vec<u32>,
    row_ptr: Vec<u32>,
    col: Vec<u32>,
    val: Vec<T>,
    max_rows: usize,
}

impl<T: Scalar> BatchCsr<T> {
    /// Concatenates `matrices` into one batch.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a matrix is not square (naming it and its shape), or when
    /// the batch exceeds the 32-bit index range of the kernels.
    pub fn from_matrices(matrices: &[CsrMatrix<T>]) -> Result<Self> {
        let (mut rows, mut nnz) = (0usize, 0usize);
        for (s, a) in matrices.iter().enumerate() {
            if a.nrows() != a.ncols() {
                return Err(Error::InvalidInput(format!(
                    "BatchCsr: system {s} is {}×{}, not square",
                    a.nrows(),
                    a.ncols()
                )));
            }
            rows += a.nrows();
            nnz += a.nnz();
        }
        if rows >= u32::MAX as usize
            || nnz >= u32::MAX as usize
            || matrices.len() >= u32::MAX as usize
        {
            return Err(Error::InvalidInput(format!(
                "BatchCsr: {} systems with {rows} rows and {nnz} entries exceed the 32-bit index \
                 range",
                matrices.len()
            )));
        }
        let mut sys_ptr = Vec::with_capacity(matrices.len() + 1);
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col = Vec::with_capacity(nnz);
        let mut val = Vec::with_capacity(nnz);
        sys_ptr.push(0u32);
        row_ptr.push(0u32);
        let mut max_rows = 0;
        for a in matrices {
            let base = col.len() as u32;
            row_ptr.extend(a.row_ptr()[1..].iter().map(|&p| p + base));
            col.extend_from_slice(a.col_idx());
            val.extend_from_slice(a.values());
            sys_ptr.push(row_ptr.len() as u32 - 1);
            max_rows = max_rows.max(a.nrows());
        }
        Ok(BatchCsr {
            sys_ptr,
            row_ptr,
            col,
            val,
            max_rows,
        })
    }

    /// Number of systems.
    pub fn len(&self) -> usize {
        self.sys_ptr.len() - 1
    }

    /// True when the batch holds no system.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of all systems together (the length of `b` and `x`).
    pub fn total_rows(&self) -> usize {
        self.row_ptr.len() - 1
    }

    /// Entries of all systems together.
    pub fn nnz(&self) -> usize {
        self.col.len()
    }

    /// Rows of the largest system.
    pub fn max_rows(&self) -> usize {
        self.max_rows
    }

    /// The rows of system `s` in the concatenated vectors.
    ///
    /// # Panics
    /// When `s ≥ len()`.
    pub fn row_range(&self, s: usize) -> Range<usize> {
        self.sys_ptr[s] as usize..self.sys_ptr[s + 1] as usize
    }

    /// System `s` as a matrix of its own (a copy).
    ///
    /// # Panics
    /// When `s ≥ len()`.
    pub fn system(&self, s: usize) -> CsrMatrix<T> {
        let r = self.row_range(s);
        let (e0, e1) = (self.row_ptr[r.start] as usize, self.row_ptr[r.end] as usize);
        let rp = self.row_ptr[r.start..=r.end]
            .iter()
            .map(|&p| p - e0 as u32)
            .collect();
        let n = r.len();
        CsrMatrix::try_from_parts(
            n,
            n,
            rp,
            self.col[e0..e1].to_vec(),
            self.val[e0..e1].to_vec(),
        )
        .expect("a BatchCsr system is a valid CSR matrix")
    }

    /// The concatenated arrays: `(sys_ptr, row_ptr, col, val)` (see the invariants).
    pub fn parts(&self) -> (&[u32], &[u32], &[u32], &[T]) {
        (&self.sys_ptr, &self.row_ptr, &self.col, &self.val)
    }

    fn check_vectors(&self, b: usize, x: usize) -> Result<()> {
        let n = self.total_rows();
        if b != n || x != n {
            return Err(Error::InvalidInput(format!(
                "batched solve: b has {b} and x has {x} elements; the batch has {n} rows in all"
            )));
        }
        Ok(())
    }
}

/// The Krylov method of a batched solve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchMethod {
    /// Conjugate gradient (SPD systems).
    #[default]
    Cg,
    /// BiCGSTAB, right-preconditioned.
    Bicgstab,
    /// GMRES restarted every [`BatchParams::restart`] iterations, right-preconditioned.
    Gmres,
}

impl BatchMethod {
    /// `"cg"`, `"bicgstab"`, `"gmres"`.
    pub fn name(self) -> &'static str {
        match self {
            BatchMethod::Cg => "cg",
            BatchMethod::Bicgstab => "bicgstab",
            BatchMethod::Gmres => "gmres",
        }
    }
}

/// The preconditioner of a batched solve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchPrecond {
    /// None.
    None,
    /// Jacobi, `M = diag(A_s)` per system.
    #[default]
    Jacobi,
    /// ILU(0), `M = L_s·U_s` on each system's own pattern, in the natural order with no shift
    /// and no row matching (a missing diagonal entry or a bad pivot is
    /// [`BatchStatus::ZeroDiagonal`]). The GPU batch needs strictly increasing column indices
    /// in every row.
    Ilu0,
}

impl BatchPrecond {
    /// `"none"`, `"jacobi"`, `"ilu0"`.
    pub fn name(self) -> &'static str {
        match self {
            BatchPrecond::None => "none",
            BatchPrecond::Jacobi => "jacobi",
            BatchPrecond::Ilu0 => "ilu0",
        }
    }
}

/// Options of a batched solve (struct-update syntax from `Default`).
#[derive(Clone, Copy, Debug)]
pub struct BatchParams {
    /// The method. Default CG.
    pub method: BatchMethod,
    /// The preconditioner. Default Jacobi.
    pub precond: BatchPrecond,
    /// Stop a system when ‖b − A·x‖ ≤ max(rel_tol·‖b‖, abs_tol). Default 1e-8.
    pub rel_tol: f64,
    /// Absolute tolerance. Default 0.
    pub abs_tol: f64,
    /// Iteration limit per system. Default 1000.
    pub max_iters: usize,
    /// GMRES restart length (1..=64). Default 30.
    pub restart: usize,
    #[doc(hidden)]
    pub non_exhaustive: (),
}

impl Default for BatchParams {
    fn default() -> Self {
        BatchParams {
            method: BatchMethod::Cg,
            precond: BatchPrecond::Jacobi,
            rel_tol: 1e-8,
            abs_tol: 0.0,
            max_iters: 1000,
            restart: 30,
            non_exhaustive: (),
        }
    }
}

impl BatchParams {
    fn check(&self) -> Result<()> {
        if self.method == BatchMethod::Gmres && !(1..=64).contains(&self.restart) {
            return Err(Error::InvalidInput(format!(
                "batched GMRES: restart = {} (must be 1..=64)",
                self.restart
            )));
        }
        if !(self.rel_tol >= 0.0 && self.abs_tol >= 0.0) {
            return Err(Error::InvalidInput(format!(
                "batched solve: tolerances must be non-negative (rel_tol {}, abs_tol {})",
                self.rel_tol, self.abs_tol
            )));
        }
        if self.max_iters > u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "batched solve: max_iters = {} exceeds u32",
                self.max_iters
            )));
        }
        Ok(())
    }
}

/// How one system of a batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum BatchStatus {
    /// Converged to the tolerance.
    Converged = 0,
    /// Reached the iteration limit above the tolerance.
    NotConverged = 1,
    /// The method broke down (CG: `pᵀAp ≤ 0`; BiCGSTAB: ρ, r̂ᵀv or ω vanished; GMRES: a
    /// singular Hessenberg matrix or a restart cycle without progress).
    Breakdown = 2,
    /// A NaN or infinity in the system, its right-hand side or the iteration.
    NonFinite = 3,
    /// Jacobi was asked for and a diagonal entry is zero or not finite, or ILU(0) was asked for
    /// and a diagonal entry is missing or a pivot `u_ii` is not finite or at most 1e-12 times
    /// the row's largest entry.
    ZeroDiagonal = 4,
}

impl BatchStatus {
    /// From the kernels' status code.
    pub fn from_code(c: u32) -> Option<Self> {
        Some(match c {
            0 => BatchStatus::Converged,
            1 => BatchStatus::NotConverged,
            2 => BatchStatus::Breakdown,
            3 => BatchStatus::NonFinite,
            4 => BatchStatus::ZeroDiagonal,
            _ => return None,
        })
    }
}

/// Per-system outcome of a batched solve.
#[derive(Clone, Debug, Default)]
pub struct BatchInfo {
    /// How each system ended.
    pub status: Vec<BatchStatus>,
    /// Iterations per system.
    pub iterations: Vec<u32>,
    /// True relative residual ‖b − A·x‖/‖b‖ of each returned `x` (‖b − A·x‖ when b = 0).
    pub relative_residual: Vec<f64>,
    /// Wall-clock seconds of the call (upload of `b`, the solve, downloads; the device is
    /// synchronised before the clock stops).
    pub seconds: f64,
}

impl BatchInfo {
    /// Systems that converged.
    pub fn converged(&self) -> usize {
        self.status
            .iter()
            .filter(|&&s| s == BatchStatus::Converged)
            .count()
    }
}

/// ‖b − A·x‖/‖b‖ (‖b − A·x‖ when b = 0), in f64.
fn true_residual<T: Scalar>(a: &CsrMatrix<T>, b: &[T], x: &[T]) -> f64 {
    let (mut rr, mut bb) = (0f64, 0f64);
    for (i, &bi) in b.iter().enumerate() {
        let (c, v) = a.row(i);
        let ax: f64 = c
            .iter()
            .zip(v)
            .map(|(&c, &v)| v.as_f64() * x[c as usize].as_f64())
            .sum();
        let d = bi.as_f64() - ax;
        rr += d * d;
        bb += bi.as_f64() * bi.as_f64();
    }
    if bb > 0.0 {
        (rr / bb).sqrt()
    } else {
        rr.sqrt()
    }
}

/// Solves one system with the crate's single-system solver on the CPU; the batch status, the
/// iterations and the true relative residual. `x` holds the solution or last iterate.
///
/// # Errors
/// Only a dimension or backend failure of the solver (a failed solve is a status).
pub fn solve_one<T: Scalar>(
    a: &CsrMatrix<T>,
    b: &[T],
    x: &mut Vec<T>,
    params: &BatchParams,
) -> Result<(BatchStatus, u32, f64)> {
    params.check()?;
    let sp = SolveParams {
        rel_tol: params.rel_tol,
        abs_tol: params.abs_tol,
        max_iters: params.max_iters,
        record_history: false,
        ..Default::default()
    };
    let bv = b.to_vec();
    x.iter_mut().for_each(|v| *v = T::zero());
    let result = match params.precond {
        BatchPrecond::None => run(a, &Identity, &bv, x, params, &sp),
        BatchPrecond::Jacobi => match Jacobi::from_matrix(&Cpu, a) {
            Ok(j) => run(a, &j, &bv, x, params, &sp),
            Err(_) => return Ok((BatchStatus::ZeroDiagonal, 0, true_residual(a, b, x))),
        },
        BatchPrecond::Ilu0 => match Ilu0::new(&Cpu, a, &ILU_PARAMS) {
            Ok(m) => run(a, &m, &bv, x, params, &sp),
            Err(_) => return Ok((BatchStatus::ZeroDiagonal, 0, true_residual(a, b, x))),
        },
    };
    let (status, iters) = match result {
        Ok(info) => (BatchStatus::Converged, info.iterations),
        Err(SolveError::NotConverged { iterations, .. }) => (BatchStatus::NotConverged, iterations),
        Err(SolveError::Breakdown { iteration, .. }) => (BatchStatus::Breakdown, iteration),
        Err(SolveError::Stagnation { iterations, .. }) => (BatchStatus::Breakdown, iterations),
        Err(SolveError::NonFinite { iteration }) => (BatchStatus::NonFinite, iteration),
        Err(e) => return Err(e.into()),
    };
    Ok((status, iters as u32, true_residual(a, b, x)))
}

/// The single-system ILU(0) that the batched one equals: natural order, no shift, no matching,
/// no fill.
pub const ILU_PARAMS: IncompleteParams = IncompleteParams::PLAIN;

fn run<T: Scalar, P: crate::backend::Preconditioner<T, Cpu>>(
    a: &CsrMatrix<T>,
    m: &P,
    b: &Vec<T>,
    x: &mut Vec<T>,
    params: &BatchParams,
    sp: &SolveParams,
) -> std::result::Result<solvers::SolveInfo, SolveError> {
    match params.method {
        BatchMethod::Cg => solvers::pcg(&Cpu, a, m, b, x, sp),
        BatchMethod::Bicgstab => solvers::bicgstab(&Cpu, a, m, b, x, sp),
        BatchMethod::Gmres => solvers::gmres(&Cpu, a, m, b, x, params.restart, sp),
    }
}

/// Solves every system of `batch` one by one with the crate's single-system solvers on the CPU
/// (systems in parallel with rayon). The reference for the GPU batch.
///
/// # Errors
/// [`Error::InvalidInput`] when `b` or `x` does not have `total_rows` elements or the
/// parameters are out of range; a solver's backend failure. A system that fails to converge is a
/// status in the [`BatchInfo`], not an error.
pub fn solve_cpu<T: Scalar>(
    batch: &BatchCsr<T>,
    b: &[T],
    x: &mut [T],
    params: &BatchParams,
) -> Result<BatchInfo> {
    let clock = std::time::Instant::now();
    batch.check_vectors(b.len(), x.len())?;
    params.check()?;
    type Solved<T> = (Vec<T>, BatchStatus, u32, f64);
    let results: Vec<Result<Solved<T>>> = (0..batch.len())
        .into_par_iter()
        .map(|s| {
            let a = batch.system(s);
            let r = batch.row_range(s);
            let mut xs = vec![T::zero(); r.len()];
            let (st, it, res) = solve_one(&a, &b[r], &mut xs, params)?;
            Ok((xs, st, it, res))
        })
        .collect();
    let mut info = BatchInfo::default();
    for (s, res) in results.into_iter().enumerate() {
        let (xs, st, it, rr) = res?;
        x[batch.row_range(s)].copy_from_slice(&xs);
        info.status.push(st);
        info.iterations.push(it);
        info.relative_residual.push(rr);
    }
    info.seconds = clock.elapsed().as_secs_f64();
    Ok(info)
}
