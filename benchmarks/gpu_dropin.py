"""gpu_check.py's ``dropin`` section: ``nvmathpy.scipy.linalg`` on CuPy float64 arrays beside
CuPy's own function, one row per function and size (issue 24's table).

Each row: the relative error of nvmathpy's result against CuPy's (or, for QR, the backward error
``||Q R - A|| / ||A||``; for eigh and svd the eigen- / singular values), device time per call of
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
    """The cases at size ``n`` on fresh random float64 CuPy operands (4 right-hand sides)."""
    import cupy
    import cupyx.scipy.linalg as cxl

    from nvmathpy.scipy import linalg as nsla

    rng = cupy.random.default_rng(24 + n)
    a = rng.standard_normal((n, n)) + n ** 0.5 * 4 * cupy.eye(n)
    spd = a @ a.T / n + cupy.eye(n)
    tri = cupy.tril(a)
    b = rng.standard_normal((n, 4))
    lu_ours, lu_theirs = nsla.lu_factor(a), cxl.lu_factor(a)
    norm_a = float(cupy.linalg.norm(a))

    def qr_error(ours: Any, _: Any) -> float:
        q, r = ours
        return float(cupy.linalg.norm(q @ r - a)) / norm_a

    def first(error: Callable[[Any, Any], float]) -> Callable[[Any, Any], float]:
        return lambda ours, theirs: error(ours[0], theirs[0])

    return [
        Case("solve", lambda: nsla.solve(a, b), lambda: cupy.linalg.solve(a, b), rel_error),
        Case("lu_factor", lambda: nsla.lu_factor(a), lambda: cxl.lu_factor(a), first(rel_error)),
        Case("lu_solve", lambda: nsla.lu_solve(lu_ours, b), lambda: cxl.lu_solve(lu_theirs, b), rel_error),
        Case("cho_solve(cho_factor)", lambda: nsla.cho_solve(nsla.cho_factor(spd), b),
             lambda: cupy.linalg.solve(spd, b), rel_error),
        Case("cholesky", lambda: nsla.cholesky(spd), lambda: cupy.linalg.cholesky(spd),
             lambda ours, theirs: rel_error(ours, theirs.T.conj())),
        Case("eigh", lambda: nsla.eigh(spd), lambda: cupy.linalg.eigh(spd), first(rel_error)),
        Case("svd", lambda: nsla.svd(a), lambda: cupy.linalg.svd(a), lambda ours, theirs: rel_error(ours[1], theirs[1])),
        Case("qr", lambda: nsla.qr(a), lambda: cupy.linalg.qr(a, mode="complete"), qr_error),
        Case("lstsq", lambda: nsla.lstsq(a, b), lambda: cupy.linalg.lstsq(a, b, rcond=None), first(rel_error)),
        Case("solve_triangular", lambda: nsla.solve_triangular(tri, b, lower=True),
             lambda: cxl.solve_triangular(tri, b, lower=True), rel_error),
        Case("inv", lambda: nsla.inv(a), lambda: cupy.linalg.inv(a), rel_error),
        Case("det", lambda: nsla.det(a), lambda: cupy.linalg.det(a), rel_error),
    ]


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
