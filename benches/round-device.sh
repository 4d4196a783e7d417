#!/usr/bin/env bash
# The second device call of the 2026-11-24 session: the GPU AMG setup (tests, benchmark, kernel
# breakdown: benches/amg/setup-device.sh), CUDA graphs after the thread-safety fix and with
# GMRES recorded (tests, benches/solver_graphs.rs), and the SpMV Auto rule on stencil kinds.
#
# Stage: the .gpu folder (gpu-stage plus the solver_graphs bench as .gpu/benches/solver_graphs,
# this script, benches/amg/setup-device.sh as .gpu/amg-setup-device.sh, benches/peers/
# pyamg_peer.py and cupy_solvers.py in .gpu/), .whl/ with the PyAMG wheel. On the machine, from
# the repository root:  bash .gpu/round-device.sh
# Archives: $OUT/amg-setup.tgz (AMG) and $OUT/round.tgz (the rest).
set -uo pipefail
G=.gpu
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
res=$(mktemp -d)
pack() { tar czf "${OUT:-/tmp}/round.tgz" -C "$res" . 2>/dev/null; }
trap pack EXIT
step() { # name timeout command...
  local name=$1 t=$2; shift 2
  local s; s=$(date +%s)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  printf '%-18s rc=%-3s %4ds %s\n' "$name" "$rc" $(( $(date +%s) - s )) \
    "$(grep -E '^test result:' "$res/$name.log" | tail -1)" | tee -a "$res/summary.txt"
  [ $rc = 0 ] || grep -E 'panicked|FAILED' "$res/$name.log" | head -8 | tee -a "$res/summary.txt"
  pack
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
# 1. Tests of what changed: graphs with several threads, GMRES recorded, reliability.
step graphs-tests 120 $G/tests/test-solver_graphs --test-threads=1 --nocapture
step reliability 120 $G/tests/test-reliability --test-threads=1
step solvers 120 $G/tests/test-solvers gpu --test-threads=1
step spmv-gpu 120 $G/tests/test-spmv_gpu --test-threads=1
step sparse-gpu 60 $G/tests/test-sparse_gpu --test-threads=1
# 2. AMG: tests, benchmark beside plain CG and PyAMG, kernel breakdown of a setup.
bash $G/amg-setup-device.sh tests bench 2>&1 | tee "$res/amg.log"
# 4. SpMV kernels on stencil kinds (the new Auto rule) and the large set, every kernel.
SEGSPARSE_BENCH_GPU_ROWS="auto,fused,rows,vector,cusparse" SEGSPARSE_BENCH_VECTOR_LANES=4,8 \
  step survey 120 $G/bin/spmv-bench poisson3d27:100 poisson3d27:64 elasticity2d:1000 poisson3d:160 \
    --backend gpu --iters 8 --format json
cp "$res/survey.log" "$res/survey.jsonl"
# 3. Graphs benchmark (issue 21 table, GMRES now recorded) and CuPy's CG beside it.
step graphs-bench 150 $G/benches/solver_graphs "$res/solvers-graphs.jsonl"
# 5. Nsight Compute: kernel time of one GPU AMG setup.
AMG_ARCHIVE=amg-ncu bash $G/amg-setup-device.sh ncu 2>&1 | tail -30 | tee "$res/amg-ncu.log"
step cupy 60 python3 $G/cupy_solvers.py "$SEGSPARSE_DATA"
echo "== summary"; cat "$res/summary.txt"; grep -A40 "== summary" "$res/amg.log" | tail -25
