"""The bindings agree with the installed vendor headers: every declared function's parameters
(count and ABI class, read from the header text), every enum value and the struct layouts
(compiled with the system C compiler)."""

from __future__ import annotations

import ctypes
import enum
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HEADERS = {  # cuda-pathfinder header name -> headers it provides that the bindings follow
    "cudart": ("cuda_runtime_api.h", "driver_types.h", "library_types.h"),
    "cublas": ("cublas_api.h", "cublasLt.h"),
    "cufft": ("cufft.h", "cufftXt.h"),
    "cusolver": ("cusolverDn.h", "cusolver_common.h"),
    "nvrtc": ("nvrtc.h",),
    "nvjitlink": ("nvJitLink.h",),
}
POINTER_TYPEDEFS = {
    "cudaStream_t",
    "cublasHandle_t",
    "cublasLtHandle_t",
    "cublasLtMatmulDesc_t",
    "cublasLtMatrixLayout_t",
    "cublasLtMatmulPreference_t",
    "cusolverDnHandle_t",
    "cusolverDnParams_t",
    "syevjInfo_t",
    "gesvdjInfo_t",
    "nvrtcProgram",
    "nvJitLinkHandle",
}
SCALARS = {
    "int": ("int", 4),
    "unsigned": ("int", 4),
    "unsigned int": ("int", 4),
    "uint32_t": ("int", 4),
    "cufftHandle": ("int", 4),
    "int64_t": ("int", 8),
    "uint64_t": ("int", 8),
    "size_t": ("int", 8),
    "long long int": ("int", 8),
    "signed char": ("int", 1),
    "float": ("float", 4),
    "double": ("float", 8),
}
# Header enumerator prefix of each binding enum (the rest of the name is the member's).
PREFIXES = {
    "cublas.Status": "",
    "cublas.Operation": "CUBLAS_OP_",
    "cublas.FillMode": "CUBLAS_FILL_MODE_",
    "cublas.SideMode": "CUBLAS_SIDE_",
    "cublas.DiagType": "CUBLAS_DIAG_",
    "cublas.ComputeType": "CUBLAS_",
    "library_types.DataType": "CUDA_",
    "library_types.LibraryProperty": "",
    "cublaslt.Order": "CUBLASLT_ORDER_",
    "cublaslt.MatrixLayoutAttribute": "CUBLASLT_MATRIX_LAYOUT_",
    "cublaslt.MatmulDescAttribute": "CUBLASLT_MATMUL_DESC_",
    "cublaslt.PointerMode": "CUBLASLT_POINTER_MODE_",
    "cublaslt.Epilogue": "CUBLASLT_EPILOGUE_",
    "cublaslt.MatmulPreferenceAttribute": "CUBLASLT_MATMUL_PREF_",
    "cublaslt.ReductionScheme": "CUBLASLT_REDUCTION_SCHEME_",
    "cublaslt.AlgoConfigAttribute": "CUBLASLT_ALGO_CONFIG_",
    "cufft.Result": "",
    "cufft.Type": "CUFFT_",
    "cufft.CallbackType": "CUFFT_CB_",
    "cusolver.Status": "",
    "cusolver.EigMode": "CUSOLVER_EIG_MODE_",
    "cusolver.EigRange": "CUSOLVER_EIG_RANGE_",
    "cusolver.AlgMode": "CUSOLVER_",
    "cusolver.Function": "CUSOLVERDN_",
    "nvrtc.Result": "",
    "nvjitlink.Result": "",
    "nvjitlink.InputType": "NVJITLINK_INPUT_",
}
CONSTANTS = {  # binding constant -> header name
    "cufft.FORWARD": "CUFFT_FORWARD",
    "cufft.INVERSE": "CUFFT_INVERSE",
    "cudart.ERROR_INSUFFICIENT_DRIVER": "cudaErrorInsufficientDriver",
    "cudart.ERROR_NO_DEVICE": "cudaErrorNoDevice",
}
# Enumerators of CUDA 12's headers that CUDA 13 dropped; the bindings carry both majors' codes.
CUDA12_ONLY = {"CUFFT_INCOMPLETE_PARAMETER_LIST", "CUFFT_PARSE_ERROR", "CUFFT_LICENSE_ERROR"}
# Enumerators the bindings declare that CUDA 13 updates added after 13.0 (the local wheels,
# and the lent H200's CUDA 13.0 stack, lack them; they are only used where the header has them).
ADDED_AFTER_13_0 = {"NVRTC_ERROR_BUSY", "CUSOLVERDN_GEQRF", "CUSOLVERDN_SYEVD", "CUSOLVERDN_GESVD"}


@pytest.fixture(scope="module")
def headers(cuda_wheels) -> dict[str, Path]:
    from cuda.pathfinder import find_nvidia_header_directory

    found = {}
    for lib, files in HEADERS.items():
        directory = find_nvidia_header_directory(lib)
        if directory is None:
            pytest.skip(f"no {lib} headers installed")
        found.update({name: Path(directory, name) for name in files})
    return found


@pytest.fixture(scope="module")
def header_text(headers) -> str:
    text = "\n".join(path.read_text(errors="replace") for path in headers.values())
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def abi_class_of_ctype(ctype) -> object:
    if issubclass(ctype, (ctypes.c_void_p, ctypes.c_char_p, ctypes._Pointer)):
        return "pointer"
    kind = "float" if issubclass(ctype, (ctypes.c_float, ctypes.c_double)) else "int"
    return kind, ctypes.sizeof(ctype)


def abi_class_of_param(param: str, text: str) -> object:
    if "*" in param or "[" in param:
        return "pointer"
    words = [w for w in param.replace("const", " ").split() if w not in ("enum", "struct")]
    type_name = " ".join(words[:-1]) if len(words) > 1 else words[0]
    if type_name in POINTER_TYPEDEFS:
        return "pointer"
    if type_name in SCALARS:
        return SCALARS[type_name]
    # any other type must be an enum typedef of the headers (passed as int)
    enum_typedef = rf"(\}}\s*{type_name}\s*;|typedef\s+(\w+\s+)*enum\s+\w+\s+{type_name}\s*;)"
    assert re.search(enum_typedef, text), f"unclassified parameter type {type_name!r}"
    return "int", 4


def prototypes(text: str) -> dict[str, list[str]]:
    """Map each function declared (not defined) in ``text`` to its parameter strings."""
    found: dict[str, list[str]] = {}
    for name, params in re.findall(r"\b(\w+)\s*\(([^;{}()]*)\)\s*;", text):
        params = " ".join(params.split())
        found.setdefault(name, [] if params in ("", "void") else [p.strip() for p in params.split(",")])
    return found


def test_every_function_matches_its_header_prototype(cuda_wheels, header_text):
    declared = prototypes(header_text)
    checked = 0
    for module in cuda_wheels.values():
        major = module.LIB.loaded.cuda_major
        for fn in module.LIB.functions.values():
            # a header may declare only its own minor's versioned symbol (CUDA 12's nvJitLink.h)
            versioned = sorted(n for n in declared if re.fullmatch(rf"__{fn.name}_{major}_\d+", n))
            name = next((n for n in (fn.symbol(major), fn.name, *versioned) if n in declared), None)
            assert name is not None, f"{fn.name} is not declared in the headers"
            params = declared[name]
            expected = [abi_class_of_param(p, header_text) for p in params]
            assert [abi_class_of_ctype(t) for t in fn.argtypes] == expected, fn.name
            checked += 1
    assert checked > 100


def binding_module(cuda_wheels, key: str) -> object:
    """The binding module named by ``key``'s first part (``"cufft.Result"`` -> the cufft module)."""
    from nvmathpy.cuda.bindings import library_types

    short = key.split(".")[0]
    return next(m for m in [*cuda_wheels.values(), library_types] if m.__name__.endswith(f".{short}"))


def binding_enums(cuda_wheels) -> dict[str, type[enum.IntEnum]]:
    return {key: getattr(binding_module(cuda_wheels, key), key.split(".")[1]) for key in PREFIXES}


def test_every_binding_enum_is_listed(cuda_wheels):
    from nvmathpy.cuda.bindings import library_types

    declared = {
        f"{module.__name__.rsplit('.', 1)[1]}.{name}"
        for module in [*cuda_wheels.values(), library_types]
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, enum.IntEnum)
        and (value.__name__, value.__module__) == (name, module.__name__)
    }
    assert declared == set(PREFIXES)


@pytest.fixture(scope="module")
def compiled_facts(cuda_wheels, headers, header_text, tmp_path_factory) -> tuple[dict[str, int], set[str]]:
    """Compile a C program that prints the header's value of every enumerator and layout fact."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    checks: dict[str, str] = {
        "sizeof_algo": "sizeof(cublasLtMatmulAlgo_t)",
        "sizeof_heuristic": "sizeof(cublasLtMatmulHeuristicResult_t)",
    }
    for field in ("algo", "workspaceSize", "state", "wavesCount", "reserved"):
        checks[f"offset_{field}"] = f"offsetof(cublasLtMatmulHeuristicResult_t, {field})"
    absent = set()
    # CUDA 12's nvJitLink.h #defines the enumerators CUDA 13 added as aliases of older codes
    identifiers = set(re.findall(r"\w+", header_text)) - set(re.findall(r"#\s*define\s+(\w+)", header_text))
    for key, cls in binding_enums(cuda_wheels).items():
        for member in cls:
            name = PREFIXES[key] + member.name
            if name in identifiers:
                checks[f"{key}.{member.name}"] = name
            else:
                absent.add(name)
    checks.update(CONSTANTS)
    work = tmp_path_factory.mktemp("headers")
    # CCCL's <nv/target> (included by cuda_fp16.h) is not in the runtime wheel and unused in C.
    (work / "nv").mkdir()
    (work / "nv" / "target").write_text("")
    includes = ("stdio.h", "stddef.h", "cublasLt.h", "cufftXt.h", "cusolverDn.h", "nvrtc.h", "nvJitLink.h")
    prints = "".join(f'    printf("%s %lld\\n", "{key}", (long long)({expr}));\n' for key, expr in checks.items())
    source = work / "facts.c"
    head = "".join(f"#include <{name}>\n" for name in includes)
    source.write_text(f"{head}int main(void) {{\n{prints}    return 0;\n}}\n")
    dirs = sorted({str(path.parent) for path in headers.values()})
    build = subprocess.run(
        [compiler, "-std=c11", "-I", str(work), *(f"-I{d}" for d in dirs), str(source), "-o", str(work / "facts")],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        missing = re.search(r"fatal error: (\S+): No such file", build.stderr)
        if missing:
            pytest.skip(f"header {missing.group(1)} not installed (CUDA 12's crt/ is in the nvcc wheel)")
        pytest.fail(build.stderr)
    run = subprocess.run([str(work / "facts")], capture_output=True, text=True, check=True)
    facts = {key: int(value) for key, value in (line.split() for line in run.stdout.splitlines())}
    return facts, absent


def test_struct_layouts_match_the_header(cuda_wheels, compiled_facts):
    facts, _ = compiled_facts
    lt = cuda_wheels["cublasLt"]
    assert ctypes.sizeof(lt.MatmulAlgo) == facts["sizeof_algo"] == 64
    assert ctypes.sizeof(lt.HeuristicResult) == facts["sizeof_heuristic"] == 96
    for field in ("algo", "workspaceSize", "state", "wavesCount", "reserved"):
        assert getattr(lt.HeuristicResult, field).offset == facts[f"offset_{field}"], field


def test_enum_values_match_the_header(cuda_wheels, compiled_facts):
    facts, absent = compiled_facts
    if cuda_wheels["cudart"].LIB.loaded.cuda_major == 13:
        assert absent <= CUDA12_ONLY | ADDED_AFTER_13_0  # (older headers lack the enumerators added since)
    for key, cls in binding_enums(cuda_wheels).items():
        for member in cls:
            if f"{key}.{member.name}" in facts:
                assert member.value == facts[f"{key}.{member.name}"], f"{key}.{member.name}"
    for key in CONSTANTS:
        assert getattr(binding_module(cuda_wheels, key), key.split(".")[1]) == facts[key], key
