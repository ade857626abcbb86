"""Problem keys: hashable, JSON-serialisable descriptions of a problem.

A :class:`Problem` names the operation and every property of the operands and options that
changes how the problem is best computed or what it computes (shapes, strides or a layout
class, dtypes, epilogue, result-affecting options) - never data pointers. It keys the plan
cache (in memory) and wisdom (on disk).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Problem", "canonical_json", "freeze", "thaw"]


def freeze(value: Any) -> Any:
    """Turn lists/dicts/tuples into nested tuples so the result is hashable."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise TypeError(f"problem fields must be JSON-like values, got {type(value).__name__}: {value!r}")


def thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Problem:
    """A hashable description of one problem.

    Parameters
    ----------
    operation
        The operation's name, e.g. ``"matmul"`` or ``"fft"``.
    fields
        The problem's properties, as a mapping of JSON-like values (nested lists/dicts
        allowed); stored frozen so the problem is hashable.

    Examples
    --------
    >>> p = Problem.of("matmul", m=3, n=4, dtype="float32")
    >>> p == Problem.of("matmul", dtype="float32", n=4, m=3)
    True
    >>> p.to_json()
    '{"fields":{"dtype":"float32","m":3,"n":4},"operation":"matmul"}'
    """

    operation: str
    fields: tuple = field(default=())

    @classmethod
    def of(cls, operation: str, **fields: Any) -> "Problem":
        return cls(operation, freeze(fields))

    def as_dict(self) -> dict[str, Any]:
        return {"operation": self.operation, "fields": {k: thaw(v) for k, v in self.fields}}

    def to_json(self) -> str:
        return canonical_json(self.as_dict())

    @classmethod
    def from_json(cls, text: str) -> "Problem":
        data = json.loads(text)
        return cls.of(data["operation"], **data["fields"])

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.fields:
            if key == name:
                return thaw(value)
        return default

    def digest(self) -> str:
        """A short stable hash of the problem (for file names and log lines)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
