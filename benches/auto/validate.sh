#!/usr/bin/env bash
# The automatic solve's validation in one device call, fitted and held out:
#   1. the GPU tests of the automatic solve (and compute-sanitizer memcheck of the statistics
#      kernel);
#   2. the harness (run.py) on the kinds marked `fit`: the default and every explicit choice;
#   3. fit_model.py on those rows alone -> model.json;
#   4. the harness on the `held-out` kinds with the default run under --auto-model model.json,
#      and the fit kinds' default again under it (their explicit rows come from step 2, the same
#      call);
#   5. Python: python_auto.py (segsparse.solve from CuPy and SciPy, first and second call) and
#      the GPU tests of python/tests/test_auto.py.
# Run from a folder holding bin/sparse-solve, tests/test-all, data/, python/*.whl and the
# harness files beside this script:   bash validate.sh [BUDGET_FIT] [BUDGET_HELD]
# Everything lands in one archive, $OUT/auto.tgz.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
S=${STAGE:-$here}
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/auto.tgz" -C "$res" . 2>/dev/null; rm -rf "$res"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$S/data" RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
cat "$S/COMMIT" >> "$res/device.txt" 2>/dev/null
device=$(head -1 "$res/device.txt" | cut -d, -f1)
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
FIT='^(poisson|jumps|convdiff2d|kkt|aniso|elasticity|graph-geo|corpus) '
HELD='^(fem-p1|fem-p2|fem-vector|convdiff3d|stokes|graph-power|circuit|shifted) '

stamp "tests"
timeout 120 "$S/tests/test-all" auto_stats:: autosolve:: --test-threads=4 > "$res/tests.log" 2>&1
echo "  tests rc=$? $(grep -E '^test result' "$res/tests.log" | tail -1)"
grep -E 'FAILED|panicked' "$res/tests.log" | head -5
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$S/tests/test-all" \
  auto_stats::gpu_statistics_equal_the_cpu_ones --test-threads=1 > "$res/memcheck.log" 2>&1
echo "  memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck.log" | tail -1)"

run() {  # run.py with the common arguments
  python3 "$here/run.py" --bin "$S/bin/sparse-solve" --backend gpu --data "$S/data" "$@"
}
stamp "harness: fit kinds"
run --only "$FIT" --out "$res/raw-fit.jsonl" --warmup --budget "${1:-100}" > "$res/run-fit.log" 2>&1
tail -n +1 "$res/run-fit.log" | grep -v warm-up | cut -c1-400
python3 "$here/fit_model.py" "$res/raw-fit.jsonl" --json "$res/model.json" > "$res/fit.log" 2>&1
echo "  fit rc=$?"; cat "$res/model.json" 2>/dev/null || echo '{}' > "$res/model.json"

stamp "harness: held-out kinds, the default with the fitted model"
run --only "$HELD" --out "$res/raw-held.jsonl" --budget "${2:-100}" \
  --default-args "--auto-model $res/model.json" > "$res/run-held.log" 2>&1
cut -c1-400 "$res/run-held.log"
stamp "harness: fit kinds, the default again with the fitted model"
run --only "$FIT" --out "$res/raw-fit-default.jsonl" --budget 40 --choices default \
  --default-args "--auto-model $res/model.json" > "$res/run-fit-default.log" 2>&1
cut -c1-300 "$res/run-fit-default.log"

stamp "python"
if ls "$S"/python/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-deps --target /tmp/site "$S"/python/*.whl > "$res/pip.log" 2>&1
  export PYTHONPATH=/tmp/site
  timeout 90 python3 "$here/python_auto.py" > "$res/python.jsonl" 2> "$res/python.err"
  echo "  python rc=$? $(wc -l < "$res/python.jsonl") rows"; tail -3 "$res/python.err"
  SEGSPARSE_CLI="$S/bin/sparse-solve" timeout 90 python3 -m pytest -q -x "$S/python-tests/test_auto.py" \
    > "$res/pytest.log" 2>&1
  echo "  pytest rc=$? $(tail -1 "$res/pytest.log")"
fi
stamp "done"
