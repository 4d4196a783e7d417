"""The GPU upload path (one copy through pinned staging, checks and conversions on the device):
the same matrices and the same error messages as the host path, from NumPy and from CuPy."""

import numpy as np
import pytest
import scipy.sparse as sp

import segsparse


def base():
    return sp.csr_matrix(np.array([
        [1.0, 0, 2, 0, 0, 0, 0, 0],
        [0, 3.0, 0, 0, 0, 0, 0, 4],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [5.0, 0, 0, 0, 6, 0, 0, 0],
    ]))


def corrupt(kind, idx_dtype=np.int32):
    a = base()
    indptr = a.indptr.astype(idx_dtype)
    indices = a.indices.astype(idx_dtype)
    data = a.data.copy()
    if kind == "column":
        indices[3] = 9
    elif kind == "negative":
        indices[1] = -1
    elif kind == "decreasing":
        indptr[2] = 1
    elif kind == "first":
        indptr[0] = 1
    elif kind == "last":
        indptr[-1] = 5
    elif kind == "indptr-range":
        indptr[1] = -3
    return indptr, indices, data


KINDS = {
    "column": "column index 9 at entry 3 (row 1) is out of range for 8 columns",
    "negative": "indices: index -1 is outside the 32-bit unsigned range",
    "decreasing": "row_ptr decreases at row 1",
    "first": "row_ptr[0] = 1 (must be 0)",
    "last": "row_ptr[4] = 5 but there are 6 entries",
    "indptr-range": "indptr: index -3 is outside the 32-bit unsigned range",
}


def raw(device, parts, shape=(4, 8)):
    indptr, indices, data = parts
    return segsparse._core._Matrix(shape[0], shape[1], indptr, indices, data, device)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_host_path_messages(kind):
    with pytest.raises(ValueError) as e:
        raw("cpu", corrupt(kind))
    assert KINDS[kind] in str(e.value)


@pytest.mark.gpu
@pytest.mark.parametrize("idx", [np.int32, np.int64])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_gpu_path_gives_the_host_messages(gpu, kind, idx):
    with pytest.raises(ValueError) as cpu_err:
        raw("cpu", corrupt(kind, idx))
    with pytest.raises(ValueError) as gpu_err:
        raw("gpu", corrupt(kind, idx))
    assert str(gpu_err.value) == str(cpu_err.value)
    assert KINDS[kind] in str(gpu_err.value)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["column", "negative", "decreasing"])
def test_cupy_input_gives_the_same_messages(gpu, kind):
    cp = gpu
    import cupyx.scipy.sparse as csp

    indptr, indices, data = corrupt(kind)
    good = csp.csr_matrix(base())
    good.indptr[...] = cp.asarray(indptr)
    good.indices[...] = cp.asarray(indices)
    with pytest.raises(ValueError) as e:
        segsparse.Matrix(good, device="gpu")
    assert KINDS[kind] in str(e.value)


@pytest.mark.gpu
def test_nan_policy_is_unchanged(gpu):
    a = sp.csr_matrix(sp.eye(5) * 2.0)
    a.data[2] = np.nan
    m = segsparse.Matrix(a, device="gpu")
    x, info = segsparse.cg(m, np.ones(5))
    assert info == -2 and info.iterations == 0


@pytest.mark.gpu
@pytest.mark.parametrize("idx", [np.int32, np.uint32, np.int64])
@pytest.mark.parametrize("src,dst", [(np.float64, np.float64), (np.float32, np.float64),
                                     (np.float64, np.float32), (np.float32, np.float32)])
def test_types_converted_on_the_device(gpu, idx, src, dst):
    rng = np.random.default_rng(5)
    # 3.2 M entries: the values span several staging chunks; unsorted columns and duplicates
    # stay accepted.
    a = sp.random(200_000, 150_000, density=16 / 150_000, format="csr", random_state=rng,
                  dtype=np.float64)
    a.indices[:2] = a.indices[:2][::-1].copy()
    a = sp.csr_matrix((a.data.astype(src), a.indices.astype(idx), a.indptr.astype(idx)),
                      shape=a.shape)
    m = segsparse.Matrix(a, dtype=dst, device="gpu", reuse_buffers=True)
    assert m.device == "gpu" and m.dtype == dst and m.nnz == a.nnz
    t = m.upload_seconds
    assert set(t) == {"staging", "copy", "check", "tables", "total"}
    assert 0 < t["copy"] <= t["total"]
    x = rng.standard_normal(a.shape[1]).astype(dst)
    ref = a.astype(np.float64) @ x.astype(np.float64)
    tol = 1e-4 if np.float32 in (src, dst) else 1e-11
    np.testing.assert_allclose(m @ x, ref, rtol=tol, atol=tol * np.abs(ref).max())
    assert segsparse.release_upload_buffers() == 32 << 20  # kept by reuse_buffers=True
    assert segsparse.release_upload_buffers() == 0
    back = m.to_scipy()  # the host copy, downloaded on demand
    assert (back.indices == a.indices).all() and (back.indptr == a.indptr).all()
    np.testing.assert_array_equal(back.data, a.data.astype(dst))


@pytest.mark.gpu
def test_empty_and_rowless_matrices(gpu):
    for shape in [(0, 0), (5, 3), (3, 0)]:
        a = sp.csr_matrix(shape)
        m = segsparse.Matrix(a, device="gpu")
        assert m.nnz == 0 and m.shape == shape
        if shape[0]:
            np.testing.assert_array_equal(m @ np.ones(shape[1]), np.zeros(shape[0]))
