#!/usr/bin/env bash
# Device run 2 of benches/results/amg.md: the Python AMG tests on the GPU, numeric re-setup
# times, smoother variants, and an Nsight Compute per-kernel time breakdown of AMG-PCG on
# Poisson 3D 128³. From the repository root with the staged .gpu/ (bin/sparse-solve, python/
# wheel, pytests/ = python/tests of this branch). Writes $OUT/amg2.tgz; summary last.
set -uo pipefail
export SEGSPARSE_REQUIRE_GPU=1 RUST_BACKTRACE=1
res=$(mktemp -d); trap 'tar czf "${OUT:-/tmp}/amg2.tgz" -C "$res" .' EXIT
S=.gpu/bin/sparse-solve

echo "== Python AMG tests (GPU and CPU)"
site=/tmp/segsparse-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/python/segsparse-*.whl
(cd .gpu/pytests && PYTHONPATH=$site timeout 120 python3 -m pytest -q -k amg test_gpu.py test_cpu.py > "$res/pytest.log" 2>&1; echo "pytest rc=$? $(tail -1 "$res/pytest.log")")

run() { local name=$1 spec=$2; shift 2
  timeout 150 $S "$spec" --backend gpu --rhs aones --format json "$@" > "$res/$name.json" 2> "$res/$name.err"; echo "$name rc=$?"; }
run p128 poisson3d:128 --precond amg
run p128-d3 poisson3d:128 --precond amg --amg-degree 3
run p128-d2 poisson3d:128 --precond amg --amg-degree 2 --amg-sweeps 2
run p128-jac poisson3d:128 --precond amg --amg-smoother jacobi --amg-sweeps 2
run p27-d6 poisson3d27:96 --precond amg --amg-degree 6 --amg-cheb-lower 0.0333
run aniso-d6 aniso2d:1000:0.001 --precond amg --amg-degree 6 --amg-cheb-lower 0.0333
run e300-d6 elasticity2d:300 --precond amg --amg-degree 6 --amg-cheb-lower 0.0333
run e1k elasticity2d:1000 --precond amg
run p256 poisson3d:256 --precond amg

echo "== ncu: per-kernel GPU time of AMG-PCG, Poisson 3D 128³, 3 iterations"
timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  $S poisson3d:128 --backend gpu --rhs aones --precond amg --max-iters 3 --check-every 1 > "$res/ncu.csv" 2> "$res/ncu.err"
echo "ncu rc=$?"

echo "== summary"
python3 - "$res" <<'PY'
import csv, json, os, sys, collections
d = sys.argv[1]
for n in ["p128", "p128-d3", "p128-d2", "p128-jac", "p27-d6", "aniso-d6", "e300-d6", "e1k", "p256"]:
    try:
        a = json.loads(open(os.path.join(d, n + ".json")).read().strip().splitlines()[-1])
        print("%-9s it %4d setup %7.3f resetup %7.3f solve %.4f per-it %.3f ms" % (n, a["iterations"],
              a["amg"]["setup"]["total"], a["resetup_seconds"], a["solve_seconds"], 1e3 * a["solve_seconds"] / max(1, a["iterations"])))
    except Exception as e:
        print(n, "failed", e)
try:
    rows = [r for r in csv.reader(open(os.path.join(d, "ncu.csv"))) if len(r) > 10]
    h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit"); gi = h.index("Grid Size") if "Grid Size" in h else None
    tot = collections.defaultdict(float); cnt = collections.Counter()
    for r in rows[1:]:
        v = float(r[vi].replace(",", "")); u = r[ui]
        v = v / 1e3 if u == "nsecond" else (v if u == "usecond" else v * 1e3)
        key = r[ki].split("(")[0] + ("" if gi is None else " grid" + r[gi])
        tot[key] += v; cnt[key] += 1
    print("kernels (all launches of the run, incl. setup uploads), total µs, count:")
    for k, v in sorted(tot.items(), key=lambda x: -x[1])[:28]:
        print("  %9.1f  %5d  %s" % (v, cnt[k], k[:110]))
    print("  total %.1f µs over %d launches" % (sum(tot.values()), sum(cnt.values())))
except Exception as e:
    print("ncu parse failed", e)
PY
