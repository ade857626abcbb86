"""The matmul engines by execution space: the factories a :class:`~.matmul_plan.Matmul` plan
builds its engine with, handing it the plan's resolved epilogue (:mod:`._resolved`).

Each engine module is imported only when an engine of its space is built.
"""

from __future__ import annotations

from typing import Any, Callable

from ...errors import ExecutionSpaceUnavailableError
from ...plan import Engine
from ._resolved import ResolvedEpilogue

__all__ = ["ENGINES", "engine_for"]


def _cpu_engine(space: Any, stream: Any, package: str, options: Any, alpha: Any, beta: Any,
                epilogue: ResolvedEpilogue | None) -> Engine:
    from .cpu._engine import CpuMatmulEngine

    return CpuMatmulEngine(alpha, beta, epilogue)


def _cuda_engine(space: Any, stream: Any, package: str, options: Any, alpha: Any, beta: Any,
                 epilogue: ResolvedEpilogue | None) -> Engine:
    # cuBLASLt reads alpha and beta from the problem's CUDA-only fields (see Matmul._cuda_fields)
    from .cuda._engine import CudaMatmulEngine

    return CudaMatmulEngine(device_id=space.device_id, stream=stream, package=package,
                            workspace_limit=options.workspace_limit, allow_tf32=options.allow_tf32,
                            epilogue=epilogue)


#: Engine factories by execution space name:
#: ``factory(space, stream, package, options, alpha, beta, epilogue)`` (``options``: the plan's
#: :class:`~.matmul_plan.MatmulOptions`; ``epilogue``: its
#: :class:`~._resolved.ResolvedEpilogue` or ``None``).
ENGINES: dict[str, Callable[..., Engine]] = {"cpu": _cpu_engine, "cuda": _cuda_engine}


def engine_for(space: Any, stream: Any, package: str, options: Any, alpha: Any, beta: Any,
               epilogue: ResolvedEpilogue | None) -> Engine:
    """The engine of execution ``space`` for a plan (arguments as :data:`ENGINES`' factories take).

    Raises
    ------
    ExecutionSpaceUnavailableError
        If this build has no engine for ``space``.
    """
    factory = ENGINES.get(space.name)
    if factory is None:
        raise ExecutionSpaceUnavailableError(f"matmul: no engine for execution space {space.name!r} in this build")
    return factory(space, stream, package, options, alpha, beta, epilogue)
