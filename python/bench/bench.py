"""segsparse from Python: binding overhead, SpMV against CuPy, CG against cupyx.

Run on the GPU machine (python/device.sh does) or anywhere (GPU rows are skipped without a GPU):

    python bench/bench.py [--raefsky2 PATH] [--json OUT.json] [--quick]

Prints a Markdown table and writes the figures as JSON. Every GPU time is measured around a
device synchronisation (CuPy events / stream sync); every timed call comes after warm-up.

1. Overhead of a Python SpMV call on an uploaded raefsky2 over the same call in Rust (the
   extension's own loop, `_Matrix.bench_rust_spmv`): CPU matrix with NumPy vectors, and GPU
   matrix with CuPy vectors (per-call time of a loop of N calls ended by one synchronisation,
   and the host time of queueing them). Goal: <= 10 us.
2. `Matrix @ x` against CuPy's `A @ x` (cuSPARSE) on large matrices, same data, same precision.
3. CG time to solution against `cupyx.scipy.sparse.linalg.cg`, same matrix, right-hand side,
   tolerance (relative 1e-6) and start; both residuals are checked with SciPy. Goal: >= 3x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

import segsparse


def poisson2d(k):
    """5-point Laplacian on a k x k grid (SPD), CSR float64."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    i = sp.identity(k)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def powerlaw(n, mean_nnz, seed=0):
    """Rows with a heavy-tailed (Zipf-like) length distribution, random columns."""
    rng = np.random.default_rng(seed)
    lens = np.minimum(rng.zipf(1.8, n), 2000)
    lens = np.maximum(1, (lens * (mean_nnz / lens.mean())).astype(np.int64))
    indptr = np.concatenate([[0], np.cumsum(lens)])
    cols = rng.integers(0, n, indptr[-1]).astype(np.int32)
    vals = rng.standard_normal(indptr[-1])
    a = sp.csr_matrix((vals, cols, indptr), shape=(n, n))
    a.sum_duplicates()
    return a


def per_call(f, reps, sync=None):
    """Median over 5 rounds of (time of `reps` calls ended by `sync`) / reps."""
    f()
    if sync:
        sync()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        if sync:
            sync()
        rounds.append((time.perf_counter() - t0) / reps)
    return statistics.median(rounds)


def overhead(a, rows, out, quick):
    reps = 200 if quick else 2000
    x = np.ones(a.shape[1])
    y = np.empty(a.shape[0])
    m = segsparse.Matrix(a, device="cpu")
    rust = statistics.median(m._m.bench_rust_spmv(reps, False) for _ in range(5))
    py = per_call(lambda: m.spmv(x, y=y), reps)
    pym = per_call(lambda: m @ x, reps)
    rows.append(("overhead", "raefsky2 CPU, NumPy", f"Rust {rust*1e6:.1f} us", f"Python spmv(x, y=y) {py*1e6:.1f} us (+{(py-rust)*1e6:.1f})", f"A @ x {pym*1e6:.1f} us (+{(pym-rust)*1e6:.1f})"))
    out["overhead_cpu"] = {"rust_us": rust * 1e6, "python_spmv_us": py * 1e6, "python_matmul_us": pym * 1e6,
                           "overhead_us": (py - rust) * 1e6}
    if not segsparse.gpu_available():
        return
    import cupy as cp

    g = segsparse.Matrix(a, device="gpu")
    xd, yd = cp.ones(a.shape[1]), cp.empty(a.shape[0])
    sync = cp.cuda.get_current_stream().synchronize
    rust = statistics.median(g._m.bench_rust_spmv(reps, True) for _ in range(5))
    py = per_call(lambda: g.spmv(xd, y=yd), reps, sync)
    pym = per_call(lambda: g @ xd, reps, sync)
    # Host cost of queueing alone (no synchronisation inside the timed loop).
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        g.spmv(xd, y=yd)
    host = (time.perf_counter() - t0) / reps
    sync()
    rows.append(("overhead", "raefsky2 GPU, CuPy", f"Rust {rust*1e6:.1f} us", f"Python spmv(x, y=y) {py*1e6:.1f} us (+{(py-rust)*1e6:.1f})", f"A @ x {pym*1e6:.1f} us; queueing {host*1e6:.1f} us/call"))
    out["overhead_gpu"] = {"rust_us": rust * 1e6, "python_spmv_us": py * 1e6, "python_matmul_us": pym * 1e6,
                           "host_queue_us": host * 1e6, "overhead_us": (py - rust) * 1e6,
                           "algorithm": g.gpu_algorithm}


def gpu_time(f, reps):
    """Median of `reps` CUDA-event timings of f() on CuPy's current stream (after warm-up)."""
    import cupy as cp

    for _ in range(3):
        f()
    s = cp.cuda.get_current_stream()
    ts = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(s)
        f()
        e1.record(s)
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
    return statistics.median(ts)


def spmv_vs_cupy(mats, rows, out, quick):
    import cupy as cp
    import cupyx.scipy.sparse as csp

    out["spmv"] = []
    for name, a in mats:
        a64 = a.astype(np.float64)
        m = segsparse.Matrix(a64, device="gpu")
        c = csp.csr_matrix(a64)
        x = cp.asarray(np.random.default_rng(1).standard_normal(a.shape[1]))
        y1 = m @ x
        y2 = c @ x
        err = float(cp.abs(y1 - y2).max() / (cp.abs(y2).max() + 1e-300))
        reps = 20 if quick else 100
        ts = gpu_time(lambda: m @ x, reps)
        tc = gpu_time(lambda: c @ x, reps)
        gb = (a.nnz * 12 + (a.shape[0] + 1) * 4 + (a.shape[0] + a.shape[1]) * 8) / 1e9
        rows.append(("spmv f64", f"{name} ({a.shape[0]} rows, {a.nnz} nnz)", f"segsparse {ts*1e6:.1f} us ({gb/ts:.0f} GB/s)", f"CuPy {tc*1e6:.1f} us ({gb/tc:.0f} GB/s)", f"speed-up {tc/ts:.2f}x, max rel diff {err:.1e}"))
        out["spmv"].append({"matrix": name, "rows": a.shape[0], "nnz": a.nnz, "segsparse_us": ts * 1e6,
                            "cupy_us": tc * 1e6, "speedup": tc / ts, "max_rel_diff": err,
                            "algorithm": m.gpu_algorithm})


def cg_vs_cupyx(mats, rows, out, rtol):
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cla
    import inspect

    out["cg"] = []
    tolkw = "rtol" if "rtol" in inspect.signature(cla.cg).parameters else "tol"
    for name, a in mats:
        m = segsparse.Matrix(a, device="gpu")
        c = csp.csr_matrix(a)
        b = np.random.default_rng(2).standard_normal(a.shape[0])
        bd = cp.asarray(b)
        bnorm = np.linalg.norm(b)
        # warm-up (kernel compiles, CuPy's cuSPARSE handles)
        segsparse.cg(m, bd, rtol=rtol, maxiter=5)
        cla.cg(c, bd, maxiter=5, **{tolkw: rtol})
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        x1, info = segsparse.cg(m, bd, rtol=rtol, maxiter=100000)
        cp.cuda.Device().synchronize()
        t1 = time.perf_counter() - t0
        it = [0]
        t0 = time.perf_counter()
        x2, info2 = cla.cg(c, bd, maxiter=100000, callback=lambda _x: it.__setitem__(0, it[0] + 1), **{tolkw: rtol})
        cp.cuda.Device().synchronize()
        t2 = time.perf_counter() - t0
        r1 = np.linalg.norm(b - a @ cp.asnumpy(x1)) / bnorm
        r2 = np.linalg.norm(b - a @ cp.asnumpy(x2)) / bnorm
        rows.append(("cg f64", f"{name} rtol {rtol:g}", f"segsparse {t1*1e3:.1f} ms, {info.iterations} it, res {r1:.1e}", f"cupyx {t2*1e3:.1f} ms, {it[0]} it, res {r2:.1e}", f"speed-up {t2/t1:.2f}x"))
        out["cg"].append({"matrix": name, "rows": a.shape[0], "nnz": a.nnz, "rtol": rtol,
                          "segsparse_s": t1, "segsparse_iters": info.iterations, "segsparse_res": r1,
                          "cupyx_s": t2, "cupyx_iters": it[0], "cupyx_info": int(info2), "cupyx_res": r2,
                          "speedup": t2 / t1})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raefsky2", default=None, help="path of raefsky2.mtx(.gz)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    args = ap.parse_args()
    path = args.raefsky2
    if path is None:
        for d in (os.environ.get("SEGSPARSE_DATA", ""), "matrices", "../matrices"):
            p = os.path.join(d, "raefsky2.mtx.gz")
            if d and os.path.exists(p):
                path = p
                break
    out = {"device": segsparse.device_name() or "none (CPU only)", "cpu": platform.processor() or platform.machine(),
           "python": sys.version.split()[0], "numpy": np.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    rows = []
    a = segsparse.load_matrix_market(path) if path else poisson2d(57)
    overhead(a, rows, out, args.quick)
    if segsparse.gpu_available():
        import cupy as cp

        out["cupy"] = cp.__version__
        k = 1000 if args.quick else 2000
        n = 500_000 if args.quick else 2_000_000
        large = [(f"poisson2d {k}x{k}", poisson2d(k)), (f"powerlaw {n}", powerlaw(n, 10))]
        spmv_vs_cupy(large, rows, out, args.quick)
        cg_vs_cupyx([("poisson2d 1000x1000", poisson2d(1000) if not args.quick else poisson2d(300))], rows, out, 1e-6)
    print(f"device: {out['device']}  date: {out['date']}  python {out['python']}")
    print("| what | case | segsparse / Rust | Python / peer | note |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    text = json.dumps(out, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
