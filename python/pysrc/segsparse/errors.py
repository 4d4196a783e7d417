"""Exceptions raised by segsparse.

Every error of the Rust crate arrives as one of these, with the crate's own message:

- ``SegsparseError``: the base class of everything below.
- ``MatrixMarketError`` (also a ``ValueError``): a malformed Matrix Market file; ``path`` and
  ``line`` (1-based, 0 for the file as a whole) say where.
- ``CudaUnavailableError``: a GPU was required (``device="gpu"``) but none works; the message
  says why (no driver, no device).
- ``CudaError``: a CUDA driver call or a kernel compile failed (the kernel is named).
- ``SolverError``: a solver could not run (the message says why). A solve that merely did not
  converge is *not* an exception: see ``SolveInfo.converged``.
- ``InternalError``: a panic inside the Rust code (a bug); it never unwinds into Python.
- ``OutOfMemoryError`` (also a ``MemoryError``): the memory preflight refused an allocation
  proportional to the problem (a matrix copy or upload, a solver's workspace) because the host
  or the GPU does not have it; the message names what, the bytes needed and available.

Bad arguments (wrong shapes, dtypes or lengths, invalid CSR arrays) raise ``ValueError`` or
``TypeError``; a missing file raises ``FileNotFoundError``.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "SegsparseError",
    "MatrixMarketError",
    "CudaUnavailableError",
    "CudaError",
    "SolverError",
    "InternalError",
    "OutOfMemoryError",
]


class SegsparseError(Exception):
    """Base class of the errors raised by segsparse."""


class MatrixMarketError(SegsparseError, ValueError):
    """A malformed Matrix Market file; ``path`` and ``line`` (1-based; 0: the whole file)."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None):
        super().__init__(message)
        self.path = path
        self.line = line


class CudaUnavailableError(SegsparseError):
    """No usable GPU (no driver, no device); the message says which."""


class CudaError(SegsparseError):
    """A CUDA driver call, kernel launch or NVRTC compile failed."""


class SolverError(SegsparseError):
    """A solver could not run to an outcome (a non-convergence is reported in SolveInfo)."""


class InternalError(SegsparseError):
    """A panic inside segsparse's Rust code: a bug, reported instead of crashing."""


class OutOfMemoryError(SegsparseError, MemoryError):
    """The memory preflight refused an allocation: the message names what, the bytes needed and
    the bytes the host or the GPU has."""
