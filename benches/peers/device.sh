#!/usr/bin/env bash
# Everything one call to the GPU machine does, as one command line:
#
#   mv .stage-scan .gpu && bash .gpu/peers/device.sh probe|final
#
# (the stage is built here by scripts/gpu-stage plus a copy of benches/peers into
# .gpu/peers; see benches/results/scan.md). Results go into ONE archive, $OUT/results.tgz.
#
# probe: GPU tests of the primitives, the CUB harness, scan-bench/prims-bench (JSON), a sweep of
#        the look-back kernel's switches (SEGSPARSE_SCAN_*), and Nsight Compute of the scan
#        kernel (default and 8 blocks/SM). (Round 2's probe swept the switches of that time:
#        benches/results/scan.md.)
# final: GPU tests, compute-sanitizer memcheck/racecheck on the scan kernels, and the run that
#        becomes benches/results/scan-vs-cub.jsonl.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-final}
# A fixed folder, so a caller whose timeout killed this script can still pack what is there.
res=${RES:-/tmp/segsparse-results}
rm -rf "$res"; mkdir -p "$res"
trap 'tar czf "${OUT:-/tmp}/results.tgz" -C "$res" .; ls -la "$res"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$res/device.txt"
date -u +%FT%TZ >> "$res/device.txt"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

# The CUB harness compiles on the CPU while the GPU runs the tests.
if [ ! -x "$here/cub-peers" ]; then
  ( /usr/local/cuda/bin/nvcc -arch=sm_90 -O3 -std=c++17 -o "$here/cub-peers" "$here/cub_peers.cu" \
      > "$res/nvcc.log" 2>&1; echo "nvcc rc=$?" >> "$res/nvcc.log" ) &
  nvcc_pid=$!
else
  nvcc_pid=
fi

# The three test executables run side by side (gpu_runtime is mostly NVRTC work on the CPU).
tests() {
  for t in primitives_scan primitives_more gpu_runtime; do
    exe=.gpu/tests/test-$t
    [ -x "$exe" ] || continue
    ( timeout 170 "$exe" --test-threads=4 > "$res/test-$t.log" 2>&1
      stamp "test-$t rc=$? $(grep -E '^test result:' "$res/test-$t.log" | tail -1)"
      grep -E 'panicked|FAILED' "$res/test-$t.log" | head -10 ) &
  done
  wait
}
tests

[ -n "$nvcc_pid" ] && wait "$nvcc_pid"
stamp "$(tail -1 "$res/nvcc.log" 2>/dev/null)"
[ -x "$here/cub-peers" ] && cp "$here/cub-peers" "$res/"

bench() {
  bash "$here/run.sh" "$res/cub.jsonl" 2> "$res/cub.err"; stamp "cub-peers rc=$?"
  .gpu/bin/scan-bench --format json --f64 --exclusive --lookback-only --no-paper --sizes ${SCAN_SIZES:-20,24,26} \
      > "$res/scan.jsonl" 2> "$res/scan.err"; stamp "scan-bench rc=$?"
  .gpu/bin/prims-bench --format json --quick > "$res/prims.jsonl" 2> "$res/prims.err"; stamp "prims-bench rc=$?"
  python3 "$here/merge.py" --cub "$res/cub.jsonl" --ours "$res/scan.jsonl" "$res/prims.jsonl" \
      --out "$res/scan-vs-cub.jsonl" --md > "$res/scan-vs-cub.md" 2>&1
  cat "$res/scan-vs-cub.md"
}

# The look-back kernel's switches, one process each (defines are read once per process).
sweep() {  # name, env...
  local name=$1; shift
  env "$@" .gpu/bin/scan-bench --format json --lookback-only --scan-only --no-paper --no-big \
      --sizes 20,24,26 --reps 9 ${SWEEP_ARGS:-} > "$res/sweep-$name.jsonl" 2> "$res/sweep-$name.err"
  echo "$name $* : $(python3 -c '
import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(" ".join("%s:2^%d%s=%.1f" % (x["dtype"], x["n"].bit_length()-1, x["direction"][0], x["us"]) for x in r if x["op"]=="scan"))
' "$res/sweep-$name.jsonl") $(grep '^scan_lookback_plus' "$res/sweep-$name.err" | head -1)" | tee -a "$res/sweep.txt"
}
ncu_run() {  # name, env...
  local name=$1; shift
  env "$@" timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'^scan_lookback_plus_f32' -c 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats \
      .gpu/bin/scan-bench --lookback-only --scan-only --no-paper --no-big --sizes 26 --reps 1 --batch 1 \
      > "$res/ncu-$name.txt" 2>&1
  stamp "ncu $name rc=$?"
}

if [ "$mode" = round3 ]; then
  # Round 3 (issue 20 item 2): CUB's sm_90 shapes (128 threads x 24 items for 4-byte sums),
  # more blocks per SM, and the wait before the first look-back window (SCAN_FIRST_DELAY).
  SCAN_SIZES=20,24,26 bench   # scan-bench adds 2^28 unless --no-big
  export SWEEP_ARGS=--f64
  sweep default
  sweep first500 SEGSPARSE_SCAN_FIRST_DELAY=500
  sweep first1000 SEGSPARSE_SCAN_FIRST_DELAY=1000
  sweep backoff200 SEGSPARSE_SCAN_BACKOFF=200
  sweep 128x24-min12 SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=12
  sweep 128x24-min10 SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=10
  sweep 128x24-min16 SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=16
  sweep 128x24-min12-first700 SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=12 SEGSPARSE_SCAN_FIRST_DELAY=700
  sweep 128x24-min12-order SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=12 SEGSPARSE_SCAN_ORDER=1
  sweep 128x16-min16 SEGSPARSE_SCAN_POLICY=128x16,8 SEGSPARSE_SCAN_MIN_BLOCKS=16
  sweep 192x16-min10 SEGSPARSE_SCAN_POLICY=192x16,8 SEGSPARSE_SCAN_MIN_BLOCKS=10
  sweep 256x24-min6 SEGSPARSE_SCAN_POLICY=256x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=6
  stamp "sweep done"
  ncu_run default
  ncu_run 128x24-min12 SEGSPARSE_SCAN_POLICY=128x24,12 SEGSPARSE_SCAN_MIN_BLOCKS=12
elif [ "$mode" = round3b ]; then
  # Round 3, second call: the first-window delay around its best value, the key-value sort's
  # early value loads (OS_EARLY_VALUES) on and off, sanitizers on the changed kernels.
  for tool in memcheck racecheck; do
    for t in primitives_scan primitives_more; do
      timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool .gpu/tests/test-$t gpu_sanitizer_small \
          > "$res/sanitizer-$tool-$t.log" 2>&1
      stamp "sanitizer $tool $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$res/sanitizer-$tool-$t.log" | tail -1)"
    done
  done
  bash "$here/run.sh" "$res/cub.jsonl" 2> "$res/cub.err"; stamp "cub-peers rc=$?"
  grep '"sort"' "$res/cub.jsonl" | head -20
  for ev in 0 1; do
    SEGSPARSE_SORT_EARLY_VALUES=$ev .gpu/bin/prims-bench --format json --only sort \
        > "$res/sort-early$ev.jsonl" 2> "$res/sort-early$ev.err"
    stamp "sort early values $ev rc=$?"; grep -E '"(pairs|keys)"' "$res/sort-early$ev.jsonl" | cut -c1-220
  done
  export SWEEP_ARGS=--f64
  for d in 0 1000 1500 2000 3000; do sweep first$d SEGSPARSE_SCAN_FIRST_DELAY=$d; done
  stamp "sweep done"
  SEGSPARSE_SCAN_FIRST_DELAY=1500 ncu_run first1500
elif [ "$mode" = round3c ]; then
  # Round 3, the H200 call: the same-process comparison with CUB at the new defaults (first
  # window delay 3 µs, early value loads), and the switches around them.
  SCAN_SIZES=20,24,26 bench
  export SWEEP_ARGS=--f64
  for d in 0 5000; do sweep first$d SEGSPARSE_SCAN_FIRST_DELAY=$d; done
  sweep first3000-backoff300 SEGSPARSE_SCAN_BACKOFF=300
  for v in "EARLY_VALUES=0" "POLL_NS=200" "POLL_NS=1000"; do
    env SEGSPARSE_SORT_$v .gpu/bin/prims-bench --format json --only sort > "$res/sort-$v.jsonl" 2> "$res/sort-$v.err"
    echo "sort $v: $(grep -E '"(pairs|keys)"' "$res/sort-$v.jsonl" | python3 -c '
import json,sys
print(" ".join("%s:%s:2^%d=%.1f" % (r["variant"], r["dtype"], r["n"].bit_length()-1, r["us"]) for r in map(json.loads, sys.stdin)))')" | tee -a "$res/sweep.txt"
  done
  stamp "sweep done"
elif [ "$mode" = probe ]; then
  bench
  export SWEEP_ARGS=--f64
  sweep default
  sweep order SEGSPARSE_SCAN_ORDER=1
  sweep stream SEGSPARSE_SCAN_STREAM=1
  sweep fenced SEGSPARSE_SCAN_STATUS16=0
  sweep min8 SEGSPARSE_SCAN_MIN_BLOCKS=8
  sweep order-min8 SEGSPARSE_SCAN_ORDER=1 SEGSPARSE_SCAN_MIN_BLOCKS=8
  sweep 512x16-min4 SEGSPARSE_SCAN_POLICY=512x16,8 SEGSPARSE_SCAN_MIN_BLOCKS=4
  sweep 128x16-min16 SEGSPARSE_SCAN_POLICY=128x16,8 SEGSPARSE_SCAN_MIN_BLOCKS=16
  stamp "sweep done"
  ncu_run default
  ncu_run min8 SEGSPARSE_SCAN_MIN_BLOCKS=8
else
  for tool in memcheck racecheck; do
    timeout 50 /usr/local/cuda/bin/compute-sanitizer --tool $tool .gpu/tests/test-primitives_scan gpu_sanitizer_small \
        > "$res/sanitizer-$tool.log" 2>&1
    stamp "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$res/sanitizer-$tool.log" | tail -1)"
  done
  bench
  # The switches around the final defaults (f32 and f64), and the profile of the default.
  export SWEEP_ARGS=--f64
  sweep default
  sweep order SEGSPARSE_SCAN_ORDER=1
  sweep fenced SEGSPARSE_SCAN_STATUS16=0
  sweep min5 SEGSPARSE_SCAN_MIN_BLOCKS=5
  sweep min7 SEGSPARSE_SCAN_MIN_BLOCKS=7
  sweep min8 SEGSPARSE_SCAN_MIN_BLOCKS=8
  sweep 256x12-min8 SEGSPARSE_SCAN_POLICY=256x12,6 SEGSPARSE_SCAN_MIN_BLOCKS=8
  stamp "sweep done"
  ncu_run default
fi
stamp done
