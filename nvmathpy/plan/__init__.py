"""What every operation shares: the plan lifecycle, problem keys, options, autotuning,
wisdom (winners remembered on disk) and the plan cache (plans remembered in memory).

Nothing here knows any particular operation.
"""

from .autotune import EFFORTS, time_candidates
from .base import Candidate, Engine, Plan, Prepared
from .cache import PlanCache
from .options import as_options
from .problem import Problem
from .wisdom import Wisdom, cache_dir, default_wisdom

__all__ = [
    "EFFORTS",
    "Candidate",
    "Engine",
    "Plan",
    "PlanCache",
    "Prepared",
    "Problem",
    "Wisdom",
    "as_options",
    "cache_dir",
    "default_wisdom",
    "time_candidates",
]
