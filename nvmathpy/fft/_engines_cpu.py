"""The CPU FFT engine: candidates across the installed libraries, thread counts and FFTW efforts.

A candidate is ``Candidate.of(library, threads=t)`` (plus ``effort=`` for pyFFTW). The
engine lists them in the heuristic's order (see :mod:`nvmathpy.fft._heuristic`), so
``plan()`` without wisdom takes a cheap-to-plan guess and ``autotune()`` times the top few
(or all of them with effort ``"exhaustive"``, which adds FFTW_PATIENT).

Results do not depend on the operand's memory layout: a library whose rounding does (ducc0
over several axes, mkl_fft) is handed a C-ordered copy of any other layout, so one logical
problem gives the same bits for C-, Fortran-ordered and strided operands, as NumPy's do. The
problem key holds no strides either, so the library chosen - by the heuristic, or by wisdom
after autotune - is one per logical problem, whatever layout it was tuned on.

CUDA execution uses the cuFFT engine of :mod:`._cuda_engine` instead.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Mapping

import numpy as np

from ..execution import ExecutionCPU, cpu_description
from ..plan import Candidate, Engine, Problem
from ..plan.base import remembered_choice
from ..plan.wisdom import default_wisdom
from ..errors import MissingDependencyError
from ._heuristic import CALIBRATION_WISDOM, calibrated_fftw, library_order, rank, threads_guess
from ._layout import Layout
from ._libraries import LIBRARIES, FFTPrepared, installed_libraries

__all__ = ["CPUFFTEngine", "cores", "engine_for", "fft_problem", "first_candidate", "layout_of", "prepare_candidate", "thread_options", "wisdom_choice"]


@functools.lru_cache(maxsize=1)
def cores() -> int:
    """The machine's core count, the default thread budget (``os.cpu_count()`` costs
    microseconds a call: asked once)."""
    return os.cpu_count() or 1


def thread_options(budget: int) -> list[int]:
    """Thread counts worth trying under ``budget``: 1, powers of two below it, and the budget."""
    counts, t = {1, budget}, 2
    while t < budget:
        counts.add(t)
        t *= 2
    return sorted(counts)


@functools.lru_cache(maxsize=256)
def layout_of(problem: Problem) -> Layout:
    """Rebuild the :class:`Layout` stored in an FFT problem key (memoised: plans re-ask)."""
    return Layout(
        problem.get("kind"),
        tuple(problem.get("axes")),
        tuple(problem.get("lengths")),
        tuple(problem.get("in_shape")),
        np.dtype(problem.get("in_dtype")),
        tuple(problem.get("out_shape")),
        np.dtype(problem.get("out_dtype")),
        problem.get("norm"),
    )


class CPUFFTEngine(Engine):
    """FFTs on the host through scipy.fft, ducc0, pyFFTW and mkl_fft.

    Parameters
    ----------
    budget
        The most threads a candidate may use.
    libraries
        Restrict candidates to these library names (``None``: every installed one).
    fftw_time_limit
        Seconds FFTW may spend planning one candidate (``None``: no limit).
    """

    name = "cpu-fft"

    def __init__(self, budget: int, libraries: tuple[str, ...] | None = None, fftw_time_limit: float | None = None):
        self.budget = budget
        self.fftw_time_limit = fftw_time_limit
        installed = installed_libraries()
        if libraries is None:
            self.libraries = installed
        else:
            missing = [name for name in libraries if name not in installed]
            if missing:
                raise MissingDependencyError(
                    f"FFT engine(s) {missing} are not installed here (installed: {list(installed)}); "
                    "pip install 'nvmathpy[cpu]' brings pyfftw, ducc0 and mkl_fft"
                )
            self.libraries = tuple(libraries)

    def candidates(self, problem: Problem) -> list[Candidate]:
        return list(_ranked(problem, self.libraries, self.budget))

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> FFTPrepared:
        return prepare_candidate(layout_of(problem), candidate, extra, self.fftw_time_limit)

    def device(self) -> dict[str, Any]:
        return _device(self.libraries)


def prepare_candidate(layout: Layout, candidate: Candidate, extra: Mapping[str, Any] | None = None,
                      fftw_time_limit: float | None = None) -> FFTPrepared:
    """``candidate`` built for ``layout``: the plans' engine and the one-call functions' quick
    path (:mod:`._quick`) prepare candidates here alike, so one logical problem gets the same
    computation whichever path runs it, and whatever the operand's memory layout."""
    library = LIBRARIES[candidate.label]
    if candidate.label == "pyfftw":
        if extra is None and candidate.params.get("wisdom") == CALIBRATION_WISDOM:
            extra = calibrated_fftw(layout, candidate.params["threads"])
        prepared = library.build(layout, candidate, extra, time_limit=fftw_time_limit)
    else:
        prepared = library.build(layout, candidate, extra)
    if _strides_matter(candidate.label, layout):
        _on_c_ordered_input(prepared)
    return prepared


def first_candidate(layout: Layout, budget: int, among: frozenset[str] | None = None) -> Candidate:
    """The heuristic's first candidate for ``layout`` among the installed libraries (and among
    ``among``, when given) under a thread ``budget``: what ``plan()`` takes without wisdom
    (``rank(...)[0]``), found without ranking the others."""
    libraries = installed_libraries()
    name = next(n for n in library_order(layout)
                if n in libraries and (among is None or n in among) and LIBRARIES[n].supports(layout))
    return _candidate_of(name, threads_guess(layout, _options(budget)))


def fft_problem(layout: Layout, threads: int, inplace: bool = False, **fields: Any) -> Problem:
    """The problem key of ``layout`` under a thread budget (plans key wisdom with it; ``fields``:
    callbacks and CUDA details, none on the quick path)."""
    return Problem.of("fft", kind=layout.kind, axes=list(layout.axes), lengths=list(layout.lengths),
                      in_shape=list(layout.in_shape), in_dtype=layout.in_dtype.name,
                      out_shape=list(layout.out_shape), out_dtype=layout.out_dtype.name, norm=layout.norm,
                      threads=threads, inplace=inplace, **fields)


def wisdom_choice(layout: Layout, budget: int) -> Candidate | None:
    """The candidate the default wisdom store names for an out-of-place transform of ``layout``
    under ``budget``, exactly as ``plan()`` of a one-call function would take it (``None``: no
    usable entry, and the plan takes :func:`first_candidate`)."""
    problem = fft_problem(layout, budget)
    libraries = installed_libraries()
    remembered = remembered_choice(default_wisdom().lookup(problem, _device(libraries)))
    return remembered if remembered is not None and remembered in _ranked(problem, libraries, budget) else None


@functools.lru_cache(maxsize=64)
def _options(budget: int) -> tuple[int, ...]:
    return tuple(thread_options(budget))


@functools.lru_cache(maxsize=64)
def _candidate_of(name: str, threads: int) -> Candidate:
    """The heuristic's candidate of ``name`` at ``threads`` (pyFFTW at FFTW_ESTIMATE)."""
    return Candidate.of(name, threads=threads, effort="estimate") if name == "pyfftw" else Candidate.of(
        name, threads=threads)


def _strides_matter(library: str, layout: Layout) -> bool:
    """Whether ``library``'s rounding for ``layout`` depends on the input's memory layout:
    ducc0 orders its passes over several axes by stride, and MKL picks its kernels by stride
    (pocketfft in scipy.fft and FFTW give the same bits for any layout)."""
    return library == "mkl_fft" or (library == "ducc0" and len(layout.axes) > 1)


def _on_c_ordered_input(prepared: FFTPrepared) -> None:
    """Make ``prepared`` transform a C-ordered copy of any input that is not C-ordered (a
    C-ordered one is passed as it is), so that one logical problem gives the same bits
    whatever the strides of the operand (NumPy's transforms do)."""
    def c_ordered(call: Any) -> Any:
        def run(a: Any, out: Any = None) -> Any:
            return call(np.ascontiguousarray(a), out)

        return run

    prepared.forward, prepared.inverse = c_ordered(prepared.forward), c_ordered(prepared.inverse)


def _ranked(problem: Problem, libraries: tuple[str, ...], budget: int) -> tuple[Candidate, ...]:
    """The candidates of a problem in heuristic order (memoised: a wisdom hit must plan fast)."""
    return _ranked_layout(layout_of(problem), libraries, budget)


@functools.lru_cache(maxsize=1024)
def _ranked_layout(layout: Layout, libraries: tuple[str, ...], budget: int) -> tuple[Candidate, ...]:
    usable = [name for name in libraries if LIBRARIES[name].supports(layout)]
    return tuple(rank(layout, usable, thread_options(budget)))


@functools.lru_cache(maxsize=16)
def _device(libraries: tuple[str, ...]) -> dict[str, Any]:
    """This host plus the versions of the FFT libraries in play (they change the ranking)."""
    description = dict(cpu_description())
    description["fft_libraries"] = {name: LIBRARIES[name].version() for name in libraries}
    return description


def engine_for(space: Any, libraries: tuple[str, ...] | None, fftw_time_limit: float | None = None) -> Engine:
    """The CPU FFT engine for ``space`` (an :class:`~nvmathpy.ExecutionCPU`); the FFT plan
    builds its cuFFT engine (:mod:`._cuda_engine`) itself for CUDA spaces."""
    if isinstance(space, ExecutionCPU):
        return CPUFFTEngine(space.num_threads or cores(), libraries, fftw_time_limit)
    from ..errors import ExecutionSpaceUnavailableError

    raise ExecutionSpaceUnavailableError(f"no FFT engine for execution space {space!r} in this build")
