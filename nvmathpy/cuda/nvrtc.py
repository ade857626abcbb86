"""Compile CUDA C++ source with NVRTC, for one GPU architecture, without needing a GPU.

:func:`compile_cuda` returns a cubin (ready to load on that architecture), LTO-IR (to be linked
by nvJitLink or handed to cuFFT as a callback) or PTX, together with the compiler log. Cubins are
compiled with ``--ptxas-options=-v``, so the log always carries ptxas's resource report;
:func:`ptxas_resources` reads registers, stack and spills per function out of it. The include
directories of the CUDA runtime wheel (``cuda_fp16.h``, ``cuda_runtime.h``, ``crt/``) are passed
explicitly: NVRTC does not find them by itself. :func:`cuda_include_dirs` looks for them in the CUDA
runtime wheel and in a system CUDA toolkit (``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda*``), and
completes a wheel that lacks the ``crt/`` headers (``nvidia-cuda-crt`` not installed) from a toolkit;
:func:`header_available` tells the kernel generators whether an optional header (``mma.h``) can be
compiled here at all.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidOptionError, LibraryError
from .ffi import read_sized

__all__ = ["Compiled", "KernelResources", "check_arch", "compile_cuda", "cuda_include_dirs", "header_available",
           "ptxas_resources", "resolve_include_dirs"]

_LOG = logging.getLogger("nvmathpy")

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


#: Headers the generated kernels include, directly or through another header (relative paths). A
#: directory set that lacks one of them is completed from the first toolkit that has it.
KERNEL_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "mma.h", "crt/mma.h")
#: Where system CUDA toolkits are looked for after ``CUDA_HOME`` / ``CUDA_PATH`` (newest first).
SYSTEM_TOOLKIT_GLOBS = ("/usr/local/cuda", "/usr/local/cuda-*")
_TOOLKIT_SUBDIRS = ("include", "targets/x86_64-linux/include", "targets/sbsa-linux/include")
_CUDA_VERSION = re.compile(r"#define\s+CUDA_VERSION\s+(\d+)")


def _wheel_include_dir() -> str | None:
    """The include directory of the installed CUDA runtime wheel, or ``None``."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:  # then loading NVRTC itself reports what to install
        return None
    return find_nvidia_header_directory("cudart") or None


def _toolkit_roots() -> list[str]:
    """Candidate toolkit roots: ``CUDA_HOME``, ``CUDA_PATH``, then :data:`SYSTEM_TOOLKIT_GLOBS`."""
    roots = [os.environ[name] for name in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(name)]
    for pattern in SYSTEM_TOOLKIT_GLOBS:
        roots += sorted(glob.glob(pattern), reverse=True)
    return roots


def toolkit_include_dirs(roots: Sequence[str]) -> list[str]:
    """The distinct header directories (with ``cuda_runtime.h``) of the toolkits under ``roots``."""
    found: list[str] = []
    for root in roots:
        for sub in _TOOLKIT_SUBDIRS:
            path = os.path.join(root, sub)
            if os.path.isfile(os.path.join(path, "cuda_runtime.h")):
                real = os.path.realpath(path)
                if real not in {os.path.realpath(f) for f in found}:
                    found.append(path)
                break
    return found


def _cuda_major(include_dir: str) -> int | None:
    """The CUDA major version ``cuda.h`` in ``include_dir`` declares (``None`` if unreadable)."""
    try:
        with open(os.path.join(include_dir, "cuda.h"), errors="replace") as f:
            match = _CUDA_VERSION.search(f.read())
    except OSError:
        return None
    return int(match.group(1)) // 1000 if match else None


def resolve_include_dirs(wheel: str | None, toolkits: Sequence[str], *, major: int | None = None,
                         headers: Sequence[str] = KERNEL_HEADERS) -> tuple[str, ...]:
    """The ``-I`` directories for NVRTC: the wheel's, then each toolkit directory that provides a
    header of ``headers`` the directories before it lack.

    Parameters
    ----------
    wheel : str or None
        The CUDA runtime wheel's include directory (``None`` without the wheel).
    toolkits : sequence of str
        Toolkit include directories, in order of preference.
    major : int, optional
        NVRTC's CUDA major version: toolkits of that major are preferred to others.
    headers : sequence of str
        Relative header paths that should resolve.

    Returns
    -------
    tuple of str
        Possibly empty (then only NVRTC's built-in headers are available).

    Examples
    --------
    >>> resolve_include_dirs(None, [])
    ()
    """
    ordered = list(toolkits)
    if major is not None:
        ordered.sort(key=lambda d: _cuda_major(d) != major)  # stable: same-major toolkits first
    dirs = [wheel] if wheel else []
    for header in headers:
        if _found(header, dirs):
            continue
        extra = next((d for d in ordered if _found(header, (d,))), None)
        if extra is not None:
            dirs.append(extra)
    return tuple(dirs)


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Return the header directories NVRTC is given (see :func:`resolve_include_dirs`).

    The CUDA runtime wheel's directory comes first; a system toolkit's is added when it provides a
    header the wheel lacks (the ``crt/`` headers when ``nvidia-cuda-crt`` is not installed).
    """
    try:
        from .bindings.nvrtc import version

        major: int | None = version()[0]
    except Exception:  # noqa: BLE001 - no NVRTC: compiling reports that itself
        major = None
    dirs = resolve_include_dirs(_wheel_include_dir(), toolkit_include_dirs(_toolkit_roots()), major=major)
    missing = [h for h in KERNEL_HEADERS if not _found(h, dirs)]
    if _LOG.isEnabledFor(logging.INFO):
        _LOG.info("NVRTC include directories: %s%s", list(dirs),
                  f" (not found: {', '.join(missing)})" if missing else "")
    return dirs


def _found(header: str, dirs: Sequence[str]) -> bool:
    return any(os.path.isfile(os.path.join(d, header)) for d in dirs)


def header_available(header: str) -> bool:
    """Whether ``header`` (a path relative to an include directory, e.g. ``"crt/mma.h"``) is found
    in :func:`cuda_include_dirs`."""
    return _found(header, cuda_include_dirs())


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
