#!/usr/bin/env python3
"""`segsparse.solve`'s default against the explicit choices from Python, on the GPU machine:
matrices of the validation's kinds built with SciPy (Poisson 3D, upwind convection–diffusion 3D,
a saddle point, P1-like elasticity is left to the CLI harness), each solved

  - from CuPy (`segsparse.Matrix(A, device="gpu")` built once, `b` a CuPy array): the default
    (`segsparse.solve`) the first time in the process for that pattern and the second time (the
    per-pattern cache), then every explicit choice (`segsparse.cg` / `bicgstab` / `gmres` with
    `M=None`, `"jacobi"`, `"ilu0"`, `"amg"`) in the same process;
  - from SciPy (`segsparse.solve(A_scipy, b_numpy)`: the upload is part of each call).

Every call is timed with the device synchronised (wall clock); kernels are compiled by a
warm-up on a small system first. One JSON line per call on stdout.

    python3 benches/auto/python_auto.py [--scale 1.0]
"""

import argparse
import json
import time

import numpy as np
import scipy.sparse as sp

import segsparse


def lap1(k):
    return sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k), format="csr")


def poisson3d(k):
    i = sp.identity(k, format="csr")
    t = lap1(k)
    return (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()


def convdiff3d(k, pe):
    """Upwind finite differences of -Δu + Pe (b·∇u), b = (1, 1, 1)/√3, on a k³ grid (h = 1/(k+1)):
    unsymmetric, weakly diagonally dominant."""
    h = 1.0 / (k + 1)
    c = pe * h / np.sqrt(3.0)
    t = sp.diags([-1.0 - c, 2.0 + c, -1.0], [-1, 0, 1], shape=(k, k), format="csr")
    i = sp.identity(k, format="csr")
    return (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()


def saddle(k, stride):
    """[[K, B^T], [B, 0]]: the 2D Laplacian and one averaging constraint per `stride` nodes."""
    t = lap1(k)
    kk = sp.kronsum(t, t, format="csr")
    n = kk.shape[0]
    rows = np.arange(0, n - 1, stride)
    m = len(rows)
    b = sp.csr_matrix((np.full(2 * m, 0.5), (np.repeat(np.arange(m), 2),
                                             np.stack([rows, rows + 1], 1).ravel())), shape=(m, n))
    return sp.bmat([[kk, b.T], [b, None]], format="csr")


CHOICES = {
    "spd": [("cg", None), ("cg", "jacobi"), ("cg", "amg")],
    "unsym": [("bicgstab", None), ("bicgstab", "jacobi"), ("gmres", "ilu0")],
    "symind": [("bicgstab", None), ("gmres", None), ("gmres", "ilu0")],
}


def timed(cp, f):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    x, info = f()
    cp.cuda.Device().synchronize()
    return x, info, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    import cupy as cp

    s = args.scale
    systems = [
        ("poisson3d", "spd", poisson3d(int(100 * s))),
        ("convdiff3d Pe 100", "unsym", convdiff3d(int(100 * s), 100.0)),
        ("saddle 2D", "symind", saddle(int(600 * s), 5)),
    ]
    # Warm-up: every method and preconditioner once on small systems (kernel compiles).
    for _, cls, a in [("w", "spd", poisson3d(12)), ("w", "unsym", convdiff3d(12, 100.0)),
                      ("w", "symind", saddle(30, 5))]:
        m = segsparse.Matrix(a, device="gpu")
        b = cp.ones(a.shape[0])
        segsparse.solve(m, b, rtol=1e-8)
        for meth, pre in CHOICES[cls]:
            getattr(segsparse, meth)(m, b, M=pre, rtol=1e-8, maxiter=2000)
    for name, cls, a in systems:
        m = segsparse.Matrix(a, device="gpu")
        b = cp.ones(a.shape[0])
        base = {"system": name, "class": cls, "n": a.shape[0], "nnz": a.nnz}
        for call in ("first", "second"):
            x, info, sec = timed(cp, lambda: segsparse.solve(m, b, rtol=1e-8))
            ch = info.choice
            print(json.dumps({**base, "path": "cupy", "choice": "default", "call": call,
                              "seconds": sec, "converged": bool(info.converged),
                              "iterations": info.iterations, "method": info.method,
                              "precond": info.precond, "cached": ch["cached"],
                              "stats_seconds": ch["seconds"], "probe": ch["probe"],
                              "setup_seconds": info.setup_seconds,
                              "solve_seconds": info.solve_seconds}), flush=True)
        for meth, pre in CHOICES[cls]:
            maxiter = 20000 if meth != "gmres" else 700
            x, info, sec = timed(cp, lambda: getattr(segsparse, meth)(m, b, M=pre, rtol=1e-8,
                                                                       maxiter=maxiter))
            print(json.dumps({**base, "path": "cupy", "choice": f"{meth}+{pre or 'none'}",
                              "seconds": sec, "converged": bool(info.converged),
                              "iterations": info.iterations}), flush=True)
        bh = np.ones(a.shape[0])
        for call in ("first", "second"):
            t0 = time.perf_counter()
            x, info = segsparse.solve(a, bh, rtol=1e-8)
            sec = time.perf_counter() - t0
            print(json.dumps({**base, "path": "scipy", "choice": "default", "call": call,
                              "seconds": sec, "converged": bool(info.converged),
                              "method": info.method, "precond": info.precond,
                              "device": info.device}), flush=True)


if __name__ == "__main__":
    main()
