"""``solve`` and ``inv`` of a matrix detected symmetric or Hermitian, as SciPy 1.17 does them:
Cholesky first (``?potrf``), the symmetric/Hermitian solver (``solve``) or the LU (``inv``)
where the matrix is not positive definite; ``assume_a="pos"`` without that fall-back; the
compiled extension's ``solve_pos``/``inv_pos``/``structure`` against the Python paths; and the
free-cores threshold of ``solve`` by ``assume_a``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scipy_linalg_fast import FAST, _fallback, needs_fast
from test_solvers_helpers import DTYPES, rand, relerr, tol, wide

import nvmathpy.scipy.linalg as nla
from nvmathpy.linalg.lapack import FREE_CORES_FROM, LU_FREE_CORES_FROM
from nvmathpy.scipy.linalg import _solve, _structured

ORDERS = (2, 5, 13, 64, 131)


def hermitian(rng: np.random.Generator, n: int, dtype, definite: bool) -> np.ndarray:
    """An exactly Hermitian (real: symmetric) matrix, positive definite or not (shifted by twice
    its mean eigenvalue: its smallest eigenvalue is then negative)."""
    x = rand(rng, (n, n), dtype)
    a = x @ x.conj().T + n * np.eye(n)
    if not definite:
        a = a - 2 * np.trace(a).real / n * np.eye(n)
    return ((a + a.conj().T) / 2).astype(dtype)


class Spy:
    """Wraps a function of the compiled extension, recording whether its calls found a positive
    definite matrix (their result's first item is not ``None``)."""

    def __init__(self, fn):
        self.fn, self.found = fn, []

    def __call__(self, *args):
        out = self.fn(*args)
        if out is not NotImplemented:
            self.found.append(out[0] is not None)
        return out


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("definite", [True, False])
def test_solve_detected_hermitian_tries_cholesky_first(dtype, n, layout, definite, monkeypatch):
    rng = np.random.default_rng(n)
    a = np.asarray(hermitian(rng, n, dtype, definite), order=layout)
    b = rand(rng, (n, 3), dtype)
    a_copy, b_copy = a.copy(), b.copy()
    spy = Spy(FAST.solve_pos)
    monkeypatch.setattr(FAST, "solve_pos", spy)
    x = nla.solve(a, b)
    assert spy.found == [definite]  # one Cholesky attempt; the symmetric solver after a failed one
    assert x.dtype == np.dtype(dtype)
    assert relerr(x, sla.solve(wide(a), wide(b))) < tol(dtype, n) * 100
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(b, b_copy)
    with monkeypatch.context() as m:
        _fallback(m)  # the Python path: the same LAPACK calls
        assert relerr(nla.solve(a, b), x) < tol(dtype, n)


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("definite", [True, False])
def test_inv_detected_hermitian_tries_cholesky_first(dtype, n, layout, definite, monkeypatch):
    rng = np.random.default_rng(n + 1)
    a = np.asarray(hermitian(rng, n, dtype, definite), order=layout)
    a_copy = a.copy()
    spy = Spy(FAST.inv_pos)
    monkeypatch.setattr(FAST, "inv_pos", spy)
    x = nla.inv(a)
    assert spy.found == [definite]
    assert x.dtype == np.dtype(dtype)
    assert relerr(x, sla.inv(wide(a))) < tol(dtype, n) * 100
    if definite:  # potri's triangle and its mirror
        np.testing.assert_array_equal(x, x.conj().T)
    np.testing.assert_array_equal(a, a_copy)
    with monkeypatch.context() as m:
        _fallback(m)
        assert relerr(nla.inv(a), x) < tol(dtype, n) * 10


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_assume_pos_reads_one_triangle_and_has_no_fall_back(dtype, lower):
    """``assume_a="pos"`` factors the ``lower`` (else upper) triangle through the compiled calls,
    and a matrix that is not positive definite is an error, not a fall-back."""
    rng = np.random.default_rng(3)
    n = 9
    a = hermitian(rng, n, dtype, True)
    b = rand(rng, (n,), dtype)
    half = np.tril(a) if lower else np.triu(a)
    x = nla.solve(half, b, assume_a="pos", lower=lower)
    assert relerr(x, sla.solve(wide(a), wide(b))) < tol(dtype, n) * 100
    assert relerr(nla.inv(half, assume_a="pos", lower=lower), sla.inv(wide(a))) < tol(dtype, n) * 100
    indefinite = hermitian(rng, n, dtype, False)
    with pytest.raises(np.linalg.LinAlgError):
        nla.solve(indefinite, b, assume_a="pos")
    with pytest.raises(np.linalg.LinAlgError):
        nla.inv(indefinite, assume_a="pos")


@pytest.mark.parametrize("definite", [True, False])
def test_overwrite_a_of_a_detected_symmetric_matrix(definite):
    """In place as SciPy where the matrix is positive definite (``a`` then holds the factor, the
    result is ``b``); where it is not, ``a`` is restored before the symmetric solver runs on it
    (SciPy 1.17.1 crashes with a segmentation fault on this call)."""
    rng = np.random.default_rng(4)
    n = 7
    m = hermitian(rng, n, np.float64, definite)
    b = rand(rng, (n,), np.float64)
    a, rhs = np.asfortranarray(m), b.copy()
    x = nla.solve(a, rhs, overwrite_a=True, overwrite_b=True)
    assert relerr(m @ x, b) < 1e-12
    assert np.shares_memory(x, rhs)
    assert not np.array_equal(a, m)  # factored in place
    a = np.asfortranarray(m)
    inverse = nla.inv(a, overwrite_a=True)
    assert inverse is a or np.shares_memory(inverse, a)
    assert relerr(m @ inverse, np.eye(n)) < 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("assume_a", [None, "pos"])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_check_finite_on_symmetric_input(dtype, assume_a, bad):
    a = hermitian(np.random.default_rng(5), 6, dtype, True)
    a[1, 3] = a[3, 1] = bad  # symmetric (an infinity equals itself)
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.solve(a, np.ones(6, dtype), assume_a=assume_a)
    with pytest.raises(ValueError, match="infs or NaNs"):
        nla.inv(a, assume_a=assume_a)


def test_batches_mix_definite_and_indefinite_slices():
    rng = np.random.default_rng(6)
    a = np.stack([hermitian(rng, 8, np.float64, definite) for definite in (True, False, True)])
    b = rand(rng, (3, 8, 2), np.float64)
    assert relerr(nla.solve(a, b), sla.solve(a, b)) < 1e-12
    assert relerr(nla.inv(a), sla.inv(a)) < 1e-12


def _python_detect(a: np.ndarray) -> str:
    """:func:`_structured.detect` without the compiled call (the Python comparisons up to order
    12, SciPy's ``bandwidth``/``issymmetric`` above)."""
    _structured.COMPILED_DETECT = False
    try:
        return _structured.detect(a)
    finally:
        _structured.COMPILED_DETECT = True


@needs_fast
@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 40), dtype=st.sampled_from(DTYPES), shape=st.sampled_from(
    ("full", "lower", "upper", "tridiagonal", "diagonal", "symmetric", "hermitian")),
    order=st.sampled_from("CFT"), poison=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_compiled_structure_is_scipys_detection(n, dtype, shape, order, poison, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, (n, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.integers(-1, 2, (n, n))
    a = {"full": a, "lower": np.tril(a), "upper": np.triu(a), "tridiagonal": np.triu(np.tril(a, 1), -1),
         "diagonal": np.diag(np.diag(a)), "symmetric": a + a.T, "hermitian": a + a.conj().T}[shape].astype(dtype)
    if poison:
        a[rng.integers(n), rng.integers(n)] = np.nan
    a = a.T if order == "T" else np.asarray(a, order=order)
    assert FAST.structure(a) == _python_detect(a)


def test_solve_looks_at_free_cores_by_its_routine():
    """``assume_a="pos"`` runs ``?potrf``, which OpenBLAS threads from order 128: the Cholesky
    family's threshold; every other structure the LU family's (keyword or positional)."""
    a = np.eye(2)
    assert _solve.solve_free_cores_from((a, a), {"assume_a": "pos"}) == FREE_CORES_FROM
    assert _solve.solve_free_cores_from((a, a), {"assume_a": "positive definite"}) == FREE_CORES_FROM
    assert _solve.solve_free_cores_from((a, a, False, False, False, True, "pos"), {}) == FREE_CORES_FROM
    for assume_a in (None, "gen", "sym", "banded", ["pos"]):
        assert _solve.solve_free_cores_from((a, a), {"assume_a": assume_a}) == LU_FREE_CORES_FROM
    assert _solve.solve_free_cores_from((a, a), {}) == LU_FREE_CORES_FROM


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_solve_without_assume_a_looks_from_the_cholesky_threshold_at_a_hermitian_matrix(dtype):
    """Without ``assume_a`` a Hermitian matrix is factored by Cholesky first (``?potrf``,
    threaded from order 128), so between the two thresholds a matrix that looks Hermitian
    (its mirrored corner entries agree) takes the Cholesky family's; others, and orders outside
    that window (where the two thresholds agree or no routine threads), the LU family's."""
    rng = np.random.default_rng(5)
    order = math.isqrt(FREE_CORES_FROM) + 2
    x = rng.standard_normal((order, order)).astype(dtype)
    if dtype == np.complex128:
        x = x + 1j * rng.standard_normal((order, order))
    spd = x @ x.conj().T + order * np.eye(order)
    spd = (spd + spd.conj().T) / 2  # (a complex product's mirrored entries may differ in the last bit)
    assert _solve.solve_free_cores_from((spd, spd[:, 0]), {}) == FREE_CORES_FROM
    assert _solve.solve_free_cores_from((), {"a": spd, "b": spd[:, 0], "assume_a": None}) == FREE_CORES_FROM
    assert _solve.solve_free_cores_from((x, x[:, 0]), {}) == LU_FREE_CORES_FROM  # not Hermitian
    big = np.eye(math.isqrt(LU_FREE_CORES_FROM) + 1, dtype=dtype)
    assert _solve.solve_free_cores_from((big, big), {}) == LU_FREE_CORES_FROM  # the thresholds agree beyond
    assert _solve.solve_free_cores_from((spd[None], spd[None, :, :1]), {}) == LU_FREE_CORES_FROM  # a batch


def _matrix_of(rng: np.random.Generator, n: int, dtype, structure: str) -> np.ndarray:
    """A well-conditioned matrix of ``structure`` (as :func:`_structured.detect` names them), or
    a general one whose named triangle is (for ``assume_a="sym"``/``"her"``)."""
    g = rand(rng, (n, n), dtype) + 3 * n * np.eye(n, dtype=dtype)
    return {"gen": g, "upper": np.triu(g), "lower": np.tril(g), "sym": g + g.T,
            "her": (g + g.conj().T) / 2}[structure].astype(dtype)


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 3, 17, 70))
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("case", [("gen", None), ("upper", None), ("lower", None), ("sym", None), ("her", None),
                                  ("gen", "sym"), ("gen", "her"), ("upper", "upper triangular"),
                                  ("lower", "lower triangular")])
@pytest.mark.parametrize("lower", [False, True])
def test_compiled_inverses_and_symmetric_solves(dtype, n, layout, case, lower, monkeypatch):
    """``inv`` (``inv_gen``, ``inv_tri``, ``inv_sym``; ``inv_pos`` above) and ``solve`` with
    ``assume_a="sym"``/``"her"`` (``solve_sym``) against SciPy and against the Python paths;
    a detected complex symmetric matrix is not Hermitian (no Cholesky attempt)."""
    structure, assume_a = case  # (a real "her" matrix is symmetric: detected "sym")
    rng = np.random.default_rng(n * 7 + len(structure))
    a = np.asarray(_matrix_of(rng, n, dtype, structure), order=layout)
    b = rand(rng, (n, 2), dtype)
    a_copy = a.copy()
    x = nla.inv(a, assume_a=assume_a, lower=lower)
    assert x.dtype == np.dtype(dtype) and x.shape == (n, n)
    assert relerr(x, sla.inv(wide(a), assume_a=assume_a, lower=lower)) < tol(dtype, n) * 100
    if assume_a in ("sym", "her") or structure in ("sym", "her"):
        y = nla.solve(a, b, assume_a=assume_a, lower=lower)
        assert relerr(y, sla.solve(wide(a), wide(b), assume_a=assume_a, lower=lower)) < tol(dtype, n) * 100
    np.testing.assert_array_equal(a, a_copy)
    with monkeypatch.context() as m:
        _fallback(m)
        assert relerr(nla.inv(a, assume_a=assume_a, lower=lower), x) < tol(dtype, n) * 100


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [("gen", None), ("upper", None), ("gen", "sym"), ("gen", "her"), ("sym", None)])
def test_compiled_paths_report_singular_matrices(dtype, case):
    structure, assume_a = case
    a = _matrix_of(np.random.default_rng(8), 5, dtype, structure)
    a[2, :] = 0
    a[:, 2] = 0  # singular, and still of its structure
    with pytest.raises(np.linalg.LinAlgError):
        nla.inv(a, assume_a=assume_a)
    if structure != "upper":
        with pytest.raises(np.linalg.LinAlgError):
            nla.solve(a, np.ones(5, dtype), assume_a=assume_a)
