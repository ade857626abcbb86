"""Compiled CPU epilogues: generated C (nvmathpy.kernels.emit_c) built by the system compiler
(nvmathpy.kernels.cpu_jit), against float64 references for every built-in epilogue, input
patterns, custom expressions, NumPy's NaN rules, odd layouts of the result, the disk cache
(reuse, a corrupt entry) and the fallback when no compiler is usable."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
from numerics import rand, up
from test_matmul_numerics import check, epilogue_inputs

import nvmathpy.linalg as la
from nvmathpy.errors import MissingDependencyError
from nvmathpy.kernels import cpu_jit
from nvmathpy.kernels.emit_c import C_PRELUDE, C_VECTOR_EXP
from nvmathpy.linalg.gemm.cpu import _engine as _matmul_cpu
from nvmathpy.linalg.gemm.cpu._epilogue_c import input_pattern
from nvmathpy.linalg.epilogues import DEFINITIONS

pytestmark = pytest.mark.skipif(not cpu_jit.available(), reason="no C compiler with libmvec here")


def c_candidates(mm):
    return [c for c in mm._engine.candidates(mm.problem) if c.params["evaluator"] == "c"]


def run_each(mm, candidates):
    for cand in candidates:
        mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
        yield cand, mm.execute()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("epilogue", sorted(name for name, d in DEFINITIONS.items() if d.steps))
def test_every_builtin_epilogue_compiled(dtype, epilogue):
    rng = np.random.default_rng(21)
    a, b = rand(rng, (67, 31), dtype), np.asfortranarray(rand(rng, (31, 53), dtype))
    inputs = epilogue_inputs(rng, epilogue, (67, 53), dtype)
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs, execution={"name": "cpu", "num_threads": 2}) as mm:
        candidates = c_candidates(mm)
        assert {c.params["method"] for c in candidates} >= {"matmul", "gemm"}
        assert any(c.params.get("workers") == 2 for c in candidates)  # row bands on two threads
        for _, result in run_each(mm, candidates):
            check(result, a, b, epilogue=epilogue, inputs=inputs, dtype=dtype)


@pytest.mark.parametrize("shape", [(53,), (1, 53), (67, 1), (67, 53), ()])
def test_bias_patterns_with_alpha_beta_c(shape):
    """Biases of every broadcast pattern, beside alpha, beta and c, on every compiled candidate."""
    rng = np.random.default_rng(22)
    a, b, c = rand(rng, (67, 29), "float64"), rand(rng, (29, 53), "float64"), rand(rng, (67, 53), "float64")
    bias = rand(rng, shape, "float64") if shape else np.asarray(0.3)
    want = np.maximum(0.5 * (up(a) @ up(b)) - 2.0 * up(c) + up(bias), 0)
    with la.Matmul(a, b, c, alpha=0.5, beta=-2.0, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        for cand, result in run_each(mm, c_candidates(mm)):
            assert np.linalg.norm(result - want) / np.linalg.norm(want) < 1e-13, cand


def test_custom_expression_compiled():
    """Ops across the IR (erf, tanh, log, where, pow, abs, min/max, sigmoid) with row, column,
    matrix and scalar inputs and the element's indices."""
    from nvmathpy.linalg.epilogues import erf, sigmoid

    rng = np.random.default_rng(23)
    m, k, n = 45, 17, 38
    a, b = rand(rng, (m, k), "float64"), rand(rng, (k, n), "float64")
    r, col, mat = rand(rng, (m, 1), "float64"), rand(rng, (n,), "float64"), rand(rng, (m, n), "float64")

    def fn(x, r, cv, mat, s, row, col):
        y = np.where(x > r, np.tanh(x) * cv, erf(x) + np.log(np.abs(mat) + 1.0))
        return np.minimum(np.maximum(y, -0.5), 2.0) + sigmoid(x) ** 2 * s + 1e-3 * row - 1e-3 * col

    z = up(a) @ up(b)
    from scipy.special import erf as erf_ref

    y = np.where(z > r, np.tanh(z) * col, erf_ref(z) + np.log(np.abs(mat) + 1.0))
    rows, cols = np.indices((m, n))
    want = np.minimum(np.maximum(y, -0.5), 2.0) + (1 / (1 + np.exp(-z))) ** 2 * 0.7 + 1e-3 * rows - 1e-3 * cols
    with la.Matmul(a, b, epilogue=fn, epilogue_inputs={"r": r, "cv": col, "mat": mat, "s": 0.7}) as mm:
        candidates = c_candidates(mm)
        assert candidates
        for cand, result in run_each(mm, candidates):
            assert np.linalg.norm(result - want) / np.linalg.norm(want) < 1e-13, cand


def test_nan_rules_match_numpy():
    """relu of NaN stays NaN (numpy.maximum), as the NumPy evaluators give."""
    a = np.array([[np.nan, 1.0], [2.0, -3.0]])
    b = np.eye(2)
    bias = np.array([0.5, -0.25])
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        for _, result in run_each(mm, c_candidates(mm)):
            assert np.isnan(result[0, 0]) and np.isnan(result[0, 1])  # NaN times 0 is NaN
            assert result[1].tolist() == [2.5, 0.0]


def test_result_written_into_out():
    rng = np.random.default_rng(24)
    a, b, bias = rand(rng, (40, 21), "float32"), rand(rng, (21, 33), "float32"), rand(rng, (33,), "float32")
    out = np.full((40, 33), np.nan, np.float32)
    with la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as mm:
        for cand in c_candidates(mm):
            mm._install(mm._engine.prepare(mm.problem, cand), "heuristic")
            assert mm.execute(out=out) is out
            check(out, a, b, epilogue="gelu_bias", inputs={"bias": bias}, dtype="float32")
            out[:] = np.nan


def test_transposed_matrix_input():
    """A matrix input whose rows are not contiguous (a transposed view) is read correctly."""
    rng = np.random.default_rng(26)
    a, b = rand(rng, (41, 19), "float64"), rand(rng, (19, 37), "float64")
    res = rand(rng, (37, 41), "float64").T
    want = np.tanh(up(a) @ up(b)) + res
    with la.Matmul(a, b, epilogue=lambda x, res: np.tanh(x) + res, epilogue_inputs={"res": res}) as mm:
        for cand, result in run_each(mm, c_candidates(mm)):
            assert np.linalg.norm(result - want) / np.linalg.norm(want) < 1e-13, cand


def test_input_patterns():
    assert input_pattern((), 5, 7) == "scalar"
    assert input_pattern((1, 1), 5, 7) == "scalar"
    assert input_pattern((7,), 5, 7) == "col"
    assert input_pattern((1, 7), 5, 7) == "col"
    assert input_pattern((5, 1), 5, 7) == "row"
    assert input_pattern((5, 7), 5, 7) == "matrix"
    assert input_pattern((1, 5, 7), 5, 7) == "matrix"
    assert input_pattern((1,), 1, 1) == "scalar"


def test_disk_cache_reuse_and_corrupt_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path))
    source = "double nvm_probe_twice(double x) { return 2 * x + %r; }\n" % math.pi
    lib = cpu_jit.compile_c(source)
    files = list((tmp_path / "cpu_kernels").glob("*.so"))
    assert len(files) >= 1 and not list((tmp_path / "cpu_kernels").glob("*.c"))  # no leftovers
    assert cpu_jit.compile_c(source) is lib  # the in-process cache
    # a corrupt entry on disk (another process's) is rebuilt, not loaded
    key = cpu_jit._key(source + "\n", cpu_jit._compiler())
    (tmp_path / "cpu_kernels" / f"{key}.so").write_bytes(b"not a library")
    rebuilt = cpu_jit.compile_c(source + "\n")
    rebuilt.nvm_probe_twice.restype, rebuilt.nvm_probe_twice.argtypes = ctypes.c_double, [ctypes.c_double]
    assert rebuilt.nvm_probe_twice(1.0) == pytest.approx(2 + math.pi)


def test_switched_off_and_broken_compiler(monkeypatch):
    monkeypatch.setenv("NVMATHPY_CPU_JIT", "off")
    assert not cpu_jit.available()
    with pytest.raises(MissingDependencyError, match="C compiler"):
        cpu_jit.compile_c("int f(void) { return 1; }")
    a, b, bias = np.ones((300, 300)), np.ones((300, 300)), np.ones(300)
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        assert all(c.params["evaluator"] != "c" for c in mm._engine.candidates(mm.problem))
    monkeypatch.setenv("NVMATHPY_CPU_JIT", "on")
    monkeypatch.setattr(cpu_jit, "_compiler", lambda: "/bin/false")
    with pytest.raises(MissingDependencyError):
        cpu_jit._load("/bin/false", "int g(void) { return 2; }")


def test_compiled_first_for_large_problems():
    """The compiled pass first; after NumPy's product where an activation follows the bias (the
    pass adds it), after ``?gemm`` with the bias folded in where the bias is all there is."""
    rng = np.random.default_rng(25)
    a, b, bias = rand(rng, (300, 280), "float32"), rand(rng, (280, 290), "float32"), rand(rng, (290,), "float32")
    for epilogue, method in (("gelu_bias", "matmul"), ("relu_bias", "matmul"), ("bias", "gemm")):
        with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias}) as mm:
            first = mm._engine.candidates(mm.problem)[0].params
            assert first["evaluator"] == "c" and first["method"] == method, epilogue
            check(mm.plan().execute(), a, b, epilogue=epilogue, inputs={"bias": bias})
    assert _matmul_cpu.SMALL_FLOPS < 300 * 280 * 290


def _exp_arguments(dtype):
    rng = np.random.default_rng(27)
    top = math.log(np.finfo(dtype).max)
    values = np.concatenate([rng.standard_normal(3000) * s for s in (1, 30, 300)]
                            + [np.linspace(-top - 5, top + 5, 3001), [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    return values.astype(dtype)


def _check_exp(values, got):
    """Within 2 ulp of exp, inf/-inf/NaN as numpy.exp, results below the smallest normal number 0."""
    info = np.finfo(values.dtype)
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(values.astype(np.longdouble))
        want = np.where(want < info.tiny, 0, want).astype(values.dtype)
    finite = np.isfinite(want) & (want > 0)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    ulp = np.spacing(want[finite])
    assert np.max(np.abs(got[finite] - want[finite]) / ulp) <= 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_over_its_whole_range(dtype):
    """The generated exp (plain arithmetic, see emit_c.C_PRELUDE) over the whole range."""
    values = _exp_arguments(dtype)
    n = values.size
    with la.Matmul(values.reshape(n, 1), np.ones((1, 1), dtype), epilogue=lambda x: np.exp(x)) as mm:
        cands = c_candidates(mm)
        assert cands
        mm._install(mm._engine.prepare(mm.problem, cands[0]), "heuristic")
        got = mm.execute()[:, 0]
    _check_exp(values, got)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_exp_over_its_whole_range(dtype):
    """emit_c.C_VECTOR_EXP, the same exponential on whole GCC vectors (the fused GEMM's GELU),
    within the same bounds over the same arguments."""
    real, integer = ("float", "int32_t") if dtype == "float32" else ("double", "int64_t")
    source = (f"#define IS_DOUBLE {int(dtype == 'float64')}\n#define INTEGER {integer}\n#include <math.h>\n"
              + C_PRELUDE + f"typedef {real} real;\n"
              "typedef real vec __attribute__((vector_size(32)));\n"
              "typedef INTEGER ivec __attribute__((vector_size(32)));\n" + C_VECTOR_EXP
              + "void run(const real *x, real *y, long n) {\n"
              "  for (long i = 0; i < n; i += 32 / sizeof(real)) {\n"
              "    vec v; memcpy(&v, x + i, 32); v = nvm_vexp(v); memcpy(y + i, &v, 32);\n  }\n}\n")
    run = cpu_jit.compile_c(source).run
    values = _exp_arguments(dtype)
    values = np.concatenate([values, np.zeros(-values.size % 8, dtype)])
    got = np.empty_like(values)
    run(ctypes.c_void_p(values.ctypes.data), ctypes.c_void_p(got.ctypes.data), ctypes.c_long(values.size))
    _check_exp(values, got)


def test_the_compiler_version_is_asked_once_per_compiler_file(tmp_path, monkeypatch):
    """``cc --version`` (a part of every kernel's key) runs once per compiler file: later
    processes read it from the kernel cache; a changed file, or an unreadable memo, asks again."""
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path / "cache"))
    compiler = tmp_path / "fakecc"
    compiler.write_text("#!/bin/sh\necho fakecc 1.0\n")
    compiler.chmod(0o755)
    runs = []
    real_run = cpu_jit.subprocess.run
    monkeypatch.setattr(cpu_jit.subprocess, "run", lambda *a, **k: (runs.append(a[0]), real_run(*a, **k))[1])

    def version():
        cpu_jit._compiler_version.cache_clear()  # as a new process
        return cpu_jit._compiler_version(str(compiler))

    try:
        assert version() == "fakecc 1.0" and len(runs) == 1
        assert version() == "fakecc 1.0" and len(runs) == 1  # from the memo
        (tmp_path / "cache" / "cpu_kernels" / "compilers.json").write_text("{not json")
        assert version() == "fakecc 1.0" and len(runs) == 2  # unreadable memo: asked again, rewritten
        assert version() == "fakecc 1.0" and len(runs) == 2
        compiler.write_text("#!/bin/sh\necho fakecc 2.0 upgraded\n")  # another size: another compiler
        assert version() == "fakecc 2.0 upgraded" and len(runs) == 3
        assert version() == "fakecc 2.0 upgraded" and len(runs) == 3
    finally:
        cpu_jit._compiler_version.cache_clear()
