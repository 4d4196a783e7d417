#!/usr/bin/env bash
# Several GPUs of one host: tests and strong scaling of CG on Poisson 3D 256³ (benches/results/README.md), modes: tests bench. On a one-GPU machine the 2-GPU parts skip, the 4-GPU one below 4.
#   bash benches/scaleout/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/scaleout.tgz.
MODES="$*" ARCHIVE=scaleout
. "$(dirname "$0")/../common/device-lib.sh"
ngpu=$(nvidia-smi -L | wc -l)
want tests && step tests 200 env SEGSPARSE_REQUIRE_GPUS="$ngpu" $T/test-all dist_gpu:: dist_sim:: --test-threads=1
want bench && json one-gpu 200 $B/sparse-solve poisson3d:256 --method cg --precond none --tol 1e-10 --format json
want bench && [ "$ngpu" -ge 2 ] && json two-gpus 200 $B/sparse-solve poisson3d:256 --method cg --precond none --tol 1e-10 --gpus 2 --format json
want bench && [ "$ngpu" -ge 4 ] && json four-gpus 200 $B/sparse-solve poisson3d:256 --method cg --precond none --tol 1e-10 --gpus 4 --format json
want bench && [ "$ngpu" -ge 2 ] && json auto 200 $B/sparse-solve poisson3d:256 --method cg --precond none --tol 1e-10 --gpus auto --format json
exit $fail
