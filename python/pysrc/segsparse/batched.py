"""Many independent small sparse systems solved at once: ``batched_solve``.

One small system cannot fill a GPU; thousands can. The crate's batched solvers run CG, BiCGSTAB
or GMRES with Jacobi (or no) preconditioning on every system of a batch in one kernel on the GPU
(one thread block per system) and over the systems with rayon on the CPU, each system with its
own convergence, status and iteration count.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from . import _core
from ._arrays import check_real, cupy


class Batch:
    """A batch of square sparse systems, converted once (reuse it for several right-hand sides).

    ``systems`` is a sequence of square matrices: ``scipy.sparse`` matrices, dense arrays, or
    anything ``scipy.sparse.csr_matrix`` accepts. The systems may differ in size and pattern.
    """

    def __init__(self, systems: Sequence[Any], dtype: Any = None):
        import scipy.sparse as sp

        if isinstance(systems, Batch):
            self.__dict__.update(systems.__dict__)
            return
        if not isinstance(systems, (list, tuple)):
            raise TypeError("batched_solve needs a list of square matrices or a segsparse.Batch, "
                            f"not {type(systems).__name__}")
        mats = []
        for s, a in enumerate(systems):
            if type(a).__module__.startswith(("cupy", "cupyx")):
                a = a.get()  # a CuPy matrix: its host copy
            m = sp.csr_matrix(a)
            if m.shape[0] != m.shape[1]:
                raise ValueError(f"system {s} is {m.shape[0]}x{m.shape[1]}: systems must be "
                                 "square")
            mats.append(m)
        if dtype is None:
            dtype = np.float32 if mats and all(m.dtype == np.float32 for m in mats) \
                else np.float64
        dtype = check_real(dtype, "the systems")
        self.sizes = [int(m.shape[0]) for m in mats]
        block = sp.block_diag(mats, format="csr", dtype=dtype) if mats else \
            sp.csr_matrix((0, 0), dtype=dtype)
        block.sort_indices()
        self.indptr = np.ascontiguousarray(block.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(block.indices, dtype=np.int64)
        self.data = np.ascontiguousarray(block.data, dtype=dtype)
        self.dtype = np.dtype(dtype)

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def total_rows(self) -> int:
        return int(sum(self.sizes))


def batched_solve(systems: Any, b: Any, *, method: str = "cg", M: Optional[str] = "jacobi",
                  rtol: float = 1e-8, atol: float = 0.0, maxiter: int = 1000,
                  restart: int = 30, device: str = "auto"):
    """Solves the independent systems ``A_s x_s = b_s`` at once, from ``x_s = 0``.

    Args:
        systems: a list of square matrices (sizes and patterns may differ) or a
            ``segsparse.Batch`` (converted once, reusable).
        b: the right-hand sides: a list of 1-D arrays (one per system), or one 1-D array of
            all of them concatenated (``batch.total_rows`` entries). NumPy or CuPy (a CuPy
            ``b`` goes through the host once and the solution comes back as CuPy).
        method: ``"cg"`` (SPD systems), ``"bicgstab"`` or ``"gmres"`` (restarted every
            ``restart`` <= 64 iterations).
        M: ``"jacobi"`` (default), ``"ilu0"`` (ILU(0) of each system on its own pattern) or
            ``None``.
        rtol, atol: stop a system when ``||b_s - A_s x_s|| <= max(rtol ||b_s||, atol)``.
        maxiter: iteration limit per system.
        device: ``"auto"`` (the GPU when one works), ``"gpu"`` or ``"cpu"``.

    Returns:
        ``(x, info)``: ``x`` in the form of ``b`` (a list, or one concatenated array), and a
        dict with per-system ``status`` (``"converged"``, ``"not_converged"``,
        ``"breakdown"``, ``"non_finite"``, ``"zero_diagonal"``), ``converged`` (bool array),
        ``iterations`` and ``residual`` (true relative residuals) arrays, ``seconds`` and
        ``device``.

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> As = [sp.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(n, n)) for n in (5, 8, 13)]
        >>> x, info = segsparse.batched_solve(As, [np.ones(n) for n in (5, 8, 13)],
        ...                                   device="cpu")
        >>> bool(info["converged"].all()), [len(v) for v in x]
        (True, [5, 8, 13])
    """
    batch = systems if isinstance(systems, Batch) else Batch(systems)
    if method not in ("cg", "bicgstab", "gmres"):
        raise ValueError(f"unknown method {method!r}: 'cg', 'bicgstab' or 'gmres'")
    pre = "none" if M is None else str(M).lower()
    if pre not in ("none", "jacobi", "ilu0"):
        raise ValueError(f"unknown preconditioner {M!r}: batched solves take None, 'jacobi' "
                         "or 'ilu0'")
    if int(maxiter) < 0:
        raise ValueError(f"maxiter must be >= 0, got {maxiter}")
    if not 1 <= int(restart) <= 64:
        raise ValueError(f"restart must be in 1..=64 for batched GMRES, got {restart}")
    if device not in ("auto", "gpu", "cpu"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'cpu', not {device!r}")
    as_list = isinstance(b, (list, tuple))
    on_gpu_input = False
    if as_list:
        if len(b) != len(batch):
            raise ValueError(f"{len(b)} right-hand sides for {len(batch)} systems")
        parts = []
        for s, (bs, n) in enumerate(zip(b, batch.sizes)):
            if hasattr(bs, "__cuda_array_interface__"):
                on_gpu_input = True
                bs = cupy().asnumpy(bs)
            bs = np.asarray(bs)
            if bs.ndim != 1 or bs.shape[0] != n:
                raise ValueError(f"right-hand side {s} has shape {bs.shape}, system {s} has "
                                 f"{n} rows")
            parts.append(bs)
        bh = np.concatenate(parts) if parts else np.zeros(0)
    else:
        if hasattr(b, "__cuda_array_interface__"):
            on_gpu_input = True
            b = cupy().asnumpy(b)
        bh = np.asarray(b)
        if bh.ndim != 1 or bh.shape[0] != batch.total_rows:
            raise ValueError(f"b has shape {bh.shape}; the systems have {batch.total_rows} "
                             "rows in all (pass one 1-D array of them, or a list)")
    check_real(bh.dtype, "b")
    bh = np.ascontiguousarray(bh, dtype=batch.dtype)
    x = np.zeros(batch.total_rows, dtype=batch.dtype)
    gpu = device == "gpu" or (device == "auto" and _core.gpu_status()[0])
    status, iters, res, secs, where = _core.batched_solve_host(
        batch.sizes, batch.indptr, batch.indices, batch.data, bh, x, method, pre, float(rtol),
        float(atol), int(maxiter), int(restart), bool(gpu))
    info = {
        "status": list(status),
        "converged": np.array([s == "converged" for s in status], dtype=bool),
        "iterations": np.asarray(iters, dtype=np.int64),
        "residual": np.asarray(res, dtype=np.float64),
        "seconds": float(secs),
        "device": where,
    }
    if as_list:
        out: List[Any] = []
        r0 = 0
        for n in batch.sizes:
            out.append(x[r0:r0 + n])
            r0 += n
        if on_gpu_input:
            out = [cupy().asarray(v) for v in out]
        return out, info
    return (cupy().asarray(x) if on_gpu_input else x), info
