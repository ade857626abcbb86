"""FFT prolog/epilog callbacks as cuFFT LTO callbacks: CUDA C generated from the expression IR.

A traced callback (:mod:`nvmathpy.fft._callbacks`) becomes one ``__device__`` function with the
exact signature cuFFT's JIT (LTO) callbacks have (``cufftJITCallbackLoadC`` ... ``StoreD`` in
``cufftXt.h``, checked by a ``static_assert`` at compile time): a *load* callback for the prolog
(it returns ``prolog(v)`` for the element cuFFT reads), a *store* callback for the epilog (it
writes ``epilog(scale * v)``). It is compiled by NVRTC to LTO-IR (``-dlto -rdc=true``,
``-default-device`` since ``cufftXt.h`` declares undecorated functions) and attached to a plan with
``cufftXtSetJITCallback`` before the plan is made.

How cuFFT finds the function in the LTO-IR: cuFFT's JIT-linked kernel calls the callback as a C++
function, so the reference it links against is a C++ (mangled) name. Attached *without* a symbol
name, that is the default ``cufftJITCallback<Load|Store><Complex|DoubleComplex|Real|DoubleReal>``
with the typedef's parameters (nvmath-python names its Numba-compiled callbacks that way, mangled
by hand); NVIDIA's CUDA 13 samples pass the name of a plain C++ (not ``extern "C"``) function.
So the generated function has C++ linkage and the default name (:data:`LINK_NAMES`), and the
engine attaches it without a name; an ``extern "C"`` definition would leave the mangled reference
unresolved, and cuFFT then refuses the plan.

What is fixed when the plan is made is baked into the source as constants (a
:class:`~nvmathpy.kernels.fft_callback_layout.CallbackLayout`: the buffer's extents and element
strides, the axis ``k`` counts along, the zero-padding limits and the array inputs' strides). The
element offset cuFFT passes is peeled into only the indices the callback needs, by constant
divisors (NVRTC emits a multiply-high and a shift, or a shift/mask for a power of two), in 32-bit
unsigned arithmetic unless the buffer or an input is too large for it
(:func:`~nvmathpy.kernels.fft_callback_layout.index_type`). A window along the transformed axis of
a dense batch of rows of 4096 is ``in0[o & 4095u]``. One source - one compilation, through the
kernel cache - serves every plan of that layout.

What may differ between plans of one layout, or between the two directions sharing a kernel, is
read through cuFFT's ``callerInfo`` pointer, one small device struct
(:attr:`CallbackKernel.info_type` is its ctypes mirror):

``in<i>``        an array input's device pointer;
``conj``         (complex) conjugate the prolog's result / the epilog's argument (hfft, ihfft);
``scale``        (epilog) the normalisation, applied before the epilog;
``s<i>``         a scalar input (``[re, im]`` for complex).

Generated names come from positions only (``in0``, ``s1``, ``t3``; the tag from a hash of the
source), never from user strings. Complex arithmetic is done by the small ``NvmComplex`` type of
the source, so the same :func:`~nvmathpy.kernels.emit_cuda.emit_expression` body serves real and
complex callbacks. The source compiles unchanged with g++ under the tests' CUDA emulation header
(``NVMATHPY_EMULATION``: the cuFFT element types are then declared by the source itself).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .emit_cuda import PRELUDE, emit_expression
from .fft_callback_layout import CallbackLayout, c_literal, peel_indices, weighted_sum
from .ir import Expr, inputs_of, walk

__all__ = ["APPLY_NAME", "CALLBACK_DTYPES", "LINK_NAMES", "CallbackKernel", "apply_source", "callback_kernel",
           "callback_type", "caller_info", "compile_apply", "compile_callback"]

#: Value dtype -> (cuFFT element type, compute type, real type, JIT typedef suffix).
CALLBACK_DTYPES = {
    "float32": ("cufftReal", "float", "float", "R"),
    "float64": ("cufftDoubleReal", "double", "double", "D"),
    "complex64": ("cufftComplex", "NvmComplex<float>", "float", "C"),
    "complex128": ("cufftDoubleComplex", "NvmComplex<double>", "double", "Z"),
}
_ROLES = {"prolog": "load", "epilog": "store"}
#: ``cufftXtCallbackType`` values (``cufftXt.h``) by (load/store, value dtype).
_CALLBACK_TYPES = {
    ("load", "complex64"): 0x0, ("load", "complex128"): 0x1, ("load", "float32"): 0x2, ("load", "float64"): 0x3,
    ("store", "complex64"): 0x4, ("store", "complex128"): 0x5, ("store", "float32"): 0x6, ("store", "float64"): 0x7,
}
_REAL_CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double}
#: The device function's name by (load/store, value dtype): the C++ function cuFFT links an LTO
#: callback attached without a symbol name against (``cufftJITCallback<Load|Store><type>``, C++
#: linkage, so its linker name is the mangled ``_Z27cufftJITCallbackLoadComplexPvyS_S_`` ...).
LINK_NAMES = {
    (phase, dtype): f"cufftJITCallback{phase.capitalize()}{name}"
    for phase in ("load", "store")
    for dtype, name in (("complex64", "Complex"), ("complex128", "DoubleComplex"), ("float32", "Real"),
                        ("float64", "DoubleReal"))
}

#: Complex arithmetic and math on the compute type (ordering, erf, max/min and casts act on the
#: real part: the tracer allows them on complex callbacks only where no data is involved).
_COMPLEX = r"""
#ifndef NVMATHPY_FFT_CALLBACK_PRELUDE
#define NVMATHPY_FFT_CALLBACK_PRELUDE
#ifdef NVMATHPY_EMULATION
typedef float cufftReal;
typedef double cufftDoubleReal;
struct cufftComplex { float x, y; };
struct cufftDoubleComplex { double x, y; };
#else
#include <cufftXt.h>
#endif
template <typename A, typename B> struct NvmSame { static constexpr bool value = false; };
template <typename A> struct NvmSame<A, A> { static constexpr bool value = true; };
template <typename R> struct NvmComplex {  // operators as friends: a bool or number operand converts
  R re, im;
  __device__ NvmComplex() : re(0), im(0) {}
  __device__ NvmComplex(R r, R i) : re(r), im(i) {}
  template <typename T> __device__ NvmComplex(T r) : re(static_cast<R>(r)), im(0) {}
  __device__ explicit operator float() const { return static_cast<float>(re); }
  __device__ explicit operator double() const { return static_cast<double>(re); }
  friend __device__ NvmComplex operator+(NvmComplex a, NvmComplex b) { return NvmComplex(a.re + b.re, a.im + b.im); }
  friend __device__ NvmComplex operator-(NvmComplex a, NvmComplex b) { return NvmComplex(a.re - b.re, a.im - b.im); }
  friend __device__ NvmComplex operator-(NvmComplex a) { return NvmComplex(-a.re, -a.im); }
  friend __device__ NvmComplex operator*(NvmComplex a, NvmComplex b) {
    return NvmComplex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
  }
  friend __device__ NvmComplex operator/(NvmComplex a, NvmComplex b) {  // Smith's algorithm
    if (fabs(b.re) >= fabs(b.im)) {
      const R r = b.im / b.re, d = b.re + b.im * r;
      return NvmComplex((a.re + a.im * r) / d, (a.im - a.re * r) / d);
    }
    const R r = b.re / b.im, d = b.re * r + b.im;
    return NvmComplex((a.re * r + a.im) / d, (a.im * r - a.re) / d);
  }
  friend __device__ bool operator==(NvmComplex a, NvmComplex b) { return a.re == b.re && a.im == b.im; }
  friend __device__ bool operator!=(NvmComplex a, NvmComplex b) { return !(a == b); }
  friend __device__ bool operator<(NvmComplex a, NvmComplex b) { return a.re < b.re; }
  friend __device__ bool operator<=(NvmComplex a, NvmComplex b) { return a.re <= b.re; }
  friend __device__ bool operator>(NvmComplex a, NvmComplex b) { return a.re > b.re; }
  friend __device__ bool operator>=(NvmComplex a, NvmComplex b) { return a.re >= b.re; }
};
template <typename R> __device__ inline NvmComplex<R> conj(NvmComplex<R> a) { return NvmComplex<R>(a.re, -a.im); }
template <typename R> __device__ inline NvmComplex<R> fabs(NvmComplex<R> a) {
  return NvmComplex<R>(hypot(a.re, a.im), R(0));
}
template <typename R> __device__ inline NvmComplex<R> exp(NvmComplex<R> a) {
  const R e = exp(a.re);
  return a.im == R(0) ? NvmComplex<R>(e, R(0)) : NvmComplex<R>(e * cos(a.im), e * sin(a.im));
}
template <typename R> __device__ inline NvmComplex<R> log(NvmComplex<R> a) {
  return NvmComplex<R>(log(hypot(a.re, a.im)), atan2(a.im, a.re));
}
template <typename R> __device__ inline NvmComplex<R> sqrt(NvmComplex<R> a) {
  const R r = hypot(a.re, a.im);
  if (r == R(0)) return NvmComplex<R>(R(0), a.im);
  if (a.re >= R(0)) {
    const R t = sqrt((r + a.re) * R(0.5));
    return NvmComplex<R>(t, a.im / (R(2) * t));
  }
  const R t = sqrt((r - a.re) * R(0.5));
  return NvmComplex<R>(fabs(a.im) / (R(2) * t), copysign(t, a.im));
}
template <typename R> __device__ inline NvmComplex<R> rsqrt(NvmComplex<R> a) {
  return NvmComplex<R>(R(1), R(0)) / sqrt(a);
}
template <typename R> __device__ inline NvmComplex<R> tanh(NvmComplex<R> a) {
  if (fabs(a.re) > R(20)) {  // tanh(re) is +-1 to working precision
    return NvmComplex<R>(copysign(R(1), a.re), R(4) * sin(a.im) * cos(a.im) * exp(R(-2) * fabs(a.re)));
  }
  const R d = cosh(R(2) * a.re) + cos(R(2) * a.im);
  return NvmComplex<R>(sinh(R(2) * a.re) / d, sin(R(2) * a.im) / d);
}
template <typename R> __device__ inline NvmComplex<R> pow(NvmComplex<R> a, NvmComplex<R> b) {  // b: a real constant
  const R n = b.re;
  if (n == floor(n) && fabs(n) <= R(64)) {  // repeated squaring, as NumPy does for small integer powers
    long long m = static_cast<long long>(fabs(n));
    NvmComplex<R> result(R(1), R(0)), base = a;
    while (m) {
      if (m & 1) result = result * base;
      base = base * base;
      m >>= 1;
    }
    return n < R(0) ? NvmComplex<R>(R(1), R(0)) / result : result;
  }
  if (a.re == R(0) && a.im == R(0)) return NvmComplex<R>(n > R(0) ? R(0) : R(1) / a.re, R(0));  // 0**-n: inf
  return exp(b * log(a));
}
template <typename R> __device__ inline NvmComplex<R> erf(NvmComplex<R> a) { return NvmComplex<R>(erf(a.re), R(0)); }
template <typename R> __device__ inline NvmComplex<R> fmax(NvmComplex<R> a, NvmComplex<R> b) {
  return NvmComplex<R>(fmax(a.re, b.re), R(0));
}
template <typename R> __device__ inline NvmComplex<R> fmin(NvmComplex<R> a, NvmComplex<R> b) {
  return NvmComplex<R>(fmin(a.re, b.re), R(0));
}
__device__ inline float nvm_cb_scale(float x, float s) { return x * s; }
__device__ inline double nvm_cb_scale(double x, double s) { return x * s; }
template <typename R> __device__ inline NvmComplex<R> nvm_cb_scale(NvmComplex<R> x, R s) {
  return NvmComplex<R>(x.re * s, x.im * s);
}
__device__ inline float nvm_cb_value(cufftReal x) { return x; }
__device__ inline double nvm_cb_value(cufftDoubleReal x) { return x; }
__device__ inline NvmComplex<float> nvm_cb_value(cufftComplex x) { return NvmComplex<float>(x.x, x.y); }
__device__ inline NvmComplex<double> nvm_cb_value(cufftDoubleComplex x) { return NvmComplex<double>(x.x, x.y); }
__device__ inline cufftReal nvm_cb_element(float x, cufftReal*) { return x; }
__device__ inline cufftDoubleReal nvm_cb_element(double x, cufftDoubleReal*) { return x; }
__device__ inline cufftComplex nvm_cb_element(NvmComplex<float> x, cufftComplex*) {
  cufftComplex r; r.x = x.re; r.y = x.im; return r;
}
__device__ inline cufftDoubleComplex nvm_cb_element(NvmComplex<double> x, cufftDoubleComplex*) {
  cufftDoubleComplex r; r.x = x.re; r.y = x.im; return r;
}
#endif
"""


@dataclass(frozen=True, eq=False)
class CallbackKernel:
    """One generated cuFFT LTO callback.

    Attributes
    ----------
    source, symbol
        The CUDA C translation unit and the name of the callback in it: cuFFT's default callback
        name for the callback type (:data:`LINK_NAMES`), a C++ (not ``extern "C"``) function.
    role
        ``"prolog"`` (a load callback) or ``"epilog"`` (a store callback).
    dtype
        The value dtype: ``"float32"``, ``"float64"``, ``"complex64"`` or ``"complex128"``.
    callback_type
        The ``cufftXtCallbackType`` to attach it as.
    rank
        The number of buffer axes of extent > 1 (those of :attr:`layout`).
    guard
        Whether the load callback returns 0 for zero padding (the layout has ``limits``).
    inputs
        ``(name, kind)`` of the callback inputs in struct order (kind ``"matrix"`` or ``"scalar"``).
    uses_k
        Whether the IR reads the index ``k``.
    expr
        The IR the body was generated from.
    info_type
        The ctypes mirror of the ``callerInfo`` struct.
    layout
        The buffer layout baked into the source.
    tag
        A name unique to the source (a hash of it): file names and logs.
    """

    source: str
    symbol: str
    role: str
    dtype: str
    callback_type: int
    rank: int
    guard: bool
    inputs: tuple[tuple[str, str], ...]
    uses_k: bool
    expr: Expr
    info_type: type = field(repr=False)
    layout: CallbackLayout | None = None
    tag: str = ""


def callback_type(role: str, dtype: Any) -> int:
    """The ``cufftXtCallbackType`` of a ``role`` callback on ``dtype`` values."""
    return _CALLBACK_TYPES[_ROLES[role], np.dtype(dtype).name]


def _info_fields(role: str, dtype: str, inputs: Sequence[tuple[str, str]]) -> list[tuple[str, str, Any]]:
    """The ``callerInfo`` struct: ``(name, C declaration, ctypes type)`` in order (8-byte fields
    first, so C's and ctypes' natural alignments agree)."""
    real = CALLBACK_DTYPES[dtype][2]
    complex_ = dtype.startswith("complex")
    fields: list[tuple[str, str, Any]] = [
        (f"in{i}", f"const void* in{i};", ctypes.c_void_p) for i, (_, kind) in enumerate(inputs) if kind == "matrix"]
    if complex_:
        fields.append(("conj", "long long conj;", ctypes.c_int64))
    if role == "epilog":
        fields.append(("scale", f"{real} scale;", _REAL_CTYPES[real]))
    for i, (_, kind) in enumerate(inputs):
        if kind == "scalar":
            count = 2 if complex_ else 1
            fields.append((f"s{i}", f"{real} s{i}[{count}];", _REAL_CTYPES[real] * count))
    return fields


@functools.lru_cache(maxsize=256)
def callback_kernel(expr: Expr, role: str, dtype: str, layout: CallbackLayout) -> CallbackKernel:
    """Generate the cuFFT LTO callback applying ``expr`` as the ``role`` on a buffer of ``layout``.

    The layout is baked into the source: the element offset cuFFT passes is peeled into only the
    indices the callback needs (``k``, the array inputs' positions, the zero-padding check) with
    constant divisors, in 32-bit arithmetic where :attr:`CallbackLayout.index_type` allows. So one
    source (and one compilation, through the kernel cache) serves every plan of one layout.

    Parameters
    ----------
    expr
        The traced callback: value ``v``, inputs of kind ``"matrix"``/``"scalar"``, index ``col``
        (the FFT's ``k``).
    role
        ``"prolog"`` (load callback) or ``"epilog"`` (store callback).
    dtype
        The value dtype (see :data:`CALLBACK_DTYPES`).
    layout
        The buffer the callback reads (prolog) or writes (epilog) and its array inputs' strides
        (:func:`~nvmathpy.kernels.fft_callback_layout.callback_layout`); with ``limits`` (prolog only) the callback returns 0 without
        running the prolog on zero padding.

    Examples
    --------
    >>> from nvmathpy.kernels.fft_callback_layout import callback_layout
    >>> from nvmathpy.kernels.trace import trace
    >>> kern = callback_kernel(trace(lambda v, col: v * col, {}), "epilog", "complex64",
    ...                        callback_layout((8, 6), (6, 1), 1))
    >>> hex(kern.callback_type), [name for name, _ in kern.info_type._fields_]
    ('0x4', ['conj', 'scale'])
    >>> "const unsigned int i1 = (o % 6u);" in kern.source
    True
    """
    if role not in _ROLES:
        raise ValueError(f"role must be 'prolog' or 'epilog', got {role!r}")
    if dtype not in CALLBACK_DTYPES:
        raise ValueError(f"cuFFT callbacks take {sorted(CALLBACK_DTYPES)} values, got {dtype!r}")
    if not isinstance(layout, CallbackLayout):
        raise TypeError(f"layout must be a CallbackLayout (see fft_callback_layout.callback_layout), got {layout!r}")
    guard = layout.limits is not None
    if guard and role != "prolog":
        raise ValueError("only a prolog guards zero padding")
    indices = {node.name for node in walk(expr) if node.op == "index"}
    if indices - {"col"}:
        raise ValueError(f"FFT callbacks have only the index k; the IR uses {sorted(indices)}")
    inputs = tuple((name, kind) for name, kind in inputs_of(expr).items() if kind != "value")
    if any(kind not in ("matrix", "scalar") for _, kind in inputs):
        raise ValueError(f"FFT callback inputs are arrays or scalars; got kinds {[k for _, k in inputs]}")
    input_strides = dict(layout.inputs)
    missing = [name for name, kind in inputs if kind == "matrix" and name not in input_strides]
    if missing:
        raise ValueError(f"the layout has no strides for the array inputs {missing}")
    uses_k = "col" in indices
    element, compute, _, suffix = CALLBACK_DTYPES[dtype]
    complex_ = dtype.startswith("complex")
    fields = _info_fields(role, dtype, inputs)
    ctype = layout.index_type
    leaves: dict[tuple[str, str | None], str] = {("value", None): "v", ("index", "col"): "k"}
    leaves.update({("input", name): f"in{i}" for i, (name, _) in enumerate(inputs)})
    body = emit_expression(expr, compute, leaves)

    # the indices the callback needs: k's, those an array input varies along, the padded ones
    padded = [d for d in range(layout.rank) if guard and layout.limits[d] < layout.extents[d]]
    needed = set(padded)
    if uses_k and layout.k is not None:
        needed.add(layout.k)
    for name, kind in inputs:
        if kind == "matrix":
            needed.update(d for d, st in enumerate(input_strides[name]) if st)
    lines = ["  const NvmCallbackInfo* info = static_cast<const NvmCallbackInfo*>(callerInfo);"]
    if needed:
        wide = ctype == "unsigned long long"
        lines.append(f"  const {ctype} o = {'offset' if wide else f'static_cast<{ctype}>(offset)'};")
        lines.extend(f"  {line}" for line in peel_indices(layout.extents, layout.strides, sorted(needed), "o", ctype))
    if padded:
        outside = " || ".join(f"i{d} >= {c_literal(layout.limits[d], ctype)}" for d in padded)
        lines.append(f"  if ({outside}) return nvm_cb_element({compute}(0), static_cast<{element}*>(nullptr));")
    if role == "prolog":
        lines.append(f"  const {compute} v = nvm_cb_value(static_cast<const {element}*>(dataIn)[offset]);")
    else:
        lines.append(f"  {compute} v = nvm_cb_value(element);")
        if complex_:
            lines.append("  if (info->conj) v = conj(v);")
        lines.append("  v = nvm_cb_scale(v, info->scale);")
    if uses_k:
        lines.append(f"  const {ctype} k = {f'i{layout.k}' if layout.k is not None else c_literal(0, ctype)};")
    for i, (name, kind) in enumerate(inputs):
        if kind == "matrix":
            lines.append(f"  const {compute} in{i} = nvm_cb_value(static_cast<const {element}*>(info->in{i})"
                         f"[{weighted_sum(input_strides[name], ctype)}]);")
        else:
            value = f"{compute}(info->s{i}[0], info->s{i}[1])" if complex_ else f"info->s{i}[0]"
            lines.append(f"  const {compute} in{i} = {value};")
    lines.extend(f"  {statement}" for statement in body.statements)
    result = body.result
    if role == "prolog":
        if complex_:
            lines.append(f"  return nvm_cb_element(info->conj ? conj({result}) : {result}, "
                         f"static_cast<{element}*>(nullptr));")
        else:
            lines.append(f"  return nvm_cb_element({result}, static_cast<{element}*>(nullptr));")
    else:
        lines.append(f"  static_cast<{element}*>(dataOut)[offset] = nvm_cb_element({result}, "
                     f"static_cast<{element}*>(nullptr));")
    struct = "struct NvmCallbackInfo {\n" + "\n".join(f"  {decl}" for _, decl, _ in fields) + "\n};\n"
    if not fields:
        struct = "struct NvmCallbackInfo { long long unused; };\n"
        fields = [("unused", "", ctypes.c_int64)]
    head = ("(void* dataIn, unsigned long long offset, void* callerInfo, void* sharedPointer)" if role == "prolog"
            else f"(void* dataOut, unsigned long long offset, {element} element, void* callerInfo, "
                 "void* sharedPointer)")
    returns = element if role == "prolog" else "void"
    text = "\n".join(lines)
    tag = "nvm_fft_" + role + "_" + hashlib.sha256((struct + head + text).encode()).hexdigest()[:16]
    symbol = LINK_NAMES[_ROLES[role], dtype]
    typedef = f"cufftJITCallback{'Load' if role == 'prolog' else 'Store'}{suffix}"
    source = "".join([
        PRELUDE, _COMPLEX, struct,
        f"// {tag}\n",  # C++ linkage: cuFFT links the callback by its C++ (mangled) name
        f"__device__ {returns} {symbol}{head} {{\n{text}\n}}\n",
        "#ifndef NVMATHPY_EMULATION\n",
        f'static_assert(NvmSame<decltype(&{symbol}), {typedef}>::value, "cuFFT {typedef} signature");\n',
        "#endif\n",
    ])
    info_type = type("NvmCallbackInfo", (ctypes.Structure,), {"_fields_": [(n, t) for n, _, t in fields]})
    return CallbackKernel(source, symbol, role, dtype, callback_type(role, dtype), layout.rank, guard, inputs,
                          uses_k, expr, info_type, layout, tag)


def caller_info(kernel: CallbackKernel, *, scale: float = 1.0, conj: bool = False,
                arrays: Mapping[str, int] | None = None, scalars: Mapping[str, Any] | None = None
                ) -> ctypes.Structure:
    """Fill ``kernel``'s ``callerInfo`` struct: what is not baked into its source.

    Parameters
    ----------
    scale, conj
        Epilog normalisation; conjugation of a complex prolog's result / epilog's argument (hfft,
        ihfft). Both depend on the direction, which shares the kernel.
    arrays
        Per array input: its device pointer (laid out as the kernel's layout says).
    scalars
        Per scalar input: its value.
    """
    arrays, scalars = arrays or {}, scalars or {}
    info = kernel.info_type()
    names = {name for name, _ in kernel.info_type._fields_}
    if "scale" in names:
        info.scale = float(scale)
    if "conj" in names:
        info.conj = int(bool(conj))
    for i, (name, kind) in enumerate(kernel.inputs):
        if kind == "matrix":
            setattr(info, f"in{i}", arrays[name])
        else:
            value = complex(scalars[name])
            parts = (value.real, value.imag) if kernel.dtype.startswith("complex") else (value.real,)
            getattr(info, f"s{i}")[:] = parts
    return info


#: The entry point of :func:`apply_source`'s kernel.
APPLY_NAME = "nvm_fft_apply_callback"


def apply_source(kernel: CallbackKernel) -> str:
    """CUDA C of one elementwise kernel applying ``kernel``'s callback to every element of its
    buffer (the fallback when cuFFT refuses a plan with LTO callbacks: the plain FFT runs, and this
    kernel runs before it for a prolog, after it for an epilog, on the same stream).

    The buffer is the kernel's layout (:attr:`CallbackKernel.layout`), baked in as constants like
    the callback's; the kernel is ``APPLY_NAME(const void* src, void* dst, void* info)``, a
    grid-stride loop over the layout's elements that calls the callback exactly as cuFFT does,
    with the same ``callerInfo``: a prolog writes ``dst[offset] = load(src, offset, info)`` (``dst``
    may be ``src``), an epilog calls ``store(dst, offset, src[offset], info)`` (in place: ``src``
    is ``dst``). On a dense buffer the element's number is its offset; otherwise it is split into
    indices by constant divisors.

    Examples
    --------
    >>> from nvmathpy.kernels.fft_callback_layout import callback_layout
    >>> from nvmathpy.kernels.trace import trace
    >>> kern = callback_kernel(trace(lambda v: v * 2, {}), "epilog", "float32", callback_layout((5, 3), (3, 1), 1))
    >>> source = apply_source(kern)
    >>> APPLY_NAME in source, "i < 15u" in source, "offset = i;" in source
    (True, True, True)
    """
    layout = kernel.layout
    element = CALLBACK_DTYPES[kernel.dtype][0]
    ctype = layout.index_type
    if kernel.role == "prolog":
        call = (f"static_cast<{element}*>(dst)[offset] = {kernel.symbol}(const_cast<void*>(src), offset, info, "
                "nullptr);")
    else:
        call = f"{kernel.symbol}(dst, offset, static_cast<const {element}*>(src)[offset], info, nullptr);"
    # the element numbers of a dense layout: strides as if packed, largest first
    packed = [math.prod(layout.extents[d + 1:]) for d in range(layout.rank)]
    lines = [
        kernel.source,
        f'extern "C" __global__ void {APPLY_NAME}(const void* src, void* dst, void* info) {{',
        f"  const {ctype} step = static_cast<{ctype}>(gridDim.x) * blockDim.x;",
        f"  for ({ctype} i = static_cast<{ctype}>(blockIdx.x) * blockDim.x + threadIdx.x; "
        f"i < {c_literal(layout.count, ctype)}; i += step) {{",
    ]
    if list(layout.strides) == packed:
        lines.append("    const unsigned long long offset = i;")
    else:
        lines.extend(f"    {line}" for line in peel_indices(layout.extents, packed, range(layout.rank), "i", ctype, "j"))
        lines.append(f"    const unsigned long long offset = {weighted_sum(layout.strides, ctype, 'j')};")
    lines += [f"    {call}", "  }", "}"]
    return "\n".join(lines) + "\n"


def compile_callback(kernel: CallbackKernel, arch: str) -> Any:
    """The LTO-IR of ``kernel`` for ``arch`` (``"sm_90"``), through the kernel cache."""
    from ..cuda.nvrtc import cuda_include_dirs
    from .kernel_cache import compile_kernel

    extra = [d for d in _cufft_include_dirs() if d not in cuda_include_dirs()]
    options = ["-rdc=true", "-default-device", *(f"-I{d}" for d in extra)]
    return compile_kernel(kernel.source, arch, output="ltoir", options=options, name=f"{kernel.tag}.cu")


def compile_apply(source: str, arch: str) -> Any:
    """The cubin of an :func:`apply_source` kernel for ``arch``, through the kernel cache."""
    from ..cuda.nvrtc import cuda_include_dirs
    from .kernel_cache import compile_kernel

    extra = [d for d in _cufft_include_dirs() if d not in cuda_include_dirs()]
    options = ["-default-device", *(f"-I{d}" for d in extra)]
    return compile_kernel(source, arch, output="cubin", options=options, name=f"{APPLY_NAME}.cu")


@functools.cache
def _cufft_include_dirs() -> tuple[str, ...]:
    """The directory of ``cufftXt.h`` (CUDA 13 wheels share the runtime's include directory)."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return ()
    found = find_nvidia_header_directory("cufft")
    return (found,) if found else ()
