"""The cuBLASLt matmul hot path: ``kernel(a, b, c, inputs, out)`` on CuPy operands.

:func:`build_kernel` closes over everything planning fixed (descriptors, algorithm, workspace,
alpha/beta buffers, expected strides) so a call does only: check the operand strides, allocate
the result through the operand package, set the bias/aux pointers that changed, and make one
``cublasLtMatmul`` call on the stream. No synchronisation. Plain products (no ``c``, no
epilogue buffers, C-ordered result) take a specialised closure with nothing else in it.

Aux buffers follow cuBLASLt's layouts: the ReLU mask is one bit per element of D, columns ``ld``
bits apart (``ld`` a multiple of 128), read here as bit ``r % 8`` of byte ``r // 8`` of its column
(the header gives the bit layout, not the order within a byte: tests/gpu checks it against
``z > 0``); it is unpacked to (or packed from) the boolean array nvmathpy's epilogue convention
uses. The GELU pre-activation has a leading dimension padded to a multiple of 8; aux outputs are
returned C-contiguous (a copy without the padding when there is any), the layout the torch
operator's fake implementation reports. Operands whose layout needs a copy are copied on the
plan's stream, like every other piece of work of a call. FP8 products set their A/B scale pointers (float32 device
scalars) per call like the bias; their D has the result dtype.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ....cuda.bindings import cublaslt
from ....cuda.bindings.cublaslt import MatmulDescAttribute as Desc
from ....cuda.runtime import cupy_stream, import_cupy
from ....errors import OperandMismatchError
from ._lt_spec import LtSpec, scalar_bytes

__all__ = ["Launch", "build_kernel", "plan_stream_context", "ALIGNMENT"]

#: cuBLASLt's default guaranteed alignment of A, B, C and D; other pointers take a relaxed algorithm.
ALIGNMENT = 256


@dataclass
class Launch:
    """What one prepared candidate launches with.

    Attributes
    ----------
    handle, desc, a, b, d
        cuBLASLt handle, matmul descriptor and layouts.
    algo : cublaslt.MatmulAlgo
        The chosen algorithm.
    workspace : int
        Device address of the workspace; ``workspace_bytes`` its size.
    relaxed : callable
        ``relaxed(alignments) -> (algo, workspace, workspace_bytes)`` for operand pointers less
        aligned than :data:`ALIGNMENT` (cached by the caller).
    stream : callable
        Returns the ``cudaStream_t`` of this call.
    explicit_stream : int or None
        The ``stream=`` the plan was given (``None``: the package's current stream).
    package : str
        The operands' package (``"cupy"``, ``"torch"`` or ``"dlpack"``).
    device_id : int
    raw_storage : bool
        Allocate CuPy results of dtypes CuPy lacks (bfloat16, FP8) as their raw storage
        (:data:`STORAGE`): for host operands, whose results are viewed back on the host.
    """

    handle: int
    desc: int
    a: int
    b: int
    d: int
    algo: Any
    workspace: int
    workspace_bytes: int
    relaxed: Callable[[tuple[int, int, int, int]], tuple[Any, int, int]]
    stream: Callable[[], int]
    explicit_stream: int | None
    package: str
    device_id: int
    raw_storage: bool = False


def _alignment(pointer: int) -> int:
    return min(ALIGNMENT, pointer & -pointer) if pointer else ALIGNMENT


def _numpy_dtype(name: str) -> np.dtype:
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


#: Raw storage of the dtypes CuPy has no type for (results of host-operand plans are viewed back).
STORAGE = {"bfloat16": np.dtype(np.uint16), "float8_e4m3fn": np.dtype(np.uint8), "float8_e5m2": np.dtype(np.uint8)}


def _cupy_dtype(name: str, raw: bool) -> np.dtype:
    """The dtype CuPy allocates ``name`` with: its raw storage when ``raw`` and CuPy lacks it."""
    return STORAGE[name] if raw and name in STORAGE else _numpy_dtype(name)


def _allocator(spec: LtSpec, launch: Launch, cupy: Any) -> Callable[[], tuple[Any, int]]:
    """``new() -> (array, address)``: an uninitialised D from the operand package's allocator."""
    shape = spec.d_shape
    if launch.package == "torch":
        torch = sys.modules["torch"]
        empty, dtype, device = torch.empty, getattr(torch, spec.out_dtype), torch.device("cuda", launch.device_id)
        if launch.explicit_stream is None:
            def new_torch() -> tuple[Any, int]:
                d = empty(shape, dtype=dtype, device=device)
                return d, d.data_ptr()

            return new_torch
        # the caching allocator hands memory out per stream: tell it our stream uses D too
        ours = torch.cuda.ExternalStream(launch.explicit_stream, device=device)

        def new_torch_on_stream() -> tuple[Any, int]:
            d = empty(shape, dtype=dtype, device=device)
            d.record_stream(ours)
            return d, d.data_ptr()

        return new_torch_on_stream
    # the ndarray constructor itself (what cupy.empty calls), with the dtype object resolved once
    empty, dtype = cupy.ndarray, np.dtype(_cupy_dtype(spec.out_dtype, launch.raw_storage))

    def new_cupy() -> tuple[Any, int]:
        d = empty(shape, dtype)
        return d, d.data.ptr

    return new_cupy


def _finisher(spec: LtSpec) -> Callable[[Any], Any] | None:
    """D (as allocated) -> the result as NumPy's matmul shapes it; ``None`` when D is it already."""
    if spec.order == "C":
        return None
    full = spec.batch_shape + (spec.m, spec.n)
    result = spec.result_shape
    if full == result:
        return lambda d: d.swapaxes(-1, -2)
    return lambda d: d.swapaxes(-1, -2).reshape(result)


def _copier(which: str, mode: str | None, shape: tuple[int, ...] | None, cupy: Any) -> Callable[[Any], Any]:
    """What an operand whose strides differ from the planned ones becomes: a C/F-contiguous copy,
    a copy broadcast to the full batch (``"expand"``), or an error when the plan needs its layout."""
    if mode == "expand":
        return lambda x: cupy.ascontiguousarray(cupy.broadcast_to(x, shape))
    if mode == "C":
        return cupy.ascontiguousarray
    if mode == "F":  # each matrix column-major, batches C-ordered (what _lt_spec plans for "F")
        return lambda x: cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)

    def refuse(x: Any) -> Any:
        raise OperandMismatchError(
            f"matmul (cuda): {which} has strides {x.strides}, not those the plan was made for; "
            "plan again for the new layout"
        )

    return refuse


@dataclass
class _Fixed:
    """What both kernels close over (built once per prepared candidate)."""

    a_strides: tuple[int, ...]
    b_strides: tuple[int, ...]
    copy_a: Callable[[Any], Any]
    copy_b: Callable[[Any], Any]
    scalars: tuple[Any, Any]
    new_d: Callable[[], tuple[Any, int]]
    algorithm: Callable[[int, int, int, int], tuple[Any, int, int]]
    fixed_ctx: Any
    on_stream: Callable[[], Any]

    @property
    def alpha_p(self) -> int:
        return ctypes.addressof(self.scalars[0])

    @property
    def beta_p(self) -> int:
        return ctypes.addressof(self.scalars[1])


def plan_stream_context(package: str, stream: Callable[[], int], fixed_ctx: Any, cupy: Any) -> Callable[[], Any]:
    """``on_stream()``: a context in which CuPy work (operand copies, buffers) lands on the plan's
    stream: ``fixed_ctx`` (the explicit ``stream=``, if any), torch's current stream for torch
    operands, else CuPy's current stream (which is the plan's: no change)."""
    if fixed_ctx is not None:
        return lambda: fixed_ctx
    if package == "torch":
        return lambda: cupy_stream(stream(), cupy)
    return contextlib.nullcontext


def _fixed(spec: LtSpec, launch: Launch, cupy: Any) -> _Fixed:
    item = spec.itemsize
    fixed_ctx = (cupy_stream(launch.explicit_stream, cupy, launch.device_id)
                 if launch.explicit_stream is not None else None)
    default = (ctypes.byref(launch.algo), launch.workspace, launch.workspace_bytes)
    relaxed_cache: dict[tuple[int, int, int, int], tuple[Any, int, int]] = {}

    def algorithm(p1: int, p2: int, pc: int, pd: int) -> tuple[Any, int, int]:
        if not (p1 | p2 | pc | pd) & (ALIGNMENT - 1):
            return default
        key = (_alignment(p1), _alignment(p2), _alignment(pc), _alignment(pd))
        found = relaxed_cache.get(key)
        if found is None:
            algo, workspace, size = launch.relaxed(key)
            found = relaxed_cache[key] = (ctypes.byref(algo), workspace, size)
        return found

    return _Fixed(
        a_strides=tuple(s * item for s in spec.a_strides),
        b_strides=tuple(s * item for s in spec.b_strides),
        copy_a=_copier("a", spec.a_copy, spec.expand.get("a"), cupy),
        copy_b=_copier("b", spec.b_copy, spec.expand.get("b"), cupy),
        scalars=(ctypes.create_string_buffer(scalar_bytes(spec.alpha, spec.scale_type)),
                 ctypes.create_string_buffer(scalar_bytes(spec.beta, spec.scale_type))),
        new_d=_allocator(spec, launch, cupy),
        algorithm=algorithm,
        fixed_ctx=fixed_ctx,
        on_stream=plan_stream_context(launch.package, launch.stream, fixed_ctx, cupy),
    )


def build_kernel(spec: LtSpec, launch: Launch) -> Callable[..., Any]:
    """The hot-path ``kernel(a, b, c, inputs, out)`` for ``spec`` (see the module docstring)."""
    cupy = import_cupy()
    fixed = _fixed(spec, launch, cupy)
    plain = spec.bias is None and spec.aux is None and spec.bgrad is None and spec.c_mode == "none" \
        and spec.order == "C" and not spec.scales
    kernel = (_plain_kernel if plain else _general_kernel)(spec, launch, cupy, fixed)
    kernel.fixed = fixed  # type: ignore[attr-defined]  # keeps the alpha/beta buffers alive
    return kernel


def _bound(spec: LtSpec, launch: Launch, fixed: _Fixed) -> tuple:
    """Everything a kernel reads per call, as a tuple to unpack into the builder's locals (fast lookups)."""
    return (cublaslt.LIB.cublasLtMatmul, launch.stream, launch.handle, launch.desc, launch.a, launch.b, launch.d,
            fixed.a_strides, fixed.b_strides, fixed.copy_a, fixed.copy_b, fixed.alpha_p, fixed.beta_p,
            fixed.algorithm, fixed.new_d, fixed.fixed_ctx, fixed.on_stream, spec.lt.swapped)


def _plain_kernel(spec: LtSpec, launch: Launch, cupy: Any, fixed: _Fixed) -> Callable[..., Any]:
    """No ``c``, no epilogue buffers, C-ordered result: the shortest path."""
    (matmul, stream, handle, desc, la, lb, ld, a_strides, b_strides, copy_a, copy_b, alpha_p, beta_p, algorithm,
     new_d, fixed_ctx, on_stream, swapped) = _bound(spec, launch, fixed)

    def kernel(a: Any, b: Any, c: Any, inputs: Any, out: Any) -> Any:
        if a.strides != a_strides or b.strides != b_strides:
            with on_stream():  # the copies are read by the product on the plan's stream
                if a.strides != a_strides:
                    a = copy_a(a)
                if b.strides != b_strides:
                    b = copy_b(b)
        if out is not None:
            d, pd = out, out.data.ptr
        elif fixed_ctx is None:
            d, pd = new_d()
        else:
            with fixed_ctx:
                d, pd = new_d()
        p1, p2 = (b.data.ptr, a.data.ptr) if swapped else (a.data.ptr, b.data.ptr)
        algo, workspace, size = algorithm(p1, p2, pd, pd)
        matmul(handle, desc, alpha_p, p1, la, p2, lb, beta_p, pd, ld, pd, ld, algo, workspace, size, stream())
        return d

    return kernel


def _pointer_setter(desc: int) -> Callable[[int, int], None]:
    """``set(attr, address)`` for the descriptor's pointer attributes, skipping unchanged values."""
    set_attribute = cublaslt.LIB.cublasLtMatmulDescSetAttribute
    buffer = ctypes.c_void_p()
    ref, size = ctypes.byref(buffer), ctypes.sizeof(buffer)
    last: dict[int, int] = {}

    def set_pointer(attr: int, address: int) -> None:
        if last.get(attr) != address:
            buffer.value = address
            set_attribute(desc, attr, ref, size)
            last[attr] = address

    return set_pointer


def _general_kernel(spec: LtSpec, launch: Launch, cupy: Any, fixed: _Fixed) -> Callable[..., Any]:
    """Every other case: ``c``, bias, aux in/out, bias gradients, F-ordered results."""
    (matmul, stream, handle, desc, la, lb, ld, a_strides, b_strides, copy_a, copy_b, alpha_p, beta_p, algorithm,
     new_d, fixed_ctx, on_stream, swapped) = _bound(spec, launch, fixed)
    set_pointer = _pointer_setter(desc)
    finish = _finisher(spec)
    dtype = _cupy_dtype(spec.out_dtype, launch.raw_storage)
    batch = spec.batch_shape
    scales = tuple((getattr(Desc, attr), name) for attr, name in spec.scales)
    as_cupy = cupy.from_dlpack if launch.package == "torch" else (lambda x: x)
    bias, aux, bgrad, c_mode = spec.bias, spec.aux, spec.bgrad, spec.c_mode
    bit_shifts = cupy.arange(8, dtype=cupy.uint8)
    bit_weights = cupy.asarray([1 << i for i in range(8)], dtype=cupy.uint8)

    def result_view(d: Any) -> Any:
        return d if finish is None else finish(d)

    def bias_vector(x: Any) -> Any:
        if x.shape != bias.vector_shape:
            x = x.reshape(bias.vector_shape)
        if bias.expand_to is not None:
            x = cupy.broadcast_to(x, bias.expand_to)
        return x if x.flags.c_contiguous else cupy.ascontiguousarray(x)

    def aux_matrices(x: Any) -> Any:
        """A result-shaped array as D's matrices: ``(batch, cols, rows)`` of cuBLASLt's D."""
        full = x.reshape(batch + (spec.m, spec.n))
        return full if spec.order == "C" else full.swapaxes(-1, -2)

    def aux_input(x: Any) -> Any:
        matrices = aux_matrices(x)
        if aux.kind == "gelu":
            padded = cupy.zeros(batch + (aux.cols, aux.ld), dtype)
            padded[..., : aux.rows] = matrices
            return padded
        bits = cupy.zeros(batch + (aux.cols, aux.ld), cupy.uint8)
        bits[..., : aux.rows] = matrices
        return (bits.reshape(batch + (aux.cols, aux.ld // 8, 8)) * bit_weights).sum(axis=-1, dtype=cupy.uint8)

    def aux_output(buffer: Any) -> Any:
        if aux.kind == "relu":
            bits = (buffer[..., None] >> bit_shifts) & 1
            buffer = bits.reshape(batch + (aux.cols, aux.ld)).astype(cupy.bool_)
        view = buffer[..., : aux.rows]
        view = view if spec.order == "C" else view.swapaxes(-1, -2)
        return cupy.ascontiguousarray(view.reshape(spec.result_shape))

    def kernel(a: Any, b: Any, c: Any, inputs: Any, out: Any) -> Any:
        with on_stream():
            if a.strides != a_strides:
                a = copy_a(a)
            if b.strides != b_strides:
                b = copy_b(b)
            if out is not None and spec.order == "C":
                d, pd = out, out.data.ptr
            else:
                d, pd = new_d()
            pc = pd
            if c_mode == "direct":
                c = c if c.flags.c_contiguous else cupy.ascontiguousarray(c)
                pc = c.data.ptr
            elif c_mode == "copy":
                result_view(as_cupy(d))[...] = c
            for attr, name in scales:  # FP8: per-tensor scales, float32 on the device
                set_pointer(attr, inputs[name].data.ptr)
            if bias is not None:
                vector = bias_vector(inputs["bias"])
                set_pointer(Desc.BIAS_POINTER, vector.data.ptr)
            extra = {}
            if aux is not None:
                if aux.direction == "in":
                    buffer = aux_input(inputs[f"{aux.kind}_aux"])
                elif aux.kind == "gelu":
                    buffer = cupy.empty(batch + (aux.cols, aux.ld), dtype)
                else:
                    buffer = cupy.empty(batch + (aux.cols, aux.ld // 8), cupy.uint8)
                set_pointer(Desc.EPILOGUE_AUX_POINTER, buffer.data.ptr)
            if bgrad is not None:
                gradient = cupy.empty(batch + (bgrad[1],), dtype)
                set_pointer(Desc.BIAS_POINTER, gradient.data.ptr)
                extra[bgrad[0]] = gradient
            p1, p2 = (b.data.ptr, a.data.ptr) if swapped else (a.data.ptr, b.data.ptr)
            algo, workspace, size = algorithm(p1, p2, pc, pd)
            matmul(handle, desc, alpha_p, p1, la, p2, lb, beta_p, pc, ld, pd, ld, algo, workspace, size, stream())
            result = result_view(d)
            if aux is not None and aux.direction == "out":
                extra[f"{aux.kind}_aux"] = aux_output(buffer)
            if out is not None and spec.order != "C":
                out[...] = as_cupy(result)
                result = out
        return (result, extra) if extra else result

    return kernel
