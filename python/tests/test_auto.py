"""The automatic choice from Python: ``auto_choice``, ``solve`` and ``M="auto"``, against the
crate's rules on generated matrices of each kind (CPU; the GPU variants skip without one)."""

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse


def tridiag(k, lo, mid, hi):
    return sp.diags([lo, mid, hi], [-1, 0, 1], shape=(k, k), format="csr")


def poisson(k):
    """The 5-point Laplacian on a k x k grid: SPD, M-matrix signs, constant diagonal."""
    t = tridiag(k, -1.0, 2.0, -1.0)
    return sp.kronsum(t, t, format="csr")


def convection(k, c=0.8):
    """Convection-diffusion with central differences on a k x k grid: unsymmetric, not
    diagonally dominant by a margin (|diag| = sum of |off-diagonals| inside)."""
    t = tridiag(k, -1.0 - c, 2.0, -1.0 + c)
    return sp.kronsum(t, t, format="csr")


def dominant(n):
    """Unsymmetric and strictly diagonally dominant by far."""
    return sp.diags([-1.0, 10.0, 0.5, -2.0], [-1, 0, 1, 3], shape=(n, n), format="csr")


def missing_diagonal(k):
    """``convection(k)`` with its first and last rows swapped: two rows without a diagonal
    entry (not stored at all), which a row matching restores."""
    a = convection(k).tolil()
    n = a.shape[0]
    perm = np.arange(n)
    perm[0], perm[-1] = n - 1, 0
    return sp.csr_matrix(a.tocsr()[perm])


def jumps(k, contrast=1e3):
    """A finite-volume diffusion matrix on a k x k grid with a coefficient jumping by
    ``contrast`` in a square inclusion (Dirichlet boundary): SPD, M-matrix signs, a diagonal
    spread of about ``contrast``."""
    c = np.ones((k, k))
    c[k // 4: 3 * k // 4, k // 4: 3 * k // 4] = contrast
    idx = np.arange(k * k).reshape(k, k)
    rows, cols, vals = [], [], []
    diag = np.zeros(k * k)
    for a_c, b_c, a_i, b_i in ((c[:, :-1], c[:, 1:], idx[:, :-1], idx[:, 1:]),
                               (c[:-1, :], c[1:, :], idx[:-1, :], idx[1:, :])):
        w = (2 * a_c * b_c / (a_c + b_c)).ravel()
        i, j = a_i.ravel(), b_i.ravel()
        rows += [i, j]
        cols += [j, i]
        vals += [-w, -w]
        np.add.at(diag, i, w)
        np.add.at(diag, j, w)
    border = np.zeros((k, k), dtype=bool)
    border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
    diag += np.where(border, c, 0.0).ravel()
    rows.append(np.arange(k * k))
    cols.append(np.arange(k * k))
    vals.append(diag)
    n = k * k
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n, n))


def spd_random(n, seed=0):
    """Random SPD (diagonally dominant) with off-diagonal entries of both signs: CG + Jacobi."""
    r = sp.random(n, n, density=min(1.0, 8 / n), random_state=np.random.default_rng(seed),
                  format="csr")
    r.data -= 0.5
    a = r + r.T
    return (a + sp.diags(np.asarray(abs(a).sum(axis=1)).ravel() + 1.0)).tocsr()


def residual(a, x, b):
    return np.linalg.norm(b - a @ x) / np.linalg.norm(b)


CASES = [
    ("poisson", lambda: poisson(30), "cg", "none"),
    ("spd_random", lambda: spd_random(800), "cg", "jacobi"),
    ("convection", lambda: convection(30), "bicgstab", "none"),
    ("dominant", lambda: dominant(900), "bicgstab", "jacobi"),
    ("missing_diagonal", lambda: missing_diagonal(30), "gmres", "ilu0"),
]


@pytest.mark.parametrize("name,make,method,precond", CASES, ids=[c[0] for c in CASES])
def test_auto_choice_follows_the_rules(name, make, method, precond):
    a = make()
    ch = segsparse.auto_choice(a)
    assert (ch["method"], ch["precond"]) == (method, precond), ch["reason"]
    assert isinstance(ch["reason"], str) and ch["reason"]
    st = ch["stats"]
    assert st["rows"] == a.shape[0] and st["nnz"] == a.nnz
    assert st["symmetric"] == (abs(a - a.T).max() == 0)
    assert (st["asymmetry"] == 0) == st["symmetric"]
    assert st["missing_diagonal"] == int(np.count_nonzero(a.diagonal() == 0))
    if name == "missing_diagonal":
        assert st["missing_diagonal"] == 2 and "row matching" in ch["reason"]
    # A segsparse.Matrix gives the same choice as the SciPy matrix it came from.
    assert segsparse.auto_choice(segsparse.Matrix(a, device="cpu")) == ch


def test_auto_choice_is_deterministic():
    for _, make, _, _ in CASES:
        a = make()
        assert segsparse.auto_choice(a) == segsparse.auto_choice(a.copy())


def test_coefficient_jumps_take_jacobi_cg_and_the_probe_weighs_amg():
    a = jumps(230)  # 52 900 rows: above the probe's threshold
    ch = segsparse.auto_choice(a)
    assert (ch["method"], ch["precond"]) == ("cg", "jacobi"), ch["reason"]
    assert "coefficient jumps" in ch["reason"]
    assert ch["stats"]["diagonal_spread"] >= 100
    b = np.ones(a.shape[0])
    x, info = segsparse.solve(a, b, rtol=1e-8, device="cpu")
    assert info == 0 and info.method == "cg" and info.precond in ("jacobi", "amg"), info.reason
    assert info.choice["probe"] is not None, info.reason
    assert residual(a, x, b) < 1e-7
    if info.precond == "amg":
        # AMG taken: far fewer iterations than plain CG on the same system.
        _, plain = segsparse.cg(a, b, rtol=1e-8, device="cpu")
        assert info.iterations * 4 < plain.iterations


@pytest.mark.parametrize("name,make,method,precond", CASES, ids=[c[0] for c in CASES])
def test_solve_converges_and_reports_its_choice(name, make, method, precond):
    a = make()
    b = np.random.default_rng(1).standard_normal(a.shape[0])
    x, info = segsparse.solve(a, b, rtol=1e-9, device="cpu")
    assert isinstance(info, segsparse.SolveInfo) and isinstance(info, int)
    assert info == 0 and not info and info.converged, info
    assert residual(a, x, b) < 1e-8
    assert (info.method, info.precond) == (method, precond), info.reason
    # The automatic solve's reason starts with the rule's and adds what the probe measured.
    assert info.reason.startswith(segsparse.auto_choice(a)["reason"])
    assert info.choice["method"] == method and info.device == "cpu"
    assert info.choice["tried"] and info.choice["failure"] is None
    assert info.choice["stats"]["rows"] == a.shape[0]
    # The same choice again (from the per-pattern cache where the rule has an alternative).
    x2, info2 = segsparse.solve(a, b, rtol=1e-9, device="cpu")
    assert (info2.method, info2.precond) == (info.method, info.precond)
    assert residual(a, x2, b) < 1e-8


def test_solve_info_stays_scipy_compatible():
    import pickle

    a = convection(20)
    b = np.ones(a.shape[0])
    _, info = segsparse.solve(a, b, maxiter=1, restart=2, rtol=1e-14, device="cpu")
    assert info == 1 and int(info) == info.status and not info.converged
    assert info.precond == info.choice["precond"] and info.reason
    assert info.choice["failure"].startswith("no candidate converged")
    back = pickle.loads(pickle.dumps(info))
    assert back == info and back.reason == info.reason and back.choice == info.choice
    assert f"precond='{info.precond}'" in repr(info)


def test_solve_with_caller_choices():
    a = convection(25)
    b = np.ones(a.shape[0])
    x, info = segsparse.solve(a, b, method="gmres", rtol=1e-9, device="cpu")
    assert info == 0 and info.method == "gmres" and info.precond == "none"
    assert "given by the caller" in info.reason and residual(a, x, b) < 1e-8
    x, info = segsparse.solve(a, b, M="jacobi", rtol=1e-9, device="cpu")
    assert info == 0 and info.method == "bicgstab" and info.precond == "jacobi"
    assert residual(a, x, b) < 1e-8
    x, info = segsparse.solve(a, b, method="gmres", M=None, rtol=1e-9, device="cpu")
    assert info == 0 and info.precond == "none" and info.choice is None
    with pytest.raises(ValueError, match="method"):
        segsparse.solve(a, b, method="lsqr")
    with pytest.raises(ValueError, match="matrix-free"):
        segsparse.solve(segsparse_operator(a), b)


def segsparse_operator(a):
    from scipy.sparse.linalg import aslinearoperator

    return aslinearoperator(a)


@pytest.mark.parametrize("solver", ["cg", "pcg", "bicgstab", "gmres"])
def test_m_auto_for_each_solver(solver):
    fn = getattr(segsparse, solver)
    spd_a = spd_random(600)
    un = missing_diagonal(25)
    for a, want in ((spd_a, "jacobi"), (un, "ilu0")):
        b = np.random.default_rng(3).standard_normal(a.shape[0])
        x, info = fn(a, b, M="auto", rtol=1e-9, maxiter=2000, device="cpu")
        assert info.precond == want and info.reason == segsparse.auto_choice(a)["reason"]
        # CG keeps the solver the caller named on an unsymmetric matrix: converging there is
        # not promised; on the SPD one, and for the general solvers on both, it is.
        if a is spd_a or solver in ("bicgstab", "gmres"):
            assert info == 0, info
            assert residual(a, x, b) < 1e-8
        assert info.method == ("pcg" if solver in ("cg", "pcg") else solver)
    # Case and a Matrix the caller built: the same.
    m = segsparse.Matrix(spd_a, device="cpu")
    b = np.ones(600)
    x, info = fn(m, b, M="AUTO", rtol=1e-9, device="cpu")
    assert info == 0 and info.precond == "jacobi" and residual(spd_a, x, b) < 1e-8


def test_m_auto_on_the_operator_path():
    a = poisson(20)
    b = np.ones(a.shape[0])
    seen = []
    x, info = segsparse.cg(a, b, M="auto", rtol=1e-9, callback=seen.append, device="cpu")
    assert info == 0 and info.precond == "none" and info.path == "crate" and seen
    assert residual(a, x, b) < 1e-8
    seen = []
    x, info = segsparse.gmres(convection(20), b, M="auto", callback=seen.append,
                              callback_type="x", rtol=1e-9, device="cpu")
    assert info == 0 and info.precond == "none" and seen
    with pytest.raises(ValueError, match="matrix-free"):
        segsparse.cg(segsparse_operator(a), b, M="auto")
    with pytest.raises(TypeError, match="matrix"):
        segsparse.auto_choice(segsparse_operator(a))


def test_auto_choice_needs_a_square_matrix():
    with pytest.raises(ValueError, match="square"):
        segsparse.auto_choice(sp.random(5, 4, density=0.5, format="csr"))


@pytest.mark.gpu
@pytest.mark.parametrize("name,make,method,precond", CASES, ids=[c[0] for c in CASES])
def test_solve_auto_gpu_matches_cpu(gpu, name, make, method, precond):
    cp = gpu
    a = make()
    b = np.random.default_rng(2).standard_normal(a.shape[0])
    m = segsparse.Matrix(a, device="gpu")
    # The statistics computed on the device equal the host's.
    assert segsparse.auto_choice(m) == segsparse.auto_choice(a)
    # Each side decides afresh (earlier tests solved these patterns too).
    segsparse.clear_auto_cache()
    xd, info = segsparse.solve(m, cp.asarray(b), rtol=1e-9)
    assert isinstance(xd, cp.ndarray) and info.device == "gpu"
    assert info == 0 and (info.method, info.precond) == (method, precond), info.reason
    assert residual(a, cp.asnumpy(xd), b) < 1e-8
    segsparse.clear_auto_cache()
    _, cpu = segsparse.solve(a, b, rtol=1e-9, device="cpu")
    assert cpu.choice["stats"] == info.choice["stats"]
    assert (cpu.method, cpu.precond) == (info.method, info.precond)


def _cli():
    """The `sparse-solve` binary: $SEGSPARSE_CLI, else the repository's target/ builds."""
    import os
    import pathlib

    env = os.environ.get("SEGSPARSE_CLI")
    if env:
        return env
    root = pathlib.Path(__file__).resolve().parents[2]
    for sub in ("target/release/sparse-solve", "target/debug/sparse-solve",
                ".gpu/bin/sparse-solve"):
        if (root / sub).exists():
            return str(root / sub)
    return None


def saddle(k, stride):
    """``[[K, B^T], [B, 0]]``: the 5-point Laplacian and one averaging constraint per
    ``stride`` nodes (symmetric indefinite, a zero diagonal block)."""
    kk = poisson(k)
    n = kk.shape[0]
    rows = np.arange(0, n - 1, stride)
    m = len(rows)
    b = sp.csr_matrix((np.full(2 * m, 0.5), (np.repeat(np.arange(m), 2),
                                             np.stack([rows, rows + 1], 1).ravel())),
                      shape=(m, n))
    return sp.bmat([[kk, b.T], [b, None]], format="csr")


@pytest.mark.parametrize("make", [lambda: poisson(25), lambda: convection(14),
                                  lambda: saddle(12, 4), lambda: dominant(300)],
                         ids=["poisson", "convection", "saddle", "dominant"])
def test_the_cli_and_python_choose_the_same(tmp_path, make):
    """The three entry points run one body: Python's ``solve`` picks what ``sparse-solve``
    reports in its JSON ``auto`` object on the same matrix (the Rust API's equality with the
    CLI is the crate's test ``auto_stats::the_cli_and_the_rust_api_choose_the_same``)."""
    import json
    import subprocess

    import scipy.io

    exe = _cli()
    if exe is None:
        pytest.skip("no sparse-solve binary (set SEGSPARSE_CLI)")
    a = make()
    f = tmp_path / "a.mtx"
    scipy.io.mmwrite(str(f), a)
    out = subprocess.run([exe, str(f), "--backend", "cpu", "--format", "json", "--rhs", "ones"],
                         capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout.strip().splitlines()[-1])["auto"]
    _, info = segsparse.solve(a, np.ones(a.shape[0]), rtol=1e-8, device="cpu")
    assert (info.choice["method"], info.choice["precond"]) == (cli["method"], cli["precond"])
    assert info.choice["stats"]["symmetric"] == cli["stats"]["symmetric"]


def test_phases_and_probe_options():
    """``info.choice["phases"]``: the statistics and the rule first, every solver call with its
    iterations (adding up to the solve's); ``probe`` as a dictionary changes the probe's
    options, an unknown or invalid one is a ``ValueError``."""
    a = poisson(160)  # 25 600 rows: the CG probe runs
    b = np.random.default_rng(1).standard_normal(a.shape[0])
    segsparse.clear_auto_cache()
    x, info = segsparse.solve(a, b, rtol=1e-8, device="cpu")
    ph = info.choice["phases"]
    assert [p["name"] for p in ph[:2]] == ["statistics", "rule"], ph
    assert any(p["name"].startswith("probe ") for p in ph), ph
    assert sum(p["iterations"] or 0 for p in ph) == info.iterations
    assert all(p["seconds"] >= 0 for p in ph)
    segsparse.clear_auto_cache()
    x, short = segsparse.solve(a, b, rtol=1e-8, device="cpu", probe={"cg_iterations": 10})
    assert short == 0 and residual(a, x, b) < 1e-7
    probe = [p for p in short.choice["phases"] if p["name"].startswith("probe ")]
    assert probe and probe[0]["iterations"] <= 10, short.choice["phases"]
    for bad in ({"cg_iteration": 10}, {"cg_iterations": 0}, {"work_factor": float("nan")}):
        with pytest.raises(ValueError):
            segsparse.solve(a, b, rtol=1e-8, device="cpu", probe=bad)
