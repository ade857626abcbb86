"""Host C for elementwise programs: the steps of an epilogue as one SIMD loop over a 2-D result.

:func:`elementwise_source` turns ``(target, expression)`` steps (the form of
:class:`~nvmathpy.linalg.epilogues.EpilogueDef`) into a C function
``void nvm_elementwise(int64_t rows, int64_t cols, int64_t row0, void* const* p, const int64_t* ld)``
that reads each element once, evaluates every step in registers, and writes the result and the
aux outputs once. ``p`` holds one pointer per :attr:`CLayout.arrays` entry (in that order) and
``ld`` their row strides in elements; the last axis of every array is contiguous. Names in the
source come from positions only (``a0``, ``t3``); constants are exact hexadecimal literals.

Input access follows each input's :data:`PATTERNS` entry, fixed when the program is built:

``scalar``  one value (``*p``)
``col``     one value per column (``p[j]``)
``row``     one value per row (``p[i * ld]``)
``matrix``  one value per element (``p[i * ld + j]``)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .cpu_jit import SIMD_DECLARATIONS
from .emit_cuda import emit_expression
from .ir import Expr, inputs_of

__all__ = ["CLayout", "PATTERNS", "C_TYPES", "C_PRELUDE", "C_VECTOR_EXP", "elementwise_source"]

#: ``nvm_expf``/``nvm_exp``: exp as plain arithmetic that vectorises with no slow path
#: (libmvec's vector exp falls back to scalar code for every lane beyond |x| ~ 87, many times
#: slower on results with large entries). Round-to-nearest range reduction
#: ``x = n ln2 + r``, |r| <= ln2/2, split ln2 (Cody-Waite), Taylor polynomial of degree 7
#: (float, truncation 6e-9) or 13 (double, 2e-16), and 2^n applied by adding n to the
#: exponent field of the polynomial's value. Measured within 1.2 ulp of the exact value over
#: 4M normal samples of scale 1, 30 and 1000; inf, -inf and NaN as exp gives them; results
#: below the smallest normal number are flushed to zero (no denormals: they are slow too).
#: Nothing subnormal is computed on the way either (each one a microcode assist): the scaling
#: is an integer addition, exact wherever the result is normal, because gcc moves the clamps'
#: selections past the arithmetic in vectorised loops (it evaluates the unclamped argument in
#: every lane and selects the clamped lanes' constant results at the end), where a product
#: by 2^n made a subnormal of every argument below the zero threshold.
C_PRELUDE = r"""
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
static inline float nvm_expf(float t) {
  float c = t < -0x1.5d589ep+6f ? -0x1.5d589ep+6f : t;
  c = c > 0x1.62e42ep+6f ? 0x1.62e42ep+6f : c;
  const float n = (c * 0x1.715476p+0f + 0x1.8p+23f) - 0x1.8p+23f;
  const float r = (c - n * 0x1.62e4p-1f) - n * 0x1.7f7d1cp-20f;
  const float p = 1.0f + r * (1.0f + r * (0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f
                  + r * (0x1.111112p-7f + r * (0x1.6c16c2p-10f + r * 0x1.a01a02p-13f))))));
  uint32_t bits;
  memcpy(&bits, &p, 4);
  bits += (uint32_t)(int32_t)n << 23;
  float e;
  memcpy(&e, &bits, 4);
  e = t < -0x1.5d589ep+6f ? 0.0f : e;
  e = t > 0x1.62e42ep+6f ? INFINITY : e;
  return t != t ? t : e;
}
static inline double nvm_exp(double t) {
  double c = t < -0x1.6232bdd7abcd2p+9 ? -0x1.6232bdd7abcd2p+9 : t;
  c = c > 0x1.62e42fefa39efp+9 ? 0x1.62e42fefa39efp+9 : c;
  const double n = (c * 0x1.71547652b82fep+0 + 0x1.8p+52) - 0x1.8p+52;
  const double r = (c - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  double p = 1.0 / 6227020800.0;
  p = 1.0 / 479001600.0 + r * p; p = 1.0 / 39916800.0 + r * p; p = 1.0 / 3628800.0 + r * p;
  p = 1.0 / 362880.0 + r * p; p = 1.0 / 40320.0 + r * p; p = 1.0 / 5040.0 + r * p; p = 1.0 / 720.0 + r * p;
  p = 1.0 / 120.0 + r * p; p = 1.0 / 24.0 + r * p; p = 1.0 / 6.0 + r * p; p = 0.5 + r * p;
  p = 1.0 + r * p; p = 1.0 + r * p;
  uint64_t bits;
  memcpy(&bits, &p, 8);
  bits += (uint64_t)(int64_t)n << 52;
  double e;
  memcpy(&e, &bits, 8);
  e = t < -0x1.6232bdd7abcd2p+9 ? 0.0 : e;
  e = t > 0x1.62e42fefa39efp+9 ? INFINITY : e;
  return t != t ? t : e;
}
"""

#: ``nvm_vexp``: :data:`C_PRELUDE`'s exponential on a whole GCC vector, the same arithmetic and
#: results, for kernels that keep values in vector registers. The includer defines ``real``
#: (float or double), ``vec`` (a vector of it), ``ivec`` (the integer vector of its width),
#: ``INTEGER`` (its lane type) and ``IS_DOUBLE``. The selections are lane masks (C has no ``?:``
#: on vectors) and n comes from the bits of the rounding sum, whose low bits hold it (AVX2 has
#: no double-to-integer conversion).
C_VECTOR_EXP = r"""
static inline vec nvm_vselect(ivec mask, vec yes, vec no) { return (vec)(((ivec)yes & mask) | ((ivec)no & ~mask)); }
static inline vec nvm_vexp(vec t) {
#if IS_DOUBLE
  const real zero_below = -0x1.6232bdd7abcd2p+9, inf_above = 0x1.62e42fefa39efp+9, shift = 0x1.8p+52;
  const INTEGER bits = 52;
#else
  const real zero_below = -0x1.5d589ep+6f, inf_above = 0x1.62e42ep+6f, shift = 0x1.8p+23f;
  const INTEGER bits = 23;
#endif
  vec c = nvm_vselect(t < zero_below, (vec){0} + zero_below, t);
  c = nvm_vselect(c > inf_above, (vec){0} + inf_above, c);
  const vec rounded = c * (real)1.4426950408889634 + shift;
  const vec n = rounded - shift;
#if IS_DOUBLE
  const vec r = (c - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  vec p = (vec){0} + 1.0 / 6227020800.0;
  p = 1.0 / 479001600.0 + r * p; p = 1.0 / 39916800.0 + r * p; p = 1.0 / 3628800.0 + r * p;
  p = 1.0 / 362880.0 + r * p; p = 1.0 / 40320.0 + r * p; p = 1.0 / 5040.0 + r * p; p = 1.0 / 720.0 + r * p;
  p = 1.0 / 120.0 + r * p; p = 1.0 / 24.0 + r * p; p = 1.0 / 6.0 + r * p; p = 0.5 + r * p;
  p = 1.0 + r * p; p = 1.0 + r * p;
#else
  const vec r = (c - n * 0x1.62e4p-1f) - n * 0x1.7f7d1cp-20f;
  const vec p = 1.0f + r * (1.0f + r * (0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f
                + r * (0x1.111112p-7f + r * (0x1.6c16c2p-10f + r * 0x1.a01a02p-13f))))));
#endif
  const ivec k = (ivec)rounded - (ivec)((vec){0} + shift);
  vec e = (vec)((ivec)p + (k << bits));
  e = nvm_vselect(t < zero_below, (vec){0}, e);
  e = nvm_vselect(t > inf_above, (vec){0} + INFINITY, e);
  return nvm_vselect(t != t, t, e);
}
"""

PATTERNS = ("scalar", "col", "row", "matrix")
#: NumPy dtype name -> C type of arrays the kernels read or write.
C_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}


@dataclass(frozen=True)
class CLayout:
    """The arrays of a generated kernel, in the order of its pointer argument.

    Attributes
    ----------
    arrays
        ``(name, role, C type, pattern)``: role ``"x"`` (the working value, read),
        ``"out"`` (written: the result ``d`` or an aux output) or ``"in"`` (an input).
    """

    arrays: tuple[tuple[str, str, str, str], ...]

    def index(self, name: str, role: str) -> int:
        """Position of array ``name`` with ``role`` in the pointer argument."""
        return next(i for i, (n, r, _, _) in enumerate(self.arrays) if n == name and r == role)


def elementwise_source(
    steps: Sequence[tuple[str, Expr]],
    *,
    outputs: Sequence[str],
    compute: str,
    inputs: Mapping[str, tuple[str, str]],
    output_types: Mapping[str, str],
) -> tuple[str, CLayout]:
    """C source of one loop applying ``steps``, and the layout of its arrays.

    Parameters
    ----------
    steps
        ``(target, expression)`` pairs over ``x`` and the inputs: target ``"x"`` updates the
        working value, ``"d"`` writes the result, names in ``outputs`` write aux outputs,
        any other name is a temporary.
    outputs
        The aux output names.
    compute
        ``"float32"`` or ``"float64"``.
    inputs
        ``{name: (dtype name, pattern)}`` for each input the steps read (``pattern`` one of
        :data:`PATTERNS`).
    output_types
        ``{name: dtype name}`` for ``"d"`` and each aux output.

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> import numpy as np
    >>> e = trace(lambda x, bias: np.maximum(x + bias, 0), {"bias": "col"})
    >>> src, layout = elementwise_source([("d", e)], outputs=(), compute="float32",
    ...                                  inputs={"bias": ("float32", "col")}, output_types={"d": "float32"})
    >>> [(name, role) for name, role, _, _ in layout.arrays]
    [('x', 'x'), ('d', 'out'), ('bias', 'in')]
    >>> "#pragma omp simd" in src
    True
    """
    ctype = C_TYPES[compute]
    used = {name for _, expr in steps for name in inputs_of(expr)} - {"x"}
    temps = [t for t, _ in steps if t not in ("x", "d") and t not in outputs]
    arrays: list[tuple[str, str, str, str]] = [("x", "x", ctype, "matrix")]
    written = [t for t, _ in steps if t == "d" or t in outputs]
    arrays += [(name, "out", C_TYPES[output_types[name]], "matrix") for name in dict.fromkeys(written)]
    arrays += [(name, "in", C_TYPES[inputs[name][0]], inputs[name][1]) for name in sorted(used - set(temps))]
    layout = CLayout(tuple(arrays))

    head: list[str] = []
    per_row: list[str] = []
    leaves: dict[tuple[str, str | None], str] = {("index", "row"): "(row0 + i)", ("index", "col"): "j",
                                                  ("index", "batch"): "0"}
    for k, (name, role, storage, pattern) in enumerate(arrays):
        # no restrict: the result may be the working buffer itself (each element is read
        # before it is written, which "omp simd" allows)
        const = "const " if role != "out" else ""
        head.append(f"{const}{storage}* const a{k} = ({const}{storage}*)p[{k}];")
        if role == "in" and pattern == "scalar":
            head.append(f"const {ctype} s{k} = ({ctype})a{k}[0];")
            leaves[("input", name)] = f"s{k}"
        elif role == "in" and pattern == "row":
            per_row.append(f"const {ctype} r{k} = ({ctype})a{k}[i * ld[{k}]];")
            leaves[("input", name)] = f"r{k}"
        elif role == "in" and pattern == "col":
            leaves[("input", name)] = f"(({ctype})a{k}[j])"
        else:
            per_row.append(f"{const}{storage}* const row_{k} = a{k} + i * ld[{k}];")
            if role == "in":
                leaves[("input", name)] = f"(({ctype})row_{k}[j])"

    body = [f"{ctype} x = row_0[j];"]
    fresh = [0]

    def emit(expr: Expr) -> str:
        """Statements of ``expr`` appended to the body, SSA names made unique; its value."""
        leaves[("value", None)] = "x"
        emitted = emit_expression(expr, ctype, leaves, dialect="c")
        names: dict[str, str] = {}

        def rename(match: re.Match) -> str:
            return names.get(match.group(0), match.group(0))

        for statement in emitted.statements:
            own = statement.split(" = ", 1)[0].split()[-1]
            names[own] = f"e{fresh[0]}"
            fresh[0] += 1
            body.append(_SSA_NAME.sub(rename, statement))
        return _SSA_NAME.sub(rename, emitted.result)

    for target, expr in steps:
        value = emit(expr)
        if target == "x":
            body.append(f"x = {value};")
        elif target == "d" or target in outputs:
            k = layout.index(target, "out")
            body.append(f"row_{k}[j] = ({arrays[k][2]})({value});")
        else:
            body.append(f"const {ctype} v{temps.index(target)} = {value};")
            leaves[("input", target)] = f"v{temps.index(target)}"

    lines = [
        SIMD_DECLARATIONS,
        C_PRELUDE,
        "void nvm_elementwise(int64_t rows, int64_t cols, int64_t row0, void* const* p, const int64_t* ld) {",
        *("  " + h for h in head),
        "  for (int64_t i = 0; i < rows; ++i) {",
        *("    " + r for r in per_row),
        "    #pragma omp simd",
        "    for (int64_t j = 0; j < cols; ++j) {",
        *("      " + b for b in body),
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n", layout


_SSA_NAME = re.compile(r"\bt\d+\b")
