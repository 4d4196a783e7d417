#!/usr/bin/env bash
# hypre's GPU BoomerAMG as the in-run peer of the AMG benchmarks (benches/results/history/amg.md):
# builds hypre (CUDA, sm_90, no MPI, no Umpire) from a source archive on the GPU machine, then
# runs its `ij` driver (BoomerAMG-PCG, rtol 1e-8, device memory and execution) on 3-D 7-point
# Laplacians of the given sizes, printing one JSON line per size with its setup and solve
# seconds and iterations as `ij` reports them.
#
# Memory pool: hypre's own device pool (the CUB caching allocator, once
# `HYPRE_ENABLE_DEVICE_POOL`) was removed upstream (hypre-space/hypre#1405); the pools left are
# Umpire (downloaded at configure time: not possible on the GPU machine) and CUDA's stream-ordered
# allocator, `-DHYPRE_ENABLE_DEVICE_MALLOC_ASYNC=ON`: cudaMallocAsync/cudaFreeAsync on the
# device's default memory pool, whose release threshold hypre's HYPRE_Init raises to the maximum
# (src/utilities/general.c), so freed memory stays in the pool. HYPRE_POOL=async builds that
# (in its own build folder), HYPRE_POOL=none (the default) the plain cudaMalloc build.
#
# The archive: `git archive --prefix=hypre/ HEAD src | xz > .peers/hypre-src.tar.xz` of
# github.com/hypre-space/hypre (about 5 MB; carried to the GPU machine, nothing is downloaded
# there). About 3 minutes to build on 16 cores.
#
#   bash benches/amg/hypre.sh [ARCHIVE] [SIZES...]     (default .peers/hypre-src.tar.xz, 128 200)
# Environment: HYPRE_BUILD (build folder, default /tmp/hypre), HYPRE_POOL (none or async),
# HYPRE_JOBS (default nproc),
# HYPRE_BUILD_TIMEOUT (seconds, default 300), HYPRE_RUN_TIMEOUT (seconds per size, default 60).
set -uo pipefail
archive=${1:-.peers/hypre-src.tar.xz}
shift || true
sizes=${*:-128 200}
build=${HYPRE_BUILD:-/tmp/hypre}
pool=${HYPRE_POOL:-none}
case $pool in
  none) pool_flag=OFF ;;
  async) pool_flag=ON ;;
  *) echo "hypre: HYPRE_POOL must be none or async, not $pool" >&2; exit 2 ;;
esac
jobs=${HYPRE_JOBS:-$(nproc)}
bdir=$build/b-$pool
ij=$bdir/test/ij
if [ ! -x "$ij" ]; then
  mkdir -p "$build"
  [ -d "$build/hypre/src" ] || tar xJf "$archive" -C "$build" ||
    { echo "hypre: cannot unpack $archive" >&2; exit 2; }
  t0=$(date +%s)
  timeout "${HYPRE_BUILD_TIMEOUT:-300}" bash -c "
    cmake -S '$build/hypre/src' -B '$bdir' -DCMAKE_BUILD_TYPE=Release \
      -DHYPRE_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DHYPRE_ENABLE_MPI=OFF \
      -DHYPRE_ENABLE_UMPIRE=OFF -DHYPRE_ENABLE_DEVICE_MALLOC_ASYNC=$pool_flag \
      -DHYPRE_BUILD_TESTS=ON > '$bdir.cmake.log' 2>&1 &&
    cmake --build '$bdir' -j '$jobs' --target ij > '$bdir.build.log' 2>&1"
  rc=$?
  echo "hypre ($pool pool): build rc=$rc in $(( $(date +%s) - t0 )) s" >&2
  [ -x "$ij" ] || ij=$(find "$bdir" -name ij -type f -perm -u+x 2>/dev/null | head -1)
  [ -n "$ij" ] && [ -x "$ij" ] || { tail -20 "$bdir.build.log" "$bdir.cmake.log" >&2; exit 3; }
fi
for n in $sizes; do
  log=$build/ij-$pool-$n.log
  timeout "${HYPRE_RUN_TIMEOUT:-60}" "$ij" -laplacian -n "$n" "$n" "$n" -solver 1 -tol 1e-8 \
    -exec_device -memory_device > "$log" 2>&1
  rc=$?
  python3 - "$n" "$rc" "$log" "$pool" <<'PY'
import json, re, sys
n, rc, path, pool = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
text = open(path, errors="replace").read()
# ij prints "Setup phase times" and "Solve phase times" blocks, each with a wall clock line.
def wall(block):
    m = re.search(block + r".*?wall clock time\s*=\s*([0-9.eE+-]+)", text, re.S)
    return float(m.group(1)) if m else None
it = re.search(r"Iterations\s*=\s*(\d+)", text)
rel = re.search(r"Final Relative Residual Norm\s*=\s*([0-9.eE+-]+)", text)
print(json.dumps({"peer": "hypre BoomerAMG-PCG (ij)", "pool": pool, "problem": f"poisson3d:{n}", "rows": n ** 3,
                  "rc": rc, "setup_seconds": wall("Setup phase times"),
                  "solve_seconds": wall("Solve phase times"),
                  "iterations": int(it.group(1)) if it else None,
                  "relative_residual": float(rel.group(1)) if rel else None}))
PY
done
