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
    everything else is refused, naming the dtype: complex numbers (the imaginary part would be
    dropped silently, a wrong answer, even when it is zero: pass ``.real`` explicitly),
    ``longdouble`` (precision would be lost), objects, strings, dates."""
    d = np.dtype(dtype)
    if d.kind in "biu" or (d.kind == "f" and d.itemsize <= 8):
        return d
    if d.kind == "c":
        raise TypeError(
            f"{what} has the complex dtype {d}: segsparse solves real systems only (pass "
            f"{what}.real if the imaginary part is known to be zero)"
        )
    raise TypeError(
        f"{what} has dtype {d}; segsparse takes float32 or float64 (bool, integer and float16 "
        "values are converted)"
    )


def host_vector(a: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """``a`` as a 1-D contiguous NumPy array of ``dtype`` (no copy when it already is one);
    dtypes other than ``dtype`` follow ``check_real``'s rule."""
    if not (isinstance(a, np.ndarray) and a.dtype == dtype):
        a = np.asarray(a)
        check_real(a.dtype, what)
    v = np.ascontiguousarray(a, dtype=dtype)
    if v.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}")
    return v
