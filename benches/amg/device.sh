#!/usr/bin/env bash
# The AMG benchmark of benches/results/amg.md, on the GPU machine, from the repository root, with
# the staged folder .gpu (bin/sparse-solve, tests/test-amg, data/bcsstk16.mtx.gz, this script and
# benches/peers/pyamg_peer.py copied in as .gpu/pyamg_peer.py) and main's .whl/ (the PyAMG wheel).
#   bash .gpu/amg-device.sh [quick]
# Writes $OUT/amg.tgz (every JSON line and log) and prints a summary table last.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/amg.tgz" -C "$res" .' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
nproc >> "$res/device.txt"
S=.gpu/bin/sparse-solve

python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/pyamg-*.whl && export PYTHONPATH=/tmp/site
P128=poisson3d:128; P256=poisson3d:256; P27=poisson3d27:96; AN=aniso2d:1000:0.001
E300=elasticity2d:300; E1k=elasticity2d:1000; BC=.gpu/data/bcsstk16.mtx.gz
# PyAMG (host CPU) runs beside the GPU tests and sanitizer, which barely use the CPU; it is
# done before our own runs (whose setup is on the CPU) start.
(timeout 200 python3 .gpu/pyamg_peer.py $P128 $P27 $AN $E300 $BC > "$res/pyamg.jsonl" 2> "$res/pyamg.err"; echo "pyamg rc=$?") &
pyamg_pid=$!
echo "== GPU tests"
.gpu/tests/test-amg --test-threads=1 > "$res/tests.log" 2>&1; echo "tests rc=$? $(grep 'test result' "$res/tests.log")"
grep -E "panicked|FAILED" "$res/tests.log" | head
echo "== compute-sanitizer memcheck (GPU test)"
timeout 100 compute-sanitizer --tool memcheck --leak-check no .gpu/tests/test-amg gpu_cycle --test-threads=1 > "$res/memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck.log" | tail -1)"

wait $pyamg_pid

run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  timeout 200 $S "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  echo "$name rc=$?"
}
for p in "p128 $P128" "p256 $P256" "p27 $P27" "aniso $AN" "e300 $E300" "e1k $E1k" "bcsstk16 $BC"; do
  set -- $p
  run "$1-cg" "$2" --method cg --precond none --rhs-count 10
  run "$1-amg" "$2" --precond amg --rhs-count 10
done
# Variants: the Chebyshev interval [ρ/30, 1.1ρ] (PyAMG's).
run p128-amg-l30 $P128 --precond amg --amg-cheb-lower 0.0333
run p27-amg-l30 $P27 --precond amg --amg-cheb-lower 0.0333
run aniso-amg-l30 $AN --precond amg --amg-cheb-lower 0.0333
run e300-amg-l30 $E300 --precond amg --amg-cheb-lower 0.0333
run bcsstk16-amg-l30 $BC --precond amg --amg-cheb-lower 0.0333
# The CPU backend, for the same-process comparison of the cycle on the host.
timeout 100 $S $P128 --backend cpu --rhs aones --format json --precond amg > "$res/p128-amg-cpu.json" 2>&1


echo "== summary"
python3 - "$res" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        return json.loads(open(os.path.join(d, n + ".json")).read().strip().splitlines()[-1])
    except Exception:
        return None
py = {}
try:
    for l in open(os.path.join(d, "pyamg.jsonl")):
        j = json.loads(l); py[j["problem"]] = j
except Exception:
    pass
specs = {"p128": "poisson3d:128", "p256": "poisson3d:256", "p27": "poisson3d27:96",
         "aniso": "aniso2d:1000:0.001", "e300": "elasticity2d:300", "e1k": "elasticity2d:1000",
         "bcsstk16": ".gpu/data/bcsstk16.mtx.gz"}
print("%-9s %8s | %5s %8s | %5s %7s %7s %7s %8s %5s %5s | %5s %7s %7s" % ("problem", "rows", "cg_it", "cg_s",
      "amg_it", "setup", "solve", "s+s/cg", "10rhs/cg", "oc", "lv", "py_it", "py_set", "py_sol"))
for k, spec in specs.items():
    c, a = load(k + "-cg"), load(k + "-amg")
    if not c or not a:
        print(k, "missing", bool(c), bool(a)); continue
    cg1 = c["solve_seconds"]; cg10 = sum(c["solve_seconds_all"])
    # The hierarchy's own setup (sparse-solve's setup_seconds also counts the context and the
    # matrix's upload since issue 22, which CG needs as well).
    st = a["amg"]["setup"]["total"]; s1 = a["solve_seconds"]; s10 = sum(a["solve_seconds_all"])
    p = py.get(spec, {})
    print("%-9s %8d | %5d %8.4f | %5d %7.3f %7.4f %7.3f %8.3f %5.2f %5d | %5s %7s %7s" % (k, a["n"], c["iterations"], cg1,
          a["iterations"], st, s1, (st + s1) / cg1, (st + s10) / cg10, a["amg"]["operator_complexity"], len(a["amg"]["levels"]),
          p.get("iterations", "-"), "%.2f" % p["setup_seconds"] if p else "-", "%.3f" % p["solve_seconds"] if p else "-"))
for n in ["p128-amg-l30", "p27-amg-l30", "aniso-amg-l30", "e300-amg-l30", "bcsstk16-amg-l30", "p128-amg-cpu"]:
    a = load(n)
    if a: print("%-18s it %4d setup %.3f solve %.4f" % (n, a["iterations"], a["amg"]["setup"]["total"], a["solve_seconds"]))
PY
