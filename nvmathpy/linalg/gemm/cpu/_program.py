"""What a compiled epilogue is to its callers: a :class:`Program` that applies the steps to
the arrays of an environment, with the scratch buffers it needs allocated once by the caller.

Every CPU backend (the NumPy ufunc chain and numexpr in :mod:`._epilogue_eval`, the generated
C loop in :mod:`._epilogue_c`) returns one. :func:`quiet_enter` and :func:`quiet_leave` bracket
a NumPy chain that must not warn about overflow or underflow (the other backends never do).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Program", "quiet_enter", "quiet_leave"]


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


try:  # NumPy >= 2: the floating-point error state is a context variable
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
except ImportError:  # older NumPy: its public context manager
    _extobj_contextvar = _make_extobj = None

#: The last state :func:`quiet_enter` saw, and that state with overflow and underflow ignored.
_quiet_of: tuple[Any, Any] = (None, None)


def quiet_enter() -> Any:
    """Ignore overflow and underflow in NumPy's ufuncs from here to :func:`quiet_leave` (the
    other error settings as they are): what ``numpy.errstate(over="ignore", under="ignore")``
    does on entry, at a fraction of its cost on NumPy 2 (the derived state is kept for the
    state it came from). Returns the token to give :func:`quiet_leave`.

    Examples
    --------
    >>> import numpy as np
    >>> token = quiet_enter()
    >>> np.array([1e308]) * 10  # no RuntimeWarning
    array([inf])
    >>> quiet_leave(token)
    """
    global _quiet_of
    if _extobj_contextvar is None:
        state = np.errstate(over="ignore", under="ignore")
        state.__enter__()
        return state
    current = _extobj_contextvar.get()
    seen, quiet = _quiet_of
    if seen is not current:
        quiet = _make_extobj(over="ignore", under="ignore")
        _quiet_of = (current, quiet)
    return _extobj_contextvar.set(quiet)


def quiet_leave(token: Any) -> None:
    """Restore the error state :func:`quiet_enter` found."""
    if _extobj_contextvar is None:
        token.__exit__(None, None, None)
    else:
        _extobj_contextvar.reset(token)
