#!/usr/bin/env bash
# Builds the CUB peer harness with the GPU machine's nvcc and runs it.
#
#   bash benches/prims/run.sh OUT.jsonl [cub-peers args...]     (from the repository root, or
#                                                                 from a staged copy: see device.sh)
#
# The binary is built once per machine into $PEERS_BUILD (default /tmp/segsparse-peers); a
# prebuilt `cub-peers` beside this script (carried from an earlier call) is used as is.
# CUB is header-only and ships with the CUDA toolkit (CCCL): no download, nothing to install.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUT.jsonl [args]}; shift
bin="$here/cub-peers"
if [ ! -x "$bin" ]; then
  build=${PEERS_BUILD:-/tmp/segsparse-peers}; mkdir -p "$build"
  nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  "$nvcc" --version | tail -1 >&2
  "$nvcc" -arch=sm_90 -O3 -std=c++17 -o "$build/cub-peers" "$here/cub_peers.cu"
  bin="$build/cub-peers"
fi
"$bin" "$@" > "$out"
echo "cub-peers: $(wc -l < "$out") measurements in $out" >&2
