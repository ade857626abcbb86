"""The CUDA matmul engine: cuBLASLt, with nvmathpy's epilogues mapped onto cuBLASLt's own.

How a problem becomes a cuBLASLt call is decided in :mod:`._lt_spec` (types, layouts without
copies, result order, bias/aux/bias-gradient buffers) and built in :mod:`._lt_descriptors`;
the hot path is :mod:`._lt_execute`. This module is the :class:`~nvmathpy.plan.Engine`:

- :meth:`CudaMatmulEngine.candidates` asks ``cublasLtMatmulAlgoGetHeuristic`` for up to
  :data:`MAX_ALGORITHMS` algorithms within the workspace limit; each becomes a candidate holding
  the algorithm's 64 bytes (hex) and its readable configuration, so a wisdom winner is replayed
  exactly by a later process on the same GPU, compute capability and cuBLASLt version;
- :meth:`CudaMatmulEngine.prepare` restores the algorithm, confirms it with
  ``cublasLtMatmulAlgoCheck`` and allocates its workspace from the operand package's pool;
- autotune times candidates with CUDA events, the L2 cache flushed between calls
  (:func:`nvmathpy.cuda.runtime.event_timer`).

Custom (traced Python) epilogues take the candidates of :mod:`._custom` (cuBLASLt's own
epilogue when the expression is exactly one, else cuBLASLt + a generated elementwise kernel and
the fused generated GEMM); stacks of tiny float32/float64 products also get the generated
batched GEMM candidate of :mod:`._tiny` (built-in epilogues none/bias/relu/gelu); NumPy
operands are copied to the device and back around each call (:mod:`._host_operands`); FP8
operands (:mod:`.._fp8`) need compute capability 8.9+.

CuPy (and torch, for torch operands) are imported only when an engine is built.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from ....cuda import lt_algo, runtime
from ....cuda.bindings import cublaslt
from ....errors import InvalidOperandError, InvalidOptionError, LibraryError
from ....plan import Candidate, Engine, Prepared, Problem
from . import _custom as custom_cuda, _host_operands as host_operands
from ._lt_descriptors import LtDescriptors, create_preference
from ._lt_execute import Launch, build_kernel
from .._fp8 import FP8_DTYPES, check_device
from ._lt_spec import LtSpec, build_spec
from .._resolved import ResolvedEpilogue

__all__ = ["CudaMatmulEngine", "LtPrepared", "MAX_ALGORITHMS", "DEFAULT_WORKSPACE_LIMIT", "candidate_for",
           "lt_handle"]

#: Algorithms asked of the heuristic (the candidates autotune may time).
MAX_ALGORITHMS = 8
#: Default workspace limit: 32 MiB, what cuBLASLt recommends for Hopper.
DEFAULT_WORKSPACE_LIMIT = 32 << 20


@functools.cache
def lt_handle(device_id: int) -> int:
    """The process's cuBLASLt handle for ``device_id`` (created once, on that device)."""
    cupy = runtime.import_cupy()
    with cupy.cuda.Device(device_id):
        return cublaslt.create()


def candidate_for(order: str, algo: cublaslt.MatmulAlgo, workspace: int) -> Candidate:
    """The candidate of one heuristic result: order, algorithm bytes (hex), workspace bytes and the
    algorithm's readable configuration (id, tile, split-K, stages, ...)."""
    return Candidate.of("cublaslt", order=order, algo=lt_algo.algo_to_hex(algo), workspace=int(workspace),
                        config=" ".join(f"{k}={v}" for k, v in lt_algo.summary(algo).items()))


def _describe(spec: LtSpec) -> str:
    return (f"{spec.dtype} {spec.batch}x({spec.m}x{spec.k} @ {spec.k}x{spec.n}), epilogue={spec.epilogue!r}, "
            f"order {spec.order}")


class LtPrepared(Prepared):
    """A prepared cuBLASLt candidate: descriptors, algorithm, workspace and the hot-path ``kernel``."""

    def __init__(self, candidate: Candidate, engine: "CudaMatmulEngine", spec: LtSpec, descriptors: LtDescriptors,
                 algo: cublaslt.MatmulAlgo, workspace_bytes: int):
        super().__init__(candidate)
        self.spec, self.descriptors, self.algo = spec, descriptors, algo
        self._engine = engine
        self._buffers: list[Any] = []
        owner, address = runtime.allocate(workspace_bytes, engine.package, engine.device_id, engine.stream())
        self._buffers.append(owner)
        self.kernel: Callable[..., Any] | None = build_kernel(spec, Launch(
            handle=engine.handle, desc=descriptors.desc, a=descriptors.a, b=descriptors.b, d=descriptors.d,
            algo=algo, workspace=address, workspace_bytes=workspace_bytes, relaxed=self._relaxed,
            stream=engine.stream, explicit_stream=engine.explicit_stream, package=engine.package,
            device_id=engine.device_id, raw_storage=engine.host,
        ))

    def _relaxed(self, alignments: tuple[int, int, int, int]) -> tuple[cublaslt.MatmulAlgo, int, int]:
        """The heuristic's best algorithm for pointers with these byte alignments (A, B, C, D)."""
        results = self._engine.heuristic(self.descriptors, alignments, count=1)
        if not results:
            raise LibraryError(f"cuBLASLt has no algorithm for {_describe(self.spec)} with operand alignments "
                               f"{alignments} bytes; pass operands aligned to 256 bytes")
        owner, address = runtime.allocate(results[0].workspaceSize, self._engine.package, self._engine.device_id,
                                          self._engine.stream())
        self._buffers.append(owner)
        return results[0].algo, address, results[0].workspaceSize

    def free(self) -> None:
        if self.descriptors is not None:
            self.descriptors.destroy()
        self.descriptors, self.kernel, self._buffers = None, None, []
        super().free()


class CudaMatmulEngine(Engine):
    """Matmul on an NVIDIA GPU through cuBLASLt.

    Parameters
    ----------
    device_id
        The CUDA device.
    stream
        ``None``: each call runs on the operand package's current stream; else an int handle, a
        CuPy or torch stream, or an object with ``__cuda_stream__``.
    package
        The operands' package (``"cupy"``, ``"torch"`` or ``"dlpack"``): results and workspaces
        are allocated through it. ``"numpy"``: host operands, copied to the device through CuPy
        for each call, with NumPy results.
    workspace_limit
        Most bytes of workspace an algorithm may use (default 32 MiB).
    allow_tf32
        Let float32/complex64 products use TF32 tensor cores (unless the problem says otherwise).
    epilogue
        The plan's :class:`~.._resolved.ResolvedEpilogue` (built in or custom, see
        :mod:`._custom`), or ``None``: no epilogue. The problem holds only its key.
    """

    name = "cuda-cublaslt"

    def __init__(self, *, device_id: int = 0, stream: Any = None, package: str = "cupy",
                 workspace_limit: int = DEFAULT_WORKSPACE_LIMIT, allow_tf32: bool = False,
                 epilogue: ResolvedEpilogue | None = None):
        if isinstance(workspace_limit, bool) or not isinstance(workspace_limit, int) or workspace_limit < 0:
            raise InvalidOptionError(f"workspace_limit must be a non-negative int (bytes), got {workspace_limit!r}")
        self.host = package == "numpy"
        if self.host:
            package = "cupy"
        if package not in runtime.CUDA_PACKAGES:
            raise InvalidOptionError(f"package={package!r}: CUDA operands come from {list(runtime.CUDA_PACKAGES)} "
                                     "(or 'numpy', copied to the device)")
        self.device_id, self.package, self.epilogue = device_id, package, epilogue
        self.custom = epilogue.expr if epilogue is not None else None
        self.workspace_limit, self.allow_tf32 = workspace_limit, allow_tf32
        self.explicit_stream, self.stream, self.timer = runtime.engine_stream(package, device_id, stream)
        self.handle = lt_handle(device_id)

    def device(self) -> dict[str, Any]:
        """GPU name, compute capability, cuBLASLt version, and the workspace limit (it changes the ranking)."""
        return {**runtime.device_description(self.device_id), "workspace_limit": self.workspace_limit}

    def spec(self, problem: Problem, epilogue: ResolvedEpilogue | None, order: str | None = None) -> LtSpec:
        """The cuBLASLt description of ``problem`` with the built-in (or no) ``epilogue`` in result
        ``order`` (default: the preferred one)."""
        return build_spec(problem, order, True if self.allow_tf32 else None, epilogue=epilogue)

    def heuristic(self, descriptors: LtDescriptors, alignments: tuple[int, int, int, int] | None = None,
                  count: int = MAX_ALGORITHMS) -> list[cublaslt.HeuristicResult]:
        """Up to ``count`` algorithms for ``descriptors`` within the workspace limit, best first."""
        pref = create_preference(self.workspace_limit, alignments)
        try:
            d = descriptors
            try:
                results = cublaslt.heuristics(self.handle, d.desc, d.a, d.b, d.d, d.d, pref, count)
            except LibraryError as exc:
                if exc.status != "CUBLAS_STATUS_NOT_SUPPORTED":
                    raise
                results = []
        finally:
            cublaslt.LIB.cublasLtMatmulPreferenceDestroy(pref)
        return [r for r in results if r.state == 0]

    def candidates(self, problem: Problem) -> list[Candidate]:
        """The heuristic's algorithms for the first result order cuBLASLt can compute; for a
        custom epilogue, the candidates of :mod:`._custom`."""
        if self.host:
            problem = host_operands.device_problem(problem)
        if problem.get("dtype") in FP8_DTYPES:
            check_device(custom_cuda.device_arch(self.device_id))
        if self.custom is not None:
            return self._custom_candidates(problem)
        from ._tiny import tiny_candidates, tiny_leads

        tiny = tiny_candidates(problem)
        if tiny and tiny_leads(problem):
            try:
                return tiny + self.lt_candidates(problem, self.epilogue)
            except LibraryError:  # cuBLASLt offers nothing: the tiny kernel alone
                return tiny
        return self.lt_candidates(problem, self.epilogue) + tiny

    def lt_candidates(self, problem: Problem, epilogue: ResolvedEpilogue | None,
                      orders: tuple[str, ...] | None = None) -> list[Candidate]:
        """cuBLASLt candidates of a problem with the built-in (or no) ``epilogue``, in the first of
        ``orders`` (default: those the epilogue allows) the heuristic has algorithms for."""
        spec = self.spec(problem, epilogue)
        for order in orders or spec.orders:
            spec = self.spec(problem, epilogue, order)
            with LtDescriptors(spec) as descriptors:
                results = self.heuristic(descriptors)
            if results:
                return [candidate_for(order, r.algo, r.workspaceSize) for r in results]
        raise LibraryError(f"cuBLASLt offers no algorithm for {_describe(spec)} within a workspace of "
                           f"{self.workspace_limit} bytes")

    def _custom_candidates(self, problem: Problem) -> list[Candidate]:
        native = custom_cuda.native_match(problem, self.epilogue)
        if native is not None:
            try:
                found = self.lt_candidates(self._native_problem(problem), native)
            except (InvalidOperandError, LibraryError):  # e.g. a bias shape cuBLASLt cannot take
                found = []
            if found:
                return [Candidate.of("cublaslt", **c.params, native=native.name, bias=self.epilogue.native_bias)
                        for c in found]
        dtype = problem.get("dtype")
        if dtype not in custom_cuda.KERNEL_DTYPES:
            raise InvalidOperandError(
                f"matmul (cuda): custom epilogues need float16, bfloat16, float32 or float64 operands, got {dtype} "
                f"(only a custom epilogue that is exactly cuBLASLt's bias epilogue runs for {dtype})"
            )
        try:
            plain = self.lt_candidates(custom_cuda.builtin_problem(problem, None, {}), None, ("C",))
        except LibraryError:
            plain = []
        elementwise = [Candidate.of(custom_cuda.ELEMENTWISE, **c.params) for c in plain]
        tiled = custom_cuda.tiled_candidates(problem, custom_cuda.device_arch(self.device_id))
        found = custom_cuda.interleave(elementwise, tiled)
        if not found:
            raise LibraryError(f"matmul (cuda): no candidate computes the custom epilogue for {dtype} on this device")
        return found

    def _native_problem(self, problem: Problem) -> Problem:
        """``problem`` with the built-in epilogue the custom one is exactly, its bias input named ``bias``."""
        bias, inputs = self.epilogue.native_bias, dict(problem.get("inputs") or {})
        return custom_cuda.builtin_problem(problem, self.epilogue.native.name,
                                           {} if bias is None else {"bias": inputs[bias]})

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> Prepared:
        """Prepare a candidate: for cuBLASLt, restore its algorithm, confirm it with
        ``cublasLtMatmulAlgoCheck`` and allocate its workspace; for generated kernels, compile
        and load them. Host (NumPy) operands are copied to the device and back around the call."""
        if not self.host:
            return self._prepare(problem, candidate)
        problem = host_operands.device_problem(problem)
        prepared = self._prepare(problem, candidate)
        prepared.kernel = host_operands.on_device(prepared.kernel, problem, self.explicit_stream, self.device_id)
        return prepared

    def _prepare(self, problem: Problem, candidate: Candidate) -> Prepared:
        if candidate.label == "tiny-gemm" and self.custom is None:
            from ._tiny import tiny_call

            return custom_cuda.CustomPrepared(candidate, tiny_call(
                problem, candidate, device_id=self.device_id, package=self.package, stream=self.stream,
                explicit_stream=self.explicit_stream, raw_storage=self.host))
        if self.custom is None:
            return self.prepare_lt(problem, candidate, self.epilogue)
        label = candidate.label
        if label == "cublaslt":  # the candidates of _custom_candidates' native match
            native = custom_cuda.native_match(problem, self.epilogue)
            if native is None or candidate.params.get("native") != native.name:
                raise InvalidOptionError(f"matmul (cuda): candidate {candidate} does not compute this custom epilogue")
            inner = self.prepare_lt(self._native_problem(problem), candidate, native)
            kernel = custom_cuda.native_call(inner.kernel, self.epilogue.native_bias)
            return custom_cuda.CustomPrepared(candidate, kernel, inner)
        if label == custom_cuda.ELEMENTWISE:
            inner = self.prepare_lt(custom_cuda.builtin_problem(problem, None, {}), candidate, None)
            try:
                kernel = custom_cuda.elementwise_call(inner.kernel, problem, self.custom, self.device_id, self.stream,
                                                      package=self.package, explicit_stream=self.explicit_stream)
            except BaseException:
                inner.free()
                raise
            return custom_cuda.CustomPrepared(candidate, kernel, inner)
        if label == custom_cuda.TILED:
            return custom_cuda.CustomPrepared(candidate, custom_cuda.tiled_call(
                problem, candidate, self.custom, device_id=self.device_id, package=self.package, stream=self.stream,
                explicit_stream=self.explicit_stream, raw_storage=self.host))
        raise InvalidOptionError(f"matmul (cuda): unknown candidate {candidate}")

    def prepare_lt(self, problem: Problem, candidate: Candidate, epilogue: ResolvedEpilogue | None) -> LtPrepared:
        """Restore a cuBLASLt candidate's algorithm for ``problem`` with the built-in (or no)
        ``epilogue``, confirm it with ``cublasLtMatmulAlgoCheck``, allocate its workspace."""
        params = candidate.params
        spec = self.spec(problem, epilogue, params["order"])
        algo = lt_algo.algo_from_hex(params["algo"])
        descriptors = LtDescriptors(spec)
        try:
            d = descriptors
            checked = lt_algo.check(self.handle, d.desc, d.a, d.b, d.d, d.d, algo)
            workspace = max(int(params["workspace"]), int(checked.workspaceSize))
            return LtPrepared(candidate, self, spec, descriptors, algo, workspace)
        except BaseException:
            descriptors.destroy()
            raise
