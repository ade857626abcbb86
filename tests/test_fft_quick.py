"""The one-call functions' quick path (nvmathpy.fft._quick): the same results as a plan for the
same problem, what it leaves to plans, results that do not depend on the operand's layout or on
how a batch is sliced, shared runners across threads, and pyFFTW imported without dask; the
runner families (one per call signature but for the transform's length): a member gives a
plan's bits for its own length, families do not leak across kinds, directions, dtypes, norms,
thread budgets or out of the band where the heuristic's choice is one library, and a wisdom
entry of a member's exact problem (usable, stale or of another device) is looked up as a plan
would - for FFTs and for DCTs/DSTs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import scipy.fft

import nvmathpy.fft as nfft
import nvmathpy.scipy.fft as nsfft
from nvmathpy.fft import DCT, DST, FFT, _driver, _engines_cpu, _quick, _trig_engine
from nvmathpy.fft._driver import plan_cache, runner_cache
from nvmathpy.fft._heuristic import SMALL, THREADED_FROM, rank, small_band
from nvmathpy.fft._layout import describe
from nvmathpy.fft._quick import QUICK_ELEMENTS, one_call_engines
from nvmathpy.fft.trig_plan import trig_plan_cache
from nvmathpy.plan.wisdom import default_wisdom

ROOT = Path(__file__).resolve().parents[1]


def _operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


CASES = [  # function, kind, dtype, shape, call arguments
    ("fft", "c2c", np.complex128, (97,), {}),
    ("ifft", "c2c", np.complex64, (6, 64), {"axis": 0, "norm": "ortho"}),
    ("rfft", "r2c", np.float64, (5, 255), {"n": 300}),
    ("rfft", "r2c", np.float32, (1000,), {"n": 509, "norm": "forward"}),
    ("irfft", "c2r", np.complex128, (8, 33), {}),
    ("irfft", "c2r", np.complex64, (17,), {"n": 40}),
    ("hfft", "c2r", np.complex128, (9,), {}),
    ("ihfft", "r2c", np.float64, (3, 16), {"axis": 0}),
]


@pytest.mark.parametrize("name,kind,dtype,shape,kwargs", CASES)
def test_quick_path_gives_a_plans_bits(fresh, name, kind, dtype, shape, kwargs) -> None:
    """A small call runs without a plan and gives what an FFT plan of that problem gives."""
    x = _operand(np.random.default_rng(4), shape, dtype)
    got = getattr(nfft, name)(x, **kwargs)
    assert runner_cache().misses == 1 and plan_cache().misses == 0  # no plan made
    again = getattr(nfft, name)(x, **kwargs)
    assert runner_cache().misses == 1 and np.array_equal(got, again)
    axis, n = kwargs.get("axis", -1), kwargs.get("n")
    if kind == "c2r":
        n = n or 2 * (x.shape[axis] - 1)
    direction = "inverse" if name in ("ifft", "irfft", "ihfft") else "forward"
    plan = FFT(x, axes=[axis], s=None if n is None else [n], kind=kind, norm=kwargs.get("norm"))
    assert np.array_equal(got, plan.plan().execute(direction))
    reference = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), **kwargs)
    tolerance = 1e-5 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12
    assert np.linalg.norm(got - reference) <= tolerance * np.linalg.norm(reference)


@pytest.mark.parametrize("n", [None, 7, 64, 130])
def test_quick_full_spectrum_of_real_input(fresh, n) -> None:
    """SciPy's ``fft`` of real input runs on the quick path, its first half equal to ``rfft``'s."""
    namespace = nsfft
    x = _operand(np.random.default_rng(5), (3, 64), np.float64)
    got = namespace.fft(x, n=n, axis=0 if n == 7 else -1)
    assert runner_cache().misses == 1 and plan_cache().misses == 0
    half = namespace.rfft(x, n=n, axis=0 if n == 7 else -1)
    length = n or 64
    first = got[:half.shape[0]] if n == 7 else got[..., :half.shape[-1]]
    assert np.array_equal(first, half)
    reference = np.fft.fft(x, n=n, axis=0 if n == 7 else -1)
    assert np.linalg.norm(got - reference) <= 1e-12 * np.linalg.norm(reference)
    rest = got[half.shape[0]:] if n == 7 else got[..., half.shape[-1]:]
    assert rest.shape[0 if n == 7 else -1] == length - (length // 2 + 1)


def test_large_or_unusual_calls_are_left_to_plans(fresh) -> None:
    rng = np.random.default_rng(6)
    big = _operand(rng, (QUICK_ELEMENTS // 64 + 1, 64), np.complex128)
    nfft.fft(big)
    nfft.fft(_operand(rng, (16,), np.complex128).astype(">c16"))  # byte-swapped: converted, then planned
    nfft.ifft(_operand(rng, (16,), np.float64))  # needs a conversion to complex
    assert plan_cache().misses == 3 and len(runner_cache()) == 3
    assert not any(runner_cache()._runners.values())  # each signature marked "plans run it"


def test_wisdom_entry_is_taken_as_a_plan_takes_it(fresh, wisdom) -> None:
    """The quick path takes the wisdom store's choice for the exact problem, as a plan does (same
    bits); an entry of another device or problem changes nothing; a stateful choice is planned."""
    x = _operand(np.random.default_rng(7), (48,), np.float64)
    layout = describe(x.shape, x.dtype, kind="r2c")
    budget = _engines_cpu.cores()
    problem = _engines_cpu.fft_problem(layout, budget)
    device = _engines_cpu._device(_engines_cpu.installed_libraries())
    heuristic = _engines_cpu.first_candidate(layout, budget)
    default_wisdom().record(problem, {"device": "another"}, {"label": "scipy", "params": {"threads": 1}})
    assert _engines_cpu.wisdom_choice(layout, budget) is None
    other = "scipy" if heuristic.label != "scipy" else "ducc0"
    default_wisdom().record(problem, device, {"label": other, "params": {"threads": 1}})
    runner_cache().clear()
    got = nfft.rfft(x)
    plan = FFT(x, kind="r2c").plan()
    assert plan_cache().misses == 0 and plan.chosen_by == "wisdom"
    assert np.array_equal(got, plan.execute())
    assert _engines_cpu.wisdom_choice(layout, budget).label == other
    if "pyfftw" in _engines_cpu.installed_libraries():
        default_wisdom().record(problem, device, {"label": "pyfftw", "params": {"threads": 1, "effort": "estimate"}})
        runner_cache().clear()
        got = nfft.rfft(x)
        assert plan_cache().misses == 1
        assert np.linalg.norm(got - np.fft.rfft(x)) <= 1e-12 * np.linalg.norm(np.fft.rfft(x))


def test_first_candidate_is_the_rankings_first() -> None:
    budget = os.cpu_count() or 1
    for shape, dtype, axes, kind in [((1024,), "complex128", None, None), ((4096,), "float64", None, None),
                                     ((97, 8), "float32", (0,), None), ((512, 512), "complex64", None, None),
                                     ((1 << 15,), "complex128", None, None), ((9, 256), "float64", None, "r2c")]:
        layout = describe(shape, np.dtype(dtype), axes=axes, kind=kind)
        usable = [n for n in _engines_cpu.installed_libraries() if _engines_cpu.LIBRARIES[n].supports(layout)]
        assert _engines_cpu.first_candidate(layout, budget) == rank(layout, usable,
                                                                    _engines_cpu.thread_options(budget))[0]


@pytest.mark.parametrize("namespace", [nfft, nsfft], ids=["numpy", "scipy"])
@pytest.mark.parametrize("dtype,name,tolerance", [(np.complex128, "fftn", 5.6e-15), (np.float64, "rfftn", 5.6e-15),
                                                  (np.complex64, "ifftn", 3e-7), (np.float32, "rfft2", 3e-7)])
def test_memory_order_does_not_change_results(namespace, dtype, name, tolerance) -> None:
    """One logical problem, C- and Fortran-ordered (and negative-stride) operands: results agree to
    the peer's own tolerance (NumPy's test_fft_with_order allows ~5.6e-15 in double)."""
    rng = np.random.default_rng(8)
    for shape in [(8, 12, 16), (64, 64), (9, 256, 3)]:
        x = _operand(rng, shape, dtype)
        results = [getattr(namespace, name)(v) for v in (x, np.asfortranarray(x), np.ascontiguousarray(x[::-1])[::-1])]
        for other in results[1:]:
            assert np.linalg.norm(other - results[0]) <= tolerance * np.linalg.norm(results[0])


def test_one_problem_key_whatever_the_layout() -> None:
    """Plans of one logical problem share their problem key (so wisdom - an autotuned choice -
    picks one library for it, whatever layout it was tuned on) and give the same bits."""
    x = _operand(np.random.default_rng(11), (24, 36, 5), np.complex128)
    views = [x, np.asfortranarray(x), np.ascontiguousarray(x[::-1])[::-1]]
    plans = [FFT(v, axes=(0, 1)) for v in views]
    assert plans[0].problem == plans[1].problem == plans[2].problem
    results = [p.plan().execute() for p in plans]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


@pytest.mark.parametrize("dtype,atol", [(np.complex64, 2e-6), (np.complex128, 2e-15)])
@pytest.mark.parametrize("shape,axis", [((129, 9), 0), ((9, 129), 1), ((9, 256), 1)])
def test_batched_and_sliced_transforms_agree(dtype, atol, shape, axis) -> None:
    """A batched irfft and the same irfft slice by slice give the same numbers (SciPy's
    signal tests compare them with atol 2e-6 in single and 2e-15 in double precision)."""
    spectrum = _operand(np.random.default_rng(9), shape, dtype)
    n = 2 * (shape[axis] - 1)
    batched = nsfft.irfft(spectrum, n=n, axis=axis)
    for j in range(shape[1 - axis]):
        sliced = nsfft.irfft(np.take(spectrum, j, axis=1 - axis), n=n)
        np.testing.assert_allclose(np.take(batched, j, axis=1 - axis), sliced, rtol=0, atol=atol)
    real = np.fft.irfft(spectrum, n=n, axis=axis)  # and the r2c the other way
    forward = nsfft.rfft(real, axis=axis)
    for j in range(shape[1 - axis]):
        sliced = nsfft.rfft(np.take(real, j, axis=1 - axis))
        np.testing.assert_allclose(np.take(forward, j, axis=1 - axis), sliced, rtol=0,
                                   atol=atol * max(1.0, float(np.abs(sliced).max())))


def test_runners_are_shared_between_threads(fresh) -> None:
    rng = np.random.default_rng(10)
    inputs = [_operand(rng, (4, 60), np.float64) for _ in range(64)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: nsfft.fft(x, workers=1), inputs))
    assert len(runner_cache()) == 1
    for x, got in zip(inputs, results):
        reference = scipy.fft.fft(x)
        assert np.linalg.norm(got - reference) <= 1e-12 * np.linalg.norm(reference)


def test_families_are_shared_between_threads(fresh) -> None:
    """Threads making runners of new lengths at once (families and their members) each get
    their own length's transform."""
    rng = np.random.default_rng(12)
    inputs = [rng.standard_normal((2, n)) for n in range(40, 200, 3)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: (nsfft.fft(x), nfft.rfft(x), nsfft.dct(x)), inputs))
    for x, (full, half, dct) in zip(inputs, results):
        for got, reference in ((full, scipy.fft.fft(x)), (half, np.fft.rfft(x)), (dct, scipy.fft.dct(x))):
            assert np.linalg.norm(got - reference) <= 1e-12 * np.linalg.norm(reference)


def test_pyfftw_is_imported_without_dask() -> None:
    pytest.importorskip("pyfftw")
    code = textwrap.dedent("""
        import sys
        from nvmathpy.fft._libraries import import_pyfftw
        fftw = import_pyfftw()
        assert fftw.FFTW is not None
        print("dask.array" in sys.modules, "dask.array.fft" in sys.modules)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_fftw_after_mkl_computes_right() -> None:
    """An MKL transform first, pyFFTW planned afterwards: FFTW's c2r still gives NumPy's result
    (MKL's FFTW3 wrappers must not take over pyFFTW's symbols)."""
    pytest.importorskip("pyfftw")
    pytest.importorskip("mkl_fft")
    code = textwrap.dedent("""
        import numpy as np
        from nvmathpy.fft import FFT
        rng = np.random.default_rng(0)
        FFT(np.ones((64, 64), np.float32), options={"engines": ("mkl_fft",)}).plan().execute()
        x = rng.standard_normal((9, 4, 3)) + 1j * rng.standard_normal((9, 4, 3))
        got = FFT(x, axes=(2, 0), s=[5, 9], kind="c2r", options={"engines": ("pyfftw",)}).plan().execute()
        ref = np.fft.irfftn(x, s=[5, 9], axes=(2, 0))
        print(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NVMATHPY_WISDOM": "off"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1e-12


#: The libraries families of FFT runners run on (installed here), each tried as the band's choice.
FAMILY_LIBRARIES = [name for name in ("pocketfft", "ducc0") if name in _engines_cpu.installed_libraries()]


@pytest.fixture(params=FAMILY_LIBRARIES or [pytest.param(None, marks=pytest.mark.skip("no family library"))])
def band_library(request, monkeypatch) -> str:
    """The small band's library: each one families run on, the others hidden (as if not installed)."""
    libraries = tuple(name for name in _engines_cpu.installed_libraries()
                      if name == request.param or name not in FAMILY_LIBRARIES)
    monkeypatch.setattr(_engines_cpu, "installed_libraries", lambda: libraries)
    return request.param


@pytest.fixture
def described(monkeypatch) -> list[int]:
    """Counts the calls that described their problem in full (``quick_runner``): a family member
    is made without one."""
    calls: list[int] = []
    original = _driver.quick_runner

    def counting(a, **kwargs):
        calls.append(a.shape[-1])
        return original(a, **kwargs)

    monkeypatch.setattr(_driver, "quick_runner", counting)
    return calls


def _planned(x: np.ndarray, name: str, n_out: int | None, norm: str | None) -> np.ndarray:
    """What an FFT plan of the one-call function ``name``'s problem on ``x`` computes, among the
    libraries one-call functions rank (``one_call_engines``)."""
    kind = {"fft": "c2c", "ifft": "c2c", "rfft": "r2c", "ihfft": "r2c", "irfft": "c2r", "hfft": "c2r"}[name]
    direction = "inverse" if name in ("ifft", "irfft", "ihfft") else "forward"
    s = None if n_out is None else [n_out]
    engines = one_call_engines(describe(x.shape, x.dtype, axes=[-1], s=s, kind=kind, norm=norm))
    plan = FFT(x, axes=[-1], s=s, kind=kind, norm=norm, options=engines and {"engines": engines}).plan()
    return plan.execute(direction)


CASES = [("fft", np.complex128), ("fft", np.complex64), ("ifft", np.complex128), ("rfft", np.float64),
         ("rfft", np.float32), ("ihfft", np.float64), ("irfft", np.complex128), ("irfft", np.complex64),
         ("hfft", np.complex128)]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,dtype", CASES)
def test_members_give_a_plans_bits(fresh, band_library, described, name, dtype, norm) -> None:
    """The first length describes its problem; the others of the band run as members of its
    family, each with its plan's bits (odd, prime and batched shapes alike)."""
    rng = np.random.default_rng(1)
    shapes = [(40,), (97,), (255,), (8,), (1024 // 2 + 1 if name in ("irfft", "hfft") else 1024,), (7, 33)]
    for shape in shapes:
        x = _operand(rng, shape, dtype)
        got = getattr(nfft, name)(x, norm=norm)
        n_out = 2 * (shape[-1] - 1) if name in ("irfft", "hfft") else None
        assert np.array_equal(got, _planned(x, name, n_out, norm)), shape
    assert described == [40, 33]  # the 2-D operand is another signature: a family of its own
    assert plan_cache().misses == 0


@pytest.mark.parametrize("name,dtype", CASES + [("fft", np.float64)])
def test_members_with_n_give_a_plans_bits(fresh, band_library, described, name, dtype) -> None:
    """Calls with ``n`` make a family of their own: other ``n`` (cropping or zero-padding the
    operand) and other operand lengths are its members, each with its plan's bits."""
    rng = np.random.default_rng(7)
    calls = [(40, 50), (97, 64), (255, 255), (8, 300), (1000, 1023), (33, 7)]
    for m, n in calls:
        x = _operand(rng, (m,), dtype)
        got = getattr(nfft, name)(x, n)
        if dtype == np.float64 and name == "fft":  # real input: NumPy's, the complex transform of complex input
            assert _bits(got) == _bits(_planned(x.astype(np.complex128), name, n, None)), (m, n)
        else:
            assert np.array_equal(got, _planned(x, name, n, None)), (m, n)
    assert described == [40]
    assert plan_cache().misses == 0


def _bits(a: np.ndarray) -> bytes:
    """Every bit of a complex array (the signs of zeros included)."""
    return np.ascontiguousarray(a.real).tobytes() + np.ascontiguousarray(a.imag).tobytes()


def test_families_do_not_leak(fresh, band_library) -> None:
    """Signatures differing in kind, direction, dtype, norm, threads, axis or dimensions get
    families of their own: each call still gives its plan's bits."""
    rng = np.random.default_rng(3)
    n = iter(range(30, 200))
    calls = [("fft", np.complex128, {}), ("ifft", np.complex128, {}), ("fft", np.complex64, {}),
             ("fft", np.complex128, {"norm": "ortho"}), ("rfft", np.float64, {}), ("ihfft", np.float64, {}),
             ("irfft", np.complex128, {}), ("hfft", np.complex128, {}), ("fft", np.complex128, {"axis": 0})]
    for name, dtype, kwargs in calls * 2:  # the second round: members of the families the first made
        x = _operand(rng, (next(n),), dtype)
        got = getattr(nfft, name)(x, **kwargs)
        n_out = 2 * (x.shape[-1] - 1) if name in ("irfft", "hfft") else None
        assert np.array_equal(got, _planned(x, name, n_out, kwargs.get("norm"))), (name, dtype, kwargs)
    assert len(runner_cache()._families) == len(calls)
    for workers in (1, 2, None):  # scipy's workers: one family each, all on one thread in the band
        x = _operand(rng, (next(n),), np.complex128)
        assert np.array_equal(nsfft.fft(x, workers=workers), _planned(x, "fft", None, None))
    assert len(runner_cache()._families) == len(calls) + 3


def test_no_member_outside_the_band(fresh, band_library, described) -> None:
    """Lengths above the band, and batches threaded by the heuristic, are described in full
    (their library or thread count may differ), and still give their plan's bits."""
    rng = np.random.default_rng(4)
    first = _operand(rng, (64,), np.float64)
    nfft.rfft(first)
    for shape in [(4 * SMALL,), (THREADED_FROM // 64, 64)]:
        x = _operand(rng, shape, np.float64)
        assert np.array_equal(nfft.rfft(x), _planned(x, "rfft", None, None))
    assert described == [64, 4 * SMALL, 64]


def test_the_band_has_one_heuristic_choice() -> None:
    """What makes a family valid: the heuristic's first candidate is the same for every length
    of the band (per kind and dtype): SciPy's pocketfft binding on one thread where it is
    installed, else ducc0 where that is."""
    budget = _engines_cpu.cores()
    for kind, dtype in [("c2c", "complex128"), ("c2c", "complex64"), ("r2c", "float64"), ("r2c", "float32"),
                        ("c2r", "complex128")]:
        choices = set()
        for n in range(1, SMALL + 1):
            for batch in (1, 3, (THREADED_FROM - 1) // n):
                if not batch or not small_band(n, batch * n):
                    continue
                shape = (batch, n // 2 + 1 if kind == "c2r" else n)
                layout = describe(shape, np.dtype(dtype), axes=[-1], s=[n] if kind == "c2r" else None, kind=kind)
                choices.add(_engines_cpu.first_candidate(layout, budget))
        assert len(choices) == 1
        if FAMILY_LIBRARIES:
            assert str(choices.pop()) == f"{FAMILY_LIBRARIES[0]}(threads=1)"


@pytest.fixture
def wisdom(tmp_path, monkeypatch):
    """An empty wisdom store of the test's own, looked at on every new call signature."""
    monkeypatch.setattr(_quick, "WISDOM_RECHECK", 0.0)  # look at the store on every new signature
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NVMATHPY_WISDOM", "on")
    return default_wisdom()


def test_wisdom_entries_of_members(fresh, band_library, described, wisdom) -> None:
    """A usable entry of one length's exact problem is taken (as a plan takes it) although the
    family exists; an entry of another device or naming an unknown library changes nothing,
    and no plan is made for either."""
    rng = np.random.default_rng(5)
    nfft.rfft(rng.standard_normal(32))  # makes the family
    budget = _engines_cpu.cores()
    device = _engines_cpu._device(_engines_cpu.installed_libraries())
    chosen, foreign, stale = (rng.standard_normal(n) for n in (48, 50, 52))
    for x, where, choice in [(chosen, device, {"label": "scipy", "params": {"threads": 1}}),
                             (foreign, {"device": "another"}, {"label": "scipy", "params": {"threads": 1}}),
                             (stale, device, {"label": "gone_library", "params": {"threads": 1}})]:
        wisdom.record(_engines_cpu.fft_problem(describe(x.shape, x.dtype, kind="r2c"), budget), where, choice)
    for x in (chosen, foreign, stale):
        got = nfft.rfft(x)
        plan = FFT(x, kind="r2c").plan()
        assert np.array_equal(got, plan.execute())
        assert plan.chosen_by == ("wisdom" if x is chosen else "heuristic")
    assert described == [32, 48, 50, 52] and plan_cache().misses == 0
    other = rng.standard_normal(54)  # no entry: a member again
    assert np.array_equal(nfft.rfft(other), FFT(other, kind="r2c").plan().execute())
    assert described == [32, 48, 50, 52]


def test_the_inline_answer_for_a_new_length_yields_to_wisdom(fresh, band_library, described, wisdom,
                                                             monkeypatch) -> None:
    """The driver answers a new length of a known family inline (no call of the member) only
    while the store holds no FFT entry and its re-check is not due: an entry of one length's
    problem, once the store has been read, is taken as a plan takes it, re-check due or not;
    the lengths without one keep the family's bits."""
    rng = np.random.default_rng(8)
    nfft.rfft(rng.standard_normal(32))  # makes the family
    x = rng.standard_normal(56)
    budget = _engines_cpu.cores()
    device = _engines_cpu._device(_engines_cpu.installed_libraries())
    wisdom.record(_engines_cpu.fft_problem(describe(x.shape, x.dtype, kind="r2c"), budget), device,
                  {"label": "scipy", "params": {"threads": 1}})
    seen = rng.standard_normal(58)
    assert np.array_equal(nfft.rfft(seen), FFT(seen, kind="r2c").plan().execute())  # (re-check due: the store read)
    monkeypatch.setattr(_quick, "WISDOM_RECHECK", 3600.0)  # no re-check due from here on
    got = nfft.rfft(x)
    plan = FFT(x, kind="r2c").plan()
    assert plan.chosen_by == "wisdom" and np.array_equal(got, plan.execute())
    other = rng.standard_normal(60)
    assert np.array_equal(nfft.rfft(other), FFT(other, kind="r2c").plan().execute())
    assert described == [32, 56]


@pytest.mark.parametrize("name", ["dct", "idct", "dst", "idst"])
def test_trig_members_and_their_wisdom(fresh, wisdom, name) -> None:
    """DCT/DST families: each length gives scipy's numbers and its plan's bits; a stale or
    foreign wisdom entry keeps the quick path (no plan), a usable one is taken exactly."""
    trig_plan_cache().clear()
    rng = np.random.default_rng(6)
    fn, ref = getattr(nsfft, name), getattr(scipy.fft, name)
    transform, inverse = name.lstrip("i"), name.startswith("i")
    budget = _engines_cpu.cores()
    libraries = _trig_engine._installed_once()
    device = _trig_engine._device(libraries)
    xs = {n: rng.standard_normal(n) for n in (20, 37, 64, 101, 128)}

    def layout(x):
        return _trig_engine.describe_trig(x.shape, x.dtype, transform=transform, type=2, axes=None, s=None,
                                          norm=None, orthogonalize=None)

    wisdom.record(_trig_engine.trig_problem(layout(xs[101]), False, budget), {"device": "another"},
                  {"label": "scipy", "params": {"threads": 1}})
    wisdom.record(_trig_engine.trig_problem(layout(xs[64]), False, budget), device,
                  {"label": "gone_library", "params": {"threads": 1}})
    wisdom.record(_trig_engine.trig_problem(layout(xs[128]), False, budget), device,
                  {"label": "scipy", "params": {"threads": 1}})
    for type_, norm in [(2, None), (3, None), (1, "ortho"), (4, "forward")]:
        for n, x in xs.items():
            got = fn(x, type=type_, norm=norm, workers=budget)  # the budget the plan below has
            expected = ref(x, type=type_, norm=norm)
            assert np.linalg.norm(got - expected) <= 1e-12 * np.linalg.norm(expected)
            plan = (DCT if transform == "dct" else DST)(x, type=type_, norm=norm).plan()
            assert np.array_equal(got, plan.execute("inverse" if inverse else "forward")), (type_, norm, n)
            if (type_, norm) == (2, None):
                assert plan.chosen_by == ("wisdom" if n == 128 else "heuristic")
    assert trig_plan_cache().misses == 0


def test_runner_cache_bounds_families() -> None:
    """Families are kept beside the runners, under the same bound, not counted as runners, and
    dropped by ``resize`` and ``clear`` as runners are."""
    cache = _quick.RunnerCache(maxsize=2)
    for key in "abc":
        cache.put_family(key, len)
        cache.put(key, len)
    assert cache.family("a") is None and cache.family("c") is len and cache.lookup("a") is None
    assert len(cache) == 2 and cache.misses == 3
    cache.resize(1)
    assert cache.family("b") is None and cache.family("c") is len
    cache.put("c", len)
    cache.clear(families=False)  # the runners only: the families stay
    assert cache.family("c") is len and cache.lookup("c") is None and cache.misses == 0 and len(cache) == 0
    cache.clear()
    assert cache.family("c") is None and cache.lookup("c") is None and cache.misses == 0


@pytest.mark.parametrize("length", [4500, 1 << 17])  # the quick path, and a one-call plan beyond it
@pytest.mark.parametrize("namespace", [nfft, nsfft], ids=["numpy", "scipy"])
def test_one_call_functions_plan_no_fftw_on_a_new_shape(fresh, monkeypatch, namespace, length) -> None:
    """A plan made for repeated use takes FFTW for a large real 1-D transform (the heuristic's
    first); a one-call function takes the first library that plans nothing - an FFTW plan costs a
    new length milliseconds - on the quick path and on its plans alike, with the plan's bits."""
    pytest.importorskip("pyfftw")
    x = _operand(np.random.default_rng(11), (length,), np.float64)
    layout = describe(x.shape, x.dtype, kind="r2c")
    assert _engines_cpu.first_candidate(layout, 1).label == "pyfftw"
    built = []
    original = _engines_cpu.LIBRARIES["pyfftw"].build
    monkeypatch.setattr(_engines_cpu.LIBRARIES["pyfftw"], "build", lambda *a, **k: built.append(1) or original(*a, **k))
    got = namespace.rfft(x)
    assert built == []
    assert np.array_equal(got, namespace.rfft(x))  # the second call: the same runner or plan
    assert np.array_equal(got, _planned(x, "rfft", None, None))
    reference = np.fft.rfft(x.astype(np.float64))
    assert np.linalg.norm(got - reference) <= 1e-13 * np.linalg.norm(reference)
    assert "pyfftw" not in one_call_engines(layout)
    assert FFT(x, kind="r2c").plan().candidate.label == "pyfftw" and len(built) == 1  # plans keep the heuristic's


def test_one_call_functions_take_a_wisdom_entry_of_any_library(fresh, wisdom) -> None:
    """Where the wisdom store holds an entry of the problem (autotune), one-call functions rank
    every library, as plans do, and take the entry's choice, FFTW included."""
    pytest.importorskip("pyfftw")
    x = _operand(np.random.default_rng(12), (1 << 17,), np.float64)
    layout = describe(x.shape, x.dtype, kind="r2c")
    assert one_call_engines(layout) is not None
    budget = _engines_cpu.cores()
    device = _engines_cpu._device(_engines_cpu.installed_libraries())
    default_wisdom().record(_engines_cpu.fft_problem(layout, budget), device,
                            {"label": "pyfftw", "params": {"threads": 1, "effort": "estimate"}})
    assert one_call_engines(layout) is None
    got = nfft.rfft(x)
    (kept,) = [plan for plans in plan_cache()._plans.values() for plan in plans]
    assert kept.candidate.label == "pyfftw" and kept.chosen_by == "wisdom"
    reference = np.fft.rfft(x)
    assert np.linalg.norm(got - reference) <= 1e-13 * np.linalg.norm(reference)
    assert np.array_equal(got, FFT(x, kind="r2c").plan().execute())  # the wisdom entry's library, as a plan's


@pytest.mark.parametrize("namespace", [nfft, nsfft], ids=["numpy", "scipy"])
def test_lists_of_axes_and_lengths_take_the_quick_path(fresh, namespace) -> None:
    """``s`` and ``axes`` given as lists (as ``scipy.signal.fftconvolve`` passes them) key the
    quick path as tuples do: one runner per signature, no plan, the tuple call's bits."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((30, 31))
    calls = [("rfftn", dict(s=[40, 48], axes=[0, 1])), ("rfftn", dict(s=[64], axes=[1])),
             ("fftn", dict(s=[33], axes=[0])), ("irfftn", dict(s=[30, 60], axes=[0, 1]))]
    for name, kwargs in calls:
        operand = {"rfftn": x, "fftn": x + 1j * x[::-1], "irfftn": namespace.rfftn(x, s=[30, 60], axes=[0, 1])}[name]
        listed = getattr(namespace, name)(operand, **kwargs)
        again = getattr(namespace, name)(operand, **kwargs)
        tupled = getattr(namespace, name)(operand, **{k: tuple(v) for k, v in kwargs.items()})
        assert np.array_equal(listed, tupled) and np.array_equal(listed, again), (name, kwargs)
        reference = getattr(np.fft, name)(operand, **kwargs)
        assert np.linalg.norm(listed - reference) <= 1e-13 * np.linalg.norm(reference)
    assert plan_cache().misses == 0
    assert runner_cache().misses == len(calls) + 1  # (irfftn's operand: one rfftn signature more)
