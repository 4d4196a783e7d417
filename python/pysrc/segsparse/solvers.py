"""Iterative solvers with SciPy's calling convention: ``x, info = segsparse.cg(A, b)``.

Each solver runs the crate's single solver body, on the GPU when the matrix is there (every
scalar of the iteration stays on the device; the host checks convergence every
``check_every`` iterations) and on the CPU otherwise.

Methods: ``cg``, ``pcg``, ``bicgstab``, ``gmres``; preconditioners (``M=``): ``None``,
``"jacobi"``, ``"poly"`` (the crate's Chebyshev polynomial), ``"ilu0"`` and ``"ic0"``
(incomplete LU / Cholesky without fill, two triangular solves per application), ``"amg"``
(smoothed-aggregation multigrid with the defaults) or a hierarchy from ``segsparse.amg``. Adding one is an arm in the Rust
dispatch (``python/src/matrix.rs``: ``Method`` / ``Precond`` / ``opts`` / ``solve_with``) and a
thin function here that calls ``_solve`` with its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

import numpy as np

from ._arrays import check_real, current_stream, cupy, device_array, host_vector, wait_list
from .matrix import Matrix, as_matrix

__all__ = ["SolveInfo", "cg", "pcg", "bicgstab"]


@dataclass
class SolveInfo:
    """What a solve did. ``bool(info)`` is ``info.converged``.

    Attributes:
        converged: the true residual ``||b - A x|| / ||b||`` reached the tolerance.
        status: SciPy's ``info`` integer: 0 converged, > 0 the iterations done without
            converging, -1 a breakdown (e.g. ``p^T A p <= 0`` in CG: A is not SPD), -2 a NaN or
            infinite residual: a NaN or infinity in ``A``, ``b`` or ``x0`` gives -2 with
            ``iterations == 0`` on every solver (never ``converged``); an overflow later on, -2
            at its iteration.
        iterations: iterations performed (CG: one SpMV each; BiCGSTAB: two).
        residual: the true relative residual of the returned ``x`` (NaN after a breakdown).
        time: the same as ``solve_seconds`` (kept for existing code).
        setup_seconds: seconds from the call to the solver call: uploading ``b`` and ``x``, the
            Jacobi diagonal or the preconditioner's setup (0 for a given ``segsparse.amg``
            hierarchy beyond its use); the crate's timing model, as ``sparse-solve`` reports it.
        solve_seconds: seconds of the solver call itself (workspace, iterations, the true
            residual; the device synchronised), for failed solves too. Seconds per iteration
            are ``solve_seconds / iterations``.
        history: relative residual after each iteration (entry 0: the initial one); empty when
            the solve did not converge.
        restarts: restarts from the true residual (see the crate's solver docs).
        method: ``"cg"``, ``"pcg"``, ``"bicgstab"`` or ``"gmres"``.
        device: ``"gpu"`` or ``"cpu"``: where it ran.
        message: ``"converged"`` or the reason it did not.
    """

    converged: bool
    status: int
    iterations: int
    residual: float
    time: float
    history: np.ndarray = field(repr=False)
    restarts: int
    method: str
    device: str
    message: str
    setup_seconds: float = 0.0
    solve_seconds: float = 0.0

    def __bool__(self) -> bool:
        return self.converged


def _solve(
    method: str,
    precond: str,
    name: str,
    A: Any,
    b: Any,
    x0: Any,
    rtol: float,
    atol: float,
    maxiter: Optional[int],
    check_every: Optional[int],
    device: str,
    restart: int = 30,
    degree: int = 4,
) -> Tuple[Any, SolveInfo]:
    hierarchy = None
    if not isinstance(precond, str):  # an AMG object from segsparse.amg
        hierarchy, precond = precond, "amg"
        if not isinstance(A, Matrix):
            A = hierarchy.matrix
    db = device_array(b, "b")
    if db is not None and not isinstance(A, Matrix):
        device = "gpu"  # a CuPy right-hand side wants the matrix on the GPU
    m = as_matrix(A, device=device)
    n, ncols = m.shape
    if maxiter is None:
        maxiter = 10 * max(n, 1)  # SciPy's default
    if maxiter < 0:
        raise ValueError(f"maxiter must be >= 0, got {maxiter}")
    if check_every is not None and check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    if n != ncols:
        raise ValueError(f"{name} needs a square matrix, got {n}x{ncols}")
    if db is not None:
        cp = cupy()
        if db.dtype != m.dtype:
            check_real(db.dtype, "b")
            b = cp.ascontiguousarray(b, dtype=m.dtype)
            db = device_array(b, "b")
        if db.n != n:
            raise ValueError(f"b has {db.n} elements but the matrix has {n} rows")
        if x0 is None:
            x = cp.zeros(n, dtype=m.dtype)
        else:
            check_real(x0.dtype if hasattr(x0, "dtype") else np.asarray(x0).dtype, "x0")
            x = cp.array(x0, dtype=m.dtype, copy=True).reshape(-1)
            if x.size != n:
                raise ValueError(f"x0 has {x.size} elements but the matrix has {n} columns")
        dx = device_array(x, "x", writable=True)
        out = m._m.solve_device(
            method, precond, db.ptr, dx.ptr, rtol, atol, maxiter, x0 is not None,
            wait_list(current_stream(), db, dx), current_stream(), check_every, restart, degree,
            None if hierarchy is None else hierarchy._a,
        )
    else:
        b = host_vector(b, m.dtype, "b")
        if b.shape[0] != n:
            raise ValueError(f"b has {b.shape[0]} elements but the matrix has {n} rows")
        if x0 is None:
            x = np.zeros(n, dtype=m.dtype)
        else:
            x0 = np.asarray(x0)
            check_real(x0.dtype, "x0")
            x = np.array(x0, dtype=m.dtype, copy=True).reshape(-1)
            if x.shape[0] != n:
                raise ValueError(f"x0 has {x.shape[0]} elements but the matrix has {n} columns")
        out = m._m.solve_host(
            method, precond, b, x, rtol, atol, maxiter, x0 is not None, check_every, restart,
            degree, None if hierarchy is None else hierarchy._a,
        )
    converged, status, iters, res, secs, hist, restarts, msg, setup = out
    info = SolveInfo(
        converged=converged, status=status, iterations=iters, residual=res, time=secs,
        history=np.asarray(hist, dtype=np.float64), restarts=restarts, method=name,
        device=m.device, message=msg, setup_seconds=setup, solve_seconds=secs,
    )
    return x, info


def _precond(M: Any) -> Any:
    from .amg import AMG

    if M is None:
        return "none"
    if isinstance(M, AMG):
        return M
    if isinstance(M, str) and M.lower() in ("jacobi", "none", "poly", "ilu0", "ic0", "amg"):
        return M.lower()
    raise TypeError(
        "M must be None, 'jacobi', 'poly', 'ilu0', 'ic0', 'amg' or a segsparse.amg hierarchy "
        "(segsparse applies its own preconditioners on the "
        f"device; a SciPy LinearOperator is not supported), got {type(M).__name__}"
    )


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, check_every=None,
       device="auto"):
    """Conjugate gradient for a symmetric positive definite ``A``: returns ``(x, info)``.

    Args:
        A: a ``segsparse.Matrix`` (reuse it for repeated solves: it is uploaded once), or any
            ``scipy.sparse`` / ``cupyx.scipy.sparse`` matrix or dense array (converted, and
            uploaded, on each call).
        b: right-hand side: a NumPy array (the solution is NumPy) or a CuPy array (the
            solution is CuPy and stays on the device: no host copy).
        x0: initial guess (default zeros).
        rtol, atol: stop when ``||b - A x|| <= max(rtol * ||b||, atol)``, SciPy's criterion,
            checked on the true residual before reporting convergence.
        maxiter: iteration limit (default ``10 * n`` as in SciPy).
        M: ``None``, ``"jacobi"`` (diagonal preconditioning; see ``pcg``) or ``"poly"`` (the
            crate's Chebyshev polynomial in the Jacobi-scaled matrix, degree 4, with eigenvalue
            bounds from 16 Lanczos steps: fewer iterations, each costing 5 SpMVs), ``"ic0"``
            (incomplete Cholesky: SPD, for ``cg``/``pcg``) or ``"ilu0"`` (incomplete LU, for
            ``gmres``/``bicgstab``); the factorization is set up at each call, with a diagonal
            shift added automatically when a pivot vanishes, ``"amg"``
            (smoothed-aggregation multigrid, built for this solve) or a hierarchy from
            ``segsparse.amg`` (built once, reused).
        check_every: on the GPU, read the convergence status every this many iterations
            (default 16; the reported iteration count is exact either way).
        device: where to put a matrix that is not a ``segsparse.Matrix`` yet
            (``"auto"``, ``"gpu"``, ``"cpu"``).

    Returns:
        ``(x, info)``: the solution (or last iterate) and a ``SolveInfo`` (``info.converged``,
        ``info.iterations``, ``info.residual``, ``info.time``, ``info.history``, and SciPy's
        integer as ``info.status``). Not converging is reported in ``info``, not raised.

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
        >>> x, info = segsparse.cg(A, np.ones(100), rtol=1e-10)
        >>> bool(info.converged), np.linalg.norm(A @ x - 1) < 1e-8
        (True, True)
    """
    return _solve("cg", _precond(M), "cg" if M is None else "pcg", A, b, x0, rtol, atol,
                  maxiter, check_every, device)


def pcg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M="jacobi", check_every=None,
        device="auto"):
    """Preconditioned conjugate gradient (default: Jacobi, ``M = diag(A)``, fused into the
    vector updates): returns ``(x, info)``. Arguments as ``cg``; ``A`` must be SPD with a
    nonzero diagonal."""
    return _solve("cg", _precond(M), "pcg", A, b, x0, rtol, atol, maxiter, check_every, device)


def bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, check_every=None,
             device="auto"):
    """BiCGSTAB for a general (unsymmetric) ``A``, optionally right-preconditioned by Jacobi
    (``M="jacobi"``): returns ``(x, info)``. Arguments as ``cg``; one iteration costs two
    SpMVs. A breakdown (a vanishing ``rho``, ``r^T v`` or ``omega``) is reported as
    ``info.status == -1`` after the crate's restarts are exhausted."""
    return _solve("bicgstab", _precond(M), "bicgstab", A, b, x0, rtol, atol, maxiter,
                  check_every, device)


def gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=30, maxiter=None, M=None,
          check_every=None, device="auto"):
    """Restarted GMRES(``restart``) for any nonsingular ``A``, right-preconditioned by ``M``
    (``None``, ``"jacobi"``, ``"poly"``, ``"ilu0"`` or ``"ic0"``): returns ``(x, info)``. Arguments as ``cg``;
    ``maxiter`` counts inner iterations (Arnoldi steps), not restart cycles as SciPy's does.
    Classical Gram-Schmidt applied twice, Givens rotations on the device; a cycle that makes no
    progress is reported as stagnation (``info.status == -1``, ``info.message`` says so).

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> A = sp.diags([-1.0, 3.0, -0.5], [-1, 0, 1], shape=(200, 200), format="csr")
        >>> x, info = segsparse.gmres(A, np.ones(200), rtol=1e-10)
        >>> bool(info.converged), np.linalg.norm(A @ x - 1) < 1e-8
        (True, True)
    """
    if not 1 <= int(restart) <= 255:
        raise ValueError(f"restart must be in 1..=255, got {restart}")
    return _solve("gmres", _precond(M), "gmres", A, b, x0, rtol, atol, maxiter, check_every,
                  device, restart=int(restart))
