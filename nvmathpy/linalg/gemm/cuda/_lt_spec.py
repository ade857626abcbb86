"""What a matmul problem means in cuBLASLt terms: types, layouts, epilogue, bias and aux buffers.

Pure arithmetic on the :class:`~nvmathpy.plan.Problem` key (no device, no CuPy), so CI checks
it and the descriptors built from it (:mod:`._lt_descriptors`) without a GPU.

The NumPy product ``(..., M, K) @ (..., K, N)`` is written either C-ordered (cuBLASLt computes
``D^T = B^T A^T``: its rows are the NumPy columns) or with F-ordered result matrices (cuBLASLt
computes ``D = A B``). The order is chosen by what the epilogue needs:

- a bias of one value per column ``(N,)`` is cuBLASLt's per-row bias of the C-ordered problem,
  one per row ``(M, 1)`` that of the F-ordered one;
- ``drelu_bgrad``/``dgelu_bgrad`` sum the result over its rows (one value per NumPy column):
  cuBLASLt's bias gradient has one value per row of D, so the C order;
- ``bgrada`` (``a`` summed over K) is cuBLASLt's ``BGRADB`` in the C order (``a`` is cuBLASLt's
  B there) and ``BGRADA`` in the F order; ``bgradb`` the other way round;
- everything else prefers the C order (the result comes back C-contiguous).

Operand strides come from the problem's ``a_strides``/``b_strides`` (element strides) when the
plan records them; otherwise C-contiguous operands are assumed (and 2-D F-contiguous ones when
the layout class says ``"F"``), and the engine copies an operand whose strides differ into the
assumed layout.

FP8 (``float8_e4m3fn``/``float8_e5m2`` operands, see :mod:`.._fp8`): cuBLASLt computes FP8
products only in the "TN" form, ``op(A) = A^T`` and ``op(B) = B``, i.e. both of its operands
stored with unit stride along ``K``. In NumPy terms that is ``a`` with C-contiguous rows and
``b`` with F-contiguous columns (``x @ w.T`` for a C-contiguous weight ``w`` of shape
``(N, K)``), in either result order, so the usual layout of a linear layer needs no copy.
An ``a`` or ``b`` given otherwise is copied into that layout (recorded as ``a_copy="C"`` /
``b_copy="F"``). Leading dimensions must be multiples of 16 elements (so ``K`` must be, for
unpadded operands). The result (and ``c``, bias) is ``result_dtype`` (bfloat16, float16 or
float32); per-tensor scales of ``a`` and ``b`` (float32 device scalars) are set per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ....cuda.bindings.cublaslt import ComputeType, DataType, Epilogue as LtEpilogue
from ....errors import InvalidOperandError, InvalidOptionError
from ....plan import Problem
from .._fp8 import FP8_DTYPES, FP8_EPILOGUES, FP8_RESULTS
from .._layout import analyse_shapes
from .cublaslt_layout import LtMatrix, LtProblem, lt_problem
from .._resolved import ResolvedEpilogue, resolve_builtin

__all__ = [
    "AuxSpec",
    "BiasSpec",
    "LtSpec",
    "FP8_LD_MULTIPLE",
    "LT_EPILOGUES",
    "TYPES",
    "build_spec",
    "matrix_fields",
    "orders_for",
    "scalar_bytes",
]

#: dtype name -> (matrix data type, compute type, scale type), per cuBLASLt's type table.
#: float16/bfloat16 accumulate in float32 (as the CPU engine does).
TYPES: dict[str, tuple[DataType, ComputeType, DataType]] = {
    "float16": (DataType.R_16F, ComputeType.COMPUTE_32F, DataType.R_32F),
    "bfloat16": (DataType.R_16BF, ComputeType.COMPUTE_32F, DataType.R_32F),
    "float32": (DataType.R_32F, ComputeType.COMPUTE_32F, DataType.R_32F),
    "float64": (DataType.R_64F, ComputeType.COMPUTE_64F, DataType.R_64F),
    "complex64": (DataType.C_32F, ComputeType.COMPUTE_32F, DataType.C_32F),
    "complex128": (DataType.C_64F, ComputeType.COMPUTE_64F, DataType.C_64F),
    "float8_e4m3fn": (DataType.R_8F_E4M3, ComputeType.COMPUTE_32F, DataType.R_32F),
    "float8_e5m2": (DataType.R_8F_E5M2, ComputeType.COMPUTE_32F, DataType.R_32F),
}
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
             "float8_e4m3fn": 1, "float8_e5m2": 1}
#: The leading-dimension multiple (elements) cuBLASLt's FP8 kernels need.
FP8_LD_MULTIPLE = 16
#: dtypes whose products may use TF32 tensor cores when the problem allows it.
TF32_DTYPES = ("float32", "complex64")

#: nvmathpy epilogue name -> cuBLASLt epilogue in the C order and in the F order.
LT_EPILOGUES: dict[str | None, tuple[LtEpilogue, LtEpilogue]] = {
    None: (LtEpilogue.DEFAULT, LtEpilogue.DEFAULT),
    **{name: (LtEpilogue[name.upper()],) * 2 for name in (
        "relu", "gelu", "bias", "relu_bias", "gelu_bias", "relu_aux", "gelu_aux", "relu_aux_bias",
        "gelu_aux_bias", "drelu", "drelu_bgrad", "dgelu", "dgelu_bgrad",
    )},
    "bgrada": (LtEpilogue.BGRADB, LtEpilogue.BGRADA),
    "bgradb": (LtEpilogue.BGRADA, LtEpilogue.BGRADB),
}
_BIAS_EPILOGUES = ("bias", "relu_bias", "gelu_bias", "relu_aux_bias", "gelu_aux_bias")
#: ReLU bit-mask leading dimensions are multiples of 128 bits; GELU aux ones of 8 elements.
RELU_LD_MULTIPLE, GELU_LD_MULTIPLE = 128, 8


@dataclass(frozen=True)
class BiasSpec:
    """The bias vector cuBLASLt reads (one value per row of D).

    Attributes
    ----------
    length
        Values per matrix (``N`` per column in the C order, ``M`` per row in the F order).
    batch_stride
        Elements between the vectors of consecutive batch matrices (0: one vector for all).
    vector_shape
        The bias input reshaped so its last axis is the vector (``(..., length or 1)``).
    expand_to
        The contiguous shape to broadcast the input to first, or ``None`` when the (contiguous)
        input is used as it is.
    """

    length: int
    batch_stride: int
    vector_shape: tuple[int, ...]
    expand_to: tuple[int, ...] | None


@dataclass(frozen=True)
class AuxSpec:
    """An epilogue aux buffer laid out like D (columns of ``ld`` rows).

    ``kind`` is ``"relu"`` (bit mask: ``ld`` in bits) or ``"gelu"`` (pre-activation in the
    result dtype); ``direction`` is ``"out"`` (forward epilogues) or ``"in"`` (backward ones).
    """

    kind: str
    direction: str
    rows: int
    cols: int
    ld: int
    batch_stride: int


@dataclass(frozen=True)
class LtSpec:
    """One NumPy-rule matmul problem as a cuBLASLt call (see the module docstring)."""

    m: int
    n: int
    k: int
    batch_shape: tuple[int, ...]
    result_shape: tuple[int, ...]
    order: str
    orders: tuple[str, ...]
    lt: LtProblem
    dtype: str
    data_type: DataType
    compute_type: ComputeType
    scale_type: DataType
    epilogue: str | None
    lt_epilogue: LtEpilogue
    a_strides: tuple[int, ...]
    b_strides: tuple[int, ...]
    a_copy: str | None
    b_copy: str | None
    expand: dict[str, tuple[int, ...]]
    bias: BiasSpec | None
    aux: AuxSpec | None
    bgrad: tuple[str, int] | None
    c_mode: str
    alpha: Any
    beta: Any
    #: FP8 only: cuBLASLt's per-matrix types (A, B, D), the result dtype, and the scale inputs
    #: (``(cuBLASLt attribute name, input name)``, e.g. ``("A_SCALE_POINTER", "b_scale")`` when swapped).
    matrix_types: tuple[DataType, DataType, DataType] | None = None
    result_dtype: str | None = None
    scales: tuple[tuple[str, str], ...] = ()

    @property
    def batch(self) -> int:
        return self.lt.batch

    @property
    def fp8(self) -> bool:
        return self.dtype in FP8_DTYPES

    @property
    def out_dtype(self) -> str:
        """The dtype of D (and C, bias, aux): the operands' own, or FP8's result dtype."""
        return self.result_dtype or self.dtype

    @property
    def out_type(self) -> DataType:
        return self.matrix_types[2] if self.matrix_types is not None else self.data_type

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self.dtype]

    @property
    def bgrad_batch_stride(self) -> int:
        """Elements between the bias-gradient vectors of consecutive batch matrices."""
        return self.bgrad[1] if self.bgrad is not None and self.batch > 1 else 0

    @property
    def d_shape(self) -> tuple[int, ...]:
        """The shape D is allocated with (C-contiguous): the result's, or its matrices
        transposed in the F order."""
        if self.order == "C":
            return self.result_shape
        return self.batch_shape + (self.n, self.m)


def scalar_bytes(value: Any, scale_type: DataType) -> bytes:
    """``alpha``/``beta`` encoded in the scale type (host pointer mode).

    Examples
    --------
    >>> scalar_bytes(2.0, DataType.R_32F).hex()
    '00000040'
    >>> len(scalar_bytes(complex(1, 2), DataType.C_64F))
    16
    """
    import struct

    value = complex(*value) if isinstance(value, list) else complex(value)
    fmt = {DataType.R_32F: "<f", DataType.R_64F: "<d", DataType.C_32F: "<ff", DataType.C_64F: "<dd"}[scale_type]
    parts = (value.real,) if len(fmt) == 2 else (value.real, value.imag)
    return struct.pack(fmt, *parts)


def orders_for(epilogue: str | None, bias_per: str | None) -> tuple[str, ...]:
    """The result orders that can compute ``epilogue``, preferred first."""
    if bias_per is not None:
        return ("C",) if bias_per == "col" else ("F",)
    if epilogue in ("drelu_bgrad", "dgelu_bgrad"):
        return ("C",)
    return ("C", "F")


def _contiguous(shape: Sequence[int], order: str) -> tuple[int, ...]:
    """Element strides of a contiguous array (``order`` "F": matrices column-major, batch C)."""
    shape = list(shape)
    if order == "F" and len(shape) >= 2:
        *batch, rows, cols = shape
        inner = [1, rows]
        step = rows * cols
    else:
        batch, inner, step = shape, [], 1
    outer = []
    for size in reversed(batch):
        outer.append(step)
        step *= size
    return tuple(reversed(outer)) + tuple(inner)


def _promote(shape: Sequence[int], strides: Sequence[int], is_a: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A 1-D operand as the matrix NumPy's matmul rules make of it (a row for ``a``, a column for ``b``)."""
    if len(shape) != 1:
        return tuple(shape), tuple(strides)
    (k,), (s,) = shape, strides
    return ((1, k), (k * s, s)) if is_a else ((k, 1), (s, k * s))


def _operand(problem: Problem, name: str) -> tuple[tuple[int, ...], tuple[int, ...], str | None]:
    """(shape, element strides assumed, contiguous order to copy into on a mismatch)."""
    shape = tuple(problem.get(f"{name}_shape"))
    given = problem.get(f"{name}_strides")
    if given is not None:
        strides = tuple(given)
    elif problem.get(f"{name}_layout") == "F" and len(shape) == 2:
        strides = _contiguous(shape, "F")
    else:
        strides = _contiguous(shape, "C")
    copy = next((o for o in ("C", "F") if strides == _contiguous(shape, o)), None)
    return shape, strides, copy


def _bias_spec(shape: Sequence[int], m: int, n: int, batch_shape: tuple[int, ...],
               a_ndim: int, b_ndim: int) -> tuple[str, BiasSpec]:
    """Which NumPy bias this is (``"col"``: ``(N,)``-like, ``"row"``: ``(M, 1)``-like) and its vector."""
    # right-align against the result, then restore the axes 1-D operands dropped
    result_ndim = len(batch_shape) + (a_ndim > 1) + (b_ndim > 1)
    full = [1] * (result_ndim - len(shape)) + list(shape)
    if a_ndim == 1:
        full.insert(len(full) - (b_ndim > 1), 1)
    if b_ndim == 1:
        full.append(1)
    *bias_batch, sm, sn = full
    if sm == 1 and (sn == n or sn == 1):
        per, length = "col", n
    elif sn == 1 and sm == m:
        per, length = "row", m
    else:
        raise InvalidOperandError(
            f"matmul (cuda): bias of shape {tuple(shape)} is not one value per column (N,) = ({n},) "
            f"or per row (M, 1) = ({m}, 1); cuBLASLt adds a bias vector only"
        )
    batched = any(size != 1 for size in bias_batch)
    vector_shape = (tuple(bias_batch) if batched else ()) + (sm * sn,)
    exact_batch = not batched or tuple(bias_batch) == batch_shape
    expand_to = None
    if sm * sn != length or not exact_batch:
        expand_to = (batch_shape if batched else ()) + (length,)
    stride = length if batched else 0
    return per, BiasSpec(length, stride, vector_shape, expand_to)


def _copied(name: str, shape: tuple[int, ...], sizes: tuple[int, int, int], batch_shape: tuple[int, ...],
            other: tuple[tuple[int, ...], tuple[int, ...]], order: str,
            expand: dict[str, tuple[int, ...]]) -> tuple[tuple[int, ...], str, tuple[tuple[int, ...], ...]]:
    """Strides, copy mode and :func:`lt_problem` argument of operand ``name`` copied C-contiguous;
    when its batch dimensions broadcast in a way no single stride walks, the copy is expanded to
    the full batch (recorded in ``expand``)."""
    is_a = name == "a"
    contiguous = _contiguous(shape, "C")
    arg = _promote(shape, contiguous, is_a)
    pair = (arg, other) if is_a else (other, arg)
    if lt_problem(*sizes, batch_shape, *pair, result_order=order) is not None:
        return contiguous, "C", arg
    full = batch_shape + tuple(shape[-2:])
    expand[name] = full
    return _contiguous(full, "C"), "expand", (full, _contiguous(full, "C"))


def _aux_spec(edef: Any, d: LtMatrix) -> AuxSpec | None:
    """The aux buffer of an epilogue with a ReLU mask or GELU input (out or in), laid out like D."""
    for name in edef.aux + edef.inputs:
        if name in ("relu_aux", "gelu_aux"):
            kind = name[:4]
            ld = _round_up(d.rows, RELU_LD_MULTIPLE if kind == "relu" else GELU_LD_MULTIPLE)
            return AuxSpec(kind, "out" if name in edef.aux else "in", d.rows, d.cols, ld, ld * d.cols)
    return None


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def build_spec(problem: Problem, order: str | None = None, allow_tf32: bool | None = None, *,
               epilogue: ResolvedEpilogue | None = None) -> LtSpec:
    """The cuBLASLt description of a matmul ``problem`` in the result ``order`` (default: preferred).

    Parameters
    ----------
    problem
        A ``"matmul"`` problem key (fields as :class:`~nvmathpy.linalg.Matmul` records them).
    order
        ``"C"`` or ``"F"`` (see :func:`orders_for`); ``None`` takes the first allowed.
    allow_tf32
        Use TF32 tensor cores for float32/complex64; ``None`` reads the problem's ``allow_tf32``.
    epilogue
        The problem's built-in epilogue as the plan resolved it (an engine passes its own);
        ``None``: the one the problem names, resolved here (callers without a plan).

    Raises
    ------
    InvalidOperandError
        If the dtype or a bias shape has no cuBLASLt form.
    InvalidOptionError
        If ``order`` is not allowed for the epilogue, or ``epilogue`` is not the problem's.

    Examples
    --------
    >>> p = Problem.of("matmul", a_shape=[3, 4], b_shape=[4, 5], c_shape=None, a_layout="C",
    ...                b_layout="C", dtype="float32", epilogue=None, inputs={}, alpha=1.0, beta=None)
    >>> s = build_spec(p)
    >>> s.order, s.lt.swapped, s.lt.first.rows, s.lt_epilogue.name
    ('C', True, 5, 'DEFAULT')
    """
    dtype = problem.get("dtype")
    if dtype not in TYPES:
        raise InvalidOperandError(f"matmul (cuda): dtype {dtype} is not supported; allowed: {list(TYPES)}")
    a_shape, a_strides, a_copy = _operand(problem, "a")
    b_shape, b_strides, b_copy = _operand(problem, "b")
    geometry = analyse_shapes(a_shape, b_shape)
    m, n, k, batch_shape = geometry.m, geometry.n, geometry.k, geometry.batch
    name = problem.get("epilogue")
    inputs = dict(problem.get("inputs") or {})
    bias_per, bias = None, None
    if name in _BIAS_EPILOGUES:
        bias_per, bias = _bias_spec(inputs["bias"][0], m, n, batch_shape, len(a_shape), len(b_shape))
    allowed = orders_for(name, bias_per)
    order = allowed[0] if order is None else order
    if order not in allowed:
        raise InvalidOptionError(f"matmul (cuda): result order {order!r} cannot compute epilogue={name!r}; "
                                 f"allowed: {list(allowed)}")
    a_arg, b_arg = _promote(a_shape, a_strides, True), _promote(b_shape, b_strides, False)
    lt = lt_problem(m, n, k, batch_shape, a_arg, b_arg, result_order=order)
    expand: dict[str, tuple[int, ...]] = {}
    if lt is None:  # copy each operand that has no cuBLASLt layout on its own
        a_c = _promote(a_shape, _contiguous(a_shape, "C"), True)
        b_c = _promote(b_shape, _contiguous(b_shape, "C"), False)
        if lt_problem(m, n, k, batch_shape, a_arg, b_c, result_order=order) is None:
            a_strides, a_copy, a_arg = _copied("a", a_shape, (m, n, k), batch_shape, b_c, order, expand)
        if lt_problem(m, n, k, batch_shape, a_c, b_arg, result_order=order) is None:
            b_strides, b_copy, b_arg = _copied("b", b_shape, (m, n, k), batch_shape, a_c, order, expand)
        lt = lt_problem(m, n, k, batch_shape, a_arg, b_arg, result_order=order)
    fp8: dict[str, Any] = {}
    if dtype in FP8_DTYPES:
        if expand:
            raise InvalidOperandError(f"matmul (cuda): FP8 operands of shapes {a_shape} and {b_shape} have batch "
                                      "dimensions that need expanding; FP8 batches must broadcast by one stride")
        if not (lt.first.trans and not lt.second.trans):  # cuBLASLt's FP8 "TN" rule (module docstring)
            a_strides, a_copy = _contiguous(a_shape, "C"), "C"
            b_strides, b_copy = _contiguous(b_shape, "F"), "F"
            lt = lt_problem(m, n, k, batch_shape, _promote(a_shape, a_strides, True),
                            _promote(b_shape, b_strides, False), result_order=order)
        fp8 = _fp8_fields(problem, dtype, name, lt, inputs)
    data_type, compute, scale = TYPES[dtype]
    tf32 = problem.get("allow_tf32", False) if allow_tf32 is None else allow_tf32
    if tf32 and dtype in TF32_DTYPES:
        compute = ComputeType.COMPUTE_32F_FAST_TF32
    if epilogue is not None and epilogue.key != name:
        raise InvalidOptionError(f"matmul (cuda): the problem's epilogue is {name!r}, not {epilogue.key!r}")
    edef = (epilogue or resolve_builtin(name)).definition if name else None
    if edef is not None and edef.real_only and dtype.startswith("complex"):
        raise InvalidOperandError(f"matmul (cuda): epilogue={name!r} needs a real dtype, got {dtype}")
    aux = _aux_spec(edef, lt.d) if edef is not None else None
    bgrad = None
    if edef is not None and edef.reductions:
        reduction, what = edef.reductions[0]
        bgrad = (reduction, {"result_rows": n, "a_k": m, "b_k": n}[what])
    has_c = problem.get("c_shape") is not None
    c_mode = "none"
    if has_c:
        c_mode = "direct" if order == "C" and tuple(problem.get("c_shape")) == geometry.result else "copy"
    return LtSpec(
        m=m, n=n, k=k, batch_shape=batch_shape, result_shape=geometry.result, order=order, orders=allowed, lt=lt,
        dtype=dtype, data_type=data_type, compute_type=compute, scale_type=scale,
        epilogue=name, lt_epilogue=LT_EPILOGUES[name][order == "F"],
        a_strides=a_strides, b_strides=b_strides, a_copy=a_copy, b_copy=b_copy, expand=expand,
        bias=bias, aux=aux, bgrad=bgrad, c_mode=c_mode,
        alpha=problem.get("alpha"), beta=problem.get("beta") if has_c else 0.0, **fp8,
    )



def _fp8_fields(problem: Problem, dtype: str, epilogue: str | None, lt: LtProblem,
                inputs: dict[str, Any]) -> dict[str, Any]:
    """The FP8 part of an :class:`LtSpec`: matrix types, result dtype and scale inputs."""
    b_dtype = problem.get("b_dtype") or dtype
    result = problem.get("result_dtype") or "bfloat16"
    if b_dtype not in FP8_DTYPES or (dtype, b_dtype) == ("float8_e5m2", "float8_e5m2"):
        raise InvalidOperandError(f"matmul (cuda): FP8 products take float8_e4m3fn x float8_e4m3fn/float8_e5m2 "
                                  f"operands (not both float8_e5m2), got {dtype} x {b_dtype}")
    if result not in FP8_RESULTS:
        raise InvalidOperandError(f"matmul (cuda): FP8 result_dtype {result!r} is not allowed; allowed: "
                                  f"{list(FP8_RESULTS)}")
    if epilogue not in FP8_EPILOGUES or (epilogue in _BIAS_EPILOGUES and result == "float32"):
        raise InvalidOperandError(f"matmul (cuda): epilogue={epilogue!r} with FP8 operands and a {result} result "
                                  f"is not supported; allowed: {list(FP8_EPILOGUES)} (bias ones for 16-bit results)")
    for matrix in (lt.first, lt.second):
        if matrix.ld % FP8_LD_MULTIPLE:
            raise InvalidOperandError(
                f"matmul (cuda): FP8 operands need leading dimensions that are multiples of {FP8_LD_MULTIPLE} "
                f"elements along K; got {matrix.ld} (K = {matrix.rows})"
            )
    a_type, b_type = TYPES[dtype][0], TYPES[b_dtype][0]
    first, second = (b_type, a_type) if lt.swapped else (a_type, b_type)
    names = ("b_scale", "a_scale") if lt.swapped else ("a_scale", "b_scale")
    scales = tuple((attr, name) for attr, name in zip(("A_SCALE_POINTER", "B_SCALE_POINTER"), names)
                   if name in inputs)
    return {"matrix_types": (first, second, TYPES[result][0]), "result_dtype": result, "scales": scales}


def matrix_fields(matrix: LtMatrix, batch: int) -> dict[str, int]:
    """The layout attributes a stored matrix needs: rows, cols, ld, batch count and stride."""
    return {"ROWS": matrix.rows, "COLS": matrix.cols, "LD": max(matrix.ld, 1), "BATCH_COUNT": batch,
            "STRIDED_BATCH_OFFSET": matrix.batch_stride}

