"""The :class:`DCT` and :class:`DST` plans (SciPy's real-to-real transforms), and their one-call path.

A plan stages its operand (crop or zero-pad to the planned lengths, convert to the real dtype
it computes in; a complex operand is transformed as its real and imaginary parts, as SciPy
does), then runs the chosen library candidate (:mod:`._trig_engine`: scipy.fft or ducc0,
with a thread count). :func:`trig_transform` serves the ``nvmathpy.scipy.fft`` functions
through a plan cache. CPU only: cuFFT has no real-to-real transforms.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..errors import ExecutionSpaceUnavailableError, InvalidOptionError, PlanStateError
from ..execution import ExecutionCPU, ExecutionCUDA, as_execution, resolve_execution
from ..operands import Operand, to_package, unwrapper, wrap
from ..plan import PlanCache
from ._driver import Threads, _frozen, lookup_runner, runner_cache, wrap_input
from ._layout import DIRECTIONS, no_axes
from ._one_operand import OneOperandPlan
from ._quick import QUICK_ELEMENTS, wisdom_may_know
from ._trig_engine import (THREADED_FROM, TrigEngine, TrigLayout, default_budget, describe_trig, quick_candidate,
                           quick_runner, trig_problem)

__all__ = ["DCT", "DST", "trig_plan_cache", "trig_transform"]


def _stage(layout: TrigLayout, shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> input the engine transforms``: cropped/zero-padded to the layout's shape and in
    its dtype (``x`` itself when it already is)."""
    dtype, target = layout.dtype, layout.shape
    if target == shape:
        return lambda x: x if x.dtype == dtype else x.astype(dtype)
    region = tuple(slice(0, min(n, m)) for n, m in zip(shape, target))

    def staged(x: np.ndarray) -> np.ndarray:
        padded = np.zeros(target, dtype)
        padded[region] = x[region]
        return padded

    return staged


class DCT(OneOperandPlan):
    """A planned discrete cosine transform (SciPy's ``dctn``/``idctn``) over axes of one operand.

    Parameters
    ----------
    x
        A NumPy array or PyTorch CPU tensor: real (bool and integers compute in float64,
        float16 in float32) or complex (its real and imaginary parts are transformed; with a
        non-default ``orthogonalize`` too, where SciPy 1.17's complex branch drops that
        argument and computes the default).
    type
        The transform type, 1-4 (as SciPy's).
    axes
        Axes to transform (default: the last ``len(s)`` axes, or all).
    s
        Lengths along ``axes``; the operand is cropped or zero-padded to them (``None``/``-1``
        entries keep the operand's length).
    norm
        ``"backward"`` (default; the inverse is scaled), ``"ortho"`` or ``"forward"``.
    orthogonalize
        SciPy's ``orthogonalize``: ``None`` means ``norm == "ortho"``.
    execution
        ``"cpu"``, ``ExecutionCPU(num_threads=...)`` (the thread budget) or ``None``. CUDA is
        refused: cuFFT has no real-to-real transforms.
    options
        ``{"engines": ("scipy",)}`` or ``("ducc0",)`` restricts the libraries tried.

    Examples
    --------
    >>> import numpy as np, scipy.fft
    >>> x = np.random.default_rng(0).standard_normal((3, 10))
    >>> with DCT(x, type=2, axes=[1], norm="ortho") as plan:
    ...     y = plan.plan().execute()
    ...     z = plan.execute(direction="inverse")       # SciPy's idctn of the same type
    >>> bool(np.allclose(y, scipy.fft.dct(x, norm="ortho"))), bool(np.allclose(z, scipy.fft.idct(x, norm="ortho")))
    (True, True)
    """

    transform = "dct"

    def __init__(self, x: Any, /, *, type: int = 2, axes: Any = None, s: Any = None, norm: str | None = "backward",
                 orthogonalize: bool | None = None, execution: Any = None, options: Any = None):
        super().__init__()
        operand = wrap(x, "x")
        requested = as_execution(execution)
        space = requested if isinstance(requested, ExecutionCUDA) else resolve_execution(
            execution, operand.device, operand.device_id)
        if not isinstance(space, ExecutionCPU):
            raise ExecutionSpaceUnavailableError(
                f"{self.transform.upper()}: no engine for execution space {space.name!r} (cuFFT has no "
                "real-to-real transforms); pass NumPy or torch CPU operands, or execution='cpu'")
        if options is not None and not isinstance(options, dict):
            raise InvalidOptionError(f"options={options!r} is not allowed; allowed: None or a dict with 'engines'")
        unknown = sorted(set(options or {}) - {"engines"})
        if unknown:
            raise InvalidOptionError(f"options: {unknown} not allowed; allowed: ['engines']")
        engines = (options or {}).get("engines")
        if isinstance(engines, str):
            engines = (engines,)
        layout = describe_trig(operand.shape, operand.dtype, transform=self.transform, type=type, axes=axes, s=s,
                               norm=norm, orthogonalize=orthogonalize)
        self._engine = TrigEngine(default_budget(space.num_threads), None if engines is None else tuple(engines))
        self._layout = layout
        self._complex = operand.dtype.kind == "c"
        self._stage = _stage(layout, operand.shape)
        self._problem = trig_problem(layout, self._complex, self._engine.budget)
        if not self._engine.candidates(self._problem):
            raise InvalidOptionError(
                f"options: engines={list(self._engine.libraries)} cannot compute orthogonalize="
                f"{layout.orthogonalize} with norm={layout.norm!r} (only scipy.fft can); allow 'scipy'")
        self._operand = operand
        self._signature = {what: getattr(operand, what) for what in ("package", "device", "shape", "dtype", "strides")}
        self._unwrap = unwrapper(operand)

    @property
    def result_shape(self) -> tuple[int, ...]:
        """The shape of every result (the operand's, with the planned lengths on ``axes``)."""
        return self._layout.shape

    def _bind(self, prepared: Any) -> Callable[..., Any]:
        calls = {"forward": prepared.forward, "inverse": prepared.inverse}
        calls[None] = calls["forward"]
        x, stage, unwrap, split = self._operand.array, self._stage, self._unwrap, self._complex

        def run(direction: str | None = None) -> Any:
            fn = calls.get(direction)
            if fn is None:
                raise InvalidOptionError(f"execute: direction={direction!r} is not allowed; allowed: {list(DIRECTIONS)}")
            if split:
                result = fn(stage(x.real)) + 1j * fn(stage(x.imag))
            else:
                result = fn(stage(x))
            return result if unwrap is None else unwrap(result)

        return run

    def execute(self, direction: str | None = None) -> Any:
        """Transform the current operand: ``"forward"`` (default; SciPy's ``dctn``/``dstn``) or
        ``"inverse"`` (``idctn``/``idstn`` of the same type). Returns a new array of the
        operand's package."""
        return self._run(direction)

    def _swap_operand(self, operand: Operand, user: Any) -> None:
        self._operand = operand
        self._rebind()

    def _release(self) -> None:
        """Drop the references to the caller's arrays (a cached plan must not keep them alive)."""
        self._operand = None
        self._run = _raise_released


def _raise_released(*args: Any, **kwargs: Any) -> Any:
    raise PlanStateError("this plan has no operand bound; call reset_operand(x) first")


class DST(DCT):
    """A planned discrete sine transform (SciPy's ``dstn``/``idstn``); everything else as :class:`DCT`.

    Examples
    --------
    >>> import numpy as np, scipy.fft
    >>> x = np.random.default_rng(1).standard_normal(12)
    >>> bool(np.allclose(DST(x, type=1).plan().execute(), scipy.fft.dst(x, type=1)))
    True
    """

    transform = "dst"


_CACHE = PlanCache(maxsize=64)
_PLANS = {"dct": DCT, "dst": DST}


def trig_plan_cache() -> PlanCache:
    """The plan cache of the one-call DCT/DST functions (``resize``/``clear``/``hits``/``misses``)."""
    return _CACHE


def trig_transform(x: Any, *, transform: str, type: int, s: Any, axes: Any, norm: Any, orthogonalize: Any,
                   threads: Threads, inverse: bool) -> Any:
    """Run one DCT/DST through the plan cache: a hit binds ``x`` to a ready plan (no re-planning).

    A small one of a real NumPy array runs on the quick path instead: the first call of a
    signature makes a shared runner of the candidate a plan would take (:func:`_first_runner`;
    where it cannot, it plans as usual and keeps the plan's prepared candidate and staging),
    kept in :data:`~nvmathpy.fft._driver.runner_cache`; later calls run that directly.
    ``threads`` as :func:`~nvmathpy.fft._driver.transform` takes it."""
    key = None
    if x.__class__ is np.ndarray:  # (``type`` is the DCT/DST type here)
        key = ("trig", transform, type, inverse, x.shape, x.strides, x.dtype, axes, s, norm, orthogonalize, threads)
        try:
            run = lookup_runner(key)
        except TypeError:  # axes or s given as a list: not a signature the quick path keeps
            run, key = False, None
        if run:
            return run(x)
        if run is None:
            run = _first_runner(x, transform, type, s, axes, norm, orthogonalize, threads, inverse)
            if run:
                runner_cache().put(key, run)
                return run(x)
        if run is False:
            key = None
    if callable(threads):
        threads = threads()
    operand = wrap_input(x, "x")
    if operand.array is not x and operand.package == "numpy":  # a list or another array-like
        x = operand.array
    if operand.device == "cpu" and operand.ndim and (0 in operand.shape or no_axes(operand.ndim, axes, s)):
        return _degenerate(operand, x, transform=transform, type=type, s=s, axes=axes, norm=norm,
                           orthogonalize=orthogonalize)
    plan_key = (transform, type, operand.package, operand.shape, operand.strides, operand.dtype.str, _frozen(axes),
                _frozen(s), norm, orthogonalize, threads)
    plan = _CACHE.take(plan_key)
    try:
        if plan is None:
            plan = _PLANS[transform](x, type=type, axes=axes, s=s, norm=norm, orthogonalize=orthogonalize,
                                     execution=ExecutionCPU(threads)).plan()
        else:
            plan.reset_operand(x)
        result = plan.execute("inverse" if inverse else "forward")
    except BaseException:
        if plan is not None:
            plan.free()
        raise
    if key is not None:
        runner_cache().put(key, _runner(plan, x, inverse, budget_free=callable(key[-1])) or False)
    plan._release()
    _CACHE.give(plan_key, plan)
    return result


def _first_runner(x: np.ndarray, transform: str, type: Any, s: Any, axes: Any, norm: Any, orthogonalize: Any,
                  threads: Threads, inverse: bool) -> Callable[[np.ndarray], np.ndarray] | None:
    """The quick-path runner of a signature seen the first time, made without a plan: for a
    small real float32/float64 operand and a thread count that does not depend on a budget
    asked each call, running the candidate a plan would take - the wisdom store's for the
    exact problem, else the heuristic's first (``None``: a plan makes it, see :func:`_runner`).
    A signature differing from a known one in the length of its one transformed axis (the
    last) takes the runner of that one's family (:func:`_length_family`)."""
    if x.dtype not in _REAL or x.ndim == 0 or 0 in x.shape:
        return None
    family_key = None if s is not None else ("trig", transform, type, inverse, x.ndim, x.dtype, axes, norm,
                                             orthogonalize, threads)
    family = None if family_key is None else runner_cache().family(family_key)
    run = None if family is None else family(x)
    if run is not None:
        return run
    try:
        if no_axes(x.ndim, axes, s):
            return None
        layout = describe_trig(x.shape, x.dtype, transform=transform, type=type, axes=axes, s=s, norm=norm,
                               orthogonalize=orthogonalize)
    except Exception:  # noqa: BLE001 - the plan path raises the caller's error
        return None
    size = max(math.prod(x.shape), math.prod(layout.shape))
    if size > QUICK_ELEMENTS or (callable(threads) and size >= THREADED_FROM):
        return None
    budget = default_budget(threads() if callable(threads) else threads)
    candidate, heuristic = quick_candidate(
        layout, budget, ask_wisdom=wisdom_may_know(("trig", layout.transform, layout.shape, layout.dtype)))
    fn = quick_runner(layout, candidate, inverse)
    if heuristic and family_key is not None and layout.axes == (x.ndim - 1,) and size < THREADED_FROM:
        runner_cache().put_family(family_key, _length_family(fn, transform, type))
    stage = _stage(layout, x.shape)
    return lambda a: fn(stage(a))


def _length_family(fn: Callable[[np.ndarray], np.ndarray], transform: str, type: int) -> Any:
    """The runners of a call signature for any length of its one transformed axis, the last:
    ``fn``, the heuristic's candidate for one length, is every length's while the operand has
    fewer than ``THREADED_FROM`` elements (the heuristic then picks one library order and one
    thread whatever the length, and no candidate's call depends on the length) and the wisdom
    store holds no entry of the exact problem (else :func:`_first_runner` looks it up as a plan
    would). The operand is the staged input as it is: real float32/float64, no length given."""
    least = 2 if (transform, type) == ("dct", 1) else 1

    def member(x: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        if not 0 < x.size < THREADED_FROM or x.shape[-1] < least or wisdom_may_know(
                ("trig", transform, x.shape, x.dtype)):
            return None
        return fn

    return member


_REAL = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def _runner(plan: DCT, x: np.ndarray, inverse: bool, budget_free: bool) -> Callable[[np.ndarray], np.ndarray] | None:
    """The quick-path runner of ``plan`` for operands like ``x`` (``None``: plans keep running
    them): for small real float32/float64 operands, whose staging allocates afresh each call
    and whose candidates keep no state, so one runner serves every thread. ``budget_free``:
    the thread budget is asked for each call, so only problems run on one thread whatever the
    budget get one."""
    layout = plan._layout
    size = max(math.prod(x.shape), math.prod(layout.shape))
    if x.dtype not in (np.float32, np.float64) or not x.dtype.isnative or size > QUICK_ELEMENTS:
        return None
    if budget_free and size >= THREADED_FROM:
        return None
    fn, stage = plan._prepared.inverse if inverse else plan._prepared.forward, plan._stage
    return lambda a: fn(stage(a))


def _degenerate(operand: Any, x: Any, **request: Any) -> Any:
    """SciPy's answers where there is nothing to transform: no axes give ``x`` back; an operand
    with an empty dimension gives zeros of the result's shape and dtype (SciPy's error when a
    transformed axis has no points and no ``n`` is given)."""
    if no_axes(operand.ndim, request["axes"], request["s"]):
        return x
    layout = describe_trig(operand.shape, operand.dtype, **request)
    dtype = layout.dtype if operand.dtype.kind != "c" else np.result_type(layout.dtype, np.complex64)
    return to_package(np.zeros(layout.shape, dtype), operand)
