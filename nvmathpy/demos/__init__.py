"""The workloads of ``python -m nvmathpy demo``: one module per operation.

Each module defines ``TITLE`` (one line) and ``run(echo)``, which runs a short, realistic
workload on the default execution space, checks the result against NumPy/SciPy, times it
beside the library a user would otherwise call, and reports through ``echo(str)``. A demo
returns ``True`` when its checks passed.
"""

#: Demo modules in the order the tour runs them.
DEMOS = ("matmul", "solvers", "fft")
