"""Several right-hand sides (a 2-D b) and batched_solve, against one-column solves and SciPy
(CPU; the GPU variants run under SEGSPARSE_REQUIRE_GPU=1)."""

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse


def poisson2d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.identity(m)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def convection(m, c=0.5):
    t = sp.diags([-1.0 - c, 2.0, -1.0 + c], [-1, 0, 1], shape=(m, m))
    i = sp.identity(m)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def block(n, k, seed=3):
    return np.random.default_rng(seed).uniform(-1, 1, (n, k))


@pytest.mark.parametrize("solver,M,spd", [
    (segsparse.cg, None, True), (segsparse.cg, "amg", True), (segsparse.pcg, "jacobi", True),
    (segsparse.cg, "ic0", True), (segsparse.bicgstab, "ilu0", False),
    (segsparse.gmres, None, False), (segsparse.gmres, "ilu0", False),
])
def test_block_columns_equal_one_column_solves(solver, M, spd):
    A = poisson2d(20) if spd else convection(20)
    m = segsparse.Matrix(A, device="cpu")
    B = block(A.shape[0], 4)
    X, infos = solver(m, B, M=M, rtol=1e-9)
    assert X.shape == B.shape and isinstance(X, np.ndarray)
    assert len(infos) == 4
    for j in range(4):
        x, info = solver(m, B[:, j].copy(), M=M, rtol=1e-9)
        assert infos[j] == 0 and infos[j].converged
        assert infos[j].iterations == info.iterations
        np.testing.assert_allclose(X[:, j], x, rtol=1e-12, atol=1e-14)
        assert np.linalg.norm(A @ X[:, j] - B[:, j]) <= 1e-8 * np.linalg.norm(B[:, j])


def test_zero_and_nan_columns_alone():
    A = poisson2d(16)
    B = block(A.shape[0], 3)
    B[:, 1] = 0.0
    B[5, 2] = np.nan
    X, infos = segsparse.cg(A, B, rtol=1e-9, device="cpu")
    assert infos[0] == 0 and infos[0].iterations > 0
    assert infos[1] == 0 and infos[1].iterations == 0 and not X[:, 1].any()
    assert infos[2] != 0 and not infos[2].converged


def test_block_bad_shapes():
    A = poisson2d(8)
    n = A.shape[0]
    with pytest.raises(ValueError, match="3-D"):
        segsparse.cg(A, np.ones((n, 2, 2)), device="cpu")
    with pytest.raises(ValueError, match="rows"):
        segsparse.cg(A, np.ones((n + 1, 2)), device="cpu")
    with pytest.raises(ValueError, match="k >= 1"):
        segsparse.gmres(A, np.ones((n, 0)), device="cpu")
    with pytest.raises(ValueError, match="x0 has shape"):
        segsparse.cg(A, np.ones((n, 2)), x0=np.zeros((n, 3)), device="cpu")
    # (n, 1) stays SciPy's column vector: a 1-D solution and one SolveInfo.
    x, info = segsparse.cg(A, np.ones((n, 1)), device="cpu")
    assert x.shape == (n,) and info == 0


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
def test_batched_solve_matches_scipy(method):
    rng = np.random.default_rng(5)
    sizes = [5, 17, 33, 64]
    As = [poisson2d(int(np.sqrt(n))) if int(np.sqrt(n)) ** 2 == n else
          sp.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(n, n)).tocsr() for n in sizes]
    bs = [rng.uniform(-1, 1, a.shape[0]) for a in As]
    x, info = segsparse.batched_solve(As, bs, method=method, rtol=1e-10, device="cpu")
    assert info["converged"].all() and info["device"] == "cpu"
    assert len(info["status"]) == len(As) and (info["iterations"] > 0).all()
    for a, b, xs in zip(As, bs, x):
        np.testing.assert_allclose(xs, sp.linalg.spsolve(a.tocsc(), b), rtol=1e-7, atol=1e-9)
    # The concatenated form and a reusable Batch give the same solutions.
    batch = segsparse.Batch(As)
    xc, info2 = segsparse.batched_solve(batch, np.concatenate(bs), method=method, rtol=1e-10,
                                        device="cpu")
    np.testing.assert_allclose(xc, np.concatenate(x), rtol=0, atol=0)
    assert (info2["iterations"] == info["iterations"]).all()


def test_batched_solve_statuses_and_errors():
    a = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(6, 6)).tocsr()
    z = a.tolil()
    z[2, 2] = 0.0
    b = [np.ones(6), np.ones(6), np.full(6, np.nan)]
    x, info = segsparse.batched_solve([a, z.tocsr(), a], b, device="cpu")
    assert info["status"] == ["converged", "zero_diagonal", "non_finite"]
    with pytest.raises(ValueError, match="square"):
        segsparse.batched_solve([sp.random(3, 4, density=0.5)], [np.ones(3)], device="cpu")
    with pytest.raises(ValueError, match="2 right-hand sides for 1 systems"):
        segsparse.batched_solve([a], [np.ones(6), np.ones(6)], device="cpu")
    with pytest.raises(ValueError, match="rows in all"):
        segsparse.batched_solve([a], np.ones(7), device="cpu")
    with pytest.raises(ValueError, match="restart"):
        segsparse.batched_solve([a], [np.ones(6)], method="gmres", restart=100, device="cpu")


@pytest.mark.gpu
def test_gpu_block_and_batched(gpu):
    cp = gpu
    A = poisson2d(30)
    m = segsparse.Matrix(A, device="gpu")
    B = block(A.shape[0], 5)
    X, infos = segsparse.cg(m, cp.asarray(B), M="amg", rtol=1e-9)
    assert isinstance(X, cp.ndarray) and X.shape == B.shape
    Xh = cp.asnumpy(X)
    for j in range(5):
        assert infos[j] == 0
        assert np.linalg.norm(A @ Xh[:, j] - B[:, j]) <= 1e-8 * np.linalg.norm(B[:, j])
    As = [poisson2d(8) for _ in range(50)]
    x, info = segsparse.batched_solve(As, cp.ones(64 * 50), device="gpu")
    assert info["device"] == "gpu" and info["converged"].all() and isinstance(x, cp.ndarray)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
def test_gpu_block_of_cupy_columns_moves_no_copy(gpu, order):
    """A 2-D CuPy ``b`` with a GPU matrix is solved on the device: no host copy of ``B`` or
    ``X`` crosses the bus (only the per-iteration scalars), for row- and column-major ``B``."""
    cp = gpu
    from segsparse import _core

    A = poisson2d(150)  # 22 500 rows: the block is 1.4 MB, the scalars read back far less
    n, k = A.shape[0], 8
    m = segsparse.Matrix(A, device="gpu")
    B = cp.asarray(block(n, k), order=order)
    # The first call loads the kernels and builds the matrix's Jacobi (its diagonal is read
    # back once and the inverse uploaded: n values each way, kept with the matrix).
    segsparse.cg(m, B, rtol=1e-9, M="jacobi")
    before = _core.transfer_bytes()
    X, infos = segsparse.cg(m, B, rtol=1e-9, M="jacobi")
    after = _core.transfer_bytes()
    up, down = after[0] - before[0], after[1] - before[1]
    assert isinstance(X, cp.ndarray) and X.shape == (n, k)
    assert X.flags.f_contiguous if order == "F" else X.flags.c_contiguous
    assert up + down < n * k * 8 // 4, (up, down, n * k * 8)
    Xh, Bh = cp.asnumpy(X), cp.asnumpy(B)
    for j in range(k):
        assert infos[j].converged, infos[j]
        assert np.linalg.norm(A @ Xh[:, j] - Bh[:, j]) <= 1e-8 * np.linalg.norm(Bh[:, j])
    # The same columns one at a time (CuPy vectors) reach the same answers.
    for j in (0, k - 1):
        x1, _ = segsparse.cg(m, cp.ascontiguousarray(B[:, j]), rtol=1e-9, M="jacobi")
        np.testing.assert_allclose(Xh[:, j], cp.asnumpy(x1), rtol=1e-6, atol=1e-10)
    # An initial guess on the device is taken as given: the solution converges at once.
    X2, infos2 = segsparse.cg(m, B, x0=X, rtol=1e-6, M="jacobi")
    assert all(i.iterations <= 1 for i in infos2), [i.iterations for i in infos2]
