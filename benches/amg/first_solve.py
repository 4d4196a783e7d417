"""Where the first solve of a Python process goes: cProfile of its first and second call.

    python3 benches/amg/first_solve.py amg|cg|solve

poisson3d:96 from SciPy on the GPU, `segsparse.amg(M)` built first, a CuPy right-hand side; the
first and second call of `AMG.solve`, `segsparse.cg` or `segsparse.solve` (one per process),
each with its wall time, the library's solve seconds and the top of its profile."""
import cProfile, pstats, sys, time, io
import numpy as np, scipy.sparse as sp
import segsparse
from segsparse import _core
import cupy as cp
first = sys.argv[1]  # "amg", "cg" or "solve"
indptr, indices, data, shape = _core.generate_matrix("poisson3d:96")
a = sp.csr_matrix((data, indices, indptr), shape=shape)
M = segsparse.Matrix(a, device="gpu")
ml = segsparse.amg(M)
b = cp.asarray(a @ np.ones(a.shape[0]))
cp.cuda.Device().synchronize()
def call():
    if first == "amg":
        x, info = ml.solve(b, rtol=1e-8, maxiter=2000)
    elif first == "solve":
        x, info = segsparse.solve(M, b, rtol=1e-8)
    else:
        x, info = segsparse.cg(M, b, rtol=1e-8, maxiter=20000)
    cp.cuda.Device().synchronize()
    return info
for k in range(2):
    pr = cProfile.Profile(); t0 = time.perf_counter(); pr.enable(); info = call(); pr.disable()
    w = time.perf_counter() - t0
    print(f"{first} call {k}: wall {w*1e3:.1f} ms, lib solve {info.solve_seconds*1e3:.1f} ms, it {info.iterations}")
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(22); print(s.getvalue()[-3500:])
