#!/usr/bin/env bash
# The goal run of the automatic solve in one device call (issue: the default within 1.2× of the
# fastest explicit choice on >= 30 systems of >= 12 kinds, half the kinds held out of the fit):
#   1. python_auto.py: every system of systems.txt (those matching $ONLY, a regular expression on
#      'KIND SPEC', when set) in one Python worker process, the default against every sensible
#      explicit choice, from the matrix on the device (DEADLINE seconds); every call under a
#      guard: a call that overruns it (a setup that runs away) is killed, recorded as capped,
#      and a new worker goes on at the next choice;
#   2. same_choice.py: the CLI (the Rust API) and Python on a few systems, on the GPU;
#   3. the GPU tests of the automatic solve, where tests/test-all is staged;
#   4. python/tests/test_auto.py (the CLI and Python choose the same, CPU backend).
# Run from a folder holding bin/sparse-solve, python/*.whl (or python/segsparse/), data/, COMMIT, the harness files
# beside this script and optionally tests/test-all and python-tests/test_auto.py:
#   bash goal.sh [DEADLINE]
# Everything lands in one archive, $OUT/auto.tgz.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
S=${STAGE:-$here}
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/auto.tgz" -C "$res" . 2>/dev/null; rm -rf "$res"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$S/data" RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
cat "$S/COMMIT" >> "$res/device.txt" 2>/dev/null
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
# The package: a wheel, or the package folder (python/segsparse with its _core extension).
if ls "$S"/python/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-deps --target /tmp/site "$S"/python/*.whl > "$res/pip.log" 2>&1
  export PYTHONPATH=/tmp/site
else
  export PYTHONPATH="$S/python"
fi
python3 -c "import segsparse; print('segsparse', segsparse.__file__, segsparse.device_name())"
stamp "python_auto"
timeout $(( ${1:-380} + 30 )) python3 "$here/python_auto.py" --systems "$here/systems.txt" \
  --data "$S/data" --deadline "${1:-380}" ${ONLY:+--only "$ONLY"} --out "$res/python.jsonl" \
  2> "$res/python.err"
echo "  rc=$? $(wc -l < "$res/python.jsonl") lines"; tail -3 "$res/python.err"
python3 - "$res/python.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("choice") == "default" and r.get("call") == "first" or "event" in r:
        print(json.dumps({k: r.get(k) for k in ("system", "method", "precond", "seconds",
              "converged", "iterations", "event", "skipped")})[:300])
PY
stamp "same choice"
timeout 60 python3 "$here/same_choice.py" --bin "$S/bin/sparse-solve" fem3d:p2:35 \
  convdiff3d:100:100 kkt2d:600:36000 powerlap:500000:2.5 > "$res/same.jsonl" 2> "$res/same.err"
echo "  rc=$?"; cut -c1-200 "$res/same.jsonl"; tail -2 "$res/same.err"
if [ -x "$S/tests/test-all" ]; then
  stamp "tests"
  timeout 150 "$S/tests/test-all" auto_stats:: autosolve:: ilu:: --test-threads=4 > "$res/tests.log" 2>&1
  echo "  tests rc=$? $(grep -E '^test result' "$res/tests.log" | tail -1)"
  grep -E 'FAILED|panicked' "$res/tests.log" | head -5
fi
if [ -f "$S/python-tests/test_auto.py" ]; then
  stamp "pytest"
  SEGSPARSE_CLI="$S/bin/sparse-solve" timeout 40 python3 -m pytest -q -x -p no:cacheprovider \
    "$S/python-tests/test_auto.py" > "$res/pytest.log" 2>&1
  echo "  pytest rc=$? $(tail -1 "$res/pytest.log")"
fi
stamp "done"
