"""``nvmathpy.linalg``'s calls on CPU matrices from order ``PLAN_FREE_CORES_FROM`` look at the
free cores first (nvmathpy/linalg/solvers/cpu/_pool_threads.py ``on_free_cores_of``, the plans'
``_on_threads`` and the direct paths of ``_one_matrix``): in a program of NumPy products, NumPy's
OpenBLAS threads still spin when nvmathpy's call starts, and a call of SciPy's OpenBLAS on every
core would wait milliseconds for its thread on their core (and leave its own threads spinning
into the program's next product). Smaller matrices, stacks of small matrices and plans with an
explicit thread count do not look; results are those of the call itself. What a look does
(each pool stepped down to the cores free) is tested in test_solvers_pool_threads.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import nvmathpy.linalg as nla
from nvmathpy.execution import ExecutionCPU
from nvmathpy.linalg.solvers import _one_matrix
from nvmathpy.linalg.solvers.cpu import _pool_threads
from nvmathpy.linalg.solvers.cpu._pool_threads import PLAN_FREE_CORES_FROM, POOLS


@pytest.fixture
def asked(monkeypatch):
    """The pools of every look at the free cores (the real look runs after the record)."""
    pools = []
    real = _pool_threads.stepped_down

    def spy(call, pools_=POOLS, *args, **kwargs):
        pools.append(pools_)
        return real(call, pools_, *args, **kwargs)

    monkeypatch.setattr(_pool_threads, "stepped_down", spy)
    monkeypatch.setattr(_one_matrix, "stepped_down", spy)
    return pools


def spd(rng, n):
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


CALLS = {
    "solve": lambda a: nla.solve(a, a[:, :3]),
    "inv": nla.inv,
    "cholesky": nla.cholesky,
    "qr": nla.qr,
    "svd": nla.svd,
    "eigh": nla.eigh,
    "lstsq": lambda a: nla.lstsq(a, a[:, :3]),
    "lu_factor": nla.lu_factor,
    "cho_factor": nla.cho_factor,
    "solve_triangular": lambda a: nla.solve_triangular(np.triu(a), a[:, 0]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_from_the_order_on_each_call_looks_and_below_it_none_does(asked, name):
    rng = np.random.default_rng(3)
    small, big = spd(rng, PLAN_FREE_CORES_FROM - 1), spd(rng, PLAN_FREE_CORES_FROM)
    CALLS[name](small)
    assert asked == []
    CALLS[name](big)
    assert asked and set(asked) == {POOLS}


def test_results_are_the_calls_own(asked):
    rng = np.random.default_rng(4)
    a = spd(rng, PLAN_FREE_CORES_FROM + 12)
    b = rng.standard_normal((a.shape[0], 3))
    x = nla.solve(a, b)
    assert asked
    assert np.linalg.norm(a @ x - b) <= 1e-12 * np.linalg.norm(a) * np.linalg.norm(x)
    c = nla.cholesky(a)
    assert np.linalg.norm(c @ c.T - a) <= 1e-13 * np.linalg.norm(a)


def test_stacks_of_small_matrices_and_explicit_thread_counts_do_not_look(asked):
    rng = np.random.default_rng(5)
    stack = np.stack([spd(rng, 8) for _ in range(300)])
    nla.solve(stack, stack[..., :1])
    nla.cholesky(stack)
    assert asked == []
    big = spd(rng, PLAN_FREE_CORES_FROM + 3)
    plan = nla.Cholesky(big, execution=ExecutionCPU(num_threads=1))
    plan.plan()
    plan.execute()
    assert asked == []
