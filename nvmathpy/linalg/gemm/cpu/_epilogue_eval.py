"""The CPU evaluator of epilogue definitions: one pass over the result per output.

A definition's steps (see :class:`~nvmathpy.linalg.epilogues.EpilogueDef`; expressions of
:mod:`nvmathpy.kernels.ir`) are compiled once,
at planning time, into a :class:`Program` for one of two backends:

- ``"numexpr"``: each output (aux outputs, then the result) is one precompiled numexpr
  expression evaluated block-wise with numexpr's own threads, with the ``x`` updates and
  temporaries inlined, so the whole chain is one pass and no temporaries are made. A
  program is never run by two threads at once: a compiled ``NumExpr`` object keeps mutable
  buffers (pydata/numexpr#569).
- ``"ufunc"`` (always available, the fallback without numexpr): an in-place chain of NumPy
  ufunc calls writing into the result and into scratch buffers allocated once per plan.

``Program.run(env, scratch)`` applies the steps to the arrays in ``env`` (``x`` the working
product, ``d`` the result buffer, which may be ``x`` itself, aux outputs and inputs); it can
be called on whole results or on row panels.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ....errors import MissingDependencyError
from ....kernels.cpu_eval import constant_names, to_numexpr
from ....kernels.ir import Expr, const, input_, inputs_of, substitute, walk
from ._program import Program, quiet_enter, quiet_leave

__all__ = ["compile_program", "fold_addend", "numexpr_available", "prologue_steps"]

_UFUNCS: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "maximum": np.maximum, "exp": np.exp, "tanh": np.tanh, "gt": np.greater, "le": np.less_equal,
}
_BOOLEAN_OPS = frozenset({"gt", "le"})
#: Operations whose two arguments may be swapped.
_COMMUTATIVE = frozenset({"add", "mul", "maximum"})
_X = input_("x", "value")


def _is_leaf(node: Expr) -> bool:
    return node.op in ("input", "const")


def _variables(node: Expr) -> set[str]:
    return set(inputs_of(node))


def numexpr_available() -> bool:
    """True when numexpr can be imported."""
    try:
        import numexpr  # noqa: F401
    except ImportError:
        return False
    return True


def prologue_steps(alpha: Any, beta: Any, has_c: bool) -> tuple[tuple[str, Expr], ...]:
    """The step computing ``x = alpha * x + beta * c`` from the bare product (none if trivial)."""
    x = _X
    if alpha != 1:
        x = Expr("mul", (x, const(alpha)))
    if has_c:
        x = Expr("add", (x, Expr("mul", (input_("c", "matrix"), const(beta)))))
    return () if x is _X else (("x", x),)


def _addend(node: Expr) -> Expr | None:
    """``v`` when ``node`` is ``x + v`` (either order) with ``v`` an input other than ``x``."""
    if node.op != "add":
        return None
    first, second = node.args
    other = second if first == _X else first if second == _X else None
    if other is not None and other.op == "input" and other.name not in ("x", "d"):
        return other
    return None


def _fold_in(expr: Expr) -> tuple[Expr | None, Expr]:
    """``(v, expr with every x + v replaced by x)`` when ``x`` occurs in ``expr`` only as
    ``x + v`` with one and the same ``v``; ``(None, expr)`` otherwise."""
    found: set[Expr] = set()
    bare = False
    for node in walk(expr):
        addend = _addend(node)
        if addend is not None:
            found.add(addend)
        elif any(arg == _X for arg in node.args):
            bare = True
    if bare or len(found) != 1 or expr == _X:
        return None, expr
    (addend,) = found

    def rebuild(node: Expr) -> Expr:
        if _addend(node) == addend:
            return _X
        if not node.args:
            return node
        return Expr(node.op, tuple(rebuild(a) for a in node.args), node.name, node.kind, node.value)

    return addend, rebuild(expr)


def fold_addend(steps: Sequence[tuple[str, Expr]]) -> tuple[str | None, tuple[tuple[str, Expr], ...]]:
    """Split an addend ``v`` off the first use of the product, for BLAS to add it.

    ``?gemm`` computes ``alpha a b + beta c``: with ``c`` prefilled with ``v`` and ``beta = 1``
    the addend costs no pass of its own (and BLAS skips the pass that zeroes its output for
    ``beta = 0``). Returns ``(name of v, the remaining steps)``, or ``(None, steps)`` when no
    addend can be split off: the first step must be ``x = x + v``, or the only step an
    expression whose every use of ``x`` is ``x + v``.

    Examples
    --------
    >>> from nvmathpy.linalg.epilogues import definition
    >>> name, rest = fold_addend(definition("relu_bias").steps)
    >>> name, [(target, str(e)) for target, e in rest]
    ('bias', [('d', 'maximum(x, 0.0)')])
    >>> fold_addend(definition("relu").steps)[0] is None
    True
    """
    steps = tuple(steps)
    if not steps:
        return None, steps
    target, expr = steps[0]
    if target == "x":
        addend = _addend(expr)
        return (None, steps) if addend is None else (addend.name, steps[1:])
    if len(steps) == 1:
        addend, rest = _fold_in(expr)
        if addend is not None:
            return addend.name, ((target, rest),)
    return None, steps


def _normalise(steps: Sequence[tuple[str, Expr]], result_is_work: bool) -> list[tuple[str, Expr]]:
    steps = list(steps)
    names = [t for t, _ in steps]
    if "d" in names and names.index("d") != len(names) - 1:
        raise ValueError("an epilogue's 'd' step must be its last")
    if "d" not in names and (not result_is_work or "x" in names):
        steps.append(("d", _X))  # the numexpr backend inlines x updates into this output
    return steps


def compile_program(
    steps: Sequence[tuple[str, Expr]],
    *,
    outputs: Sequence[str],
    compute_dtype: np.dtype,
    result_is_work: bool,
    input_dtypes: dict[str, np.dtype],
    backend: str,
    input_patterns: Mapping[str, str] | None = None,
    workers: int = 1,
    pool: Any = None,
) -> Program:
    """Compile ``steps`` for ``backend`` (``"ufunc"``, ``"numexpr"`` or ``"c"``).

    ``outputs`` are the aux output names (targets that are neither ``x``, ``d`` nor
    temporaries); ``result_is_work`` says the result buffer ``d`` is the working buffer
    ``x`` (false when the result dtype differs, e.g. float16 computed in float32);
    ``input_dtypes`` maps each input variable to its dtype (numexpr signatures). The ``"c"``
    backend (2-D results, ``result_is_work``; see :mod:`._epilogue_c`) also takes each
    input's broadcast pattern and runs over ``workers`` row bands in ``pool``.
    """
    steps = _normalise(steps, result_is_work)
    if backend == "numexpr":
        return _compile_numexpr(steps, outputs, compute_dtype, input_dtypes)
    if backend == "ufunc":
        return _UfuncCompiler(compute_dtype, outputs, result_is_work).compile(steps)
    if backend == "c":
        from ._epilogue_c import compile_c_program

        return compile_c_program(steps, outputs=outputs, compute_dtype=compute_dtype, input_dtypes=input_dtypes,
                                 input_patterns=input_patterns or {}, workers=workers, pool=pool)
    raise ValueError(f"unknown epilogue backend {backend!r}; allowed: 'ufunc', 'numexpr', 'c'")


# -- numexpr ---------------------------------------------------------------------------------


def _compile_numexpr(
    steps: list[tuple[str, Expr]], outputs: Sequence[str], compute_dtype: np.dtype, input_dtypes: dict[str, np.dtype]
) -> Program:
    """One precompiled ``numexpr.NumExpr`` per output, called directly (skipping ``evaluate``'s
    parsing and cache lookup, which cost more than a small block's evaluation)."""
    try:
        import numexpr
        from numexpr.necompiler import getType
    except ImportError as exc:
        raise MissingDependencyError(
            "the numexpr epilogue backend needs numexpr: pip install 'nvmathpy[cpu]' (or numexpr)"
        ) from exc
    scalar = np.dtype(compute_dtype).type
    bindings: dict[str, Expr] = {}
    evaluations = []
    for target, expr in steps:
        expr = substitute(expr, bindings)
        if target not in outputs and target != "d":
            bindings[target] = expr  # x updates and temporaries are inlined
            continue
        constants: dict[str, Any] = {}
        source = to_numexpr(expr, lambda leaf: leaf.name, constant_names(constants))
        names = sorted(_variables(expr))
        dtypes = {**input_dtypes, "x": np.dtype(compute_dtype)}
        signature = [(n, getType(np.empty(0, dtypes[n]))) for n in names]
        signature += [(k, getType(np.empty(0, compute_dtype))) for k in constants]
        compiled = numexpr.NumExpr(source, signature=signature)
        consts = tuple(np.asarray(scalar(v)) for v in constants.values())
        evaluations.append((compiled, tuple(names), consts, target))

    lock = threading.Lock()  # a compiled NumExpr keeps mutable buffers: never run it twice at once

    def run(env: dict, scratch: Sequence[np.ndarray]) -> None:
        with lock:
            for compiled, names, consts, target in evaluations:
                compiled(*[env[n] for n in names], *consts, out=env[target], order="K", casting="safe",
                         ex_uses_vml=False)

    return Program(run, ())


# -- ufunc chain -----------------------------------------------------------------------------


class _UfuncCompiler:
    """Turns steps into a list of ``(function, argument refs, target ref)`` instructions.

    A ref is ``("v", name)`` (an array of ``env``), ``("k", scalar)`` or ``("s", index)``
    (a scratch buffer). A node's first non-leaf argument is computed straight into the
    node's own target when that is safe (the target is scratch, or a compute-dtype array no
    other argument reads), which keeps chains like ``(x + bias) -> max(., 0)`` in place.
    """

    def __init__(self, compute_dtype: np.dtype, outputs: Sequence[str], result_is_work: bool):
        self.scalar = np.dtype(compute_dtype).type
        self.outputs = tuple(outputs)
        self.result_is_work = result_is_work
        self.kinds: list[str] = []
        self.free: dict[str, list[int]] = {"f": [], "b": []}
        self.temps: dict[str, int] = {}
        self.code: list[tuple[Callable[..., Any], tuple, tuple]] = []

    def _alloc(self, kind: str) -> tuple[str, int]:
        if self.free[kind]:
            return ("s", self.free[kind].pop())
        self.kinds.append(kind)
        return ("s", len(self.kinds) - 1)

    def _release(self, ref: tuple) -> None:
        if ref[0] == "s" and ref[1] not in self.temps.values():
            self.free[self.kinds[ref[1]]].append(ref[1])

    def _leaf(self, node: Expr) -> tuple:
        if node.op == "const":
            return ("k", self.scalar(node.value))
        if node.name in self.temps:
            return ("s", self.temps[node.name])
        return ("v", node.name)

    def _alias(self, target: tuple) -> str | None:
        """The variable whose memory ``target`` is (``d`` may be ``x``), for aliasing checks."""
        if target[0] != "v":
            return None
        return "x" if target[1] == "d" and self.result_is_work else target[1]

    def _emit(self, node: Expr, target: tuple, reusable: bool) -> None:
        args = list(node.args)
        if node.op in _COMMUTATIVE and _is_leaf(args[0]) and not _is_leaf(args[1]):
            args.reverse()
        refs: list[tuple] = []
        scratch: list[tuple] = []
        alias = self._alias(target)
        for i, arg in enumerate(args):
            if _is_leaf(arg):
                refs.append(self._leaf(arg))
                continue
            others = set().union(*(_variables(a) for j, a in enumerate(args) if j != i))
            kind = "b" if arg.op in _BOOLEAN_OPS else "f"
            same_kind = kind == (self.kinds[target[1]] if target[0] == "s" else "f")
            if reusable and same_kind and target not in refs and (alias is None or alias not in others):
                self._emit(arg, target, True)
                refs.append(target)
            else:
                ref = self._alloc(kind)
                self._emit(arg, ref, True)
                refs.append(ref)
                scratch.append(ref)
        if node.op == "where":  # a boolean scratch holds "not cond" when the target is an argument
            spare = self._alloc("b")
            scratch.append(spare)
            self.code.append((_where, (*refs, spare), target))
        else:
            self.code.append((_UFUNCS[node.op], tuple(refs), target))
        for ref in scratch:
            self._release(ref)

    def compile(self, steps: list[tuple[str, Expr]]) -> Program:
        for name, expr in steps:
            if name in ("x", "d") or name in self.outputs:
                target: tuple = ("v", name)
                # results stored in another dtype (bool masks, float16 results) take no intermediates
                reusable = name == "x" or (name == "d" and self.result_is_work) or (
                    name in self.outputs and expr.op not in _BOOLEAN_OPS
                )
            else:
                target = self._alloc("f")
                self.temps[name] = target[1]
                reusable = True
            if _is_leaf(expr):
                if not (expr.op == "input" and self._alias(target) == expr.name):  # x -> d in place: nothing
                    self.code.append((_copy, (self._leaf(expr),), target))
            else:
                self._emit(expr, target, reusable)
        return Program(_runner(self.code), tuple(self.kinds))


def _runner(code: Sequence[tuple[Callable[..., Any], tuple, tuple]]) -> Callable[[dict, Sequence[np.ndarray]], None]:
    """``run(env, scratch)``: the instructions as one Python function, generated once (each
    ufunc called directly on its arrays, no look-up per call), overflow and underflow quiet."""
    namespace: dict[str, Any] = {"enter": quiet_enter, "leave": quiet_leave}

    def source(ref: tuple) -> str:
        kind, value = ref
        if kind == "v":
            return f"env[{value!r}]"
        if kind == "s":
            return f"scratch[{value}]"
        name = f"k{len(namespace)}"
        namespace[name] = value
        return name

    lines = []
    for fn, refs, target in code:
        name = f"f{len(namespace)}"
        namespace[name] = fn
        lines.append(f"        {name}({', '.join(source(r) for r in refs)}, out={source(target)})")
    body = "\n".join(lines) or "        pass"
    exec(f"def run(env, scratch):\n    token = enter()\n    try:\n{body}\n    finally:\n        leave(token)\n",
         namespace)
    return namespace["run"]


def _copy(src: Any, *, out: np.ndarray) -> None:
    np.copyto(out, src)


def _where(cond: Any, a: Any, b: Any, spare: np.ndarray, *, out: np.ndarray) -> None:
    if isinstance(a, np.ndarray) and np.may_share_memory(out, a):  # in place: overwrite where not cond
        np.copyto(out, b, where=np.logical_not(cond, out=spare))
        return
    np.copyto(out, b)
    np.copyto(out, a, where=cond)
