"""Shared helpers of the solver tests (random well-conditioned data, layouts, tolerances)."""

from __future__ import annotations

import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
LAYOUTS = ["C", "F", "strided"]


def rand(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def well(rng, n: int, dtype, batch: tuple = ()) -> np.ndarray:
    """A well-conditioned general matrix (or batch)."""
    return (rand(rng, batch + (n, n), dtype) + 2 * np.sqrt(n) * np.eye(n)).astype(dtype)


def spd(rng, n: int, dtype, batch: tuple = ()) -> np.ndarray:
    """A well-conditioned Hermitian positive definite matrix (or batch)."""
    x = rand(rng, batch + (n, n), dtype)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def herm(rng, n: int, dtype, batch: tuple = ()) -> np.ndarray:
    x = rand(rng, batch + (n, n), dtype)
    return ((x + np.conj(np.swapaxes(x, -1, -2))) / 2).astype(dtype)


def in_layout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values with every matrix C-ordered, Fortran-ordered, or strided (a view)."""
    if layout == "C":
        return np.ascontiguousarray(a)
    if layout == "F":
        return np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    big = np.zeros(a.shape[:-2] + (2 * a.shape[-2], 2 * a.shape[-1]), a.dtype)
    big[..., ::2, ::2] = a
    return big[..., ::2, ::2]


def tol(dtype, n: int = 1) -> float:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    return (2e-5 if single else 1e-12) * np.sqrt(max(n, 1))


def relerr(x, ref) -> float:
    x = np.asarray(x, np.complex128)
    ref = np.asarray(ref, np.complex128)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert np.all(np.isfinite(x)), "result has NaN/Inf"
    scale = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / (scale if scale else 1.0))


def wide(a: np.ndarray) -> np.ndarray:
    """``a`` in double precision (the reference precision)."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
