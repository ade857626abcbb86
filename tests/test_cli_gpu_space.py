"""``--space cpu|cuda|auto`` of ``python -m nvmathpy demo`` and ``bench``, and their GPU code paths,
checked without a GPU.

1. Space selection: ``auto`` picks the CPU here (and says why), ``cuda`` exits with status 2 and
   one clear message (no driver; CuPy missing), unknown values are refused; argument parsing.
2. Every GPU demo and bench module imports, and its case lists build, without importing CuPy or
   torch; the lists cover what the issue names (GEMM bf16/fp16/fp32, fused gelu_bias, FFT, batched
   small solves).
3. The GPU demos and bench suites on the host emulations of CuPy + cuBLASLt / cuFFT / cuSOLVER
   (tests/cuda_emulation*.py): matmul end to end through the CLI (table, JSON, plot), FFT and
   solvers through their ``run``/``cases``; the CuPy-side glue (device copies, the CuPy peer code,
   timer) and the results checked against NumPy, and the vendor routines seen being called. What
   the GPU does is for the GPU check (benchmarks/gpu_check.py runs ``demo --space cuda`` and
   ``bench all --quick --space cuda``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import types

import numpy as np
import pytest

from nvmathpy.__main__ import _parser, main
from nvmathpy.demos import _space
from nvmathpy.cuda.driver import cuda_status
from nvmathpy.errors import ExecutionSpaceUnavailableError

no_gpu = pytest.mark.skipif(cuda_status().available, reason="checks the behaviour without a usable GPU")


@pytest.fixture(autouse=True)
def _fresh_selection():
    _space.select.cache_clear()
    yield
    _space.select.cache_clear()


# -- 1. selection and parsing ----------------------------------------------------------------------------


def test_parser_space_option():
    for command in ("demo", "bench"):
        assert _parser().parse_args([command]).space == "auto"
        assert _parser().parse_args([command, "--space", "cuda"]).space == "cuda"
        with pytest.raises(SystemExit):
            _parser().parse_args([command, "--space", "gpu"])
    args = _parser().parse_args(["bench", "matmul", "--quick", "--space", "cpu", "--json", "x.json"])
    assert (args.suites, args.quick, args.space, args.json) == (["matmul"], True, "cpu", "x.json")


@no_gpu
def test_auto_picks_cpu_without_a_gpu_and_says_why():
    space = _space.select("auto")
    assert space.name == "cpu" and not space.is_cuda and space.xp is np
    assert space.peer == "NumPy/SciPy" and space.torch is None
    assert space.note.startswith("auto: CUDA not used, no usable GPU here: ")
    assert space.note.endswith(cuda_status().reason)
    assert _space.select("auto") is space  # decided once
    assert _space.select("cpu").note == ""
    x = np.arange(5.0)
    assert space.to_device(x) is x and space.to_host(x) is x
    sums = []
    seconds = space.median_seconds(lambda: sums.append(x.sum()), repeats=3)
    assert sums == [10.0] * 4 and isinstance(seconds, float)  # one warm-up call, then one per sample


@no_gpu
def test_cuda_without_a_gpu_is_refused_clearly(capsys, monkeypatch):
    with pytest.raises(ExecutionSpaceUnavailableError, match=r"--space cuda: no usable GPU here: "):
        _space.select("cuda")
    with pytest.raises(ValueError, match=r"--space 'gpu' is not allowed; allowed: \['auto', 'cpu', 'cuda'\]"):
        _space.select("gpu")
    assert main(["demo", "--space", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--space cuda: no usable GPU here" in err and "Use --space cpu" in err
    from nvmathpy.bench import harness

    monkeypatch.setattr(harness, "clean_openblas_env", lambda: False)
    assert main(["bench", "matmul", "--space", "cuda"]) == 2
    assert "no usable GPU here" in capsys.readouterr().err


def test_cuda_without_cupy_names_the_extra(monkeypatch):
    from nvmathpy.cuda import driver

    monkeypatch.setattr(driver, "cuda_status", lambda: driver.CudaStatus(True, None, 1))
    monkeypatch.setitem(sys.modules, "cupy", None)  # "import cupy" raises ImportError
    with pytest.raises(ExecutionSpaceUnavailableError, match=r"CuPy does not import .*nvmathpy\[cu13\]"):
        _space.select("cuda")
    assert _space.select("auto").name == "cpu"


@no_gpu
def test_cli_exit_code_in_a_fresh_process():
    done = subprocess.run([sys.executable, "-m", "nvmathpy", "demo", "--space", "cuda"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--space cuda:" in done.stderr and done.stdout == ""


# -- 2. GPU modules import and list their cases without CuPy ------------------------------------------------


GPU_MODULES = ["nvmathpy.demos.matmul_cuda", "nvmathpy.demos.solvers_cuda", "nvmathpy.demos.fft_cuda",
               "nvmathpy.bench.suite_matmul_cuda", "nvmathpy.bench.suite_fft_cuda", "nvmathpy.bench.suite_linalg_cuda"]


def test_gpu_modules_import_and_list_cases_without_cupy_or_torch():
    code = (
        "import importlib, json, sys\n"
        f"mods = [importlib.import_module(m) for m in {GPU_MODULES!r}]\n"
        "from nvmathpy.demos import DEMOS, module_name\n"
        "titles = [importlib.import_module('nvmathpy.demos.' + module_name(d, 'cuda')).TITLE for d in DEMOS]\n"
        "from nvmathpy.bench import CUDA_SUITES, SUITES\n"
        "assert set(CUDA_SUITES) == set(SUITES)\n"
        "specs = {str(q): len([s for m in mods[3:] for s in m.specs(q)]) for q in (True, False)}\n"
        "print(json.dumps({'heavy': [m for m in ('cupy', 'torch') if m in sys.modules], 'titles': titles,"
        " 'specs': specs}))\n"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    timeout=120).stdout)
    assert out["heavy"] == []
    assert all("GPU" in title for title in out["titles"])
    from nvmathpy.bench import suite_fft_cuda, suite_linalg_cuda, suite_matmul_cuda

    for quick in (True, False):
        matmul = suite_matmul_cuda.specs(quick)
        assert {d for kind, d, _ in matmul if kind == "gemm"} == {"bfloat16", "float16", "float32"}
        assert {d for kind, d, _ in matmul if kind == "gelu_bias"} == {"bfloat16", "float16"}
        fft = suite_fft_cuda.specs(quick)
        assert {kind for _, kind, *_ in fft} == {"c2c", "r2c"} and len(fft) == len(set(fft))
        assert any(count >= 100_000 and n <= 8 for _, count, n in suite_linalg_cuda.specs(quick))
        assert out["specs"][str(quick)] == len(matmul) + len(fft) + len(suite_linalg_cuda.specs(quick))
    assert len(suite_fft_cuda.specs(True)) < len(suite_fft_cuda.specs(False))


# -- 3. the GPU demos and bench suites on the host emulations (CuPy + cuBLASLt, cuFFT, cuSOLVER) ------------


@pytest.fixture
def emulated_cuda(monkeypatch):
    """CuPy and cuBLASLt emulated on the host (tests/cuda_emulation.py), plus the CuPy calls the
    demos' and suites' peer code makes; the CUDA space selects it. Returns the space and the
    stand-in device class (which counts synchronisations)."""
    pytest.importorskip("cuda.pathfinder", reason="CUDA wheels not installed (pip install 'nvmathpy[cu13]')")
    pytest.importorskip("ml_dtypes")
    from cuda_emulation import _Context, _host, install

    from nvmathpy.cuda.bindings import cublaslt as lt
    from nvmathpy.errors import MissingDependencyError
    from nvmathpy.execution import ExecutionCUDA
    from nvmathpy.linalg.gemm import matmul_plan

    try:
        lt.LIB.loaded
    except MissingDependencyError as exc:  # pragma: no cover - depends on the installation
        pytest.skip(f"cuBLASLt not installed: {exc}")
    install(monkeypatch.setattr, monkeypatch.setitem)
    # NumPy host arrays (the references' inputs) stay host arrays: send every matmul to the CUDA engine
    monkeypatch.setattr(matmul_plan, "resolve_execution", lambda value, device, device_id: ExecutionCUDA(0))
    cupy = sys.modules["cupy"]

    class Device(_Context):
        id = 0
        synchronized = 0

        def synchronize(self) -> None:
            Device.synchronized += 1

    cupy.cuda = types.SimpleNamespace(**{**vars(cupy.cuda), "Device": Device})
    cupy.matmul, cupy.tanh, cupy.complex128 = _host(np.matmul), _host(np.tanh), np.complex128
    cupy.fft = types.SimpleNamespace(**{name: _host(getattr(np.fft, name))
                                        for name in ("rfft", "irfft", "fftn", "rfftn")})
    cupy.linalg = types.SimpleNamespace(solve=_host(np.linalg.solve), cholesky=_host(np.linalg.cholesky),
                                        eigh=_host_tuple(np.linalg.eigh), svd=_host(np.linalg.svd),
                                        lstsq=_host_tuple(np.linalg.lstsq))
    cupy.__version__ = "host emulation"
    space = _space.select("cuda")
    space.__dict__["torch"] = None  # torch here has no CUDA: the CuPy-only branches run
    return space, Device


def _host_tuple(fn):
    """A NumPy function returning a tuple, as CuPy's (device arrays: host arrays here)."""
    from cuda_emulation import host

    return lambda *args, **kwargs: tuple(host(v) for v in fn(*args, **kwargs))


def test_gpu_matmul_demo_on_the_emulation(emulated_cuda, monkeypatch, capsys):
    from nvmathpy.demos import matmul_cuda

    space, device = emulated_cuda
    assert space.is_cuda and space.description == "GPU 0: host emulation" and space.peer == "CuPy"
    monkeypatch.setattr(matmul_cuda, "SHAPE", (67, 45, 33))
    assert main(["demo", "matmul", "--space", "cuda"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("execution space: cuda (GPU 0: host emulation); peers: CuPy\n")
    assert "[cuda] gelu_bias layer (67, 45) @ (45, 33) float32 on GPU 0: host emulation" in out
    assert "(ok)" in out and "aux mask ok" in out and "CuPy matmul+elementwise" in out and "candidate cublaslt(" in out
    assert "FAILED" not in out and "demo passed all checks" in out
    assert device.synchronized >= 2  # before each timing
    # a wrong result is reported as a failure (the check can fail)
    monkeypatch.setattr(matmul_cuda, "_gelu", lambda z: np.maximum(z, 0))
    assert main(["demo", "matmul", "--space", "cuda"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_gpu_matmul_bench_on_the_emulation(emulated_cuda, monkeypatch, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from nvmathpy.bench import harness, suite_matmul_cuda

    space, _ = emulated_cuda
    small = [("gemm", "bfloat16", (16, 16, 16)), ("gemm", "float16", (33, 17, 29)), ("gemm", "float32", (31, 23, 19)),
             ("gelu_bias", "float16", (37, 21, 13)), ("gelu_bias", "bfloat16", (8, 8, 8))]
    monkeypatch.setattr(suite_matmul_cuda, "specs", lambda quick: small)
    cases = suite_matmul_cuda.cases(quick=True, space=space)
    assert [c.name for c in cases] == ["GEMM float16 33x17x29", "GEMM float32 31x23x19",
                                       "gelu_bias float16 (37x13) @ (13x21)"]  # bfloat16 needs torch
    for case in cases:  # the peer and nvmathpy compute the same thing on the same operands
        assert set(case.impls) == {"nvmathpy", case.baseline} and case.baseline.startswith("cupy")
        ours, theirs = (np.asarray(case.impls[k](), np.float64) for k in ("nvmathpy", case.baseline))
        tol = 1e-2 if "float16" in case.name else 3e-5
        assert np.isfinite(ours).all() and np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < tol, case.name
    monkeypatch.setattr(harness, "clean_openblas_env", lambda: False)
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    assert main(["bench", "matmul", "--quick", "--space", "cuda", "--repeats", "2",
                 "--json", str(out_json), "--plot", str(out_png)]) == 0
    text = capsys.readouterr().out
    assert "execution space: cuda (GPU 0: host emulation); peers: CuPy; timed with CUDA events" in text
    assert "| GEMM float16 33x17x29 (cublaslt) |" in text and "nvmathpy vs cupy.matmul" in text
    assert "nvmathpy vs cupy matmul+elementwise" in text
    report = json.loads(out_json.read_text())
    assert report["environment"]["space"] == "cuda" and report["environment"]["gpu"] == {"gpu": "host emulation"}
    assert report["environment"]["cupy"] == "host emulation"
    assert [r["case"] for r in report["results"]] == [c.name for c in cases]
    assert all(set(r["seconds"]) == {"nvmathpy", r["baseline"]} and r["baseline"].startswith("cupy")
               and r["speedup_vs_baseline"] == r["seconds"][r["baseline"]] / r["seconds"]["nvmathpy"]
               for r in report["results"])
    assert out_png.stat().st_size > 1000


def test_gpu_fft_demo_and_bench_on_the_emulation(emulated_cuda, monkeypatch, capsys):
    from cuda_emulation_fft import install

    from nvmathpy.bench import harness, suite_fft_cuda
    from nvmathpy.demos import fft_cuda

    space, _ = emulated_cuda
    emulator = install(monkeypatch.setattr, monkeypatch.setitem)
    monkeypatch.setattr(fft_cuda, "SHAPE", (5, 301, 17))
    assert fft_cuda.run(print, space)
    out = capsys.readouterr().out
    assert "[cuda] 5 signals x 301 samples (*) 17 taps" in out and "(ok)" in out and "cupy.fft" in out
    assert len(emulator.executed) > 2 and len(emulator.destroyed) >= 2  # cuFFT ran; the with block freed both plans
    small = [("1-D 97", "c2c", (97,), None, "single"), ("batch 6x64", "c2c", (6, 64), (-1,), "double"),
             ("r2c 16x12", "r2c", (16, 12), None, "single")]
    monkeypatch.setattr(suite_fft_cuda, "specs", lambda quick: small)
    cases = suite_fft_cuda.cases(quick=True, space=space)
    assert [c.name for c in cases] == ["1-D 97 complex64", "batch 6x64 complex128", "r2c 16x12 float32"]
    for case in cases:
        ours, theirs = (np.asarray(case.impls[k]()) for k in ("nvmathpy", "cupy.fft"))
        assert ours.shape == theirs.shape and np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < 1e-5
    results = harness.run_cases(cases, repeats=2, min_seconds=1e-4, timer=space.timer)
    assert "nvmathpy vs cupy.fft" in harness.format_table(results)
    for case in cases:  # the plans, while the emulated cuFFT is in place
        case.impls["nvmathpy"].__self__.free()


def test_gpu_solvers_demo_and_bench_on_the_emulation(emulated_cuda, monkeypatch, capsys, request):
    import scipy.linalg as sla
    from cuda_emulation import _host
    from cuda_emulation_solvers import install

    from nvmathpy.bench import harness, suite_linalg_cuda, suite_scipy_cuda
    from nvmathpy.demos import solvers_cuda
    from nvmathpy.linalg.solvers.cuda import _functions as _cusolver_functions

    _cusolver_functions.plan_cache().clear()  # no plan made under another emulation, none left for others
    request.addfinalizer(_cusolver_functions.plan_cache().clear)

    space, _ = emulated_cuda
    emulation = install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False),
                        monkeypatch.setitem)
    cupyx_linalg = types.ModuleType("cupyx.scipy.linalg")  # the peer code's cupyx calls, on the host
    cupyx_linalg.lu_factor, cupyx_linalg.lu_solve = sla.lu_factor, _host(sla.lu_solve)
    cupyx_linalg.solve_triangular = _host(sla.solve_triangular)
    cupyx_scipy = types.SimpleNamespace(linalg=cupyx_linalg)
    for name, module in (("cupyx", types.SimpleNamespace(scipy=cupyx_scipy)), ("cupyx.scipy", cupyx_scipy),
                         ("cupyx.scipy.linalg", cupyx_linalg)):
        monkeypatch.setitem(sys.modules, name, module)
    for name, value in (("LU_N", 37), ("LU_RHS", 3), ("BATCH", 50), ("BATCH_N", 8), ("WORK_N", 29)):
        monkeypatch.setattr(solvers_cuda, name, value)
    assert solvers_cuda.run(print, space)
    out = capsys.readouterr().out
    assert "[cuda] LU plan, n=37 float64" in out and "[ok]" in out and "FAILED" not in out
    assert "cusolverDnXgetrf" in emulation.names() and "cusolverDnXgetrs" in emulation.names()
    monkeypatch.setattr(suite_linalg_cuda, "specs", lambda quick: [("float64", 100, 4), ("float32", 50, 8),
                                                                   ("float64", 1, 33)])
    monkeypatch.setattr(suite_scipy_cuda, "sizes", lambda quick: ())  # the drop-in's rows: the next test
    cases = suite_linalg_cuda.cases(quick=True, space=space)
    assert [c.name for c in cases] == ["batched solve B=100 n=4 float64", "batched solve B=50 n=8 float32",
                                       "solve n=33 float64"]
    for case in cases:
        ours, theirs = (np.asarray(case.impls[k](), np.float64) for k in ("nvmathpy", "cupy.linalg.solve"))
        assert np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < (1e-4 if "float32" in case.name else 1e-12)
    results = harness.run_cases(cases, repeats=2, min_seconds=1e-4, timer=space.timer)
    assert "nvmathpy vs cupy.linalg.solve" in harness.format_table(results)


def test_gpu_scipy_dropin_rows_on_the_emulation(emulated_cuda, monkeypatch, request):
    """The drop-in rows of the linalg suite: one per function and size, nvmathpy.scipy.linalg's
    result matching CuPy's function (NumPy's on the emulation), timed beside it."""
    import scipy.linalg as sla
    from cuda_emulation import _host
    from cuda_emulation_solvers import install

    from nvmathpy.bench import harness, suite_scipy_cuda
    from nvmathpy.linalg.solvers.cuda import _functions as _cusolver_functions

    _cusolver_functions.plan_cache().clear()
    request.addfinalizer(_cusolver_functions.plan_cache().clear)
    space, _ = emulated_cuda
    install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False), monkeypatch.setitem)
    cupy = sys.modules["cupy"]
    extra = {"qr": _host_tuple(np.linalg.qr), "svd": _host_tuple(np.linalg.svd), "inv": _host(np.linalg.inv),
             "det": _host(np.linalg.det)}
    monkeypatch.setattr(cupy, "linalg", types.SimpleNamespace(**{**vars(cupy.linalg), **extra}))
    cupyx_linalg = types.ModuleType("cupyx.scipy.linalg")
    cupyx_linalg.lu_factor, cupyx_linalg.lu_solve = _host_tuple(sla.lu_factor), _host(sla.lu_solve)
    cupyx_linalg.solve_triangular = _host(sla.solve_triangular)
    cupyx_scipy = types.SimpleNamespace(linalg=cupyx_linalg)
    for name, module in (("cupyx", types.SimpleNamespace(scipy=cupyx_scipy)), ("cupyx.scipy", cupyx_scipy),
                         ("cupyx.scipy.linalg", cupyx_linalg)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(suite_scipy_cuda, "sizes", lambda quick: (8, 33))
    cases = suite_scipy_cuda.cases(quick=True, space=space)
    assert len(cases) == 24 and cases[0].name == "scipy solve n=8 float64"
    assert cases[-1].name == "scipy det n=33 float64"

    def compared(name, ours, theirs):
        if name.startswith(("scipy qr", "scipy svd")):
            return (ours[0] @ ours[1], theirs[0] @ theirs[1]) if "qr" in name else (ours[1], theirs[1])
        if name.startswith(("scipy lu_factor", "scipy eigh", "scipy lstsq")):
            return ours[0], theirs[0]
        return ours, (theirs.T if name.startswith("scipy cholesky") else theirs)

    for case in cases:
        ours, theirs = (np.asarray(x, np.float64) for x in compared(case.name, case.impls["nvmathpy"](),
                                                                     case.impls["cupy"]()))
        assert np.linalg.norm(ours - theirs) <= 1e-10 * np.linalg.norm(theirs), case.name
    results = harness.run_cases(cases[:3], repeats=2, min_seconds=1e-4, timer=space.timer)
    assert "nvmathpy vs cupy" in harness.format_table(results)


def test_a_raising_demo_is_reported_and_the_tour_goes_on(monkeypatch, capsys):
    from nvmathpy.demos import fft, matmul

    def broken(echo):
        raise RuntimeError("engine missing")

    monkeypatch.setattr(matmul, "run", broken)
    monkeypatch.setattr(fft, "run", lambda echo: echo("fft ran") or True)
    assert main(["demo", "matmul", "fft", "--space", "cpu"]) == 1
    captured = capsys.readouterr()
    assert "demo matmul raised" in captured.err and "RuntimeError: engine missing" in captured.err
    assert "fft ran" in captured.out and "demo FAILED checks in: matmul" in captured.out
