#!/usr/bin/env bash
# The sparsegpu device run (H200): GPU sparse tests, compute-sanitizer memcheck + racecheck,
# ncu on the SpGEMM kernels, spgemm-bench vs cuSPARSE. Stage .gpu/ with gpu-stage (spgemm-bench,
# the sparse_gpu test executable as .gpu/tests/test-sparse_gpu, the corpus in .gpu/data), then run
# `bash benches/spgemm-device.sh` from the repository root there. Logs into $OUT/sparsegpu.tgz.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
L=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/sparsegpu.tgz" -C "$L" . ; rm -rf "$L"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
T=.gpu/tests/test-sparse_gpu
B=.gpu/bin/spgemm-bench
S=/usr/local/cuda/bin/compute-sanitizer
N=/usr/local/cuda/bin/ncu
timeout 80 $T --test-threads=1 > $L/tests.log 2>&1; echo "tests rc=$? $(grep -E '^test result' $L/tests.log)"; grep -E "panicked|FAILED|checked" $L/tests.log | head -20
timeout 140 $B --format json --precision both --reps 5 poisson2d:2000 poisson3d:160 poisson3d27:100 band:2000000:8 tridiag:4000000 .gpu/data > $L/spgemm.jsonl 2> $L/bench.err; echo "bench rc=$?"; tail -3 $L/bench.err
timeout 40 $S --tool memcheck --leak-check no $T --test-threads=1 transpose_diagonal > $L/memcheck1.log 2>&1; echo "memcheck transpose rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck1.log)"
timeout 40 $S --tool memcheck $T --test-threads=1 spgemm_bin_boundaries > $L/memcheck2.log 2>&1; echo "memcheck bins rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck2.log)"
timeout 40 $S --tool racecheck $T --test-threads=1 spgemm_bin_boundaries > $L/racecheck.log 2>&1; echo "racecheck bins rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $L/racecheck.log)"
for m in poisson3d:160 poisson2d:2000 poisson3d27:60 .gpu/data/raefsky2.mtx.gz; do timeout 25 $N --clock-control none -k regex:spgemm_ --launch-count 8 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats $B --reps 1 $m >> $L/ncu.log 2>&1; echo "ncu $m rc=$?"; done
grep -E "^  spgemm|Duration" $L/ncu.log | paste - - | awk '{print $1, $(NF-1), $NF}' | head -40
python3 - $L/spgemm.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
    try: r=json.loads(l)
    except Exception: continue
    print(f"{r['matrix'][:16]:16} {r['dtype']} {r['ours_ms']:.3f} {r['ours_numeric_ms']:.3f} {r['cusparse_ms'] or 0:.3f} x{(r['speedup'] or 0):.2f} {r['max_rel_diff']:.0e}")
PY
