#!/usr/bin/env python3
"""PyAMG's smoothed aggregation (default options, CG acceleration) on the AMG benchmark problems.

The peer of `sparse-solve --precond amg` (benches/results/history/amg.md): the same problems, built the
way segsparse's generators build them (which follow PyAMG's gallery), f64, b = A·1, x0 = 0,
stopping at ||b - A x|| < rtol ||b|| (PyAMG's criteria 'rr').

Usage:  pyamg_peer.py SPEC [SPEC ...] [--rtol 1e-8] [--maxiter 2000] [--rhs 1]
  SPEC: poisson3d:N | poisson3d27:N | aniso2d:N:EPS | elasticity2d:N | path/to/matrix.mtx[.gz]
One JSON line per problem on stdout: setup_seconds, solve_seconds (per right-hand side),
iterations, levels, rows and nnz per level, operator and grid complexity.
PyAMG is not installed on the GPU machine: install the wheel with
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/pyamg-*.whl
  export PYTHONPATH=/tmp/site
"""

import argparse
import json
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import pyamg
from pyamg.gallery import linear_elasticity, poisson, stencil_grid
from pyamg.gallery.diffusion import diffusion_stencil_2d


def build(spec):
    """(A, B, name) for a spec; B is None for the constant."""
    parts = spec.split(":")
    kind = parts[0]
    if kind == "poisson3d":
        n = int(parts[1])
        return poisson((n, n, n), format="csr"), None
    if kind == "poisson3d27":
        n = int(parts[1])
        st = -np.ones((3, 3, 3))
        st[1, 1, 1] = 26.0
        return stencil_grid(st, (n, n, n), format="csr"), None
    if kind == "aniso2d":
        n, eps = int(parts[1]), float(parts[2])
        st = diffusion_stencil_2d(epsilon=eps, theta=0.0)
        return stencil_grid(st, (n, n), format="csr"), None
    if kind == "elasticity2d":
        n = int(parts[1])
        a, b = linear_elasticity((n, n))
        return a, b
    if kind == "poisson2d":
        n = int(parts[1])
        return poisson((n, n), format="csr"), None
    a = scipy.io.mmread(spec)
    return sp.csr_matrix(a), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--maxiter", type=int, default=2000)
    ap.add_argument("--rhs", type=int, default=1, help="right-hand sides solved with one setup")
    args = ap.parse_args()
    for spec in args.specs:
        t0 = time.perf_counter()
        a, b = build(spec)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ml = pyamg.smoothed_aggregation_solver(a, B=b)
        setup_s = time.perf_counter() - t0
        rhs = a @ np.ones(a.shape[0])
        solve_times, iters = [], []
        for k in range(args.rhs):
            bk = rhs if k == 0 else rhs * (1.0 + 0.1 * k)
            res = []
            t0 = time.perf_counter()
            x = ml.solve(bk, tol=args.rtol, maxiter=args.maxiter, accel="cg", residuals=res)
            solve_times.append(time.perf_counter() - t0)
            iters.append(len(res) - 1)
        r = np.linalg.norm(rhs - a @ x if args.rhs == 1 else bk - a @ x) / np.linalg.norm(bk)
        levels = [(lv.A.shape[0], lv.A.nnz) for lv in ml.levels]
        out = {
            "peer": "pyamg",
            "pyamg_version": pyamg.__version__,
            "problem": spec,
            "rows": a.shape[0],
            "nnz": int(a.nnz),
            "build_seconds": build_s,
            "setup_seconds": setup_s,
            "solve_seconds": solve_times[0],
            "solve_seconds_all": sum(solve_times),
            "rhs": args.rhs,
            "iterations": iters[0],
            "iterations_all": iters,
            "relative_residual": float(r),
            "levels": len(levels),
            "level_rows": [lv[0] for lv in levels],
            "level_nnz": [lv[1] for lv in levels],
            "operator_complexity": float(ml.operator_complexity()),
            "grid_complexity": float(ml.grid_complexity()),
        }
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
