"""nvmathpy.scipy.fft: scipy.fft signatures and results, workers/plan/overwrite_x, the uarray backend."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy.fft

import nvmathpy.scipy.fft as nsf
from nvmathpy.fft import FFT

TRANSFORMS = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
              "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn"]  # fmt: skip
REAL_INPUT = {"rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"}


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    return float(np.linalg.norm((got - want).ravel()) / np.linalg.norm(want.ravel()))


def operand(rng, name, shape, single=False):
    x = rng.standard_normal(shape) if name in REAL_INPUT else rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return x.astype({"f": np.float32, "c": np.complex64}[x.dtype.kind]) if single else x


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_signatures_match_scipy(name):
    assert inspect.signature(getattr(nsf, name)) == inspect.signature(getattr(scipy.fft, name))


@pytest.mark.parametrize("workers", [None, 1, 2, -1])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", TRANSFORMS)
def test_results_match_scipy(rng, name, norm, workers):
    x = operand(rng, name, (6, 10, 7))
    before = x.copy()
    got = getattr(nsf, name)(x, norm=norm, workers=workers, overwrite_x=True)
    want = getattr(scipy.fft, name)(x.copy(), norm=norm)
    assert got.dtype == want.dtype
    assert rel_err(got, want) < 1e-12
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_single_precision_and_lengths(rng, name):
    x = operand(rng, name, (9, 12), single=True)
    kwargs = {"n": 17, "axis": 0} if name[-1] not in "2n" else {"s": (5, 16), "axes": (1, 0)}
    got = getattr(nsf, name)(x, **kwargs)
    want = getattr(scipy.fft, name)(x, **kwargs)
    assert got.dtype == want.dtype
    assert rel_err(got, getattr(scipy.fft, name)(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), **kwargs)) < 3e-6


def test_helpers_reexported():
    assert nsf.next_fast_len(1021) == scipy.fft.next_fast_len(1021)
    np.testing.assert_array_equal(nsf.fftfreq(7), scipy.fft.fftfreq(7))
    with nsf.set_workers(2):
        assert nsf.get_workers() == 2


def test_workers_errors(rng):
    with pytest.raises(ValueError, match="zero"):
        nsf.fft(rng.standard_normal(8), workers=0)
    with pytest.raises(ValueError, match="out of range"):
        nsf.fft(rng.standard_normal(8), workers=-1000)


def test_plan_argument_accepts_an_nvmathpy_plan(rng):
    x = rng.standard_normal((4, 32)) + 0j
    plan = FFT(x, axes=[-1])
    y = rng.standard_normal((4, 32)) + 0j
    assert rel_err(nsf.fft(y, plan=plan), scipy.fft.fft(y)) < 1e-12
    assert rel_err(nsf.ifft(x, plan=plan), scipy.fft.ifft(x)) < 1e-12
    with pytest.raises(ValueError, match="plan computes"):
        nsf.fft(y, n=16, plan=plan)
    with pytest.raises(NotImplementedError, match="plan"):
        nsf.fft(y, plan="not a plan")


def test_cached_plans_are_reused(rng):
    from nvmathpy.fft._quick import QUICK_ELEMENTS

    nsf.plan_cache().clear()
    x = rng.standard_normal((QUICK_ELEMENTS // 40 + 1, 40))  # beyond the quick path: a plan runs it
    nsf.rfft(x, workers=2)
    nsf.rfft(x + 1, workers=2)
    assert nsf.plan_cache().hits == 1 and nsf.plan_cache().misses == 1


def test_bad_input_errors(rng):
    with pytest.raises(ValueError, match="Invalid number"):
        nsf.fft(rng.standard_normal(8), n=0)
    with pytest.raises(TypeError, match="real"):
        nsf.rfft(rng.standard_normal(8) + 1j)
    with pytest.raises(ValueError, match="unique"):
        nsf.fftn(rng.standard_normal((3, 3)), axes=(1, 1))


class TestBackend:
    def test_set_backend_routes_to_nvmathpy(self, rng, monkeypatch):
        calls = []
        original = nsf.__ua_function__
        monkeypatch.setattr(nsf, "__ua_function__", lambda m, a, k: calls.append(m.__name__) or original(m, a, k))
        x = rng.standard_normal((5, 16))
        with scipy.fft.set_backend(nsf, only=True):
            got = scipy.fft.rfftn(x)
            inv = scipy.fft.ifft(x, workers=2)
        assert calls == ["rfftn", "ifft"]
        assert rel_err(got, np.fft.rfftn(x)) < 1e-12 and rel_err(inv, np.fft.ifft(x)) < 1e-12

    @pytest.fixture
    def scipy_only(self, monkeypatch):
        """scipy.fft the only FFT library installed (the core install), with no cached plans."""
        from nvmathpy.fft import _engines_cpu

        monkeypatch.setattr(_engines_cpu, "installed_libraries", lambda: ("scipy",))
        nsf.plan_cache().clear()  # plans cached by other tests may run on other libraries
        yield
        nsf.plan_cache().clear()

    @pytest.mark.parametrize("name", TRANSFORMS)
    def test_set_backend_with_scipy_the_only_library(self, rng, monkeypatch, scipy_only, name):
        calls = []
        original = nsf.__ua_function__
        monkeypatch.setattr(nsf, "__ua_function__", lambda m, a, k: calls.append(m.__name__) or original(m, a, k))
        x = operand(rng, name, (5, 7))
        before, want = x.copy(), getattr(scipy.fft, name)(x)
        with scipy.fft.set_backend(nsf):
            got = getattr(scipy.fft, name)(x, workers=2)
        assert calls == [name]
        assert rel_err(got, want) < 1e-12
        assert np.array_equal(x, before)

    @pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "rfft2"])
    def test_set_backend_runs_longdouble(self, rng, name):
        x = operand(rng, name, (6, 11))
        want = getattr(scipy.fft, name)(x)
        x = x.astype(np.longdouble if x.dtype.kind == "f" else np.clongdouble)
        with scipy.fft.set_backend(nsf, only=True):
            got = getattr(scipy.fft, name)(x)
        assert got.dtype == (np.longdouble if want.dtype.kind == "f" else np.clongdouble)
        assert rel_err(got.astype(want.dtype), want) < 1e-12

    def test_scipy_library_without_private_pocketfft(self, rng, monkeypatch, scipy_only):
        import sys

        monkeypatch.setitem(sys.modules, "scipy.fft._pocketfft", None)  # as if SciPy moved it
        x = rng.standard_normal((3, 20)) + 1j * rng.standard_normal((3, 20))
        with scipy.fft.set_backend(nsf, only=True):
            plan = FFT(x, options={"engines": ["scipy"]}).plan()
            got, back = plan.execute(), plan.execute(direction="inverse")
        assert rel_err(got, np.fft.fftn(x)) < 1e-12 and rel_err(back, np.fft.ifftn(x)) < 1e-12

    def test_declines_what_it_does_not_handle(self):
        method = scipy.fft.fft
        assert nsf.__ua_function__(method, (np.ones(4, dtype=object),), {}) is NotImplemented
        assert nsf.__ua_function__(method, (np.ones(4),), {"plan": object()}) is NotImplemented
        subclass = type("Sub", (np.ndarray,), {})
        assert nsf.__ua_function__(method, (np.ones(4).view(subclass),), {}) is NotImplemented
        assert nsf.__ua_function__(method, ([1.0, 2.0, 3.0],), {}) is not NotImplemented

    def test_foreign_arrays_fall_through_registered_backend(self):
        torch = pytest.importorskip("torch")
        t = torch.arange(8, dtype=torch.float64)
        assert nsf.__ua_function__(scipy.fft.fft, (t,), {}) is NotImplemented
        with scipy.fft.set_backend(nsf):  # not only=True: SciPy's own backend takes what we decline
            out = scipy.fft.dct(np.arange(6.0))
            assert np.allclose(out, scipy.fft.dct(np.arange(6.0)))

    def test_register_backend_keeps_other_code_working(self, rng):
        scipy.fft.register_backend(nsf)
        try:
            x = rng.standard_normal(12)
            with scipy.fft.set_backend("scipy", only=True):
                ref = scipy.fft.fft(x)
            assert rel_err(scipy.fft.fft(x), ref) < 1e-12
            assert np.allclose(scipy.fft.dst(x), scipy.fft.dst(x.copy()))
        finally:
            scipy.fft.set_global_backend("scipy")


# -- nothing to transform: empty dimensions and no axes, as NumPy and SciPy answer --------------

_EMPTY_CASES = [
    ("fft", (0, 4), {}), ("fft", (0, 4), {"axis": 0, "n": 3}), ("ifft", (2, 0, 3), {}), ("rfft", (0, 5), {}),
    ("irfft", (0, 4), {}), ("hfft", (0, 4), {}), ("ihfft", (0, 7), {}), ("fft2", (0, 4, 4), {}),
    ("rfftn", (3, 0, 4), {"axes": (2,)}), ("irfftn", (0, 4), {"axes": (1,)}),
    ("dct", (0, 4), {}), ("dst", (0, 4), {"type": 1}), ("idctn", (0, 3, 4), {"axes": (1, 2)}),
    ("dct", (4, 0), {"n": 3}),
]


@pytest.mark.parametrize("name, shape, kwargs, dtype", [
    (*case, dtype) for case in _EMPTY_CASES for dtype in ("float32", "float64", "complex64", "int16")
    if not (case[0] in ("rfft", "rfftn", "ihfft") and dtype == "complex64")  # an error in both, tested elsewhere
])
def test_operands_with_an_empty_dimension_give_scipys_and_numpys_result(name, shape, kwargs, dtype):
    import nvmathpy.fft as nf

    x = np.zeros(shape, dtype)
    pairs = [(getattr(nsf, name)(x, **kwargs), getattr(scipy.fft, name)(x, **kwargs))]
    if hasattr(np.fft, name):
        pairs.append((getattr(nf, name)(x, **kwargs), getattr(np.fft, name)(x, **kwargs)))
    for ours, theirs in pairs:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        assert not np.any(ours)


@pytest.mark.parametrize("name", ["fft", "dct", "irfft"])
def test_an_empty_transformed_axis_without_a_length_is_an_error_as_in_scipy(name):
    x = np.zeros((4, 0))
    with pytest.raises(ValueError):
        getattr(scipy.fft, name)(x)
    with pytest.raises(ValueError, match="number of"):
        getattr(nsf, name)(x)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "fft2", "dctn", "idstn"])
def test_no_axes_give_the_operand_back(name):
    import nvmathpy.fft as nf

    x = np.random.default_rng(0).standard_normal((3, 4))
    for module, reference in ((nsf, scipy.fft), (nf, np.fft)):
        if not hasattr(module, name):
            continue
        for kwargs in ({"axes": ()}, {"s": [], "axes": []}):
            got = getattr(module, name)(x, **kwargs)
            expected = getattr(reference, name)(x, **kwargs)
            assert got.dtype == expected.dtype and np.array_equal(got, expected)


@pytest.mark.parametrize("name", ["dct", "idct", "dst", "idst", "dctn", "idstn"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("orthogonalize", [None, True, False])
@pytest.mark.parametrize("type_", [1, 2, 3, 4])
def test_complex_input_gives_scipys_numbers_for_every_orthogonalize(name, norm, orthogonalize, type_):
    rng = np.random.default_rng(type_)
    z = rng.standard_normal((3, 6)) + 1j * rng.standard_normal((3, 6))
    kwargs = {"type": type_, "norm": norm, "orthogonalize": orthogonalize}
    expected = getattr(scipy.fft, name)(z, **kwargs)
    got = getattr(nsf, name)(z, **kwargs)
    assert got.dtype == expected.dtype
    assert np.linalg.norm(got - expected) <= 1e-12 * np.linalg.norm(expected)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ihfft"])
def test_a_boolean_length_is_refused(name):
    import nvmathpy.fft as nf

    if name in ("fft", "irfft"):  # NumPy 2.4 refuses these (its rfft/ihfft take True as 1)
        with pytest.raises(TypeError):
            getattr(np.fft, name)(np.ones(4), n=True)
    with pytest.raises(TypeError, match="booleans"):
        getattr(nf, name)(np.ones(4), n=True)


def test_every_scipy_fft_name_is_here():
    assert set(scipy.fft.__all__) <= set(nsf.__all__)
    for name in ("fhtoffset", "next_fast_len", "prev_fast_len", "set_backend", "get_workers"):
        assert getattr(nsf, name) is getattr(scipy.fft, name)  # SciPy's own object


@pytest.mark.parametrize("mu,offset,bias", [(0.0, 0.0, 0.0), (0.5, 0.1, 0.3), (-0.5, 0.0, 0.7)])
def test_fht_runs_its_ffts_here(rng, monkeypatch, mu, offset, bias):
    calls = []
    original = nsf.__ua_function__
    monkeypatch.setattr(nsf, "__ua_function__", lambda m, a, k: calls.append(m.__name__) or original(m, a, k))
    r = np.logspace(-3, 3, 65)
    dln = np.log(r[1] / r[0])
    a = rng.standard_normal((2, 65)) * np.exp(-r**2 / 8)
    got = nsf.fht(a, dln, mu, offset=offset, bias=bias)
    back = nsf.ifht(got, dln, mu, offset=offset, bias=bias)
    assert {"fht", "rfft", "irfft", "ifht"} <= set(calls)  # the transforms ran on nvmathpy
    assert rel_err(got, scipy.fft.fht(a, dln, mu, offset=offset, bias=bias)) < 1e-12
    assert rel_err(back, scipy.fft.ifht(got, dln, mu, offset=offset, bias=bias)) < 1e-12
    with scipy.fft.set_backend(nsf, only=True):  # through the backend alone too
        assert rel_err(scipy.fft.fht(a, dln, mu, offset=offset, bias=bias), got) < 1e-12
