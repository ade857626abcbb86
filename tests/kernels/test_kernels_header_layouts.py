"""Every kernel the generators emit compiles with NVRTC in header layouts like the lent H200's:
the CUDA 13 wheels' include directory without ``crt/`` (no ``nvidia-cuda-crt``), with and without
a system toolkit beside it. The first real GPU run failed on ``crt/mma.h`` for exactly this reason.

The include directories are resolved the way the library resolves them (the wheel lookup and the
toolkit roots are pointed at directories built here); each source is compiled without the kernel
cache, so the headers are really read.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernels_cases import needs_nvrtc
from nvmathpy.cuda import nvrtc
from nvmathpy.errors import LibraryError
from nvmathpy.kernels.elementwise import elementwise_kernel
from nvmathpy.kernels.emit_cuda import STORAGE_TYPES
from nvmathpy.kernels.gemm_tiled import MMA_CONFIGS, SIMT_CONFIGS, gemm_kernel, variant_compilable
from nvmathpy.kernels.tiny_batched import tiny_gemm_kernel, tiny_solve_kernel
from nvmathpy.kernels.trace import gelu, trace
from nvmathpy.linalg.gemm.cuda import _custom as custom_cuda
from nvmathpy.plan import Problem

pytestmark = needs_nvrtc

EPILOGUE = trace(lambda x, bias, r, s: gelu(x + bias) * s - r, {"bias": "col", "r": "row", "s": "scalar"})
ARCH = "sm_90"


def half_problem() -> Problem:
    return Problem.of("matmul", a_shape=[9, 6], b_shape=[6, 13], a_strides=[6, 1], b_strides=[13, 1],
                      dtype="float16")


def _wheel_include() -> Path:
    found = nvrtc._wheel_include_dir()
    if found is None or not Path(found, "crt", "mma.h").is_file():
        pytest.skip("needs the CUDA 13 wheels with nvidia-cuda-crt (to build the layouts from)")
    return Path(found)


def _farm(source: Path, target: Path, *, skip: tuple[str, ...] = ()) -> Path:
    """``target`` holding a symlink to each entry of ``source`` except ``skip``."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name not in skip:
            (target / entry.name).symlink_to(entry)
    return target


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """``make(toolkit)`` points the resolver at a wheel include directory without ``crt/`` and, if
    ``toolkit``, at a toolkit laid out like ``/usr/local/cuda-13.0`` (headers under
    ``targets/x86_64-linux/include``, ``include`` a symlink to them); returns the toolkit root."""
    wheel = _wheel_include()
    no_crt = _farm(wheel, tmp_path / "site-packages" / "nvidia" / "cu13" / "include", skip=("crt",))

    def make(toolkit: bool) -> Path | None:
        root = None
        if toolkit:
            root = tmp_path / "cuda-13.0"
            _farm(wheel, root / "targets" / "x86_64-linux" / "include")
            (root / "include").symlink_to(root / "targets" / "x86_64-linux" / "include")
        monkeypatch.setattr(nvrtc, "_wheel_include_dir", lambda: str(no_crt))
        monkeypatch.setattr(nvrtc, "SYSTEM_TOOLKIT_GLOBS", ())
        monkeypatch.delenv("CUDA_PATH", raising=False)
        if root is None:
            monkeypatch.delenv("CUDA_HOME", raising=False)
        else:
            monkeypatch.setenv("CUDA_HOME", str(root))
        nvrtc.cuda_include_dirs.cache_clear()
        return root

    yield make
    nvrtc.cuda_include_dirs.cache_clear()


def every_kernel(with_wmma: bool) -> dict[str, tuple[str, str]]:
    """label -> (source, entry point) of every kernel the generators emit (FFT callbacks aside)."""
    kernels = {}
    for storage in sorted(STORAGE_TYPES):
        for vector in (1, 2):
            k = elementwise_kernel(EPILOGUE, storage, vector=vector)
            kernels[f"elementwise-{storage}-v{vector}"] = (k.source, k.name)
    variants = [("simt", ("float32", "float64"), SIMT_CONFIGS), ("twin", ("float16", "bfloat16"), MMA_CONFIGS),
                ("mma", ("float16", "bfloat16"), MMA_CONFIGS)]
    if with_wmma:
        variants.append(("wmma", ("float16", "bfloat16"), MMA_CONFIGS))
    for variant, dtypes, configs in variants:
        for dtype in dtypes:
            for i, cfg in enumerate(configs):
                k = gemm_kernel(dtype, variant=variant, config=cfg, with_c=i % 2 == 0, epilogue=EPILOGUE,
                                trans_a=i % 2 == 1, trans_b=i % 3 == 1)
                kernels[f"gemm-{variant}-{dtype}-{cfg.label(variant)}"] = (k.source, k.name)
    for dtype in ("float32", "float64"):
        for k in (tiny_gemm_kernel(dtype, 8, 8, 8, with_c=True), tiny_gemm_kernel(dtype, 32, 32, 32, trans_a=True),
                  tiny_solve_kernel(dtype, 8, 1), tiny_solve_kernel(dtype, 32, 4, method="cholesky")):
            kernels[f"tiny-{dtype}-{k.name}"] = (k.source, k.name)
    return kernels


def compile_all(kernels: dict[str, tuple[str, str]]) -> None:
    failed = {}
    for label, (source, name) in kernels.items():
        try:
            compiled = nvrtc.compile_cuda(source, ARCH)
        except Exception as exc:  # noqa: BLE001 - collected, reported together below
            failed[label] = str(exc)[-600:]
            continue
        assert name in compiled.resources, (label, compiled.log)
    assert not failed, "\n\n".join(f"{k}:\n{v}" for k, v in failed.items())


def test_resolution_completes_a_wheel_without_crt_from_a_toolkit(layout):
    root = layout(toolkit=True)
    dirs = nvrtc.cuda_include_dirs()
    assert len(dirs) == 2 and dirs[0].endswith(os.path.join("nvidia", "cu13", "include"))
    assert Path(dirs[1], "crt", "mma.h").is_file() and Path(dirs[1]).resolve().is_relative_to(root.resolve())
    assert nvrtc.header_available("crt/mma.h") and variant_compilable("wmma")
    offered = custom_cuda.tiled_candidates(half_problem(), 90)
    assert len(offered) == len(MMA_CONFIGS) and {c.params["variant"] for c in offered} == {"wmma"}


def test_resolution_without_a_toolkit_reports_the_missing_header(layout):
    layout(toolkit=False)
    dirs = nvrtc.cuda_include_dirs()
    assert len(dirs) == 1 and not Path(dirs[0], "crt").exists()
    assert nvrtc.header_available("cuda_fp16.h") and not nvrtc.header_available("crt/mma.h")
    assert not variant_compilable("wmma") and variant_compilable("twin") and variant_compilable("simt")
    fallback = custom_cuda.tiled_candidates(half_problem(), 90)  # tensor cores through inline PTX instead
    assert len(fallback) == len(MMA_CONFIGS) and {c.params["variant"] for c in fallback} == {"mma"}
    # the layout reproduces the H200's failure for the variant that is then not offered
    with pytest.raises(LibraryError, match="crt/mma.h"):
        nvrtc.compile_cuda(gemm_kernel("float16", variant="wmma").source, ARCH)


def test_resolution_prefers_a_toolkit_of_nvrtcs_major(tmp_path):
    def toolkit(name: str, version: int) -> str:
        inc = tmp_path / name / "include"
        (inc / "crt").mkdir(parents=True)
        for header in ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "mma.h", "crt/mma.h"):
            (inc / header).write_text("")
        (inc / "cuda.h").write_text(f"#define CUDA_VERSION {version}\n")
        return str(inc)

    old, new = toolkit("cuda-12.8", 12080), toolkit("cuda-13.0", 13000)
    assert nvrtc.resolve_include_dirs(None, [old, new], major=13) == (new,)
    assert nvrtc.resolve_include_dirs(None, [old, new], major=12) == (old,)
    assert nvrtc.toolkit_include_dirs([str(tmp_path / "cuda-13.0"), str(tmp_path / "none")]) == [new]


@pytest.mark.parametrize("toolkit", [True, False], ids=["wheel-without-crt+toolkit", "wheel-without-crt"])
def test_every_generated_kernel_compiles(layout, toolkit):
    layout(toolkit=toolkit)
    # without crt/ the wmma variant is not offered (the inline-PTX "mma" one is, see
    # _custom_cuda.tiled_candidates); all the others must compile, and with a toolkit every one
    compile_all(every_kernel(with_wmma=variant_compilable("wmma")))
    assert variant_compilable("wmma") is toolkit


def test_every_generated_kernel_compiles_with_the_system_toolkit(layout, monkeypatch):
    real = [d for d in nvrtc.toolkit_include_dirs(["/usr/local/cuda-13.0", "/usr/local/cuda"])
            if nvrtc._cuda_major(d) == 13]
    if not real:
        pytest.skip("no CUDA 13 toolkit under /usr/local")
    layout(toolkit=False)
    monkeypatch.setenv("CUDA_HOME", str(Path(real[0]).parent))
    nvrtc.cuda_include_dirs.cache_clear()
    assert variant_compilable("wmma")
    compile_all({k: v for k, v in every_kernel(with_wmma=True).items() if "wmma" in k or "elementwise-float16" in k})
