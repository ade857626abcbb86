"""Test-session settings shared by tests/ and the doctests in nvmathpy/.

Every test and doctest runs with its own cache directory, so wisdom and compiled kernels
never leak between tests or into the developer's real cache.
"""

from __future__ import annotations

import importlib.util

import pytest

# Modules whose doctests need an optional library: skip collecting them when it is absent.
collect_ignore_glob = [
    path
    for path, needs in (("nvmathpy/torch/*.py", "torch"), ("nvmathpy/dask/*.py", "dask"))
    if importlib.util.find_spec(needs) is None
]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Point NVMATHPY_CACHE_DIR at a fresh temporary directory for each test."""
    cache = tmp_path / "nvmathpy-cache"
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(cache))
    monkeypatch.delenv("NVMATHPY_WISDOM", raising=False)
    return cache
