"""The compiled batched small solver (nvmathpy.linalg.solvers.cpu._compiled) and the ``compiled``
candidate of the solve plan: against float64 NumPy references for every dtype and n = 1..16,
inverses, several right-hand sides, non-contiguous stacks, singular and NaN matrices in a
batch (reported by index through the LAPACK fallback), and inputs left unmodified."""

from __future__ import annotations

import numpy as np
import pytest
from numerics import rand, up

import nvmathpy.linalg as la
from nvmathpy.kernels import cpu_jit
from nvmathpy.linalg.solvers.cpu._compiled import COMPILED_MAX, compiled_solver
from nvmathpy.linalg.solvers.plans.solve import Solve

pytestmark = pytest.mark.skipif(not cpu_jit.available(), reason="no C compiler here")
TOL = {"float32": 2e-4, "float64": 1e-11, "complex64": 2e-4, "complex128": 1e-11}


def well_conditioned(rng, shape, dtype):
    a = rand(rng, shape, dtype)
    n = shape[-1]
    return (a + 2 * n * np.eye(n, dtype=a.dtype)).astype(a.dtype)


@pytest.mark.parametrize("dtype", sorted(TOL))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 16])
def test_solve_and_inverse_against_numpy(dtype, n):
    rng = np.random.default_rng(n)
    a = well_conditioned(rng, (37, n, n), dtype)
    a[::3] = rand(rng, (13, n, n), dtype)  # some general matrices too (pivoting matters)
    b = rand(rng, (37, n, 3), dtype)
    fast = compiled_solver(n, dtype)
    x, flagged = fast(a, b)
    assert not flagged.any()
    want = np.linalg.solve(up(a), up(b))
    resid = np.linalg.norm(up(a) @ x - up(b)) / (np.linalg.norm(up(a)) * np.linalg.norm(x))
    assert resid < TOL[dtype]
    inv, flagged = fast(a, None)
    assert not flagged.any()
    assert np.linalg.norm(up(a) @ inv - np.eye(n)) / np.sqrt(37 * n) < TOL[dtype] * np.linalg.cond(up(a)).max()
    assert x.dtype == a.dtype and want.shape == x.shape


def test_singular_and_nan_matrices_are_flagged():
    rng = np.random.default_rng(3)
    a = well_conditioned(rng, (5, 4, 4), "float64")
    a[1, 2] = a[1, 0] * 2  # exactly singular
    a[3, 1, 1] = np.nan
    x, flagged = compiled_solver(4, "float64")(a, np.ones((5, 4, 1)))
    assert flagged.tolist() == [False, True, False, True, False]
    assert np.allclose(a[0] @ x[0], 1)


def test_plan_uses_it_and_names_the_singular_element():
    rng = np.random.default_rng(4)
    a = well_conditioned(rng, (2, 3, 5, 5), "float64")
    b = rand(rng, (2, 3, 5, 2), "float64")
    before = a.copy(), b.copy()
    with Solve(a, b) as plan:
        assert plan.plan().candidate.label == "compiled"
        x = plan.execute()
    assert np.allclose(a @ x, b)
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])
    a[1, 2] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match=r"batch element \(1, 2\)"):
        la.solve(a, b)


def test_non_contiguous_stacks_and_out_of_range():
    rng = np.random.default_rng(5)
    a = well_conditioned(rng, (9, 6, 6), "float32").transpose(0, 2, 1)[::2]
    b = rand(rng, (9, 6, 4), "float32")[::2, :, ::2]
    x = la.solve(a, b)
    assert np.linalg.norm(up(a) @ up(x) - up(b)) / np.linalg.norm(up(b)) < 1e-4
    assert compiled_solver(COMPILED_MAX + 1, "float64") is None
    assert compiled_solver(3, "float16") is None
