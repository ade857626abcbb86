"""nvmathpy.patch / unpatch / patched and ``python -m nvmathpy run``: existing code switched to
nvmathpy with one line, names bound before patching included, and everything restored after."""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.fft
import scipy.linalg

import nvmathpy
import nvmathpy.fft
import nvmathpy.linalg
import nvmathpy.scipy.fft
import nvmathpy.scipy.linalg
from nvmathpy.patching import NAMESPACES, NUMPY_LINALG_PATCHED

ROOT = Path(__file__).resolve().parents[1]
PEERS = {"scipy.linalg": scipy.linalg, "numpy.linalg": np.linalg, "numpy.fft": np.fft}
SOURCES = {"scipy.linalg": nvmathpy.scipy.linalg, "numpy.linalg": nvmathpy.linalg, "numpy.fft": nvmathpy.fft}


@pytest.fixture(autouse=True)
def _unpatched():
    """Every test starts and ends with nothing patched."""
    nvmathpy.unpatch()
    yield
    nvmathpy.unpatch()
    assert nvmathpy.patched_namespaces() == ()


def _attributes():
    """Every public attribute of the patchable modules, and scipy.fft's global backend."""
    state = {ns: dict(vars(module)) for ns, module in PEERS.items()}
    return state, _fft_global()


def _fft_global():
    """scipy.fft's global backend: (backend, coerce, only, try_last)."""
    (backend, coerce, only), _, try_last = scipy._lib._uarray.get_state()._pickle()[0]["numpy.scipy.fft"]
    return backend, coerce, only, try_last


def _python(*args, cwd, env_path=()):
    path = ":".join([str(ROOT), *map(str, env_path)])
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": path})


def _rel(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("namespace", ["scipy.linalg", "numpy.linalg", "numpy.fft"])
def test_module_attributes_replaced_then_restored_exactly(namespace):
    peer, source = PEERS[namespace], SOURCES[namespace]
    before, _ = _attributes()
    nvmathpy.patch(namespace)
    changed = {name for name, value in vars(peer).items() if value is not before[namespace][name]}
    assert changed, namespace
    for name in changed:
        assert getattr(peer, name).__wrapped__ is getattr(source, name)
    if namespace == "numpy.linalg":
        assert changed == set(NUMPY_LINALG_PATCHED)
    if namespace == "numpy.fft":
        assert {"fft", "rfft", "irfftn", "hfft"} <= changed and not any(n.endswith(("freq", "shift")) for n in changed)
    nvmathpy.unpatch(namespace)
    assert _attributes()[0] == before


def _replaced(namespace):
    """The names of the peer module that patching ``namespace`` replaces."""
    before = dict(vars(PEERS[namespace]))
    with nvmathpy.patched(namespace):
        return {name for name, value in vars(PEERS[namespace]).items() if value is not before[name]}


def _peer_uses(tree, peers):
    """``(line, "module.name")`` for each use of a peer function in ``tree``: ``np.fft.rfft``,
    ``sla.solve`` after ``import scipy.linalg as sla``, ``from scipy.linalg import solve``."""
    aliases = {"np": "numpy", "numpy": "numpy", "scipy": "scipy"}
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname or a.name: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if f"{node.module}.{a.name}" in peers:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                elif node.module in peers:
                    uses.append((node.lineno, f"{node.module}.{a.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            path, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                path, inner = [inner.attr, *path], inner.value
            if isinstance(inner, ast.Name) and inner.id in aliases:
                dotted = ".".join([aliases[inner.id], *path])
                module, _, name = dotted.rpartition(".")
                if module in peers:
                    uses.append((node.lineno, dotted))
    return uses


def test_nvmathpy_never_reaches_a_function_it_patches_through_the_peer():
    """A call from nvmathpy to ``np.linalg.X`` / ``scipy.linalg.X`` / ``np.fft.X`` for an ``X``
    the patch replaces would recurse once patched: nvmathpy's modules (its demos and benchmark
    suites, which call the peers as references, aside) call the peers' own implementations."""
    replaced = {ns: _replaced(ns) for ns in PEERS}
    found = []
    for path in sorted((ROOT / "nvmathpy").rglob("*.py")):
        if path.parent.name in ("demos", "bench"):
            continue
        for line, dotted in _peer_uses(ast.parse(path.read_text()), set(PEERS)):
            module, _, name = dotted.rpartition(".")
            if name in replaced[module]:
                found.append(f"{path.relative_to(ROOT)}:{line} uses {dotted}")
    assert found == []
    assert _peer_uses(ast.parse("import scipy.linalg as sla\nfrom numpy import fft\nfrom numpy.linalg import det\n"
                                "sla.solve(a, b); fft.rfft(x); np.linalg.svdvals(a)"), set(PEERS)) == [
        (3, "numpy.linalg.det"), (4, "scipy.linalg.solve"), (4, "numpy.fft.rfft"), (4, "numpy.linalg.svdvals")]


def test_patched_calls_compute_the_peers_results():
    rng = np.random.default_rng()
    a, b = rng.standard_normal((37, 37)) + 37 * np.eye(37), rng.standard_normal((37, 3))
    x = rng.standard_normal((5, 97))
    with nvmathpy.patched("scipy.linalg", "numpy.linalg", "numpy.fft"):
        got = scipy.linalg.solve(a.T, b), np.linalg.solve(a[::2, ::2], b[::2]), np.fft.rfft(x, axis=0)
    want = np.linalg.solve(a.T, b), np.linalg.solve(a[::2, ::2], b[::2]), np.fft.rfft(x, axis=0)
    assert all(_rel(g, w) < 1e-12 for g, w in zip(got, want))


def test_names_bound_before_and_after_patching_in_a_script(tmp_path):
    (tmp_path / "bound_early.py").write_text("from scipy.linalg import solve, cho_solve as chs\nfrom numpy.fft import rfft\n")
    (tmp_path / "own.py").write_text("from nvmathpy.scipy.linalg import solve\n")
    (tmp_path / "script.py").write_text(textwrap.dedent("""
        import json
        import numpy as np
        import scipy.linalg
        from scipy.linalg import solve
        from numpy.fft import rfft
        import bound_early, own
        import nvmathpy
        import nvmathpy.fft, nvmathpy.scipy.linalg as nsl
        originals = [solve, rfft, bound_early.chs]          # a list is not swapped: the originals
        nvmathpy.patch()
        import bound_late                                    # binds `from scipy.linalg import solve` now
        a = np.array([[4.0, 1.0], [1.0, 3.0]])
        out = {
            "early": [solve.__wrapped__ is nsl.solve, rfft.__wrapped__ is nvmathpy.fft.rfft,
                      bound_early.solve is solve, bound_early.chs.__wrapped__ is nsl.cho_solve],
            "late": bound_late.solve is solve,
            "own_untouched": own.solve is nsl.solve,
            "result": solve(a, np.array([1.0, 2.0])).tolist(),
        }
        nvmathpy.unpatch()
        out["restored"] = [solve is originals[0], rfft is originals[1], bound_early.chs is originals[2],
                           bound_late.solve is originals[0], scipy.linalg.solve is originals[0]]
        out["own_after"] = own.solve is nsl.solve
        print(json.dumps(out))
    """))
    (tmp_path / "bound_late.py").write_text("from scipy.linalg import solve\n")
    done = _python("script.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["early"] == [True] * 4 and out["late"] and out["own_untouched"] and out["own_after"]
    assert out["restored"] == [True] * 5
    assert _rel(np.array(out["result"]), np.linalg.solve([[4.0, 1.0], [1.0, 3.0]], [1.0, 2.0])) < 1e-15


def test_in_process_references_swapped_and_restored():
    original = scipy.linalg.lu_factor
    early = types.ModuleType("nvmathpy_test_early")
    early.lu_factor, early.mine = original, nvmathpy.scipy.linalg.lu_factor
    sys.modules[early.__name__] = early
    try:
        nvmathpy.patch("scipy.linalg")
        assert early.lu_factor is scipy.linalg.lu_factor and early.lu_factor.__wrapped__ is early.mine
        late = types.ModuleType("nvmathpy_test_late")
        late.lu_factor = scipy.linalg.lu_factor  # as `from scipy.linalg import lu_factor` binds it now
        sys.modules[late.__name__] = late
        nvmathpy.unpatch("scipy.linalg")
        assert early.lu_factor is late.lu_factor is scipy.linalg.lu_factor is original
        assert early.mine is nvmathpy.scipy.linalg.lu_factor
    finally:
        sys.modules.pop("nvmathpy_test_early", None)
        sys.modules.pop("nvmathpy_test_late", None)


def test_patched_functions_pickle_by_their_peer_name():
    with nvmathpy.patched("scipy.linalg", "numpy.fft"):
        for function in (scipy.linalg.cho_solve, np.fft.irfft2):
            assert pickle.loads(pickle.dumps(function)) is function
        assert b"scipy.linalg" in pickle.dumps(scipy.linalg.cho_solve)
    assert pickle.loads(pickle.dumps(scipy.linalg.cho_solve)) is scipy.linalg.cho_solve


def test_idempotent_and_logged(caplog):
    with caplog.at_level(logging.INFO, logger="nvmathpy"):
        nvmathpy.patch("scipy.linalg")
        twin = scipy.linalg.solve
        nvmathpy.patch("scipy.linalg", "scipy.linalg")
        assert scipy.linalg.solve is twin
        nvmathpy.unpatch("scipy.linalg")
        nvmathpy.unpatch("scipy.linalg")
    messages = [r.getMessage() for r in caplog.records if r.name == "nvmathpy"]
    assert sum(m.startswith("patched scipy.linalg") for m in messages) == 1
    assert sum(m.startswith("unpatched scipy.linalg") for m in messages) == 1


def test_default_patches_every_namespace_and_info_says_so():
    from nvmathpy.info import collect_info, format_info

    nvmathpy.patch()
    assert nvmathpy.patched_namespaces() == NAMESPACES
    info = collect_info()
    assert info["patched"] == list(NAMESPACES)
    assert f"patched    {', '.join(NAMESPACES)}" in format_info(info)
    nvmathpy.unpatch()
    assert collect_info()["patched"] == []


def test_context_managers_nest_and_keep_what_was_patched_before():
    before = _attributes()
    nvmathpy.patch("numpy.fft")
    with nvmathpy.patched("numpy.fft", "scipy.linalg"):
        with nvmathpy.patched("scipy.linalg"):
            assert nvmathpy.patched_namespaces() == ("scipy.linalg", "numpy.fft")
        assert nvmathpy.patched_namespaces() == ("scipy.linalg", "numpy.fft")
    assert nvmathpy.patched_namespaces() == ("numpy.fft",)
    nvmathpy.unpatch()
    assert _attributes() == before


def test_unpatch_inside_a_context_wins():
    original = scipy.linalg.solve
    with nvmathpy.patched("scipy.linalg"):
        nvmathpy.unpatch("scipy.linalg")
        assert scipy.linalg.solve is original
        nvmathpy.patch("scipy.linalg")
    assert nvmathpy.patched_namespaces() == ("scipy.linalg",)  # patch() made inside holds it


def test_a_context_that_fails_to_open_holds_nothing(monkeypatch):
    def fail():
        raise ImportError("no numpy.fft here")

    monkeypatch.setattr("nvmathpy.patching._scipy_fft", fail)
    with pytest.raises(ImportError, match="no numpy.fft"):
        with nvmathpy.patched("scipy.linalg", "scipy.fft"):
            pass
    assert nvmathpy.patched_namespaces() == ()


def test_threads_overlapping_contexts():
    before = _attributes()
    barrier, seen, errors = threading.Barrier(6), [], []

    def worker(index):
        try:
            for round_ in range(15):
                names = NAMESPACES[(index + round_) % 4:] or NAMESPACES
                with nvmathpy.patched(*names):
                    seen.append(set(names) <= set(nvmathpy.patched_namespaces())
                                and ("numpy.fft" not in names or np.fft.rfft.__wrapped__ is nvmathpy.fft.rfft))
                    if round_ == 0:
                        barrier.wait(timeout=60)  # all six inside at once
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(seen) == 90 and all(seen)
    assert nvmathpy.patched_namespaces() == () and _attributes() == before


@pytest.mark.parametrize("bad", ["scipy.signal", "numpy", "", "scipy.linalg,numpy.fft", None])
def test_bad_namespace_names_the_allowed_ones(bad):
    for call in (nvmathpy.patch, nvmathpy.unpatch, lambda *ns: nvmathpy.patched(*ns).__enter__()):
        with pytest.raises(ValueError, match=r"unknown namespace .*allowed: 'scipy.linalg', 'numpy.linalg', "
                                             r"'numpy.fft', 'scipy.fft'"):
            call("numpy.fft", bad)
    assert nvmathpy.patched_namespaces() == ()


def test_scipy_fft_global_backend_with_scipy_behind_it():
    cache = nvmathpy.scipy.fft.plan_cache()
    x = np.random.default_rng().standard_normal(70001)  # beyond the quick path of small calls: a plan

    def calls():
        return cache.hits + cache.misses

    default = _fft_global()
    with nvmathpy.patched("scipy.fft"):
        start = calls()
        got = scipy.fft.fft(x)
        assert calls() == start + 1  # nvmathpy planned or reused a plan
        assert _rel(got, np.fft.fft(x)) < 1e-13
        with scipy.fft.set_backend("scipy", only=True):  # a caller's local choice still wins
            scipy.fft.fft(x)
        assert calls() == start + 1
        r = np.logspace(-2, 2, 64)
        fht = scipy.fft.fht(np.exp(-r), dln=np.log(r[1] / r[0]), mu=0.5)  # SciPy's FFTLog, its FFTs nvmathpy's
        assert np.all(np.isfinite(fht))
        assert _fft_global()[0] is nvmathpy.scipy.fft
    assert _fft_global() == default
    start = calls()
    scipy.fft.fft(x)
    assert calls() == start


def test_scipy_fft_restores_a_global_backend_set_before():
    class Other:
        __ua_domain__ = "numpy.scipy.fft"

        @staticmethod
        def __ua_function__(method, args, kwargs):
            return NotImplemented

    default = _fft_global()
    scipy.fft.set_global_backend(Other, only=False, try_last=True)
    try:
        mine = _fft_global()
        nvmathpy.patch("scipy.fft")
        nvmathpy.unpatch("scipy.fft")
        assert _fft_global() == mine
    finally:
        scipy.fft.set_global_backend(default[0], coerce=default[1], only=default[2], try_last=default[3])


def test_scipy_fft_unreadable_backend_state_restores_scipys_default(monkeypatch):
    found = _fft_global()  # other tests may have left another (try_last) setting: put it back after
    scipy.fft.set_global_backend("scipy", try_last=True)  # SciPy's own global state at import
    default = _fft_global()
    try:
        monkeypatch.setattr(scipy._lib._uarray, "get_state", lambda: object())  # a SciPy without uarray's layout
        nvmathpy.patch("scipy.fft")
        assert nvmathpy.patching._scipy_fft_backends(scipy._lib._uarray) is None
        nvmathpy.unpatch("scipy.fft")
        monkeypatch.undo()
        assert _fft_global() == default and default[0].__name__ == "_ScipyBackend"
    finally:
        backend, coerce, only, try_last = found
        scipy.fft.set_global_backend(backend, coerce=coerce, only=only, try_last=try_last)


def test_import_and_state_queries_load_no_peer():
    code = ("import sys, nvmathpy; nvmathpy.patched_namespaces(); nvmathpy.unpatch(); "
            "print([m for m in ('numpy', 'scipy') if m in sys.modules])")
    done = _python("-c", code, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_default_skips_a_namespace_whose_library_is_missing():
    code = ("import sys; sys.modules['scipy'] = None; import nvmathpy; nvmathpy.patch(); "
            "print(','.join(nvmathpy.patched_namespaces()))")
    done = _python("-c", code, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "numpy.linalg,numpy.fft"


def _script(tmp_path):
    (tmp_path / "uses_scipy.py").write_text("from scipy.linalg import lu_factor, lu_solve\nfrom numpy.fft import irfft\n")
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import json, sys
        import numpy as np
        from uses_scipy import lu_factor, lu_solve, irfft
        import nvmathpy, nvmathpy.fft, nvmathpy.scipy.linalg as nsl
        a = np.array([[4.0, 1.0], [1.0, 3.0]])
        print(json.dumps({
            "argv": sys.argv, "name": __name__, "patched": nvmathpy.patched_namespaces(),
            "nvmathpy": [lu_factor.__wrapped__ is nsl.lu_factor, lu_solve.__wrapped__ is nsl.lu_solve,
                         getattr(irfft, "__wrapped__", None) is nvmathpy.fft.irfft],
            "x": lu_solve(lu_factor(a), np.array([1.0, 2.0])).tolist(),
        }))
        sys.exit(int(sys.argv[-1]))
    """))


@pytest.mark.parametrize("module", [False, True])
def test_run_subcommand(tmp_path, module):
    _script(tmp_path)
    target = ["-m", "job"] if module else [str(tmp_path / "job.py")]
    done = _python("-m", "nvmathpy", "run", *target, "--flag", "value", "7", cwd=ROOT if not module else tmp_path,
                   env_path=[tmp_path] if module else [])
    assert done.returncode == 7, done.stderr
    out = json.loads(done.stdout)
    assert out["argv"] == [str(tmp_path / "job.py"), "--flag", "value", "7"]
    assert out["name"] == "__main__" and out["patched"] == list(NAMESPACES)
    assert out["nvmathpy"] == [True, True, True]
    assert _rel(np.array(out["x"]), np.linalg.solve([[4.0, 1.0], [1.0, 3.0]], [1.0, 2.0])) < 1e-15


def test_run_chooses_namespaces_and_refuses_unknown_ones(tmp_path):
    _script(tmp_path)
    done = _python("-m", "nvmathpy", "run", "--patch", "scipy.linalg, numpy.linalg", "job.py", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["patched"] == ["scipy.linalg", "numpy.linalg"] and out["nvmathpy"] == [True, True, False]
    done = _python("-m", "nvmathpy", "run", "--patch", "scipy.linalg,numpy.fftw", "job.py", "0", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown namespace 'numpy.fftw'; allowed: 'scipy.linalg', 'numpy.linalg'" in done.stderr


def _tests_of(package):
    spec = importlib.util.find_spec(f"{package}.tests")
    return None if spec is None else Path(spec.origin).parent


@pytest.mark.skipif(_tests_of("numpy.linalg") is None or _tests_of("numpy.fft") is None,
                    reason="NumPy's own tests are not installed")
def test_numpy_own_tests_pass_patched(tmp_path):
    """What ``numpy.linalg``/``numpy.fft`` patch in is NumPy's exactly: NumPy's own tests of
    those modules pass with the patch applied (and nothing recurses through a patched name)."""
    (tmp_path / "patch_numpy.py").write_text(  # every exact function, also those patch() leaves to NumPy
        "import nvmathpy, nvmathpy.patching as p\np.NUMPY_LINALG_PATCHED = p.NUMPY_LINALG_EXACT\n"
        "nvmathpy.patch('numpy.linalg', 'numpy.fft')\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = _python("-m", "pytest", "-q", "-p", "patch_numpy", "-p", "no:cacheprovider", "-c", "pytest.ini",
                   "--rootdir", str(tmp_path), str(_tests_of("numpy.linalg") / "test_linalg.py"),
                   str(_tests_of("numpy.fft")), cwd=tmp_path, env_path=[tmp_path])
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
