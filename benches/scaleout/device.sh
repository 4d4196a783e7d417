#!/usr/bin/env bash
# Several GPUs of one host: tests, strong scaling of CG on Poisson 3D 256³ (benches/results/README.md), and the distributed AMG's goals of issue 44, modes: tests bench amg amg-weak. On a one-GPU machine the 2-GPU parts skip, the 4-GPU ones below 4.
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
# AMG-PCG on Poisson 3D 256³, strong scaling (goal: setup + solve ≥ 1.7× / 3.0× one GPU's on 2 / 4,
# iterations ≤ 1.2× one GPU's): the one-GPU peer, the distributed AMG (--dist-precond auto), and
# block-Jacobi AMG (--dist-precond block) as the baseline it replaces.
want amg && json amg-one-gpu 300 $B/sparse-solve poisson3d:256 --method cg --precond amg --tol 1e-8 --format json
want amg && [ "$ngpu" -ge 2 ] && json amg-two-gpus 300 $B/sparse-solve poisson3d:256 --method cg --precond amg --tol 1e-8 --gpus 2 --format json
want amg && [ "$ngpu" -ge 4 ] && json amg-four-gpus 300 $B/sparse-solve poisson3d:256 --method cg --precond amg --tol 1e-8 --gpus 4 --format json
want amg && [ "$ngpu" -ge 2 ] && json amg-block-two-gpus 300 $B/sparse-solve poisson3d:256 --method cg --precond amg --tol 1e-8 --gpus 2 --dist-precond block --format json
want amg && [ "$ngpu" -ge 4 ] && json amg-block-four-gpus 300 $B/sparse-solve poisson3d:256 --method cg --precond amg --tol 1e-8 --gpus 4 --dist-precond block --format json
# AMG-PCG weak scaling, about 160³ unknowns per GPU (goal ≥ 85 % on 4): 160³ = 4.10 M on one GPU,
# 202³ = 8.24 M on two (4.12 M each), 254³ = 16.39 M on four (4.10 M each); the generator makes cubes.
want amg-weak && json weak-one-gpu 300 $B/sparse-solve poisson3d:160 --method cg --precond amg --tol 1e-8 --format json
want amg-weak && [ "$ngpu" -ge 2 ] && json weak-two-gpus 300 $B/sparse-solve poisson3d:202 --method cg --precond amg --tol 1e-8 --gpus 2 --format json
want amg-weak && [ "$ngpu" -ge 4 ] && json weak-four-gpus 300 $B/sparse-solve poisson3d:254 --method cg --precond amg --tol 1e-8 --gpus 4 --format json
exit $fail
