"""The builders of the prepared calls (:mod:`._prepared`), one per SciPy-style function.

Each builder takes the first call's operands (one CuPy matrix ``a`` of a prepared dtype, ``b``
of the same dtype or None), plans the problem once with the CUDA plan classes, keeps the plan
(it owns the route: handles, workspaces, private buffers) and returns a
:class:`~._prepared.Prepared` whose ``run(a, b, stream)`` does only what changes per call:
copy the operands into the private buffers, call the route, make the results, check the
:class:`~._prepared.Flags`. Results follow SciPy's conventions (tuples where SciPy returns
them). ``None`` means "not prepared" (the general way then gives the answer or the error).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....cuda.bindings import cublas, cusolver
from ....errors import InvalidOperandError, InvalidOptionError, LinAlgError
from ..cpu._factored import check_trans
from . import _layout as layout
from . import _routes as routes
from . import _triangular as triangular
from ._engine import GeqrfRoute, GetrfLoop, PotrfLoop, SvdRoute, SyevdLoop
from ._operands import storage_view
from ._plans import CudaCholesky, CudaEigh, CudaLstsq, CudaLU, CudaQR, CudaSolve, CudaSVD
from ._prepared import BUILDERS, LATE, Flags, Prepared
from ._prepared_parts import (
    finite_checks, gesvd, getrf_args, getrf_in_place, getrs_args, loaded_in_place, masked_triangle, planned, potrf,
    potrs, solver, solver_head, square, workspace,
)
from ._routes import pointer

__all__: list[str] = []


def _cholesky(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    (lower,) = options
    if not square(a):
        return None
    plan = CudaCholesky(a, lower=lower)
    route = planned(plan, PotrfLoop)
    if route is None:
        return None
    flags = Flags(cupy, finite_checks(finite, a), 1, CudaCholesky._failure)
    verdict = flags.segments[0] if finite else None
    factor = potrf(route, pointer(flags.info))
    target = storage_view(plan._transposed)(route.a)[0]  # A's factor, read row-major, is written here
    n = a.shape[0]
    triangle = masked_triangle(cupy, n, n, lower)

    def run(stream: int, a: Any) -> Any:
        if finite:
            cupy.isfinite(a, out=verdict)
        target[...] = a
        factor(stream)
        c = triangle(target)
        flags.check(cupy, stream)
        return c

    return Prepared(run, plan)


def _cho_solve(cupy: Any, c: Any, b: Any, *, options: tuple, finite: bool) -> Prepared | None:
    (lower,) = options
    if not square(c, b):
        return None
    plan = CudaCholesky(c, lower=lower)
    route = planned(plan, PotrfLoop)
    if route is None:
        return None
    if plan._conjugate:  # a complex factor read conjugated: the general way
        plan.free()
        return None
    target = storage_view(plan._transposed)(route.a)[0]
    flags = Flags(cupy, finite_checks(finite, c, b)) if finite else None
    verdicts = flags.segments if finite else None
    solve = potrs(route, 1 if b.ndim == 1 else b.shape[1])

    def run(stream: int, c: Any, b: Any) -> Any:
        if finite:
            cupy.isfinite(c, out=verdicts[0])
            cupy.isfinite(b, out=verdicts[1])
        target[...] = c
        x = b.copy(order="F")  # column-major n x k: solved in place
        solve(stream, int(x.data.ptr))
        if finite:
            flags.check(cupy, stream)
        return x

    return Prepared(run, plan)


def _lu_route(cupy: Any, a: Any) -> tuple[Any, Any] | None:
    """A plan and its ``getrf`` route for one column-major ``A`` (factors of ``A`` itself)."""
    plan = CudaLU(cupy.asfortranarray(a))
    route = planned(plan, GetrfLoop)
    return None if route is None else (plan, route)


def _lu_factor(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    found = _lu_route(cupy, a) if square(a) else None
    if found is None:
        return None
    plan, route = found
    pivots = route.piv[0]
    # A written column-major: the copy transposes a row-major A; no singular matrix is reported (SciPy warns)
    load_and_factor, flags = getrf_in_place(cupy, route, route.a[0].T, a, finite)

    def run(stream: int, a: Any) -> Any:
        load_and_factor(stream, a)
        lu = route.a[0].copy().T
        piv = (pivots - 1).astype(np.int32)
        if finite:
            flags.check(cupy, stream)
        return lu, piv

    return Prepared(run, plan)


def _lu_solve(cupy: Any, lu: Any, piv: Any, b: Any, *, options: tuple, finite: bool) -> Prepared | None:
    (trans,) = options
    n = lu.shape[0]
    if not square(lu, b) or piv.shape != (n,) or piv.dtype.kind not in "iu":
        return None
    try:
        trans = check_trans(trans)
    except InvalidOptionError:
        return None
    operation, conjugate = layout.getrs_operation(trans, False, lu.dtype.kind == "c")
    found = None if conjugate else _lu_route(cupy, lu)
    if found is None:
        return None
    plan, route = found
    out_of_range = (f"piv: pivot indices out of range; 0-based pivots of an order-{n} factor lie in [0, {n})")
    # SciPy's lu_solve checks only b's finiteness and solves with a singular factor (infinities
    # come back, no error); the pivots' range is checked so that cuSOLVER never reads a stray row
    checks = finite_checks(finite, b) + [
        ((n,), lambda late, index: InvalidOperandError(out_of_range + (LATE if late else "")))]
    flags = Flags(cupy, checks)
    *finite_verdicts, in_range = flags.segments
    # column-major factors (lu_factor's) are read where they are; others are copied column-major
    direct = lu.strides == (lu.dtype.itemsize, n * lu.dtype.itemsize)
    target, factors = route.a[0].T, pointer(route.a)
    one_based = cupy.arange(1, n + 1, dtype=route.piv.dtype)  # 0-based pivot i -> i + 1
    pivots, unsigned = route.piv[0], np.dtype(f"u{piv.dtype.itemsize}")
    head, middle, tail = getrs_args(route, operation, 1 if b.ndim == 1 else b.shape[1])
    lib, handle, check = cusolver.LIB, route.ctx.handle, flags.check

    def run(stream: int, lu: Any, piv: Any, b: Any) -> Any:
        if finite:
            cupy.isfinite(b, out=finite_verdicts[0])
        cupy.less(piv.view(unsigned), n, out=in_range)  # a negative index reads as a large one
        cupy.take(one_based, piv, out=pivots)  # CuPy's take wraps an out-of-range index: never a stray row
        if direct:
            a = lu.data.ptr
        else:
            target[...] = lu
            a = factors
        x = b.copy(order="F")  # column-major n x k: solved in place
        lib.cusolverDnSetStream(handle, stream)
        lib.cusolverDnXgetrs(*head, a, *middle, x.data.ptr, *tail)
        check(cupy, stream)
        return x

    return Prepared(run, plan)


def _det(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    n = a.shape[0]
    if not square(a):
        return None
    plan = CudaLU(a)
    route = planned(plan, GetrfLoop)
    if route is None:
        return None
    target = storage_view(plan._transposed)(route.a)[0]  # det(A^T) = det(A): either reading
    diagonal, pivots = cupy.diagonal(target), route.piv[0]
    unmoved = cupy.arange(1, n + 1, dtype=pivots.dtype)
    load_and_factor, flags = getrf_in_place(cupy, route, target, a, finite)

    def run(stream: int, a: Any) -> Any:
        load_and_factor(stream, a)
        det = cupy.where(pivots != unmoved, -diagonal, diagonal).prod()  # a sign flip per row swap
        if finite:
            flags.check(cupy, stream)
        return det

    return Prepared(run, plan)


def _lu_solver(cupy: Any, a: Any, b: Any, finite: bool) -> tuple | None:
    """The plan, route, load target, flags and ``getrf`` arguments of :func:`_solve` and :func:`_inv`."""
    plan = CudaSolve(a, b)
    route = planned(plan, GetrfLoop)
    if route is None:
        return None
    flags = Flags(cupy, finite_checks(finite, a) + finite_checks(finite and b is not None, b), 1,
                  CudaSolve._failure)
    return plan, route, storage_view(plan._transposed)(route.a)[0], flags, getrf_args(route, pointer(flags.info))


def _solve(cupy: Any, a: Any, b: Any, *, options: tuple, finite: bool) -> Prepared | None:
    found = _lu_solver(cupy, a, b, finite) if square(a, b) else None
    if found is None:
        return None
    plan, route, target, flags, getrf = found
    head, middle, tail = getrs_args(route, 1 if plan._transposed else 0, 1 if b.ndim == 1 else b.shape[1])  # A^T
    factors, verdicts, lib, handle = pointer(route.a), flags.segments, cusolver.LIB, route.ctx.handle
    check = flags.check

    def run(stream: int, a: Any, b: Any) -> Any:
        if finite:
            cupy.isfinite(a, out=verdicts[0])
            cupy.isfinite(b, out=verdicts[1])
        target[...] = a
        x = b.copy(order="F")  # column-major n x k: solved in place
        lib.cusolverDnSetStream(handle, stream)
        lib.cusolverDnXgetrf(*getrf)
        lib.cusolverDnXgetrs(*head, factors, *middle, x.data.ptr, *tail)
        check(cupy, stream)
        return x

    return Prepared(run, plan)


def _inv(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    found = _lu_solver(cupy, a, None, finite) if square(a) else None
    if found is None:
        return None
    plan, route, target, flags, getrf = found
    n = a.shape[0]
    head, middle, tail = getrs_args(route, 1 if plan._transposed else 0, n)
    factors, verdicts, lib, handle = pointer(route.a), flags.segments, cusolver.LIB, route.ctx.handle
    identity = cupy.eye(n, dtype=a.dtype)

    def run(stream: int, a: Any) -> Any:
        if finite:
            cupy.isfinite(a, out=verdicts[0])
        target[...] = a
        x = identity.copy()  # column-major identity, solved in place: A^{-1} column-major
        lib.cusolverDnSetStream(handle, stream)
        lib.cusolverDnXgetrf(*getrf)
        lib.cusolverDnXgetrs(*head, factors, *middle, int(x.data.ptr), *tail)
        flags.check(cupy, stream)
        return x.T

    return Prepared(run, plan)


def _eigh(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    lower, vectors = options
    if not square(a):
        return None
    plan = CudaEigh(a, eigvals_only=not vectors, lower=lower)
    route = planned(plan, SyevdLoop)
    if route is None:
        return None
    flags = Flags(cupy, finite_checks(finite, a), 1, CudaEigh._failure)
    n, dt = route.n, route.data_type
    args = (*solver_head(route), route.jobz, route.fill, n, dt, pointer(route.a), max(1, n), route.real_type,
            pointer(route.w), dt, *workspace(route), pointer(flags.info))
    decompose = solver("cusolverDnXsyevd", route.ctx.handle, args)
    target = storage_view(plan._transposed)(route.a)[0]
    values, columns, conjugate = route.w[0], route.a[0], plan._conjugate  # eigenvectors column-major
    load_and_decompose = loaded_in_place(cupy, flags, finite, target, decompose)

    def run(stream: int, a: Any) -> Any:
        load_and_decompose(stream, a)
        w = values.copy()
        if vectors:
            v = columns.T.conj() if conjugate else columns.copy().T
        flags.check(cupy, stream)
        return (w, v) if vectors else w

    return Prepared(run, plan)


def _svd_route(cupy: Any, plan: Any, finite: bool, operands: tuple) -> tuple | None:
    """The route, flags, load target and ``factors()`` of an SVD plan (:func:`_svd`)."""
    route = planned(plan, SvdRoute)
    if route is None:
        return None
    flags = Flags(cupy, finite_checks(finite, *operands), 1, plan._failure)
    route.info = flags.info
    # views of the route's outputs, except V^H made from V per call (Jacobi, polar routes)
    views = None if route.gives_v else tuple(x[0] for x in route.factors())
    return route, flags, storage_view(route.transposed)(route.a)[0], (
        lambda: views or tuple(x[0] for x in route.factors()))


def _svd(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    full, uv = options
    plan = CudaSVD(a, full_matrices=full, compute_uv=uv)
    found = _svd_route(cupy, plan, finite, (a,))
    if found is None:
        return None
    route, flags, target, factors = found
    values = route.s[0]
    load_and_decompose = loaded_in_place(cupy, flags, finite, target, gesvd(route, pointer(flags.info)))

    def run(stream: int, a: Any) -> Any:
        load_and_decompose(stream, a)
        s = values.copy()
        if uv:
            u, vh = factors()
            out = (u.copy(), s, vh.copy())
        else:
            out = s
        flags.check(cupy, stream)
        return out

    return Prepared(run, plan)


def _lstsq(cupy: Any, a: Any, b: Any, *, options: tuple, finite: bool) -> Prepared | None:
    """``(x, residues, rank, s)`` as ``nvmathpy.linalg.lstsq`` computes them on CUDA. The rank is
    a Python int: the singular values are read with the flags (one synchronisation in either
    check mode, a failure reported late when deferred) and the rank counted on the host; ``x``
    is then made from the leading ``rank`` singular triplets."""
    (rcond,) = options
    m, n = a.shape
    if b.ndim not in (1, 2) or b.shape[0] != m or b.dtype != a.dtype:
        return None
    plan = CudaLstsq(a, rcond=rcond)
    route = planned(plan, SvdRoute)
    if route is None:
        return None
    s = route.s[0]
    flags = Flags(cupy, finite_checks(finite, a, b), 1, plan._failure, tail=(s.size, s.dtype))
    route.info = flags.info
    views = None if route.gives_v else tuple(x[0] for x in route.factors())  # V^H made per call otherwise
    target = storage_view(route.transposed)(route.a)[0]
    cut, dtype, vector, k = plan._rcond, a.dtype, b.ndim == 1, 1 if b.ndim == 1 else b.shape[1]
    load_and_decompose = loaded_in_place(cupy, flags, finite, target, gesvd(route, pointer(flags.info)))
    real, tail, judged, size, complex_ = np.finfo(dtype).dtype, flags.tail, not finite, s.size, dtype.kind == "c"
    start, b_verdict = -size * s.itemsize, flags.segments[1] if finite else None
    # per rank: (V_r, U_r^T, s_r as a column), views of the route's outputs (real dtypes: no conjugate to copy)
    by_rank: dict[int, tuple] = {}

    def parts(rank: int) -> tuple:
        found = by_rank.get(rank)
        if found is None:
            u, vh = views or tuple(x[0] for x in route.factors())
            if complex_:
                return vh[:rank].conj().T, u[:, :rank].conj().T, s[:rank, None]
            found = (vh[:rank].T, u[:, :rank].T, s[:rank, None])
            if views is not None:
                by_rank[rank] = found
        return found

    def run(stream: int, a: Any, b: Any) -> Any:
        if finite:
            cupy.isfinite(b, out=b_verdict)
        load_and_decompose(stream, a)
        tail[...] = s
        values = flags.read(cupy, judged)[start:].view(s.dtype)
        rank = int(np.count_nonzero(values > cut * values[0]))
        b2 = b[:, None] if vector else b
        if rank:
            v_r, u_h, s_r = parts(rank)
            x = v_r @ ((u_h @ b2) / s_r)
        else:
            x = cupy.zeros((n, k), dtype)
        if m > n and rank == n:
            residues = (cupy.abs(b2 - a @ x) ** 2).sum(axis=0)
        else:
            residues = cupy.empty((0,), real)
        return x[:, 0] if vector else x, residues, rank, s.copy()

    return Prepared(run, plan)


def _qr(cupy: Any, a: Any, *, options: tuple, finite: bool) -> Prepared | None:
    (mode,) = options  # SciPy's: "full", "economic" or "r" (R with all m rows)
    m, n = a.shape
    plan = CudaQR(a, mode={"full": "complete", "economic": "reduced", "r": "r"}[mode])
    route = planned(plan, GeqrfRoute)
    if route is None:
        return None
    target = route.a[0].T  # A column-major
    rows = min(m, n) if mode == "economic" else m
    r_view, triangle = target[:rows, :], masked_triangle(cupy, rows, n, False)
    flags = Flags(cupy, finite_checks(True, a)) if finite else None
    dt, info, tau = route.data_type, pointer(route.info), pointer(route.tau)
    geqrf = (*solver_head(route), m, n, dt, pointer(route.a), max(1, m), dt, tau, dt, *workspace(route), info)
    factor = solver("cusolverDnXgeqrf", route.ctx.handle, geqrf)
    if route.q is not None:  # the reflectors into Q's buffer, then Q formed there
        reflectors = min(n, route.q_cols)
        q_part, reflected = route.q[0, :reflectors, :], route.a[0, :reflectors, :]
        name = f"cusolverDn{routes.PREFIX[route.dtype_name]}{'ungqr' if a.dtype.kind == 'c' else 'orgqr'}"
        orgqr = (route.ctx.handle, m, route.q_cols, route.k, pointer(route.q), max(1, m), tau, route.work.device,
                 route.lwork, info)

    def run(stream: int, a: Any) -> Any:
        if finite:
            cupy.isfinite(a, out=flags.segments[0])
        target[...] = a
        factor(stream)
        if route.q is not None:
            q_part[...] = reflected
            getattr(cusolver.LIB, name)(*orgqr)
        r = triangle(r_view)
        out = (r,) if route.q is None else (route.q[0].copy().T, r)
        if finite:
            flags.check(cupy, stream)
        return out

    return Prepared(run, plan)


def _zero_diagonal(late: bool, index: int) -> BaseException:
    """A triangular matrix's zero diagonal entry ``index``."""
    return LinAlgError(f"singular matrix: resolution failed at diagonal {index}" + (LATE if late else ""))


def _solve_triangular(cupy: Any, a: Any, b: Any, *, options: tuple, finite: bool) -> Prepared | None:
    lower, trans, unit = options
    n = a.shape[0]
    if not square(a, b):
        return None
    try:
        trans = check_trans(trans)
    except InvalidOptionError:
        return None
    item = a.dtype.itemsize
    args = triangular._arguments(n, (a.strides[0] // item, a.strides[1] // item), bool(lower), trans)
    if args is None:  # A strided both ways: the general way copies it
        return None
    k = 1 if b.ndim == 1 else b.shape[1]
    m, cols, ldb = (k, n, max(1, k)) if args.side == cublas.SideMode.RIGHT else (n, k, max(1, n))
    diag = int(cublas.DiagType.UNIT if unit else cublas.DiagType.NON_UNIT)
    name = triangular._names(a.dtype)[0]
    alpha = triangular._one(a.dtype).ctypes.data
    handle = routes.blas_handle(a.device.id)
    checks = finite_checks(finite, a, b) + ([] if unit else [((n,), _zero_diagonal)])
    flags = Flags(cupy, checks) if checks else None
    verdicts = flags.segments if checks else None
    nonzero = None if unit else verdicts[-1]
    vector, order, lda, lib = b.ndim == 1, args.x_order, args.ld, cublas.LIB
    head = (handle, args.side, args.fill, args.operation, diag, m, cols, alpha)  # trsm's, up to A
    check = None if flags is None else flags.check

    def run(stream: int, a: Any, b: Any) -> Any:
        if finite:
            cupy.isfinite(a, out=verdicts[0])
            cupy.isfinite(b, out=verdicts[1])
        if nonzero is not None:
            cupy.not_equal(a.diagonal(), 0, out=nonzero)
        x = (b[:, None] if vector else b).copy(order=order)  # solved in place
        lib.cublasSetStream_v2(handle, stream)
        getattr(lib, name)(*head, a.data.ptr, lda, x.data.ptr, ldb)
        if check is not None:
            check(cupy, stream)
        return x[:, 0] if vector else x

    return Prepared(run)


BUILDERS.update({
    "cholesky": _cholesky, "cho_solve": _cho_solve, "lu_factor": _lu_factor, "lu_solve": _lu_solve, "det": _det,
    "solve": _solve, "inv": _inv, "eigh": _eigh, "svd": _svd, "lstsq": _lstsq, "qr": _qr,
    "solve_triangular": _solve_triangular})
