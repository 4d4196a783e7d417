#!/usr/bin/env bash
# The solvers' device run, in one call to the GPU machine (re-runnable: the lead re-runs it after
# merging the faster SpMV). Stage first, here:
#
#   scripts/gpu-stage --bench && cp benches/solvers-device.sh benches/peers/*.py .gpu/
#
# then, on the GPU machine, from the repository root, with the stage at .gpu:
#
#   bash .gpu/solvers-device.sh        # everything lands in $OUT/solvers-device.tgz
#
# Order: GPU tests, sparse-solve runs, the solvers bench (GPU rows), the CuPy peer, then the
# sanitizer and a short Nsight Compute profile last (each under a timeout, so a slow tool cannot
# take the earlier results with it).
set -uo pipefail
G=${GPU_DIR:-.gpu}
here=$(cd "$(dirname "$0")" && pwd)
# The corpus: the stage's copy of ../shared/matrices when it has one, else the repository's
# matrices/ (raefsky2 only).
D="$PWD/$G/data"; [ -f "$D/raefsky2.mtx.gz" ] || D="$PWD/matrices"
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$D" RUST_BACKTRACE=1
res=$(mktemp -d)
# The archive is rewritten after every step, so a call cut off by its time limit still returns
# what was measured before.
pack() { tar czf "${OUT:-/tmp}/solvers-device.tgz" -C "$res" . 2>/dev/null; }
step() { # step NAME TIMEOUT CMD... : runs CMD, log in $res/NAME.log, prints a one-line summary
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  printf '%-14s rc=%-3s %6d ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - s) / 1000000 ))" \
    "$(grep -E '^test result:' "$res/$name.log" | tail -1)"
  pack
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"

step test-solvers 100 "$G/tests/test-solvers" --test-threads=1 --nocapture
grep -E 'GPU|CPU .* GPU|panicked' "$res/test-solvers.log" | head -40

SS="$G/bin/sparse-solve"
for args in \
  "$D/raefsky2.mtx.gz --method gmres" \
  "$D/raefsky2.mtx.gz --method bicgstab" \
  "$D/raefsky2.mtx.gz --method gmres --precond jacobi" \
  "poisson2d:1000 --method cg" \
  "poisson2d:1000 --method cg --precond jacobi" \
  "poisson2d:1000 --method cg --precond poly" \
  "poisson2d:1000 --method cg --precond poly --poly-degree 8" \
  "poisson3d:100 --method cg" \
  "poisson3d:100 --method cg --precond poly" \
  "poisson3d:100 --method cg --precond poly --poly-degree 8" \
  "poisson3d:100 --method gmres" \
  "poisson3d:100 --method bicgstab --precond poly" \
  ; do
  timeout 30 $SS $args --backend gpu --format json >> "$res/sparse-solve.jsonl" 2>> "$res/sparse-solve.err"
  echo "rc=$? $args" >> "$res/sparse-solve.err"
done
cat "$res/sparse-solve.jsonl"; pack

step bench-gpu 100 "$G/benches/solvers" /gpu/
cat "$res/bench-gpu.log"

cupy=benches/peers/cupy_solvers.py; [ -f "$cupy" ] || cupy="$here/cupy_solvers.py"
step cupy 60 python3 "$cupy" "$D"
cat "$res/cupy.log" | head -60

CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
step memcheck 45 $CS --tool memcheck "$G/tests/test-solvers" gpu_cg_pcg_bicgstab_agree --test-threads=1
tail -3 "$res/memcheck.log"
step racecheck 30 $CS --tool racecheck "$G/tests/test-solvers" gpu_gmres_on --test-threads=1
tail -3 "$res/racecheck.log"
step ncu-gmres 30 /usr/local/cuda/bin/ncu --clock-control none -k regex:solver_gmres -c 12 \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  $SS poisson2d:1000 --method gmres --max-iters 12 --backend gpu --format json
grep -E 'solver_gmres|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy' "$res/ncu-gmres.log" | head -60
