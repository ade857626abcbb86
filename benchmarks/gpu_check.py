"""The GPU check: the GPU tests and the key GPU benchmarks in one run, one table at the end.

Run it on the lent GPU machine from the repository root (the H200 image already holds CuPy for
CUDA 13, torch, cuda-pathfinder and the CUDA 13 library wheels, so nothing is installed), through
the device tool:

    run(command="PYTHONPATH=. python3 benchmarks/gpu_check.py --out $OUT", timeout_s=560)

(Were cuda-pathfinder absent there, carry its wheel and prefix
``python3 -m pip install --no-index --no-deps <carried wheel> &&``.) It finishes in well under
8 minutes on an H200:

1. ``pytest tests/gpu -q`` (log: ``$OUT/pytest_gpu.log``; at most ``--test-timeout``, 200 s);
2. GEMM 4096^3 and 8192^3 in bf16/fp16/fp32: nvmathpy (planned, autotuned) beside torch.matmul
   and cupy.matmul on the same data, TFLOP/s and ratios;
3. GEMM + bias + GELU (tanh), fused by cuBLASLt, beside torch's mm + add + gelu;
   custom Python epilogues (a SwiGLU-like tail, a residual add): cuBLASLt + the generated
   elementwise kernel and the fused tiled GEMM, each and autotuned, beside torch eager
   (mm + elementwise ops) and torch.compile (bfloat16 only: compiling costs time);
4. host overhead of a planned ``execute()`` for a tiny GEMM (and of cupy/torch.matmul);
5. FFT 1-D/2-D/batched (c2c complex64, r2c float32) vs cupy.fft, planned and one-call;
   FFT with a prolog/epilog callback (cuFFT LTO callbacks) vs FFT then elementwise;
   batched small solves (10^5 x 8x8, target >= 5x) vs cupy.linalg.solve, eigh/svd n=4096 vs cupy
   (cuSOLVER engine; reported as "engine not built" where an engine is missing).
6. the command line on the GPU: ``python -m nvmathpy demo --space cuda`` and
   ``python -m nvmathpy bench all --quick --space cuda --json $OUT/bench_gpu.json --plot
   $OUT/bench_gpu.png`` (logs: ``$OUT/demo_gpu.log``, ``$OUT/bench_gpu.log``); each gets half
   of what is left of ``--budget`` (470 s) and at most ``--cli-timeout`` s, so the whole run
   stays within the budget; ``--skip-cli`` leaves them out.

Device times use CUDA events around each call, the L2 cache flushed (a 256 MiB device memset)
before each timed call, after warm-ups; medians are reported. The table is printed last and
written to ``$OUT/gpu_check.md`` (all numbers also in ``$OUT/gpu_check.json``), both rewritten
after every row, so a run stopped early still leaves its table. Wisdom and compiled kernels go
to a fresh temporary folder (the run starts cold, and ``$OUT`` holds only the seven files named
here: the device tool brings back few files). Sections start only while ``--budget`` leaves
time for them; without torch the sections that compare with it are skipped, the rest run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS: list[dict[str, Any]] = []
#: Where the table and JSON are (re)written after every row (set by ``main``).
OUT: Path | None = None


def row(section: str, case: str, **values: Any) -> None:
    ROWS.append({"section": section, "case": case, **values})
    print(f"[{section}] {case}: " + ", ".join(f"{k}={v}" for k, v in values.items()), flush=True)
    if OUT is not None:  # a run killed at its time limit still leaves everything measured so far
        (OUT / "gpu_check.md").write_text(table() + "\n")
        (OUT / "gpu_check.json").write_text(json.dumps(ROWS, indent=1, default=str))


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


def run_tests(out: Path, timeout: int) -> None:
    log = out / "pytest_gpu.log"
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "tests/gpu", "-q", "-p", "no:cacheprovider", "-rs"],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = _partial(exc) + f"\nTIMEOUT after {timeout} s", "timeout"
    log.write_text(text)
    summary = [line for line in str(text).splitlines() if " passed" in line or " failed" in line or "error" in line]
    row("tests", "pytest tests/gpu", exit=code, summary=(summary[-1] if summary else "no summary"),
        seconds=round(time.perf_counter() - start, 1))


# -- 2. GEMM ------------------------------------------------------------------------------------------


def gemm(sizes: list[int], dtypes: list[str]) -> None:
    import cupy
    import torch

    from nvmathpy.linalg import Matmul

    for dtype in dtypes:
        for n in sizes:
            tdtype = getattr(torch, dtype)
            gen = torch.Generator(device="cuda").manual_seed(n)
            a = torch.randn(n, n, device="cuda", dtype=tdtype, generator=gen)
            b = torch.randn(n, n, device="cuda", dtype=tdtype, generator=gen)
            flops = 2.0 * n**3
            results: dict[str, Any] = {}
            results["torch"] = device_times(lambda: torch.matmul(a, b))
            try:
                ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
                results["cupy"] = device_times(lambda: cupy.matmul(ca, cb))
            except Exception as exc:  # CuPy has no bfloat16
                results["cupy"] = f"n/a ({type(exc).__name__})"
            try:
                mm = Matmul(a, b)
                mm.plan()
                mm.autotune(effort="measure", repeats=3)
                results["nvmathpy"] = device_times(mm.execute)
                check = float(((mm.execute().float() - torch.matmul(a.float(), b.float())).norm()
                               / torch.matmul(a.float(), b.float()).norm()).item())
                mm.free()
            except Exception as exc:
                results["nvmathpy"], check = f"failed ({type(exc).__name__}: {str(exc)[:80]})", math.nan
            numbers = {k: v for k, v in results.items() if isinstance(v, float)}
            tflops = {f"{k}_TFLOPs": round(flops / v / 1e12, 1) for k, v in numbers.items()}
            ratios = {f"nvmathpy/{k}": round(numbers[k] / numbers["nvmathpy"], 3)
                      for k in ("torch", "cupy") if k in numbers and "nvmathpy" in numbers}
            notes = {k: v for k, v in results.items() if not isinstance(v, float)}
            row("gemm", f"{dtype} {n}^3", **tflops, **ratios, **notes, rel_err_vs_fp32=f"{check:.1e}")
            del a, b


# -- 3. fused epilogue ---------------------------------------------------------------------------------


def fused(tokens: int, features: int, dtypes: list[str]) -> None:
    import torch

    from nvmathpy.linalg import Matmul

    for dtype in dtypes:
        tdtype = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(tokens, features, device="cuda", dtype=tdtype, generator=gen)
        w = torch.randn(features, features, device="cuda", dtype=tdtype, generator=gen) / math.sqrt(features)
        bias = torch.randn(features, device="cuda", dtype=tdtype, generator=gen)
        gelu = torch.nn.functional.gelu

        def unfused() -> Any:
            return gelu(torch.mm(x, w) + bias, approximate="tanh")

        t_torch = device_times(unfused)
        try:
            mm = Matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
            mm.plan()
            mm.autotune(effort="measure", repeats=3)
            t_ours = device_times(mm.execute)
            ref = gelu(torch.mm(x.float(), w.float()) + bias.float(), approximate="tanh")
            err = float(((mm.execute().float() - ref).norm() / ref.norm()).item())
            mm.free()
            row("fused", f"{dtype} ({tokens}x{features}) @ ({features}x{features}) + bias, gelu",
                nvmathpy_ms=round(t_ours * 1e3, 3), torch_unfused_ms=round(t_torch * 1e3, 3),
                **{"torch/nvmathpy": round(t_torch / t_ours, 2)}, rel_err=f"{err:.1e}")
        except Exception as exc:
            row("fused", f"{dtype} gelu_bias", torch_unfused_ms=round(t_torch * 1e3, 3),
                nvmathpy=f"failed ({type(exc).__name__}: {str(exc)[:80]})")


# -- 3b. custom (traced Python) epilogues ------------------------------------------------------------------


def _swiglu_tail(x: Any, gate: Any, scale: Any) -> Any:
    return x * (gate / (1 + np.exp(-gate))) * scale


def _residual(x: Any, r: Any, bias: Any) -> Any:
    return np.maximum(x + bias, 0) + r


def custom(tokens: int, features: int, dtypes: list[str], compile_dtypes: tuple[str, ...] = ("bfloat16",)) -> None:
    """Custom epilogues (a SwiGLU-like tail, a residual add): each GEMM + epilogue candidate kind
    and the autotuned choice, beside torch eager (mm + elementwise ops) and torch.compile."""
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
        for name, fn, inputs, eager, args in cases:
            case = f"{dtype} ({tokens}x{features}) @ ({features}x{features}), {name}"
            values: dict[str, Any] = {}
            t_eager = device_times(lambda: eager(*args))
            values["torch_eager_ms"] = round(t_eager * 1e3, 3)
            if dtype in compile_dtypes:
                try:
                    compiled = torch.compile(eager)
                    values["torch_compile_ms"] = round(device_times(lambda: compiled(*args)) * 1e3, 3)
                except Exception as exc:  # no compiler toolchain on the machine, ...
                    values["torch_compile"] = f"n/a ({type(exc).__name__})"
            ref = eager(*(a.float() for a in args)).float()
            try:
                mm = Matmul(x, w, epilogue=fn, epilogue_inputs=inputs)
                seen = set()
                for candidate in mm._engine.candidates(mm.problem):
                    if candidate.label in seen:
                        continue
                    seen.add(candidate.label)
                    mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
                    t = device_times(mm.execute)
                    err = float(((mm.execute().float() - ref).norm() / ref.norm()).item())
                    values[f"{candidate.label}_ms"] = round(t * 1e3, 3)
                    values[f"{candidate.label}_err"] = f"{err:.1e}"
                mm.autotune(effort="measure", repeats=3, force=True)
                t_best = device_times(mm.execute)
                values["autotuned"] = mm.candidate.label
                values["autotuned_ms"] = round(t_best * 1e3, 3)
                values["torch_eager/nvmathpy"] = round(t_eager / t_best, 2)
                if "torch_compile_ms" in values:
                    values["torch_compile/nvmathpy"] = round(values["torch_compile_ms"] / (t_best * 1e3), 2)
                mm.free()
            except Exception as exc:
                values["nvmathpy"] = f"failed ({type(exc).__name__}: {str(exc)[:80]})"
            row("custom", case, **values, target="torch_eager/nvmathpy >= 1.3")
        del x, w, gate, r, bias


# -- 4. host overhead -----------------------------------------------------------------------------------


def overhead() -> None:
    import cupy
    import torch

    from nvmathpy.linalg import Matmul

    a, b = cupy.random.standard_normal((8, 8), dtype=cupy.float32), cupy.random.standard_normal((8, 8),
                                                                                              dtype=cupy.float32)
    mm = Matmul(a, b)
    mm.plan()
    kernel = mm._prepared.kernel
    values = {
        "nvmathpy_execute_us": host_overhead(mm.execute),
        "nvmathpy_kernel_only_us": host_overhead(lambda: kernel(a, b, None, {}, None)),
        "cupy_matmul_us": host_overhead(lambda: cupy.matmul(a, b)),
    }
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    values["torch_matmul_us"] = host_overhead(lambda: torch.matmul(ta, tb))
    tm = Matmul(ta, tb)
    tm.plan()
    values["nvmathpy_execute_torch_us"] = host_overhead(tm.execute)
    row("overhead", "8x8x8 float32, planned", **{k: round(v * 1e6, 2) for k, v in values.items()},
        target_us=10)
    mm.free()
    tm.free()


# -- 5. other operations (run only where their CUDA engine exists) -----------------------------------


def _other(section: str, case: str, ours: Callable[[], object], theirs: Callable[[], object], label: str,
           reps: int = 15, **extra: Any) -> None:
    from nvmathpy.errors import ExecutionSpaceUnavailableError

    try:
        ours()
    except ExecutionSpaceUnavailableError as exc:
        row(section, case, result=f"engine not built ({str(exc)[:70]})")
        return
    except Exception as exc:
        row(section, case, result=f"failed ({type(exc).__name__}: {str(exc)[:70]})")
        return
    warmup = min(3, reps)
    t_ours, t_theirs = device_times(ours, warmup, reps), device_times(theirs, warmup, reps)
    row(section, case, nvmathpy_ms=round(t_ours * 1e3, 3), **{f"{label}_ms": round(t_theirs * 1e3, 3)},
        **{f"{label}/nvmathpy": round(t_theirs / t_ours, 2)}, **extra)


def fft_section() -> None:
    """FFT vs cupy.fft: 1-D, 2-D and batched (contiguous and strided axis), c2c complex64 and r2c
    float32. nvmathpy planned and autotuned (``FFT.execute``) and through its one-call function
    (plan cache), beside cupy.fft (which caches its cuFFT plans too). Target: cupy/nvmathpy >= 1.0."""
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
        x = make()
        theirs_fn, ours_fn = (cupy.fft.fftn, nfft.fftn) if kind == "c2c" else (cupy.fft.rfftn, nfft.rfftn)
        try:
            reference = theirs_fn(x, axes=axes)
            plan = nfft.FFT(x, axes=axes)
            plan.plan()
            plan.autotune(effort="measure", repeats=3)
            err = float(cupy.linalg.norm(plan.execute() - reference) / cupy.linalg.norm(reference))
            t_plan = device_times(plan.execute)
            t_call = device_times(lambda: ours_fn(x, axes=axes))
            t_cupy = device_times(lambda: theirs_fn(x, axes=axes))
            row("fft", case, nvmathpy_ms=round(t_plan * 1e3, 3), nvmathpy_call_ms=round(t_call * 1e3, 3),
                cupy_ms=round(t_cupy * 1e3, 3), **{"cupy/nvmathpy": round(t_cupy / t_plan, 2),
                                                   "cupy/nvmathpy_call": round(t_cupy / t_call, 2)},
                candidate=str(plan.candidate), rel_err=f"{err:.1e}", target=">= 1.0")
            plan.free()
        except Exception as exc:
            row("fft", case, result=f"failed ({type(exc).__name__}: {str(exc)[:80]})")
        del x


def fft_callback_section() -> None:
    """FFT with a callback vs FFT then elementwise: a window prolog and a filter epilog run inside
    cuFFT (LTO callbacks) beside the same FFT plan without callbacks followed by the two CuPy
    multiplications, and beside cupy.fft with them. Target: (FFT then elementwise)/callbacks >= 1.0."""
    import cupy

    import nvmathpy.fft as nfft

    rng = cupy.random.default_rng(6)
    cases = [("c64 batched 1024 x 4096, window + filter", (1024, 4096), cupy.complex64),
             ("f32 r2c batched 1024 x 4096, window + filter", (1024, 4096), cupy.float32)]
    for case, shape, dtype in cases:
        try:
            x = rng.standard_normal(shape, dtype=cupy.float32)
            if dtype == cupy.complex64:
                x = (x + 1j * rng.standard_normal(shape, dtype=cupy.float32)).astype(dtype)
            fft = cupy.fft.fft if dtype == cupy.complex64 else cupy.fft.rfft
            w = cupy.hanning(shape[1]).astype(cupy.float32)
            filt = cupy.linspace(1, 0, fft(x[:1]).shape[1], dtype=cupy.float32)
            reference = fft(x * w) * filt
            fused = nfft.FFT(x, axes=[1], prolog=lambda v, w: v * w, epilog=lambda v, f: v * f,
                             callback_inputs={"w": w, "f": filt})
            fused.plan()
            fused.autotune(effort="measure", repeats=3)
            plain = nfft.FFT(x, axes=[1])
            plain.plan()
            plain.autotune(effort="measure", repeats=3)
            err = float(cupy.linalg.norm(fused.execute() - reference) / cupy.linalg.norm(reference))

            def unfused() -> Any:
                plain.reset_operand(x * w)
                return plain.execute() * filt

            t_fused, t_unfused = device_times(fused.execute), device_times(unfused)
            t_cupy = device_times(lambda: fft(x * w) * filt)
            row("fft callbacks", case, callbacks_ms=round(t_fused * 1e3, 3), fft_then_elementwise_ms=round(
                t_unfused * 1e3, 3), cupy_ms=round(t_cupy * 1e3, 3),
                **{"unfused/callbacks": round(t_unfused / t_fused, 2), "cupy/callbacks": round(t_cupy / t_fused, 2)},
                candidate=str(fused.candidate), rel_err=f"{err:.1e}", target=">= 1.0")
            fused.free()
            plain.free()
        except Exception as exc:
            row("fft callbacks", case, result=f"failed ({type(exc).__name__}: {str(exc)[:80]})")


def solve_section() -> None:
    """Batched small solves vs cupy.linalg.solve: 10^5 systems of 8x8 (float64 and float32), the
    one-call function (plan cache; it checks the info codes: one sync per call). Target >= 5x."""
    import cupy

    import nvmathpy.linalg as la

    rng = cupy.random.default_rng(7)
    for dtype in ("float64", "float32"):
        a = (rng.standard_normal((100000, 8, 8)) + 8 * cupy.eye(8)).astype(dtype)
        b = rng.standard_normal((100000, 8, 1)).astype(dtype)
        route = "?"
        try:
            x = la.solve(a, b)
            err = float(cupy.linalg.norm(a @ x - b) / cupy.linalg.norm(b))
            from nvmathpy.linalg.solvers.cuda._plans import CudaSolve

            with CudaSolve(a, b) as probe:  # the route the one-call function's plan takes (tiny: generated kernel)
                route = probe.plan().candidate.label
        except Exception as exc:  # reported by _other below
            err = float("nan")
            print(f"[solve] {type(exc).__name__}: {exc}", flush=True)
        _other("solve", f"{dtype} 10^5 x (8x8)", lambda: la.solve(a, b), lambda: cupy.linalg.solve(a, b), "cupy",
               route=route, rel_err=f"{err:.1e}", target=">= 5.0")
        _solve_routes(a, b)


def _solve_routes(a: Any, b: Any) -> None:
    """The batched-solve rows per route: the generated ``tiny`` kernel and cuBLAS's
    ``getrfBatched``, each planned (``execute`` plus the info check) beside cupy.linalg.solve."""
    import cupy

    from nvmathpy.linalg.solvers.cuda._plans import CudaSolve

    for label in ("tiny", "getrfBatched"):
        try:
            plan = CudaSolve(a, b)
            plan.plan()
            chosen = next(c for c in plan._engine.candidates(plan.problem) if c.label == label)
            plan._install(plan._engine.prepare(plan.problem, chosen), "gpu_check")
        except Exception as exc:
            row("solve", f"{a.dtype} 10^5 x (8x8) route {label}", result=f"failed ({type(exc).__name__}: "
                f"{str(exc)[:70]})")
            continue
        _other("solve", f"{a.dtype} 10^5 x (8x8) route {label}", lambda: (plan._run(), plan.check()),
               lambda: cupy.linalg.solve(a, b), "cupy", target=">= 5.0" if label == "tiny" else "-")
        plan.free()


def eig_svd_section() -> None:
    """eigh and svd vs CuPy at n = 4096 (float64; a few repetitions: these take 0.1-5 s each)."""
    import cupy

    import nvmathpy.linalg as la

    x = cupy.random.default_rng(8).standard_normal((4096, 4096))
    sym = x + x.T
    _other("eigh", "f64 4096x4096", lambda: la.eigh(sym), lambda: cupy.linalg.eigh(sym), "cupy", reps=3)
    _other("svd", "f64 4096x4096", lambda: la.svd(x), lambda: cupy.linalg.svd(x), "cupy", reps=1)
    _other("svdvals", "f64 4096x4096", lambda: la.svdvals(x), lambda: cupy.linalg.svd(x, compute_uv=False),
           "cupy", reps=1)


# -- 6. the command line on the GPU (demo, bench) ----------------------------------------------------------


def cli_section(out: Path, timeout: int) -> None:
    """``python -m nvmathpy demo --space cuda`` and ``bench all --quick --space cuda`` (JSON and plot
    in ``out``), each in its own process under ``timeout`` seconds, logged to ``out``."""
    commands = {
        "demo_gpu": ["demo", "--space", "cuda"],
        "bench_gpu": ["bench", "all", "--quick", "--space", "cuda", "--json", str(out / "bench_gpu.json"),
                      "--plot", str(out / "bench_gpu.png")],
    }
    for name, args in commands.items():
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", "nvmathpy", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})
            text, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            text, code = _partial(exc) + f"\nTIMEOUT after {timeout} s", "timeout"
        (out / f"{name}.log").write_text(text)
        last = [line for line in text.splitlines() if line.strip()]
        row("cli", "python -m nvmathpy " + " ".join(args[:5]), exit=code, last=(last[-1][:100] if last else ""),
            seconds=round(time.perf_counter() - start, 1), log=f"{name}.log")


# -- table ------------------------------------------------------------------------------------------------


def table() -> str:
    lines = ["| section | case | results |", "|---|---|---|"]
    for r in ROWS:
        values = "; ".join(f"{k} {v}" for k, v in r.items() if k not in ("section", "case"))
        lines.append(f"| {r['section']} | {r['case']} | {values} |")
    return "\n".join(lines)


#: Seconds of the budget a section is assumed to need at most; it starts only if that much is left.
SECTION_SECONDS = {"gemm": 60, "fused": 30, "custom": 60, "overhead": 10, "fft": 30, "fft callbacks": 30,
                   "solve": 30, "eigh/svd": 60}
#: Sections that compare with torch (skipped without it).
NEEDS_TORCH = ("gemm", "fused", "custom", "overhead")


def main() -> None:
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the log, table and JSON")
    parser.add_argument("--skip-tests", action="store_true", help="benchmarks only")
    parser.add_argument("--skip-cli", action="store_true", help="leave out demo/bench --space cuda")
    parser.add_argument("--cli-timeout", type=int, default=240, help="seconds for each of demo and bench")
    parser.add_argument("--budget", type=int, default=470,
                        help="seconds the whole run may take: sections start only while it leaves time for them")
    parser.add_argument("--test-timeout", type=int, default=200)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    OUT = args.out
    os.environ["NVMATHPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvmathpy-gpu-check-")
    began = time.perf_counter()

    def left() -> float:
        return args.budget - (time.perf_counter() - began)

    if not args.skip_tests:
        run_tests(args.out, int(min(args.test_timeout, max(30, left() - 120))))
    try:
        import cupy
    except ImportError as exc:  # nothing below can run: say so in the table
        row("device", "cupy", result=f"not importable ({exc}); the benchmarks need CuPy for CUDA 13")
        return
    try:
        import torch
    except ImportError:
        torch = None
    try:
        from nvmathpy.cuda.runtime import device_description

        described = device_description(0)
    except Exception as exc:  # the benchmarks may still run
        described = {"description": f"failed ({type(exc).__name__}: {str(exc)[:80]})"}
    row("device", "description", **described, torch=getattr(torch, "__version__", "not installed"),
        cupy=getattr(cupy, "__version__", "?"))
    for name, step in (("gemm", lambda: gemm([4096, 8192], ["bfloat16", "float16", "float32"])),
                       ("fused", lambda: fused(8192, 4096, ["bfloat16", "float16"])),
                       ("custom", lambda: custom(8192, 4096, ["bfloat16", "float16"])),
                       ("overhead", overhead), ("fft", fft_section), ("fft callbacks", fft_callback_section),
                       ("solve", solve_section),
                       ("eigh/svd", eig_svd_section)):
        if torch is None and name in NEEDS_TORCH:
            row(name, "section", result="skipped: torch is not installed")
            continue
        if left() < SECTION_SECONDS[name]:
            row(name, "section", result=f"skipped: {left():.0f} s of the {args.budget} s budget left")
            continue
        try:
            step()
        except Exception as exc:  # one broken section must not hide the others
            row(name, "section", result=f"failed ({type(exc).__name__}: {str(exc)[:100]})")
    if args.skip_cli:
        pass
    elif left() >= 60:  # demo and bench share what the budget leaves
        cli_section(args.out, int(min(args.cli_timeout, left() / 2)))
    else:
        row("cli", "demo/bench --space cuda", result=f"skipped: {left():.0f} s of the {args.budget} s budget left")
    row("total", "wall", seconds=round(time.perf_counter() - began, 1))
    print("\n" + table())


if __name__ == "__main__":
    main()
