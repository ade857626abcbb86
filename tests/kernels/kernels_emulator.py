"""Run generated CUDA C on the CPU: g++ with the tests' emulation header, loaded with ctypes.

The kernel source is compiled unchanged (with ``NVMATHPY_EMULATION`` defined and
``emulation/cuda_emulation.h`` force-included through a precompiled header), plus a small
``extern "C"`` entry that hands cuLaunchKernel's argument array to the emulated launch. Shared
objects are cached per hash of (source, header, flags) in a per-user temporary directory, so a
variant is compiled once. Sanitizer builds run in a child Python with the sanitizer runtime
preloaded (see :func:`run_sanitized`).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from nvmathpy.kernels.launch import PackedArguments

HERE = Path(__file__).parent
HEADER = HERE / "emulation" / "cuda_emulation.h"
FLAGS = ("-std=c++17", "-O1", "-g0", "-fPIC", "-shared", "-pthread", "-DNVMATHPY_EMULATION", "-w")
SANITIZE = {"thread": ("-fsanitize=thread", "-g"), "address": ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")}
SANITIZER_RUNTIME = {"thread": "libtsan.so", "address": "libasan.so"}

_ENTRY = """
extern "C" void nvm_emu_entry(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              void** args) {{
  nvm_emu_launch({name}, dim3(gx, gy, gz), dim3(bx, by, bz), args);
}}
"""


def build_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"nvmathpy-emulation-{os.getuid()}"
    path.mkdir(exist_ok=True)
    return path


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _atomic_compile(args: list[str], target: Path) -> None:
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    result = subprocess.run([*args, "-o", str(tmp)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"g++ failed:\n{result.stderr[-6000:]}")
    os.replace(tmp, target)


@functools.cache
def _precompiled_header(flags: tuple[str, ...]) -> Path:
    """A copy of the header with its ``.gch`` beside it, for these flags."""
    text = HEADER.read_text()
    folder = build_dir() / f"pch-{_digest(text, *flags)}"
    folder.mkdir(exist_ok=True)
    header = folder / "cuda_emulation.h"
    if not (folder / "cuda_emulation.h.gch").exists():
        header.write_text(text)
        pch_flags = [f for f in flags if f != "-shared"]
        _atomic_compile(["g++", *pch_flags, "-x", "c++-header", str(header)], folder / "cuda_emulation.h.gch")
    return header


def compile_emulated(source: str, name: str, sanitize: str | None = None) -> Path:
    """Compile ``source`` (kernel ``name``) into a shared object; return its path (cached)."""
    flags = FLAGS + (SANITIZE[sanitize] if sanitize else ())
    header = _precompiled_header(flags)
    text = source + _ENTRY.format(name=name)
    target = build_dir() / f"{_digest(text, HEADER.read_text(), *flags)}.so"
    if not target.exists():
        cpp = target.with_name(f"{target.stem}.{os.getpid()}-{threading.get_ident()}.cpp")
        cpp.write_text(text)
        _atomic_compile(["g++", *flags, "-include", str(header), str(cpp)], target)
    return target


@functools.cache
def _library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.nvm_emu_entry.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
    lib.nvm_emu_entry.restype = None
    return lib


def launch(source: str, name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
           packed: PackedArguments, sanitize: str | None = None) -> None:
    """Compile (cached) and run one launch of kernel ``name`` with ``packed`` arguments."""
    lib = _library(str(compile_emulated(source, name, sanitize)))
    lib.nvm_emu_entry(*grid, *block, ctypes.cast(packed.array, ctypes.c_void_p))


def run_sanitized(sanitize: str, code: str) -> subprocess.CompletedProcess:
    """Run Python ``code`` in a child with the ``sanitize`` runtime preloaded (tests/kernels on
    ``sys.path``, the emulation launches in it built with the sanitizer)."""
    runtime = subprocess.run(["g++", f"-print-file-name={SANITIZER_RUNTIME[sanitize]}"],
                             capture_output=True, text=True, check=True).stdout.strip()
    env = {**os.environ, "LD_PRELOAD": runtime,
           "TSAN_OPTIONS": "exitcode=66 report_signal_unsafe=0", "ASAN_OPTIONS": "detect_leaks=0 exitcode=67",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent.parent)])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240)


# ---- running generated kernels on NumPy arrays ------------------------------------------------------

def epilogue_ref(value, kind: str):
    """An epilogue input as the kernels take it: a number, or an ArrayRef with (batch, row, col) strides."""
    import numpy as np

    from nvmathpy.kernels.launch import ArrayRef

    if kind == "scalar":
        return float(value)
    ref = ArrayRef.of_numpy(np.asarray(value))
    if kind == "col":
        return ArrayRef(ref.pointer, (1, 1) + ref.shape[-1:], (0, 0, ref.strides[-1]))
    if kind == "row":
        return ArrayRef(ref.pointer, (1,) + ref.shape[-2:], (0, ref.strides[-2], 0))
    return ref


def run_gemm(kernel, a, b, d, *, alpha=1.0, beta=0.0, c=None, inputs=None, sanitize=None):
    """Launch a GemmKernel on host arrays (3-D views), writing ``d``."""
    from nvmathpy.kernels.launch import ArrayRef, pack_arguments

    refs = {name: epilogue_ref(inputs[name], kind) for name, kind in kernel.epilogue.inputs if kind != "value"}
    values = kernel.values(ArrayRef.of_numpy(a), ArrayRef.of_numpy(b), ArrayRef.of_numpy(d), alpha=alpha, beta=beta,
                           c=None if c is None else ArrayRef.of_numpy(c), epilogue_inputs=refs)
    grid, block = kernel.launch_dims(*d.shape)
    launch(kernel.source, kernel.name, grid, block, pack_arguments(kernel.params, values), sanitize)


def run_solve(kernel, a, b, x, info, sanitize=None, flag=None, epoch=1):
    """Launch a tiny solver on host arrays ``a (batch, n, n)``, ``b``/``x (batch, n, nrhs)``."""
    from nvmathpy.kernels.launch import pack_arguments

    values = {("batch", None): a.shape[0], ("info", None): info.ctypes.data}
    if flag is not None:  # the register solver's failure flag (uint64 array of one) and launch epoch
        values.update({("flag", None): flag.ctypes.data, ("epoch", None): epoch})
    for name, array in (("a", a), ("b", b), ("x", x)):
        values.update(_matrix_values(name, array))
    launch(kernel.source, kernel.name, *kernel.launch_dims(a.shape[0]), pack_arguments(kernel.params, values), sanitize)


def _matrix_values(name, array):
    step = array.dtype.itemsize
    assert array.strides[2] == step
    return {(name, None): array.ctypes.data, (f"ld{name}", None): array.strides[1] // step,
            (f"stride_{name}", None): array.strides[0] // step}


def run_tiny_gemm(kernel, a, b, d, *, alpha=1.0, beta=0.0, c=None):
    """Launch a tiny batched GEMM on host arrays (unit stride along each operand's last axis)."""
    from nvmathpy.kernels.launch import pack_arguments

    values = {("batch", None): d.shape[0], ("alpha", None): alpha}
    operands = {"a": a, "b": b, "d": d}
    if c is not None:
        operands["c"] = c
        values[("beta", None)] = beta
    for name, array in operands.items():
        values.update(_matrix_values(name, array))
    launch(kernel.source, kernel.name, *kernel.launch_dims(d.shape[0]), pack_arguments(kernel.params, values))


def prebuild(kernels) -> None:
    """Compile the emulation objects of many kernels at once, one g++ per core."""
    from concurrent.futures import ThreadPoolExecutor

    unique = {(k.source, k.name) for k in kernels}
    _precompiled_header(FLAGS)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda item: compile_emulated(*item), unique))
