"""Complex systems on the GPU from Python: segsparse's solvers and SpMV with CuPy vectors (no
copy) against ``cupyx.scipy.sparse``, on the complex shifted Helmholtz operator
``helmholtz3d:N:K:SHIFT`` (the crate's generator's matrix, built here with SciPy).

    python3 python/bench/complex_gpu.py [--n 100] [--k 50] [--shift 0.5] [--rtol 1e-6]
        [--json out.jsonl]

Prints a Markdown table; each solve's time is the median of ``--reps`` calls (after one warm-up
call), from the call to the solution on the device (the stream synchronised)."""

import argparse
import json
import statistics
import time

import numpy as np
import scipy.sparse as sp

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cspla

import segsparse


def helmholtz3d(n, k, shift):
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    i = sp.eye(n, format="csr")
    lap = sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)
    kh2 = (k / (n + 1.0)) ** 2
    return (lap + (-kh2 + 1j * shift * kh2) * sp.eye(n ** 3)).tocsr().astype(np.complex128)


def timed(f, reps):
    f()
    cp.cuda.Device().synchronize()
    ts = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--k", type=float, default=50.0)
    ap.add_argument("--shift", type=float, default=0.5)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    name = f"helmholtz3d:{a.n}:{a.k:g}:{a.shift:g}"
    A = helmholtz3d(a.n, a.k, a.shift)
    n = A.shape[0]
    M = segsparse.Matrix(A, device="gpu")
    Ac = csp.csr_matrix(A)
    b = cp.ones(n, dtype=cp.complex128)
    bn = float(cp.linalg.norm(b))
    dev = segsparse.device_name()
    rows = []

    def res(x):
        return float(cp.linalg.norm(b - Ac @ x)) / bn

    solves = {
        "segsparse COCG": lambda: segsparse.solve(M, b, method="cocg", M=None, rtol=a.rtol),
        "segsparse COCG + Jacobi": lambda: segsparse.solve(M, b, method="cocg", M="jacobi",
                                                           rtol=a.rtol),
        "segsparse BiCGSTAB": lambda: segsparse.bicgstab(M, b, rtol=a.rtol),
        "segsparse GMRES(30)": lambda: segsparse.gmres(M, b, rtol=a.rtol, restart=30),
    }
    for label, f in solves.items():
        t, (x, info) = timed(f, a.reps)
        rows.append(dict(what=label, seconds=t, iterations=int(info.iterations),
                         status=int(info), device=info.device, residual=res(x)))

    def cupy_gmres():
        try:
            return cspla.gmres(Ac, b, rtol=a.rtol, restart=30)
        except TypeError:
            return cspla.gmres(Ac, b, tol=a.rtol, restart=30)

    t, (x, info) = timed(cupy_gmres, a.reps)
    rows.append(dict(what="cupyx gmres(30)", seconds=t, iterations=None, status=int(info),
                     device="gpu", residual=res(x)))

    # SpMV: A @ x (a new CuPy result each call, as cupyx's), and in place into a given y.
    x = cp.asarray(np.random.default_rng(1).standard_normal(n)
                   + 1j * np.random.default_rng(2).standard_normal(n))
    y = cp.empty(n, dtype=cp.complex128)
    ref = Ac @ x
    err = float(cp.linalg.norm(M @ x - ref) / cp.linalg.norm(ref))
    reps = 200
    for label, f in (("segsparse A @ x", lambda: M @ x),
                     ("segsparse A.spmv(x, y=y)", lambda: M.spmv(x, y=y)),
                     ("cupyx A @ x", lambda: Ac @ x),
                     ("segsparse A.H @ x", lambda: M.H @ x)):
        for _ in range(10):
            f()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        cp.cuda.Device().synchronize()
        rows.append(dict(what=label, seconds=(time.perf_counter() - t0) / reps,
                         iterations=None, status=0, device="gpu",
                         residual=err if "A @ x" in label and "segsparse" in label else None))
    cg = next(r["seconds"] for r in rows if r["what"] == "cupyx gmres(30)")
    cs = next(r["seconds"] for r in rows if r["what"] == "cupyx A @ x")
    print(f"device: {dev}; matrix {name}, {n} rows, {A.nnz} entries, complex128, "
          f"rtol {a.rtol:g}, b = 1; SpMV algorithm {M.gpu_algorithm}; cupy {cp.__version__}")
    print("| what | time | iterations | status | true rel. residual | vs cupyx |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        base = cs if "@" in r["what"] or "spmv" in r["what"] else cg
        rr = "" if r["residual"] is None else f"{r['residual']:.2e}"
        its = "" if r["iterations"] is None else str(r["iterations"])
        ms = r["seconds"] * 1e3
        t = f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"
        print(f"| {r['what']} | {t} | {its} | {r['status']} | {rr} | "
              f"{base / r['seconds']:.2f}x |")
    if a.json:
        with open(a.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps(dict(r, matrix=name, device_name=dev, rtol=a.rtol)) + "\n")


if __name__ == "__main__":
    main()
