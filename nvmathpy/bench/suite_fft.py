"""The FFT suite of ``python -m nvmathpy bench``: nvmathpy's tuned plans beside numpy.fft,
scipy.fft and each installed FFT library called the way its users call it (ducc0 with
``nthreads``, a ``pyfftw.FFTW`` object planned with FFTW_MEASURE under the planning time limit
nvmathpy's tuning gets, :data:`FFTW_TIME_LIMIT`, mkl_fft with MKL's thread count set), at 1 and
2 threads."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..fft._libraries import forget_fftw_wisdom
from ..fft._pyfftw import import_pyfftw
from .harness import Case

__all__ = ["CASES", "QUICK", "FFTW_TIME_LIMIT", "TRIG_CASES", "TRIG_QUICK", "cases", "make_input", "direct_runners",
           "forget_fftw_wisdom", "trig_runners"]

CASES = [  # (label, kind, shape, axes)
    ("1-D 1000", "c2c", (1000,), None),
    ("1-D 1024", "c2c", (1024,), None),
    ("1-D 4096", "c2c", (4096,), None),
    ("1-D 65536", "c2c", (65536,), None),
    ("1-D 2^20", "c2c", (1 << 20,), None),
    ("1-D 10007 (prime)", "c2c", (10007,), None),
    ("batch 1024x4096", "c2c", (1024, 4096), (-1,)),
    ("2-D 512^2", "c2c", (512, 512), None),
    ("2-D 2048^2", "c2c", (2048, 2048), None),
    ("3-D 128^3", "c2c", (128, 128, 128), None),
    ("r2c 2^20", "r2c", (1 << 20,), None),
    ("r2c 2048^2", "r2c", (2048, 2048), None),
]
#: DCT/DST cases: (label, shape, axes); each runs DCT-II and DST-III.
TRIG_CASES = [
    ("1-D 1000", (1000,), (0,)),
    ("1-D 4096", (4096,), (0,)),
    ("1-D 2^20", (1 << 20,), (0,)),
    ("batched 1024x4096", (1024, 4096), (1,)),
    ("2-D 2048^2", (2048, 2048), (0, 1)),
]
TRIG_QUICK = {"1-D 4096"}
#: Seconds FFTW may plan one candidate while tuning (keeps a full run near 10 minutes), and the
#: same limit for the pyFFTW column: both sides plan FFTW under one budget. (FFTW_MEASURE of
#: r2c 2^20 at 2 threads needs 25-30 s here; under the limit FFTW keeps its FFTW_ESTIMATE plan
#: and records the time-out in its wisdom, so planning again under the limit gains nothing.)
FFTW_TIME_LIMIT = 3.0
QUICK = {"1-D 1024", "1-D 65536", "1-D 10007 (prime)", "2-D 512^2", "r2c 2^20"}


def make_input(kind: str, shape: tuple[int, ...], precision: str, rng: np.random.Generator) -> np.ndarray:
    real = np.float32 if precision == "single" else np.float64
    x = rng.standard_normal(shape).astype(real)
    if kind == "c2c":
        x = (x + 1j * rng.standard_normal(shape).astype(real)).astype(np.result_type(real, np.complex64))
    return x



def direct_runners(x: np.ndarray, kind: str, axes: Any, threads: int,
                   fftw_time_limit: float | None = FFTW_TIME_LIMIT) -> dict[str, Callable[[], Any]]:
    """Each library called the way its users call it, at ``threads``.

    pyFFTW: a ``pyfftw.FFTW`` object on aligned arrays (what ``pyfftw.builders`` makes, which
    takes no time limit), planned with FFTW_MEASURE and ``planning_timelimit=fftw_time_limit``
    seconds (``None``: no limit), called with the operand as ``builders`` objects are.
    """
    import scipy.fft as sfft

    ax = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    runners: dict[str, Callable[[], Any]] = {}
    if kind == "c2c":
        runners["numpy.fft"] = lambda: np.fft.fftn(x, axes=ax)
        runners["scipy.fft"] = lambda: sfft.fftn(x, axes=ax, workers=threads)
    else:
        runners["numpy.fft"] = lambda: np.fft.rfftn(x, axes=ax)
        runners["scipy.fft"] = lambda: sfft.rfftn(x, axes=ax, workers=threads)
    try:
        import ducc0

        ducc = ducc0.fft.c2c if kind == "c2c" else ducc0.fft.r2c
        runners["ducc0"] = lambda: ducc(x, axes=list(ax), nthreads=threads)
    except ImportError:
        pass
    try:
        pyfftw = import_pyfftw()  # (bound to its own FFTW: see there)

        out_shape = x.shape if kind == "c2c" else tuple(n // 2 + 1 if i == ax[-1] else n for i, n in enumerate(x.shape))
        fftw = pyfftw.FFTW(pyfftw.empty_aligned(x.shape, x.dtype),
                           pyfftw.empty_aligned(out_shape, np.result_type(x.dtype, np.complex64)), axes=ax,
                           flags=("FFTW_MEASURE",), threads=threads, planning_timelimit=fftw_time_limit)
        runners["pyfftw"] = lambda: fftw(x)
    except ImportError:
        pass
    try:
        import mkl_fft
        from threadpoolctl import ThreadpoolController

        ThreadpoolController().select(internal_api="mkl").limit(limits=threads)  # as mkl.set_num_threads
        mkl_fn = mkl_fft.fftn if kind == "c2c" else mkl_fft.rfftn
        runners["mkl_fft"] = lambda: mkl_fn(x, axes=ax)
    except ImportError:
        pass
    return runners


def cases(quick: bool) -> list[Case]:
    from ..execution import ExecutionCPU
    from ..fft import FFT

    rng = np.random.default_rng(0)
    out: list[Case] = []
    for label, kind, shape, axes in CASES:
        if quick and label not in QUICK:
            continue
        for precision in ("single", "double"):
            x = make_input(kind, shape, precision, rng)
            for threads in (1, 2):
                with FFT(x, axes=axes, execution=ExecutionCPU(threads),
                         options={"fftw_time_limit": FFTW_TIME_LIMIT}) as tuning:
                    tuning.autotune(effort="measure", repeats=3)
                forget_fftw_wisdom()  # pyfftw plans as in a new process, not with the tuning's searches
                runners = direct_runners(x, kind, axes, threads)
                plan = FFT(x, axes=axes, execution=ExecutionCPU(threads)).plan()  # from wisdom
                runners["nvmathpy"] = plan.execute
                out.append(Case("fft", f"{label} {x.dtype.name}", "scipy.fft", runners, threads=threads,
                                note=str(plan.candidate)))
    return out + trig_cases(quick, rng)


def trig_runners(x: np.ndarray, transform: str, type_: int, axes: Any, threads: int) -> dict[str, Callable[[], Any]]:
    """scipy.fft's ``dctn``/``dstn`` with ``workers`` and, when installed, ducc0's with ``nthreads``."""
    import importlib.util

    import scipy.fft

    function = getattr(scipy.fft, transform + "n")
    runners = {"scipy.fft": lambda: function(x, type=type_, axes=axes, workers=threads)}
    if importlib.util.find_spec("ducc0") is not None:
        import ducc0

        direct = getattr(ducc0.fft, transform)
        runners["ducc0"] = lambda: direct(x, type=type_, axes=axes, nthreads=threads)
    return runners


def trig_cases(quick: bool, rng: np.random.Generator) -> list[Case]:
    """DCT-II and DST-III plans, tuned, beside scipy.fft and ducc0 at 2 threads."""
    from ..execution import ExecutionCPU
    from ..fft import DCT, DST

    out: list[Case] = []
    for label, shape, axes in TRIG_CASES:
        if quick and label not in TRIG_QUICK:
            continue
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal(shape).astype(dtype)
            for name, type_, plan_class in (("dct", 2, DCT), ("dst", 3, DST)):
                with plan_class(x, type=type_, axes=axes, execution=ExecutionCPU(2)) as tuning:
                    tuning.autotune(effort="measure", repeats=3)
                plan = plan_class(x, type=type_, axes=axes, execution=ExecutionCPU(2)).plan()  # from wisdom
                runners = trig_runners(x, name, type_, axes, 2)
                runners["nvmathpy"] = plan.execute
                roman = {2: "II", 3: "III"}[type_]
                out.append(Case("fft", f"{name.upper()}-{roman} {label} {x.dtype.name}", "scipy.fft", runners,
                                threads=2, note=str(plan.candidate)))
    return out
