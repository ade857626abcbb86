"""Execution spaces (where an operation runs) and device descriptions (for wisdom keys).

``execution=`` accepts an :class:`ExecutionCPU` / :class:`ExecutionCUDA`, the strings
``"cpu"`` / ``"cuda"``, or a dict such as ``{"name": "cpu", "num_threads": 2}``. When it is
``None`` the space follows the operands: host arrays run on the CPU, CUDA arrays on their GPU.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, fields
from typing import Any, Mapping, Union

from .errors import InvalidOperandError, InvalidOptionError

__all__ = [
    "ExecutionCPU",
    "ExecutionCUDA",
    "ExecutionSpace",
    "as_execution",
    "resolve_execution",
    "cpu_description",
    "cuda_unavailable_reason",
]


@dataclass(frozen=True)
class ExecutionCPU:
    """Run on the host.

    Parameters
    ----------
    num_threads
        Threads the BLAS/LAPACK/FFT libraries may use; ``None`` leaves their default
        (all cores). Must be a positive integer.

    Examples
    --------
    >>> ExecutionCPU(num_threads=2)
    ExecutionCPU(num_threads=2)
    """

    num_threads: int | None = None
    name = "cpu"

    def __post_init__(self) -> None:
        n = self.num_threads
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise InvalidOptionError(f"ExecutionCPU: num_threads must be a positive int or None, got {n!r}")


@dataclass(frozen=True)
class ExecutionCUDA:
    """Run on an NVIDIA GPU.

    Parameters
    ----------
    device_id
        The CUDA device ordinal (non-negative integer).
    """

    device_id: int = 0
    name = "cuda"

    def __post_init__(self) -> None:
        d = self.device_id
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise InvalidOptionError(f"ExecutionCUDA: device_id must be a non-negative int, got {d!r}")


ExecutionSpace = Union[ExecutionCPU, ExecutionCUDA]
_BY_NAME = {"cpu": ExecutionCPU, "cuda": ExecutionCUDA}


def as_execution(value: Any) -> ExecutionSpace | None:
    """Normalise an ``execution=`` argument; ``None`` stays ``None`` (follow the operands)."""
    if value is None or isinstance(value, (ExecutionCPU, ExecutionCUDA)):
        return value
    if isinstance(value, str):
        if value not in _BY_NAME:
            raise InvalidOptionError(f"execution={value!r} is not known; allowed: 'cpu', 'cuda'")
        return _BY_NAME[value]()
    if isinstance(value, Mapping):
        params = dict(value)
        name = params.pop("name", None)
        if name not in _BY_NAME:
            raise InvalidOptionError(
                f"execution dict needs 'name' in ('cpu', 'cuda'), got {name!r}"
            )
        cls = _BY_NAME[name]
        allowed = {f.name for f in fields(cls)}
        unknown = set(params) - allowed
        if unknown:
            raise InvalidOptionError(
                f"execution dict for {name!r}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        return cls(**params)
    raise InvalidOptionError(
        f"execution must be None, 'cpu', 'cuda', a dict or an ExecutionCPU/ExecutionCUDA; got {value!r}"
    )


def resolve_execution(value: Any, device: str, device_id: int | None) -> ExecutionSpace:
    """Decide where to run: the explicit ``execution=`` if given, else the operands' device.

    Raises
    ------
    ExecutionSpaceUnavailableError
        If CUDA is asked for (explicitly or by CUDA operands) and cannot be used here.
    InvalidOperandError
        If the space and the operands' device disagree: CPU execution of CUDA operands, or
        CUDA execution of host operands the caller did not hand over as NumPy arrays (callers
        that copy NumPy operands to the device pass ``device="cuda"`` for them).
    """
    space = as_execution(value)
    if space is None:
        space = ExecutionCUDA(device_id or 0) if device == "cuda" else ExecutionCPU()
    if isinstance(space, ExecutionCPU) and device == "cuda":
        raise InvalidOperandError(
            f"execution='cpu' was asked for but the operands live on cuda:{device_id}; "
            "move them to the host first (e.g. cupy.asnumpy / tensor.cpu()) or drop execution="
        )
    if isinstance(space, ExecutionCUDA):
        from .cuda.driver import require_cuda

        require_cuda(space.device_id)
        if device != "cuda":
            raise InvalidOperandError(
                "execution='cuda' takes NumPy arrays (copied to the device and back), CuPy arrays or torch CUDA "
                "tensors; these host operands are none of them (move torch CPU tensors with .cuda())"
            )
    return space


def cuda_unavailable_reason() -> str | None:
    """Why the CUDA space cannot be used here, or ``None`` when it can.

    Looks only at the driver and the CUDA stack (through :mod:`nvmathpy.cuda`) and never
    raises: the answer is a sentence for error messages and ``python -m nvmathpy info``.
    """
    from .cuda.driver import cuda_status

    status = cuda_status()
    return None if status.available else status.reason


@functools.lru_cache(maxsize=1)
def cpu_description() -> dict[str, Any]:
    """A description of this host for wisdom keys: CPU model, cores, BLAS and library versions.

    Two machines with the same description are expected to rank candidates the same way. Every
    wisdom key (plans, FFT and GEMM choices, calibrated crossovers) starts from it, and it is
    the same whichever of NumPy and SciPy was imported first, and whether SciPy's LAPACK is
    loaded yet (:func:`_blas_description`).

    Examples
    --------
    >>> sorted(cpu_description())
    ['blas', 'cores', 'cpu', 'machine', 'numpy', 'scipy', 'space']
    """
    import numpy as np
    import scipy

    return {
        "space": "cpu",
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "blas": _blas_description(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }


def _cpu_model() -> str:
    try:  # read in small chunks: Linux writes /proc/cpuinfo as it is read, a few lines suffice
        with open("/proc/cpuinfo", "rb", buffering=1024) as fh:
            for raw in fh:
                if raw.startswith(b"model name"):
                    return raw.decode("utf-8").split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas_description() -> str:
    """``numpy: <BLAS>; scipy: <BLAS>``: the BLAS NumPy runs on as it runs here
    (``internal_api version architecture``, from threadpoolctl: it is loaded with NumPy), and
    the BLAS SciPy was built with (name and version from its build configuration).

    SciPy's library itself is loaded only with ``scipy.linalg``, which a wisdom key must not
    import (a NumPy-only program would pay for it on its first planned call), and the order in
    which threadpoolctl lists loaded libraries follows the order they were loaded in: this
    description reads neither, so it does not change with what was imported first. Both
    libraries pick their kernels for the same CPU (and ``OPENBLAS_CORETYPE``), so NumPy's
    architecture stands for SciPy's.
    """
    return f"numpy: {_numpy_blas()}; scipy: {_scipy_blas()}"


def _package_dirs(name: str) -> tuple[str, ...]:
    """The directory of package ``name`` and the one its wheel puts bundled libraries in."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return ()
    root = os.path.dirname(os.path.realpath(spec.origin))
    return (root + os.sep, root + ".libs" + os.sep)


#: The file name starts of OpenBLAS builds, and the affixes they export its functions with
#: (plain, scipy-openblas's ``scipy_``, 64-bit integers), as threadpoolctl looks for them.
_OPENBLAS_FILES = ("libopenblas", "libscipy_openblas")
_OPENBLAS_AFFIXES = tuple((prefix, suffix) for prefix in ("", "scipy_") for suffix in ("", "64_", "_64"))


@functools.lru_cache(maxsize=1)
def numpy_openblas_file() -> str | None:
    """The file of the one OpenBLAS inside NumPy's wheel that this process has loaded, else
    ``None``: a tenth of the cost of threadpoolctl's import and its scan of every loaded
    library, which a process's first wisdom look-up or first call on NumPy's LAPACK would
    otherwise pay (callers fall back to that scan). The OpenBLAS files in NumPy's directories
    are asked of the dynamic loader (:func:`_loaded_openblas_files`, a few file names); where
    that finds none, Linux's list of the process's mapped files (``/proc/self/maps``) is read."""
    numpy_dirs = _package_dirs("numpy")
    found = _loaded_openblas_files(numpy_dirs) or _mapped_openblas_files(numpy_dirs)
    return found[0] if len(found) == 1 else None


def _loaded_openblas_files(dirs: tuple[str, ...]) -> list[str]:
    """The OpenBLAS files in ``dirs`` that the dynamic loader has loaded (``RTLD_NOLOAD``:
    asking loads nothing), real paths; none where the loader cannot be asked so."""
    import _ctypes

    mode = getattr(os, "RTLD_NOLOAD", None)
    if mode is None or not hasattr(_ctypes, "dlopen") or not hasattr(_ctypes, "dlclose"):
        return []
    found = []
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.startswith(_OPENBLAS_FILES):
                path = os.path.join(folder, name)
                try:
                    handle = _ctypes.dlopen(path, mode | getattr(os, "RTLD_LAZY", 0))
                except OSError:  # not loaded (or no library)
                    continue
                _ctypes.dlclose(handle)  # the reference the question took
                found.append(os.path.realpath(path))
    return found


def _mapped_openblas_files(dirs: tuple[str, ...]) -> list[str]:
    """The OpenBLAS files in ``dirs`` among the process's mapped files, as Linux lists them
    (``/proc/self/maps``); none elsewhere."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            mapped = {parts[5].rstrip("\n") for parts in (line.split(None, 5) for line in fh) if len(parts) == 6}
    except OSError:
        return []
    return [path for path in mapped if path.startswith(dirs) and os.path.basename(path).startswith(_OPENBLAS_FILES)]


@functools.lru_cache(maxsize=1)
def numpy_openblas_library() -> Any:
    """:func:`numpy_openblas_file` as a ``ctypes.CDLL`` (one for every caller), else ``None``
    (none found, or it does not load)."""
    import ctypes

    path = numpy_openblas_file()
    if path is None:
        return None
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None


def _mapped_numpy_openblas() -> str | None:
    """``openblas <version> <architecture>``, threadpoolctl's fields for NumPy's BLAS, asked of
    the library :func:`numpy_openblas_file` finds; ``None`` where there is none or it does not answer."""
    import ctypes

    lib = numpy_openblas_library()
    if lib is None:
        return None
    for prefix, suffix in _OPENBLAS_AFFIXES:
        if hasattr(lib, f"{prefix}openblas_get_num_threads{suffix}"):
            break
    else:
        return None
    fields = []
    for name in ("openblas_get_config", "openblas_get_corename"):
        fn = getattr(lib, f"{prefix}{name}{suffix}", None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
        fields.append(fn().decode("utf-8") if fn is not None else None)
    config, architecture = fields
    words = config.split() if config else []
    version = words[1] if len(words) > 1 and words[0] == "OpenBLAS" else None
    return f"openblas {version} {architecture}".strip()


def _numpy_blas() -> str:
    """NumPy's BLAS as loaded: the OpenBLAS inside NumPy's wheel (:func:`_mapped_numpy_openblas`),
    else the threadpoolctl entry inside NumPy's wheel, else the first one outside SciPy's
    (NumPy and SciPy linked to one shared library)."""
    mapped = _mapped_numpy_openblas()
    if mapped is not None:
        return mapped
    return _listed_numpy_blas()


def _listed_numpy_blas() -> str:
    """NumPy's BLAS among threadpoolctl's entries (:func:`_numpy_blas`)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    pools = [(os.path.realpath(str(info.get("filepath", ""))), info) for info in threadpool_info()
             if info.get("user_api") == "blas"]
    numpy_dirs, scipy_dirs = _package_dirs("numpy"), _package_dirs("scipy")
    own = [info for path, info in pools if path.startswith(numpy_dirs)] or [
        info for path, info in pools if not path.startswith(scipy_dirs)]
    if not own:
        return "unknown"
    return " ".join(str(own[0].get(k, "")) for k in ("internal_api", "version", "architecture")).strip()


def _scipy_blas() -> str:
    """The BLAS SciPy was built with (``name version``), from ``scipy.__config__``."""
    try:
        from scipy.__config__ import CONFIG

        blas = CONFIG["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}"
    except (ImportError, KeyError, TypeError):
        return "unknown"
