"""Custom (traced Python) epilogues on the CUDA matmul engine.

A custom epilogue reaches the GPU in one of three ways:

- it is exactly one of cuBLASLt's own epilogues (:mod:`.._custom_match`): the cuBLASLt
  candidates of that native epilogue (label ``"cublaslt"``, with ``native`` and ``bias`` naming
  the epilogue and the input that is its bias);
- otherwise two kinds of candidates, interleaved so ``autotune(effort="measure")`` times both:
  ``"cublaslt+elementwise"``, cuBLASLt's product (one candidate per heuristic algorithm) and then
  the generated elementwise kernel (:mod:`nvmathpy.kernels.elementwise`) applying the whole
  epilogue to the result in one in-place pass; and ``"generated-gemm"``, the fused tiled GEMM
  (:mod:`nvmathpy.kernels.gemm_tiled`, tensor cores for float16/bfloat16 on sm_80 and newer: ``nvcuda::wmma``,
  or inline-PTX ``mma.sync`` where ``mma.h`` cannot be compiled),
  one candidate per tile configuration, applying the epilogue in registers before the store.

Generated kernels are compiled with NVRTC for the device's own architecture (through the
on-disk kernel cache), loaded and launched with CuPy's driver API (``moduleLoadData``,
``launchKernel``) on the engine's stream, with the argument packing of
:mod:`nvmathpy.kernels.launch`. Epilogue inputs are read in place through their strides (0 where
they broadcast); scalar inputs are read from device memory too, so a call never synchronises.
The epilogue runs in float32 for float16/bfloat16 results (float64 for float64); in the
``"cublaslt+elementwise"`` candidate the product is rounded to the result dtype before the
epilogue reads it, as with any unfused epilogue.
"""

from __future__ import annotations

import ctypes
import logging
import math
import sys
import threading
from typing import Any, Callable, Mapping, Sequence

from ....cuda.runtime import cupy_stream, import_cupy
from ....errors import InvalidOperandError, InvalidOptionError
from ....kernels.elementwise import elementwise_kernel
from ....kernels.gemm_tiled import MMA_CONFIGS, SIMT_CONFIGS, VARIANT_HEADERS, gemm_kernel, variant_compilable
from ....kernels.ir import Expr, input_, inputs_of, substitute
from ....kernels.launch import ArrayRef, epilogue_values, pack_arguments
from ....plan import Candidate, Prepared, Problem
from .._resolved import ResolvedEpilogue

__all__ = ["ELEMENTWISE", "TILED", "HALF_VARIANT", "KERNEL_DTYPES", "CustomPrepared", "aligned_shape",
           "device_arch", "elementwise_call", "gpu_expression", "interleave", "load_function", "builtin_problem",
           "native_match", "native_call", "PTX_VARIANT", "tiled_call", "tiled_candidates", "vector_width"]

ELEMENTWISE, TILED = "cublaslt+elementwise", "generated-gemm"
#: Result dtypes the generated kernels take.
KERNEL_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: The fused kernel's float16/bfloat16 variant (the tests' host emulation runs its scalar twin).
HALF_VARIANT = "wmma"
#: The float16/bfloat16 variant used where :data:`HALF_VARIANT`'s headers are missing (inline PTX).
PTX_VARIANT = "mma"
#: Threads per block of the elementwise kernel, and the most blocks of its grid-stride loop.
THREADS, MAX_BLOCKS = 256, 65535
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_NO_INPUTS: Mapping[str, Any] = {}
_LOG = logging.getLogger("nvmathpy")


# -- problems and matching ---------------------------------------------------------------------------


def builtin_problem(problem: Problem, epilogue: str | None, inputs: Mapping[str, Any]) -> Problem:
    """``problem`` with a built-in (or no) epilogue in place of the custom one."""
    fields = problem.as_dict()["fields"]
    fields["epilogue"], fields["inputs"] = epilogue, dict(inputs)
    return Problem.of("matmul", **fields)


def native_match(problem: Problem, epilogue: ResolvedEpilogue) -> ResolvedEpilogue | None:
    """The built-in epilogue the custom ``epilogue`` is exactly, as cuBLASLt runs it (its
    :attr:`~.._resolved.ResolvedEpilogue.native`; the activations for real dtypes only), or ``None``."""
    native = epilogue.native
    if native is None or (problem.get("dtype").startswith("complex") and native.name != "bias"):
        return None
    return native


def gpu_expression(expr: Expr) -> Expr:
    """``expr`` with scalar inputs read from memory (broadcast matrices) instead of by value, so a
    device-resident scalar needs no copy to the host."""
    scalars = {name: input_(name, "matrix") for name, kind in inputs_of(expr).items() if kind == "scalar"}
    return substitute(expr, scalars) if scalars else expr


def vector_width(dtype: str, n: int) -> int:
    """Elements per thread of the elementwise kernel: the widest 16-byte-or-less pack dividing ``n``."""
    for vector in (8, 4, 2):
        if vector * _ITEMSIZE[dtype] <= 16 and n % vector == 0:
            return vector
    return 1


def _trans(shape: Sequence[int], strides: Sequence[int] | None) -> bool:
    """Whether an operand's matrices are stored transposed (unit stride along their rows)."""
    if strides is None or len(shape) < 2:
        return False
    (rows, cols), (sr, sc) = shape[-2:], strides[-2:]
    if sc == 1 or cols == 1:
        return False
    return sr == 1 or rows == 1


def tiled_candidates(problem: Problem, arch: int) -> list[Candidate]:
    """The fused-kernel candidates: one per tile configuration the dtype's variant offers."""
    dtype = problem.get("dtype")
    if dtype in ("float32", "float64"):
        variant, configs = "simt", SIMT_CONFIGS
    elif dtype in ("float16", "bfloat16") and arch >= 80:
        variant, configs = HALF_VARIANT, MMA_CONFIGS
        if not variant_compilable(variant):
            _LOG.info("fused GEMM: the %r variant needs %s, which NVRTC does not find here (install "
                      "nvidia-cuda-crt, or set CUDA_HOME to a CUDA toolkit); using the inline-PTX %r variant",
                      variant, " / ".join(VARIANT_HEADERS[variant]), PTX_VARIANT)
            variant = PTX_VARIANT
    else:
        return []
    trans_a = _trans(problem.get("a_shape"), problem.get("a_strides"))
    trans_b = _trans(problem.get("b_shape"), problem.get("b_strides"))
    return [Candidate.of(TILED, variant=variant, config=i, tile=cfg.label(variant), trans_a=trans_a,
                         trans_b=trans_b) for i, cfg in enumerate(configs)]


def interleave(*lists: Sequence[Candidate]) -> list[Candidate]:
    """Alternate the lists' candidates (first of each, then second of each, ...)."""
    out: list[Candidate] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


# -- loading and launching generated kernels ------------------------------------------------------------

_LOADED: dict[tuple[str, str, int], Callable[..., None]] = {}
_LOCK = threading.Lock()


def device_arch(device_id: int) -> int:
    """The device's compute capability as an SM number (e.g. 90)."""
    cupy = import_cupy()
    return int(cupy.cuda.Device(device_id).compute_capability)


def load_function(source: str, name: str, device_id: int) -> Callable[..., None]:
    """``launch(grid, block, packed, stream)`` for kernel ``name`` of ``source`` on ``device_id``:
    compiled to a cubin for the device's architecture (kernel cache), loaded once per process."""
    key = (source, name, device_id)
    found = _LOADED.get(key)
    if found is not None:
        return found
    from ....kernels.kernel_cache import compile_kernel

    cupy = import_cupy()
    driver = cupy.cuda.driver
    with cupy.cuda.Device(device_id):
        compiled = compile_kernel(source, f"sm_{device_arch(device_id)}")
        module = driver.moduleLoadData(compiled.code)  # kept for the process, like the kernel cache
        function = driver.moduleGetFunction(module, name)
    launch_kernel = driver.launchKernel

    def launch(grid: Sequence[int], block: Sequence[int], packed: Any, stream: int) -> None:
        launch_kernel(function, *grid, *block, 0, stream, ctypes.addressof(packed.array), 0)

    with _LOCK:
        return _LOADED.setdefault(key, launch)


# -- operand views ----------------------------------------------------------------------------------------


def aligned_shape(shape: Sequence[int], result_ndim: int, a_ndim: int, b_ndim: int) -> tuple[int, ...]:
    """An input's shape with the axes NumPy's rules dropped for 1-D operands restored, so it
    broadcasts against the ``(*batch, M, N)`` product.

    Examples
    --------
    >>> aligned_shape((5,), 1, 1, 2)    # a 1-D: the result (N,) is the product's (1, N)
    (1, 5)
    >>> aligned_shape((7,), 1, 2, 1)    # b 1-D: the result (M,) is the product's (M, 1)
    (7, 1)
    """
    full = [1] * (result_ndim - len(shape)) + list(shape)
    if a_ndim == 1:
        full.insert(len(full) - (b_ndim > 1), 1)
    if b_ndim == 1:
        full.append(1)
    return tuple(full)


def _pointer(x: Any) -> int:
    """Device address of a CuPy array (or of a torch tensor)."""
    data_ptr = getattr(x, "data_ptr", None)
    return data_ptr() if callable(data_ptr) else x.data.ptr


def _ref(x: Any) -> ArrayRef:
    """A 3-D CuPy array as the kernels see it."""
    item = x.dtype.itemsize
    return ArrayRef(_pointer(x), tuple(x.shape), tuple(s // item for s in x.strides))


class _Geometry:
    """The product as ``(batch, m, n)`` and how inputs map onto it."""

    def __init__(self, problem: Problem, cupy: Any):
        from .._layout import analyse_shapes

        self.a_ndim, self.b_ndim = len(problem.get("a_shape")), len(problem.get("b_shape"))
        shape = analyse_shapes(tuple(problem.get("a_shape")), tuple(problem.get("b_shape")))
        self.m, self.n, self.k, self.batch_shape, self.result = shape.m, shape.n, shape.k, shape.batch, shape.result
        self.batch = math.prod(self.batch_shape)
        self.full = self.batch_shape + (self.m, self.n)
        self.cupy = cupy

    def input_view(self, x: Any, keep: list) -> ArrayRef:
        """An epilogue input as a ``(batch, m, n)`` view (strides 0 where it broadcasts; a copy
        only when its batch axes cannot be walked by one stride). The array viewed is appended
        to ``keep``: a copy must outlive the launch that reads it."""
        cupy = self.cupy
        x = x.reshape(aligned_shape(x.shape, len(self.result), self.a_ndim, self.b_ndim))
        x = cupy.broadcast_to(x, self.full).reshape((self.batch, self.m, self.n))
        keep.append(x)
        return _ref(x)

    def operand(self, x: Any, is_a: bool, trans: bool) -> Any:
        """``a`` as ``(batch, m, k)`` or ``b`` as ``(batch, k, n)``, unit stride where the kernel
        expects it (copied into that layout otherwise)."""
        cupy = self.cupy
        if x.ndim == 1:
            x = x.reshape((1, -1) if is_a else (-1, 1))
        rows, cols = (self.m, self.k) if is_a else (self.k, self.n)
        x = cupy.broadcast_to(x, self.batch_shape + (rows, cols)).reshape((self.batch, rows, cols))
        item = x.dtype.itemsize
        axis = 1 if trans else 2
        if x.strides[axis] != item and x.shape[axis] != 1:
            x = cupy.ascontiguousarray(x.swapaxes(1, 2)).swapaxes(1, 2) if trans else cupy.ascontiguousarray(x)
        return x


def _input_values(geometry: _Geometry, kinds: Sequence[tuple[str, str]], inputs: Mapping[str, Any],
                  keep: list) -> dict:
    """Kernel argument values of the epilogue inputs (views of ``inputs`` on the product; the
    arrays behind them appended to ``keep``)."""
    return epilogue_values(kinds, {name: geometry.input_view(inputs[name], keep) for name, kind in kinds
                                   if kind != "value"})


# -- hot paths -------------------------------------------------------------------------------------------


class CustomPrepared(Prepared):
    """A prepared custom-epilogue candidate: the hot-path ``kernel`` and what it holds (a
    prepared cuBLASLt candidate for the first two kinds)."""

    def __init__(self, candidate: Candidate, kernel: Callable[..., Any], inner: Prepared | None = None):
        super().__init__(candidate)
        self.kernel: Callable[..., Any] | None = kernel
        self._inner = inner

    def free(self) -> None:
        if self._inner is not None:
            self._inner.free()
        self._inner, self.kernel = None, None
        super().free()


def native_call(kernel: Callable[..., Any], bias_name: str | None) -> Callable[..., Any]:
    """The native cuBLASLt kernel, fed the custom epilogue's bias input under the name ``bias``."""
    if bias_name is None:
        return lambda a, b, c, inputs, out: kernel(a, b, c, _NO_INPUTS, out)
    return lambda a, b, c, inputs, out: kernel(a, b, c, {"bias": inputs[bias_name]}, out)


def elementwise_call(lt_kernel: Callable[..., Any], problem: Problem, expr: Expr, device_id: int,
                     stream: Callable[[], int], *, package: str | None = None,
                     explicit_stream: int | None = None) -> Callable[..., Any]:
    """cuBLASLt's product (``lt_kernel``, a C-ordered result) and then the generated elementwise
    kernel applying ``expr`` to it in place. ``package`` and ``explicit_stream`` say which stream
    copies of the epilogue inputs go to (without ``package``: ``stream()``'s, entered per call)."""
    cupy = import_cupy()
    geometry = _Geometry(problem, cupy)
    dtype = problem.get("dtype")
    vector = vector_width(dtype, geometry.n)
    gpu_expr = gpu_expression(expr)
    generated = elementwise_kernel(gpu_expr, dtype, vector)
    launch = load_function(generated.source, generated.name, device_id)
    batch, m, n = geometry.batch, geometry.m, geometry.n
    fixed = {("batch", None): batch, ("m", None): m, ("n", None): n, ("ldd", None): n, ("stride_d", None): m * n}
    total = batch * m * n
    grid, block = (max(1, min(-(-total // vector // THREADS), MAX_BLOCKS)), 1, 1), (THREADS, 1, 1)
    params, kinds = generated.params, generated.inputs
    pack_bytes = vector * _ITEMSIZE[dtype]
    on_stream = _on_plan_stream(stream, cupy, explicit_stream, package, device_id)
    unaligned: list[Callable[..., None]] = []  # the one-element kernel, for an ``out=`` off the pack alignment

    def kernel(a: Any, b: Any, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        d = lt_kernel(a, b, c, _NO_INPUTS, out)
        if total:
            pointer = _pointer(d)
            keep: list = []  # held until the launch below has been queued
            with on_stream():  # any copy of an input is read by the launch on the plan's stream
                views = _input_values(geometry, kinds, inputs, keep)
            values = {**fixed, ("d", None): pointer, **views}
            if pointer % pack_bytes == 0:
                launch(grid, block, pack_arguments(params, values), stream())
            else:
                if not unaligned:
                    single = elementwise_kernel(gpu_expr, dtype, 1)
                    unaligned.append(load_function(single.source, single.name, device_id))
                blocks = (max(1, min(-(-total // THREADS), MAX_BLOCKS)), 1, 1)
                unaligned[0](blocks, block, pack_arguments(params, values), stream())
        return d

    return kernel


def _on_plan_stream(stream: Callable[[], int], cupy: Any, explicit_stream: int | None = None,
                    package: str | None = None, device_id: int | None = None) -> Callable[[], Any]:
    """``on_stream()``: the context that puts CuPy work (operand and input copies) on the plan's
    stream (see :func:`._lt_execute.plan_stream_context`)."""
    from ._lt_execute import plan_stream_context

    fixed = cupy_stream(explicit_stream, cupy, device_id) if explicit_stream is not None else None
    if package is None:  # the elementwise candidate: decided per call by the stream function
        return lambda: cupy_stream(stream(), cupy)
    return plan_stream_context(package, stream, fixed, cupy)


def _scalar(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, list):
        raise InvalidOperandError("matmul (cuda): a custom epilogue with a complex alpha/beta is not supported")
    return float(value)


def tiled_call(problem: Problem, candidate: Candidate, expr: Expr, *, device_id: int, package: str,
               stream: Callable[[], int], explicit_stream: int | None, raw_storage: bool = False) -> Callable[..., Any]:
    """The fused tiled GEMM with ``expr`` applied before the store, as a hot-path kernel."""
    params = candidate.params
    dtype = problem.get("dtype")
    configs = SIMT_CONFIGS if params["variant"] == "simt" else MMA_CONFIGS
    if not 0 <= params["config"] < len(configs):
        raise InvalidOptionError(f"matmul (cuda): tile configuration {params['config']} is not offered")
    has_c = problem.get("c_shape") is not None
    generated = gemm_kernel(dtype, config=configs[params["config"]], variant=params["variant"],
                            trans_a=params["trans_a"], trans_b=params["trans_b"], with_c=has_c,
                            epilogue=gpu_expression(expr))
    launch = load_function(generated.source, generated.name, device_id)
    cupy = import_cupy()
    geometry = _Geometry(problem, cupy)
    batch, m, n = geometry.batch, geometry.m, geometry.n
    grid, block = generated.launch_dims(batch, m, n)
    alpha, beta = _scalar(problem.get("alpha")), _scalar(problem.get("beta"))
    trans_a, trans_b = params["trans_a"], params["trans_b"]
    new_d = _result_allocator(package, dtype, (batch, m, n), device_id, explicit_stream, cupy, raw_storage)
    d_strides, result = (m * n, n, 1), geometry.result
    kinds = generated.epilogue.inputs
    on_stream = _on_plan_stream(stream, cupy, explicit_stream, package, device_id)

    def kernel(a: Any, b: Any, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        keep: list = []  # the viewed inputs (copies among them) live until the launch is queued
        with on_stream():  # copies of operands and inputs are read by the launch on the plan's stream
            a3, b3 = geometry.operand(a, True, trans_a), geometry.operand(b, False, trans_b)
            c_ref = None
            if has_c:
                c3 = cupy.broadcast_to(c.reshape(aligned_shape(c.shape, len(result), geometry.a_ndim,
                                                             geometry.b_ndim)), geometry.full).reshape((batch, m, n))
                if c3.strides[2] != c3.dtype.itemsize and n != 1:
                    c3 = cupy.ascontiguousarray(c3)
                c_ref = _ref(c3)
            views = {name: geometry.input_view(inputs[name], keep) for name, kind in kinds if kind != "value"}
        d = new_d() if out is None else out
        d_ref = ArrayRef(_pointer(d), (batch, m, n), d_strides)
        values = generated.values(_ref(a3), _ref(b3), d_ref, alpha=alpha, beta=beta, c=c_ref, epilogue_inputs=views)
        launch(grid, block, pack_arguments(generated.params, values), stream())
        return d if out is not None else d.reshape(result)

    return kernel


def _result_allocator(package: str, dtype: str, shape: tuple[int, ...], device_id: int,
                      explicit_stream: int | None, cupy: Any, raw_storage: bool) -> Callable[[], Any]:
    """``new()``: an uninitialised C-contiguous result from the operand package's allocator."""
    if package == "torch":
        torch = sys.modules["torch"]
        empty, tdtype, device = torch.empty, getattr(torch, dtype), f"cuda:{device_id}"
        ours = None if explicit_stream is None else torch.cuda.ExternalStream(explicit_stream, device=device)

        def new_torch() -> Any:
            d = empty(shape, dtype=tdtype, device=device)
            if ours is not None:  # the caching allocator hands memory out per stream
                d.record_stream(ours)
            return d

        return new_torch
    from ._lt_execute import _cupy_dtype

    np_dtype = _cupy_dtype(dtype, raw_storage)
    return lambda: cupy.empty(shape, np_dtype)
