"""NumPy operands asked to run on CUDA: copied to the device through CuPy, NumPy results back.

Each call copies ``a``, ``b``, ``c`` and the epilogue inputs to the device (CuPy's pool, its
current stream), runs the CUDA kernel there and copies the result (and any aux outputs) back,
which synchronises with that stream. An operand keeps its matrices' layout on the way over
when that costs nothing: C-contiguous ones stay C-contiguous, and ones whose last two axes are
swapped C-contiguous arrays (``x.T`` of a 2-D array, ``swapaxes(-1, -2)`` of a batch) become the
same swapped view on the device, which cuBLASLt reads transposed without a copy. Anything else
is made C-contiguous on the host first. The device strides are what the engine plans for
(:func:`device_problem`). Dtypes CuPy has no type for (bfloat16, the FP8 types of ml_dtypes)
travel as their raw storage (uint16/uint8 views); results come back viewed as their dtype.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ....cuda.runtime import cupy_stream, import_cupy
from ....plan import Problem
from ._lt_execute import STORAGE, _numpy_dtype

_RAW = tuple(set(STORAGE.values()))

__all__ = ["device_strides", "device_problem", "upload", "on_device"]


def _c_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def _swapped(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the array with these element strides is a C-contiguous array with its last two
    axes swapped (and not C-contiguous itself)."""
    if len(shape) < 2:
        return False
    shape, strides = list(shape), list(strides)
    shape[-1], shape[-2], strides[-1], strides[-2] = shape[-2], shape[-1], strides[-2], strides[-1]
    return _same(shape, strides, _c_strides(shape))


def _same(shape: Sequence[int], strides: Sequence[int], expected: Sequence[int]) -> bool:
    return all(size == 1 or s == e for size, s, e in zip(shape, strides, expected))


def device_strides(shape: Sequence[int], strides: Sequence[int]) -> list[int]:
    """Element strides the device copy of a host operand has (see the module docstring).

    Examples
    --------
    >>> device_strides((3, 4), (4, 1)), device_strides((3, 4), (1, 3)), device_strides((3, 4), (8, 2))
    ([4, 1], [1, 3], [4, 1])
    """
    if _same(shape, strides, _c_strides(shape)) or not _swapped(shape, strides):
        return _c_strides(shape)
    swapped = list(shape[:-2]) + [shape[-1], shape[-2]]
    out = _c_strides(swapped)
    out[-1], out[-2] = out[-2], out[-1]
    return out


def device_problem(problem: Problem) -> Problem:
    """``problem`` with the operand strides of the device copies."""
    fields = problem.as_dict()["fields"]
    for name in ("a", "b"):
        strides = fields.get(f"{name}_strides")
        if strides is not None:
            fields[f"{name}_strides"] = device_strides(fields[f"{name}_shape"], strides)
    return Problem.of(problem.operation, **fields)


def upload(x: np.ndarray, cupy: Any) -> Any:
    """A device copy of host array ``x`` (layout as in the module docstring)."""
    if x.dtype.name in STORAGE:
        x = x.view(STORAGE[x.dtype.name])
    item = x.dtype.itemsize
    strides = [s // item for s in x.strides]
    if x.ndim >= 2 and not x.flags.c_contiguous and _swapped(x.shape, strides):
        return cupy.asarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return cupy.asarray(x if x.flags.c_contiguous else np.ascontiguousarray(x))  # (keeps 0-d arrays 0-d)


def on_device(kernel: Callable[..., Any], problem: Problem, stream: int | None = None,
              device_id: int = 0) -> Callable[..., Any]:
    """``kernel`` (on device arrays) as a kernel on host arrays: upload, run, download, all on
    device ``device_id`` (made current for the call: the caller's may be another) and on
    ``stream`` (the plan's ``stream=``; ``None``: CuPy's current stream of that device)."""
    cupy = import_cupy()
    stream_context = (lambda: cupy_stream(stream, cupy)) if stream is not None else contextlib.nullcontext
    result_dtype = _numpy_dtype(problem.get("result_dtype") or problem.get("dtype"))

    @contextlib.contextmanager
    def on_stream() -> Iterator[None]:
        with cupy.cuda.Device(device_id), stream_context():
            yield

    def to_host(x: Any) -> np.ndarray:
        out = cupy.asnumpy(x)
        return out.view(result_dtype) if out.dtype in _RAW else out

    def run(a: Any, b: Any, c: Any, inputs: Any, out: Any) -> Any:
        with on_stream():
            result = kernel(upload(a, cupy), upload(b, cupy), None if c is None else upload(c, cupy),
                            {name: upload(value, cupy) for name, value in inputs.items()}, None)
            extra = None
            if isinstance(result, tuple):
                result, extra = result
                extra = {name: to_host(value) for name, value in extra.items()}
            if out is not None:
                out[...] = to_host(result)
                result = out
            else:
                result = to_host(result)
        return result if extra is None else (result, extra)

    return run
