"""The AMG setup from Python against `sparse-solve`'s, first and later setups, and setup + solve
against plain CG, all in one process per problem (so the first setup is the process's first).

    python3 benches/amg/entry_points.py PROBLEM [SOURCE] [--no-cg] [--tight]

PROBLEM: a `sparse-solve` generator spec (``poisson3d:128``, ``poisson3d27:110``,
``aniso3d:96:0.001``, ``fem3d:p2:36``, ``elasticity3d:70`` — with its six rigid-body modes and 3
unknowns per node), built by the crate's generator (``_core.generate_matrix``). SOURCE: ``scipy``
(default: a SciPy CSR matrix handed to ``segsparse.Matrix``) or ``cupy`` (a
``cupyx.scipy.sparse`` matrix). Prints one JSON line: setups (wall seconds around
``segsparse.amg``, and the library's own setup seconds), re-setups, the AMG-preconditioned CG
solve and plain CG on the GPU (wall seconds, iterations), the memory pool's bytes after the
first setup, and the bytes copied between host and device by the setups. ``--tight``: the
first ``segsparse.amg`` follows ``segsparse.Matrix`` at once (the right-hand side is built after
the setups), so nothing but the upload overlaps what the library does in the background.
"""

import json
import sys
import time

import numpy as np
import scipy.sparse as sp


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    spec = args[0]
    source = args[1] if len(args) > 1 else "scipy"
    import segsparse
    from segsparse import _core

    t0 = time.perf_counter()
    kw = {}
    indptr, indices, data, shape = _core.generate_matrix(spec)
    a = sp.csr_matrix((data, indices, indptr), shape=shape)
    if spec.startswith("elasticity3d:"):
        kw = dict(candidates=_core.rigid_body_modes(spec), block_size=3)
    build_s = time.perf_counter() - t0
    import cupy as cp

    if source == "cupy":
        import cupyx.scipy.sparse as csp

        src = csp.csr_matrix(a)
    else:
        src = a
    t0 = time.perf_counter()
    M = segsparse.Matrix(src, device="gpu")
    upload_s = time.perf_counter() - t0
    tight = "--tight" in sys.argv
    b = None if tight else cp.asarray(a @ np.ones(a.shape[0]))
    out = dict(problem=spec, source=source, tight=tight, rows=a.shape[0], nnz=a.nnz,
               build_s=build_s, upload_s=upload_s, device=segsparse.device_name())
    setups, lib, moved = [], [], []
    for k in range(3):
        cp.cuda.Device().synchronize()
        tr0 = _core.transfer_bytes()
        t0 = time.perf_counter()
        ml = segsparse.amg(M, **kw)
        setups.append(time.perf_counter() - t0)
        tr1 = _core.transfer_bytes()
        lib.append(ml.setup_seconds)
        moved.append((tr1[0] - tr0[0], tr1[1] - tr0[1]))
        if k == 0:
            out["pool_after_first"] = _core.pool_bytes()
    if b is None:
        b = cp.asarray(a @ np.ones(a.shape[0]))
    out.update(setup_wall=setups, setup_lib=lib, setup_moved=moved, levels=ml.levels,
               operator_complexity=ml.operator_complexity)
    res = []
    for _ in range(3):
        t0 = time.perf_counter()
        ml.update(M)
        res.append(time.perf_counter() - t0)
    out["resetup_wall"] = res
    # Each solve twice: the first in the process also pays one-time costs (reported apart).
    walls, libs = [], []
    for _ in range(2):
        t0 = time.perf_counter()
        x, info = ml.solve(b, rtol=1e-8, maxiter=2000)
        cp.cuda.Device().synchronize()
        walls.append(time.perf_counter() - t0)
        libs.append(info.solve_seconds)
    out.update(amg_solve_s=walls[0], amg_solve_wall=walls, amg_solve_lib=libs,
               amg_it=int(info.iterations), amg_converged=bool(info.converged))
    if "--no-cg" not in sys.argv:
        walls, libs = [], []
        for _ in range(2):
            t0 = time.perf_counter()
            x, info = segsparse.cg(M, b, rtol=1e-8, maxiter=20000)
            cp.cuda.Device().synchronize()
            walls.append(time.perf_counter() - t0)
            libs.append(info.solve_seconds)
        out.update(cg_s=walls[0], cg_wall=walls, cg_lib=libs, cg_it=int(info.iterations),
                   cg_converged=bool(info.converged))
    out["has_host_copy"] = bool(M._m.has_host_copy())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
