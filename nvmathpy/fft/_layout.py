"""What an FFT computes: argument checks (axes, lengths, kind, norm, dtype) and the pre-pass.

:func:`describe` turns an operand's shape and dtype plus the ``axes``/``s``/``kind``/``norm``
arguments into a :class:`Layout` - the logical transform (kind, axes, lengths, precision) and
the shapes and dtypes the engine reads and writes - raising NumPy-like errors that name the
bad argument before any work is done. :func:`make_stage` builds the pre-pass that feeds the
engine: the operand itself, a view of it (cropping), or a plan-owned buffer it is copied into
(zero padding, dtype conversion). A prolog callback runs on that copy (``fused``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
from numpy.exceptions import AxisError

from ..errors import InvalidOperandError, InvalidOptionError

__all__ = ["KINDS", "NORMS", "DIRECTIONS", "FFTTypeError", "Layout", "c2r_lengths", "describe", "make_stage", "scale_factor"]

KINDS = ("c2c", "r2c", "c2r")
NORMS = ("backward", "ortho", "forward")
DIRECTIONS = ("forward", "inverse")

#: The precisions the engines compute in, keyed by the input dtype's kind and size.
_COMPLEX_OF = {
    np.dtype(np.float16): np.dtype(np.complex64),
    np.dtype(np.float32): np.dtype(np.complex64),
    np.dtype(np.float64): np.dtype(np.complex128),
    np.dtype(np.longdouble): np.dtype(np.clongdouble),
    np.dtype(np.complex64): np.dtype(np.complex64),
    np.dtype(np.complex128): np.dtype(np.complex128),
    np.dtype(np.clongdouble): np.dtype(np.clongdouble),
}
_REAL_OF = {c: np.dtype(c.char.lower()) for c in set(_COMPLEX_OF.values())}


class FFTTypeError(InvalidOperandError, TypeError):
    """An operand's dtype does not fit the transform (e.g. complex input to a real-to-complex FFT)."""


class NoAxisError(InvalidOperandError, IndexError):
    """A transform was given no axis to run over (NumPy and SciPy raise ``IndexError`` there)."""


@dataclass(frozen=True)
class Layout:
    """The logical transform and the arrays the engine sees.

    Attributes
    ----------
    kind
        ``"c2c"``, ``"r2c"`` or ``"c2r"``.
    axes
        Non-negative transform axes in the order given; for r2c/c2r the last is the real axis.
    lengths
        Logical transform length along each axis (for c2r: the real output lengths).
    in_shape, in_dtype
        The array the engine reads (after padding/cropping and dtype conversion).
    out_shape, out_dtype
        The array the engine writes.
    norm
        ``"backward"``, ``"ortho"`` or ``"forward"``.

    The derived quantities (``size``, ``batch``, ``precision``) are computed once per layout:
    the heuristic asks for them several times while a new shape is ranked.
    """

    kind: str
    axes: tuple[int, ...]
    lengths: tuple[int, ...]
    in_shape: tuple[int, ...]
    in_dtype: np.dtype
    out_shape: tuple[int, ...]
    out_dtype: np.dtype
    norm: str

    @cached_property
    def size(self) -> int:
        """The number of points of one transform (product of the logical lengths)."""
        return math.prod(self.lengths)

    @cached_property
    def batch(self) -> int:
        """How many transforms one call computes."""
        return math.prod(self.in_shape) // max(math.prod(self.in_shape[a] for a in self.axes), 1)

    @cached_property
    def precision(self) -> str:
        """``"single"``, ``"double"`` or ``"long"``."""
        complex_dtype = self.in_dtype if self.in_dtype.kind == "c" else _COMPLEX_OF[self.in_dtype]
        return {8: "single", 16: "double"}.get(complex_dtype.itemsize, "long")

    @property
    def natural_direction(self) -> str:
        """The direction ``execute()`` runs by default: inverse for c2r, forward otherwise."""
        return "inverse" if self.kind == "c2r" else "forward"


def check_norm(norm: Any) -> str:
    """``None`` means ``"backward"``; anything outside :data:`NORMS` is refused."""
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise InvalidOptionError(f'Invalid norm value {norm!r}; should be "backward", "ortho" or "forward"')
    return norm


def _as_int(value: Any, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


def normalize_axes(ndim: int, axes: Any, s: Sequence[Any] | None) -> tuple[int, ...]:
    """Non-negative, unique axes; ``None`` means the last ``len(s)`` axes, or all of them."""
    if axes is None:
        count = ndim if s is None else len(s)
        if count > ndim:
            raise InvalidOperandError(f"s has {count} entries but the operand has only {ndim} dimensions")
        return tuple(range(ndim - count, ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    result = []
    for axis in axes:
        a = _as_int(axis, "axes entries")
        if not -ndim <= a < ndim:
            raise AxisError(f"axis {a} is out of bounds for array of dimension {ndim} (axes={tuple(axes)})")
        result.append(a % ndim)
    if len(set(result)) != len(result):
        raise InvalidOperandError(f"all axes must be unique, got axes={tuple(axes)}")
    return tuple(result)


def no_axes(ndim: int, axes: Any, s: Any) -> bool:
    """Whether ``axes``/``s`` name no axis at all (a 0-d operand, ``axes=()``, or ``s=()`` with
    ``axes=None``): what :func:`normalize_axes` would return empty for, without its cost on
    the one-call hot path."""
    if axes is not None:  # named axes of a 0-d operand are out of bounds: normalize_axes says so
        return not isinstance(axes, (int, np.integer)) and len(axes) == 0
    return not ndim or s is not None and not isinstance(s, (int, np.integer)) and len(s) == 0


def c2r_lengths(shape: tuple[int, ...], s: Sequence[Any] | None, axes: Any) -> tuple[list[int], tuple[int, ...]]:
    """NumPy's output lengths for c2r/hfft: ``s`` where given (``-1``: the input's length), else
    the input's lengths with ``2*(m-1)`` on the last axis."""
    if s is not None and isinstance(s, (int, np.integer)):
        s = [s]
    ax = normalize_axes(len(shape), axes, s)
    requested = [None] * len(ax) if s is None else list(s)
    if len(requested) != len(ax):
        raise InvalidOperandError(f"Shape and axes have different lengths: s={tuple(requested)}, axes={ax}")
    lengths = []
    for i, (value, axis) in enumerate(zip(requested, ax)):
        if value is None:
            value = 2 * (shape[axis] - 1) if i == len(ax) - 1 else shape[axis]
        elif isinstance(value, (int, np.integer)) and value == -1:
            value = shape[axis]
        lengths.append(value)
    return lengths, ax


def describe(
    shape: tuple[int, ...],
    dtype: np.dtype,
    *,
    axes: Any = None,
    s: Sequence[Any] | None = None,
    kind: str | None = None,
    norm: Any = None,
) -> Layout:
    """Check the arguments of one transform and describe it.

    ``s`` holds the logical lengths along ``axes`` (an entry of ``None`` or ``-1`` keeps the
    input's length; for c2r it gives the real output lengths, and its last entry must be given:
    ``-1`` there means the input's length, as in NumPy).

    Examples
    --------
    >>> import numpy as np
    >>> lay = describe((8, 5), np.dtype("float32"), axes=[-1])
    >>> lay.kind, lay.axes, lay.out_shape, lay.out_dtype
    ('r2c', (1,), (8, 3), dtype('complex64'))
    >>> describe((4,), np.dtype("complex128"), kind="c2r")
    Traceback (most recent call last):
    ...
    nvmathpy.errors.InvalidOperandError: kind='c2r' needs the real output length along the last axis: pass s (e.g. s=[6])
    """
    norm = check_norm(norm)
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        dtype = np.dtype(np.float64)
    if not dtype.isnative and dtype.kind in "fc":
        raise FFTTypeError(
            f"operand dtype {dtype} has non-native byte order; plans need native order: pass "
            f"a.astype(a.dtype.newbyteorder('=')) (the one-call functions convert it themselves)"
        )
    if dtype not in _COMPLEX_OF:
        raise FFTTypeError(
            f"unsupported operand dtype {dtype}; allowed: bool, integers, float16/32/64, longdouble, "
            "complex64/128, clongdouble"
        )
    if kind is None:
        kind = "c2c" if dtype.kind == "c" else "r2c"
    if kind not in KINDS:
        raise InvalidOptionError(f"kind={kind!r} is not allowed; allowed: {list(KINDS)} or None (from the dtype)")
    ndim = len(shape)
    if s is not None:
        s = list(s) if not isinstance(s, (int, np.integer)) else [s]
    ax = normalize_axes(ndim, axes, s)
    if not ax:
        raise NoAxisError("an FFT needs at least one axis; got an empty axes (or a 0-d operand)")
    if s is not None and len(s) != len(ax):
        raise InvalidOperandError(f"Shape and axes have different lengths: s={tuple(s)}, axes={tuple(ax)}")
    if s is not None and any(isinstance(v, (bool, np.bool_)) for v in s):
        raise TypeError(f"s entries (and n) must be integers, not booleans: s={tuple(s)}")  # as NumPy
    requested = [None] * len(ax) if s is None else [None if v is None else _as_int(v, "s entries") for v in s]
    for value in requested:
        if value is not None and value != -1 and value < 1:
            raise InvalidOperandError(f"Invalid number of FFT data points ({value}) specified; s/n must be >= 1")
    lengths = []
    for i, axis in enumerate(ax):
        given = requested[i]
        if given is None or given == -1:
            if kind == "c2r" and i == len(ax) - 1 and given is None:
                raise InvalidOperandError(
                    "kind='c2r' needs the real output length along the last axis: pass s "
                    f"(e.g. s=[{2 * (shape[axis] - 1)}])"
                )
            given = shape[axis]
        lengths.append(given)
    if kind == "r2c" and dtype.kind == "c":
        raise FFTTypeError(f"kind='r2c' needs a real operand, got dtype {dtype}; use kind='c2c' for complex data")
    cdtype = _COMPLEX_OF[dtype]
    in_dtype = _REAL_OF[cdtype] if kind == "r2c" else cdtype
    out_dtype = _REAL_OF[cdtype] if kind == "c2r" else cdtype
    in_shape, out_shape = list(shape), list(shape)
    for i, axis in enumerate(ax):
        in_shape[axis] = out_shape[axis] = lengths[i]
    last = ax[-1]
    if kind == "r2c":
        out_shape[last] = lengths[-1] // 2 + 1
    elif kind == "c2r":
        in_shape[last] = lengths[-1] // 2 + 1
    for axis in range(ndim):
        if in_shape[axis] == 0 or out_shape[axis] == 0:
            raise InvalidOperandError(f"the operand has an empty dimension (shape {tuple(shape)}); nothing to transform")
    return Layout(kind, ax, tuple(lengths), tuple(in_shape), in_dtype, tuple(out_shape), out_dtype, norm)


def scale_factor(layout: Layout, direction: str) -> float:
    """The factor the ``direction`` transform multiplies by under ``layout.norm``."""
    norm = layout.norm
    if norm == "ortho":
        return 1.0 / float(np.sqrt(layout.size))
    scaled = "inverse" if norm == "backward" else "forward"
    return 1.0 / layout.size if direction == scaled else 1.0


def make_stage(
    layout: Layout, shape: tuple[int, ...], dtype: np.dtype, fused: Any = None
) -> Callable[[np.ndarray], np.ndarray] | None:
    """The pre-pass turning an operand of ``shape``/``dtype`` into the engine's input.

    Returns ``None`` when the operand can be given to the engine as it is; otherwise a
    function ``stage(x)`` returning a view (cropping only) or a plan-owned buffer holding the
    cropped/zero-padded, dtype-converted copy. The buffer is reused between calls (its padding
    stays zero), so a staged plan allocates nothing in the pre-pass.

    ``fused`` (a prolog :class:`~nvmathpy.fft._callbacks.Callback`) forces the copy and is
    fused into it: each block of the operand is read once, the callback applied, and the
    operand's part of the buffer written once (the padding stays zero).
    """
    region = tuple(slice(0, min(n, m)) for n, m in zip(shape, layout.in_shape))
    needs_pad = any(m > n for n, m in zip(shape, layout.in_shape))
    needs_crop = any(m < n for n, m in zip(shape, layout.in_shape))
    needs_cast = np.dtype(dtype) != layout.in_dtype
    if fused is None and not (needs_pad or needs_crop or needs_cast):
        return None
    if fused is None and not (needs_pad or needs_cast):
        return lambda x: x[region]
    buffer = np.zeros(layout.in_shape, layout.in_dtype)
    target = buffer[region]

    def stage(x: np.ndarray) -> np.ndarray:
        if fused is None:
            np.copyto(target, x[region], casting="unsafe")
        else:
            fused.into(target, x[region])
        return buffer

    return stage
