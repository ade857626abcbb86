"""What the look-ahead drivers' tests share (tests/test_solvers_lookahead_*.py)."""

from __future__ import annotations

import pytest

from nvmathpy.linalg.solvers.cpu import _lookahead as lookahead

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
