"""Demo on the GPU: one MLP layer, ``gelu(x @ W + b)``, as a planned cuBLASLt matmul with the
epilogue fused.

The operands are CuPy arrays; the result (and the ReLU variant's aux mask) is checked on the host
against a float64 NumPy reference, and the planned ``execute()`` is timed with CUDA events beside
the CuPy code a user would otherwise write (``cupy.matmul`` + elementwise) and, where torch has
CUDA, torch's ``addmm`` + ``gelu``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

TITLE = "matmul: an MLP layer gelu(x @ W + b) with the epilogue fused, on the GPU, vs CuPy"

#: (tokens, features in, features out) of the layer.
SHAPE = (4096, 1024, 4096)
#: float32 GEMM + tanh-GELU on the device against float64 on the host.
TOLERANCE = 1e-4


def _gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def run(echo: Callable[[str], None], space: Any) -> bool:
    """Run the demo on ``space`` (a CUDA :class:`~nvmathpy.demos._space.Space`), report through
    ``echo``; True when every check passed."""
    from ..linalg import Matmul

    xp = space.xp
    tokens, n_in, n_out = SHAPE
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((tokens, n_in), dtype=np.float32)
    w_host = rng.standard_normal((n_in, n_out), dtype=np.float32) / np.float32(math.sqrt(n_in))
    b_host = rng.standard_normal(n_out, dtype=np.float32)
    z = x_host.astype(np.float64) @ w_host + b_host
    want = _gelu(z)
    x, w, b = (space.to_device(v) for v in (x_host, w_host, b_host))
    c0, c1 = np.float32(math.sqrt(2 / math.pi)), np.float32(0.044715)

    def cupy_layer() -> Any:
        h = xp.matmul(x, w)
        h += b
        return 0.5 * h * (1 + xp.tanh(c0 * (h + c1 * h**3)))

    ok = True
    with Matmul(x, w, epilogue="gelu_bias", epilogue_inputs={"bias": b}) as layer:
        layer.autotune(repeats=3)
        got = space.to_host(layer.execute())
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        ok &= err < TOLERANCE
        echo(f"[{space.name}] gelu_bias layer {x.shape} @ {w.shape} float32 on {space.description}: relative error "
             f"vs float64 NumPy {err:.2e} ({'ok' if err < TOLERANCE else 'FAILED'}); "
             f"candidate {layer.candidate} ({layer.chosen_by})")
        t_plan, t_cupy = space.median_seconds(layer.execute), space.median_seconds(cupy_layer)
        line = (f"time (CUDA events): nvmathpy {t_plan * 1e3:.3f} ms, CuPy matmul+elementwise {t_cupy * 1e3:.3f} ms "
                f"({t_cupy / t_plan:.2f}x)")
        torch = space.torch
        if torch is not None:
            tx, tw, tb = (torch.from_dlpack(v) for v in (x, w, b))
            gelu = torch.nn.functional.gelu
            t_torch = space.median_seconds(lambda: gelu(torch.addmm(tb, tx, tw), approximate="tanh"))
            line += f", torch addmm+gelu {t_torch * 1e3:.3f} ms ({t_torch / t_plan:.2f}x)"
        echo(line)
    with Matmul(x, w, epilogue="relu_aux_bias", epilogue_inputs={"bias": b}) as layer:
        d, aux = layer.plan().execute()
        d, mask = space.to_host(d), space.to_host(aux["relu_aux"])
        mask_ok = bool(np.array_equal(mask, z > 0) or np.mean(mask != (z > 0)) < 1e-4)
        relu_err = float(np.linalg.norm(d - np.maximum(z, 0)) / np.linalg.norm(np.maximum(z, 0)))
        ok &= mask_ok and relu_err < TOLERANCE
        echo(f"relu_aux_bias (training forward): error {relu_err:.2e}, aux mask {'ok' if mask_ok else 'FAILED'}")
    return bool(ok)
