#!/usr/bin/env python3
"""Every JSONL row under benches/results/ is one JSON object that says where, when and at which
commit it was measured: `device` (the card, e.g. "NVIDIA H200"), `date` (YYYY-MM-DD, UTC) and
`commit` (a hexadecimal commit id). Exit status 1, naming each bad row, when one is not.

Usage:  python3 .ci/check_results.py [REPOSITORY]   (default: the one it is in)
"""

import json
import os
import re
import sys

FIELDS = {
    "device": re.compile(r"\S"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}"),
    "commit": re.compile(r"^[0-9a-f]{7,40}$"),
}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    base = os.path.join(root, "benches", "results")
    bad, rows, files = [], 0, 0
    for d, _, names in sorted(os.walk(base)):
        for name in sorted(n for n in names if n.endswith(".jsonl")):
            files += 1
            path = os.path.join(d, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as fh:
                for i, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    rows += 1
                    try:
                        row = json.loads(line)
                    except ValueError as e:
                        bad.append(f"{rel}:{i}: not JSON ({e})")
                        continue
                    if not isinstance(row, dict):
                        bad.append(f"{rel}:{i}: not a JSON object")
                        continue
                    for key, shape in FIELDS.items():
                        v = row.get(key)
                        if not isinstance(v, str) or not shape.search(v):
                            bad.append(f"{rel}:{i}: `{key}` is {'missing' if v is None else repr(v)}")
    if bad:
        print(f"benches/results: {len(bad)} bad row(s) of {rows}:")
        print("\n".join(bad[:50]) + (f"\n... and {len(bad) - 50} more" if len(bad) > 50 else ""))
        return 1
    print(f"benches/results: {rows} rows in {files} files, each with device, date and commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
