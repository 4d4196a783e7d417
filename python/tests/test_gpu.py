"""GPU tests: CuPy in -> CuPy out without host copies, checked against SciPy/NumPy.

Marked ``gpu``: skipped without a working GPU, failed under SEGSPARSE_REQUIRE_GPU=1 (see
conftest.py). Run on the GPU machine by python/device.sh.
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse
from conftest import matrices_dir

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(11)


def spd(n, seed=0):
    r = sp.random(n, n, density=min(1.0, 8 / n), random_state=np.random.default_rng(seed), format="csr")
    a = r + r.T
    return (a + sp.diags(np.asarray(abs(a).sum(axis=1)).ravel() + 1.0)).tocsr()


def test_device_reported(gpu):
    assert segsparse.gpu_available() and segsparse.device_name()
    assert segsparse.Matrix(sp.eye(3)).device == "gpu"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 31, 1000, 70_001])
def test_spmv_cupy_in_cupy_out(gpu, dtype, n):
    cp = gpu
    a = sp.random(n, n, density=min(1.0, 6 / n), random_state=np.random.default_rng(n), format="csr", dtype=dtype)
    m = segsparse.Matrix(a, device="gpu")
    x = RNG.standard_normal(n).astype(dtype)
    xd = cp.asarray(x)
    yd = m @ xd
    assert isinstance(yd, cp.ndarray) and yd.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cp.asnumpy(yd), a @ x, rtol=tol, atol=tol)
    # alpha/beta in place, on a non-default stream: ordered with the caller's stream.
    y0 = RNG.standard_normal(n).astype(dtype)
    with cp.cuda.Stream(non_blocking=True):
        yd2 = cp.asarray(y0)
        out = m.spmv(xd, alpha=3.0, beta=0.5, y=yd2)
        assert out is yd2
        got = cp.asnumpy(yd2)
    np.testing.assert_allclose(got, 3.0 * (a @ x) + 0.5 * y0, rtol=tol, atol=tol)
    # NumPy vectors against the GPU matrix: copied over and back.
    np.testing.assert_allclose(m @ x, a @ x, rtol=tol, atol=tol)


def test_spmv_chain_stays_on_device(gpu):
    """A chain of CuPy products, each queued after the previous on CuPy's stream with no host
    synchronisation in between, gives SciPy's result."""
    cp = gpu
    n = 5000
    a = spd(n, seed=2) * (1.0 / 40)
    m = segsparse.Matrix(a)
    x = cp.ones(n)
    for _ in range(20):
        x = m @ x
    ref = np.ones(n)
    for _ in range(20):
        ref = a @ ref
    np.testing.assert_allclose(cp.asnumpy(x), ref, rtol=1e-10)


def test_cupyx_matrix_input(gpu):
    cp = gpu
    import cupyx.scipy.sparse as csp

    a = sp.random(500, 400, density=0.02, random_state=np.random.default_rng(9), format="csr")
    m = segsparse.Matrix(csp.csr_matrix(a))
    x = RNG.standard_normal(400)
    np.testing.assert_allclose(cp.asnumpy(m @ cp.asarray(x)), a @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["cg", "pcg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cg_cupy(gpu, solver, dtype):
    cp = gpu
    a = spd(3000, seed=5).astype(dtype)
    b = RNG.standard_normal(3000).astype(dtype)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    x, info = getattr(segsparse, solver)(a, cp.asarray(b), rtol=rtol)
    assert isinstance(x, cp.ndarray) and info.converged and info.device == "gpu", info
    r = np.linalg.norm(b - a.astype(np.float64) @ cp.asnumpy(x).astype(np.float64))
    assert r <= 1.05 * rtol * np.linalg.norm(b)
    # The same with NumPy vectors on the GPU matrix.
    xh, info2 = getattr(segsparse, solver)(segsparse.Matrix(a), b, rtol=rtol)
    assert isinstance(xh, np.ndarray) and info2.converged and info2.device == "gpu"


def test_minres_cupy_saddle_point(gpu):
    from test_cpu import saddle_point

    cp = gpu
    a = saddle_point(40)
    b = RNG.standard_normal(a.shape[0])
    x, info = segsparse.minres(a, cp.asarray(b), rtol=1e-9)
    assert isinstance(x, cp.ndarray) and info.converged and info.device == "gpu", info
    assert np.linalg.norm(b - a @ cp.asnumpy(x)) <= 1.01e-9 * np.linalg.norm(b)
    xc, ic = segsparse.minres(a, b, rtol=1e-9, device="cpu")
    assert abs(ic.iterations - info.iterations) <= 3 + ic.iterations // 10


def test_bicgstab_raefsky2_cupy(gpu):
    cp = gpu
    d = matrices_dir()
    path = os.path.join(d or "", "raefsky2.mtx.gz")
    if d is None or not os.path.exists(path):
        pytest.fail("matrices/raefsky2.mtx.gz not found")
    a = segsparse.load_matrix_market(path)
    m = segsparse.Matrix(a, device="gpu")
    b = a @ np.ones(a.shape[1])
    x, info = segsparse.bicgstab(m, cp.asarray(b), rtol=1e-8, M="jacobi", maxiter=20000)
    assert info.converged, info
    assert np.linalg.norm(b - a @ cp.asnumpy(x)) <= 1.01e-8 * np.linalg.norm(b)


def test_not_converged_and_errors_gpu(gpu):
    cp = gpu
    a = spd(500, seed=1)
    x, info = segsparse.cg(a, cp.ones(500), rtol=1e-14, maxiter=3)
    assert not info.converged and info.status > 0 and info.iterations >= 3
    cpu_m = segsparse.Matrix(a, device="cpu")
    with pytest.raises(ValueError, match="lives on the CPU"):
        cpu_m @ cp.ones(500)
    with pytest.raises(ValueError, match="500"):
        segsparse.Matrix(a) @ cp.ones(499)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint32])
def test_scan_cupy(gpu, dtype):
    cp = gpu
    x = RNG.integers(0, 100, 100_003).astype(dtype)
    got = segsparse.scan(cp.asarray(x))
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(got), np.cumsum(x, dtype=np.float64), rtol=1e-6)
    got = segsparse.scan(cp.asarray(x), "max", inclusive=False, reverse=True)
    np.testing.assert_array_equal(cp.asnumpy(got), segsparse.scan(x, "max", inclusive=False, reverse=True))


def test_segmented_scan_cupy(gpu):
    cp = gpu
    x = RNG.standard_normal(50_000)
    offsets = np.unique(np.concatenate([[0, 0, 50_000], RNG.integers(0, 50_000, 300)]))
    offsets = np.concatenate([[0], offsets])
    got = segsparse.segmented_scan(cp.asarray(x), cp.asarray(offsets))
    np.testing.assert_allclose(cp.asnumpy(got), segsparse.segmented_scan(x, offsets), atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.uint64])
def test_sort_cupy(gpu, dtype):
    cp = gpu
    keys = RNG.integers(0, 1000, 200_000).astype(dtype)
    vals = np.arange(200_000, dtype=np.float64)
    kd = cp.asarray(keys)
    sk, sv = segsparse.sort(kd, cp.asarray(vals))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(cp.asnumpy(sk), keys[order])
    np.testing.assert_array_equal(cp.asnumpy(sv), vals[order])
    np.testing.assert_array_equal(cp.asnumpy(kd), keys)  # input untouched


@pytest.mark.parametrize("batch,n", [(1, 100_000), (512, 64), (64, 3000)])
def test_tridiagonal_cupy_and_numpy_gpu(gpu, batch, n):
    cp = gpu
    lo, up = RNG.standard_normal((batch, n)), RNG.standard_normal((batch, n))
    di = 3.0 + np.abs(lo) + np.abs(up)
    rhs = RNG.standard_normal((batch, n))
    ref = segsparse.tridiagonal_solve(lo, di, up, rhs, device="cpu")
    got = segsparse.tridiagonal_solve(*(cp.asarray(v) for v in (lo, di, up, rhs)))
    assert isinstance(got, cp.ndarray) and got.shape == (batch, n)
    np.testing.assert_allclose(cp.asnumpy(got), ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(segsparse.tridiagonal_solve(lo, di, up, rhs, device="gpu"), ref,
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("M", [None, "jacobi", "poly"])
def test_gmres_cupy(gpu, M):
    cp = gpu
    n = 3000
    r = sp.random(n, n, density=6 / n, random_state=np.random.default_rng(21), format="csr")
    a = (r + sp.diags(np.asarray(abs(r).sum(axis=1)).ravel() + 1.0)).tocsr()
    b = RNG.standard_normal(n)
    x, info = segsparse.gmres(a, cp.asarray(b), rtol=1e-10, M=M)
    assert isinstance(x, cp.ndarray) and info.converged and info.device == "gpu", info
    assert np.linalg.norm(b - a @ cp.asnumpy(x)) <= 1.05e-10 * np.linalg.norm(b)
    # CPU and GPU agree on the iteration count within rounding.
    _, ic = segsparse.gmres(a, b, rtol=1e-10, M=M, device="cpu")
    assert abs(ic.iterations - info.iterations) <= 3 + ic.iterations // 10, (ic, info)


def test_amg_gpu_matches_cpu_and_takes_cupy(gpu):
    cp = gpu
    n = 40
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.identity(n)
    a = (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()
    b = a @ np.ones(a.shape[0])
    ml_gpu = segsparse.amg(a, device="gpu")
    ml_cpu = segsparse.amg(a, device="cpu")
    assert ml_gpu.levels == ml_cpu.levels and ml_gpu.device_bytes > 0
    xg, ig = ml_gpu.solve(cp.asarray(b), rtol=1e-8)
    assert isinstance(xg, cp.ndarray) and ig.converged and ig.device == "gpu"
    xc, ic = ml_cpu.solve(b, rtol=1e-8)
    assert abs(ig.iterations - ic.iterations) <= 1
    np.testing.assert_allclose(cp.asnumpy(xg), 1.0, rtol=1e-6)
    r = RNG.standard_normal(a.shape[0])
    np.testing.assert_allclose(ml_gpu.aspreconditioner() @ r, ml_cpu.aspreconditioner() @ r,
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres", "minres", "solve"])
def test_cupy_solve_runs_no_cupy_reduction(gpu, solver, monkeypatch):
    """A CuPy solve from a zero guess needs no CuPy kernel (the first one a process runs
    compiles): b = 0 is answered by the crate's solve itself, x = 0 at iteration 0."""
    cp = gpu
    a = spd(3000, seed=4)
    m = segsparse.Matrix(a, device="gpu")

    def refused(*args, **kwargs):
        raise AssertionError("a CuPy reduction ran")

    monkeypatch.setattr(cp, "any", refused)
    f = getattr(segsparse, solver)
    for b in (cp.zeros(3000), cp.asarray(a @ np.ones(3000))):
        kw = {} if solver == "solve" else {"M": None}
        x, info = f(m, b, rtol=1e-10, **kw)
        assert info == 0 and isinstance(x, cp.ndarray)
        xh = cp.asnumpy(x)
        if not bool(cp.asnumpy(b).any()):
            assert info.iterations == 0 and not xh.any()
        else:
            np.testing.assert_allclose(xh, np.ones(3000), rtol=1e-7)
    amg = segsparse.amg(m)
    x, info = amg.solve(cp.zeros(3000), rtol=1e-10)
    assert info == 0 and info.iterations == 0 and not cp.asnumpy(x).any()
