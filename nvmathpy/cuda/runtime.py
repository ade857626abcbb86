"""Device runtime for the CUDA engines, through the operand package (CuPy or PyTorch).

nvmathpy allocates, orders and times device work through the package the caller's arrays
belong to, so memory comes from that package's pool and work lands on its streams:

- :func:`stream_pointer` / :func:`current_stream_pointer`: the ``cudaStream_t`` to enqueue on
  (an explicit ``stream=`` given as an int, a CuPy or torch stream, or any object with
  ``__cuda_stream__``; else the package's current stream);
- :func:`cupy_stream`: a CuPy stream object for a raw ``cudaStream_t`` (``Stream.from_external``
  where CuPy has it, ``ExternalStream`` before CuPy 14), the one place nvmathpy wraps a pointer;
- :func:`allocate`: raw device memory (workspaces) from CuPy's pool or torch's caching allocator;
- :func:`event_timer`: an autotune timer (``timer(fn, calls) -> seconds per call``) built on CUDA
  events, with the L2 cache flushed by a device-side write before each timed call;
- :func:`device_description` / :func:`describe_device`: what keys GPU wisdom (GPU name, compute
  capability, multiprocessors, L2 size, cuBLASLt and CUDA versions).

CuPy and torch are imported inside the functions that need them; nothing here runs at import.
"""

from __future__ import annotations

import contextlib

import functools
import sys
from typing import Any, Callable, Mapping

from ..errors import InvalidOptionError, MissingDependencyError

__all__ = [
    "CUDA_PACKAGES",
    "allocate",
    "cupy_stream",
    "current_stream_pointer",
    "describe_device",
    "device_description",
    "engine_stream",
    "event_timer",
    "import_cupy",
    "stream_pointer",
]

#: Packages whose CUDA arrays the engines accept ("dlpack" operands are held as CuPy arrays).
CUDA_PACKAGES = ("cupy", "torch", "dlpack")

#: Bytes written to flush the L2 cache between timed calls (H200's L2 is 60 MB; 4x margin).
FLUSH_BYTES = 256 << 20


def import_cupy() -> Any:
    """Import CuPy, or raise :class:`MissingDependencyError` naming the extra to install."""
    try:
        import cupy
    except ImportError as exc:
        raise MissingDependencyError(
            "CUDA execution needs CuPy: pip install 'nvmathpy[cu13]' (or 'nvmathpy[cu12]')"
        ) from exc
    return cupy


def stream_pointer(stream: Any) -> int:
    """The ``cudaStream_t`` (as an int) of a ``stream=`` argument.

    Parameters
    ----------
    stream : int, cupy.cuda.Stream, torch.cuda.Stream or object with ``__cuda_stream__``
        An int is taken as the raw handle (0 is the legacy default stream).

    Raises
    ------
    InvalidOptionError
        For anything else, naming the type received.

    Examples
    --------
    >>> stream_pointer(0)
    0
    >>> class S:
    ...     def __cuda_stream__(self):
    ...         return (0, 1234)
    >>> stream_pointer(S())
    1234
    """
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise InvalidOptionError(f"stream={stream!r}: a raw stream handle must be a non-negative int")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attribute in ("ptr", "cuda_stream"):  # cupy.cuda.Stream, torch.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise InvalidOptionError(
        f"stream={stream!r} ({type(stream).__name__}) is not a stream; pass an int handle, a CuPy or "
        "torch CUDA stream, or an object with __cuda_stream__"
    )


class _RawStream:
    """A raw ``cudaStream_t`` presented through the CUDA stream protocol."""

    __slots__ = ("pointer",)

    def __init__(self, pointer: int) -> None:
        self.pointer = pointer

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.pointer)


def cupy_stream(pointer: int, cupy: Any = None, device_id: int | None = None) -> Any:
    """A CuPy stream object (usable as a context manager) for the ``cudaStream_t`` ``pointer``.

    The stream is not owned: CuPy never destroys it. Uses ``cupy.cuda.Stream.from_external``
    (CuPy 14 deprecates ``ExternalStream``) when CuPy has it, else ``cupy.cuda.ExternalStream``.
    ``from_external`` records the current device as the stream's: pass ``device_id`` (the stream's
    device) unless that device is current.

    Parameters
    ----------
    pointer : int
        The stream handle (0 is the legacy default stream).
    cupy : module, optional
        The CuPy module (imported if not given).
    device_id : int, optional
        The device the stream belongs to (default: the current device).
    """
    cupy = import_cupy() if cupy is None else cupy
    from_external = getattr(getattr(cupy.cuda, "Stream", None), "from_external", None)
    if from_external is None:
        return cupy.cuda.ExternalStream(pointer, -1 if device_id is None else device_id)
    if device_id is None:
        return from_external(_RawStream(int(pointer)))
    with cupy.cuda.Device(device_id):
        return from_external(_RawStream(int(pointer)))


def current_stream_pointer(package: str, device_id: int) -> Callable[[], int]:
    """A no-argument function returning the package's current stream (per call): torch's on
    ``device_id``, CuPy's on the current device (the operands' device is current during a call)."""
    if package == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the handle alone, no Stream object
        if raw is not None:
            return lambda: raw(device_id)
        current = torch.cuda.current_stream
        return lambda: current(device_id).cuda_stream
    cupy = import_cupy()
    get = cupy.cuda.get_current_stream
    return lambda: get().ptr


def engine_stream(package: str, device_id: int,
                  stream: Any) -> tuple[int | None, Callable[[], int], Callable[..., float]]:
    """What every CUDA engine sets up for its calls: ``(explicit, stream, timer)``.

    ``explicit`` is the pointer of the ``stream=`` the caller gave (``None`` when none was
    given), ``stream()`` the stream of each call (that one, else the package's current stream,
    :func:`current_stream_pointer`), and ``timer`` an :func:`event_timer` on it."""
    explicit = None if stream is None else stream_pointer(stream)
    if explicit is None:
        current = current_stream_pointer(package, device_id)
    else:
        def current() -> int:
            return explicit
    return explicit, current, event_timer(current, device_id)


def allocate(nbytes: int, package: str, device_id: int, stream: int | None = None) -> tuple[Any, int]:
    """``(owner, address)`` of ``nbytes`` of device memory from the package's allocator.

    Keep ``owner`` alive as long as the memory is used; dropping it returns the memory to the
    pool. ``nbytes == 0`` gives ``(None, 0)``. ``stream`` is the ``cudaStream_t`` the memory
    will be used on (``None``: the current one): the memory is allocated with that stream
    current, because both CuPy's pool and torch's caching allocator hand freed memory out again
    only to work on the stream it was allocated on - memory allocated on another stream could
    be reused while a kernel on the plan's stream still reads it.
    """
    if nbytes == 0:
        return None, 0
    if package == "torch":
        torch = sys.modules["torch"]
        on_stream = (torch.cuda.stream(torch.cuda.ExternalStream(stream, device=f"cuda:{device_id}"))
                     if stream is not None else contextlib.nullcontext())
        with on_stream:
            buffer = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device_id}")
        return buffer, buffer.data_ptr()
    cupy = import_cupy()
    with cupy.cuda.Device(device_id):
        with cupy_stream(stream, cupy) if stream is not None else contextlib.nullcontext():
            memory = cupy.cuda.alloc(nbytes)
    return memory, memory.ptr


def event_timer(stream: Callable[[], int], device_id: int, flush_bytes: int = FLUSH_BYTES) -> Callable[..., float]:
    """An autotune timer on CUDA events: ``timer(fn, calls) -> seconds per call``.

    Before each call a device-side memset of ``flush_bytes`` evicts the L2 cache (the memset
    runs on the same stream, outside the timed region); each call is bracketed by its own pair of
    events, and the per-call times are summed after one synchronisation.

    Parameters
    ----------
    stream
        Returns the ``cudaStream_t`` the timed work is enqueued on.
    device_id
        The device.
    flush_bytes
        Size of the flush buffer (allocated on first use and kept by the timer).
    """
    cupy = import_cupy()
    state: dict[str, Any] = {}

    def timer(fn: Callable[[], object], calls: int) -> float:
        with cupy.cuda.Device(device_id):
            external = cupy_stream(stream(), cupy)
            if "flush" not in state:
                state["flush"] = cupy.cuda.alloc(flush_bytes)
            flush = state["flush"]
            pairs = []
            for _ in range(calls):
                cupy.cuda.runtime.memsetAsync(flush.ptr, 0, flush_bytes, external.ptr)
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(external)
                fn()
                stop.record(external)
                pairs.append((start, stop))
            pairs[-1][1].synchronize()
            total_ms = sum(cupy.cuda.get_elapsed_time(s, e) for s, e in pairs)
        return total_ms / 1e3 / calls

    return timer


def describe_device(properties: Mapping[str, Any], lt_version: tuple[int, int, int], cuda_version: int) -> dict:
    """The wisdom description of a GPU, from ``cudaGetDeviceProperties``-style fields.

    Parameters
    ----------
    properties
        At least ``name`` (bytes or str), ``major``, ``minor``, ``multiProcessorCount`` and
        ``l2CacheSize`` (as CuPy's ``getDeviceProperties`` returns them).
    lt_version
        cuBLASLt ``(major, minor, patch)``.
    cuda_version
        CUDA runtime version as encoded by CUDA (``1000 * major + 10 * minor``).

    Examples
    --------
    >>> props = {"name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132,
    ...          "l2CacheSize": 62914560}
    >>> describe_device(props, (13, 1, 0), 13000)["compute_capability"]
    '9.0'
    """
    name = properties["name"]
    return {
        "space": "cuda",
        "gpu": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{properties['major']}.{properties['minor']}",
        "multiprocessors": int(properties["multiProcessorCount"]),
        "l2_bytes": int(properties["l2CacheSize"]),
        "cublaslt": ".".join(map(str, lt_version)),
        "cuda_runtime": f"{cuda_version // 1000}.{cuda_version % 1000 // 10}",
    }


@functools.cache
def device_description(device_id: int) -> dict:
    """:func:`describe_device` for device ``device_id`` of this process (cached)."""
    from .bindings import cublaslt

    cupy = import_cupy()
    properties = cupy.cuda.runtime.getDeviceProperties(device_id)
    return describe_device(properties, cublaslt.version(), cupy.cuda.runtime.runtimeGetVersion())
