#!/usr/bin/env bash
# Values stored in f32 under f64 vectors (benches/results/mixed.md), modes: tests bench memcheck ncu.
#   bash benches/mixed/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage` carried: test-all in tests/, mixed_bench and the examples in
#   bin/; default: every mode). Logs and JSON rows: $OUT/mixed.tgz.
MODES="$*" ARCHIVE=mixed
. "$(dirname "$0")/../common/device-lib.sh"
CUDA_BIN=${CUDA_BIN:-/usr/local/cuda/bin}
# The mixed GPU tests, and the f32/f64 SpMV tests whose kernels now take the value type apart.
want tests && step tests 60 $T/test-all mixed::gpu:: spmv_gpu::sizes_around_tile_boundaries \
  spmv_gpu::empty_rows_everywhere spmv_gpu::power_law_rows spmv_gpu::one_row_of_a_million \
  --test-threads=1
# CG Poisson 3D 200³/240³, AMG-PCG 240³, GMRES(30) on 10⁶ rows (BENCH overrides the modes:
# the robustness corpus and SpMV against cuSPARSE are `corpus spmv`).
want bench && json bench 100 $B/mixed_bench ${BENCH:-cg amg gmres corpus spmv}
# compute-sanitizer on the new kernels (every mixed algorithm, the exact copy).
want memcheck && step memcheck 30 "$CUDA_BIN/compute-sanitizer" --tool memcheck --error-exitcode 1 \
  $T/test-all mixed::gpu::gpu_mixed_product --test-threads=1
# Nsight Compute: the row and fused kernels, f64 and f32 values under f64 vectors.
want ncu && step ncu 40 "$CUDA_BIN/ncu" --kernel-name regex:'spmv_(rows|fused)_f(32f)?64$' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy $B/mixed_bench ncu
exit $fail
