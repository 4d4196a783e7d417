#!/usr/bin/env bash
# One device call of the automatic solve from a stage folder (beside this script:
# bin/sparse-solve.xz, tests/test-all.xz, python/*.whl, data/ (the corpus of systems.txt),
# COMMIT, and the harness python_auto.py, systems.txt, variant_summary.py):
#   1. python_auto.py on every system of systems.txt (the goal run, DEADLINE seconds), with one
#      more first call of the default per system under the probe options $VARIANT (JSON);
#   2. the GPU tests of the automatic solve (test-all auto_stats:: autosolve::), in the time left;
#   3. amg_window.py (AMG-CG's residual from zero and from the CG probe's iterate), if time is left.
# Within 180 s; everything lands in $OUT/auto.tgz (written on any exit).
#   bash mid-run.sh [DEADLINE]
set -uo pipefail
S=$(cd "$(dirname "$0")" && pwd)
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/auto.tgz" -C "$res" . 2>/dev/null; rm -rf "$res"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$S/data" RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
cat "$S/COMMIT" | tee -a "$res/device.txt"
for f in bin/sparse-solve tests/test-all; do
  [ -f "$S/$f.xz" ] && { xz -dkf "$S/$f.xz" && chmod +x "$S/$f"; }
done
python3 -m pip install -q --no-deps --target /tmp/site-auto "$S"/python/*.whl > "$res/pip.log" 2>&1
export PYTHONPATH=/tmp/site-auto
python3 -c "import segsparse; print('segsparse', segsparse.device_name())" 2>&1 | tail -1
stamp "python_auto (variant ${VARIANT:-none})"
timeout $(( ${1:-110} + 20 )) python3 "$S/python_auto.py" --systems "$S/systems.txt" --data "$S/data" \
  --deadline "${1:-110}" ${ONLY:+--only "$ONLY"} ${VARIANT:+--variant "$VARIANT"} \
  --out "$res/python.jsonl" 2> "$res/python.err"
echo "  rc=$? $(wc -l < "$res/python.jsonl") lines"; tail -2 "$res/python.err"
python3 "$S/variant_summary.py" "$res/python.jsonl" | tee "$res/summary.txt" | cut -c1-160
left=$(( 40 < 172 - ($(date +%s) - start) ? 40 : 172 - ($(date +%s) - start) ))
if [ -x "$S/tests/test-all" ] && [ "$left" -ge 8 ]; then
  stamp "tests (${left} s left)"
  timeout "$left" "$S/tests/test-all" auto_stats:: autosolve:: --test-threads=4 > "$res/tests.log" 2>&1
  echo "  tests rc=$? $(grep -E '^test result' "$res/tests.log" | tail -1)"
  grep -E 'FAILED|panicked' "$res/tests.log" | head -5
fi
left=$(( 176 - ($(date +%s) - start) ))
if [ -f "$S/amg_window.py" ] && [ "$left" -ge 8 ]; then
  stamp "amg_window (${left} s left)"
  timeout "$left" python3 "$S/amg_window.py" aniso2d:700:0.001 femelast3d:p2:16@jacobi \
    jumps3d:80@jacobi circuit:500000@jacobi 2>&1 | tee "$res/amg_window.txt" | cut -c1-230
fi
stamp "done"
