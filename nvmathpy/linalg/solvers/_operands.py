"""Operand handling shared by the solver plans: wrapping, execution space, LAPACK dtypes,
batch shapes, and the Fortran-order view that lets LAPACK read C-ordered matrices uncopied.

A C-contiguous matrix is the Fortran-contiguous storage of its transpose, so instead of
copying ``A`` into Fortran order the plans factor ``A.T`` (a free view) and solve with the
transposed operation. :func:`fortran_view` makes that choice.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...errors import InvalidOperandError
from ...execution import resolve_execution
from ...operands import common_package, unwrapper, wrap_all
from .cpu._lapack import lapack_dtype
from ..validation import NotAMatrixError, check_dtype, check_matrix, check_result_size, host_array

__all__ = [
    "solve_operands",
    "host_arrays", "as_stack", "as_rhs", "fortran_view", "layout_of", "result_converter", "batch_index", "stack_of",
    "identity", "stand_in", "flat_view", "flat_part", "matrix_at", "LazyStack",
]


def host_arrays(execution: Any, **arrays: Any) -> tuple[dict[str, np.ndarray], Callable[[Any], Any], Any]:
    """Wrap the operands, decide the execution space, and return the native host arrays
    with a converter for results (identity for NumPy, ``torch.from_numpy`` for torch) and
    the execution space.

    ``execution="cuda"`` without a usable GPU raises the
    :class:`~nvmathpy.errors.ExecutionSpaceUnavailableError` of :func:`resolve_execution`
    (CUDA operands are taken by the plans' cuSOLVER variants, :mod:`.cuda._plans`).
    """
    wrapped = wrap_all(**{k: host_array(v) for k, v in arrays.items()})
    if not wrapped:
        raise InvalidOperandError("no operand given")
    _, device, device_id = common_package(wrapped)
    space = resolve_execution(execution, device, device_id)
    first = next(iter(wrapped.values()))
    return {k: op.array for k, op in wrapped.items()}, result_converter(unwrapper(first)), space


def result_converter(convert: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """Turn a per-array converter into one that also maps tuples (and leaves scalars alone)."""
    if convert is None:
        return identity

    def to_caller(value: Any) -> Any:
        if isinstance(value, tuple):
            return type(value)(*map(to_caller, value)) if hasattr(value, "_fields") else tuple(map(to_caller, value))
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if isinstance(value, np.ndarray):
            contiguous = value.flags.c_contiguous or value.flags.f_contiguous
            return convert(value if contiguous else value.copy())
        return value

    return to_caller


def identity(value: Any) -> Any:
    """The converter for NumPy callers: results are returned as they are."""
    return value


def as_stack(a: np.ndarray, name: str, *, square: bool = True, dtype: np.dtype | None = None) -> np.ndarray:
    """Validate a (batch of) matrices ``(..., m, n)`` and cast to its LAPACK dtype.

    Fewer than two dimensions raise NumPy's ``LinAlgError``, an unsupported dtype a
    ``TypeError`` (both naming ``name``), and a batch whose smallest result (one value per
    matrix) cannot be allocated NumPy's ``MemoryError``, before any work."""
    check_matrix(a, name)
    if square and a.shape[-1] != a.shape[-2]:
        raise NotAMatrixError(f"{name}: expected square matrices (..., n, n), got shape {a.shape}")
    check_dtype(a.dtype, name)
    target = lapack_dtype(a.dtype) if dtype is None else dtype
    check_result_size(a.shape[:-2], target, name)
    return a if a.dtype == target else a.astype(target)


def as_rhs(b: np.ndarray, n: int, batch: tuple[int, ...], dtype: np.dtype, name: str = "b") -> tuple[np.ndarray, bool]:
    """Validate right-hand sides against ``n`` rows and a batch shape (NumPy 2 rules: a 1-D
    ``b`` is one vector; otherwise ``b`` is ``(..., n, k)``). Returns ``(b3, is_vector)`` with
    ``b3`` of shape ``batch + (n, k)`` in ``dtype`` (a broadcast view where possible)."""
    if b.ndim == 0:
        raise InvalidOperandError(f"{name}: expected a vector (n,) or matrices (..., n, k), got a scalar")
    check_dtype(b.dtype, name)
    vector = b.ndim == 1
    core = b[:, None] if vector else b
    if core.shape[-2] != n:
        raise InvalidOperandError(
            f"{name}: has {core.shape[-2]} rows but the matrix has n={n} (shape {b.shape}; "
            "expected (n,) or (..., n, k))"
        )
    if b.dtype != dtype:
        if lapack_dtype(b.dtype).kind == "c" and dtype.kind != "c":
            raise InvalidOperandError(f"{name}: complex right-hand side {b.dtype} for a real matrix of dtype {dtype}")
        core = core.astype(dtype)
    if core.shape[:-2] != batch:
        try:
            full = np.broadcast_shapes(core.shape[:-2], batch)
        except ValueError:
            raise InvalidOperandError(
                f"{name}: batch shape {core.shape[:-2]} does not broadcast with the matrix batch {batch}"
            ) from None
        if full != batch:
            raise InvalidOperandError(f"{name}: batch shape {core.shape[:-2]} is larger than the matrix batch {batch}")
        core = np.broadcast_to(core, batch + core.shape[-2:])
    return core, vector


def layout_of(a: np.ndarray) -> str:
    """``"F"`` or ``"C"`` when every matrix of the stack is contiguous that way, else ``"strided"``."""
    last = a[(0,) * (a.ndim - 2)] if a.ndim > 2 and a.size else a
    if last.flags.f_contiguous:
        return "F"
    if last.flags.c_contiguous:
        return "C"
    return "strided"


def fortran_view(m: np.ndarray, allow_transpose: bool = True) -> tuple[np.ndarray, bool]:
    """A Fortran-ordered matrix LAPACK can read: ``(m, False)`` when already so, ``(m.T,
    True)`` (a view of the transpose) for C order, else a Fortran copy ``(copy, False)``."""
    if m.flags.f_contiguous:
        return m, False
    if allow_transpose and m.flags.c_contiguous:
        return m.T, True
    return np.asfortranarray(m), False


def batch_index(flat: int, batch: tuple[int, ...]) -> int | tuple[int, ...]:
    """The batch element with flat index ``flat``, as an int for 1-D batches, else a tuple."""
    if len(batch) <= 1:
        return flat
    return tuple(int(i) for i in np.unravel_index(flat, batch))


def stack_of(a: np.ndarray) -> Any:
    """``a`` as a flat stack ``(count, m, n)`` of its matrices (a view when possible; also
    for empty batches and empty matrices). A NumPy batch that does not flatten to a view (a
    broadcast, stride-0 batch of several dimensions) gives a :class:`LazyStack` instead, whose
    matrices are read one by one: the loops over it copy nothing that the batch repeats."""
    if type(a) is np.ndarray and a.ndim > 3:
        flat = flat_view(a)
        return LazyStack(a) if flat is None else flat
    return a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)),) + a.shape[-2:])


class LazyStack:
    """The flat stack of matrices of a batch that does not flatten to a view, for the loops
    that index it (``stack[i]``, ``stack[lo:hi]``, ``len``, iteration, ``shape``, ``dtype``)."""

    def __init__(self, a: np.ndarray):
        self._a = a
        self.shape = (int(np.prod(a.shape[:-2], dtype=np.int64)),) + a.shape[-2:]
        self.dtype = a.dtype
        self.ndim = 3

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, slice):
            lo, hi, step = index.indices(self.shape[0])
            if step != 1:
                raise IndexError("LazyStack: only unit-step slices")
            return flat_part(self._a, None, lo, hi)
        i = int(index)
        if not -self.shape[0] <= i < self.shape[0]:
            raise IndexError(f"matrix {i} of a stack of {self.shape[0]}")
        return matrix_at(self._a, i % self.shape[0])

    def __iter__(self) -> Any:
        return (self[i] for i in range(self.shape[0]))


def flat_view(a: np.ndarray) -> np.ndarray | None:
    """:func:`stack_of` when it is a view, else None: a broadcast (stride-0) batch of several
    dimensions may not flatten without a copy of every matrix it repeats (see :func:`flat_part`)."""
    try:
        return a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)),) + a.shape[-2:], copy=False)
    except ValueError:
        return None


def flat_part(a: np.ndarray, flat: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """Matrices ``lo:hi`` of ``a``'s flat stack: a view of ``flat`` (:func:`flat_view`) when
    there is one, else a copy of just those matrices."""
    if flat is not None:
        return flat[lo:hi]
    return a[np.unravel_index(np.arange(lo, hi), a.shape[:-2])]


def matrix_at(a: np.ndarray, i: int) -> np.ndarray:
    """Matrix ``i`` of ``a``'s flat stack (a view; no copy of the stack)."""
    return a[np.unravel_index(int(i), a.shape[:-2])] if a.ndim > 2 else a


def stand_in(a: np.ndarray) -> np.ndarray:
    """An identity matrix of the shape and dtype of ``a``'s matrices (Fortran-ordered): what a
    plan over an empty batch computes once, so that its empty results get their shapes and
    dtypes (see :func:`.cpu._factored.stack_factors`)."""
    return np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype, order="F")


def solve_operands(a1: Any, b1: Any, broadcast_to: Callable[[Any, tuple], Any]) -> tuple[Any, Any, np.dtype, bool]:
    """``solve``'s operands under NumPy 2 rules, for host and device stacks alike.

    ``a1`` is a validated ``(..., n, n)`` stack, ``b1`` the right-hand side: ``(n,)`` (a
    vector) or ``(..., n, k)``. Returns ``(a, b, dtype, vector)``: both cast to the common
    LAPACK dtype and broadcast (with ``broadcast_to`` of the arrays' package) to one batch,
    ``b`` as matrices ``(..., n, k)``.

    Examples
    --------
    >>> a, b, dtype, vector = solve_operands(np.eye(3)[None], np.ones(3, np.float32), np.broadcast_to)
    >>> a.shape, b.shape, dtype.name, vector
    ((1, 3, 3), (1, 3, 1), 'float64', True)
    """
    check_dtype(b1.dtype, "b")
    dtype = np.result_type(a1.dtype, lapack_dtype(b1.dtype))
    a1, b1 = a1.astype(dtype, copy=False), b1.astype(dtype, copy=False)
    n = a1.shape[-1]
    vector = b1.ndim == 1
    b2 = b1[:, None] if vector else b1
    if b2.ndim < 2 or b2.shape[-2] != n:
        raise InvalidOperandError(
            f"b: shape {b1.shape} does not match a's {a1.shape}; expected (n,) or (..., n, k) with n={n}"
        )
    try:
        batch = np.broadcast_shapes(a1.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise InvalidOperandError(f"a {a1.shape} and b {b1.shape} have batch shapes that do not broadcast") from None
    if a1.shape[:-2] != batch:  # already full: no broadcast (a device broadcast costs host time on each call)
        a1 = broadcast_to(a1, batch + a1.shape[-2:])
    if b2.shape[:-2] != batch:
        b2 = broadcast_to(b2, batch + b2.shape[-2:])
    return a1, b2, dtype, vector
