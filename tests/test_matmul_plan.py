"""The Matmul plan lifecycle, bad input, wisdom, the plan cache (also under threads) and the
execution-space rules."""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import nvmathpy.linalg as la
from nvmathpy.errors import (
    ExecutionSpaceUnavailableError,
    InvalidOperandError,
    InvalidOptionError,
    OperandMismatchError,
    PlanStateError,
)
from nvmathpy.linalg.gemm import matmul_plan
from nvmathpy.linalg.gemm.cpu import _engine as cpu_engine
from nvmathpy.linalg.gemm.cpu._tiny_c import TINY_EXTENSION

MODULE = TINY_EXTENSION.get(wait=True)


def arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def close(got, want, tol=1e-5):
    return np.linalg.norm(got - want) / np.linalg.norm(want) < tol


def test_lifecycle_errors():
    a, b = arrays((5, 3), (3, 4))
    mm = la.Matmul(a, b)
    with pytest.raises(PlanStateError, match="before plan"):
        mm.execute()
    mm.plan()
    assert close(mm.execute(), a @ b)
    mm.free()
    mm.free()  # idempotent
    with pytest.raises(PlanStateError, match="freed"):
        mm.execute()
    with pytest.raises(PlanStateError):
        mm.plan()
    with pytest.raises(PlanStateError):
        mm.reset_operands(a=a)


def test_reset_operands_swaps_data_and_names_mismatches():
    a, b, a2, b2 = arrays((6, 5), (5, 7), (6, 5), (5, 7))
    bias, bias2 = arrays((7,), (7,), seed=1)
    with la.Matmul(a, b, epilogue="bias", epilogue_inputs={"bias": bias}) as mm:
        mm.plan()
        mm.reset_operands(a=a2, b=b2, epilogue_inputs={"bias": bias2})
        assert close(mm.execute(), a2 @ b2 + bias2)
        with pytest.raises(OperandMismatchError, match=r"a shape differs: planned \(6, 5\), got \(6, 4\)"):
            mm.reset_operands(a=np.ones((6, 4), np.float32))
        with pytest.raises(OperandMismatchError, match="b dtype differs: planned float32, got float64"):
            mm.reset_operands(b=b2.astype(np.float64))
        with pytest.raises(OperandMismatchError, match="a layout differs: planned C, got F"):
            mm.reset_operands(a=np.asfortranarray(a2))
        with pytest.raises(OperandMismatchError, match="without c"):
            mm.reset_operands(c=np.ones((6, 7), np.float32))
        with pytest.raises(OperandMismatchError, match="'relu_aux' is not part"):
            mm.reset_operands(epilogue_inputs={"relu_aux": np.ones((6, 7), bool)})
        assert close(mm.execute(), a2 @ b2 + bias2)  # a failed reset changed nothing


def test_failure_in_plan_leaves_the_plan_usable(monkeypatch):
    a, b = arrays((40, 30), (30, 20))
    mm = la.Matmul(a, b, epilogue="relu")
    engine = mm._engine
    real_prepare = engine.prepare
    monkeypatch.setattr(engine, "prepare", lambda *args, **kw: (_ for _ in ()).throw(MemoryError("boom")))
    with pytest.raises(MemoryError):
        mm.plan()
    with pytest.raises(PlanStateError):
        mm.execute()
    monkeypatch.setattr(engine, "prepare", real_prepare)
    mm.plan()
    assert close(mm.execute(), np.maximum(a @ b, 0))
    mm.free()


def test_execute_into_out():
    a, b = arrays((9, 4), (4, 3))
    out = np.empty((9, 3), np.float32)
    with la.Matmul(a, b, epilogue="relu_aux") as mm:
        mm.plan()
        got, aux = mm.execute(out=out)
        assert got is out and close(out, np.maximum(a @ b, 0)) and aux["relu_aux"].dtype == bool
        with pytest.raises(InvalidOperandError, match="shape"):
            mm.execute(out=np.empty((3, 9), np.float32))
        with pytest.raises(InvalidOperandError, match="overlaps"):
            mm.execute(out=a.reshape(-1)[:27].reshape(9, 3))


def test_execute_into_out_of_another_package_is_refused():
    torch = pytest.importorskip("torch")
    a, b = arrays((9, 4), (4, 3))
    with la.Matmul(torch.from_numpy(a), torch.from_numpy(b)) as mm:
        mm.plan()
        with pytest.raises(InvalidOperandError, match="out must be a torch array.*got a numpy one"):
            mm.execute(out=np.empty((9, 3), np.float32))
        out = torch.empty(9, 3)
        assert mm.execute(out=out) is out and close(out.numpy(), a @ b)
    with la.Matmul(a, b) as mm:
        mm.plan()
        with pytest.raises(InvalidOperandError, match="out must be a numpy array.*got a torch one"):
            mm.execute(out=torch.empty(9, 3))


BAD_CASES = [
    (dict(b=np.ones((4, 3), np.float32)), InvalidOperandError, r"a.shape=\(5, 3\).*b.shape=\(4, 3\)"),
    (dict(b=np.ones((3, 4), np.float64)), InvalidOperandError, "b has dtype float64 but float32"),
    (dict(c=np.ones((5, 4), np.float32)), InvalidOptionError, "c was given without beta"),
    (dict(beta=1.0), InvalidOptionError, "beta=1.0 was given without c"),
    (dict(c=np.ones((2, 4), np.float32), beta=1.0), InvalidOperandError, r"c of shape \(2, 4\) does not broadcast"),
    (dict(epilogue="relu_bias"), InvalidOperandError, r"needs epilogue_inputs \['bias'\]; missing"),
    (dict(epilogue="relu", epilogue_inputs={"bias": np.ones(4, np.float32)}), InvalidOperandError, "does not take"),
    (dict(epilogue="bias", epilogue_inputs={"bias": np.ones(5, np.float32)}), InvalidOperandError,
     r"bias of shape \(5,\) does not broadcast to the result shape \(5, 4\)"),
    (dict(epilogue="drelu", epilogue_inputs={"relu_aux": np.ones((4, 5), bool)}), InvalidOperandError,
     "relu_aux has shape"),
    (dict(epilogue="drelu", epilogue_inputs={"relu_aux": np.ones((5, 4), np.float32)}), InvalidOperandError,
     "relu_aux has dtype float32 but bool"),
    (dict(epilogue="swish"), InvalidOptionError, "epilogue='swish' is not known"),
    (dict(alpha="2"), InvalidOptionError, "alpha must be a number"),
    (dict(alpha=1j), InvalidOptionError, "complex but the operands are float32"),
    (dict(options={"check_finit": True}), InvalidOptionError, "unknown key 'check_finit'"),
    (dict(stream=7), InvalidOptionError, "stream=7"),
    (dict(execution="tpu"), InvalidOptionError, "execution='tpu'"),
    (dict(a=np.ones((5, 3), np.int32), b=np.ones((3, 4), np.int32)), InvalidOperandError, "a has dtype int32"),
    (dict(a=np.ones((5, 3), np.complex64), b=np.ones((3, 4), np.complex64), epilogue="relu"), InvalidOperandError,
     "real dtypes only"),
    (dict(a=np.array(1.0, np.float32)), InvalidOperandError, "at least one dimension"),
]


@pytest.mark.parametrize("kwargs,error,match", BAD_CASES)
def test_bad_input_raises_clearly_and_modifies_nothing(kwargs, error, match):
    base = dict(a=arrays((5, 3))[0], b=arrays((3, 4))[0])
    base.update(kwargs)
    a, b = base.pop("a"), base.pop("b")
    snapshots = [np.array(x, copy=True) for x in (a, b)]
    for fn in (la.Matmul, la.matmul):
        with pytest.raises(error, match=match):
            fn(a, b, **base)
    assert all(np.array_equal(s, x) for s, x in zip(snapshots, (a, b)))


def test_check_finite_option():
    a, b = arrays((5, 3), (3, 4))
    bias = np.array([1.0, np.nan, 0.0, 2.0], np.float32)
    kwargs = dict(epilogue="bias", epilogue_inputs={"bias": bias})
    with pytest.raises(InvalidOperandError, match="'bias'|bias contains NaN"):
        la.matmul(a, b, options={"check_finite": True}, **kwargs)
    assert np.isnan(la.matmul(a, b, **kwargs)[:, 1]).all()  # unchecked: NaN propagates, never hidden
    assert np.isnan(bias[1])


def test_cuda_execution_raises_the_clear_error():
    a, b = arrays((5, 3), (3, 4))
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        la.Matmul(a, b, execution="cuda")
    with pytest.raises(ExecutionSpaceUnavailableError):
        la.matmul(a, b, execution={"name": "cuda", "device_id": 0})


def test_problem_key_fields():
    a, b = arrays((5, 3), (4, 3))
    mm = la.Matmul(a, b.T, np.ones(4, np.float32), beta=2.0, alpha=0.5, epilogue=la.Epilogue.RELU)
    p = mm.problem
    assert p.operation == "matmul"
    assert (p.get("a_layout"), p.get("b_layout"), p.get("epilogue")) == ("C", "F", "relu")
    assert (p.get("alpha_kind"), p.get("beta_kind"), p.get("c_shape")) == ("real", "real", [4])
    assert p.get("alpha") is None and p.get("beta") is None  # values stay out of the wisdom key
    assert p.get("dtype") == "float32"


def test_scalar_values_share_one_wisdom_entry_and_are_still_honoured():
    a, b, c = arrays((40, 30), (30, 20), (40, 20))
    with la.Matmul(a, b, c, alpha=0.5, beta=2.0, epilogue="relu") as first:
        first.autotune(effort="exhaustive", repeats=1)
        winner, digest = first.candidate, first.problem.digest()
    with la.Matmul(a, b, c, alpha=-3.0, beta=0.25, epilogue="relu") as other:
        assert other.problem.digest() == digest
        other.plan()
        assert other.chosen_by == "wisdom" and other.candidate == winner
        assert close(other.execute(), np.maximum(-3.0 * (a.astype(np.float64) @ b) + 0.25 * c, 0))
    with la.Matmul(a, b, c, alpha=1.0, beta=2.0, epilogue="relu") as unit:
        assert unit.problem.get("alpha_kind") == "one" and unit.problem.digest() != digest
    za, zb = arrays((6, 5), (5, 4), dtype=np.complex128)
    with la.Matmul(za, zb, alpha=2j) as mm:
        assert mm.problem.get("alpha_kind") == "complex"
        assert close(mm.plan().execute(), 2j * (za @ zb), 1e-12)


def test_autotune_records_wisdom_and_a_new_plan_uses_it():
    a, b = arrays((64, 48), (48, 80))
    bias = arrays((80,))[0]
    kwargs = dict(epilogue="gelu_bias", epilogue_inputs={"bias": bias})
    with la.Matmul(a, b, **kwargs) as mm:
        timings = mm.autotune(effort="exhaustive", repeats=1)
        assert len(timings) >= 2 and mm.chosen_by == "autotune"
        winner = mm.candidate
    with la.Matmul(a, b, **kwargs) as again:
        again.plan()
        assert again.chosen_by == "wisdom" and again.candidate == winner
        assert again.autotune() == {}  # no timing on a wisdom hit


def test_plan_cache_hits_sizes_and_clears():
    matmul_plan.clear_plan_cache()
    a, b = arrays((70, 50), (50, 80))  # not tiny: tiny products take no plan (see test_matmul_tiny_dot)
    for _ in range(3):
        assert close(la.matmul(a, b), a @ b)
    info = matmul_plan.plan_cache_info()
    assert (info["hits"], info["misses"], info["size"]) == (2, 1, 1)
    la.matmul(a, np.asfortranarray(b))  # another layout: another plan
    assert matmul_plan.plan_cache_info()["size"] == 2
    matmul_plan.set_plan_cache_size(1)
    assert matmul_plan.plan_cache_info()["size"] == 1
    matmul_plan.clear_plan_cache()
    assert matmul_plan.plan_cache_info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": 1}
    matmul_plan.set_plan_cache_size(128)


def test_one_call_with_numpy_epilogue_inputs_keys_on_their_layouts():
    """A built-in epilogue with NumPy inputs takes the cheap key (shapes, strides and dtypes of
    every operand): new arrays of the same layouts reuse the plan, another layout or dtype of an
    input gets its own plan, and the results are the planned route's."""
    matmul_plan.clear_plan_cache()
    a, b = arrays((70, 50), (50, 80), seed=6)
    bias = arrays((80,), seed=7)[0]
    want = np.maximum(a @ b + bias, 0)
    for seed in range(3):
        fresh = arrays((80,), seed=seed)[0]
        got = la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": fresh})
        assert close(got, np.maximum(a @ b + fresh, 0))
    assert (matmul_plan.plan_cache_info()["hits"], matmul_plan.plan_cache_info()["size"]) == (2, 1)
    strided = np.repeat(bias, 2)[::2]  # the same values, another layout
    assert close(la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": strided}), want)
    row = bias.reshape(1, 80)  # another shape that broadcasts alike
    assert close(la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": row}), want)
    assert matmul_plan.plan_cache_info()["size"] == 3
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        assert close(la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}), mm.plan().execute())
    with pytest.raises(InvalidOperandError):  # a bad input still gets the plan's error
        la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": arrays((79,))[0]})


@pytest.mark.parametrize("shape, epilogue, bias_shape, built, first", [
    ((8, 16, 16), "relu_bias", "col", True, "matmul"), ((64, 64, 64), "gelu_bias", "col", True, "matmul"),
    ((65, 64, 64), "relu_bias", "col", True, "matmul"), ((256, 128, 128), "bias", "col", True, "matmul"),
    ((65, 64, 64), "gelu_bias", "col", True, "gemm"), ((65, 64, 64), "relu_bias", "row", True, "gemm"),
    ((300, 256, 256), "bias", "col", True, "gemm"), ((65, 64, 64), "relu_bias", "col", False, "gemm"),
])
def test_a_bias_goes_into_blas_first_except_on_small_products(shape, epilogue, bias_shape, built, first,
                                                              monkeypatch):
    """The heuristic folds a leading bias into ``?gemm`` (no pass of its own), except on tiny
    products (NumPy's product and the pass cost less than the ctypes call of CBLAS) and where the
    tiny kernel's ``bias_relu`` does a built-in bias/ReLU in one pass after NumPy's product."""
    if MODULE is None and built:
        pytest.skip("no C compiler or Python headers: the tiny kernel cannot be built")
    if not built:
        monkeypatch.setattr(cpu_engine, "compiled_bias_relu", lambda: None)
    m, k, n = shape
    a, b = arrays((m, k), (k, n), seed=8)
    bias = arrays((n,) if bias_shape == "col" else (m, 1), seed=9)[0]
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias}) as mm:
        mm.plan()
        assert (mm.candidate.params["method"], mm.chosen_by) == (first, "heuristic")
        x = a @ b + bias
        want = np.maximum(x, 0) if epilogue == "relu_bias" else x if epilogue == "bias" else None
        if want is not None:
            assert close(mm.execute(), want)


def test_plan_cache_controls_are_exported():
    assert la.clear_plan_cache is matmul_plan.clear_plan_cache
    assert la.set_plan_cache_size is matmul_plan.set_plan_cache_size
    assert la.plan_cache_info is matmul_plan.plan_cache_info


@pytest.mark.parametrize("kwargs", [{}, {"epilogue": "relu"}, {"epilogue": "bias_key"}, {"alpha": 2.0}])
def test_one_call_keeps_no_reference_to_the_callers_arrays(kwargs):
    matmul_plan.clear_plan_cache()
    a, b = arrays((80, 60), (60, 70), seed=3)  # not tiny: the all-defaults call takes a plan too
    if kwargs.get("epilogue") == "bias_key":  # epilogue inputs go through the general path
        kwargs = {"epilogue": "relu_bias", "epilogue_inputs": {"bias": arrays((70,))[0]}}
    refs = sys.getrefcount(a), sys.getrefcount(b)
    la.matmul(a, b, **kwargs)
    assert (sys.getrefcount(a), sys.getrefcount(b)) == refs
    fresh = arrays((80, 60), seed=4)[0]
    dead = weakref.ref(fresh)
    la.matmul(fresh, b, **kwargs)
    del fresh
    gc.collect()
    assert dead() is None
    a2, b2 = arrays((80, 60), (60, 70), seed=5)
    got = la.matmul(a2, b2, **kwargs)  # the detached cached plan is reused
    assert matmul_plan.plan_cache_info()["hits"] == 2
    assert close(got, np.asarray(la.Matmul(a2, b2, **kwargs).plan().execute()))
    assert close(la.matmul(a2, b2), a2.astype(np.float64) @ b2)


def test_one_call_keeps_no_reference_to_torch_tensors():
    torch = pytest.importorskip("torch")
    matmul_plan.clear_plan_cache()
    x, y = arrays((6, 4), (4, 3))
    dead = weakref.ref(x)  # the tensor's storage keeps its NumPy array alive
    a, b = torch.from_numpy(x), torch.from_numpy(y)
    got = la.matmul(a, b, epilogue="relu")
    assert close(got.numpy(), np.maximum(x.astype(np.float64) @ y, 0))
    del x, a, got
    gc.collect()
    assert dead() is None


def test_detached_and_freed_plans_hold_no_operands():
    a, b = arrays((5, 3), (3, 4))
    mm = la.Matmul(a, b, epilogue="relu").plan()
    mm._detach()
    assert mm._ops is None
    with pytest.raises(PlanStateError, match="released its operands"):
        mm.execute()
    with pytest.raises(PlanStateError, match="released its operands"):
        mm.execute(out=np.empty((5, 4), np.float32))
    with pytest.raises(PlanStateError, match=r"pass all of \['a', 'b'\]"):
        mm.reset_operands(a=a)
    with pytest.raises(OperandMismatchError, match="b shape differs"):
        mm.reset_operands(a=a, b=np.ones((3, 5), np.float32))
    a2, b2 = arrays((5, 3), (3, 4), seed=1)
    mm.reset_operands(a=a2, b=b2)
    assert close(mm.execute(), np.maximum(a2.astype(np.float64) @ b2, 0))
    mm.free()
    assert mm._ops is None and mm._one_call is None


def test_plans_share_one_worker_pool(monkeypatch):
    """Many cached plans whose epilogue runs on worker threads start at most cpu_count threads."""
    monkeypatch.setenv("NVMATHPY_CPU_JIT", "off")  # the pooled NumPy candidate comes first then
    matmul_plan.clear_plan_cache()
    before = threading.active_count()
    execution = {"name": "cpu", "num_threads": 4}
    for i in range(10):
        a, b = arrays((260 + i, 260), (260, 260), dtype=np.float64, seed=i)
        if i == 0:
            with la.Matmul(a, b, epilogue="relu", execution=execution) as mm:
                assert mm.plan().candidate.params.get("workers") == 4  # the pooled candidate is chosen
        got = la.matmul(a, b, epilogue="relu", execution=execution)
        assert close(got, np.maximum(a @ b, 0), 1e-12)
    assert matmul_plan.plan_cache_info()["size"] == 10
    assert threading.active_count() - before <= (os.cpu_count() or 1)
    matmul_plan.clear_plan_cache()


def test_plan_cache_under_eight_threads():
    matmul_plan.clear_plan_cache()
    shapes = [((3, 4), (4, 5)), ((17, 9), (9, 11)), ((2, 6, 5), (5, 4)), ((70, 80), (80, 60))]  # the last: planned

    def work(i):
        (sa, sb) = shapes[i % len(shapes)]
        a, b = arrays(sa, sb, seed=i)
        bias = arrays(sb[-1:], seed=i + 1000)[0]
        for _ in range(20):
            d = la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias})
            if not close(d, np.maximum(a.astype(np.float64) @ b + bias, 0)):
                return False
            if not close(la.matmul(a, b), a.astype(np.float64) @ b):
                return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(32)))
    info = matmul_plan.plan_cache_info()
    assert info["hits"] > info["misses"] > 0


def test_tiny_plain_products_bind_dot():
    a, b = arrays((4, 4), (4, 4))
    with la.Matmul(a, b) as mm:
        mm.plan()
        assert mm.candidate.params["method"] == "dot"
        assert close(mm.execute(), a @ b)


def test_blas_thread_candidates_restore_the_library_setting():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import scipy.linalg.blas  # noqa: F401  (load SciPy's BLAS before reading the settings)

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    methods = set()
    for k in (90, 230):  # below and above the size where split candidates start
        a, b = arrays((300, k), (k, 260))
        bias = arrays((260,))[0]
        with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
            limited = [c for c in mm._engine.candidates(mm.problem) if c.params["threads"] is not None]
            methods |= {c.params["method"] for c in limited}
            prepared = [mm._engine.prepare(mm.problem, c) for c in limited]
            want = np.maximum(a.astype(np.float64) @ b + bias, 0)

            def work(i):
                p = prepared[i % len(prepared)]
                return all(close(p.kernel(a, b, None, {"bias": bias}, None), want) for _ in range(3))

            with ThreadPoolExecutor(4) as pool:
                assert all(pool.map(work, range(8)))
            assert all(work(i) for i in range(len(prepared)))  # the main thread limits and restores
            for p in prepared:
                p.free()
    assert methods >= {"split", "matmul"}
    assert blas_threads() == before
