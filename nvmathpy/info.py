"""What ``python -m nvmathpy info`` reports: versions, BLAS, threads, execution spaces,
optional libraries, the cache directory and what is patched (:mod:`nvmathpy.patching`)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from typing import Any

from ._version import __version__

__all__ = ["collect_info", "format_info", "OPTIONAL_LIBRARIES"]

#: Optional libraries nvmathpy uses when installed: import name -> (distribution, extra).
OPTIONAL_LIBRARIES = {
    "numexpr": ("numexpr", "cpu"),
    "ml_dtypes": ("ml_dtypes", "cpu"),
    "pyfftw": ("pyFFTW", "cpu"),
    "ducc0": ("ducc0", "cpu"),
    "mkl_fft": ("mkl_fft", "cpu"),
    "torch": ("torch", None),
    "cupy": ("cupy-cuda13x", "cu13"),
    "cuda.pathfinder": ("cuda-pathfinder", "cu13"),
}


def _version_of(import_name: str, distribution: str) -> str | None:
    """The installed version of an optional library, without importing it; ``None`` if absent."""
    try:
        if importlib.util.find_spec(import_name) is None:
            return None
    except (ImportError, ValueError):
        return None
    for dist in (distribution, import_name.replace(".", "-"), import_name):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    if import_name == "cupy":
        for name in ("cupy-cuda12x", "cupy"):
            try:
                return importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
    return "installed"


def collect_info() -> dict[str, Any]:
    """Everything ``info`` prints, as a JSON-like dict."""
    import numpy as np
    import scipy
    from threadpoolctl import threadpool_info

    from .execution import cpu_description, cuda_unavailable_reason
    from .patching import patched_namespaces
    from .plan.calibration import auto_enabled, entries
    from .plan.wisdom import cache_dir, default_wisdom, wisdom_enabled

    pools = [
        {k: pool.get(k) for k in ("user_api", "internal_api", "version", "architecture", "num_threads", "filepath")}
        for pool in threadpool_info()
    ]
    cuda_reason = cuda_unavailable_reason()
    return {
        "nvmathpy": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "cpu_count": os.cpu_count(),
        "threadpools": pools,
        "execution_spaces": {"cpu": "available", "cuda": "available" if cuda_reason is None else cuda_reason},
        "optional": {name: _version_of(name, dist) for name, (dist, _) in OPTIONAL_LIBRARIES.items()},
        "cache_dir": str(cache_dir()),
        "wisdom": {"enabled": wisdom_enabled(), "entries": len(default_wisdom().entries())},
        "patched": list(patched_namespaces()),
        "calibration": {"auto": auto_enabled(), "machine": cpu_description(), "values": entries()},
    }


def format_info(info: dict[str, Any]) -> str:
    """Render :func:`collect_info`'s dict as the text ``info`` prints."""
    lines = [
        f"nvmathpy   {info['nvmathpy']}",
        f"python     {info['python']} ({info['platform']})",
        f"numpy      {info['numpy']}",
        f"scipy      {info['scipy']}",
        f"cpu cores  {info['cpu_count']}",
        "thread pools:",
    ]
    for pool in info["threadpools"]:
        lines.append(
            f"  {pool['user_api']}: {pool['internal_api']} {pool['version']} "
            f"({pool['architecture']}), {pool['num_threads']} threads"
        )
    lines.append("execution spaces:")
    for space, state in info["execution_spaces"].items():
        lines.append(f"  {space}: {state}")
    lines.append("optional libraries:")
    for name, version in info["optional"].items():
        dist, extra = OPTIONAL_LIBRARIES[name]
        hint = f" (pip install 'nvmathpy[{extra}]')" if extra else f" (pip install {dist})"
        lines.append(f"  {name}: {version if version else 'not installed' + hint}")
    wisdom = info["wisdom"]
    lines.append(f"cache dir  {info['cache_dir']}")
    lines.append(f"wisdom     {wisdom['entries']} entries" + ("" if wisdom["enabled"] else " (disabled: NVMATHPY_WISDOM=off)"))
    lines.append(f"patched    {', '.join(info['patched']) or 'none (nvmathpy.patch(), python -m nvmathpy run)'}")
    calibration = info["calibration"]
    lines.append(f"calibrated {len(calibration['values'])} crossovers on this machine (automatic calibration "
                 f"{'on' if calibration['auto'] else 'off: NVMATHPY_CALIBRATE=off'}; python -m nvmathpy tune)")
    for value in calibration["values"]:
        shown = {key: part if key != "fftw_wisdom" else "(FFTW's wisdom)" for key, part in value["value"].items()} \
            if isinstance(value["value"], dict) else value["value"]
        lines.append(f"  {value['name']}: {shown} (recorded {value['recorded']}, {value['seconds']} s)")
    return "\n".join(lines)
