"""The solver plans on CUDA operands: the public plan classes' device variants.

``LU(cupy_array)`` (or a torch CUDA tensor, or ``execution="cuda"``) constructs a
:class:`CudaLU` (a subclass of :class:`~nvmathpy.linalg.LU`, chosen by
``SolverPlan.__new__`` through the registry of :mod:`.._dispatch`); likewise Cholesky, Eigh,
SVD, QR, Lstsq and the internal Solve. They take the same arguments (plus ``stream=``, CUDA only), run on
:class:`._engine.CusolverEngine` and return results as the caller's package on the
caller's device.

Checking ``info`` (the device-side error codes), decided here:

- the hot path (``execute()``, ``solve()``) never synchronises: ``info`` stays on the device;
- :meth:`CudaPlanMixin.check` synchronises once and raises :class:`~numpy.linalg.LinAlgError`
  naming the first failing batch element (singular ``U``, matrix not positive definite,
  no convergence); ``LU.singular`` and ``LU.det()`` read the factors on the host anyway;
- the one-call functions (``nvmathpy.linalg.solve``, ``inv``, ``cholesky``, ...) follow
  NumPy's semantics and call ``check()`` (one synchronisation per call), or within
  ``cuda_checks("deferred")`` copy the codes asynchronously and report later (:mod:`._checks`).

Keywords the CUDA plans cannot honour are refused by name (generalized and subset eigenproblems,
QR with pivoting, SVD ``driver``); ``overwrite_a`` is accepted and ignored (the routine
overwrites a private copy, which keeps the caller's order: a plain device memcpy).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ....errors import InvalidOperandError, InvalidOptionError
from ....plan import Problem
from . import _layout as layout
from ._checks import defer, deferred
from ._engine import SvdRoute
from ._operands import as_device_stack, storage_view, transposed_layout
from ._plan_base import CudaPlanMixin, on_stream
from ._routes import LURoute
from .._dispatch import CUDA_PLANS
from ..cpu._factored import check_trans
from ..cpu._lapack import lapack_dtype
from .._operands import batch_index
from ..plans.cholesky import Cholesky
from ..plans.eigh import Eigh
from ..plans.lstsq import Lstsq
from ..plans.lu import LU
from ..plans.qr import QR, QRResult
from ..plans.solve import Solve
from ..plans.svd import SVD, SVDResult

__all__ = ["CudaCholesky", "CudaEigh", "CudaLU", "CudaLstsq", "CudaQR", "CudaSVD", "CudaSolve"]


class CudaLU(CudaPlanMixin, LU):
    """:class:`~nvmathpy.linalg.LU` on CUDA operands (``getrf`` / cuBLAS ``getrfBatched``).

    ``stream=`` (keyword, CUDA only) enqueues on that stream instead of the package's current one.
    """

    _failure = "Singular matrix"

    def __init__(self, a: Any, /, *, overwrite_a: bool = False, execution: Any = None, stream: Any = None):
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a")
        self._n, self._batch = self._a.shape[-1], self._a.shape[:-2]
        self._dtype = self._a.dtype
        self._transposed, order = transposed_layout(self._a)
        self._problem = Problem.of("lu", n=self._n, count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order, space="cuda")

    def _bind(self, prepared: LURoute) -> Callable[[], "CudaLU"]:
        transposed = self._transposed
        view = storage_view(transposed)

        def factor() -> "CudaLU":
            prepared.load(view, self._stack(self._a))
            prepared.factor()
            self._route, self._state, self._factored_transposed = prepared, prepared, transposed
            self._solve = None
            self.factorizations += 1
            return self

        return factor

    def _timing_call(self, prepared: LURoute) -> Callable[[], Any]:
        a3, view = self._stack(self._a), storage_view(self._transposed)
        return self._streamed(lambda: (prepared.load(view, a3), prepared.factor()))

    @on_stream
    def use_factors(self, lu: Any, piv: Any) -> None:
        """Adopt factors of ``A`` itself (``lu`` as :attr:`factors` returns it, ``piv`` 0-based):
        they are copied into the plan's buffers; no factorization is done. The pivots are checked
        to lie in ``[0, n)`` before cuSOLVER can index with them (one read-back of a flag)."""
        lu = self._swap_in("lu", lu, self._a)
        native = self._intake(piv=piv)
        pivots = native["piv"]
        if pivots.shape != self._batch + (self._n,):
            raise InvalidOperandError(
                f"piv: shape {pivots.shape} does not match lu's {lu.shape} (expected {self._batch + (self._n,)})"
            )
        if pivots.dtype.kind not in "iu":
            raise InvalidOperandError(f"piv: pivot indices must be integers, got dtype {pivots.dtype}")
        out_of_range = (f"piv: pivot indices out of range; 0-based pivots of an order-{self._n} factor lie in "
                        f"[0, {self._n})")
        if pivots.size:
            bad = ((pivots < 0) | (pivots >= self._n)).any()
            if deferred():  # no read: clipped into range (memory safety), the error reported later
                defer(self._cupy, bad, 1, "info", out_of_range, (), self._engine.stream(), InvalidOperandError)
                pivots = self._cupy.clip(pivots, 0, max(0, self._n - 1))
            elif bool(bad):
                raise InvalidOperandError(out_of_range)
        if not self.is_planned:
            self.plan()
        route = self._prepared
        self._clear_derived()
        route.load(storage_view(False), self._stack(lu))
        route.pivots()[...] = pivots.reshape(route.pivots().shape) + 1
        diagonal = self._cupy.diagonal(route.a, axis1=-2, axis2=-1)
        route.info[: route.count] = (diagonal == 0).any(axis=-1)
        self._route, self._state, self._factored_transposed = route, route, False

    def check(self) -> "CudaLU":
        """Raise :class:`~numpy.linalg.LinAlgError` if a factored matrix is exactly singular (one sync)."""
        self._computed()
        self._failed(self._failure)
        return self

    @on_stream
    def solve(self, b: Any, trans: Any = 0) -> Any:
        """Solve ``op(A) x = b`` on the device (no synchronisation; :meth:`check` reports
        singular matrices, whose solutions are not finite)."""
        trans = check_trans(trans)
        b3, vector = self._device_rhs(b, self._n)
        route = self._computed()
        k = b3.shape[-1]
        operation, conjugate = layout.getrs_operation(trans, self._factored_transposed, self._dtype.kind == "c")
        x = self._cupy.empty((b3.shape[0], k, self._n), self._dtype)  # column-major n x k blocks
        if b3.size and self._n:
            x.swapaxes(-1, -2)[...] = b3.conj() if conjugate else b3
            route.solve(x, k, operation)
        x3 = x.swapaxes(-1, -2)
        return self._to_caller(self._shaped(x3.conj() if conjugate else x3, vector))

    def _lu_and_pivots(self) -> tuple[Any, Any]:
        route = self._computed()
        return route.a.swapaxes(-1, -2), route.pivots()

    @on_stream
    def _host_diagonals(self) -> tuple[np.ndarray, np.ndarray]:
        lu, piv = self._lu_and_pivots()
        cupy = self._cupy
        diag = cupy.asnumpy(cupy.diagonal(lu, axis1=-2, axis2=-1)).reshape(-1, self._n)
        swaps = cupy.asnumpy((piv != cupy.arange(1, self._n + 1, dtype=piv.dtype)).sum(axis=-1))
        return diag, np.asarray(swaps).reshape(-1)

    @on_stream
    def det(self) -> Any:
        """Determinants from the factors (``det(A^T) = det(A)``), computed on the device (no
        synchronisation), as a device array."""
        lu, piv = self._lu_and_pivots()
        cupy = self._cupy
        product = cupy.prod(cupy.diagonal(lu, axis1=-2, axis2=-1), axis=-1)
        odd = (piv != cupy.arange(1, self._n + 1, dtype=piv.dtype)).sum(axis=-1) % 2 == 1
        return self._to_caller(cupy.where(odd, -product, product).reshape(self._batch))

    def slogdet(self) -> tuple[Any, Any]:
        """``(sign, logabsdet)`` from the factors, as device arrays."""
        diag, swaps = self._host_diagonals()
        absd = np.abs(diag)
        zero = np.any(absd == 0, axis=-1)
        with np.errstate(divide="ignore"):
            logabs = np.where(zero, -np.inf, np.sum(np.log(absd), axis=-1)).astype(absd.dtype)
        unit = np.where(absd == 0, 0, diag / np.where(absd == 0, 1, absd))
        sign = np.where(zero, 0, np.prod(unit, axis=-1) * np.where(swaps % 2, -1, 1)).astype(self._dtype)
        shape = self._batch
        as_dev = self._cupy.asarray
        if not shape:
            return self._to_caller(as_dev(sign[0])), self._to_caller(as_dev(logabs[0]))
        return self._to_caller(as_dev(sign.reshape(shape))), self._to_caller(as_dev(logabs.reshape(shape)))

    @property
    @on_stream
    def factors(self) -> tuple[Any, Any]:
        """``(lu, piv)`` of ``A`` itself (``piv`` 0-based int32, as ``scipy.linalg.lu_factor``);
        a row-major ``A`` was factored as ``A^T``, so this refactors a column-major copy."""
        self._computed()
        if self._factored_transposed:
            column_major = self._a.swapaxes(-1, -2).copy().swapaxes(-1, -2)
            with CudaLU(column_major, stream=self._stream_arg) as other:
                other._to_caller = self._to_caller
                return other.factors
        route = self._computed()
        lu = route.a.copy().swapaxes(-1, -2).reshape(self._batch + (self._n, self._n))  # each matrix column-major
        piv = route.pivots()
        piv = (piv - 1).astype(np.int32).reshape(self._batch + (self._n,))
        return self._to_caller((lu, piv))

    @property
    def singular(self) -> list:
        """Batch elements whose ``U`` has an exact zero pivot (one sync)."""
        self._computed()
        return [batch_index(i, self._batch) for i in self._route.failures()]


# -- Cholesky ------------------------------------------------------------------------------------------


class CudaCholesky(CudaPlanMixin, Cholesky):
    """:class:`~nvmathpy.linalg.Cholesky` on CUDA operands (``potrf`` / ``potrfBatched``)."""

    _failure = "Matrix is not positive definite"

    def __init__(self, a: Any, /, *, lower: bool = True, overwrite_a: bool = False, execution: Any = None,
                 stream: Any = None):
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a")
        self._n, self._batch, self._dtype = self._a.shape[-1], self._a.shape[:-2], self._a.dtype
        self._lower = bool(lower)
        self._transposed, order = transposed_layout(self._a)
        self._fill, self._conjugate = layout.cholesky_fill(self._lower, self._transposed, self._dtype.kind == "c")
        self._problem = Problem.of("cholesky", n=self._n, count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order, lower=self._lower,
                                   fill=self._fill, space="cuda")

    @on_stream
    def use_factor(self, c: Any) -> None:
        """Adopt an existing factor (``L`` if ``lower`` else ``U``; the other triangle is ignored):
        it is copied into the plan's buffer in the layout the plan factors, so the stored
        factor is the one a factorization would have left."""
        c = self._swap_in("c", c, self._a)
        if not self.is_planned:
            self.plan()
        route = self._prepared
        self._clear_derived()
        route.load(storage_view(self._transposed), self._stack(c))
        route.info[...] = 0
        self._route, self._state = route, route

    def _bind(self, prepared: LURoute) -> Callable[[], "CudaCholesky"]:
        view = storage_view(self._transposed)

        def factor() -> "CudaCholesky":
            prepared.load(view, self._stack(self._a))
            prepared.factor()
            self._route, self._state = prepared, prepared
            self.factorizations += 1
            return self

        return factor

    _timing_call = CudaLU._timing_call

    def check(self) -> "CudaCholesky":
        """Raise :class:`~numpy.linalg.LinAlgError` if a matrix is not positive definite (one sync)."""
        self._computed()
        self._failed(self._failure)
        return self

    @on_stream
    def solve(self, b: Any) -> Any:
        """Solve ``A x = b`` with the stored factor on the device (no synchronisation)."""
        b3, vector = self._device_rhs(b, self._n)
        route = self._computed()
        k = b3.shape[-1]
        x = self._cupy.empty((b3.shape[0], k, self._n), self._dtype)
        if b3.size and self._n:
            x.swapaxes(-1, -2)[...] = b3.conj() if self._conjugate else b3
            route.solve(x, k)
        x3 = x.swapaxes(-1, -2)
        return self._to_caller(self._shaped(x3.conj() if self._conjugate else x3, vector))

    @property
    @on_stream
    def factor(self) -> Any:
        """``L`` (``lower``) or ``U``, zero in the other triangle (a new device array)."""
        route = self._computed()
        stored = route.a if self._transposed else route.a.swapaxes(-1, -2)  # A's factor, row-major reading
        triangle = self._cupy.tril if self._lower else self._cupy.triu
        return self._to_caller(triangle(stored).reshape(self._batch + (self._n, self._n)))


# -- the one-shot solve / inverse ----------------------------------------------------------------------


class CudaSolve(CudaPlanMixin, Solve):
    """The one-shot ``A^{-1} B`` / ``A^{-1}`` behind :func:`solve` and :func:`inv` on CUDA."""

    _failure = "Singular matrix"

    def __init__(self, a: Any, /, b: Any = None, *, execution: Any = None, stream: Any = None):
        native = self._device_init(execution, stream, a=a, b=b)
        a = as_device_stack(native["a"], "a")
        b = native.get("b")
        if b is not None:
            dtype = np.result_type(a.dtype, lapack_dtype(b.dtype))
            a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
        self._a, self._b, self._dtype = a, b, a.dtype
        self._n, self._batch = a.shape[-1], a.shape[:-2]
        self._transposed, order = transposed_layout(a)
        self._problem = Problem.of("solve", n=self._n, count=int(np.prod(self._batch, dtype=np.int64)),
                                   k=None if b is None else b.shape[-1], dtype=a.dtype.name, inverse=b is None,
                                   layout=order, space="cuda")

    def _set(self, a: Any, b: Any) -> None:
        self._a, self._b = a, b

    def _bind(self, prepared: LURoute) -> Callable[[], Any]:
        view = storage_view(self._transposed)
        operation = 1 if self._transposed else 0  # A = M^T when the library matrix is A^T
        n, cupy = self._n, self._cupy

        if getattr(prepared, "one_shot", False):  # the tiny route: one kernel, no factors kept
            def one_shot() -> Any:
                self._route = prepared
                x = prepared.run(self._stack(self._a), None if self._b is None else self._stack(self._b))
                shape = self._a.shape if self._b is None else self._b.shape
                return x if x.shape == shape else x.reshape(shape)

            return one_shot

        def compute() -> Any:
            a3 = self._stack(self._a)
            prepared.load(view, a3)
            prepared.factor()
            self._route = prepared
            if self._b is None:
                x = cupy.empty(a3.shape, self._dtype)  # column-major identity blocks
                x[...] = cupy.eye(n, dtype=self._dtype)
                k = n
            else:
                b3 = self._stack(self._b)
                k = b3.shape[-1]
                x = cupy.empty((b3.shape[0], k, n), self._dtype)
                x.swapaxes(-1, -2)[...] = b3
            prepared.solve(x, k, operation)
            shape = self._a.shape if self._b is None else self._b.shape
            return x.swapaxes(-1, -2).reshape(shape)

        return compute

    def check(self) -> "CudaSolve":
        """Raise :class:`~numpy.linalg.LinAlgError` if the last run met a singular matrix (one sync)."""
        self._failed(self._failure)
        return self


# -- Hermitian eigenproblems -----------------------------------------------------------------------------


class CudaEigh(CudaPlanMixin, Eigh):
    """:class:`~nvmathpy.linalg.Eigh` on CUDA operands: standard problems, all eigenvalues
    (``syevd``, or for stacks of n <= 32 ``syevBatched`` / ``syevjBatched``)."""

    _failure = "Eigenvalues did not converge"

    def __init__(self, a: Any, /, b: Any = None, *, eigvals_only: bool = False, subset_by_index: Any = None,
                 subset_by_value: Any = None, lower: bool = True, itype: int = 1, driver: str | None = None,
                 overwrite_a: bool = False, overwrite_b: bool = False, execution: Any = None, stream: Any = None):
        for name, value in (("b", b), ("subset_by_index", subset_by_index), ("subset_by_value", subset_by_value),
                            ("driver", driver)):
            if value is not None:
                raise InvalidOptionError(f"Eigh: {name}= is not supported on CUDA yet; use CPU operands for it")
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a")
        self._b = None
        self._n, self._batch, self._dtype = self._a.shape[-1], self._a.shape[:-2], self._a.dtype
        self._vectors, self._lower = not eigvals_only, bool(lower)
        self._transposed, order = transposed_layout(self._a)
        self._fill, self._conjugate = layout.eigh_fill(self._lower, self._transposed, self._dtype.kind == "c")
        self._problem = Problem.of("eigh", n=self._n, count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order,
                                   vectors=self._vectors, lower=self._lower, fill=self._fill, space="cuda")

    def reset_operands(self, a: Any = None, b: Any = None) -> None:
        if b is not None:
            raise InvalidOperandError("reset_operands: b given but the plan was made for a standard problem")
        if a is not None:
            self._a = self._swap_in("a", a, self._a)
        self._rebind()

    def _bind(self, prepared: LURoute) -> Callable[[], Any]:
        view = storage_view(self._transposed)

        def compute() -> Any:
            prepared.load(view, self._stack(self._a))
            prepared.run()
            self._route = prepared
            self.factorizations += 1
            w = prepared.w.reshape(self._batch + (self._n,)).copy()
            if not self._vectors:
                return self._to_caller(w)
            v = prepared.a.swapaxes(-1, -2)
            v = (v.conj() if self._conjugate else v.copy()).reshape(self._batch + (self._n, self._n))
            return self._to_caller((w, v))

        return compute

    def check(self) -> "CudaEigh":
        """Raise :class:`~numpy.linalg.LinAlgError` if the last run did not converge (one sync)."""
        self._failed(self._failure)
        return self


# -- SVD -----------------------------------------------------------------------------------------------


class CudaSVD(CudaPlanMixin, SVD):
    """:class:`~nvmathpy.linalg.SVD` on CUDA operands (``gesvd``, ``gesvdj`` or ``gesvdp`` on the
    tall one of ``A`` and ``A^T``)."""

    _failure = "SVD did not converge"

    def __init__(self, a: Any, /, *, full_matrices: bool = False, compute_uv: bool = True, driver: str | None = None,
                 overwrite_a: bool = False, execution: Any = None, stream: Any = None):
        if driver is not None:
            raise InvalidOptionError("SVD: driver= is a LAPACK choice; on CUDA autotune picks gesvd, gesvdj or "
                                     "gesvdp")
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a", square=False)
        self._batch, self._dtype = self._a.shape[:-2], self._a.dtype
        self._full, self._uv = bool(full_matrices), bool(compute_uv)
        _, order = transposed_layout(self._a)
        self._problem = Problem.of("svd", shape=list(self._a.shape[-2:]),
                                   count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order,
                                   full_matrices=self._full, compute_uv=self._uv, space="cuda")

    def _bind(self, prepared: SvdRoute) -> Callable[[], Any]:
        return lambda: self._to_caller(self._decompose(prepared))

    def _decompose(self, route: SvdRoute) -> Any:
        a3 = self._stack(self._a)
        storage_view(route.transposed)(route.a)[...] = a3
        route.run()
        self._route = route
        self.factorizations += 1
        s = route.s.reshape(self._batch + (route.k,)).copy()
        if not self._uv:
            return s
        u, vh = route.factors()
        u = u.reshape(self._batch + u.shape[-2:]).copy()
        vh = vh.reshape(self._batch + vh.shape[-2:]).copy()
        return SVDResult(u, s, vh)

    def check(self) -> "CudaSVD":
        """Raise :class:`~numpy.linalg.LinAlgError` if the last run did not converge (one sync)."""
        self._failed(self._failure)
        return self


# -- QR ------------------------------------------------------------------------------------------------


class CudaQR(CudaPlanMixin, QR):
    """:class:`~nvmathpy.linalg.QR` on CUDA operands (``geqrf`` + ``orgqr``/``ungqr``; no pivoting).
    QR needs ``A`` itself, so a row-major ``A`` is copied column-major on the device."""

    def __init__(self, a: Any, /, *, mode: str = "reduced", pivoting: bool = False, overwrite_a: bool = False,
                 execution: Any = None, stream: Any = None):
        if mode not in ("reduced", "complete", "r"):
            raise InvalidOptionError(f"QR: mode={mode!r} is not allowed; allowed: 'reduced', 'complete', 'r'")
        if pivoting:
            raise InvalidOptionError("QR: pivoting=True is not supported on CUDA yet; use CPU operands for it")
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a", square=False)
        self._batch, self._dtype = self._a.shape[:-2], self._a.dtype
        self._mode, self._pivoting = mode, False
        _, order = transposed_layout(self._a)
        self._problem = Problem.of("qr", shape=list(self._a.shape[-2:]),
                                   count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order, mode=mode,
                                   space="cuda")

    def _bind(self, prepared: Any) -> Callable[[], Any]:
        m, n = self._a.shape[-2:]
        rows = m if self._mode == "complete" else min(m, n)
        cupy = self._cupy

        def compute() -> Any:
            storage_view(False)(prepared.a)[...] = self._stack(self._a)
            prepared.run()
            self._route = prepared
            self.factorizations += 1
            r = cupy.triu(prepared.a.swapaxes(-1, -2)[:, :rows, :]).reshape(self._batch + (rows, n))
            if self._mode == "r":
                self._state, self._result = (None, r), r
                return self._to_caller(r)
            q = prepared.q.swapaxes(-1, -2).copy().reshape(self._batch + (m, prepared.q_cols))
            self._state, self._result = (q, r), QRResult(q, r)
            return self._to_caller(self._result)

        return compute

    def execute(self) -> Any:
        return self._run()

    @property
    def p(self) -> Any:
        raise InvalidOptionError("QR: p exists only with pivoting=True, which CUDA plans do not support")

    def solve(self, b: Any) -> Any:
        raise InvalidOptionError("QR.solve is not supported on CUDA yet; use Lstsq(a).solve(b)")

    def check(self) -> "CudaQR":
        return self


# -- least squares ---------------------------------------------------------------------------------------


class CudaLstsq(CudaPlanMixin, Lstsq):
    """:class:`~nvmathpy.linalg.Lstsq` on CUDA operands: one SVD (``gesvd``/``gesvdj``/``gesvdp``), then
    ``x = V diag(1/s) U^H b`` over the singular values above ``rcond * s_max`` per solve."""

    _failure = "SVD did not converge in linear least squares"

    def __init__(self, a: Any, /, *, rcond: float | None = None, execution: Any = None, stream: Any = None):
        native = self._device_init(execution, stream, a=a)
        self._a = as_device_stack(native["a"], "a", square=False)
        self._batch, self._dtype = self._a.shape[:-2], self._a.dtype
        m, n = self._a.shape[-2:]
        eps = np.finfo(self._dtype).eps
        self._rcond = float(eps * max(m, n) if rcond is None or rcond < 0 else rcond)
        _, order = transposed_layout(self._a)
        self._problem = Problem.of("lstsq", shape=[m, n], count=int(np.prod(self._batch, dtype=np.int64)),
                                   batch=list(self._batch), dtype=self._dtype.name, layout=order,
                                   full_matrices=False, compute_uv=True, rcond=self._rcond, space="cuda")

    def _bind(self, prepared: SvdRoute) -> Callable[[], "CudaLstsq"]:
        def factor() -> "CudaLstsq":
            storage_view(prepared.transposed)(prepared.a)[...] = self._stack(self._a)
            prepared.run()
            self._route = self._state = prepared
            self.factorizations += 1
            return self

        return factor

    def execute(self) -> "CudaLstsq":
        return self._run()

    def check(self) -> "CudaLstsq":
        self._computed()
        self._failed(self._failure)
        return self

    @on_stream
    def solve(self, b: Any) -> tuple[Any, Any, Any, Any]:
        """``(x, residuals, rank, s)`` with NumPy's conventions (rank read on the host: one sync)."""
        m, n = self._a.shape[-2:]
        b3, vector = self._device_rhs(b, m)
        route = self._computed()
        cupy = self._cupy
        s = route.s
        u, vh = route.factors()
        keep = s > self._rcond * s[:, :1] if s.shape[-1] else cupy.zeros(s.shape, bool)
        inverse = cupy.where(keep, 1 / cupy.where(keep, s, 1), 0).astype(self._dtype)
        x3 = vh.conj().swapaxes(-1, -2) @ ((u.conj().swapaxes(-1, -2) @ b3) * inverse[..., None])
        ranks = cupy.asnumpy(keep.sum(axis=-1)).astype(np.int32)
        if m > n and bool(np.all(ranks == n)):
            res = (cupy.abs(b3 - self._stack(self._a) @ x3) ** 2).sum(axis=-2)
            res = res.reshape(self._batch + res.shape[-1:])
        else:
            res = cupy.empty(self._batch + (0,), np.finfo(self._dtype).dtype)
        rank = ranks.reshape(self._batch) if self._batch else int(ranks[0])
        s_out = s.reshape(self._batch + s.shape[-1:]).copy()
        return self._to_caller((self._shaped(x3, vector), res, rank, s_out))


CUDA_PLANS.update({LU: CudaLU, Cholesky: CudaCholesky, Solve: CudaSolve, Eigh: CudaEigh, SVD: CudaSVD, QR: CudaQR,
             Lstsq: CudaLstsq})
