"""The cost of SciPy's ``callback`` on the crate's solver body (CPU): seconds per iteration of
CG with no callback, with a no-op ``callback(xk)``, and with ``M`` as a Python callable, on 2D
Poisson problems; SciPy's own CG with the same callback beside them (same process, same data,
same tolerance, the iteration counts printed to show the runs did the same work).

    python bench/callback.py [--json OUT.jsonl] [--commit C] [--reps 5]

A callback makes the solve read its status after every iteration (no blocks of iterations),
copy ``x`` into a new NumPy array and call into Python with the GIL; the figure is the median
over ``--reps`` runs of (seconds with - seconds without) / iterations.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import segsparse


def poisson2d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m), format="csr")
    i = sp.identity(m)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = fn()
        out.append((time.perf_counter() - t0, r))
    return statistics.median(t for t, _ in out), out[-1][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for m in (32, 128, 512):
        a = poisson2d(m)
        n = a.shape[0]
        b = np.ones(n)
        A = segsparse.Matrix(a, device="cpu")
        rtol, maxiter = 1e-8, 300

        def ours(**kw):
            return segsparse.cg(A, b, rtol=rtol, maxiter=maxiter, device="cpu", **kw)[1]

        t_plain, info = timed(ours, args.reps)
        t_cb, info_cb = timed(lambda: ours(callback=lambda xk: None), args.reps)
        t_m, info_m = timed(lambda: ours(M=lambda r: r), args.reps)
        calls = [0]

        def scipy_cb(xk):
            calls[0] += 1

        t_sp, _ = timed(lambda: spla.cg(a, b, rtol=rtol, maxiter=maxiter, callback=scipy_cb),
                        args.reps)
        t_sp0, _ = timed(lambda: spla.cg(a, b, rtol=rtol, maxiter=maxiter), args.reps)
        it = info.iterations
        assert info_cb.iterations == it and info_cb.path == "crate", info_cb
        row = {
            "bench": "python-callback", "n": n, "iterations": it,
            "iterations_callback": info_cb.iterations, "iterations_python_m": info_m.iterations,
            "s_per_it_plain": t_plain / it, "s_per_it_callback": t_cb / it,
            "callback_overhead_s_per_it": (t_cb - t_plain) / it,
            "python_m_overhead_s_per_it": (t_m - t_plain) / info_m.iterations,
            "scipy_s_per_it_callback": t_sp / max(calls[0] // args.reps, 1),
            "scipy_callback_overhead_s_per_it": (t_sp - t_sp0) / max(calls[0] // args.reps, 1),
            "device": f"CPU ({platform.processor() or platform.machine()}, host)",
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": args.commit,
        }
        rows.append(row)
        print(f"n={n:>7} it={it:>4}  plain {row['s_per_it_plain'] * 1e6:8.1f} us/it  "
              f"+callback {row['callback_overhead_s_per_it'] * 1e6:7.1f} us/it  "
              f"+python M {row['python_m_overhead_s_per_it'] * 1e6:7.1f} us/it  "
              f"scipy {row['scipy_s_per_it_callback'] * 1e6:8.1f} us/it "
              f"(callback {row['scipy_callback_overhead_s_per_it'] * 1e6:6.1f})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
