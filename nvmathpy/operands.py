"""Operands: wrapping NumPy, CuPy, PyTorch arrays and DLPack producers, and the round trip back.

Every operation wraps its array arguments on entry into an :class:`Operand` that knows the
array's package, device, shape, strides and dtype, and unwraps results on exit into the
caller's package on the caller's device. Array types are recognised without importing their
libraries: a torch tensor can only exist if ``torch`` is already in ``sys.modules``.

The core works on one *native* array per operand: a ``numpy.ndarray`` for host data and a
``cupy.ndarray`` for CUDA data (torch CUDA tensors are viewed through DLPack, zero-copy).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import InvalidOperandError, OperandMismatchError

__all__ = [
    "Operand", "wrap", "wrap_all", "wrap_matching", "unwrapper", "common_package", "on_cuda", "SUPPORTED_DTYPES",
]

#: dtypes the operations accept, by name (float16/bfloat16 compute in float32).
SUPPORTED_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


@dataclass(frozen=True, slots=True)
class Operand:
    """An array argument seen through one uniform description.

    Attributes
    ----------
    array
        The native array the engines work on (``numpy.ndarray`` on the host,
        ``cupy.ndarray`` on a CUDA device).
    package
        ``"numpy"``, ``"torch"``, ``"cupy"`` or ``"dlpack"`` (any other DLPack producer,
        returned as NumPy/CuPy since the producer's package is unknown).
    device
        ``"cpu"`` or ``"cuda"``.
    device_id
        The CUDA device ordinal, ``None`` on the host.
    """

    array: Any
    package: str
    device: str
    device_id: int | None
    #: The element type when ``array`` holds it as raw storage (CuPy has no bfloat16 or
    #: float8 type: torch CUDA tensors of those dtypes are viewed as uint16/uint8).
    logical_dtype: np.dtype | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in bytes, as NumPy reports them."""
        return self.array.strides

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype if self.logical_dtype is None else self.logical_dtype

    @property
    def ndim(self) -> int:
        return self.array.ndim


def _torch_tensor_type() -> type | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def _cupy_array_type() -> type | None:
    cupy = sys.modules.get("cupy")
    return getattr(cupy, "ndarray", None) if cupy is not None else None


def on_cuda(x: Any) -> bool:
    """Whether ``x`` is an array on a CUDA device: a CuPy array, a torch CUDA tensor, or a
    DLPack producer whose device is CUDA (or CUDA managed). Cheap, and nothing is imported:
    a NumPy array costs one type check.

    Examples
    --------
    >>> import numpy as np
    >>> on_cuda(np.zeros(2)), on_cuda([1.0])
    (False, False)
    """
    if type(x) is np.ndarray:
        return False
    cupy_array = _cupy_array_type()
    if cupy_array is not None and isinstance(x, cupy_array):
        return True
    tensor = _torch_tensor_type()
    if tensor is not None and isinstance(x, tensor):
        return x.device.type == "cuda"
    device = getattr(x, "__dlpack_device__", None)
    return device is not None and int(device()[0]) in (2, 13)


def _bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as exc:  # pragma: no cover - exercised only without ml_dtypes
        from .errors import MissingDependencyError

        raise MissingDependencyError(
            "bfloat16 operands need ml_dtypes: pip install 'nvmathpy[cpu]' (or ml_dtypes)"
        ) from exc
    return np.dtype(ml_dtypes.bfloat16)


def _torch_to_numpy(tensor: Any) -> np.ndarray:
    """View a CPU torch tensor as a NumPy array without copying (bfloat16 through ml_dtypes)."""
    torch = sys.modules["torch"]
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.is_conj() or tensor.is_neg():  # lazy conj/neg views: numpy() refuses them
        tensor = tensor.resolve_conj().resolve_neg()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(_bfloat16())
    return tensor.numpy()


def torch_raw_storage(dtype: Any) -> tuple[Any, str] | None:
    """For a torch dtype CuPy has no type for: ``(torch dtype of its raw storage, the
    ml_dtypes name)``; ``None`` for every other dtype."""
    torch = sys.modules["torch"]
    raw = {torch.bfloat16: (torch.int16, "bfloat16")}
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            raw[getattr(torch, name)] = (torch.uint8, name)
    return raw.get(dtype)


def _torch_cuda_operand(tensor: Any) -> Operand:
    """A CUDA torch tensor seen as a CuPy array through DLPack (zero-copy); bfloat16 and
    float8 tensors as their raw storage, with the element type kept beside it."""
    import cupy

    tensor = tensor.detach()
    if tensor.is_conj() or tensor.is_neg():  # lazy conj/neg views cannot be exported
        tensor = tensor.resolve_conj().resolve_neg()
    device_id = tensor.device.index or 0
    raw = torch_raw_storage(tensor.dtype)
    if raw is None:
        return Operand(cupy.from_dlpack(tensor), "torch", "cuda", device_id)
    import ml_dtypes

    storage, name = raw
    return Operand(cupy.from_dlpack(tensor.view(storage)), "torch", "cuda", device_id,
                   np.dtype(getattr(ml_dtypes, name)))


def _numpy_to_torch(array: np.ndarray) -> Any:
    torch = sys.modules["torch"]
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def wrap(x: Any, name: str = "operand") -> Operand:
    """Wrap one array argument.

    Parameters
    ----------
    x
        A NumPy array, CuPy array, PyTorch tensor, or any object with ``__dlpack__``.
    name
        The argument's name, used in error messages.

    Returns
    -------
    Operand

    Raises
    ------
    InvalidOperandError
        If ``x`` is not an array of a supported kind.

    Examples
    --------
    >>> import numpy as np
    >>> op = wrap(np.ones((2, 3)), "a")
    >>> op.package, op.device, op.shape
    ('numpy', 'cpu', (2, 3))
    """
    if type(x) is np.ndarray:
        return Operand(x, "numpy", "cpu", None)
    tensor_type = _torch_tensor_type()
    if tensor_type is not None and isinstance(x, tensor_type):
        if x.device.type == "cpu":
            return Operand(_torch_to_numpy(x), "torch", "cpu", None)
        if x.device.type == "cuda":
            return _torch_cuda_operand(x)
        raise InvalidOperandError(
            f"{name}: torch tensors on device {x.device.type!r} are not supported; "
            "allowed devices are 'cpu' and 'cuda'"
        )
    cupy_type = _cupy_array_type()
    if cupy_type is not None and isinstance(x, cupy_type):
        return Operand(x, "cupy", "cuda", x.device.id)
    if isinstance(x, np.ndarray):  # ndarray subclasses (np.matrix is refused by the shape checks)
        return Operand(np.asarray(x), "numpy", "cpu", None)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, device_id = x.__dlpack_device__()
        if int(device_type) in (1, 3):  # kDLCPU, kDLCUDAHost
            return Operand(np.from_dlpack(x), "dlpack", "cpu", None)
        if int(device_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
            import cupy

            return Operand(cupy.from_dlpack(x), "dlpack", "cuda", int(device_id))
        raise InvalidOperandError(f"{name}: DLPack device type {int(device_type)} is not supported")
    raise InvalidOperandError(
        f"{name}: expected a NumPy, CuPy or PyTorch array (or a DLPack producer), "
        f"got {type(x).__module__}.{type(x).__qualname__}"
    )


def wrap_matching(x: Any, planned: dict[str, Any], name: str = "x") -> Operand:
    """Wrap ``x`` for ``reset_operand``: it must have the ``planned`` values of the
    :class:`Operand` attributes named there (package, device, shape, dtype, strides...).

    Raises
    ------
    OperandMismatchError
        Naming the first attribute that differs.

    Examples
    --------
    >>> planned = {"shape": (3,), "dtype": np.dtype(np.float64)}
    >>> wrap_matching(np.zeros(3), planned).shape
    (3,)
    """
    operand = wrap(x, name)
    for what, value in planned.items():
        found = getattr(operand, what)
        if found != value:
            raise OperandMismatchError(
                f"reset_operand: {name} has {what} {found!r} but the plan was made for {value!r}; create a new plan")
    return operand


def wrap_all(**arrays: Any) -> dict[str, Operand]:
    """Wrap several named arguments, skipping ``None``, and check they share package and device.

    Raises
    ------
    InvalidOperandError
        If the operands mix packages (e.g. NumPy and torch) or devices.
    """
    wrapped = {name: wrap(value, name) for name, value in arrays.items() if value is not None}
    common_package(wrapped)
    return wrapped


def common_package(operands: dict[str, Operand]) -> tuple[str, str, int | None]:
    """Return the ``(package, device, device_id)`` all operands share, or raise naming the odd one."""
    iterator = iter(operands.items())
    first_name, first = next(iterator)
    for name, op in iterator:
        if op.device != first.device or op.device_id != first.device_id:
            raise InvalidOperandError(
                f"operands live on different devices: {first_name} on {_where(first)}, "
                f"{name} on {_where(op)}; move them to one device"
            )
        if op.package != first.package and "dlpack" not in (op.package, first.package):
            raise InvalidOperandError(
                f"operands come from different packages: {first_name} is {first.package}, "
                f"{name} is {op.package}; pass arrays of one package"
            )
    return first.package, first.device, first.device_id


def _where(op: Operand) -> str:
    return op.device if op.device_id is None else f"{op.device}:{op.device_id}"


def unwrapper(like: Operand) -> Callable[[Any], Any] | None:
    """Return a function turning a native result into ``like``'s package, or ``None`` if no
    conversion is needed (NumPy in, NumPy out; CuPy in, CuPy out).

    Plans call this once at planning time, so the hot path pays for a conversion only when
    the caller's package needs one.
    """
    if like.package == "torch":
        if like.device == "cpu":
            return _numpy_to_torch
        torch = sys.modules["torch"]
        from_dlpack, tensor = torch.from_dlpack, torch.Tensor

        def to_torch(result: Any) -> Any:
            # a result the engine allocated with torch already is one: no DLPack round trip
            # (which would also look up the current stream and device on every call)
            return result if isinstance(result, tensor) else from_dlpack(result)

        return to_torch
    return None


def to_package(result: Any, like: Operand) -> Any:
    """Convert one native result into ``like``'s package (convenience for non-hot paths)."""
    convert = unwrapper(like)
    return result if convert is None else convert(result)
