"""pyFFTW beside MKL in one process: pyFFTW's compiled module bound to the FFTW libraries it
ships before MKL's runtime starts (:func:`bind_pyfftw_first`).

MKL's runtime loads its interface library into the process's global scope at its first call,
and that library defines FFTW's API (MKL's FFTW wrappers). A pyFFTW loaded as usual resolves
each FFTW function at its first call, global scope first: the calls made after MKL's first one
went to MKL's wrappers - plans that fail ("the planner returning NULL") or, for some
multi-axis real transforms, wrong results. The FFT libraries (pyFFTW, mkl_fft) and the
``eig`` drop-in's MKL ``?geev`` both call this before they load pyFFTW or MKL.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["bind_pyfftw_first"]


@functools.lru_cache(maxsize=1)
def bind_pyfftw_first() -> bool:
    """Load pyFFTW's compiled module, where pyFFTW is installed and not imported yet, with its
    symbols bound now and to its own libraries first (``RTLD_NOW | RTLD_DEEPBIND``, where the
    platform has it); ``import pyfftw`` then finds it loaded. Returns whether pyFFTW is safe
    beside MKL: bound so here, or not installed (``False`` where it was imported before, by
    another module, as usual: nothing can bind it again).

    Examples
    --------
    >>> bind_pyfftw_first() in (True, False)
    True
    """
    deep = getattr(os, "RTLD_DEEPBIND", 0)
    spec = importlib.util.find_spec("pyfftw") if "pyfftw" not in sys.modules else None
    if spec is None:
        return "pyfftw" not in sys.modules
    if not deep or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "pyfftw" + suffix)
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=os.RTLD_NOW | deep)
                except OSError:  # the import then reports what is wrong
                    return False
                return True
    return False
