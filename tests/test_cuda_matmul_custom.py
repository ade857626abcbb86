"""Custom (traced Python) epilogues on the CUDA matmul engine, checked without a GPU.

1. The IR-matching rules: which traced epilogues are exactly one of cuBLASLt's own epilogues.
2. The candidate lists: native cuBLASLt candidates for a match; otherwise cuBLASLt + the
   generated elementwise kernel interleaved with the fused tiled GEMM (per dtype and arch).
3. The hot path of every candidate kind end to end on the host: the engine's own code with
   CuPy replaced by a NumPy stand-in, ``cublasLtMatmul`` by the host emulation that reads the
   descriptors back, and each generated kernel's CUDA C source compiled with g++ under the
   emulation header of tests/kernels and launched with the engine's packed arguments (the
   tensor-core GEMM through its scalar twin). Results are compared with the CPU engine's
   custom epilogue on float64 operands.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
pytest.importorskip("ml_dtypes")

import shutil  # noqa: E402

from nvmathpy.cuda.bindings import cublaslt as lt  # noqa: E402
from nvmathpy.errors import InvalidOperandError, MissingDependencyError  # noqa: E402
from nvmathpy.kernels.ir import input_, inputs_of  # noqa: E402
from nvmathpy.kernels.trace import trace  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda  # noqa: E402
from nvmathpy.linalg.gemm._custom_match import canonical, match_native  # noqa: E402
from nvmathpy.linalg.epilogues import erf, gelu, gelu_tanh, sigmoid  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402
from numerics import TOL, np_dtype, rand, up  # noqa: E402

try:
    lt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLASLt not installed: {exc}", allow_module_level=True)

import cuda_emulation  # noqa: E402
from cuda_emulation import host  # noqa: E402

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the kernel emulation needs g++")


# -- 1. matching ------------------------------------------------------------------------------------


def _gelu_by_hand(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


MATCHES = [
    (lambda x: np.maximum(x, 0), {}, ("relu", None)),
    (lambda x: np.maximum(0.0, x), {}, ("relu", None)),
    (lambda x: np.clip(x, 0, None), {}, ("relu", None)),
    (lambda acc: gelu(acc), {}, ("gelu", None)),
    (lambda x: _gelu_by_hand(x), {}, ("gelu", None)),
    (lambda x, b0: x + b0, {"b0": "col"}, ("bias", "b0")),
    (lambda x, b0: b0 + x, {"b0": "row"}, ("bias", "b0")),
    (lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"}, ("relu_bias", "bias")),
    (lambda v, w: np.maximum(0, w + v), {"w": "row"}, ("relu_bias", "w")),
    (lambda x, bias: gelu(x + bias), {"bias": "col"}, ("gelu_bias", "bias")),
    (lambda x, bias: gelu(bias + x), {"bias": "row"}, ("gelu_bias", "bias")),
]

NOT_MATCHES = [
    (lambda x: np.where(x > 0, x, 0), {}),              # differs from maximum for NaN
    (lambda x: gelu(x, approximate="none"), {}),        # the erf GELU is not cuBLASLt's
    (lambda x: np.maximum(x, 0) * 2, {}),
    (lambda x: np.maximum(x, 0.01), {}),
    (lambda x, r: x + r, {"r": "matrix"}),              # a residual is not a bias vector
    (lambda x, s: x + s, {"s": "scalar"}),
    (lambda x, b, s: (x + b) * s, {"b": "col", "s": "scalar"}),
    (lambda x, b: x - b, {"b": "col"}),
    (lambda x, b: np.maximum(x, 0) + b, {"b": "col"}),  # bias after the activation
    (lambda x, row: x + row, {}),                       # an index, not an input
    (lambda x: sigmoid(x) * x, {}),
    (lambda x: x * 1.0, {}),
]


@pytest.mark.parametrize("fn, kinds, expected", MATCHES)
def test_exact_native_forms_match(fn, kinds, expected):
    assert match_native(trace(fn, kinds)) == expected


def test_the_builtin_gelu_definition_form_matches():
    x = input_("x", "value")
    assert match_native(gelu_tanh(x)) == ("gelu", None)


@pytest.mark.parametrize("fn, kinds", NOT_MATCHES)
def test_other_epilogues_do_not_match(fn, kinds):
    assert match_native(trace(fn, kinds)) is None


def test_allowed_filters_activations_for_complex_dtypes():
    expr = trace(lambda x, b: np.maximum(x + b, 0), {"b": "col"})
    assert match_native(expr, lambda name: name == "bias") is None
    assert match_native(trace(lambda x, b: x + b, {"b": "col"}), lambda name: name == "bias") == ("bias", "b")


def test_canonical_orders_commutative_operands_and_constants():
    one = canonical(trace(lambda x, b: (b + x) * np.maximum(0, x), {"b": "col"}))
    two = canonical(trace(lambda x, b: np.maximum(x, 0.0) * (x + b), {"b": "col"}))
    assert one == two
    assert canonical(trace(lambda x: x - 1, {})) != canonical(trace(lambda x: 1 - x, {}))


# -- 2. candidate lists -------------------------------------------------------------------------------


@pytest.fixture
def emulated(monkeypatch):
    """The CUDA engine behind ``Matmul(..., execution="cuda")`` on the host (see cuda_emulation)."""
    from nvmathpy.execution import ExecutionCUDA
    from nvmathpy.linalg.gemm import matmul_plan

    cuda_emulation.install(monkeypatch.setattr, monkeypatch.setitem)
    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda value, device, device_id: ExecutionCUDA(0))
    cuda_emulation.LAUNCHES.clear()
    return cuda_emulation.LAUNCHES


def swiglu_tail(x, gate, scale):
    return x * (gate / (1 + np.exp(-gate))) * scale


def plan_of(a, b, fn, inputs, **kwargs):
    return Matmul(host(a), host(b), epilogue=fn, epilogue_inputs={k: host(v) if isinstance(v, np.ndarray) else v
                                                                for k, v in inputs.items()},
                  execution="cuda", **kwargs)


def test_a_native_match_offers_only_cublaslt_candidates(emulated):
    rng = np.random.default_rng(1)
    a, b, bias = rand(rng, (9, 6), "float32"), rand(rng, (6, 13), "float32"), rand(rng, (13,), "float32")
    with plan_of(a, b, lambda x, b0: gelu(x + b0), {"b0": bias}) as mm:
        candidates = mm._engine.candidates(mm.problem)
        assert [c.label for c in candidates] == ["cublaslt"] * 3
        assert {(c.params["native"], c.params["bias"], c.params["order"]) for c in candidates} == {
            ("gelu_bias", "b0", "C")}
        mm.plan()
        assert mm._prepared._inner.spec.lt_epilogue == lt.Epilogue.GELU_BIAS
        got = mm.execute()
    assert emulated == []  # no generated kernel ran
    ref = up(a) @ up(b) + up(bias)
    assert np.linalg.norm(got - gelu(ref)) / np.linalg.norm(gelu(ref)) < TOL["float32"]


def test_a_row_bias_match_uses_the_f_ordered_native_problem(emulated):
    rng = np.random.default_rng(2)
    a, b, bias = rand(rng, (9, 6), "float64"), rand(rng, (6, 13), "float64"), rand(rng, (9, 1), "float64")
    with plan_of(a, b, lambda x, w: np.maximum(w + x, 0), {"w": bias}) as mm:
        mm.plan()
        assert mm.candidate.params["order"] == "F" and mm._prepared._inner.spec.lt_epilogue == lt.Epilogue.RELU_BIAS
        got = mm.execute()
    assert np.linalg.norm(got - np.maximum(up(a) @ up(b) + bias, 0)) < 1e-12 * np.linalg.norm(got)


@pytest.mark.parametrize("dtype, variant", [("float32", "simt"), ("float64", "simt"), ("float16", "twin"),
                                            ("bfloat16", "twin")])
def test_other_epilogues_interleave_elementwise_and_fused_candidates(emulated, dtype, variant):
    rng = np.random.default_rng(3)
    a, b, gate = rand(rng, (9, 6), dtype), rand(rng, (6, 13), dtype), rand(rng, (9, 13), dtype)
    with plan_of(a, b, swiglu_tail, {"gate": gate, "scale": 0.5}) as mm:
        candidates = mm._engine.candidates(mm.problem)
    labels = [c.label for c in candidates]
    assert labels[:6] == [custom_cuda.ELEMENTWISE, custom_cuda.TILED] * 3 and labels[6:] == [custom_cuda.TILED] * 2
    assert all(c.params["order"] == "C" for c in candidates if c.label == custom_cuda.ELEMENTWISE)
    assert [c.params["config"] for c in candidates if c.label == custom_cuda.TILED] == list(range(5))
    assert {c.params["variant"] for c in candidates if c.label == custom_cuda.TILED} == {variant}


def _problem(dtype, a_shape=(9, 6), a_strides=(6, 1), b_shape=(6, 13), b_strides=(13, 1)):
    return Problem.of("matmul", a_shape=list(a_shape), b_shape=list(b_shape), a_strides=list(a_strides),
                      b_strides=list(b_strides), dtype=dtype)


def test_fused_candidates_per_arch_and_layout():
    assert custom_cuda.tiled_candidates(_problem("float16"), 75) == []  # no bf16/f16 WMMA path before sm_80
    assert len(custom_cuda.tiled_candidates(_problem("bfloat16"), 80)) == 5
    assert custom_cuda.tiled_candidates(_problem("complex64"), 90) == []
    flags = custom_cuda.tiled_candidates(_problem("float32", a_strides=(1, 9), b_strides=(1, 6)), 90)[0].params
    assert (flags["trans_a"], flags["trans_b"]) == (True, True)
    flags = custom_cuda.tiled_candidates(_problem("float32", a_strides=(12, 2)), 90)[0].params
    assert (flags["trans_a"], flags["trans_b"]) == (False, False)  # no unit stride: copied C-contiguous


def test_vector_width_and_aligned_input_shapes():
    assert [custom_cuda.vector_width("float32", n) for n in (41, 42, 44, 16)] == [1, 2, 4, 4]
    assert [custom_cuda.vector_width("float16", n) for n in (8, 12)] == [8, 4]
    assert custom_cuda.vector_width("float64", 8) == 2
    assert custom_cuda.aligned_shape((3, 1, 5), 3, 2, 2) == (3, 1, 5)
    assert custom_cuda.aligned_shape((5,), 2, 2, 2) == (1, 5)
    assert custom_cuda.aligned_shape((2, 7), 2, 2, 1) == (2, 7, 1)


def test_scalar_inputs_are_read_from_memory_on_the_gpu():
    expr = trace(swiglu_tail, {"gate": "matrix", "scale": "scalar"})
    assert dict(inputs_of(custom_cuda.gpu_expression(expr))) == {"x": "value", "gate": "matrix",
                                                                             "scale": "matrix"}


def test_complex_custom_epilogues_need_a_native_bias_match(emulated):
    rng = np.random.default_rng(4)
    a, b, bias = rand(rng, (5, 4), "complex64"), rand(rng, (4, 3), "complex64"), rand(rng, (3,), "complex64")
    with plan_of(a, b, lambda x, b0: x + b0, {"b0": bias}) as mm:
        mm.plan()
        assert mm.candidate.params["native"] == "bias"
        assert np.linalg.norm(mm.execute() - (up(a) @ up(b) + bias)) < 1e-5 * np.linalg.norm(up(a) @ up(b))
    with plan_of(a, b, lambda x, b0: x * b0, {"b0": bias}) as mm:
        with pytest.raises(InvalidOperandError, match="custom epilogues need float16"):
            mm.plan()


# -- 3. the hot path of each candidate kind, end to end on the host ---------------------------------------


def reference(a, b, fn, inputs, c=None, alpha=1.0, beta=None):
    ups = {k: up(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    with Matmul(up(a), up(b), None if c is None else up(c), alpha=alpha, beta=beta, epilogue=fn,
                epilogue_inputs=ups) as mm:
        mm.plan()
        return mm.execute()


def run_each(mm, labels):
    """Install and execute the first candidate of each label in ``labels``; their results by label."""
    results = {}
    for candidate in mm._engine.candidates(mm.problem):
        if candidate.label not in labels or candidate.label in results:
            continue
        mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
        results[candidate.label] = np.array(mm.execute())
    return results


def check(got, ref, dtype, factor=1.0):
    got = np.asarray(got)
    assert got.dtype == np_dtype(dtype) and got.shape == ref.shape
    assert np.isfinite(up(got)).all()
    assert np.linalg.norm(up(got) - ref) / np.linalg.norm(ref) < TOL[dtype] * factor


BOTH = (custom_cuda.ELEMENTWISE, custom_cuda.TILED)


def _operand(rng, shape, dtype, layout):
    if layout == "T":
        return rand(rng, shape[:-2] + (shape[-1], shape[-2]), dtype).swapaxes(-1, -2)
    if layout == "pad":
        return rand(rng, shape[:-1] + (shape[-1] + 3,), dtype)[..., : shape[-1]]
    return rand(rng, shape, dtype)


@needs_gxx
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_swiglu_tail_on_both_candidates(emulated, dtype):
    rng = np.random.default_rng(5)
    a, b = _operand(rng, (37, 29), dtype, "C"), _operand(rng, (29, 41), dtype, "T")
    inputs = {"gate": rand(rng, (37, 41), dtype), "scale": 0.5}
    with plan_of(a, b, swiglu_tail, inputs) as mm:
        results = run_each(mm, BOTH)
    assert set(results) == set(BOTH)
    ref = reference(a, b, swiglu_tail, inputs)
    for label, got in results.items():
        # the unfused candidate rounds the product to float16/bfloat16 before the epilogue
        check(got, ref, dtype, 2.0 if label == custom_cuda.ELEMENTWISE else 1.0)
    assert {name for name, _, _ in emulated} == {"nvm_epilogue", "nvm_gemm"}


def residual(x, r, bias, row, col):
    return np.where(row > col, x + r, np.tanh(x) * bias) - 0.25 * r


@needs_gxx
@pytest.mark.parametrize("case", [
    # (a shape, a layout, b shape, b layout, residual shape, bias shape)
    ((3, 13, 7), "C", (7, 11), "pad", (3, 13, 11), (11,)),
    ((2, 1, 13, 7), "T", (3, 7, 11), "C", (13, 11), (2, 3, 13, 1)),
    ((13, 7), "pad", (4, 7, 11), "T", (1, 11), (1, 13, 1)),
])
def test_residual_indices_and_broadcast_inputs(emulated, case):
    a_shape, a_layout, b_shape, b_layout, r_shape, bias_shape = case
    rng = np.random.default_rng(6)
    a, b = _operand(rng, a_shape, "float32", a_layout), _operand(rng, b_shape, "float32", b_layout)
    inputs = {"r": rand(rng, r_shape, "float32"), "bias": rand(rng, bias_shape, "float32")}
    with plan_of(a, b, residual, inputs) as mm:
        results = run_each(mm, BOTH)
    ref = reference(a, b, residual, inputs)
    for got in results.values():
        check(got, ref, "float32")


@needs_gxx
@pytest.mark.parametrize("c_shape", [(13, 11), (11,), (13, 1)])
def test_c_alpha_beta_then_the_epilogue(emulated, c_shape):
    rng = np.random.default_rng(7)
    a, b, c = rand(rng, (13, 7), "float64"), rand(rng, (7, 11), "float64"), rand(rng, c_shape, "float64")
    inputs = {"g": rand(rng, (13, 11), "float64")}

    def fn(x, g):
        return x * sigmoid(g) + erf(x)

    with Matmul(host(a), host(b), host(c), alpha=0.75, beta=-1.5, epilogue=fn,
                epilogue_inputs={"g": host(inputs["g"])}, execution="cuda") as mm:
        results = run_each(mm, BOTH)
    ref = reference(a, b, fn, inputs, c=c, alpha=0.75, beta=-1.5)
    assert set(results) == set(BOTH)
    for got in results.values():
        check(got, ref, "float64")


@needs_gxx
def test_one_dimensional_operands_and_out(emulated):
    rng = np.random.default_rng(8)
    a, b, s = rand(rng, (7,), "float32"), rand(rng, (3, 7, 11), "float32"), rand(rng, (11,), "float32")

    def fn(x, s):
        return np.maximum(x * s, -0.5)

    with plan_of(a, b, fn, {"s": s}) as mm:
        results = run_each(mm, BOTH)
        out = host(np.full((3, 11), np.nan, np.float32))
        assert mm.execute(out=out) is out
    ref = reference(a, b, fn, {"s": s})
    for got in (*results.values(), out):
        check(got, ref, "float32")


@needs_gxx
def test_autotune_chooses_among_both_kinds_and_wisdom_replays_it(emulated):
    rng = np.random.default_rng(9)
    a, b = rand(rng, (21, 17), "float32"), rand(rng, (17, 19), "float32")
    inputs = {"gate": rand(rng, (21, 19), "float32"), "scale": 2.0}
    ref = reference(a, b, swiglu_tail, inputs)
    with plan_of(a, b, swiglu_tail, inputs) as first:
        timings = first.autotune(effort="measure", repeats=1)
        assert {label.split("(")[0] for label in timings} == set(BOTH)
        winner = first.candidate
        check(first.execute(), ref, "float32")
    with plan_of(a, b, swiglu_tail, inputs) as second:
        second.plan()
        assert second.chosen_by == "wisdom" and second.candidate == winner
        check(second.execute(), ref, "float32")


@needs_gxx
def test_one_call_matmul_with_a_custom_epilogue(emulated):
    import nvmathpy.linalg as la

    rng = np.random.default_rng(10)
    a, b, gate = rand(rng, (9, 5), "float32"), rand(rng, (5, 7), "float32"), rand(rng, (9, 7), "float32")
    ref = reference(a, b, swiglu_tail, {"gate": gate, "scale": 0.5})
    for _ in range(2):
        got = la.matmul(host(a), host(b), epilogue=swiglu_tail, epilogue_inputs={"gate": host(gate), "scale": 0.5},
                        execution="cuda")
        check(got, ref, "float32")


@needs_gxx
def test_an_out_off_the_vector_alignment_takes_the_one_element_kernel(emulated, monkeypatch):
    rng = np.random.default_rng(11)
    a, b, r = rand(rng, (9, 5), "float32"), rand(rng, (5, 8), "float32"), rand(rng, (9, 8), "float32")
    emulated_load, sources = custom_cuda.load_function, []
    monkeypatch.setattr(custom_cuda, "load_function", lambda s, n, d: sources.append(s) or emulated_load(s, n, d))

    def fn(x, r):
        return x - 2 * r

    with plan_of(a, b, fn, {"r": r}) as mm:
        mm.plan()
        assert mm.candidate.label == custom_cuda.ELEMENTWISE
        assert ["NvmPack<float, 4>" in s for s in sources] == [True]
        out = host(np.full(1 + 9 * 8, np.nan, np.float32))[1:].reshape(9, 8)  # 4 bytes past a 16-byte pack
        assert mm.execute(out=out) is out
        assert ["NvmPack<float, 1>" in s for s in sources] == [False, True]
    check(out, reference(a, b, fn, {"r": r}), "float32")


# -- 4. the resolved epilogue reaches the engine ------------------------------------------------------


def test_the_cuda_engine_gets_the_plans_resolved_epilogue(emulated, monkeypatch):
    """The engine builds its cuBLASLt specs from the plan's resolved object (the native built-in
    one for a custom epilogue that is exactly a built-in), never from a look-up by name."""
    from nvmathpy.linalg.gemm._resolved import resolve_builtin
    from nvmathpy.linalg.gemm.cuda import _engine as matmul_cuda

    seen = []

    def build_spec(problem, order=None, allow_tf32=None, *, epilogue=None):
        seen.append(epilogue)
        return real(problem, order, allow_tf32, epilogue=epilogue)

    real = matmul_cuda.build_spec
    monkeypatch.setattr(matmul_cuda, "build_spec", build_spec)
    rng = np.random.default_rng(3)
    a, b, bias = rand(rng, (9, 6), "float32"), rand(rng, (6, 13), "float32"), rand(rng, (13,), "float32")
    with Matmul(host(a), host(b), epilogue="relu_bias", epilogue_inputs={"bias": host(bias)},
                execution="cuda") as mm:
        assert mm._engine.epilogue is mm.resolved_epilogue is resolve_builtin("relu_bias")
        mm.plan()
        got = mm.execute()
    assert seen and all(e is resolve_builtin("relu_bias") for e in seen)
    assert np.linalg.norm(got - np.maximum(up(a) @ up(b) + up(bias), 0)) < TOL["float32"] * np.linalg.norm(got)
    seen.clear()
    with plan_of(a, b, lambda x, w: np.maximum(x + w, 0), {"w": bias}) as mm:
        resolved = mm.resolved_epilogue
        assert mm._engine.epilogue is resolved and resolved.native is resolve_builtin("relu_bias")
        mm.plan()
        assert mm.candidate.params["native"] == "relu_bias" and mm.candidate.params["bias"] == "w"
        again = mm.execute()
    assert seen and all(e is resolved.native for e in seen)
    np.testing.assert_allclose(again, got, rtol=TOL["float32"])
