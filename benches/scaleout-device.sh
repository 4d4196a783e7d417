#!/usr/bin/env bash
# The scale-out measurements of issues 14 and 22, in one call to a GPU machine of any count
# (nvidia-h200-x2/-x4 for the multi-GPU parts; on nvidia-h100-x1 / nvidia-h200 only the one-GPU
# parts run and the 2-GPU tests skip):
#   issue 22: the one timing model (the same Poisson 3D 256³ CG on one GPU three ways, each solved
#     twice in its process: cold, then warm), --gpus auto (the measured costs and the choice, a
#     large and a small problem), an explicit --gpus N on a small problem (one stderr line),
#     block-Jacobi (IC(0), AMG, a local polynomial) and the distributed polynomial against the
#     same preconditioner on one GPU;
#   issue 14: GPU tests on 1 and 2 GPUs, strong scaling (Poisson 3D 256^3 f64 CG), weak scaling
#     (160^3 per GPU), Jacobi-PCG and BiCGSTAB, the one-process-per-GPU mode under mpirun, and,
#     with the time left, a matrix of more than 2^32 nonzeros (Poisson 3D 864^3 f32).
# Run from the repository root with the staged binaries in .gpu/ (scripts/gpu-stage):
#   bash benches/scaleout-device.sh     # writes $OUT/scaleout.tgz (every log)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1
budget=${SCALEOUT_BUDGET:-540}
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
  grep -E '^(mode=|rank=|test result|test |\{"matrix|sparse-solve:|.*panicked|Error|error|skipped)' "$log/$name.log" \
    | cut -c1-900 | head -30
  echo "   rc=$rc" ; echo "$name rc=$rc" >> "$log/all.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$log/gpus.txt"
nvidia-smi topo -m > "$log/topo.txt" 2>&1
ngpu=$(nvidia-smi -L | wc -l)
# The 2-GPU test cases must run here, not skip, when the machine has two GPUs or more.
step test-dist-gpu 90 env SEGSPARSE_REQUIRE_GPUS="$ngpu" .gpu/tests/test-dist_gpu --test-threads=1 --nocapture
step test-dist-sim 30 .gpu/tests/test-dist_sim --test-threads=1

# --- issue 22 --------------------------------------------------------------------------------
# One timing model: the same problem on one GPU three ways. setup_s / solve_s / per_iter_ms of
# dist_cg and setup_seconds / solve_seconds / seconds_per_iteration of sparse-solve are the same
# intervals now; solve 2 (and sparse-solve's second right-hand side, 1.1·b) is warm.
step t22-single 60 $b/dist_cg single --grid 256 --tol 1e-12 --solves 2
step t22-rank1 60 $b/dist_cg threads --gpus 1 --grid 256 --tol 1e-12 --solves 2
step t22-sparse-solve 90 $b/sparse-solve poisson3d:256 --method cg --tol 1e-12 --rhs-count 2 --format json
# --gpus auto: 1 without NCCL on one GPU; with several, the measured costs and the choice
# (gpu_choice in the JSON), for a problem worth splitting and one that is not.
step t22-auto-large 90 $b/sparse-solve poisson3d:256 --method cg --tol 1e-10 --gpus auto --format json
step t22-auto-small 30 $b/sparse-solve poisson3d:20 --method cg --gpus auto --format json
# Block-Jacobi and the distributed polynomial, one GPU (the references) then all of them.
for p in "ic0" "amg" "poly" "poly --dist-precond block"; do
  tag=$(echo "$p" | tr -d ' -' | sed 's/distprecondblock/-block/')
  step t22-$tag-1 60 $b/sparse-solve poisson3d:128 --method cg --precond $p --tol 1e-10 --format json
  [ "$ngpu" -ge 2 ] && step t22-$tag-$ngpu 60 $b/sparse-solve poisson3d:128 --method cg --precond $p --tol 1e-10 --gpus $ngpu --format json
done
if [ "$ngpu" -ge 2 ]; then
  # An explicit count on a problem too small to gain: runs, and one stderr line says so.
  step t22-small-explicit 30 $b/sparse-solve poisson3d:20 --method cg --gpus $ngpu --format json
  # Block-Jacobi at scale (dist_cg: each rank generates its rows).
  step t22-dist-ic0 60 $b/dist_cg threads --gpus $ngpu --grid 256 --precond ic0 --tol 1e-10
  step t22-dist-poly 60 $b/dist_cg threads --gpus $ngpu --grid 256 --precond poly --tol 1e-10
fi
[ "$ngpu" -ge 2 ] || { echo "one GPU: the multi-GPU measurements of issue 14 are skipped"; echo "total ${SECONDS}s"; exit 0; }

# --- issue 14 --------------------------------------------------------------------------------
counts="1 2"; [ "$ngpu" -ge 4 ] && counts="1 2 4"
# Strong scaling: the same problem on 1 GPU (plain single-GPU solver), then 1, 2 (and 4) ranks.
step strong-single 40 $b/dist_cg single --grid 256 --tol 1e-12
for n in $counts; do step strong-$n 40 $b/dist_cg threads --gpus $n --grid 256 --tol 1e-12; done
# The halo stream at the device's highest priority (issue 22, item 4): does the overlap rise?
step strong-2-halo-high 40 env SEGSPARSE_HALO_PRIORITY=high $b/dist_cg threads --gpus 2 --grid 256 --tol 1e-12
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
