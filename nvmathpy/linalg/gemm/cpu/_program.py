"""What a compiled epilogue is to its callers: a :class:`Program` that applies the steps to
the arrays of an environment, with the scratch buffers it needs allocated once by the caller.

Every CPU backend (the NumPy ufunc chain and numexpr in :mod:`._epilogue_eval`, the generated
C loop in :mod:`._epilogue_c`) returns one.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["Program"]


class Program:
    """Compiled steps: ``run(env, scratch)`` applies them; ``scratch_kinds`` says which
    scratch buffers (``"f"`` compute dtype, ``"b"`` boolean) a caller allocates once."""

    def __init__(self, runner: Callable[[dict, Sequence[np.ndarray]], None], scratch_kinds: tuple[str, ...]):
        self._runner = runner
        self.scratch_kinds = scratch_kinds

    def scratch(self, shape: tuple[int, ...], dtype: np.dtype) -> list[np.ndarray]:
        """Allocate the scratch buffers for blocks of ``shape``."""
        return [np.empty(shape, dtype if kind == "f" else np.bool_) for kind in self.scratch_kinds]

    def run(self, env: dict[str, np.ndarray], scratch: Sequence[np.ndarray]) -> None:
        self._runner(env, scratch)
