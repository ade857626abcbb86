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

Everything that depends on the data is read through cuFFT's ``callerInfo`` pointer, one small
device struct (:attr:`CallbackKernel.info_type` is its ctypes mirror):

``stride[R]``    element strides of the buffer cuFFT reads/writes, axes of extent > 1 from the
                 largest stride down (``R`` of them): the offset cuFFT passes is peeled into the
                 element's indices greedily, which is exact for non-overlapping nested layouts;
``kw[R]``        1 at the position of the last transformed axis: ``k = sum(index * kw)``;
``limit[R]``     (prolog on a zero-padded buffer) indices at or past these are padding: the
                 callback returns 0 there without running the prolog;
``scale``        (epilog) the normalisation, applied before the epilog;
``conj``         (complex) conjugate the prolog's result / the epilog's argument (hfft, ihfft);
``in<i>``, ``in<i>_stride[R]``  an array input: device pointer and element strides (0: broadcast);
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
from .ir import Expr, inputs_of, walk

__all__ = ["APPLY_NAME", "CALLBACK_DTYPES", "LINK_NAMES", "CallbackKernel", "apply_source", "callback_kernel",
           "callback_type", "caller_info", "compile_apply", "compile_callback", "peel_order"]

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
        ``R``: the number of buffer axes the offset is peeled into (0: indices not needed).
    guard
        Whether the load callback returns 0 for zero-padding (``limit``).
    inputs
        ``(name, kind)`` of the callback inputs in struct order (kind ``"matrix"`` or ``"scalar"``).
    uses_k
        Whether the IR reads the index ``k``.
    expr
        The IR the body was generated from.
    info_type
        The ctypes mirror of the ``callerInfo`` struct.
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
    tag: str = ""


def callback_type(role: str, dtype: Any) -> int:
    """The ``cufftXtCallbackType`` of a ``role`` callback on ``dtype`` values."""
    return _CALLBACK_TYPES[_ROLES[role], np.dtype(dtype).name]


def _info_fields(role: str, dtype: str, rank: int, guard: bool, uses_k: bool,
                 inputs: Sequence[tuple[str, str]]) -> list[tuple[str, str, Any]]:
    """The ``callerInfo`` struct: ``(name, C declaration, ctypes type)`` in order (8-byte fields
    first, so C's and ctypes' natural alignments agree)."""
    real = CALLBACK_DTYPES[dtype][2]
    complex_ = dtype.startswith("complex")
    fields: list[tuple[str, str, Any]] = []
    if rank:
        fields.append(("stride", f"long long stride[{rank}];", ctypes.c_int64 * rank))
        if uses_k:
            fields.append(("kw", f"long long kw[{rank}];", ctypes.c_int64 * rank))
        if guard:
            fields.append(("limit", f"long long limit[{rank}];", ctypes.c_int64 * rank))
    if role == "epilog":
        fields.append(("scale", "double scale;", ctypes.c_double))
    if complex_:
        fields.append(("conj", "long long conj;", ctypes.c_int64))
    for i, (_, kind) in enumerate(inputs):
        if kind == "matrix":
            fields.append((f"in{i}", f"const void* in{i};", ctypes.c_void_p))
            if rank:
                fields.append((f"in{i}_stride", f"long long in{i}_stride[{rank}];", ctypes.c_int64 * rank))
    for i, (_, kind) in enumerate(inputs):
        if kind == "scalar":
            count = 2 if complex_ else 1
            fields.append((f"s{i}", f"{real} s{i}[{count}];", _REAL_CTYPES[real] * count))
    return fields


@functools.lru_cache(maxsize=256)
def callback_kernel(expr: Expr, role: str, dtype: str, rank: int, guard: bool = False) -> CallbackKernel:
    """Generate the cuFFT LTO callback applying ``expr`` as the ``role``.

    Parameters
    ----------
    expr
        The traced callback: value ``v``, inputs of kind ``"matrix"``/``"scalar"``, index ``col``
        (the FFT's ``k``).
    role
        ``"prolog"`` (load callback) or ``"epilog"`` (store callback).
    dtype
        The value dtype (see :data:`CALLBACK_DTYPES`).
    rank
        How many buffer axes the element offset is peeled into (the axes of extent > 1).
    guard
        Prolog only: return 0 without running the prolog on zero padding.

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> kern = callback_kernel(trace(lambda v, col: v * col, {}), "epilog", "complex64", 2)
    >>> hex(kern.callback_type), [name for name, _ in kern.info_type._fields_]
    ('0x4', ['stride', 'kw', 'scale', 'conj'])
    """
    if role not in _ROLES:
        raise ValueError(f"role must be 'prolog' or 'epilog', got {role!r}")
    if dtype not in CALLBACK_DTYPES:
        raise ValueError(f"cuFFT callbacks take {sorted(CALLBACK_DTYPES)} values, got {dtype!r}")
    if guard and role != "prolog":
        raise ValueError("only a prolog guards zero padding")
    indices = {node.name for node in walk(expr) if node.op == "index"}
    if indices - {"col"}:
        raise ValueError(f"FFT callbacks have only the index k; the IR uses {sorted(indices)}")
    inputs = tuple((name, kind) for name, kind in inputs_of(expr).items() if kind != "value")
    if any(kind not in ("matrix", "scalar") for _, kind in inputs):
        raise ValueError(f"FFT callback inputs are arrays or scalars; got kinds {[k for _, k in inputs]}")
    uses_k = "col" in indices
    element, compute, _, suffix = CALLBACK_DTYPES[dtype]
    fields = _info_fields(role, dtype, rank, guard, uses_k, inputs)
    peel = rank > 0 and (uses_k or guard or any(kind == "matrix" for _, kind in inputs))
    leaves: dict[tuple[str, str | None], str] = {("value", None): "v", ("index", "col"): "k"}
    leaves.update({("input", name): f"in{i}" for i, (name, _) in enumerate(inputs)})
    body = emit_expression(expr, compute, leaves)
    complex_ = dtype.startswith("complex")

    lines = ["  const NvmCallbackInfo* info = static_cast<const NvmCallbackInfo*>(callerInfo);"]
    if peel:
        lines.append("  long long rest = static_cast<long long>(offset);")
        for d in range(rank):
            lines.append(f"  const long long i{d} = rest / info->stride[{d}]; rest -= i{d} * info->stride[{d}];")
    index_sum = (lambda weights: " + ".join(f"i{d} * info->{weights}[{d}]" for d in range(rank))) if peel else (
        lambda weights: "0")
    if guard:
        outside = " || ".join(f"i{d} >= info->limit[{d}]" for d in range(rank)) if peel else "false"
        lines.append(f"  if ({outside}) return nvm_cb_element({compute}(0), static_cast<{element}*>(nullptr));")
    if role == "prolog":
        lines.append(f"  const {compute} v = nvm_cb_value(static_cast<const {element}*>(dataIn)[offset]);")
    else:
        lines.append(f"  {compute} v = nvm_cb_value(element);")
        if complex_:
            lines.append("  if (info->conj) v = conj(v);")
        lines.append(f"  v = v * {compute}(info->scale);")
    if uses_k:
        lines.append(f"  const long long k = {index_sum('kw')};")
    for i, (_, kind) in enumerate(inputs):
        if kind == "matrix":
            lines.append(f"  const {compute} in{i} = nvm_cb_value(static_cast<const {element}*>(info->in{i})"
                         f"[{index_sum(f'in{i}_stride')}]);")
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
    return CallbackKernel(source, symbol, role, dtype, callback_type(role, dtype), rank, guard, inputs, uses_k,
                          expr, info_type, tag)


def peel_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The axes of extent > 1 by decreasing element stride, or ``None`` when peeling an offset
    greedily along them would not recover the indices (strides that overlap or do not nest).

    Examples
    --------
    >>> peel_order((3, 4, 5), (20, 5, 1)), peel_order((4, 1, 6), (1, 0, 5)), peel_order((4, 4), (3, 1))
    ((0, 1, 2), (2, 0), None)
    """
    axes = sorted((a for a in range(len(shape)) if shape[a] > 1), key=lambda a: (-strides[a], a))
    reach = 0  # largest offset the axes after the current one reach
    for a in reversed(axes):
        if strides[a] <= reach:
            return None
        reach += strides[a] * (shape[a] - 1)
    return tuple(axes)


def caller_info(kernel: CallbackKernel, order: Sequence[int], strides: Sequence[int], k_axis: int, *,
                limits: Sequence[int] | None = None, scale: float = 1.0, conj: bool = False,
                arrays: Mapping[str, tuple[int, Sequence[int]]] | None = None,
                scalars: Mapping[str, Any] | None = None) -> ctypes.Structure:
    """Fill ``kernel``'s ``callerInfo`` struct for one buffer.

    Parameters
    ----------
    order
        :func:`peel_order` of the buffer (``kernel.rank`` axes).
    strides
        The buffer's element strides, by axis.
    k_axis
        The last transformed axis (where ``k`` counts).
    limits
        Per axis, the extent of the data before zero padding (guarded prologs).
    scale, conj
        Epilog normalisation; conjugation (see the module docstring).
    arrays
        Per array input: ``(device pointer, element strides by axis)`` (0 on broadcast axes).
    scalars
        Per scalar input: its value.
    """
    if len(order) != kernel.rank:
        raise ValueError(f"the kernel peels {kernel.rank} axes, the buffer has {len(order)} of extent > 1")
    arrays, scalars = arrays or {}, scalars or {}
    info = kernel.info_type()
    names = {name for name, _ in kernel.info_type._fields_}

    def per_axis(values: Sequence[int]) -> Any:
        return (ctypes.c_int64 * kernel.rank)(*(int(values[a]) for a in order))

    if "stride" in names:
        info.stride = per_axis(strides)
    if "kw" in names:
        info.kw = per_axis([int(a == k_axis) for a in range(len(strides))])
    if "limit" in names:
        info.limit = per_axis(limits)
    if "scale" in names:
        info.scale = float(scale)
    if "conj" in names:
        info.conj = int(bool(conj))
    for i, (name, kind) in enumerate(kernel.inputs):
        if kind == "matrix":
            pointer, input_strides = arrays[name]
            setattr(info, f"in{i}", pointer)
            if kernel.rank:
                setattr(info, f"in{i}_stride", per_axis(input_strides))
        else:
            value = complex(scalars[name])
            parts = (value.real, value.imag) if kernel.dtype.startswith("complex") else (value.real,)
            getattr(info, f"s{i}")[:] = parts
    return info


#: The entry point of :func:`apply_source`'s kernel.
APPLY_NAME = "nvm_fft_apply_callback"


def apply_source(kernel: CallbackKernel, extents: Sequence[int], strides: Sequence[int]) -> str:
    """CUDA C of one elementwise kernel applying ``kernel``'s callback to every element of a buffer
    (the fallback when cuFFT refuses a plan with LTO callbacks: the plain FFT runs, and this kernel
    runs before it for a prolog, after it for an epilog, on the same stream).

    The buffer's elements are the index tuples of ``extents`` at element ``strides`` (the axes cuFFT
    would have called the callback for, any order); the kernel is
    ``APPLY_NAME(const void* src, void* dst, void* info, long long n)`` with ``n`` the element count,
    a grid-stride loop, and calls the callback exactly as cuFFT does, with the same ``callerInfo``:
    a prolog writes ``dst[offset] = load(src, offset, info)`` (``dst`` may be ``src``), an epilog
    calls ``store(dst, offset, src[offset], info)`` (in place: ``src`` is ``dst``).

    Examples
    --------
    >>> from nvmathpy.kernels.trace import trace
    >>> kern = callback_kernel(trace(lambda v: v * 2, {}), "epilog", "float32", 1)
    >>> APPLY_NAME in apply_source(kern, (5, 3), (3, 1))
    True
    """
    axes = [(int(n), int(st)) for n, st in zip(extents, strides) if n > 1] or [(1, 0)]
    element = CALLBACK_DTYPES[kernel.dtype][0]
    rank = len(axes)
    if kernel.role == "prolog":
        call = (f"static_cast<{element}*>(dst)[offset] = {kernel.symbol}(const_cast<void*>(src), offset, info, "
                "nullptr);")
    else:
        call = f"{kernel.symbol}(dst, offset, static_cast<const {element}*>(src)[offset], info, nullptr);"
    axes.sort(key=lambda axis: -abs(axis[1]))
    # a dense buffer (no gaps, largest stride first): the element count is the offset
    dense = all(st == math.prod(n for n, _ in axes[d + 1:]) for d, (_, st) in enumerate(axes))
    lines = [
        kernel.source,
        f'extern "C" __global__ void {APPLY_NAME}(const void* src, void* dst, void* info, long long n) {{',
        f"  const long long extent[{rank}] = {{{', '.join(str(n) for n, _ in axes)}}};",
        f"  const long long stride[{rank}] = {{{', '.join(str(st) for _, st in axes)}}};",
        "  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;",
        "  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {",
    ]
    if dense:
        lines.append("    const unsigned long long offset = static_cast<unsigned long long>(i);")
    else:
        lines += [
            "    long long rest = i, at = 0;",
            f"    for (int d = {rank - 1}; d >= 0; --d) {{",
            "      at += (rest % extent[d]) * stride[d];",
            "      rest /= extent[d];",
            "    }",
            "    const unsigned long long offset = static_cast<unsigned long long>(at);",
        ]
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
