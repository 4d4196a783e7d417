#!/usr/bin/env python3
"""Runs the validation set of the automatic solve: every system of benches/auto/systems.txt
through `sparse-solve` once with its default (no --method, no --precond) and once per sensible
explicit choice, each in its own process, and writes one JSON line per process.

    python3 benches/auto/run.py --bin .gpu/bin/sparse-solve --backend gpu --out raw.jsonl
    python3 benches/auto/run.py --bin target/release/sparse-solve --backend cpu --size cpu \
        --data ../shared/matrices --out /tmp/raw.jsonl        (a CPU test run, small sizes)

Each line holds the system (kind, split, class, spec), the choice (`default` or METHOD+PRECOND),
the process's exit status, its wall clock measured here (start-up, matrix generation or reading,
upload, setup, solve, report), and from sparse-solve's JSON report: `setup_seconds` +
`solve_seconds` (from the loaded matrix to the solution: the figure the goals use),
`wall_seconds`, iterations, convergence, the residual and, for the default, its `auto` report.

Time limits: the default runs under --cap seconds. An explicit choice runs under
min(--cap, --factor × the fastest converged process wall of the system so far + 1 s): a choice cut
there is not the fastest, and the row says `cut` with its limit. A system stops launching
choices after --system-cap seconds, and the run stops launching systems after --budget seconds
(the rest are written as skipped). --warmup first runs every choice once on small problems,
unrecorded, so that no measured process pays for compiling kernels.

Standard library only (the GPU machine has Python 3 but nothing installed for us).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

# Sensible explicit choices per class, in the order they are tried (likely fast ones first, so
# that the limit of the later ones is tight). `minres` is added where the binary has it.
CHOICES = {
    "spd": ["cg+jacobi", "cg+none", "cg+amg", "cg+ic0", "bicgstab+jacobi"],
    "unsym": ["bicgstab+none", "bicgstab+jacobi", "gmres+jacobi", "bicgstab+ilu0", "gmres+ilu0"],
    "symind": ["gmres+none", "gmres+jacobi", "bicgstab+none", "gmres+ilu0", "bicgstab+ilu0"],
}
MINRES = {"symind": ["minres+none", "minres+jacobi"]}
WARMUP = {"spd": "poisson3d:24", "unsym": "convdiff3d:24:100", "symind": "kkt2d:60:300"}


def read_systems(path):
    systems = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            f = line.split()
            if len(f) != 5 or f[1] not in ("fit", "held-out") or f[2] not in CHOICES:
                sys.exit(f"{path}:{lineno}: expected KIND fit|held-out spd|symind|unsym GPU-SPEC CPU-SPEC")
            systems.append({"kind": f[0], "split": f[1], "class": f[2], "gpu": f[3], "cpu": f[4]})
    return systems


def resolve(spec, data):
    """A generator spec as is; @NAME as the corpus file NAME.mtx.gz (or NAME.mtx) in `data`."""
    if not spec.startswith("@"):
        return spec
    for ext in (".mtx.gz", ".mtx"):
        p = os.path.join(data, spec[1:] + ext)
        if os.path.exists(p):
            return p
    return None


def has_minres(binary):
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return re.search(r"\bminres\b", out, re.IGNORECASE) is not None


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def run_one(args, path, choice, limit):
    cmd = [args.bin, path, "--backend", args.backend, "--format", "json", "--seed", "1",
           "--rhs", args.rhs, "--max-iters", str(args.max_iters)]
    if choice != "default":
        method, precond = choice.split("+")
        cmd += ["--method", method, "--precond", precond]
    elif args.default_args:
        cmd += args.default_args.split()
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        wall, rc, out, err, cut = time.perf_counter() - t0, p.returncode, p.stdout, p.stderr, False
    except subprocess.TimeoutExpired as e:
        wall, rc, cut = time.perf_counter() - t0, None, True
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    rep = last_json(out) or {}
    setup, solve = rep.get("setup_seconds"), rep.get("solve_seconds")
    row = {
        "choice": choice,
        "argv": " ".join(cmd[1:]),
        "rc": rc,
        "cut": cut,
        "limit_s": round(limit, 3),
        "process_wall_s": round(wall, 4),
        "n": rep.get("n"),
        "nnz": rep.get("nnz"),
        "method": rep.get("method"),
        "precond": rep.get("precond"),
        "iterations": rep.get("iterations"),
        "converged": bool(rep.get("converged")) and not cut,
        "relative_residual": rep.get("relative_residual"),
        "setup_s": setup,
        "solve_s": solve,
        "total_s": (setup + solve) if setup is not None and solve is not None else None,
        "report_wall_s": rep.get("wall_seconds"),
        "error": rep.get("error"),
    }
    if choice == "default":
        row["auto"] = rep.get("auto")
    if rc not in (0, None) or not rep:
        row["stderr_tail"] = err.strip()[-600:]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the sparse-solve binary")
    ap.add_argument("--backend", default="gpu", choices=["gpu", "cpu"])
    ap.add_argument("--size", default=None, choices=["gpu", "cpu"],
                    help="which spec column [default: the backend's]")
    ap.add_argument("--list", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "systems.txt"))
    ap.add_argument("--data", default=os.environ.get("SEGSPARSE_DATA", ".gpu/data"),
                    help="the corpus folder [default: $SEGSPARSE_DATA or .gpu/data]")
    ap.add_argument("--out", required=True, help="JSON lines, one per process (appended)")
    ap.add_argument("--only", default=None, help="a regular expression on 'KIND SPEC'")
    ap.add_argument("--rhs", default="random",
                    help="sparse-solve's --rhs [default: random, seeded: ones is an eigenvector of "
                         "a graph Laplacian + shift, solved in one iteration]")
    ap.add_argument("--max-iters", type=int, default=10000)
    ap.add_argument("--cap", type=float, default=30.0, help="seconds for one process at most")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--system-cap", type=float, default=45.0)
    ap.add_argument("--budget", type=float, default=330.0, help="seconds for the whole run")
    ap.add_argument("--warmup", action="store_true")
    ap.add_argument("--default-args", default="",
                    help="more sparse-solve arguments for the default's process only, e.g. "
                         "'--auto-model model.json' (a fitted cost model)")
    ap.add_argument("--choices", default=None,
                    help="comma-separated choices to run ('default', 'cg+amg', ...) "
                         "[default: the default and every sensible explicit choice]")
    args = ap.parse_args()
    size = args.size or args.backend
    systems = read_systems(args.list)
    if args.only:
        systems = [s for s in systems if re.search(args.only, f"{s['kind']} {s[size]}")]
    choices = {c: list(v) for c, v in CHOICES.items()}
    minres = has_minres(args.bin)
    if minres:
        for c, extra in MINRES.items():
            choices[c] += extra
    print(f"{len(systems)} systems, backend {args.backend}, sizes {size}, minres {'yes' if minres else 'no'}",
          flush=True)
    start = time.perf_counter()
    if args.warmup:
        for cls, spec in WARMUP.items():
            for choice in ["default"] + choices[cls]:
                r = run_one(args, spec, choice, args.cap)
                print(f"  warm-up {spec} {choice}: rc={r['rc']} {r['process_wall_s']:.2f} s", flush=True)
        print(f"warm-up {time.perf_counter() - start:.1f} s", flush=True)
    with open(args.out, "a", encoding="utf-8") as out:
        for idx, s in enumerate(systems):
            spec = s[size]
            base = {"system": f"{s['kind']} {spec}", "kind": s["kind"], "split": s["split"],
                    "class": s["class"], "spec": spec, "backend": args.backend, "index": idx}
            path = resolve(spec, args.data)
            if time.perf_counter() - start > args.budget or path is None:
                why = "budget spent" if path is not None else f"{spec} not found in {args.data}"
                out.write(json.dumps({**base, "choice": "default", "skipped": why}) + "\n")
                print(f"{base['system']}: skipped ({why})", flush=True)
                continue
            t_sys = time.perf_counter()
            best = None
            line = []
            run_choices = ["default"] + choices[s["class"]]
            if args.choices:
                keep = args.choices.split(",")
                run_choices = [c for c in run_choices if c in keep]
            for choice in run_choices:
                if choice != "default" and time.perf_counter() - t_sys > args.system_cap:
                    out.write(json.dumps({**base, "choice": choice, "skipped": "system time cap"}) + "\n")
                    line.append(f"{choice} skipped")
                    continue
                limit = args.cap
                if choice != "default" and best is not None:
                    limit = min(args.cap, args.factor * best + 1.0)
                r = run_one(args, path, choice, limit)
                if r["converged"]:
                    best = r["process_wall_s"] if best is None else min(best, r["process_wall_s"])
                out.write(json.dumps({**base, **r}) + "\n")
                out.flush()
                tag = "cut" if r["cut"] else ("ok" if r["converged"] else f"rc={r['rc']}")
                t = r["total_s"]
                pick = ""
                if choice == "default" and r.get("method"):
                    pick = f"={r['method']}+{r['precond']}"
                line.append(f"{choice}{pick} {tag} {t:.3f}/{r['process_wall_s']:.2f}s" if t is not None
                            else f"{choice}{pick} {tag} -/{r['process_wall_s']:.2f}s")
            print(f"{base['system']} [{s['split']}]: " + "; ".join(line), flush=True)
    print(f"done in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
