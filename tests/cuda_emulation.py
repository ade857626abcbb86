"""A host emulation of the CUDA side of the cuBLASLt matmul engine, for tests without a GPU.

- :func:`host_cupy`: the part of CuPy the engine and the GPU tests use, on NumPy host memory
  (:class:`HostArray` answers ``.data.ptr`` with its host address, like a CuPy array);
- :func:`emulated_matmul`: ``cublasLtMatmul`` on host memory as the cuBLASLt header documents it,
  reading every setting back from the descriptors the engine built (column-major matrices,
  strided batches, epilogues with the bias per row of D, aux buffers, bias gradients, FP8 types
  with their A/B scale pointers and the TN rule);
- :func:`install`: the above plus stubs for the calls that need a device (handle, heuristic,
  algorithm check, device description, event timer, CUDA status), and the launch of generated
  kernels (custom epilogues): the same CUDA C source compiled with g++ under the emulation
  header of tests/kernels and run on the host with the engine's own packed arguments
  (:func:`emulated_load_function`; the tensor-core GEMM is replaced by its scalar twin).

As a pytest plugin (``PYTHONPATH=tests pytest tests/gpu -p cuda_emulation``) it runs the GPU
tests' own logic on the host; the stream, torch and device tests still need a GPU. What it
cannot check is what the GPU does with the descriptors: that is the GPU session's job.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import math
import sys
import types
from typing import Any, Callable

import numpy as np

from nvmathpy.cuda.bindings import cublaslt as lt

__all__ = ["HostArray", "emulated_matmul", "host", "host_cupy", "install", "offered"]

Desc, Layout = lt.MatmulDescAttribute, lt.MatrixLayoutAttribute
NP_OF = {lt.DataType.R_16F: np.float16, lt.DataType.R_32F: np.float32, lt.DataType.R_64F: np.float64,
         lt.DataType.C_32F: np.complex64, lt.DataType.C_64F: np.complex128}
try:
    import ml_dtypes

    NP_OF[lt.DataType.R_16BF] = ml_dtypes.bfloat16
    NP_OF[lt.DataType.R_8F_E4M3] = ml_dtypes.float8_e4m3fn
    NP_OF[lt.DataType.R_8F_E5M2] = ml_dtypes.float8_e5m2
except ImportError:  # bfloat16 problems need ml_dtypes on the host anyway
    pass


def up(x: Any) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


class HostArray(np.ndarray):
    """A NumPy array that answers ``.data.ptr`` like a CuPy array (its host address)."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    @property
    def device(self):
        return types.SimpleNamespace(id=0)


class _Context:
    compute_capability = "90"  # as cupy.cuda.Device reports an H100/H200

    def __init__(self, *args, **kwargs):
        self.ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        self.synchronized = True


class RecordingDevice(_Context):
    """A ``cupy.cuda.Device`` stand-in that keeps the stack of current devices (``current``,
    a list shared by all instances: set it per test) and the devices synchronised."""

    current: list = []
    synchronized: list = []

    def __init__(self, device_id=0):
        self.id = device_id

    def __enter__(self):
        self.current.append(self.id)
        return self

    def __exit__(self, *exc):
        self.current.pop()
        return False

    def synchronize(self):
        self.synchronized.append(self.id)


def record_devices(monkeypatch, cupy, devices=2):
    """Make ``devices`` devices usable and record which is current (see :class:`RecordingDevice`);
    returns ``(current, synchronized)``."""
    from nvmathpy.cuda import driver

    monkeypatch.setattr(driver, "cuda_status", lambda: driver.CudaStatus(True, None, devices))
    monkeypatch.setattr(RecordingDevice, "current", [])
    monkeypatch.setattr(RecordingDevice, "synchronized", [])
    monkeypatch.setattr(cupy.cuda, "Device", RecordingDevice)
    return RecordingDevice.current, RecordingDevice.synchronized


def devices_of_calls(monkeypatch, lib, name, current):
    """Wrap ``lib.<name>`` so that each call records the current device (the top of
    ``current`` from :func:`record_devices`, ``None`` if none was entered); returns the record."""
    seen, original = [], getattr(lib, name)

    def call(*args):
        seen.append(current[-1] if current else None)
        return original(*args)

    monkeypatch.setattr(lib, name, call)
    return seen


def _host(fn):
    return lambda *args, **kwargs: np.asarray(fn(*args, **kwargs)).view(HostArray)


def host_cupy():
    """The part of CuPy the hot path uses, on NumPy host memory."""
    module = types.ModuleType("cupy")
    for name in ("empty", "zeros", "ascontiguousarray", "asfortranarray", "broadcast_to", "arange", "asarray"):
        setattr(module, name, _host(getattr(np, name)))
    module.uint8, module.bool_, module.ndarray = np.uint8, np.bool_, HostArray
    module.asnumpy = lambda x: np.asarray(x).view(np.ndarray)
    module.full, module.swapaxes, module.nan = _host(np.full), _host(np.swapaxes), np.nan
    module.cuda = types.SimpleNamespace(ExternalStream=_Context, Device=_Context,
                                        get_current_stream=lambda device_id=-1: _Context(),
                                        alloc=lambda nbytes: _Context())
    module.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    return module


def _view(pointer, dtype, shape, strides):
    """An ndarray over host memory at ``pointer`` (element strides)."""
    dtype = np.dtype(dtype)
    span = 1 + sum((size - 1) * step for size, step in zip(shape, strides))
    buffer = (ctypes.c_char * (span * dtype.itemsize)).from_address(pointer)
    raw = np.dtype(f"u{dtype.itemsize}") if dtype.kind == "V" or dtype.itemsize < 2 else dtype  # ml_dtypes' FP8
    flat = np.frombuffer(buffer, raw)
    return np.lib.stride_tricks.as_strided(flat, shape, [s * dtype.itemsize for s in strides]).view(dtype)


def _gelu(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def _dgelu(z):
    u = math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)
    t = np.tanh(u)
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * z * z)


def emulated_matmul(handle, desc, alpha_p, pa, la, pb, lb, beta_p, pc, lc, pd, ld, algo, workspace, size, stream):
    """``cublasLtMatmul`` on host memory, as the header documents it, reading every setting back
    from the descriptors (column-major matrices, strided batches, epilogues with bias per row of
    D, aux buffers and bias gradients)."""
    get = lt.get_attribute

    def matrix(pointer, layout):
        rows, cols, lead = get(layout, Layout.ROWS), get(layout, Layout.COLS), get(layout, Layout.LD)
        count, stride = get(layout, Layout.BATCH_COUNT), get(layout, Layout.STRIDED_BATCH_OFFSET)
        return _view(pointer, NP_OF[get(layout, Layout.TYPE)], (count, rows, cols), (stride, 1, lead))

    scale = NP_OF[get(desc, Desc.SCALE_TYPE)]
    alpha, beta = (_view(p, scale, (1,), (1,))[0] for p in (alpha_p, beta_p))
    A, B, C, D = matrix(pa, la), matrix(pb, lb), matrix(pc, lc), matrix(pd, ld)
    fp8 = A.dtype.itemsize == 1
    if fp8 and not (get(desc, Desc.TRANSA) and not get(desc, Desc.TRANSB)):
        raise AssertionError("cuBLASLt's FP8 kernels take only TN layouts (A transposed, B not)")
    opA = up(A).swapaxes(1, 2) if get(desc, Desc.TRANSA) else up(A)
    opB = up(B).swapaxes(1, 2) if get(desc, Desc.TRANSB) else up(B)
    count = D.shape[0]
    opA, opB = np.broadcast_to(opA, (count,) + opA.shape[1:]), np.broadcast_to(opB, (count,) + opB.shape[1:])
    scale_ab = 1.0
    for attr in (Desc.A_SCALE_POINTER, Desc.B_SCALE_POINTER):  # float32 device scalars; NULL: 1
        pointer = get(desc, attr)
        if pointer:
            assert fp8, "scale pointers are for FP8 operands"
            scale_ab *= float(_view(pointer, np.float32, (1,), (1,))[0])
    x = alpha * scale_ab * (opA @ opB) + (beta * up(C) if beta != 0 else 0)
    epilogue = get(desc, Desc.EPILOGUE)
    rows, cols = D.shape[1:]
    bias_stride = get(desc, Desc.BIAS_BATCH_STRIDE)
    aux_ld, aux_stride = get(desc, Desc.EPILOGUE_AUX_LD), get(desc, Desc.EPILOGUE_AUX_BATCH_STRIDE)
    bias_p, aux_p = get(desc, Desc.BIAS_POINTER), get(desc, Desc.EPILOGUE_AUX_POINTER)
    out_type = D.dtype

    def bias_vector(length):
        return _view(bias_p, out_type, (count, length), (bias_stride, 1))

    def mask():  # bit r % 8 of byte r // 8 of each column, columns aux_ld bits apart
        raw = _view(aux_p, np.uint8, (count, cols, aux_ld // 8), (aux_stride // 8, aux_ld // 8, 1))
        bits = (raw[..., None] >> np.arange(8, dtype=np.uint8)) & 1
        return bits.reshape(count, cols, aux_ld)[:, :, :rows].swapaxes(1, 2).astype(bool)

    if epilogue & 4:  # BIAS
        x = x + up(bias_vector(rows))[:, :, None]
    forward_aux = epilogue & 128 and not epilogue & (8 | 64)
    if forward_aux and epilogue & 2:
        bits = np.zeros((count, cols, aux_ld), np.uint8)
        bits[:, :, :rows] = (x > 0).swapaxes(1, 2)
        packed = (bits.reshape(count, cols, aux_ld // 8, 8) << np.arange(8, dtype=np.uint8)).sum(-1, dtype=np.uint8)
        _view(aux_p, np.uint8, (count, cols, aux_ld // 8), (aux_stride // 8, aux_ld // 8, 1))[...] = packed
    if forward_aux and epilogue & 32:
        _view(aux_p, out_type, (count, rows, cols), (aux_stride, 1, aux_ld))[...] = x.astype(out_type)
    if epilogue & 8:  # DRELU
        x = np.where(mask(), x, 0)
    if epilogue & 64:  # DGELU
        x = x * _dgelu(up(_view(aux_p, out_type, (count, rows, cols), (aux_stride, 1, aux_ld))))
    if epilogue & 16:  # BGRAD of D: per row of D, summed over its columns
        bias_vector(rows)[...] = x.sum(axis=2).astype(out_type)
    if epilogue & 256:  # BGRADA: op(A) summed over k, one value per row of D
        bias_vector(rows)[...] = opA.sum(axis=2).astype(out_type)
    if epilogue & 512:  # BGRADB: op(B) summed over k, one value per column of D
        bias_vector(cols)[...] = opB.sum(axis=1).astype(out_type)
    if epilogue & 2 and not epilogue & 8:
        x = np.maximum(x, 0)
    if epilogue & 32:
        x = _gelu(x)
    D[...] = x.astype(out_type)
    return 0



def offered(count: int) -> list:
    """Heuristic results with distinct algorithm bytes and workspace sizes."""
    results = (lt.HeuristicResult * count)()
    for i, result in enumerate(results):
        result.algo.data[0], result.algo.data[7] = 0xA1 + i, 0x5EED
        result.workspaceSize = 1024 * (i + 1)
    return list(results)


def host(x: Any) -> HostArray | None:
    """``x`` as a :class:`HostArray` (``None`` stays ``None``)."""
    return None if x is None else np.asarray(x).view(HostArray)


def install(setattr_: Callable[[Any, str, Any], None], setitem: Callable[[Any, str, Any], None],
            algorithms: int = 3) -> list[bytes]:
    """Put the emulation in place through ``setattr_``/``setitem`` (``monkeypatch``'s, or the
    builtins for a whole session). The heuristic offers ``algorithms`` algorithms; the algorithm
    check accepts only those and records each one it sees in the returned list."""
    from nvmathpy.cuda import driver, lt_algo, runtime
    from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda, _engine as matmul_cuda
    from nvmathpy.plan.autotune import perf_counter_timer

    known = {bytes(r.algo) for r in offered(algorithms)}
    checked: list[bytes] = []

    def check(handle: int, desc: int, a: int, b: int, c: int, d: int, algo: Any) -> Any:
        assert bytes(algo) in known, "prepare restored an algorithm the heuristic never offered"
        checked.append(bytes(algo))
        result = lt.HeuristicResult()
        result.workspaceSize = 512
        return result

    setitem(sys.modules, "cupy", host_cupy())
    setattr_(lt.LIB, "cublasLtMatmul", emulated_matmul)
    setattr_(lt, "heuristics", lambda *args: offered(min(algorithms, args[-1])))
    setattr_(lt_algo, "check", check)
    setattr_(matmul_cuda, "lt_handle", lambda device_id: 0)
    setattr_(runtime, "device_description", lambda device_id: {"gpu": "host emulation"})
    setattr_(runtime, "event_timer", lambda stream, device_id: perf_counter_timer)
    setattr_(driver, "cuda_status", lambda: driver.CudaStatus(True, None, 1))
    setattr_(custom_cuda, "load_function", emulated_load_function)
    setattr_(custom_cuda, "HALF_VARIANT", "twin")
    return checked


#: Every generated kernel the emulation launched: (kernel name, grid, block).
LAUNCHES: list[tuple[str, tuple, tuple]] = []


def emulated_load_function(source: str, name: str, device_id: int) -> Callable[..., None]:
    """:func:`nvmathpy.linalg.gemm.cuda._custom.load_function` on the host: ``source`` compiled with
    g++ under tests/kernels' emulation header; a launch runs its blocks on the host with the
    packed argument array the engine built (pointers are host addresses here)."""
    from pathlib import Path

    folder = str(Path(__file__).resolve().parent / "kernels")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import kernels_emulator

    kernels_emulator.compile_emulated(source, name)

    def launch(grid, block, packed, stream):
        LAUNCHES.append((name, tuple(grid), tuple(block)))
        kernels_emulator.launch(source, name, tuple(grid), tuple(block), packed)

    return launch


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    """Loaded with ``-p cuda_emulation``: install the emulation for the whole session, before
    tests/gpu/conftest.py looks for a device."""
    install(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))
