"""Matrix products with fused epilogues: the :class:`Matmul` plan, the one-call
:func:`matmul` (a plan cache underneath) and :class:`MatmulOptions`.

``D = epilogue(alpha * a @ b + beta * c)`` with NumPy ``matmul`` rules (1-D promotion,
batching, batch broadcasting). Operands are NumPy arrays or torch CPU tensors (results come
back in the same package); the execution space follows the operands, and the engine is
chosen by execution space (the CPU engine lives in :mod:`.cpu._engine`; a cuBLASLt engine
slots in beside it).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ...errors import InvalidOperandError, InvalidOptionError, OperandMismatchError, PlanStateError
from ...execution import ExecutionCPU, ExecutionCUDA, as_execution, resolve_execution
from ...operands import SUPPORTED_DTYPES, Operand, common_package, unwrapper, wrap
from ...plan import Plan, PlanCache, Prepared, Problem, as_options
from ._layout import analyse_shapes, broadcast_check, layout_class
from ._tiny import direct_call, tiny_bias_relu, tiny_product
from ._custom_epilogue import is_custom, scalar_inputs, trace_epilogue, trace_epilogue_lifting
from ._fp8 import SCALE_NAMES, check_fp8, check_result_option, fp8_inputs, is_fp8, numpy_dtype
from ._engines import engine_for
from ._resolved import ResolvedEpilogue, resolve_builtin, resolve_custom
from ..epilogues import Epilogue, EpilogueDef

__all__ = ["Matmul", "MatmulOptions", "matmul", "clear_plan_cache", "set_plan_cache_size", "plan_cache_info"]


@dataclass(frozen=True)
class MatmulOptions:
    """Options of :class:`Matmul` and :func:`matmul` (a dict with these keys is accepted too).

    Parameters
    ----------
    check_finite
        Before each execution, check that ``a``, ``b``, ``c`` and the floating-point
        epilogue inputs hold no NaN or infinity, and raise :class:`InvalidOperandError`
        naming the operand if they do. Costs one extra read of every operand.
    workspace_limit
        CUDA only: the most workspace (bytes) a cuBLASLt algorithm may use (default 32 MiB).
    allow_tf32
        CUDA only: let float32/complex64 products use TF32 tensor cores (faster, ~10-bit
        mantissa inputs).
    result_dtype
        FP8 operands only (see :mod:`nvmathpy.linalg.gemm._fp8`): the result's dtype,
        ``"bfloat16"`` (``None``: the default), ``"float16"`` or ``"float32"``.

    Examples
    --------
    >>> MatmulOptions(check_finite=True)
    MatmulOptions(check_finite=True, workspace_limit=33554432, allow_tf32=False, result_dtype=None)
    """

    check_finite: bool = False
    workspace_limit: int = 32 << 20
    allow_tf32: bool = False
    result_dtype: str | None = None

    def __post_init__(self) -> None:
        for name in ("check_finite", "allow_tf32"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionError(f"MatmulOptions: {name} must be True or False, got {getattr(self, name)!r}")
        limit = self.workspace_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidOptionError(f"MatmulOptions: workspace_limit must be a non-negative int (bytes), got {limit!r}")
        check_result_option(self.result_dtype)


def _encode_scalar(value: Any) -> Any:
    if value is None:
        return None
    value = value.item() if isinstance(value, np.generic) else value
    return [value.real, value.imag] if isinstance(value, complex) else float(value)


def _scalar_kind(value: Any) -> str | None:
    """What the problem key records of a scalar: only what changes the computation's shape
    (``"one"``, ``"real"`` or ``"complex"``), so every value shares one wisdom entry."""
    if value is None:
        return None
    if value == 1:
        return "one"
    return "complex" if complex(value).imag != 0 else "real"


def _describe(op: Operand) -> dict[str, Any]:
    """What :meth:`Matmul.reset_operands` compares (kept when the arrays are released)."""
    return {"package": op.package, "device": op.device, "shape": op.shape, "dtype": op.dtype.name,
            "layout": layout_class(op.shape, op.strides, op.dtype.itemsize) if op.shape else None,
            "strides": op.strides if op.device == "cuda" else None}


def _raise_detached(*args: Any, **kwargs: Any) -> Any:
    raise PlanStateError("this matmul plan has released its operands; call reset_operands(a, b, ...) first")


def _check_scalar(name: str, value: Any, dtype_name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise InvalidOptionError(f"matmul: {name} must be a number, got {value!r}")
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real) and value.imag != 0 \
            and not dtype_name.startswith("complex"):
        raise InvalidOptionError(f"matmul: {name}={value!r} is complex but the operands are {dtype_name}")


def _wrap_operands(a: Any, b: Any, c: Any, inputs: Mapping[str, Any]) -> dict[str, Operand]:
    """Wrap every array argument, named as error messages should call it."""
    ops = {"a": wrap(a, "a"), "b": wrap(b, "b")}
    if c is not None:
        ops["c"] = wrap(c, "c")
    for name, value in inputs.items():
        ops[name] = wrap(value, f"epilogue_inputs[{name!r}]")
    return ops


class Matmul(Plan):
    """A planned matrix product ``D = epilogue(alpha * a @ b + beta * c)``.

    Parameters
    ----------
    a, b
        The operands (NumPy arrays or torch CPU tensors of one dtype: float16, bfloat16,
        float32, float64, complex64 or complex128), following ``numpy.matmul`` rules.
    c
        Optional addend, broadcastable to the result; needs ``beta``.
    alpha, beta
        Scalars; ``beta`` is required with ``c`` and refused without it.
    epilogue
        ``None``, an :class:`~nvmathpy.linalg.Epilogue` or its name (see
        :mod:`nvmathpy.linalg.epilogues` for the definitions and conventions), or a Python
        function ``f(x, name, ...)`` (a custom epilogue; on CUDA see
        :mod:`nvmathpy.linalg.gemm.cuda._custom`): ``x`` is the
        product value, the other parameters name ``epilogue_inputs`` or the element's
        ``row``/``col``/``batch`` index. It is traced once into an expression (NumPy ufuncs,
        operators, ``np.where`` and the helpers of :mod:`nvmathpy.linalg.epilogues`) and
        evaluated in one pass; the names ``x``, ``c`` and ``d`` are reserved for inputs.
    epilogue_inputs
        A dict of the arrays the epilogue needs: ``"bias"`` (broadcast against the result:
        ``(N,)`` per column, ``(M, 1)`` per row), ``"relu_aux"`` (boolean, result-shaped) or
        ``"gelu_aux"`` (result-shaped) for the backward epilogues. For a custom epilogue,
        any arrays broadcastable to the result (of the operands' dtype) or Python numbers.
    execution
        ``None`` (follow the operands), ``"cpu"``, ``"cuda"``, a dict or an
        ``ExecutionCPU``/``ExecutionCUDA``. CUDA runs on cuBLASLt (CuPy or torch CUDA operands,
        or NumPy operands copied to the device for each call, with NumPy results;
        ``ExecutionSpaceUnavailableError`` names the cause when no usable GPU is present).
    options
        :class:`MatmulOptions` or a dict.
    stream
        Must be ``None`` for CPU execution.

    Notes
    -----
    The plan keeps references to the operands (no copies); ``execute()`` reads their current
    contents. ``execute()`` returns the result, or ``(result, aux)`` for the epilogues with
    aux outputs, in the operands' package. float16/bfloat16 accumulate in float32.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(6.0).reshape(2, 3); b = np.ones((3, 2)); bias = np.array([-4.0, 1.0])
    >>> with Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
    ...     _ = mm.plan()
    ...     mm.execute()
    array([[ 0.,  4.],
           [ 8., 13.]])
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        /,
        c: Any = None,
        *,
        alpha: Any = 1.0,
        beta: Any = None,
        epilogue: "str | Epilogue | EpilogueDef | Callable[..., Any] | None" = None,
        epilogue_inputs: Mapping[str, Any] | None = None,
        execution: Any = None,
        options: Any = None,
        stream: Any = None,
    ):
        super().__init__()
        self._options = as_options(options, MatmulOptions)
        custom = is_custom(epilogue)
        # the epilogue is resolved once (a custom one once traced, below): the problem key holds its key
        resolved = resolve_builtin(epilogue) if epilogue is not None and not custom else None
        self._epilogue = resolved.definition if resolved is not None else None
        if epilogue_inputs is not None and not isinstance(epilogue_inputs, Mapping):
            raise InvalidOperandError(
                f"epilogue_inputs must be a dict of arrays or None, got {type(epilogue_inputs).__name__}"
            )
        inputs = dict(epilogue_inputs or {})
        fp8 = is_fp8(a)  # FP8: per-tensor scales come as epilogue inputs (see ._fp8)
        if fp8:
            inputs = fp8_inputs(inputs, wrap(a, "a"))
        if custom:
            inputs = scalar_inputs(inputs, wrap(a, "a"))
        else:
            self._check_input_names({k: v for k, v in inputs.items() if not (fp8 and k in SCALE_NAMES)})
        ops = _wrap_operands(a, b, c, inputs)
        package, device, device_id = common_package(ops)
        # NumPy operands may run on CUDA: the engine copies them over (see .cuda._engine)
        host_to_cuda = package == "numpy" and isinstance(as_execution(execution), ExecutionCUDA)
        space = resolve_execution(execution, "cuda" if host_to_cuda else device, device_id)
        if stream is not None and space.name == "cpu":
            raise InvalidOptionError(
                f"matmul: stream={stream!r} was given but execution is on the CPU; pass stream=None"
            )
        self._shape = analyse_shapes(ops["a"].shape, ops["b"].shape)
        fp8_fields: dict[str, Any] = {}
        if fp8:
            dtype_name, fp8_fields = check_fp8(ops, space.name, self._epilogue and self._epilogue.name, custom,
                                               self._options.result_dtype)
        else:
            dtype_name = self._check_dtypes(ops)
            if self._options.result_dtype is not None:
                raise InvalidOptionError("MatmulOptions: result_dtype applies to FP8 operands only; "
                                         f"a is {dtype_name}")
        self._check_scalars(c is not None, alpha, beta, dtype_name)
        self._check_shapes(ops)
        if custom:
            resolved = resolve_custom(trace_epilogue(epilogue, {n: ops[n].shape for n in inputs}, self._shape.result))
        #: The epilogue as resolved (see :mod:`._resolved`): the engine gets this object.
        self.resolved_epilogue: ResolvedEpilogue | None = resolved
        self._ops: dict[str, Operand] | None = ops
        self._meta = {name: _describe(op) for name, op in ops.items()}
        self._one_call: Callable[..., Any] | None = None
        self._convert = unwrapper(ops["a"])
        self._input_names = tuple(inputs)
        self._problem = Problem.of(
            "matmul",
            a_shape=list(ops["a"].shape), b_shape=list(ops["b"].shape),
            c_shape=list(ops["c"].shape) if "c" in ops else None,
            a_layout=self._meta["a"]["layout"], b_layout=self._meta["b"]["layout"],
            dtype=dtype_name,
            epilogue=self.resolved_epilogue.key if self.resolved_epilogue is not None else None,
            inputs={n: [list(ops[n].shape), ops[n].dtype.name] for n in inputs},
            alpha_kind=_scalar_kind(alpha), beta_kind=_scalar_kind(beta),
            num_threads=space.num_threads if isinstance(space, ExecutionCPU) else None,
            **self._cuda_fields(space, ops, alpha, beta), **fp8_fields,
        )
        self._engine = engine_for(space, stream, ops["a"].package, self._options, alpha, beta,
                                   self.resolved_epilogue)

    # -- validation ----------------------------------------------------------------------------

    def _check_input_names(self, inputs: dict[str, Any]) -> None:
        required = self._epilogue.inputs if self._epilogue is not None else ()
        name = self._epilogue.name if self._epilogue is not None else None
        missing = [n for n in required if n not in inputs]
        extra = [n for n in inputs if n not in required]
        if missing:
            raise InvalidOperandError(f"epilogue={name!r} needs epilogue_inputs {list(required)}; missing {missing}")
        if extra:
            raise InvalidOperandError(
                f"epilogue_inputs has {extra}, which epilogue={name!r} does not take; it takes {list(required)}"
            )

    def _check_dtypes(self, ops: dict[str, Operand]) -> str:
        dtype_name = ops["a"].dtype.name
        if dtype_name not in SUPPORTED_DTYPES:
            raise InvalidOperandError(f"matmul: a has dtype {dtype_name}; allowed: {list(SUPPORTED_DTYPES)}")
        for name, op in ops.items():
            expected = "bool" if name == "relu_aux" and self._epilogue is not None else dtype_name
            if op.dtype.name != expected:
                raise InvalidOperandError(
                    f"matmul: {name} has dtype {op.dtype.name} but {expected} is required "
                    f"(a is {dtype_name}; mixed dtypes are not promoted: convert them first)"
                )
        if self._epilogue is not None and self._epilogue.real_only and dtype_name.startswith("complex"):
            raise InvalidOperandError(
                f"matmul: epilogue={self._epilogue.name!r} is defined for real dtypes only, operands are {dtype_name}"
            )
        return dtype_name

    @staticmethod
    def _check_scalars(has_c: bool, alpha: Any, beta: Any, dtype_name: str) -> None:
        if has_c and beta is None:
            raise InvalidOptionError("matmul: c was given without beta; pass beta= (e.g. beta=1.0) with c")
        if not has_c and beta is not None:
            raise InvalidOptionError(f"matmul: beta={beta!r} was given without c; pass c= or drop beta")
        _check_scalar("alpha", alpha, dtype_name)
        if beta is not None:
            _check_scalar("beta", beta, dtype_name)

    def _check_shapes(self, ops: dict[str, Operand]) -> None:
        result = self._shape.result
        for name, op in ops.items():
            if name in ("a", "b"):
                continue
            if name in ("relu_aux", "gelu_aux"):
                if op.shape != result:
                    raise InvalidOperandError(
                        f"matmul: epilogue input {name} has shape {op.shape}; the result shape {result} is required"
                    )
                continue
            message = (f"matmul: {name} of shape {op.shape} does not broadcast to the result shape {result}")
            if broadcast_check(op.shape, result, message) != result:
                raise InvalidOperandError(message)

    def _cuda_fields(self, space: Any, ops: dict[str, Operand], alpha: Any, beta: Any) -> dict[str, Any]:
        """What only the cuBLASLt engine needs in the problem: exact element strides (its
        layouts take any leading dimension), the scalar values (it reads them from the
        problem), TF32 and the workspace limit."""
        if space.name != "cuda":
            return {}
        fields = {f"{n}_strides": [s // ops[n].dtype.itemsize for s in ops[n].strides] for n in ("a", "b")}
        fields["alpha"], fields["beta"] = _encode_scalar(alpha), _encode_scalar(beta)
        fields["workspace_limit"] = self._options.workspace_limit
        if self._options.allow_tf32:
            fields["allow_tf32"] = True
        return fields

    # -- binding -------------------------------------------------------------------------------

    def _native(self) -> tuple[Any, Any, Any, dict[str, Any]]:
        ops = self._ops
        c = ops["c"].array if "c" in ops else None
        return ops["a"].array, ops["b"].array, c, {n: ops[n].array for n in self._input_names}

    def _caller(self, prepared: Prepared) -> Callable[..., Any]:
        """``fn(a, b, c, inputs, out)``: check (if asked), run, convert to the caller's package."""
        kernel, convert = prepared.kernel, self._convert
        check = self._check_finite if self._options.check_finite else None
        if convert is None and check is None:
            return kernel

        def call(a: Any, b: Any, c: Any, inputs: Any, out: Any) -> Any:
            if check is not None:
                check(a, b, c, inputs)
            result = kernel(a, b, c, inputs, out)
            if convert is None:
                return result
            if isinstance(result, tuple):
                return convert(result[0]), {k: convert(v) for k, v in result[1].items()}
            return convert(result)

        return call

    @staticmethod
    def _check_finite(a: Any, b: Any, c: Any, inputs: Mapping[str, Any]) -> None:
        for name, arr in (("a", a), ("b", b), ("c", c), *inputs.items()):
            if arr is not None and arr.dtype != np.bool_ and not np.isfinite(arr).all():
                raise InvalidOperandError(f"matmul: check_finite: {name} contains NaN or infinity")

    def _bind(self, prepared: Prepared) -> Callable[[], Any]:
        a, b, c, inputs = self._native()
        if prepared.candidate.label == "dot" and self._convert is None and not self._options.check_finite:
            return direct_call(a, b)  # the fastest call for tiny plain products (see ._tiny)
        call = self._caller(prepared)
        return lambda: call(a, b, c, inputs, None)

    # -- public phases -------------------------------------------------------------------------

    def execute(self, *, out: Any = None) -> Any:
        """Compute the product with the planned candidate.

        Parameters
        ----------
        out
            Optional array (same package as the operands, C-contiguous, the result's shape
            and dtype) to write the result into instead of allocating one.

        Returns
        -------
        The result, or ``(result, aux)`` where ``aux`` is a dict for epilogues with aux
        outputs, in the operands' package.
        """
        if out is None:
            return self._run()
        if self._prepared is None or self._ops is None:
            return self._run()  # raises the right PlanStateError
        native = self._check_out(out)
        a, b, c, inputs = self._native()
        result = self._caller(self._prepared)(a, b, c, inputs, native)
        return (out, result[1]) if isinstance(result, tuple) else out

    def _check_out(self, out: Any) -> np.ndarray:
        wrapped = wrap(out, "out")
        expected = self._meta["a"]["package"]
        if wrapped.package != expected:
            raise InvalidOperandError(
                f"execute: out must be a {expected} array like the operands, got a {wrapped.package} one"
            )
        native = wrapped.array
        result_dtype = self._problem.get("result_dtype")  # FP8 products have their own result dtype
        dtype = self._ops["a"].dtype if result_dtype is None else numpy_dtype(result_dtype)
        if native.shape != self._shape.result or native.dtype != dtype or not native.flags.c_contiguous:
            raise InvalidOperandError(
                f"execute: out must be C-contiguous with shape {self._shape.result} and dtype {dtype.name}; "
                f"got shape {native.shape}, dtype {native.dtype.name}"
            )
        if any(np.may_share_memory(native, op.array) for op in self._ops.values()):
            raise InvalidOperandError("execute: out overlaps an operand; pass a separate array")
        return native

    def reset_operands(
        self, a: Any = None, b: Any = None, c: Any = None, epilogue_inputs: Mapping[str, Any] | None = None
    ) -> None:
        """Swap in new data of the same shapes, dtypes, layout classes and package (no re-planning).

        Raises
        ------
        OperandMismatchError
            If a new operand differs from the planned one (the message names what differs).
        """
        self._check_alive("reset_operands")
        new = {name: value for name, value in (("a", a), ("b", b), ("c", c)) if value is not None}
        for name, value in (epilogue_inputs or {}).items():
            if name not in self._input_names:
                raise OperandMismatchError(
                    f"reset_operands: epilogue input {name!r} is not part of this plan; "
                    f"it has {list(self._input_names)}"
                )
            new[name] = value
        if "c" in new and "c" not in self._ops:
            raise OperandMismatchError("reset_operands: c was given but the plan was built without c")
        if self._ops is None and set(new) != set(self._meta):
            raise PlanStateError(
                f"reset_operands: this plan has released its operands; pass all of {list(self._meta)}, "
                f"got {list(new)}"
            )
        wrapped = {}
        for name, value in new.items():
            op = wrap(value, name)
            planned, given = self._meta[name], _describe(op)
            for what in planned:
                if planned[what] != given[what]:
                    raise OperandMismatchError(
                        f"reset_operands: {name} {what} differs: planned {planned[what]}, got {given[what]}"
                    )
            wrapped[name] = op
        self._ops = {**(self._ops or {}), **wrapped}
        self._rebind()

    def _install(self, prepared: Prepared, how: str) -> None:
        super()._install(prepared, how)
        #: ``fn(a, b, c, inputs, out)`` on native operands, for the one-call path (keeps nothing).
        self._one_call = self._caller(prepared)

    def _detach(self) -> None:
        """Drop the references to the caller's arrays (a cached plan must not keep them
        alive); what validates later operands stays. ``execute()`` raises until
        :meth:`reset_operands` binds all of them again."""
        self._ops = None
        if self._prepared is not None:
            self._run = _raise_detached

    def free(self) -> None:
        """Release everything the plan holds, the operand references included. Idempotent."""
        super().free()
        self._ops = self._one_call = None


# -- one-call function and its plan cache ----------------------------------------------------------

_CACHE = PlanCache(maxsize=128)
_NO_INPUTS: Mapping[str, Any] = {}
#: dtypes whose tiny NumPy products :func:`matmul` computes unplanned (see :mod:`._tiny`).
_DOT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_ndarray = np.ndarray


def set_plan_cache_size(maxsize: int) -> None:
    """Bound the number of plans :func:`matmul` keeps (``0`` disables caching)."""
    _CACHE.resize(maxsize)


def clear_plan_cache() -> None:
    """Free every plan :func:`matmul` keeps and reset the hit/miss counters."""
    _CACHE.clear()


def plan_cache_info() -> dict[str, int]:
    """``{"hits", "misses", "size", "maxsize"}`` of :func:`matmul`'s plan cache."""
    return {"hits": _CACHE.hits, "misses": _CACHE.misses, "size": len(_CACHE), "maxsize": _CACHE.maxsize}


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


def _op_key(x: np.ndarray) -> tuple:
    return (x.shape, x.strides, x.dtype)


def matmul(
    a: Any,
    b: Any,
    /,
    c: Any = None,
    *,
    alpha: Any = 1.0,
    beta: Any = None,
    epilogue: "str | Epilogue | Callable[..., Any] | None" = None,
    epilogue_inputs: Mapping[str, Any] | None = None,
    execution: Any = None,
    options: Any = None,
    stream: Any = None,
) -> Any:
    """``epilogue(alpha * a @ b + beta * c)`` in one call, through a cache of planned :class:`Matmul`.

    Takes the same arguments as :class:`Matmul`; a repeated problem (same shapes, strides,
    dtypes, epilogue, scalars and options) reuses its plan. A custom epilogue (a Python
    function) is traced on every call and keyed by its traced expression, so equal functions
    share a plan. A tiny product (``m * k * n`` times the batch size ``<= 64**3``) of NumPy
    arrays of one float/complex dtype, options left default and no epilogue (or ``"bias"``,
    ``"relu"``, ``"relu_bias"`` with a per-column bias) takes no plan: it is the call its plan
    makes - the compiled tiny kernel where it takes the operands, else NumPy's (:mod:`._tiny`).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[1.0, -2.0], [3.0, 4.0]])
    >>> matmul(a, np.eye(2), epilogue="relu")
    array([[1., 0.],
           [3., 4.]])
    >>> d, aux = matmul(a, np.eye(2), epilogue="relu_aux")
    >>> aux["relu_aux"]
    array([[ True, False],
           [ True,  True]])
    >>> matmul(a, np.eye(2), epilogue=lambda x, s: np.maximum(x, 0) * s, epilogue_inputs={"s": 2.0})
    array([[2., 0.],
           [6., 8.]])
    """
    # tiny, options left default: the plan's own call (._tiny); a K that differs gets the planned route's error
    if (type(a) is _ndarray is type(b) and c is None and beta is None and execution is None and options is None
            and stream is None and type(alpha) is float and alpha == 1.0 and a.dtype is b.dtype in _DOT_DTYPES):
        if epilogue is None and epilogue_inputs is None:
            try:
                if (result := tiny_product(a, b)) is not None:
                    return result
            except ValueError:
                pass
        elif (result := tiny_bias_relu(a, b, epilogue, epilogue_inputs)) is not None:
            return result
    return _planned_matmul(a, b, c, alpha, beta, epilogue, epilogue_inputs, execution, options, stream)


def _planned_matmul(a: Any, b: Any, c: Any, alpha: Any, beta: Any, epilogue: Any, epilogue_inputs: Any,
                    execution: Any, options: Any, stream: Any) -> Any:
    """:func:`matmul` through its plan cache (its arguments, in its order)."""
    custom = is_custom(epilogue)
    numpy_only = (type(a) is np.ndarray and type(b) is np.ndarray and c is None and options is None
                  and (execution is None or type(execution) is str) and not custom)
    if numpy_only and epilogue_inputs is None:
        na, nb, nc, inputs = a, b, None, _NO_INPUTS  # the common case: the cheapest key
        key: tuple | None = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, alpha, beta, epilogue,
                             execution, options, stream)
    elif (numpy_only and type(epilogue) is str and type(epilogue_inputs) is dict and a.dtype.char in "efdFD"
          and all(type(v) is np.ndarray for v in epilogue_inputs.values())):
        # a built-in epilogue with NumPy inputs (a bias; NumPy's own dtypes, never FP8 with its scales):
        # as cheap, the inputs' layouts in the key
        na, nb, nc, inputs = a, b, None, epilogue_inputs
        key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, alpha, beta, epilogue,
               tuple([(n, v.shape, v.strides, v.dtype) for n, v in epilogue_inputs.items()]), execution, stream)
    else:
        if custom:
            epilogue_inputs = scalar_inputs(epilogue_inputs or {}, wrap(a, "a"))
        elif is_fp8(a):
            epilogue_inputs = fp8_inputs(epilogue_inputs or {}, wrap(a, "a"))
        ops = _wrap_operands(a, b, c, epilogue_inputs or {})
        common_package(ops)
        na, nb = ops["a"].array, ops["b"].array
        nc = ops["c"].array if c is not None else None
        inputs = {n: ops[n].array for n in (epilogue_inputs or {})}
        if custom:  # keyed by the traced expression, never by the function object
            result = analyse_shapes(na.shape, nb.shape).result
            # captured numbers (lambda x: x * scale) become run-time scalar inputs: one plan for every value
            epilogue, lifted = trace_epilogue_lifting(epilogue, {n: v.shape for n, v in inputs.items()}, result,
                                                      ops["a"])
            if lifted:
                epilogue_inputs = {**epilogue_inputs, **lifted}
                inputs.update((n, wrap(v, n).array) for n, v in lifted.items())
        key = (_op_key(na), _op_key(nb), None if nc is None else _op_key(nc), alpha, beta,
               ("custom", str(epilogue)) if custom else epilogue, tuple((n, _op_key(v)) for n, v in inputs.items()),
               _frozen(execution), _frozen(options), stream, ops["a"].package)
    try:
        plan = _CACHE.take(key)
    except TypeError:  # unhashable arguments: no caching, the constructor reports what is wrong
        plan = key = None
    if plan is None:
        plan = Matmul(a, b, c, alpha=alpha, beta=beta, epilogue=epilogue, epilogue_inputs=epilogue_inputs,
                      execution=execution, options=options, stream=stream).plan()
        if key is None:
            with plan:
                return plan.execute()
        plan._detach()  # the cache must not keep this call's arrays alive
    try:
        return plan._one_call(na, nb, nc, inputs, None)
    finally:
        _CACHE.give(key, plan)
