#!/usr/bin/env bash
# Tridiagonal solves, single and batched (benches/results/README.md), modes: tests bench.
#   bash benches/tridiag/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/tridiag.tgz.
MODES="$*" ARCHIVE=tridiag
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 200 $T/test-all tridiag:: --test-threads=1
want bench && step bench 200 $B/tridiag-bench
exit $fail
