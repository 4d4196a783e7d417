"""segsparse: sparse linear algebra on NVIDIA GPUs built on segmented scan, from Python.

The same engine as the Rust crate ``segsparse``, from NumPy, SciPy and CuPy::

    import scipy.io, segsparse
    A = segsparse.Matrix(scipy.sparse.random(1000, 1000, 0.01, format="csr"))  # uploaded once
    y = A @ x                                      # NumPy in, NumPy out; CuPy in, CuPy out
    x, info = segsparse.bicgstab(A, b, rtol=1e-8)  # like scipy.sparse.linalg.bicgstab

- ``Matrix``: a CSR matrix on the GPU when one works (``device="auto"|"gpu"|"cpu"``), with
  ``A @ x`` and ``A.spmv(x, alpha, beta, y)``.
- ``cg``, ``pcg``, ``bicgstab``, ``gmres``, ``minres``: SciPy's contract, ``(x, info)``; ``info`` is a
  ``SolveInfo``, an ``int`` equal to SciPy's ``info`` with the details as attributes.
- ``solve(A, b)``: the method and preconditioner chosen for ``A`` (``auto_choice(A)``; also
  ``M="auto"`` of every solver), the choice and its reason in ``info``.
- ``amg``: a smoothed-aggregation multigrid hierarchy (``M=`` of any solver, ``.solve``,
  ``.aspreconditioner()`` for SciPy).
- ``scan``, ``segmented_scan``, ``sort``, ``tridiagonal_solve``: primitives on arrays.
- ``load_matrix_market``, ``save_matrix_market``.
- ``gpu_available()``, ``device_name()``, ``gpu_error()``, ``gpu_info()`` (with the CUDA
  driver and NVRTC versions found).
- ``warmup()`` (also ``python -m segsparse warm-up``): compile the common kernels into the
  kernel disk cache ahead of first use.

CuPy arrays (anything with ``__cuda_array_interface__``) are used in place, without copies;
work is ordered with CuPy's current stream by CUDA events (the host does not wait). Errors are
the exceptions in ``segsparse.errors``, with the crate's messages.
"""

from __future__ import annotations

from typing import Optional

from . import _core
from .errors import (
    CudaError,
    CudaUnavailableError,
    InternalError,
    MatrixMarketError,
    OutOfMemoryError,
    SegsparseError,
    SolverError,
)
from .matrix import (Matrix, as_matrix, load_matrix_market, release_upload_buffers,
                     save_matrix_market)
from .primitives import scan, segmented_scan, sort, tridiagonal_solve
from .amg import AMG, amg
from .batched import Batch, batched_solve
from .solvers import (SolveInfo, auto_choice, bicgstab, cg, clear_auto_cache, gmres, minres, pcg,
                      solve)
from .warmup import warmup

__version__ = _core.__version__

__all__ = [
    "Matrix", "as_matrix", "SolveInfo", "cg", "pcg", "bicgstab", "gmres", "minres", "solve", "auto_choice",
    "clear_auto_cache",
    "amg", "AMG", "scan",
    "segmented_scan",
    "sort", "tridiagonal_solve", "load_matrix_market", "save_matrix_market", "gpu_available",
    "device_name", "gpu_error", "SegsparseError", "MatrixMarketError", "CudaUnavailableError",
    "CudaError", "SolverError", "InternalError", "OutOfMemoryError", "gpu_info", "warmup",
    "release_upload_buffers", "batched_solve", "Batch",
]


def gpu_available() -> bool:
    """True when a CUDA device works (driver loaded, device opened); then ``Matrix`` and the
    solvers use it by default."""
    return _core.gpu_status()[0]


def device_name() -> Optional[str]:
    """The GPU's name (e.g. ``"NVIDIA H200"``), or ``None`` without a working GPU."""
    return _core.gpu_status()[1]


def gpu_error() -> Optional[str]:
    """Why no GPU is used (``None`` when one is)."""
    return _core.gpu_status()[2]


def gpu_info() -> dict:
    """What segsparse found: ``available`` (bool), ``device`` (name or ``None``), ``driver`` (the
    CUDA driver's version, e.g. ``"13.0"``, or ``None``), ``nvrtc`` (the NVRTC version that
    compiles the kernels, e.g. ``"12.4"``), ``nvrtc_library`` (the file it came from) and
    ``error`` (why no GPU is used, or ``None``). CUDA 12 and 13 drivers both work; NVRTC is the
    newest library not newer than the driver (``SEGSPARSE_NVRTC`` names one explicitly)."""
    ok, name, err = _core.gpu_status()
    driver, nvrtc, lib = _core.gpu_versions()
    return {
        "available": ok, "device": name, "driver": driver, "nvrtc": nvrtc,
        "nvrtc_library": lib, "error": err,
    }
