"""An epilogue is resolved once per plan into one object (:mod:`nvmathpy.linalg.gemm._resolved`):
the problem key holds its key (a built-in's name, a custom epilogue's content digest), the engine
gets the object, and nothing looks the definition up again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nvmathpy.linalg as la
from nvmathpy.kernels.trace import trace
from nvmathpy.linalg import epilogues
from nvmathpy.linalg.gemm import _resolved, matmul_plan
from nvmathpy.linalg.gemm._resolved import resolve_builtin, resolve_custom

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def spies(monkeypatch):
    """Counts of the resolvers' calls (as the plan calls them) and of definition look-ups."""
    calls = {"builtin": 0, "custom": 0, "definition": 0}

    def counting(name, fn):
        def spy(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return spy

    monkeypatch.setattr(matmul_plan, "resolve_builtin", counting("builtin", resolve_builtin))
    monkeypatch.setattr(matmul_plan, "resolve_custom", counting("custom", resolve_custom))
    monkeypatch.setattr(_resolved, "definition", counting("definition", epilogues.definition))
    monkeypatch.setattr(epilogues, "definition", counting("definition", epilogues.definition))
    return calls


def _operands(dtype="float64"):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 30)).astype(dtype), rng.standard_normal((30, 50)).astype(dtype)
    return a, b, rng.standard_normal(50).astype(dtype)


@pytest.mark.parametrize("effort", ["heuristic", "measure"])
def test_a_builtin_epilogue_is_resolved_once_per_plan(spies, effort):
    a, b, bias = _operands()
    with la.Matmul(a, b, epilogue="relu_bias", epilogue_inputs={"bias": bias}) as mm:
        if effort == "measure":
            mm.autotune(effort="measure")
        mm.plan()
        got = mm.execute()
        mm.execute()
    assert spies == {"builtin": 1, "custom": 0, "definition": 1}
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0), rtol=1e-12, atol=1e-12)


def test_a_custom_epilogue_is_resolved_once_per_plan_and_never_looked_up(spies):
    a, b, bias = _operands()
    with la.Matmul(a, b, epilogue=lambda x, s: np.tanh(x + s), epilogue_inputs={"s": bias}) as mm:
        mm.autotune(effort="measure")
        mm.plan()
        got = mm.execute()
    assert spies == {"builtin": 0, "custom": 1, "definition": 0}
    np.testing.assert_allclose(got, np.tanh(a @ b + bias), rtol=1e-12, atol=1e-12)


def test_the_one_call_function_resolves_only_when_it_builds_a_plan(spies):
    matmul_plan.clear_plan_cache()
    a, b, bias = _operands()
    for _ in range(3):
        la.matmul(a, b, epilogue="gelu_bias", epilogue_inputs={"bias": bias})
        la.matmul(a, b, epilogue=lambda x, s: x * s, epilogue_inputs={"s": bias})
    assert (spies["builtin"], spies["custom"]) == (1, 1)


@pytest.mark.parametrize("epilogue, inputs", [
    ("relu", {}),
    (lambda x, s: np.maximum(x * s, 0), {"s": 2.0}),
    (lambda x, bias: np.maximum(x + bias, 0), {"bias": None}),  # exactly relu_bias: the fused GEMM
])
def test_the_cpu_engine_gets_the_plans_resolved_object(epilogue, inputs):
    a, b, bias = _operands("float32")
    inputs = {k: bias if v is None else v for k, v in inputs.items()}
    with la.Matmul(a, b, epilogue=epilogue, epilogue_inputs=inputs or None) as mm:
        resolved = mm.resolved_epilogue
        assert mm._engine.epilogue is resolved
        assert mm.problem.get("epilogue") == resolved.key
        mm.plan()
        assert mm._prepared.kernel is not None


def test_a_custom_epilogue_that_is_a_builtin_carries_its_native_match():
    a, b, bias = _operands()
    mm = la.Matmul(a, b, epilogue=lambda acc, w: np.maximum(w + acc, 0), epilogue_inputs={"w": bias})
    resolved = mm.resolved_epilogue
    assert resolved.native is resolve_builtin("relu_bias") and resolved.native_bias == "w"
    assert resolved.inputs == (("w", "col"),)
    assert mm.problem.get("epilogue") != "relu_bias"  # a custom epilogue keeps its own key


def test_the_digest_is_content_based():
    def f(x, s):
        return x * s + 1

    kinds = {"s": "col"}
    same = [trace(f, kinds, value_name="x"), trace(lambda x, s: x * s + 1, kinds, value_name="x")]
    digests = {resolve_custom(expr).digest for expr in same}
    assert len(digests) == 1 and len(digests.pop()) == 64
    others = [trace(lambda x, s: x * s + 2, kinds, value_name="x"),
              trace(lambda x, s: x * s + 1, {"s": "row"}, value_name="x"),  # str() of the IR omits kinds
              trace(lambda x, t: x * t + 1, {"t": "col"}, value_name="x")]
    assert len({resolve_custom(expr).digest for expr in same[:1] + others}) == 4
    assert resolve_builtin("relu").digest != resolve_builtin("gelu").digest
    assert resolve_builtin(epilogues.Epilogue.RELU) is resolve_builtin("relu")
    assert resolve_builtin("relu").key == "relu"  # built-in keys (and their wisdom entries) are unchanged


_KEYS = """
import json, numpy as np, nvmathpy.linalg as la
a, b, v = np.ones((8, 6)), np.ones((6, 5)), np.ones(5)
out = {}
for name, fn in (("one", lambda x, s: np.tanh(x) * s), ("two", lambda x, s: np.tanh(x) + s)):
    mm = la.Matmul(a, b, epilogue=fn, epilogue_inputs={"s": v})
    out[name] = [mm.problem.to_json(), mm.resolved_epilogue.digest]
out["relu"] = [la.Matmul(a, b, epilogue="relu").problem.to_json(), None]
print(json.dumps(out))
"""


def test_problem_keys_are_the_same_in_two_processes():
    def keys(seed):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", _KEYS], capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=300, check=True)
        return json.loads(done.stdout)

    first, second = keys("1"), keys("2")
    assert first == second
    assert first["one"][0] != first["two"][0] and first["one"][1] != first["two"][1]
    assert json.loads(first["relu"][0])["fields"]["epilogue"] == "relu"
    for name in ("one", "two"):
        fields = json.loads(first[name][0])["fields"]
        assert fields["epilogue"] == "custom:" + first[name][1][:32] and "epilogue_ir" not in fields


def test_no_engine_module_looks_a_definition_up():
    import importlib

    for name in ("cpu._engine", "cuda._lt_spec", "cuda._engine", "cuda._custom"):
        try:
            module = importlib.import_module(f"nvmathpy.linalg.gemm.{name}")
        except ImportError:  # pragma: no cover - a CUDA module without its optional dependencies
            continue
        assert not hasattr(module, "definition") and not hasattr(module, "match_native"), name
