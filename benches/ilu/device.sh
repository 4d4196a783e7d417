#!/usr/bin/env bash
# ILU(0)/IC(0) and the automatic choice (benches/results/README.md), modes: tests bench.
#   bash benches/ilu/device.sh [MODE...]   (from the repository root of a clone on the GPU machine,
#   with .gpu/ from `scripts/gpu-stage --bench` carried; default: every mode). Logs: $OUT/ilu.tgz.
MODES="$*" ARCHIVE=ilu
. "$(dirname "$0")/../common/device-lib.sh"
want tests && step tests 300 $T/test-all ilu:: --test-threads=1
want bench && json ilu 400 $B/ilu-bench --modes-only --format json
exit $fail
