"""segsparse against SciPy/NumPy on the CPU (CI runs these; no GPU needed)."""

import os
import time

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse
from conftest import matrices_dir

RNG = np.random.default_rng(7)


def spd(n, seed=0):
    """A random sparse SPD matrix (diagonally dominant)."""
    r = sp.random(n, n, density=min(1.0, 8 / n), random_state=np.random.default_rng(seed), format="csr")
    a = r + r.T
    d = np.asarray(abs(a).sum(axis=1)).ravel() + 1.0
    return (a + sp.diags(d)).tocsr()


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmv_matches_scipy(fmt, dtype):
    a = sp.random(301, 257, density=0.03, random_state=np.random.default_rng(3), format=fmt, dtype=dtype)
    m = segsparse.Matrix(a, device="cpu")
    assert m.shape == (301, 257) and m.dtype == dtype and m.device == "cpu"
    x = RNG.standard_normal(257).astype(dtype)
    y0 = RNG.standard_normal(301).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(m @ x, a @ x, rtol=tol, atol=tol)
    y = y0.copy()
    out = m.spmv(x, alpha=2.0, beta=-0.5, y=y)
    assert out is y
    np.testing.assert_allclose(y, 2.0 * (a @ x) - 0.5 * y0, rtol=tol, atol=tol)


def test_empty_rows_unsorted_duplicates_and_int64_indices():
    indptr = np.array([0, 3, 3, 5], dtype=np.int64)
    indices = np.array([2, 0, 2, 1, 0], dtype=np.int64)  # unsorted, a duplicate in row 0
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    a = sp.csr_matrix((data, indices, indptr), shape=(3, 3))
    x = np.array([1.0, 10.0, 100.0])
    np.testing.assert_allclose(segsparse.Matrix(a, device="cpu") @ x, a @ x)


def test_dense_input_and_roundtrip():
    d = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    m = segsparse.Matrix(d, device="cpu")
    assert m.nnz == 3
    np.testing.assert_array_equal(m.to_scipy().toarray(), d)


def test_bad_inputs_raise_clear_errors():
    m = segsparse.Matrix(sp.eye(4, format="csr"), device="cpu")
    with pytest.raises(ValueError, match="x has 3 elements"):
        m @ np.ones(3)
    with pytest.raises(ValueError, match="beta"):
        m.spmv(np.ones(4), beta=1.0)
    with pytest.raises(ValueError, match="device must be"):
        segsparse.Matrix(sp.eye(4), device="tpu")
    bad = sp.csr_matrix((np.ones(1), np.array([7]), np.array([0, 1, 1])), shape=(2, 8))
    bad.indices[0] = 9  # column 9 of an 8-column matrix
    with pytest.raises(ValueError, match="9"):
        segsparse.Matrix(bad, device="cpu")
    with pytest.raises(TypeError):
        segsparse.Matrix("not a matrix", device="cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cg_pcg_match_scipy_residual(dtype):
    a = spd(400, seed=1).astype(dtype)
    b = RNG.standard_normal(400).astype(dtype)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for solver in (segsparse.cg, segsparse.pcg):
        x, info = solver(a, b, rtol=rtol, device="cpu")
        assert info.converged and info.status == 0 and info.device == "cpu"
        r = np.linalg.norm(b.astype(np.float64) - a.astype(np.float64) @ x) / np.linalg.norm(b)
        assert r <= rtol * 1.01, (solver, r)
        assert info.residual <= rtol
        assert len(info.history) == info.iterations + 1 + info.restarts or len(info.history) > 0
        assert info.time > 0


@pytest.mark.parametrize("M", [None, "jacobi", "poly", "ic0", "amg"])
def test_info_splits_setup_and_solve(M):
    # The crate's timing model: setup (uploads, preconditioner) apart from the solver call;
    # time is the solve, also when the solve did not converge.
    a = spd(400, seed=3)
    b = RNG.standard_normal(400)
    for maxiter in (None, 2):
        t = time.perf_counter()
        _, info = segsparse.cg(a, b, rtol=1e-10, M=M, maxiter=maxiter, device="cpu")
        wall = time.perf_counter() - t
        assert info.setup_seconds >= 0 and info.solve_seconds > 0, info
        assert info.time == info.solve_seconds
        assert info.setup_seconds + info.solve_seconds <= wall
        assert info.converged == (maxiter is None)


def test_bicgstab_unsymmetric_and_x0():
    n = 300
    a = (spd(n, seed=2) + sp.random(n, n, density=0.01, random_state=np.random.default_rng(4))).tocsr()
    b = RNG.standard_normal(n)
    m = segsparse.Matrix(a, device="cpu")
    x, info = segsparse.bicgstab(m, b, rtol=1e-10)
    assert info.converged
    assert np.linalg.norm(b - a @ x) <= 1.01e-10 * np.linalg.norm(b)
    x2, info2 = segsparse.bicgstab(m, b, x0=x, rtol=1e-8, M="jacobi")
    assert info2.converged and info2.iterations <= 1


def test_not_converged_is_reported_not_raised():
    a = spd(200, seed=3)
    x, info = segsparse.cg(a, np.ones(200), rtol=1e-14, maxiter=2, device="cpu")
    # info is SciPy's integer: 2 (maxiter), truthy as SciPy's non-zero info.
    assert not info.converged and info and info == 2 and info.status == 2
    assert "not converged" in info.message
    assert x.shape == (200,)


def test_breakdown_on_indefinite_matrix():
    a = sp.diags([1.0, -1.0, 2.0, -3.0]).tocsr()
    x, info = segsparse.cg(a, np.ones(4), rtol=1e-12, device="cpu")
    assert not info.converged and info.status == -1 and "breakdown" in info.message


def saddle_point(n):
    """A 2-D Laplacian block with a divergence-like constraint block and a zero block:
    symmetric indefinite."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    lap = (sp.kron(t, sp.eye(n)) + sp.kron(sp.eye(n), t)).tocsr()
    m = n * n // 4
    rows = np.repeat(np.arange(m), 2)
    cols = np.concatenate([[4 * i, 4 * i + 1] for i in range(m)])
    g = sp.csr_matrix((np.tile([1.0, -1.0], m), (rows, cols)), shape=(m, n * n))
    return sp.bmat([[lap, g.T], [g, None]], format="csr")


def test_minres_on_symmetric_indefinite_systems_where_cg_breaks_down():
    a = saddle_point(24)
    b = np.random.default_rng(3).standard_normal(a.shape[0])
    _, cg_info = segsparse.cg(a, b, rtol=1e-8, device="cpu")
    assert not cg_info.converged
    x, info = segsparse.minres(a, b, rtol=1e-8, device="cpu")
    assert info.converged and info.status == 0, info
    assert np.linalg.norm(b - a @ x) <= 1.01e-8 * np.linalg.norm(b)
    # Through solve(method=...) the same, and a positive-diagonal indefinite matrix with Jacobi.
    x2, info2 = segsparse.solve(a, b, method="minres", M=None, rtol=1e-8, device="cpu")
    assert info2.converged and info2.iterations == info.iterations
    s = sp.diags([-1.0, 1.9, -1.0], [-1, 0, 1], shape=(300, 300), format="csr")
    x, info = segsparse.minres(s, np.ones(300), M="jacobi", rtol=1e-10, device="cpu")
    assert info.converged and np.linalg.norm(s @ x - 1) <= 1.01e-10 * np.sqrt(300)
    # A negative definite Jacobi is a breakdown, a 2-D b a ValueError.
    x, info = segsparse.minres(-sp.eye(50, format="csr") + s[:50, :50] * 0.1, np.ones(50),
                               M="jacobi", device="cpu")
    assert not info.converged and info.status == -1 and "not positive definite" in info.message
    with pytest.raises(ValueError, match="one right-hand side"):
        segsparse.minres(a, np.ones((a.shape[0], 2)), device="cpu")


def test_solver_argument_errors():
    with pytest.raises(ValueError, match="square"):
        segsparse.cg(sp.random(3, 4, density=0.5), np.ones(3), device="cpu")
    with pytest.raises(TypeError, match="M must be"):
        segsparse.cg(sp.eye(3), np.ones(3), M=object(), device="cpu")
    with pytest.raises(ValueError, match="b has 2"):
        segsparse.cg(sp.eye(3), np.ones(2), device="cpu")
    with pytest.raises(ValueError, match="Jacobi"):
        segsparse.pcg(sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]])), np.ones(2), device="cpu")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint32])
@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_numpy(dtype, inclusive, reverse):
    n = 10_007
    x = (RNG.integers(0, 100, n)).astype(dtype)
    s = x[::-1] if reverse else x
    ref = np.cumsum(s, dtype=dtype)
    if not inclusive:
        ref = np.concatenate([[0], ref[:-1]]).astype(dtype)
    if reverse:
        ref = ref[::-1]
    np.testing.assert_array_equal(segsparse.scan(x, inclusive=inclusive, reverse=reverse), ref)
    np.testing.assert_array_equal(segsparse.scan(x, "max"), np.maximum.accumulate(x))


def test_segmented_scan_offsets_and_flags():
    x = RNG.standard_normal(1000)
    offsets = np.array([0, 0, 10, 10, 500, 999, 1000])
    ref = np.concatenate([np.cumsum(x[a:b]) for a, b in zip(offsets[:-1], offsets[1:])])
    np.testing.assert_allclose(segsparse.segmented_scan(x, offsets), ref, rtol=1e-12, atol=1e-12)
    flags = np.zeros(1000, dtype=bool)
    flags[[10, 500, 999]] = True
    np.testing.assert_allclose(segsparse.segmented_scan(x, flags=flags), ref, atol=1e-12)
    with pytest.raises(ValueError, match="offsets"):
        segsparse.segmented_scan(x, [0, 5, 3, 1000])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.uint64])
def test_sort_matches_numpy_stable(dtype):
    keys = RNG.integers(0, 50, 5000).astype(dtype)
    vals = np.arange(5000)
    np.testing.assert_array_equal(segsparse.sort(keys), np.sort(keys))
    sk, sv = segsparse.sort(keys, vals)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(sk, keys[order])
    np.testing.assert_array_equal(sv, vals[order])
    with pytest.raises(TypeError):
        segsparse.sort(np.ones(3, dtype=np.int8))


@pytest.mark.parametrize("batch", [None, 7])
def test_tridiagonal_solve_matches_dense(batch):
    n = 33
    shape = (n,) if batch is None else (batch, n)
    lo, up = RNG.standard_normal(shape), RNG.standard_normal(shape)
    di = 4.0 + np.abs(lo) + np.abs(up)
    rhs = RNG.standard_normal(shape)
    x = segsparse.tridiagonal_solve(lo, di, up, rhs, device="cpu")
    assert x.shape == shape
    for k in range(1 if batch is None else batch):
        l, d, u, r, xs = (v if batch is None else v[k] for v in (lo, di, up, rhs, x))
        t = np.diag(d) + np.diag(l[1:], -1) + np.diag(u[:-1], 1)
        np.testing.assert_allclose(t @ xs, r, atol=1e-10)
    with pytest.raises(segsparse.SolverError):
        segsparse.tridiagonal_solve(np.zeros(3), np.zeros(3), np.zeros(3), np.ones(3), device="cpu")


def test_matrix_market_roundtrip_and_errors(tmp_path):
    a = sp.random(40, 30, density=0.1, random_state=np.random.default_rng(5), format="csr")
    p = tmp_path / "a.mtx.gz"
    segsparse.save_matrix_market(p, a)
    b = segsparse.load_matrix_market(p)
    assert (abs(a - b) > 0).nnz == 0
    m = segsparse.load_matrix_market(p, as_matrix=True, device="cpu", dtype=np.float32)
    assert m.dtype == np.float32 and m.shape == (40, 30)
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 1.0\n")
    with pytest.raises(segsparse.MatrixMarketError) as e:
        segsparse.load_matrix_market(bad)
    assert e.value.line == 3 and str(bad) in str(e.value) and e.value.path == str(bad)
    assert isinstance(e.value, ValueError)
    with pytest.raises(FileNotFoundError):
        segsparse.load_matrix_market(tmp_path / "missing.mtx")


def test_raefsky2_bicgstab_against_scipy():
    d = matrices_dir()
    if d is None or not os.path.exists(os.path.join(d, "raefsky2.mtx.gz")):
        pytest.skip("matrices/raefsky2.mtx.gz not found")
    a = segsparse.load_matrix_market(os.path.join(d, "raefsky2.mtx.gz"))
    b = a @ np.ones(a.shape[1])
    x, info = segsparse.bicgstab(a, b, rtol=1e-8, M="jacobi", maxiter=20000, device="cpu")
    assert info.converged, info
    assert np.linalg.norm(b - a @ x) <= 1.01e-8 * np.linalg.norm(b)


def test_gpu_status_reports_a_reason():
    if segsparse.gpu_available():
        assert segsparse.device_name() and segsparse.gpu_error() is None
    else:
        assert segsparse.device_name() is None and segsparse.gpu_error()
        with pytest.raises(segsparse.CudaUnavailableError):
            segsparse.Matrix(sp.eye(3), device="gpu")


def test_help_is_useful():
    doc = segsparse.cg.__doc__
    for word in ("rtol", "maxiter", "SolveInfo", "CuPy", "Example"):
        assert word in doc


def unsym(n, seed=0):
    """A random sparse unsymmetric, diagonally dominant matrix."""
    r = sp.random(n, n, density=min(1.0, 6 / n), random_state=np.random.default_rng(seed), format="csr")
    d = np.asarray(abs(r).sum(axis=1)).ravel() + 1.0
    return (r + sp.diags(d)).tocsr()


@pytest.mark.parametrize("M", [None, "jacobi", "poly"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gmres_against_scipy(M, dtype):
    a = unsym(800, seed=11).astype(dtype)
    b = RNG.standard_normal(800).astype(dtype)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    x, info = segsparse.gmres(a, b, rtol=rtol, restart=20, M=M, device="cpu")
    assert info.converged and info.method == "gmres", info
    a64 = a.astype(np.float64)
    assert np.linalg.norm(b - a64 @ x.astype(np.float64)) <= 1.05 * rtol * np.linalg.norm(b)
    if M is None and dtype == np.float64:
        # SciPy's GMRES(20) to the same tolerance: a comparable number of inner iterations.
        import scipy.sparse.linalg as spla
        count = [0]
        spla.gmres(a64, b, rtol=rtol, restart=20, callback=lambda _: count.__setitem__(0, count[0] + 1),
                   callback_type="pr_norm")
        assert abs(info.iterations - count[0]) <= 3 + count[0] // 5, (info.iterations, count[0])


@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres"])
def test_poly_preconditioner_cuts_iterations(solver):
    a = spd(2000, seed=12)
    b = np.ones(2000)
    f = getattr(segsparse, solver)
    x0, plain = f(a, b, rtol=1e-10, device="cpu")
    x1, poly = f(a, b, rtol=1e-10, M="poly", device="cpu")
    assert plain.converged and poly.converged, (plain, poly)
    assert poly.iterations < plain.iterations, (poly.iterations, plain.iterations)
    assert np.linalg.norm(b - a @ x1) <= 1.05e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("solver,M", [("gmres", "ilu0"), ("bicgstab", "ilu0"), ("cg", "ic0")])
def test_incomplete_factorizations_against_scipy(solver, M):
    import scipy.sparse.linalg as spla
    a = spd(1500, seed=13) if M == "ic0" else unsym(1500, seed=14)
    b = RNG.standard_normal(1500)
    f = getattr(segsparse, solver)
    _, plain = f(a, b, rtol=1e-10, maxiter=20000, device="cpu")
    x, info = f(a, b, rtol=1e-10, maxiter=20000, M=M, device="cpu")
    assert info.converged, info
    assert info.iterations < plain.iterations, (info.iterations, plain.iterations)
    ref = spla.spsolve(a.tocsc(), b)
    assert np.linalg.norm(x - ref) <= 1e-7 * np.linalg.norm(ref)


def test_gmres_arguments_are_checked():
    a = unsym(50, seed=1)
    with pytest.raises(ValueError, match="restart"):
        segsparse.gmres(a, np.ones(50), restart=0, device="cpu")
    with pytest.raises(TypeError, match="poly"):
        segsparse.gmres(a, np.ones(50), M=object(), device="cpu")
    # A singular system (a zero operator) breaks down cleanly: reported, never "converged".
    z = sp.csr_matrix((4, 4))
    x, info = segsparse.gmres(z, np.ones(4), device="cpu")
    assert not info.converged and info.status != 0, info


def poisson2d(n):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.identity(n)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def test_amg_object_solves_many_rhs_and_scipy_uses_it():
    import scipy.sparse.linalg as spla

    a = poisson2d(48)
    m = segsparse.Matrix(a, device="cpu")
    ml = segsparse.amg(m)
    assert ml.levels[0] == (a.shape[0], a.nnz) and len(ml.levels) >= 2
    assert 1.0 < ml.operator_complexity < 1.6 and ml.setup_seconds > 0
    assert "operator complexity" in repr(ml)
    for k in range(3):
        b = a @ np.full(a.shape[0], 1.0 + k)
        x, info = ml.solve(b, rtol=1e-8)
        assert info.converged and info.iterations <= 12, info
        np.testing.assert_allclose(x, 1.0 + k, rtol=1e-6)
    _, plain = segsparse.cg(m, b, rtol=1e-8)
    assert plain.iterations > 3 * info.iterations
    # The same hierarchy as M of the other solvers, and "amg" built per call.
    for solver in (segsparse.gmres, segsparse.bicgstab, segsparse.pcg):
        x, info = solver(m, b, rtol=1e-8, M=ml)
        assert info.converged and info.iterations <= 15, (solver, info)
    x, info = segsparse.cg(a, b, rtol=1e-8, M="amg", device="cpu")
    assert info.converged and info.iterations <= 12
    # SciPy's CG with the cycle as a LinearOperator.
    its = []
    x, flag = spla.cg(a, b, rtol=1e-8, M=ml.aspreconditioner(), callback=lambda xk: its.append(1))
    assert flag == 0 and len(its) <= 12
    np.testing.assert_allclose(x, 3.0, rtol=1e-6)
    # Numeric re-setup on the same pattern.
    ml.update(2.0 * a)
    x, info = ml.solve(2.0 * b, rtol=1e-8)
    assert info.converged and info.iterations <= 12


def test_amg_rigid_body_modes_by_columns():
    # n x k candidates, one per column: the six rigid-body modes of 3-D elasticity take fewer
    # iterations than the constant, in C and in Fortran order alike (a row/column mix-up would
    # not: it makes the coarse operator singular or the cycle weak).
    from segsparse import _core
    spec = "elasticity3d:8"
    indptr, indices, data, shape = _core.generate_matrix(spec)
    a = sp.csr_matrix((data, indices, indptr), shape=shape)
    modes = _core.rigid_body_modes(spec)
    b = np.ones(a.shape[0])
    _, plain = segsparse.amg(a, block_size=3, device="cpu").solve(b, rtol=1e-8)
    for c in (modes, np.asfortranarray(modes)):
        ml = segsparse.amg(a, candidates=c, block_size=3, device="cpu")
        x, info = ml.solve(b, rtol=1e-8)
        assert info.converged and info.iterations < plain.iterations
        assert np.linalg.norm(b - a @ x) <= 1e-7 * np.linalg.norm(b)


def test_amg_candidates_and_errors():
    a = poisson2d(20)
    n = a.shape[0]
    ml = segsparse.amg(a, candidates=np.ones((n, 1)), smoother="l1-jacobi", sweeps=2, cycle="W",
                       device="cpu")
    x, info = ml.solve(a @ np.ones(n), rtol=1e-8)
    assert info.converged
    with pytest.raises(ValueError, match="candidates"):
        segsparse.amg(a, candidates=np.ones((n - 1, 1)), device="cpu")
    with pytest.raises(ValueError, match="smoother"):
        segsparse.amg(a, smoother="gauss-seidel", device="cpu")
    bad = a.tolil()
    bad[3, 3] = -1.0
    with pytest.raises(ValueError, match="row 3"):
        segsparse.amg(bad.tocsr(), device="cpu")
    with pytest.raises(TypeError, match="amg"):
        segsparse.cg(a, np.ones(n), M=object())


def test_float32_storage_reaches_the_float64_tolerance_and_falls_back_with_its_reason():
    # A 1-D diffusion matrix whose values float32 rounds.
    n = 300
    a = sp.diags([-1 / 3, 2 + 0.01 / 3, -1 / 3], [-1, 0, 1], shape=(n, n), format="csr")
    b = RNG.standard_normal(n)
    for solver, kw in [(segsparse.cg, {}), (segsparse.pcg, {}), (segsparse.gmres, {"M": "jacobi"}),
                       (segsparse.bicgstab, {})]:
        x, info = solver(a, b, rtol=1e-11, storage="float32", device="cpu", **kw)
        assert info == 0 and info.converged, info
        assert info.storage == "float32" and info.storage_fallback is None
        assert np.linalg.norm(b - a @ x) <= 1e-11 * np.linalg.norm(b) * 1.0001
    # Values beyond float32's range: float64 storage, and the reason.
    big = a * 1e39
    x, info = segsparse.cg(big, b * 1e39, rtol=1e-8, storage="float32", device="cpu")
    assert info.converged and info.storage == "float64"
    assert "beyond f32's range" in info.storage_fallback
    assert np.linalg.norm(b * 1e39 - big @ x) <= 1e-8 * np.linalg.norm(b * 1e39) * 1.0001
    # Only for float64 matrices, NumPy vectors, one right-hand side.
    with pytest.raises(ValueError, match="float64 matrix"):
        segsparse.cg(segsparse.Matrix(a.astype(np.float32), device="cpu"), b.astype(np.float32),
                     storage="float32")
    with pytest.raises(ValueError, match="storage must be"):
        segsparse.cg(a, b, storage="float16")


def test_float32_storage_copies_the_values_once_per_matrix_and_stores_the_amg_hierarchy():
    # The f32 copy is made by the first storage="float32" solve and kept with the Matrix.
    a = sp.diags([-1 / 3, 2 + 0.01 / 3, -1 / 3], [-1, 0, 1], shape=(400, 400), format="csr")
    M = segsparse.Matrix(a, device="cpu")
    b = RNG.standard_normal(400)
    assert M._m.f32_copies() == 0
    segsparse.cg(M, b, rtol=1e-10, storage="float32")
    assert M._m.f32_copies() == 1
    x, info = segsparse.gmres(M, b, rtol=1e-10, storage="float32")
    assert info.converged and info.storage == "float32"
    assert M._m.f32_copies() == 1
    # AMG built by the solve: the hierarchy in float32 under the float64 CG. Values exact in
    # float32 (Poisson): float32 values for the operator too.
    e = np.ones(12)
    t = sp.diags([-e[1:], 2 * e, -e[1:]], [-1, 0, 1])
    i = sp.identity(12)
    p = (sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)).tocsr()
    P = segsparse.Matrix(p, device="cpu")
    bp = RNG.standard_normal(p.shape[0])
    x64, i64 = segsparse.cg(P, bp, rtol=1e-10, M="amg")
    x32, i32 = segsparse.cg(P, bp, rtol=1e-10, M="amg", storage="float32")
    assert i32.converged and i32.storage == "float32", i32
    assert i32.iterations <= i64.iterations * 1.1 + 1
    assert np.linalg.norm(bp - p @ x32) <= 1e-10 * np.linalg.norm(bp) * 1.0001
    # Values that round: the operator keeps float64 (and says why), the hierarchy float32.
    P3 = segsparse.Matrix((p / 3).tocsr(), device="cpu")
    x3, i3 = segsparse.cg(P3, bp, rtol=1e-10, M="amg", storage="float32")
    assert i3.converged and i3.storage == "float64"
    assert "AMG hierarchy is stored in f32" in i3.storage_fallback
    assert i3.iterations <= i64.iterations * 1.1 + 1
    assert np.linalg.norm(bp - (p / 3) @ x3) <= 1e-10 * np.linalg.norm(bp) * 1.0001
    assert P3._m.f32_copies() == 1
