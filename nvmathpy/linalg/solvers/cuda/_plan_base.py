"""What the CUDA solver plans share: :class:`CudaPlanMixin` (operand intake on the device,
the engine, the plan's stream, ``info`` checking) and the :func:`on_stream` decorator.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from ....cuda.runtime import cupy_stream
from ....errors import InvalidOperandError, LinAlgError
from ....plan import Plan
from .._dispatch import engine_for
from .._operands import batch_index
from ..cpu._lapack import lapack_dtype
from ..plans._base import matching
from ._checks import defer, deferred
from ._operands import device_arrays

__all__ = ["CudaPlanMixin", "on_stream"]

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def _within(*contexts: Any) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for context in contexts:
            stack.enter_context(context)
        yield


def on_stream(method: F) -> F:
    """Run a plan method with CuPy's work (copies, result allocation) on the plan's stream."""

    @functools.wraps(method)
    def wrapper(self: "CudaPlanMixin", *args: Any, **kwargs: Any) -> Any:
        with self._on_stream():
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class CudaPlanMixin:
    """Intake, engine, streams and ``info`` checking shared by the CUDA plans.

    cuSOLVER runs on the engine's stream; the plan's own CuPy work (the private copy of ``A``,
    results) is put on the same stream: nothing to do for CuPy operands on CuPy's current
    stream, otherwise a context of the plan's stream (torch's current stream, or ``stream=``)
    made by :func:`~nvmathpy.cuda.runtime.cupy_stream`.
    """

    _route: Any = None
    _batch: tuple[int, ...]
    #: What :meth:`check` reports (None: the plan's routines report nothing).
    _failure: str | None = None

    def _device_init(self, execution: Any, stream: Any = None, **arrays: Any) -> dict[str, Any]:
        Plan.__init__(self)  # type: ignore[arg-type]
        native, self._to_caller, space, package = device_arrays(execution, **arrays)
        self._package, self._device_id, self._stream_arg = package, space.device_id, stream
        # NumPy operands on CUDA: later operands (solve(b), reset_operands) take the same way
        self._later_execution = space if package == "numpy" else None
        self._engine = engine_for(space, self.cpu_engine, package="cupy" if package == "numpy" else package,  # type: ignore[attr-defined]
                                  stream=stream)
        self._cupy = cupy = self._engine.context.cupy
        if stream is not None:
            fixed = cupy_stream(self._engine.stream(), cupy, space.device_id)
            self._on_stream: Callable[[], Any] = lambda: fixed
        elif package == "torch":
            current = self._engine.stream
            device_id = space.device_id
            self._on_stream = lambda: cupy_stream(current(), cupy, device_id)
        else:
            self._on_stream = contextlib.nullcontext
        if package == "numpy":  # the caller's current device may be another one: enter the plan's
            stream_context, device_id = self._on_stream, space.device_id
            self._on_stream = lambda: _within(cupy.cuda.Device(device_id), stream_context())
        self.num_threads = None
        self.factorizations = 0
        self._clear_derived()  # type: ignore[attr-defined]
        return native

    def _install(self, prepared: Any, how: str) -> None:
        super()._install(prepared, how)  # type: ignore[misc]
        self._run = self._streamed(self._run)

    def _rebind(self) -> None:
        super()._rebind()  # type: ignore[misc]
        if self._prepared is not None:  # type: ignore[attr-defined]
            self._run = self._streamed(self._run)

    def _streamed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if self._on_stream is contextlib.nullcontext:
            return fn
        enter = self._on_stream

        def run(*args: Any, **kwargs: Any) -> Any:
            with enter():
                return fn(*args, **kwargs)

        return run

    def _intake(self, **arrays: Any) -> dict[str, Any]:
        """Later operands as device arrays, the way the plan's own came in (NumPy ones are
        copied to the device when the plan was made from NumPy operands)."""
        return device_arrays(self._later_execution, **arrays)[0]

    def _swap_in(self, name: str, new: Any, current: Any) -> Any:
        native = self._intake(**{name: new})
        with self._on_stream():  # a cast to the plan's dtype is ordered with the plan's work
            return matching(name, native[name], current)

    def _take(self, a: Any) -> None:
        """The one-call functions' swap: ``a`` is a device stack of the planned shape, strides
        and dtype (the plan cache's key says so), so it is taken as it is: no intake, no cast,
        and no new closure (every CUDA plan's closure reads ``self._a`` when it runs)."""
        self._a = a
        self._clear_derived()  # type: ignore[attr-defined]

    def _release(self) -> None:
        """Keep no caller arrays alive in the plan cache: operands become zero-size broadcast
        stand-ins of their shapes and dtypes (the next swap brings real ones back; the closures
        read the operands when they run, so they are not made again)."""
        standins = self.__dict__.setdefault("_standins", {})  # made once per shape and dtype
        for name in ("_a", "_b"):
            array = getattr(self, name, None)
            if array is not None:
                standin = standins.get(name)
                if standin is None or standin.shape != array.shape or standin.dtype != array.dtype:
                    standin = standins[name] = self._cupy.broadcast_to(self._cupy.zeros((), array.dtype), array.shape)
                setattr(self, name, standin)
        self._clear_derived()  # type: ignore[attr-defined]

    def _failed(self, message: str) -> None:
        """Raise ``LinAlgError(message)`` naming the first failed batch element, if any (one sync)."""
        route = self._route
        bad = route.failures() if route is not None else []
        if bad:
            where = f" (batch element {batch_index(bad[0], self._batch)})" if self._batch else ""
            raise LinAlgError(f"{message}{where}")

    def _checked(self) -> Any:
        """:meth:`check` (one synchronisation) in the ``"raise"`` mode of
        :func:`~._checks.cuda_checks`; in ``"deferred"``, the ``info`` codes' asynchronous copy
        enqueued instead (:func:`~._checks.defer`)."""
        if not deferred():
            return self.check()  # type: ignore[attr-defined]
        route = self._route
        if route is not None and self._failure is not None:
            defer(self._cupy, route.info, route.count, "info", self._failure, self._batch, self._engine.stream())
        return self

    def _stack(self, a: Any) -> Any:
        if a.ndim == 3:  # already a stack: no reshape on the hot path
            return a
        return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])

    def _device_rhs(self, b: Any, rows: int) -> tuple[Any, bool]:
        """``b`` as a device stack ``(count, rows, k)`` in the plan's dtype (NumPy 2 rules)."""
        native = self._intake(b=b)
        b = native["b"]
        if b.ndim == 0:
            raise InvalidOperandError("b: expected a vector (n,) or matrices (..., n, k), got a scalar")
        vector = b.ndim == 1
        core = b[:, None] if vector else b
        if core.shape[-2] != rows:
            raise InvalidOperandError(
                f"b: has {core.shape[-2]} rows but the matrix has {rows} (shape {b.shape}; expected ({rows},) or "
                f"(..., {rows}, k))"
            )
        dtype = self._dtype
        if core.dtype != dtype:
            if lapack_dtype(core.dtype).kind == "c" and dtype.kind != "c":
                raise InvalidOperandError(f"b: complex right-hand side {core.dtype} for a real matrix of dtype {dtype}")
            core = core.astype(dtype)
        if core.shape[:-2] != self._batch:
            try:
                full = np.broadcast_shapes(core.shape[:-2], self._batch)
            except ValueError:
                raise InvalidOperandError(
                    f"b: batch shape {core.shape[:-2]} does not broadcast with the matrix batch {self._batch}"
                ) from None
            if full != self._batch:
                raise InvalidOperandError(f"b: batch shape {core.shape[:-2]} is larger than the matrix batch "
                                          f"{self._batch}")
            core = self._cupy.broadcast_to(core, self._batch + core.shape[-2:])
        return self._stack(core), vector

    def _shaped(self, x3: Any, vector: bool) -> Any:
        x = x3.reshape(self._batch + x3.shape[-2:])
        return x[..., 0] if vector else x


# -- LU ---------------------------------------------------------------------------------------------
