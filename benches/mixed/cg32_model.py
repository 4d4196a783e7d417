#!/usr/bin/env python3
"""Which CG vectors can be f32 without costing iterations: a NumPy model of CG on Poisson 3D
(m³ rows, b = 1, rtol 1e-8) with each vector of the recurrence stored in f32 or f64.

    python3 benches/mixed/cg32_model.py M [M...]

Variants (iterations to the tolerance; `recursive`: the recurrence's own residual, the others
the f64 true residual through reliable updates every 16 iterations once the residual fell
tenfold and 32 iterations passed, the direction kept and corrected as `solvers::narrow` does):

  f64                 every vector f64 (the reference)
  r32 p32 q32 (rec)   every vector f32, f32 arithmetic, recursive residual (no updates)
  r64 p32 q32 (rec)   r in f64, p and A·p rounded to f32 (A·p summed in f64), no updates
  f32 + reliable      the scheme of solvers::narrow::pcg_f32 (all f32, reliable updates)
  r64 p32 q32 + rel.  r in f64, p, A·p and the increment in f32 (A·p summed in f64), reliable
"""
import sys

import numpy as np
import scipy.sparse as sp

F, D = np.float32, np.float64


def poisson3d(m):
    e = np.ones(m)
    t = sp.diags([-e[:-1], 2 * e, -e[:-1]], [-1, 0, 1])
    i = sp.identity(m)
    return (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()


def plain(a, b, tol, tr, tp, tq, acc64):
    a32 = a.astype(F)
    r = b.astype(tr)
    p = r.astype(tp)
    rho = D(r.astype(D) @ r.astype(D))
    for it in range(1, 20000):
        q = (a @ p.astype(D)).astype(tq) if acc64 else (a32 @ p).astype(tq)
        al = rho / D(p.astype(D) @ q.astype(D))
        r = (r - al * q.astype(D)).astype(tr)
        rn = D(r.astype(D) @ r.astype(D))
        p = (r.astype(D) + (rn / rho) * p.astype(D)).astype(tp)
        rho = rn
        if np.sqrt(rn) < tol:
            return it
    return None


def reliable(a, b, tol, tr, acc64, drop=0.1, every=16):
    a32 = a.astype(F)
    x = np.zeros_like(b)
    dx = np.zeros(len(b), F)
    r = b.astype(tr)
    p = r.astype(F)
    rho = D(r.astype(D) @ r.astype(D))
    at, since = 1.0, 0
    for it in range(1, 20000):
        q = (a @ p.astype(D)).astype(F) if acc64 else a32 @ p
        al = rho / D(p.astype(D) @ q.astype(D))
        dx += F(al) * p
        r = (r - al * q.astype(D)).astype(tr)
        rn = D(r.astype(D) @ r.astype(D))
        conv = np.sqrt(rn) <= tol
        p = (r.astype(D) + (rn / rho) * p.astype(D)).astype(F)
        rho = rn
        if conv or it % every == 0:
            if conv or (np.sqrt(rn) <= drop * at and it >= since + 32):
                x += dx.astype(D)
                dx[:] = 0
                t = b - a @ x
                tn = np.sqrt(t @ t)
                if conv and tn <= tol:
                    return it
                p = (p.astype(D) + (t - r.astype(D))).astype(F)
                r = t.astype(tr)
                rho = D(r.astype(D) @ r.astype(D))
                at, since = tn, it
    return None


for m in map(int, sys.argv[1:] or ["40"]):
    a = poisson3d(m)
    b = np.ones(a.shape[0]) / np.sqrt(a.shape[0])
    tol = 1e-8
    print(
        f"poisson3d:{m}: f64 {plain(a, b, tol, D, D, D, True)}, "
        f"r32 p32 q32 (rec) {plain(a, b, tol, F, F, F, False)}, "
        f"r64 p32 q32 (rec) {plain(a, b, tol, D, F, F, True)}, "
        f"f32 + reliable {reliable(a, b, tol, F, False)}, "
        f"r64 p32 q32 + rel. {reliable(a, b, tol, D, True)}",
        flush=True,
    )
