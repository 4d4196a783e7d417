#!/usr/bin/env python3
"""Rows and a table from the JSON runs of benches/multi_rhs/device.sh (bench mode).

Usage: summarize.py RESULTS_DIR COMMIT DATE   (RESULTS_DIR: the unpacked multi-rhs.tgz)
Prints JSONL rows (one per problem; device, date, commit on every row) to stdout and the
markdown table to stderr. "one" is the median of the sequential run's solves after the first
(the same process, kernels loaded, setup shared), so block and sequential come from one call.
"""
import json
import os
import statistics
import sys

res, commit, date = sys.argv[1], sys.argv[2], sys.argv[3]
device = open(os.path.join(res, "device.txt")).readline().split(",")[0].strip()


def load(name):
    try:
        return json.load(open(os.path.join(res, name + ".json")))
    except (OSError, ValueError):
        return None


# (tag, matrix, method, precond, k) as device.sh runs them.
problems = [("poisson3d-24", "poisson3d:24", "cg", "none", 32),
            ("poisson3d-24", "poisson3d:24", "bicgstab", "none", 32),
            ("poisson3d-64", "poisson3d:64", "cg", "none", 32),
            ("poisson3d-64", "poisson3d:64", "bicgstab", "none", 32),
            ("poisson3d-128", "poisson3d:128", "cg", "amg", 16),
            ("raefsky2", "raefsky2", "gmres", "ilu0", 16)]
table = ["| matrix | solver | k | one: it / solve s | block: it (max) / solve s | sequential: "
         "solve s | block ÷ one | sequential ÷ block | all converged |",
         "|---|---|---|---|---|---|---|---|---|"]
for tag, matrix, method, pre, k in problems:
    blk, seq = load(f"{tag}-{method}-block{k}"), load(f"{tag}-{method}-seq{k}")
    solver = method + ("" if pre == "none" else " + " + pre)
    if not (blk and seq) or not seq.get("solve_seconds_all") or not blk.get("rhs_seconds_total"):
        table.append(f"| {matrix} | {solver} | {k} | missing run(s) | | | | | |")
        continue
    secs = seq["solve_seconds_all"]
    one = statistics.median(secs[1:]) if len(secs) > 1 else secs[0]
    b_s, s_s = blk["rhs_seconds_total"], seq["rhs_seconds_total"]
    one_it = statistics.median(seq["iterations_all"])
    conv = bool(blk.get("converged")) and bool(seq.get("converged"))
    row = {
        "bench": "multi-rhs-krylov", "matrix": matrix, "solver": solver, "k": k,
        "one_iterations": one_it, "one_solve_s": one, "setup_s": blk.get("setup_seconds"),
        "block_iterations": blk["iterations_all"], "block_solve_s": b_s,
        "seq_iterations": seq["iterations_all"], "seq_solve_s": s_s,
        "block_over_one": b_s / one if one else None,
        "seq_over_block": s_s / b_s if b_s else None,
        "all_converged": conv, "device": device, "date": date, "commit": commit,
    }
    print(json.dumps(row))
    table.append(
        f"| {matrix} | {solver} | {k} | {one_it:g} / {one:.4f} | {max(blk['iterations_all'])} / "
        f"{b_s:.4f} | {s_s:.4f} | {row['block_over_one']:.2f}× | {row['seq_over_block']:.2f}× | "
        f"{conv} |")
print("\n".join(table), file=sys.stderr)
