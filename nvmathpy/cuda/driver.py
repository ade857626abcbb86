"""Whether CUDA can be used in this process, and the one clear error raised when it cannot.

Without a driver the CUDA libraries fail with unhelpful codes (cuBLAS and cuSOLVER handle
creation returns NOT_INITIALIZED, cuFFT's INTERNAL_ERROR), so the cause is established here, from
the CUDA runtime, and every GPU request that cannot be served raises
:class:`~nvmathpy.errors.ExecutionSpaceUnavailableError` with it. This works, and reports
"not available", when the CUDA wheels are not installed at all.
"""

from __future__ import annotations

import functools
from ctypes import c_int
from dataclasses import dataclass

from ..errors import ExecutionSpaceUnavailableError, LibraryError, MissingDependencyError
from .loader import INSTALL_HINT

__all__ = ["CudaStatus", "cuda_status", "device_unavailable", "require_cuda", "unavailable_error"]


@dataclass(frozen=True)
class CudaStatus:
    """What :func:`cuda_status` found.

    Attributes
    ----------
    available : bool
        Whether at least one CUDA device can be used.
    reason : str or None
        Why not, in a few words with the failing call and its status, when not available.
    device_count : int
        Number of visible devices.
    """

    available: bool
    reason: str | None
    device_count: int


def _reason(code: int, name: str) -> str:
    from .bindings import cudart

    call = f"cudaGetDeviceCount returned {code}: {name}"
    if code == cudart.ERROR_NO_DEVICE:
        return f"no CUDA device ({call})"
    if code != cudart.ERROR_INSUFFICIENT_DRIVER:
        return f"the CUDA runtime cannot start ({call})"
    driver = cudart.driver_version()
    if driver[0] == 0:
        return f"no driver ({call})"
    runtime = cudart.version()
    return (
        f"driver too old: it supports CUDA {driver[0]}.{driver[1]}, the runtime is CUDA "
        f"{runtime[0]}.{runtime[1]} ({call})"
    )


@functools.cache
def cuda_status() -> CudaStatus:
    """Find out, once per process, whether CUDA can be used.

    Returns
    -------
    CudaStatus
        For example ``CudaStatus(available=False, reason="no driver (cudaGetDeviceCount returned
        35: cudaErrorInsufficientDriver)", device_count=0)``.

    Notes
    -----
    Never raises: a missing wheel, driver or device is reported in ``reason``.
    """
    from .bindings import cudart

    count = c_int()
    try:
        cudart.LIB.cudaGetDeviceCount(count)
    except MissingDependencyError:
        return CudaStatus(False, f"CUDA wheels not installed: {INSTALL_HINT}", 0)
    except LibraryError as exc:
        return CudaStatus(False, _reason(exc.code or 0, exc.status or ""), 0)
    if count.value == 0:
        return CudaStatus(False, "no CUDA device (cudaGetDeviceCount found none)", 0)
    return CudaStatus(True, None, count.value)


def unavailable_error(status: CudaStatus) -> ExecutionSpaceUnavailableError:
    """Return the error that reports ``status.reason`` (raised for every unserved GPU request)."""
    return ExecutionSpaceUnavailableError(f"CUDA is not available: {status.reason}")


def device_unavailable() -> ExecutionSpaceUnavailableError | None:
    """The error that explains a failed device call when CUDA cannot be used at all, else ``None``."""
    status = cuda_status()
    return None if status.available else unavailable_error(status)


def require_cuda(device_id: int | None = None) -> CudaStatus:
    """Raise unless CUDA, and device ``device_id`` if given, can be used.

    Parameters
    ----------
    device_id : int, optional
        Ordinal of the device that will be used.

    Returns
    -------
    CudaStatus
        The (available) status.

    Raises
    ------
    ExecutionSpaceUnavailableError
        Naming the cause: wheels not installed, no driver, driver too old, no device, or a
        ``device_id`` beyond the visible devices.
    """
    status = cuda_status()
    if not status.available:
        raise unavailable_error(status)
    if device_id is not None and not 0 <= device_id < status.device_count:
        raise ExecutionSpaceUnavailableError(
            f"CUDA device {device_id} does not exist: {status.device_count} device(s) visible"
        )
    return status
