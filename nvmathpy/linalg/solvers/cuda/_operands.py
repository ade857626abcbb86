"""Operands of the CUDA solver plans and functions: CUDA arrays (CuPy, torch CUDA) taken as
they are, NumPy operands with ``execution="cuda"`` cast and copied to the device, results
converted back into the caller's package, and the column-major reading of a device stack.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable

import numpy as np

from ....errors import InvalidOperandError
from ....execution import ExecutionCUDA, as_execution, resolve_execution
from ....operands import common_package, wrap_all
from ..cpu._lapack import lapack_dtype
from . import _layout as layout

__all__ = ["as_device_stack", "converter", "device_arrays", "host_converter", "on_device", "storage_view",
           "transposed_layout"]


def device_arrays(execution: Any, **arrays: Any) -> tuple[dict[str, Any], Callable[[Any], Any], ExecutionCUDA, str]:
    """Wrap CUDA operands: ``(native CuPy arrays, to_caller, space, package)``.

    NumPy operands with ``execution="cuda"`` (or an :class:`~nvmathpy.ExecutionCUDA`) are
    cast to their LAPACK dtype on the host (integers to float64, half precision to float32, as
    on the CPU; pivots ``piv`` keep theirs) and copied to that device (CuPy's pool, its current
    stream, which is then synchronised so that any stream may read them); ``package`` is then
    ``"numpy"`` and ``to_caller`` copies results back to NumPy arrays (:func:`host_converter`).

    Raises the :class:`~nvmathpy.errors.ExecutionSpaceUnavailableError` of
    :func:`~nvmathpy.execution.resolve_execution` where CUDA cannot be used, and
    :class:`InvalidOperandError` for host operands without ``execution="cuda"``.

    CuPy arrays on one device without ``execution=`` (the common call) take a short way: no
    wrapping, the space of their device remembered."""
    if execution is None:
        found = _cupy_arrays(arrays)
        if found is not None:
            return found
    asked = as_execution(execution)
    if isinstance(asked, ExecutionCUDA):
        from ....cuda.driver import require_cuda

        require_cuda(asked.device_id)  # the one clear error without a driver, before any wrapping
    wrapped = wrap_all(**arrays)
    package, device, device_id = common_package(wrapped)
    host = package == "numpy" and isinstance(asked, ExecutionCUDA)
    space = resolve_execution(execution, "cuda" if host else device, device_id)
    if not isinstance(space, ExecutionCUDA):
        raise InvalidOperandError("the CUDA solver plans need CUDA operands (CuPy arrays or torch CUDA tensors), "
                                  "or NumPy arrays with execution='cuda'")
    if host:
        from ....cuda.runtime import import_cupy
        from ...gemm.cuda._host_operands import upload

        cupy = import_cupy()
        host_arrays = {k: op.array if k == "piv" else _host_cast(k, op.array) for k, op in wrapped.items()}
        with cupy.cuda.Device(space.device_id):
            native = {k: upload(array, cupy) for k, array in host_arrays.items()}
            cupy.cuda.get_current_stream().synchronize()
        return native, host_converter(cupy, space.device_id), space, package
    return {k: op.array for k, op in wrapped.items()}, converter(package), space, package


#: The execution space of each device the short way met.
_SPACES: dict[int, ExecutionCUDA] = {}


def _same(value: Any) -> Any:
    return value


def _cupy_arrays(arrays: dict[str, Any]) -> tuple[dict[str, Any], Callable[[Any], Any], ExecutionCUDA, str] | None:
    """:func:`device_arrays`'s answer for CuPy arrays on one device (None for anything else)."""
    kind = getattr(sys.modules.get("cupy"), "ndarray", None)
    device_id = None
    native = {}
    for name, x in arrays.items():
        if x is None:
            continue
        if type(x) is not kind:
            return None
        device = x.device.id
        if device_id is None:
            device_id = device
        elif device != device_id:
            return None  # the general way names the mismatch
        native[name] = x
    if device_id is None:
        return None
    space = _SPACES.get(device_id)
    if space is None:
        space = _SPACES[device_id] = ExecutionCUDA(device_id)
    return native, _same, space, "cupy"


def _host_cast(name: str, array: np.ndarray) -> np.ndarray:
    """A host operand in the dtype LAPACK computes it in (no copy when it already is)."""
    try:
        return array.astype(lapack_dtype(array.dtype), copy=False)
    except TypeError as exc:
        raise InvalidOperandError(f"{name}: {exc}") from None


def on_device(execution: Any) -> Any:
    """A context making the CUDA device ``execution`` names current (a null context when
    ``execution`` names none: CUDA operands then run on the current device, as CuPy's own
    functions do). Checks the driver first, so that no-driver machines get the one clear error."""
    space = as_execution(execution)
    if not isinstance(space, ExecutionCUDA):
        return contextlib.nullcontext()
    from ....cuda.driver import require_cuda
    from ....cuda.runtime import import_cupy

    require_cuda(space.device_id)
    return import_cupy().cuda.Device(space.device_id)


def host_converter(cupy: Any, device_id: int) -> Callable[[Any], Any]:
    """Results (device arrays, tuples, named tuples, scalars) back into NumPy: the device is
    synchronised first (the plan may run on a stream of its own), then each array is copied;
    0-d results become NumPy scalars, as NumPy's functions return them."""

    def one(value: Any) -> Any:
        if not isinstance(value, cupy.ndarray):
            return value
        out = cupy.asnumpy(value)
        return out[()] if out.ndim == 0 else out

    copy = _recursive(one)

    def to_host(value: Any) -> Any:
        with cupy.cuda.Device(device_id) as device:
            device.synchronize()
            return copy(value)

    return to_host


def _recursive(convert_one: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert_one`` applied through tuples and named tuples."""

    def convert(value: Any) -> Any:
        if isinstance(value, tuple):
            items = [convert(v) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        return convert_one(value)

    return convert


def converter(package: str) -> Callable[[Any], Any]:
    """Results (arrays, tuples, named tuples, scalars) into ``package`` (torch via DLPack)."""
    if package != "torch":
        return lambda value: value
    from_dlpack = sys.modules["torch"].from_dlpack
    return _recursive(lambda value: from_dlpack(value) if hasattr(value, "__dlpack__") else value)


def as_device_stack(a: Any, name: str, *, square: bool = True, dtype: Any = None) -> Any:
    """Validate a device stack ``(..., m, n)`` and cast it to its LAPACK dtype."""
    if a.ndim < 2:
        raise InvalidOperandError(f"{name}: expected a matrix or a batch of matrices (ndim >= 2), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise InvalidOperandError(f"{name}: expected square matrices (..., n, n), got shape {a.shape}")
    try:
        target = lapack_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    except TypeError as exc:
        raise InvalidOperandError(f"{name}: {exc}") from None
    return a if a.dtype == target else a.astype(target)


def transposed_layout(a: Any) -> tuple[bool, str]:
    """``(transposed, layout)``: whether the column-major reading of ``a``'s matrices is ``A^T``
    (row-major input) and the problem's layout field (``"C"``, ``"F"`` or ``"strided"``)."""
    strides = [s // a.itemsize for s in a.strides]
    view = layout.column_major(a.shape, strides) if a.size else layout.ColumnMajor(0, 0, 1, False)
    if view is None:
        return False, "strided"
    return view.transposed, "C" if view.transposed else "F"


def storage_view(transposed: bool) -> Callable[[Any], Any]:
    """How to write ``A``'s stack into a private column-major buffer (C storage ``(count, cols,
    rows)`` of the library matrix): the buffer itself when the library matrix is ``A^T``, its
    swapped axes otherwise."""
    if transposed:
        return lambda buffer: buffer
    return lambda buffer: buffer.swapaxes(-1, -2)
