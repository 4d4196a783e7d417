//! `segsparse.batched_solve`: many independent small sparse systems solved at once with the
//! crate's batched solvers (`segsparse::batched`: one kernel on the GPU, rayon over systems on
//! the CPU), per-system status and iterations.

use numpy::Element;
use pyo3::prelude::*;
use segsparse::batched::gpu::GpuBatch;
use segsparse::batched::{
    solve_cpu, BatchCsr, BatchInfo, BatchMethod, BatchParams, BatchPrecond, BatchStatus,
};
use segsparse::gpu::Gpu;
use segsparse::CsrMatrix;

use crate::arrays::{ro, rw, slice, slice_mut, Elem};
use crate::errors::{named, run, Failure, Res};

/// Status names, in the order of `BatchStatus`'s codes.
fn status_name(s: BatchStatus) -> &'static str {
    match s {
        BatchStatus::Converged => "converged",
        BatchStatus::NotConverged => "not_converged",
        BatchStatus::Breakdown => "breakdown",
        BatchStatus::NonFinite => "non_finite",
        BatchStatus::ZeroDiagonal => "zero_diagonal",
    }
}

/// What `batched_solve_host` returns: status names, iterations, true relative residuals, the
/// call's seconds, and where it ran.
type BatchOutcome = (Vec<&'static str>, Vec<u32>, Vec<f64>, f64, &'static str);

/// The systems of a block-diagonal CSR (`indptr`, `indices`, `data` with global column
/// indices) whose diagonal blocks have `sizes` rows, as separate matrices.
fn systems<T: Elem + segsparse::Scalar>(
    sizes: &[usize],
    indptr: &[i64],
    indices: &[i64],
    data: &[T],
) -> Res<Vec<CsrMatrix<T>>> {
    let total: usize = sizes.iter().sum();
    if indptr.len() != total + 1 {
        return Err(Failure::Value(format!(
            "indptr has {} entries, the systems have {total} rows in all (+1 expected)",
            indptr.len()
        )));
    }
    let mut out = Vec::with_capacity(sizes.len());
    let mut r0 = 0usize;
    for (s, &n) in sizes.iter().enumerate() {
        let mut t = Vec::new();
        for i in 0..n {
            let (a, b) = (indptr[r0 + i], indptr[r0 + i + 1]);
            if a < 0 || b < a || b as usize > indices.len() || b as usize > data.len() {
                return Err(Failure::Value(format!(
                    "system {s}: row {i} has a bad indptr range {a}..{b}"
                )));
            }
            for p in a as usize..b as usize {
                let c = indices[p] - r0 as i64;
                if c < 0 || c as usize >= n {
                    return Err(Failure::Value(format!(
                        "system {s}: row {i} has an entry in column {} outside its {n} × {n} \
                         block",
                        indices[p]
                    )));
                }
                t.push((i, c as usize, data[p]));
            }
        }
        out.push(CsrMatrix::from_triplets(n, n, &t)?);
        r0 += n;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn solve_typed<T: Elem + segsparse::Scalar>(
    sizes: &[usize],
    indptr: &[i64],
    indices: &[i64],
    data: &[T],
    b: &[T],
    x: &mut [T],
    params: &BatchParams,
    gpu: bool,
) -> Res<BatchOutcome> {
    let mats = systems(sizes, indptr, indices, data)?;
    let batch = BatchCsr::from_matrices(&mats)?;
    let (info, on): (BatchInfo, &'static str) = if gpu {
        let g = Gpu::shared()?;
        let db = GpuBatch::upload(&g, &batch)?;
        let bd = g.upload(b)?;
        let mut xd = g.zeros::<T>(x.len())?;
        let info = db.solve(&bd, &mut xd, params)?;
        x.copy_from_slice(&g.download(&xd)?);
        (info, "gpu")
    } else {
        (solve_cpu(&batch, b, x, params)?, "cpu")
    };
    Ok((
        info.status.iter().map(|&s| status_name(s)).collect(),
        info.iterations,
        info.relative_residual,
        info.seconds,
        on,
    ))
}

/// The batched methods by name.
const METHODS: &[(&str, BatchMethod)] = &[
    ("cg", BatchMethod::Cg),
    ("bicgstab", BatchMethod::Bicgstab),
    ("gmres", BatchMethod::Gmres),
];

/// The batched preconditioners by name (`M=None` is "none").
const PRECONDS: &[(&str, BatchPrecond)] = &[
    ("none", BatchPrecond::None),
    ("jacobi", BatchPrecond::Jacobi),
    ("ilu0", BatchPrecond::Ilu0),
];

/// Solves the independent systems of a block-diagonal CSR (the blocks have `sizes` rows) with
/// the batched solvers, from a zero initial guess: `b` and `x` are the concatenated right-hand
/// sides and solutions (NumPy, the dtype of `data`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (sizes, indptr, indices, data, b, x, method, precond, rtol, atol, maxiter, restart, gpu))]
pub fn batched_solve_host(
    py: Python<'_>,
    sizes: Vec<usize>,
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    method: &str,
    precond: &str,
    rtol: f64,
    atol: f64,
    maxiter: usize,
    restart: usize,
    gpu: bool,
) -> PyResult<BatchOutcome> {
    let parsed = named("batched method", method, METHODS)
        .and_then(|m| Ok((m, named("batched preconditioner", precond, PRECONDS)?)));
    let (method, precond) = parsed.map_err(|f| f.into_py_err(py))?;
    let params = BatchParams {
        method,
        precond,
        rel_tol: rtol,
        abs_tol: atol,
        max_iters: maxiter,
        restart,
        ..Default::default()
    };
    let ip = ro::<i64>(indptr, "indptr")?;
    let ix = ro::<i64>(indices, "indices")?;
    let (ip, ix) = (slice(&ip, "indptr")?, slice(&ix, "indices")?);
    fn go<T: Elem + segsparse::Scalar + Element>(
        py: Python<'_>,
        sizes: &[usize],
        ip: &[i64],
        ix: &[i64],
        data: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        params: &BatchParams,
        gpu: bool,
    ) -> PyResult<BatchOutcome> {
        let d = ro::<T>(data, "data")?;
        let bb = ro::<T>(b, "b")?;
        let mut xx = rw::<T>(x, "x")?;
        let (d, bs, xs) = (
            slice(&d, "data")?,
            slice(&bb, "b")?,
            slice_mut(&mut xx, "x")?,
        );
        run(py, || solve_typed(sizes, ip, ix, d, bs, xs, params, gpu))
    }
    let is_f32 = data
        .getattr("dtype")
        .and_then(|d| d.str().map(|s| s.to_string()))
        .map(|s| s == "float32")
        .unwrap_or(false);
    if is_f32 {
        go::<f32>(py, &sizes, ip, ix, data, b, x, &params, gpu)
    } else {
        go::<f64>(py, &sizes, ip, ix, data, b, x, &params, gpu)
    }
}
