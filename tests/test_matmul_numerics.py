"""Numerics of nvmathpy.linalg.Matmul/matmul against float64 NumPy references: every dtype x
epilogue x layout, odd and prime sizes, batches, broadcasting, 1-D operands, every CPU
candidate (including the ufunc fallback without numexpr), backward epilogues against
finite differences, torch CPU round trips, and hypothesis over shapes and strides."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nvmathpy.linalg as la
from nvmathpy.linalg.gemm.cpu import _engine as _matmul_cpu
from nvmathpy.linalg.epilogues import DEFINITIONS

ml_dtypes = pytest.importorskip("ml_dtypes")

from numerics import DTYPES, TOL, np_dtype, rand, up  # noqa: E402
C = math.sqrt(2 / math.pi)








def gelu(z):
    return 0.5 * z * (1 + np.tanh(C * (z + 0.044715 * z**3)))


def dgelu(z):
    t = np.tanh(C * (z + 0.044715 * z**3))
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * C * (1 + 3 * 0.044715 * z * z)


def reference(a, b, c=None, alpha=1.0, beta=None, epilogue=None, inputs=None):
    """float64 reference of epilogue(alpha a @ b + beta c), with the aux dict."""
    inputs = {k: up(v) if v.dtype != np.bool_ else v for k, v in (inputs or {}).items()}
    x = alpha * np.matmul(up(a), up(b))
    if c is not None:
        x = x + beta * up(c)
    aux = {}
    name = epilogue or ""
    if "bias" in name and "bgrad" not in name:
        x = x + inputs["bias"]
    if name.startswith("relu"):
        if "aux" in name:
            aux["relu_aux"] = x > 0
        x = np.maximum(x, 0)
    elif name.startswith("gelu"):
        if "aux" in name:
            aux["gelu_aux"] = x
        x = gelu(x)
    elif name.startswith("drelu"):
        x = np.where(inputs["relu_aux"], x, 0)
    elif name.startswith("dgelu"):
        x = x * dgelu(inputs["gelu_aux"])
    if name.endswith("bgrad"):
        m = a.shape[-2] if a.ndim > 1 else 1
        n = b.shape[-1] if b.ndim > 1 else 1
        aux[name] = x.reshape(x.shape[: x.ndim - (a.ndim > 1) - (b.ndim > 1)] + (m, n)).sum(axis=-2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if name == "bgrada":
        summed = up(a if a.ndim > 1 else a[None]).sum(axis=-1)
        aux["bgrada"] = np.broadcast_to(summed, batch + summed.shape[-1:])
    if name == "bgradb":
        summed = up(b if b.ndim > 1 else b[:, None]).sum(axis=-2)
        aux["bgradb"] = np.broadcast_to(summed, batch + summed.shape[-1:])
    return x, aux


def relerr(got, want):
    got, want = up(got), up(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), "non-finite values in the result"
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)


def epilogue_inputs(rng, name, result_shape, dtype):
    if name is None:
        return None
    needs = DEFINITIONS[name].inputs
    out = {}
    if "bias" in needs:
        out["bias"] = rand(rng, result_shape[-1:], dtype)
    if "relu_aux" in needs:
        out["relu_aux"] = rng.random(result_shape) > 0.4
    if "gelu_aux" in needs:
        out["gelu_aux"] = rand(rng, result_shape, dtype)
    return out


def check(result, a, b, c=None, alpha=1.0, beta=None, epilogue=None, inputs=None, dtype="float32"):
    want, want_aux = reference(a, b, c, alpha, beta, epilogue, inputs)
    got, aux = result if isinstance(result, tuple) else (result, {})
    assert got.dtype == np_dtype(dtype)
    tol = TOL[dtype] * math.sqrt(max(1, a.shape[-1] / 16))
    assert relerr(got, want) < tol
    assert set(aux) == set(want_aux)
    for key, value in want_aux.items():
        if value.dtype == np.bool_:
            assert np.array_equal(aux[key], value)
        else:
            assert relerr(aux[key], value) < tol * 4


def layouts(x):
    """(name, view) of the same values in different memory layouts."""
    yield "C", x
    yield "F", np.asfortranarray(x)
    wide = np.zeros(x.shape[:-1] + (x.shape[-1] + 3,), x.dtype)
    wide[..., : x.shape[-1]] = x
    yield "C-ld", wide[..., : x.shape[-1]]
    big = np.zeros(tuple(2 * s for s in x.shape), x.dtype)
    big[tuple(slice(None, None, 2) for _ in x.shape)] = x
    yield "strided", big[tuple(slice(None, None, 2) for _ in x.shape)]


REAL_EPILOGUES = [None, *DEFINITIONS]
COMPLEX_EPILOGUES = [None, "bias", "bgrada", "bgradb"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_epilogue_every_dtype(dtype):
    rng = np.random.default_rng(1)
    a, b = rand(rng, (37, 29), dtype), rand(rng, (29, 41), dtype)
    for epilogue in COMPLEX_EPILOGUES if dtype.startswith("complex") else REAL_EPILOGUES:
        inputs = epilogue_inputs(rng, epilogue, (37, 41), dtype)
        check(la.matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs), a, b, epilogue=epilogue,
              inputs=inputs, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "float16"])
def test_layouts_with_alpha_beta_c(dtype):
    rng = np.random.default_rng(2)
    a0, b0, c0 = rand(rng, (31, 17), dtype), rand(rng, (17, 23), dtype), rand(rng, (31, 23), dtype)
    for (la_name, a), (lb_name, b) in zip(layouts(a0), [*layouts(b0)][::-1]):
        for c, beta in ((None, None), (c0, 0.5), (c0[0], -1.5)):
            got = la.matmul(a, b, c, alpha=2.0, beta=beta)
            check(got, a, b, c, 2.0, beta, dtype=dtype)
        ep = "bias" if dtype.startswith("complex") else "gelu_aux_bias"
        inputs = {"bias": rand(rng, (23,), dtype)}
        check(la.matmul(a, b, c0, alpha=0.75, beta=1.0, epilogue=ep, epilogue_inputs=inputs),
              a, b, c0, 0.75, 1.0, ep, inputs, dtype=dtype)


def all_candidates(plan):
    return plan._engine.candidates(plan.problem)


@pytest.mark.parametrize("epilogue", ["relu_aux_bias", "gelu_aux_bias", "dgelu_bgrad", "drelu_bgrad", "bgrada", None])
def test_every_candidate_agrees(epilogue):
    """Each candidate the autotuner may pick (matmul/gemm/split, ufunc/numexpr, threads) is correct."""
    rng = np.random.default_rng(3)
    a, b = rand(rng, (300, 67), "float32"), np.asfortranarray(rand(rng, (67, 131), "float32"))
    c = rand(rng, (300, 131), "float32")
    inputs = epilogue_inputs(rng, epilogue, (300, 131), "float32")
    with la.Matmul(a, b, c, alpha=1.25, beta=0.5, epilogue=epilogue, epilogue_inputs=inputs) as mm:
        cands = all_candidates(mm)
        assert {"matmul", "gemm"} <= {x.params["method"] for x in cands}
        for cand in cands:
            mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
            check(mm.execute(), a, b, c, 1.25, 0.5, epilogue, inputs)


def test_chunked_and_split_candidates():
    """Candidates applying the epilogue in row chunks (after one GEMM, or per hot panel)."""
    rng = np.random.default_rng(4)
    for dtype in ("float32", "float16"):
        a, b = rand(rng, (601, 101), dtype), rand(rng, (101, 300), dtype)
        bias = rand(rng, (601, 1), dtype)  # one value per row: rows are sliced with the panels
        with la.Matmul(a, b, epilogue="relu_aux_bias", epilogue_inputs={"bias": bias},
                       execution={"name": "cpu", "num_threads": 2}) as mm:
            chunked = [x for x in all_candidates(mm) if "chunk" in x.params]
            assert {x.params["method"] for x in chunked} >= {"split", "matmul"}
            for cand in chunked:
                mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
                check(mm.execute(), a, b, epilogue="relu_aux_bias", inputs={"bias": bias}, dtype=dtype)


def test_ufunc_fallback_without_numexpr(monkeypatch):
    """Without numexpr and a C compiler only ufunc candidates are offered, and they are correct."""
    monkeypatch.setattr(_matmul_cpu, "numexpr_available", lambda: False)
    monkeypatch.setattr(_matmul_cpu, "c_available", lambda: False)
    rng = np.random.default_rng(5)
    a, b, bias = rand(rng, (53, 47), "float32"), rand(rng, (47, 59), "float32"), rand(rng, (59,), "float32")
    with la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as mm:
        assert {x.params["evaluator"] for x in all_candidates(mm)} == {"ufunc"}
        mm.autotune(effort="exhaustive", repeats=1)
        assert mm.candidate.params["evaluator"] == "ufunc"
        check(mm.execute(), a, b, epilogue="gelu_bias", inputs={"bias": bias})


def test_batched_broadcast_and_1d():
    rng = np.random.default_rng(6)
    cases = [((3, 1, 7, 5), (4, 5, 6)), ((7,), (3, 7, 5)), ((2, 6, 7), (7,)), ((7,), (7,)), ((1, 5, 3), (3, 2))]
    for sa, sb in cases:
        a, b = rand(rng, sa, "float64"), rand(rng, sb, "float64")
        want = np.matmul(a, b)
        for ep in (None, "relu", "bgradb"):
            got = la.matmul(a, b, epilogue=ep)
            check(got, a, b, epilogue=ep, dtype="float64")
        got = la.matmul(a, b)
        assert np.shape(got) == want.shape
        if want.ndim >= 1:
            bias = rand(rng, want.shape[-1:], "float64")
            check(la.matmul(a, b, epilogue="bias", epilogue_inputs={"bias": bias}), a, b, epilogue="bias",
                  inputs={"bias": bias}, dtype="float64")


def test_bias_per_row_and_batched_bias():
    rng = np.random.default_rng(7)
    a, b = rand(rng, (2, 11, 13), "float32"), rand(rng, (13, 19), "float32")
    for bias in (rand(rng, (11, 1), "float32"), rand(rng, (2, 1, 19), "float32"), rand(rng, (19,), "float32")):
        check(la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}), a, b,
              epilogue="relu_bias", inputs={"bias": bias})


def test_backward_epilogues_match_finite_differences():
    """dgelu/drelu are the derivatives of the forward epilogues (central differences)."""
    rng = np.random.default_rng(8)
    a, b = rand(rng, (9, 7), "float64"), rand(rng, (7, 5), "float64")
    z = rand(rng, (9, 5), "float64") * 2
    eye = np.eye(5)
    # the backward epilogue is (a @ b) times the forward activation's derivative at z
    h = 1e-6
    for fwd, bwd, aux_name, aux_val in (
        ("gelu", "dgelu", "gelu_aux", z),
        ("relu", "drelu", "relu_aux", z > 0),
    ):
        zp = la.matmul(z + h, eye, epilogue=fwd)
        zm = la.matmul(z - h, eye, epilogue=fwd)
        deriv = (zp - zm) / (2 * h)
        got, aux = la.matmul(a, b, epilogue=bwd + "_bgrad", epilogue_inputs={aux_name: aux_val})
        want = (a @ b) * deriv
        assert relerr(got, want) < 1e-7
        assert relerr(aux[bwd + "_bgrad"], want.sum(axis=0)) < 1e-7
        assert aux[bwd + "_bgrad"].shape == (5,)


def test_gelu_is_the_tanh_approximation_and_nan_propagates():
    x = np.array([[-30.0, -3.0, -0.5, 0.0, 0.5, 3.0, 30.0, np.nan]], np.float32)
    got = la.matmul(x.T, np.ones((1, 1), np.float32), epilogue="gelu")[:, 0]
    want = gelu(x[0].astype(np.float64))
    assert np.allclose(got[:-1], want[:-1], rtol=1e-6, atol=1e-6)
    assert np.isnan(got[-1])
    assert np.isnan(la.matmul(x.T, np.ones((1, 1), np.float32), epilogue="relu")[-1, 0])


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    a, b, bias = rand(rng, (13, 8), "float32"), rand(rng, (8, 6), "float32"), rand(rng, (6,), "float32")
    ta, tb, tbias = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias)
    d, aux = la.matmul(ta, tb, epilogue="relu_aux_bias", epilogue_inputs={"bias": tbias})
    assert isinstance(d, torch.Tensor) and isinstance(aux["relu_aux"], torch.Tensor)
    check((d.numpy(), {"relu_aux": aux["relu_aux"].numpy()}), a, b, epilogue="relu_aux_bias", inputs={"bias": bias})
    tbf = torch.from_numpy(a).to(torch.bfloat16)
    out = la.matmul(tbf, torch.from_numpy(b).to(torch.bfloat16))
    assert out.dtype == torch.bfloat16
    want = tbf.float() @ torch.from_numpy(b).to(torch.bfloat16).float()
    assert torch.linalg.norm(out.float() - want) / torch.linalg.norm(want) < 1e-2
    with la.Matmul(ta.T.contiguous().T, tb) as mm:  # a column-major tensor
        mm.plan()
        result = mm.execute()
        assert isinstance(result, torch.Tensor)
        check(result.numpy(), a, b)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 9),
    batch_a=st.sampled_from([(), (1,), (3,), (2, 1)]), batch_b=st.sampled_from([(), (1,), (3,), (2, 3)]),
    a_order=st.sampled_from("CFs"), b_order=st.sampled_from("CFs"),
    epilogue=st.sampled_from([None, "relu_bias", "gelu", "bgrada", "dgelu"]),
    seed=st.integers(0, 2**16),
)
def test_hypothesis_shapes_strides_batches(m, n, k, batch_a, batch_b, a_order, b_order, epilogue, seed):
    rng = np.random.default_rng(seed)

    def make(shape, order):
        x = rand(rng, shape, "float64")
        if order == "F":
            return np.asfortranarray(x)
        if order == "s":
            big = rand(rng, shape[:-1] + (2 * shape[-1],), "float64")
            big[..., ::2] = x
            return big[..., ::2]
        return x

    a, b = make(batch_a + (m, k), a_order), make(batch_b + (k, n), b_order)
    a_before, b_before = a.copy(), b.copy()
    result_shape = np.broadcast_shapes(batch_a, batch_b) + (m, n)
    inputs = epilogue_inputs(rng, epilogue, result_shape, "float64")
    check(la.matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs), a, b, epilogue=epilogue, inputs=inputs,
          dtype="float64")
    assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


def test_blas_able_layouts_are_not_copied():
    rng = np.random.default_rng(10)
    a0, b0 = rand(rng, (33, 21), "float64"), rand(rng, (21, 27), "float64")
    for name, a in layouts(a0):
        with la.Matmul(a, b0, epilogue="relu") as mm:
            assert mm.problem.get("a_layout") == name
            for cand in all_candidates(mm):
                kernel = mm._engine.prepare(mm.problem, cand).kernel
                inner = getattr(kernel, "inner", kernel)
                assert inner.copy_a == (name == "strided"), (name, cand)


def test_complex_alpha_beta():
    rng = np.random.default_rng(11)
    for dtype in ("complex64", "complex128"):
        a, b, c = rand(rng, (19, 13), dtype), np.asfortranarray(rand(rng, (13, 7), dtype)), rand(rng, (19, 7), dtype)
        with la.Matmul(a, b, c, alpha=0.5 - 2j, beta=1j) as mm:
            for cand in all_candidates(mm):
                mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
                check(mm.execute(), a, b, c, 0.5 - 2j, 1j, dtype=dtype)


@pytest.mark.parametrize("sa,sb", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((2, 0, 5), (5, 3)), ((600, 0), (0, 600))])
def test_empty_dimensions(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    bias = np.arange(sb[-1], dtype=np.float32) - 1
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        for cand in all_candidates(mm):
            mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
            got = mm.execute()
            assert got.shape == np.matmul(a, b).shape
            assert np.array_equal(got, np.maximum(np.matmul(a, b) + bias, 0))


def test_one_numexpr_program_from_many_threads():
    """A compiled numexpr program shared by threads is serialised (numexpr objects keep state)."""
    pytest.importorskip("numexpr")
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(12)
    a, b, bias = rand(rng, (64, 40), "float32"), rand(rng, (40, 500), "float32"), rand(rng, (500,), "float32")
    with la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as mm:
        cand = next(x for x in all_candidates(mm) if x.params["evaluator"] == "numexpr")
        kernel = mm._engine.prepare(mm.problem, cand).kernel
        want, _ = reference(a, b, epilogue="gelu_bias", inputs={"bias": bias})
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda _: kernel(a, b, None, {"bias": bias}, None), range(12)))
        assert all(relerr(r, want) < 1e-5 for r in results)


@pytest.mark.parametrize("shapes", [((6, 4), (4, 5)), ((3, 6, 4), (4, 5)), ((6, 4), (3, 4, 5)), ((4,), (4, 5))])
def test_bias_gradients_are_writeable_arrays_of_their_own(shapes):
    rng = np.random.default_rng(11)
    a, b = rand(rng, shapes[0], "float64"), rand(rng, shapes[1], "float64")
    for name in ("bgrada", "bgradb"):
        _, aux = la.matmul(a, b, epilogue=name)
        grad = aux[name]
        assert grad.flags.writeable and grad.flags.c_contiguous and grad.flags.owndata
        want = (a.sum(axis=-1) if name == "bgrada" else b.sum(axis=-2))
        want = np.broadcast_to(want, grad.shape)
        assert relerr(grad, want) < 1e-12
        grad += 1.0  # must not raise, nor write into the operands

