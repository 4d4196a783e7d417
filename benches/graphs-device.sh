#!/usr/bin/env bash
# Issue 21's device run (CUDA graphs in the solvers), one call to the GPU machine. Stage here:
#   cargo test --release --no-run --test solvers --test solver_graphs
#   cargo bench --no-run --bench solver_graphs
# copy the executables to .gpu/{tests/test-solvers,tests/test-solver_graphs,benches/solver_graphs},
# the corpus to .gpu/data, this script and benches/peers/cupy_solvers.py to .gpu/; then on the
# machine, from the repository root: bash .gpu/graphs-device.sh  (results in $OUT/graphs.tgz).
set -uo pipefail
G=${GPU_DIR:-.gpu}
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
res=$(mktemp -d)
pack() { tar czf "${OUT:-/tmp}/graphs.tgz" -C "$res" . 2>/dev/null; }
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  printf '%-16s rc=%-3s %6d ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - s) / 1000000 ))" \
    "$(grep -E '^test result:' "$res/$name.log" | tail -1)"
  pack
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
step test-graphs 90 "$G/tests/test-solver_graphs" --test-threads=1 --nocapture
grep -E 'panicked|FAILED' "$res/test-graphs.log" | head -10
step test-solvers 80 "$G/tests/test-solvers" gpu --test-threads=1
grep -E 'panicked|FAILED' "$res/test-solvers.log" | head -10
step bench 150 "$G/benches/solver_graphs" "$res/solvers-graphs.jsonl"
step cupy 60 python3 "$G/cupy_solvers.py" "$SEGSPARSE_DATA"
CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
step memcheck 60 $CS --tool memcheck --error-exitcode 9 "$G/tests/test-solver_graphs" gpu_graphs_breakdown --test-threads=1
tail -2 "$res/memcheck.log"
step memcheck-gm 40 $CS --tool memcheck --error-exitcode 9 "$G/tests/test-solver_graphs" gpu_graphs_gmres --test-threads=1
tail -2 "$res/memcheck-gm.log"
# Kernel durations of BiCGSTAB on raefsky2 (the first 40 kernels: setup, then iterations).
step ncu 60 /usr/local/cuda/bin/ncu --clock-control none -c 40 --section SpeedOfLight \
  "$G/benches/solver_graphs" "$res/ncu.jsonl" raefsky2/bicgstab
grep -E '^  [a-z_]+.*\(|Duration' "$res/ncu.log" | paste - - | awk '{print $1, $(NF-1), $NF}' | head -40 > "$res/ncu-summary.txt"; pack
tail -25 "$res/cupy.log"
cat "$res/bench.log"
