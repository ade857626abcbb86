"""Thread counts for the LAPACK routines that the ``scipy.linalg`` drop-in calls as SciPy does,
calibrated per machine (:mod:`nvmathpy.plan.calibration`).

``svd`` (and ``svdvals``, ``orth``, ``null_space``, ``pinv``), ``eig``/``eigvals`` and ``qr``
make the very LAPACK calls SciPy makes (``?gesdd``/``?gesvd``, ``?geev``, ``?geqrf`` with
``?orgqr``), on SciPy's OpenBLAS. What is left to choose is the thread count: these routines
spend much of their time in matrix-vector steps and small products, where OpenBLAS's threads
can cost more in synchronisation than they bring, and by how much depends on the machine
(cores, caches, a virtual machine's scheduling) and the order. So it is measured:
``threads.<routine>.<dtype>.<order>`` (:data:`ROUTINES`, float32 and float64, the orders
:data:`ORDERS`) holds ``{"first": 1}`` where one thread beat SciPy's own call (all of its
pool's threads) in calls alternating with it, in every round and by the solvers' margin
(:data:`._calibrate.MARGIN`) in the median, else ``{"first": "library"}``: the pool's count,
SciPy's own call. For ``?geev`` MKL's routine on one thread (:mod:`._mkl_geev`, where MKL is
installed) is a contender too: ``{"first": "mkl"}`` where it won so (:func:`mkl_chosen`; the
caller then runs it instead of SciPy's). Orders between take the nearest measured order's
value (``?gesvd``, where asked for, takes ``?gesdd``'s); other orders, dtypes and a machine
without a value run as SciPy does.

``benchmarks/bench_scipy_mix.py`` shows what this gives.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, TypeVar

import numpy as np

from ....plan import calibration
from ....plan.calibration import OutOfTime, auto_enabled, calibrated, stored_in
from ._calibrate import MIN_ROUNDS, first_of, measurements, name_of
from ._mkl_geev import geev
from ._numpy_lapack import dtype_name
from ._pool_threads import THREAD_COUNT, count_changed, holds_counts, on_counts, scipy_thread_count_functions

__all__ = ["CALIBRATIONS", "LIBRARY", "MKL", "ORDERS", "ROUTINES", "equivalent_order", "measure", "mkl_chosen",
           "on_calibrated_threads", "threads_for"]

T = TypeVar("T")

#: The routines whose thread count is calibrated, each with the SciPy call that measures it.
ROUTINES = ("gesdd", "geev", "geqrf")
#: The orders measured, smallest first (below, a call is short enough for the look-up to show).
ORDERS = (96, 128, 192, 256, 384, 512, 768)
#: What the values' names start with (``threads.<routine>.<dtype>.<order>``).
PREFIX = "threads."
#: An order takes the value of the nearest measured order within this factor of the smallest and
#: the largest; beyond, the library's own count.
REACH = 1.25
#: The value that keeps the pool's own thread count (SciPy's call as SciPy makes it).
LIBRARY = "library"
#: The value that runs MKL's routine on one thread instead (``?geev`` only: :mod:`._mkl_geev`).
MKL = "mkl"
#: About how long each timed pass lasts at least (several calls of the smaller orders per pass).
CALL_SECONDS = 0.01
#: How many calls as long as the one asking the shortest measurement makes (a contender's and the
#: reference's, for each of two contenders, over :data:`._calibrate.MIN_ROUNDS` rounds): a call
#: longer than the automatic bound divided by this is not measured on first need.
MEASURED_CALLS = 4 * MIN_ROUNDS


def _scipy_call(routine: str, a: np.ndarray) -> Callable[[], Any]:
    """The call of SciPy's own function that runs ``routine`` on ``a`` (in the module that
    defines it: :func:`nvmathpy.patch` may have replaced the public names)."""
    from scipy.linalg import _decomp, _decomp_qr, _decomp_svd

    if routine == "gesdd":
        return lambda: _decomp_svd.svd(a)
    if routine == "geev":
        return lambda: _decomp.eig(a)
    return lambda: _decomp_qr.qr(a)


def _on_threads(count: int, call: Callable[[], T]) -> T:
    """``call()`` with SciPy's pool set to ``count`` threads (unchanged where another caller
    holds a changed count, or where the pool has no more than ``count``)."""
    functions = scipy_thread_count_functions()
    if functions is None:
        return call()
    get, put = functions
    before = get()
    return on_counts([(put, count, before)] if count < before else [], call)


def measure(routine: str, dtype: str, n: int, seconds: float) -> tuple[dict[str, Any], dict[str, float]]:
    """Time ``routine`` (SciPy's call of it) in ``dtype`` at order ``n`` on fewer threads than
    SciPy's pool has (one, and half of them where that is more), and for ``?geev`` MKL's routine
    on one thread where MKL is installed, against SciPy's own call, in alternating calls:
    ``({"first": count, MKL or LIBRARY}, {contender: median ratio})``.
    :class:`~nvmathpy.plan.calibration.OutOfTime` where :data:`._calibrate.MIN_ROUNDS` rounds
    would not fit ``seconds``, or there is nothing to choose (SciPy's pool has a single thread
    and there is no MKL contender)."""
    a = np.random.default_rng(n).standard_normal((n, n)).astype(dtype)
    reference = _scipy_call(routine, a)  # (SciPy loads its OpenBLAS)
    functions = scipy_thread_count_functions()
    pool = functions[0]() if functions is not None else 1
    mkl = geev(a.dtype.char) if routine == "geev" else None
    if pool < 2 and mkl is None:
        raise OutOfTime("SciPy's OpenBLAS runs on one thread and MKL's routine is not at hand: nothing to choose")
    counts = sorted({1, pool // 2} - {pool}) if pool >= 2 else []
    contenders: dict[Any, Callable[[], Any]] = {count: (lambda k=count: _on_threads(k, reference)) for count in counts}
    if mkl is not None:
        contenders[MKL] = lambda: mkl(a, compute_vl=0, compute_vr=1)  # what SciPy's eig asks of ?geev
    contenders[LIBRARY] = reference
    return first_of(f"threads of {routine} {dtype} n={n}", contenders, reference, LIBRARY, seconds,
                    call_seconds=CALL_SECONDS, max_calls=8, every_round=True)


#: Every calibrated thread count: name -> the measurement (given a time bound), smaller orders first.
CALIBRATIONS = measurements(ROUTINES, ORDERS, measure, prefix=PREFIX)


def equivalent_order(m: int, n: int) -> int:
    """The order of the square matrix whose factorization does the work of an ``m x n`` one
    (``m n min(m, n)`` multiplications, as QR, SVD and Hessenberg reduction).

    Examples
    --------
    >>> equivalent_order(100, 100), equivalent_order(400, 25)
    (100, 63)
    """
    return round((m * n * min(m, n)) ** (1 / 3))


#: The nearest measured order of each order calibration covers (index: the order; 0: not covered).
_NEAREST = [min(ORDERS, key=lambda order: abs(math.log(n / order))) if ORDERS[0] / REACH <= n <= ORDERS[-1] * REACH
            else 0 for n in range(math.floor(ORDERS[-1] * REACH) + 1)]


def _name_for(routine: str, n: int, dtype: Any) -> str | None:
    """The calibrated value's name for ``routine`` at about order ``n`` in ``dtype`` (the nearest
    measured order), or ``None`` where calibration does not cover them."""
    nearest = _NEAREST[n] if 0 <= n < len(_NEAREST) else 0
    if not nearest:
        return None
    name = name_of(PREFIX + routine, dtype_name(dtype), nearest)
    return name if name in CALIBRATIONS else None


def threads_for(routine: str, n: int, dtype: Any) -> tuple[bool, int | None]:
    """``(known, count)``: whether this machine has a value for ``routine`` at about order ``n``
    in ``dtype`` (stored, not measured now), and the thread count it chose (``None``: the
    library's own count, also where nothing is known).

    Examples
    --------
    >>> threads_for("gesdd", 5, "float64")
    (False, None)
    """
    return _stored_count(_name_for(routine, n, dtype))


def _stored_count(name: str | None) -> tuple[bool, int | None]:
    """:func:`threads_for` of the value ``name`` (``None``: not covered)."""
    value = stored_in(PREFIX, CALIBRATIONS, name) if name is not None else None
    if not isinstance(value, dict):
        return False, None
    first = value.get("first")
    return True, first if isinstance(first, int) and first >= 1 else None


def mkl_chosen(routine: str, n: int, dtype: Any) -> bool:
    """Whether this machine's calibration chose MKL's routine for ``routine`` at about order
    ``n`` in ``dtype`` (a stored value; see :func:`on_calibrated_threads` for how it is measured).

    Examples
    --------
    >>> mkl_chosen("geev", 5, "float64")
    False
    """
    name = _name_for(routine, n, dtype)
    value = stored_in(PREFIX, CALIBRATIONS, name) if name is not None else None
    return isinstance(value, dict) and value.get("first") == MKL


def on_calibrated_threads(routine: str, m: int, n: int, dtype: Any, call: Callable[[], T]) -> T:
    """``call()`` (``routine`` of an ``m x n`` matrix of ``dtype`` on SciPy's OpenBLAS) on the
    thread count this machine's calibration chose for it (:func:`threads_for`), else as it is.

    Where no value is stored yet and automatic calibration is on, the call runs as it is and is
    timed, and the value is measured right after it (:func:`measure`, within
    :data:`~nvmathpy.plan.calibration.AUTO_SECONDS`) when its rounds would fit that bound (the
    longer calls, whose measurement would not, keep SciPy's own count until ``python -m
    nvmathpy tune`` measures them), and only while SciPy's pool has its own count (not one
    lowered by another thread, which holds :data:`._pool_threads.THREAD_COUNT`, nor by the
    stepped-down call this one runs in). Inside a stepped-down call the calibrated count nests
    (:func:`._pool_threads.on_counts`): it applies where it is below the count in force.

    Examples
    --------
    >>> on_calibrated_threads("geev", 3, 3, "float64", lambda: "called")
    'called'
    """
    name = _name_for(routine, equivalent_order(m, n), dtype)
    if name is None:
        return call()
    known, count = _stored_count(name)  # (looked up first: the first look reads the store)
    if known:
        return call() if count is None else _on_threads(count, call)
    functions = scipy_thread_count_functions()
    own_count = (functions is not None and functions[0]() >= 2
                 and (not count_changed(functions[1]) if holds_counts() else not THREAD_COUNT.locked()))
    start = time.perf_counter()
    out = call()
    seconds = time.perf_counter() - start
    if own_count and seconds * MEASURED_CALLS < calibration.AUTO_SECONDS and auto_enabled():
        calibrated(name, None, CALIBRATIONS[name])
    return out
