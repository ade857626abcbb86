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

import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INI = "[pytest]\naddopts = -p no:cacheprovider\n"


@dataclass(frozen=True)
class Suite:
    """A peer's test files (in ``package``), how to rewrite each, and the conftest they need.

    ``rewrites`` maps a file name to ``(pattern, replacement)`` pairs; each must match at least
    once (a rewrite that matches nothing would silently test the peer itself), and afterwards
    no line may match ``leftover``.
    """

    package: str
    rewrites: dict[str, list[tuple[str, str]]]
    leftover: str
    conftest: str = ""
    peer_conftest: str = ""
    files: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.rewrites))


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


def _tests_folder(suite: Suite) -> Path | None:
    try:
        spec = importlib.util.find_spec(suite.package)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if all((folder / name).is_file() for name in suite.files) else None


def _rewritten(suite: Suite, name: str, text: str) -> str:
    for pattern, replacement in suite.rewrites[name]:
        text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        assert count, f"{name}: the pattern {pattern!r} no longer matches the installed file; update the suite"
    leftover = re.search(suite.leftover, text, flags=re.MULTILINE)
    assert leftover is None, f"{name} still tests the peer: {leftover.group(0)!r}"
    return text


def _start(folder: Path, files: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen:
    """A pytest run of ``files`` in ``folder``, writing a JUnit report there."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
         f"--junitxml={folder / 'report.xml'}", *files],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _outcomes(proc: subprocess.Popen, folder: Path) -> dict[str, str]:
    """Outcome by test id (``passed``, ``failed``, ``error``, ``skipped``) of a finished run."""
    output, _ = proc.communicate(timeout=600)
    report = folder / "report.xml"
    assert report.is_file(), output[-8000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        outcome = next((tag for tag in ("failure", "error", "skipped") if tag in tags), "passed")
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


@pytest.mark.parametrize("suite", [NUMPY, SCIPY], ids=["numpy", "scipy"])
def test_peer_suite_passes(suite: Suite, tmp_path: Path) -> None:
    source = _tests_folder(suite)
    if source is None:
        pytest.skip(f"{suite.package} is not installed")
    peer, reference = tmp_path / "nvmathpy", tmp_path / "peer"
    for folder, conftest in ((peer, suite.peer_conftest), (reference, suite.conftest)):
        folder.mkdir()
        (folder / "pytest.ini").write_text(INI)
        if conftest:
            (folder / "conftest.py").write_text(conftest)
    for name in suite.files:
        text = (source / name).read_text()
        (reference / name).write_text(text)
        (peer / name).write_text(_rewritten(suite, name, text))
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "NVMATHPY_CACHE_DIR": str(tmp_path / "cache")}
    runs = [(_start(folder, suite.files, env), folder) for folder in (reference, peer)]  # side by side
    try:
        expected, got = (_outcomes(proc, folder) for proc, folder in runs)
    finally:
        for proc, _ in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert expected and set(got) == set(expected)
    wrong = {test_id: outcome for test_id, outcome in got.items()
             if outcome != "passed" and expected[test_id] == "passed"}
    assert not wrong, f"{len(wrong)} of {len(got)} of {suite.package} do not pass with nvmathpy: {wrong}"
