"""The FFT heuristic: which library, thread count and FFTW effort to try first, without timing.

``plan()`` with no wisdom takes the first candidate (always cheap to plan: never FFTW_MEASURE);
``autotune(effort="measure")`` times the first :data:`~nvmathpy.plan.autotune.MEASURE_TOP`
(the two best-guess libraries at the best-guess thread count, pyFFTW at FFTW_MEASURE, and the
best guess at another thread count); ``"exhaustive"`` times them all, FFTW_PATIENT included.

The rules come from timing every installed library (ducc0, mkl_fft, pyFFTW at FFTW_ESTIMATE,
scipy.fft) on forward transforms of many sizes, shapes and both precisions, at each thread
count; ``benchmarks/bench_fft.py`` runs those cases and prints the table.

The rules (:func:`library_order`): SciPy's pocketfft binding called directly leads in the
small band of 1-D transforms (:func:`small_band`); ducc0 leads for double precision, for sizes
with a prime factor above 7, for batches of 1-D transforms and for other small transforms
(<= 1024 points); mkl_fft leads for larger single-precision transforms and for large (>= 2^22
points) multi-dimensional double ones; FFTW leads for large 1-D real transforms. scipy.fft
(the same kernel as the binding, through SciPy's Python functions) comes last. Threads: problems of
fewer than 2^15 elements run on one thread (below that, threading costs more than it saves),
larger ones on the whole budget.
"""

from __future__ import annotations

from ..plan import Candidate
from ._layout import Layout

__all__ = ["rank", "library_order", "small_band", "threads_guess"]

#: Below this many elements per call, one thread is the guess.
THREADED_FROM = 1 << 15
#: Transforms of at most this many points count as small.
SMALL = 1024


def largest_prime_factor(n: int) -> int:
    """The largest prime factor of ``n`` (``1`` for ``n == 1``)."""
    largest, p = 1, 2
    while p * p <= n:
        while n % p == 0:
            largest, n = p, n // p
        p += 1
    return max(largest, n) if n > 1 else largest


def small_band(length: int, elements: int) -> bool:
    """Whether a transform over one axis of ``length`` points, ``elements`` in all (batch times
    length), gets the small-problem answer of :func:`library_order` and :func:`threads_guess`:
    the same library order and one thread whatever the length (the quick path keys one runner
    per such band, :mod:`._quick`)."""
    return length <= SMALL and elements < THREADED_FROM


def library_order(layout: Layout) -> list[str]:
    """Libraries in the heuristic's order for ``layout`` (``"pyfftw"`` at FFTW_ESTIMATE).

    In the small band (:func:`small_band`, one axis) SciPy's pocketfft called directly leads:
    it is the kernel ``scipy.fft`` runs, with less overhead around it, so it never loses to
    the call a user would otherwise make. The order is the same for every layout of the band
    (the quick path's families rely on it): a calibrated crossover that changes it must hold
    for the whole band.
    """
    # the cheap tests first: the factorisation costs a new small length more than its transform
    if len(layout.axes) == 1 and small_band(layout.lengths[0], layout.batch * layout.size):
        return ["pocketfft", "ducc0", "mkl_fft", "pyfftw", "scipy"]
    if layout.size <= SMALL or (len(layout.axes) == 1 and layout.batch > 1) or any(
            largest_prime_factor(n) > 7 for n in layout.lengths):
        return ["ducc0", "mkl_fft", "pyfftw", "pocketfft", "scipy"]
    if layout.kind != "c2c" and len(layout.axes) == 1:
        return ["pyfftw", "mkl_fft", "ducc0", "pocketfft", "scipy"]
    if layout.precision == "single" or (len(layout.axes) > 1 and layout.size >= 1 << 22):
        return ["mkl_fft", "ducc0", "pyfftw", "pocketfft", "scipy"]
    return ["ducc0", "mkl_fft", "pyfftw", "pocketfft", "scipy"]


def threads_guess(layout: Layout, options: list[int]) -> int:
    """One thread for small problems, the whole budget (the largest option) otherwise."""
    elements = layout.batch * layout.size
    return options[0] if elements < THREADED_FROM else options[-1]


def _candidate(library: str, threads: int, effort: str = "estimate") -> Candidate:
    if library == "pyfftw":
        return Candidate.of(library, threads=threads, effort=effort)
    return Candidate.of(library, threads=threads)


def rank(layout: Layout, libraries: list[str], threads: list[int]) -> list[Candidate]:
    """Every candidate for ``layout`` over ``libraries`` and ``threads``, best guess first.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.fft._layout import describe
    >>> lay = describe((10007,), np.dtype("complex128"))
    >>> [str(c) for c in rank(lay, ["scipy", "ducc0"], [1, 2])][:2]
    ['ducc0(threads=1)', 'scipy(threads=1)']
    """
    order = [name for name in library_order(layout) if name in libraries]
    best_t = threads_guess(layout, threads)
    other_t = [t for t in reversed(threads) if t != best_t]
    head = [_candidate(name, best_t) for name in order[:2]]
    if "pyfftw" in order:
        head.append(_candidate("pyfftw", best_t, "measure"))
    if other_t:
        head.append(_candidate(order[0], other_t[0]))
    rest = [_candidate(name, t) for t in [best_t, *other_t] for name in order]
    rest += [_candidate("pyfftw", t, "measure") for t in other_t if "pyfftw" in order]
    rest += [_candidate("pyfftw", t, "patient") for t in [best_t, *other_t] if "pyfftw" in order]
    ranked: list[Candidate] = []
    for cand in head + rest:
        if cand not in ranked:
            ranked.append(cand)
    return ranked
