#!/usr/bin/env python3
"""Rows and a table from the JSON runs of benches/multi_rhs/device.sh.

Usage: summarize.py RESULTS_DIR COMMIT DATE [K]   (RESULTS_DIR: the unpacked multi-rhs.tgz)
Prints JSONL rows (one per problem; device, date, commit on every row) to stdout and the
markdown table to stderr.
"""
import json
import os
import sys

res, commit, date = sys.argv[1], sys.argv[2], sys.argv[3]
k = int(sys.argv[4]) if len(sys.argv) > 4 else 16
device = open(os.path.join(res, "device.txt")).readline().split(",")[0].strip()


def load(name):
    try:
        return json.load(open(os.path.join(res, name + ".json")))
    except (OSError, ValueError):
        return None


problems = [("poisson3d-128", "poisson3d:128", "cg+amg"),
            ("elasticity2d-800", "elasticity2d:800", "cg+amg"),
            ("raefsky2", "raefsky2", "gmres(30)+ilu0"),
            ("sherman5", "sherman5", "gmres(30)+ilu0")]
table = ["| matrix | solver | one: it / setup s / solve s | block of %d: it (max) / solve s | "
         "%d sequential: solve s | block / one | sequential / block | (setup + sequential) / "
         "(setup + block) | all converged |" % (k, k),
         "|---|---|---|---|---|---|---|---|---|"]
for tag, matrix, solver in problems:
    one, blk, seq = load(tag + "-one"), load("%s-block%d" % (tag, k)), load("%s-seq%d" % (tag, k))
    if not (one and blk and seq):
        table.append(f"| {matrix} | {solver} | missing run(s) | | | | | | |")
        continue
    o_s, b_s, s_s = one["solve_seconds"], blk["rhs_seconds_total"], seq["rhs_seconds_total"]
    setup = blk.get("setup_seconds") or 0.0
    conv = bool(blk.get("converged")) and bool(seq.get("converged"))
    row = {
        "bench": "multi-rhs-krylov", "matrix": matrix, "solver": solver, "k": k,
        "one_iterations": one["iterations"], "one_setup_s": one.get("setup_seconds"),
        "one_solve_s": o_s, "block_iterations": blk["iterations_all"], "block_solve_s": b_s,
        "seq_iterations": seq["iterations_all"], "seq_solve_s": s_s,
        "block_over_one": b_s / o_s if o_s else None,
        "seq_over_block": s_s / b_s if b_s else None,
        "with_setup_seq_over_block": (setup + s_s) / (setup + b_s) if b_s else None,
        "all_converged": conv, "device": device, "date": date, "commit": commit,
    }
    print(json.dumps(row))
    table.append(
        f"| {matrix} | {solver} | {one['iterations']} / {one.get('setup_seconds', 0):.3f} / "
        f"{o_s:.4f} | {max(blk['iterations_all'])} / {b_s:.4f} | {s_s:.4f} | "
        f"{row['block_over_one']:.2f}× | {row['seq_over_block']:.2f}× | "
        f"{row['with_setup_seq_over_block']:.2f}× | {conv} |")
print("\n".join(table), file=sys.stderr)
