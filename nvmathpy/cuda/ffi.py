"""Declare a C library's functions once, in a table, and call them with their status checked.

Each binding module lists its functions as :class:`Fn` rows (name, return type, argument types,
copied from the vendor header) and wraps them in one :class:`Library`. The library is loaded and
each symbol resolved on first use. Functions that return the library's status code raise
:class:`~nvmathpy.errors.LibraryError` carrying the status name when the code is nonzero. When
one marked ``device=True`` (handle creation) fails, the library's ``unavailable`` check
(:func:`nvmathpy.cuda.driver.device_unavailable` for the device libraries) is asked whether CUDA is
usable at all; if not, :class:`~nvmathpy.errors.ExecutionSpaceUnavailableError` naming the cause is
raised instead, since a missing driver surfaces there as an unhelpful status.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LibraryError, MissingDependencyError
from .loader import LoadedLibrary, load_library

__all__ = ["STATUS", "Fn", "Library", "enum_names", "new_handle", "read_sized", "versioned"]

STATUS = "status"
"""Return-type marker: the function returns the library's status code (0 is success)."""


@dataclass(frozen=True)
class Fn:
    """One C function as declared in the vendor header.

    Attributes
    ----------
    name : str
        The API name; also the attribute name on the :class:`Library`.
    restype : object
        :data:`STATUS`, a ctypes type, or ``None`` for ``void``.
    argtypes : tuple
        ctypes argument types, in order.
    symbols : Mapping[int, str]
        Exported symbol per CUDA major where it differs from ``name``.
    device : bool
        Whether a failure may mean "no usable CUDA device" (handle creation).
    """

    name: str
    restype: Any
    argtypes: tuple[Any, ...]
    symbols: Mapping[int, str] = field(default_factory=dict)
    device: bool = False

    def symbol(self, cuda_major: int) -> str:
        """Return the symbol this function is exported as by a library of ``cuda_major``."""
        return self.symbols.get(cuda_major, self.name)


def versioned(name: str, restype: Any, argtypes: tuple[Any, ...], minor: dict[int, int]) -> Fn:
    """Declare a function whose header maps it onto ``__<name>_<major>_<minor>``.

    Parameters
    ----------
    name, restype, argtypes
        As for :class:`Fn`.
    minor : dict[int, int]
        The versioned symbol's minor per CUDA major, e.g. ``{12: 0, 13: 0}``.
    """
    return Fn(name, restype, argtypes, {major: f"__{name}_{major}_{m}" for major, m in minor.items()})


def enum_names(status_enum: type[enum.IntEnum]) -> Callable[[int], str]:
    """Return a function mapping a status code to its header name (``UNKNOWN_<code>`` if absent)."""

    def name(code: int) -> str:
        try:
            return status_enum(code).name
        except ValueError:
            return f"UNKNOWN_{code}"

    return name


def new_handle(create: Callable[..., int], *args: Any, ctype: type = ctypes.c_void_p) -> int:
    """Call ``create(&out, *args)`` (the C idiom for constructors) and return ``out``.

    Parameters
    ----------
    create : callable
        A bound constructor such as ``LIB.cublasLtCreate``.
    *args
        The constructor's arguments after the output pointer.
    ctype : type
        ctypes type of the handle (``c_void_p`` for opaque pointers, ``c_int`` for cuFFT plans).
    """
    out = ctype()
    create(ctypes.byref(out), *args)
    return out.value


def read_sized(get_size: Callable[..., int], get_data: Callable[..., int], obj: Any) -> bytes:
    """Fetch a variable-size result the C way: ask its size, then have it copied into a buffer.

    Parameters
    ----------
    get_size : callable
        ``get_size(obj, size_t*)``, e.g. ``LIB.nvrtcGetCUBINSize``.
    get_data : callable
        ``get_data(obj, void*)``, e.g. ``LIB.nvrtcGetCUBIN``.
    obj : object
        The program or link handle.
    """
    size = ctypes.c_size_t()
    get_size(obj, ctypes.byref(size))
    buffer = ctypes.create_string_buffer(size.value)
    get_data(obj, buffer)
    return buffer.raw


class Library:
    """The declared functions of one CUDA library, resolved lazily as attributes.

    Parameters
    ----------
    libname : str
        cuda-pathfinder name of the library (see :data:`nvmathpy.cuda.loader.LIBRARIES`).
    status_name : Callable[[int], str]
        Maps a nonzero status code to its name from the header.
    functions : Sequence[Fn]
        The declaration table.
    unavailable : Callable[[], Exception or None], optional
        Asked when a ``device=True`` function fails: the error that explains why CUDA cannot be
        used at all, or ``None`` when it can (then the library's own error is raised).
    """

    def __init__(
        self,
        libname: str,
        status_name: Callable[[int], str],
        functions: Sequence[Fn],
        unavailable: Callable[[], Exception | None] | None = None,
    ):
        self.libname = libname
        self.status_name = status_name
        self.functions = {fn.name: fn for fn in functions}
        self.unavailable = unavailable

    @property
    def loaded(self) -> LoadedLibrary:
        """The loaded shared library (loads it on first access)."""
        return load_library(self.libname)

    def __getattr__(self, name: str) -> Any:
        fn = self.__dict__.get("functions", {}).get(name)
        if fn is None:
            raise AttributeError(f"{self.libname} declares no function {name!r}")
        cfunc = self._bind(fn)
        setattr(self, name, cfunc)  # later lookups find it in the instance dict directly
        return cfunc

    def resolve_all(self) -> dict[str, str]:
        """Resolve every declared function; return the symbol each one is bound to.

        Raises
        ------
        MissingDependencyError
            If the loaded library lacks a declared symbol (too old a release).
        """
        major = self.loaded.cuda_major
        for name in self.functions:
            getattr(self, name)
        return {name: fn.symbol(major) for name, fn in self.functions.items()}

    def _bind(self, fn: Fn) -> Any:
        lib = self.loaded
        symbol = fn.symbol(lib.cuda_major)
        try:
            cfunc = lib.cdll[symbol]  # a fresh function object: its types are ours alone
        except AttributeError as exc:
            raise MissingDependencyError(
                f"{lib.path} does not export {symbol} (needed for {fn.name}); install a newer "
                f"CUDA {lib.cuda_major} wheel of {self.libname}"
            ) from exc
        cfunc.argtypes = fn.argtypes
        if fn.restype is STATUS:
            cfunc.restype = ctypes.c_int
            cfunc.errcheck = self._checker(fn)
        else:
            cfunc.restype = fn.restype
        return cfunc

    def _checker(self, fn: Fn) -> Callable[..., int]:
        def check(code: int, _func: Any, _args: tuple[Any, ...]) -> int:
            if code:
                raise self.error(fn, code)
            return code

        return check

    def error(self, fn: Fn, code: int) -> Exception:
        """Build the exception for ``fn`` having returned the nonzero status ``code``."""
        status = self.status_name(code)
        error = LibraryError(f"{fn.name} failed: {status} ({code})", status=status, code=code)
        if fn.device and self.unavailable is not None:
            unavailable = self.unavailable()
            if unavailable is not None:
                unavailable.__cause__ = error
                return unavailable
        return error
