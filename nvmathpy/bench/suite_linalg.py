"""The linalg suite of ``python -m nvmathpy bench``: solver plans and the scipy.linalg drop-in
beside scipy.linalg and numpy.linalg (factored solves, one-shot solves, one-call functions of one
small matrix, large factorizations, eigh, batched tiny systems)."""

from __future__ import annotations

import numpy as np

from .harness import Case

__all__ = ["cases"]


def _general(rng: np.random.Generator, n: int, batch: tuple[int, ...] = ()) -> np.ndarray:
    """A well-conditioned general matrix (diagonally weighted), C-ordered."""
    return rng.standard_normal(batch + (n, n)) + 2 * np.sqrt(n) * np.eye(n)


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def cases(quick: bool) -> list[Case]:
    import scipy.linalg as sla
    from scipy.linalg import lapack

    import nvmathpy.linalg as nl
    import nvmathpy.scipy.linalg as nsl
    from nvmathpy.linalg.solvers.cpu._fast_lapack import fast_module
    from nvmathpy.linalg.solvers.plans.solve import Solve

    fast_module(wait=True)  # the small-call extension's first build (background) is not timed
    rng = np.random.default_rng(0)
    out: list[Case] = []
    for n in (4, 16):
        a, s, b = _general(rng, n), _spd(rng, n), rng.standard_normal(n)
        lu, cho = sla.lu_factor(a), sla.cho_factor(s)
        lu_plan, cho_plan = nl.LU(a), nl.Cholesky(s, lower=False)
        lu_plan.solve(b)
        cho_plan.solve(b)
        out.append(Case("linalg", f"LU solve with factors n={n}", "scipy lu_solve", {
            "scipy lu_solve": lambda lu=lu, b=b: sla.lu_solve(lu, b),
            "raw dgetrs": lambda lu=lu, b=b: lapack.dgetrs(lu[0], lu[1], b),
            "nvmathpy": lambda p=lu_plan, b=b: p.solve(b)}, note="LU(a).solve(b)"))
        out.append(Case("linalg", f"Cholesky solve with factors n={n}", "scipy cho_solve", {
            "scipy cho_solve": lambda c=cho, b=b: sla.cho_solve(c, b),
            "raw dpotrs": lambda c=cho, b=b: lapack.dpotrs(c[0], b, 0),
            "nvmathpy": lambda p=cho_plan, b=b: p.solve(b)}, note="Cholesky(a).solve(b)"))
        out.append(Case("linalg", f"one-shot solve n={n}", "scipy solve", {
            "scipy solve": lambda a=a, b=b: sla.solve(a, b), "numpy solve": lambda a=a, b=b: np.linalg.solve(a, b),
            "nvmathpy": lambda a=a, b=b: nl.solve(a, b)}, note="nvmathpy.linalg.solve"))
    a, s = _general(rng, 8), _spd(rng, 8)
    one_calls = {"inv": (a,), "cholesky": (s,), "qr": (a,), "svd": (a,), "lstsq": (a, rng.standard_normal(8)),
                 "det": (a,)}
    for name, args in one_calls.items():  # one small matrix, the functions of numpy.linalg's names
        out.append(Case("linalg", f"one-call {name} n=8", "numpy", {
            "numpy": lambda f=getattr(np.linalg, name), args=args: f(*args),
            "nvmathpy": lambda f=getattr(nl, name), args=args: f(*args)}, note=f"nvmathpy.linalg.{name}"))
    g = rng.standard_normal((1000, 8, 8))
    stacks = {"cholesky": g @ g.transpose(0, 2, 1) + 8 * np.eye(8), "qr": g, "svd": g, "eigh": g + g.transpose(0, 2, 1)}
    for name, x in stacks.items():  # a stack of small matrices
        out.append(Case("linalg", f"one-call {name} of 1000 8x8", "numpy", {
            "numpy": lambda f=getattr(np.linalg, name), x=x: f(x),
            "nvmathpy": lambda f=getattr(nl, name), x=x: f(x)}, note=f"nvmathpy.linalg.{name}"))
    n = 512 if quick else 1024
    big, spd, rhs = _general(rng, n), _spd(rng, n), rng.standard_normal(n)
    sym = (spd + spd.T) / 2
    out.append(Case("linalg", f"LU factor+solve n={n}, C-ordered", "scipy lu_factor+lu_solve", {
        "scipy lu_factor+lu_solve": lambda: sla.lu_solve(sla.lu_factor(big), rhs),
        "nvmathpy": lambda: nl.LU(big).solve(rhs)}, settle=True))
    out.append(Case("linalg", f"Cholesky (upper) factor+solve n={n}, C-ordered",
                    "scipy cho_factor+cho_solve", {
        "scipy cho_factor+cho_solve": lambda: sla.cho_solve(sla.cho_factor(spd), rhs),  # reads the upper one
        "nvmathpy": lambda: nl.Cholesky(spd, lower=False).solve(rhs)}, settle=True))
    out.append(Case("linalg", f"eigh n={n}", "scipy eigh", {
        "scipy eigh": lambda: sla.eigh(sym), "numpy eigh": lambda: np.linalg.eigh(sym),
        "nvmathpy": lambda: nsl.eigh(sym)}, note="nvmathpy.scipy.linalg.eigh", settle=True))
    count = 2000 if quick else 10_000
    for n in (3, 4, 8):
        a, b = _general(rng, n, (count,)), rng.standard_normal((count, n, 1))
        Solve(a, b).autotune(effort="exhaustive", repeats=3)  # the winner goes to wisdom; solve() uses it
        out.append(Case("linalg", f"batched solve B={count} n={n}", "numpy solve", {
            "numpy solve": lambda a=a, b=b: np.linalg.solve(a, b),
            "nvmathpy": lambda a=a, b=b: nl.solve(a, b)}))
    return out
