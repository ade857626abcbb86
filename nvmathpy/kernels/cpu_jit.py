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
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..errors import MissingDependencyError
from ..plan.wisdom import cache_dir

__all__ = ["available", "compile_c", "FLAGS", "SIMD_DECLARATIONS", "VECTOR_FUNCTIONS"]

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
_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL] = {}


def _compiler() -> str | None:
    name = os.environ.get("CC", "cc")
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


def available() -> bool:
    """Whether generated C kernels can be compiled here (a C compiler with libmvec, and
    ``NVMATHPY_CPU_JIT`` not ``off``)."""
    if os.environ.get("NVMATHPY_CPU_JIT", "on").strip().lower() in ("off", "0", "false", "no"):
        return False
    if platform.system() != "Linux":
        return False
    path = _compiler()
    return path is not None and _works(path)


def _key(source: str, compiler: str) -> str:
    text = "\n".join([source, " ".join(FLAGS + _LIBS), _compiler_version(compiler), platform.machine(),
                      platform.processor(), _cpu_model()])
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


def _build(compiler: str, source: str, directory: Path) -> Path:
    """Compile ``source`` into a library under ``directory`` (atomically); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{_key(source, compiler)}.so"
    fd, tmp_source = tempfile.mkstemp(suffix=".c", dir=directory)
    tmp_library = tmp_source[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        result = subprocess.run([compiler, *FLAGS, tmp_source, "-o", tmp_library, *_LIBS],
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
    key = _key(source, compiler)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        directory = cache_dir() / "cpu_kernels"
        path = directory / f"{key}.so"
        library = None
        if path.exists():
            try:
                library = ctypes.CDLL(str(path))
            except OSError:  # a corrupt or foreign entry: rebuild it
                library = None
        if library is None:
            try:
                library = ctypes.CDLL(str(_build(compiler, source, directory)))
            except OSError as exc:  # e.g. a libmvec without a vector variant the kernel calls
                raise MissingDependencyError(f"a generated CPU kernel could not be loaded: {exc}") from exc
        _LOADED[key] = library
        return library
