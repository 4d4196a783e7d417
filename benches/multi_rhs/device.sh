#!/usr/bin/env bash
# The benchmark of solves with several right-hand sides (benches/results/multi_rhs.md): the GPU
# tests of the multi-column solvers and the block steps, compute-sanitizer memcheck on the block
# kernels, Nsight Compute on the block steps, then k right-hand sides solved as one block against
# k sequential solves with one setup (sparse-solve --rhs-mode block|sequential; the sequential
# run's later solves give the time of one solve): CG and BiCGSTAB without a preconditioner, 32
# columns, on 3D Poisson stencils (one below and one above the fused-kernel bound of 33,792
# rows), AMG-PCG with 16 columns on Poisson 3D 128³, and GMRES(30) + ILU(0) with 16 columns on
# raefsky2.
#
# From the repository root on the GPU machine, with the staged binaries and matrices in $STAGE
# (default .gpu: bin/sparse-solve, tests/test-all, data/raefsky2.mtx.gz):
#   bash benches/multi_rhs/device.sh [tests] [bench] [memcheck] [ncu]
# Writes $OUT/multi-rhs.tgz (logs and one JSON per run); prints one line per run.
set -uo pipefail
STAGE=${STAGE:-.gpu}
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1 SEGSPARSE_DATA="$PWD/$STAGE/data"
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/multi-rhs.tgz" -C "$res" .' EXIT; trap 'exit 143' TERM
modes=${*:-tests bench memcheck}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
date -u >> "$res/device.txt"
S=$STAGE/bin/sparse-solve
run() { # name spec method precond k mode timeout extra-args...
  local name=$1 spec=$2 method=$3 pre=$4 k=$5 mode=$6 tmo=$7; shift 7
  timeout "$tmo" $S "$spec" --backend gpu --method "$method" --precond "$pre" --rhs random \
      --rhs-columns random --rhs-count "$k" --rhs-mode "$mode" --format json "$@" \
      > "$res/$name.json" 2> "$res/$name.err"
  local rc=$?
  python3 - "$name" "$res/$name.json" "$rc" <<'PY'
import json, statistics, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception:
    print(f"{name} rc={rc} (no JSON)"); sys.exit()
its, secs = d.get("iterations_all") or [], d.get("solve_seconds_all") or []
one = statistics.median(secs[1:]) if d.get("rhs_mode") == "sequential" and len(secs) > 1 else None
print(f"{name} rc={rc} it={min(its, default=0)}..{max(its, default=0)} conv={d.get('converged')} "
      f"setup={d.get('setup_seconds')} total={d.get('rhs_seconds_total')} one={one} err={d.get('error')}")
PY
}
for mode in $modes; do
  case $mode in
  tests)
    timeout ${TESTS_TIMEOUT:-150} "$STAGE/tests/test-all" ${TESTS_FILTER:-multi_rhs::} --test-threads=1 \
        > "$res/tests.log" 2>&1
    echo "tests rc=$? $(grep -E '^test result:' "$res/tests.log" | tail -1)"
    grep -E 'panicked|FAILED|^test .* (ok|FAILED)$' "$res/tests.log" | head -30
    ;;
  memcheck)
    # The block kernels of every family on small systems (fused) and one above the bound
    # (separate kernels): CG, PCG + AMG (block poly/axpy/scale/copy), BiCGSTAB + Jacobi, GMRES +
    # swept ILU(0).
    # (sherman5: BiCGSTAB + Jacobi, fused; raefsky2: GMRES + ILU(0) with swept triangles.)
    # MEMCHECK_QUICK=1: one run per kernel family (AMG-PCG with 35 columns: two launches of the
    # separate CG and vector block kernels).
    cases=("poisson3d:12 cg none 35" "poisson3d:36 cg none 3" "poisson3d:10 cg amg 5"
           "$STAGE/data/sherman5.mtx.gz bicgstab jacobi 5" "poisson3d:36 bicgstab none 3"
           "$STAGE/data/raefsky2.mtx.gz gmres ilu0 4")
    [ -n "${MEMCHECK_QUICK:-}" ] && cases=("poisson3d:8 cg amg 35" "poisson3d:8 cg none 3"
           "$STAGE/data/sherman5.mtx.gz bicgstab jacobi 3" "poisson3d:34 bicgstab none 2"
           "$STAGE/data/raefsky2.mtx.gz gmres ilu0 3")
    for c in "${cases[@]}"; do
      set -- $c
      tag=$(basename "$1" .mtx.gz | tr ':' '-')-$2-$3-$4
      timeout ${MEMCHECK_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $S "$1" --backend gpu \
          --method "$2" --precond "$3" --rhs random --rhs-columns random --rhs-count "$4" \
          --rhs-mode block --max-iters ${MEMCHECK_ITERS:-40} --format json \
          > "$res/memcheck-$tag.log" 2>&1
      echo "memcheck $tag rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck-$tag.log")"
    done
    ;;
  ncu)
    # The block steps of a 32-column CG (fused, small system) and BiCGSTAB (separate kernels).
    timeout ${NCU_TIMEOUT:-90} ncu --kernel-name regex:'block_' --launch-skip 20 --launch-count 6 \
        --section SpeedOfLight --section Occupancy --section LaunchStats \
        $S poisson3d:40 --backend gpu --method bicgstab --precond none --rhs random \
        --rhs-columns random --rhs-count 32 --rhs-mode block --max-iters 40 --format json \
        > "$res/ncu-bicgstab.log" 2>&1
    echo "ncu bicgstab rc=$?"; grep -E '^  block_|Memory Throughput|Duration|Achieved Occupancy' "$res/ncu-bicgstab.log" | head -24
    timeout ${NCU_TIMEOUT:-60} ncu --kernel-name regex:'spmv_columns|ilu_apply_sweeps_cols|block_gmres' \
        --launch-skip 10 --launch-count 3 --section SpeedOfLight --section LaunchStats \
        $S "$STAGE/data/raefsky2.mtx.gz" --backend gpu --method gmres --precond ilu0 --rhs random \
        --rhs-columns random --rhs-count 16 --rhs-mode block --max-iters 40 --format json \
        > "$res/ncu-gmres.log" 2>&1
    echo "ncu gmres rc=$?"; grep -E '^  (block_|ilu_)|Memory Throughput|Duration' "$res/ncu-gmres.log" | head -16
    ;;
  bench)
    # Warm the kernel cache (one small block solve of each kind) so no run below compiles.
    run warm-cg poisson3d:16 cg none 2 block 60 > /dev/null
    run warm-bicg poisson3d:16 bicgstab none 2 block 60 > /dev/null
    run warm-amg poisson3d:16 cg amg 2 block 60 > /dev/null
    run warm-ilu "$STAGE/data/raefsky2.mtx.gz" gmres ilu0 2 block 60 > /dev/null
    for p in "poisson3d-24 poisson3d:24 cg none 32" "poisson3d-24 poisson3d:24 bicgstab none 32" \
             "poisson3d-64 poisson3d:64 cg none 32" "poisson3d-64 poisson3d:64 bicgstab none 32" \
             "poisson3d-128 poisson3d:128 cg amg 16" "raefsky2 $STAGE/data/raefsky2.mtx.gz gmres ilu0 16"; do
      set -- $p
      run "$1-$3-block$5" "$2" "$3" "$4" "$5" block 90
      run "$1-$3-seq$5" "$2" "$3" "$4" "$5" sequential 90
    done
    ;;
  esac
done
