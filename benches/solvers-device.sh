#!/usr/bin/env bash
# The solvers' device run, in one call to the GPU machine (re-runnable: the lead re-runs it after
# merging the faster SpMV). Stage first, here:
#
#   ../shared/tools/gpu-stage --bench && cp benches/solvers-device.sh benches/peers/*.py .gpu/
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
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/solvers-device.tgz" -C "$res" . ; rm -rf "$res"' EXIT
step() { # step NAME TIMEOUT CMD... : runs CMD, log in $res/NAME.log, prints a one-line summary
  local name=$1 t=$2; shift 2
  local s=$(date +%s.%N)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  printf '%-28s rc=%-3s %6.1f s  %s\n' "$name" "$rc" "$(echo "$(date +%s.%N) - $s" | bc)" \
    "$(grep -E '^test result:' "$res/$name.log" | tail -1)"
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"

step test-solvers 150 "$G/tests/test-solvers" --test-threads=1 --nocapture
grep -E 'GPU|CPU .* GPU|panicked' "$res/test-solvers.log" | head -40

SS="$G/bin/sparse-solve"
for args in \
  "$G/data/raefsky2.mtx.gz --method gmres" \
  "$G/data/raefsky2.mtx.gz --method bicgstab" \
  "$G/data/raefsky2.mtx.gz --method gmres --precond jacobi" \
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
  timeout 60 $SS $args --backend gpu --format json >> "$res/sparse-solve.jsonl" 2>> "$res/sparse-solve.err"
  echo "rc=$? $args" >> "$res/sparse-solve.err"
done
cat "$res/sparse-solve.jsonl"

step bench-gpu 150 "$G/benches/solvers" /gpu/
cat "$res/bench-gpu.log"

cupy=benches/peers/cupy_solvers.py; [ -f "$cupy" ] || cupy="$here/cupy_solvers.py"
step cupy 120 python3 "$cupy" "$G/data"
cat "$res/cupy.log" | head -60

CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
step memcheck 120 $CS --tool memcheck "$G/tests/test-solvers" gpu_cg_pcg_bicgstab_agree --test-threads=1
tail -3 "$res/memcheck.log"
step racecheck 90 $CS --tool racecheck "$G/tests/test-solvers" gpu_gmres_on --test-threads=1
tail -3 "$res/racecheck.log"
step ncu-gmres 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:solver_gmres -c 12 \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  $SS poisson2d:1000 --method gmres --max-iters 12 --backend gpu --format json
grep -E 'solver_gmres|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy' "$res/ncu-gmres.log" | head -60
