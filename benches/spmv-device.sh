#!/usr/bin/env bash
# One call to the GPU machine for issue 10 (GPU SpMV), from the repository root with the staged
# build in .gpu/ (../shared/tools/gpu-stage, this script copied to .gpu/). Everything it produces
# goes into one archive, $OUT/spmv-results.tgz (the machine returns at most 8 files).
#
#   bash .gpu/spmv-device.sh tests|bench|ncu|sanitize|final ...   (several modes in one call)
#
# tests    : the spmv GPU tests and spmv-bench's unit tests (SEGSPARSE_REQUIRE_GPU=1)
# bench    : spmv-bench --backend gpu on the large set + raefsky2, every GPU row (table + json)
# ncu      : Nsight Compute on poisson2d:2000 and powerlaw:5000000:2.2 (f64): the look-back
#            kernel (before), the deterministic fused kernel + fix-up, the row kernel, cuSPARSE
# corpus   : spmv-bench --backend gpu over matrices/ and the corpus (json)
# sanitize : compute-sanitizer memcheck + racecheck on the spmv GPU tests
# final    : the bench's json lines only (benches/results/spmv-large.jsonl)
set -u
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/spmv-results.tgz" -C "$res" . 2>/dev/null' EXIT
LARGE="poisson2d:2000 poisson3d:160 random:4000000:16 random:3000000:6 powerlaw:5000000:2.2 \
powerlaw:800000:1.8 denserows:4000000:4:16:500000 wide:100000:20000000:100"
RAEF=.gpu/data/raefsky2.mtx.gz
[ -f "$RAEF" ] || RAEF=matrices/raefsky2.mtx.gz
NCU=/usr/local/cuda/bin/ncu
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
for mode in "$@"; do
  t0=$(date +%s)
  case "$mode" in
  tests)
    for t in .gpu/tests/test-spmv_gpu .gpu/tests/bin-spmv-bench; do
      timeout 240 "$t" --test-threads=1 > "$res/$(basename "$t").log" 2>&1
      echo "$(basename "$t"): rc=$? $(grep -E '^test result:' "$res/$(basename "$t").log" | tail -1)"
      grep -E 'panicked|FAILED|failed|extra .* of CSR' "$res/$(basename "$t").log" | head -30
    done ;;
  bench)
    SEGSPARSE_BENCH_VECTOR_LANES=${LANES:-2,4,8} timeout 300 .gpu/bin/spmv-bench $LARGE "$RAEF" \
      --backend gpu --iters ${ITERS:-10} > "$res/bench.txt" 2> "$res/bench.err"
    echo "bench rc=$?"; tail -3 "$res/bench.err"
    grep -E '^(matrix|rows|GPU|segsparse gpu|cusparse)' "$res/bench.txt" | grep -v 'segsparse gpu paper' | cut -c1-110 ;;
  final)
    timeout 300 .gpu/bin/spmv-bench $LARGE "$RAEF" --backend gpu --iters ${ITERS:-15} --format json \
      > "$res/spmv-large.jsonl" 2> "$res/final.err"
    echo "final rc=$? $(wc -l < "$res/spmv-large.jsonl") lines"; tail -3 "$res/final.err" ;;
  corpus)
    timeout 200 .gpu/bin/spmv-bench .gpu/data/*.mtx* matrices/*.mtx* --backend gpu --iters ${ITERS:-10} \
      --format json > "$res/corpus.jsonl" 2> "$res/corpus.err"
    echo "corpus rc=$? $(wc -l < "$res/corpus.jsonl") lines"; tail -3 "$res/corpus.err" ;;
  ncu)
    sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
    for m in poisson2d:2000 powerlaw:5000000:2.2; do
      for k in "fused-lookback:spmv_lookback_f64" "segsparse gpu fused:spmv_fused_f64" \
               "segsparse gpu fused:spmv_fixup_f64" "rows:spmv_rows_f64" "cusparse-alg1:regex:csrmv|spmv"; do
        row=${k%%:*}; kern=${k#*:}
        case "$m:$row" in powerlaw*:rows) continue;; esac
        case "$kern" in regex:*) kf="$kern";; *) kf="regex:^$kern\$";; esac
        SEGSPARSE_BENCH_GPU_ROWS="$row" timeout 120 $NCU --clock-control none -k "$kf" -c 1 $sec \
          .gpu/bin/spmv-bench "$m" --backend gpu --precision f64 --iters 1 \
          > "$res/ncu-${m%%:*}-${kern//[^a-z0-9_]/_}.txt" 2>&1
        f="$res/ncu-${m%%:*}-${kern//[^a-z0-9_]/_}.txt"
        echo "== $m $kern"; grep -E '^  [a-z_]+.*\(|DRAM Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Local Memory|Memory Throughput' "$f" | head -12
      done
    done ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/tests/test-spmv_gpu \
        ${SAN_TESTS:-sizes_around one_row_of results_are} --test-threads=1 > "$res/sanitize-$tool.log" 2>&1
      echo "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' "$res/sanitize-$tool.log" | tr '\n' ' ')"
    done ;;
  esac
  echo "[$mode: $(( $(date +%s) - t0 )) s]"
done
