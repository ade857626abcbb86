"""The one-call functions' quick path (nvmathpy.fft._quick): the same results as a plan for the
same problem, what it leaves to plans, results that do not depend on the operand's layout or on
how a batch is sliced, shared runners across threads, and pyFFTW imported without dask."""

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
from nvmathpy.fft import FFT, _engines_cpu
from nvmathpy.fft._driver import plan_cache, runner_cache
from nvmathpy.fft._heuristic import rank
from nvmathpy.fft._layout import describe
from nvmathpy.fft._quick import QUICK_ELEMENTS
from nvmathpy.plan.wisdom import default_wisdom

ROOT = Path(__file__).resolve().parents[1]


def _operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.fixture
def fresh() -> None:
    runner_cache().clear()
    plan_cache().clear()
    yield
    runner_cache().clear()


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


@pytest.mark.parametrize("namespace", [nfft, nsfft], ids=["numpy", "scipy"])
@pytest.mark.parametrize("n", [None, 7, 64, 130])
def test_quick_full_spectrum_of_real_input(fresh, namespace, n) -> None:
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
    assert not np.signbit(rest.imag[rest.imag == 0]).any()  # zeros come out +0, as the plan path's


def test_large_or_unusual_calls_are_left_to_plans(fresh) -> None:
    rng = np.random.default_rng(6)
    big = _operand(rng, (QUICK_ELEMENTS // 64 + 1, 64), np.complex128)
    nfft.fft(big)
    nfft.fft(_operand(rng, (16,), np.complex128).astype(">c16"))  # byte-swapped: converted, then planned
    nfft.ifft(_operand(rng, (16,), np.float64))  # needs a conversion to complex
    assert plan_cache().misses == 3 and len(runner_cache()) == 3
    assert not any(runner_cache()._runners.values())  # each signature marked "plans run it"


def test_wisdom_entry_is_taken_as_a_plan_takes_it(fresh, tmp_path, monkeypatch) -> None:
    """The quick path takes the wisdom store's choice for the exact problem, as a plan does (same
    bits); an entry of another device or problem changes nothing; a stateful choice is planned."""
    from nvmathpy.fft import _quick

    monkeypatch.setattr(_quick, "WISDOM_RECHECK", 0.0)  # look at the store on every new signature
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NVMATHPY_WISDOM", "on")
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

