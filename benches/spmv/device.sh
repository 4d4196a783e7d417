#!/usr/bin/env bash
# SpMV and SpMM on the GPU (benches/results/README.md, SpMV and many-right-hand-side rows), modes: tests bench irregular spmm.
#   bash benches/spmv/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/spmv.tgz.
MODES="$*" ARCHIVE=spmv
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 300 $T/test-all spmv_gpu:: spmm:: --test-threads=1
want tests && step bench-unit 120 $T/bin-spmv-bench --test-threads=1
want bench && json stencils 300 $B/spmv-bench poisson2d:2000 poisson3d:160 --backend gpu --precision both --format json
# The held-out-style irregular instances and two regular ones, every kernel and cuSPARSE (IRR, REG
# and ROWS override them).
IRR=${IRR:-"powerlaw:4000000:2.0 powerlaw:1000000:1.8 powerlaw:3000000:2.2 denserows:5000000:4:20:600000 \
denserows:2000000:6:10:1500000 emptyrows:8000000:85:16 emptyrows:12000000:95:30 rmat:21:12 rmat:20:24"}
REG=${REG:-"random:3000000:24 poisson3d:140"}
want irregular && json irregular 300 env SEGSPARSE_BENCH_GPU_ROWS="${ROWS:-gpu auto,gpu fused,gpu rows,gpu vector,cusparse}" \
  $B/spmv-bench $IRR $REG --backend gpu --iters 8 --format json --seed 7
want spmm && json spmm 300 $B/spmv-bench poisson2d:2000 poisson3d:160 "$G/data/raefsky2.mtx.gz" --backend gpu --rhs 4,8,16,32 --precision both --format json
exit $fail
