"""Operators given by the caller (``A`` without a matrix, ``M`` that is not one of the crate's
preconditioners), applied where their data lives.

An operator is anything SciPy's solvers accept: a ``scipy.sparse.linalg.LinearOperator``, an
object with ``matvec``, a sparse or dense matrix (NumPy/SciPy or CuPy/cupyx), a
``segsparse.Matrix`` or a plain callable. Where it runs:

- NumPy arrays, ``scipy.sparse`` matrices and SciPy ``LinearOperator`` objects: on the host;
- CuPy arrays, ``cupyx.scipy.sparse`` matrices and cupyx ``LinearOperator`` objects: on the
  device;
- a ``segsparse.Matrix``: takes vectors of either kind (its own SpMV);
- other objects with ``matvec`` and plain callables: given vectors of the iteration's kind.

A vector of the other kind is moved (host <-> device) for the call and its result moved back.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Tuple

import numpy as np

HOST, DEVICE, ANY = "host", "device", "any"


def _module(obj: Any) -> str:
    return type(obj).__module__ or ""


def is_matrix(A: Any) -> bool:
    """True for what ``segsparse.Matrix`` takes: a ``Matrix``, a SciPy/cupyx sparse matrix or a
    2-D array (NumPy, ``np.matrix``, CuPy)."""
    from .matrix import Matrix

    if isinstance(A, Matrix):
        return True
    if getattr(A, "format", None) is not None and hasattr(A, "tocsr"):
        return True
    nd = getattr(A, "ndim", None)
    return nd == 2 and (isinstance(A, np.ndarray) or hasattr(A, "__cuda_array_interface__"))


def _where(obj: Any) -> str:
    from .matrix import Matrix

    if isinstance(obj, Matrix):
        return ANY
    mod = _module(obj)
    if getattr(obj, "format", None) is not None and hasattr(obj, "tocsr"):
        return DEVICE if hasattr(obj.data, "__cuda_array_interface__") else HOST
    if isinstance(obj, np.ndarray):
        return HOST
    if hasattr(obj, "__cuda_array_interface__"):
        return DEVICE
    if mod.startswith("cupyx") or mod.startswith("cupy."):
        return DEVICE
    if mod.startswith("scipy."):
        return HOST
    return ANY


class Operator:
    """``y = op(x)`` on vectors of one kind (NumPy or CuPy) and one dtype."""

    def __init__(self, fn: Callable[[Any], Any], where: str, shape: Optional[Tuple[int, int]]):
        self.fn = fn
        self.where = where
        self.shape = shape
        self.calls = 0

    def bind(self, xp: Any, dtype: np.dtype) -> Callable[[Any], Any]:
        """The operator as a function of vectors of ``xp`` (numpy or cupy) and ``dtype``."""
        on_device = xp is not np
        fn, where = self.fn, self.where
        n_out = None if self.shape is None else self.shape[0]

        def apply(x):
            self.calls += 1
            if where == HOST and on_device:
                y = xp.asarray(np.asarray(fn(xp.asnumpy(x))))
            elif where == DEVICE and not on_device:
                cp = sys.modules["cupy"]
                y = cp.asnumpy(fn(cp.asarray(x)))
            else:
                y = fn(x)
            y = xp.asarray(y)
            if y.dtype.kind == "c" and np.dtype(dtype).kind != "c":
                raise TypeError(
                    f"an operator returned the complex dtype {y.dtype} in a real solve (make "
                    "A, b or x0 complex to solve a complex system)"
                )
            y = y.reshape(-1)
            if n_out is not None and y.shape[0] != n_out:
                raise ValueError(f"an operator returned {y.shape[0]} elements, expected {n_out}")
            return y.astype(dtype, copy=False)

        return apply


def as_operator(obj: Any, what: str) -> Operator:
    """``obj`` (see the module docs) as an ``Operator``; ``TypeError`` names what is refused."""
    from .matrix import Matrix

    shape = getattr(obj, "shape", None)
    shape = tuple(int(s) for s in shape) if shape is not None and len(shape) == 2 else None
    where = _where(obj)
    if isinstance(obj, Matrix):
        return Operator(obj.spmv, ANY, shape)
    if is_matrix(obj) or isinstance(obj, np.matrix):
        return Operator(lambda x: obj @ x, where, shape)
    matvec = getattr(obj, "matvec", None)
    if callable(matvec):
        return Operator(matvec, where, shape)
    if callable(obj):
        return Operator(obj, where, shape)
    raise TypeError(
        f"{what} must be a matrix (SciPy/CuPy sparse, dense array, segsparse.Matrix), a "
        f"LinearOperator, an object with matvec or a callable; got {type(obj).__name__}"
    )


def operator_dtype(obj: Any) -> Optional[np.dtype]:
    """``obj.dtype`` when it has one."""
    d = getattr(obj, "dtype", None)
    try:
        return None if d is None else np.dtype(d)
    except TypeError:
        return None
