"""Complex matrices and vectors (complex64, complex128): construction, products with NumPy's
promotion of mixed real and complex operands (``np.result_type``), and the solvers (the crate's
body, with the crate's preconditioners or with Python callables), checked against SciPy and dense
NumPy solves. The GPU cases are
marked ``gpu`` (skipped without a device, failed under SEGSPARSE_REQUIRE_GPU=1)."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import segsparse
from conftest import matrices_dir

RNG = np.random.default_rng(31)
COMPLEX = [np.complex64, np.complex128]


def tol_of(dtype):
    return 1e-4 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-10


def general(n, seed=0, dtype=np.complex128):
    """A random complex matrix, unsymmetric, with a dominant complex diagonal."""
    rng = np.random.default_rng(seed)
    r = sp.random(n, n, density=min(1.0, 5 / n), random_state=rng, format="csr")
    i = sp.random(n, n, density=min(1.0, 5 / n), random_state=rng, format="csr")
    a = (r - 0.5 * r.T) + 1j * (i + 0.3 * i.T)
    d = np.asarray(abs(a).sum(axis=1)).ravel() + 1.0
    return (a + sp.diags(d * np.exp(1j * rng.uniform(-1, 1, n)))).tocsr().astype(dtype)


def hpd(n, seed=0, dtype=np.complex128):
    """A random Hermitian positive definite matrix (diagonally dominant, real diagonal)."""
    rng = np.random.default_rng(seed)
    r = sp.random(n, n, density=min(1.0, 4 / n), random_state=rng, format="csr")
    i = sp.random(n, n, density=min(1.0, 4 / n), random_state=rng, format="csr")
    a = r + 1j * i
    h = a + a.conj().T
    d = np.asarray(abs(h).sum(axis=1)).ravel() + 1.0
    return (h + sp.diags(d)).tocsr().astype(dtype)


def helmholtz3d(n, k, shift, dtype=np.complex128):
    """The crate's ``helmholtz3d:n:k:shift``: the 7-point Laplacian (6 on the diagonal, -1 for
    each grid neighbour) minus ``(k h)^2 (1 - i shift)`` on the diagonal, ``h = 1/(n+1)``
    (complex symmetric, indefinite for large ``k``)."""
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    i = sp.eye(n, format="csr")
    lap = sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)
    kh2 = (k / (n + 1.0)) ** 2
    return (lap + (-kh2 + 1j * shift * kh2) * sp.eye(n ** 3)).tocsr().astype(dtype)


def helmholtz(m=8, k=6.0, shift=0.5):
    """The shifted 2-D Helmholtz operator (complex symmetric, not Hermitian)."""
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])
    lap = sp.kronsum(t, t) * (m + 1) ** 2
    return (lap - k**2 * (1 - 1j * shift) * sp.eye(m * m)).tocsr().astype(np.complex128)


def cvec(n, dtype=np.complex128, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)).astype(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_matrix_from_scipy_coo_and_dense(dtype):
    a = general(40, 1, dtype)
    for src in (a, a.tocoo(), a.tocsc(), a.toarray()):
        M = segsparse.Matrix(src)
        where = "gpu" if segsparse.gpu_available() else "cpu"  # device="auto"
        assert M.dtype == dtype and M.device == where and M.nnz == a.nnz
        assert str(np.dtype(dtype)) in repr(M)
        back = M.to_scipy()
        assert back.dtype == dtype
        np.testing.assert_array_equal(back.toarray(), a.toarray())
    # A real matrix converted to complex, and a complex one to the other precision.
    r = segsparse.Matrix(sp.eye(3, format="csr"), dtype=dtype)
    assert r.dtype == dtype
    other = np.complex128 if dtype == np.complex64 else np.complex64
    assert segsparse.Matrix(segsparse.Matrix(a), dtype=other).dtype == other


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_products_match_scipy(dtype):
    a = general(300, 2, dtype)
    M = segsparse.Matrix(a)
    x = cvec(300, dtype, 3)
    tol = tol_of(dtype)
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    y = M @ x
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * abs(ref).max())
    # alpha, beta complex; y in place.
    y0 = cvec(300, dtype, 4)
    y = y0.copy()
    out = M.spmv(x, alpha=2 - 1j, beta=0.5j, y=y)
    assert out is y
    want = (2 - 1j) * ref + 0.5j * y0.astype(np.complex128)
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * abs(want).max())
    # The conjugate transpose.
    h = M.rmatvec(x)
    href = a.conj().T.astype(np.complex128) @ x.astype(np.complex128)
    np.testing.assert_allclose(h, href, rtol=tol, atol=tol * abs(href).max())


@pytest.mark.parametrize(
    "adt, xdt",
    [
        (np.float64, np.complex128),
        (np.float32, np.complex64),
        (np.float32, np.complex128),
        (np.complex64, np.float64),
        (np.complex64, np.complex128),
        (np.complex128, np.float32),
        (np.complex64, np.int32),
        (np.complex128, np.float64),
    ],
)
def test_mixed_real_and_complex_products_follow_numpy_promotion(adt, xdt):
    base = general(60, 5)
    a = (base.real if np.dtype(adt).kind == "f" else base).astype(adt)
    M = segsparse.Matrix(a, device="cpu")
    x0 = cvec(60, np.complex128, 6)
    x = (x0.real * 7).astype(xdt) if np.dtype(xdt).kind in "fi" else x0.astype(xdt)
    y = M @ x
    want_dtype = np.result_type(adt, xdt)
    assert y.dtype == want_dtype, (adt, xdt, y.dtype)
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    tol = tol_of(want_dtype) if np.dtype(adt) not in (np.float32, np.complex64) else 1e-4
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * abs(ref).max())
    # A Python list of complex numbers and a complex alpha with a real matrix and vector.
    if np.dtype(adt).kind == "f":
        assert (M @ ([1j] * 60)).dtype.kind == "c"
        yr = M.spmv(np.ones(60, dtype=adt), alpha=1j)
        np.testing.assert_allclose(yr, 1j * (a @ np.ones(60)), rtol=1e-5)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_hermitian_cg_matches_a_dense_solve(dtype):
    a = hpd(120, 7, dtype)
    b = cvec(120, dtype, 8)
    want = np.linalg.solve(a.toarray().astype(np.complex128), b.astype(np.complex128))
    rtol = 1e-5 if dtype == np.complex64 else 1e-10
    for M in (None, "jacobi", "ic0"):
        x, info = segsparse.cg(a, b, rtol=rtol, M=M)
        assert info == 0 and info.converged and info.path == "crate", (M, info)
        assert x.dtype == dtype
        err = np.linalg.norm(x - want) / np.linalg.norm(want)
        assert err <= (1e-3 if dtype == np.complex64 else 1e-8), (M, err)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("solver", ["bicgstab", "gmres"])
def test_general_complex_systems_with_each_preconditioner(dtype, solver):
    a = general(200, 9, dtype)
    b = cvec(200, dtype, 10)
    rtol = 1e-5 if dtype == np.complex64 else 1e-10
    its = {}
    for M in (None, "jacobi", "ilu0"):
        x, info = getattr(segsparse, solver)(a, b, rtol=rtol, M=M)
        assert info == 0 and x.dtype == dtype, (M, info)
        r = np.linalg.norm(b.astype(np.complex128) - a.astype(np.complex128) @ x)
        assert r <= 10 * rtol * np.linalg.norm(b), (M, r)
        its[M] = info.iterations
    assert its["ilu0"] <= its[None], its


def test_solve_picks_cocg_for_complex_symmetric_and_gmres_otherwise():
    h = helmholtz()
    assert abs(h - h.T).max() == 0 and abs(h - h.conj().T).max() > 0
    b = cvec(h.shape[0], seed=12)
    x, info = segsparse.solve(h, b, rtol=1e-10)
    assert info.converged and info.method == "cocg" and info.precond == "jacobi"
    assert "complex symmetric" in info.reason
    assert np.linalg.norm(h @ x - b) <= 1e-9 * np.linalg.norm(b)
    choice = segsparse.auto_choice(h)
    assert choice["stats"]["symmetric"] and not choice["stats"]["hermitian"]
    # COCG by name; the unpreconditioned COCG takes fewer products than BiCGSTAB.
    xc, ic = segsparse.solve(h, b, method="cocg", M=None, rtol=1e-10)
    xb, ib = segsparse.bicgstab(h, b, rtol=1e-10)
    assert ic.converged and ib.converged and ic.iterations < 2 * ib.iterations
    g = general(80, 13)
    x, info = segsparse.solve(g, cvec(80, seed=14), rtol=1e-10)
    assert info.method == "gmres" and info.precond == "ilu0" and info.converged
    hp = hpd(50, 15)
    assert segsparse.auto_choice(hp)["method"] == "cg"


@pytest.mark.parametrize(
    "adt, bdt",
    [
        (np.float64, np.complex128),
        (np.complex128, np.float64),
        (np.complex64, np.float64),
        (np.complex64, np.complex64),
        (np.float32, np.complex64),
    ],
)
def test_mixed_systems_follow_numpy_promotion(adt, bdt):
    base = general(100, 16)
    a = (base.real if np.dtype(adt).kind == "f" else base).astype(adt)
    b0 = cvec(100, np.complex128, 17)
    b = b0.real.astype(bdt) if np.dtype(bdt).kind == "f" else b0.astype(bdt)
    x, info = segsparse.gmres(a, b, rtol=1e-5, M="ilu0")
    rt = np.result_type(adt, bdt)
    assert x.dtype == rt and info.converged
    r = np.linalg.norm(b.astype(np.complex128) - a.astype(np.complex128) @ x)
    assert r <= 1e-4 * np.linalg.norm(b)
    # A given Matrix keeps working: a real Matrix with a complex b is promoted for the solve.
    M = segsparse.Matrix(a, device="cpu")
    x2, info2 = segsparse.bicgstab(M, b, rtol=1e-5)
    assert x2.dtype == rt and info2.converged


def test_python_callables_with_complex_values_run_the_crate_body():
    a = general(60, 18)
    b = cvec(60, seed=19)
    seen = []
    x, info = segsparse.gmres(a, b, rtol=1e-10, callback=seen.append, callback_type="x")
    assert info == 0 and info.path == "crate" and seen and seen[-1].dtype == np.complex128
    assert np.linalg.norm(a @ x - b) <= 1e-9 * np.linalg.norm(b)
    np.testing.assert_array_equal(seen[-1], x)
    # A matrix-free complex A, and a LinearOperator M, in both precisions.
    for dt, tol in ((np.complex128, 1e-10), (np.complex64, 1e-4)):
        ad, bd = a.astype(dt), b.astype(dt)
        op = spla.aslinearoperator(ad)
        x, info = segsparse.bicgstab(op, bd, rtol=tol)
        assert info == 0 and info.path == "crate" and x.dtype == dt
        assert np.linalg.norm(ad @ x - bd) <= 10 * tol * np.linalg.norm(bd)
        inv_d = 1.0 / ad.diagonal()
        M = spla.LinearOperator(a.shape, lambda r: inv_d * r, dtype=dt)
        x, info = segsparse.gmres(ad, bd, rtol=tol, M=M)
        assert info == 0 and info.path == "crate" and x.dtype == dt
        assert np.linalg.norm(ad @ x - bd) <= 10 * tol * np.linalg.norm(bd)
    # GMRES's residual callback with a Python M: SciPy's left-preconditioned ||M r|| / ||b||.
    M = spla.LinearOperator(a.shape, lambda r: 1e-3 * r, dtype=np.complex128)
    ours, ref = [], []
    segsparse.gmres(a, b, rtol=1e-16, M=M, maxiter=1, restart=4, callback=ours.append,
                    callback_type="pr_norm")
    spla.gmres(a, b, rtol=1e-16, M=M, maxiter=1, restart=4, callback=ref.append,
               callback_type="pr_norm")
    np.testing.assert_allclose(ours, ref, rtol=1e-8)
    # Hermitian CG with a callback (the crate's body calls it back) against CG without one.
    h = hpd(40, 20)
    bh = cvec(40, seed=21)
    xo, io = segsparse.cg(h, bh, rtol=1e-10, callback=lambda xk: None)
    xc, ic = segsparse.cg(h, bh, rtol=1e-10)
    assert io.path == "crate" and ic.path == "crate" and io.iterations == ic.iterations
    np.testing.assert_allclose(xo, xc, rtol=1e-7, atol=1e-9)
    # COCG (complex symmetric) with a Python M and a callback, against a dense solve.
    hz = helmholtz(6)
    bz = cvec(36, seed=22)
    xs, isol = segsparse.solve(hz, bz, method="cocg", M=None, rtol=1e-10)
    xm, im = segsparse.solve(hz, bz, method="cocg", M=spla.aslinearoperator(sp.identity(36)),
                             rtol=1e-10)
    ref = np.linalg.solve(hz.toarray(), bz)
    assert isol == 0 and im == 0 and isol.method == "cocg" and im.path == "crate"
    np.testing.assert_allclose(xs, ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(xm, ref, rtol=1e-7, atol=1e-9)


def test_young1c_gmres_with_ilu0():
    d = matrices_dir()
    path = os.path.join(d, "young1c.mtx.gz") if d else None
    if path is None or not os.path.exists(path):
        pytest.skip("matrices/young1c.mtx.gz not found")
    a = segsparse.load_matrix_market(path, dtype=np.complex128)
    assert a.dtype == np.complex128 and a.shape == (841, 841)
    M = segsparse.load_matrix_market(path, dtype=np.complex128, as_matrix=True)
    assert M.dtype == np.complex128 and M.nnz == a.nnz
    b = np.ones(841, dtype=np.complex128)
    x0, i0 = segsparse.gmres(M, b, rtol=1e-8, M=None, maxiter=200)
    x1, i1 = segsparse.gmres(M, b, rtol=1e-8, M="ilu0")
    assert i1 == 0 and i1.iterations < i0.iterations
    assert np.linalg.norm(a @ x1 - b) <= 1e-7 * np.linalg.norm(b)
    with pytest.raises(ValueError, match="holds complex values"):
        segsparse.load_matrix_market(path, dtype=np.float64)


def test_complex_errors_are_clear():
    a = general(20, 23)
    b = cvec(20, seed=24)
    for M in ("amg", "poly"):
        with pytest.raises(ValueError, match="real systems"):
            segsparse.gmres(a, b, M=M)
    if not segsparse.gpu_available():
        with pytest.raises(segsparse.CudaUnavailableError):
            segsparse.Matrix(a, device="gpu")
    with pytest.raises(ValueError, match="real matrices"):
        segsparse.amg(segsparse.Matrix(a))
    with pytest.raises(ValueError, match="2-D b"):
        segsparse.gmres(a, np.stack([b, b], axis=1))
    with pytest.raises(TypeError):
        segsparse.Matrix(a, dtype=np.float32)
    with pytest.raises(ValueError, match="elements"):
        segsparse.gmres(a, b[:-1])
    x, info = segsparse.gmres(a, np.zeros(20, complex))
    assert info == 0 and not x.any() and x.dtype == np.complex128


@pytest.mark.gpu
def test_real_gpu_matrix_with_cupy_complex_vectors(gpu):
    cp = gpu
    a = general(500, 25).real.tocsr()
    M = segsparse.Matrix(a, device="gpu")
    assert M.device == "gpu"
    x = cvec(500, seed=26)
    y = M @ cp.asarray(x)
    assert isinstance(y, cp.ndarray) and y.dtype == np.complex128
    ref = a @ x
    np.testing.assert_allclose(cp.asnumpy(y), ref, rtol=1e-12, atol=1e-12 * abs(ref).max())


@pytest.mark.gpu
def test_complex_system_with_cupy_right_hand_side(gpu):
    cp = gpu
    a = general(300, 27)
    b = cvec(300, seed=28)
    x, info = segsparse.gmres(a, cp.asarray(b), rtol=1e-10, M="ilu0")
    assert isinstance(x, cp.ndarray) and x.dtype == np.complex128 and info.converged
    xh = cp.asnumpy(x)
    assert np.linalg.norm(a @ xh - b) <= 1e-9 * np.linalg.norm(b)


# --- complex matrices on the GPU: CuPy in, CuPy out, no copy ------------------------------------


@pytest.fixture
def no_host_copy(monkeypatch):
    """Fails the test if a vector goes through the host: the host-vector helpers of the package
    and CuPy's device-to-host copy raise while it is active."""
    import cupy as cp

    def refuse(*a, **k):
        raise AssertionError("a host copy was made")

    from segsparse import matrix as mmod, solvers as smod

    monkeypatch.setattr(cp, "asnumpy", refuse)
    monkeypatch.setattr(mmod, "host_vector", refuse)
    monkeypatch.setattr(smod, "host_vector", refuse)
    yield
    monkeypatch.undo()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_matrix_built_on_the_gpu(gpu, dtype):
    cp = gpu
    import cupyx.scipy.sparse as csp

    a = general(500, 40, dtype)
    for src in (a, csp.csr_matrix(a)):
        M = segsparse.Matrix(src, device="gpu")
        assert M.device == "gpu" and M.dtype == dtype and M.gpu_algorithm is not None
        assert M.nnz == a.nnz
        np.testing.assert_array_equal(M.to_scipy().toarray(), a.toarray())
    assert segsparse.Matrix(a).device == "gpu"  # "auto" with a GPU
    assert segsparse.Matrix(a, device="cpu").device == "cpu"
    assert segsparse.auto_choice(segsparse.Matrix(a, device="gpu"))["method"] == "gmres"
    del cp


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("case", ["random-1", "random-1000", "random-70001", "helmholtz3d-30"])
def test_complex_gpu_spmv_zero_copy(gpu, dtype, case, no_host_copy):
    cp = gpu
    kind, n = case.split("-")
    n = int(n)
    a = general(n, n, dtype) if kind == "random" else helmholtz3d(n, 20.0, 0.5, dtype)
    n = a.shape[0]
    M = segsparse.Matrix(a, device="gpu")
    a128 = a.astype(np.complex128)
    x = cvec(n, dtype, 41)
    ref = a128 @ x.astype(np.complex128)
    tol = tol_of(dtype)
    xd = cp.asarray(x)
    ptr_x = xd.data.ptr
    yd = M @ xd
    assert isinstance(yd, cp.ndarray) and yd.dtype == dtype and xd.data.ptr == ptr_x
    got = yd.get()
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * abs(ref).max())
    # alpha, beta complex; y in place on a non-default stream.
    y0 = cvec(n, dtype, 42)
    with cp.cuda.Stream(non_blocking=True):
        y = cp.asarray(y0)
        ptr = y.data.ptr
        out = M.spmv(xd, alpha=2 - 1j, beta=0.5j, y=y)
        assert out is y and y.data.ptr == ptr
        got = y.get()
    want = (2 - 1j) * ref + 0.5j * y0.astype(np.complex128)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * abs(want).max())
    # A^H x: A.H @ x and rmatvec into a given y.
    href = a128.conj().T @ x.astype(np.complex128)
    h = M.H @ xd
    assert isinstance(h, cp.ndarray) and h.dtype == dtype
    np.testing.assert_allclose(h.get(), href, rtol=tol, atol=tol * abs(href).max())
    yh = cp.zeros(n, dtype=dtype)
    assert M.rmatvec(xd, y=yh) is yh
    np.testing.assert_allclose(yh.get(), href, rtol=tol, atol=tol * abs(href).max())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_gpu_spmv_numpy_vectors_copied_over(gpu, dtype):
    a = general(300, 43, dtype)
    M = segsparse.Matrix(a, device="gpu")
    x = cvec(300, dtype, 44)
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    tol = tol_of(dtype)
    y = M @ x
    assert isinstance(y, np.ndarray) and y.dtype == dtype
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * abs(ref).max())
    h = M.rmatvec(x)
    href = a.astype(np.complex128).conj().T @ x.astype(np.complex128)
    np.testing.assert_allclose(h, href, rtol=tol, atol=tol * abs(href).max())


@pytest.mark.gpu
@pytest.mark.parametrize(
    "adt, xdt",
    [
        (np.complex128, np.float64),
        (np.complex128, np.float32),
        (np.complex64, np.float32),
        (np.complex64, np.float64),
        (np.complex64, np.complex128),
        (np.complex128, np.int32),
        (np.float32, np.complex64),
        (np.float64, np.complex128),
    ],
)
def test_complex_gpu_products_follow_numpy_promotion(gpu, adt, xdt):
    cp = gpu
    base = general(400, 45)
    a = (base.real if np.dtype(adt).kind == "f" else base).astype(adt)
    M = segsparse.Matrix(a, device="gpu")
    x0 = cvec(400, np.complex128, 46)
    x = (x0.real * 7).astype(xdt) if np.dtype(xdt).kind in "fi" else x0.astype(xdt)
    y = M @ cp.asarray(x)
    rt = np.result_type(adt, xdt)
    assert isinstance(y, cp.ndarray) and y.dtype == rt, (adt, xdt, y.dtype)
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    tol = 1e-4 if np.float32 in (np.dtype(adt).type, np.dtype(xdt).type) or \
        np.complex64 in (np.dtype(adt).type,) else 1e-10
    np.testing.assert_allclose(y.get(), ref, rtol=tol, atol=tol * abs(ref).max())


@pytest.mark.gpu
def test_complex_gpu_real_cupy_vector_promoted_on_device(gpu, no_host_copy):
    cp = gpu
    a = general(1000, 47)
    M = segsparse.Matrix(a, device="gpu")
    xr = cp.asarray(np.random.default_rng(48).standard_normal(1000))
    y = M @ xr
    assert isinstance(y, cp.ndarray) and y.dtype == np.complex128


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_gpu_solves_zero_copy(gpu, dtype, no_host_copy):
    """Hermitian CG, COCG, BiCGSTAB and GMRES on a GPU matrix with CuPy b: the GPU body on the
    caller's vectors (no host copy), against the CPU body's solution and iterations."""
    cp = gpu
    rtol = 1e-5 if dtype == np.complex64 else 1e-9
    h = hpd(2000, 50, dtype)
    z = helmholtz3d(16, 8.0, 0.5, dtype)
    g = general(2000, 51, dtype)
    cases = [(h, "cg", None), (h, "cg", "jacobi"), (z, "cocg", None), (z, "cocg", "jacobi"),
             (z, "bicgstab", None), (z, "gmres", None), (g, "bicgstab", "jacobi"),
             (g, "gmres", "jacobi")]
    for a, method, pre in cases:
        n = a.shape[0]
        b = cvec(n, dtype, 52)
        M = segsparse.Matrix(a, device="gpu")
        bd = cp.asarray(b)
        bptr = bd.data.ptr
        if method == "cocg":
            x, info = segsparse.solve(M, bd, method="cocg", M=pre, rtol=rtol, maxiter=5000)
        else:
            x, info = getattr(segsparse, method)(M, bd, rtol=rtol, M=pre, maxiter=5000)
        assert isinstance(x, cp.ndarray) and x.dtype == dtype and bd.data.ptr == bptr
        assert info == 0 and info.device == "gpu" and info.path == "crate", (method, pre, info)
        r = float(cp.linalg.norm(bd - M @ x))  # the product on the device as well
        assert r <= 5 * rtol * float(cp.linalg.norm(bd)), (method, pre, r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_gpu_solves_match_the_cpu(gpu, dtype):
    cp = gpu
    rtol = 1e-5 if dtype == np.complex64 else 1e-9
    z = helmholtz3d(14, 8.0, 0.5, dtype)
    b = cvec(z.shape[0], dtype, 53)
    want = spla.spsolve(z.astype(np.complex128).tocsc(), b.astype(np.complex128))
    Mg = segsparse.Matrix(z, device="gpu")
    Mc = segsparse.Matrix(z, device="cpu")
    for method, pre in (("cocg", "jacobi"), ("gmres", None), ("bicgstab", None)):
        kw = dict(rtol=rtol, M=pre, maxiter=5000)
        if method == "cocg":
            xg, ig = segsparse.solve(Mg, cp.asarray(b), method="cocg", **kw)
            xc, ic = segsparse.solve(Mc, b, method="cocg", **kw)
        else:
            xg, ig = getattr(segsparse, method)(Mg, cp.asarray(b), **kw)
            xc, ic = getattr(segsparse, method)(Mc, b, **kw)
        assert ig == 0 and ic == 0 and ig.device == "gpu" and ic.device == "cpu"
        slack = max(2, ic.iterations // 4)
        assert abs(ig.iterations - ic.iterations) <= slack, (method, ig.iterations, ic.iterations)
        err = np.linalg.norm(xg.get() - want) / np.linalg.norm(want)
        assert err <= (1e-2 if dtype == np.complex64 else 1e-6), (method, err)
    # NumPy b with the GPU matrix: copied over and back, NumPy out.
    x, info = segsparse.gmres(Mg, b, rtol=rtol)
    assert isinstance(x, np.ndarray) and info == 0 and info.device == "gpu"
    # x0 on the device (a real x0 promoted there).
    x0 = cp.asarray(np.ones(z.shape[0]))
    x, info = segsparse.gmres(Mg, cp.asarray(b), x0=x0, rtol=rtol)
    assert isinstance(x, cp.ndarray) and info == 0 and x0.dtype == np.float64


@pytest.mark.gpu
def test_complex_gpu_solve_auto_mixes_and_fallbacks(gpu):
    cp = gpu
    z = helmholtz3d(12, 6.0, 0.5)
    n = z.shape[0]
    b = cvec(n, np.complex128, 54)
    # solve(method='auto') on a complex symmetric matrix: COCG + Jacobi, on the GPU.
    x, info = segsparse.solve(z, cp.asarray(b), rtol=1e-9)
    assert info.method == "cocg" and info.precond == "jacobi" and info.device == "gpu"
    assert isinstance(x, cp.ndarray)
    assert np.linalg.norm(z @ x.get() - b) <= 1e-8 * np.linalg.norm(b)
    # A real CuPy b with a complex GPU matrix, and a complex CuPy b with a real matrix.
    br = cp.asarray(b.real.copy())
    x, info = segsparse.gmres(segsparse.Matrix(z, device="gpu"), br, rtol=1e-9)
    assert x.dtype == np.complex128 and info == 0 and info.device == "gpu"
    g = general(500, 55).real.tocsr()
    bg = cvec(500, np.complex128, 56)
    x, info = segsparse.bicgstab(g, cp.asarray(bg), rtol=1e-9, device="gpu")
    assert x.dtype == np.complex128 and info == 0
    assert np.linalg.norm(g @ x.get() - bg) <= 1e-8 * np.linalg.norm(bg)
    # ILU(0) of a complex GPU matrix: factored and applied on the CPU, CuPy in and out.
    x, info = segsparse.gmres(segsparse.Matrix(z, device="gpu"), cp.asarray(b), M="ilu0",
                              rtol=1e-9)
    assert isinstance(x, cp.ndarray) and info == 0 and info.device == "cpu"
    # A callback: the crate's body on the GPU matrix calls it back with CuPy copies.
    seen = []
    x, info = segsparse.gmres(segsparse.Matrix(z, device="gpu"), cp.asarray(b), rtol=1e-9,
                              callback=seen.append, callback_type="x")
    assert info == 0 and seen and isinstance(seen[-1], cp.ndarray)
    assert info.path == "crate" and info.device == "gpu"
    assert np.linalg.norm(z @ x.get() - b) <= 1e-8 * np.linalg.norm(b)


@pytest.mark.gpu
def test_complex_gpu_errors_are_clear(gpu):
    cp = gpu
    a = general(50, 57)
    M = segsparse.Matrix(a, device="gpu")
    xd = cp.asarray(cvec(50, seed=58))
    with pytest.raises(ValueError, match="dtype"):
        M.spmv(xd, y=cp.zeros(50, dtype=np.float64))
    with pytest.raises(ValueError, match="overlap"):
        M.spmv(xd, y=xd)
    with pytest.raises(ValueError, match="elements"):
        M @ cp.asarray(cvec(49, seed=59))
    with pytest.raises(ValueError, match="real"):
        segsparse.gmres(M, xd, M="amg")
    with pytest.raises(ValueError, match="real matrices"):
        segsparse.amg(M)
