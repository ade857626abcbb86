"""Calibration (nvmathpy.plan.calibration): the store of calibrated crossovers, the heuristics
that read them, automatic calibration, and ``python -m nvmathpy tune`` / ``info``.

No test depends on a timing: values are injected, and measurements, where they run, are only
checked for their form.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from nvmathpy.linalg.solvers.cpu import _calibrate as solver_calibration
from nvmathpy.linalg.solvers.cpu._factored import view_candidates
from nvmathpy.linalg.solvers.cpu._lookahead_cholesky import potrf_order
from nvmathpy.linalg.solvers.cpu._lookahead_lu import getrf_order
from nvmathpy.linalg.solvers.cpu._numpy_algorithms import ALGORITHMS, SCIPY, for_order
from nvmathpy.linalg.solvers.plans import eigh as eigh_plan
from nvmathpy.plan import Problem, calibration
from nvmathpy.plan.wisdom import WisdomWarning, default_wisdom

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_memo():
    """Each test reads its own store (conftest gives each its own cache directory)."""
    calibration.forget()
    yield
    calibration.forget()


def table(first):
    return {"first": first}


def test_a_recorded_value_is_read_back_by_a_later_process(isolated_cache):
    calibration.record("getrf.float64.1024", table("recursive"), {"1024": {"recursive": 1.5}}, 0.25)
    calibration.forget()
    assert calibration.calibrated("getrf.float64.1024", None) == table("recursive")
    code = ("from nvmathpy.plan import calibration; "
            "print(calibration.calibrated('getrf.float64.1024', None)['first'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "NVMATHPY_CACHE_DIR": str(isolated_cache)})
    assert out.stdout.strip() == "recursive"
    [entry] = calibration.entries()
    assert entry["name"] == "getrf.float64.1024" and entry["value"] == table("recursive")
    assert entry["seconds"] == 0.25 and entry["measured"] == {"1024": {"recursive": 1.5}} and entry["recorded"]


def test_a_value_of_another_machine_is_ignored(monkeypatch):
    here = calibration.cpu_description
    other = {**here(), "cpu": "another CPU", "cores": 128}
    monkeypatch.setattr(calibration, "cpu_description", lambda: other)
    calibration.record("potrf.float64.1024", table("lookahead"), {}, 0.1)
    assert calibration.calibrated("potrf.float64.1024", "default") == table("lookahead")
    monkeypatch.setattr(calibration, "cpu_description", here)
    calibration.forget()
    assert calibration.calibrated("potrf.float64.1024", "default") == "default"
    assert calibration.entries() == []
    assert len(default_wisdom().entries()) == 1  # still stored, for that machine


def test_prefetch_reads_a_family_in_one_pass_as_the_lookups_would(monkeypatch):
    here = calibration.cpu_description
    calibration.record("family.mine", table("a"), {}, 0.1)
    monkeypatch.setattr(calibration, "cpu_description", lambda: {**here(), "cpu": "another CPU"})
    calibration.record("family.other_machine", table("b"), {}, 0.1)
    monkeypatch.setattr(calibration, "cpu_description", here)
    calibration.forget()
    calibration.prefetch("family", ["family.mine", "family.other_machine", "family.none"])
    monkeypatch.setattr(default_wisdom(), "lookup", lambda *args: pytest.fail("looked up one by one"))
    assert calibration.calibrated("family.mine", None) == table("a")
    assert calibration.calibrated("family.other_machine", "default") == "default"
    assert calibration.calibrated("family.none", "default") == "default"
    calibration.prefetch("family", ["family.mine"])  # once per store and process


@pytest.mark.parametrize("every_round, first", [(False, "faster"), (True, "plain")])
def test_a_contender_that_lost_a_round_is_first_only_without_every_round(monkeypatch, every_round, first):
    rounds = {"faster": [1.5, 1.6, 0.9], "plain": [1.0, 1.0, 1.0]}  # per round: the reference's time over its
    contenders = {name: (lambda: None) for name in rounds}
    monkeypatch.setattr(calibration, "interleaved_ratios",
                        lambda call, reference, n, calls: rounds[next(k for k, c in contenders.items() if c is call)])
    best, medians = calibration.choose_first(contenders, lambda: None, "plain", 5.0, rounds=3, min_rounds=3,
                                             call_seconds=1e-4, max_calls=1, margin=1.1, every_round=every_round)
    assert best == first and medians == {"faster": 1.5, "plain": 1.0}


def test_a_corrupt_store_gives_the_defaults_and_is_rebuilt(isolated_cache):
    isolated_cache.mkdir(parents=True, exist_ok=True)
    (isolated_cache / "wisdom.json").write_bytes(b"\xff{not json")
    with pytest.warns(WisdomWarning, match="corrupt"):
        assert calibration.calibrated("getrf.float64.1024", 768) == 768
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WisdomWarning)
        calibration.record("getrf.float64.1024", table(None), {}, 0.1)
    calibration.forget()
    assert calibration.calibrated("getrf.float64.1024", 768) == table(None)
    assert json.loads((isolated_cache / "wisdom.json").read_text())["format"] == "nvmathpy-wisdom"


def test_concurrent_writers_lose_nothing(isolated_cache):
    code = ("import sys\nfrom nvmathpy.plan import calibration\n"
            "for i in range(15):\n    calibration.record(f'{sys.argv[1]}.{i}', i, {}, 0.0)\n")
    env = {**os.environ, "NVMATHPY_CACHE_DIR": str(isolated_cache)}
    writers = [subprocess.Popen([sys.executable, "-c", code, name], cwd=ROOT, env=env) for name in ("a", "b", "c")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    names = {entry["name"]: entry["value"] for entry in calibration.entries()}
    assert names == {f"{name}.{i}": i for name in "abc" for i in range(15)}


def test_automatic_calibration_measures_once_and_remembers(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    bounds = []

    def measure(seconds):
        bounds.append(seconds)
        return table("lookahead"), {"1024": {"lookahead": 1.4}}

    assert calibration.calibrated("getrf.float32.1024", None, measure) == table("lookahead")
    assert calibration.calibrated("getrf.float32.1024", None, measure) == table("lookahead")
    assert bounds == [calibration.AUTO_SECONDS]
    calibration.forget()
    assert calibration.calibrated("getrf.float32.1024", None, measure) == table("lookahead")
    assert len(bounds) == 1  # from the store


@pytest.mark.parametrize("setting", ["off", "0", "no"])
def test_automatic_calibration_off_keeps_the_default(monkeypatch, setting):
    monkeypatch.setenv("NVMATHPY_CALIBRATE", setting)
    assert calibration.calibrated("getrf.float32.1024", "default", lambda s: pytest.fail("measured")) == "default"


def test_a_failed_measurement_keeps_the_default_and_is_not_retried_for_a_while(monkeypatch, isolated_cache):
    """A measurement on first need that fails (out of time on a busy machine) leaves the default,
    and neither this process nor a later one measures again before RETRY_SECONDS have passed;
    then it is tried again, and a value stored later (``tune``) counts at once."""
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    tries = []

    def broken(seconds):
        tries.append(seconds)
        raise RuntimeError("no compiler")

    assert calibration.calibrated("potrf.float32.1024", "default", broken) == "default"
    assert calibration.calibrated("potrf.float32.1024", "default", broken) == "default"
    assert len(tries) == 1 and calibration.entries() == []  # a failure is no value (info lists none)
    calibration.forget()  # as a new process: the stored failure holds
    assert calibration.calibrated("potrf.float32.1024", "default", broken) == "default" and len(tries) == 1
    code = ("from nvmathpy.plan import calibration\n"
            "def measure(seconds): raise SystemExit('measured again')\n"
            "print(calibration.calibrated('potrf.float32.1024', 'default', measure))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "NVMATHPY_CACHE_DIR": str(isolated_cache), "NVMATHPY_CALIBRATE": "auto"})
    assert out.stdout.strip() == "default"
    calibration.forget()
    later = calibration.time.time() + calibration.RETRY_SECONDS + 1
    monkeypatch.setattr(calibration.time, "time", lambda: later)
    assert calibration.calibrated("potrf.float32.1024", "default", broken) == "default" and len(tries) == 2
    calibration.record("potrf.float32.1024", table("lookahead"), {}, 0.1)  # what tune stores
    calibration.forget()
    assert calibration.calibrated("potrf.float32.1024", "default", broken) == table("lookahead") and len(tries) == 2


def test_wisdom_off_keeps_the_defaults(monkeypatch):
    calibration.record("getrf.float64.1024", table("recursive"), {}, 0.1)
    monkeypatch.setenv("NVMATHPY_WISDOM", "off")
    assert calibration.calibrated("getrf.float64.1024", "default") == "default"


@pytest.mark.parametrize("first", ["recursive", None, "lookahead"])
def test_the_lu_order_puts_the_calibrated_first_choice_first(first):
    if first not in getrf_order(1024, "float64"):
        pytest.skip(f"{first} LU does not run here")
    calibration.record("getrf.float64.1024", table(first), {}, 0.1)
    order = ALGORITHMS["getrf"][0](1024, "float64")
    assert order[0] == first and sorted(order, key=str) == sorted(getrf_order(1024, "float64"), key=str)
    assert ALGORITHMS["getrf"][0](900, "float64")[0] == first  # the nearest measured order
    # nearer 768, and another dtype: covered but not calibrated, so SciPy's routine first
    assert ALGORITHMS["getrf"][0](880, "float64") == [SCIPY, *getrf_order(880, "float64")]
    assert ALGORITHMS["getrf"][0](1024, "float32") == [SCIPY, *getrf_order(1024, "float32")]
    assert ALGORITHMS["getrf"][0](4096, "float64") == getrf_order(4096, "float64")  # beyond the orders: built-in
    assert ALGORITHMS["getrf"][0](1024, "complex128") == getrf_order(1024, "complex128")  # a dtype not covered


def test_scipy_first_keeps_scipys_routines():
    calibration.record("getrf.float64.1024", table(SCIPY), {}, 0.1)
    calibration.record("potrf.float64.1024", table(None), {}, 0.1)
    assert for_order(1024, np.dtype("float64"), "getrf", "getrs") is None
    assert for_order(1024, np.dtype("float64"), "potrf", "potrs") is not None
    candidates = view_candidates("getrf", "getrs")(Problem.of("lu", n=1024, dtype="float64", layout="C"))
    assert [(c.params.get("lapack"), c.params["view"]) for c in candidates[:2]] == [(None, "transpose"), (None, "copy")]
    assert [c.params.get("algorithm") for c in candidates[2:]] == [a for a in getrf_order(1024, "float64")]


def test_a_calibrated_openblas_routine_is_given_without_asking_which_drivers_run_here(monkeypatch):
    """OpenBLAS's own routine (``None``) calibrated first is in every built-in order: ``for_order``
    gives it without building that order (which loads nvmathpy's compiled drivers, a first
    call's cost), the same routines as through the order."""
    from nvmathpy.linalg.solvers.cpu import _numpy_algorithms as numpy_algorithms, _numpy_lapack as numpy_lapack

    dtype = np.dtype("float64")
    if not numpy_lapack.suits(1024, dtype, "getrf", "getrs", "potrf", "potrs"):
        pytest.skip("no NumPy OpenBLAS LAPACK here")
    calibration.record("getrf.float64.1024", table(None), {}, 0.1)
    calibration.record("potrf.float64.1024", table(None), {}, 0.1)
    expected = {names: for_order(1024, dtype, *names) for names in (("getrf", "getrs"), ("potrf", "potrs"))}

    def no_order(n, dtype):
        raise AssertionError("the built-in order was built")

    monkeypatch.setattr(numpy_algorithms, "ALGORITHMS", {k: (no_order, of) for k, (_, of) in ALGORITHMS.items()})
    for names, routines in expected.items():
        assert for_order(1024, dtype, *names) == routines == numpy_lapack.routines(dtype, *names)
    calibration.record("potrf.float64.1024", table("lookahead"), {}, 0.1)  # another choice: the order is built
    with pytest.raises(AssertionError, match="built-in order"):
        for_order(1024, dtype, "potrf")


def test_the_cholesky_order_reads_its_calibration():
    calibration.record("potrf.float64.1024", table(None), {}, 0.1)
    assert ALGORITHMS["potrf"][0](1024, "float64")[0] is None
    assert ALGORITHMS["potrf"][0](1024, "float32") == [SCIPY, *potrf_order(1024, "float32")]  # not calibrated


def test_a_calibrated_choice_that_does_not_run_here_counts_as_none():
    calibration.record("potrf.float64.1024", table("an algorithm of another build"), {}, 0.1)
    assert ALGORITHMS["potrf"][0](1024, "float64") == [SCIPY, *potrf_order(1024, "float64")]


@pytest.mark.parametrize("first", ["numpy", "evr"])
def test_eigh_reads_its_calibration(first):
    fields = dict(n=1024, dtype="float64", layout="C", generalized=False, subset="all", bounds=[], lower=True,
                  itype=1, driver=None)
    one, batched, values_only = (Problem.of("eigh", batch=[], vectors=True, **fields),
                                 Problem.of("eigh", batch=[3], vectors=True, **fields),
                                 Problem.of("eigh", batch=[], vectors=False, **fields))
    built_in = {p: [c.label for c in eigh_plan._candidates(p)] for p in (one, batched, values_only)}
    calibration.record("eigh.float64.1024", table(first), {}, 0.1)
    labels = [c.label for c in eigh_plan._candidates(one)]
    assert labels[0] == first and sorted(labels) == sorted(built_in[one])
    for other in (batched, values_only):  # calibrated for one matrix with vectors only
        assert [c.label for c in eigh_plan._candidates(other)] == built_in[other]


@pytest.mark.parametrize("smallest", ["blocked_evd", "evr", "numpy"])
def test_eigh_carries_the_growing_algorithm_up_from_the_smallest_measured_order(monkeypatch, smallest):
    """eigh measures only its smallest order on first need; larger orders without a value of
    their own take the blocked back-transformation where that order chose it, else SciPy's
    driver; a larger order's own value (stored by tune) wins."""
    measured = []
    monkeypatch.setitem(solver_calibration.CALIBRATIONS, "eigh.float64.1024",
                        lambda seconds: measured.append(1024) or (table("numpy"), {}))
    monkeypatch.setitem(solver_calibration.CALIBRATIONS, "eigh.float64.512",
                        lambda seconds: measured.append(512) or (table(smallest), {}))
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    expected = "blocked_evd" if smallest == "blocked_evd" else "evr"
    for n in (1024, 2048, 600):
        assert solver_calibration.first_choice("eigh", n, "float64") == (True, expected if n > 640 else smallest)
    assert measured == [512]  # measured once, and never the larger orders
    calibration.record("eigh.float64.1024", table("numpy"), {}, 0.1)
    assert solver_calibration.first_choice("eigh", 1024, "float64") == (True, "numpy")
    assert solver_calibration.first_choice("eigh", 2048, "float64") == (True, "evr")  # 1024's choice is no growing one
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "off")
    assert solver_calibration.first_choice("eigh", 1536, "float32") == (True, "evr")  # nothing measured: plain


@pytest.mark.parametrize("kind, order, plain", [("getrf", getrf_order, SCIPY), ("potrf", potrf_order, SCIPY),
                                               ("eigh", lambda n, dtype: ["numpy"], "evr")])
def test_measure_names_one_of_the_algorithms_that_run_here(kind, order, plain):
    value, measured = solver_calibration.measure(kind, "float64", 40, seconds=60.0)
    algorithms = {str(alg) for alg in order(40, "float64")} | {plain}
    assert str(value["first"]) in algorithms and set(measured) >= algorithms - {"blocked_evd"}
    assert all(ratio > 0 for ratio in measured.values())


def test_measure_refuses_a_bound_it_cannot_keep():
    with pytest.raises(solver_calibration.OutOfTime, match="rounds take over"):
        solver_calibration.measure("getrf", "float64", 40, seconds=0.0)


def test_automatic_calibration_out_of_time_puts_scipys_routine_first(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CALIBRATE", "auto")
    monkeypatch.setattr(calibration, "AUTO_SECONDS", 0.0)
    assert ALGORITHMS["potrf"][0](512, "float64") == [SCIPY, *potrf_order(512, "float64")]
    assert calibration.entries() == []
    assert for_order(512, np.dtype("float64"), "potrf", "potrs") is None


@pytest.mark.parametrize("n", [410, 1024, 2560])
def test_uncalibrated_orders_that_calibration_covers_start_with_the_plain_call(n):
    """With calibration off (as in the tests and CI), nothing measured here says another algorithm
    beats the call a user would otherwise make, so it goes first: SciPy's ?getrf / ?potrf, and
    SciPy's default eigh driver for one matrix with vectors. Other orders and dtypes keep the
    built-in order."""
    assert ALGORITHMS["getrf"][0](n, "float64")[0] == SCIPY
    assert ALGORITHMS["potrf"][0](n, "float32")[0] == SCIPY
    assert for_order(n, np.dtype("float64"), "getrf", "getrs") is None
    assert for_order(n, np.dtype("float64"), "potrf", "potrs") is None
    fields = dict(n=n, dtype="float64", layout="C", generalized=False, subset="all", bounds=[], lower=True,
                  itype=1, driver=None, batch=[], vectors=True)
    assert eigh_plan._candidates(Problem.of("eigh", **fields))[0].label == "evr"
    for outside in (400, 2600):
        assert ALGORITHMS["getrf"][0](outside, "float64") == getrf_order(outside, "float64")
        assert ALGORITHMS["potrf"][0](outside, "float64") == potrf_order(outside, "float64")


def run_cli(*args, cache):
    env = {**os.environ, "NVMATHPY_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "nvmathpy", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


@pytest.mark.parametrize("name, choices", [("potrf.float32.512", {"lookahead", "None", SCIPY}),
                                           ("fft.c2c.double.16384", {"scipy", "pocketfft", "ducc0", "pyfftw", "mkl_fft"}),
                                           ("threads.geqrf.float64.96", {"1", "library"})])
def test_tune_stores_what_info_shows(isolated_cache, name, choices):
    tuned = run_cli("tune", name, "--seconds", "30", cache=isolated_cache)
    assert tuned.returncode == 0, tuned.stderr
    assert name in tuned.stdout
    if name.startswith("threads.") and (os.cpu_count() or 1) > 1:  # tune loads SciPy's OpenBLAS before asking
        assert "one thread" not in tuned.stdout
    values = json.loads(run_cli("info", "--json", cache=isolated_cache).stdout)["calibration"]["values"]
    if "not measured" in tuned.stdout:  # a machine too busy for 3 rounds in 30 s: nothing stored
        assert values == []
    else:
        assert [v["name"] for v in values] == [name]
        assert str(values[0]["value"]["first"]) in choices
        assert name in run_cli("info", cache=isolated_cache).stdout


def test_tune_refuses_an_unknown_crossover(isolated_cache):
    tuned = run_cli("tune", "fft.engine", cache=isolated_cache)
    assert tuned.returncode == 2 and "unknown crossover" in tuned.stderr and "getrf.float64" in tuned.stderr


#: Prints, as JSON, the machine description and the device part of every wisdom key: the
#: calibration's, a GEMM plan's and an FFT plan's (a solver plan's is the description and its
#: engine's name).
MACHINE_KEYS = """{}
import json
import numpy as np
import nvmathpy.fft, nvmathpy.linalg
from nvmathpy.execution import cpu_description
from nvmathpy.plan import calibration
x = np.ones((4, 4))
print(json.dumps([cpu_description(), calibration.cpu_description(), nvmathpy.linalg.Matmul(x, x)._engine.device(),
                  nvmathpy.fft.FFT(x.astype(complex))._engine.device()]))"""


@pytest.mark.parametrize("first", ["import scipy.linalg", "import scipy.fft", "import scipy.linalg; import numpy.fft"])
def test_the_machine_key_does_not_depend_on_what_was_imported_first(first):
    """threadpoolctl lists BLAS libraries in the order they were loaded, and SciPy's is loaded
    only with scipy.linalg: every key must read the same with NumPy alone as after either."""
    keys = [json.loads(subprocess.run([sys.executable, "-c", MACHINE_KEYS.format(imports)], capture_output=True,
                                      text=True, cwd=ROOT, check=True).stdout) for imports in ("import numpy", first)]
    assert keys[0] == keys[1]
    description = keys[0][0]
    assert all(key == description or key.items() >= description.items() for key in keys[0])
    assert description["blas"].startswith("numpy: ") and "; scipy: " in description["blas"]
    assert "unknown" not in description["blas"]


def test_importing_scipy_linalg_is_left_to_the_caller():
    """A wisdom key reads SciPy's BLAS from its build configuration: a NumPy-only program does
    not pay for loading scipy.linalg on its first planned call."""
    code = "import sys\nfrom nvmathpy.execution import cpu_description\ncpu_description()\nprint('scipy.linalg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_alternating_rounds_vary_who_follows_whom():
    """With three contenders or more, no contender always runs right after the same other one
    (the call before leaves caches and threads behind), and none follows itself; two alternate
    within a round."""
    trace: list[str] = []
    contenders = {name: (lambda name=name: trace.append(name)) for name in "abcd"}
    times = calibration.alternating_rounds(contenders, rounds=6, calls=5)
    assert {name: len(t) for name, t in times.items()} == dict.fromkeys("abcd", 6)
    assert sorted(trace) == sorted("abcd" * 30)
    follows = {(before, after) for before, after in zip(trace, trace[1:])}
    assert all(before != after for before, after in follows)
    assert all(len({before for before, after in follows if after == name}) >= 2 for name in "abcd")
    trace.clear()
    calibration.alternating_rounds({name: contenders[name] for name in "ab"}, rounds=3, calls=2)
    assert "".join(trace) == "abab" + "baba" + "abab"  # who goes first moves on each round
