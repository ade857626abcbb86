"""The package's import graph: no import circle, no upward import, and the layering rules of
the design (docs/LAYOUT.md).

Every ``import`` and ``from ... import`` statement of every module is read with :mod:`ast`,
those inside functions and ``if TYPE_CHECKING:`` blocks included, so a circle closed by a
function-level import is found as surely as one at module level. Nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nvmathpy"

#: (importer prefix, imported prefix): modules under the first never import modules under the
#: second. Engines chosen by execution space meet only in ``_dispatch`` / the plan modules.
FORBIDDEN = [
    ("nvmathpy.linalg.solvers.plans", "nvmathpy.linalg.solvers.cuda"),
    ("nvmathpy.linalg.solvers.cpu", "nvmathpy.linalg.solvers.cuda"),
    ("nvmathpy.linalg.solvers.cpu", "nvmathpy.linalg.solvers.plans"),
    ("nvmathpy.linalg.gemm.cpu", "nvmathpy.linalg.gemm.cuda"),
    ("nvmathpy.plan", "nvmathpy.linalg"),
    ("nvmathpy.plan", "nvmathpy.fft"),
    ("nvmathpy.cuda", "nvmathpy.linalg"),
    ("nvmathpy.cuda", "nvmathpy.fft"),
    ("nvmathpy.kernels", "nvmathpy.linalg"),
    ("nvmathpy.kernels", "nvmathpy.fft"),
    ("nvmathpy.linalg", "nvmathpy.scipy"),
    ("nvmathpy.fft", "nvmathpy.scipy"),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str, bool]]:
    """``(line, imported module, names the package itself)`` for each import in ``path``.

    ``from P import x`` counts as an import of the submodule ``P.x`` where that exists, and of
    ``P`` itself otherwise (the third field is then true where ``P`` is a package).
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, False) for alias in node.names if alias.name.startswith("nvmathpy")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("nvmathpy"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    found.append((node.lineno, sub, False))
                else:
                    found.append((node.lineno, target, modules[target].name == "__init__.py"))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {target for _, target, _ in _imports(name, path, modules) if target != name}
            for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_walk_sees_imports_inside_functions():
    graph = _graph()
    # nvmathpy.linalg.gemm._engines imports an engine only when a plan needs one
    assert "nvmathpy.linalg.gemm.cpu._engine" in graph["nvmathpy.linalg.gemm._engines"]
    assert len(graph) > 100


def test_no_import_circle():
    assert _circles(_graph()) == []


def test_no_upward_import():
    """No module imports a package it lives in (that package's ``__init__`` imports it back)."""
    modules = _modules()
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for name, path in modules.items()
        for line, target, names_package in _imports(name, path, modules)
        if names_package and name.startswith(target + ".")
    ]
    assert upward == []


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_layering(importer, imported):
    modules = _modules()
    crossing = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for name, path in modules.items() if name == importer or name.startswith(importer + ".")
        for line, target, _ in _imports(name, path, modules)
        if target == imported or target.startswith(imported + ".")
    ]
    assert crossing == []


#: Below ``nvmathpy.linalg``, the packages whose modules are all private: the engines, the
#: plan implementations and the matrix-product internals (their public names are re-exported
#: by ``nvmathpy.linalg``).
PRIVATE_LINALG_PACKAGES = ("solvers.cpu", "solvers.cuda", "solvers.plans", "gemm")


def _private_linalg(target: str) -> bool:
    """Whether ``target`` is a private module of :mod:`nvmathpy.linalg`: a path component
    below it that starts with ``_``, or a module in :data:`PRIVATE_LINALG_PACKAGES`."""
    if not target.startswith("nvmathpy.linalg."):
        return False
    below = target.removeprefix("nvmathpy.linalg.")
    return (any(part.startswith("_") for part in below.split("."))
            or any(below == p or below.startswith(p + ".") for p in PRIVATE_LINALG_PACKAGES))


def test_private_linalg_rule():
    assert _private_linalg("nvmathpy.linalg.solvers._cached")
    assert _private_linalg("nvmathpy.linalg.solvers.cpu")
    assert _private_linalg("nvmathpy.linalg.gemm.matmul_plan")
    assert _private_linalg("nvmathpy.linalg._anything")
    assert not _private_linalg("nvmathpy.linalg")
    assert not _private_linalg("nvmathpy.linalg.validation")
    assert not _private_linalg("nvmathpy.linalg.solvers")
    assert not _private_linalg("nvmathpy.linalg.solversx.cpu")


def test_scipy_uses_only_public_linalg():
    """``nvmathpy.scipy`` is a thin signature layer over the public ``nvmathpy.linalg``: it
    imports no private module of it."""
    modules = _modules()
    private = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for name, path in modules.items() if name == "nvmathpy.scipy" or name.startswith("nvmathpy.scipy.")
        for line, target, _ in _imports(name, path, modules)
        if _private_linalg(target)
    ]
    assert private == []
