"""The quick path's runner families (one per call signature but for the transform's length):
a member gives a plan's bits for its own length, families do not leak across kinds, directions,
dtypes, norms, thread budgets or out of the band where the heuristic's choice is one library,
and a wisdom entry of a member's exact problem (usable, stale or of another device) is looked
up as a plan would - for FFTs and for DCTs/DSTs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import nvmathpy.fft as nfft
import nvmathpy.scipy.fft as nsfft
from nvmathpy.fft import DCT, DST, FFT, _driver, _engines_cpu, _quick, _trig_engine
from nvmathpy.fft._driver import plan_cache, runner_cache
from nvmathpy.fft._heuristic import SMALL, THREADED_FROM, small_band
from nvmathpy.fft._layout import describe
from nvmathpy.fft.trig_plan import trig_plan_cache
from nvmathpy.plan.wisdom import default_wisdom


def _operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.fixture
def fresh() -> None:
    runner_cache().clear()
    plan_cache().clear()
    trig_plan_cache().clear()
    yield
    runner_cache().clear()


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
    """What an FFT plan of the one-call function ``name``'s problem on ``x`` computes."""
    kind = {"fft": "c2c", "ifft": "c2c", "rfft": "r2c", "ihfft": "r2c", "irfft": "c2r", "hfft": "c2r"}[name]
    direction = "inverse" if name in ("ifft", "irfft", "ihfft") else "forward"
    plan = FFT(x, axes=[-1], s=None if n_out is None else [n_out], kind=kind, norm=norm).plan()
    return plan.execute(direction)


CASES = [("fft", np.complex128), ("fft", np.complex64), ("ifft", np.complex128), ("rfft", np.float64),
         ("rfft", np.float32), ("ihfft", np.float64), ("irfft", np.complex128), ("irfft", np.complex64),
         ("hfft", np.complex128)]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,dtype", CASES)
def test_members_give_a_plans_bits(fresh, described, name, dtype, norm) -> None:
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


def test_full_spectrum_members_keep_rfft_bits(fresh, described) -> None:
    """Real-input ``fft`` on the family path: its first half is ``rfft``'s bit for bit, the rest
    the conjugate mirror with zeros +0 (as the plan path gives them)."""
    rng = np.random.default_rng(2)
    for namespace in (nfft, nsfft):
        for n in (16, 97, 255, 1000, 1):
            x = rng.standard_normal((3, n))
            got, half = namespace.fft(x), namespace.rfft(x)
            assert np.array_equal(got[..., :half.shape[-1]], half)
            reference = np.fft.fft(x)
            assert np.linalg.norm(got - reference) <= 1e-12 * max(np.linalg.norm(reference), 1.0)
            rest = got[..., half.shape[-1]:]
            assert not np.signbit(rest.imag[rest.imag == 0]).any()
    zeros = nfft.fft(np.array([1.0, 0.0, 0.0, 0.0, 0.0]))
    assert not np.signbit(zeros.imag).any()


def test_families_do_not_leak(fresh) -> None:
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


def test_no_member_outside_the_band(fresh, described) -> None:
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
    of the band (per kind and dtype), ducc0 on one thread where ducc0 is installed."""
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
        if "ducc0" in _engines_cpu.installed_libraries():
            assert str(choices.pop()) == "ducc0(threads=1)"


@pytest.fixture
def wisdom(tmp_path, monkeypatch):
    monkeypatch.setattr(_quick, "WISDOM_RECHECK", 0.0)  # look at the store on every new signature
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NVMATHPY_WISDOM", "on")
    return default_wisdom()


def test_wisdom_entries_of_members(fresh, described, wisdom) -> None:
    """A usable entry of one length's exact problem is taken (as a plan takes it) although the
    family exists; an entry of another device or naming an unknown library changes nothing,
    and no plan is made for either."""
    if "ducc0" not in _engines_cpu.installed_libraries():
        pytest.skip("the family runs on ducc0")
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


@pytest.mark.parametrize("name", ["dct", "idct", "dst", "idst"])
def test_trig_members_and_their_wisdom(fresh, wisdom, name) -> None:
    """DCT/DST families: each length gives scipy's numbers and its plan's bits; a stale or
    foreign wisdom entry keeps the quick path (no plan), a usable one is taken exactly."""
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

