"""Smoothed-aggregation algebraic multigrid: build the hierarchy once, solve many right-hand
sides with it, or hand it to SciPy as a preconditioner.

    ml = segsparse.amg(A)                         # setup where A lives (on the GPU: on the device)
    x, info = ml.solve(b, rtol=1e-8)              # AMG-preconditioned CG
    x, info = segsparse.gmres(A, b, M=ml)         # any segsparse solver takes it as M
    M = ml.aspreconditioner()                     # a scipy.sparse.linalg.LinearOperator
    x, _ = scipy.sparse.linalg.cg(A, b, M=M)
    ml.update(A2)                                 # new values, same pattern: numeric re-setup

``M="amg"`` in ``cg``/``pcg``/``bicgstab``/``gmres`` builds a hierarchy with the defaults for
that one solve.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _core
from .matrix import Matrix, as_matrix

__all__ = ["AMG", "amg"]


class AMG:
    """A smoothed-aggregation AMG hierarchy of one matrix (see ``segsparse.amg``)."""

    def __init__(self, matrix: Matrix, handle: Any):
        self.matrix = matrix
        self._a = handle

    @property
    def levels(self) -> List[Tuple[int, int]]:
        """``(rows, nnz)`` of every level, finest first."""
        return self._a.levels()

    @property
    def operator_complexity(self) -> float:
        """Σ nnz(A_l) / nnz(A_0)."""
        return self._a.operator_complexity()

    @property
    def grid_complexity(self) -> float:
        """Σ rows(A_l) / rows(A_0)."""
        return self._a.grid_complexity()

    @property
    def device_bytes(self) -> int:
        """Bytes of the hierarchy on its device."""
        return self._a.device_bytes()

    @property
    def setup_seconds(self) -> float:
        """Seconds of the last setup or ``update``."""
        return self._a.setup_seconds()

    def level_matrices(self) -> list:
        """The level operators, finest first, as ``scipy.sparse.csr_matrix`` copies (downloaded
        from the device: for inspection and tests)."""
        import scipy.sparse as sp

        return [sp.csr_matrix((data, indices, indptr), shape=shape)
                for indptr, indices, data, shape in self._a.level_matrices()]

    @property
    def rhos(self) -> List[float]:
        """The estimate of ρ(D⁻¹A) of every level, finest first."""
        return self._a.rhos()

    def summary(self) -> str:
        """A printable table of the levels."""
        return self._a.summary()

    def __repr__(self) -> str:
        return self.summary()

    def update(self, A: Any) -> None:
        """New values on the pattern the hierarchy was built for (numeric re-setup: the
        aggregation and the symbolic products are kept)."""
        m = as_matrix(A, device=self.matrix.device)
        self._a.update(m._m)
        self.matrix = m

    def solve(self, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
              maxiter: Optional[int] = None, accel: str = "cg", check_every: Optional[int] = None):
        """Solves ``A x = b`` with this hierarchy preconditioning ``accel`` (``"cg"``,
        ``"bicgstab"`` or ``"gmres"``): returns ``(x, info)`` like ``segsparse.cg``."""
        from . import solvers

        f = {"cg": solvers.cg, "bicgstab": solvers.bicgstab, "gmres": solvers.gmres}.get(accel)
        if f is None:
            raise ValueError(f"accel must be 'cg', 'bicgstab' or 'gmres', not {accel!r}")
        return f(self.matrix, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=self,
                 check_every=check_every)

    def aspreconditioner(self):
        """A ``scipy.sparse.linalg.LinearOperator`` applying one cycle (NumPy vectors; on the
        GPU each application copies the vector over and back)."""
        from scipy.sparse.linalg import LinearOperator

        n = self.matrix.shape[0]
        dtype = np.dtype(self.matrix.dtype)

        def matvec(r):
            r = np.ascontiguousarray(np.asarray(r).reshape(-1), dtype=dtype)
            z = np.zeros(n, dtype=dtype)
            self._a.apply_host(r, z)
            return z

        return LinearOperator((n, n), matvec=matvec, rmatvec=matvec, dtype=dtype)


def amg(A: Any, *, theta: float = 0.0, smoother: str = "chebyshev", degree: int = 3,
        sweeps: int = 1, cycle: str = "V", coarse_size: int = 300, max_levels: int = 10,
        candidates: Any = None, block_size: int = 1, improve_candidates: int = 0,
        device: str = "auto") -> AMG:
    """Builds a smoothed-aggregation AMG hierarchy of ``A`` (SPD, positive diagonal).

    Args:
        A: a ``segsparse.Matrix`` or anything ``segsparse.Matrix`` accepts.
        theta: strength-of-connection threshold (0: every connection is strong, PyAMG's SA
            default).
        smoother: ``"chebyshev"`` (degree ``degree`` in D⁻¹A), ``"jacobi"`` or ``"l1-jacobi"``.
        sweeps: smoothing steps before and after the coarse correction.
        cycle: ``"V"`` or ``"W"``.
        coarse_size: coarsen until at most this many rows, then invert densely.
        candidates: ``n × k`` near-nullspace vectors (default: the constant), e.g. the
            rigid-body modes of an elastic body, with ``block_size`` unknowns per node.
        improve_candidates: smoothing steps on ``A x = 0`` applied to the candidates first.
        device: where to put ``A`` if it is not a ``segsparse.Matrix`` yet.

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> n = 40; I = sp.identity(n); T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (n, n))
        >>> A = (sp.kron(T, I) + sp.kron(I, T)).tocsr()
        >>> ml = segsparse.amg(A, device="cpu")
        >>> x, info = ml.solve(A @ np.ones(n * n), rtol=1e-8)
        >>> bool(info.converged), info.iterations < 15
        (True, True)
    """
    m = as_matrix(A, device=device)
    cand = None
    if candidates is not None:
        cand = np.ascontiguousarray(np.asarray(candidates, dtype=np.float64))
        if cand.ndim == 1:
            cand = cand.reshape(-1, 1)
        if cand.ndim != 2 or cand.shape[0] != m.shape[0]:
            raise ValueError(
                f"candidates must be an n x k array with n = {m.shape[0]} rows, got shape "
                f"{np.shape(candidates)}")
    h = _core._Amg(m._m, theta, smoother, degree, sweeps, cycle, coarse_size, max_levels,
                   block_size, improve_candidates, cand)
    return AMG(m, h)
