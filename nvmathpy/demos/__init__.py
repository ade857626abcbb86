"""The workloads of ``python -m nvmathpy demo``: one module per operation and execution space.

Each CPU module (``matmul``, ``solvers``, ``fft``) defines ``TITLE`` (one line) and ``run(echo)``,
which runs a short, realistic workload on the CPU, checks the result against NumPy/SciPy, times
it beside the library a user would otherwise call, and reports through ``echo(str)``. Its GPU
twin (``matmul_cuda``, ...) defines ``TITLE`` and ``run(echo, space)``: the same tour on CuPy
arrays, checked against float64 NumPy/SciPy on the host and timed (CUDA events) beside CuPy and
torch. A demo returns ``True`` when its checks passed. :mod:`._space` decides where they run.
"""

#: Demo modules in the order the tour runs them.
DEMOS = ("matmul", "solvers", "fft")


def module_name(name: str, space_name: str) -> str:
    """The module under nvmathpy.demos that runs demo ``name`` on ``"cpu"`` or ``"cuda"``."""
    return name if space_name == "cpu" else f"{name}_cuda"
