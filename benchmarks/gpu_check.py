"""The GPU check: the GPU tests and the key GPU benchmarks in one run, one table at the end, and an
exit status that says whether everything checked is correct.

Run it on the lent GPU machine from the repository root (the H200 image already holds CuPy for
CUDA 13, torch, cuda-pathfinder and the CUDA 13 library wheels, so nothing is installed), through
the device tool:

    run(command="PYTHONPATH=. python3 benchmarks/gpu_check.py --out $OUT", timeout_s=560)

and a second, shorter run can redo only some sections, or only some tests:

    PYTHONPATH=. python3 benchmarks/gpu_check.py --out $OUT --only tests,fft-callbacks \
        --pytest-args "tests/gpu/test_gpu_fft_callbacks.py -x --tb=long"

Every row carries a correctness threshold - the relative norm error of its result against a
float64 reference (``rel_err`` <= ``tol``; the pytest row: exit status 0; the command-line rows:
exit status 0) - and, where issue 20 states one, a speed target. The ``verdict`` column says
``pass``, ``FAIL correctness`` (over its threshold, or no finite error), ``FAIL error`` (the row
raised, or its process failed or timed out), ``FAIL not run`` (its section did not fit the
budget), ``miss target`` (correct, but a speed target missed) or ``-`` (information only). A
summary line ends the table; the script exits 1 when any row FAILs, 0 otherwise (missed speed
targets are reported, not failures).

Issue 20's targets, one per row: custom epilogues (SwiGLU-like tail, residual add) in bf16/fp16,
8192x4096 @ 4096^2: >= 1.3x torch eager and >= 1.0x torch.compile; FFT with prolog/epilog
callbacks vs the FFT then elementwise: >= 1.2x (the row says which callback path ran - LTO
inside cuFFT or the elementwise fallback - and a second row times the fallback forced); 10^5
batched 8x8 solves: >= 5x cupy.linalg.solve; planned ``execute()`` host overhead of an 8x8 GEMM:
<= 10 us with CuPy operands, <= 12 us with torch ones; GEMM bf16/fp16/fp32 4096^3 and 8192^3:
>= 0.98x the faster of torch and CuPy.

Sections (``--only`` takes these names, comma-separated): ``tests`` (``pytest tests/gpu -q
-rfE --tb=short``, or ``--pytest-args``; full output in ``$OUT/pytest_gpu.log``, at most
``--test-timeout`` s), ``gemm``, ``fused``, ``custom``, ``overhead``, ``fft``, ``fft-callbacks``,
``solve``, ``eigh-svd``, ``dropin`` (issue 24: ``nvmathpy.scipy.linalg`` on CuPy arrays beside CuPy's
own functions, a row per function and size, target >= 1.0x; benchmarks/gpu_dropin.py), ``cli`` (``python -m nvmathpy demo --space cuda`` and ``bench all --quick
--space cuda``, logs in ``$OUT``). Each section starts only while ``--budget`` (default 420 s)
leaves the time it is sized for; benchmark sections are kept short (a few warm-ups, a dozen
timed calls).

Device times use CUDA events around each call, the L2 cache flushed (a 256 MiB device memset)
before each timed call, after warm-ups; medians are reported. The table is written to
``$OUT/gpu_check.md`` (all values also in ``$OUT/gpu_check.json``) after every row, so a run
stopped early still leaves its table; ``$OUT`` holds at most seven files (the device tool brings
back eight). Wisdom and compiled kernels go to a fresh temporary folder (the run starts cold).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the checkout, and gpu_dropin beside this file

ROWS: list[dict[str, Any]] = []
#: Where the table and JSON are (re)written after every row (set by ``main``).
OUT: Path | None = None

#: Relative-error thresholds against float64 references, by result dtype (as tests/numerics.py).
TOL = {"float32": 3e-5, "complex64": 3e-5, "float64": 1e-12, "complex128": 1e-12, "float16": 3e-3,
       "bfloat16": 2e-2}
#: Row keys that are not measured values.
_META = ("section", "case", "verdict", "rel_err", "tol", "ok", "error", "targets", "info", "not_run")


def row(section: str, case: str, *, rel_err: float | None = None, tol: float | None = None,
        ok: bool | None = None, error: str | None = None, targets: tuple[tuple[str, str, float], ...] = (),
        info: bool = False, not_run: str | None = None, **values: Any) -> dict[str, Any]:
    """Record one row and rewrite the table.

    Parameters
    ----------
    rel_err, tol
        The result's relative norm error against its float64 reference and the threshold it must
        not exceed (the row FAILs correctness otherwise, or when ``rel_err`` is missing or NaN).
    ok
        Instead of ``rel_err``/``tol``: whether the row's check passed (a process's exit status).
    error
        What went wrong when the row could not be measured (the row FAILs with an error).
    targets
        ``(value name, ">=" or "<=", threshold)``: speed targets on values of the row; a missed
        one is reported (``miss target``), it does not fail the run.
    info
        An information row (device, total time): no verdict.
    not_run
        Why the row's section did not run (it FAILs: the run did not check it).
    values
        The measured values, shown in the table.
    """
    entry = {"section": section, "case": case, **values, "rel_err": rel_err, "tol": tol, "ok": ok,
             "error": error, "targets": [list(t) for t in targets], "info": info, "not_run": not_run}
    entry["verdict"] = verdict(entry)
    ROWS.append(entry)
    shown = ", ".join(f"{k}={v}" for k, v in entry.items()
                      if k not in ("section", "case") and v is not None and v is not False and v != [])
    print(f"[{section}] {case}: {shown}", flush=True)
    if OUT is not None:  # a run killed at its time limit still leaves everything measured so far
        (OUT / "gpu_check.md").write_text(table() + "\n")
        (OUT / "gpu_check.json").write_text(json.dumps(ROWS, indent=1, default=str))
    return entry


def failed(section: str, case: str, exc: BaseException, **values: Any) -> dict[str, Any]:
    """A row whose measurement raised ``exc``."""
    return row(section, case, error=f"{type(exc).__name__}: {str(exc)[:160]}", **values)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def missed_targets(entry: dict[str, Any]) -> list[str]:
    """The row's speed targets not met (a target whose value is missing counts as missed)."""
    missed = []
    for name, op, threshold in entry.get("targets") or ():
        value = _number(entry.get(name))
        if value is None or (op == ">=" and value < threshold) or (op == "<=" and value > threshold):
            missed.append(f"{name} {op} {threshold} (got {entry.get(name, 'nothing')})")
    return missed


def verdict(entry: dict[str, Any]) -> str:
    """``"-"`` (information), ``"FAIL not run"``, ``"FAIL error"``, ``"FAIL correctness"``,
    ``"miss target"`` or ``"pass"``, in that order of precedence."""
    if entry.get("info"):
        return "-"
    if entry.get("not_run"):
        return "FAIL not run"
    if entry.get("error"):
        return "FAIL error"
    if entry.get("ok") is not None:
        correct = bool(entry["ok"])
    else:
        err, tol = _number(entry.get("rel_err")), _number(entry.get("tol"))
        correct = err is not None and tol is not None and err <= tol
    if not correct:
        return "FAIL correctness"
    return "miss target" if missed_targets(entry) else "pass"


def summary(rows: list[dict[str, Any]]) -> tuple[str, int]:
    """The summary line and the exit status (1 when any row FAILs)."""
    counts: dict[str, int] = {}
    for entry in rows:
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    failing = sum(n for v, n in counts.items() if v.startswith("FAIL"))
    order = ("pass", "miss target", "FAIL correctness", "FAIL error", "FAIL not run", "-")
    parts = ", ".join(f"{counts[v]} {v if v != '-' else 'info'}" for v in order if counts.get(v))
    missed = [f"{e['section']}/{e['case']}" for e in rows if e["verdict"] == "miss target"]
    line = (f"summary: {len(rows)} rows: {parts or 'none'}; "
            + ("FAILED: " + "; ".join(f"{e['section']}/{e['case']} ({e['verdict']})" for e in rows
                                      if e["verdict"].startswith("FAIL")) if failing else "every check correct")
            + (f"; targets missed: {'; '.join(missed)}" if missed else "")
            + f"; exit {1 if failing else 0}")
    return line, 1 if failing else 0


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1e}" if value and (abs(value) < 1e-2 or abs(value) >= 1e5) else f"{value:.4g}"
    return str(value)


def table() -> str:
    lines = ["| section | case | verdict | results |", "|---|---|---|---|"]
    for r in ROWS:
        values = [f"{k} {_fmt(v)}" for k, v in r.items() if k not in _META]
        if r.get("rel_err") is not None or r.get("tol") is not None:
            values.append(f"rel_err {_fmt(r.get('rel_err'))} (tol {_fmt(r.get('tol'))})")
        if r.get("ok") is not None:
            values.append("check " + ("ok" if r["ok"] else "failed"))
        values += [f"target {n} {op} {t}" for n, op, t in r.get("targets") or ()]
        missed = missed_targets(r) if r["verdict"] == "miss target" else []
        values += [f"missed {m}" for m in missed]
        if r.get("error"):
            values.append(f"error {r['error']}")
        if r.get("not_run"):
            values.append(f"not run: {r['not_run']}")
        text = "; ".join(values).replace("|", "/").replace("\n", " ")
        lines.append(f"| {r['section']} | {r['case']} | {r['verdict']} | {text} |")
    if ROWS:
        lines += ["", summary(ROWS)[0]]
    return "\n".join(lines)


def rel_error(got: Any, ref: Any) -> float:
    """Relative norm error of ``got`` against ``ref`` (any array package; computed in float64)."""
    import cupy

    def as64(x: Any) -> Any:
        if hasattr(x, "detach"):  # torch (widened there: CuPy has no bfloat16)
            import torch

            x = x.detach()
            x = cupy.from_dlpack(x.to(torch.complex128 if x.is_complex() else torch.float64).contiguous())
        x = cupy.asarray(x)
        return x.astype(cupy.complex128 if x.dtype.kind == "c" else cupy.float64)

    g, r = as64(got), as64(ref)
    if g.shape != r.shape:
        raise ValueError(f"result shape {g.shape} differs from the reference's {r.shape}")
    return float(cupy.linalg.norm((g - r).ravel()) / cupy.linalg.norm(r.ravel()))


# -- timing --------------------------------------------------------------------------------------------


def device_times(fn: Callable[[], object], warmup: int = 3, reps: int = 15) -> float:
    """Median seconds of one call of ``fn`` on the current CuPy stream (CUDA events, L2 flushed
    before each call: :func:`nvmathpy.cuda.runtime.event_timer`)."""
    import cupy

    from nvmathpy.cuda.runtime import event_timer

    timer = event_timer(lambda: cupy.cuda.get_current_stream().ptr, cupy.cuda.Device().id)
    for _ in range(warmup):
        fn()
    return statistics.median(timer(fn, 1) for _ in range(reps))


def interleaved_times(fns: dict[str, Callable[[], object]], rounds: int = 5, reps: int = 3) -> dict[str, float]:
    """Median seconds per call of each of ``fns``, measured in ``rounds`` rounds that take the
    callables in turn (the order rotating each round), so that clock and power changes over a
    section reach every side alike; each round's value is :func:`device_times` of ``reps`` calls."""
    names = list(fns)
    for name in names:
        device_times(fns[name], warmup=3, reps=1)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(device_times(fns[name], warmup=1, reps=reps))
    return {name: statistics.median(values) for name, values in samples.items()}


def host_overhead(fn: Callable[[], object], batches: int = 20, per_batch: int = 200) -> float:
    """Median host seconds per call, over batches short enough not to fill the launch queue."""
    import cupy

    for _ in range(50):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(per_batch):
            fn()
        samples.append((time.perf_counter() - start) / per_batch)
        cupy.cuda.get_current_stream().synchronize()
    return statistics.median(samples)


# -- 1. tests ---------------------------------------------------------------------------------------


def _partial(exc: subprocess.TimeoutExpired) -> str:
    """What a timed-out child wrote (bytes even under ``text=True``)."""
    return "".join(part.decode(errors="replace") if isinstance(part, bytes) else (part or "")
                   for part in (exc.stdout, exc.stderr))


def pytest_command(pytest_args: str | None) -> list[str]:
    """The pytest command: ``tests/gpu`` (or ``pytest_args``, e.g. test ids) with failures and
    errors summarised (``-rfE``) and short tracebacks, unless the arguments choose their own."""
    extra = shlex.split(pytest_args) if pytest_args else ["tests/gpu"]
    tb = [] if any(a.startswith("--tb") for a in extra) else ["--tb=short"]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *tb, *extra]


def run_tests(out: Path, timeout: int, pytest_args: str | None = None) -> None:
    log = out / "pytest_gpu.log"
    command = pytest_command(pytest_args)
    start = time.perf_counter()
    error = None
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = _partial(exc) + f"\nTIMEOUT after {timeout} s", "timeout"
        error = f"pytest did not finish in {timeout} s"
    log.write_text(" ".join(command[1:]) + "\n" + text)
    summary_lines = [line for line in str(text).splitlines()
                     if " passed" in line or " failed" in line or " error" in line or "no tests ran" in line]
    failures = [line.split(" - ")[0] for line in str(text).splitlines() if line.startswith(("FAILED ", "ERROR "))]
    row("tests", "pytest " + " ".join(command[6:]), ok=(code == 0), error=error, exit=code,
        summary=(summary_lines[-1].strip("= ") if summary_lines else "no summary"),
        failing=(", ".join(f.split(" ", 1)[1] for f in failures[:12]) + (" ..." if len(failures) > 12 else "")
                 if failures else "none"),
        seconds=round(time.perf_counter() - start, 1), log="pytest_gpu.log")


# -- 2. GEMM ------------------------------------------------------------------------------------------


def gemm(sizes: list[int], dtypes: list[str]) -> None:
    """GEMM n^3 vs torch.matmul and cupy.matmul; correct against a float64 product, target
    >= 0.98x the faster of torch and CuPy."""
    import cupy
    import torch

    from nvmathpy.linalg import Matmul

    for dtype in dtypes:
        for n in sizes:
            case = f"{dtype} {n}^3"
            tdtype = getattr(torch, dtype)
            gen = torch.Generator(device="cuda").manual_seed(n)
            a = torch.randn(n, n, device="cuda", dtype=tdtype, generator=gen)
            b = torch.randn(n, n, device="cuda", dtype=tdtype, generator=gen)
            flops = 2.0 * n**3
            try:
                reference = torch.matmul(a.double(), b.double())
                fns: dict[str, Callable[[], object]] = {"torch": lambda: torch.matmul(a, b)}
                notes = {}
                try:
                    ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
                    fns["cupy"] = lambda: cupy.matmul(ca, cb)
                    fns["cupy"]()
                except Exception as exc:  # CuPy has no bfloat16
                    fns.pop("cupy", None)
                    notes["cupy"] = f"n/a ({type(exc).__name__})"
                mm = Matmul(a, b)
                mm.plan()
                mm.autotune(effort="measure", repeats=3)
                fns["nvmathpy"] = mm.execute
                times = interleaved_times(fns)
                err = rel_error(mm.execute(), reference)
                mm.free()
                del reference
                fastest = min(v for k, v in times.items() if k != "nvmathpy")
                row("gemm", case, rel_err=err, tol=TOL[dtype],
                    targets=(("nvmathpy/fastest", ">=", 0.98),),
                    **{f"{k}_TFLOPs": round(flops / v / 1e12, 1) for k, v in times.items()},
                    **{"nvmathpy/fastest": round(fastest / times["nvmathpy"], 3)}, **notes)
            except Exception as exc:
                failed("gemm", case, exc)
            del a, b


# -- 3. fused epilogue ---------------------------------------------------------------------------------


def fused(tokens: int, features: int, dtypes: list[str]) -> None:
    """GEMM + bias + GELU (tanh) fused by cuBLASLt beside torch's mm + add + gelu (no target)."""
    import torch

    from nvmathpy.linalg import Matmul

    for dtype in dtypes:
        case = f"{dtype} ({tokens}x{features}) @ ({features}x{features}) + bias, gelu"
        tdtype = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(tokens, features, device="cuda", dtype=tdtype, generator=gen)
        w = torch.randn(features, features, device="cuda", dtype=tdtype, generator=gen) / math.sqrt(features)
        bias = torch.randn(features, device="cuda", dtype=tdtype, generator=gen)
        gelu = torch.nn.functional.gelu
        try:
            mm = Matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
            mm.plan()
            mm.autotune(effort="measure", repeats=3)
            times = interleaved_times({"torch": lambda: gelu(torch.mm(x, w) + bias, approximate="tanh"),
                                       "nvmathpy": mm.execute})
            t_torch, t_ours = times["torch"], times["nvmathpy"]
            ref = gelu(torch.mm(x.double(), w.double()) + bias.double(), approximate="tanh")
            err = rel_error(mm.execute(), ref)
            mm.free()
            row("fused", case, rel_err=err, tol=TOL[dtype], nvmathpy_ms=round(t_ours * 1e3, 3),
                torch_unfused_ms=round(t_torch * 1e3, 3), **{"torch/nvmathpy": round(t_torch / t_ours, 2)})
        except Exception as exc:
            failed("fused", case, exc)


# -- 3b. custom (traced Python) epilogues ------------------------------------------------------------------


def _swiglu_tail(x: Any, gate: Any, scale: Any) -> Any:
    return x * (gate / (1 + np.exp(-gate))) * scale


def _residual(x: Any, r: Any, bias: Any) -> Any:
    return np.maximum(x + bias, 0) + r


def custom(tokens: int, features: int, dtypes: list[str], compile_dtypes: tuple[str, ...] = ("bfloat16", "float16")
           ) -> None:
    """Custom epilogues (a SwiGLU-like tail, a residual add): the autotuned plan (its error against
    a float64 reference is the row's check; each candidate kind's time and error are shown) beside
    torch eager (mm + elementwise ops) and torch.compile. Targets: >= 1.3x eager, >= 1.0x compile."""
    import torch

    from nvmathpy.linalg import Matmul

    for dtype in dtypes:
        tdtype = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(2)
        x = torch.randn(tokens, features, device="cuda", dtype=tdtype, generator=gen)
        w = torch.randn(features, features, device="cuda", dtype=tdtype, generator=gen) / math.sqrt(features)
        gate = torch.randn(tokens, features, device="cuda", dtype=tdtype, generator=gen)
        r = torch.randn(tokens, features, device="cuda", dtype=tdtype, generator=gen)
        bias = torch.randn(features, device="cuda", dtype=tdtype, generator=gen)

        def eager_swiglu(x: Any, w: Any, gate: Any) -> Any:
            return torch.mm(x, w) * (gate / (1 + torch.exp(-gate))) * 0.5

        def eager_residual(x: Any, w: Any, r: Any, bias: Any) -> Any:
            return torch.relu(torch.mm(x, w) + bias) + r

        cases = [("swiglu tail", _swiglu_tail, {"gate": gate, "scale": 0.5}, eager_swiglu, (x, w, gate)),
                 ("residual add", _residual, {"r": r, "bias": bias}, eager_residual, (x, w, r, bias))]
        targets = (("torch_eager/nvmathpy", ">=", 1.3), ("torch_compile/nvmathpy", ">=", 1.0))
        for name, fn, inputs, eager, args in cases:
            case = f"{dtype} ({tokens}x{features}) @ ({features}x{features}), {name}"
            values: dict[str, Any] = {}
            try:
                t_eager = device_times(lambda: eager(*args), reps=10)
                values["torch_eager_ms"] = round(t_eager * 1e3, 3)
                if dtype in compile_dtypes:
                    try:
                        compiled = torch.compile(eager)
                        values["torch_compile_ms"] = round(device_times(lambda: compiled(*args), reps=10) * 1e3, 3)
                    except Exception as exc:  # no compiler toolchain on the machine, ...
                        values["torch_compile"] = f"n/a ({type(exc).__name__})"
                ref = eager(*(a.double() for a in args))
                mm = Matmul(x, w, epilogue=fn, epilogue_inputs=inputs)
                seen = set()
                for candidate in mm._engine.candidates(mm.problem):
                    if candidate.label in seen:
                        continue
                    seen.add(candidate.label)
                    try:
                        mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
                        values[f"{candidate.label}_ms"] = round(device_times(mm.execute, reps=10) * 1e3, 3)
                        values[f"{candidate.label}_err"] = f"{rel_error(mm.execute(), ref):.1e}"
                    except Exception as exc:
                        values[f"{candidate.label}"] = f"failed ({type(exc).__name__}: {str(exc)[:60]})"
                mm.autotune(effort="measure", repeats=3, force=True)
                fns = {"eager": lambda: eager(*args), "nvmathpy": mm.execute}
                if "torch_compile_ms" in values:
                    fns["compile"] = lambda: compiled(*args)
                times = interleaved_times(fns)  # the ratios: each side in turn, in one loop
                t_best, t_eager = times["nvmathpy"], times["eager"]
                err = rel_error(mm.execute(), ref)
                values["autotuned"] = mm.candidate.label
                values["autotuned_ms"] = round(t_best * 1e3, 3)
                values["torch_eager/nvmathpy"] = round(t_eager / t_best, 2)
                if "compile" in times:
                    values["torch_compile/nvmathpy"] = round(times["compile"] / t_best, 2)
                mm.free()
                row("custom", case, rel_err=err, tol=TOL[dtype], targets=targets, **values)
            except Exception as exc:
                failed("custom", case, exc, targets=targets, **values)
        del x, w, gate, r, bias


# -- 4. host overhead -----------------------------------------------------------------------------------


def overhead() -> None:
    """Host time of a planned ``execute()`` for an 8x8 float32 GEMM, CuPy operands (target <= 10 us)
    and torch operands (target <= 12 us), beside cupy/torch.matmul; the result checked too."""
    import cupy
    import torch

    from nvmathpy.linalg import Matmul

    a, b = (cupy.random.standard_normal((8, 8), dtype=cupy.float32) for _ in range(2))
    reference = a.astype(cupy.float64) @ b.astype(cupy.float64)
    for package in ("cupy", "torch"):
        limit = 10.0 if package == "cupy" else 12.0
        case = f"8x8x8 float32, planned execute(), {package} operands"
        try:
            x, y = (a, b) if package == "cupy" else (torch.from_dlpack(a), torch.from_dlpack(b))
            mm = Matmul(x, y)
            mm.plan()
            err = rel_error(mm.execute(), reference)
            values = {"nvmathpy_execute_us": round(host_overhead(mm.execute) * 1e6, 2)}
            if package == "cupy":
                values["cupy_matmul_us"] = round(host_overhead(lambda: cupy.matmul(a, b)) * 1e6, 2)
            else:
                values["torch_matmul_us"] = round(host_overhead(lambda: torch.matmul(x, y)) * 1e6, 2)
            mm.free()
            row("overhead", case, rel_err=err, tol=TOL["float32"], targets=(("nvmathpy_execute_us", "<=", limit),),
                **values)
        except Exception as exc:
            failed("overhead", case, exc, targets=(("nvmathpy_execute_us", "<=", limit),))


# -- 5. other operations ----------------------------------------------------------------------------------


def _other(section: str, case: str, ours: Callable[[], object], theirs: Callable[[], object], label: str,
           check: Callable[[Any], float], tol: float, reps: int = 12,
           targets: tuple[tuple[str, str, float], ...] = (), **extra: Any) -> None:
    """Time ``ours`` beside ``theirs``; the row's check is ``check(ours())`` <= ``tol``."""
    try:
        err = check(ours())
        rounds = max(1, min(5, reps // 2))
        times = interleaved_times({"ours": ours, "theirs": theirs}, rounds=rounds, reps=max(1, reps // rounds))
        t_ours, t_theirs = times["ours"], times["theirs"]
        row(section, case, rel_err=err, tol=tol, targets=targets, nvmathpy_ms=round(t_ours * 1e3, 3),
            **{f"{label}_ms": round(t_theirs * 1e3, 3)}, **{f"{label}/nvmathpy": round(t_theirs / t_ours, 2)},
            **extra)
    except Exception as exc:
        failed(section, case, exc, targets=targets, **extra)


def fft_section() -> None:
    """FFT vs cupy.fft: 1-D, 2-D and batched (contiguous and strided axis), c2c complex64 and r2c
    float32, planned and autotuned (``FFT.execute``) and through the one-call function; checked
    against cupy.fft in double precision. Shown: cupy/nvmathpy (no target in issue 20)."""
    import cupy

    import nvmathpy.fft as nfft

    rng = cupy.random.default_rng(5)

    def c64(shape: tuple[int, ...]) -> Any:
        return (rng.standard_normal(shape, dtype=cupy.float32)
                + 1j * rng.standard_normal(shape, dtype=cupy.float32)).astype(cupy.complex64)

    cases = [("c64 1-D 2^24", lambda: c64((1 << 24,)), (0,), "c2c"),
             ("c64 2-D 4096^2", lambda: c64((4096, 4096)), (0, 1), "c2c"),
             ("c64 batched 1024 x 4096, axis -1", lambda: c64((1024, 4096)), (1,), "c2c"),
             ("c64 batched 4096 x 1024, axis 0", lambda: c64((4096, 1024)), (0,), "c2c"),
             ("f32 r2c 2-D 4096^2", lambda: rng.standard_normal((4096, 4096), dtype=cupy.float32), (0, 1), "r2c")]
    for case, make, axes, kind in cases:
        try:
            x = make()
            theirs_fn, ours_fn = (cupy.fft.fftn, nfft.fftn) if kind == "c2c" else (cupy.fft.rfftn, nfft.rfftn)
            wide = x.astype(cupy.complex128 if kind == "c2c" else cupy.float64)
            reference = theirs_fn(wide, axes=axes)
            del wide
            plan = nfft.FFT(x, axes=axes)
            plan.plan()
            plan.autotune(effort="measure", repeats=3)
            err = rel_error(plan.execute(), reference)
            del reference
            t_plan = device_times(plan.execute, reps=10)
            t_call = device_times(lambda: ours_fn(x, axes=axes), reps=10)
            t_cupy = device_times(lambda: theirs_fn(x, axes=axes), reps=10)
            row("fft", case, rel_err=err, tol=TOL["complex64"], nvmathpy_ms=round(t_plan * 1e3, 3),
                nvmathpy_call_ms=round(t_call * 1e3, 3), cupy_ms=round(t_cupy * 1e3, 3),
                **{"cupy/nvmathpy": round(t_cupy / t_plan, 2), "cupy/nvmathpy_call": round(t_cupy / t_call, 2)},
                candidate=str(plan.candidate))
            plan.free()
            del x
        except Exception as exc:
            failed("fft", case, exc)


def _callback_path(plan: Any) -> str:
    """Which way a planned FFT runs its callbacks: ``lto`` (inside cuFFT; how they were attached)
    or ``elementwise``."""
    prepared = getattr(plan, "_prepared", None)
    path, naming = getattr(prepared, "callback_path", None), getattr(prepared, "callback_naming", None)
    return f"{path} ({naming} naming)" if naming else str(path)


def fft_callback_section() -> None:
    """FFT with callbacks vs the FFT then elementwise: a window prolog and a filter epilog run with
    the FFT (LTO callbacks inside cuFFT, or - where cuFFT refuses them - the elementwise fallback;
    the row says which), beside the same FFT plan without callbacks followed by the two CuPy
    multiplications. A second row per case forces the elementwise fallback. Target >= 1.2x;
    checked against the windowed, filtered FFT in double precision."""
    import cupy

    import nvmathpy.fft as nfft
    from nvmathpy.fft import _cuda_engine

    rng = cupy.random.default_rng(6)
    cases = [("c64 batched 1024 x 4096, window + filter", (1024, 4096), cupy.complex64),
             ("f32 r2c batched 1024 x 4096, window + filter", (1024, 4096), cupy.float32)]
    targets = (("unfused/callbacks", ">=", 1.2),)
    for case, shape, dtype in cases:
        x = rng.standard_normal(shape, dtype=cupy.float32)
        if dtype == cupy.complex64:
            x = (x + 1j * rng.standard_normal(shape, dtype=cupy.float32)).astype(dtype)
        fft = cupy.fft.fft if dtype == cupy.complex64 else cupy.fft.rfft
        w = cupy.hanning(shape[1]).astype(cupy.float32)
        filt = cupy.linspace(1, 0, fft(x[:1]).shape[1], dtype=cupy.float32)
        reference = fft(x.astype(cupy.complex128 if dtype == cupy.complex64 else cupy.float64) * w) * filt
        plain = None
        for forced in (False, True):
            label = case + (", elementwise fallback forced" if forced else "")
            saved = _cuda_engine.CALLBACK_PATH
            try:
                if plain is None:
                    plain = nfft.FFT(x, axes=[1])
                    plain.plan()
                    plain.autotune(effort="measure", repeats=3)
                _cuda_engine.CALLBACK_PATH = "elementwise" if forced else "auto"
                fused = nfft.FFT(x, axes=[1], prolog=lambda v, w: v * w, epilog=lambda v, f: v * f,
                                 callback_inputs={"w": w, "f": filt})
                fused.plan()
                fused.autotune(effort="measure", repeats=3)
                err = rel_error(fused.execute(), reference)

                def unfused() -> Any:
                    plain.reset_operand(x * w)
                    return plain.execute() * filt

                times = interleaved_times({"callbacks": fused.execute, "unfused": unfused})
                t_fused, t_unfused = times["callbacks"], times["unfused"]
                refusals = "; ".join(f"{k}: {v[:100]}" for k, v in _cuda_engine.LTO_REFUSALS.items()) or "none"
                row("fft callbacks", label, rel_err=err, tol=TOL["complex64"], targets=targets,
                    path=_callback_path(fused), cufft_lto_refusals=refusals, callbacks_ms=round(t_fused * 1e3, 3),
                    fft_then_elementwise_ms=round(t_unfused * 1e3, 3),
                    **{"unfused/callbacks": round(t_unfused / t_fused, 2)}, candidate=str(fused.candidate))
                fused.free()
            except Exception as exc:
                failed("fft callbacks", label, exc, targets=targets)
            finally:
                _cuda_engine.CALLBACK_PATH = saved
        if plain is not None:
            plain.free()
        del x, reference


def solve_section() -> None:
    """Batched small solves vs cupy.linalg.solve: 10^5 systems of 8x8 (float64 and float32), the
    one-call function (plan cache; it checks the info codes: one sync per call), then each route.
    Checked by the residual ||A x - b|| / ||b||. Target >= 5x."""
    import cupy

    import nvmathpy.linalg as la

    rng = cupy.random.default_rng(7)
    for dtype in ("float64", "float32"):
        a = (rng.standard_normal((100000, 8, 8)) + 8 * cupy.eye(8)).astype(dtype)
        b = rng.standard_normal((100000, 8, 1)).astype(dtype)
        a64, b64 = a.astype(cupy.float64), b.astype(cupy.float64)

        def residual(x: Any) -> float:
            return float(cupy.linalg.norm(a64 @ cupy.asarray(x, dtype=cupy.float64) - b64) / cupy.linalg.norm(b64))

        route = "?"
        try:
            from nvmathpy.linalg.solvers.cuda._plans import CudaSolve

            with CudaSolve(a, b) as probe:  # the route the one-call function's plan takes
                route = probe.plan().candidate.label
        except Exception as exc:
            route = f"? ({type(exc).__name__})"
        _other("solve", f"{dtype} 10^5 x (8x8)", lambda: la.solve(a, b), lambda: cupy.linalg.solve(a, b), "cupy",
               residual, TOL[dtype], targets=(("cupy/nvmathpy", ">=", 5.0),), route=route)
        _solve_routes(a, b, residual, TOL[dtype])


def _solve_routes(a: Any, b: Any, residual: Callable[[Any], float], tol: float) -> None:
    """The batched-solve rows per route: the generated ``tiny`` kernel and cuBLAS's
    ``getrfBatched``, each planned (``execute`` plus the info check) beside cupy.linalg.solve."""
    import cupy

    from nvmathpy.linalg.solvers.cuda._plans import CudaSolve

    for label in ("tiny", "getrfBatched"):
        case = f"{a.dtype} 10^5 x (8x8) route {label}"
        targets = (("cupy/nvmathpy", ">=", 5.0),) if label == "tiny" else ()
        try:
            plan = CudaSolve(a, b)
            plan.plan()
            chosen = next(c for c in plan._engine.candidates(plan.problem) if c.label == label)
            plan._install(plan._engine.prepare(plan.problem, chosen), "gpu_check")
        except Exception as exc:
            failed("solve", case, exc, targets=targets)
            continue

        def run() -> Any:
            x = plan._run()
            plan.check()
            return x

        _other("solve", case, run, lambda: cupy.linalg.solve(a, b), "cupy", residual, tol, targets=targets)
        plan.free()


def eig_svd_section() -> None:
    """eigh and svd vs CuPy at n = 4096 (float64; one or two timed calls: these take 0.1-2 s each),
    checked by their backward errors ||A V - V diag(w)|| / ||A||, ||U diag(s) V^H - A|| / ||A|| and
    the singular values against CuPy's."""
    import cupy

    import nvmathpy.linalg as la

    x = cupy.random.default_rng(8).standard_normal((4096, 4096))
    sym = x + x.T
    norm_sym, norm_x = float(cupy.linalg.norm(sym)), float(cupy.linalg.norm(x))

    def eigh_error(result: Any) -> float:
        w, v = result
        return float(cupy.linalg.norm(sym @ v - v * w) / norm_sym)

    def svd_error(result: Any) -> float:
        u, s, vh = result
        return float(cupy.linalg.norm((u * s) @ vh - x) / norm_x)

    reference_s = cupy.linalg.svd(x, compute_uv=False)
    tol = 1e-11  # backward errors of n = 4096 float64 factorizations: a few hundred ulps
    _other("eigh", "f64 4096x4096", lambda: la.eigh(sym), lambda: cupy.linalg.eigh(sym), "cupy", eigh_error, tol,
           reps=2)
    _other("svd", "f64 4096x4096", lambda: la.svd(x), lambda: cupy.linalg.svd(x), "cupy", svd_error, tol, reps=1)
    _other("svdvals", "f64 4096x4096", lambda: la.svdvals(x), lambda: cupy.linalg.svd(x, compute_uv=False),
           "cupy", lambda s: rel_error(s, reference_s), tol, reps=1)


def dropin_section() -> None:
    """issue 24's table: each scipy.linalg function at n = 8, 256, 2048 beside CuPy's (gpu_dropin.py)."""
    import nvmathpy.linalg as la
    from gpu_dropin import SIZES, cases, run_dropin

    run_dropin(lambda n: cases(n, rel_error), SIZES, row, failed, interleaved_times, la.cuda_checks)


# -- 6. the command line on the GPU (demo, bench) ----------------------------------------------------------


def cli_section(out: Path, timeout: int) -> None:
    """``python -m nvmathpy demo --space cuda`` and ``bench all --quick --space cuda`` (JSON and plot
    in ``out``), each in its own process under ``timeout`` seconds, logged to ``out``; the check
    is the exit status (the demo checks its own results)."""
    commands = {
        "demo_gpu": ["demo", "--space", "cuda"],
        "bench_gpu": ["bench", "all", "--quick", "--space", "cuda", "--json", str(out / "bench_gpu.json"),
                      "--plot", str(out / "bench_gpu.png")],
    }
    for name, args in commands.items():
        start = time.perf_counter()
        error = None
        try:
            done = subprocess.run([sys.executable, "-m", "nvmathpy", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})
            text, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            text, code = _partial(exc) + f"\nTIMEOUT after {timeout} s", "timeout"
            error = f"did not finish in {timeout} s"
        (out / f"{name}.log").write_text(text)
        last = [line for line in text.splitlines() if line.strip()]
        row("cli", "python -m nvmathpy " + " ".join(args[:5]), ok=(code == 0), error=error, exit=code,
            last=(last[-1][:100] if last else ""), seconds=round(time.perf_counter() - start, 1), log=f"{name}.log")


# -- main -------------------------------------------------------------------------------------------------


#: The sections in run order, and the seconds of the budget each is sized for (it starts only if
#: that much is left; ``tests`` and ``cli`` get what their own timeouts say).
SECTIONS = {"tests": 0, "gemm": 45, "fused": 15, "custom": 60, "overhead": 10, "fft": 20, "fft-callbacks": 25,
            "solve": 20, "eigh-svd": 30, "dropin": 60, "cli": 60}
#: Sections that compare with torch.
NEEDS_TORCH = ("gemm", "fused", "custom", "overhead")


def parse_sections(only: str | None) -> list[str]:
    """The sections ``--only`` names (all, in run order, when ``None``); unknown names raise."""
    if not only:
        return list(SECTIONS)
    names = [name.strip().replace(" ", "-").replace("/", "-").replace("_", "-") for name in only.split(",")]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"--only: unknown section(s) {unknown}; sections: {', '.join(SECTIONS)}")
    return [name for name in SECTIONS if name in names]


def main(argv: list[str] | None = None) -> int:
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the logs, table and JSON")
    parser.add_argument("--only", help="comma-separated sections to run: " + ", ".join(SECTIONS))
    parser.add_argument("--pytest-args", help="arguments for pytest instead of tests/gpu (e.g. test ids, -x)")
    parser.add_argument("--skip-tests", action="store_true",
                        help="benchmarks only (same as leaving tests out of --only)")
    parser.add_argument("--skip-cli", action="store_true", help="leave out demo/bench --space cuda")
    parser.add_argument("--cli-timeout", type=int, default=120, help="seconds for each of demo and bench")
    parser.add_argument("--budget", type=int, default=420,
                        help="seconds the whole run may take: sections start only while it leaves time for them")
    parser.add_argument("--test-timeout", type=int, default=240)
    args = parser.parse_args(argv)
    sections = [s for s in parse_sections(args.only)
                if not (s == "tests" and args.skip_tests) and not (s == "cli" and args.skip_cli)]
    args.out.mkdir(parents=True, exist_ok=True)
    OUT = args.out
    ROWS.clear()
    os.environ["NVMATHPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvmathpy-gpu-check-")
    began = time.perf_counter()

    def left() -> float:
        return args.budget - (time.perf_counter() - began)

    if "tests" in sections:  # the tests get what the budget leaves beyond the other sections' sizes
        reserved = sum(SECTIONS[s] for s in sections if s != "tests")
        run_tests(args.out, int(min(args.test_timeout, max(30, left() - reserved))), args.pytest_args)
    benchmarks = [s for s in sections if s not in ("tests", "cli")]
    if benchmarks or "cli" in sections:
        try:
            import cupy
        except ImportError as exc:  # nothing below can run: say so in the table
            for name in benchmarks:
                row(name, "section", not_run=f"CuPy is not importable ({exc})")
            benchmarks = []
        try:
            import torch
        except ImportError:
            torch = None
        if benchmarks:
            try:
                from nvmathpy.cuda.runtime import device_description

                described = device_description(0)
            except Exception as exc:  # the benchmarks may still run
                described = {"description": f"failed ({type(exc).__name__}: {str(exc)[:80]})"}
            row("device", "description", info=True, **described,
                torch=getattr(torch, "__version__", "not installed"), cupy=getattr(cupy, "__version__", "?"))
        steps = {"gemm": lambda: gemm([4096, 8192], ["bfloat16", "float16", "float32"]),
                 "fused": lambda: fused(8192, 4096, ["bfloat16", "float16"]),
                 "custom": lambda: custom(8192, 4096, ["bfloat16", "float16"]),
                 "overhead": overhead, "fft": fft_section, "fft-callbacks": fft_callback_section,
                 "solve": solve_section, "eigh-svd": eig_svd_section, "dropin": dropin_section}
        for name in benchmarks:
            if torch is None and name in NEEDS_TORCH:
                row(name, "section", not_run="torch is not installed")
                continue
            if left() < SECTIONS[name]:
                row(name, "section", not_run=f"{left():.0f} s of the {args.budget} s budget left")
                continue
            try:
                steps[name]()
            except Exception as exc:  # one broken section must not hide the others
                failed(name, "section", exc)
    if "cli" in sections:
        if left() >= SECTIONS["cli"]:  # demo and bench share what the budget leaves
            cli_section(args.out, int(min(args.cli_timeout, left() / 2)))
        else:
            row("cli", "demo/bench --space cuda", not_run=f"{left():.0f} s of the {args.budget} s budget left")
    row("total", "wall", info=True, seconds=round(time.perf_counter() - began, 1))
    line, code = summary(ROWS)
    print("\n" + table())
    return code


if __name__ == "__main__":
    sys.exit(main())
