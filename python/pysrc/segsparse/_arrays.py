"""Recognising device arrays (``__cuda_array_interface__``) and ordering with CUDA streams."""

from __future__ import annotations

import sys
from typing import Any, List, NamedTuple, Optional

import numpy as np


class DeviceArray(NamedTuple):
    """What segsparse needs from a device array: its address, length, dtype and stream."""

    ptr: int
    n: int
    dtype: np.dtype
    stream: Optional[int]


def device_array(a: Any, what: str, *, writable: bool = False) -> Optional[DeviceArray]:
    """The device view of ``a`` when it exposes ``__cuda_array_interface__``, else ``None``.

    Only 1-D C-contiguous arrays are accepted (the kernels read them as flat vectors)."""
    cp = sys.modules.get("cupy")
    if cp is not None and type(a) is cp.ndarray:
        # CuPy's own arrays without building the interface dict (a few microseconds a call).
        # Their interface stream is CuPy's current stream, which every call waits for anyway.
        if a.ndim != 1:
            raise ValueError(f"{what} must be 1-D, got shape {a.shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{what} must be contiguous")
        return DeviceArray(a.data.ptr, a.size, a.dtype, None)
    try:
        iface = a.__cuda_array_interface__
    except AttributeError:
        return None
    shape = tuple(iface["shape"])
    dtype = np.dtype(iface["typestr"])
    if len(shape) != 1:
        raise ValueError(f"{what} must be 1-D, got shape {shape}")
    strides = iface.get("strides")
    if strides is not None and shape[0] > 1 and tuple(strides) != (dtype.itemsize,):
        raise ValueError(f"{what} must be contiguous (strides {tuple(strides)})")
    ptr, readonly = iface["data"]
    if writable and readonly:
        raise ValueError(f"{what} is read-only")
    stream = iface.get("stream")
    if stream == 1:
        stream = 0  # CU_STREAM_LEGACY is the legacy default stream, CuPy's handle 0
    return DeviceArray(int(ptr or 0), int(shape[0]), dtype, stream)


def cupy():
    """The CuPy module (device outputs are CuPy arrays)."""
    cp = sys.modules.get("cupy")
    if cp is None:
        import cupy as cp  # noqa: F811  (imported only when device arrays are used)
    return cp


def current_stream() -> int:
    """The raw handle of CuPy's current stream (0: the legacy default stream)."""
    return int(cupy().cuda.get_current_stream().ptr)


def wait_list(current: int, *arrays: Optional[DeviceArray]) -> List[int]:
    """Streams our work must wait for: CuPy's ``current`` one and each array's interface
    stream."""
    streams = [current]
    for a in arrays:
        if a is not None and a.stream is not None and a.stream not in streams:
            streams.append(int(a.stream))
    return streams


def check_real(dtype: Any, what: str) -> np.dtype:
    """``dtype`` when segsparse converts it without losing meaning, else ``TypeError``.

    The rule: ``float32`` and ``float64`` are used as they are; ``bool``, the
    integer types and ``float16`` are converted to the floating type in use (exact, except
    64-bit integers beyond 2**53, which round to the nearest float64, as NumPy rounds them);
    everything else is refused, naming the dtype: complex numbers where only real values are
    taken (the batched and primitive operations; the imaginary part would be dropped
    silently, a wrong answer, even when it is zero: pass ``.real`` explicitly; matrices,
    products and solvers take complex values, see ``check_value``), ``longdouble`` (precision
    would be lost), objects, strings, dates."""
    d = np.dtype(dtype)
    if d.kind in "biu" or (d.kind == "f" and d.itemsize <= 8):
        return d
    if d.kind == "c":
        raise TypeError(
            f"{what} has the complex dtype {d}: this operation takes real values only (pass "
            f"{what}.real if the imaginary part is known to be zero)"
        )
    raise TypeError(
        f"{what} has dtype {d}; segsparse takes float32 or float64 (bool, integer and float16 "
        "values are converted)"
    )


_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def check_value(dtype: Any, what: str) -> np.dtype:
    """``dtype`` when segsparse takes it as the values of a matrix or vector, real or complex:
    ``check_real``'s rule, plus ``complex64`` and ``complex128`` (``clongdouble`` is refused:
    precision would be lost)."""
    d = np.dtype(dtype)
    if d in _COMPLEX:
        return d
    if d.kind == "c":
        raise TypeError(f"{what} has dtype {d}; segsparse takes complex64 or complex128 for "
                        "complex values")
    return check_real(d, what)


def complex_result(*dtypes: Any) -> Optional[np.dtype]:
    """The dtype of a computation with operands of these dtypes when one of them is complex:
    NumPy's promotion, ``np.result_type`` (``float32`` with ``complex64`` is ``complex64``;
    ``float64`` or an integer with ``complex64`` is ``complex128``), refused with ``TypeError``
    when it is not ``complex64`` or ``complex128``; ``None`` when all are real (the real rule
    applies)."""
    ds = [np.dtype(d) for d in dtypes if d is not None]
    if not any(d.kind == "c" for d in ds):
        return None
    for d in ds:
        check_value(d, "an operand")
    r = np.result_type(*ds)
    if r not in _COMPLEX:
        raise TypeError(f"the operands' common dtype is {r}; segsparse takes complex64 or "
                        "complex128")
    return r


def real_of(dtype: Any) -> np.dtype:
    """The real dtype of the parts of ``dtype`` (``complex64`` -> ``float32``)."""
    d = np.dtype(dtype)
    return np.dtype(np.float32) if d in (np.float32, np.complex64) else np.dtype(np.float64)


def host_vector(a: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """``a`` as a 1-D contiguous NumPy array of ``dtype`` (no copy when it already is one);
    dtypes other than ``dtype`` follow ``check_real``'s rule (``check_value``'s for a complex
    ``dtype``)."""
    if not (isinstance(a, np.ndarray) and a.dtype == dtype):
        a = np.asarray(a)
        if np.dtype(dtype).kind == "c":
            check_value(a.dtype, what)
        else:
            check_real(a.dtype, what)
    v = np.ascontiguousarray(a, dtype=dtype)
    if v.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}")
    return v
