#!/usr/bin/env python3
"""CuPy as the peer of segsparse's solvers: time to solution of cupyx.scipy.sparse.linalg.cg and
gmres on the GPU machine, on the problems of benches/results/history/solvers.md.

    python3 benches/solvers/cupy_solvers.py [DATA_DIR] > cupy.json

Problems (as segsparse's generator builds them: unscaled 5-/7-point Laplacians, Dirichlet
boundary): poisson2d:1000 and poisson3d:100 with CG, raefsky2 with GMRES(30); b = ones, x0 = 0,
relative tolerance 1e-8 on ||b - A x|| / ||b|| (CuPy's criterion, atol 0). Time to solution is the
median of 3 solves after a warm-up solve, each ending with a device synchronisation; the matrix
upload is not timed (segsparse's time to solution also excludes its upload). The true relative
residual is recomputed on the device. Prints one JSON object.
"""
import json
import os
import sys
import time

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cspla
import numpy as np
import scipy.io
import scipy.sparse as sp


def poisson2d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.identity(m)
    return (sp.kron(i, t) + sp.kron(t, i)).tocsr()


def poisson3d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.identity(m)
    return (sp.kron(sp.kron(i, i), t) + sp.kron(sp.kron(i, t), i)
            + sp.kron(sp.kron(t, i), i)).tocsr()


def solve(kind, a, b, rtol, maxiter, restart=30):
    count = [0]

    def cb(_):
        count[0] += 1

    kw = dict(atol=0.0, callback=cb)
    for tolname in ("rtol", "tol"):
        try:
            if kind == "cg":
                x, info = cspla.cg(a, b, maxiter=maxiter, **{tolname: rtol}, **kw)
            else:
                x, info = cspla.gmres(a, b, restart=restart, maxiter=-(-maxiter // restart),
                                      callback_type="pr_norm", **{tolname: rtol}, **kw)
            return x, info, count[0]
        except TypeError:
            count[0] = 0
            continue
    raise RuntimeError("neither rtol= nor tol= accepted by this CuPy")


def run(name, kind, a_host, rtol=1e-8, maxiter=20_000, reps=3):
    a = csp.csr_matrix(a_host)
    b = cp.ones(a.shape[0], dtype=cp.float64)
    solve(kind, a, b, rtol, maxiter)  # warm-up (kernel compilation)
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        x, info, its = solve(kind, a, b, rtol, maxiter)
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - t)
    rel = float(cp.linalg.norm(b - a @ x) / cp.linalg.norm(b))
    t = sorted(times)[len(times) // 2]
    return {"problem": name, "method": kind, "n": a.shape[0], "nnz": int(a.nnz),
            "iterations": its, "info": int(info), "true_rel_residual": rel,
            "seconds": t, "us_per_iteration": 1e6 * t / max(its, 1)}


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SEGSPARSE_DATA", "matrices")
    out = {"cupy": cp.__version__, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "rows": []}
    problems = [("poisson2d:1000", "cg", lambda: poisson2d(1000)),
                ("poisson3d:100", "cg", lambda: poisson3d(100))]
    path = os.path.join(data, "raefsky2.mtx.gz")
    if os.path.exists(path):
        problems.append(("raefsky2", "gmres",
                         lambda: sp.csr_matrix(scipy.io.mmread(path)).astype(np.float64)))
    for name, kind, make in problems:
        try:
            row = run(name, kind, make())
        except Exception as e:  # report, keep going
            row = {"problem": name, "method": kind, "error": repr(e)}
        out["rows"].append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
