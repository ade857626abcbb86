"""``getrf``/``getrs`` and ``potrf``/``potrs`` of the OpenBLAS NumPy itself runs on.

SciPy's LAPACK wrappers run on SciPy's own copy of OpenBLAS. Its worker threads and NumPy's
each spin for a while after a call, so a program that mixes NumPy products (``a @ b``,
nvmathpy's matmul, which runs on NumPy's BLAS) with SciPy's LAPACK has two thread pools
fighting for the same cores: a factorization on SciPy's OpenBLAS right after a NumPy product
is much slower than alone, on NumPy's hardly. Large factorizations therefore get candidates
that call NumPy's OpenBLAS
(the scipy-openblas builds of NumPy's wheels export LAPACK as ``scipy_?getrf_64_``, 64-bit
integers), found among the loaded libraries as :mod:`nvmathpy.linalg.gemm.cpu._cblas` finds its
``?gemm``.

The Fortran entry points are called (not LAPACKE, which may scan the input for NaN first): the
results equal the f2py wrappers', with their calling conventions, so the plans take either.
``getrf``, ``potrf``, ``getrs`` and ``potrs`` started while SciPy's pool alone spins (right
after a SciPy call) run the same routine on SciPy's OpenBLAS instead, on the threads that spin
there (:func:`._pool_threads.stepped_down`).
Each call costs a few microseconds of ctypes, which is why small matrices stay on SciPy's
wrappers.

:data:`numpy_linalg` is the module NumPy's own ``numpy.linalg`` functions are defined in:
plans that run NumPy's solvers call them there, never through ``numpy.linalg``, whose
attributes :func:`nvmathpy.patch` replaces by nvmathpy's (a call through them would recurse).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ...gemm.cpu._cblas import _numpy_blas
from ._pool_threads import BUSY_LEARN_FROM, SCIPY, only_hot, scipy_openblas, stepped_down

try:  # NumPy 2: the module numpy.linalg's functions live in
    from numpy.linalg import _linalg as numpy_linalg
except ImportError:  # NumPy 1.26
    from numpy.linalg import linalg as numpy_linalg  # type: ignore[no-redef]

__all__ = ["FROM_ORDER", "HOT_SOLVE_FROM", "POTRS_BY_COLUMN", "available", "determinant", "numpy_linalg", "routines",
           "scipy_exports", "suits"]

#: NumPy's gufuncs behind :data:`numpy_linalg`'s functions (``None`` where a NumPy has none).
_gufuncs = getattr(numpy_linalg, "_umath_linalg", None)
#: :func:`determinant`'s gufunc signatures by dtype character and ``log``: the types NumPy's
#: ``det``/``slogdet`` pass for float64 and complex128 operands, which they return unconverted.
_SIGNATURES = {("d", False): "d->d", ("D", False): "D->D", ("d", True): "d->dd", ("D", True): "D->Dd"}


def determinant(a: np.ndarray, log: bool) -> Any:
    """``numpy.linalg.det(a)`` (``log``: ``numpy.linalg.slogdet(a)``'s ``(sign, logabsdet)``)
    of a stack of square matrices of a LAPACK dtype: NumPy's gufunc itself for float64 and
    complex128 (what NumPy's function calls after checks that the caller made), NumPy's
    function for the others (it computes them in double precision and converts back).

    Examples
    --------
    >>> round(float(determinant(np.array([[1.0, 2.0], [3.0, 4.0]]), False)), 12)
    -2.0
    """
    signature = _SIGNATURES.get((a.dtype.char, log)) if _gufuncs is not None else None
    if signature is None:
        return numpy_linalg.slogdet(a) if log else numpy_linalg.det(a)
    return (_gufuncs.slogdet if log else _gufuncs.det)(a, signature=signature)

#: From this order on, factorizations and their solves run on NumPy's OpenBLAS (one thread
#: pool with NumPy's products). Below it the calls are short enough that ctypes' few
#: microseconds per call would show, and OpenBLAS runs them on one thread anyway.
FROM_ORDER = 256

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_TRANS = {0: b"N", 1: b"T", 2: b"C"}


@functools.lru_cache(maxsize=None)
def _symbol(name: str) -> tuple[Any, type] | None:
    """The Fortran entry point ``name`` (e.g. ``"dgetrf"``) of NumPy's OpenBLAS and its integer type."""
    return _entry(_numpy_blas(), (f"scipy_{name}_64_", f"{name}_64_"), ctypes.c_int64)


def _entry(library: Any, symbols: tuple[str, ...], integer: type) -> tuple[Any, type] | None:
    """The first of ``symbols`` that ``library`` (a loaded OpenBLAS, or ``None``) exports, as a
    function returning nothing, with the ``integer`` type of its build; ``None`` if none."""
    for symbol in symbols if library is not None else ():
        fn = getattr(library, symbol, None)
        if fn is not None:
            fn.restype = None
            return fn, integer
    return None


@functools.lru_cache(maxsize=64)
def dtype_name(dtype: Any) -> str:
    """``numpy.dtype(dtype).name``, remembered: the routine choice of every large factorization
    asks for it a dozen times, and NumPy builds the name in Python each time (microseconds)."""
    return np.dtype(dtype).name


def _scipy_symbol(name: str) -> tuple[Any, type] | None:
    """The Fortran entry point ``name`` of SciPy's OpenBLAS (32-bit integers, as SciPy's wheels
    and a system OpenBLAS export them) once SciPy has loaded it, else ``None``."""
    return _entry(scipy_openblas(), (f"scipy_{name}_", f"{name}_"), ctypes.c_int32)


_SCIPY_EXPORTS: set[tuple[str, ...]] = set()  # the name sets found (none before SciPy loads its OpenBLAS)


def scipy_exports(names: tuple[str, ...]) -> bool:
    """Whether SciPy's OpenBLAS is loaded and exports every Fortran entry point of ``names``
    (e.g. ``("dgetrf", "dgemm")``); a yes is remembered."""
    if names in _SCIPY_EXPORTS:
        return True
    if any(_scipy_symbol(name) is None for name in names):
        return False
    _SCIPY_EXPORTS.add(names)
    return True


def available(dtype: np.dtype, *names: str) -> bool:
    """Whether NumPy's OpenBLAS exports every routine of ``names`` for ``dtype`` and this
    module wraps each with SciPy's signature (:func:`routines`)."""
    prefix = _PREFIX.get(dtype_name(dtype))
    return prefix is not None and _numpy_blas() is not None and all(
        name in _MAKERS and _symbol(prefix + name) is not None for name in names)


def _fortran(x: np.ndarray, dtype: np.dtype, overwrite: bool) -> np.ndarray:
    """``x`` as a Fortran-ordered array of ``dtype`` LAPACK may overwrite (``x`` itself when allowed)."""
    if overwrite and x.dtype == dtype and x.flags.f_contiguous and x.flags.writeable:
        return x
    return np.array(x, dtype=dtype, order="F")


def _readable(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Factors as LAPACK reads them: Fortran-ordered, of ``dtype`` (a copy only if not so)."""
    return x if x.dtype == dtype and x.flags.f_contiguous else np.asfortranarray(x, dtype)


def _getrf_call(dtype: np.dtype, symbol: Callable[[str], tuple[Any, type] | None]
                ) -> Callable[[np.ndarray], tuple[np.ndarray, int]] | None:
    """``run(lu) -> (piv, info)``: ``?getrf`` in place on the Fortran-ordered ``lu`` through the
    entry point ``symbol`` finds (``piv`` 0-based int32, as SciPy's); ``None`` where it finds none."""
    found = symbol(_PREFIX[dtype.name] + "getrf")
    if found is None:
        return None
    fn, integer = found
    index = np.dtype(np.int64 if integer is ctypes.c_int64 else np.int32)

    def run(lu: np.ndarray) -> tuple[np.ndarray, int]:
        m, n = lu.shape
        ipiv = np.empty(min(m, n), index)
        info = integer(0)
        fn(ctypes.byref(integer(m)), ctypes.byref(integer(n)), ctypes.c_void_p(lu.ctypes.data),
           ctypes.byref(integer(max(1, m))), ctypes.c_void_p(ipiv.ctypes.data), ctypes.byref(info))
        return (ipiv - 1).astype(np.int32), int(info.value)

    return run


def _getrf(dtype: np.dtype) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    run = _getrf_call(dtype, _symbol)

    def getrf(a: np.ndarray, overwrite_a: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        lu = _fortran(a, dtype, bool(overwrite_a))
        piv, info = stepped_down(lambda: run(lu), instead=_on_scipys_pool(_getrf_call, dtype, lu),
                                 busy_learn=lu.size >= BUSY_LEARN_FROM)
        return lu, piv, info

    return getrf


_SCIPY_CALLS: dict[tuple[Any, str], Any] = {}


#: From this many right-hand side elements on, a solve looks whether SciPy's pool alone spins
#: (two small reads, a few microseconds: smaller solves run on NumPy's pool as it is set).
HOT_SOLVE_FROM = 1024


def _solve_on_hot_pool(run: Callable[..., int], make: Callable[..., Any], dtype: np.dtype, x: np.ndarray,
                       *args: Any) -> int:
    """A solve ``run(*args)`` for the right-hand sides ``x`` on NumPy's OpenBLAS as it is set (a
    solve is too short to step down or to learn the pools' workers), or, while SciPy's pool
    alone spins, the same on SciPy's (``make``'s SciPy build): a solve there leaves no NumPy
    worker spinning into the program's next SciPy call."""
    if x.size >= HOT_SOLVE_FROM and only_hot(SCIPY, scan=False):
        twin = _on_scipys_pool(make, dtype, *args)
        if twin is not None:
            return twin()
    return run(*args)


def _on_scipys_pool(make: Callable[..., Any], dtype: np.dtype, *args: Any) -> Callable[[], Any] | None:
    """The call ``make(dtype, symbol)(*args)`` on SciPy's OpenBLAS, for :func:`stepped_down` to
    run instead while SciPy's pool alone spins (``None`` where SciPy's OpenBLAS has not the
    routine); ``make``'s SciPy build is made once per dtype."""
    run = _SCIPY_CALLS.get((make, dtype.name), False)
    if run is False:
        run = make(dtype, _scipy_symbol)
        if run is not None or scipy_openblas() is not None:  # not loaded yet: asked again
            _SCIPY_CALLS[make, dtype.name] = run
    return None if run is None else lambda: run(*args)


def _getrs_call(dtype: np.dtype, symbol: Callable[[str], tuple[Any, type] | None]
                ) -> Callable[[np.ndarray, np.ndarray, np.ndarray, int], int] | None:
    """``run(lu, piv, x, trans) -> info``: ``?getrs`` in place on the Fortran-ordered ``x`` with
    the Fortran-ordered factors ``lu`` and 0-based pivots ``piv``, through the entry point
    ``symbol`` finds; ``None`` where it finds none."""
    found = symbol(_PREFIX[dtype.name] + "getrs")
    if found is None:
        return None
    fn, integer = found
    index = np.dtype(np.int64 if integer is ctypes.c_int64 else np.int32)

    def run(lu: np.ndarray, piv: np.ndarray, x: np.ndarray, trans: int) -> int:
        n = lu.shape[0]
        ipiv = (np.asarray(piv) + 1).astype(index)
        info = integer(0)
        fn(ctypes.c_char_p(_TRANS[int(trans)]), ctypes.byref(integer(n)),
           ctypes.byref(integer(x.shape[1] if x.ndim == 2 else 1)), ctypes.c_void_p(lu.ctypes.data),
           ctypes.byref(integer(max(1, n))), ctypes.c_void_p(ipiv.ctypes.data), ctypes.c_void_p(x.ctypes.data),
           ctypes.byref(integer(max(1, n))), ctypes.byref(info))
        return int(info.value)

    return run


def _getrs(dtype: np.dtype) -> Callable[..., tuple[np.ndarray, int]]:
    run = _getrs_call(dtype, _symbol)

    def getrs(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: int = 0,
              overwrite_b: int = 0) -> tuple[np.ndarray, int]:
        lu, x = _readable(lu, dtype), _fortran(b, dtype, bool(overwrite_b))
        return x, _solve_on_hot_pool(run, _getrs_call, dtype, x, lu, piv, x, trans)

    return getrs


def _potrf_call(dtype: np.dtype, symbol: Callable[[str], tuple[Any, type] | None]
                ) -> Callable[[np.ndarray, int], int] | None:
    """``run(c, lower) -> info``: ``?potrf`` in place on the Fortran-ordered ``c`` through the
    entry point ``symbol`` finds; ``None`` where it finds none."""
    found = symbol(_PREFIX[dtype.name] + "potrf")
    if found is None:
        return None
    fn, integer = found

    def run(c: np.ndarray, lower: int) -> int:
        n = c.shape[0]
        info = integer(0)
        fn(ctypes.c_char_p(b"L" if lower else b"U"), ctypes.byref(integer(n)), ctypes.c_void_p(c.ctypes.data),
           ctypes.byref(integer(max(1, n))), ctypes.byref(info))
        return int(info.value)

    return run


def _potrf(dtype: np.dtype) -> Callable[..., tuple[np.ndarray, int]]:
    run = _potrf_call(dtype, _symbol)

    def potrf(a: np.ndarray, lower: int = 0, clean: int = 1, overwrite_a: int = 0) -> tuple[np.ndarray, int]:
        c = _fortran(a, dtype, bool(overwrite_a))
        info = stepped_down(lambda: run(c, lower), instead=_on_scipys_pool(_potrf_call, dtype, c, lower),
                            busy_learn=c.size >= BUSY_LEARN_FROM)
        if clean and info == 0:  # zero the other triangle, as SciPy's clean=1 does
            _zero_other_triangle(c, bool(lower))
        return c, info

    return potrf


def _zero_other_triangle(c: np.ndarray, lower: bool) -> None:
    """Zero the strictly upper (``lower``) or strictly lower triangle of the Fortran-ordered
    ``c``, one contiguous column piece at a time (several times faster than an index-array
    assignment)."""
    n = c.shape[0]
    if lower:
        for j in range(1, n):
            c[:j, j] = 0
    else:
        for j in range(n - 1):
            c[j + 1:, j] = 0


#: Up to this many right-hand sides ``potrs`` solves column by column with two ``?trsv``:
#: OpenBLAS's ``?potrs`` goes through ``?trsm``, which packs the whole factor even for one
#: column; from a few columns on, that packing pays for itself and ``?potrs`` is faster.
POTRS_BY_COLUMN = 4


def _potrs_call(dtype: np.dtype, symbol: Callable[[str], tuple[Any, type] | None]
                ) -> Callable[[np.ndarray, np.ndarray, int], int] | None:
    """``run(c, x, lower) -> info``: ``?potrs`` in place on the Fortran-ordered ``x`` with the
    Fortran-ordered factor ``c``, through the entry point ``symbol`` finds; ``None`` where it
    finds none."""
    found = symbol(_PREFIX[dtype.name] + "potrs")
    if found is None:
        return None
    fn, integer = found

    def run(c: np.ndarray, x: np.ndarray, lower: int) -> int:
        n = c.shape[0]
        info = integer(0)
        fn(ctypes.c_char_p(b"L" if lower else b"U"), ctypes.byref(integer(n)),
           ctypes.byref(integer(x.shape[1] if x.ndim == 2 else 1)), ctypes.c_void_p(c.ctypes.data),
           ctypes.byref(integer(max(1, n))), ctypes.c_void_p(x.ctypes.data), ctypes.byref(integer(max(1, n))),
           ctypes.byref(info))
        return int(info.value)

    return run


def _potrs(dtype: np.dtype) -> Callable[..., tuple[np.ndarray, int]]:
    prefix = _PREFIX[dtype.name]
    run = _potrs_call(dtype, _symbol)
    trsv, integer = _symbol(prefix + "trsv") or (None, None)
    adjoint = b"C" if prefix in "cz" else b"T"

    def by_column(c: np.ndarray, x: np.ndarray, lower: int) -> None:
        """``x <- A^-1 x`` for ``A = L L^H`` (``lower``) or ``U^H U``, one column at a time (on
        one thread: no pool's workers woken)."""
        n, item = c.shape[0], x.dtype.itemsize
        first, second = (b"N", adjoint) if lower else (adjoint, b"N")
        args = (ctypes.byref(integer(n)), ctypes.c_void_p(c.ctypes.data), ctypes.byref(integer(max(1, n))))
        uplo, step = ctypes.c_char_p(b"L" if lower else b"U"), ctypes.byref(integer(1))
        for column in range(x.shape[1] if x.ndim == 2 else 1):
            at = ctypes.c_void_p(x.ctypes.data + column * n * item)
            for trans in (first, second):
                trsv(uplo, ctypes.c_char_p(trans), ctypes.c_char_p(b"N"), *args, at, step)

    def potrs(c: np.ndarray, b: np.ndarray, lower: int = 0, overwrite_b: int = 0) -> tuple[np.ndarray, int]:
        c, x = _readable(c, dtype), _fortran(b, dtype, bool(overwrite_b))
        if trsv is not None and (x.shape[1] if x.ndim == 2 else 1) <= POTRS_BY_COLUMN:
            by_column(c, x, lower)
            return x, 0
        return x, _solve_on_hot_pool(run, _potrs_call, dtype, x, c, x, lower)

    return potrs


_MAKERS = {"getrf": _getrf, "getrs": _getrs, "potrf": _potrf, "potrs": _potrs}


def routines(dtype: np.dtype, *names: str) -> tuple[Callable[..., Any], ...]:
    """f2py-compatible callables for ``names`` on NumPy's OpenBLAS (check :func:`available` first).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[4.0, 3.0], [6.0, 3.0]], order="F")
    >>> if available(a.dtype, "getrf", "getrs"):
    ...     getrf, getrs = routines(a.dtype, "getrf", "getrs")
    ...     lu, piv, info = getrf(a)
    ...     x, info = getrs(lu, piv, np.array([10.0, 12.0]))
    ... else:
    ...     x = np.linalg.solve(a, [10.0, 12.0])
    >>> np.round(x, 12).tolist()
    [1.0, 2.0]
    """
    return tuple(_routine(name, dtype_name(dtype)) for name in names)


@functools.lru_cache(maxsize=None)
def _routine(name: str, dtype_name: str) -> Callable[..., Any]:
    return _MAKERS[name](np.dtype(dtype_name))


def suits(n: int, dtype: Any, *names: str) -> bool:
    """Whether matrices of order ``n`` run on NumPy's OpenBLAS: the order is large
    (:data:`FROM_ORDER`) and the routines ``names`` exist for ``dtype`` (none named: any)."""
    return n >= FROM_ORDER and available(dtype, *names)
