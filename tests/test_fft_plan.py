"""The FFT plan: kinds and directions on every installed engine, lifecycle, tuning and wisdom."""

from __future__ import annotations

import numpy as np
import pytest

from nvmathpy.errors import (
    ExecutionSpaceUnavailableError,
    InvalidOperandError,
    InvalidOptionError,
    MissingDependencyError,
    OperandMismatchError,
    PlanStateError,
)
from nvmathpy.execution import ExecutionCPU
from nvmathpy.fft import FFT, FFTOptions
from nvmathpy.fft._engines_cpu import thread_options
from nvmathpy.fft._heuristic import library_order, rank, smooth
from nvmathpy.fft._layout import describe
from nvmathpy.fft._libraries import LIBRARIES, import_pyfftw, installed_libraries
from nvmathpy.plan import Candidate, default_wisdom

ENGINES = [
    pytest.param(name, marks=pytest.mark.skipif(name not in installed_libraries(), reason=f"{name} not installed"))
    for name in LIBRARIES
]


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    return float(np.linalg.norm((got - want).ravel()) / np.linalg.norm(want.ravel()))


@pytest.fixture
def rng():
    return np.random.default_rng(99)


def cplx(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def only(engine: str, threads: int = 1) -> dict:
    return {"options": {"engines": [engine]}, "execution": ExecutionCPU(threads)}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("shape,axes", [((64,), None), ((5, 97), (1,)), ((6, 10, 9), (2, 0)), ((4, 3, 5, 6), None)])
def test_c2c_both_directions_each_engine(rng, engine, norm, shape, axes):
    x = cplx(rng, shape)
    before = x.copy()
    with FFT(x, axes=axes, norm=norm, **only(engine, threads=2)) as plan:
        plan.plan()
        assert plan.candidate.label == engine
        assert rel_err(plan.execute(), np.fft.fftn(x, axes=axes, norm=norm)) < 1e-12
        assert rel_err(plan.execute(direction="inverse"), np.fft.ifftn(x, axes=axes, norm=norm)) < 1e-12
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("shape,axes,s", [((30,), None, None), ((4, 31), (1,), (40,)), ((6, 8, 7), (2, 0), (5, 9))])
def test_real_kinds_and_hermitian_directions_each_engine(rng, engine, norm, shape, axes, s):
    r = rng.standard_normal(shape)
    ax = axes if axes is not None else tuple(range(len(shape)))
    with FFT(r, axes=axes, s=s, norm=norm, **only(engine)) as plan:
        plan.plan()
        assert plan.kind == "r2c"
        assert rel_err(plan.execute(), np.fft.rfftn(r, s=s, axes=ax, norm=norm)) < 1e-12
        ihfft = np.conj(np.fft.rfftn(r, s=s, axes=ax, norm={"backward": "forward", "forward": "backward"}.get(norm, norm)))
        assert rel_err(plan.execute("inverse"), ihfft) < 1e-12
    c = cplx(rng, shape)
    before = c.copy()
    out_s = list(s) if s is not None else [shape[a] for a in ax[:-1]] + [2 * shape[ax[-1]] - 1]
    with FFT(c, axes=axes, s=out_s, kind="c2r", norm=norm, **only(engine)) as plan:
        plan.plan()
        assert rel_err(plan.execute(), np.fft.irfftn(c, s=out_s, axes=ax, norm=norm)) < 1e-12
        swapped = {"backward": "forward", "forward": "backward"}.get(norm, norm)
        assert rel_err(plan.execute("forward"), np.fft.irfftn(np.conj(c), s=out_s, axes=ax, norm=swapped)) < 1e-12
    np.testing.assert_array_equal(c, before)


@pytest.mark.parametrize("engine", ENGINES)
def test_single_precision_each_engine(rng, engine):
    x = cplx(rng, (8, 120), np.complex64)
    out = FFT(x, axes=[1], **only(engine)).plan().execute()
    assert out.dtype == np.complex64
    assert rel_err(out, np.fft.fft(x.astype(np.complex128), axis=1)) < 3e-6
    r = rng.standard_normal((8, 120)).astype(np.float32)
    out = FFT(r, **only(engine)).plan().execute()
    assert out.dtype == np.complex64
    assert rel_err(out, np.fft.rfftn(r.astype(np.float64))) < 3e-6


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["transposed", "strided", "fortran"])
def test_non_contiguous_each_engine(rng, engine, layout):
    base = cplx(rng, (12, 16, 6))
    x = {"transposed": base.transpose(1, 2, 0), "strided": base[1::2, ::3], "fortran": np.asfortranarray(base)}[layout]
    got = FFT(x, axes=(0, 2), **only(engine)).plan().execute()
    assert rel_err(got, np.fft.fftn(x, axes=(0, 2))) < 1e-12


@pytest.mark.parametrize("engine", ENGINES)
def test_inplace_each_engine(rng, engine):
    x = cplx(rng, (4, 50))
    want = np.fft.fft(x, axis=1)
    with FFT(x, axes=[1], inplace=True, **only(engine)) as plan:
        plan.plan()
        assert plan.execute() is x
    assert rel_err(x, want) < 1e-12


def test_inplace_autotune_leaves_x_alone_until_execute(rng):
    x = cplx(rng, (4, 50))
    before = x.copy()
    with FFT(x, axes=[1], inplace=True, execution=ExecutionCPU(2)) as plan:
        timings = plan.autotune(effort="exhaustive", repeats=2)
        assert len(timings) >= 2
        assert np.array_equal(x, before)
        assert plan.execute() is x
    assert rel_err(x, np.fft.fft(before, axis=1)) < 1e-12


def test_inplace_refuses_what_it_cannot_do(rng):
    with pytest.raises(InvalidOptionError, match="inplace"):
        FFT(rng.standard_normal(8), inplace=True)
    with pytest.raises(InvalidOptionError, match="inplace"):
        FFT(cplx(rng, 8), s=[16], inplace=True)
    ro = cplx(rng, 8)
    ro.flags.writeable = False
    with pytest.raises(InvalidOperandError, match="read-only"):
        FFT(ro, inplace=True)


def test_lifecycle_and_reset_operand(rng):
    x, y = cplx(rng, (3, 20)), cplx(rng, (3, 20))
    plan = FFT(x, axes=[-1])
    with pytest.raises(PlanStateError, match="plan"):
        plan.execute()
    plan.plan()
    assert rel_err(plan.execute(), np.fft.fft(x)) < 1e-12
    plan.reset_operand(y)
    assert rel_err(plan.execute(), np.fft.fft(y)) < 1e-12
    with pytest.raises(OperandMismatchError, match="shape"):
        plan.reset_operand(cplx(rng, (3, 21)))
    with pytest.raises(OperandMismatchError, match="dtype"):
        plan.reset_operand(y.astype(np.complex64))
    with pytest.raises(OperandMismatchError, match="strides"):
        plan.reset_operand(np.asfortranarray(y))
    with pytest.raises(InvalidOptionError, match="direction"):
        plan.execute(direction="sideways")
    plan.free()
    plan.free()
    with pytest.raises(PlanStateError, match="freed"):
        plan.execute()


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"kind": "r2c", "x": "complex"}, TypeError, "real operand"),
        ({"kind": "c2r"}, InvalidOperandError, "needs the real output length"),
        ({"kind": "c3c"}, InvalidOptionError, "kind"),
        ({"axes": [5]}, IndexError, "out of bounds"),
        ({"axes": [0, -2]}, ValueError, "unique"),
        ({"s": [0, 4]}, ValueError, r"\(0\)"),
        ({"norm": "both"}, ValueError, "norm"),
        ({"options": {"engine": "x"}}, InvalidOptionError, "unknown key"),
        ({"options": {"engines": ["fftpack"]}}, InvalidOptionError, "engines"),
        ({"execution": "tpu"}, InvalidOptionError, "tpu"),
    ],
)
def test_bad_arguments(rng, kwargs, error, match):
    kwargs = dict(kwargs)
    x = cplx(rng, (4, 6)) if kwargs.pop("x", None) == "complex" else rng.standard_normal((4, 6))
    with pytest.raises(error, match=match):
        FFT(x, **kwargs)


def test_cuda_execution_raises_clear_error(rng):
    with pytest.raises(ExecutionSpaceUnavailableError, match="CUDA is not available"):
        FFT(cplx(rng, 8), execution="cuda")


def test_missing_engine_names_the_extra(rng, monkeypatch):
    from nvmathpy.fft import _engines_cpu

    monkeypatch.setattr(_engines_cpu, "installed_libraries", lambda: ("scipy",))
    with pytest.raises(MissingDependencyError, match=r"nvmathpy\[cpu\]"):
        FFT(cplx(rng, 8), options={"engines": ["ducc0"]})


def test_scipy_only_path_always_works(rng, monkeypatch):
    from nvmathpy.fft import _engines_cpu

    monkeypatch.setattr(_engines_cpu, "installed_libraries", lambda: ("scipy",))
    x = cplx(rng, (5, 33))
    plan = FFT(x, execution=ExecutionCPU(2)).plan()
    assert plan.candidate.label == "scipy"
    assert rel_err(plan.execute(), np.fft.fftn(x)) < 1e-12
    timings = plan.autotune(effort="exhaustive", repeats=1)
    assert set(timings) == {"scipy(threads=1)", "scipy(threads=2)"}
    assert rel_err(plan.execute(), np.fft.fftn(x)) < 1e-12


@pytest.mark.parametrize("n", [16, 1 << 12])
def test_longdouble_runs_on_scipy(rng, n):
    """Long double runs on SciPy's pocketfft (its binding called directly in the small band, or
    through scipy.fft), in long double."""
    x = rng.standard_normal(n).astype(np.longdouble)
    plan = FFT(x).plan()
    assert plan.candidate.label in ("scipy", "pocketfft")
    out = plan.execute()
    assert out.dtype == np.clongdouble
    assert rel_err(out.astype(np.complex128), np.fft.rfft(x.astype(np.float64))) < 1e-12


def test_autotune_records_winner_and_wisdom_hit_replans_nothing(rng):
    x = cplx(rng, (2, 24))
    plan = FFT(x, axes=[1], execution=ExecutionCPU(2)).plan()
    assert plan.chosen_by == "heuristic"
    timings = plan.autotune(effort="measure", repeats=2)
    assert 2 <= len(timings) <= 4 and plan.chosen_by == "autotune"
    winner = plan.candidate
    assert rel_err(plan.execute(), np.fft.fft(x, axis=1)) < 1e-12
    again = FFT(cplx(rng, (2, 24)), axes=[1], execution=ExecutionCPU(2)).plan()
    assert again.chosen_by == "wisdom" and again.candidate == winner
    assert again.autotune() == {}


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
def test_fftw_wisdom_travels_in_the_wisdom_entry(rng):
    x = cplx(rng, 48)
    plan = FFT(x, options={"engines": ["pyfftw"]}, execution=ExecutionCPU(1)).plan()
    plan.autotune(effort="measure", repeats=1, force=True)
    forced = Candidate.of("pyfftw", threads=1, effort="measure")
    prepared = plan._engine.prepare(plan.problem, forced)
    extra = prepared.wisdom_extra()
    assert list(extra["fftw_wisdom"]) == ["double"] and isinstance(extra["fftw_wisdom"]["double"], str)
    assert extra["fftw_time_limit"] is None
    default_wisdom().record(plan.problem, plan._engine.device(), forced.to_dict(), extra=extra)
    hit = FFT(x, options={"engines": ["pyfftw"]}, execution=ExecutionCPU(1)).plan()
    assert hit.chosen_by == "wisdom" and hit.candidate == forced
    entry = default_wisdom().lookup(plan.problem, plan._engine.device())
    assert entry["extra"] == extra
    assert rel_err(hit.execute(), np.fft.fft(x)) < 1e-12


def test_heuristic_table_rules():
    assert smooth(1000) and smooth(7 ** 5) and smooth(1) and not smooth(10007) and not smooth(2 * 11) and not smooth(13 ** 2)
    assert library_order(describe((10007,), np.dtype("complex64")))[0] == "ducc0"
    assert library_order(describe((4096,), np.dtype("complex64")))[0] == "mkl_fft"
    assert library_order(describe((1 << 20,), np.dtype("float64")))[0] == "pyfftw"
    assert library_order(describe((1024, 4096), np.dtype("complex64"), axes=[-1]))[0] == "ducc0"
    lay = describe((1 << 16,), np.dtype("complex64"))
    ranked = rank(lay, ["scipy", "ducc0", "pyfftw", "mkl_fft"], thread_options(2))
    assert str(ranked[0]) == "mkl_fft(threads=2)"
    assert ranked[0].params.get("effort") is None
    assert Candidate.of("pyfftw", threads=2, effort="measure") in ranked[:4]
    assert len(set(ranked)) == len(ranked)
    assert thread_options(6) == [1, 2, 4, 6]


def test_options_dataclass():
    assert FFTOptions(engines="ducc0").engines == ("ducc0",)
    with pytest.raises(InvalidOptionError):
        FFTOptions(engines=[])
    with pytest.raises(InvalidOptionError, match="fftw_time_limit"):
        FFTOptions(fftw_time_limit=0)


def test_torch_plan_returns_torch(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(cplx(rng, (4, 16)))
    plan = FFT(x, axes=[1]).plan()
    out = plan.execute()
    assert isinstance(out, torch.Tensor)
    assert rel_err(out.numpy(), np.fft.fft(x.numpy(), axis=1)) < 1e-12


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
@pytest.mark.parametrize("kind", ["c2c", "r2c", "c2r"])
@pytest.mark.parametrize("n", [1000, 1 << 17])  # outputs of NumPy's allocation; 2 MiB of complex128: SIMD-aligned
def test_pyfftw_runs_on_the_callers_input_and_leaves_it_as_it_was(rng, kind, n):
    """FFTW reads an aligned input where it lies (a copy of a misaligned one, and of every c2r
    input, which FFTW destroys): the results are right and the input unchanged."""
    pyfftw = import_pyfftw()

    if kind == "r2c":
        x = pyfftw.empty_aligned(n, np.float64)
        x[:] = rng.standard_normal(n)
        want, plan = np.fft.rfft(x), FFT(x, **only("pyfftw"))
    elif kind == "c2r":
        x = cplx(rng, n // 2 + 1)
        want, plan = np.fft.irfft(x, n), FFT(x, kind="c2r", s=[n], **only("pyfftw"))
    else:
        x = pyfftw.empty_aligned(n, np.complex128)
        x[:] = cplx(rng, n)
        want, plan = np.fft.fft(x), FFT(x, **only("pyfftw"))
    before = x.copy()
    with plan:
        plan.plan()
        assert rel_err(plan.execute(), want) < 1e-12
        shifted = np.empty(x.size + 1, x.dtype)[1:]  # misaligned copy of the same data
        shifted[:] = x
        plan.reset_operand(shifted)
        assert rel_err(plan.execute(), want) < 1e-12
    np.testing.assert_array_equal(x, before)


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
@pytest.mark.parametrize("n,threads", [(1 << 17, 1), (1 << 10, 2)])  # (a tiny plan on one thread copies: below)
def test_pyfftw_input_aligned_as_the_plan_needs_is_not_copied(rng, offset, n, threads):
    """An input at the alignment the FFTW plan needs (pyFFTW's ``input_alignment``, which may
    be less than its SIMD alignment) is transformed where it lies; others are copied first.
    Either way the result is right and the input untouched."""
    pyfftw = import_pyfftw()

    base = np.empty(n + 8)
    x = base[offset:offset + n]  # 8-byte steps through the alignments
    x[:] = rng.standard_normal(n)
    before = x.copy()
    given = []

    class Spy:  # the FFTW object, noting the input of each update_arrays it accepts
        def __init__(self, fftw):
            self.fftw = fftw

        def __getattr__(self, name):
            return getattr(self.fftw, name)

        def update_arrays(self, a, b):
            self.fftw.update_arrays(a, b)
            given.append(a)

    with FFT(x, **only("pyfftw", threads)) as plan:
        plan.plan()
        plans = plan._prepared.state["plans"]
        fftw = plans["forward"]
        plans["forward"] = plans["inverse"] = Spy(fftw)
        assert rel_err(plan.execute(), np.fft.rfft(before)) < 1e-12
    assert isinstance(fftw, pyfftw.FFTW) and fftw.input_alignment <= pyfftw.simd_alignment
    assert given and (given[0] is x) == (x.ctypes.data % fftw.input_alignment == 0)
    np.testing.assert_array_equal(x, before)


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
@pytest.mark.parametrize("offset", [0, 1])
def test_pyfftw_inplace_on_an_operand_the_plan_cannot_write_is_right(rng, offset):
    """In place, FFTW reads a copy of the operand and writes into it where the plan takes its
    alignment, else into an aligned array copied back: either way the operand holds the result."""
    n = 1 << 16
    base = np.empty(2 * n + 2)
    x = base[offset:offset + 2 * n].view(np.complex128)  # 8 bytes off: no FFTW plan takes it
    x[:] = cplx(rng, n)
    assert (x.ctypes.data % 16 == 0) == (offset == 0)
    want = np.fft.fft(x)
    with FFT(x, inplace=True, **only("pyfftw")) as plan:
        plan.plan()
        assert plan.execute() is x
    assert rel_err(x, want) < 1e-12


@pytest.mark.parametrize("engine", ENGINES)
def test_results_held_by_the_caller_are_never_reused(rng, engine):
    x, y = cplx(rng, (3, 1 << 16)), cplx(rng, (3, 1 << 16))  # 3 MiB results: kept for reuse
    with FFT(x, **only(engine)) as plan:
        plan.plan()
        held = [plan.execute() for _ in range(4)]  # all held: four distinct, correct arrays
        assert len({id(h) for h in held}) == 4
        assert max(rel_err(h, np.fft.fftn(x)) for h in held) < 1e-12
        dropped = plan.execute()
        dropped_id = id(dropped)
        del dropped, held
        plan.reset_operand(y)
        again = plan.execute()
        if plan._prepared.writes_out:  # a result no one holds is written over, not reallocated
            assert id(again) == dropped_id
        assert rel_err(again, np.fft.fftn(y)) < 1e-12
        row = again[0]
        inverse = plan.execute(direction="inverse")
        assert inverse is not again  # a view keeps its base alive
        assert rel_err(row, np.fft.fftn(y)[0]) < 1e-12
        assert rel_err(inverse, np.fft.ifftn(y)) < 1e-12


@pytest.mark.parametrize("inplace", [False, True])
def test_autotune_skips_a_candidate_that_cannot_be_prepared_or_run(rng, caplog, monkeypatch, inplace):
    """FFT.autotune (its own override: the in-place private copy) keeps Plan.autotune's handling:
    a candidate that cannot be prepared, or fails when run, is logged and skipped, and freed."""
    import logging

    from nvmathpy.fft._libraries import FFTPrepared

    x = cplx(rng, (4, 30))
    want = np.fft.fft(x, axis=1)
    operand = x.copy()
    plan = FFT(operand, axes=[1], inplace=inplace, execution=ExecutionCPU(1)).plan()
    engine = plan._engine
    real = engine.candidates(plan.problem)
    cannot_prepare, cannot_run = Candidate.of("broken", fails="prepare"), Candidate.of("broken", fails="run")
    prepare, made = engine.prepare, []

    def crash(*args, **kwargs):
        raise RuntimeError("the library crashed when run")

    def fake_prepare(problem, candidate, extra=None):
        if candidate == cannot_prepare:
            raise RuntimeError("the library is missing")
        if candidate == cannot_run:
            made.append(FFTPrepared(candidate, crash, crash, writes_out=False))
            return made[-1]
        return prepare(problem, candidate, extra)

    monkeypatch.setattr(engine, "candidates", lambda problem: [cannot_prepare, cannot_run, *real])
    monkeypatch.setattr(engine, "prepare", fake_prepare)
    with caplog.at_level(logging.WARNING, logger="nvmathpy"):
        timings = plan.autotune(effort="exhaustive", repeats=1, force=True)
    assert timings and set(timings) <= {str(c) for c in real}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(cannot_prepare) in m and "could not be prepared" in m and "missing" in m for m in warnings)
    assert any(str(cannot_run) in m and "crashed when run" in m for m in warnings)
    assert made and made[0].forward is not crash  # freed
    assert plan.candidate in real and plan.chosen_by == "autotune"
    assert plan._scratch is None
    if inplace:
        assert np.array_equal(operand, x)  # timing ran on a private copy
    got = plan.execute()
    assert rel_err(operand if inplace else got, want) < 1e-12


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
@pytest.mark.parametrize("n", [1 << 15, 1 << 17])  # outputs of 512 KiB (NumPy's allocation) and 2 MiB (aligned)
def test_pyfftw_large_plan_writes_only_outputs_aligned_as_the_plan_needs(rng, n):
    """A large plan's fresh outputs - NumPy's below RECYCLED_BELOW, SIMD-aligned above - are
    bound only where their alignment is what the plan needs (here a plan that needs the SIMD
    alignment: NumPy's less aligned output is replaced, the caller's input still read where it
    lies); every result, held or not, is right."""
    pyfftw = import_pyfftw()

    from nvmathpy.fft._libraries import RECYCLED_BELOW

    x = cplx(rng, n)
    refused, outputs = [], []

    class NeedsSimdAlignment:  # the FFTW object, as if its plan needed the SIMD alignment for its output
        output_alignment = pyfftw.simd_alignment

        def __init__(self, fftw):
            self.fftw = fftw

        def __getattr__(self, name):
            return getattr(self.fftw, name)

        def update_arrays(self, a, b):
            if b.ctypes.data % pyfftw.simd_alignment:
                refused.append(b)
                raise ValueError("output misaligned")
            self.fftw.update_arrays(a, b)
            outputs.append((a, b))

    with FFT(x, **only("pyfftw")) as plan:
        plan.plan()
        plans = plan._prepared.state["plans"]
        buffers = plans["forward"].input_array, plans["forward"].output_array
        plans["forward"] = NeedsSimdAlignment(plans["forward"])
        held = [plan.execute() for _ in range(6)]
    want = np.fft.fft(x)
    assert max(rel_err(h, want) for h in held) < 1e-12
    bound = [(a, b) for a, b in outputs if a is not buffers[0]]  # (after each run: the plan's own buffers)
    assert len(bound) == len(held) and all(a is x and b is h for (a, b), h in zip(bound, held))
    assert all(h.ctypes.data % pyfftw.simd_alignment == 0 for h in held)
    assert x.nbytes >= RECYCLED_BELOW or all(r.ctypes.data % 16 == 0 for r in refused)  # NumPy's, 16-aligned


@pytest.mark.skipif("pyfftw" not in installed_libraries(), reason="pyfftw not installed")
def test_pyfftw_tiny_plan_on_one_thread_copies_through_its_buffers(rng):
    """A plan of a few kilobytes on one thread copies the input into its buffer and the result
    out (never binding the caller's arrays); the result is a new array, right, the input intact."""
    x = cplx(rng, 256)
    before, calls = x.copy(), []

    class Spy:
        def __init__(self, fftw):
            self.fftw = fftw

        def __getattr__(self, name):
            return getattr(self.fftw, name)

        def update_arrays(self, a, b):
            calls.append((a, b))
            self.fftw.update_arrays(a, b)

    with FFT(x, **only("pyfftw", 1)) as plan:
        plan.plan()
        plans = plan._prepared.state["plans"]
        plans["forward"] = Spy(plans["forward"])
        results = [plan.execute(), plan.execute()]
    assert not calls and results[0] is not results[1]
    assert max(rel_err(r, np.fft.fft(before)) for r in results) < 1e-12
    np.testing.assert_array_equal(x, before)
