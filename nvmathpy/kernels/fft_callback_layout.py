"""Where a cuFFT callback's element sits: the buffer layout a generated callback bakes in.

The element offset cuFFT passes a callback is peeled into the indices the callback needs with
constant divisors (:func:`peel_indices`), in the narrowest unsigned type the buffer allows
(:func:`index_type`). :class:`CallbackLayout` holds what the plan fixes (extents, strides, the
axis ``k`` counts along, zero-padding limits, the array inputs' strides);
:func:`callback_layout` builds it, :func:`peel_order` says whether an offset can be peeled at all.
Used by :mod:`nvmathpy.kernels.fft_callbacks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["INDEX32_LIMIT", "CallbackLayout", "c_literal", "callback_layout", "index_type", "peel_indices",
           "peel_order", "weighted_sum"]


#: Values the generated index arithmetic may take up to which it is 32-bit (unsigned): the largest
#: element offset, input position or element count must stay below it. 2**31 rather than 2**32
#: leaves the fallback kernel's grid-stride loop room to step past the count without wrapping.
INDEX32_LIMIT = 1 << 31


def index_type(largest: int) -> str:
    """The C type of the generated index arithmetic for values up to ``largest``.

    32-bit unsigned arithmetic when ``largest`` is below :data:`INDEX32_LIMIT` (the usual case:
    division by a constant is then one multiply-high and a shift), 64-bit otherwise.

    Parameters
    ----------
    largest
        The largest value an offset, index or count takes (see :attr:`CallbackLayout.largest`).

    Returns
    -------
    str
        ``"unsigned int"`` or ``"unsigned long long"``.

    Examples
    --------
    >>> index_type(4096 * 1024), index_type(2**31 - 1), index_type(2**31)
    ('unsigned int', 'unsigned int', 'unsigned long long')
    """
    if largest < 0:
        raise ValueError(f"largest must be >= 0, got {largest}")
    return "unsigned int" if largest < INDEX32_LIMIT else "unsigned long long"


@dataclass(frozen=True)
class CallbackLayout:
    """The buffer a callback reads or writes, as the generated source bakes it in.

    Everything here is fixed when the plan is made, so it is written into the source as
    constants: NVRTC turns division by a constant into a multiply and a shift (a shift or a mask
    for a power of two). Build one with :func:`callback_layout`.

    Attributes
    ----------
    extents, strides
        Per peeled axis - the buffer's axes of extent > 1 from the largest element stride down
        (:func:`peel_order`) - its extent and element stride.
    k
        The position (among the peeled axes) of the last transformed axis, where the index ``k``
        counts; ``None`` when that axis has extent 1 (``k`` is then 0).
    limits
        (Prolog on a zero-padded buffer) per peeled axis, the extent of the data before zero
        padding: the callback returns 0 at indices at or past it; ``None`` without padding.
    inputs
        ``(name, element strides per peeled axis)`` of each array input, sorted by name (stride 0
        on an axis the input is broadcast along).
    """

    extents: tuple[int, ...]
    strides: tuple[int, ...]
    k: int | None = None
    limits: tuple[int, ...] | None = None
    inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def rank(self) -> int:
        """The number of peeled axes."""
        return len(self.extents)

    @property
    def count(self) -> int:
        """The number of elements."""
        return math.prod(self.extents)

    @property
    def span(self) -> int:
        """One past the largest element offset."""
        return 1 + sum((n - 1) * st for n, st in zip(self.extents, self.strides))

    @property
    def largest(self) -> int:
        """The largest value the index arithmetic takes: the span, the element count, and one
        past the largest position read from an input."""
        reach = [1 + sum((n - 1) * st for n, st in zip(self.extents, strides)) for _, strides in self.inputs]
        return max([self.span, self.count, *reach])

    @property
    def index_type(self) -> str:
        """The C type of the index arithmetic (:func:`index_type` of :attr:`largest`)."""
        return index_type(self.largest)


def callback_layout(shape: Sequence[int], strides: Sequence[int], k_axis: int, *,
                    limits: Sequence[int] | None = None,
                    inputs: Mapping[str, Sequence[int]] | None = None) -> CallbackLayout:
    """The :class:`CallbackLayout` of a buffer of ``shape`` at element ``strides`` (by axis).

    Parameters
    ----------
    shape, strides
        The buffer's extents and element strides, by axis (strides >= 0, nested: see
        :func:`peel_order`).
    k_axis
        The last transformed axis (where ``k`` counts).
    limits
        Per axis, the extent of the data before zero padding (a prolog on a padded buffer); axes
        without padding are not checked.
    inputs
        Per array input, its element strides by axis (0 where it is broadcast).

    Raises
    ------
    ValueError
        If offsets of the buffer do not map back to indices (:func:`peel_order` is ``None``).

    Examples
    --------
    >>> callback_layout((1024, 4096), (4096, 1), 1, inputs={"w": (0, 1)})
    CallbackLayout(extents=(1024, 4096), strides=(4096, 1), k=1, limits=None, inputs=(('w', (0, 1)),))
    >>> callback_layout((3, 1, 5), (5, 5, 1), 1, limits=(3, 1, 4)).limits  # k's axis has extent 1
    (3, 4)
    """
    if len(shape) != len(strides) or any(int(st) < 0 for st in strides):
        raise ValueError(f"a callback buffer has one stride >= 0 per axis; got shape {tuple(shape)}, "
                         f"strides {tuple(strides)}")
    order = peel_order(shape, strides)
    if order is None:
        raise ValueError(f"offsets of a buffer of shape {tuple(shape)} and strides {tuple(strides)} do not map back "
                         "to indices")

    def per_axis(values: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(values[a]) for a in order)

    kept = None
    if limits is not None and any(int(limits[a]) < int(shape[a]) for a in order):
        kept = per_axis(limits)
    return CallbackLayout(per_axis(shape), per_axis(strides), order.index(k_axis) if k_axis in order else None, kept,
                          tuple(sorted((str(name), per_axis(st)) for name, st in (inputs or {}).items())))


def c_literal(value: int, ctype: str) -> str:
    return f"{value}{'u' if ctype == 'unsigned int' else 'ull'}"


def c_div(x: str, c: int, ctype: str) -> str:
    """``x / c`` for unsigned ``x`` and a constant ``c`` (a shift for a power of two)."""
    if c == 1:
        return x
    if c & (c - 1) == 0:
        return f"({x} >> {c.bit_length() - 1})"
    return f"({x} / {c_literal(c, ctype)})"


def c_mod(x: str, c: int, ctype: str) -> str:
    """``x % c`` for unsigned ``x`` and a constant ``c`` (a mask for a power of two)."""
    if c == 1:
        return c_literal(0, ctype)
    if c & (c - 1) == 0:
        return f"({x} & {c_literal(c - 1, ctype)})"
    return f"({x} % {c_literal(c, ctype)})"


def peel_indices(extents: Sequence[int], strides: Sequence[int], needed: Sequence[int], offset: str, ctype: str,
          name: str = "i") -> list[str]:
    """Declarations of the indices ``needed`` (positions, peel order) of the element at ``offset``
    (a nested layout, largest stride first): ``const <ctype> i<d> = ...;`` with constant divisors.

    The rest of the offset after the axes before ``d`` is ``offset % strides[d - 1]`` when every
    larger stride is a multiple of ``strides[d - 1]`` (dense and row-padded buffers), else it is
    peeled one axis at a time; index ``d`` is that rest divided by ``strides[d]`` (for the first
    axis the offset itself divided).
    """

    def rest(j: int) -> str:  # the offset less the parts of axes 0..j
        if j < 0:
            return offset
        if all(strides[lower] % strides[j] == 0 for lower in range(j)):
            return c_mod(offset, strides[j], ctype)
        return c_mod(rest(j - 1), strides[j], ctype)

    return [f"const {ctype} {name}{d} = {c_div(rest(d - 1), strides[d], ctype)};" for d in sorted(set(needed))]


def weighted_sum(weights: Sequence[int], ctype: str, name: str = "i") -> str:
    """``sum(i<d> * weights[d])`` over the nonzero weights (``0`` when there are none)."""
    terms = [f"{name}{d}" if w == 1 else f"{name}{d} * {c_literal(w, ctype)}" for d, w in enumerate(weights) if w]
    return " + ".join(terms) or c_literal(0, ctype)


def peel_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The axes of extent > 1 by decreasing element stride, or ``None`` when peeling an offset
    greedily along them would not recover the indices (strides that overlap or do not nest).

    Examples
    --------
    >>> peel_order((3, 4, 5), (20, 5, 1)), peel_order((4, 1, 6), (1, 0, 5)), peel_order((4, 4), (3, 1))
    ((0, 1, 2), (2, 0), None)
    """
    axes = sorted((a for a in range(len(shape)) if shape[a] > 1), key=lambda a: (-strides[a], a))
    reach = 0  # largest offset the axes after the current one reach
    for a in reversed(axes):
        if strides[a] <= reach:
            return None
        reach += strides[a] * (shape[a] - 1)
    return tuple(axes)
