#!/usr/bin/env python3
"""Peers of benches/complex/complex_solvers.rs on the complex shifted Helmholtz problem.

Builds the matrix of the crate's `helmholtz3d:N:K:SHIFT` generator with SciPy (the 7-point
stencil scaled by h^2: diagonal 6 - (Kh)^2 + i SHIFT (Kh)^2, -1 for each grid neighbour,
h = 1/(N+1), row r = x + N y + N^2 z), b = 1, x0 = 0, relative tolerance RTOL on
||b - A x|| / ||b|| (atol 0), and reports as JSON lines:

- SciPy's GMRES(30) and BiCGSTAB on the host CPU: iterations (GMRES: inner iterations, counted
  by a `pr_norm` callback; BiCGSTAB: one callback per iteration), time, true residual;
- CuPy's `cupyx.scipy.sparse.linalg.gmres` (restart 30) on the GPU: time to solution (median of
  3 after a warm-up, synchronised), iterations, true residual.

Usage: python3 benches/complex/peers.py [SPEC [RTOL [WHICH]]]   (WHICH: scipy,cupy)
"""

import json
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def helmholtz3d(n, k, shift):
    h = 1.0 / (n + 1.0)
    kh2 = (k * h) ** 2
    t = sp.diags([-np.ones(n - 1), -np.ones(n - 1)], [-1, 1], shape=(n, n), format="csr")
    i = sp.identity(n, format="csr")
    off = sp.kron(sp.kron(i, i), t) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(t, i), i)
    d = complex(6.0 - kh2, shift * kh2)
    a = (off.astype(np.complex128) + d * sp.identity(n ** 3, dtype=np.complex128, format="csr"))
    a = a.tocsr()
    a.sort_indices()
    return a


def rel_res(a, x, b):
    return float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))


def tol_kw(fn, rtol):
    """SciPy >= 1.12 and CuPy >= 14 take rtol=, older versions tol=."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    return {"rtol": rtol} if "rtol" in params else {"tol": rtol}


def row(**kw):
    print(json.dumps(kw), flush=True)


def scipy_peers(spec, a, b, rtol, device):
    its = [0]

    def count(_):
        its[0] += 1

    t = time.perf_counter()
    x, info = spla.gmres(a, b, restart=30, maxiter=2000, atol=0.0, callback=count,
                         callback_type="pr_norm", **tol_kw(spla.gmres, rtol))
    s = time.perf_counter() - t
    row(bench="complex-solve-peer", peer="scipy-gmres(30)", scipy=scipy.__version__, matrix=spec,
        rtol=rtol, converged=info == 0, iterations=its[0], seconds=s,
        true_rel_residual=rel_res(a, x, b), device=device)
    its[0] = 0
    t = time.perf_counter()
    x, info = spla.bicgstab(a, b, maxiter=20000, atol=0.0, callback=count,
                            **tol_kw(spla.bicgstab, rtol))
    s = time.perf_counter() - t
    row(bench="complex-solve-peer", peer="scipy-bicgstab", scipy=scipy.__version__, matrix=spec,
        rtol=rtol, converged=info == 0, iterations=its[0], products=2 * its[0], seconds=s,
        true_rel_residual=rel_res(a, x, b), device=device)


def cupy_peer(spec, a, b, rtol, device):
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cspla

    da = csp.csr_matrix(a)
    db = cp.asarray(b)
    kw = dict(restart=30, maxiter=2000, atol=0.0, **tol_kw(cspla.gmres, rtol))

    def once():
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        x, info = cspla.gmres(da, db, **kw)
        cp.cuda.runtime.deviceSynchronize()
        return time.perf_counter() - t, x, info

    once()  # warm-up: kernel compilation
    runs = [once() for _ in range(3)]
    s = sorted(r[0] for r in runs)[1]
    _, x, info = runs[-1]
    its = [0]

    def count(_):
        its[0] += 1

    try:
        cspla.gmres(da, db, callback=count, callback_type="pr_norm", **kw)
    except Exception:  # an older CuPy without pr_norm callbacks
        its[0] = None
    row(bench="complex-solve-peer", peer="cupy-gmres(30)", cupy=cp.__version__, matrix=spec,
        rtol=rtol, converged=int(info) == 0, iterations=its[0], seconds=s,
        true_rel_residual=rel_res(a, cp.asnumpy(x), b), device=device)


def main():
    spec = sys.argv[1] if len(sys.argv) > 1 else "helmholtz3d:100:20:0.5"
    rtol = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-6
    which = sys.argv[3].split(",") if len(sys.argv) > 3 else ["scipy", "cupy"]
    name, n, k, shift = spec.split(":")
    assert name == "helmholtz3d", spec
    a = helmholtz3d(int(n), float(k), float(shift))
    b = np.ones(a.shape[0], dtype=np.complex128)
    device = "unknown"
    try:
        import cupy as cp

        device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        pass
    print(f"{spec}: {a.shape[0]} rows, {a.nnz} entries", file=sys.stderr)
    if "scipy" in which:
        scipy_peers(spec, a, b, rtol, device)
    if "cupy" in which:
        cupy_peer(spec, a, b, rtol, device)


if __name__ == "__main__":
    main()
