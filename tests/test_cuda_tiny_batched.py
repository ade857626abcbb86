"""The generated tiny batched kernels as candidates of the CUDA engines, their hot paths run on
the host.

The solver plans (one-shot solve / inverse, LU, Cholesky) and Matmul run on the NumPy-backed
stand-in for CuPy, cuSOLVER / cuBLAS / cuBLASLt replaced by their host emulations
(tests/cuda_emulation*.py), and every generated kernel's real CUDA C source compiled with g++
under the emulation header of tests/kernels and launched with the engine's own packed
arguments. Results are compared with float64 NumPy/SciPy references for odd sizes, batches,
C/F/strided layouts and singular or non-positive-definite members (reported by batch index as
the cuSOLVER routes report them); the candidate lists, autotune and the wisdom round trip are
checked too. What the GPU does with the kernels is for tests/gpu/test_gpu_tiny_batched.py.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.linalg as sla

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")

from nvmathpy.cuda.bindings import cublaslt, cusolver  # noqa: E402
from nvmathpy.errors import LinAlgError, MissingDependencyError  # noqa: E402
from nvmathpy.kernels.tiny_register import register_solve_fits  # noqa: E402

try:
    cusolver.LIB.loaded
    cublaslt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"CUDA libraries not installed: {exc}", allow_module_level=True)

if shutil.which("g++") is None:  # pragma: no cover - depends on the machine
    pytest.skip("the kernel emulation needs g++", allow_module_level=True)

import cuda_emulation  # noqa: E402
import nvmathpy.linalg as nl  # noqa: E402
from cuda_emulation_solvers import HostArray, install  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda._tiny import TINY_GEMM  # noqa: E402
from nvmathpy.linalg.solvers.cuda import _functions as _cusolver_functions  # noqa: E402
from nvmathpy.linalg.solvers.cuda._engine import candidates  # noqa: E402
from nvmathpy.linalg.solvers.cuda._plans import CudaSolve  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402

TOL = {"float32": 5e-5, "float64": 1e-12}


# -- fixtures and helpers --------------------------------------------------------------------------


@pytest.fixture
def em(monkeypatch):
    """The solver emulation (tiny kernels through g++); yields it, launches in ``cuda_emulation.LAUNCHES``."""
    emulation = install(monkeypatch.setattr, monkeypatch.setitem)
    _cusolver_functions.plan_cache().clear()
    cuda_emulation.LAUNCHES.clear()
    yield emulation
    _cusolver_functions.plan_cache().clear()


@pytest.fixture
def mm_em(monkeypatch):
    """The cuBLASLt emulation behind ``Matmul(..., execution="cuda")``; yields the kernel launches."""
    from nvmathpy.execution import ExecutionCUDA
    from nvmathpy.linalg.gemm import matmul_plan

    cuda_emulation.install(monkeypatch.setattr, monkeypatch.setitem)
    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda value, device, device_id: ExecutionCUDA(0))
    cuda_emulation.LAUNCHES.clear()
    return cuda_emulation.LAUNCHES


def dev(x):
    return np.asarray(x).view(HostArray)


def up(x):
    return np.asarray(x).view(np.ndarray).astype(np.float64)


def rel(x, ref):
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300)


def laid_out(x, layout):
    """``x`` with each matrix in ``layout``: "C", "F" (column-major) or "strided" (every other column)."""
    if layout == "F":
        return np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2)
    if layout == "strided":
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    return x.copy()


def general(rng, shape, dtype):
    n = shape[-1]
    return (rng.standard_normal(shape) + 2 * np.sqrt(n) * np.eye(n)).astype(dtype)


def spd(rng, shape, dtype):
    g = rng.standard_normal(shape)
    return (g @ np.swapaxes(g, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def with_route(plan, label):
    plan.plan()
    candidate = next(c for c in plan._engine.candidates(plan.problem) if c.label == label)
    plan._install(plan._engine.prepare(plan.problem, candidate), "test")
    return plan


def solve_kernel_name(dtype, n, k):
    """The one-shot tiny kernel the rule picks: registers for the smallest systems."""
    return "nvm_tiny_reg_solve" if register_solve_fits(dtype, n, k) else "nvm_tiny_solve"


def tiny_launches():
    return [name for name, _, _ in cuda_emulation.LAUNCHES if name.startswith("nvm_tiny")]


def prefer(monkeypatch, word):
    """Make autotune's timings favour the candidates whose label contains ``word``."""
    from nvmathpy.plan import base

    def timings(calls, **kwargs):
        for _, call in calls:  # every candidate still runs once
            call()
        return {label: 1e-3 if word in label else 2e-3 for label, _ in calls}

    monkeypatch.setattr(base, "time_candidates", timings)


# -- 1. solver candidates ---------------------------------------------------------------------------


@pytest.mark.parametrize("operation, fields, expected", [
    ("solve", dict(n=8, count=100000, k=1, dtype="float64"), ["tiny", "getrfBatched", "getrf"]),
    ("solve", dict(n=16, count=256, k=64, dtype="float32"), ["tiny", "getrfBatched", "getrf"]),
    ("solve", dict(n=17, count=100000, k=1, dtype="float64"), ["getrfBatched", "tiny", "getrf"]),
    ("solve", dict(n=8, count=255, k=1, dtype="float64"), ["getrfBatched", "tiny", "getrf"]),
    ("solve", dict(n=32, count=10, inverse=True, dtype="float64"), ["getrfBatched", "tiny", "getrf"]),
    ("solve", dict(n=8, count=1000, k=65, dtype="float64"), ["getrfBatched", "getrf"]),
    ("solve", dict(n=33, count=1000, k=1, dtype="float64"), ["getrf", "getrfBatched"]),
    ("solve", dict(n=8, count=1000, k=1, dtype="complex128"), ["getrfBatched", "getrf"]),
    ("solve", dict(n=8, count=1, k=1, dtype="float64"), ["getrf"]),
    ("lu", dict(n=8, count=1000, dtype="float32"), ["tiny", "getrfBatched", "getrf"]),
    ("lu", dict(n=8, count=1, dtype="float32"), ["getrf"]),
    ("cholesky", dict(n=12, count=5000, dtype="float64"), ["tiny", "potrfBatched", "potrf"]),
    ("cholesky", dict(n=30, count=5000, dtype="float64"), ["potrfBatched", "tiny", "potrf"]),
    ("cholesky", dict(n=12, count=5000, dtype="complex64"), ["potrfBatched", "potrf"]),
    ("eigh", dict(n=8, count=5000, dtype="float64"), ["syevBatched", "syevjBatched", "syevd"]),
])
def test_solver_candidates(operation, fields, expected):
    assert [c.label for c in candidates(Problem.of(operation, **fields))] == expected


# -- 2. the one-shot solve and inverse ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, layout, b_shape", [
    (1, "C", (1,)), (5, "F", (3, 100, 5, 2)), (8, "C", (3, 100, 8, 1)), (13, "strided", (13, 3)),
    (16, "F", (100, 16, 64)), (7, "C", (1, 100, 7, 3)), (3, "C", (3,)),
])
def test_solve_takes_the_tiny_route(em, dtype, n, layout, b_shape):
    rng = np.random.default_rng(n)
    a = laid_out(general(rng, (3, 100, n, n), dtype), layout)
    b = rng.standard_normal(b_shape).astype(dtype)  # (n,): a vector; (n, k) and smaller batches broadcast
    a_before, b_before = a.copy(), b.copy()
    x = nl.solve(dev(a), dev(b))
    ref = np.linalg.solve(up(a), up(b))
    assert rel(x, ref) < TOL[dtype] * n
    k = b_shape[-1] if len(b_shape) > 1 else 1
    assert tiny_launches() == [solve_kernel_name(dtype, n, k)]
    assert not [name for name in em.names() if "getr" in name]  # no cuBLAS / cuSOLVER call
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


@pytest.mark.parametrize("dtype, layout, n", [("float64", "C", 11), ("float32", "F", 11), ("float64", "F", 4),
                                              ("float32", "C", 3)])
def test_inverse_takes_the_tiny_route(em, dtype, layout, n):
    rng = np.random.default_rng(11)
    a = laid_out(general(rng, (300, n, n), dtype), layout)
    assert rel(nl.inv(dev(a)), np.linalg.inv(up(a))) < TOL[dtype] * n
    assert tiny_launches() == [solve_kernel_name(dtype, n, n)]


def test_singular_systems_are_named_like_the_batched_route(em):
    rng = np.random.default_rng(12)
    a, b = general(rng, (2, 150, 6, 6), "float64"), rng.standard_normal((2, 150, 6, 2))
    a[1, 37, :, 2] = 0.0
    a[0, 140, 4] = 0.0  # a zero row: an exact zero pivot for LAPACK too
    with pytest.raises(LinAlgError, match=r"Singular matrix \(batch element \(0, 140\)\)"):
        nl.solve(dev(a), dev(b))
    messages = {}
    for label in ("tiny", "getrfBatched"):
        with with_route(CudaSolve(dev(a), dev(b)), label) as plan:
            plan._run()
            assert plan._route.failures() == [140, 187]
            with pytest.raises(LinAlgError) as info:
                plan.check()
            messages[label] = str(info.value)
    assert messages["tiny"] == messages["getrfBatched"]
    assert tiny_launches()[-1] == "nvm_tiny_reg_solve"


def test_register_route_flag_follows_each_call(em):
    """The failure flag is stamped per launch: a failing call, then a good one on the same plan
    (and the one-call function's cached plan), then the epoch wrapping around."""
    rng = np.random.default_rng(14)
    a, b = general(rng, (300, 8, 8), "float64"), rng.standard_normal((300, 8, 1))
    bad = a.copy()
    bad[299] = 0.0
    with pytest.raises(LinAlgError, match=r"Singular matrix \(batch element 299\)"):
        nl.solve(dev(bad), dev(b))
    assert rel(nl.solve(dev(a), dev(b)), np.linalg.solve(a, b)) < 1e-12  # the same cached plan, no error
    with with_route(CudaSolve(dev(bad), dev(b)), "tiny") as plan:
        plan._run()
        route = plan._route
        assert route.registers and route.failures() == [299]
        route._epoch = 0xFFFFFFFF  # the next launch wraps: the flag is cleared, the epoch restarts at 1
        plan._run()
        assert route._epoch == 1 and route.failures() == [299]
        plan._set(dev(a), dev(b))
        plan._run()
        assert route.failures() == []
    assert set(tiny_launches()) == {"nvm_tiny_reg_solve"}


def test_a_non_leading_size_through_an_installed_tiny_route(em):
    rng = np.random.default_rng(13)
    a, b = general(rng, (40, 29, 29), "float64"), rng.standard_normal((40, 29, 3))
    with with_route(CudaSolve(dev(a), dev(b)), "tiny") as plan:
        assert plan.candidate.label == "tiny"
        assert rel(plan._run(), np.linalg.solve(a, b)) < 1e-11
        plan.check()


# -- 3. the LU and Cholesky plans -------------------------------------------------------------------


@pytest.mark.parametrize("dtype, n, layout", [("float64", 9, "C"), ("float32", 4, "F"), ("float64", 16, "strided")])
def test_lu_plan_on_the_tiny_route(em, dtype, n, layout):
    rng = np.random.default_rng(n)
    a = laid_out(general(rng, (300, n, n), dtype) + 2 * np.tril(rng.standard_normal((n, n)), -1).astype(dtype),
                 layout)
    b = rng.standard_normal((300, n, 3)).astype(dtype)
    with nl.LU(dev(a)) as plan:
        plan.plan()
        assert plan.candidate.label == "tiny"
        for trans in (0, 1):
            op = np.swapaxes(up(a), -1, -2) if trans else up(a)
            assert rel(plan.solve(dev(b), trans=trans), np.linalg.solve(op, up(b))) < TOL[dtype] * n
        assert rel(plan.det(), np.linalg.det(up(a))) < TOL[dtype] * n
        lu, piv = plan.factors
        for i in (0, 151, 299):
            ref_lu, ref_piv = sla.lu_factor(up(a[i]))
            np.testing.assert_array_equal(np.asarray(piv)[i], ref_piv)
            assert rel(np.asarray(lu)[i], ref_lu) < TOL[dtype] * n
    assert set(tiny_launches()) >= {"nvm_tiny_factor", "nvm_tiny_factored_solve"}


def test_lu_plan_solves_many_columns_and_reports_singular_members(em):
    rng = np.random.default_rng(21)
    a, b = general(rng, (4, 75, 8, 8), "float64"), rng.standard_normal((4, 75, 8, 150))
    a[2, 5] = 0.0
    with nl.LU(dev(a)) as plan:
        plan.plan()
        assert plan.candidate.label == "tiny" and plan.singular == [(2, 5)]
        with pytest.raises(LinAlgError, match=r"Singular matrix \(batch element \(2, 5\)\)"):
            plan.check()
        ok = np.ones((4, 75), bool)
        ok[2, 5] = False
        x = np.asarray(plan.solve(dev(b)))  # 150 columns: three launches of at most 64
        assert rel(x[ok], np.linalg.solve(a[ok], b[ok])) < 1e-12
    assert tiny_launches().count("nvm_tiny_factored_solve") == 3


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype, layout", [("float64", "C"), ("float32", "F")])
def test_cholesky_plan_on_the_tiny_route(em, dtype, layout, lower):
    rng = np.random.default_rng(31)
    n = 10
    a = spd(rng, (3, 90, n, n), dtype)
    ignored = np.triu(np.full((n, n), 50.0), 1) if lower else np.tril(np.full((n, n), 50.0), -1)
    a_given = laid_out(a + ignored.astype(dtype), layout)  # only the `lower` triangle may be read
    b = rng.standard_normal((3, 90, n, 2)).astype(dtype)
    with nl.Cholesky(dev(a_given), lower=lower) as plan:
        plan.plan()
        assert plan.candidate.label == "tiny"
        factor = np.linalg.cholesky(up(a))
        assert rel(plan.factor, factor if lower else np.swapaxes(factor, -1, -2)) < TOL[dtype] * n
        assert rel(plan.solve(dev(b)), np.linalg.solve(up(a), up(b))) < TOL[dtype] * n
    assert set(tiny_launches()) == {"nvm_tiny_factor", "nvm_tiny_factored_solve"}


def test_non_positive_definite_member_is_named(em):
    rng = np.random.default_rng(32)
    a = spd(rng, (300, 6, 6), "float64")
    a[123, 3, 3] = -1.0
    with pytest.raises(LinAlgError, match=r"not positive definite \(batch element 123\)"):
        nl.cholesky(dev(a))
    with nl.Cholesky(dev(a)) as plan:
        plan.plan()
        assert plan.candidate.label == "tiny" and plan._computed().failures() == [123]


def test_autotune_times_the_tiny_route_and_wisdom_replays_it(em, monkeypatch):
    prefer(monkeypatch, "tiny")
    rng = np.random.default_rng(41)
    a, b = general(rng, (64, 12, 12), "float64"), rng.standard_normal((64, 12, 2))
    with nl.LU(dev(a)) as plan:
        assert plan.plan().candidate.label == "getrfBatched"  # 64 systems: the batched route leads
        timings = plan.autotune(effort="exhaustive", repeats=2)
        assert len(timings) == 3 and plan.candidate.label == "tiny" and plan.chosen_by == "autotune"
        assert rel(plan.solve(dev(b)), np.linalg.solve(a, b)) < 1e-12
    with nl.LU(dev(a)) as fresh:
        fresh.plan()
        assert fresh.chosen_by == "wisdom" and fresh.candidate.label == "tiny"
        assert rel(fresh.solve(dev(b)), np.linalg.solve(a, b)) < 1e-12


# -- 4. matmul ---------------------------------------------------------------------------------------


def mm_plan(a, b, **kwargs):
    inputs = kwargs.pop("epilogue_inputs", None)
    if inputs is not None:
        kwargs["epilogue_inputs"] = {k: dev(v) for k, v in inputs.items()}
    if "c" in kwargs:
        kwargs["c"] = dev(kwargs["c"])
    return Matmul(dev(a), dev(b), execution="cuda", **kwargs)


def labels(plan):
    return [c.label for c in plan._engine.candidates(plan.problem)]


@pytest.mark.parametrize("a_shape, b_shape, dtype, epilogue, where", [
    ((1000, 8, 8), (1000, 8, 8), "float64", None, 0),
    ((300, 16, 3), (3, 16), "float32", "relu", 0),
    ((20, 24, 24), (20, 24, 24), "float64", "gelu", -1),
    ((100, 32, 32), (32, 32), "float32", None, -1),
    ((2, 8, 8), (2, 8, 8), "float64", None, None),        # too few products
    ((1000, 33, 8), (8, 8), "float64", None, None),       # too large
    ((1000, 8, 8), (8, 8), "complex128", None, None),     # complex
    ((1000, 8, 8), (8, 8), "float64", "relu_aux", None),  # an epilogue the kernel does not apply
])
def test_matmul_candidates(mm_em, a_shape, b_shape, dtype, epilogue, where):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    with mm_plan(a, b, epilogue=epilogue) as plan:
        found = labels(plan)
    assert [i for i, label in enumerate(found) if label == TINY_GEMM] == (
        [] if where is None else [where % len(found)])
    assert found.count("cublaslt") == len(found) - (where is not None)


def reference(a, b, epilogue=None, bias=None, c=None, alpha=1.0, beta=0.0):
    x = alpha * (up(a) @ up(b)) + (beta * up(c) if c is not None else 0)
    if bias is not None:
        x = x + up(bias)
    if epilogue and epilogue.startswith("relu"):
        x = np.maximum(x, 0)
    if epilogue and epilogue.startswith("gelu"):
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("epilogue", [None, "bias", "relu", "gelu", "relu_bias", "gelu_bias"])
def test_matmul_epilogues_on_the_tiny_gemm(mm_em, dtype, epilogue):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((300, 5, 3)).astype(dtype), rng.standard_normal((300, 3, 7)).astype(dtype)
    bias = rng.standard_normal(7).astype(dtype) if epilogue and epilogue.endswith("bias") else None
    with mm_plan(a, b, epilogue=epilogue, epilogue_inputs=None if bias is None else {"bias": bias}) as plan:
        plan.plan()
        assert plan.candidate.label == TINY_GEMM
        assert rel(plan.execute(), reference(a, b, epilogue, bias)) < TOL[dtype] * 3
    assert tiny_launches() == ["nvm_tiny_gemm"]


@pytest.mark.parametrize("case", ["F a, T b", "broadcast b", "c alpha beta", "row bias", "batched bias", "out",
                                  "strided a"])
def test_matmul_layouts_on_the_tiny_gemm(mm_em, case):
    rng = np.random.default_rng(3)
    batch, m, k, n = (4, 70), 9, 11, 13
    a = rng.standard_normal(batch + (m, k))
    b = rng.standard_normal(batch + (k, n))
    kwargs, bias, c, alpha, beta, epilogue = {}, None, None, 1.0, 0.0, None
    if case == "F a, T b":
        a, b = laid_out(a, "F"), np.swapaxes(np.swapaxes(b, -1, -2).copy(), -1, -2)
    elif case == "strided a":
        a = laid_out(a, "strided")
    elif case == "broadcast b":
        b = b[0, 0]
    elif case == "c alpha beta":
        c, alpha, beta = rng.standard_normal((m, n)), 0.5, -2.0
        kwargs.update(c=c, alpha=alpha, beta=beta)
    elif case == "row bias":
        bias, epilogue = rng.standard_normal((m, 1)), "relu_bias"
    elif case == "batched bias":
        bias, epilogue = rng.standard_normal((70, 1, n)), "gelu_bias"
    if bias is not None:
        kwargs.update(epilogue=epilogue, epilogue_inputs={"bias": bias})
    with mm_plan(a, b, **kwargs) as plan:
        plan.plan()
        assert plan.candidate.label == TINY_GEMM
        expected = reference(a, b, epilogue, bias, c, alpha, beta)
        if case == "out":
            out = dev(np.full(batch + (m, n), np.nan))
            assert plan.execute(out=out) is out
            assert rel(out, expected) < 1e-12
        else:
            assert rel(plan.execute(), expected) < 1e-12


def test_matmul_autotune_and_wisdom_with_the_tiny_gemm(mm_em, monkeypatch):
    prefer(monkeypatch, "tiny")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((40, 20, 30)), rng.standard_normal((40, 30, 25))
    bias = rng.standard_normal(25)
    expected = reference(a, b, "relu_bias", bias)
    with mm_plan(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as plan:
        assert plan.plan().candidate.label == "cublaslt"  # not a lead size
        timings = plan.autotune(effort="exhaustive", repeats=2)
        assert len(timings) == 4 and plan.candidate.label == TINY_GEMM
        assert rel(plan.execute(), expected) < 1e-12
    with mm_plan(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as fresh:
        fresh.plan()
        assert fresh.chosen_by == "wisdom" and fresh.candidate.label == TINY_GEMM
        assert rel(fresh.execute(), expected) < 1e-12
