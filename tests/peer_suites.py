"""Running a peer's own installed test files against one of nvmathpy's compatibility namespaces.

The installed files are copied into a temporary folder and rewritten there so that the names
they test are nvmathpy's; the installed packages are never touched. The copies run in a pytest
subprocess, and beside it unmodified copies against the peer itself; :func:`run_side_by_side`
returns both runs' outcomes by test id, for the caller to compare.
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


def installed_tests(suite: Suite) -> Path | None:
    """The installed folder of ``suite``'s files, or ``None`` where any of them is missing."""
    try:
        spec = importlib.util.find_spec(suite.package)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if all((folder / name).is_file() for name in suite.files) else None


def rewritten(suite: Suite, name: str, text: str) -> str:
    """``text`` (the installed file ``name``) with ``suite``'s rewrites applied, each checked."""
    for pattern, replacement in suite.rewrites[name]:
        text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        assert count, f"{name}: the pattern {pattern!r} no longer matches the installed file; update the suite"
    leftover = re.search(suite.leftover, text, flags=re.MULTILINE)
    assert leftover is None, f"{name} still tests the peer: {leftover.group(0)!r}"
    return text


def _start(folder: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A pytest run of ``args`` (files, options) in ``folder``, writing a JUnit report there."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
         f"--junitxml={folder / 'report.xml'}", *args],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _outcomes(proc: subprocess.Popen, folder: Path) -> dict[str, str]:
    """Outcome by test id (``passed``, ``failed``, ``error``, ``skipped``) of a finished run."""
    output, _ = proc.communicate(timeout=1200)
    report = folder / "report.xml"
    assert report.is_file(), output[-8000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        outcome = next((tag for tag in ("failure", "error", "skipped") if tag in tags), "passed")
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


def run_side_by_side(suite: Suite, source: Path, tmp_path: Path, files: tuple[str, ...] | None = None,
                     options: tuple[str, ...] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """``(with the peer, with nvmathpy)``: outcomes by test id of ``files`` (default: all of
    ``suite``'s) copied from ``source``, run unmodified and rewritten, side by side, each in a
    pytest subprocess given ``options``."""
    files = suite.files if files is None else files
    peer, reference = tmp_path / "nvmathpy", tmp_path / "peer"
    for folder, conftest in ((peer, suite.peer_conftest), (reference, suite.conftest)):
        folder.mkdir()
        (folder / "pytest.ini").write_text(INI)
        if conftest:
            (folder / "conftest.py").write_text(conftest)
    for name in files:
        text = (source / name).read_text()
        (reference / name).write_text(text)
        (peer / name).write_text(rewritten(suite, name, text))
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "NVMATHPY_CACHE_DIR": str(tmp_path / "cache")}
    runs = [(_start(folder, [*options, *files], env), folder) for folder in (reference, peer)]
    try:
        expected, got = (_outcomes(proc, folder) for proc, folder in runs)
    finally:
        for proc, _ in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return expected, got


def not_passing(expected: dict[str, str], got: dict[str, str]) -> dict[str, str]:
    """The tests that pass with the peer but not with nvmathpy, with nvmathpy's outcome; both
    runs must hold the same, non-empty set of tests (so a check cannot pass by collecting
    nothing)."""
    assert expected, "the peer's run collected no test"
    assert set(got) == set(expected), (
        f"collected sets differ: only with the peer {sorted(set(expected) - set(got))[:20]}, "
        f"only with nvmathpy {sorted(set(got) - set(expected))[:20]}")
    return {test_id: outcome for test_id, outcome in got.items()
            if outcome != "passed" and expected[test_id] == "passed"}
