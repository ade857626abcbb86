"""NVRTC compiles to cubin (sm_80, sm_90), LTO-IR and PTX without a GPU; nvJitLink links LTO-IR;
the ptxas resource report is parsed; failures carry the compiler or linker log."""

from __future__ import annotations

import struct

import pytest

from nvmathpy.cuda.jitlink import link
from nvmathpy.cuda.nvrtc import KernelResources, compile_cuda, ptxas_resources
from nvmathpy.errors import InvalidOptionError, LibraryError

AXPY = r"""
#include <cuda_fp16.h>
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + __half2float(__float2half(y[i]));
}
"""

# 96 live accumulators cannot fit in 32 registers: ptxas must spill.
SPILLING = r"""
extern "C" __global__ void spill(const float* x, float* y) {
    float acc[96];
    #pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = x[threadIdx.x * 96 + i];
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        #pragma unroll
        for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
    }
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < 96; ++i) s += acc[i];
    y[threadIdx.x] = s;
}
"""

EM_CUDA = 190  # ELF e_machine of NVIDIA cubins


def cubin_machine(code: bytes) -> int:
    assert code[:4] == b"\x7fELF"
    return struct.unpack_from("<H", code, 18)[0]


@pytest.fixture
def nvrtc(cuda_wheels):
    return cuda_wheels["nvrtc"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compile_cubin_with_resource_report(nvrtc, arch):
    compiled = compile_cuda(AXPY, arch)
    assert (compiled.kind, compiled.arch) == ("cubin", arch)
    assert cubin_machine(compiled.code) == EM_CUDA
    assert f"for '{arch}'" in compiled.log
    usage = compiled.resources["axpy"]
    assert usage.registers > 0 and usage.spill_stores == usage.spill_loads == 0


def test_supported_archs_include_ampere_and_hopper(nvrtc):
    assert {80, 90} <= set(nvrtc.supported_archs())


def test_spills_show_in_the_report(nvrtc):
    usage = compile_cuda(SPILLING, "sm_90", options=["-maxrregcount=32"]).resources["spill"]
    assert usage.registers <= 32 and usage.spill_stores > 0 and usage.spill_loads > 0


def test_ltoir_links_to_a_cubin(cuda_wheels):
    ltoir = compile_cuda(AXPY, "sm_90", output="ltoir")
    assert ltoir.kind == "ltoir" and len(ltoir.code) > 100 and ltoir.code[:4] != b"\x7fELF"
    linked = link([ltoir])
    assert (linked.kind, linked.arch) == ("cubin", "sm_90")
    assert cubin_machine(linked.code) == EM_CUDA
    assert linked.resources["axpy"].registers > 0


def test_ptx_targets_the_virtual_architecture(nvrtc):
    ptx = compile_cuda(AXPY, "sm_80", output="ptx").code.decode()
    assert ".target sm_80" in ptx and ".entry axpy" in ptx


def test_headers_come_from_the_wheel(nvrtc):
    with pytest.raises(LibraryError, match=r"cuda_fp16\.h"):
        compile_cuda(AXPY, "sm_90", include_dirs=())


def test_compile_error_carries_the_log(nvrtc):
    with pytest.raises(LibraryError) as info:
        compile_cuda('extern "C" __global__ void broken(float* y) { y[0] = undeclared; }', "sm_90", name="broken.cu")
    assert info.value.status == "NVRTC_ERROR_COMPILATION"
    assert 'broken.cu(1): error: identifier "undeclared" is undefined' in str(info.value)


def test_link_error_carries_the_log(cuda_wheels):
    twice = [compile_cuda(AXPY, "sm_90", output="ltoir") for _ in range(2)]
    with pytest.raises(LibraryError) as info:
        link(twice)
    assert info.value.status.startswith("NVJITLINK_ERROR_")
    assert "axpy" in str(info.value)


def test_bad_requests_are_rejected_before_compiling():
    with pytest.raises(InvalidOptionError, match="sm_90"):
        compile_cuda(AXPY, "90")
    with pytest.raises(InvalidOptionError, match="output"):
        compile_cuda(AXPY, "sm_90", output="fatbin")
    with pytest.raises(InvalidOptionError, match="one architecture"):
        link([])


def test_ptxas_report_parsing():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 380 bytes cmem[0]
"""
    assert ptxas_resources(log) == {
        "helper": KernelResources(registers=0, stack_frame=16, spill_stores=8, spill_loads=4),
        "k": KernelResources(registers=40, stack_frame=0, spill_stores=0, spill_loads=0),
    }
    assert ptxas_resources("") == {}
