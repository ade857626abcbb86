"""The ``tiny`` routes of the CUDA solver plans: generated kernels for stacks of small systems.

For real stacks of ``n <= 32`` (:mod:`nvmathpy.kernels.tiny_batched`; several systems per thread
block, each in shared memory; and :mod:`nvmathpy.kernels.tiny_register` for ``n <= 8`` with a few
right-hand sides: one thread per system, held in registers):

- ``solve`` (the one-shot ``A^{-1} B`` / ``A^{-1}`` behind :func:`nvmathpy.linalg.solve` and
  ``inv``): :class:`TinySolve`, LU with partial pivoting and the substitutions in one launch,
  where cuBLAS's ``getrfBatched`` + ``getrsBatched`` take two launches, pointer arrays and a
  column-major copy of ``A``. The kernel reads the caller's stack in place when each matrix has
  unit stride along its rows (C order) or its columns (F order, the ``trans_a`` variant), a
  broadcast identity for the inverse (batch stride 0), and writes ``X`` C-ordered.
- ``lu`` and ``cholesky`` (plans that keep factors): :class:`TinyLU` and :class:`TinyCholesky`
  factor the route's column-major private copy in place exactly as ``getrf`` / ``potrf`` leave
  it (LAPACK's 1-based pivots; the factor in the triangle the fill mode names), and solve with
  those factors in place in the column-major right-hand sides (``getrs``'s ``N``/``T``
  operations), at most 64 columns per launch.

Per-system ``info`` codes (0, or the 1-based column of the first zero pivot / non-positive
diagonal) are written by the kernels into the route's ``info`` buffer, so
:meth:`Route.failures` names failed systems by batch index exactly as for the cuSOLVER / cuBLAS
routes.

The kernels are compiled with NVRTC for the device's architecture (through the on-disk kernel
cache) and launched on the engine's stream by :func:`nvmathpy.linalg.gemm.cuda._custom.load_function`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....kernels.launch import pack_arguments
from ....cuda.bindings.cublas import FillMode
from ....kernels.tiny_batched import (MAX_N, MAX_RHS, TinyKernel, tiny_factor_kernel, tiny_factored_solve_kernel,
                                      tiny_solve_kernel)
from ....kernels.tiny_register import register_solve_fits, tiny_register_solve_kernel
from ....plan import Candidate, Problem
from ._routes import Context, LURoute, Route

__all__ = ["TINY", "TINY_LEAD_COUNT", "TINY_LEAD_N", "TinyCholesky", "TinyLU", "TinySolve", "tiny_leads",
           "tiny_offered", "tiny_route"]

#: The route's candidate label.
TINY = "tiny"
#: The route leads the candidates for ``n <= TINY_LEAD_N`` and at least ``TINY_LEAD_COUNT`` systems.
TINY_LEAD_N, TINY_LEAD_COUNT = 16, 256
_DTYPES = ("float32", "float64")


def _columns(problem: Problem) -> int:
    """Right-hand-side columns: ``n`` for the inverse, else ``k`` (one when not recorded)."""
    if problem.get("inverse"):
        return int(problem.get("n", 0))
    k = problem.get("k")
    return 1 if k is None else int(k)


def tiny_offered(problem: Problem) -> bool:
    """Whether a tiny route computes ``problem``: a real stack (``count > 1``) of ``n <= 32``
    matrices to factor (``lu``, ``cholesky``) or to solve with at most 64 right-hand sides each
    (``solve``).

    Examples
    --------
    >>> tiny_offered(Problem.of("solve", n=8, count=100000, k=1, dtype="float64"))
    True
    >>> tiny_offered(Problem.of("solve", n=8, count=100000, k=1, dtype="complex64"))
    False
    >>> tiny_offered(Problem.of("cholesky", n=33, count=100, dtype="float32"))
    False
    """
    n, count = int(problem.get("n", 0)), int(problem.get("count", 1))
    if problem.operation not in ("solve", "lu", "cholesky") or problem.get("dtype") not in _DTYPES:
        return False
    columns_fit = problem.operation != "solve" or 1 <= _columns(problem) <= MAX_RHS
    return 1 <= n <= MAX_N and count > 1 and columns_fit


def tiny_leads(problem: Problem) -> bool:
    """Whether the tiny route is the first guess (small matrices, many of them)."""
    return int(problem.get("n", 0)) <= TINY_LEAD_N and int(problem.get("count", 1)) >= TINY_LEAD_COUNT


def _pinned_word() -> Any:
    """A page-locked ``uint64`` array of one for reading the failure flag back (``None`` where
    CuPy's ``cupyx`` is missing, e.g. under the host emulation: then ``asnumpy``)."""
    try:
        import cupyx
    except ImportError:
        return None
    return cupyx.empty_pinned((1,), np.uint64)


def _load(kernel: TinyKernel, ctx: Context) -> Callable[..., None]:
    from ...gemm.cuda import _custom as _custom_cuda

    return _custom_cuda.load_function(kernel.source, kernel.name, ctx.device_id)


class TinySolve(Route):
    """The prepared tiny route: ``run(a3, b3)`` solves a ``(count, n, n)`` stack against a
    ``(count, n, k)`` one (``None``: the identity, for the inverse) and returns the C-ordered
    ``(count, n, k)`` solution; nothing synchronises.

    Systems small enough for one thread's registers
    (:func:`~nvmathpy.kernels.tiny_register.register_solve_fits`: ``n <= 8`` with a few right-hand
    sides) take the register kernel, one thread per system, which also raises a failure flag
    stamped with the launch's epoch, so :meth:`failures` reads 8 bytes (not the whole ``info``
    array) when nothing failed; larger ones take the shared-memory kernel, ``n`` threads per
    system. The rule depends on the sizes and dtype alone."""

    one_shot = True

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        super().__init__(candidate, ctx, problem)
        self.n, self.k = int(problem.get("n")), _columns(problem)
        self.registers = register_solve_fits(self.dtype_name, self.n, self.k)
        self._functions: dict[bool, tuple[TinyKernel, Callable[..., None]]] = {}
        self._launchers: dict[bool, tuple[Callable[..., None], Any, tuple[Any, ...], tuple[Any, Any]]] = {}
        self.item, self._x_shape = self.dtype.itemsize, (self.count, self.n, self.k)
        self._eye = self.cupy.eye(self.n, dtype=self.dtype)[None] if problem.get("inverse") else None
        self._flag = self.cupy.zeros(1, np.uint64)
        self._flag_ptr = int(self._flag.data.ptr)
        self._flag_host = _pinned_word()
        self._epoch = 0
        self._function(problem.get("layout") == "F")  # the expected variant is compiled while planning

    def _function(self, trans_a: bool) -> tuple[TinyKernel, Callable[..., None]]:
        found = self._functions.get(trans_a)
        if found is None:
            if self.registers:
                kernel = tiny_register_solve_kernel(self.dtype_name, self.n, self.k, trans_a=trans_a)
            else:
                kernel = tiny_solve_kernel(self.dtype_name, self.n, self.k, method="lu", trans_a=trans_a)
            found = self._functions[trans_a] = (kernel, _load(kernel, self.ctx))
        return found

    def _next_epoch(self) -> int:
        """The next launch's epoch (32 bits; the flag is cleared when they wrap around)."""
        self._epoch += 1
        if self._epoch > 0xFFFFFFFF:
            self._flag[...] = 0
            self._epoch = 1
        return self._epoch

    def failures(self) -> list[int]:
        """Flat indices of the systems whose last solve met a zero pivot (one sync; the register
        kernel's flag is read first and the ``info`` array only when it names a failure)."""
        if self.registers and self._epoch:
            if self._flag_host is not None:  # page-locked: one small asynchronous copy, then the sync
                self._flag.get(out=self._flag_host)
                stamp = int(self._flag_host[0])
            else:
                stamp = int(self.cupy.asnumpy(self._flag)[0])
            if stamp >> 32 != self._epoch:
                return []
        return super().failures()

    def run(self, a3: Any, b3: Any | None) -> Any:
        """Enqueue the solve of every system; ``info`` stays on the device."""
        cupy, item, n = self.cupy, self.item, self.n
        strides = a3.strides
        if strides[2] == item or n == 1:
            trans_a, lda = False, strides[1] // item
        elif strides[1] == item:
            trans_a, lda = True, strides[2] // item
        else:  # neither rows nor columns contiguous: one C-ordered copy
            a3 = cupy.ascontiguousarray(a3)
            trans_a, lda, strides = False, n, a3.strides
        if b3 is None:
            b3 = self._eye
        elif b3.strides[2] != item and self.k != 1:
            b3 = cupy.ascontiguousarray(b3)
        launch, packed, slots, dims = self._launchers.get(trans_a) or self._launcher(trans_a)
        x = cupy.empty(self._x_shape, self.dtype)
        slots[0].value, slots[1].value, slots[2].value = a3.data.ptr, lda, strides[0] // item
        b_strides = b3.strides
        slots[3].value, slots[4].value = b3.data.ptr, b_strides[1] // item
        slots[5].value = b_strides[0] // item if b3.shape[0] > 1 else 0
        slots[6].value = x.data.ptr
        if self.registers:
            slots[7].value = self._next_epoch()
        launch(*dims, packed, self.ctx.stream())
        return x

    def _launcher(self, trans_a: bool) -> tuple[Callable[..., None], Any, tuple[Any, ...], tuple[Any, Any]]:
        """The variant's launch function, its packed arguments with what never changes filled in,
        the slots :meth:`run` sets (``a, lda, stride_a, b, ldb, stride_b, x`` [, ``epoch``]) and
        the launch dimensions, made once per plan."""
        kernel, launch = self._function(trans_a)
        values = {(key, None): 0 for key in ("a", "lda", "stride_a", "b", "ldb", "stride_b", "x")}
        values.update({("ldx", None): self.k, ("stride_x", None): self.n * self.k,
                       ("info", None): int(self.info.data.ptr), ("batch", None): self.count})
        if self.registers:
            values.update({("flag", None): self._flag_ptr, ("epoch", None): 0})
        packed = pack_arguments(kernel.params, values)
        keys = ("a", "lda", "stride_a", "b", "ldb", "stride_b", "x") + (("epoch",) if self.registers else ())
        found = (launch, packed, tuple(packed.slots[(key, None)] for key in keys), kernel.launch_dims(self.count))
        self._launchers[trans_a] = found
        return found


class TinyFactored(LURoute):
    """A tiny route that keeps its factors in ``self.a`` (C storage ``(count, n, n)`` of
    column-major matrices, as cuSOLVER's routes): ``factor()`` factors them in place,
    ``solve(b, k, ...)`` solves in place in ``b`` (C storage ``(count, k, n)``: column-major
    ``n x k`` blocks). ``method`` is the kernels' ``"lu"`` or ``"cholesky"``; ``trans_a`` whether
    the kernels read ``self.a`` column-major."""

    batched = True
    method = "lu"

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem, trans_a: bool):
        super().__init__(candidate, ctx, problem)
        self.trans_a = trans_a
        self._factor_kernel = tiny_factor_kernel(self.dtype_name, self.n, method=self.method, trans_a=trans_a)
        self._factor_launch = _load(self._factor_kernel, ctx)
        self._solvers: dict[tuple[int, bool], tuple[TinyKernel, Callable[..., None]]] = {}
        self._solver(min(self.n, MAX_RHS), False)  # the usual solve kernel is compiled while planning

    def _solver(self, k: int, transpose: bool) -> tuple[TinyKernel, Callable[..., None]]:
        found = self._solvers.get((k, transpose))
        if found is None:
            kernel = tiny_factored_solve_kernel(self.dtype_name, self.n, k, method=self.method, transpose=transpose,
                                                trans_a=self.trans_a, trans_x=True)
            found = self._solvers[(k, transpose)] = (kernel, _load(kernel, self.ctx))
        return found

    def _factors(self) -> dict[tuple[str, None], Any]:
        values = {("a", None): int(self.a.data.ptr), ("lda", None): self.n, ("stride_a", None): self.n * self.n}
        if self.method == "lu":
            values[("piv", None)] = int(self.piv.data.ptr)
        return values

    def factor(self) -> None:
        kernel = self._factor_kernel
        values = {**self._factors(), ("info", None): int(self.info.data.ptr), ("batch", None): self.count}
        grid, block = kernel.launch_dims(self.count)
        self._factor_launch(grid, block, pack_arguments(kernel.params, values), self.ctx.stream())

    def solve(self, b: Any, k: int, operation: int = 0) -> None:
        """Solve ``op(A) X = B`` in place in ``b`` (``operation`` 0: ``N``, else ``T``, as for a real
        ``getrs``), 64 columns per launch at most."""
        n, item, stream = self.n, self.dtype.itemsize, self.ctx.stream()
        factors = self._factors()
        for first in range(0, k, MAX_RHS):
            columns = min(MAX_RHS, k - first)
            kernel, launch = self._solver(columns, operation != 0)
            values = {**factors, ("x", None): int(b.data.ptr) + first * n * item, ("ldx", None): n,
                      ("stride_x", None): n * k, ("batch", None): self.count}
            grid, block = kernel.launch_dims(self.count)
            launch(grid, block, pack_arguments(kernel.params, values), stream)


class TinyLU(TinyFactored):
    """``getrf`` / ``getrs`` by the tiny kernels: LU with partial pivoting in place, int32 1-based
    pivots in ``self.piv``."""

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem):
        n = int(problem.get("n"))
        self.piv = ctx.cupy.zeros((max(1, int(problem.get("count", 1))), n), "int32")
        super().__init__(candidate, ctx, problem, trans_a=True)

    def pivots(self) -> Any:
        """1-based pivots ``(count, n)`` on the device."""
        return self.piv[: self.count]


class TinyCholesky(TinyFactored):
    """``potrf`` / ``potrs`` by the tiny kernels. ``fill`` is the ``cublasFillMode_t`` of the
    column-major matrix: lower, the kernels read it column-major (its lower triangle); upper,
    row-major (its transpose's lower triangle, so the factor written is ``U = L^T``)."""

    method = "cholesky"

    def __init__(self, candidate: Candidate, ctx: Context, problem: Problem, fill: int):
        self.fill = fill
        super().__init__(candidate, ctx, problem, trans_a=fill == FillMode.LOWER)

    def solve(self, b: Any, k: int, operation: int = 0) -> None:
        super().solve(b, k, 0)


def tiny_route(operation: str, candidate: Candidate, ctx: Context, problem: Problem) -> Route:
    """The prepared tiny route of ``operation``."""
    if operation == "solve":
        return TinySolve(candidate, ctx, problem)
    if operation == "lu":
        return TinyLU(candidate, ctx, problem)
    return TinyCholesky(candidate, ctx, problem, int(problem.get("fill", 0)))
