#!/usr/bin/env python3
"""Turns the per-process lines of benches/auto/run.py into one row per system and a markdown
table: the default's choice and time, the fastest explicit choice and its time, their ratio,
whether the default converged (and whether an explicit choice did where it did not).

    python3 benches/auto/summarize.py raw.jsonl --device "NVIDIA H200" --commit 1a2b3c4 \
        --call "auto validation" --jsonl auto-rows.jsonl --md auto-table.md [--raw-out raw-rows.jsonl]

"Time" is sparse-solve's setup + solve (from the loaded matrix to the solution; process start-up
and matrix generation excluded); the process wall clock, measured by run.py around the process,
is reported beside it. The fastest explicit choice is the converged one with the least time (by
wall clock for the wall ratio). Every output row carries `device`, `date` and `commit`
(.ci/check_results.py). A run on the CPU must say so in --device (e.g. "CPU: <model>"): its
figures are not the GPU's.

Standard library only.
"""

import argparse
import datetime
import json
import re
import sys


def load(paths):
    rows = []
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def fmt(x, nd=3):
    return "—" if x is None else f"{x:.{nd}f}"


def summarize(rows):
    systems = {}
    order = []
    for r in rows:
        key = (r.get("index"), r["system"])
        if key not in systems:
            systems[key] = {"meta": r, "runs": []}
            order.append(key)
        systems[key]["runs"].append(r)
    out = []
    for key in order:
        runs = systems[key]["runs"]
        meta = systems[key]["meta"]
        d = next((r for r in runs if r["choice"] == "default"), None)
        explicit = [r for r in runs if r["choice"] != "default" and not r.get("skipped")]
        conv = [r for r in explicit if r.get("converged") and r.get("total_s") is not None]
        fastest = min(conv, key=lambda r: r["total_s"]) if conv else None
        fastest_wall = min(conv, key=lambda r: r["process_wall_s"]) if conv else None
        row = {
            "bench": "auto-validation",
            "system": meta["system"],
            "kind": meta["kind"],
            "split": meta["split"],
            "class": meta["class"],
            "spec": meta["spec"],
            "backend": meta.get("backend"),
        }
        if d is None or d.get("skipped"):
            row["skipped"] = (d or {}).get("skipped", "no default run")
            out.append(row)
            continue
        auto = d.get("auto") or {}
        n = d.get("n") or next((r.get("n") for r in runs if r.get("n")), None)
        nnz = d.get("nnz") or next((r.get("nnz") for r in runs if r.get("nnz")), None)
        row.update({
            "n": n,
            "nnz": nnz,
            "default_choice": f"{d.get('method')} + {d.get('precond')}" if d.get("method") else None,
            "default_reason": auto.get("reason"),
            "default_total_s": d.get("total_s"),
            "default_setup_s": d.get("setup_s"),
            "default_wall_s": d.get("process_wall_s"),
            "default_iterations": d.get("iterations"),
            "default_converged": bool(d.get("converged")),
            "default_cut": bool(d.get("cut")),
            "fastest": fastest["choice"] if fastest else None,
            "fastest_total_s": fastest["total_s"] if fastest else None,
            "fastest_iterations": fastest["iterations"] if fastest else None,
            "fastest_wall": fastest_wall["choice"] if fastest_wall else None,
            "fastest_wall_s": fastest_wall["process_wall_s"] if fastest_wall else None,
            "explicit": {
                r["choice"]: {
                    "total_s": r.get("total_s"),
                    "wall_s": r.get("process_wall_s"),
                    "iterations": r.get("iterations"),
                    "converged": bool(r.get("converged")),
                    "cut": bool(r.get("cut")),
                }
                for r in explicit
            },
        })
        if fastest and d.get("converged") and d.get("total_s") is not None:
            row["ratio"] = d["total_s"] / fastest["total_s"] if fastest["total_s"] > 0 else None
        else:
            row["ratio"] = None
        if fastest_wall and d.get("converged"):
            row["ratio_wall"] = d["process_wall_s"] / fastest_wall["process_wall_s"]
        else:
            row["ratio_wall"] = None
        # The third goal: never fail where an explicit choice converges.
        row["fails_where_explicit_converges"] = (not d.get("converged")) and fastest is not None
        out.append(row)
    return out


def verdict(r):
    if r.get("skipped"):
        return f"skipped ({r['skipped']})"
    if r["fails_where_explicit_converges"]:
        return "**fails** (an explicit choice converges)"
    if not r["default_converged"]:
        return "nothing converges"
    if r["ratio"] is None:
        return "—"
    if r["ratio"] <= 1.2:
        return "≤ 1.2"
    if r["ratio"] <= 2.0:
        return "**> 1.2**"
    return "**> 2**"


def table(rows, split):
    head = ("| system | rows | default's choice | time s | wall s | it | fastest explicit | time s | wall s "
            "| it | ratio | wall ratio | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        if r["split"] != split:
            continue
        if r.get("skipped"):
            lines.append(f"| {r['system']} | — | — | — | — | — | — | — | — | — | — | — | {verdict(r)} |")
            continue
        conv = "" if r["default_converged"] else (" (cut)" if r["default_cut"] else " (nc)")
        fw = r["explicit"].get(r["fastest"], {}).get("wall_s") if r["fastest"] else None
        lines.append(
            f"| {r['system']} | {r['n'] or '—'} | {r['default_choice'] or '—'} | "
            f"{fmt(r['default_total_s'])}{conv} | {fmt(r['default_wall_s'], 2)} | "
            f"{r['default_iterations'] if r['default_iterations'] is not None else '—'} | "
            f"{r['fastest'] or '— (none converges)'} | {fmt(r['fastest_total_s'])} | {fmt(fw, 2)} | "
            f"{r['fastest_iterations'] if r['fastest_iterations'] is not None else '—'} | "
            f"{fmt(r['ratio'], 2)} | {fmt(r['ratio_wall'], 2)} | {verdict(r)} |")
    return head + "\n".join(lines) + "\n"


def tally(rows, split):
    rs = [r for r in rows if r["split"] == split and not r.get("skipped")]
    kinds = sorted({r["kind"] for r in rs})
    ratios = [r["ratio"] for r in rs if r["ratio"] is not None]
    within12 = sum(1 for x in ratios if x <= 1.2)
    within2 = sum(1 for x in ratios if x <= 2.0)
    fails = sum(1 for r in rs if r["fails_where_explicit_converges"])
    worst = max(ratios) if ratios else None
    return (f"{split}: {len(rs)} systems of {len(kinds)} kinds ({', '.join(kinds)}); ratio ≤ 1.2 on "
            f"{within12} of {len(ratios)} with a ratio, ≤ 2 on {within2}; the default fails where an explicit "
            f"choice converges on {fails}; worst ratio {fmt(worst, 2)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", nargs="+", help="run.py's JSON lines")
    ap.add_argument("--device", required=True, help='the card, e.g. "NVIDIA H200" (or "CPU: ...")')
    ap.add_argument("--commit", required=True, help="the commit the binaries were built from")
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    ap.add_argument("--call", default="auto validation", help="a label for this run")
    ap.add_argument("--jsonl", help="write the per-system rows here")
    ap.add_argument("--raw-out", help="write the per-process rows here, with device, date and commit")
    ap.add_argument("--md", help="write the markdown tables here (else print them)")
    args = ap.parse_args()
    if not re.fullmatch(r"[0-9a-f]{7,40}", args.commit):
        sys.exit(f"--commit {args.commit!r} is not a hexadecimal commit id")
    raw = load(args.raw)
    stamp = {"device": args.device, "date": args.date, "commit": args.commit, "call": args.call}
    rows = summarize(raw)
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps({**r, **stamp}) + "\n")
    if args.raw_out:
        with open(args.raw_out, "w", encoding="utf-8") as fh:
            for r in raw:
                fh.write(json.dumps({"bench": "auto-validation-process", **r, **stamp}) + "\n")
    md = [f"Device: **{args.device}**, {args.date}, binaries of `{args.commit}` ({args.call}). "
          "Time = sparse-solve's setup + solve seconds; wall = the whole process (start-up, matrix "
          "generation or reading, upload included), each choice its own process. Ratio = the default's "
          "time over the fastest converged explicit choice's.", ""]
    for split in ("fit", "held-out"):
        md += [f"### {split}", "", table(rows, split), tally(rows, split), ""]
    text = "\n".join(md)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    for split in ("fit", "held-out"):
        print(tally(rows, split), file=sys.stderr)


if __name__ == "__main__":
    main()
