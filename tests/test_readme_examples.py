"""Every ```python example in README.md runs, in order, in one namespace per block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index):
    source = BLOCKS[index]
    for module in ("torch", "dask"):
        if re.search(rf"^import {module}|^import nvmathpy\.{module}", source, flags=re.M):
            pytest.importorskip(module)
    exec(compile(source, f"README.md example {index}", "exec"), {"__name__": f"readme_example_{index}"})
