//! Scan, segmented scan, sort and batched tridiagonal solves on arrays: NumPy arrays on the CPU,
//! device arrays (CuPy) on the GPU, zero-copy.

use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use segsparse::gpu::KernelType;
use segsparse::primitives::sort::RadixKey;
use segsparse::primitives::{
    cpu as pcpu, gpu as pgpu, Direction, ScanAlgorithm, ScanElem, ScanKind, ScanOp, ScanSpec,
};
use segsparse::tridiag::{self, gpu::GpuTridiag, TridiagAlgorithm, Tridiagonal};
use segsparse::Scalar;

use crate::arrays::{ro, rw, slice, slice_mut};
use crate::device::{device, Borrowed};
use crate::errors::{check_len, run, Failure, Res};

fn spec(op: &str, inclusive: bool, reverse: bool) -> PyResult<ScanSpec> {
    let op = match op {
        "plus" | "add" | "sum" => ScanOp::Plus,
        "max" => ScanOp::Max,
        "min" => ScanOp::Min,
        o => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "scan operator must be 'plus', 'max' or 'min', not {o:?}"
            )))
        }
    };
    Ok(ScanSpec::new(
        op,
        if inclusive {
            ScanKind::Inclusive
        } else {
            ScanKind::Exclusive
        },
        if reverse {
            Direction::Backward
        } else {
            Direction::Forward
        },
    ))
}

/// Calls `$f::<T>(...)` with the Rust type `T` of the NumPy dtype named `$dtype`, among the
/// listed ones; any other dtype is a `TypeError` saying what is accepted.
macro_rules! by_dtype {
    ($dtype:expr, $f:ident $args:tt, { $($name:literal => $t:ty),+ }, $what:literal) => {
        match $dtype {
            $($name => $f::<$t> $args,)+
            d => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                concat!($what, " ({}), not {}"),
                [$($name),+].join(", "),
                d
            ))),
        }
    };
}

/// [`by_dtype!`] over the scan element types.
macro_rules! by_scan_dtype {
    ($dtype:expr, $f:ident $args:tt) => {
        by_dtype!($dtype, $f $args,
            { "float32" => f32, "float64" => f64, "int32" => i32, "uint32" => u32 },
            "scans take arrays of these dtypes")
    };
}

fn dtype_of(a: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(a.getattr("dtype")?.str()?.to_string())
}

/// `out ← scan(x)` on the CPU (multithreaded); with `offsets`, a segmented scan.
#[pyfunction]
#[pyo3(signature = (x, out, op, inclusive, reverse, offsets = None))]
pub fn scan_host(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    op: &str,
    inclusive: bool,
    reverse: bool,
    offsets: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    fn go<T: ScanElem + Element>(
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
        s: ScanSpec,
        offsets: Option<&[u32]>,
    ) -> PyResult<()> {
        let xa = ro::<T>(x, "x")?;
        let mut oa = rw::<T>(out, "out")?;
        let (xs, os) = (slice(&xa, "x")?, slice_mut(&mut oa, "out")?);
        run(py, || {
            check_len("out", os.len(), xs.len(), "the input")?;
            match offsets {
                None => pcpu::par_scan(xs, os, s),
                Some(off) => pcpu::par_segmented_scan_offsets(xs, off, os, s)?,
            }
            Ok(())
        })
    }
    let s = spec(op, inclusive, reverse)?;
    let off_view = offsets.map(|o| ro::<u32>(o, "offsets")).transpose()?;
    let off = match &off_view {
        Some(o) => Some(slice(o, "offsets")?),
        None => None,
    };
    by_scan_dtype!(dtype_of(x)?.as_str(), go(py, x, out, s, off))
}

/// `out ← scan(x)` on the GPU with device pointers of `n` elements of `dtype`; with
/// `offsets` (a device pointer to `nseg + 1` uint32 offsets, validated by the caller), a
/// segmented scan.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (dtype, x, out, n, op, inclusive, reverse, wait, signal, offsets = None, nseg = 0))]
pub fn scan_device(
    py: Python<'_>,
    dtype: &str,
    x: u64,
    out: u64,
    n: usize,
    op: &str,
    inclusive: bool,
    reverse: bool,
    wait: Vec<u64>,
    signal: u64,
    offsets: Option<u64>,
    nseg: usize,
) -> PyResult<()> {
    #[allow(clippy::too_many_arguments)]
    fn go<T: ScanElem + KernelType>(
        py: Python<'_>,
        x: u64,
        out: u64,
        n: usize,
        s: ScanSpec,
        wait: &[u64],
        signal: u64,
        offsets: Option<u64>,
        nseg: usize,
    ) -> PyResult<()> {
        run(py, || {
            let d = device()?;
            d.enter(wait)?;
            // SAFETY: the Python layer checked dtype, contiguity and length of each array and
            // holds them during the call; `leave` orders the caller's later work after ours.
            let xb = unsafe { Borrowed::<T>::new(d, x, n) };
            let mut ob = unsafe { Borrowed::<T>::new(d, out, n) };
            let alg = ScanAlgorithm::default();
            if n > 0 {
                match offsets {
                    None => pgpu::scan(&d.gpu, &*xb, &mut *ob, s, alg)?,
                    Some(op) => {
                        let ofs = unsafe { Borrowed::<u32>::new(d, op, nseg + 1) };
                        pgpu::segmented_scan_offsets(&d.gpu, &*xb, &*ofs, &mut *ob, s, alg)?
                    }
                }
            }
            d.leave(signal)?;
            Ok(())
        })
    }
    let s = spec(op, inclusive, reverse)?;
    by_scan_dtype!(dtype, go(py, x, out, n, s, &wait, signal, offsets, nseg))
}

/// [`by_dtype!`] over the key types of the radix sort.
macro_rules! by_key_dtype {
    ($dtype:expr, $f:ident $args:tt) => {
        by_dtype!($dtype, $f $args,
            { "float32" => f32, "int32" => i32, "uint32" => u32, "uint64" => u64 },
            "sort takes keys of these dtypes")
    };
}

/// Stable radix sort of NumPy keys on the CPU: `(sorted keys, permutation or None)`.
#[pyfunction]
pub fn sort_host(
    py: Python<'_>,
    keys: &Bound<'_, PyAny>,
    with_perm: bool,
) -> PyResult<(PyObject, Option<PyObject>)> {
    fn go<K: RadixKey + Element>(
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        with_perm: bool,
    ) -> PyResult<(PyObject, Option<PyObject>)> {
        let ka = ro::<K>(keys, "keys")?;
        let ks = slice(&ka, "keys")?;
        let (k, p) = run(py, || {
            let perm_in: Vec<u32> = if with_perm {
                (0..u32::try_from(ks.len()).map_err(|_| {
                    Failure::Value("sort: at most 2^32 keys can carry a permutation".into())
                })?)
                    .collect()
            } else {
                Vec::new()
            };
            Ok(if with_perm {
                let (k, p) = segsparse::primitives::sort::cpu::radix_sort_pairs(ks, &perm_in);
                (k, Some(p))
            } else {
                (segsparse::primitives::sort::cpu::radix_sort(ks), None)
            })
        })?;
        Ok((
            PyArray1::from_vec(py, k).into_any().unbind(),
            p.map(|p| PyArray1::from_vec(py, p).into_any().unbind()),
        ))
    }
    by_key_dtype!(dtype_of(keys)?.as_str(), go(py, keys, with_perm))
}

/// Stable radix sort of `n` device keys in place (and of a uint32 permutation alongside).
#[pyfunction]
#[pyo3(signature = (dtype, keys, n, perm, wait, signal))]
pub fn sort_device(
    py: Python<'_>,
    dtype: &str,
    keys: u64,
    n: usize,
    perm: Option<u64>,
    wait: Vec<u64>,
    signal: u64,
) -> PyResult<()> {
    fn go<K: RadixKey + KernelType>(
        py: Python<'_>,
        keys: u64,
        n: usize,
        perm: Option<u64>,
        wait: &[u64],
        signal: u64,
    ) -> PyResult<()> {
        run(py, || {
            let d = device()?;
            d.enter(wait)?;
            // SAFETY: as in `scan_device`.
            let mut kb = unsafe { Borrowed::<K>::new(d, keys, n) };
            if n > 0 {
                // The radix sort may end by swapping its argument with its alternate buffer
                // (an odd number of passes), which would hand the caller's memory to the crate
                // to free: sort crate-owned copies and copy the results back instead.
                let s = d.gpu.stream();
                let copy_err = |e| segsparse::Error::cuda("copying sort keys", e);
                let mut k = s.clone_dtod(&*kb).map_err(copy_err)?;
                match perm {
                    None => segsparse::primitives::sort::gpu::radix_sort(&d.gpu, &mut k)?,
                    Some(p) => {
                        let mut pb = unsafe { Borrowed::<u32>::new(d, p, n) };
                        let mut v = s.clone_dtod(&*pb).map_err(copy_err)?;
                        segsparse::primitives::sort::gpu::radix_sort_pairs(&d.gpu, &mut k, &mut v)?;
                        s.memcpy_dtod(&v, &mut *pb).map_err(copy_err)?;
                    }
                }
                s.memcpy_dtod(&k, &mut *kb).map_err(copy_err)?;
            }
            d.leave(signal)?;
            Ok(())
        })
    }
    by_key_dtype!(dtype, go(py, keys, n, perm, &wait, signal))
}

/// [`by_dtype!`] over float32 / float64.
macro_rules! by_float_dtype {
    ($dtype:expr, $f:ident $args:tt) => {
        by_dtype!($dtype, $f $args, { "float32" => f32, "float64" => f64 },
            "tridiagonal systems must have a float dtype")
    };
}

/// Solves `len / n` tridiagonal systems of `n` rows stored one after another (NumPy arrays),
/// on the GPU when one works, else by Thomas on the CPU.
#[pyfunction]
pub fn tridiag_host(
    py: Python<'_>,
    n: usize,
    lower: &Bound<'_, PyAny>,
    diag: &Bound<'_, PyAny>,
    upper: &Bound<'_, PyAny>,
    rhs: &Bound<'_, PyAny>,
    use_gpu: bool,
) -> PyResult<PyObject> {
    fn go<T: Scalar + KernelType + Element>(
        py: Python<'_>,
        n: usize,
        arrays: [&Bound<'_, PyAny>; 4],
        use_gpu: bool,
    ) -> PyResult<PyObject> {
        let [a, b, c, d] = arrays.map(|v| ro::<T>(v, "tridiagonal arrays"));
        let (a, b, c, d) = (a?, b?, c?, d?);
        let w = "tridiagonal arrays";
        let (a, b, c, d) = (slice(&a, w)?, slice(&b, w)?, slice(&c, w)?, slice(&d, w)?);
        let x = run(py, || {
            check_tridiag(n, [a.len(), b.len(), c.len(), d.len()])?;
            let a = Tridiagonal::new(a, b, c);
            if use_gpu {
                Ok(tridiag::solve_batch(n, a, d)?)
            } else {
                Ok(tridiag::cpu::thomas_batch(n, a, d)?)
            }
        })?;
        Ok(PyArray1::from_vec(py, x).into_any().unbind())
    }
    by_float_dtype!(
        dtype_of(diag)?.as_str(),
        go(py, n, [lower, diag, upper, rhs], use_gpu)
    )
}

fn check_tridiag(n: usize, lens: [usize; 4]) -> Res<()> {
    let len = lens[1];
    if lens.iter().any(|&l| l != len) {
        return Err(Failure::Value(format!(
            "tridiagonal solve: lower, diag, upper and rhs have {lens:?} elements; they must \
             be equal"
        )));
    }
    if len > 0 && (n == 0 || len % n != 0) {
        return Err(Failure::Value(format!(
            "tridiagonal solve: {len} rows are not a whole number of systems of {n} rows"
        )));
    }
    Ok(())
}

/// The batched tridiagonal solve on device arrays of `len` elements each; `x` is written.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn tridiag_device(
    py: Python<'_>,
    dtype: &str,
    n: usize,
    len: usize,
    ptrs: [u64; 5],
    wait: Vec<u64>,
    signal: u64,
) -> PyResult<()> {
    fn go<T: Scalar + KernelType>(
        py: Python<'_>,
        n: usize,
        len: usize,
        ptrs: [u64; 5],
        wait: &[u64],
        signal: u64,
    ) -> PyResult<()> {
        run(py, || {
            check_tridiag(n, [len; 4])?;
            if len == 0 {
                return Ok(());
            }
            let d = device()?;
            let mut solver = GpuTridiag::<T>::new(&d.gpu)?;
            d.enter(wait)?;
            // SAFETY: as in `scan_device`.
            let [a, b, c, r, x] = ptrs.map(|p| unsafe { Borrowed::<T>::new(d, p, len) });
            let mut x = x;
            let a = Tridiagonal::new(&*a, &*b, &*c);
            solver.solve_batch(n, len / n, a, &r, &mut x, TridiagAlgorithm::Auto)?;
            d.leave(signal)?;
            Ok(())
        })
    }
    by_float_dtype!(dtype, go(py, n, len, ptrs, &wait, signal))
}

/// `(available, name or None, reason or None)`: whether a GPU works, its name, and why not.
#[pyfunction]
pub fn gpu_status(py: Python<'_>) -> (bool, Option<String>, Option<String>) {
    let r = py.allow_threads(|| std::panic::catch_unwind(device));
    match r {
        Ok(Ok(d)) => (true, Some(d.gpu.name().to_string()), None),
        Ok(Err(e)) => (false, None, Some(e.to_string())),
        Err(_) => (false, None, Some("opening the GPU panicked".into())),
    }
}

/// `(driver, nvrtc, nvrtc_library)`: the CUDA driver's version (`"13.0"`), the NVRTC version
/// that compiles the kernels (`"12.4"`) and the library it came from; `None` where not found.
/// Needs no device.
#[pyfunction]
pub fn gpu_versions() -> (Option<String>, Option<String>, Option<String>) {
    let driver = segsparse::gpu::driver_version_number().map(segsparse::gpu::version_string);
    match segsparse::gpu::nvrtc::library() {
        Ok((lib, (major, minor))) => (driver, Some(format!("{major}.{minor}")), Some(lib.into())),
        Err(_) => (driver, None, None),
    }
}
