"""Whether CUDA is usable, and the one clear error every GPU request raises when it is not."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nvmathpy.cuda import cuda_status, require_cuda
from nvmathpy.errors import ExecutionSpaceUnavailableError, LibraryError

# What handle creation returns without a driver (measured; cuFFT reports an internal error).
NO_DRIVER_STATUS = {
    ("cublasLt", "create"): "CUBLAS_STATUS_NOT_INITIALIZED",
    ("cublas", "create"): "CUBLAS_STATUS_NOT_INITIALIZED",
    ("cusolver", "create"): "CUSOLVER_STATUS_NOT_INITIALIZED",
    ("cufft", "create"): "CUFFT_INTERNAL_ERROR",
}
DESTROY = {
    "cublasLt": "cublasLtDestroy",
    "cublas": "cublasDestroy_v2",
    "cusolver": "cusolverDnDestroy",
    "cufft": "cufftDestroy",
}


@pytest.fixture
def status(cuda_wheels):
    return cuda_status()


def test_status_names_the_cause_when_unavailable(status, cuda_wheels):
    if status.available:
        assert status.reason is None and status.device_count > 0
        return
    assert status.device_count == 0
    if cuda_wheels["cudart"].driver_version()[0] == 0:
        assert status.reason == "no driver (cudaGetDeviceCount returned 35: cudaErrorInsufficientDriver)"


def test_require_cuda(status):
    if not status.available:
        with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available: ") as info:
            require_cuda(0)
        assert status.reason in str(info.value)
        return
    assert require_cuda(0) is status
    with pytest.raises(ExecutionSpaceUnavailableError, match=f"device {status.device_count} does not exist"):
        require_cuda(status.device_count)


@pytest.mark.parametrize(("library", "create"), sorted(NO_DRIVER_STATUS))
def test_handle_creation_raises_the_same_clear_error(status, cuda_wheels, library, create):
    module = cuda_wheels[library]
    if status.available:
        handle = getattr(module, create)()
        getattr(module.LIB, DESTROY[library])(handle)
        return
    with pytest.raises(ExecutionSpaceUnavailableError) as info:
        getattr(module, create)()
    assert str(info.value) == f"CUDA is not available: {status.reason}"
    cause = info.value.__cause__
    assert isinstance(cause, LibraryError) and cause.status == NO_DRIVER_STATUS[(library, create)]


@pytest.mark.parametrize(
    ("code", "driver", "expected"),
    [
        (100, (13, 0, 0), "no CUDA device (cudaGetDeviceCount returned 100: cudaErrorNoDevice)"),
        (35, (12, 2, 0), "driver too old: it supports CUDA 12.2, the runtime is CUDA "),
        (35, (0, 0, 0), "no driver (cudaGetDeviceCount returned 35: cudaErrorInsufficientDriver)"),
        (999, (13, 0, 0), "the CUDA runtime cannot start (cudaGetDeviceCount returned 999: "),
    ],
)
def test_reason_for_each_failure(cuda_wheels, monkeypatch, code, driver, expected):
    cudart = cuda_wheels["cudart"]

    def failing_count(_count):
        raise cudart.LIB.error(cudart.LIB.functions["cudaGetDeviceCount"], code)

    monkeypatch.setattr(cudart.LIB, "cudaGetDeviceCount", failing_count)
    monkeypatch.setattr(cudart, "driver_version", lambda: driver)
    cuda_status.cache_clear()
    try:
        state = cuda_status()
    finally:
        cuda_status.cache_clear()
    assert not state.available and state.reason.startswith(expected)


WITHOUT_WHEELS = """
import sys
sys.modules["cuda.pathfinder"] = None  # as if cuda-pathfinder and the CUDA wheels were absent
import nvmathpy.cuda
from nvmathpy.errors import ExecutionSpaceUnavailableError, MissingDependencyError
print(nvmathpy.cuda.cuda_status().reason)
try:
    nvmathpy.cuda.require_cuda()
except ExecutionSpaceUnavailableError as exc:
    print(exc)
try:
    nvmathpy.cuda.load_library("cublasLt")
except MissingDependencyError as exc:
    print(exc)
"""


def test_without_the_cuda_wheels_status_says_what_to_install():
    out = subprocess.run([sys.executable, "-c", WITHOUT_WHEELS], capture_output=True, text=True, check=True)
    reason, error, missing = out.stdout.splitlines()
    assert reason.startswith("CUDA wheels not installed: pip install 'nvmathpy[cu13]'")
    assert error == f"CUDA is not available: {reason}"
    assert "nvmathpy[cu13]" in missing and "nvmathpy[cu12]" in missing
