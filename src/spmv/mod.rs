//! Sparse matrix–vector products `y ← α·A·x + β·y` on the CPU and the GPU.
//!
//! [`spmv`] is the fast CPU product (multithreaded with rayon). [`cpu`] holds the sequential
//! reference ([`cpu::spmv_seq`]), the parallel kernel itself ([`cpu::spmv_par`]), the paper's
//! segmented-scan formulation run on the CPU ([`cpu::spmv_segscan`], the reference for the GPU
//! kernel), an f64-accumulating reference for error measurement
//! ([`cpu::spmv_f64_reference`]) and the error measure [`cpu::max_rel_err`].
//!
//! # The algorithm of the paper
//!
//! Sengupta, Harris, Zhang and Owens, *Scan Primitives for GPU Computing* (2007), §4.2, multiply a
//! CSR matrix by a vector in four data-parallel steps, each over all entries or all rows, so the
//! work per thread does not depend on how long a row is:
//!
//! 1. `product[k] = value[k] · x[index[k]]` for every entry;
//! 2. a head flag at every `rowPtr[i]`, one segment per row;
//! 3. a *backward* inclusive segmented sum scan of `product`, which leaves each row's sum in the
//!    row's first element;
//! 4. `y[i] += product[rowPtr[i]]`, a gather of the heads.
//!
//! On a CPU with a handful of cores the row loop is both simpler and faster (each row's sum stays
//! in a register instead of making three passes over an `nnz`-long temporary), so [`spmv`] runs
//! rows in parallel and [`cpu::spmv_segscan`] exists to pin down what the GPU kernel computes,
//! empty rows included. The paper reported 215 MFLOP/s (365 SpMV/s) on raefsky2 with a GeForce
//! 8800 GTX, against 522 MFLOP/s for OSKI on a Pentium 4; `spmv-bench` prints that line next to
//! today's figures.
//!
//! # Why chunks are balanced by nonzeros
//!
//! [`spmv`] splits the rows into contiguous chunks of (nearly) equal *cost*, where a chunk's cost
//! is its number of entries plus its number of rows (every row costs a load of `row_ptr` and a
//! store to `y`, even an empty one). Splitting by row count would give one thread all the work on
//! a power-law matrix, where a few rows hold most of the entries; splitting by cost keeps every
//! thread busy. The split is a binary search per chunk boundary on `row_ptr[i] + i`, so it costs
//! `O(chunks · log nrows)` per call and needs no stored plan. There are a few chunks per thread
//! so rayon's work stealing can even out the rest (a row longer than a chunk still stays whole:
//! rows are never split, which keeps the result of a row independent of the thread count).
//!
//! # Bytes moved
//!
//! Bandwidth figures count, as DESIGN.md prescribes, each input read once and each output written
//! once: `nnz·(sizeof(T)+4) + (nrows+1)·4 + (ncols+nrows)·sizeof(T)` bytes per product (values
//! and `u32` column indices, the row pointers, `x` and `y`); see
//! [`CsrMatrix::spmv_bytes`](crate::CsrMatrix::spmv_bytes). With `β ≠ 0`, `y` is also read; that
//! read is not counted, so the figure is a lower bound on the traffic.
//!
//! # Semantics
//!
//! * `β = 0` does not read `y` (it may hold NaN or garbage), as in BLAS.
//! * `α = 0` does not read `A` or `x`: `y ← β·y`.
//! * Mismatched lengths (`x.len() ≠ ncols` or `y.len() ≠ nrows`) are programmer errors and panic
//!   with both sizes in the message.
//! * Each row is summed left to right by one thread in [`cpu::spmv_seq`]; [`spmv`] uses four
//!   interleaved partial sums per row (for instruction-level parallelism), so its results differ
//!   from the sequential ones by rounding only, and they do not depend on the number of threads.
//!
//! # Examples
//!
//! Load a matrix (a Matrix Market file or a generator spec) and multiply:
//!
//! ```
//! use segsparse::{spmv::spmv, CsrMatrix};
//!
//! let a: CsrMatrix<f64> = segsparse::load("matrices/raefsky2.mtx.gz", 0)?;
//! assert_eq!((a.nrows(), a.ncols(), a.nnz()), (3242, 3242, 294_276));
//! let x = vec![1.0; a.ncols()];
//! let mut y = vec![0.0; a.nrows()];
//! spmv(1.0, &a, &x, 0.0, &mut y); // y ← A·x: with x = 1, the row sums
//! let row0: f64 = a.row(0).1.iter().sum();
//! assert!((y[0] - row0).abs() <= 1e-12 * row0.abs());
//!
//! let p: CsrMatrix<f32> = segsparse::load("poisson2d:100", 0)?; // 10^4 rows, 5-point Laplacian
//! let mut z = vec![0.0f32; p.nrows()];
//! spmv(1.0, &p, &vec![1.0; p.ncols()], 0.0, &mut z);
//! assert_eq!(z[101], 0.0); // an interior row sums to 4 − 4·1
//! # Ok::<(), segsparse::Error>(())
//! ```
//!
//! The semantics of `α` and `β`:
//!
//! ```
//! use segsparse::{spmv::spmv, CsrMatrix};
//!
//! // [1 0 2]
//! // [0 0 0]
//! // [3 4 0]
//! let a = CsrMatrix::from_triplets(3, 3, &[(0, 0, 1.0), (0, 2, 2.0), (2, 0, 3.0), (2, 1, 4.0)])?;
//! let x = [1.0, 10.0, 100.0];
//! let mut y = [f64::NAN; 3]; // β = 0: y is not read
//! spmv(1.0, &a, &x, 0.0, &mut y);
//! assert_eq!(y, [201.0, 0.0, 43.0]);
//! spmv(2.0, &a, &x, -1.0, &mut y); // y ← 2·A·x − y
//! assert_eq!(y, [201.0, 0.0, 43.0]);
//! # Ok::<(), segsparse::Error>(())
//! ```

use crate::backend::{Cpu, LinearOperator, MultigridOps};
use crate::Scalar;
use crate::{CsrMatrix, Elem};

pub mod cpu;
pub mod mixed;
pub mod select;

#[cfg(feature = "cuda")]
pub mod gpu;

/// `y ← A·x` with the crate's row-parallel CPU SpMV.
impl<T: Elem> LinearOperator<T, Cpu> for CsrMatrix<T> {
    fn nrows(&self) -> usize {
        CsrMatrix::nrows(self)
    }
    fn ncols(&self) -> usize {
        CsrMatrix::ncols(self)
    }
    fn apply(&self, _: &Cpu, x: &Vec<T>, y: &mut Vec<T>) -> crate::Result<()> {
        crate::spmv::spmv(T::one(), self, x, T::zero(), y);
        Ok(())
    }
}

/// The CPU backend's matrices for the multigrid cycle: host CSR matrices and [`spmv`].
impl<T: Scalar> MultigridOps<T> for Cpu {
    type Matrix = CsrMatrix<T>;
    fn upload_matrix(&self, a: &CsrMatrix<T>) -> crate::Result<CsrMatrix<T>> {
        Ok(a.clone())
    }
    fn download_matrix(&self, a: &CsrMatrix<T>) -> crate::Result<CsrMatrix<T>> {
        Ok(a.clone())
    }
    fn matrix_bytes(&self, a: &CsrMatrix<T>) -> usize {
        a.nnz() * (4 + std::mem::size_of::<T>()) + (a.nrows() + 1) * 4
    }
    fn spmv(
        &self,
        a: &CsrMatrix<T>,
        alpha: T,
        x: &Vec<T>,
        beta: T,
        y: &mut Vec<T>,
    ) -> crate::Result<()> {
        spmv(alpha, a, x, beta, y);
        Ok(())
    }
}

/// `y ← α·A·x + β·y` on the CPU, multithreaded (rayon) over chunks of rows balanced by nonzeros.
///
/// This is the crate's fast CPU product; see the [module docs](self) for the semantics of
/// `α = 0` and `β = 0`. Small matrices run on the calling thread.
///
/// # Panics
/// When `x.len() != a.ncols()` or `y.len() != a.nrows()` (the message names both sizes).
pub fn spmv<T: Elem>(alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    cpu::spmv_par(alpha, a, x, beta, y)
}

/// Which product a call computes: `A·x`, `Aᵀ·x` or `Aᴴ·x` (BLAS's `N`, `T`, `C`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `A·x`.
    NoTrans,
    /// `Aᵀ·x`.
    Trans,
    /// `Aᴴ·x`, the conjugate transpose (`Aᵀ·x` for a real type).
    ConjTrans,
}

/// `y ← α·op(A)·x + β·y` on the CPU: [`spmv`] for `A·x`, [`cpu::spmv_op`] for the transposed
/// products.
///
/// # Panics
/// When the lengths do not fit `op(A)` (the message names both sizes).
pub fn spmv_op<T: Elem>(op: Op, alpha: T, a: &CsrMatrix<T>, x: &[T], beta: T, y: &mut [T]) {
    cpu::spmv_op(op, alpha, a, x, beta, y)
}
