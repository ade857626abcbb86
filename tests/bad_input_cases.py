"""Bad-input cases for every public function of ``nvmathpy.linalg`` and
``nvmathpy.scipy.linalg``, and the worker that runs them (used by test_bad_input_linalg.py).

Each case is a no-argument call and an expectation:

- ``Like(reference)``: the same outcome as NumPy/SciPy on the same input: when the reference
  returns, the results agree by relative norm error (shapes and, for empty results, dtypes
  too); when it raises, ours raises the same kind (``TypeError``, ``LinAlgError``,
  ``ValueError``, ``MemoryError``);
- ``Raises(types, names)``: an exception of one of ``types`` whose message names one of ``names``;
- ``NonFinite(reference)``: NaN/Inf input where NumPy returns non-finite values or raises
  ``LinAlgError``: ours must do one of the two, never return finite (silently wrong) values.

Run as a script, the worker reads case ids (JSON list) on stdin and prints one JSON line per
case, ``{"id": ..., "ok": ..., "detail": ...}``, flushing after each: a crash or a hang loses
only the case in flight (the test reruns the rest in a fresh worker).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# -- expectations ----------------------------------------------------------------------------


class Like:
    def __init__(self, reference: Callable[[], Any], tol: float | None = None, names: tuple[str, ...] = ()):
        self.reference, self.tol, self.names = reference, tol, names


class Raises:
    def __init__(self, types: tuple[type, ...] | type, names: tuple[str, ...] = ()):
        self.types = types if isinstance(types, tuple) else (types,)
        self.names = names


class NonFinite:
    def __init__(self, reference: Callable[[], Any]):
        self.reference = reference


def _arrays(result: Any) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _arrays(r)]
    if result is None or isinstance(result, (bool, np.bool_)):
        return []
    return [np.asarray(result)]


def _tol(dtype: np.dtype) -> float:
    return 2e-4 if np.dtype(dtype).char in "efF" else 1e-9


def _kind(exc: BaseException) -> str:
    from numpy.linalg import LinAlgError

    for kind in (LinAlgError, MemoryError, TypeError, ValueError, NotImplementedError):
        if isinstance(exc, kind):
            return kind.__name__
    return type(exc).__name__


def _named(exc: BaseException, names: tuple[str, ...]) -> bool:
    text = str(exc)
    return not names or any(n in text for n in names)


def compare(ours: Any, ref: Any, tol: float | None) -> str | None:
    """None when ``ours`` matches ``ref`` (shapes; dtypes of empty results; rel. norm error)."""
    xs, rs = _arrays(ours), _arrays(ref)
    if len(xs) != len(rs):
        return f"{len(xs)} result arrays, the reference has {len(rs)}"
    for i, (x, r) in enumerate(zip(xs, rs)):
        if x.shape != r.shape:
            return f"result {i}: shape {x.shape}, reference {r.shape}"
        if x.dtype.kind != r.dtype.kind and not (x.dtype.kind in "iu" and r.dtype.kind in "iu"):
            return f"result {i}: dtype {x.dtype}, reference {r.dtype}"
        if not x.size:
            if x.dtype != r.dtype:
                return f"result {i} (empty): dtype {x.dtype}, reference {r.dtype}"
            continue
        x64, r64 = x.astype(np.complex128), r.astype(np.complex128)
        if not np.isfinite(x64).all():
            return f"result {i} holds NaN/Inf"
        scale = np.linalg.norm(r64.ravel())
        err = np.linalg.norm((x64 - r64).ravel()) / (scale if scale else 1.0)
        limit = tol if tol is not None else max(_tol(x.dtype), _tol(r.dtype))
        if not err <= limit:
            return f"result {i}: relative error {err:.3g} > {limit:.3g}"
    return None


def run_case(call: Callable[[], Any], expect: Any) -> tuple[bool, str]:
    """Run one case; ``(passed, detail)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_exc = ref = None
        if isinstance(expect, (Like, NonFinite)):
            try:
                ref = expect.reference()
            except Exception as exc:  # noqa: BLE001 - the reference's outcome is what is compared
                ref_exc = exc
        try:
            out = call()
        except Exception as exc:  # noqa: BLE001
            kind = _kind(exc)
            if isinstance(expect, Raises):
                if not isinstance(exc, expect.types):
                    return False, f"raised {type(exc).__name__}: {exc}; expected {[t.__name__ for t in expect.types]}"
                if not _named(exc, expect.names):
                    return False, f"{type(exc).__name__} message does not name {expect.names}: {exc}"
                return True, f"{type(exc).__name__}: {exc}"
            if isinstance(expect, NonFinite):
                if kind == "LinAlgError" or ref_exc is not None and kind == _kind(ref_exc):
                    return True, f"{type(exc).__name__}: {exc}"
                return False, f"raised {type(exc).__name__}: {exc}; NumPy: {ref_exc!r}"
            if ref_exc is None:
                return False, f"raised {type(exc).__name__}: {exc}; the reference returned"
            if kind != _kind(ref_exc):
                theirs = f"{type(ref_exc).__name__}: {ref_exc}"
                return False, f"raised {type(exc).__name__}: {exc}; the reference raised {theirs}"
            if not _named(exc, expect.names):
                return False, f"{type(exc).__name__} message does not name {expect.names}: {exc}"
            return True, f"both raise {kind}"
        if isinstance(expect, Raises):
            return False, f"returned {type(out).__name__}; expected {[t.__name__ for t in expect.types]}"
        if isinstance(expect, NonFinite):
            if ref_exc is None and all(np.isfinite(r).all() for r in _arrays(ref) if r.dtype.kind in "fc"):
                problem = compare(out, ref, None)
                return problem is None, problem or "finite, as the reference"
            finite = all(np.isfinite(x).all() for x in _arrays(out) if x.dtype.kind in "fc")
            return (not finite), "non-finite result" if not finite else f"finite result for NaN/Inf input: {out!r}"
        if ref_exc is not None:
            return False, f"returned; the reference raised {type(ref_exc).__name__}: {ref_exc}"
        problem = compare(out, ref, expect.tol)
        return problem is None, problem or "matches"


# -- inputs ----------------------------------------------------------------------------------

S3 = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]])  # SPD, integer entries: every numeric dtype holds it
B3 = np.array([[1, 2], [3, 1], [2, 2]])


def spd(n: int, seed: int, dtype: Any = np.float64, batch: tuple[int, ...] = ()) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal(batch + (n, n))
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal(batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2).conj() + n * np.eye(n)).astype(dtype)


def rand(shape: tuple[int, ...], seed: int, dtype: Any = np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal(shape)
    return m.astype(dtype)


# -- the functions under test, with their references ----------------------------------------
# Each entry: name -> (ours(a, b), reference(a, b), canon(result), input kind). The canonical
# form removes what is not unique (signs of Q/R columns, singular vectors, the unused triangle).


def _nl() -> Any:
    import nvmathpy.linalg as nl

    return nl


def _sl() -> Any:
    import nvmathpy.scipy.linalg as sl

    return sl


def _sp() -> Any:
    import scipy.linalg as sp

    return sp


def _first(r: Any) -> Any:
    return r[0]


def _ident(r: Any) -> Any:
    return r


def _abs(r: Any) -> Any:
    return np.abs(r)


def _tri_c(r: Any) -> Any:  # cho_factor: (c, lower) -> the triangle that holds the factor
    c, lower = r
    return np.tril(c) if np.all(lower) else np.triu(c)


def _per_item(f: Callable[..., Any]) -> Callable[..., Any]:
    """A reference for nvmathpy.linalg's batched extensions of a 2-D-only NumPy/SciPy function:
    ``f`` per batch item, stacked (an empty batch: ``f`` on a stand-in item gives the empty
    results their shapes and dtypes)."""

    def batched(a: Any, b: Any) -> Any:
        a = np.asarray(a)
        if a.ndim <= 2:
            return f(a, b)
        batch = a.shape[:-2]
        if b is not None:
            b = np.broadcast_to(b, batch + np.shape(b)[-2:])
        flat_a = a.reshape((-1,) + a.shape[-2:])
        flat_b = None if b is None else b.reshape((-1,) + b.shape[-2:])
        if not flat_a.shape[0]:
            stand_in = np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype)
            one = f(stand_in, None if b is None else np.ones(b.shape[-2:], b.dtype))
            return _map(lambda x: np.empty(batch + x.shape, x.dtype), one)
        parts = [f(flat_a[i], None if b is None else flat_b[i]) for i in range(flat_a.shape[0])]
        return _map(lambda *xs: np.stack(xs).reshape(batch + np.shape(xs[0])), *parts)

    return batched


def _map(fn: Callable[..., Any], *results: Any) -> Any:
    first = results[0]
    if isinstance(first, (tuple, list)):
        return tuple(_map(fn, *parts) for parts in zip(*results))
    if isinstance(first, (bool, np.bool_)):
        return first
    return fn(*results)


NL = {
    "solve": (lambda a, b: _nl().solve(a, b), lambda a, b: np.linalg.solve(a, b), _ident, "spd"),
    "inv": (lambda a, b: _nl().inv(a), lambda a, b: np.linalg.inv(a), _ident, "spd"),
    "det": (lambda a, b: _nl().det(a), lambda a, b: np.linalg.det(a), _ident, "spd"),
    "slogdet": (lambda a, b: _nl().slogdet(a), lambda a, b: np.linalg.slogdet(a), _ident, "spd"),
    "cholesky": (lambda a, b: _nl().cholesky(a), lambda a, b: np.linalg.cholesky(a), _ident, "spd"),
    "qr": (lambda a, b: _nl().qr(a)[1], lambda a, b: np.linalg.qr(a)[1], _abs, "any"),
    "eigh": (lambda a, b: _nl().eigh(a)[0], lambda a, b: np.linalg.eigh(a)[0], _ident, "spd"),
    "eigvalsh": (lambda a, b: _nl().eigvalsh(a), lambda a, b: np.linalg.eigvalsh(a), _ident, "spd"),
    "svd": (lambda a, b: _nl().svd(a)[1], lambda a, b: np.linalg.svd(a)[1], _ident, "any"),
    "svdvals": (lambda a, b: _nl().svdvals(a), lambda a, b: np.linalg.svd(a, compute_uv=False), _ident, "any"),
    "lstsq": (lambda a, b: _nl().lstsq(a, b)[0], _per_item(lambda a, b: np.linalg.lstsq(a, b)[0]), _ident, "any"),
    "solve_triangular": (lambda a, b: _nl().solve_triangular(a, b, lower=True),
                         _per_item(lambda a, b: _sp().solve_triangular(a, b, lower=True, check_finite=False)),
                         _ident, "spd"),
    "lu_factor": (lambda a, b: _nl().lu_factor(a), _per_item(lambda a, b: _sp().lu_factor(a, check_finite=False)),
                  _ident, "spd"),
    "lu_solve": (lambda a, b: _nl().lu_solve(_nl().lu_factor(a), b), lambda a, b: np.linalg.solve(a, b), _ident, "spd"),
    "cho_factor": (lambda a, b: _nl().cho_factor(a),
                   _per_item(lambda a, b: _sp().cho_factor(a, check_finite=False)), _tri_c, "spd"),
    "cho_solve": (lambda a, b: _nl().cho_solve(_nl().cho_factor(a), b), lambda a, b: np.linalg.solve(a, b), _ident,
                  "spd"),
}

SL = {
    "solve": (lambda a, b: _sl().solve(a, b), lambda a, b: _sp().solve(a, b), _ident, "spd"),
    "inv": (lambda a, b: _sl().inv(a), lambda a, b: _sp().inv(a), _ident, "spd"),
    "det": (lambda a, b: _sl().det(a), lambda a, b: _sp().det(a), _ident, "spd"),
    "lstsq": (lambda a, b: _sl().lstsq(a, b)[0], lambda a, b: _sp().lstsq(a, b)[0], _ident, "any"),
    "lu": (lambda a, b: _sl().lu(a), lambda a, b: _sp().lu(a), _ident, "any"),
    "lu_factor": (lambda a, b: _sl().lu_factor(a), lambda a, b: _sp().lu_factor(a), _ident, "spd"),
    "lu_solve": (lambda a, b: _sl().lu_solve(_sp().lu_factor(a), b), lambda a, b: _sp().lu_solve(_sp().lu_factor(a), b),
                 _ident, "spd"),
    "cholesky": (lambda a, b: _sl().cholesky(a), lambda a, b: _sp().cholesky(a), _ident, "spd"),
    "cho_factor": (lambda a, b: _sl().cho_factor(a), lambda a, b: _sp().cho_factor(a), _tri_c, "spd"),
    "cho_solve": (lambda a, b: _sl().cho_solve(_sp().cho_factor(a), b),
                  lambda a, b: _sp().cho_solve(_sp().cho_factor(a), b), _ident, "spd"),
    "qr": (lambda a, b: _sl().qr(a)[1], lambda a, b: _sp().qr(a)[1], _abs, "any"),
    "eigh": (lambda a, b: _sl().eigh(a)[0], lambda a, b: _sp().eigh(a)[0], _ident, "spd"),
    "eigvalsh": (lambda a, b: _sl().eigvalsh(a), lambda a, b: _sp().eigvalsh(a), _ident, "spd"),
    "svd": (lambda a, b: _sl().svd(a)[1], lambda a, b: _sp().svd(a)[1], _ident, "any"),
    "svdvals": (lambda a, b: _sl().svdvals(a), lambda a, b: _sp().svdvals(a), _ident, "any"),
    "solve_triangular": (lambda a, b: _sl().solve_triangular(a, b, lower=True),
                         lambda a, b: _sp().solve_triangular(a, b, lower=True), _ident, "spd"),
}

NAMESPACES = {"nl": NL, "sl": SL}
NEEDS_B = {"solve", "lstsq", "solve_triangular", "lu_solve", "cho_solve"}


def _case(space: str, fn: str, a: Any, b: Any, expect_kind: str = "like", names: tuple[str, ...] = (),
          ref_a: Any = None, ref_b: Any = None, types: tuple[type, ...] = ()) -> tuple[Callable[[], Any], Any]:
    ours, ref, canon, _ = NAMESPACES[space][fn]
    ra = a if ref_a is None else ref_a
    rb = b if ref_b is None else ref_b
    call = lambda: canon(ours(a, b))  # noqa: E731
    if expect_kind == "raises":
        return call, Raises(types, names)
    reference = lambda: canon(ref(ra, rb))  # noqa: E731
    if expect_kind == "nonfinite":
        return call, NonFinite(reference)
    return call, Like(reference, names=names)


# -- the cases -----------------------------------------------------------------------------

#: dtypes by name: every NumPy kind (b, i, u, f, c, m, M, O, S, U, V), both byte orders.
DTYPES = {
    "bool": "?", "int8": "i1", "uint16": "u2", "int64": "i8", ">int32": ">i4", "float16": "f2", "float32": "f4",
    "float64": "f8", ">float64": ">f8", ">float32": ">f4", "complex64": "c8", "complex128": "c16",
    ">complex128": ">c16",
    "longdouble": "g", "clongdouble": "G", "timedelta": "m8[s]", "datetime": "M8[s]", "object": "O", "bytes": "S4",
    "str": "U4", "void": "V8",
}
SUPPORTED_NL = {"bool", "int8", "uint16", "int64", ">int32", "float16", "float32", "float64", ">float64", ">float32",
                "complex64", "complex128", ">complex128"}


def native(m: np.ndarray) -> np.ndarray:
    return m.astype(m.dtype.newbyteorder("="))


def _typed(m: np.ndarray, code: str) -> np.ndarray:
    if code == "V8":
        return np.zeros(m.shape, "V8")
    if code[-2:] in ("S4", "U4"):
        return m.astype(np.int64).astype(code)  # numeric text: SciPy converts it
    if code[0] in "mM" or code[1:2] in ("m", "M"):
        return m.astype(np.int64).astype(code)
    return m.astype(code)


def _dtype_cases() -> dict[str, tuple]:
    from numpy.linalg import LinAlgError

    cases = {}
    for space, table in NAMESPACES.items():
        for fn, (_, _, _, kind) in table.items():
            for dname, code in DTYPES.items():
                a = _typed(S3, code)
                b = _typed(B3, code) if fn in NEEDS_B else None
                if kind == "any" and fn != "lu":
                    a = _typed(np.array([[4, 1], [1, 3], [0, 1]]), code)
                    b = _typed(np.array([[1, 2], [3, 1], [2, 2]]), code) if fn in NEEDS_B else None
                cid = f"dtype-{space}-{fn}-{dname}"
                if space == "nl":
                    if dname in SUPPORTED_NL:
                        wide = np.complex128 if np.dtype(code).kind == "c" else np.float64
                        if dname == "bool" and kind == "spd":  # 0/1 entries: a matrix that is SPD in booleans too
                            a = np.eye(3, dtype=bool)
                        ref_a = np.asarray(a).astype(wide)
                        ref_b = None if b is None else np.asarray(b).astype(wide)
                        cases[cid] = _case(space, fn, a, b, ref_a=ref_a, ref_b=ref_b)
                    else:
                        names = ("a", "lu", "c", "b")
                        cases[cid] = _case(space, fn, a, b, "raises", names=names, types=(TypeError,))
                else:
                    if code == "O":
                        cases[cid] = _case(space, fn, a, b, "raises", names=("a", "b", "c", "lu"),
                                           types=(ValueError, TypeError))
                    elif code == "V8":
                        cases[cid] = _case(space, fn, a, b, "raises", types=(ValueError, TypeError))
                    elif fn in ("lu_solve", "cho_solve") and (code[-2:] in ("S4", "U4") or code[:2] in ("m8", "M8")):
                        continue  # the factors come from scipy.linalg itself, which keeps the text/time dtype
                    elif code.startswith(">"):  # SciPy itself mishandles byte-swapped input: the native values
                        cases[cid] = _case(space, fn, a, b, ref_a=native(a), ref_b=None if b is None else native(b))
                    else:
                        cases[cid] = _case(space, fn, a, b)
    del LinAlgError
    return cases


LAYOUTS = {
    "fortran": lambda m: np.asfortranarray(m),
    "transposed": lambda m: np.swapaxes(m, -1, -2).copy().swapaxes(-1, -2),
    "strided": lambda m: np.repeat(np.repeat(m, 2, axis=-1), 2, axis=-2)[..., ::2, ::2],
    "reversed": lambda m: m[..., ::-1, :].copy()[..., ::-1, :],
    "batch-broadcast": lambda m: np.broadcast_to(m, (3,) + m.shape),
}


def _layout_cases() -> dict[str, tuple]:
    cases = {}
    for space, table in NAMESPACES.items():
        for fn, (_, _, _, kind) in table.items():
            for dt in ("float64", "complex64"):
                base = spd(5, 1, dt) if kind == "spd" else rand((7, 5), 2, dt)
                rhs = rand((base.shape[0], 3), 3, dt) if fn in NEEDS_B else None
                for lname, lay in LAYOUTS.items():
                    if lname == "batch-broadcast" and space == "sl" and fn in ("lu_factor", "lu_solve", "cho_solve"):
                        continue  # the factors come from scipy.linalg.lu_factor/cho_factor: no batches there
                    a = lay(base)
                    b = None if rhs is None else (lay(rhs) if lname != "batch-broadcast" else rhs)
                    call, expect = _case(space, fn, a, b)
                    expect.tol = _tol(np.dtype(dt))
                    cases[f"layout-{space}-{fn}-{dt}-{lname}"] = (call, expect)
    return cases


def _shape_cases() -> dict[str, tuple]:
    from numpy.linalg import LinAlgError

    cases = {}
    huge = np.broadcast_to(np.eye(3) * 4 + 1, (2 ** 40, 3, 3))
    for space, table in NAMESPACES.items():
        for fn, (_, _, _, kind) in table.items():
            b3 = np.ones((3, 2)) if fn in NEEDS_B else None
            # 0-d and 1-d input
            for label, a in (("0d", np.float64(3.0)), ("1d", np.ones(3))):
                if space == "nl":
                    if fn in ("lu_solve", "cho_solve"):
                        continue  # a factor tuple from SciPy: covered by the factor cases
                    cases[f"shape-{space}-{fn}-{label}"] = _case(
                        space, fn, a, None if b3 is None else np.ones(3), "raises", names=("a",),
                        types=(LinAlgError, ValueError))
                elif fn not in ("lu_solve", "cho_solve"):
                    cases[f"shape-{space}-{fn}-{label}"] = _case(space, fn, a, None if b3 is None else np.ones(1))
            # a list (array-like) as NumPy/SciPy accept it
            if fn not in ("lu_solve", "cho_solve"):
                lst = S3.tolist() if kind == "spd" else [[4.0, 1.0], [1.0, 3.0], [0.0, 1.0]]
                bl = None if b3 is None else [[1.0], [2.0], [3.0]]
                cases[f"shape-{space}-{fn}-list"] = _case(space, fn, lst, bl, ref_a=np.array(lst, float),
                                                          ref_b=None if bl is None else np.array(bl))
            # non-square where square is needed
            if kind == "spd" and fn not in ("lu_solve", "cho_solve"):
                a = rand((4, 3), 5)
                b = np.ones((4, 2)) if b3 is not None else None
                if space == "nl":
                    cases[f"shape-{space}-{fn}-nonsquare"] = _case(space, fn, a, b, "raises", names=("a",),
                                                                   types=(ValueError, LinAlgError))
                else:
                    cases[f"shape-{space}-{fn}-nonsquare"] = _case(space, fn, a, b)
            # b with the wrong number of rows
            if b3 is not None and fn not in ("lu_solve", "cho_solve"):
                a = spd(3, 6) if kind == "spd" else rand((3, 2), 6)
                if space == "nl":
                    cases[f"shape-{space}-{fn}-brows"] = _case(space, fn, a, np.ones((4, 2)), "raises", names=("b",),
                                                               types=(ValueError,))
                else:
                    cases[f"shape-{space}-{fn}-brows"] = _case(space, fn, a, np.ones((4, 2)))
            # 1 x 1, 0 x 0 and empty batches, as the reference answers them
            if fn not in ("lu_solve", "cho_solve"):
                for label, a, b in (("1x1", np.array([[2.5]]), None if b3 is None else np.array([[1.5]])),
                                    ("0x0", np.empty((0, 0)), None if b3 is None else np.empty((0, 2))),
                                    ("empty-batch", np.empty((0, 3, 3)), None if b3 is None else np.empty((0, 3, 2)))):
                    cases[f"shape-{space}-{fn}-{label}"] = _case(space, fn, a, b)
            # a huge broadcast batch: NumPy's MemoryError/ValueError at once, never a loop over it
            if fn not in ("lu_solve", "cho_solve"):
                bh = None if b3 is None else np.ones(3)
                cases[f"shape-{space}-{fn}-huge-broadcast"] = _case(space, fn, huge, bh, "raises",
                                                                    types=(MemoryError, ValueError))
    return cases


def _nan_cases() -> dict[str, tuple]:
    cases = {}
    for space, table in NAMESPACES.items():
        for fn, (_, _, _, kind) in table.items():
            for label, bad in (("nan", np.nan), ("inf", np.inf)):
                a = spd(4, 7) if kind == "spd" else rand((6, 4), 7)
                b = rand((a.shape[0], 2), 8) if fn in NEEDS_B else None
                if fn in ("lu_solve", "cho_solve"):
                    b = b.copy()
                    b[1, 1] = bad  # the factors come from SciPy: the bad value is in b
                else:
                    a = a.copy()
                    a[1, 1] = bad
                if space == "nl":
                    cases[f"nonfinite-{space}-{fn}-{label}"] = _case(space, fn, a, b, "nonfinite")
                else:  # check_finite=True: SciPy's ValueError
                    cases[f"nonfinite-{space}-{fn}-{label}"] = _case(space, fn, a, b, "raises", types=(ValueError,))
    return cases


def _factor_cases() -> dict[str, tuple]:
    """Factor tuples that LAPACK or the generated C could index out of bounds with."""
    import scipy.linalg as sp

    a = spd(300, 9)
    lu, piv = sp.lu_factor(a)
    small_lu, small_piv = sp.lu_factor(spd(5, 10))
    ones300 = np.ones(300)
    bad = {
        "nonsquare-tall": ((np.asfortranarray(np.ones((4096, 8))), np.arange(4096, dtype=np.int32)), np.ones(4096),
                           ("lu",)),
        "nonsquare-300x299": ((np.asfortranarray(np.ones((300, 299))), np.arange(300, dtype=np.int32)), ones300,
                              ("lu",)),
        "short-piv": ((lu, piv[:2]), ones300, ("piv",)),
        "long-piv": ((lu, np.concatenate([piv, piv])), ones300, ("piv",)),
        "piv-past-int32": ((lu, piv.astype(np.int64) + 2 ** 33), ones300, ("piv",)),
        "piv-out-of-range": ((lu, np.full(300, 10 ** 6, np.int32)), ones300, ("piv",)),
        "piv-negative": ((lu, -np.ones(300, np.int32)), ones300, ("piv",)),
        "piv-float": ((lu, piv.astype(np.float64)), ones300, ("piv",)),
        "small-piv-out-of-range": ((small_lu, np.full(5, 99, np.int32)), np.ones(5), ("piv",)),
        "small-piv-out-of-range-batched-b": ((small_lu, np.full(5, 7, np.int32)), np.ones((5, 2)), ("piv",)),
        "batched-piv-batch-mismatch": ((np.stack([small_lu] * 3), np.stack([small_piv] * 2)), np.ones(5), ("piv",)),
        "not-a-pair": (lu, ones300, ("lu_and_piv", "lu")),
        "three-parts": ((lu, piv, piv), ones300, ("lu_and_piv",)),
        "b-rows": ((lu, piv), np.ones(299), ("b", "lu")),
    }
    cases = {}
    for space in ("nl", "sl"):
        mod = (lambda: _nl()) if space == "nl" else (lambda: _sl())
        for label, (pair, b, names) in bad.items():
            names = names if space == "nl" or label != "b-rows" else ()
            cases[f"factor-{space}-lu_solve-{label}"] = (
                (lambda pair=pair, b=b, mod=mod: mod().lu_solve(pair, b)), Raises((ValueError, TypeError), names))
        c_bad = {
            "nonsquare": ((np.asfortranarray(np.ones((300, 299))), False), ones300, ("c",)),
            "not-a-pair": (spd(4, 11), np.ones(4), ("c_and_lower", "c")),
            "b-rows": ((sp.cho_factor(spd(4, 12))[0], False), np.ones(5), ("b", "c")),
        }
        for label, (pair, b, names) in c_bad.items():
            names = names if space == "nl" else ()
            cases[f"factor-{space}-cho_solve-{label}"] = (
                (lambda pair=pair, b=b, mod=mod: mod().cho_solve(pair, b)), Raises((ValueError, TypeError), names))
        cases[f"factor-{space}-solve_triangular-nonsquare"] = (
            (lambda mod=mod: mod().solve_triangular(np.ones((300, 299)), ones300)),
            Raises((ValueError, TypeError), ("a",) if space == "nl" else ()))
    return cases


def _plan_cases() -> dict[str, tuple]:
    from numpy.linalg import LinAlgError

    from nvmathpy.errors import PlanStateError

    a, rect = spd(6, 13), rand((8, 5), 14)
    cases = {}

    def freed(cls_name: str, build: Callable[[], Any], use: Callable[[Any], Any]) -> Callable[[], Any]:
        def call() -> Any:
            plan = build()
            with plan:
                use(plan)
            return use(plan)

        return call

    for cls_name, build, use, method in (
        ("LU", lambda: _nl().LU(a), lambda p: p.solve(np.ones(6)), "solve"),
        ("LU-det", lambda: _nl().LU(a), lambda p: p.det(), "det"),
        ("Cholesky", lambda: _nl().Cholesky(a), lambda p: p.solve(np.ones(6)), "solve"),
        ("QR", lambda: _nl().QR(rect), lambda p: p.solve(np.ones(8)), "solve"),
        ("Lstsq", lambda: _nl().Lstsq(rect), lambda p: p.solve(np.ones(8)), "solve"),
    ):
        cases[f"plan-freed-{cls_name}"] = (freed(cls_name, build, use), Raises(PlanStateError, (f"{method}()",)))
    nan_rect = rect.copy()
    nan_rect[1, 1] = np.nan
    nan_batch = np.stack([rect, nan_rect])
    cases["plan-lstsq-nan"] = ((lambda: _nl().Lstsq(nan_rect).solve(np.ones(8))), Raises(LinAlgError))
    cases["plan-lstsq-nan-batch-item"] = ((lambda: _nl().Lstsq(nan_batch).solve(np.ones((2, 8, 1)))),
                                          Raises(LinAlgError, ("batch element 1",)))
    cases["fn-lstsq-nan-batch-item"] = ((lambda: _nl().lstsq(nan_batch, np.ones((2, 8, 1)))),
                                        Raises(LinAlgError, ("batch element 1",)))
    # big-endian operands through every route (n = 3 closed form, 8 and 16 compiled, 40 LAPACK)
    for n in (3, 8, 16, 40):
        be = spd(n, 15 + n, batch=(5,)).astype(">f8")
        rhs = rand((5, n, 2), 16, ">f8")
        ref_x = np.linalg.solve(be.astype("f8"), rhs.astype("f8"))
        cases[f"byteorder-nl-solve-n{n}"] = ((lambda be=be, rhs=rhs: _nl().solve(be, rhs)),
                                             Like(lambda ref_x=ref_x: ref_x))
        cases[f"byteorder-nl-inv-n{n}"] = ((lambda be=be: _nl().inv(be)),
                                           Like(lambda be=be: np.linalg.inv(be.astype("f8"))))
        cases[f"byteorder-nl-LU-n{n}"] = ((lambda be=be, rhs=rhs: _nl().LU(be).solve(rhs)),
                                          Like(lambda ref_x=ref_x: ref_x))
        cases[f"byteorder-sl-solve-n{n}"] = ((lambda be=be, rhs=rhs: _sl().solve(be[0], rhs[0])),
                                             Like(lambda be=be, rhs=rhs: np.linalg.solve(be[0].astype("f8"),
                                                                                         rhs[0].astype("f8"))))
    # the plans: operand intake as the functions' (dtypes, byte order, array-likes, 0-d), also on reset_operands
    spd6, rect8 = spd(6, 20), rand((8, 6), 21)
    rhs6, rhs8 = rand((6,), 22), rand((8,), 23)

    def planned(cls: str, a: Any) -> Any:
        plan = getattr(_nl(), cls)(a)
        plan.plan()
        return plan

    def reset(cls: str, first: Any, then: Any) -> Any:
        plan = planned(cls, first)
        plan.reset_operands(then)
        return plan

    uses = {
        "LU": (spd6, lambda p: p.solve(rhs6), lambda: np.linalg.solve(spd6, rhs6)),
        "Cholesky": (spd6, lambda p: p.solve(rhs6), lambda: np.linalg.solve(spd6, rhs6)),
        "QR": (rect8, lambda p: p.solve(rhs8), lambda: np.linalg.lstsq(rect8, rhs8)[0]),
        "Lstsq": (rect8, lambda p: p.solve(rhs8)[0], lambda: np.linalg.lstsq(rect8, rhs8)[0]),
        "Eigh": (spd6, lambda p: p.execute()[0], lambda: np.linalg.eigvalsh(spd6)),
        "SVD": (rect8, lambda p: p.execute()[1], lambda: np.linalg.svd(rect8, compute_uv=False)),
    }
    for cls, (a0, use, ref) in uses.items():
        for order in (">", "<"):
            swapped = a0.astype(order + "f8")
            cases[f"plan-{cls}-byteorder{order}"] = ((lambda cls=cls, x=swapped, use=use: use(planned(cls, x))),
                                                     Like(ref))
            cases[f"plan-{cls}-reset-byteorder{order}"] = (
                (lambda cls=cls, x=swapped, a0=a0, use=use: use(reset(cls, a0 + 1.0, x))), Like(ref))
        cases[f"plan-{cls}-list"] = ((lambda cls=cls, a0=a0, use=use: use(planned(cls, a0.tolist()))), Like(ref))
        for dname in ("longdouble", "object", "str", "datetime", "void"):
            bad = _typed(np.round(a0 * 4), DTYPES[dname])
            cases[f"plan-{cls}-dtype-{dname}"] = ((lambda cls=cls, bad=bad: planned(cls, bad)),
                                                  Raises(TypeError, ("a",)))
        cases[f"plan-{cls}-0d"] = ((lambda cls=cls: planned(cls, np.float64(2.0))), Raises(LinAlgError, ("a",)))
        cases[f"plan-{cls}-huge-broadcast"] = (
            (lambda cls=cls, a0=a0: planned(cls, np.broadcast_to(a0, (2 ** 40,) + a0.shape))),
            Raises((MemoryError, ValueError)))
    # a broadcast batch that does not flatten: computed without copying what it repeats
    m = spd(4, 17, batch=(16,))
    wide = np.broadcast_to(m, (64, 16, 4, 4))
    cases["broadcast-nl-solve-unflattenable"] = ((lambda: _nl().solve(wide, np.ones(4))),
                                                 Like(lambda: np.linalg.solve(wide, np.ones(4))))
    cases["broadcast-nl-inv-unflattenable"] = ((lambda: _nl().inv(wide)), Like(lambda: np.linalg.inv(wide)))
    # a singular batch element is named
    sing = np.stack([a, np.zeros((6, 6)) + 1.0])
    cases["singular-nl-solve-batch-index"] = ((lambda: _nl().solve(sing, np.ones((2, 6, 1)))),
                                              Raises(LinAlgError, ("1",)))
    cases["nonspd-nl-cholesky-batch-index"] = ((lambda: _nl().cholesky(np.stack([a, -a]))),
                                               Raises(LinAlgError, ("1",)))
    return cases


def all_cases() -> dict[str, tuple]:
    cases: dict[str, tuple] = {}
    for make in (_dtype_cases, _layout_cases, _shape_cases, _nan_cases, _factor_cases, _plan_cases):
        cases.update(make())
    return cases


def case_ids() -> list[str]:
    """The ids of every case (cheap enough to build at collection: arrays only, no nvmathpy call)."""
    return list(all_cases())


def main() -> None:
    ids = json.loads(sys.stdin.read())
    cases = all_cases()
    for cid in ids:
        print(json.dumps({"id": cid, "start": True}), flush=True)
        call, expect = cases[cid]
        try:
            ok, detail = run_case(call, expect)
        except BaseException as exc:  # noqa: BLE001 - report, never stop the worker
            ok, detail = False, f"the case itself failed: {type(exc).__name__}: {exc}"
        print(json.dumps({"id": cid, "ok": bool(ok), "detail": str(detail)[:500]}), flush=True)


if __name__ == "__main__":
    main()
