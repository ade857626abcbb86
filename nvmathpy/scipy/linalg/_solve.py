"""``solve``, ``inv``, ``det``, ``solve_triangular`` and ``lstsq`` with SciPy's signatures,
defaults, return conventions, errors and warnings, calling LAPACK directly."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...linalg.lapack import FREE_CORES_FROM, LU_FREE_CORES_FROM, MAX_ORDER, SCIPY_BELOW, fast_module, scipys
from ._banded import solve_assumed_banded
from ._structured import STRUCTURES, Singular, cholesky_first, detect, inv_slice, solve_general, solve_slice
from ._validate import (
    EPS, LinAlgError, all_finite, as_array, lapack_common, lapack_one, lapack_pair, over_batch, raise_singular,
    to_caller_of, warn_ill_conditioned,
)

__all__ = ["solve", "inv", "det", "solve_triangular", "lstsq", "solve_free_cores_from"]


def _square(a1: np.ndarray) -> None:
    if a1.ndim < 2:
        raise ValueError(f"Expected at least ndim=2, got {a1.ndim=}")
    if a1.shape[-1] != a1.shape[-2]:
        raise ValueError(f"Expected square matrix, got {a1.shape=}")


def _structure(assume_a: Any) -> str | None:
    try:
        return STRUCTURES[assume_a]
    except (KeyError, TypeError):
        raise ValueError(f"{assume_a} is not a recognized matrix structure") from None


#: ``inv``'s ``assume_a`` spellings (fewer than ``solve``'s, as SciPy's).
_INV_STRUCTURES = (None, "general", "gen", "diagonal", "upper triangular", "lower triangular", "pos", "sym", "her")


def _inv_structure(assume_a: Any) -> str | None:
    """``inv``'s kernel for ``assume_a``; an unknown one raises ``KeyError``, as SciPy's ``inv`` does."""
    if not isinstance(assume_a, (str, type(None))) or assume_a not in _INV_STRUCTURES:
        allowed = ", ".join(map(repr, _INV_STRUCTURES))
        raise KeyError(f"inv: assume_a={assume_a!r} is not a recognized matrix structure; allowed: {allowed}")
    return STRUCTURES[assume_a]


def solve_free_cores_from(args: tuple, kwargs: dict) -> int:
    """From how many elements a :func:`solve` call looks at the free cores
    (:func:`~nvmathpy.linalg.lapack.on_free_cores`): the Cholesky family's
    :data:`~nvmathpy.linalg.lapack.FREE_CORES_FROM` where the call runs ``?potrf`` (OpenBLAS
    threads it from order 128) - ``assume_a`` asks for it, or, without ``assume_a``, a matrix
    between the two thresholds whose mirrored corner entries agree (it may be detected
    Hermitian, then factored by Cholesky first; the look only costs where it is not) - else
    the LU family's.

    Examples
    --------
    >>> import numpy as np
    >>> solve_free_cores_from((), {"assume_a": "pos"}) < solve_free_cores_from((), {})
    True
    >>> spd = np.eye(130)
    >>> solve_free_cores_from((spd, spd), {}) == solve_free_cores_from((), {"assume_a": "pos"})
    True
    """
    assume_a = kwargs["assume_a"] if "assume_a" in kwargs else args[6] if len(args) > 6 else None
    if type(assume_a) is str:
        return FREE_CORES_FROM if STRUCTURES.get(assume_a) == "pos" else LU_FREE_CORES_FROM
    a = args[0] if args else kwargs.get("a")
    if (assume_a is None and type(a) is np.ndarray and a.ndim == 2 and FREE_CORES_FROM <= a.size < LU_FREE_CORES_FROM
            and _mirrored_corners(a)):
        return FREE_CORES_FROM
    return LU_FREE_CORES_FROM


def _mirrored_corners(a: np.ndarray) -> bool:
    """Whether ``a``'s entries next to its corners equal their mirror images' conjugates (a
    look of a few entries: the Hermitian matrices pass, most others fail)."""
    return bool(a[0, -1] == a[-1, 0].conjugate() and a[1, 0] == a[0, 1].conjugate()
                and a[-1, -2] == a[-2, -1].conjugate())


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: str | None = None, transposed: bool = False) -> Any:
    """Solve ``a @ x = b`` (``a`` square, batched over leading dimensions), as
    :func:`scipy.linalg.solve`.

    ``assume_a``: ``None`` (detect diagonal / triangular / tridiagonal from order 4 /
    symmetric / Hermitian - Cholesky first, the symmetric solver where it is not positive definite
    - / general, as SciPy 1.17), ``'gen'``, ``'diagonal'``,
    ``'upper triangular'``, ``'lower triangular'``, ``'pos'``, ``'sym'``, ``'her'`` (long
    spellings too), ``'tridiagonal'`` (the three diagonals, the rest of ``a`` ignored;
    ``?gttrf``/``?gttrs``) and ``'banded'`` (``?gbsv`` on the measured band, with SciPy's
    messages for it: "Matrix is singular.", "Ill-conditioned matrix ...").
    ``overwrite_a``/``overwrite_b`` work in place as SciPy's do: for one matrix, a
    Fortran-ordered (or, for ``b``, contiguous 1-D) writeable input of the computation dtype
    is overwritten (``a`` by its factors; ``x`` is then ``b`` itself); any other input is left
    as it is. Singular matrices raise ``LinAlgError`` naming the batch slices; ill-conditioned
    ones warn with ``LinAlgWarning``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import solve
    >>> solve(np.array([[3.0, 2.0, 0.0], [1.0, -1.0, 0.0], [0.0, 5.0, 1.0]]), np.array([2.0, 4.0, -1.0]))
    array([ 2., -2.,  9.])
    """
    if assume_a == "banded":  # SciPy 1.17 solves this structure apart, with its own messages
        return solve_assumed_banded(a, b, overwrite_b, check_finite, transposed)
    kind = _structure(assume_a)
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and 0 < b.ndim <= 2 and a.dtype == b.dtype
            and a.dtype.char in EPS and a.dtype.isnative and a.shape[0] == a.shape[1] == b.shape[0] > 1 and b.size
            and not (transposed and a.dtype.kind == "c")):
        in_a = overwrite_a and a.flags.f_contiguous and a.flags.writeable
        in_b = overwrite_b and b.flags.f_contiguous and b.flags.writeable
        structure = kind or detect(a)
        cholesky = structure == "pos" or (kind is None and cholesky_first(structure, a))
        tried = False  # a Cholesky attempt failed: the symmetric/Hermitian solver next, as SciPy's fall-back
        fast = fast_module() if not (in_a or in_b) and structure in ("gen", "pos", "sym", "her") else None
        # SciPy's routines, as solve_slice's (the general solve's getrf may be another's at large orders);
        # the C extension declines (NotImplemented) what it does not handle
        if fast is not None and (structure != "gen" or a.shape[0] < SCIPY_BELOW
                                 or scipys(a.dtype, a.shape[0], "getrf")):
            for attempt in (("pos", "sym") if cholesky and structure != "pos" else (structure,)):
                result = (fast.solve_gen(a, b, transposed, check_finite) if attempt == "gen"
                          else fast.solve_pos(a, b, lower, check_finite) if attempt == "pos"
                          else fast.solve_sym(a, b, lower, structure == "her", check_finite))
                if result is NotImplemented:
                    break
                x, rcond = result
                if x is not None:
                    if not rcond >= EPS[a.dtype.char]:
                        warn_ill_conditioned([(0, rcond)])
                    return x
                if attempt != "pos" or structure == "pos":
                    raise_singular([0])
                tried = True
        # The general path reads every entry: NaN/Inf in a or b then shows up in the norm LAPACK
        # computes for the condition estimate, or in x, and only then are the inputs scanned
        # (not when overwriting: bad input must leave the inputs as they are).
        deferred = check_finite and structure == "gen" and not (in_a or in_b)
        if check_finite and not deferred:
            as_array(a, True, "a")
            as_array(b, True, "b")
        try:
            x, rcond = (solve_general(a, b, transposed) if deferred
                        else solve_slice(a, b, structure, lower, transposed, kind is None, in_a, in_b, tried))
        except Singular:
            if deferred:
                as_array(a, True, "a")
                as_array(b, True, "b")
            raise_singular([0])
        if deferred and not (rcond > 0 and all_finite(x)):
            as_array(a, True, "a")
            as_array(b, True, "b")
        if not rcond >= EPS[a.dtype.char]:
            warn_ill_conditioned([(0, rcond)])
        return x
    a1 = as_array(a, check_finite, "a")
    b1 = as_array(b, check_finite, "b")
    convert = to_caller_of(a)
    dtype = lapack_pair(a1.dtype, b1.dtype)
    if a1.ndim < 2:
        a1 = np.atleast_2d(a1)
    a1 = a1.astype(dtype, copy=False)
    b1 = b1.astype(dtype, copy=False)
    _square(a1)
    if transposed and dtype.kind == "c":
        raise NotImplementedError("scipy.linalg.solve can currently not solve a^T x = b or a^H x = b "
                                  "for complex matrices.")
    b_is_1d = b1.ndim <= 1
    if b1.ndim == 0:
        b1 = b1.reshape(1)
    b2 = b1[:, None] if b_is_1d else b1
    scalar = a1.size == 1
    if b2.shape[-2] != a1.shape[-1] and not scalar:
        raise ValueError(f"incompatible shapes: a1.shape={a1.shape} and b1.shape={b2.shape}")  # SciPy's names
    if a1.ndim == 2 and b2.ndim == 2 and a1.size > 1:
        structure = kind or detect(a1)
        in_a = overwrite_a and a1.flags.f_contiguous and a1.flags.writeable
        in_b = overwrite_b and b2.flags.f_contiguous and b2.flags.writeable
        try:
            x, rcond = solve_slice(a1, b2, structure, lower, transposed, kind is None, in_a, in_b)
        except Singular:
            raise_singular([0])
        if not rcond >= EPS[dtype.char]:
            warn_ill_conditioned([(0, rcond)])
        return convert(x[:, 0] if b_is_1d else x)
    batch = np.broadcast_shapes(a1.shape[:-2], b2.shape[:-2])
    a3 = np.broadcast_to(a1, batch + a1.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:])
    if a3.size == 0 or b3.size == 0:
        x = np.empty(b3.shape, dtype)
        return convert(x[..., 0] if b_is_1d else x)
    if scalar:
        if a3.reshape(-1)[0] == 0:
            raise LinAlgError("A singular matrix detected.")
        x = b3 / a3
        return convert(x[..., 0] if b_is_1d else x)
    x = _each_slice(b3.shape, dtype,
                    lambda i: solve_slice(a3[i], b3[i], kind or detect(a3[i]), lower, transposed,
                                          detected=kind is None))
    return convert(x[..., 0] if b_is_1d else x)


def _each_slice(shape: tuple, dtype: np.dtype, one: Any) -> np.ndarray:
    """Fill ``out[i], rcond = one(i)`` for each batch index ``i`` of ``shape`` (its last two
    dimensions are one result's); then raise SciPy's error naming every singular slice by its
    flat number, or warn naming every ill-conditioned one."""
    out = np.empty(shape, dtype)
    singular, ill = [], []
    for i, index in enumerate(np.ndindex(shape[:-2])):
        try:
            out[index], rcond = one(index)
        except Singular:
            singular.append(i)
            continue
        if not rcond >= EPS[dtype.char]:
            ill.append((i, rcond))
    if singular:
        raise_singular(singular)
    if ill:
        warn_ill_conditioned(ill)
    return out


def _one_lapack_matrix(a: Any) -> bool:
    """True for one non-empty square 2-D NumPy matrix of a LAPACK dtype in native byte order:
    the operand of ``inv``'s and ``det``'s direct paths."""
    return (type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD" and a.dtype.isnative
            and a.shape[0] == a.shape[1] and a.size > 0)


def _inv_one(one: Any, dtype_char: str) -> np.ndarray:
    """The inverse ``one()`` computes with its ``rcond``, with SciPy's ``LinAlgError`` when
    the matrix is singular and ``LinAlgWarning`` when it is ill-conditioned."""
    try:
        x, rcond = one()
    except Singular:
        raise_singular([0])
    if not rcond >= EPS[dtype_char]:
        warn_ill_conditioned([(0, rcond)])
    return x


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True, *, assume_a: str | None = None,
        lower: bool = False) -> Any:
    """Inverse of a (batch of) square matrices, as :func:`scipy.linalg.inv`.

    ``assume_a``: ``None`` (detect, as SciPy 1.17: triangular by ``?trtri``, symmetric or
    Hermitian by Cholesky first and ``?sytri``/``?hetri`` where not positive definite, the rest
    by the LU), ``'gen'``, ``'diagonal'``, ``'upper triangular'``, ``'lower triangular'``,
    ``'pos'``; ``'pos'``, ``'sym'`` and ``'her'`` read only the ``lower`` (else upper) triangle,
    as SciPy does; any other value raises ``KeyError``, as SciPy's. Warns with
    ``LinAlgWarning`` when ill-conditioned.
    ``overwrite_a=True`` inverts in place, as SciPy does, a single Fortran-ordered writeable
    matrix of the computation dtype (the result is then ``a`` itself).

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import inv
    >>> inv(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[-2. ,  1. ],
           [ 1.5, -0.5]])
    """
    # The common call, without the general path's layers; a matrix with NaN or infinity is
    # detected general, and inv_slice checks it.
    if assume_a is None and _one_lapack_matrix(a) and (found := detect(a)) != "diagonal":
        in_a = overwrite_a and a.flags.f_contiguous and a.flags.writeable
        return _inv_one(lambda: _inv_detected(a, found, lower, in_a, check_finite), a.dtype.char)
    kind = _inv_structure(assume_a)
    a1 = as_array(a, check_finite, "a")
    convert = to_caller_of(a)
    _square(a1)
    dtype = lapack_one(a1.dtype)
    if a1.size == 0:
        return convert(np.empty(a1.shape, dtype))
    a1 = a1.astype(dtype, copy=False)
    in_a = overwrite_a and a1.ndim == 2 and a1.flags.f_contiguous and a1.flags.writeable

    def one(i: tuple) -> tuple[np.ndarray, float]:
        if kind is None:
            return _inv_detected(a1[i], detect(a1[i]), lower, in_a, False)
        if kind in ("pos", "upper", "lower", "sym", "her"):
            return inv_compiled(a1[i], kind, lower, False)
        return inv_slice(a1[i], "gen" if kind == "tri" else kind, lower, in_a)

    if a1.ndim > 2:
        return convert(_each_slice(a1.shape, dtype, one))
    x = _inv_one(lambda: one(()), dtype.char)
    if in_a and not np.may_share_memory(x, a1):  # the structured kernels' inverses are new arrays
        a1[...] = x
        x = a1
    return convert(x)


def _inv_detected(a: np.ndarray, structure: str, lower: bool, overwrite_a: bool,
                  check_finite: bool) -> tuple[np.ndarray, float]:
    """``(inverse, rcond)`` of one matrix of the :func:`detect`-ed ``structure``, as SciPy 1.17
    (:func:`inv_compiled`; with ``overwrite_a``, the inverse written into ``a``): a real
    symmetric or complex Hermitian one by Cholesky first (``?potrf``/``?potri``), and where it
    is not positive definite, as a complex symmetric one, by ``?sytrf``/``?hetrf`` and
    ``?sytri``/``?hetri``; a triangular one by ``?trtri``; the others by the general LU."""
    kinds = (("pos", structure) if cholesky_first(structure, a)
             else (structure,) if structure in ("upper", "lower", "sym", "her") else ())
    for kind in kinds:
        try:
            x, rcond = inv_compiled(a, kind, lower, check_finite)
        except Singular:
            if kind != "pos":
                raise
            continue
        if overwrite_a:
            a[...] = x
            x = a
        return x, rcond
    kind = "gen" if structure in ("sym", "her", "tri") else structure
    if kind == "gen" and not overwrite_a:
        return inv_compiled(a, kind, lower, check_finite)
    return inv_slice(a, kind, lower, overwrite_a, check_finite and kind == "gen")


def inv_compiled(a: np.ndarray, kind: str, lower: bool, check_finite: bool) -> tuple[np.ndarray, float]:
    """``(inverse, rcond)`` of the NumPy matrix ``a`` (a LAPACK dtype) of ``kind`` ``"gen"``,
    ``"pos"``, ``"sym"`` or ``"her"`` (the Hermitian positive definite, symmetric or Hermitian
    matrix its ``lower``, else upper, triangle defines), ``"upper"`` or ``"lower"``
    (triangular): SciPy's LAPACK calls in one call of the compiled extension (``inv_gen``,
    ``inv_pos``, ``inv_sym``, ``inv_tri``), or the Python paths where it is not at hand (a
    symmetric or Hermitian matrix there by the general LU of the whole matrix); ``Singular``
    where the matrix is singular or not positive definite, SciPy's ``ValueError`` for NaN or
    infinity with ``check_finite``."""
    fast = fast_module()
    if fast is not None:
        result = (fast.inv_gen(a, check_finite) if kind == "gen"
                  else fast.inv_pos(a, lower, check_finite) if kind == "pos"
                  else fast.inv_sym(a, lower, kind == "her", check_finite) if kind in ("sym", "her")
                  else fast.inv_tri(a, kind == "lower", check_finite))
        if result is not NotImplemented:
            if result[0] is None:
                raise Singular
            return result
    if check_finite and not all_finite(a):
        raise ValueError("array must not contain infs or NaNs")
    if kind in ("sym", "her"):
        return inv_slice(_from_triangle(a, lower, kind == "her"), "gen", lower)
    return inv_slice(a, kind, lower)  # (the inputs scanned above)


def _from_triangle(m: np.ndarray, lower: bool, hermitian: bool) -> np.ndarray:
    """The symmetric (``hermitian``: Hermitian, real diagonal) matrix ``m``'s ``lower`` (else
    upper) triangle defines."""
    stored, mirrored = (np.tril(m), np.tril(m, -1)) if lower else (np.triu(m), np.triu(m, 1))
    full = stored + (mirrored.conj().T if hermitian else mirrored.T)
    if hermitian:
        np.fill_diagonal(full, full.diagonal().real)
    return full


@functools.lru_cache(maxsize=None)
def _getrf(char: str) -> Any:
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs("getrf", dtype=np.dtype(char))


#: 0, 1, 2, ...: the row indices ``getrf``'s pivots name when a row is not interchanged.
_STEPS = np.arange(MAX_ORDER, dtype=np.int32)


def _lu_det(getrf: Any, m: np.ndarray, scratch_c: int, scratch_f: int) -> float | complex:
    """The determinant of the square matrix ``m`` from its LU (``getrf`` of ``m``'s dtype):
    the pivots' product, taken left to right in double precision in Python numbers (which
    overflow to infinity without a warning), signed by the row interchanges; 0 for an exact zero pivot.
    ``m`` is factored in place when it is C-ordered and ``scratch_c``, or otherwise when
    ``scratch_f`` (a C-ordered ``m`` is factored as its transpose, which has the same determinant)."""
    lu, piv, info = getrf(m.T, scratch_c) if m.flags.c_contiguous else getrf(m, scratch_f)
    if info > 0:
        return 0.0
    d = math.prod(lu.diagonal().tolist())  # left to right, in C
    n = piv.shape[0]
    steps = _STEPS if n <= _STEPS.shape[0] else np.arange(n, dtype=piv.dtype)
    return -d if np.count_nonzero(piv != steps[:n]) % 2 else d


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Determinant, as :func:`scipy.linalg.det`: a ``numpy.float64``/``complex128`` scalar for
    one matrix, an array for a batch. As SciPy does, single precision is factored in single
    precision and the product of the pivots taken in double; an exactly singular matrix gives
    0 even where that product would overflow, and an overflowing one ``inf`` without a warning.
    ``overwrite_a=True`` factors a C-ordered writeable ``a`` of the computation dtype in place,
    as SciPy does; dtypes that cannot be cast to float32/64 or complex64/128 raise ``TypeError``.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import det
    >>> d = det(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> type(d).__name__, round(float(d), 12)
    ('float64', -2.0)
    """
    if _one_lapack_matrix(a):  # the common call, without the general path's layers
        if check_finite and not all_finite(a):
            raise ValueError("array must not contain infs or NaNs")
        scalar = np.complex128 if a.dtype.kind == "c" else np.float64
        return scalar(_lu_det(_getrf(a.dtype.char), a, int(overwrite_a and a.flags.writeable), 0))
    a1 = as_array(a, check_finite, "a", any_dtype=True)
    convert = to_caller_of(a)
    if a1.ndim < 2:
        raise ValueError("The input array must be at least two-dimensional.")
    if a1.shape[-1] != a1.shape[-2]:
        raise ValueError(f"Last 2 dimensions of the array must be square but received shape {a1.shape}.")
    if a1.dtype.kind not in "biufc" or a1.dtype.kind == "f" and a1.dtype.itemsize > 8 or a1.dtype.itemsize > 16:
        raise TypeError(f"a: the dtype {a1.dtype} cannot be cast to float(32, 64) or complex(64, 128).")  # as SciPy
    compute = lapack_one(a1.dtype)
    out_dtype = np.dtype(np.complex128 if compute.kind == "c" else np.float64)
    if min(a1.shape) == 0:
        return out_dtype.type(1.0) if a1.ndim == 2 else convert(np.ones(a1.shape[:-2], out_dtype))
    owned = a1.dtype != compute  # a cast copy, free to overwrite
    a1 = a1.astype(compute, copy=False)
    scratch = int(owned or overwrite_a and a1.flags.writeable)
    n = a1.shape[-1]
    getrf = _getrf(compute.char)
    flat = a1.reshape((-1, n, n))
    dets = np.empty(flat.shape[0], out_dtype)
    for i in range(flat.shape[0]):
        dets[i] = _lu_det(getrf, flat[i], scratch, int(owned))
    if a1.ndim == 2:
        return dets[0]
    return convert(dets.reshape(a1.shape[:-2]))


@functools.lru_cache(maxsize=None)
def _trtrs(char: str) -> Any:
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs("trtrs", dtype=np.dtype(char))


#: ``solve_triangular``'s ``trans`` letters.
_TRANS = {"N": 0, "T": 1, "C": 2}


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a``, as :func:`scipy.linalg.solve_triangular`
    (``trans``: 0/'N', 1/'T', 2/'C'; batched over leading dimensions).

    ``overwrite_b=True`` solves in place in ``b``, as SciPy does, where ``b`` (each batch
    slice of it, for a batch) is Fortran-contiguous (or contiguous 1-D) and of the
    computation dtype (read-only too, as SciPy's f2py wrapper writes it); ``x`` is then ``b``
    itself (for a batch, a new array). Otherwise ``b`` is left as it is.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import solve_triangular
    >>> a = np.array([[3.0, 0, 0, 0], [2, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
    >>> solve_triangular(a, np.array([4.0, 2, 4, 2]), lower=True)
    array([ 1.33333333, -0.66666667,  2.66666667, -1.33333333])
    >>> b = np.array([6.0, 5.0])
    >>> x = solve_triangular(np.array([[2.0, 0.0], [1.0, 3.0]]), b, lower=True, overwrite_b=True)
    >>> b
    array([3.        , 0.66666667])
    """
    t = _TRANS.get(trans, trans)
    if t not in (0, 1, 2):
        raise ValueError(f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    fast = fast_module()
    if fast is not None:  # the C extension declines (NotImplemented) what it does not handle
        x = fast.solve_triangular(a, b, t, lower, unit_diagonal, overwrite_b, check_finite)
        if type(x) is int:
            raise LinAlgError(f"singular matrix: resolution failed at diagonal {x - 1}")
        if x is not NotImplemented:
            return x
    a1 = as_array(a, check_finite, "a")
    b1 = as_array(b, check_finite, "b")
    convert = to_caller_of(a)
    dtype = lapack_common(a1.dtype, b1.dtype)
    a1, b1 = a1.astype(dtype, copy=False), b1.astype(dtype, copy=False)
    trtrs = _trtrs(dtype.char)
    complex_ = dtype.kind == "c"

    def core(a2: np.ndarray, b2: np.ndarray, overwrite: bool) -> np.ndarray:
        if a2.ndim != 2 or a2.shape[0] != a2.shape[1]:
            raise ValueError("expected square matrix")
        if a2.shape[0] != b2.shape[0]:
            raise ValueError(f"shapes of a {a2.shape} and b {b2.shape} are incompatible")
        if b2.size == 0:
            return np.empty(b2.shape, dtype)
        flags = {"overwrite_b": int(overwrite), "unitdiag": int(unit_diagonal)}
        if a2.flags.f_contiguous or not a2.flags.c_contiguous or t == 2 and complex_ and overwrite:
            x, info = trtrs(a2, b2, lower=int(lower), trans=t, **flags)
        elif t == 2 and complex_:  # a^H x = b with a^T's free view: conj(a^T) conj(x) = conj(b)
            x, info = trtrs(a2.T, b2.conj(), lower=int(not lower), trans=0, **flags)
            x = x.conj()
        else:
            x, info = trtrs(a2.T, b2, lower=int(not lower), trans=int(not t), **flags)
        if info > 0:
            raise LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
        if info < 0:
            raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
        return x

    overwrite = bool(overwrite_b)
    if a1.ndim == 2 and b1.ndim <= 2:
        return convert(core(a1, b1, overwrite))
    # As SciPy's: each batch slice of b is solved in place where it qualifies (x is a new stack)
    return convert(over_batch(lambda a2, b2: core(a2, b2, overwrite), [a1, b1], [2, 2 if b1.ndim >= 2 else 1],
                              "solve_triangular"))


@functools.lru_cache(maxsize=None)
def _lstsq_funcs(driver: str, char: str) -> tuple[Any, Any]:
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs((driver, driver + "_lwork"), dtype=np.dtype(char))


@functools.lru_cache(maxsize=256)
def _lstsq_work(driver: str, char: str, m: int, n: int, nrhs: int, cond: float) -> tuple:
    _, query = _lstsq_funcs(driver, char)
    out = query(m, n, nrhs, cond)
    return tuple(int(np.real(np.asarray(v).ravel()[0])) for v in out[:-1])


def lstsq(a: Any, b: Any, cond: float | None = None, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, lapack_driver: str | None = None) -> tuple:
    """Least squares, as :func:`scipy.linalg.lstsq`: ``(x, residues, rank, s)``.

    ``lapack_driver``: ``'gelsd'`` (default, as SciPy), ``'gelsy'`` (fastest; ``s`` is
    ``None`` and ``residues`` empty, as SciPy) or ``'gelss'``. Workspace sizes are cached.

    Examples
    --------
    >>> import numpy as np
    >>> from nvmathpy.scipy.linalg import lstsq
    >>> x, res, rank, s = lstsq(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]), np.array([1.0, 3.0, 5.0]))
    >>> np.round(x, 12), rank
    (array([1., 2.]), 2)
    """
    driver = "gelsd" if lapack_driver is None else lapack_driver
    if driver not in ("gelsd", "gelsy", "gelss"):
        raise ValueError(f'LAPACK driver "{driver}" is not found')
    a1 = as_array(a, check_finite, "a")
    b1 = as_array(b, check_finite, "b")
    convert = to_caller_of(a)

    def core(a2: np.ndarray, b2: np.ndarray) -> tuple:
        if a2.ndim != 2:
            raise ValueError("Input array a should be 2D")
        m, n = a2.shape
        nrhs = b2.shape[1] if b2.ndim == 2 else 1
        if m != b2.shape[0]:
            raise ValueError(f"Shape mismatch: a and b should have the same number of rows ({m} != {b2.shape[0]}).")
        if m == 0 or n == 0:
            x = np.zeros((n,) + b2.shape[1:], dtype=np.common_type(a2, b2))
            residues = np.linalg.norm(b2, axis=0) ** 2 if n == 0 else np.empty((0,))
            return x, residues, 0, np.empty((0,))
        dtype = lapack_common(a2.dtype, b2.dtype)
        func, _ = _lstsq_funcs(driver, dtype.char)
        rhs = np.zeros((max(m, n),) + b2.shape[1:], dtype, order="F")
        rhs[:m] = b2
        rcond = float(np.finfo(dtype).eps if cond is None else cond)
        work = _lstsq_work(driver, dtype.char, m, n, nrhs, rcond)
        mat = np.asarray(a2, dtype)
        if driver == "gelsy":
            _, x, _, rank, info = func(mat, rhs, np.zeros((n, 1), np.int32), rcond, work[0])
            if info < 0:
                raise ValueError(f"illegal value in {-info}-th argument of internal gelsy")
            return x[:n], np.array([], x.dtype), rank, None
        if driver == "gelss":
            _, x, s, rank, _, info = func(mat, rhs, cond=rcond, lwork=work[0])
        elif dtype.kind == "c":
            x, s, rank, info = func(mat, rhs, work[0], work[1], work[2], rcond, False, False)
        else:
            x, s, rank, info = func(mat, rhs, work[0], work[1], rcond, False, False)
        if info > 0:
            raise LinAlgError("SVD did not converge in Linear Least Squares")
        if info < 0:
            raise ValueError(f"illegal value in {-info}-th argument of internal {driver}")
        resids = np.asarray([], dtype=x.dtype)
        if m > n:
            if rank == n:
                resids = np.sum(np.abs(x[n:]) ** 2, axis=0)
            x = x[:n]
        return x, resids, rank, s

    if a1.ndim == 2 and b1.ndim <= 2:
        return convert(core(a1, b1))
    return convert(over_batch(core, [a1, b1], [2, 2 if b1.ndim >= 2 else 1], "lstsq"))
