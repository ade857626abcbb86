"""Side-by-side benchmarks: nvmathpy beside the library a user would otherwise call.

``python -m nvmathpy bench [matmul|fft|linalg|all] [--quick] [--json FILE] [--plot FILE.png]``
runs the suites in one process and reports medians and ratios. The scripts in the
repository's ``benchmarks/`` folder call the same suites. With ``--space cuda`` (or ``auto`` on a
machine with a usable GPU) the GPU suites run instead: CuPy operands, CUDA-event timing, CuPy
and torch as the peers.
"""

#: Suite name -> module under nvmathpy.bench defining ``cases(quick: bool)``.
SUITES = {"matmul": "suite_matmul", "fft": "suite_fft", "linalg": "suite_linalg"}
#: Suite name -> module under nvmathpy.bench defining ``cases(quick: bool, space: Space)`` on the GPU.
CUDA_SUITES = {"matmul": "suite_matmul_cuda", "fft": "suite_fft_cuda", "linalg": "suite_linalg_cuda"}
