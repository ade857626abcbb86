"""``python -m nvmathpy bench`` refuses what would fail only after the whole run, before any
suite runs: ``--plot`` without matplotlib, ``--json``/``--plot`` into a missing directory."""

from __future__ import annotations

import importlib.util

import pytest

import nvmathpy.__main__ as cli
from nvmathpy.bench import harness


@pytest.fixture
def no_suites(monkeypatch):
    """Fail the test if a benchmark case would run."""
    def refuse(*args, **kwargs):
        raise AssertionError("a benchmark ran before the options were checked")

    monkeypatch.setattr(harness, "run_cases", refuse)


def test_plot_without_matplotlib_is_refused_up_front(monkeypatch, capsys, tmp_path, no_suites):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "matplotlib" else real(name, *a, **k))
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "fft", "--quick", "--plot", str(tmp_path / "speed.png")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "matplotlib" in err and "pip install" in err


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_output_into_a_missing_directory_is_refused_up_front(capsys, tmp_path, option, no_suites):
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "matmul", "--quick", option, str(tmp_path / "missing" / "out.file")])
    assert info.value.code == 2
    assert option in capsys.readouterr().err
