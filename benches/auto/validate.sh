#!/usr/bin/env bash
# The automatic solve's validation in one device call, fitted and held out:
#   1. the GPU tests of the automatic solve (statistics CPU = GPU, the entry points agree);
#   2. the harness (run.py) on the kinds marked `fit`: the default and every explicit choice;
#   3. fit_model.py on those rows alone -> model.json;
#   4. the harness on the `held-out` kinds with the default run under --auto-model model.json;
#   5. Python: python_auto.py (segsparse.solve from CuPy and SciPy, first and second call on a
#      pattern, beside the explicit choices) and python/tests/test_auto.py on the GPU.
# Run from a folder holding bin/sparse-solve, tests/test-all, data/, python/*.whl,
# python-tests/test_auto.py and the harness files beside this script:
#   bash validate.sh [BUDGET_FIT] [BUDGET_HELD] [DEADLINE]
# Each step gets what is left of DEADLINE seconds (default 270) so that the archive is written
# before the device call's limit. Everything lands in one archive, $OUT/auto.tgz.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
S=${STAGE:-$here}
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/auto.tgz" -C "$res" . 2>/dev/null; rm -rf "$res"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$S/data" RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
cat "$S/COMMIT" >> "$res/device.txt" 2>/dev/null
start=$(date +%s)
deadline=$(( start + ${3:-270} ))
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
# left RESERVE MAX: the seconds a step may take, keeping RESERVE for the steps after it (0: none).
left() { local l=$(( deadline - $(date +%s) - $1 )); [ "$l" -gt 5 ] && echo $(( l < $2 ? l : $2 )) || echo 0; }
FIT='^(poisson|jumps|convdiff2d|kkt|aniso|elasticity|graph-geo|corpus) '
HELD='^(fem-p1|fem-p2|fem-vector|convdiff3d|stokes|graph-power|circuit|shifted) '

if [ -x "$S/tests/test-all" ]; then
  stamp "tests"
  timeout 45 "$S/tests/test-all" auto_stats:: autosolve:: --test-threads=4 > "$res/tests.log" 2>&1
  echo "  tests rc=$? $(grep -E '^test result' "$res/tests.log" | tail -1)"
  grep -E 'FAILED|panicked' "$res/tests.log" | head -5
fi

run() {  # run.py with the common arguments
  python3 "$here/run.py" --bin "$S/bin/sparse-solve" --backend gpu --data "$S/data" \
    --cap 12 --system-cap 20 "$@"
}
stamp "harness: fit kinds"
run --only "$FIT" --out "$res/raw-fit.jsonl" --warmup --budget "${1:-80}" > "$res/run-fit.log" 2>&1
grep -v warm-up "$res/run-fit.log" | cut -c1-400
python3 "$here/fit_model.py" "$res/raw-fit.jsonl" --json "$res/model.json" > "$res/fit.log" 2>&1
echo "  fit rc=$?"; cat "$res/model.json" 2>/dev/null || echo '{}' > "$res/model.json"

stamp "harness: held-out kinds, the default with the fitted model"
run --only "$HELD" --out "$res/raw-held.jsonl" --budget "${2:-70}" \
  --default-args "--auto-model $res/model.json" > "$res/run-held.log" 2>&1
cut -c1-400 "$res/run-held.log"

stamp "python"
if ls "$S"/python/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-deps --target /tmp/site "$S"/python/*.whl > "$res/pip.log" 2>&1
  export PYTHONPATH=/tmp/site
  t=$(left 25 70)
  [ "$t" -gt 0 ] && { timeout "$t" python3 "$here/python_auto.py" > "$res/python.jsonl" 2> "$res/python.err"
    echo "  python rc=$? $(wc -l < "$res/python.jsonl") rows"; tail -3 "$res/python.err"
    cut -c1-300 "$res/python.jsonl"; }
  t=$(left 0 30)
  [ "$t" -gt 0 ] && { SEGSPARSE_CLI="$S/bin/sparse-solve" timeout "$t" python3 -m pytest -q -x \
    -p no:cacheprovider "$S/python-tests/test_auto.py" > "$res/pytest.log" 2>&1
    echo "  pytest rc=$? $(tail -1 "$res/pytest.log")"; }
fi
stamp "done"
