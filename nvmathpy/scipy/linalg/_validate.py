"""Input handling shared by the scipy.linalg drop-in: array conversion with SciPy's
``check_finite`` semantics, SciPy's dtype rules, batching like SciPy's batched functions,
and SciPy's error and warning messages (with the index of the failing batch slice).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import LinAlgError
from ...linalg.validation import UnsupportedDtypeError, check_result_size, native
from ...operands import on_cuda, wrap

__all__ = [
    "EPS", "all_finite", "as_array", "to_caller_of", "lapack_pair", "lapack_one", "lapack_common", "over_batch",
    "caller_stacklevel", "raise_singular", "warn_ill_conditioned",
    "LinAlgError", "linalg_warning", "refuse_cuda", "scipy_own",
]


_isfinite = np.isfinite
_count_nonzero = np.count_nonzero


def linalg_warning() -> type:
    """``scipy.linalg.LinAlgWarning`` (SciPy is imported on first use)."""
    from scipy.linalg import LinAlgWarning

    return LinAlgWarning


def refuse_cuda(name: str, *operands: Any) -> None:
    """``TypeError`` naming ``name`` for a CUDA array among ``operands`` (a CuPy array, a torch
    CUDA tensor, a DLPack producer on a CUDA device): ``name`` runs on the host only. Called
    where a function leaves its NumPy fast path, so NumPy calls pay nothing for it."""
    for x in operands:
        if type(x) is not np.ndarray and x is not None and on_cuda(x):
            kind = type(x)
            raise TypeError(f"{name}: CUDA operands ({kind.__module__}.{kind.__name__}) are not supported, {name} "
                            "runs on the host only; pass a host copy (CuPy: x.get(), torch: x.cpu())")


def scipy_own(module: str, name: str) -> Callable[..., Any]:
    """SciPy's own function ``name`` from its defining module ``scipy.linalg.<module>`` (not
    through ``scipy.linalg``, whose attributes :func:`nvmathpy.patch` may have replaced)."""
    import importlib

    return getattr(importlib.import_module(f"scipy.linalg.{module}"), name)


def all_finite(x: np.ndarray) -> bool:
    """True when ``x`` holds no NaN or infinity (no floating-point warnings on the way).

    A small array is summed in Python numbers first: a finite sum proves every entry
    finite (a NaN or infinity makes it NaN or infinite, without a floating-point warning),
    and that is cheaper than a NumPy scan up to about 32 real or 16 complex entries (measured);
    a sum that is not finite (or that overflowed) is settled by the scan."""
    kind = x.dtype.kind
    if kind not in "fc":
        return True
    if x.size <= (16 if kind == "c" else 32):
        total = sum((x if x.ndim == 1 else x.ravel(order="K")).tolist())
        if total - total == 0:
            return True
    return _count_nonzero(_isfinite(x)) == x.size  # cheaper than .all() on small arrays


def as_array(x: Any, check_finite: bool, name: str = "a", any_dtype: bool = False) -> np.ndarray:
    """A NumPy array view of ``x`` (NumPy, torch CPU, array-likes); with ``check_finite``
    raise SciPy's ``ValueError`` on NaN or infinity. Object and structured/void arrays are
    refused (``ValueError``, as SciPy's) unless ``any_dtype`` (the caller checks the dtype)."""
    if type(x) is np.ndarray:
        arr = x if x.dtype.isnative else native(x)
    elif hasattr(x, "__dlpack__") or type(x).__module__.startswith("torch"):
        arr = wrap(x, name).array
    else:
        arr = native(np.asarray(x))
        if arr.dtype == object and not any_dtype:
            raise ValueError(f"{name}: object arrays are not supported")
    if arr.dtype.kind in "OV" and not any_dtype:  # SciPy refuses object arrays; structured/void data has no numbers
        what = "object arrays" if arr.dtype.kind == "O" else "structured or void data"
        raise UnsupportedDtypeError(f"{name}: dtype {arr.dtype} is not supported ({what}); allowed: numeric dtypes")
    if check_finite and not all_finite(arr):
        raise ValueError("array must not contain infs or NaNs")
    return arr


def to_caller_of(x: Any) -> Callable[[Any], Any]:
    """A converter of results back into ``x``'s package (identity for NumPy/array-likes)."""
    if type(x) is np.ndarray or not type(x).__module__.startswith("torch"):
        return lambda r: r
    import torch

    def convert(r: Any) -> Any:
        if isinstance(r, (tuple, list)):
            return type(r)(convert(v) for v in r)
        if isinstance(r, np.ndarray):
            return torch.from_numpy(r if r.flags.c_contiguous or r.flags.f_contiguous else r.copy())
        return r

    return convert


def lapack_one(dtype: np.dtype) -> np.dtype:
    """SciPy's LAPACK dtype for one array: single/double real/complex as given; bool, 8- and
    16-bit integers and float16 in float32 (NumPy's promotion with float32, as SciPy 1.17
    does), wider integers and anything else in float64."""
    dtype = np.dtype(dtype)
    if dtype.char in "fdFD":
        return dtype
    if dtype.kind == "c":
        return np.dtype(np.complex64 if dtype.itemsize <= 8 else np.complex128)
    if dtype.kind == "f" and dtype.itemsize <= 4:
        return np.dtype(np.float32)
    if dtype.kind in "biu":
        return np.result_type(dtype, np.float32)
    return np.dtype(np.float64)


def lapack_common(*dtypes: np.dtype) -> np.dtype:
    """``get_lapack_funcs``' rule for the common LAPACK dtype of several arrays (every function
    of two arrays but ``solve``): :func:`lapack_one` of their ``result_type``."""
    return lapack_one(np.result_type(*dtypes))


#: Machine epsilon of each LAPACK dtype (by type character).
EPS = {c: float(np.finfo(c).eps) for c in "fdFD"}


def lapack_pair(*dtypes: np.dtype) -> np.dtype:
    """``scipy.linalg.solve``'s rule for the common LAPACK dtype of its arrays (integers in
    float64); SciPy's other functions of two arrays follow :func:`lapack_common`."""
    first = dtypes[0]
    if first.char in EPS and all(d == first for d in dtypes):
        return first
    dtype = np.result_type(*dtypes)
    if not np.issubdtype(dtype, np.inexact):
        return np.dtype(np.float64)
    complex_ = dtype.kind == "c"
    if np.finfo(dtype).bits <= 32:
        return np.dtype(np.complex64 if complex_ else np.float32)
    return np.dtype(np.complex128 if complex_ else np.float64)


def over_batch(core: Callable[..., Any], arrays: Sequence[np.ndarray | None], core_ndims: Sequence[int],
               name: str | None = None, name_slice: bool = True) -> Any:
    """Apply ``core`` to each batch slice of ``arrays`` (core dims given per array; ``None``
    entries pass through) and stack each output, as SciPy's batched functions do (one output:
    an array; several: a list). A ``LinAlgError`` raised for a slice is re-raised naming it
    (``name_slice=False``: as it is, as SciPy's ``_apply_over_batch`` does).
    ``name`` (the public function's) is what SciPy's error for zero-size batches names; a batch
    whose results cannot be allocated raises NumPy's ``MemoryError`` after the first slice,
    before the loop over the others."""
    batches = [a.shape[: a.ndim - d] for a, d in zip(arrays, core_ndims) if a is not None]
    try:
        batch = np.broadcast_shapes(*batches)
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays if a is not None)
        raise ValueError(
            f"{name or 'function'}: the batch dimensions of the arrays ({shapes}) do not broadcast") from None
    if not batch:
        return core(*arrays)
    if math.prod(batch) == 0:
        raise ValueError(f"`{name or getattr(core, '__name__', 'function')}` does not support zero-size batches.")
    full = [None if a is None else np.broadcast_to(a, batch + a.shape[a.ndim - d:]) for a, d in zip(arrays, core_ndims)]
    results = []
    for index in np.ndindex(batch):
        if len(results) == 1:  # the results' size is known from the first slice
            for part in results[0]:
                if isinstance(part, np.ndarray):
                    check_result_size(batch + part.shape, part.dtype, name or "result")
        try:
            out = core(*(None if a is None else a[index] for a in full))
        except LinAlgError as exc:
            if not name_slice:
                raise
            flat = int(np.ravel_multi_index(index, batch))
            raise LinAlgError(f"{exc} (batch slice {flat}, index {index})") from None
        results.append(out if isinstance(out, tuple) else (out,))
    stacked = []
    for parts in zip(*results):
        arr = np.stack(parts)
        stacked.append(arr.reshape(batch + arr.shape[1:]))
    return stacked[0] if len(stacked) == 1 else stacked


def caller_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called from this package that names the first
    frame outside nvmathpy (the caller's), however many of nvmathpy's frames lie between."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.dirname(__file__))) + os.sep
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def raise_singular(slices: list[int]) -> None:
    """SciPy's error for singular matrices, naming the (flat) batch slices."""
    raise LinAlgError(f"A singular matrix detected: slice(s) {slices} are singular.")


def warn_ill_conditioned(ill: list[tuple[int, float]]) -> None:
    """SciPy's ``LinAlgWarning`` for ill-conditioned slices ``[(slice, rcond), ...]``."""
    import warnings

    text = ",".join(f"slice {i} has rcond = {r:.6g}" for i, r in ill)
    warnings.warn(f"An ill-conditioned matrix detected: {text}.", linalg_warning(), stacklevel=caller_stacklevel())
