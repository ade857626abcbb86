"""NumPy's own FFT tests (``numpy/fft/tests/test_pocketfft.py`` and ``test_helper.py``, as
installed) run against :mod:`nvmathpy.fft`.

The installed files are copied into a temporary folder and rewritten there so that ``np.fft``
(and ``from numpy import fft``) name :mod:`nvmathpy.fft`; the installed NumPy is never touched.
The copies run in a pytest subprocess, and so do unmodified copies against NumPy itself: every
test that passes with NumPy must pass with nvmathpy, and both runs must hold the same tests
(so the check cannot pass by collecting nothing).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = ("test_pocketfft.py", "test_helper.py")
#: (pattern, replacement) applied to each copied file; each must match at least once per file
#: it is meant for (a rewrite that matches nothing would silently test NumPy itself).
REWRITES = {
    "test_pocketfft.py": [(r"^import numpy as np$", "import numpy as np\nimport nvmathpy.fft as _peer_fft"),
                          (r"\bnp\.fft\b", "_peer_fft")],
    "test_helper.py": [(r"^from numpy import fft, pi$", "from numpy import pi\nimport nvmathpy.fft as fft")],
}
INI = "[pytest]\naddopts = -p no:cacheprovider\n"


def _tests_folder() -> Path | None:
    try:
        spec = importlib.util.find_spec("numpy.fft.tests")
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if all((folder / name).is_file() for name in FILES) else None


def _rewritten(name: str, text: str) -> str:
    """``text`` with every rewrite for ``name`` applied; a rewrite that matches nothing fails."""
    for pattern, replacement in REWRITES[name]:
        text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        assert count, f"{name}: the pattern {pattern!r} no longer matches NumPy's file; update REWRITES"
    assert not re.search(r"\bnumpy\.fft\b|\bnp\.fft\b|from numpy import fft", text), name
    return text


def _run(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """Outcome by test id (``passed``, ``failed``, ``error``, ``skipped``) of a pytest run in ``folder``."""
    report = folder / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
         f"--junitxml={report}", *FILES],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )
    assert report.is_file(), proc.stdout[-4000:] + proc.stderr[-4000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        children = {child.tag for child in case}
        outcome = next((tag for tag in ("failure", "error", "skipped") if tag in children), "passed")
        outcomes[test_id] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


def test_numpy_fft_suite_passes(tmp_path: Path) -> None:
    source = _tests_folder()
    if source is None:
        pytest.skip("NumPy's FFT tests are not installed")
    peer, reference = tmp_path / "nvmathpy", tmp_path / "numpy"
    for folder in (peer, reference):
        folder.mkdir()
        (folder / "pytest.ini").write_text(INI)
    for name in FILES:
        text = (source / name).read_text()
        (reference / name).write_text(text)
        (peer / name).write_text(_rewritten(name, text))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "NVMATHPY_CACHE_DIR": str(tmp_path / "cache")}
    expected = _run(reference, env)
    got = _run(peer, env)
    assert expected and set(got) == set(expected)
    wrong = {test_id: outcome for test_id, outcome in got.items()
             if outcome != "passed" and expected[test_id] == "passed"}
    assert not wrong, f"{len(wrong)} of {len(got)} of NumPy's FFT tests do not pass with nvmathpy.fft: {wrong}"
