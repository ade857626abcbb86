"""Per-call host work of the CUDA hot paths, checked without a GPU: what is looked up once per
plan stays looked up once, and results are never shared between calls."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from nvmathpy.cuda import runtime
from nvmathpy.operands import Operand, unwrapper

torch = pytest.importorskip("torch")


def test_torch_results_skip_the_dlpack_round_trip():
    convert = unwrapper(Operand(np.zeros(1), "torch", "cuda", 0))
    tensor = torch.arange(3.0)
    assert convert(tensor) is tensor  # already torch: handed back as it is
    converted = convert(np.arange(3.0))  # anything else still travels through DLPack
    assert isinstance(converted, torch.Tensor) and converted.tolist() == [0.0, 1.0, 2.0]


def test_torch_current_stream_is_the_raw_handle_when_torch_has_it(monkeypatch):
    asked = []
    fake_c = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: asked.append(device) or 4096 + device)
    fake = types.SimpleNamespace(_C=fake_c, cuda=types.SimpleNamespace(current_stream=None))
    monkeypatch.setitem(sys.modules, "torch", fake)
    get = runtime.current_stream_pointer("torch", 3)
    assert get() == 4099 and get() == 4099 and asked == [3, 3]  # looked up per call: the stream may change


def test_torch_current_stream_falls_back_to_the_public_api(monkeypatch):
    stream = types.SimpleNamespace(cuda_stream=77)
    fake = types.SimpleNamespace(_C=types.SimpleNamespace(), cuda=types.SimpleNamespace(
        current_stream=lambda device: stream if device == 1 else None))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert runtime.current_stream_pointer("torch", 1)() == 77


def test_planned_execute_returns_a_fresh_result_each_call(monkeypatch):
    """The result comes from the pool on every call (the constructor, dtype resolved at
    planning): a returned result is never overwritten by the next call."""
    pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed")
    import cuda_emulation
    from cuda_emulation import HostArray

    from nvmathpy.errors import MissingDependencyError
    from nvmathpy.cuda.bindings import cublaslt
    from nvmathpy.execution import ExecutionCUDA
    from nvmathpy.linalg import Matmul
    from nvmathpy.linalg.gemm import matmul_plan

    try:
        cublaslt.LIB.loaded
    except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
        pytest.skip(f"cuBLASLt not installed: {exc}")
    cuda_emulation.install(monkeypatch.setattr, monkeypatch.setitem)
    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda value, device, device_id: ExecutionCUDA(0))
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    da, db = a.view(HostArray), b.copy().view(HostArray)
    with Matmul(da, db, execution="cuda") as plan:
        plan.plan()
        first = plan.execute()
        db[...] = 2 * b  # the plan reads its operands in place: the next product doubles
        second = plan.execute()
    assert first is not second and first.dtype == np.float32
    np.testing.assert_allclose(np.asarray(first), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(second), 2 * (a @ b), rtol=1e-5, atol=1e-5)
