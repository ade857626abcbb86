"""The compiled small-matrix paths of nvmathpy.scipy.linalg (``linalg/solvers/cpu/_fast_lapack.py``):
``cho_solve``, ``lu_solve`` and general ``solve`` agree with SciPy and with the Python fallback, keep
SciPy's errors and warnings, leave inputs alone, decline what they do not handle; and
``cpu_jit.compile_extension`` caches its builds."""

from __future__ import annotations

import uuid
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from test_scipy_linalg import _agree
from test_solvers_helpers import DTYPES, rand, relerr, spd, tol, well, wide

import nvmathpy.scipy.linalg as nla
from nvmathpy.errors import MissingDependencyError
from nvmathpy.kernels import cpu_jit
from nvmathpy.linalg.solvers.cpu import _fast_lapack as _fast
from nvmathpy.scipy.linalg import _decomp, _solve

FAST = _fast.fast_module(wait=True)
needs_fast = pytest.mark.skipif(FAST is None, reason="the compiled extension cannot be built here")

SIZES = (1, 2, 4, 7, 16)
B_LAYOUTS = ("1d", "C", "F", "strided")


def _fallback(monkeypatch):
    for module in (_fast, _decomp, _solve):
        monkeypatch.setattr(module, "fast_module", lambda: None)


def _rhs(rng, n, dtype, layout):
    if layout == "1d":
        return rand(rng, (n,), dtype)
    b = rand(rng, (n, 3), dtype)
    if layout == "F":
        return np.asfortranarray(b)
    if layout == "strided":
        big = np.zeros((2 * n, 6), dtype)
        big[::2, ::2] = b
        return big[::2, ::2]
    return b


def _layout(a, layout):
    return np.asfortranarray(a) if layout == "F" else np.ascontiguousarray(a)


def _check(ours, ref, dtype, n):
    assert ours.shape == ref.shape and ours.dtype == np.dtype(dtype)
    assert relerr(ours, ref) < tol(dtype, n) * 10


def _cases():
    return [(dt, n, lay, bl) for dt in DTYPES for n in SIZES for lay in ("C", "F") for bl in B_LAYOUTS]


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [65, 131, 463])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_cho_solve_of_larger_orders_is_compiled_and_agrees(dtype, n, layout, monkeypatch):
    """Beyond the compiled lu_solve's orders, cho_solve stays one C call of SciPy's potrs (also
    from the order where the drop-in's routines may be calibrated, while potrs is SciPy's),
    with the result bits of the Python path."""
    rng = np.random.default_rng(n)
    a, b = spd(rng, n, dtype), rand(rng, (n, 3), dtype)
    for lower in (False, True):
        c = (_layout(nla.cho_factor(a, lower=lower)[0], layout), lower)
        assert FAST.cho_solve(c[0], b, lower, True) is not NotImplemented
        x = nla.cho_solve(c, b[:, 0])
        _check(x, sla.cho_solve((wide(c[0]), lower), wide(b[:, 0])), dtype, n)
        with monkeypatch.context() as m:
            _fallback(m)
            np.testing.assert_array_equal(x, nla.cho_solve(c, b[:, 0]))


@needs_fast
@pytest.mark.parametrize("dtype,n,layout,b_layout", _cases())
def test_cho_solve(dtype, n, layout, b_layout, monkeypatch):
    rng = np.random.default_rng(n)
    a = spd(rng, n, dtype)
    b = _rhs(rng, n, dtype, b_layout)
    for lower in (False, True):
        c = (_layout(sla.cho_factor(a, lower=lower)[0], layout), lower)
        c_copy, b_copy = c[0].copy(), b.copy()
        x = nla.cho_solve(c, b)
        np.testing.assert_array_equal(c[0], c_copy)
        np.testing.assert_array_equal(b, b_copy)
        if layout == "F":
            assert FAST.cho_solve(c[0], b, lower, True) is not NotImplemented
        _check(x, sla.cho_solve((wide(c[0]), lower), wide(b)), dtype, n)
        with monkeypatch.context() as m:
            _fallback(m)
            np.testing.assert_array_equal(x, nla.cho_solve(c, b))


@needs_fast
@pytest.mark.parametrize("dtype,n,layout,b_layout", _cases())
def test_lu_solve(dtype, n, layout, b_layout, monkeypatch):
    rng = np.random.default_rng(n + 100)
    a = well(rng, n, dtype)
    b = _rhs(rng, n, dtype, b_layout)
    lu, piv = sla.lu_factor(a)
    lu = _layout(lu, layout)
    lu_copy, piv_copy, b_copy = lu.copy(), piv.copy(), b.copy()
    for trans in (0, 1, 2):
        x = nla.lu_solve((lu, piv), b, trans=trans)
        if layout == "F" or n == 1:
            assert FAST.lu_solve(lu, piv, b, trans, True) is not NotImplemented
        _check(x, sla.lu_solve((wide(lu), piv), wide(b), trans=trans), dtype, n)
        with monkeypatch.context() as m:
            _fallback(m)
            np.testing.assert_array_equal(x, nla.lu_solve((lu, piv), b, trans=trans))
    np.testing.assert_array_equal(lu, lu_copy)
    np.testing.assert_array_equal(piv, piv_copy)
    np.testing.assert_array_equal(b, b_copy)


@needs_fast
@pytest.mark.parametrize("dtype,n,layout,b_layout", _cases())
def test_solve_general(dtype, n, layout, b_layout, monkeypatch):
    rng = np.random.default_rng(n + 200)
    a = _layout(well(rng, n, dtype), layout)
    b = _rhs(rng, n, dtype, b_layout)
    a_copy, b_copy = a.copy(), b.copy()
    for transposed in ((False, True) if np.dtype(dtype).kind == "f" else (False,)):
        for assume_a in (None, "gen"):
            x = nla.solve(a, b, transposed=transposed, assume_a=assume_a)
            _check(x, sla.solve(wide(a), wide(b), transposed=transposed), dtype, n)
            with monkeypatch.context() as m:
                _fallback(m)
                np.testing.assert_array_equal(x, nla.solve(a, b, transposed=transposed, assume_a=assume_a))
    assert FAST.solve_gen(a, b, False, True) is not NotImplemented
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(b, b_copy)


def _poison(x, where, value):
    y = x.copy()
    y.reshape(-1, order="A")[where] = value
    return y


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_check_finite(dtype, value):
    rng = np.random.default_rng(7)
    n = 5
    cf = np.asfortranarray(sla.cho_factor(spd(rng, n, dtype))[0])
    lu, piv = sla.lu_factor(well(rng, n, dtype))
    a = well(rng, n, dtype)
    b = rand(rng, (n, 2), dtype)
    calls = {
        "cho_c": (lambda c, bb: nla.cho_solve((c, False), bb, check_finite=ck), cf, b, "c"),
        "cho_b": (lambda c, bb: nla.cho_solve((c, False), bb, check_finite=ck), cf, b, "b"),
        "lu_b": (lambda c, bb: nla.lu_solve((c, piv), bb, check_finite=ck), lu, b, "b"),
        "solve_a": (lambda c, bb: nla.solve(c, bb, check_finite=ck), a, b, "a"),
        "solve_b": (lambda c, bb: nla.solve(c, bb, check_finite=ck), a, b, "b"),
    }
    for name, (call, m, rhs, target) in calls.items():
        for where in (0, -1):
            m2 = _poison(m, where, value) if target in "ca" else m
            b2 = _poison(rhs, where, value) if target == "b" else rhs
            ck = True
            with pytest.raises(ValueError, match="must not contain infs or NaNs"):
                call(m2, b2)
            b1 = _poison(rhs[:, 0], where, value) if target == "b" else rhs[:, 0]
            for bb in (b1, b2):  # 1-D too
                with pytest.raises(ValueError, match="must not contain infs or NaNs"):
                    call(m2, bb)
            ck = False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    call(m2, b2)
                except np.linalg.LinAlgError:  # NaN/Inf may look singular; never a ValueError
                    pass


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F"])
def test_solve_singular_and_ill_conditioned(dtype, layout):
    a = _layout(np.array([[1, 0, 2], [3, 0, 4], [5, 0, 6]], dtype), layout)
    b = np.ones(3, dtype)
    with pytest.raises(np.linalg.LinAlgError):
        sla.solve(a, b)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        nla.solve(a, b)
    assert FAST.solve_gen(a, b, False, True) == (None, 0.0)
    ill = _layout(np.array([[1, 2e-20], [3, 4e-20]], dtype), layout)
    with pytest.warns(sla.LinAlgWarning):
        sla.solve(ill, b[:2])
    with pytest.warns(sla.LinAlgWarning, match="ill-conditioned"):
        nla.solve(ill, b[:2])


@needs_fast
def test_declined_operands_use_the_fallback():
    rng = np.random.default_rng(3)
    # non-contiguous lu / c / a
    a = well(rng, 6, np.float64)
    lu, piv = sla.lu_factor(a)
    big = np.zeros((12, 12))
    big[::2, ::2] = lu
    lu_strided = big[::2, ::2]
    b = rand(rng, (6,), np.float64)
    assert FAST.lu_solve(lu_strided, piv, b, 0, True) is NotImplemented
    np.testing.assert_allclose(nla.lu_solve((lu_strided, piv), b), sla.lu_solve((lu, piv), b), rtol=1e-12)
    big[::2, ::2] = a
    assert FAST.solve_gen(big[::2, ::2], b, False, True) is NotImplemented
    np.testing.assert_allclose(nla.solve(big[::2, ::2], b), sla.solve(a, b), rtol=1e-12)
    # n = 65
    a65, s65 = well(rng, 65, np.float64), spd(rng, 65, np.float64)
    b65 = rand(rng, (65, 2), np.float64)
    c65 = sla.cho_factor(s65)
    lu65 = sla.lu_factor(a65)
    assert FAST.lu_solve(lu65[0], lu65[1], b65, 0, True) is NotImplemented
    assert FAST.solve_gen(a65, b65, False, True) is not NotImplemented  # solve_gen: up to LU_MAX_ORDER
    assert FAST.cho_solve(c65[0], b65, False, True) is not NotImplemented  # cho_solve too
    above = _fast.LU_MAX_ORDER + 1
    assert FAST.solve_gen(well(rng, above, np.float64), rand(rng, (above,), np.float64), False, True) \
        is NotImplemented
    s_above = spd(rng, above, np.float64)
    assert FAST.cho_solve(sla.cho_factor(s_above)[0], rand(rng, (above,), np.float64), False, True) \
        is NotImplemented
    assert FAST.cho_solve(np.ones((65, 64)), b65, False, True) is NotImplemented  # not square
    np.testing.assert_allclose(nla.cho_solve(c65, b65), sla.cho_solve(c65, b65), rtol=1e-10)
    np.testing.assert_allclose(nla.lu_solve(lu65, b65), sla.lu_solve(lu65, b65), rtol=1e-10)
    np.testing.assert_allclose(nla.solve(a65, b65), sla.solve(a65, b65), rtol=1e-10)
    # integer operands
    ai = np.array([[4, 1], [2, 3]])
    bi = np.array([1, 2])
    assert FAST.solve_gen(ai, bi, False, True) is NotImplemented
    np.testing.assert_allclose(nla.solve(ai, bi), sla.solve(ai, bi), rtol=1e-12)
    ci = np.asfortranarray(np.array([[2, 1], [0, 2]]))
    assert FAST.cho_solve(ci, bi, False, True) is NotImplemented
    np.testing.assert_allclose(nla.cho_solve((ci, False), bi), sla.cho_solve((ci, False), bi), rtol=1e-12)
    # 3-D b
    s = spd(rng, 3, np.float64)
    c = sla.cho_factor(s)
    b3 = rand(rng, (3, 2, 2), np.float64)
    assert FAST.cho_solve(c[0], b3, False, True) is NotImplemented
    _agree(lambda m: m.cho_solve(c, b3), np.float64, 3)
    lu3 = sla.lu_factor(well(rng, 3, np.float64))
    assert FAST.lu_solve(lu3[0], lu3[1], b3, 0, True) is NotImplemented
    _agree(lambda m: m.lu_solve(lu3, b3), np.float64, 3)
    # mixed dtypes, out-of-range pivots, other trans values, size 0
    assert FAST.cho_solve(c[0], b3[:, 0, 0].astype(np.float32), False, True) is NotImplemented
    assert FAST.lu_solve(lu3[0], np.array([5, 0, 0], np.int32), b3[:, 0, 0], 0, True) is NotImplemented
    assert FAST.lu_solve(lu3[0], lu3[1].astype(np.int64), b3[:, 0, 0], 0, True) is NotImplemented
    assert FAST.lu_solve(lu3[0], lu3[1], b3[:, 0, 0], "T", True) is NotImplemented
    assert FAST.lu_solve(lu3[0], lu3[1], b3[:, 0, 0], 3, True) is NotImplemented
    assert FAST.cho_solve(c[0], np.empty((3, 0)), False, True) is NotImplemented
    assert FAST.cho_solve(np.empty((0, 0), order="F"), np.empty(0), False, True) is NotImplemented
    assert FAST.cho_solve(c[0], b3[:, 0, 0].astype(">f8"), False, True) is NotImplemented
    assert FAST.solve_gen([[1.0]], [1.0], False, True) is NotImplemented
    assert FAST.cho_solve(c[0], b3[:, 0, 0]) is NotImplemented  # wrong argument count


def test_fast_module_none_without_compiler(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CPU_JIT", "off")
    with pytest.raises(MissingDependencyError):
        cpu_jit.compile_extension("nvm_never_built", "int f(void) { return 1; }")
    _fast.reset()
    try:
        assert _fast.fast_module(wait=True) is None
        rng = np.random.default_rng(1)
        a = well(rng, 4, np.float64)
        b = rand(rng, (4,), np.float64)
        np.testing.assert_allclose(nla.solve(a, b), sla.solve(a, b), rtol=1e-12)
    finally:
        _fast.reset()


def _extension_source(name: str, value: int) -> str:
    return (
        "#include <Python.h>\n"
        f"static PyObject *value(PyObject *self, PyObject *unused) {{ return PyLong_FromLong({value}); }}\n"
        "static PyMethodDef methods[] = {{\"value\", value, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};\n"
        f"static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, -1, methods}};\n"
        f"PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}\n"
    )


@needs_fast
def test_compile_extension_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))
    name = f"nvm_probe_{uuid.uuid4().hex[:12]}"
    source = _extension_source(name, 42)
    module = cpu_jit.compile_extension(name, source)
    assert module.value() == 42
    directory = tmp_path / "cpu_kernels"
    assert len(list(directory.glob("*.so"))) == 1 and not list(directory.glob("*.c"))
    assert cpu_jit.compile_extension(name, source) is module  # from memory
    # a corrupt entry on disk is rebuilt, not loaded
    name2 = f"nvm_probe_{uuid.uuid4().hex[:12]}"
    source2 = _extension_source(name2, 7)
    flags, extra = cpu_jit._extension_flags()
    key = cpu_jit._key(source2, cpu_jit._compiler(), flags + cpu_jit._EXTENSION_LIBS, (name2, *extra))
    (directory / f"{key}.so").write_bytes(b"not a library")
    assert cpu_jit.compile_extension(name2, source2).value() == 7
    assert (directory / f"{key}.so").read_bytes()[:4] == b"\x7fELF"


class _Counting:
    """The compiled module, counting the calls of its functions."""

    def __init__(self, module):
        self.module, self.calls = module, []

    def __getattr__(self, name):
        function = getattr(self.module, name)

        def counted(*args):
            self.calls.append(name)
            return function(*args)

        return counted


@needs_fast
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_the_plans_factored_solves_take_one_compiled_call(monkeypatch, dtype, order):
    from nvmathpy.linalg import LU, Cholesky
    from nvmathpy.linalg.solvers.cpu import _factored

    rng = np.random.default_rng(31)
    a = np.asarray(well(rng, 7, dtype), order=order)
    s = np.asarray(spd(rng, 7, dtype), order=order)
    b, bs = rand(rng, (7,), dtype), rand(rng, (7, 2), dtype)
    counting = _Counting(FAST)
    monkeypatch.setattr(_factored, "fast_module", lambda: counting)
    lu, ch = LU(a), Cholesky(s)
    compiled = [lu.solve(b), lu.solve(bs), ch.solve(b), ch.solve(bs)]
    assert "lu_solve" in counting.calls
    if not (order == "C" and np.dtype(dtype).kind == "c"):  # conj(A)'s factor: the general path
        assert "cho_solve" in counting.calls
    monkeypatch.setattr(_factored, "fast_module", lambda: None)
    library = [LU(a).solve(b), LU(a).solve(bs), Cholesky(s).solve(b), Cholesky(s).solve(bs)]
    for x, y in zip(compiled, library):
        assert x.dtype == y.dtype and x.shape == y.shape and relerr(x, y) < tol(dtype, 7)
    assert relerr(wide(a) @ wide(compiled[0]), b) < tol(dtype, 7)
    assert relerr(wide(s) @ wide(compiled[3]), bs) < tol(dtype, 7)


def test_a_first_call_never_waits_for_the_compiler(monkeypatch, tmp_path):
    """Not built yet: the first call gets the Python path at once and the build runs on a
    background thread; afterwards the compiled module is there."""
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path / "fresh"))
    monkeypatch.setattr(cpu_jit, "_EXTENSIONS", {})
    started = []
    real_build = cpu_jit._build

    def slow_build(*args, **kwargs):
        started.append(True)
        return real_build(*args, **kwargs)

    monkeypatch.setattr(cpu_jit, "_build", slow_build)
    _fast.reset()
    try:
        first = _fast.fast_module()
        assert first is None  # nothing cached: no waiting, the Python paths run
        rng = np.random.default_rng(2)
        a, b = well(rng, 5, np.float64), rand(rng, (5,), np.float64)
        np.testing.assert_allclose(nla.solve(a, b), sla.solve(a, b), rtol=1e-12)
        module = _fast.fast_module(wait=True)
        if cpu_jit._compiler() is not None:
            assert started and module is not None and _fast.fast_module() is module
            np.testing.assert_allclose(nla.solve(a, b), sla.solve(a, b), rtol=1e-12)
    finally:
        _fast.reset()


# inv and det take a direct path for one square NumPy matrix of a LAPACK dtype.
DIRECT_SIZES = (2, 3, 7, 13, 64)


def _direct_cases():
    return [(dt, n, lay) for dt in DTYPES for n in DIRECT_SIZES for lay in ("C", "F", "strided")]


def _arrange(a, layout):
    if layout == "strided":
        big = np.zeros((2 * a.shape[0], 2 * a.shape[1]), a.dtype)
        big[::2, ::2] = a
        return big[::2, ::2]
    return _layout(a, layout)


@pytest.mark.parametrize("dtype,n,layout", _direct_cases())
def test_inv_det_direct_path(dtype, n, layout):
    rng = np.random.default_rng(uuid.uuid4().int)
    a = _arrange(well(rng, n, dtype)[rng.permutation(n)], layout)  # rows shuffled: the LU interchanges rows
    before = a.copy()
    ref64 = a.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    _check(nla.inv(a), sla.inv(a), dtype, n)
    _check(nla.inv(a), np.linalg.inv(ref64).astype(dtype), dtype, n)
    d = nla.det(a)
    assert type(d) is type(sla.det(a))
    assert abs(d - sla.det(a)) <= tol(dtype, n) * 10 * abs(sla.det(a))
    assert abs(d - np.linalg.det(ref64)) <= tol(dtype, n) * 10 * abs(np.linalg.det(ref64))
    assert np.array_equal(a, before)  # neither overwrites without overwrite_a


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_det_direct_path_singular(dtype):
    rng = np.random.default_rng(uuid.uuid4().int)
    a = well(rng, 7, dtype)
    a[:, 3] = 0
    with pytest.raises(np.linalg.LinAlgError):
        nla.inv(a)
    assert nla.det(a) == sla.det(a) == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_inv_det_direct_path_check_finite(dtype, bad):
    rng = np.random.default_rng(uuid.uuid4().int)
    a = np.asfortranarray(well(rng, 5, dtype))
    a[2, 3] = bad
    before = a.copy()
    for f in (nla.inv, nla.det):
        with pytest.raises(ValueError, match="infs or NaNs"):
            f(a, overwrite_a=True)
        np.testing.assert_array_equal(a, before)  # refused before anything is overwritten


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_det_direct_path_overwrite(dtype):
    rng = np.random.default_rng(uuid.uuid4().int)
    a = np.asfortranarray(well(rng, 9, dtype))
    ref = sla.inv(a)
    x = nla.inv(a, overwrite_a=True)
    assert x is a or np.shares_memory(x, a)
    _check(x, ref, dtype, 9)
    c = np.ascontiguousarray(well(rng, 9, dtype))
    original, theirs = c.copy(), c.copy()
    ref_det = sla.det(theirs, overwrite_a=True)
    assert abs(nla.det(c, overwrite_a=True) - ref_det) <= tol(dtype, 9) * 10 * abs(ref_det)
    assert not np.array_equal(c, original)
    _check(c, theirs, dtype, 9)  # factored in place, as SciPy's det does
