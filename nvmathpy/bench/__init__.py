"""Side-by-side benchmarks: nvmathpy beside the library a user would otherwise call.

``python -m nvmathpy bench [matmul|fft|linalg|all] [--quick] [--json FILE] [--plot FILE.png]``
runs the suites in one process and reports medians and ratios. The scripts in the
repository's ``benchmarks/`` folder call the same suites.
"""

#: Suite name -> module under nvmathpy.bench defining ``cases(quick: bool)``.
SUITES = {"matmul": "suite_matmul", "fft": "suite_fft", "linalg": "suite_linalg"}
