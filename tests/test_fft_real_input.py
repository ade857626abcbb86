"""``fft`` of real input in each namespace, and SciPy's pocketfft binding as a library.

``nvmathpy.scipy.fft.fft`` of real input is SciPy's (pocketfft's complex transform of real
input, assembled from the r2c result where another library runs: bit for bit SciPy's result
where both run SciPy's kernel, signs of zeros included), and ``nvmathpy.fft.fft`` NumPy's (the
complex transform of the input converted to complex: NumPy's bits in double precision where
both run pocketfft); the quick path and plans give the same bits in each namespace. The ``pocketfft`` library (SciPy's binding called directly) gives ``scipy.fft``'s
bits, leads the small band, and where its binding is unusable runs through scipy.fft's
functions, with no runner family.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import nvmathpy.fft as nfft
import nvmathpy.scipy.fft as nsfft
from nvmathpy.fft import FFT, _engines_cpu, _libraries, _quick
from nvmathpy.fft._driver import runner_cache
from nvmathpy.fft._layout import describe
from nvmathpy.fft._quick import conjugate_mirror

HAS_POCKETFFT = "pocketfft" in _engines_cpu.installed_libraries()
needs_pocketfft = pytest.mark.skipif(not HAS_POCKETFFT, reason="SciPy's pocketfft binding is not installed")


@pytest.fixture(params=["quick", "plans"])
def path(request, monkeypatch, fresh) -> str:
    """Runs the test on the quick path, or with every call left to plans."""
    if request.param == "plans":
        monkeypatch.setattr(_quick, "QUICK_ELEMENTS", 0)
    return request.param


def _bits(a: np.ndarray) -> np.ndarray:
    """Every bit of a complex array (the signs of zeros included), as integers."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint64 if a.dtype == np.complex128 else np.uint32)


def _operands(rng: np.random.Generator, n: int, dtype: type) -> list[np.ndarray]:
    """Random, zero, impulse and symmetric (real spectrum: every imaginary part zero) operands."""
    x = rng.standard_normal((3, n))
    symmetric = x + np.roll(x[:, ::-1], 1, axis=-1)
    return [a.astype(dtype) for a in (x, np.zeros((2, n)), np.eye(2, n, 1), symmetric)]


LENGTHS = (1, 2, 7, 16, 64, 97, 255, 1000)


def _expected(x: np.ndarray, n, axis: int, norm) -> np.ndarray:
    """SciPy's full spectrum assembled from ``nvmathpy.scipy.fft.rfft``'s."""
    half = nsfft.rfft(x, n, axis, norm)
    axis %= x.ndim
    length = x.shape[axis] if n is None else n
    full = np.empty(half.shape[:axis] + (length,) + half.shape[axis + 1:], half.dtype)
    full[(slice(None),) * axis + (slice(0, half.shape[axis]),)] = half
    return conjugate_mirror(full, axis)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scipy_namespace_gives_scipys_bits(path, dtype) -> None:
    """Lengths odd, prime and even, batches, both axes, norms, zero-padding and symmetric inputs:
    bit for bit ``scipy.fft.fft`` (the band runs SciPy's kernel), values of the first half
    equal to ``rfft``'s, and the quick path's bits equal the plans'."""
    rng = np.random.default_rng(1)
    for n in LENGTHS:
        for x in _operands(rng, n, dtype):
            for axis, length, norm in ((-1, None, None), (0, None, "ortho"), (-1, n + 3, "forward"), (-1, 5, None)):
                got = nsfft.fft(x, length, axis, norm)
                assert np.array_equal(_bits(got), _bits(_expected(x, length, axis, norm)))
                half = nsfft.rfft(x, length, axis, norm)
                assert np.array_equal(got[(slice(None),) * (axis % 2) + (slice(0, half.shape[axis]),)], half)
                if HAS_POCKETFFT:  # in the band, on either path: SciPy's own kernel
                    assert np.array_equal(_bits(got), _bits(scipy.fft.fft(x, length, axis, norm)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
def test_numpy_namespace_gives_numpys_bits(path, dtype) -> None:
    """NumPy's ``fft`` of real input: the complex transform of the input converted to complex
    (NumPy's result dtype), bit for bit ``numpy.fft.fft`` in double precision where pocketfft
    runs it (NumPy's kernel; but for ``norm="ortho"``, whose scale factor NumPy rounds in its
    own way), the complex input's transform bit for bit on either path."""
    rng = np.random.default_rng(2)
    for n in LENGTHS:
        for x in _operands(rng, n, dtype):
            for axis, length, norm in ((-1, None, None), (0, None, "ortho"), (-1, n + 3, "forward"), (-1, 5, None)):
                got, reference = nfft.fft(x, length, axis, norm), np.fft.fft(x, length, axis, norm)
                assert got.dtype == reference.dtype
                assert np.array_equal(_bits(got), _bits(nfft.fft(x.astype(got.dtype), length, axis, norm)))
                if HAS_POCKETFFT and got.dtype == np.complex128 and norm != "ortho":
                    assert np.array_equal(_bits(got), _bits(reference))
                else:
                    assert np.allclose(got, reference, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(reference).max()))


def test_quick_path_and_plans_agree_bit_for_bit(monkeypatch, fresh) -> None:
    """One call, once on the quick path and once on a plan: the same bits in each namespace, with
    ``out=`` too (and a large transform, which plans run, gives its namespace's convention)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 97))
    quick = {ns: ns.fft(x) for ns in (nfft, nsfft)}
    monkeypatch.setattr(_quick, "QUICK_ELEMENTS", 0)
    runner_cache().clear()
    for ns in (nfft, nsfft):
        assert np.array_equal(_bits(ns.fft(x)), _bits(quick[ns]))
    out = np.empty_like(quick[nfft])
    assert nfft.fft(x, out=out) is out and np.array_equal(_bits(out), _bits(quick[nfft]))
    monkeypatch.undo()
    big = rng.standard_normal(1 << 17)
    for ns in (nfft, nsfft):
        expected = _expected(big, None, -1, None) if ns is nsfft else ns.fft(big.astype(np.complex128))
        assert np.array_equal(_bits(ns.fft(big)), _bits(expected))


@needs_pocketfft
@pytest.mark.parametrize("kind,dtype,norm", [("c2c", "complex128", None), ("c2c", "complex64", "ortho"),
                                             ("r2c", "float64", "forward"), ("c2r", "complex128", None),
                                             ("c2r", "complex64", "ortho")])
def test_pocketfft_library_gives_scipys_bits(kind, dtype, norm) -> None:
    """Plans on the ``pocketfft`` library give what the ``scipy`` library (scipy.fft's own
    functions) gives, both directions, 1-D and 2-D, strided operands too."""
    rng = np.random.default_rng(4)
    for shape, axes in [((97,), [-1]), ((6, 64), [0]), ((12, 10), [0, 1])]:
        x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype.startswith("complex") else 0)
        x = x.astype(dtype)
        lengths = None if kind != "c2r" else [shape[a] for a in axes[:-1]] + [2 * (shape[axes[-1]] - 1)]
        for operand in (x, np.asfortranarray(x)):
            results = []
            for library in ("pocketfft", "scipy"):
                plan = FFT(operand, axes=axes, s=lengths, kind=kind, norm=norm, options={"engines": [library]})
                plan.plan()
                results.append([plan.execute(direction) for direction in ("forward", "inverse")])
            for ours, theirs in zip(*results):
                assert np.array_equal(_bits(ours), _bits(theirs))


def test_the_band_leads_with_pocketfft() -> None:
    """The small band's first candidate is SciPy's binding on one thread where it is installed
    (ducc0 otherwise); outside the band the order is unchanged."""
    budget = _engines_cpu.cores()
    small = describe((16, 97), np.dtype("complex128"), axes=[-1])
    first = _engines_cpu.first_candidate(small, budget).label
    assert first == ("pocketfft" if HAS_POCKETFFT else first)
    large = describe((1 << 16,), np.dtype("complex128"), axes=[-1])
    assert _engines_cpu.first_candidate(large, budget).label != "pocketfft"


@needs_pocketfft
def test_unusable_binding_falls_back(monkeypatch, fresh) -> None:
    """Where SciPy's binding cannot be used (moved, another signature), the library runs through
    scipy.fft's functions (the same kernel: the same bits) and no runner family is kept."""
    rng = np.random.default_rng(5)
    x, z = rng.standard_normal(97), rng.standard_normal(60) + 1j * rng.standard_normal(60)
    before = [nsfft.fft(x), nsfft.rfft(x), nfft.fft(z), nfft.irfft(z)]
    monkeypatch.setattr(_libraries, "_pypocketfft", lambda: None)
    runner_cache().clear()
    after = [nsfft.fft(x), nsfft.rfft(x), nfft.fft(z), nfft.irfft(z)]
    for ours, theirs in zip(after, before):
        assert np.array_equal(_bits(ours), _bits(theirs))
    assert not runner_cache()._families


def test_binding_check_refuses_another_signature(monkeypatch) -> None:
    """The binding is checked by tiny calls: a module whose functions take other arguments is not used."""
    _libraries._pypocketfft.cache_clear()
    monkeypatch.setattr(_libraries.importlib, "import_module", lambda name: np)  # no c2c/r2c/c2r
    try:
        assert _libraries._pypocketfft() is None
        assert _libraries.pocketfft_call("c2c", (0,), "forward", "backward", 1, 0) is None
    finally:
        monkeypatch.undo()
        _libraries._pypocketfft.cache_clear()
    assert (_libraries._pypocketfft() is not None) == HAS_POCKETFFT


def test_not_offered_without_the_extension(monkeypatch, tmp_path) -> None:
    """Where SciPy or its binding's extension file is missing, the library is not offered; the
    check imports nothing."""
    library = _libraries.LIBRARIES["pocketfft"]
    monkeypatch.setattr(_libraries.importlib.util, "find_spec", lambda name: None)
    assert not library.available()
    spec = type("Spec", (), {"submodule_search_locations": [str(tmp_path)]})()  # a SciPy without the file
    monkeypatch.setattr(_libraries.importlib.util, "find_spec", lambda name: spec)
    assert not library.available()
