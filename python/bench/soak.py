"""Soak test of the Python package (issue 23): many uploads and solves of random sizes in one
process on the GPU, with device memory and host RSS sampled; growth after the warm-up is a leak.

    python python/bench/soak.py [--rounds 100000] [--seconds 170] [--every 1000] [--seed 1]

Each round takes one of 64 SciPy matrices of random sizes (Poisson 2-D of side 4-24, or a
random diagonally dominant unsymmetric matrix of 16-600 rows; float64, a quarter float32),
builds a ``segsparse.Matrix`` from it (a fresh copy and GPU upload), and solves with CG,
Jacobi-PCG, BiCGSTAB or GMRES(20) from NumPy vectors (copied to the device and back). Every
``--every`` rounds it samples the device's free memory (``cudaMemGetInfo`` through CuPy when
present, else ``nvidia-smi``-free reading is skipped) and the process's resident set
(``VmRSS``), printed as JSON lines. ``--seconds`` stops early (the rounds done are reported).
The verdict compares the last sample with the first after the warm-up (10 % of the rounds
done): more than 1 % less device memory free or 1 % more RSS fails (exit 1). The last line is
``SOAK ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import scipy.sparse as sp

import segsparse


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def device_free() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:  # no CuPy: device memory is not sampled
        return -1


def matrices(rng: np.random.Generator, count: int):
    out = []
    for i in range(count):
        dtype = np.float32 if i % 4 == 3 else np.float64
        if i % 2 == 0:
            k = int(rng.integers(4, 25))
            t = sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
            A = (sp.kron(sp.eye(k), t) + sp.kron(t, sp.eye(k))).tocsr()
            out.append((A.astype(dtype), True))
        else:
            n = int(rng.integers(16, 601))
            A = sp.random(n, n, density=min(1.0, 6 / n), random_state=rng, format="csr")
            A = (A - 0.5 * (A != 0) + 10 * sp.eye(n)).tocsr()
            out.append((A.astype(dtype), False))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=float("inf"))
    p.add_argument("--every", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    info = segsparse.gpu_info()
    print(f"soak: {info}", file=sys.stderr)
    if not info["available"]:
        print("soak: no GPU", file=sys.stderr)
        return 1
    rng = np.random.default_rng(a.seed)
    pool = matrices(rng, 64)
    solvers = {
        True: [lambda M, b: segsparse.cg(M, b, rtol=1e-6, maxiter=400),
               lambda M, b: segsparse.pcg(M, b, rtol=1e-6, maxiter=400)],
        False: [lambda M, b: segsparse.bicgstab(M, b, rtol=1e-6, maxiter=400),
                lambda M, b: segsparse.gmres(M, b, rtol=1e-6, maxiter=400, restart=20)],
    }
    samples = []
    failed = 0
    t0 = time.perf_counter()
    k = 0
    for k in range(1, a.rounds + 1):
        A, spd = pool[int(rng.integers(len(pool)))]
        M = segsparse.Matrix(A, device="gpu")
        b = np.ones(A.shape[0], dtype=A.dtype)
        x, inf = solvers[spd][k % 2](M, b)
        failed += 0 if inf.converged else 1
        del M, x
        last = k == a.rounds or time.perf_counter() - t0 > a.seconds
        if k % a.every == 0 or last:
            s = {"round": k, "seconds": round(time.perf_counter() - t0, 2),
                 "device_free": device_free(), "rss": rss_bytes()}
            print(json.dumps(s), flush=True)
            samples.append(s)
        if last:
            break
    secs = time.perf_counter() - t0
    warm = max(k // 10, a.every)
    base = next((s for s in samples if s["round"] >= warm), samples[0])
    end = samples[-1]

    def pct(x, y):
        return (y - x) / max(x, 1) * 100

    free_drop = -pct(base["device_free"], end["device_free"]) if base["device_free"] >= 0 else 0.0
    rss_growth = pct(base["rss"], end["rss"])
    ok = free_drop <= 1.0 and rss_growth <= 1.0 and failed == 0
    print(
        f"SOAK python: {k} rounds (Matrix upload + solve) in {secs:.1f} s "
        f"({secs / k * 1e6:.0f} µs/round), {failed} not converged; after the warm-up (round "
        f"{base['round']}): device free {base['device_free']} -> {end['device_free']} bytes "
        f"({free_drop:+.3f} % drop), host RSS {base['rss']} -> {end['rss']} bytes "
        f"({rss_growth:+.3f} %): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
