#!/usr/bin/env bash
# SpGEMM against cuSPARSE (benches/results/README.md, SpGEMM row), modes: tests amg corpus.
#   bash benches/spgemm/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/spgemm.tgz.
MODES="$*" ARCHIVE=spgemm
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 300 $T/test-all sparse_gpu:: --test-threads=1
want amg && json amg 300 $B/spgemm-bench --amg --format json --reps 5 poisson3d:100 poisson3d27:50 elasticity2d:500 jumps3d:100 poisson3d:128
want corpus && json corpus 300 $B/spgemm-bench --format json --reps 5 "$G/data"
exit $fail
