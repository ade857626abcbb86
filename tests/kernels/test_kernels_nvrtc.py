"""NVRTC compiles every kernel the generators emit, for sm_80 and sm_90, without spills; the
tensor-core kernels contain HMMA instructions; an FFT-callback-shaped device function goes through
LTO-IR and nvJitLink."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernels_cases import OP_CASES, needs_nvrtc, traced
from nvmathpy.kernels.elementwise import elementwise_kernel
from nvmathpy.kernels.emit_cuda import STORAGE_TYPES, emit_expression
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, SIMT_CONFIGS, gemm_kernel
from nvmathpy.kernels.kernel_cache import KernelCache
from nvmathpy.kernels.tiny_batched import tiny_gemm_kernel, tiny_solve_kernel
from nvmathpy.kernels.tiny_register import register_solve_fits, tiny_register_solve_kernel
from nvmathpy.kernels.trace import gelu, trace

pytestmark = needs_nvrtc

ARCHS = ("sm_80", "sm_90")
_SMEM = re.compile(r"(\d+) bytes smem")


def all_ops_expression():
    """One expression using every IR operation (the sum of every per-op case)."""
    from nvmathpy.kernels.ir import Expr

    exprs = [traced(case)[0] for case in sorted(OP_CASES)]
    total = exprs[0]
    for e in exprs[1:]:
        total = Expr("add", (total, e))
    return total


def check_compiled(cache, source, name, arch, smem=None):
    compiled = cache.compile(source, arch)
    resources = compiled.resources[name]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, compiled.log
    assert resources.registers > 0
    if smem:
        assert [int(s) for s in _SMEM.findall(compiled.log)] == [smem], compiled.log
    return compiled


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_elementwise_each_op_compiles(case, kcache):
    check_compiled(kcache, elementwise_kernel(traced(case)[0], "float32").source, "nvm_epilogue", "sm_90")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("storage", sorted(STORAGE_TYPES))
def test_elementwise_all_ops_every_storage(storage, arch, kcache):
    check_compiled(kcache, elementwise_kernel(all_ops_expression(), storage, vector=2).source, "nvm_epilogue", arch)


EPILOGUE = trace(lambda x, bias, r, s: gelu(x + bias) * s - r, {"bias": "col", "r": "row", "s": "scalar"})
GEMM_CASES = ([("simt", dt, cfg) for dt in ("float32", "float64") for cfg in SIMT_CONFIGS]
              + [("wmma", dt, cfg) for dt in ("float16", "bfloat16") for cfg in MMA_CONFIGS]
              + [("mma", dt, cfg) for dt in ("float16", "bfloat16") for cfg in MMA_CONFIGS]
              + [("twin", "float16", cfg) for cfg in MMA_CONFIGS[:2]])


def case_kernel(variant, dtype, config):
    return gemm_kernel(dtype, variant=variant, config=config, with_c=True, epilogue=EPILOGUE,
                       trans_a=config.block_k == 32, trans_b=config.block_m == 128)


def tiny_kernels(dtype):
    return (tiny_gemm_kernel(dtype, 8, 8, 8, with_c=True), tiny_gemm_kernel(dtype, 32, 32, 32, trans_a=True),
            tiny_solve_kernel(dtype, 8, 1), tiny_solve_kernel(dtype, 32, 4, method="cholesky"),
            *register_kernels(dtype))


def register_kernels(dtype):
    """The register solver at the edges of its register budget, and at n = 8 (C and F order)."""
    edges = [(7, 3), (4, 4)] if dtype == "float64" else [(8, 4), (3, 1)]
    return (tiny_register_solve_kernel(dtype, 8, 1), tiny_register_solve_kernel(dtype, 8, 1, trans_a=True),
            *(tiny_register_solve_kernel(dtype, n, k) for n, k in edges))


@pytest.fixture(scope="module")
def kcache(tmp_path_factory):
    """A kernel cache of this module's own, filled by compiling every cubin the tests inspect
    concurrently (NVRTC compiles independent programs in parallel)."""
    cache = KernelCache(tmp_path_factory.mktemp("kernels"))
    sources = {elementwise_kernel(traced(case)[0], "float32").source: ("sm_90",) for case in sorted(OP_CASES)}
    sources.update({elementwise_kernel(all_ops_expression(), storage, vector=2).source: ARCHS
                    for storage in STORAGE_TYPES})
    sources.update({case_kernel(*case).source: ARCHS for case in GEMM_CASES})
    sources.update({k.source: ARCHS for dtype in ("float32", "float64") for k in tiny_kernels(dtype)})
    jobs = [(source, arch) for source, archs in sources.items() for arch in archs]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda job: cache.compile(*job), jobs))
    return cache


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant,dtype,config", GEMM_CASES,
                         ids=[f"{v}-{d}-{c.label(v)}" for v, d, c in GEMM_CASES])
def test_gemm_variants_compile_without_spills(variant, dtype, config, arch, kcache):
    kernel = case_kernel(variant, dtype, config)
    check_compiled(kcache, kernel.source, kernel.name, arch, kernel.smem_bytes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("arch", ARCHS)
def test_tiny_kernels_compile_without_spills(dtype, arch, kcache):
    for kernel in tiny_kernels(dtype):
        check_compiled(kcache, kernel.source, kernel.name, arch, kernel.smem_bytes)


def test_every_register_solver_variant_compiles_without_spills_for_sm_90(tmp_path):
    """Each (dtype, n, nrhs) the route rule sends to the register kernel (the edges are checked
    for sm_80 too, in test_tiny_kernels_compile_without_spills)."""
    cache = KernelCache(tmp_path)
    kernels = [tiny_register_solve_kernel(dtype, n, k) for dtype in ("float32", "float64") for n in range(1, 9)
               for k in range(1, 5) if register_solve_fits(dtype, n, k)]
    assert len(kernels) > 40
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda kernel: cache.compile(kernel.source, "sm_90"), kernels))
    for kernel in kernels:
        check_compiled(cache, kernel.source, kernel.name, "sm_90", kernel.smem_bytes)


@functools.cache
def cuobjdump() -> str | None:
    import nvidia

    for root in nvidia.__path__:
        for candidate in sorted(Path(root).glob("cu*/bin/cuobjdump")):
            return str(candidate)
    return shutil.which("cuobjdump")


def sass(cubin: bytes, tmp_path) -> str:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump: install the nvidia-cuda-cuobjdump wheel or a CUDA toolkit")
    bin_dir = str(Path(tool).parent)
    if shutil.which("nvdisasm", path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}") is None:
        pytest.skip("cuobjdump -sass needs nvdisasm: install the nvidia-cuda-nvdisasm wheel or a CUDA toolkit")
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}  # the wheels' nvdisasm
    return subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True, env=env).stdout


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_kernel_has_hmma_and_scalar_ones_do_not(dtype, arch, tmp_path, kcache):
    wmma = case_kernel("wmma", dtype, MMA_CONFIGS[0])
    assert "HMMA" in sass(kcache.compile(wmma.source, arch).code, tmp_path)
    ptx = case_kernel("mma", dtype, MMA_CONFIGS[0])  # inline-PTX mma.sync: tensor cores without mma.h
    assert "HMMA" in sass(kcache.compile(ptx.source, arch).code, tmp_path)
    twin = case_kernel("twin", "float16", MMA_CONFIGS[0])
    assert "HMMA" not in sass(kcache.compile(twin.source, arch).code, tmp_path)
    simt = case_kernel("simt", "float32", SIMT_CONFIGS[0])
    simt_sass = sass(kcache.compile(simt.source, arch).code, tmp_path)
    assert "HMMA" not in simt_sass and "FFMA" in simt_sass


def test_fft_callback_shaped_device_function_links_through_lto(kcache):
    """An FFT load callback (complex value, per-element scale from the IR) as LTO-IR, linked with
    a kernel that calls it into one cubin by nvJitLink."""
    from nvmathpy.cuda.jitlink import link

    expr = trace(lambda x, s: x * s + 1.0, {"s": "scalar"})
    body = emit_expression(expr, "float", {("value", None): "v", ("input", "s"): "scale"})
    callback = "\n".join([
        "struct nvm_complex { float x, y; };",
        "__device__ float scale = 0.5f;",
        'extern "C" __device__ nvm_complex nvm_load_callback(void* data, unsigned long long offset, void* info,',
        "                                                   void* shared) {",
        "  const nvm_complex in = static_cast<const nvm_complex*>(data)[offset];",
        "  nvm_complex out;",
        "  { const float v = in.x;", *body.statements, f"  out.x = {body.result}; }}",
        "  { const float v = in.y;", *body.statements, f"  out.y = {body.result}; }}",
        "  return out;",
        "}",
    ])
    caller = "\n".join([
        "struct nvm_complex { float x, y; };",
        'extern "C" __device__ nvm_complex nvm_load_callback(void*, unsigned long long, void*, void*);',
        'extern "C" __global__ void nvm_caller(nvm_complex* data, unsigned long long n) {',
        "  const unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;",
        "  if (i < n) data[i] = nvm_load_callback(data, i, nullptr, nullptr);",
        "}",
    ])
    for arch in ARCHS:
        ltoirs = [kcache.compile(src, arch, output="ltoir", options=["-rdc=true"]) for src in (callback, caller)]
        assert all(m.kind == "ltoir" and m.code for m in ltoirs)
        linked = link(ltoirs)
        assert linked.kind == "cubin" and linked.code[:4] == b"\x7fELF"
        resources = linked.resources
        assert resources["nvm_caller"].spill_stores == 0, linked.log


def test_importing_the_kernel_generators_stays_light():
    code = ("import sys, nvmathpy.kernels.gemm_tiled, nvmathpy.kernels.tiny_batched, nvmathpy.kernels.kernel_cache, "
            "nvmathpy.kernels.launch\n"
            "heavy = [m for m in ('scipy', 'cupy', 'torch', 'nvmathpy.cuda.bindings.nvrtc') if m in sys.modules]\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
