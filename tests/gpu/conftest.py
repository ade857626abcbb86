"""GPU tests: they need CuPy and a usable CUDA device; every test here is skipped otherwise."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the shared helpers in tests/ (numerics)


def _unavailable() -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install 'nvmathpy[cu13]')"
    from nvmathpy.cuda.driver import cuda_status

    status = cuda_status()
    return None if status.available else f"no usable CUDA device: {status.reason}"


REASON = _unavailable()


@pytest.fixture(autouse=True)
def _needs_gpu():
    if REASON is not None:
        pytest.skip(REASON)
