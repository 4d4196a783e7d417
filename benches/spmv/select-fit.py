#!/usr/bin/env python3
"""Fits the GPU SpMV selection rule (`choose` in src/spmv/gpu.rs) to the measurements of
select-collect.sh and validates it leave-one-kind-out.

    python3 benches/spmv/select-fit.py RAW.jsonl [--rule PARAMS.json]

The rule family (the same as the Rust code, with its thresholds as parameters):
- small matrices (fewer than 2^22 entries): the vector kernel with lanes from the mean row length,
  unless the rows are very irregular (CV > small_cv), then the look-back kernel when no row is
  longer than a tile, else the fused kernel;
- large irregular matrices (CV > cv, or longest row > spike·mean + 4, or empty rows): fused;
- large regular matrices with short local rows (mean ≤ rows_mean, x lines per entry ≤
  rows_lines): one thread per row;
- large regular matrices with scattered columns and long rows (lines per entry > scatter and
  mean ≥ fused_mean): fused;
- other regular matrices: the vector kernel with 2^round(log2(mean / e)) lanes (e = e32 or e64
  entries per lane, by precision), 2..32.
Pure Python (no NumPy): the grid is small.
"""
import collections
import itertools
import json
import math
import sys

KERNELS = ["fused", "fused-lookback", "rows", "vector2", "vector4", "vector8", "vector16",
           "vector32"]
TILE = {"f32": 2048, "f64": 2048}  # SpmvPolicy::tile: 256 threads × 8 entries
# Longest row for which short local rows run one thread per row whatever their spread (gpu.rs
# ROWS_MAX_ROW; set from the H200 run on geolap:2000000:6+rcm, spmv.md, not fitted here).
ROWS_MAX_ROW = 32


def kind_of(m):
    if m.endswith(".mtx.gz") or m.endswith(".mtx"):
        return "corpus"
    return m.split(":")[0]


def load(path):
    feats, times, autos = {}, collections.defaultdict(dict), {}
    for line in open(path):
        r = json.loads(line)
        if "features" in r:
            feats[r["matrix"]] = r["features"]
            autos[r["matrix"]] = r.get("auto") or {}
            continue
        if r.get("backend") != "gpu" or r.get("median_us") is None:
            continue
        name = r["implementation"].replace("segsparse gpu ", "")
        times[(r["matrix"], r["precision"])][name] = r["median_us"]
    inst = []
    for (m, p), d in times.items():
        if m not in feats:
            continue
        ks = {k: d[k] for k in KERNELS if k in d}
        best = min(ks.values())
        cs = min(d.get("cusparse-alg1", math.inf), d.get("cusparse-alg2", math.inf))
        inst.append(dict(matrix=m, prec=p, kind=kind_of(m), f=feats[m], t=ks, best=best,
                         cusparse=cs, auto=d.get("auto"), old=autos[m].get(p)))
    return inst


def lanes_for(mean, e):
    # As lanes_for in src/spmv/gpu.rs: the power of two nearest in log scale, 2..=32.
    x = max(max(mean, 1.0) / e, 1.0)
    return 1 << int(min(5.0, max(1.0, math.floor(math.log2(x) + 0.5))))


def choose(f, prec, P):
    mean, cv, mx = f["mean"], f["cv"], f["max"]
    lines = f["lines_per_entry_f64"] if prec == "f64" else f["lines_per_entry_f32"]
    if lines != lines:  # unknown (matrices built on the device): judge by the spread
        lines = 1.0 if f["spread"] > 131072 else 0.0
    e = P["e64"] if prec == "f64" else P["e32"]
    if f["nnz"] < P["small_nnz"]:
        if cv > P["small_cv"]:
            return "fused-lookback" if mx <= TILE[prec] else "fused"
        return "vector%d" % lanes_for(mean, P["e_small"])
    short_local = mean <= P["rows_mean"] and lines <= P["rows_lines"]
    if short_local and mx <= ROWS_MAX_ROW and f["empty_frac"] == 0:
        return "rows"
    if cv > P["cv"] or mx > P["spike"] * mean + 4 or f["empty_frac"] > 0:
        return "fused"
    if short_local:
        return "rows"
    if lines > P["scatter"]:
        if mean >= P["fused_mean"]:
            return "fused"
        return "vector%d" % lanes_for(mean, P["e_scatter"])
    return "vector%d" % lanes_for(mean, e)


GRID_LARGE = dict(cv=[0.3, 0.5], spike=[2.0], rows_mean=[6, 8, 10, 12],
                  rows_lines=[0.1, 0.2, 0.5], e32=[3, 4, 5, 6], e64=[2, 3, 4],
                  scatter=[0.5, 0.9], fused_mean=[12, 16, 24, 1e9], e_scatter=[1.5, 2, 3, 4])
GRID_SMALL = dict(small_nnz=[1 << 19, 1 << 20, 1 << 22], small_cv=[1.0, 2.0, 3.0, 4.0],
                  e_small=[1, 2, 3, 4])


def regret(i, P):
    return i["t"][choose(i["f"], i["prec"], P)] / i["best"]


def score(insts, P):
    if not insts:
        return 0.0
    logs = [math.log(regret(i, P)) for i in insts]
    return sum(logs) / len(logs) + 0.5 * max(logs)


def fit(insts):
    # Two stages: the large-matrix thresholds on the instances of 2^22 entries or more, then
    # the small-matrix ones (and where "small" ends) on all instances with those fixed.
    large = [i for i in insts if i["f"]["nnz"] >= (1 << 22)]
    best = None
    base = {k: v[0] for k, v in GRID_SMALL.items()}
    base["small_nnz"] = 0
    for vals in itertools.product(*GRID_LARGE.values()):
        P = dict(base, **dict(zip(GRID_LARGE, vals)))
        s = score(large, P)
        if best is None or s < best[0] - 1e-12:
            best = (s, P)
    Pl = {k: best[1][k] for k in GRID_LARGE}
    best = None
    for vals in itertools.product(*GRID_SMALL.values()):
        P = dict(Pl, **dict(zip(GRID_SMALL, vals)))
        s = score(insts, P)
        if best is None or s < best[0] - 1e-12:
            best = (s, P)
    return best[1]


def summary(insts, P):
    by = collections.defaultdict(list)
    for i in insts:
        by[i["kind"]].append(regret(i, P))
    return {k: (max(v), math.exp(sum(map(math.log, v)) / len(v)), len(v)) for k, v in by.items()}


def main():
    insts = load(sys.argv[1])
    P = fit(insts)
    print("fitted on all kinds:", json.dumps(P))
    kinds = sorted({i["kind"] for i in insts})
    print("\nleave-one-kind-out: worst / geo-mean regret vs the best kernel")
    print(f"{'kind':14s} {'n':>3s} {'fitted: worst':>14s} {'geo':>6s} {'held out: worst':>16s} "
          f"{'geo':>6s} {'old rule: worst':>16s}")
    all_fit, all_out = summary(insts, P), {}
    rows = []
    for k in kinds:
        train = [i for i in insts if i["kind"] != k]
        test = [i for i in insts if i["kind"] == k]
        Pk = fit(train)
        out = summary(test, Pk)[k]
        old = max(i["auto"] / i["best"] for i in test)
        all_out[k] = out
        print(f"{k:14s} {out[2]:3d} {all_fit[k][0]:14.2f} {all_fit[k][1]:6.2f} {out[0]:16.2f} "
              f"{out[1]:6.2f} {old:16.2f}")
        rows.append(dict(kind=k, n=out[2], fitted_worst=all_fit[k][0], fitted_geo=all_fit[k][1],
                         heldout_worst=out[0], heldout_geo=out[1], old_auto_worst=old))
    print("\nper instance (fitted on all): choice, regret, best kernel, cuSPARSE/best")
    for i in insts:
        c = choose(i["f"], i["prec"], P)
        print(f"  {i['matrix'][-34:]:34s} {i['prec']} {c:15s} {regret(i, P):5.2f} "
              f"{min(i['t'], key=i['t'].get):15s} {i['cusparse'] / i['best']:5.2f}")
    json.dump(dict(params=P, kinds=rows), open("select-fit.json", "w"), indent=1)


if __name__ == "__main__":
    main()
