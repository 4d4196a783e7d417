#!/usr/bin/env python3
"""Turns phases.py's lines into a markdown table (the fastest of the repeats per system and
variant): the default's first call by phase, its overhead over its final choice named
explicitly, and each probe variant's time against the default's. Standard library.

    python3 benches/auto/phases_summary.py phases.jsonl [--device "NVIDIA H200" --commit X
        --call "..." --jsonl rows.jsonl]
"""

import argparse
import datetime
import json
from collections import OrderedDict


def group(name):
    """A phase's group: statistics, rule, setup, probe, or the solver calls after it."""
    for g in ("statistics", "rule", "setup", "probe", "save"):
        if name.startswith(g):
            return g
    return "calls"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--device", default=None)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--call", default="phases of the automatic solve's first call")
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).date().isoformat())
    ap.add_argument("--jsonl", default=None)
    args = ap.parse_args()
    best = OrderedDict()
    for line in open(args.raw, encoding="utf-8"):
        r = json.loads(line)
        if "variant" not in r or "seconds" not in r:
            continue
        k = (r["system"], r["variant"])
        if k not in best or r["seconds"] < best[k]["seconds"]:
            best[k] = r
    systems = list(OrderedDict.fromkeys(s for s, _ in best))
    variants = list(OrderedDict.fromkeys(v for _, v in best
                                         if v not in ("default", "explicit", "one-iteration")))
    print("| system | default ms | choice | it | explicit ms | overhead ms | statistics | setup |"
          " probe | calls | other | 1-it call ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for s in systems:
        d, e, o = best.get((s, "default")), best.get((s, "explicit")), best.get((s, "one-iteration"))
        if d is None:
            continue
        g = {}
        for p in d["phases"]:
            g[group(p["name"])] = g.get(group(p["name"]), 0.0) + p["seconds"]
        other = d["seconds"] - sum(g.values())
        ms = lambda v: "—" if v is None else f"{v * 1e3:.2f}"  # noqa: E731
        print(f"| {s} | {ms(d['seconds'])} | {d['method']}+{d['precond']} | {d['iterations']} | "
              f"{ms(e and e['seconds'])} | {ms(e and d['seconds'] - e['seconds'])} | "
              f"{ms(g.get('statistics'))} | {ms(g.get('setup'))} | {ms(g.get('probe'))} | "
              f"{ms(g.get('calls'))} | {ms(other)} | {ms(o and o['seconds'])} |")
        row = {"bench": "auto-phases", "call": args.call, "system": s, "n": d["n"],
               "nnz": d["nnz"], "split": d["split"], "default_s": d["seconds"],
               "choice": f"{d['method']}+{d['precond']}", "iterations": d["iterations"],
               "explicit_s": e and e["seconds"], "explicit_iterations": e and e["iterations"],
               "one_iteration_call_s": o and o["seconds"],
               "phases": [[p["name"], p["iterations"], p["seconds"]] for p in d["phases"]],
               "variants": {v: {"seconds": best[(s, v)]["seconds"],
                                "choice": f"{best[(s, v)]['method']}+{best[(s, v)]['precond']}",
                                "iterations": best[(s, v)]["iterations"],
                                "converged": best[(s, v)]["converged"]}
                            for v in variants if (s, v) in best},
               "device": args.device, "date": args.date, "commit": args.commit}
        out.append(row)
    print()
    print("| system | default ms | " + " | ".join(variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for s in systems:
        d = best.get((s, "default"))
        if d is None:
            continue
        cells = []
        for v in variants:
            r = best.get((s, v))
            cells.append("—" if r is None else
                         f"{r['seconds'] * 1e3:.1f} ({r['seconds'] / d['seconds']:.2f}×"
                         f"{'' if r['converged'] else ', failed'}"
                         f"{'' if (r['method'], r['precond']) == (d['method'], d['precond']) else ', ' + r['method'] + '+' + r['precond']})")
        print(f"| {s} | {d['seconds'] * 1e3:.1f} | " + " | ".join(cells) + " |")
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as fh:
            for row in out:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
