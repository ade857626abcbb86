"""The CPU engine of the DCT/DST plans: what a real-to-real problem is, and scipy.fft / ducc0 runs of it.

A :class:`TrigLayout` fixes the transform (``"dct"``/``"dst"``, type 1-4), the axes, the
logical lengths (the input is cropped or zero-padded to them first), the real dtype it computes
in, and SciPy's normalisation (``norm`` and ``orthogonalize``). Candidates are
``Candidate.of(library, threads=t)``.

ducc0 is faster than scipy.fft for 1-D transforms and for float64 ones of every shape, while
scipy.fft is faster for float32 batches and multi-axis float32 transforms
(``benchmarks/bench_fft.py --trig`` compares them): the heuristic puts ducc0 first except
there. ducc0 computes SciPy's results with ``inorm`` 0/1/2 and the
inverse types (DCT-II's inverse is a DCT-III) when ``orthogonalize`` is what ``norm`` implies
(SciPy's default); the other combinations run on scipy.fft only.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InvalidOperandError, InvalidOptionError, MissingDependencyError
from ..execution import cpu_description
from ..plan import Candidate, Engine, Prepared, Problem
from ..plan.base import remembered_choice
from ..plan.wisdom import default_wisdom
from ._engines_cpu import cores, thread_options
from ._layout import check_norm, normalize_axes, NoAxisError
from ._libraries import LIBRARIES, _scipy_fft_functions

__all__ = ["TRANSFORMS", "TRIG_LIBRARIES", "TrigEngine", "TrigLayout", "default_budget", "describe_trig",
           "quick_candidate", "quick_runner", "trig_layout_of", "trig_problem"]

TRANSFORMS = ("dct", "dst")
#: The libraries that compute DCTs/DSTs, in the order their names are listed.
TRIG_LIBRARIES = ("scipy", "ducc0")
#: DCT/DST type computing the inverse of each type (up to scaling).
_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}
#: From this many elements, the heuristic tries every thread of the budget first.
THREADED_FROM = 1 << 15


@dataclass(frozen=True)
class TrigLayout:
    """One DCT/DST problem; ``shape`` is the staged input's (the lengths put in on ``axes``)."""

    transform: str
    type: int
    axes: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    norm: str
    orthogonalize: bool

    @property
    def batched_or_multi_axis(self) -> bool:
        return len(self.axes) > 1 or len(self.shape) > 1


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """SciPy's rule: float32 (and float16) stay single, long double stays, the rest is double;
    complex operands are transformed as their real and imaginary parts."""
    if dtype.kind == "c":
        dtype = np.dtype(dtype.char.lower()) if dtype.char in "FDG" else np.dtype(np.float64)
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else dtype
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    raise InvalidOperandError(f"x: dtype {dtype} is not allowed; allowed: bool, integer, floating or complex")


def describe_trig(shape: tuple[int, ...], dtype: Any, *, transform: str, type: Any, axes: Any, s: Any, norm: Any,
                  orthogonalize: Any) -> TrigLayout:
    """Validate a DCT/DST request and return its layout (errors name the argument)."""
    if transform not in TRANSFORMS:
        raise InvalidOptionError(f"transform={transform!r} is not allowed; allowed: {list(TRANSFORMS)}")
    if isinstance(type, bool) or type not in (1, 2, 3, 4):
        raise InvalidOptionError(f"invalid {transform.upper()} type: type={type!r}; allowed: 1, 2, 3, 4")
    norm = check_norm(norm)
    if orthogonalize is not None and not isinstance(orthogonalize, (bool, np.bool_)):
        raise InvalidOptionError(f"orthogonalize={orthogonalize!r} is not allowed; allowed: None, True, False")
    if isinstance(s, (int, np.integer)):
        s = (s,)
    ndim = len(shape)
    if ndim == 0:
        raise NoAxisError("x must have at least one dimension")
    ax = normalize_axes(ndim, axes, s)
    if s is not None and len(s) != len(ax):
        raise InvalidOperandError(f"Shape and axes have different lengths: s={tuple(s)}, axes={ax}")
    staged = list(shape)
    for i, axis in enumerate(ax):
        length = shape[axis] if s is None or s[i] is None or s[i] == -1 else s[i]
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise InvalidOperandError(f"invalid number of data points ({length!r}) specified on axis {axis}")
        if type == 1 and transform == "dct" and length < 2:
            raise InvalidOperandError(f"DCT-I needs at least 2 points along each axis; axis {axis} has {length}")
        staged[axis] = int(length)
    return TrigLayout(transform, type, ax, tuple(staged), _compute_dtype(np.dtype(dtype)), norm,
                      bool(norm == "ortho" if orthogonalize is None else orthogonalize))


@functools.lru_cache(maxsize=256)
def trig_layout_of(problem: Problem) -> TrigLayout:
    """The layout a DCT/DST problem key describes (memoised: plans from wisdom re-ask)."""
    return TrigLayout(problem.get("transform"), problem.get("type"), tuple(problem.get("axes")),
                      tuple(problem.get("shape")), np.dtype(problem.get("dtype")), problem.get("norm"),
                      problem.get("orthogonalize"))


Runner = Callable[[np.ndarray], np.ndarray]


class TrigPrepared(Prepared):
    """A candidate ready to run: ``forward(a)`` and ``inverse(a)`` over the staged real input."""

    def __init__(self, candidate: Candidate, forward: Runner, inverse: Runner):
        super().__init__(candidate)
        self.forward, self.inverse = forward, inverse


def _scipy_runner(layout: TrigLayout, threads: int, inverse: bool) -> Runner:
    name = ("i" if inverse else "") + layout.transform + "n"
    function = getattr(_scipy_fft_functions(), name)  # scipy.fft's own, not the uarray dispatch
    kwargs = dict(type=layout.type, axes=layout.axes, norm=layout.norm, workers=threads,
                  orthogonalize=layout.orthogonalize)
    return lambda a: function(a, **kwargs)


def _ducc0_runner(layout: TrigLayout, threads: int, inverse: bool) -> Runner:
    import ducc0

    function = getattr(ducc0.fft, layout.transform)
    kind = _INVERSE_TYPE[layout.type] if inverse else layout.type
    # inorm: 0 none, 1 orthonormal, 2 divide by the logical length (the backward inverse, the forward forward)
    inorm = 1 if layout.norm == "ortho" else 2 if (layout.norm == "backward") == inverse else 0
    axes = tuple(layout.axes)
    return lambda a: function(a, kind, axes, inorm, None, threads)  # positional: ducc0 parses keywords slowly


def _ducc0_supports(layout: TrigLayout) -> bool:
    """ducc0 orthogonalises exactly with the orthonormal scaling, and computes float32/float64."""
    return layout.orthogonalize == (layout.norm == "ortho") and layout.dtype in (np.float32, np.float64)


_RUNNERS = {"scipy": _scipy_runner, "ducc0": _ducc0_runner}


def _installed() -> tuple[str, ...]:
    return tuple(name for name in TRIG_LIBRARIES if name == "scipy" or importlib.util.find_spec(name) is not None)


class TrigEngine(Engine):
    """DCTs and DSTs on the host through scipy.fft and ducc0, ``budget`` threads at most.

    Parameters
    ----------
    budget
        The most threads a candidate may use.
    libraries
        Restrict candidates to these names from :data:`TRIG_LIBRARIES` (``None``: every installed one).
    """

    name = "cpu-trig"

    def __init__(self, budget: int, libraries: tuple[str, ...] | None = None):
        self.budget = budget
        installed = _installed()
        if libraries is None:
            self.libraries = installed
            return
        unknown = [name for name in libraries if name not in TRIG_LIBRARIES]
        if unknown:
            raise InvalidOptionError(f"engines={list(libraries)}: {unknown} compute no DCT/DST; allowed: "
                                     f"{list(TRIG_LIBRARIES)}")
        missing = [name for name in libraries if name not in installed]
        if missing:
            raise MissingDependencyError(f"FFT engine(s) {missing} are not installed here (installed: "
                                         f"{list(installed)}); pip install 'nvmathpy[cpu]' brings ducc0")
        self.libraries = tuple(libraries)

    def candidates(self, problem: Problem) -> list[Candidate]:
        return list(_ranked(problem, self.libraries, self.budget))

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> TrigPrepared:
        layout, threads = trig_layout_of(problem), candidate.params["threads"]
        make = _RUNNERS[candidate.label]
        return TrigPrepared(candidate, make(layout, threads, False), make(layout, threads, True))

    def device(self) -> dict[str, Any]:
        return _device(self.libraries)


def _ranked(problem: Problem, libraries: tuple[str, ...], budget: int) -> tuple[Candidate, ...]:
    """Candidates in the heuristic's order (see the module docstring for the measurements)."""
    return ranked_layout(trig_layout_of(problem), libraries, budget)


def trig_problem(layout: TrigLayout, complex_operand: bool, budget: int) -> Problem:
    """The problem key of ``layout`` (``complex_operand``: its real and imaginary parts are
    transformed) under a thread ``budget``: plans key wisdom with it."""
    return Problem.of("trig", transform=layout.transform, type=layout.type, axes=list(layout.axes),
                      shape=list(layout.shape), dtype=layout.dtype.name, norm=layout.norm,
                      orthogonalize=layout.orthogonalize, complex=complex_operand, threads=budget)


def quick_candidate(layout: TrigLayout, budget: int, ask_wisdom: bool) -> tuple[Candidate, bool]:
    """The candidate ``plan()`` takes for a real operand of ``layout`` under ``budget`` among the
    installed libraries, and whether it is the heuristic's: the default wisdom store's choice
    for the exact problem when ``ask_wisdom`` and the store names a usable one, else the
    heuristic's first (for the one-call functions' quick path)."""
    libraries = _installed_once()
    ranked = ranked_layout(layout, libraries, budget)
    if ask_wisdom:
        entry = default_wisdom().lookup(trig_problem(layout, False, budget), _device(libraries))
        remembered = remembered_choice(entry)
        if remembered is not None and remembered in ranked:
            return remembered, False
    return ranked[0], True


def quick_runner(layout: TrigLayout, candidate: Candidate, inverse: bool) -> Runner:
    """The ``inverse`` or forward runner of ``candidate`` for ``layout``, as ``plan()`` prepares
    it (its runners keep no state, and none depends on the transformed lengths)."""
    return _RUNNERS[candidate.label](layout, candidate.params["threads"], inverse)


@functools.lru_cache(maxsize=1)
def _installed_once() -> tuple[str, ...]:
    return _installed()


@functools.lru_cache(maxsize=1024)
def ranked_layout(layout: TrigLayout, libraries: tuple[str, ...], budget: int) -> tuple[Candidate, ...]:
    """:func:`_ranked` for a layout (memoised per layout, libraries and budget)."""
    usable = [name for name in libraries if name == "scipy" or _ducc0_supports(layout)]
    if "ducc0" in usable and not (layout.dtype == np.float32 and layout.batched_or_multi_axis):
        usable.remove("ducc0")
        usable.insert(0, "ducc0")
    counts = thread_options(budget)
    first = budget if int(np.prod(layout.shape)) >= THREADED_FROM else 1
    counts = [first] + [t for t in counts if t != first]
    return tuple(Candidate.of(name, threads=t) for t in counts for name in usable)


@functools.lru_cache(maxsize=16)
def _device(libraries: tuple[str, ...]) -> dict[str, Any]:
    description = dict(cpu_description())
    description["fft_libraries"] = {name: LIBRARIES[name].version() for name in libraries}
    return description


def default_budget(threads: int | None) -> int:
    """The thread budget of a plan: ``threads``, else every core."""
    return threads or cores()
