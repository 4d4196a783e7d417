#!/usr/bin/env bash
# Issue 21 items 2 and 4 (fused solver kernels, small-system path), one call to the GPU machine.
# Stage here:
#   cargo test --release --no-run --test solver_fused --test solver_graphs --test solvers
#   cargo bench --no-run --bench solver_fused
# copy the executables to .gpu/tests/test-{solver_fused,solver_graphs,solvers} and
# .gpu/benches/solver_fused, the corpus matrices to .gpu/data, this script to .gpu/; then on the
# machine, from the repository root: bash .gpu/fused-device.sh  (results in $OUT/fused.tgz).
# GPU_DIR names another staging folder: the device tool ships the session's own checkout, so a
# helper working in another worktree stages into an ignored folder of that checkout (this branch's
# figures: GPU_DIR=.gpu-fused, carried as [".gpu-fused"]).
set -uo pipefail
G=${GPU_DIR:-.gpu}
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
res=$(mktemp -d)
pack() { tar czf "${OUT:-/tmp}/fused.tgz" -C "$res" . 2>/dev/null; }
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  printf '%-14s rc=%-3s %6d ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - s) / 1000000 ))" \
    "$(grep -E '^test result:' "$res/$name.log" | tail -1)"
  pack
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
step test-fused 45 "$G/tests/test-solver_fused" --test-threads=1 --nocapture
grep -E 'panicked|FAILED|seed' "$res/test-fused.log" | head -10
step test-graphs 60 "$G/tests/test-solver_graphs" --test-threads=1
grep -E 'panicked|FAILED' "$res/test-graphs.log" | head -6
step test-solvers 40 "$G/tests/test-solvers" gpu --test-threads=1
grep -E 'panicked|FAILED' "$res/test-solvers.log" | head -6
step bench ${BENCH_T:-140} "$G/benches/solver_fused" "$res/solver-fused.jsonl"
cat "$res/bench.log"
NCU="/usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats"
summ() { grep -E '^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occ' "$res/$1.log" | head -80 > "$res/$1-summary.txt"; pack; }
step ncu-sep 30 $NCU -k 'regex:spmv|solver_bicg' -c 14 "$G/benches/solver_fused" "$res/ncu-sep.jsonl" raefsky2/bicgstab graphs
summ ncu-sep
step ncu-fused 30 $NCU -k 'regex:spmv|solver_bicg' -c 10 "$G/benches/solver_fused" "$res/ncu-fused.jsonl" raefsky2/bicgstab fused
summ ncu-fused
CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
export SEGSPARSE_SANITIZER=1  # the tests' smaller instance set under the sanitizer's tools
step memcheck 35 $CS --tool memcheck --error-exitcode 9 "$G/tests/test-solver_fused" gpu_fused_breakdown --test-threads=1
tail -2 "$res/memcheck.log"
step racecheck 60 $CS --tool racecheck --error-exitcode 9 "$G/tests/test-solver_fused" gpu_fused_breakdown --test-threads=1
tail -2 "$res/racecheck.log"
step ncu-gmres 30 $NCU -k 'regex:spmv|solver_gmres' -c 12 "$G/benches/solver_fused" "$res/ncu-gm.jsonl" raefsky2/gmres fused
summ ncu-gmres
step memcheck2 30 $CS --tool memcheck --error-exitcode 9 "$G/tests/test-solver_fused" gpu_fused_f32 --test-threads=1
tail -2 "$res/memcheck2.log"
awk '/Duration/ {print FILENAME": "$0}' "$res"/ncu-*-summary.txt | head -40
# The peer (same call, its own process): CuPy's cg and gmres (raefsky2 GMRES(30) among them).
step cupy 60 python3 benches/peers/cupy_solvers.py "$SEGSPARSE_DATA"
tail -30 "$res/cupy.log"
