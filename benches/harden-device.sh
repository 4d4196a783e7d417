#!/usr/bin/env bash
# Issue 23 on the GPU machine, in one call (about 6 minutes): the driver and NVRTC versions found,
# the GPU tests that the issue touches (NaN/Inf on every solver, the device preflight, the
# runtime with the crate's own NVRTC loader, the fault tests), the 10^9-row file and the device
# preflight from the CLIs (time and peak RSS), and the two soaks (Rust, Python) with device
# memory and host RSS sampled.
#
# Staged layout (from the development machine; the GPU machine has no Rust):
#   .gpu/bin/{sparse-solve,spmv-bench,soak}   release executables
#   .gpu/tests/test-<name>                    release test executables
#   .gpu/python/segsparse-*.whl               the abi3 wheel (maturin build --release)
#   .gpu/harden-device.sh, .gpu/soak.py       this script and python/bench/soak.py
# Run from the repository root:  bash .gpu/harden-device.sh [soak seconds, default 90]
# Logs: $OUT/harden.tgz. The summary table comes last.
set -uo pipefail
secs=${1:-90}
out=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/harden.tgz" -C "$out" . 2>/dev/null; rm -rf "$out"' EXIT
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1
rows=()
row() { rows+=("| $1 | $2 | $3 |"); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
date -u '+%Y-%m-%d %H:%M UTC' | tee -a "$out/device.txt"

# 1. Tests (GPU parts must pass: SEGSPARSE_REQUIRE_GPU=1).
for t in bad_input gpu_runtime reliability solvers; do
    exe=.gpu/tests/test-$t
    [ -x "$exe" ] || { row "tests $t" "MISSING" "-"; continue; }
    timeout 100 "$exe" --test-threads=1 --nocapture >"$out/test-$t.log" 2>&1
    rc=$?
    res=$(grep -E '^test result:' "$out/test-$t.log" | tail -1 | cut -c1-90)
    row "tests $t" "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" "$res"
    [ $rc = 0 ] || grep -E 'panicked|FAILED' "$out/test-$t.log" | head -10
done
ver=$(grep -E '^(CUDA driver|NVRTC|NVIDIA)' "$out/test-gpu_runtime.log" | head -3 | paste -sd ';' -)
row "driver and NVRTC found" "reported" "$ver"
ngpu=$(grep -E '^gpu: NaN' "$out/test-bad_input.log" | head -1)
row "NaN/Inf in A, b, x0 on the GPU (cg, pcg, bicgstab, gmres)" "$([ -n "$ngpu" ] && echo pass || echo FAIL)" "$ngpu"

# 2. The 10^9-row files and the device preflight from the CLIs.
printf '%%%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 1\n' >"$out/big67.mtx"
printf '%%%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1\n1 1 1\n' >"$out/big76.mtx"
cli() { # label env... -- command...
    local label=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    # Wall time and the child's peak RSS, measured by Python (no /usr/bin/time needed).
    env "${envs[@]}" python3 -c 'import resource, subprocess, sys, time
t = time.time(); r = subprocess.run(sys.argv[1:])
print("TIME %.3f s %d KB" % (time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr)
sys.exit(r.returncode)' "$@" >"$out/cli-$label.out" 2>"$out/cli-$label.err"
    local rc=$?
    local tm
    tm=$(grep '^TIME' "$out/cli-$label.err" | tail -1)
    local msg
    msg=$(grep -v '^TIME' "$out/cli-$label.err" | head -1 | cut -c1-260 | tr '|' '/')
    row "$label" "exit $rc, $tm" "$msg"
}
cli "sparse-solve big67 --backend gpu" X=1 -- .gpu/bin/sparse-solve "$out/big67.mtx" --backend gpu
cli "sparse-solve big76 --backend gpu" X=1 -- .gpu/bin/sparse-solve "$out/big76.mtx" --backend gpu
cli "spmv-bench big76 --backend gpu" X=1 -- .gpu/bin/spmv-bench "$out/big76.mtx" --backend gpu
cli "upload over a 64 MiB device cap (poisson2d:2000)" SEGSPARSE_MAX_DEVICE_BYTES=64M -- \
    .gpu/bin/sparse-solve poisson2d:2000 --backend gpu
cli "GMRES(100) basis over a 400 MiB device cap (poisson2d:1000)" SEGSPARSE_MAX_DEVICE_BYTES=400M -- \
    .gpu/bin/sparse-solve poisson2d:1000 --backend gpu --method gmres --restart 100
cli "the same GMRES(100) uncapped" X=1 -- \
    .gpu/bin/sparse-solve poisson2d:1000 --backend gpu --method gmres --restart 100 --max-iters 200

# 3. Soaks.
timeout $((secs + 60)) .gpu/bin/soak --rounds 100000 --seconds "$secs" >"$out/soak-rust.jsonl" 2>"$out/soak-rust.err"
rc=$?
row "soak, Rust (uploads + solves, random sizes)" "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" \
    "$(grep '^SOAK' "$out/soak-rust.jsonl" | cut -c1-600)"
site=/tmp/segsparse-site
rm -rf "$site"
wheel=$(ls .gpu/python/segsparse-*.whl | head -1)
python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheel" >"$out/pip.log" 2>&1 ||
    python3 -m zipfile -e "$wheel" "$site"
PYTHONPATH=$site timeout $((secs + 60)) python3 .gpu/soak.py --rounds 100000 --seconds "$secs" \
    >"$out/soak-python.jsonl" 2>"$out/soak-python.err"
rc=$?
row "soak, Python (Matrix upload + solve, random sizes)" "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" \
    "$(grep '^SOAK' "$out/soak-python.jsonl" | cut -c1-600)"
[ $rc = 0 ] || tail -5 "$out/soak-python.err"
PYTHONPATH=$site python3 -c "import segsparse; print(segsparse.gpu_info())" >"$out/gpu_info.txt" 2>&1
row "Python gpu_info()" "reported" "$(head -1 "$out/gpu_info.txt" | tr '|' '/' | cut -c1-300)"

echo
echo "| check | result | figures |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
printf '%s\n' "${rows[@]}" >"$out/table.md"
