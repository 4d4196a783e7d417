#!/usr/bin/env bash
# First-run measurement on a fresh device machine: run it as the first command of a new machine,
# from the repository root, with STAGE (default .stage-first) carried: STAGE/bin holds spmv-bench
# and sparse-solve built with SEGSPARSE_KERNEL_ARCHIVE (kernel-archive's output), STAGE/tests/all
# the test executable (optional). The FIRST process is the SpMV with the embedded kernels and an
# empty kernel cache; results in benches/results/first_run.md.
set -uo pipefail
S=${STAGE:-.stage-first}
B=$S/bin
R=$(mktemp -d)
log=$R/log.txt
now() { date +%s.%N; }
flush() { cp "$log" "$R/rows.jsonl" "$OUT/" 2>/dev/null; }
# run LABEL ENV... -- CMD...: wall seconds of one process (stdout, stderr kept)
run() {
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0 t1 rc
  t0=$(now)
  env "${envs[@]}" "$@" > "$R/$label.out" 2> "$R/$label.err"; rc=$?
  t1=$(now)
  local w; w=$(python3 -c "print(f'{$t1-$t0:.3f}')")
  local mods; mods=$(grep -c "segsparse: module" "$R/$label.err")
  local emb; emb=$(grep -c ": embedded," "$R/$label.err")
  local comp; comp=$(grep -c ": compiled" "$R/$label.err")
  local disk; disk=$(grep -c ": disk cache" "$R/$label.err")
  echo "$label rc=$rc wall_s=$w modules=$mods embedded=$emb compiled=$comp disk=$disk" | tee -a "$log"
  echo "{\"label\": \"$label\", \"rc\": $rc, \"wall_s\": $w, \"modules\": $mods, \"embedded\": $emb, \"compiled\": $comp, \"disk_cache\": $disk}" >> "$R/rows.jsonl"
  flush
}
SPMV=("$B/spmv-bench" --backend gpu --precision f64 --iters 1 poisson2d:100)
AMG=("$B/sparse-solve" elasticity3d:56 --backend gpu --method cg --precond amg --tol 1e-8 --format json)
E="SEGSPARSE_KERNEL_LOG=1"
run spmv_embedded_cold  $E SEGSPARSE_CACHE_DIR=$R/c1 -- "${SPMV[@]}"
run spmv_embedded_warm  $E SEGSPARSE_CACHE_DIR=$R/c1 -- "${SPMV[@]}"
run amg_embedded_cold   $E SEGSPARSE_CACHE_DIR=$R/c1 -- "${AMG[@]}"
run amg_embedded_warm   $E SEGSPARSE_CACHE_DIR=$R/c1 -- "${AMG[@]}"
run spmv_nvrtc_cold     $E SEGSPARSE_PREBUILT=0 SEGSPARSE_CACHE_DIR=$R/c2 -- "${SPMV[@]}"
run spmv_nvrtc_warm     $E SEGSPARSE_PREBUILT=0 SEGSPARSE_CACHE_DIR=$R/c2 -- "${SPMV[@]}"
run amg_nvrtc_cold      $E SEGSPARSE_PREBUILT=0 SEGSPARSE_CACHE_DIR=$R/c3 -- "${AMG[@]}"
run amg_nvrtc_warm      $E SEGSPARSE_PREBUILT=0 SEGSPARSE_CACHE_DIR=$R/c3 -- "${AMG[@]}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
nproc | sed 's/^/cores /' | tee -a "$log"
grep -h '"setup_seconds"\|"solve_seconds"\|"iterations"\|"seconds"' $R/amg_*.out | head -40 >> $R/amg_json.txt
flush
tar czf "$OUT/first-run-logs.tgz" -C "$R" --exclude=c1 --exclude=c2 --exclude=c3 --exclude=c5 . 
# tests: the runtime's (archive required) and the SpMV ones, under SEGSPARSE_REQUIRE_GPU=1
[ -x $S/tests/all ] || exit 0
SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_REQUIRE_PREBUILT=1 SEGSPARSE_DATA=$PWD/matrices SEGSPARSE_CACHE_DIR=$R/c5 \
  timeout 25 $S/tests/all gpu_runtime:: --test-threads=1 > $R/tests_gpu_runtime.log 2>&1; echo "tests gpu_runtime rc=$? $(grep 'test result' $R/tests_gpu_runtime.log)" | tee -a "$log"
flush
SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA=$PWD/matrices SEGSPARSE_CACHE_DIR=$R/c5 \
  timeout 40 $S/tests/all spmv_gpu:: --test-threads=1 > $R/tests_spmv.log 2>&1; echo "tests spmv_gpu rc=$? $(grep 'test result' $R/tests_spmv.log)" | tee -a "$log"
flush
tar czf "$OUT/first-run-logs.tgz" -C "$R" --exclude=c1 --exclude=c2 --exclude=c3 --exclude=c5 .
grep -E "panicked|FAILED" $R/tests_*.log | head -20
