#!/usr/bin/env bash
# One call to the GPU machine for issue 10 (GPU SpMV), from the repository root with the staged
# build in .gpu/ (scripts/gpu-stage, this script copied to .gpu/). Everything it produces
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
# The GPU table of a table-format bench output: matrix and row-stat lines, then the rows after
# each "GPU" header (median µs, GB/s, % copy, ×cuSPARSE), compacted.
gputab() { awk '/^matrix/{print $2} /^rows /{print} /^GPU/{g=1; next} /^\(/{g=0} g&&NF{print}' "$1" \
  | grep -v 'paper' | sed -E 's/  +/ /g' | cut -c1-100; }
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
    gputab "$res/bench.txt" ;;
  final)
    timeout 300 .gpu/bin/spmv-bench $LARGE "$RAEF" --backend gpu --iters ${ITERS:-15} --format json \
      > "$res/spmv-large.jsonl" 2> "$res/final.err"
    echo "final rc=$? $(wc -l < "$res/spmv-large.jsonl") lines"; tail -3 "$res/final.err" ;;
  corpus)
    # young1c is complex (the reader rejects it, which would end the run).
    SEGSPARSE_BENCH_GPU_ROWS=${CORPUS_ROWS:-gpu auto,gpu fused,gpu rows,cusparse} timeout 200 .gpu/bin/spmv-bench \
      $(ls .gpu/data/*.mtx.gz | grep -v young1c) --backend gpu --iters ${ITERS:-10} \
      --format json > "$res/corpus.jsonl" 2> "$res/corpus.err"
    echo "corpus rc=$? $(wc -l < "$res/corpus.jsonl") lines"; tail -3 "$res/corpus.err" ;;
  ncu)
    # NCU_RUNS: "matrix|bench row|kernel regex" triples (f64); defaults: before and after.
    sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
    runs=${NCU_RUNS:-"poisson2d:2000|fused-lookback|^spmv_lookback_f64$ poisson2d:2000|rows|^spmv_rows_f64$ poisson2d:2000|fused|^spmv_fused_f64$ poisson2d:2000|cusparse-alg1|csrmv powerlaw:5000000:2.2|fused-lookback|^spmv_lookback_f64$ powerlaw:5000000:2.2|fused|^spmv_fused_f64$ powerlaw:5000000:2.2|fused|^spmv_fixup_f64$ powerlaw:5000000:2.2|cusparse-alg1|csrmv"}
    for r in $runs; do
      m=${r%%|*}; rest=${r#*|}; row=${rest%%|*}; kre=${rest#*|}
      f="$res/ncu-${m%%:*}-$(echo "$kre" | tr -cd 'a-z0-9_').txt"
      SEGSPARSE_BENCH_GPU_ROWS="$row" timeout 120 $NCU --clock-control none -k "regex:$kre" -c 1 $sec \
        .gpu/bin/spmv-bench "$m" --backend gpu --precision f64 --iters 1 > "$f" 2>&1
      echo "== $m $row $kre"; grep -E '^  [a-zA-Z_:<>]+.*\(|DRAM Throughput|Duration|L2 Hit Rate|Registers Per|Achieved Occupancy|Local Memory Spilling Requests  ' "$f" | head -9
    done ;;
  tune)
    # Tile shape of the fused kernel on the irregular kinds, and the row kernel's block size.
    for cfg in "SEGSPARSE_SPMV_ITEMS=4" "SEGSPARSE_SPMV_ITEMS=12" "SEGSPARSE_SPMV_ITEMS=16" "SEGSPARSE_SPMV_THREADS=128" "SEGSPARSE_SPMV_THREADS=512"; do
      env $cfg SEGSPARSE_BENCH_GPU_ROWS="gpu fused,cusparse" timeout 100 .gpu/bin/spmv-bench powerlaw:5000000:2.2 \
        denserows:4000000:4:16:500000 --backend gpu --iters 7 > "$res/tune-$cfg.txt" 2>&1
      echo "== $cfg"; gputab "$res/tune-$cfg.txt"
    done
    for rt in 64 256 512; do
      SEGSPARSE_SPMV_ROWS_THREADS=$rt SEGSPARSE_BENCH_GPU_ROWS="gpu rows" timeout 60 .gpu/bin/spmv-bench poisson2d:2000 \
        poisson3d:160 --backend gpu --iters 7 > "$res/tune-rows$rt.txt" 2>&1
      echo "== rows threads $rt"; gputab "$res/tune-rows$rt.txt"
    done ;;
  ab)
    # A/B of compile-time settings against the defaults of `bench` (same call): streaming loads
    # off, and the fused kernels capped to 5 blocks per SM.
    for cfg in ${AB_CFGS:-SEGSPARSE_SPMV_STREAM=0 SEGSPARSE_SPMV_MIN_BLOCKS=5}; do
      env $cfg SEGSPARSE_BENCH_GPU_ROWS="gpu auto,gpu fused,cusparse" timeout 100 .gpu/bin/spmv-bench \
        powerlaw:5000000:2.2 denserows:4000000:4:16:500000 random:4000000:16 --backend gpu --iters 7 > "$res/ab-$cfg.txt" 2>&1
      env $cfg SEGSPARSE_BENCH_GPU_ROWS="gpu rows,gpu vector,cusparse" timeout 100 .gpu/bin/spmv-bench \
        poisson2d:2000 random:3000000:6 random:4000000:16 --backend gpu --iters 7 >> "$res/ab-$cfg.txt" 2>&1
      echo "== $cfg"; gputab "$res/ab-$cfg.txt"
    done ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout ${SAN_TIMEOUT:-100} compute-sanitizer --tool $tool --error-exitcode 9 .gpu/tests/test-spmv_gpu \
        ${SAN_TESTS:-sizes_around empty_rows one_dense_row} --test-threads=1 > "$res/sanitize-$tool.log" 2>&1
      echo "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' "$res/sanitize-$tool.log" | tr '\n' ' ')"
    done ;;
  esac
  echo "[$mode: $(( $(date +%s) - t0 )) s]"
  tar czf "${OUT:-/tmp}/spmv-results.tgz" -C "$res" . 2>/dev/null  # keep what is done if cut off
done
