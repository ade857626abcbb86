"""Loading the CUDA libraries from the wheels, resolving every declared symbol, reading versions."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from nvmathpy.cuda import all_library_info, load_library
from nvmathpy.cuda.bindings import MODULES
from nvmathpy.cuda.ffi import STATUS, Fn, Library, enum_names
from nvmathpy.errors import LibraryError, MissingDependencyError

LAZY_IMPORT = """
import sys
import nvmathpy, nvmathpy.cuda
import nvmathpy.cuda.driver, nvmathpy.cuda.nvrtc, nvmathpy.cuda.jitlink, nvmathpy.cuda.info
maps = open("/proc/self/maps").read()
loaded = [lib for lib in ("cudart", "cublas", "cufft", "cusolver", "nvrtc", "nvJitLink") if "lib" + lib in maps]
heavy = [mod for mod in ("cupy", "torch", "scipy") if mod in sys.modules]
print(loaded, heavy)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_import_loads_no_cuda_library_and_no_heavy_package():
    out = subprocess.run([sys.executable, "-c", LAZY_IMPORT], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_every_library_loads_from_an_installed_wheel(cuda_wheels):
    for name, module in cuda_wheels.items():
        loaded = module.LIB.loaded
        assert loaded is load_library(name)  # cached
        assert os.path.isabs(loaded.path) and os.path.exists(loaded.path), loaded.path
        assert loaded.cuda_major in (12, 13)
    majors = {module.LIB.loaded.cuda_major for module in cuda_wheels.values()}
    assert len(majors) == 1, f"CUDA 12 and 13 libraries mixed: {majors}"


@pytest.mark.parametrize("module_name", MODULES)
def test_every_declared_symbol_resolves(cuda_wheels, module_name):
    module = next(m for m in cuda_wheels.values() if m.__name__.endswith(f".{module_name}"))
    symbols = module.LIB.resolve_all()
    assert set(symbols) == set(module.LIB.functions)
    for name in symbols:
        assert callable(getattr(module.LIB, name))


def test_symbol_variants_follow_the_cuda_major(cuda_wheels):
    major = cuda_wheels["nvJitLink"].LIB.loaded.cuda_major
    assert cuda_wheels["nvJitLink"].LIB.resolve_all()["nvJitLinkCreate"] == f"__nvJitLinkCreate_{major}_0"
    expected = "cufftXtSetJITCallback" if major == 13 else "__cufftXtSetJITCallback_12_7"
    assert cuda_wheels["cufft"].LIB.resolve_all()["cufftXtSetJITCallback"] == expected


def test_versions_are_read_and_match_the_cuda_major(cuda_wheels):
    info = all_library_info()
    assert set(info) == set(cuda_wheels)
    for name, entry in info.items():
        assert not isinstance(entry, str), entry
        # cuFFT and cuSOLVER number their releases one below the toolkit (11.x in CUDA 12).
        offset = 1 if name in ("cufft", "cusolver") else 0
        assert entry.version[0] == entry.cuda_major - offset, entry
    lt = cuda_wheels["cublasLt"]
    major, minor, patch = lt.version()
    assert lt.LIB.cublasLtGetVersion() == major * 10000 + minor * 100 + patch
    cufft_version = ctypes.c_int()
    cuda_wheels["cufft"].LIB.cufftGetVersion(cufft_version)
    assert cufft_version.value // 1000 == cuda_wheels["cufft"].version()[0]


def test_unknown_library_and_missing_symbol(cuda_wheels):
    with pytest.raises(ValueError, match="unknown CUDA library"):
        load_library("cudnn")
    lib = Library("cudart", cuda_wheels["cudart"].error_name, [Fn("cudaNoSuchCall", STATUS, ())])
    with pytest.raises(MissingDependencyError, match="does not export cudaNoSuchCall"):
        lib.resolve_all()
    with pytest.raises(AttributeError, match="declares no function"):
        lib.cudaAlsoMissing()


def test_nonzero_status_raises_library_error_with_the_header_name(cuda_wheels):
    lt = cuda_wheels["cublasLt"]
    layout = lt.create_matrix_layout(lt.DataType.R_32F, 4, 4, 4)
    try:
        wrong_size = ctypes.c_int32(3)  # ROWS is a uint64_t
        rows = lt.MatrixLayoutAttribute.ROWS
        with pytest.raises(LibraryError) as info:
            lt.LIB.cublasLtMatrixLayoutSetAttribute(layout, rows, ctypes.byref(wrong_size), 4)
        assert (info.value.status, info.value.code) == ("CUBLAS_STATUS_INVALID_VALUE", 7)
        assert "cublasLtMatrixLayoutSetAttribute failed: CUBLAS_STATUS_INVALID_VALUE (7)" in str(info.value)
    finally:
        lt.LIB.cublasLtMatrixLayoutDestroy(layout)
    with pytest.raises(LibraryError) as info:
        cuda_wheels["cufft"].LIB.cufftSetAutoAllocation(12345, 0)  # no such plan
    assert info.value.status == "CUFFT_INVALID_PLAN"
    assert cuda_wheels["cudart"].error_name(35) == "cudaErrorInsufficientDriver"


def test_enum_names_covers_unknown_codes(cuda_wheels):
    names = enum_names(cuda_wheels["cusolver"].Status)
    assert names(3) == "CUSOLVER_STATUS_INVALID_VALUE"
    assert names(999) == "UNKNOWN_999"
