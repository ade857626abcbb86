"""NumPy operands asked to run on CUDA (``execution="cuda"``), checked without a GPU.

The engine copies them to the device through CuPy, runs there, and hands NumPy results back.
Here CuPy is the NumPy-backed stand-in of tests/cuda_emulation.py (its arrays are
``HostArray``; ``asnumpy`` returns plain ``numpy.ndarray``) and ``cublasLtMatmul`` the host
emulation, so the test sees which layouts travel, that results come back as NumPy arrays, and
that the numbers agree with the CPU engine in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
pytest.importorskip("ml_dtypes")

from nvmathpy.cuda.bindings import cublaslt as lt  # noqa: E402
from nvmathpy.errors import InvalidOperandError, MissingDependencyError  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda._host_operands import device_problem, device_strides, upload  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402
from numerics import TOL, np_dtype, rand, up  # noqa: E402

try:
    lt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLASLt not installed: {exc}", allow_module_level=True)

import cuda_emulation  # noqa: E402


@pytest.fixture
def emulated(monkeypatch):
    """The emulation, with the real execution resolution (NumPy operands, execution="cuda")."""
    cuda_emulation.install(monkeypatch.setattr, monkeypatch.setitem)
    import sys

    return sys.modules["cupy"]


def test_device_strides_keep_c_and_swapped_layouts():
    assert device_strides((3, 4), (4, 1)) == [4, 1]
    assert device_strides((3, 4), (1, 3)) == [1, 3]           # a .T travels as the same view
    assert device_strides((2, 3, 4), (12, 1, 3)) == [12, 1, 3]
    assert device_strides((3, 4), (5, 1)) == [4, 1]           # padded: made C-contiguous
    assert device_strides((2, 3, 4), (1, 2, 6)) == [12, 4, 1]  # a 3-D .T: no cheap layout
    assert device_strides((7,), (2,)) == [1]
    problem = Problem.of("matmul", a_shape=[3, 4], a_strides=[1, 3], b_shape=[4, 5], b_strides=[10, 2])
    assert (device_problem(problem).get("a_strides"), device_problem(problem).get("b_strides")) == ([1, 3], [5, 1])


def test_upload_keeps_the_swapped_view(emulated):
    x = np.arange(12.0).reshape(3, 4)
    moved = upload(x.T, emulated)
    assert isinstance(moved, emulated.ndarray) and moved.strides == x.T.strides and np.array_equal(moved, x.T)
    padded = np.arange(20.0).reshape(4, 5)[:, :3]
    assert upload(padded, emulated).flags.c_contiguous
    assert upload(np.asarray(2.0, np.float32), emulated).shape == ()
    import ml_dtypes

    raw = upload(np.arange(6.0).reshape(2, 3).astype(ml_dtypes.bfloat16).T, emulated)  # CuPy has no bfloat16
    assert raw.dtype == np.uint16 and raw.shape == (3, 2) and raw.strides == (2, 6)


def check(got, ref, dtype):
    assert type(got) is np.ndarray and got.dtype == np_dtype(dtype)
    assert np.isfinite(up(got)).all()
    assert np.linalg.norm(up(got) - up(ref)) / np.linalg.norm(up(ref)) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "float16", "bfloat16"])
@pytest.mark.parametrize("layouts", [("C", "C"), ("T", "pad"), ("batch", "T")])
def test_numpy_operands_run_on_cuda_and_come_back_as_numpy(emulated, dtype, layouts):
    rng = np.random.default_rng(1)
    shapes = {"C": (13, 7), "T": (13, 7), "pad": (7, 11), "batch": (3, 13, 7)}
    a_layout, b_layout = layouts
    a = rand(rng, shapes[a_layout], dtype) if a_layout != "T" else rand(rng, (7, 13), dtype).T
    b = rand(rng, (7, 11), dtype) if b_layout == "C" else (
        rand(rng, (7, 14), dtype)[:, :11] if b_layout == "pad" else rand(rng, (11, 7), dtype).T)
    keep = (a.copy(), b.copy())
    with Matmul(a, b, execution="cuda") as mm:
        mm.plan()
        assert mm.candidate.label == "cublaslt"
        got = mm.execute()
    check(got, up(a) @ up(b), dtype)
    assert np.array_equal(a, keep[0]) and np.array_equal(b, keep[1])


def test_epilogues_aux_outputs_and_out_come_back_as_numpy(emulated):
    rng = np.random.default_rng(2)
    a, b, bias = rand(rng, (2, 9, 5), "float64"), rand(rng, (5, 6), "float64"), rand(rng, (6,), "float64")
    with Matmul(a, b, epilogue="relu_aux_bias", epilogue_inputs={"bias": bias}, execution="cuda") as mm:
        mm.plan()
        got, aux = mm.execute()
        out = np.full((2, 9, 6), np.nan)
        assert mm.execute(out=out)[0] is out
    z = up(a) @ up(b) + bias
    check(got, np.maximum(z, 0), "float64")
    check(out, np.maximum(z, 0), "float64")
    assert type(aux["relu_aux"]) is np.ndarray and np.array_equal(aux["relu_aux"], z > 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_custom_epilogue_with_numpy_operands(emulated, dtype):
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("the kernel emulation needs g++")
    rng = np.random.default_rng(3)
    a, b, r = rand(rng, (11, 5), dtype), rand(rng, (5, 7), dtype), rand(rng, (11, 7), dtype)
    with Matmul(a, b, epilogue=lambda x, r, s: np.tanh(x) * s + r, epilogue_inputs={"r": r, "s": 0.5},
                execution="cuda") as mm:
        for candidate in mm._engine.candidates(mm.problem)[:2]:  # cuBLASLt + elementwise, then the fused GEMM
            mm._install(mm._engine.prepare(mm.problem, candidate), "heuristic")
            check(mm.execute(), np.tanh(up(a) @ up(b)) * 0.5 + up(r), dtype)


def test_one_call_matmul_with_numpy_operands_on_cuda(emulated):
    import nvmathpy.linalg as la

    rng = np.random.default_rng(4)
    a, b = rand(rng, (6, 4), "complex64"), rand(rng, (4, 3), "complex64")
    for _ in range(2):
        check(la.matmul(a, b, execution="cuda"), up(a) @ up(b), "complex64")


def test_torch_cpu_operands_on_cuda_are_refused_clearly(emulated):
    torch = pytest.importorskip("torch")
    a = torch.ones((3, 4))
    with pytest.raises(InvalidOperandError, match="host operands"):
        Matmul(a, a.T, execution="cuda")


def test_numpy_operands_run_on_the_device_execution_names(emulated, monkeypatch):
    current, _ = cuda_emulation.record_devices(monkeypatch, emulated)
    multiplied_on = cuda_emulation.devices_of_calls(monkeypatch, lt.LIB, "cublasLtMatmul", current)
    rng = np.random.default_rng(5)
    a, b = rand(rng, (9, 5), "float64"), rand(rng, (5, 4), "float64")
    with Matmul(a, b, execution={"name": "cuda", "device_id": 1}) as mm:
        mm.plan()
        check(mm.execute(), up(a) @ up(b), "float64")
    assert multiplied_on == [1]
