#!/usr/bin/env bash
# AMG iteration levers by time to solution on the GPU (issue 40, "iterations <= PyAMG + 20 %"):
# the library's defaults against candidate settings selected by sparse-solve's --amg-* flags,
# one binary, one call, plain CG beside each problem (benches/results/amg.md §7). On the GPU
# machine, from a folder holding this script, the release `sparse-solve` (scripts/gpu-stage
# --only bin:sparse-solve) and its COMMIT:
#   bash levers.sh         (at most ~115 s: no run starts after $BUDGET s, default 85; each ≤ 30 s)
# Writes $OUT/amgit/amgit.tgz (one JSON per run, stderr, device.txt) and $OUT/amgit/summary.txt.
set -uo pipefail
export RUST_BACKTRACE=1
here=$(cd "$(dirname "$0")" && pwd)
S=${SPARSE_SOLVE:-$here/sparse-solve}
out="${OUT:-/tmp}/amgit"; mkdir -p "$out"
res=$(mktemp -d)
trap 'cp "$res/summary.txt" "$out/" 2>/dev/null; tar czf "$out/amgit.tgz" -C "$res" .' EXIT
start=$(date +%s); budget=${BUDGET:-85}
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader; nproc; date -u;
  echo "commit $(cat "$here/COMMIT" 2>/dev/null)"; } | tee "$res/device.txt"
run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  if [ $(( $(date +%s) - start )) -ge "$budget" ]; then echo "$name skipped (budget)" | tee -a "$res/summary.txt"; return; fi
  timeout 30 "$S" "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  local rc=$?
  python3 - "$name" "$res/$name.json" "$rc" <<'PY' | tee -a "$res/summary.txt"
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception:
    print(f"{name} rc={rc} (no JSON)"); sys.exit()
s = d.get("amg_setup_seconds_all") or []
r = d.get("amg_resetup_seconds_all") or []
a = d.get("amg") or {}
ph = (a.get("setup") or {})
print(f"{name} rc={rc} it={d.get('iterations')} conv={d.get('converged')} "
      f"setup_ms={[round(1e3 * x, 2) for x in s]} resetup_ms={[round(1e3 * x, 2) for x in r]} "
      f"solve_ms={round(1e3 * (d.get('solve_seconds') or 0), 2)} levels={len(a.get('levels', []))} "
      f"oc={round(a.get('operator_complexity') or 0, 3)} "
      f"agg_ms={round(1e3 * ph.get('aggregate', 0), 2)} cand_ms={round(1e3 * ph.get('candidates', 0), 2)}")
PY
}
amg="--precond amg --amg-setups 3 --amg-resetups 2"
# Kernels whose source differs from the embedded archive are compiled by NVRTC once per machine
# (then read from the on-disk kernel cache): small problems on every path first, so that the
# measured first setups are the first of a process, not the first on the machine.
run warm-cg poisson3d:16 --method cg --precond none
run warm-amg poisson3d27:16 $amg --amg-improve 2 --amg-aggregation-window 30 --amg-phase-times
run warm-block elasticity3d:6 $amg
# 27-point: the aggregates (one ordering window = PyAMG's standard aggregation), candidate
# improvement, degree 4; the aggregation phase timed for the two aggregations.
P=poisson3d27:110
run p27-cg $P --method cg --precond none
run p27-amg $P $amg
run p27-imp2 $P $amg --amg-improve 2
run p27-win30 $P $amg --amg-aggregation-window 30
run p27-win30-imp2 $P $amg --amg-aggregation-window 30 --amg-improve 2
run p27-deg4 $P $amg --amg-degree 4
run p27-phases $P --precond amg --amg-setups 2 --amg-phase-times
run p27-win30-phases $P --precond amg --amg-setups 2 --amg-phase-times --amg-aggregation-window 30
# Anisotropic 2-D (epsilon 1e-3): strength threshold 0.25 keeps only the strong direction.
P=aniso2d:1000:0.001
run a2-cg $P --method cg --precond none
run a2-amg $P $amg
run a2-imp2 $P $amg --amg-improve 2
run a2-theta25 $P $amg --amg-theta 0.25
run a2-deg4 $P $amg --amg-degree 4
# Kinds at PyAMG's level already: does improvement pay by time?
P=aniso3d:96:0.001
run a3-cg $P --method cg --precond none
run a3-amg $P $amg
run a3-imp2 $P $amg --amg-improve 2
P=poisson3d:128
run p128-cg $P --method cg --precond none
run p128-amg $P $amg
run p128-imp2 $P $amg --amg-improve 2
P=fem3d:p2:36
run p2-cg $P --method cg --precond none
run p2-amg $P $amg
run p2-imp2 $P $amg --amg-improve 2
P=jumps3d:100
run j-cg $P --method cg --precond none
run j-amg $P $amg
run j-imp2 $P $amg --amg-improve 2
P=elasticity3d:70
run e-cg $P --method cg --precond none
run e-amg $P $amg
run e-imp2 $P $amg --amg-improve 2
echo "total $(( $(date +%s) - start )) s" | tee -a "$res/summary.txt"
