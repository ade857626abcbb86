"""The compiled GEMM with the bias and ReLU applied in registers (nvmathpy.kernels.cpu_gemm) and
the Matmul candidate built on it: float64 references over odd/prime sizes, edge tiles, several
packed blocks, every operand layout, strided results, thread counts, NaN, and hypothesis over
shapes and strides."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import platform
import subprocess
import threading

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nvmathpy.linalg as la
from nvmathpy.kernels import cpu_gemm, cpu_jit
from nvmathpy.kernels.cpu_gemm import fused_gemm, fused_gemm_available
from nvmathpy.linalg.gemm.cpu import _engine as _matmul_cpu

pytestmark = pytest.mark.skipif(not fused_gemm_available(np.float32), reason="no C compiler for the fused GEMM")

TOL = {"float32": 2e-6, "float64": 1e-14}


def rel_err(got, want):
    scale = np.linalg.norm(want)
    return np.linalg.norm(got - want) / (scale if scale else 1.0)


def gelu(x):
    """The tanh-approximated GELU, ``0.5 x (1 + tanh z)``, as ``x / (1 + exp(-2 z))``: the same
    value without the cancellation of ``1 + tanh z`` in the negative tail (there the sum form
    loses up to 1e-11 relative; hypothesis found an m=1, n=2 product with both outputs there)."""
    z = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
    with np.errstate(over="ignore"):  # exp(-2z) = inf: x / inf, the -0.0 of the limit
        return x / (1 + np.exp(-2 * z))


def reference(a, b, bias, activation):
    x = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        x = x + bias
    if activation == "relu":
        return np.maximum(x, 0)
    return gelu(x) if activation == "gelu" else x


def views(x):
    """``x`` C-ordered, F-ordered and as the transpose of an array of the other order."""
    yield np.ascontiguousarray(x)
    yield np.asfortranarray(x)
    yield np.ascontiguousarray(x.T).T


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 7, 33), (37, 53, 71), (12, 512, 32), (101, 517, 47),
                                   (5, 1031, 1100), (25, 2053, 1027)])
def test_matches_float64_reference(dtype, m, k, n):
    """Edge tiles, a depth over one packed block (2053 > 1536 float32 rows), a width over
    NC = 1024 columns, each operand order, with and without bias and ReLU, 1-3 threads, with
    a workspace kept over calls and without."""
    rng = np.random.default_rng(m * 1000 + n)
    a0, b0 = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    run = fused_gemm(dtype)
    for a, b in zip(views(a0), [*views(b0)][::-1]):
        workspace = run.workspace(n, k)
        assert workspace.ctypes.data % 64 == 0 and workspace.dtype == dtype
        for use_bias, act, threads in ((True, "relu", 2), (False, None, 1), (True, "gelu", 3), (False, "relu", 2),
                                       (False, "gelu", 2), (True, None, 2)):
            d = np.full((m, n), np.nan, dtype)
            run(a, b, d, bias if use_bias else None, act, threads, workspace if threads == 2 else None)
            want = reference(a0, b0, bias if use_bias else None, act)
            assert rel_err(d, want) < TOL[dtype] * np.sqrt(k), (a.flags.c_contiguous, b.flags.c_contiguous)


def test_block_depth_and_width_split_the_work():
    """The sizes above cross the packed block's depth and width (what they test relies on it)."""
    rows = cpu_gemm.PACKED_BYTES // (4 * (cpu_gemm.NC + 32)) // cpu_gemm.KC * cpu_gemm.KC
    assert cpu_gemm.KC <= rows < 2053 and cpu_gemm.NC < 1027


def test_result_rows_strided_and_inputs_untouched():
    """The result may be a band of a wider array (row stride > n): columns outside stay as they were."""
    rng = np.random.default_rng(1)
    a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in ((70, 41), (41, 45), (45,)))
    copies = [x.copy() for x in (a, b, bias)]
    wide = np.full((70, 64), 7.0, np.float32)
    fused_gemm(np.float32)(a, b, wide[:, 3:48], bias, "relu", 2)
    assert rel_err(wide[:, 3:48], reference(a, b, bias, "relu")) < 1e-5
    assert (wide[:, :3] == 7).all() and (wide[:, 48:] == 7).all()
    for x, y in zip((a, b, bias), copies):
        np.testing.assert_array_equal(x, y)


def test_zero_depth_and_empty_results():
    """k = 0: the result is the epilogue of zeros; m or n = 0: nothing to write."""
    run = fused_gemm(np.float64)
    bias = np.array([-1.0, 2.0, -0.5])
    d = np.full((4, 3), np.nan)
    run(np.empty((4, 0)), np.empty((0, 3)), d, bias, "relu", 2)
    np.testing.assert_array_equal(d, np.tile([0.0, 2.0, 0.0], (4, 1)))
    run(np.empty((4, 0)), np.empty((0, 3)), d, bias, None, 2)
    np.testing.assert_array_equal(d, np.tile(bias, (4, 1)))
    run(np.empty((4, 0)), np.empty((0, 3)), d, bias, "gelu", 2)
    np.testing.assert_allclose(d, np.tile(gelu(bias), (4, 1)), rtol=1e-14)
    run(np.ones((0, 5)), np.ones((5, 3)), np.empty((0, 3)), bias, "relu", 2)
    run(np.ones((4, 5)), np.ones((5, 0)), np.empty((4, 0)), None, "relu", 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,n", [(24, 64), (25, 65)])
def test_gelu_of_extreme_values(dtype, m, n):
    """The GELU on whole tiles (vector code in registers) and edge tiles (the scalar loop) gives
    the reference's values from the tails to the special values: 0 + bias is the bias exactly,
    so the result is gelu(bias) per column; NaN stays NaN, -inf gives NaN as -inf / inf does."""
    big = np.finfo(dtype).max
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 3.0, -3.0, 10.0, -10.0, 11.5, -11.5,
                43.7, -43.7, 50.0, -50.0, 87.0, -87.0, 1e20, -1e20, big, -big]
    bias = np.resize(np.array(specials, dtype), n)
    d = np.empty((m, n), dtype)
    fused_gemm(dtype)(np.ones((m, 1), dtype), np.zeros((1, n), dtype), d, bias, "gelu", 2)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.tile(gelu(bias.astype(np.float64)), (m, 1)).astype(dtype)
    np.testing.assert_allclose(d, want, rtol=TOL[dtype], atol=np.finfo(dtype).tiny)


def test_relu_keeps_nan_and_infinity_as_numpy():
    """numpy.maximum(x, 0) propagates NaN; so does the fused ReLU (on full and edge tiles)."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((30, 20)).astype(np.float32), rng.standard_normal((20, 40)).astype(np.float32)
    a[3, 5], a[17, 0] = np.nan, np.inf
    d = np.empty((30, 40), np.float32)
    fused_gemm(np.float32)(a, b, d, None, "relu", 2)
    with np.errstate(invalid="ignore"):
        want = np.maximum(a @ b, 0)
    np.testing.assert_array_equal(np.isnan(d), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(d), np.isposinf(want))
    finite = np.isfinite(want)
    assert rel_err(d[finite], want[finite]) < 1e-5


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 70), n=st.integers(1, 80), a_f=st.booleans(), b_f=st.booleans(),
       a_step=st.integers(1, 2), b_step=st.integers(1, 2), threads=st.integers(1, 3),
       activation=st.sampled_from([None, "relu", "gelu"]), dtype=st.sampled_from(["float32", "float64"]))
@example(m=1, k=2, n=2, a_f=False, b_f=False, a_step=2, b_step=1, threads=1, activation="gelu", dtype="float64")
@example(m=1, k=59, n=2, a_f=False, b_f=False, a_step=2, b_step=1, threads=1, activation="gelu", dtype="float32")
def test_hypothesis_shapes_and_strides(m, k, n, a_f, b_f, a_step, b_step, threads, activation, dtype):
    """Any shape, either order, every other row or column of a larger array."""
    rng = np.random.default_rng(m * 7919 + k * 104729 + n)
    big_a = np.asarray(rng.standard_normal((m * a_step, k * a_step)), dtype, order="F" if a_f else "C")
    big_b = np.asarray(rng.standard_normal((k * b_step, n * b_step)), dtype, order="F" if b_f else "C")
    a, b = big_a[::a_step, ::a_step], big_b[::b_step, ::b_step]
    bias = rng.standard_normal(n).astype(dtype)
    d = np.empty((m, n), dtype)
    fused_gemm(dtype)(a, b, d, bias, activation, threads)
    # the reference rounded to the result's dtype: deep in GELU's negative tail the float64 values
    # (1e-57 and less) are zero in float32, which a relative error of the unrounded ones calls 100%
    # (hypothesis found m=1, k=59, n=2 with both outputs there)
    want = reference(a, b, bias, activation).astype(dtype).astype(np.float64)
    assert rel_err(d, want) < TOL[dtype] * np.sqrt(k) * 10


# -- the Matmul candidate ------------------------------------------------------------------------


def candidates(mm):
    return mm._engine.candidates(mm.problem)


@pytest.mark.parametrize("epilogue", [None, "bias", "relu", "relu_bias", "gelu", "gelu_bias"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_fused_candidate_is_correct(epilogue, dtype):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((601, 523)).astype(dtype)
    b = np.asfortranarray(rng.standard_normal((523, 607)).astype(dtype))
    inputs = {"bias": rng.standard_normal(607).astype(dtype)} if epilogue and "bias" in epilogue else None
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs) as mm:
        cands = candidates(mm)
        assert cands[1].params["method"] == "fused", cands  # second: these sizes are below 1024
        mm._install(mm._engine.prepare(mm.problem, cands[1]), "heuristic")
        activation = epilogue.split("_")[0] if epilogue in ("relu", "relu_bias", "gelu", "gelu_bias") else None
        want = reference(a, b, inputs["bias"] if inputs else None, activation)
        assert rel_err(mm.execute(), want) < TOL[dtype] * 30
        out = np.empty((601, 607), dtype)
        assert mm.execute(out=out) is out
        assert rel_err(out, want) < TOL[dtype] * 30


@pytest.mark.parametrize("dtype,epilogue,first", [("float32", "relu_bias", True), ("float32", "relu", True),
                                                  ("float32", None, False), ("float64", "relu_bias", False)])
def test_matmul_fused_candidate_is_first_for_large_float32_epilogues(dtype, epilogue, first):
    a, b = np.ones((1024, 1024), dtype), np.ones((1024, 1100), dtype)
    inputs = {"bias": np.ones(1100, dtype)} if epilogue == "relu_bias" else None
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs) as mm:
        methods = [c.params["method"] for c in candidates(mm)]
        assert methods.index("fused") == (0 if first else 1)


def test_matmul_fused_candidate_falls_back_while_another_thread_runs(monkeypatch):
    """With another thread of the process running (OpenBLAS's spinning worker), a call runs
    NumPy's product and the compiled pass instead of the fused kernel, with the same result - unless it
    directly follows the plan's previous call (then the worker is the fallback's own)."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((600, 530)).astype(np.float32), rng.standard_normal((530, 610)).astype(np.float32)
    bias = rng.standard_normal(610).astype(np.float32)
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        fused = [c for c in candidates(mm) if c.params["method"] == "fused"][0]
        mm._install(mm._engine.prepare(mm.problem, fused), "heuristic")
        kernel = mm._prepared.kernel
        calls = []
        inner = kernel.gemm
        monkeypatch.setattr(kernel, "gemm", lambda *args: (calls.append(1), inner(*args)))
        # The rule reads the plan's clock: a clock the test moves makes "directly follows" exact,
        # whatever the machine's speed or load (no wall-clock window).
        now = [100.0]
        monkeypatch.setattr(kernel, "clock", lambda: now[0])
        want = reference(a, b, bias, "relu")
        for running, follows, used in ((1, False, False), (1, True, True), (1, False, False), (0, False, True)):
            monkeypatch.setattr(_matmul_cpu, "others_running", lambda running=running: running)
            if not follows:
                now[0] += 2 * _matmul_cpu.FUSED_GAP
            calls.clear()
            assert rel_err(mm.execute(), want) < 1e-5
            assert bool(calls) == used, (running, follows)


@contextlib.contextmanager
def busy_thread():
    """A thread computing without the GIL (hashing a large buffer) for the duration."""
    data = bytes(64 << 20)
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            hashlib.sha256(data).digest()

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        yield worker
    finally:
        stop.set()
        worker.join()


def test_others_running_sees_a_busy_thread():
    """A thread computing without the GIL shows as running."""
    with busy_thread():
        # no sleeping: read until the worker shows, a bounded number of reads (the worker hashes
        # without the GIL, so it is running or runnable whenever this thread reads)
        assert any(cpu_gemm.others_running() for _ in range(20000))


@pytest.mark.parametrize("case", ["row_bias", "alpha", "c", "gelu_aux", "aux", "complex", "float16", "batched", "small",
                                  "strided", "no_compiler"])
def test_matmul_fused_candidate_only_where_it_computes_the_problem(case, monkeypatch):
    rng = np.random.default_rng(7)
    dtype = {"complex": np.complex64, "float16": np.float16}.get(case, np.float32)
    shape_a, shape_b = ((2, 600, 530), (530, 610)) if case == "batched" else ((600, 530), (530, 610))
    if case == "small":
        shape_a, shape_b = (400, 400), (400, 610)
    a, b = rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)
    if case == "strided":
        a = np.repeat(a, 2, axis=1)[:, ::2]
    kwargs = {"epilogue": "relu_bias", "epilogue_inputs": {"bias": rng.standard_normal(610).astype(dtype)}}
    if case == "row_bias":
        kwargs["epilogue_inputs"] = {"bias": rng.standard_normal((600, 1)).astype(dtype)}
    elif case == "alpha":
        kwargs["alpha"] = 2.0
    elif case == "c":
        kwargs.update(c=rng.standard_normal((600, 610)).astype(dtype), beta=1.0)
    elif case in ("gelu_aux", "aux"):
        kwargs["epilogue"] = "gelu_aux_bias" if case == "gelu_aux" else "relu_aux_bias"
    elif case == "complex":
        kwargs = {"epilogue": "bias", "epilogue_inputs": {"bias": rng.standard_normal(610).astype(dtype)}}
    elif case == "no_compiler":
        monkeypatch.setattr(_matmul_cpu, "fused_gemm_available", lambda dtype: False)
    with la.Matmul(a, b, **kwargs) as mm:
        assert "fused" not in {c.params["method"] for c in candidates(mm)}
    if case in ("alpha", "no_compiler"):  # the same product without the reason is offered it
        monkeypatch.undo()
        with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs=kwargs["epilogue_inputs"]) as mm:
            assert "fused" in {c.params["method"] for c in candidates(mm)}


def test_matmul_one_thread_execution_runs_the_kernel_on_one_thread():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((600, 530)).astype(np.float32), rng.standard_normal((530, 610)).astype(np.float32)
    with la.Matmul(a, b, epilogue="relu", execution={"name": "cpu", "num_threads": 1}) as mm:
        fused = [c for c in candidates(mm) if c.params["method"] == "fused"]
        assert fused and fused[0].params["threads"] == 1
        mm._install(mm._engine.prepare(mm.problem, fused[0]), "heuristic")
        assert rel_err(mm.execute(), reference(a, b, None, "relu")) < 1e-5


def test_matmul_bias_as_one_row_and_not_contiguous():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((600, 530)).astype(np.float32), rng.standard_normal((530, 610)).astype(np.float32)
    bias = rng.standard_normal((1, 1220)).astype(np.float32)[:, ::2]  # one row, every other value
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        fused = [c for c in candidates(mm) if c.params["method"] == "fused"]
        mm._install(mm._engine.prepare(mm.problem, fused[0]), "heuristic")
        assert rel_err(mm.execute(), reference(a, b, bias[0], "relu")) < 1e-5


@pytest.mark.parametrize("arch", ["haswell", "x86-64"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_other_instruction_sets(arch, dtype, tmp_path):
    """The source built for AVX2 (6-row tiles of 256-bit vectors) and for plain SSE2 (128-bit),
    as other machines build it with -march=native, against the float64 reference."""
    compiler = cpu_jit._compiler()
    if compiler is None or platform.machine() != "x86_64":
        pytest.skip("needs an x86-64 C compiler")
    source, library = tmp_path / "gemm.c", tmp_path / "gemm.so"
    source.write_text(cpu_gemm.source(dtype))
    subprocess.run([compiler, "-O2", f"-march={arch}", "-fPIC", "-shared", str(source), "-o", str(library)], check=True)
    kernel = ctypes.CDLL(str(library)).nvm_fused_gemm
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    kernel.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, ptr, ctypes.c_int, ctypes.c_int, ptr]
    rng = np.random.default_rng(11)
    for m, k, n in [(37, 53, 71), (100, 700, 45), (25, 2100, 1030)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = np.asfortranarray(rng.standard_normal((k, n)).astype(dtype))
        bias = rng.standard_normal(n).astype(dtype)
        d = np.empty((m, n), dtype)
        for act, name in enumerate(cpu_gemm.ACTIVATIONS):
            assert kernel(m, n, k, a.ctypes.data, k, 1, b.ctypes.data, 1, k, d.ctypes.data, n, bias.ctypes.data, act,
                          2, None) == 0
            assert rel_err(d, reference(a, b, bias, name)) < TOL[dtype] * np.sqrt(k)



def test_one_call_matmul_from_several_threads():
    """The one-call function under 4 threads at once (each takes its own plan and workspace;
    the fused GEMM's own threads meet the others' on the same cores)."""
    rng = np.random.default_rng(12)
    problems = [(rng.standard_normal((1030, 1024)).astype(np.float32),
                 rng.standard_normal((1024, 1040)).astype(np.float32), rng.standard_normal(1040).astype(np.float32))
                for _ in range(4)]
    with la.Matmul(*problems[0][:2], epilogue="relu_bias", epilogue_inputs={"bias": problems[0][2]}) as mm:
        assert candidates(mm)[0].params["method"] == "fused"  # what the one-call function plans
    errors = []

    def run(index):
        a, b, bias = problems[index]
        want = reference(a, b, bias, "relu")
        for _ in range(3):
            got = la.matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias})
            errors.append(rel_err(got, want))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 12 and max(errors) < 1e-5


@pytest.mark.parametrize("form", ["gelu_bias", "relu_bias", "relu", "bias"])
def test_custom_epilogues_of_a_builtin_form_run_fused(form):
    """A custom epilogue that is exactly a built-in form (match_native) is offered the fused
    GEMM, reading its bias under the caller's name; large float32 puts it first."""
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((1024, 1030)).astype(np.float32), rng.standard_normal((1030, 1040)).astype(np.float32)
    b0 = rng.standard_normal(1040).astype(np.float32)
    functions = {"gelu_bias": lambda x, b0: la.epilogues.gelu(x + b0), "relu_bias": lambda x, b0: np.maximum(0, b0 + x),
                 "relu": lambda x: np.maximum(x, 0.0), "bias": lambda x, b0: x + b0}
    inputs = {"b0": b0} if "bias" in form else None
    with la.Matmul(a, b, epilogue=functions[form], epilogue_inputs=inputs) as mm:
        cands = candidates(mm)
        assert cands[0].params["method"] == "fused"
        mm._install(mm._engine.prepare(mm.problem, cands[0]), "heuristic")
        want = reference(a, b, b0 if inputs else None, {"gelu_bias": "gelu", "relu_bias": "relu", "relu": "relu"}.get(form))
        assert rel_err(mm.execute(), want) < 1e-5


@pytest.mark.parametrize("case", ["not_a_form", "row_bias", "two_inputs"])
def test_other_custom_epilogues_are_not_offered_the_fused_gemm(case):
    rng = np.random.default_rng(14)
    a, b = rng.standard_normal((600, 530)).astype(np.float32), rng.standard_normal((530, 610)).astype(np.float32)
    epilogue, inputs = {
        "not_a_form": (lambda x, b0: np.maximum(x + b0, 0) * 2, {"b0": rng.standard_normal(610).astype(np.float32)}),
        "row_bias": (lambda x, b0: np.maximum(x + b0, 0), {"b0": rng.standard_normal((600, 1)).astype(np.float32)}),
        "two_inputs": (lambda x, b0, s: np.maximum(x + b0, 0) + s,
                       {"b0": rng.standard_normal(610).astype(np.float32), "s": 0.5}),
    }[case]
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs) as mm:
        assert "fused" not in {c.params["method"] for c in candidates(mm)}


def test_running_threads_keeps_one_stat_file_per_live_thread():
    """The stat files of ended threads are closed at the next look, and a running thread seen
    through a kept descriptor stays seen."""
    with busy_thread() as worker:
        ident = str(worker.native_id)
        assert any(ident in cpu_gemm.running_threads() for _ in range(20000))
        assert ident in cpu_gemm._STAT_FILES
    # the thread's kernel task may outlive join() for a moment: look until it is gone (bounded)
    assert any(cpu_gemm.running_threads() is not None and ident not in cpu_gemm._STAT_FILES for _ in range(20000))
