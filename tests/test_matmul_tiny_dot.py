"""The one-call ``matmul``'s direct route: tiny all-defaults products of NumPy operands go
straight to the call their plan binds (the compiled tiny kernel for float32/float64, else
``ndarray.dot`` for 1-D/2-D operands; see ``nvmathpy.linalg.gemm._tiny``) and must return
exactly what the planned route returns, and ``numpy.matmul``'s result up to rounding;
everything else must still take the planned route. The compiled kernel is built before these
tests run, so every route sees it."""

from __future__ import annotations

import numpy as np
import pytest

import nvmathpy.linalg as la
from nvmathpy.errors import InvalidOperandError, InvalidOptionError
from nvmathpy.linalg.gemm import _tiny, matmul_plan
from nvmathpy.linalg.gemm._layout import TINY_FLOPS
from nvmathpy.linalg.gemm.cpu._tiny_c import TINY_EXTENSION

TINY_EXTENSION.get(wait=True)  # (built now: not half-way through a test that compares two routes)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def view(x, layout):
    """``x``'s values in another memory layout (a view where the layout allows)."""
    if layout == "C":
        return x
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "T":  # the transpose of a C array: an F-ordered view
        return np.ascontiguousarray(x.T).T
    wide = np.zeros(tuple(2 * s for s in x.shape), x.dtype)
    if layout == "strided":  # steps in every axis
        wide[tuple(slice(None, None, 2) for _ in x.shape)] = x
        return wide[tuple(slice(None, None, 2) for _ in x.shape)]
    wide[tuple(slice(None, s) for s in x.shape)] = x[tuple(slice(None, None, -1) for _ in x.shape)]  # "reversed"
    return wide[tuple(slice(s - 1, None, -1) for s in x.shape)]


def planned(a, b):
    """The one-call's general route: through the plan cache."""
    return matmul_plan._planned_matmul(a, b, None, 1.0, None, None, None, None, None, None)


def assert_same(got, want, a, b):
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)  # bit for bit: the same call
    if isinstance(want, np.ndarray):
        assert got.strides == want.strides
        assert (got.flags.c_contiguous, got.flags.f_contiguous, got.flags.owndata) == \
            (want.flags.c_contiguous, want.flags.f_contiguous, want.flags.owndata)
        assert got.flags.writeable and not np.shares_memory(got, a) and not np.shares_memory(got, b)


@pytest.fixture
def no_plan(monkeypatch):
    """Fail on any planned call; yields the plan cache counters before the test's calls."""
    matmul_plan.clear_plan_cache()

    def refuse(*args, **kwargs):
        raise AssertionError("the planned route was taken")

    monkeypatch.setattr(matmul_plan, "_planned_matmul", refuse)
    monkeypatch.setattr(matmul_plan, "Matmul", refuse)
    return matmul_plan.plan_cache_info()


@pytest.fixture
def routes(monkeypatch):
    """Record the calls that take the planned route (which still runs)."""
    taken = []
    general = matmul_plan._planned_matmul

    def record(*args):
        taken.append(args)
        return general(*args)

    monkeypatch.setattr(matmul_plan, "_planned_matmul", record)
    return taken


SHAPES = [((n, n), (n, n)) for n in (1, 2, 3, 4, 7, 8, 16)] + [
    ((5, 3), (3, 7)), ((1, 9), (9, 1)), ((9, 1), (1, 9)), ((8,), (8, 5)), ((6, 8), (8,)), ((11,), (11,)),
    ((64, 64), (64, 64)),  # exactly TINY_FLOPS
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("layouts", [("C", "C"), ("F", "C"), ("C", "T"), ("T", "F"), ("strided", "C"),
                                     ("C", "reversed")])
def test_direct_route_returns_what_the_planned_route_returns(dtype, shapes, layouts, no_plan, monkeypatch):
    x, y = rand(shapes[0], dtype, 1), rand(shapes[1], dtype, 2)
    a, b = view(x, layouts[0]), view(y, layouts[1])
    assert np.array_equal(a, x) and np.array_equal(b, y)
    got = la.matmul(a, b)
    assert matmul_plan.plan_cache_info() == no_plan  # no plan taken, none counted
    monkeypatch.undo()
    want = planned(a, b)
    assert_same(got, want, a, b)
    ref = x.astype(np.complex128) @ y.astype(np.complex128)
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-13
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref) * max(1, shapes[0][-1])
    assert np.array_equal(a, x) and np.array_equal(b, y)  # the caller's arrays untouched


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_direct_route_is_the_plans_own_choice(shapes):
    """Without wisdom, the plan of every problem the direct route takes binds the dot call."""
    a, b = rand(shapes[0], np.float64, 3), rand(shapes[1], np.float64, 4)
    with la.Matmul(a, b) as mm:
        mm.plan()
        assert (mm.candidate.label, mm.chosen_by) == ("dot", "heuristic")


@pytest.mark.parametrize("shapes", [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((2, 4), (4, 0)), ((0,), (0, 3)),
                                    ((0,), (0,))], ids=str)
def test_empty_products_take_the_direct_route_too(shapes, no_plan, monkeypatch):
    a, b = np.ones(shapes[0]), np.ones(shapes[1])
    got = la.matmul(a, b)
    monkeypatch.undo()
    assert_same(got, planned(a, b), a, b)


def test_one_dimensional_product_is_the_planned_scalar():
    a, b = rand((7,), np.complex128, 5), rand((7,), np.complex128, 6)
    got, want = la.matmul(a, b), planned(a, b)
    assert type(got) is type(want) and got == want


@pytest.mark.parametrize("a_shape, b_shape, match", [
    ((3, 4), (5, 2), "inner dimensions"), ((0, 4), (5, 2), "inner dimensions"), ((4,), (5,), "inner dimensions"),
    ((3, 4), (5,), "inner dimensions"), ((), (3,), "at least one dimension"), ((3,), (), "at least one dimension"),
])
def test_bad_shapes_get_the_planned_routes_error(a_shape, b_shape, match, routes):
    with pytest.raises(InvalidOperandError, match=match):
        la.matmul(np.ones(a_shape), np.ones(b_shape))
    assert len(routes) == 1


class Sub(np.ndarray):
    """An ndarray subclass (its own ``dot`` could differ): never the direct route."""


def ineligible():
    """(name, a, b, kwargs) of calls the direct route must leave to the planned route."""
    x, y = rand((4, 4), np.float64, 7), rand((4, 4), np.float64, 8)
    c = rand((4, 4), np.float64, 9)
    yield "alpha", x, y, {"alpha": 2.0}
    yield "int alpha", x, y, {"alpha": 1}
    yield "c and beta", x, y, {"c": c, "beta": 1.0}
    yield "epilogue", x, y, {"epilogue": "gelu"}
    yield "execution", x, y, {"execution": "cpu"}
    yield "options", x, y, {"options": {"check_finite": True}}
    yield "batched not tiny", rand((3, 64, 65), np.float64, 10), rand((65, 64), np.float64, 10), {}
    yield "batches broadcast", rand((2, 1, 16, 32), np.float64, 11), rand((8, 32, 513), np.float64, 12), {}
    yield "batched complex", rand((3, 64, 64), np.complex128, 10), rand((64, 64), np.complex128, 10), {}
    yield "not tiny", rand((64, 64), np.float64, 13), rand((64, 65), np.float64, 14), {}
    yield "float16", x.astype(np.float16), y.astype(np.float16), {}
    yield "byte-swapped", x.astype(">f8"), y.astype(">f8"), {}
    yield "subclass", x.view(Sub), y.view(Sub), {}


@pytest.mark.parametrize("name, a, b, kwargs", list(ineligible()), ids=[case[0] for case in ineligible()])
def test_other_calls_take_the_planned_route(name, a, b, kwargs, routes):
    got = la.matmul(a, b, **kwargs)
    assert len(routes) == 1
    if name in ("batched not tiny", "batches broadcast", "batched complex", "not tiny", "float16", "byte-swapped",
                "subclass"):
        wide = np.complex128 if np.iscomplexobj(a) else np.float64
        want = np.matmul(np.asarray(a, wide), np.asarray(b, wide))
        tol = 1e-2 if name == "float16" else 1e-12
        assert got.shape == want.shape and type(got) is np.ndarray
        assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want)
    if name == "not tiny":
        assert a.shape[0] * a.shape[1] * b.shape[1] > TINY_FLOPS


@pytest.mark.parametrize("a, b", [
    (np.ones((3, 3), np.int64), np.ones((3, 3), np.int64)),
    (np.ones((3, 3), np.float32), np.ones((3, 3), np.float64)),
    (np.ones((3, 3), np.complex64), np.ones((3, 3), np.float32)),
    ([[1.0, 2.0]], np.ones((2, 2))),
], ids=["int64", "mixed float", "mixed complex", "list"])
def test_bad_operands_get_the_planned_routes_error(a, b, routes):
    with pytest.raises(InvalidOperandError):
        la.matmul(a, b)
    assert len(routes) == 1


def test_beta_without_c_is_still_refused(routes):
    x = np.ones((2, 2))
    with pytest.raises(InvalidOptionError, match="beta"):
        la.matmul(x, x, beta=0.0)
    assert len(routes) == 1


def test_torch_operands_keep_their_package(routes):
    torch = pytest.importorskip("torch")
    x, y = rand((3, 3), np.float64, 15), rand((3, 3), np.float64, 16)
    got = la.matmul(torch.from_numpy(x), torch.from_numpy(y))
    assert isinstance(got, torch.Tensor) and len(routes) == 1
    assert np.allclose(got.numpy(), x @ y, rtol=1e-13, atol=0)


# -- batches --------------------------------------------------------------------------------------

BATCHED = [
    ((1, 16, 16), (16, 16)), ((4, 8, 8), (8, 8)), ((16, 4, 4), (4, 4)), ((64, 2, 2), (2, 2)),
    ((5, 3, 7), (7, 2)), ((4, 8, 8), (8,)), ((2, 3, 5, 4), (4, 6)),  # a batched, b shared
    ((4, 8, 8), (4, 8, 8)), ((16, 2, 3), (16, 3, 5)), ((2, 3, 4, 5), (2, 3, 5, 4)),  # a true batch
    ((4, 8, 8), (1, 8, 8)), ((3, 1, 4, 5), (1, 2, 5, 3)), ((2, 1, 4, 4), (3, 4, 4)),  # batches that broadcast
    ((2, 1, 8, 8), (4, 8, 8)), ((1, 8, 8), (2, 3, 8, 8)),  # ranks that differ: small enough for a.size * b.size
    ((5, 7), (3, 7, 2)), ((7,), (3, 7, 2)),  # b batched
    ((4, 64, 64), (64, 16)),  # exactly TINY_FLOPS
]
EMPTY = [((0, 4, 4), (4, 4)), ((3, 0, 4), (4, 5)), ((3, 4, 0), (0, 5)), ((3, 4, 5), (5, 0)), ((0, 4, 4), (0, 4, 4)),
         ((2, 4, 0), (2, 0, 3)), ((0, 3), (2, 3, 4)), ((3, 4, 0), (0,))]


def matrix_t(x):
    """``x``'s values with each matrix stored transposed (a view of a C array)."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2) if x.ndim >= 2 else x


def batch_step(x):
    """``x``'s values as a view that steps over every other matrix of its batch."""
    if x.ndim < 3:
        return x
    wide = np.zeros((2 * x.shape[0],) + x.shape[1:], x.dtype)
    wide[::2] = x
    return wide[::2]


LAYOUTS = {"C": lambda x: x, "matrix-T": matrix_t, "batch-step": batch_step, **{
    name: (lambda x, name=name: view(x, name)) for name in ("F", "T", "strided", "reversed")}}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BATCHED + EMPTY, ids=str)
@pytest.mark.parametrize("layouts", [("C", "C"), ("matrix-T", "C"), ("C", "matrix-T"), ("batch-step", "F"),
                                     ("T", "C"), ("strided", "reversed")], ids=str)
def test_batched_direct_route_matches_planned_route_and_numpy(dtype, shapes, layouts, no_plan, monkeypatch):
    x, y = rand(shapes[0], dtype, 20), rand(shapes[1], dtype, 21)
    a, b = LAYOUTS[layouts[0]](x), LAYOUTS[layouts[1]](y)
    assert np.array_equal(a, x) and np.array_equal(b, y)
    got = la.matmul(a, b)
    assert matmul_plan.plan_cache_info() == no_plan  # no plan taken, none counted
    monkeypatch.undo()
    assert_same(got, planned(a, b), a, b)  # the one-call's planned route: the same kernel
    want = np.matmul(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous and got.flags.writeable
    with la.Matmul(a, b) as mm:  # the plan's bound call: the same values
        mm.plan()
        assert mm.candidate.label == "dot"
        assert_same(mm.execute(), got, a, b)
    ref = x.astype(np.complex128) @ y.astype(np.complex128)
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-13
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref) * max(1, shapes[0][-1])
    assert np.array_equal(a, x) and np.array_equal(b, y)  # the caller's arrays untouched


@pytest.mark.parametrize("shapes", BATCHED + EMPTY, ids=str)
def test_tiny_flops_counts_the_plans_multiply_adds(shapes):
    a, b = np.ones(shapes[0]), np.ones(shapes[1])
    s = la.gemm._layout.analyse_shapes(a.shape, b.shape)
    exact = int(np.prod(s.batch)) * s.m * s.k * s.n
    counted = _tiny.tiny_flops(a, b)
    if exact and (a.ndim <= 2 or b.ndim <= 2 or a.ndim == b.ndim):
        assert counted == exact
    else:  # an upper bound: batches of different ranks, or zero-sized ones
        assert counted >= exact
    assert exact <= a.size * b.size  # the quick bound tiny_product tries first
    with la.Matmul(a, b) as mm:  # every problem the direct route takes, the plan gives to "dot" too
        mm.plan()
        assert (mm.candidate.label, mm.chosen_by) == ("dot", "heuristic")


def test_batched_plan_reads_current_values_and_takes_new_operands():
    x, y = rand((4, 8, 8), np.float64, 22), rand((8, 8), np.float64, 23)
    with la.Matmul(x, y) as mm:
        mm.plan()
        first = mm.execute()
        x *= 2.0  # the plan keeps references: execute reads the new contents
        second = mm.execute()
        assert second is not first and np.array_equal(second, 2.0 * first)
        z = rand((4, 8, 8), np.float64, 24)
        mm.reset_operands(a=z)
        assert np.array_equal(mm.execute(), la.matmul(z, y))
        out = np.empty((4, 8, 8))
        assert mm.execute(out=out) is out and np.allclose(out, z @ y, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("a_shape, b_shape, match", [
    ((4, 8, 8), (7, 8), "inner dimensions"), ((4, 8, 8), (4, 7, 8), "inner dimensions"),
    ((4, 8, 8), (7,), "inner dimensions"), ((3, 4, 4), (2, 4, 4), "do not broadcast"),
    ((2, 3, 4, 4), (3, 3, 4, 4), "do not broadcast"),
])
def test_bad_batched_shapes_get_the_planned_routes_error(a_shape, b_shape, match, routes):
    with pytest.raises(InvalidOperandError, match=match):
        la.matmul(np.ones(a_shape), np.ones(b_shape))
    assert len(routes) == 1


def batched_ineligible():
    """(name, a, b, kwargs) of batched calls the direct route must leave to the planned route."""
    x, y = rand((4, 8, 8), np.float64, 25), rand((4, 8, 8), np.float64, 26)
    yield "batched not tiny", rand((5, 64, 65), np.float64, 27), rand((65, 64), np.float64, 28), {}
    yield "true batch not tiny", rand((5, 64, 65), np.float64, 27), rand((5, 65, 64), np.float64, 28), {}
    yield "ranks differ", rand((2, 1, 16, 32), np.float64, 29), rand((8, 32, 513), np.float64, 30), {}
    yield "float16", x.astype(np.float16), y.astype(np.float16), {}
    yield "alpha", x, y, {"alpha": 2.0}
    yield "epilogue", x, y, {"epilogue": "gelu"}
    yield "execution", x, y, {"execution": "cpu"}


@pytest.mark.parametrize("name, a, b, kwargs", list(batched_ineligible()),
                         ids=[case[0] for case in batched_ineligible()])
def test_other_batched_calls_take_the_planned_route(name, a, b, kwargs, routes):
    got = la.matmul(a, b, **kwargs)
    assert len(routes) == 1
    want = kwargs.get("alpha", 1.0) * np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    if name == "epilogue":  # GELU, tanh form
        want = 0.5 * want * (1 + np.tanh(np.sqrt(2 / np.pi) * (want + 0.044715 * want**3)))
    assert got.shape == want.shape and got.dtype == a.dtype
    assert np.linalg.norm(got - want) <= (1e-2 if name == "float16" else 1e-12) * np.linalg.norm(want)


# -- batches of tiny matrices, more than TINY_FLOPS in all ------------------------------------------

LARGE_BATCHES = [((20000, 3, 3), (20000, 3, 3)), ((1000, 8, 8), (8, 8)), ((2, 1, 16, 16), (8, 16, 16)),
                 ((7, 64, 64), (64, 64)), ((1, 9, 5), (10000, 5, 7))]


LARGE_CASES = [(dtype, shapes) for dtype in (np.float32, np.float64, np.complex64, np.complex128)
               for shapes in LARGE_BATCHES
               if shapes[0][-2] * shapes[0][-1] * shapes[1][-1] <= _tiny.per_matrix_bound(np.dtype(dtype))]


@pytest.mark.parametrize("dtype, shapes", LARGE_CASES, ids=str)
def test_large_batches_of_tiny_matrices_take_the_compiled_kernel(dtype, shapes, no_plan, monkeypatch):
    x, y = rand(shapes[0], dtype, 31), rand(shapes[1], dtype, 32)
    a, b = LAYOUTS["batch-step"](x), y
    assert _tiny.tiny_flops(a, b) > TINY_FLOPS
    kernel = _tiny.compiled_matmul()
    calls = []
    monkeypatch.setattr(_tiny, "_compiled", lambda p, q: calls.append(1) or kernel(p, q))
    got = la.matmul(a, b)  # the direct route (no_plan refuses the planned one)
    assert calls and matmul_plan.plan_cache_info() == no_plan
    ref = x.astype(np.complex128) @ y.astype(np.complex128)
    tol = 4e-6 if dtype in (np.float32, np.complex64) else 2e-14
    assert got.dtype == dtype and got.flags.c_contiguous and got.shape == ref.shape
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref) * shapes[0][-1]
    monkeypatch.undo()
    with la.Matmul(a, b) as mm:  # the plan takes the same call
        mm.plan()
        assert mm.candidate.label == "dot"
        assert_same(mm.execute(), got, a, b)


def test_large_batches_take_the_planned_route_without_the_kernel(routes, monkeypatch):
    monkeypatch.setattr(_tiny, "_compiled", None)
    monkeypatch.setattr(TINY_EXTENSION, "get", lambda wait=False: None)
    a, b = rand((20000, 3, 3), np.float64, 33), rand((20000, 3, 3), np.float64, 34)
    got = la.matmul(a, b)
    assert len(routes) == 1 and np.allclose(got, a @ b, rtol=1e-14, atol=1e-14)
    with la.Matmul(a, b) as mm:
        mm.plan()
        assert mm.candidate.label == "matmul"
