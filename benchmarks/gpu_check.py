"""The GPU check: the GPU tests and the key GPU benchmarks in one run, one table at the end.

Run it on the lent GPU machine from the repository root (the H200 image already holds CuPy for
CUDA 13, torch, cuda-pathfinder and the CUDA 13 library wheels, so nothing is installed), through
the device tool:

    run(command="PYTHONPATH=. python3 benchmarks/gpu_check.py --out $OUT", timeout_s=560)

(Were cuda-pathfinder absent there, carry its wheel and prefix
``python3 -m pip install --no-index --no-deps <carried wheel> &&``.) It finishes in well under
8 minutes on an H200:

1. ``pytest tests/gpu -q`` (log: ``$OUT/pytest_gpu.log``; at most 300 s);
2. GEMM 4096^3 and 8192^3 in bf16/fp16/fp32: nvmathpy (planned, autotuned) beside torch.matmul
   and cupy.matmul on the same data, TFLOP/s and ratios;
3. GEMM + bias + GELU (tanh), fused by cuBLASLt, beside torch's mm + add + gelu;
4. host overhead of a planned ``execute()`` for a tiny GEMM (and of cupy/torch.matmul);
5. FFT vs cupy.fft, batched small solves vs cupy.linalg.solve, eigh/svd vs cupy: run when the
   nvmathpy CUDA engine for them exists, else reported as "engine not built".

Device times use CUDA events around each call, the L2 cache flushed (a 256 MiB device memset)
before each timed call, after warm-ups; medians are reported. The table is printed last and
written to ``$OUT/gpu_check.md`` (all numbers also in ``$OUT/gpu_check.json``). Wisdom is kept in
``$OUT`` so the run starts cold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS: list[dict[str, Any]] = []


def row(section: str, case: str, **values: Any) -> None:
    ROWS.append({"section": section, "case": case, **values})
    print(f"[{section}] {case}: " + ", ".join(f"{k}={v}" for k, v in values.items()), flush=True)


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


def run_tests(out: Path, timeout: int) -> None:
    log = out / "pytest_gpu.log"
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "tests/gpu", "-q", "-p", "no:cacheprovider", "-rs"],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}\nTIMEOUT after {timeout} s", "timeout"
    log.write_text(text if isinstance(text, str) else text.decode())
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


def _other(section: str, case: str, ours: Callable[[], object], theirs: Callable[[], object], label: str) -> None:
    from nvmathpy.errors import ExecutionSpaceUnavailableError

    try:
        ours()
    except ExecutionSpaceUnavailableError as exc:
        row(section, case, result=f"engine not built ({str(exc)[:70]})")
        return
    except Exception as exc:
        row(section, case, result=f"failed ({type(exc).__name__}: {str(exc)[:70]})")
        return
    t_ours, t_theirs = device_times(ours), device_times(theirs)
    row(section, case, nvmathpy_ms=round(t_ours * 1e3, 3), **{f"{label}_ms": round(t_theirs * 1e3, 3)},
        **{f"{label}/nvmathpy": round(t_theirs / t_ours, 2)})


def fft_section() -> None:
    """FFT vs cupy.fft (complex64, 1024 batches of 4096 points)."""
    import cupy

    import nvmathpy.fft as nfft

    x = (cupy.random.standard_normal((1024, 4096)) + 1j * cupy.random.standard_normal((1024, 4096))).astype(
        cupy.complex64)
    _other("fft", "c64 1024 x 4096, axis -1", lambda: nfft.fft(x), lambda: cupy.fft.fft(x), "cupy")


def solve_section() -> None:
    """Batched small solves vs cupy.linalg.solve (10000 systems of 16x16, float64)."""
    import cupy

    import nvmathpy.linalg as la

    a = cupy.random.standard_normal((10000, 16, 16)) + 16 * cupy.eye(16)
    b = cupy.random.standard_normal((10000, 16, 1))
    _other("solve", "f64 10000 x (16x16)", lambda: la.solve(a, b), lambda: cupy.linalg.solve(a, b), "cupy")


def eig_svd_section() -> None:
    """eigh and svd vs CuPy (float64 1024x1024)."""
    import cupy

    import nvmathpy.linalg as la

    x = cupy.random.standard_normal((1024, 1024))
    sym = x + x.T
    _other("eigh", "f64 1024x1024", lambda: la.eigh(sym), lambda: cupy.linalg.eigh(sym), "cupy")
    _other("svd", "f64 1024x1024", lambda: la.svd(x), lambda: cupy.linalg.svd(x), "cupy")


# -- table ------------------------------------------------------------------------------------------------


def table() -> str:
    lines = ["| section | case | results |", "|---|---|---|"]
    for r in ROWS:
        values = "; ".join(f"{k} {v}" for k, v in r.items() if k not in ("section", "case"))
        lines.append(f"| {r['section']} | {r['case']} | {values} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the log, table and JSON")
    parser.add_argument("--skip-tests", action="store_true", help="benchmarks only")
    parser.add_argument("--test-timeout", type=int, default=300)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["NVMATHPY_CACHE_DIR"] = str(args.out / "cache")
    began = time.perf_counter()
    if not args.skip_tests:
        run_tests(args.out, args.test_timeout)
    import cupy
    import torch

    from nvmathpy.cuda.runtime import device_description

    row("device", "description", **device_description(0), torch=torch.__version__, cupy=cupy.__version__)
    for name, step in (("gemm", lambda: gemm([4096, 8192], ["bfloat16", "float16", "float32"])),
                       ("fused", lambda: fused(8192, 4096, ["bfloat16", "float16"])),
                       ("overhead", overhead), ("fft", fft_section), ("solve", solve_section),
                       ("eigh/svd", eig_svd_section)):
        try:
            step()
        except Exception as exc:  # one broken section must not hide the others
            row(name, "section", result=f"failed ({type(exc).__name__}: {str(exc)[:100]})")
    row("total", "wall", seconds=round(time.perf_counter() - began, 1))
    text = table()
    (args.out / "gpu_check.md").write_text(text + "\n")
    (args.out / "gpu_check.json").write_text(json.dumps(ROWS, indent=1, default=str))
    print("\n" + text)


if __name__ == "__main__":
    main()
