"""benchmarks/gpu_check.py's verdicts, summary and exit status, on fake rows (no GPU needed)."""

from __future__ import annotations

import importlib.util
import math
from contextlib import contextmanager
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture
def gc(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path)
    module.ROWS.clear()
    return module


def test_verdicts_of_each_kind_of_row(gc):
    ok = gc.row("gemm", "fast and right", rel_err=1e-3, tol=2e-2, targets=(("speed", ">=", 0.98),), speed=1.01)
    slow = gc.row("gemm", "right but slow", rel_err=1e-3, tol=2e-2, targets=(("speed", ">=", 0.98),), speed=0.93)
    wrong = gc.row("gemm", "fast but wrong", rel_err=5e-2, tol=2e-2, targets=(("speed", ">=", 0.98),), speed=1.5)
    nan = gc.row("fft", "NaN never passes", rel_err=math.nan, tol=1.0)
    missing = gc.row("fft", "no error measured", tol=1.0)
    boom = gc.failed("custom", "raised", RuntimeError("NVRTC could not compile"))
    latency = gc.row("overhead", "us", rel_err=0.0, tol=3e-5, targets=(("us", "<=", 10.0),), us=19.8)
    absent = gc.row("custom", "compile n/a", rel_err=1e-3, tol=2e-2, targets=(("torch_compile/nvmathpy", ">=", 1.0),))
    tests_ok = gc.row("tests", "pytest", ok=True, exit=0)
    tests_bad = gc.row("tests", "pytest", ok=False, exit=1)
    skipped = gc.row("solve", "section", not_run="10 s of the 420 s budget left")
    info = gc.row("total", "wall", info=True, seconds=3.0)
    assert [r["verdict"] for r in (ok, slow, wrong, nan, missing, boom, latency, absent, tests_ok, tests_bad,
                                   skipped, info)] == [
        "pass", "miss target", "FAIL correctness", "FAIL correctness", "FAIL correctness", "FAIL error",
        "miss target", "miss target", "pass", "FAIL correctness", "FAIL not run", "-"]


def test_summary_and_exit_status(gc):
    gc.row("gemm", "a", rel_err=1e-3, tol=2e-2, targets=(("speed", ">=", 0.98),), speed=0.5)
    gc.row("total", "wall", info=True, seconds=1.0)
    line, code = gc.summary(gc.ROWS)
    assert code == 0 and "1 miss target" in line and "targets missed: gemm/a" in line and line.endswith("exit 0")
    gc.row("fft callbacks", "b", rel_err=0.5, tol=3e-5)
    line, code = gc.summary(gc.ROWS)
    assert code == 1 and "FAILED: fft callbacks/b (FAIL correctness)" in line and line.endswith("exit 1")


def test_table_has_the_verdict_column_and_the_summary(gc, tmp_path):
    gc.row("fft callbacks", "c64", rel_err=2e-7, tol=3e-5, targets=(("unfused/callbacks", ">=", 1.2),),
           path="elementwise", **{"unfused/callbacks": 1.05})
    text = (tmp_path / "gpu_check.md").read_text()
    assert text.splitlines()[0] == "| section | case | verdict | results |"
    assert "| fft callbacks | c64 | miss target |" in text and "path elementwise" in text
    assert "missed unfused/callbacks >= 1.2 (got 1.05)" in text
    assert text.rstrip().splitlines()[-1].startswith("summary: 1 rows")


def test_main_exits_nonzero_when_a_row_fails(gc, monkeypatch, tmp_path):
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))  # main() points it at a fresh folder
    def fake_tests(out, timeout, pytest_args=None):
        assert pytest_args == "tests/gpu/test_gpu_fft_callbacks.py -x"
        gc.row("tests", "pytest", ok=False, exit=1)

    monkeypatch.setattr(gc, "run_tests", fake_tests)
    assert gc.main(["--out", str(tmp_path), "--only", "tests", "--pytest-args",
                    "tests/gpu/test_gpu_fft_callbacks.py -x"]) == 1
    monkeypatch.setattr(gc, "run_tests", lambda out, timeout, pytest_args=None: gc.row("tests", "pytest", ok=True))
    assert gc.main(["--out", str(tmp_path), "--only", "tests"]) == 0


def test_only_and_pytest_args(gc):
    assert gc.parse_sections(None) == list(gc.SECTIONS)
    assert gc.parse_sections("fft callbacks,tests,eigh/svd") == ["tests", "fft-callbacks", "eigh-svd"]
    with pytest.raises(SystemExit, match="unknown section"):
        gc.parse_sections("gemm,nonsense")
    command = gc.pytest_command(None)
    assert command[-3:] == ["-rfE", "--tb=short", "tests/gpu"]
    command = gc.pytest_command("tests/gpu/test_gpu_matmul.py::test_fp8_scales_exactly -x --tb=long")
    assert "--tb=short" not in command
    assert command[-3:] == ["tests/gpu/test_gpu_matmul.py::test_fp8_scales_exactly", "-x", "--tb=long"]


def test_dropin_rows_carry_error_ratio_and_target(gc):
    import gpu_dropin

    modes = []

    @contextmanager
    def checks(mode):
        modes.append(mode)
        yield

    def fake_times(fns, rounds, reps):
        assert set(fns) == {"ours", "theirs"} and rounds * reps <= gpu_dropin.timed_calls(8)
        return {"ours": 2e-5, "theirs": 1e-5}

    def make(n):
        if n == 2048:
            raise RuntimeError("out of memory")
        return [gpu_dropin.Case("solve", lambda: 1.0, lambda: 1.0, lambda ours, theirs: 1e-16),
                gpu_dropin.Case("det", lambda: 2.0, lambda: 1.0, lambda ours, theirs: 1.0)]

    gpu_dropin.run_dropin(make, (8, 2048), gc.row, gc.failed, fake_times, checks)
    by_case = {r["case"]: r for r in gc.ROWS}
    solve = by_case["solve n=8"]
    assert solve["verdict"] == "miss target" and solve["cupy/nvmathpy"] == 0.5 and solve["nvmathpy_ms"] == 0.02
    assert by_case["det n=8"]["verdict"] == "FAIL correctness"  # an error of 1.0 is over the 1e-10 threshold
    assert by_case["solve n=8, SciPy's per-call checks"]["verdict"] == "-"
    assert by_case["n=2048"]["verdict"] == "FAIL error"  # the size's operands could not be made: said so
    assert modes == ["deferred", "raise", "deferred"]  # timed with deferred checks; solve once more per call


def test_dropin_sizes_fit_the_section(gc):
    import gpu_dropin

    assert "dropin" in gc.SECTIONS and gc.parse_sections("dropin") == ["dropin"]
    assert {8, 256, 2048} <= set(gpu_dropin.SIZES)
    assert gpu_dropin.timed_calls(2048) <= 2 < gpu_dropin.timed_calls(8)  # 0.5 s SVDs: two timed calls
