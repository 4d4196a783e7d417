#!/usr/bin/env bash
# The reliability checks of issue 13 on the GPU machine, in one call (about 1–2 minutes):
# fault tests (out of device memory, failed launch, sticky context error), 8 threads × 1000
# SpMVs and 8 concurrent solves, NaN/Inf propagation, the soak (10^5 SpMVs + 10^3 solves,
# device memory before/after), the same tests' GPU parts under compute-sanitizer memcheck, and
# cold / warm / no-cache start-up.
#
# Run from the repository root after scripts/gpu-stage, with .gpu staged:
#     bash benches/reliability/device.sh
# It prints a markdown table (the rows of benches/results/history/reliability.md) and leaves every log
# in $OUT/reliability.tgz. Exit status: 0 when every check passed.
set -uo pipefail
out=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/reliability.tgz" -C "$out" . 2>/dev/null; rm -rf "$out"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
t=.gpu/tests/test-reliability
[ -x "$t" ] || { echo "missing $t: stage with scripts/gpu-stage first"; exit 2; }
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "device: $device; $(date -u '+%Y-%m-%d %H:%M UTC')"
fail=0
rows=()
row() {
    rows+=("| $1 | $2 | $3 |")
    case "$2" in FAIL*) fail=1 ;; esac
}

# Every test once, without capture, so each prints what it measured (one process: the sticky
# test runs its faulting kernel in a child process of its own).
run_test() { # name filter timeout
    local log="$out/test-$1.log"
    timeout "$3" "$t" "$2" --exact --nocapture --test-threads=1 >"$log" 2>&1
    local rc=$?
    local verdict=pass
    grep -q "test result: ok. 1 passed" "$log" || verdict="FAIL (rc=$rc)"
    # (The verdict is this function's output; the diagnosis goes to stderr.)
    [ "$verdict" = pass ] || { echo "---- $1 failed:"; tail -30 "$log"; } >&2
    echo "$verdict"
}
cut_line() { grep -E "$1" "$2" | head -"${3:-1}" | cut -c1-300 | tr '|' '/' | paste -sd ';' -; }

v=$(run_test oom out_of_device_memory_is_an_error_naming_the_bytes 120)
row "out of device memory (buffer > device; matrix upload and solver vector with the device full)" "$v" \
    "$(cut_line 'uploading|solver vector' "$out/test-oom.log" 2)"
v=$(run_test launch a_failed_launch_names_the_kernel 60)
row "failed launch (4096 threads per block)" "$v" "$(cut_line 'launching kernel' "$out/test-launch.log")"
v=$(run_test sticky a_sticky_context_error_is_reported_not_a_panic 120)
row "sticky context error (kernel calls __trap)" "$v" "$(cut_line 'synchronize after the trap' "$out/test-sticky.log")"
v=$(run_test threads eight_threads_share_one_gpu_for_spmv 120)
row "8 threads × 1000 SpMVs, one GpuCsr, checked vs CPU" "$v" "$(cut_line '8 threads' "$out/test-threads.log")"
v=$(run_test solves eight_concurrent_solves_on_one_gpu 120)
row "8 concurrent CG/BiCGSTAB solves, checked vs CPU" "$v" "$(cut_line '8 concurrent' "$out/test-solves.log")"
v=$(run_test nan spmv_propagates_nan_and_inf_on_the_gpu 60)
row "NaN/Inf propagation, 4 SpMV algorithms" "$v" "-"
v=$(run_test nan_solve solvers_report_nan_as_non_finite 60)
row "NaN in b: CG/BiCGSTAB report NonFinite" "$v" "$(cut_line 'gpu cg:' "$out/test-nan_solve.log")"
v=$(run_test send_sync gpu_handles_are_send_and_sync 30)
row "Gpu, GpuCsr, GpuOps are Send + Sync" "$v" "compile-time"

# The soak (ignored by default).
log="$out/test-soak.log"
timeout 300 "$t" soak_1e5_spmvs_and_1e3_solves --ignored --exact --nocapture --test-threads=1 >"$log" 2>&1
rc=$?
if grep -q "test result: ok. 1 passed" "$log"; then v=pass; else v="FAIL (rc=$rc)"; fail=1; tail -30 "$log"; fi
row "soak: 10^5 SpMVs (poisson2d:256) + 10^3 solves (poisson2d:32), pool bytes before/after" "$v" \
    "$(cut_line '^SOAK' "$log")"

# compute-sanitizer memcheck on the NaN and launch tests (short kernels; the others are long).
san=/usr/local/cuda/bin/compute-sanitizer
if [ -x "$san" ]; then
    log="$out/memcheck.log"
    # The launch test provokes an invalid launch on purpose: API errors are its subject, not a finding.
    timeout 120 "$san" --tool memcheck --report-api-errors no --error-exitcode 9 "$t" nan_and_inf_on_the_gpu a_failed_launch \
        --test-threads=1 >"$log" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q "ERROR SUMMARY: 0 errors" "$log"; then v=pass; else v="FAIL (rc=$rc)"; fail=1; tail -30 "$log"; fi
    row "compute-sanitizer memcheck (NaN/Inf SpMV, launch tests)" "$v" "$(cut_line 'ERROR SUMMARY' "$log")"
fi

# Start-up: cold (empty kernel cache), warm (a second process), no cache.
s=.gpu/bin/startup
if [ -x "$s" ]; then
    cache=$(mktemp -d)
    for case in cold warm warm2 nocache; do
        if [ $case = nocache ]; then
            SEGSPARSE_KERNEL_CACHE=0 timeout 60 "$s" >"$out/startup-$case.json" 2>"$out/startup-$case.err"
        else
            SEGSPARSE_CACHE_DIR="$cache" timeout 60 "$s" >"$out/startup-$case.json" 2>"$out/startup-$case.err"
        fi
        rc=$?
        [ $rc = 0 ] || { fail=1; cat "$out/startup-$case.err"; }
        row "start-up, $case" "$([ $rc = 0 ] && echo measured || echo "FAIL (rc=$rc)")" \
            "$(tr -d '{}"' <"$out/startup-$case.json" | tr '|' '/')"
    done
    ls -la "$cache" >"$out/cache-dir.txt"
    rm -rf "$cache"
fi

echo
echo "| check | result | figures |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
printf '%s\n' "${rows[@]}" >"$out/table.md"
exit $fail
