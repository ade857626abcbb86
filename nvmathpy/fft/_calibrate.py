"""The FFT library crossovers calibrated per machine (:mod:`nvmathpy.plan.calibration`).

Each value, named ``fft.<kind>.<precision>.<shape>`` for the kinds
:data:`~._heuristic.CALIBRATED_KINDS`, both precisions and the shapes
:data:`~._heuristic.CALIBRATED_SHAPES` (1-D lengths, squares, cubes), is ``{"first":
library}``: the library the heuristic (:func:`._heuristic.library_order`) tries first for one
transform over every axis of smooth lengths (no prime factor above 7, no batch) nearest that
shape's size. Every installed library is timed, at the thread count the heuristic gives that
size, against ``scipy.fft`` (the call a user would otherwise make) in alternating calls
(:func:`~nvmathpy.plan.calibration.interleaved_ratios`); the built-in first choice stays unless
another library beats it by :data:`MARGIN`.

FFTW at FFTW_MEASURE is timed too (planned under :data:`FFTW_PLAN_SECONDS`, forward and, for
complex transforms, backward), on the heuristic's thread count and on the whole budget where
that is more (FFTW's threads pay from smaller sizes than the other libraries' do): where the
faster of those plans beats the first library by :data:`MARGIN` and FFTW plans it again from
the wisdom it left alone, the value also holds ``"planned": "pyfftw"``, that plan's thread
count and FFTW's wisdom of it, and a plan made for repeated use on that very shape (with that
thread count among its options) builds its FFTW plan from that wisdom
(:func:`._heuristic.calibrated_fftw`). It never leads the one-call functions: an FFTW plan
keeps state, and a one-call function must not plan on a shape it may never see again.

Values are measured by ``python -m nvmathpy tune`` only, never on first need: a first transform
takes microseconds, and a measurement would cost it many thousand times that. Layouts without a
value, and the layouts calibration does not cover (batches, lengths with a large prime factor,
strips, the small band of :func:`._heuristic.small_band`, where one library answers for every
length), keep the built-in rules.

The heuristic reads a value once per layout, when it builds a plan or the one-call functions'
runner of a new call signature (:func:`._heuristic.first_library`); repeated calls never read it.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..plan.calibration import OutOfTime, choose_first
from ._engines_cpu import cores, prepare_candidate, thread_options
from ._heuristic import CALIBRATED_KINDS, CALIBRATED_SHAPES, builtin_order, calibration_name, heuristic_candidate, \
    threads_guess
from ._layout import Layout, describe
from ._libraries import LIBRARIES, forget_fftw_wisdom, installed_libraries, measured_fftw_wisdom, plans_from_wisdom_only
from ._quick import _STATELESS, QUICK_ELEMENTS

__all__ = ["CALIBRATIONS", "FFTW_PLAN_SECONDS", "MARGIN", "measure", "measured_fftw_name"]

#: How much faster than the built-in first choice (median of the per-round ratios) another
#: library must be to take its place (as for the solvers: above a busy machine's noise); and
#: FFTW's measured plan than the first library, to lead the plans of its shape.
MARGIN = 1.10
#: Rounds per library (at most, at least), and about how long one pass of a round lasts at least.
ROUNDS = 7
MIN_ROUNDS = 3
CALL_SECONDS = 0.005
#: The most seconds FFTW may plan one direction at FFTW_MEASURE (half the value's time bound,
#: shared among the thread counts timed, where that is less). A search the limit cut short
#: leaves wisdom FFTW does not plan from again: such a plan is not kept
#: (:func:`._pyfftw.plans_from_wisdom_only`).
FFTW_PLAN_SECONDS = 4.0
#: The name of FFTW's measured plan on the heuristic's thread count among the contenders (on
#: another count: :func:`measured_fftw_name`).
MEASURED_FFTW = "pyfftw(measure)"
_DTYPES = {("c2c", "double"): "complex128", ("c2c", "single"): "complex64",
           ("r2c", "double"): "float64", ("r2c", "single"): "float32"}


def measured_fftw_name(threads: int, guess: int) -> str:
    """The contender name of FFTW's measured plan on ``threads`` threads, the heuristic's
    thread count being ``guess``.

    Examples
    --------
    >>> measured_fftw_name(1, 1), measured_fftw_name(2, 1)
    ('pyfftw(measure)', 'pyfftw(measure,threads=2)')
    """
    return MEASURED_FFTW if threads == guess else f"{MEASURED_FFTW[:-1]},threads={threads})"


def _operand(kind: str, precision: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(math.prod(shape))
    x = rng.standard_normal(shape)
    if kind == "c2c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(_DTYPES[kind, precision])


def _contenders(kind: str, layout: Layout, x: np.ndarray, threads: int) -> tuple[str, dict[str, Callable[[], Any]]]:
    """``(built-in first library, {library: call})`` for one transform of ``x``: each installed
    library as the heuristic's candidate at ``threads``. Sizes the one-call functions run
    without a plan (:data:`._quick.QUICK_ELEMENTS`) leave out the libraries that keep state
    between calls: first there, one would send every one-call transform of that size through
    a plan."""
    usable = [name for name in installed_libraries() if LIBRARIES[name].supports(layout)]
    first = next(name for name in builtin_order(layout) if name in usable)
    if layout.size <= QUICK_ELEMENTS:  # the one-call functions' quick path runs only these: no other may lead
        usable = [name for name in usable if name in _STATELESS]
    return first, {name: (lambda f=prepare_candidate(layout, heuristic_candidate(name, threads)).forward: f(x))
                   for name in usable}


def measure(kind: str, precision: str, shape: tuple[int, ...],
            seconds: float) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure the libraries for ``kind`` in ``precision`` on ``shape``: ``({"first": library,
    ...}, {library: median ratio})``, the ratio being scipy.fft's time over the library's
    (:func:`~nvmathpy.plan.calibration.choose_first`, keeping the built-in first choice unless
    another beats it by :data:`MARGIN`), with FFTW's measured plan and its wisdom where that
    beats the first library by :data:`MARGIN` too (see the module's notes). Up to
    :data:`ROUNDS` rounds, as many as ``seconds`` allow;
    :class:`~nvmathpy.plan.calibration.OutOfTime` when not even :data:`MIN_ROUNDS` would."""
    import scipy.fft

    x = _operand(kind, precision, shape)
    layout = describe(shape, x.dtype, axes=tuple(range(len(shape))), kind=kind)
    options = thread_options(cores())
    threads = threads_guess(layout, options)
    # FFTW plans an FFTW_ESTIMATE request from the wisdom it holds: the values measured before
    # this one left theirs, which a user's process planning this shape has not
    forget_fftw_wisdom()
    first, libraries = _contenders(kind, layout, x, threads)
    fftw: dict[int, tuple[Any, dict[str, Any]]] = {}
    if "pyfftw" in installed_libraries() and LIBRARIES["pyfftw"].supports(layout):
        counts = sorted({threads, options[-1]})
        for count in counts:  # each from no wisdom: a plan's wisdom is of that plan alone
            fftw[count] = measured_fftw_wisdom(layout, count, min(FFTW_PLAN_SECONDS, seconds / (2 * len(counts))))
            libraries[measured_fftw_name(count, threads)] = lambda f=fftw[count][0].forward: f(x)
    transform = scipy.fft.fftn if kind == "c2c" else scipy.fft.rfftn
    try:
        _, medians = choose_first(libraries, lambda: transform(x, workers=threads), first, seconds, rounds=ROUNDS,
                                  min_rounds=MIN_ROUNDS, call_seconds=CALL_SECONDS, max_calls=1000, margin=MARGIN)
    except OutOfTime as exc:
        raise OutOfTime(f"fft {kind} {precision} {'x'.join(map(str, shape))}: {exc}") from None
    names = {count: measured_fftw_name(count, threads) for count in fftw}
    measured = {count: medians[name] for count, name in names.items()}
    plain = {name: ratio for name, ratio in medians.items() if name not in names.values()}
    best = max(plain, key=lambda name: plain[name] / (1.0 if name == first else MARGIN))
    value: dict[str, Any] = {"first": best}
    if measured:
        count = max(measured, key=measured.__getitem__)
        if measured[count] > MARGIN * plain[best] and plans_from_wisdom_only(layout, count, fftw[count][1]):
            value.update(planned="pyfftw", threads=count, **fftw[count][1])
    return value, medians


#: Every calibrated FFT value: name -> the measurement (given a time bound), smaller sizes first.
CALIBRATIONS: dict[str, Callable[[float], tuple[Any, dict]]] = {
    calibration_name(kind, precision, shape): (lambda seconds, k=kind, p=precision, s=shape: measure(k, p, s, seconds))
    for shapes in CALIBRATED_SHAPES.values() for kind in CALIBRATED_KINDS for precision in ("double", "single")
    for shape in shapes
}
