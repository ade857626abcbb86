"""The FFT library order calibrated per machine (nvmathpy.fft._calibrate): which layouts a
calibrated value covers, how the heuristic and the plans read it (FFTW's measured plans built
from the value's wisdom only), and the measurement's form.

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
from nvmathpy.fft._engines_cpu import cores, thread_options
from nvmathpy.fft._heuristic import (CALIBRATED_KINDS, CALIBRATED_SHAPES, CALIBRATION_WISDOM, builtin_order,
                                     calibrated_fftw, calibration_name, first_library, library_order, rank,
                                     threads_guess)
from nvmathpy.fft._layout import describe
from nvmathpy.fft._libraries import installed_libraries, measured_fftw_wisdom, plans_from_wisdom_only
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


def test_squares_and_cubes_read_the_value_of_the_nearest_calibrated_size():
    calibrate("fft.c2c.double.512x512", "scipy")
    calibrate("fft.r2c.single.64x64x64", "scipy")
    covered = [describe((512, 512), np.dtype("complex128")), describe((384, 640), np.dtype("complex128")),
               describe((64, 64, 64), np.dtype("float32"), kind="r2c"), describe((48, 80, 64), np.dtype("float32"))]
    for layout in covered:
        assert library_order(layout)[0] == "scipy", layout
    assert first_library(describe((1024, 1024), np.dtype("complex128"))) is None  # its own value, not measured


def test_plans_take_the_calibrated_library_in_the_small_band_and_one_call_functions_do_not():
    """The small band's one answer for every length binds the one-call functions (their runner
    families rely on it), not plans made for repeated use (pyFFTW among their libraries)."""
    calibrate("fft.c2c.double.1024", "ducc0")
    for length in (256, 1000, 1024):
        layout = describe((length,), np.dtype("complex128"))
        assert library_order(layout)[0] == library_order(layout, planned=False)[0] == "pocketfft"
        assert library_order(layout, planned=True)[0] == "ducc0"
        if "pyfftw" in installed_libraries():  # a plan that may keep state is one made for repeated use
            assert rank(layout, list(installed_libraries()), [1, 2])[0].label == "ducc0"
        stateless = [name for name in installed_libraries() if name != "pyfftw"]
        assert rank(layout, stateless, [1, 2])[0].label == "pocketfft"
    assert library_order(describe((128,), np.dtype("complex128")), planned=True)[0] == "pocketfft"  # not covered


def test_layouts_a_value_does_not_cover_keep_the_built_in_rules():
    for shapes in CALIBRATED_SHAPES.values():
        for shape in shapes:
            for kind in CALIBRATED_KINDS:
                for precision in ("double", "single"):
                    calibrate(calibration_name(kind, precision, shape), "scipy")
    not_covered = [
        describe((8, 1024), np.dtype("complex128")),  # a batch
        describe((8, 1024), np.dtype("complex128"), axes=(0,)),  # a batch along the other axis
        describe((4, 512, 512), np.dtype("complex128"), axes=(1, 2)),  # a batch of squares
        describe((64, 64), np.dtype("complex128"), axes=(0, 1)),  # two axes, below the smallest square's reach
        describe((16, 16384), np.dtype("complex128"), axes=(0, 1)),  # a strip, not a square
        describe((1031,), np.dtype("complex128")),  # a prime length
        describe((11 * 1024,), np.dtype("complex128")),  # a factor above 7
        describe((1024,), np.dtype("complex128")),  # the small band: one answer for every length (families)
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


@pytest.mark.parametrize("kind, precision, shape", [("c2c", "double", (16384,)), ("r2c", "single", (16384,)),
                                                    ("c2c", "single", (256, 256))])
def test_measure_names_one_of_the_installed_libraries(kind, precision, shape):
    value, measured = fft_calibration.measure(kind, precision, shape, seconds=30.0)
    dtype = {("c2c", "double"): "complex128", ("c2c", "single"): "complex64", ("r2c", "single"): "float32"}[kind, precision]
    layout = describe(shape, np.dtype(dtype), axes=tuple(range(len(shape))), kind=kind)
    guess = threads_guess(layout, thread_options(cores()))
    fftw = {count: fft_calibration.measured_fftw_name(count, guess) for count in sorted({guess, cores()})}
    plain = set(measured) - set(fftw.values())
    assert value["first"] in installed_libraries() and plain <= set(installed_libraries())
    assert "scipy" in measured and all(ratio > 0 for ratio in measured.values())
    assert "pyfftw" not in measured  # keeps state between calls: would take quick-path sizes off the quick path
    if "pyfftw" in installed_libraries():
        # FFTW's measured plans, on the heuristic's thread count and on the whole budget, are
        # timed for the plans, and the faster one kept where it leads
        assert set(fftw.values()) <= set(measured)
        fastest = max(fftw, key=lambda count: measured[fftw[count]])
        leads = measured[fftw[fastest]] > fft_calibration.MARGIN * measured[value["first"]]
        assert (value.get("planned") == "pyfftw") == leads
        if leads:
            assert value["threads"] == fastest and value["fftw_wisdom"] and value["fftw_time_limit"] > 0


def test_measure_plans_its_contenders_without_the_wisdom_earlier_values_left(monkeypatch):
    """FFTW plans an FFTW_ESTIMATE request from the wisdom in memory: the contenders of a value
    are made after forgetting what the values measured before it left (a user's process
    planning the shape has none of it), else pyFFTW at FFTW_ESTIMATE is timed with plans
    FFTW_MEASURE found for other shapes."""
    events = []
    monkeypatch.setattr(fft_calibration, "forget_fftw_wisdom", lambda: events.append("forget"))
    real_prepare = fft_calibration.prepare_candidate
    monkeypatch.setattr(fft_calibration, "prepare_candidate",
                        lambda layout, candidate: events.append(candidate.label) or real_prepare(layout, candidate))
    fft_calibration.measure("c2c", "double", (1024,), seconds=10.0)
    assert events[0] == "forget" and len(events) > 1 and "forget" not in events[1:]


def test_measure_refuses_a_bound_it_cannot_keep():
    with pytest.raises(calibration.OutOfTime, match="fft c2c double 16384: 3 rounds take over"):
        fft_calibration.measure("c2c", "double", (16384,), seconds=0.0)


needs_pyfftw = pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyFFTW is not installed")


#: FFTW wisdom a value may hold besides the real one: none, and a damaged store's (not base64).
NO_WISDOM = {"fftw_wisdom": {}, "fftw_time_limit": 1.0}
DAMAGED_WISDOM = {"fftw_wisdom": {"double": "not base64 at all!"}, "fftw_time_limit": 1.0}


def record_fftw(shape, dtype, threads, wisdom=True):
    """A value that names FFTW's measured plan for ``shape`` on ``threads`` threads, with FFTW's
    real wisdom of it (or ``wisdom``, a stand-in), as ``tune`` stores one where that plan was fastest."""
    layout = describe(shape, np.dtype(dtype))
    kind = "c2c" if np.dtype(dtype).kind == "c" else "r2c"
    extra = measured_fftw_wisdom(layout, threads, 1.0)[1] if wisdom is True else wisdom
    calibration.record(calibration_name(kind, layout.precision, shape),
                       {"first": "ducc0", "planned": "pyfftw", "threads": threads, **extra}, {}, 0.0)
    return layout


@needs_pyfftw
def test_fftw_measured_plans_lead_the_plans_of_their_own_shape_and_thread_count_only():
    layout = record_fftw((4096,), "complex128", 1)
    assert calibrated_fftw(layout, 1)["fftw_wisdom"] and calibrated_fftw(layout, 2) is None
    assert calibrated_fftw(describe((3 * 1024,), np.dtype("complex128")), 1) is None  # covered, not its shape
    ranked = rank(layout, list(installed_libraries()), [1, 2])
    first = ranked[0]
    assert first.label == "pyfftw" and first.params == {"threads": 1, "effort": "measure", "wisdom": CALIBRATION_WISDOM}
    # autotune's "measure" times the top four: another FFTW_MEASURE plan comes after the other thread count
    assert [str(c) for c in ranked[1:5]] == [str(ranked[1]), str(ranked[2]), f"{ranked[1].label}(threads=2)",
                                             "pyfftw(effort=measure,threads=1)"]
    stateless = [name for name in installed_libraries() if name != "pyfftw"]  # a one-call function's plan
    assert rank(layout, stateless, [1, 2])[0].label == "ducc0"
    assert library_order(layout)[0] == "ducc0"  # the one-call functions' first library


@needs_pyfftw
def test_a_kept_fftw_plan_on_more_threads_than_the_guess_leads_plans_that_may_use_them():
    """Calibration may keep FFTW's plan on the whole budget where the heuristic guesses one
    thread (FFTW's threads pay from smaller sizes): plans whose options include that count rank
    it first, plans held to one thread do not."""
    layout = record_fftw((4096,), "complex128", 2)
    assert threads_guess(layout, [1, 2]) == 1 and calibrated_fftw(layout, 2)["fftw_wisdom"]
    first = rank(layout, list(installed_libraries()), [1, 2])[0]
    assert first.label == "pyfftw" and first.params == {"threads": 2, "effort": "measure", "wisdom": CALIBRATION_WISDOM}
    assert "wisdom" not in rank(layout, list(installed_libraries()), [1])[0].params


@needs_pyfftw
def test_info_shows_a_kept_fftw_plan_without_its_wisdom_text():
    from nvmathpy.info import collect_info, format_info

    record_fftw((4096,), "complex128", 1)
    line = next(line for line in format_info(collect_info()).splitlines() if "fft.c2c.double.4096" in line)
    assert "'planned': 'pyfftw'" in line and "(FFTW's wisdom)" in line and len(line) < 300


@needs_pyfftw
def test_wisdom_of_a_search_its_time_limit_cut_short_is_not_kept():
    """FFTW does not plan again from the wisdom of a search its time limit stopped (here at once),
    so calibration keeps no FFTW plan it could not rebuild; a whole search's wisdom rebuilds it."""
    layout = describe((1024,), np.dtype("complex128"))
    assert not plans_from_wisdom_only(layout, 1, measured_fftw_wisdom(layout, 1, 1e-6)[1])
    assert plans_from_wisdom_only(layout, 1, measured_fftw_wisdom(layout, 1, 10.0)[1])


PLAN_FROM_CALIBRATION = """
import json, numpy as np, nvmathpy.fft
from nvmathpy.execution import ExecutionCPU
x = np.random.default_rng(0).standard_normal(4096) + 1j * np.random.default_rng(1).standard_normal(4096)
with nvmathpy.fft.FFT(x, execution=ExecutionCPU(1)) as plan:
    plan.plan()
    candidate, forward = str(plan.candidate), plan.execute().copy()
    back = plan.execute(direction="inverse")
errors = [float(np.linalg.norm(forward - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x))),
          float(np.linalg.norm(back - np.fft.ifft(x)) / np.linalg.norm(np.fft.ifft(x)))]
one_call = nvmathpy.fft.fft(x)
print(json.dumps([candidate, errors, bool(np.array_equal(one_call, np.fft.fft(x)) or
                  np.linalg.norm(one_call - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x)) < 1e-14)]))
"""


@needs_pyfftw
@pytest.mark.parametrize("wisdom", [True, NO_WISDOM, DAMAGED_WISDOM], ids=["real", "none", "damaged"])
def test_a_plan_builds_the_calibrated_fftw_plan_from_its_wisdom_only(isolated_cache, wisdom):
    """In a fresh process (FFTW knows nothing, rankings are memoised per layout): with the value's
    wisdom the plan is FFTW's measured one, planned from that wisdom only (FFTW_WISDOM_ONLY: no
    measurement); without it, or with a damaged one, the next candidate."""
    record_fftw((4096,), "complex128", 1, wisdom)
    out = subprocess.run([sys.executable, "-c", PLAN_FROM_CALIBRATION], capture_output=True, text=True, cwd=ROOT,
                         check=True, env={**os.environ, "NVMATHPY_CACHE_DIR": str(isolated_cache)})
    candidate, errors, one_call_right = json.loads(out.stdout)
    assert max(errors) < 1e-14 and one_call_right
    if wisdom is True:
        assert candidate == "pyfftw(effort=measure,threads=1,wisdom=calibration)"
    else:
        assert candidate == "ducc0(threads=1)"  # the value's first library


def test_fft_values_are_never_measured_on_first_need(monkeypatch):
    """A first transform takes microseconds: only ``tune`` measures FFT values."""
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    monkeypatch.setattr(fft_calibration, "measure", lambda *args: pytest.fail("measured"))
    layout = describe((16384,), np.dtype("complex128"))
    assert library_order(layout) == builtin_order(layout) and calibration.entries() == []
