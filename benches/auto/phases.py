#!/usr/bin/env python3
"""Where the automatic solve's first call spends its time, and what the probe's options change,
from Python on the GPU (the matrix on the device, a random right-hand side, seed 1).

For each system of `systems.txt` (those matching `--only`, a regular expression on 'KIND SPEC'):
one untimed default call (kernels compiled, SpMV plan tuned), then with the per-pattern cache
cleared before each call, `--repeat` timed first calls of

  - the default (`info.choice["phases"]`: the statistics, the rule, every setup and solver call
    with their host seconds),
  - each variant of `--variants` (`segsparse.solve(..., probe={...})`), and
  - the default's final choice named explicitly (its untimed call first): the overhead of the
    default is its time minus this one's,

and one explicit call with `maxiter=1` of that choice (the fixed cost of a solver call from
Python). One JSON line per call (`--out`), the fastest of the repeats in the summary lines on
stdout.

    python3 benches/auto/phases.py --systems benches/auto/systems.txt --data DIR \\
        [--only REGEX] [--variants JSON] [--repeat 2] [--deadline 100] --out phases.jsonl
"""

import argparse
import json
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_auto import explicit, matrix, read_systems  # noqa: E402

import segsparse  # noqa: E402

# Each a dictionary of `ProbeParams` fields for `segsparse.solve(..., probe=...)`: a shorter CG
# probe, a longer AMG window, no AMG window checkpoint (the window of a whole solve), no probe
# for CG (the rule's first choice alone, AMG only as the fallback), CG's predicted iterations
# × 1.6 (more AMG), AMG's predicted iterations doubled (less AMG), the next checkpoint after
# 1.2× (not 2×) the iterations a measured rate predicts, a shorter BiCGSTAB probe.
VARIANTS = [
    {"cg_iterations": 20},
    {"amg_window": 20},
    {"amg_window": 100000},
    {"amg_min_rows": 1000000000},
    {"cg_iterations_factor": 1.6},
    {"amg_iterations": 25},
    {"checkpoint_factor": 1.2},
    {"bicgstab_iterations": 10},
]


def timed(cp, f):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    x, info = f()
    cp.cuda.Device().synchronize()
    return x, info, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", default=os.path.join(os.path.dirname(__file__), "systems.txt"))
    ap.add_argument("--data", default=os.environ.get("SEGSPARSE_DATA", "."))
    ap.add_argument("--only", default=None)
    ap.add_argument("--variants", default=None, help="a JSON list of probe option dictionaries")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=100.0)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--maxiter", type=int, default=10000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import cupy as cp

    variants = json.loads(args.variants) if args.variants else VARIANTS
    systems = read_systems(args.systems)
    if args.only:
        rx = re.compile(args.only)
        systems = [s for s in systems if rx.search(f"{s['kind']} {s['spec']}")]
    start = time.time()
    out = open(args.out, "w", encoding="utf-8")

    def emit(row):
        out.write(json.dumps(row) + "\n")
        out.flush()

    for s in systems:
        if time.time() - start > args.deadline:
            emit({"event": "deadline", "system": s["spec"]})
            print(f"deadline before {s['spec']}")
            break
        try:
            a = matrix(s["spec"], args.data)
        except Exception as e:
            emit({"system": s["spec"], "error": repr(e)})
            continue
        m = segsparse.Matrix(a, device="gpu")
        rng = np.random.default_rng(1)
        b = cp.asarray(rng.standard_normal(a.shape[0]))
        base = {"system": f"{s['kind']} {s['spec']}", "split": s["split"], "n": a.shape[0],
                "nnz": int(a.nnz)}

        def default(probe=True):
            segsparse.clear_auto_cache()
            return timed(cp, lambda: segsparse.solve(m, b, rtol=args.rtol, maxiter=args.maxiter,
                                                     probe=probe))

        try:
            default()
            rows = {}
            for r in range(args.repeat):
                for name, probe in [("default", True)] + [(json.dumps(v), v) for v in variants]:
                    _, info, sec = default(probe)
                    ch = info.choice
                    row = {**base, "variant": name, "repeat": r, "seconds": sec,
                           "converged": bool(info.converged), "iterations": int(info.iterations),
                           "method": info.method, "precond": info.precond,
                           "setup_seconds": info.setup_seconds,
                           "solve_seconds": info.solve_seconds, "phases": ch["phases"],
                           "tried": ch["tried"]}
                    emit(row)
                    if name not in rows or sec < rows[name]["seconds"]:
                        rows[name] = row
            d = rows["default"]
            meth, pre = d["method"], d["precond"]
            pre = None if pre == "none" else pre
            explicit(meth, pre, m, b, args.rtol, args.maxiter)
            best = None
            for r in range(args.repeat):
                _, w, sec = timed(cp, lambda: explicit(meth, pre, m, b, args.rtol, args.maxiter))
                emit({**base, "variant": "explicit", "choice": f"{meth}+{pre or 'none'}",
                      "repeat": r, "seconds": sec, "iterations": int(w.iterations),
                      "converged": bool(w.converged), "setup_seconds": w.setup_seconds,
                      "solve_seconds": w.solve_seconds})
                best = sec if best is None else min(best, sec)
            _, w, one = timed(cp, lambda: explicit(meth, pre, m, b, args.rtol, 1))
            emit({**base, "variant": "one-iteration", "choice": f"{meth}+{pre or 'none'}",
                  "seconds": one, "setup_seconds": w.setup_seconds,
                  "solve_seconds": w.solve_seconds})
            ph = " ".join(f"{p['name']}{'' if p['iterations'] is None else '/' + str(p['iterations'])}"
                          f"={p['seconds'] * 1e3:.2f}" for p in d["phases"])
            print(f"{base['system']}: default {d['seconds'] * 1e3:.1f} ms ({meth}+{pre or 'none'}, "
                  f"{d['iterations']} it), explicit {best * 1e3:.1f} ms, 1-it call "
                  f"{one * 1e3:.2f} ms | {ph}")
            print("   variants: " + ", ".join(
                f"{k} {v['seconds'] * 1e3:.1f} ms {v['method']}+{v['precond']}"
                for k, v in rows.items() if k != "default"))
        except Exception as e:
            emit({**base, "error": repr(e)})
            print(f"{base['system']}: {e!r}")
    out.close()


if __name__ == "__main__":
    main()
