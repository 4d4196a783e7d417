#!/usr/bin/env bash
# The AMG benchmark (benches/results/README.md, multigrid rows): the AMG GPU tests, every problem with the setup from the solver's device matrix
# against plain CG in the same process, cycle variants (degree, coarsest size), hypre's GPU
# BoomerAMG on the same Laplacians (benches/amg/hypre.sh), an Nsight Compute launch count of
# one setup, and compute-sanitizer memcheck on the GPU setup test.
#
# From the repository root of a clone on the GPU machine, with .gpu/ (scripts/gpu-stage) and, for
# hypre, .peers/hypre-src.tar.xz carried (see hypre.sh; PyAMG's peer is pyamg_peer.py here):
#   bash benches/amg/device.sh [tests] [bench] [variants] [ncu] [hypre-build] [hypre] [memcheck]
# HYPRE_POOL=async selects hypre's build with CUDA's stream-ordered memory pool (hypre.sh).
# Writes $OUT/amg-resident.tgz; prints one line per run.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/amg-resident.tgz" -C "$res" .' EXIT
modes=${*:-tests bench variants ncu}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
nproc >> "$res/device.txt"; date -u >> "$res/device.txt"
S=.gpu/bin/sparse-solve
run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  timeout 120 $S "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  local rc=$?
  python3 - "$name" "$res/$name.json" "$rc" <<'PY'
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception:
    print(f"{name} rc={rc} (no JSON)"); sys.exit()
s = d.get("amg_setup_seconds_all") or []
a = d.get("amg") or {}
print(f"{name} rc={rc} it={d.get('iterations')} setup_all={[round(x, 4) for x in s]} "
      f"resetup={d.get('resetup_seconds')} solve={d.get('solve_seconds')} "
      f"levels={len(a.get('levels', []))} oc={a.get('operator_complexity')}")
PY
}
hyp() { HYPRE_BUILD=/tmp/hypre bash benches/amg/hypre.sh .peers/hypre-src.tar.xz "$@"; }
for mode in $modes; do
  case $mode in
  tests)
    timeout 300 .gpu/tests/test-all amg:: amg_gpu_graph:: --test-threads=1 > "$res/tests.log" 2>&1
    echo "tests rc=$? $(grep 'test result' "$res/tests.log")"
    grep -E "panicked|FAILED" -A3 "$res/tests.log" | head -20 ;;
  hypre-build)
    (hyp > "$res/hypre-build.jsonl" 2> "$res/hypre-build.err"; echo "hypre build done rc=$?") & ;;
  bench)
    for p in "p96 poisson3d:96" "p128 poisson3d:128" "p200 poisson3d:200" "p27 poisson3d27:96" \
             "aniso poisson2d:1000" "aniso3 aniso2d:1000:0.001" "e300 elasticity2d:300" "e1k elasticity2d:1000"; do
      set -- $p
      run "$1-cg" "$2" --method cg --precond none
      run "$1-amg" "$2" --precond amg --amg-setups 3
    done
    run p128-amg-phases poisson3d:128 --precond amg --amg-setups 2 --amg-phase-times ;;
  variants)
    for p in "p128 poisson3d:128" "aniso3 aniso2d:1000:0.001" "e1k elasticity2d:1000"; do
      set -- $p
      for v in "d2 --amg-degree 2" "d3 --amg-degree 3" "c2k --amg-coarse-size 2000" "s8 --amg-spectral-steps 8"; do
        set -- $p $v
        name=$1-amg-$3; spec=$2; shift 3
        run "$name" "$spec" --precond amg --amg-setups 2 "$@"
      done
    done ;;
  ncu)
    # Every kernel of one setup, one re-setup and one iteration at 96^3, by name.
    timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      $S poisson3d:96 --backend gpu --rhs aones --precond amg --max-iters 1 > "$res/ncu.csv" 2> "$res/ncu.err"
    echo "ncu rc=$?"
    python3 - "$res/ncu.csv" <<'PY' | tee "$res/ncu-summary.txt"
import csv, sys, collections
t = collections.defaultdict(float); c = collections.Counter()
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); u = r[ui]
    v = v / 1e3 if u in ("nsecond", "ns") else (v * 1e3 if u in ("msecond", "ms") else v)
    k = r[ki].split("(")[0]; t[k] += v; c[k] += 1
tot = sum(t.values())
print("kernel time total %.1f us over %d launches" % (tot, sum(c.values())))
for k, v in sorted(t.items(), key=lambda x: -x[1])[:40]:
    print("%-44s %9.1f us %5.1f %% %5d launches" % (k[:44], v, 100 * v / tot, c[k]))
PY
    ;;
  hypre)
    wait
    for n in 96 128 200; do
      run "p$n-amg-h" poisson3d:$n --precond amg --amg-setups 3
      run "p$n-cg-h" poisson3d:$n --method cg --precond none
      hyp $n | tee -a "$res/hypre.jsonl"
    done ;;
  memcheck)
    timeout ${AMG_MEMCHECK_TIMEOUT:-200} compute-sanitizer --tool memcheck --leak-check no .gpu/tests/test-all amg::gpu_setup \
      --test-threads=1 > "$res/memcheck.log" 2>&1
    echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck.log" | tail -1)" ;;
  esac
done
wait
