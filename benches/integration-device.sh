#!/usr/bin/env bash
# One call to the GPU machine that checks merged main: every staged test executable under
# SEGSPARSE_REQUIRE_GPU=1, the front ends with the new preconditioners (CUDA graphs on, the
# default), and a survey of the SpMV kernels on the irregular kinds of issue 20.
#
# Stage here: scripts/gpu-stage ; cp benches/integration-device.sh .gpu/
# On the machine, from the repository root, carrying .gpu:
#   bash .gpu/integration-device.sh [tests] [smoke] [survey]     (default: all three)
# Everything goes into $OUT/integration.tgz; a summary is printed last.
set -uo pipefail
G=.gpu
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
res=$(mktemp -d)
pack() { tar czf "${OUT:-/tmp}/integration.tgz" -C "$res" . 2>/dev/null; }
trap pack EXIT
modes=${*:-tests smoke survey}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
S=$G/bin/sparse-solve
for mode in $modes; do
  case $mode in
  tests)
    # test-reliability fills the device (its out-of-memory case) and runs alone; the others run
    # four at a time (independent processes, small problems).
    one() {
      local t=$1 n; n=$(basename "$1"); local t0; t0=$(date +%s)
      timeout "${TEST_TIMEOUT:-240}" "$t" --test-threads=1 > "$res/$n.log" 2>&1; local rc=$?
      printf '%-28s rc=%-3s %4ds %s\n' "$n" "$rc" $(( $(date +%s) - t0 )) "$(grep -E '^test result:' "$res/$n.log" | tail -1)"
      [ $rc = 0 ] || grep -E 'panicked|FAILED|failed' "$res/$n.log" | head -12
    }
    export -f one; export res
    one $G/tests/test-reliability | tee -a "$res/summary.txt"
    ls $G/tests/* | grep -v test-reliability | xargs -P 4 -I{} bash -c 'one {}' | tee -a "$res/summary.txt"
    pack ;;
  smoke)
    # The preconditioners through sparse-solve on the GPU, graphs on (the default).
    R=$G/data/raefsky2.mtx.gz; B16=$G/data/bcsstk16.mtx.gz
    while read -r name args; do
      timeout 120 $S $args --backend gpu --format json > "$res/smoke-$name.json" 2> "$res/smoke-$name.err"
      echo "smoke $name rc=$? $(head -c 400 "$res/smoke-$name.json" | tr -d '\n' | cut -c1-300) $(tail -1 "$res/smoke-$name.err")" | tee -a "$res/summary.txt"
    done <<EOF
amg-p3d64 poisson3d:64 --method cg --precond amg --rhs aones
amg-p3d128 poisson3d:128 --method cg --precond amg --rhs aones
amg-gmres-e100 elasticity2d:100 --method gmres --precond amg --rhs aones
ilu-raefsky2 $R --method gmres --precond ilu0
ilu-bicg-raefsky2 $R --method bicgstab --precond ilu0
ic-bcsstk16 $B16 --method pcg --precond ic0
gmres-raefsky2 $R --method gmres
EOF
    pack ;;
  survey)
    # Every kernel of the crate and cuSPARSE on held-out-style instances of the irregular kinds.
    SEGSPARSE_BENCH_GPU_ROWS="auto,fused,rows,vector,cusparse" SEGSPARSE_BENCH_VECTOR_LANES=4,8,16,32 \
      timeout 300 $G/bin/spmv-bench poisson3d27:100 poisson3d27:80 powerlaw:5000000:2.0 powerlaw:3000000:1.9 \
      emptyrows:10000000:90:20 emptyrows:4000000:80:24 denserows:8000000:4:8:400000 \
      denserows:3000000:4:30:1000000 rmat:21:16 rmat:22:8 random:3000000:27 \
      --backend gpu --iters ${ITERS:-8} --format json > "$res/survey.jsonl" 2> "$res/survey.err"
    echo "survey rc=$? $(wc -l < "$res/survey.jsonl") lines; $(tail -2 "$res/survey.err")" | tee -a "$res/summary.txt"
    pack ;;
  esac
done
echo "== summary"; cat "$res/summary.txt"
