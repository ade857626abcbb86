"""Compile CUDA C++ source with NVRTC, for one GPU architecture, without needing a GPU.

:func:`compile_cuda` returns a cubin (ready to load on that architecture), LTO-IR (to be linked
by nvJitLink or handed to cuFFT as a callback) or PTX, together with the compiler log. Cubins are
compiled with ``--ptxas-options=-v``, so the log always carries ptxas's resource report;
:func:`ptxas_resources` reads registers, stack and spills per function out of it. The include
directories of the CUDA runtime wheel (``cuda_fp16.h``, ``cuda_runtime.h``, ``crt/``) are passed
explicitly: NVRTC does not find them by itself.
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidOptionError, LibraryError
from .ffi import read_sized

__all__ = ["Compiled", "KernelResources", "check_arch", "compile_cuda", "cuda_include_dirs", "ptxas_resources"]

_ARCH = re.compile(r"sm_(\d+)[af]?")
_OUTPUTS = {  # output kind -> (arch option prefix, extra option, NVRTC size and data getters)
    "cubin": ("sm_", "--ptxas-options=-v", "nvrtcGetCUBINSize", "nvrtcGetCUBIN"),
    "ltoir": ("sm_", "-dlto", "nvrtcGetLTOIRSize", "nvrtcGetLTOIR"),
    "ptx": ("compute_", None, "nvrtcGetPTXSize", "nvrtcGetPTX"),
}


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reported for one function.

    Attributes
    ----------
    registers : int
        Registers per thread (0 for non-entry functions, for which ptxas does not say).
    stack_frame, spill_stores, spill_loads : int
        Bytes per thread.
    """

    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int


@dataclass(frozen=True)
class Compiled:
    """Device code produced by NVRTC or nvJitLink.

    Attributes
    ----------
    code : bytes
        The cubin, LTO-IR or PTX.
    kind : str
        ``"cubin"``, ``"ltoir"`` or ``"ptx"``.
    arch : str
        The target, e.g. ``"sm_90"``.
    log : str
        The compiler's (or linker's) log; for cubins it includes the ptxas resource report.
    """

    code: bytes
    kind: str
    arch: str
    log: str

    @property
    def resources(self) -> dict[str, KernelResources]:
        """Per-function ptxas report parsed from :attr:`log` (empty for LTO-IR and PTX)."""
        return ptxas_resources(self.log)


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Return the header directories of the installed CUDA runtime wheel (empty if none found)."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:  # then loading NVRTC itself reports what to install
        return ()
    found = find_nvidia_header_directory("cudart")
    return (found,) if found else ()


def check_arch(arch: str) -> int:
    """Return the SM number of ``arch`` (``"sm_90"`` or ``"sm_90a"`` -> 90).

    Raises
    ------
    InvalidOptionError
        If ``arch`` is not of the form ``sm_<number>[a|f]``.
    """
    match = _ARCH.fullmatch(arch)
    if match is None:
        raise InvalidOptionError(f"arch must look like 'sm_90' or 'sm_90a', got {arch!r}")
    return int(match.group(1))


def compile_cuda(
    source: str,
    arch: str,
    *,
    output: str = "cubin",
    name: str = "nvmathpy_kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] | None = None,
) -> Compiled:
    """Compile CUDA C++ ``source`` for ``arch`` with NVRTC.

    Parameters
    ----------
    source : str
        The translation unit. Kernels meant to be looked up by name should be ``extern "C"``.
    arch : str
        Target architecture, e.g. ``"sm_80"``, ``"sm_90"`` or ``"sm_90a"``.
    output : {"cubin", "ltoir", "ptx"}
        What to produce: a cubin for ``arch``, LTO-IR (``-dlto``) for ``arch``, or PTX for the
        matching virtual architecture.
    name : str
        File name of the source, as it appears in the log.
    options : sequence of str
        Further NVRTC options (``-std=c++17`` is always given), e.g. ``["--use_fast_math"]``.
    include_dirs : sequence of str, optional
        Header directories; by default those of the CUDA runtime wheel (:func:`cuda_include_dirs`).

    Returns
    -------
    Compiled

    Raises
    ------
    InvalidOptionError
        For an unknown ``output`` or a malformed ``arch``.
    LibraryError
        If compilation fails; the message ends with the compiler log.
    """
    if output not in _OUTPUTS:
        raise InvalidOptionError(f"output must be one of {sorted(_OUTPUTS)}, got {output!r}")
    sm = check_arch(arch)
    prefix, extra, get_size, get_data = _OUTPUTS[output]
    target = arch if prefix == "sm_" else f"{prefix}{arch[3:]}"
    dirs = cuda_include_dirs() if include_dirs is None else include_dirs
    flags = [f"-arch={target}", "-std=c++17", *([extra] if extra else []), *(f"-I{d}" for d in dirs), *options]

    from .bindings.nvrtc import LIB

    program = ctypes.c_void_p()
    LIB.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0, None, None)
    try:
        argv = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
        try:
            LIB.nvrtcCompileProgram(program, len(flags), argv)
        except LibraryError as exc:
            log = _text(read_sized(LIB.nvrtcGetProgramLogSize, LIB.nvrtcGetProgramLog, program))
            raise LibraryError(
                f"NVRTC could not compile {name} for sm_{sm} ({exc.status}):\n{log}",
                status=exc.status,
                code=exc.code,
            ) from exc
        log = _text(read_sized(LIB.nvrtcGetProgramLogSize, LIB.nvrtcGetProgramLog, program))
        code = read_sized(getattr(LIB, get_size), getattr(LIB, get_data), program)
    finally:
        LIB.nvrtcDestroyProgram(ctypes.byref(program))
    return Compiled(code, output, arch, log)


_FUNCTION = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")


def ptxas_resources(log: str) -> dict[str, KernelResources]:
    """Parse a ptxas ``-v`` report into per-function resources.

    Parameters
    ----------
    log : str
        NVRTC or nvJitLink log containing ``ptxas info`` lines.

    Returns
    -------
    dict[str, KernelResources]
        Keyed by (mangled) function name; empty when the log has no report.
    """
    found: dict[str, list[int]] = {}
    current = None
    for line in log.splitlines():
        if match := _FUNCTION.search(line):
            current = match.group(1)
            found[current] = [0, 0, 0, 0]
        elif current is not None and (match := _FRAME.search(line)):
            found[current][1:] = [int(g) for g in match.groups()]
        elif current is not None and (match := _REGISTERS.search(line)):
            found[current][0] = int(match.group(1))
    return {fn: KernelResources(*values) for fn, values in found.items()}
