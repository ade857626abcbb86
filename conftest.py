"""Test-session settings shared by tests/ and the doctests in nvmathpy/.

Every test and doctest runs with its own cache directory, so wisdom and compiled kernels
never leak between tests or into the developer's real cache.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Point NVMATHPY_CACHE_DIR at a fresh temporary directory for each test."""
    cache = tmp_path / "nvmathpy-cache"
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(cache))
    monkeypatch.delenv("NVMATHPY_WISDOM", raising=False)
    return cache
