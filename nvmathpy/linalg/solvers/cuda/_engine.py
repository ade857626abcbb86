"""The CUDA engine of the solver plans: cuSOLVER's dense 64-bit API (and cuBLAS's batched LU).

One :class:`CusolverEngine` per (operation, device, package, stream). It lists candidates
(:func:`candidates`, best guess first; autotune times them with CUDA events) and prepares one
as a *route*: an object that owns the private device buffers of the routine (the matrix the
routine overwrites, pivots, ``info`` codes, tau, outputs), sizes its workspaces once with the
routine's ``_bufferSize`` query, takes them from the operand package's pool, and enqueues the
calls on the stream with no synchronisation.

Routes (labels are the candidates' labels):

========================  ============================================================
``getrf``                 ``cusolverDnXgetrf`` / ``Xgetrs`` per batch element
``getrfBatched``          ``cublas<t>getrfBatched`` / ``getrsBatched`` (one call per stack)
``potrf``                 ``cusolverDnXpotrf`` / ``Xpotrs`` per batch element
``potrfBatched``          ``cusolverDn<t>potrfBatched`` / ``potrsBatched`` (one call per stack)
``syevd``                 ``cusolverDnXsyevd`` per batch element
``syevBatched``           ``cusolverDnXsyevBatched`` (one call per stack, n <= 32)
``syevjBatched``          ``cusolverDn<t>syevjBatched`` / ``heevjBatched`` (Jacobi, one call, n <= 32)
``gesvd`` / ``gesvdp``    ``cusolverDnXgesvd`` / ``Xgesvdp`` per batch element
``gesvdj``                ``cusolverDn<t>gesvdj`` (Jacobi) per batch element
``geqrf``                 ``cusolverDnXgeqrf`` + ``<t>orgqr`` / ``<t>ungqr`` (legacy API)
``tiny``                  generated kernels for real stacks of ``n <= 32`` (:mod:`._tiny_route`)
========================  ============================================================

Every matrix is handed over column-major without a transposing copy where the problem allows:
a row-major ``A`` is the column-major ``A^T`` (see :mod:`._layout`). The private copy
a routine overwrites keeps the caller's order, so it is a plain device memcpy.

``info`` codes stay on the device after a call; :meth:`Route.failures` reads them (one
synchronisation) and returns the flat indices of the failed batch elements. The plans call it
only where results are read on the host or checking was asked for (see :mod:`._plans`).
"""

from __future__ import annotations

import ctypes
from typing import Any, Mapping

import numpy as np

from ....cuda import runtime
from ....cuda.bindings import cublas, cusolver
from ....cuda.ffi import new_handle
from ....errors import InvalidOptionError
from ....plan import Candidate, Engine, Problem
from .._dispatch import CUDA_ENGINES
from . import _layout as layout
from ._routes import PREFIX, REAL, Context, LURoute, Route, pointer, query_sizes

__all__ = ["BATCHED_MAX", "OPERATIONS", "CusolverEngine", "candidates"]

#: The solver operations this engine computes.
OPERATIONS = ("lu", "solve", "cholesky", "eigh", "svd", "lstsq", "qr")

#: Largest n for which the batched routes lead the candidate order (cuBLAS's batched LU and
#: cuSOLVER's batched Cholesky / eigensolver are built for small matrices).
BATCHED_MAX = 32
#: ``cusolverDnXsyevBatched`` takes matrices up to this order.
SYEV_BATCHED_MAX = 32




def candidates(problem: Problem) -> list[Candidate]:
    """The routes that compute ``problem``, best guess first.

    Batched routes exist only for stacks (``count > 1``) and lead for ``n <= BATCHED_MAX``.
    Real LU, Cholesky and one-shot solves of stacks with ``n <= 32`` also have the generated
    ``tiny`` route (:mod:`._tiny_route`), first for ``n <= 16`` and at least 256 systems, else
    after the batched route.

    Examples
    --------
    >>> [c.label for c in candidates(Problem.of("solve", n=8, count=100000, k=1, dtype="float64"))]
    ['tiny', 'getrfBatched', 'getrf']
    >>> [c.label for c in candidates(Problem.of("solve", n=8, count=100000, k=1, dtype="complex128"))]
    ['getrfBatched', 'getrf']
    >>> [c.label for c in candidates(Problem.of("eigh", n=4096, count=1, dtype="float32"))]
    ['syevd']
    >>> [c.label for c in candidates(Problem.of("eigh", n=16, count=500, dtype="float32"))]
    ['syevBatched', 'syevjBatched', 'syevd']
    """
    operation, count = problem.operation, int(problem.get("count", 1))
    n = int(problem.get("n", 0))
    small = n <= BATCHED_MAX
    if operation in ("lu", "solve"):
        labels = ["getrf", "getrfBatched"]
    elif operation == "cholesky":
        labels = ["potrf", "potrfBatched"]
    elif operation == "eigh":
        labels = ["syevd"] + (["syevjBatched", "syevBatched"] if n <= SYEV_BATCHED_MAX else [])
    elif operation in ("svd", "lstsq"):
        return [Candidate.of(label) for label in ("gesvd", "gesvdj", "gesvdp")]
    elif operation == "qr":
        return [Candidate.of("geqrf")]
    else:
        raise InvalidOptionError(f"the cuSOLVER engine has no routes for operation {operation!r}; "
                                 f"it computes {list(OPERATIONS)}")
    if count <= 1:
        labels = labels[:1]
    elif small:
        labels.reverse()
    from ._tiny_route import TINY, tiny_leads, tiny_offered  # the generated route for small real stacks

    if tiny_offered(problem):
        labels.insert(0 if tiny_leads(problem) else 1, TINY)
    return [Candidate.of(label) for label in labels]


# -- LU ------------------------------------------------------------------------------------------


class GetrfLoop(LURoute):
    """``cusolverDnXgetrf`` / ``Xgetrs`` once per batch element (64-bit pivots)."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        n = self.n
        self.piv = self.cupy.empty((self.count, n), np.int64)
        self.work.need(*query_sizes(cusolver.LIB.cusolverDnXgetrf_bufferSize, ctx.handle, ctx.params, n, n,
                                    self.data_type, pointer(self.a), max(1, n), self.data_type))

    def factor(self) -> None:
        lib, ctx, n, dt, w = cusolver.LIB, self.ctx, self.n, self.data_type, self.work
        ctx.on_stream()
        a, piv, info = pointer(self.a), pointer(self.piv), pointer(self.info)
        for i in range(self.count):
            lib.cusolverDnXgetrf(ctx.handle, ctx.params, n, n, dt, a + i * self.step, max(1, n), piv + i * n * 8,
                                 dt, w.device, w.device_bytes, w.host, w.host_bytes, info + 4 * i)

    def solve(self, b: Any, k: int, operation: int) -> None:
        """Solve in place: ``b`` is C storage ``(count, k, n)`` of column-major ``n x k`` blocks."""
        lib, ctx, n, dt = cusolver.LIB, self.ctx, self.n, self.data_type
        ctx.on_stream()
        a, piv, pb, info = pointer(self.a), pointer(self.piv), pointer(b), pointer(self.solve_info)
        bstep = n * k * self.dtype.itemsize
        for i in range(self.count):
            lib.cusolverDnXgetrs(ctx.handle, ctx.params, operation, n, k, dt, a + i * self.step, max(1, n),
                                 piv + i * n * 8, dt, pb + i * bstep, max(1, n), info + 4 * i)

    def pivots(self) -> Any:
        """1-based pivots ``(count, n)`` on the device."""
        return self.piv


class GetrfBatched(LURoute):
    """cuBLAS ``<t>getrfBatched`` / ``<t>getrsBatched``: one call for the whole stack."""

    batched = True

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        cupy = self.cupy
        self.piv = cupy.empty((self.count, self.n), np.int32)
        self.pointers = cupy.asarray(layout.pointer_offsets(self.count, self.n * self.n, self.dtype.itemsize))
        self.pointers += np.uint64(pointer(self.a))
        self._offsets: dict[int, Any] = {}
        prefix = PREFIX[self.dtype_name]
        self._getrf = getattr(cublas.LIB, f"cublas{prefix}getrfBatched")
        self._getrs = getattr(cublas.LIB, f"cublas{prefix}getrsBatched")
        self._host_info = ctypes.c_int()

    def factor(self) -> None:
        self.ctx.blas_on_stream()
        self._getrf(self.ctx.blas, self.n, pointer(self.pointers), max(1, self.n), pointer(self.piv), pointer(self.info),
                    self.count)

    def solve(self, b: Any, k: int, operation: int) -> None:
        offsets = self._offsets.get(k)
        if offsets is None:
            offsets = self._offsets[k] = self.cupy.asarray(
                layout.pointer_offsets(self.count, self.n * k, self.dtype.itemsize))
        pointers = offsets + np.uint64(pointer(b))
        self.ctx.blas_on_stream()
        self._getrs(self.ctx.blas, operation, self.n, k, pointer(self.pointers), max(1, self.n), pointer(self.piv),
                    pointer(pointers), max(1, self.n), ctypes.byref(self._host_info), self.count)

    def pivots(self) -> Any:
        return self.piv


# -- Cholesky --------------------------------------------------------------------------------------


class PotrfLoop(LURoute):
    """``cusolverDnXpotrf`` / ``Xpotrs`` once per batch element; ``fill`` is the
    ``cublasFillMode_t`` of the column-major matrix."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem, fill: int):
        super().__init__(candidate, ctx, problem)
        self.fill, n = fill, self.n
        self.work.need(*query_sizes(cusolver.LIB.cusolverDnXpotrf_bufferSize, ctx.handle, ctx.params, fill, n,
                                    self.data_type, pointer(self.a), max(1, n), self.data_type))

    def factor(self) -> None:
        lib, ctx, n, dt, w = cusolver.LIB, self.ctx, self.n, self.data_type, self.work
        ctx.on_stream()
        a, info = pointer(self.a), pointer(self.info)
        for i in range(self.count):
            lib.cusolverDnXpotrf(ctx.handle, ctx.params, self.fill, n, dt, a + i * self.step, max(1, n), dt,
                                 w.device, w.device_bytes, w.host, w.host_bytes, info + 4 * i)

    def solve(self, b: Any, k: int) -> None:
        lib, ctx, n, dt = cusolver.LIB, self.ctx, self.n, self.data_type
        ctx.on_stream()
        a, pb, info = pointer(self.a), pointer(b), pointer(self.solve_info)
        bstep = n * k * self.dtype.itemsize
        for i in range(self.count):
            lib.cusolverDnXpotrs(ctx.handle, ctx.params, self.fill, n, k, dt, a + i * self.step, max(1, n), dt,
                                 pb + i * bstep, max(1, n), info + 4 * i)


class PotrfBatched(LURoute):
    """``cusolverDn<t>potrfBatched`` / ``potrsBatched`` (one call per stack; ``potrsBatched``
    takes one right-hand side, so ``k`` columns take ``k`` calls)."""

    batched = True

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem, fill: int):
        super().__init__(candidate, ctx, problem)
        self.fill = fill
        self.pointers = self.cupy.asarray(layout.pointer_offsets(self.count, self.n * self.n, self.dtype.itemsize))
        self.pointers += np.uint64(pointer(self.a))
        self._offsets: dict[int, Any] = {}
        prefix = PREFIX[self.dtype_name]
        self._potrf = getattr(cusolver.LIB, f"cusolverDn{prefix}potrfBatched")
        self._potrs = getattr(cusolver.LIB, f"cusolverDn{prefix}potrsBatched")

    def factor(self) -> None:
        self.ctx.on_stream()
        self._potrf(self.ctx.handle, self.fill, self.n, pointer(self.pointers), max(1, self.n), pointer(self.info),
                    self.count)

    def solve(self, b: Any, k: int) -> None:
        offsets = self._offsets.get(k)
        if offsets is None:
            offsets = self._offsets[k] = self.cupy.asarray(
                layout.pointer_offsets(self.count, self.n * k, self.dtype.itemsize))
        self.ctx.on_stream()
        column = self.n * self.dtype.itemsize
        for j in range(k):
            pointers = offsets + np.uint64(pointer(b) + j * column)
            self._potrs(self.ctx.handle, self.fill, self.n, 1, pointer(self.pointers), max(1, self.n), pointer(pointers),
                        max(1, self.n), pointer(self.solve_info), self.count)


# -- Hermitian eigenproblems -----------------------------------------------------------------------


class SyevdLoop(LURoute):
    """``cusolverDnXsyevd`` per batch element: eigenvalues into ``self.w`` ``(count, n)``,
    eigenvectors (``vectors``) over ``self.a``."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem, fill: int, vectors: bool):
        super().__init__(candidate, ctx, problem)
        self.fill, n = fill, self.n
        self.jobz = int(cusolver.EigMode.VECTOR if vectors else cusolver.EigMode.NOVECTOR)
        self.w = self.cupy.empty((self.count, n), np.dtype(REAL[self.dtype_name]))
        self._size()

    def _size(self) -> None:
        ctx, n = self.ctx, self.n
        self.work.need(*query_sizes(cusolver.LIB.cusolverDnXsyevd_bufferSize, ctx.handle, ctx.params, self.jobz, self.fill,
                                    n, self.data_type, pointer(self.a), max(1, n), self.real_type, pointer(self.w),
                                    self.data_type))

    def run(self) -> None:
        lib, ctx, n, dt, w = cusolver.LIB, self.ctx, self.n, self.data_type, self.work
        ctx.on_stream()
        a, pw, info = pointer(self.a), pointer(self.w), pointer(self.info)
        wstep = n * np.dtype(REAL[self.dtype_name]).itemsize
        for i in range(self.count):
            lib.cusolverDnXsyevd(ctx.handle, ctx.params, self.jobz, self.fill, n, dt, a + i * self.step, max(1, n),
                                 self.real_type, pw + i * wstep, dt, w.device, w.device_bytes, w.host, w.host_bytes,
                                 info + 4 * i)


class SyevBatched(SyevdLoop):
    """``cusolverDnXsyevBatched``: the whole stack (contiguous, ``lda = n``) in one call."""

    batched = True

    def _size(self) -> None:
        ctx, n = self.ctx, self.n
        self.work.need(*query_sizes(cusolver.LIB.cusolverDnXsyevBatched_bufferSize, ctx.handle, ctx.params, self.jobz,
                                    self.fill, n, self.data_type, pointer(self.a), max(1, n), self.real_type, pointer(self.w),
                                    self.data_type, tail=(self.count,)))

    def run(self) -> None:
        ctx, w = self.ctx, self.work
        ctx.on_stream()
        cusolver.LIB.cusolverDnXsyevBatched(ctx.handle, ctx.params, self.jobz, self.fill, self.n, self.data_type,
                                            pointer(self.a), max(1, self.n), self.real_type, pointer(self.w),
                                            self.data_type, w.device, w.device_bytes, w.host, w.host_bytes,
                                            pointer(self.info), self.count)


class SyevjBatched(SyevdLoop):
    """``cusolverDn<t>syevjBatched`` (``heevjBatched`` for complex): Jacobi sweeps over the whole
    stack in one call (n <= 32; default tolerance and sweeps; eigenvalues sorted ascending)."""

    batched = True

    def _size(self) -> None:
        name = {"float32": "Ssyevj", "float64": "Dsyevj", "complex64": "Cheevj",
                "complex128": "Zheevj"}[self.dtype_name]
        self.jacobi = new_handle(cusolver.LIB.cusolverDnCreateSyevjInfo)
        self._run_fn = getattr(cusolver.LIB, f"cusolverDn{name}Batched")
        lwork = ctypes.c_int()
        getattr(cusolver.LIB, f"cusolverDn{name}Batched_bufferSize")(
            self.ctx.handle, self.jobz, self.fill, self.n, pointer(self.a), max(1, self.n), pointer(self.w),
            ctypes.byref(lwork), self.jacobi, self.count)
        self.lwork = lwork.value
        self.work.need(self.lwork * self.dtype.itemsize)

    def run(self) -> None:
        self.ctx.on_stream()
        self._run_fn(self.ctx.handle, self.jobz, self.fill, self.n, pointer(self.a), max(1, self.n), pointer(self.w),
                     self.work.device, self.lwork, pointer(self.info), self.jacobi, self.count)

    def free(self) -> None:
        if getattr(self, "jacobi", None):
            cusolver.LIB.cusolverDnDestroySyevjInfo(self.jacobi)
            self.jacobi = None
        super().free()


# -- SVD ---------------------------------------------------------------------------------------------


class SvdRoute(Route):
    """``gesvd`` / ``gesvdp`` of a stack of tall column-major ``rows x cols`` matrices held in
    ``self.a`` (C storage ``(count, cols, rows)``). Outputs: ``self.s`` ``(count, k)``;
    with vectors, ``self.u`` (C storage ``(count, u_cols, rows)``) and ``self.v`` (C storage
    ``(count, cols, vt_rows)`` holding ``V^H`` for gesvd and ``V`` for gesvdp, column-major)."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        cupy = self.cupy
        m, n = problem.get("shape")
        self.transposed = layout.copy_order(m, n, need_tall=True) == "C"
        self.vectors = bool(problem.get("compute_uv", True))
        self.full = bool(problem.get("full_matrices", False)) and self.vectors
        self.out = layout.svd_outputs(m, n, self.transposed, self.full)
        rows, cols = self.out.u_rows, self.out.vt_cols
        self.rows, self.cols, self.k = rows, cols, min(rows, cols)
        self.a = cupy.empty((self.count, cols, rows), self.dtype)
        self.s = cupy.empty((self.count, self.k), np.dtype(REAL[self.dtype_name]))
        self.label = candidate.label
        gives_v = self.label in ("gesvdp", "gesvdj")  # V itself (cols x k, or cols x cols), not V^H
        v_rows, v_cols = (cols, self.out.vt_rows) if gives_v else (self.out.vt_rows, cols)
        # without vectors gesvd takes 1 x 1 placeholders; the Jacobi and polar routines are sized in full
        placeholders = not self.vectors and not gives_v
        self.u = cupy.empty((self.count, 1, 1) if placeholders else (self.count, self.out.u_cols, rows), self.dtype)
        self.v = cupy.empty((self.count, 1, 1) if placeholders else (self.count, v_cols, v_rows), self.dtype)
        self.ldu, self.ldv = (1, 1) if placeholders else (rows, v_rows)
        self.gives_v = gives_v
        self.error = ctypes.c_double()
        self.jacobi = None
        if self.label == "gesvdj":
            self.jacobi = new_handle(cusolver.LIB.cusolverDnCreateGesvdjInfo)
            prefix = PREFIX[self.dtype_name]
            self._gesvdj = getattr(cusolver.LIB, f"cusolverDn{prefix}gesvdj")
            lwork = ctypes.c_int()
            getattr(cusolver.LIB, f"cusolverDn{prefix}gesvdj_bufferSize")(
                ctx.handle, self._jobz(), int(not self.full), *self._typed_args(0), ctypes.byref(lwork), self.jacobi)
            self.lwork = lwork.value
            self.work.need(self.lwork * self.dtype.itemsize)
        else:
            self.work.need(*self._query())

    def _jobz(self) -> int:
        return int(cusolver.EigMode.VECTOR if self.vectors else cusolver.EigMode.NOVECTOR)

    def _typed_args(self, i: int) -> tuple:
        """The legacy typed API's matrix arguments (no data types) of batch element ``i``."""
        args = self._args(i)
        return (args[0], args[1], args[3], args[4], args[6], args[8], args[9], args[11], args[12])

    def _jobs(self) -> tuple[bytes, bytes]:
        job = b"A" if self.full else (b"S" if self.vectors else b"N")
        return job, job

    def _args(self, i: int) -> tuple:
        s_step = self.k * self.s.dtype.itemsize
        u_step = self.u.shape[1] * self.u.shape[2] * self.dtype.itemsize
        v_step = self.v.shape[1] * self.v.shape[2] * self.dtype.itemsize
        a_step = self.rows * self.cols * self.dtype.itemsize
        dt = self.data_type
        return (self.rows, self.cols, dt, pointer(self.a) + i * a_step, max(1, self.rows), self.real_type,
                pointer(self.s) + i * s_step, dt, pointer(self.u) + i * u_step, self.ldu, dt, pointer(self.v) + i * v_step,
                self.ldv, dt)

    def _query(self) -> tuple[int, int]:
        ctx = self.ctx
        if self.label == "gesvdp":
            return query_sizes(cusolver.LIB.cusolverDnXgesvdp_bufferSize, ctx.handle, ctx.params, self._jobz(),
                               int(not self.full), *self._args(0))
        return query_sizes(cusolver.LIB.cusolverDnXgesvd_bufferSize, ctx.handle, ctx.params, *self._jobs(), *self._args(0))

    def run(self) -> None:
        lib, ctx, w = cusolver.LIB, self.ctx, self.work
        ctx.on_stream()
        info = pointer(self.info)
        if self.label == "gesvdj":
            for i in range(self.count):
                self._gesvdj(ctx.handle, self._jobz(), int(not self.full), *self._typed_args(i), w.device, self.lwork,
                             info + 4 * i, self.jacobi)
            return
        if self.label == "gesvdp":
            for i in range(self.count):
                lib.cusolverDnXgesvdp(ctx.handle, ctx.params, self._jobz(), int(not self.full), *self._args(i),
                                      w.device, w.device_bytes, w.host, w.host_bytes, info + 4 * i,
                                      ctypes.byref(self.error))
            return
        jobu, jobvt = self._jobs()
        for i in range(self.count):
            lib.cusolverDnXgesvd(ctx.handle, ctx.params, jobu, jobvt, *self._args(i), w.device, w.device_bytes,
                                 w.host, w.host_bytes, info + 4 * i)

    def factors(self) -> tuple[Any, Any]:
        """``(U, Vh)`` of ``A`` as ``(count, ...)`` device views of the outputs (no copies)."""
        u = self.u.swapaxes(-1, -2)  # M's U, column-major
        if self.gives_v:
            vh = self.v.conj()  # V column-major, read row-major, is V^T: conjugated, V^H
        else:
            vh = self.v.swapaxes(-1, -2)  # M's V^H
        if not self.transposed:
            return u, vh
        # A = M^T = conj(V_M) S U_M^T: U_A = (V_M^H)^T, Vh_A = U_M^T
        return vh.swapaxes(-1, -2), u.swapaxes(-1, -2)

    def free(self) -> None:
        if self.jacobi:
            cusolver.LIB.cusolverDnDestroyGesvdjInfo(self.jacobi)
            self.jacobi = None
        super().free()


# -- QR ------------------------------------------------------------------------------------------------


class GeqrfRoute(Route):
    """``cusolverDnXgeqrf`` of a stack of column-major ``m x n`` matrices in ``self.a`` (C storage
    ``(count, n, m)``), and ``<t>orgqr`` / ``<t>ungqr`` forming ``Q`` with ``q_cols`` columns."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        cupy = self.cupy
        self.m, self.n = m, n = problem.get("shape")
        self.k = min(m, n)
        self.q_cols = m if problem.get("mode") == "complete" else self.k
        self.a = cupy.empty((self.count, n, m), self.dtype)
        self.tau = cupy.empty((self.count, max(1, self.k)), self.dtype)
        self.work.need(*query_sizes(cusolver.LIB.cusolverDnXgeqrf_bufferSize, ctx.handle, ctx.params, m, n,
                                    self.data_type, pointer(self.a), max(1, m), self.data_type, pointer(self.tau),
                                    self.data_type))
        self.q = None
        if problem.get("mode") != "r":
            self.q = cupy.empty((self.count, self.q_cols, m), self.dtype)
            name = ("orgqr" if self.dtype.kind != "c" else "ungqr")
            self._orgqr = getattr(cusolver.LIB, f"cusolverDn{PREFIX[self.dtype_name]}{name}")
            lwork = ctypes.c_int()
            getattr(cusolver.LIB, f"cusolverDn{PREFIX[self.dtype_name]}{name}_bufferSize")(
                ctx.handle, m, self.q_cols, self.k, pointer(self.q), max(1, m), pointer(self.tau), ctypes.byref(lwork))
            self.work.need(lwork.value * self.dtype.itemsize)
            self.lwork = lwork.value

    def run(self) -> None:
        lib, ctx, w = cusolver.LIB, self.ctx, self.work
        ctx.on_stream()
        m, n, dt = self.m, self.n, self.data_type
        a, tau, info = pointer(self.a), pointer(self.tau), pointer(self.info)
        a_step, t_step = m * n * self.dtype.itemsize, max(1, self.k) * self.dtype.itemsize
        for i in range(self.count):
            lib.cusolverDnXgeqrf(ctx.handle, ctx.params, m, n, dt, a + i * a_step, max(1, m), dt, tau + i * t_step, dt,
                                 w.device, w.device_bytes, w.host, w.host_bytes, info + 4 * i)
        if self.q is None:
            return
        reflectors = min(n, self.q_cols)
        self.q[:, :reflectors, :] = self.a[:, :reflectors, :]
        q, q_step = pointer(self.q), self.q_cols * m * self.dtype.itemsize
        for i in range(self.count):
            self._orgqr(ctx.handle, m, self.q_cols, self.k, q + i * q_step, max(1, m), tau + i * t_step, w.device,
                        self.lwork, info + 4 * i)


# -- the engine -------------------------------------------------------------------------------------


class CusolverEngine(Engine):
    """The solver plans on an NVIDIA GPU through cuSOLVER (and cuBLAS's batched LU).

    Parameters
    ----------
    operation
        ``"lu"``, ``"solve"``, ``"cholesky"``, ``"eigh"``, ``"svd"``, ``"lstsq"`` or ``"qr"``.
    device_id
        The CUDA device.
    package
        The operands' package (``"cupy"``, ``"torch"`` or ``"dlpack"``): workspaces come from its pool.
    stream
        ``None``: the package's current stream at each call; else a stream (int handle, CuPy or
        torch stream, ``__cuda_stream__``).
    """

    name = "cuda-cusolver"

    def __init__(self, operation: str, *, device_id: int = 0, package: str = "cupy", stream: Any = None):
        if package not in runtime.CUDA_PACKAGES:
            raise InvalidOptionError(f"package={package!r}: CUDA operands come from {list(runtime.CUDA_PACKAGES)}")
        self.operation, self.device_id, self.package = operation, device_id, package
        _, self.stream, self.timer = runtime.engine_stream(package, device_id, stream)
        self.context = Context(device_id, package, self.stream)

    def candidates(self, problem: Problem) -> list[Candidate]:
        return candidates(problem)

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> Route:
        """Allocate the candidate's buffers and size its workspaces (bufferSize queries)."""
        label, ctx = candidate.label, self.context
        with ctx.cupy.cuda.Device(self.device_id):
            if label in ("getrf", "getrfBatched"):
                return (GetrfBatched if label == "getrfBatched" else GetrfLoop)(candidate, ctx, problem)
            fill = int(problem.get("fill", 0))
            if label in ("potrf", "potrfBatched"):
                return (PotrfBatched if label == "potrfBatched" else PotrfLoop)(candidate, ctx, problem, fill)
            if label in ("syevd", "syevBatched", "syevjBatched"):
                cls = {"syevd": SyevdLoop, "syevBatched": SyevBatched, "syevjBatched": SyevjBatched}[label]
                return cls(candidate, ctx, problem, fill, bool(problem.get("vectors", True)))
            if label in ("gesvd", "gesvdp", "gesvdj"):
                return SvdRoute(candidate, ctx, problem)
            if label == "geqrf":
                return GeqrfRoute(candidate, ctx, problem)
            if label == "tiny" and self.operation in ("solve", "lu", "cholesky"):
                from ._tiny_route import tiny_route

                return tiny_route(self.operation, candidate, ctx, problem)
        raise InvalidOptionError(f"the cuSOLVER engine has no route {label!r}")

    def device(self) -> dict[str, Any]:
        """GPU name, compute capability and the cuSOLVER version (they key wisdom)."""
        return {**runtime.device_description(self.device_id), "cusolver": ".".join(map(str, cusolver.version()))}


CUDA_ENGINES.update(dict.fromkeys(OPERATIONS, CusolverEngine))
