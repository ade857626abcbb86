"""The base class of the solver plans: operand intake, engine choice and operand swaps.

Every solver plan wraps its operands (NumPy, torch CPU, ...), picks the engine of its
execution space, casts to the LAPACK dtype and remembers how to convert results back into
the caller's package. ``reset_operands`` accepts only operands of the planned shape and
dtype (anything else raises :class:`~nvmathpy.errors.OperandMismatchError`).

``ExecutionCPU(num_threads=n)`` limits BLAS/LAPACK to ``n`` threads around every run, solve
and autotune of the plan (:func:`~nvmathpy.linalg.gemm.cpu._threads.limit_threads`; main
thread only, as for matmul).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, ClassVar, TypeVar

import numpy as np

from ....errors import OperandMismatchError, PlanStateError
from ....plan import Plan, Prepared
from ...gemm.cpu._threads import limit_threads
from .._dispatch import engine_for, plan_class
from ..cpu._engine import CPULapackEngine
from ..cpu._pool_threads import PLAN_FREE_CORES_FROM, on_free_cores_of
from .._operands import host_arrays

__all__ = ["SolverPlan", "alive", "matching", "with_threads"]

F = TypeVar("F", bound=Callable[..., Any])


def _raise_freed(name: str, *args: Any, **kwargs: Any) -> Any:
    raise PlanStateError(f"{name}() called on a freed plan; the plan was freed (free() or the end of its with "
                         "block): create a new one")


def alive(method: F) -> F:
    """Decorate a public plan method (or property getter) so that a call on a freed plan
    raises :class:`~nvmathpy.errors.PlanStateError` naming that method."""

    @functools.wraps(method)
    def wrapper(self: "SolverPlan", *args: Any, **kwargs: Any) -> Any:
        if self._freed:
            _raise_freed(f"{type(self).__name__}.{method.__name__}")
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def with_threads(method: F) -> F:
    """Decorate a plan method so it runs under the plan's thread limit (and raises naming the
    method when the plan was freed)."""

    @functools.wraps(method)
    def wrapper(self: "SolverPlan", *args: Any, **kwargs: Any) -> Any:
        if self._freed:
            _raise_freed(f"{type(self).__name__}.{method.__name__}")
        if self.num_threads is None:  # the common case, kept to one extra call
            return method(self, *args, **kwargs)
        return limit_threads(self.num_threads, method)(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class SolverPlan(Plan):
    """Shared constructor logic and operand swapping for the solver plans.

    Every plan takes ``execution``: ``None`` (follow the operand), ``"cpu"``, ``"cuda"``, or an
    :class:`~nvmathpy.ExecutionCPU` / :class:`~nvmathpy.ExecutionCUDA`. CUDA operands (and NumPy
    ones with ``execution="cuda"``, copied over and back) run on cuSOLVER: the plan is then its
    CUDA variant (:mod:`nvmathpy.linalg.solvers.cuda._plans`, which also takes ``stream=``).
    """

    #: The CPU engine of the concrete plan class.
    cpu_engine: ClassVar[CPULapackEngine]
    #: Whether :meth:`_closure_for` binds on a weak stand-in (see there).
    _bind_weakly: ClassVar[bool] = True

    def __new__(cls, *args: Any, **kwargs: Any) -> "SolverPlan":
        # CUDA operands (or execution="cuda") get the class's cuSOLVER variant (a subclass,
        # nvmathpy.linalg.solvers.cuda._plans), imported only then.
        first = args[0] if args else kwargs.get("a")
        if type(first) is not np.ndarray or kwargs.get("execution") is not None:
            cls = plan_class(cls, first, kwargs.get("execution"))
        return super().__new__(cls)

    def __init__(self, execution: Any, **arrays: Any):
        super().__init__()
        self._arrays, self._to_caller, space = host_arrays(execution, **arrays)
        self._engine = engine_for(space, self.cpu_engine)
        #: BLAS/LAPACK threads of every run (``ExecutionCPU(num_threads=...)``); None: library default.
        self.num_threads: int | None = getattr(space, "num_threads", None)
        #: How many factorizations (or decompositions) this plan has computed.
        self.factorizations = 0
        self._clear_derived()

    def _threads_field(self) -> dict[str, int]:
        """The problem-key field recording a thread limit (none when unlimited)."""
        return {} if self.num_threads is None else {"num_threads": self.num_threads}

    def _closure_for(self, prepared: Prepared) -> Callable[..., Any]:
        """``_bind``'s closure made on a weak stand-in of the plan. The solver closures use the plan
        (to store factors), and a plan -> ``_run`` -> plan cycle would keep every dropped plan
        and its factors alive until the cyclic garbage collector runs: ``LU(a).solve(b)`` in a
        loop then held several large factors and took fresh memory (page faults) on every
        call. A closure returning the plan returns the
        plan itself, not the stand-in. Plans whose closures read operands on every call
        (``_bind_weakly = False``) bind directly: they live in the plan cache, whose eviction
        frees them (which breaks the cycle)."""
        if not self._bind_weakly:
            return self._bind(prepared)
        plan = weakref.ref(self)
        run = _weak_stand_in(self)._bind(prepared)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = run(*args, **kwargs)
            return plan() if isinstance(result, _StandIn) else result

        return call

    def _install(self, prepared: Prepared, how: str) -> None:
        super()._install(prepared, how)
        self._run = self._on_threads(self._run)

    def _rebind(self) -> None:
        super()._rebind()
        if self._prepared is not None:
            self._run = self._on_threads(self._run)

    def _on_threads(self, run: Callable[..., Any]) -> Callable[..., Any]:
        """``run`` on the thread count asked for (``ExecutionCPU(num_threads=...)``), or, for CPU
        matrices from order :data:`..cpu._pool_threads.PLAN_FREE_CORES_FROM` on, on the cores
        free at each call's start (:func:`..cpu._pool_threads.on_free_cores_of`)."""
        if self.num_threads is not None or not isinstance(self._engine, CPULapackEngine):
            return limit_threads(self.num_threads, run)
        a = getattr(self, "_a", None)
        order = max(a.shape[-2:]) if isinstance(a, np.ndarray) and a.ndim >= 2 else 0
        return on_free_cores_of(run) if order >= PLAN_FREE_CORES_FROM else run

    autotune = with_threads(Plan.autotune)  # candidates are timed under the thread limit

    def _swap_in(self, name: str, new: Any, current: np.ndarray) -> np.ndarray:
        """Validate a replacement operand against the planned one and return it cast."""
        arrays, _, _ = host_arrays(None, **{name: new})
        return matching(name, arrays[name], current)

    def _bind(self, prepared: Prepared) -> Callable[..., Any]:
        compute = self._computation(prepared)
        to_caller = self._to_caller
        return lambda: to_caller(compute())

    def _computation(self, prepared: Prepared) -> Callable[[], Any]:
        """The native computation for ``prepared`` on the current operands."""
        raise NotImplementedError

    def free(self) -> None:
        """Release the plan and any factors it holds. Idempotent."""
        super().free()
        self._clear_derived()
        self._run = functools.partial(_raise_freed, f"{type(self).__name__}.execute")

    def _check_alive(self, phase: str) -> None:
        if self._freed:
            _raise_freed(f"{type(self).__name__}.{phase}")

    def _clear_derived(self) -> None:
        """Forget factors and results computed from the previous operands."""
        self._state = self._solve = self._result = None

    def reset_operands(self, a: Any = None) -> None:
        """Swap in a new matrix (same shape and dtype); the plan recomputes on next use."""
        if a is not None:
            self._a = self._swap_in("a", a, self._a)
            self._clear_derived()
            self._rebind()

    def _release(self) -> None:
        """Drop the references to the caller's arrays and to results, keeping only their
        shapes and dtypes (for a plan waiting in the plan cache: it must not keep large
        arrays alive). The next ``reset_operands`` brings real operands back."""
        for name in ("_a", "_b"):
            array = getattr(self, name, None)
            if isinstance(array, np.ndarray):
                setattr(self, name, np.broadcast_to(np.zeros((), array.dtype), array.shape))
        self._clear_derived()
        self._rebind()

    def _computed(self) -> Any:
        """The state of the last run on the current operands (planning and running if needed)."""
        if self._state is None:
            if not self.is_planned:
                self.plan()
            self._run()
        return self._state

    def execute(self) -> Any:
        """Run the planned computation on the current operands."""
        return self._run()


class _StandIn:
    """Marks the weak stand-ins of :func:`_weak_stand_in`."""


@functools.lru_cache(maxsize=None)
def _stand_in_class(cls: type) -> type:
    def __getattr__(self: Any, name: str) -> Any:  # what the class lacks: the plan's own attributes
        return getattr(object.__getattribute__(self, "_stand_in_for")(), name)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_stand_in_for")(), name, value)

    return type(f"WeakStandIn{cls.__name__}", (cls, _StandIn),
                {"__getattr__": __getattr__, "__setattr__": __setattr__, "__module__": cls.__module__})


def _weak_stand_in(plan: "SolverPlan") -> Any:
    """The plan as the closures it binds see it, without keeping it alive: an instance of a
    subclass of the plan's class (methods and ``super()`` work as on the plan) with nothing of
    its own, whose attribute reads and writes go to the plan through a weak reference."""
    stand_in = object.__new__(_stand_in_class(type(plan)))
    object.__setattr__(stand_in, "_stand_in_for", weakref.ref(plan))
    return stand_in


def matching(name: str, array: Any, current: Any) -> Any:
    """``array`` (a replacement for operand ``name``) checked against the planned ``current``:
    same shape, a dtype that casts safely to the plan's (cast if it differs)."""
    if array.shape != current.shape:
        raise OperandMismatchError(
            f"reset_operands: {name} has shape {array.shape}, the plan was made for {current.shape}; "
            "create a new plan for a new shape"
        )
    if array.dtype != current.dtype:
        if np.result_type(array.dtype, current.dtype) != current.dtype:
            raise OperandMismatchError(
                f"reset_operands: {name} has dtype {array.dtype}, the plan computes in {current.dtype}"
            )
        array = array.astype(current.dtype)
    return array
