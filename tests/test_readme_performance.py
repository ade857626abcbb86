"""README.md's performance section is generated from docs/bench-quick.json, never typed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _renderer():
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "benchmarks" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_performance_section_is_the_rendering_of_the_benchmark_json():
    renderer = _renderer()
    readme = (ROOT / "README.md").read_text()
    body = renderer.render(json.loads((ROOT / "docs" / "bench-quick.json").read_text()))
    assert renderer.replace_section(readme, body) == readme


def test_the_rendering_names_the_machine_and_the_date():
    renderer = _renderer()
    report = {"environment": {"space": "cpu", "cpu": "Test CPU", "cores": 3, "numpy": "2.0", "date": "2026-01-02"},
              "results": [{"suite": "matmul", "case": "GEMM", "baseline": "numpy.matmul", "threads": None, "note": "",
                           "seconds": {"numpy.matmul": 2e-3, "nvmathpy": 1e-3}}]}
    body = renderer.render(report)
    assert body.startswith("Measured on Test CPU, 3 cores (NumPy 2.0) on 2026-01-02, execution space cpu.")
    assert "| GEMM | 2 ms | 1 ms | 2.00x |" in body
