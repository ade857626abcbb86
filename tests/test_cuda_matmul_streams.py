"""Which stream the cuBLASLt hot path's CuPy work lands on, checked on the host (issue 20): operand
copies are made on the plan's stream (the explicit ``stream=``, or torch's current stream for
torch operands), not on CuPy's current stream, which the product does not wait for; raw stream
handles are wrapped with ``cupy.cuda.Stream.from_external`` where CuPy has it. CuPy is the
NumPy-backed stand-in of tests/cuda_emulation.py with a stream stack that records, for each copy,
the stream that was current."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
pytest.importorskip("ml_dtypes")

from nvmathpy.cuda import runtime  # noqa: E402
from nvmathpy.cuda.bindings import cublaslt as lt  # noqa: E402
from nvmathpy.errors import MissingDependencyError  # noqa: E402
from nvmathpy.linalg import Matmul  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_descriptors import LtDescriptors  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_execute import Launch, build_kernel  # noqa: E402
from nvmathpy.linalg.gemm.cuda._lt_spec import build_spec  # noqa: E402
from nvmathpy.linalg.gemm.matmul_plan import _encode_scalar  # noqa: E402
from nvmathpy.plan import Problem  # noqa: E402
from cuda_emulation import emulated_matmul, host, host_cupy  # noqa: E402
from numerics import rand, up  # noqa: E402

try:
    lt.LIB.loaded
except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
    pytest.skip(f"cuBLASLt not installed: {exc}", allow_module_level=True)

CUPY_CURRENT = 0  # the stand-in's own current stream (the legacy default stream)


class RecordingCupy:
    """``host_cupy()`` with ``cuda.Stream.from_external`` contexts that push their handle on a
    stack, and ``ascontiguousarray`` (every operand copy) recording the stream current at the call."""

    def __init__(self, from_external: bool = True):
        self.module = host_cupy()
        self.stack = [CUPY_CURRENT]
        self.copies: list[int] = []
        self.wrapped: list[tuple[str, int]] = []
        copy = self.module.ascontiguousarray

        def ascontiguousarray(x, *args, **kwargs):
            self.copies.append(self.stack[-1])
            return copy(x, *args, **kwargs)

        self.module.ascontiguousarray = ascontiguousarray
        cuda = self.module.cuda
        attrs = dict(vars(cuda))
        attrs["ExternalStream"] = lambda ptr, device_id=-1: self._stream("ExternalStream", ptr)
        if from_external:
            attrs["Stream"] = types.SimpleNamespace(
                from_external=lambda obj: self._stream("from_external", obj.__cuda_stream__()[1]))
        self.module.cuda = types.SimpleNamespace(**attrs)

    def _stream(self, how: str, ptr: int):
        self.wrapped.append((how, ptr))
        stack = self.stack

        class Context:
            def __init__(self):
                self.ptr = ptr

            def __enter__(self):
                stack.append(ptr)
                return self

            def __exit__(self, *exc):
                stack.pop()
                return False

        return Context()


def problem_of(a, b, *, epilogue=None, inputs=None):
    """The problem key of these operands without recorded strides (so layouts are copied)."""
    plan = Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs)
    fields = plan.problem.as_dict()["fields"]
    fields["alpha"], fields["beta"] = _encode_scalar(1.0), _encode_scalar(None)
    return Problem.of("matmul", **fields)


@pytest.fixture
def make(monkeypatch):
    """``make(problem, package, stream, explicit) -> (kernel, recording cupy)``."""
    made = []

    def build(problem, package, stream, explicit, from_external=True):
        fake = RecordingCupy(from_external)
        monkeypatch.setitem(sys.modules, "cupy", fake.module)
        monkeypatch.setattr(lt.LIB, "cublasLtMatmul", emulated_matmul, raising=False)
        spec = build_spec(problem)
        descriptors = LtDescriptors(spec)
        made.append(descriptors)
        launch = Launch(handle=0, desc=descriptors.desc, a=descriptors.a, b=descriptors.b, d=descriptors.d,
                        algo=lt.MatmulAlgo(), workspace=0, workspace_bytes=0,
                        relaxed=lambda alignments: (lt.MatmulAlgo(), 0, 0), stream=lambda: stream,
                        explicit_stream=explicit, package=package, device_id=0)
        return build_kernel(spec, launch), fake

    yield build
    for descriptors in made:
        descriptors.destroy()


def rel_err(x, ref):
    x, ref = up(x), up(ref)
    assert np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def operands(rng):
    """a padded inside a wider array, b every other column of one: both copied C-contiguous."""
    a = rand(rng, (3, 9, 10), "float64")[..., :7]
    b = rand(rng, (7, 10), "float64")[:, ::2]
    return a, b


@pytest.mark.parametrize("package,stream,explicit", [("cupy", 77, 77), ("torch", 55, None)])
def test_plain_product_copies_operands_on_the_plans_stream(make, package, stream, explicit):
    if package == "torch":
        pytest.importorskip("torch")  # torch operands: the stream is torch's current one, not CuPy's
    rng = np.random.default_rng(40)
    a, b = operands(rng)
    kernel, fake = make(problem_of(a, b), package, stream, explicit)
    out = host(np.empty((3, 9, 5)))
    got = kernel(host(a), host(b), None, {}, out)
    assert fake.copies == [stream, stream]  # a and b, each copied with the plan's stream current
    assert all(how == "from_external" for how, _ in fake.wrapped) and fake.wrapped
    assert rel_err(got, up(a) @ up(b)) < 1e-13


def test_epilogue_product_copies_operands_on_the_plans_stream(make):
    rng = np.random.default_rng(41)
    a, b = operands(rng)
    bias = rand(rng, (5,), "float64")
    kernel, fake = make(problem_of(a, b, epilogue="gelu_aux_bias", inputs={"bias": bias}), "cupy", 77, 77)
    got, extra = kernel(host(a), host(b), None, {"bias": host(bias)}, None)
    assert fake.copies[:2] == [77, 77] and set(fake.copies) == {77}
    z = up(a) @ up(b) + up(bias)
    assert rel_err(extra["gelu_aux"], z) < 1e-13
    # aux returned C-contiguous, without cuBLASLt's padded leading dimension (what torch's fake says)
    assert np.asarray(extra["gelu_aux"]).flags.c_contiguous and extra["gelu_aux"].shape == (3, 9, 5)
    gelu = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    assert rel_err(got, gelu) < 1e-13


def test_cupy_operands_without_an_explicit_stream_stay_on_cupys_current_stream(make):
    rng = np.random.default_rng(42)
    a, b = operands(rng)
    kernel, fake = make(problem_of(a, b), "cupy", CUPY_CURRENT, None)
    got = kernel(host(a), host(b), None, {}, None)
    assert fake.copies == [CUPY_CURRENT, CUPY_CURRENT] and fake.wrapped == []
    assert rel_err(got, up(a) @ up(b)) < 1e-13


def test_cupy_stream_uses_from_external_and_falls_back_to_external_stream():
    new, old = RecordingCupy(from_external=True), RecordingCupy(from_external=False)
    with runtime.cupy_stream(123, new.module) as s:
        assert s.ptr == 123 and new.stack[-1] == 123
    with runtime.cupy_stream(0, old.module):
        assert old.stack[-1] == 0
    assert new.wrapped == [("from_external", 123)] and old.wrapped == [("ExternalStream", 0)]
