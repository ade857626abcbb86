"""The tiny batched GEMM candidate of the CUDA matmul engine.

For a stack of small products (``m, n, k <= 32``, at least :data:`TINY_MIN_BATCH` of them,
float32/float64) the generated kernel of :func:`nvmathpy.kernels.tiny_batched.tiny_gemm_kernel`
computes every product in one launch, several problems per thread block, each staged in shared
memory, and applies the built-in epilogues ``bias``, ``relu``, ``gelu``, ``relu_bias`` and
``gelu_bias`` before its store; cuBLASLt's algorithms are tiled for larger matrices. The
candidate (label ``"tiny-gemm"``) is listed beside cuBLASLt's: first for ``m, n, k <= 16`` with
at least :data:`TINY_LEAD_BATCH` products, last otherwise, and autotune times it against them.

Operands are read in place where each matrix has unit stride along its rows or its columns (the
``trans_a``/``trans_b`` variants, fixed by the problem's strides) and copied into that layout
otherwise; ``c`` and the bias are read through broadcast strides; the result is C-ordered, from
the operand package's allocator (or ``out=``). The kernel is compiled for the device's
architecture and launched on the engine's stream (:func:`._custom.load_function`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ....kernels.launch import ArrayRef, pack_arguments
from ....kernels.tiny_batched import GEMM_EPILOGUES, MAX_N, tiny_gemm_kernel
from ....plan import Candidate, Problem
from . import _custom as custom_cuda

__all__ = ["TINY_GEMM", "TINY_LEAD_BATCH", "TINY_LEAD_SIZE", "TINY_MIN_BATCH", "tiny_call", "tiny_candidates",
           "tiny_leads"]

#: The candidate's label.
TINY_GEMM = "tiny-gemm"
#: Fewest products in the stack for the candidate to be offered.
TINY_MIN_BATCH = 16
#: The candidate leads for ``m, n, k <= TINY_LEAD_SIZE`` and at least ``TINY_LEAD_BATCH`` products.
TINY_LEAD_SIZE, TINY_LEAD_BATCH = 16, 256
_DTYPES = ("float32", "float64")


def _sizes(problem: Problem) -> tuple[int, int, int, int]:
    from .._layout import analyse_shapes

    shape = analyse_shapes(tuple(problem.get("a_shape")), tuple(problem.get("b_shape")))
    batch = 1
    for size in shape.batch:
        batch *= size
    return shape.m, shape.n, shape.k, batch


def _real(value: Any) -> bool:
    return not isinstance(value, list)


def tiny_candidates(problem: Problem) -> list[Candidate]:
    """The tiny GEMM candidate where it applies (else ``[]``).

    Examples
    --------
    >>> p = Problem.of("matmul", a_shape=[1000, 8, 8], b_shape=[1000, 8, 8], c_shape=None, dtype="float64",
    ...                epilogue="relu", inputs={}, alpha=1.0, beta=None, a_strides=[64, 8, 1],
    ...                b_strides=[64, 1, 8])
    >>> [(c.label, c.params) for c in tiny_candidates(p)]
    [('tiny-gemm', {'trans_a': False, 'trans_b': True})]
    """
    if problem.get("dtype") not in _DTYPES or problem.get("epilogue") not in (None, *GEMM_EPILOGUES):
        return []
    if not (_real(problem.get("alpha")) and _real(problem.get("beta"))):
        return []
    m, n, k, batch = _sizes(problem)
    if max(m, n, k) > MAX_N or min(m, n, k) < 1 or batch < TINY_MIN_BATCH:
        return []
    trans_a = custom_cuda._trans(problem.get("a_shape"), problem.get("a_strides"))
    trans_b = custom_cuda._trans(problem.get("b_shape"), problem.get("b_strides"))
    return [Candidate.of(TINY_GEMM, trans_a=trans_a, trans_b=trans_b)]


def tiny_leads(problem: Problem) -> bool:
    """Whether the tiny GEMM is the first guess (many products of order 16 or less)."""
    m, n, k, batch = _sizes(problem)
    return max(m, n, k) <= TINY_LEAD_SIZE and batch >= TINY_LEAD_BATCH


def tiny_call(problem: Problem, candidate: Candidate, *, device_id: int, package: str, stream: Callable[[], int],
              explicit_stream: int | None, raw_storage: bool = False) -> Callable[..., Any]:
    """The hot-path ``kernel(a, b, c, inputs, out)`` of the tiny GEMM candidate."""
    dtype, epilogue = problem.get("dtype"), problem.get("epilogue")
    trans_a, trans_b = bool(candidate.params["trans_a"]), bool(candidate.params["trans_b"])
    has_c = problem.get("c_shape") is not None
    m, n, k, _ = _sizes(problem)
    generated = tiny_gemm_kernel(dtype, m, n, k, trans_a=trans_a, trans_b=trans_b, with_c=has_c, epilogue=epilogue)
    launch = custom_cuda.load_function(generated.source, generated.name, device_id)
    cupy = custom_cuda.import_cupy()
    geometry = custom_cuda._Geometry(problem, cupy)
    batch, result = geometry.batch, geometry.result
    alpha = 1.0 if problem.get("alpha") is None else float(problem.get("alpha"))
    beta = float(problem.get("beta") or 0.0)
    new_d = custom_cuda._result_allocator(package, dtype, (batch, m, n), device_id, explicit_stream, cupy,
                                          raw_storage)
    grid, block = generated.launch_dims(batch)
    has_bias = epilogue is not None and epilogue.endswith("bias")
    a_lead, b_lead = (2 if trans_a else 1), (2 if trans_b else 1)

    def matrix(name: str, ref: ArrayRef, lead_axis: int) -> dict[tuple[str, None], int]:
        return {(name, None): ref.pointer, (f"ld{name}", None): ref.strides[lead_axis],
                (f"stride_{name}", None): ref.strides[0]}

    def kernel(a: Any, b: Any, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        a3, b3 = geometry.operand(a, True, trans_a), geometry.operand(b, False, trans_b)
        d = new_d() if out is None else out
        values: dict[tuple[str, None], Any] = {("batch", None): batch, ("alpha", None): alpha,
                                               **matrix("a", custom_cuda._ref(a3), a_lead),
                                               **matrix("b", custom_cuda._ref(b3), b_lead),
                                               **matrix("d", ArrayRef(custom_cuda._pointer(d), (batch, m, n),
                                                                      (m * n, n, 1)), 1)}
        if has_c:
            c3 = cupy.broadcast_to(c.reshape(custom_cuda.aligned_shape(c.shape, len(result), geometry.a_ndim,
                                                                       geometry.b_ndim)),
                                   geometry.full).reshape((batch, m, n))
            if c3.strides[2] != c3.dtype.itemsize and n != 1:
                c3 = cupy.ascontiguousarray(c3)
            values.update(matrix("c", custom_cuda._ref(c3), 1))
            values[("beta", None)] = beta
        if has_bias:  # a local until the launch is enqueued: the reshape may have had to copy
            bias = inputs["bias"]
            bias = cupy.broadcast_to(bias.reshape(custom_cuda.aligned_shape(bias.shape, len(result), geometry.a_ndim,
                                                                            geometry.b_ndim)),
                                     geometry.full).reshape((batch, m, n))
            bias_ref = custom_cuda._ref(bias)
            values[("bias", None)] = bias_ref.pointer
            for role, stride in zip(("batch_stride", "row_stride", "col_stride"), bias_ref.strides):
                values[(f"bias_{role}", None)] = stride
        launch(grid, block, pack_arguments(generated.params, values), stream())
        return d if out is not None else d.reshape(result)

    return kernel
