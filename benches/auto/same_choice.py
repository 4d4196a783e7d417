#!/usr/bin/env python3
"""The same choice from the CLI, the Rust API and Python on the GPU: for each spec, the final
method and preconditioner of `sparse-solve SPEC --backend gpu --format json` (the Rust API's
`autosolve::solve`, the CLI's default) against `segsparse.solve` on the same generated matrix
(uploaded, right-hand side of ones, rtol 1e-8, the per-pattern cache cleared). One JSON line per
system; a probe's decision may differ where the two runs' measured rates sit at the decision's
edge, which the line shows (the probe's predictions on both sides).

    python3 benches/auto/same_choice.py --bin sparse-solve SPEC [SPEC ...]
"""

import argparse
import json
import subprocess

import scipy.sparse as sp

import segsparse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    import cupy as cp

    for spec in args.specs:
        out = subprocess.run([args.bin, spec, "--backend", "gpu", "--format", "json", "--rhs",
                              "ones", "--tol", "1e-8"], capture_output=True, text=True)
        try:
            cli = json.loads(out.stdout.strip().splitlines()[-1])["auto"]
        except (ValueError, IndexError, KeyError):
            print(json.dumps({"spec": spec, "cli_error": out.stderr[-400:]}), flush=True)
            continue
        indptr, indices, values, shape = segsparse._core.generate_matrix(spec)
        a = sp.csr_matrix((values, indices, indptr), shape=shape)
        m = segsparse.Matrix(a, device="gpu")
        segsparse.clear_auto_cache()
        _, info = segsparse.solve(m, cp.ones(shape[0]), rtol=1e-8, maxiter=10000)
        py = info.choice
        print(json.dumps({
            "spec": spec, "cli": [cli["method"], cli["precond"]],
            "python": [py["method"], py["precond"]],
            "same": [cli["method"], cli["precond"]] == [py["method"], py["precond"]],
            "cli_tried": cli.get("tried"), "python_tried": py.get("tried"),
            "cli_probe": cli.get("probe"), "python_probe": py.get("probe")}), flush=True)


if __name__ == "__main__":
    main()
