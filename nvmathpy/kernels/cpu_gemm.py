"""A compiled host GEMM whose epilogue runs on each tile before it is stored: ``act(a @ b + bias)``.

OpenBLAS's interface ends at the product: an epilogue after ``?gemm`` is another pass over the
result, and on a result larger than the caches that pass is held by memory bandwidth, a
noticeable share of the product's own time. This
kernel adds the bias and applies the ReLU or the tanh-approximated GELU (both in registers, the
GELU's exponential as vector arithmetic) to each ``MR x NR`` tile of the result as it is stored
for the last time, so the result is written once.

Structure (the loops of BLIS, with the roles of the operands chosen for a row-major result):

- ``B`` is packed a block at a time (up to :data:`NC` columns and :data:`PACKED_BYTES`, a
  1024 x 1024 float32 ``B`` at once) into ``NR``-wide column panels;
- the result's ``MR``-row strips are then computed one by one: a strip's ``MR x KC`` slice
  of ``A`` is packed into a small buffer that stays in L1 (reading ``A``'s rows directly puts
  rows a page apart into the same cache set), the micro-kernel accumulates each ``MR x NR``
  tile (``MR`` rows of two vectors) over ``KC`` and, on the last ``KC`` step, adds the bias,
  applies the activation and stores; the strip's rows stay in L2 over the block's depth;
- the threads claim panels to pack and strips to compute from shared counters rather than
  being given shares: one that starts late or runs on a busy core takes less, and none waits
  for it (only for the packing to be complete before computing, and for the strips to be
  done before a block is packed again).

The vectors are GCC vector extensions, so the same source compiles for any x86-64 (or other)
target; ``MR`` and the vector width follow the instruction set (12 rows of two 16-float vectors
with AVX-512, 6 rows of two 8-float vectors with AVX2). The threads are POSIX threads made per
call (a cost that only large products hide: the kernel is offered for those only), the
helpers kept off the caller's core.

On large float32 products a fused epilogue costs next to nothing over the bare product
(``benchmarks/bench_matmul.py`` compares it with ``numpy.matmul``). Right after an OpenBLAS call
it is slower: OpenBLAS's worker thread still spins on another core, which the kernel's second
thread then shares (:func:`others_running` tells; :mod:`nvmathpy.linalg.gemm.cpu._engine` falls
back to OpenBLAS then).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Any, Callable

import numpy as np

from . import cpu_jit
from .emit_c import C_PRELUDE, C_VECTOR_EXP

__all__ = ["fused_gemm", "fused_gemm_available", "others_running", "process_id", "running_among", "running_threads"]

#: The activations the kernel applies (after the bias), in the C source's order.
ACTIVATIONS = (None, "relu", "gelu")
#: Depth of a packed block (deeper blocks time alike; shallower ones are slower).
KC = 512
#: Width of a packed block of ``B`` (columns).
NC = 1024
#: Most bytes of ``B`` packed at a time (its depth then is a whole number of ``KC`` steps):
#: a 1024 x 1024 float32 ``B`` is packed at once, which lets every strip of the result stay
#: in L2 over the whole depth and leaves one wait between packing and computing.
PACKED_BYTES = 8 << 20

_TYPES = {np.dtype(np.float32): ("float", "int32_t"), np.dtype(np.float64): ("double", "int64_t")}

_TYPES_SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef REAL real;
typedef real vec __attribute__((vector_size(VBYTES), may_alias));
typedef real uvec __attribute__((vector_size(VBYTES), aligned(sizeof(real)), may_alias));
typedef INTEGER ivec __attribute__((vector_size(VBYTES)));
#define VL (VBYTES / (int)sizeof(real))
#define NR (2 * VL)
"""

_KERNEL_SOURCE = r"""
typedef struct {
  int64_t m, n, k;
  const real *a; int64_t a_rs, a_cs;
  const real *b; int64_t b_rs, b_cs;
  real *d; int64_t ldd;
  const real *bias; int act;  /* ACT_NONE, ACT_RELU or ACT_GELU */
  real *bp;        /* the packed block of B: KB x NC */
  int64_t kb;      /* its depth */
  /* work is claimed from counters, never assigned: a thread that starts late or runs on a busy
     core (OpenBLAS's workers spin for a while after each call) takes less, none waits for it */
  int64_t next_panel, packed, next_strip, done;
} job_t;

/* claim the next of the tickets below end, or -1 */
static int64_t claim(int64_t *next, int64_t end) {
  int64_t u = __atomic_load_n(next, __ATOMIC_RELAXED);
  while (u < end)
    if (__atomic_compare_exchange_n(next, &u, u + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return u;
  return -1;
}

/* wait until *count reaches target: spin (the others are microseconds away), yielding now and then */
static void wait_for(int64_t *count, int64_t target) {
  for (unsigned spins = 1; __atomic_load_n(count, __ATOMIC_ACQUIRE) < target; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (spins % 1024 == 0) sched_yield();
  }
}

enum { ACT_NONE, ACT_RELU, ACT_GELU };

/* the tanh-approximated GELU, 0.5 v (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3), written as
   v / (1 + exp(-2u)) (the same function): one exponential, no cancellation in 1 + tanh(u) */
static inline real gelu(real v) {
  const real u = (real)0.7978845608028654 * (v + (real)0.044715 * v * v * v);
  return v / (1 + EXP(-2 * u));
}

/* gelu() on a whole vector, in registers (nvm_vexp: emit_c's exponential on vectors) */
static inline vec vgelu(vec v) {
  const vec u = (real)0.7978845608028654 * (v + (real)0.044715 * v * v * v);
  return v / (1 + nvm_vexp((real)-2 * u));
}

static inline real activate(real v, int act) {
  if (act == ACT_RELU) return v < 0 ? 0 : v;  /* NaN stays NaN, as numpy.maximum(v, 0) */
  return act == ACT_GELU ? gelu(v) : v;
}

/* panel q of B[pc:pc+kbd, jc:jc+nc]: kbd x NR, k-major, zero beyond column nc */
static void pack_b(const job_t *j, int64_t pc, int64_t kbd, int64_t jc, int64_t nc, int64_t q) {
  real *dst = j->bp + q * NR * kbd;
  const int64_t c0 = jc + q * NR, w = nc - q * NR < NR ? nc - q * NR : NR;
  if (w < NR) memset(dst, 0, sizeof(real) * NR * kbd);
  if (j->b_cs == 1) {
    for (int64_t p = 0; p < kbd; ++p) memcpy(dst + p * NR, j->b + (pc + p) * j->b_rs + c0, sizeof(real) * w);
  } else {
    for (int64_t c = 0; c < w; ++c) {
      const real *src = j->b + pc * j->b_rs + (c0 + c) * j->b_cs;
      for (int64_t p = 0; p < kbd; ++p) dst[p * NR + c] = src[p * j->b_rs];
    }
  }
}

/* rows i0..i0+mr of A[:, pc:pc+kc] into ap, k-major (MR per k; rows beyond mr repeat row 0) */
static void pack_a(const job_t *j, int64_t i0, int64_t mr, int64_t pc, int64_t kc, real *ap) {
  const real *src = j->a + i0 * j->a_rs + pc * j->a_cs;
  if (j->a_cs == 1) {
    for (int64_t r = 0; r < MR; ++r) {
      const real *row = src + (r < mr ? r : 0) * j->a_rs;
      for (int64_t p = 0; p < kc; ++p) ap[p * MR + r] = row[p];
    }
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t r = 0; r < MR; ++r) ap[p * MR + r] = src[p * j->a_cs + (r < mr ? r : 0) * j->a_rs];
  }
}

/* d[0:mr, 0:nr] (+)= ap^T bp over kc (bp's rows NR apart); on the last block the bias and activation too */
static inline void tile(const job_t *j, int64_t kc, const real *ap, const real *bp, real *d, int64_t col,
                        int first, int last, int64_t mr, int64_t nr) {
  vec acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = (vec){0};
  for (int64_t p = 0; p < kc; ++p) {
    const vec b0 = *(const vec *)(bp + p * NR), b1 = *(const vec *)(bp + p * NR + VL);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const vec ar = ap[p * MR + r] - (vec){0};  /* a broadcast (x - 0 is x, also for -0) */
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  const int64_t ldd = j->ldd;
  if (mr == MR && nr == NR) {
    vec bias0 = {0}, bias1 = {0};
    if (last && j->bias) { bias0 = *(const uvec *)(j->bias + col); bias1 = *(const uvec *)(j->bias + col + VL); }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      uvec *row = (uvec *)(d + r * ldd);
      vec v0 = acc[r][0], v1 = acc[r][1];
      if (!first) { v0 += row[0]; v1 += row[1]; }
      if (last) {
        v0 += bias0; v1 += bias1;
        if (j->act == ACT_RELU) { v0 = (vec)((ivec)v0 & ~(ivec)(v0 < 0)); v1 = (vec)((ivec)v1 & ~(ivec)(v1 < 0)); }
        else if (j->act == ACT_GELU) { v0 = vgelu(v0); v1 = vgelu(v1); }
      }
      row[0] = v0; row[1] = v1;
    }
    return;
  }
  /* edge tiles */
  static const real no_bias[NR];
  const real *bias = last && j->bias ? j->bias + col : no_bias;
  const int act = last ? j->act : ACT_NONE;
  real part[MR][NR] __attribute__((aligned(64)));
  for (int r = 0; r < MR; ++r) { *(vec *)&part[r][0] = acc[r][0]; *(vec *)&part[r][VL] = acc[r][1]; }
  for (int64_t r = 0; r < mr; ++r) {
    real *row = d + r * ldd;
    if (first) {
#pragma omp simd
      for (int64_t c = 0; c < nr; ++c) row[c] = activate(part[r][c] + bias[c], act);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nr; ++c) row[c] = activate(part[r][c] + row[c] + bias[c], act);
    }
  }
}

/* every thread runs this: blocks of B one after another; in each, claim panels to pack, wait until
   all are packed, claim MR-row strips to compute (a strip's rows of the result stay in L2 over the
   block's depth), and wait until all are done before the block's buffer is packed again */
static void *work(void *arg) {
  job_t *j = (job_t *)arg;
  real ap[KC * MR] __attribute__((aligned(64)));
  const int64_t strips = (j->m + MR - 1) / MR;
  int64_t panels_before = 0, strips_before = 0;
  for (int64_t jc = 0; jc < j->n; jc += NC) {
    const int64_t nc = j->n - jc < NC ? j->n - jc : NC, panels = (nc + NR - 1) / NR;
    for (int64_t pb = 0; pb < j->k; pb += j->kb) {
      const int64_t kbd = j->k - pb < j->kb ? j->k - pb : j->kb;
      for (int64_t q; (q = claim(&j->next_panel, panels_before + panels)) >= 0;) {
        pack_b(j, pb, kbd, jc, nc, q - panels_before);
        __atomic_add_fetch(&j->packed, 1, __ATOMIC_RELEASE);
      }
      panels_before += panels;
      wait_for(&j->packed, panels_before);
      for (int64_t s; (s = claim(&j->next_strip, strips_before + strips)) >= 0;) {
        const int64_t i0 = (s - strips_before) * MR, mr = j->m - i0 < MR ? j->m - i0 : MR;
        for (int64_t pc = 0; pc < kbd; pc += KC) {
          const int64_t kc = kbd - pc < KC ? kbd - pc : KC;
          const int first = pb + pc == 0, last = pb + pc + kc == j->k;
          pack_a(j, i0, mr, pb + pc, kc, ap);
          for (int64_t q = 0; q < panels; ++q) {
            const int64_t c0 = jc + q * NR, nr = nc - q * NR < NR ? nc - q * NR : NR;
            tile(j, kc, ap, j->bp + q * NR * kbd + pc * NR, j->d + i0 * j->ldd + c0, c0, first, last, mr, nr);
          }
        }
        __atomic_add_fetch(&j->done, 1, __ATOMIC_RELEASE);
      }
      strips_before += strips;
      wait_for(&j->done, strips_before);
    }
  }
  return 0;
}

/* the depth of a packed block of B: at most PACKED_BYTES, in whole KC steps */
static int64_t block_depth(int64_t k) {
  int64_t kb = (int64_t)(PACKED_BYTES / (sizeof(real) * (NC + NR))) / KC * KC;
  if (kb < KC) kb = KC;
  return kb > k ? k : kb;
}

/* elements of the workspace nvm_fused_gemm needs for n columns and depth k */
int64_t nvm_fused_workspace(int64_t n, int64_t k) {
  const int64_t wide = n < NC ? n : NC;
  return k <= 0 || n <= 0 ? 0 : block_depth(k) * ((wide + NR - 1) / NR * NR);
}

/* d (m x n, rows ldd apart, unit column stride) = act(a @ b + bias?); strides in elements.
   workspace: nvm_fused_workspace(n, k) elements, 64-byte aligned, or NULL to allocate them.
   Returns 0, or -1 when the workspace cannot be allocated. */
int nvm_fused_gemm(int64_t m, int64_t n, int64_t k, const real *a, int64_t a_rs, int64_t a_cs,
                   const real *b, int64_t b_rs, int64_t b_cs, real *d, int64_t ldd,
                   const real *bias, int act, int threads, real *workspace) {
  job_t j = {m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, d, ldd, bias, act, workspace, 0, 0, 0, 0, 0};
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) d[r * ldd + c] = activate(bias ? bias[c] : 0, act);
    return 0;
  }
  j.kb = block_depth(k);
  if (!workspace && posix_memalign((void **)&j.bp, 64, sizeof(real) * nvm_fused_workspace(n, k))) return -1;
  const int64_t strips = (m + MR - 1) / MR;
  int helpers = threads - 1 < 63 ? threads - 1 : 63;
  if (helpers > strips - 1) helpers = (int)(strips - 1);
  pthread_t ids[63];
  const int started = start_helpers(ids, helpers, work, &j, 0);
  work(&j);  /* with fewer helpers than asked (none could be made) the work is only shared less */
  for (int t = 0; t < started; ++t) pthread_join(ids[t], 0);
  if (!workspace) free(j.bp);
  return 0;
}
"""


def fused_gemm_available(dtype: Any) -> bool:
    """Whether :func:`fused_gemm` can run ``dtype`` here (float32/float64, a C compiler)."""
    return np.dtype(dtype) in _TYPES and cpu_jit.available()


def fused_gemm(dtype: Any) -> Callable[..., None]:
    """``fn(a, b, d, bias=None, activation=None, threads=1, workspace=None)``:
    ``d = activation(a @ b + bias)`` for 2-D ``a`` (m x k) and ``b`` (k x n) of ``dtype`` with
    element strides (any order), ``d`` an ``(m, n)`` array of ``dtype`` whose rows are
    contiguous, ``bias`` a contiguous ``(n,)`` array of ``dtype`` or ``None``; ``activation``
    one of :data:`ACTIVATIONS`: ``"relu"`` as ``numpy.maximum(x, 0)`` (NaN stays NaN),
    ``"gelu"`` the tanh approximation (as cuBLASLt's).
    ``workspace`` (from ``fn.workspace(n, k)``, kept by the caller for its calls) holds the
    packed blocks of ``b``; without it each call allocates its own.

    Nothing is checked per call: the caller fixed the layouts when it planned. Check
    :func:`fused_gemm_available` first.

    Raises
    ------
    MissingDependencyError
        If the kernel cannot be compiled here.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    >>> d = np.empty((2, 2))
    >>> if fused_gemm_available(d.dtype):
    ...     fused_gemm(d.dtype)(a, b, d, bias=np.array([-4.0, 1.0]), activation="relu")
    ... else:
    ...     d[...] = np.maximum(a @ b + np.array([-4.0, 1.0]), 0)
    >>> d.tolist()
    [[0.0, 4.0], [8.0, 13.0]]
    """
    return _compiled(np.dtype(dtype).name)


def others_running() -> int:
    """How many other threads of this process are running now (:func:`running_threads`).

    OpenBLAS's worker threads spin for a while after each call; a parallel kernel started
    meanwhile shares their cores.

    Examples
    --------
    >>> others_running() >= 0
    True
    """
    return len(running_threads())


#: Open descriptors of this process's threads' ``/proc`` stat files by thread id, and the
#: process they were opened in (a forked child's threads are others): one read a look.
_STAT_FILES: dict[str, int] = {}
_STAT_PID = [0]
_STAT_LOCK = threading.Lock()
#: This process's id, kept up to date in a forked child (``os.getpid()`` is a system call, and
#: a look at the free cores asked it several times).
_PID = [os.getpid()]
if hasattr(os, "register_at_fork"):  # (POSIX: elsewhere no process forks)
    os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def process_id() -> int:
    """This process's id, without a system call.

    Examples
    --------
    >>> process_id() == os.getpid()
    True
    """
    return _PID[0]


def running_threads() -> frozenset[str]:
    """The ids of this process's threads other than the caller that are running now (state
    ``R`` in ``/proc``; none where that cannot be read); one read of a small file per thread,
    from descriptors kept open while the thread lives.

    Examples
    --------
    >>> str(threading.get_native_id()) in running_threads()
    False
    """
    try:
        names = os.listdir("/proc/self/task")
    except OSError:
        return frozenset()
    me = str(threading.get_native_id())
    running = []
    with _STAT_LOCK:
        files = _STAT_FILES
        if _STAT_PID[0] != _PID[0]:
            _close_stat_files(list(files))
            _STAT_PID[0] = _PID[0]
        for name in names:
            if name != me and _state(name) == b"R":
                running.append(name)
        if len(files) > len(names):
            _close_stat_files(list(files.keys() - set(names)))
    return frozenset(running)


def running_among(names: frozenset[str]) -> frozenset[str]:
    """The threads of this process named in ``names`` that are running now (one read of a small
    file per thread: cheaper than :func:`running_threads` where a few threads matter).

    Examples
    --------
    >>> me = str(threading.get_native_id())
    >>> running_among(frozenset({me})) == {me}  # the caller runs
    True
    """
    with _STAT_LOCK:
        if _STAT_PID[0] != _PID[0]:
            _close_stat_files(list(_STAT_FILES))
            _STAT_PID[0] = _PID[0]
        return frozenset(name for name in names if _state(name) == b"R")


def _state(name: str) -> bytes:
    """The state letter of thread ``name`` of this process (``b""`` where it has ended), from its
    kept stat file (opened on first read; under ``_STAT_LOCK``)."""
    fd = _STAT_FILES.get(name)
    try:
        if fd is None:
            fd = _STAT_FILES[name] = os.open(f"/proc/self/task/{name}/stat", os.O_RDONLY)
        text = os.pread(fd, 512, 0)
    except OSError:  # the thread has just ended
        _close_stat_files([name])
        return b""
    end = text.rfind(b")")  # the thread's name, in parentheses, may hold anything
    if end < 0:  # nothing read: a thread gone (its id may come back with another)
        _close_stat_files([name])
        return b""
    return text[end + 2:end + 3]


def _close_stat_files(names: list[str]) -> None:
    for name in names:
        fd = _STAT_FILES.pop(name, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def source(dtype: Any) -> str:
    """The C source of the kernel for ``dtype`` (the instruction set picks ``MR`` and the width)."""
    real, integer = _TYPES[np.dtype(dtype)]
    defines = {"REAL": real, "INTEGER": integer, "EXP": "nvm_expf" if real == "float" else "nvm_exp",
               "IS_DOUBLE": int(real == "double"),
               "KC": KC, "NC": NC, "PACKED_BYTES": PACKED_BYTES}
    head = ("#define _GNU_SOURCE\n" + "".join(f"#define {name} {value}\n" for name, value in defines.items())
            + "#include <math.h>\n" + C_PRELUDE + cpu_jit.C_HELPER_THREADS)
    width = ("#if defined(__AVX512F__)\n#define VBYTES 64\n#define MR 12\n"
             "#elif defined(__AVX__)\n#define VBYTES 32\n#define MR 6\n"
             "#else\n#define VBYTES 16\n#define MR 6\n#endif\n")
    return head + width + _TYPES_SOURCE + C_VECTOR_EXP + _KERNEL_SOURCE


@functools.lru_cache(maxsize=None)
def _compiled(dtype_name: str) -> Callable[..., None]:
    dtype = np.dtype(dtype_name)
    library = cpu_jit.compile_c(source(dtype))
    kernel, size = library.nvm_fused_gemm, library.nvm_fused_workspace
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    kernel.restype = ctypes.c_int
    kernel.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, ptr, ctypes.c_int, ctypes.c_int, ptr]
    size.restype, size.argtypes = i64, [i64, i64]
    item = dtype.itemsize

    def run(a: np.ndarray, b: np.ndarray, d: np.ndarray, bias: np.ndarray | None = None,
            activation: str | None = None, threads: int = 1, workspace: np.ndarray | None = None) -> None:
        (m, k), n = a.shape, b.shape[1]
        status = kernel(m, n, k, a.ctypes.data, a.strides[0] // item, a.strides[1] // item,
                        b.ctypes.data, b.strides[0] // item, b.strides[1] // item, d.ctypes.data, d.strides[0] // item,
                        None if bias is None else bias.ctypes.data, ACTIVATIONS.index(activation), threads,
                        None if workspace is None else workspace.ctypes.data)
        if status:
            raise MemoryError("fused_gemm: could not allocate the packing workspace")

    def workspace(n: int, k: int) -> np.ndarray:
        """A workspace for ``n`` columns and depth ``k`` (64-byte aligned), to pass to every call."""
        count = int(size(n, k))
        raw = np.empty(count + 64 // item, dtype)
        skip = (-raw.ctypes.data % 64) // item
        return raw[skip:skip + count]

    run.workspace = workspace  # type: ignore[attr-defined]
    return run
