"""``segsparse.warmup()`` and ``python -m segsparse warm-up``: the kernel disk cache filled."""

import json
import os
import subprocess
import sys

import pytest

import segsparse


def test_warmup_without_gpu_says_so():
    if segsparse.gpu_available():
        pytest.skip("a GPU works here")
    with pytest.raises(segsparse.CudaUnavailableError):
        segsparse.warmup()
    r = subprocess.run([sys.executable, "-m", "segsparse", "warm-up"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "no GPU" in r.stderr


def test_warmup_rejects_unknown_parts():
    if not segsparse.gpu_available():
        pytest.skip("no GPU")
    with pytest.raises(ValueError, match="unknown warm-up parts"):
        segsparse.warmup(parts=["nope"])


@pytest.mark.gpu
def test_warmup_command_fills_an_empty_cache(gpu, tmp_path):
    # SEGSPARSE_PREBUILT=0: a wheel with the embedded kernel archive loads its modules from
    # there and compiles (and caches) nothing; the cache is what a build without one fills.
    env = dict(os.environ, SEGSPARSE_CACHE_DIR=str(tmp_path), SEGSPARSE_PREBUILT="0")
    env.pop("SEGSPARSE_KERNEL_CACHE", None)
    r = subprocess.run([sys.executable, "-m", "segsparse", "warm-up", "--json",
                        "--dtypes", "float64", "--parts", "upload,spmv,solvers"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["cache_dir"] == str(tmp_path)
    assert {"float64/upload", "float64/spmv", "float64/solvers"} <= set(out["seconds"])
    files = [f for _, _, fs in os.walk(tmp_path) for f in fs]
    assert len(files) >= 3, files


@pytest.mark.gpu
def test_warmup_command_with_the_embedded_archive_succeeds(gpu, tmp_path):
    env = dict(os.environ, SEGSPARSE_CACHE_DIR=str(tmp_path))
    env.pop("SEGSPARSE_PREBUILT", None)
    env.pop("SEGSPARSE_KERNEL_CACHE", None)
    r = subprocess.run([sys.executable, "-m", "segsparse", "warm-up", "--json",
                        "--dtypes", "float64", "--parts", "spmv"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "float64/spmv" in json.loads(r.stdout)["seconds"]
