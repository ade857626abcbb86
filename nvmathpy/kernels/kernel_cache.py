"""Compiling generated kernels through NVRTC, with an on-disk cache and an in-process cache on top.

Each entry is one file ``<cache_dir()>/kernels/<key>.nvmk`` named by the SHA-256 of what
determines the output (source, output kind, architecture, options, NVRTC version). A file holds a
small JSON header (kind, arch, log, SHA-256 of the code) and the code; it is written to a
temporary file and moved into place with :func:`os.replace`, so readers never see half an entry.
An unreadable or inconsistent entry is ignored with a warning and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan.wisdom import _open_regular, cache_dir

if TYPE_CHECKING:  # the CUDA stack is imported only when something is compiled
    from ..cuda.nvrtc import Compiled

__all__ = ["KernelCache", "compile_kernel", "default_kernel_cache"]

_MAGIC = b"NVMK1\n"


class KernelCache:
    """Compiled kernels by content key, in memory and on disk.

    Parameters
    ----------
    directory : path, optional
        Where entries live; by default ``cache_dir() / "kernels"``, read at each compile (so
        ``NVMATHPY_CACHE_DIR`` set later is honoured).

    Attributes
    ----------
    memory_hits, disk_hits, compiles : int
        Counters of how each :meth:`compile` was answered.

    Examples
    --------
    >>> cache = KernelCache()
    >>> src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'
    >>> first = cache.compile(src, "sm_90")
    >>> cache.compile(src, "sm_90") is first, cache.compiles, cache.memory_hits
    (True, 1, 1)
    """

    def __init__(self, directory: str | os.PathLike | None = None):
        self._directory = Path(directory) if directory is not None else None
        self._memory: dict[str, Compiled] = {}
        self._lock = threading.Lock()
        self.memory_hits = self.disk_hits = self.compiles = 0

    @property
    def directory(self) -> Path:
        """The directory holding the entries."""
        return self._directory if self._directory is not None else cache_dir() / "kernels"

    @staticmethod
    def key(source: str, arch: str, output: str = "cubin", options: Sequence[str] = ()) -> str:
        """The content key of a compilation (includes the NVRTC version)."""
        from ..cuda.bindings.nvrtc import version

        text = json.dumps({"source": source, "arch": arch, "output": output, "options": list(options),
                           "nvrtc": list(version())}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, key: str) -> Path:
        """The file of entry ``key``."""
        return self.directory / f"{key}.nvmk"

    def compile(self, source: str, arch: str, *, output: str = "cubin", options: Sequence[str] = (),
                name: str = "nvmathpy_kernel.cu") -> Compiled:
        """Return the compiled ``source`` for ``arch``: from memory, from disk, or compiled now.

        Parameters are those of :func:`nvmathpy.cuda.nvrtc.compile_cuda`.
        """
        key = self.key(source, arch, output, options)
        with self._lock:
            found = self._memory.get(key)
            if found is not None:
                self.memory_hits += 1
                return found
        compiled = self._read(key)
        if compiled is not None:
            self.disk_hits += 1
        else:
            from ..cuda.nvrtc import compile_cuda

            compiled = compile_cuda(source, arch, output=output, name=name, options=options)
            self.compiles += 1
            self._write(key, compiled)
        with self._lock:
            return self._memory.setdefault(key, compiled)

    def clear_memory(self) -> None:
        """Forget the in-process entries (the disk entries stay)."""
        with self._lock:
            self._memory.clear()

    def _read(self, key: str) -> Compiled | None:
        from ..cuda.nvrtc import Compiled

        path = self.path(key)
        try:  # non-blocking and regular files only: a FIFO or device never hangs the caller
            with os.fdopen(_open_regular(path, os.O_RDONLY), "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            warnings.warn(f"nvmathpy: cannot read kernel cache entry {path} ({exc}); recompiling", stacklevel=3)
            return None
        try:
            if not raw.startswith(_MAGIC):
                raise ValueError("not a kernel cache entry")
            header_end = raw.index(b"\n", len(_MAGIC))
            header = json.loads(raw[len(_MAGIC):header_end])
            code = raw[header_end + 1:]
            if header.get("key") != key:  # a swapped or foreign entry: the code of another source
                raise ValueError(f"the entry was written for key {str(header.get('key'))[:16]!r}")
            if hashlib.sha256(code).hexdigest() != header["sha256"]:
                raise ValueError("code does not match its checksum")
            return Compiled(code, header["kind"], header["arch"], header["log"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"nvmathpy: ignoring corrupt kernel cache entry {path} ({exc}); recompiling",
                          stacklevel=3)
            return None

    def _write(self, key: str, compiled: Compiled) -> None:
        header = json.dumps({"key": key, "kind": compiled.kind, "arch": compiled.arch, "log": compiled.log,
                             "sha256": hashlib.sha256(compiled.code).hexdigest()})
        directory = self.directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}-", suffix=".tmp")
        except OSError as exc:
            warnings.warn(f"nvmathpy: cannot write kernel cache entry in {directory} ({exc})", stacklevel=3)
            return
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_MAGIC + header.encode() + b"\n" + compiled.code)
            os.replace(tmp, self.path(key))
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            warnings.warn(f"nvmathpy: cannot write kernel cache entry in {directory} ({exc})", stacklevel=3)

_DEFAULT = KernelCache()


def default_kernel_cache() -> KernelCache:
    """The process-wide :class:`KernelCache` (under ``cache_dir() / "kernels"``)."""
    return _DEFAULT


def compile_kernel(source: str, arch: str, *, output: str = "cubin", options: Sequence[str] = (),
                   name: str = "nvmathpy_kernel.cu") -> Compiled:
    """Compile through the default cache (see :meth:`KernelCache.compile`).

    Examples
    --------
    >>> from nvmathpy.kernels.tiny_batched import tiny_solve_kernel
    >>> kern = tiny_solve_kernel("float64", 8, 1)
    >>> compiled = compile_kernel(kern.source, "sm_90")
    >>> compiled.kind, compiled.resources[kern.name].spill_stores
    ('cubin', 0)
    """
    return _DEFAULT.compile(source, arch, output=output, options=options, name=name)
