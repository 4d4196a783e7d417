"""Iterative solvers with SciPy's calling convention: ``x, info = segsparse.cg(A, b)``.

Every solve, of every element type and from every entry point, runs the crate's single solver
body once (``_solve`` checks the arguments, ``_run`` calls ``_core``): on the GPU when the
matrix is there (every scalar of the iteration stays on the device; the host checks convergence
every ``check_every`` iterations) and on the CPU otherwise. There is no second Krylov loop in
Python.

Methods: ``cg``, ``pcg``, ``bicgstab``, ``gmres``; preconditioners (``M=``): ``None``,
``"jacobi"``, ``"poly"`` (the crate's Chebyshev polynomial), ``"ilu0"`` and ``"ic0"``
(incomplete LU / Cholesky without fill, two triangular solves per application), ``"amg"``
(smoothed-aggregation multigrid with the defaults), a hierarchy from ``segsparse.amg``, or
``"auto"``: the one ``auto_choice`` picks for the matrix (``solve`` picks the method too). Adding
one is an arm in the Rust dispatch (``python/src/solve.rs``: ``Method`` / ``Precond`` /
``opts`` / ``call``, and ``solve_with`` in ``python/src/matrix.rs``) and a thin function here
that calls ``_solve`` with its name.

SciPy's contract (``scipy.sparse.linalg.cg`` and friends, SciPy 1.17) is kept: ``info``
compares equal to SciPy's integer; ``M`` may also be a ``LinearOperator``, a sparse or dense
matrix or a callable, and ``A`` a matrix-free operator (anything with ``matvec``); ``callback``
(and GMRES's ``callback_type``), ``x0='Mb'``, GMRES's ``maxiter`` in restart cycles, ``b = 0``
giving ``x = 0``, SciPy's ``ValueError`` for a bad ``atol``.

Python code in a solve — an ``M`` given as an operator, a matrix-free ``A`` (anything with
``matvec``), a ``callback`` — is called back from the crate's solver body on NumPy vectors of
the system's dtype, real or complex (``python/src/pyprecond.rs``): on the host directly; for a
matrix on the GPU each application of ``M`` makes a host round trip (the residual downloaded,
``M`` applied where its data lives — a CuPy ``M`` gets a CuPy copy —, the result uploaded), the
iterate is downloaded for each ``callback(xk)``, and CuPy ``b``/``x`` are copied to the host and
back once per solve; a matrix-free ``A`` runs on the CPU backend (a CuPy one is given CuPy
copies). ``callback(xk)`` gets a copy of the current iterate after each iteration (CG,
BiCGSTAB) or restart cycle (GMRES, ``callback_type='x'``), as SciPy's. GMRES's residual
callback (``'pr_norm'``/``'legacy'``) gets the crate's least-squares estimate of
``||r|| / ||b||``; with a Python ``M`` SciPy passes the left-preconditioned ``||M r|| / ||b||``,
so such a solve runs the crate's GMRES on ``M A x = M b`` (see ``_left_gmres``).

Complex systems (a complex ``A``, ``b`` or ``x0``: ``complex64``/``complex128``, NumPy's
promotion of the three, ``np.result_type``) run the same bodies with the complex element type:
``cg`` (Hermitian positive definite), ``cocg`` (``solve(..., method="cocg")``, complex
symmetric), ``bicgstab``, ``gmres``. A matrix on the GPU with a CuPy ``b`` and ``M`` ``None`` or
``"jacobi"`` solves on the caller's device vectors with no copy (a real CuPy ``b`` or ``x0`` is
promoted on the device) and returns a CuPy ``x``; NumPy vectors are copied over and back.
``"ilu0"``/``"ic0"`` of a complex matrix are factored and applied on the CPU from the matrix's
host copy (``info.device == "cpu"``; CuPy vectors copied to the host and back); ``"poly"`` and
``"amg"`` are for real systems (``ValueError``). Python operators and callbacks work as for a
real system, a GPU matrix's products on the device.

A solve that does not converge returns the crate's last iterate: SciPy's ``maxiter`` when the
limit was reached, ``-1`` for a breakdown or a GMRES cycle without progress (a singular ``A`` or
``M``), ``-2`` for a NaN or infinite residual.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Tuple

import numpy as np

from . import _core
from ._arrays import (check_real, check_value, complex_result, current_stream, cupy,
                      device_array, host_vector, wait_list)
from ._operators import as_operator, is_matrix, operator_dtype
from .matrix import Matrix

__all__ = ["SolveInfo", "cg", "pcg", "bicgstab", "gmres", "minres", "solve", "auto_choice"]

_FIELDS = ("converged", "iterations", "residual", "time", "history", "restarts", "method",
           "device", "message", "setup_seconds", "solve_seconds")


class SolveInfo(int):
    """What a solve did: SciPy's ``info`` integer, with the details as attributes.

    ``info`` is an ``int`` (a subclass): ``info == 0``, ``info != 0``, ``int(info)``,
    ``bool(info)`` (true when the solve did not converge, as SciPy's integer) and use as an
    index behave as SciPy's. Its value: 0 converged, > 0 not converged within ``maxiter``
    (SciPy returns ``maxiter``: iterations for CG and BiCGSTAB, restart cycles for GMRES),
    < 0 a breakdown: -1 (e.g. ``p^T A p <= 0`` in CG: A is not SPD; a GMRES cycle that makes
    no progress, a singular ``A`` or ``M``), -2 a NaN or infinite residual: a NaN or infinity
    in ``A``, ``b`` or ``x0`` gives -2 with ``iterations == 0`` on every solver (never
    ``converged``).

    Attributes:
        status: ``int(info)``.
        converged: the residual reached the tolerance (``info == 0``).
        iterations: iterations performed (CG: one SpMV each; BiCGSTAB: two; GMRES: inner
            steps).
        residual: the true relative residual ``||b - A x|| / ||b||`` of the returned ``x``
            (NaN after a breakdown).
        time: the same as ``solve_seconds`` (kept for existing code).
        setup_seconds: seconds from the call to the solver call: uploading ``b`` and ``x``, the
            Jacobi diagonal or the preconditioner's setup (0 for a given ``segsparse.amg``
            hierarchy beyond its use); the crate's timing model, as ``sparse-solve`` reports it.
        solve_seconds: seconds of the solver call itself (workspace, iterations, the true
            residual; the device synchronised), for failed solves too. Seconds per iteration
            are ``solve_seconds / iterations``.
        history: relative residual after each iteration (entry 0: the initial one); empty when
            a solve did not converge.
        restarts: restarts from the true residual (see the crate's solver docs).
        method: ``"cg"``, ``"pcg"``, ``"bicgstab"``, ``"gmres"`` or ``"minres"``.
        device: ``"gpu"`` or ``"cpu"``: where it ran.
        path: ``"crate"`` (the crate's solver body; ``"crate-block"`` for a 2-D ``b``).
        message: ``"converged"`` or the reason it did not.
        precond, reason, choice: with ``M="auto"`` or ``segsparse.solve``: the preconditioner
            used (``"none"``, ``"jacobi"``, ``"amg"``, ``"ilu0"``, ``"ic0"``, or the caller's),
            the rule that chose it in words, and the whole ``auto_choice`` dictionary
            (``None`` when the caller named both method and preconditioner).
        storage, storage_fallback: with ``storage="float32"`` or ``"f32-vectors"``: the storage
            that produced the answer (``"float32"``, ``"f32-vectors"``, or ``"float64"`` after a
            fallback) and why the float64 values took over, in one sentence (``None`` when the
            narrower storage served).
    """

    def __new__(cls, status: int, **fields: Any) -> "SolveInfo":
        obj = super().__new__(cls, int(status))
        obj.__dict__.update(fields)
        return obj

    @property
    def status(self) -> int:
        """SciPy's integer: ``int(self)``."""
        return int(self)

    def __reduce__(self):
        return (_rebuild_info, (int(self), dict(self.__dict__)))

    def __repr__(self) -> str:
        d = self.__dict__
        return (
            f"SolveInfo({int(self)}, converged={d.get('converged')}, iterations="
            f"{d.get('iterations')}, residual={d.get('residual')}, method={d.get('method')!r}, "
            f"device={d.get('device')!r}, path={d.get('path')!r}, message={d.get('message')!r}"
            + (f", precond={d['precond']!r}" if "precond" in d else "") + ")"
        )

    __str__ = __repr__


def _rebuild_info(status: int, fields: dict) -> SolveInfo:
    return SolveInfo(status, **fields)


def _tolerances(name: str, rtol: Any, atol: Any) -> Tuple[float, float]:
    """SciPy's check: ``atol`` a real number >= 0 (``'legacy'``, ``None``, negative:
    ``ValueError``); ``rtol`` likewise."""
    def real(v, what):
        if v is None or isinstance(v, (str, bytes)):
            ok = False
        else:
            try:
                v = float(v)
                ok = v >= 0 and not math.isnan(v)
            except (TypeError, ValueError):
                ok = False
        if not ok:
            raise ValueError(
                f"segsparse.{name} called with invalid `{what}`={v!r}; `{what}` must be a real, "
                "non-negative number"
            )
        return v

    return real(rtol, "rtol"), real(atol, "atol")


def _flat(b: Any) -> Any:
    """A (N,) or (N, 1) vector as (N,) (SciPy accepts both)."""
    shape = getattr(b, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] == 1:
        return b.reshape(-1)
    return b


def _precond(M: Any) -> Any:
    from .amg import AMG

    if M is None:
        return "none"
    if isinstance(M, AMG):
        return M
    if isinstance(M, str):
        if M.lower() in ("jacobi", "none", "poly", "ilu0", "ic0", "amg"):
            return M.lower()
        raise ValueError(
            f"unknown preconditioner {M!r}: M must be None, 'jacobi', 'poly', 'ilu0', 'ic0', "
            "'amg', 'auto', a segsparse.amg hierarchy, a LinearOperator, a matrix or a callable"
        )
    try:
        return as_operator(M, "M")
    except TypeError:
        raise TypeError(
            "M must be None, 'jacobi', 'poly', 'ilu0', 'ic0', 'amg', a segsparse.amg hierarchy "
            "(the crate's preconditioners), or a LinearOperator, a sparse or dense matrix, an "
            f"object with matvec or a callable (applied where its data lives); got "
            f"{type(M).__name__}") from None


def _solve(
    method: str,
    name: str,
    A: Any,
    b: Any,
    x0: Any,
    rtol: Any,
    atol: Any,
    maxiter: Optional[int],
    M: Any,
    callback: Any,
    check_every: Optional[int],
    device: str,
    restart: int = 30,
    degree: int = 5,
    callback_type: Optional[str] = None,
    choice: Optional[dict] = None,
    storage: Any = None,
) -> Tuple[Any, SolveInfo]:
    """Every solver of the package: checks the arguments, settles the system's dtype (real or
    complex), the matrix and the preconditioner (``M='auto'``: the automatic choice's) and
    runs the crate's solver body once (``_run``); a 2-D ``b`` goes to the block solvers."""
    from .amg import AMG

    rtol, atol = _tolerances(name, rtol, atol)
    storage = _storage(storage)
    if maxiter is not None and int(maxiter) < 0:
        raise ValueError(f"maxiter must be >= 0, got {maxiter}")
    if check_every is not None and check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    b = _flat(b)
    bshape = getattr(b, "shape", None)
    if bshape is None and isinstance(b, (list, tuple)):
        bshape = np.shape(b)
    cd = _complex_system(A, b, x0)
    if cd is None and method == "cocg":
        method = "cg"  # COCG of a real system is CG
    if storage != "float64" and (cd is not None or (bshape is not None and len(bshape) != 1)):
        raise ValueError(f"storage={storage!r} solves a real float64 system with one "
                         "right-hand side")
    block = bshape is not None and len(bshape) != 1
    if block and cd is not None:
        raise ValueError("a 2-D b (several right-hand sides) is supported for real systems "
                         "only; solve the complex columns one by one")
    given_m = M
    if isinstance(M, str) and M.lower() == "auto":
        if choice is None:
            if not is_matrix(A):
                raise ValueError("M='auto' needs a matrix A (the choice reads its entries), "
                                 "not a matrix-free operator")
            A = _system_matrix(A, b, cd, device)
            choice = auto_choice(A)
        M = _AUTO_PRECOND[choice["precond"]]
        pre = "none" if M is None else M  # the bindings' names
    else:
        choice = None
        pre = _precond(M)
    if cd is not None and (isinstance(pre, AMG) or (isinstance(pre, str)
                                                   and pre in ("poly", "amg"))):
        raise ValueError(
            f"M={given_m!r}: the polynomial and AMG preconditioners are for real systems; a "
            f"complex system ({cd}) takes None, 'jacobi', 'ilu0', 'ic0', 'auto' or an operator "
            "(LinearOperator, matrix, callable)")
    if block:
        x, infos = _run_block(method, name, A, b, x0, rtol, atol, maxiter, pre, callback,
                              check_every, device, restart, degree)
        for info in infos:
            _record(info, choice)
        return x, infos
    if pre == "none" and M is None and not is_matrix(A) and hasattr(A, "psolve"):
        pre = as_operator(A.psolve, "A.psolve")  # SciPy: an operator's own psolve is M
    callables = not is_matrix(A) or isinstance(pre, _OperatorType) or callback is not None
    if isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"x0 must be an array or 'Mb', not {x0!r}")
    if isinstance(x0, str) and not callables and pre not in ("none", "jacobi"):
        raise ValueError(
            "x0='Mb' needs M = None, 'jacobi' or an operator (LinearOperator, matrix, callable); "
            f"got M={given_m!r}" + _chose(choice))
    if callables and pre != "none" and not isinstance(pre, _OperatorType):
        if pre == "jacobi" and is_matrix(A):
            pre = _jacobi_operator(A)
        else:
            raise ValueError(
                f"M={given_m!r}{_chose(choice)} (one of the crate's preconditioners) cannot be "
                "combined with a callback "
                "or a matrix-free A: pass the preconditioner as a LinearOperator or a callable, "
                "or drop the callback")
    if storage != "float64" and callables:
        raise ValueError(f"storage={storage!r} runs the crate's solvers with its own "
                         "preconditioners (M None, 'jacobi', 'poly', 'ilu0', 'ic0', 'amg'), "
                         "without a callback or a matrix-free A")
    x, info = _run(method, name, A, b, x0, rtol, atol, maxiter, pre, callback, callback_type,
                   check_every, device, restart, degree, cd, callables, storage)
    _record(info, choice)
    return x, info


def _record(info: SolveInfo, choice: Optional[dict]) -> None:
    """The automatic choice, when one was made, in ``info``."""
    if choice is not None:
        info.precond = choice["precond"]
        info.reason = choice["reason"]
        info.choice = choice


def _run(method, name, A, b, x0, rtol, atol, maxiter, pre, callback, callback_type,
         check_every, device, restart, degree, cd, callables, storage="float64"):
    """One solve of ``A x = b`` by the crate's solver body (``_core``), for every element type.

    With the crate's preconditioner ``pre`` (a name, or a ``segsparse.amg`` hierarchy) and no
    Python code: a CuPy ``b`` with a GPU matrix solves on the caller's device vectors
    (``solve_device``, no copy; a complex system with ``"none"`` or ``"jacobi"``), else the
    vectors are copied to the host and back (``solve_host``). With ``callables`` (``pre`` an
    ``Operator``, a matrix-free ``A``, a ``callback``): ``solve_host_operator``, which calls the
    Python code back from the body on NumPy vectors (``python/src/pyprecond.rs``).
    ``storage="float32"`` (a real float64 matrix, NumPy vectors): the values stored in float32
    under the float64 solve (``info.storage`` says which storage served)."""
    db = device_array(b, "b")
    if db is not None and storage != "float64":
        raise ValueError(f"storage={storage!r} solves with NumPy vectors (the matrix may be on "
                         "the GPU); pass b as a NumPy array")
    xp = cupy() if db is not None else np
    hierarchy = None
    if not isinstance(pre, (str, _OperatorType)):  # a segsparse.amg hierarchy
        hierarchy, pre = pre, "amg"
        if not isinstance(A, Matrix):
            A = hierarchy.matrix
    m = aop = None
    if is_matrix(A):
        m = _system_matrix(A, b, cd, device)
        (n, ncols), dtype, where = m.shape, m.dtype, m.device
    else:
        aop = as_operator(A, "A")
        if aop.shape is None:
            raise ValueError(f"{name}: a matrix-free A needs a shape (n, n)")
        n, ncols = aop.shape
        where = "cpu"
        if cd is not None:
            dtype = cd
        else:
            a_dtype = operator_dtype(A) or np.dtype(np.float64)
            check_real(a_dtype, "A")
            bd = np.dtype(db.dtype) if db is not None else np.asarray(b).dtype
            dtype = np.dtype(np.float32) if (a_dtype == np.float32 and bd == np.float32) \
                else np.dtype(np.float64)
    if n != ncols:
        raise ValueError(f"{name} needs a square matrix, got {n}x{ncols}")
    if isinstance(pre, _OperatorType) and pre.shape is not None and pre.shape != (n, n):
        raise ValueError(f"the matrix is {(n, n)} and the preconditioner {pre.shape}")
    # A complex matrix's ILU(0)/IC(0) are factored and applied on the host.
    if cd is not None and not callables and pre not in ("none", "jacobi"):
        where = "cpu"
    legacy = callback_type == "legacy"
    user_maxiter = 10 * max(n, 1) if maxiter is None else int(maxiter)
    inner = user_maxiter
    if method == "gmres" and not legacy:
        # SciPy counts restart cycles; the crate counts inner steps. The default (10 n cycles)
        # is capped at 10 n steps: the history is allocated for the limit.
        inner = 10 * max(n, 1) if maxiter is None else user_maxiter * restart
    check = check_value if cd is not None else check_real
    hier = None if hierarchy is None else hierarchy._a

    def opts(precond):
        return _core.Options(method, precond, rtol, atol, inner, x0 is not None, check_every,
                             restart, degree)

    if db is not None and not callables and (cd is None or where == "gpu"):
        # The caller's device vectors, no copy.
        if db.dtype != dtype:
            check(db.dtype, "b")
            b = xp.ascontiguousarray(b, dtype=dtype)
            db = device_array(b, "b")
        if db.n != n:
            raise ValueError(f"b has {db.n} elements but the matrix has {n} rows")
        mb = isinstance(x0, str) and pre == "jacobi"
        x = _start(xp, x0, b, n, dtype, check,
                   _jacobi_operator(m).bind(xp, dtype) if mb else None)
        # b = 0 gives x = 0. From a zero guess the crate's solve returns it at its first
        # residual check, so only a given guess is checked here (a CuPy reduction compiles a
        # kernel the first time a process runs one: tens of milliseconds).
        if x0 is not None and not bool(xp.any(b)):
            return _zero_solution(xp, n, dtype, name, where, "crate")
        dx = device_array(x, "x", writable=True)
        cs = current_stream()
        out = m._m.solve_device(opts(pre), db.ptr, dx.ptr, wait_list(cs, db, dx), cs, hier)
        return x, _outcome_info(out, user_maxiter, name, where)
    b_host = host_vector(cupy().asnumpy(b) if db is not None else b, dtype, "b")
    if b_host.shape[0] != n:
        raise ValueError(f"b has {b_host.shape[0]} elements but the matrix has {n} rows")
    if callables:
        m_apply = None if pre == "none" else _host_fn(pre, db is not None, dtype)
        matvec = None if m is not None else _host_fn(aop, db is not None, dtype)
    else:
        mb = isinstance(x0, str) and pre == "jacobi"
        m_apply = _jacobi_operator(m).bind(np, dtype) if mb else None
    x = _start(np, x0, b_host, n, dtype, check, m_apply)
    if not b_host.any():
        return _zero_solution(xp, n, dtype, name, where, "crate")
    if not callables:
        out = m._m.solve_host(opts(pre), b_host, x, hier,
                              None if storage == "float64" else storage)
        if storage != "float64":
            info = _outcome_info(out, user_maxiter, name, where)
            info.storage, info.storage_fallback = _storage_of(out[7])
            return x, info
    else:
        kind = cb = None
        if callback is not None:
            kind = "x" if method != "gmres" or callback_type == "x" else "pr_norm"
            if kind == "pr_norm":
                def cb(r):  # a NumPy float64, as SciPy's
                    return callback(np.float64(r))
            elif db is not None:
                def cb(v):  # a CuPy solve: the callback sees CuPy vectors, as cupyx's solvers
                    return callback(xp.asarray(v))
            else:
                cb = callback
        if kind == "pr_norm" and m_apply is not None:
            out = _left_gmres(m, matvec, m_apply, b_host, x, rtol, atol, inner, x0 is not None,
                              check_every, restart, cb, dtype)
        else:
            out = _core.solve_host_operator(None if m is None else m._m, opts("none"), m_apply,
                                            b_host, x, matvec, cb, kind)
    return (x if db is None else xp.asarray(x)), _outcome_info(out, user_maxiter, name, where)


def _left_gmres(m, matvec, m_apply, b, x, rtol, atol, inner, x0_given, check_every, restart,
                cb, dtype):
    """GMRES with a residual callback and a Python ``M``, as SciPy's (left-preconditioned:
    the callback gets ``||M r|| / ||b||``): the crate's body on ``M A x = M b`` (matrix-free,
    on the CPU), its inner tolerance SciPy's (``max(rtol, atol / ||b||)`` relative to
    ``||M b||``), its residual estimate scaled by ``||M b|| / ||b||`` for the callback; the
    outcome is the true residual's (``||b - A x|| <= max(rtol ||b||, atol)``)."""
    a_apply = matvec if matvec is not None else as_operator(m, "A").bind(np, dtype)
    mb = np.ascontiguousarray(m_apply(b.copy()), dtype=dtype)
    bnrm = float(np.linalg.norm(b))
    tol = max(atol, rtol * bnrm)
    opts = _core.Options("gmres", "none", tol / bnrm, 0.0, inner, x0_given, check_every, restart)
    out = _core.solve_host_operator(None, opts, None, mb, x, lambda v: m_apply(a_apply(v)), cb,
                                    "pr_norm", float(np.linalg.norm(mb)) / bnrm)
    converged, status, iters, _, secs, hist, restarts, msg, setup = out
    res = float(np.linalg.norm(b - a_apply(x)))
    if res <= tol:
        status, msg = 0, "converged"
    elif status == 0:
        status = inner
        msg = (f"the preconditioned residual converged but the true one did not "
               f"(||b - A x|| / ||b|| = {res / bnrm:.3e})")
    return (status == 0, status, iters, res / bnrm, secs, hist, restarts, msg, setup)


def _outcome_info(out, user_maxiter: int, name: str, device: str,
                  path: str = "crate") -> SolveInfo:
    """The ``SolveInfo`` of a solve's outcome tuple (``_core``): not converged in the limit is
    SciPy's ``maxiter`` (GMRES: restart cycles)."""
    converged, status, iters, res, secs, hist, restarts, msg, setup = out
    if status > 0:
        status = user_maxiter
    return _info(
        status, converged=converged, iterations=iters, residual=res,
        history=np.asarray(hist, dtype=np.float64), restarts=restarts, method=name,
        device=device, path=path, message=msg, setup_seconds=setup, solve_seconds=secs,
    )


def _start(xp, x0, b, n, dtype, check, apply_m):
    """The initial guess as a new vector of ``xp`` (NumPy or CuPy) and ``dtype``: zeros, ``M b``
    for ``x0='Mb'`` (``apply_m`` ``None``: ``b``), or a copy of ``x0`` (its dtype checked by
    ``check``)."""
    if x0 is None:
        return xp.zeros(n, dtype=dtype)
    if isinstance(x0, str):
        v = b.copy() if apply_m is None else apply_m(b.copy())
        return xp.array(v, dtype=dtype, copy=True).reshape(-1)
    if xp is np and device_array(x0, "x0") is not None:
        x0 = cupy().asnumpy(x0)
    xd = getattr(x0, "dtype", None)
    check(np.asarray(x0).dtype if xd is None else xd, "x0")
    x = xp.array(x0, dtype=dtype, copy=True).reshape(-1)
    if x.shape[0] != n:
        raise ValueError(f"x0 has {x.shape[0]} elements but the matrix has {n} columns")
    return x


def _host_fn(op, on_device: bool, dtype):
    """The ``Operator`` ``op`` as a function of host vectors of ``dtype`` returning them; for a
    CuPy solve (``on_device``) it sees CuPy vectors, a host round trip each."""
    if not on_device:
        f = op.bind(np, dtype)

        def apply(r):
            return np.ascontiguousarray(f(r), dtype=dtype)
    else:
        cp = cupy()
        f = op.bind(cp, dtype)

        def apply(r):
            return np.ascontiguousarray(cp.asnumpy(f(cp.asarray(r))), dtype=dtype)
    return apply


def _system_matrix(A: Any, b: Any, cd: Optional[np.dtype], device: str) -> Matrix:
    """The matrix ``A`` of a system with right-hand side ``b`` as a ``Matrix``: on the GPU for a
    CuPy ``b`` (else on ``device``); complex (dtype ``cd``) for a complex system, SciPy's
    precision for a real one (a real ``Matrix`` is used as it is)."""
    where = _where(b, device)
    if cd is not None:
        return _complex_matrix(A, cd, where)
    return A if isinstance(A, Matrix) else Matrix(A, device=where, dtype=_system_dtype(A, b))


# The automatic choice's preconditioner names and what `_solve` passes on for them (ILU(0)/IC(0)
# with the automatic path's parameters: a row matching where the diagonal needs one).
_AUTO_PRECOND = {"none": None, "jacobi": "jacobi", "amg": "amg", "ilu0": "ilu0:auto",
                 "ic0": "ic0:auto"}

_STATS = ("rows", "nnz", "symmetric", "missing_diagonal", "positive_diagonal",
          "diagonal_spread", "min_dominance", "opposite_sign_fraction", "lower_levels",
          "asymmetry", "negative_diagonal")
_PROBE = ("cheap", "expensive", "iterations", "seconds", "residual", "rate",
          "predicted_iterations", "predicted_cheap_seconds", "predicted_expensive_seconds",
          "escalated", "converged")
_STATS_COMPLEX = ("rows", "nnz", "symmetric", "hermitian", "missing_diagonal")


def clear_auto_cache() -> None:
    """Forgets the decisions ``solve`` keeps per sparsity pattern and values (the candidate that
    converged on a matrix runs first on the next solve of that matrix, or of one with the same
    pattern, statistics and tolerance, in the process)."""
    _core.clear_auto_cache()


def auto_choice(A: Any, *, device: str = "cpu") -> dict:
    """The crate's automatic choice of a Krylov method and a preconditioner for the square
    matrix ``A``, from cheap statistics of its entries (``O(nnz)``); deterministic.

    A complex matrix has its own rule (the crate's ``choose_complex``): ``method`` ``"cg"`` for
    a Hermitian matrix with a positive real diagonal, ``"cocg"`` for a complex symmetric one
    (both with ``"jacobi"``), ``"gmres"`` with ``"ilu0"`` otherwise, ``"none"`` where a
    diagonal entry is zero; its ``stats`` are ``rows``, ``nnz``, ``symmetric`` (``A = A^T``),
    ``hermitian`` and ``missing_diagonal``.

    Returns a dictionary: ``method`` (``"cg"``, ``"bicgstab"`` or ``"gmres"``), ``precond``
    (``"none"``, ``"jacobi"``, ``"amg"``, ``"ilu0"`` or ``"ic0"``), ``reason`` (the rule that
    decided, in words) and ``stats`` (``rows``, ``nnz``, ``symmetric`` (the whole matrix, to
    rounding: ``|a_ij - a_ji| <= tau * max(s_i, s_j)`` with ``s_i`` the largest magnitude of
    row ``i``, ``tau`` 1e-10 for float64 and 1.2e-4 for float32), ``asymmetry`` (the worst such
    ratio), ``missing_diagonal`` (rows with a missing or zero diagonal entry),
    ``negative_diagonal``, ``positive_diagonal``, ``diagonal_spread``, ``min_dominance``,
    ``opposite_sign_fraction``, ``lower_levels`` (0: not counted)).
    The rules (the crate's ``precond::auto``): a zero or missing diagonal entry (saddle points):
    BiCGSTAB without a preconditioner; symmetric with a positive diagonal, M-matrix signs and a
    negative row sum on at least half the rows (a shifted Laplacian, a Helmholtz operator, which
    may be indefinite): BiCGSTAB without a preconditioner; otherwise symmetric with a positive
    diagonal: CG (with AMG for large matrices with coefficient jumps, Jacobi for a spread
    diagonal or other signs, else none);
    symmetric with a negative diagonal entry (indefinite): BiCGSTAB with Jacobi; unsymmetric:
    BiCGSTAB with Jacobi (none for a near-constant diagonal). ``segsparse.solve`` runs this rule
    with the crate's convergence probe (which may take AMG or GMRES with ILU(0) instead, see
    ``solve``); ``M="auto"`` of a named solver takes the rule's preconditioner.

    ``A``: a ``segsparse.Matrix`` (read where it is: the statistics of a GPU matrix are computed
    on the device, without a host copy) or any ``scipy.sparse``/``cupyx.scipy.sparse`` matrix or
    dense array (converted on ``device``).
    """
    if not is_matrix(A):
        raise TypeError(f"auto_choice needs a matrix, not {type(A).__name__}")
    m = A if isinstance(A, Matrix) else Matrix(A, device=device)
    method, precond, reason, stats = m._m.auto_choice()
    keys = _STATS_COMPLEX if m.dtype.kind == "c" else _STATS
    return {"method": method, "precond": precond, "reason": reason,
            "stats": dict(zip(keys, stats))}


def solve(A, b, x0=None, *, method="auto", M="auto", rtol=1e-5, atol=0.0, maxiter=None,
          restart=30, check_every=None, device="auto", probe=True, storage=None):
    """Solves ``A x = b`` with the method and preconditioner the crate chooses for ``A``:
    returns ``(x, info)`` as the other solvers, with the choice recorded in ``info``:
    ``info.method``, ``info.precond``, ``info.reason`` and ``info.choice``.

    With ``method="auto"`` and ``M="auto"`` (the defaults) on a real matrix this is the crate's
    automatic solve (``autosolve::solve``), the same body as ``sparse-solve``'s default: the
    statistics read where the matrix lives (on the GPU for a GPU or CuPy matrix, no host copy),
    the rule of ``auto_choice``, and where the rule cannot tell the cheap candidate from the
    expensive one (CG from CG + AMG on large SPD matrices, BiCGSTAB from GMRES + ILU(0)), a short
    convergence probe of the cheap one whose measured rate decides, continued from its iterate;
    every candidate is then judged at checkpoints on its own measured rate (each at most
    ``maxiter`` iterations, all together twice that); the decision is cached per sparsity pattern,
    values (the statistics the rule reads) and tolerance; a candidate that fails hands its
    iterate to the next. ``info.choice`` then holds what ``sparse-solve --format json`` reports as ``auto``:
    ``method``, ``precond``, ``reason``, ``stats``, ``seconds`` (the statistics and the rule),
    ``probe`` (what it measured and predicted, or ``None``), ``cached``, ``fallback``,
    ``tried`` (each candidate with its outcome), ``failure`` (where nothing converged: the
    best residual reached and what was tried, in one sentence) and ``phases`` (where the time
    went: the statistics, the rule, every setup and solver call in order, each a dictionary of
    ``name``, ``iterations`` and ``seconds``). ``maxiter`` counts iterations
    (default ``10 n``); ``probe=False`` runs the rule's first choice alone; a dictionary runs the
    probe with some of its options changed (``cg_iterations``, ``bicgstab_iterations``,
    ``amg_min_rows``, ``amg_window``, ``work_factor``, ``hopeless``, ``checkpoint_factor``,
    ``minres_window``, ``minres_from``: the crate's ``ProbeParams``; ``cg_iterations_factor``, ``bicgstab_iterations_factor``,
    ``amg_iterations``: its cost model's). With
    ``storage="float32"`` (as ``cg``) the rule's choice runs with the values in float32 (the
    probe and its fallbacks are the float64 automatic solve's).

    ``storage``: ``None``/``"auto"`` (the default) lets the automatic solve store the values in
    float32 where every value is exact in float32 (CG's operator) and an AMG hierarchy in
    float32, on matrices of at least 4 M entries (float64 otherwise); ``info.choice["storage"]``
    says which (``values``, ``hierarchy``, ``reason``, ``fallback``); ``"float64"`` keeps
    float64 everywhere; ``"float32"`` as above; ``"f32-vectors"`` (as ``cg``) where the rule
    takes CG with no preconditioner or Jacobi.

    ``method``: ``"auto"`` (the rule's ``"cg"``, ``"gmres"``, or for a complex symmetric
    matrix ``"cocg"``) or one of ``"cg"``, ``"cocg"`` (conjugate orthogonal CG, for complex
    symmetric ``A``; CG for a real system), ``"bicgstab"``, ``"gmres"``, ``"minres"`` (symmetric
    indefinite ``A``); ``M``: ``"auto"`` (the rule's preconditioner) or anything the
    solvers accept. ``maxiter`` is the method's (GMRES: restart cycles, as ``gmres``); the other
    arguments as ``cg``. ``A`` is converted once (a ``segsparse.Matrix`` is used as it is).

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
        >>> x, info = segsparse.solve(A, np.ones(100), rtol=1e-10)
        >>> bool(info.converged), info.method, info.precond
        (True, 'cg', 'none')
    """
    want_method = str(method).lower()
    auto_m = isinstance(M, str) and M.lower() == "auto"
    if want_method not in ("auto", "cg", "cocg", "bicgstab", "gmres", "minres"):
        raise ValueError(f"unknown method {method!r}: 'auto', 'cg', 'cocg', 'bicgstab', "
                         "'gmres' or 'minres'")
    auto_storage = storage is None or (isinstance(storage, str) and storage.lower() == "auto")
    if auto_storage:
        storage = None
    if (want_method == "auto" and auto_m and is_matrix(A) and not isinstance(x0, str)
            and _complex_system(A, _flat(b), x0) is None and len(np.shape(_flat(b))) <= 1
            and (auto_storage or _storage(storage) == "float64")):
        return _solve_auto(A, b, x0, rtol, atol, maxiter, restart, check_every, device, probe,
                           "auto" if auto_storage else "float64")
    choice = None
    if want_method == "auto" or auto_m:
        if not is_matrix(A):
            raise ValueError("segsparse.solve's automatic choice needs a matrix A (it reads "
                             "its entries), not a matrix-free operator: name method and M")
        A = _system_matrix(A, _flat(b), _complex_system(A, _flat(b), x0), device)
        choice = auto_choice(A)
    name = choice["method"] if want_method == "auto" else want_method
    pre = "auto" if auto_m else M
    if name == "gmres":
        n = _square_size(A)
        r = max(1, min(int(restart), n)) if n is not None else int(restart)
        if not 1 <= r <= 255:
            raise ValueError(f"restart must be in 1..=255, got {restart}")
        x, info = _solve("gmres", "gmres", A, b, x0, rtol, atol, maxiter, pre, None,
                         check_every, device, restart=r, choice=choice, storage=storage)
    else:
        x, info = _solve(name, name, A, b, x0, rtol, atol, maxiter, pre, None, check_every,
                         device, choice=choice, storage=storage)
    if auto_m:
        info.precond = choice["precond"]
    elif isinstance(M, str) or M is None:
        info.precond = "none" if M is None else M.lower()
    else:
        info.precond = type(M).__name__
    if choice is None:
        info.reason = "method and preconditioner given by the caller"
    elif auto_m and want_method == "auto":
        info.reason = choice["reason"]
    elif auto_m:
        info.reason = f"method {name!r} given by the caller; preconditioner: {choice['reason']}"
    else:
        info.reason = f"preconditioner given by the caller; method: {choice['reason']}"
    info.choice = choice
    return x, info


from ._operators import Operator as _OperatorType  # noqa: E402


def _storage(storage: Any) -> str:
    """``storage=``: ``None``/``"float64"``, ``"float32"`` (NumPy dtypes and their names too) or
    ``"f32-vectors"``."""
    if storage is None:
        return "float64"
    try:
        name = np.dtype(storage).name
    except TypeError:
        name = str(storage).lower()
    if name in ("float64", "f64"):
        return "float64"
    if name in ("float32", "f32"):
        return "float32"
    if name in ("f32-vectors", "float32-vectors"):
        return "f32-vectors"
    raise ValueError(f"storage must be 'float64', 'float32' or 'f32-vectors', not {storage!r}")


def _storage_of(message: str) -> Tuple[str, Optional[str]]:
    """The storage that served and the fallback's reason, from the crate's outcome message
    (`` [f32 storage]`` or `` [<why f64 storage>]`` at its end)."""
    if message.endswith("[f32 storage]"):
        return "float32", None
    if message.endswith("[f32-vectors storage]"):
        return "f32-vectors", None
    if message.endswith("]") and " [" in message:
        return "float64", message[message.rindex(" [") + 2:-1]
    return "float64", None


def _auto_report(rep) -> dict:
    """The crate's report of an automatic solve as ``info.choice``: the fields of
    ``sparse-solve``'s JSON ``auto`` object."""
    (method, precond, reason, stats, seconds, probe, cached, fallback, tried, failure,
     phases, storage) = rep
    return {"method": method, "precond": precond, "reason": reason,
            "stats": dict(zip(_STATS, stats)), "seconds": seconds,
            "probe": None if probe is None else dict(zip(_PROBE, probe)),
            "cached": cached, "fallback": fallback, "tried": list(tried), "failure": failure,
            "phases": [{"name": n, "iterations": k, "seconds": t} for n, k, t in phases],
            "storage": dict(zip(("values", "hierarchy", "reason", "fallback"), storage))}


def _solve_auto(A, b, x0, rtol, atol, maxiter, restart, check_every, device, probe,
                storage="auto"):
    """``solve``'s default for a real matrix: the crate's automatic solve on the matrix where
    it lives (``_core.auto_solve_device`` on CuPy vectors, ``auto_solve_host`` on NumPy ones)."""
    from ._core import auto_solve_device, auto_solve_host

    rtol, atol = _tolerances("solve", rtol, atol)
    if maxiter is not None and int(maxiter) < 0:
        raise ValueError(f"maxiter must be >= 0, got {maxiter}")
    if check_every is not None and check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    b = _flat(b)
    db = device_array(b, "b")
    if not isinstance(A, Matrix):
        A = Matrix(A, device="gpu" if db is not None else device, dtype=_system_dtype(A, b))
    m = A
    n, ncols = m.shape
    if n != ncols:
        raise ValueError(f"solve needs a square matrix, got {n}x{ncols}")
    r = max(1, min(int(restart), n))
    if not 1 <= r <= 255:
        raise ValueError(f"restart must be in 1..=255, got {restart}")
    user_maxiter = 10 * max(n, 1) if maxiter is None else int(maxiter)
    x0_given = x0 is not None
    if isinstance(probe, dict):
        enabled, options = True, {str(k): float(v) for k, v in probe.items()}
    else:
        enabled, options = bool(probe), None
    if db is not None:
        cp = cupy()
        if db.dtype != m.dtype:
            check_real(db.dtype, "b")
            b = cp.ascontiguousarray(b, dtype=m.dtype)
            db = device_array(b, "b")
        if db.n != n:
            raise ValueError(f"b has {db.n} elements but the matrix has {n} rows")
        x = (cp.array(x0, dtype=m.dtype, copy=True).reshape(-1) if x0_given
             else cp.zeros(n, dtype=m.dtype))
        if x.size != n:
            raise ValueError(f"x0 has {x.size} elements but the matrix has {n} columns")
        # As in _run: from a zero guess the crate returns x = 0 for b = 0 itself.
        if x0_given and not bool(cp.any(b)):
            return _zero_solution(cp, n, m.dtype, "auto", m.device, "crate")
        dx = device_array(x, "x", writable=True)
        out, rep = auto_solve_device(m._m, db.ptr, dx.ptr, rtol, atol, user_maxiter, x0_given,
                                     wait_list(current_stream(), db, dx), current_stream(),
                                     check_every, r, enabled, options, storage)
    else:
        b = host_vector(b, m.dtype, "b")
        if b.shape[0] != n:
            raise ValueError(f"b has {b.shape[0]} elements but the matrix has {n} rows")
        if x0_given:
            x0 = np.asarray(x0)
            check_real(x0.dtype, "x0")
            x = np.array(x0, dtype=m.dtype, copy=True).reshape(-1)
            if x.shape[0] != n:
                raise ValueError(f"x0 has {x.shape[0]} elements but the matrix has {n} columns")
        else:
            x = np.zeros(n, dtype=m.dtype)
        if not b.any():
            return _zero_solution(np, n, m.dtype, "auto", m.device, "crate")
        out, rep = auto_solve_host(m._m, b, x, rtol, atol, user_maxiter, x0_given, check_every,
                                   r, enabled, options, storage)
    converged, status, iters, res, secs, hist, restarts, msg, setup = out
    if status > 0:
        status = user_maxiter
    choice = _auto_report(rep)
    if choice["failure"]:
        msg = f"{msg}: {choice['failure']}"
    info = _info(
        status, converged=converged, iterations=iters, residual=res,
        history=np.asarray(hist, dtype=np.float64), restarts=restarts, method=choice["method"],
        device=m.device, path="crate", message=msg, setup_seconds=setup, solve_seconds=secs,
    )
    info.precond = choice["precond"]
    info.reason = choice["reason"]
    info.choice = choice
    return x, info


def _chose(choice: Optional[dict]) -> str:
    return "" if choice is None else f" (chosen: {choice['precond']!r})"


def _info(status: int, **fields: Any) -> SolveInfo:
    fields.setdefault("restarts", 0)
    fields.setdefault("setup_seconds", 0.0)
    fields["time"] = fields.get("solve_seconds", 0.0)
    return SolveInfo(status, **fields)


def _zero_solution(xp: Any, n: int, dtype: Any, name: str, device: str, path: str):
    return xp.zeros(n, dtype=dtype), _info(
        0, converged=True, iterations=0, residual=0.0, history=np.zeros(1), method=name,
        device=device, path=path, message="converged: b = 0, x = 0", solve_seconds=0.0)


def _run_block(method, name, A, B, x0, rtol, atol, maxiter, pre, callback, check_every,
               device, restart, degree):
    """Several right-hand sides: the ``k`` columns of the 2-D ``B`` (``n x k``) as one block
    (the crate's multi-column solvers: each column its own convergence, the operator and the
    preconditioner ``pre`` applied to the block). Returns ``X`` of ``B``'s shape and type and a
    list of ``k`` ``SolveInfo``, one per column."""
    shape = tuple(getattr(B, "shape", np.shape(B)))
    if len(shape) != 2:
        raise ValueError(f"b must be 1-D (n,) or 2-D (n, k); got a {len(shape)}-D array of "
                         f"shape {shape}")
    nb, k = shape
    if k == 0:
        raise ValueError(f"b has shape {shape}: a block of right-hand sides needs k >= 1 "
                         "columns")
    if callback is not None:
        raise ValueError("a callback is not supported with a 2-D b (several right-hand "
                         "sides): solve the columns one by one to follow each")
    if not is_matrix(A):
        raise ValueError("a 2-D b (several right-hand sides) needs a matrix A, not a "
                         "matrix-free operator")
    on_gpu = hasattr(B, "__cuda_array_interface__")
    if isinstance(pre, _OperatorType):
        raise ValueError("a 2-D b (several right-hand sides) needs one of the crate's "
                         "preconditioners (None, 'jacobi', 'poly', 'ilu0', 'ic0', 'amg' or a "
                         "segsparse.amg hierarchy), not an operator M")
    hierarchy = None
    if not isinstance(pre, str):
        hierarchy, pre = pre, "amg"
        if not isinstance(A, Matrix):
            A = hierarchy.matrix
    bd = getattr(B, "dtype", None)
    check_real(bd if bd is not None else np.asarray(B).dtype, "b")
    m = A if isinstance(A, Matrix) else Matrix(A, device="gpu" if on_gpu else device,
                                               dtype=_system_dtype(A, B))
    n, ncols = m.shape
    if n != ncols:
        raise ValueError(f"{name} needs a square matrix, got {n}x{ncols}")
    if nb != n:
        raise ValueError(f"b has {nb} rows but the matrix has {n} rows")
    user_maxiter = 10 * max(n, 1) if maxiter is None else int(maxiter)
    inner = user_maxiter
    if method == "gmres":
        inner = 10 * max(n, 1) if maxiter is None else user_maxiter * restart
    hier = None if hierarchy is None else hierarchy._a
    if on_gpu and m.device == "gpu":
        return _run_block_device(m, B, x0, k, name, user_maxiter, hier,
                                 lambda given: _core.Options(method, pre, rtol, atol, inner, given,
                                                             check_every, restart, degree))
    xp = cupy() if on_gpu else np
    # A CuPy block with a CPU matrix goes through the host once (B in, X out).
    Bh = xp.asnumpy(B) if on_gpu else np.asarray(B)
    Bh = np.ascontiguousarray(Bh, dtype=m.dtype)
    if x0 is None:
        X = np.zeros((n, k), dtype=m.dtype)
        x0_given = False
    else:
        if isinstance(x0, str):
            raise ValueError("x0='Mb' is not supported with a 2-D b")
        x0h = xp.asnumpy(x0) if hasattr(x0, "__cuda_array_interface__") else np.asarray(x0)
        check_real(x0h.dtype, "x0")
        if x0h.shape != (n, k):
            raise ValueError(f"x0 has shape {x0h.shape}, b has {(n, k)}")
        X = np.array(x0h, dtype=m.dtype, order="C", copy=True)
        x0_given = True
    opts = _core.Options(method, pre, rtol, atol, inner, x0_given, check_every, restart, degree)
    outs = m._m.solve_host_block(opts, Bh.reshape(-1), X.reshape(-1), k, hier)
    infos = [_outcome_info(out, user_maxiter, name, m.device, "crate-block") for out in outs]
    return (xp.asarray(X) if on_gpu else X), infos


def _run_block_device(m, B, x0, k, name, user_maxiter, hier, options):
    """The block solve of a CuPy ``B`` with a GPU matrix, on the device (no host copy): the
    columns are read in place where ``B`` is column-major (Fortran order), else from one
    device copy in that order; ``X`` is built on the device in ``B``'s order."""
    cp = cupy()
    n = m.shape[0]
    dtype = np.dtype(m.dtype)
    B = cp.asarray(B)  # any __cuda_array_interface__ array, without a copy
    Bf = cp.asfortranarray(B.astype(dtype, copy=False))
    if x0 is None:
        Xf = cp.zeros((n, k), dtype=dtype, order="F")
    else:
        if isinstance(x0, str):
            raise ValueError("x0='Mb' is not supported with a 2-D b")
        x0d = cp.asarray(x0)
        check_real(x0d.dtype, "x0")
        if x0d.shape != (n, k):
            raise ValueError(f"x0 has shape {x0d.shape}, b has {(n, k)}")
        Xf = cp.array(x0d, dtype=dtype, order="F", copy=True)
    step = n * dtype.itemsize
    bp = [Bf.data.ptr + j * step for j in range(k)]
    xp_ = [Xf.data.ptr + j * step for j in range(k)]
    cs = current_stream()
    outs = m._m.solve_device_block(options(x0 is not None), bp, xp_, [cs], cs, hier)
    infos = [_outcome_info(out, user_maxiter, name, m.device, "crate-block") for out in outs]
    X = Xf if B.flags.f_contiguous else cp.ascontiguousarray(Xf)
    return X, infos


def _complex_system(A: Any, b: Any, x0: Any) -> Optional[np.dtype]:
    """The dtype of the system when ``A``, ``b`` or ``x0`` is complex (NumPy's promotion of
    the three, ``complex64`` or ``complex128``); ``None`` for a real system."""
    bd = getattr(b, "dtype", None)
    if bd is None:
        bd = np.asarray(b).dtype
    xd = None
    if x0 is not None and not isinstance(x0, str):
        xd = getattr(x0, "dtype", None)
        if xd is None:
            xd = np.asarray(x0).dtype
    return complex_result(operator_dtype(A), bd, xd)


def _where(b: Any, device: str) -> str:
    """Where a matrix built for the right-hand side ``b`` goes: the GPU for a device array
    (``b`` stays there), else ``device``."""
    return "gpu" if hasattr(b, "__cuda_array_interface__") else device


def _complex_matrix(A: Any, cd: np.dtype, device: str) -> Matrix:
    """``A`` as a complex ``Matrix`` of dtype ``cd``: a ``Matrix`` of that dtype as it is, one of
    another dtype converted where it lives (``O(nnz)``), anything else built on ``device``."""
    if isinstance(A, Matrix):
        return A if A.dtype == cd else Matrix(A, dtype=cd, device=A.device)
    return Matrix(A, dtype=cd, device=device)


def _system_dtype(A: Any, b: Any) -> np.dtype:
    """SciPy's precision of a system given as arrays: float32 when both ``A`` and ``b`` are
    float32, else float64 (a ``segsparse.Matrix`` keeps its own)."""
    ad = getattr(A, "dtype", None)
    bd = getattr(b, "dtype", None)
    if bd is None:
        bd = np.asarray(b).dtype
    f32 = np.dtype(np.float32)
    return f32 if (ad is not None and np.dtype(ad) == f32 and np.dtype(bd) == f32) \
        else np.dtype(np.float64)


def _jacobi_operator(A: Any):
    """``r / diag(A)`` as an operator (a zero diagonal entry leaves ``r`` unscaled there, as the
    crate's Jacobi refuses it), for ``x0='Mb'`` and beside Python callables."""
    if isinstance(A, Matrix):
        d, dt = A.to_scipy().diagonal(), A.dtype
    elif hasattr(A, "diagonal"):
        d = A.diagonal()
        d = cupy().asnumpy(d) if hasattr(d, "__cuda_array_interface__") else np.asarray(d)
        dt = d.dtype if d.dtype.kind == "c" else (
            np.float32 if d.dtype == np.float32 else np.float64)
    else:
        d = np.diagonal(np.asarray(A))
        dt = d.dtype if d.dtype.kind == "c" else np.float64
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 1.0).astype(dt)
    return as_operator(lambda r: inv * r if isinstance(r, np.ndarray)
                       else cupy().asarray(inv) * r, "M")


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
       check_every=None, device="auto", storage=None):
    """Conjugate gradient for a symmetric positive definite ``A``: returns ``(x, info)``.

    Args:
        A: a ``segsparse.Matrix`` (reuse it for repeated solves: it is uploaded once), or any
            ``scipy.sparse`` / ``cupyx.scipy.sparse`` matrix or dense array (converted, and
            uploaded, on each call), or a matrix-free operator: a ``LinearOperator`` or anything
            with ``matvec`` and ``shape`` (applied where its data lives; see the module docs).
        b: right-hand side: a NumPy array (the solution is NumPy) or a CuPy array (the
            solution is CuPy and stays on the device: no host copy). Shape ``(n,)`` or
            ``(n, 1)``.
        x0: initial guess (default zeros), or ``'Mb'``: ``M`` applied to ``b``.
        rtol, atol: stop when ``||b - A x|| <= max(rtol * ||b||, atol)``, SciPy's criterion
            (the crate's path checks it on the true residual before reporting convergence).
            ``atol`` must be a real number >= 0 (``ValueError`` otherwise, as SciPy).
        maxiter: iteration limit (default ``10 * n`` as in SciPy).
        M: ``None``, ``"jacobi"`` (diagonal preconditioning; see ``pcg``) or ``"poly"`` (the
            crate's Chebyshev polynomial in the Jacobi-scaled matrix, degree 5 (of its residual
            polynomial, as the AMG smoother's degree), with eigenvalue bounds from 16 Lanczos
            steps: fewer iterations, each costing 5 SpMVs), ``"ic0"``
            (incomplete Cholesky: SPD, for ``cg``/``pcg``) or ``"ilu0"`` (incomplete LU, for
            ``gmres``/``bicgstab``); the factorization is set up at each call, with a diagonal
            shift added automatically when a pivot vanishes, ``"amg"``
            (smoothed-aggregation multigrid, built for this solve) or a hierarchy from
            ``segsparse.amg`` (built once, reused), or ``"auto"`` (the one ``auto_choice``
            picks for ``A``; recorded in ``info.precond`` and ``info.reason``; an unsymmetric
            ``A`` keeps the solver called). These are the crate's (the fast path).
            As in SciPy, also a ``LinearOperator``, a sparse or dense matrix or a callable
            approximating ``A^-1`` (called back from the crate's body; applied where its data
            lives).
        callback: ``callback(xk)`` after each iteration, as SciPy's (a NumPy copy of the
            current iterate; CuPy for a CuPy ``b``); the solve then reads its status after
            every iteration. An exception raised in it stops the solve and propagates.
        check_every: on the GPU, read the convergence status every this many iterations
            (default 16; the reported iteration count is exact either way).
        device: where to put a matrix that is not a ``segsparse.Matrix`` yet
            (``"auto"``, ``"gpu"``, ``"cpu"``).
        storage: ``None``/``"float64"``, or ``"float32"``: the matrix's values stored in
            float32 under float64 vectors and sums (a quarter fewer bytes per product), for a
            float64 matrix with a NumPy ``b`` and the crate's preconditioners; convergence is
            measured on the true residual with the float64 values, so the answer meets the
            tolerance in float64. Where float32 values cannot reach it (values beyond float32's
            range, a condition number near 1e7 or above) the solve continues with the float64
            values by itself. ``info.storage`` says which storage served, and
            ``info.storage_fallback`` why float64 (or ``None``). ``"f32-vectors"`` (``M``
            ``None`` or ``"jacobi"``): the recurrence's vectors in float32 too (half the bytes
            of every vector pass; more iterations than float64), the iterate and the true
            residuals of its reliable updates in float64, so the answer still meets the
            tolerance in float64 (or the solve goes on in float64 and says why);
            ``info.storage`` is ``"f32-vectors"`` where it served.

    Returns:
        ``(x, info)``: the solution (or last iterate) and a ``SolveInfo``: SciPy's integer
        (``info == 0`` on success) with ``info.converged``, ``info.iterations``,
        ``info.residual``, ``info.time``, ``info.history`` as attributes. Not converging is
        reported in ``info``, not raised. ``b = 0`` gives ``x = 0`` and ``info == 0``.

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
        >>> x, info = segsparse.cg(A, np.ones(100), rtol=1e-10)
        >>> bool(info.converged), np.linalg.norm(A @ x - 1) < 1e-8
        (True, True)
    """
    return _solve("cg", "cg" if M is None else "pcg", A, b, x0, rtol, atol, maxiter, M,
                  callback, check_every, device, storage=storage)


def pcg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M="jacobi", callback=None,
        check_every=None, device="auto", storage=None):
    """Preconditioned conjugate gradient (default: Jacobi, ``M = diag(A)``, fused into the
    vector updates): returns ``(x, info)``. Arguments as ``cg``; ``A`` must be SPD with a
    nonzero diagonal."""
    return _solve("cg", "pcg", A, b, x0, rtol, atol, maxiter, M, callback, check_every, device,
                  storage=storage)


def bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
             check_every=None, device="auto", storage=None):
    """BiCGSTAB for a general (unsymmetric) ``A``, right-preconditioned by ``M``: returns
    ``(x, info)``. Arguments as ``cg`` (``callback(xk)`` after each iteration); one iteration
    costs two SpMVs. A breakdown (a vanishing ``rho``, ``r^T v`` or ``omega``) is reported as
    ``info == -1`` after the crate's restarts are exhausted."""
    return _solve("bicgstab", "bicgstab", A, b, x0, rtol, atol, maxiter, M, callback,
                  check_every, device, storage=storage)


def minres(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
           check_every=None, device="auto", storage=None):
    """MINRES for a symmetric (Hermitian) ``A``, definite or not (saddle points, shifted
    operators, where CG breaks down): returns ``(x, info)``. Arguments as ``cg``; ``M`` must be
    symmetric positive definite (``None``, ``"jacobi"`` where the diagonal is positive,
    ``"amg"``, ``"ic0"``, ``"poly"`` or an operator); an indefinite one is reported as a
    breakdown (``info == -1``). The residual never grows from one iteration to the next. Each
    iteration costs one SpMV and two inner products read by the host. One right-hand side
    (``b`` of shape ``(n,)``).

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> n = 200  # a 1-D Laplacian shifted past its smallest eigenvalues: indefinite
        >>> A = sp.diags([-1.0, 1.9, -1.0], [-1, 0, 1], shape=(n, n), format="csr")
        >>> x, info = segsparse.minres(A, np.ones(n), rtol=1e-10)
        >>> bool(info.converged), bool(np.linalg.norm(A @ x - 1) < 1e-8 * np.sqrt(n))
        (True, True)
    """
    shape = np.shape(_flat(b)) if not hasattr(b, "shape") else tuple(b.shape)
    if len(shape) == 2 and shape[1] != 1:
        raise ValueError("minres takes one right-hand side (b of shape (n,)); solve the "
                         "columns of a 2-D b one by one")
    return _solve("minres", "minres", A, b, x0, rtol, atol, maxiter, M, callback,
                  check_every, device, storage=storage)


def gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=30, maxiter=None, M=None,
          callback=None, callback_type=None, check_every=None, device="auto", storage=None):
    """Restarted GMRES(``restart``) for any ``A``: returns ``(x, info)``. Arguments as ``cg``.

    ``maxiter`` counts restart cycles, as SciPy's (default ``10 n``; the crate's path then
    stops after ``10 n`` inner steps). ``restart`` is capped at ``n``. The crate's path
    (``M`` = ``None``, ``"jacobi"``, ``"poly"``, ``"ilu0"``, ``"ic0"``, ``"amg"``: right
    preconditioning, classical Gram-Schmidt applied twice, Givens rotations on the device)
    reports a cycle without progress (a singular ``A`` or ``M``) as ``info == -1``, with the
    iterate it reached. (The Rust API and the CLI count inner steps in their ``max_iters``.)

    ``callback`` and ``callback_type`` as SciPy 1.17: ``'x'`` calls ``callback(xk)`` after each
    restart cycle (the last, partial one included); ``'pr_norm'`` calls
    ``callback(residual)`` after each inner step; ``'legacy'`` (the default when a callback is
    given, with SciPy's ``DeprecationWarning``) is ``'pr_norm'`` with ``maxiter`` counting
    inner steps. The residual passed is SciPy's ``||M r|| / ||b||``: without ``M`` the crate's
    body passes its least-squares estimate of ``||r|| / ||b||`` (the same quantity); with an
    ``M`` given as an operator such a solve runs the crate's GMRES on ``M A x = M b``
    (left-preconditioned, as SciPy's; the outcome is the true residual's).

    Example:
        >>> import numpy as np, scipy.sparse as sp, segsparse
        >>> A = sp.diags([-1.0, 3.0, -0.5], [-1, 0, 1], shape=(200, 200), format="csr")
        >>> x, info = segsparse.gmres(A, np.ones(200), rtol=1e-10)
        >>> bool(info.converged), np.linalg.norm(A @ x - 1) < 1e-8
        (True, True)
    """
    if restart is None:
        restart = 20
    if not 1 <= int(restart) <= 255:
        raise ValueError(f"restart must be in 1..=255, got {restart}")
    if callback is not None and callback_type is None:
        warnings.warn(
            "segsparse.gmres called without specifying `callback_type`, as SciPy's gmres: "
            "the callback gets the preconditioned residual norm after each inner step and "
            "maxiter counts inner steps ('legacy'); specify callback_type='pr_norm' or 'x' "
            "(or 'legacy') explicitly",
            DeprecationWarning, stacklevel=2)
        callback_type = "legacy"
    if callback_type is not None and callback_type not in ("x", "pr_norm", "legacy"):
        raise ValueError(f"Unknown callback_type: {callback_type!r}")
    if callback is None:
        callback_type = None
    n = _square_size(A)
    if n is not None:
        restart = max(1, min(int(restart), n))
    return _solve("gmres", "gmres", A, b, x0, rtol, atol, maxiter, M, callback, check_every,
                  device, restart=int(restart), callback_type=callback_type, storage=storage)


def _square_size(A: Any) -> Optional[int]:
    shape = getattr(A, "shape", None)
    try:
        return int(shape[0]) if shape is not None and len(shape) == 2 else None
    except (TypeError, ValueError):
        return None
