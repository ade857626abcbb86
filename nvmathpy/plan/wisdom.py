"""Wisdom: winners of autotuning, remembered on disk so a later process skips the timing.

An entry is keyed by the problem, a description of the device (CPU model, cores, BLAS and
library versions; GPU name, compute capability and library versions) and the nvmathpy
version, and holds the winning candidate's configuration plus what the engine needs to be
fast again without re-planning (e.g. FFTW's exported wisdom as text).

The store is one JSON file (never pickle) in the cache directory:
``$NVMATHPY_CACHE_DIR``, else ``$XDG_CACHE_HOME/nvmathpy``, else ``~/.cache/nvmathpy``.
Writes take an advisory lock, re-read the file, merge and replace it atomically, so two
processes writing at once lose nothing and never leave a garbled file. A corrupt file (not
UTF-8, not JSON) or one of a foreign format version is ignored with a warning and rebuilt on
the next write; a store that cannot be written warns, and the tuned plan stands unremembered.
Entries whose choice is malformed, or whose saved state the engine cannot use, are skipped
when planning (:meth:`nvmathpy.plan.Plan.plan`).
``NVMATHPY_WISDOM=off`` disables reading and writing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

from .._version import __version__
from ..errors import InvalidOperandError
from .problem import Problem, canonical_json

try:  # advisory file locks are POSIX-only; elsewhere atomic replace alone keeps files whole
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Wisdom", "WisdomWarning", "cache_dir", "default_wisdom", "wisdom_enabled"]

FORMAT = "nvmathpy-wisdom"
SCHEMA = 1
FILE_NAME = "wisdom.json"
#: The longest a write waits for another process's lock before giving up (with a warning).
LOCK_TIMEOUT = 10.0
#: A wisdom file beyond this size is not read (it is no wisdom file nvmathpy wrote).
MAX_BYTES = 64 << 20


class WisdomWarning(UserWarning):
    """A wisdom file was unreadable or of a foreign version and is being ignored."""


def cache_dir() -> Path:
    """The directory for nvmathpy's on-disk caches (wisdom, compiled kernels)."""
    explicit = os.environ.get("NVMATHPY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nvmathpy"


def wisdom_enabled() -> bool:
    """False when ``NVMATHPY_WISDOM`` is ``off`` (or ``0``/``false``/``no``)."""
    return os.environ.get("NVMATHPY_WISDOM", "on").strip().lower() not in ("off", "0", "false", "no")


def entry_key(problem: Problem, device: dict[str, Any]) -> str:
    """The key of a wisdom entry: a hash of problem, device description and nvmathpy version.

    Memoised per (problem, device) (a plan built from wisdom looks its key up each time)."""
    return _entry_key(problem, json.dumps(device, sort_keys=True, default=str))


@functools.lru_cache(maxsize=1024)
def _entry_key(problem: Problem, device_json: str) -> str:
    text = canonical_json({"problem": problem.as_dict(), "device": json.loads(device_json), "nvmathpy": __version__})
    return hashlib.sha256(text.encode()).hexdigest()


class Wisdom:
    """A wisdom store backed by one JSON file.

    Parameters
    ----------
    path
        The JSON file. ``None`` uses ``cache_dir() / "wisdom.json"`` (resolved on each use,
        so changing ``NVMATHPY_CACHE_DIR`` takes effect).
    enabled
        ``None`` follows ``NVMATHPY_WISDOM``; ``False`` makes every lookup miss and every
        record a no-op.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> w = Wisdom(pathlib.Path(tempfile.mkdtemp()) / "w.json", enabled=True)
    >>> p = Problem.of("matmul", m=2)
    >>> w.record(p, {"space": "cpu"}, {"candidate": "gemm"})
    >>> w.lookup(p, {"space": "cpu"})["choice"]
    {'candidate': 'gemm'}
    """

    def __init__(self, path: Path | str | None = None, enabled: bool | None = None):
        self._path = Path(path) if path is not None else None
        self._enabled = enabled
        self._lock = threading.Lock()
        self._loaded_from: tuple[str, int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else cache_dir() / FILE_NAME

    @property
    def enabled(self) -> bool:
        return wisdom_enabled() if self._enabled is None else self._enabled

    # -- reading ---------------------------------------------------------------------------

    def _read_file(self) -> dict[str, dict[str, Any]]:
        """Read the file's entries; an unreadable or foreign file yields none, with a warning."""
        path = self.path
        try:
            return _load(path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            warnings.warn(f"nvmathpy: cannot read wisdom file {path}: {exc}; ignoring it", WisdomWarning, stacklevel=3)
        except _Unusable as exc:
            warnings.warn(f"nvmathpy: wisdom file {path} {exc}; ignoring it, it will be rebuilt", WisdomWarning,
                          stacklevel=3)
        return {}

    def _current_entries(self) -> dict[str, dict[str, Any]]:
        """The entries, re-read only when the file changed since the last read."""
        path = self.path
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (str(path), 0, -1)
        with self._lock:
            if stamp != self._loaded_from:
                self._entries = self._read_file() if stamp[2] >= 0 else {}
                self._loaded_from = stamp
            return self._entries

    def lookup(self, problem: Problem, device: dict[str, Any]) -> dict[str, Any] | None:
        """The entry recorded for ``problem`` on ``device`` (a dict with ``"choice"``), or ``None``."""
        if not self.enabled:
            return None
        return self._current_entries().get(entry_key(problem, device))

    def entries(self) -> list[dict[str, Any]]:
        """All entries in the store (each with ``problem``, ``device``, ``choice``, ...)."""
        if not self.enabled:
            return []
        return list(self._current_entries().values())

    # -- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """The store's advisory lock, waited for at most :data:`LOCK_TIMEOUT` seconds
        (``OSError`` after that, or when the lock file is not a regular file)."""
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        fd = _open_regular(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"the lock {path}.lock is held by another process for over "
                                           f"{LOCK_TIMEOUT:g} s") from None
                    time.sleep(0.01)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _write(self, entries: dict[str, dict[str, Any]], destination: Path | None = None) -> None:
        """Replace ``destination`` (default: the store's file) atomically: a temp file in the
        same directory, then ``os.replace``."""
        path = self.path if destination is None else destination
        payload = json.dumps({"format": FORMAT, "schema": SCHEMA, "entries": entries}, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            if hasattr(os, "fchmod"):  # mkstemp's 0600 would hide a shared cache from its other users
                os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if destination is None:
            with self._lock:
                self._loaded_from = None  # re-stat on next read

    def _update(self, change) -> None:
        with self._file_lock():
            entries = self._read_file()
            change(entries)
            self._write(entries)

    def record(
        self,
        problem: Problem,
        device: dict[str, Any],
        choice: dict[str, Any],
        *,
        timings: dict[str, float] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Remember ``choice`` as the winner for ``problem`` on ``device``.

        ``timings`` (seconds per candidate) and ``extra`` (engine state needed to be fast
        again, JSON-serialisable) are stored beside it.
        """
        if not self.enabled:
            return
        entry = {
            "problem": problem.as_dict(),
            "device": device,
            "nvmathpy": __version__,
            "choice": choice,
            "timings": timings or {},
            "extra": extra or {},
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        json.dumps(entry)  # fail here, before touching the file, if anything is not JSON
        key = entry_key(problem, device)
        try:
            self._update(lambda entries: entries.__setitem__(key, entry))
        except OSError as exc:  # a read-only or broken cache directory: the result stands, unremembered
            warnings.warn(f"nvmathpy: cannot write wisdom file {self.path}: {exc}; the choice is not remembered",
                          WisdomWarning, stacklevel=3)

    def clear(self) -> None:
        """Remove every entry."""
        with self._file_lock():
            self._write({})

    def export(self, destination: Path | str) -> int:
        """Write all entries to ``destination`` (same format); return how many."""
        entries = dict(self._current_entries()) if self.enabled else {}
        target = Path(destination).resolve()
        if not target.parent.is_dir():
            raise FileNotFoundError(f"cannot export wisdom to {destination}: {target.parent} is not a directory")
        self._write(entries, target)
        return len(entries)

    def import_(self, source: Path | str) -> int:
        """Merge the entries of the wisdom file ``source`` into this store; return how many.
        A source that is missing, unreadable, corrupt or of a foreign format raises
        :class:`~nvmathpy.errors.InvalidOperandError` (nothing is merged)."""
        try:
            incoming = _load(Path(source))
        except (OSError, _Unusable) as exc:
            raise InvalidOperandError(f"cannot import wisdom from {source}: {exc}") from None
        self._update(lambda entries: entries.update(incoming))
        return len(incoming)


class _Unusable(Exception):
    """A wisdom file that was read but holds no usable table (the message says why)."""


def _load(path: Path) -> dict[str, dict[str, Any]]:
    """The usable entries of the wisdom file ``path`` (``OSError`` when it cannot be read,
    :class:`_Unusable` when it is not a wisdom file of this format)."""
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise _Unusable(f"is larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested past the parser's depth
        raise _Unusable("is corrupt (not valid JSON)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("schema") != SCHEMA:
        found = (f"format {data.get('format')!r}, schema {data.get('schema')!r}" if isinstance(data, dict)
                 else f"a JSON {type(data).__name__}")
        raise _Unusable(f"has a foreign format ({found}; expected format {FORMAT!r}, schema {SCHEMA})")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise _Unusable("has no entry table")
    return {k: v for k, v in entries.items()
            if isinstance(v, dict) and "choice" in v and isinstance(v.get("extra", {}), dict)}


def _open_regular(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened without blocking (a FIFO or device never hangs the
    caller), checked to be a regular file; ``OSError`` otherwise."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0), 0o644)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other special file")
            raise OSError(f"{path} is {kind}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


_DEFAULT = Wisdom()


def default_wisdom() -> Wisdom:
    """The process-wide store at the default location."""
    return _DEFAULT
