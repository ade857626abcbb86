"""Worker for tests/test_bad_input_fft.py: runs FFT cases read as JSON lines on stdin, each
beside its NumPy/SciPy reference, and writes ``S <id>`` before and ``R <json>`` after each case
(so the parent can name the case a crash happened in).

A case: ``{"id", "module": "numpy"|"scipy", "func", "x": input spec, "args": [...], "kwargs": {...}}``.
Outcome ``ok`` when nvmathpy and the reference agree: both raise, nvmathpy's exception an
instance of the reference's type; or both return arrays of the same shape and dtype whose
values agree with the float64 (complex128) reference by relative norm error, non-finite
entries in the same places. The input is checked to be unmodified.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
import zlib

import numpy as np
import scipy.fft

import nvmathpy.fft
import nvmathpy.scipy.fft

MODULES = {"numpy": (nvmathpy.fft, np.fft), "scipy": (nvmathpy.scipy.fft, scipy.fft)}


def make_input(spec: dict):
    """The operand a spec describes (deterministic)."""
    if spec.get("python") is not None:
        if spec["python"] == os.environ.get("NVMATHPY_TEST_CRASH_ON", object()):  # the harness's own test
            os.abort()
        return spec["python"]
    shape = tuple(spec["shape"])
    dtype = spec["dtype"]
    layout = spec.get("layout", "C")
    fill = spec.get("fill", "normal")
    rng = np.random.default_rng(zlib.crc32(json.dumps(spec, sort_keys=True).encode()))
    if layout == "huge":
        return np.broadcast_to(np.ones(1, dtype), shape)
    full = shape
    if layout == "strided":
        full = shape[:-1] + (2 * shape[-1],) if shape else shape
    real = rng.standard_normal(full)
    imag = rng.standard_normal(full)
    if fill == "nan" and real.size:
        real.flat[real.size // 2] = np.nan
    elif fill == "inf" and real.size:
        real.flat[0] = np.inf
    elif fill == "mixed" and real.size >= 2:
        real.flat[0], real.flat[-1] = -np.inf, np.nan
    kind = np.dtype(dtype).kind if dtype not in ("struct",) else "V"
    if dtype == "struct":
        x = np.zeros(full, [("a", "f8")])
    elif kind == "c":
        x = (real + 1j * imag).astype(dtype)
    elif kind in "f":
        x = real.astype(dtype)
    elif kind in "iu":
        x = np.round(np.abs(real) * 10 if kind == "u" else real * 10).astype(dtype)
    elif kind == "b":
        x = real > 0
    elif kind == "O":
        x = np.round(real, 3).astype(object)
    elif kind in "US":
        x = np.round(real, 3).astype(dtype)
    elif kind in "Mm":
        x = np.round(np.abs(real) * 100).astype("i8").astype(dtype)
    else:  # void
        x = np.zeros(full, dtype)
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "strided":
        x = x[..., ::2]
    elif layout == "reversed":
        x = x[::-1]
    elif layout == "broadcast":
        x = np.broadcast_to(x[..., :1], shape)
    elif layout == "readonly":
        x.flags.writeable = False
    elif layout == "list":
        return x.tolist()
    return x


def widened(x):
    """``x`` in float64/complex128 for the reference (numbers only), else ``None``."""
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "biufc":
        return None
    if x.dtype.kind == "c":
        return x.astype(np.complex128) if x.dtype.itemsize <= 16 else x
    return x.astype(np.float64) if x.dtype.itemsize <= 8 else x


def tolerance(dtype: np.dtype, size: int) -> float:
    scale = np.sqrt(max(1.0, np.log2(max(size, 2))))
    if dtype in (np.float16,):
        return 5e-3 * scale
    if dtype in (np.float32, np.complex64):
        return 3e-6 * scale
    return 1e-13 * scale


def compare(got, want, want64) -> str | None:
    """``None`` when ``got`` matches the reference result; else what differs."""
    if type(want) is not type(got) and not (np.isscalar(want) and np.isscalar(got)):
        if isinstance(want, np.ndarray) and not isinstance(got, np.ndarray):
            return f"returned {type(got).__name__}, the reference an ndarray"
    want_arr, got_arr = np.asarray(want), np.asarray(got)
    if got_arr.shape != want_arr.shape:
        return f"shape {got_arr.shape} != reference {want_arr.shape}"
    if got_arr.dtype != want_arr.dtype:
        return f"dtype {got_arr.dtype} != reference {want_arr.dtype}"
    if got_arr.dtype.kind not in "fc" or got_arr.size == 0:
        return None if np.array_equal(got_arr, want_arr) or got_arr.size == 0 else "values differ"
    ref = np.asarray(want64 if want64 is not None else want_arr)
    g = got_arr.astype(np.complex256 if got_arr.dtype.kind == "c" else np.longdouble)
    r = ref.astype(g.dtype)
    finite_g, finite_r = np.isfinite(g), np.isfinite(r)
    if not np.array_equal(finite_g, finite_r):
        return f"non-finite entries differ: {int((~finite_g).sum())} vs reference {int((~finite_r).sum())}"
    # where the result is not finite, inf and NaN (and their signs) depend on the order of the
    # arithmetic (inf - inf), which differs between FFT algorithms: only the positions must agree
    g, r = g[finite_r], r[finite_r]
    norm = float(np.linalg.norm(r.astype(np.complex128)))
    err = float(np.linalg.norm((g - r).astype(np.complex128))) / (norm if norm > 0 else 1.0)
    tol = tolerance(got_arr.dtype, got_arr.size)
    return None if err <= tol else f"relative error {err:.3g} > {tol:.3g}"


def same_kind(got: BaseException, want: BaseException) -> bool:
    """``got`` is an instance of the reference's exception type; for NumPy's and SciPy's own
    subclasses of built-in exceptions (``DTypePromotionError``, ``_ArrayMemoryError``,
    ``AxisError``...), an instance of every built-in exception they derive from."""
    if isinstance(got, type(want)):
        return True
    if type(want).__module__ == "builtins":
        return False
    bases = [b for b in type(want).__mro__ if b.__module__ == "builtins" and b not in (Exception, BaseException, object)]
    return bool(bases) and all(isinstance(got, b) for b in bases)


def run_case(case: dict) -> dict:
    ours_module, ref_module = MODULES[case["module"]]
    ours, ref = getattr(ours_module, case["func"]), getattr(ref_module, case["func"])
    args, kwargs = case.get("args", []), case.get("kwargs", {})
    x = make_input(case["x"]) if "x" in case else None
    call_args = ([x] if "x" in case else []) + list(args)
    before = (x.copy() if isinstance(x, np.ndarray) and x.dtype.kind != "V" and x.flags.writeable
              and x.nbytes < 1 << 26 else None)
    outcome: dict = {"id": case["id"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                want = ref(*call_args, **kwargs)
                want_exc = None
            except Exception as exc:  # noqa: BLE001
                want, want_exc = None, exc
            try:
                got = ours(*call_args, **kwargs)
                got_exc = None
            except Exception as exc:  # noqa: BLE001
                got, got_exc = None, exc
            want64 = None
            if want_exc is None and got_exc is None and "x" in case:
                wide = widened(x)
                if wide is not None and wide is not x:
                    try:
                        want64 = ref(wide, *args, **kwargs)
                    except Exception:  # noqa: BLE001
                        want64 = None
    if before is not None and not np.array_equal(before, x, equal_nan=before.dtype.kind in "fc"):
        outcome.update(ok=False, why="the input was modified")
        return outcome
    if want_exc is not None or got_exc is not None:
        if want_exc is None:
            outcome.update(ok=False, why=f"raised {type(got_exc).__name__}: {str(got_exc)[:300]}; the reference "
                                         "returned a result")
        elif got_exc is None:
            outcome.update(ok=False, why=f"returned a result; the reference raised {type(want_exc).__name__}: "
                                         f"{str(want_exc)[:200]}")
        elif not same_kind(got_exc, want_exc):
            outcome.update(ok=False, why=f"raised {type(got_exc).__name__} ({str(got_exc)[:200]}); the reference "
                                         f"raised {type(want_exc).__name__} ({str(want_exc)[:200]})")
        else:
            outcome.update(ok=True)
        return outcome
    why = compare(got, want, want64)
    outcome.update(ok=why is None, why=why)
    return outcome


def main() -> None:
    for line in sys.stdin:
        case = json.loads(line)
        sys.stdout.write(f"S {case['id']}\n")
        sys.stdout.flush()
        try:
            result = run_case(case)
        except Exception:  # noqa: BLE001 - a harness error is a failed case, not a dead worker
            result = {"id": case["id"], "ok": False, "why": "harness: " + traceback.format_exc()[-600:]}
        sys.stdout.write("R " + json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
