"""The LAPACK routines the CPU solvers call, for layers that call LAPACK themselves
(``nvmathpy.scipy.linalg``): a public module, ``nvmathpy.linalg.lapack``.

- :func:`routines` gives, for one matrix order, the routines a SciPy-flavoured layer runs:
  SciPy's f2py wrappers (:func:`scipy.linalg.get_lapack_funcs`) on SciPy's thread pool below
  the orders calibration covers (:data:`SCIPY_BELOW`), and from there on the calibrated
  choice of this machine - NumPy's OpenBLAS (the thread pool of NumPy's products and of
  nvmathpy's plans) with nvmathpy's own recursive and look-ahead ``getrf``/``potrf``, called
  with the wrappers' signatures, or, uncalibrated or while SciPy's pool alone spins (right
  after a SciPy call), SciPy's wrappers again - but for ``getrf`` of real matrices up to
  order 1024 while that pool spins: nvmathpy's recursive LU on SciPy's OpenBLAS, on the
  threads SciPy's call left spinning.
- :func:`fast_module` is the compiled extension that runs a whole call on one matrix in one C
  call, with SciPy's conventions: ``lu_solve(lu, piv, b, trans, check_finite)`` returns ``x``
  (order up to :data:`MAX_ORDER`); ``cho_solve(c, b, lower, check_finite)`` returns ``x``,
  ``solve_gen(a, b, transposed, check_finite)`` ``(x, rcond)`` (``x`` ``None`` for a
  singular ``a``), ``lu(a, permute_l, p_indices, check_finite)`` :func:`scipy.linalg.lu`'s
  tuple and ``cholesky(a, lower, clean, overwrite_a, check_finite)`` the factor (the int
  ``info`` when not positive definite), each up to :data:`LU_MAX_ORDER` rows and columns,
  with SciPy's ``getrf``/``potrf``/``potrs``: a caller runs them where :func:`scipys` says that routine
  is the order's (every order below :data:`SCIPY_BELOW`, and calibrated or uncalibrated
  orders whose choice is SciPy's); ``lu_unpack(lu, piv, permute_l, p_indices)`` is ``lu``'s
  tuple from the factors of any ``getrf`` (Fortran-ordered ``lu``, 0-based int32 ``piv``);
  ``solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b, check_finite)`` returns
  ``x`` (the int ``info`` when singular), ``qr(a, mode, check_finite)`` (mode 0 to 3: full,
  economic, r, raw) :func:`scipy.linalg.qr`'s tuple without pivoting, and ``svd(a,
  full_matrices, compute_uv, gesvd, check_finite)`` ``(u, s, vh)`` or ``s``. Each returns
  ``NotImplemented`` for operands it does not take (other types, dtypes, layouts, orders;
  ``svd`` also for NaN/Inf without ``check_finite`` and LAPACK's failures), which the caller
  then solves by other means.
- :func:`on_calibrated_threads` runs a call of ``?gesdd``/``?gesvd``, ``?geev`` or ``?geqrf``
  (with ``?orgqr``) on SciPy's OpenBLAS on the thread count this machine's calibration chose
  for that routine and order (:mod:`~nvmathpy.linalg.solvers.cpu._routine_threads`).
- :func:`calibrated_mkl` gives MKL's ``?geev`` (on one thread, with SciPy's wrapper's
  signature) where this machine's calibration chose it over SciPy's for a matrix's order and
  dtype (:mod:`~nvmathpy.linalg.solvers.cpu._mkl_geev`), else ``None``.
- :func:`on_free_cores` wraps a layer's function so that its calls on large NumPy matrices run
  NumPy's and SciPy's OpenBLAS on the cores free at the call's start
  (:func:`~nvmathpy.linalg.solvers.cpu._pool_threads.stepped_down`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import numpy as np

from .solvers.cpu._calibrate import COVERED_FROM
from .solvers.cpu._fast_lapack import LU_MAX_ORDER, MAX_ORDER, fast_module
from .solvers.cpu._mkl_geev import geev
from .solvers.cpu._numpy_algorithms import for_order
from .solvers.cpu._pool_threads import BUSY_LEARN_FROM, POOLS, SCIPY, only_hot, stepped_down
from .solvers.cpu._recursive_lu import scipy_recursion_fits, scipy_recursive_getrf
from .solvers.cpu._routine_threads import mkl_chosen, on_calibrated_threads

__all__ = ["FREE_CORES_FROM", "LU_FREE_CORES_FROM", "LU_MAX_ORDER", "MAX_ORDER", "SCIPY_BELOW", "calibrated_mkl",
           "fast_module", "on_calibrated_threads", "on_free_cores", "routines", "scipys", "threaded"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: Below this order (every order calibration does not cover) :func:`routines` and the compiled
#: calls give SciPy's own routines, on SciPy's thread pool: the routine a SciPy user's call
#: runs, which without a measurement of this machine nothing is known to beat, and one pool
#: for a program that mixes nvmathpy's and SciPy's calls (a factorization on NumPy's pool
#: between SciPy's calls makes the two pools spin against each other for the cores).
#: ``nvmathpy.linalg``'s plans and functions run on NumPy's pool from
#: :data:`~nvmathpy.linalg.solvers.cpu._numpy_lapack.FROM_ORDER`, with NumPy's products.
SCIPY_BELOW = COVERED_FROM

#: SciPy's wrappers by dtype character, then by the tuple of names asked for together.
_SCIPY: dict[str, dict[tuple[str, ...], tuple[Callable[..., Any], ...]]] = {c: {} for c in "fdFD"}


def _scipy_routines(dtype: np.dtype, names: tuple[str, ...]) -> tuple[Callable[..., Any], ...]:
    from scipy.linalg.lapack import get_lapack_funcs

    found = _SCIPY[dtype.char][names] = tuple(get_lapack_funcs(names, dtype=dtype))
    return found


def routines(dtype: np.dtype, order: int, *names: str) -> tuple[Callable[..., Any], ...]:
    """The LAPACK routines ``names`` (``"getrf"``, ``"getrs"``, ``"potrf"``, ``"potrs"``, ...)
    in ``dtype`` that the scipy.linalg drop-in runs on matrices of order ``order``: SciPy's
    below :data:`SCIPY_BELOW`, from there on those the CPU solvers' calibrated choice runs -
    except while SciPy's thread pool alone is running (right after a SciPy call: its threads
    still spin, and SciPy's routines start on every core at once where the others would
    share a core with them; ``getrf`` of a real matrix is then nvmathpy's recursive LU on
    SciPy's OpenBLAS up to the recursion's last order).

    Parameters
    ----------
    dtype
        A LAPACK dtype (``numpy.dtype`` of float32, float64, complex64 or complex128).
    order
        The matrices' order ``n``.
    *names
        LAPACK routine names without the type letter.

    Returns
    -------
    tuple
        One callable per name, each with the signature of SciPy's wrapper of that name.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg.lapack import routines
    >>> getrf, getrs = routines(np.dtype(np.float64), 2, "getrf", "getrs")
    >>> lu, piv, info = getrf(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> getrs(lu, piv, np.array([5.0, 6.0]))[0]
    array([-4. ,  4.5])
    """
    if order >= SCIPY_BELOW:
        found = for_order(order, dtype, *names)
        recursion = _hot_recursion(dtype, order, names)
        # the threads looked at only where the answer depends on it
        hot = (found or recursion) and only_hot(SCIPY)
        if found and not hot:
            return found
        if hot and recursion:
            scipys_ = _SCIPY[dtype.char].get(names) or _scipy_routines(dtype, names)
            return tuple(scipy_recursive_getrf(dtype) if name == "getrf" else fn for name, fn in zip(names, scipys_))
    return _SCIPY[dtype.char].get(names) or _scipy_routines(dtype, names)


def _hot_recursion(dtype: np.dtype, order: int, names: tuple[str, ...]) -> bool:
    """Whether ``getrf`` is among ``names`` and runs as the recursive LU on SciPy's OpenBLAS
    while SciPy's pool alone spins (:func:`~.solvers.cpu._recursive_lu.scipy_recursion_fits`)."""
    return "getrf" in names and scipy_recursion_fits(order, dtype)


def scipys(dtype: np.dtype, order: int, name: str) -> bool:
    """Whether :func:`routines` gives SciPy's own routine ``name`` in ``dtype`` for order
    ``order`` (a solve: where its factorization's is): then the compiled calls, which run
    SciPy's, may take the call whole.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg.lapack import scipys
    >>> scipys(np.dtype(np.float64), 300, "getrf")
    True
    """
    if order < SCIPY_BELOW:
        return True
    calibrated = for_order(order, dtype, name) is not None
    if _hot_recursion(dtype, order, (name,)):
        return not calibrated and not only_hot(SCIPY)  # hot: the recursion on SciPy's pool
    return not calibrated or only_hot(SCIPY)


#: From this many elements of its first operand on, a call wrapped by :func:`on_free_cores` looks
#: at the free cores first: OpenBLAS starts threads inside a Cholesky factorization of order 128
#: already, and the look costs a few microseconds when nothing else runs, a few tens when
#: something does (``benchmarks/bench_scipy_mix.py``'s first calls of order 64 lost more to that
#: than they gained).
FREE_CORES_FROM = 128 * 128
#: The LU family's (``solve``, ``det``, ``lu``, ``lu_factor``) :data:`FREE_CORES_FROM`:
#: SciPy's OpenBLAS (0.3.30 on the x86-64 development machines) runs ``?getrf`` of order 141 on
#: one thread and of order 142 on all (seen as the workers a call leaves spinning), so that
#: below this the look finds nothing to step down and only costs (``benchmarks/bench_scipy_mix.py``'s
#: first calls of order 128). A library property observed on one build, not calibrated per machine.
#: (``inv`` is not of the family: its ``?getri`` starts the threads from order 80 or so, and its
#: Cholesky path ``?potrf`` from 128.)
LU_FREE_CORES_FROM = 20_000


def on_free_cores(fn: F, from_elements: int | Callable[[tuple, dict], int] = FREE_CORES_FROM) -> F:
    """``fn`` (whose first argument is its matrix) with calls on a NumPy matrix of at least
    ``from_elements`` elements run with NumPy's and SciPy's OpenBLAS set to the cores free at
    the call's start (other calls unchanged): right after a NumPy product or a SciPy call, that
    pool's threads still spin on a core, and an OpenBLAS call on all cores would wait for its
    thread sharing that core at every step. ``from_elements`` may be a function of the call's
    ``(args, kwargs)``, for a function whose LAPACK routine depends on its arguments.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.linalg.lapack import on_free_cores
    >>> trace = on_free_cores(lambda a: float(np.trace(a)))
    >>> trace(np.eye(300))
    300.0
    """

    threshold = from_elements if callable(from_elements) else (lambda args, kwargs: from_elements)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else next(iter(kwargs.values()), None)
        if type(first) is np.ndarray and first.size >= threshold(args, kwargs):
            return stepped_down(lambda: fn(*args, **kwargs), POOLS, busy_learn=first.size >= BUSY_LEARN_FROM)
        return fn(*args, **kwargs)

    return call  # type: ignore[return-value]


def calibrated_mkl(routine: str, a: Any) -> Callable[..., Any] | None:
    """MKL's ``routine`` (``"geev"``: ``geev(a, compute_vl, compute_vr, overwrite_a)``, SciPy's
    wrapper's results) where ``a`` is a finite NumPy matrix and this machine's calibration chose
    MKL's routine for its order and dtype, else ``None`` (the caller runs SciPy's,
    :func:`threaded`). Never for NaN: MKL's ``?gebal`` refuses it and its ``?geev`` then crashes
    the process, where SciPy's returns.

    Examples
    --------
    >>> import numpy as np
    >>> calibrated_mkl("geev", np.eye(2)) is None  # order 2: not calibrated
    True
    """
    if (routine != "geev" or type(a) is not np.ndarray or a.ndim != 2 or not mkl_chosen(routine, a.shape[0], a.dtype)
            or not np.isfinite(a).all()):
        return None
    return geev(a.dtype.char)


def threaded(routine: str, a: Any, call: Callable[[], T]) -> T:
    """``call()``, a call of ``routine`` on ``a``, through :func:`on_calibrated_threads` where
    ``a`` is a NumPy matrix (what the compiled extension takes), else as it is.

    Examples
    --------
    >>> import numpy as np
    >>> threaded("gesdd", np.eye(2), lambda: "called")
    'called'
    """
    if type(a) is np.ndarray and a.ndim == 2:
        return on_calibrated_threads(routine, a.shape[0], a.shape[1], a.dtype, call)
    return call()
