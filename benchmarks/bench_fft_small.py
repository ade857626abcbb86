"""Small FFT calls: nvmathpy's one-call functions against scipy.fft and numpy.fft.

The mix real code makes: 1-D transforms of n = 8..1024 points (powers of two, odd and prime
lengths) and a small batch; ``fft`` of complex and of real input, ``rfft``, ``irfft``,
``ifft`` and (SciPy only) ``dct``; repeated calls on one shape, and first calls on lengths
neither side has seen in this process (and, in a table of their own, first calls on lengths
beyond the small ones). ``nvmathpy.scipy.fft`` is compared with ``scipy.fft``,
``nvmathpy.fft`` with ``numpy.fft``.

Both sides run in one process, interleaved: each round times a burst of calls of one side,
then of the other (the order alternating between rounds), so a noisy machine slows both
alike. Reported: the median per-call time over the rounds, its min-max spread, and the
ratio reference / nvmathpy, the median of the per-round ratios (>= 1.0 means nvmathpy is at
least as fast, the target per case). First calls are timed per length and side, both sides
on the same lengths with the plan caches of the reference's kernel flushed in between, the
ratio the median of the per-length ratios (see :func:`first_calls`).

Run from the repository root (the OpenBLAS variables unset, as for every CPU benchmark)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_fft_small.py
    python benchmarks/bench_fft_small.py --rounds 5 --json small.json   # quicker, saved
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Lengths of the repeated-call cases: powers of two, odd, prime and 5-smooth sizes.
LENGTHS = (8, 16, 60, 64, 97, 128, 255, 256, 509, 512, 1000, 1024)
#: (function, input) pairs per namespace: "c" complex input, "r" real, "h" a half spectrum.
FUNCTIONS = {"scipy": (("fft", "c"), ("fft", "r"), ("ifft", "c"), ("rfft", "r"), ("irfft", "h"), ("dct", "r")),
             "numpy": (("fft", "c"), ("fft", "r"), ("ifft", "c"), ("rfft", "r"), ("irfft", "h"))}
BATCH = (16, 64)


def _operand(rng: np.random.Generator, shape: tuple[int, ...], what: str) -> np.ndarray:
    if what == "r":
        return rng.standard_normal(shape)
    if what == "h":
        shape = shape[:-1] + (shape[-1] // 2 + 1,)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _per_call(fn: Callable[[np.ndarray], Any], x: np.ndarray, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def _namespaces(which: str) -> tuple[Any, Any]:
    if which == "scipy":
        import scipy.fft

        import nvmathpy.scipy.fft as mine

        return mine, scipy.fft
    import nvmathpy.fft as mine

    return mine, np.fft


def repeated(rounds: int, calls: int, seed: int = 0) -> list[dict[str, Any]]:
    """Per-call seconds of repeated calls on one shape, both sides interleaved per round."""
    rng = np.random.default_rng(seed)
    cases = []
    for which, functions in FUNCTIONS.items():
        mine, ref = _namespaces(which)
        for shape in [(n,) for n in LENGTHS] + [BATCH]:
            for name, what in functions:
                x = _operand(rng, shape, what)
                pair = (getattr(mine, name), getattr(ref, name))
                for fn in pair:  # warm: plans made, caches filled
                    fn(x)
                cases.append({"namespace": which, "function": name, "input": what, "shape": shape, "pair": pair,
                              "x": x, "times": ([], [])})
    for r in range(rounds):
        for case in cases:
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for side in order:
                case["times"][side].append(_per_call(case["pair"][side], case["x"], calls))
    return cases


#: The first-call cases beyond the small transforms (lengths above 1024 up to ``BEYOND_UP_TO``):
#: a one-call function there plans too, and must not cost more than twice the peer's first call.
BEYOND = {"scipy": (("fft", "c"), ("rfft", "r"), ("irfft", "h")), "numpy": (("fft", "c"), ("rfft", "r"))}
BEYOND_UP_TO = 1 << 17
#: Lengths the reference runs between two timed first calls, never timed themselves: more than
#: the plan caches of pocketfft (SciPy's and NumPy's: 16 plans per kind and precision) hold,
#: so the plan of the length just timed is evicted before the other side's first call on it.
FLUSH = (2, 3, 4, 5, 6, 7, 20, 24, 30, 36, 40, 48, *LENGTHS)


def first_calls(rounds: int, seed: int = 1, beyond: bool = False, cold: bool = False,
                passes: int = 1) -> list[dict[str, Any]]:
    """Seconds of the first call on a length neither side has transformed in this process.

    Per case, ``rounds`` lengths; each is transformed once by each side (a paired design: both
    sides see the same mix of lengths, so a prime among a dozen powers of two weighs on both),
    the side going first alternating; ``passes`` times over the same lengths (small lengths, not
    ``cold``: before each timed call nvmathpy's quick-path runners are dropped, its runner
    families kept - what a program that has not yet called that length holds -, so each pass's
    call is again a first call on both sides; beyond the small lengths one-call plans are kept,
    and a cold call would find the code of a first call warmed by the flush's, so there only
    one pass is made). Before each timed call both sides transform every length
    of :data:`FLUSH` (untimed; so each side's code is about as warm, but for what only a new
    length runs): both sides may run one kernel, SciPy's pocketfft, whose plan cache would
    otherwise serve the second side the plan the first one made. Then (unless ``cold``) the side
    makes an untimed first call on another new length, so what only a first call runs is as
    warm on both sides, as in a program making first calls (``cold``: nvmathpy's first-call
    code, which its repeated calls skip, is then the less warm). Each function
    is called once on a length of :data:`LENGTHS` before (modules loaded, as in a running
    program). Wall time (``time.perf_counter``, the target) and the calling thread's CPU time
    (``time.thread_time``: what the other processes of a shared machine do not inflate, but
    blind to work on other threads - nvmathpy runs transforms of these lengths on the calling
    thread, larger ones may not) are both kept.
    ``beyond``: lengths of 1025 to :data:`BEYOND_UP_TO` points (:data:`BEYOND`'s cases), else
    9 to 1023 (but :data:`FLUSH` and :data:`LENGTHS`)."""
    from nvmathpy.fft._driver import runner_cache

    if (beyond or cold) and passes != 1:
        raise ValueError("first calls beyond the small lengths, and cold ones, are made in one pass")
    rng = np.random.default_rng(seed)
    needed = rounds * (1 if cold else 2) * sum(map(len, (BEYOND if beyond else FUNCTIONS).values()))
    if beyond:
        unused = [int(n) for n in rng.choice(np.arange(1025, BEYOND_UP_TO), needed, replace=False)]
    else:
        unused = [n for n in range(9, 1024) if n not in FLUSH]  # the repeated cases run later
        if needed > len(unused):
            raise SystemExit(f"{rounds} first-call rounds need {needed} lengths of 9-1023; {len(unused)} are free")
        rng.shuffle(unused)
    pool = iter(unused)
    cases = []
    for which, functions in (BEYOND if beyond else FUNCTIONS).items():
        mine, ref = _namespaces(which)
        for name, what in functions:
            pair = (getattr(mine, name), getattr(ref, name))
            flush = [_operand(rng, (n,), what) for n in FLUSH]
            for fn in pair:
                fn(_operand(rng, (LENGTHS[-1],), what))
            times: tuple[list[float], list[float]] = ([], [])
            cpu: tuple[list[float], list[float]] = ([], [])
            lengths = [(_operand(rng, (next(pool),), what), None if cold else _operand(rng, (next(pool),), what))
                       for _ in range(rounds)]
            for r, (x, warm) in enumerate(lengths * passes):
                for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                    for f in flush:  # (both sides: the code of each is as warm before its timed call)
                        pair[0](f)
                        pair[1](f)
                    if passes > 1:
                        runner_cache().clear(families=False)
                    if warm is not None:
                        pair[side](warm)
                    start, start_cpu = time.perf_counter(), time.thread_time()
                    pair[side](x)
                    cpu[side].append(time.thread_time() - start_cpu)
                    times[side].append(time.perf_counter() - start)
            cases.append({"namespace": which, "function": name, "input": what, "shape": ("new n",), "times": times,
                          "cpu": cpu})
    return cases


def _paired(mine: list[float], ref: list[float]) -> float:
    """The median of the per-pair ratios ``ref / mine`` (each pair: one round of repeated calls,
    or one length's first call on both sides), which keeps what is common to a pair - a costly
    length, a burst of load - out of the ratio."""
    return statistics.median(r / m for m, r in zip(mine, ref))


def summarize(case: dict[str, Any]) -> dict[str, Any]:
    mine, ref = case["times"]
    med_mine, med_ref = statistics.median(mine), statistics.median(ref)
    input_name = {"c": "complex", "r": "real", "h": "half spectrum"}[case["input"]]
    return {"namespace": case["namespace"], "function": case["function"], "input": input_name,
            "shape": "x".join(map(str, case["shape"])),
            "nvmathpy_us": 1e6 * med_mine, "nvmathpy_spread_us": [1e6 * min(mine), 1e6 * max(mine)],
            "reference_us": 1e6 * med_ref, "reference_spread_us": [1e6 * min(ref), 1e6 * max(ref)],
            "ratio": _paired(mine, ref),
            **({"cpu_ratio": _paired(*case["cpu"])} if "cpu" in case else {})}


def table(rows: list[dict[str, Any]], title: str) -> str:
    cpu = all("cpu_ratio" in row for row in rows)
    lines = [f"### {title}", "",
             "| reference | function | input | shape | nvmathpy µs (min–max) | reference µs (min–max) | ratio |"
             + (" ratio, thread CPU |" if cpu else ""),
             "|---|---|---|---|---:|---:|---:|" + ("---:|" if cpu else "")]
    for row in rows:
        ref = {"scipy": "scipy.fft", "numpy": "numpy.fft"}[row["namespace"]]
        lines.append(
            f"| {ref} | {row['function']} | {row['input']} | {row['shape']} | "
            f"{row['nvmathpy_us']:.1f} ({row['nvmathpy_spread_us'][0]:.1f}–{row['nvmathpy_spread_us'][1]:.1f}) | "
            f"{row['reference_us']:.1f} ({row['reference_spread_us'][0]:.1f}–{row['reference_spread_us'][1]:.1f}) | "
            f"{row['ratio']:.2f} |" + (f" {row['cpu_ratio']:.2f} |" if cpu else ""))
    ratios = [row["ratio"] for row in rows]
    below = sum(r < 1.0 for r in ratios)
    lines += ["", f"geometric mean ratio {math.exp(statistics.fmean(map(math.log, ratios))):.2f}; "
                  f"{below} of {len(ratios)} cases below 1.0"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per case (default 9)")
    parser.add_argument("--calls", type=int, default=200, help="calls per burst of repeated calls (default 200)")
    parser.add_argument("--first-rounds", type=int, default=41, help="new lengths per first-call case (default 41)")
    parser.add_argument("--first-passes", type=int, default=3,
                        help="first calls on each small new length, per side (default 3; cold: 1; see first_calls)")
    parser.add_argument("--cold-first", action="store_true",
                        help="no untimed first call before each timed one (see first_calls)")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    first = [summarize(c) for c in first_calls(args.first_rounds, cold=args.cold_first,  # before anything else plans
                                               passes=1 if args.cold_first else args.first_passes)]
    beyond = [summarize(c) for c in first_calls(args.first_rounds, beyond=True, cold=args.cold_first)]
    again = [summarize(c) for c in repeated(args.rounds, args.calls)]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"NumPy {np.__version__}, Python {platform.python_version()}")
    print(table(again, f"repeated calls ({args.rounds} rounds of {args.calls} calls)"))
    print()
    regime = "cold: no untimed first call before" if args.cold_first else "each after an untimed first call"
    print(table(first, f"first call on a new length ({args.first_rounds} lengths per case, each timed on both sides "
                       f"{1 if args.cold_first else args.first_passes} times, {regime}; ratio: the median of the "
                       "per-length ratios of wall "
                       "times, and of the calling thread's CPU times)"))
    print()
    print(table(beyond, f"first call on a new length of 1025-{BEYOND_UP_TO} points ({args.first_rounds} lengths per "
                        "case, each timed on both sides; the target: wall ratio >= 0.5)"))
    if args.json:
        args.json.write_text(json.dumps({"repeated": again, "first": first, "beyond": beyond}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
