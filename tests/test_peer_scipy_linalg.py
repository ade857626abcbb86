"""SciPy's own ``scipy/linalg`` tests, as installed, run against :mod:`nvmathpy.scipy.linalg`:
``test_basic.py``, ``test_decomp.py``, ``test_decomp_lu.py``, ``test_decomp_cholesky.py``,
``test_decomp_ldl.py`` and ``test_matfuncs.py``.

The copies import the names they test (``from scipy.linalg import ...``) from nvmathpy's
namespace instead (names nvmathpy does not implement are SciPy's own objects there, so every
import resolves); SciPy's private modules and its ``lapack``/``blas`` wrappers, which the tests
use to build expected values, stay SciPy's. Every test that passes with SciPy must pass with
nvmathpy, except the few listed in :data:`EXPECTED_FAILURES` with the reason.

The whole set takes minutes (two pytest runs of about 3,300 tests side by side), so it is
``slow``; the default run takes the tests of the functions nvmathpy implements that run
quickly (:data:`FAST`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from peer_suites import Suite, not_passing, run_side_by_side, installed_tests

_IMPORT = [(r"^from scipy\.linalg import (?!_)", "from nvmathpy.scipy.linalg import ")]
_SCIPY_CONFTEST = "from scipy.conftest import *  # noqa: F401,F403 (SciPy's markers: xslow, ...)\n"

LINALG = Suite(
    "scipy.linalg.tests",
    {name: _IMPORT for name in ("test_basic.py", "test_decomp.py", "test_decomp_lu.py", "test_decomp_cholesky.py",
                                "test_decomp_ldl.py", "test_matfuncs.py")},
    leftover=r"^\s*from scipy\.linalg import (?!_)",
    conftest=_SCIPY_CONFTEST,
    peer_conftest=_SCIPY_CONFTEST,
)

#: The default run: the files of the factorizations, and test_basic's classes of the functions
#: nvmathpy implements.
FAST = (("test_basic.py", "test_decomp_lu.py", "test_decomp_cholesky.py", "test_decomp_ldl.py"),
        ("-k", "not test_basic.py or TestSolve or TestInv or TestDet or TestLstsq or TestDTypes or TestOverwrite"))

#: Tests that pass with SciPy and cannot pass with nvmathpy, by test id, with the reason.
EXPECTED_FAILURES: dict[str, str] = {}


def _check(files: tuple[str, ...], options: tuple[str, ...], tmp_path: Path) -> None:
    source = installed_tests(LINALG)
    if source is None:
        pytest.skip(f"{LINALG.package} is not installed")
    expected, got = run_side_by_side(LINALG, source, tmp_path, files, options)
    wrong = not_passing(expected, got)
    unexplained = {test_id: outcome for test_id, outcome in wrong.items() if test_id not in EXPECTED_FAILURES}
    assert not unexplained, f"{len(unexplained)} of {len(got)} of SciPy's tests do not pass with nvmathpy: {unexplained}"
    stale = [test_id for test_id in EXPECTED_FAILURES if got.get(test_id) == "passed"]
    assert not stale, f"listed as expected failures but passing now (remove them from the list): {stale}"


def test_scipy_linalg_suite_fast_part(tmp_path: Path) -> None:
    _check(*FAST, tmp_path)


@pytest.mark.slow
def test_scipy_linalg_suite(tmp_path: Path) -> None:
    _check(LINALG.files, (), tmp_path)


def test_every_scipy_name_resolves() -> None:
    """Every public name of ``scipy.linalg`` is importable from nvmathpy's namespace; the names
    nvmathpy does not implement are SciPy's own objects."""
    scipy_linalg = pytest.importorskip("scipy.linalg")
    import nvmathpy.scipy.linalg as ours

    for name in scipy_linalg.__all__:
        value = getattr(ours, name)
        if name not in ours.__all__:
            assert value is getattr(scipy_linalg, name), name
    assert set(scipy_linalg.__all__) <= set(dir(ours))
    with pytest.raises(AttributeError):
        ours.not_a_scipy_name  # noqa: B018
