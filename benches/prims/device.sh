#!/usr/bin/env bash
# Scan, radix sort and segmented reduce against CUB (benches/results/README.md), modes: tests bench cub.
#   bash benches/prims/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/prims.tgz.
MODES="$*" ARCHIVE=prims
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 300 $T/test-all primitives_scan:: primitives_more:: --test-threads=1
want bench && json scan 200 $B/scan-bench --format json
want bench && json prims 300 $B/prims-bench --format json
# CUB's figures in the same call (built here with nvcc; benches/prims/merge.py joins the rows).
want cub && step cub 300 bash benches/prims/run.sh "$res/cub.jsonl"
exit $fail
