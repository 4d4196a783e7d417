#!/usr/bin/env bash
# The AMG entry points on the GPU machine: the GPU tests of the setup (Rust and Python), the
# first and later setups of a fresh process phase by phase (with and without the memory-pool
# reservation, with eager module loading, with the module-load log), and every problem through
# `sparse-solve` and through Python (SciPy and CuPy matrices) against plain CG.
#
# From a stage folder holding bin/sparse-solve and (optionally) tests/test-all (release builds
# with the kernel archive embedded), wheel/segsparse-*.whl, pytests/ (python/tests) and
# entry_points.py (this folder's), run:   bash entry.sh [tests] [first] [cli] [python] [call2]
# Writes $OUT/amg-entry.tgz; prints one line per run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
# RES: where the logs go (default a new temporary folder), packed into $OUT at the end.
res=${RES:-$(mktemp -d)}; mkdir -p "$res"; trap 'tar czf "${OUT:-/tmp}/amg-entry.tgz" -C "$res" .' EXIT
modes=${*:-tests first cli python}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
S=$here/bin/sparse-solve
export SEGSPARSE_CLI=$S
site=/tmp/segsparse-site
python3 -m pip install -q --no-index --no-deps --target "$site" "$here"/wheel/segsparse-*.whl \
  || python3 -m zipfile -e "$here"/wheel/segsparse-*.whl "$site"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
cli() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  timeout 120 $S "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  local rc=$?
  python3 - "$name" "$res/$name.json" "$rc" <<'PY'
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception:
    print(f"{name} rc={rc} (no JSON)"); sys.exit()
s = d.get("amg_setup_seconds_all") or []
a = d.get("amg") or {}
ph = a.get("setup") or {}
ph = {k: round(v * 1e3, 2) for k, v in ph.items() if v}
print(f"{name} rc={rc} it={d.get('iterations')} setups_ms={[round(x * 1e3, 1) for x in s]} "
      f"resetups_ms={[round(x * 1e3, 1) for x in d.get('amg_resetup_seconds_all') or []]} "
      f"solve={d.get('solve_seconds')} setup={d.get('setup_seconds')} levels={len(a.get('levels', []))} "
      f"oc={a.get('operator_complexity')} phases_ms={ph}")
PY
}
py() { # name args...
  local name=$1; shift
  timeout 150 python3 "$here/entry_points.py" "$@" > "$res/$name.jsonl" 2> "$res/$name.err"
  echo "$name rc=$? $(tail -c 1500 "$res/$name.jsonl")"
}
for mode in $modes; do
  case $mode in
  tests)
    if [ -x "$here/tests/test-all" ]; then
      timeout 200 "$here/tests/test-all" amg::gpu --test-threads=1 > "$res/tests.log" 2>&1
      echo "rust tests rc=$? $(grep 'test result' "$res/tests.log")"
      grep -E "panicked|FAILED" -A5 "$res/tests.log" | head -30
    fi
    (cd "$here" && SEGSPARSE_REQUIRE_CLI=1 timeout 240 python3 -m pytest -q pytests/test_amg_gpu.py \
       pytests/test_gpu.py pytests/test_cpu.py -k "amg" -p no:cacheprovider > "$res/pytest.log" 2>&1)
    echo "pytest rc=$? $(tail -1 "$res/pytest.log")"
    grep -E "Error|assert|FAILED" "$res/pytest.log" | head -20 ;;
  first)
    # A fresh process each: the first setup against the second and third, phase by phase.
    cli f1-phases poisson3d:128 --precond amg --amg-setups 1 --amg-phase-times
    cli f3-phases poisson3d:128 --precond amg --amg-setups 3 --amg-phase-times
    cli f-default poisson3d:128 --precond amg --amg-setups 3
    SEGSPARSE_POOL_RESERVE=0 cli f-noreserve poisson3d:128 --precond amg --amg-setups 3
    CUDA_MODULE_LOADING=EAGER cli f-eager poisson3d:128 --precond amg --amg-setups 3
    SEGSPARSE_KERNEL_LOG=1 cli f-log poisson3d:128 --precond amg --amg-setups 2
    grep -E "module" "$res/f-log.err" | head -40 ;;
  cli)
    for p in "p128 poisson3d:128" "p160 poisson3d:160" "p256 poisson3d:256" \
             "p27 poisson3d27:110" "e70 elasticity3d:70"; do
      set -- $p
      cli "$1-amg" "$2" --method cg --precond amg --amg-setups 3 --amg-resetups 3
      cli "$1-cg" "$2" --method cg --precond none
    done
    cli p200-amg poisson3d:200 --method cg --precond amg --amg-setups 2 --amg-resetups 3
    cli e70-phases elasticity3d:70 --method cg --precond amg --amg-setups 2 --amg-phase-times
    cli p27-phases poisson3d27:110 --method cg --precond amg --amg-setups 2 --amg-phase-times ;;
  call2)
    # The second call: the same problems through both front ends in one call, the new kinds.
    cli f1-phases poisson3d:128 --precond amg --amg-setups 1 --amg-phase-times
    SEGSPARSE_KERNEL_LOG=1 cli f-log poisson3d:128 --precond amg --amg-setups 3
    grep -E "module" "$res/f-log.err" | head -40
    py py-p128-scipy poisson3d:128 scipy
    py py-p128-cupy poisson3d:128 cupy
    py py-p27-scipy poisson3d27:110 scipy
    py py-a96-scipy aniso3d:96:0.001 scipy
    py py-fem2-scipy fem3d:p2:36 scipy
    py py-e70-scipy elasticity3d:70 scipy
    for p in "p128 poisson3d:128" "p27 poisson3d27:110" "a96 aniso3d:96:0.001" "fem2 fem3d:p2:36" \
             "e70 elasticity3d:70"; do
      set -- $p
      cli "$1-amg" "$2" --method cg --precond amg --amg-setups 3 --amg-resetups 3
      cli "$1-cg" "$2" --method cg --precond none
    done
    cli p160-amg poisson3d:160 --method cg --precond amg --amg-setups 3
    cli fem2-phases fem3d:p2:36 --method cg --precond amg --amg-setups 2 --amg-phase-times ;;
  python)
    py py-p128-scipy poisson3d:128 scipy
    py py-p128-cupy poisson3d:128 cupy
    py py-p160-scipy poisson3d:160 scipy
    py py-p27-scipy poisson3d27:110 scipy
    py py-e70-scipy elasticity3d:70 scipy
    py py-a96-scipy aniso3d:96:0.001 scipy
    py py-fem2-scipy fem3d:p2:36 scipy ;;
  esac
done
