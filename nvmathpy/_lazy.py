"""Lazy attribute loading for package faces: names resolve to submodules on first access."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_getattr(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that imports ``names[name]`` on first use.

    ``names`` maps a public name to the submodule (relative to ``package``) defining it; a
    name that maps to itself is that submodule.
    """

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = importlib.import_module(f"{package}.{module_name}")
        if module_name != name:
            value = getattr(value, name)
        globals_of_package = importlib.import_module(package).__dict__
        globals_of_package[name] = value  # later look-ups skip __getattr__
        return value

    return __getattr__
