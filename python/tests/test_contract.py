"""SciPy's solver contract, our own checks (SciPy's own tests run in tests/scipy_contract/):
``info`` is SciPy's integer, ``M`` any operator, callbacks once per iteration, ``x0='Mb'``,
GMRES's ``maxiter`` in cycles, ``b = 0``, ``atol`` errors, breakdowns, matrix-free ``A``."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import segsparse

SOLVERS = [segsparse.cg, segsparse.bicgstab, segsparse.gmres]


def poisson1d(n):
    return sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr")


def poisson2d(n):
    t = poisson1d(n)
    i = sp.identity(n)
    return (sp.kron(t, i) + sp.kron(i, t)).tocsr()


def unsym(n):
    return sp.diags([-1.0, 3.0, -0.5], [-1, 0, 1], shape=(n, n), format="csr")


@pytest.mark.parametrize("solver", SOLVERS)
def test_info_is_scipys_integer(solver):
    a = poisson2d(12)
    b = np.ones(a.shape[0])
    x, info = solver(a, b, rtol=1e-10, device="cpu")
    assert info == 0 and not (info != 0) and int(info) == 0 and not info
    assert isinstance(info, int) and ["ok", "fail"][info] == "ok"
    assert info.converged and info.status == 0 and info.iterations > 0
    assert np.linalg.norm(a @ x - b) <= 1e-9 * np.linalg.norm(b)
    info2 = pickle.loads(pickle.dumps(info))
    assert info2 == 0 and info2.iterations == info.iterations
    kw = {"restart": 3} if solver is segsparse.gmres else {}  # GMRES: maxiter counts cycles
    x, info = solver(a, b, rtol=1e-14, maxiter=2, device="cpu", **kw)
    assert info == 2 and info != 0 and info and not info.converged


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kind", ["linop", "dense", "sparse", "callable"])
def test_python_preconditioner_on_numpy(solver, kind):
    a = poisson2d(10)
    n = a.shape[0]
    d = a.diagonal()
    calls = []

    def jac(r):
        calls.append(1)
        return r / d

    M = {
        "linop": spla.LinearOperator((n, n), matvec=jac, dtype=np.float64),
        "dense": np.diag(1 / d),
        "sparse": sp.diags(1 / d).tocsr(),
        "callable": jac,
    }[kind]
    b = np.arange(n, dtype=np.float64)
    x, info = solver(a, b, M=M, rtol=1e-10, device="cpu")
    # A matrix A with a Python M and no callback: the crate's solver body calls M back.
    assert info == 0 and info.path == "crate"
    assert np.linalg.norm(a @ x - b) <= 1e-10 * np.linalg.norm(b)
    if kind in ("linop", "callable"):
        assert len(calls) > 0
    ref, _ = segsparse.cg(a, b, M="jacobi", rtol=1e-10, device="cpu") if solver is segsparse.cg \
        else (x, 0)
    np.testing.assert_allclose(x, ref, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("solver", [segsparse.cg, segsparse.bicgstab])
def test_callback_once_per_iteration(solver):
    a = poisson2d(10)
    b = np.ones(a.shape[0])
    seen = []
    x, info = solver(a, b, rtol=1e-8, callback=lambda xk: seen.append(xk.copy()), device="cpu")
    assert info == 0 and len(seen) == info.iterations > 0
    np.testing.assert_array_equal(seen[-1], x)
    x, info = solver(a, b, rtol=1e-14, maxiter=3, callback=lambda xk: seen.append(1))
    assert info == 3


@pytest.mark.parametrize("solver", SOLVERS)
def test_callback_runs_the_crate_body_with_scipys_iterates(solver):
    a = poisson2d(12) if solver is segsparse.cg else unsym(150)
    b = np.linspace(1.0, 2.0, a.shape[0])
    kw = {"callback_type": "x", "restart": 7} if solver is segsparse.gmres else {}
    ours, ref = [], []
    x, info = solver(a, b, rtol=1e-10, callback=lambda xk: ours.append(xk.copy()),
                     device="cpu", **kw)
    ref_solver = getattr(spla, solver.__name__)
    xr, _ = ref_solver(a, b, rtol=1e-10, callback=lambda xk: ref.append(xk.copy()), **kw)
    assert info == 0 and info.path == "crate"
    np.testing.assert_array_equal(ours[-1], x)
    # The same iterates as SciPy's (the first ones, before rounding separates the two).
    k = min(5, len(ours), len(ref))
    assert k >= 3 and abs(len(ours) - len(ref)) <= 2, (len(ours), len(ref))
    for u, v in zip(ours[:k], ref[:k]):
        np.testing.assert_allclose(u, v, rtol=1e-7, atol=1e-9 * np.abs(v).max())


@pytest.mark.parametrize("solver", SOLVERS)
def test_callback_exception_propagates_from_the_crate_body(solver):
    class Stop(Exception):
        pass

    calls = []

    def cb(xk):
        calls.append(1)
        if len(calls) == 2:
            raise Stop("from the callback")

    kw = {"callback_type": "pr_norm"} if solver is segsparse.gmres else {}
    with pytest.raises(Stop, match="from the callback"):
        solver(poisson2d(10), np.ones(100), rtol=1e-12, callback=cb, device="cpu", **kw)
    assert len(calls) == 2


def test_gmres_callback_types():
    a = unsym(60)
    b = np.ones(60)
    res, xs = [], []
    x, info = segsparse.gmres(a, b, rtol=1e-10, restart=5, callback=res.append,
                              callback_type="pr_norm", device="cpu")
    assert info == 0 and len(res) == info.iterations and all(isinstance(r, float) for r in res)
    x2, info2 = segsparse.gmres(a, b, rtol=1e-10, restart=5, callback=xs.append,
                                callback_type="x", device="cpu")
    assert info2 == 0 and len(xs) == -(-info2.iterations // 5)  # one per restart cycle
    with pytest.warns(DeprecationWarning, match="callback_type"):
        segsparse.gmres(a, b, callback=res.append, maxiter=1, device="cpu")
    with pytest.raises(ValueError, match="callback_type"):
        segsparse.gmres(a, b, callback=res.append, callback_type="nope")


def test_gmres_maxiter_counts_restart_cycles():
    a = unsym(200)
    b = np.ones(200)
    for path in ({}, {"callback": lambda r: None, "callback_type": "pr_norm"}):
        x, info = segsparse.gmres(a, b, rtol=1e-14, restart=5, maxiter=2, device="cpu", **path)
        assert info == 2 and info.iterations == 10, (path, info)
    ref, _ = spla.gmres(a, b, rtol=1e-14, restart=5, maxiter=2)
    np.testing.assert_allclose(x, ref, rtol=1e-8)


@pytest.mark.parametrize("solver", SOLVERS)
def test_zero_rhs_and_x0_mb(solver):
    a = poisson2d(8)
    n = a.shape[0]
    for x0 in (None, np.ones(n)):
        x, info = solver(a, np.zeros(n), x0=x0, device="cpu")
        assert info == 0 and not x.any()
    b = np.arange(n, dtype=float)
    for M in (None, "jacobi", spla.aslinearoperator(sp.diags(1 / a.diagonal()))):
        x, info = solver(a, b, x0="Mb", M=M, rtol=1e-10, device="cpu")
        assert info == 0 and np.linalg.norm(a @ x - b) <= 1e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("atol", ["legacy", None, -1, "abc", float("nan")])
def test_bad_atol_is_a_value_error(solver, atol):
    with pytest.raises(ValueError, match="atol"):
        solver(poisson1d(5), np.ones(5), atol=atol, device="cpu")


def test_gmres_singular_matrix_returns_least_squares_iterate():
    A = np.array([[0.0, 1, 0], [1, 0, 0], [0, 0, 0]])
    b = np.array([1.0, 0, 1])
    x, info = segsparse.gmres(A, b, rtol=1e-8, atol=0, device="cpu")
    assert info != 0 and not np.isnan(x).any()
    np.testing.assert_allclose(A @ (A @ x), A @ b)


@pytest.mark.parametrize("solver", SOLVERS)
def test_matrix_free_operator(solver):
    a = poisson2d(9)
    n = a.shape[0]
    count = [0]

    def mv(v):
        count[0] += 1
        return a @ v

    A = spla.LinearOperator((n, n), matvec=mv, dtype=np.float64)
    b = np.ones(n)
    x, info = solver(A, b, rtol=1e-10)
    assert info == 0 and count[0] > 0
    assert np.linalg.norm(a @ x - b) <= 1e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("solver", SOLVERS)
def test_matrix_free_operator_runs_the_crate_body(solver):
    a = unsym(80) if solver is not segsparse.cg else poisson2d(9)
    n = a.shape[0]
    seen = []
    A = spla.LinearOperator((n, n), matvec=lambda v: a @ v, dtype=np.float64)
    kw = {"callback_type": "x"} if solver is segsparse.gmres else {}
    x, info = solver(A, np.ones(n), rtol=1e-10, M=lambda r: r / a.diagonal(),
                     callback=seen.append, **kw)
    assert info == 0 and info.path == "crate" and info.device == "cpu" and len(seen) >= 1
    assert np.linalg.norm(a @ x - 1) <= 1e-10 * np.sqrt(n)

    class Boom(Exception):
        pass

    def bad(v):
        raise Boom("from matvec")

    with pytest.raises(Boom, match="from matvec"):
        solver(spla.LinearOperator((n, n), matvec=bad, dtype=np.float64), np.ones(n))
    class Short:  # anything with matvec and shape; returns one element too few
        shape, dtype = (n, n), np.dtype(np.float64)

        def matvec(self, v):
            return v[:-1]

    with pytest.raises(ValueError, match="elements"):
        solver(Short(), np.ones(n))
    a32 = a.astype(np.float32)
    A32 = spla.LinearOperator((n, n), matvec=lambda v: a32 @ v, dtype=np.float32)
    x, info = solver(A32, np.ones(n, dtype=np.float32), rtol=1e-4)
    assert info == 0 and info.path == "crate" and x.dtype == np.float32


def test_float32_operator_path_keeps_dtype():
    a = poisson2d(8).astype(np.float32)
    b = np.ones(a.shape[0], dtype=np.float32)
    x, info = segsparse.cg(a, b, rtol=1e-4, M=lambda r: r, device="cpu")
    assert info == 0 and x.dtype == np.float32


# --- on the GPU: CuPy vectors, operators on the host and on the device ----------------------

@pytest.mark.gpu
@pytest.mark.parametrize("solver", SOLVERS)
def test_operator_preconditioner_with_cupy(gpu, solver):
    # The crate's body on the GPU matrix calls M back (a host round trip each), with and
    # without a callback.
    cp = gpu
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cspla

    a = poisson2d(16)
    n = a.shape[0]
    d = a.diagonal()
    m = segsparse.Matrix(a, device="gpu")
    b = cp.asarray(np.arange(n, dtype=np.float64))
    dd = cp.asarray(d)
    Ms = [
        spla.LinearOperator((n, n), matvec=lambda r: r / d, dtype=np.float64),  # host
        cspla.LinearOperator((n, n), matvec=lambda r: r / dd, dtype=np.float64),  # device
        csp.diags(1 / dd).tocsr(),  # cupyx sparse
        lambda r: r / dd,  # a callable on the iteration's (CuPy) vectors
    ]
    for M in Ms:
        for with_callback in (False, True):
            seen = []
            cb = {}
            if with_callback:
                cb["callback"] = lambda xk: seen.append(1)
                if solver is segsparse.gmres:
                    cb["callback_type"] = "x"
            x, info = solver(m, b, M=M, rtol=1e-10, **cb)
            assert isinstance(x, cp.ndarray) and info == 0 and info.path == "crate"
            assert info.device == "gpu"
            r = a @ cp.asnumpy(x) - cp.asnumpy(b)
            assert np.linalg.norm(r) <= 1e-9 * np.linalg.norm(cp.asnumpy(b))
            assert (len(seen) >= 1) == with_callback


@pytest.mark.gpu
def test_matrix_free_cupy_operator(gpu):
    cp = gpu
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cspla

    a = poisson2d(12)
    ad = csp.csr_matrix(a)
    n = a.shape[0]
    A = cspla.LinearOperator((n, n), matvec=lambda v: ad @ v, dtype=np.float64)
    b = cp.ones(n)
    for solver in SOLVERS:
        x, info = solver(A, b, rtol=1e-10)
        assert isinstance(x, cp.ndarray) and info == 0
        assert float(cp.linalg.norm(ad @ x - b)) <= 1e-9 * float(cp.linalg.norm(b))


@pytest.mark.gpu
def test_info_zero_on_gpu_crate_path(gpu):
    cp = gpu
    a = poisson2d(30)
    m = segsparse.Matrix(a, device="gpu")
    for solver in SOLVERS:
        x, info = solver(m, cp.ones(a.shape[0]), rtol=1e-8)
        assert info == 0 and info.path == "crate" and info.device == "gpu"
        x, info = solver(m, cp.zeros(a.shape[0]), x0=cp.ones(a.shape[0]))
        assert info == 0 and not bool(x.any())


@pytest.mark.parametrize("solver", SOLVERS)
def test_python_preconditioner_errors_propagate(solver):
    a = poisson2d(8)

    class Boom(Exception):
        pass

    def bad(r):
        raise Boom("from M")

    with pytest.raises(Boom, match="from M"):
        solver(a, np.ones(a.shape[0]), M=bad, device="cpu")
    with pytest.raises(ValueError, match="elements"):
        solver(a, np.ones(a.shape[0]), M=lambda r: r[:-1], device="cpu")


def test_python_preconditioner_float32_and_x0_mb():
    a = poisson2d(10).astype(np.float32)
    n = a.shape[0]
    d = a.diagonal()
    b = np.ones(n, dtype=np.float32)
    M = spla.LinearOperator((n, n), matvec=lambda r: r / d, dtype=np.float32)
    x, info = segsparse.cg(a, b, M=M, x0="Mb", rtol=1e-5, device="cpu")
    assert info == 0 and info.path == "crate" and x.dtype == np.float32
    assert np.linalg.norm(a @ x - b) <= 1e-4 * np.linalg.norm(b)
