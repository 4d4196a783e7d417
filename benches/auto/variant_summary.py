"""One line per system of a python_auto.py run: the default's first call, the variant's first
call (`--variant`), the fastest explicit choice and both ratios; then the counts within 1.2× and
2× for each, by split.

    python3 variant_summary.py python.jsonl
"""
import json
import sys
from collections import defaultdict


def main():
    runs = defaultdict(list)
    order = []
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if "event" in r or "system" not in r:
            continue
        if r["system"] not in runs:
            order.append(r["system"])
        runs[r["system"]].append(r)
    counts = defaultdict(lambda: [0, 0, 0, 0, 0])
    for name in order:
        rs = runs[name]
        first = next((r for r in rs if r.get("choice") == "default" and r.get("call") == "first"), None)
        var = next((r for r in rs if r.get("choice") == "default" and r.get("call") == "variant"), None)
        exp = [r for r in rs if r.get("choice") != "default" and r.get("converged") and "seconds" in r]
        best = min(exp, key=lambda r: r["seconds"]) if exp else None
        if first is None:
            continue

        def ratio(r):
            if r is None or best is None or not r.get("converged"):
                return None
            return r["seconds"] / best["seconds"]

        a, v = ratio(first), ratio(var)
        split = rs[0].get("split", "?")
        c = counts[split]
        c[0] += 1
        c[1] += a is not None and a <= 1.2
        c[2] += a is not None and a <= 2.0
        c[3] += v is not None and v <= 1.2
        c[4] += v is not None and v <= 2.0
        fmt = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"{name} [{split}]: default {first['method']}+{first['precond']} "
              f"{first['seconds'] * 1e3:.1f} ms {first['iterations']} it ({fmt(a)}×)"
              + (f" | variant {var['method']}+{var['precond']} {var['seconds'] * 1e3:.1f} ms "
                 f"({fmt(v)}×)" if var else "")
              + (f" | best {best['choice']} {best['seconds'] * 1e3:.1f} ms" if best else ""))
    for split, c in counts.items():
        print(f"{split}: {c[0]} systems; default ≤1.2× {c[1]}, ≤2× {c[2]}; variant ≤1.2× {c[3]}, "
              f"≤2× {c[4]}")


if __name__ == "__main__":
    main()
