#!/usr/bin/env bash
# The scale-out measurements of issue 14, in one call to a 2- or 4-GPU machine (nvidia-h200-x2/-x4):
# GPU tests on 1 and 2 GPUs, strong scaling (Poisson 3D 256^3 f64 CG), weak scaling (160^3 per
# GPU), Jacobi-PCG and BiCGSTAB, the one-process-per-GPU mode under mpirun, sparse-solve --gpus 2,
# and, with the time left, a matrix of more than 2^32 nonzeros (Poisson 3D 864^3 f32).
# Run from the repository root with the staged binaries in .gpu/ (see benches/results/scaleout.md):
#   bash .gpu/scaleout-device.sh     # writes $OUT/scaleout.tgz
set -uo pipefail
export NCCL_NVLS_ENABLE=0 SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1
budget=${SCALEOUT_BUDGET:-225}
log=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/scaleout.tgz" -C "$log" .' EXIT
b=.gpu/bin
# cudarc looks for libnccl.so (or .so.<CUDA major>), not libnccl.so.2: without the dev symlink,
# point it at the runtime library.
if ! ldconfig -p | grep -q 'libnccl.so '; then
  mkdir -p /tmp/ncclib && ln -sf "$(ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}')" /tmp/ncclib/libnccl.so
  export LD_LIBRARY_PATH=/tmp/ncclib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/lib/x86_64-linux-gnu}
ldconfig -p | grep nccl > "$log/nccl.txt"
step() { # step NAME TIMEOUT CMD...: runs CMD with a timeout, logs it, prints the result lines.
  local name=$1 t=$2; shift 2
  local left=$((budget - SECONDS)); [ "$left" -lt 5 ] && { echo "SKIP $name (no time left)"; return; }
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (t=${SECONDS}s, timeout ${t}s): $*" | tee -a "$log/all.log"
  timeout "$t" "$@" > "$log/$name.log" 2>&1; local rc=$?
  grep -E '^(mode=|rank=|test result|test |.*panicked|Error|error|skipped)' "$log/$name.log" | head -30
  echo "   rc=$rc" ; echo "$name rc=$rc" >> "$log/all.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$log/gpus.txt"
nvidia-smi topo -m > "$log/topo.txt" 2>&1
# The 2-GPU test cases must run here, not skip.
step test-dist-gpu 60 env SEGSPARSE_REQUIRE_GPUS="$(nvidia-smi -L | wc -l)" .gpu/tests/test-dist_gpu --test-threads=1 --nocapture
step test-dist-sim 30 .gpu/tests/test-dist_sim --test-threads=1
ngpu=$(nvidia-smi -L | wc -l)
counts="1 2"; [ "$ngpu" -ge 4 ] && counts="1 2 4"
# Strong scaling: the same problem on 1 GPU (plain single-GPU solver), then 1, 2 (and 4) ranks.
step strong-single 40 $b/dist_cg single --grid 256 --tol 1e-12
for n in $counts; do step strong-$n 40 $b/dist_cg threads --gpus $n --grid 256 --tol 1e-12; done
# Weak scaling: 160^3 rows per GPU, a fixed 400 iterations (per-iteration time).
weak_grid() { case $1 in 1) echo 160;; 2) echo 160x160x320;; 4) echo 160x320x320;; esac; }
for n in $counts; do step weak-$n 25 $b/dist_cg threads --gpus $n --grid "$(weak_grid $n)" --tol 1e-30 --max-iters 400; done
# The other solvers on 2 GPUs.
step jacobi-2 20 $b/dist_cg threads --gpus 2 --grid 128 --method jacobi --tol 1e-10
step bicgstab-2 20 $b/dist_cg threads --gpus 2 --grid 128 --method bicgstab --tol 1e-10
# One process per GPU: mpirun starts them, the NCCL id travels through a file.
rm -f /tmp/segsparse-nccl.id
step mpirun-$ngpu 30 mpirun --allow-run-as-root --oversubscribe -np $ngpu -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH -x SEGSPARSE_NCCL_ID_FILE=/tmp/segsparse-nccl.id $b/dist_cg process --grid 128
if [ "$ngpu" -lt 4 ]; then
  # The same without MPI: two processes, rank and size from the environment.
  rm -f /tmp/segsparse-nccl.id
  step procs-2 30 bash -c "SEGSPARSE_RANK=1 SEGSPARSE_NRANKS=2 $b/dist_cg process --grid 128 & SEGSPARSE_RANK=0 SEGSPARSE_NRANKS=2 $b/dist_cg process --grid 128; wait"
fi
step sparse-solve-$ngpu 20 $b/sparse-solve poisson3d:100 --gpus $ngpu --method cg --format json
# More than 2^32 nonzeros, each rank building its own rows: Poisson 3D 864^3 in f32 (4.5e9) over
# 2 GPUs, or 1024^3 (7.5e9) over 4.
if [ "$ngpu" -ge 4 ]; then
  step big-4 200 $b/dist_cg threads --gpus 4 --grid 1024 --f32 --tol 1e-30 --max-iters 100 --reps 5
else
  step big-2 200 $b/dist_cg threads --gpus 2 --grid 864 --f32 --tol 1e-30 --max-iters 100 --reps 5
fi
echo "total ${SECONDS}s"
