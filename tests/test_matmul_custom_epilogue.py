"""Custom (Python) matmul epilogues on the CPU: results against float64 NumPy references,
input kinds, indices, batches, dtypes, every candidate, errors, and plan/wisdom key identity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numerics import TOL, np_dtype, rand, up

import nvmathpy.linalg as la
from nvmathpy.errors import InvalidOperandError
from nvmathpy.kernels.trace import UnsupportedOperationError
from nvmathpy.linalg import epilogues
from nvmathpy.linalg.gemm import matmul_plan


def rel_err(got, ref) -> float:
    got = up(got)
    err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)
    assert np.isfinite(err), "NaN/inf in the result"
    return float(err)


def swiglu(x, gate, scale):
    return x * (gate / (1 + np.exp(-gate))) * scale


def residual(x, res):
    return x + res


def gelu_bias_custom(x, bias):
    return epilogues.gelu(x + bias)


def gelu_ref(z):
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(37, 29, 41), (130, 67, 257)])
def test_swiglu_tail_with_full_matrix_gate(dtype, shape):
    rng = np.random.default_rng(1)
    m, k, n = shape
    a, b, gate = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype), rand(rng, (m, n), dtype)
    got = la.matmul(a, b, epilogue=swiglu, epilogue_inputs={"gate": gate, "scale": 0.75})
    g = up(gate)
    ref = (up(a) @ up(b)) * (g / (1 + np.exp(-g))) * 0.75
    assert got.dtype == a.dtype and got.shape == (m, n)
    assert rel_err(got, ref) < TOL[dtype] * 3


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_residual_add_transposed_operands(dtype):
    rng = np.random.default_rng(2)
    a = rand(rng, (53, 31), dtype).T  # F-order view (31, 53)
    b = rand(rng, (53, 47), dtype)
    res = rand(rng, (31, 47), dtype)
    got = la.matmul(a, b, epilogue=residual, epilogue_inputs={"res": res})
    ref = up(a) @ up(b) + up(res)
    assert got.dtype == np_dtype(dtype)
    assert rel_err(got, ref) < TOL[dtype] * 3


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_custom_gelu_bias_equals_builtin(dtype):
    rng = np.random.default_rng(3)
    a, b, bias = rand(rng, (64, 48), dtype), rand(rng, (48, 33), dtype), rand(rng, (33,), dtype)
    custom = la.matmul(a, b, epilogue=gelu_bias_custom, epilogue_inputs={"bias": bias})
    builtin = la.matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
    ref = gelu_ref(up(a) @ up(b) + up(bias))
    assert rel_err(custom, ref) < TOL[dtype] * 3
    assert rel_err(custom, up(builtin)) < TOL[dtype] * 3


def test_index_using_epilogue_on_every_candidate():
    rng = np.random.default_rng(4)
    a, b = rand(rng, (600, 90), "float64"), rand(rng, (90, 70), "float64")
    ref = up(a) @ up(b)
    rows, cols = np.arange(600)[:, None], np.arange(70)
    ref = np.where(cols <= rows, ref, 0.0) + 0.001 * rows  # causal mask plus a row ramp
    with la.Matmul(a, b, epilogue=lambda x, row, col: np.where(col <= row, x, 0.0) + 0.001 * row) as mm:
        mm.plan()
        candidates = mm._engine.candidates(mm.problem)
        for cand in candidates:
            prepared = mm._engine.prepare(mm.problem, cand)
            assert rel_err(prepared.kernel(a, b, None, {}, None), ref) < 1e-12, cand


def test_batch_index_and_batched_broadcast_inputs():
    rng = np.random.default_rng(5)
    a, b = rand(rng, (3, 19, 23), "float32"), rand(rng, (23, 17), "float32")
    row_scale, col_bias = rand(rng, (3, 19, 1), "float32"), rand(rng, (1, 17), "float32")
    got = la.matmul(a, b, epilogue=lambda x, r, c_, batch: x * r + c_ + batch,
                    epilogue_inputs={"r": row_scale, "c_": col_bias})
    ref = (up(a) @ up(b)) * up(row_scale) + up(col_bias) + np.arange(3)[:, None, None]
    assert rel_err(got, ref) < TOL["float32"] * 3


@pytest.mark.parametrize("kind", ["row", "col", "scalar", "0d"])
def test_input_kinds_from_shapes_on_every_candidate(kind):
    rng = np.random.default_rng(6)
    m, n = 520, 61
    a, b = rand(rng, (m, 40), "float32"), rand(rng, (40, n), "float32")
    v = {"row": rand(rng, (m, 1), "float32"), "col": rand(rng, (n,), "float32"),
         "scalar": -1.25, "0d": np.asarray(0.5, np.float32)}[kind]
    fn = lambda x, v: np.maximum(x * v, -0.5) - v  # noqa: E731
    ref = np.maximum((up(a) @ up(b)) * up(v), -0.5) - up(v)
    assert rel_err(la.matmul(a, b, epilogue=fn, epilogue_inputs={"v": v}), ref) < TOL["float32"] * 3
    with la.Matmul(a, b, epilogue=fn, epilogue_inputs={"v": v}) as mm:
        mm.plan()
        for cand in mm._engine.candidates(mm.problem):
            kernel = mm._engine.prepare(mm.problem, cand).kernel
            inputs = {"v": np.asarray(v, np.float32)}
            assert rel_err(kernel(a, b, None, inputs, None), ref) < TOL["float32"] * 3, cand


def test_alpha_beta_c_before_the_custom_epilogue():
    rng = np.random.default_rng(7)
    a, b, c = rand(rng, (45, 30), "float64"), rand(rng, (30, 28), "float64"), rand(rng, (45, 28), "float64")
    got = la.matmul(a, b, c, alpha=0.5, beta=2.0, epilogue=lambda x: np.tanh(x) * 3)
    ref = np.tanh(0.5 * (up(a) @ up(b)) + 2.0 * up(c)) * 3
    assert rel_err(got, ref) < 1e-12


def test_autotune_picks_a_correct_candidate_and_erf_avoids_numexpr():
    rng = np.random.default_rng(8)
    a, b = rand(rng, (300, 64), "float32"), rand(rng, (64, 80), "float32")
    fn = lambda x: epilogues.erf(x) + epilogues.sigmoid(x)  # noqa: E731
    with la.Matmul(a, b, epilogue=fn) as mm:
        mm.plan()
        assert all(c.params["evaluator"] != "numexpr" for c in mm._engine.candidates(mm.problem))
        mm.autotune(repeats=1)
        from scipy.special import erf

        p = up(a) @ up(b)
        assert rel_err(mm.execute(), erf(p) + 1 / (1 + np.exp(-p))) < TOL["float32"] * 3


def test_inputs_are_not_modified():
    rng = np.random.default_rng(9)
    a, b, gate = rand(rng, (40, 20), "float32"), rand(rng, (20, 30), "float32"), rand(rng, (40, 30), "float32")
    copies = [x.copy() for x in (a, b, gate)]
    la.matmul(a, b, epilogue=swiglu, epilogue_inputs={"gate": gate, "scale": 2.0})
    for before, after in zip(copies, (a, b, gate)):
        np.testing.assert_array_equal(before, after)


def test_identical_lambdas_share_a_plan_and_a_wisdom_key():
    matmul_plan.clear_plan_cache()
    rng = np.random.default_rng(10)
    a, b, s = rand(rng, (20, 10), "float64"), rand(rng, (10, 12), "float64"), rand(rng, (12,), "float64")
    first = la.matmul(a, b, epilogue=lambda x, s: x * s + 1, epilogue_inputs={"s": s})
    second = la.matmul(a, b, epilogue=lambda x, s: x * s + 1, epilogue_inputs={"s": s})
    assert matmul_plan.plan_cache_info()["hits"] == 1
    np.testing.assert_array_equal(first, second)
    third = la.matmul(a, b, epilogue=lambda x, s: x * s + 2, epilogue_inputs={"s": s})
    assert matmul_plan.plan_cache_info()["misses"] == 2
    assert rel_err(third, (up(a) @ up(b)) * s + 2) < 1e-12
    p1 = la.Matmul(a, b, epilogue=lambda x, s: x * s + 1, epilogue_inputs={"s": s}).problem
    p2 = la.Matmul(a, b, epilogue=lambda x, s: x * s + 1, epilogue_inputs={"s": s}).problem
    p3 = la.Matmul(a, b, epilogue=lambda x, s: x * s + 2, epilogue_inputs={"s": s}).problem
    assert p1.digest() == p2.digest() != p3.digest()
    assert p1.get("epilogue") == "custom:" + la.Matmul(a, b, epilogue=lambda x, s: x * s + 1,
                                                       epilogue_inputs={"s": s}).resolved_epilogue.digest[:32]
    assert p1.get("epilogue_ir") is None  # the digest stands for the expression


def test_unsupported_operation_names_the_op():
    a, b = np.ones((4, 3)), np.ones((3, 5))
    with pytest.raises(UnsupportedOperationError, match="np.sin"):
        la.matmul(a, b, epilogue=lambda x: np.sin(x))


def test_parameter_that_is_not_an_input():
    a, b = np.ones((4, 3)), np.ones((3, 5))
    with pytest.raises(InvalidOperandError, match="'gate' is not an input"):
        la.matmul(a, b, epilogue=lambda x, gate: x * gate)


def test_wrong_shape_input_and_reserved_name():
    a, b = np.ones((4, 3)), np.ones((3, 5))
    with pytest.raises(InvalidOperandError, match="does not broadcast"):
        la.matmul(a, b, epilogue=lambda x, g: x * g, epilogue_inputs={"g": np.ones((4, 4))})
    with pytest.raises(InvalidOperandError, match="reserved"):
        la.matmul(a, b, epilogue=lambda x, c: x * c, epilogue_inputs={"c": np.ones(5)})
    for operand in ("a", "b"):  # inputs share one table with the operands: these would replace them
        with pytest.raises(InvalidOperandError, match="reserved"):
            la.matmul(a, b, epilogue=lambda x, g: x * g, epilogue_inputs={operand: np.ones(5)})


def test_cuda_execution_without_cupy_names_what_to_install(monkeypatch):
    # custom epilogues run on CUDA too (tests/test_cuda_matmul_custom.py); without CuPy the
    # CUDA engine says what to install
    from nvmathpy.errors import MissingDependencyError
    from nvmathpy.execution import ExecutionCUDA

    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda *args: ExecutionCUDA(0))
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # ``import cupy`` fails
    a, b = np.ones((4, 3)), np.ones((3, 5))
    with pytest.raises(MissingDependencyError, match="CuPy"):
        la.Matmul(a, b, epilogue=lambda x: x * 2)


def test_helpers_are_exported():
    assert epilogues.sigmoid is not None and epilogues.gelu is not None and epilogues.erf is not None
    assert float(epilogues.sigmoid(0.0)) == 0.5


def test_torch_operands_with_matrix_and_number_inputs():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(11)
    a, b = torch.randn(21, 13, generator=gen), torch.randn(13, 9, generator=gen)
    gate = torch.randn(21, 9, generator=gen)
    got = la.matmul(a, b, epilogue=swiglu, epilogue_inputs={"gate": gate, "scale": 1.5})
    assert isinstance(got, torch.Tensor)
    g = up(gate.numpy())
    ref = (up(a.numpy()) @ up(b.numpy())) * (g / (1 + np.exp(-g))) * 1.5
    assert rel_err(got.numpy(), ref) < TOL["float32"] * 3


def test_fold_addend_rules():
    """An addend is split off for BLAS only where every use of x is x + (the same) v."""
    from nvmathpy.kernels.trace import trace
    from nvmathpy.linalg.gemm.cpu._epilogue_eval import fold_addend

    def folded(fn, kinds):
        name, rest = fold_addend((("d", trace(fn, kinds)),))
        return name, str(rest[0][1])

    assert folded(lambda x, v: np.maximum(x + v, 0.0), {"v": "col"}) == ("v", "maximum(x, 0.0)")
    assert folded(lambda x, v: np.tanh(v + x) * (v + x), {"v": "row"})[0] == "v"
    assert folded(lambda x, v: (x + v) * x, {"v": "col"})[0] is None  # x is used bare too
    assert folded(lambda x, v, w: (x + v) * (x + w), {"v": "col", "w": "col"})[0] is None  # two addends
    assert folded(lambda x, v: x * v, {"v": "col"})[0] is None


@pytest.mark.parametrize("kind", ["row", "col", "matrix", "scalar"])
def test_folded_addend_on_every_candidate_and_layout(kind):
    """A bias-like addend folded into ?gemm (prefilled result, beta = 1) gives the same result
    on every candidate, for C/F/transposed operands, with and without c."""
    rng = np.random.default_rng(8)
    m, k, n = 261, 37, 53
    v = {"row": rand(rng, (m, 1), "float64"), "col": rand(rng, (n,), "float64"),
         "matrix": rand(rng, (m, n), "float64"), "scalar": np.asarray(0.75)}[kind]
    fn = lambda x, v: np.tanh(x + v) * (v + x)  # noqa: E731
    for a, b in [(rand(rng, (m, k), "float64"), rand(rng, (k, n), "float64")),
                 (np.asfortranarray(rand(rng, (m, k), "float64")), rand(rng, (n, k), "float64").T)]:
        c = rand(rng, (m, n), "float64")
        for args, ref_x in [((a, b), up(a) @ up(b)), ((a, b, c), 0.5 * (up(a) @ up(b)) + 2.0 * up(c))]:
            scale = {"alpha": 0.5, "beta": 2.0} if len(args) == 3 else {}
            ref = np.tanh(ref_x + up(v)) * (ref_x + up(v))
            with la.Matmul(*args, epilogue=fn, epilogue_inputs={"v": v}, **scale) as mm:
                mm.plan()
                methods = set()
                for cand in mm._engine.candidates(mm.problem):
                    methods.add(cand.params["method"])
                    mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
                    assert rel_err(mm.execute(), ref) < 1e-12, cand
                assert "gemm" in methods
