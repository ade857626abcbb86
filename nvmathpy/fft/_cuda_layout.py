"""How an FFT problem maps onto cuFFT's advanced data layout: pure arithmetic, no device.

cuFFT's plan-many call (``cufftXtMakePlanMany``, 64-bit) transforms ``batch`` arrays of rank
1-3: element ``(x_0, ..., x_{r-1})`` of batch member ``b`` sits at
``b * idist + ((x_0 * inembed[1] + x_1) * inembed[2] + ...) * istride`` (the same for the
output with ``onembed``/``ostride``/``odist``). So one call covers transform axes whose strides
*nest* (each one a whole multiple of the next, at least its extent apart) and batch axes that
*collapse* into one ``(count, distance)``. Whatever does not collapse becomes an outer loop of
exec calls at pointer offsets (:class:`Many` ``loops``); more than three transform axes become
several steps (c2c steps on the result in place; for r2c the real step first, for c2r last).

:func:`schedule` builds the whole computation for one of three strategies:

- ``"strided"``: the operand as it lies in memory (no copy unless padding, a dtype change or
  c2r - whose input cuFFT overwrites - needs one, and then in the operand's own memory order),
  one plan per group of up to three transform axes;
- ``"per_axis"``: the same, one rank-1 plan per transform axis;
- ``"transposed"``: the input copied into the canonical order (batch axes outside, transform
  axes inside in cuFFT order), so every step is one exec call without loops.

Lengths and strides are in elements (a complex element counts once), as Python ints (64-bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "STRATEGIES",
    "Many",
    "Schedule",
    "Step",
    "dense_strides",
    "inverse_order",
    "memory_order",
    "plan_many",
    "schedule",
]

#: The layout strategies, in the order candidates are considered.
STRATEGIES = ("strided", "per_axis", "transposed")
#: Most transform axes one cuFFT plan takes.
MAX_RANK = 3


@dataclass(frozen=True)
class Many:
    """The arguments of one ``cufftXtMakePlanMany`` call, and the exec calls it needs.

    Attributes
    ----------
    rank, n, inembed, istride, idist, onembed, ostride, odist, batch
        As cuFFT's plan-many takes them (``n`` are the logical lengths, the real ones for r2c/c2r).
    loops
        ``(count, input step, output step)`` of each outer loop (outermost first), in elements:
        the plan is executed once per combination, at those pointer offsets.
    """

    rank: int
    n: tuple[int, ...]
    inembed: tuple[int, ...]
    istride: int
    idist: int
    onembed: tuple[int, ...]
    ostride: int
    odist: int
    batch: int
    loops: tuple[tuple[int, int, int], ...] = ()

    @property
    def calls(self) -> int:
        """How many exec calls one transform takes."""
        return math.prod(count for count, _, _ in self.loops)

    def offsets(self) -> list[tuple[int, int]]:
        """Element offsets ``(input, output)`` of each exec call.

        Examples
        --------
        >>> Many(1, (4,), (4,), 1, 4, (4,), 1, 4, 2, loops=((2, 100, 10),)).offsets()
        [(0, 0), (100, 10)]
        """
        found = [(0, 0)]
        for count, step_in, step_out in self.loops:
            found = [(i + k * step_in, o + k * step_out) for i, o in found for k in range(count)]
        return found


@dataclass(frozen=True)
class Step:
    """One cuFFT plan of a schedule: its kind, buffers (``"x"``: the engine input, ``"y"``: the
    result) and layout."""

    kind: str
    source: str
    target: str
    many: Many


@dataclass(frozen=True)
class Schedule:
    """The whole computation of one strategy.

    Attributes
    ----------
    strategy
        One of :data:`STRATEGIES`.
    x_order
        ``None``: cuFFT reads the operand itself (or its cropped view); otherwise the engine input
        is a fresh dense copy whose axes lie in memory in this order (outermost first).
    y_order
        Memory order of the freshly allocated result; ``None`` when the result is written into
        the operand (in place).
    steps
        The cuFFT plans, in execution order.
    """

    strategy: str
    x_order: tuple[int, ...] | None
    y_order: tuple[int, ...] | None
    steps: tuple[Step, ...]

    @property
    def calls(self) -> int:
        """Exec calls per transform."""
        return sum(step.many.calls for step in self.steps)

    @property
    def copies(self) -> int:
        """Copies of the input made before the transform (0 or 1)."""
        return 0 if self.x_order is None else 1


def memory_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """The axes from outermost to innermost in memory (by decreasing ``|stride|``, ties by axis).

    Examples
    --------
    >>> memory_order((3, 4, 5), (20, 5, 1)), memory_order((3, 4), (1, 3))
    ((0, 1, 2), (1, 0))
    """
    return tuple(sorted(range(len(shape)), key=lambda a: (-abs(strides[a]) if shape[a] > 1 else 0, a)))


def dense_strides(shape: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a dense array of ``shape`` whose axes lie in memory in ``order``.

    Examples
    --------
    >>> dense_strides((3, 4, 5), (0, 1, 2)), dense_strides((3, 4), (1, 0))
    ((20, 5, 1), (1, 3))
    """
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


def inverse_order(order: Sequence[int]) -> tuple[int, ...]:
    """The permutation undoing ``order`` (``a.transpose(order).transpose(inverse_order(order))``
    is ``a``)."""
    result = [0] * len(order)
    for position, axis in enumerate(order):
        result[axis] = position
    return tuple(result)


def _nested(axes: Sequence[int], extents: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...], int] | None:
    """``(embed, stride)`` of transform ``axes`` (outermost first) in one array, or ``None`` when
    their strides do not nest. Extent-1 axes nest wherever they are."""
    r = len(axes)
    effective = [0] * r
    embed = [0] * r
    for k in range(r - 1, -1, -1):
        axis = axes[k]
        if k == r - 1:
            effective[k] = strides[axis] if extents[axis] > 1 else 1
        else:
            inner = axes[k + 1]
            if extents[axis] == 1:
                effective[k] = effective[k + 1] * extents[inner]
            else:
                stride = strides[axis]
                if stride <= 0 or stride % effective[k + 1] or stride // effective[k + 1] < extents[inner]:
                    return None
                effective[k] = stride
            embed[k + 1] = effective[k] // effective[k + 1]
        if effective[k] <= 0:
            return None
    embed[0] = extents[axes[0]]
    return tuple(embed), effective[-1]


def plan_many(
    n: Sequence[int],
    axes: Sequence[int],
    in_shape: Sequence[int],
    in_strides: Sequence[int],
    out_shape: Sequence[int],
    out_strides: Sequence[int],
) -> Many | None:
    """One plan-many layout transforming ``axes`` (cuFFT order: for r2c/c2r the real axis last)
    of an input and an output array, or ``None`` when their strides cannot express it.

    Parameters
    ----------
    n
        Logical lengths along ``axes``.
    axes
        Transform axes, outermost first.
    in_shape, in_strides, out_shape, out_strides
        Extents and element strides of the two arrays (equal extents on every other axis).

    Examples
    --------
    Columns of a C-ordered 6 x 4 array: stride 4 inside a transform, batch elements 1 apart.

    >>> m = plan_many([6], [0], (6, 4), (4, 1), (6, 4), (4, 1))
    >>> (m.n, m.istride, m.idist, m.batch, m.loops)
    ((6,), 4, 1, 4, ())
    """
    inner_in = _nested(axes, in_shape, in_strides)
    inner_out = _nested(axes, out_shape, out_strides)
    if inner_in is None or inner_out is None:
        return None
    (inembed, istride), (onembed, ostride) = inner_in, inner_out
    batch_axes = [a for a in range(len(in_shape)) if a not in axes and in_shape[a] > 1]
    if any(in_strides[a] <= 0 or out_strides[a] <= 0 for a in batch_axes):
        return None
    batch_axes.sort(key=lambda a: (-in_strides[a], -out_strides[a], a))
    groups: list[list[int]] = []  # [count, input distance, output distance], outermost first
    for axis in batch_axes:
        count, di, do = in_shape[axis], in_strides[axis], out_strides[axis]
        if groups and groups[-1][1] == di * count and groups[-1][2] == do * count:
            groups[-1] = [groups[-1][0] * count, di, do]
        else:
            groups.append([count, di, do])
    if groups:
        chosen = max(range(len(groups)), key=lambda g: (groups[g][0], g))
        batch, idist, odist = groups.pop(chosen)
    else:
        batch = 1
        idist = istride * math.prod(inembed)
        odist = ostride * math.prod(onembed)
    loops = tuple((g[0], g[1], g[2]) for g in groups)
    return Many(len(axes), tuple(int(v) for v in n), inembed, istride, idist, onembed, ostride, odist, batch, loops)


def _cufft_axes(kind: str, axes: Sequence[int], order: Sequence[int]) -> list[int]:
    """Transform axes in cuFFT order: by memory order (outermost first), the real axis last."""
    position = {axis: p for p, axis in enumerate(order)}
    if kind == "c2c":
        return sorted(axes, key=position.__getitem__)
    real = axes[-1]
    return sorted(axes[:-1], key=position.__getitem__) + [real]


def _groups(kind: str, cufft_axes: list[int], size: int) -> list[tuple[str, list[int]]]:
    """The steps' kinds and axes in execution order: groups of up to ``size`` axes from the inner
    end; the real group runs first for r2c and last for c2r."""
    groups = [cufft_axes[max(0, end - size) : end] for end in range(len(cufft_axes), 0, -size)]
    if kind == "c2c":
        return [("c2c", g) for g in groups]
    steps = [(kind, groups[0])] + [("c2c", g) for g in groups[1:]]
    return steps if kind == "r2c" else steps[::-1]


def schedule(
    kind: str,
    axes: Sequence[int],
    lengths: Sequence[int],
    in_shape: Sequence[int],
    out_shape: Sequence[int],
    operand_strides: Sequence[int] | None,
    operand_order: Sequence[int],
    strategy: str,
    inplace: bool = False,
) -> Schedule | None:
    """The computation of one FFT problem under ``strategy``, or ``None`` if it cannot run so.

    Parameters
    ----------
    kind, axes, lengths, in_shape, out_shape
        As in :class:`~nvmathpy.fft._layout.Layout` (``axes`` in the user's order, the last one
        the real axis for r2c/c2r).
    operand_strides
        Element strides of the (cropped) operand when cuFFT may read it as it is; ``None`` when
        it must be copied first (padding, dtype change, c2r, negative strides).
    operand_order
        The operand's memory order (:func:`memory_order`).
    strategy
        One of :data:`STRATEGIES`.
    inplace
        Write the result into the operand (c2c only); a strategy that cannot is ``None``.

    Examples
    --------
    ``fft(x, axis=0)`` of a C-ordered 8 x 3 array reads it as it is: stride 3, 3 batches 1 apart.

    >>> s = schedule("c2c", [0], [8], (8, 3), (8, 3), (3, 1), (0, 1), "strided")
    >>> s.x_order, s.y_order, [(st.kind, st.many.istride, st.many.idist, st.many.batch) for st in s.steps]
    (None, (0, 1), [('c2c', 3, 1, 3)])
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; known: {STRATEGIES}")
    base = tuple(operand_order)
    # length-1 c2c axes are the identity: no plan needs them
    fft_axes = [a for i, a in enumerate(axes) if not (lengths[i] == 1 and (kind == "c2c" or i < len(axes) - 1))]
    if kind != "c2c" and axes[-1] not in fft_axes:
        fft_axes.append(axes[-1])
    length_of = dict(zip(axes, lengths))
    cufft_axes = _cufft_axes(kind, fft_axes, base)
    if strategy == "per_axis" and len(cufft_axes) < 2:
        return None
    if strategy == "transposed":
        transform = set(cufft_axes)
        order = tuple([a for a in base if a not in transform] + cufft_axes)
        x_order: tuple[int, ...] | None = order
    else:
        order = base
        x_order = None if operand_strides is not None else base
    if kind == "c2r":
        x_order = order  # cuFFT's c2r overwrites its input: always a plan-owned copy
    if inplace and x_order is not None:
        return None
    x_strides = tuple(operand_strides) if x_order is None else dense_strides(in_shape, x_order)
    y_order = None if inplace else order
    y_strides = x_strides if inplace else dense_strides(out_shape, order)
    size = 1 if strategy == "per_axis" else MAX_RANK
    buffers = {"x": (tuple(in_shape), x_strides), "y": (tuple(out_shape), y_strides)}
    result = "x" if inplace else "y"
    steps = []
    current = "x"  # where the data to transform next lives
    for step_kind, group in _groups(kind, cufft_axes, size):
        if step_kind == "c2r" or (kind == "c2r" and step_kind == "c2c"):
            target = "x" if step_kind == "c2c" else result  # c2c steps of a c2r run in the input copy
        else:
            target = result
        source = current
        (shape_s, strides_s), (shape_t, strides_t) = buffers[source], buffers[target]
        n = [length_of[a] for a in group]
        many = plan_many(n, group, shape_s, strides_s, shape_t, strides_t)
        if many is None:
            return None
        steps.append(Step(step_kind, source, target, many))
        current = target
    # no steps: every transform length is 1, the transform is a copy (made by the engine)
    return Schedule(strategy, x_order, y_order, tuple(steps))
