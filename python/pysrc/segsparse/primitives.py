"""Scan, segmented scan, radix sort and batched tridiagonal solves on arrays.

Each function runs where its data is: NumPy arrays on the CPU (multithreaded), CuPy arrays
(``__cuda_array_interface__``) on the GPU without a copy, ordered with CuPy's current stream
like ``Matrix.spmv``; the result has the input's kind.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from ._arrays import check_real, current_stream, cupy, device_array, wait_list

__all__ = ["scan", "segmented_scan", "sort", "tridiagonal_solve"]


def scan(x: Any, op: str = "plus", *, inclusive: bool = True, reverse: bool = False):
    """Prefix scan of a 1-D array: ``op`` is ``"plus"``, ``"max"`` or ``"min"``.

    Inclusive: ``out[i] = x[0] op ... op x[i]``; exclusive: up to ``x[i-1]``, the identity first
    (0, -inf/min or +inf/max). ``reverse=True`` scans from the end (a suffix scan). Dtypes:
    float32, float64, int32, uint32 (integer sums wrap). Floating-point sums are reassociated
    (tree order), so they can differ from ``np.cumsum`` in the last bits.
    """
    return _scan(x, op, inclusive, reverse, None)


def segmented_scan(x: Any, offsets: Any = None, *, flags: Any = None, op: str = "plus",
                   inclusive: bool = True, reverse: bool = False):
    """Scan restarting at each segment: segments are given by CSR-style ``offsets``
    (``offsets[0] == 0``, non-decreasing, ``offsets[-1] == len(x)``; repeats are empty segments)
    or by boolean head ``flags`` (``flags[i]``: a segment starts at ``i``)."""
    if (offsets is None) == (flags is None):
        raise ValueError("give exactly one of offsets and flags")
    n = _len(x)
    dev = device_array(x, "x") is not None
    xp = cupy() if dev else np
    if flags is not None:
        f = xp.asarray(flags).astype(bool).reshape(-1)
        if f.shape[0] != n:
            raise ValueError(f"flags has {f.shape[0]} elements but x has {n}")
        if n:
            f[0] = True
        starts = xp.flatnonzero(f)
        offsets = xp.concatenate([starts, xp.asarray([n])]).astype(np.uint32)
    else:
        offsets = xp.asarray(offsets)
        if offsets.ndim != 1 or offsets.shape[0] < 1:
            raise ValueError("offsets must be a 1-D array with at least one entry")
        o = offsets.astype(np.int64)
        # Validated here for device offsets (the kernel trusts them); the CPU checks again.
        if int(o[0]) != 0 or int(o[-1]) != n or (o.shape[0] > 1 and bool((o[1:] < o[:-1]).any())):
            raise ValueError(
                "offsets must start at 0, be non-decreasing and end at len(x) = " f"{n}"
            )
        offsets = xp.ascontiguousarray(offsets, dtype=np.uint32)
    return _scan(x, op, inclusive, reverse, offsets)


def _len(x: Any) -> int:
    d = device_array(x, "x")
    return d.n if d is not None else int(np.asarray(x).reshape(-1).shape[0])


def _scan(x, op, inclusive, reverse, offsets):
    dx = device_array(x, "x")
    if dx is None:
        x = np.ascontiguousarray(x)
        if x.ndim != 1:
            raise ValueError(f"x must be 1-D, got shape {x.shape}")
        out = np.empty_like(x)
        _core.scan_host(x, out, op, inclusive, reverse, offsets)
        return out
    out = cupy().empty(dx.n, dtype=dx.dtype)
    do = device_array(out, "out")
    off_ptr, nseg = None, 0
    if offsets is not None:
        doff = device_array(offsets, "offsets")
        off_ptr, nseg = doff.ptr, doff.n - 1
    _core.scan_device(str(dx.dtype), dx.ptr, do.ptr, dx.n, op, inclusive, reverse,
                      wait_list(current_stream(), dx), current_stream(), off_ptr, nseg)
    return out


def sort(keys: Any, values: Any = None):
    """Stable ascending radix sort. Keys: float32 (IEEE total order: -NaN < -inf < ... < inf <
    NaN), int32, uint32 or uint64. Returns the sorted keys, or ``(keys, values)`` sorted by key
    when ``values`` (any dtype, same length) is given; the inputs are not modified."""
    dk = device_array(keys, "keys")
    if dk is None:
        k = np.ascontiguousarray(keys)
        if k.ndim != 1:
            raise ValueError(f"keys must be 1-D, got shape {k.shape}")
        sk, perm = _core.sort_host(k, values is not None)
        if values is None:
            return sk
        v = np.asarray(values)
        if v.shape[:1] != k.shape:
            raise ValueError(f"values has {v.shape[:1]} elements, keys {k.shape[0]}")
        return sk, v[perm]
    cp = cupy()
    k = cp.array(keys, copy=True)
    dk = device_array(k, "keys")
    perm = None
    if values is not None:
        if values.shape[0] != dk.n:
            raise ValueError(f"values has {values.shape[0]} elements, keys {dk.n}")
        perm = cp.arange(dk.n, dtype=cp.uint32)
    _core.sort_device(str(dk.dtype), dk.ptr, dk.n, None if perm is None else perm.data.ptr,
                      wait_list(current_stream(), dk), current_stream())
    if values is None:
        return k
    return k, cp.asarray(values)[perm]


def tridiagonal_solve(lower: Any, diag: Any, upper: Any, rhs: Any, *, device: str = "auto"):
    """Solves tridiagonal systems ``lower[i] x[i-1] + diag[i] x[i] + upper[i] x[i+1] = rhs[i]``
    (``lower[0]`` and ``upper[-1]`` are ignored).

    1-D arrays of length ``n``: one system. 2-D arrays of shape ``(batch, n)``: ``batch``
    independent systems, solved together. No pivoting: meant for diagonally dominant or SPD
    systems (a zero or tiny pivot raises ``SolverError`` naming the system and row).

    NumPy arrays: the GPU when one works and ``device`` is ``"auto"`` or ``"gpu"`` (cyclic
    reduction family, copied over and back), else the Thomas algorithm on the CPU. CuPy arrays:
    on the GPU, no copy. Returns ``x`` with ``rhs``'s shape and kind.
    """
    arrays = (lower, diag, upper, rhs)
    if hasattr(rhs, "__cuda_array_interface__"):
        cp = cupy()
        dt = check_real(np.result_type(*[a.dtype for a in arrays]), "tridiagonal system")
        dt = dt if dt in (np.float32, np.float64) else np.float64
        shape = rhs.shape
        flat = [cp.ascontiguousarray(cp.asarray(a, dtype=dt).reshape(-1)) for a in arrays]
        n = shape[-1] if len(shape) else 0
        if len({a.shape[0] for a in flat}) != 1:
            raise ValueError(
                "tridiagonal solve: lower, diag, upper and rhs have "
                f"{[a.shape[0] for a in flat]} elements; they must be equal"
            )
        x = cp.empty(flat[3].shape[0], dtype=dt)
        ds = [device_array(a, "array") for a in flat + [x]]
        _core.tridiag_device(str(np.dtype(dt)), n, ds[3].n, [d.ptr for d in ds],
                             wait_list(current_stream(), *ds), current_stream())
        return x.reshape(shape)
    dt = check_real(np.result_type(*[np.asarray(a).dtype for a in arrays]), "tridiagonal system")
    dt = dt if dt in (np.float32, np.float64) else np.float64
    shape = np.shape(rhs)
    flat = [np.ascontiguousarray(np.asarray(a, dtype=dt).reshape(-1)) for a in arrays]
    n = shape[-1] if len(shape) else 0
    use_gpu = device != "cpu"
    if device == "gpu":
        from . import gpu_available, gpu_error

        if not gpu_available():
            from .errors import CudaUnavailableError

            raise CudaUnavailableError(gpu_error())
    x = _core.tridiag_host(n, *flat, use_gpu)
    return x.reshape(shape)
