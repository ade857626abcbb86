"""cuSOLVER dense binding (``cusolverDn.h``, ``cusolver_common.h``).

The 64-bit generic API (``cusolverDnX*``: LU, Cholesky, QR, symmetric eigensolvers, SVD) takes
the data type of each operand and reports workspace needs on both the device and the host; each
routine comes with its ``_bufferSize`` query. The legacy typed API supplies what the generic one
lacks: forming and applying Q after QR (``orgqr``/``ormqr``, ``ungqr``/``unmqr``), batched
Cholesky (``potrfBatched``/``potrsBatched``) and the Jacobi solvers (``syevjBatched``, ``gesvdj``).
``info`` arguments point to device memory.
"""

from __future__ import annotations

import enum
from ctypes import POINTER, c_char, c_double, c_int, c_int64, c_size_t, c_void_p

from ..driver import device_unavailable
from ..ffi import STATUS, Fn, Library, enum_names, new_handle
from .library_types import property_version

__all__ = [
    "LIB",
    "AlgMode",
    "EigMode",
    "EigRange",
    "Function",
    "Status",
    "create",
    "create_params",
    "version",
]


class Status(enum.IntEnum):
    """``cusolverStatus_t``."""

    CUSOLVER_STATUS_SUCCESS = 0
    CUSOLVER_STATUS_NOT_INITIALIZED = 1
    CUSOLVER_STATUS_ALLOC_FAILED = 2
    CUSOLVER_STATUS_INVALID_VALUE = 3
    CUSOLVER_STATUS_ARCH_MISMATCH = 4
    CUSOLVER_STATUS_MAPPING_ERROR = 5
    CUSOLVER_STATUS_EXECUTION_FAILED = 6
    CUSOLVER_STATUS_INTERNAL_ERROR = 7
    CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8
    CUSOLVER_STATUS_NOT_SUPPORTED = 9
    CUSOLVER_STATUS_ZERO_PIVOT = 10
    CUSOLVER_STATUS_INVALID_LICENSE = 11
    CUSOLVER_STATUS_IRS_PARAMS_NOT_INITIALIZED = 12
    CUSOLVER_STATUS_IRS_PARAMS_INVALID = 13
    CUSOLVER_STATUS_IRS_PARAMS_INVALID_PREC = 14
    CUSOLVER_STATUS_IRS_PARAMS_INVALID_REFINE = 15
    CUSOLVER_STATUS_IRS_PARAMS_INVALID_MAXITER = 16
    CUSOLVER_STATUS_IRS_INTERNAL_ERROR = 20
    CUSOLVER_STATUS_IRS_NOT_SUPPORTED = 21
    CUSOLVER_STATUS_IRS_OUT_OF_RANGE = 22
    CUSOLVER_STATUS_IRS_NRHS_NOT_SUPPORTED_FOR_REFINE_GMRES = 23
    CUSOLVER_STATUS_IRS_INFOS_NOT_INITIALIZED = 25
    CUSOLVER_STATUS_IRS_INFOS_NOT_DESTROYED = 26
    CUSOLVER_STATUS_IRS_MATRIX_SINGULAR = 30
    CUSOLVER_STATUS_INVALID_WORKSPACE = 31


class EigMode(enum.IntEnum):
    """``cusolverEigMode_t``: eigenvalues only, or with vectors."""

    NOVECTOR = 0
    VECTOR = 1


class EigRange(enum.IntEnum):
    """``cusolverEigRange_t``: all eigenvalues, an index range, or a value interval (``syevdx``)."""

    ALL = 1001
    I = 1002  # noqa: E741 (the header's name)
    V = 1003


class AlgMode(enum.IntEnum):
    """``cusolverAlgMode_t``: algorithm choice for :func:`cusolverDnSetAdvOptions`."""

    ALG_0 = 0
    ALG_1 = 1
    ALG_2 = 2


class Function(enum.IntEnum):
    """``cusolverDnFunction_t``: the routine an :class:`AlgMode` applies to."""

    GETRF = 0
    POTRF = 1
    SYEVBATCHED = 2
    GEQRF = 3
    SYEVD = 4
    GESVD = 5


_P, _I64, _INT = c_void_p, c_int64, c_int  # pointers, int64_t, int and enums
_QUERY = (POINTER(c_size_t), POINTER(c_size_t))  # device bytes, host bytes
_WORK = (_P, c_size_t, _P, c_size_t)  # device buffer and bytes, host buffer and bytes


def _generic(name: str, args: tuple, tail: tuple = (_P,), query_tail: tuple = ()) -> list[Fn]:
    # cusolverDnX<name>_bufferSize(args..., &device_bytes, &host_bytes, query_tail...)
    # cusolverDnX<name>(args..., device_buf, device_bytes, host_buf, host_bytes, tail...)
    fn = f"cusolverDnX{name}"
    return [Fn(f"{fn}_bufferSize", STATUS, (*args, *_QUERY, *query_tail)), Fn(fn, STATUS, (*args, *_WORK, *tail))]


def _legacy(name: str, args: tuple) -> list[Fn]:
    # cusolverDn<name>_bufferSize(args..., int* lwork); cusolverDn<name>(args..., work, lwork, info)
    fn = f"cusolverDn{name}"
    return [Fn(f"{fn}_bufferSize", STATUS, (*args, POINTER(c_int))), Fn(fn, STATUS, (*args, _P, _INT, _P))]


_HP = (_P, _P)  # handle, params
_MATRIX = (_INT, _P, _I64)  # data type, pointer, leading dimension
_VECTOR = (_INT, _P)  # data type, pointer
_SYEV = (*_HP, _INT, _INT, _I64, *_MATRIX, *_VECTOR, _INT)  # jobz uplo n, A, W, compute type
_SVD_OUT = (*_VECTOR, *_MATRIX, *_MATRIX, _INT)  # S, U, V or VT, compute type
_QR = (_INT, _INT, _INT, _P, _INT, _P)  # m n k, A lda, tau
_Q_APPLY = (_INT, _INT, *_QR, _P, _INT)  # side trans, m n k, A lda, tau, C ldc

LIB = Library(
    "cusolver",
    enum_names(Status),
    [
        Fn("cusolverDnCreate", STATUS, (POINTER(c_void_p),), device=True),
        Fn("cusolverDnDestroy", STATUS, (_P,)),
        Fn("cusolverDnSetStream", STATUS, (_P, _P)),
        Fn("cusolverDnCreateParams", STATUS, (POINTER(c_void_p),)),
        Fn("cusolverDnDestroyParams", STATUS, (_P,)),
        Fn("cusolverDnSetAdvOptions", STATUS, (_P, _INT, _INT)),
        Fn("cusolverGetVersion", STATUS, (POINTER(c_int),)),
        Fn("cusolverGetProperty", STATUS, (_INT, POINTER(c_int))),
        # LU: ipiv (int64_t*) sits before the compute type in getrf but not in its query.
        Fn("cusolverDnXgetrf_bufferSize", STATUS, (*_HP, _I64, _I64, *_MATRIX, _INT, *_QUERY)),
        Fn("cusolverDnXgetrf", STATUS, (*_HP, _I64, _I64, *_MATRIX, _P, _INT, *_WORK, _P)),
        # trans n nrhs, A, ipiv, B, info
        Fn("cusolverDnXgetrs", STATUS, (*_HP, _INT, _I64, _I64, *_MATRIX, _P, *_MATRIX, _P)),
        *_generic("potrf", (*_HP, _INT, _I64, *_MATRIX, _INT)),  # uplo n, A, compute type
        Fn("cusolverDnXpotrs", STATUS, (*_HP, _INT, _I64, _I64, *_MATRIX, *_MATRIX, _P)),  # uplo n nrhs, A, B, info
        *_generic("geqrf", (*_HP, _I64, _I64, *_MATRIX, *_VECTOR, _INT)),  # m n, A, tau, compute type
        *_generic("syevd", _SYEV),
        *_generic("syevBatched", _SYEV, tail=(_P, _I64), query_tail=(_I64,)),  # + batch size
        # jobz range uplo n, A, vl vu il iu, int64_t* found, W, compute type
        *_generic(
            "syevdx",
            (*_HP, _INT, _INT, _INT, _I64, *_MATRIX, _P, _P, _I64, _I64, POINTER(c_int64), *_VECTOR, _INT),
        ),
        # jobu jobvt (signed char), m n, A
        *_generic("gesvd", (*_HP, c_char, c_char, _I64, _I64, *_MATRIX, *_SVD_OUT)),
        # jobz econ, m n, A; tail: info, host double* h_err_sigma
        *_generic("gesvdp", (*_HP, _INT, _INT, _I64, _I64, *_MATRIX, *_SVD_OUT), tail=(_P, POINTER(c_double))),
        *(fn for t in "SD" for fn in _legacy(f"{t}orgqr", (_P, *_QR))),
        *(fn for t in "CZ" for fn in _legacy(f"{t}ungqr", (_P, *_QR))),
        *(fn for t in "SD" for fn in _legacy(f"{t}ormqr", (_P, *_Q_APPLY))),
        *(fn for t in "CZ" for fn in _legacy(f"{t}unmqr", (_P, *_Q_APPLY))),
        # uplo, n, A[] lda, info[], batch
        *(Fn(f"cusolverDn{t}potrfBatched", STATUS, (_P, _INT, _INT, _P, _INT, _P, _INT)) for t in "SDCZ"),
        # Jacobi methods: options objects, batched Hermitian eigensolver (n <= 32), one-matrix SVD
        Fn("cusolverDnCreateSyevjInfo", STATUS, (POINTER(c_void_p),)),
        Fn("cusolverDnDestroySyevjInfo", STATUS, (_P,)),
        Fn("cusolverDnCreateGesvdjInfo", STATUS, (POINTER(c_void_p),)),
        Fn("cusolverDnDestroyGesvdjInfo", STATUS, (_P,)),
        # jobz uplo n, A lda, W, int* lwork, params, batch; run: ... W, work lwork, info, params, batch
        *(fn for t in ("Ssyevj", "Dsyevj", "Cheevj", "Zheevj") for fn in (
            Fn(f"cusolverDn{t}Batched_bufferSize", STATUS, (_P, _INT, _INT, _INT, _P, _INT, _P, POINTER(c_int), _P,
                                                             _INT)),
            Fn(f"cusolverDn{t}Batched", STATUS, (_P, _INT, _INT, _INT, _P, _INT, _P, _P, _INT, _P, _P, _INT)),
        )),
        # jobz econ m n, A lda, S, U ldu, V ldv, int* lwork, params; run: ..., work lwork, info, params
        *(fn for t in "SDCZ" for fn in (
            Fn(f"cusolverDn{t}gesvdj_bufferSize", STATUS, (_P, _INT, _INT, _INT, _INT, _P, _INT, _P, _P, _INT, _P,
                                                            _INT, POINTER(c_int), _P)),
            Fn(f"cusolverDn{t}gesvdj", STATUS, (_P, _INT, _INT, _INT, _INT, _P, _INT, _P, _P, _INT, _P, _INT, _P, _INT,
                                                 _P, _P)),
        )),
        # uplo n nrhs, A[] lda, B[] ldb, info, batch
        *(
            Fn(f"cusolverDn{t}potrsBatched", STATUS, (_P, _INT, _INT, _INT, _P, _INT, _P, _INT, _P, _INT))
            for t in "SDCZ"
        ),
    ],
    unavailable=device_unavailable,
)


def create() -> int:
    """Create a cuSOLVER dense handle (needs a usable CUDA device)."""
    return new_handle(LIB.cusolverDnCreate)


def create_params() -> int:
    """Create the options object the ``cusolverDnX*`` routines take (works without a device)."""
    return new_handle(LIB.cusolverDnCreateParams)


def version() -> tuple[int, int, int]:
    """Return the cuSOLVER library version as ``(major, minor, patch)`` (11.x is CUDA 12, 12.x CUDA 13)."""
    return property_version(LIB.cusolverGetProperty)
