"""FP8 matrix products (``float8_e4m3fn`` / ``float8_e5m2`` operands) on cuBLASLt: what the
:class:`~nvmathpy.linalg.Matmul` plan checks and records.

- Operands: NumPy arrays of ml_dtypes' ``float8_e4m3fn``/``float8_e5m2`` (run with
  ``execution="cuda"``; they travel to the device as raw bytes) or CUDA arrays of those types;
  ``a`` and ``b`` may mix the two formats but not both be ``float8_e5m2`` (cuBLASLt has no such
  kernel). Execution is CUDA only, on devices of compute capability 8.9 or newer (Ada, Hopper
  and later); the CPU engine has no FP8 path and an FP8 plan asked to run there is refused
  (upcasting to float32 on the host would hide the precision the caller chose).
- Result: ``MatmulOptions(result_dtype=...)``, one of ``"bfloat16"`` (default), ``"float16"``,
  ``"float32"``; ``c`` and ``bias`` have that dtype. Epilogues: none, ``relu``, ``gelu``, and the
  bias ones for 16-bit results.
- Scales: ``epilogue_inputs={"a_scale": sa, "b_scale": sb}`` (either optional): per-tensor
  float32 scales that dequantise the operands, ``D = alpha * (sa * sb) * a @ b + beta * c``.
  Arrays (one element) are read on the device at each call, without synchronising, so they may
  change between calls (``reset_operands``); Python numbers become such arrays once.
- Layout: cuBLASLt's FP8 kernels take only the "TN" form; see :mod:`.cuda._lt_spec` for how NumPy
  layouts map onto it without copies (``x @ w.T`` with C-contiguous ``x`` and ``w``) and when an
  operand is copied.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any, Mapping

import numpy as np

from ...errors import InvalidOperandError, InvalidOptionError
from ...operands import Operand, to_package

__all__ = ["FP8_DTYPES", "FP8_EPILOGUES", "FP8_RESULTS", "SCALE_NAMES", "MIN_COMPUTE_CAPABILITY", "is_fp8",
           "fp8_inputs", "check_fp8", "check_device", "check_result_option", "numpy_dtype"]

#: FP8 operand dtypes (ml_dtypes' and torch's names).
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
#: FP8 result dtypes, and the epilogues FP8 products take (bias ones with 16-bit results only).
FP8_RESULTS = ("bfloat16", "float16", "float32")
FP8_EPILOGUES = (None, "relu", "gelu", "bias", "relu_bias", "gelu_bias")

#: The epilogue-input names of the per-tensor scales.
SCALE_NAMES = ("a_scale", "b_scale")
#: FP8 tensor cores: Ada (8.9), Hopper (9.0) and newer.
MIN_COMPUTE_CAPABILITY = 89


def _dtype_name(x: Any) -> str:
    """The dtype name of an array of any package (``torch.float8_e4m3fn`` -> ``float8_e4m3fn``)."""
    return str(getattr(x, "dtype", "")).rsplit(".", 1)[-1]


def is_fp8(x: Any) -> bool:
    """Whether array ``x`` holds an FP8 type (without importing its package).

    Examples
    --------
    >>> import ml_dtypes
    >>> is_fp8(np.zeros(2, ml_dtypes.float8_e4m3fn)), is_fp8(np.zeros(2))
    (True, False)
    """
    return _dtype_name(x) in FP8_DTYPES


def fp8_inputs(inputs: Mapping[str, Any], like: Operand) -> dict[str, Any]:
    """``inputs`` with Python-number scales made one-element float32 arrays of ``like``'s package
    and device (each is then an operand like any other)."""
    out = dict(inputs)
    for name in SCALE_NAMES:
        value = out.get(name)
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            out[name] = _float32_scalar(float(value), like)
    return out


def _float32_scalar(value: float, like: Operand) -> Any:
    host = np.asarray(value, np.float32)
    if like.device != "cuda":
        return to_package(host, like)
    if like.package == "torch":
        torch = sys.modules["torch"]
        return torch.tensor(value, dtype=torch.float32, device=f"cuda:{like.device_id}")
    import cupy

    with cupy.cuda.Device(like.device_id):
        return cupy.asarray(host)


def check_fp8(ops: Mapping[str, Operand], space: str, epilogue: str | None, custom: bool,
              result_dtype: str | None) -> tuple[str, dict[str, Any]]:
    """Validate an FP8 product before any work; return the problem's dtype (``a``'s) and its FP8
    fields (``b_dtype``, ``result_dtype``).

    Raises
    ------
    InvalidOperandError
        For CPU execution, a non-FP8 ``b``, two ``float8_e5m2`` operands, ``c``/bias not of the
        result dtype, scales that are not one float32 value, or an epilogue FP8 cannot take.
    """
    a_dtype, b_dtype = ops["a"].dtype.name, ops["b"].dtype.name
    if space != "cuda":
        raise InvalidOperandError(
            f"matmul: FP8 operands ({a_dtype}) run on CUDA only (compute capability 8.9+); pass "
            "execution='cuda' (NumPy operands are copied to the device) or upcast them for the CPU"
        )
    if b_dtype not in FP8_DTYPES or (a_dtype, b_dtype) == ("float8_e5m2", "float8_e5m2"):
        raise InvalidOperandError(f"matmul: FP8 products take float8_e4m3fn/float8_e5m2 operands, not both "
                                  f"float8_e5m2; got a {a_dtype}, b {b_dtype}")
    result = result_dtype or "bfloat16"
    if custom or epilogue not in FP8_EPILOGUES or (epilogue not in (None, "relu", "gelu") and result == "float32"):
        what = "a custom epilogue" if custom else f"epilogue={epilogue!r}"
        raise InvalidOperandError(f"matmul: {what} with FP8 operands and a {result} result is not supported; "
                                  f"allowed: {list(FP8_EPILOGUES)} (bias ones for 16-bit results)")
    for name, op in ops.items():
        if name in ("a", "b"):
            continue
        expected = "float32" if name in SCALE_NAMES else result
        if op.dtype.name != expected:
            raise InvalidOperandError(f"matmul: {name} has dtype {op.dtype.name}; FP8 products with result_dtype="
                                      f"{result!r} need {expected}")
        if name in SCALE_NAMES and int(np.prod(op.shape)) != 1:
            raise InvalidOperandError(f"matmul: {name} must hold one value (a per-tensor scale), got shape {op.shape}")
    return a_dtype, {"b_dtype": b_dtype, "result_dtype": result}


def check_device(compute_capability: int) -> None:
    """Raise unless the device has FP8 tensor cores."""
    if compute_capability < MIN_COMPUTE_CAPABILITY:
        major, minor = divmod(compute_capability, 10)
        raise InvalidOperandError(
            f"matmul: FP8 products need a GPU of compute capability 8.9 or newer (Ada, Hopper, ...); this one "
            f"is {major}.{minor}"
        )


def check_result_option(result_dtype: Any) -> None:
    """Validate ``MatmulOptions.result_dtype``."""
    if result_dtype is not None and result_dtype not in FP8_RESULTS:
        raise InvalidOptionError(f"MatmulOptions: result_dtype must be None or one of {list(FP8_RESULTS)} "
                                 f"(it applies to FP8 operands), got {result_dtype!r}")


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a result dtype name (ml_dtypes' for bfloat16).

    Examples
    --------
    >>> numpy_dtype("bfloat16").name, numpy_dtype("float16").name
    ('bfloat16', 'float16')
    """
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
