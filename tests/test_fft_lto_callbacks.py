"""FFT prolog/epilog callbacks as cuFFT LTO callbacks, checked without a GPU.

1. NVRTC compiles every callback variant (each IR operation, load and store, the four cuFFT data
   types, a zero-padding guard) to LTO-IR for sm_80 and sm_90 - the source asserts the exact
   ``cufftJITCallback*`` signature of ``cufftXt.h`` - and nvJitLink links each with a kernel that
   calls it.
2. The generated device function itself, compiled by g++ under the tests' CUDA emulation header,
   called for every element offset of strided, transposed and padded buffers, against the CPU
   plan's evaluation of the same IR (``nvmathpy.fft._callbacks``).
3. The cuFFT engine's attach sequence against the host cuFFT emulation (callbacks attached
   before planning, the callback type of each plan's data types, one set of plans per direction)
   and its results, for every candidate, against the CPU plan with the same callbacks.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
sys.path.insert(0, str(Path(__file__).parent / "kernels"))

from cuda_emulation import host  # noqa: E402
from cuda_emulation_fft import apply_callback, install  # noqa: E402
from kernels_cases import needs_gxx, needs_nvrtc  # noqa: E402
from kernels_emulator import compile_emulated  # noqa: E402
from nvmathpy.errors import InvalidOptionError  # noqa: E402
from nvmathpy.fft import FFT, FFTOptions  # noqa: E402
from nvmathpy.fft._callbacks import make_callback  # noqa: E402
from nvmathpy.fft._cuda_engine import engine_schedules  # noqa: E402
from nvmathpy.fft._driver import plan_cache  # noqa: E402
from nvmathpy.kernels.fft_callback_layout import INDEX32_LIMIT, callback_layout, index_type, peel_order  # noqa: E402
from nvmathpy.kernels.fft_callbacks import (  # noqa: E402
    CALLBACK_DTYPES, apply_source, caller_info, callback_kernel, compile_callback)
from nvmathpy.kernels.ir import inputs_of  # noqa: E402
from nvmathpy.kernels.kernel_cache import KernelCache  # noqa: E402
from nvmathpy.kernels.trace import erf, sigmoid, trace  # noqa: E402

ARCHS = ("sm_80", "sm_90")
DTYPES = tuple(CALLBACK_DTYPES)
#: One seed for the random data: the complex callbacks have branch cuts (sqrt, log, ** 0.5)
#: where single precision can land on the other side for an unlucky draw.
SEED = 20261204
TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12}

# one callback per IR operation (v: the value, w: an array input, s: a scalar, k: the index)
OPS = {
    "neg": lambda v: -v, "abs": lambda v: abs(v), "exp": lambda v: np.exp(v * 0.5),
    "log": lambda v: np.log(v + 3.0), "tanh": lambda v: np.tanh(v), "erf": lambda v: erf(v),
    "sigmoid": lambda v: sigmoid(v), "sqrt": lambda v: np.sqrt(v + 3.0), "rsqrt": lambda v: (v + 3.0) ** -0.5,
    "pow": lambda v: v ** 3, "add_matrix": lambda v, w: v + w, "sub_scalar": lambda v, s: v - s,
    "mul_k": lambda v, k: v * k, "div": lambda v, w: v / (w + 4.0), "maximum": lambda v, w: np.maximum(v, w),
    "minimum": lambda v, s: np.minimum(v, s), "lt": lambda v, w: np.where(v < w, v, w),
    "le": lambda v: np.where(v <= 0.5, v, 1.0), "gt": lambda v, k: np.where(k > 2, v, 0.0),
    "ge": lambda v, s: np.where(v >= s, s, -v), "eq": lambda v, k: np.where(k == 1, v, 2 * v),
    "ne": lambda v, w: np.where(v != w, v, 3.0),
    "and_or_not": lambda v, k: np.where(((v > 0) & (k > 1)) | ~(v < 2), v, 0.0),
    "cast_float16": lambda v: v.astype(np.float16) * 3, "cast_float32": lambda v: v.astype(np.float32) + 1,
    "cast_float64_bool": lambda v: np.where(v.astype(bool), v.astype(np.float64), 7.0),
}
KINDS = {"w": "matrix", "s": "scalar"}


def _trace(fn, names):
    """Trace ``fn(v, ...)`` as the FFT plan does: ``k`` as the IR's column index."""
    import inspect

    params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        inspect.Parameter("col" if n == "k" else n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]

    def call(x, **kw):
        return fn(x, **{("k" if n == "col" else n): value for n, value in kw.items()})

    call.__signature__ = inspect.Signature(params)
    return trace(call, {n: KINDS[n] for n in names if n in KINDS})


def _layout(expr, rank, guard=False):
    """A layout of ``rank`` axes of extent > 1 for compile checks: rows padded (divisors that are
    not powers of 2), ``k`` on the middle axis, the array inputs varying along it; with ``guard``
    the last axis zero-padded."""
    shape, strides = ((3, 7, 5), (48, 6, 1)) if rank == 3 else ((7, 5), (6, 1)) if rank == 2 else (
        ((5,), (1,)) if rank == 1 else ((1,), (1,)))
    k_axis = max(len(shape) - 2, 0)
    arrays = {name: [int(a == k_axis) for a in range(len(shape))] for name, kind in inputs_of(expr).items()
              if kind == "matrix"}
    limits = shape[:-1] + (shape[-1] - 2,) if guard else None
    return callback_layout(shape, strides, k_axis, limits=limits, inputs=arrays)


@pytest.fixture(scope="module")
def kcache(tmp_path_factory):
    return KernelCache(tmp_path_factory.mktemp("fft-callbacks"))


# -- 1. NVRTC and nvJitLink -------------------------------------------------------------------------


def _all_ops():
    from nvmathpy.kernels.ir import Expr

    exprs = [_trace(fn, _names(fn)) for fn in OPS.values()]
    total = exprs[0]
    for e in exprs[1:]:
        total = Expr("add", (total, e))
    return total


def _names(fn):
    import inspect

    return list(inspect.signature(fn).parameters)[1:]


@needs_nvrtc
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_each_operation_compiles_as_load_and_store(op, dtype, kcache):
    fn = OPS[op]
    expr = _trace(fn, _names(fn))
    for role in ("prolog", "epilog"):
        kernel = callback_kernel(expr, role, dtype, _layout(expr, 2))
        compiled = kcache.compile(kernel.source, "sm_90", output="ltoir", options=_options())
        assert compiled.kind == "ltoir" and compiled.code


def _options():
    from nvmathpy.kernels import fft_callbacks

    return ["-rdc=true", "-default-device", *(f"-I{d}" for d in fft_callbacks._cufft_include_dirs())]


_CALLER = r"""
#include <cufftXt.h>
__device__ {element} {symbol}({params});  // C++ linkage, as cuFFT's own kernels call it
extern "C" __global__ void nvm_caller({element}* data, unsigned long long n, void* info) {{
  const unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {call};
}}
"""


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("role", "guard", "rank"), [("prolog", False, 3), ("prolog", True, 2), ("epilog", False, 1),
                                                     ("epilog", False, 0)])
def test_every_variant_compiles_to_ltoir_and_links(arch, dtype, role, guard, rank, kcache, monkeypatch):
    from nvmathpy.cuda.jitlink import link
    from nvmathpy.kernels import kernel_cache

    monkeypatch.setattr(kernel_cache, "_DEFAULT", kcache)
    fn = (lambda v, w, s, k: np.where(k < 3, np.exp(v) * w + s, np.sqrt(v) / (np.tanh(v) + 2)) + v ** 0.5
          + np.log(v + 4.0)) if dtype.startswith("complex") else None
    expr = _all_ops() if fn is None else _trace(fn, _names(fn))
    kernel = callback_kernel(expr, role, dtype, _layout(expr, rank, guard))
    assert kernel.rank == rank and kernel.guard == guard
    compiled = compile_callback(kernel, arch)
    assert compiled.kind == "ltoir" and compiled.arch == arch and compiled.code
    element = CALLBACK_DTYPES[dtype][0]
    if role == "prolog":
        params, call = "void*, unsigned long long, void*, void*", f"data[i] = {kernel.symbol}(data, i, info, nullptr)"
        returns = element
    else:
        params = f"void*, unsigned long long, {element}, void*, void*"
        call, returns = f"{kernel.symbol}(data, i, data[i], info, nullptr)", "void"
    caller = _CALLER.format(element=returns, symbol=kernel.symbol, params=params, call=call).replace(
        f"__global__ void nvm_caller({returns}*", f"__global__ void nvm_caller({element}*")
    caller_ltoir = kcache.compile(caller, arch, output="ltoir", options=_options())
    linked = link([compiled, caller_ltoir])
    assert linked.kind == "cubin" and linked.code[:4] == b"\x7fELF"
    assert linked.resources["nvm_caller"].spill_stores == 0, linked.log


@needs_nvrtc
def test_the_signature_check_catches_a_wrong_callback_type(kcache):
    """The static_assert really checks: a load callback declared with the store typedef fails."""
    from nvmathpy.errors import LibraryError

    expr = _trace(lambda v: v * 2, [])
    kernel = callback_kernel(expr, "prolog", "complex64", _layout(expr, 0))
    wrong = kernel.source.replace("cufftJITCallbackLoadC>", "cufftJITCallbackStoreC>")
    with pytest.raises(LibraryError, match="signature"):
        kcache.compile(wrong, "sm_90", output="ltoir", options=_options())


def test_callback_types_and_struct_follow_cufftxt():
    expr = _trace(lambda v, w, s, k: v * w + s * k, ["w", "s", "k"])
    types = {(role, dt): callback_kernel(expr, role, dt, _layout(expr, 2)).callback_type
             for role in ("prolog", "epilog") for dt in DTYPES}
    # cufftXtCallbackType: LD_COMPLEX, LD_COMPLEX_DOUBLE, LD_REAL, LD_REAL_DOUBLE, then the ST_ ones
    assert types == {("prolog", "complex64"): 0, ("prolog", "complex128"): 1, ("prolog", "float32"): 2,
                     ("prolog", "float64"): 3, ("epilog", "complex64"): 4, ("epilog", "complex128"): 5,
                     ("epilog", "float32"): 6, ("epilog", "float64"): 7}
    kernel = callback_kernel(expr, "epilog", "complex128", _layout(expr, 2))
    # the layout is in the source; callerInfo holds pointers, the direction's conj/scale, scalars
    assert [n for n, _ in kernel.info_type._fields_] == ["in0", "conj", "scale", "s1"]
    assert kernel.inputs == (("w", "matrix"), ("s", "scalar")) and kernel.uses_k
    single = callback_kernel(expr, "epilog", "complex64", _layout(expr, 2))
    assert ctypes.sizeof(single.info_type) == 8 + 8 + 4 + 8 + 4  # float scale, float s1[2], padding
    assert "float scale;" in single.source and "float s1[2];" in single.source
    with pytest.raises(ValueError, match="only the index k"):
        callback_kernel(trace(lambda x, row: x * row, {}), "prolog", "float32", _layout(expr, 1))
    with pytest.raises(ValueError, match="no strides for the array inputs"):
        callback_kernel(expr, "prolog", "float32", callback_layout((5,), (1,), 0))
    with pytest.raises(ValueError, match="only a prolog"):
        callback_kernel(expr, "epilog", "float32", _layout(expr, 2, guard=True))


def test_user_names_never_reach_the_source():
    expr = trace(lambda x, weird_name_xyz: x * weird_name_xyz, {"weird_name_xyz": "matrix"})
    assert "weird_name_xyz" not in callback_kernel(expr, "prolog", "float64", _layout(expr, 1)).source


def test_peel_order_accepts_nested_layouts_only():
    assert peel_order((3, 7, 5), (35, 5, 1)) == (0, 1, 2)
    assert peel_order((3, 7, 5), (1, 3, 21)) == (2, 1, 0)
    assert peel_order((3, 7, 5), (42, 6, 1)) == (0, 1, 2)  # padded rows
    assert peel_order((3, 1, 5), (5, 99, 1)) == (0, 2)
    assert peel_order((4, 4), (2, 1)) is None  # overlapping
    assert peel_order((4, 4), (0, 1)) is None  # broadcast


# -- 2. the device function on the host (g++ under the CUDA emulation header) ----------------------

REAL_FNS = [
    lambda v, w, s, k: np.where(k < 3, np.exp(v * 0.5) * w + s, np.tanh(v) - erf(v)),
    lambda v, w, s, k: np.sqrt(abs(v)) + np.log(abs(v) + 0.5) + sigmoid(v) * np.maximum(v, w)
    - np.minimum(v, s) * (abs(v) + 1) ** -0.5 + v ** 3,
    lambda v, w, s, k: np.where(((v >= w) & (k != 2)) | ~(v <= s), -v,
                                v.astype(np.float16) + (v > 0).astype(np.float64)),
]
COMPLEX_FNS = [
    lambda v, w, s, k: np.where(k < 3, np.exp(v * 0.5) * w + s, np.tanh(v) - np.sqrt(v)),
    lambda v, w, s, k: np.log(v + 2.0) * (abs(v) + 1) ** -0.5 + v ** 3 - v ** 0.5 * s
    + np.where((v == w) | (k >= 4), 1.0, v / w) + np.maximum(k, 2) - np.minimum(k * 0.5, 1.0),
]
SHAPE = (3, 7, 5)
# "odd", "Fodd": gaps such that a larger stride is no multiple of the next (peeled axis by axis)
LAYOUTS = {"C": (35, 5, 1), "F": (1, 3, 21), "padded": (48, 6, 1), "odd": (53, 7, 1), "Fodd": (1, 4, 29)}


def _driver(kernel):
    """The callback source plus a kernel calling it for each offset (one emulated thread)."""
    element = CALLBACK_DTYPES[kernel.dtype][0]
    if kernel.role == "prolog":
        body = f"static_cast<{element}*>(values)[i] = {kernel.symbol}(data, offsets[i], info, nullptr);"
    else:
        body = f"{kernel.symbol}(data, offsets[i], static_cast<const {element}*>(values)[i], info, nullptr);"
    return kernel.source + (
        "__global__ void nvm_cb_driver(void* data, const unsigned long long* offsets, long long n, void* info, "
        f"void* values) {{\n  for (long long i = 0; i < n; ++i) {body}\n}}\n")


def run_on_host(kernel, data, offsets, info, values):
    lib = ctypes.CDLL(str(compile_emulated(_driver(kernel), "nvm_cb_driver")))
    lib.nvm_emu_entry.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
    args = [ctypes.c_void_p(data.ctypes.data), ctypes.c_void_p(offsets.ctypes.data), ctypes.c_longlong(len(offsets)),
            ctypes.c_void_p(ctypes.addressof(info)), ctypes.c_void_p(values.ctypes.data)]
    argv = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
    lib.nvm_emu_entry(1, 1, 1, 1, 1, 1, argv)


def _random(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _case(rng, dtype, layout):
    """A buffer holding a random (3, 7, 5) array with ``layout`` strides, its offsets, and inputs."""
    strides = LAYOUTS[layout]
    span = 1 + sum((n - 1) * s for n, s in zip(SHAPE, strides))
    buffer = np.zeros(span, dtype)
    logical = np.lib.stride_tricks.as_strided(buffer, SHAPE, [s * buffer.itemsize for s in strides])
    logical[...] = _random(rng, SHAPE, dtype)
    offsets = sum(g * s for g, s in zip(np.indices(SHAPE), strides)).astype(np.uint64)
    w = _random(rng, (1, 7, 1), dtype) + 0.5
    return buffer, logical, offsets, w, complex(rng.uniform(0.5, 1.5), 0.25) if np.dtype(dtype).kind == "c" else 0.75


def _kernel(expr, role, dtype, strides, w, limits=None):
    """The callback for a ``SHAPE`` buffer at ``strides`` with array input ``w`` (``k``: axis 1)."""
    w_strides = [st // w.itemsize if n > 1 else 0 for n, st in zip(w.shape, w.strides)]
    layout = callback_layout(SHAPE, strides, 1, limits=limits, inputs={"w": w_strides})
    return callback_kernel(expr, role, dtype, layout)


def _info(kernel, w, s, **extra):
    return caller_info(kernel, arrays={"w": w.ctypes.data}, scalars={"s": s}, **extra)


@needs_gxx
@needs_nvrtc
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_device_prolog_matches_the_cpu_evaluation(dtype, layout):
    rng = np.random.default_rng(SEED)
    fns = COMPLEX_FNS if dtype.startswith("complex") else REAL_FNS
    for number, fn in enumerate(fns):
        buffer, logical, offsets, w, s = _case(rng, dtype, layout)
        inputs = {"w": w, "s": s}
        callback = make_callback(fn, "prolog", inputs, SHAPE, np.dtype(dtype), 1)
        kernel = _kernel(callback.expr, "prolog", dtype, LAYOUTS[layout], w)
        conj = dtype.startswith("complex") and number == 0
        info = _info(kernel, w, s, conj=conj)
        got = np.zeros(SHAPE, dtype)
        run_on_host(kernel, buffer, offsets.ravel().copy(), info, got)
        want = logical.copy()
        callback(want)
        if conj:
            want = np.conj(want)
        assert np.isfinite(want).all()
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err < TOL[dtype], (number, err)
        # the emulated cuFFT applies the same struct the same way
        emulated = apply_callback(kernel, ctypes.addressof(info), logical, offsets.astype(np.int64))
        assert np.linalg.norm(emulated - want) / np.linalg.norm(want) < TOL[dtype]


@needs_gxx
@needs_nvrtc
@pytest.mark.parametrize("dtype", DTYPES)
def test_device_epilog_scales_conjugates_and_stores(dtype):
    rng = np.random.default_rng(SEED)
    fn = COMPLEX_FNS[0] if dtype.startswith("complex") else REAL_FNS[0]
    buffer, logical, offsets, w, s = _case(rng, dtype, "F")
    callback = make_callback(fn, "epilog", {"w": w, "s": s}, SHAPE, np.dtype(dtype), 1)
    kernel = _kernel(callback.expr, "epilog", dtype, LAYOUTS["F"], w)
    info = _info(kernel, w, s, scale=0.125, conj=True)
    values = _random(rng, SHAPE, dtype)
    run_on_host(kernel, buffer, offsets.ravel().copy(), info, values)
    want = (np.conj(values) * 0.125).astype(dtype)
    callback(want)
    assert np.linalg.norm(logical - want) / np.linalg.norm(want) < TOL[dtype]


@needs_gxx
@needs_nvrtc
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_device_prolog_leaves_zero_padding_zero(dtype):
    rng = np.random.default_rng(SEED)
    buffer, logical, offsets, w, s = _case(rng, dtype, "C")
    region = (3, 7, 3)  # the last two entries of the last axis are padding
    fn = lambda v, w, s, k: v * w + s + k  # noqa: E731 - nonzero on zeros
    callback = make_callback(fn, "prolog", {"w": w, "s": s}, region, np.dtype(dtype), 1)
    kernel = _kernel(callback.expr, "prolog", dtype, LAYOUTS["C"], w, limits=region)
    assert kernel.guard
    info = _info(kernel, w, s)
    got = np.full(SHAPE, 9, dtype)
    run_on_host(kernel, buffer, offsets.ravel().copy(), info, got)
    want = np.zeros(SHAPE, dtype)
    want[:, :, :3] = logical[:, :, :3]
    callback(want[:, :, :3])
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < TOL[dtype]
    assert not got[:, :, 3:].any()


# -- 3. the engine's attach sequence and results against the host cuFFT emulation ------------------


@pytest.fixture
def emu(monkeypatch):
    from nvmathpy.fft import _cuda_engine

    plan_cache().clear()
    for name, fresh in (("_TAKEN", ["default"]), ("_WARNED", [False]), ("LTO_REFUSALS", {})):
        monkeypatch.setattr(_cuda_engine, name, fresh)  # process-wide memory of cuFFT's refusals
    emulator = install(monkeypatch.setattr, monkeypatch.setitem)
    yield emulator
    plan_cache().clear()


def operand(rng, shape, layout, dtype):
    make = lambda s: _random(rng, s, dtype)  # noqa: E731
    if layout == "F":
        return make(shape[::-1]).T
    if layout == "step":
        return make(shape[:-1] + (2 * shape[-1],))[..., ::2]
    if layout == "crop":
        return make(shape[:-1] + (shape[-1] + 3,))[..., : shape[-1]]
    if layout == "neg":
        return make(shape)[::-1]
    return make(shape)


def c2c_case(shape, layout, axes):
    """A complex128 operand of ``layout``, a window ``w`` along the last transformed axis and a
    filter ``f`` of the full shape (fresh random data from one seed)."""
    rng = np.random.default_rng(SEED)
    x = operand(rng, shape, layout, np.complex128)
    k_axis = (axes or tuple(range(len(shape))))[-1]
    w = _random(rng, [n if a == k_axis else 1 for a, n in enumerate(shape)], np.complex128)
    return x, {"w": w, "f": rng.standard_normal(shape)}


def rel_err(x, ref):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape and np.isfinite(x).all()
    return np.linalg.norm((x - ref).ravel()) / np.linalg.norm(ref.ravel())


def check_every_candidate(x, tol, direction=None, **kwargs):
    """Each candidate of the CUDA plan (emulated) against the CPU plan with the same callbacks."""
    want = FFT(x, execution="cpu", **kwargs).plan().execute(direction)
    plan = FFT(host(x), **kwargs)
    engine, problem = plan._engine, plan.problem
    candidates = engine.candidates(problem)
    assert candidates
    for candidate in candidates:
        prepared = engine.prepare(problem, candidate)
        try:
            call = prepared.forward if (direction or plan._layout.natural_direction) == "forward" else prepared.inverse
            got = call(host(x.copy()) if kwargs.get("inplace") else host(x))
            assert rel_err(got, want) < tol, candidate
        finally:
            prepared.free()
    return plan


PROLOG = lambda v, w, k: v * w + 0.5 * k  # noqa: E731
EPILOG = lambda v, f, k: np.where(k < 3, v * f, v / (k + 1.0))  # noqa: E731


@pytest.mark.parametrize("layout", ["C", "F", "step", "crop", "neg"])
@pytest.mark.parametrize(("shape", "axes"), [((17,), (0,)), ((6, 7), (0,)), ((6, 7), (1, 0)), ((4, 5, 3), (0, 2)),
                                             ((2, 3, 4, 5), None), ((3, 2, 5, 2, 3), (4, 0, 2, 1))])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_c2c_callbacks_every_candidate(emu, shape, axes, layout, direction):
    x, inputs = c2c_case(shape, layout, axes)
    before = x.copy()
    check_every_candidate(x, 1e-12, direction, axes=axes, prolog=PROLOG, epilog=EPILOG, callback_inputs=inputs)
    assert np.array_equal(x, before)


@pytest.mark.parametrize("layout", ["C", "F", "step"])
@pytest.mark.parametrize(("shape", "axes", "s"), [((16,), (0,), None), ((5, 12), (1,), None), ((6, 9), (0,), (11,)),
                                                  ((3, 4, 10), (0, 2), (3, 7)), ((2, 3, 2, 6), None, None)])
def test_r2c_and_c2r_callbacks_every_candidate(emu, shape, axes, s, layout):
    rng = np.random.default_rng(SEED)
    x = operand(rng, shape, layout, np.float64)
    prolog = lambda v, g: v * g - 0.25  # noqa: E731
    epilog = lambda v, k: v * (k + 1.0)  # noqa: E731
    check_every_candidate(x, 1e-12, axes=axes, s=s, prolog=prolog, epilog=epilog, callback_inputs={"g": 1.5})
    spectrum = np.fft.rfftn(x, axes=axes, s=s)
    c2r_s = s if s is not None else [shape[a] for a in (axes or range(len(shape)))]
    check_every_candidate(spectrum, 1e-12, axes=axes, s=c2r_s, kind="c2r", prolog=lambda v, k: v * (k < 4),
                          epilog=lambda v, b: np.exp(v) - b, callback_inputs={"b": 0.5})


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_hermitian_directions_and_norms(emu, norm):
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((4, 14))
    z = np.fft.rfft(rng.standard_normal((4, 14)))
    gain = _random(rng, 8, np.complex128)
    cb = dict(prolog=lambda v, k: v * (k + 1.0), epilog=lambda v, k: v + k, norm=norm)
    check_every_candidate(x, 1e-12, "inverse", axes=[1], **cb)  # ihfft: conj(rfft) scaled, then the epilog
    check_every_candidate(z, 1e-12, "forward", axes=[1], kind="c2r", s=[14],  # hfft: the prolog sees z itself
                          prolog=lambda v, g: v * g, epilog=lambda v: v * 2.0, callback_inputs={"g": gain}, norm=norm)


@pytest.mark.parametrize("n", [5, 13, 20])
def test_prolog_before_zero_padding_after_cropping(emu, n):
    rng = np.random.default_rng(SEED)
    x = _random(rng, (3, 9), np.complex64)
    check_every_candidate(x, 3e-6, axes=[1], s=[n], prolog=lambda v, k: v + 1.0 + k)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_single_precision(emu, dtype):
    rng = np.random.default_rng(SEED)
    x = _random(rng, (6, 33), dtype)
    check_every_candidate(x, 3e-6, axes=[1], prolog=lambda v: np.tanh(v) if np.dtype(dtype).kind == "f" else v * 2,
                          epilog=lambda v, k: v * np.sqrt(k + 1.0))


def check_inplace_epilog():
    """An in-place plan with an epilog returns its operand, transformed and the epilog applied."""
    rng = np.random.default_rng(SEED)
    x = _random(rng, (5, 8), np.complex128)
    want = np.fft.fft(x, axis=0) * 3 + 1
    y = host(x.copy())
    plan = FFT(y, axes=[0], inplace=True, epilog=lambda v: v * 3 + 1)
    assert plan.plan().execute() is y
    assert rel_err(y, want) < 1e-12


def test_inplace_epilog(emu):
    check_inplace_epilog()


def test_attach_sequence(emu):
    """Callbacks are attached before planning (the emulator asserts it), with the callback type of
    each plan's data types, on the first/last plan only, and each direction gets plans of its own."""
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((2, 3, 4, 5, 6))  # r2c over all five axes: two plans
    plan = FFT(host(x), prolog=lambda v: v * 2, epilog=lambda v, k: v * k)
    engine = plan._engine
    for candidate in engine.candidates(plan.problem):
        prepared = engine.prepare(plan.problem, candidate)
        try:
            handles = prepared.handles
            steps = len(engine_schedules(plan.problem)[candidate.params["layout"]][0].steps)
            assert steps >= 2 and len(handles) == 2 * steps and len(emu.plans) == 2 * steps  # each direction
            assert [emu.plans[h].kind for h in handles] == (["r2c"] + ["c2c"] * (steps - 1)) * 2
            # LD_REAL_DOUBLE on the r2c plan, ST_COMPLEX_DOUBLE on the last c2c one, nothing between
            one = [[3]] + [[]] * (steps - 2) + [[5]]
            assert [sorted(emu.plans[h].callbacks) for h in handles] == one * 2
            # the two directions' structs differ (the epilog's scale), the LTO-IR is shared
            forward, inverse = (emu.plans[h].callbacks[5] for h in (handles[steps - 1], handles[-1]))
            assert forward[0] == inverse[0] and forward[1] != inverse[1]
            with pytest.raises(AssertionError, match="before the plan is made"):
                emu.set_jit_callback(handles[0], None, b"x", 1, 5, [forward[1]])
            assert prepared.callback_path == "lto" and not emu.applied
        finally:
            prepared.free()
    assert not emu.plans


def test_refusals_are_clear(emu):
    rng = np.random.default_rng(SEED)
    with pytest.raises(InvalidOptionError, match="half_precision"):
        FFT(host(_random(rng, 16, np.complex64)), prolog=lambda v: v, options=FFTOptions(half_precision=True))
    with pytest.raises(InvalidOptionError, match="transform length > 1"):
        FFT(host(_random(rng, (4, 1), np.complex128)), axes=[1], epilog=lambda v: v * 2).plan()


def test_device_callback_inputs(emu):
    """Callback inputs given as CUDA arrays (here the CuPy stand-in) are taken like host ones."""
    rng = np.random.default_rng(SEED)
    x = _random(rng, (4, 10), np.complex128)
    w = _random(rng, 10, np.complex128)
    got = FFT(host(x), axes=[1], prolog=lambda v, w: v * w, callback_inputs={"w": host(w)}).plan().execute()
    assert rel_err(got, np.fft.fft(x * w, axis=1)) < 1e-12


def test_host_operands_with_cuda_execution(emu):
    rng = np.random.default_rng(SEED)
    x = operand(rng, (7, 10), "F", np.float64)
    before = x.copy()
    w = rng.standard_normal(10)
    got = FFT(x, axes=[1], execution="cuda", prolog=lambda v, w: v * w, epilog=lambda v, k: v * (k + 2.0),
              callback_inputs={"w": w}).plan().execute()
    assert type(got) is np.ndarray
    assert rel_err(got, np.fft.rfft(x * w, axis=1) * (np.arange(6) + 2.0)) < 1e-12
    assert np.array_equal(x, before)


def test_a_copy_free_strategy_keeps_its_callbacks(emu):
    """The operand is read where it lies (no staging copy) when the layout allows the callbacks."""
    rng = np.random.default_rng(SEED)
    x = _random(rng, (6, 16), np.complex128)[:, ::2]
    plan = FFT(host(x), axes=[0], prolog=lambda v, k: v * k, epilog=lambda v: v * 2)
    names = [c.params["layout"] for c in plan._engine.candidates(plan.problem)]
    assert names[0] == "strided"
    assert rel_err(plan.plan().execute(), np.fft.fft(x * np.arange(6)[:, None], axis=0) * 2) < 1e-12


# -- 4. the elementwise fallback: cuFFT refusing plans with LTO callbacks ------------------------------


@needs_nvrtc
def test_the_callback_has_cuffts_default_cpp_name():
    """The device function is C++ (mangled) with cuFFT's default name for its callback type - the
    name nvmath-python's callbacks carry (``_Z<len>cufftJITCallback<Load|Store><type>Pvy...S_S_``) -
    so that cuFFT, given no symbol name, links it; the PTX shows the linker name."""
    import re

    from nvmathpy.kernels.kernel_cache import compile_kernel

    mangled_element = {"complex64": "6float2", "complex128": "7double2", "float32": "f", "float64": "d"}
    snippets = {"complex64": "Complex", "complex128": "DoubleComplex", "float32": "Real", "float64": "DoubleReal"}
    for dtype in DTYPES:
        for role, phase in (("prolog", "Load"), ("epilog", "Store")):
            expr = _trace(lambda v, k: v * k, ["k"])
            kernel = callback_kernel(expr, role, dtype, _layout(expr, 2))
            name = f"cufftJITCallback{phase}{snippets[dtype]}"
            assert kernel.symbol == name and f'extern "C" __device__ {kernel.symbol}' not in kernel.source
            ptx = compile_kernel(kernel.source, "sm_90", output="ptx", options=_options()).code
            text = ptx.decode() if isinstance(ptx, bytes) else ptx
            insert = "" if phase == "Load" else mangled_element[dtype]
            assert f"_Z{len(name)}{name}Pvy{insert}S_S_" in set(re.findall(r"_Z\w+", text)), text[:2000]


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("role", ["prolog", "epilog"])
def test_fallback_kernel_compiles_to_a_cubin(arch, dtype, role, kcache, monkeypatch):
    from nvmathpy.kernels import fft_callbacks, kernel_cache

    monkeypatch.setattr(kernel_cache, "_DEFAULT", kcache)
    expr = _trace(lambda v, w, s, k: v * w + s * k, ["w", "s", "k"])
    kernel = callback_kernel(expr, role, dtype, callback_layout(
        (7, 1, 5), (5, 99, 1), 2, limits=(7, 1, 4) if role == "prolog" else None, inputs={"w": (0, 0, 1)}))
    compiled = fft_callbacks.compile_apply(fft_callbacks.apply_source(kernel), arch)
    assert compiled.kind == "cubin" and compiled.code[:4] == b"\x7fELF"
    assert compiled.resources[fft_callbacks.APPLY_NAME].spill_stores == 0, compiled.log


@pytest.fixture
def refusing(emu):
    """The emulated cuFFT refuses every plan with LTO callbacks, as the real one did on the first
    GPU run; the fallback kernels run compiled by g++ under the CUDA emulation header."""
    emu.refuse_callbacks = "CUFFT_INTERNAL_ERROR"
    return emu


def check_fallback(emulator, x, tol, direction=None, **kwargs):
    """Each candidate with the elementwise fallback, against the CPU plan with the same callbacks;
    no plan with callbacks survives, and the fallback kernels ran."""
    want = FFT(x, execution="cpu", **kwargs).plan().execute(direction)
    plan = FFT(host(x), **kwargs)
    engine, problem = plan._engine, plan.problem
    for candidate in engine.candidates(problem):
        emulator.applied.clear()
        prepared = engine.prepare(problem, candidate)
        try:
            assert prepared.callback_path == "elementwise"
            assert all(not emulator.plans[h].callbacks for h in prepared.handles)
            call = prepared.forward if (direction or plan._layout.natural_direction) == "forward" else prepared.inverse
            got = call(host(x.copy()) if kwargs.get("inplace") else host(x))
            assert rel_err(got, want) < tol, candidate
            roles = {role for role, _, _ in emulator.applied}
            assert roles == {r for r in ("prolog", "epilog") if r in kwargs}, roles
        finally:
            prepared.free()
    assert not emulator.plans  # the refused plans were destroyed too


@pytest.mark.parametrize(("layout", "shape", "axes"), [("C", (6, 7), (1,)), ("F", (4, 5, 3), (0, 2)),
                                                       ("step", (6, 7), (1, 0)), ("crop", (3, 2, 5), None),
                                                       ("neg", (5, 6), (0,))])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_refused_callbacks_fall_back_c2c(refusing, layout, shape, axes, direction):
    x, inputs = c2c_case(shape, layout, axes)
    before = x.copy()
    check_fallback(refusing, x, 1e-12, direction, axes=axes, prolog=PROLOG, epilog=EPILOG, callback_inputs=inputs)
    assert np.array_equal(x, before)  # the prolog kernel never writes into the operand


def test_refused_callbacks_fall_back_r2c_c2r_hermitian_and_padding(refusing):
    rng = np.random.default_rng(SEED)
    x = operand(rng, (5, 12), "F", np.float64)
    check_fallback(refusing, x, 1e-12, axes=[1], s=[15], prolog=lambda v, g: v * g - 0.25,
                   epilog=lambda v, k: v * (k + 1.0), callback_inputs={"g": 1.5})
    spectrum = np.fft.rfft(rng.standard_normal((4, 14)))
    check_fallback(refusing, spectrum, 1e-12, "forward", axes=[1], kind="c2r", s=[14],  # hfft
                   prolog=lambda v, k: v * (k + 1.0), epilog=lambda v: v * 2.0, norm="ortho")
    check_fallback(refusing, rng.standard_normal((4, 14)), 1e-12, "inverse", axes=[1],  # ihfft
                   prolog=lambda v: v * 3.0, epilog=lambda v, k: v + k, norm="forward")
    check_fallback(refusing, _random(rng, (3, 9), np.complex64), 3e-6, axes=[1], s=[13],
                   prolog=lambda v, k: v + 1.0 + k)  # zero padding stays zero


def test_refused_callbacks_fall_back_in_place(refusing):
    check_inplace_epilog()
    assert refusing.applied


def test_refusal_is_logged_once_and_never_raises(refusing, caplog):
    import logging

    from nvmathpy.fft import _cuda_engine

    rng = np.random.default_rng(SEED)
    with caplog.at_level(logging.DEBUG, logger="nvmathpy"):
        for n in (16, 17):
            x = _random(rng, (3, n), np.complex128)
            got = FFT(host(x), axes=[1], epilog=lambda v: v * 2).plan().execute()
            assert rel_err(got, np.fft.fft(x, axis=1) * 2) < 1e-12
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "LTO callbacks" in r.message]
    assert len(warnings) == 1 and "CUFFT_INTERNAL_ERROR" in warnings[0].getMessage()
    assert sorted(_cuda_engine.LTO_REFUSALS) == ["default: CUFFT_INTERNAL_ERROR", "named: CUFFT_INTERNAL_ERROR"]


def test_the_other_naming_is_tried_and_remembered(emu):
    """cuFFT refusing callbacks attached without a symbol name: the named way is tried next, taken,
    and tried first by later plans (no second refused attempt)."""
    emu.refuse_callbacks, emu.refuse_naming = "CUFFT_INTERNAL_ERROR", "default"
    rng = np.random.default_rng(SEED)
    for n in (16, 17):
        x = _random(rng, (3, n), np.complex128)
        plan = FFT(host(x), axes=[1], prolog=lambda v, k: v * k, epilog=lambda v: v * 2)
        engine = plan._engine
        candidate = engine.candidates(plan.problem)[0]
        prepared = engine.prepare(plan.problem, candidate)
        try:
            assert (prepared.callback_path, prepared.callback_naming) == ("lto", "named")
            assert all(emu.plans[h].naming == "named" for h in prepared.handles)
            got = prepared.forward(host(x))
            assert rel_err(got, np.fft.fft(x * np.arange(n), axis=1) * 2) < 1e-12
        finally:
            prepared.free()
        assert engine._lto_refused == ({"default"} if n == 16 else set())
    assert not emu.applied


def test_forced_elementwise_path_never_attaches(emu, monkeypatch):
    from nvmathpy.fft import _cuda_engine

    monkeypatch.setattr(_cuda_engine, "CALLBACK_PATH", "elementwise")
    monkeypatch.setattr(emu, "set_jit_callback", lambda *a: pytest.fail("an LTO callback was attached"))
    rng = np.random.default_rng(SEED)
    x = _random(rng, (4, 10), np.complex128)
    w = _random(rng, 10, np.complex128)
    check_fallback(emu, x, 1e-12, axes=[1], prolog=lambda v, w: v * w, epilog=lambda v, k: v * k,
                   callback_inputs={"w": w})


# -- 5. the layout baked into the source: constant divisors, 32- or 64-bit index arithmetic --------


def _body(kernel):
    """The device function's body (the text between its braces)."""
    start = kernel.source.index(f"{kernel.symbol}(")
    return kernel.source[kernel.source.index("{", start) + 1:kernel.source.index("\n}\n", start)]


def _index_lines(text):
    """The lines of integer index arithmetic (declarations of the index type)."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith(("const unsigned int",
                                                                                    "const unsigned long long"))]


def _assert_constant_divisors(text):
    """Every integer / and % of the index arithmetic divides by a literal; nothing is read from
    callerInfo for it."""
    import re

    lines = _index_lines(text)
    for line in lines:
        assert "info->" not in line, line
        for operand in re.findall(r"[/%]\s*([^\s)]+)", line):
            assert re.fullmatch(r"\d+u(ll)?", operand), line
    return lines


WINDOW = _trace(lambda v, w: v * w, ["w"])


@pytest.mark.parametrize(("shape", "strides", "inputs", "want"), [
    ((1024, 4096), (4096, 1), (0, 1), ["const unsigned int i1 = (o & 4095u);"]),  # dense batch, window
    ((1024, 2049), (2049, 1), (0, 1), ["const unsigned int i1 = (o % 2049u);"]),  # r2c output, filter
    ((1024, 4096), (4100, 1), (0, 1), ["const unsigned int i1 = (o % 4100u);"]),  # cropped rows
    ((1024, 4096), (1, 1024), (0, 1), ["const unsigned int i0 = (o >> 10);"]),  # transposed
    ((6, 1009), (1009, 1), (1009, 1), ["const unsigned int i0 = (o / 1009u);",  # a full-size input, prime rows
                                       "const unsigned int i1 = (o % 1009u);"]),
    ((1024, 4096), (4096, 1), (1, 0), ["const unsigned int i0 = (o >> 12);"]),  # a per-row input
    ((7, 5, 3), (53, 7, 1), (0, 1, 0), ["const unsigned int i1 = ((o % 53u) / 7u);"]),  # strides that do not divide
    ((7, 5, 3), (53, 7, 1), (0, 0, 1), ["const unsigned int i2 = ((o % 53u) % 7u);"]),
])
def test_the_offset_is_peeled_by_constants(shape, strides, inputs, want):
    for role, dtype in (("prolog", "complex64"), ("epilog", "float32")):
        kernel = callback_kernel(WINDOW, role, dtype, callback_layout(shape, strides, len(shape) - 1,
                                                                      inputs={"w": inputs}))
        body = _body(kernel)
        assert _assert_constant_divisors(body) == ["const unsigned int o = static_cast<unsigned int>(offset);", *want]
        assert "long long" not in body.replace("unsigned long long offset", "")


def test_only_the_indices_needed_are_computed():
    layout = callback_layout((4, 6, 10), (60, 10, 1), 2, limits=(4, 5, 10))  # the middle axis zero-padded
    scalar_only = callback_kernel(_trace(lambda v, s: v * s, ["s"]), "epilog", "complex128",
                                  callback_layout((4, 6, 10), (60, 10, 1), 2))
    assert _index_lines(_body(scalar_only)) == []  # nothing to peel: no index arithmetic at all
    k_only = _body(callback_kernel(_trace(lambda v, k: v * k, ["k"]), "epilog", "float64",
                                   callback_layout((4, 6, 10), (60, 10, 1), 2)))
    assert _assert_constant_divisors(k_only)[1:] == ["const unsigned int i2 = (o % 10u);",
                                                     "const unsigned int k = i2;"]
    guarded = _body(callback_kernel(_trace(lambda v: v + 1.0, []), "prolog", "float64", layout))
    assert _assert_constant_divisors(guarded)[1:] == ["const unsigned int i1 = ((o % 60u) / 10u);"]
    assert "if (i1 >= 5u) return" in guarded
    # k along an axis of extent 1 is 0; unpadded limits check nothing
    assert "const unsigned int k = 0u;" in _body(callback_kernel(
        _trace(lambda v, k: v * k, ["k"]), "epilog", "float32", callback_layout((5, 1), (1, 1), 1)))
    assert not callback_kernel(WINDOW, "prolog", "float32",
                               callback_layout((5, 3), (3, 1), 1, limits=(5, 3), inputs={"w": (0, 1)})).guard


def test_index_type_choice():
    assert INDEX32_LIMIT == 2**31
    assert [index_type(n) for n in (0, 1, 2**31 - 1, 2**31, 2**32, 2**40)] == ["unsigned int"] * 3 + [
        "unsigned long long"] * 3
    with pytest.raises(ValueError):
        index_type(-1)
    # what counts: the buffer's span (gaps included), its element count, the inputs' reach
    assert callback_layout((2**16, 2**15 - 1), (2**15 - 1, 1), 1).index_type == "unsigned int"
    assert callback_layout((2**16, 2**15), (2**15, 1), 1).largest == 2**31
    assert callback_layout((2**16, 2**15), (2**15, 1), 1).index_type == "unsigned long long"
    padded_rows = callback_layout((2**15, 2**15), (2**16, 1), 1)  # half the span is gaps
    assert padded_rows.count == 2**30 and padded_rows.span == 2**31 - 2**15 and padded_rows.index_type == "unsigned int"
    assert callback_layout((2**15 + 1, 2**15), (2**16, 1), 1).index_type == "unsigned long long"
    transposed_input = callback_layout((2**15, 2**15), (2**15, 1), 1, inputs={"w": (1, 2**16 + 2)})
    assert transposed_input.span < 2**31 <= transposed_input.largest
    assert transposed_input.index_type == "unsigned long long"


def test_sixty_four_bit_layouts_use_sixty_four_bit_arithmetic():
    layout = callback_layout((3, 2**30 - 3), (2**30 + 5, 1), 1, inputs={"w": (1, 0)})
    kernel = callback_kernel(_trace(lambda v, w, k: v * w + k, ["w", "k"]), "prolog", "complex64", layout)
    body = _body(kernel)
    assert _assert_constant_divisors(body) == [
        "const unsigned long long o = offset;", "const unsigned long long i0 = (o / 1073741829ull);",
        "const unsigned long long i1 = (o % 1073741829ull);", "const unsigned long long k = i1;"]
    assert "unsigned int" not in body
    assert "i < 3221225463ull" in apply_source(kernel)


def test_the_fallback_kernel_bakes_the_layout_in():
    dense = apply_source(callback_kernel(WINDOW, "epilog", "complex64",
                                         callback_layout((1024, 4096), (4096, 1), 1, inputs={"w": (0, 1)})))
    loop = dense[dense.index('extern "C" __global__'):]
    assert "i < 4194304u" in loop and "const unsigned long long offset = i;" in loop and "%" not in loop
    cropped = apply_source(callback_kernel(WINDOW, "prolog", "complex64",
                                           callback_layout((1024, 4095), (4096, 1), 1, inputs={"w": (0, 1)})))
    loop = cropped[cropped.index('extern "C" __global__'):]
    assert _assert_constant_divisors(loop) == [
        "const unsigned int step = static_cast<unsigned int>(gridDim.x) * blockDim.x;",
        "const unsigned int j0 = (i / 4095u);", "const unsigned int j1 = (i % 4095u);",
        "const unsigned long long offset = j0 * 4096u + j1;"]


def test_one_source_per_layout_compiled_once(emu, tmp_path, monkeypatch):
    """Plans of one layout share the generated source (other input arrays: other pointers in
    callerInfo) and compile it once; so do layouts differing only where the callback does not look
    (the number of rows, for a window along the rows); another row length is another source."""
    from nvmathpy.kernels import kernel_cache

    cache = KernelCache(tmp_path / "kernels")
    monkeypatch.setattr(kernel_cache, "_DEFAULT", cache)
    rng = np.random.default_rng(SEED)
    sources = []
    for shape in ((5, 12), (5, 12), (4, 12), (5, 10)):
        x = _random(rng, shape, np.complex64)
        w = _random(rng, shape[1], np.complex64)
        plan = FFT(host(x), axes=[1], prolog=lambda v, w: v * w, callback_inputs={"w": w})
        assert rel_err(plan.plan().execute(), np.fft.fft(x * w, axis=1)) < 3e-6
        sources.append({kernel.source for kernel in emu.kernels.values()})
        plan.free()
    assert sources[0] == sources[1] == sources[2] and len(sources[3]) == 2
    assert cache.compiles == 2


# numerics of 32- and 64-bit kernels near the limit, without allocating the buffers: each element's
# data pointer is passed shifted back by its offset, so that data[offset] is the element itself (the
# 64-bit case reaches past 2**32, where 32-bit arithmetic would wrap)
_SHIFTED = r"""
__global__ void nvm_cb_shifted(const unsigned long long* data, const unsigned long long* offsets, long long n,
                               void* info, {element}* values) {{
  for (long long i = 0; i < n; ++i) {call};
}}
"""


@needs_gxx
@needs_nvrtc
@pytest.mark.parametrize(("extents", "strides", "bits"), [((2, 2**30 - 3), (2**30 - 1, 1), 32),
                                                          ((5, 2**30 - 3), (2**30 + 5, 1), 64)])
@pytest.mark.parametrize("role", ["prolog", "epilog"])
def test_large_offsets_emulated(extents, strides, bits, role):
    rng = np.random.default_rng(SEED)
    dtype = "complex64"
    w = _random(rng, (extents[0], 1), dtype)
    layout = callback_layout(extents, strides, 1, inputs={"w": (1, 0)})
    assert layout.index_type == ("unsigned int" if bits == 32 else "unsigned long long")
    fn = lambda v, w, k: v * w + k * 1e-9  # noqa: E731
    kernel = callback_kernel(_trace(fn, ["w", "k"]), role, dtype, layout)
    columns = np.array([0, 1, 7919, extents[1] - 2, extents[1] - 1])
    rows, cols = (g.ravel() for g in np.meshgrid(np.arange(extents[0]), columns, indexing="ij"))
    offsets = (rows * strides[0] + cols).astype(np.uint64)
    values = _random(rng, len(offsets), dtype)
    store = np.zeros_like(values)
    target = values if role == "prolog" else store
    size = target.itemsize
    data = np.array([(target.ctypes.data + (i - int(off)) * size) % 2**64 for i, off in enumerate(offsets)], np.uint64)
    element = CALLBACK_DTYPES[dtype][0]
    got = np.zeros_like(values)
    call = (f"values[i] = {kernel.symbol}(reinterpret_cast<void*>(data[i]), offsets[i], info, nullptr)"
            if role == "prolog" else
            f"{kernel.symbol}(reinterpret_cast<void*>(data[i]), offsets[i], values[i], info, nullptr)")
    source = kernel.source + _SHIFTED.format(element=element, call=call)
    lib = ctypes.CDLL(str(compile_emulated(source, "nvm_cb_shifted")))
    lib.nvm_emu_entry.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
    info = caller_info(kernel, arrays={"w": w.ctypes.data}, scale=1.0)
    inout = got if role == "prolog" else values
    args = [ctypes.c_void_p(data.ctypes.data), ctypes.c_void_p(offsets.ctypes.data), ctypes.c_longlong(len(offsets)),
            ctypes.c_void_p(ctypes.addressof(info)), ctypes.c_void_p(inout.ctypes.data)]
    argv = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
    lib.nvm_emu_entry(1, 1, 1, 1, 1, 1, argv)
    result = got if role == "prolog" else store
    want = values * w[rows, 0] + cols * 1e-9
    assert np.abs(result - want).max() < 1e-6 * np.abs(want).max()


@needs_gxx
@needs_nvrtc
@pytest.mark.parametrize("dtype", ["complex64", "float64"])
@pytest.mark.parametrize("layout", ["odd", "Fodd", "padded"])
def test_fallback_kernel_on_gapped_layouts_emulated(dtype, layout):
    """The fallback kernel's constant unravelling visits every element of a buffer with gaps once,
    and leaves the gaps alone."""
    from nvmathpy.kernels.fft_callbacks import APPLY_NAME

    rng = np.random.default_rng(SEED)
    buffer, logical, offsets, w, s = _case(rng, dtype, layout)
    fn = lambda v, w, s, k: v * w + s * k  # noqa: E731
    callback = make_callback(fn, "epilog", {"w": w, "s": s}, SHAPE, np.dtype(dtype), 1)
    kernel = _kernel(callback.expr, "epilog", dtype, LAYOUTS[layout], w)
    source = apply_source(kernel)
    _assert_constant_divisors(source[source.index(APPLY_NAME):])
    info = _info(kernel, w, s, scale=0.5)
    gaps = np.ones(len(buffer), bool)
    gaps[offsets.ravel().astype(np.int64)] = False
    buffer[gaps] = 7
    want = (logical * 0.5).astype(dtype)
    callback(want)
    lib = ctypes.CDLL(str(compile_emulated(source, APPLY_NAME)))
    lib.nvm_emu_entry.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
    args = [ctypes.c_void_p(buffer.ctypes.data), ctypes.c_void_p(buffer.ctypes.data),
            ctypes.c_void_p(ctypes.addressof(info))]
    argv = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
    lib.nvm_emu_entry(2, 1, 1, 4, 1, 1, argv)
    assert np.linalg.norm(logical - want) / np.linalg.norm(want) < TOL[dtype]
    assert (buffer[gaps] == 7).all()


@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize(("layout", "shape", "axes", "s"), [("C", (5, 13), (1,), None), ("F", (7, 11), (0,), None),
                                                            ("step", (3, 17), (1,), (19,)),
                                                            ("crop", (4, 3, 7), (0, 2), (5, 7))])
def test_single_precision_fallback_odd_sizes(refusing, dtype, layout, shape, axes, s):
    """The generated callbacks themselves (the fallback runs them, compiled by g++) on prime and odd
    lengths, strided, transposed, cropped and zero-padded operands, c2c / r2c then c2r."""
    rng = np.random.default_rng(SEED)
    x = operand(rng, shape, layout, dtype)
    k_axis = axes[-1]
    w = _random(rng, [n if a == k_axis else 1 for a, n in enumerate(shape)], dtype)
    prolog = (lambda v, w, k: v * w + 0.5 * k) if s is None else (lambda v, k: v + 1.0 + k)
    inputs = {"w": w} if s is None else {}
    check_fallback(refusing, x, 3e-5, axes=axes, s=s, prolog=prolog, epilog=lambda v, k: v * (k + 1.0),
                   callback_inputs=inputs)
    if np.dtype(dtype).kind == "f":
        spectrum = np.fft.rfftn(x, axes=axes, s=s).astype(np.complex64)
        lengths = s if s is not None else [shape[a] for a in axes]
        check_fallback(refusing, spectrum, 3e-5, axes=axes, s=lengths, kind="c2r", prolog=lambda v, k: v * (k < 4),
                       epilog=lambda v, b: v * v - b, callback_inputs={"b": 0.5})


@needs_nvrtc
@pytest.mark.parametrize(("shape", "strides"), [((1024, 4096), (4096, 1)), ((1024, 2049), (2049, 1)),
                                                ((7, 5, 3), (53, 7, 1)), ((3, 2**30 - 3), (2**30 + 5, 1))])
def test_no_division_instruction_reaches_the_ptx(shape, strides):
    """NVRTC turns every division and remainder by the baked constants into multiplies and shifts
    (32- and 64-bit): the callback's PTX has no div/rem instruction, and a power-of-2 window is one
    mask; the fallback kernel's neither."""
    import re

    from nvmathpy.kernels.fft_callbacks import compile_apply
    from nvmathpy.kernels.kernel_cache import compile_kernel

    def instructions(ptx):
        text = ptx.decode() if isinstance(ptx, bytes) else ptx
        return re.findall(r"^\s*((?:div|rem)\.\S+)", text, re.M)

    inputs = {"w": (0,) * (len(shape) - 1) + (1,)}
    for role, dtype in (("prolog", "complex64"), ("epilog", "float64")):
        kernel = callback_kernel(WINDOW, role, dtype, callback_layout(shape, strides, len(shape) - 1, inputs=inputs))
        ptx = compile_kernel(kernel.source, "sm_90", output="ptx", options=_options()).code
        assert instructions(ptx) == [], kernel.source
        cubin = compile_apply(apply_source(kernel), "sm_90")
        assert cubin.kind == "cubin"
        apply_ptx = compile_kernel(apply_source(kernel), "sm_90", output="ptx", options=["-default-device",
                                                                                        *_options()[2:]]).code
        assert instructions(apply_ptx) == [], apply_source(kernel)
