#!/usr/bin/env python3
"""SciPy's restarted GMRES on the nonsymmetric matrices of ../shared/matrices: the iteration
counts that segsparse's `gmres` is compared with in benches/results/history/solvers.md.

    python3 benches/solvers/scipy_gmres.py [DATA_DIR] > gmres-scipy.json

Same problem as the Rust tests: b = ones, x0 = 0, restart 30, rtol 1e-8 on ||b - A x|| / ||b||
(SciPy's criterion, atol 0), at most 10 000 inner iterations. The inner-iteration count comes
from callback_type="pr_norm" (one call per inner iteration); the true residual is recomputed here.
"""
import json
import os
import sys
import time

import numpy as np
import scipy
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

NAMES = ["raefsky2", "cage8", "orsirr_1", "sherman5", "fs_183_1", "west0479", "hor_131",
         "watt_2", "olm1000"]


def run(a, b, m=None, restart=30, rtol=1e-8, max_inner=10_000):
    count = [0]

    def cb(_):
        count[0] += 1

    t = time.perf_counter()
    x, info = spla.gmres(a, b, rtol=rtol, atol=0.0, restart=restart,
                         maxiter=-(-max_inner // restart), M=m, callback=cb,
                         callback_type="pr_norm")
    dt = time.perf_counter() - t
    rel = float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))
    return {"iterations": count[0], "info": int(info), "true_rel_residual": rel,
            "converged": bool(rel <= rtol), "seconds": dt}


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "shared", "matrices")
    out = {"scipy": scipy.__version__, "restart": 30, "rtol": 1e-8, "rows": []}
    for name in NAMES:
        path = os.path.join(data, name + ".mtx.gz")
        if not os.path.exists(path):
            continue
        a = sp.csr_matrix(scipy.io.mmread(path)).astype(np.float64)
        b = np.ones(a.shape[0])
        row = {"matrix": name, "n": a.shape[0], "plain": run(a, b)}
        d = a.diagonal()
        if np.all(d != 0):
            row["jacobi"] = run(a, b, m=sp.diags(1.0 / d))
        out["rows"].append(row)
        print(json.dumps(row), file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
