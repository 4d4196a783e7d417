#!/usr/bin/env bash
# One device call of the automatic solve's work, from a stage folder (copied beside this script:
# bin/sparse-solve.xz, tests/test-all.xz, python/*.whl, data/ (the corpus of systems.txt),
# COMMIT, and the harness: python_auto.py, phases.py, systems.txt, variant_summary.py):
#   1. python_auto.py on every system of systems.txt (the goal run, DEADLINE seconds); with
#      $VARIANT (probe options as JSON) one more first call of the default per system under
#      them, summarised by variant_summary.py;
#   2. the GPU tests of the automatic solve (test-all auto_stats:: autosolve::, at most 45 s);
#   3. phases.py, in the time left, on systems whose probe keeps its candidate or escalates
#      (where the first call's time goes).
# Within 210 s; everything lands in $OUT/auto.tgz (written on any exit).
#   bash stage-run.sh [DEADLINE]
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
stamp "python_auto (all systems, variant ${VARIANT:-none})"
timeout $(( ${1:-100} + 20 )) python3 "$S/python_auto.py" --systems "$S/systems.txt" --data "$S/data" \
  --deadline "${1:-100}" ${VARIANT:+--variant "$VARIANT"} --out "$res/python.jsonl" \
  2> "$res/python.err"
echo "  rc=$? $(wc -l < "$res/python.jsonl") lines"; tail -2 "$res/python.err"
if [ -n "${VARIANT:-}" ]; then
  python3 "$S/variant_summary.py" "$res/python.jsonl" | tee "$res/summary.txt" | cut -c1-160
fi
python3 - "$res/python.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "event" in r:
        print(json.dumps(r)[:200])
    elif r.get("choice") == "default" and r.get("call") == "first":
        ph = " ".join(f"{p['name']}={p['seconds'] * 1e3:.2f}" for p in r.get("phases") or [])
        print(f"{r['system']}: {r['method']}+{r['precond']} {r['seconds'] * 1e3:.1f} ms "
              f"{r['iterations']} it | {ph}"[:300])
PY
left=$(( 45 < 190 - ($(date +%s) - start) ? 45 : 190 - ($(date +%s) - start) ))
if [ -x "$S/tests/test-all" ] && [ "$left" -ge 10 ]; then
  stamp "tests (${left} s left)"
  timeout "$left" "$S/tests/test-all" auto_stats:: autosolve:: \
    --test-threads=4 > "$res/tests.log" 2>&1
  echo "  tests rc=$? $(grep -E '^test result' "$res/tests.log" | tail -1)"
  grep -E 'FAILED|panicked' "$res/tests.log" | head -5
fi
if [ "$(( 205 - ($(date +%s) - start) ))" -ge 25 ]; then
  stamp "phases"
  ONLY='elasticity3d:40|poisson3d27|poisson3d:100|convdiff3d:100:100|fem3d:p1:70|raefsky2|jumps3d:80|femelast3d:p2|poisson2d:700'
  left=$(( 205 - ($(date +%s) - start) ))
  timeout "$left" python3 "$S/phases.py" --systems "$S/systems.txt" --data "$S/data" --only "$ONLY" \
    --deadline $(( left - 12 )) --repeat 2 --out "$res/phases.jsonl" \
    2> "$res/phases.err" | cut -c1-400
  echo "  rc=$?"; tail -2 "$res/phases.err"
fi
stamp "done"
