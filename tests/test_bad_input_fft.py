"""Bad input for every public function of :mod:`nvmathpy.fft` and :mod:`nvmathpy.scipy.fft`:
malformed shapes, axes, ``n``/``s``, ``norm`` and ``type``; every NumPy dtype kind in both byte
orders; layouts (Fortran, strided, reversed, broadcast, read-only, lists, scalars); sizes 0, 1
and huge-by-broadcast; NaN and infinity.

Each case asserts one specific outcome: the result NumPy (for ``nvmathpy.fft``) or SciPy (for
``nvmathpy.scipy.fft``) gives - same shape and dtype, values within the dtype's tolerance of the
float64 reference, non-finite entries in the same places - or an exception of the type they
raise (NumPy's and SciPy's own exception subclasses: the built-in exceptions they derive from).
Known, deliberate deviations are listed in :func:`_known_deviation` with the reason. Cases run
in worker subprocesses (tests/_fft_bad_input_worker.py), many per worker,
two workers at once; a worker that dies is reported as a failure of the case it was running,
and a fresh worker carries on with the rest. Results are then asserted per function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("_fft_bad_input_worker.py")

C2C = ["fft", "ifft"]
C2C_N = ["fft2", "ifft2", "fftn", "ifftn"]
R2C = ["rfft", "ihfft"]
C2R = ["irfft", "hfft"]
R_N = ["rfft2", "rfftn"]
C2R_N = ["irfft2", "irfftn"]
ONE_D = C2C + R2C + C2R
N_D = C2C_N + R_N + C2R_N
SCIPY_ONLY_N = ["hfft2", "ihfft2", "hfftn", "ihfftn"]
TRIG = ["dct", "idct", "dst", "idst"]
TRIG_N = ["dctn", "idctn", "dstn", "idstn"]
HELPERS = ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]

#: Every NumPy dtype kind, multi-byte numbers in both byte orders.
DTYPES = ["?", "i1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "u1", "<u2", ">u2", "<u4", ">u8", "<f2", ">f2",
          "<f4", ">f4", "<f8", ">f8", "g", "<c8", ">c8", "<c16", ">c16", "G", "O", "<U8", "S8", "<M8[s]",
          "<m8[s]", "V8", "struct"]
LAYOUTS = ["F", "strided", "reversed", "broadcast", "readonly", "list"]
FILLS = ["nan", "inf", "mixed"]


def _x(shape, dtype="<f8", layout="C", fill="normal"):
    return {"shape": list(shape), "dtype": dtype, "layout": layout, "fill": fill}


def _cases() -> list[dict]:
    cases: list[dict] = []

    def add(module: str, func: str, group: str, **case) -> None:
        cases.append({"id": len(cases), "module": module, "func": func, "group": group, **case})

    for module in ("numpy", "scipy"):
        one_d = ONE_D + (TRIG if module == "scipy" else [])
        n_d = N_D + (SCIPY_ONLY_N + TRIG_N if module == "scipy" else [])
        for func in one_d:
            complex_in = func in C2C + C2R
            base = "<c16" if complex_in else "<f8"
            # dtypes, both byte orders, every kind
            for dtype in DTYPES:
                add(module, func, "dtype", x=_x((7,), dtype))
            # layouts and sizes
            for layout in LAYOUTS:
                add(module, func, "layout", x=_x((5, 6), base, layout))
            for shape in [(0,), (1,), (2,), (13,), (3, 0), (0, 4), (1, 1), ()]:
                add(module, func, "size", x=_x(shape, base))
            add(module, func, "size", x=_x((1 << 40,), base, "huge"))
            add(module, func, "size", x={"python": 3.5})
            add(module, func, "size", x={"python": [[1, 2, 3], [4, 5]]})  # ragged
            for fill in FILLS:
                add(module, func, "nonfinite", x=_x((9,), base, fill=fill))
            # n, axis, norm
            for n in [None, 0, -1, 1, 5, 16, 2.5, "4", True, [4]]:
                add(module, func, "n", x=_x((6,), base), kwargs={"n": n})
            for axis in [0, -1, 1, -2, 2.0, None, [0]]:
                add(module, func, "axis", x=_x((4, 6), base), kwargs={"axis": axis})
            for norm in [None, "ortho", "forward", "backward", "bad", 1, ""]:
                add(module, func, "norm", x=_x((6,), base), kwargs={"norm": norm})
            if func in TRIG:
                for t in [1, 2, 3, 4, 0, 5, 2.0, "2"]:
                    add(module, func, "type", x=_x((6,), base), kwargs={"type": t})
                add(module, func, "type", x=_x((1,), base), kwargs={"type": 2})
        for func in n_d:
            complex_in = func in C2C_N + C2R_N + ["hfft2", "hfftn"]
            base = "<c16" if complex_in else "<f8"
            for dtype in DTYPES:
                add(module, func, "dtype", x=_x((4, 5), dtype))
            for layout in LAYOUTS:
                add(module, func, "layout", x=_x((4, 6, 3), base, layout))
            for shape in [(0, 3), (3, 0), (1, 1), (1,), (), (2, 3, 4)]:
                add(module, func, "size", x=_x(shape, base))
            add(module, func, "size", x=_x((1 << 20, 1 << 20), base, "huge"))
            for fill in FILLS:
                add(module, func, "nonfinite", x=_x((4, 5), base, fill=fill))
            shapes_axes = [
                {"s": None, "axes": None}, {"s": [3, 4], "axes": None}, {"s": [3], "axes": None},
                {"s": [3, 4], "axes": [0]}, {"s": None, "axes": [0, 0]}, {"s": None, "axes": [5]},
                {"s": None, "axes": [-3, -1]}, {"s": None, "axes": []}, {"s": [], "axes": None},
                {"s": [0, 4], "axes": None}, {"s": [-1, 4], "axes": None}, {"s": [3.0, 4], "axes": None},
                {"s": 3, "axes": None}, {"s": None, "axes": 1}, {"s": [2, 2, 2], "axes": [0, 1, 2]},
                {"s": None, "axes": [1, 0]},
            ]
            for kw in shapes_axes:
                add(module, func, "s-axes", x=_x((4, 6), base), kwargs={k: v for k, v in kw.items()
                                                                       if v is not None or k == "s"})
            for norm in [None, "ortho", "forward", "bad"]:
                add(module, func, "norm", x=_x((4, 6), base), kwargs={"norm": norm})
        # helpers
        for n, d in [(8, 1.0), (7, 0.5), (0, 1.0), (1, 1.0), (-1, 1.0), (8, 0), (2.5, 1.0), ("8", 1.0)]:
            for func in ("fftfreq", "rfftfreq"):
                add(module, func, "helper", args=[n, d])
        for func in ("fftshift", "ifftshift"):
            for spec, axes in [(_x((5, 4)), None), (_x((5, 4)), 1), (_x((5, 4)), [0, 1]), (_x((0,)), None),
                               (_x(()), None), (_x((5, 4), ">f8"), None), (_x((3,), "<c16", "list"), None),
                               (_x((5, 4)), 3)]:
                add(module, func, "helper", x=spec, kwargs={"axes": axes})
        if module == "scipy":
            for func in ("next_fast_len", "prev_fast_len"):
                for target in [1, 7, 1000, 0, -3, 2.5, "9", True]:
                    add(module, func, "helper", args=[target])
                    add(module, func, "helper", args=[target, True])
    return cases


CASES = _cases()


def _run_workers(cases: list[dict], cache_dir: Path, workers: int = 2) -> dict[int, dict]:
    """Results by case id: ``cases`` split over ``workers`` concurrent subprocesses; a worker
    that dies fails the case it was running, and a fresh worker takes the rest."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NVMATHPY_CACHE_DIR": str(cache_dir),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    results: dict[int, dict] = {}
    pending = [cases[i::workers] for i in range(workers)]
    while any(pending):
        procs = []
        for batch in pending:
            if not batch:
                continue
            proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
            procs.append((proc, batch))
        pending = []
        for proc, batch in procs:
            payload = "".join(json.dumps(case) + "\n" for case in batch)
            try:
                out, err = proc.communicate(payload, timeout=240)
            except subprocess.TimeoutExpired:  # a hang: fail the case it is in, carry on after it
                proc.kill()
                out, err = proc.communicate()
                err = "worker timed out (a hang)\n" + err
            started = None
            for line in out.splitlines():
                if line.startswith("S "):
                    started = int(line[2:])
                elif line.startswith("R "):
                    result = json.loads(line[2:])
                    results[result["id"]] = result
                    started = None
            if started is not None:  # died inside this case
                results[started] = {"id": started, "ok": False,
                                    "why": f"the worker died (rc {proc.returncode}): {err[-800:]}"}
                rest = [case for case in batch if case["id"] not in results]
                if rest:
                    pending.append(rest)
            elif proc.returncode != 0 or len([c for c in batch if c["id"] not in results]):
                missing = [case for case in batch if case["id"] not in results]
                if missing:
                    results[missing[0]["id"]] = {"id": missing[0]["id"], "ok": False,
                                                 "why": f"the worker stopped (rc {proc.returncode}): {err[-800:]}"}
                    if missing[1:]:
                        pending.append(missing[1:])
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int, dict]:
    return _run_workers(CASES, tmp_path_factory.mktemp("fft-bad-input-cache"))


GROUPS: dict[tuple[str, str], list[dict]] = defaultdict(list)
for _case in CASES:
    GROUPS[(_case["module"], _case["func"])].append(_case)


def _describe(case: dict) -> str:
    parts = [f"{'nvmathpy.fft' if case['module'] == 'numpy' else 'nvmathpy.scipy.fft'}.{case['func']}"]
    if "x" in case:
        parts.append(f"x={case['x']}")
    if case.get("args"):
        parts.append(f"args={case['args']}")
    if case.get("kwargs"):
        parts.append(f"kwargs={case['kwargs']}")
    return " ".join(parts)


def _known_deviation(case: dict) -> str | None:
    """Why nvmathpy deliberately answers this case differently from the reference (``None``:
    it must not)."""
    x = case.get("x", {})
    if case["module"] == "scipy" and x.get("dtype") == ">f2":
        return "SciPy fails on big-endian float16 with an internal RuntimeError; nvmathpy computes it as float16"
    if case.get("kwargs", {}).get("n") is True:
        return "a boolean length is refused (TypeError) where NumPy's rfft/ihfft and SciPy take True as 1"
    c2r = case["func"] in ("irfft", "hfft", "irfft2", "irfftn", "hfft2", "hfftn")
    if case["module"] == "scipy" and c2r and (case.get("kwargs", {}).get("n") == 0 or x.get("shape") in ([1], [1, 1])):
        return "SciPy makes a zero-length complex-to-real output one point long; nvmathpy refuses zero points"
    return None


@pytest.mark.parametrize("module,func", sorted(GROUPS), ids=[f"{m}.{f}" for m, f in sorted(GROUPS)])
def test_bad_input(results, module, func):
    """Every case of this function gives the reference's result or the reference's exception type."""
    failures = []
    for case in GROUPS[(module, func)]:
        outcome = results.get(case["id"], {"ok": False, "why": "no result"})
        if not outcome["ok"] and _known_deviation(case) is None:
            failures.append(f"[{case['group']}] {_describe(case)}: {outcome['why']}")
    assert not failures, f"{len(failures)} of {len(GROUPS[(module, func)])} cases:\n" + "\n".join(failures)


def test_every_public_function_is_driven():
    import nvmathpy.fft
    import nvmathpy.scipy.fft

    # SciPy's own objects (workers and backend controls, fhtoffset) and the FHT (SciPy's own code,
    # its FFTs run by nvmathpy) check their arguments as SciPy does: they are SciPy's checks
    scipy_own = {"get_workers", "set_workers", "set_backend", "skip_backend", "set_global_backend", "register_backend",
                 "fhtoffset", "fht", "ifht"}
    functions = {"numpy": {n for n in nvmathpy.fft.__all__ if n[0].islower()},
                 "scipy": set(nvmathpy.scipy.fft.__all__) - scipy_own - {"plan_cache"}}
    for module, names in functions.items():
        assert names <= {f for m, f in GROUPS if m == module}, names - {f for m, f in GROUPS if m == module}


def test_a_dying_worker_fails_one_case_and_the_rest_run(tmp_path, monkeypatch):
    """The harness itself: a case that kills its worker is reported, the cases after it still run."""
    cases = [{"id": 0, "module": "numpy", "func": "fft", "group": "t", "x": _x((4,))},
             {"id": 1, "module": "numpy", "func": "fft", "group": "t", "x": {"python": "__crash__"}},
             {"id": 2, "module": "numpy", "func": "fft", "group": "t", "x": _x((5,))}]
    monkeypatch.setenv("NVMATHPY_TEST_CRASH_ON", "__crash__")
    results = _run_workers(cases, tmp_path, workers=1)
    assert results[0]["ok"] and results[2]["ok"], results
    assert not results[1]["ok"] and "died" in results[1]["why"], results[1]


def test_cases_cover_each_dimension():
    assert len(CASES) > 1500
    groups = {c["group"] for c in CASES}
    assert {"dtype", "layout", "size", "nonfinite", "n", "axis", "norm", "s-axes", "type", "helper"} <= groups
    dtypes = {c["x"]["dtype"] for c in CASES if "x" in c and "dtype" in c["x"]}
    assert set(DTYPES) <= dtypes
    assert {">f8", ">c16", ">i4"} <= dtypes
