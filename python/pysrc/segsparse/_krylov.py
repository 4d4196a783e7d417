"""The operator path of the solvers: CG, BiCGSTAB and GMRES over NumPy or CuPy vectors, with
the operator ``A`` and the preconditioner ``M`` given as functions.

Real solves with a Python ``M``, a matrix-free ``A`` or a ``callback`` run the crate's solver
body, which calls them back (``python/src/pyprecond.rs``). This module serves only what that body
cannot: complex systems with Python operators or a callback (the complex bindings take the
crate's preconditioners only), a matrix-free ``A`` whose vectors are CuPy arrays (the body's
Python operator works on host vectors), GMRES's residual callback with a preconditioner (SciPy
passes the left-preconditioned ``||M r|| / ||b||``; the crate's GMRES is right-preconditioned),
and SciPy's returned iterate and code after a solve that failed (GMRES's least-squares iterate
after a breakdown, BiCGSTAB's -10 / -11), recomputed from the same start. It keeps SciPy's conventions exactly: the
stopping test ``||r|| < max(atol, rtol ||b||)`` on the recursive residual (CG, BiCGSTAB) or
on the true residual after each cycle (GMRES, with SciPy's inner tolerance on the
preconditioned residual), ``info`` 0 / ``maxiter`` / negative codes for breakdowns (BiCGSTAB:
-10 for rho, -11 for omega or ``r~^T v``; CG: -1 when ``p^T A p`` vanishes), when callbacks are
called, and GMRES's ``maxiter`` in restart cycles (inner steps with ``callback_type='legacy'``).
A step is the same arithmetic on either kind of vector; scalars are read to the host.

Complex vectors: the inner products conjugate their first argument (``xp.vdot``, as SciPy's
solvers), so CG is the Hermitian method and GMRES's Arnoldi process and Givens rotations are
the complex ones; ``cg(..., bilinear=True)`` is COCG (the bilinear form ``x^T y``, for complex
symmetric ``A``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

Vec = Any
Fn = Callable[[Vec], Vec]


class Result:
    """What an operator-path solve did."""

    def __init__(self, x: Vec, info: int, iterations: int, history: List[float], rnorm: float,
                 bnrm: float, seconds: float, message: str):
        self.x = x
        self.info = info
        self.iterations = iterations
        self.history = history
        self.rnorm = rnorm
        self.bnrm = bnrm
        self.seconds = seconds
        self.message = message


def _norm(xp: Any, v: Vec) -> float:
    return float(xp.linalg.norm(v))


def _scalar(v: Any) -> Any:
    """A 0-d result on the host: ``complex`` for a complex dtype, else ``float``."""
    return complex(v) if v.dtype.kind == "c" else float(v)


def _dot(xp: Any, a: Vec, b: Vec) -> Any:
    """``a^H b`` (``a^T b`` for real vectors)."""
    if a.dtype.kind == "c":
        return _scalar(xp.vdot(a, b))
    return float(xp.dot(a, b))


def _dotu(xp: Any, a: Vec, b: Vec) -> Any:
    """``a^T b`` without conjugation (COCG's form)."""
    return _scalar(xp.asarray(xp.dot(a, b)))


def _any(x: Vec) -> bool:
    return bool(x.any())


def cg(xp: Any, matvec: Fn, psolve: Fn, b: Vec, x: Vec, atol: float, bnrm: float, maxiter: int,
       callback: Optional[Callable[[Vec], Any]], bilinear: bool = False) -> Result:
    """Preconditioned CG (Hestenes-Stiefel): ``callback(x)`` after each iteration. With
    ``bilinear``, COCG: the same recurrence with ``x^T y`` in place of ``x^H y``."""
    t0 = time.perf_counter()
    dot = _dotu if bilinear else _dot
    r = b - matvec(x) if _any(x) else b.copy()
    hist: List[float] = []
    p = None
    rho_prev = 0.0
    for it in range(maxiter):
        rn = _norm(xp, r)
        hist.append(rn / bnrm)
        if rn < atol:
            return Result(x, 0, it, hist, rn, bnrm, time.perf_counter() - t0, "converged")
        z = psolve(r)
        rho = dot(xp, r, z)
        if it == 0:
            p = z.copy()
        else:
            p *= rho / rho_prev
            p += z
        q = matvec(p)
        pq = dot(xp, p, q)
        if pq == 0.0 or not np.isfinite(pq):
            return Result(x, -1, it, hist, rn, bnrm, time.perf_counter() - t0,
                          f"breakdown: p^T A p = {pq} at iteration {it}")
        alpha = rho / pq
        x += alpha * p
        r -= alpha * q
        rho_prev = rho
        if callback is not None:
            callback(x)
    rn = _norm(xp, r)
    hist.append(rn / bnrm)
    return Result(x, maxiter, maxiter, hist, rn, bnrm, time.perf_counter() - t0,
                  f"not converged in {maxiter} iterations")


def bicgstab(xp: Any, matvec: Fn, psolve: Fn, b: Vec, x: Vec, atol: float, bnrm: float,
             maxiter: int, callback: Optional[Callable[[Vec], Any]]) -> Result:
    """Right-preconditioned BiCGSTAB (van der Vorst): ``callback(x)`` after each full
    iteration."""
    t0 = time.perf_counter()
    eps = float(np.finfo(x.dtype).eps)
    rhotol = omegatol = eps * eps
    r = b - matvec(x) if _any(x) else b.copy()
    rt = r.copy()
    hist: List[float] = []
    p = v = None
    rho_prev = alpha = omega = 0.0

    def done(info, it, rn, msg):
        return Result(x, info, it, hist, rn, bnrm, time.perf_counter() - t0, msg)

    for it in range(maxiter):
        rn = _norm(xp, r)
        hist.append(rn / bnrm)
        if rn < atol:
            return done(0, it, rn, "converged")
        rho = _dot(xp, rt, r)
        if abs(rho) < rhotol:
            return done(-10, it, rn, f"breakdown: rho = {rho} at iteration {it}")
        if it == 0:
            p = r.copy()
        else:
            if abs(omega) < omegatol:
                return done(-11, it, rn, f"breakdown: omega = {omega} at iteration {it}")
            beta = (rho / rho_prev) * (alpha / omega)
            p -= omega * v
            p *= beta
            p += r
        phat = psolve(p)
        v = matvec(phat)
        rv = _dot(xp, rt, v)
        if rv == 0.0:
            return done(-11, it, rn, f"breakdown: r~^T v = 0 at iteration {it}")
        alpha = rho / rv
        r -= alpha * v
        sn = _norm(xp, r)
        if sn < atol:
            x += alpha * phat
            hist.append(sn / bnrm)
            return done(0, it + 1, sn, "converged")
        shat = psolve(r)
        t = matvec(shat)
        tt = _dot(xp, t, t)
        omega = _dot(xp, t, r) / tt if tt != 0.0 else 0.0
        x += alpha * phat
        x += omega * shat
        r -= omega * t
        rho_prev = rho
        if callback is not None:
            callback(x)
    rn = _norm(xp, r)
    hist.append(rn / bnrm)
    return done(maxiter, maxiter, rn, f"not converged in {maxiter} iterations")


def _rotation_complex(f: complex, g: complex) -> Tuple[float, complex, complex]:
    """``(c, s, r)`` with ``[c s; -conj(s) c] [f; g] = [r; 0]``, ``c`` real (LAPACK's
    ``zlartg`` convention up to the phase of ``r``)."""
    if g == 0:
        return 1.0, 0j, f
    if f == 0:
        return 0.0, complex(np.conj(g)) / abs(g), complex(abs(g))
    norm = float(np.hypot(abs(f), abs(g)))
    phase = f / abs(f)
    return abs(f) / norm, phase * complex(np.conj(g)) / norm, phase * norm


def _rotation(f: float, g: float) -> Tuple[float, float, float]:
    """``(c, s, r)`` with ``[c s; -s c] [f; g] = [r; 0]``."""
    if g == 0.0:
        return 1.0, 0.0, f
    if f == 0.0:
        return 0.0, 1.0, g
    r = float(np.hypot(f, g))
    return f / r, g / r, r


def gmres(xp: Any, matvec: Fn, psolve: Fn, b: Vec, x: Vec, atol: float, bnrm: float,
          restart: int, maxiter: int, callback: Optional[Callable[[Any], Any]],
          callback_type: Optional[str]) -> Result:
    """Left-preconditioned restarted GMRES(``restart``) with modified Gram-Schmidt and Givens
    rotations, SciPy's inner tolerance control and its callback types: ``'pr_norm'`` and
    ``'legacy'`` call ``callback(||M r|| / ||b||)`` after each inner step, ``'x'`` calls
    ``callback(x)`` after each cycle; ``maxiter`` counts cycles, except with ``'legacy'``
    where the solve also stops after ``maxiter`` inner steps.

    A breakdown (the new Krylov vector vanishes: the exact solution in the space, or a singular
    ``A`` or ``M``) ends the cycle with the least-squares iterate (a zero pivot of the
    triangular factor is skipped), which is returned when the true residual is not small
    enough."""
    t0 = time.perf_counter()
    n = b.shape[0]
    eps = float(np.finfo(x.dtype).eps)
    legacy = callback_type == "legacy"
    mb = _norm(xp, psolve(b))
    ptol_factor = 1.0
    ptol = mb * min(ptol_factor, atol / bnrm)
    presid = 0.0
    V = xp.empty((restart + 1, n), dtype=x.dtype)
    cplx = x.dtype.kind == "c"
    sdt = np.complex128 if cplx else np.float64
    H = np.zeros((restart, restart + 1), dtype=sdt)
    rot = np.zeros((restart, 2), dtype=sdt)
    inner = 0
    hist: List[float] = []
    r = b - matvec(x) if _any(x) else b.copy()
    rnorm = _norm(xp, r)
    hist.append(rnorm / bnrm)
    if rnorm < atol:
        return Result(x, 0, 0, hist, rnorm, bnrm, time.perf_counter() - t0, "converged")
    message = ""
    for _cycle in range(maxiter):
        z = psolve(r)
        beta = _norm(xp, z)
        if beta == 0.0 or not np.isfinite(beta):
            message = f"breakdown: ||M r|| = {beta}"
            break
        V[0] = z / beta
        S = np.zeros(restart + 1, dtype=sdt)
        S[0] = beta
        breakdown = False
        col = 0
        for col in range(restart):
            w = psolve(matvec(V[col]))
            h0 = _norm(xp, w)
            for k in range(col + 1):
                hk = _dot(xp, V[k], w)
                H[col, k] = hk
                w -= hk * V[k]
            h1 = _norm(xp, w)
            H[col, col + 1] = h1
            if h1 <= eps * h0:
                H[col, col + 1] = 0.0
                V[col + 1] = w
                breakdown = True
            else:
                V[col + 1] = w / h1
            for k in range(col):
                c, s = rot[k]
                a0, a1 = H[col, k], H[col, k + 1]
                sc = np.conj(s) if cplx else s
                H[col, k], H[col, k + 1] = c * a0 + s * a1, -sc * a0 + c * a1
            if cplx:
                c, s, mag = _rotation_complex(complex(H[col, col]), complex(H[col, col + 1]))
            else:
                c, s, mag = _rotation(H[col, col], H[col, col + 1])
            rot[col] = c, s
            H[col, col], H[col, col + 1] = mag, 0.0
            tmp = -(np.conj(s) if cplx else s) * S[col]
            S[col], S[col + 1] = c * S[col], tmp
            presid = abs(tmp)
            inner += 1
            if callback is not None and callback_type in ("legacy", "pr_norm"):
                callback(presid / bnrm)
            if legacy and inner == maxiter:
                break
            if presid <= ptol or breakdown:
                break
        # y = R^-1 S on the leading (col + 1) block, skipping zero pivots.
        if H[col, col] == 0.0:
            S[col] = 0.0
        y = S[: col + 1].copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(col, 0, -1):
                if y[k] != 0.0:
                    y[k] /= H[k, k]
                    y[:k] -= y[k] * H[k, :k]
            if y[0] != 0.0:
                y[0] /= H[0, 0]
        x += xp.asarray(y.astype(x.dtype)) @ V[: col + 1]
        r = b - matvec(x)
        rnorm = _norm(xp, r)
        hist.append(rnorm / bnrm)
        if legacy and inner == maxiter:
            info = 0 if rnorm <= atol else maxiter
            return Result(x, info, inner, hist, rnorm, bnrm, time.perf_counter() - t0,
                          "converged" if info == 0 else f"not converged in {maxiter} steps")
        if callback is not None and callback_type == "x":
            callback(x)
        if rnorm <= atol:
            break
        if breakdown:
            message = "breakdown: the Krylov space is exhausted (singular A or M)"
            break
        if presid <= ptol:
            ptol_factor = max(eps, 0.25 * ptol_factor)
        else:
            ptol_factor = min(1.0, 1.5 * ptol_factor)
        ptol = presid * min(ptol_factor, atol / rnorm)
    info = 0 if rnorm <= atol else maxiter
    if info == 0:
        message = "converged"
    elif not message:
        message = f"not converged in {maxiter} restart cycles"
    return Result(x, info, inner, hist, rnorm, bnrm, time.perf_counter() - t0, message)
