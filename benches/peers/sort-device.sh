#!/usr/bin/env bash
# One call to the GPU machine for the Onesweep radix sort (issue 20): tests, sanitizers, CUB
# beside prims-bench in the same call, a sweep of the tile shape, and Nsight Compute profiles of
# ours and CUB's Onesweep kernels. Results go into ONE archive, $OUT/results.tgz.
#
#   mv .gpu-prims .gpu && bash .gpu/peers/sort-device.sh [full|final]
#
# The stage (.gpu/) holds bin/prims-bench, tests/test-primitives_more, and peers/ (a copy of
# benches/peers). full: everything above; final: tests, sanitizers, CUB and prims-bench only.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-full}
res=${RES:-/tmp/segsparse-results}
rm -rf "$res"; mkdir -p "$res"
trap 'tar czf "${OUT:-/tmp}/results.tgz" -C "$res" .; ls -la "$res" | tail -n +2 | wc -l' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$res/device.txt"
date -u +%FT%TZ >> "$res/device.txt"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$res/summary.txt"; }
NCU=/usr/local/cuda/bin/ncu
SAN=/usr/local/cuda/bin/compute-sanitizer
T=.gpu/tests/test-primitives_more
B=.gpu/bin/prims-bench

# CUB's harness compiles on the CPU while the tests run.
( /usr/local/cuda/bin/nvcc -arch=sm_90 -O3 -std=c++17 -o "$here/cub-peers" "$here/cub_peers.cu" \
    > "$res/nvcc.log" 2>&1; echo "nvcc rc=$?" >> "$res/nvcc.log" ) &
nvcc_pid=$!

timeout 200 "$T" --test-threads=4 > "$res/test-primitives_more.log" 2>&1
stamp "tests rc=$? $(grep -E '^test result:' "$res/test-primitives_more.log" | tail -1)"
grep -E 'panicked|FAILED|failed' "$res/test-primitives_more.log" | head -10
# The three-kernel sort (used from 2^30 keys on) still sorts.
SEGSPARSE_SORT=3k timeout 60 "$T" --test-threads=2 radix_sort_keys radix_sort_pairs segmented_sort \
    > "$res/test-3k.log" 2>&1
stamp "tests (three-kernel sort) rc=$? $(grep -E '^test result:' "$res/test-3k.log" | tail -1)"
for tool in memcheck racecheck; do
  timeout 60 $SAN --tool $tool "$T" gpu_sanitizer_small > "$res/sanitizer-$tool.log" 2>&1
  stamp "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$res/sanitizer-$tool.log" | tail -1)"
done

wait "$nvcc_pid"; stamp "$(tail -1 "$res/nvcc.log")"
"$here/cub-peers" --only sort > "$res/cub.jsonl" 2> "$res/cub.err"; stamp "cub-peers rc=$?"
$B --format json --only sort --sort-sizes 22,24,26,28 > "$res/prims.jsonl" 2> "$res/prims.err"
stamp "prims-bench rc=$?"
python3 "$here/merge.py" --cub "$res/cub.jsonl" --ours "$res/prims.jsonl" \
    --out "$res/scan-vs-cub.jsonl" --md > "$res/scan-vs-cub.md" 2>&1
# The segmented reduce (f32, 2^26, six segment lengths) beside CUB's.
"$here/cub-peers" --only segreduce > "$res/cub-segreduce.jsonl" 2> "$res/cub-segreduce.err"
$B --format json --only segreduce > "$res/prims-segreduce.jsonl" 2> "$res/prims-segreduce.err"
stamp "segreduce rc=$?"
python3 "$here/merge.py" --cub "$res/cub-segreduce.jsonl" --ours "$res/prims-segreduce.jsonl" \
    --out "$res/segreduce-vs-cub.jsonl" --md > "$res/segreduce-vs-cub.md" 2>&1
# Other tile shapes over the same sizes, beside the same CUB figures.
for pol in ${CANDIDATES:-}; do
  SEGSPARSE_SORT_POLICY=$pol $B --format json --only sort --sort-sizes 22,24,26,28 \
      > "$res/cand-$pol.jsonl" 2> "$res/cand-$pol.err"
  stamp "prims-bench $pol rc=$?"
  python3 "$here/merge.py" --cub "$res/cub.jsonl" --ours "$res/cand-$pol.jsonl" --md \
      > "$res/cand-$pol.md" 2>&1
done

if [ "$mode" = full ]; then
  sweep() {  # name, env...
    local name=$1; shift
    env "$@" $B --format json --quick --only sort --sort-sizes 24,26 > "$res/sweep-$name.jsonl" 2> "$res/sweep-$name.err"
    echo "$name: $(python3 -c '
import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(" ".join("%s-%s-2^%d=%.1f" % (x["variant"], x["dtype"], x["n"].bit_length()-1, x["us"]) for x in r))
' "$res/sweep-$name.jsonl")" | tee -a "$res/sweep.txt"
  }
  for pol in ${SWEEP_POLICIES:-}; do
    sweep $pol SEGSPARSE_SORT_POLICY=$pol
    sweep $pol-any SEGSPARSE_SORT_POLICY=$pol SEGSPARSE_SORT_MATCH=any
  done
  sweep three-kernel SEGSPARSE_SORT=3k
  stamp "sweep done"
  SECS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis --section SourceCounters"
  timeout 90 $NCU --clock-control none -k regex:'radix_(histogram|onesweep)_b32' -c 3 $SECS \
      $B --quick --only sort --sort-sizes 24 > "$res/ncu-ours-keys.txt" 2>&1
  stamp "ncu ours keys rc=$?"
  timeout 60 $NCU --clock-control none -k regex:'radix_onesweep_pairs_b32_b32' -c 1 $SECS \
      $B --quick --only sort --sort-sizes 24 > "$res/ncu-ours-pairs.txt" 2>&1
  stamp "ncu ours pairs rc=$?"
  # The segmented reduce as it stands (issue 20's second item, not changed here): its profile.
  timeout 60 $NCU --clock-control none -k regex:'segreduce' -s 20 -c 2 $SECS \
      $B --quick --only segreduce > "$res/ncu-segreduce.txt" 2>&1
  stamp "ncu segreduce rc=$?"
  if [ -n "${NCU_CUB:-}" ]; then
    timeout 90 $NCU --clock-control none -k regex:'Onesweep|Histogram' -c 3 $SECS \
        "$here/cub-peers" --only sort --quick --reps 1 --batch 1 > "$res/ncu-cub.txt" 2>&1
    stamp "ncu cub rc=$?"
  fi
fi
stamp done
echo "== sweep"; cat "$res/sweep.txt" 2>/dev/null
for pol in ${CANDIDATES:-}; do echo "== $pol"; grep -E '^\| sort' "$res/cand-$pol.md" | cut -d'|' -f3,4,5,9-; done
echo "== segreduce"; grep -E '^\| segreduce' "$res/segreduce-vs-cub.md"; grep copy "$res/cub-segreduce.jsonl" | cut -c1-120
echo "== vs CUB (default)"; grep -E '^\| sort' "$res/scan-vs-cub.md"
