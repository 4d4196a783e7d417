#!/usr/bin/env bash
# Complex matrices on the GPU (benches/results/complex.md), modes: tests memcheck spmv solve.
#   bash benches/complex/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/complex.tgz.
# SciPy's solves run on the host CPU in the background from the start (8 threads), beside the GPU
# steps; CuPy's run after ours. Order: tests, solve, memcheck, spmv (the solver figures before the
# SpMV ones when time runs short). BUDGET (seconds, default 600) bounds the whole script: each
# step's timeout is cut to what is left, and a step is skipped when nothing is; TESTS_S,
# MEMCHECK_S and SPMV_S cut those steps' own limits. GPU_DIR: the staged folder (default .gpu).
MODES="$*" ARCHIVE=complex
here=$(dirname "$0")
. "$here/../common/device-lib.sh"
PROBLEM=${PROBLEM:-helmholtz3d:100:50:0.5} RTOL=${RTOL:-1e-6}
deadline=$(( $(date +%s) + ${BUDGET:-600} ))
# lim N: N seconds, or what is left before the deadline when that is less.
lim() { local l=$(( deadline - $(date +%s) )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
run_step() { local kind=$1 name=$2 t; t=$(lim "$3"); shift 3
  if [ "$t" -gt 5 ]; then "$kind" "$name" "$t" "$@"; else echo "$name: skipped (budget)"; fi; }
if want solve; then
  OMP_NUM_THREADS=8 OPENBLAS_NUM_THREADS=8 timeout "$(lim 600)" python3 "$here/peers.py" "$PROBLEM" "$RTOL" scipy \
    > "$res/peers-scipy.log" 2>&1 &
  scipy_pid=$!
fi
want tests && run_step step tests ${TESTS_S:-120} $T/test-all complex gpu_runtime::every_kernel_source sparse_gpu::transpose --test-threads=1
want tests && [ -x $T/lib-segsparse ] && run_step step tests-lib 30 $T/lib-segsparse complex --test-threads=1
want solve && run_step json solve 60 $G/benches/complex_solvers --bench "$PROBLEM" "$RTOL"
want solve && run_step json peers-cupy 60 python3 "$here/peers.py" "$PROBLEM" "$RTOL" cupy
want memcheck && run_step step memcheck ${MEMCHECK_S:-60} compute-sanitizer --tool memcheck --error-exitcode 1 \
  $T/test-all complex_gpu::complex_gpu_spmv_small_cases --test-threads=1
SPMV="$G/data/young1c.mtx.gz $G/data/raefsky2.mtx.gz $G/data/bcsstk16.mtx.gz $G/data/cage8.mtx.gz \
  $G/data/ca-GrQc.mtx.gz $G/data/luxembourg_osm.mtx.gz $G/data/mbeacxc.mtx.gz $G/data/rajat19.mtx.gz \
  $G/data/sherman5.mtx.gz $G/data/Trefethen_500.mtx.gz helmholtz3d:100:40:0.5 random:1000000:16 \
  powerlaw:1000000:2.2"
for p in c64 c128; do
  want spmv && run_step json "spmv-$p" ${SPMV_S:-60} $B/spmv-bench -p $p --backend gpu --format json --iters 9 $SPMV
done
if want solve; then
  while kill -0 "$scipy_pid" 2>/dev/null && [ "$(lim 60)" -gt 2 ]; do sleep 2; done
  kill "$scipy_pid" 2>/dev/null; wait "$scipy_pid"; echo "peers-scipy: rc=$?"
  grep -E '^\{' "$res/peers-scipy.log" | tee "$res/peers-scipy.jsonl"
fi
want spmv-real && run_step step spmv-real 120 $T/test-all spmv_gpu:: --test-threads=1
exit $fail
