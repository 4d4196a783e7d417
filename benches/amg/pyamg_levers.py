#!/usr/bin/env python3
"""Iterations of PyAMG's smoothed aggregation, and of segsparse's cycle on PyAMG hierarchies.

The CPU study behind benches/results/amg.md §7 (iteration counts do not depend on the device).
Problems are built as segsparse's generators build them (poisson3d, poisson3d27, aniso2d,
aniso3d, jumps3d, elasticity2d), f64, b = A·1, x0 = 0, PCG to ||b - A x|| < 1e-8 ||b||.

  pyamg_levers.py peer SPEC...
      PyAMG 5.4 defaults: smoothed_aggregation_solver(A, B) (symmetric strength, theta 0;
      standard aggregation; Jacobi prolongator smoothing, omega 4/3; symmetric Gauss-Seidel pre-
      and post-smoother; candidates improved by 4 symmetric Gauss-Seidel sweeps; max_coarse 10),
      solve(accel="cg").
  pyamg_levers.py cycle [--perm] [--rel-theta T] [--kind 1|4] [--degree D] SPEC...
      PyAMG's hierarchy (max_coarse 300, no candidate improvement, as segsparse's defaults)
      with segsparse's smoother on every level: a Chebyshev polynomial in D^-1 A of degree D
      (default 3) on [0.11, 1.1]·rho (first kind) or the fourth-kind polynomial on 1.1·rho
      (Lottes 2023, --kind 4). --perm applies a random symmetric permutation first, so that the
      greedy standard aggregation imitates random-priority MIS-2 aggregates (level-1 sizes
      within 3 % of segsparse's). --rel-theta T replaces the strength of connection with a
      row-relative symmetric one: s_ij = |a_ij|/sqrt(a_ii a_jj) is strong when
      s_ij >= T·sqrt(m_i m_j), m_i = max_k s_ik.
One JSON line per problem on stdout.
"""

import argparse
import json
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp

import pyamg
import pyamg.aggregation.aggregation as agm
from pyamg.gallery import linear_elasticity, poisson, stencil_grid
from pyamg.gallery.diffusion import diffusion_stencil_2d
from pyamg.util.linalg import approximate_spectral_radius

SYMMETRIC = agm.symmetric_strength_of_connection


def splitmix64(z):
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def jumps3d(n):
    """segsparse's jumps3d: 7-point diffusion, k = 1 or 1e4 on 8^3 boxes by a hash of the box."""
    r = np.arange(n**3)
    x, y, z = r % n, (r // n) % n, r // (n * n)

    def coef(x, y, z):
        cell = ((z // 8) * 1000003 + (y // 8)) * 1000033 + x // 8
        return np.where((splitmix64(cell.astype(np.uint64)) & np.uint64(1)) == 1, 1e4, 1.0)

    k = coef(x, y, z)
    rows, cols, vals, diag = [], [], [], np.zeros(n**3)
    for dx, dy, dz, st in [(0, 0, -1, -n * n), (0, -1, 0, -n), (-1, 0, 0, -1),
                           (1, 0, 0, 1), (0, 1, 0, n), (0, 0, 1, n * n)]:
        xx, yy, zz = x + dx, y + dy, z + dz
        inside = (xx >= 0) & (xx < n) & (yy >= 0) & (yy < n) & (zz >= 0) & (zz < n)
        kn = np.where(inside, coef(np.clip(xx, 0, n - 1), np.clip(yy, 0, n - 1),
                                   np.clip(zz, 0, n - 1)), k)
        f = 2 * k * kn / (k + kn)
        diag += np.where(inside, f, k)
        rows.append(r[inside]); cols.append(r[inside] + st); vals.append(-f[inside])
    rows.append(r); cols.append(r); vals.append(diag)
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n**3, n**3))


def build(spec):
    """(A, B) for a spec; B is None for the constant."""
    p = spec.split(":")
    kind = p[0]
    if kind == "poisson3d":
        n = int(p[1]); return poisson((n, n, n), format="csr"), None
    if kind == "poisson3d27":
        n = int(p[1]); st = -np.ones((3, 3, 3)); st[1, 1, 1] = 26.0
        return stencil_grid(st, (n, n, n), format="csr"), None
    if kind == "aniso2d":
        n, eps = int(p[1]), float(p[2])
        return stencil_grid(diffusion_stencil_2d(epsilon=eps, theta=0.0), (n, n), format="csr"), None
    if kind == "aniso3d":
        n, ey = int(p[1]), float(p[2]); ez = float(p[3]) if len(p) > 3 else ey
        t = lambda c: sp.diags([-c * np.ones(n - 1), 2 * c * np.ones(n), -c * np.ones(n - 1)], [-1, 0, 1])
        i = sp.identity(n)
        a = sp.kron(sp.kron(t(ez), i), i) + sp.kron(sp.kron(i, t(ey)), i) + sp.kron(sp.kron(i, i), t(1.0))
        return a.tocsr(), None
    if kind == "jumps3d":
        return jumps3d(int(p[1])), None
    if kind == "elasticity2d":
        a, b = linear_elasticity((int(p[1]), int(p[1])))
        return a.tocsr(), b
    return sp.csr_matrix(scipy.io.mmread(spec)), None


def chebyshev_steps(kind, rho, degree):
    """(c1, c2) per step of z = p(D^-1 A) D^-1 r, segsparse's ChebyshevPoly::steps layout."""
    hi = 1.1 * rho
    if kind == 4:
        return [(0.0, 4 / (3 * hi))] + [((2 * k - 1) / (2 * k + 3), (8 * k + 4) / ((2 * k + 3) * hi))
                                        for k in range(1, degree)]
    lo = 0.1 * hi
    theta, delta = 0.5 * (hi + lo), 0.5 * (hi - lo)
    sigma = theta / delta; r = 1 / sigma; out = [(0.0, 1 / theta)]
    for _ in range(1, degree):
        rn = 1 / (2 * sigma - r); out.append((rn * r, 2 * rn / delta)); r = rn
    return out


def smoother(a, kind, degree):
    dinv = 1 / a.diagonal()
    rho = approximate_spectral_radius(sp.diags(dinv) @ a, maxiter=15)
    steps = chebyshev_steps(kind, rho, degree)

    def apply(_a, x, b):
        res = dinv * (b - a @ x); d = None; z = np.zeros_like(x)
        for i, (c1, c2) in enumerate(steps):
            if i == 0:
                d = c2 * res
            else:
                res = res - dinv * (a @ d); d = c1 * d + c2 * res
            z += d
        x += z
    return apply


def relative_strength(a, t):
    a = a.tocsr(); d = np.abs(a.diagonal()); c = a.tocoo()
    off = c.row != c.col
    r, col = c.row[off], c.col[off]
    s = np.abs(c.data[off]) / np.sqrt(d[r] * d[col])
    m = np.zeros(a.shape[0]); np.maximum.at(m, r, s)
    keep = s >= t * np.sqrt(m[r] * m[col])
    return sp.csr_matrix((s[keep], (r[keep], col[keep])), shape=a.shape) + sp.identity(a.shape[0], format="csr")


def solve(ml, a):
    b = a @ np.ones(a.shape[0]); res = []
    ml.solve(b, tol=1e-8, maxiter=1000, accel="cg", residuals=res)
    return len(res) - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["peer", "cycle"])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--perm", action="store_true")
    ap.add_argument("--rel-theta", type=float, default=0.0)
    ap.add_argument("--kind", type=int, default=1, choices=[1, 4])
    ap.add_argument("--degree", type=int, default=3)
    args = ap.parse_args()
    for spec in args.specs:
        a, b = build(spec)
        if args.mode == "peer":
            ml = pyamg.smoothed_aggregation_solver(a, B=b)
        else:
            if args.perm:
                p = np.random.default_rng(0).permutation(a.shape[0]); a = a[p][:, p].tocsr()
                b = None if b is None else b[p]
            t = args.rel_theta
            agm.symmetric_strength_of_connection = (lambda m, **_: relative_strength(m, t)) if t > 0 else SYMMETRIC
            ml = pyamg.smoothed_aggregation_solver(a, B=b, max_coarse=300, improve_candidates=None)
            for lv in ml.levels[:-1]:
                s = smoother(lv.A, args.kind, args.degree); lv.presmoother = s; lv.postsmoother = s
        print(json.dumps({"mode": args.mode, "problem": spec, "rows": a.shape[0], "nnz": int(a.nnz),
                          "perm": args.perm, "rel_theta": args.rel_theta, "kind": args.kind,
                          "degree": args.degree, "pyamg_version": pyamg.__version__,
                          "iterations": solve(ml, a), "level_rows": [lv.A.shape[0] for lv in ml.levels],
                          "operator_complexity": round(float(ml.operator_complexity()), 3)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
