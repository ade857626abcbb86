"""What the look-ahead drivers' tests share (tests/test_solvers_lookahead_*.py), and what they
share with the other drivers a calibration puts first (tests/test_solvers_blocked_eigh.py)."""

from __future__ import annotations

import pytest

from nvmathpy.linalg.solvers.cpu import _lookahead as lookahead
from nvmathpy.plan import calibration

#: Relative tolerances per dtype of the factors' reconstructions.
TOL = {"float32": 2e-6, "float64": 1e-14}


@pytest.fixture(autouse=True)
def no_other_threads(monkeypatch):
    """Every call takes the look-ahead path (a thread left running by another test, say a
    background build, or another process would send it to the other algorithm; that choice has
    its own tests)."""
    monkeypatch.setattr(lookahead, "others_running", lambda: 0)
    monkeypatch.setattr(lookahead, "busy_elsewhere", lambda: 0)


def thread_count() -> int:
    """OpenBLAS's thread count now (the drivers must leave it as they found it)."""
    get, _ = lookahead._thread_count_functions()
    return get()


def calibrated_first(kind: str, dtype: str, order: int, algorithm: str | None) -> None:
    """Store, in this test's wisdom, that this machine's calibration puts ``algorithm`` first for
    ``kind`` (``"getrf"``, ``"potrf"``, ``"eigh"``) at ``order`` (one of the calibrated orders):
    without it, calibration off puts SciPy's routine first at the orders calibration covers."""
    calibration.record(f"{kind}.{dtype}.{order}", {"first": algorithm}, {}, 0.0)
