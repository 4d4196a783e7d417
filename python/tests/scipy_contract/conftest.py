"""SciPy's own iterative-solver tests with segsparse's solvers put in their place.

``test_scipy_iterative.py`` imports ``scipy/sparse/linalg/_isolve/tests/test_iterative.py``
(shipped in SciPy's wheel) after replacing ``cg``, ``bicgstab`` and ``gmres`` in
``scipy.sparse.linalg._isolve`` by segsparse's, so the module's solver list and every case it
builds use ours. The tests of SciPy's other solvers (bicg, cgs, gcrotmk, lgmres, minres, qmr,
tfqmr) test SciPy, not segsparse: they are deselected, as are the cases below, each with its
reason. The check runs against the SciPy version in ``PINNED`` (CI installs it); another
version skips the module (``SEGSPARSE_SCIPY_CONTRACT=1`` turns that into a failure,
``SEGSPARSE_SCIPY_CONTRACT=any`` runs the installed version's tests; the pin is ``PINNED`` in
``test_scipy_iterative.py``).
"""

import re

OURS = {"cg", "bicgstab", "gmres"}

# test id (regular expression, matched against the whole node id's test part) -> reason.
EXCLUDED = {
    r"test_show.*": "tests SciPy's tfqmr (its show= output)",
    r"TestQMR::.*": "tests SciPy's qmr",
}


def _solver_of(param: str):
    """The solver named by a parameter id: 'poisson1d-cg' -> 'cg', 'gmres' -> 'gmres'."""
    return param.rsplit("-", 1)[-1]


def pytest_configure(config):
    config.addinivalue_line("markers", "fail_slow(seconds): SciPy's marker (pytest-fail-slow)")


_EXCLUDED_OURS = {}


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        if "scipy_contract" not in str(item.fspath):
            keep.append(item)
            continue
        name = item.nodeid.split("::", 1)[1]
        m = re.search(r"\[(.*)\]$", name)
        if m and _solver_of(m.group(1)) not in OURS:
            drop.append(item)
            continue
        reason = next((r for p, r in EXCLUDED.items() if re.fullmatch(p, name)), None)
        if reason is not None:
            drop.append(item)
            _EXCLUDED_OURS.setdefault(reason, []).append(name)
            continue
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter):
    if not _EXCLUDED_OURS:
        return
    n = sum(len(v) for v in _EXCLUDED_OURS.values())
    terminalreporter.write_line(f"SciPy contract: {n} tests excluded (other solvers' tests not counted):")
    for reason, names in _EXCLUDED_OURS.items():
        terminalreporter.write_line(f"  {len(names):3d}  {reason}")
