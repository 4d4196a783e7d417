#!/usr/bin/env bash
# The benchmark of solves with several right-hand sides (benches/results/multi_rhs.md): the GPU
# tests of the multi-column solvers and the block product, compute-sanitizer memcheck on small
# block solves, then k = 16 right-hand sides solved as one block against one solve and against
# 16 sequential solves with one setup (sparse-solve --rhs-mode block|sequential), for AMG-PCG on
# Poisson 3D 128³ and elasticity 2D 800², and GMRES(30) + ILU(0) on raefsky2 and sherman5.
#
# From the repository root on the GPU machine, with .gpu/ (scripts/gpu-stage --bin sparse-solve
# --test all) carried:   bash benches/multi_rhs/device.sh [tests] [bench] [memcheck]
# Writes $OUT/multi-rhs.tgz (logs and one JSON per run); prints one line per run.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1 SEGSPARSE_DATA="$PWD/.gpu/data"
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/multi-rhs.tgz" -C "$res" .' EXIT; trap 'exit 143' TERM
modes=${*:-tests bench memcheck}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
date -u >> "$res/device.txt"
S=.gpu/bin/sparse-solve
K=${K:-16}
run() { # name spec method precond timeout extra-args...
  local name=$1 spec=$2 method=$3 pre=$4 tmo=$5; shift 5
  timeout "$tmo" $S "$spec" --backend gpu --method "$method" --precond "$pre" --rhs random \
      --rhs-columns random --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  local rc=$?
  python3 - "$name" "$res/$name.json" "$rc" <<'PY'
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception:
    print(f"{name} rc={rc} (no JSON)"); sys.exit()
print(f"{name} rc={rc} mode={d.get('rhs_mode')} it={d.get('iterations_all')} "
      f"conv={d.get('converged')} setup={d.get('setup_seconds')} solve={d.get('solve_seconds')} "
      f"total={d.get('rhs_seconds_total')} err={d.get('error')}")
PY
}
for mode in $modes; do
  case $mode in
  tests)
    timeout 100 .gpu/tests/test-all multi_rhs:: --test-threads=1 > "$res/tests.log" 2>&1
    echo "tests rc=$? $(grep -E '^test result:' "$res/tests.log" | tail -1)"
    grep -E 'panicked|FAILED|iterations \[' "$res/tests.log" | head -30
    ;;
  memcheck)
    for c in "poisson3d:10 cg amg" "poisson3d:10 cg poly" ".gpu/data/sherman5.mtx.gz gmres ilu0" \
             ".gpu/data/sherman5.mtx.gz bicgstab jacobi"; do
      set -- $c
      timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $S "$1" --backend gpu \
          --method "$2" --precond "$3" --rhs random --rhs-columns random --rhs-count 5 \
          --format json > "$res/memcheck-$2-$3.log" 2>&1
      echo "memcheck $1 $2 $3 rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck-$2-$3.log")"
    done
    ;;
  bench)
    # Warm the kernel cache (one small block solve of each kind) so no run below compiles.
    run warm-amg poisson3d:16 cg amg 60 --rhs-count 2 > /dev/null
    run warm-ilu .gpu/data/sherman5.mtx.gz gmres ilu0 60 --rhs-count 2 > /dev/null
    for p in "poisson3d:128 cg amg" "elasticity2d:800 cg amg" \
             ".gpu/data/raefsky2.mtx.gz gmres ilu0" ".gpu/data/sherman5.mtx.gz gmres ilu0"; do
      set -- $p
      tag=$(basename "$1" .mtx.gz | tr ':' '-')
      run "$tag-one" "$1" "$2" "$3" 60
      run "$tag-block$K" "$1" "$2" "$3" 90 --rhs-count "$K" --rhs-mode block
      run "$tag-seq$K" "$1" "$2" "$3" 90 --rhs-count "$K" --rhs-mode sequential
    done
    ;;
  esac
done
