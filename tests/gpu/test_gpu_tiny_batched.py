"""The generated tiny batched kernels on a GPU: the ``tiny`` routes of the solver plans and the
tiny GEMM candidate of Matmul, against float64 NumPy references.

Stacks of small systems through ``nvmathpy.linalg.solve`` / ``inv`` (C and F layouts), the LU and
Cholesky plans on the route (factors, both ``getrs`` operations), singular / non-positive-definite
members named by batch index as on the cuSOLVER routes, autotune among the routes, and batched
small products with the built-in epilogues. Under the host emulation (``-p cuda_emulation``) this
module installs the cuSOLVER part of the emulation as tests/gpu/test_gpu_solvers.py does, so its
logic is checked on machines without a GPU.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.linalg as sla

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

#: Under the host emulation every kernel block runs on the CPU: stacks just large enough for the
#: tiny routes to lead (256 systems) keep the module quick there.
EMULATED = type(cupy).__name__ == "module" and getattr(cupy.ndarray, "__name__", "") == "HostArray"
if EMULATED:
    from cuda_emulation_solvers import install

    install(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))
    cupy = sys.modules["cupy"]

import nvmathpy.linalg as nl  # noqa: E402
from nvmathpy.errors import LinAlgError  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.solvers.cuda._plans import CudaSolve  # noqa: E402

TOL = {"float32": 1e-4, "float64": 1e-11}
#: Bounds on a normwise backward error (partial pivoting keeps it near the unit roundoff).
BACKWARD_TOL = {"float32": 1e-5, "float64": 1e-13}
COUNT = 300 if EMULATED else 4096


def backward_error(a, x, b):
    """The largest normwise backward error ``|a x - b| / (|a| |x| + |b|)`` over a stack of
    systems, in float64."""
    a, x, b = up(a), up(x), up(b)
    residual = np.linalg.norm(a @ x - b, axis=(-2, -1))
    scale = np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(x, axis=(-2, -1)) + np.linalg.norm(b, axis=(-2, -1))
    return float(np.max(residual / scale))


def up(x):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    return x.astype(np.float64)


def rel(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def on_device(host, layout="C"):
    if layout == "F":
        return cupy.asarray(np.swapaxes(host, -1, -2).copy()).swapaxes(-1, -2)
    return cupy.asarray(host)


def general(rng, shape, dtype):
    return (rng.standard_normal(shape) + 2 * np.sqrt(shape[-1]) * np.eye(shape[-1])).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, layout", [(8, "C"), (5, "F"), (16, "C"), (1, "F")])
def test_batched_small_solves_take_the_tiny_route(dtype, n, layout):
    rng = np.random.default_rng(n)
    a, b = general(rng, (COUNT, n, n), dtype), rng.standard_normal((COUNT, n, 2)).astype(dtype)
    da, db = on_device(a, layout), on_device(b)
    with CudaSolve(da, db) as plan:
        assert plan.plan().candidate.label == "tiny"
    assert rel(nl.solve(da, db), np.linalg.solve(up(a), up(b))) < TOL[dtype] * n
    vector = b[0, :, 0]  # (n,): one right-hand side for every system
    assert rel(nl.solve(da, cupy.asarray(vector)), np.linalg.solve(up(a), up(vector))) < TOL[dtype] * n
    assert rel(nl.inv(da), np.linalg.inv(up(a))) < TOL[dtype] * n


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_register_kernel_on_a_large_odd_stack(dtype, layout):
    """10^5 + 3 systems of 8x8 with one right-hand side (the register kernel, one thread per
    system), each needing a row interchange; then singular members in the first and the last
    block: the first one is named, and the cached plan's next good call raises nothing."""
    count = 1001 if EMULATED else 100003
    rng = np.random.default_rng(21)
    a, b = general(rng, (count, 8, 8), dtype), rng.standard_normal((count, 8, 1)).astype(dtype)
    a[:, 0, 0] = 0.0  # the first pivot comes from another row
    da, db = on_device(a, layout), on_device(b)
    # Among 10^5 random systems some are ill-conditioned, and in float32 their forward error
    # (which cupy.linalg.solve shares) dominates a norm over the stack: check each system's
    # backward error, which partial pivoting bounds whatever the conditioning.
    assert backward_error(a, nl.solve(da, db), b) < BACKWARD_TOL[dtype]
    with CudaSolve(da, db) as plan:
        plan.plan()
        plan._run()
        plan.check()
        assert plan.candidate.label == "tiny" and plan._route.registers
    bad = a.copy()
    bad[count - 1] = 0.0
    bad[17, :, 5] = 0.0
    with pytest.raises(LinAlgError, match=r"Singular matrix \(batch element 17\)"):
        nl.solve(on_device(bad, layout), db)
    assert backward_error(a, nl.solve(da, db), b) < BACKWARD_TOL[dtype]


def test_tiny_and_batched_routes_agree_and_name_singular_members_alike():
    rng = np.random.default_rng(2)
    a, b = general(rng, (3, COUNT // 3, 7, 7), "float64"), rng.standard_normal((3, COUNT // 3, 7, 3))
    a[2, 41, 3] = 0.0
    da, db = on_device(a), on_device(b)
    ok = np.ones((3, COUNT // 3), bool)
    ok[2, 41] = False
    messages = []
    for label in ("tiny", "getrfBatched"):
        with CudaSolve(da, db) as plan:
            plan.plan()
            chosen = next(c for c in plan._engine.candidates(plan.problem) if c.label == label)
            plan._install(plan._engine.prepare(plan.problem, chosen), "test")
            x = up(plan._run())
            assert rel(x[ok], np.linalg.solve(a[ok], b[ok])) < 1e-11
            with pytest.raises(LinAlgError, match=r"batch element \(2, 41\)") as info:
                plan.check()
            messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("layout", ["C", "F"])
def test_lu_plan_on_the_tiny_route(layout):
    rng = np.random.default_rng(3)
    a = general(rng, (COUNT, 12, 12), "float64") + 2 * np.tril(rng.standard_normal((12, 12)), -1)
    b = rng.standard_normal((COUNT, 12, 70))
    with nl.LU(on_device(a, layout)) as plan:
        assert plan.plan().candidate.label == "tiny"
        assert rel(plan.solve(on_device(b)), np.linalg.solve(a, b)) < 1e-11
        assert rel(plan.solve(on_device(b), trans=1), np.linalg.solve(np.swapaxes(a, -1, -2), b)) < 1e-11
        assert rel(plan.det(), np.linalg.det(a)) < 1e-11
        lu, piv = plan.factors
        ref_lu, ref_piv = sla.lu_factor(a[17])
        assert rel(up(lu)[17], ref_lu) < 1e-11
        np.testing.assert_array_equal(cupy.asnumpy(piv)[17], ref_piv)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_plan_on_the_tiny_route(lower):
    rng = np.random.default_rng(4)
    g = rng.standard_normal((COUNT, 9, 9))
    a = (g @ np.swapaxes(g, -1, -2) + 9 * np.eye(9)).astype("float32")
    a[123, 5, 5] = -3.0
    b = rng.standard_normal((COUNT, 9, 1)).astype("float32")
    with nl.Cholesky(on_device(a), lower=lower) as plan:
        assert plan.plan().candidate.label == "tiny"
        with pytest.raises(LinAlgError, match=r"not positive definite \(batch element 123\)"):
            plan.check()
        ok = np.arange(COUNT) != 123
        factor = np.linalg.cholesky(up(a[ok]))
        got = up(plan.factor)[ok]
        assert rel(got, factor if lower else np.swapaxes(factor, -1, -2)) < 1e-4
        assert rel(up(plan.solve(on_device(b)))[ok], np.linalg.solve(up(a[ok]), up(b[ok]))) < 1e-4


def test_autotune_among_the_routes():
    rng = np.random.default_rng(5)
    a, b = general(rng, (300, 10, 10), "float32"), rng.standard_normal((300, 10, 1)).astype("float32")
    with nl.LU(on_device(a)) as plan:
        timings = plan.autotune(effort="exhaustive", repeats=2)
        assert {"tiny", "getrfBatched", "getrf"} <= {key.split("(")[0] for key in timings}
        assert rel(plan.solve(on_device(b)), np.linalg.solve(up(a), up(b))) < 1e-4


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("epilogue", [None, "relu", "gelu_bias"])
def test_batched_small_products_on_the_tiny_gemm(dtype, epilogue):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((COUNT, 8, 5)).astype(dtype), rng.standard_normal((COUNT, 5, 8)).astype(dtype)
    bias = rng.standard_normal(8).astype(dtype)
    inputs = {"bias": cupy.asarray(bias)} if epilogue == "gelu_bias" else None
    with Matmul(on_device(a), on_device(b, "F"), epilogue=epilogue, epilogue_inputs=inputs) as mm:
        assert mm.plan().candidate.label == "tiny-gemm"
        got = mm.execute()
    x = up(a) @ up(b) + (up(bias) if inputs else 0)
    if epilogue == "relu":
        x = np.maximum(x, 0)
    elif epilogue == "gelu_bias":
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    assert rel(got, x) < TOL[dtype] * 5
