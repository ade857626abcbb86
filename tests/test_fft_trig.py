"""DCT/DST: the DCT/DST plans and the scipy.fft-compatible functions, against SciPy.

Every type (1-4), norm, ``orthogonalize``, direction and dtype, padding and cropping, axes in
any order, non-contiguous operands; each library separately; the plan lifecycle, autotune and
wisdom; the plan cache and the uarray backend; bad input.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools

import numpy as np
import pytest
import scipy.fft
from hypothesis import given, settings
from hypothesis import strategies as st

import nvmathpy.scipy.fft as nsf
from nvmathpy.errors import ExecutionSpaceUnavailableError, InvalidOperandError, InvalidOptionError, OperandMismatchError
from nvmathpy.errors import PlanStateError
from nvmathpy.fft import DCT, DST

ONE_D = ["dct", "idct", "dst", "idst"]
N_D = ["dctn", "idctn", "dstn", "idstn"]
ENGINES = ["scipy"] + (["ducc0"] if importlib.util.find_spec("ducc0") else [])
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    return float(np.linalg.norm((got - want).ravel()) / np.linalg.norm(want.ravel()))


def reference(name, x, **kwargs):
    """SciPy's result in float64 (complex operands as the transforms of their two parts: SciPy
    1.17's complex branch drops ``orthogonalize``)."""
    function = getattr(scipy.fft, name)
    if np.iscomplexobj(x):
        return function(x.real.astype(np.float64), **kwargs) + 1j * function(x.imag.astype(np.float64), **kwargs)
    return function(x.astype(np.float64) if x.dtype != np.longdouble else x, **kwargs)


def operand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if np.dtype(dtype).kind in "iu":
        x = x * 50
    return x.astype(dtype)


def expected_dtype(dtype):
    return np.dtype(scipy.fft.dct(np.ones(3, dtype)).dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(11)


@pytest.mark.parametrize("name", ONE_D + N_D)
def test_signatures_match_scipy(name):
    assert inspect.signature(getattr(nsf, name)) == inspect.signature(getattr(scipy.fft, name))


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("type_", [1, 2, 3, 4])
@pytest.mark.parametrize("norm, orthogonalize", list(itertools.product([None, "backward", "ortho", "forward"],
                                                                       [None, True, False])))
def test_every_type_norm_and_orthogonalization(rng, name, type_, norm, orthogonalize):
    x = operand(rng, (4, 13), np.float64)
    before = x.copy()
    for n, axis in ((None, -1), (9, 1), (20, 0)):
        got = getattr(nsf, name)(x, type=type_, n=n, axis=axis, norm=norm, orthogonalize=orthogonalize,
                                 overwrite_x=True)
        want = reference(name, x, type=type_, n=n, axis=axis, norm=norm, orthogonalize=orthogonalize)
        assert got.dtype == np.float64 and rel_err(got, want) < 1e-12, (n, axis)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.bool_, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("name", ONE_D + N_D)
def test_dtypes_follow_scipy(rng, dtype, name):
    x = operand(rng, (6, 10), dtype)
    got = getattr(nsf, name)(x, type=2)
    want = reference(name, x, type=2)
    assert got.dtype == getattr(scipy.fft, name)(x, type=2).dtype
    assert rel_err(got, want) < (1e-4 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 1e-12)


@pytest.mark.parametrize("name", N_D)
@pytest.mark.parametrize("type_", [1, 2, 3, 4])
def test_axes_orders_lengths_and_layouts(rng, name, type_):
    base = operand(rng, (7, 6, 11, 5), np.float64)
    cases = [
        dict(),
        dict(axes=(2, 0)),
        dict(axes=(-1, 1, 0)),
        dict(s=(8, 3), axes=(0, 2)),
        dict(s=(4, -1, 13)),
        dict(axes=[3, 1, 2, 0]),
    ]
    for layout in ("C", "F", "strided", "transposed"):
        x = {"C": base, "F": np.asfortranarray(base), "strided": base[::2, :, ::3],
             "transposed": base.transpose(2, 0, 3, 1)}[layout]
        for kwargs in cases:
            got = getattr(nsf, name)(x, type=type_, **kwargs)
            want = getattr(scipy.fft, name)(x, type=type_, **kwargs)
            assert rel_err(got, want) < 1e-12, (layout, kwargs)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("plan_class, name", [(DCT, "dct"), (DST, "dst")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_engine_on_its_own(rng, engine, plan_class, name, dtype):
    x = operand(rng, (3, 5, 17), dtype)
    for type_, norm in itertools.product([1, 2, 3, 4], ["backward", "ortho", "forward"]):
        with plan_class(x, type=type_, axes=(2, 0), s=(19, 4), norm=norm, options={"engines": (engine,)}) as plan:
            plan.plan()
            assert plan.candidate.label == engine
            for direction, prefix in (("forward", ""), ("inverse", "i")):
                got = plan.execute(direction)
                want = getattr(scipy.fft, prefix + name + "n")(x.astype(np.float64), type=type_, axes=(2, 0),
                                                               s=(19, 4), norm=norm)
                assert got.dtype == np.dtype(dtype) and rel_err(got, want) < 10 * TOL[np.dtype(dtype)]


@pytest.mark.skipif("ducc0" not in ENGINES, reason="ducc0 is not installed")
def test_orthogonalize_against_the_norm_runs_on_scipy_only(rng):
    x = operand(rng, (16,), np.float64)
    plan = DCT(x, norm="ortho", orthogonalize=False)
    assert {c.label for c in plan._engine.candidates(plan.problem)} == {"scipy"}
    assert rel_err(plan.plan().execute(), scipy.fft.dct(x, norm="ortho", orthogonalize=False)) < 1e-12
    with pytest.raises(InvalidOptionError, match="only scipy.fft can"):
        DCT(x, norm="backward", orthogonalize=True, options={"engines": ("ducc0",)})


def test_heuristic_order(rng):
    for shape, dtype, first in [((4096,), np.float64, "ducc0"), ((1000,), np.float32, "ducc0"),
                                ((64, 512), np.float32, "scipy"), ((64, 512), np.float64, "ducc0")]:
        plan = DCT(np.ones(shape, dtype), axes=(-1,))
        candidates = plan._engine.candidates(plan.problem)
        assert candidates[0].label == (first if "ducc0" in ENGINES else "scipy"), (shape, dtype)
        assert len({(c.label, c.params["threads"]) for c in candidates}) == len(candidates)


def test_plan_lifecycle_autotune_and_wisdom(rng):
    x = operand(rng, (8, 300), np.float64)
    plan = DST(x, type=3, axes=(-1,), execution={"name": "cpu", "num_threads": 2})
    with pytest.raises(PlanStateError, match="plan"):
        plan.execute()
    timings = plan.autotune(effort="exhaustive", repeats=2)
    assert len(timings) == len(plan._engine.candidates(plan.problem)) and plan.chosen_by == "autotune"
    assert rel_err(plan.execute(), scipy.fft.dst(x, type=3)) < 1e-12
    y = operand(rng, (8, 300), np.float64)
    plan.reset_operands(y)
    assert rel_err(plan.execute("inverse"), scipy.fft.idst(y, type=3)) < 1e-12
    with pytest.raises(OperandMismatchError, match="shape"):
        plan.reset_operand(np.ones((8, 301)))
    with pytest.raises(OperandMismatchError, match="dtype"):
        plan.reset_operand(y.astype(np.float32))
    with pytest.raises(InvalidOptionError, match="direction"):
        plan.execute("sideways")
    again = DST(x, type=3, axes=(-1,), execution={"name": "cpu", "num_threads": 2}).plan()
    assert again.chosen_by == "wisdom" and again.candidate == plan.candidate
    plan.free()
    plan.free()  # idempotent
    with pytest.raises(PlanStateError):
        plan.execute()


def test_torch_cpu_tensors_come_back_as_tensors(rng):
    torch = pytest.importorskip("torch")
    x = operand(rng, (5, 9), np.float32)
    got = DCT(torch.from_numpy(x), type=4).plan().execute()
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert rel_err(got.numpy(), scipy.fft.dctn(x, type=4)) < 1e-5


def test_one_call_functions_reuse_cached_plans(rng):
    from nvmathpy.fft._driver import runner_cache
    from nvmathpy.fft.trig_plan import trig_plan_cache

    cache = trig_plan_cache()
    x = operand(rng, (4, 33), np.complex128)  # complex operands run on cached plans
    nsf.dst(x, type=2, workers=2)
    hits = cache.hits
    for _ in range(3):
        y = operand(rng, (4, 33), np.complex128)
        assert rel_err(nsf.dst(y, type=2, workers=2), scipy.fft.dst(y, type=2)) < 1e-12
    assert cache.hits == hits + 3
    runner_cache().clear()  # small real ones on the quick path: planned once, then a shared runner
    misses = cache.misses
    for _ in range(3):
        y = operand(rng, (4, 33), np.float64)
        assert rel_err(nsf.dst(y, type=2, workers=2), scipy.fft.dst(y, type=2)) < 1e-12
    assert runner_cache().misses == 1 and cache.misses <= misses + 1
    assert rel_err(nsf.dct([1.0, 2.0, 5.0]), scipy.fft.dct([1.0, 2.0, 5.0])) < 1e-12  # array-likes


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(2, 9), min_size=1, max_size=3), type_=st.integers(1, 4),
       name=st.sampled_from(N_D), norm=st.sampled_from([None, "ortho", "forward"]),
       single=st.booleans(), seed=st.integers(0, 2**16), data=st.data())
def test_random_problems_match_scipy(shape, type_, name, norm, single, seed, data):
    x = operand(np.random.default_rng(seed), tuple(shape), np.float32 if single else np.float64)
    axes = data.draw(st.permutations(range(len(shape))).map(lambda p: p[:max(1, len(p) - 1)]))
    s = data.draw(st.lists(st.integers(2, 12), min_size=len(axes), max_size=len(axes)))
    got = getattr(nsf, name)(x, type=type_, s=s, axes=axes, norm=norm)
    want = reference(name, x, type=type_, s=s, axes=axes, norm=norm)
    assert got.dtype == x.dtype and rel_err(got, want) < (1e-5 if single else 1e-12)


def test_bad_input_is_refused_before_any_work(rng):
    x = operand(rng, (4, 6), np.float64)
    keep = x.copy()
    cases = [
        (dict(type=5), InvalidOptionError, "type"),
        (dict(type=True), InvalidOptionError, "type"),
        (dict(norm="bad"), ValueError, "norm"),
        (dict(n=0), ValueError, "data points"),
        (dict(orthogonalize="yes"), InvalidOptionError, "orthogonalize"),
        (dict(axis=3), (IndexError, np.exceptions.AxisError), "out of bounds"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            nsf.dct(x, **kwargs)
    with pytest.raises(InvalidOperandError, match="DCT-I needs at least 2"):
        nsf.dct(np.ones(1), type=1)
    assert rel_err(nsf.dst(np.ones(1), type=1), scipy.fft.dst(np.ones(1), type=1)) < 1e-12  # DST-I is fine
    with pytest.raises(ValueError, match="unique"):
        nsf.dctn(x, axes=(1, 1))
    with pytest.raises(InvalidOperandError, match="different lengths"):
        nsf.dstn(x, s=(3,), axes=(0, 1))
    with pytest.raises(InvalidOperandError, match="dtype"):
        DCT(np.array(["a", "b"]))
    with pytest.raises(InvalidOptionError, match="engines"):
        DCT(x, options={"engines": ("pyfftw",)})
    with pytest.raises(InvalidOptionError, match="allowed"):
        DCT(x, options={"fftw_time_limit": 1.0})
    with pytest.raises(ExecutionSpaceUnavailableError, match="real-to-real"):
        DCT(x, execution="cuda")
    np.testing.assert_array_equal(x, keep)


class TestBackend:
    @pytest.mark.parametrize("name", ONE_D + N_D)
    def test_set_backend_runs_them_here(self, rng, monkeypatch, name):
        calls = []
        original = nsf.__ua_function__
        monkeypatch.setattr(nsf, "__ua_function__", lambda m, a, k: calls.append(m.__name__) or original(m, a, k))
        x = operand(rng, (5, 8), np.float64)
        want = getattr(scipy.fft, name)(x, type=3, norm="ortho")
        with scipy.fft.set_backend(nsf, only=True):
            got = getattr(scipy.fft, name)(x, type=3, norm="ortho", workers=2)
        assert calls == [name] and rel_err(got, want) < 1e-12

    def test_longdouble_runs_on_scipy(self, rng):
        x = operand(rng, (12,), np.float64).astype(np.longdouble)
        with scipy.fft.set_backend(nsf, only=True):
            got = scipy.fft.dct(x, type=2)
        assert got.dtype == np.longdouble
        assert rel_err(got.astype(np.float64), scipy.fft.dct(x.astype(np.float64))) < 1e-12

    def test_foreign_operands_are_declined(self):
        torch = pytest.importorskip("torch")
        assert nsf.__ua_function__(scipy.fft.dct, (torch.ones(4),), {}) is NotImplemented
        assert nsf.__ua_function__(scipy.fft.dctn, (np.ones(4, dtype=object),), {}) is NotImplemented


def test_bench_suite_cases_compute_the_same_transform(monkeypatch):
    from nvmathpy.bench import suite_fft

    monkeypatch.setattr(suite_fft, "TRIG_CASES", [("1-D 96", (96,), (0,)), ("2-D 12x10", (12, 10), (0, 1))])
    cases = suite_fft.trig_cases(False, np.random.default_rng(0))
    assert len(cases) == 2 * 2 * 2 and all(c.baseline == "scipy.fft" and c.threads == 2 for c in cases)
    for case in cases:
        results = {label: np.asarray(fn()) for label, fn in case.impls.items()}
        assert {"scipy.fft", "nvmathpy"} <= set(results)
        for label, value in results.items():
            assert rel_err(value, results["scipy.fft"]) < 1e-5, (case.name, label)
