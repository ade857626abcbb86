"""Helpers the numeric tests share: dtypes by name, random operands, float64 references, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: The dtypes matmul accepts, by name.
DTYPES = ["float32", "float64", "complex64", "complex128", "float16", "bfloat16"]
#: Relative-norm tolerances per dtype for products of modest size.
TOL = {"float32": 3e-5, "complex64": 3e-5, "float64": 1e-12, "complex128": 1e-12, "float16": 3e-3, "bfloat16": 2e-2}


def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def rand(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Fresh standard-normal data (complex parts too) in ``dtype``."""
    x = rng.standard_normal(shape)
    if np_dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(np_dtype(dtype))


def up(x) -> np.ndarray:
    """``x`` as a float64 (or complex128) NumPy array, the precision of the references."""
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def rel(x, ref) -> float:
    """Relative norm error of ``x`` against ``ref``, in float64; the shapes must agree and ``x``
    must be finite (NaN never passes)."""
    x, ref = up(x), up(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert np.isfinite(x).all()
    return float(np.linalg.norm((x - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-300))


def zero_pivot_cases(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Fortran-ordered float64 ``n x n`` matrices on which LU meets an exactly zero pivot, by
    name: the zero matrix, a zero column at the start, second, a third in and the end, and
    zero rows in the bottom third."""
    cases = {"zero matrix": np.zeros((n, n), order="F")}
    for j in (0, 1, n // 3, n - 1):
        a = np.asfortranarray(rng.standard_normal((n, n)))
        a[:, j] = 0
        cases[f"zero column {j}"] = a
    a = np.asfortranarray(rng.standard_normal((n, n)))
    a[2 * n // 3:] = 0
    cases["zero rows at the bottom"] = a
    return cases


def layouts(x: np.ndarray, transposed: bool = False) -> dict[str, np.ndarray]:
    """``x`` C-ordered, Fortran-ordered and strided (every other column of a wider array); with
    ``transposed``, also as the transposed view of a C-ordered copy of its transpose."""
    wide = np.repeat(x, 2, axis=-1)
    out = {"C": np.ascontiguousarray(x), "F": np.asfortranarray(x), "strided": wide[..., ::2]}
    if transposed:
        out["transposed"] = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    return out
