"""``segsparse.warmup()``: compile the common kernels into the kernel disk cache ahead of use.

The GPU kernels are compiled by NVRTC on first use and kept in the on-disk cache
(``$SEGSPARSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/segsparse``, else ``~/.cache/segsparse``),
so only a process that finds the cache empty pays for compiling. ``warmup()`` runs the common
operations once on small problems, in each precision, so that the kernels they need (with the
exact options this GPU's policies choose) are compiled and stored: an image or a CI job can
call it at build time (``python -m segsparse warm-up``, or the ``segsparse warm-up``
command) and its users start warm.
"""

from __future__ import annotations

import os
import time
from typing import Dict, Iterable

import numpy as np

__all__ = ["warmup", "cache_dir"]

_ALL = ("upload", "spmv", "solvers", "primitives", "amg")


def cache_dir():
    """The kernel disk cache directory in use, or ``None`` when it is disabled
    (``SEGSPARSE_KERNEL_CACHE=0``)."""
    if os.environ.get("SEGSPARSE_KERNEL_CACHE") == "0":
        return None
    for var, sub in (("SEGSPARSE_CACHE_DIR", ""), ("XDG_CACHE_HOME", "segsparse")):
        v = os.environ.get(var)
        if v:
            return os.path.join(v, sub) if sub else v
    return os.path.join(os.path.expanduser("~"), ".cache", "segsparse")


def _poisson2d(n: int):
    import scipy.sparse as sp

    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.identity(n)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def warmup(dtypes: Iterable = ("float32", "float64"), parts: Iterable[str] = _ALL,
           verbose: bool = False) -> Dict[str, float]:
    """Compiles the kernels of the common operations into the disk cache; returns the seconds
    each part took (``{"float64/spmv": 0.4, ...}``; a warm cache makes them small).

    Args:
        dtypes: the value types to prepare (``float32``, ``float64``).
        parts: which operations: ``"upload"`` (the device-side checks of ``Matrix``),
            ``"spmv"`` (every SpMV algorithm), ``"solvers"`` (CG, PCG with Jacobi and the
            polynomial, BiCGSTAB, GMRES), ``"primitives"`` (scan, segmented scan, sort; needs
            CuPy, skipped without it) and
            ``"amg"`` (setup and cycle of the smoothed-aggregation hierarchy).

    Raises ``CudaUnavailableError`` when no GPU works (there is nothing to compile for)."""
    from . import Matrix, amg, bicgstab, cg, gmres, gpu_available, gpu_error
    from . import scan, segmented_scan, sort
    from .errors import CudaUnavailableError

    if not gpu_available():
        raise CudaUnavailableError(gpu_error())
    parts = tuple(parts)
    unknown = set(parts) - set(_ALL)
    if unknown:
        raise ValueError(f"unknown warm-up parts {sorted(unknown)}; known: {list(_ALL)}")
    out: Dict[str, float] = {}

    def step(name, f):
        t = time.perf_counter()
        f()
        out[name] = time.perf_counter() - t
        if verbose:
            print(f"warm-up {name}: {out[name]:.3f} s", flush=True)

    A = _poisson2d(48)
    irregular = A.copy()
    irregular[0, :] = 1.0  # a dense row: the SpMV's irregular-row paths
    irregular = irregular.tocsr()
    for dt in (np.dtype(d) for d in dtypes):
        if dt not in (np.float32, np.float64):
            raise TypeError(f"dtypes must be float32 or float64, not {dt}")
        if "upload" in parts or "spmv" in parts:
            step(f"{dt}/upload", lambda: Matrix(A, dtype=dt, device="gpu"))
        if "spmv" in parts:
            def spmv():
                for a in (A, irregular):
                    m = Matrix(a, dtype=dt, device="gpu")
                    m @ np.ones(a.shape[1], dtype=dt)
            step(f"{dt}/spmv", spmv)
        if "solvers" in parts:
            def solvers():
                m = Matrix(A, dtype=dt, device="gpu")
                b = np.ones(A.shape[0], dtype=dt)
                for M in (None, "jacobi", "poly"):
                    cg(m, b, maxiter=20, M=M)
                bicgstab(m, b, maxiter=20)
                gmres(m, b, maxiter=1, restart=20)
                gmres(m, b, maxiter=1, restart=20, M="jacobi")
            step(f"{dt}/solvers", solvers)
        if "amg" in parts:
            def amg_part():
                h = amg(Matrix(A, dtype=dt, device="gpu"))
                h.solve(np.ones(A.shape[0], dtype=dt), maxiter=5)
            step(f"{dt}/amg", amg_part)
    if "primitives" in parts:
        try:
            import cupy as cp
        except ImportError:
            cp = None

        def prims():
            # Device arrays run the GPU primitives; NumPy ones run on the CPU.
            for dt in (np.dtype(d) for d in dtypes):
                x = cp.arange(4096, dtype=dt)
                scan(x)
                scan(x, "max")
                segmented_scan(x, cp.asarray([0, 100, 1000, 4096], dtype=cp.int32))
            sort(cp.arange(4096, dtype=cp.uint32)[::-1].copy())
            sort(cp.arange(4096, dtype=cp.float32)[::-1].copy())

        if cp is not None:
            step("primitives", prims)
    return out
