"""Test-session settings shared by tests/ and the doctests in nvmathpy/.

Every test and doctest runs with its own cache directory, so wisdom and compiled kernels
never leak between tests or into the developer's real cache. Automatic calibration is off
(``NVMATHPY_CALIBRATE=off``, inherited by subprocesses): no heuristic choice in a test depends
on a timing taken during the run, nor on which OpenBLAS pool's threads happen to be spinning
(``NVMATHPY_FREE_CORES=off``: thread counts stay as set, routes as if no pool spun; the
tests of that mechanism turn it on for themselves).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

#: With NVMATHPY_TEST_HIDE_CUDA=1 the CUDA packages cannot be imported (as on a machine without
#: the cu12/cu13 extras): tests/test_foundation_package.py runs part of the suite that way.
_HIDDEN = ("cuda", "cupy", "cupyx", "nvidia")


class _HideCuda:
    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by NVMATHPY_TEST_HIDE_CUDA)", name=name)
        return None


os.environ["NVMATHPY_CALIBRATE"] = "off"
os.environ["NVMATHPY_FREE_CORES"] = "off"

if os.environ.get("NVMATHPY_TEST_HIDE_CUDA") == "1":
    sys.meta_path.insert(0, _HideCuda())


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package (e.g. the "cuda" namespace) is absent
        return False


# Modules whose doctests need an optional library: skip collecting them when it is absent
# (the CPU-only test run, without the CUDA extras, must pass too).
collect_ignore_glob = [
    path
    for path, needs in (("nvmathpy/torch/*.py", "torch"), ("nvmathpy/dask/*.py", "dask"),
                        ("nvmathpy/kernels/kernel_cache.py", "cuda.pathfinder"))
    if not _installed(needs)
]


@pytest.fixture(autouse=True, scope="session")
def tiny_kernel_built(tmp_path_factory):
    """The compiled tiny-product kernel, built (or found unavailable) before the first test, in
    a cache directory of the session: a tiny product's route does not change half-way through
    a test that compares two routes."""
    from nvmathpy.linalg.gemm.cpu._tiny_c import TINY_EXTENSION

    before = os.environ.get("NVMATHPY_CACHE_DIR")
    os.environ["NVMATHPY_CACHE_DIR"] = str(tmp_path_factory.mktemp("session-cache"))
    try:
        TINY_EXTENSION.get(wait=True)
    finally:
        if before is None:
            del os.environ["NVMATHPY_CACHE_DIR"]
        else:
            os.environ["NVMATHPY_CACHE_DIR"] = before


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Point NVMATHPY_CACHE_DIR at a fresh temporary directory for each test."""
    cache = tmp_path / "nvmathpy-cache"
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(cache))
    monkeypatch.delenv("NVMATHPY_WISDOM", raising=False)
    return cache


@pytest.fixture
def fresh():
    """Empty caches of the one-call FFT functions (quick-path runners and plans), before and after."""
    from nvmathpy.fft._driver import plan_cache, runner_cache

    caches = (runner_cache(), plan_cache())
    for cache in caches:
        cache.clear()
    yield
    for cache in caches:
        cache.clear()
