"""Fast Fourier transforms: the :class:`FFT` plan, numpy.fft-compatible functions, and the
:class:`DCT`/:class:`DST` plans (real-to-real transforms; their one-call functions are in
:mod:`nvmathpy.scipy.fft`, as SciPy has them).

Names load lazily: importing :mod:`nvmathpy.fft` costs nothing until a name is used.
Submodules are never named like a public function, so importing one cannot shadow it.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_FUNCTIONS = (
    "fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft ihfft "
    "fftfreq rfftfreq fftshift ifftshift"
).split()
_NAMES = {"FFT": "fft_plan", "FFTOptions": "fft_plan", "DCT": "trig_plan", "DST": "trig_plan",
          **{name: "functions" for name in _FUNCTIONS}}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)


def __dir__() -> list[str]:
    return __all__
