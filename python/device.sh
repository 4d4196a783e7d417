#!/usr/bin/env bash
# The Python package on the GPU machine: install the wheel built here, run every pytest (the
# GPU ones must pass: SEGSPARSE_REQUIRE_GPU=1 turns a missing GPU into failures) and the
# benchmark, and pack the results into one archive under $OUT. About 2 minutes.
#
# The GPU machine has Python 3.12 with NumPy, SciPy, CuPy and pytest, no Rust and no network, so
# the wheel (abi3, any CPython >= 3.9) is built on the development machine and carried:
#
#   (here)  cd python && maturin build --release --out ../.gpu/python      # or .stage-python/
#   (there, from the repository root)
#           bash python/device.sh [WHEEL_DIR]     # default: .gpu/python, then .stage-python
#
# Results: $OUT/python-results.tgz with pytest.log, junit.xml, bench.md (the table) and
# bench.json; the last lines of each also go to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."

out=${OUT:-/tmp/segsparse-python-out}
mkdir -p "$out/python"
res=$out/python
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
python3 -c "import segsparse; print('segsparse', segsparse.__version__, 'from', segsparse.__file__); print('GPU:', segsparse.device_name(), segsparse.gpu_error() or '')" \
    2>&1 | tee "$res/import.log"

rc=0
(cd python && timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests \
    --junitxml="$res/junit.xml") >"$res/pytest.log" 2>&1 || rc=$?
tail -n 25 "$res/pytest.log"
echo "pytest exit code: $rc"

brc=0
timeout 150 python3 python/bench/bench.py --raefsky2 matrices/raefsky2.mtx.gz \
    --json "$res/bench.json" >"$res/bench.md" 2>&1 || brc=$?
grep -E '^(\||device)' "$res/bench.md" || tail -n 30 "$res/bench.md"
echo "bench exit code: $brc"

tar -czf "$out/python-results.tgz" -C "$out" python && rm -rf "$res"
echo "results: $out/python-results.tgz"
[ "$rc" -eq 0 ] && [ "$brc" -eq 0 ]
