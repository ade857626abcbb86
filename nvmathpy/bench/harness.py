"""Timing and reporting for the benchmark suites: cases, medians, ratios, tables, JSON, plots.

A suite module defines ``cases(quick) -> list[Case]``. Each :class:`Case` names the library a
user would otherwise call (its *baseline*) and holds one zero-argument callable per
implementation; every callable of a case is timed in the same process, interleaved over
several rounds so that noise on this shared machine hits all of them alike, and the median
is reported with the ratio ``baseline time / implementation time`` (above 1: faster than
the baseline).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["Case", "Result", "Timer", "host_timer", "measure", "run_cases", "format_table", "write_json",
           "write_plot", "blas_summary", "clean_openblas_env", "geometric_mean", "vs_fastest"]

#: Environment variables that slow OpenBLAS when set on these machines; unset for benchmarks.
OPENBLAS_SLOWDOWN_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass
class Case:
    """One benchmark problem.

    Attributes
    ----------
    suite, name
        Where the case belongs and what it is (e.g. ``"matmul"``, ``"fp32 4096x1024x1024"``).
    baseline
        The label of the implementation ratios are taken against (the usual library).
    impls
        Label -> zero-argument callable. The nvmathpy entry is labelled ``"nvmathpy"``.
    threads
        The thread budget the case runs at (for the table), if the suite varies it.
    settle
        Idle :data:`SETTLE_SECONDS` before each sample (for long BLAS/LAPACK calls whose
        implementations run on different OpenBLAS copies; see :func:`run_cases`).
    """

    suite: str
    name: str
    baseline: str
    impls: dict[str, Callable[[], object]]
    threads: int | None = None
    note: str = ""
    settle: bool = False


@dataclass
class Result:
    suite: str
    name: str
    baseline: str
    threads: int | None
    seconds: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def ratio(self, label: str) -> float:
        """``baseline time / label time``: above 1 means ``label`` is faster than the baseline."""
        return self.seconds[self.baseline] / self.seconds[label]


#: ``timer(fn, calls) -> seconds per call``: how one sample is taken.
Timer = Callable[[Callable[[], object], int], float]


def host_timer(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` back-to-back calls, on the host clock."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure(fn: Callable[[], object], min_seconds: float = 0.02, timer: Timer = host_timer) -> tuple[int, float]:
    """Calls per sample so one sample lasts about ``min_seconds``, and one first timing."""
    first = timer(fn, 1)
    return max(1, int(min_seconds / max(first, 1e-7))), first


#: Seconds a ``settle`` case idles before each sample.
SETTLE_SECONDS = 0.25


def run_cases(cases: Sequence[Case], *, repeats: int = 7, min_seconds: float = 0.02,
              progress: Callable[[str], None] | None = None, timer: Timer = host_timer) -> list[Result]:
    """Time every implementation of every case: interleaved rounds, median seconds per call.

    ``timer`` takes each sample: the host clock by default; on the GPU, CUDA events
    (:attr:`nvmathpy.demos._space.Space.timer`), so that device work is what is measured.
    Before each sample of a ``settle`` case the process idles :data:`SETTLE_SECONDS`: NumPy's
    and SciPy's OpenBLAS keep their worker threads spinning for a while after a call, and
    without the pause an implementation on one of them pays for the previous implementation's
    threads, several times over on a machine with few cores, which measures the interleaving, not
    the implementation.
    """
    results = []
    for case in cases:
        if progress:
            progress(f"{case.suite}: {case.name}")
        plans = {label: measure(fn, min_seconds, timer)[0] for label, fn in case.impls.items()}
        samples: dict[str, list[float]] = {label: [] for label in case.impls}
        for _ in range(repeats):
            for label, fn in case.impls.items():
                if case.settle:
                    time.sleep(SETTLE_SECONDS)
                samples[label].append(timer(fn, plans[label]))
        results.append(Result(case.suite, case.name, case.baseline, case.threads,
                              {label: statistics.median(s) for label, s in samples.items()}, case.note))
    return results


def _fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_table(results: Sequence[Result]) -> str:
    """Markdown tables, one per suite and set of implementations: the median per
    implementation, and nvmathpy's speedup over each other one (``x`` > 1: nvmathpy faster)."""
    lines = []
    groups = dict.fromkeys((r.suite, tuple(r.seconds)) for r in results)
    for suite, labels in groups:
        rows = [r for r in results if (r.suite, tuple(r.seconds)) == (suite, labels)]
        others = [label for label in labels if label != "nvmathpy"]
        with_threads = any(r.threads for r in rows)
        header = ["case", *(["threads"] if with_threads else []), *labels,
                  *(f"nvmathpy vs {label}" for label in others if "nvmathpy" in labels)]
        lines += [f"### {suite}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in rows:
            cells = [r.name + (f" ({r.note})" if r.note else ""), *([str(r.threads or "")] if with_threads else [])]
            cells += [_fmt_seconds(r.seconds[label]) for label in labels]
            if "nvmathpy" in labels:
                cells += [f"{r.seconds[label] / r.seconds['nvmathpy']:.2f}x" for label in others]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def vs_fastest(results: Sequence[Result]) -> str:
    """Per suite, the geometric mean over its cases of nvmathpy's time / the fastest other
    implementation's time for that case, and how many cases are above 1.05 (one line each).

    Examples
    --------
    >>> print(vs_fastest([Result("fft", "a", "x", None, {"x": 2.0, "y": 1.0, "nvmathpy": 1.2})]))
    fft: nvmathpy time / the fastest other's per case: geometric mean 1.20 over 1 cases, 1 above 1.05
    """
    lines = []
    for suite in dict.fromkeys(r.suite for r in results):
        ratios = [r.seconds["nvmathpy"] / min(t for label, t in r.seconds.items() if label != "nvmathpy")
                  for r in results if r.suite == suite and "nvmathpy" in r.seconds and len(r.seconds) > 1]
        if ratios:
            lines.append(f"{suite}: nvmathpy time / the fastest other's per case: geometric mean "
                         f"{geometric_mean(ratios):.2f} over {len(ratios)} cases, {sum(v > 1.05 for v in ratios)} above 1.05")
    return "\n".join(lines)


def write_json(results: Sequence[Result], path: str, environment: dict) -> None:
    payload = {
        "environment": {**environment, "date": datetime.date.today().isoformat()},
        "results": [
            {"suite": r.suite, "case": r.name, "baseline": r.baseline, "threads": r.threads, "note": r.note,
             "seconds": r.seconds,
             "speedup_vs_baseline": r.ratio("nvmathpy") if "nvmathpy" in r.seconds else None}
            for r in results
        ],
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=1)


def write_plot(results: Sequence[Result], path: str, title: str) -> None:
    """Speedup of nvmathpy over each case's baseline, log scale, one panel per suite."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        from ..errors import MissingDependencyError

        raise MissingDependencyError("bench --plot needs matplotlib: pip install 'nvmathpy[bench]'") from exc
    suites = list(dict.fromkeys(r.suite for r in results if "nvmathpy" in r.seconds))
    fig, axes = plt.subplots(len(suites), 1, figsize=(10, 2.2 + 0.32 * max(
        sum(1 for r in results if r.suite == s) for s in suites)), squeeze=False)
    for ax, suite in zip(axes[:, 0], suites):
        rows = [r for r in results if r.suite == suite and "nvmathpy" in r.seconds]
        speedups = [r.ratio("nvmathpy") for r in rows]
        names = [f"{r.name}" + (f" [{r.threads}t]" if r.threads else "") + f" vs {r.baseline}" for r in rows]
        colors = ["tab:green" if s >= 1 else "tab:red" for s in speedups]
        ax.barh(range(len(rows)), speedups, color=colors)
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rows)), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{suite}: speedup of nvmathpy over the usual library (log scale, >1 is faster)", fontsize=9)
        for i, s in enumerate(speedups):
            ax.text(s, i, f" {s:.2f}x", va="center", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # long case names are not clipped
    plt.close(fig)


def blas_summary() -> str:
    """The BLAS NumPy uses and its threads, e.g. ``openblas 0.3.31 SkylakeX, 2 threads``."""
    import numpy  # noqa: F401 - loads the BLAS so threadpoolctl can see it
    from threadpoolctl import threadpool_info

    parts = [f"{i['internal_api']} {i['version']} {i.get('architecture', '')}, {i['num_threads']} threads"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(parts) or "unknown BLAS"


def clean_openblas_env() -> bool:
    """Re-execute this process without the OpenBLAS-slowing variables if any is set.

    Returns ``False`` when nothing needed changing; otherwise does not return (the process
    is replaced). OpenBLAS reads them at load time, so they must be gone before NumPy loads.
    """
    if not any(v in os.environ for v in OPENBLAS_SLOWDOWN_VARS):
        return False
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_SLOWDOWN_VARS}
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    return True  # pragma: no cover - execve does not return


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
