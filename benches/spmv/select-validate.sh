#!/usr/bin/env bash
# Validates the SpMV selection on fresh instances (other sizes and seeds than
# select-collect.sh, and parameter sets the rule was not fitted on): Auto (the rule), Auto after
# SpmvPlan::tune, every candidate kernel and cuSPARSE, f32 and f64, with the features and both
# choices per matrix. Run on the GPU machine from the repository root with the stage carried:
#   bash STAGE/select-validate.sh STAGE [seconds]     -> $OUT/select-validate.jsonl
set -uo pipefail
stage=${1:-.gpu}; budget=${2:-120}
bin=$stage/bin/spmv-bench
out=${OUT:-/tmp}; raw=$out/select-validate.jsonl; log=$out/select-validate.log
export SEGSPARSE_BENCH_GPU_ROWS=auto,fused,rows,vector,cusparse,tuned
export SEGSPARSE_BENCH_VECTOR_LANES=2,4,8,16,32
# A fresh cache directory: every tuning is timed, none read from an earlier run.
export SEGSPARSE_CACHE_DIR=$(mktemp -d)
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
run() {
  local t; t=$(left); [ "$t" -gt 8 ] || { echo "skip (time): $*" >> "$log"; return; }
  timeout "$t" "$bin" --backend gpu --precision both --format json --features --iters 5 \
    --warmup-ms 8 --seed 2 "$@" >> "$raw" 2>> "$log" || echo "rc=$? for $*" >> "$log"
}
run knn3d:2000000:10:x poisson3d27:120 knn3d:1500000:12:x knn3d:2000000:10:random
run poisson3d27:90 elasticity2d:1400 aniso2d:2500:0.01 poisson2d:3000 poisson3d:130
run blocks:1500000:24:3 blocks:600000:32:5 knn3d:1500000:20:morton
run zipf:3000000:1.6:3000:20000 zipf:2000000:2.4:500:0 arrow:3000000:8:5
run rmat:21:24:0.5:0.2:0.2 rmat:22:8:0.4:0.25:0.25 powerlaw:3000000:2.2 random:2500000:10
run emptyrows:3000000:70:12 wide:200000:8000000:32 denserows:2000000:6:16:300000
echo "done in $(( $(date +%s) - start )) s" >> "$log"
