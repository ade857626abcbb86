"""The CUDA FFT engine: cuFFT plans (``cufftXtMakePlanMany``, 64-bit) on CuPy / torch CUDA arrays.

How a problem becomes cuFFT calls is decided in :mod:`._cuda_layout` (pure arithmetic); this
module is the :class:`~nvmathpy.plan.Engine` and its hot path:

- :meth:`CudaFFTEngine.candidates` lists the layout strategies that can run the problem
  (``"strided"``: the operand as it lies, ``"per_axis"``: rank-1 plans one axis at a time,
  ``"transposed"``: a canonical copy first) in a heuristic order - no copy and few exec calls
  first; autotune times them with CUDA events;
- :meth:`CudaFFTEngine.prepare` creates one cuFFT plan per step with auto-allocation off and
  gives all of them one work area (the steps run in sequence on one stream) from the operand
  package's pool;
- the prepared ``forward(x, out)`` / ``inverse(x, out)`` stage the operand on the device when
  needed (crop, zero-pad, dtype change, a c2r input cuFFT may overwrite), set the call's stream
  on the plans when it changed, run the exec calls, and apply the normalisation (and the
  conjugations of the Hermitian directions: ihfft = conj(rfft), hfft = irfft(conj)).

Host (NumPy / torch CPU) operands with ``execution="cuda"`` travel to the device as C-contiguous
copies, and results come back to the host.

Prolog/epilog callbacks (``callbacks=``) run inside cuFFT as LTO callbacks
(:mod:`nvmathpy.kernels.fft_callbacks`): the prolog as the load callback of the first plan, the
epilog as the store callback of the last, attached with ``cufftXtSetJITCallback`` before each plan
is made; the epilog callback also applies the normalisation and ihfft's conjugation, so with
callbacks each direction has plans of its own. Only strategies whose first/last plan runs in one
exec call over a buffer whose offsets map back to indices (:func:`~nvmathpy.kernels.fft_callback_layout.peel_order`)
are offered.

Where cuFFT refuses a plan with LTO callbacks (any :class:`~nvmathpy.errors.LibraryError` while
attaching or planning: cuFFT's JIT link, sizes it does not take with callbacks) however they are
attached (:data:`LTO_NAMINGS`: without a symbol name, then with the function's name), the candidate
falls back by itself - a warning once per process, never an exception - to the plain FFT plus one generated
elementwise kernel per callback (:func:`~nvmathpy.kernels.fft_callbacks.apply_source`: the same
device function called for every element offset, with the same ``callerInfo``), NVRTC-compiled for
the device and launched on the call's stream: the prolog kernel before the first plan (into a
scratch buffer laid out like the operand, which stays untouched, or in place on a buffer the engine
staged), the epilog kernel in place after the last. ``CufftPrepared.callback_path`` says which ran;
:data:`CALLBACK_PATH` (``NVMATHPY_FFT_CALLBACK_PATH``) forces the fallback.

Half precision (``FFTOptions(half_precision=True)``) runs cuFFT in ``CUDA_R_16F``/``CUDA_C_16F``,
which cuFFT supports for power-of-2 lengths only; half-complex buffers are float16 arrays with a
trailing axis of 2, and results come back as complex64/float32 like every other float16 problem.

CuPy (and torch, for torch operands) are imported only when an engine is built.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from typing import Any, Callable, Mapping

import numpy as np

from ..cuda import runtime
from ..cuda.bindings import cufft
from .._logging import logger
from ..errors import InvalidOptionError, LibraryError
from ..plan import Candidate, Engine, Problem
from ._cuda_callbacks import ApplyKernel, attacher, callback_buffers, elementwise_kernels, make_plan
from ._cuda_layout import STRATEGIES, Schedule, inverse_order, memory_order, schedule
from ._engines_cpu import layout_of
from ._layout import Layout, scale_factor
from ._libraries import FFTPrepared

__all__ = ["CudaFFTEngine", "CufftPrepared", "check_half_precision", "cuda_fields", "cufft_device", "engine_schedules"]

#: Exec calls per transform up to which a no-copy strategy is tried before the transposing one.
FEW_CALLS = 8
#: Strategies needing more exec calls than this are not offered (the transposing one always is).
MAX_CALLS = 1024
#: cuFFT statuses meaning "not this layout" (a candidate falls back to the transposing strategy).
_REFUSALS = ("CUFFT_INVALID_VALUE", "CUFFT_INVALID_SIZE", "CUFFT_NOT_SUPPORTED", "CUFFT_NOT_IMPLEMENTED")
#: Bytes of one element: (real, complex), by precision.
_ITEMSIZE = {"half": (2, 4), "single": (4, 8), "double": (8, 16)}


def check_half_precision(layout: Layout, inplace: bool) -> None:
    """Raise unless cuFFT can compute ``layout`` in half precision (power-of-2 lengths only)."""
    if layout.precision != "single":
        raise InvalidOptionError(
            f"half_precision=True needs a float16/float32/complex64 operand; got a {layout.precision}-precision one"
        )
    odd = [n for n in layout.lengths if n & (n - 1)]
    if odd:
        raise InvalidOptionError(
            f"half_precision=True: cuFFT computes half precision only for power-of-2 lengths; got lengths "
            f"{list(layout.lengths)} ({odd} are not powers of 2): pad with s= or drop half_precision"
        )
    if inplace:
        raise InvalidOptionError("half_precision=True cannot write in place (the result is complex64, not half)")


def cuda_fields(array: Any, half: bool, host: bool = False) -> dict[str, Any]:
    """The problem-key fields only the CUDA engine needs: the operand's own shape, dtype and
    element strides (it stages on the device from them; a ``host`` operand travels as a
    C-contiguous copy) and the half-precision flag."""
    shape = array.shape
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))] if host else [
        s // array.itemsize for s in array.strides]
    fields = {"x_shape": list(shape), "x_dtype": array.dtype.name, "x_strides": strides}
    if host:
        fields["host"] = True
    if half:
        fields["half"] = True
    return fields


class _Plan:
    """What one problem's staging and buffers look like (derived from the problem key)."""

    def __init__(self, problem: Problem):
        layout = layout_of(problem)
        self.layout = layout
        self.half = bool(problem.get("half", False))
        self.precision = "half" if self.half else layout.precision
        self.x_shape = tuple(problem.get("x_shape"))
        self.x_dtype = np.dtype(problem.get("x_dtype"))
        self.x_strides = tuple(problem.get("x_strides"))
        self.inplace = bool(problem.get("inplace", False))
        self.region = tuple(min(n, m) for n, m in zip(self.x_shape, layout.in_shape))
        self.pad = any(m > n for n, m in zip(self.x_shape, layout.in_shape))
        self.crop = any(m < n for n, m in zip(self.x_shape, layout.in_shape))
        # the element type cuFFT reads: numpy dtype, or None for half complex (float16 pairs)
        if self.half:
            self.x_type = np.dtype(np.float16) if layout.kind == "r2c" else None
        else:
            self.x_type = layout.in_dtype
        negative = any(s < 0 for s, n in zip(self.x_strides, self.region) if n > 1)
        self.stage = (
            self.pad or layout.kind == "c2r" or negative or self.x_type is None or self.x_dtype != self.x_type
        )
        self.order = memory_order(self.region, self.x_strides)


@functools.lru_cache(maxsize=256)
def engine_schedules(problem: Problem) -> dict[str, tuple[Schedule, bool]]:
    """Every strategy that can run ``problem``: ``{strategy: (schedule, copy_back)}``, duplicates
    dropped; ``copy_back`` says an in-place problem computes out of place and copies back."""
    p = _Plan(problem)
    lay = p.layout
    strides = None if p.stage else p.x_strides

    def build(strategy: str, inplace: bool) -> Schedule | None:
        return schedule(lay.kind, lay.axes, lay.lengths, lay.in_shape, lay.out_shape, strides, p.order, strategy,
                        inplace)

    found: dict[str, tuple[Schedule, bool]] = {}
    seen = set()
    for copy_back in ((False, True) if p.inplace else (False,)):
        for strategy in STRATEGIES:
            s = build(strategy, p.inplace and not copy_back)
            if s is None or (s.x_order, s.y_order, s.steps) in seen:
                continue
            seen.add((s.x_order, s.y_order, s.steps))
            found[strategy if not copy_back else f"{strategy}+copy"] = (s, copy_back)
        if found:
            break
    return found


def _rank_key(item: tuple[str, tuple[Schedule, bool]]) -> tuple:
    name, (s, copy_back) = item
    return (s.calls > FEW_CALLS, s.copies + copy_back, len(s.steps), s.calls, STRATEGIES.index(name.split("+")[0]))


@functools.cache
def cufft_device(device_id: int) -> dict[str, Any]:
    """The wisdom description of device ``device_id`` with the cuFFT version (it changes the ranking)."""
    return {**runtime.device_description(device_id), "cufft": ".".join(map(str, cufft.version()))}


class CufftPrepared(FFTPrepared):
    """A prepared cuFFT candidate: the plans of its steps, their work area and the hot path."""

    def __init__(self, candidate: Candidate, forward: Callable[..., Any], inverse: Callable[..., Any],
                 handles: list[int], workspace: Any):
        super().__init__(candidate, forward, inverse, writes_out=False)
        self.handles = handles
        self._workspace = workspace
        #: with callbacks, how they run: ``"lto"`` (inside cuFFT) or ``"elementwise"`` (fallback kernels)
        self.callback_path: str | None = None
        #: with LTO callbacks, how they were attached (see :data:`LTO_NAMINGS`)
        self.callback_naming: str | None = None

    def free(self) -> None:
        handles, self.handles, self._workspace = self.handles, [], None
        for handle in handles:
            cufft.LIB.cufftDestroy(handle)
        super().free()


class CudaFFTEngine(Engine):
    """FFTs on an NVIDIA GPU through cuFFT.

    Parameters
    ----------
    device_id
        The CUDA device of the operand.
    stream
        ``None``: each call runs on the operand package's current stream; else an int handle, a
        CuPy or torch stream, or an object with ``__cuda_stream__``.
    package
        The operand's package (``"cupy"``, ``"torch"`` or ``"dlpack"``): work areas come from its
        allocator.
    host
        The operand is a host (NumPy) array: each call copies it to the device (C-contiguous)
        and returns the result as a NumPy array (or copies it back into the operand in place).
    callbacks
        ``{"prolog" | "epilog": (expr, inputs)}``: traced callbacks and their inputs (NumPy arrays
        in the callback's dtype with the operand's number of axes, or numbers), run inside cuFFT.
    """

    name = "cuda-cufft"
    budget = None

    def __init__(self, *, device_id: int = 0, stream: Any = None, package: str = "cupy", host: bool = False,
                 callbacks: Mapping[str, tuple[Any, Mapping[str, Any]]] | None = None):
        self.callbacks = dict(callbacks or {})
        self._lto_refused: set[str] = set()  # namings cuFFT refused plans with LTO callbacks for
        if package not in runtime.CUDA_PACKAGES:
            raise InvalidOptionError(f"package={package!r}: CUDA operands come from {list(runtime.CUDA_PACKAGES)}")
        self.device_id, self.package, self.host = device_id, package, host
        self.explicit_stream, self.stream, self.timer = runtime.engine_stream(package, device_id, stream)

    def device(self) -> dict[str, Any]:
        return cufft_device(self.device_id)

    def candidates(self, problem: Problem) -> list[Candidate]:
        ranked = sorted(engine_schedules(problem).items(), key=_rank_key)
        if self.callbacks:
            plan = _Plan(problem)
            ranked = [item for item in ranked if callback_buffers(plan, item[1][0], self.callbacks) is not None]
            if not ranked:
                raise InvalidOptionError(
                    "prolog/epilog callbacks on CUDA need a transform length > 1 (no cuFFT plan runs here)")
        kept = [name for name, (s, _) in ranked if s.calls <= MAX_CALLS] or [ranked[0][0]]
        return [Candidate.of("cufft", layout=name) for name in kept]

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> CufftPrepared:
        """Create the candidate's cuFFT plans and work area. Should cuFFT refuse a layout of a
        copy-free strategy, the copying ``"transposed"`` one (which it always takes: dense, batch
        outside) is prepared instead, and the returned object names that candidate."""
        layout = candidate.params["layout"]
        try:
            return self._prepare(problem, candidate)
        except LibraryError as exc:
            fallback = "transposed" + ("+copy" if layout.endswith("+copy") else "")
            if exc.status not in _REFUSALS or layout == fallback or fallback not in engine_schedules(problem) or (
                    self.callbacks and callback_buffers(_Plan(problem), engine_schedules(problem)[fallback][0],
                                                         self.callbacks) is None):
                raise
            if logger.isEnabledFor(20):
                logger.info("cuFFT refused layout %s (%s); using %s", layout, exc.status, fallback)
            return self._prepare(problem, Candidate.of("cufft", layout=fallback))

    def _prepare(self, problem: Problem, candidate: Candidate) -> CufftPrepared:
        """Prepare ``candidate``; with callbacks, as LTO callbacks inside cuFFT unless cuFFT refuses
        them (or :data:`CALLBACK_PATH` says ``"elementwise"``), else as the plain FFT plus one
        generated elementwise kernel before (prolog) and after (epilog) it."""
        if not self.callbacks or CALLBACK_PATH == "elementwise":
            return self._build(problem, candidate, None)
        # the way of naming the callback cuFFT took last in this process first, then the others
        for naming in sorted(LTO_NAMINGS, key=lambda n: n != _TAKEN[0]):
            if naming in self._lto_refused:
                continue
            try:
                prepared = self._build(problem, candidate, naming)
            except LibraryError as exc:
                self._lto_refused.add(naming)
                _log_refusal(exc, naming)
                continue
            _TAKEN[0] = naming
            return prepared
        _warn_fallback()
        return self._build(problem, candidate, None)

    def _build(self, problem: Problem, candidate: Candidate, naming: str | None) -> CufftPrepared:
        lto = naming is not None
        plan = _Plan(problem)
        chosen, copy_back = engine_schedules(problem)[candidate.params["layout"]]
        cupy = runtime.import_cupy()
        handles: list[int] = []
        keep: list[Any] = []  # device memory the callbacks read (inputs, callerInfo structs)
        inside = bool(self.callbacks) and lto  # callbacks inside cuFFT: plans of their own per direction
        try:
            with cupy.cuda.Device(self.device_id):
                attach = attacher(self, plan, chosen, cupy, keep, naming) if self.callbacks else None
                own: dict[str | None, list[int]] = {}
                sizes = []
                for direction in ("forward", "inverse") if inside else (None,):
                    own[direction] = []
                    for index, step in enumerate(chosen.steps):
                        handle, size = make_plan(step.kind, step.many, plan.precision,
                                                  attach(direction, index, len(chosen.steps)) if inside else ())
                        handles.append(handle)
                        own[direction].append(handle)
                        sizes.append(size)
                owner, address = runtime.allocate(max(sizes, default=0), self.package, self.device_id, self.stream())
                for handle in handles:
                    cufft.LIB.cufftSetWorkArea(handle, address)
                applies = {direction: elementwise_kernels(self, attach, direction, len(chosen.steps))
                           for direction in ("forward", "inverse")} if attach is not None and not lto else {}
            # the stream the plans were last set to (one record per set of plans)
            lasts: dict[str | None, list[Any]] = {direction: [None] for direction in own}
            forward, inverse = (
                _kernel(self, plan, chosen, copy_back, own.get(direction, own.get(None)),
                        lasts.get(direction, lasts.get(None)), direction, cupy, applies.get(direction))
                for direction in ("forward", "inverse"))
        except BaseException:
            for handle in handles:
                cufft.LIB.cufftDestroy(handle)
            raise
        prepared = CufftPrepared(candidate, forward, inverse, handles, (owner, keep))
        prepared.callback_path = None if not self.callbacks else ("lto" if lto else "elementwise")
        prepared.callback_naming = naming if self.callbacks and lto else None
        return prepared


#: How FFT callbacks run on CUDA: ``"auto"`` (LTO callbacks inside cuFFT; where cuFFT refuses the
#: plan, the plain FFT plus a generated elementwise kernel) or ``"elementwise"`` (always the
#: latter). Initialised from the environment variable ``NVMATHPY_FFT_CALLBACK_PATH``.
CALLBACK_PATH = os.environ.get("NVMATHPY_FFT_CALLBACK_PATH", "auto")
#: How the LTO callbacks are attached, tried in turn until cuFFT takes one: ``"default"`` (no
#: symbol name: cuFFT links its default C++ callback name, as nvmath-python attaches callbacks) and
#: ``"named"`` (the C++ function's name passed, as NVIDIA's CUDA 13 samples do).
LTO_NAMINGS = ("default", "named")
#: The naming cuFFT took last in this process (tried first).
_TAKEN = ["default"]
#: The refusals of plans with LTO callbacks met in this process: "naming: status" -> first error
#: message (each is logged once, at WARNING; later ones at DEBUG).
LTO_REFUSALS: dict[str, str] = {}


def _log_refusal(exc: LibraryError, naming: str) -> None:
    status = f"{naming}: {getattr(exc, 'status', None) or exc}"
    if status not in LTO_REFUSALS:
        LTO_REFUSALS[status] = str(exc)
    logger.info("cuFFT refused a plan with LTO callbacks attached the %r way (%s)", naming, exc)


_WARNED = [False]


def _warn_fallback() -> None:
    """Say once per process that callbacks run as elementwise kernels because cuFFT refused them."""
    if _WARNED[0]:
        logger.debug("cuFFT refused the LTO callbacks; elementwise kernels apply them")
        return
    _WARNED[0] = True
    logger.warning("cuFFT refused plans with LTO callbacks (%s): the FFT runs without them and generated "
                   "elementwise kernels apply the prolog/epilog before/after it (same results)",
                   "; ".join(LTO_REFUSALS.values()))


def _stream_context(engine: CudaFFTEngine, cupy: Any) -> Callable[[int], Any] | None:
    """``ctx(stream) -> context`` making CuPy's own work (copies, scaling) run on the call's stream;
    ``None`` when CuPy's current stream is that stream already."""
    if engine.package != "torch" and engine.explicit_stream is None:
        return None
    streams: dict[int, Any] = {}
    device_id = engine.device_id

    def ctx(pointer: int) -> Any:
        found = streams.get(pointer)
        if found is None:
            found = streams[pointer] = runtime.cupy_stream(pointer, cupy, device_id)
        return found

    return ctx


def _kernel(engine: CudaFFTEngine, plan: _Plan, chosen: Schedule, copy_back: bool, handles: list[int],
            last: list[Any], direction: str, cupy: Any, applies: Mapping[str, ApplyKernel] | None = None
            ) -> Callable[..., Any]:
    """The hot path ``run(x, out)`` of one direction (``out`` is ``x`` for in-place plans);
    ``applies``: the elementwise fallback kernels of the callbacks (cuFFT's plans then have none)."""
    layout = plan.layout
    kind = layout.kind
    real_size, complex_size = _ITEMSIZE[plan.precision]
    half = plan.half
    conj_in = kind == "c2r" and direction == "forward"  # hfft = irfft(conj(a))
    conj_out = kind == "r2c" and direction == "inverse"  # ihfft = conj(rfft(a))
    # a prolog callback conjugates its own result, an epilog callback conjugates and scales its argument
    prolog, epilog = "prolog" in engine.callbacks, "epilog" in engine.callbacks
    conj_in, conj_out = conj_in and not prolog, conj_out and not epilog
    sign = cufft.INVERSE if kind == "c2r" or (kind == "c2c" and direction == "inverse") else cufft.FORWARD
    scale = 1.0 if epilog else scale_factor(layout, direction)
    region = tuple(slice(0, n) for n in plan.region)
    crop = plan.crop
    x_size = real_size if kind == "r2c" else complex_size
    y_size = real_size if kind == "c2r" else complex_size
    sizes = {"x": x_size, "y": y_size}
    execute = cufft.LIB.cufftXtExec
    set_stream = cufft.LIB.cufftSetStream
    calls = [
        (handle, step.source, step.target, [(i * sizes[step.source], o * sizes[step.target])
                                             for i, o in step.many.offsets()])
        for handle, step in zip(handles, chosen.steps)
    ]
    stage = _stager(plan, chosen.x_order, conj_in, cupy) if chosen.x_order is not None else None
    new_y, finish = _result(plan, chosen.y_order, cupy)
    in_place = chosen.y_order is None
    ctx = _stream_context(engine, cupy)
    stream = engine.stream
    device = cupy.cuda.Device(engine.device_id)
    half_input = half and kind != "r2c"
    out_dtype = layout.out_dtype
    multiply, conjugate = cupy.multiply, cupy.conjugate
    applies = applies or {}
    pro, epi = applies.get("prolog"), applies.get("epilog")
    # the prolog kernel writes in place into a buffer of the engine's own (staged, or the in-place
    # result), else into scratch laid out like the operand (which stays untouched)
    pro_in_place = stage is not None or in_place
    empty = cupy.empty

    def transform(x: Any, s: int) -> Any:
        if s != last[0]:
            for handle in handles:
                set_stream(handle, s)
            last[0] = s
        xb = stage(x) if stage is not None else (x[region] if crop else x)
        x_pointer = xb.data.ptr
        if pro is not None:
            if pro_in_place:
                pro(x_pointer, x_pointer, s)
            else:
                scratch = empty(pro.span, layout.in_dtype)
                pro(x_pointer, scratch.data.ptr, s)
                x_pointer = scratch.data.ptr
        if in_place:
            y = yb = xb
        elif not calls:  # every length is 1: the transform is a copy
            y = _logical(xb, chosen.x_order, half_input).astype(out_dtype)
        else:
            yb = new_y()
        if calls:
            pointers = {"x": x_pointer, "y": yb.data.ptr}
            for handle, source, target, offsets in calls:
                p_in, p_out = pointers[source], pointers[target]
                for o_in, o_out in offsets:
                    execute(handle, p_in + o_in, p_out + o_out, sign)
            if epi is not None:  # in place on the buffer the last plan wrote
                result = pointers[calls[-1][2]]
                epi(result, result, s)
            if not in_place:
                y = finish(yb)
        if conj_out:
            conjugate(y, out=y)
        if scale != 1.0:
            multiply(y, scale, out=y)
        if copy_back:
            x[...] = y
            return x
        return y

    def run(x: Any, out: Any = None) -> Any:
        s = stream()
        with device:
            if ctx is None:
                return transform(x, s)
            with ctx(s):
                return transform(x, s)

    if not engine.host:
        return run
    upload, download, contiguous = cupy.asarray, cupy.asnumpy, np.ascontiguousarray

    def run_host(x: Any, out: Any = None) -> Any:
        s = stream()
        with device:
            with (ctx(s) if ctx is not None else contextlib.nullcontext()):
                result = download(transform(upload(contiguous(x)), s))
        if plan.inplace:
            np.copyto(x, result)
            return x
        return result

    return run_host


def _logical(buffer: Any, order: tuple[int, ...] | None, half_complex: bool) -> Any:
    """A staged buffer seen in the logical axis order (half complex as complex64)."""
    if order is None:
        return buffer
    inv = inverse_order(order)
    if half_complex:
        return buffer.astype(np.float32).view(np.complex64)[..., 0].transpose(inv)
    return buffer.transpose(inv)


def _stager(plan: _Plan, order: tuple[int, ...], conj: bool, cupy: Any) -> Callable[[Any], Any]:
    """``stage(x)``: a fresh dense buffer in memory ``order`` holding the operand's region
    (zero-padded, converted to cuFFT's input type; conjugated for hfft)."""
    layout = plan.layout
    shape = tuple(layout.in_shape[a] for a in order)
    inv = inverse_order(order)
    region = tuple(slice(0, n) for n in plan.region)
    half_complex = plan.x_type is None
    real_source = plan.x_dtype.kind != "c"
    zeros, empty = cupy.zeros, cupy.empty
    fill = zeros if plan.pad or (half_complex and real_source) else empty
    if half_complex:
        axes = inv + (len(order),)

        def stage_half(x: Any) -> Any:
            buffer = fill(shape + (2,), np.float16)
            view = buffer.transpose(axes)
            source = x[region]
            if real_source:
                view[region + (0,)] = source
            else:
                view[region + (0,)] = source.real
                view[region + (1,)] = source.imag
                if conj:
                    imag = view[..., 1]
                    cupy.negative(imag, out=imag)
            return buffer

        return stage_half
    dtype = plan.x_type

    def stage(x: Any) -> Any:
        buffer = fill(shape, dtype)
        view = buffer.transpose(inv)
        view[region] = x[region]
        if conj:
            cupy.conjugate(view, out=view)
        return buffer

    return stage


def _result(plan: _Plan, order: tuple[int, ...] | None, cupy: Any) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """``new()``: a fresh result buffer in memory ``order``; ``finish(buffer)``: the result in the
    logical axis order and the result dtype (half precision converted)."""
    layout = plan.layout
    if order is None:
        return (lambda: None), (lambda buffer: buffer)
    shape = tuple(layout.out_shape[a] for a in order)
    inv = inverse_order(order)
    identity = inv == tuple(range(len(inv)))
    empty = cupy.empty
    if not plan.half:
        dtype = layout.out_dtype
        if identity:
            return (lambda: empty(shape, dtype)), (lambda buffer: buffer)
        return (lambda: empty(shape, dtype)), (lambda buffer: buffer.transpose(inv))
    if layout.kind == "c2r":
        return (lambda: empty(shape, np.float16)), (lambda buffer: buffer.astype(np.float32).transpose(inv))
    return (
        (lambda: empty(shape + (2,), np.float16)),
        (lambda buffer: buffer.astype(np.float32).view(np.complex64)[..., 0].transpose(inv)),
    )

