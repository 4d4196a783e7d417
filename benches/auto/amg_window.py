"""How AMG-CG's residual falls from a zero guess and from the CG probe's iterate (what the
automatic solve's AMG window measures), beside CG's own: on the GPU, from the generator's
matrix, random right-hand side (seed 1), rtol 1e-8. One line per system and run: the relative
residual after 0, 2, 4, 6, 10, 20, 30, 60, 100 iterations and the iterations to converge.

    python3 amg_window.py SPEC[:PRE] ...    (PRE: the probe's preconditioner, none or jacobi)
"""
import sys

import cupy as cp
import numpy as np
import scipy.sparse as sp

import segsparse

MARKS = (0, 2, 4, 6, 10, 20, 30, 60, 100)


def line(what, info):
    h = np.asarray(info.history)
    pts = " ".join(f"{k}:{h[k]:.2e}" for k in MARKS if k < len(h))
    print(f"  {what}: {info.iterations} it conv={bool(info.converged)} | {pts}", flush=True)


def main():
    for arg in sys.argv[1:]:
        spec, _, pre = arg.partition("@")
        pre = None if pre in ("", "none") else pre
        ip, ix, v, shape = segsparse._core.generate_matrix(spec)
        a = sp.csr_matrix((v, ix, ip), shape=shape)
        m = segsparse.Matrix(a, device="gpu")
        b = cp.asarray(np.random.default_rng(1).standard_normal(shape[0]))
        print(spec, shape[0], flush=True)
        x0, i0 = segsparse.cg(m, b, rtol=1e-8, maxiter=40, M=pre)
        line(f"cg+{pre or 'none'} probe", i0)
        _, i1 = segsparse.cg(m, b, x0=x0, rtol=1e-8, maxiter=300, M=pre)
        line(f"cg+{pre or 'none'} from the probe's iterate", i1)
        _, i2 = segsparse.cg(m, b, rtol=1e-8, maxiter=400, M="amg")
        line("cg+amg from zero", i2)
        _, i3 = segsparse.cg(m, b, x0=x0, rtol=1e-8, maxiter=400, M="amg")
        line("cg+amg from the probe's iterate", i3)


if __name__ == "__main__":
    main()
