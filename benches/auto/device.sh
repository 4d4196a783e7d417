#!/usr/bin/env bash
# The validation of the automatic solve (issue: the default within 1.2× of the fastest explicit
# choice on ≥ 30 systems of ≥ 12 kinds, half the kinds held out of the fit), mode: bench.
#   bash benches/auto/device.sh [bench] [summary]
# From the repository root of a clone on the GPU machine with .gpu/ carried (scripts/gpu-stage:
# release sparse-solve in .gpu/bin, the corpus in .gpu/data, the commit in .gpu/COMMIT).
# Environment: AUTO_BUDGET (seconds for the systems, default 300), AUTO_ONLY (a regular
# expression on "KIND SPEC"), AUTO_ARGS (more run.py arguments; "--backend cpu --size cpu" is
# the small CPU run, labelled CPU).
# Writes $OUT/auto.tgz: raw.jsonl (one line per process), rows.jsonl and table.md (one row per
# system, with device, date and commit: copy them into benches/results/auto.jsonl and auto.md),
# run.log; prints each system's line as it ends.
MODES="$*" ARCHIVE=auto
. "$(dirname "$0")/../common/device-lib.sh"
here=$(dirname "$0")
commit=$(cat "$G/COMMIT" 2>/dev/null || git rev-parse --short HEAD)
# The card the figures come from: a CPU run (AUTO_ARGS="--backend cpu ...") says so.
if [[ " ${AUTO_ARGS:-} " == *" --backend cpu "* ]]; then
  device="CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
else
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  device=${device:-unknown GPU}
fi
if want bench; then
  s=$(date +%s)
  python3 "$here/run.py" --bin "$B/sparse-solve" --backend gpu --data "$SEGSPARSE_DATA" \
    --out "$res/raw.jsonl" --warmup --budget "${AUTO_BUDGET:-300}" ${AUTO_ONLY:+--only "$AUTO_ONLY"} \
    ${AUTO_ARGS:-} 2>&1 | tee "$res/run.log"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  echo "bench: $(( $(date +%s) - s )) s, $(wc -l < "$res/raw.jsonl") processes"
fi
if want summary && [ -s "$res/raw.jsonl" ]; then
  python3 "$here/summarize.py" "$res/raw.jsonl" --device "$device" --commit "$commit" \
    --jsonl "$res/rows.jsonl" --raw-out "$res/raw-rows.jsonl" --md "$res/table.md" || fail=1
fi
exit $fail
