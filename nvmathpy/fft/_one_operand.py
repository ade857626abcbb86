"""What the FFT and DCT/DST plans share about their one operand: swapping it for another of
the planned signature (:meth:`OneOperandPlan.reset_operand`, also spelled ``reset_operands``).
"""

from __future__ import annotations

from typing import Any

from ..operands import Operand, wrap_matching
from ..plan import Plan

__all__ = ["OneOperandPlan"]


class OneOperandPlan(Plan):
    """A plan over one operand ``x``; subclasses bind a matching operand in :meth:`_swap_operand`."""

    _signature: Any

    def reset_operand(self, x: Any, /) -> None:
        """Point the plan at a new operand of the planned shape, dtype, strides and package.

        Raises
        ------
        OperandMismatchError
            If ``x`` differs from the planned operand in any of those.
        """
        self._check_alive("reset_operand")
        self._swap_operand(wrap_matching(x, self._signature), x)

    #: Same as :meth:`reset_operand` (the spelling other nvmathpy plans use).
    reset_operands = reset_operand

    def _swap_operand(self, operand: Operand, user: Any) -> None:
        """Bind ``operand`` (wrapped from the caller's ``user``), already known to match."""
        raise NotImplementedError
