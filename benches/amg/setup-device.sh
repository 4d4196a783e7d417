#!/usr/bin/env bash
# The AMG GPU-setup run (benches/results/amg.md, "GPU setup"): tests, then every problem with the
# setup on the device (the default on --backend gpu) and, where it is affordable, on the host
# (--amg-host-setup) in the same call, plain CG, and PyAMG on the machine's CPU; an Nsight Compute
# kernel-time breakdown of one setup.
#
# From the repository root on the GPU machine, with .gpu staged (bin/sparse-solve, tests/*,
# data/bcsstk16.mtx.gz, this script as .gpu/amg-setup-device.sh, benches/peers/pyamg_peer.py as
# .gpu/pyamg_peer.py) and .whl/ (the PyAMG wheel) carried:
#   bash .gpu/amg-setup-device.sh [tests] [bench] [ncu]      (default: all)
# Writes $OUT/amg-setup.tgz; prints a summary table last.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/.gpu/data" RUST_BACKTRACE=1
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/${AMG_ARCHIVE:-amg-setup}.tgz" -C "$res" .' EXIT
modes=${*:-tests bench ncu}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
nproc >> "$res/device.txt"; date -u >> "$res/device.txt"
S=.gpu/bin/sparse-solve
P128=poisson3d:128; P256=poisson3d:256; P27=poisson3d27:96; AN=aniso2d:1000:0.001
E300=elasticity2d:300; E1k=elasticity2d:1000; BC=.gpu/data/bcsstk16.mtx.gz
run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  timeout 150 $S "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"
  echo "$name rc=$? $(tail -1 "$res/$name.err" | cut -c1-200)"
}
for mode in $modes; do
  case $mode in
  tests)
    for t in .gpu/tests/test-amg .gpu/tests/test-amg_gpu_graph; do
      [ -x "$t" ] || continue
      timeout 200 "$t" --test-threads=1 > "$res/$(basename $t).log" 2>&1
      echo "$(basename $t) rc=$? $(grep 'test result' "$res/$(basename $t).log")"
      grep -E "panicked|FAILED" "$res/$(basename $t).log" | head
    done
    timeout 100 compute-sanitizer --tool memcheck --leak-check no .gpu/tests/test-amg gpu_setup --test-threads=1 > "$res/memcheck.log" 2>&1
    echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$res/memcheck.log" | tail -1)" ;;
  bench)
    if python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/pyamg-*.whl; then
      (PYTHONPATH=/tmp/site timeout 200 python3 .gpu/pyamg_peer.py $P128 $P27 $AN $E300 $BC > "$res/pyamg.jsonl" 2> "$res/pyamg.err"; echo "pyamg rc=$?") &
    fi
    for p in "p128 $P128" "p256 $P256" "p27 $P27" "aniso $AN" "e300 $E300" "e1k $E1k" "bcsstk16 $BC"; do
      set -- $p
      run "$1-cg" "$2" --method cg --precond none --rhs-count 10
      run "$1-amg" "$2" --precond amg --rhs-count 10 --amg-setups 2
    done
    # The cycle inside the iteration's CUDA graph against launched from the host (blocks of 4).
    run p128-amg-graphs $P128 --precond amg --check-every 4
    run p128-amg-nographs $P128 --precond amg --check-every 4 --no-graphs
    run aniso-amg-graphs $AN --precond amg --check-every 4
    run aniso-amg-nographs $AN --precond amg --check-every 4 --no-graphs
    wait
    # The host setup in the same process kind, where it takes seconds rather than a minute.
    for p in "p128 $P128" "p27 $P27" "aniso $AN" "e300 $E300" "bcsstk16 $BC"; do
      set -- $p
      run "$1-amg-host" "$2" --precond amg --amg-host-setup
    done ;;
  ncu)
    # Kernel time of one GPU setup (and 1 iteration) at 128^3, by kernel name.
    timeout 200 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      $S $P128 --backend gpu --rhs aones --precond amg --max-iters 1 > "$res/ncu.csv" 2> "$res/ncu.err"
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
for k, v in sorted(t.items(), key=lambda x: -x[1])[:25]:
    print("%-40s %9.1f us %5.1f %% %5d launches" % (k[:40], v, 100 * v / tot, c[k]))
PY
    ;;
  esac
done
echo "== summary"
python3 - "$res" <<'PY' | tee "$res/summary.txt"
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
print("%-9s %8s | %5s %8s | %5s %7s %7s %7s %7s %8s %5s %3s | %7s | %5s %6s %6s" % ("problem", "rows", "cg_it", "cg_s",
      "amg_it", "setup", "resetup", "solve", "s+s/cg", "10rhs/cg", "oc", "lv", "host_st", "py_it", "py_set", "py_sol"))
for k, spec in specs.items():
    c, a, h = load(k + "-cg"), load(k + "-amg"), load(k + "-amg-host")
    if not c or not a:
        print(k, "missing", bool(c), bool(a)); continue
    cg1 = c["solve_seconds"]; cg10 = sum(c["solve_seconds_all"])
    st = a["amg_setup_seconds_all"][-1]; s1 = a["solve_seconds"]; s10 = sum(a["solve_seconds_all"])
    p = py.get(spec, {})
    print("%-9s %8d | %5d %8.4f | %5d %7.3f %7.3f %7.4f %7.3f %8.3f %5.2f %3d | %7s | %5s %6s %6s" % (k, a["n"], c["iterations"], cg1,
          a["iterations"], st, a.get("resetup_seconds") or float("nan"), s1, (st + s1) / cg1, (st + s10) / cg10,
          a["amg"]["operator_complexity"], len(a["amg"]["levels"]),
          "%.3f" % h["amg"]["setup"]["total"] if h else "-",
          p.get("iterations", "-"), "%.2f" % p["setup_seconds"] if p else "-", "%.3f" % p["solve_seconds"] if p else "-"))
    print("          setups %s; phases of the last: " % a["amg_setup_seconds_all"] + " ".join("%s %.3f" % (k2, v) for k2, v in a["amg"]["setup"].items()))
for n in ["p128", "aniso"]:
    g, ng = load(n + "-amg-graphs"), load(n + "-amg-nographs")
    if g and ng:
        print("%s AMG-PCG check-every 4: graphs %d it %.2f ms/it, launched %d it %.2f ms/it" % (n, g["iterations"],
              1e3 * g["solve_seconds"] / g["iterations"], ng["iterations"], 1e3 * ng["solve_seconds"] / ng["iterations"]))
PY
