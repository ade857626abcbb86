"""A host emulation of cuFFT for the CUDA FFT engine, for tests without a GPU.

- :class:`CufftEmulator`: ``cufftCreate``/``cufftDestroy``/``cufftSetAutoAllocation``/
  ``cufftXtMakePlanMany``/``cufftSetWorkArea``/``cufftSetStream``/``cufftXtExec`` on host memory,
  written from the cuFFT documentation of the advanced data layout: an exec reads back exactly the
  plan parameters the engine passed (rank, n, embeds, strides, distances, batch, data types) and
  computes the unnormalised transform with numpy.fft in float64 (half precision: float16 in and
  out, powers of 2 only, as cuFFT). It also checks what cuFFT requires or the engine promises:
  auto-allocation off before planning, a work area set before executing, consistent data types,
  embeddings no smaller than the data, identical layouts for in-place transforms.
  LTO callbacks (``cufftXtSetJITCallback``) must be attached before the plan is made, with the
  callback type of the plan's data types; an exec then applies them on the host: the callerInfo
  struct the engine uploaded is read back through the generated kernel's ctypes mirror, each
  element's offset is peeled into indices by the layout baked into the kernel (greedily, the
  definition the device function's constant-divisor code must agree with), and the traced IR
  runs with :class:`nvmathpy.kernels.cpu_eval.BlockedEvaluator`.
- :func:`install`: the above plus the CuPy stand-in of :mod:`cuda_emulation` and stubs for the
  device-only calls (CUDA status, device description, work-area allocation, event timer).

Under the host emulation plugin (``PYTHONPATH=tests pytest tests/gpu -p cuda_emulation``),
tests/gpu/test_gpu_fft.py installs this too, so the GPU tests' own logic runs on the host; the
stream and torch tests still need a GPU.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cuda_emulation import HostArray, _view, host_cupy
from nvmathpy.cuda.bindings import cufft
from nvmathpy.cuda.bindings.library_types import DataType
from nvmathpy.errors import LibraryError
from nvmathpy.kernels import fft_callbacks
from nvmathpy.kernels.cpu_eval import BlockedEvaluator
from nvmathpy.kernels.ir import Expr

__all__ = ["CufftEmulator", "EmulatedPlan", "install"]

_REAL = {DataType.R_16F: np.float16, DataType.R_32F: np.float32, DataType.R_64F: np.float64}
_COMPLEX = {DataType.C_16F: np.float16, DataType.C_32F: np.complex64, DataType.C_64F: np.complex128}
_PAIR = {DataType.R_16F: DataType.C_16F, DataType.R_32F: DataType.C_32F, DataType.R_64F: DataType.C_64F}
#: cufftXtCallbackType -> (load?, the data type it reads or writes), from cufftXt.h
_CALLBACK_DATA = {0: (True, DataType.C_32F), 1: (True, DataType.C_64F), 2: (True, DataType.R_32F),
                  3: (True, DataType.R_64F), 4: (False, DataType.C_32F), 5: (False, DataType.C_64F),
                  6: (False, DataType.R_32F), 7: (False, DataType.R_64F)}


def _k_as_input(expr: Expr) -> Expr:
    """``expr`` with the index ``k`` (the IR's ``col``) read from an input named ``#k``."""
    if expr.op == "index":
        return Expr("input", name="#k", kind="matrix")
    if not expr.args:
        return expr
    return Expr(expr.op, tuple(_k_as_input(a) for a in expr.args), expr.name, expr.kind, expr.value)


def apply_callback(kernel: Any, info_pointer: int, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """What the generated callback computes for the elements at ``offsets`` holding ``values``
    (load: the returned values; store: what is written): the offsets peeled into indices by the
    layout baked into the kernel (``kernel.layout``), the rest read from its callerInfo at
    ``info_pointer``."""
    info = kernel.info_type.from_address(info_pointer)
    layout = kernel.layout
    dtype = np.dtype(kernel.dtype)
    value = np.asarray(values).astype(dtype).reshape(1, -1)
    rest = np.asarray(offsets, dtype=np.int64).reshape(1, -1).copy()
    idx = []
    for stride in layout.strides:
        i = rest // stride
        rest -= i * stride
        idx.append(i)
    strides = dict(layout.inputs)

    def weighted(weights: Any) -> np.ndarray:
        return sum((i * weights[d] for d, i in enumerate(idx)), np.zeros_like(rest))

    inputs: dict[str, Any] = {}
    if kernel.uses_k:
        inputs["#k"] = idx[layout.k] if layout.k is not None else np.zeros_like(rest)
    for n, (name, kind) in enumerate(kernel.inputs):
        if kind == "matrix":
            where = weighted(strides[name])
            inputs[name] = _view(getattr(info, f"in{n}"), dtype, (int(where.max()) + 1,), (1,))[where]
        else:
            parts = getattr(info, f"s{n}")
            inputs[name] = dtype.type(complex(parts[0], parts[1]) if dtype.kind == "c" else parts[0])
    if kernel.role == "epilog":
        if dtype.kind == "c" and info.conj:
            value = np.conj(value)
        value = (value * info.scale).astype(dtype)
    BlockedEvaluator(_k_as_input(kernel.expr), dtype)(value, inputs)
    if kernel.role == "prolog" and dtype.kind == "c" and info.conj:
        value = np.conj(value)
    if kernel.guard:
        value[np.any([i >= layout.limits[d] for d, i in enumerate(idx)], axis=0)] = 0
    return value.reshape(np.shape(values))


@dataclass
class EmulatedPlan:
    """What the engine configured on one plan handle."""

    auto_allocation: bool = True
    kind: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    work_size: int = 0
    work_area: int | None = None
    stream: int | None = None
    #: attached LTO callbacks: callback type -> (generated kernel, callerInfo pointer)
    callbacks: dict[int, tuple[Any, int]] = field(default_factory=dict)
    #: how they were attached: ``"default"`` (no symbol name) or ``"named"``
    naming: str | None = None


def _fail(name: str, status: str) -> LibraryError:
    return LibraryError(f"{name} failed: {status} (emulated)", status=status, code=int(cufft.Result[status]))


class CufftEmulator:
    """The cuFFT calls the engine makes, on host memory (see the module docstring)."""

    def __init__(self) -> None:
        self.plans: dict[int, EmulatedPlan] = {}
        self.destroyed: list[int] = []
        self.executed: list[tuple[int, int | None]] = []  # (handle, stream) of every exec
        self.allocations: dict[int, int] = {}  # work areas handed out: address -> bytes
        #: ``refuse(params) -> bool``: plans to fail with CUFFT_INVALID_VALUE (to test fallbacks)
        self.refuse: Callable[[dict[str, Any]], bool] = lambda params: False
        #: the callbacks the engine compiled to LTO-IR, by LTO-IR (recorded by :func:`install`)
        self.kernels: dict[bytes, Any] = {}
        #: a cuFFT status to refuse every plan with LTO callbacks with (as the real cuFFT did on
        #: the first GPU run), or ``None``
        self.refuse_callbacks: str | None = None
        #: refuse only callbacks attached this way (``"default"``: no symbol name, ``"named"``)
        self.refuse_naming: str | None = None
        #: elementwise fallback kernel launches: (role, element count, stream)
        self.applied: list[tuple[str, int, int]] = []
        self._next = 1

    def create(self, ref: Any) -> int:
        ref._obj.value = self._next
        self.plans[self._next] = EmulatedPlan()
        self._next += 1
        return 0

    def _plan(self, handle: int, name: str) -> EmulatedPlan:
        if handle not in self.plans:
            raise _fail(name, "CUFFT_INVALID_PLAN")
        return self.plans[handle]

    def destroy(self, handle: int) -> int:
        self._plan(handle, "cufftDestroy")
        del self.plans[handle]
        self.destroyed.append(handle)
        return 0

    def set_auto_allocation(self, handle: int, flag: int) -> int:
        self._plan(handle, "cufftSetAutoAllocation").auto_allocation = bool(flag)
        return 0

    def set_work_area(self, handle: int, address: int) -> int:
        plan = self._plan(handle, "cufftSetWorkArea")
        assert plan.kind is not None, "cufftSetWorkArea before the plan was made"
        plan.work_area = address
        return 0

    def set_stream(self, handle: int, stream: int) -> int:
        self._plan(handle, "cufftSetStream").stream = stream
        return 0

    def set_jit_callback(self, handle, symbol, ltoir, size, callback_type, caller_info) -> int:
        plan = self._plan(handle, "cufftXtSetJITCallback")
        assert plan.kind is None, "LTO callbacks must be attached before the plan is made"
        assert callback_type in _CALLBACK_DATA and callback_type not in plan.callbacks, callback_type
        assert size == len(ltoir) > 0, "the LTO-IR and its size disagree"
        kernel = self.kernels.get(bytes(ltoir[:size]) if not isinstance(ltoir, bytes) else ltoir)
        assert kernel is not None, "this LTO-IR is not a callback the engine compiled"
        load, data_type = _CALLBACK_DATA[callback_type]
        # the function has cuFFT's default C++ name for the callback type; attached without a name
        # (cuFFT then links that default) or with exactly that name
        assert kernel.symbol == fft_callbacks.LINK_NAMES["load" if load else "store", kernel.dtype], kernel.symbol
        assert symbol is None or symbol == kernel.symbol.encode(), symbol
        plan.naming = "default" if symbol is None else "named"
        plan.callbacks[callback_type] = (kernel, caller_info[0])
        return 0

    def make_plan_many(self, handle, rank, n, inembed, istride, idist, itype, onembed, ostride, odist, otype, batch,
                       work_ref, etype) -> int:
        plan = self._plan(handle, "cufftXtMakePlanMany")
        assert not plan.auto_allocation, "the engine must turn auto-allocation off before planning"
        n, inembed, onembed = list(n[:rank]), list(inembed[:rank]), list(onembed[:rank])
        itype, otype, etype = DataType(itype), DataType(otype), DataType(etype)
        if itype in _COMPLEX and otype in _COMPLEX and itype == otype == etype:
            kind = "c2c"
        elif itype in _REAL and otype == _PAIR[itype] == etype:
            kind = "r2c"
        elif otype in _REAL and itype == _PAIR[otype] == etype:
            kind = "c2r"
        else:
            raise _fail("cufftXtMakePlanMany", "CUFFT_INVALID_TYPE")
        if not 1 <= rank <= 3 or min(n) < 1 or batch < 1 or istride < 1 or ostride < 1:
            raise _fail("cufftXtMakePlanMany", "CUFFT_INVALID_SIZE")
        if etype == DataType.C_16F and any(v & (v - 1) for v in n):
            raise _fail("cufftXtMakePlanMany", "CUFFT_NOT_SUPPORTED")
        in_ext, out_ext = self._extents(kind, n)
        if self.refuse(dict(rank=rank, n=n, inembed=inembed, istride=istride, idist=idist, batch=batch)):
            raise _fail("cufftXtMakePlanMany", "CUFFT_INVALID_VALUE")
        for k in range(1, rank):
            assert inembed[k] >= in_ext[k] and onembed[k] >= out_ext[k], (n, inembed, onembed)
        if plan.callbacks and self.refuse_callbacks and self.refuse_naming in (None, plan.naming):
            raise _fail("cufftXtMakePlanMany", self.refuse_callbacks)
        for callback_type in plan.callbacks:  # the callback type must match what the plan reads/writes
            load, data_type = _CALLBACK_DATA[callback_type]
            assert data_type == (itype if load else otype), (callback_type, itype, otype)
        plan.kind = kind
        plan.params = dict(rank=rank, n=n, inembed=inembed, istride=istride, idist=idist, itype=itype,
                           onembed=onembed, ostride=ostride, odist=odist, otype=otype, batch=batch)
        plan.work_size = 256 * rank
        work_ref._obj.value = plan.work_size
        return 0

    @staticmethod
    def _extents(kind: str, n: list[int]) -> tuple[list[int], list[int]]:
        half = n[:-1] + [n[-1] // 2 + 1]
        return (half if kind == "c2r" else n), (half if kind == "r2c" else n)

    @staticmethod
    def _offsets(extents: list[int], embed: list[int], stride: int, dist: int, batch: int) -> np.ndarray:
        """Element offsets of the ``(batch, *extents)`` elements in the advanced layout."""
        strides = [dist] + [stride * math.prod(embed[k + 1:]) for k in range(len(extents))]
        grids = np.indices([batch, *extents], dtype=np.int64)
        return sum(g * s for g, s in zip(grids, strides))

    def _callback(self, plan: EmulatedPlan, load: bool) -> tuple[Any, int] | None:
        for callback_type, (kernel, info) in plan.callbacks.items():
            if _CALLBACK_DATA[callback_type][0] == load:
                return kernel, info
        return None

    @staticmethod
    def _array(pointer: int, dtype: DataType, extents: list[int], embed: list[int], stride: int, dist: int,
               batch: int) -> np.ndarray:
        """The ``(batch, *extents)`` array at ``pointer`` as the advanced layout addresses it."""
        strides = [stride * math.prod(embed[k + 1:]) for k in range(len(extents))]
        shape = [batch, *extents]
        if dtype == DataType.C_16F:  # float16 pairs
            pairs = _view(pointer, np.float16, shape + [2], [2 * dist, *(2 * s for s in strides), 1])
            return pairs
        numpy_type = _REAL.get(dtype) or _COMPLEX[dtype]
        return _view(pointer, numpy_type, shape, [dist, *strides])

    def exec(self, handle: int, pointer_in: int, pointer_out: int, direction: int) -> int:
        plan = self._plan(handle, "cufftXtExec")
        assert plan.kind is not None, "exec on a plan that was never made"
        if plan.work_size:
            assert plan.work_area is not None, "exec before cufftSetWorkArea"
            assert self.allocations.get(plan.work_area, 0) >= plan.work_size, "work area smaller than cuFFT asked"
        p = plan.params
        in_ext, out_ext = self._extents(plan.kind, p["n"])
        if pointer_in == pointer_out:
            assert plan.kind == "c2c" and (p["istride"], p["idist"], p["inembed"][1:]) == (
                p["ostride"], p["odist"], p["onembed"][1:]), "in-place transform with different layouts"
        source = self._array(pointer_in, p["itype"], in_ext, p["inembed"], p["istride"], p["idist"], p["batch"])
        target = self._array(pointer_out, p["otype"], out_ext, p["onembed"], p["ostride"], p["odist"], p["batch"])
        data = np.array(source).astype(np.complex128 if source.dtype.kind == "c" else np.float64)
        if p["itype"] == DataType.C_16F:
            data = data[..., 0] + 1j * data[..., 1]
        load = self._callback(plan, load=True)
        if load is not None:
            offsets = self._offsets(in_ext, p["inembed"], p["istride"], p["idist"], p["batch"])
            data = apply_callback(*load, source, offsets).astype(data.dtype)
        axes = tuple(range(1, p["rank"] + 1))
        size = math.prod(p["n"])
        if plan.kind == "c2c":
            forward = direction == cufft.FORWARD
            result = np.fft.fftn(data, axes=axes) if forward else np.fft.ifftn(data, axes=axes) * size
        elif plan.kind == "r2c":
            result = np.fft.rfftn(data.real, axes=axes)
        else:
            result = np.fft.irfftn(data, s=p["n"], axes=axes) * size
        store = self._callback(plan, load=False)
        if store is not None:
            if target.dtype.kind != "c":
                result = result.real
            offsets = self._offsets(out_ext, p["onembed"], p["ostride"], p["odist"], p["batch"])
            result = apply_callback(*store, result, offsets)
        if p["otype"] == DataType.C_16F:
            target[..., 0], target[..., 1] = result.real, result.imag
        else:
            target[...] = result if target.dtype.kind == "c" else result.real
        self.executed.append((handle, plan.stream))
        return 0


def install(setattr_: Callable[[Any, str, Any], None], setitem: Callable[[Any, str, Any], None]) -> CufftEmulator:
    """Put the cuFFT emulation and the CuPy stand-in in place through ``setattr_``/``setitem``
    (``monkeypatch``'s); return the emulator, which records what the engine did."""
    import sys

    from nvmathpy.cuda import driver, runtime
    from nvmathpy.plan.autotune import perf_counter_timer

    emulator = CufftEmulator()
    cupy = sys.modules.get("cupy")
    if getattr(cupy, "ndarray", None) is not HostArray:  # not already emulated (by cuda_emulation)
        cupy = host_cupy()
    for name in ("multiply", "conjugate", "negative", "copyto"):
        setattr(cupy, name, getattr(np, name))
    setitem(sys.modules, "cupy", cupy)
    for name, fn in (("cufftCreate", emulator.create), ("cufftDestroy", emulator.destroy),
                     ("cufftSetAutoAllocation", emulator.set_auto_allocation),
                     ("cufftXtMakePlanMany", emulator.make_plan_many), ("cufftSetWorkArea", emulator.set_work_area),
                     ("cufftSetStream", emulator.set_stream), ("cufftXtExec", emulator.exec),
                     ("cufftXtSetJITCallback", emulator.set_jit_callback)):
        setattr_(cufft.LIB, name, fn)
    compile_callback = fft_callbacks.compile_callback

    def recorded(kernel: Any, arch: str) -> Any:
        compiled = compile_callback(kernel, arch)
        emulator.kernels[bytes(compiled.code)] = kernel
        return compiled

    setattr_(fft_callbacks, "compile_callback", recorded)
    from nvmathpy.fft import _cuda_callbacks

    def load_apply(source: str, device_id: int) -> Callable[..., None]:
        """The fallback kernel compiled by g++ under the CUDA emulation header, run on the host."""
        import sys
        from pathlib import Path

        folder = str(Path(__file__).parent / "kernels")
        if folder not in sys.path:
            sys.path.insert(0, folder)
        from kernels_emulator import compile_emulated

        lib = ctypes.CDLL(str(compile_emulated(source, fft_callbacks.APPLY_NAME)))
        lib.nvm_emu_entry.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
        role = "prolog" if "= cufftJITCallbackLoad" in source else "epilog"

        def launch(src: int, dst: int, info: int, count: int, stream: int) -> None:
            args = (ctypes.c_void_p(src), ctypes.c_void_p(dst), ctypes.c_void_p(info))
            argv = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
            lib.nvm_emu_entry(2, 1, 1, 3, 1, 1, argv)  # a few blocks and threads: the grid-stride loop
            emulator.applied.append((role, count, stream))

        return launch

    setattr_(_cuda_callbacks, "load_apply", load_apply)
    buffers: list[Any] = []

    def allocate(nbytes: int, package: str, device_id: int, stream: int | None = None) -> tuple[Any, int]:
        if nbytes == 0:
            return None, 0
        buffer = (ctypes.c_char * nbytes)()
        buffers.append(buffer)
        emulator.allocations[ctypes.addressof(buffer)] = nbytes
        return buffer, ctypes.addressof(buffer)

    setattr_(runtime, "allocate", allocate)
    setattr_(runtime, "device_description", lambda device_id: {"gpu": "host emulation"})
    setattr_(runtime, "event_timer", lambda stream, device_id: perf_counter_timer)
    setattr_(driver, "cuda_status", lambda: driver.CudaStatus(True, None, 1))
    setattr_(cufft, "version", lambda: (12, 0, 0))
    return emulator
