"""Compiling generated C for the host with the system's C compiler, cached on disk.

The CPU twin of :mod:`.kernel_cache`: generated elementwise kernels (see :mod:`.emit_c`) are
compiled once with ``$CC`` (default ``cc``) into a shared library,
``-O3 -march=native`` with OpenMP SIMD loops whose ``log``/``tanh``/``erf`` calls
vectorise through glibc's libmvec, and loaded with :mod:`ctypes`. Entries live in
``<cache_dir()>/cpu_kernels/<key>.so``, named by the SHA-256 of the source, the flags, the
compiler's version and the machine (``-march=native`` code belongs to this CPU); each is
written under a temporary name and moved into place, so concurrent writers never expose half
a file. An in-process cache sits on top.

Without a working compiler (or with ``NVMATHPY_CPU_JIT=off``) :func:`available` is false and
callers use their NumPy evaluators instead: compiled kernels are a speed-up, never a
requirement.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import types
from pathlib import Path
from typing import Any, Callable

from ..errors import MissingDependencyError
from ..plan.wisdom import cache_dir

__all__ = ["available", "compile_c", "compile_extension", "C_HELPER_THREADS", "FLAGS", "SIMD_DECLARATIONS",
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
_LOADED: dict[str, ctypes.CDLL] = {}
_EXTENSIONS: dict[str, types.ModuleType] = {}


def _compiler() -> str | None:
    return _which(os.environ.get("CC", "cc"))


@functools.lru_cache(maxsize=None)
def _which(name: str) -> str | None:
    """``shutil.which(name)``, looked up once per name (a lookup stats every ``PATH``
    directory, which plans asking :func:`available` on every call would pay)."""
    return shutil.which(name)


@functools.lru_cache(maxsize=None)
def _compiler_version(path: str) -> str:
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


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
    text = "\n".join([source, " ".join(flags), _compiler_version(compiler), platform.machine(),
                      platform.processor(), _cpu_model(), *extra])
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


def _build(compiler: str, source: str, directory: Path, flags: tuple[str, ...] = FLAGS, libs: tuple[str, ...] = _LIBS,
           key: str | None = None) -> Path:
    """Compile ``source`` into a library under ``directory`` (atomically); returns its path.

    ``flags`` go before the source file and ``libs`` after it; ``key`` names the result
    (default: :func:`_key` of ``source`` with those flags)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{key or _key(source, compiler, flags + libs)}.so"
    fd, tmp_source = tempfile.mkstemp(suffix=".c", dir=directory)
    tmp_library = tmp_source[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        result = subprocess.run([compiler, *flags, tmp_source, "-o", tmp_library, *libs],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise MissingDependencyError(f"the C compiler {compiler!r} failed on a generated kernel:\n{result.stderr}")
        os.replace(tmp_library, target)
    except (OSError, subprocess.SubprocessError) as exc:
        raise MissingDependencyError(f"the C compiler {compiler!r} could not be run: {exc}") from exc
    finally:
        for leftover in (tmp_source, tmp_library):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return target


def compile_c(source: str) -> ctypes.CDLL:
    """The loaded library built from ``source`` (from memory, disk, or compiled now).

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
    directory = cache_dir() / "cpu_kernels"
    return _cached(_key(source, compiler), _LOADED, lambda path: ctypes.CDLL(str(path)),
                   lambda: _build(compiler, source, directory), "a generated CPU kernel")


def _cached(key: str, memo: dict, load: Callable[[Path], Any], build: Callable[[], Path] | None, what: str) -> Any:
    """``memo[key]``, else ``load`` of the cached ``<key>.so`` (a file that does not load - corrupt,
    foreign - is rebuilt), else ``load`` of what ``build`` makes (``build=None``: ``None``, nothing
    is compiled); failures to load a fresh build raise :class:`MissingDependencyError` naming
    ``what``."""
    with _LOCK:
        if key in memo:
            return memo[key]
        path = cache_dir() / "cpu_kernels" / f"{key}.so"
        loaded = None
        if path.exists():
            try:
                loaded = load(path)
            except (OSError, ImportError):
                loaded = None
        if loaded is None:
            if build is None:
                return None
            built = build()  # raises MissingDependencyError itself when compiling fails
            try:
                loaded = load(built)
            except (OSError, ImportError) as exc:  # e.g. a libmvec without a vector variant the kernel calls
                raise MissingDependencyError(f"{what} could not be loaded: {exc}") from exc
        memo[key] = loaded
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
    directory = cache_dir() / "cpu_kernels"
    return _cached(key, _EXTENSIONS, lambda path: _import_extension(module_name, path),
                   (lambda: _build(compiler, source, directory, flags, _EXTENSION_LIBS, key)) if build else None,
                   f"the compiled extension {module_name!r}")


def _import_extension(module_name: str, path: Path) -> types.ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - a loader is given
        raise ImportError(f"no import spec for {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
