#!/usr/bin/env python3
"""Joins segsparse's and CUB's measurements into rows of benches/results/scan-vs-cub.jsonl.

    python3 merge.py --cub cub.jsonl --ours scan.jsonl prims.jsonl [--out scan-vs-cub.jsonl] [--md]

Every input line is one JSON object with at least tool, op, variant, dtype, n, segment, us and
device (cub_peers.cu, `scan-bench --format json`, `prims-bench --format json` all print them).
Each segsparse measurement becomes one output row with the CUB time of the same
(op, variant, dtype, n, segment) beside it, or null where CUB has no such measurement. A
backward scan is compared with CUB's forward scan of the same kind (CUB has no backward scan).
CUB's segmented scan is InclusiveScanByKey (keys = segment ids); ours uses head flags or offsets.
--md also prints the rows as a markdown table (for benches/results/history/scan.md).
"""
import argparse
import datetime
import json
import sys

OPS = {"scan", "segscan", "segreduce", "sort", "compact"}


def read(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def key(r):
    return (r["op"], r["variant"], r["dtype"], r["n"], json.dumps(r.get("segment")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cub", nargs="+", required=True)
    ap.add_argument("--ours", nargs="+", required=True)
    ap.add_argument("--out")
    ap.add_argument("--md", action="store_true")
    a = ap.parse_args()
    cub = {key(r): r for r in read(a.cub) if r.get("tool") == "cub"}
    ours = [r for r in read(a.ours) if r.get("tool") == "segsparse"]
    copy_cub = next((r for r in cub.values() if r["op"] == "copy"), None)
    copy_ours = next((r for r in ours if r["op"] == "copy"), None)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = []
    for r in ours:
        if r["op"] not in OPS:
            continue
        c = cub.get(key(r))
        row = {
            "op": r["op"],
            "variant": r["variant"],
            "dtype": r["dtype"],
            "n": r["n"],
            "segment": r.get("segment"),
            "segsparse_us": round(r["us"], 3),
            "cub_us": round(c["us"], 3) if c else None,
            "ratio": round(r["us"] / c["us"], 3) if c else None,
            "device": r["device"],
            "date": date,
        }
        for k in ("direction", "algorithm", "input", "of_copy"):
            if k in r:
                row[k] = round(r[k], 3) if isinstance(r[k], float) else r[k]
        if c:
            row["cub_api"] = c.get("api")
            row["cub_version"] = c.get("cub_version")
        if copy_ours:
            row["copy_gbs"] = round(copy_ours.get("gbs", 0.0), 1)
        out.append(row)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if a.md:
        if copy_cub:
            print(f"\nCUB harness copy (cudaMemcpy 512 MiB): {copy_cub['us']:.1f} µs", file=sys.stderr)
        print("| op | variant | type | n | segment | dir | input | segsparse µs | CUB µs | ours / CUB |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in out:
            n = r["n"]
            lg = n.bit_length() - 1
            ns = f"2^{lg}" if n == 1 << lg else str(n)
            seg = "-" if r["segment"] is None else r["segment"]
            cu = f"{r['cub_us']:.1f}" if r["cub_us"] is not None else "-"
            ra = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
            print(f"| {r['op']} | {r['variant']} | {r['dtype']} | {ns} | {seg} | {r.get('direction', '-')} "
                  f"| {r.get('input', '-')} | {r['segsparse_us']:.1f} | {cu} | {ra} |")


if __name__ == "__main__":
    main()
