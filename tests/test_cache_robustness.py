"""Caches that are hard to break: the wisdom file and its lock (FIFOs, directories, a lock held
elsewhere) and the compiled-kernel cache (swapped, foreign, symbol-less or truncated files; a
cache directory that is missing, a file, or cannot be created; no C compiler; bounded memo and
disk). Compiled kernels are a speed-up, never a requirement: every such case still computes
the right numbers, with at most one warning.

Cases that change process-wide state (the compiler, the cache directory seen by cached plans)
run in a subprocess, one per scenario, each checking several public calls.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from nvmathpy.errors import MissingDependencyError
from nvmathpy.kernels import cpu_jit
from nvmathpy.plan import wisdom as wisdom_module
from nvmathpy.plan.problem import Problem
from nvmathpy.plan.wisdom import Wisdom, WisdomWarning

ROOT = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(not cpu_jit.available(), reason="no C compiler with libmvec here")


def run_python(code: str, env: dict[str, str], timeout: float = 300) -> dict:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); its last stdout
    line is JSON. The timeout only guards against a hang; nothing is timed."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=timeout, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- wisdom --------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["fifo", "directory", "dev-null-link", "lock-fifo"])
def test_wisdom_never_blocks_on_special_files(tmp_path, what):
    """A FIFO (or directory, or device) where the wisdom file or its lock belongs is ignored with
    a warning: planning and solving go on, and recording warns instead of hanging."""
    cache = tmp_path / "c"
    cache.mkdir()
    target = cache / ("wisdom.json.lock" if what == "lock-fifo" else "wisdom.json")
    if what in ("fifo", "lock-fifo"):
        os.mkfifo(target)
    elif what == "directory":
        target.mkdir()
    else:
        target.symlink_to("/dev/null")
    out = run_python("""
        import json, warnings, numpy as np
        import nvmathpy as nm
        from nvmathpy.plan.wisdom import default_wisdom
        from nvmathpy.plan.problem import Problem
        rng = np.random.default_rng(3)
        a, b = rng.standard_normal((40, 40)), rng.standard_normal((40, 3))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = nm.linalg.solve(a, b)
            y = nm.fft.fft(b[:, 0])
            default_wisdom().record(Problem.of("matmul", m=2), {"s": 1}, {"c": 1})
        print(json.dumps({"solve": float(np.linalg.norm(a @ x - b) / np.linalg.norm(b)),
                          "fft": float(np.abs(y - np.fft.fft(b[:, 0])).max()),
                          "warnings": [str(w.message) for w in caught]}))
    """, {"NVMATHPY_CACHE_DIR": str(cache)})
    assert out["solve"] < 1e-12 and out["fft"] < 1e-12
    assert any("wisdom" in w for w in out["warnings"]), out["warnings"]


def test_wisdom_lock_held_elsewhere_is_waited_for_boundedly(tmp_path, monkeypatch):
    """A lock another process holds makes ``record`` give up after LOCK_TIMEOUT with a warning
    (the choice goes unremembered), never wait forever."""
    store = Wisdom(tmp_path / "w.json", enabled=True)
    monkeypatch.setattr(wisdom_module, "LOCK_TIMEOUT", 0.0)
    with open(tmp_path / "w.json.lock", "a+") as held:  # another open file description: a conflicting lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.warns(WisdomWarning, match="held by another process"):
            store.record(Problem.of("matmul", m=2), {"s": 1}, {"c": 1})
    store.record(Problem.of("matmul", m=2), {"s": 1}, {"c": 1})  # released: recorded
    assert store.lookup(Problem.of("matmul", m=2), {"s": 1})["choice"] == {"c": 1}


def test_wisdom_oversized_file_is_ignored(tmp_path, monkeypatch):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"format": "nvmathpy-wisdom", "schema": 1, "entries": {}}) + " " * 100)
    monkeypatch.setattr(wisdom_module, "MAX_BYTES", 50)
    with pytest.warns(WisdomWarning, match="larger than"):
        assert Wisdom(path, enabled=True).entries() == []


# -- compiled kernels: what a cached file must prove -----------------------------------------


def _twice(k: float) -> str:
    return f"double f(double x) {{ return {k!r} * x; }}\n"


def _call(lib: ctypes.CDLL, x: float) -> float:
    lib.f.restype, lib.f.argtypes = ctypes.c_double, [ctypes.c_double]
    return lib.f(x)


def _files() -> list[Path]:
    return sorted((cpu_jit.cache_dir() / "cpu_kernels").glob("*.so"), key=lambda p: p.stat().st_mtime_ns)


@pytest.fixture
def fresh_memo(monkeypatch):
    """An empty in-process memo (the disk is what these tests exercise)."""
    monkeypatch.setattr(cpu_jit, "_LOADED", type(cpu_jit._LOADED)())
    return cpu_jit._LOADED


@needs_cc
@pytest.mark.filterwarnings("ignore::nvmathpy.kernels.cpu_jit.KernelCacheWarning")  # a directory at <key>.so
@pytest.mark.parametrize("damage", ["swapped", "no-symbol", "truncated", "garbage", "empty", "directory"])
def test_cached_kernel_is_used_only_when_it_proves_its_source(fresh_memo, damage):
    """Each source gets its own values back whatever was done to the files on disk: a file is
    loaded only when its exported key matches the source, compiler and flags; else rebuilt."""
    compiler = cpu_jit._compiler()
    sources = {3.0: _twice(3.0), 5.0: _twice(5.0)}
    # built by another process: this one has never mapped the files it then finds damaged
    run_python(f"""
        import json
        from nvmathpy.kernels import cpu_jit
        for src in {list(sources.values())!r}:
            cpu_jit.compile_c(src)
        print(json.dumps({{}}))
    """, {"NVMATHPY_CACHE_DIR": str(cpu_jit.cache_dir())})
    paths = {k: cpu_jit.cache_dir() / "cpu_kernels" / f"{cpu_jit._key(src, compiler)}.so" for k, src in sources.items()}
    assert all(p.is_file() for p in paths.values())
    a, b = paths[3.0], paths[5.0]
    if damage == "swapped":
        tmp = a.with_suffix(".tmp-swap")
        os.replace(a, tmp), os.replace(b, a), os.replace(tmp, b)
    elif damage == "no-symbol":  # loadable, but not ours: no key symbol at all
        for p in (a, b):
            subprocess.run([compiler, "-shared", "-fPIC", "-x", "c", "-", "-o", str(p)],
                           input=b"int unrelated(void) { return 1; }\n", check=True)
    elif damage == "truncated":
        for p in (a, b):
            p.write_bytes(p.read_bytes()[:200])
    elif damage == "garbage":
        for p in (a, b):
            p.write_bytes(os.urandom(4096))
    elif damage == "empty":
        for p in (a, b):
            p.write_bytes(b"")
    else:
        for p in (a, b):
            p.unlink()
            p.mkdir()
    for k, src in sources.items():
        assert _call(cpu_jit.compile_c(src), 2.0) == 2 * k, damage


@needs_cc
def test_kernel_memo_and_disk_cache_are_bounded(fresh_memo, monkeypatch):
    monkeypatch.setattr(cpu_jit, "MAX_LOADED", 3)
    monkeypatch.setattr(cpu_jit, "MAX_CACHED_FILES", 4)
    for k in range(9):
        assert _call(cpu_jit.compile_c(_twice(k + 0.5)), 2.0) == 2 * (k + 0.5)
        assert len(fresh_memo) <= 3
        assert len(_files()) <= 4
    # the most recent survive on disk; an evicted one is simply rebuilt
    assert _call(cpu_jit.compile_c(_twice(0.5)), 4.0) == 2.0


@needs_cc
@pytest.mark.parametrize("where", ["file", "uncreatable"])
def test_unusable_cache_directory_builds_elsewhere_with_one_warning(tmp_path, monkeypatch, fresh_memo, where):
    if where == "file":
        bad = tmp_path / "not-a-dir"
        bad.write_text("x")
    else:
        bad = Path("/proc/nvmathpy-no-such-dir/cache")  # cannot be created, even by root
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(bad))
    monkeypatch.setattr(cpu_jit, "_WARNED", set())
    monkeypatch.setattr(cpu_jit, "_PRIVATE", [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in (1.5, 2.5, 3.5):
            assert _call(cpu_jit.compile_c(_twice(k)), 2.0) == 2 * k
    kinds = [w for w in caught if issubclass(w.category, cpu_jit.KernelCacheWarning)]
    assert len(kinds) == 1, [str(w.message) for w in caught]
    assert str(bad) in str(kinds[0].message)


@needs_cc
def test_read_only_cache_directory_builds_elsewhere(tmp_path, monkeypatch, fresh_memo):
    """A cache directory that exists but refuses new files (read-only; simulated, as root may
    write anywhere): one warning, the kernel built in this process's temporary directory."""
    cache = tmp_path / "ro"
    (cache / "cpu_kernels").mkdir(parents=True)
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(cache))
    monkeypatch.setattr(cpu_jit, "_WARNED", set())
    monkeypatch.setattr(cpu_jit, "_PRIVATE", [])
    real_mkstemp = cpu_jit.tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == cache / "cpu_kernels":
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(cpu_jit.tempfile, "mkstemp", mkstemp)
    with pytest.warns(cpu_jit.KernelCacheWarning, match="Permission denied"):
        assert _call(cpu_jit.compile_c(_twice(9.5)), 2.0) == 19.0
    assert not list((cache / "cpu_kernels").iterdir())


@needs_cc
def test_no_directory_at_all_raises_missing_dependency(tmp_path, monkeypatch, fresh_memo):
    """Nowhere to write: MissingDependencyError, which every caller turns into its NumPy path."""
    bad = tmp_path / "f"
    bad.write_text("x")
    monkeypatch.setenv("NVMATHPY_CACHE_DIR", str(bad))
    monkeypatch.setattr(cpu_jit, "_PRIVATE", [])
    monkeypatch.setattr(cpu_jit, "_WARNED", set())

    def refuse() -> Path:
        raise OSError("no temporary directory either")

    monkeypatch.setattr(cpu_jit, "_private_dir", refuse)
    with pytest.warns(cpu_jit.KernelCacheWarning), pytest.raises(MissingDependencyError, match="no directory"):
        cpu_jit.compile_c(_twice(7.25))


@needs_cc
def test_compiled_epilogue_failure_falls_back_to_numpy(monkeypatch):
    """The compiled epilogue's build failing at planning time leaves the product right: one
    warning, NumPy's evaluator."""
    import nvmathpy.linalg as la
    from nvmathpy.linalg.gemm.cpu import _epilogue_c

    def broken(source: str):
        raise MissingDependencyError("the C compiler failed (test)")

    monkeypatch.setattr(_epilogue_c.cpu_jit, "compile_c", broken)
    monkeypatch.setenv("NVMATHPY_WISDOM", "off")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((301, 257)), rng.standard_normal((257, 263))
    bias = rng.standard_normal(263)
    with pytest.warns(RuntimeWarning, match="compiled epilogue is not available"):
        with la.Matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias}) as mm:
            assert mm._engine.candidates(mm.problem)[0].params["evaluator"] == "c"
            mm.plan()
            got = mm.execute()
    from nvmathpy.kernels.trace import gelu
    want = gelu(a @ b + bias)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-12


# -- whole scenarios in a fresh process ---------------------------------------------------------

_SCENARIO = """
    import json, warnings, numpy as np
    import nvmathpy as nm
    from nvmathpy.kernels.trace import gelu
    rng = np.random.default_rng(11)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    w = rng.standard_normal((512, 384), dtype=np.float32)
    bias = rng.standard_normal(384, dtype=np.float32)
    p = x.astype(np.float64) @ w.astype(np.float64)
    def err(got, want):
        return float(np.linalg.norm(got - want) / np.linalg.norm(want))
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["relu_bias"] = err(nm.linalg.matmul(x, w, epilogue="relu_bias", epilogue_inputs={"bias": bias}),
                               np.maximum(p + bias, 0))
        out["gelu_bias"] = err(nm.linalg.matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": bias}),
                               gelu(p + bias))
        out["custom"] = err(nm.linalg.matmul(x, w, epilogue=lambda v: np.tanh(v) * 3), np.tanh(p) * 3)
        A, B = rng.standard_normal((200, 5, 5)), rng.standard_normal((200, 5, 2))
        out["solve"] = err(nm.linalg.solve(A, B), np.linalg.solve(A, B))
    out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    print(json.dumps(out))
"""


@pytest.mark.parametrize("scenario", ["cache-is-a-file", "cache-uncreatable", "no-compiler", "cc-not-a-compiler"])
def test_kernels_are_a_speed_up_never_a_requirement(tmp_path, scenario):
    """Built-in compiled epilogues, custom epilogues and batched small solves give the right
    numbers with an unusable cache directory or no C compiler, with at most one warning."""
    env = {"NVMATHPY_CACHE_DIR": str(tmp_path / "cache")}
    if scenario == "cache-is-a-file":
        (tmp_path / "cache").write_text("not a directory")
    elif scenario == "cache-uncreatable":
        env["NVMATHPY_CACHE_DIR"] = "/proc/nvmathpy-no-such-dir"
    elif scenario == "no-compiler":
        env["CC"] = str(tmp_path / "no-such-compiler")
    else:
        fake = tmp_path / "fake-cc"
        fake.write_text("#!/bin/sh\nexit 1\n")
        fake.chmod(0o755)
        env["CC"] = str(fake)
    out = run_python(_SCENARIO, env)
    for name in ("relu_bias", "gelu_bias", "custom"):
        assert out[name] < 1e-5, (name, out)
    assert out["solve"] < 1e-10, out
    cache_warnings = [w for w in out["warnings"] if "KernelCacheWarning" in w]
    assert len(cache_warnings) <= 1, out["warnings"]
    if scenario.startswith("cache") and cpu_jit.available():
        assert len(cache_warnings) == 1, out["warnings"]
