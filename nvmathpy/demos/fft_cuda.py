"""Demo on the GPU: FFT convolution of a batch of signals with one filter, through two planned
cuFFT transforms on CuPy arrays.

The batch is transformed with an r2c plan (zero-padded to the full convolution length),
multiplied by the filter's spectrum and brought back with a c2r plan; the result is checked on the
host against a float64 NumPy reference (numpy.fft, and ``numpy.convolve`` on a few rows) and the
whole convolution is timed with CUDA events beside the same code written with cupy.fft.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

TITLE = "fft: FFT convolution of a signal batch (r2c -> multiply -> c2r plans) on the GPU, vs cupy.fft"

#: Signals, samples per signal, filter taps.
SHAPE = (512, 48000, 801)


def run(echo: Callable[[str], None], space: Any) -> bool:
    """Run the demo on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`), report through
    ``echo``; True when every check passed."""
    import scipy.fft

    from ..fft import FFT

    xp = space.xp
    count, samples, n_taps = SHAPE
    rng = np.random.default_rng(0)
    signals_host = rng.standard_normal((count, samples))
    taps = rng.standard_normal(n_taps) * np.hanning(n_taps)
    full = samples + n_taps - 1
    length = scipy.fft.next_fast_len(full, real=True)
    signals, spectrum = space.to_device(signals_host), space.to_device(np.fft.rfft(taps, length))

    forward = FFT(signals, axes=[-1], s=[length])
    forward.autotune(repeats=3)
    product = xp.empty(forward.result_shape, xp.complex128)
    inverse = FFT(product, axes=[-1], s=[length], kind="c2r")
    inverse.autotune(repeats=3)

    def nvmathpy_convolve() -> Any:
        xp.multiply(forward.execute(), spectrum, out=product)
        return inverse.execute()[:, :full]

    def cupy_convolve() -> Any:
        return xp.fft.irfft(xp.fft.rfft(signals, length) * spectrum, length)[:, :full]

    with forward, inverse:
        got = space.to_host(nvmathpy_convolve())
        want = np.fft.irfft(np.fft.rfft(signals_host, length) * np.fft.rfft(taps, length), length)[:, :full]
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        rows = [0, count // 2, count - 1]
        direct = np.array([np.convolve(signals_host[i], taps) for i in rows])
        err_direct = float(np.linalg.norm(got[rows] - direct) / np.linalg.norm(direct))
        ok = err < 1e-12 and err_direct < 1e-12
        echo(f"[{space.name}] {count} signals x {samples} samples (*) {n_taps} taps, FFT length {length}, float64 on "
             f"{space.description}: error vs numpy.fft {err:.1e}, vs numpy.convolve {err_direct:.1e} "
             f"({'ok' if ok else 'FAILED'})")
        echo(f"plans: r2c {forward.candidate} ({forward.chosen_by}), c2r {inverse.candidate} ({inverse.chosen_by})")
        t_nvm, t_cupy = space.median_seconds(nvmathpy_convolve), space.median_seconds(cupy_convolve)
        echo(f"time (CUDA events): nvmathpy {t_nvm * 1e3:.3f} ms, cupy.fft {t_cupy * 1e3:.3f} ms "
             f"({t_cupy / t_nvm:.2f}x)")
    return bool(ok)
