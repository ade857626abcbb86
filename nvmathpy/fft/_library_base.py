"""What every CPU FFT library of :mod:`._libraries` is and builds: a :class:`Library` and the
:class:`FFTPrepared` candidate it makes ready to run."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any, Callable, Mapping

import numpy as np

from ..plan import Candidate, Prepared
from ._layout import Layout

__all__ = ["Call", "FFTPrepared", "Library", "into"]

Call = Callable[..., np.ndarray]


class FFTPrepared(Prepared):
    """A candidate ready to run: ``forward``/``inverse`` callables over the staged input.

    ``writes_out`` says whether the library writes straight into a given ``out`` (rather
    than computing elsewhere and copying), i.e. whether handing it a spare output pays.
    """

    def __init__(self, candidate: Candidate, forward: Call, inverse: Call, *, writes_out: bool = True, **state: Any):
        super().__init__(candidate, **state)
        self.forward = forward
        self.inverse = inverse
        self.writes_out = writes_out

    def free(self) -> None:
        super().free()
        self.forward = self.inverse = _freed


def _freed(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("this prepared FFT candidate has been freed")


def into(out: np.ndarray | None, result: np.ndarray) -> np.ndarray:
    """``result`` where no ``out`` is given, else ``out`` holding a copy of it."""
    if out is None:
        return result
    np.copyto(out, result)
    return out


class Library:
    """One CPU FFT library (base class)."""

    name = "library"
    module = ""

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def version(self) -> str:
        """The installed distribution's version (read from metadata: nothing is imported)."""
        try:
            return importlib.metadata.version(self.module)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def supports(self, layout: Layout) -> bool:
        return layout.precision != "long"

    def build(self, layout: Layout, candidate: Candidate, extra: Mapping[str, Any] | None) -> FFTPrepared:
        raise NotImplementedError
