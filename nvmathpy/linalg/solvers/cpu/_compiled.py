"""A compiled solver for large batches of small matrices: one generated C loop over the batch.

For each matrix: Gaussian elimination with partial pivoting (the pivot of largest magnitude
in its column, ``|re| + |im|`` for complex as LAPACK's ``i?amax``), row swaps applied to the
right-hand side, then back substitution — LAPACK's ``getrf`` + ``getrs`` algorithm unblocked,
with ``n`` a compile-time constant so the compiler unrolls and keeps the matrix in registers.
The inverse is the solve with the identity. A matrix with an exactly zero (or NaN) pivot is
flagged and left for the caller to redo with LAPACK, which reports the singular batch element.

Built with :mod:`nvmathpy.kernels.cpu_jit` (``None`` without a C compiler); the generated source
holds only numbers and type names chosen here, nothing a caller passes.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable

import numpy as np

from ....errors import MissingDependencyError
from ....kernels import cpu_jit

__all__ = ["COMPILED_MAX", "compiled_offered", "compiled_solver"]

#: Largest n the compiled solver is offered for (beyond it LAPACK per matrix is as fast).
COMPILED_MAX = 16

_TYPES = {"float32": ("float", "fabsf(v)"), "float64": ("double", "fabs(v)"),
          "complex64": ("float _Complex", "(fabsf(crealf(v)) + fabsf(cimagf(v)))"),
          "complex128": ("double _Complex", "(fabs(creal(v)) + fabs(cimag(v)))")}

_TEMPLATE = r"""
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include <complex.h>
#define N {n}
typedef {ctype} T;
static inline double magnitude(T v) {{ return {magnitude}; }}

/* Solve a[s] x = b[s] (k right-hand sides; b == 0: the identity, i.e. the inverse) for the
   systems s in [lo, hi); a is (count, N, N), b and x are (count, N, k), all C-ordered.
   flagged[s] = 1 where a pivot is zero or NaN (x[s] is then undefined). */
void nvm_batched_solve(int64_t lo, int64_t hi, int64_t k, const T* a, const T* b, T* x, bool* flagged) {{
  for (int64_t s = lo; s < hi; ++s) {{
    T m[N][N];
    const T* as = a + s * N * N;
    T* xs = x + s * N * k;
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) m[i][j] = as[i * N + j];
    if (b) {{
      const T* bs = b + s * N * k;
      for (int64_t t = 0; t < N * k; ++t) xs[t] = bs[t];
    }} else {{
      for (int i = 0; i < N; ++i)
        for (int64_t j = 0; j < k; ++j) xs[i * k + j] = (i == j) ? (T)1 : (T)0;
    }}
    bool bad = false;
    for (int c = 0; c < N; ++c) {{
      int p = c;
      double best = magnitude(m[c][c]);
      for (int i = c + 1; i < N; ++i) {{
        const double v = magnitude(m[i][c]);
        if (v > best) {{ best = v; p = i; }}
      }}
      if (!(best > 0)) {{ bad = true; break; }}
      if (p != c) {{
        for (int j = 0; j < N; ++j) {{ const T t = m[c][j]; m[c][j] = m[p][j]; m[p][j] = t; }}
        for (int64_t j = 0; j < k; ++j) {{ const T t = xs[c * k + j]; xs[c * k + j] = xs[p * k + j]; xs[p * k + j] = t; }}
      }}
      const T inverse = (T)1 / m[c][c];
      for (int i = c + 1; i < N; ++i) {{
        const T f = m[i][c] * inverse;
        m[i][c] = f;
        for (int j = c + 1; j < N; ++j) m[i][j] -= f * m[c][j];
        for (int64_t j = 0; j < k; ++j) xs[i * k + j] -= f * xs[c * k + j];
      }}
    }}
    flagged[s] = bad;
    if (bad) continue;
    for (int i = N - 1; i >= 0; --i) {{
      const T inverse = (T)1 / m[i][i];
      for (int64_t j = 0; j < k; ++j) {{
        T v = xs[i * k + j];
        for (int q = i + 1; q < N; ++q) v -= m[i][q] * xs[q * k + j];
        xs[i * k + j] = v * inverse;
      }}
    }}
  }}
}}
"""


@functools.lru_cache(maxsize=None)
def _kernel(n: int, dtype: str) -> Callable[..., None] | None:
    ctype, magnitude = _TYPES[dtype]
    source = _TEMPLATE.format(n=int(n), ctype=ctype, magnitude=magnitude)
    try:
        fn = cpu_jit.compile_c(source).nvm_batched_solve
    except MissingDependencyError:
        return None
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 4
    return fn


def compiled_offered(n: int, dtype: str) -> bool:
    """Whether :func:`compiled_solver` is worth listing for ``n`` and ``dtype`` (no compile)."""
    return 1 <= n <= COMPILED_MAX and dtype in _TYPES and cpu_jit.available()


def compiled_solver(n: int, dtype: str) -> Callable[..., tuple[np.ndarray, np.ndarray]] | None:
    """``fast(a, b, out=None) -> (result, flagged)`` for ``(B, n, n)`` stacks of ``dtype``
    (``b`` ``(B, n, k)``, or None for the inverse), or ``None`` when it cannot be built here
    (no C compiler, n above :data:`COMPILED_MAX`, a dtype other than float32/64, complex64/128).

    Examples
    --------
    >>> fast = compiled_solver(3, "float64")
    >>> a = np.array([[[2.0, 1, 0], [1, 3, 1], [0, 1, 4]], [[1.0, 2, 3], [2, 4, 6], [1, 1, 1]]])
    >>> x, flagged = fast(a, np.ones((2, 3, 1)))
    >>> flagged.tolist(), np.allclose(a[0] @ x[0], 1)
    ([False, True], True)
    """
    kernel = _kernel(n, dtype) if compiled_offered(n, dtype) else None
    if kernel is None:
        return None

    def fast(a: np.ndarray, b: np.ndarray | None, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        count = a.shape[0]
        a = np.ascontiguousarray(a)
        if b is not None:
            b = np.ascontiguousarray(b, a.dtype)
        shape = a.shape if b is None else b.shape
        target = out if out is not None and out.flags.c_contiguous else np.empty(shape, a.dtype)
        flagged = np.empty(count, np.bool_)
        k = n if b is None else shape[-1]
        if count and k:
            kernel(0, count, k, a.ctypes.data, None if b is None else b.ctypes.data, target.ctypes.data,
                   flagged.ctypes.data)
        else:
            flagged[:] = False
        if out is not None and target is not out:
            np.copyto(out, target)
            target = out
        return target, flagged

    return fast
