"""``segsparse.Matrix``: a sparse matrix held by segsparse, uploaded to the GPU once."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _core
from ._arrays import (_COMPLEX, check_real, check_value, complex_result, current_stream, cupy,
                      device_array, host_vector, real_of, wait_list)

__all__ = ["Matrix", "as_matrix", "load_matrix_market", "save_matrix_market",
           "release_upload_buffers"]


def release_upload_buffers() -> int:
    """Frees the pinned staging buffers that ``Matrix(..., reuse_buffers=True)`` kept for later
    uploads; returns the bytes freed (0 when none were kept)."""
    return _core.release_upload_buffers()

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# alpha and beta of the fast path of ``spmv``: plain Python numbers (others take the general
# path, which reads their dtype).
_PLAIN = (int, float)


def _value_dtype(data_dtype: np.dtype, dtype: Any) -> np.dtype:
    if dtype is not None:
        d = np.dtype(dtype)
        if d not in _FLOATS and d not in _COMPLEX:
            raise TypeError(f"dtype must be float32, float64, complex64 or complex128, not {d}")
        if data_dtype.kind == "c" and d.kind != "c":
            raise TypeError(
                f"the matrix has complex values ({data_dtype}); dtype={d} would drop their "
                "imaginary parts (pass A.real if they are known to be zero)")
        return d
    if data_dtype in _FLOATS or data_dtype in _COMPLEX:
        return data_dtype
    return np.dtype(np.float64)


def _csr_parts(A: Any) -> Tuple[Tuple[int, int], Any, Any, Any, bool]:
    """(shape, indptr, indices, data, from_device) of a SciPy/CuPy sparse matrix or dense array."""
    fmt = getattr(A, "format", None)
    if fmt is not None and hasattr(A, "tocsr"):
        on_device = hasattr(A.data, "__cuda_array_interface__")
        csr = A if fmt == "csr" else A.tocsr()  # CSC / COO / others: SciPy's (CuPy's) conversion
        if on_device:
            # cupyx.scipy.sparse: the structure tables of the GPU SpMV are built on the host, so
            # the three arrays make one trip device -> host -> device, once, here.
            return csr.shape, csr.indptr.get(), csr.indices.get(), csr.data.get(), True
        return csr.shape, csr.indptr, csr.indices, csr.data, False
    if hasattr(A, "__cuda_array_interface__"):
        A = cupy().asnumpy(A)
    dense = np.asarray(A)
    if dense.ndim != 2:
        raise TypeError(
            "Matrix takes a scipy.sparse or cupyx.scipy.sparse matrix, a segsparse.Matrix or a "
            f"2-D array; got {type(A).__name__} with {dense.ndim} dimensions"
        )
    rows, cols = np.nonzero(dense)
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return dense.shape, np.cumsum(indptr), cols, dense[rows, cols], False


class Matrix:
    """A sparse matrix held by segsparse: on the GPU when one works, else on the CPU.

    ``Matrix(A, dtype=None, device="auto", reuse_buffers=False)`` takes

    - a ``scipy.sparse`` matrix or array (CSR, CSC, COO, ...; non-CSR formats are converted to
      CSR by SciPy first),
    - a ``cupyx.scipy.sparse`` matrix,
    - a dense 2-D NumPy (or CuPy) array, or another ``Matrix``.

    ``dtype`` is ``float32``, ``float64``, ``complex64`` or ``complex128`` (default: the data's
    own when it is one of those, else float64; complex data cannot be given a real ``dtype``).
    ``device`` is ``"auto"`` (the GPU when one works, else the CPU), ``"gpu"`` (raise
    ``CudaUnavailableError`` when none works) or ``"cpu"``, for real and complex matrices alike.

    Complex matrices (``complex64``/``complex128``, from SciPy or ``cupyx.scipy.sparse``
    complex CSR) are validated on the host and keep their host copy; on the GPU they multiply
    (``A @ x``, ``A.H @ x``) and solve (``cg`` for Hermitian positive definite, ``cocg`` for
    complex symmetric, ``bicgstab``, ``gmres``; ``M`` ``None`` or ``"jacobi"``) with CuPy
    vectors without a copy, as real ones do. ``M="ilu0"``/``"ic0"`` of a complex matrix is
    factored and applied on the CPU (its host copy; ``info.device == "cpu"``), CuPy vectors
    copied over and back.

    What is copied: on the GPU, each of the three arrays is copied once, in its own dtype
    (int32/uint32/int64 indices, float32/float64 values, read straight from the NumPy
    buffers), through pinned staging buffers, and checked and converted to the crate's uint32
    indices and ``dtype`` values on the device: no host loop touches the entries and no host
    copy is kept (one is downloaded if a host-side operation needs it later: ``to_scipy``,
    ``save``, a preconditioner set up on the host such as ``"ilu0"``; ``segsparse.amg`` and
    ``M="amg"`` set up on the device from the device copy). The
    row-structure tables of the SpMV are built on the device. ``reuse_buffers=True`` keeps the
    pinned staging (32 MiB) for the next uploads of the process (allocating it costs a few
    milliseconds; ``segsparse.release_upload_buffers()`` frees it). Matrices under 8 MiB are
    copied straight from pageable memory. ``upload_seconds`` tells where the time went. On the CPU the crate keeps its
    own validated CSR arrays (one copy). Every multiply and solve after that moves only vectors
    (and none at all for CuPy vectors). A ``cupyx`` matrix is read back to the host once and
    uploaded as above.

    A malformed matrix raises ``ValueError`` with the same message on both paths: an index
    outside the 32-bit range, ``indptr[0] != 0``, a decreasing ``indptr``, ``indptr[-1]`` not
    the entry count, a column out of range (unsorted columns, duplicates and NaN values are
    accepted, as SciPy accepts them; a solver reports a NaN as ``info == -2``).

    Multiply with ``A @ x`` or ``A.spmv(x, alpha, beta, y)``; solve with ``segsparse.cg(A, b)``
    and friends.
    """

    __slots__ = ("_m", "_dtype", "_shape")

    def __init__(self, A: Any, *, dtype: Any = None, device: str = "auto",
                 reuse_buffers: bool = False):
        if isinstance(A, Matrix):
            if (dtype is None or np.dtype(dtype) == A.dtype) and device in ("auto", A.device):
                self._m, self._dtype, self._shape = A._m, A._dtype, A._shape
                return
            A = A.to_scipy()
        shape, indptr, indices, data, _ = _csr_parts(A)
        vd = _value_dtype(check_value(data.dtype, "the matrix"), dtype)
        indptr = _index_array(indptr)
        indices = _index_array(indices)
        if vd.kind == "c":
            # Complex values: converted to ``vd`` here, validated on the host (the host copy is
            # kept) and uploaded when the matrix goes to the GPU.
            data = np.ascontiguousarray(data, dtype=vd)
            self._m = _core._Matrix(int(shape[0]), int(shape[1]), indptr, indices, data, device,
                                    str(vd), bool(reuse_buffers))
        else:
            # float32/float64 data travel in their own dtype (converted on the device when it
            # differs from the matrix's); other dtypes are converted by NumPy here.
            data = np.ascontiguousarray(data, dtype=data.dtype if data.dtype in _FLOATS else vd)
            self._m = _core._Matrix(int(shape[0]), int(shape[1]), indptr, indices, data, device,
                                    str(vd), bool(reuse_buffers))
        self._dtype = vd
        self._shape = (int(shape[0]), int(shape[1]))

    # --- properties ------------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, int]:
        """``(nrows, ncols)``."""
        return self._shape

    @property
    def nnz(self) -> int:
        """Stored entries."""
        return self._m.nnz

    @property
    def dtype(self) -> np.dtype:
        """``float32``, ``float64``, ``complex64`` or ``complex128``."""
        return self._dtype

    @property
    def device(self) -> str:
        """``"gpu"`` when the matrix is uploaded to the GPU, else ``"cpu"``."""
        return "gpu" if self._m.on_gpu else "cpu"

    @property
    def upload_seconds(self) -> dict:
        """Where the construction's seconds went. On the GPU: ``staging`` (allocating the
        pinned buffers; 0 when kept ones were reused), ``copy`` (the three arrays to the device),
        ``check`` (validation and conversion kernels), ``tables`` (the SpMV's structure tables
        and row statistics), ``total`` (all of it, from the call into the extension). On the
        CPU: ``total``. A complex matrix: ``check`` (validation on the host), ``copy`` (the
        upload with its SpMV tables, on the GPU), ``total``."""
        return dict(self._m.upload_seconds)

    @property
    def gpu_algorithm(self) -> Optional[str]:
        """The GPU SpMV algorithm chosen for this matrix at upload (``None`` on the CPU)."""
        return self._m.gpu_algorithm

    def __repr__(self) -> str:
        r, c = self._shape
        return f"<segsparse.Matrix {r}x{c}, {self.nnz} stored entries, {self._dtype}, {self.device}>"

    # --- conversion ------------------------------------------------------------------------
    def to_scipy(self):
        """A ``scipy.sparse.csr_matrix`` copy (needs SciPy)."""
        import scipy.sparse as sp

        indptr, indices, data = self._m.to_arrays()
        return sp.csr_matrix((data, indices, indptr), shape=self._shape)

    # --- SpMV ------------------------------------------------------------------------------
    def spmv(self, x: Any, alpha: float = 1.0, beta: float = 0.0, y: Any = None):
        """``y <- alpha * A @ x + beta * y``; returns ``y``.

        ``x`` and ``y`` are NumPy arrays (or anything ``np.asarray`` takes), or CuPy / other
        ``__cuda_array_interface__`` device arrays. With ``y=None`` a new array is returned
        (``beta`` must then be 0); a given ``y`` must be a contiguous 1-D array of the matrix's
        dtype and is written in place.

        NumPy vectors: on a CPU matrix the multiply runs on the CPU (multithreaded); on a GPU
        matrix ``x`` (and ``y`` when ``beta != 0``) are copied to the device and ``y`` back.

        Device vectors (the matrix must be on the GPU): no copy at all. The multiply is queued
        after the work already queued on CuPy's current stream (and on ``x``'s interface stream)
        and everything queued on the current stream afterwards runs after it: events order the
        streams, the host does not wait. The result is a CuPy array on the same device.
        """
        if (
            type(x) is np.ndarray
            and x.dtype == self._dtype
            and x.flags.c_contiguous
            and (y is None or type(y) is np.ndarray)
            and type(alpha) in _PLAIN
            and type(beta) in _PLAIN
        ):
            # The hot path, kept short (the binding-overhead goal is <= 10 us a call): the Rust
            # side checks lengths, contiguity, y's dtype, and that x and y do not overlap
            # (rust-numpy's borrow tracking refuses a writable y that aliases x).
            if y is None:
                if beta != 0:
                    raise ValueError("beta != 0 needs y")
                y = np.empty(self._shape[0], dtype=self._dtype)
            self._m.spmv_host(alpha, x, beta, y)
            return y
        dx = device_array(x, "x")
        xd = dx.dtype if dx is not None else getattr(x, "dtype", None)
        if xd is None:
            x = np.asarray(x)
            xd = x.dtype
        # A complex alpha or beta counts as the narrowest complex type (as NumPy's Python
        # scalars do: float32 data with 1j stay complex64).
        scal = np.complex64 if (np.iscomplexobj(alpha) or np.iscomplexobj(beta)) else None
        rt = complex_result(self._dtype, xd, scal)
        if rt is not None:
            return self._spmv_complex(x, dx, rt, alpha, beta, y)
        if dx is not None:
            return self._spmv_device(x, dx, alpha, beta, y)
        if beta != 0 and y is None:
            raise ValueError("beta != 0 needs y")
        x = host_vector(x, self._dtype, "x")
        if y is None:
            y = np.empty(self._shape[0], dtype=self._dtype)
        elif not (
            isinstance(y, np.ndarray) and y.dtype == self._dtype and y.flags.c_contiguous
        ):
            raise ValueError(f"y must be a contiguous NumPy array of dtype {self._dtype}")
        self._m.spmv_host(alpha, x, beta, y)
        return y

    def _spmv_complex(self, x, dx, rt, alpha, beta, y):
        """``y <- alpha A x + beta y`` where the matrix, ``x``, ``alpha`` or ``beta`` is complex,
        in ``rt`` (NumPy's promotion of their dtypes).

        A complex matrix of dtype ``rt`` multiplies where it lives: on the GPU a CuPy ``x`` of
        another dtype is converted on the device and the product written in ``y`` (no copy),
        a NumPy ``x`` is copied over and back; a complex matrix of a narrower dtype is converted
        to ``rt`` first (``O(nnz)`` per call: convert once with ``Matrix(A, dtype=...)``). A real
        matrix
        multiplies the real and imaginary parts of ``x`` separately where it lives (GPU or CPU;
        converted to ``rt``'s precision first when it is narrower)."""
        xp = cupy() if dx is not None else np
        if y is None and beta != 0:
            raise ValueError("beta != 0 needs y")
        if y is not None and (getattr(y, "dtype", None) != rt
                              or (device_array(y, "y") is None) != (dx is None)):
            kind = "device" if dx is not None else "NumPy"
            raise ValueError(f"y must be a contiguous {kind} array of dtype {rt} (the result "
                             "dtype, NumPy's promotion)")
        if self._dtype.kind == "c":
            m = self if self._dtype == rt else Matrix(self, dtype=rt, device=self.device)
            return m._complex_op("n", x, dx, alpha, beta, y)
        part = real_of(rt)
        m = self if self._dtype == part else Matrix(self, dtype=part, device=self.device)
        xc = xp.asarray(x).astype(rt, copy=False).reshape(-1)
        re = m.spmv(xp.ascontiguousarray(xc.real))
        im = m.spmv(xp.ascontiguousarray(xc.imag))
        out = (re + 1j * im).astype(rt)
        if alpha != 1:
            out *= rt.type(alpha)
        if y is None:
            return out
        if beta != 0:
            out += rt.type(beta) * y
        y[...] = out
        return y

    def _complex_op(self, op, x, dx, alpha, beta, y):
        """``y <- alpha op(A) x + beta y`` for this complex matrix (``op`` ``"n"``: ``A``,
        ``"h"``: ``A^H``), ``x`` and ``y`` of any dtype that promotes to the matrix's (checked by
        the caller)."""
        dt = self._dtype
        rows = self._shape[0] if op == "n" else self._shape[1]
        cols = self._shape[1] if op == "n" else self._shape[0]
        if y is None and beta != 0:
            raise ValueError("beta != 0 needs y")
        if dx is not None and self.device == "gpu":
            cp = cupy()
            if dx.dtype != dt:
                x = cp.ascontiguousarray(x, dtype=dt)  # NumPy promotion, on the device
                dx = device_array(x, "x")
            if y is None:
                y = cp.empty(rows, dtype=dt)
            dy = device_array(y, "y", writable=True)
            if dy is None or dy.dtype != dt:
                raise ValueError(f"y must be a device array of dtype {dt} (the result dtype, "
                                 "NumPy's promotion)")
            if dy.n != rows or dx.n != cols:
                raise ValueError(f"spmv: x has {dx.n} elements and y {dy.n}; the operator is "
                                 f"{rows}x{cols}")
            if dy.ptr == dx.ptr and dx.n > 0:
                raise ValueError("x and y must not overlap")
            cs = current_stream()
            self._m.spmv_device(alpha, dx.ptr, beta, dy.ptr, wait_list(cs, dx, dy), cs, op)
            return y
        # NumPy vectors (copied over and back by the binding when the matrix is on the GPU), or
        # a CuPy x with a CPU matrix (copied to the host and the result back).
        xp = cupy() if dx is not None else np
        xh = host_vector(cupy().asnumpy(x) if dx is not None else x, dt, "x")
        if y is not None and dx is None and isinstance(y, np.ndarray) and y.dtype == dt \
                and y.flags.c_contiguous:
            self._m.spmv_host(alpha, xh, beta, y, op)
            return y
        yh = np.empty(rows, dtype=dt)
        if beta != 0:
            yh[...] = cupy().asnumpy(y) if dx is not None else y
        self._m.spmv_host(alpha, xh, beta, yh, op)
        if y is None:
            return xp.asarray(yh)
        y[...] = xp.asarray(yh)
        return y

    def _spmv_device(self, x, dx, alpha, beta, y):
        if dx.dtype != self._dtype:
            check_real(dx.dtype, "x")
            x = cupy().ascontiguousarray(x, dtype=self._dtype)
            dx = device_array(x, "x")
        if y is None:
            if beta != 0:
                raise ValueError("beta != 0 needs y")
            y = cupy().empty(self._shape[0], dtype=self._dtype)
        dy = device_array(y, "y", writable=True)
        if dy is None or dy.dtype != self._dtype:
            raise ValueError(f"y must be a device array of dtype {self._dtype} like x")
        if dy.n != self._shape[0] or dx.n != self._shape[1]:
            raise ValueError(
                f"spmv: x has {dx.n} elements and y {dy.n}; the matrix is "
                f"{self._shape[0]}x{self._shape[1]}"
            )
        if dy.ptr == dx.ptr and dx.n > 0:
            raise ValueError("x and y must not overlap")
        cs = current_stream()
        self._m.spmv_device(alpha, dx.ptr, beta, dy.ptr, wait_list(cs, dx, dy), cs)
        return y

    def __matmul__(self, x: Any):
        """``A @ x``: the product with a vector (NumPy in, NumPy out; CuPy in, CuPy out)."""
        return self.spmv(x)

    def dot(self, x: Any):
        """``A @ x``."""
        return self.spmv(x)

    def rmatvec(self, x: Any, y: Any = None):
        """``A^H @ x`` (the conjugate transpose; ``A^T @ x`` for a real matrix).

        A complex matrix multiplies where it lives, as ``A @ x`` does: on the GPU ``A^H`` is
        built on the device once (kept with the matrix) and a CuPy ``x`` is multiplied without
        a copy (a given CuPy ``y`` of the result dtype is written in place); ``x`` of another
        dtype follows NumPy's promotion (a complex64 matrix with a float64 or complex128 ``x``
        is converted to complex128 first). A real matrix multiplies as ``to_scipy().T @ x`` on
        the host."""
        if self._dtype.kind == "c":
            dx = device_array(x, "x")
            xd = dx.dtype if dx is not None else getattr(x, "dtype", None)
            if xd is None:
                x = np.asarray(x)
                xd = x.dtype
            rt = complex_result(self._dtype, xd)
            m = self if self._dtype == rt else Matrix(self, dtype=rt, device=self.device)
            return m._complex_op("h", x, dx, 1.0, 0.0, y)
        return self.to_scipy().T @ np.asarray(x)

    @property
    def H(self) -> "_Adjoint":
        """The conjugate transpose as an operator: ``A.H @ x`` is ``A.rmatvec(x)``."""
        return _Adjoint(self)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:  # noqa: F821
        """Writes the matrix to a Matrix Market file (``.gz``: compressed)."""
        self._m.write_matrix_market(path)


class _Adjoint:
    """``A^H`` of a ``Matrix``: ``A.H @ x`` multiplies with the conjugate transpose."""

    __slots__ = ("_a",)

    def __init__(self, a: Matrix):
        self._a = a

    @property
    def shape(self) -> Tuple[int, int]:
        return (self._a.shape[1], self._a.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def H(self) -> Matrix:
        return self._a

    def __matmul__(self, x: Any):
        return self._a.rmatvec(x)

    def dot(self, x: Any):
        return self._a.rmatvec(x)

    def matvec(self, x: Any):
        return self._a.rmatvec(x)


def _index_array(a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype not in (np.int32, np.uint32, np.int64):
        a = a.astype(np.int64)
    return np.ascontiguousarray(a)


def as_matrix(A: Any, device: str = "auto") -> Matrix:
    """``A`` itself when it is a ``Matrix``, else ``Matrix(A, device=device)``."""
    return A if isinstance(A, Matrix) else Matrix(A, device=device)


def load_matrix_market(path, *, dtype: Any = np.float64, as_matrix: bool = False, device="auto"):
    """Reads a Matrix Market file (``.mtx`` or ``.mtx.gz``; real, integer, pattern or complex;
    general, symmetric, skew-symmetric or Hermitian). ``dtype``: ``float32``, ``float64``,
    ``complex64`` or ``complex128`` (a complex file needs a complex dtype; a real file read as
    complex gets zero imaginary parts).

    Returns a ``scipy.sparse.csr_matrix`` (canonical: sorted indices, no duplicates), or with
    ``as_matrix=True`` a ``segsparse.Matrix`` on ``device`` (no SciPy needed).

    Raises ``MatrixMarketError`` (with ``.path`` and ``.line``) for a malformed file and
    ``FileNotFoundError`` for a missing one.
    """
    d = np.dtype(dtype)
    if d not in _FLOATS and d not in _COMPLEX:
        raise TypeError(f"dtype must be float32, float64, complex64 or complex128, not {d}")
    nrows, ncols, indptr, indices, data = _core.read_matrix_market(str(path), str(d))
    if as_matrix:
        m = Matrix.__new__(Matrix)
        m._m = _core._Matrix(nrows, ncols, indptr, indices, data, device)
        m._dtype, m._shape = d, (nrows, ncols)
        return m
    import scipy.sparse as sp

    return sp.csr_matrix((data, indices, indptr), shape=(nrows, ncols))


def save_matrix_market(path, A: Any) -> None:
    """Writes ``A`` (a ``Matrix``, SciPy/CuPy sparse matrix or dense array) as a Matrix Market
    coordinate file; a path ending in ``.gz`` is compressed."""
    m = A if isinstance(A, Matrix) else Matrix(A, device="cpu")
    m.save(str(path))
