#!/usr/bin/env bash
# The Python package on the GPU machine (benches/results/README.md, Python rows): the wheel built
# here (`cd python && maturin build --release --out ../.gpu/python`, after scripts/gpu-stage),
# kernel-cache warm-up, the upload benchmark against cupyx, every pytest. python/device.sh does
# the work and documents its options; this is its place in the suite.
#   bash benches/python/device.sh [WHEEL_DIR]     (from the repository root, .gpu/ carried)
exec bash "$(dirname "$0")/../../python/device.sh" "$@"
