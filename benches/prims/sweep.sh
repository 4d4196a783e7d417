#!/usr/bin/env bash
# Usage on the GPU machine, from the repository root: bash benches/prims/sweep.sh [bench|tests|all]
# Primitives on the H100: tests + sanitizers (while CUB's peer compiles), then our scan/sort/segreduce
# variants, CUB in the same call, and Nsight Compute of ours and CUB's. Logs: $OUT/prims.tgz.
set -u
S=${STAGE:-.stage-prims}  # scan-bench, prims-bench, test-all (stripped release builds), commit.txt
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/matrices" RUST_BACKTRACE=1
R=$(mktemp -d); trap 'tar czf "$OUT/prims.tgz" -C "$R" .' EXIT
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$R/device.txt"
cat $S/commit.txt >> "$R/device.txt"
[ "${1:-all}" = tests ] || ( nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/cub-peers benches/prims/cub_peers.cu > "$R/nvcc.log" 2>&1; echo "rc=$?" >> "$R/nvcc.log" ) &
NV=$!
MODE=${1:-all}
if [ "$MODE" != bench ]; then
# ---- correctness (parallel processes; timings come later, on a quiet GPU)
T=$S/test-all
SCAN_T='primitives_scan::gpu_tests::'
MORE="primitives_more::gpu_tests::gpu_segmented_reduce primitives_more::gpu_tests::gpu_radix_sort primitives_more::gpu_tests::gpu_sanitizer_small"
t() { local name=$1; shift; ( env "$@" > "$R/test-$name.log" 2>&1; echo "rc=$?" >> "$R/test-$name.log" ) & }
t scan-pair16 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4 $T $SCAN_T --test-threads=3
t scan-h200 SEGSPARSE_DEVICE_CLASS=h200 $T $SCAN_T --test-threads=3
t scan-pair8 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_POLICY=256x8,4 SEGSPARSE_SCAN_MIN_BLOCKS=8 $T ${SCAN_T}gpu_scan_all ${SCAN_T}gpu_segscan_all_variants_f ${SCAN_T}gpu_large --test-threads=3
t more-h100 SEGSPARSE_DEVICE_CLASS=h100 $T $MORE --test-threads=3
t more-h200 SEGSPARSE_DEVICE_CLASS=h200 $T primitives_more::gpu_tests::gpu_radix_sort --test-threads=2
t more-novec SEGSPARSE_SEGREDUCE_VEC=0 $T primitives_more::gpu_tests::gpu_segmented_reduce --test-threads=2
for tool in memcheck racecheck; do
  t san-scan-$tool SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4 compute-sanitizer --tool $tool --error-exitcode 9 $T ${SCAN_T}gpu_sanitizer_small --test-threads=1
  t san-scan1-$tool SEGSPARSE_DEVICE_CLASS=h200 compute-sanitizer --tool $tool --error-exitcode 9 $T ${SCAN_T}gpu_sanitizer_small --test-threads=1
  t san-more-$tool compute-sanitizer --tool $tool --error-exitcode 9 $T primitives_more::gpu_tests::gpu_sanitizer_small --test-threads=1
done
wait $(jobs -p | grep -v "^$NV$") 2>/dev/null
for f in "$R"/test-*.log; do echo "$(basename "$f" .log): $(tail -1 "$f") $(grep -E '^test result:' "$f" | tail -1) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1)"; grep -E 'panicked|FAILED' "$f" | head -5; done
say "tests done"
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
[ "$MODE" = tests ] && $NCU -k regex:radix_onesweep_b32 --launch-skip 4 -c 1 $S/prims-bench --format json --quick --only sort --sort-sizes 24 > "$R/ncu-sort.txt" 2>&1
[ "$MODE" = tests ] && $NCU -k regex:radix_onesweep_pairs_b32_b32 --launch-skip 4 -c 1 $S/prims-bench --format json --quick --only sort --sort-sizes 24 > "$R/ncu-sort-pairs.txt" 2>&1
for f in "$R"/ncu-sort*.txt; do echo "== $f"; grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|stalled" "$f" | head -12; done
fi
[ "$MODE" = tests ] && exit 0
# ---- our variants, one process each, GPU otherwise idle
SB="$S/scan-bench --format json --lookback-only --scan-only --no-paper --no-big --sizes 24,26 --f64 --reps 9"
sc() { local name=$1; shift; env "$@" $SB > "$R/scan-$name.jsonl" 2> "$R/scan-$name.err"; say "scan $name rc=$? $(grep -o 'look-back policy[^;]*' "$R/scan-$name.err" | head -1)"; }
sc h200row SEGSPARSE_DEVICE_CLASS=h200
sc pair16 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4
sc pair16-d1000 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4 SEGSPARSE_SCAN_FIRST_DELAY=1000
sc pair8 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_POLICY=256x8,4 SEGSPARSE_SCAN_MIN_BLOCKS=8
sc pair16-d0 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4 SEGSPARSE_SCAN_FIRST_DELAY=0
sc pair8-d1000 SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_POLICY=256x8,4 SEGSPARSE_SCAN_MIN_BLOCKS=8 SEGSPARSE_SCAN_FIRST_DELAY=1000
sc h200row-b SEGSPARSE_DEVICE_CLASS=h200
PB="$S/prims-bench --format json --quick --only sort --sort-sizes 24,26"
so() { local name=$1; shift; env "$@" $PB > "$R/sort-$name.jsonl" 2> "$R/sort-$name.err"; say "sort $name rc=$?"; }
so h200row SEGSPARSE_DEVICE_CLASS=h200
so spin SEGSPARSE_SORT_POLL_NS=0
so s256x24 SEGSPARSE_SORT_POLICY=256x24,20
so s256x20 SEGSPARSE_SORT_POLICY=256x20,16
so s384x20 SEGSPARSE_SORT_POLICY=384x20,16
so s512x16 SEGSPARSE_SORT_POLICY=512x16,12
so h200row-b SEGSPARSE_DEVICE_CLASS=h200
$S/prims-bench --format json --only segreduce > "$R/segreduce.jsonl" 2> "$R/segreduce.err"; say "segreduce rc=$?"
SEGSPARSE_SEGREDUCE_VEC=0 $S/prims-bench --format json --only segreduce > "$R/segreduce-novec.jsonl" 2> "$R/segreduce-novec.err"; say "segreduce novec rc=$?"
# ---- CUB in the same call
wait $NV; tail -2 "$R/nvcc.log"; say "nvcc done"
for o in scan sort segreduce; do /tmp/cub-peers --only $o > "$R/cub-$o.jsonl" 2> "$R/cub-$o.err"; say "cub $o rc=$?"; done
$S/scan-bench --format json --lookback-only --scan-only --no-paper --no-big --sizes 24,26 --f64 --reps 9 > "$R/scan-default-after-cub.jsonl" 2>"$R/scan-default-after-cub.err"; say "scan default again"
# ---- Nsight Compute: ours (one tile, pair) and CUB's at 2^26 f32, sort at 2^24
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
SB1="$S/scan-bench --format json --lookback-only --scan-only --no-paper --no-big --sizes 26 --reps 1 --batch 1"
SEGSPARSE_DEVICE_CLASS=h200 $NCU -k regex:scan_lookback_plus_f32 --launch-skip 2 -c 1 $SB1 > "$R/ncu-scan-one.txt" 2>&1; say "ncu scan one"
SEGSPARSE_SCAN_TILES=2 SEGSPARSE_SCAN_MIN_BLOCKS=4 $NCU -k regex:scan_lookback_plus_f32 --launch-skip 2 -c 1 $SB1 > "$R/ncu-scan-pair.txt" 2>&1; say "ncu scan pair"
$NCU -k regex:DeviceScanKernel --launch-skip 8 -c 1 /tmp/cub-peers --quick --only scan --reps 1 --batch 1 > "$R/ncu-cub-scan.txt" 2>&1; say "ncu cub scan"
$NCU -k regex:radix_onesweep_b4 --launch-skip 4 -c 1 $S/prims-bench --format json --quick --only sort --sort-sizes 24 > "$R/ncu-sort.txt" 2>&1; say "ncu sort"
$NCU -k regex:Onesweep --launch-skip 4 -c 1 /tmp/cub-peers --quick --only sort --reps 1 --batch 1 > "$R/ncu-cub-sort.txt" 2>&1; say "ncu cub sort"
$NCU -k regex:segreduce_groups8 --launch-skip 2 -c 1 $S/prims-bench --format json --only segreduce > "$R/ncu-segreduce.txt" 2>&1; say "ncu segreduce"
$NCU -k regex:segreduce_fixup --launch-skip 4 -c 1 $S/prims-bench --format json --only segreduce > "$R/ncu-segreduce-fixup.txt" 2>&1; say "ncu segreduce fixup"
for f in "$R"/ncu-*.txt; do echo "== $f"; grep -E "^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Stall|Warp Cycles Per Issued" "$f" | head -14; done
