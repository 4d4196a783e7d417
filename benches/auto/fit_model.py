#!/usr/bin/env python3
"""Fits the automatic solve's cost model (`autosolve::CostModel`) on the systems of the kinds
marked `fit`, from the per-process lines of benches/auto/run.py (the default with its probe and
every explicit choice, each its own process, on one device):

    python3 benches/auto/fit_model.py raw.jsonl [--json model.json]

What each constant is fitted from (t = the probe's seconds per iteration, read from the
default's `auto.probe` of the same system):
  amg_setup (k, s)        AMG's setup (cg+amg's setup_s less cg+none's) ≈ k·t + s, least squares
  amg_iteration (k, s)    cg+amg's solve_s / iterations ≈ k·t + s
  amg_iterations          the median of cg+amg's iterations
  ilu_setup_per_entry, ilu_setup (0, s)
                          ILU(0)'s setup (gmres+ilu0's setup_s less the cheapest setup of the
                          system) ≈ c·nnz + s, on systems with a full diagonal
  ilut_setup_per_entry    the same (through the origin) where the diagonal has zeros (the row
                          matching and ILUT)
  ilu_iteration (k, 0)    the median of (gmres+ilu0's solve_s / iterations) / t
  ilu_gain                the median of (the probed BiCGSTAB's iterations to converge, explicit
                          run) / gmres+ilu0's iterations
  cg_iterations_factor, bicgstab_iterations_factor
                          the median of (the explicit cheap run's iterations − the probe's) /
                          the probe's predicted remaining iterations (before any factor)
Systems of the held-out kinds are never read. Standard library only.
"""

import argparse
import json
import statistics
import sys


def load(path):
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def lsq(points):
    """y ≈ k·x + s with k, s ≥ 0 (least squares; a zero slope or intercept where the free fit
    gives a negative one)."""
    pts = [(x, y) for x, y in points if x is not None and y is not None]
    if not pts:
        return None
    if len(pts) == 1:
        x, y = pts[0]
        return (y / x if x > 0 else 0.0, 0.0)
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    k = sxy / sxx if sxx > 0 else 0.0
    s = my - k * mx
    if k < 0:
        return (0.0, max(my, 0.0))
    if s < 0:
        k = sum(x * y for x, y in pts) / max(sum(x * x for x, _ in pts), 1e-300)
        return (k, 0.0)
    return (k, s)


args_factor = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", nargs="+")
    ap.add_argument("--json", help="write the fitted model here")
    ap.add_argument("--model", help="the model the binary ran with (its iteration factors are undone)")
    args = ap.parse_args()
    global args_factor
    args_factor = {}
    if args.model:
        with open(args.model, encoding="utf-8") as fh:
            m = json.load(fh)
        args_factor = {"cg": m.get("cg_iterations_factor", 1.0),
                       "bicgstab": m.get("bicgstab_iterations_factor", 1.0)}
    rows = [r for p in args.raw for r in load(p) if r.get("split") == "fit" and not r.get("skipped")]
    systems = {}
    for r in rows:
        systems.setdefault(r["system"], {})[r["choice"]] = r
    amg_setup, amg_it, amg_its = [], [], []
    factors = {"cg": [], "bicgstab": []}
    ilu_setup, ilu_it, ilu_gain, ilut_setup = [], [], [], []
    used = []
    for name, ch in systems.items():
        d = ch.get("default") or {}
        probe = (d.get("auto") or {}).get("probe")
        if not probe or not probe.get("iterations"):
            continue
        t = probe["seconds"] / probe["iterations"]
        nnz = d.get("nnz")
        ok = {c: r for c, r in ch.items() if c != "default" and r.get("converged")}
        cheap = probe["cheap"].replace(" + ", "+")
        pred = probe.get("predicted_iterations")
        if cheap in ok and pred and pred > 0 and pred != float("inf"):
            meth = cheap.split("+")[0]
            # The prediction written by the binary used its own factor: undo it.
            f0 = args_factor.get(meth, 1.0)
            left = ok[cheap]["iterations"] - probe["iterations"]
            if left > 0 and meth in factors:
                factors[meth].append(left / (pred / f0))
        setups = [r["setup_s"] for r in ch.values() if r.get("setup_s") is not None and r is not d]
        base = min(setups) if setups else None
        if probe["expensive"] == "cg + amg" and "cg+amg" in ok and base is not None:
            a = ok["cg+amg"]
            amg_setup.append((t, a["setup_s"] - base))
            if a["iterations"]:
                amg_it.append((t, a["solve_s"] / a["iterations"]))
                amg_its.append(a["iterations"])
            used.append(name)
        if probe["expensive"] == "gmres + ilu0" and "gmres+ilu0" in ok and base is not None:
            g = ok["gmres+ilu0"]
            stats = (d.get("auto") or {}).get("stats") or {}
            if stats.get("missing_diagonal"):
                ilut_setup.append((nnz, g["setup_s"] - base))
            else:
                ilu_setup.append((nnz, g["setup_s"] - base))
            if g["iterations"]:
                ilu_it.append((g["solve_s"] / g["iterations"]) / t)
                if cheap in ok and ok[cheap]["iterations"]:
                    ilu_gain.append(ok[cheap]["iterations"] / g["iterations"])
            used.append(name)
    model = {}
    if amg_setup:
        model["amg_setup"] = lsq(amg_setup)
    if amg_it:
        model["amg_iteration"] = lsq(amg_it)
    if amg_its:
        model["amg_iterations"] = statistics.median(amg_its)
    if ilu_setup:
        c, s = lsq(ilu_setup)
        model["ilu_setup_per_entry"] = c
        model["ilu_setup"] = (0.0, s)
    if ilut_setup:
        model["ilut_setup_per_entry"] = statistics.median(
            y / x for x, y in ilut_setup if x and y is not None and y > 0) if any(
            x and y and y > 0 for x, y in ilut_setup) else None
        if model["ilut_setup_per_entry"] is None:
            del model["ilut_setup_per_entry"]
    if ilu_it:
        model["ilu_iteration"] = (statistics.median(ilu_it), 0.0)
    if ilu_gain:
        model["ilu_gain"] = statistics.median(ilu_gain)
    for meth, v in factors.items():
        if v:
            model[f"{meth}_iterations_factor"] = statistics.median(v)
    model["fitted_on"] = sorted(set(used))
    model["points"] = {"amg": len(amg_setup), "ilu": len(ilu_setup), "ilut": len(ilut_setup),
                       "gain": len(ilu_gain)}
    text = json.dumps(model, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if not used:
        print("no fit system had both a probe and a converged expensive candidate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
