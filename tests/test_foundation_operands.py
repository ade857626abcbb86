"""Operand wrapping and the package round trip; execution spaces."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nvmathpy.errors import ExecutionSpaceUnavailableError, InvalidOperandError, InvalidOptionError
from nvmathpy.execution import ExecutionCPU, ExecutionCUDA, as_execution, cpu_description, resolve_execution
from nvmathpy.operands import to_package, unwrapper, wrap, wrap_all


def test_numpy_operand_is_zero_copy():
    x = np.asfortranarray(np.random.default_rng(0).standard_normal((5, 3)))
    op = wrap(x, "a")
    assert op.array is x and op.package == "numpy" and op.device == "cpu" and op.device_id is None
    assert op.shape == (5, 3) and op.strides == x.strides and op.dtype == np.float64 and op.ndim == 2
    assert unwrapper(op) is None


def test_rejects_non_arrays_naming_argument():
    with pytest.raises(InvalidOperandError, match=r"b: expected a NumPy, CuPy or PyTorch array.*builtins.list"):
        wrap([1, 2], "b")


def test_dlpack_producer_on_cpu():
    class Producer:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kwargs):
            return self.arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    base = np.arange(6.0).reshape(2, 3)
    op = wrap(Producer(base), "x")
    assert op.package == "dlpack" and op.device == "cpu"
    assert np.shares_memory(op.array, base)


def test_torch_round_trip_zero_copy():
    torch = pytest.importorskip("torch")
    t = torch.randn(4, 3, dtype=torch.float32)
    op = wrap(t, "a")
    assert op.package == "torch" and isinstance(op.array, np.ndarray)
    op.array[0, 0] = 42.0
    assert t[0, 0].item() == 42.0  # a view, not a copy
    back = to_package(op.array * 2, op)
    assert isinstance(back, torch.Tensor) and back.dtype == torch.float32
    torch.testing.assert_close(back, t * 2)


def test_torch_requires_grad_and_bfloat16():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    g = torch.randn(3, requires_grad=True)
    assert wrap(g, "g").array.shape == (3,)
    b = torch.randn(3, 2).to(torch.bfloat16)
    op = wrap(b, "b")
    assert op.dtype.name == "bfloat16"
    back = to_package(op.array, op)
    assert back.dtype == torch.bfloat16 and torch.equal(back, b)


def test_mixed_packages_and_devices_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidOperandError, match="different packages: a is numpy, b is torch"):
        wrap_all(a=np.ones(3), b=torch.ones(3))
    assert set(wrap_all(a=np.ones(3), c=None)) == {"a"}


def test_execution_parsing():
    assert as_execution(None) is None
    assert as_execution("cpu") == ExecutionCPU()
    assert as_execution({"name": "cpu", "num_threads": 2}) == ExecutionCPU(2)
    assert as_execution({"name": "cuda", "device_id": 1}) == ExecutionCUDA(1)
    with pytest.raises(InvalidOptionError, match="execution='gpu' is not known; allowed: 'cpu', 'cuda'"):
        as_execution("gpu")
    with pytest.raises(InvalidOptionError, match="unknown keys \\['threads'\\]"):
        as_execution({"name": "cpu", "threads": 2})
    with pytest.raises(InvalidOptionError, match="num_threads must be a positive int"):
        ExecutionCPU(0)
    with pytest.raises(InvalidOptionError, match="device_id must be a non-negative int"):
        ExecutionCUDA(-1)
    with pytest.raises(InvalidOptionError, match="needs 'name'"):
        as_execution({"num_threads": 2})


def test_resolve_follows_operands_and_cuda_is_one_clear_error():
    assert resolve_execution(None, "cpu", None) == ExecutionCPU()
    assert resolve_execution(ExecutionCPU(1), "cpu", None) == ExecutionCPU(1)
    from nvmathpy.execution import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("a usable GPU is present")
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available: "):
        resolve_execution("cuda", "cpu", None)


def test_cpu_description_is_json_and_stable():
    import json

    desc = cpu_description()
    assert json.loads(json.dumps(desc)) == desc
    assert desc["space"] == "cpu" and desc["cores"] >= 1 and desc["blas"]


def test_numpy_blas_read_from_the_library_is_threadpoolctls_description():
    """The cheap reading of NumPy's OpenBLAS (mapped files, the library's own answers) names it
    as threadpoolctl's scan does: wisdom keys do not change with the way they were read."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from nvmathpy.execution import _listed_numpy_blas, _mapped_numpy_openblas, numpy_openblas_file

    mapped = _mapped_numpy_openblas()
    if mapped is None:
        pytest.skip("no OpenBLAS inside NumPy's wheel among the mapped files here")
    assert mapped == _listed_numpy_blas()
    listed = {os.path.realpath(info["filepath"]) for info in threadpoolctl.threadpool_info()
              if info.get("user_api") == "blas"}
    assert numpy_openblas_file() in listed  # the library NumPy's LAPACK and CBLAS are called in


def test_the_loaded_openblas_is_found_as_the_mapped_files_list_it():
    """Asking the dynamic loader which OpenBLAS files in NumPy's directories are loaded finds
    what Linux's list of mapped files names (the slower way, kept where the loader finds none)."""
    from nvmathpy.execution import _loaded_openblas_files, _mapped_openblas_files, _package_dirs

    dirs = _package_dirs("numpy")
    mapped = _mapped_openblas_files(dirs)
    if not mapped:
        pytest.skip("no OpenBLAS inside NumPy's wheel among the mapped files here")
    assert sorted(_loaded_openblas_files(dirs)) == sorted(mapped)
    assert _loaded_openblas_files(("/nonexistent-dir" + os.sep,)) == []


def test_execution_and_operand_device_must_agree():
    with pytest.raises(InvalidOperandError, match="execution='cpu' was asked for but the operands live on cuda:0"):
        resolve_execution("cpu", "cuda", 0)


def test_torch_lazy_conj_and_neg_views():
    torch = pytest.importorskip("torch")
    z = torch.randn(3, 2, dtype=torch.complex128)
    op = wrap(z.conj(), "z")
    np.testing.assert_array_equal(op.array, z.numpy().conj())
    n = torch.randn(3, dtype=torch.complex128)
    neg = torch._neg_view(n)
    np.testing.assert_array_equal(wrap(neg, "n").array, -n.numpy())


def test_raw_storage_of_dtypes_cupy_lacks():
    """torch CUDA bfloat16/float8 tensors travel as raw storage (CuPy has no such types), with
    the element type kept in the Operand (checked here on the mapping; the CUDA path in tests/gpu)."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from nvmathpy.operands import Operand, torch_raw_storage

    assert torch_raw_storage(torch.bfloat16) == (torch.int16, "bfloat16")
    assert torch_raw_storage(torch.float8_e4m3fn) == (torch.uint8, "float8_e4m3fn")
    assert torch_raw_storage(torch.float32) is None
    raw = np.zeros((2, 3), np.int16)
    op = Operand(raw, "torch", "cuda", 0, np.dtype(ml_dtypes.bfloat16))
    assert op.dtype.name == "bfloat16" and op.shape == (2, 3) and op.strides == raw.strides
    assert Operand(raw, "numpy", "cpu", None).dtype == np.int16
