"""The package logger: ``logging.getLogger("nvmathpy")`` with a NullHandler.

INFO records phase decisions (which candidate won and by how much); DEBUG records details.
Hot paths must check ``logger.isEnabledFor(...)`` before formatting anything.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("nvmathpy")
logger.addHandler(logging.NullHandler())
