"""The FFT library crossovers calibrated per machine (:mod:`nvmathpy.plan.calibration`).

Each value, named ``fft.<kind>.<precision>.<size>`` for the kinds
:data:`~._heuristic.CALIBRATED_KINDS`, both precisions and the sizes
:data:`~._heuristic.CALIBRATED_SIZES`, is ``{"first": library}``: the library the heuristic
(:func:`._heuristic.library_order`) tries first for one 1-D transform of a smooth length (no
prime factor above 7, no batch) nearest that size. Every installed library is timed, at the
thread count the heuristic gives that size, against ``scipy.fft`` (the call a user would
otherwise make) in alternating calls (:func:`~nvmathpy.plan.calibration.interleaved_ratios`);
the built-in first choice stays unless another library beats it by :data:`MARGIN`.

Values are measured by ``python -m nvmathpy tune`` only, never on first need: a first transform
takes microseconds, and a measurement would cost it many thousand times that. Layouts without a
value, and the layouts calibration does not cover (several axes, batches, lengths with a large
prime factor, the small band of :func:`._heuristic.small_band`, where one library answers for
every length), keep the built-in rules.

The heuristic reads a value once per layout, when it builds a plan or the one-call functions'
runner of a new call signature (:func:`._heuristic.first_library`); repeated calls never read it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..plan.calibration import OutOfTime, choose_first
from ._engines_cpu import cores, prepare_candidate, thread_options
from ._heuristic import CALIBRATED_KINDS, CALIBRATED_SIZES, builtin_order, calibration_name, heuristic_candidate, \
    threads_guess
from ._layout import describe
from ._libraries import LIBRARIES, installed_libraries
from ._quick import _STATELESS, QUICK_ELEMENTS

__all__ = ["CALIBRATIONS", "MARGIN", "measure"]

#: How much faster than the built-in first choice (median of the per-round ratios) another
#: library must be to take its place (as for the solvers: above a busy machine's noise).
MARGIN = 1.10
#: Rounds per library (at most, at least), and about how long one pass of a round lasts at least.
ROUNDS = 7
MIN_ROUNDS = 3
CALL_SECONDS = 0.005
_DTYPES = {("c2c", "double"): "complex128", ("c2c", "single"): "complex64",
           ("r2c", "double"): "float64", ("r2c", "single"): "float32"}


def _contenders(kind: str, precision: str, size: int) -> tuple[str, dict[str, Callable[[], Any]], Callable[[], Any]]:
    """``(built-in first library, {library: call}, scipy.fft's call)`` for one transform of
    ``size`` points: each installed library as the heuristic's candidate at the heuristic's
    thread count, ``scipy.fft`` with as many workers. Sizes the one-call functions run without
    a plan (:data:`._quick.QUICK_ELEMENTS`) leave out the libraries that keep state between
    calls: first there, one would send every one-call transform of that size through a plan."""
    import scipy.fft

    rng = np.random.default_rng(size)
    x = rng.standard_normal(size)
    if kind == "c2c":
        x = x + 1j * rng.standard_normal(size)
    x = x.astype(_DTYPES[kind, precision])
    layout = describe((size,), x.dtype, kind=kind)
    threads = threads_guess(layout, thread_options(cores()))
    usable = [name for name in installed_libraries() if LIBRARIES[name].supports(layout)]
    first = next(name for name in builtin_order(layout) if name in usable)
    if size <= QUICK_ELEMENTS:  # the one-call functions' quick path runs only these: no other may lead
        usable = [name for name in usable if name in _STATELESS]
    calls = {name: (lambda f=prepare_candidate(layout, heuristic_candidate(name, threads)).forward: f(x)) for name in usable}
    transform = scipy.fft.fft if kind == "c2c" else scipy.fft.rfft
    return first, calls, lambda: transform(x, workers=threads)


def measure(kind: str, precision: str, size: int, seconds: float) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure the libraries for ``kind`` in ``precision`` at ``size`` points: ``({"first":
    library}, {library: median ratio})``, the ratio being scipy.fft's time over the library's
    (:func:`~nvmathpy.plan.calibration.choose_first`, keeping the built-in first choice unless
    another beats it by :data:`MARGIN`). Up to :data:`ROUNDS` rounds, as many as ``seconds``
    allow; :class:`~nvmathpy.plan.calibration.OutOfTime` when not even :data:`MIN_ROUNDS` would."""
    first, libraries, reference = _contenders(kind, precision, size)
    try:
        best, medians = choose_first(libraries, reference, first, seconds, rounds=ROUNDS, min_rounds=MIN_ROUNDS,
                                     call_seconds=CALL_SECONDS, max_calls=1000, margin=MARGIN)
    except OutOfTime as exc:
        raise OutOfTime(f"fft {kind} {precision} {size}: {exc}") from None
    return {"first": best}, medians


#: Every calibrated FFT value: name -> the measurement (given a time bound), smaller sizes first.
CALIBRATIONS: dict[str, Callable[[float], tuple[Any, dict]]] = {
    calibration_name(kind, precision, size): (lambda seconds, k=kind, p=precision, n=size: measure(k, p, n, seconds))
    for kind in CALIBRATED_KINDS for precision in ("double", "single") for size in CALIBRATED_SIZES
}
