"""Demo: one MLP layer, ``gelu(x @ W + b)``, as a planned matmul with a fused epilogue.

Checks the result (and the ReLU variant's aux mask) against a float64 NumPy reference and
times the planned ``execute()`` beside the NumPy code a user would otherwise write.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

TITLE = "matmul: an MLP layer gelu(x @ W + b) with the epilogue fused, vs NumPy"


def _median_seconds(fn: Callable[[], object], repeats: int = 7) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def run(echo: Callable[[str], None]) -> bool:
    """Run the demo, report through ``echo``; True when every check passed."""
    from ..bench.suite_matmul import gelu_bias_inplace
    from ..linalg import Matmul

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 512), dtype=np.float32)
    w = rng.standard_normal((512, 768), dtype=np.float32) / np.float32(math.sqrt(512))
    b = rng.standard_normal(768, dtype=np.float32)

    z = x.astype(np.float64) @ w + b
    want = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))

    scratch = np.empty((x.shape[0], w.shape[1]), np.float32)

    def numpy_layer() -> np.ndarray:  # NumPy's fastest spelling: the product, then in-place passes
        return gelu_bias_inplace(x, w, b, scratch)

    ok = True
    with Matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": b}) as layer:
        layer.autotune(repeats=3)
        got = layer.execute()
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        ok &= err < 1e-5
        echo(f"gelu_bias layer {x.shape} @ {w.shape}: relative error vs float64 NumPy {err:.2e} "
             f"({'ok' if err < 1e-5 else 'FAILED'}); candidate {layer.candidate} ({layer.chosen_by})")
        t_plan, t_numpy = _median_seconds(layer.execute), _median_seconds(numpy_layer)
        echo(f"time: nvmathpy {t_plan * 1e3:.2f} ms, NumPy's best in-place chain {t_numpy * 1e3:.2f} ms "
             f"({t_numpy / t_plan:.2f}x faster)")
    with Matmul(x, w, epilogue="relu_aux_bias", epilogue_inputs={"bias": b}) as layer:
        d, aux = layer.plan().execute()
        mask_ok = bool(np.array_equal(aux["relu_aux"], z > 0) or np.mean(aux["relu_aux"] != (z > 0)) < 1e-4)
        relu_err = float(np.linalg.norm(d - np.maximum(z, 0)) / np.linalg.norm(np.maximum(z, 0)))
        ok &= mask_ok and relu_err < 1e-5
        echo(f"relu_aux_bias (training forward): error {relu_err:.2e}, aux mask {'ok' if mask_ok else 'FAILED'}")
    return bool(ok)
