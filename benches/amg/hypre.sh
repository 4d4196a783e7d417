#!/usr/bin/env bash
# hypre's GPU BoomerAMG as the in-run peer of the AMG benchmarks (benches/results/history/amg.md):
# builds hypre (CUDA, sm_90, no MPI, no Umpire) from a source archive on the GPU machine, then
# runs its `ij` driver (BoomerAMG-PCG, rtol 1e-8, device memory and execution) on 3-D 7-point
# Laplacians of the given sizes, printing one JSON line per size with its setup and solve
# seconds and iterations as `ij` reports them.
#
# The archive: `git archive --prefix=hypre/ HEAD src | xz > .peers/hypre-src.tar.xz` of
# github.com/hypre-space/hypre (about 5 MB; carried to the GPU machine, nothing is downloaded
# there). About 3 minutes to build on 16 cores.
#
#   bash benches/amg/hypre.sh [ARCHIVE] [SIZES...]     (default .peers/hypre-src.tar.xz, 128 200)
# Environment: HYPRE_BUILD (build folder, default /tmp/hypre), HYPRE_JOBS (default nproc),
# HYPRE_BUILD_TIMEOUT (seconds, default 300), HYPRE_RUN_TIMEOUT (seconds per size, default 60).
set -uo pipefail
archive=${1:-.peers/hypre-src.tar.xz}
shift || true
sizes=${*:-128 200}
build=${HYPRE_BUILD:-/tmp/hypre}
jobs=${HYPRE_JOBS:-$(nproc)}
ij=$build/b/test/ij
if [ ! -x "$ij" ]; then
  mkdir -p "$build"
  tar xJf "$archive" -C "$build" || { echo "hypre: cannot unpack $archive" >&2; exit 2; }
  t0=$(date +%s)
  timeout "${HYPRE_BUILD_TIMEOUT:-300}" bash -c "
    cmake -S '$build/hypre/src' -B '$build/b' -DCMAKE_BUILD_TYPE=Release \
      -DHYPRE_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DHYPRE_ENABLE_MPI=OFF \
      -DHYPRE_ENABLE_UMPIRE=OFF -DHYPRE_BUILD_TESTS=ON > '$build/cmake.log' 2>&1 &&
    cmake --build '$build/b' -j '$jobs' --target ij > '$build/build.log' 2>&1"
  rc=$?
  echo "hypre: build rc=$rc in $(( $(date +%s) - t0 )) s" >&2
  [ -x "$ij" ] || ij=$(find "$build/b" -name ij -type f -perm -u+x 2>/dev/null | head -1)
  [ -n "$ij" ] && [ -x "$ij" ] || { tail -20 "$build/build.log" "$build/cmake.log" >&2; exit 3; }
fi
for n in $sizes; do
  log=$build/ij-$n.log
  timeout "${HYPRE_RUN_TIMEOUT:-60}" "$ij" -laplacian -n "$n" "$n" "$n" -solver 1 -tol 1e-8 \
    -exec_device -memory_device > "$log" 2>&1
  rc=$?
  python3 - "$n" "$rc" "$log" <<'PY'
import json, re, sys
n, rc, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
text = open(path, errors="replace").read()
# ij prints "Setup phase times" and "Solve phase times" blocks, each with a wall clock line.
def wall(block):
    m = re.search(block + r".*?wall clock time\s*=\s*([0-9.eE+-]+)", text, re.S)
    return float(m.group(1)) if m else None
it = re.search(r"Iterations\s*=\s*(\d+)", text)
rel = re.search(r"Final Relative Residual Norm\s*=\s*([0-9.eE+-]+)", text)
print(json.dumps({"peer": "hypre BoomerAMG-PCG (ij)", "problem": f"poisson3d:{n}", "rows": n ** 3,
                  "rc": rc, "setup_seconds": wall("Setup phase times"),
                  "solve_seconds": wall("Solve phase times"),
                  "iterations": int(it.group(1)) if it else None,
                  "relative_residual": float(rel.group(1)) if rel else None}))
PY
done
