#!/usr/bin/env bash
# Complex matrices on the GPU (benches/results/complex.md), modes: tests memcheck spmv solve.
#   bash benches/complex/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/complex.tgz.
# SciPy's solves run on the host CPU in the background from the start (8 threads), beside the GPU
# steps; CuPy's run after ours.
MODES="$*" ARCHIVE=complex
here=$(dirname "$0")
. "$here/../common/device-lib.sh"
PROBLEM=${PROBLEM:-helmholtz3d:100:50:0.5} RTOL=${RTOL:-1e-6}
if want solve; then
  OMP_NUM_THREADS=8 OPENBLAS_NUM_THREADS=8 timeout 500 python3 "$here/peers.py" "$PROBLEM" "$RTOL" scipy \
    > "$res/peers-scipy.log" 2>&1 &
  scipy_pid=$!
fi
want tests && step tests 300 $T/test-all complex gpu_runtime::every_kernel_source spmv_gpu:: sparse_gpu:: --test-threads=1
want tests && step tests-lib 120 $T/lib-segsparse complex --test-threads=1
want memcheck && step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
  $T/test-all complex_gpu::complex_gpu_spmv_small_cases complex_gpu_solve::complex_gpu_core --test-threads=1
SPMV="$G/data/young1c.mtx.gz $G/data/raefsky2.mtx.gz $G/data/bcsstk16.mtx.gz $G/data/cage8.mtx.gz \
  $G/data/ca-GrQc.mtx.gz $G/data/luxembourg_osm.mtx.gz $G/data/mbeacxc.mtx.gz $G/data/rajat19.mtx.gz \
  $G/data/sherman5.mtx.gz $G/data/Trefethen_500.mtx.gz helmholtz3d:100:40:0.5 helmholtz3d:160:60:0.5 \
  random:1000000:16 powerlaw:1000000:2.2"
for p in c64 c128; do
  want spmv && json "spmv-$p" 200 $B/spmv-bench -p $p --backend gpu --format json --iters 9 $SPMV
done
want solve && json solve 200 $G/benches/complex_solvers --bench "$PROBLEM" "$RTOL"
want solve && json peers-cupy 200 python3 "$here/peers.py" "$PROBLEM" "$RTOL" cupy
if want solve; then
  wait "$scipy_pid"; echo "peers-scipy: rc=$?"
  grep -E '^\{' "$res/peers-scipy.log" | tee "$res/peers-scipy.jsonl"
fi
exit $fail
