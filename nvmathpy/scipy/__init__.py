"""SciPy-compatible namespaces: :mod:`nvmathpy.scipy.linalg` and :mod:`nvmathpy.scipy.fft`.

Same names, signatures, defaults and return conventions as SciPy, backed by nvmathpy plans.
This compatibility layer is a leaf: nothing else in nvmathpy imports it.
"""
