"""Evaluating an expression IR over a result on the host, in one pass.

Two evaluators, both writing the result in place into the array that holds the product:

:class:`BlockedEvaluator`
    Compiles the IR once into a short linear program of NumPy ufunc calls with ``out=``
    scratch buffers (reused by liveness), then runs it block by block over the rows, so every
    intermediate of a block stays in cache. Needs nothing beyond NumPy (SciPy's ufuncs for
    ``erf`` and ``sigmoid``), and uses NumPy's SIMD transcendental functions.
:class:`NumexprEvaluator`
    Emits a numexpr expression (constants passed as typed 0-d arrays so float32 stays float32)
    and lets numexpr's multithreaded virtual machine make the pass. Only for IRs numexpr can
    express (no ``erf``, no casts, no ``batch`` index).

Both accept the same inputs: ``out`` of shape ``(..., M, N)`` holding the value, and a mapping
from input name to a scalar or an array broadcastable to ``out``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from .ir import Expr, uses_op, walk

__all__ = ["BlockedEvaluator", "NumexprEvaluator", "numexpr_supports", "to_numexpr", "constant_names",
           "evaluate_reference"]


def _special(name: str) -> np.ufunc:
    import scipy.special

    return getattr(scipy.special, name)


_UFUNC_OF = {
    "neg": np.negative,
    "abs": np.absolute,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "not": np.logical_not,
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "pow": np.power,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.logical_and,
    "or": np.logical_or,
}
_BOOLEAN_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not"}


def _is_boolean(node: Expr) -> bool:
    return node.op in _BOOLEAN_OPS or (node.op == "cast" and node.kind == "bool") or (
        node.op == "const" and isinstance(node.value, bool)
    )


@dataclass
class _Step:
    func: Callable[..., Any]
    sources: tuple[Any, ...]  # ("slot", i) | ("leaf", key) | ("const", value)
    dest: int
    kind: str  # "ufunc" | "where" | "cast" | "rsqrt"
    cast_to: Any = None


class BlockedEvaluator:
    """Evaluate an IR block by block with NumPy ufuncs writing into reused scratch buffers.

    Parameters
    ----------
    expr
        The expression.
    dtype
        The compute dtype (the result's dtype; float32 for float16/bfloat16 results).
    block_elements
        Target elements per block (rows per block = ``block_elements // N``, at least 1).

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> e = trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"})
    >>> out = np.array([[1.0, -3.0], [-1.0, 2.0]])
    >>> BlockedEvaluator(e, np.float64)(out, {"bias": np.array([0.5, 0.5])})
    >>> out.tolist()
    [[1.5, 0.0], [0.0, 2.5]]
    """

    def __init__(self, expr: Expr, dtype: Any, block_elements: int = 32768):
        self.expr = expr
        self.dtype = np.dtype(dtype)
        self.block_elements = max(1, int(block_elements))
        self._steps, self._slot_is_bool, self._result = self._compile(expr)
        self._local = threading.local()

    def _compile(self, expr: Expr) -> tuple[list[_Step], list[bool], Any]:
        """Post-order linearisation with slot reuse once a node's last consumer has run."""
        uses: dict[int, int] = {}
        for node in walk(expr):
            for child in node.args:
                uses[id(child)] = uses.get(id(child), 0) + 1
        steps: list[_Step] = []
        slot_is_bool: list[bool] = []
        free: dict[bool, list[int]] = {True: [], False: []}
        location: dict[int, Any] = {}
        remaining = dict(uses)

        def visit(node: Expr) -> Any:
            if id(node) in location:
                return location[id(node)]
            if node.op == "input":
                loc = ("leaf", ("value", None) if node.kind == "value" else ("input", node.name))
            elif node.op == "index":
                loc = ("leaf", ("index", node.name))
            elif node.op == "const":
                value = node.value if isinstance(node.value, bool) else self.dtype.type(node.value)
                loc = ("const", value)
            else:
                sources = tuple(visit(child) for child in node.args)
                for child, src in zip(node.args, sources):
                    remaining[id(child)] -= 1
                    if src[0] == "slot" and remaining[id(child)] == 0:
                        free[slot_is_bool[src[1]]].append(src[1])
                boolean = _is_boolean(node)
                if free[boolean]:
                    dest = free[boolean].pop()
                else:
                    dest = len(slot_is_bool)
                    slot_is_bool.append(boolean)
                steps.append(self._step(node, sources, dest))
                loc = ("slot", dest)
            location[id(node)] = loc
            return loc

        return steps, slot_is_bool, visit(expr)

    @staticmethod
    def _step(node: Expr, sources: tuple[Any, ...], dest: int) -> _Step:
        if node.op == "where":
            return _Step(np.where, sources, dest, "where")
        if node.op == "cast":
            return _Step(np.copyto, sources, dest, "cast", cast_to=node.kind)
        if node.op == "rsqrt":
            return _Step(np.sqrt, sources, dest, "rsqrt")
        if node.op in ("erf", "sigmoid"):
            return _Step(_special("erf" if node.op == "erf" else "expit"), sources, dest, "ufunc")
        return _Step(_UFUNC_OF[node.op], sources, dest, "ufunc")

    def __call__(self, out: np.ndarray, inputs: Mapping[str, Any], source: np.ndarray | None = None) -> None:
        """Apply the expression to ``out`` in place (``out`` holds the value on entry), or,
        with ``source`` (``out``'s shape, any dtype that casts to it), read the value from
        ``source`` and write ``out``: the copy and the expression in one pass, block by block."""
        m, n = out.shape[-2], out.shape[-1]
        rows = max(1, min(m, self.block_elements // max(n, 1)))
        slots = self._slots(rows, n)
        batch_shape = out.shape[:-2]
        col_index = np.arange(n)
        for batch in np.ndindex(*batch_shape):
            flat_batch = int(np.ravel_multi_index(batch, batch_shape)) if batch_shape else 0
            for r0 in range(0, m, rows):
                r1 = min(m, r0 + rows)
                block = out[batch + (slice(r0, r1),)]
                value = block if source is None else source[batch + (slice(r0, r1),)]
                views = slots if r1 - r0 == rows else [s[: r1 - r0] for s in slots]
                leaves = _LeafView(inputs, batch, r0, r1, value, col_index, flat_batch)
                self._run_block(views, leaves, block)

    def _slots(self, rows: int, n: int) -> list[np.ndarray]:
        """Scratch buffers for ``rows x n`` blocks, kept per thread (a caller running row
        chunks would otherwise allocate, and page-fault, them on every call)."""
        cache = getattr(self._local, "slots", None)
        if cache is None or cache[0] != (rows, n):
            cache = ((rows, n), [np.empty((rows, n), dtype=bool if b else self.dtype) for b in self._slot_is_bool])
            self._local.slots = cache
        return cache[1]

    def _run_block(self, slots: list[np.ndarray], leaves: "_LeafView", block: np.ndarray) -> None:
        def fetch(src: Any) -> Any:
            tag, ref = src
            if tag == "slot":
                return slots[ref]
            if tag == "const":
                return ref
            return leaves[ref]

        for step in self._steps:
            dest = slots[step.dest]
            args = [fetch(s) for s in step.sources]
            if step.kind == "ufunc":
                step.func(*args, out=dest)
            elif step.kind == "where":
                np.copyto(dest, np.where(*args))
            elif step.kind == "rsqrt":
                np.sqrt(args[0], out=dest)
                np.reciprocal(dest, out=dest)
            else:  # cast: round through the target dtype, keep computing in the slot's dtype
                np.copyto(dest, np.asarray(args[0]).astype(_cast_dtype(step.cast_to)), casting="unsafe")
        np.copyto(block, fetch(self._result), casting="unsafe")


def _cast_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class _LeafView:
    """Looks up leaves (inputs and indices) sliced to the current block."""

    __slots__ = ("inputs", "batch", "r0", "r1", "block", "col_index", "flat_batch")

    def __init__(self, inputs, batch, r0, r1, block, col_index, flat_batch):
        self.inputs, self.batch, self.r0, self.r1 = inputs, batch, r0, r1
        self.block, self.col_index, self.flat_batch = block, col_index, flat_batch

    def __getitem__(self, key: tuple[str, str | None]) -> Any:
        what, name = key
        if what == "value":
            return self.block
        if what == "index":
            if name == "row":
                return np.arange(self.r0, self.r1)[:, None]
            return self.col_index if name == "col" else self.flat_batch
        value = self.inputs[name]
        if np.ndim(value) < 2:
            return value  # a scalar or a per-column vector (N,)
        # batch dimensions align from the right; size-1 dimensions broadcast
        batch_dims = value.ndim - 2
        own = self.batch[len(self.batch) - batch_dims:] if batch_dims else ()
        batch = tuple(0 if value.shape[k] == 1 else i for k, i in enumerate(own))
        rows = slice(None) if value.shape[-2] == 1 else slice(self.r0, self.r1)
        return value[batch + (rows,)]


def numexpr_supports(expr: Expr) -> bool:
    """Whether numexpr can evaluate ``expr`` (no erf, casts, batch index or rsqrt-of-bool)."""
    return not uses_op(expr, "erf", "cast") and not any(
        n.op == "index" and n.name == "batch" for n in walk(expr)
    )


_NE_FUNC = {"exp": "exp", "log": "log", "tanh": "tanh", "sqrt": "sqrt", "abs": "abs"}
_NE_BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
             "eq": "==", "ne": "!=", "and": "&", "or": "|"}


def constant_names(constants: dict[str, Any]) -> Callable[[Any], str]:
    """A ``constant`` callback for :func:`to_numexpr`: each distinct value gets one name
    ``k0, k1, ...``, recorded in ``constants``."""

    def name(value: Any) -> str:
        for known_name, known in constants.items():
            if known == value and type(known) is type(value):
                return known_name
        new = f"k{len(constants)}"
        constants[new] = value
        return new

    return name


def to_numexpr(expr: Expr, name_of: Callable[[Expr], str], constant: Callable[[Any], str]) -> str:
    """The numexpr source of ``expr``: ``name_of(leaf)`` names input and index leaves,
    ``constant(value)`` names a numeric constant (so callers pass it in the compute dtype).

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> e = trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"})
    >>> to_numexpr(e, lambda leaf: leaf.name, lambda v: f"k{v}")
    'where(((x + bias)) <= (k0), k0, (x + bias))'
    """

    def emit(node: Expr) -> str:
        op = node.op
        if op in ("input", "index"):
            return name_of(node)
        if op == "const":
            if isinstance(node.value, bool):
                return "True" if node.value else "False"
            return constant(node.value)
        args = [emit(a) for a in node.args]
        if op in _NE_BINOP:
            return f"({args[0]} {_NE_BINOP[op]} {args[1]})"
        if op in _NE_FUNC:
            return f"{_NE_FUNC[op]}({args[0]})"
        if op == "where":
            return f"where({', '.join(args)})"
        if op in ("maximum", "minimum"):  # numexpr's own are float64-only: compare and select
            a, b = args
            keep_b = f"({a}) <= ({b})" if op == "maximum" else f"({a}) >= ({b})"
            if node.args[1].op == "const":  # NaN propagates from a (as in NumPy)
                return f"where({keep_b}, {b}, {a})"
            return f"where({keep_b}, {b}, where({b} == {b}, {a}, {b}))"  # NaN in b propagates too
        if op == "pow":
            return f"({args[0]} ** {args[1]})"
        if op == "neg":
            return f"(-{args[0]})"
        if op == "not":
            return f"(~{args[0]})"
        if op == "sigmoid":
            return f"({constant(1.0)} / ({constant(1.0)} + exp(-{args[0]})))"
        if op == "rsqrt":
            return f"({constant(1.0)} / sqrt({args[0]}))"
        raise ValueError(f"numexpr cannot express {op!r}")  # guarded by numexpr_supports

    return emit(expr)


class NumexprEvaluator:
    """Evaluate an IR with numexpr (multithreaded, one pass, in place).

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> e = trace(lambda x, s: x * s + 1, {"s": "scalar"})
    >>> out = np.ones((2, 3), dtype=np.float32)
    >>> NumexprEvaluator(e, np.float32)(out, {"s": 2.0})
    >>> out.dtype, out[0, 0]
    (dtype('float32'), np.float32(3.0))
    """

    def __init__(self, expr: Expr, dtype: Any):
        if not numexpr_supports(expr):
            raise ValueError("this expression uses operations numexpr lacks (erf, casts or the batch index)")
        import numexpr

        self._numexpr = numexpr
        self.dtype = np.dtype(dtype)
        values: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self.source = to_numexpr(expr, self._name, constant_names(values))
        self._constants = {name: np.asarray(v, dtype=self.dtype) for name, v in values.items()}

    def _name(self, leaf: Expr) -> str:
        if leaf.op == "index":
            return f"i_{leaf.name}"
        return "x" if leaf.kind == "value" else self._names.setdefault(leaf.name, f"v{len(self._names)}")

    def __call__(self, out: np.ndarray, inputs: Mapping[str, Any]) -> None:
        local = {"x": out, **self._constants}
        for name, alias in self._names.items():
            value = inputs[name]
            local[alias] = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=self.dtype)
        if "i_row" in self.source:
            local["i_row"] = np.arange(out.shape[-2])[:, None]
        if "i_col" in self.source:
            local["i_col"] = np.arange(out.shape[-1])
        self._numexpr.evaluate(self.source, local_dict=local, out=out, casting="unsafe")


_REFERENCE_OPS: dict[str, Callable[..., Any]] = {  # written apart from _UFUNC_OF on purpose
    "neg": lambda a: -a, "abs": abs, "exp": np.exp, "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt,
    "not": np.logical_not, "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "maximum": np.maximum, "minimum": np.minimum, "pow": lambda a, b: a ** b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "and": np.logical_and, "or": np.logical_or,
    "where": np.where, "rsqrt": lambda a: 1.0 / np.sqrt(a), "erf": lambda a: _special("erf")(a),
    "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)),
}


def evaluate_reference(expr: Expr, value: np.ndarray, inputs: Mapping[str, Any]) -> np.ndarray:
    """Evaluate ``expr`` in float64 with plain NumPy broadcasting: the tests' reference, built
    from its own operation table so a slip in the evaluators' table cannot hide in both."""

    def ev(node: Expr) -> Any:
        if node.op == "input":
            return value if node.kind == "value" else np.asarray(inputs[node.name], dtype=np.float64)
        if node.op == "const":
            return node.value
        if node.op == "index":
            m, n = value.shape[-2:]
            if node.name == "row":
                return np.arange(m)[:, None]
            if node.name == "col":
                return np.arange(n)
            batch = int(np.prod(value.shape[:-2]))
            return np.arange(batch).reshape(value.shape[:-2] + (1, 1))
        args = [ev(a) for a in node.args]
        if node.op == "cast":
            return np.asarray(args[0]).astype(_cast_dtype(node.kind)).astype(np.float64)
        return _REFERENCE_OPS[node.op](*args)

    with np.errstate(all="ignore"):
        return np.broadcast_to(ev(expr), value.shape).astype(np.float64)
