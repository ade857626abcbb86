"""Options: dataclasses that also accept a plain dict, validated on construction.

Each operation defines its options as a frozen dataclass whose ``__post_init__`` validates
values; :func:`as_options` turns ``None``, a dict or an instance into that dataclass and
names unknown keys together with the allowed ones.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable, Mapping, TypeVar

from ..errors import InvalidOptionError

__all__ = ["as_options", "check_choice"]

T = TypeVar("T")


def as_options(value: Any, cls: type[T], argument: str = "options") -> T:
    """Return ``value`` as an instance of the options dataclass ``cls``.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Opts:
    ...     effort: str = "estimate"
    >>> as_options({"effort": "measure"}, Opts)
    Opts(effort='measure')
    >>> as_options({"efort": 1}, Opts)
    Traceback (most recent call last):
    ...
    nvmathpy.errors.InvalidOptionError: options: unknown key 'efort'; allowed: ['effort']
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        allowed = [f.name for f in fields(cls)]
        for key in value:
            if key not in allowed:
                raise InvalidOptionError(f"{argument}: unknown key {key!r}; allowed: {allowed}")
        return cls(**value)
    raise InvalidOptionError(
        f"{argument} must be None, a dict or a {cls.__name__}; got {type(value).__name__}"
    )


def check_choice(owner: str, name: str, value: Any, allowed: Iterable[Any]) -> None:
    """Raise :class:`InvalidOptionError` unless ``value`` is one of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidOptionError(f"{owner}: {name}={value!r} is not allowed; allowed: {list(allowed)}")
