"""The AMG setup from Python on the GPU: built on the device from the matrix's device copy (as
`sparse-solve` and `Amg::from_matrix` do), with no copy of the matrix crossing the bus, and the
same hierarchy as the CPU's and the command line's.

Marked ``gpu``: skipped without a working GPU, failed under SEGSPARSE_REQUIRE_GPU=1 (see
conftest.py). The comparison with `sparse-solve` needs its binary: ``SEGSPARSE_CLI`` names it
(else ``.gpu/bin/sparse-solve`` and ``target/release/sparse-solve`` are tried); without one that
test is skipped with the reason, and it fails instead under ``SEGSPARSE_REQUIRE_CLI=1``.
"""

import json
import os
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse
from segsparse import _core

pytestmark = pytest.mark.gpu


def poisson3d(n, dtype=np.float64):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.identity(n)
    a = sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)
    return a.tocsr().astype(dtype)


def elasticity2d_like(n):
    """A 2-unknowns-per-node SPD matrix (two coupled Laplacians) and its two constant modes."""
    lap = poisson3d(n)
    k = sp.kron(lap, sp.csr_matrix(np.array([[2.0, 0.5], [0.5, 2.0]]))).tocsr()
    m = k.shape[0]
    modes = np.zeros((m, 2))
    modes[0::2, 0] = 1.0
    modes[1::2, 1] = 1.0
    return k, modes


def matrix_bytes(a):
    return a.nnz * (4 + a.dtype.itemsize) + (a.shape[0] + 1) * 4


def allowed_bytes(ml, k, n, setups):
    """What a setup from a device matrix may move: the candidates up, the coarsest level down
    and its dense inverse up, a few scalars; per setup."""
    rows, nnz = ml.levels[-1]
    return setups * ((rows * rows + nnz) * 12 + (64 << 10)) + k * n * 8


def close(x, y, what, rtol=1e-10):
    assert x.shape == y.shape, what
    np.testing.assert_array_equal(x.indptr, y.indptr, err_msg=f"{what}: row pointers")
    np.testing.assert_array_equal(x.indices, y.indices, err_msg=f"{what}: columns")
    scale = max(abs(y.data).max(), 1e-300)
    np.testing.assert_allclose(x.data, y.data, rtol=0, atol=rtol * scale, err_msg=what)


@pytest.mark.parametrize("source", ["scipy", "cupy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_amg_setup_and_update_move_no_copy_of_the_matrix(gpu, source, dtype):
    cp = gpu
    import cupyx.scipy.sparse as csp

    a = poisson3d(40, dtype)  # 64 000 rows, 438 400 entries
    a2 = (a * dtype(3.0)).tocsr()
    wrap = (lambda x: x) if source == "scipy" else csp.csr_matrix
    M, M2 = segsparse.Matrix(wrap(a), device="gpu"), segsparse.Matrix(wrap(a2), device="gpu")
    before = _core.transfer_bytes()
    ml = segsparse.amg(M, coarse_size=50)
    ml.update(M2)
    after = _core.transfer_bytes()
    up, down = after[0] - before[0], after[1] - before[1]
    allowed = allowed_bytes(ml, 0, a.shape[0], 2)
    assert allowed < matrix_bytes(a) // 4, "the bound must be meaningful"
    assert up <= allowed and down <= allowed, (up, down, allowed, matrix_bytes(a))
    # The hierarchy is that of the new values, and it solves.
    fresh = segsparse.amg(M2, coarse_size=50)
    for l, (x, y) in enumerate(zip(ml.level_matrices(), fresh.level_matrices())):
        close(x, y, f"level {l} after update", 1e-5 if dtype == np.float32 else 1e-12)
    b = cp.asarray(a2 @ np.ones(a.shape[0], dtype=dtype))
    x, info = ml.solve(b, rtol=1e-6 if dtype == np.float64 else 1e-4)
    assert info.converged and info.iterations <= 20, info
    # Neither matrix was given a host copy (the default upload keeps none).
    assert not M._m.has_host_copy() and not M2._m.has_host_copy()
    del x


def test_amg_solve_route_builds_on_the_device(gpu):
    """``M="amg"`` builds its hierarchy from the device copy too."""
    cp = gpu
    import cupyx.scipy.sparse as csp

    a = poisson3d(60)
    M = segsparse.Matrix(csp.csr_matrix(a), device="gpu")
    b = cp.asarray(a @ np.ones(a.shape[0]))
    segsparse.cg(M, b, rtol=1e-8, M="amg")  # the first call also loads kernels
    before = _core.transfer_bytes()
    x, info = segsparse.cg(M, b, rtol=1e-8, M="amg")
    after = _core.transfer_bytes()
    assert info.converged and info.iterations <= 20, info
    moved = (after[0] - before[0]) + (after[1] - before[1])
    assert moved < matrix_bytes(a) // 4, moved
    assert not M._m.has_host_copy()
    np.testing.assert_allclose(cp.asnumpy(x), 1.0, rtol=1e-6)


def test_amg_gpu_hierarchy_equals_cpu_with_candidates_and_unsorted_rows(gpu):
    """The GPU hierarchy (from SciPy and from CuPy) equals the CPU one: levels, operators to
    rounding, ρ; with candidates and blocks; and from a matrix whose rows are unsorted."""
    import cupyx.scipy.sparse as csp

    for a, cand, block in [(poisson3d(24), None, 1), (*elasticity2d_like(14), 2)]:
        kw = dict(candidates=cand, block_size=block)
        ref = segsparse.amg(a, device="cpu", **kw)
        ref_mats = ref.level_matrices()
        # Rows stored backwards: not canonical; sorted on the device.
        rev = a.copy()
        for i in range(rev.shape[0]):
            s, e = rev.indptr[i], rev.indptr[i + 1]
            rev.indices[s:e] = rev.indices[s:e][::-1].copy()
            rev.data[s:e] = rev.data[s:e][::-1].copy()
        rev.has_sorted_indices = False
        for name, src in [("scipy", a), ("cupy", csp.csr_matrix(a)), ("unsorted", rev)]:
            ml = segsparse.amg(segsparse.Matrix(src, device="gpu"), **kw)
            assert ml.levels == ref.levels, name
            for l, (x, y) in enumerate(zip(ml.level_matrices(), ref_mats)):
                close(x, y, f"{name}: level {l}", 1e-11)
            np.testing.assert_allclose(ml.rhos, ref.rhos, rtol=1e-10, err_msg=name)


def cli_binary():
    for p in (os.environ.get("SEGSPARSE_CLI"), ".gpu/bin/sparse-solve",
              "target/release/sparse-solve", "../target/release/sparse-solve"):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    why = "no sparse-solve binary (set SEGSPARSE_CLI)"
    if os.environ.get("SEGSPARSE_REQUIRE_CLI") == "1":
        pytest.fail(why)
    pytest.skip(why)


def test_amg_python_hierarchy_equals_the_command_lines(gpu, tmp_path):
    """Python's hierarchy of a matrix equals `sparse-solve`'s of the same matrix file: the same
    levels (rows, entries) and ρ of every level to rounding."""
    cli = cli_binary()
    a = poisson3d(30)
    path = str(tmp_path / "p30.mtx")
    segsparse.save_matrix_market(path, a)
    out = subprocess.run([cli, path, "--backend", "gpu", "--method", "cg", "--precond", "amg",
                          "--format", "json", "--rhs", "ones"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    levels = [(lv["rows"], lv["nnz"]) for lv in d["amg"]["levels"]]
    rhos = [lv["rho"] for lv in d["amg"]["levels"]]
    for src in (a, segsparse.load_matrix_market(path)):
        ml = segsparse.amg(segsparse.Matrix(src, device="gpu"))
        assert ml.levels == levels
        np.testing.assert_allclose(ml.rhos, rhos, rtol=1e-12)
