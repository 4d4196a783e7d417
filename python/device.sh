#!/usr/bin/env bash
# The Python package on the GPU machine: install the wheel built here, fill the kernel cache
# with `segsparse warm-up` (timed on an empty cache, then again warm), benchmark the upload
# against cupyx, run every pytest (the GPU ones must pass: SEGSPARSE_REQUIRE_GPU=1 turns a
# missing GPU into failures; SciPy's own solver tests run when the SciPy there is the pinned
# 1.17, and are skipped with the reason otherwise) and the older benchmark, and pack the results into one archive under $OUT.
#
# The GPU machine has Python 3.12 with NumPy, SciPy, CuPy and pytest, no Rust and no network, so
# the wheel (abi3, any CPython >= 3.9) is built on the development machine and carried:
#
#   (here)  cd python && maturin build --release --out ../.gpu/python      # or .stage-python/
#   (there, from the repository root)
#           bash python/device.sh [WHEEL_DIR]     # default: .gpu/python, then .stage-python
#
# PYROOT names the folder holding tests/ and bench/ (default python/; a stage carries its own
# copy). CORPUS: a folder of .mtx.gz files for the upload benchmark (default matrices/).
# BENCH=0 skips bench/bench.py. Results: $OUT/python-results.tgz with warmup.json,
# upload.jsonl and upload.md, pytest.log, junit.xml, bench.md and bench.json; the last lines
# of each also go to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d python ] || cd ..   # from a stage folder at the repository root

out=${OUT:-/tmp/segsparse-python-out}
mkdir -p "$out/python"
res=$out/python
py=${PYROOT:-python}
wheel_dir=${1:-}
if [ -z "$wheel_dir" ]; then
    for d in .gpu/python .stage-python; do
        if ls "$d"/segsparse-*.whl >/dev/null 2>&1; then wheel_dir=$d; break; fi
    done
fi
wheel=$(ls "${wheel_dir:-.}"/segsparse-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
    echo "device.sh: no segsparse-*.whl in ${wheel_dir:-.gpu/python or .stage-python}" >&2
    exit 2
fi
echo "wheel: $wheel"

site=/tmp/segsparse-site
rm -rf "$site"
# No index, no dependencies (NumPy/SciPy/CuPy are already there). A wheel is a zip: if pip
# refuses its platform tag, unpacking it is the same install for our purposes.
if ! python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheel"; then
    echo "pip refused the wheel; unpacking it instead"
    python3 -m zipfile -e "$wheel" "$site"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export SEGSPARSE_REQUIRE_GPU=1
export SEGSPARSE_DATA=${SEGSPARSE_DATA:-$PWD/matrices}
python3 -c "import segsparse, scipy; print('segsparse', segsparse.__version__, 'from', segsparse.__file__, 'scipy', scipy.__version__); print('GPU:', segsparse.device_name(), segsparse.gpu_error() or '')" \
    2>&1 | tee "$res/import.log"

# The warm-up command on an empty kernel cache, then again on the filled one.
cache=$(mktemp -d)
wrc=0
for pass in cold warm; do
    t=75; [ "$pass" = warm ] && t=25
    SEGSPARSE_CACHE_DIR=$cache timeout $t python3 -m segsparse warm-up --json \
        >"$res/warmup-$pass.json" 2>"$res/warmup-$pass.err" || wrc=$?
    echo "warm-up ($pass cache): $(cat "$res/warmup-$pass.json")"
done
echo "kernel cache files: $(find "$cache" -type f | wc -l)"

urc=0
corpus=${CORPUS:-matrices}
timeout 100 python3 "$py/bench/upload.py" --json "$res/upload.jsonl" --matrices "$corpus" \
    >"$res/upload.md" 2>&1 || urc=$?
grep -E '^(\||device)' "$res/upload.md" || tail -n 30 "$res/upload.md"
echo "upload bench exit code: $urc"

# A smoke test of the device-side upload; if it is broken, the other tests run on the host
# path (SEGSPARSE_UPLOAD=host) so that they still say something (test_upload.py still fails).
if ! timeout 60 python3 -c "
import numpy as np, scipy.sparse as sp, segsparse
a = (sp.random(3000, 3000, 0.01, format='csr', random_state=1) + sp.eye(3000)).tocsr()
m = segsparse.Matrix(a, device='gpu')
x = np.arange(3000.0)
assert np.allclose(m @ x, a @ x), 'SpMV after the device-side upload differs'
print('device-side upload smoke test: ok', m.upload_seconds)
" 2>&1 | tee "$res/smoke.log"; then
    echo "device-side upload smoke test FAILED: the other tests use SEGSPARSE_UPLOAD=host"
    export SEGSPARSE_UPLOAD=host
fi

rc=0
# This package's newest checks first (a timeout then cuts the older ones).
(cd "$py" && timeout 140 python3 -m pytest -q -rs \
    -p no:cacheprovider tests/test_upload.py tests/test_contract.py tests/scipy_contract \
    tests/test_warmup.py tests/test_gpu.py tests/test_reliability.py tests/test_cpu.py \
    --junitxml="$res/junit.xml") >"$res/pytest.log" 2>&1 || rc=$?
tail -n 25 "$res/pytest.log"
echo "pytest exit code: $rc"

brc=0
if [ "${BENCH:-1}" != 0 ]; then
    timeout 150 python3 "$py/bench/bench.py" --raefsky2 matrices/raefsky2.mtx.gz \
        --json "$res/bench.json" >"$res/bench.md" 2>&1 || brc=$?
    grep -E '^(\||device)' "$res/bench.md" || tail -n 30 "$res/bench.md"
    echo "bench exit code: $brc"
fi

tar -czf "$out/python-results.tgz" -C "$out" python && rm -rf "$res"
echo "results: $out/python-results.tgz"
[ "$rc" -eq 0 ] && [ "$brc" -eq 0 ] && [ "$urc" -eq 0 ] && [ "$wrc" -eq 0 ]
