"""Blocked Cholesky (lower, ``A = L L^T``) with look-ahead on NumPy's OpenBLAS.

Built like :mod:`._lookahead_lu` on :mod:`._lookahead`'s steps: for each 128-column panel,
the threads first compute the panel's part below the diagonal block, ``L21 = A21 inv(L11)^T``,
in row chunks (a product with the diagonal block's inverted triangle: OpenBLAS's ``?trsm``
with a 128-column triangle runs well below the speed of a product); then, while the caller
brings the next panel's columns up to date and factors its diagonal block (``?potrf``,
``?trtri``), the others update the columns right of it in chunks (``?syrk`` on the diagonal
block of a chunk, ``?gemm`` below it). ``L21`` is shared among the threads because computed on
the caller alone it is most of the critical path, and the look-ahead gains little over
``?potrf``.

The strictly upper triangle is never written (as LAPACK's ``?potrf``); ``info`` is the order
of the first leading minor that is not positive definite, after which the factorization stops.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ._lookahead import compile_driver, drivers_available, few_threads, run_driver
from ._numpy_lapack import _zero_other_triangle, dtype_name, routines

__all__ = ["FIRST_FROM", "UP_TO", "lookahead_potrf", "potrf_of", "potrf_order"]

#: Columns per panel, and columns (rows) per chunk of a step.
NB = 128
W = 128
#: The look-ahead Cholesky is the first choice for real matrices of these orders, on few
#: threads: there it beats OpenBLAS's ``?potrf``; below them a step's work is too little to
#: share (``benchmarks/bench_linalg.py --only engines`` times both against ``cho_factor``).
FIRST_FROM = 768
UP_TO = 2048

_ROUTINES = ("potrf", "trtri", "gemm", "syrk")

_SOURCE = r"""
#include <stdlib.h>
#include <string.h>

typedef void (*potrf_t)(const char *, const blasint *, real *, const blasint *, blasint *, size_t);
typedef void (*trtri_t)(const char *, const char *, const blasint *, real *, const blasint *, blasint *, size_t, size_t);
typedef void (*gemm_t)(const char *, const char *, const blasint *, const blasint *, const blasint *, const real *,
                       const real *, const blasint *, const real *, const blasint *, const real *, real *,
                       const blasint *, size_t, size_t);
typedef void (*syrk_t)(const char *, const char *, const blasint *, const blasint *, const real *, const real *,
                       const blasint *, const real *, real *, const blasint *, size_t, size_t);

typedef struct {
  potrf_t potrf; trtri_t trtri; gemm_t gemm; syrk_t syrk;
  blasint n, ld, nb, w;
  real *a;          /* column-major, n x n, leading dimension ld; its lower triangle is factored */
  const real *src;  /* NULL, or the matrix to copy into a first (column-major, leading dimension lds) */
  blasint lds;
  real *inv;        /* two nb x nb buffers: the inverse of panel k's diagonal block is in inv[k % 2] */
  blasint info;
} chol_t;

static inline real *at(const chol_t *j, blasint i, blasint c) { return j->a + i + c * j->ld; }
static inline blasint min_of(blasint x, blasint y) { return x < y ? x : y; }
static inline blasint width_of(const chol_t *j, blasint k) { return min_of(j->nb, j->n - k * j->nb); }
static inline blasint chunks(blasint from, blasint to, blasint w) { return to > from ? (to - from + w - 1) / w : 0; }

/* step -1 copies the columns right of panel 0; step 2k computes panel k's rows below its
   diagonal block (2 w rows a chunk); step 2k + 1 updates the columns right of panel k + 1 with
   panel k (w columns a chunk) */
static int64_t chol_count(const void *job, int64_t s) {
  const chol_t *j = job;
  if (s < 0) return j->src ? chunks(width_of(j, 0), j->n, j->w) : 0;
  const blasint k = s / 2, t0 = k * j->nb + width_of(j, k);
  return s % 2 == 0 ? chunks(t0, j->n, 2 * j->w) : chunks(min_of(t0 + j->nb, j->n), j->n, j->w);
}

/* panel k's update of columns c0..c0+cols: their diagonal block by ?syrk, the rows below by ?gemm */
static void update(const chol_t *j, blasint k, blasint c0, blasint cols) {
  const blasint j0 = k * j->nb, b = width_of(j, k), below = j->n - c0 - cols;
  const real one = 1, minus = -1;
  j->syrk("L", "N", &cols, &b, &minus, at(j, c0, j0), &j->ld, &one, at(j, c0, c0), &j->ld, 1, 1);
  if (below > 0)
    j->gemm("N", "T", &below, &cols, &b, &minus, at(j, c0 + cols, j0), &j->ld, at(j, c0, j0), &j->ld, &one,
            at(j, c0 + cols, c0), &j->ld, 1, 1);
}

static void chol_run(void *job, int64_t s, int64_t i, real *tmp) {
  chol_t *j = job;
  if (s < 0) {
    const blasint c0 = width_of(j, 0) + i * j->w, cols = min_of(j->w, j->n - c0);
    for (blasint c = c0; c < c0 + cols; ++c) memcpy(at(j, 0, c), j->src + c * j->lds, sizeof(real) * j->n);
    return;
  }
  const blasint k = s / 2, j0 = k * j->nb, b = width_of(j, k), t0 = j0 + b;
  if (s % 2) {
    const blasint c0 = min_of(t0 + j->nb, j->n) + i * j->w;
    update(j, k, c0, min_of(j->w, j->n - c0));
    return;
  }
  /* rows r0..r0+rows of L21 = A21 inv(L11)^T, 2 w at a time (fewer, larger products than w) */
  const blasint r0 = t0 + i * 2 * j->w, rows = min_of(2 * j->w, j->n - r0);
  const real one = 1, zero = 0;
  j->gemm("N", "T", &rows, &b, &b, &one, at(j, r0, j0), &j->ld, j->inv + (k % 2) * j->nb * j->nb, &b, &zero, tmp,
          &rows, 1, 1);
  for (blasint c = 0; c < b; ++c) memcpy(at(j, r0, j0 + c), tmp + c * rows, sizeof(real) * rows);
}

/* factor panel k's diagonal block and invert it into inv[k % 2]; 1 when it is not positive definite */
static int factor_diagonal(chol_t *j, blasint k) {
  const blasint j0 = k * j->nb, b = width_of(j, k);
  blasint info = 0;
  j->potrf("L", &b, at(j, j0, j0), &j->ld, &info, 1);
  if (info > 0) {
    j->info = j0 + info;
    return 1;
  }
  real *inv = j->inv + (k % 2) * j->nb * j->nb;
  for (blasint c = 0; c < b; ++c)
    for (blasint r = 0; r < b; ++r) inv[r + c * b] = r >= c ? *at(j, j0 + r, j0 + c) : 0;
  j->trtri("L", "N", &b, inv, &b, &info, 1, 1);
  return 0;
}

/* Cholesky of the lower triangle of the n x n column-major a (leading dimension ld) on
   `threads` threads, OpenBLAS set to one thread by the caller; src: NULL, or the matrix to
   factor, copied into a meanwhile (leading dimension lds). Returns LAPACK's info, or -1 when
   the workspace cannot be allocated. */
blasint nvm_lookahead_potrf(blasint n, real *a, blasint ld, const real *src, blasint lds, blasint nb, blasint w,
                            int threads, const void *potrf, const void *trtri, const void *gemm, const void *syrk) {
  chol_t j = {(potrf_t)potrf, (trtri_t)trtri, (gemm_t)gemm, (syrk_t)syrk, n, ld, nb, w, a, src, lds};
  steps_t s = {0, 0, 0, &j, chol_count, chol_run};
  if (n <= 0) return 0;
  const int helpers = threads < 1 ? 0 : threads - 1 < 63 ? threads - 1 : 63;
  const size_t per_thread = (size_t)nb * 2 * w;  /* a chunk of L21 */
  real *tmp;
  if (posix_memalign((void **)&j.inv, 64, sizeof(real) * (2 * (size_t)nb * nb + (helpers + 1) * per_thread)))
    return -1;
  tmp = j.inv + 2 * (size_t)nb * nb;
  const blasint panels = (n + nb - 1) / nb;
  if (src)
    for (blasint c = 0; c < width_of(&j, 0); ++c) memcpy(at(&j, 0, c), src + c * lds, sizeof(real) * n);
  steps_publish(&s, -1);  /* the helpers copy the other columns while the first diagonal block is factored */
  pthread_t ids[63];
  steps_helper_t hs[63];
  const int started = steps_start(&s, ids, hs, helpers, tmp + per_thread, per_thread);
  int failed = factor_diagonal(&j, 0);
  steps_finish(&s, -1, tmp);
  for (blasint k = 0; k < panels && !failed; ++k) {
    steps_publish(&s, 2 * k);
    steps_finish(&s, 2 * k, tmp);
    steps_publish(&s, 2 * k + 1);
    const blasint t0 = k * nb + width_of(&j, k);
    if (t0 < n) {  /* the look-ahead: panel k + 1's columns brought up to date, its diagonal block factored */
      update(&j, k, t0, min_of(nb, n - t0));
      failed = factor_diagonal(&j, k + 1);
    }
    steps_finish(&s, 2 * k + 1, tmp);
  }
  steps_stop(&s, ids, started);
  free(j.inv);
  return j.info;
}
"""


def lookahead_available(dtype: Any) -> bool:
    """Whether the look-ahead Cholesky runs here for ``dtype`` (:func:`._lookahead.drivers_available`)."""
    return drivers_available(dtype, *_ROUTINES)


def lookahead_first(n: int, dtype: Any) -> bool:
    """Whether an ``n x n`` factorization of ``dtype`` should try the look-ahead Cholesky first
    (real orders :data:`FIRST_FROM` to :data:`UP_TO`, OpenBLAS on few threads)."""
    return FIRST_FROM <= n <= UP_TO and lookahead_available(dtype) and few_threads()


def lookahead_potrf(dtype: Any) -> Callable[..., tuple[np.ndarray, int]]:
    """An f2py-compatible ``potrf(a, lower=0, clean=1, overwrite_a=0, threads=None) -> (c, info)``
    for ``dtype`` that factors the lower triangle of square matrices with look-ahead on
    ``threads`` threads (default: OpenBLAS's count); the upper triangle, other shapes, and calls
    made while another thread of the process runs go to OpenBLAS's ``?potrf``. Check
    :func:`lookahead_available` first.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[4.0, 2.0], [2.0, 5.0]], order="F")
    >>> if lookahead_available(a.dtype):
    ...     c, info = lookahead_potrf(a.dtype)(a, lower=1)
    ... else:
    ...     import scipy.linalg
    ...     c, info = scipy.linalg.cholesky(a, lower=True), 0
    >>> c.tolist(), info
    ([[2.0, 0.0], [1.0, 2.0]], 0)
    """
    return _lookahead_potrf(dtype_name(dtype))


@functools.lru_cache(maxsize=None)
def _lookahead_potrf(dtype_name: str) -> Callable[..., tuple[np.ndarray, int]]:
    dtype = np.dtype(dtype_name)
    kernel, integer, addresses = compile_driver(dtype_name, _SOURCE, "nvm_lookahead_potrf", _ROUTINES)
    pointer = ctypes.c_void_p
    kernel.argtypes = [integer, pointer, integer, pointer, integer, integer, integer, ctypes.c_int,
                       pointer, pointer, pointer, pointer]
    openblas = routines(dtype, "potrf")[0]

    def potrf(a: np.ndarray, lower: int = 0, clean: int = 1, overwrite_a: int = 0,
              threads: int | None = None) -> tuple[np.ndarray, int]:
        n = a.shape[0]
        if not lower or a.ndim != 2 or a.shape[1] != n:
            return openblas(a, lower, clean, overwrite_a)
        c, info = run_driver(lambda out, source, lds, count: kernel(n, out.ctypes.data, max(1, n), source, lds, NB, W,
                                                                    count, *addresses),
                             a, dtype, bool(overwrite_a), threads)
        if info is None:
            return openblas(c, lower, clean, overwrite_a if c is a else 1)
        if clean and info == 0:
            _zero_other_triangle(c, True)
        return c, info

    return potrf


def potrf_order(n: int, dtype: Any) -> list[str | None]:
    """The ``?potrf`` algorithms on NumPy's OpenBLAS that run here for ``n x n`` matrices of
    ``dtype``, the first choice first: ``"lookahead"`` and ``None`` (OpenBLAS's own).

    Examples
    --------
    >>> potrf_order(64, "complex128")
    [None]
    """
    if not lookahead_available(dtype):
        return [None]
    return ["lookahead", None] if lookahead_first(n, dtype) else [None, "lookahead"]


def potrf_of(algorithm: str | None, dtype: Any) -> Callable[..., tuple[np.ndarray, int]]:
    """The f2py-compatible ``potrf`` of one of :func:`potrf_order`'s algorithms."""
    return lookahead_potrf(dtype) if algorithm == "lookahead" else routines(dtype, "potrf")[0]
