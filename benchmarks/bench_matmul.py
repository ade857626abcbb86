"""nvmathpy.linalg matmul beside NumPy: GEMM throughput, fused epilogues, tiny products, small
products with an epilogue.

Run (unset the OpenBLAS overrides for this command only):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_matmul.py [--quick]

Wisdom is switched off (``NVMATHPY_WISDOM=off``) so "planned" rows show the heuristic's
choice and "autotuned" rows a fresh timing in this run. All implementations of one row group
are timed in one process over several rounds; each of their samples sits between two samples
of the NumPy baseline, and the ratio shown is the median over rounds of sample / baseline.
Each call so follows a NumPy product, whose OpenBLAS worker still spins on the second core;
the epilogue rows marked "repeated" time each implementation instead as a program that
repeats it sees it (after a pause, several calls in a row; see :func:`back_to_back`).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

os.environ["NVMATHPY_WISDOM"] = "off"
try:
    import nvmathpy  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nvmathpy.linalg as la  # noqa: E402
from nvmathpy.bench.harness import SETTLE_SECONDS  # noqa: E402
from nvmathpy.bench.suite_matmul import gelu_bias_inplace, relu_bias_inplace  # noqa: E402
from nvmathpy.linalg.gemm.cpu._tiny_c import TINY_EXTENSION  # noqa: E402



def measure(calls: dict[str, Callable[[], object]], rounds: int, sample_s: float) -> tuple[dict, dict, dict]:
    """Median seconds per call of each callable, the median of its time relative to the first
    callable (the baseline), and the ratio of the fastest samples. In every round each callable's sample is taken between two
    baseline samples and compared with their mean, so load from other processes (this machine
    is shared) hits both sides of each ratio alike."""
    numbers = {}
    for name, fn in calls.items():
        fn()
        start = time.perf_counter()
        fn()
        numbers[name] = max(1, int(sample_s / max(time.perf_counter() - start, 1e-9)))

    def sample(name: str) -> float:
        fn, n = calls[name], numbers[name]
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n

    baseline = next(iter(calls))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    ratios: dict[str, list[float]] = {name: [] for name in calls}
    base_samples: list[float] = []
    for _ in range(rounds):
        for name in calls:
            before = sample(baseline)
            t = sample(name)
            after = sample(baseline)
            base_samples += [before, after]
            samples[name].append(t)
            ratios[name].append(t / ((before + after) / 2))
    best = min(base_samples)
    return ({name: statistics.median(s) for name, s in samples.items()},
            {name: statistics.median(r) for name, r in ratios.items()},
            {name: min(s) / best for name, s in samples.items()})


def back_to_back(calls: dict[str, Callable[[], object]], rounds: int, runs: int = 5) -> tuple[dict, dict]:
    """Median seconds per call of each callable run ``runs`` times in a row after
    :data:`~nvmathpy.bench.harness.SETTLE_SECONDS` of idling (the first call of each run
    discarded), and the median over rounds of its time relative to the first callable's in
    the same round. This is each callable's steady state when a program repeats it, without
    its neighbours' effect: OpenBLAS's worker threads spin for about 0.1 s after each call,
    on the cores other code would use."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            time.sleep(SETTLE_SECONDS)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            samples[name].append(statistics.median(times[1:]))
    baseline = next(iter(calls))
    ratios = {name: statistics.median(x / y for x, y in zip(s, samples[baseline])) for name, s in samples.items()}
    return {name: statistics.median(s) for name, s in samples.items()}, ratios


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def gemm_rows(quick: bool, rounds: int) -> list[str]:
    rows = ["| GEMM fp32 n x n @ n x n | numpy.matmul | nvmathpy planned | nvmathpy autotuned | "
            "throughput vs numpy: planned | autotuned |", "|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    for n in (256, 512, 1024) if not quick else (256, 512):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        planned = la.Matmul(a, b).plan()
        tuned = la.Matmul(a, b)
        tuned.autotune()
        t, r, _ = measure({"numpy": lambda: np.matmul(a, b), "planned": planned.execute, "tuned": tuned.execute},
                          rounds, 0.05)
        rows.append(f"| n={n} | {fmt(t['numpy'])} | {fmt(t['planned'])} `{planned.candidate}` | "
                    f"{fmt(t['tuned'])} `{tuned.candidate}` | {1 / r['planned']:.3f}x | {1 / r['tuned']:.3f}x |")
        planned.free()
        tuned.free()
    return rows


def epilogue_rows(quick: bool, rounds: int) -> list[str]:
    m = 4096 if not quick else 2048
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    bias = rng.standard_normal(1024, dtype=np.float32)
    scratch = np.empty((m, 1024), np.float32)

    def relu_naive():
        return np.maximum(a @ b + bias, 0)

    def gelu_naive():
        x = a @ b + bias
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    def relu_inplace():
        return relu_bias_inplace(a, b, bias)

    def gelu_inplace():  # the best NumPy chain we know: the sigmoid form, one scratch buffer
        return gelu_bias_inplace(a, b, bias, scratch)

    rows = [f"| fp32 {m}x1024 @ 1024x1024 | median time | time / bare GEMM (median) | (fastest samples) |",
            "|---|---|---|---|"]
    for epilogue, naive, inplace in (("relu_bias", relu_naive, relu_inplace), ("gelu_bias", gelu_naive, gelu_inplace)):
        heuristic = la.Matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias}).plan()
        mm = la.Matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias})
        mm.autotune()  # the default effort: time the heuristic's top few
        t, r, best = measure({"gemm": lambda: a @ b, "naive": naive, "inplace": inplace,
                              "heuristic": heuristic.execute, "nvmathpy": mm.execute}, rounds, 0.0)
        rows += [f"| bare GEMM `a @ b` | {fmt(t['gemm'])} | 1.000x | 1.000x |"] + [
            f"| {epilogue}: {label} | {fmt(t[key])} | {r[key]:.3f}x | {best[key]:.3f}x |"
            for key, label in (("naive", "NumPy naive chain"), ("inplace", "NumPy best in-place chain"),
                               ("heuristic", f"nvmathpy planned `{heuristic.candidate}`"),
                               ("nvmathpy", f"nvmathpy autotuned `{mm.candidate}`"))
        ]
        # each implementation repeated after a pause (see back_to_back), the fused GEMM among them
        fused = la.Matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias}).plan()
        choice = [c for c in fused._engine.candidates(fused.problem) if c.params["method"] == "fused"]
        if choice:
            fused._install(fused._engine.prepare(fused.problem, choice[0]), "benchmark")
            t, r = back_to_back({"gemm": lambda: a @ b, "inplace": inplace, "tuned": mm.execute,
                                 "fused": fused.execute}, rounds)
            rows += [f"| bare GEMM `a @ b`, repeated | {fmt(t['gemm'])} | 1.000x | |",
                     f"| {epilogue}: NumPy best in-place chain, repeated | {fmt(t['inplace'])} | {r['inplace']:.3f}x | |",
                     f"| {epilogue}: nvmathpy autotuned `{mm.candidate}`, repeated | {fmt(t['tuned'])} | "
                     f"{r['tuned']:.3f}x | |",
                     f"| {epilogue}: nvmathpy `{choice[0]}`, repeated | {fmt(t['fused'])} | {r['fused']:.3f}x | |"]
        fused.free()
        heuristic.free()
        mm.free()
    return rows


def custom_epilogue_rows(quick: bool, rounds: int) -> list[str]:
    """Custom epilogues written in Python (traced, one pass) against the bare GEMM and the
    built-in epilogue that computes the same thing."""
    m = 4096 if not quick else 2048
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    bias = rng.standard_normal(1024, dtype=np.float32)
    inputs = {"bias": bias, "s": 0.5}

    def gelu_bias(x, bias):
        return la.epilogues.gelu(x + bias)

    def tail5(x, bias, s):  # mul, add, maximum, minimum, sub
        return np.minimum(np.maximum(x * s + bias, 0.0), 6.0) - 0.5

    def naive5():
        return np.minimum(np.maximum((a @ b) * 0.5 + bias, 0.0), 6.0) - 0.5

    rows = [f"| custom epilogues, fp32 {m}x1024 @ 1024x1024 | median time | time / bare GEMM (median) | "
            "(fastest samples) | target |", "|---|---|---|---|---|"]
    builtin = la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
    builtin.autotune()
    custom_gelu = la.Matmul(a, b, epilogue=gelu_bias, epilogue_inputs={"bias": bias})
    custom_gelu.autotune()
    custom5 = la.Matmul(a, b, epilogue=tail5, epilogue_inputs=inputs)
    custom5.autotune()
    t, r, best = measure({"gemm": lambda: a @ b, "builtin": builtin.execute, "gelu": custom_gelu.execute,
                          "naive5": naive5, "tail5": custom5.execute}, rounds, 0.0)
    rows.append(f"| bare GEMM `a @ b` | {fmt(t['gemm'])} | 1.000x | 1.000x | |")
    for key, label, target in (
        ("builtin", f"built-in gelu_bias `{builtin.candidate}`", ""),
        ("gelu", f"custom gelu(x + bias) in Python `{custom_gelu.candidate}`", "1.10x"),
        ("naive5", "5-op tail: NumPy naive chain", ""),
        ("tail5", f"5-op tail: custom `{custom5.candidate}`", "1.15x"),
    ):
        rows.append(f"| {label} | {fmt(t[key])} | {r[key]:.3f}x | {best[key]:.3f}x | {target} |")
    for plan in (builtin, custom_gelu, custom5):
        plan.free()
    return rows


def tiny_rows(rounds: int) -> list[str]:
    """Tiny square fp64 products, then batches (the steady state: the compiled tiny kernel,
    built once per machine, is waited for first)."""
    TINY_EXTENSION.get(wait=True)
    rows = ["| tiny fp64 n x n | numpy.matmul | a.dot(b) | planned execute | one-call matmul (repeated) | "
            "execute / matmul | execute / dot | one-call / matmul |", "|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(2)
    for n in (2, 4, 8, 16, 32):
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        mm = la.Matmul(a, b).plan()
        t, r, _ = measure({"matmul": lambda: np.matmul(a, b), "dot": lambda: a.dot(b), "execute": mm.execute,
                           "onecall": lambda: la.matmul(a, b)}, rounds, 0.02)
        rows.append(f"| {n} | {fmt(t['matmul'])} | {fmt(t['dot'])} | {fmt(t['execute'])} | {fmt(t['onecall'])} | "
                    f"{r['execute']:.2f}x | {t['execute'] / t['dot']:.2f}x | {r['onecall']:.2f}x |")
        mm.free()
    return rows + [""] + tiny_batched_rows(rounds)


def tiny_batched_rows(rounds: int) -> list[str]:
    """Batches of tiny fp64 (and two of complex128) matrices, ``a`` batched times one ``b`` and a
    true batch (above ``TINY_FLOPS`` multiply-adds in all, the compiled kernel's loop over the
    batch)."""
    rows = ["| batched fp64 (or complex128) a @ b | numpy.matmul | planned execute | one-call matmul (repeated) | candidate | "
            "execute / matmul | one-call / matmul |", "|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(4)
    cases = [(np.float64, batch, n) for batch, n in ((4, 2), (4, 8), (4, 32), (64, 2), (64, 8), (64, 32), (10000, 3))]
    for dtype, batch, n in cases + [(np.complex128, 64, 4), (np.complex128, 10000, 2)]:
        for b_shape in ((n, n), (batch, n, n)):
            a, b = rng.standard_normal((batch, n, n)).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
            mm = la.Matmul(a, b).plan()
            t, r, _ = measure({"matmul": lambda: np.matmul(a, b), "execute": mm.execute,
                               "onecall": lambda: la.matmul(a, b)}, rounds, 0.02)
            rows.append(f"| {a.shape} @ {b.shape} {'' if dtype == np.float64 else 'complex128 '}| {fmt(t['matmul'])} | "
                        f"{fmt(t['execute'])} | "
                        f"{fmt(t['onecall'])} | {mm.candidate.label} | {r['execute']:.2f}x | {r['onecall']:.2f}x |")
            mm.free()
    return rows


def small_epilogue_rows(rounds: int) -> list[str]:
    """Small products with a bias and ReLU beside NumPy's chain ``np.maximum(a @ b + bias, 0)``:
    the plan's heuristic choice, its autotuned choice and the one-call ``matmul``."""
    rows = ["| relu_bias m x k x n | NumPy chain | planned (heuristic) | autotuned | one-call matmul | "
            "planned / chain | autotuned / chain | one-call / chain |", "|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        for m, k, n in ((8, 16, 16), (32, 64, 64), (64, 64, 64), (100, 100, 100), (128, 128, 128), (256, 256, 256)):
            a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
            bias = rng.standard_normal(n).astype(dtype)
            kwargs = {"epilogue": "relu_bias", "epilogue_inputs": {"bias": bias}}
            planned = la.Matmul(a, b, **kwargs).plan()
            heuristic = planned.candidate.label
            tuned = la.Matmul(a, b, **kwargs)
            tuned.autotune()
            t, r, _ = measure({"chain": lambda: np.maximum(a @ b + bias, 0), "planned": planned.execute,
                               "tuned": tuned.execute, "onecall": lambda: la.matmul(a, b, **kwargs)}, rounds, 0.02)
            rows.append(f"| {m}x{k}x{n} {np.dtype(dtype).name} | {fmt(t['chain'])} | {fmt(t['planned'])} ({heuristic}) | "
                        f"{fmt(t['tuned'])} ({tuned.candidate.label}) | {fmt(t['onecall'])} | {r['planned']:.2f}x | "
                        f"{r['tuned']:.2f}x | {r['onecall']:.2f}x |")
            planned.free()
            tuned.free()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds")
    parser.add_argument("--only", choices=["gemm", "epilogues", "custom", "tiny", "small"], help="run one row group")
    args = parser.parse_args()
    rounds = 5 if args.quick else 11
    from nvmathpy.bench.harness import blas_summary

    print(f"BLAS: {blas_summary()}; rounds: {rounds}; load average before: {os.getloadavg()[0]:.1f}; "
          "ratios are medians of per-round ratios\n")
    groups = {"gemm": lambda: gemm_rows(args.quick, rounds), "epilogues": lambda: epilogue_rows(args.quick, rounds),
              "custom": lambda: custom_epilogue_rows(args.quick, rounds), "tiny": lambda: tiny_rows(rounds),
              "small": lambda: small_epilogue_rows(rounds)}
    for name, rows in groups.items():
        if args.only in (None, name):
            print("\n".join(rows()))
            print()


if __name__ == "__main__":
    main()
