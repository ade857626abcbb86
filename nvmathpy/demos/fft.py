"""Demo: FFT convolution of a batch of signals with one filter, through two planned FFTs.

The batch is transformed with an r2c plan (zero-padded to the full convolution length),
multiplied by the filter's spectrum and brought back with a c2r plan; the result is checked
against a float64 NumPy reference (numpy.fft, and ``numpy.convolve`` on a few rows) and the
whole convolution is timed beside the same code written with numpy.fft and scipy.fft.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

TITLE = "fft: FFT convolution of a signal batch (r2c -> multiply -> c2r plans), vs numpy.fft/scipy.fft"


def run(echo: Callable[[str], None]) -> bool:
    """Run the demo, report through ``echo``; True when every check passed."""
    import scipy.fft

    from ..execution import ExecutionCPU
    from ..fft import FFT
    from ..plan import time_candidates

    rng = np.random.default_rng(0)
    signals = rng.standard_normal((64, 12000))
    taps = rng.standard_normal(801) * np.hanning(801)
    full = signals.shape[1] + taps.size - 1
    length = scipy.fft.next_fast_len(full, real=True)
    threads = os.cpu_count() or 1
    spectrum = np.fft.rfft(taps, length)

    forward = FFT(signals, axes=[-1], s=[length], execution=ExecutionCPU(threads))
    forward.autotune(repeats=3)
    product = np.empty(forward.result_shape, np.complex128)
    inverse = FFT(product, axes=[-1], s=[length], kind="c2r", execution=ExecutionCPU(threads))
    inverse.autotune(repeats=3)

    def nvmathpy_convolve() -> np.ndarray:
        np.multiply(forward.execute(), spectrum, out=product)
        return inverse.execute()[:, :full]

    def numpy_convolve() -> np.ndarray:
        return np.fft.irfft(np.fft.rfft(signals, length) * spectrum, length)[:, :full]

    def scipy_convolve() -> np.ndarray:
        spec = scipy.fft.rfft(signals, length, workers=threads) * spectrum
        return scipy.fft.irfft(spec, length, workers=threads)[:, :full]

    with forward, inverse:
        got = nvmathpy_convolve()
        want = numpy_convolve()
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        direct = np.array([np.convolve(signals[i], taps) for i in (0, 31, 63)])
        err_direct = float(np.linalg.norm(got[[0, 31, 63]] - direct) / np.linalg.norm(direct))
        ok = err < 1e-12 and err_direct < 1e-12
        echo(f"{signals.shape[0]} signals x {signals.shape[1]} samples (*) {taps.size} taps, FFT length {length}: "
             f"error vs numpy.fft {err:.1e}, vs numpy.convolve {err_direct:.1e} ({'ok' if ok else 'FAILED'})")
        echo(f"plans: r2c {forward.candidate} ({forward.chosen_by}), c2r {inverse.candidate} ({inverse.chosen_by})")
        times = time_candidates(
            [("nvmathpy", nvmathpy_convolve), ("numpy", numpy_convolve), ("scipy", scipy_convolve)], repeats=7
        )
        t_nvm, t_np, t_sp = times["nvmathpy"], times["numpy"], times["scipy"]
        echo(f"time: nvmathpy {t_nvm * 1e3:.2f} ms, numpy.fft {t_np * 1e3:.2f} ms ({t_np / t_nvm:.2f}x), "
             f"scipy.fft workers={threads} {t_sp * 1e3:.2f} ms ({t_sp / t_nvm:.2f}x)")
    return bool(ok)
