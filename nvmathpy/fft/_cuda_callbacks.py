"""FFT callbacks on CUDA: compiled for each plan's buffer layout and attached to cuFFT plans as
JIT-LTO callbacks, or, where cuFFT refuses such a plan, run as elementwise kernels around the FFT.

:func:`make_plan` creates a cuFFT plan with callbacks attached; :func:`attacher` compiles the
engine's callbacks for a plan's schedule and hands out, per direction and exec call, what
``cufftXtSetJITCallback`` takes; :func:`elementwise_kernels` and :func:`load_apply` build the
fallback (the same device functions called by a generated kernel over every element, on the
plan's stream). The choice between the two ways is :class:`~nvmathpy.fft._cuda_engine.CudaFFTEngine`'s.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Mapping

import numpy as np

from ..cuda import runtime
from ..cuda.bindings import cufft
from ..cuda.bindings.library_types import DataType
from ..kernels import fft_callbacks
from ..kernels.fft_callback_layout import callback_layout, peel_order
from ._cuda_layout import Schedule, dense_strides
from ._layout import scale_factor

__all__ = ["ApplyKernel", "attacher", "callback_buffers", "elementwise_kernels", "load_apply", "make_plan"]

#: cuFFT data types by precision: (real, complex).
_TYPES = {
    "half": (DataType.R_16F, DataType.C_16F),
    "single": (DataType.R_32F, DataType.C_32F),
    "double": (DataType.R_64F, DataType.C_64F),
}


def make_plan(step_kind: str, many: Any, precision: str, callbacks: tuple = ()) -> tuple[int, int]:
    """Create one cuFFT plan (auto-allocation off) for ``many``, with LTO ``callbacks``
    (``(role, LTO-IR, callback type, callerInfo device pointer, symbol name or None)``) attached
    before planning; return ``(handle, work bytes)``."""
    real, cplx = _TYPES[precision]
    itype = real if step_kind == "r2c" else cplx
    otype = real if step_kind == "c2r" else cplx
    handle = cufft.create()
    try:
        cufft.LIB.cufftSetAutoAllocation(handle, 0)
        for _role, ltoir, kind, info, name in callbacks:
            # name None: cuFFT links its default C++ callback name, which the source defines
            cufft.LIB.cufftXtSetJITCallback(handle, name, ltoir, len(ltoir), kind, (ctypes.c_void_p * 1)(info))
        size = ctypes.c_size_t()

        def dims(values: tuple[int, ...]) -> Any:
            return (ctypes.c_int64 * len(values))(*values)

        cufft.LIB.cufftXtMakePlanMany(
            handle, many.rank, dims(many.n), dims(many.inembed), many.istride, many.idist, itype,
            dims(many.onembed), many.ostride, many.odist, otype, many.batch, ctypes.byref(size), cplx,
        )
    except BaseException:
        cufft.LIB.cufftDestroy(handle)
        raise
    return handle, size.value


def callback_buffers(plan: Any, chosen: Schedule, callbacks: Mapping[str, Any]
                      ) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """Per callback role, ``(peel order, element strides)`` of the buffer its callback reads or
    writes (prolog: the engine input, epilog: the result); ``None`` when ``chosen`` cannot run the
    callbacks (no plan, a first/last plan of several exec calls, offsets that do not map back)."""
    steps = chosen.steps
    if not steps:
        return None
    layout = plan.layout
    x_strides = plan.x_strides if chosen.x_order is None else dense_strides(layout.in_shape, chosen.x_order)
    buffers = {}
    if "prolog" in callbacks:
        if steps[0].many.calls != 1:
            return None
        buffers["prolog"] = (layout.in_shape, tuple(x_strides))
    if "epilog" in callbacks:
        if steps[-1].many.calls != 1:
            return None
        y_strides = x_strides if chosen.y_order is None else dense_strides(layout.out_shape, chosen.y_order)
        buffers["epilog"] = (layout.out_shape, tuple(y_strides))
    found = {}
    for role, (shape, strides) in buffers.items():
        order = peel_order(shape, strides)
        if order is None:
            return None
        found[role] = (order, strides)
    return found


def attacher(engine: Any, plan: Any, chosen: Schedule, cupy: Any, keep: list[Any],
              naming: str | None = "default") -> Callable[[str, int, int], tuple]:
    """Compile the engine's callbacks for the device and upload their inputs (into ``keep``);
    return ``attach(direction, step index, step count)``: the callbacks of that plan, each as
    ``(role, LTO-IR, callback type, callerInfo device pointer, symbol name)`` - the name ``None``
    for ``naming="default"`` (cuFFT's default callback name), the function's name for ``"named"``;
    ``naming=None``: no LTO-IR (the elementwise fallback). ``attach.kernels`` holds, per role,
    the kernel (its layout is its buffer's: for the elementwise fallback).

    Each callback's source is specialised to its buffer's layout and its array inputs' strides
    (:func:`~nvmathpy.kernels.fft_callback_layout.callback_layout`), which the plan fixes; the
    ``callerInfo`` structs hold the inputs' device pointers, the scalars, and per direction the
    normalisation and conjugation."""
    layout = plan.layout
    buffers = callback_buffers(plan, chosen, engine.callbacks)
    arch = f"sm_{int(cupy.cuda.Device(engine.device_id).compute_capability)}"
    compiled = {}
    for role, (expr, inputs) in engine.callbacks.items():
        _, strides = buffers[role]
        arrays, input_strides, scalars = {}, {}, {}
        for name, value in inputs.items():
            if isinstance(value, np.ndarray):
                device = cupy.asarray(np.ascontiguousarray(value))
                keep.append(device)
                arrays[name] = device.data.ptr
                input_strides[name] = [s // device.itemsize if n > 1 else 0
                                       for n, s in zip(device.shape, device.strides)]
            else:
                scalars[name] = value
        shape, dtype = (layout.in_shape, layout.in_dtype) if role == "prolog" else (layout.out_shape, layout.out_dtype)
        buffer = callback_layout(shape, strides, layout.axes[-1], inputs=input_strides,
                                               limits=plan.region if role == "prolog" and plan.pad else None)
        kernel = fft_callbacks.callback_kernel(expr, role, dtype.name, buffer)
        ltoir = fft_callbacks.compile_callback(kernel, arch).code if naming else b""
        compiled[role] = (kernel, ltoir, arrays, scalars)

    def attach(direction: str, index: int, count: int) -> tuple:
        found = []
        for role, (kernel, ltoir, arrays, scalars) in compiled.items():
            if index != (0 if role == "prolog" else count - 1):
                continue
            if role == "prolog":  # hfft = irfft(conj(a)): the prolog sees a, cuFFT its conjugate
                extra = {"conj": layout.kind == "c2r" and direction == "forward"}
            else:  # ihfft = conj(rfft(a)), normalised before the epilog
                extra = {"scale": scale_factor(layout, direction),
                         "conj": layout.kind == "r2c" and direction == "inverse"}
            info = fft_callbacks.caller_info(kernel, arrays=arrays, scalars=scalars, **extra)
            device = cupy.asarray(np.frombuffer(bytes(info), np.uint8))
            keep.append(device)
            name = kernel.symbol.encode() if naming == "named" else None
            found.append((role, ltoir, kernel.callback_type, device.data.ptr, name))
        return tuple(found)

    attach.kernels = {role: kernel for role, (kernel, _, _, _) in compiled.items()}
    return attach


class ApplyKernel:
    """One role's elementwise fallback kernel: ``apply(src, dst, stream)`` over its buffer's
    ``count`` elements (device pointers; the kernel has the count built in, the launch sizes its
    grid by it); ``span`` is the buffer's extent in elements."""

    def __init__(self, launch: Callable[[int, int, int, int, int], None], info: int, count: int, span: int):
        self._launch, self.info, self.count, self.span = launch, info, count, span

    def __call__(self, src: int, dst: int, stream: int) -> None:
        self._launch(src, dst, self.info, self.count, stream)


def elementwise_kernels(engine: Any, attach: Any, direction: str, steps: int) -> dict[str, ApplyKernel]:
    """The fallback kernels of one direction, by role, with that direction's callerInfo."""
    infos = {role: info for index in {0, steps - 1} for role, _, _, info, _ in attach(direction, index, steps)}
    found = {}
    for role, kernel in attach.kernels.items():
        source = fft_callbacks.apply_source(kernel)
        found[role] = ApplyKernel(load_apply(source, engine.device_id), infos[role], kernel.layout.count,
                             kernel.layout.span)
    return found


_LOADED: dict[tuple[str, int], Callable[..., None]] = {}
#: Threads per block of the fallback kernels (a grid-stride loop covers any count).
_BLOCK = 256


def load_apply(source: str, device_id: int) -> Callable[[int, int, int, int, int], None]:
    """``launch(src, dst, info, count, stream)`` of an :func:`~nvmathpy.kernels.fft_callbacks.apply_source`
    kernel (``count``: its element count, which sizes the grid): compiled by NVRTC to a cubin for the
    device's architecture, loaded once per process."""
    key = (source, device_id)
    found = _LOADED.get(key)
    if found is not None:
        return found
    cupy = runtime.import_cupy()
    driver = cupy.cuda.driver
    with cupy.cuda.Device(device_id):
        arch = f"sm_{int(cupy.cuda.Device(device_id).compute_capability)}"
        module = driver.moduleLoadData(fft_callbacks.compile_apply(source, arch).code)
        function = driver.moduleGetFunction(module, fft_callbacks.APPLY_NAME)
    launch_kernel = driver.launchKernel

    def launch(src: int, dst: int, info: int, count: int, stream: int) -> None:
        args = (ctypes.c_void_p(src), ctypes.c_void_p(dst), ctypes.c_void_p(info))
        argv = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
        blocks = max(1, min(-(-count // _BLOCK), 1 << 16))
        launch_kernel(function, blocks, 1, 1, _BLOCK, 1, 1, 0, stream, ctypes.addressof(argv), 0)

    return _LOADED.setdefault(key, launch)
