"""The compiled tiny-product kernel (``nvmathpy.linalg.gemm.cpu._tiny_c``): ``numpy.matmul``'s
results up to rounding for float32/float64 matrices (and complex ones up to its bound) of any
layout, batch and broadcast, the
caller's arrays untouched; ``NotImplemented`` for everything it does not take; and the routes
that use it (the one-call ``matmul`` and a plan's ``"dot"`` candidate) fall back to NumPy's
calls where it is not built."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nvmathpy.linalg as la
from nvmathpy.kernels.background_build import BackgroundExtension
from nvmathpy.linalg.gemm import _tiny
from nvmathpy.linalg.gemm.cpu._tiny_c import COMPLEX_TINY, TINY_EXTENSION

MODULE = TINY_EXTENSION.get(wait=True)
pytestmark = pytest.mark.skipif(MODULE is None, reason="no C compiler or Python headers: the kernel cannot be built")
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-14, np.complex64: 4e-6, np.complex128: 2e-14}


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def relative_error(got, a, b):
    ref = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    scale = np.linalg.norm(np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    return np.linalg.norm(got - ref) / scale if scale else np.linalg.norm(got - ref)


def layout(x, kind, seed):
    """``x``'s values in another memory layout (a view into a larger array)."""
    if kind == "C" or x.ndim < 2:
        return x
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "matrix-T":
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    wide = rand(tuple(2 * s + 1 for s in x.shape), x.dtype, seed)  # fresh values around the view
    if kind == "strided":
        view = wide[tuple(slice(1, None, 2) for _ in x.shape)]
    else:  # "reversed": negative strides in every axis
        view = wide[tuple(slice(None, s) for s in x.shape)][tuple(slice(None, None, -1) for _ in x.shape)]
    view[...] = x
    return view


@settings(max_examples=200, deadline=None)
@given(batch=st.sampled_from([(), (1,), (3,), (2, 3)]), m=st.integers(0, 23), k=st.integers(0, 23),
       n=st.integers(0, 41), b_batched=st.sampled_from(["same", "none", "broadcast"]),
       dtype=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
       layouts=st.tuples(*[st.sampled_from(["C", "F", "matrix-T", "strided", "reversed"])] * 2),
       seed=st.integers(0, 2**16))
def test_kernel_gives_numpys_product(batch, m, k, n, b_batched, dtype, layouts, seed):
    b_batch = {"same": batch, "none": (), "broadcast": tuple(1 for _ in batch)}[b_batched]
    x, y = rand(batch + (m, k), dtype, seed), rand(b_batch + (k, n), dtype, seed + 1)
    a, b = layout(x, layouts[0], seed + 2), layout(y, layouts[1], seed + 3)
    before = a.copy(), b.copy()
    got = MODULE.matmul(a, b)
    if np.dtype(dtype).kind == "c" and m * k * n > COMPLEX_TINY:
        assert got is NotImplemented
        return
    want = np.matmul(a, b)
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    assert got.flags.c_contiguous and got.flags.writeable and got.flags.owndata
    assert relative_error(got, a, b) <= TOLERANCE[dtype] * max(1, k)
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 1, 5, 7), (1, 4, 7, 2)), ((2, 1, 4, 4), (3, 4, 4)), ((5, 7), (3, 7, 2)), ((1, 8, 8), (2, 3, 8, 8)),
    ((2, 64, 64), (64, 64)), ((97, 3, 3), (97, 3, 3)), ((1, 61), (61, 67)), ((0, 4, 4), (4, 4)), ((3, 4, 0), (0, 5)),
    ((5, 16, 16), (16, 16)), ((3, 1, 16, 13), (2, 13, 19)),
], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_kernel_broadcasts_batches_as_numpy(a_shape, b_shape, dtype):
    a, b = rand(a_shape, dtype, 1), rand(b_shape, dtype, 2)
    got = MODULE.matmul(a, b)
    if np.dtype(dtype).kind == "c" and a_shape[-2] * a_shape[-1] * b_shape[-1] > COMPLEX_TINY:
        assert got is NotImplemented
        return
    assert got.shape == np.matmul(a, b).shape
    assert relative_error(got, a, b) <= TOLERANCE[dtype] * max(1, a_shape[-1])


def test_kernel_propagates_nan_and_infinity():
    a, b = rand((3, 4, 4), np.float64, 3), rand((4, 5), np.float64, 4)
    a[1, 2, 3], b[0, 1] = np.nan, np.inf
    got, want = MODULE.matmul(a, b), np.matmul(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))


def test_long_calls_release_the_gil_and_stay_right_beside_other_threads():
    a, b = rand((30000, 4, 4), np.float64, 9), rand((30000, 4, 4), np.float64, 10)
    want = MODULE.matmul(a, b)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: MODULE.matmul(a, b), range(8)))
    assert all(np.array_equal(got, want) for got in results)
    assert relative_error(want, a, b) <= 1e-14 * 4


def unaligned(x):
    raw = np.zeros(x.nbytes + x.itemsize, np.uint8)[1:1 + x.nbytes]
    out = raw.view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


class Sub(np.ndarray):
    pass


@pytest.mark.parametrize("name, a, b", [
    ("complex beyond its bound", rand((2, 17, 17), np.complex128, 5), rand((17, 17), np.complex128, 6)),
    ("mixed dtypes", rand((2, 3, 3), np.float32, 5), rand((3, 3), np.float64, 6)),
    ("integers", np.ones((2, 3, 3), np.int64), np.ones((3, 3), np.int64)),
    ("float16", np.ones((2, 3, 3), np.float16), np.ones((3, 3), np.float16)),
    ("byte-swapped", rand((2, 3, 3), np.float64, 5).astype(">f8"), rand((3, 3), np.float64, 6).astype(">f8")),
    ("unaligned", unaligned(rand((2, 3, 3), np.float64, 5)), rand((3, 3), np.float64, 6)),
    ("stride not a whole element", np.lib.stride_tricks.as_strided(np.ones(8, np.float32), (2, 2), (6, 4)),
     np.ones((2, 2), np.float32)),
    ("1-D", rand((3,), np.float64, 5), rand((3, 3), np.float64, 6)),
    ("inner dimensions differ", rand((2, 3, 4), np.float64, 5), rand((3, 3), np.float64, 6)),
    ("batches do not broadcast", rand((2, 3, 3), np.float64, 5), rand((3, 3, 3), np.float64, 6)),
    ("subclass", rand((2, 3, 3), np.float64, 5).view(Sub), rand((3, 3), np.float64, 6)),
    ("list", [[1.0]], np.ones((1, 1))),
], ids=lambda case: case if isinstance(case, str) else "")
def test_kernel_declines_what_it_does_not_take(name, a, b):
    assert MODULE.matmul(a, b) is NotImplemented
    assert MODULE.matmul(b, a) is NotImplemented or name in ("1-D", "inner dimensions differ")


@pytest.mark.parametrize("shapes", [((4, 8, 8), (8, 8)), ((4, 8, 8), (4, 8, 8)), ((5, 7), (7, 3)), ((2, 1, 3, 3), (4, 3, 3))],
                         ids=str)
def test_routes_use_the_kernel_and_numpy_without_it(shapes, monkeypatch):
    a, b = rand(shapes[0], np.float64, 7), rand(shapes[1], np.float64, 8)
    calls = []

    def spy(x, y):
        calls.append(1)
        return MODULE.matmul(x, y)

    monkeypatch.setattr(_tiny, "_compiled", spy)
    got = la.matmul(a, b)
    with la.Matmul(a, b) as mm:
        mm.plan()
        planned = mm.execute()
    assert len(calls) >= 2 and np.array_equal(got, MODULE.matmul(a, b)) and np.array_equal(planned, got)
    monkeypatch.setattr(_tiny, "_compiled", None)
    monkeypatch.setattr(TINY_EXTENSION, "get", lambda wait=False: None)  # not built (yet, or ever)
    without = la.matmul(a, b)
    with la.Matmul(a, b) as mm:
        mm.plan()
        assert np.array_equal(mm.execute(), without)
    assert without.flags.c_contiguous and relative_error(without, a, b) <= 1e-14 * a.shape[-1]


def test_background_extension_answers_none_until_built_and_for_good_when_it_cannot_be(tmp_path, monkeypatch):
    source = ("#include <Python.h>\n"
              "static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};\n"
              "static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, \"bg_probe\", NULL, -1, methods};\n"
              "PyMODINIT_FUNC PyInit_bg_probe(void) { return PyModule_Create(&def); }\n")
    set_up = []
    extension = BackgroundExtension("bg_probe", source, set_up.append)
    first = extension.get()  # not in this test's fresh cache: the build starts, the answer is None
    assert first is None
    module = extension.get(wait=True)
    assert module is not None and set_up == [module] and extension.get() is module
    failing = BackgroundExtension("bg_probe", source, lambda module: 1 / 0)
    assert failing.get(wait=True) is None and failing.get() is None  # a failed set-up: unavailable for good
    extension.reset()
    monkeypatch.setenv("NVMATHPY_CPU_JIT", "off")
    assert extension.get(wait=True) is None
