"""gpu_check.py's ``dropin`` section: ``nvmathpy.scipy.linalg`` on CuPy float64 arrays beside
CuPy's own function, one row per function and size (issue 24's table).

Each row: the relative error of nvmathpy's result against CuPy's (for QR, of ``Q R`` against
CuPy's ``Q R``; for eigh and svd the eigen- / singular values), device time per call of
both by CUDA events (L2 flushed, interleaved rounds: :func:`gpu_check.interleaved_times`), and
``cupy/nvmathpy`` with the target >= 1.0. The drop-in runs with its defaults (``check_finite=True``)
and ``nvmathpy.linalg.cuda_checks("deferred")``: no host round trip per call, as CuPy's functions
(whose default, ``cupyx.errstate(linalg="ignore")``, reads nothing back); a last row per size
times ``solve`` with SciPy's per-call checks for the cost of that choice.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

#: Sizes of the section, and the timed calls per side at each (large SVDs take 0.5 s a call).
SIZES = (8, 256, 2048)
TOL = 1e-10  # float64, well-conditioned operands: measured errors 1e-16 .. 1e-14 on the H200


def timed_calls(n: int) -> int:
    """Timed calls per side: a dozen for small sizes, two where one call takes most of a second."""
    return 12 if n <= 256 else 2


class Case(NamedTuple):
    """One row: ``ours()`` and ``theirs()`` (CuPy's function), and ``error(ours_result,
    theirs_result)`` the relative error the row checks."""

    name: str
    ours: Callable[[], Any]
    theirs: Callable[[], Any]
    error: Callable[[Any, Any], float]


def cases(n: int, rel_error: Callable[[Any, Any], float]) -> list[Case]:
    """The cases at size ``n`` (``nvmathpy.bench.suite_scipy_cuda.calls``: fresh random float64
    CuPy operands, 4 right-hand sides), each with the error its row checks."""
    import cupy
    import cupyx.scipy.linalg as cxl

    from nvmathpy.bench.suite_scipy_cuda import calls

    def first(ours: Any, theirs: Any) -> float:
        return rel_error(ours[0], theirs[0])

    def product(ours: Any, theirs: Any) -> float:  # QR: Q R against CuPy's (A to rounding)
        return rel_error(ours[0] @ ours[1], theirs[0] @ theirs[1])

    errors = {"lu_factor": first, "eigh": first, "lstsq": first, "qr": product,
              "cholesky": lambda ours, theirs: rel_error(ours, theirs.T.conj()),
              "svd": lambda ours, theirs: rel_error(ours[1], theirs[1])}
    return [Case(name, ours, theirs, errors.get(name, rel_error))
            for name, (ours, theirs) in calls(n, cupy, cxl, cupy.asarray).items()]


def run_dropin(make_cases: Callable[[int], list[Case]], sizes: tuple[int, ...], row: Callable[..., Any],
               failed: Callable[..., Any], times: Callable[..., dict[str, float]],
               checks: Callable[[str], Any]) -> None:
    """One row per case and size (``make_cases(n)``), timed by ``times`` (``interleaved_times``)
    with the drop-in's checks deferred (``checks``: ``nvmathpy.linalg.cuda_checks``); then
    ``solve`` again with SciPy's per-call checks (information beside the deferred row)."""
    target = (("cupy/nvmathpy", ">=", 1.0),)
    for n in sizes:
        reps = timed_calls(n)
        rounds = max(1, min(5, reps // 2))
        try:
            built = make_cases(n)
        except Exception as exc:
            failed("dropin", f"n={n}", exc, targets=target)
            continue
        for case in built:
            label = f"{case.name} n={n}"
            try:
                with checks("deferred"):
                    err = case.error(case.ours(), case.theirs())
                    t = times({"ours": case.ours, "theirs": case.theirs}, rounds=rounds,
                              reps=max(1, reps // rounds))
                row("dropin", label, rel_err=err, tol=TOL, targets=target, nvmathpy_ms=round(t["ours"] * 1e3, 3),
                    cupy_ms=round(t["theirs"] * 1e3, 3), **{"cupy/nvmathpy": round(t["theirs"] / t["ours"], 2)})
            except Exception as exc:
                failed("dropin", label, exc, targets=target)
            if case.name == "solve":
                try:
                    with checks("raise"):
                        t = times({"ours": case.ours, "theirs": case.theirs}, rounds=rounds,
                                  reps=max(1, reps // rounds))
                    row("dropin", f"solve n={n}, SciPy's per-call checks", info=True,
                        nvmathpy_ms=round(t["ours"] * 1e3, 3), cupy_ms=round(t["theirs"] * 1e3, 3),
                        **{"cupy/nvmathpy": round(t["theirs"] / t["ours"], 2)})
                except Exception as exc:
                    failed("dropin", f"solve n={n}, SciPy's per-call checks", exc)
