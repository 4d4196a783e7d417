#!/usr/bin/env python3
"""Turns python_auto.py's lines into one row per system and a markdown table: the default's
choice and time (first call: a fresh decision with its probe; second call: the cached decision),
the fastest converged explicit choice, their ratios, and per split (fit / held-out) how many
systems are within 1.2× and 2× and whether the default fails where an explicit choice
converges. On systems of at least 1 M rows it also gives the statistics' and the probe's share
of the default's first call.

    python3 benches/auto/python_summary.py python.jsonl --device "NVIDIA H200" --commit abc1234 \
        --call "..." --jsonl rows.jsonl --md table.md

Every JSON row carries `device`, `date` and `commit` (.ci/check_results.py). Standard library.
"""

import argparse
import datetime
import json


def fmt(x, nd=3):
    return "—" if x is None else f"{x:.{nd}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--device", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--call", default="auto validation from Python")
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).date().isoformat())
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--md", required=True)
    args = ap.parse_args()
    systems, order = {}, []
    with open(args.raw, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "system" not in r or "choice" not in r:
                continue
            if r["system"] not in systems:
                systems[r["system"]] = []
                order.append(r["system"])
            systems[r["system"]].append(r)
    rows = []
    for name in order:
        runs = systems[name]
        meta = runs[0]
        first = next((r for r in runs if r["choice"] == "default" and r.get("call") == "first"), None)
        second = next((r for r in runs if r["choice"] == "default" and r.get("call") == "second"), None)
        variant = next((r for r in runs if r["choice"] == "default" and r.get("call") == "variant"),
                       None)
        if first is None:
            continue
        exp = [r for r in runs if r["choice"] != "default" and "seconds" in r]
        conv = [r for r in exp if r.get("converged")]
        fastest = min(conv, key=lambda r: r["seconds"]) if conv else None
        capped = [r["choice"] for r in runs if r.get("capped")]
        runaway = [{"choice": r["choice"], "killed_after_s": r.get("killed_after_s"),
                    "what": r.get("what")} for r in runs if r.get("runaway")]
        ratio = first["seconds"] / fastest["seconds"] if fastest and first["converged"] else None
        ratio2 = (second["seconds"] / fastest["seconds"]
                  if fastest and second and second["converged"] else None)
        # The automatic solve's own cost: its first call against the same choice named
        # explicitly (statistics, probe, checkpoints and restarts, over a solve that took the
        # same path), where the default's final choice was among the explicit ones.
        mine = f"{first['method']}+{first['precond']}"
        same = next((r for r in exp if r["choice"] == mine and r.get("converged")), None)
        overhead = (first["seconds"] - same["seconds"]
                    if same is not None and first["converged"] else None)
        share = None
        if first["n"] >= 1_000_000:
            share = ((first.get("stats_seconds") or 0.0) + (first.get("probe_seconds") or 0.0)) \
                / first["seconds"]
        row = {
            "bench": "auto-python-validation", "call": args.call, "system": name,
            "kind": meta["kind"], "split": meta["split"], "class": meta["class"],
            "spec": meta["spec"], "n": meta["n"], "nnz": meta["nnz"],
            "default_choice": f"{first['method']} + {first['precond']}",
            "default_s": first["seconds"], "default_converged": first["converged"],
            "default_iterations": first["iterations"], "default_tried": first.get("tried"),
            "default_failure": first.get("failure"),
            "stats_s": first.get("stats_seconds"), "probe_s": first.get("probe_seconds"),
            "probe_share": share,
            "same_choice_explicit_s": None if same is None else same["seconds"],
            "overhead_s": overhead,
            "cached_choice": None if second is None else f"{second['method']} + {second['precond']}",
            "cached_s": None if second is None else second["seconds"],
            "fastest": None if fastest is None else fastest["choice"],
            "fastest_s": None if fastest is None else fastest["seconds"],
            "fastest_iterations": None if fastest is None else fastest["iterations"],
            "explicit": {r["choice"]: {"s": r.get("seconds"), "converged": r.get("converged"),
                                       "iterations": r.get("iterations"),
                                       "capped": r.get("capped", False)}
                         for r in runs if r["choice"] != "default"},
            "capped": capped, "runaway": runaway, "ratio": ratio, "ratio_cached": ratio2,
            **({} if variant is None else {
                "variant": variant.get("variant"),
                "variant_choice": f"{variant['method']} + {variant['precond']}",
                "variant_s": variant["seconds"], "variant_iterations": variant["iterations"],
                "variant_converged": variant["converged"],
                "ratio_variant": (variant["seconds"] / fastest["seconds"]
                                  if fastest and variant["converged"] else None)}),
            "fails_where_explicit_converges": (not first["converged"]) and fastest is not None,
            "device": args.device, "date": args.date, "commit": args.commit,
        }
        rows.append(row)
    with open(args.jsonl, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    md = []
    for split in ("fit", "held-out"):
        part = [r for r in rows if r["split"] == split]
        if not part:
            continue
        md.append(f"### {split}\n")
        md.append("| system | rows | default's choice | time s | it | cached s | fastest explicit "
                  "| time s | it | ratio | ratio cached | verdict |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in part:
            if r["fails_where_explicit_converges"]:
                verdict = "**fails** (an explicit choice converges)"
            elif not r["default_converged"]:
                verdict = "nothing converges" if not r["capped"] else \
                    "nothing converged within its cap"
            elif r["ratio"] is None:
                verdict = "no explicit choice within 5× converged"
            elif r["ratio"] <= 1.2:
                verdict = "≤ 1.2"
            elif r["ratio"] <= 2.0:
                verdict = "**> 1.2**"
            else:
                verdict = "**> 2**"
            dflt = r["default_choice"] if r["default_converged"] else "— (" + \
                fmt(r["default_s"], 2) + " s to the failure)"
            md.append(f"| {r['system']} | {r['n']} | {dflt} | {fmt(r['default_s'])} | "
                      f"{r['default_iterations']} | {fmt(r['cached_s'])} | {r['fastest'] or '—'} | "
                      f"{fmt(r['fastest_s'])} | {r['fastest_iterations'] or '—'} | "
                      f"{fmt(r['ratio'], 2)} | {fmt(r['ratio_cached'], 2)} | {verdict} |")
        kinds = sorted({r["kind"] for r in part})
        with_ratio = [r for r in part if r["ratio"] is not None]
        ok12 = sum(r["ratio"] <= 1.2 for r in with_ratio)
        ok2 = sum(r["ratio"] <= 2.0 for r in with_ratio)
        fails = sum(r["fails_where_explicit_converges"] for r in part)
        worst = max((r["ratio"] for r in with_ratio), default=None)
        md.append("")
        md.append(f"{split}: {len(part)} systems of {len(kinds)} kinds ({', '.join(kinds)}); "
                  f"ratio ≤ 1.2 on {ok12} of {len(with_ratio)} with a ratio, ≤ 2 on {ok2}; the "
                  f"default fails where an explicit choice converges on {fails}; worst ratio "
                  f"{fmt(worst, 2)}\n")
    over = [r for r in rows if r["overhead_s"] is not None]
    if over:
        md.append("The default's first call minus its final choice named explicitly (the "
                  "statistics, the probe, the checkpoints): " +
                  ", ".join(f"{r['system']} {1e3 * r['overhead_s']:+.1f} ms of "
                            f"{1e3 * r['default_s']:.1f}" for r in over) + "\n")
    killed = [(r["system"], k) for r in rows for k in r["runaway"]]
    if killed:
        md.append("Calls killed by their guard (recorded as capped; the run went on): " +
                  "; ".join(f"{s} {k['choice']} after {fmt(k['killed_after_s'], 1)} s "
                            f"({k['what']})" for s, k in killed) + "\n")
    big = [r for r in rows if r["probe_share"] is not None]
    if big:
        md.append("Statistics + probe share of the default's first call on systems ≥ 1 M rows: " +
                  ", ".join(f"{r['system']} {100 * r['probe_share']:.1f} %" for r in big) + "\n")
    with open(args.md, "w", encoding="utf-8") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
