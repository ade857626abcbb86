"""The CUDA solver engine: cuSOLVER/cuBLAS routes, layout arithmetic, tiny generated kernels,
device operands, and the CUDA plans and one-call functions.

Importing this package fills the registries of :mod:`.._dispatch` (plans, functions, engine) and
the prepared calls' builders (:mod:`._prepared`).
"""

from . import _engine, _functions, _plans, _prepared_calls  # noqa: F401  (each registers its CUDA pieces)
