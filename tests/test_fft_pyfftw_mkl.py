"""pyFFTW beside MKL in one process: MKL's runtime (``mkl_fft``'s transforms, MKL's ``?geev`` of
the ``eig`` drop-in) loads its FFTW wrappers into the process's global scope at its first call;
pyFFTW, imported through nvmathpy afterwards, must still run on its own FFTW libraries (before
the fix its plans failed, "the planner returning NULL", or gave wrong multi-axis results).

Each case runs in a fresh interpreter, where the order of the loads is the test's own. A program
that imports pyFFTW itself before nvmathpy's first use of MKL cannot be helped (pyFFTW is loaded
by then): :func:`bind_pyfftw_first` says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyfftw")
pytest.importorskip("mkl_fft")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import numpy as np
{first}
import pyfftw  # the user's own import, after nvmathpy's first use of MKL, or through nvmathpy's
import pyfftw.builders
from nvmathpy.fft import FFT
rng = np.random.default_rng(0)
x = rng.standard_normal((6, 10, 7))
z = x + 1j * rng.standard_normal(x.shape)
worst = 0.0
for axes in [(0, 2), (2, 0, 1), (1,), (0,)]:
    s = [x.shape[a] for a in axes]
    worst = max(worst, np.abs(pyfftw.builders.rfftn(x, axes=axes)() - np.fft.rfftn(x, axes=axes)).max(),
                np.abs(pyfftw.builders.fftn(z, axes=axes)() - np.fft.fftn(z, axes=axes)).max(),
                np.abs(pyfftw.builders.irfftn(np.fft.rfftn(x, axes=axes), s=s, axes=axes)() - x).max())
    for kind, v, want in (("c2c", z, np.fft.fftn(z, axes=axes)), ("r2c", x, np.fft.rfftn(x, axes=axes))):
        got = FFT(v, axes=axes, kind=kind, options={{"engines": ("pyfftw",)}}).plan().execute()  # nvmathpy's plans
        worst = max(worst, np.abs(got - want).max())
print(worst)
"""

FIRST = {
    "the user's mkl_fft, then nvmathpy's pyFFTW": ("import mkl_fft\nmkl_fft.fft(np.ones(8, complex))\n"
                                                   "from nvmathpy.fft._pyfftw import import_pyfftw\nimport_pyfftw()"),
    "nvmathpy's mkl_fft": ("from nvmathpy.fft import FFT\n"
                           "FFT(np.ones(64, complex), options={'engines': ('mkl_fft',)}).plan().execute()"),
    "nvmathpy's MKL geev": ("from nvmathpy.linalg.solvers.cpu._mkl_geev import geev\n"
                            "call = geev('d')\ncall is None or call(np.eye(3))"),
    "nothing": "",
}


@pytest.mark.parametrize("first", list(FIRST))
def test_pyfftw_runs_its_own_fftw_after_mkl_loaded_its_wrappers(first):
    script = SCRIPT.format(first=FIRST[first])
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) < 1e-12


def test_a_pyfftw_imported_before_cannot_be_bound_again():
    script = ("import pyfftw\nfrom nvmathpy._fftw_binding import bind_pyfftw_first\n"
              "print(bind_pyfftw_first())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stdout.split()[-1] == "False", done.stderr[-2000:]
