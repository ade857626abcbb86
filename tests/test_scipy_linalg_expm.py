"""nvmathpy.scipy.linalg's expm: SciPy 1.17's results (per-dtype tolerances: the same algorithm,
degree and scaling choices and GEMMs, rounding apart), dtypes, shapes and errors, on norms that
select each Padé degree and on large ones that need squaring; general, triangular and diagonal
matrices; odd and prime orders, C/F/strided/transposed/reversed inputs, batches; closed forms in
float64 as references independent of SciPy; the compiled path checked to run."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import nvmathpy.scipy.linalg as nsl
from nvmathpy.linalg.lapack import fast_module
from nvmathpy.scipy.linalg import _expm
from numerics import layouts, rand, rel

DTYPES = ("float32", "float64", "complex64", "complex128")
#: Relative-norm agreement with SciPy: single precision, and double precision where the matrix
#: is well scaled (squaring amplifies rounding differences by the problem's conditioning).
TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-13, "complex128": 1e-13}
#: 1-norms of the test matrices: Padé degrees 3, 5, 7, 9 and 13 without squaring, then
#: degree 13 with 1, 3 and 6 squarings.
NORMS = (0.01, 0.2, 0.9, 2.0, 4.0, 8.0, 30.0, 200.0)
SIZES = (2, 3, 5, 7, 13, 31)


@pytest.fixture(scope="module", autouse=True)
def compiled():
    fast = fast_module(wait=True)
    if fast is None:
        pytest.skip("no compiled extension here (no C compiler); expm is SciPy's own")
    return fast


def _matrix(rng, n, dtype, norm, structure="general"):
    a = rand(rng, (n, n), dtype)
    if structure == "upper":
        a = np.triu(a)
    elif structure == "lower":
        a = np.tril(a)
    return (a * (norm / np.abs(a).sum(axis=0).max())).astype(dtype)


def _tolerance(dtype, norm):
    return TOL[dtype] * (1 if norm <= 4 else 10 * norm)


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 (compared with SciPy's)
        return type(exc), str(exc)


def test_norms_select_every_pade_degree_and_squaring():
    """The test norms reach each of SciPy's degree choices (its own selection, on a 7 x 7 matrix)."""
    pick = pytest.importorskip("scipy.linalg._matfuncs_expm").pick_pade_structure
    rng = np.random.default_rng(0)
    chosen = set()
    for norm in NORMS:
        work = np.empty((5, 7, 7))
        work[0] = _matrix(rng, 7, "float64", norm)
        chosen.add(pick(work))
    assert {m for m, _ in chosen} == {3, 5, 7, 9, 13}
    assert max(s for _, s in chosen) >= 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("norm", NORMS)
def test_general_matrices_match_scipy(compiled, dtype, n, norm):
    rng = np.random.default_rng(n * 100 + int(norm * 10))
    a = _matrix(rng, n, dtype, norm)
    want = sla.expm(a)
    got = compiled.expm(a)
    assert got is not NotImplemented and got.dtype == want.dtype and got.shape == want.shape
    assert rel(got, want) <= _tolerance(dtype, norm)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("structure", ("upper", "lower"))
@pytest.mark.parametrize("n", (2, 3, 8, 17))
@pytest.mark.parametrize("norm", (0.1, 3.0, 40.0))
def test_triangular_matrices_match_scipy_and_stay_triangular(compiled, dtype, structure, n, norm):
    rng = np.random.default_rng(n + int(norm))
    a = _matrix(rng, n, dtype, norm, structure)
    want, got = sla.expm(a), nsl.expm(a)
    assert got.dtype == want.dtype
    assert rel(got, want) <= _tolerance(dtype, norm)
    other = np.tril(got, -1) if structure == "upper" else np.triu(got, 1)
    assert not other.any()
    exact = np.exp(np.diag(a).astype(np.complex128))
    assert rel(np.diag(got), exact) <= 10 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ("C", "F", "strided", "transposed", "reversed"))
def test_layouts_give_the_c_ordered_results(dtype, layout):
    rng = np.random.default_rng(3)
    a = _matrix(rng, 11, dtype, 5.0)
    cases = layouts(a, transposed=True)
    cases["reversed"] = np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1]
    x = cases[layout]
    before = x.copy()
    got = nsl.expm(x)
    assert np.array_equal(x, before)
    assert got.flags.c_contiguous
    assert rel(got, sla.expm(a)) <= _tolerance(dtype, 5.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batches_mix_general_triangular_and_diagonal_slices(dtype):
    rng = np.random.default_rng(4)
    slices = [_matrix(rng, 6, dtype, 3.0), _matrix(rng, 6, dtype, 0.05, "upper"),
              np.diag(rand(rng, 6, dtype)), np.zeros((6, 6), dtype), _matrix(rng, 6, dtype, 60.0, "lower"),
              _matrix(rng, 6, dtype, 60.0)]
    a = np.stack(slices).reshape(3, 2, 6, 6).transpose(1, 0, 2, 3)
    got = nsl.expm(a)
    assert got.shape == a.shape and got.dtype == a.dtype
    for index in np.ndindex(a.shape[:2]):
        assert rel(got[index], sla.expm(a[index])) <= _tolerance(dtype, 60.0)
    assert np.array_equal(got[1, 1], np.eye(6))  # the zero slice


@pytest.mark.parametrize("dtype", DTYPES)
def test_orders_from_400_use_the_norm_estimate(compiled, dtype):
    rng = np.random.default_rng(5)
    for norm in (1.5, 3.0, 50.0):
        a = _matrix(rng, 401, dtype, norm)
        assert rel(compiled.expm(a), sla.expm(a)) <= _tolerance(dtype, norm)


@pytest.mark.parametrize("t", (0.3, 2.0, 25.0))
def test_closed_forms(t):
    rotation = nsl.expm(np.array([[0.0, -t], [t, 0.0]]))
    assert rel(rotation, [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) <= 1e-14 * max(1.0, t)
    jordan = nsl.expm(np.array([[t, 1.0, 0.0], [0.0, t, 1.0], [0.0, 0.0, t]]))
    assert rel(jordan, np.exp(t) * np.array([[1.0, 1.0, 0.5], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])) <= 1e-14 * max(1.0, t)
    nilpotent = nsl.expm(np.array([[0.0, t], [0.0, 0.0]]))
    assert np.array_equal(nilpotent, [[1.0, t], [0.0, 1.0]])


@pytest.mark.parametrize("x", [
    np.arange(9).reshape(3, 3) % 4, np.array([[True, False], [True, True]]), np.arange(8).reshape(2, 2, 2),
    (np.arange(9).reshape(3, 3) / 7).astype(np.float16), np.zeros((2, 0, 0)), np.zeros((0, 3, 3), np.complex64),
    np.array(2.0), np.array([1.5]), np.ones((3, 1, 1), np.float32), np.eye(3), np.zeros((4, 4)),
    np.array([[np.nan, 1.0], [0.0, 1.0]]), np.array([[np.inf, 1.0], [2.0, 1.0]]), [[1.0, 2.0], [3.0, 4.0]],
])
def test_edge_cases_and_casts_are_scipys(x):
    want, got = sla.expm(x), nsl.expm(x)
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("x", [np.ones(3), np.ones((2, 3)), np.ones((4, 2, 3)), np.ones(0)])
def test_errors_are_scipys(x):
    want = _outcome(sla.expm, x)
    assert isinstance(want, tuple)
    assert _outcome(nsl.expm, x) == want


def test_without_the_compiled_extension_it_is_scipys(monkeypatch):
    monkeypatch.setattr(_expm, "fast_module", lambda: None)
    a = _matrix(np.random.default_rng(6), 5, "float64", 3.0)
    assert np.array_equal(nsl.expm(a), sla.expm(a))


class _FakeCudaArray:
    """Stands for a CuPy array: a DLPack producer on a CUDA device."""

    def __dlpack_device__(self):
        return (2, 0)


def test_cuda_operands_are_refused_by_name():
    with pytest.raises(TypeError, match=r"^expm: CUDA operands .*x\.get\(\)"):
        nsl.expm(_FakeCudaArray())
    assert "expm" in nsl.__all__


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), n=st.integers(2, 9), dtype=st.sampled_from(DTYPES),
       log_norm=st.floats(-3, 1.8), structure=st.sampled_from(("general", "general", "upper", "lower")),
       seed=st.integers(0, 2**32 - 1))
def test_hypothesis_random_stacks_match_scipy(batch, n, dtype, log_norm, structure, seed):
    """1-norms up to 10**1.8, whose exponentials float32 holds."""
    rng = np.random.default_rng(seed)
    norm = 10.0**log_norm
    a = np.stack([_matrix(rng, n, dtype, norm, structure) for _ in range(int(np.prod(batch)))])
    a = a.reshape(*batch, n, n)
    want, got = sla.expm(a), nsl.expm(a)
    assert got.dtype == want.dtype and got.shape == want.shape
    if rel(got, want) > _tolerance(dtype, norm):  # then at least as close to the exact exponential as SciPy's
        exact = _exact_expm(a)
        assert rel(got, exact) <= max(rel(want, exact), _tolerance(dtype, norm))


def _exact_expm(a):
    """The exponential of each matrix of ``a`` to 40 significant digits (mpmath), rounded to
    complex128 or float64."""
    import mpmath

    out = np.empty(a.shape, np.complex128 if a.dtype.kind == "c" else np.float64)
    with mpmath.workdps(40):
        for index in np.ndindex(a.shape[:-2]):
            exp = mpmath.expm(mpmath.matrix(a[index].astype(out.dtype).tolist()))
            values = np.array(exp.tolist(), dtype=complex)
            out[index] = values if out.dtype.kind == "c" else values.real
    return out
