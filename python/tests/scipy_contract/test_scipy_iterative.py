"""SciPy 1.17's ``test_iterative.py`` run with segsparse's ``cg``, ``bicgstab`` and ``gmres``
(see ``conftest.py`` for how, and for the excluded tests and why)."""

import importlib
import os
import sys

import pytest

scipy = pytest.importorskip("scipy")

# The SciPy version whose tests define the contract (CI installs scipy==1.17.*).
PINNED = "1.17"

_MODE = os.environ.get("SEGSPARSE_SCIPY_CONTRACT", "")  # "1": required; "any": any version

if (not scipy.__version__.startswith(PINNED + ".") and scipy.__version__ != PINNED
        and _MODE != "any"):
    msg = f"the SciPy contract is pinned to SciPy {PINNED}.x, found {scipy.__version__}"
    if os.environ.get("SEGSPARSE_SCIPY_CONTRACT") == "1":
        raise RuntimeError(msg)
    pytest.skip(msg, allow_module_level=True)

import scipy.sparse.linalg._isolve as _isolve  # noqa: E402

import segsparse  # noqa: E402

_MODULE = "scipy.sparse.linalg._isolve.tests.test_iterative"
_saved = {name: getattr(_isolve, name) for name in ("cg", "bicgstab", "gmres")}
try:
    for _name in _saved:
        setattr(_isolve, _name, getattr(segsparse, _name))
    sys.modules.pop(_MODULE, None)
    try:
        _scipy_tests = importlib.import_module(_MODULE)
    except Exception as e:  # noqa: BLE001 (no tests in this SciPy build, or another layout)
        # A SciPy build without its tests, or another version's module that does not import
        # with our solvers in place (SciPy 1.18 keys its test parameters by SciPy's own
        # functions): skipped, unless the pinned contract is required.
        if os.environ.get("SEGSPARSE_SCIPY_CONTRACT") == "1":
            raise
        pytest.skip(f"SciPy {scipy.__version__}'s test_iterative.py cannot run here: "
                    f"{type(e).__name__}: {e}", allow_module_level=True)
finally:
    for _name, _f in _saved.items():
        setattr(_isolve, _name, _f)
    sys.modules.pop(_MODULE, None)

assert _scipy_tests.cg is segsparse.cg and _scipy_tests.gmres is segsparse.gmres

# Every test, test class and fixture of SciPy's module, collected here.
globals().update({
    k: v for k, v in vars(_scipy_tests).items()
    if k.startswith(("test_", "Test")) or k in ("solver", "case")
})
