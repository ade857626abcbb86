"""The solver crossovers calibrated per machine (:mod:`nvmathpy.plan.calibration`).

Each calibrated value, named ``<kind>.<dtype>.<order>`` for the orders :data:`ORDERS`, is
``{"first": algorithm}``: the algorithm to try first for matrices of about that order. Each
algorithm is timed against the call a user would otherwise make (``scipy.linalg.lu_factor``,
``cho_factor``, ``eigh``) in alternating calls
(:func:`~nvmathpy.plan.calibration.interleaved_ratios`). That call itself is one of the
algorithms (:data:`PLAIN`), and another is first only where its median ratio beats it by
:data:`MARGIN`: a close call, or a machine too noisy to tell, goes to the plain call. At the
orders calibration covers, a machine without a value (calibration off, or not measurable in
time) takes the plain call too (:func:`first_choice`); other orders and dtypes keep the
built-in choice.

- ``getrf.<dtype>.<order>``: ``"lookahead"``, ``"recursive"``, ``None`` (``?getrf`` on NumPy's
  OpenBLAS, :mod:`._lookahead_lu`) or ``"scipy"`` (SciPy's ``?getrf``);
- ``potrf.<dtype>.<order>``: ``"lookahead"``, ``None`` (:mod:`._lookahead_cholesky`) or ``"scipy"``;
- ``eigh.<dtype>.<order>``: ``"blocked_evd"`` (:mod:`._blocked_eigh`), ``"numpy"`` (``?syevd``
  through NumPy) or ``"evr"`` (SciPy's default driver).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ....plan.calibration import OutOfTime, calibrated, choose_first
from ._numpy_lapack import dtype_name

__all__ = ["CALIBRATIONS", "COVERED_FROM", "COVERED_TO", "GROWING", "MARGIN", "ORDERS", "OutOfTime", "PLAIN",
           "first_choice", "first_of", "measure", "measurements", "name_of", "reorder"]

#: The orders measured, smallest first.
ORDERS = (512, 768, 1024, 1536, 2048)
#: How much faster than the plain call (median of the per-round ratios) another algorithm
#: must be to be first: above the spread of the plain call timed against itself on a busy
#: machine, so that noise does not pick an algorithm that loses.
MARGIN = 1.10
#: Rounds per algorithm and order (at most, at least), and about how long each call of a
#: round lasts at least.
ROUNDS = 5
MIN_ROUNDS = 3
CALL_SECONDS = 0.02
#: The call a user would otherwise make, as the algorithm of each kind: SciPy's own
#: ``lu_factor`` / ``cho_factor`` (the plans then keep SciPy's wrappers), ``eigh``'s driver.
PLAIN = {"getrf": "scipy", "potrf": "scipy", "eigh": "evr"}
#: Per kind, the algorithm whose gain over the plain call grows with the order (``eigh``'s blocked
#: back-transformation: its share of the work grows with ``n``), and whose larger orders, too
#: long to time within the automatic bound, are not measured on first need: an order without a
#: value of its own (``tune`` stores them) takes that algorithm where the next smaller measured
#: order chose it, else the plain call.
GROWING = {"eigh": "blocked_evd"}
#: An order takes the choice of the nearest measured order, within this factor of the
#: smallest and the largest.
REACH = 1.25
#: The smallest and the largest order calibration covers (the reach of the smallest and of the
#: largest measured order).
COVERED_FROM = math.ceil(ORDERS[0] / REACH)
COVERED_TO = math.floor(ORDERS[-1] * REACH)


def _matrix(kind: str, n: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, n))
    if kind == "getrf":
        return (x + 2 * math.sqrt(n) * np.eye(n)).astype(dtype)
    return (x @ x.T + n * np.eye(n)).astype(dtype)  # symmetric positive definite


def _contenders(kind: str, n: int, dtype: str) -> tuple[dict[Any, Callable[[], Any]], Callable[[], Any]]:
    """``({algorithm: call}, reference call)`` for one order: the algorithms as the plans call
    them (on a C-ordered matrix's transposed view), the reference as a SciPy user calls it,
    which is also the algorithm :data:`PLAIN`. SciPy's and NumPy's functions are called in
    the modules that define them: :func:`nvmathpy.patch` replaces ``scipy.linalg.lu_factor``
    and the like by nvmathpy's, which would then be timed against themselves."""
    from scipy.linalg import _decomp, _decomp_cholesky, _decomp_lu

    a = _matrix(kind, n, dtype)
    reference: Callable[[], Any]
    if kind == "getrf":
        from ._lookahead_lu import getrf_of, getrf_order

        reference = lambda: _decomp_lu.lu_factor(a)  # noqa: E731
        algorithms = {alg: (lambda f=getrf_of(alg, dtype): f(a.T)) for alg in getrf_order(n, dtype)}
    elif kind == "potrf":
        from ._lookahead_cholesky import potrf_of, potrf_order

        reference = lambda: _decomp_cholesky.cho_factor(a)  # noqa: E731
        algorithms = {alg: (lambda f=potrf_of(alg, dtype): f(a.T, lower=1, clean=0)) for alg in potrf_order(n, dtype)}
    else:
        from ._blocked_eigh import blocked_eigh, blocked_eigh_available
        from ._numpy_lapack import numpy_linalg

        reference = lambda: _decomp.eigh(a)  # noqa: E731
        algorithms = {"numpy": lambda: numpy_linalg.eigh(a)}
        if blocked_eigh_available(dtype):
            algorithms["blocked_evd"] = lambda f=blocked_eigh(dtype): f(a.T, True, True)
    return {**algorithms, PLAIN[kind]: reference}, reference


def measure(kind: str, dtype: str, n: int, seconds: float) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure ``kind`` (``"getrf"``, ``"potrf"``, ``"eigh"``) in ``dtype`` at order ``n``:
    ``({"first": algorithm}, {algorithm: median ratio})``, the ratio being the reference's time
    over the algorithm's (:func:`~nvmathpy.plan.calibration.choose_first`, keeping
    :data:`PLAIN` unless another beats it by :data:`MARGIN`). Up to :data:`ROUNDS` rounds, as
    many as ``seconds`` allow after the first calls (which build compiled drivers and
    workspaces); :class:`~nvmathpy.plan.calibration.OutOfTime` when not even
    :data:`MIN_ROUNDS` would."""
    algorithms, reference = _contenders(kind, n, dtype)
    return first_of(f"{kind} {dtype} n={n}", algorithms, reference, PLAIN[kind], seconds)


def first_of(label: str, contenders: dict[Any, Callable[[], Any]], reference: Callable[[], Any], keep: Any,
             seconds: float, *, call_seconds: float = CALL_SECONDS, max_calls: int = 4,
             every_round: bool = False) -> tuple[dict[str, Any], dict[str, float]]:
    """``({"first": contender}, {contender: median ratio})`` by
    :func:`~nvmathpy.plan.calibration.choose_first` with this module's rounds and
    :data:`MARGIN` (``keep`` unless another contender beats it by that); its
    :class:`~nvmathpy.plan.calibration.OutOfTime` names ``label``, the value measured."""
    try:
        best, medians = choose_first(contenders, reference, keep, seconds, rounds=ROUNDS, min_rounds=MIN_ROUNDS,
                                     call_seconds=call_seconds, max_calls=max_calls, margin=MARGIN,
                                     every_round=every_round)
    except OutOfTime as exc:
        raise OutOfTime(f"{label}: {exc}") from None
    return {"first": best}, medians


def name_of(kind: str, dtype: str, n: int) -> str:
    """A calibrated value's name: ``<kind>.<dtype>.<order>``."""
    return f"{kind}.{dtype}.{n}"


def measurements(kinds: tuple[str, ...], orders: tuple[int, ...],
                 measure: Callable[[str, str, int, float], tuple[Any, dict]],
                 prefix: str = "") -> dict[str, Callable[[float], tuple[Any, dict]]]:
    """``{name: measurement given a time bound}`` of ``measure(kind, dtype, order, seconds)`` for
    each of ``kinds`` (``prefix`` before each), float64 and float32, and ``orders``, smaller
    orders first."""
    return {name_of(prefix + kind, dtype, n): (lambda seconds, kind=kind, dtype=dtype, n=n: measure(kind, dtype, n,
                                                                                                   seconds))
            for kind in kinds for dtype in ("float64", "float32") for n in orders}


#: Every calibrated solver value: name -> the measurement (given a time bound), smaller orders first.
CALIBRATIONS = measurements(("getrf", "potrf", "eigh"), ORDERS, measure)


def first_choice(kind: str, n: int, dtype: Any) -> tuple[bool, Any]:
    """``(True, algorithm)`` when the calibration of ``kind`` for ``dtype`` covers order ``n``:
    the value of the measured order nearest ``n`` (measured now when automatic calibration is
    on and none is stored), else - calibration off, or its measurement failed (a machine too
    busy to measure in time) - :data:`PLAIN`, the call a user would otherwise make: without a
    measurement of this machine nothing is known to beat it, and in calls that alternate with
    SciPy's and NumPy's the faster algorithms of a quiet machine can lose to it. A kind of
    :data:`GROWING` measures only its smallest order on first need; a larger order without a
    stored value takes the next smaller order's choice of the growing algorithm, else the plain
    call. ``(False, None)`` for orders and dtypes calibration does not cover: the caller keeps
    its built-in order.

    Examples
    --------
    >>> first_choice("getrf", 64, "complex128")
    (False, None)
    """
    if not COVERED_FROM <= n <= COVERED_TO:
        return False, None
    nearest = min(ORDERS, key=lambda order: abs(math.log(n / order)))
    name = name_of(kind, dtype_name(dtype), nearest)
    if name not in CALIBRATIONS:
        return False, None
    if kind in GROWING and nearest > ORDERS[0]:
        value = calibrated(name, None)  # stored (by tune) or none: not measured on first need
        if value is None:
            below = ORDERS[ORDERS.index(nearest) - 1]
            carried = first_choice(kind, below, dtype)[1]
            return True, carried if carried == GROWING[kind] else PLAIN[kind]
    else:
        value = calibrated(name, None, CALIBRATIONS[name])
    return True, value["first"] if isinstance(value, dict) and "first" in value else PLAIN[kind]


def reorder(kind: str, n: int, dtype: Any, order: list) -> list:
    """``order`` (a built-in order of algorithms, first choice first) with :func:`first_choice`
    for ``n`` moved (or, :data:`PLAIN`, added) to the front where calibration covers ``n``; a
    calibrated choice that does not run here (another build's) counts as none, and
    :data:`PLAIN` goes first.

    Examples
    --------
    >>> reorder("getrf", 64, "complex128", [None, "recursive"])
    [None, 'recursive']
    """
    known, first = first_choice(kind, n, dtype)
    if not known:
        return order
    if first not in order:
        first = PLAIN[kind]
    return [first] + [alg for alg in order if alg != first]
