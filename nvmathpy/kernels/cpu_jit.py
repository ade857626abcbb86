"""Compiling generated C for the host with the system's C compiler, cached on disk.

The CPU twin of :mod:`.kernel_cache`: generated elementwise kernels (see :mod:`.emit_c`) are
compiled once with ``$CC`` (default ``cc``) into a shared library,
``-O3 -march=native`` with OpenMP SIMD loops whose ``log``/``tanh``/``erf`` calls
vectorise through glibc's libmvec, and loaded with :mod:`ctypes`. Entries live in
``<cache_dir()>/cpu_kernels/<key>.so``, named by the SHA-256 of the source, the flags, the
compiler's version and the machine (``-march=native`` code belongs to this CPU); each is
written under a temporary name and moved into place, so concurrent writers never expose half
a file. Every build exports that key as :data:`KEY_SYMBOL`, compared after loading: a file
that is not provably the build of this source (swapped, foreign, truncated, without the
symbol) is rebuilt. A cache directory that cannot be used (missing and not creatable,
read-only, a file) gives one :class:`KernelCacheWarning`, and kernels are built in a
temporary directory of this process instead. An in-process memo sits on top; it and the disk
cache are bounded (:data:`MAX_LOADED`, :data:`MAX_CACHED_FILES`; least recently used first).

Without a working compiler (or with ``NVMATHPY_CPU_JIT=off``) :func:`available` is false and
callers use their NumPy evaluators instead: compiled kernels are a speed-up, never a
requirement.
"""

from __future__ import annotations

import contextlib
import ctypes
import _ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
import warnings
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from ..errors import MissingDependencyError
from ..plan.wisdom import cache_dir

__all__ = ["available", "compile_c", "compile_extension", "KernelCacheWarning", "KEY_SYMBOL", "C_HELPER_THREADS", "FLAGS", "SIMD_DECLARATIONS",
           "VECTOR_FUNCTIONS"]

#: Compiler flags: fast but IEEE-faithful (no -ffast-math: NaN and infinity behave as in NumPy).
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd")
_LIBS = ("-lmvec", "-lm")
#: Math functions generated kernels call inside SIMD loops (vector variants from libmvec).
VECTOR_FUNCTIONS = ("log", "tanh", "erf")
#: Declarations telling the compiler those vector variants exist (glibc declares them only
#: under -ffast-math, which would also break NaN handling).
SIMD_DECLARATIONS = "#include <math.h>\n" + "".join(
    f"#pragma omp declare simd notinbranch\n{ctype} {name}{suffix}({ctype});\n"
    for name in VECTOR_FUNCTIONS for ctype, suffix in (("float", "f"), ("double", ""))
)
#: C for kernels that share work with helper threads (needs ``#define _GNU_SOURCE`` before
#: the first include): ``start_helpers(ids, count, fn, args, stride)`` starts up to ``count``
#: POSIX threads running ``fn`` (the ``t``-th with ``args + t * stride`` bytes, all with
#: ``args`` when ``stride`` is 0) and returns how many started. They run off the caller's core:
#: the scheduler would otherwise often leave them beside it, behind a BLAS worker that still
#: spins on the other core after its last call.
C_HELPER_THREADS = r"""
#include <pthread.h>
#include <sched.h>
#include <stddef.h>

static int start_helpers(pthread_t *ids, int count, void *(*fn)(void *), void *args, size_t stride) {
  pthread_attr_t attr, *use = 0;
  cpu_set_t others;
  const int here = sched_getcpu();
  if (count > 0 && here >= 0 && sched_getaffinity(0, sizeof others, &others) == 0) {
    CPU_CLR(here, &others);
    if (CPU_COUNT(&others) > 0 && pthread_attr_init(&attr) == 0) {
      if (pthread_attr_setaffinity_np(&attr, sizeof others, &others) == 0) use = &attr;
      else pthread_attr_destroy(&attr);
    }
  }
  int started = 0;
  while (started < count && pthread_create(&ids[started], use, fn, (char *)args + started * stride) == 0) ++started;
  if (use) pthread_attr_destroy(use);
  return started;
}
"""
#: Flags for CPython extensions (no libmvec: they call no vector math).
_EXTENSION_LIBS = ("-lm",)
_LOCK = threading.Lock()
_LOADED: "OrderedDict[str, ctypes.CDLL]" = OrderedDict()
_EXTENSIONS: "OrderedDict[str, types.ModuleType]" = OrderedDict()


def _compiler() -> str | None:
    return _which(os.environ.get("CC", "cc"))


@functools.lru_cache(maxsize=None)
def _which(name: str) -> str | None:
    """``shutil.which(name)``, looked up once per name (a lookup stats every ``PATH``
    directory, which plans asking :func:`available` on every call would pay)."""
    return shutil.which(name)


@functools.lru_cache(maxsize=None)
def _compiler_version(path: str) -> str:
    """``path --version``'s output (``""`` where it does not run), remembered in the kernel
    cache per compiler file - its real path, size and modification time - so that a process's
    first compiled kernel does not start a compiler to learn what the last process learnt (a
    new or upgraded compiler file is asked again; a wrapper such as ccache is identified by its
    own file). The memo is best effort: unreadable, it is rebuilt; writers racing lose an entry."""
    identity = _file_identity(path)
    memo_path = cache_dir() / "cpu_kernels" / "compilers.json"
    memo = _read_json(memo_path)
    if identity is not None and isinstance(memo.get(identity), str):
        return memo[identity]
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    if identity is not None and version:
        _write_json(memo_path, {**memo, identity: version})
    return version


def _file_identity(path: str) -> str | None:
    """``"<real path>|<size>|<mtime ns>"`` of the file ``path`` names, ``None`` where it cannot be read."""
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return None
    return f"{real}|{info.st_size}|{info.st_mtime_ns}"


def _read_json(path: Path) -> dict:
    """The JSON object in ``path``, ``{}`` where there is none or it is not one."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_json(path: Path, value: dict) -> None:
    """``value`` into ``path`` whole (a temporary file moved into place); nothing where the
    directory cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False,
                                         encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(fh.name, path)
    except OSError:
        with contextlib.suppress(OSError, NameError):
            os.unlink(fh.name)


@functools.lru_cache(maxsize=None)
def _works(path: str) -> bool:
    """Whether ``path`` compiles and links a vectorised ``expf`` loop (libmvec present)."""
    body = " + ".join(f"{f}f(x[i])" for f in VECTOR_FUNCTIONS) + " + " + " + ".join(f"{f}(y[i])" for f in VECTOR_FUNCTIONS)
    probe = (SIMD_DECLARATIONS + "void probe(float* x, double* y, long n) {\n#pragma omp simd\n"
             f"for (long i = 0; i < n; ++i) x[i] = {body};\n}}\n")
    try:
        _load(path, probe)
    except MissingDependencyError:
        return False
    return True


def _disabled() -> bool:
    """Whether compiling is switched off (``NVMATHPY_CPU_JIT=off``) or unsupported here."""
    if os.environ.get("NVMATHPY_CPU_JIT", "on").strip().lower() in ("off", "0", "false", "no"):
        return True
    return platform.system() != "Linux"


def available() -> bool:
    """Whether generated C kernels can be compiled here (a C compiler with libmvec, and
    ``NVMATHPY_CPU_JIT`` not ``off``)."""
    if _disabled():
        return False
    path = _compiler()
    return path is not None and _works(path)


def _key(source: str, compiler: str, flags: tuple[str, ...] = FLAGS + _LIBS, extra: tuple[str, ...] = ()) -> str:
    # (not platform.processor(): Linux answers it by starting ``uname -p``, and the CPU model is here)
    text = "\n".join([source, " ".join(flags), _compiler_version(compiler), platform.machine(), _cpu_model(), *extra])
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                return line
    except OSError:
        pass
    return ""


#: The exported symbol every build carries: the key it was built for (checked after loading).
KEY_SYMBOL = "nvmathpy_build_key"
#: At most this many libraries stay in the in-process memo (least recently used dropped first;
#: a dropped library is unloaded once nothing refers to it any more).
MAX_LOADED = 256
#: At most this many kernel files stay in the disk cache (least recently used removed first).
MAX_CACHED_FILES = 512

_WARNED: set[str] = set()
_PRIVATE: list[Path] = []


class KernelCacheWarning(UserWarning):
    """The kernel cache directory cannot be used; kernels are built in a temporary directory."""


def _stamped(source: str, key: str) -> str:
    """``source`` with :data:`KEY_SYMBOL` defined as ``key`` (the proof of what a file holds)."""
    return (f'{source}\n__attribute__((visibility("default"), used)) '
            f'const char {KEY_SYMBOL}[{len(key) + 1}] = "{key}";\n')


def _verify(path: Path, key: str) -> ctypes.CDLL:
    """``path`` loaded, checked to be the build of ``key`` (its :data:`KEY_SYMBOL`); ``OSError``
    when it is not (a foreign, swapped, truncated or older file)."""
    lib = ctypes.CDLL(str(path))
    try:
        found = (ctypes.c_char * (len(key) + 1)).in_dll(lib, KEY_SYMBOL).value.decode("ascii", "replace")
    except (ValueError, AttributeError):
        found = None
    if found != key:
        # unloaded again: the dynamic loader matches later loads by path name, so the rebuilt
        # file at this path would otherwise resolve to this wrong library
        if hasattr(_ctypes, "dlclose"):
            _ctypes.dlclose(lib._handle)
        raise OSError(f"{path} is not the build of this kernel (its key is {found!r})")
    return lib


def _private_dir() -> Path:
    """This process's own build directory (a fresh temporary one, removed at exit)."""
    if not _PRIVATE:
        import atexit

        path = Path(tempfile.mkdtemp(prefix="nvmathpy-kernels-"))
        atexit.register(shutil.rmtree, path, True)
        _PRIVATE.append(path)
    return _PRIVATE[0]


def _directories() -> list[Path]:
    """Where kernels are looked up, in order: the cache, then this process's own directory."""
    return [cache_dir() / "cpu_kernels", *_PRIVATE]


def _warn_once(directory: Path, exc: BaseException) -> None:
    if str(directory) not in _WARNED:
        _WARNED.add(str(directory))
        warnings.warn(f"nvmathpy: the kernel cache {directory} cannot be used ({exc}); compiled kernels are built "
                      "in a temporary directory for this process", KernelCacheWarning, stacklevel=4)


def _build(compiler: str, source: str, directory: Path | None = None, flags: tuple[str, ...] = FLAGS,
           libs: tuple[str, ...] = _LIBS, key: str | None = None) -> Path:
    """Compile ``source`` into ``<key>.so`` (atomically) in ``directory``, or (``None`` or not
    usable: missing, read-only, a file) in the cache, else in this process's temporary
    directory, with one :class:`KernelCacheWarning`; returns its path.

    ``flags`` go before the source file and ``libs`` after it; ``key`` names the result
    (default: :func:`_key` of ``source`` with those flags). The library exports ``key`` as
    :data:`KEY_SYMBOL`.

    Raises
    ------
    MissingDependencyError
        If the compiler fails, or no directory can be written.
    """
    key = key or _key(source, compiler, flags + libs)
    stamped = _stamped(source, key)
    problems: list[str] = []
    tried: list[Path] = []
    for where in [directory, *_directories(), "private"]:
        if where == "private":  # this process's own directory, made when first needed
            try:
                where = _private_dir()
            except OSError as exc:
                problems.append(f"a temporary directory: {exc}")
                break
        if where is None or where in tried:
            continue
        tried.append(where)
        try:
            return _build_in(compiler, stamped, where, flags, libs, key)
        except OSError as exc:  # this directory cannot be written: the next one
            problems.append(f"{where}: {exc}")
            if where not in _PRIVATE:
                _warn_once(where, exc)
    raise MissingDependencyError("no directory can hold compiled kernels: " + "; ".join(problems))


def _build_in(compiler: str, source: str, directory: Path, flags: tuple[str, ...], libs: tuple[str, ...],
              key: str) -> Path:
    """One build in ``directory`` (``OSError``: the directory is unusable)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{key}.so"
    fd, tmp_source = tempfile.mkstemp(suffix=".c", dir=directory)
    tmp_library = tmp_source[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        try:
            result = subprocess.run([compiler, *flags, tmp_source, "-o", tmp_library, *libs],
                                    capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise MissingDependencyError(f"the C compiler {compiler!r} could not be run: {exc}") from exc
        if result.returncode != 0:
            raise MissingDependencyError(f"the C compiler {compiler!r} failed on a generated kernel:\n{result.stderr}")
        os.replace(tmp_library, target)
    finally:
        for leftover in (tmp_source, tmp_library):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    if directory == cache_dir() / "cpu_kernels":
        _prune(directory, keep=target)
    return target


def _prune(directory: Path, keep: Path) -> None:
    """Remove the least recently used kernel files beyond :data:`MAX_CACHED_FILES` (loading a
    file marks it used), and build leftovers a day old. Concurrent pruners and processes
    that still have a removed file loaded are unaffected (a loaded library stays mapped)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    kernels, now = [], time.time()
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            stamp = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if entry.name.startswith("tmp") and now - stamp > 86400:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        elif entry.name.endswith(".so") and entry.path != str(keep):
            kernels.append((stamp, entry.path))
    excess = len(kernels) + 1 - MAX_CACHED_FILES
    for _, path in sorted(kernels)[:max(0, excess)]:
        with contextlib.suppress(OSError):
            os.unlink(path)


def compile_c(source: str) -> ctypes.CDLL:
    """The loaded library built from ``source`` (from memory, disk, or compiled now).

    A file on disk is used only when it proves to be the build of this source, flags and
    compiler (its exported :data:`KEY_SYMBOL`); anything else is rebuilt. A cache directory
    that cannot be written (missing, read-only, a file) gives one
    :class:`KernelCacheWarning` and builds in a temporary directory instead.

    Raises
    ------
    MissingDependencyError
        If no working C compiler is found or the compilation fails.

    Examples
    --------
    >>> lib = compile_c("double twice(double x) { return 2 * x; }")
    >>> lib.twice.restype, lib.twice.argtypes = ctypes.c_double, [ctypes.c_double]
    >>> lib.twice(1.25)
    2.5
    """
    compiler = _compiler()
    if compiler is None or not available():
        raise MissingDependencyError("generated CPU kernels need a C compiler with libmvec ($CC or cc)")
    return _load(compiler, source)


def _load(compiler: str, source: str) -> ctypes.CDLL:
    key = _key(source, compiler)
    return _cached(key, _LOADED, lambda path: _verified_library(path, key), lambda: _build(compiler, source, key=key),
                   "a generated CPU kernel")


def _verified_library(path: Path, key: str) -> ctypes.CDLL:
    lib = _verify(path, key)
    if hasattr(_ctypes, "dlclose"):  # unloaded once dropped from the memo and unreferenced
        weakref.finalize(lib, _ctypes.dlclose, lib._handle).atexit = False  # never at interpreter exit
    return lib


def _cached(key: str, memo: "OrderedDict[str, Any]", load: Callable[[Path], Any], build: Callable[[], Path] | None,
            what: str) -> Any:
    """``memo[key]``, else ``load`` of a cached ``<key>.so`` (a file that does not load or is not
    the build of ``key`` is rebuilt), else ``load`` of what ``build`` makes (``build=None``:
    ``None``, nothing is compiled); failures to load a fresh build raise
    :class:`MissingDependencyError` naming ``what``. The memo keeps the :data:`MAX_LOADED`
    most recently used."""
    with _LOCK:
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
        loaded = None
        for directory in _directories():
            path = directory / f"{key}.so"
            try:
                if not path.is_file():
                    continue
                loaded = load(path)
            except (OSError, ImportError):  # corrupt, foreign, swapped: rebuilt below
                continue
            with contextlib.suppress(OSError):
                os.utime(path)  # most recently used: the last the pruner removes
            break
        if loaded is None:
            if build is None:
                return None
            built = build()  # raises MissingDependencyError itself when compiling fails
            try:
                loaded = load(built)
            except (OSError, ImportError) as exc:  # e.g. a libmvec without a vector variant the kernel calls
                raise MissingDependencyError(f"{what} could not be loaded: {exc}") from exc
        memo[key] = loaded
        while len(memo) > MAX_LOADED:
            memo.popitem(last=False)
        return loaded


def _extension_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Compiler flags for a CPython extension (Python's and NumPy's headers) and the parts of
    the cache key that tie a build to this interpreter and NumPy."""
    include = sysconfig.get_paths().get("include") or ""
    if not include or not os.path.exists(os.path.join(include, "Python.h")):
        raise MissingDependencyError(f"CPython extensions need Python's headers (no Python.h in {include!r})")
    flags = FLAGS + ("-I", include)
    extra = [sys.version, sys.implementation.cache_tag or "", str(sysconfig.get_config_var("SOABI"))]
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    else:
        flags += ("-I", numpy.get_include())
        extra.append(f"numpy {numpy.__version__}")
    return flags, tuple(extra)


def compile_extension(module_name: str, source: str, *, build: bool = True) -> types.ModuleType | None:
    """The CPython extension module ``module_name`` built from the C ``source`` (from memory,
    from the disk cache, or compiled now; with ``build=False``, ``None`` instead of compiling).

    ``source`` must define ``PyInit_<module_name>``; it may use the NumPy C API (NumPy's
    headers are on the include path; call ``import_array()`` in the init function). Builds are
    cached like :func:`compile_c`'s, keyed also by the Python version and ABI and the NumPy
    version; a cached file that cannot be loaded is rebuilt.

    Raises
    ------
    MissingDependencyError
        If there is no C compiler or no ``Python.h``, ``NVMATHPY_CPU_JIT`` is ``off``, or the
        compilation or the import fails.

    Examples
    --------
    >>> src = (
    ...     "#include <Python.h>\\n"
    ...     "static PyObject *twice(PyObject *self, PyObject *x) {\\n"
    ...     "    return PyFloat_FromDouble(2 * PyFloat_AsDouble(x));\\n}\\n"
    ...     "static PyMethodDef methods[] = {{\\"twice\\", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};\\n"
    ...     "static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, \\"doc_twice\\", NULL, -1, methods};\\n"
    ...     "PyMODINIT_FUNC PyInit_doc_twice(void) { return PyModule_Create(&def); }\\n")
    >>> compile_extension("doc_twice", src).twice(1.25)
    2.5
    """
    compiler = _compiler()
    if compiler is None or _disabled():
        raise MissingDependencyError("compiled extensions need a C compiler ($CC or cc) and NVMATHPY_CPU_JIT on")
    flags, extra = _extension_flags()
    key = _key(source, compiler, flags + _EXTENSION_LIBS, (module_name, *extra))
    return _cached(key, _EXTENSIONS, lambda path: _import_extension(module_name, path, key),
                   (lambda: _build(compiler, source, None, flags, _EXTENSION_LIBS, key)) if build else None,
                   f"the compiled extension {module_name!r}")


def _import_extension(module_name: str, path: Path, key: str) -> types.ModuleType:
    checked = _verify(path, key)  # held open while importing: the import maps this same file  # noqa: F841
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - a loader is given
        raise ImportError(f"no import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
