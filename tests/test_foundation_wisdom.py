"""Wisdom: round trips, corruption, foreign versions, disabling, and concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import sys

import pytest

from nvmathpy.plan import Problem, Wisdom, cache_dir
from nvmathpy.plan.wisdom import WisdomWarning

DEVICE = {"space": "cpu", "cpu": "test"}


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(tmp_path / "a"))
    assert cache_dir() == tmp_path / "a"
    monkeypatch.delenv("NVMATHPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "nvmathpy"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "nvmathpy"


def test_default_store_follows_env(isolated_cache):
    w = Wisdom()
    w.record(Problem.of("mm", m=1), DEVICE, {"label": "x", "params": {}})
    assert (isolated_cache / "wisdom.json").exists()


def test_record_lookup_device_and_problem_specific(tmp_path):
    w = Wisdom(tmp_path / "w.json", enabled=True)
    p = Problem.of("mm", m=3)
    w.record(p, DEVICE, {"label": "a", "params": {"t": 1}}, timings={"a": 1e-3}, extra={"fftw": "abc"})
    entry = w.lookup(p, DEVICE)
    assert entry["choice"] == {"label": "a", "params": {"t": 1}}
    assert entry["timings"] == {"a": 1e-3} and entry["extra"] == {"fftw": "abc"}
    assert w.lookup(p, {**DEVICE, "cpu": "other"}) is None
    assert w.lookup(Problem.of("mm", m=4), DEVICE) is None
    # a second store on the same file sees it; a later write from it is seen by the first
    w2 = Wisdom(tmp_path / "w.json", enabled=True)
    assert w2.lookup(p, DEVICE)["choice"]["label"] == "a"
    w2.record(Problem.of("mm", m=5), DEVICE, {"label": "b", "params": {}})
    assert w.lookup(Problem.of("mm", m=5), DEVICE)["choice"]["label"] == "b"


def test_record_rejects_non_json_before_touching_file(tmp_path):
    w = Wisdom(tmp_path / "w.json", enabled=True)
    with pytest.raises(TypeError):
        w.record(Problem.of("mm"), DEVICE, {"label": "a", "params": {}}, extra={"x": object()})
    assert not (tmp_path / "w.json").exists()


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "corrupt"),
        ('{"format": "nvmathpy-wisdom", "schema": 99, "entries": {}}', "foreign format"),
        ("[1, 2]", "foreign format"),
        ('{"format": "nvmathpy-wisdom", "schema": 1, "entries": []}', "no entry table"),
        (b"\xff\xfe\x00\x89garbage\x80", "corrupt"),  # not UTF-8
        ("[" * 200_000, "corrupt"),  # deeper than the JSON parser recurses
        ('{"format": "other", "schema": 1, "entries": {}}', "format 'other'"),
    ],
)
def test_corrupt_or_foreign_file_is_ignored_and_rebuilt(tmp_path, content, match):
    path = tmp_path / "w.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    w = Wisdom(path, enabled=True)
    with pytest.warns(WisdomWarning, match=match):
        assert w.lookup(Problem.of("mm"), DEVICE) is None
    with pytest.warns(WisdomWarning):
        w.record(Problem.of("mm"), DEVICE, {"label": "a", "params": {}})
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and len(data["entries"]) == 1
    assert w.lookup(Problem.of("mm"), DEVICE)["choice"]["label"] == "a"


def test_disabled_by_env(tmp_path, monkeypatch):
    monkeypatch.setenv("NVMATHPY_WISDOM", "off")
    w = Wisdom(tmp_path / "w.json")
    w.record(Problem.of("mm"), DEVICE, {"label": "a", "params": {}})
    assert not (tmp_path / "w.json").exists()
    assert w.lookup(Problem.of("mm"), DEVICE) is None and w.entries() == []


def test_export_import_clear(tmp_path):
    w = Wisdom(tmp_path / "w.json", enabled=True)
    for m in range(3):
        w.record(Problem.of("mm", m=m), DEVICE, {"label": f"c{m}", "params": {}})
    assert w.export(tmp_path / "out.json") == 3
    w.clear()
    assert w.entries() == []
    assert w.import_(tmp_path / "out.json") == 3
    assert w.lookup(Problem.of("mm", m=2), DEVICE)["choice"]["label"] == "c2"


def _writer(path: str, worker: int, count: int) -> None:
    w = Wisdom(path, enabled=True)
    for i in range(count):
        w.record(Problem.of("mm", worker=worker, i=i), DEVICE, {"label": f"w{worker}", "params": {"i": i}})


@pytest.mark.skipif(sys.platform == "win32", reason="advisory locks are POSIX-only")
def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "w.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, k, 25)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = json.loads(open(path).read())
    assert len(data["entries"]) == 75
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_an_unwritable_store_warns_and_keeps_working(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for path in (blocker / "w.json", tmp_path / "dir-as-file"):
        if path.name == "dir-as-file":
            path.mkdir()
        w = Wisdom(path, enabled=True)
        with pytest.warns(WisdomWarning, match="cannot"):
            w.record(Problem.of("mm"), DEVICE, {"label": "a", "params": {}})


def test_written_files_are_readable_by_others(tmp_path):
    w = Wisdom(tmp_path / "w.json", enabled=True)
    w.record(Problem.of("mm"), DEVICE, {"label": "a", "params": {}})
    assert (tmp_path / "w.json").stat().st_mode & 0o044 == 0o044


@pytest.mark.parametrize("damage", [
    {"choice": "fast"}, {"choice": None}, {"choice": ["fast"]}, {"choice": {"params": {}}},
    {"choice": {"label": "fast", "params": [1, 2]}}, {"choice": {"label": 5}}, {"extra": "garbage"},
    {"extra": {"fail": True}},
])
def test_plans_skip_a_damaged_entry_of_their_own_problem(tmp_path, damage):
    from test_foundation_plan import Scale, ScaleEngine

    class Fussy(ScaleEngine):  # its state from wisdom can be unusable, as a damaged FFTW export is
        def prepare(self, problem, candidate, extra=None):
            if extra and extra.get("fail"):
                raise ValueError("unusable state")
            return super().prepare(problem, candidate, extra)

    wisdom = Wisdom(tmp_path / "w.json", enabled=True)
    tuned = Scale([1.0, 2.0], 3.0, engine=Fussy(), wisdom=wisdom)
    tuned.autotune(effort="exhaustive", repeats=1)
    data = json.loads((tmp_path / "w.json").read_text())
    (entry,) = data["entries"].values()
    entry.update(damage)
    (tmp_path / "w.json").write_text(json.dumps(data))
    plan = Scale([1.0, 2.0], 3.0, engine=Fussy(), wisdom=Wisdom(tmp_path / "w.json", enabled=True))
    if "fail" in damage.get("extra", {}):
        with pytest.warns(WisdomWarning, match="could not be used"):
            plan.plan()
    else:
        plan.plan()
    assert plan.chosen_by == "heuristic" and list(plan.execute()) == [3.0, 6.0]
