"""The FFT library order calibrated per machine (nvmathpy.fft._calibrate): which layouts a
calibrated value covers, how the heuristic and the plans read it, and the measurement's form.

No test depends on a timing: values are injected (into each test's own store, which the
calibration memo is keyed by). The heuristic's rankings are memoised per layout for the life
of a process, so what a plan does with a value is checked in a fresh one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nvmathpy.fft import _calibrate as fft_calibration
from nvmathpy.fft._heuristic import CALIBRATED_KINDS, CALIBRATED_SIZES, builtin_order, first_library, library_order
from nvmathpy.fft._layout import describe
from nvmathpy.fft._libraries import installed_libraries
from nvmathpy.plan import calibration

ROOT = Path(__file__).resolve().parents[1]


def calibrate(name, library):
    calibration.record(name, {"first": library}, {library: 1.0}, 0.0)


def test_a_calibrated_library_goes_first_for_the_layouts_it_covers():
    calibrate("fft.c2c.double.16384", "scipy")
    calibrate("fft.r2c.single.262144", "scipy")
    covered = [describe((16384,), np.dtype("complex128")), describe((12000,), np.dtype("complex128")),  # 2^5 3 5^3
               describe((1 << 18,), np.dtype("float32"), kind="r2c"), describe((3 * 1 << 17,), np.dtype("float32"))]
    for layout in covered:
        assert library_order(layout) == ["scipy"] + [n for n in builtin_order(layout) if n != "scipy"], layout
        assert sorted(library_order(layout)) == sorted(builtin_order(layout))


def test_2_16_and_2_20_points_read_the_value_of_their_own_size():
    calibrate("fft.c2c.double.65536", "scipy")  # 2^16 and 2^20 were halfway between two values
    calibrate("fft.r2c.single.1048576", "scipy")
    for layout in (describe((1 << 16,), np.dtype("complex128")), describe((1 << 20,), np.dtype("float32"), kind="r2c")):
        assert library_order(layout)[0] == "scipy", layout
    assert first_library(describe((1 << 18,), np.dtype("complex128"))) is None  # its own value, not measured


def test_layouts_a_value_does_not_cover_keep_the_built_in_rules():
    for size in CALIBRATED_SIZES:
        for kind in CALIBRATED_KINDS:
            for precision in ("double", "single"):
                calibrate(f"fft.{kind}.{precision}.{size}", "scipy")
    not_covered = [
        describe((8, 1024), np.dtype("complex128")),  # a batch
        describe((8, 1024), np.dtype("complex128"), axes=(0,)),  # a batch along the other axis
        describe((64, 64), np.dtype("complex128"), axes=(0, 1)),  # two axes
        describe((1031,), np.dtype("complex128")),  # a prime length
        describe((11 * 1024,), np.dtype("complex128")),  # a factor above 7
        describe((1024,), np.dtype("complex128")),  # the small band: one answer for every length (families)
        describe((2048,), np.dtype("complex128")),  # below the smallest size's reach
        describe((1 << 25,), np.dtype("complex64")),  # beyond the largest size's reach
        describe((513,), np.dtype("complex128"), kind="c2r", s=[1024]),  # a kind not measured
    ]
    for layout in not_covered:
        assert library_order(layout) == builtin_order(layout), layout


def test_without_a_value_the_built_in_rules_decide():
    layout = describe((16384,), np.dtype("complex128"))
    assert first_library(layout) is None
    assert library_order(layout) == builtin_order(layout)
    calibrate("fft.c2c.single.16384", "scipy")  # another precision
    assert library_order(layout) == builtin_order(layout)


def test_a_library_not_installed_here_counts_as_none():
    calibrate("fft.c2c.double.16384", "a library of another machine")
    layout = describe((16384,), np.dtype("complex128"))
    assert library_order(layout) == builtin_order(layout)


def test_plans_and_one_call_functions_take_the_calibrated_library(isolated_cache):
    """In a fresh process (rankings are memoised per layout): the plan's first candidate and the
    one-call function's result, with a value that puts scipy.fft first."""
    calibrate("fft.c2c.double.16384", "scipy")
    code = """
import json, numpy as np, nvmathpy.fft
from nvmathpy.fft._engines_cpu import first_candidate
from nvmathpy.fft._layout import describe
x = np.random.default_rng(0).standard_normal(12000) + 1j * np.random.default_rng(1).standard_normal(12000)
with nvmathpy.fft.FFT(x) as plan:
    plan.plan()
    label = plan.candidate.label
y = nvmathpy.fft.fft(x)
error = float(np.linalg.norm(y - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x)))
print(json.dumps([label, first_candidate(describe(x.shape, x.dtype), 2).label, error]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "NVMATHPY_CACHE_DIR": str(isolated_cache)})
    label, first, error = json.loads(out.stdout)
    assert label == first == "scipy" and error < 1e-14


@pytest.mark.parametrize("kind, precision", [("c2c", "double"), ("r2c", "single")])
def test_measure_names_one_of_the_installed_libraries(kind, precision):
    value, measured = fft_calibration.measure(kind, precision, 16384, seconds=30.0)
    assert value["first"] in installed_libraries() and set(measured) <= set(installed_libraries())
    assert "scipy" in measured and all(ratio > 0 for ratio in measured.values())
    assert "pyfftw" not in measured  # keeps state between calls: would take quick-path sizes off the quick path


def test_measure_refuses_a_bound_it_cannot_keep():
    with pytest.raises(calibration.OutOfTime, match="fft c2c double 16384: 3 rounds take over"):
        fft_calibration.measure("c2c", "double", 16384, seconds=0.0)


def test_fft_values_are_never_measured_on_first_need(monkeypatch):
    """A first transform takes microseconds: only ``tune`` measures FFT values."""
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    monkeypatch.setattr(fft_calibration, "measure", lambda *args: pytest.fail("measured"))
    layout = describe((16384,), np.dtype("complex128"))
    assert library_order(layout) == builtin_order(layout) and calibration.entries() == []
