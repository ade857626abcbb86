"""The execution space ``python -m nvmathpy demo`` and ``bench`` run on, decided once per process.

``--space auto`` (the default) picks CUDA when a device is usable
(:func:`nvmathpy.cuda.driver.cuda_status`) and CuPy imports, and the CPU otherwise;
``--space cpu`` and ``--space cuda`` insist, and ``cuda`` without a usable GPU raises one
:class:`~nvmathpy.errors.ExecutionSpaceUnavailableError` that says why. A :class:`Space` holds
what a workload needs to run there: the array module (NumPy or CuPy), host <-> device copies,
synchronisation, a timer (CUDA events on the GPU) and the names of the peer libraries.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import statistics
from typing import Any, Callable

import numpy as np

from ..errors import ExecutionSpaceUnavailableError

__all__ = ["CHOICES", "Space", "cpu_space", "cuda_space", "select"]

#: The values of ``--space``.
CHOICES = ("auto", "cpu", "cuda")


class Space:
    """Where a demo or benchmark runs, and how it moves, syncs and times work there.

    Parameters
    ----------
    name
        ``"cpu"`` or ``"cuda"``.
    xp
        The array module: ``numpy`` or ``cupy``.
    description
        One line naming the hardware (CPU model and cores, or the GPU).
    timer
        ``timer(fn, calls) -> seconds per call`` (host clock on the CPU, CUDA events on the GPU).
    note
        Why ``--space auto`` did not pick CUDA, when it did not; else empty.
    """

    def __init__(self, name: str, xp: Any, description: str, timer: Callable[[Callable[[], object], int], float],
                 note: str = ""):
        self.name, self.xp, self.description, self.timer, self.note = name, xp, description, timer, note

    def __repr__(self) -> str:
        return f"Space({self.name!r}, {self.description!r})"

    @property
    def is_cuda(self) -> bool:
        """Whether this is the GPU."""
        return self.name == "cuda"

    @functools.cached_property
    def torch(self) -> Any:
        """torch with CUDA, for the peer columns on the GPU; ``None`` on the CPU or without it."""
        if not self.is_cuda or importlib.util.find_spec("torch") is None:
            return None
        import torch

        return torch if torch.cuda.is_available() else None

    @property
    def peer(self) -> str:
        """The libraries a user would otherwise call here, for the printed lines."""
        if not self.is_cuda:
            return "NumPy/SciPy"
        return "CuPy and torch" if self.torch is not None else "CuPy"

    def to_device(self, x: np.ndarray) -> Any:
        """A host array as an array of this space (a copy on the GPU, ``x`` itself on the CPU)."""
        return self.xp.asarray(x)

    def to_host(self, x: Any) -> np.ndarray:
        """An array of this space (or a torch tensor) as a NumPy array on the host."""
        if type(x).__module__.startswith("torch"):
            return x.detach().cpu().numpy()
        return self.xp.asnumpy(x) if self.is_cuda else np.asarray(x)

    def synchronize(self) -> None:
        """Wait until the device has finished all work queued so far (nothing to do on the CPU)."""
        if self.is_cuda:
            self.xp.cuda.Device().synchronize()

    def median_seconds(self, fn: Callable[[], object], repeats: int = 7, calls: int = 1) -> float:
        """Median seconds per call of ``fn`` over ``repeats`` samples of ``calls`` calls, after one
        warm-up call (device time between CUDA events on the GPU)."""
        fn()
        self.synchronize()
        return statistics.median(self.timer(fn, calls) for _ in range(repeats))


def cpu_space() -> Space:
    """The CPU: NumPy arrays, the host clock."""
    from ..execution import cpu_description
    from ..plan.autotune import perf_counter_timer

    cpu = cpu_description()
    return Space("cpu", np, f"CPU {cpu['cpu']} ({cpu['cores']} cores)", perf_counter_timer)


def cuda_space() -> Space:
    """The current CUDA device: CuPy arrays, CUDA events.

    Raises
    ------
    ExecutionSpaceUnavailableError
        When no device is usable (the reason from :func:`~nvmathpy.cuda.driver.cuda_status`) or
        CuPy does not import.
    """
    from ..cuda.driver import cuda_status

    status = cuda_status()
    if not status.available:
        raise ExecutionSpaceUnavailableError(f"--space cuda: no usable GPU here: {status.reason}")
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:
        raise ExecutionSpaceUnavailableError(
            f"--space cuda: CuPy does not import ({exc}); install it with pip install 'nvmathpy[cu13]' "
            "(or 'nvmathpy[cu12]')") from exc
    from ..cuda.runtime import device_description, event_timer

    device_id = cupy.cuda.Device().id
    timer = event_timer(lambda: cupy.cuda.get_current_stream().ptr, device_id)
    return Space("cuda", cupy, f"GPU {device_id}: {device_description(device_id)['gpu']}", timer)


@functools.cache
def select(request: str = "auto") -> Space:
    """The space for ``--space request``, decided once per process.

    Parameters
    ----------
    request
        ``"auto"`` (CUDA when usable and CuPy imports, else the CPU), ``"cpu"`` or ``"cuda"``.

    Raises
    ------
    ExecutionSpaceUnavailableError
        ``"cuda"`` without a usable GPU or CuPy (the message says which).
    ValueError
        An unknown ``request``.
    """
    if request not in CHOICES:
        raise ValueError(f"--space {request!r} is not allowed; allowed: {list(CHOICES)}")
    if request == "cpu":
        return cpu_space()
    if request == "cuda":
        return cuda_space()
    try:
        return cuda_space()
    except ExecutionSpaceUnavailableError as exc:
        space = cpu_space()
        space.note = f"auto: CUDA not used, {str(exc).removeprefix('--space cuda: ')}"
        return space
