"""cuBLASLt algorithms as data: serialisation for wisdom, and the validity check on restore.

A configured ``cublasLtMatmulAlgo_t`` is 64 opaque bytes that identify one kernel configuration
for one cuBLASLt version; wisdom stores them as hex beside the readable config attributes (keyed
by GPU, compute capability and cuBLASLt version, so the bytes are only replayed where they were
made). :func:`check` asks ``cublasLtMatmulAlgoCheck`` whether a restored algorithm still suits a
problem (and how much workspace it needs).

``cublasLtMatmulAlgoCheck`` is declared here because :mod:`nvmathpy.cuda.bindings.cublaslt`
does not declare it yet (it belongs there).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_void_p

from .bindings import cublaslt
from .bindings.cublaslt import HeuristicResult, MatmulAlgo
from .ffi import STATUS, Fn, Library, enum_names

__all__ = ["ALGO_BYTES", "LIB", "algo_from_hex", "algo_to_hex", "check", "summary"]

#: Size of ``cublasLtMatmulAlgo_t``.
ALGO_BYTES = ctypes.sizeof(MatmulAlgo)

LIB = Library(
    "cublasLt",
    enum_names(cublaslt.Status),
    [
        Fn(
            "cublasLtMatmulAlgoCheck",
            STATUS,
            # handle, desc, Adesc, Bdesc, Cdesc, Ddesc, algo, result
            (*[c_void_p] * 6, POINTER(MatmulAlgo), POINTER(HeuristicResult)),
        ),
    ],
)


def algo_to_hex(algo: MatmulAlgo) -> str:
    """The 64 bytes of ``algo`` as lowercase hex (128 characters).

    Examples
    --------
    >>> algo = MatmulAlgo()
    >>> algo.data[0] = 0x2A
    >>> algo_to_hex(algo)[:4], len(algo_to_hex(algo))
    ('2a00', 128)
    """
    return bytes(algo).hex()


def algo_from_hex(text: str) -> MatmulAlgo:
    """The algorithm :func:`algo_to_hex` wrote.

    Raises
    ------
    ValueError
        If ``text`` is not the hex of exactly 64 bytes.
    """
    raw = bytes.fromhex(text)
    if len(raw) != ALGO_BYTES:
        raise ValueError(f"a cuBLASLt algorithm is {ALGO_BYTES} bytes; got {len(raw)} from {text[:16]!r}...")
    return MatmulAlgo.from_buffer_copy(raw)


def summary(algo: MatmulAlgo) -> dict[str, int]:
    """The readable identity of ``algo``: id, tile, split-K, stages and the rest of its config."""
    return {name.lower(): value for name, value in cublaslt.algo_config(algo).items()}


def check(handle: int, desc: int, a: int, b: int, c: int, d: int, algo: MatmulAlgo) -> HeuristicResult:
    """Run ``cublasLtMatmulAlgoCheck``; raises :class:`~nvmathpy.errors.LibraryError` if unsupported."""
    result = HeuristicResult()
    LIB.cublasLtMatmulAlgoCheck(handle, desc, a, b, c, d, ctypes.byref(algo), ctypes.byref(result))
    return result
