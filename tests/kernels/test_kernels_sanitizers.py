"""Generated kernels under ThreadSanitizer and AddressSanitizer (in a child Python with the
sanitizer runtime preloaded), and proof that each sanitizer catches the bug it is there for."""

from __future__ import annotations

import textwrap

import pytest

from kernels_cases import needs_gxx
from kernels_emulator import run_sanitized

pytestmark = needs_gxx

GEMM_CASE = """
import dataclasses, numpy as np
import kernels_emulator as emu
from nvmathpy.kernels.gemm_tiled import SIMT_CONFIGS, gemm_kernel
from nvmathpy.kernels.trace import trace
rng = np.random.default_rng(0)
a = rng.standard_normal((2, 37, 41)).astype(np.float32)
b = rng.standard_normal((2, 41, 29)).astype(np.float32)
bias = rng.standard_normal(29).astype(np.float32)
kernel = gemm_kernel("float32", config=SIMT_CONFIGS[4],
                     epilogue=trace(lambda x, bias: np.maximum(x + bias, 0), {{"bias": "col"}}))
{mutate}
d = np.zeros((2, 37, 29), dtype=np.float32)
emu.run_gemm(kernel, a, b, d, inputs={{"bias": bias}}, sanitize="{sanitize}")
ref = np.maximum(a.astype(float) @ b.astype(float) + bias, 0)
print("error", np.linalg.norm(d - ref) / np.linalg.norm(ref))
"""

DROP_FIRST_BARRIER = ("kernel = dataclasses.replace(kernel, source=kernel.source.replace('__syncthreads();', '', 1))\n"
                      "assert kernel.source.count('__syncthreads();') == 1")


def run(code: str, sanitize: str):
    result = run_sanitized(sanitize, textwrap.dedent(code))
    return result, result.stdout + result.stderr


def error_of(output: str) -> float:
    lines = [line for line in output.splitlines() if line.startswith("error ")]
    return float(lines[-1].split()[1]) if lines else float("inf")


def test_gemm_is_race_free_under_thread_sanitizer():
    result, output = run(GEMM_CASE.format(mutate="", sanitize="thread"), "thread")
    assert result.returncode == 0 and "ThreadSanitizer" not in output, output[-4000:]
    assert error_of(output) < 1e-5


def test_a_missing_syncthreads_is_caught():
    result, output = run(GEMM_CASE.format(mutate=DROP_FIRST_BARRIER, sanitize="thread"), "thread")
    assert "WARNING: ThreadSanitizer: data race" in output and result.returncode == 66, output[-4000:]


SOLVE_CASE = """
import numpy as np
import kernels_emulator as emu
from nvmathpy.kernels.tiny_batched import tiny_solve_kernel
rng = np.random.default_rng(0)
a = rng.standard_normal((21, 7, 7)) + 6 * np.eye(7)
b = rng.standard_normal((21, 7, 2))
x = np.zeros({x_shape})
info = np.zeros(21, dtype=np.int32)
emu.run_solve(tiny_solve_kernel("float64", 7, 2), a, b, x, info, sanitize="address")
ref = np.linalg.solve(a, b)
print("error", np.linalg.norm(x[:21] - ref) / np.linalg.norm(ref))
"""


def test_solver_and_gemm_are_clean_under_address_sanitizer():
    result, output = run(SOLVE_CASE.format(x_shape="(21, 7, 2)"), "address")
    assert result.returncode == 0 and "AddressSanitizer" not in output, output[-4000:]
    assert error_of(output) < 1e-12
    result, output = run(GEMM_CASE.format(mutate="", sanitize="address"), "address")
    assert result.returncode == 0 and "AddressSanitizer" not in output, output[-4000:]
    assert error_of(output) < 1e-5


def test_an_out_of_bounds_write_is_caught():
    """The kernel is told the batch is 21 but the output holds 20 problems: ASan must object."""
    code = SOLVE_CASE.format(x_shape="(20, 7, 2)").replace("x[:21]", "x[:20]").replace("ref) /", "ref[:20]) /")
    result, output = run(code, "address")
    assert result.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in output, output[-4000:]


REGISTER_CASE = """
import numpy as np
import kernels_emulator as emu
from nvmathpy.kernels.tiny_register import tiny_register_solve_kernel
rng = np.random.default_rng(1)
a = rng.standard_normal((37, 6, 6)) + 5 * np.eye(6)
a[5] = 0.0  # a singular system: the flag's atomic is exercised too
b = rng.standard_normal((37, 6, 1))
x, info, flag = np.zeros((37, 6, 1)), np.zeros(37, dtype=np.int32), np.zeros(1, dtype=np.uint64)
emu.run_solve(tiny_register_solve_kernel("float64", 6, 1), a, b, x, info, sanitize="{sanitize}", flag=flag, epoch=2)
ok = info == 0
ref = np.linalg.solve(a[ok], b[ok])
assert info[5] == 1 and ok.sum() == 36 and int(flag[0]) >> 32 == 2
print("error", np.linalg.norm(x[ok] - ref) / np.linalg.norm(ref))
"""


@pytest.mark.parametrize("sanitize", ["thread", "address"])
def test_register_solver_is_clean_under_the_sanitizers(sanitize):
    """The warp-staged loads and stores (a partial last warp: 37 systems) and the flag's atomic."""
    result, output = run(REGISTER_CASE.format(sanitize=sanitize), sanitize)
    name = "ThreadSanitizer" if sanitize == "thread" else "AddressSanitizer"
    assert result.returncode == 0 and name not in output, output[-4000:]
    assert error_of(output) < 1e-12
