"""Link device code with nvJitLink: LTO-IR (and cubins or PTX) into one cubin for one architecture.

Link-time optimisation runs here, so the ptxas resource report of an LTO build appears in the
link log (``-Xptxas=-v`` is always passed) and is read with the same
:func:`~nvmathpy.cuda.nvrtc.ptxas_resources`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from ..errors import InvalidOptionError, LibraryError
from .ffi import read_sized
from .nvrtc import Compiled, check_arch

__all__ = ["link"]


def _log(lib: object, handle: ctypes.c_void_p, which: str) -> str:
    raw = read_sized(getattr(lib, f"nvJitLinkGet{which}LogSize"), getattr(lib, f"nvJitLinkGet{which}Log"), handle)
    return raw.rstrip(b"\0").decode(errors="replace")


def link(modules: Sequence[Compiled], *, options: Sequence[str] = ()) -> Compiled:
    """Link compiled modules into a cubin.

    Parameters
    ----------
    modules : sequence of Compiled
        Outputs of :func:`~nvmathpy.cuda.nvrtc.compile_cuda` for one architecture; LTO-IR
        modules turn on link-time optimisation.
    options : sequence of str
        Further nvJitLink options, e.g. ``["-O3"]`` or ``["-maxrregcount=64"]``.

    Returns
    -------
    Compiled
        A ``"cubin"`` whose ``log`` is the linker's info log (with the ptxas report).

    Raises
    ------
    InvalidOptionError
        If ``modules`` is empty or mixes architectures.
    LibraryError
        If linking fails; the message ends with the linker's error log.
    """
    archs = {m.arch for m in modules}
    if len(archs) != 1:
        raise InvalidOptionError(f"link needs modules for exactly one architecture, got {sorted(archs)}")
    arch = archs.pop()
    check_arch(arch)
    flags = [f"-arch={arch}", "-Xptxas=-v", *(["-lto"] if any(m.kind == "ltoir" for m in modules) else []), *options]

    from .bindings.nvjitlink import LIB, InputType

    handle = ctypes.c_void_p()
    argv = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
    LIB.nvJitLinkCreate(ctypes.byref(handle), len(flags), argv)
    try:
        try:
            for index, module in enumerate(modules):
                kind = InputType[module.kind.upper()]
                LIB.nvJitLinkAddData(handle, kind, module.code, len(module.code), f"module{index}".encode())
            LIB.nvJitLinkComplete(handle)
        except LibraryError as exc:
            raise LibraryError(
                f"nvJitLink could not link {len(modules)} module(s) for {arch} ({exc.status}):\n"
                f"{_log(LIB, handle, 'Error')}",
                status=exc.status,
                code=exc.code,
            ) from exc
        cubin = read_sized(LIB.nvJitLinkGetLinkedCubinSize, LIB.nvJitLinkGetLinkedCubin, handle)
        return Compiled(cubin, "cubin", arch, _log(LIB, handle, "Info"))
    finally:
        LIB.nvJitLinkDestroy(ctypes.byref(handle))
