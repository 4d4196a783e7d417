#!/usr/bin/env python3
"""`segsparse.solve`'s default against the explicit choices from Python, on the GPU machine, on
the held-out kinds of the issue's table: P2 finite elements (`fem3d:p2`), the crate's
`elasticity3d`, upwind convection–diffusion 3D (`convdiff3d`) and a saddle point (`kkt2d`), the
matrices from the crate's generators (`_core.generate_matrix`, the specs of `sparse-solve`)
handed over as SciPy CSR matrices, each solved

  - from CuPy (`segsparse.Matrix(A, device="gpu")` built once, `b` a CuPy array): the default
    (`segsparse.solve`) the first time in the process for that pattern and the second time (the
    per-pattern cache), then every explicit choice (`segsparse.cg` / `bicgstab` / `gmres` with
    `M=None`, `"jacobi"`, `"ilu0"`, `"amg"`) in the same process;
  - from SciPy (`segsparse.solve(A_scipy, b_numpy)`: the upload is part of each call).

Every call is timed with the device synchronised (wall clock); kernels are compiled by a
warm-up on a small system first. One JSON line per call on stdout.

    python3 benches/auto/python_auto.py [--systems fem3d:p2:35,elasticity3d:60,...]
"""

import argparse
import json
import time

import numpy as np
import scipy.sparse as sp

import segsparse


SYSTEMS = "fem3d:p2:35:spd,elasticity3d:60:spd,convdiff3d:100:100:unsym,kkt2d:600:36000:symind"
WARMUP = {"spd": "poisson3d:16", "unsym": "convdiff3d:16:100", "symind": "kkt2d:40:100"}


def generated(spec):
    """The generator's matrix as a SciPy CSR matrix."""
    indptr, indices, data, shape = segsparse._core.generate_matrix(spec)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


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
    ap.add_argument("--systems", default=SYSTEMS,
                    help="comma-separated SPEC:CLASS (CLASS spd, unsym or symind) "
                         f"[default: {SYSTEMS}]")
    args = ap.parse_args()
    import cupy as cp

    systems = []
    for item in args.systems.split(","):
        spec, cls = item.rsplit(":", 1)
        systems.append((spec, cls, generated(spec)))
    # Warm-up: every method and preconditioner once on small systems (kernel compiles).
    for cls, spec in WARMUP.items():
        a = generated(spec)
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
