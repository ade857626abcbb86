"""The peers' own FFT tests, as installed, run against nvmathpy's compatibility namespaces:
NumPy's ``numpy/fft/tests/test_pocketfft.py`` and ``test_helper.py`` against
:mod:`nvmathpy.fft`, and SciPy's ``scipy/fft/tests/test_basic.py``, ``test_real_transforms.py``
and ``test_helper.py`` against :mod:`nvmathpy.scipy.fft`.

The installed files are copied into a temporary folder and rewritten there so that the names
they test (``np.fft``, ``scipy.fft``, ``from scipy.fft import ...``) are nvmathpy's; the
installed packages are never touched. The copies run in a pytest subprocess, and beside it
unmodified copies against the peer itself: every test that passes with the peer must pass with
nvmathpy, and both runs must hold the same tests (so the check cannot pass by collecting
nothing). SciPy's tests need its conftest (the ``xp`` fixture) and its table of array-API
capabilities, which the copied folder's conftest brings in and extends to nvmathpy's functions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from peer_suites import Suite, not_passing, run_side_by_side, installed_tests

NUMPY = Suite(
    "numpy.fft.tests",
    {
        "test_pocketfft.py": [(r"^import numpy as np$", "import numpy as np\nimport nvmathpy.fft as _peer_fft"),
                              (r"\bnp\.fft\b", "_peer_fft")],
        "test_helper.py": [(r"^from numpy import fft, pi$", "from numpy import pi\nimport nvmathpy.fft as fft")],
    },
    leftover=r"\bnumpy\.fft\b|\bnp\.fft\b|from numpy import fft",
)

_SCIPY_CONFTEST = "from scipy.conftest import *  # noqa: F401,F403 (SciPy's fixtures: xp, ...)\n"
SCIPY = Suite(
    "scipy.fft.tests",
    {
        "test_basic.py": [(r"^import scipy\.fft as fft$", "import nvmathpy.scipy.fft as fft")],
        "test_real_transforms.py": [(r"^from scipy\.fft import ", "from nvmathpy.scipy.fft import "),
                                    (r"^import scipy\.fft as fft$", "import nvmathpy.scipy.fft as fft")],
        "test_helper.py": [(r"^from scipy import fft$", "import nvmathpy.scipy.fft as fft")],
    },
    leftover=r"^\s*(import scipy\.fft\b|from scipy\.fft import|from scipy import fft\b)",
    conftest=_SCIPY_CONFTEST,
    peer_conftest=_SCIPY_CONFTEST + (
        "import scipy.fft\n"
        "from scipy._lib._array_api import xp_capabilities_table\n"
        "import nvmathpy.scipy.fft as peer\n"
        "for name in peer.__all__:\n"
        "    theirs = getattr(scipy.fft, name, None)\n"
        "    if theirs in xp_capabilities_table:\n"
        "        xp_capabilities_table[getattr(peer, name)] = xp_capabilities_table[theirs]\n"
    ),
)


@pytest.mark.parametrize("suite", [NUMPY, SCIPY], ids=["numpy", "scipy"])
def test_peer_suite_passes(suite: Suite, tmp_path: Path) -> None:
    source = installed_tests(suite)
    if source is None:
        pytest.skip(f"{suite.package} is not installed")
    expected, got = run_side_by_side(suite, source, tmp_path)
    wrong = not_passing(expected, got)
    assert not wrong, f"{len(wrong)} of {len(got)} of {suite.package} do not pass with nvmathpy: {wrong}"
