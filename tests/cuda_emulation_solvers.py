"""A host emulation of the cuSOLVER / cuBLAS calls the CUDA solver engine makes, for tests
without a GPU.

Every routine the engine calls (``cusolverDnXgetrf``, ``Xgetrs``, ``Xpotrf``, ``Xpotrs``,
``Xsyevd``, ``XsyevBatched``, ``<t>syevjBatched``, ``Xgesvd``, ``Xgesvdp``, ``<t>gesvdj``, ``Xgeqrf``,
``<t>orgqr``/``ungqr``,
``<t>potrfBatched``/``potrsBatched``, ``cublas<t>getrfBatched``/``getrsBatched``,
``cublas<t>trsm_v2``/``trsmBatched`` and the ``_bufferSize`` queries) is replaced by a function that does what the cuSOLVER documentation says
on host memory with ``scipy.linalg.lapack``: it reads the column-major matrices at the pointers
and leading dimensions the engine passed (through the pointer arrays for the batched routines),
writes results and ``info`` codes back there, and records each call's arguments in
:attr:`Emulation.calls`. It also insists on what the library insists on: ``gesvd`` gets
``m >= n``, ``potrsBatched`` one right-hand side, every run the workspace its query asked for,
``trsm`` leading dimensions of at least the rows.

The deferred checks' pinned copies and events (``cupy.cuda.alloc_pinned_memory``,
``cupy.cuda.runtime.memcpyAsync`` / ``eventRecord`` / ``eventQuery``) are host copies and events
that have always completed (:attr:`Emulation.ready` False makes them pending).

The arrays are NumPy arrays answering ``.data.ptr`` with their host address
(:class:`cuda_emulation.HostArray`, through :func:`cuda_emulation.host_cupy`, extended here with
the few CuPy functions the solver plans use).
"""

from __future__ import annotations

import ctypes
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.linalg import lapack

from cuda_emulation import HostArray, _host, _view, host_cupy
from nvmathpy.cuda.bindings import cublas, cusolver
from nvmathpy.cuda.bindings.library_types import DataType

__all__ = ["Emulation", "HostArray", "dev", "install", "matrix", "solver_cupy"]

NP_OF = {DataType.R_32F: np.float32, DataType.R_64F: np.float64, DataType.C_32F: np.complex64,
         DataType.C_64F: np.complex128}
PREFIX_DTYPE = {"S": np.float32, "D": np.float64, "C": np.complex64, "Z": np.complex128}
#: Workspace sizes the emulated queries answer (distinct, so a run with the wrong one is caught).
DEVICE_BYTES, HOST_BYTES, LWORK = 4096 + 8, 512 + 8, 96


#: The NumPy functions the solver plans call through CuPy beyond :func:`cuda_emulation.host_cupy`'s.
EXTRA_CUPY = ("tril", "triu", "diagonal", "eye", "abs", "where", "asfortranarray", "isfinite", "ones", "indices",
              "prod", "clip", "less", "not_equal", "take", "copyto")


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None) -> Any:
    """``cupy.take``: an out-of-range index wraps around (CuPy's rule; NumPy's default raises)."""
    return np.asarray(a).take(indices, axis, out, mode="wrap")


def _extra(name: str) -> Callable[..., Any]:
    if name == "copyto":  # writes into its first operand: returns nothing
        return np.copyto
    return _host(_take if name == "take" else getattr(np, name))


def solver_cupy() -> Any:
    """:func:`cuda_emulation.host_cupy` plus what the solver plans call."""
    module = host_cupy()
    for name in EXTRA_CUPY:
        setattr(module, name, _extra(name))
    return module


def dev(x: Any) -> HostArray:
    """``x`` (host memory) dressed as a CuPy array: the same memory, answering ``.data.ptr``."""
    return np.asarray(x).view(HostArray)


def matrix(pointer: int, dtype: Any, rows: int, cols: int, ld: int) -> np.ndarray:
    """The column-major ``rows x cols`` matrix at ``pointer`` with leading dimension ``ld`` (a view)."""
    return _view(pointer, dtype, (rows, cols), (1, ld))


def ints(pointer: int, dtype: Any, count: int) -> np.ndarray:
    return _view(pointer, dtype, (count,), (1,))


def out(ref: Any, value: Any) -> None:
    """Write through a ``ctypes.byref`` argument."""
    ref._obj.value = value


def lapack_fn(name: str, dtype: Any) -> Callable[..., Any]:
    complex_names = {"syevd": "heevd", "orgqr": "ungqr"}
    dtype = np.dtype(dtype)
    prefix = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[dtype.name]
    return getattr(lapack, prefix + (complex_names.get(name, name) if dtype.kind == "c" else name))


@dataclass
class Emulation:
    """The installed emulation: recorded calls ``(name, args)`` and the queried sizes."""

    calls: list[tuple[str, tuple]] = field(default_factory=list)
    #: Whether recorded events have completed (``eventQuery``'s answer).
    ready: bool = True

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[tuple]:
        return [args for n, args in self.calls if n == name]

    # -- helpers -----------------------------------------------------------------------------------

    def record(self, name: str, args: tuple) -> None:
        self.calls.append((name, args))

    @staticmethod
    def query(device: Any, host: Any = None) -> int:
        out(device, DEVICE_BYTES)
        if host is not None:
            out(host, HOST_BYTES)
        return 0

    @staticmethod
    def workspace(dwork: int, dbytes: int, hwork: int, hbytes: int) -> None:
        assert dwork and dbytes >= DEVICE_BYTES, "a run without the device workspace its query asked for"
        assert hwork and hbytes >= HOST_BYTES, "a run without the host workspace its query asked for"

    # -- LU ------------------------------------------------------------------------------------------

    def getrf_size(self, h, params, m, n, dt, a, lda, ct, dbytes, hbytes):
        self.record("cusolverDnXgetrf_bufferSize", (m, n, dt, lda, ct))
        return self.query(dbytes, hbytes)

    def getrf(self, h, params, m, n, dt, a, lda, ipiv, ct, dwork, dbytes, hwork, hbytes, info):
        self.record("cusolverDnXgetrf", (m, n, dt, a, lda, ipiv, ct, info))
        self.workspace(dwork, dbytes, hwork, hbytes)
        view = matrix(a, NP_OF[dt], m, n, lda)
        lu, piv, code = lapack_fn("getrf", view.dtype)(np.array(view, order="F"))
        view[...] = lu
        ints(ipiv, np.int64, min(m, n))[...] = piv + 1
        ints(info, np.int32, 1)[0] = code
        return 0

    def getrs(self, h, params, trans, n, nrhs, dt, a, lda, ipiv, dtb, b, ldb, info):
        self.record("cusolverDnXgetrs", (trans, n, nrhs, dt, a, lda, ipiv, b, ldb))
        dtype = NP_OF[dt]
        lu = np.array(matrix(a, dtype, n, n, lda), order="F")
        rhs = matrix(b, dtype, n, nrhs, ldb)
        x, code = lapack_fn("getrs", dtype)(lu, ints(ipiv, np.int64, n) - 1, np.array(rhs, order="F"), trans=trans)
        rhs[...] = x
        ints(info, np.int32, 1)[0] = code
        return 0

    def getrf_batched(self, prefix: str) -> Callable[..., int]:
        def run(h, n, pointers, lda, pivots, info, batch):
            self.record(f"cublas{prefix}getrfBatched", (n, pointers, lda, pivots, info, batch))
            dtype = PREFIX_DTYPE[prefix]
            addresses = ints(pointers, np.uint64, batch)
            for i in range(batch):
                view = matrix(int(addresses[i]), dtype, n, n, lda)
                lu, piv, code = lapack_fn("getrf", dtype)(np.array(view, order="F"))
                view[...] = lu
                ints(pivots + 4 * n * i, np.int32, n)[...] = piv + 1
                ints(info + 4 * i, np.int32, 1)[0] = code
            return 0

        return run

    def getrs_batched(self, prefix: str) -> Callable[..., int]:
        def run(h, trans, n, nrhs, a_pointers, lda, pivots, b_pointers, ldb, info, batch):
            self.record(f"cublas{prefix}getrsBatched", (trans, n, nrhs, a_pointers, lda, pivots, b_pointers, ldb,
                                                        batch))
            dtype = PREFIX_DTYPE[prefix]
            a_at, b_at = ints(a_pointers, np.uint64, batch), ints(b_pointers, np.uint64, batch)
            for i in range(batch):
                lu = np.array(matrix(int(a_at[i]), dtype, n, n, lda), order="F")
                rhs = matrix(int(b_at[i]), dtype, n, nrhs, ldb)
                piv = ints(pivots + 4 * n * i, np.int32, n) - 1
                rhs[...] = lapack_fn("getrs", dtype)(lu, piv, np.array(rhs, order="F"), trans=trans)[0]
            out(info, 0)
            return 0

        return run

    # -- Cholesky --------------------------------------------------------------------------------------

    def potrf_size(self, h, params, uplo, n, dt, a, lda, ct, dbytes, hbytes):
        self.record("cusolverDnXpotrf_bufferSize", (uplo, n, dt, lda, ct))
        return self.query(dbytes, hbytes)

    @staticmethod
    def _potrf(view: np.ndarray, uplo: int) -> int:
        c, code = lapack_fn("potrf", view.dtype)(np.array(view, order="F"), lower=uplo == cublas.FillMode.LOWER,
                                                 clean=0)
        view[...] = c
        return code

    def potrf(self, h, params, uplo, n, dt, a, lda, ct, dwork, dbytes, hwork, hbytes, info):
        self.record("cusolverDnXpotrf", (uplo, n, dt, a, lda, ct, info))
        self.workspace(dwork, dbytes, hwork, hbytes)
        ints(info, np.int32, 1)[0] = self._potrf(matrix(a, NP_OF[dt], n, n, lda), uplo)
        return 0

    def potrs(self, h, params, uplo, n, nrhs, dt, a, lda, dtb, b, ldb, info):
        self.record("cusolverDnXpotrs", (uplo, n, nrhs, dt, a, lda, b, ldb))
        dtype = NP_OF[dt]
        c = np.array(matrix(a, dtype, n, n, lda), order="F")
        rhs = matrix(b, dtype, n, nrhs, ldb)
        rhs[...] = lapack_fn("potrs", dtype)(c, np.array(rhs, order="F"), lower=uplo == cublas.FillMode.LOWER)[0]
        ints(info, np.int32, 1)[0] = 0
        return 0

    def potrf_batched(self, prefix: str) -> Callable[..., int]:
        def run(h, uplo, n, pointers, lda, info, batch):
            self.record(f"cusolverDn{prefix}potrfBatched", (uplo, n, pointers, lda, info, batch))
            dtype = PREFIX_DTYPE[prefix]
            addresses = ints(pointers, np.uint64, batch)
            for i in range(batch):
                ints(info + 4 * i, np.int32, 1)[0] = self._potrf(matrix(int(addresses[i]), dtype, n, n, lda), uplo)
            return 0

        return run

    def potrs_batched(self, prefix: str) -> Callable[..., int]:
        def run(h, uplo, n, nrhs, a_pointers, lda, b_pointers, ldb, info, batch):
            self.record(f"cusolverDn{prefix}potrsBatched", (uplo, n, nrhs, a_pointers, lda, b_pointers, ldb, batch))
            assert nrhs == 1, "potrsBatched supports one right-hand side"
            dtype = PREFIX_DTYPE[prefix]
            a_at, b_at = ints(a_pointers, np.uint64, batch), ints(b_pointers, np.uint64, batch)
            for i in range(batch):
                c = np.array(matrix(int(a_at[i]), dtype, n, n, lda), order="F")
                rhs = matrix(int(b_at[i]), dtype, n, 1, ldb)
                rhs[...] = lapack_fn("potrs", dtype)(c, np.array(rhs, order="F"),
                                                     lower=uplo == cublas.FillMode.LOWER)[0]
            ints(info, np.int32, 1)[0] = 0
            return 0

        return run

    # -- eigenproblems -----------------------------------------------------------------------------------

    def syevd_size(self, h, params, jobz, uplo, n, dt, a, lda, dtw, w, ct, dbytes, hbytes, *batch):
        self.record("cusolverDnXsyevd_bufferSize" if not batch else "cusolverDnXsyevBatched_bufferSize",
                    (jobz, uplo, n, dt, lda, dtw))
        return self.query(dbytes, hbytes)

    @staticmethod
    def _syevd(a: int, w: int, jobz: int, uplo: int, n: int, dtype: Any, lda: int) -> int:
        view = matrix(a, dtype, n, n, lda)
        values, vectors, code = lapack_fn("syevd", dtype)(np.array(view, order="F"), compute_v=int(jobz),
                                                          lower=int(uplo == cublas.FillMode.LOWER))
        ints(w, np.finfo(dtype).dtype, n)[...] = values
        if jobz:
            view[...] = vectors
        return code

    def syevd(self, h, params, jobz, uplo, n, dt, a, lda, dtw, w, ct, dwork, dbytes, hwork, hbytes, info):
        self.record("cusolverDnXsyevd", (jobz, uplo, n, dt, a, lda, dtw, w))
        self.workspace(dwork, dbytes, hwork, hbytes)
        ints(info, np.int32, 1)[0] = self._syevd(a, w, jobz, uplo, n, NP_OF[dt], lda)
        return 0

    def syev_batched(self, h, params, jobz, uplo, n, dt, a, lda, dtw, w, ct, dwork, dbytes, hwork, hbytes, info,
                     batch):
        self.record("cusolverDnXsyevBatched", (jobz, uplo, n, dt, a, lda, dtw, w, batch))
        self.workspace(dwork, dbytes, hwork, hbytes)
        dtype = np.dtype(NP_OF[dt])
        real = np.finfo(dtype).dtype
        for i in range(batch):
            code = self._syevd(a + i * lda * n * dtype.itemsize, w + i * n * real.itemsize, jobz, uplo, n, dtype, lda)
            ints(info + 4 * i, np.int32, 1)[0] = code
        return 0

    def syevj_batched_size(self, name: str) -> Callable[..., int]:
        def run(h, jobz, uplo, n, a, lda, w, lwork, params, batch):
            self.record(f"cusolverDn{name}Batched_bufferSize", (jobz, uplo, n, lda, batch))
            assert params, "syevjBatched needs its syevjInfo_t"
            out(lwork, LWORK)
            return 0

        return run

    def syevj_batched(self, name: str) -> Callable[..., int]:
        dtype = PREFIX_DTYPE[name[0]]

        def run(h, jobz, uplo, n, a, lda, w, work, lwork, info, params, batch):
            self.record(f"cusolverDn{name}Batched", (jobz, uplo, n, a, lda, w, lwork, batch))
            assert n <= 32, "syevjBatched supports n <= 32"
            assert work and lwork >= LWORK and params, "syevjBatched without its workspace or syevjInfo_t"
            real = np.finfo(dtype).dtype
            item = np.dtype(dtype).itemsize
            for i in range(batch):
                code = self._syevd(a + i * lda * n * item, w + i * n * real.itemsize, jobz, uplo, n, dtype, lda)
                ints(info + 4 * i, np.int32, 1)[0] = code
            return 0

        return run

    # -- SVD -----------------------------------------------------------------------------------------------

    def gesvd_size(self, h, params, jobu, jobvt, m, n, dt, a, lda, dts, s, dtu, u, ldu, dtv, vt, ldvt, ct, dbytes,
                   hbytes):
        self.record("cusolverDnXgesvd_bufferSize", (jobu, jobvt, m, n, dt, lda, ldu, ldvt))
        return self.query(dbytes, hbytes)

    def gesvd(self, h, params, jobu, jobvt, m, n, dt, a, lda, dts, s, dtu, u, ldu, dtv, vt, ldvt, ct, dwork, dbytes,
              hwork, hbytes, info):
        self.record("cusolverDnXgesvd", (jobu, jobvt, m, n, dt, a, lda, s, u, ldu, vt, ldvt))
        assert m >= n, "cusolverDnXgesvd supports only m >= n"
        self.workspace(dwork, dbytes, hwork, hbytes)
        dtype = NP_OF[dt]
        vectors, full = jobu != b"N", jobu == b"A"
        uu, ss, vv, code = lapack_fn("gesvd", dtype)(np.array(matrix(a, dtype, m, n, lda), order="F"),
                                                    compute_uv=int(vectors), full_matrices=int(full))
        ints(s, np.finfo(dtype).dtype, n)[...] = ss
        if vectors:
            matrix(u, dtype, m, uu.shape[1], ldu)[...] = uu
            matrix(vt, dtype, vv.shape[0], n, ldvt)[...] = vv
        ints(info, np.int32, 1)[0] = code
        return 0

    def gesvdp_size(self, h, params, jobz, econ, m, n, dt, a, lda, dts, s, dtu, u, ldu, dtv, v, ldv, ct, dbytes,
                    hbytes):
        self.record("cusolverDnXgesvdp_bufferSize", (jobz, econ, m, n, dt, lda, ldu, ldv))
        return self.query(dbytes, hbytes)

    def gesvdp(self, h, params, jobz, econ, m, n, dt, a, lda, dts, s, dtu, u, ldu, dtv, v, ldv, ct, dwork, dbytes,
               hwork, hbytes, info, error):
        self.record("cusolverDnXgesvdp", (jobz, econ, m, n, dt, a, lda, s, u, ldu, v, ldv))
        self.workspace(dwork, dbytes, hwork, hbytes)
        dtype = NP_OF[dt]
        uu, ss, vv, code = lapack_fn("gesvd", dtype)(np.array(matrix(a, dtype, m, n, lda), order="F"),
                                                    compute_uv=int(jobz), full_matrices=int(not econ))
        k = min(m, n)
        ints(s, np.finfo(dtype).dtype, k)[...] = ss
        if jobz:
            matrix(u, dtype, m, uu.shape[1], ldu)[...] = uu
            matrix(v, dtype, n, vv.shape[0], ldv)[...] = vv.conj().T
        ints(info, np.int32, 1)[0] = code
        out(error, 0.0)
        return 0

    def gesvdj_size(self, prefix: str) -> Callable[..., int]:
        def run(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params):
            self.record(f"cusolverDn{prefix}gesvdj_bufferSize", (jobz, econ, m, n, lda, ldu, ldv))
            assert params, "gesvdj needs its gesvdjInfo_t"
            out(lwork, LWORK)
            return 0

        return run

    def gesvdj(self, prefix: str) -> Callable[..., int]:
        dtype = PREFIX_DTYPE[prefix]

        def run(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params):
            self.record(f"cusolverDn{prefix}gesvdj", (jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork))
            assert work and lwork >= LWORK and params, "gesvdj without its workspace or gesvdjInfo_t"
            assert ldu >= max(1, m) and ldv >= max(1, n), "gesvdj's leading dimensions"
            uu, ss, vv, code = lapack_fn("gesvd", dtype)(np.array(matrix(a, dtype, m, n, lda), order="F"),
                                                        compute_uv=int(jobz), full_matrices=int(not econ))
            ints(s, np.finfo(dtype).dtype, min(m, n))[...] = ss
            if jobz:
                matrix(u, dtype, m, uu.shape[1], ldu)[...] = uu
                matrix(v, dtype, n, vv.shape[0], ldv)[...] = vv.conj().T
            ints(info, np.int32, 1)[0] = code
            return 0

        return run

    # -- QR ------------------------------------------------------------------------------------------------

    def geqrf_size(self, h, params, m, n, dt, a, lda, dtt, tau, ct, dbytes, hbytes):
        self.record("cusolverDnXgeqrf_bufferSize", (m, n, dt, lda))
        return self.query(dbytes, hbytes)

    def geqrf(self, h, params, m, n, dt, a, lda, dtt, tau, ct, dwork, dbytes, hwork, hbytes, info):
        self.record("cusolverDnXgeqrf", (m, n, dt, a, lda, tau))
        self.workspace(dwork, dbytes, hwork, hbytes)
        dtype = NP_OF[dt]
        view = matrix(a, dtype, m, n, lda)
        qr, taus, _, code = lapack_fn("geqrf", dtype)(np.array(view, order="F"))
        view[...] = qr
        ints(tau, dtype, min(m, n))[...] = taus
        ints(info, np.int32, 1)[0] = code
        return 0

    def orgqr_size(self, prefix: str, name: str) -> Callable[..., int]:
        def run(h, m, n, k, a, lda, tau, lwork):
            self.record(f"cusolverDn{prefix}{name}_bufferSize", (m, n, k, lda))
            out(lwork, LWORK)
            return 0

        return run

    def orgqr(self, prefix: str, name: str) -> Callable[..., int]:
        def run(h, m, n, k, a, lda, tau, work, lwork, info):
            self.record(f"cusolverDn{prefix}{name}", (m, n, k, a, lda, tau, lwork))
            assert work and lwork >= LWORK, "orgqr without the workspace its query asked for"
            dtype = PREFIX_DTYPE[prefix]
            view = matrix(a, dtype, m, n, lda)
            q, _, code = lapack_fn("orgqr", dtype)(np.array(view, order="F"), np.array(ints(tau, dtype, k)))
            view[...] = q
            ints(info, np.int32, 1)[0] = code
            return 0

        return run


    def trsm(self, prefix: str, batched: bool) -> Callable[..., int]:
        """``cublas<t>trsm_v2`` / ``trsmBatched``: ``op(A) X = alpha B`` (LEFT, ``A`` m x m) or
        ``X op(A) = alpha B`` (RIGHT, ``A`` n x n) with the ``uplo`` triangle of the column-major
        ``A``, ``X`` written over ``B`` (m x n, column-major)."""
        dtype = PREFIX_DTYPE[prefix]
        name = f"cublas{prefix}trsm{'Batched' if batched else '_v2'}"

        def one(side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb):
            order = m if side == cublas.SideMode.LEFT else n
            assert lda >= max(1, order) and ldb >= max(1, m), (lda, ldb, m, n)
            full = matrix(a, dtype, order, order, lda)
            t = np.tril(full) if uplo == cublas.FillMode.LOWER else np.triu(full)
            if diag == cublas.DiagType.UNIT:
                t = t - np.diag(np.diag(t)) + np.eye(order, dtype=dtype)
            op = {cublas.Operation.N: t, cublas.Operation.T: t.T, cublas.Operation.C: t.conj().T}[trans]
            rhs = matrix(b, dtype, m, n, ldb)
            scale = _view(alpha, dtype, (1,), (1,))[0]
            try:
                if side == cublas.SideMode.LEFT:
                    rhs[...] = np.linalg.solve(op, scale * rhs)
                else:  # X op = B  <=>  op^T X^T = B^T
                    rhs[...] = np.linalg.solve(op.T, (scale * rhs).T).T
            except np.linalg.LinAlgError:  # a zero on the diagonal: cuBLAS divides by it, reports nothing
                rhs[...] = np.nan

        if batched:
            def run(h, side, uplo, trans, diag, m, n, alpha, a_pointers, lda, b_pointers, ldb, batch):
                self.record(name, (side, uplo, trans, diag, m, n, lda, ldb, batch))
                a_list, b_list = ints(a_pointers, np.uint64, batch), ints(b_pointers, np.uint64, batch)
                for i in range(batch):
                    one(side, uplo, trans, diag, m, n, alpha, int(a_list[i]), lda, int(b_list[i]), ldb)
                return 0
        else:
            def run(h, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb):
                self.record(name, (side, uplo, trans, diag, m, n, lda, ldb))
                one(side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb)
                return 0

        return run

    def pinned_runtime(self) -> Any:
        """``cupy.cuda.runtime``'s copies and events on the host (recorded; events complete
        unless :attr:`ready` is False)."""
        def memcpy(dst, src, nbytes, kind, stream):
            self.record("memcpyAsync", (nbytes, kind, stream))
            ctypes.memmove(dst, src, nbytes)

        return types.SimpleNamespace(
            memcpyAsync=memcpy, eventCreateWithFlags=lambda flags: self.record("eventCreate", (flags,)) or 1,
            eventRecord=lambda event, stream: self.record("eventRecord", (stream,)),
            eventQuery=lambda event: 0 if self.ready else 600,
            eventSynchronize=lambda event: self.record("eventSynchronize", ()))


#: ``(bytes, stream)`` of every device workspace the engine asked for.
ALLOCATIONS: list[tuple[int, Any]] = []


def _allocate(nbytes: int, package: str, device_id: int, stream: int | None = None) -> tuple[Any, int]:
    if nbytes == 0:
        return None, 0
    ALLOCATIONS.append((nbytes, stream))
    buffer = np.empty(nbytes, np.uint8)
    return buffer, buffer.ctypes.data


def install(setattr_: Callable[..., None], setitem: Callable[[Any, str, Any], None]) -> Emulation:
    """Put the emulation in place through ``setattr_``/``setitem`` (``monkeypatch``'s); returns it."""
    from nvmathpy.cuda import driver, runtime
    from nvmathpy.linalg.solvers.cuda import _routes as routes
    from nvmathpy.plan.autotune import perf_counter_timer

    em = Emulation()
    current = sys.modules.get("cupy")
    if getattr(current, "ndarray", None) is HostArray:  # the matmul emulation is in place: extend its stand-in
        for name in EXTRA_CUPY:
            setattr_(current, name, _extra(name))
    else:
        setitem(sys.modules, "cupy", solver_cupy())
    cupy_module = sys.modules["cupy"]
    cuda = types.SimpleNamespace(**vars(cupy_module.cuda))  # a new namespace: put back whole on undo
    cuda.alloc_pinned_memory, cuda.runtime = bytearray, em.pinned_runtime()
    setattr_(cupy_module, "cuda", cuda)
    setattr_(driver, "cuda_status", lambda: driver.CudaStatus(True, None, 1))
    setattr_(runtime, "allocate", _allocate)
    setattr_(runtime, "event_timer", lambda stream, device_id: perf_counter_timer)
    setattr_(runtime, "device_description", lambda device_id: {"gpu": "host emulation"})
    setattr_(routes, "solver_handle", lambda device_id: 0)
    setattr_(routes, "blas_handle", lambda device_id: 0)
    from cuda_emulation import emulated_load_function  # generated kernels (the tiny route) run under g++
    from nvmathpy.linalg.gemm.cuda import _custom as _custom_cuda

    setattr_(_custom_cuda, "load_function", emulated_load_function)
    lib = cusolver.LIB
    table = {
        "cusolverDnSetStream": lambda handle, stream: em.record("cusolverDnSetStream", (stream,)) or 0,
        "cusolverDnXgetrf_bufferSize": em.getrf_size, "cusolverDnXgetrf": em.getrf, "cusolverDnXgetrs": em.getrs,
        "cusolverDnXpotrf_bufferSize": em.potrf_size, "cusolverDnXpotrf": em.potrf, "cusolverDnXpotrs": em.potrs,
        "cusolverDnXsyevd_bufferSize": em.syevd_size, "cusolverDnXsyevd": em.syevd,
        "cusolverDnXsyevBatched_bufferSize": em.syevd_size, "cusolverDnXsyevBatched": em.syev_batched,
        "cusolverDnXgesvd_bufferSize": em.gesvd_size, "cusolverDnXgesvd": em.gesvd,
        "cusolverDnXgesvdp_bufferSize": em.gesvdp_size, "cusolverDnXgesvdp": em.gesvdp,
        "cusolverDnXgeqrf_bufferSize": em.geqrf_size, "cusolverDnXgeqrf": em.geqrf,
    }
    for prefix in "SDCZ":
        name = "orgqr" if prefix in "SD" else "ungqr"
        table[f"cusolverDn{prefix}{name}_bufferSize"] = em.orgqr_size(prefix, name)
        table[f"cusolverDn{prefix}{name}"] = em.orgqr(prefix, name)
        table[f"cusolverDn{prefix}potrfBatched"] = em.potrf_batched(prefix)
        table[f"cusolverDn{prefix}potrsBatched"] = em.potrs_batched(prefix)
        table[f"cusolverDn{prefix}gesvdj_bufferSize"] = em.gesvdj_size(prefix)
        table[f"cusolverDn{prefix}gesvdj"] = em.gesvdj(prefix)
    for name in ("Ssyevj", "Dsyevj", "Cheevj", "Zheevj"):
        table[f"cusolverDn{name}Batched_bufferSize"] = em.syevj_batched_size(name)
        table[f"cusolverDn{name}Batched"] = em.syevj_batched(name)
    for name, fn in table.items():
        assert name in lib.functions, f"the binding declares no {name}"
        setattr_(lib, name, fn)
    blas = {"cublasSetStream_v2": lambda handle, stream: em.record("cublasSetStream_v2", (stream,)) or 0}
    for prefix in "SDCZ":
        blas[f"cublas{prefix}getrfBatched"] = em.getrf_batched(prefix)
        blas[f"cublas{prefix}getrsBatched"] = em.getrs_batched(prefix)
        blas[f"cublas{prefix}trsm_v2"] = em.trsm(prefix, batched=False)
        blas[f"cublas{prefix}trsmBatched"] = em.trsm(prefix, batched=True)
    for name, fn in blas.items():
        assert name in cublas.LIB.functions, f"the binding declares no {name}"
        setattr_(cublas.LIB, name, fn)
    return em

