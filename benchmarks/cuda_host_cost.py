"""Host-side cost per call of the scipy.linalg drop-in on CUDA operands, measured without a GPU.

Runs each ``nvmathpy.scipy.linalg`` function on n = 8 float64 operands under the host emulation
of tests/ (host memory dressed as CuPy arrays; every cuSOLVER / cuBLAS routine done on the host
by ``scipy.linalg.lapack``, see tests/cuda_emulation_solvers.py) and reports, per call:

- ``host_us``: wall time minus the time spent inside the emulated vendor routines (what is left
  is the Python of the drop-in, the plan cache, operand intake, the array work around the call);
- ``vendor_us``: the time inside the emulated routines (host LAPACK: not the GPU's time);
- ``py_calls``: Python-level function calls per call outside the vendor routines (counted with
  ``sys.setprofile``: deterministic, unlike the timings on a shared machine);
- ``arrays``: CuPy array-making calls per call (each one is an allocation and, on a GPU, usually
  a kernel launch: what the host measurement here underprices), ``reads``: device-to-host reads
  (``cupy.asnumpy``, ``bool()`` / ``int()`` / ``float()`` of an array: each one synchronises).

Checks are deferred (:func:`nvmathpy.linalg.cuda_checks`, ``"deferred"``) unless
``--checks scipy`` is given (SciPy's semantics: each call reads its flags). Timing: every function in one process, interleaved in rounds,
median of the rounds and the min–max spread::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /work/main/.venv/bin/python benchmarks/cuda_host_cost.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the checkout and its emulation, without installing

#: The functions measured, in table order.
FUNCTIONS = ("solve", "lu_factor", "lu_solve", "cho_factor", "cho_solve", "cholesky", "eigh", "svd", "qr", "lstsq",
             "solve_triangular", "inv", "det")


class Counters:
    """Vendor time and the counts of array-making calls and device-to-host reads."""

    def __init__(self) -> None:
        self.vendor = 0.0
        self.arrays = 0
        self.reads = 0
        self.inside = False  # in a vendor routine: its Python is not the hot path's

    def reset(self) -> None:
        self.vendor, self.arrays, self.reads = 0.0, 0, 0


#: CuPy functions that make a new device array (each an allocation, most a kernel on a GPU).
MAKERS = ("empty", "zeros", "ones", "full", "eye", "arange", "ascontiguousarray", "asfortranarray", "tril", "triu",
          "where", "abs", "isfinite")


def install_counting() -> Counters:
    """Install the solver emulation with every vendor routine timed and CuPy's array makers and
    host reads counted; returns the counters."""
    import numpy as np

    from cuda_emulation import HostArray
    from cuda_emulation_solvers import install
    from nvmathpy.cuda.bindings import cublas, cusolver

    install(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))
    counters = Counters()
    for lib in (cusolver.LIB, cublas.LIB):
        for name in list(lib.functions):
            fn = lib.__dict__.get(name)
            if fn is not None and not name.endswith(("SetStream", "SetStream_v2")):
                setattr(lib, name, _timed(fn, counters))
    cupy = sys.modules["cupy"]
    for name in MAKERS:
        if hasattr(cupy, name):
            setattr(cupy, name, _counted(getattr(cupy, name), counters, "arrays"))
    cupy.asnumpy = _counted(cupy.asnumpy, counters, "reads")
    for dunder in ("__bool__", "__int__", "__float__"):
        original = getattr(np.ndarray, dunder)
        setattr(HostArray, dunder, _counted(original, counters, "reads"))
    return counters


def _timed(fn: Callable[..., Any], counters: Counters) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        start = time.perf_counter()
        counters.inside = True
        try:
            return fn(*args)
        finally:
            counters.inside = False
            counters.vendor += time.perf_counter() - start

    return run


def _counted(fn: Callable[..., Any], counters: Counters, what: str) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        setattr(counters, what, getattr(counters, what) + 1)
        return fn(*args, **kwargs)

    return run


def calls(n: int) -> dict[str, Callable[[], Any]]:
    """One call of each function on fresh n x n float64 operands (factors made once, outside)."""
    import numpy as np

    from cuda_emulation import HostArray
    from nvmathpy.scipy import linalg as nsla

    rng = np.random.default_rng(0)

    def dev(x: Any) -> Any:
        return np.ascontiguousarray(x).view(HostArray)

    a = dev(rng.standard_normal((n, n)) + n * np.eye(n))
    spd = dev(a @ a.T + n * np.eye(n))
    b = dev(rng.standard_normal((n, 4)))
    lu = nsla.lu_factor(a)
    c = nsla.cho_factor(spd)
    return {
        "solve": lambda: nsla.solve(a, b), "lu_factor": lambda: nsla.lu_factor(a),
        "lu_solve": lambda: nsla.lu_solve(lu, b), "cho_factor": lambda: nsla.cho_factor(spd),
        "cho_solve": lambda: nsla.cho_solve(c, b), "cholesky": lambda: nsla.cholesky(spd),
        "eigh": lambda: nsla.eigh(spd), "svd": lambda: nsla.svd(a), "qr": lambda: nsla.qr(a),
        "lstsq": lambda: nsla.lstsq(a, b), "solve_triangular": lambda: nsla.solve_triangular(a, b, lower=True),
        "inv": lambda: nsla.inv(a), "det": lambda: nsla.det(a),
    }


def measure(fns: dict[str, Callable[[], Any]], counters: Counters, rounds: int, per_round: int
            ) -> dict[str, dict[str, float]]:
    """Per function: median host µs (wall minus vendor), its min and max over the rounds, median
    vendor µs, and the array makers / host reads of one call."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    counts: dict[str, tuple[int, int]] = {}
    for fn in fns.values():  # plans built, caches warm
        fn(), fn()
    for name, fn in fns.items():
        counters.reset()
        fn()
        counts[name] = (counters.arrays, counters.reads, python_calls(fn, counters))
    for _ in range(rounds):
        for name, fn in fns.items():  # interleaved: every function in every round
            counters.reset()
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            wall = time.perf_counter() - start
            samples[name].append(((wall - counters.vendor) / per_round * 1e6, counters.vendor / per_round * 1e6))
    out = {}
    for name, rows in samples.items():
        host = [h for h, _ in rows]
        out[name] = {"host_us": statistics.median(host), "min_us": min(host), "max_us": max(host),
                     "vendor_us": statistics.median(v for _, v in rows), "arrays": counts[name][0],
                     "reads": counts[name][1], "py_calls": counts[name][2]}
    return out


def python_calls(fn: Callable[[], Any], counters: Counters) -> int:
    """Python function calls made by one ``fn()`` outside the vendor routines."""
    seen = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not counters.inside:
            seen[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen[0] - 1  # not fn itself


def markdown(results: dict[str, dict[str, float]], n: int, checks: str) -> str:
    lines = [f"n = {n}, float64, checks {checks}", "",
             "| function | host µs (median) | min–max | vendor µs (emulated) | Python calls | array makers | "
             "host reads |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| `{name}` | {r['host_us']:.1f} | {r['min_us']:.1f}–{r['max_us']:.1f} | {r['vendor_us']:.1f} | "
                     f"{r['py_calls']} | {r['arrays']} | {r['reads']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--checks", choices=("deferred", "scipy"), default="deferred")
    parser.add_argument("--only", help="comma-separated function names")
    args = parser.parse_args(argv)
    counters = install_counting()
    import nvmathpy.linalg as nl

    fns = calls(args.n)
    if args.only:
        fns = {name: fns[name] for name in args.only.split(",")}
    with nl.cuda_checks("deferred" if args.checks == "deferred" else "raise"):
        results = measure(fns, counters, args.rounds, args.per_round)
    print(markdown(results, args.n, args.checks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
