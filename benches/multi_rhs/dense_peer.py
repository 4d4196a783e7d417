#!/usr/bin/env python3
"""The dense batched peer of the batched sparse solves: the same systems (written by
`batched_bench --dump DIR`), densified to an (S, n, n) stack (smaller systems padded with the
identity), solved by

- `cupy.linalg.solve` on the stack: cuBLAS `<t>getrfBatched` + `<t>getrsBatched` (LU with
  partial pivoting; CuPy takes this path for stacks of matrices up to 256 rows);
- for SPD batches (`--spd`), cuSOLVER `<t>potrfBatched` + `<t>potrsBatched` (Cholesky).

Times the factor and solve on the device (CUDA events, the stack already resident; the
densification is excluded), the median of `--reps` after one warm-up, and checks each solution
against the right-hand side (max relative residual) and against the sparse batch's own
solution `x` when the dump has it.

    python3 benches/multi_rhs/dense_peer.py DIR [--spd] [--reps 5]

Prints one JSON object.
"""
import argparse
import json
import os
import sys

import numpy as np


def load(d):
    names = os.listdir(d)
    prec = "f64" if "val.f64" in names else "f32"
    dt = np.float64 if prec == "f64" else np.float32
    sp = np.fromfile(os.path.join(d, "sys_ptr.u32"), dtype="<u4").astype(np.int64)
    rp = np.fromfile(os.path.join(d, "row_ptr.u32"), dtype="<u4").astype(np.int64)
    col = np.fromfile(os.path.join(d, "col.u32"), dtype="<u4").astype(np.int64)
    val = np.fromfile(os.path.join(d, f"val.{prec}"), dtype=dt)
    b = np.fromfile(os.path.join(d, f"b.{prec}"), dtype=dt)
    xp = os.path.join(d, f"x.{prec}")
    x = np.fromfile(xp, dtype=dt) if os.path.exists(xp) else None
    return prec, dt, sp, rp, col, val[: len(col)], b, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--spd", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import cupy as cp

    prec, dt, sp, rp, col, val, b, x = load(a.dir)
    nsys = len(sp) - 1
    sizes = np.diff(sp)
    n = int(sizes.max())
    out = {"bench": "batched-dense-peer", "systems": nsys, "rows_max": n,
           "rows_min": int(sizes.min()), "precision": prec, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    if n > 256:
        out["skipped"] = "systems above 256 rows are not dense-sized"
        print(json.dumps(out))
        return
    # Densify: entry e of global row r (system s, local row r - sp[s]).
    row_of = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
    sys_of_row = np.repeat(np.arange(nsys), sizes)
    s_e = sys_of_row[row_of]
    lr = row_of - sp[s_e]
    A = np.zeros((nsys, n, n), dtype=dt)
    np.add.at(A, (s_e, lr, col), val)
    B = np.zeros((nsys, n), dtype=dt)
    for s in range(nsys):  # padding: identity rows, zero right-hand side
        k = sizes[s]
        B[s, :k] = b[sp[s]:sp[s + 1]]
        if k < n:
            A[s, np.arange(k, n), np.arange(k, n)] = 1
    dA, dB = cp.asarray(A), cp.asarray(B)

    def timed(f):
        f()  # warm-up (handles, workspaces, kernels)
        ts = []
        for _ in range(a.reps):
            s0, s1 = cp.cuda.Event(), cp.cuda.Event()
            s0.record()
            X = f()
            s1.record()
            s1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s0, s1) / 1e3)
        return float(np.median(ts)), X

    def check(tag, X, t):
        Xh = cp.asnumpy(X).astype(np.float64)
        R = np.einsum("sij,sj->si", A.astype(np.float64), Xh) - B
        rel = np.linalg.norm(R, axis=1) / np.maximum(np.linalg.norm(B, axis=1), 1e-300)
        out[f"{tag}_s"] = t
        out[f"{tag}_systems_per_s"] = nsys / t
        out[f"{tag}_max_rel_residual"] = float(rel.max())
        if x is not None:
            xs = np.zeros((nsys, n))
            for s in range(nsys):
                xs[s, :sizes[s]] = x[sp[s]:sp[s + 1]]
            d = np.linalg.norm(Xh - xs, axis=1) / np.maximum(np.linalg.norm(xs, axis=1), 1e-300)
            out[f"{tag}_max_rel_diff_to_sparse_batch"] = float(d.max())

    t, X = timed(lambda: cp.linalg.solve(dA, dB[..., None])[..., 0])
    check("getrf_getrs_batched", X, t)
    if a.spd:
        try:
            from cupy_backends.cuda.libs import cusolver
            from cupy.cuda import device

            handle = device.get_cusolver_handle()
            potrf = cusolver.dpotrfBatched if dt == np.float64 else cusolver.spotrfBatched
            potrs = cusolver.dpotrsBatched if dt == np.float64 else cusolver.spotrsBatched
            lower = cusolver.CUBLAS_FILL_MODE_LOWER if hasattr(cusolver, "CUBLAS_FILL_MODE_LOWER") else 0

            def chol():
                L = dA.copy()  # symmetric: row-major = column-major
                Xc = dB.copy()
                la = L.data.ptr + np.arange(nsys, dtype=np.uint64) * np.uint64(n * n * L.itemsize)
                lb = Xc.data.ptr + np.arange(nsys, dtype=np.uint64) * np.uint64(n * Xc.itemsize)
                pa, pb = cp.asarray(la), cp.asarray(lb)
                info = cp.zeros(nsys, dtype=np.int32)
                potrf(handle, lower, n, pa.data.ptr, n, info.data.ptr, nsys)
                info1 = cp.zeros(1, dtype=np.int32)
                potrs(handle, lower, n, 1, pa.data.ptr, n, pb.data.ptr, n, info1.data.ptr, nsys)
                chol.info = int(info.max())
                return Xc

            t, X = timed(chol)
            check("potrf_potrs_batched", X, t)
            out["potrf_max_info"] = chol.info
        except Exception as e:  # the peer is optional; say why it is missing
            out["potrf_potrs_batched_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
