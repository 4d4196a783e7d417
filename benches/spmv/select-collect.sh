#!/usr/bin/env bash
# Collects the data the SpMV selection rule is fitted on: every candidate kernel (f32 and f64)
# beside cuSPARSE on generated instances of many kinds and sizes plus the corpus, with the
# pattern statistics of each instance (spmv-bench --features). Run on the GPU machine from the
# repository root with the stage carried: bash STAGE/select-collect.sh STAGE [seconds].
# Writes $OUT/select-raw.jsonl (one line per measurement or feature set) and a log.
set -uo pipefail
stage=${1:-.gpu}; budget=${2:-280}
bin=$stage/bin/spmv-bench
out=${OUT:-/tmp}; raw=$out/select-raw.jsonl; log=$out/select.log
export SEGSPARSE_BENCH_GPU_ROWS=auto,fused,rows,vector,cusparse
export SEGSPARSE_BENCH_VECTOR_LANES=2,4,8,16,32
export SEGSPARSE_CACHE_DIR=${SEGSPARSE_CACHE_DIR:-/tmp/segsparse-cache}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
run() { # one group per process: a crash loses one group only
  local t; t=$(left); [ "$t" -gt 8 ] || { echo "skip (time): $*" >> "$log"; return; }
  timeout "$t" "$bin" --backend gpu --precision both --format json --features --iters 5 \
    --warmup-ms 8 "$@" >> "$raw" 2>> "$log" || echo "rc=$? for $*" >> "$log"
}
# Large instances of every kind (the ones that decide what users feel), then medium, then the corpus.
run poisson3d:160 poisson2d:2000 poisson3d27:120 poisson3d27:100
run knn3d:2000000:10:x knn3d:2000000:16:morton knn3d:1000000:12:random
run blocks:2000000:32:2 blocks:1000000:32:4 blocks:800000:16:8
run zipf:4000000:2.0:1000:0 zipf:2000000:1.5:20000:0 zipf:4000000:1.8:200:5000
run arrow:4000000:4:6 arrow:2000000:16:4
run rmat:22:16 rmat:22:16:0.45:0.22:0.22 rmat:21:16:0.35:0.25:0.25
run powerlaw:4000000:2.0 powerlaw:2000000:2.5 powerlaw:1000000:1.8
run random:3000000:6 random:2000000:16 random:1000000:32
run denserows:1000000:4:8:200000 emptyrows:5000000:90:20 emptyrows:4000000:50:8 wide:100000:10000000:64
run aniso2d:2000:0.001 elasticity2d:1000 poisson3d27:60 poisson3d:100
run knn3d:300000:10:x blocks:200000:32:2 zipf:500000:2.0:1000:0 arrow:500000:4:6 rmat:18:16:0.45:0.22:0.22
run knn3d:4000000:8:x knn3d:1000000:24:morton blocks:1000000:8:6 zipf:3000000:1.2:64:0
run $(ls "$stage"/data/*.mtx.gz 2>/dev/null | head -40)
echo "done in $(( $(date +%s) - start )) s" | tee -a "$log"
