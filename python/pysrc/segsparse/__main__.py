"""``python -m segsparse warm-up`` (also the ``segsparse`` command): fill the kernel disk cache
(see ``segsparse.warmup``); ``python -m segsparse info``: what segsparse found."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="segsparse", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("warm-up", help="compile the common kernels into the disk cache")
    w.add_argument("--dtypes", default="float32,float64",
                   help="comma-separated value types (default: float32,float64)")
    w.add_argument("--parts", default=None,
                   help="comma-separated parts: upload,spmv,solvers,primitives,amg (default all)")
    w.add_argument("--json", action="store_true", help="print the seconds as JSON")
    sub.add_parser("info", help="the GPU, driver, NVRTC and kernel cache in use")
    a = p.parse_args(argv)

    import segsparse
    from segsparse.warmup import _ALL, cache_dir, warmup

    if a.cmd == "info":
        info = segsparse.gpu_info()
        info["kernel_cache"] = cache_dir()
        print(json.dumps(info, indent=2))
        return 0
    parts = _ALL if a.parts is None else tuple(x for x in a.parts.split(",") if x)
    try:
        secs = warmup(dtypes=a.dtypes.split(","), parts=parts, verbose=not a.json)
    except segsparse.CudaUnavailableError as e:
        print(f"segsparse warm-up: no GPU, nothing to compile ({e})", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({"cache_dir": cache_dir(), "seconds": secs}))
    else:
        print(f"kernel cache: {cache_dir()} ({sum(secs.values()):.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
