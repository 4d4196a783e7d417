#!/usr/bin/env python3
"""SpMM against cusparseSpMM over the corpus: the summary rows of `spmv-bench --rhs K --format
json` (one per matrix and K) as `multi_rhs.jsonl` rows (`bench` = `spmm-corpus`, with device,
date, commit and call), and per K the geo-mean of `speedup_vs_cusparse`, the count at or above
1.0× and the slowest matrices.

Usage:  python3 benches/multi_rhs/spmm_corpus.py SPMV_BENCH.jsonl COMMIT DATE CALL [--append]
(--append adds the rows to benches/results/multi_rhs.jsonl; without it they go to stdout)
"""

import json
import math
import os
import sys


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    path, commit, date, call = sys.argv[1:5]
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("kind") != "summary":
                continue
            r.update(date=date, commit=commit, bench="spmm-corpus", call=call)
            r.setdefault("device", "unknown")
            rows.append(r)
    for k in sorted({r["k"] for r in rows}):
        rs = [r for r in rows if r["k"] == k]
        sp = [r["speedup_vs_cusparse"] for r in rs]
        geo = math.exp(sum(math.log(s) for s in sp) / len(sp))
        worst = sorted(rs, key=lambda r: r["speedup_vs_cusparse"])[:5]
        print(
            f"k = {k}: {len(rs)} matrices, geo-mean {geo:.2f}x, {sum(s >= 1.0 for s in sp)} at or "
            f"above 1.0x; slowest: "
            + ", ".join(
                f"{os.path.basename(r['matrix']).split('.')[0]} {r['speedup_vs_cusparse']:.2f}x "
                f"({r['ours_us']:.1f} vs {r['cusparse_us']:.1f} us)"
                for r in worst
            ),
            file=sys.stderr,
        )
    out = sys.stdout
    if "--append" in sys.argv:
        here = os.path.dirname(os.path.abspath(__file__))
        out = open(os.path.join(here, "..", "results", "multi_rhs.jsonl"), "a", encoding="utf-8")
    for r in rows:
        out.write(json.dumps(r, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
