"""The exception types nvmathpy raises.

Numerical failures (singular or non-SPD matrices) raise :class:`LinAlgError`, which *is*
``numpy.linalg.LinAlgError`` so that SciPy and NumPy users catch the same class they know.
Everything else derives from :class:`NvmathpyError`, and the usual built-in base classes
(``ValueError``, ``TypeError``, ``RuntimeError``) are mixed in so that generic handlers keep
working.
"""

from __future__ import annotations

from numpy.linalg import LinAlgError

__all__ = [
    "NvmathpyError",
    "InvalidOperandError",
    "InvalidOptionError",
    "PlanStateError",
    "OperandMismatchError",
    "ExecutionSpaceUnavailableError",
    "MissingDependencyError",
    "LibraryError",
    "CandidatesFailedError",
    "LinAlgError",
]


class NvmathpyError(Exception):
    """Base class of every error nvmathpy raises (except :class:`LinAlgError`)."""


class InvalidOperandError(NvmathpyError, ValueError):
    """An operand has a shape, dtype, layout, device or package that the operation cannot take."""


class InvalidOptionError(NvmathpyError, ValueError):
    """A keyword argument or option has a value outside the allowed set."""


class PlanStateError(NvmathpyError, RuntimeError):
    """A plan phase was called out of order (e.g. ``execute()`` after ``free()``)."""


class OperandMismatchError(InvalidOperandError):
    """``reset_operands()`` was given operands that differ from the planned ones."""


class ExecutionSpaceUnavailableError(NvmathpyError, RuntimeError):
    """The requested execution space (e.g. CUDA) cannot be used on this machine."""


class MissingDependencyError(NvmathpyError, ImportError):
    """An optional library is needed for this call; the message names the extra to install."""


class CandidatesFailedError(NvmathpyError, RuntimeError):
    """Every candidate of a plan failed (to be prepared or to run); ``failures`` maps each
    candidate's label to its exception, and the message says why each failed."""

    def __init__(self, message: str, failures: "dict[str, BaseException] | None" = None):
        super().__init__(message)
        self.failures = dict(failures or {})


class LibraryError(NvmathpyError, RuntimeError):
    """A vendor library call failed; ``status`` holds the library's status name."""

    def __init__(self, message: str, *, status: str | None = None, code: int | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
