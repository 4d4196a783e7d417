"""Handing a SciPy CSR matrix to the GPU: ``segsparse.Matrix(A)`` against
``cupyx.scipy.sparse.csr_matrix(A)``, in the same process, same matrix.

    python bench/upload.py [--json OUT.jsonl] [--reps 5] [--matrices DIR] [--quick]

Matrices: Poisson 3D 200^3 (7-point, 8 M rows, 55.7 M entries; float64 and float32) and the
larger matrices of the corpus found under ``--matrices`` (Matrix Market files). Each timing is
wall time from the call to the matrix being usable on the device (CuPy: its three arrays;
segsparse: validated, converted and with its SpMV tables), the device synchronised. After a
warm-up of both (kernels compiled, first-touch allocations done), ``reps`` alternating rounds;
medians reported, with segsparse's ``upload_seconds`` breakdown of its median round. Variants:
``reuse`` (``reuse_buffers=True``: the pinned staging kept across calls), ``fresh`` (the
staging allocated in the call: ``release_upload_buffers()`` before it) and ``host``
(``SEGSPARSE_UPLOAD=host``: the crate's CsrMatrix built and checked on the host, then uploaded,
as ``Matrix`` did before; 2 rounds). ``ratio`` is CuPy's median over segsparse's (>= 1:
segsparse is at least as fast).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import glob
import json
import os
import platform
import statistics
import subprocess
import time

import numpy as np
import scipy.sparse as sp

import segsparse


def poisson3d(n: int, dtype=np.float64) -> sp.csr_matrix:
    """7-point Laplacian on an n^3 grid, built row-wise with NumPy (sorted columns)."""
    N = n ** 3
    i = np.arange(N, dtype=np.int32)
    z, y, x = i // (n * n), (i // n) % n, i % n
    offs = np.array([-n * n, -n, -1, 0, 1, n, n * n], dtype=np.int32)
    mask = np.ones((N, 7), dtype=bool)
    mask[:, 0], mask[:, 1], mask[:, 2] = z > 0, y > 0, x > 0
    mask[:, 4], mask[:, 5], mask[:, 6] = x < n - 1, y < n - 1, z < n - 1
    del x, y, z
    indices = (i[:, None] + offs[None, :])[mask]
    data = np.where(offs == 0, 6.0, -1.0).astype(dtype)[None, :].repeat(N, 0)[mask]
    indptr = np.zeros(N + 1, dtype=np.int32)
    np.cumsum(mask.sum(axis=1, dtype=np.int32), out=indptr[1:])
    return sp.csr_matrix((data, indices, indptr), shape=(N, N))


def timed(f, sync):
    sync()
    t = time.perf_counter()
    r = f()
    sync()
    return time.perf_counter() - t, r


def bench_one(name, A, reps, cp, csp, host_reps=2):
    sync = cp.cuda.Device().synchronize
    pool = cp.get_default_memory_pool()

    def up_cupy():
        return csp.csr_matrix(A)

    def up_seg(reuse):
        return lambda: segsparse.Matrix(A, device="gpu", reuse_buffers=reuse)

    def fresh():
        segsparse.release_upload_buffers()  # not timed: the next upload allocates its staging
        return up_seg(False)

    # Warm-up: compile, first-touch, the staging kept.
    for f in (up_cupy, up_seg(True), up_cupy, up_seg(True)):
        _, r = timed(f, sync)
        del r
        gc.collect()
    rows = {"cupyx": [], "reuse": [], "fresh": []}
    parts = {"reuse": [], "fresh": []}
    # The kept staging must survive between "reuse" rounds: those rounds come first (with
    # CuPy's), the "fresh" ones (each after a release) after them.
    plan = [k for _ in range(reps) for k in ("cupyx", "reuse")] + ["fresh"] * reps
    for key in plan:
        f = {"cupyx": up_cupy, "reuse": up_seg(True)}.get(key) or fresh()
        t, r = timed(f, sync)
        rows[key].append(t)
        if key != "cupyx":
            parts[key].append(r.upload_seconds)
            assert r.nnz == A.nnz
        del r
        gc.collect()
        pool.free_all_blocks()
    # The host-validated path (SEGSPARSE_UPLOAD=host: what Matrix did before), a few rounds.
    rows["host"], parts["host"] = [], []
    os.environ["SEGSPARSE_UPLOAD"] = "host"
    try:
        for _ in range(host_reps):
            t, r = timed(up_seg(False), sync)
            rows["host"].append(t)
            parts["host"].append(r.upload_seconds)
            del r
            gc.collect()
            pool.free_all_blocks()
    finally:
        del os.environ["SEGSPARSE_UPLOAD"]
    # Correctness of the last upload: one SpMV against SciPy.
    m = segsparse.Matrix(A, device="gpu", reuse_buffers=True)
    x = np.random.default_rng(0).standard_normal(A.shape[1]).astype(A.dtype)
    ref = A @ x
    err = float(np.abs(m @ x - ref).max() / max(np.abs(ref).max(), 1e-300))
    del m
    out = []
    med_c = statistics.median(rows["cupyx"])
    for key in ("reuse", "fresh", "host"):
        med = statistics.median(rows[key])
        k = rows[key].index(sorted(rows[key])[len(rows[key]) // 2])
        out.append({
            "bench": "python-upload", "matrix": name, "dtype": str(A.dtype), "rows": A.shape[0],
            "nnz": int(A.nnz), "variant": key, "segsparse_s": med, "cupyx_s": med_c,
            "ratio": med_c / med, "breakdown": parts[key][k], "reps": reps,
            "segsparse_all": rows[key], "cupyx_all": rows["cupyx"], "spmv_rel_err": err,
        })
    return out


def safe(rows, name, *args):
    """One matrix's rows; an error is printed and the others still run."""
    try:
        rows += bench_one(name, *args)
    except Exception as e:  # noqa: BLE001 (a benchmark reports and goes on)
        print(f"{name}: FAILED: {type(e).__name__}: {e}", flush=True)
        globals()["FAILED"] = True


FAILED = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--matrices", default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import cupy as cp
    import cupyx.scipy.sparse as csp

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or os.environ.get("COMMIT", "")
    except OSError:
        commit = os.environ.get("COMMIT", "")
    commit = os.environ.get("COMMIT", commit)
    device = segsparse.device_name()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    rows = []
    t = time.perf_counter()
    A = poisson3d(64 if a.quick else 200)
    print(f"poisson3d built in {time.perf_counter() - t:.1f} s: {A.shape[0]} rows, {A.nnz} nnz",
          flush=True)
    name = "poisson3d-" + ("64" if a.quick else "200")
    safe(rows, name, A, a.reps, cp, csp)
    safe(rows, name, A.astype(np.float32), a.reps, cp, csp)
    del A
    gc.collect()
    if a.matrices:
        files = sorted(glob.glob(os.path.join(a.matrices, "*.mtx.gz")), key=os.path.getsize)
        for f in files[-4:]:
            M = segsparse.load_matrix_market(f)
            safe(rows, os.path.basename(f).split(".")[0], M, a.reps, cp, csp)
    print(f"device: {device}  date: {date}  commit: {commit}")
    print("| matrix | dtype | nnz | variant | segsparse s | cupyx s | ratio | staging | copy | "
          "check | tables | spmv err |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        b = r["breakdown"]
        print(f"| {r['matrix']} | {r['dtype']} | {r['nnz']} | {r['variant']} | "
              f"{r['segsparse_s']:.4f} | {r['cupyx_s']:.4f} | {r['ratio']:.2f} | "
              f"{b.get('staging', 0):.4f} | {b.get('copy', 0):.4f} | {b.get('check', 0):.4f} | "
              f"{b.get('tables', 0):.4f} | {r['spmv_rel_err']:.1e} |")
    if a.json:
        with open(a.json, "w") as fh:
            for r in rows:
                r.update(device=device, date=date, commit=commit, host=platform.node())
                fh.write(json.dumps(r) + "\n")
    if FAILED:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
