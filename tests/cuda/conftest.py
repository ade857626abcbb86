"""Shared fixtures of the GPU-stack tests: they need the CUDA wheels, never a GPU."""

from __future__ import annotations

import pytest

from nvmathpy.errors import MissingDependencyError


@pytest.fixture(scope="session")
def cuda_wheels() -> dict:
    """Every binding module, keyed by library name; skips when the CUDA wheels are absent."""
    pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
    from nvmathpy.cuda.bindings import binding_modules
    from nvmathpy.cuda.loader import load_library

    modules = binding_modules()
    try:
        for module in modules.values():
            load_library(module.LIB.libname)
    except MissingDependencyError as exc:
        pytest.skip(f"CUDA wheels not installed: {exc}")
    return modules
