#!/usr/bin/env bash
# Krylov solvers: CUDA graphs, fused kernels, batched systems, CuPy as the peer (benches/results/README.md), modes: tests bench batched cupy.
#   bash benches/solvers/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/solvers.tgz.
MODES="$*" ARCHIVE=solvers
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 400 $T/test-all solvers:: solver_graphs:: solver_fused:: batched:: solve_timing:: --test-threads=1
for b in solvers solver_graphs solver_fused; do
  want bench && [ -x "$G/benches/$b" ] && step "bench-$b" 300 "$G/benches/$b" --bench
done
want batched && json batched 200 $B/batched_bench --systems 10000 --kind mixed-spd
want cupy && json cupy 300 python3 benches/solvers/cupy_solvers.py "$G/data"
exit $fail
