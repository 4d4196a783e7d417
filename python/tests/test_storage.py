"""Storage narrower than the working precision from Python: ``storage="f32-vectors"`` (CG's
recurrence in float32 under a float64 iterate and true residuals), and the automatic solve's
storage choice in ``info.choice["storage"]``. Every answer is checked here against the float64
matrix with SciPy. The GPU tests are marked ``gpu`` (skipped without a device, failed under
SEGSPARSE_REQUIRE_GPU=1)."""

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse


def poisson3d(n, scale=1.0):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    i = sp.eye(n)
    a = sp.kron(sp.kron(t, i), i) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(i, i), t)
    return (a * scale).tocsr()


def true_rel(a, b, x):
    return np.linalg.norm(b - a @ x) / np.linalg.norm(b)


@pytest.mark.parametrize("M", [None, "jacobi"])
@pytest.mark.parametrize("scale", [1.0, 1.0 / 3.0])
def test_f32_vectors_cg_meets_the_float64_tolerance(M, scale):
    a = poisson3d(12, scale)
    b = np.ones(a.shape[0])
    x, info = segsparse.cg(a, b, rtol=1e-10, M=M, device="cpu", storage="f32-vectors")
    assert info == 0 and info.storage == "f32-vectors" and info.storage_fallback is None
    assert true_rel(a, b, x) <= 1e-10 * 1.0001
    x64, info64 = segsparse.cg(a, b, rtol=1e-10, M=M, device="cpu")
    assert info64 == 0 and info.iterations <= 2 * info64.iterations + 10


def test_f32_vectors_where_the_values_do_not_fit_solve_in_float64():
    a = poisson3d(6, 1e39)
    b = np.ones(a.shape[0])
    x, info = segsparse.cg(a, b, rtol=1e-10, device="cpu", storage="f32-vectors")
    assert info == 0 and info.storage == "float64"
    assert "beyond f32's range" in info.storage_fallback
    assert true_rel(a, b, x) <= 1e-10 * 1.0001


def test_f32_vectors_is_refused_where_it_does_not_apply():
    a = poisson3d(6)
    b = np.ones(a.shape[0])
    with pytest.raises(ValueError, match="f32-vectors"):
        segsparse.cg(a, b, M="ic0", device="cpu", storage="f32-vectors")
    with pytest.raises(ValueError, match="f32-vectors"):
        segsparse.bicgstab(a, b, device="cpu", storage="f32-vectors")
    with pytest.raises(ValueError, match="f32-vectors"):
        segsparse.cg(a.astype(np.complex128), b.astype(np.complex128), device="cpu",
                     storage="f32-vectors")
    with pytest.raises(ValueError, match="storage must be"):
        segsparse.cg(a, b, device="cpu", storage="f16")


def test_solve_takes_f32_vectors_where_cg_is_chosen():
    a = poisson3d(10)
    b = np.ones(a.shape[0])
    x, info = segsparse.solve(a, b, rtol=1e-9, device="cpu", storage="f32-vectors")
    assert info == 0 and info.method in ("cg", "pcg") and info.storage == "f32-vectors"
    assert true_rel(a, b, x) <= 1e-9 * 1.0001


def test_the_automatic_solve_reports_its_storage():
    a = poisson3d(10)
    b = np.ones(a.shape[0])
    x, info = segsparse.solve(a, b, rtol=1e-9, device="cpu")
    s = info.choice["storage"]
    assert set(s) == {"values", "hierarchy", "reason", "fallback"}
    # 1 000 rows: far below the threshold, f64.
    assert s["values"] == "f64" and "fewer than" in s["reason"], s
    x, info = segsparse.solve(a, b, rtol=1e-9, device="cpu", storage="float64")
    assert info.choice["storage"]["values"] == "f64"
    assert "asked for" in info.choice["storage"]["reason"]
    assert true_rel(a, b, x) <= 1e-9 * 1.0001
    with pytest.raises(ValueError, match="storage"):
        segsparse.solve(a, b, device="cpu", storage="bf16")


@pytest.mark.gpu
@pytest.mark.parametrize("M", [None, "jacobi"])
def test_gpu_f32_vectors_cg(gpu, M):
    a = poisson3d(24, 1.0 / 3.0)
    b = np.ones(a.shape[0])
    m = segsparse.Matrix(a, device="gpu")
    x, info = segsparse.cg(m, b, rtol=1e-10, M=M, storage="f32-vectors")
    assert info == 0 and info.device == "gpu" and info.storage == "f32-vectors"
    assert true_rel(a, b, x) <= 1e-10 * 1.0001


@pytest.mark.gpu
def test_gpu_automatic_solve_reports_its_storage(gpu):
    a = poisson3d(24)
    b = np.ones(a.shape[0])
    x, info = segsparse.solve(segsparse.Matrix(a, device="gpu"), b, rtol=1e-9)
    s = info.choice["storage"]
    assert s["values"] == "f64" and s["fallback"] is None, s
    assert true_rel(a, b, x) <= 1e-9 * 1.0001


@pytest.mark.gpu
@pytest.mark.parametrize("M", [None, "amg"])
@pytest.mark.parametrize("scale", [1.0, 1.0 / 3.0])
def test_gpu_float32_storage_is_made_on_the_device(gpu, M, scale):
    """``storage="float32"`` on a matrix that lives on the GPU checks and rounds its values
    there: no host copy is made, and neither the matrix nor its f32 copy crosses the bus (the
    vectors do: the stored-values solve takes host vectors)."""
    cp = gpu
    import cupyx.scipy.sparse as csp
    from segsparse import _core

    a = poisson3d(40, scale)
    m = segsparse.Matrix(csp.csr_matrix(a), device="gpu")
    b = np.ones(a.shape[0])
    matrix_bytes = a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
    before = _core.transfer_bytes()
    x, info = segsparse.cg(m, b, rtol=1e-9, M=M, storage="float32")
    after = _core.transfer_bytes()
    up, down = after[0] - before[0], after[1] - before[1]
    assert info == 0 and info.device == "gpu", info
    if M is None:
        assert info.storage == "float32" and info.storage_fallback is None, info
    assert true_rel(a, b, x) <= 1e-9 * 1.0001
    assert not m._m.has_host_copy()
    assert up < matrix_bytes // 2 and down < matrix_bytes // 2, (up, down, matrix_bytes)
