"""Blocked LU with look-ahead on NumPy's OpenBLAS: the next panel is factored while the other
threads update the rest of the matrix.

LU's panels are narrow and tall: their factorization is mostly latency (pivot searches, row
interchanges, small products), and OpenBLAS's ``?getrf`` runs every panel on all threads and
makes the others wait for it (a tall panel factors faster on one thread than on two). This
driver, generated C compiled once by :mod:`nvmathpy.kernels.cpu_jit`,
runs threads of its own and has OpenBLAS run every call on the calling thread:

- step ``k`` of :data:`NB` columns: the caller brings panel ``k + 1``'s columns up to date and
  factors that panel (``?getrf`` on one thread) and inverts its unit lower triangle
  (``?trtri``), while the other threads bring the columns right of it up to date in
  :data:`W`-wide chunks; whoever is done first takes more chunks (they are claimed from a
  shared counter, so a thread on a busy core takes fewer);
- a chunk's update is the step's row interchanges (a compiled loop, faster than
  ``?laswp``), ``U12 = inv(L11) A12`` as a product (``?trsm`` with a 128-column triangle runs
  well below the speed of a product of the same size) and ``A22 -= L21 U12``;
- the columns left of a panel take the later steps' interchanges at the end, a column at a
  time (each column's swaps in L1 at once, not a pass over the factored part per step); the
  copy of the input is spread over the threads while the caller factors the first panel; the
  helpers run off the caller's core (the scheduler would otherwise often start them beside it).

The pivots are LAPACK's (the largest magnitude in the column, the first on ties), so the
factors and pivots are ``?getrf``'s up to rounding. ``U12`` computed with the inverse of a unit
lower triangle whose entries are at most 1 in magnitude (partial pivoting bounds them) matches
the triangular solve in practice; the tests compare both with LAPACK's.

The threads and OpenBLAS's thread count are :mod:`._lookahead`'s: a call made while another
thread of the process runs (OpenBLAS's worker still spinning after a call, another driver)
factors recursively instead (:mod:`._recursive_lu`), whose OpenBLAS calls use that worker,
which makes the recursion the faster of the two right after a NumPy product.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ._lookahead import compile_driver, drivers_available, few_threads, run_driver
from ._numpy_lapack import dtype_name, routines
from ._recursive_lu import recursive_available, recursive_first, recursive_getrf

__all__ = ["FIRST_FROM", "NB", "UP_TO", "W", "getrf_of", "getrf_order", "lookahead_available", "lookahead_first",
           "lookahead_getrf"]

#: Columns per step (panel width): widths around this one time alike; 128 is the recursive
#: LU's panel width too.
NB = 128
#: Columns per chunk of a step's update (wider chunks time alike).
W = 128
#: The look-ahead LU is the first choice from these orders (float32: where the recursive LU
#: stops being first) up to :data:`UP_TO`, on at most :data:`._lookahead.MAX_THREADS` threads:
#: from there on it beats both the recursion and OpenBLAS's ``?getrf``, below it a step's work
#: is too little to share (``benchmarks/bench_linalg.py --only engines`` times every LU; for
#: float32 the two orders come close at the boundary, so the recursion stays first there).
FIRST_FROM = {"float64": 768, "float32": 1025}
UP_TO = 2048
_ROUTINES = ("getrf", "trtri", "gemm")

_SOURCE = r"""
#include <stdlib.h>
#include <string.h>

typedef void (*getrf_t)(const blasint *, const blasint *, real *, const blasint *, blasint *, blasint *);
typedef void (*trtri_t)(const char *, const char *, const blasint *, real *, const blasint *, blasint *, size_t, size_t);
typedef void (*gemm_t)(const char *, const char *, const blasint *, const blasint *, const blasint *, const real *,
                       const real *, const blasint *, const real *, const blasint *, const real *, real *,
                       const blasint *, size_t, size_t);

typedef struct {
  getrf_t getrf; trtri_t trtri; gemm_t gemm;
  blasint n, ld, nb, w;
  real *a;          /* column-major, n x n, leading dimension ld */
  const real *src;  /* NULL, or the matrix to copy into a first (column-major, leading dimension lds) */
  blasint lds;
  blasint *ipiv;    /* 1-based, as LAPACK's */
  real *inv;        /* two nb x nb buffers: the inverse of step k's unit lower triangle is in inv[k % 2] */
  blasint info;
} lu_t;

static inline real *at(const lu_t *j, blasint i, blasint c) { return j->a + i + c * j->ld; }
static inline blasint min_of(blasint x, blasint y) { return x < y ? x : y; }
static inline blasint width_of(const lu_t *j, blasint k) { return min_of(j->nb, j->n - k * j->nb); }
static inline blasint steps_of(const lu_t *j) { return (j->n + j->nb - 1) / j->nb; }

/* step k's chunks: step -1 copies the columns right of panel 0 (the caller copies panel 0's);
   step k updates the columns right of the look-ahead panel (from column *from); the last step
   (k == steps) has only chunks left of the last panel, which take all the interchanges made
   right of their own panel then (a column at a time, each in L1 once) */
static void chunks_of(const lu_t *j, int64_t k, blasint *right, blasint *left, blasint *from) {
  if (k < 0) {
    *from = width_of(j, 0), *right = j->src ? (j->n - *from + j->w - 1) / j->w : 0, *left = 0;
    return;
  }
  if (k == steps_of(j)) {
    *from = 0, *right = 0, *left = ((k - 1) * j->nb + j->w - 1) / j->w;
    return;
  }
  const blasint la = min_of(k * j->nb + width_of(j, k) + j->nb, j->n);
  *from = la, *right = (j->n - la + j->w - 1) / j->w, *left = 0;
}

static inline void swap_rows(real *col, const blasint *ipiv, blasint k1, blasint k2) {
  for (blasint i = k1; i < k2; ++i) {
    const blasint p = ipiv[i] - 1;
    if (p != i) { const real t = col[i]; col[i] = col[p]; col[p] = t; }
  }
}

/* step k on columns c0..c0+cols: its interchanges (a column at a time, in order),
   U12 = inv(L11) A12, A22 -= L21 U12 */
static void update(const lu_t *j, blasint k, blasint c0, blasint cols, real *tmp) {
  const blasint j0 = k * j->nb, b = width_of(j, k), t0 = j0 + b, rows = j->n - t0;
  const real one = 1, zero = 0, minus = -1;
  for (blasint c = c0; c < c0 + cols; ++c) swap_rows(at(j, 0, c), j->ipiv, j0, t0);
  j->gemm("N", "N", &b, &cols, &b, &one, j->inv + (k % 2) * j->nb * j->nb, &b, at(j, j0, c0), &j->ld, &zero,
          tmp, &b, 1, 1);
  if (rows > 0)
    j->gemm("N", "N", &rows, &cols, &b, &minus, at(j, t0, j0), &j->ld, tmp, &b, &one, at(j, t0, c0), &j->ld, 1, 1);
  for (blasint c = 0; c < cols; ++c) memcpy(at(j, j0, c0 + c), tmp + c * b, sizeof(real) * b);
}

/* factor panel k (its columns only) and invert its unit lower triangle into inv[k % 2] */
static void factor_panel(lu_t *j, blasint k) {
  const blasint j0 = k * j->nb, b = width_of(j, k), m = j->n - j0;
  blasint info = 0;
  j->getrf(&m, &b, at(j, j0, j0), &j->ld, j->ipiv + j0, &info);
  if (info > 0 && !j->info) j->info = j0 + info;
  for (blasint i = 0; i < b; ++i) j->ipiv[j0 + i] += j0;
  real *inv = j->inv + (k % 2) * j->nb * j->nb;
  for (blasint c = 0; c < b; ++c)
    for (blasint r = 0; r < b; ++r) inv[r + c * b] = r > c ? *at(j, j0 + r, j0 + c) : r == c;
  j->trtri("L", "U", &b, inv, &b, &info, 1, 1);
}

static void copy_columns(const lu_t *j, blasint c0, blasint cols) {
  for (blasint c = c0; c < c0 + cols; ++c) memcpy(at(j, 0, c), j->src + c * j->lds, sizeof(real) * j->n);
}

static int64_t lu_count(const void *job, int64_t k) {
  blasint right, left, from;
  chunks_of(job, k, &right, &left, &from);
  return right + left;
}

static void lu_run(void *job, int64_t k, int64_t i, real *tmp) {
  lu_t *j = job;
  blasint right, left, from;
  chunks_of(j, k, &right, &left, &from);
  const blasint c0 = i < right ? from + i * j->w : (i - right) * j->w;
  if (i >= right) {  /* the last step: every later interchange on columns left of the last panel */
    for (blasint c = c0; c < min_of(c0 + j->w, (k - 1) * j->nb); ++c)
      swap_rows(at(j, 0, c), j->ipiv, (c / j->nb + 1) * j->nb, j->n);
  } else if (k < 0) {
    copy_columns(j, c0, min_of(j->w, j->n - c0));
  } else {
    update(j, k, c0, min_of(j->w, j->n - c0), tmp);
  }
}

/* LU with partial pivoting of the n x n column-major a (leading dimension ld) on `threads`
   threads, OpenBLAS set to one thread by the caller; src: NULL, or the matrix to factor, copied
   into a meanwhile (leading dimension lds). ipiv: 1-based, as LAPACK's. Returns LAPACK's info
   (> 0: the first zero pivot), or -1 when the workspace cannot be allocated. */
blasint nvm_lookahead_getrf(blasint n, real *a, blasint ld, const real *src, blasint lds, blasint *ipiv, blasint nb,
                            blasint w, int threads, const void *getrf, const void *trtri, const void *gemm) {
  lu_t j = {(getrf_t)getrf, (trtri_t)trtri, (gemm_t)gemm, n, ld, nb, w, a, src, lds, ipiv};
  steps_t s = {0, 0, 0, &j, lu_count, lu_run};
  if (n <= 0) return 0;
  const int helpers = threads < 1 ? 0 : threads - 1 < 63 ? threads - 1 : 63;
  const size_t per_thread = (size_t)nb * (w > nb ? w : nb);  /* a chunk's U12, or the look-ahead panel's */
  real *tmp;
  if (posix_memalign((void **)&j.inv, 64, sizeof(real) * (2 * (size_t)nb * nb + (helpers + 1) * per_thread)))
    return -1;
  tmp = j.inv + 2 * (size_t)nb * nb;
  const blasint steps = steps_of(&j);
  if (src) copy_columns(&j, 0, width_of(&j, 0));
  steps_publish(&s, -1);  /* the helpers copy the other columns while panel 0 is factored */
  pthread_t ids[63];
  steps_helper_t hs[63];
  const int started = steps_start(&s, ids, hs, helpers, tmp + per_thread, per_thread);
  for (blasint k = -1; k <= steps; ++k) {
    if (k >= 0) steps_publish(&s, k);
    const blasint t0 = k * nb + width_of(&j, k);
    if (k < 0) {
      factor_panel(&j, 0);
    } else if (k < steps && t0 < n) {  /* the look-ahead: panel k + 1, brought up to date and factored here */
      blasint right, left, from;
      chunks_of(&j, k, &right, &left, &from);
      update(&j, k, t0, from - t0, tmp);
      factor_panel(&j, k + 1);
    }
    steps_finish(&s, k, tmp);
  }
  steps_stop(&s, ids, started);
  free(j.inv);
  return j.info;
}
"""


def lookahead_available(dtype: Any) -> bool:
    """Whether the look-ahead LU runs here for ``dtype`` (:func:`._lookahead.drivers_available`)."""
    return drivers_available(dtype, *_ROUTINES)


def lookahead_first(n: int, dtype: Any) -> bool:
    """Whether an ``n x n`` factorization of ``dtype`` should try the look-ahead LU first
    (orders :data:`FIRST_FROM` to :data:`UP_TO`, OpenBLAS on few threads: :func:`._lookahead.few_threads`)."""
    name = dtype_name(dtype)
    return name in FIRST_FROM and FIRST_FROM[name] <= n <= UP_TO and lookahead_available(dtype) and few_threads()


def lookahead_getrf(dtype: Any) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """An f2py-compatible ``getrf(a, overwrite_a=0, threads=None) -> (lu, piv, info)`` for
    ``dtype`` that factors square matrices with look-ahead (``piv`` 0-based int32, ``info`` the
    first zero pivot, 1-based, as SciPy's wrapper returns them) on ``threads`` threads (default:
    as many as OpenBLAS's thread count, which threadpoolctl limits); other shapes, and a call
    made while another thread of the process runs (another look-ahead factorization, or
    OpenBLAS's worker still spinning after a call, whose core it would share),
    factor recursively, whose OpenBLAS calls put that worker to use. Check
    :func:`lookahead_available` first.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]], order="F")
    >>> if lookahead_available(a.dtype):
    ...     lu, piv, info = lookahead_getrf(a.dtype)(a)
    ... else:
    ...     from scipy.linalg import lu_factor
    ...     (lu, piv), info = lu_factor(a), 0
    >>> piv.tolist(), info, np.round(lu, 12).tolist()
    ([1, 1], 0, [[3.0, 4.0], [0.333333333333, 0.666666666667]])
    """
    return _lookahead_getrf(dtype_name(dtype))


@functools.lru_cache(maxsize=None)
def _lookahead_getrf(dtype_name: str) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    dtype = np.dtype(dtype_name)
    kernel, integer, routines = compile_driver(dtype_name, _SOURCE, "nvm_lookahead_getrf", _ROUTINES)
    pointer = ctypes.c_void_p
    kernel.argtypes = [integer, pointer, integer, pointer, integer, pointer, integer, integer, ctypes.c_int,
                       pointer, pointer, pointer]
    index = np.dtype(np.int64 if integer is ctypes.c_int64 else np.int32)
    recursive = recursive_getrf(dtype)

    def factor(a: np.ndarray, overwrite_a: int = 0, threads: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        n = a.shape[0]
        if a.ndim != 2 or a.shape[1] != n:
            return recursive(a, overwrite_a)
        ipiv = np.empty(n, index)
        lu, info = run_driver(lambda out, source, lds, count: kernel(n, out.ctypes.data, max(1, n), source, lds,
                                                                     ipiv.ctypes.data, NB, W, count, *routines),
                              a, dtype, bool(overwrite_a), threads)
        if info is None:
            return recursive(lu, overwrite_a if lu is a else 1)
        return lu, (ipiv - 1).astype(np.int32), info

    return factor


def getrf_order(n: int, dtype: Any) -> list[str | None]:
    """The ``?getrf`` algorithms on NumPy's OpenBLAS that run here for an ``n x n`` matrix of
    ``dtype``, the first choice first: ``"lookahead"``, ``"recursive"`` (:mod:`._recursive_lu`)
    and ``None`` (OpenBLAS's own ``?getrf``). Autotuning times them all.

    Examples
    --------
    >>> getrf_order(64, "complex128")  # complex LU: OpenBLAS's first, the recursion for autotuning
    [None, 'recursive']
    """
    order: list[str | None] = [None]
    if recursive_available(dtype):
        order.insert(0 if recursive_first(n, dtype) else 1, "recursive")
    if lookahead_available(dtype):
        order.insert(0 if lookahead_first(n, dtype) else len(order), "lookahead")
    return order


def getrf_of(algorithm: str | None, dtype: Any) -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
    """The f2py-compatible ``getrf`` of one of :func:`getrf_order`'s algorithms."""
    if algorithm == "lookahead":
        return lookahead_getrf(dtype)
    if algorithm == "recursive":
        return recursive_getrf(dtype)
    return routines(dtype, "getrf")[0]
