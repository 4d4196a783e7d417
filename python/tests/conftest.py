import os

import pytest

import segsparse


def pytest_collection_modifyitems(config, items):
    """GPU tests skip without a working GPU, and fail instead under SEGSPARSE_REQUIRE_GPU=1
    (the GPU machine), so they never pass silently there."""
    if segsparse.gpu_available():
        return
    if os.environ.get("SEGSPARSE_REQUIRE_GPU") == "1":
        return  # the `gpu` fixture fails each of them with the reason
    skip = pytest.mark.skip(reason=f"no GPU: {segsparse.gpu_error()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gpu():
    if not segsparse.gpu_available():
        pytest.fail(f"SEGSPARSE_REQUIRE_GPU=1 but no GPU: {segsparse.gpu_error()}")
    cp = pytest.importorskip("cupy") if os.environ.get("SEGSPARSE_REQUIRE_GPU") != "1" else __import__("cupy")
    return cp


def matrices_dir():
    """The repository's matrices/ (tests run from the repo root or from python/)."""
    for base in (os.getcwd(), os.path.dirname(__file__)):
        for up in (".", "..", "../.."):
            d = os.path.normpath(os.path.join(base, up, "matrices"))
            if os.path.isdir(d):
                return d
    return None
