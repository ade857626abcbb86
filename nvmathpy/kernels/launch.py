"""Kernel parameters and their packing for a launch: the ``void**`` array ``cuLaunchKernel`` takes.

Every generated kernel describes its parameters as a tuple of :class:`KernelParam` (a key and a
C type, in signature order). :func:`pack_arguments` turns a mapping from those keys to values
into the array of pointers to each argument that ``cuLaunchKernel``'s ``kernelParams`` expects;
the GPU path and the tests' CPU emulation both launch through it. :class:`ArrayRef` is the
pointer-plus-element-strides view of an operand that the argument builders read.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOperandError
from .emit_cuda import STORAGE_TYPES

__all__ = ["ARG_CTYPES", "ArrayRef", "KernelParam", "PackedArguments", "pack_arguments",
           "compute_ctype", "epilogue_values", "input_params"]

#: Parameter C type name -> ctypes type.
ARG_CTYPES: dict[str, type] = {
    "ptr": ctypes.c_void_p,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}

ParamKey = tuple[str, "str | None"]


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter.

    Attributes
    ----------
    key : tuple[str, str | None]
        ``(role, input name or None)``, e.g. ``("lda", None)`` or ``("row_stride", "bias")``.
    ctype : str
        One of :data:`ARG_CTYPES`.
    """

    key: ParamKey
    ctype: str


@dataclass(frozen=True)
class ArrayRef:
    """An operand as a kernel sees it: an address and element strides.

    Attributes
    ----------
    pointer : int
        Address of element ``[0, ..., 0]`` (device or host).
    shape : tuple[int, ...]
    strides : tuple[int, ...]
        In elements (0 where the operand broadcasts).
    """

    pointer: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @classmethod
    def of_numpy(cls, array: Any) -> "ArrayRef":
        """View a host NumPy array (or anything with ``ctypes.data``, ``shape``, byte ``strides``).

        Examples
        --------
        >>> import numpy as np
        >>> ArrayRef.of_numpy(np.zeros((3, 4), dtype=np.float32).T).strides
        (1, 4)
        """
        itemsize = array.dtype.itemsize
        return cls(int(array.ctypes.data), tuple(array.shape), tuple(s // itemsize for s in array.strides))


def compute_ctype(storage: str) -> str:
    """The parameter type of scalars for a storage dtype (``"f64"`` for float64, else ``"f32"``)."""
    return "f64" if STORAGE_TYPES[storage][1] == "double" else "f32"


class PackedArguments:
    """Arguments converted to their C types, and the pointer array addressing them.

    Attributes
    ----------
    array : ctypes array of c_void_p
        ``array[i]`` points at argument ``i``; pass ``array`` as ``kernelParams``.
    slots : dict
        The ctypes value of each parameter by key: a launcher that keeps one ``PackedArguments``
        sets ``slots[key].value`` before each launch (``cuLaunchKernel`` copies the arguments at
        the launch, so they may change right after it).
    """

    def __init__(self, params: Sequence[KernelParam], values: Mapping[ParamKey, Any]):
        expected = [p.key for p in params]
        missing = [k for k in expected if k not in values]
        extra = [k for k in values if k not in set(expected)]
        if missing or extra:
            raise InvalidOperandError(f"kernel arguments do not match the parameters: missing {missing}, "
                                      f"unexpected {extra}")
        self._held = [ARG_CTYPES[p.ctype](values[p.key]) for p in params]
        self.array = (ctypes.c_void_p * max(1, len(params)))(*(ctypes.addressof(v) for v in self._held))
        self.slots = dict(zip(expected, self._held))

    def __len__(self) -> int:
        return len(self._held)


def pack_arguments(params: Sequence[KernelParam], values: Mapping[ParamKey, Any]) -> PackedArguments:
    """Pack ``values`` (keyed like ``params``) for ``cuLaunchKernel``.

    Raises
    ------
    InvalidOperandError
        If a parameter has no value or a value has no parameter.

    Examples
    --------
    >>> import ctypes
    >>> params = (KernelParam(("n", None), "i64"), KernelParam(("alpha", None), "f32"))
    >>> packed = pack_arguments(params, {("n", None): 7, ("alpha", None): 0.5})
    >>> ctypes.cast(packed.array[0], ctypes.POINTER(ctypes.c_int64)).contents.value
    7
    >>> ctypes.cast(packed.array[1], ctypes.POINTER(ctypes.c_float)).contents.value
    0.5
    """
    return PackedArguments(params, values)


def input_params(inputs: Sequence[tuple[str, str]], scalar: str) -> list[KernelParam]:
    """The parameters of an IR's inputs: a ``scalar``-typed value per scalar input, and a pointer
    followed by batch, row and column strides per array input (the value itself adds none)."""
    params: list[KernelParam] = []
    for input_name, kind in inputs:
        if kind == "value":
            continue
        if kind == "scalar":
            params.append(KernelParam(("scalar", input_name), scalar))
        else:
            params += [KernelParam((role, input_name), "ptr" if role == "ptr" else "i64")
                       for role in ("ptr", "batch_stride", "row_stride", "col_stride")]
    return params


def epilogue_values(inputs: Sequence[tuple[str, str]], values: Mapping[str, Any]) -> dict[ParamKey, Any]:
    """Argument values for epilogue inputs: a number per scalar, an :class:`ArrayRef` per array.

    An array input of kind ``row``/``col``/``matrix`` must have the result's rank (3: batch, rows,
    columns) with strides 0 along broadcast axes.
    """
    out: dict[ParamKey, Any] = {}
    for input_name, kind in inputs:
        if kind == "value":
            continue
        value = values[input_name]
        if kind == "scalar":
            out[("scalar", input_name)] = float(value)
            continue
        if len(value.strides) != 3:
            raise InvalidOperandError(f"epilogue input {input_name!r} must be given as (batch, rows, columns) "
                                      f"strides, got {value.strides}")
        out[("ptr", input_name)] = value.pointer
        for role, stride in zip(("batch_stride", "row_stride", "col_stride"), value.strides):
            out[(role, input_name)] = stride
    return out
