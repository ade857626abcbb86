"""The FFT heuristic: which library, thread count and FFTW effort to try first, without timing.

``plan()`` with no wisdom takes the first candidate (always cheap to plan: FFTW_MEASURE only
from the wisdom calibration kept, :func:`calibrated_fftw`);
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
points) multi-dimensional double ones; FFTW leads for large 1-D real transforms, ducc0 next
(it plans a new length in microseconds, where MKL and FFTW take far longer: the one-call
functions take the first library that keeps no state, :mod:`._quick`). scipy.fft
(the same kernel as the binding, through SciPy's Python functions) comes last. Where this
machine is calibrated (``python -m nvmathpy tune``, :mod:`._calibrate`: one transform of a
smooth shape - a 1-D length beyond the small band, a square, a cube - by kind, precision and
size), the library measured fastest there goes first instead; the small band keeps its one
answer for every length in the one-call functions (their runner families rely on it), while a
plan made for repeated use takes the calibrated library there too (calibration measures 1,024
points, which covers 256 on). Where calibration also found FFTW at FFTW_MEASURE fastest for a plan
of the very shape it measured, and kept FFTW's wisdom of it, a plan made for repeated use on
that shape at the calibration's thread count tries that FFTW plan first, built from the kept
wisdom only (:func:`calibrated_fftw`): planning it costs a look-up, never a measurement.
Threads: problems of fewer than 2^15 elements run on one thread (below that, threading costs
more than it saves), larger ones on the whole budget.
"""

from __future__ import annotations

import functools
import math

from ..plan import Candidate
from ..plan.calibration import calibrated
from ._layout import Layout

__all__ = ["CALIBRATED_KINDS", "CALIBRATED_SHAPES", "CALIBRATION_WISDOM", "builtin_order", "calibrated_fftw",
           "calibration_name", "first_library", "heuristic_candidate", "library_order", "rank", "small_band", "smooth",
           "threads_guess"]

#: Below this many elements per call, one thread is the guess.
THREADED_FROM = 1 << 15
#: Transforms of at most this many points count as small.
SMALL = 1024
#: The transforms whose first library is calibrated per machine (``python -m nvmathpy tune``,
#: :mod:`._calibrate`): one transform of these kinds over every axis of its operand (no batch),
#: of smooth lengths (no prime factor above 7), nearest in size one of these shapes of as many
#: axes, within :data:`CALIBRATED_REACH` of the smallest and the largest size; one axis beyond
#: the small band (:func:`small_band`, whose one answer for every length the quick path's runner
#: families rely on; a plan made for repeated use takes the values there too), several axes of
#: lengths within :data:`CALIBRATED_ASPECT` of each other. A step of 4 between sizes: with a
#: step of 16, 2^16 and 2^20 lie halfway between two values that may differ and took the
#: smaller's.
CALIBRATED_KINDS = ("c2c", "r2c")
CALIBRATED_SHAPES = {1: tuple((1 << k,) for k in range(10, 23, 2)),
                     2: tuple((1 << k,) * 2 for k in range(8, 12)),
                     3: tuple((1 << k,) * 3 for k in range(5, 8))}
CALIBRATED_REACH = 4
CALIBRATED_ASPECT = 4
#: The ``wisdom`` parameter of the pyFFTW candidate planned from calibration's FFTW wisdom only
#: (:func:`calibrated_fftw`; its build fails, and the plan takes the next candidate, where
#: FFTW's wisdom holds no plan of the problem).
CALIBRATION_WISDOM = "calibration"


def small_band(length: int, elements: int) -> bool:
    """Whether a transform over one axis of ``length`` points, ``elements`` in all (batch times
    length), gets the small-problem answer of :func:`library_order` and :func:`threads_guess`:
    the same library order and one thread whatever the length (the quick path keys one runner
    per such band, :mod:`._quick`)."""
    return length <= SMALL and elements < THREADED_FROM


def calibration_name(kind: str, precision: str, shape: tuple[int, ...]) -> str:
    """The name of a calibrated value (``fft.<kind>.<precision>.<lengths joined by x>``).

    Examples
    --------
    >>> calibration_name("c2c", "double", (65536,)), calibration_name("r2c", "single", (512, 512))
    ('fft.c2c.double.65536', 'fft.r2c.single.512x512')
    """
    return f"fft.{kind}.{precision}.{'x'.join(map(str, shape))}"


def first_library(layout: Layout, planned: bool = False) -> str | None:
    """The library calibrated first for ``layout`` on this machine, or ``None`` (not covered,
    or not calibrated: the built-in rules decide). Only ``tune`` measures these values: a
    first transform takes microseconds, and a measurement on first need would cost it many
    thousand times that. ``planned``: for a plan made for repeated use, which the small band's
    one answer for every length (the one-call functions' runner families) does not bind.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.fft._layout import describe
    >>> first_library(describe((3, 10007), np.dtype("complex128"))) is None  # a batch of prime lengths: not covered
    True
    """
    value = _calibrated_value(layout, band=planned)
    return value.get("first") if value is not None else None


def calibrated_fftw(layout: Layout, threads: int) -> dict | None:
    """What a plan of ``layout`` on ``threads`` threads needs to build the FFTW_MEASURE plan that
    calibration measured fastest for exactly this shape (the ``extra`` of
    :meth:`._pyfftw.PyfftwLibrary.build`: FFTW's wisdom of it and the planning time limit it
    was made under), or ``None`` where calibration found no such plan for it.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.fft._layout import describe
    >>> calibrated_fftw(describe((10007,), np.dtype("complex128")), 1) is None
    True
    """
    value = _calibrated_value(layout, band=True)
    if (value is None or value.get("planned") != "pyfftw" or value.get("threads") != threads
            or _covering(layout.kind, layout.precision, layout.lengths)
            != calibration_name(layout.kind, layout.precision, layout.lengths)):
        return None
    return {"fftw_wisdom": value.get("fftw_wisdom"), "fftw_time_limit": value.get("fftw_time_limit")}


def _calibrated_value(layout: Layout, band: bool = False) -> dict | None:
    """The calibrated value covering ``layout`` (``None``: not covered, or not calibrated); in
    the small band only with ``band`` (for plans made for repeated use)."""
    lengths = layout.lengths
    if (layout.kind not in CALIBRATED_KINDS or len(lengths) not in CALIBRATED_SHAPES or layout.in_shape != lengths
            or (not band and len(lengths) == 1 and small_band(lengths[0], layout.size))):
        return None
    name = _covering(layout.kind, layout.precision, lengths)
    value = calibrated(name, None) if name else None
    return value if isinstance(value, dict) else None


@functools.lru_cache(maxsize=256)
def _covering(kind: str, precision: str, lengths: tuple[int, ...]) -> str | None:
    """The calibrated value covering one transform of ``lengths`` (``None``: none does)."""
    shapes = CALIBRATED_SHAPES[len(lengths)]
    size, sizes = math.prod(lengths), [math.prod(shape) for shape in shapes]
    if (not sizes[0] / CALIBRATED_REACH <= size <= sizes[-1] * CALIBRATED_REACH or not all(map(smooth, lengths))
            or max(lengths) > CALIBRATED_ASPECT * min(lengths)):
        return None
    return calibration_name(kind, precision, min(shapes, key=lambda shape: abs(math.log(size / math.prod(shape)))))


def smooth(n: int) -> bool:
    """Whether ``n`` has no prime factor above 7.

    Examples
    --------
    >>> smooth(1000), smooth(10007), smooth(1)
    (True, False, True)
    """
    for p in (2, 3, 5, 7):
        while n % p == 0:
            n //= p
    return n == 1


def library_order(layout: Layout, planned: bool = False) -> list[str]:
    """Libraries in the heuristic's order for ``layout`` (``"pyfftw"`` at FFTW_ESTIMATE): the
    built-in rules' (:func:`builtin_order`), with the library this machine's calibration puts
    first for such transforms, if any (:func:`first_library`; ``planned``: for a plan made for
    repeated use), moved to the front."""
    order = builtin_order(layout)
    first = first_library(layout, planned)
    return order if first not in order else [first] + [name for name in order if name != first]


def builtin_order(layout: Layout) -> list[str]:
    """Libraries in the order of the built-in rules for ``layout``.

    In the small band (:func:`small_band`, one axis) SciPy's pocketfft called directly leads:
    it is the kernel ``scipy.fft`` runs, with less overhead around it, so it never loses to
    the call a user would otherwise make. The order is the same for every layout of the band
    (the quick path's families rely on it).
    """
    # the cheap tests first: the factorisation costs a new small length more than its transform
    if len(layout.axes) == 1 and small_band(layout.lengths[0], layout.batch * layout.size):
        return ["pocketfft", "ducc0", "mkl_fft", "pyfftw", "scipy"]
    if layout.size <= SMALL or (len(layout.axes) == 1 and layout.batch > 1) or not all(
            smooth(n) for n in layout.lengths):
        return ["ducc0", "mkl_fft", "pyfftw", "pocketfft", "scipy"]
    if layout.kind != "c2c" and len(layout.axes) == 1:
        return ["pyfftw", "ducc0", "mkl_fft", "pocketfft", "scipy"]
    if layout.precision == "single" or (len(layout.axes) > 1 and layout.size >= 1 << 22):
        return ["mkl_fft", "ducc0", "pyfftw", "pocketfft", "scipy"]
    return ["ducc0", "mkl_fft", "pyfftw", "pocketfft", "scipy"]


def threads_guess(layout: Layout, options: list[int]) -> int:
    """One thread for small problems, the whole budget (the largest option) otherwise."""
    elements = layout.batch * layout.size
    return options[0] if elements < THREADED_FROM else options[-1]


def heuristic_candidate(library: str, threads: int, effort: str = "estimate") -> Candidate:
    """The candidate of ``library`` at ``threads`` (pyFFTW at FFTW ``effort``)."""
    if library == "pyfftw":
        return Candidate.of(library, threads=threads, effort=effort)
    return Candidate.of(library, threads=threads)


def rank(layout: Layout, libraries: list[str], threads: list[int]) -> list[Candidate]:
    """Every candidate for ``layout`` over ``libraries`` and ``threads``, best guess first (the
    FFTW plan calibration kept for this shape, on a thread count among ``threads``,
    :func:`calibrated_fftw`, first of all where pyFFTW is among ``libraries``).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.fft._layout import describe
    >>> lay = describe((10007,), np.dtype("complex128"))
    >>> [str(c) for c in rank(lay, ["scipy", "ducc0"], [1, 2])][:2]
    ['ducc0(threads=1)', 'scipy(threads=1)']
    """
    # a plan that may keep state (pyFFTW among its libraries) is made for repeated use: the small
    # band's one answer, which the one-call functions' runner families need, does not bind it
    order = [name for name in library_order(layout, planned="pyfftw" in libraries) if name in libraries]
    best_t = threads_guess(layout, threads)
    other_t = [t for t in reversed(threads) if t != best_t]
    head = [heuristic_candidate(name, best_t) for name in order[:2]]
    measured = [heuristic_candidate("pyfftw", best_t, "measure")] if "pyfftw" in order else []
    other = [heuristic_candidate(order[0], t) for t in other_t[:1]]
    kept = next((t for t in [best_t, *other_t] if calibrated_fftw(layout, t) is not None), None) if measured else None
    if kept is not None:
        # calibration's FFTW_MEASURE plan leads; another one is worth timing less than the other thread count
        head = [Candidate.of("pyfftw", threads=kept, effort="measure", wisdom=CALIBRATION_WISDOM)] + head + other
        head += measured
    else:
        head += measured + other
    rest = [heuristic_candidate(name, t) for t in [best_t, *other_t] for name in order]
    rest += [heuristic_candidate("pyfftw", t, "measure") for t in other_t if "pyfftw" in order]
    rest += [heuristic_candidate("pyfftw", t, "patient") for t in [best_t, *other_t] if "pyfftw" in order]
    ranked: list[Candidate] = []
    for cand in head + rest:
        if cand not in ranked:
            ranked.append(cand)
    return ranked
